"""bfcl-eval's executable backends: fresh instances per episode, one call run as BFCL's executor runs it, and
the call worker that runs the model's calls under `CallLimits` in a child process (`worker.py`)."""

from __future__ import annotations

import copy
import decimal
import importlib
import json
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mpmath
from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

from helpers.envs.bfcl.data import function_docs
from helpers.envs.bfcl.parser import Call


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
            try:
                return f"Error during execution: {e}"
            except Exception:
                return f"Error during execution: {type(e).__name__}"


@dataclass(frozen=True)
class CallLimits:
    """Limits on one backend call with the model's arguments: wall-clock seconds, characters of its result,
    megabytes of memory it may add."""

    time_s: float = 2.0
    output_chars: int = 100_000
    memory_mb: int = 1024

    def __post_init__(self) -> None:
        for key in ("time_s", "output_chars", "memory_mb"):
            if getattr(self, key) <= 0:
                raise ValueError(f"bfcl: call limit {key} must be positive, got {getattr(self, key)!r}")


WORKER_MODULE = "helpers.envs.bfcl.worker"


class _CallWorker:
    """One process per kit process that runs model-argument calls under `CallLimits`; killed and restarted when a
    call overruns (the parent's instances never saw the call, so nothing changed)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.memory_mb: int | None = None
        self.lock = threading.Lock()

    def _start(self, memory_mb: int) -> None:
        root = str(Path(__file__).resolve().parents[3])  # the kit's root, also where it is not pip-installed
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONPATH": root}
        self.proc = subprocess.Popen(
            [sys.executable, "-s", "-P", "-m", WORKER_MODULE, str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.memory_mb = memory_mb
        self.buf = bytearray()
        if self._read(time.monotonic() + 120) != "ready":
            self._stop()
            raise RuntimeError(f"bfcl: the call worker did not start (python -m {WORKER_MODULE})")

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None

    def _read(self, deadline: float) -> Any:
        """One framed reply, or None on timeout or a dead worker."""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if len(self.buf) >= 8:
                    n = struct.unpack("<Q", self.buf[:8])[0]
                    if len(self.buf) >= 8 + n:
                        obj = pickle.loads(bytes(self.buf[8 : 8 + n]))
                        del self.buf[: 8 + n]
                        return obj
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    if time.monotonic() >= deadline:
                        return None
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk

    def run(self, instance: Any, call: Call, limits: CallLimits) -> tuple[str, Any | None]:
        """(result text, the instance after the call) or (an error result, None) when a limit was hit."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None or self.memory_mb != limits.memory_mb:
                self._stop()
                self._start(limits.memory_mb)
            job = pickle.dumps(
                (pickle.dumps(instance), call.name, call.args, call.kwargs, limits.output_chars)
            )
            try:
                self.proc.stdin.write(struct.pack("<Q", len(job)) + job)
                self.proc.stdin.flush()
            except OSError:
                reply = None
            else:
                reply = self._read(time.monotonic() + limits.time_s)
            if reply is None or reply[0] != "ok":
                if reply is None:
                    self._stop()
                return _limit_text(reply, limits), None
            return reply[1], pickle.loads(reply[2])


def _limit_text(reply: tuple | None, limits: CallLimits) -> str:
    """The result a call gets when it hit a limit (its effects are discarded)."""
    if reply is None:
        why = f"the call did not finish within its time limit of {limits.time_s:g} s and was stopped"
    elif reply[0] == "over":
        why = f"the result is {reply[1]} characters long, over the limit of {limits.output_chars}"
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
        owner = self.owner[call.name]
        if self.limits is None:
            return run_call(self.instances[owner], call.name, call.args, call.kwargs)
        text, after = _CALL_WORKER.run(self.instances[owner], call, self.limits)
        if after is not None:
            self.instances[owner] = after
        return text
