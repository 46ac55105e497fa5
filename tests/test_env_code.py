"""DeepCoder-MT: test normalisation, bundled data, the multi-turn protocol and the splits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from helpers import sandbox
from helpers.budget import statement
from helpers.envs import base
from helpers.envs.base import Task
from helpers.envs.code import CodeEnv, demo, extract_program, fence
from helpers.envs.code_tasks import (
    humaneval_tasks,
    humaneval_tests,
    kit_tasks,
    normalise_tests,
    split_of,
    task_from_row,
)


@pytest.fixture(scope="module")
def kit():
    return kit_tasks(t_max=4)


@pytest.fixture(scope="module")
def humaneval():
    return humaneval_tasks(t_max=4)


def kit_task(kit, title: str):
    return next(t for t in kit if t.payload["problem"].startswith(title))


# -------------------------------------------------------------------------------------------- normalisation


def test_the_three_deepcoder_shapes_normalise_to_one_format():
    lcb = [
        {"input": "[2, 7, 11, 15]\n9", "output": "[0, 1]", "testtype": "functional"},
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
    ]
    assert normalise_tests(json.dumps(lcb), json.dumps({"func_name": "twoSum"})) == [
        {"kind": "call", "fn_name": "twoSum", "args": [[2, 7, 11, 15], 9], "output": [0, 1]},
        {"kind": "stdin", "input": "1 2\n", "output": "3\n"},
    ]
    prime = [{"input": "5\n", "output": "25\n", "type": "stdin_stdout"}]
    assert normalise_tests(prime) == [{"kind": "stdin", "input": "5\n", "output": "25\n"}]
    taco_call = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], 7]}
    assert normalise_tests(taco_call) == [
        {"kind": "call", "fn_name": "add", "args": [1, 2], "output": [3], "alt_outputs": [3]},
        {"kind": "call", "fn_name": "add", "args": [3, 4], "output": 7},
    ]
    taco_stdin = {"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", "5"]}
    assert normalise_tests(taco_stdin)[1] == {"kind": "stdin", "input": "2\n3", "output": "5"}
    # the normalised tests run: a Solution method for the LiveCodeBench row, a plain function for TACO
    solution = "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i"
    assert sandbox.run_program(solution, normalise_tests(lcb, {"func_name": "twoSum"})[:1]).all_passed
    assert sandbox.run_program("def add(a, b):\n    return a + b", normalise_tests(taco_call)).all_passed


def test_bad_test_shapes_fail_clearly():
    with pytest.raises(ValueError, match="unknown test type 'bogus'"):
        normalise_tests([{"input": "", "output": "", "type": "bogus"}])
    with pytest.raises(ValueError, match="function name"):
        normalise_tests([{"input": "1", "output": "1", "testtype": "functional"}])
    with pytest.raises(ValueError, match="equally long"):
        normalise_tests({"inputs": ["1"], "outputs": []})
    with pytest.raises(ValueError, match="missing column 'tests'"):
        task_from_row({"problem": "p"}, "x", "hub", 4)


def test_hub_rows_become_tasks():
    row = {
        "problem": "Return the sum.",
        "tests": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
        "metadata": json.dumps({"func_name": "add"}),
        "starter_code": "class Solution:\n    def add(self, a: int, b: int) -> int:\n        ",
    }
    task = task_from_row(row, "lcbv5-test-00000", "deepcoder:lcbv5", t_max=3)
    env = CodeEnv()
    messages = env.reset(task, 3)
    assert "Starter code" in messages[1]["content"] and "Solution" in messages[1]["content"]
    assert env.step_quality(fence("class Solution:\n    def add(self, a, b):\n        return a + b")) == 1.0
    assert CodeEnv.upper_bound(task, 3) is None  # no reference solution in the hub rows


def test_hub_loader_fails_clearly_offline():
    code = (
        "from helpers.envs.code import CodeEnv\n"
        "try:\n    CodeEnv.load_tasks('test', source='hub', subsets=('lcbv5',))\n"
        "except (ImportError, RuntimeError) as e:\n    print('ERR', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    ).stdout
    assert "ERR" in out and "agentica-org/DeepCoder-Preview-Dataset" in out
    assert "source='bundled'" in out or "pip install datasets" in out


# -------------------------------------------------------------------------------------------- bundled data


def test_kit_problems_are_enough_and_every_reference_passes(kit):
    assert len(kit) >= 30
    assert all(len(t.payload["tests"]) >= 5 and t.payload["reference"] for t in kit)
    assert {t["kind"] for t in kit for t in t.payload["tests"]} == {"stdin"}
    results = sandbox.run_many([sandbox.Job(t.payload["reference"], t.payload["tests"]) for t in kit])
    failed = [t.task_id for t, r in zip(kit, results, strict=True) if not r.all_passed]
    assert not failed


def test_every_humaneval_canonical_solution_passes(humaneval):
    assert len(humaneval) == 164
    jobs = [sandbox.Job(t.payload["reference"], t.payload["tests"], t.payload["setup"]) for t in humaneval]
    results = sandbox.run_many(jobs, limits=sandbox.Limits(timeout_s=10))
    failed = [
        (t.task_id, [x.error for x in r.tests if not x.passed][:1])
        for t, r in zip(humaneval, results, strict=True)
        if not r.all_passed
    ]
    assert not failed


def test_humaneval_check_becomes_one_test_per_assert(humaneval):
    src = "METADATA = {}\n\ndef check(candidate):\n    import math\n    assert candidate(2) == 4\n    assert True\n    for x in range(3):\n        assert candidate(x) == 2 * x\n    assert math.isclose(candidate(0.5), 1.0)\n"
    tests = humaneval_tests(src, "double")
    assert [t["label"] for t in tests] == [
        "assert candidate(2) == 4",
        "for x in range(3):\n    assert candidate(x) == 2 * x",
        "assert math.isclose(candidate(0.5), 1.0)",
    ]
    assert all("import math" in t["code"] and "METADATA" in t["code"] for t in tests)
    r = sandbox.run_program("def double(x):\n    return x + 2", tests)  # right only for x = 2
    assert [t.passed for t in r.tests] == [True, False, False]
    assert r.tests[1].actual == "2" and "assert candidate(x) == 2 * x" in r.tests[1].error
    # a wrong HumanEval solution scores a fraction, not all-or-nothing
    task = next(t for t in humaneval if t.task_id == "humaneval-000")
    env = CodeEnv()
    env.reset(task, 2)
    wrong = "def has_close_elements(numbers, threshold):\n    return False"
    assert 0 < env.step_quality(fence(wrong)) < 1


def test_splits_are_deterministic_disjoint_and_seeded():
    train = CodeEnv.load_tasks("train")
    test = CodeEnv.load_tasks("test")
    assert {t.task_id for t in train}.isdisjoint(t.task_id for t in test)
    assert {t.payload["problem"] for t in train}.isdisjoint(t.payload["problem"] for t in test)
    assert len(train) + len(test) == 32 + 164 and len(test) > 20
    assert all(split_of(t.task_id) == "test" for t in test)
    assert [t.task_id for t in CodeEnv.load_tasks("test")] == [t.task_id for t in test]
    sub = base.load_tasks("deepcoder", "train", n=10, seed=3)
    assert [t.task_id for t in sub] == [
        t.task_id for t in base.load_tasks("deepcoder", "train", n=10, seed=3)
    ]
    assert len(sub) == 10 and {t.task_id for t in sub} <= {t.task_id for t in train}
    kit_only = CodeEnv.load_tasks("test", sets=["kit"], t_max=6, max_tests=3)
    assert all(
        t.task_id.startswith("kit-") and t.t_max == 6 and len(t.payload["tests"]) == 3 for t in kit_only
    )
    with pytest.raises(ValueError, match="unknown bundled set"):
        CodeEnv.load_tasks("test", sets=["mbpp"])


# ----------------------------------------------------------------------------------------- the protocol


def test_extract_program_takes_the_last_python_block():
    reply = "Plan.\n```python\nprint(1)\n```\nBetter:\n```py\nprint(2)\n```\n```text\nno\n```"
    assert extract_program(reply) == "print(2)\n"
    assert extract_program("print(3)") is None and extract_program("```\nprint(3)\n```") is None


def test_wrong_then_right_with_feedback(kit):
    task = kit_task(kit, "Spread")
    env = base.make("deepcoder")
    messages = env.reset(task, 3)
    assert messages[0]["role"] == "system" and messages[1]["content"].endswith(statement(3, 3))
    wrong = "n = int(input())\na = list(map(int, input().split()))\nprint(max(a) - min(a) + 1)"
    q = env.step_quality(fence(wrong))
    assert q == 0.0 and env.remaining == 3 and env.t == 0  # step_quality leaves the state alone
    res = env.step("I think this works:\n" + fence(wrong))
    assert not res.done and res.reward == 0 and not res.success and res.info["invalid"] is False
    assert res.info["passed"] == 0 and res.info["total"] == len(task.payload["tests"])
    obs = res.observation
    assert obs.count("\nTest ") == 2  # at most two failing tests are shown
    assert "Input:\n3\n1 5 3" in obs and "Expected:\n4" in obs and "Actual:\n5" in obs
    assert obs.endswith(statement(3, 2))
    assert env.step_quality(fence(task.payload["reference"])) == 1.0
    res = env.step(fence(task.payload["reference"]))
    assert res.done and res.success and res.reward == 1.0 and "All" in res.observation
    with pytest.raises(RuntimeError):
        env.step(fence(task.payload["reference"]))


def test_errors_and_timeouts_appear_in_the_feedback(kit):
    task = kit_task(kit, "Sum of digits")
    env = CodeEnv(timeout_s=0.5)
    env.reset(task, 2)
    res = env.step(fence("print(int(input()) / 0)"))
    assert "ZeroDivisionError" in res.observation and "runtime error" in res.observation
    res = env.step(fence("while True:\n    pass"))
    assert res.done and "time limit" in res.observation and res.observation.endswith("Out of turns.")


def test_reply_without_code_is_invalid_and_uses_the_turn(kit):
    env = CodeEnv()
    env.reset(kit[0], 2)
    assert env.step_quality("just prose") == 0.0
    res = env.step("I would sort the list.")
    assert res.info["invalid"] and res.reward == 0 and not res.done
    assert "no ```python code block" in res.observation and res.observation.endswith(statement(2, 1))
    res = env.step("still nothing")
    assert res.done and res.info["invalid"] and not res.success


def test_replay_is_deterministic(kit):
    task = kit_task(kit, "FizzBuzz")
    actions = [
        fence("n = int(input())\nfor i in range(1, n + 1):\n    print(i)"),
        "oops",
        fence(task.payload["reference"]),
    ]

    def play():
        env = CodeEnv()
        out = [env.reset(task, 3)[1]["content"]]
        for a in actions:
            r = env.step(a)
            out.append((r.observation, r.reward, r.done))
        return out

    assert play() == play()
    assert CodeEnv.upper_bound(task, 1) == 1.0


def test_demo_scripted_player():
    d = demo()
    assert d["success"] and [t["reward"] for t in d["turns"]] == [0.0, 1.0]
    assert d["turns"][0]["step_quality"] < 1.0 and d["turns"][1]["step_quality"] == 1.0
    assert [m["role"] for m in d["transcript"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert "Failing tests" in d["transcript"][3]["content"]


def test_the_episode_memo_is_bounded_in_bytes(kit):
    task = kit_task(kit, "Sum of digits")
    env = CodeEnv(cache_bytes=4000)
    env.reset(task, 10)
    for k in range(6):  # each result holds the program and its capped error text
        env.step_quality(fence(f"raise ValueError('{k}' * 100000)"))
        assert env.cached_bytes <= 4000
    res = env.step(fence(task.payload["reference"]))
    assert res.success and res.info["sandbox"] == "os"
    with pytest.raises(ValueError, match="cache_bytes"):
        CodeEnv(cache_bytes=0)


# -------------------------------------------------------------------------------------- protocols (issue 29)


def lookup_program(pairs: dict[str, str]) -> str:
    """A program that solves nothing: it prints the expected output of the inputs it was shown."""
    return f"import sys\ntable = {pairs!r}\nprint(table.get(sys.stdin.read().rstrip(chr(10)), ''))\n"


def test_split_tests_is_fixed_and_leaves_feedback_tests():
    from helpers.envs.code import split_tests

    assert split_tests("kit-000", 6) == split_tests("kit-000", 6) and len(split_tests("kit-000", 6)) == 3
    assert split_tests("t", 1) == [0] and len(split_tests("t", 2)) == 1 and len(split_tests("t", 7)) == 3
    with pytest.raises(ValueError, match="protocol must be one of"):
        CodeEnv(protocol="peek")


def test_held_out_tests_are_never_shown_and_alone_decide_the_reward(kit):
    """Under the paper's protocol, a lookup table of every test's pair is rewarded (the shown tests pay); under
    `held_out`, no observation shows a held-out test, and the same table of the feedback tests earns nothing."""
    task = kit[0]
    tests = task.payload["tests"]
    everything = {t["input"].rstrip("\n"): t["output"].rstrip("\n") for t in tests}
    paper = CodeEnv(protocol="paper")
    paper.reset(task, 4)
    res = paper.step(fence(lookup_program(everything)))
    assert res.success and res.info["protocol"] == "paper"

    env = CodeEnv(protocol="held_out")
    env.reset(task, 4)
    hidden = [tests[i] for i in env.scored]
    shown_pairs = {}
    for _ in range(3):
        res = env.step(fence(lookup_program(shown_pairs)))
        assert res.info["protocol"] == "held_out" and res.info["total"] == len(hidden)
        shown = re.findall(r"Input:\n(.*?)\nExpected:\n(.*?)\nActual:", res.observation, re.DOTALL)
        assert not {given for given, _ in shown} & {t["input"].rstrip("\n") for t in hidden}
        shown_pairs.update(shown)
    assert shown_pairs and res.reward == 0.0 and not res.success
    assert env.step_quality(fence(lookup_program(shown_pairs))) == 0.0
    assert env.step_quality(fence(task.payload["reference"])) == 1.0  # a real solution still scores


def test_the_profiles_protocol_reaches_every_environment_that_plays_its_tasks():
    """Issue 29: `env.extra.deepcoder.protocol` reaches the environment through the tasks: `load_tasks` names it on
    each, so an environment built as the kit builds one (`make`, a probe state replayed from its recorded task)
    scores under it; one built for the other protocol refuses the task. Left out, it is the paper's."""
    import typing

    from helpers import config, probing
    from helpers.envs.code import split_tests

    assert typing.get_args(typing.get_type_hints(config.DeepCoderSettings)["protocol"]) == CodeEnv.PROTOCOLS
    held = config.load("smoke", series="deepcoder", env={"extra": {"deepcoder": {"protocol": "held_out"}}})
    loaded = {
        protocol: base.load_tasks("deepcoder", "test", n=1, seed=0, **base.settings(cfg))[0]
        for protocol, cfg in (("held_out", held), ("paper", config.load("smoke", series="deepcoder")))
    }
    for protocol, task in loaded.items():
        n = len(task.payload["tests"])
        assert task.payload["protocol"] == protocol and n == 3  # smoke: max_tests 3
        env = base.make("deepcoder")
        env.reset(task, 3)
        res = env.step(fence(task.payload["reference"]))
        scored = len(split_tests(task.task_id, n)) if protocol == "held_out" else n
        assert res.success and res.info["protocol"] == protocol and res.info["total"] == scored
        recorded = json.loads(json.dumps(task.to_dict()))  # as a probe pool keeps it
        replayed = probing.ProbeState(recorded, "deepcoder", 3, 0, [fence("print(0)")], [], "base").replay()
        assert replayed.protocol == protocol and replayed.step(fence("print(0)")).info["protocol"] == protocol
    with pytest.raises(
        ValueError, match=r"loaded for protocol 'held_out', but this CodeEnv was built for 'paper'"
    ):
        CodeEnv(protocol="paper").reset(loaded["held_out"], 3)
    CodeEnv(protocol="held_out").reset(loaded["held_out"], 3)  # the same protocol: fine
    with pytest.raises(ValueError, match="protocol must be one of"):
        CodeEnv.load_tasks("test", protocol="hidden")


