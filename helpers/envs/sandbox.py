"""Run untrusted Python programs against unit tests in a separate, limited process.

Model output is data: the kit never `exec`s it in its own interpreter. `run_program` starts a fresh interpreter
(`python -s -S -P -c RUNNER`, an explicit minimal environment, so nothing of the parent's environment, user site
or working directory is visible), feeds it the program and the test inputs on stdin, and reads one JSON result
per test back from a pipe. Expected outputs of stdin and call tests never enter the child: the parent compares.
The child's hash seed is fixed (PYTHONHASHSEED=0), so a program that prints a set of strings prints it the same
way every time and an episode replays exactly.

Which layer contains what (each is applied by the runner before any untrusted code runs):

- Process: its own session and process group (`start_new_session`), killed as a whole with SIGKILL at the
  wall-clock limit (SIGKILL cannot be caught or ignored, so a program that ignores SIGTERM changes nothing).
- Resource limits (`setrlimit`): CPU seconds (RLIMIT_CPU), address space (RLIMIT_AS: a memory bomb gets
  MemoryError), file size (RLIMIT_FSIZE: caps stdout/stderr and any file; SIGXFSZ is ignored so a write past the
  cap fails with EFBIG), processes (RLIMIT_NPROC), no core dumps (RLIMIT_CORE = 0).
- Its own temporary working directory (removed afterwards); stdout/stderr go to files there, capped.
- When the kit runs as root (RLIMIT_NPROC does not bind root): a new network namespace (no interfaces but a
  downed loopback), `PR_SET_NO_NEW_PRIVS`, then the runner drops to an unprivileged uid of its own (one per
  concurrent run, from a lock-protected pool), so the kernel's file permissions stop it from touching root's
  files, RLIMIT_NPROC binds, and after the run every process of that uid is killed (catches children that left
  the process group with `setsid`). The interpreter's standard library may live where that uid cannot read it
  (e.g. under /root), so the runner imports the common modules (`PRELOADED`) before dropping privileges.
- Always, a second layer: an audit hook (`sys.addaudithook`; Python code cannot remove one) refuses socket
  creation, process spawning (`os.system`, `exec*`, `posix_spawn`, `subprocess`), `ctypes`, signals to other
  processes, writes/deletes/renames outside the working directory, and reads outside the working directory,
  the standard library and a few device files (so the kit's files, the parent's `/proc/<pid>/environ` and other
  users' secrets are refused). Without root it is the only layer for files and network, and then `os.fork` is
  refused too (escaped children could not be swept by uid). An audit hook is not a security boundary on its
  own (a race on a symlink, or a C extension, could bypass it); run the kit as root in a container, or in a VM,
  for hostile workloads.

What is not contained: reading world-readable files when running as root (the uid layer allows what `others`
may read; the audit hook refuses it, but see above), CPU and memory contention with the host while it runs,
and forged results: the child reports pass/fail of `assert` tests itself (HumanEval's `check` runs in the child),
so a program that writes fake result lines to the report pipe, or returns an object whose `__eq__` always holds,
can pass those tests. stdin and call tests are judged in the parent, from the program's output only.

Many tests of one program run in one process (fresh globals, fresh stdin/stdout files, reset builtins and
recursion limit per test); if the process dies in a test (timeout, crash, `os._exit`), that test fails and a new
process resumes with the next one, so results equal one-process-per-test (`batch=False`), only faster.
`run_many` runs many programs in parallel threads, each with its own process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import pwd
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

TEST_KINDS = ("stdin", "call", "assert")

# Modules imported before privileges drop (the stdlib may be unreadable to the sandbox uid). Anything else is
# imported on demand where the interpreter's files are readable by that uid.
# fmt: off
PRELOADED = (
    "abc", "array", "bisect", "cmath", "collections", "collections.abc", "contextlib", "copy", "datetime",
    "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "io", "itertools", "json", "math", "numbers",
    "operator", "queue", "random", "re", "socket", "statistics", "string", "struct", "textwrap", "threading",
    "time", "types", "typing", "unicodedata",
)
# fmt: on


@dataclass(frozen=True)
class Limits:
    """Per-run limits. `timeout_s` is the wall-clock limit of one test; CPU time is capped at the same rate."""

    timeout_s: float = 4.0
    memory_mb: int = 512
    output_bytes: int = 1 << 20
    max_procs: int = 32
    startup_s: float = 20.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "output_bytes", "max_procs", "startup_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox Limits.{name} must be positive, got {getattr(self, name)!r}")


@dataclass
class TestResult:
    """One test's verdict. `status`: passed, wrong_answer, runtime_error, timeout, crashed, output_limit."""

    passed: bool
    status: str
    actual: str = ""
    error: str = ""
    time_s: float = 0.0

    __test__ = False  # not a pytest class


