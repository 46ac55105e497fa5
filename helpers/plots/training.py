"""Figures of RL training (notebooks 01, 02 and 07): logged metrics against the RL step, the level per method and
seed and the change from step 0 with a paired interval over seeds and units (`seed_curves`), and one run's
trajectory- and step-level curves (`training_curves`)."""

from __future__ import annotations

import textwrap

import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers import metrics
from helpers.plots.theme import MIN_FONT, PALETTE, _color, _legend_below, _styled, label


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
    runs: dict[str, dict[int, pd.DataFrame]],
    columns: dict[str, str],
    title: str = "",
    bands: dict[str, dict[str, pd.DataFrame | None]] | None = None,
    ci: float = 0.95,
    n_boot: int = 400,
) -> plt.Figure:
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
            ax.plot(
                level["step"],
                level["mean"],
                marker="o",
                ms=4,
                color=c,
                label=f"{label(method)} ({_seed_word(len(by_seed))})",
            )
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
                axc.errorbar(
                    ch["step"] + offset,
                    ch["mean"],
                    yerr=[ch["mean"] - ch["low"], ch["high"] - ch["mean"]],
                    fmt="o-",
                    ms=4,
                    capsize=3,
                    color=c,
                )
                drawn["change"] = True
            else:
                axc.plot(
                    level["step"] + offset, level["mean"] - level["mean"].iloc[0], marker="o", ms=4, color=c
                )
        if not ax.lines:
            for a in (ax, axc):
                a.text(
                    0.5,
                    0.5,
                    "not logged in this run",
                    ha="center",
                    va="center",
                    transform=a.transAxes,
                    fontsize=MIN_FONT,
                    color="#555555",
                )
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
        ax1.plot(
            batch["step"],
            batch["success"].rolling(5, min_periods=1).mean(),
            color="#9ecae1",
            label="training batch (5-step mean)",
        )
    ev = m.dropna(subset=["eval_success"])
    ax1.plot(ev["step"], ev["eval_success"], marker="o", color=PALETTE["grpo"], label="R_multi (full budget)")
    ax1.set(xlabel="RL step", ylabel="success", title=f"{title}: trajectory level", ylim=(-0.02, 1.02))
    _legend_below(ax1, ncol=1)
    rs = m.dropna(subset=["r_single"])
    ax2.plot(rs["step"], rs["r_single"], marker="o", color=PALETTE["budgetmix"])
    ax2.set(xlabel="RL step", ylabel="R_single (mean step quality)", title=f"{title}: step level")
    fig.tight_layout()
    return fig
