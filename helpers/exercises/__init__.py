"""Exercises for lecturers: "change X, predict, run", two or three per notebook, one file each.

Each exercise is two files in this folder, named by its key and a short name (`03a_unbiased_vs_plugin`):
the `.py` is the snippet a student loads into a new cell at the end of the notebook with one call,
`exercises.paste("03a")` (or runs as it stands with `exercises.run("03a", profile)`; linted and formatted by
ruff like the rest of the kit; `profile`, the notebook's parameter, is its only free name), and the `.toml` beside
it says where it belongs and what to change, predict and look for. Implement-exercises ("write X yourself") give
a skeleton whose function the student fills in, and call a check in `helpers.exercises.checks` that compares it
with the kit's own on many inputs; their reference solution is `solutions/<name>.py` beside them. A snippet uses only `profile` (loading the
profile itself, with its own overrides), calls the kit's helpers, and prints a small table. Snippets never write
into the results: they read the notebook's tables and record files, or roll out and update models in memory.
Their variable names differ from the notebook's own, so pasting one leaves the notebook's variables as they were
(tests/test_exercises.py checks both).

`section(notebook)` is the Markdown of a notebook's "Exercises" section, with each snippet's runtime as measured
by `benchmarks/exercises.py` (read from `benchmarks/exercises.json`; "not measured yet" where it has no entry for
the snippet's current code). The answer ("look for") is collapsed under "Answer (open after you predict)", so the
prediction comes first; `solutions()` is the instructors' file `docs/solutions.md` (every answer and reference
solution), kept in sync by tests/test_exercises.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from helpers.config import REPO_ROOT

FOLDER = Path(__file__).resolve().parent
TIMINGS = REPO_ROOT / "benchmarks" / "exercises.json"
SOLUTIONS = REPO_ROOT / "docs" / "solutions.md"
SUMMARY = "Answer (open after you predict)"
FIELDS = ("notebook", "title", "change", "predict", "look_for")


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it belongs, what to change and predict, what to look for, and the code to run."""

    notebook: str  # the notebook's stem, e.g. "03_pass_at_kt_sweep"
    key: str  # e.g. "03a"
    title: str
    change: str  # what to change, one or two sentences
    predict: str  # what to predict before running, and why it is a real question
    look_for: str  # what the outcome tells (no numbers given away)
    code: str  # a snippet for a new cell at the end of the notebook; uses only `profile`
    path: Path  # the snippet's file

    @property
    def digest(self) -> str:
        """A hash of the code (and of the reference solution, which is what an implement-exercise's runtime times),
        so a runtime measured for other code is not shown for this one."""
        return hashlib.sha256((self.code + (self.solution or "")).encode()).hexdigest()[:12]

    @property
    def solution(self) -> str | None:
        """The reference solution of an implement-exercise (`solutions/<name>.py` beside it), else None."""
        path = self.path.parent / "solutions" / self.path.name
        return path.read_text() if path.exists() else None


def load(folder: Path = FOLDER) -> tuple[Exercise, ...]:
    """Every exercise in `folder`, in key order: a `.toml` (the fields) and a `.py` (the code) per exercise."""
    out = []
    for meta in sorted(folder.glob("*.toml")):
        fields = tomllib.loads(meta.read_text())
        if set(fields) != set(FIELDS):
            raise ValueError(f"{meta.name}: fields {sorted(fields)}, expected {sorted(FIELDS)}")
        code = meta.with_suffix(".py")
        if not code.exists():
            raise FileNotFoundError(f"{meta.name} has no snippet {code.name} beside it")
        out.append(Exercise(key=meta.stem.split("_", 1)[0], code=code.read_text(), path=code, **fields))
    return tuple(out)


EXERCISES: tuple[Exercise, ...] = load()


# ------------------------------------------------------------------------------------------- look-ups


def for_notebook(notebook: str) -> list[Exercise]:
    """The exercises of a notebook, given as its stem (`03_pass_at_kt_sweep`) or its number (`03`)."""
    return [e for e in EXERCISES if e.notebook == notebook or e.notebook[:2] == notebook]


def get(key: str) -> Exercise:
    """The exercise with this key (`03a`)."""
    for e in EXERCISES:
        if e.key == key:
            return e
    raise KeyError(f"no exercise {key!r}; keys: {[e.key for e in EXERCISES]}")


def timings(path: Path = TIMINGS) -> dict:
    """What `benchmarks/exercises.py` measured ({} when nothing has been measured)."""
    return json.loads(path.read_text()) if path.exists() else {}


