"""How long Run All takes on a fresh clone: each cpu notebook top to bottom in its own kernel, as JupyterLab runs
it, on the committed models and record files, against the same notebook's time in the committed from-scratch
run (`results/cpu/executed/run.json`, written by `make reproduce`, which trains and samples everything).

    .venv/bin/python benchmarks/interactive.py            # every notebook; writes benchmarks/interactive.json
    .venv/bin/python benchmarks/interactive.py --only 03

The notebooks run on a copy of `results/cpu` (the committed files stay as they are); a notebook that trains or
samples anything new is reported as such (its artefacts were stale). The issue's target: 2 minutes per notebook
on 2 cores. The from-scratch times come from another process and run, so the ratio compares two runs on the same
machine type, not the same process; run this on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import nbtools, run, store
from helpers.config import REPO_ROOT

COMMITTED = REPO_ROOT / "results" / "cpu"
TARGET_S = 120.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--only", help="one notebook number, e.g. 03")
    ap.add_argument(
        "--out", default=str(Path(__file__).with_suffix(".json")), help="where to write the table"
    )
    args = ap.parse_args()
    scratch = json.loads((COMMITTED / "executed" / "run.json").read_text())
    from_scratch = {r["notebook"]: r["seconds"] for r in scratch["notebooks"]}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        shutil.copytree(COMMITTED, root / "cpu", ignore=shutil.ignore_patterns("executed"))
        os.environ["KIT_RESULTS"] = str(root)
        os.environ.pop("KIT_BATCH", None)
        for path in run.select(run.notebooks(), only=args.only):
            before = nbtools.artefacts(root / "cpu")
            t0 = time.perf_counter()
            nb, cells = nbtools.run_all(path)
            seconds = time.perf_counter() - t0
            slowest = max(cells, key=lambda c: c["seconds"])
            rows.append(
                {
                    "notebook": path.name,
                    "seconds": round(seconds, 1),
                    "from_scratch_seconds": from_scratch.get(path.name),
                    "slowest_cell": slowest["cell"],
                    "slowest_cell_seconds": round(slowest["seconds"], 1),
                    "trained_or_sampled": before != nbtools.artefacts(root / "cpu"),
                    "output_problems": nbtools.output_problems(nb),
                }
            )
            r = rows[-1]
            ratio = f"{r['from_scratch_seconds'] / seconds:5.1f}x" if r["from_scratch_seconds"] else "    -"
            flag = (
                "" if seconds <= TARGET_S and not r["trained_or_sampled"] else "  <-- over target or trained"
            )
            print(
                f"{path.name:32s} {seconds:6.1f} s  (from scratch {r['from_scratch_seconds'] or 0:6.1f} s, {ratio})"
                f"  slowest cell {r['slowest_cell']} {r['slowest_cell_seconds']:.1f} s{flag}",
                flush=True,
            )
    out = {
        "commit": store.git_commit(),
        "cpus": os.cpu_count(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "target_seconds": TARGET_S,
        "notebooks": rows,
        "from_scratch_run": {"seconds": scratch.get("seconds")},
    }
    store.write_atomic(Path(args.out), json.dumps(out, indent=2) + "\n")
    worst = max(r["seconds"] for r in rows)
    print(f"slowest notebook {worst:.1f} s (target {TARGET_S:.0f} s); written to {Path(args.out).name}")
    return 0 if worst <= TARGET_S and not any(r["trained_or_sampled"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
