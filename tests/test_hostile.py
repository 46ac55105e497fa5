"""Hostile actions through the public API (`CodeEnv.step` with a fenced reply, `SQLEnv.step`, `BFCLEnv.step`):
every step returns an observation with a clear outcome, within the bounds the environment states, and nothing
escapes it. Each case reproduces one of issue 29 at the same size and shape; the kit's own CPU time and memory
are measured (CPU time of this process, not wall time, so a busy machine changes no outcome: the bounds asserted
are several times the stated ones; the numbers before the fix are in the comments).

The code cases need the sandbox's boundary (CI runs as root); where it is missing they fail with its message,
unless KIT_SANDBOX=weak, where they are skipped (as tests/test_attacks.py does)."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from helpers import sandbox
from helpers.envs import bfcl
from helpers.envs.base import Task, play
from helpers.envs.code import CodeEnv, fence
from helpers.envs.sql import SQLEnv
from helpers.sandbox import wire

M61 = (1 << 61) - 1  # k * M61 hashes to 0 for every integer k


@pytest.fixture(scope="module")
def boundary_in_place():
    b = sandbox.boundary()
    if not b.complete:
        if sandbox.isolation_setting(sandbox.Limits()) == "weak":
            pytest.skip(f"{sandbox.ISOLATION_ENV}=weak: the OS boundary is not there ({b.problems})")
        pytest.fail(b.message())


def measured(fn):
    """(fn(), CPU seconds of this process, peak bytes of Python memory it allocated, wall seconds)."""
    tracemalloc.start()
    cpu, wall = time.process_time(), time.monotonic()
    try:
        out = fn()
        return out, time.process_time() - cpu, tracemalloc.get_traced_memory()[1], time.monotonic() - wall
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------------------------------------ the codec


def test_decoding_refuses_sets_of_colliding_hashes_and_counts_values_before_parsing():
    assert wire.wire_decode({"set": list(range(1000))}) == set(range(1000))
    assert wire.wire_decode({"set": [-1, -2]}) == {-1, -2}  # a few equal hashes are fine
    for tag in ("set", "frozenset"):
        with pytest.raises(ValueError, match="share one hash"):
            wire.wire_decode({tag: [k * M61 for k in range(1000)]})
    with pytest.raises(ValueError, match="share one hash"):
        wire.wire_decode({"dict": [[k * M61, 0] for k in range(1000)]})
    assert wire.json_items('{"a": [1, 2, 3]}') == 5
    assert wire.json_items('"' + "[,{" * 400_000 + '"') == 1  # inside a string: not values
    with pytest.raises(ValueError, match="JSON values"):
        wire.check_items("[" + ",".join(["{}"] * 300_000) + "]")


# --------------------------------------------------------------------------------------------- DeepCoder-MT


def assert_env() -> tuple[CodeEnv, Task]:
    test = {
        "kind": "assert",
        "entry_point": "f",
        "code": "def check(candidate):\n    assert candidate(1) == 2\n",
    }
    payload = {
        "source": "humaneval",
        "problem": "f(1) == 2",
        "starter_code": "",
        "setup": "",
        "tests": [test],
        "reference": "def f(x):\n    return 2\n",
    }
    env = CodeEnv(timeout_s=1.0)
    task = Task("hostile-assert", "deepcoder", payload, 4)
    env.reset(task, 4)
    return env, task


def forged_reply(value_json: str) -> str:
    """A program that writes its own answer to the call on the sandbox's channel (descriptor 4), then exits."""
    return fence(
        f"import os\ndef f(x):\n    line = {value_json}\n    os.write(4, line.encode())\n    os._exit(0)\n"
    )


def test_a_program_too_deeply_nested_to_compile_is_a_compile_error(boundary_in_place):
    """`x = ` then 3000 unary minus signs: compile() raises RecursionError. Before: SandboxError out of step,
    step_quality and fails."""
    env, _ = assert_env()
    reply = fence("x = " + "-" * 3000 + "1\nprint(x)")
    (res, cpu, peak, wall) = measured(lambda: env.step(reply))
    assert not res.done and res.reward == 0.0 and res.info["passed"] == 0 and peak < 60 << 20
    assert "could not be compiled" in res.observation and "RecursionError" in res.observation
    assert env.step_quality(reply) == 0.0 and env.fails(reply)
    assert cpu < 5 and wall < 60, (cpu, wall)


