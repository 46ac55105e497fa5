"""Work in worker processes: several RL runs at once (`train_many`), or any module-level function over a list of
jobs (`ordered_map`, the evaluation of several models at once).

The tiny model's steps are small-matrix bound, so two runs with one thread each finish sooner on two cores than
one after the other with two threads. The base and the probe pool are built first, in the parent, so the workers
never race to write the same files; progress comes from the runs' metrics logs. Workers never write what the parent
writes: `ordered_map` hands every result back to the parent, in the order of the jobs.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from helpers import base_model
from helpers.config import Config
from helpers.progress import bar, batch_mode
from helpers.rl_runs import (
    build_probe_pool,
    is_complete,
    probe_pool_path,
    progress_label,
    read_metrics,
    rl_dir,
)

TrainFn = Callable[[Config, str, int], Path]


class _Share:
    """One run's part of a shared bar: counts its own steps (`n`) and adds them to the shared total."""

    def __init__(self, total) -> None:
        self.total, self.n = total, 0

    def update(self, n: int) -> None:
        self.n += n
        self.total.update(n)

    def close(self) -> None:
        pass


def _enter_worker(threads: int, env: dict, cwd: str) -> None:
    # a forkserver's child inherits the server's environment and folder, from when it started: take the caller's
    os.environ.clear()
    os.environ.update(env, KIT_WORKER="1")
    os.chdir(cwd)
    torch.set_num_threads(threads)


def _run_in_worker(
    train: TrainFn, cfg: Config, mode: str, seed: int, threads: int, env: dict, cwd: str
) -> str:
    _enter_worker(threads, env, cwd)
    return str(train(cfg, mode, seed))


def _call_in_worker(fn: Callable, args: tuple, env: dict, cwd: str):
    _enter_worker(1, env, cwd)
    return fn(*args)


def ordered_map(fn: Callable, jobs: list[tuple], workers: int) -> Iterator:
    """`fn(*job)` for every job, `workers` at a time in worker processes with one torch thread each; yields the
    results in the order of `jobs` (each as soon as it and every job before it are done), so what the caller writes
    from them is the same, in the same order, whatever the number of workers. `fn` must be a module-level function
    and the jobs and results picklable. With one worker (or one job) the jobs run here, one after the other."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(*job)
        return
    env, cwd = dict(os.environ), os.getcwd()
    with cf.ProcessPoolExecutor(min(workers, len(jobs)), mp_context=_context(fn)) as pool:
        futures = [pool.submit(_call_in_worker, fn, job, env, cwd) for job in jobs]
        try:
            for f in futures:
                yield f.result()  # a failed job raises here, naming its traceback
        finally:
            for f in futures:
                f.cancel()


def _context(train: Callable) -> mp.context.BaseContext:
    """Workers are forked from a server process that imported `train`'s module once (the first call starts it; it
    lives as long as this process), not spawned afresh: a spawned worker spent about 15 s of a core importing torch
    and the kit before its first step. Where there is no forkserver (Windows), spawn."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([train.__module__])  # no effect once the server runs (it has it already)
    return ctx


def train_many(runs: list[tuple[Config, str, int]], train: TrainFn, workers: int | None = None) -> list[Path]:
    """Run `train(cfg, mode, seed)` for every (profile, mode, RL seed) of `runs`, `workers` at a time in separate
    processes (default: the first profile's `train.parallel_runs`); returns the final model paths in the order of
    `runs`. `train` must be picklable (a module-level function: it is sent to the workers).

    Finished runs are reused; each run resumes on its own.
    """
    if not runs:
        return []
    for cfg in {id(c): c for c, _, _ in runs}.values():
        base_model.path_of(cfg)
    workers = max(1, min(workers or runs[0][0].train.parallel_runs, len(runs)))
    todo = [r for r in runs if not is_complete(rl_dir(*r) / "final")]
    if workers == 1 or len(todo) <= 1:
        return [train(c, m, s) for c, m, s in runs]
    for cfg in {probe_pool_path(c): c for c, _, _ in todo}.values():
        build_probe_pool(cfg)  # here, once: parallel workers would race to write the same file
    threads = max(1, (os.cpu_count() or 1) // workers)
    if batch_mode():  # one bar for all runs: a line a minute for the cell, not one per run
        total = bar(
            total=sum(c.train.steps for c, _, _ in todo),
            desc=f"RL steps of {len(todo)} runs ({workers} at a time)",
        )
        bars = [_Share(total) for _ in todo]
    else:
        bars = [bar(total=c.train.steps, desc=progress_label(c, m, s), leave=False) for c, m, s in todo]
    env, cwd = dict(os.environ), os.getcwd()
    with cf.ProcessPoolExecutor(workers, mp_context=_context(train)) as pool:
        pending = {pool.submit(_run_in_worker, train, c, m, s, threads, env, cwd) for c, m, s in todo}
        while pending:
            done, pending = cf.wait(pending, timeout=2.0)
            for r, b in zip(todo, bars, strict=True):
                steps = max((row["step"] for row in read_metrics(*r)), default=0)
                b.update(steps - b.n)
            for f in done:
                f.result()  # a failed run raises here, naming its traceback
    for b in bars:
        b.close()
    if batch_mode():
        total.close()
    return [rl_dir(*r) / "final" for r in runs]
