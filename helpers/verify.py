"""`python -m helpers.verify`: compare the `metrics.json` of a run with a reference run, leaf by leaf.

    python -m helpers.verify                                  # results/cpu against the committed results/cpu
    python -m helpers.verify --run /tmp/kit/cpu               # another run of the cpu profile
    python -m helpers.verify --run A --reference B            # any two results folders of one profile

A results folder's numbers are what its notebooks wrote to `metrics.json`. Two runs of the same recipe on two
machines must agree in every one of them except the timings (wall time, tokens per second: the keys in
`TIMING_KEYS`), which say how fast the machine was and nothing about the result. The reference defaults to the
version of `results/<profile>` committed at git's HEAD, read with `git show`, so a run in the working tree
can be checked against what the repository claims without a second checkout.

Exit status: 0 when every non-timing leaf is equal, 1 when any differs (each difference is printed: file, the
path of the leaf inside it, both values), 2 on bad input (a folder with no `metrics.json`).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.config import REPO_ROOT

# Keys whose values measure the machine, not the result.
TIMING_KEYS = frozenset({"seconds", "tokens_per_s", "seconds_per_step", "wall_time_s", "databases_ready_s"})


@dataclass(frozen=True)
class Difference:
    """One leaf that differs: `file` (relative to the results folder), `path` inside it, both values."""

    file: str
    path: str
    run: Any
    reference: Any

    def __str__(self) -> str:
        return f"{self.file} {self.path}: {self.run!r} (reference {self.reference!r})"


def leaves(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a JSON value as (path, value); timing keys are left out, with everything under them."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key not in TIMING_KEYS:
                yield from leaves(value, f"{path}/{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path or "/", obj


def _equal(a: Any, b: Any) -> bool:
    """Equal as JSON numbers are: exactly, with NaN equal to NaN (a metric that is NaN in both runs agrees)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare(run: dict[str, dict], reference: dict[str, dict]) -> tuple[list[Difference], int]:
    """The differing leaves of two runs (file name -> parsed metrics.json) and the number of leaves compared.

    A file or leaf present in one run only is a difference (its missing side is shown as `<missing>`)."""
    diffs: list[Difference] = []
    n = 0
    for name in sorted(set(run) | set(reference)):
        a = dict(leaves(run[name])) if name in run else {}
        b = dict(leaves(reference[name])) if name in reference else {}
        if name not in run or name not in reference:
            diffs.append(
                Difference(
                    name,
                    "/",
                    "<present>" if name in run else "<missing>",
                    "<present>" if name in reference else "<missing>",
                )
            )
            continue
        for path in sorted(set(a) | set(b)):
            n += 1
            va, vb = a.get(path, "<missing>"), b.get(path, "<missing>")
            if not _equal(va, vb):
                diffs.append(Difference(name, path, va, vb))
    return diffs, n


def read_folder(folder: Path) -> dict[str, dict]:
    """Every `metrics.json` below `folder` (relative name -> parsed), the executed copies and set-aside runs left out."""
    out = {}
    for path in sorted(folder.rglob("metrics.json")):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".") or "/executed/" in f"/{rel}":
            continue
        out[rel] = json.loads(path.read_text())
    return out


def read_committed(folder: Path, rev: str = "HEAD") -> dict[str, dict]:
    """Every `metrics.json` below `folder` as committed at `rev` (read with `git show`, no checkout needed)."""
    rel = folder.resolve().relative_to(REPO_ROOT).as_posix()
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", rel], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if listed.returncode:
        raise ValueError(f"git ls-tree {rev} {rel}: {listed.stderr.strip()}")
    out = {}
    for name in listed.stdout.split():
        if name.endswith("/metrics.json") or name == f"{rel}/metrics.json":
            text = subprocess.run(
                ["git", "show", f"{rev}:{name}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
            ).stdout
            out[Path(name).relative_to(rel).as_posix()] = json.loads(text)
    return out


def verify(run: Path, reference: Path | None = None, rev: str = "HEAD") -> tuple[list[Difference], int]:
    """Compare the run in `run` with `reference` (a folder), or with `run`'s own path as committed at `rev`."""
    got = read_folder(run)
    if not got:
        raise ValueError(f"{run}: no metrics.json below it (is it a results folder, e.g. results/cpu?)")
    if reference is not None:
        want = read_folder(reference)
        if not want:
            raise ValueError(f"{reference}: no metrics.json below it")
    else:  # the same profile's folder as committed: a run inside the repository by its own path, another by name
        inside = run.resolve().is_relative_to(REPO_ROOT)
        want = read_committed(run if inside else REPO_ROOT / "results" / run.name, rev)
        if not want:
            raise ValueError(f"{run}: nothing committed at {rev} to compare with (give --reference FOLDER)")
    return compare(got, want)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run", type=Path, default=REPO_ROOT / "results" / "cpu", help="the run's results folder"
    )
    parser.add_argument(
        "--reference", type=Path, help="a results folder (default: the run's folder at --rev)"
    )
    parser.add_argument("--rev", default="HEAD", help="the commit whose results are the reference")
    parser.add_argument("--most", type=int, default=50, help="print at most this many differences")
    a = parser.parse_args(argv)
    try:
        diffs, n = verify(a.run, a.reference, a.rev)
    except (ValueError, OSError, subprocess.CalledProcessError) as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2
    inside = a.run.resolve().is_relative_to(REPO_ROOT)
    ref = (
        a.reference
        if a.reference is not None
        else f"results/{a.run.name} as committed at {a.rev}"
        if not inside
        else f"{a.run} at {a.rev}"
    )
    if not diffs:
        print(f"verify: {n} leaves compared, every one equal to {ref} (timings ignored)")
        return 0
    for d in diffs[: a.most]:
        print(f"  {d}")
    more = f" (first {a.most} shown)" if len(diffs) > a.most else ""
    print(f"verify: {len(diffs)} of {n} leaves differ from {ref}{more} (timings ignored)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
