"""Exercises for lecturers: "change X, predict, run", two or three per notebook, one file each.

Each exercise is two files in this folder, named by its key and a short name (`03a_unbiased_vs_plugin`):
the `.py` is the snippet a student pastes into a new cell at the end of the notebook (linted and formatted by
ruff like the rest of the kit; `profile`, the notebook's parameter, is its only free name), and the `.toml` beside
it says where it belongs and what to change, predict and look for. A snippet uses only `profile` (loading the
profile itself, with its own overrides), calls the kit's helpers, and prints a small table. Snippets never write
into the results: they read the notebook's tables and record files, or roll out and update models in memory.
Their variable names differ from the notebook's own, so pasting one leaves the notebook's variables as they were
(tests/test_exercises.py checks both).

`section(notebook)` is the Markdown of a notebook's "Exercises" section, with each snippet's runtime as measured
by `benchmarks/exercises.py` (read from `benchmarks/exercises.json`; "not measured yet" where it has no entry for
the snippet's current code).
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
        """A hash of the code, so a runtime measured for other code is not shown for this one."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:12]


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
    dirty = " (with uncommitted changes)" if entry["commit"].endswith("-dirty") else ""
    return (
        f"{seconds} on {entry['cpu_count']} cores with the {entry['profile']} profile, "
        f"measured at commit {entry['commit'][:7]}{dirty}"
    )


INTRO = (
    "Change one thing, write down your prediction, then paste the code into a new cell at the end of this notebook "
    "(after running it once) and run it. Each snippet uses only the notebook's `profile` parameter, reads what the "
    "notebook wrote or works in memory, and writes nothing into the results; its variable names leave the "
    "notebook's own alone. Runtimes were measured on 2 CPU cores by `benchmarks/exercises.py`."
)


def section(notebook: str, path: Path = TIMINGS, heading: bool = True) -> str:
    """Markdown of a notebook's "Exercises" section: every exercise's fields, code and measured runtime (without
    the heading and introduction where the notebook has them in its own Markdown cell, `heading=False`)."""
    chosen = for_notebook(notebook)
    if not chosen:
        raise KeyError(f"no exercises for notebook {notebook!r}")
    measured = timings(path)
    out = ["## Exercises", "", INTRO] if heading else []
    for e in chosen:
        out += [
            "",
            f"### {e.key} · {e.title}",
            "",
            f"**Change.** {e.change}",
            "",
            f"**Predict.** {e.predict}",
            "",
            f"**Look for.** {e.look_for}",
            "",
            "```python",
            e.code.rstrip(),
            "```",
            "",
            f"*Runtime: {runtime(e, measured)}.*",
        ]
    return "\n".join(out) + "\n"


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
