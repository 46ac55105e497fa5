"""Issue 26's map selection (`env.frozenlake.select_min_gap`, `frozenlake.budget_gaps`): one rule for both splits,
the splits disjoint, the selected maps meeting the issue's targets by DP, and the default leaving every existing
profile's maps, config and hashes as they were."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from helpers import budget, config, headroom, testbed
from helpers.config import ConfigError
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl

SELECT = (True, 0.75, 8, 10.0, 0.0)  # slip 0.75, T_max 8, select_min_gap 10, no mix rule


def _task(desc, rate: float = 0.75, t_max: int = 8) -> Task:
    return Task("t", "frozenlake", {"desc": list(desc), "is_slippery": True, "success_rate": rate}, t_max)


def _digest(maps) -> str:
    return hashlib.sha256(json.dumps(maps, sort_keys=True).encode()).hexdigest()


def test_without_selection_the_maps_are_those_of_the_code_before_it():
    """Pinned with the code before the knob existed (a4a3ac8's frozenlake.py): cpu's generator (4x4, 20 % holes,
    seed 0; the test split does not depend on n_train) and a 3x3 one, train and test."""
    assert _digest(fl.map_sets(4, 0.2, 300, 100, 0)) == (
        "5bb3472c6b01fb989705fe2ae63f122f3c1dee12b0b58332a4497fa691e1766e"
    )
    assert (
        _digest(fl.map_sets(3, 0.2, 30, 10, 2))
        == "f0508d471a29ce50cbc58380f2d9f59bcf4dca1bf7c6286929a25faeafa406ae"
    )
    kw = {
        "size": 3,
        "hole_p": 0.2,
        "t_max": 6,
        "is_slippery": True,
        "success_rate": 0.75,
        "n_train": 30,
        "n_test": 10,
    }
    for split in ("train", "test"):
        assert load_tasks("frozenlake", split, **kw, map_seed=2) == load_tasks(
            "frozenlake", split, **kw, map_seed=2, select_min_gap=0.0
        )


def test_the_knob_at_its_default_stays_out_of_every_dict_and_recipe():
    """Every profile that does not set it keeps its config, base and recipe hashes (tests/test_config.py pins them);
    here: the knob is absent from to_dict and the env settings at 0 (smoke) and present once set (cpu)."""
    smoke = config.load("smoke")
    assert "select_min_gap" not in smoke.to_dict()["env"]["frozenlake"]
    assert "select_min_gap" not in settings(smoke)
    assert smoke.env.frozenlake.select_min_gap == 0.0
    chosen = config.load("cpu")
    assert chosen.env.frozenlake.select_min_gap == 10.0
    assert settings(chosen)["select_min_gap"] == 10.0
    assert chosen.to_dict()["env"]["frozenlake"]["select_min_gap"] == 10.0
    assert "select_min_mix_gap" not in chosen.to_dict()["env"]["frozenlake"]


def test_selection_needs_slippery_ice():
    with pytest.raises(ConfigError, match=r"env\.frozenlake\.select_min_gap: .*needs is_slippery"):
        config.load("cpu", env={"frozenlake": {"is_slippery": False, "select_min_gap": 5.0}})
    with pytest.raises(ConfigError, match=r"env\.frozenlake\.select_min_gap: .*out of range"):
        config.load("cpu", env={"frozenlake": {"select_min_gap": -1.0}})
    with pytest.raises(ValueError, match="need slippery ice"):
        load_tasks("frozenlake", "test", size=4, t_max=8, select_min_gap=5.0)


def test_one_rule_for_both_splits_and_the_splits_stay_disjoint():
    """The test split is exactly the first distinct maps of its seed stream that pass the rule, recomputed here from
    budget_gaps; every training map passes the same rule; no rendered map is in both."""
    sets = fl.map_sets(4, 0.2, 12, 8, 0, SELECT)
    expected, seed = {}, 0
    while len(expected) < 8:
        desc = fl.random_map(4, 0.2, seed)
        seed += 1
        if desc is not None and fl.budget_gaps(_task(desc)).mean() >= 10.0:
            expected.setdefault(fl.render(desc, fl.start_state(desc)), desc)
    assert sets["test"] == list(expected.values())
    assert len(sets["train"]) == 12
    for desc in sets["train"] + sets["test"]:
        assert fl.selected(desc, SELECT)
    render = lambda ds: {fl.render(d, fl.start_state(d)) for d in ds}  # noqa: E731
    assert len(render(sets["train"])) == 12 and not render(sets["train"]) & render(sets["test"])
    # and load_tasks passes the profile's dynamics to the rule
    tasks = load_tasks(
        "frozenlake",
        "test",
        size=4,
        hole_p=0.2,
        t_max=8,
        is_slippery=True,
        success_rate=0.75,
        n_train=12,
        n_test=8,
        select_min_gap=10.0,
    )
    assert [tuple(t.payload["desc"]) for t in tasks] == sets["test"]


def test_selected_maps_meet_issue_26s_targets_by_dp():
    """On the first 16 selected test maps, with headroom's full blind search (not the selection's one start): budget
    awareness >= 8 points at 25 % and 50 % of T_max and >= 4 at 75 %, the bound below 0.95 at 75 %, and the map's
    own selection gap never below what the full search leaves (a better blind policy can only shrink the gap at
    T_max's own budget)."""
    maps = fl.map_sets(4, 0.2, 1, 16, 0, SELECT)["test"]
    budgets = [budget.budget_at(f, 8) for f in (0.25, 0.5, 0.75, 1.0)]
    gaps, bounds = [], []
    for desc in maps:
        task = _task(desc)
        blind, _ = headroom.best_blind_policy(task, 8)
        curve = headroom.blind_success(task, blind, 8)
        bounds.append([fl.upper_bound(task, T) for T in budgets])
        gaps.append([100 * (bounds[-1][i] - curve[T - 1]) for i, T in enumerate(budgets)])
        assert fl.budget_gaps(task, (1.0,))[0] >= gaps[-1][3] - 1e-9
    gap, bound = np.mean(gaps, axis=0), np.mean(bounds, axis=0)
    assert gap[0] >= 8 and gap[1] >= 8 and gap[2] >= 4, gap
    assert bound[2] < 0.95, bound


def test_a_map_with_a_risky_short_route_has_a_gap_and_an_open_field_almost_none():
    risky = _task(["FFFF", "FFFF", "FSFG", "HHFF"])  # a kept map: right along the holes, or round above them
    assert fl.budget_gaps(risky)[0] > 30
    assert fl.selected(tuple(risky.payload["desc"]), SELECT)
    open_field = _task(["SFFF", "FFFF", "FFFF", "FFFG"])
    gaps = fl.budget_gaps(open_field)  # nothing to rush past: no gap at 25 / 50 %, under a point at 75 %
    assert np.allclose(gaps[:2], 0.0) and 0 <= gaps[2] < 1
    assert not fl.selected(tuple(open_field.payload["desc"]), SELECT)
    assert fl.selected(tuple(open_field.payload["desc"]), None)


def test_an_impossible_selection_fails_naming_the_knob():
    with pytest.raises(ValueError, match=r"lower env\.frozenlake\.select_min_gap"):
        fl.map_sets(2, 0.0, 1, 1, 0, (True, 0.75, 4, 50.0, 0.0))


def test_notebook_00_names_the_selection_only_where_it_is_on():
    for profile, named in (("smoke", False), ("cpu", True)):
        text = testbed.describe(config.load(profile), [], [_task(["SG"])])
        assert ("select_min_gap" in text) is named, profile


def test_the_mix_gap_is_what_a_blind_agent_trained_on_the_mix_leaves_by_brute_force():
    """On small maps (at most 8 movable squares) the mix gap's blind policy is checked against every deterministic
    policy: the gap is never below the brute-force one (a local optimum can only leave more), and equal on these."""
    from helpers.envs.frozenlake import _optimal_q, dynamics, start_state

    checked = 0
    for seed in range(200):
        desc = fl.random_map(3, 0.2, seed)
        if desc is None:
            continue
        task = _task(desc, rate=0.6, t_max=6)
        try:
            _, best = headroom.brute_force_blind(task, headroom.budgetmix_mix(6))
        except ValueError:
            continue
        d, slippery, rate = dynamics(task)
        q = _optimal_q(d, 6, 1.0, slippery, rate)
        mix = headroom.budgetmix_mix(6)
        optimum = sum(p * q[T, start_state(d)].max() for T, p in mix.items())
        exact = 100 * (optimum - best)
        assert fl.mix_gap(task) >= exact - 1e-9
        assert fl.mix_gap(task) == pytest.approx(exact, abs=1e-6), desc
        checked += 1
        if checked == 12:
            break
    assert checked == 12


def test_the_mix_rule_keeps_maps_worth_reading_the_budget_on_and_its_prefilter_is_an_upper_bound():
    risky = _task(["FFFF", "FFFF", "FSFG", "HHFF"], rate=0.6)
    open_field = _task(["SFFF", "FFFF", "FFFF", "FFFG"], rate=0.6)
    for task in (risky, open_field):
        assert (
            fl.mix_gap(task, (2,)) >= fl.mix_gap(task) - 1e-9
        )  # one start leaves at least the full search's gap
    assert fl.mix_gap(open_field) < 1
    rule = (True, 0.6, 8, 0.0, 4.0)
    kept = fl.map_sets(4, 0.25, 4, 4, 0, rule)
    for desc in kept["train"] + kept["test"]:
        assert fl.mix_gap(_task(desc, rate=0.6)) >= 4.0
    with pytest.raises(ConfigError, match=r"select_min_mix_gap: .*needs is_slippery"):
        config.load("smoke", env={"frozenlake": {"is_slippery": False, "select_min_mix_gap": 5.0}})


def test_selected_map_sets_are_kept_on_disk_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    monkeypatch.delenv("KIT_MAP_CACHE", raising=False)  # the test session's shared cache (conftest)
    rule = (True, 0.75, 8, 10.0, 0.0)
    fl.map_sets.cache_clear()
    first = fl.map_sets(4, 0.2, 3, 2, 5, rule)
    files = list(fl.map_cache_dir().glob("*.json"))
    assert len(files) == 1 and fl.map_cache_dir().is_relative_to(tmp_path)
    fl.map_sets.cache_clear()
    assert fl.map_sets(4, 0.2, 3, 2, 5, rule) == first  # read back, not drawn
    files[0].write_text("{not json")  # a damaged file is drawn again and replaced
    fl.map_sets.cache_clear()
    assert fl.map_sets(4, 0.2, 3, 2, 5, rule) == first
    assert json.loads(files[0].read_text())["test"] == [list(d) for d in first["test"]]
    fl.map_sets.cache_clear()


def test_kit_map_cache_names_one_folder_for_every_results_root(tmp_path, monkeypatch):
    """`KIT_MAP_CACHE` (the test session's shared cache) takes the place of `<results root>/_cache`: a set drawn
    under one results root is read back under another, and neither root gets a cache of its own."""
    monkeypatch.setenv("KIT_MAP_CACHE", str(tmp_path / "shared"))
    rule = (True, 0.75, 8, 10.0, 0.0)
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "a"))
    fl.map_sets.cache_clear()
    first = fl.map_sets(4, 0.2, 3, 2, 6, rule)
    assert [p.parent for p in (tmp_path / "shared").glob("*.json")] == [tmp_path / "shared"]
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "b"))
    fl.map_sets.cache_clear()
    assert fl.map_sets(4, 0.2, 3, 2, 6, rule) == first
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    fl.map_sets.cache_clear()
