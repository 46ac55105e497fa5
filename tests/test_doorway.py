"""Doorway maps (issue 50): the generator, what the DP says of them, and their share of the FrozenLake tasks."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import budget, config
from helpers.envs import Task, doorway, load_tasks, settings
from helpers.envs import frozenlake as fl


def _task(desc, rate=0.55, t_max=8) -> Task:
    return doorway._task(desc, rate, t_max)


def test_generated_maps_have_the_shape_in_every_symmetry_and_s_reaches_only_g_or_the_hole():
    seen = set()
    for seed in range(64):
        desc = doorway.generate(4, 0.3, seed)
        assert doorway.is_doorway(desc)
        mv = doorway.moves(desc)
        seen.add((fl.start_state(desc), mv["rush"], mv["press"]))
        # from S every move ends the episode (G or the hole) or stays: the decoration is unreachable
        env = fl._gym_template(tuple(desc), True, 0.55)
        s = fl.start_state(desc)
        for a in range(4):
            for p, s2, _, done in env.unwrapped.P[s][a]:
                assert p == 0 or done or s2 == s
    assert len(seen) == 8  # every rotation and reflection occurs


def test_random_shapes_are_not_doorways():
    assert not doorway.is_doorway(("SFFF", "FHFH", "FFFH", "HFFG"))
    assert not doorway.is_doorway(("FSGF", "FHFF", "FFFF", "FFFF"))  # S not in a corner
    with pytest.raises(ValueError, match="not a doorway"):
        doorway.moves(("SFFF", "FHFH", "FFFH", "HFFG"))


@pytest.mark.parametrize("seed", range(0, 200, 20))
def test_at_the_chosen_rate_every_map_pays_for_reading(seed):
    """p = 0.55 at T_max 8, on generated maps with decoration: mix gap and clock gap >= 10 points, a Q* margin of
    0.02 at every turns left, the optimum rushes iff at most 2 turns are left, the blind policy for the mix rushes
    and the blind policy for T_max presses (the issue's table)."""
    g = doorway.gaps(doorway.generate(4, 0.3, seed), 0.55, 8)
    assert g["mix_gap"] >= 10 and g["clock_gap"] >= 10 and g["margin"] >= 0.02
    assert g["mix_gap"] == pytest.approx(10.9, abs=0.05) and g["clock_gap"] == pytest.approx(10.7, abs=0.05)
    assert g["rush_up_to"] == 2
    assert (g["blind_mix_move"], g["blind_t_max_move"]) == ("rush", "press")


def test_the_dp_chooses_the_rate_and_refuses_an_impossible_gap():
    assert doorway.choose_success_rate(8) == 0.55
    table = doorway.rate_table(8)
    ok = table[(table.mix_gap >= 10) & (table.clock_gap >= 10) & (table.margin >= 0.02)]
    assert list(ok.index) == [0.55]
    with pytest.raises(ValueError, match="doorway_min_gap"):
        doorway.choose_success_rate(8, min_gap=30)


def test_clock_aware_policy_lies_between_the_blind_policy_for_the_mix_and_the_optimum():
    task = _task(doorway.generate(4, 0.2, 3))
    cands = budget.budgetmix_candidates(8)
    w = fl.horizon_weights({T: 1 / len(cands) for T in cands})
    q = fl._optimal_q(tuple(task.payload["desc"]), 8, 1.0, True, 0.55)
    s = fl.start_state(task.payload["desc"])
    optimum = sum(wh * q[h + 1, s].max() for h, wh in enumerate(w))
    rush = fl.blind_success(task, np.full(16, doorway.moves(task.payload["desc"])["rush"]), 8) @ w
    clock = doorway.clock_aware_success(task, w)
    assert rush <= clock + 1e-12 and clock <= optimum + 1e-12
    # with a single budget, counting one's own turns is knowing the turns left: the optimum
    one = fl.horizon_weights({8: 1.0})
    assert doorway.clock_aware_success(task, one) == pytest.approx(q[8, s].max())


def test_train_and_test_maps_are_disjoint_and_seeded():
    sets = doorway.map_sets(4, 0.2, 200, 40, 0)
    render = {split: {fl.render(d, fl.start_state(d)) for d in maps} for split, maps in sets.items()}
    assert len(render["train"]) == 200 and len(render["test"]) == 40
    assert not render["train"] & render["test"]
    assert doorway.map_sets.__wrapped__(4, 0.2, 200, 40, 0) == sets


def test_frozenlake_tasks_hold_the_share_in_every_split_and_subset():
    cfg = config.load("smoke")
    env = settings(cfg)
    for split, n_all in (("train", cfg.env.frozenlake.n_train), ("test", cfg.env.frozenlake.n_test)):
        tasks = load_tasks("frozenlake", split, **env)
        doors = [t for t in tasks if doorway.family(t) == "doorway"]
        assert len(doors) == round(0.25 * n_all)
        assert all(doorway.is_doorway(t.payload["desc"]) and t.payload["success_rate"] == 0.55 for t in doors)
        assert all(doorway.is_doorway_id(t.task_id) for t in doors)
        assert not any(doorway.is_doorway(t.payload["desc"]) for t in tasks if t not in doors)
    sub = load_tasks("frozenlake", "test", n=8, seed=3, **env)
    assert sum(doorway.family(t) == "doorway" for t in sub) == 2
    assert sub == load_tasks("frozenlake", "test", n=8, seed=3, **env)
    train_ids = {tuple(t.payload["desc"]) for t in load_tasks("frozenlake", "train", **env)}
    assert not train_ids & {tuple(t.payload["desc"]) for t in load_tasks("frozenlake", "test", **env)}


def test_without_a_share_no_task_changes():
    cfg = config.load("smoke")
    env = {k: v for k, v in settings(cfg).items() if not k.startswith("doorway")}
    tasks = load_tasks("frozenlake", "test", **env)
    assert len(tasks) == cfg.env.frozenlake.n_test and all(doorway.family(t) == "random" for t in tasks)


def test_the_share_needs_slippery_ice():
    with pytest.raises(config.ConfigError, match="doorway_share"):
        config.load("smoke", env={"frozenlake": {"is_slippery": False}})


def test_exact_references_by_budget():
    tasks = [_task(doorway.generate(4, 0.2, s)) for s in range(3)]
    refs = doorway.references(tasks, [1, 2, 3, 8])
    assert refs.loc["rush (blind for the mix)", 1] == pytest.approx(0.55)
    assert refs.loc["press (blind for T_max)", 1] == pytest.approx(0.225)
    assert refs.loc["optimum", 1] == pytest.approx(0.55)
    assert (
        refs.loc["optimum", 8]
        > refs.loc["press (blind for T_max)", 8]
        > refs.loc["rush (blind for the mix)", 8]
    )
