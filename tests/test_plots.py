"""The figures a reader sees: axis ticks, intervals and their labels, n where it varies, whole points that never
print as -0 (tables and numbers: `tests/test_fmt.py`)."""

from __future__ import annotations

import itertools
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from helpers import colourblind, llr, matched, metrics, plots


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig: plt.Figure) -> str:
    """Every title, suptitle, legend entry, label and free text of a figure, joined."""
    out = [t.get_text() for t in fig.findobj(plt.Text)]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------- Pass@(K, T)


def _pass_table(ks=(1, 2, 3, 4, 8, 16), Ts=(1, 2)) -> pd.DataFrame:
    rows = []
    for T in Ts:
        for m in ("base", "grpo"):
            for K in ks:
                p = 0.2 * T + 0.02 * K + (0.05 if m == "grpo" else 0)
                rows.append(
                    {
                        "model": m,
                        "T": T,
                        "K": K,
                        "pass": p,
                        "low": p - 0.05,
                        "high": p + 0.05,
                        "n_seeds": 3 if m == "grpo" else 1,
                        "n_tasks": 50,
                    }
                )
    return pd.DataFrame(rows)


def test_pass_at_k_axis_is_log2_with_integer_ticks_at_plotted_k():
    table = _pass_table()
    upper = {T: {K: 0.9 for K in (1, 2, 3, 4, 8, 16)} for T in (1, 2)}
    fig = plots.pass_at_k_curves(table, upper)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.xaxis.get_transform().base == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16"]
    assert list(ax.get_xticks()) == [1, 2, 4, 8, 16]
    assert not ax.xaxis.get_minorticklocs().size
    # one band per model and panel, the upper bound drawn, and the band explained
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2
    # one legend for all panels, on the figure (not in panel 1 only), readable on a slide
    (legend,) = fig.legends
    assert "structural upper bound" in [t.get_text() for t in legend.get_texts()]
    assert all(t.get_fontsize() >= 12 for t in legend.get_texts())
    assert "95% bootstrap interval over RL seeds × 50 tasks" in fig._suptitle.get_text()


def test_pass_at_k_ticks_include_a_largest_k_that_is_no_power_of_two_and_a_single_k():
    fig = plots.pass_at_k_curves(_pass_table(ks=(1, 2, 3, 4, 5, 6)))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2", "4", "6"]
    fig = plots.pass_at_k_curves(_pass_table(ks=(1,)).drop(columns=["low", "high"]))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1"]
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no interval given, none drawn
    assert fig._suptitle is None


def test_pass_at_t_says_what_its_bands_are():
    t = _pass_table(ks=(8,)).rename(columns={"T": "T_"}).assign(T=lambda d: d["T_"])
    fig = plots.pass_at_t_curves(t, {1: 0.5, 2: 0.9}, 8, ci=0.9)
    assert "90% bootstrap interval" in fig.axes[0].get_title()


def test_gap_heatmap_prints_zero_not_minus_zero_and_stars_cells_whose_interval_excludes_zero():
    diff = pd.DataFrame(
        [[-0.3, 5.2], [-0.6, 0.4]], index=pd.Index([1, 2], name="T"), columns=pd.Index([1, 2], name="K")
    )
    fig = plots.gap_heatmap(diff, "grpo minus base")
    annotations = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(annotations) == sorted(["0", "5", "-1", "0"])
    significant = pd.DataFrame([[False, True], [False, False]], index=diff.index, columns=diff.columns)
    fig = plots.gap_heatmap(diff, "grpo minus base", significant)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == sorted(["0", "5*", "-1", "0"])
    assert "* 95% interval" in fig.axes[0].get_title() and "excludes 0" in fig.axes[0].get_title()


# ------------------------------------------------------------------------------------------------- likelihoods


def _llr() -> pd.DataFrame:
    """Successful trajectories: base's 20 trajectories (3 turns for 15 of them, 1 for 5) scored by two RL seeds,
    and each seed's own 12 trajectories of 2 turns."""
    rng = np.random.default_rng(0)
    rows = []
    for seed in ("grpo-s0", "grpo-s1"):
        for i in range(20):
            for turn in range(1, (4 if i < 15 else 2)):
                rows.append(
                    {
                        "trajectory": i,
                        "model": "likelihood-base",
                        "turn": turn,
                        "cum_llr": -turn + rng.normal(),
                        "success": True,
                        "trajectories_of": "base",
                        "rl_seed": seed,
                    }
                )
        for i in range(12):
            for turn in (1, 2):
                rows.append(
                    {
                        "trajectory": i,
                        "model": f"likelihood-{seed}",
                        "turn": turn,
                        "cum_llr": turn + rng.normal(),
                        "success": True,
                        "trajectories_of": "rl",
                        "rl_seed": seed,
                    }
                )
    return pd.DataFrame(rows)


