"""Notebook 03's solvable-only reading (`pass_kt.solvable`) on the committed cpu sweep: a task that no policy can
solve within T (the structural bound is 0) scores 0 for every model, so leaving such tasks out changes the gaps'
denominators only; and the counts match the bound task by task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers import base_model, budget, budgetmix, config, controls, evaluate, metrics, pass_kt, store
from helpers.agents import Agent
from helpers.config import REPO_ROOT
from helpers.envs import doorway, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling

COMMITTED = REPO_ROOT / "results"


@pytest.fixture(scope="module")
def sweep_and_tasks(tmp_path_factory):
    """The committed sweep's per-task Pass@(k, T), read from a copy of its records (nothing is sampled: a missing
    record would be sampled into the copy, not into the committed folder)."""
    copy = tmp_path_factory.mktemp("records")
    shutil.copy(COMMITTED / "cpu" / "03_pass_at_kt_sweep" / "sweep_records.jsonl", copy)
    with store.results_at(COMMITTED):  # model paths are named relative to the committed root, as recorded
        cfg = config.load("cpu")
        sw = pass_kt.sweep(cfg)
        # the records as they are (every agent of them: a sweep recorded before the per-seed groups names its agents
        # otherwise, and evaluating the current roster would sample the whole sweep); T is the budget (one T_max)
        df = pd.DataFrame(_Records(copy).records("sweep_records").read())
        df = df[df["task_id"].isin({t.task_id for t in sw.tasks})]
        return sw, metrics.per_task_pass(df, cfg.sweep.pass_t_k), df


def test_doorway_pass_is_keyed_and_ordered_by_T(sweep_and_tasks):
    """The doorway maps' Pass@(1, T) and Pass@(k, T) per method: one entry per T, in order, each the method's Pass@T
    on the doorway maps alone (until 2026-12-07 the keys were the rows' text and the values in the table's row order,
    so the findings printed them out of order)."""
    sw, _, df = sweep_and_tasks
    door = sw.subset(doorway.FAMILY)
    d = pass_kt.doorway_pass(sw, df, 8, n_boot=20)
    for k in (1, 8):
        table = pass_kt.pass_at_t(door, metrics.per_task_pass(door.records(df), k), k, n_boot=20)
        for m, by_T in d[f"pass_at_{k}"].items():
            assert list(by_T) == [str(T) for T in door.Ts]
            want = table[table["method"] == m].set_index("T")["pass"]
            assert by_T == {str(T): pytest.approx(float(want[T])) for T in door.Ts}


class _Records:
    """Stands in for notebook 03's `store.Run`: `evaluate` only asks it for its records file."""

    def __init__(self, folder: Path):
        self.folder = folder

    def records(self, name: str) -> store.Records:
        return store.Records(self.folder / f"{name}.jsonl")


def test_unsolvable_tasks_score_zero_for_every_model_and_are_the_ones_left_out(sweep_and_tasks):
    sw, per_task, _ = sweep_and_tasks
    kept = pass_kt.solvable(sw, per_task)
    left_out = per_task.drop(kept.index)
    by_id = {t.task_id: t for t in sw.tasks}
    assert len(left_out) and (left_out["pass"] == 0).all()  # no policy solved what the bound says it cannot
    assert all(
        fl.upper_bound(by_id[i], int(T)) == 0 for i, T in zip(left_out["task_id"], left_out["T"], strict=True)
    )
    assert all(fl.upper_bound(by_id[i], int(T)) > 0 for i, T in zip(kept["task_id"], kept["T"], strict=True))
    counts = pass_kt.solvable_counts(sw, per_task)
    assert counts[max(sw.Ts)] == len(sw.tasks) >= counts[min(sw.Ts)] > 0
    assert list(counts.values()) == sorted(counts.values())  # more turns never make a map unsolvable


def test_the_sweep_reads_notebook_02s_cells_and_draws_them_the_same_on_its_own(tmp_path):
    """Issue 51: the sweep's cells that notebook 02 evaluates too (same agents, budget and samples per task) are 02's
    records on the sweep's tasks, read without a rollout; the others are drawn on the sweep's own stream. Run on its
    own (no 02 records), the sweep evaluates those cells as 02 does, so its records are the same either way."""
    cfg = config.load("smoke")  # sweep: 1, 3 and 6 turns, 2 samples as eval; eval: 2, 3, 5 and 6 turns
    with store.results_at(tmp_path / "base"):
        path = base_model.path_of(cfg)
    tasks = load_tasks("frozenlake", "test", n=cfg.sweep.n_tasks, seed=cfg.seed, **settings(cfg))
    cells = budget.fraction_cells(tasks, cfg.sweep.t_fractions)
    group = {"base-s0": Agent("base", path, cfg), "sharp-s0": Agent("base", path, cfg, temperature=0.5)}
    methods = {"base": ["base-s0"], "sharp": ["sharp-s0"]}
    by_T = {b: {b: ts} for (_, b), ts in cells.items()}
    sw = pass_kt.Sweep("frozenlake", tasks, cells, by_T, group, methods, {0: group})
    shared = pass_kt.shared_cells(cfg, sw)
    assert set(shared) == {(3, 3), (6, 6)} and set(sw.Ts) == {1, 3, 6}

    sampling = Sampling.from_config(cfg.sampling)
    frames = {}
    for series in ("with_02", "alone"):
        with store.results_at(tmp_path / series):
            if series == "with_02":  # notebook 02's evaluation of this group
                _, theirs = budgetmix.eval_cells(cfg)
                evaluate.evaluate_cells(
                    group,
                    "frozenlake",
                    {(f, b): (ts, b) for (f, b), ts in theirs.items()},
                    cfg.eval.n_samples,
                    sampling,
                    seed=budgetmix.eval_stream(cfg, 0),
                    records=store.Records(store.profile_dir("smoke") / budgetmix.NAME / "eval_records.jsonl"),
                    require_seed=True,
                )
            frames[series] = pass_kt.evaluate(cfg, sw, _Records(tmp_path / series / "03"))
    # alone, the sweep evaluated 02's cells (its 6 tasks x 2 samples at 3 and 6 turns, both agents) in its folder
    assert not (tmp_path / "with_02" / "03" / "eval_records.jsonl").exists()
    assert not (tmp_path / "alone" / "smoke" / budgetmix.NAME).exists()  # 02's folder is read, never made
    assert len(store.Records(tmp_path / "alone" / "03" / "eval_records.jsonl").read()) == 2 * 2 * 6 * 2
    with_02, alone = frames["with_02"], frames["alone"]
    assert set(with_02["budget"]) == {1, 3, 6}
    assert sorted(map(str, with_02.to_dict("records"))) == sorted(map(str, alone.to_dict("records")))
    theirs = pd.DataFrame(
        store.Records(tmp_path / "with_02" / "smoke" / budgetmix.NAME / "eval_records.jsonl").read()
    )
    ids = {t.task_id for t in tasks}
    for b in (3, 6):
        mine = with_02[with_02["budget"] == b]  # T is the budget here (one T_max)
        assert set(mine["seed"]) == {budgetmix.eval_stream(cfg, 0)}
        assert sorted(map(str, mine.to_dict("records"))) == sorted(
            map(str, theirs[(theirs["budget"] == b) & theirs["task_id"].isin(ids)].to_dict("records"))
        )
    own = with_02[with_02["budget"] == 1]
    assert set(own["seed"]) == {controls.stream(cfg.seed + 3000, 0)} and len(own) == len(tasks) * 2 * 2