def test_a_forged_set_of_colliding_integers_is_refused_in_linear_time(boundary_in_place):
    """60 000 integers that all hash to 0, written by the program on its own channel: before, decoding them took
    52 s of the kit's CPU (quadratic); now the set is refused as unreadable."""
    env, _ = assert_env()
    reply = forged_reply(
        f"__import__('json').dumps({{'value': {{'set': [k * {M61} for k in range(60000)]}}, 'repr': ''}}) + '\\n'"
    )
    (res, cpu, peak, wall) = measured(lambda: env.step(reply))
    assert res.info["passed"] == 0 and not res.done and peak < 60 << 20
    assert cpu < 5, f"the kit's process used {cpu:.1f} s of CPU time on one reply"
    assert wall < 60


def test_a_reply_of_millions_of_empty_dicts_costs_the_kit_little_memory(boundary_in_place):
    """A 9 MB line `[{},{},...]` (3 million dicts) on the channel: before, +239 MB in the kit's process; now it is
    refused by counting its values before it is parsed (the line itself, at most 9 MB, is all it costs)."""
    env, _ = assert_env()
    reply = forged_reply("'{\"value\": [' + ','.join(['{}'] * 3_000_000) + '], \"repr\": \"\"}\\n'")
    (res, cpu, peak, wall) = measured(lambda: env.step(reply))
    assert res.info["passed"] == 0 and "garbled" in res.observation
    assert peak < 60 << 20, f"the kit's process allocated {peak / 2**20:.0f} MB"
    assert cpu < 5 and wall < 60


def test_a_legitimate_large_return_value_still_crosses():
    """The value bound (`wire.MAX_ITEMS`) is far above what a test's answer holds: 100 000 integers pass."""
    test = {
        "kind": "assert",
        "entry_point": "f",
        "code": "def check(candidate):\n    assert candidate(100000) == list(range(100000))\n",
    }
    r = sandbox.run_program(
        "def f(n):\n    return list(range(n))\n", [test], limits=sandbox.Limits(timeout_s=2)
    )
    assert r.all_passed, r.tests[0]


# ---------------------------------------------------------------------------------------------------- BFCL


def bfcl_env(cls: str, **kwargs) -> bfcl.BFCLEnv:
    entry = next(e for e in bfcl.load_entries() if cls in e["involved_classes"])
    env = bfcl.BFCLEnv(**kwargs)
    env.reset(Task(entry["id"], "bfcl", bfcl.task_payload(entry, "multi_turn_base"), 30), 30)
    return env


def at_depth(k: int, fn):
    """fn() called with `k` more frames on the stack (the kit's process runs steps deep in a notebook or pytest)."""
    return fn() if k <= 0 else at_depth(k - 1, fn)


def test_a_directory_chain_cannot_grow_past_what_the_kit_can_handle():
    """Replies of mkdir/cd pairs build a directory chain: before, 197 deep the worker could pickle it and the kit's
    process could not (RecursionError out of every later step, even ls()). Now a call that would nest the state
    deeper than the worker's bound is refused and changes nothing; later steps, run 600 frames deep, work."""
    env = bfcl_env("GorillaFileSystem")
    reply = "[" + ", ".join(["mkdir(dir_name='d'), cd(folder='d')"] * 32) + "]"
    refused = 0
    for _ in range(7):  # 224 levels asked for
        res = at_depth(600, lambda: env.step(reply))
        refused += sum("nested too deeply" in r for r in res.info["results"])
    assert refused > 0
    depth = env.backends.instances["GorillaFileSystem"]._current_dir
    n = 0
    while depth.parent is not None:
        depth, n = depth.parent, n + 1
    assert 20 < n < 100, n
    res = at_depth(600, lambda: env.step("[ls()]"))
    assert "current_directory_content" in res.observation
    res = at_depth(600, lambda: env.step("I am done with this request."))  # the turn's checks run
    assert res.info["turn_ended"]


