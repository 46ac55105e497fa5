"""Sandbox throughput: tests/s with all tests of a program in one process vs one process per test.

Runs the reference solutions of the bundled DeepCoder-MT tasks (the kit's stdin problems and HumanEval) both
ways in this process, then the batched way with programs in parallel, and prints tests/s and the ratios.

    python benchmarks/sandbox.py [--n-programs 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import time

from helpers.envs import sandbox
from helpers.envs.code import humaneval_tasks, kit_tasks


def measure(jobs: list[sandbox.Job], batch: bool, workers: int) -> tuple[float, int]:
    """(tests per second, tests passed) for running every job."""
    t0 = time.perf_counter()
    results = sandbox.run_many(jobs, workers=workers, batch=batch)
    wall = time.perf_counter() - t0
    n_tests = sum(len(r.tests) for r in results)
    return n_tests / wall, sum(r.n_passed for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-programs", type=int, default=40, help="programs per set (kit and HumanEval)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel programs")
    args = ap.parse_args()
    tasks = kit_tasks(4)[: args.n_programs] + humaneval_tasks(4)[: args.n_programs]
    jobs = [sandbox.Job(t.payload["reference"], t.payload["tests"], t.payload["setup"]) for t in tasks]
    n_tests = sum(len(j.tests) for j in jobs)
    probe = sandbox.run_program("print(1)", [{"kind": "stdin", "input": "", "output": "1"}])
    print(f"{len(jobs)} programs, {n_tests} tests; isolation layers: {probe.layers}")
    single, ok1 = measure(jobs, batch=False, workers=1)
    batched, ok2 = measure(jobs, batch=True, workers=1)
    parallel, ok3 = measure(jobs, batch=True, workers=args.workers)
    assert ok1 == ok2 == ok3 == n_tests, "reference solutions must pass every way"
    print(f"one process per test          : {single:8.1f} tests/s")
    print(f"one process per program       : {batched:8.1f} tests/s  ({batched / single:.1f}x)")
    print(f"  + {args.workers} programs in parallel : {parallel:8.1f} tests/s  ({parallel / single:.1f}x)")


if __name__ == "__main__":
    main()