@dataclass
class RunResult:
    """All tests of one program, in test order."""

    tests: list[TestResult]
    wall_s: float = 0.0
    processes: int = 0
    layers: dict = field(default_factory=dict)

    @property
    def n_passed(self) -> int:
        return sum(t.passed for t in self.tests)

    @property
    def fraction(self) -> float:
        return self.n_passed / len(self.tests) if self.tests else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.tests) and all(t.passed for t in self.tests)


class SandboxError(RuntimeError):
    """The sandbox itself could not run (not the program's fault)."""


# --------------------------------------------------------------------------------------------- test format


def validate_test(test: dict) -> None:
    """Check one normalised test; raises ValueError naming what is wrong.

    stdin:  {"kind": "stdin", "input": str, "output": str}
    call:   {"kind": "call", "fn_name": str, "args": list, "output": value[, "alt_outputs": list]}
            (a module-level function, or a method of class `Solution`, called with the JSON arguments)
    assert: {"kind": "assert", "entry_point": str, "code": str[, "label": str]}
            (`code` defines `check(candidate)`; it passes when `check(<entry_point>)` raises nothing)
    """
    if not isinstance(test, dict) or test.get("kind") not in TEST_KINDS:
        raise ValueError(f"test must be a dict with kind in {TEST_KINDS}, got {str(test)[:80]!r}")
    need = {"stdin": {"input": str, "output": str}, "call": {"fn_name": str, "args": list},
            "assert": {"entry_point": str, "code": str}}[test["kind"]]  # fmt: skip
    for key, typ in need.items():
        if not isinstance(test.get(key), typ):
            raise ValueError(
                f"{test['kind']} test needs {key!r} of type {typ.__name__}, got {test.get(key)!r:.80}"
            )
    if test["kind"] == "call" and "output" not in test:
        raise ValueError("call test needs an 'output'")


def describe_test(test: dict) -> tuple[str, str]:
    """(input, expected) as shown to the agent."""
    if test["kind"] == "stdin":
        return test["input"], test["output"]
    if test["kind"] == "call":
        args = ", ".join(json.dumps(a) for a in test["args"])
        return f"{test['fn_name']}({args})", json.dumps(test["output"])
    return test.get("label") or test["code"], "the assertion holds"


def outputs_match(actual: str, expected: str) -> bool:
    """Stdout comparison of competitive programming judges: lines stripped, trailing blank lines ignored; tokens
    that are decimals (contain '.' or 'e') may differ by 1e-6 (absolute or relative)."""
    a = actual.rstrip().splitlines()
    e = expected.rstrip().splitlines()
    if [x.strip() for x in a] == [x.strip() for x in e]:
        return True
    if len(a) != len(e):
        return False
    for la, le in zip(a, e, strict=True):
        ta, te = la.split(), le.split()
        if len(ta) != len(te):
            return False
        for x, y in zip(ta, te, strict=True):
            if x != y and not _close_decimals(x, y):
                return False
    return True


def _close_decimals(x: str, y: str) -> bool:
    if not any(c in s for s in (x, y) for c in ".eE"):
        return False
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    return math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6)


