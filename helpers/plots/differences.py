"""Paired differences as figures: each comparison's difference with the interval its verdict reads (the t-interval
over the RL seeds' paired differences) and a title that states the finding in words (`finding_title`), for notebooks
02 (`gain_differences`), 03 (`pass_t_differences`), 04 (`matched_differences`) and 05 (`concentration`,
`continuation_differences`)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

import matplotlib.pyplot as plt
import pandas as pd

from helpers.plots.theme import MIN_FONT, _color, _legend_below, _styled, short_label


def _comparison_names(comparison: str) -> tuple[str, str]:
    """`budgetmix - grpo` or `rl_vs_base` -> the plain-word names of its two sides (`BudgetMix`, `GRPO`)."""
    a, b = re.split(r" - |_vs_| vs ", comparison, maxsplit=1)
    return short_label(a.strip()), short_label(b.strip())


def _and(items: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# How a finding is worded (`finding_title`): {a} and {b} are the comparison's two sides.
PHRASES = {"above": "{a} above {b}", "below": "{a} below {b}", "none": "{a} not shown to differ from {b}"}
CONCENTRATION_PHRASES = {
    "above": "{a}: advantage over {b} larger at error states than at matched states",
    "below": "{a}: advantage over {b} smaller at error states than at matched states",
    "none": "{a}: advantage over {b} not shown to differ between error and matched states",
}


def finding_title(
    rows: pd.DataFrame,
    comparison: str,
    where: Callable[[list], str] | None = None,
    phrases: dict | None = None,
) -> str:
    """The finding of one paired comparison in words, from its intervals (`t_low`, `t_high`): where the interval
    lies above 0 the first side is "above" the second, below 0 "below"; where it contains 0 no difference is shown
    (`phrases`: the wording, `PHRASES` by default). `rows` has one row per place (budget, T), its label in column
    `x` (`where` turns a list of labels into words, e.g. " at 25 % and 50 % of T_max"), or a single row without
    `x`."""
    a, b = _comparison_names(comparison)
    words = {k: v.format(a=a, b=b) for k, v in (phrases or PHRASES).items()}
    where = where or (lambda xs: "")
    low, high = "t_low", "t_high"
    xs = list(rows["x"]) if "x" in rows else [None] * len(rows)
    above = [x for x, lo in zip(xs, rows[low], strict=True) if lo > 0]
    below = [x for x, hi in zip(xs, rows[high], strict=True) if hi < 0]
    none = [x for x in xs if x not in above and x not in below]
    parts = []
    if above:
        parts.append(words["above"] + where(above))
    if below:
        parts.append(words["below"] + where(below))
    if none and parts:
        parts.append(f"no difference shown{where(none)}")
    if not parts:
        scope = "every interval" if len(xs) > 1 else "the interval"
        parts.append(f"{words['none']}{where(none)}: {scope} contains 0")
    return "; ".join(parts)


def _where_percent(xs: list) -> str:
    """` at 25 % and 50 % of T_max`."""
    return " at " + _and([f"{float(x):.0%}".replace("%", " %") for x in xs]) + " of T_max"


def _where_t(xs: list) -> str:
    """` at T = 1, 2 and 3`."""
    return " at T = " + _and([str(int(x)) for x in xs])


@_styled
def paired_differences(
    table: pd.DataFrame,
    x: str,
    value: str,
    comparisons: list[str],
    ylabel: str,
    xlabel: str,
    where: Callable[[list], str],
    ci: float = 0.95,
    ticks: Callable[[float], str] = str,
) -> plt.Figure:
    """Per comparison of `comparisons` (rows of `table` with that `comparison`), the paired difference against `x`
    with the verdict's interval (`t_low`, `t_high`: the t-interval over the RL seeds' differences), methods offset
    so they do not hide each other, and a line at 0. The title states each comparison's finding (`finding_title`)."""
    fig, ax = plt.subplots(figsize=(8, 4.8))
    xs = sorted(table[x].unique())
    pos = {v: i for i, v in enumerate(xs)}
    shown = [c for c in comparisons if (table["comparison"] == c).any()]
    lines = []
    markers = "osD^v"
    for i, c in enumerate(shown):
        d = table[table["comparison"] == c].sort_values(x)
        off = (i - (len(shown) - 1) / 2) * 0.12
        a, b = _comparison_names(c)
        ax.errorbar(
            [pos[v] + off for v in d[x]],
            d[value],
            yerr=[d[value] - d["t_low"], d["t_high"] - d[value]],
            fmt=markers[i % len(markers)],
            capsize=4,
            color=_color(re.split(r" - ", c)[0]),
            label=f"{a} minus {b}",
        )
        rows = pd.DataFrame({"x": d[x], "t_low": d["t_low"], "t_high": d["t_high"]})
        lines.append(finding_title(rows, c, where))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(xs)), [ticks(v) for v in xs])
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_title("\n".join(textwrap.fill(t, 70) for t in lines), fontsize=MIN_FONT)
    _legend_below(ax, ncol=1, title=f"error bars: {ci:.0%} t-interval over the RL seeds' paired differences")
    return fig


