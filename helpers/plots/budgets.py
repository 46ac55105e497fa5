"""Figures of success against the turn budget: the testbed's upper bound and headrooms (notebook 00), success per
budget (02, 07's estimators and the oracle's precision), Pass@(K, T) as curves and as RL-minus-reference heatmaps
(03)."""

from __future__ import annotations

import matplotlib.cm
import matplotlib.colors
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullLocator

from helpers import fmt
from helpers.plots.theme import (
    MIN_FONT,
    PALETTE,
    _algorithm,
    _color,
    _legend_below,
    _legend_right,
    _seeds_tasks,
    _styled,
    interval_note,
    label,
)

# ------------------------------------------------------------------------------------------------ notebook 00


@_styled
def upper_bound(df: pd.DataFrame, t_max: int) -> plt.Figure:
    """Structural upper bound (best success within T turns) against the budget T."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        df["T"], df["upper_bound"], marker="o", color=PALETTE["upper bound"], label="structural upper bound"
    )
    for col, style in (("optimal_player", "--"), ("noisy_player", ":")):
        if col in df:
            ax.plot(df["T"], df[col], linestyle=style, marker=".", label=col.replace("_", " "))
    ax.axvline(t_max, color="k", lw=0.8, alpha=0.4)
    ax.set(
        xlabel="turn budget T", ylabel="success probability", ylim=(-0.02, 1.02), title="FrozenLake test maps"
    )
    _legend_right(ax)
    return fig


@_styled
def testbed(curve: pd.DataFrame, t_max: int) -> plt.Figure:
    """Left: success within T turns of the budget-aware optimum (the structural upper bound), the best budget-blind
    policy for T_max, the greedy habit, the demonstrator and the base (in the context it plays in, with its
    interval, and in the one-turn context). Right: the three headrooms stacked (noise, habit, budget awareness),
    which sum to the optimum minus the demonstrator."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.6, 1]})
    ax1.plot(
        curve["T"], curve["upper_bound"], "o-", color=PALETTE["upper bound"], label="budget-aware optimum"
    )
    ax1.plot(
        curve["T"], curve["blind_t_max"], "s--", color="#555555", label="best budget-blind policy for T_max"
    )
    ax1.plot(curve["T"], curve["greedy_habit"], "v:", color="#7f7f7f", label="greedy habit")
    ax1.plot(curve["T"], curve["demonstrator"], "^:", color="#8c564b", label="demonstrator")
    base = curve.dropna(subset=["base"])
    if len(base):
        ax1.errorbar(
            base["T"],
            base["base"],
            yerr=[base["base"] - base["base_low"], base["base_high"] - base["base"]],
            fmt="D-",
            color=PALETTE["base"],
            capsize=3,
            label="base (whole conversation)",
        )
        ax1.plot(
            base["T"], base["base_last_turn"], "x:", color=PALETTE["base"], label="base (last turn only)"
        )
    ax1.axvline(t_max, color="k", lw=0.8, alpha=0.3)
    ax1.set(xlabel="turn budget T", ylabel="success within T turns", ylim=(0, 1), title="test maps")
    _legend_below(ax1, ncol=2)
    bottom = np.zeros(len(curve))
    for column, text, color in (
        ("noise_points", "noise", "#c7c7c7"),
        ("habit_points", "habit", "#7f7f7f"),
        ("budget_awareness_points", "budget awareness", PALETTE["upper bound"]),
    ):
        ax2.bar(curve["T"], curve[column], bottom=bottom, color=color, label=text)
        bottom = bottom + curve[column].to_numpy()
    ax2.axhline(0, color="k", lw=0.6)
    ax2.set(xlabel="turn budget T", ylabel="points", title="headrooms (exact)")
    _legend_below(ax2, ncol=1)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------ notebook 02


