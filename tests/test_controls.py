"""Issue 27: the symmetric controls (every RL seed decoded as the sharpened base is), base-side draws of each RL seed
its own (so seed differences are independent replicates, GRPO's and BudgetMix's seed k on the same draws), and the
paired-by-seed verdicts with their minimum detectable effect, on hand-made data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import budgetmix, config, controls, matched, metrics, probing, stats


@pytest.fixture
def roster(monkeypatch):
    """The smoke roster with three RL seeds, nothing trained: model paths and the sharpened temperature stubbed."""
    cfg = config.load("smoke", train={"seeds": [0, 1, 2]})
    monkeypatch.setattr(controls.base_model, "path_of", lambda cfg: Path("/models/base"))
    monkeypatch.setattr(controls.train, "trained_model", lambda cfg, mode, s: Path(f"/models/{mode}-{s}"))
    monkeypatch.setattr(controls, "sharpened", lambda cfg: {"temperature": 0.0})
    return cfg, controls.agents(cfg)


def test_the_roster_has_a_sharpened_twin_of_every_rl_seed(roster):
    cfg, agents = roster
    for method in controls.MODE_NAMES.values():
        for k in cfg.train.seeds:
            rl, twin = agents[f"{method}-s{k}"], agents[f"{method}-s{k}-sharp"]
            assert twin.path == rl.path and rl.temperature is None
            assert (
                twin.temperature == agents["sharp"].temperature == 0.0
            )  # the same rule as the sharpened base
    m = controls.methods(agents)
    assert m["grpo-sharp"] == ["grpo-s0-sharp", "grpo-s1-sharp", "grpo-s2-sharp"]
    assert m["budgetmix-sharp"] == ["budgetmix-s0-sharp", "budgetmix-s1-sharp", "budgetmix-s2-sharp"]
    assert m["grpo"] == ["grpo-s0", "grpo-s1", "grpo-s2"] and m["base"] == ["base"]
    assert set(controls.agents(cfg, symmetric=False)) == {n for n in agents if not n.endswith("-sharp")}
    assert controls.seeds_of(["grpo-s10", "grpo-s2", "grpo-s2-sharp", "gigpo-s1"], "grpo") == [
        "grpo-s2",
        "grpo-s10",
    ]


def test_every_rl_seed_has_its_own_base_side_group(roster):
    _, agents = roster
    groups = controls.by_seed(agents)
    assert sorted(groups) == [0, 1, 2]
    assert set(groups[1]) == {
        "base-s1",
        "sharp-s1",
        "grpo-s1",
        "budgetmix-s1",
        "grpo-s1-sharp",
        "budgetmix-s1-sharp",
    }
    assert groups[1]["base-s1"].path == agents["base"].path and groups[1]["base-s1"].name == "base-s1"
    assert groups[1]["sharp-s1"].temperature == agents["sharp"].temperature
    streams = {controls.stream(1000, k) for k in groups}
    assert len(streams) == 3  # independent between seeds
    assert controls.stream(1000, 1) == controls.stream(1000, 1) != controls.stream(2000, 1)
    m = controls.methods([n for g in groups.values() for n in g])
    assert m["base"] == ["base-s0", "base-s1", "base-s2"] and m["sharp"] == [
        "sharp-s0",
        "sharp-s1",
        "sharp-s2",
    ]


def test_notebook_02_draws_the_base_side_per_seed_and_pairs_grpo_with_budgetmix(roster, monkeypatch):
    cfg, _ = roster
    calls = []

    def fake_cells(models, env, cells, n, sampling, seed, records, **kw):
        calls.append((set(models), seed))
        return {
            key: pd.DataFrame({"model": list(models), "task_id": "t", "budget": key[1], "success": True})
            for key in cells
        }

    monkeypatch.setattr(budgetmix.evaluation, "evaluate_cells", fake_cells)

    class Out:
        def records(self, name):
            return None

    ev = budgetmix.evaluate(cfg, Out())
    seeds = [seed for _, seed in calls]
    assert (
        len(set(seeds)) == len(cfg.train.seeds) == len(calls)
    )  # seed 0's base-side draws differ from seed 1's
    for k, (names, seed) in enumerate(calls):
        assert {f"base-s{k}", f"grpo-s{k}", f"budgetmix-s{k}"} <= names  # one pair, one stream
        assert seed == controls.stream(cfg.seed + 1000, k)
    assert ev.methods["base"] == [f"base-s{k}" for k in cfg.train.seeds]


def test_notebook_04_records_each_seeds_base_trajectories_on_its_own_stream(roster, monkeypatch):
    cfg, agents = roster
    seen = {}
    monkeypatch.setattr(
        matched.evaluate,
        "recorded_trajectories",
        lambda profile, name, agent, env, tasks, budget, n, sampling, seed: seen.setdefault(name, seed),
    )
    every = agents | {n: a for g in controls.by_seed(agents).values() for n, a in g.items()}
    for name in ("base-s0", "base-s1", "grpo-s0", "grpo-s1"):
        matched.recorded(cfg, every, [], name)
    assert seen["probe-base-s0"] != seen["probe-base-s1"]
    assert seen["probe-base-s0"] == seen["probe-grpo-s0"] and seen["probe-base-s1"] == seen["probe-grpo-s1"]
    assert matched.roles("grpo-s1") == (
        ("base", "base-s1"),
        ("sharp", "sharp-s1"),
        ("rl", "grpo-s1"),
        ("rl_sharp", "grpo-s1-sharp"),
    )


def test_paired_verdict_on_hand_made_numbers():
    """Seed differences 1, 2, 3 (two tasks each, no within-seed spread): t-interval 2 +- 4.302653 / sqrt(3); the
    design's SD is the seed SD (1), the MDE that of 3 seeds."""
    a = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    v = stats.paired_verdict(a, np.zeros_like(a))
    assert v["diff"] == pytest.approx(2.0) and v["excludes_zero"] is False
    assert (v["low"], v["high"]) == pytest.approx(
        (2 - 4.302653 / np.sqrt(3), 2 + 4.302653 / np.sqrt(3)), abs=1e-5
    )
    assert v["sd_diff"] == pytest.approx(1.0) and v["mde"] == pytest.approx(stats.mde(1.0, 3))
    assert stats.power(v["mde"], 1.0, 3) == pytest.approx(0.8)
    assert stats.paired_verdict([1.0, 1.0], [0.0, 0.0])["mde"] == 0.0  # no spread at all
    pts = stats.scaled(v, 100)
    assert pts["diff"] == pytest.approx(200) and pts["mde"] == pytest.approx(100 * v["mde"])
    # units that differ between seeds: within variance 1 (units -1/+1 around each mean), seed means 1, 2, 3
    units = [np.array([0.0, 2.0]), np.array([1.0, 3.0]), np.array([2.0, 4.0])]
    vc = stats.unit_variance_components(units)
    assert vc["sd_within"] == pytest.approx(np.sqrt(2.0)) and vc["n_tasks"] == pytest.approx(2.0)
    assert vc["sd_between"] == pytest.approx(0.0)  # seed variance 1 = within 2 / 2 units
    u = stats.paired_verdict([1.0, 2.0, 3.0], [0.0] * 3, units=units)
    assert u["sd_diff"] == pytest.approx(1.0) and u["diff"] == pytest.approx(2.0)