def test_many_slow_calls_in_one_reply_share_one_time_budget():
    """20 calls of power(base=7, exponent=10000000): each was limited, their number was not (47.5 s). Now the
    reply's calls share `reply_time_s` (4 x the call limit) of the worker's CPU time; the rest are not run."""
    env = bfcl_env("MathAPI", call_time_limit_s=0.5)
    wall = time.monotonic()
    res = env.step("[" + ", ".join(["power(base=7, exponent=10000000)"] * 20) + "]")
    wall = time.monotonic() - wall
    results = res.info["results"]
    stopped = [r for r in results if "ran past" in r]
    not_run = [r for r in results if "not run" in r]
    assert len(stopped) <= 5 and len(stopped) + len(not_run) == 20, results
    assert len(res.observation) < 10_000 and wall < 120


def test_a_short_reply_cannot_make_a_huge_observation():
    """A 1.6 KB reply of 24 long results made a 2.4 MB observation; now at most `observation_chars` of results."""
    env = bfcl_env("MathAPI", call_time_limit_s=5.0, reply_time_limit_s=60.0)
    reply = "[" + ", ".join(["square_root(number=2, precision=20000)"] * 24) + "]"
    assert len(reply) < 1600
    res = env.step(reply)
    assert len(res.observation) <= env.call_limits.observation_chars + 24 * 200, len(res.observation)
    assert all(len(r) > 20_000 for r in res.info["results"])  # the checks see every result whole
    assert "(cut:" in res.observation


def test_a_reply_with_too_many_calls_runs_none():
    env = bfcl_env("MathAPI")
    res = env.step("[" + ", ".join(["add(a=1, b=2)"] * 65) + "]")
    assert res.info["invalid"] and "over the limit of 64 calls" in res.observation


# ----------------------------------------------------------------------------------------------------- SQL


@pytest.fixture
def sql_env():
    env = SQLEnv()
    task = Task(
        "hostile-sql",
        "intercode_sql",
        {
            "db": "world_1",
            "db_source": "dump",
            "question": "?",
            "gold": "SELECT Name FROM country WHERE Continent = 'Europe' ORDER BY Name",
        },
        5,
    )
    env.reset(task, 5)
    yield env
    env.close()


def sql_step(env: SQLEnv, sql: str):
    """A step and its step quality (which runs the query again), measured together."""
    return measured(lambda: (env.step(f"```sql\n{sql}\n```"), env.step_quality(f"```sql\n{sql}\n```")))


def test_a_row_too_wide_for_memory_is_an_error(sql_env):
    """2000 columns of zeroblob(1000000): the byte cap was checked after the whole row (2 GB) was fetched; now a
    result has at most 200 columns of at most 64 KB."""
    (res, quality), cpu, peak, wall = sql_step(sql_env, "SELECT " + ", ".join(["zeroblob(1000000)"] * 2000))
    assert "Error executing query" in res.observation and quality == 0.0
    assert peak < 100 << 20 and cpu < 5
    widest = "SELECT " + ", ".join(["zeroblob(65536)"] * 200) + " FROM city"
    (res, quality), cpu, peak, wall = sql_step(sql_env, widest)
    assert res.info["truncated"] and "byte cap" in res.observation and quality == 0.0
    assert peak < 100 << 20 and cpu < 5 and wall < 120, (peak, cpu, wall)


