"""The program the sandboxed interpreter runs: `python -s -S -P child.py wire.py`, both files passed as open
descriptors (`/proc/self/fd/N`, closed before `ready`; no path of the kit is mounted in the boundary).

Standard library only; everything before `ready` is trusted. It never decides a verdict: it runs what it is told
and reports outputs, and the CPU time each test used. The channel: one JSON object per line, the job first on
stdin (`cfg`, `program`, `setup`), then commands (`run` a stdin or call test; `begin`, `call`, `end` an assert
test), each answered in order on stdout. Imported in the kit (tests, linters), it runs nothing.
"""

import builtins
import contextlib
import gc
import json
import linecache
import math
import os
import resource
import signal
import sys
import threading
import traceback

try:  # imported in the kit: the codec from the package
    from .wire import MAX_ITEMS, json_items, wire_decode, wire_encode
except (
    ImportError
):  # run as a file by the sandboxed interpreter: main() loads wire.py, passed beside this file
    wire_encode = wire_decode = json_items = MAX_ITEMS = None


def send(fd, msg):
    data = memoryview((json.dumps(msg) + "\n").encode())
    while data:
        data = data[os.write(fd, data) :]


def proc_status():
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return {"caps": fields["CapEff"].strip(), "no_new_privs": fields.get("NoNewPrivs", "").strip() == "1"}
    except (OSError, KeyError, ValueError):
        return {}


def confine(cfg):
    """Preload (weak mode as root), rlimits, drop to the sandbox uid, check no capability is left, audit hook."""
    for name in cfg["preload"]:
        with contextlib.suppress(ImportError):
            __import__(name)
    cpu = cfg["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # the CPU-time timer's signal ends the process
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], cfg["fsize_hard"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["nofile"], cfg["nofile"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if cfg["uid"] is not None:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
        if os.getresuid() != (cfg["uid"],) * 3 or os.getresgid() != (cfg["uid"],) * 3:
            raise RuntimeError("could not drop to the sandbox uid")
    info = {"uid": os.getuid(), "groups": os.getgroups(), **proc_status()}
    if cfg["need_no_caps"] and info.get("caps") != "0000000000000000":
        raise RuntimeError(f"capabilities left after dropping privileges: {info.get('caps')}")
    try:
        with open("/proc/self/net/dev") as f:  # the network interfaces this process can use
            info["interfaces"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    except OSError:
        info["interfaces"] = None
    if cfg["hook"]:
        install_hook(cfg)
    return info


def install_hook(cfg):
    """Second layer (clear messages): refuse network, spawning, ctypes, foreign signals, file access outside."""
    real = os.path.realpath
    home = real(os.getcwd())
    me = os.getpid()
    read_roots = (
        *(real(p) for p in cfg["read_roots"]),
        home,
        "/proc/self",
        "/dev/null",
        "/dev/zero",
        "/dev/urandom",
        "/dev/random",
    )
    deny = {
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "subprocess.Popen",
        "pty.spawn",
        "os.forkpty",
        "os.startfile",
        "os.putenv",
        "os.unsetenv",
    }
    if not cfg["fork_ok"]:
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
            p = "/proc/self" + p[len("/proc/" + str(me)) :]
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
            if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] not in (
                0,
                me,
                os.getpgid(0),
            ):
                refuse(event, f"pid {args[0]}")
            if event == "open":
                path, mode, flags = args
                write = bool((flags or 0) & writers) or any(c in (mode or "") for c in "wax+")
                if not inside(path, (home,) if write else read_roots):
                    refuse("open", f"{path!r} outside the sandbox")
            elif event in ("os.listdir", "os.scandir") and args[0] is not None:
                if not inside(args[0], read_roots):
                    refuse(event, f"{args[0]!r} outside the sandbox")
            elif event in (
                "os.remove",
                "os.rmdir",
                "os.mkdir",
                "os.chmod",
                "os.chown",
                "os.truncate",
                "os.utime",
                "os.rename",
                "os.link",
                "os.symlink",
                "shutil.rmtree",
                "shutil.copyfile",
                "shutil.copytree",
                "shutil.move",
            ):
                paths = [a for a in args if isinstance(a, (str, bytes, os.PathLike))]
                for p in paths:
                    if not inside(p, (home,)):
                        refuse(event, f"{p!r} outside the sandbox")
        finally:
            busy.pop()

    sys.addaudithook(hook)


def cpu_used():
    """CPU seconds this process has used (user and system, all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def arm(cfg):
    """Start a test's CPU clock: a CPU-time interval timer at the test's limit (SIGPROF, whose default action ends
    the process: the parent reads that as "timeout"), and RLIMIT_CPU's soft limit a second or two behind it
    (SIGXCPU) for a program that disarms the timer. Returns the CPU time at the start."""
    start = cpu_used()
    signal.setitimer(signal.ITIMER_PROF, cfg["test_cpu_s"])
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (min(hard, math.ceil(start + cfg["test_cpu_s"]) + 1), hard))
    return start


def disarm(start):
    """Stop the test's CPU clock; the CPU seconds the test used."""
    signal.setitimer(signal.ITIMER_PROF, 0)
    used = cpu_used() - start
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    return round(used, 6)


def exit_program(code=None):
    """`exit()` and `quit()` (absent without the site module)."""
    raise SystemExit(code)


def source_lines(name, text):
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)


def format_error(exc, cap):
    """The program's own frames and the exception, at most `cap` characters (a huge message is cut, not built)."""
    try:
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if f.filename in ("<program>", "<setup>")
        ]
        head = "".join(traceback.format_list(frames[-6:]))
    except BaseException:
        head = ""
    try:
        text = str(exc)
        if len(text) <= cap:
            tail = "".join(traceback.format_exception_only(type(exc), exc))
        else:
            tail = f"{type(exc).__name__}: {text[:cap]}...(cut: {len(text)} characters)\n"
    except BaseException:
        tail = f"{type(exc).__name__}: (the message could not be shown)\n"
    return (head[: max(0, cap - len(tail))] + tail)[:cap]


