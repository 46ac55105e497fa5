"""Sandbox uids (root only): one per concurrent run, from a pool guarded by file locks across threads and
processes, and the sweep that kills whatever a run under one left behind."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import subprocess
import tempfile
import time

from .base import SandboxError

IS_ROOT = os.geteuid() == 0
UID_BASE, UID_SLOTS = 61000, 512
LOCK_DIR = os.path.join(tempfile.gettempdir(), "kit-sandbox-uids")


def uid_processes(uid: int, live_only: bool = True) -> list[int]:
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


def sweep_uid(uid: int) -> None:
    """Kill every process of the sandbox uid: `kill -9 -1` run as that uid reaches exactly its own processes
    (no pid-reuse race), including any that escaped a pid namespace's teardown."""
    for _ in range(50):
        if not uid_processes(uid):
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


def wait_gone(uid: int, timeout_s: float = 5.0) -> bool:
    """Wait until no live process of `uid` is left (True), or `timeout_s` has passed (False)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while uid_processes(uid):
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
    return True


@contextlib.contextmanager
def sandbox_uid(sweep: bool = True):
    """A uid no other run uses right now (root only): a flock on a per-uid file, across threads and processes.
    `sweep` kills what a run under it left and skips uids with unreaped zombies; it is needed only without a pid
    namespace (weak mode): inside bubblewrap every process dies with the namespace, and the cgroup is checked
    empty before it is removed."""
    if not IS_ROOT:
        yield None
        return
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    for uid in range(UID_BASE, UID_BASE + UID_SLOTS):
        try:
            pwd.getpwuid(uid)
            continue  # a real account: never borrow it
        except KeyError:
            pass
        fd = os.open(os.path.join(LOCK_DIR, str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if sweep:
            sweep_uid(uid)  # leftovers of a run that died with its parent
            if uid_processes(uid, live_only=False):
                os.close(
                    fd
                )  # zombies not yet reaped by init would count against RLIMIT_NPROC: use another uid
                continue
        try:
            yield uid
        finally:
            # a uid goes back to the pool only with no process of it alive: the next run under it counts its
            # processes against RLIMIT_NPROC. Inside bubblewrap they die with the pid namespace, but not at once:
            # after the sandbox is reaped, a fork bomb's processes can still be exiting (seen under load)
            if sweep or not wait_gone(uid):
                sweep_uid(uid)
            os.close(fd)
        return
    raise SandboxError(f"all {UID_SLOTS} sandbox uids are busy")


def left_clean(uid: int | None) -> bool:
    """No process of sandbox uid `uid` (a run's `layers["uid"]`; None: no uid was used) is alive. Other kit
    processes may use the same uid at the same time, so this takes the uid's pool lock first (waiting for whoever
    holds it), as a run would."""
    if uid is None:
        return True
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(LOCK_DIR, str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return not uid_processes(uid)
    finally:
        os.close(fd)


def user_process_count() -> int:
    return len(uid_processes(os.getuid()))
