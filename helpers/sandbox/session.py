"""One sandboxed child process for a program, and the channel to it: how a run is isolated (`plan`), the child's
configuration and command line, commands and their answers, read back in order within the stall guard and the
channel's size cap. A test's command is sent only once every earlier test is answered: the program never holds a
later test's input (in batch mode a program read the buffered commands and learnt the next tests' inputs)."""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import wire
from .base import (
    SANDBOX_HOME,
    ChannelError,
    Died,
    Garbled,
    Limits,
    SandboxError,
    SandboxUnavailable,
    Stalled,
    Timeout,
    isolation_setting,
)
from .bwrap import boundary, bwrap_command, interpreter, stdlib_roots
from .cgroups import JOIN, Cgroup, CgroupTree
from .seccomp import program_fd
from .uids import user_process_count

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")  # the program the child runs
WIRE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py")  # its codec, the parent's own
CPU_POLL_S = 0.1  # how often the whole sandbox's CPU time is read while an answer is awaited
CPU_SIGNALS = (signal.SIGPROF, signal.SIGXCPU)  # the child's CPU-time timer, and RLIMIT_CPU behind it
_AHEAD_BYTES, _AHEAD_COMMANDS = 32768, 64  # commands sent before their turn: well under a pipe's 64 KiB
# Modules imported before privileges drop where the standard library is not readable by the sandbox uid (weak
# mode as root, without bubblewrap's bind mounts: e.g. an interpreter under /root).
PRELOADED = (
    "abc",
    "array",
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "io",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "queue",
    "random",
    "re",
    "socket",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "threading",
    "time",
    "types",
    "typing",
    "unicodedata",
)


def signal_text(code: int, oom: bool) -> str:
    if oom:
        return "killed: the sandbox ran out of memory (its whole-sandbox memory limit)"
    if code >= 0:
        return f"the process exited with status {code} during this test"
    sig = -code
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    why = {
        "SIGKILL": "killed (time, memory or process limit)",
        "SIGXCPU": "CPU time limit exceeded",
        "SIGSEGV": "crashed with a segmentation fault (too deep recursion?)",
        "SIGXFSZ": "output limit exceeded",
        "SIGABRT": "aborted",
    }.get(name, "killed")
    return f"{why} ({name})"


@dataclass
class Plan:
    """How this run is isolated."""

    mode: str  # "os" or "weak"
    bwrap: str | None
    userns: bool
    cgroups: CgroupTree | None
    missing: tuple[str, ...]


def isolation_plan(limits: Limits) -> Plan:
    setting = isolation_setting(limits)
    b = boundary()
    if b.complete:
        return Plan("os", b.bwrap, b.userns, b.cgroups, ())
    if setting != "weak":
        raise SandboxUnavailable(b.message())
    return Plan("weak", b.bwrap, b.userns, b.cgroups, b.problems)


