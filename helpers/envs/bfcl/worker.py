"""The BFCL call worker: a child process that runs the model's backend calls one at a time (`engine._CallWorker`).

Started as `python -s -P -m helpers.envs.bfcl.worker <memory_mb>` with only the kit's root on PYTHONPATH (no other
PYTHON* variable, no user site). The backends are bfcl-eval's trusted code; the arguments are the model's
literals, which can make a call run for minutes (`power(base=7, exponent=10**7)`) or return megabytes, so the call
runs here and not in the kit's process.

Each job on stdin is a frame (`<Q` length, then a pickle, `helpers.sandbox.wire.LENGTH`) of (the instance pickled,
method name, args, kwargs, output cap, seconds of CPU time); the answer on stdout is one such frame: (CPU seconds
the job used, reply), the reply being ("ok", result text, the instance pickled after the call), ("over", result
length), ("deep",) (the instance after the call does not pickle within `STATE_FRAMES` frames of recursion: a
directory chain hundreds deep, which the kit's process, deeper in its own stack, could not pickle or compare), ("memory",) or
("failed", why); "ready" is sent once at start. The address space may grow by `memory_mb` over what the started
worker holds (RLIMIT_AS; on Linux only, `limit_address_space`). A job that uses more than its seconds of this
process's CPU time ends the process (SIGPROF from `setitimer(ITIMER_PROF)`): the kit reads the signal in the exit
status and starts a fresh worker.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import sys

from helpers.envs.bfcl.engine import run_call
from helpers.sandbox.wire import read_job, send

STATE_FRAMES = 150  # recursion an instance's pickling may use (about 50 levels of nested directories)


def depth() -> int:
    """Frames on this thread's stack now."""
    n, f = 0, sys._getframe()
    while f is not None:
        n, f = n + 1, f.f_back
    return n


def pickled_within(obj: object, frames: int = STATE_FRAMES) -> bytes | None:
    """pickle.dumps(obj) with at most `frames` levels of recursion beyond this call, or None if it needs more."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth() + frames)
    try:
        return pickle.dumps(obj)
    except RecursionError:
        return None
    finally:
        sys.setrecursionlimit(limit)


def answer(job: tuple) -> tuple:
    """The reply to one job (see the module doc)."""
    state, name, args, kwargs, cap, _ = job
    try:
        instance = pickle.loads(state)
        text = run_call(instance, name, args, kwargs)
        if len(text) > cap:
            return ("over", len(text))
        state = pickled_within(instance)
        return ("deep",) if state is None else ("ok", text, state)
    except MemoryError:
        return ("memory",)
    except BaseException as e:
        return ("failed", f"{type(e).__name__}: {e}"[:300])


def limit_address_space(memory_mb: int) -> bool:
    """Let this process's address space grow by `memory_mb` over what it holds now (RLIMIT_AS), and say whether it
    could. Linux only: the current size comes from /proc/self/statm, and macOS neither has /proc nor enforces
    RLIMIT_AS. Elsewhere nothing is capped (False), so notebook 00's BFCL demo still runs off Linux; the CPU-time
    limit and the output cap still bound every call there."""
    if not sys.platform.startswith("linux"):
        return False
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    extra = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
    return True


def main(memory_mb: int) -> None:
    """Serve jobs until stdin closes."""
    out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # a backend that prints cannot garble the channel
    limit_address_space(memory_mb)
    # The CPU time limit: SIGPROF's default action ends the process.
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    send(out, "ready")
    while True:
        job = read_job()
        # The limit counts this process's CPU time (user + system) from here until the reply is written: a busy
        # machine only slows the call down and never changes its outcome. Waiting for the next job costs none.
        start = os.times()
        signal.setitimer(signal.ITIMER_PROF, job[-1])
        reply = answer(job)
        end = os.times()
        send(out, (end.user + end.system - start.user - start.system, reply))
        signal.setitimer(signal.ITIMER_PROF, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]))
