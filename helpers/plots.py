"""The kit's figures (seaborn), one function per kind of figure. Each returns the matplotlib Figure; notebooks
save it through `helpers.store.Run.save_figure` (PNG and PDF, byte-stable)."""

from __future__ import annotations

import matplotlib

if matplotlib.get_backend().lower() == "agg" or not matplotlib.get_backend():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")
PALETTE = {"base": "#7f7f7f", "grpo": "#1f77b4", "budgetmix": "#d62728", "upper bound": "#2ca02c"}


def upper_bound(df: pd.DataFrame, t_max: int) -> plt.Figure:
    """Structural upper bound (best success within T turns) against the budget T."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
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
    ax.legend(frameon=False, fontsize=9)
    return fig