def test_llr_by_turn_counts_distinct_trajectories_and_gives_an_interval():
    s = llr.by_turn(_llr(), n_boot=200).set_index(["trajectories_of", "turn"])
    assert s.loc[("base", 1), "n"] == 20  # scored by two seeds, counted once
    assert s.loc[("base", 2), "n"] == 15
    assert s.loc[("rl", 1), "n"] == 24  # each seed's own trajectories
    assert (s["low"] <= s["mean"]).all() and (s["mean"] <= s["high"]).all()
    assert s.loc[("base", 3), "high"] - s.loc[("base", 3), "low"] > 0


def test_llr_curves_show_n_per_turn_and_mark_turns_with_few_trajectories():
    fig = plots.llr_curves(llr.by_turn(_llr(), n_boot=100), min_n=16)
    ax, axn = fig.axes
    text = _texts(fig)
    assert "95% bootstrap interval" in text and "n < 16" in text
    # the n axis: one line per source, with the counts
    counts = {tuple(line.get_ydata()) for line in axn.get_lines() if len(line.get_ydata()) > 1}
    assert (20, 15, 15) in counts and (24, 24) in counts
    # base at turns 2 and 3 (n = 15) are hollow; rl (n = 24) is not
    hollow = [
        line for line in ax.get_lines() if line.get_markerfacecolor() == "none" and len(line.get_xdata())
    ]
    assert [list(line.get_xdata()) for line in hollow] == [[2, 3]]


def test_nll_histogram_counts_clipped_values_in_a_labelled_overflow_bin():
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.uniform(0, 1, 990), [5.0] * 10])
    nll = pd.DataFrame({"nll_mean": v, "actions_of": ["base"] * 500 + ["rl"] * 500})
    fig = plots.nll_histograms(nll)
    ax = fig.axes[0]
    hi = float(pd.Series(v).quantile(0.99))
    n_over = int((v > hi).sum())
    assert ax.get_title().startswith(f"{n_over} of 1000 values above {hi:.2f}")
    assert any(p.get_hatch() == "///" for p in ax.patches)
    assert ax.get_xticklabels()[-1].get_text() == f"> {hi:.2f}"
    # density over all the values of a source, the overflow bin included
    base = ax.patches[:41]  # 40 bins and the overflow bin of the first source
    assert sum(p.get_height() * p.get_width() for p in base) == pytest.approx(1.0)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("base actions (n=500")


def test_nll_histogram_without_outliers_says_everything_is_shown():
    nll = pd.DataFrame({"nll_mean": [0.1, 0.2, 0.2, 0.3], "actions_of": ["base", "base", "rl", "rl"]})
    fig = plots.nll_histograms(nll, quantile=1.0)
    assert fig.axes[0].get_title() == "all 4 values shown"


# --------------------------------------------------------------------------------------------- training curves


def _logs(by_task: bool) -> dict[int, pd.DataFrame]:
    rng = np.random.default_rng(2)
    out = {}
    for s in (0, 1, 2):
        rows = []
        for step in (0, 10, 20):
            per_task = rng.uniform(0, 1, 8).tolist()
            row = {"step": step, "eval_success": float(np.mean(per_task))}
            if by_task:
                row["eval_success_by_task"] = per_task
            rows.append(row)
        out[s] = pd.DataFrame(rows)
    return out


def test_seed_curves_band_is_a_bootstrap_interval_over_seeds_and_maps():
    logs = _logs(by_task=True)
    runs, columns = {"grpo": logs}, {"eval_success": "R_multi"}
    fig = plots.seed_curves(runs, columns, bands=metrics.seed_bands(runs, columns, n_boot=200))
    text = _texts(fig)
    assert "top band: interval of the level" in text
    assert "intervals: 95% bootstrap over RL seeds × units; the units are maps for R_multi" in " ".join(
        text.split()
    )
    assert "GRPO (3 seeds)" in text and "thin lines: each RL seed" in text
    iv = metrics.step_intervals(logs, "eval_success", n_boot=200)
    assert (
        list(iv["step"]) == [0, 10, 20] and (iv["low"] < iv["mean"]).all() and (iv["mean"] < iv["high"]).all()
    )
    assert iv["mean"].tolist() == pytest.approx(
        [np.mean([logs[s].loc[i, "eval_success"] for s in logs]) for i in range(3)]
    )