@pytest.mark.parametrize(
    "sql",
    [  # one function call, which the progress handler cannot interrupt, on the longest strings a query can make
        "SELECT "
        + ", ".join(["instr(printf('%.*c', 1000000, 'a') || 'b', printf('%.*c', 500000, 'a') || 'b')"] * 6),
        "SELECT "
        + ", ".join(["instr(printf('%.*c', 65000, 'a') || 'b', printf('%.*c', 32000, 'a') || 'b')"] * 6),
        "SELECT "
        + ", ".join(["replace(printf('%.*c', 65000, 'a'), printf('%.*c', 32000, 'a') || 'b', 'c')"] * 30),
    ],
)
def test_one_slow_function_call_cannot_outrun_the_time_limit(sql_env, sql):
    """6 instr() on 1 MB strings took 54 s and 30 replace() 286 s against a 2 s limit (and step_quality repeated
    them): values are now at most 64 KB, so one call costs little and the limit stops the query between calls."""
    (res, quality), cpu, peak, wall = sql_step(sql_env, sql)
    assert not res.done and cpu < 3 * (2 * sql_env.time_limit_s), cpu  # step and step_quality: 2 limits
    assert len(res.observation) < 20_000 and quality == 0.0 and peak < 50 << 20 and wall < 300


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT hex(fts3_tokenizer('simple'))", "function fts3_tokenizer is not allowed"),
        ("SELECT fts3_tokenizer('simple', x'0000000000000000')", "function fts3_tokenizer is not allowed"),
        ("SELECT * FROM json_each('[1,2]')", "table-valued function"),
        ("SELECT * FROM pragma_table_info('city')", "table-valued function"),
    ],
)
def test_refusals_name_what_was_refused(sql_env, sql, why):
    res = sql_env.step(f"```sql\n{sql}\n```")
    assert why in res.observation and "UPDATE" not in res.observation, res.observation


# ------------------------------------------------------------------------------- issue 52: size before work


def frozenlake_env():
    from helpers.envs.frozenlake import FrozenLakeEnv

    env = FrozenLakeEnv()
    task = FrozenLakeEnv.load_tasks("train", n=1, seed=0)[0]
    env.reset(task, 4)
    return env


def test_a_bfcl_reply_over_the_size_cap_is_refused_before_parsing():
    """One 6 MB reply holding one call (`[ls(a=[0,0,...])]`, 3 M elements) cost the kit's process +2.8 GB and a
    47 s step, and the call ran. Now it is an invalid action, refused unparsed."""
    env = bfcl_env("GorillaFileSystem")
    reply = "[ls(a=[" + "0," * 3_000_000 + "0])]"
    res, cpu, peak, _ = measured(lambda: env.step(reply))
    assert res.info["invalid"] and "over 65536 bytes" in res.observation and "calls" not in res.info
    assert peak < 50 << 20 and cpu < 2, (peak, cpu)


@pytest.mark.parametrize(
    "reply",
    [
        "[ls(a=[" + "0," * 20_000 + "0])]",  # under the byte cap: 40 KB, 20 000 values
        "[ls(a={" + ",".join(f"{i}:[]" for i in range(6000)) + "})]",  # a dict of lists
        "[" + ", ".join(["ls(a=[[[[[[0]]]]]])"] * 900) + "]",  # many calls of nested lists (over 64 too)
    ],
    ids=["long-list", "dict-of-lists", "many-nested-calls"],
)
def test_a_bfcl_reply_with_a_large_syntax_tree_runs_nothing(reply):
    env = bfcl_env("GorillaFileSystem")
    assert len(reply.encode()) <= 65536
    res = env.step(reply)
    assert res.info["invalid"] and "syntax-tree nodes" in res.observation and "calls" not in res.info


@pytest.mark.parametrize(
    "reply",
    [
        "[ls(a=[" + "0," * 32_700 + "0])]",
        "[ls(a=[" + "[]," * 21_800 + "[]])]",
        "[ls(a={" + ",".join(f"{i}:{i}" for i in range(6_500)) + "})]",
        "[cat(file_name='" + "x" * 65_000 + "')]",
        "[" + ", ".join(["ls(a=-" + "1" * 900 + ")"] * 64) + "]",
    ],
    ids=["ints", "empty-lists", "dict", "one-long-string", "64-long-ints"],
)
def test_the_kits_memory_per_bfcl_step_is_bounded_for_any_reply_under_the_cap(reply):
    """Issue 52's stated bound: whatever a reply under the 64 KiB cap holds, the step adds under 100 MB to the kit's
    process (about 470 bytes per byte of reply were spent before the tree bound: a 1 MB reply took +481 MB)."""
    env = bfcl_env("GorillaFileSystem")
    assert len(reply.encode()) <= 65536
    res, _, peak, _ = measured(lambda: env.step(reply))
    assert peak < 100 << 20, f"{peak / 2**20:.0f} MB"
    assert len(res.observation) < 200_000