@_styled
def gain_differences(gains: pd.DataFrame, ci: float = 0.95) -> plt.Figure:
    """Notebook 02: BudgetMix minus GRPO, and each against the sharpened base, by budget (`budgetmix.gain_table`),
    in percentage points with the verdict's interval; the title says where BudgetMix is above GRPO."""
    return paired_differences(
        gains,
        "fraction",
        "gain_points",
        ["budgetmix - grpo", "grpo - sharp", "budgetmix - sharp"],
        "success difference (percentage points)",
        "turn budget (fraction of T_max)",
        _where_percent,
        ci,
        lambda f: f"{f:.0%}",
    )


@_styled
def pass_t_differences(gaps: pd.DataFrame, k: int, ci: float = 0.95) -> plt.Figure:
    """Notebook 03: Pass@(k, T) of GRPO and BudgetMix minus the sharpened base's, by T (`pass_kt.gaps`), in
    percentage points with the verdict's interval."""
    return paired_differences(
        gaps,
        "T",
        "difference",
        ["grpo - sharp", "budgetmix - sharp"],
        f"Pass@{k} difference (percentage points)",
        "turn budget T (turns)",
        _where_t,
        ci,
        lambda t: str(int(t)),
    )


@_styled
def comparison_intervals(rows: pd.DataFrame, ylabel: str, phrases: dict | None = None) -> plt.Figure:
    """One paired difference per comparison (`rows`: index the comparison's name, columns `value`, `t_low`,
    `t_high`, `ci`), each with the verdict's interval, a line at 0, and a title stating each finding
    (`finding_title` with `phrases`)."""
    names = list(rows.index)
    levels = sorted({float(v) for v in rows["ci"]})
    lines = [finding_title(rows.loc[[c]], c, phrases=phrases) for c in names]
    note = (
        f"error bars: {_and([f'{v:.0%}' for v in levels])} t-interval over the RL seeds' paired differences"
    )
    title = "\n".join(textwrap.fill(t, 80) for t in [*lines, note])
    fig, ax = plt.subplots(figsize=(9, 3.6 + 0.3 * (title.count("\n") + 1)))  # room for the title's lines
    for i, c in enumerate(names):
        r = rows.loc[c]
        ax.errorbar(
            [i],
            [r["value"]],
            yerr=[[r["value"] - r["t_low"]], [r["t_high"] - r["value"]]],
            fmt="o",
            capsize=5,
            color=_color(re.split(r" - |_vs_| vs ", c)[0]),
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(
        range(len(names)), [textwrap.fill("{} minus {}".format(*_comparison_names(c)), 22) for c in names]
    )
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=MIN_FONT)
    fig.tight_layout()
    return fig


@_styled
def matched_differences(win: pd.DataFrame, ci: float = 0.95) -> plt.Figure:
    """Notebook 04: the mean step-quality difference at matched live states per comparison (`matched.win_table`),
    with the verdict's interval."""
    rows = (
        pd.DataFrame(
            {"value": win.loc["mean_diff"], "t_low": win.loc["t_low"], "t_high": win.loc["t_high"], "ci": ci}
        )
        .dropna(subset=["t_low", "t_high"])
        .astype(float)
    )
    return comparison_intervals(rows, "mean step-quality difference (oracle quality, 0-1)")


@_styled
def concentration(conc: dict) -> plt.Figure:
    """Notebook 05's central claim: per comparison, RL's win rate at error states minus at matched states
    (`recovery.concentration`), in percentage points, with the verdict's interval (its own level, `paired`)."""
    rows = pd.DataFrame(
        {
            c: {
                "value": 100 * d["paired"]["diff"],
                "t_low": 100 * d["paired"]["low"],
                "t_high": 100 * d["paired"]["high"],
                "ci": d["paired"]["ci_level"],
            }
            for c, d in conc.items()
            if d.get("paired")
        }
    ).T.astype(float)
    return comparison_intervals(
        rows, "win rate at error states minus\nat matched states (percentage points)", CONCENTRATION_PHRASES
    )


@_styled
def continuation_differences(paired: dict) -> plt.Figure:
    """Notebook 05: continuation success from the same error states, each comparison's paired difference
    (`recovery.continuation`'s `paired`: RL minus the base, minus the sharpened base, and the sharpened twins) in
    percentage points, with the verdict's interval: the t-interval over the RL seeds' differences."""
    rows = pd.DataFrame(
        {
            c: {
                "value": 100 * d["diff"],
                "t_low": 100 * d["low"],
                "t_high": 100 * d["high"],
                "ci": d["ci_level"],
            }
            for c, d in paired.items()
            if d
        }
    ).T.astype(float)
    return comparison_intervals(rows, "continuation success difference\n(percentage points)")