def test_seed_curves_without_per_unit_logs_fall_back_to_the_seed_range_and_say_so():
    runs, columns = {"grpo": _logs(by_task=False)}, {"eval_success": "R_multi"}
    bands = metrics.seed_bands(runs, columns)
    assert bands == {"grpo": {"eval_success": None}}
    fig = plots.seed_curves(runs, columns, bands=bands)
    assert "band: range of the seeds" in _texts(fig)
    assert metrics.step_intervals(_logs(by_task=False), "eval_success") is None


# ---------------------------------------------------------------------------------- bars, error states, depth


def test_budget_bars_and_lines_say_what_the_error_bars_are():
    rows = [
        {
            "model": m,
            "method": m,
            "fraction": f,
            "budget": int(8 * f),
            "success": 0.5,
            "low": 0.4,
            "high": 0.6,
            "n_seeds": 3 if m == "grpo" else 1,
            "n_tasks": 100,
        }
        for m in ("base", "grpo")
        for f in (0.5, 1.0)
    ]
    fig = plots.budget_bars(pd.DataFrame(rows), {0.5: 0.7, 1.0: 0.9})
    assert "error bars: 95% bootstrap interval over RL seeds × 100 tasks" in fig.axes[0].get_title()
    assert "GRPO (3 seeds)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    fig = plots.budget_lines(pd.DataFrame(rows).assign(n_seeds=1))
    assert "error bars: 95% bootstrap interval over 100 tasks" in fig._suptitle.get_text()


def test_error_recovery_titles_give_n_and_the_interval():
    superior = {
        "rl_vs_base": {"better": 0.7, "better_ci": [0.6, 0.8]},
        "n_seeds": 3,
        "n_states_per_seed": [60, 60, 60],
        "n_dead_per_seed": [2, 0, 1],
    }
    continuation = pd.DataFrame(
        {
            "model": ["base", "rl"],
            "success": [0.4, 0.5],
            "low": [0.3, 0.4],
            "high": [0.5, 0.6],
            "upper_bound": [0.6, 0.6],
            "n_states": [180, 180],
            "n_continuations": [8, 8],
        }
    )
    fig = plots.error_recovery(superior, continuation)
    left, right = (ax.get_title() for ax in fig.axes)
    assert "n = 177 live error states, 3 seeds" in left and "95% interval" in left
    assert "n = 180 error states x 8 continuations" in right and "95% interval" in right


