"""The sandbox: correct verdicts, batched == one process per test, and hostile programs contained."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from helpers.envs import sandbox
from helpers.envs.sandbox import Job, Limits, outputs_match, run_many, run_program, values_match

FAST = Limits(timeout_s=1.0, memory_mb=256)
ONE = [{"kind": "stdin", "input": "", "output": "ok\n"}]
KIT_ROOT = Path(sandbox.__file__).resolve().parents[2]


def stdin_tests(pairs):
    return [{"kind": "stdin", "input": i, "output": o} for i, o in pairs]


def sandbox_uid_processes() -> list[int]:
    return [p for uid in range(sandbox._UID_BASE, sandbox._UID_BASE + 8) for p in sandbox._uid_processes(uid)]


# ------------------------------------------------------------------------------------------------- verdicts


def test_comparators():
    assert outputs_match("1 2\n3\n\n", "1 2 \n3")
    assert not outputs_match("1 2\n3", "1 2\n4")
    assert outputs_match("0.3333333", "0.333333333")
    assert not outputs_match("1000000", "1000001")  # integers are never compared with a tolerance
    assert values_match([1, [2.0000001, "a"]], [1, [2.0, "a"]])
    assert (
        not values_match(True, 1)
        and not values_match([1, 2], [1, 2, 3])
        and not values_match({"a": 1}, {"b": 1})
    )


def test_stdin_program_verdicts_and_io_styles():
    tests = stdin_tests([("2 3\n", "5\n"), ("10 -4\n", "6\n"), ("1 1\n", "3\n")])
    r = run_program("a, b = map(int, input().split())\nprint(a + b)", tests)
    assert [t.status for t in r.tests] == ["passed", "passed", "wrong_answer"]
    assert r.tests[2].actual.strip() == "2" and r.n_passed == 2 and r.fraction == pytest.approx(2 / 3)
    assert r.processes == 1
    # buffer-level and fd-level reading/writing behave as in a fresh process
    for prog in (
        "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nsys.stdout.buffer.write(b'%d\\n' % (a + b))",
        "a, b = map(int, open(0).read().split())\nprint(a + b)\nexit()",
        "import os\na, b = map(int, os.read(0, 100).split())\nprint(a + b)\nquit(0)",
    ):
        assert run_program(prog, tests[:2]).all_passed, prog


def test_call_tests_function_and_solution_method():
    tests = [
        {"kind": "call", "fn_name": "twice", "args": [[1, 2]], "output": [1, 2, 1, 2]},
        {"kind": "call", "fn_name": "twice", "args": [[]], "output": [[]], "alt_outputs": [[]]},
    ]
    assert run_program("def twice(xs):\n    return xs * 2", tests).all_passed
    assert run_program(
        "class Solution:\n    def twice(self, xs):\n        return tuple(xs + xs)", tests
    ).all_passed
    r = run_program("def twice(xs):\n    return {1, 2}", tests[:1])
    assert r.tests[0].status == "runtime_error" and "JSON" in r.tests[0].error
    r = run_program("def other(xs):\n    return xs", tests[:1])
    assert "no function or Solution method named 'twice'" in r.tests[0].error


def test_errors_are_reported_with_the_programs_own_traceback():
    r = run_program("x = [1]\nprint(x[3])", ONE)
    assert r.tests[0].status == "runtime_error"
    assert (
        "IndexError" in r.tests[0].error
        and "<program>" in r.tests[0].error
        and "run_one" not in r.tests[0].error
    )
    r = run_program("print(", ONE * 2)
    assert all("SyntaxError" in t.error for t in r.tests)


def test_batched_equals_one_process_per_test():
    prog = (
        "import os, sys\nn = int(input())\n"
        "if n == 2:\n    while True: pass\n"
        "if n == 3:\n    os._exit(0)\n"
        "if n == 4:\n    raise ValueError('four')\n"
        "if n == 5:\n    sys.exit(0)\n"
        "print(n * 2)"
    )
    tests = stdin_tests([(f"{n}\n", f"{2 * n}\n") for n in (1, 2, 3, 4, 5, 6)])
    batched = run_program(prog, tests, limits=FAST)
    single = run_program(prog, tests, limits=FAST, batch=False)
    statuses = ["passed", "timeout", "crashed", "runtime_error", "wrong_answer", "passed"]
    assert [t.status for t in batched.tests] == [t.status for t in single.tests] == statuses
    assert batched.processes == 3 and single.processes == 6  # restarted after the timeout and the os._exit
    # state set by one test does not leak into the next: fresh globals, builtins and recursion limit
    leak = "import sys, builtins\nprint(globals().get('seen', 0), sys.getrecursionlimit(), hasattr(builtins, 'z'))\nseen = 1\nsys.setrecursionlimit(50)\nbuiltins.z = 1"
    r = run_program(leak, stdin_tests([("", "0 1000 False\n")] * 3))
    assert r.all_passed, [t.actual for t in r.tests]


def test_threads_and_deep_recursion_idiom_work():
    prog = (
        "import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(1 << 26)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def main():\n    print(depth(int(input())))\n"
        "threading.Thread(target=main).start()"
    )
    assert run_program(prog, stdin_tests([("20000\n", "20000\n"), ("5\n", "5\n")])).all_passed


def test_run_many_keeps_order():
    jobs = [Job(f"print({k})", stdin_tests([("", f"{k}\n")])) for k in range(6)]
    jobs.append(Job("print(-1)", stdin_tests([("", "7\n")])))
    results = run_many(jobs, workers=3)
    assert [r.all_passed for r in results] == [True] * 6 + [False]


def test_bad_input_is_rejected_clearly():
    with pytest.raises(ValueError, match="kind"):
        run_program("print(1)", [{"input": "", "output": ""}])
    with pytest.raises(ValueError, match="'output'"):
        run_program("print(1)", [{"kind": "stdin", "input": ""}])
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)


# -------------------------------------------------------------------------------------------------- hostile


@pytest.fixture(scope="module")
def outside():
    """A canary and a 0600 secret in a directory the sandbox must not touch (owned by the test's user)."""
    with tempfile.TemporaryDirectory(prefix="kit-outside-") as d:
        canary = Path(d) / "canary.txt"
        canary.write_text("alive")
        secret = Path(d) / "secret.txt"
        secret.write_text("s3cr3t-token")
        secret.chmod(0o600)
        yield Path(d)


HOSTILE = {
    "infinite loop": ("while True:\n    pass", {"timeout"}),
    "memory bomb": ("a = []\nwhile True:\n    a.append(bytearray(10**7))", {"runtime_error", "timeout"}),
    "fork bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        {"timeout", "runtime_error"},
    ),
    "fork and leave the group": (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\nwhile True:\n    pass",
        {"timeout", "runtime_error"},
    ),
    "huge output": ("while True:\n    print('x' * 10000)", {"output_limit"}),
    "os._exit": ("import os\nos._exit(0)", {"crashed"}),
    "deep recursion": ("def f(n):\n    return f(n + 1)\nf(0)", {"runtime_error"}),
    "deep C recursion": (
        "import sys\nsys.setrecursionlimit(10**7)\nclass A:\n    def __repr__(self):\n        return repr(A())\nrepr(A())",
        {"crashed", "runtime_error"},  # SIGSEGV on 3.11; newer Pythons raise RecursionError
    ),
    "ignores SIGTERM": (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
        {"timeout"},
    ),
    "network socket": (
        "import socket\ns = socket.socket()\ns.connect(('1.1.1.1', 80))\nprint('ok')",
        {"runtime_error"},
    ),
    "spawn a shell": ("import os\nos.system('echo ok')", {"runtime_error"}),
    "ctypes": ("import ctypes\nctypes.CDLL(None).system(b'echo ok')", {"runtime_error"}),
    "kill the parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", {"runtime_error"}),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_program_is_contained_and_fails(name):
    prog, statuses = HOSTILE[name]
    t0 = time.monotonic()
    r = run_program(prog, ONE, limits=FAST)
    assert not r.tests[0].passed and r.tests[0].status in statuses, (r.tests[0].status, r.tests[0].error)
    assert time.monotonic() - t0 < 8
    assert not sandbox_uid_processes(), "processes of the sandbox survived the run"


