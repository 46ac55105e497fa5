"""Runtime of every exercise (`helpers.exercises`) at the cpu profile, each in a fresh interpreter.

    .venv/bin/python benchmarks/exercises.py               # every exercise; writes benchmarks/exercises.json
    .venv/bin/python benchmarks/exercises.py --only 03a    # one, or a comma-separated few; other entries stay

What is timed: the snippet alone, as in a notebook kernel that has already imported the modules it uses; for an
implement-exercise, the snippet with its reference solution filled in (`solutions/<name>.py`: the skeleton stops at
"NOT YET", the student's finished cell runs everything after the check). Each
exercise runs in a fresh subprocess, so one exercise's loaded models and caches never speed up the next, with
torch at 2 threads. The child imports torch, numpy, pandas and every module the snippet imports (untimed), then
times `exec` of the snippet in a fresh namespace {"profile": "cpu"}. What a notebook run leaves in its kernel
(generated maps, loaded models) is not warm here, so a pasted cell can be faster than measured.

The results folder (`$KIT_RESULTS`, else `results/`) is listed before and after each snippet: an exercise that
wrote into it, or failed, gets no time. The folder must hold the cpu series' trained models and record files (committed under `results/cpu/`; their names
hash recipes, never paths, so a copied results folder finds them). Each entry records the snippet's code hash, so `helpers.exercises.section`
shows a time only for the code that was measured. The JSON is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers import exercises, store  # noqa: E402

OUT = REPO / "benchmarks" / "exercises.json"
THREADS = 2
MARK = "@@exercise-result@@ "


def imported_modules(code: str) -> list[str]:
    """The modules a snippet imports (to import them before the clock starts)."""
    mods = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            mods += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.append(node.module)
            for a in node.names:  # `from helpers import store`: helpers.store is a module
                try:
                    importlib.util.find_spec(f"{node.module}.{a.name}")
                    mods.append(f"{node.module}.{a.name}")
                except (ImportError, ValueError):
                    pass
    return mods


def child(key: str, profile: str) -> int:
    """Run one exercise in this process and print its result as one JSON line."""
    import torch

    torch.set_num_threads(THREADS)
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    ex = exercises.get(key)
    code = ex.solution or ex.code  # an implement-exercise as the student finally runs it
    for mod in imported_modules(code):
        with contextlib.suppress(ImportError):  # a name imported from a module, not a module
            importlib.import_module(mod)
    root = store.results_root()
    before = exercises.results_snapshot(root)
    t0 = time.perf_counter()
    exec(compile(code, f"<exercise {key}>", "exec"), {"profile": profile, "__name__": "__exercise__"})
    seconds = time.perf_counter() - t0
    after = exercises.results_snapshot(root)
    wrote = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    print(MARK + json.dumps({"key": key, "seconds": seconds, "wrote": wrote}), flush=True)
    return 0


def commit() -> str:
    """HEAD, with `-dirty` if tracked code differs from it (results/ and this benchmark's JSON aside)."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [
            "git",
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)results",
            ":(exclude)benchmarks/exercises.json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (head or "unknown") + ("-dirty" if dirty else "")


def run_one(key: str, profile: str, timeout: float) -> dict:
    """Run exercise `key` in a fresh interpreter; {"seconds", "wrote"} or {"error"}."""
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", key, "--profile", profile]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"ran past {timeout:g} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(MARK)]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]}
    return json.loads(lines[-1][len(MARK) :])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated exercise keys (default: all)")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per exercise")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--note", default="", help="how this run was made (load, nice), kept with its entries")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.profile)

    keys = [k.strip() for k in args.only.split(",")] if args.only else [e.key for e in exercises.EXERCISES]
    for k in keys:
        exercises.get(k)  # an unknown key fails before anything runs
    at = commit()
    if at.endswith("-dirty"):
        print(f"warning: the code differs from {at[:-6]}; the entries will say {at}", file=sys.stderr)
    data = exercises.timings(args.out) or {}
    data.setdefault("exercises", {})
    data["how"] = (
        "seconds of the snippet alone, each in a fresh interpreter that had already imported torch, numpy, pandas "
        f"and the modules the snippet imports; torch at {THREADS} threads; results folder checked unchanged"
    )
    data.setdefault("runs", []).append(
        {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": at,
            "keys": keys,
            "note": args.note,
        }
    )
    failed = []
    print(f"{'key':<5} {'seconds':>8}  title")
    for k in keys:
        ex = exercises.get(k)
        got = run_one(k, args.profile, args.timeout)
        if "error" in got or got["wrote"]:
            why = got.get("error") or f"wrote into the results: {got['wrote'][:3]}"
            failed.append(k)
            data["exercises"].pop(k, None)
            print(f"{k:<5} {'FAILED':>8}  {ex.title}: {why}")
            continue
        data["exercises"][k] = {
            "seconds": round(got["seconds"], 2),
            "code": ex.digest,
            "commit": at,
            "profile": args.profile,
            "cpu_count": os.cpu_count(),
            "torch_threads": THREADS,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "ran": "reference solution" if ex.solution else "snippet",
        }
        print(f"{k:<5} {got['seconds']:>8.1f}  {ex.title}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        store.write_atomic(
            args.out, json.dumps(data, indent=2, sort_keys=True) + "\n"
        )  # after every exercise
    measured = [data["exercises"][k]["seconds"] for k in keys if k in data["exercises"]]
    print(f"{'total':<5} {sum(measured):>8.1f}  ({len(measured)} of {len(keys)} exercises)")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