def runtime(ex: Exercise, measured: dict) -> str:
    """The measured runtime of an exercise in words, or "not measured yet" (none, or measured for other code)."""
    entry = measured.get("exercises", {}).get(ex.key)
    if not entry:
        return "not measured yet"
    if entry.get("code") != ex.digest:
        return "not measured yet (its code changed after it was measured)"
    seconds = "under 1 s" if entry["seconds"] < 1 else f"about {round(entry['seconds'])} s"
    solved = " (the reference solution filled in)" if is_implement(ex) else ""
    dirty = " (with uncommitted changes)" if entry["commit"].endswith("-dirty") else ""
    return (
        f"{seconds}{solved} on {entry['cpu_count']} cores with the {entry['profile']} profile, "
        f"measured at commit {entry['commit'][:7]}{dirty} on {entry['date'][:10]}"
    )


INTRO = (
    "Run the notebook once. For each exercise, read what to change, write down your prediction, and only then open "
    'the answer. To try it, run `exercises.paste("KEY")` in a new cell at the end of this notebook: it puts the '
    "exercise's code into the next cell (outside Jupyter it prints it), where you can edit and run it; "
    '`exercises.run("KEY", profile)` runs it as it stands. Exercises marked *implement* give a function to fill '
    "in and check it against the kit's own; the others change a knob, retrain or re-evaluate in memory. Each "
    "snippet uses only the notebook's `profile` parameter, reads what the notebook wrote or works in memory, and "
    "writes nothing into the results; its variable names leave the notebook's own alone. Runtimes were measured on "
    "2 CPU cores by `benchmarks/exercises.py`; instructors find every answer and reference solution in "
    "`docs/solutions.md`."
)


def is_implement(ex: Exercise) -> bool:
    """Whether the exercise asks the student to write a function (it has a reference solution)."""
    return ex.solution is not None


def section(notebook: str, path: Path = TIMINGS, heading: bool = True) -> str:
    """Markdown of a notebook's "Exercises" section: every exercise's fields, code and measured runtime (without
    the heading and introduction where the notebook has them in its own Markdown cell, `heading=False`)."""
    chosen = for_notebook(notebook)
    if not chosen:
        raise KeyError(f"no exercises for notebook {notebook!r}")
    measured = timings(path)
    out = ["## Exercises", "", INTRO] if heading else []
    for e in chosen:
        kind = " (implement)" if is_implement(e) else ""
        out += [
            "",
            f"### {e.key} · {e.title}{kind}",
            "",
            f"**Change.** {e.change}",
            "",
            f"**Predict.** {e.predict}",
            "",
            f'**Try it:** `exercises.paste("{e.key}")` in a new cell. *Runtime: {runtime(e, measured)}.*',
            "",
            "<details>",
            f"<summary>{SUMMARY}</summary>",
            "",
            f"**Look for.** {e.look_for}",
            "",
            "</details>",
            "",
            "<details>",
            "<summary>The code</summary>",
            "",
            "```python",
            e.code.rstrip(),
            "```",
            "",
            "</details>",
        ]
    return "\n".join(out) + "\n"


def paste(key: str) -> None:
    """Put exercise `key`'s code into the next cell of the running notebook, to edit and run there (outside
    IPython, where there is no next cell, print it instead)."""
    code = get(key).code
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the kit's notebooks
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is None or not hasattr(shell, "set_next_input"):
        print(code)
        return
    shell.set_next_input(code, replace=False)


def run(key: str, profile: str) -> dict:
    """Run exercise `key` as it stands with the notebook's `profile`, in a fresh namespace (so the notebook's
    variables stay as they were); returns that namespace, e.g. to look at a table the snippet built."""
    ex = get(key)
    namespace = {"profile": profile, "__name__": "__exercise__"}
    exec(compile(ex.code, f"<exercise {key}>", "exec"), namespace)
    return namespace


def solutions() -> str:
    """The instructors' solutions file (`docs/solutions.md`): for every exercise the question, the answer to look
    for and, for implement-exercises, the reference solution."""
    out = [
        "# Exercises: answers and reference solutions (for instructors)",
        "",
        "Generated from `helpers/exercises/*.toml` and `helpers/exercises/solutions/*.py` by",
        "`python -c 'from helpers import exercises; exercises.write_solutions()'`; tests/test_exercises.py checks that",
        "it is up to date. The notebooks show the same answers collapsed, after the prediction.",
    ]
    notebook = None
    for e in EXERCISES:
        if e.notebook != notebook:
            notebook = e.notebook
            out += ["", f"## {notebook}"]
        out += [
            "",
            f"### {e.key} · {e.title}",
            "",
            f"**Predict.** {e.predict}",
            "",
            f"**Answer.** {e.look_for}",
        ]
        if e.solution is not None:
            out += ["", "Reference solution (the check at its end says it matches the kit's):", "", "```python",
                    e.solution.rstrip(), "```"]  # fmt: skip
    return "\n".join(out) + "\n"


def write_solutions(path: Path = SOLUTIONS) -> Path:
    """Write `solutions()` to `docs/solutions.md` (or `path`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(solutions())
    return path


def results_snapshot(root: str | Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time, to check that an exercise wrote nothing."""
    root = Path(root)
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            p = Path(folder) / name
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out
