"""The kit's figures (seaborn), one function per kind of figure. Each returns the matplotlib Figure; notebooks
save it through `helpers.store.Run.save_figure` (PNG and PDF, byte-stable)."""

from __future__ import annotations

import contextlib
import functools
import re
import textwrap
from collections.abc import Callable, Iterator

import matplotlib
import matplotlib.cm
import matplotlib.colors
import matplotlib.patches

if matplotlib.get_backend().lower() == "agg" or not matplotlib.get_backend():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from helpers import fmt, metrics

sns.set_theme(style="whitegrid", context="notebook")
# A slide-readable style for every figure (`style`): no text smaller than 12 pt (`MIN_FONT`).
MIN_FONT = 12
STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "xtick.labelsize": 12, "ytick.labelsize": 12,
         "legend.fontsize": 12, "legend.title_fontsize": 12, "figure.titlesize": 14, "lines.linewidth": 2.0}  # fmt: skip
# Every legend names loc="best" itself: matplotlib warns when placing a legend at the default loc took more than a
# second of wall-clock time. The placement does not depend on the time, only the warning does (a loaded machine
# printed it into notebook 04's output), and matplotlib gives it only where loc was left to its default.
# Okabe and Ito's colour-blind-safe colours (Wong 2011, Nature Methods 8:441). The colours drawn together are at
# least 20 apart (CIEDE2000) for normal vision and as simulated for deuteranopia and protanopia (`ROSTER`,
# `ESTIMATORS`; `helpers.colourblind`, `tests/test_plots.py`); the previous purple and blue of the sharpened base
# and RL were 6 apart under deuteranopia.
PALETTE = {
    "base": "#7f7f7f",
    "sharp": "#56b4e9",  # sky blue
    "grpo": "#0072b2",  # blue
    "budgetmix": "#d55e00",  # vermillion
    "grpo-sharp": "#8cc0dc",  # the RL models decoded as the sharpened base is: their method's colour, 55 % lighter
    "budgetmix-sharp": "#ecb78c",
    "upper bound": "#000000",
    "rl": "#0072b2",
    "rl_sharp": "#8cc0dc",
    "gigpo": "#e69f00",  # orange
    "ppo": "#555555",
    "oracle_q": "#56b4e9",
}
# The colours that share an axis: the roster of 02-06 (with the structural upper bound) and 07's estimators.
ROSTER = ("base", "sharp", "grpo", "budgetmix", "upper bound")
ESTIMATORS = ("grpo", "gigpo", "ppo", "oracle_q")


# Plain words for the roster's raw names, in one place: every legend and tick goes through `label`.
LABELS = {
    "base": "base",
    "sharp": "sharpened base (lower temperature)",
    "grpo": "GRPO",
    "budgetmix": "BudgetMix",
    "rl": "RL",
    "rl_sharp": "RL, decoded as the sharpened base",
    "grpo-sharp": "GRPO, decoded as the sharpened base",
    "budgetmix-sharp": "BudgetMix, decoded as the sharpened base",
    "gigpo": "GiGPO",
    "ppo": "PPO",
    "oracle_q": "oracle-Q process reward",
}


def label(name: str) -> str:
    """A model's or method's plain-word name for a figure: `sharp` -> `sharpened base (lower temperature)`,
    `grpo-s0` -> `GRPO seed 0`, `grpo-s0-sharp` -> `GRPO seed 0, decoded as the sharpened base`."""
    low = name.lower()
    if low in LABELS:
        return LABELS[low]
    m = re.fullmatch(r"(.+?)-s(\d+)(-sharp)?", low)
    if m and m.group(1) in LABELS:
        tail = ", decoded as the sharpened base" if m.group(3) else ""
        return f"{LABELS[m.group(1)]} seed {m.group(2)}{tail}"
    if "+" in low:
        return " + ".join(label(part) for part in name.split("+"))
    return name


def short_label(name: str) -> str:
    """`label(name)` without its parenthetical (`sharp` -> `sharpened base`), where space is short."""
    return re.sub(r" \(.*?\)", "", label(name))


