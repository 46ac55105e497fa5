"""What every part of the sandbox shares: its limits, its results, its errors."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

TEST_KINDS = ("stdin", "call", "assert")
ISOLATION_ENV = "KIT_SANDBOX"
ISOLATION_SETTINGS = ("strict", "weak")
SANDBOX_HOME = "/sandbox"  # the program's working directory inside the boundary


@dataclass(frozen=True)
class Limits:
    """Limits of one sandbox.

    Time (what decides a verdict does not move with the machine's load):
    - `timeout_s` is the time limit of one test, in CPU seconds of the sandboxed interpreter (all its threads, user
      and system time, from the test's start to its end): a test that uses more gets status "timeout" whether it
      was stopped (a CPU-time interval timer ends the process the moment it is reached) or finished late. Waiting
      (sleep, a blocked read) uses no CPU time. Processes the program forks are bounded by RLIMIT_CPU and the
      stall guard, not by this limit.
    - `wall_s` is only a stall guard: the wall-clock seconds the parent waits for a test's answer before it ends
      the sandbox (default `max(60, 15 * timeout_s)`: far above what a loaded machine adds to a test within its
      CPU limit). A test stopped by it gets status "stalled", never "timeout" or "wrong_answer".
    - `run_wall_s` is the wall-clock budget of one run (all of a program's tests together, sandbox starts
      included; default `run_budget_s`: `max(stall_s, 3 * timeout_s * tests)`, a third of a core for every test's
      CPU limit). Tests not started when it is spent are not run and get status "stalled": a program that
      sleeps (or ignores SIGTERM and sleeps) costs at most this per step, not the stall guard once per test (a
      6-test task took 361 s).
    - `startup_s` bounds, in wall-clock seconds, how long a new sandbox may take to come up; past it
      `run_program` raises SandboxError (no verdict is made up).

    `memory_mb` bounds the whole sandbox (all its processes, shared memory and files) and each process's
    address space; `output_bytes` caps a test's stdout (and any file); `error_bytes` and `shown_bytes` cap the
    error text and the output kept in a `TestResult`; `disk_mb` sizes each of the working directory, /tmp and
    /dev/shm. `audit_hook=False` leaves out the second layer (the attack tests run that way). `isolation` is
    "strict" (refuse without the full boundary) or "weak"; None reads $KIT_SANDBOX (default "strict")."""

    timeout_s: float = 4.0
    memory_mb: int = 512
    output_bytes: int = 1 << 20
    max_procs: int = 32
    startup_s: float = 20.0
    wall_s: float | None = None
    run_wall_s: float | None = None
    error_bytes: int = 8192
    shown_bytes: int = 16384
    disk_mb: int = 64
    open_files: int = 64
    audit_hook: bool = True
    isolation: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "memory_mb",
            "output_bytes",
            "max_procs",
            "startup_s",
            "error_bytes",
            "shown_bytes",
            "disk_mb",
            "open_files",
            "stall_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox Limits.{name} must be positive, got {getattr(self, name)!r}")
        if self.run_wall_s is not None and not self.run_wall_s > 0:
            raise ValueError(f"sandbox Limits.run_wall_s must be positive, got {self.run_wall_s!r}")
        if self.open_files < 16:
            raise ValueError(f"sandbox Limits.open_files must be at least 16, got {self.open_files}")
        if self.isolation not in (None, *ISOLATION_SETTINGS):
            raise ValueError(
                f"sandbox Limits.isolation must be one of {ISOLATION_SETTINGS} or None, got {self.isolation!r}"
            )

    @property
    def stall_s(self) -> float:
        """The stall guard in wall-clock seconds: `wall_s`, or by default `max(60, 15 * timeout_s)`."""
        return self.wall_s if self.wall_s is not None else max(60.0, 15.0 * self.timeout_s)

    def run_budget_s(self, tests: int) -> float:
        """The wall-clock budget of a run of `tests` tests: `run_wall_s`, or by default
        `max(stall_s, 3 * timeout_s * tests)`."""
        if self.run_wall_s is not None:
            return self.run_wall_s
        return max(self.stall_s, 3.0 * self.timeout_s * tests)


@dataclass
class TestResult:
    """One test's verdict. `status`: passed, wrong_answer, runtime_error, timeout (over its CPU time limit),
    stalled (stopped by the wall-clock stall guard), crashed, output_limit. `time_s` is the wall-clock time the
    parent spent on it, `cpu_s` the CPU time the child reported for it (0 where it did not finish)."""

    passed: bool
    status: str
    actual: str = ""
    error: str = ""
    time_s: float = 0.0
    cpu_s: float = 0.0

    __test__ = False  # not a pytest class


@dataclass
class RunResult:
    """All tests of one program, in test order; `layers` records how it was isolated (`mode` "os" or "weak")."""

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

    @property
    def mode(self) -> str:
        """'os' (the full operating-system boundary) or 'weak' (run with what was available)."""
        return self.layers.get("mode", "")


class SandboxError(RuntimeError):
    """The sandbox itself could not run (not the program's fault)."""


class SandboxUnavailable(SandboxError):
    """This machine cannot give the operating-system boundary and weak mode was not asked for."""


def isolation_setting(limits: Limits) -> str:
    """'strict' or 'weak': `limits.isolation`, else $KIT_SANDBOX, else 'strict'."""
    value = limits.isolation or os.environ.get(ISOLATION_ENV, "").strip().lower() or "strict"
    if value not in ISOLATION_SETTINGS:
        raise ValueError(f"{ISOLATION_ENV}={value!r}: expected one of {ISOLATION_SETTINGS}")
    return value


class ChannelError(BaseException):
    """The child stopped answering properly (BaseException, so trusted check code cannot swallow it)."""


class Timeout(ChannelError):
    """The test used up its CPU time limit (the child was ended by its CPU-time timer)."""


class Stalled(ChannelError):
    """No answer within the wall-clock stall guard."""


class Died(ChannelError):
    """The child exited or was killed."""


class Garbled(ChannelError):
    """The child wrote what is not one of its messages."""
