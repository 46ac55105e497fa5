"""cgroups: one per sandbox, limiting the whole sandbox (memory of every process, thread, tmpfs file and shared
memory segment; the number of tasks; at most one CPU). cgroup v1 (memory and pids hierarchies) and v2 are both
used where this process may create cgroups (as root, or in a delegated subtree)."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import time

# A wrapper that moves itself into the sandbox's cgroups and then becomes bubblewrap, so that every process of the
# sandbox starts inside them: `sh -c JOIN sh <cgroup.procs files> -- bwrap ...`.
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class Cgroup:
    """One sandbox's cgroup (a directory per v1 hierarchy, or one v2 directory)."""

    def __init__(self, version: int, dirs: dict[str, str]) -> None:
        self.version = version
        self.dirs = dirs  # controller (or "" for v2) -> directory

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def _read(self, controller: str, name: str) -> str | None:
        d = self.dirs.get(controller if self.version == 1 else "")
        try:
            with open(os.path.join(d, name)) as f:
                return f.read()
        except (OSError, TypeError):
            return None

    def peak_bytes(self) -> int | None:
        """The sandbox's peak memory (v1 `memory.max_usage_in_bytes`, v2 `memory.peak` where the kernel has it)."""
        text = self._read("memory", "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        return int(text) if text and text.strip().isdigit() else None

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process of the sandbox so far (v1 `cpuacct.usage`, v2 `cpu.stat`), or None where
        this cgroup does not account it."""
        if self.version == 1:
            ctrl = "cpuacct" if "cpuacct" in self.dirs else "cpu"
            text = self._read(ctrl, "cpuacct.usage") if ctrl in self.dirs else None
            return int(text) / 1e9 if text and text.strip().isdigit() else None
        m = re.search(r"^usage_usec (\d+)$", self._read("", "cpu.stat") or "", re.MULTILINE)
        return int(m.group(1)) / 1e6 if m else None

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this sandbox."""
        text = self._read("memory", "memory.oom_control" if self.version == 1 else "memory.events") or ""
        m = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(m.group(1)) if m else 0

    def pids(self) -> set[int]:
        out: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError), open(path) as f:
                out |= {int(x) for x in f.read().split()}
        return out

    def remove(self) -> None:
        """Wait for the sandbox's processes to be gone (they die with its pid namespace), then remove it."""
        deadline = time.monotonic() + 5.0
        while self.pids() and time.monotonic() < deadline:
            kill = os.path.join(self.dirs.get("", ""), "cgroup.kill")
            if self.version == 2 and os.path.exists(kill):
                with contextlib.suppress(OSError), open(kill, "w") as f:
                    f.write("1")
            time.sleep(0.002)
        if self.pids():  # should not happen: the pid namespace is gone; last resort, by pid
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)