def _wrapped(name: str, width: int = 16) -> str:
    """`short_label(name)` broken into lines of about `width` characters, for tick labels."""
    return textwrap.fill(short_label(name), width)


def _legend_right(ax: plt.Axes, **kw: object) -> None:
    """The axes' legend outside it, to the right, where it cannot hide data at slide font sizes."""
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, **kw)


def _legend_below(ax: plt.Axes, ncol: int = 2, **kw: object) -> None:
    """The axes' legend outside it, below its tick labels and axis label."""
    fig = ax.get_figure()
    height = ax.get_position().height * fig.get_figheight()  # inches
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.7 / height), ncol=ncol, **kw)


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The kit's figure style (`STYLE`) as a context: every figure function draws inside it. Only the keys of
    `STYLE` are set and restored: `plt.rc_context` would restore every rcParam, among them `interactive`, which
    the notebook's inline backend turns on when it draws the first figure; set back to off, no later figure of the
    notebook would be shown."""
    saved = {k: plt.rcParams[k] for k in STYLE}
    plt.rcParams.update(STYLE)
    try:
        yield
    finally:
        plt.rcParams.update(saved)


def _styled(func: Callable[..., plt.Figure]) -> Callable[..., plt.Figure]:
    """Draw `func`'s figure inside `style()`."""

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> plt.Figure:
        with style():
            return func(*args, **kwargs)

    return wrapper


# ------------------------------------------------------------------------------------------ numbers, tables


def number(x: float | None, digits: int = 3) -> str:
    """`x` in fixed point with `digits` decimals (`helpers.fmt.number`: never e-notation, a value that rounds to
    zero prints as 0, not -0; NaN prints as NaN, None as n/a)."""
    return fmt.number(x, digits)


def _cell(x: object, digits: int) -> object:
    """A table cell for display: floats (also inside lists and tuples) through `number`, the rest as it is."""
    if isinstance(x, bool | np.bool_ | int | np.integer):
        return x
    if isinstance(x, float | np.floating):
        return number(float(x), digits)
    if isinstance(x, list | tuple | np.ndarray):
        return "[" + ", ".join(str(_cell(v, digits)) for v in x) + "]"
    return x


def _labels(index: pd.Index, digits: int) -> pd.Index:
    """Float index levels rounded to `digits` (other levels unchanged)."""
    if isinstance(index, pd.MultiIndex):
        arrays = [index.get_level_values(i) for i in range(index.nlevels)]
        return pd.MultiIndex.from_arrays(
            [a.round(digits) if a.dtype.kind == "f" else a for a in arrays], names=index.names
        )
    return index.round(digits) if index.dtype.kind == "f" else index


def table(data: pd.DataFrame | pd.Series | None, digits: int = 3) -> pd.DataFrame | None:
    """A table for display in a notebook: every float in fixed point with `digits` decimals (`number`: no
    e-notation such as 6.950000e-01, no -0.000), floats in list cells too, float index and column labels rounded to
    at least 3 decimals; integers, booleans and text unchanged. The values become text: use it for the last
    expression of a cell, not for further computation. None (a section that does not apply to this series) stays
    None, so the cell shows nothing."""
    if data is None:
        return None
    df = data.to_frame() if isinstance(data, pd.Series) else data
    cols = []
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        if col.dtype.kind in "fO":
            col = pd.Series([_cell(v, digits) for v in col], index=df.index, name=col.name, dtype=object)
        cols.append(col)
    out = pd.concat(cols, axis=1) if cols else df.copy()
    out.columns = _labels(df.columns, max(digits, 3))
    out.index = _labels(df.index, max(digits, 3))
    return out


def interval_note(ci: float, over: str) -> str:
    """How an interval was made, for a legend or title: '95% bootstrap interval over <over>'."""
    return f"{ci:.0%} bootstrap interval over {over}"


# ------------------------------------------------------------------------------------------------- figures


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


