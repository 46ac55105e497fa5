"""Notebook 03's solvable-only reading (`pass_kt.solvable`) on the committed cpu sweep: a task that no policy can
solve within T (the structural bound is 0) scores 0 for every model, so leaving such tasks out changes the gaps'
denominators only; and the counts match the bound task by task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers import config, metrics, pass_kt, store
from helpers.config import REPO_ROOT
from helpers.envs import frozenlake as fl

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
        return sw, metrics.per_task_pass(df, cfg.sweep.pass_t_k)


class _Records:
    """Stands in for notebook 03's `store.Run`: `evaluate` only asks it for its records file."""

    def __init__(self, folder: Path):
        self.folder = folder

    def records(self, name: str) -> store.Records:
        return store.Records(self.folder / f"{name}.jsonl")


def test_unsolvable_tasks_score_zero_for_every_model_and_are_the_ones_left_out(sweep_and_tasks):
    sw, per_task = sweep_and_tasks
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
