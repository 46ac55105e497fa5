"""The headroom decomposition (helpers.headroom): the best budget-blind policy found by coordinate ascent equals
brute force on small maps, its success agrees with the kit's own policy evaluation, and the gaps are ordered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers import budgetmix, config, headroom
from helpers.envs import Task
from helpers.envs import frozenlake as fl


def _task(size: int, seed: int, rate: float = 0.75, hole_p: float = 0.25) -> Task | None:
    desc = fl.random_map(size, hole_p, seed)
    if desc is None:
        return None
    payload = {"desc": list(desc), "is_slippery": True, "success_rate": rate, "gamma": 0.95}
    return Task(task_id=f"small-{size}-{seed}", env="frozenlake", payload=payload, t_max=8)


def _small_maps(n: int) -> list[Task]:
    """Maps with at most 8 movable squares (3x3, and 3x3-sized 4x4 maps with many holes), several slip rates."""
    out, seed = [], 0
    while len(out) < n:
        t = _task(
            3 if seed % 3 else 4, seed, rate=(0.75, 0.6, 0.9)[seed % 3], hole_p=0.25 if seed % 3 else 0.5
        )
        seed += 1
        if t is not None and len(headroom._tables(t)[3]) <= 8:
            out.append(t)
    return out


@pytest.mark.parametrize("horizons", [2, 3, 5, 8, {2: 0.5, 6: 0.5}, {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}])
def test_coordinate_ascent_finds_the_brute_force_optimum_on_small_maps(horizons):
    for task in _small_maps(24):
        _, found = headroom.best_blind_policy(task, horizons)
        _, exact = headroom.brute_force_blind(task, horizons)
        assert found == pytest.approx(exact, abs=1e-12), (task.task_id, horizons)


def test_blind_success_agrees_with_the_kits_policy_evaluation():
    rng = np.random.default_rng(0)
    for task in _small_maps(6):
        n = len(task.payload["desc"]) ** 2
        pi = rng.integers(0, 4, size=n)
        curve = headroom.blind_success(task, pi, 8)
        one_hot = np.eye(4)[pi]
        assert curve == pytest.approx([fl.policy_success(task, one_hot, T) for T in range(1, 9)], abs=1e-12)


def test_a_map_that_needs_the_budget_has_budget_awareness_headroom():
    """A hand-made map with a route along holes and a safer detour: the optimum changes route as turns run out,
    which no blind policy can, so budget awareness is worth points, and the policies are ordered (blind for T_max
    <= blind tuned to T <= optimum at every T). (The noise gap has no sign: random moves can help a habit.)"""
    desc = ["SFFF", "HFHF", "FFFG", "FFFF"]
    task = Task(
        "risky", "frozenlake", {"desc": desc, "is_slippery": True, "success_rate": 0.75, "gamma": 0.95}, 12
    )
    df = headroom.table([task], [3, 4, 6, 12], 12, epsilon=0.25, habit_gamma=0.99)
    assert (df["blind_t_max"] <= df["blind_own_budget"] + 1e-12).all()
    assert (df["blind_own_budget"] <= df["optimum"] + 1e-12).all()
    assert df["budget_awareness_points"].max() > 1.0
    assert df.loc[12, "budget_awareness_points"] == pytest.approx(
        100 * (df.loc[12, "optimum"] - df.loc[12, "blind_t_max"])
    )


def test_brute_force_refuses_a_map_too_large_to_enumerate():
    task = _task(6, 1)
    with pytest.raises(ValueError, match="at most 8 movable squares"):
        headroom.brute_force_blind(task, 4)


def test_headroom_captured_gives_0_to_the_blind_policy_100_to_the_optimum_and_no_share_to_a_tiny_headroom():
    """Notebook 02's share of the budget-awareness headroom (`budgetmix.headroom_captured`): a method whose every seed
    succeeds exactly as the best blind policy for T_max captures 0 %, one that succeeds as the optimum 100 %; the
    budget-blind references carry their exact shares; where the headroom is under MIN_HEADROOM points there is none."""
    cfg = config.load("cpu")
    payload = {
        "desc": ["SFFFG", "FHHHF", "FFFFF", "FFFFF", "FFFFF"],
        "is_slippery": True,
        "success_rate": 0.8,
    }
    tasks = [Task("detour", "frozenlake", payload, 16)]  # REFERENCE.md's risky route beside a safe detour
    cells = {(0.25, 4): tasks, (0.5, 8): tasks, (1.0, 16): tasks}
    h = headroom.table(tasks, [4, 8, 16], 16, cfg.sft.epsilon, cfg.sft.habit_gamma, cfg.seed)
    rows = []
    for (f, b), _ in cells.items():
        for method, col in (("blindlike", "blind_t_max"), ("optimal", "optimum")):
            rows.append({"method": method, "fraction": f, "per_seed": [float(h.loc[b, col])] * 3})
    ev = budgetmix.Evaluation(tasks, cells, {"blindlike": ["b"], "optimal": ["o"]}, pd.DataFrame())
    got = budgetmix.headroom_captured(cfg, ev, pd.DataFrame(rows)).set_index(["who", "fraction"])
    points = 100 * (h["optimum"] - h["blind_t_max"])
    for f, b in cells:
        if points[b] < budgetmix.MIN_HEADROOM:
            assert (
                got.loc[("optimal", f)].isna()["share_pct"] and got.loc[("blind_mix", f)].isna()["share_pct"]
            )
            continue
        assert got.loc[("blindlike", f), "share_pct"] == pytest.approx(0, abs=1e-9)
        assert got.loc[("optimal", f), "share_pct"] == pytest.approx(100)
        assert got.loc[("optimal", f), "headroom_points"] == pytest.approx(points[b])
        mix = 100 * (h.loc[b, "blind_mix"] - h.loc[b, "blind_t_max"]) / (points[b] / 100)
        assert got.loc[("blind_mix", f), "share_pct"] == pytest.approx(mix)
    assert (points < budgetmix.MIN_HEADROOM).any() and (points >= budgetmix.MIN_HEADROOM).any()
    m = budgetmix.captured_metrics(got.reset_index())
    assert set(m["shares"]) == {"blindlike", "optimal", *budgetmix.CAPTURE_REFERENCES}
    lines = budgetmix.captured_findings({"headroom_captured": m})
    assert len(lines) == 2 and "100 %" in lines[1] and " / - " in lines[1]
