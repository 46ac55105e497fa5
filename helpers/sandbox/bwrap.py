"""The operating-system boundary: bubblewrap's command line over an empty read-only root that holds only the
interpreter, its standard library and the shared libraries they load; and the probe (once per process) of what
this machine gives: bubblewrap as root or through a user namespace, and cgroups."""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass

from .base import ISOLATION_ENV, SANDBOX_HOME, Limits, SandboxError
from .cgroups import JOIN, CgroupTree
from .seccomp import program_fd
from .uids import UID_BASE, UID_SLOTS

# -------------------------------------------------------------------------------------------- the boundary


@dataclass(frozen=True)
class Interpreter:
    """The files the child needs: the real interpreter, its standard library, the shared libraries they load."""

    executable: str
    stdlib: tuple[str, ...]
    hidden: tuple[str, ...]  # directories inside the standard library that are not the standard library
    files: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def interpreter() -> Interpreter:
    """Found once per process (`ldd` over the interpreter and every extension module of the standard library)."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    stdlib = stdlib_roots()
    hidden = tuple(
        p
        for s in stdlib
        for p in (os.path.join(s, "site-packages"), os.path.join(s, "dist-packages"))
        if os.path.isdir(p)
    )
    modules = sorted({m for s in stdlib for m in glob.glob(os.path.join(s, "lib-dynload", "*.so"))})
    ldd = shutil.which("ldd") or "/usr/bin/ldd"
    try:
        out = subprocess.run(
            [ldd, exe, *modules], capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"}
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"could not list the interpreter's shared libraries with ldd: {exc}") from exc
    libs = {exe}
    for line in out.splitlines():
        for token in line.split():
            if token.startswith("/") and os.path.isfile(token):
                libs.add(token)
    libs = {p for p in libs if not any(p.startswith(s + os.sep) for s in stdlib)}
    return Interpreter(exe, tuple(stdlib), hidden, tuple(sorted(libs)))


def bwrap_command(
    bwrap: str, interp: Interpreter, limits: Limits, env: dict, userns: bool, seccomp_fd: int | None = None
) -> list[str]:
    """bubblewrap's command line: new namespaces, an empty read-only root with only the interpreter, its standard
    library and its libraries, private /proc, /dev, and size-limited tmpfs for the working dir, /tmp, /dev/shm;
    with `seccomp_fd`, the seccomp filter read from that descriptor (`seccomp.program_fd`)."""
    cmd = [
        bwrap,
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if userns:
        cmd += ["--unshare-user", "--disable-userns"]
    else:  # root: the runner keeps only what it needs to drop to the sandbox uid, and nothing after that
        cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    binds = [*interp.files, *interp.stdlib]
    parents = sorted({os.path.dirname(p) for p in binds} - {"/"})
    ancestors = sorted({a for p in parents for a in _ancestors(p)}, key=lambda p: (p.count("/"), p))
    for d in ancestors:
        cmd += ["--perms", "0755", "--dir", d]
    for p in binds:
        cmd += ["--ro-bind", p, p]
    for d in interp.hidden:
        cmd += ["--size", "4096", "--tmpfs", d, "--remount-ro", d]
    size = str(limits.disk_mb << 20)
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    cmd += ["--perms", "0777", "--size", size, "--tmpfs", SANDBOX_HOME]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd += ["--chdir", SANDBOX_HOME, "--remount-ro", "/", "--"]
    return cmd


def _ancestors(path: str) -> list[str]:
    out = []
    while path not in ("/", ""):
        out.append(path)
        path = os.path.dirname(path)
    return out


def stdlib_roots() -> list[str]:
    """The base interpreter's standard library directories (not a virtual environment's `lib`, which only holds
    site-packages): what the child may read."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = {sysconfig.get_path("stdlib", vars=base), sysconfig.get_path("platstdlib", vars=base)}
    paths.add(os.path.dirname(os.__file__))
    return sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})


@dataclass(frozen=True)
class Boundary:
    """What this machine gives the sandbox: bubblewrap (as root, or through a user namespace) and cgroups."""

    root: bool
    bwrap: str | None
    userns: bool  # bubblewrap runs through an unprivileged user namespace (not root)
    cgroups: CgroupTree | None
    problems: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.problems

    def message(self) -> str:
        """Why the full boundary is missing and how to get it."""
        return (
            "The code sandbox cannot build its operating-system boundary on this machine: "
            + "; ".join(self.problems)
            + ". Generated programs are not run without it. To enable it: install bubblewrap (as root, "
            "`make install` runs `apt-get install -y bubblewrap`), and either run as root (a VM, or a container "
            "started with --privileged or --cap-add SYS_ADMIN and a writable /sys/fs/cgroup) or, as a normal user, "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces"
            " > 0) and run inside a cgroup delegated to you (e.g. `systemd-run --user --scope -p Delegate=yes make "
            f"test`). To run anyway with weaker isolation, set {ISOLATION_ENV}=weak: every result then records "
            "layers['mode'] == 'weak' and what was missing. `python -m helpers.sandbox` shows what is there."
        )


NOT_LINUX = (
    "this is not Linux (sys.platform is {platform!r}): bubblewrap, namespaces, cgroups and seccomp are Linux "
    "kernel features, so neither the boundary nor weak isolation (which reads /proc) can run here"
)