def test_files_outside_the_sandbox_are_untouched(outside):
    canary = outside / "canary.txt"
    for prog in (
        f"import os\nos.remove({str(canary)!r})\nprint('ok')",
        f"open({str(canary)!r}, 'w').write('pwned')\nprint('ok')",
        f"import shutil\nshutil.rmtree({str(outside)!r})\nprint('ok')",
        f"import os\nos.rename({str(canary)!r}, 'moved')\nprint('ok')",
        f"open({str(outside / 'new.txt')!r}, 'w').write('x')\nprint('ok')",
        "import os\nos.symlink('/', 'root')\nopen('root/tmp/planted.txt', 'w').write('x')\nprint('ok')",
    ):
        r = run_program(prog, ONE, limits=FAST)
        assert not r.all_passed, prog
    assert canary.read_text() == "alive"
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "secret.txt"]
    assert not Path("/tmp/planted.txt").exists()
    # the program may write inside its own working directory, which is removed afterwards
    r = run_program(
        "open('mine.txt', 'w').write('ok')\nimport os\nprint(open('mine.txt').read(), os.getcwd())", ONE
    )
    cwd = r.tests[0].actual.split()[1]
    assert r.tests[0].actual.startswith("ok") and not os.path.exists(cwd)


def test_secrets_kit_files_and_environment_are_not_readable(outside, monkeypatch):
    monkeypatch.setenv("KIT_TEST_SECRET", "env-s3cr3t")
    probes = {
        "secret file": f"print(open({str(outside / 'secret.txt')!r}).read())",
        "kit file": f"print(open({str(KIT_ROOT / 'helpers' / 'envs' / 'sandbox.py')!r}).read())",
        "environment": "import os\nprint(dict(os.environ))",
        "parent's environment": f"print(open('/proc/{os.getpid()}/environ').read())",
        "listing the kit": f"import os\nprint(os.listdir({str(KIT_ROOT)!r}))",
    }
    for what, prog in probes.items():
        t = run_program(prog, ONE, limits=FAST).tests[0]
        assert not t.passed, what
        leaked = [m for m in ("s3cr3t", "def run_program", "helpers", "KIT_TEST") if m in t.actual]
        assert not leaked, (what, leaked)
    env = run_program("import os\nprint(sorted(os.environ))", ONE).tests[0].actual
    assert "KIT_TEST_SECRET" not in env and "PATH" in env


def test_isolation_layers_reported():
    r = run_program("print('ok')", ONE)
    assert r.all_passed
    if os.geteuid() == 0:
        assert r.layers["root"] is True
        if r.layers["netns"]:
            assert r.layers["interfaces"] == ["lo"]  # a fresh network namespace: only a downed loopback
        uid_out = run_program("import os\nprint(os.getuid(), os.getgroups())", ONE).tests[0].actual.split()
        assert int(uid_out[0]) >= sandbox._UID_BASE