@_styled
def budget_bars(table: pd.DataFrame, upper: dict | None = None, ci: float = 0.95) -> plt.Figure:
    """Grouped bars: success per budget (fraction of T_max) per model, with confidence intervals.

    `table` has columns model, fraction, budget, success, low, high (and n_seeds, n_tasks from
    `metrics.method_summary`: the legend and title say what the error bars resampled).
    """
    fig, ax = plt.subplots(figsize=(9, 4.6))
    order = list(PALETTE)
    names = sorted(dict.fromkeys(table["model"]), key=lambda n: order.index(n) if n in order else len(order))
    fracs = sorted(table["fraction"].unique())
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        d = table[table["model"] == name].set_index("fraction").loc[fracs]
        x = [j + (i - (len(names) - 1) / 2) * width for j in range(len(fracs))]
        n = int(d["n_seeds"].iloc[0]) if "n_seeds" in d else 1
        text = f"{label(name)} ({n} seeds)" if n > 1 else label(name)
        ax.bar(
            x,
            d["success"],
            width,
            label=text,
            color=_color(name),
            yerr=[d["success"] - d["low"], d["high"] - d["success"]],
            capsize=3,
        )
    if upper:
        ax.scatter(
            range(len(fracs)),
            [upper[f] for f in fracs],
            marker="_",
            s=600,
            color="k",
            zorder=3,
            label="structural upper bound",
        )
    budgets = table.drop_duplicates("fraction").set_index("fraction").loc[fracs, "budget"]
    ax.set_xticks(range(len(fracs)), [f"{f:.0%}\n(T={b})" for f, b in zip(fracs, budgets, strict=True)])
    ax.set(xlabel="turn budget (fraction of T_max)", ylabel="success rate", ylim=(0, 1.05))
    ax.set_title(f"error bars: {interval_note(ci, _seeds_tasks(table))}", fontsize=MIN_FONT)
    _legend_below(ax, ncol=2)
    return fig


# ------------------------------------------------------------------------------------------------ notebook 03


def _log2_k_axis(ax: plt.Axes, ks: list[int]) -> None:
    """K on a log2 axis, ticked at the plotted K that are powers of two (and the largest), as plain integers."""
    ks = sorted({int(k) for k in ks})
    ticks = [k for k in ks if k & (k - 1) == 0]
    if ks and ks[-1] not in ticks:
        ticks.append(ks[-1])
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(ks[0] / 1.25, ks[-1] * 1.25)


@_styled
def pass_at_k_curves(table: pd.DataFrame, upper: dict | None = None, ci: float = 0.95) -> plt.Figure:
    """Pass@K against K (log2 axis), one panel per budget T, one line per model, with its interval as a band where
    `table` has columns low and high (`metrics.method_summary` per K: over RL seeds and tasks), and the structural
    upper bound of Pass@(K, T) as a dashed line: `upper[T][K]`, what K tries of the best policy reach."""
    Ts = sorted(table["T"].unique())
    cols = min(4, len(Ts))
    rows = -(-len(Ts) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 3.2 * rows + 0.6), sharey=True, squeeze=False)
    has_band = {"low", "high"} <= set(table.columns)
    for ax, T in zip(axes.flat, Ts, strict=False):
        d = table[table["T"] == T].sort_values("K")
        for name, g in d.groupby("model", sort=False):
            ax.plot(g["K"], g["pass"], label=label(name), color=_color(name))
            if has_band:
                ax.fill_between(g["K"], g["low"], g["high"], color=_color(name), alpha=0.15, lw=0)
        if upper and upper.get(T):
            ks = sorted(upper[T])
            ax.plot(ks, [upper[T][K] for K in ks], color="k", ls="--", lw=0.8, label="structural upper bound")
        _log2_k_axis(ax, list(d["K"]))
        ax.set(title=f"T = {T}", xlabel="K", ylim=(0, 1.02))
    for ax in axes.flat[len(Ts) :]:
        ax.axis("off")
    for row in axes:
        row[0].set_ylabel("Pass@(K, T)")
    handles, texts = axes[0, 0].get_legend_handles_labels()
    ncol = min(len(texts), 3)
    fig.legend(
        handles,
        texts,
        frameon=False,
        fontsize=MIN_FONT,
        loc="lower center",
        ncol=ncol,
        bbox_to_anchor=(0.5, 0),
    )
    if has_band:
        fig.suptitle(f"Pass@(K, T); bands: {interval_note(ci, _seeds_tasks(table))}", fontsize=MIN_FONT)
    legend_in = 0.3 * -(-len(texts) // ncol) + 0.2  # the legend's height below the panels, in inches
    fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1))
    return fig