@dataclass(frozen=True)
class Availability:
    """Which isolation can run programs on this machine, and why not the full one.

    `mode`: "os" (the full operating-system boundary), "weak" (Linux without it: only a run that asks for weak
    isolation can start, `KIT_SANDBOX=weak` or `Limits(isolation="weak")`), or "none" (not Linux: no program can
    be run at all). `missing` lists what is missing, in the probe's words (empty for "os")."""

    mode: str
    missing: tuple[str, ...]

    @property
    def full(self) -> bool:
        return self.mode == "os"

    def explain(self) -> str:
        """One plain-language paragraph: what this machine gives the code sandbox and what that means."""
        if self.full:
            return "The code sandbox's operating-system boundary is available on this machine."
        what = "; ".join(self.missing)
        if self.mode == "weak":
            return (
                f"The code sandbox's operating-system boundary is not available on this machine ({what}). "
                "Programs written by a model are not run here: the DeepCoder-MT environment refuses them unless "
                f"you set {ISOLATION_ENV}=weak yourself. Only weak isolation can start (the parts of the boundary "
                "that are there, per-process resource limits and the audit hook). `python -m helpers.sandbox` "
                "shows what is there."
            )
        return (
            f"The code sandbox cannot run on this machine ({what}). No program is run here, not even with "
            f"{ISOLATION_ENV}=weak. Run the DeepCoder-MT parts on Linux (docs/course.md says where)."
        )


def availability(refresh: bool = False) -> Availability:
    """What isolation this machine can give programs (`boundary`'s probe, once per process): the full boundary,
    weak isolation only (Linux without it), or none (not Linux). Notebooks use it to decide, before running
    anything, whether a demo runs in the sandbox, runs only the kit's own trusted programs weakly, or is skipped."""
    b = boundary(refresh)
    if b.complete:
        return Availability("os", ())
    if not sys.platform.startswith("linux"):
        return Availability("none", b.problems)
    return Availability("weak", b.problems)


_BOUNDARY: Boundary | None = None
_BOUNDARY_LOCK = threading.Lock()


def boundary(refresh: bool = False) -> Boundary:
    """Probe (once per process, or again with `refresh`) what isolation this machine can give."""
    global _BOUNDARY
    with _BOUNDARY_LOCK:
        if _BOUNDARY is None or refresh:
            _BOUNDARY = _probe_boundary()
        return _BOUNDARY


def _probe_boundary() -> Boundary:
    root = os.geteuid() == 0
    if not sys.platform.startswith("linux"):  # bubblewrap, namespaces, cgroups and seccomp are Linux's alone
        return Boundary(root, None, False, None, (NOT_LINUX.format(platform=sys.platform),))
    problems = []
    cgroups, why = CgroupTree.find()
    if cgroups is None:
        problems.append(f"no cgroup for whole-sandbox memory and process limits ({why})")
    bwrap = shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.path.exists(p)), None
    )
    userns = not root
    if bwrap is None:
        problems.append("bubblewrap (bwrap) is not installed")
    else:
        why = _probe_bwrap(bwrap, userns, cgroups)
        if why:
            problems.append(why)
            bwrap = None
    return Boundary(root, bwrap, userns, cgroups, tuple(problems))


def _probe_bwrap(bwrap: str, userns: bool, cgroups: CgroupTree | None) -> str:
    """Run the real interpreter in a sandbox once; '' if it comes up with the expected uid and no capabilities."""
    try:
        interp = interpreter()
    except SandboxError as exc:
        return str(exc)
    uid = None if userns else UID_BASE + UID_SLOTS  # a uid outside the pool, only for the probe
    code = (
        "import os, sys\n"
        f"uid = {uid!r}\n"
        "if uid is not None:\n    os.setgroups([]); os.setgid(uid); os.setuid(uid)\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
        "open('probe', 'w').write('x')\n"
        "print('ok', os.getuid(), status['CapEff'].strip(), status.get('Seccomp', '?').strip(), sorted(os.listdir('/')))\n"
    )
    try:
        fd = program_fd()
    except (SandboxError, OSError) as exc:
        return f"the sandbox's seccomp filter cannot be built here ({exc})"
    cmd = bwrap_command(bwrap, interp, Limits(), {"PATH": "/usr/bin:/bin"}, userns, fd)
    cmd += [interp.executable, "-s", "-S", "-P", "-c", code]
    group = None
    try:
        if cgroups is not None:
            group = cgroups.create(256 << 20, 16)
            cmd = ["/bin/sh", "-c", JOIN, "sh", *group.procs_files, "--", *cmd]
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, pass_fds=(fd,)
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start a sandbox ({type(exc).__name__}: {exc})"
    finally:
        os.close(fd)
        if group is not None:
            group.remove()
    words = out.stdout.split()
    if out.returncode != 0 or not words or words[0] != "ok":
        how = "through a user namespace" if userns else "as root"
        return f"bubblewrap could not start a sandbox {how} ({(out.stderr or out.stdout).strip()[-300:]})"
    if words[2] != "0000000000000000" or (uid is not None and int(words[1]) != uid):
        return f"the probe sandbox kept privileges (uid {words[1]}, capabilities {words[2]})"
    if words[3] != "2":
        return f"bubblewrap did not install the seccomp filter (Seccomp: {words[3]} in /proc/self/status)"
    return ""
