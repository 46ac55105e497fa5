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

The tasks, their test format and the prompt are `helpers.envs.code_tasks`; the mutations behind injected errors are
`helpers.envs.code_mutations`. This module runs the programs (the sandbox), judges them and keeps the episode.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from helpers import sandbox
from helpers.budget import statement
from helpers.envs.base import StepResult, Task, check_split, oversized, seeded_subset
from helpers.envs.code_mutations import mutate, mutation_sites
from helpers.envs.code_tasks import (
    BUNDLED_SETS,
    ENV,
    SYSTEM_PROMPT,
    bundled_tasks,
    kit_tasks,
    load_hub,
    problem_text,
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


# ---------------------------------------------------------------------------------------- the environment


class CodeEnv:
    """DeepCoder-MT with a turn budget; implements `helpers.envs.base.Env`."""

    name = ENV  # "deepcoder"
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
            tasks = bundled_tasks(split, sets, t_max, max_tests)
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
            {"role": "user", "content": f"{problem_text(task)}\n\n{statement(self.total, self.remaining)}"},
        ]

    def _protocol_of(self, task: Task) -> str:
        """The protocol `task` is scored under: the one it names, else this environment's (default 'paper'). A
        task loaded for one protocol is never played under another (the reward would mean something else)."""
        named = task.payload.get("protocol")
        _check_protocol(named, none=True)
        if named is not None and self._asked is not None and named != self._asked:
            raise ValueError(
                f"task {task.task_id} was loaded for protocol {named!r}, but this CodeEnv was built for "
                f"{self._asked!r}; load the tasks with protocol={self._asked!r} or build the environment "
                "without a protocol"
            )
        return named or self._asked or "paper"

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
        rows.append(
            {
                "turn": res.info["t"],
                "passed": res.info["passed"],
                "total": res.info["total"],
                "step_quality": quality,
                "reward": res.reward,
                "done": res.done,
            }
        )
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
        return {
            **demo(task_id, budget),
            "notice": "The two programs ran in the code sandbox (its full operating-system boundary).",
        }
    if where.mode == "weak":
        try:
            out = demo(task_id, budget, isolation="weak")
        except sandbox.SandboxError as exc:
            return _skipped(
                task_id, budget, f"{where.explain()} Weak isolation did not start either ({exc})."
            )
        return {
            **out,
            "sandbox": "weak",
            "notice": f"{where.explain()} This demo runs only the kit's own two "
            "programs (a wrong one and the reference solution, written by the kit, not by a model), so it "
            "ran them with weak isolation.",
        }
    return _skipped(task_id, budget, where.explain())


def _skipped(task_id: str, budget: int, why: str) -> dict:
    """The demo without running anything: the task as the agent sees it and the two programs, unrun."""
    task = next(t for t in kit_tasks(t_max=budget) if t.task_id == task_id)
    messages = CodeEnv().reset(task, budget)  # reset builds the prompt only: nothing runs
    messages += [{"role": "assistant", "content": fence(p)} for p in (_DEMO_WRONG, task.payload["reference"])]
    notice = (
        f"{why} Skipped: the demo episode. Shown below: the task and the two programs the scripted player "
        "would submit, not run, so there is no feedback and no score."
    )
    return {
        "task_id": task_id,
        "transcript": messages,
        "turns": [],
        "success": None,
        "sandbox": "skipped",
        "notice": notice,
    }