def test_win_rate_by_depth_draws_the_interval_of_the_win_rate():
    rng = np.random.default_rng(3)
    per_state = pd.DataFrame(
        {
            "depth": rng.uniform(0, 1, 200),
            "rl": rng.uniform(0, 1, 200),
            "base": rng.uniform(0, 1, 200),
            "dead": rng.uniform(0, 1, 200) < 0.1,
            "rl_seed": np.repeat([0, 1], 100),
        }
    )
    bins = [0.0, 0.5, 1.0]
    iv = matched.depth_win_intervals(per_state, bins, n_boot=200)
    assert list(iv["depth_bin"]) == ["[0.00, 0.50)", "[0.50, 1.00)"]
    assert ((iv["low"] <= iv["better"]) & (iv["better"] <= iv["high"])).all()
    depth = pd.DataFrame(
        {
            "depth_bin": iv["depth_bin"],
            "rl_better": iv["better"],
            "tie": 0.0,
            "base_better": 1 - iv["better"],
            "n_live": [90, 90],
            "n_dead": [10, 10],
        }
    )
    fig = plots.win_rate_by_depth(depth, intervals=iv)
    assert any("95% interval (seeds, states)" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert fig.axes[0].containers  # bars and the error bar


def test_a_slow_legend_placement_prints_nothing(monkeypatch):
    """matplotlib warns when placing a legend at its default loc took over a second of wall-clock time (on a loaded
    machine it reached notebook 04's output); the placement does not depend on the time, so every legend of the
    kit names loc="best" itself. Here the clock jumps 2 s at every reading: a default-loc legend warns (the
    control), the kit's figure does not."""
    import warnings

    import matplotlib.legend

    clock = iter(range(0, 10**8, 2))
    monkeypatch.setattr(matplotlib.legend.time, "perf_counter", lambda: float(next(clock)))

    def legend_warnings(fig) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.canvas.draw()
        plt.close(fig)
        return [str(w.message) for w in caught if "legend" in str(w.message)]

    fig, ax = plt.subplots()
    ax.plot(range(10), label="a")
    ax.legend()
    assert legend_warnings(fig), "the slow clock no longer reaches matplotlib's warning"
    table = pd.DataFrame(
        {"model": ["base", "grpo"], "T": [1, 1], "pass": [0.2, 0.3], "low": [0.1, 0.2], "high": [0.3, 0.4]}
    )
    assert legend_warnings(plots.pass_at_t_curves(table)) == []


# ------------------------------------------------------------------------------------ fit for a slide (item 4)


def _visible_texts(fig: plt.Figure) -> list[plt.Text]:
    """Every text a reader sees once the figure is drawn (tick labels included), non-empty."""
    fig.canvas.draw()
    return [t for t in fig.findobj(plt.Text) if t.get_visible() and t.get_text().strip()]


def _slide_figures() -> dict[str, plt.Figure]:
    """One figure of each kind the notebooks draw, from small synthetic inputs with the roster's raw names."""
    rng = np.random.default_rng(5)
    pass_t = pd.DataFrame(
        [
            {"model": m, "T": T, "pass": 0.5, "low": 0.4, "high": 0.6, "n_tasks": 50}
            for m in ("base", "sharp", "grpo", "grpo-sharp")
            for T in (1, 2, 3)
        ]
    )
    bars = pd.DataFrame(
        [
            {
                "model": m,
                "fraction": f,
                "budget": int(8 * f),
                "success": 0.5,
                "low": 0.4,
                "high": 0.6,
                "n_seeds": 3,
                "n_tasks": 100,
            }
            for m in ("base", "sharp", "rl_sharp")
            for f in (0.5, 1.0)
        ]
    )
    per_state = pd.DataFrame(
        {
            "base": rng.uniform(0, 1, 80),
            "sharp": rng.uniform(0, 1, 80),
            "rl": rng.uniform(0, 1, 80),
            "rl_seed": np.repeat([0, 1], 40),
        }
    )
    superior = {
        k: {"better": 0.6, "better_ci": [0.5, 0.7]} for k in ("rl_vs_base", "rl_vs_sharp", "sharp_vs_base")
    }
    continuation = pd.DataFrame(
        {
            "model": ["base", "sharp", "rl", "rl_sharp"],
            "success": 0.5,
            "low": 0.4,
            "high": 0.6,
            "upper_bound": 0.7,
        }
    )
    depth = pd.DataFrame(
        {
            "depth_bin": ["[0.00, 0.50)", "[0.50, 1.00)"],
            "rl_better": [0.6, 0.4],
            "tie": 0.1,
            "base_better": [0.3, 0.5],
            "n_live": [90, 80],
            "n_dead": [0, 10],
        }
    )
    nll = pd.DataFrame(
        {"actions_of": np.repeat(["base", "rl", "sharp"], 30), "nll_mean": rng.uniform(0, 2, 90)}
    )
    logs = _logs(by_task=True)
    return {
        "pass_at_k": plots.pass_at_k_curves(_pass_table().replace({"model": {"grpo": "sharp"}})),
        "pass_at_t": plots.pass_at_t_curves(pass_t),
        "budget_bars": plots.budget_bars(bars),
        "heatmaps": plots.gap_heatmaps({"grpo minus sharpened base": pd.DataFrame([[1.0, -2.0]], index=[1])}),
        "quality": plots.quality_distributions(per_state),
        "depth": plots.win_rate_by_depth(depth, reference=0.428),
        "recovery": plots.error_recovery(
            superior, continuation, reference=0.657, reference_continuation={"rl": 0.513, "base": 0.386}
        ),
        "nll": plots.nll_histograms(nll),
        "seed_curves": plots.seed_curves(
            {"grpo": logs, "grpo+budgetmix": _logs(by_task=True)}, {"eval_success": "R_multi"}, n_boot=50
        ),
    }


def test_figure_text_is_at_least_the_slide_minimum_and_uses_plain_words():
    """Every figure draws inside `plots.style()`: no visible text below `plots.MIN_FONT` (12 pt), ticks and
    heatmap cells included; and no raw roster name reaches a reader ("sharp", "rl_sharp", "grpo-sharp")."""
    assert plots.MIN_FONT >= 12
    for name, fig in _slide_figures().items():
        texts = _visible_texts(fig)
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < plots.MIN_FONT]
        assert not small, (name, small)
        raw = [
            t.get_text()
            for t in texts
            if re.search(r"(?<![\w-])(rl_sharp|[\w]+-sharp|sharp)(?![\w])", t.get_text())
        ]
        assert not raw, (name, raw)


