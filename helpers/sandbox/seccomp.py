"""The sandbox's seccomp filter: a classic BPF program, built here (no library needed), that bubblewrap installs
on the sandboxed interpreter with `--seccomp FD` before it starts, inherited by every process it forks.

It refuses, with EPERM, the system calls a test program never needs and an attacker would use:

- new namespaces: `unshare`, `setns`, and `clone` with any CLONE_NEW* flag (the sandbox uid could otherwise make
  user, mount and network namespaces); `clone3` gets ENOSYS, so the C library falls back to `clone`, whose flags a
  filter can read (clone3's are in memory);
- kernel state that outlives a sandbox or crosses between two: the key rings (`add_key`, `request_key`, `keyctl`:
  a table left by one episode was read by the next), inotify and fanotify (two sandboxes passed bits through
  watches on the shared read-only standard library), and file locks and notices: `flock`, and `fcntl`'s lock,
  lease and directory-notice commands (two sandboxes passed 16 of 16 bits through `flock` on a file of the
  read-only standard library that both bind; a lock on a shared inode is seen by every sandbox). Locks on a
  sandbox's own files go too (a program's sqlite database in /tmp cannot lock: use `:memory:`);
- io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`: system calls a filter cannot see);
- debugging and other processes' memory (`ptrace`, `process_vm_readv`, `process_vm_writev`);
- mounting (`mount`, `umount2`, `pivot_root`, `chroot`, the new mount API), and the rest of the administrator's
  calls (`bpf`, `perf_event_open`, `userfaultfd`, modules, kexec, reboot, swap, clocks, quotas, `acct`, handles).

An unknown architecture in the call (e.g. 32-bit calls on x86_64) kills the process, and so do x32 calls.
Architectures: x86_64 and aarch64 (`SUPPORTED`); elsewhere `program()` raises SandboxError and the boundary
probe says the filter is missing.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

from .base import SandboxError

# BPF instructions (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (args' low 32 bits, little-endian)
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
X32_BIT = 0x40000000
# fcntl commands refused (linux/fcntl.h): F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW (locks
# on an inode every sandbox binds are a channel between them), F_SETLEASE, F_GETLEASE, F_NOTIFY (dnotify)
FCNTL_REFUSED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)

_REFUSED_NAMES = (
    "unshare",
    "setns",
    "add_key",
    "request_key",
    "keyctl",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "acct",
    "name_to_handle_at",
    "open_by_handle_at",
    "sethostname",
    "setdomainname",
    "syslog",
    "vhangup",
    "flock",
)
# system call numbers: arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h (aarch64)
SYSCALLS = {
    "x86_64": {
        "audit_arch": 0xC000003E,
        "clone": 56,
        "clone3": 435,
        "fcntl": 72,
        "flock": 73,
        "unshare": 272,
        "setns": 308,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "inotify_init": 253,
        "inotify_init1": 294,
        "inotify_add_watch": 254,
        "fanotify_init": 300,
        "fanotify_mark": 301,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "settimeofday": 164,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "adjtimex": 159,
        "quotactl": 179,
        "acct": 163,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "sethostname": 170,
        "setdomainname": 171,
        "syslog": 103,
        "vhangup": 153,
    },
    "aarch64": {
        "audit_arch": 0xC00000B7,
        "clone": 220,
        "clone3": 435,
        "fcntl": 25,
        "flock": 32,
        "unshare": 97,
        "setns": 268,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "inotify_init1": 26,
        "inotify_add_watch": 27,
        "fanotify_init": 262,
        "fanotify_mark": 263,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "settimeofday": 170,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "adjtimex": 171,
        "quotactl": 60,
        "acct": 89,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "sethostname": 161,
        "setdomainname": 162,
        "syslog": 116,
        "vhangup": 58,
    },
}
SUPPORTED = tuple(SYSCALLS)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def refused(arch: str | None = None) -> dict[str, int]:
    """The refused system calls of `arch` (default: this machine's), name -> number."""
    table = SYSCALLS[arch or platform.machine()]
    return {name: table[name] for name in _REFUSED_NAMES if name in table}


def program(arch: str | None = None) -> bytes:
    """The filter for `arch` (default: this machine's) as bubblewrap's `--seccomp` reads it: struct sock_filter
    entries, 8 bytes each."""
    arch = arch or platform.machine()
    if arch not in SYSCALLS:
        raise SandboxError(
            f"no seccomp filter for the {arch} architecture (supported: {', '.join(SUPPORTED)})"
        )
    t = SYSCALLS[arch]
    deny = _RET, 0, 0, _ERRNO | errno.EPERM
    out = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ, 1, 0, t["audit_arch"]),
        _insn(_RET, 0, 0, _KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        out += [_insn(_JGE, 0, 1, X32_BIT), _insn(_RET, 0, 0, _KILL_PROCESS)]
    for nr in refused(arch).values():
        out += [_insn(_JEQ, 0, 1, nr), _insn(*deny)]
    out += [_insn(_JEQ, 0, 1, t["clone3"]), _insn(_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    k = len(FCNTL_REFUSED)  # fcntl: refuse the lock, lease and notice commands (its second argument)
    out += [_insn(_JEQ, 0, k + 3, t["fcntl"]), _insn(_LD_W_ABS, 0, 0, _ARG1)]
    out += [_insn(_JEQ, k - i, 0, cmd) for i, cmd in enumerate(FCNTL_REFUSED)]
    out += [_insn(_RET, 0, 0, _ALLOW), _insn(*deny)]
    out += [
        _insn(_JEQ, 0, 4, t["clone"]),  # clone: refuse any CLONE_NEW* flag
        _insn(_LD_W_ABS, 0, 0, _ARG0),
        _insn(_JSET, 0, 1, CLONE_NEW_FLAGS),
        _insn(*deny),
        _insn(_RET, 0, 0, _ALLOW),
        _insn(_RET, 0, 0, _ALLOW),
    ]
    return b"".join(out)


def program_fd(arch: str | None = None) -> int:
    """A read-only descriptor holding `program()` at offset 0 (a memfd; the caller passes it to bubblewrap and
    closes it)."""
    data = program(arch)
    fd = os.memfd_create("kit-sandbox-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
