"""Verdicts, decided in the parent from what the child reported: the test format, stdout and return-value
comparison, and assert tests, whose trusted `check(candidate)` runs here with a `candidate` that forwards each call
to the child and gets plain data back (`wire`)."""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
import math
import random
import re
import types
from typing import TYPE_CHECKING

from .base import TEST_KINDS, ChannelError, Died, Limits, Stalled, TestResult, Timeout
from .wire import check_items, wire_decode, wire_encode

if TYPE_CHECKING:
    from .session import Session

_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
# A decimal as judges print it, ASCII digits only: `float()` also reads fullwidth digits ('１.５'), underscores
# ('1_0.5') and 'nan', which passed inside decimals before.
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)

# --------------------------------------------------------------------------------------------- test format


def validate_test(test: dict) -> None:
    """Check one normalised test; raises ValueError naming what is wrong.

    stdin:  {"kind": "stdin", "input": str, "output": str}
    call:   {"kind": "call", "fn_name": str, "args": list, "output": value[, "alt_outputs": list]}
            (a module-level function, or a method of class `Solution`, called with the JSON arguments)
    assert: {"kind": "assert", "entry_point": str, "code": str[, "label": str]}
            (`code` defines `check(candidate)`; it passes when `check(<entry_point>)` raises nothing)
    """
    if not isinstance(test, dict) or test.get("kind") not in TEST_KINDS:
        raise ValueError(f"test must be a dict with kind in {TEST_KINDS}, got {str(test)[:80]!r}")
    need = {
        "stdin": {"input": str, "output": str},
        "call": {"fn_name": str, "args": list},
        "assert": {"entry_point": str, "code": str},
    }[test["kind"]]
    for key, typ in need.items():
        if not isinstance(test.get(key), typ):
            raise ValueError(
                f"{test['kind']} test needs {key!r} of type {typ.__name__}, got {test.get(key)!r:.80}"
            )
    if test["kind"] == "call" and "output" not in test:
        raise ValueError("call test needs an 'output'")


def describe_test(test: dict) -> tuple[str, str]:
    """(input, expected) as shown to the agent."""
    if test["kind"] == "stdin":
        return test["input"], test["output"]
    if test["kind"] == "call":
        args = ", ".join(json.dumps(a) for a in test["args"])
        return f"{test['fn_name']}({args})", json.dumps(test["output"])
    return test.get("label") or test["code"], "the assertion holds"


def child_view(test: dict) -> dict:
    """What the child may know of a test: its input, never its expected output or check code."""
    if test["kind"] == "stdin":
        return {"kind": "stdin", "input": test["input"]}
    if test["kind"] == "call":
        return {"kind": "call", "fn_name": test["fn_name"], "args": test["args"]}
    return {"kind": "assert", "entry_point": test["entry_point"]}


def outputs_match(actual: str, expected: str) -> bool:
    """Stdout comparison of competitive programming judges: lines stripped, trailing blank lines ignored; tokens
    that are decimals (contain '.' or 'e') may differ by 1e-6 (absolute or relative), but an expected integer is
    matched exactly ("1e6" is not "1000001", and a float approximation of a 25-digit integer is wrong)."""
    a = actual.rstrip().splitlines()
    e = expected.rstrip().splitlines()
    if [x.strip() for x in a] == [x.strip() for x in e]:
        return True
    if len(a) != len(e):
        return False
    for la, le in zip(a, e, strict=True):
        ta, te = la.split(), le.split()
        if len(ta) != len(te):
            return False
        for x, y in zip(ta, te, strict=True):
            if x != y and not _close_decimals(x, y):
                return False
    return True


def _close_decimals(x: str, y: str) -> bool:
    """Whether `x` (actual) is within 1e-6 of `y` (expected), `y` being a decimal, not an integer."""
    if _INTEGER.fullmatch(y) or not any(c in s for s in (x, y) for c in ".eE"):
        return False
    if not (_DECIMAL.fullmatch(x) and _DECIMAL.fullmatch(y)):
        return False
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    return math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6)


