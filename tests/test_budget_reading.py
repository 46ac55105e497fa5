"""Notebook 02's doorway half (helpers.budget_reading) and the supervised positive control (helpers.budget_control):
the opening probe on scripted players (optimum 2, its 25 % random moves 1.5, every blind player 0), the reading per
seed and against an exact reference by t-interval, the findings, and the control on the smoke tier."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import base_model, budget_control, budget_curve, budget_reading, config, models, scripted, store
from helpers.envs import doorway
from helpers.rollout import ChatFormat


@pytest.fixture(scope="module")
def setting():
    smoke, cpu = config.load("smoke"), config.load("cpu")
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    f = cpu.env.frozenlake
    tasks = doorway.tasks(
        "test",
        None,
        0,
        size=f.size,
        hole_p=f.hole_p,
        t_max=f.t_max,
        success_rate=0.55,
        gamma=f.gamma,
        n_train=20,
        n_test=10,
        map_seed=0,
    )
    return cpu, tok, tasks, ChatFormat(tok)


@pytest.mark.parametrize(
    ("kind", "noisy", "expected"),
    [
        ("optimum", False, 2.0),
        ("optimum", True, 1.5),
        ("habit", False, 0.0),
        ("blind_t_max", False, 0.0),
        ("blind_mix", False, 0.0),
    ],
)
def test_opening_responsiveness_of_scripted_players(setting, kind, noisy, expected):
    cpu, tok, tasks, chat = setting
    player = scripted.ScriptedPolicy.from_config(cpu, kind, tok, noisy)
    table = budget_reading.opening_table(tasks, budget_reading.opening_probs(player, tasks, chat))
    assert (table["h_star"] == 2).all()
    assert table["responsiveness"].to_numpy() == pytest.approx(np.full(len(tasks), expected), abs=1e-9)


def test_blind_players_on_doorways_rush_or_press(setting):
    """The scripted players know the doorway ice: the blind policy for the mix always rushes, the habit and the blind
    policy for T_max always press."""
    cpu, tok, tasks, chat = setting
    probs = {
        k: budget_reading.opening_probs(scripted.ScriptedPolicy.from_config(cpu, k, tok, False), tasks, chat)
        for k in ("blind_mix", "blind_t_max", "habit")
    }
    t = tasks[0]
    mv = doorway.moves(t.payload["desc"])
    assert probs["blind_mix"][(t.task_id, 8)][mv["rush"]] == pytest.approx(1.0)
    assert probs["blind_t_max"][(t.task_id, 1)][mv["press"]] == pytest.approx(1.0)
    assert probs["habit"][(t.task_id, 1)][mv["press"]] == pytest.approx(1.0)


def test_reading_per_seed_is_a_t_interval_over_seeds():
    methods = {"budgetmix": ["budgetmix-s0", "budgetmix-s1", "budgetmix-s2"], "grpo": ["grpo-s0", "grpo-s1"]}
    per = {
        "base": 0.1,
        "budgetmix-s0": 0.9,
        "budgetmix-s1": 1.1,
        "budgetmix-s2": 1.0,
        "grpo-s0": 0.1,
        "grpo-s1": 0.1,
    }
    r = budget_reading.reading(per, methods)
    assert r["budgetmix"]["diff"] == pytest.approx(0.9) and r["budgetmix"]["excludes_zero"]
    assert r["budgetmix"]["per_seed"] == pytest.approx([0.8, 1.0, 0.9])
    assert r["grpo"]["diff"] == pytest.approx(0.0) and not r["grpo"]["excludes_zero"]


def test_success_against_an_exact_reference():
    table = pd.DataFrame(
        [
            {"method": "budgetmix", "fraction": 1.0, "per_seed": [0.80, 0.82, 0.78]},
            {"method": "grpo", "fraction": 1.0, "per_seed": [0.70, 0.72, 0.71]},
        ]
    )
    v = budget_reading.vs_reference(table, {"rush": {"1": 0.71}}, "rush")
    assert v["budgetmix"]["1"]["diff"] == pytest.approx(9.0) and v["budgetmix"]["1"]["excludes_zero"]
    assert v["grpo"]["1"]["diff"] == pytest.approx(0.0) and not v["grpo"]["1"]["excludes_zero"]


def _metrics(diff: float, low: float, high: float, control: float) -> dict:
    arm = {
        "per_agent": {"base": 0.1, "optimum": 2.0},
        "by_seed": {
            "budgetmix": {
                "diff": diff,
                "low": low,
                "high": high,
                "excludes_zero": low > 0 or high < 0,
                "per_seed": [diff] * 5,
                "n_seeds": 5,
            }
        },
    }
    ref = {"0.25": 0.6, "1": 0.7}
    return {
        "gains_paired": {
            "budgetmix - grpo": {"0.25": {"low": 1.0, "high": 9.0}, "1": {"low": -3.0, "high": 2.0}}
        },
        "budget_probe": {"agents": {}},
        "doorway": {
            "n_maps": 25,
            "success_rate": 0.55,
            "h_star": 2,
            "mix_gap": 10.9,
            "success": {"budgetmix": ref},
            "references": {"optimum": ref, "rush (blind for the mix)": ref},
            "vs_rush": {},
            "reading": {"openings": arm},
            "control": {
                "steps": 450,
                "seconds": 60.0,
                "openings": {"mean": control, "low": control - 0.1, "high": control + 0.05},
                "swap": None,
                "base_openings": 0.1,
                "target": 1.5,
            },
        },
    }


@pytest.mark.parametrize(
    ("diff", "low", "high", "control", "verdict", "met"),
    [
        (1.2, 0.9, 1.5, 1.99, "learns to read its budget", "met:"),
        (0.03, 0.01, 0.05, 1.99, "by a sliver", "met:"),
        (0.01, -0.02, 0.04, 1.2, "without reading the budget", "NOT met"),
    ],
)
def test_the_headline_follows_the_intervals(diff, low, high, control, verdict, met):
    m = _metrics(diff, low, high, control)
    head = budget_reading.headline(m)
    assert head.startswith("**In one sentence:**") and verdict in head and "at 25 % of T_max" in head
    assert met in "\n".join(budget_reading.findings(m))


def test_no_doorway_maps_no_doorway_findings():
    assert budget_reading.findings({}) == [] and budget_reading.headline({}) == ""


def test_the_supervised_control_on_the_smoke_tier_is_recorded(tmp_path):
    """A few SFT steps on the smoke base: the numbers are recorded under their recipe and a rerun reads them."""
    cfg = config.load("smoke")
    with store.results_at(tmp_path):
        out = store.open_run(cfg.results_name, "02_budgetmix_training", cfg, {"profile": "smoke"})
        first = budget_control.run(cfg, out)
        assert first["steps"] == cfg.probing.control_obs_steps + cfg.probing.control_steps
        assert first["n_maps"] == round(0.25 * cfg.env.frozenlake.n_test)
        assert -2 <= first["openings"]["mean"] <= 2 and first["swap"] is None
        recorded = json.loads(out.path("doorway_control.json").read_text())
        assert recorded["recipe"] == first["recipe"]
        assert budget_control.run(cfg, out) == recorded  # read, not trained again
    demos = budget_control.demonstrations(cfg, 5, seed=0)
    assert all(any(m["role"] == "assistant" for m in d) for d in demos)


def test_the_curve_profile_is_the_cpu_profile_but_for_its_compute():
    """configs/cpu_budget_curve.yaml differs from cpu.yaml only in train.steps, save_steps, seeds and eval_every
    (and its name): the same base, testbed and RL recipe, run longer; and in micro_batch_size (32, what it ran with
    before issue 51 cut cpu's to 8: the same gradient up to summation order)."""
    cpu, curve = config.load("cpu").to_dict(), config.load("cpu_budget_curve").to_dict()
    varied = {"steps", "save_steps", "seeds", "eval_every", "micro_batch_size"}
    assert {k: v for k, v in cpu["train"].items() if k not in varied} == {
        k: v for k, v in curve["train"].items() if k not in varied
    }
    assert {k: v for k, v in cpu.items() if k not in ("train", "profile")} == {
        k: v for k, v in curve.items() if k not in ("train", "profile")
    }
    c = config.load("cpu_budget_curve")
    assert c.train.steps == 5 * config.load("cpu").train.steps
    assert budget_curve.checkpoints(c) == [0, 20, 60, 120, 180, 240, 300]
    assert base_model.folder_name(c) == base_model.folder_name(config.load("cpu"))


def test_the_curve_summary_is_a_t_interval_per_step_and_its_verdict_needs_the_interval():
    cfg = config.load("smoke")
    recs = [
        {
            "seed": s,
            "step": step,
            "responsiveness": r,
            "p_rush_long": 0.1 + step / 100,
            "success": {"0.25": 0.5, "0.5": 0.6, "0.75": 0.7, "1": 0.8},
        }
        for step, rs in ((0, [0.0, 0.0, 0.0]), (6, [0.3, 0.5, 0.4]))
        for s, r in zip(range(3), rs, strict=True)
    ]
    m = budget_curve.summary(cfg, recs)
    r = m["steps"]["6"]["responsiveness"]
    assert r["mean"] == pytest.approx(0.4) and r["low"] < 0.4 < r["high"] and r["n"] == 3
    m["train_steps"], m["recipe_steps"] = 6, 3
    assert "More compute teaches" in "\n".join(budget_curve.findings(m))
    for rec in recs:
        rec["responsiveness"] = 0.0 if rec["step"] == 0 else rec["responsiveness"] - 0.4
    m = budget_curve.summary(cfg, recs) | {"train_steps": 6, "recipe_steps": 3}
    assert "does not teach" in "\n".join(budget_curve.findings(m))