class CgroupTree:
    """Where this process may create cgroups for its sandboxes; `find()` says where, or why nowhere."""

    NAME = re.compile(r"^kit-sandbox-(\d+)-\d+$")

    def __init__(self, version: int, bases: dict[str, str]) -> None:
        self.version = version
        self.bases = bases  # controller -> parent directory (v1), or {"": directory} (v2)
        self._count = itertools.count()

    @classmethod
    def find(cls) -> tuple[CgroupTree | None, str]:
        """(tree, "") where sandboxes can get memory and pids limits, else (None, why not)."""
        try:
            with open("/proc/self/cgroup") as f:
                own = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
            with open("/proc/self/mountinfo") as f:
                mounts = [line.split() for line in f]
        except OSError as exc:
            return None, f"cannot read this process's cgroups ({exc})"
        v1_paths = {c: path for _, ctrls, path in own for c in ctrls.split(",") if c}
        v1, v2_mount = {}, None
        for m in mounts:
            sep = m.index("-")
            fstype, root, point, opts = m[sep + 1], m[3], m[4], m[sep + 3].split(",")
            if fstype == "cgroup":
                for c in {"memory", "pids", "cpu", "cpuacct"} & set(opts):
                    if c in v1_paths:
                        v1[c] = os.path.join(point, _relative(v1_paths[c], root).lstrip("/"))
            elif fstype == "cgroup2":
                v2_mount = (point, root)
        problems = []
        if "memory" in v1 and "pids" in v1:
            tree = cls(1, v1)
            why = tree._probe()
            if not why:
                return tree, ""
            problems.append(f"cgroup v1: {why}")
        if v2_mount is not None:
            v2_path = next((path for hid, ctrls, path in own if hid == "0" and ctrls == ""), None)
            if v2_path is not None:
                point, root = v2_mount
                mine = os.path.join(point, _relative(v2_path, root).lstrip("/"))
                for parent in dict.fromkeys([os.path.dirname(mine.rstrip("/")), point]):
                    base, why = cls._v2_base(parent)
                    if base:
                        tree = cls(2, {"": base})
                        why = tree._probe()
                        if not why:
                            return tree, ""
                    problems.append(f"cgroup v2 at {parent}: {why}")
        if not problems:
            problems.append("no cgroup hierarchy with the memory and pids controllers is mounted")
        return None, "; ".join(problems)

    @staticmethod
    def _v2_base(parent: str) -> tuple[str | None, str]:
        """A `kit-sandbox` directory under `parent` whose children get the memory and pids controllers."""
        try:
            with open(os.path.join(parent, "cgroup.controllers")) as f:
                available = set(f.read().split())
            if not {"memory", "pids"} <= available:
                return None, f"the memory and pids controllers are not available there ({sorted(available)})"
            wanted = " ".join(f"+{c}" for c in ("memory", "pids", "cpu") if c in available)
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                enabled = set(f.read().split())
            if not {"memory", "pids"} <= enabled:
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write(wanted)
            base = os.path.join(parent, "kit-sandbox")
            os.makedirs(base, exist_ok=True)
            with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join(f"+{c}" for c in ("memory", "pids", "cpu") if c in available))
            return base, ""
        except OSError as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def _probe(self) -> str:
        """Create and remove one cgroup, after clearing what dead kit processes left; '' if that works."""
        self._clear_stale()
        try:
            self.create(64 << 20, 8).remove()
        except OSError as exc:
            return f"cannot create a cgroup ({type(exc).__name__}: {exc})"
        return ""

    def _clear_stale(self) -> None:
        for base in set(self.bases.values()):
            with contextlib.suppress(OSError):
                for name in os.listdir(base):
                    m = self.NAME.match(name)
                    if m and not _alive(int(m.group(1))):
                        dirs = {c: os.path.join(b, name) for c, b in self.bases.items()}
                        Cgroup(self.version, {c: d for c, d in dirs.items() if os.path.isdir(d)}).remove()

    def create(self, memory_bytes: int, pids: int) -> Cgroup:
        """A new cgroup limited to `memory_bytes` of memory (no swap), `pids` tasks and one CPU."""
        name = f"kit-sandbox-{os.getpid()}-{next(self._count)}"
        if self.version == 1:
            dirs = {c: os.path.join(b, name) for c, b in self.bases.items()}
            settings = {
                "memory": [
                    ("memory.limit_in_bytes", memory_bytes),
                    ("memory.memsw.limit_in_bytes", memory_bytes),
                ],
                "pids": [("pids.max", pids)],
                "cpu": [("cpu.cfs_period_us", 100_000), ("cpu.cfs_quota_us", 100_000)],
                "cpuacct": [],  # CPU accounting only (`Cgroup.cpu_seconds`)
            }
        else:
            dirs = {"": os.path.join(self.bases[""], name)}
            settings = {
                "": [
                    ("memory.max", memory_bytes),
                    ("memory.swap.max", 0),
                    ("pids.max", pids),
                    ("cpu.max", "100000 100000"),
                ]
            }
        group = Cgroup(self.version, {})
        try:
            for controller, d in dirs.items():
                try:
                    os.mkdir(d)
                except OSError:
                    if controller in ("cpu", "cpuacct"):  # optional: see `Cgroup.cpu_seconds`
                        continue
                    raise
                group.dirs[controller] = d
                for fname, value in settings[controller]:
                    path = os.path.join(d, fname)
                    optional = fname.startswith(("memory.memsw", "memory.swap", "cpu."))
                    if optional and not os.path.exists(path):
                        continue
                    try:
                        with open(path, "w") as f:
                            f.write(str(value))
                    except OSError:
                        if not optional:
                            raise
        except BaseException:
            group.remove()
            raise
        return group


def _relative(path: str, root: str) -> str:
    if root not in ("/", "") and (path == root or path.startswith(root.rstrip("/") + "/")):
        return path[len(root) :] or "/"
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