class Session:
    """One sandboxed child process for a program, driven by commands (one per stdin or call test; begin, calls
    and end for an assert test); answers come back in command order. Only an assert test's first call goes
    before its `begin` is answered (within `_AHEAD_BYTES`, so neither side blocks writing)."""

    def __init__(
        self, plan: Plan, program: str, setup: str, todo: list[dict], limits: Limits, uid: int | None
    ):
        self.limits = limits
        self.group: Cgroup | None = None
        self.proc: subprocess.Popen | None = None
        self.home = None
        self.broken: ChannelError | None = None
        self.owed: collections.deque[int] = collections.deque()  # sizes of commands whose answers are owed
        self.max_line = 8 * limits.output_bytes + 16 * limits.error_bytes + (1 << 20)
        biggest_input = max(
            (len(t.get("input", "").encode("utf-8", "surrogateescape")) for t in todo), default=0
        )
        fsize = limits.output_bytes + 4096
        in_bwrap = self.in_bwrap = plan.bwrap is not None
        cfg = {
            "uid": uid,
            "need_no_caps": in_bwrap and not plan.userns,
            "fork_ok": in_bwrap or uid is not None,
            "hook": limits.audit_hook,
            "preload": [] if in_bwrap or uid is None else list(PRELOADED),
            "test_cpu_s": limits.timeout_s,  # the CPU-time timer of each test
            "cpu_s": math.ceil((limits.timeout_s + 2) * len(todo))
            + 2,  # RLIMIT_CPU's hard limit, for the session
            "memory": limits.memory_mb << 20,
            "fsize": fsize,
            "fsize_hard": max(fsize, biggest_input + 4096),
            "nproc": limits.max_procs if uid is not None else user_process_count() + limits.max_procs,
            "nofile": limits.open_files,
            "cap": limits.output_bytes,
            "error_cap": limits.error_bytes,
            "shown": limits.shown_bytes,
            "read_roots": list(interpreter().stdlib) if in_bwrap else stdlib_roots(),
        }
        files = []
        if in_bwrap:
            home = SANDBOX_HOME
            interp = interpreter()
            env = _child_env(home)
            try:
                files.append(program_fd())  # the seccomp filter, read by bubblewrap
            except SandboxError:
                if plan.mode != "weak":
                    raise
            cmd = bwrap_command(plan.bwrap, interp, limits, env, plan.userns, files[0] if files else None)
            cmd += [interp.executable, "-s", "-S", "-P"]
            cwd = None
        else:
            home = self.home = tempfile.mkdtemp(prefix="kit-sandbox-")
            if uid is not None:
                os.chown(home, uid, uid)
            os.chmod(home, 0o700)
            env = _child_env(home)
            cmd = [sys.executable, "-s", "-S", "-P"]
            cwd = home
        if plan.cgroups is not None:
            self.group = plan.cgroups.create(limits.memory_mb << 20, limits.max_procs + 2)
            cmd = ["/bin/sh", "-c", JOIN, "sh", *self.group.procs_files, "--", *cmd]
        # child.py and wire.py go in as open files (read-only descriptors the child closes before `ready`): no
        # path of the kit is mounted in the boundary
        sources = [os.open(path, os.O_RDONLY) for path in (CHILD, WIRE)]
        cmd += [f"/proc/self/fd/{fd}" for fd in sources]
        files += sources
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the session; closed in close())
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.err,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=files,
            )
            for fd in files:
                os.close(fd)
            files = []
            self.reader = wire.FrameReader(self.proc.stdout.fileno(), wire.LINE)
            try:
                self.send({"cfg": cfg, "program": program, "setup": setup})
                msg = self.receive(time.monotonic() + limits.startup_s, cpu_bound=False)
            except ChannelError as exc:
                raise SandboxError(
                    f"the sandbox did not start within {limits.startup_s} s: {self._stderr()}"
                ) from exc
            if "fatal" in msg:
                raise SandboxError(f"the sandbox could not start: {str(msg['fatal'])[:500]}")
            self.info = msg.get("info", {}) if isinstance(msg.get("info"), dict) else {}
        except BaseException:
            for fd in files:
                os.close(fd)
            self.close()
            raise

    def _stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()[-2000:].decode(errors="replace").strip() or "(no message)"

    def post(self, msg: dict) -> None:
        """Send one command without waiting for its answer (answers come back in command order). While answers
        are owed, only a small command may be sent, within `_AHEAD_BYTES` in all: the pipe then always has room
        for it, so the parent never blocks writing while the child blocks writing a long answer (no deadlock)."""
        if self.broken is not None:
            raise self.broken
        data = (json.dumps(msg) + "\n").encode()
        if self.owed and sum(self.owed) + len(data) > _AHEAD_BYTES:
            raise SandboxError("internal: a command sent ahead would not fit in the pipe")
        try:
            self.send_bytes(data)
        except ChannelError as exc:
            self.broken = exc
            raise
        self.owed.append(len(data))

    def fits(self, msg: dict) -> bool:
        """Whether `msg` may be sent now, with answers still owed."""
        return not self.owed or sum(self.owed) + len(json.dumps(msg)) + 1 <= _AHEAD_BYTES

    @property
    def pending(self) -> int:
        return len(self.owed)

    def answer(self, deadline: float) -> dict:
        """The answer to the oldest command not answered yet; once the channel broke, every call raises the same."""
        if self.broken is not None:
            raise self.broken
        try:
            msg = self.receive(deadline)
        except ChannelError as exc:
            self.broken = exc
            raise
        self.owed.popleft()
        return msg

    def ask(self, msg: dict, deadline: float) -> dict:
        """Send one command and wait for its answer (and any answers still owed before it)."""
        while self.owed and not self.fits(msg):
            self.answer(deadline)
        self.post(msg)
        while self.pending > 1:
            self.answer(deadline)
        return self.answer(deadline)

    def send(self, msg: dict) -> None:
        self.send_bytes((json.dumps(msg) + "\n").encode())

    def send_bytes(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise Died(self._death()[1]) from exc

    def receive(self, deadline: float, cpu_bound: bool = True) -> dict:
        """The child's next message (a JSON object on one line), or Stalled (no answer by `deadline`, wall clock),
        Timeout (the child was ended by its CPU-time timer or, with `cpu_bound`, the whole sandbox used more than
        a test's CPU time limit while this waited: processes the program forked count too), Died or Garbled."""
        cpu0 = self.group.cpu_seconds() if cpu_bound and self.group is not None else None
        while True:
            until = deadline if cpu0 is None else min(deadline, time.monotonic() + CPU_POLL_S)
            try:
                line = self.reader.read(until, self.max_line)
            except wire.FrameTooLong:
                raise Garbled("a message longer than the channel allows") from None
            if line is not None or self.reader.eof:
                break
            if cpu0 is not None and (self.group.cpu_seconds() or cpu0) - cpu0 > self.limits.timeout_s:
                raise Timeout()
            if time.monotonic() >= deadline:
                raise Stalled()
        if line is None:
            code, why = self._death()
            if -code in CPU_SIGNALS:
                raise Timeout()
            raise Died(why)
        try:
            wire.check_items(line, wire.MAX_ITEMS + 64)  # before parsing: a message of tiny containers
            msg = json.loads(line)
        except (ValueError, RecursionError):
            raise Garbled("a line that is not one of its messages") from None
        if not isinstance(msg, dict):
            raise Garbled("a line that is not one of its messages")
        return msg

    def _death(self) -> tuple[int, str]:
        """(exit status, negative for a signal; what it means)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = -signal.SIGKILL
        if self.in_bwrap and code > 128 and code - 128 in signal.Signals._value2member_map_:
            code = 128 - code  # bubblewrap reports a child killed by signal n as 128 + n
        oom = self.group is not None and self.group.oom_kills() > 0
        return code, signal_text(code, oom)

    def peak_mb(self) -> float | None:
        peak = self.group.peak_bytes() if self.group is not None else None
        return None if peak is None else round(peak / (1 << 20), 1)

    def close(self) -> None:
        """SIGKILL the whole sandbox (bubblewrap's process group; its pid namespace dies with it), clean up."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
            with contextlib.suppress(AttributeError):
                self.reader.close()
            self.proc = None
        if self.group is not None:
            self.group.remove()
        with contextlib.suppress(AttributeError, OSError):
            self.err.close()
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


def _child_env(home: str) -> dict:
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        "PYTHONHASHSEED": "0",
        "PYTHONUTF8": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