def values_match(actual: object, expected: object) -> bool:
    """Return-value comparison after a JSON round trip (tuples are lists): exact, except that an expected float
    may be met within 1e-6; an expected integer only by an equal integer (exactly: a float approximation of a
    large integer is wrong, and so is 1.0 for 1); bools only equal bools."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, float):
            return math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-6)
        return isinstance(actual, int) and actual == expected
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(values_match(a, e) for a, e in zip(actual, expected))  # noqa: B905
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[k], expected[k]) for k in expected
        )
    return type(actual) is type(expected) and actual == expected


def cpu_of(msg: dict) -> float:
    """The CPU seconds the child reported for a test (0 if it sent none that can be read)."""
    cpu = msg.get("cpu")
    return float(cpu) if type(cpu) in (int, float) and math.isfinite(cpu) and cpu >= 0 else 0.0


def over_cpu(msg: dict, limits: Limits) -> bool:
    """Whether a finished test used more than its CPU time limit (the same rule as the child's timer)."""
    return cpu_of(msg) > limits.timeout_s


def cpu_text(limits: Limits) -> str:
    return f"time limit of {limits.timeout_s} s exceeded (CPU time)"


def text(value: object, cap: int) -> str:
    return value[:cap] if isinstance(value, str) else ""


def verdict(test: dict, msg: dict, limits: Limits) -> TestResult:
    """Pass or fail of a stdin or call test, decided here from the program's outputs."""
    stdout = text(msg.get("stdout"), limits.output_bytes)
    shown = stdout if test["kind"] == "stdin" else text(msg.get("result"), limits.output_bytes)
    err = text(msg.get("error"), limits.error_bytes)
    stderr = text(msg.get("stderr"), limits.error_bytes)
    kept = shown[: limits.shown_bytes]
    if over_cpu(msg, limits):
        return TestResult(False, "timeout", kept, cpu_text(limits), cpu_s=cpu_of(msg))
    if msg.get("over"):
        return TestResult(
            False, "output_limit", kept, f"output limit of {limits.output_bytes} bytes exceeded"
        )
    if err:
        return TestResult(False, "runtime_error", kept, f"{err}\n{stderr}".strip()[: limits.error_bytes])
    if test["kind"] == "stdin":
        ok = outputs_match(stdout, test["output"])
    else:
        try:
            check_items(shown)
            value = json.loads(shown)
        except (ValueError, RecursionError):
            return TestResult(False, "runtime_error", kept, "the return value could not be read")
        ok = any(values_match(value, e) for e in [test["output"], *test.get("alt_outputs", [])])
    return TestResult(ok, "passed" if ok else "wrong_answer", kept, cpu_s=cpu_of(msg))


class CandidateFailed(BaseException):
    """The program's function raised, or returned what cannot be judged (BaseException: `check` cannot catch it)."""

    def __init__(self, status: str, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


@functools.lru_cache(maxsize=4096)
def _compiled(code: str, name: str) -> types.CodeType:
    return compile(code, name, "exec")


def _judge_builtins(seed: int) -> dict:
    """Builtins for trusted check code whose `random` is a private generator seeded from the test (replayable,
    and the kit's own `random` state is left alone); built only if the check imports random."""
    real_import = builtins.__import__
    private: list[types.ModuleType] = []

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "random" and level == 0:
            if not private:
                rng = random.Random(seed)
                module = types.ModuleType("random")
                for attr in random.__all__:
                    bound = getattr(rng, attr, None)
                    setattr(module, attr, bound if callable(bound) else getattr(random, attr))
                private.append(module)
            return private[0]
        return real_import(name, globals, locals, fromlist, level)

    return {**builtins.__dict__, "__import__": _import}


def first_command(test: dict) -> dict:
    """The command that starts a test in the child: the whole test (stdin, call) or `begin` (assert)."""
    return {"op": "begin" if test["kind"] == "assert" else "run", "test": child_view(test)}


def judge_assert(session: Session, test: dict, setup: str, limits: Limits, deadline: float) -> TestResult:
    """An assert test: the dataset's `check(candidate)` runs here; each call of `candidate` runs in the child.
    The first call is sent before `begin` is answered (it is this test's own input); no later test's command is
    sent before this test's `end` is answered, so the program never holds a later test's input."""
    session.post(first_command(test))
    begun: dict = {}
    last: list[str] = []

    def started() -> None:
        if not begun:
            begun.update(session.answer(deadline) or {"error": "no answer"})
        if not begun.get("begun"):
            raise CandidateFailed("not_started", "")

    def candidate(*args, **kwargs):
        cmd = {"op": "call", "args": wire_encode(list(args)), "kwargs": wire_encode(kwargs)}
        if not begun and session.fits(cmd):
            session.post(cmd)
            started()
            reply = session.answer(deadline)
        else:
            started()
            reply = session.ask(cmd, deadline)
        if reply.get("over"):
            raise CandidateFailed("output_limit", f"output limit of {limits.output_bytes} bytes exceeded")
        if "raised" in reply:
            raise CandidateFailed(
                "runtime_error", text(reply["raised"], limits.error_bytes) or "the call failed"
            )
        if "unsendable" in reply:
            raise CandidateFailed("runtime_error", text(reply["unsendable"], limits.error_bytes))
        try:
            value = wire_decode(reply["value"])
        except (KeyError, ValueError, TypeError, RecursionError):
            raise CandidateFailed("runtime_error", "the return value could not be read") from None
        last[:] = [text(reply.get("repr"), limits.shown_bytes)]
        return value

    candidate.__name__ = candidate.__qualname__ = test["entry_point"]
    label = test.get("label")
    seed = int(hashlib.sha256(test["code"].encode()).hexdigest()[:12], 16)
    g = {"__name__": "__check__", "__builtins__": _judge_builtins(seed)}
    status, error = "passed", ""
    try:
        if setup:
            exec(_compiled(setup, "<setup>"), g)
        g[test["entry_point"]] = candidate  # check code that names the function itself gets the program's
        exec(_compiled(test["code"], "<test>"), g)
        g["check"](candidate)
        started()
    except CandidateFailed as exc:
        status, error = exc.status, exc.text
    except AssertionError as exc:
        status = "wrong_answer"
        error = f"AssertionError{f': {exc}' if str(exc) else ''}" + (f"\nfailed: {label}" if label else "")
    except (ChannelError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        status = "runtime_error"
        error = f"{type(exc).__name__}: {str(exc)[:500]}" + (f"\nfailed: {label}" if label else "")
    if status == "not_started":  # the program failed before the check could call it
        while session.pending:
            session.answer(deadline)
        return verdict(test, {**begun, "error": begun.get("error") or "the program did not start"}, limits)
    result = TestResult(status == "passed", status, last[0] if last else "", error[: limits.error_bytes])
    finish_assert(result, session.ask({"op": "end"}, deadline), limits)
    return result


def finish_assert(result: TestResult, end: dict, limits: Limits) -> None:
    """Complete an assert test's result with the child's answer to `end` (CPU time, output limit, stderr)."""
    result.cpu_s = cpu_of(end)
    if over_cpu(end, limits):
        result.passed, result.status, result.error = False, "timeout", cpu_text(limits)
        return
    if end.get("over") and result.passed:
        result.passed, result.status = False, "output_limit"
        result.error = f"output limit of {limits.output_bytes} bytes exceeded"
    stderr = text(end.get("stderr"), limits.error_bytes)
    if result.status == "runtime_error" and stderr:
        result.error = f"{result.error}\n{stderr}".strip()[: limits.error_bytes]


def fail(result: TestResult, exc: BaseException, limits: Limits) -> None:
    """Turn `result` into the failure a broken channel means (in place)."""
    if isinstance(exc, Timeout):
        status, error = "timeout", cpu_text(limits)
    elif isinstance(exc, Stalled):
        status, error = (
            "stalled",
            (
                f"stopped by the stall guard: no answer within {limits.stall_s:g} s of wall-clock time, under its CPU "
                f"time limit of {limits.timeout_s} s (the program waits: sleep, a blocked read, a thread left running)"
            ),
        )
    elif isinstance(exc, Died):
        status, error = "crashed", str(exc)
    else:
        status, error = "runtime_error", f"the program garbled the sandbox's channel: {exc}"
    result.passed, result.status, result.error = False, status, error
