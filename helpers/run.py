"""`python -m helpers.run`: execute the notebooks in numeric order with Papermill.

    python -m helpers.run --profile cpu                 # every notebook
    python -m helpers.run --profile cpu --only 03       # one notebook
    python -m helpers.run --profile cpu --from 02       # 02 and everything after it
    python -m helpers.run --profile smoke -p seed=1     # extra notebook parameters

Each notebook runs in the `python3` kernel (this interpreter) with `notebooks/` as its working directory and
the profile passed as the `profile` parameter. Parameter names are checked against each notebook's
`parameters` cell before anything runs (Papermill itself only warns). Executed copies go to
`results/<profile>/executed/`, never over the sources. The run stops at the first failure and names the
notebook and the cell.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path

from helpers.config import REPO_ROOT, load
from helpers.store import profile_dir

NOTEBOOK_DIR = REPO_ROOT / "notebooks"


class RunError(RuntimeError):
    """A notebook could not be run; the message names it and, for a failed cell, the cell."""


def notebooks(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered notebooks (NN_name.ipynb), in order."""
    found = sorted(p for p in directory.glob("[0-9][0-9]_*.ipynb"))
    return found


def select(paths: list[Path], only: str | None = None, start: str | None = None) -> list[Path]:
    """Filter notebooks by number prefix (`--only 03`, `--from 02`)."""
    if only is not None:
        chosen = [p for p in paths if p.name.startswith(only.zfill(2))]
        if not chosen:
            raise RunError(f"--only {only}: no notebook {only.zfill(2)}_*.ipynb in {NOTEBOOK_DIR}")
        return chosen
    if start is not None:
        chosen = [p for p in paths if p.name[:2] >= start.zfill(2)]
        if not chosen:
            raise RunError(f"--from {start}: no notebook numbered {start.zfill(2)} or later")
        return chosen
    return paths


def check_parameters(path: Path, params: dict) -> None:
    """Fail if a parameter is not declared in the notebook's `parameters` cell."""
    import papermill

    declared = papermill.inspect_notebook(str(path))
    if not declared:
        raise RunError(f"{path.name} has no cell tagged 'parameters'")
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise RunError(
            f"{path.name}: unknown parameter(s) {unknown}; the notebook declares {sorted(declared)}"
        )


def run_notebook(path: Path, profile: str, params: dict, timeout: int, out_dir: Path) -> Path:
    """Execute one notebook; returns the executed copy's path."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    try:
        papermill.execute_notebook(
            str(path),
            str(out),
            parameters={"profile": profile, **params},
            kernel_name="python3",
            cwd=str(path.parent),
            execution_timeout=timeout,
            progress_bar=False,
            log_output=False,
            coalesce_streams=True,
        )
    except PapermillExecutionError as e:
        raise RunError(
            f"{path.name} failed in cell {e.exec_count} ({e.ename}: {e.evalue}); "
            f"the executed copy with the traceback is {out}"
        ) from e
    return out


def parse_param(text: str) -> tuple[str, object]:
    """`name=value`; the value is a Python literal when it parses as one, else a string."""
    if "=" not in text:
        raise RunError(f"-p {text!r}: expected name=value")
    name, value = text.split("=", 1)
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu", help="profile in configs/ (smoke, cpu, gpu, paper)")
    parser.add_argument("--only", help="run only the notebook with this number (e.g. 03)")
    parser.add_argument("--from", dest="start", help="run this notebook and every later one")
    parser.add_argument("-p", "--param", action="append", default=[], help="notebook parameter name=value")
    args = parser.parse_args(argv)

    try:
        cfg = load(args.profile)
        params = dict(parse_param(p) for p in args.param)
        chosen = select(notebooks(), args.only, args.start)
        for path in chosen:  # check every notebook before running any
            check_parameters(path, {"profile": args.profile, **params})
        os.environ["KIT_BATCH"] = "1"
        out_dir = profile_dir(cfg.profile) / "executed"
        for path in chosen:
            t0 = time.time()
            print(f"[{cfg.profile}] {path.name} ...", flush=True)
            out = run_notebook(path, args.profile, params, cfg.run.cell_timeout, out_dir)
            print(f"[{cfg.profile}] {path.name} done in {time.time() - t0:.0f} s -> {out}", flush=True)
    except (RunError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