# ------------------------------------------------------------------------------ issue 52: state across tests

# Remembers every stdin input it is given, in a module that survives between the tests of one sandbox, and
# prints all of them: a feedback test's `Actual:` would show held-out tests' inputs run before it.
HOARDER = """
import sys
import time
store = sys.modules.setdefault("hoard", type(sys)("hoard"))
store.seen = getattr(store, "seen", []) + [sys.stdin.read().strip()]
print(" | ".join(store.seen))
"""
# the same through a file in the working directory and through a builtin (places where state could survive)
HOARDER_FILE = """
import sys
import time
data = sys.stdin.read().strip()
with open("hoard.txt", "a") as f:
    f.write(data + " | ")
print(open("hoard.txt").read())
"""
HOARDER_BUILTIN = """
import builtins, sys
builtins.__dict__.setdefault("_hoard", []).append(sys.stdin.read().strip())
print(" | ".join(builtins._hoard))
"""


@pytest.mark.parametrize(
    "program", [HOARDER, HOARDER_FILE, HOARDER_BUILTIN], ids=["module", "file", "builtin"]
)
def test_no_held_out_input_reaches_an_observation_through_state_left_by_earlier_tests(kit, program):
    """Issue 52: modules survive between the tests of one sandbox, and a program printed held-out tests' inputs
    inside a feedback test's `Actual:` (4 of 6 stdin tasks). Under `held_out`, feedback tests now run first."""
    leaked = []
    for task in [t for t in kit if all(x["kind"] == "stdin" for x in t.payload["tests"])][:6]:
        env = CodeEnv(protocol="held_out")
        env.reset(task, 4)
        shown = {env.tests[i]["input"].strip() for i in range(len(env.tests)) if i not in set(env.scored)}
        res = env.step(fence(program))
        actual = re.findall(r"Actual:\n(.*?)(?:\n\n|\nError:|$)", res.observation, re.DOTALL)
        assert actual, res.observation
        leaked += [
            x for a in actual for x in a.strip(" |").split(" | ") if x.strip() not in shown | {"(nothing)"}
        ]
    assert not leaked


