"""Running programs: `run_program` (all tests of one program, in one sandbox unless it dies), `run_many` (many
programs in parallel threads), `report` (what this machine gives the sandbox)."""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .base import ChannelError, Limits, RunResult, Stalled, TestResult
from .bwrap import boundary
from .judge import fail, first_command, judge_assert, validate_test, verdict
from .session import Session, isolation_plan
from .uids import IS_ROOT, sandbox_uid


def run_program(
    program: str, tests: list[dict], setup: str = "", limits: Limits | None = None, batch: bool = True
) -> RunResult:
    """Run `program` on every test in the sandbox and judge it here; `setup` (trusted code, e.g. HumanEval's
    prompt with its helper functions and imports) runs before the program in the same namespace, and before the
    check code in the judge's. `batch=False` starts one sandbox per test (the slow reference of the benchmark).
    Raises SandboxUnavailable where the operating-system boundary is missing and weak mode was not asked for."""
    limits = limits or Limits()
    if not isinstance(program, str):
        raise TypeError(f"program must be a str, got {type(program).__name__}")
    if not isinstance(setup, str):
        raise TypeError(f"setup must be a str, got {type(setup).__name__}")
    for t in tests:
        validate_test(t)
    plan = isolation_plan(limits)
    t0 = time.perf_counter()
    results: list[TestResult] = []
    processes = 0
    info: dict = {}
    peaks: list[float] = []
    session: Session | None = None
    if plan.bwrap is not None and plan.userns:
        uid_pool = contextlib.nullcontext(None)  # the calling user's own uid, in a user namespace
    else:
        uid_pool = sandbox_uid(sweep=plan.bwrap is None or plan.cgroups is None)
    budget = limits.run_budget_s(len(tests))
    end = time.monotonic() + budget  # the whole run's wall-clock budget (`Limits.run_wall_s`)
    spent = (
        f"not run: the program's wall-clock budget of {budget:g} s for all its tests was spent (it waits: sleep, "
        "a blocked read, a thread left running)"
    )
    with uid_pool as uid:
        try:
            i = 0
            while i < len(tests):
                test = tests[i]
                if time.monotonic() >= end:
                    results += [TestResult(False, "stalled", error=spent) for _ in tests[i:]]
                    break
                if session is None:
                    session = Session(
                        plan, program, setup, tests[i : i + 1] if not batch else tests[i:], limits, uid
                    )
                    processes += 1
                    info = session.info
                t1 = time.perf_counter()
                # a stall guard only (CPU time decides "timeout"), within what is left of the run's budget
                deadline = min(time.monotonic() + limits.stall_s, end)
                try:
                    if test["kind"] == "assert":
                        res = judge_assert(session, test, setup, limits, deadline)
                    else:
                        res = verdict(test, session.ask(first_command(test), deadline), limits)
                    restart = not batch  # a fresh sandbox for the next test
                except ChannelError as exc:
                    res = TestResult(False, "", "", "")
                    fail(res, exc, limits)
                    if isinstance(exc, Stalled) and deadline >= end:
                        res.error = (
                            f"stopped: the program's wall-clock budget of {budget:g} s for all its tests was spent "
                            f"(under its CPU time limit of {limits.timeout_s} s: it waits)"
                        )
                    restart = True
                res.time_s = time.perf_counter() - t1
                results.append(res)
                i += 1
                if restart:
                    peaks.append(session.peak_mb() or 0.0)
                    session.close()
                    session = None
        finally:
            if session is not None:
                peaks.append(session.peak_mb() or 0.0)
                session.close()
    namespaces = (
        ["mount", "pid", "net", "ipc", "uts", *(["user"] if plan.userns else [])] if plan.bwrap else []
    )
    layers = {
        "mode": plan.mode,
        "namespaces": namespaces,
        "cgroup": None if plan.cgroups is None else f"v{plan.cgroups.version}",
        "memory_limit_mb": limits.memory_mb if plan.cgroups is not None else None,
        "peak_memory_mb": max(peaks) if plan.cgroups is not None and peaks else None,
        "root": IS_ROOT,
        "uid": info.get("uid"),
        "capabilities": info.get("caps"),
        "no_new_privs": info.get("no_new_privs"),
        "interfaces": info.get("interfaces"),
        "audit_hook": limits.audit_hook,
    }
    if plan.mode == "weak":
        layers["missing"] = list(plan.missing)
    return RunResult(results, time.perf_counter() - t0, processes, layers)


@dataclass(frozen=True)
class Job:
    """One program with its tests, for `run_many`."""

    program: str
    tests: list
    setup: str = ""


def run_many(
    jobs: list[Job], limits: Limits | None = None, workers: int | None = None, batch: bool = True
) -> list[RunResult]:
    """Run many programs in parallel (threads, each driving its own sandbox); results in job order."""
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_program, j.program, j.tests, j.setup, limits, batch) for j in jobs]
        return [f.result() for f in futures]


def report() -> dict:
    """What this machine gives the sandbox, as a dict (printed by `python -m helpers.sandbox`)."""
    b = boundary()
    out = {
        "complete": b.complete,
        "root": b.root,
        "bubblewrap": b.bwrap,
        "user_namespace": b.userns if b.bwrap else None,
        "cgroup": None if b.cgroups is None else f"v{b.cgroups.version}",
        "problems": list(b.problems),
    }
    if b.complete:
        r = run_program("print('ok')", [{"kind": "stdin", "input": "", "output": "ok"}])
        out["probe_passed"] = r.all_passed
        out["layers"] = r.layers
    return out
