"""Hostile actions, tried as an attacker would, with the sandbox's audit hook deliberately off: the operating
system's boundary alone must hold. One test per class of attack that got through before (answer reading, verdict
forging, switching the hook off, writes through dir_fd and unaudited calls, files left for the next episode,
memory through memfd and children, huge error text), and the SQL and BFCL ones. Each attack must fail to pass,
leave nothing outside the sandbox, and leave the database files byte-for-byte unchanged.

These need the full boundary (bubblewrap, and root or user namespaces, and a cgroup): CI runs them as root. Where
it is missing they fail with the sandbox's own message, unless KIT_SANDBOX=weak says weak isolation is accepted,
in which case they are skipped (they test the boundary, which is then not there)."""

from __future__ import annotations

import ast
import copy
import glob
import json
import os
import platform
import socket
import tempfile
import tracemalloc
import uuid
from pathlib import Path

import pytest

from helpers import sandbox
from helpers.envs import bfcl
from helpers.envs.base import Task
from helpers.envs.code import CodeEnv, extract_program, fence, kit_tasks
from helpers.envs.sql import SQLEnv, dump_databases, spider_sqlite
from helpers.sandbox import seccomp, uids

KIT_ROOT = Path(sandbox.__file__).resolve().parents[2]
OFF = sandbox.Limits(timeout_s=3.0, memory_mb=256, audit_hook=False)


@pytest.fixture(scope="module", autouse=True)
def boundary_in_place():
    """The attacks test the operating-system boundary: it must be there (or weak mode knowingly chosen)."""
    b = sandbox.boundary()
    if not b.complete:
        if sandbox.isolation_setting(sandbox.Limits()) == "weak":
            pytest.skip(
                f"{sandbox.ISOLATION_ENV}=weak: the OS boundary is not there to attack ({b.problems})"
            )
        pytest.fail(b.message())


@pytest.fixture(scope="module", autouse=True)
def databases_unchanged():
    """Every SQLite database the kit ships is byte-for-byte the same after the attacks as before them."""
    paths = dump_databases()
    before = {db: spider_sqlite.sha256_file(p) for db, p in paths.items()}
    yield paths
    after = {db: spider_sqlite.sha256_file(p) for db, p in paths.items()}
    assert after == before, f"database files changed: {[db for db in before if before[db] != after[db]]}"


@pytest.fixture
def token():
    return f"kit-attack-{uuid.uuid4().hex}"


def host_traces(token: str) -> list[str]:
    """Files named after the attack's token anywhere the sandbox could have reached on the host."""
    places = {
        "/",
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        tempfile.gettempdir(),
        str(KIT_ROOT),
        str(KIT_ROOT / "helpers"),
        os.getcwd(),
        os.path.expanduser("~"),
        str(spider_sqlite.cache_dir()),
    }
    return sorted(p for d in places for p in glob.glob(os.path.join(d, f"*{token}*")))


def assert_contained(result: sandbox.RunResult, token: str) -> None:
    assert result.mode == "os"
    assert result.n_passed == 0, [(t.status, t.actual[:200]) for t in result.tests]
    assert not host_traces(token), host_traces(token)
    assert uids.left_clean(result.layers["uid"]), "processes of the sandbox survived the run"
    tree = sandbox.boundary().cgroups
    mine = [
        n for b in tree.bases.values() for n in os.listdir(b) if n.startswith(f"kit-sandbox-{os.getpid()}-")
    ]
    assert not mine, f"cgroups left behind: {mine}"


def secret_tests(token: str, n: int = 3) -> list[dict]:
    return [{"kind": "stdin", "input": f"{i}\n", "output": f"{token}-answer-{i}"} for i in range(n)]


# ------------------------------------------------------------------------------------------ answer reading


