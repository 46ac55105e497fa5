"""docs/course.md, the lecturer's guide, names only what exists: every file, exercise, `make` target, runner flag
and `module.name` reference it cites is checked here, and its from-scratch compute times and their commit are the
committed run's (`results/cpu/executed/run.json` and the manifests), so they cannot drift from the results."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from helpers import config, exercises
from helpers.run import parser

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "docs" / "course.md"
TEXT = COURSE.read_text()
RUN = ROOT / "results" / "cpu" / "executed" / "run.json"


def test_every_path_it_names_exists():
    paths = set(
        re.findall(
            r"(?<![\w/.-])((?:helpers|docs|tests|scripts|benchmarks|configs|notebooks)/[\w./-]*\w)", TEXT
        )
    )
    assert paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/course.md names paths that do not exist: {missing}"


def test_every_exercise_it_names_exists():
    keys = set(re.findall(r"\b(0[0-7][a-z])\b", TEXT))
    known = {ex.key for ex in exercises.load()}
    assert keys and keys <= known, sorted(keys - known)


def test_every_make_target_exists():
    targets = set(re.findall(r"`make (\w+)", TEXT)) | set(re.findall(r"^make (\w+)", TEXT, re.M))
    makefile = (ROOT / "Makefile").read_text()
    defined = set(re.findall(r"^(\w[\w-]*):", makefile, re.M))
    assert targets and targets <= defined, sorted(targets - defined)
    assert re.search(r"^PROFILE \?=", makefile, re.M)  # `make reproduce PROFILE=smoke`


def test_every_runner_flag_exists():
    flags = set()
    for line in TEXT.splitlines():
        if "helpers.run" in line:
            flags |= set(re.findall(r"helpers\.run[^`\n]*?(--[a-z-]+)", line))
    known = {s for a in parser()._actions for s in a.option_strings}
    assert flags <= known, sorted(flags - known)


def resolves(ref: str, cfg) -> bool:
    """`module.name[.name]` is an attribute of a helpers module (or of a standard module: `sys.platform`), or a key
    of the cpu profile (`train.save_steps`)."""
    if not ref.startswith("helpers.") and ref.split(".")[0] in sys.stdlib_module_names:
        return hasattr(importlib.import_module(ref.split(".")[0]), ref.split(".", 1)[1])
    parts = ref.removeprefix("helpers.").split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("helpers." + ".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
            return True
        except AttributeError:
            break
    obj = cfg
    try:
        for name in parts:
            obj = getattr(obj, name)
    except AttributeError:
        return False
    return True


def test_every_module_reference_resolves():
    cfg = config.load("cpu")
    refs = set(re.findall(r"`((?:helpers\.)?[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+)`", TEXT))
    refs = {r for r in refs if not r.endswith((".py", ".md", ".json", ".yaml", ".yml", ".toml", ".txt"))}
    assert refs
    bad = sorted(r for r in refs if not resolves(r, cfg))
    assert not bad, f"docs/course.md cites names that are neither in helpers nor in the cpu profile: {bad}"


@pytest.mark.skipif(not RUN.exists(), reason="no committed cpu run")
def test_the_from_scratch_times_and_their_commit_are_the_committed_runs():
    run = json.loads(RUN.read_text())
    para = TEXT[TEXT.index("**From scratch**") :].split("\n- ")[0]
    for nb in run["notebooks"]:
        number = nb["notebook"][:2]
        assert f"{number} {round(nb['seconds'])} s" in para, (number, nb["seconds"])
    assert f"{round(run['seconds'])} s ({run['seconds'] / 60:.1f} min)" in para
    commits = {
        json.loads(p.read_text())["git_commit"][:7]
        for p in (ROOT / "results" / "cpu").glob("0[0-7]_*/manifest.json")
    }
    assert len(commits) == 1, commits
    assert f"`{commits.pop()}`" in para


def paper_numbers() -> set[float]:
    """Every number `helpers.paper` holds (values, and BudgetMix's fractions of T_max as keys), as fractions and as
    percentages."""
    from helpers import paper

    found: set[float] = set()

    def walk(obj) -> None:
        if isinstance(obj, paper.Reported):
            found.update({obj.value, round(obj.value * 100, 6)})
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(k, float):
                    found.update({k, round(k * 100, 6)})
                walk(v)
        elif isinstance(obj, tuple):
            for v in obj:
                walk(v)

    for name in dir(paper):
        walk(getattr(paper, name))
    return found


def test_the_papers_numbers_it_quotes_are_helpers_papers():
    """The kit types the paper's numbers in one place (`helpers.paper`); the guide quotes them, and a test is what
    keeps the two the same."""
    segments = re.findall(r"The paper[^|\n]*(?:\n[^|\n]+)*", TEXT) + re.findall(
        r"headline numbers \(([^)]*)\)", TEXT
    )
    numbers = [float(x) for s in segments for x in re.findall(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])", s)]
    assert len(numbers) >= 15, segments
    known = paper_numbers()
    bad = sorted({n for n in numbers if not any(abs(n - k) < 1e-9 for k in known)})
    assert not bad, f"docs/course.md quotes as the paper's numbers that helpers.paper does not hold: {bad}"


def test_the_exercise_times_are_benchmarks_exercises_json():
    """The guide's exercise total and count are `benchmarks/exercises.json`'s, and it cites every commit at which an
    exercise there was measured: re-measuring the exercises updates the json, and this test says the guide must follow."""
    measured = json.loads((ROOT / "benchmarks" / "exercises.json").read_text())["exercises"]
    total = round(sum(e["seconds"] for e in measured.values()))
    claims = re.findall(r"(\d+) s for all (\d+)", TEXT)
    assert len(claims) >= 2, claims
    assert all((int(s), int(n)) == (total, len(measured)) for s, n in claims), (claims, total, len(measured))
    i = TEXT.index("- **Exercises**, from `benchmarks/exercises.json`")
    para = TEXT[i : TEXT.index("\n- ", i + 1)]
    for commit in {e["commit"][:7] for e in measured.values()}:
        assert f"`{commit}`" in para, commit


def plan_rows(heading: str) -> list[dict[str, str]]:
    """The rows of the first table after `heading`, as {column: cell}."""
    lines = TEXT[TEXT.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip("|").split("|")])
    return [dict(zip(table[0], row, strict=True)) for row in table[2:]]


def minutes(cell: str) -> int:
    """`12 min` -> 12."""
    m = re.fullmatch(r"(\d+) min", cell)
    assert m, cell
    return int(m.group(1))


def test_the_90_minute_plan_keeps_slack_and_a_pointer_per_block():
    rows = plan_rows("### The 90-minute lab")
    slack = [r for r in rows if r["block"] == "slack"]
    blocks = [r for r in rows if r["block"] != "slack"]
    assert len(slack) == 1 and minutes(slack[0]["teach"]) >= 10
    assert sum(minutes(r["teach"]) for r in rows) == 90
    assert all(r["read only this"] for r in blocks), [r["block"] for r in blocks if not r["read only this"]]


def test_the_90_minute_plans_compute_times_are_benchmarks_interactive_json():
    bench = json.loads((ROOT / "benchmarks" / "interactive.json").read_text())
    seconds = {nb["notebook"][:2]: nb["seconds"] for nb in bench["notebooks"]}
    total = 0.0
    for r in plan_rows("### The 90-minute lab"):
        numbers = re.findall(r"\b0[0-7]\b", r["notebook"])
        if not numbers:
            assert not r["Run All"], r
            continue
        expected = round(sum(seconds[n] for n in numbers), 1)
        assert r["Run All"] == f"{expected} s", (r["block"], r["Run All"], expected)
        total += expected
    m, s = divmod(round(total), 60)
    assert f"Compute during the lab: {m} min {s} s of Run All" in TEXT
    assert f"`{bench['commit'][:7]}`" in TEXT[TEXT.index("Compute during the lab:") :].split("\n\n")[0]
