"""bfcl-eval's executable backends: fresh instances per episode, one call run as BFCL's executor runs it, and
the call worker that runs the model's calls under `CallLimits` in a child process (`worker.py`)."""

from __future__ import annotations

import copy
import decimal
import importlib
import json
import pickle
import signal
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import mpmath
from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

from helpers.envs.base import stall_guard_s
from helpers.envs.bfcl.data import function_docs
from helpers.envs.bfcl.parser import Call
from helpers.sandbox.wire import LENGTH, FrameReader, frame, start_worker, stop_worker


def backend_class(class_name: str) -> type:
    """A backend class of bfcl-eval by name, e.g. 'GorillaFileSystem'."""
    if class_name not in CLASS_FILE_PATH_MAPPING:
        raise ValueError(f"bfcl: unknown backend class {class_name!r}")
    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)


def result_text(result: Any) -> str:
    """A call's result as BFCL's executor stringifies it: str as is, dict as JSON (str() if not serialisable),
    anything else with str()."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # BFCL's executor catches everything here too
            return str(result)
    return str(result)


def run_call(instance: Any, name: str, args: tuple, kwargs: dict) -> str:
    """One backend method call as BFCL's executor runs it; never raises: an exception (also one while turning the
    result into text, e.g. an integer too long to print) becomes BFCL's 'Error during execution: ...' result."""
    # MathAPI sets the process-wide decimal and mpmath precision before each use and never restores it:
    # restore both, so nothing outside the call changes (results are the same either way).
    with decimal.localcontext(), mpmath.workprec(mpmath.mp.prec):
        try:
            return result_text(getattr(instance, name)(*args, **kwargs))
        except Exception as e:
            return f"Error during execution: {_reason(e)}"


def _reason(e: BaseException) -> str:
    """The exception's text as BFCL shows it, or, where it has none (`square_root(number=2, precision=10**9)` ran
    out of the worker's memory with an empty MemoryError: "Error during execution: "), what it was."""
    try:
        text = str(e)
    except Exception:
        text = ""
    if text.strip():
        return text
    if isinstance(e, MemoryError):
        return "MemoryError: the call ran out of memory (its memory limit) and was stopped"
    return type(e).__name__


@dataclass(frozen=True)
class CallLimits:
    """Limits on one backend call with the model's arguments: seconds of the call worker's CPU time (what decides
    the call's outcome, the same on a busy machine as on an idle one), characters of its result, megabytes of
    memory it may add; and `stall_s`, a much larger wall-clock bound (default `helpers.envs.base.stall_guard_s`)
    that only stops a worker that stalls, reported as such.

    And limits on one reply: at most `calls_per_reply` calls (the ground truth makes at most 34 in a turn; a reply
    with more runs none), `reply_time_s` seconds of the worker's CPU time for all its calls together (default 4 x
    `time_s`: each call gets what is left, up to `time_s`, and calls after the budget is spent are not run), and
    `observation_chars` characters of results shown in the observation (longer results are cut there; the checks
    see them whole)."""

    time_s: float = 2.0
    output_chars: int = 100_000
    memory_mb: int = 1024
    stall_s: float | None = None
    calls_per_reply: int = 64
    reply_time_s: float | None = None
    observation_chars: int = 100_000

    def __post_init__(self) -> None:
        if self.stall_s is None and self.time_s > 0:
            object.__setattr__(self, "stall_s", stall_guard_s(self.time_s))
        if self.reply_time_s is None and self.time_s > 0:
            object.__setattr__(self, "reply_time_s", 4 * self.time_s)
        for key in (
            "time_s",
            "output_chars",
            "memory_mb",
            "stall_s",
            "calls_per_reply",
            "reply_time_s",
            "observation_chars",
        ):
            if getattr(self, key) is None or getattr(self, key) <= 0:
                raise ValueError(f"bfcl: call limit {key} must be positive, got {getattr(self, key)!r}")


WORKER_MODULE = "helpers.envs.bfcl.worker"