ANSWER_READERS = {
    "the runner's frame": "import sys; sys.stdout.write(sys._getframe(1).f_locals['test']['output'])",
    "every frame and every object": """
import gc, sys
f = sys._getframe()
while f:
    print({k: str(v)[:300] for k, v in f.f_locals.items()})
    f = f.f_back
for o in gc.get_objects():
    if isinstance(o, dict):
        print({k: str(v)[:300] for k, v in o.items() if isinstance(k, str) and k in ('output', 'expected', 'code')})
    elif isinstance(o, str) and 'answer' in o:
        print(o[:300])
""",
    "other processes and the kit's files": f"""
import os, glob
for p in os.listdir('/proc'):
    for f in ('cmdline', 'environ'):
        try:
            print(open(f'/proc/{{p}}/{{f}}', 'rb').read()[-3000:])
        except Exception as e:
            print(p, f, e)
found = [os.path.join(d, f) for top in os.listdir('/') if top not in ('proc', 'sys')
         for d, _, files in os.walk('/' + top) for f in files if '.json' in f or f.endswith('.gz')]
for path in [{str(KIT_ROOT / "helpers" / "envs" / "data" / "deepcoder_kit.jsonl")!r}, '/proc/1/environ', *found]:
    try:
        print(open(path, 'rb').read()[:3000])
    except Exception as e:
        print(path, e)
""",
}


@pytest.mark.parametrize("name", list(ANSWER_READERS))
def test_expected_outputs_never_reach_the_program(name, token):
    prog = ANSWER_READERS[name]
    assertion = [
        {
            "kind": "assert",
            "entry_point": "f",
            "code": f"def check(candidate):\n    assert candidate(1) == {token!r}\n",
        }
    ]
    call = [{"kind": "call", "fn_name": "f", "args": [1], "output": f"{token}-call"}]
    for tests in (secret_tests(token), assertion, call):
        r = sandbox.run_program(prog + "\ndef f(x):\n    return str(globals())", tests, limits=OFF)
        assert_contained(r, token)
        assert not any(token in t.actual or token in t.error for t in r.tests), name


def test_the_generic_answer_reader_solves_no_bundled_task():
    """The program that passed 32 of 32 bundled tasks on its first turn now passes none."""
    reader = fence(ANSWER_READERS["the runner's frame"])
    solved = []
    for task in kit_tasks(t_max=1):
        env = CodeEnv(timeout_s=2.0)
        env.reset(task, 1)
        res = env.step(reader)
        assert res.info["sandbox"] == "os"
        if res.success:
            solved.append(task.task_id)
    assert not solved


# ------------------------------------------------------------------------------------------ verdict forging

FORGERS = {
    "report lines on every descriptor": """
import json, os
lines = [{"i": i, "status": "ok", "passed": True, "verdict": "passed", "stdout": "forged", "begun": True,
          "value": True, "ready": True} for i in range(10)]
for fd in range(0, 256):
    for line in lines:
        try:
            os.write(fd, (json.dumps(line) + "\\n").encode())
        except OSError:
            pass
""",
    "the runner replaced in __main__": """
import sys
m = sys.modules['__main__']
for name in ('send', 'finish', 'failure', 'read_capped', 'format_error'):
    if hasattr(m, name):
        setattr(m, name, lambda *a, **k: {"status": "ok", "passed": True})
if hasattr(m, 'Runner'):
    m.Runner.run = lambda self, t: {"status": "ok", "passed": True}
    m.Runner.call = lambda self, a, k: {"value": True}
    m.Runner.end = lambda self: {}
""",
    "an object equal to everything": """
class Any:
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = lambda self: 0
    __repr__ = lambda self: 'Any()'
import builtins
builtins.print = lambda *a, **k: None
""",
    "exit right after forging": """
import os, json
for fd in range(0, 64):
    try:
        os.write(fd, (json.dumps({"status": "ok", "passed": True, "stdout": "x"}) + "\\n").encode())
    except OSError:
        pass
os._exit(0)
""",
}


@pytest.mark.parametrize("name", list(FORGERS))
def test_nothing_the_program_writes_is_taken_as_a_verdict(name, token):
    prog = FORGERS[name] + "\ndef f(*a):\n    return Any() if 'Any' in globals() else None\n"
    tests = [
        *secret_tests(token),
        {"kind": "call", "fn_name": "f", "args": [1], "output": f"{token}-call"},
        {
            "kind": "assert",
            "entry_point": "f",
            "code": f"def check(candidate):\n    assert candidate(1) == {token!r}\n",
        },
    ]
    # a short stall guard: a forger that never answers (the runner replaced) waits it out once per test, and what
    # is under test is that nothing it writes is a verdict, not the guard's default length (60 s)
    limits = sandbox.Limits(timeout_s=0.5, memory_mb=256, audit_hook=False, wall_s=2.0)
    assert_contained(sandbox.run_program(prog, tests, limits=limits), token)
    assert_contained(sandbox.run_program(prog, tests, limits=limits, batch=False), token)


