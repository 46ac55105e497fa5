"""The exercises' generated answers (helpers.exercises.answers) and what their texts may claim about the run.

Every change-and-run exercise has an answer computed by its own snippet on the committed run (`answers.json`, for
its current code); the cheap ones (measured under 1 s by benchmarks/exercises.py) are recomputed here, so an answer
that drifts from what its code gives on the committed results fails. The exercise texts must not name a seed count,
a budget or a verdict that the committed run (its config and metrics.json) contradicts, and every exercise has a
runtime measured for its current code."""

from __future__ import annotations

import re

import pytest

from helpers import config, exercises, store
from helpers.config import REPO_ROOT
from helpers.exercises import answers

REFRESH = "stale: .venv/bin/python -m helpers.exercises --write-answers"
CHEAP_SECONDS = 1.0
NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    )
}
CHANGE_AND_RUN = [e for e in exercises.EXERCISES if not exercises.is_implement(e)]


def _cheap() -> list[str]:
    """Change-and-run exercises measured under CHEAP_SECONDS for their current code."""
    measured = exercises.timings().get("exercises", {})
    return [
        e.key
        for e in CHANGE_AND_RUN
        if e.key in measured
        and measured[e.key]["code"] == e.digest
        and measured[e.key]["seconds"] < CHEAP_SECONDS
    ]


def _texts() -> dict[str, str]:
    """Every exercise's text fields, and the instructors' solutions file."""
    out = {f"{e.key}.{f}": getattr(e, f) for e in exercises.EXERCISES for f in ("title", "change", "predict")}
    out |= {f"{e.key}.look_for": e.look_for for e in exercises.EXERCISES}
    out["docs/solutions.md"] = exercises.SOLUTIONS.read_text()
    return out


def test_every_change_and_run_exercise_has_a_generated_answer_with_numbers():
    stored = exercises.stored_answers()
    assert set(stored) == {e.key for e in CHANGE_AND_RUN}, REFRESH
    for e in CHANGE_AND_RUN:
        text = exercises.answer(e, stored)
        assert text is not None, f"{e.key}: answer computed for other code; {REFRESH}"
        assert re.search(r"\d", text) and text != e.look_for, e.key


def test_cheap_exercises_are_most_of_those_that_read_the_run():
    assert len(_cheap()) >= 10  # the drift test below covers them; the slow ones retrain or roll out models


@pytest.fixture
def committed_results(monkeypatch):
    """Read the committed run (never written: the snippets write nothing, tests/test_exercises.py checks)."""
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))


@pytest.mark.parametrize("key", _cheap())
def test_stored_answer_is_what_its_code_gives_on_the_committed_run(key, committed_results):
    assert answers.compute(key) == exercises.stored_answers()[key]["answer"], f"{key}: {REFRESH}"


def test_section_and_solutions_show_the_generated_answer_collapsed():
    for e in CHANGE_AND_RUN:
        text = exercises.section(e.notebook)
        block = text.split(f"### {e.key} ")[1].split("\n### ")[0]
        got = exercises.answer(e)
        opened = block.index(f"<summary>{exercises.SUMMARY}</summary>")
        assert opened < block.index(got) < block.index("</details>", opened), e.key
        assert got in exercises.solutions()


def test_section_says_when_an_answer_was_computed_for_other_code():
    e = CHANGE_AND_RUN[0]
    text = exercises.section(e.notebook)
    assert "not generated for this code yet" not in text
    assert exercises.answer(e, {e.key: {"code": "other", "answer": "1.0"}}) is None


def test_texts_name_no_seed_count_but_the_runs():
    n_seeds = len(config.load("cpu").train.seeds)
    pattern = re.compile(r"\b(\w+)[- ](?:RL[- ])?seeds?\b|\b(\w+) per-seed values", re.IGNORECASE)
    for where, text in _texts().items():
        for m in pattern.finditer(text):
            word = (m.group(1) or m.group(2)).lower()
            count = NUMBER_WORDS.get(word, int(word) if word.isdigit() else None)
            if count is None or count == 1:  # "one RL seed" is a design, not the run's count
                continue
            assert count == n_seeds, f"{where}: {m.group(0)!r}, but the run has {n_seeds} RL seeds"


def test_texts_name_only_budgets_the_run_evaluates():
    fractions = {round(100 * f) for f in config.load("cpu").eval.budget_fractions}
    for where, text in _texts().items():
        if where.startswith("02a") or where.startswith("02d") or where == "docs/solutions.md":
            continue  # BudgetMix's training draw (10 %, ..., 100 %), not an evaluated budget
        for m in re.finditer(r"(\d+) % of T_max", text):
            assert int(m.group(1)) in fractions, f"{where}: {m.group(0)!r} is not an evaluated budget"


VERDICTS = {  # a claim about BudgetMix minus GRPO, and whether it holds given each budget's paired verdict
    r"within noise at every budget": lambda excl: not any(excl),
    r"(significant|beyond noise) at every budget": all,
    r"no budget": lambda excl: not any(excl),
}


def test_texts_claim_no_verdict_the_committed_run_contradicts(committed_results):
    paired = store.Run.read_metrics("cpu", "02_budgetmix_training")["gains_paired"]["budgetmix - grpo"]
    excludes = [v["excludes_zero"] for v in paired.values()]
    for where, text in _texts().items():
        for claim, holds in VERDICTS.items():
            if re.search(claim, text, re.IGNORECASE):
                assert holds(excludes), f"{where} says {claim!r}; the run's paired verdicts: {excludes}"


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_every_exercise_has_a_runtime_measured_for_its_current_code(ex):
    assert not exercises.runtime(ex, exercises.timings()).startswith("not measured"), (
        f"{ex.key}: nice -n 10 .venv/bin/python benchmarks/exercises.py --only {ex.key}"
    )