def test_label_gives_plain_words_for_the_roster():
    assert plots.label("sharp") == "sharpened base (lower temperature)"
    assert plots.short_label("sharp") == "sharpened base"
    assert plots.label("grpo-s2-sharp") == "GRPO seed 2, decoded as the sharpened base"
    assert plots.label("grpo+budgetmix") == "GRPO + BudgetMix"
    assert plots.label("something else") == "something else"  # what it does not know passes unchanged


def test_comparable_heatmaps_share_one_colour_scale_and_one_colourbar():
    small = pd.DataFrame([[1.0, 2.0], [0.5, -1.0]], index=[1, 2], columns=[1, 2])
    large = pd.DataFrame([[10.0, -25.0], [3.0, 4.0]], index=[1, 2], columns=[1, 2])
    fig = plots.gap_heatmaps({"a minus b": small, "c minus d": large})
    meshes = [c for ax in fig.axes for c in ax.collections if hasattr(c, "norm")]
    heat_meshes = [m for m in meshes if m.get_array() is not None and m.get_array().size == 4]
    assert len(heat_meshes) == 2
    assert {(m.norm.vmin, m.norm.vmax) for m in heat_meshes} == {(-25.0, 25.0)}
    assert len(fig.axes) == 3  # two panels and one colourbar
    assert "one colour scale" in fig._suptitle.get_text()
    # the single heatmaps take the same scale where asked (notebook 03 saves them beside the combined figure)
    lim = plots.shared_limit([small, large])
    single = plots.gap_heatmap(small, "a minus b", lim=lim)
    assert (single.axes[0].collections[0].norm.vmin, single.axes[0].collections[0].norm.vmax) == (-25.0, 25.0)


def test_seed_curves_legend_follows_the_seed_count_and_a_panel_shows_the_change_from_step_0():
    one = {0: _logs(by_task=True)[0]}
    fig = plots.seed_curves({"grpo": one}, {"eval_success": "R_multi"}, n_boot=50)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "GRPO (1 seed)" in legend and not any("thin lines" in t for t in legend)
    fig = plots.seed_curves({"grpo": _logs(by_task=True)}, {"eval_success": "R_multi"}, n_boot=50)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "GRPO (3 seeds)" in legend and "thin lines: each RL seed" in legend
    change = fig.axes[1]
    assert change.get_ylabel() == "change from step 0"
    (bars,) = change.containers  # the change per step with its interval
    _, y = bars.lines[0].get_data()
    assert y[0] == pytest.approx(0.0) and len(y) == 3
    assert any(
        line.get_ydata()[0] == 0 for line in change.get_lines() if len(line.get_ydata()) == 2
    )  # the line at 0


