"""The turn budget: how it is worded for the agent, and how BudgetMix samples it.

The paper tells the agent its total and remaining turn budget every turn; `statement` is the one place that
words it, so every environment says it the same way. BudgetMix RL draws one budget per task group from
candidates at 10 % steps of T_max (unique values), uniformly.

The budget modes of RL are defined here once: `full` gives every task group T_max, `budgetmix` a draw; nothing else
differs. The single-process loop draws a step's budgets from the step's generator (`task_budgets`); the TRL path
draws each group's from a generator seeded by sha256(profile seed, task id, trainer step) (`group_budget`), so every
process that holds samples of a group draws the same budget.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

BUDGETMIX_FRACTIONS = tuple(round(0.1 * i, 1) for i in range(1, 11))
BUDGET_MODES = ("full", "budgetmix")


def statement(total: int, remaining: int) -> str:
    """The budget line the agent sees, e.g. 'Turns left: 7 of 10.'"""
    if total < 1 or not 0 <= remaining <= total:
        raise ValueError(f"budget: remaining={remaining} must lie in [0, total={total}] with total >= 1")
    return f"Turns left: {remaining} of {total}."


def round_half_up(x: float) -> int:
    """Round x.5 up (Python's round() rounds half to even, which would make 2.5 -> 2 but 3.5 -> 4)."""
    return math.floor(x + 0.5)


def budget_at(fraction: float, t_max: int) -> int:
    """The budget at a fraction of T_max: max(1, round_half_up(fraction * T_max))."""
    if not 0 < fraction <= 1:
        raise ValueError(f"budget fraction {fraction} must lie in (0, 1]")
    return max(1, round_half_up(fraction * t_max))


def budgetmix_candidates(t_max: int) -> list[int]:
    """Sorted unique max(1, round(f * T_max)) for f = 0.1, 0.2, ..., 1.0."""
    if t_max < 1:
        raise ValueError(f"t_max={t_max} must be at least 1")
    return sorted({budget_at(f, t_max) for f in BUDGETMIX_FRACTIONS})


def sample_budgets(t_max: int, n_groups: int, rng: np.random.Generator) -> list[int]:
    """One budget per task group, drawn uniformly from the BudgetMix candidates."""
    cands = budgetmix_candidates(t_max)
    return [int(cands[i]) for i in rng.integers(0, len(cands), size=n_groups)]


def check_mode(mode: str) -> None:
    """Fail with a message naming the modes when `mode` is not a budget mode."""
    if mode not in BUDGET_MODES:
        raise ValueError(f"budget mode must be one of {BUDGET_MODES}, got {mode!r}")


def step_budgets(mode: str, t_max: int, n_groups: int, rng: np.random.Generator) -> list[int]:
    """One budget per task group: T_max (`full`) or a BudgetMix draw (`budgetmix`)."""
    check_mode(mode)
    if mode == "full":
        return [t_max] * n_groups
    return sample_budgets(t_max, n_groups, rng)


def task_budgets(mode: str, t_maxes: list[int], rng: np.random.Generator) -> list[int]:
    """One budget per task group from each task's own T_max (tasks of BFCL, say, differ in T_max)."""
    if len(set(t_maxes)) == 1:
        return step_budgets(mode, t_maxes[0], len(t_maxes), rng)
    return [step_budgets(mode, t, 1, rng)[0] for t in t_maxes]


def group_seed(seed: int, task_id: str, step: int) -> int:
    """The seed of one task group's budget draw: the same in every process (sha256, not Python's hash())."""
    digest = hashlib.sha256(f"budgetmix|{seed}|{task_id}|{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def group_budget(mode: str, task, seed: int, step: int) -> int:
    """The budget of `task`'s group at trainer step `step`, from its own generator (`group_seed`)."""
    return step_budgets(mode, task.t_max, 1, np.random.default_rng(group_seed(seed, task.task_id, step)))[0]


def fraction_cells(tasks: list, fractions: list[float]) -> dict[tuple[float, int], list]:
    """The evaluation cells of `tasks` at `fractions` of each task's own T_max: (fraction, budget) -> tasks.

    Where every task has the same T_max there is one cell per fraction; tasks whose T_max differ (BFCL) get their
    own budget at the same fraction, so a fraction can hold several cells."""
    cells: dict[tuple[float, int], list] = {}
    for f in fractions:
        for t in tasks:
            cells.setdefault((float(f), budget_at(f, t.t_max)), []).append(t)
    return cells


def budget_label(cells: dict[tuple[float, int], list]) -> dict[float, str]:
    """Each fraction's budget in words: `4`, or `2-14` where the tasks' T_max differ."""
    by_f: dict[float, list[int]] = {}
    for f, b in cells:
        by_f.setdefault(f, []).append(b)
    return {f: str(min(bs)) if len(set(bs)) == 1 else f"{min(bs)}-{max(bs)}" for f, bs in by_f.items()}