def _color(name: str) -> str | None:
    """The colour of a model or method: its own, else its estimator's (`gigpo+budgetmix-s0` -> gigpo's)."""
    if name.lower() in PALETTE:
        return PALETTE[name.lower()]
    key = name.lower().split("-s")[0]
    if name.lower().endswith("-sharp") and f"{key}-sharp" in PALETTE:  # grpo-s0-sharp -> grpo-sharp's
        return PALETTE[f"{key}-sharp"]
    return PALETTE.get(key) or PALETTE.get(_algorithm(key))


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
        ax1.errorbar(base["T"], base["base"], yerr=[base["base"] - base["base_low"], base["base_high"] - base["base"]],
                     fmt="D-", color=PALETTE["base"], capsize=3, label="base (whole conversation)")  # fmt: skip
        ax1.plot(
            base["T"], base["base_last_turn"], "x:", color=PALETTE["base"], label="base (last turn only)"
        )
    ax1.axvline(t_max, color="k", lw=0.8, alpha=0.3)
    ax1.set(xlabel="turn budget T", ylabel="success within T turns", ylim=(0, 1), title="test maps")
    _legend_below(ax1, ncol=2)
    bottom = np.zeros(len(curve))
    for column, text, color in (("noise_points", "noise", "#c7c7c7"), ("habit_points", "habit", "#7f7f7f"),
                                ("budget_awareness_points", "budget awareness", PALETTE["upper bound"])):  # fmt: skip
        ax2.bar(curve["T"], curve[column], bottom=bottom, color=color, label=text)
        bottom = bottom + curve[column].to_numpy()
    ax2.axhline(0, color="k", lw=0.6)
    ax2.set(xlabel="turn budget T", ylabel="points", title="headrooms (exact)")
    _legend_below(ax2, ncol=1)
    fig.tight_layout()
    return fig


def _change_band(by_seed: dict[int, pd.DataFrame], col: str, n_boot: int, ci: float) -> pd.DataFrame | None:
    """Per RL step: the change of a logged metric from step 0, per unit (map or pool state) and seed, its mean and
    a paired percentile interval over seeds and units (the same units are scored at every step), from the metric's
    per-unit column; None where the runs logged none or the units differ between steps."""
    frames = list(by_seed.values())
    units = metrics.units_column(frames, col)
    if units is None:
        return None
    per_step: dict[int, list[np.ndarray]] = {}
    for m in frames:
        logged = {int(t): metrics._unit_values(v) for t, v in zip(m["step"], m[units], strict=True)}
        logged = {t: v for t, v in logged.items() if v.size and not np.all(np.isnan(v))}
        if not logged:
            return None
        start = logged[min(logged)]
        for t, v in logged.items():
            if v.size != start.size:
                return None
            per_step.setdefault(t, []).append(v - start)
    rows = []
    for t, diffs in sorted(per_step.items()):
        clean = [d[~np.isnan(d)] for d in diffs]
        if any(d.size == 0 for d in clean):
            continue
        point, low, high = metrics.nested_bootstrap(clean, n_boot=n_boot, ci=ci, seed=0)
        rows.append({"step": t, "mean": point, "low": low, "high": high})
    return pd.DataFrame(rows) if rows else None