def redirect(stdin_text, cfg):
    data = stdin_text.encode("utf-8", errors="surrogateescape")
    if len(data) < cfg["fsize"]:
        with open("stdin.txt", "wb") as f:
            f.write(data)
    else:  # an input larger than the output cap: lift the file-size limit (to its hard value) for it
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        try:
            with open("stdin.txt", "wb") as f:
                f.write(data)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], hard))
    for fd, name, flags in (
        (0, "stdin.txt", os.O_RDONLY),
        (1, "stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        new = os.open(name, flags, 0o600)
        if new != fd:  # the program may have closed fd 0-2 (e.g. a garbage-collected open(0))
            os.dup2(new, fd)
            os.close(new)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 (the test's stdin)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def read_capped(name, cap):
    try:
        with open(name, "rb") as f:
            data = f.read(cap + 1)
    except OSError:
        return "", False
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


def finish(msg, cfg, start):
    """After a test: wait for the program's non-daemon threads (as interpreter shutdown would), flush, stop the
    CPU clock started at `start`, close the descriptors the program left open (so the runner can open files
    again), collect the output."""
    for th in threading.enumerate():
        if th is not threading.main_thread() and not th.daemon:
            with contextlib.suppress(BaseException):
                th.join()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as exc:
            if exc.errno == 27:
                msg["over"] = True
        except BaseException:
            pass
    msg["cpu"] = disarm(start)
    os.closerange(cfg["keep_fds"] + 1, cfg["nofile"])
    msg["stdout"], over = read_capped("stdout.txt", cfg["cap"])
    if over:
        msg["over"] = True
    msg["stderr"] = read_capped("stderr.txt", cfg["error_cap"])[0]
    return msg


def failure(msg, exc, cfg):
    if isinstance(exc, SystemExit):
        if exc.code not in (None, 0):
            msg["error"] = f"SystemExit: {str(exc.code)[:200]}"
    elif isinstance(exc, OSError) and exc.errno == 27:  # EFBIG: RLIMIT_FSIZE reached
        msg["over"] = True
    elif isinstance(exc, CompileFailed):
        msg["error"] = str(exc)
    else:
        msg["error"] = format_error(exc, cfg["error_cap"])


def find_function(g, name):
    sol = g.get("Solution")
    if isinstance(sol, type) and hasattr(sol, name):
        return getattr(sol(), name)
    if callable(g.get(name)):
        return g[name]
    raise NameError(f"no function or Solution method named {name!r} is defined")


class CompileFailed(Exception):
    """The program (or the set-up code) does not compile: the error text is the test's error."""


class Runner:
    def __init__(self, cfg, program, setup_source):
        """`program` and `setup_source` are compiled at the first test, under its CPU clock: a program that is
        slow or too deeply nested to compile (3000 unary minus signs make `compile` raise RecursionError) fails
        its tests with the compiler's message instead of stopping the sandbox before it starts."""
        self.cfg, self.program, self.setup_source = cfg, program, setup_source
        self.code = self.setup = None
        self.syntax = ""
        self.snapshot = dict(builtins.__dict__)
        self.limit = sys.getrecursionlimit()
        self.digits = sys.get_int_max_str_digits()
        self.g = None
        self.cpu0 = 0.0

    def compiled(self):
        """Compile the program and the set-up code once; CompileFailed with the message if either fails."""
        if self.syntax:
            raise CompileFailed(self.syntax)
        if self.code is not None:
            return
        try:
            source_lines("<program>", self.program)
            code = compile(self.program, "<program>", "exec")
            if self.setup_source:
                source_lines("<setup>", self.setup_source)
                self.setup = compile(self.setup_source, "<setup>", "exec")
            self.code = code
        except (SyntaxError, ValueError, OverflowError) as exc:  # ValueError: a NUL byte in the source
            self.syntax = "".join(traceback.format_exception_only(type(exc), exc))[: self.cfg["error_cap"]]
        except (RecursionError, MemoryError) as exc:
            self.syntax = f"the program could not be compiled: {type(exc).__name__}: {exc}"[
                : self.cfg["error_cap"]
            ]
        if self.syntax:
            raise CompileFailed(self.syntax)

    def start(self, test):
        """Fresh globals and files for a test, its CPU clock, then the set-up code and the program."""
        self.cpu0 = arm(self.cfg)
        self.g = {
            "__name__": "__main__" if test["kind"] == "stdin" else "__solution__",
            "__builtins__": builtins,
        }
        redirect(test.get("input", ""), self.cfg)
        self.compiled()
        if self.setup is not None:
            exec(self.setup, self.g)
        exec(self.code, self.g)

    def reset(self):
        for k in [k for k in builtins.__dict__ if k not in self.snapshot]:
            del builtins.__dict__[k]
        builtins.__dict__.update(self.snapshot)
        sys.setrecursionlimit(self.limit)
        sys.set_int_max_str_digits(self.digits)
        self.g = None

    def run(self, test):
        """A stdin or call test from start to end."""
        msg = {"error": ""}
        if self.syntax:
            return {"error": self.syntax, "stdout": "", "stderr": ""}
        try:
            self.start(test)
            if test["kind"] == "call":
                value = find_function(self.g, test["fn_name"])(*test["args"])
                try:
                    text = json.dumps(value)
                except (TypeError, ValueError) as exc:
                    raise TypeError(
                        f"the return value ({type(value).__name__}) is not JSON-serialisable: {exc}"
                    ) from None
                if len(text) > self.cfg["cap"]:
                    msg["over"] = True
                elif json_items(text) > MAX_ITEMS:
                    raise ValueError(
                        f"the return value holds more than {MAX_ITEMS} values (the channel's limit)"
                    )
                msg["result"] = text[: self.cfg["cap"]]
        except BaseException as exc:
            failure(msg, exc, self.cfg)
        finish(msg, self.cfg, self.cpu0)
        self.reset()
        return msg

    def begin(self, test):
        if self.syntax:
            return {"error": self.syntax}
        try:
            self.start(test)
        except BaseException as exc:
            msg = {"error": ""}
            failure(msg, exc, self.cfg)
            finish(msg, self.cfg, self.cpu0)
            self.reset()
            return msg
        self.entry = test["entry_point"]
        return {"begun": True}

    def call(self, args, kwargs):
        if self.g is None:
            return {"raised": "no test is running"}
        try:
            fn = self.g.get(self.entry)
            if not callable(fn):
                raise NameError(f"no function named {self.entry!r} is defined")
            value = fn(*wire_decode(args), **wire_decode(kwargs))
        except BaseException as exc:
            msg = {"raised": ""}
            failure(msg, exc, self.cfg)
            return {
                "raised": msg.get("raised") or msg.get("error") or "SystemExit",
                "over": msg.get("over", False),
            }
        try:
            data = wire_encode(value)
            text = json.dumps(data)
        except (TypeError, ValueError) as exc:
            return {"unsendable": f"{type(exc).__name__}: {exc}"[: self.cfg["error_cap"]]}
        if len(text) > self.cfg["cap"] or os.fstat(1).st_size > self.cfg["cap"]:
            return {"over": True}
        if json_items(text) > MAX_ITEMS:
            return {
                "unsendable": f"the return value holds more than {MAX_ITEMS} values (the channel's limit)"
            }
        try:
            shown = repr(value)[: self.cfg["shown"]]
        except BaseException:
            shown = ""
        return {"value": data, "repr": shown}

    def end(self):
        msg = finish({}, self.cfg, self.cpu0)
        self.reset()
        return msg


def load_wire(path):
    """wire.py's two functions, from the file the parent passed (the codec it uses too)."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    namespace = {"__name__": "wire"}
    exec(compile(source, "wire.py", "exec"), namespace)
    return tuple(namespace[k] for k in ("wire_encode", "wire_decode", "json_items", "MAX_ITEMS"))


def main():
    global wire_encode, wire_decode, json_items, MAX_ITEMS
    wire_encode, wire_decode, json_items, MAX_ITEMS = load_wire(sys.argv[1])
    for path in sys.argv:  # this file and wire.py came as descriptors: close them
        if path.startswith("/proc/self/fd/"):
            with contextlib.suppress(OSError, ValueError):
                os.close(int(path.rsplit("/", 1)[1]))
    cmds = os.fdopen(os.dup(0), "rb")
    rep = os.dup(1)
    job = json.loads(cmds.readline())
    cfg = job["cfg"]
    cfg["keep_fds"] = max(cmds.fileno(), rep)
    try:
        info = confine(cfg)
        builtins.exit = builtins.quit = exit_program
    except BaseException as exc:
        send(rep, {"fatal": f"{type(exc).__name__}: {exc}"})
        return
    runner = Runner(cfg, job["program"], job["setup"])
    send(rep, {"ready": True, "info": info})
    while True:
        line = cmds.readline()
        if not line:
            return
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "run":
            reply = runner.run(cmd["test"])
        elif op == "begin":
            reply = runner.begin(cmd["test"])
        elif op == "call":
            reply = runner.call(cmd["args"], cmd["kwargs"])
        elif op == "end":
            reply = runner.end()
        else:
            return
        if reply.get("error") or reply.get("raised"):
            gc.collect()
        send(rep, reply)


if __name__ == "__main__":
    main()
