"""The BFCL call worker: a child process that runs the model's backend calls, one at a time, for `engine.CallWorker`.

Started as `python -s -P -m helpers.envs.bfcl.worker <memory_mb>` with only the kit's root on PYTHONPATH (no other
PYTHON* variable, no user site). The backends are bfcl-eval's trusted code; the arguments are the model's literals,
which can make a call run for minutes (`power(base=7, exponent=10**7)`) or return megabytes, so the call runs here
and not in the kit's process. Each job on stdin is a frame (`<Q` length, then a pickle) of (the instance pickled,
method name, args, kwargs, output cap); the answer on stdout is one frame: ("ok", result text, the instance
pickled after the call), ("over", result length), ("memory",) or ("failed", why). "ready" is sent once at start.
The address space may grow by `memory_mb` over what the started worker holds (RLIMIT_AS).
"""

from __future__ import annotations

import os
import pickle
import resource
import struct
import sys

from helpers.envs.bfcl.engine import run_call

_HEADER = struct.Struct("<Q")


def read_exact(n: int) -> bytes:
    """`n` bytes from stdin; the end of stdin (the kit closed the pipe) ends the worker."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return bytes(buf)


def write(out: int, obj: object) -> None:
    """One framed pickle on the descriptor `out`."""
    data = pickle.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(out, view) :]


def answer(job: tuple) -> tuple:
    """The reply to one job (see the module doc)."""
    state, name, args, kwargs, cap = job
    try:
        instance = pickle.loads(state)
        text = run_call(instance, name, args, kwargs)
        return ("over", len(text)) if len(text) > cap else ("ok", text, pickle.dumps(instance))
    except MemoryError:
        return ("memory",)
    except BaseException as e:
        return ("failed", f"{type(e).__name__}: {e}"[:300])


def main(memory_mb: int) -> None:
    out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # a backend that prints cannot garble the channel
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    extra = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
    write(out, "ready")
    while True:
        (n,) = _HEADER.unpack(read_exact(_HEADER.size))
        write(out, answer(pickle.loads(read_exact(n))))


if __name__ == "__main__":
    main(int(sys.argv[1]))
