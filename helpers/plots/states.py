"""Figures of states and actions: step quality at matched live states and RL's win rate by depth (notebook 04), the
next action and the continuation after an injected error (05), and the base's likelihood of RL's actions (06)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator

from helpers.plots.theme import (
    MIN_FONT,
    PALETTE,
    _color,
    _legend_below,
    _styled,
    _wrapped,
    interval_note,
    label,
    short_label,
)


def _side_by_side(ax: plt.Axes, series: list[tuple[str, str | None, np.ndarray]], bins: np.ndarray) -> None:
    """Histograms of several samples ((legend text, colour, values)) on the same bins, drawn as bars side by side
    within each bin, so that none hides another."""
    width = np.diff(bins) / (len(series) + 0.5)
    for i, (text, colour, v) in enumerate(series):
        counts, _ = np.histogram(v[~np.isnan(v)], bins=bins)
        ax.bar(bins[:-1] + width * (i + 0.25), counts, width=width, align="edge", color=colour, label=text)


@_styled
def quality_distributions(
    per_state: pd.DataFrame, names: tuple[str, ...] = ("base", "sharp", "rl")
) -> plt.Figure:
    """Per-state mean step quality of each policy (left) and RL minus base / RL minus sharpened base (right), as
    bars side by side within each bin (not overlapping); the titles give the number of states."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6))
    n = f"n = {len(per_state)} live states"
    if "rl_seed" in per_state:
        n += f" ({per_state['rl_seed'].nunique()} RL seeds pooled)"
    shown = [(label(m), _color(m), per_state[m].astype(float).to_numpy()) for m in names if m in per_state]
    _side_by_side(ax1, shown, np.linspace(0, 1, 11))
    ax1.set(xlabel="mean step quality at the state (normalised Q*)", ylabel="states", title=n)
    ax1.legend(frameon=False, loc="upper left")
    diffs = [
        (f"RL minus {label(o)}", _color(o), (per_state["rl"] - per_state[o]).astype(float).to_numpy())
        for o in ("base", "sharp")
        if o in per_state
    ]
    if diffs:
        top = max(float(np.nanmax(np.abs(d))) for _, _, d in diffs) or 1.0
        _side_by_side(ax2, diffs, np.linspace(-top, top, 17))
    ax2.axvline(0, color="k", lw=1.2, ls="--", label="0 (no difference)")
    ax2.set(xlabel="RL's mean quality minus the other's", ylabel="states", title=n)
    ax2.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    return fig