# ----------------------------------------------------------------------------------- switching the hook off


@pytest.fixture
def host_listeners(token):
    """A unix socket in the host's /tmp and a TCP socket on the host's loopback, listening."""
    path = f"/tmp/kit-listener-{uuid.uuid4().hex}.sock"  # not named after the token: it is the host's own
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    for s in (unix, tcp):
        s.listen(1)
        s.setblocking(False)
    yield path, tcp.getsockname()[1], (unix, tcp)
    unix.close()
    tcp.close()
    os.unlink(path)


def test_switching_the_audit_hook_off_changes_nothing(token, host_listeners):
    """With the hook on, the program switches it off through gc (its re-entrancy flag) and then tries what the
    hook refused: a shell, ctypes, reading the kit, the host's sockets, writing the databases."""
    path, port, listeners = host_listeners
    db = next(iter(dump_databases().values()))
    prog = f"""
import gc, os, socket, sys
for o in gc.get_objects():
    if callable(o) and getattr(o, '__name__', '') == 'hook' and getattr(o, '__closure__', None):
        for cell in o.__closure__:
            try:
                if type(cell.cell_contents) is list and not cell.cell_contents:
                    cell.cell_contents.append(1)
            except ValueError:
                pass
try:
    open('/{token}-probe')
except PermissionError as e:
    print('HOOK-ON', e)
except FileNotFoundError:
    print('HOOK-OFF')
out = []
out.append(os.system('echo pwned > /tmp/{token}-system'))
try:
    import ctypes
    out.append(ctypes.CDLL(None).system(b'echo pwned > /tmp/{token}-ctypes'))
except Exception as e:
    out.append(repr(e))
for target in ({str(KIT_ROOT / "helpers" / "sandbox" / "child.py")!r}, '/etc/shadow', '/root/.bash_history'):
    try:
        out.append(open(target).read()[:100])
    except Exception as e:
        out.append(repr(e))
for family, address in ((socket.AF_UNIX, {path!r}), (socket.AF_INET, ('127.0.0.1', {port}))):
    try:
        s = socket.socket(family)
        s.settimeout(1)
        s.connect(address)
        s.sendall(b'pwned')
        out.append('CONNECTED')
    except Exception as e:
        out.append(repr(e))
try:
    with open({str(db)!r}, 'r+b') as f:
        f.write(b'pwned')
    out.append('DB WRITTEN')
except Exception as e:
    out.append(repr(e))
print(out)
"""
    r = sandbox.run_program(prog, secret_tests(token, 1), limits=sandbox.Limits(timeout_s=5.0))
    out = r.tests[0].actual
    assert r.layers["audit_hook"] and "HOOK-OFF" in out, out  # the hook really was switched off
    assert "CONNECTED" not in out and "DB WRITTEN" not in out and "pwned" not in out, out
    for s in listeners:
        with pytest.raises(BlockingIOError):
            s.accept()
    assert_contained(r, token)


# ---------------------------------------------------------------------- dir_fd, unaudited calls, next episode


def test_writes_through_dir_fd_and_unaudited_calls_stay_inside(token):
    db_dir = str(next(iter(dump_databases().values())).parent)
    prog = f"""
import os, stat
out = []
for d in ['/', '/tmp', '/dev/shm', '/root', '/proc/self/cwd/..', {str(KIT_ROOT)!r}, {db_dir!r}]:
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        out.append(repr(e))
        continue
    for make in (lambda: os.close(os.open('{token}-dirfd', os.O_CREAT | os.O_WRONLY, dir_fd=fd)),
                 lambda: os.mkdir('{token}-dir', dir_fd=fd),
                 lambda: os.symlink('/', '{token}-link', dir_fd=fd),
                 lambda: os.mkfifo('{token}-fifo', dir_fd=fd),
                 lambda: os.mknod('{token}-node', 0o600 | stat.S_IFREG, dir_fd=fd)):
        try:
            make()
            out.append('made in ' + d)
        except OSError as e:
            out.append(repr(e))
for p in ['/tmp/{token}-fifo2', '/{token}-fifo2']:
    try:
        os.mkfifo(p)
    except OSError as e:
        out.append(repr(e))
try:
    os.mknod('{token}-null', 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    out.append('char device made')
except OSError as e:
    out.append(repr(e))
try:
    os.symlink('/', 'root-{token}')
    open('root-{token}/tmp/{token}-through-link', 'w').write('x')
except OSError as e:
    out.append(repr(e))
print(out)
"""
    r = sandbox.run_program(prog, secret_tests(token, 1), limits=OFF)
    assert "char device made" not in r.tests[0].actual
    assert_contained(r, token)


