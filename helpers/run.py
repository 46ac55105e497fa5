"""`python -m helpers.run`: execute the notebooks in numeric order with Papermill.

    python -m helpers.run --profile cpu                 # every notebook, results in results/cpu/
    python -m helpers.run --profile cpu --only 03       # one notebook
    python -m helpers.run --profile cpu --from 02       # 02 and everything after it
    python -m helpers.run --profile smoke -p seed=1     # extra notebook parameters
    python -m helpers.run --profile gpu --env deepcoder # the series on one environment: results/gpu/deepcoder/
    python -m helpers.run --profile gpu --env all       # the series on each of the four, one after another

Each notebook runs in the `python3` kernel (this interpreter) with `notebooks/` as its working directory and
the profile passed as the `profile` parameter. `--env NAME` runs the per-environment series: the notebooks get
`overrides={"series": NAME}` (merged with any `-p overrides=...`), so they run on NAME with the profile's
`per_env.NAME` settings and write to `results/<profile>/<NAME>/` (see `Config.series`); without `--env` nothing
changes. Parameter names and every series' configuration are checked before anything runs (Papermill itself
only warns about unknown parameters). Executed copies go to `results/<profile>[/<env>]/executed/`, never over the
sources, with `run.json` (each notebook's wall time and outcome) beside them. A series stops at its first failure
and names the notebook and the cell; with several environments the next one still runs, and the exit status
says whether all of them passed. Notebooks listed in the profile's `run.skip` are left out (not with `--only`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from pathlib import Path

from helpers.config import REPO_ROOT, Config, load
from helpers.store import profile_dir, write_atomic

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
# The paper's four tasks, in the order of its tables; `--env all` runs them in this order.
ALL_ENVS = ("deepcoder", "bfcl", "intercode_sql", "frozenlake")


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


def environments(arg: str | None) -> list[str | None]:
    """The series `--env` asks for: [None] (the profile as written), one environment, a comma list, or `all`."""
    from helpers.envs import available

    if arg is None:
        return [None]
    known = available()
    assert sorted(ALL_ENVS) == known, f"ALL_ENVS {ALL_ENVS} is out of date with the registry {known}"
    names = list(ALL_ENVS) if arg == "all" else [a.strip() for a in arg.split(",")]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise RunError(
            f"--env {arg}: {bad or arg!r} is not an environment; allowed: {', '.join(known)} or all"
        )
    if len(set(names)) != len(names):
        raise RunError(f"--env {arg}: an environment is given twice")
    return names


def series_params(params: dict, env: str | None) -> dict:
    """The notebook parameters of one series: `params` with `series` added to its `overrides`."""
    if env is None:
        return params
    overrides = params.get("overrides", {})
    if not isinstance(overrides, dict):
        raise RunError(f"-p overrides={overrides!r}: expected a dict of profile overrides")
    if overrides.get("series", env) != env:
        raise RunError(f"-p overrides sets series={overrides['series']!r}, but --env asks for {env!r}")
    return {**params, "overrides": {**overrides, "series": env}}


def planned(cfg: Config, paths: list[Path], only: str | None) -> list[Path]:
    """The notebooks one series runs: `paths` less the profile's `run.skip` (unless one was asked for by --only)."""
    if only is not None:
        return paths
    return [p for p in paths if p.name[:2] not in cfg.run.skip]


def run_series(cfg: Config, paths: list[Path], profile: str, params: dict) -> bool:
    """Run one series' notebooks in order, stopping at the first failure; `run.json` records what ran."""
    out_dir = profile_dir(cfg.results_name) / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)
    log: list[dict] = []
    skipped = [p.name for p in notebooks() if p.name[:2] in cfg.run.skip and p not in paths]
    if skipped:
        print(f"[{cfg.results_name}] left out (run.skip): {', '.join(skipped)}", flush=True)
    ok = True
    for path in paths:
        t0 = time.time()
        print(f"[{cfg.results_name}] {path.name} ...", flush=True)
        try:
            out = run_notebook(path, profile, params, cfg.run.cell_timeout, out_dir)
        except RunError as e:
            log.append(
                {"notebook": path.name, "seconds": round(time.time() - t0, 1), "ok": False, "error": str(e)}
            )
            print(f"error: [{cfg.results_name}] {e}", file=sys.stderr, flush=True)
            ok = False
            break
        log.append({"notebook": path.name, "seconds": round(time.time() - t0, 1), "ok": True})
        print(f"[{cfg.results_name}] {path.name} done in {time.time() - t0:.0f} s -> {out}", flush=True)
    total = sum(r["seconds"] for r in log)
    write_atomic(out_dir / "run.json", json.dumps({"series": cfg.results_name, "notebooks": log,
                                                   "seconds": round(total, 1), "ok": ok}, indent=2) + "\n")  # fmt: skip
    print(f"[{cfg.results_name}] {'done' if ok else 'FAILED'} in {total:.0f} s", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu", help="profile in configs/ (smoke, cpu, gpu, paper)")
    parser.add_argument("--only", help="run only the notebook with this number (e.g. 03)")
    parser.add_argument("--from", dest="start", help="run this notebook and every later one")
    parser.add_argument("--env", help="the per-environment series: frozenlake, deepcoder, bfcl, intercode_sql, "
                                      "a comma list of them, or all (results in results/<profile>/<env>/)")  # fmt: skip
    parser.add_argument("-p", "--param", action="append", default=[], help="notebook parameter name=value")
    args = parser.parse_args(argv)

    try:
        params = dict(parse_param(p) for p in args.param)
        chosen = select(notebooks(), args.only, args.start)
        plan = []
        for env in environments(args.env):  # check every series and notebook before running any
            p = series_params(params, env)
            cfg = load(args.profile, **p.get("overrides", {}))
            paths = planned(cfg, chosen, args.only)
            for path in paths:
                check_parameters(path, {"profile": args.profile, **p})
            plan.append((cfg, paths, p))
    except (RunError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    os.environ["KIT_BATCH"] = "1"
    failed = [cfg.results_name for cfg, paths, p in plan if not run_series(cfg, paths, args.profile, p)]
    if len(plan) > 1:
        print(f"series: {len(plan) - len(failed)} of {len(plan)} passed" + (f"; failed: {', '.join(failed)}"
              if failed else ""), flush=True)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
