"""Run untrusted Python programs against unit tests inside an operating-system boundary; judge them outside it.

Model output is data: the kit never `exec`s it in its own interpreter, and nothing the program writes is taken as a
verdict. The program runs in a child interpreter that receives the program, and per test only that test's input
(stdin text, call arguments, or the calls an assert test makes); expected outputs and HumanEval's `check` code
never enter it. The child sends back what the program printed, returned or raised, capped in bytes, and the parent
decides pass or fail: stdin tests by comparing stdout, call tests by comparing the JSON return value, and assert
tests by running the dataset's trusted `check(candidate)` in the parent with a `candidate` that forwards each call
to the child and gets plain data back (an object with a forged `__eq__` cannot cross). A child that writes junk to
its channel only fails its own test.

The boundary is the operating system's, not Python's (`docs/security.md` has the details):

- bubblewrap (`bwrap`, Debian's `bubblewrap` package) puts the child in new mount, pid, network, IPC and UTS
  namespaces. Its file system is an empty root that holds only the interpreter, the standard library (its
  site-packages hidden) and the shared libraries they load, read-only; a private `/proc` for its own pid
  namespace, a minimal `/dev`, and size-limited tmpfs mounts for its working directory, `/tmp` and `/dev/shm`,
  all gone when it exits. No network but its own loopback. As root the child drops to a uid of its own (one per
  concurrent run, from a lock-protected pool) with no capabilities and `no_new_privs`; without root, bubblewrap
  uses an unprivileged user namespace.
- A cgroup per sandbox limits the whole sandbox: memory (every process and thread, tmpfs files, `memfd`, SysV and
  POSIX shared memory are all charged to it), the number of processes and threads (`pids.max`), and CPU (at
  most one core). cgroup v1 (memory and pids hierarchies) and v2 are both used where this process may create
  cgroups (as root, or in a delegated subtree).
- Time: a test's limit is CPU time of the sandboxed interpreter (a CPU-time interval timer per test, RLIMIT_CPU
  behind it), so a verdict does not move with the machine's load; the parent's wall-clock bound is only a much
  larger stall guard, and a test it stops is "stalled", not "timeout" (`Limits` says what each limit means).
- Resource limits per process: CPU seconds, address space (a single memory bomb gets MemoryError before the
  cgroup's OOM killer acts), file size (caps stdout and any file), open files, no core dumps, no POSIX message
  queues. The parent kills the whole sandbox (SIGKILL to bubblewrap, whose pid 1 takes every process of the pid
  namespace with it) when a test ends it.
- A seccomp filter (`seccomp`, installed by bubblewrap) refuses what a test program never needs: new namespaces
  (`unshare`, `setns`, `clone` with CLONE_NEW*), the key rings, inotify, io_uring, ptrace, mounting and the
  administrator's calls, so the sandbox uid can neither make user, mount or network namespaces nor leave kernel
  state for a later or a concurrent sandbox.
- An audit hook stays as a second layer with clear error messages (sockets, spawning, `ctypes`, signals, file
  access outside the working directory and the standard library). It is not a boundary: it can be switched off
  from Python, and the tests attack with it off.

Where the machine cannot give all of this (no bubblewrap, neither root nor user namespaces, no cgroup this process
may write), `run_program` refuses with `SandboxUnavailable`, whose message says what is missing and how to enable
it. `KIT_SANDBOX=weak` (or `Limits(isolation="weak")`) runs anyway with what is available; every result then has
`layers["mode"] == "weak"` and lists what was missing. `availability()` says beforehand which of the three this
machine allows ("os", "weak" only, or "none": not Linux, where nothing runs), with a plain-language reason.

Many tests of one program run in one process (fresh globals, stdin/stdout files, builtins and recursion limit per
test); if the process dies in a test (timeout, stall, crash, `os._exit`) or garbles its channel, that test fails and a new
sandbox resumes with the next one, so results equal one-process-per-test (`batch=False`), only faster. A test's
command is sent only when every earlier test is answered, so a program never holds a later test's input. `run_many`
runs many programs in parallel threads, each with its own sandbox. The child's hash seed is fixed
(PYTHONHASHSEED=0) and the `random` module seen by a test's `check` code is seeded from the test, so an episode
replays exactly. `python -m helpers.sandbox` prints what this machine provides.

The parts, one module each: `base` (limits, results, errors), `judge` (verdicts, decided here), `wire` (the
plain-data codec and the framed-pipe reader), `session` (one child process and its channel), `child` (the program
the sandboxed interpreter runs, a file passed to it), `bwrap` (the boundary and its probe), `seccomp` (the filter), `cgroups`, `uids`,
`runner` (`run_program`, `run_many`, `report`).
"""

from .base import (
    ISOLATION_ENV,
    ISOLATION_SETTINGS,
    SANDBOX_HOME,
    TEST_KINDS,
    Limits,
    RunResult,
    SandboxError,
    SandboxUnavailable,
    TestResult,
    isolation_setting,
)
from .bwrap import Availability, Boundary, availability, boundary
from .judge import describe_test, outputs_match, validate_test, values_match
from .runner import Job, report, run_many, run_program
from .wire import FrameReader, wire_decode, wire_encode

__all__ = [
    "ISOLATION_ENV",
    "ISOLATION_SETTINGS",
    "SANDBOX_HOME",
    "TEST_KINDS",
    "Availability",
    "Boundary",
    "FrameReader",
    "Job",
    "Limits",
    "RunResult",
    "SandboxError",
    "SandboxUnavailable",
    "TestResult",
    "availability",
    "boundary",
    "describe_test",
    "isolation_setting",
    "outputs_match",
    "report",
    "run_many",
    "run_program",
    "validate_test",
    "values_match",
    "wire_decode",
    "wire_encode",
]