@_styled
def win_rate_by_depth(
    depth: pd.DataFrame,
    a: str = "rl",
    b: str = "base",
    intervals: pd.DataFrame | None = None,
    ci: float = 0.95,
    reference: float | None = None,
) -> plt.Figure:
    """Stacked fractions of live states where `a` is better / tied / worse than `b`, per bin of normalised depth
    d_t, with the number of live (and dead) states under each bar; with `intervals` (`matched.depth_win_intervals`) an
    error bar on the fraction where `a` is better (a different estimator from the bars: the mean over seeds of each
    seed's fraction, where the bars pool the states of all seeds; the legend says which is which). A dashed line
    marks 50 %, and `reference` (the paper's overall fraction where RL is better) a dotted one."""
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    x = range(len(depth))
    ax.bar(
        x,
        depth[f"{a}_better"],
        color=PALETTE["grpo"],
        label=f"{label(a)} better (states of all seeds pooled)",
    )
    ax.bar(x, depth["tie"], bottom=depth[f"{a}_better"], color="#dddddd", label="tie")
    ax.bar(
        x,
        depth[f"{b}_better"],
        bottom=depth[f"{a}_better"] + depth["tie"],
        color=PALETTE["base"],
        label=f"{label(b)} better",
    )
    if intervals is not None and len(intervals):
        iv = intervals.set_index("depth_bin").reindex(depth["depth_bin"])
        ax.errorbar(
            list(x),
            iv["better"],
            yerr=[iv["better"] - iv["low"], iv["high"] - iv["better"]],
            fmt="o",
            ms=3,
            color="k",
            capsize=4,
            label=f"{label(a)} better: mean over seeds,\n{ci:.0%} interval (seeds, states)",
        )
    ax.axhline(0.5, color="k", ls="--", lw=1.2, label="50 % (as often better as not)")
    if reference is not None:
        ax.axhline(
            reference,
            color="k",
            ls=":",
            lw=1.5,
            label=f"paper (all depths): {label(a)} better at {reference:.1%}",
        )
    labels = [
        f"{d}\nn = {n}\n(+{k} dead)"
        for d, n, k in zip(depth["depth_bin"], depth["n_live"], depth["n_dead"], strict=True)
    ]
    ax.set_xticks(list(x), labels, fontsize=MIN_FONT)
    ax.set(xlabel="normalised depth d_t = t / T_max", ylabel="fraction of live states", ylim=(0, 1))
    ax.legend(frameon=False, fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


@_styled
def error_recovery(
    superior: dict,
    continuation: pd.DataFrame,
    ci: float = 0.95,
    reference: float | None = None,
    reference_continuation: dict[str, float] | None = None,
) -> plt.Figure:
    """Left: at error states, how often RL's next action beats the base's and the sharpened base's (mean over
    seeds, interval over seeds and states), beside 50 % and the paper's fraction (`reference`, over the RL-vs-base
    bar). Right: continuation success per policy with its interval, beside the structural upper bound of the same
    states and the paper's values (`reference_continuation`: {model: success}). Titles give the number of states
    and what the intervals are."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    keys = [k for k in ("rl_vs_base", "rl_vs_sharp", "sharp_vs_base") if k in superior]
    vals = [superior[k]["better"] for k in keys]
    err = [
        [v - superior[k]["better_ci"][0] for k, v in zip(keys, vals, strict=True)],
        [superior[k]["better_ci"][1] - v for k, v in zip(keys, vals, strict=True)],
    ]
    pairs = [k.split("_vs_") for k in keys]
    names = [f"{_wrapped(a)}\nbetter than\n{_wrapped(b)}" for a, b in pairs]
    # the bar takes the colour of what RL is compared with; a comparison without RL is hatched
    bars = ax1.bar(names, vals, yerr=err, capsize=4, color=[_color(b) for _, b in pairs])
    for bar, (a, _) in zip(bars, pairs, strict=True):
        if a != "rl":
            bar.set(hatch="//", edgecolor="white")
    ax1.axhline(0.5, color="k", ls="--", lw=1.2, label="50 % (as often better as not)")
    if reference is not None and "rl_vs_base" in keys:
        i = keys.index("rl_vs_base")
        ax1.plot(
            [i - 0.45, i + 0.45],
            [reference] * 2,
            color="k",
            ls=":",
            lw=2.5,
            label=f"paper: RL better than the base at {reference:.1%}",
        )
    ax1.legend(frameon=False, fontsize=MIN_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.32))
    n_live = sum(superior.get("n_states_per_seed", [])) - sum(superior.get("n_dead_per_seed", []))
    seeds = superior.get("n_seeds")
    where = f"n = {n_live} live error states, {seeds} seeds" if seeds else "live error states"
    ax1.set(ylabel="fraction of live error states", ylim=(0, 1))
    ax1.set_title(
        f"next action after an injected error\n{where}; {ci:.0%} interval (seeds, states)", fontsize=MIN_FONT
    )
    d = continuation.set_index("model")
    ax2.bar(
        [_wrapped(m) for m in d.index],
        d["success"],
        color=[_color(m) for m in d.index],
        yerr=[d["success"] - d["low"], d["high"] - d["success"]],
        capsize=4,
    )
    if "upper_bound" in d:
        ax2.axhline(
            float(d["upper_bound"].iloc[0]), color="k", ls="--", lw=1.2, label="structural upper bound"
        )
    marked = [(i, m) for i, m in enumerate(d.index) if m in (reference_continuation or {})]
    for j, (i, m) in enumerate(marked):
        ax2.plot(
            [i - 0.45, i + 0.45],
            [reference_continuation[m]] * 2,
            color="k",
            ls=":",
            lw=2.5,
            label="paper's continuation success" if j == 0 else None,
        )
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(frameon=False, fontsize=MIN_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.32))
    n = ""
    if "n_states" in d:
        n = f"n = {int(d['n_states'].iloc[0])} error states"
        if "n_continuations" in d:
            n += f" x {int(d['n_continuations'].iloc[0])} continuations"
        n += "; "
    ax2.set(ylabel="success from the error state", ylim=(0, 1))
    ax2.set_title(
        f"continuation with the remaining budget\n{n}{ci:.0%} interval (seeds, states)", fontsize=MIN_FONT
    )
    fig.tight_layout()
    return fig


@_styled
def nll_histograms(nll: pd.DataFrame, quantile: float = 0.99) -> plt.Figure:
    """Overlapping histograms of per-token action NLL under the base policy, for RL and base actions. The axis
    ends at the `quantile` of all values; the values above it are counted in a hatched overflow bin at the right
    end, and the title and legend say how many there are."""
    fig, ax = plt.subplots(figsize=(8, 4.6))
    values = nll["nll_mean"].astype(float)
    hi = float(values.quantile(quantile)) or 1.0
    w = hi / 40
    over = values > hi
    edges = [hi * i / 40 for i in range(41)]
    if over.any():
        edges.append(hi + 2 * w)  # the overflow bin
    for name, g in nll.groupby("actions_of"):
        v = g["nll_mean"].astype(float).to_numpy()
        k = int((v > hi).sum())
        shown = np.where(v > hi, hi + w, np.minimum(v, np.nextafter(hi, 0)))
        text = f"{short_label(name)} actions (n={len(v)}" + (f", {k} > {hi:.2f}" if over.any() else "") + ")"
        _, _, patches = ax.hist(
            shown,
            bins=edges,
            alpha=0.55,
            density=True,
            label=text,
            color=_color("grpo" if name == "rl" else name),
        )
        if over.any():
            patches[-1].set(hatch="///", edgecolor="k", linewidth=0.5)
    if over.any():
        ticks = [t for t in ax.get_xticks() if 0 <= t <= hi * 0.9]
        ax.set_xticks([*ticks, hi + w], [f"{t:g}" for t in ticks] + [f"> {hi:.2f}"])
        ax.axvline(hi, color="k", lw=0.6, ls=":")
        title = f"{int(over.sum())} of {len(values)} values above {hi:.2f} nats in the hatched overflow bin"
    else:
        title = f"all {len(values)} values shown"
    ax.set_xlim(0, edges[-1])
    ax.set(xlabel="per-token NLL under the base policy (nats)", ylabel="density")
    ax.set_title(title, fontsize=MIN_FONT)
    _legend_below(ax, ncol=1)
    return fig


@_styled
def llr_curves(summary: pd.DataFrame, ci: float = 0.95, min_n: int = 10) -> plt.Figure:
    """Mean cumulative log-likelihood ratio log pi_RL - log pi_base against the turn, per trajectory source, over
    the trajectories still running at each turn, with its bootstrap interval (`summary`: `llr.by_turn`); below, n
    per turn. Turns with fewer than `min_n` trajectories are drawn as hollow markers without an interval."""
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    for name, m in summary.groupby("trajectories_of", sort=False):
        c = _color("grpo" if name == "rl" else name)
        ok = m["n"] >= min_n
        ax.plot(m["turn"], m["mean"], color=c, lw=1, ls=":")
        ax.plot(
            m.loc[ok, "turn"],
            m.loc[ok, "mean"],
            marker="o",
            color=c,
            label=f"successful {short_label(name)} trajectories",
        )
        ax.plot(m.loc[~ok, "turn"], m.loc[~ok, "mean"], marker="o", ls="none", mfc="none", color=c)
        band = m[ok]
        ax.fill_between(band["turn"], band["low"], band["high"], alpha=0.2, color=c, lw=0)
        axn.plot(m["turn"], m["n"], marker=".", color=c)
    ax.axhline(0, color="k", lw=0.8)
    ax.plot(
        [], [], marker="o", ls="none", mfc="none", color="#555555", label=f"n < {min_n}: no interval drawn"
    )
    ax.fill_between(
        [], [], [], color="#999999", alpha=0.3, label=f"band: {interval_note(ci, 'RL seeds, trajectories')}"
    )
    ax.set(ylabel="cumulative log π_RL − log π_base")
    ax.set_title("mean over the trajectories still running at turn t", fontsize=MIN_FONT)
    handles, texts = ax.get_legend_handles_labels()

    axn.axhline(min_n, color="k", lw=0.6, ls="--")
    axn.set_yscale("log")
    axn.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axn.set(xlabel="turn t", ylabel="n")
    axn.xaxis.set_major_locator(MaxNLocator(integer=True))
    axn.text(
        1.0,
        1.02,
        f"trajectories per turn (dashed: {min_n})",
        transform=axn.transAxes,
        ha="right",
        va="bottom",
        fontsize=MIN_FONT,
    )
    fig.tight_layout()
    # below the figure, after the layout, so that the layout keeps the panels' width (saved with bbox "tight")
    fig.legend(handles, texts, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2)
    return fig
