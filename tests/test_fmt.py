"""helpers.fmt, the one number formatter of tables, findings and figures: fixed point, no -0, n/a for a value not
measured, NaN as NaN, estimates with intervals, the side of 0."""

from __future__ import annotations

import pytest

from helpers import fmt


@pytest.mark.parametrize(
    ("x", "kw", "text"),
    [
        (0.5004, {}, "0.500"),
        (-0.0001, {}, "0.000"),
        (-0.0, {"digits": 1}, "0.0"),
        (-0.4, {"digits": 0}, "0"),
        (-0.6, {"digits": 0}, "-1"),
        (1e-9, {}, "0.000"),
        (12.25, {"digits": 1}, "12.2"),
        (123456.0, {}, "123456.000"),
        (float("nan"), {}, "NaN"),
        (None, {}, "n/a"),
        (0.714, {"digits": 1, "scale": 100}, "71.4"),
        (0.124, {"sign": True}, "+0.124"),
        (-0.05, {"sign": True}, "-0.050"),
        (0.0, {"sign": True}, "0.000"),
        (-0.0004, {"sign": True}, "0.000"),
        (3, {"digits": 0}, "3"),
    ],
)
def test_number_is_fixed_point_and_never_minus_zero(x, kw, text):
    assert fmt.number(x, **kw) == text


def test_signed_percent_points():
    assert fmt.signed(0.124) == "+0.124" and fmt.signed(-0.05) == "-0.050" and fmt.signed(-1e-6) == "0.000"
    assert fmt.signed(8.66, 1) == "+8.7" and fmt.signed(None) == "n/a"
    assert fmt.percent(0.714) == "71.4 %" and fmt.percent(0.5, 0) == "50 %"
    assert fmt.percent(None) == "n/a" and fmt.percent(float("nan")) == "NaN"
    assert (
        fmt.points(0.116) == "+11.6"
        and fmt.points(-0.0004) == "0.0"
        and fmt.points(0.116, sign=False) == "11.6"
    )


def test_interval_and_estimate():
    assert fmt.interval((0.047, 0.197)) == "[0.047, 0.197]"
    assert fmt.interval((-0.0001, 0.5), 1, sign=True) == "[0.0, +0.5]"
    assert fmt.interval(None) == "n/a"
    assert fmt.estimate(0.124, (0.047, 0.197), signed=True) == "+0.124 [+0.047, +0.197]"
    assert fmt.estimate(0.116, (0.005, 0.223), scale=100, digits=1, signed=True) == "+11.6 [+0.5, +22.3]"
    assert fmt.estimate(0.714, [0.618, 0.802], scale=100, digits=1, unit="%") == "71.4 % [61.8, 80.2]"
    assert fmt.estimate(0.5, None) == "0.500"
    assert fmt.estimate(None, (0.1, 0.2)) == "n/a"


def test_entry_reads_a_metrics_entry():
    assert fmt.entry({"mean": 0.84, "ci": [0.813, 0.866]}) == "0.840 [0.813, 0.866]"
    change = {"start": 0.474, "change": 0.124, "change_ci": [0.047, 0.197]}
    assert fmt.entry(change, "change", signed=True) == "+0.124 [+0.047, +0.197]"  # <key>_ci where present
    win = {"better": 0.598, "better_ci": [0.54, 0.659]}
    assert fmt.entry(win, "better", scale=100, digits=1, unit="%") == "59.8 % [54.0, 65.9]"
    assert (
        fmt.entry(None) == "n/a" and fmt.entry({}) == "n/a" and fmt.entry({"change": None}, "change") == "n/a"
    )


def test_side_is_the_verdict_of_an_interval():
    assert fmt.side(0.005, 0.223) == "above 0"
    assert fmt.side(-0.3, -0.1) == "below 0"
    assert fmt.side(-0.1, 0.1) == "contains 0" and fmt.side(0.0, 0.1) == "contains 0"


def test_joined_keeps_the_order_of_a_dict():
    assert fmt.joined({"0.25": 0.3, "0.5": 0.591, "1": None}) == "0.30 / 0.59 / n/a"
    assert fmt.joined([8.66, 0.0, -0.02], 1, sign=True) == "+8.7 / 0.0 / 0.0"


def test_no_negative_zero():
    assert (
        fmt.no_negative_zero("gain -0.0 [-0.0, +6.9], -0.05, -10.0, -0")
        == "gain 0.0 [0.0, +6.9], -0.05, -10.0, 0"
    )
    assert fmt.no_negative_zero("x-0.0 and 1-0") == "x-0.0 and 1-0"  # part of a word or a range: left alone