def _seed_word(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _units(by_seed: dict[int, pd.DataFrame], col: str) -> str | None:
    """What a logged metric is a mean over ("maps" or "pool states"), None where the runs logged no per-unit values."""
    units = metrics.units_column(list(by_seed.values()), col)
    return None if units is None else ("maps" if units.endswith("_by_task") else "pool states")


@_styled
def seed_curves(
    runs: dict[str, dict[int, pd.DataFrame]], columns: dict[str, str], title: str = "",
    bands: dict[str, dict[str, pd.DataFrame | None]] | None = None, ci: float = 0.95, n_boot: int = 400,
) -> plt.Figure:  # fmt: skip
    """Per metric column (panel columns) against the RL step. Top, the level: per method the mean over RL seeds,
    each seed as a thin line where there are several and, for a single method, its band (where `bands[method][col]`
    holds the level's intervals over seeds and units, `metrics.seed_bands`, those; otherwise the range of the
    seeds); with several methods no level band, as bands that overlap from step 0 would hide the change. Bottom,
    the change from step 0 (what the paper's claims are about): per method its mean with a paired interval over
    seeds and units (`_change_band`) as error bars, methods offset so they do not hide each other, and a line at 0.
    One legend below says what is drawn, with the actual number of seeds."""
    n_methods = len(runs)
    fig, axes = plt.subplots(2, len(columns), figsize=(5.2 * len(columns), 7.4), squeeze=False, sharex=True)
    level_bands = n_methods == 1
    multi = any(len(by_seed) > 1 for by_seed in runs.values())
    notes: dict[str, str] = {}  # what the bands and error bars are, per panel
    drawn = {"band": False, "range": False, "change": False}
    for j, (col, ylabel) in enumerate(columns.items()):
        ax, axc = axes[0, j], axes[1, j]
        for i, (method, by_seed) in enumerate(runs.items()):
            c = _color(method)
            iv = ((bands or {}).get(method) or {}).get(col)
            if iv is not None:
                level = pd.DataFrame({"step": iv["step"], "mean": iv["mean"]})
                seeds = {k: iv[k] for k in by_seed if k in iv}
            else:
                logged = {k: m.dropna(subset=[col]) for k, m in by_seed.items() if col in m}
                logged = {k: m for k, m in logged.items() if len(m)}
                if not logged:  # this method never logged this metric (no step oracle for R_single, say)
                    continue
                wide = pd.concat([m[["step", col]].set_index("step")[col] for m in logged.values()], axis=1)
                level = pd.DataFrame({"step": wide.index, "mean": wide.mean(axis=1).to_numpy()})
                seeds = {k: wide.iloc[:, n] for n, k in enumerate(logged)}
            if not len(level):
                continue
            if multi:
                for v in seeds.values():
                    ax.plot(level["step"], np.asarray(v), color=c, lw=0.7, alpha=0.35)
            ax.plot(level["step"], level["mean"], marker="o", ms=4, color=c,
                    label=f"{label(method)} ({_seed_word(len(by_seed))})")  # fmt: skip
            if level_bands and iv is not None:
                ax.fill_between(iv["step"], iv["low"], iv["high"], color=c, alpha=0.15)
                drawn["band"] = True
            elif level_bands and len(by_seed) > 1:
                ax.fill_between(wide.index, wide.min(axis=1), wide.max(axis=1), color=c, alpha=0.12)
                drawn["range"] = True
            units = _units(by_seed, col)
            if units:
                notes[ylabel] = units
            ch = _change_band(by_seed, col, n_boot, ci)
            drawn_steps = np.asarray(ch["step"] if ch is not None else level["step"], dtype=float)
            spacing = float(np.min(np.diff(drawn_steps))) if len(drawn_steps) > 1 else 1.0
            offset = (i - (n_methods - 1) / 2) * 0.15 * spacing
            if ch is not None:
                axc.errorbar(ch["step"] + offset, ch["mean"], yerr=[ch["mean"] - ch["low"], ch["high"] - ch["mean"]],
                             fmt="o-", ms=4, capsize=3, color=c)  # fmt: skip
                drawn["change"] = True
            else:
                axc.plot(
                    level["step"] + offset, level["mean"] - level["mean"].iloc[0], marker="o", ms=4, color=c
                )
        if not ax.lines:
            for a in (ax, axc):
                a.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=a.transAxes,
                       fontsize=MIN_FONT, color="#555555")  # fmt: skip
        axc.axhline(0, color="k", lw=1.2)
        ax.set(ylabel="level")
        ax.set_title(ylabel, fontsize=MIN_FONT)
        axc.set(xlabel="RL step", ylabel="change from step 0")
    handles, labels = [], []
    for a in axes[0]:  # the methods of every panel, once (a method may have logged only some of the metrics)
        for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if multi:
        handles.append(plt.Line2D([], [], color="#777777", lw=0.7))
        labels.append("thin lines: each RL seed")
    if drawn["band"]:
        handles.append(matplotlib.patches.Patch(color="#999999", alpha=0.3))
        labels.append("top band: interval of the level")
    if drawn["range"]:
        handles.append(matplotlib.patches.Patch(color="#999999", alpha=0.25))
        labels.append("top band: range of the seeds")
    if drawn["change"]:
        handles.append(plt.Line2D([], [], color="#555555", marker="o", ls="-"))
        labels.append("bottom: change from step 0 with its interval")
    ncol = min(len(labels), 3)
    rows = -(-len(labels) // ncol)
    fig.legend(handles, labels, frameon=False, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, 0.07))
    over = "RL seeds × " if multi else ""
    what = _by_units(notes)
    note = f"intervals: {ci:.0%} bootstrap over {over}units; the units are {what or 'those logged'}" + (
        "; the change is paired (the same units at every step)" if drawn["change"] else ""
    )
    fig.text(0.5, 0.005, textwrap.fill(note, 40 * len(columns)), ha="center", va="bottom", fontsize=MIN_FONT)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.045 * rows + 0.1, 1, 1))
    return fig


