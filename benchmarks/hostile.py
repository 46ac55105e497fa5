"""What issue 52's bounds cost, before and after, measured in one process (ratios, so the machine's load cancels
as far as it can; rounds alternate between the two ways).

1. Sandbox: tests/s of the bundled reference solutions (kit and HumanEval, one sandbox per program) with the
   seccomp filter before issue 52 (no file-lock rules) and after (flock and fcntl's lock, lease and notice
   commands refused). The wall-clock budget and the held-out order add no work.
2. SQL: queries/s of the bundled tasks' gold queries run in the kit's process (before) and in the query worker
   under its kernel CPU-time limit (after), and the wall time of the 2400-instr() row of issue 52 (after only:
   before, 46 s of CPU time).
3. Replies: microseconds to parse a typical BFCL reply with and without the size and tree bounds, and the peak
   memory the kit's process adds for the largest reply the cap lets through (under 64 KiB) and for a 6 MB one.

    python benchmarks/hostile.py [--rounds 3] [--n-programs 20] [--queries 200] [--skip-sandbox]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, the kit installed or not

from helpers import sandbox
from helpers.envs.bfcl import parser
from helpers.envs.code_tasks import humaneval_tasks, kit_tasks
from helpers.envs.sql import SQLEnv, engine
from helpers.sandbox import seccomp


@contextlib.contextmanager
def filter_before_issue_52() -> Iterator[None]:
    """The seccomp filter as it was: no flock, no fcntl command refused."""
    names, cmds = seccomp._REFUSED_NAMES, seccomp.FCNTL_REFUSED
    seccomp._REFUSED_NAMES = tuple(n for n in names if n != "flock")
    seccomp.FCNTL_REFUSED = ()
    try:
        yield
    finally:
        seccomp._REFUSED_NAMES, seccomp.FCNTL_REFUSED = names, cmds


def sandbox_ratio(rounds: int, n_programs: int) -> None:
    tasks = kit_tasks(4)[:n_programs] + humaneval_tasks(4)[:n_programs]
    jobs = [sandbox.Job(t.payload["reference"], t.payload["tests"], t.payload["setup"]) for t in tasks]
    n_tests = sum(len(j.tests) for j in jobs)
    rates: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        for way in ("before", "after"):
            with filter_before_issue_52() if way == "before" else contextlib.nullcontext():
                t0 = time.perf_counter()
                results = sandbox.run_many(jobs, workers=1)
                rates[way].append(n_tests / (time.perf_counter() - t0))
            assert sum(r.n_passed for r in results) == n_tests, "reference solutions must pass both ways"
    before, after = statistics.median(rates["before"]), statistics.median(rates["after"])
    print(f"sandbox: {len(jobs)} programs, {n_tests} tests, {rounds} rounds each way (median)")
    print(f"  seccomp filter before issue 52: {before:7.1f} tests/s")
    print(f"  after (file locks refused)    : {after:7.1f} tests/s  (after/before {after / before:.3f})")


def sql_ratio(rounds: int, queries: int) -> None:
    tasks = SQLEnv.load_tasks("train") + SQLEnv.load_tasks("test")
    golds = [(SQLEnv.database_path(t), t.payload["gold"]) for t in tasks]
    dbs = {path: engine.ReadOnlyDatabase(path) for path, _ in golds}
    isolated = {path: engine.ReadOnlyDatabase(path, isolated=True) for path, _ in golds}
    work = [golds[k % len(golds)] for k in range(queries)]
    isolated[work[0][0]].run(work[0][1])  # start the worker once, outside the timing
    rates: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        for way, pool in (("before", dbs), ("after", isolated)):
            t0 = time.perf_counter()
            for path, sql in work:
                assert pool[path].run(sql).error is None
            rates[way].append(queries / (time.perf_counter() - t0))
    before, after = statistics.median(rates["before"]), statistics.median(rates["after"])
    print(f"SQL: {queries} gold queries of the {len(tasks)} bundled tasks, {rounds} rounds each way (median)")
    print(f"  in the kit's process (before): {before:8.1f} queries/s")
    print(f"  in the query worker (after)  : {after:8.1f} queries/s  (after/before {after / before:.3f})")
    env = SQLEnv()
    env.reset(tasks[0], 3)
    cte = (
        "WITH a(v) AS MATERIALIZED (SELECT printf('%.*c', 65000, 'a')), "
        "b(v) AS MATERIALIZED (SELECT printf('%.*c', 32000, 'a')) SELECT "
    )
    body = ", ".join(" + ".join(f"instr(a.v, b.v || '{i % 10}{j}')" for j in range(12)) for i in range(200))
    t0 = time.perf_counter()
    res = env.step(f"```sql\n{cte}{body} FROM a, b\n```")
    print(
        f"  2400 instr() in one row: stopped after {time.perf_counter() - t0:.1f} s of wall time, "
        f"{res.info['cpu_seconds']:.1f} s of the worker's CPU time (limit {env.time_limit_s:g} s; before: 46 s)"
    )
    env.close()


def reply_costs() -> None:
    names = {"ls", "cd", "mkdir", "cat"}
    reply = "[cd(folder='document'), mkdir(dir_name='temp'), ls(a=True), cat(file_name='final_report.pdf')]"
    n = 2000
    unbounded = parser.MAX_NODES
    out = {}
    for way in ("before", "after"):
        parser.MAX_NODES = 10**12 if way == "before" else unbounded
        t0 = time.perf_counter()
        for _ in range(n):
            assert parser.parse_calls(reply, names)[0]
        out[way] = (time.perf_counter() - t0) / n * 1e6
    parser.MAX_NODES = unbounded
    print(
        f"BFCL parse of a 4-call reply: {out['before']:.1f} us without the tree bound, {out['after']:.1f} us with it"
    )
    for label, text in (
        ("largest reply under the cap (64 KiB of list items)", "[ls(a=[" + "0," * 32_700 + "0])]"),
        ("a 6 MB reply", "[ls(a=[" + "0," * 3_000_000 + "0])]"),
    ):
        tracemalloc.start()
        calls, why = parser.parse_calls(text, names)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {label}: refused={calls is None}, peak +{peak / 2**20:.1f} MB ({why[:60]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each way (alternating)")
    ap.add_argument("--n-programs", type=int, default=20, help="programs per set (kit and HumanEval)")
    ap.add_argument("--queries", type=int, default=200, help="SQL queries per round")
    ap.add_argument("--skip-sandbox", action="store_true", help="leave out the sandbox part")
    args = ap.parse_args()
    reply_costs()
    sql_ratio(args.rounds, args.queries)
    if not args.skip_sandbox:
        sandbox_ratio(args.rounds, args.n_programs)


if __name__ == "__main__":
    main()