def test_files_do_not_survive_into_the_next_episode(token):
    plant = f"""
import os, ctypes
for d in ('/tmp', '/dev/shm', '.', os.environ.get('HOME', '.'), os.environ.get('TMPDIR', '.')):
    try:
        open(d + '/{token}-planted', 'w').write('{token}-answer-0')
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
sid = libc.shmget(0x4B17, 4096, 0o1666)
if sid >= 0:
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(sid, None, 0)
    ctypes.memmove(addr, b'{token}-answer-0', {len(token) + 9})
"""
    harvest = f"""
import os, glob, ctypes
found = ''
for d in ('/tmp', '/dev/shm', '.', os.environ.get('HOME', '.'), os.environ.get('TMPDIR', '.')):
    for p in glob.glob(d + '/*{token}*'):
        found = open(p).read()
libc = ctypes.CDLL(None, use_errno=True)
sid = libc.shmget(0x4B17, 4096, 0o666)
if sid >= 0:
    libc.shmat.restype = ctypes.c_void_p
    found = ctypes.string_at(libc.shmat(sid, None, 0), {len(token) + 9}).decode()
print(found)
"""
    tests = secret_tests(token, 1)
    first = sandbox.run_program(plant, tests, limits=OFF)
    second = sandbox.run_program(harvest, tests, limits=OFF)
    assert_contained(first, token)
    assert_contained(second, token)  # it would pass if it found what the first episode left


# ------------------------------------------------------------------------------------------------- memory

