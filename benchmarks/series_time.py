"""Where the time of a whole series goes: per notebook, per phase (the base's SFT, RL, evaluation, the probes and
analyses, the instrument's scripted players, the rest) and, inside the RL runs, the steps against the monitor, read
from what a run left under `results/<profile>/`: the manifests, the executed notebooks' cell times (papermill
records each cell's duration) and the runs' metrics logs.

    .venv/bin/python benchmarks/series_time.py --profile cpu

Run it after `make reproduce` (or `python -m helpers.run --profile cpu`); it measures nothing itself, so its
numbers are those of the machine and load the series ran on (the README's come from a run on 2 idle cores). A
cell is put in the first phase whose pattern its code matches (`PHASES`); RL runs two at a time, so their
worker-seconds add to about twice the RL cells' wall time.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import store

# (phase, pattern in a cell's code): the first that matches names the cell's phase
PHASES = [
    ("the base's SFT", r"testbed\.base\("),
    ("maps and tasks", r"testbed\.tasks\("),
    ("instrument (scripted players)", r"instrument\.section\("),
    (
        "probes and analyses",
        r"budget_swap\(|doorway_section\(|matched\.probe\(|recovery\.recover\(|llr\.record\(",
    ),
    ("evaluation", r"evaluate\(|testbed\.curve\(|controls\.sharpened\("),
    ("RL runs", r"train_runs\(|train_grid\("),
]


def phases(profile: str) -> dict[str, float]:
    """Seconds per phase (`PHASES`, else "other"), summed over the executed notebooks' cells."""
    out: dict[str, float] = {name: 0.0 for name, _ in PHASES} | {"other": 0.0}
    for path in sorted((store.profile_dir(profile) / "executed").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            seconds = cell.get("metadata", {}).get("papermill", {}).get("duration")
            if cell["cell_type"] != "code" or seconds is None:
                continue
            code = "".join(cell["source"])
            name = next((n for n, pattern in PHASES if re.search(pattern, code)), "other")
            out[name] += float(seconds)
    return out


def rl_split(profile: str) -> dict[str, float]:
    """Worker-seconds of every RL run's steps (rollout + update) and of its monitor (`monitor_s`, logged since
    issue 51)."""
    steps = monitor = 0.0
    for log in sorted(store.models_dir(profile).glob("*-s*-*/metrics.jsonl")):
        for r in store.Records(log):
            steps += r.get("rollout_s", 0.0) + r.get("update_s", 0.0)
            monitor += r.get("monitor_s") or 0.0
    return {"steps": steps, "monitor": monitor}


def breakdown(profile: str) -> list[tuple[str, float]]:
    """(what, seconds) rows: every notebook's wall time, then the base's SFT and each RL run's steps."""
    rows = []
    for manifest in sorted(store.profile_dir(profile).glob("[0-9][0-9]_*/manifest.json")):
        m = json.loads(manifest.read_text())
        rows.append((f"notebook {m['notebook']}", float(m["wall_time_s"])))
    for summary in sorted(store.models_dir(profile).glob("base-*/sft_summary.json")):
        s = json.loads(summary.read_text())
        rows.append((f"  SFT of {summary.parent.name} ({s['steps']} steps)", float(s["seconds"])))
    for log in sorted(store.models_dir(profile).glob("*-s*-*/metrics.jsonl")):
        steps = [r for r in store.Records(log) if "rollout_s" in r]
        if steps:
            seconds = sum(r["rollout_s"] + r["update_s"] for r in steps)
            rows.append((f"  RL {log.parent.name} ({len(steps)} steps, rollout + update)", seconds))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    args = ap.parse_args()
    rows = breakdown(args.profile)
    if not rows:
        print(f"no results under {store.profile_dir(args.profile)}: run the series first", file=sys.stderr)
        return 1
    total = sum(s for name, s in rows if name.startswith("notebook"))
    for name, s in rows:
        print(f"{name:60s} {s:7.0f} s")
    print(f"{'all notebooks':60s} {total:7.0f} s ({total / 60:.1f} min)")
    print("by phase (executed cells):")
    for name, s in phases(args.profile).items():
        print(f"  {name:58s} {s:7.0f} s ({100 * s / max(total, 1e-9):4.1f} %)")
    split = rl_split(args.profile)
    print(f"RL worker-seconds: steps {split['steps']:.0f} s, monitor {split['monitor']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
