"""The RL loop: budgets per task group, the masked loss, a short run, and resumption from a checkpoint."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch

from helpers import base_model, budget, config, store, train
from helpers.rollout import Trajectory


@pytest.mark.parametrize(
    ("t_max", "expected"),
    [
        (1, [1]),
        (4, [1, 2, 3, 4]),
        (8, [1, 2, 3, 4, 5, 6, 7, 8]),
        (12, [1, 2, 4, 5, 6, 7, 8, 10, 11, 12]),
        (50, [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]),
    ],
)
def test_budgetmix_candidates(t_max, expected):
    assert budget.budgetmix_candidates(t_max) == expected


def test_one_budget_per_task_group_shared_by_its_samples():
    cfg = config.load("smoke")
    rng = np.random.default_rng(0)
    budgets = train.step_budgets("budgetmix", 8, 500, rng)
    assert set(budgets) == set(budget.budgetmix_candidates(8))  # every candidate drawn, nothing else
    assert train.step_budgets("full", 8, 3, rng) == [8, 8, 8]
    with pytest.raises(ValueError, match="budget mode"):
        train.step_budgets("half", 8, 3, rng)
    # in a rollout, the G samples of a task share its budget and its GRPO group
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    pol = HFPolicy.from_pretrained(base_model.path_of(cfg))
    tasks = load_tasks("frozenlake", "train", n=3, **settings(cfg))
    trajs = rollout(pol, "frozenlake", tasks, [2, 5, 3], 4, Sampling(1.0, 1.0, 6), seed=0, step_quality=False)
    for task, b in zip(tasks, [2, 5, 3], strict=True):
        mine = [t for t in trajs if t.task_id == task.task_id]
        assert len(mine) == 4 and {t.budget for t in mine} == {b} and len({t.group for t in mine}) == 1
        assert all(t.n_turns <= b for t in mine)


def test_budgets_follow_each_tasks_own_t_max():
    rng = np.random.default_rng(1)
    budgets = train.task_budgets("budgetmix", [4, 30, 4, 12], rng)
    for b, t_max in zip(budgets, [4, 30, 4, 12], strict=True):
        assert b in budget.budgetmix_candidates(t_max)
    assert train.task_budgets("full", [4, 30], rng) == [4, 30]
    same = train.task_budgets("budgetmix", [8, 8, 8], np.random.default_rng(2))
    assert same == train.step_budgets("budgetmix", 8, 3, np.random.default_rng(2))


def test_reward_is_zero_when_the_budget_runs_out_unfinished():
    t = Trajectory("t", "frozenlake", "m", budget=3, t_max=8, seed=0, sample=0, reward=1.0, exhausted=True)
    assert train.rl_reward(t) == 0.0
    t.exhausted = False
    assert train.rl_reward(t) == 1.0


def _final_weights(path):
    from helpers import models

    m, _ = models.load(path)
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_short_run_has_finite_loss_and_resumes_to_the_same_state(tmp_path, monkeypatch):
    cfg = config.load("smoke", train__steps=3, train__checkpoint_every=2, train__eval_every=3)
    # uninterrupted run
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "a"))
    base = base_model.path_of(cfg)
    straight = train.rl_train(cfg, "full")
    rows = train.read_metrics(cfg, "full")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for r in rows[1:]:
        assert all(math.isfinite(r[k]) for k in ("pg_loss", "kl", "entropy", "grad_norm", "clip_frac"))
    assert any(r["grad_norm"] > 0 for r in rows[1:]), "no learning signal in three steps"
    assert "r_single" in rows[0] and "r_single" in rows[3]

    # interrupted after 2 steps (a checkpoint exists), then resumed; the same base is reused
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "b"))
    (tmp_path / "b" / "smoke" / "models").mkdir(parents=True)
    shutil.copytree(base, store.models_dir("smoke") / base.name)
    shutil.copy(next(base.parent.glob("probe-pool-*.jsonl")), store.models_dir("smoke"))
    assert not (train.rl_train(cfg, "full", max_steps=2) / "config.json").exists()
    out = train.rl_dir(cfg, "full")
    assert sorted(p.name for p in out.glob("checkpoint-*.pt")) == ["checkpoint-000002.pt"]
    with store.Records(out / "metrics.jsonl").path.open(
        "a"
    ) as f:  # a step logged after the checkpoint, then a crash
        f.write('{"step": 3, "success": 0.5}\n{"step": 4')
    with pytest.warns(UserWarning, match="torn"):
        resumed = train.rl_train(cfg, "full")
    a, b = _final_weights(straight), _final_weights(resumed)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)
    again = train.read_metrics(cfg, "full")
    assert [r["step"] for r in again] == [0, 1, 2, 3]
    assert again[3]["success"] == rows[3]["success"]
    # a finished run is reused, not retrained
    assert train.rl_train(cfg, "full") == resumed


def test_the_step_0_monitor_is_computed_once_per_base_rl_seed_and_policy_name(tmp_path, monkeypatch):
    """Issue 51: at step 0 every run from one base with one RL seed and one rollout policy name (its budget mode:
    the probe pool's draws follow the name) watches the base on the same maps and draws, so the first run computes
    the row and the others read it (bit for bit, in its key order; only `monitor_s`, the seconds this run spent,
    differs); another RL seed, policy name or monitor size is another file."""
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    cfg = config.load("smoke")
    calls = []

    class Named:
        def __init__(self, name: str):
            self.name = name

    def watch(policy):
        calls.append(policy.name)
        return {"eval_success": 0.25, "r_single": None, "r_single_by_state": [0.1, 0.7000000000000001]}

    first = train.first_watch(cfg, 0, watch, Named("full"))
    again = train.first_watch(cfg, 0, watch, Named("full"))
    assert calls == ["full"]
    assert list(again) == list(first) and list(first)[-1] == "monitor_s"
    assert {k: v for k, v in again.items() if k != "monitor_s"} == {
        k: v for k, v in first.items() if k != "monitor_s"
    }
    train.first_watch(cfg, 1, watch, Named("full"))
    train.first_watch(cfg, 0, watch, Named("budgetmix"))
    assert calls == ["full", "full", "budgetmix"]
    bigger = config.load("smoke", train__eval_tasks=cfg.train.eval_tasks + 1)
    assert train.monitor_path(bigger, 0, "full") != train.monitor_path(cfg, 0, "full")