def test_paired_difference_pairs_seed_k_with_seed_k():
    per_task = pd.DataFrame(
        {
            "model": ["grpo-s0", "grpo-s0", "grpo-s1", "grpo-s1", "base-s0", "base-s0", "base-s1", "base-s1"],
            "task_id": ["a", "b"] * 4,
            "success": [1.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.0, 0.5],
            "fraction": 1.0,
        }
    )
    out = metrics.paired_difference(
        per_task, ["grpo-s0", "grpo-s1"], ["base-s0", "base-s1"], "success", ["fraction"], scale=100
    )
    row = out.iloc[0]
    assert row["per_seed"] == pytest.approx([25.0, 75.0]) and row["diff"] == pytest.approx(50.0)
    assert row["n_seeds"] == 2 and row["mde"] > 0 and not row["excludes_zero"]


def test_seed_summary_counts_ties_wins_and_losses_and_the_mean_difference():
    """Seed 0: rl beats base at 1 live state, ties at 2, loses at 1 (and one dead state); seed 1: wins 2, ties 2.
    Ties count as 0 in the mean difference."""
    s0 = pd.DataFrame(
        {
            "rl": [0.9, 0.5, 0.5, 0.1, 0.0],
            "base": [0.5, 0.5, 0.5, 0.3, 0.0],
            "dead": [False, False, False, False, True],
        }
    )
    s1 = pd.DataFrame({"rl": [1.0, 0.8, 0.4, 0.4], "base": [0.5, 0.6, 0.4, 0.4], "dead": False})
    per_state = pd.concat([s0.assign(rl_seed=0), s1.assign(rl_seed=1)], ignore_index=True)
    out = probing.seed_summary(per_state, [("rl", "base")], n_boot=50)["rl_vs_base"]
    assert out["better_per_seed"] == [0.25, 0.5] and out["tie_per_seed"] == [0.5, 0.5]
    assert out["worse_per_seed"] == [0.25, 0.0]
    assert out["tie"] == pytest.approx(0.5) and out["worse"] == pytest.approx(0.125)
    assert out["mean_diff_per_seed"] == pytest.approx([0.05, 0.175])
    assert out["mean_diff"] == pytest.approx(0.1125)
    assert out["paired"]["diff"] == pytest.approx(0.1125) and out["paired"]["n_seeds"] == 2
    assert out["paired"]["mde"] > 0
