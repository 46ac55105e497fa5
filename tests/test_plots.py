"""The figures and tables a reader sees: axis ticks, intervals and their labels, n where it varies, number
formatting (no e-notation, no -0)."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from helpers import llr, matched, metrics, plots

E_NOTATION = re.compile(r"\d[eE][+-]?\d")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig: plt.Figure) -> str:
    """Every title, suptitle, legend entry, label and free text of a figure, joined."""
    out = [t.get_text() for t in fig.findobj(plt.Text)]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- numbers, tables


@pytest.mark.parametrize(
    ("x", "digits", "text"),
    [(0.695, 3, "0.695"), (-0.0004, 3, "0.000"), (-0.0, 1, "0.0"), (-0.4, 0, "0"), (-0.6, 0, "-1"),
     (1e-9, 3, "0.000"), (12.25, 1, "12.2"), (float("nan"), 3, "NaN")],
)  # fmt: skip
def test_number_is_fixed_point_without_minus_zero(x, digits, text):
    assert plots.number(x, digits) == text


def test_table_has_no_e_notation_and_no_minus_zero():
    df = pd.DataFrame(
        {"a": [0.695, 1e-9, 0.2], "b": [-0.0001, 5.2, 3.0], "n": [1, 2, 3], "ok": [True, False, True],
         "per_seed": [[0.0366, -1e-7], [0.1], [0.2]], "name": ["x", "y", "z"]},
        index=pd.Index([0.25, 0.5, 1e-8], name="fraction"),
    )  # fmt: skip
    assert E_NOTATION.search(df.to_string())  # what pandas shows without it
    t = plots.table(df)
    for text in (t.to_string(), t._repr_html_()):
        assert not E_NOTATION.search(text)
        assert "-0.000" not in text
    assert t.loc[0.25, "a"] == "0.695" and t.loc[0.5, "a"] == "0.000"
    assert t.loc[0.25, "b"] == "0.000"
    assert t.loc[0.25, "per_seed"] == "[0.037, 0.000]"
    assert t["n"].tolist() == [1, 2, 3] and t["ok"].tolist() == [True, False, True]
    assert list(t.index) == [0.25, 0.5, 0.0]
    assert plots.table(df["b"], 1).iloc[:, 0].tolist() == ["0.0", "5.2", "3.0"]  # a Series becomes a table
    assert plots.table(None) is None  # a section that does not apply to the series shows nothing


def test_table_rounds_float_levels_of_a_multiindex():
    df = pd.DataFrame({"x": [0.5, 0.25]}, index=pd.MultiIndex.from_tuples([(0.0, 0.66868), (1.0, 0.381148)]))
    t = plots.table(df)
    assert list(t.index) == [(0.0, 0.669), (1.0, 0.381)]


# ------------------------------------------------------------------------------------------------- Pass@(K, T)


def _pass_table(ks=(1, 2, 3, 4, 8, 16), Ts=(1, 2)) -> pd.DataFrame:
    rows = []
    for T in Ts:
        for m in ("base", "grpo"):
            for K in ks:
                p = 0.2 * T + 0.02 * K + (0.05 if m == "grpo" else 0)
                rows.append({"model": m, "T": T, "K": K, "pass": p, "low": p - 0.05, "high": p + 0.05,
                             "n_seeds": 3 if m == "grpo" else 1, "n_tasks": 50})  # fmt: skip
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
    diff = pd.DataFrame([[-0.3, 5.2], [-0.6, 0.4]], index=pd.Index([1, 2], name="T"),
                        columns=pd.Index([1, 2], name="K"))  # fmt: skip
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
                rows.append({"trajectory": i, "model": "likelihood-base", "turn": turn, "cum_llr": -turn +
                             rng.normal(), "success": True, "trajectories_of": "base", "rl_seed": seed})  # fmt: skip
        for i in range(12):
            for turn in (1, 2):
                rows.append({"trajectory": i, "model": f"likelihood-{seed}", "turn": turn, "cum_llr": turn +
                             rng.normal(), "success": True, "trajectories_of": "rl", "rl_seed": seed})  # fmt: skip
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
    rows = [{"model": m, "method": m, "fraction": f, "budget": int(8 * f), "success": 0.5, "low": 0.4,
             "high": 0.6, "n_seeds": 3 if m == "grpo" else 1, "n_tasks": 100}
            for m in ("base", "grpo") for f in (0.5, 1.0)]  # fmt: skip
    fig = plots.budget_bars(pd.DataFrame(rows), {0.5: 0.7, 1.0: 0.9})
    assert "error bars: 95% bootstrap interval over RL seeds × 100 tasks" in fig.axes[0].get_title()
    assert "GRPO (3 seeds)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    fig = plots.budget_lines(pd.DataFrame(rows).assign(n_seeds=1))
    assert "error bars: 95% bootstrap interval over 100 tasks" in fig._suptitle.get_text()


def test_error_recovery_titles_give_n_and_the_interval():
    superior = {"rl_vs_base": {"better": 0.7, "better_ci": [0.6, 0.8]}, "n_seeds": 3,
                "n_states_per_seed": [60, 60, 60], "n_dead_per_seed": [2, 0, 1]}  # fmt: skip
    continuation = pd.DataFrame({"model": ["base", "rl"], "success": [0.4, 0.5], "low": [0.3, 0.4],
                                 "high": [0.5, 0.6], "upper_bound": [0.6, 0.6], "n_states": [180, 180],
                                 "n_continuations": [8, 8]})  # fmt: skip
    fig = plots.error_recovery(superior, continuation)
    left, right = (ax.get_title() for ax in fig.axes)
    assert "n = 177 live error states, 3 seeds" in left and "95% interval" in left
    assert "n = 180 error states x 8 continuations" in right and "95% interval" in right


def test_win_rate_by_depth_draws_the_interval_of_the_win_rate():
    rng = np.random.default_rng(3)
    per_state = pd.DataFrame({"depth": rng.uniform(0, 1, 200), "rl": rng.uniform(0, 1, 200),
                              "base": rng.uniform(0, 1, 200), "dead": rng.uniform(0, 1, 200) < 0.1,
                              "rl_seed": np.repeat([0, 1], 100)})  # fmt: skip
    bins = [0.0, 0.5, 1.0]
    iv = matched.depth_win_intervals(per_state, bins, n_boot=200)
    assert list(iv["depth_bin"]) == ["[0.00, 0.50)", "[0.50, 1.00)"]
    assert ((iv["low"] <= iv["better"]) & (iv["better"] <= iv["high"])).all()
    depth = pd.DataFrame({"depth_bin": iv["depth_bin"], "rl_better": iv["better"], "tie": 0.0,
                          "base_better": 1 - iv["better"], "n_live": [90, 90], "n_dead": [10, 10]})  # fmt: skip
    fig = plots.win_rate_by_depth(depth, intervals=iv)
    assert any("95% interval (seeds, states)" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert fig.axes[0].containers  # bars and the error bar


def test_table_keeps_labels_precise_and_handles_repeated_columns():
    df = pd.DataFrame([[1.25, 2.5], [0.04, -0.04]], columns=pd.Index([0.25, 0.75], name="fraction"))
    t = plots.table(df, 1)
    assert list(t.columns) == [0.25, 0.75]  # labels are not rounded to the values' digits
    assert t.iloc[1].tolist() == ["0.0", "0.0"]
    t = plots.table(pd.DataFrame([[0.5, 0.25]], columns=["x", "x"]))
    assert t.iloc[0].tolist() == ["0.500", "0.250"]


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
    runs = {
        name: pd.DataFrame({"step": [0, 1], "R_single": [0.1, y]})
        for name, y in (("grpo", 0.2), ("budgetmix", 0.3))
    }
    assert legend_warnings(plots.compare_curves(runs, "R_single", "R_single")) == []