def test_the_feedback_still_reports_each_test_in_its_own_place(kit):
    """The run order changes under `held_out`, the results do not: they come back in the tests' order."""
    task = kit[0]
    env = CodeEnv(protocol="held_out")
    env.reset(task, 4)
    result = env.evaluate(task.payload["reference"])
    assert all(t.passed for t in result.tests) and len(result.tests) == len(env.tests)
    wrong = env.evaluate("print(input())")
    direct = sandbox.run_program("print(input())", env.tests, limits=env.limits)
    assert [t.actual for t in wrong.tests] == [t.actual for t in direct.tests]


# ------------------------------------------------------------------------- issue 52: a wall-clock budget


def sleepy_task(n: int) -> Task:
    tests = [{"kind": "stdin", "input": f"{i}\n", "output": f"{i}\n"} for i in range(n)]
    payload = {"source": "kit", "problem": "echo", "starter_code": "", "setup": "", "tests": tests}
    return Task("sleepy", "deepcoder", {**payload, "reference": "print(input())"}, 4)


@pytest.mark.parametrize(
    "program",
    [
        "import time\ntime.sleep(10**6)\n",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(10**6)\n",
        "import threading\nthreading.Event().wait()\n",
        "import sys\nsys.stdin.read()\nimport select\nselect.select([], [], [])\n",
        "import os, time\nif os.fork() == 0:\n    time.sleep(10**6)\nos.wait()\n",
    ],
    ids=["sleep", "ignores-sigterm", "event-wait", "select", "waits-for-child"],
)
def test_an_idle_program_costs_at_most_the_steps_wall_clock_budget(program):
    """Issue 52: `time.sleep(10**6)` uses no CPU, so each test waited for the 60 s stall guard (181 s for one step
    of a 3-test task, 361 s for a 6-test one that ignores SIGTERM). Now all tests share one wall-clock budget (a
    small one here; by default max(stall guard, 3 x timeout_s x tests)), and tests it leaves unrun fail."""
    env = CodeEnv(timeout_s=0.5, wall_budget_s=1.0)
    env.reset(sleepy_task(6), 4)
    t0 = time.monotonic()
    res = env.step(fence(program))
    took = time.monotonic() - t0
    assert res.info["passed"] == 0 and not res.done
    assert took < 1.0 + 10, took  # the budget, plus one sandbox start and its removal on a loaded machine
    assert "wall-clock budget of 1 s" in res.observation


def test_the_default_budget_scales_with_the_tests_cpu_limits():
    assert sandbox.Limits(timeout_s=4).run_budget_s(3) == 60.0  # the stall guard: 181 s before
    assert sandbox.Limits(timeout_s=4).run_budget_s(12) == 144.0  # a third of a core per test's CPU limit
    assert sandbox.Limits(timeout_s=4, run_wall_s=5).run_budget_s(12) == 5.0
    with pytest.raises(ValueError, match="run_wall_s must be positive"):
        sandbox.Limits(run_wall_s=0)