def _by_units(notes: dict[str, str]) -> str:
    """{panel label: units} -> "maps for R_multi (...) and R_single (...), pool states for R_single (...)": which
    panels are means over what."""
    groups: dict[str, list[str]] = {}
    for name, units in notes.items():
        groups.setdefault(units, []).append(name)
    return ", ".join(f"{units} for {' and '.join(names)}" for units, names in groups.items())


@_styled
def training_curves(m: pd.DataFrame, title: str) -> plt.Figure:
    """R_multi (success at the full budget on fixed training maps, and the training batch's success) and
    R_single (mean step quality on the fixed probe pool) against the RL step."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    batch = m.dropna(subset=["success"]) if "success" in m else m.iloc[0:0]
    if len(batch):
        ax1.plot(batch["step"], batch["success"].rolling(5, min_periods=1).mean(), color="#9ecae1",
                 label="training batch (5-step mean)")  # fmt: skip
    ev = m.dropna(subset=["eval_success"])
    ax1.plot(ev["step"], ev["eval_success"], marker="o", color=PALETTE["grpo"], label="R_multi (full budget)")
    ax1.set(xlabel="RL step", ylabel="success", title=f"{title}: trajectory level", ylim=(-0.02, 1.02))
    _legend_below(ax1, ncol=1)
    rs = m.dropna(subset=["r_single"])
    ax2.plot(rs["step"], rs["r_single"], marker="o", color=PALETTE["budgetmix"])
    ax2.set(xlabel="RL step", ylabel="R_single (mean step quality)", title=f"{title}: step level")
    fig.tight_layout()
    return fig


@_styled
def compare_curves(runs: dict[str, pd.DataFrame], column: str, ylabel: str) -> plt.Figure:
    """One metric of several RL runs against the step (e.g. R_single of GRPO and BudgetMix)."""
    fig, ax = plt.subplots(figsize=(7, 4.4))
    for name, m in runs.items():
        d = m.dropna(subset=[column])
        ax.plot(d["step"], d[column], marker="o", label=label(name), color=_color(name))
    ax.set(xlabel="RL step", ylabel=ylabel)
    _legend_right(ax)
    return fig


def _seeds_tasks(table: pd.DataFrame) -> str:
    """What a method_summary interval resampled: 'RL seeds × N tasks' (tasks only where every method has one
    seed)."""
    tasks = f"{int(table['n_tasks'].max())} tasks" if "n_tasks" in table else "tasks"
    if "n_seeds" in table and int(table["n_seeds"].max()) > 1:
        return f"RL seeds × {tasks}"
    return f"{tasks} (one RL seed per method)" if "n_seeds" in table else tasks


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
        ax.bar(x, d["success"], width, label=text, color=_color(name),
               yerr=[d["success"] - d["low"], d["high"] - d["success"]], capsize=3)  # fmt: skip
    if upper:
        ax.scatter(range(len(fracs)), [upper[f] for f in fracs], marker="_", s=600, color="k", zorder=3,
                   label="structural upper bound")  # fmt: skip
    budgets = table.drop_duplicates("fraction").set_index("fraction").loc[fracs, "budget"]
    ax.set_xticks(range(len(fracs)), [f"{f:.0%}\n(T={b})" for f, b in zip(fracs, budgets, strict=True)])
    ax.set(xlabel="turn budget (fraction of T_max)", ylabel="success rate", ylim=(0, 1.05))
    ax.set_title(f"error bars: {interval_note(ci, _seeds_tasks(table))}", fontsize=MIN_FONT)
    _legend_below(ax, ncol=2)
    return fig


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
def gap_heatmap(diff: pd.DataFrame, title: str, significant: pd.DataFrame | None = None, ci: float = 0.95,
                lim: float | None = None) -> plt.Figure:  # fmt: skip
    """RL minus base over (K, T), in percentage points (rows T, columns K). Annotations are whole points, a value
    that rounds to zero printed as 0; with `significant` (a boolean frame of the same shape: the difference's
    interval excludes 0) those cells are starred and the title says so. `lim` (points) fixes the colour scale at
    [-lim, +lim], so that comparable heatmaps share one scale (`shared_limit`); by default it is this one's largest
    absolute value."""
    fig, ax = plt.subplots(figsize=(8, 4.4))
    lim = shared_limit([diff]) if lim is None else lim
    annot = diff.shape[1] <= 16
    labels = diff.map(lambda v: number(v, 0))
    if significant is not None:
        star = significant.reindex(index=diff.index, columns=diff.columns).fillna(False).astype(bool)
        labels = labels.where(~star, labels + "*")
        title = f"{title}\n* {ci:.0%} interval (RL seeds × tasks) excludes 0"
    sns.heatmap(diff, ax=ax, cmap="RdBu", center=0, vmin=-lim, vmax=lim, annot=labels.to_numpy() if annot else False,
                fmt="", annot_kws={"fontsize": MIN_FONT}, cbar_kws={"label": "points"})  # fmt: skip
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
        cells = diff.map(lambda v: number(v, 0))
        sig = (significant or {}).get(title)
        if sig is not None:
            star = sig.reindex(index=diff.index, columns=diff.columns).fillna(False).astype(bool)
            cells = cells.where(~star, cells + "*")
        annot = cells.to_numpy() if diff.shape[1] <= 16 else False
        sns.heatmap(diff, ax=ax, cmap=cmap, center=0, vmin=-lim, vmax=lim, annot=annot, fmt="", cbar=False,
                    annot_kws={"fontsize": MIN_FONT})  # fmt: skip
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
    diffs = [(f"RL minus {label(o)}", _color(o), (per_state["rl"] - per_state[o]).astype(float).to_numpy())
             for o in ("base", "sharp") if o in per_state]  # fmt: skip
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
    ax.bar(x, depth[f"{b}_better"], bottom=depth[f"{a}_better"] + depth["tie"], color=PALETTE["base"],
           label=f"{label(b)} better")  # fmt: skip
    if intervals is not None and len(intervals):
        iv = intervals.set_index("depth_bin").reindex(depth["depth_bin"])
        ax.errorbar(list(x), iv["better"], yerr=[iv["better"] - iv["low"], iv["high"] - iv["better"]], fmt="o",
                    ms=3, color="k", capsize=4, label=f"{label(a)} better: mean over seeds,\n{ci:.0%} interval (seeds, states)")  # fmt: skip
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
    err = [[v - superior[k]["better_ci"][0] for k, v in zip(keys, vals, strict=True)],
           [superior[k]["better_ci"][1] - v for k, v in zip(keys, vals, strict=True)]]  # fmt: skip
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
        ax1.plot([i - 0.45, i + 0.45], [reference] * 2, color="k", ls=":", lw=2.5,
                 label=f"paper: RL better than the base at {reference:.1%}")  # fmt: skip
    ax1.legend(frameon=False, fontsize=MIN_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.32))
    n_live = sum(superior.get("n_states_per_seed", [])) - sum(superior.get("n_dead_per_seed", []))
    seeds = superior.get("n_seeds")
    where = f"n = {n_live} live error states, {seeds} seeds" if seeds else "live error states"
    ax1.set(ylabel="fraction of live error states", ylim=(0, 1))
    ax1.set_title(
        f"next action after an injected error\n{where}; {ci:.0%} interval (seeds, states)", fontsize=MIN_FONT
    )
    d = continuation.set_index("model")
    ax2.bar([_wrapped(m) for m in d.index], d["success"], color=[_color(m) for m in d.index],
            yerr=[d["success"] - d["low"], d["high"] - d["success"]], capsize=4)  # fmt: skip
    if "upper_bound" in d:
        ax2.axhline(
            float(d["upper_bound"].iloc[0]), color="k", ls="--", lw=1.2, label="structural upper bound"
        )
    marked = [(i, m) for i, m in enumerate(d.index) if m in (reference_continuation or {})]
    for j, (i, m) in enumerate(marked):
        ax2.plot([i - 0.45, i + 0.45], [reference_continuation[m]] * 2, color="k", ls=":", lw=2.5,
                 label="paper's continuation success" if j == 0 else None)  # fmt: skip
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
        _, _, patches = ax.hist(shown, bins=edges, alpha=0.55, density=True, label=text,
                                color=_color("grpo" if name == "rl" else name))  # fmt: skip
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
    axn.text(1.0, 1.02, f"trajectories per turn (dashed: {min_n})", transform=axn.transAxes, ha="right",
             va="bottom", fontsize=MIN_FONT)  # fmt: skip
    fig.tight_layout()
    # below the figure, after the layout, so that the layout keeps the panels' width (saved with bbox "tight")
    fig.legend(handles, texts, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2)
    return fig


def _algorithm(method: str) -> str:
    """`gigpo+budgetmix@0.5` -> `gigpo`."""
    return method.split("+")[0].split("@")[0]


@_styled
def budget_lines(table: pd.DataFrame, upper: dict | None = None, ci: float = 0.95) -> plt.Figure:
    """Success against the budget (fraction of T_max) per estimator, one panel per budget mode (full budget,
    BudgetMix), each point with its interval; the structural upper bound dashed. `table` has columns method,
    fraction, success, low, high (`helpers.supervision.success_table`); corrupted-oracle methods are left out."""
    t = table[~table["method"].str.contains("@")]
    panels = [("full budget", t[~t["method"].str.contains("+", regex=False)]),
              ("BudgetMix", t[t["method"].str.contains("+budgetmix", regex=False)])]  # fmt: skip
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, (title, d) in zip(axes, panels, strict=True):
        names = list(dict.fromkeys(d["method"]))
        for i, name in enumerate(names):
            g = d[d["method"] == name].sort_values("fraction")
            x = (
                g["fraction"] + (i - (len(names) - 1) / 2) * 0.008
            )  # a small offset so intervals do not overlap
            ax.errorbar(x, g["success"], yerr=[g["success"] - g["low"], g["high"] - g["success"]], fmt="o-",
                        capsize=3, color=PALETTE.get(_algorithm(name)), label=label(_algorithm(name)))  # fmt: skip
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
        ax.errorbar(g["level"], g["success"], yerr=[g["success"] - g["low"], g["high"] - g["success"]], fmt="o-",
                    capsize=3, color=colour, label=f"{f:.0%} of T_max")  # fmt: skip
        if reference is not None:
            r = reference[reference["fraction"] == f]
            if len(r):
                ax.axhline(float(r["success"].iloc[0]), color=colour, ls="--", lw=1)
                if {"low", "high"} <= set(r.columns):
                    ax.axhspan(
                        float(r["low"].iloc[0]), float(r["high"].iloc[0]), color=colour, alpha=0.07, lw=0
                    )
    what = _seeds_tasks(reference) if reference is not None and "n_tasks" in reference else "RL seeds × tasks"
    ax.set(xlabel="oracle corruption (share of states with shuffled action values)", ylabel="success rate",
           ylim=(0, 1.02))  # fmt: skip
    ax.set_title(f"oracle-Q: how precise must the step signal be?\nerror bars and bands: {interval_note(ci, what)}",
                 fontsize=MIN_FONT)  # fmt: skip
    _legend_right(ax, title="budget (dashed: GRPO)")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------- paired differences


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
