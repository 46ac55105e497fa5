"""Evaluation in worker processes (`eval.workers`): one evaluation grid of several agents (the base at several
temperatures, as notebook 02's roster has several models) rolled out in one process, then with the models spread
over worker processes of one thread each (`evaluate.evaluate_grid(..., workers=N)`), in one process run; prints the
wall time of each, the ratio, and whether the two wrote the same records.

    .venv/bin/python benchmarks/eval_workers.py --profile cpu --tasks 32 --samples 8 --workers 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import base_model, budget, config, evaluate, store
from helpers.agents import Agent
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument(
        "--agents", type=int, default=4, help="the base at this many temperatures (1.0, 0.9, ...)"
    )
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    cfg = config.load(args.profile)
    t_max = cfg.env.frozenlake.t_max if cfg.env.name == "frozenlake" else None
    tasks = load_tasks(cfg.env.name, "test", n=args.tasks, **settings(cfg))
    budgets = sorted({budget.budget_at(f, t_max or tasks[0].t_max) for f in cfg.eval.budget_fractions})
    path = base_model.path_of(cfg)
    roster = {
        f"base@{1 - i / 10:.1f}": Agent(f"base@{1 - i / 10:.1f}", path, cfg, temperature=1 - i / 10)
        for i in range(args.agents)
    }
    sampling = Sampling.from_config(cfg.sampling)
    seconds, records = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, args.workers):
            rec = store.Records(Path(tmp) / f"records-{workers}.jsonl")
            t0 = time.perf_counter()
            evaluate.evaluate_grid(
                roster, cfg.env.name, tasks, budgets, args.samples, sampling, 0, rec, workers=workers
            )
            seconds[workers], records[workers] = time.perf_counter() - t0, rec.read()
    n = len(records[1])
    print(
        f"{len(roster)} agents x {len(budgets)} budgets x {args.tasks} tasks x {args.samples} samples = {n} "
        f"trajectories ({args.profile})"
    )
    print(
        f"one process: {seconds[1]:.1f} s; {args.workers} workers: {seconds[args.workers]:.1f} s; "
        f"ratio {seconds[1] / seconds[args.workers]:.2f}x; same records: {records[1] == records[args.workers]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