def values_match(actual: object, expected: object) -> bool:
    """Return-value comparison after a JSON round trip (tuples are lists): exact, except floats within 1e-6;
    bools only equal bools."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, float) or isinstance(actual, float):
            return math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-6)
        return actual == expected
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(values_match(a, e) for a, e in zip(actual, expected))  # noqa: B905
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[k], expected[k]) for k in expected
        )
    return type(actual) is type(expected) and actual == expected


# ------------------------------------------------------------------------------------------ the child side

# The program the sandboxed interpreter runs. Standard library only; everything before `ready` is trusted.
_RUNNER = r'''
import builtins, json, linecache, os, resource, signal, sys, threading, time, traceback

def send(fd, msg):
    data = memoryview((json.dumps(msg) + "\n").encode())
    while data:
        data = data[os.write(fd, data):]

def read_all(fd):
    parts = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            return b"".join(parts)
        parts.append(b)

def confine(cfg):
    """Network namespace + no_new_privs (root only), preload, rlimits, drop to the sandbox uid, audit hook."""
    layers = {"root": cfg["uid"] is not None, "netns": False}
    if cfg["uid"] is not None:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x40000000) == 0:  # CLONE_NEWNET
            layers["netns"] = True
        layers["no_new_privs"] = libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
        with open("/proc/self/net/dev") as f:  # the interfaces this process can use
            layers["interfaces"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
        del libc, ctypes
        for name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
            del sys.modules[name]
    for name in cfg["preload"]:
        try:
            __import__(name)
        except ImportError:
            pass
    cpu = cfg["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], cfg["fsize"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if cfg["uid"] is not None:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
    install_hook(cfg)
    return layers

def install_hook(cfg):
    """Second layer: refuse network, spawning, ctypes, foreign signals, and file access outside the allowed roots."""
    real = os.path.realpath
    home = real(os.getcwd())
    me = os.getpid()
    read_roots = tuple(real(p) for p in cfg["read_roots"]) + (home, "/proc/self", "/dev/null", "/dev/zero",
                                                              "/dev/urandom", "/dev/random")
    deny = {"socket.__new__", "socket.bind", "socket.connect", "os.system", "os.exec", "os.posix_spawn",
            "os.spawn", "subprocess.Popen", "pty.spawn", "os.forkpty", "os.startfile", "os.putenv", "os.unsetenv"}
    if not cfg["uid_layer"]:
        deny.add("os.fork")
    writers = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    busy = []

    def inside(path, roots):
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        p = real(os.fspath(path))
        if p.startswith("/proc/") and p.split("/")[2] == str(me):
            p = "/proc/self" + p[len("/proc/" + str(me)):]
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)

    def refuse(event, detail):
        raise PermissionError(f"sandbox: {event} refused ({detail})")

    def hook(event, args):
        if busy:
            return
        busy.append(1)
        try:
            if event in deny or event.startswith("ctypes."):
                refuse(event, "not allowed in the sandbox")
            if event == "import" and args[0] in ("ctypes", "_ctypes", "_posixsubprocess"):
                refuse(event, args[0])
            if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] not in (0, me, os.getpgid(0)):
                refuse(event, f"pid {args[0]}")
            if event == "open":
                path, mode, flags = args
                write = bool((flags or 0) & writers) or any(c in (mode or "") for c in "wax+")
                if not inside(path, (home,) if write else read_roots):
                    refuse("open", f"{path!r} outside the sandbox")
            elif event in ("os.listdir", "os.scandir") and args[0] is not None:
                if not inside(args[0], read_roots):
                    refuse(event, f"{args[0]!r} outside the sandbox")
            elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                           "os.utime", "os.rename", "os.link", "os.symlink", "shutil.rmtree", "os.chflags"):
                paths = [a for a in args if isinstance(a, (str, bytes, os.PathLike))][:2]
                dir_fds = [a for a in args[1:] if isinstance(a, int) and a not in (-1,)]
                if event in ("os.rename", "os.link", "os.symlink"):
                    paths = paths[1:] if event == "os.symlink" else paths
                if dir_fds and event not in ("os.chmod", "os.chown", "os.utime", "os.mkdir", "os.truncate"):
                    refuse(event, "dir_fd")
                for p in paths:
                    if not inside(p, (home,)):
                        refuse(event, f"{p!r} outside the sandbox")
        finally:
            busy.pop()

    sys.addaudithook(hook)

def exit_program(code=None):
    """`exit()` and `quit()` (absent without the site module)."""
    raise SystemExit(code)

def source_lines(name, text):
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)

def format_error(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in ("<program>", "<setup>", "<test>")]
    lines = traceback.format_list(frames[-6:]) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines)

def redirect(stdin_bytes):
    with open("stdin.txt", "wb") as f:
        f.write(stdin_bytes)
    for fd, name, flags in ((0, "stdin.txt", os.O_RDONLY),
                            (1, "stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        new = os.open(name, flags, 0o600)
        if new != fd:  # the program may have closed fd 0-2 (e.g. a garbage-collected open(0))
            os.dup2(new, fd)
            os.close(new)
    sys.stdin = open(0, "r", encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)

def read_capped(name, cap):
    with open(name, "rb") as f:
        data = f.read(cap + 1)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap

def run_one(test, code, setup, cap):
    kind = test["kind"]
    g = {"__name__": "__main__" if kind == "stdin" else "__solution__", "__builtins__": builtins}
    msg = {"status": "ok", "error": ""}
    redirect(test.get("input", "").encode("utf-8"))
    seen = []
    try:
        if setup is not None:
            exec(setup, g)
        exec(code, g)
        if kind == "call":
            name = test["fn_name"]
            sol = g.get("Solution")
            if isinstance(sol, type) and hasattr(sol, name):
                fn = getattr(sol(), name)
            elif callable(g.get(name)):
                fn = g[name]
            else:
                raise NameError(f"no function or Solution method named {name!r} is defined")
            value = fn(*test["args"])
            try:
                text = json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"the return value ({type(value).__name__}) is not JSON-serialisable: {exc}") from None
            if len(text) > cap:
                msg["status"] = "output_limit"
            msg["result"] = text[:cap]
        elif kind == "assert":
            target = g.get(test["entry_point"])
            if not callable(target):
                raise NameError(f"no function named {test['entry_point']!r} is defined")
            def candidate(*a, **k):
                r = target(*a, **k)
                seen[:] = [r]
                return r
            candidate.__name__ = target.__name__
            exec(test["code_obj"], g)
            g["check"](candidate)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            msg.update(status="error", error=f"SystemExit: {exc.code}")
    except BaseException as exc:
        if isinstance(exc, OSError) and exc.errno == 27:  # EFBIG: RLIMIT_FSIZE reached
            msg["status"] = "output_limit"
        else:
            label = test.get("label")
            msg.update(status="error", error=format_error(exc) + (f"\nfailed: {label}" if kind == "assert" and isinstance(exc, AssertionError) and label else ""))
    for th in threading.enumerate():  # like interpreter shutdown: wait for the program's non-daemon threads
        if th is not threading.main_thread() and not th.daemon:
            try:
                th.join()
            except BaseException:
                pass
    try:
        sys.stdout.flush()
    except OSError:
        msg["status"] = "output_limit"
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    if seen:
        try:
            msg["actual"] = repr(seen[0])[:cap]
        except BaseException:
            msg["actual"] = "<unprintable>"
    msg["stdout"], over = read_capped("stdout.txt", cap)
    if over:
        msg["status"] = "output_limit"
    msg["stderr"] = read_capped("stderr.txt", 2000)[0]
    return msg

def main():
    job = json.loads(read_all(0))
    res = os.dup(1)
    cfg = job["cfg"]
    try:
        layers = confine(cfg)
        builtins.exit = builtins.quit = exit_program
        source_lines("<program>", job["program"])
        code = compile(job["program"], "<program>", "exec")
        setup = None
        if job["setup"]:
            source_lines("<setup>", job["setup"])
            setup = compile(job["setup"], "<setup>", "exec")
        for t in job["tests"]:
            if t["kind"] == "assert":
                source_lines("<test>", t["code"])
                t["code_obj"] = compile(t["code"], "<test>", "exec")
    except SyntaxError as exc:
        send(res, {"ready": True, "layers": layers})
        err = "".join(traceback.format_exception_only(type(exc), exc))
        for i in range(len(job["tests"])):
            send(res, {"i": job["start"] + i, "status": "error", "error": err, "stdout": "", "time": 0.0})
        return
    except BaseException as exc:
        send(res, {"fatal": f"{type(exc).__name__}: {exc}"})
        return
    send(res, {"ready": True, "layers": layers})
    snapshot = dict(builtins.__dict__)
    limit = sys.getrecursionlimit()
    digits = sys.get_int_max_str_digits()
    for i, test in enumerate(job["tests"]):
        t0 = time.perf_counter()
        msg = run_one(test, code, setup, cfg["cap"])
        msg["time"] = time.perf_counter() - t0
        msg["i"] = job["start"] + i
        for k in [k for k in builtins.__dict__ if k not in snapshot]:
            del builtins.__dict__[k]
        builtins.__dict__.update(snapshot)
        sys.setrecursionlimit(limit)
        sys.set_int_max_str_digits(digits)
        if msg["status"] != "ok":
            import gc
            gc.collect()
        send(res, msg)

main()
'''


# ----------------------------------------------------------------------------------------- the parent side

_IS_ROOT = os.geteuid() == 0
_UID_BASE, _UID_SLOTS = 61000, 512
_LOCK_DIR = os.path.join(tempfile.gettempdir(), "kit-sandbox-uids")


def _stdlib_roots() -> list[str]:
    """Directories the child may read: the interpreter's standard library (and lib-dynload)."""
    import sysconfig

    paths = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    return sorted(p for p in paths if p)


