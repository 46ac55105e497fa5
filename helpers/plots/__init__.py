"""The kit's figures (seaborn), one function per kind of figure. Each returns the matplotlib Figure; notebooks
save it through `helpers.store.Run.save_figure` (PNG and PDF, byte-stable).

By concept, one file each: `theme` (the style, palette and plain-word labels every figure shares), `differences`
(paired differences with their verdict's interval and the finding in words, notebooks 02-05), and the figures by
what they show: `budgets` (success against the turn budget: 00, 02, 03, 07), `training` (curves against the RL
step: 01, 02, 07) and `states` (matched and error states, actions' likelihood: 04-06). Every name is reached as
`plots.<name>`, as notebooks and the analysis modules call it."""

from __future__ import annotations

from helpers.plots.budgets import (
    budget_bars,
    budget_lines,
    gap_heatmap,
    gap_heatmaps,
    pass_at_k_curves,
    pass_at_t_curves,
    precision_curve,
    shared_limit,
    testbed,
    upper_bound,
)
from helpers.plots.differences import (
    CONCENTRATION_PHRASES,
    PHRASES,
    comparison_intervals,
    concentration,
    continuation_differences,
    finding_title,
    gain_differences,
    matched_differences,
    paired_differences,
    pass_t_differences,
)
from helpers.plots.states import (
    error_recovery,
    llr_curves,
    nll_histograms,
    quality_distributions,
    win_rate_by_depth,
)
from helpers.plots.theme import (
    ESTIMATORS,
    LABELS,
    MIN_FONT,
    PALETTE,
    ROSTER,
    STYLE,
    interval_note,
    label,
    short_label,
    style,
)
from helpers.plots.training import seed_curves, training_curves

__all__ = [
    "CONCENTRATION_PHRASES",
    "ESTIMATORS",
    "LABELS",
    "MIN_FONT",
    "PALETTE",
    "PHRASES",
    "ROSTER",
    "STYLE",
    "budget_bars",
    "budget_lines",
    "comparison_intervals",
    "concentration",
    "continuation_differences",
    "error_recovery",
    "finding_title",
    "gain_differences",
    "gap_heatmap",
    "gap_heatmaps",
    "interval_note",
    "label",
    "llr_curves",
    "matched_differences",
    "nll_histograms",
    "paired_differences",
    "pass_at_k_curves",
    "pass_at_t_curves",
    "pass_t_differences",
    "precision_curve",
    "quality_distributions",
    "seed_curves",
    "shared_limit",
    "short_label",
    "style",
    "testbed",
    "training_curves",
    "upper_bound",
    "win_rate_by_depth",
]
