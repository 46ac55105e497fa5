"""Sandbox throughput, and the cost of the actions the kit bounds.

1. Tests/s with all tests of a program in one sandbox vs one sandbox per test: the reference solutions of the
   bundled DeepCoder-MT tasks (the kit's stdin problems and HumanEval), both ways in this process, then batched
   with programs in parallel. With k tests per program on average no ratio can exceed k (the ratio when starting a
   sandbox were all the cost), so that bound is printed too.
2. Bounded actions: the time and parent memory of the hostile SQL queries of issue 15 (a byte cap bounds the
   result), and the time and observation size of BFCL calls that would otherwise run for seconds.

    python benchmarks/sandbox.py [--n-programs 40] [--workers 2] [--tests-per-program N] [--skip-speed]
                                 [--skip-actions]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, the kit installed or not

from helpers import sandbox
from helpers.envs import bfcl
from helpers.envs.base import Task
from helpers.envs.code_tasks import humaneval_tasks, kit_tasks
from helpers.envs.sql import SQLEnv


def measure(jobs: list[sandbox.Job], batch: bool, workers: int) -> tuple[float, int]:
    """(tests per second, tests passed) for running every job."""
    t0 = time.perf_counter()
    results = sandbox.run_many(jobs, workers=workers, batch=batch)
    wall = time.perf_counter() - t0
    n_tests = sum(len(r.tests) for r in results)
    return n_tests / wall, sum(r.n_passed for r in results)


def speed(n_programs: int, workers: int, tests_per_program: int | None = None) -> None:
    tasks = kit_tasks(4)[:n_programs] + humaneval_tasks(4)[:n_programs]
    jobs = [sandbox.Job(t.payload["reference"], t.payload["tests"], t.payload["setup"]) for t in tasks]
    if tests_per_program:  # each program's own tests, cycled to this many (hub problems often have tens)
        jobs = [
            sandbox.Job(j.program, [j.tests[k % len(j.tests)] for k in range(tests_per_program)], j.setup)
            for j in jobs
        ]
    n_tests = sum(len(j.tests) for j in jobs)
    probe = sandbox.run_program("print(1)", [{"kind": "stdin", "input": "", "output": "1"}])
    print(
        f"{len(jobs)} programs, {n_tests} tests ({n_tests / len(jobs):.2f} per program: no ratio can exceed this)"
    )
    print(f"isolation layers: {probe.layers}")
    single, ok1 = measure(jobs, batch=False, workers=1)
    batched, ok2 = measure(jobs, batch=True, workers=1)
    parallel, ok3 = measure(jobs, batch=True, workers=workers)
    assert ok1 == ok2 == ok3 == n_tests, "reference solutions must pass every way"
    print(f"one sandbox per test          : {single:8.1f} tests/s")
    print(f"one sandbox per program       : {batched:8.1f} tests/s  ({batched / single:.1f}x)")
    print(f"  + {workers} programs in parallel : {parallel:8.1f} tests/s  ({parallel / single:.1f}x)")


def _peak_rss_reset() -> int:
    """Reset this process's peak RSS (Linux: clear_refs 5) and return the current RSS in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS") << 10


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def sql_actions() -> None:
    env = SQLEnv()
    gold = "SELECT Name FROM country WHERE Continent = 'Europe' ORDER BY Name"
    task = Task(
        "bench", "intercode_sql", {"db": "world_1", "db_source": "dump", "question": "?", "gold": gold}, 50
    )
    env.reset(task, 50)
    for sql in (
        "SELECT zeroblob(65536) FROM city LIMIT 300",
        "SELECT zeroblob(65536), zeroblob(65536), zeroblob(65536) FROM city LIMIT 200",
    ):
        base = _peak_rss_reset()
        tracemalloc.start()
        t0 = time.perf_counter()
        res = env.step(sql)
        quality = env.step_quality(sql)
        took = time.perf_counter() - t0
        py_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss = (_status_kb("VmHWM") << 10) - base
        print(
            f"SQL  {sql[:60]:60s} step + step_quality {took:5.2f} s, parent peak +{rss / 2**20:5.1f} MB RSS "
            f"({py_peak / 2**20:.1f} MB Python), {res.info['rows']} rows kept ({res.info['capped_by']} cap), "
            f"reward {quality}"
        )
    env.close()


def bfcl_actions() -> None:
    entry = next(e for e in bfcl.load_entries() if "MathAPI" in e["involved_classes"])
    task = Task(entry["id"], "bfcl", bfcl.task_payload(entry, "multi_turn_base"), 30)
    env = bfcl.BFCLEnv()
    env.reset(task, 30)
    env.step("[square_root(number=4, precision=5)]")  # starts the call worker (once per process)
    limits = env.call_limits
    print(f"BFCL call limits: {limits.time_s:g} s, {limits.output_chars} characters, +{limits.memory_mb} MB")
    for reply in (
        "[power(base=7, exponent=10000000)]",
        "[square_root(number=2, precision=1000000)]",
        "[square_root(number=2, precision=200000)]",
        "[mkdir(dir_name=0x" + "f" * 4000 + ")]",
    ):
        t0 = time.perf_counter()
        res = env.step(reply)
        took = time.perf_counter() - t0
        shown = res.observation.split("\n")[0]
        print(
            f"BFCL {reply[:44]:44s} {took:5.2f} s, observation {len(res.observation):5d} chars: {shown[-110:]}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-programs", type=int, default=40, help="programs per set (kit and HumanEval)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel programs")
    ap.add_argument("--skip-speed", action="store_true", help="leave out the throughput part")
    ap.add_argument("--skip-actions", action="store_true", help="leave out the SQL and BFCL part")
    ap.add_argument(
        "--tests-per-program",
        type=int,
        default=None,
        help="cycle each program's tests to this many (default: as bundled)",
    )
    args = ap.parse_args()
    if not args.skip_actions:
        sql_actions()
        bfcl_actions()
    if not args.skip_speed:
        speed(args.n_programs, args.workers, args.tests_per_program)


if __name__ == "__main__":
    main()