def test_every_environment_refuses_an_oversized_reply_as_an_invalid_action(sql_env):
    """The byte cap (`MAX_REPLY_BYTES`) holds in all four environments, counted in UTF-8 bytes (a reply of 20 000
    four-byte characters is 80 000 bytes), and a valid action is hidden in it so that only the cap can refuse."""
    from helpers.envs.base import MAX_REPLY_BYTES

    env, _ = assert_env()
    big = "\U0001f600" * 20_000
    cases = [
        (frozenlake_env(), "<answer>Left</answer>" + big),
        (sql_env, "```sql\nSELECT 1\n```" + big),
        (bfcl_env("MathAPI"), "[add(a=1, b=2)]  # " + big),
        (env, fence("print(1)") + big),
    ]
    assert len(big) < MAX_REPLY_BYTES < len(big.encode())
    for e, reply in cases:
        res = e.step(reply)
        assert res.info["invalid"] and f"over {MAX_REPLY_BYTES} bytes" in res.observation, (e.name, res)
        assert not res.done
    assert env.step_quality(fence("print(1)") + big) == 0.0 and not env.fails(fence("print(1)") + big)
    assert sql_env.step_quality("```sql\nSELECT 1\n```" + big) == 0.0


# ------------------------------------------------------------------------ issue 52: observations are text


@pytest.fixture(scope="module")
def tokenizers(qwen3_dir):
    """Every tokenizer the kit encodes observations with: the tiny models' (trained by `models.train_tokenizer`)
    and Qwen3's (fast tokenizers refuse a lone surrogate with TypeError)."""
    from helpers import models, qwen3_tokenizer

    return [models.train_tokenizer(["a b c", "hello world"]), qwen3_tokenizer.load(qwen3_dir)]


def encodable(tokenizers, text: str) -> bool:
    text.encode("utf-8")
    return all(isinstance(tok(text, add_special_tokens=False)["input_ids"], list) for tok in tokenizers)


def test_a_lone_surrogate_from_a_program_reaches_no_observation(boundary_in_place, tokenizers):
    """`raise ValueError(chr(0xd800))` put '\\ud800' into the observation and ChatFormat.observation_ids raised
    TypeError out of the rollout. Now every observation is valid text, replaced at the environment boundary."""
    env, _ = assert_env()
    for program in (
        "def f(x):\n    raise ValueError(chr(0xd800))\n",
        "def f(x):\n    print(chr(0xdfff) * 3, chr(0xd83d))\n    return 1\n",
        "import sys\ndef f(x):\n    sys.stderr.write(chr(0xdc80))\n    raise SystemExit(chr(0xd800))\n",
    ):
        res = env.step(fence(program))
        assert res.info["passed"] == 0 and encodable(tokenizers, res.observation), res.observation


@pytest.mark.parametrize(
    "surrogate", ["\ud800", "\udfff", "\udc80\ud83d"], ids=["d800", "dfff", "pair-reversed"]
)
def test_every_environment_returns_encodable_observations(sql_env, tokenizers, surrogate):
    """A reply carrying lone surrogates, in every environment: whatever the environment echoes, its observation
    encodes with every tokenizer the kit uses (the reply itself is the attacker's)."""
    env, _ = assert_env()
    cases = [
        (frozenlake_env(), f"<answer>{surrogate}</answer>"),
        (sql_env, f"```sql\nSELECT '{surrogate}'\n```"),
        (sql_env, f"```sql\nSELECT {surrogate}\n```"),
        (bfcl_env("GorillaFileSystem"), f"[mkdir(dir_name='{surrogate}'), ls()]"),
        (bfcl_env("GorillaFileSystem"), f"[{surrogate}()]"),
        (env, f"```python\n{surrogate}\n```"),
    ]
    for e, reply in cases:
        res = e.step(reply)
        assert encodable(tokenizers, res.observation), (e.name, res.observation)


