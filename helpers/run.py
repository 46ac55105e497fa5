"""`python -m helpers.run`: execute the notebooks in numeric order with Papermill.

    python -m helpers.run --profile cpu                  # every notebook, results in results/cpu/
    python -m helpers.run --profile cpu --fresh          # the same from scratch (what `make reproduce` runs)
    python -m helpers.run --profile cpu --only 03        # one notebook
    python -m helpers.run --profile cpu --from 02        # 02 and everything after it
    python -m helpers.run --profile smoke -p seed=1      # a config key: becomes overrides={"seed": 1}
    python -m helpers.run --profile smoke -p train.lr 1e-4 -p 'overrides={"sweep": {"n_samples": 4}}'
    python -m helpers.run --profile gpu --env deepcoder  # the series on one environment: results/gpu/deepcoder/
    python -m helpers.run --profile gpu --env all        # the series on each of the four, one after another
    python -m helpers.run --profile smoke --one-kernel   # every notebook of a series in one kernel (faster)

Each notebook runs in the `python3` kernel (this interpreter) with `notebooks/` as its working directory and
the profile passed as the `profile` parameter. `-p` takes `name=value` or, as Papermill does, `NAME VALUE`; the
value is a Python literal where it parses as one (`1e-4`, `[0, 1]`, `None`), else a string. A name the notebooks
declare (`overrides`) is passed as it is; a config key, dotted or not (`seed`, `train.lr`), becomes an entry of
`overrides` (merged with an explicit `-p overrides=...`). `--env NAME` runs the per-environment series: the
notebooks get `overrides={"series": NAME}` too, so they run on NAME with the profile's `per_env.NAME` settings
and write to `results/<profile>/<NAME>/` (see `Config.series`); without `--env` nothing changes. Parameter
names and every series' configuration (override keys and values) are checked before anything runs or moves.

Executed copies go to `results/<profile>[/<env>]/executed/`, never over the sources, with `run.json` (each
notebook's wall time, outcome and copies) beside them. A notebook executes into `NN_name.running.ipynb` and is
renamed to `NN_name.ipynb` only when it passed, so a failed run keeps the last good copy; the failed one is
`NN_name.failed.ipynb` beside it (removed by the next run that passes). While a notebook runs, one line per code
cell says where it is. A series stops at its first failure and names the notebook and the cell; with several
environments the next one still runs, and the exit status says whether all of them passed. Notebooks listed in
the profile's `run.skip` are left out (not with `--only`).

`--one-kernel` runs each series' notebooks in one kernel instead of one kernel each: between two notebooks the
kernel's figures are closed, its namespace cleared (`%reset -f`), its working folder and execution count set back,
so each notebook starts from an empty namespace as in a kernel of its own; only imported modules stay loaded. It
saves each notebook's kernel start and imports (about 12 s on 2 cores: the default smoke series alone 197 -> 111 s) and gives the same results (the test suite's
smoke series uses it, and so does `make reproduce` on the cpu profile, whose tiny model leaves little memory behind:
about 8 s a notebook there, issue 51; on the GPU profiles each notebook's memory goes with its own kernel).

`--fresh` rebuilds a series from scratch: after every check passed (and none of its folders has a writer at work,
`helpers.store.one_writer`), the series' folder (`results/<profile>`, or
`results/<profile>/<env>` with `--env`) is moved aside to `results/.previous-<name>-<time>/`, deleted once every
notebook passed and kept (the run says where) when one failed. Without `--env` the profile's models
(`results/<profile>/models/`) go aside with it and are rebuilt; the per-environment series' folders in it stay.
With `--env` the models, shared by every series of the profile, stay where they are.

At the end of a series the runner compares each notebook's `metrics.json` with the committed run of the same
recipe (`results/<series>/<NN_name>/` at git's HEAD, when its `manifest.json` has the same profile, series and
`config`, every knob) and prints a warning naming the notebook and the first differing number when any
non-timing number differs (`make verify` lists them all).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import base_model, memory, verify
from helpers.config import REPO_ROOT, Config, ConfigError, load
from helpers.nbtools import kernel_config
from helpers.progress import batch_environment
from helpers.store import busy, profile_dir, results_root, write_atomic

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
# The paper's four tasks, in the order of its tables; `--env all` runs them in this order.
ALL_ENVS = ("deepcoder", "bfcl", "intercode_sql", "frozenlake")
PARAM_HINT = "expected -p name=value or -p NAME VALUE (e.g. -p seed=1, -p train.lr 1e-4)"


class RunError(RuntimeError):
    """A notebook could not be run; the message names it and, for a failed cell, the cell."""


def notebooks(directory: Path | None = None) -> list[Path]:
    """The numbered notebooks (NN_name.ipynb) of `directory` (default `NOTEBOOK_DIR`), in order."""
    return sorted((directory or NOTEBOOK_DIR).glob("[0-9][0-9]_*.ipynb"))


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


@functools.lru_cache(maxsize=64)
def _declared(path: str, mtime: float) -> tuple[str, ...]:
    import papermill

    return tuple(papermill.inspect_notebook(path))


def declared_parameters(path: Path) -> set[str]:
    """The names the notebook's `parameters` cell declares (an error if it has none)."""
    names = _declared(str(path), path.stat().st_mtime)
    if not names:
        raise RunError(f"{path.name} has no cell tagged 'parameters'")
    return set(names)