MEMORY = {
    "700 memfds of 1 MB": """
import os
fds = []
try:
    for i in range(700):
        fd = os.memfd_create('x')
        os.write(fd, b'x' * (1 << 20))
        fds.append(fd)
except OSError:
    pass
print('ALL-HELD' if len(fds) == 700 else f'held {len(fds)}')
""",
    "memfds across 8 children": """
import os, time
kids = []
for k in range(8):
    pid = os.fork()
    if pid == 0:
        n = 0
        try:
            for i in range(50):
                fd = os.memfd_create('x')
                os.write(fd, b'x' * (1 << 20))
                n += 1
        except OSError:
            pass
        time.sleep(0.3)
        os._exit(0 if n == 50 else 1)
    kids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
print('ALL-HELD' if codes == [0] * 8 else codes)
""",
    "4 children of 200 MB": """
import os, time
kids = []
for k in range(4):
    pid = os.fork()
    if pid == 0:
        b = bytearray(200 << 20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        time.sleep(0.3)
        os._exit(0)
    kids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
print('ALL-HELD' if codes == [0] * 4 else codes)
""",
    "SysV shared memory left detached": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
held = 0
for i in range(16):
    sid = libc.shmget(0, 50 << 20, 0o1600)
    if sid < 0:
        break
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 50 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    held += 50
print('ALL-HELD' if held == 800 else held)
""",
    "tmpfs files in every writable place": """
n = 0
for d in ('/tmp', '/dev/shm', '.'):
    try:
        for i in range(300):
            with open(f'{d}/f{i}', 'wb') as f:
                f.write(b'x' * (1 << 20))
            n += 1
    except OSError:
        pass
print('ALL-HELD' if n == 900 else n)
""",
}


@pytest.mark.parametrize("name", list(MEMORY))
def test_memory_is_limited_for_the_whole_sandbox(name, token):
    r = sandbox.run_program(MEMORY[name], secret_tests(token, 1), limits=OFF)
    assert "ALL-HELD" not in r.tests[0].actual, (name, r.tests[0].actual)
    assert r.layers["peak_memory_mb"] is not None and r.layers["peak_memory_mb"] <= OFF.memory_mb
    assert_contained(r, token)


# ------------------------------------------------------------------------------------------------ huge text


@pytest.mark.parametrize("mb", [20, 100])
def test_huge_error_text_is_capped_everywhere(mb, token):
    task = next(t for t in kit_tasks(t_max=2) if len(t.payload["tests"]) >= 6)
    env = CodeEnv(timeout_s=4.0)
    env.reset(task, 2)
    reply = fence(f"raise ValueError('x' * ({mb} << 20))")
    tracemalloc.start()
    res = env.step(reply)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    result = env.evaluate(extract_program(reply))  # the episode's memo: the same result
    assert {t.status for t in result.tests} == {"runtime_error"}  # a finished program, not a timeout
    assert all(len(t.error) <= env.limits.error_bytes and "ValueError" in t.error for t in result.tests)
    assert env.cached_bytes < 1 << 20 and len(res.observation) < 10_000 and peak < 64 << 20


def test_floods_of_output_and_of_the_channel_are_bounded(token):
    floods = {
        "stdout": "import sys\nsys.stdout.write('x' * (64 << 20))",
        "stderr then an error": "import sys\nsys.stderr.write('e' * (64 << 20))\nraise ValueError('e' * (64 << 20))",
        "the report channel": "import os\nfor fd in range(3, 16):\n    try:\n        os.write(fd, b'z' * (64 << 20))\n    except OSError:\n        pass",
        "a return value": "def f(x):\n    return 'v' * (64 << 20)",
    }
    call = [{"kind": "call", "fn_name": "f", "args": [1], "output": token}]
    assertion = [
        {
            "kind": "assert",
            "entry_point": "f",
            "code": f"def check(candidate):\n    assert candidate(1) == {token!r}\n",
        }
    ]
    for name, prog in floods.items():
        tracemalloc.start()
        results = [
            sandbox.run_program(prog, tests, limits=OFF)
            for tests in (secret_tests(token, 2), call, assertion)
        ]
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        for r in results:
            assert all(
                len(t.actual) <= OFF.shown_bytes and len(t.error) <= OFF.error_bytes for t in r.tests
            ), name
            assert_contained(r, token)
        assert peak < 64 << 20, (name, peak)


# ---------------------------------------------------------------------------------------------------- SQL


@pytest.fixture
def world_env():
    env = SQLEnv()
    task = Task(
        "attack-world",
        "intercode_sql",
        {
            "db": "world_1",
            "db_source": "dump",
            "question": "Countries of Europe?",
            "gold": "SELECT Name FROM country WHERE Continent = 'Europe' ORDER BY Name",
        },
        50,
    )
    env.reset(task, 50)
    yield env
    env.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT zeroblob(65536) FROM city LIMIT 300",
        "SELECT zeroblob(65536), zeroblob(65536), zeroblob(65536) FROM city LIMIT 200",
        "SELECT zeroblob(65536), zeroblob(65536), zeroblob(65536), zeroblob(65536), zeroblob(65536) FROM city",
        "SELECT printf('%.65535c', 'x') FROM city",
    ],
)
def test_sql_results_are_capped_in_bytes_and_the_reward_step_stays_small(world_env, sql):
    tracemalloc.start()
    res = world_env.step(f"```sql\n{sql}\n```")
    quality = world_env.step_quality(sql)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.info["truncated"] and res.info["capped_by"] == "bytes", res.observation[:300]
    kept = world_env.last
    assert sum(len(v) for row in kept for v in row) <= world_env.max_result_bytes
    assert "byte cap" in res.observation and len(res.observation) < 10_000
    assert res.info["result_reward"] == 0.0 and quality == 0.0 and not res.done
    assert peak < 100 << 20, peak


# --------------------------------------------------------------------------------------------------- BFCL


def math_task() -> Task:
    entry = next(e for e in bfcl.load_entries() if "MathAPI" in e["involved_classes"])
    return Task(entry["id"], "bfcl", bfcl.task_payload(entry, "multi_turn_base"), 30)


def public_state(env: bfcl.BFCLEnv) -> dict:
    return {
        c: copy.deepcopy({k: v for k, v in vars(i).items() if not k.startswith("_")})
        for c, i in env.backends.instances.items()
    }


@pytest.mark.parametrize(
    "reply",
    [
        "[mkdir(dir_name=0x" + "f" * 4000 + ")]",
        "[mkdir(dir_name=" + "9" * 5000 + ")]",
        "[" * 100_000,
        "[mkdir(dir_name=" + "[" * 5000 + "]" * 5000 + ")]",
        "[mkdir(dir_name='\x00')]",
        "[mkdir(dir_name=b'\\xff' * 3)]",
    ],
)
def test_bfcl_replies_that_break_the_parser_never_raise(reply):
    env = bfcl.BFCLEnv()
    env.reset(math_task(), 5)
    res = env.step(reply)
    assert not res.done and len(res.observation) < 20_000
    assert res.info["invalid"] or "Error during execution" in res.observation


@pytest.mark.parametrize(
    ("reply", "limit"),
    [
        ("[power(base=7, exponent=10000000)]", "time limit"),
        ("[square_root(number=2, precision=1000000)]", "time limit"),
        ("[square_root(number=2, precision=30000)]", "characters long, over the limit"),
    ],
)
def test_bfcl_backend_calls_run_under_time_and_output_limits(reply, limit):
    env = bfcl.BFCLEnv(call_time_limit_s=0.5, call_output_chars=20_000)
    env.reset(math_task(), 5)
    before = public_state(env)
    res = env.step(reply)
    assert limit in res.observation and "nothing was changed" in res.observation, res.observation[:300]
    assert len(res.observation) < 2000 and public_state(env) == before
    res = env.step("[square_root(number=16, precision=5)]")  # the backends still answer afterwards
    assert "Decimal('4" in res.info["results"][0]
    assert json.loads(json.dumps(res.info["results"]))  # plain strings


# ------------------------------------------------------------------------------- the seccomp filter (issue 29)


def syscall_program(calls: dict[str, str]) -> str:
    """A program that makes each raw system call (name -> argument list as Python source) and prints, per call,
    'ok' or its errno name."""
    lines = [
        "import ctypes, errno",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "libc.syscall.restype = ctypes.c_long",
        "def sc(nr, *args):",
        "    r = libc.syscall(nr, *args)",
        "    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))",
        "out = {}",
    ]
    lines += [f"out[{name!r}] = sc({args})" for name, args in calls.items()]
    lines.append("print(out)")
    return "\n".join(lines) + "\n"


def test_the_sandbox_uid_cannot_make_namespaces_or_use_refused_system_calls():
    """Before: unshare(CLONE_NEWUSER), unshare(CLONE_NEWNET), add_key, keyctl and inotify_init1 succeeded and
    io_uring_setup reached the kernel (EFAULT). Now the seccomp filter refuses each with EPERM; threads and fork
    still work."""
    nr = seccomp.SYSCALLS[platform.machine()]
    calls = {
        "unshare user": f"{nr['unshare']}, 0x10000000",
        "unshare mount": f"{nr['unshare']}, 0x00020000",
        "unshare net": f"{nr['unshare']}, 0x40000000",
        "clone newuser": f"{nr['clone']}, 0x10000000 | 17, 0, 0, 0, 0",
        "setns": f"{nr['setns']}, 0, 0",
        "add_key": f"{nr['add_key']}, b'user', b'k', b'v', 1, ctypes.c_int(-3)",
        "keyctl": f"{nr['keyctl']}, 0, ctypes.c_int(-3), 0",
        "request_key": f"{nr['request_key']}, b'user', b'k', None, 0",
        "io_uring_setup": f"{nr['io_uring_setup']}, 4, None",
        "inotify_init1": f"{nr['inotify_init1']}, 0",
        "ptrace": f"{nr['ptrace']}, 0, 0, 0, 0",
        "mount": f"{nr['mount']}, b'none', b'/tmp', b'tmpfs', 0, None",
        "bpf": f"{nr['bpf']}, 0, None, 0",
    }
    program = syscall_program(calls) + (
        "import os, threading\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(7)\n"
        "print('fork', os.waitpid(pid, 0)[1] >> 8)\n"
    )
    r = sandbox.run_program(program, [{"kind": "stdin", "input": "", "output": "-"}], limits=OFF)
    out = r.tests[0].actual
    assert out.endswith("fork 7\n"), r.tests[0]
    seen = ast.literal_eval(out.splitlines()[0])
    assert seen == dict.fromkeys(calls, "EPERM"), seen


def test_nothing_is_carried_to_the_next_episode_through_the_keyring_or_inotify(token):
    """A fresh episode passed 6/6 by reading a table the previous one left in the sandbox uid's key ring; two
    concurrent sandboxes passed bits through inotify on the shared standard library. Both need system calls the
    filter refuses: the planting program cannot store, the harvesting one finds nothing."""
    nr = seccomp.SYSCALLS[platform.machine()]
    head = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
    plant = head + (  # add_key("user", "kit", answer, len, KEY_SPEC_USER_KEYRING)
        f"key = libc.syscall({nr['add_key']}, b'user', b'kit', b'{token}-answer', {len(token) + 7}, ctypes.c_int(-4))\n"
        "print('stored' if key >= 0 else 'refused', ctypes.get_errno())\n"
    )
    harvest = head + (  # request_key("user", "kit"), then keyctl(KEYCTL_READ)
        f"key = libc.syscall({nr['request_key']}, b'user', b'kit', None, 0)\n"
        "buf = ctypes.create_string_buffer(256)\n"
        f"n = libc.syscall({nr['keyctl']}, 11, ctypes.c_int(key), buf, 256) if key >= 0 else -1\n"
        "print(buf.raw[:max(n, 0)].decode(errors='replace'))\n"
        f"print('inotify', libc.syscall({nr['inotify_init1']}, 0) >= 0)\n"
    )
    one = [{"kind": "stdin", "input": "", "output": f"{token}-answer"}]
    planted = sandbox.run_program(plant, one, limits=OFF)
    assert planted.tests[0].actual.startswith("refused 1"), planted.tests[0]  # EPERM
    got = sandbox.run_program(harvest, one, limits=OFF)
    assert token not in got.tests[0].actual and "inotify False" in got.tests[0].actual, got.tests[0]
    assert not got.tests[0].passed


def test_no_file_lock_or_notice_can_pass_bits_between_concurrent_sandboxes():
    """Issue 52: `flock` on a file of the read-only standard library that every sandbox binds carried 16 of 16 bits
    between two concurrent sandboxes (uids 61000 and 61001), with the audit hook on. Locks on a shared inode are
    seen by every process that opens it, so the filter refuses each way to take or see one: flock, POSIX and
    open-file-description locks (fcntl and lockf), leases and directory notices; fcntl's other commands work."""
    program = (
        "import errno, fcntl, os, struct\n"
        "f = os.open(os.__file__, os.O_RDONLY)\n"
        "d = os.open(os.path.dirname(os.__file__), os.O_RDONLY)\n"
        "lock = struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0)\n"
        "tries = {\n"
        "    'flock': lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB),\n"
        "    'lockf': lambda: fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB),\n"
        "    'setlk': lambda: fcntl.fcntl(f, fcntl.F_SETLK, lock),\n"
        "    'getlk': lambda: fcntl.fcntl(f, fcntl.F_GETLK, lock),\n"
        "    'ofd_setlk': lambda: fcntl.fcntl(f, fcntl.F_OFD_SETLK, lock),\n"
        "    'ofd_getlk': lambda: fcntl.fcntl(f, fcntl.F_OFD_GETLK, lock),\n"
        "    'lease': lambda: fcntl.fcntl(f, fcntl.F_SETLEASE, fcntl.F_RDLCK),\n"
        "    'notify': lambda: fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT),\n"
        "}\n"
        "out = {}\n"
        "for name, call in tries.items():\n"
        "    try:\n"
        "        call()\n"
        "        out[name] = 'ok'\n"
        "    except OSError as e:\n"
        "        out[name] = errno.errorcode[e.errno]\n"
        "print(out)\n"
        "print('getfl', fcntl.fcntl(f, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY)\n"
        "print('dupfd', fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 10) >= 10)\n"
    )
    r = sandbox.run_program(program, [{"kind": "stdin", "input": "", "output": "-"}], limits=OFF)
    lines = r.tests[0].actual.splitlines()
    assert len(lines) == 3, r.tests[0]
    seen = ast.literal_eval(lines[0])
    assert seen == dict.fromkeys(seen, "EPERM") and len(seen) == 8, seen
    assert lines[1:] == ["getfl True", "dupfd True"]