class _CallWorker:
    """One process per kit process (`worker.py`) that runs model-argument calls under `CallLimits`; killed and
    restarted when a call overruns (the parent's instances never saw the call, so nothing changed)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.reader: FrameReader | None = None
        self.memory_mb: int | None = None
        self.lock = threading.Lock()

    def _start(self, memory_mb: int) -> None:
        self.proc, self.reader = start_worker(WORKER_MODULE, str(memory_mb), what="bfcl: the call worker")
        self.memory_mb = memory_mb

    def _stop(self) -> None:
        if self.proc is not None:
            stop_worker(self.proc, self.reader)
            self.proc = self.reader = None

    def _reply(self, job: bytes, limits: CallLimits, time_s: float) -> tuple[float, tuple]:
        """(CPU seconds, the worker's reply to one job); ("cpu",) when it ran past the CPU limit (the kernel ended
        it: SIGPROF; it used `time_s`), ("stalled",) when the stall guard stopped it, ("died", exit status) when it
        ended otherwise."""
        try:
            self.proc.stdin.write(frame(job, LENGTH))
            self.proc.stdin.flush()
        except OSError:
            pass  # the worker is gone; its exit status says why
        else:
            data = self.reader.read(time.monotonic() + limits.stall_s)
            if data is not None:
                return pickle.loads(data)
            if not self.reader.eof:
                self._stop()
                warnings.warn(
                    f"bfcl: a backend call made no reply within the wall-clock stall guard of {limits.stall_s:g} s "
                    f"(its limit is {limits.time_s:g} s of CPU time): the machine is too busy or the worker stalled; "
                    "the call was stopped and its result says so",
                    RuntimeWarning,
                    stacklevel=4,
                )
                return time_s, ("stalled",)
        try:
            status = self.proc.wait(timeout=limits.stall_s)
        except subprocess.TimeoutExpired:
            status = None
        self._stop()
        return time_s, ("cpu",) if status == -signal.SIGPROF else ("died", status)

    def run(
        self, instance: Any, call: Call, limits: CallLimits, time_s: float | None = None
    ) -> tuple[str, Any | None, float]:
        """(result text, the instance after the call, CPU seconds used) or (an error result, None, CPU seconds)
        when a limit was hit; `time_s` (at most `limits.time_s`) is this call's CPU time limit."""
        time_s = limits.time_s if time_s is None else min(time_s, limits.time_s)
        with self.lock:
            if self.proc is None or self.proc.poll() is not None or self.memory_mb != limits.memory_mb:
                self._stop()
                self._start(limits.memory_mb)
            job = (
                pickle.dumps(instance),
                call.name,
                call.args,
                call.kwargs,
                limits.output_chars,
                time_s,
            )
            cpu, reply = self._reply(pickle.dumps(job), limits, time_s)
            if reply[0] != "ok":
                return _limit_text(reply, limits, time_s), None, cpu
            return reply[1], pickle.loads(reply[2]), cpu


def _limit_text(reply: tuple, limits: CallLimits, time_s: float) -> str:
    """The result a call gets when it hit a limit (its effects are discarded)."""
    if reply[0] == "cpu" and time_s < limits.time_s:
        why = (
            f"the call ran past the {time_s:.3g} s of CPU time left of the reply's {limits.reply_time_s:g} s "
            "and was stopped"
        )
    elif reply[0] == "cpu":
        why = f"the call ran past its time limit of {limits.time_s:g} s of CPU time and was stopped"
    elif reply[0] == "stalled":
        why = (
            f"the call did not finish within the stall guard of {limits.stall_s:g} s of wall-clock time (the "
            f"machine is too busy; its own limit is {limits.time_s:g} s of CPU time) and was stopped"
        )
    elif reply[0] == "died":
        why = f"the call worker ended during the call (exit status {reply[1]})"
    elif reply[0] == "over":
        why = f"the result is {reply[1]} characters long, over the limit of {limits.output_chars}"
    elif reply[0] == "deep":
        why = (
            "the call would leave the backend's state nested too deeply (e.g. a directory chain over 50 deep)"
        )
    elif reply[0] == "memory":
        why = f"the call ran out of memory (limit {limits.memory_mb} MB)"
    else:
        why = f"the call failed in the backend worker ({reply[1]})"
    return f"Error during execution: {why}; nothing was changed."


_CALL_WORKER = _CallWorker()


class Backends:
    """Fresh instances of an entry's backend classes, loaded with its initial_config, and call dispatch. With
    `limits`, every call runs in the call worker under them (the model's backends); without, here (the ground
    truth's, trusted)."""

    def __init__(
        self,
        involved_classes: list[str],
        initial_config: dict,
        long_context: bool,
        limits: CallLimits | None = None,
    ) -> None:
        self.instances: dict[str, Any] = {}
        self.limits = limits
        for class_name in involved_classes:
            instance = backend_class(class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(
                    copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context
                )
            self.instances[class_name] = instance
        # One deep copy of all instances together severs any alias of module-level data (and keeps
        # references between instances' own objects, such as the file system's current directory).
        self.instances = copy.deepcopy(self.instances)
        # Method name -> class; a later class wins, as in BFCL's executor (no name is shared in practice).
        self.owner = {d["name"]: c for c in involved_classes for d in function_docs(c)}

    def execute(self, call: Call) -> str:
        """Run one parsed call; an exception becomes BFCL's 'Error during execution: ...' result, and so does a
        call that hits a limit (then the instance is left as it was)."""
        return self.execute_reply([call])[0]

    def execute_reply(self, calls: list[Call]) -> list[str]:
        """Run the calls of one reply in order, under the reply's CPU time budget (`CallLimits.reply_time_s`):
        each call gets what is left (up to `time_s`); once it is spent, the remaining calls are not run and their
        results say so."""
        if self.limits is None:
            return [run_call(self.instances[self.owner[c.name]], c.name, c.args, c.kwargs) for c in calls]
        left = self.limits.reply_time_s
        results = []
        for call in calls:
            if left <= 0.01:
                results.append(
                    f"Error during execution: not run: the reply's calls used its {self.limits.reply_time_s:g} s "
                    "of CPU time; nothing was changed."
                )
                continue
            owner = self.owner[call.name]
            text, after, cpu = _CALL_WORKER.run(self.instances[owner], call, self.limits, left)
            left -= cpu
            if after is not None:
                self.instances[owner] = after
            results.append(text)
        return results