def check_parameters(path: Path, params: dict) -> None:
    """Fail if a parameter is not declared in the notebook's `parameters` cell."""
    declared = declared_parameters(path)
    unknown = sorted(set(params) - declared)
    if unknown:
        raise RunError(
            f"{path.name}: unknown parameter(s) {unknown}; the notebook declares {sorted(declared)}"
        )


# ------------------------------------------------------------------------------------------- parameters


def parse_value(text: str, name: str = "value") -> Any:
    """A Python literal when `text` parses as one (`1e-4`, `[0, 1]`, `None`), else the string itself. A value that
    looks like a literal the parser cannot take (nested too deeply: 3000 unary minus signs or a `not` chain raised a
    raw RecursionError; an integer beyond Python's 4300 digits, which was read as a string and blamed as "expected
    an integer"; an unhashable set item or dict key) is a ConfigError naming `name`."""
    try:
        value = ast.literal_eval(text)
    except (RecursionError, MemoryError):
        raise ConfigError(
            f"-p {name}: the value ({len(text)} characters) is nested too deeply to read; give a plain literal",
            name,
        ) from None
    except SyntaxError as e:
        if "integer string conversion" in str(e):
            digits = len(re.sub(r"\D", "", text))
            raise ConfigError(
                f"-p {name}: an integer of {digits} digits, too long to read (at most 4300 digits; every integer "
                f"knob is at most 2**31 - 1)",
                name,
            ) from None
        return text
    except TypeError as e:
        raise ConfigError(f"-p {name}: {text[:80]!r} is not a literal the kit can read ({e})", name) from None
    except ValueError:
        return text
    if (
        isinstance(value, int) and value.bit_length() > 14_000
    ):  # about 4200 digits: it could not even be printed
        raise ConfigError(
            f"-p {name}: an integer of {value.bit_length()} bits, too long to read (every integer knob is at most "
            "2**31 - 1)",
            name,
        )
    return value


def parse_param(words: str | list[str]) -> tuple[str, Any]:
    """One `-p`: `name=value` or `NAME VALUE` (Papermill's form); the value as `parse_value` reads it."""
    words = [words] if isinstance(words, str) else list(words)
    given = " ".join(words)
    if len(words) == 1 and "=" in words[0]:
        name, value = words[0].split("=", 1)
    elif len(words) == 2 and "=" not in words[0]:
        name, value = words
    elif len(words) == 1:
        raise RunError(f"-p {given}: no value; {PARAM_HINT}")
    else:
        raise RunError(f"-p {given}: {len(words)} words; {PARAM_HINT} (quote a value with spaces)")
    name = name.strip()
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise RunError(f"-p {given}: {name!r} is not a parameter name or a dotted config key; {PARAM_HINT}")
    return name, parse_value(value, name)