def test_training_curves_of_several_methods_do_not_blend_into_one_mass():
    """With two methods no level band (they overlap from step 0) and the change's points are offset per method."""
    runs = {"grpo": _logs(by_task=True), "budgetmix": _logs(by_task=True)}
    fig = plots.seed_curves(runs, {"eval_success": "R_multi"}, n_boot=50)
    assert not [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    xs = [c.lines[0].get_data()[0] for c in fig.axes[1].containers]
    assert len(xs) == 2 and all(a < b for a, b in zip(xs[0], xs[1], strict=True))


def test_side_by_side_histograms_do_not_overlap():
    rng = np.random.default_rng(1)
    per_state = pd.DataFrame({n: rng.uniform(0, 1, 60) for n in ("base", "sharp", "rl")})
    fig = plots.quality_distributions(per_state)
    for ax in fig.axes:
        spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches if p.get_width() > 0)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_win_rate_and_error_recovery_mark_50_percent_and_the_papers_number():
    depth = pd.DataFrame(
        {
            "depth_bin": ["[0.00, 1.00)"],
            "rl_better": [0.6],
            "tie": [0.1],
            "base_better": [0.3],
            "n_live": [90],
            "n_dead": [0],
        }
    )
    fig = plots.win_rate_by_depth(depth, reference=0.428)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "50 % (as often better as not)" in legend
    assert "paper (all depths): RL better at 42.8%" in legend
    assert "RL better (states of all seeds pooled)" in legend  # the bars' estimator named beside the dots'
    superior = {"rl_vs_base": {"better": 0.6, "better_ci": [0.5, 0.7]}}
    continuation = pd.DataFrame({"model": ["base", "rl"], "success": 0.5, "low": 0.4, "high": 0.6})
    fig = plots.error_recovery(superior, continuation, reference=0.657, reference_continuation={"rl": 0.513})
    left, right = fig.axes
    assert "paper: RL better than the base at 65.7%" in [t.get_text() for t in left.get_legend().get_texts()]
    assert "paper's continuation success" in [t.get_text() for t in right.get_legend().get_texts()]
    colours = {tuple(p.get_facecolor()) for p in right.patches}
    assert len(colours) == 2  # one colour per model


def test_style_restores_only_its_own_keys_so_a_notebook_keeps_showing_figures():
    """The inline backend turns `interactive` on while the first figure is drawn (inside `style()`); restoring
    every rcParam, as `plt.rc_context` does, turned it off again and no later figure of a notebook was shown."""
    before = {k: plt.rcParams[k] for k in plots.STYLE}
    interactive = plt.rcParams["interactive"]
    try:
        with plots.style():
            assert plt.rcParams["font.size"] == plots.STYLE["font.size"]
            plt.rcParams["interactive"] = not interactive  # what the backend does on first use
        assert plt.rcParams["interactive"] is (not interactive)
        assert {k: plt.rcParams[k] for k in plots.STYLE} == before
    finally:
        plt.rcParams["interactive"] = interactive


def test_every_figure_function_draws_inside_the_kit_style():
    import inspect

    figures = [
        f
        for name, f in vars(plots).items()
        if inspect.isfunction(f)
        and not name.startswith("_")
        and inspect.signature(f).return_annotation in ("plt.Figure", plt.Figure)
    ]
    assert len(figures) >= 15
    assert [f.__name__ for f in figures if not hasattr(f, "__wrapped__")] == []


def test_seed_curves_leave_out_a_metric_a_method_never_logged():
    """InterCode-SQL has no step oracle, so its runs log no R_single: that panel says so, the other is drawn, and
    the legend still names every method."""
    no_column = _logs(by_task=True)  # GRPO logged no r_single column at all, BudgetMix one of NaN
    all_nan = {s: m.assign(r_single=np.nan) for s, m in _logs(by_task=True).items()}
    runs = {"grpo": no_column, "budgetmix": all_nan}
    fig = plots.seed_curves(runs, {"r_single": "R_single", "eval_success": "R_multi"}, n_boot=50)
    top_single, top_multi = fig.axes[0], fig.axes[1]
    assert not top_single.lines and "not logged in this run" in _texts(fig)
    assert len(top_multi.lines) > 2
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "GRPO (3 seeds)" in legend and "BudgetMix (3 seeds)" in legend


# ------------------------------------------------------------------------------------------- colour blindness


@pytest.mark.parametrize("deficiency", ["normal", "deuteranopia", "protanopia"])
@pytest.mark.parametrize("group", [plots.ROSTER, plots.ESTIMATORS])
def test_colours_drawn_together_stay_apart_for_colour_blind_readers(group, deficiency):
    """CIEDE2000 >= 20 between every two colours that share an axis, as seen with normal vision and as simulated
    for deuteranopia and protanopia (Machado et al. 2009, severity 1, on linear RGB)."""
    for a, b in itertools.combinations(group, 2):
        de = colourblind.delta_e(plots.PALETTE[a], plots.PALETTE[b], deficiency)
        assert de >= 20, (a, b, deficiency, de)