@_styled
def pass_at_t_curves(
    table: pd.DataFrame, upper: dict | None = None, k: int = 8, ci: float = 0.95
) -> plt.Figure:
    """Pass@T = Pass@(K=k, T) against T per model, with bootstrap intervals and the structural upper bound.

    `table` has columns model, T, pass, low, high (and n_seeds, n_tasks from `metrics.method_summary`).
    """
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for name, g in table.groupby("model", sort=False):
        ax.plot(g["T"], g["pass"], marker="o", label=label(name), color=_color(name))
        ax.fill_between(g["T"], g["low"], g["high"], alpha=0.15, color=_color(name))
    if upper:
        Ts = sorted(upper)
        ax.plot(Ts, [upper[T] for T in Ts], "k--", lw=1, label="structural upper bound")
    ax.set(xlabel="turn budget T", ylabel=f"Pass@(K={k}, T)", ylim=(0, 1.02))
    ax.set_title(f"bands: {interval_note(ci, _seeds_tasks(table))}", fontsize=MIN_FONT)
    _legend_right(ax)
    return fig


def shared_limit(frames: list[pd.DataFrame]) -> float:
    """One symmetric colour limit for several heatmaps: the largest absolute value over all of them (at least 1)."""
    vals = [
        float(np.nanmax(np.abs(f.to_numpy()))) for f in frames if f.size and np.isfinite(f.to_numpy()).any()
    ]
    return max([1.0, *vals])


@_styled
def gap_heatmap(
    diff: pd.DataFrame,
    title: str,
    significant: pd.DataFrame | None = None,
    ci: float = 0.95,
    lim: float | None = None,
) -> plt.Figure:
    """RL minus base over (K, T), in percentage points (rows T, columns K). Annotations are whole points, a value
    that rounds to zero printed as 0; with `significant` (a boolean frame of the same shape: the difference's
    interval excludes 0) those cells are starred and the title says so. `lim` (points) fixes the colour scale at
    [-lim, +lim], so that comparable heatmaps share one scale (`shared_limit`); by default it is this one's largest
    absolute value."""
    fig, ax = plt.subplots(figsize=(8, 4.4))
    lim = shared_limit([diff]) if lim is None else lim
    annot = diff.shape[1] <= 16
    labels = diff.map(lambda v: fmt.number(v, 0))
    if significant is not None:
        star = significant.reindex(index=diff.index, columns=diff.columns).fillna(False).astype(bool)
        labels = labels.where(~star, labels + "*")
        title = f"{title}\n* {ci:.0%} interval (RL seeds × tasks) excludes 0"
    sns.heatmap(
        diff,
        ax=ax,
        cmap="RdBu",
        center=0,
        vmin=-lim,
        vmax=lim,
        annot=labels.to_numpy() if annot else False,
        fmt="",
        annot_kws={"fontsize": MIN_FONT},
        cbar_kws={"label": "points"},
    )
    ax.set(title=title, xlabel="K (trajectories sampled)", ylabel="T (turn budget)")
    ax.invert_yaxis()
    return fig


@_styled
def gap_heatmaps(
    diffs: dict[str, pd.DataFrame], significant: dict[str, pd.DataFrame] | None = None, ci: float = 0.95
) -> plt.Figure:
    """Several RL-minus-reference heatmaps over (K, T) side by side (`diffs`: {panel title: T x K, in points}),
    on one colour scale (`shared_limit`) with one colourbar, so that equal colours mean equal gaps in every panel;
    cells whose interval excludes 0 (`significant`, same keys) are starred."""
    lim = shared_limit(list(diffs.values()))
    n = len(diffs)
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n + 1.2, 4.8), squeeze=False, sharey=True)
    cmap = "RdBu"
    for ax, (title, diff) in zip(axes[0], diffs.items(), strict=True):
        cells = diff.map(lambda v: fmt.number(v, 0))
        sig = (significant or {}).get(title)
        if sig is not None:
            star = sig.reindex(index=diff.index, columns=diff.columns).fillna(False).astype(bool)
            cells = cells.where(~star, cells + "*")
        annot = cells.to_numpy() if diff.shape[1] <= 16 else False
        sns.heatmap(
            diff,
            ax=ax,
            cmap=cmap,
            center=0,
            vmin=-lim,
            vmax=lim,
            annot=annot,
            fmt="",
            cbar=False,
            annot_kws={"fontsize": MIN_FONT},
        )
        ax.set(title=title, xlabel="K (trajectories sampled)", ylabel="")
        ax.invert_yaxis()
    axes[0, 0].set_ylabel("T (turn budget)")
    mappable = matplotlib.cm.ScalarMappable(norm=matplotlib.colors.Normalize(-lim, lim), cmap=cmap)
    fig.colorbar(mappable, ax=list(axes[0]), label="Pass@(K, T) difference (points)", fraction=0.03, pad=0.02)
    note = "one colour scale for all panels"
    if significant is not None:
        note += f"; * {ci:.0%} interval (RL seeds × tasks) excludes 0"
    fig.suptitle(note, fontsize=MIN_FONT)
    return fig