def _config_path(name: str) -> list[str] | None:
    """`train.lr` (or `train__lr`) as ['train', 'lr'] when its first part is a section or key of `Config`."""
    parts = re.split(r"\.|__", name)
    keys = {f.name for f in dataclasses.fields(Config)} - {"profile"}
    return parts if parts[0] in keys else None


def _merge_overrides(into: dict, extra: dict, prefix: str = "") -> None:
    """Merge nested `extra` into `into`; the same key given twice is an error."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge_overrides(into[key], value, f"{prefix}{key}.")
        elif key in into:
            raise RunError(
                f"-p: {prefix}{key} is given twice (once in overrides, once as -p {prefix}{key}=...)"
            )
        else:
            into[key] = value


def notebook_params(pairs: list[tuple[str, Any]], declared: set[str]) -> dict:
    """The notebook parameters for `-p` pairs: names in `declared` pass as they are, config keys go into
    `overrides` (nested, as `config.load` takes them), anything else is an error naming it."""
    params: dict[str, Any] = {}
    dotted: dict[str, Any] = {}
    seen: set[str] = set()
    for name, value in pairs:
        if name in seen:
            raise RunError(f"-p {name} is given twice")
        seen.add(name)
        if name == "profile":
            raise RunError("-p profile: choose the profile with --profile")
        if name in declared:
            params[name] = value
            continue
        path = _config_path(name)
        if path is None:
            raise RunError(
                f"-p {name}: unknown parameter {name!r}: the notebooks declare {sorted(declared)} "
                f"and it is not a config key (such as seed or train.lr)"
            )
        node = dotted
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise RunError(f"-p {name}: {part} is given as a value and as a section")
        if path[-1] in node:
            raise RunError(f"-p {name}: {'.'.join(path)} is given twice")
        node[path[-1]] = value
    if "overrides" in params and not isinstance(params["overrides"], dict):
        raise RunError(
            f"-p overrides={params['overrides']!r}: expected a dict, e.g. "
            '-p \'overrides={"train": {"lr": 1e-4}}\' (or -p train.lr=1e-4)'
        )
    if "overrides" in params:
        _check_keys(params["overrides"], "overrides")
    if dotted:
        import copy

        overrides = copy.deepcopy(params.get("overrides", {}))
        _merge_overrides(overrides, dotted)
        params["overrides"] = overrides
    return params


def _check_keys(value: Any, where: str) -> None:
    """Every key of the nested override dicts is a string (a config key): `{1: 2}` raised a raw TypeError."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"-p {where}: the key {key!r} is not a config key name (a string)", where)
            _check_keys(item, f"{where}.{key}")


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


# ------------------------------------------------------------------------------------------------ the plan


@dataclass
class Series:
    """One series to run: its configuration, its notebooks and their parameters (without `profile`)."""

    cfg: Config
    paths: list[Path]
    params: dict