# ----------------------------------------------------------------------------- issue 52: the smaller items


def test_a_call_that_runs_out_of_memory_says_so():
    """`square_root(number=2, precision=10**9)` ran out of the worker's memory with an empty MemoryError, and the
    observation said "Error during execution: " and nothing more."""
    env = bfcl_env("MathAPI", call_time_limit_s=0.5)
    res = env.step(f"[square_root(number=2, precision={10**9})]")
    (result,) = res.info["results"]
    assert result.startswith("Error during execution: ") and len(result) > len("Error during execution: ") + 5
    assert "memory" in result or "time limit" in result, result


def test_the_model_results_kept_for_the_checks_are_small():
    """`env.model_results` kept every result whole for the episode (1.45 MB per reply); now a digest per result,
    and the turn's response check still compares them (a scripted episode with the ground truth passes)."""
    env = bfcl_env("MathAPI", call_time_limit_s=5.0, reply_time_limit_s=60.0)
    res = env.step("[" + ", ".join(["square_root(number=2, precision=20000)"] * 8) + "]")
    assert sum(len(r) for r in res.info["results"]) > 160_000
    assert sum(len(d) for d in env.model_results) == 8 * 64
    entry = bfcl.load_entries()[0]
    task = Task(entry["id"], "bfcl", bfcl.task_payload(entry, "multi_turn_base"), 40)
    replies = iter(bfcl.ground_truth_replies(task))
    _, last = play(bfcl.BFCLEnv(), task, 40, lambda _env: next(replies))
    assert last.success, last.info


# ---------------------------------------------------------------- issue 52: SQL time that cannot be dodged

_CTE = (
    "WITH a(v) AS MATERIALIZED (SELECT printf('%.*c', 65000, 'a')), "
    "b(v) AS MATERIALIZED (SELECT printf('%.*c', 32000, 'a')) "
)


@pytest.mark.parametrize(
    "sql",
    [  # one row of straight-line work: SQLite reaches neither its progress handler nor interrupt() inside it
        _CTE
        + "SELECT "
        + ", ".join(" + ".join(f"instr(a.v, b.v || '{i % 10}{j}')" for j in range(12)) for i in range(200))
        + " FROM a, b",
        _CTE + "SELECT " + ", ".join(f"replace(a.v, b.v || 'b{i}', 'c')" for i in range(200)) + " FROM a, b",
    ],
    ids=["instr-2400", "replace-200"],
)
def test_a_query_ends_within_a_small_multiple_of_its_limit_whatever_one_row_does(sql):
    """2400 instr() calls on 64 KB values in one row used 46 s of CPU time against the 2 s limit (the progress
    handler was never reached). Model queries now run in the query worker under a kernel CPU-time limit of
    HARD_FACTOR x the limit + HARD_EXTRA_S; the next query runs in a fresh worker."""
    from helpers.envs.sql import engine

    env = SQLEnv(time_limit_s=0.1)
    payload = {"db": "world_1", "db_source": "dump", "question": "?", "gold": "SELECT Name FROM country"}
    env.reset(Task("hostile-sql", "intercode_sql", payload, 5), 5)
    hard = engine.HARD_FACTOR * 0.1 + engine.HARD_EXTRA_S
    res, cpu, _, wall = measured(lambda: env.step(f"```sql\n{sql}\n```"))
    assert res.info["timed_out"] and "0.1 s time limit" in res.observation, res.observation
    assert res.info["cpu_seconds"] <= hard + 0.05 and cpu < 2 and wall < 60, (res.info, cpu, wall)
    after = env.step("```sql\nSELECT count(*) FROM city\n```")
    assert "(4079,)" in after.observation
    env.close()