# ------------------------------------------------------------------------------------------------ notebook 07


@_styled
def budget_lines(table: pd.DataFrame, upper: dict | None = None, ci: float = 0.95) -> plt.Figure:
    """Success against the budget (fraction of T_max) per estimator, one panel per budget mode (full budget,
    BudgetMix), each point with its interval; the structural upper bound dashed. `table` has columns method,
    fraction, success, low, high (`helpers.supervision.success_table`); corrupted-oracle methods are left out."""
    t = table[~table["method"].str.contains("@")]
    panels = [
        ("full budget", t[~t["method"].str.contains("+", regex=False)]),
        ("BudgetMix", t[t["method"].str.contains("+budgetmix", regex=False)]),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, (title, d) in zip(axes, panels, strict=True):
        names = list(dict.fromkeys(d["method"]))
        for i, name in enumerate(names):
            g = d[d["method"] == name].sort_values("fraction")
            x = (
                g["fraction"] + (i - (len(names) - 1) / 2) * 0.008
            )  # a small offset so intervals do not overlap
            ax.errorbar(
                x,
                g["success"],
                yerr=[g["success"] - g["low"], g["high"] - g["success"]],
                fmt="o-",
                capsize=3,
                color=PALETTE.get(_algorithm(name)),
                label=label(_algorithm(name)),
            )
        if upper:
            fr = sorted(upper)
            ax.plot(fr, [upper[f] for f in fr], "k--", lw=1, label="structural upper bound")
        ax.set(title=title, xlabel="turn budget (fraction of T_max)", ylim=(0, 1.02))
        ax.set_xticks(sorted(t["fraction"].unique()), [f"{f:.0%}" for f in sorted(t["fraction"].unique())])
    axes[0].set_ylabel("success rate")
    _legend_below(axes[0], ncol=2)
    fig.suptitle(f"error bars: {interval_note(ci, _seeds_tasks(t))}", fontsize=MIN_FONT)
    fig.tight_layout()
    return fig


@_styled
def precision_curve(
    precision: pd.DataFrame, reference: pd.DataFrame | None = None, ci: float = 0.95
) -> plt.Figure:
    """Success at each budget against the oracle's corruption level (0 = exact, 1 = every state's action values
    shuffled), one line per budget with intervals; `reference` (method, fraction, success rows of the estimator
    without the process term, GRPO; with low and high its interval as a faint band) as dashed lines of the same
    colours."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colours = sns.color_palette("viridis", n_colors=precision["fraction"].nunique())
    for colour, (f, g) in zip(colours, precision.groupby("fraction"), strict=True):
        g = g.sort_values("level")
        ax.errorbar(
            g["level"],
            g["success"],
            yerr=[g["success"] - g["low"], g["high"] - g["success"]],
            fmt="o-",
            capsize=3,
            color=colour,
            label=f"{f:.0%} of T_max",
        )
        if reference is not None:
            r = reference[reference["fraction"] == f]
            if len(r):
                ax.axhline(float(r["success"].iloc[0]), color=colour, ls="--", lw=1)
                if {"low", "high"} <= set(r.columns):
                    ax.axhspan(
                        float(r["low"].iloc[0]), float(r["high"].iloc[0]), color=colour, alpha=0.07, lw=0
                    )
    what = _seeds_tasks(reference) if reference is not None and "n_tasks" in reference else "RL seeds × tasks"
    ax.set(
        xlabel="oracle corruption (share of states with shuffled action values)",
        ylabel="success rate",
        ylim=(0, 1.02),
    )
    ax.set_title(
        f"oracle-Q: how precise must the step signal be?\nerror bars and bands: {interval_note(ci, what)}",
        fontsize=MIN_FONT,
    )
    _legend_right(ax, title="budget (dashed: GRPO)")
    fig.tight_layout()
    return fig