@dataclass
class Plan:
    """Everything a command line asks for, checked: the profile, each series, and whether to start afresh."""

    profile: str
    series: list[Series]
    fresh: bool = False
    one_kernel: bool = False


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m helpers.run` (abbreviated options are refused)."""
    p = argparse.ArgumentParser(
        prog="python -m helpers.run", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    p.add_argument(
        "--profile", default="cpu", help="profile in configs/ (smoke, cpu, gpu, paper) or a .yaml path"
    )
    p.add_argument("--only", help="run only the notebook with this number (e.g. 03)")
    p.add_argument("--from", dest="start", help="run this notebook and every later one")
    p.add_argument(
        "--env",
        help="the per-environment series: frozenlake, deepcoder, bfcl, intercode_sql, "
        "a comma list of them, or all (results in results/<profile>/<env>/)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rebuild from scratch: move the series' results aside "
        "first (results/.previous-*), delete them when every notebook passed",
    )
    p.add_argument(
        "--one-kernel",
        action="store_true",
        help="run each series' notebooks in one kernel, its "
        "namespace cleared between notebooks (saves each notebook's start-up; same results)",
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        nargs="+",
        default=[],
        metavar=("NAME[=VALUE]", "VALUE"),
        help="a notebook parameter or a config key (seed, train.lr): name=value or NAME VALUE",
    )
    return p


def make_plan(argv: list[str] | None = None) -> Plan:
    """Parse and check a command line without running or moving anything: parameter names against every
    notebook, override keys and values by loading each series' configuration. Raises RunError or ConfigError."""
    args = parser().parse_args(argv)
    if args.fresh and (args.only is not None or args.start is not None):
        raise RunError("--fresh rebuilds whole series; it cannot be combined with --only or --from")
    pairs = [parse_param(words) for words in args.param]
    chosen = select(notebooks(), args.only, args.start)
    declared = set().union(*(declared_parameters(p) for p in chosen)) - {"profile"}
    params = notebook_params(pairs, declared)
    out = []
    for env in environments(args.env):  # check every series and notebook before running any
        p = series_params(params, env)
        overrides = p.get("overrides", {})
        if "profile" in overrides:
            raise RunError("-p overrides: 'profile' is not an override; choose the profile with --profile")
        cfg = load(args.profile, **overrides)
        paths = planned(cfg, chosen, args.only)
        for path in paths:
            check_parameters(path, {"profile": args.profile, **p})
        check_memory(cfg, paths)
        out.append(Series(cfg, paths, p))
    return Plan(args.profile, out, args.fresh, args.one_kernel)


def check_memory(cfg, paths: list[Path]) -> None:
    """On a GPU: print the memory plan of each RL run the series' notebooks make, and refuse one that cannot fit
    (`helpers.memory`) before anything starts, with the numbers and the knob to change. On the CPU: nothing."""
    gpu = memory.gpu_bytes_of(memory.device_of(cfg))
    try:
        lines = memory.check_series(cfg, [path.name[:2] for path in paths], gpu)
    except memory.MemoryPlanError as e:
        raise RunError(f"{cfg.env.name}: {e}") from None
    for line in lines:
        print(f"{cfg.env.name}: {line}", flush=True)


# -------------------------------------------------------------------------------------------- execution


class CellProgress:
    """nbclient hooks that print one line per code cell as it starts, so a batch run shows where it is."""

    def __init__(self, label: str, name: str, t0: float):
        self.label, self.name, self.t0 = label, name, t0
        self.order: dict[int, int] = {}

    def on_notebook_start(self, notebook: Any, **_: Any) -> None:
        """Number the code cells that will run (nbclient skips empty ones), counting Papermill's parameters."""
        runs = [
            i
            for i, c in enumerate(notebook.cells)
            if c.cell_type == "code"
            and c.source.strip()
            and "skip-execution" not in c.metadata.get("tags", [])
        ]
        self.order = {i: k for k, i in enumerate(runs, 1)}

    def on_cell_execute(self, cell: Any, cell_index: int, **_: Any) -> None:
        k = self.order.get(cell_index, "?")
        print(
            f"[{self.label}] {self.name} cell {k}/{len(self.order)} · {time.time() - self.t0:.0f} s elapsed",
            flush=True,
        )


class SharedKernel:
    """One `python3` kernel for every notebook of a series (`--one-kernel`), started in `cwd`. `prepare()` before
    each notebook: from the second one on it closes the figures, clears the namespace (`%reset -f`), goes back to
    `cwd` and sets the execution count back to 1, so a notebook finds an empty namespace, as in a kernel of its own;
    only imported modules stay loaded. A context manager: the kernel is shut down on leaving."""

    # before the first notebook: keep the fresh namespace's module attributes (`__spec__`, `__loader__`, ...), which
    # `%reset` deletes and some code reads (multiprocessing reads `__main__.__spec__`)
    STASH = (
        "get_ipython()._kit_fresh = {k: v for k, v in get_ipython().user_ns.items() if k.startswith('__')}\n"
    )
    RESET = (
        "if 'matplotlib.pyplot' in __import__('sys').modules:\n"
        "    __import__('sys').modules['matplotlib.pyplot'].close('all')\n"
        "get_ipython().run_line_magic('reset', '-f')\n"
        "get_ipython().user_ns.update(get_ipython()._kit_fresh)\n"
        "__import__('os').chdir({cwd!r})\n"
        "__import__('gc').collect()\n"
        "__import__('gc').freeze()\n"
        "get_ipython().execution_count = 1\n"
    )

    READY_TIMEOUT = 120  # seconds for the kernel to answer kernel_info, and to clear its namespace

    def __init__(self, cwd: Path):
        from jupyter_client.manager import AsyncKernelManager
        from nbclient.util import run_sync

        self.cwd, self.used = Path(cwd), False
        self.km = AsyncKernelManager(kernel_name="python3", config=kernel_config())
        run_sync(self.km.start_kernel)(cwd=str(self.cwd))

    def prepare(self) -> None:
        """Make the kernel ready for the next notebook: before the first, note its fresh namespace; before each
        later one, clear the namespace back to that."""
        from jupyter_client.blocking import BlockingKernelClient
        from nbclient.util import run_sync

        code = self.STASH if not self.used else self.RESET.format(cwd=str(self.cwd))
        self.used = True
        info = self.km.get_connection_info(session=True)
        for key in ("curve_publickey", "curve_secretkey"):  # as KernelManager.client() passes them
            if isinstance(info.get(key), str):
                info[key] = info[key].encode("ascii")
        kc = BlockingKernelClient(**info)
        # no heartbeat channel: a client without its manager judges liveness by a heartbeat answered within 1 s,
        # which a kernel still starting on a loaded machine can miss ("Kernel died before replying to
        # kernel_info" from a live kernel); liveness is read from the kernel's process instead
        kc.start_channels(hb=False)
        try:
            if not run_sync(self.km.is_alive)():
                raise RunError("the shared kernel's process has exited")
            kc.wait_for_ready(timeout=self.READY_TIMEOUT)
            reply = kc.execute_interactive(
                code,
                timeout=self.READY_TIMEOUT,
                store_history=False,
                allow_stdin=False,
                output_hook=lambda msg: None,
            )
        finally:
            kc.stop_channels()
        if reply["content"]["status"] != "ok":
            raise RunError(
                f"the shared kernel could not be made ready for the next notebook: {reply['content']}"
            )

    def close(self) -> None:
        from nbclient.util import run_sync

        if run_sync(self.km.is_alive)():
            run_sync(self.km.shutdown_kernel)(now=True)
        run_sync(self.km.cleanup_resources)()

    def __enter__(self) -> SharedKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def copies(out_dir: Path, path: Path) -> tuple[Path, Path, Path]:
    """(final, while running, failed) paths of a notebook's executed copy."""
    stem = path.stem
    return out_dir / path.name, out_dir / f"{stem}.running.ipynb", out_dir / f"{stem}.failed.ipynb"


def run_notebook(
    path: Path,
    profile: str,
    params: dict,
    timeout: int,
    out_dir: Path,
    label: str | None = None,
    t0: float | None = None,
    kernel: SharedKernel | None = None,
) -> Path:
    """Execute one notebook into a temporary copy beside the executed one and rename it into place only if it
    passed; a failed copy becomes `NN_name.failed.ipynb` and the good copy stays. Returns the executed copy. The
    notebook runs in a kernel of its own, or in `kernel` (`--one-kernel`), made ready for it first."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    out, running, failed = copies(out_dir, path)
    progress = CellProgress(label or profile, path.name, time.time() if t0 is None else t0)
    try:
        if kernel is not None:
            kernel.prepare()
        papermill.execute_notebook(
            str(path),
            str(running),
            parameters={"profile": profile, **params},
            kernel_name="python3",
            cwd=str(path.parent),
            execution_timeout=timeout,
            progress_bar=False,
            log_output=False,
            coalesce_streams=True,
            on_notebook_start=progress.on_notebook_start,
            on_cell_execute=progress.on_cell_execute,
            config=kernel_config(),
            **({} if kernel is None else {"km": kernel.km}),
        )
    except BaseException as e:
        if running.exists():
            running.replace(failed)
        else:  # nothing was written: a failed copy from an earlier run must not pass for this one's
            failed.unlink(missing_ok=True)
        kept = f"; the last good copy {out.name} is kept" if out.exists() else ""
        if isinstance(e, PapermillExecutionError):
            raise RunError(
                f"{path.name} failed in cell {e.exec_count} ({e.ename}: {e.evalue}); "
                f"the executed copy with the traceback is {failed}{kept}"
            ) from e
        if isinstance(e, Exception):
            where = f"; what ran is in {failed}" if failed.exists() else ""
            raise RunError(f"{path.name} failed ({type(e).__name__}: {e}){where}{kept}") from e
        raise
    running.replace(out)
    failed.unlink(missing_ok=True)
    return out


def set_aside(cfg: Config) -> Path | None:
    """Move the series' results folder to `<results root>/.previous-<name>-<time>/` (`--fresh`); None when there
    is none. The bare series keeps its per-environment series' folders in place (they are series of their own)."""
    folder = profile_dir(cfg.results_name)
    if not folder.exists():
        return None
    who = busy(folder)  # a writer still in there would go on writing into the folder set aside, then deleted
    if who is not None:
        raise RunError(f"--fresh: {who}; nothing was moved: wait for it to finish (or stop it) and run again")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = results_root() / f".previous-{cfg.results_name.replace('/', '-')}-{stamp}"
    previous, n = base, 1
    while previous.exists():
        n += 1
        previous = base.with_name(f"{base.name}-{n}")
    folder.replace(previous)
    if cfg.series is None:
        from helpers.envs import available

        keep = [previous / env for env in available() if (previous / env).is_dir()]
        if keep:
            folder.mkdir(parents=True)
            for d in keep:
                d.replace(folder / d.name)
    return previous


def _committed_json(rel: str, rev: str = "HEAD") -> dict | None:
    """A JSON file of the repository as committed at `rev`; None when it is not there (or git is not)."""
    try:
        got = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=REPO_ROOT, capture_output=True, text=True)
    except OSError:
        return None
    return json.loads(got.stdout) if got.returncode == 0 else None


def _recipe(manifest: dict) -> tuple:
    """What makes two runs the same recipe: profile, series and every knob, guards left out (a guard such as
    `sft.max_seconds` never decides a number, base_model.GUARDS)."""
    config = json.loads(json.dumps(manifest.get("config") or {}))
    for guard in base_model.GUARDS:
        config.get("sft", {}).pop(guard, None)
    return manifest.get("profile"), manifest.get("series"), config


def differs_from_committed(results_name: str, stems: list[str], rev: str = "HEAD") -> list[str]:
    """One line per notebook whose `metrics.json` differs (timings ignored, helpers.verify) from the committed
    run of the same recipe: `results/<results_name>/<stem>/` at `rev`, when its manifest has the same profile,
    series and `config` as this run's. Notebooks with no committed run of their recipe are left out."""
    out = []
    for stem in stems:
        folder = profile_dir(results_name) / stem
        if not (folder / "metrics.json").exists() or not (folder / "manifest.json").exists():
            continue
        rel = f"results/{results_name}/{stem}"
        committed = _committed_json(f"{rel}/manifest.json", rev)
        mine = json.loads((folder / "manifest.json").read_text())
        if committed is None or _recipe(mine) != _recipe(committed):
            continue
        reference = _committed_json(f"{rel}/metrics.json", rev)
        if reference is None:
            continue
        diffs, n = verify.compare(
            {stem: json.loads((folder / "metrics.json").read_text())}, {stem: reference}
        )
        if diffs:
            out.append(
                f"{stem}: {len(diffs)} of {n} numbers differ from the committed run of the same recipe "
                f"({rel} at {rev}), e.g. {diffs[0]}; `make verify` lists them"
            )
    return out


def run_series(cfg: Config, paths: list[Path], profile: str, params: dict, one_kernel: bool = False) -> bool:
    """Run one series' notebooks in order, stopping at the first failure; `run.json` records what ran. With
    `one_kernel` they share one kernel (`SharedKernel`), shut down when the series ends."""
    with contextlib.ExitStack() as stack:
        kernel = stack.enter_context(SharedKernel(NOTEBOOK_DIR)) if one_kernel and paths else None
        return _run_series(cfg, paths, profile, params, kernel)


def _run_series(
    cfg: Config, paths: list[Path], profile: str, params: dict, kernel: SharedKernel | None
) -> bool:
    label = cfg.results_name
    out_dir = profile_dir(label) / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)
    log: list[dict] = []
    skipped = [p.name for p in notebooks() if p.name[:2] in cfg.run.skip and p not in paths]
    if skipped:
        print(f"[{label}] left out (run.skip): {', '.join(skipped)}", flush=True)
    ok = True
    for path in paths:
        t0 = time.time()
        print(f"[{label}] {path.name} ...", flush=True)
        final, _, failed = copies(out_dir, path)
        try:
            out = run_notebook(path, profile, params, cfg.run.cell_timeout, out_dir, label, t0, kernel)
        except RunError as e:
            log.append(
                {
                    "notebook": path.name,
                    "seconds": round(time.time() - t0, 1),
                    "ok": False,
                    "error": str(e),
                    "failed_copy": failed.name if failed.exists() else None,
                    "kept_copy": final.name if final.exists() else None,
                }
            )
            print(f"error: [{label}] {e}", file=sys.stderr, flush=True)
            ok = False
            break
        log.append(
            {"notebook": path.name, "seconds": round(time.time() - t0, 1), "ok": True, "copy": out.name}
        )
        print(f"[{label}] {path.name} done in {time.time() - t0:.0f} s -> {out}", flush=True)
    total = sum(r["seconds"] for r in log)
    write_atomic(
        out_dir / "run.json",
        json.dumps({"series": label, "notebooks": log, "seconds": round(total, 1), "ok": ok}, indent=2)
        + "\n",
    )
    print(f"[{label}] {'done' if ok else 'FAILED'} in {total:.0f} s", flush=True)
    passed = [Path(r["notebook"]).stem for r in log if r["ok"]]
    for line in differs_from_committed(label, passed):
        print(f"warning: [{label}] {line}", file=sys.stderr, flush=True)
    return ok


def execute(plan: Plan) -> list[str]:
    """Run every series of `plan` (with `--fresh`, each from scratch); returns the names of those that failed."""
    os.environ.update(batch_environment())  # KIT_BATCH=1 and third-party bars off, for the kernels
    failed = []
    for s in plan.series:
        name = s.cfg.results_name
        previous = set_aside(s.cfg) if plan.fresh else None
        if previous is not None:
            print(f"[{name}] --fresh: the previous results are set aside in {previous}", flush=True)
        ok = False
        try:
            ok = run_series(s.cfg, s.paths, plan.profile, s.params, plan.one_kernel)
        finally:
            if previous is not None and ok:
                shutil.rmtree(previous)
                print(f"[{name}] --fresh: every notebook passed; removed {previous}", flush=True)
            elif previous is not None:
                print(
                    f"error: [{name}] the previous results are kept in {previous}",
                    file=sys.stderr,
                    flush=True,
                )
        if not ok:
            failed.append(name)
    return failed


def main(argv: list[str] | None = None) -> int:
    """The command line: check everything first (exit 1 naming the problem), then run; exit 1 if a series failed."""
    try:
        plan = make_plan(argv)
    except (RunError, ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    failed = execute(plan)
    if len(plan.series) > 1:
        print(
            f"series: {len(plan.series) - len(failed)} of {len(plan.series)} passed"
            + (f"; failed: {', '.join(failed)}" if failed else ""),
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
