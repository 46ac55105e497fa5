"""The kit's figure theme, shared by every figure module: the slide-readable style (`style`, `STYLE`, `MIN_FONT`), the
colour of each model and method (`PALETTE`, colour-blind safe), plain-word names for the roster (`LABELS`, `label`),
where legends go, and how an interval is described. Every figure function is wrapped in `_styled`."""

from __future__ import annotations

import contextlib
import functools
import re
import textwrap
from collections.abc import Callable, Iterator

import matplotlib

if matplotlib.get_backend().lower() == "agg" or not matplotlib.get_backend():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")
# A slide-readable style for every figure (`style`): no text smaller than 12 pt (`MIN_FONT`).
MIN_FONT = 12
STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.title_fontsize": 12,
    "figure.titlesize": 14,
    "lines.linewidth": 2.0,
}
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


def _color(name: str) -> str | None:
    """The colour of a model or method: its own, else its estimator's (`gigpo+budgetmix-s0` -> gigpo's)."""
    if name.lower() in PALETTE:
        return PALETTE[name.lower()]
    key = name.lower().split("-s")[0]
    if name.lower().endswith("-sharp") and f"{key}-sharp" in PALETTE:  # grpo-s0-sharp -> grpo-sharp's
        return PALETTE[f"{key}-sharp"]
    return PALETTE.get(key) or PALETTE.get(_algorithm(key))


def _algorithm(method: str) -> str:
    """`gigpo+budgetmix@0.5` -> `gigpo`."""
    return method.split("+")[0].split("@")[0]


def interval_note(ci: float, over: str) -> str:
    """How an interval was made, for a legend or title: '95% bootstrap interval over <over>'."""
    return f"{ci:.0%} bootstrap interval over {over}"


def _seeds_tasks(table: pd.DataFrame) -> str:
    """What a method_summary interval resampled: 'RL seeds × N tasks' (tasks only where every method has one
    seed)."""
    tasks = f"{int(table['n_tasks'].max())} tasks" if "n_tasks" in table else "tasks"
    if "n_seeds" in table and int(table["n_seeds"].max()) > 1:
        return f"RL seeds × {tasks}"
    return f"{tasks} (one RL seed per method)" if "n_seeds" in table else tasks