def _uid_processes(uid: int, live_only: bool = True) -> list[int]:
    """Pids of processes owned by `uid` (from /proc); `live_only` leaves out zombies waiting to be reaped."""
    pids = []
    with os.scandir("/proc") as it:
        for entry in it:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid != uid:
                        continue
                    if live_only:
                        with open(f"/proc/{entry.name}/stat", "rb") as f:
                            if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                                continue
                    pids.append(int(entry.name))
    return pids


def _sweep_uid(uid: int) -> None:
    """Kill every process of the sandbox uid: `kill -9 -1` run as that uid reaches exactly its own processes
    (no pid-reuse race), including children that left the process group."""
    for _ in range(50):
        if not _uid_processes(uid):
            break
        subprocess.run(
            ["kill", "-9", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    else:
        raise SandboxError(f"could not kill the processes of sandbox uid {uid}")


@contextlib.contextmanager
def _sandbox_uid():
    """A uid no other run uses right now (root only): a flock on a per-uid file, across threads and processes."""
    if not _IS_ROOT:
        yield None
        return
    os.makedirs(_LOCK_DIR, mode=0o700, exist_ok=True)
    for uid in range(_UID_BASE, _UID_BASE + _UID_SLOTS):
        try:
            pwd.getpwuid(uid)
            continue  # a real account: never borrow it
        except KeyError:
            pass
        fd = os.open(os.path.join(_LOCK_DIR, str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _sweep_uid(uid)  # leftovers of a run that died with its parent
        if _uid_processes(uid, live_only=False):
            os.close(fd)  # zombies not yet reaped by init would count against RLIMIT_NPROC: use another uid
            continue
        try:
            yield uid
        finally:
            _sweep_uid(uid)
            os.close(fd)
        return
    raise SandboxError(f"all {_UID_SLOTS} sandbox uids are busy")


def _user_process_count() -> int:
    return len(_uid_processes(os.getuid()))


def _signal_text(code: int) -> str:
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


def _judge(test: dict, msg: dict, cap: int) -> TestResult:
    status, t = msg.get("status"), float(msg.get("time", 0.0))
    stdout = str(msg.get("stdout", ""))
    shown = stdout if test["kind"] == "stdin" else str(msg.get("actual", msg.get("result", "")))
    err = str(msg.get("error", ""))
    if msg.get("stderr") and status != "ok":
        err = f"{err}\n{msg['stderr']}".strip()
    if status == "output_limit":
        return TestResult(False, "output_limit", shown, f"output limit of {cap} bytes exceeded", t)
    if status != "ok":
        return TestResult(False, "runtime_error", shown, err, t)
    if test["kind"] == "stdin":
        ok = outputs_match(stdout, test["output"])
    elif test["kind"] == "call":
        try:
            value = json.loads(msg.get("result", ""))
        except ValueError:
            return TestResult(False, "runtime_error", shown, "the return value could not be read", t)
        ok = any(values_match(value, e) for e in [test["output"], *test.get("alt_outputs", [])])
    else:
        ok = True
    return TestResult(ok, "passed" if ok else "wrong_answer", shown, "", t)


def _spawn(program: str, setup: str, tests: list[dict], start: int, limits: Limits, uid: int | None) -> tuple:
    """One child process for tests[start:]; returns (results, next_start, layers). Stops at the first test in
    which the process died or ran out of time (that test gets a failure result)."""
    todo = tests[start:]
    cfg = {
        "uid": uid,
        "uid_layer": uid is not None,
        "preload": list(PRELOADED),
        "cpu_s": math.ceil(limits.timeout_s * len(todo)) + 1,
        "memory": limits.memory_mb << 20,
        "fsize": limits.output_bytes + 4096,
        "nproc": limits.max_procs if uid is not None else _user_process_count() + limits.max_procs,
        "cap": limits.output_bytes,
        "read_roots": _stdlib_roots(),
    }
    job = {"cfg": cfg, "program": program, "setup": setup, "tests": todo, "start": start}
    home = tempfile.mkdtemp(prefix="kit-sandbox-")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home, "TMPDIR": home, "PYTHONHASHSEED": "0",
           "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    results: list[TestResult] = []
    layers: dict = {}
    proc = None
    try:
        if uid is not None:
            os.chown(home, uid, uid)
        os.chmod(home, 0o700)
        with open(os.path.join(home, "runner.err"), "wb") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-s", "-S", "-P", "-c", _RUNNER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err_file,
                cwd=home,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        buf = bytearray()
        ready = eof = violated = False
        deadline = time.monotonic() + limits.startup_s
        while len(results) < len(todo) and not violated:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                eof = True
                break
            buf += chunk
            while b"\n" in buf and len(results) < len(todo):
                cut = buf.index(b"\n")
                line = bytes(buf[:cut])
                del buf[: cut + 1]
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = {}
                if not ready:
                    if "fatal" in msg:
                        raise SandboxError(f"the sandbox could not start: {msg['fatal']}")
                    ready = bool(msg.get("ready"))
                    layers = msg.get("layers", {})
                elif not isinstance(msg, dict) or msg.get("i") != start + len(results):
                    results.append(TestResult(False, "runtime_error", "", "the sandbox's report was garbled"))
                    violated = True
                    break
                else:
                    results.append(_judge(todo[len(results)], msg, limits.output_bytes))
                deadline = time.monotonic() + limits.timeout_s
        sel.close()
        if not ready:
            with open(os.path.join(home, "runner.err"), "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            raise SandboxError(f"the sandbox did not start within {limits.startup_s} s: {tail}")
        if len(results) < len(todo) and not violated:
            if not eof and not violated:
                _kill(proc)
                results.append(
                    TestResult(False, "timeout", "", f"time limit of {limits.timeout_s} s exceeded")
                )
            else:
                code = proc.wait()
                results.append(TestResult(False, "crashed", "", _signal_text(code)))
    finally:
        if proc is not None:
            _kill(proc)
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        if uid is not None:
            _sweep_uid(uid)
        shutil.rmtree(home, ignore_errors=True)
    return results, start + len(results), layers


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it cannot be caught or ignored), then reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


def run_program(
    program: str, tests: list[dict], setup: str = "", limits: Limits | None = None, batch: bool = True
) -> RunResult:
    """Run `program` on every test in the sandbox; `setup` (trusted code, e.g. HumanEval's prompt with its helper
    functions and imports) runs before the program in the same namespace. `batch=False` starts one process per
    test (the slow reference the benchmark compares against)."""
    limits = limits or Limits()
    if not isinstance(program, str):
        raise TypeError(f"program must be a str, got {type(program).__name__}")
    for t in tests:
        validate_test(t)
    t0 = time.perf_counter()
    results: list[TestResult] = []
    processes = 0
    layers: dict = {}
    with _sandbox_uid() as uid:
        start = 0
        while start < len(tests):
            chunk = tests[: start + 1] if not batch else tests
            got, start, layers = _spawn(program, setup, chunk, start, limits, uid)
            results.extend(got)
            processes += 1
    return RunResult(results, time.perf_counter() - t0, processes, layers)


@dataclass(frozen=True)
class Job:
    """One program with its tests, for `run_many`."""

    program: str
    tests: list
    setup: str = ""


def run_many(
    jobs: list[Job], limits: Limits | None = None, workers: int | None = None, batch: bool = True
) -> list[RunResult]:
    """Run many programs in parallel (threads, each driving its own sandbox process); results in job order."""
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_program, j.program, j.tests, j.setup, limits, batch) for j in jobs]
        return [f.result() for f in futures]