def test_colour_difference_matches_published_values_and_the_old_pair_was_unsafe():
    # Sharma, Wu and Dalal (2005), test pairs 1 and 7
    assert colourblind.delta_e2000(
        np.array([50, 2.6772, -79.7751]), np.array([50, 0, -82.7485])
    ) == pytest.approx(2.0425, abs=1e-4)
    assert colourblind.delta_e2000(np.array([50, 2.5, 0]), np.array([73, 25, -18])) == pytest.approx(
        27.1492, abs=1e-4
    )
    # the sharpened base's and RL's former purple and blue: distinct in normal vision, not to a dichromat
    assert colourblind.delta_e("#9467bd", "#1f77b4") > 20
    assert colourblind.delta_e("#9467bd", "#1f77b4", "deuteranopia") < 10
    assert colourblind.delta_e("#9467bd", "#1f77b4", "protanopia") < 10


# ----------------------------------------------------------------------------------------- paired differences


def _gains(shift: float) -> pd.DataFrame:
    """A gain table (`budgetmix.gain_table`'s columns) whose BudgetMix - GRPO interval is shifted by `shift`."""
    rows = []
    for f in (0.25, 0.5, 1.0):
        for c, g in (("budgetmix - grpo", shift if f < 1 else 0.0), ("grpo - sharp", 0.0)):
            rows.append({"fraction": f, "comparison": c, "gain_points": g, "t_low": g - 3, "t_high": g + 3})
    return pd.DataFrame(rows)


def test_paired_difference_title_says_above_where_the_interval_excludes_zero():
    fig = plots.gain_differences(_gains(10.0))
    title = fig.axes[0].get_title().replace("\n", " ")
    assert "BudgetMix above GRPO at 25 % and 50 % of T_max" in title
    assert "no difference shown at 100 % of T_max" in title
    assert "GRPO not shown to differ from sharpened base" in title and "every interval contains 0" in title
    assert fig.axes[0].get_ylabel() == "success difference (percentage points)"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["25%", "50%", "100%"]


def test_paired_difference_title_says_no_difference_where_intervals_contain_zero():
    title = plots.gain_differences(_gains(1.0)).axes[0].get_title().replace("\n", " ")
    assert "BudgetMix not shown to differ from GRPO" in title and "above" not in title
    title = plots.gain_differences(_gains(-10.0)).axes[0].get_title().replace("\n", " ")
    assert "BudgetMix below GRPO at 25 % and 50 % of T_max" in title


def test_pass_t_differences_name_the_budgets():
    gaps = pd.DataFrame(
        {
            "T": [1, 2, 1, 2],
            "comparison": ["grpo - sharp"] * 2 + ["budgetmix - sharp"] * 2,
            "difference": [5.0, 0.5, 6.0, 7.0],
            "t_low": [1.0, -2, 2, 3],
            "t_high": [9.0, 3, 10, 11],
        }
    )
    ax = plots.pass_t_differences(gaps, 8).axes[0]
    title = ax.get_title().replace("\n", " ")
    assert "GRPO above sharpened base at T = 1; no difference shown at T = 2" in title
    assert "BudgetMix above sharpened base at T = 1 and 2" in title
    assert ax.get_ylabel() == "Pass@8 difference (percentage points)"


def test_concentration_title_states_where_rl_advantage_sits():
    def paired(diff, low, high):
        return {"paired": {"diff": diff, "low": low, "high": high, "ci_level": 0.95}}

    fig = plots.concentration(
        {"rl_vs_base": paired(0.01, -0.08, 0.10), "rl_vs_sharp": paired(0.2, 0.05, 0.35)}
    )
    title = fig.axes[0].get_title().replace("\n", " ")
    assert "RL: advantage over base not shown to differ between error and matched states" in title
    assert "RL: advantage over sharpened base larger at error states than at matched states" in title
    assert "(percentage points)" in fig.axes[0].get_ylabel()
    assert "95% t-interval" in title


def test_matched_differences_from_the_win_table():
    win = pd.DataFrame(
        {
            "rl vs base": {"mean_diff": 0.02, "t_low": 0.01, "t_high": 0.03},
            "rl vs sharp": {"mean_diff": 0.0, "t_low": -0.01, "t_high": 0.01},
        }
    )
    title = plots.matched_differences(win).axes[0].get_title().replace("\n", " ")
    assert "RL above base" in title and "RL not shown to differ from sharpened base" in title