# ------------------------------------------------------------------------------------------------------ tables


def test_header_plain_words_keep_paper_and_method_names():
    assert fmt.header("n_states") == "states" and fmt.header("upper_bound") == "structural upper bound"
    assert fmt.header("budget_awareness_points") == "budget awareness (points)"
    assert fmt.header("rl_sharp vs sharp") == "sharpened RL vs sharpened base"
    assert fmt.header("rl_vs_base") == "RL vs base"
    assert [fmt.header(n) for n in ("R_multi", "T_max", "oracle_q - grpo", "grpo-s0", 0.25)] == [
        "R_multi",
        "T_max",
        "oracle_q - grpo",
        "grpo-s0",
        0.25,
    ]


def test_table_drops_empty_columns_names_rows_and_shows_not_applicable():
    import pandas as pd

    df = pd.DataFrame(
        {
            "T": [1, 2, 3],
            "upper_bound": [0.27, 0.472, 0.625],
            "base": [float("nan"), 0.142, float("nan")],
            "n_maps": [36.0, 72.0, 100.0],
            "unused": [float("nan")] * 3,
        }
    )
    t = fmt.table(df)
    assert list(t.columns) == ["structural upper bound", "base", "maps"]  # the all-NaN column is gone
    assert t.index.name == "T" and list(t.index) == [1, 2, 3]  # the first column names the rows, not 0, 1, 2
    assert t["base"].tolist() == ["-", "0.142", "-"]  # not measured at that T: '-', not NaN
    assert t["maps"].tolist() == [36, 72, 100]  # counts as integers, not 36.000
    assert t["structural upper bound"].tolist() == ["0.270", "0.472", "0.625"]
    assert "NaN" not in t.to_html() and "nan" not in t.to_html()


def test_table_cells_dicts_lists_intervals():
    import pandas as pd

    df = pd.DataFrame(
        {
            "error_minus_matched": [-0.028],
            "ci": [[-0.116, 0.080]],
            "per_seed": [[-0.093, 0.006, 0.113]],
            "paired": [{"diff": -0.028017, "low": -0.1381, "high": 0.081, "n_seeds": 5, "mde": 0.1}],
        },
        index=["rl_vs_base"],
    )
    t = fmt.table(df)
    assert list(t.index) == ["RL vs base"]
    row = t.iloc[0].tolist()
    assert row == [
        "-0.028",
        "[-0.116, 0.080]",
        "-0.093 / 0.006 / 0.113",
        "-0.028 [-0.138, +0.081] (contains 0; MDE 0.100)",
    ]
    assert "{" not in t.to_html() and "'diff'" not in t.to_html()


def test_table_index_columns_and_rename():
    import pandas as pd

    df = pd.DataFrame(
        {"comparison": ["rl vs base"] * 2, "depth_bin": ["[0, 0.5)", "[0.5, 1)"], "tie": [0.1, 0.2]}
    )
    t = fmt.table(df, index=["comparison", "depth_bin"], rename={"tie": "ties"})
    assert list(t.index.names) == ["comparison", "depth t / T_max"] and list(t.columns) == ["ties"]
    assert fmt.table(None) is None


def test_record_pairs_listing():
    r = fmt.record(
        {
            "task_id": "x",
            "calls": 10,
            "success": True,
            "check": {"valid": False, "error_type": "e"},
            "classes": ["A", "B"],
            "transcript": [],
        },
        skip=("transcript",),
    )
    assert r.index.name == "quantity" and r["value"].to_dict() == {
        "task id": "x",
        "calls": 10,
        "success": True,
        "check: valid": False,
        "check: error type": "e",
        "classes": "A, B",
    }
    assert fmt.pairs({1: 21, 2: 38}, key="T") == "T = 1: 21, T = 2: 38"
    assert fmt.listing([1, 2, 3]) == "1, 2, 3"


def test_a_table_without_rows_keeps_its_columns_and_takes_its_index():
    """bfcl and InterCode-SQL have no depth bins: 04's empty depth table must still render with its index."""
    import pandas as pd

    empty = pd.DataFrame(columns=["comparison", "depth_bin", "win_rate"])
    out = fmt.table(empty, index=["comparison", "depth_bin"])
    assert len(out) == 0 and out.shape[1] == 1
    assert len(fmt.table(pd.DataFrame(), index=["comparison", "depth_bin"])) == 0
    with pytest.raises(KeyError):
        fmt.table(pd.DataFrame({"win_rate": [0.5]}), index=["comparison", "depth_bin"])
