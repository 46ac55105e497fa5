"""The findings of notebooks 04-06 (`helpers.matched`, `helpers.recovery`, `helpers.llr`), read from the committed
run's metrics.json and from the metrics a notebook writes where it skips: every number a finding prints is one of
the metrics' numbers, formatted (no number is typed or derived in the text), and a skipped run says why."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator

import pytest

from helpers import config, envs, fmt, llr, matched, probing, recovery, report
from helpers.config import REPO_ROOT

MODULES = {"04_step_level_probing": matched, "05_error_recovery": recovery, "06_likelihood_analysis": llr}
COMMITTED = REPO_ROOT / "results" / "cpu"
# numbers the findings state as constants of the method, not as measurements
CONSTANTS = {"95", "04", "05"}  # and the notebooks the prose names
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?")


def _committed(notebook: str) -> dict:
    return json.loads((COMMITTED / notebook / "metrics.json").read_text())


def _leaves(x: object) -> Iterator[float]:
    """Every number of a metrics tree, numbers inside its strings too (the depth bins' labels)."""
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _leaves(v)
    elif isinstance(x, str):
        yield from (float(t) for t in NUMBER.findall(x))
    elif isinstance(x, int | float) and not isinstance(x, bool):
        yield x


def _printable(m: dict) -> set[str]:
    """Each number of `m` as the findings may print it: fixed point with 0-3 decimals, as itself or in percent,
    signed or not, `:g`, and integers as they are."""
    out = set(CONSTANTS)
    for v in _leaves(m):
        out.add(f"{v:g}")
        if isinstance(v, int):
            out.add(str(v))
        for digits in range(4):
            for scale in (1.0, 100.0):
                out.add(fmt.number(v, digits, scale))
                out.add(fmt.number(v, digits, scale, sign=True))
    return out


def _unexplained(lines: list[str], m: dict) -> list[str]:
    allowed = _printable(m)
    return [t for t in NUMBER.findall(fmt.no_negative_zero("\n".join(lines))) if t not in allowed]


@pytest.mark.parametrize("notebook", sorted(MODULES))
def test_every_number_of_the_committed_findings_is_a_metric(notebook):
    m = _committed(notebook)
    lines = MODULES[notebook].findings(m)
    assert len(lines) >= 3 and all(line.strip() for line in lines)
    assert NUMBER.findall("\n".join(lines)), "the findings print numbers"
    assert _unexplained(lines, m) == []


def test_the_check_catches_a_number_that_is_not_a_metric():
    m = _committed("04_step_level_probing")
    lines = matched.findings(m)
    assert _unexplained([*lines, "RL better at 12.3456 % of states"], m) == ["12.3456"]
    changed = copy.deepcopy(m)
    changed["matched_states"]["rl_vs_base"]["better"] = (
        0.123456  # the text changes, the metrics it is checked on do not
    )
    assert set(_unexplained(matched.findings(changed), m)) == {"12.3"}  # the win rate, wherever it is printed


def test_report_dispatches_to_the_modules():
    for notebook, module in MODULES.items():
        assert report.FINDINGS[notebook] is module.findings


def test_matched_findings_read_the_verdicts_from_the_intervals():
    """Issue 27: the paper's claim is decided by the paired, tie-aware interval of the mean quality difference (with
    wins, ties and losses and wins minus losses beside it), never by the win rate against 1/2; a run from before the
    paired verdicts gets none."""
    m = _committed("04_step_level_probing")
    s = m["matched_states"]
    text = "\n".join(matched.findings(m))
    assert f"RL better than the base** at {fmt.percent(s['rl_vs_base']['better'])} of live states" in text
    assert (
        f"{fmt.percent(s['rl_vs_base']['better'])} [" not in text
    )  # issue 53: the win rate's interval in the table
    assert "by depth d_t" in text.lower() and text.count("dead)") == 4  # one entry per depth bin
    old = copy.deepcopy(m)  # a run from before the paired verdicts: no paired interval, no verdict
    for v in old["matched_states"].values():
        if isinstance(v, dict):
            v.pop("paired", None)
    assert "no verdict from this run" in "\n".join(matched.findings(old))
    old["matched_states"]["rl_vs_base"]["better_ci"] = [0.3, 0.45]  # a win rate below 1/2 decides nothing
    assert "no verdict from this run" in "\n".join(matched.findings(old))
    m = copy.deepcopy(_committed("04_step_level_probing"))
    _with_differences(m["matched_states"])
    m["power"] = 0.8
    rb = m["matched_states"]["rl_vs_base"]
    means = {
        (
            0.011,
            -0.009,
            0.031,
        ): "on average: +0.011 [-0.009, +0.031] (contains 0; MDE 0.030): contains 0: this sample cannot tell",
        (-0.02, -0.035, -0.005): "RL's steps are worse on average: as in the paper (no better)",
        (0.02, 0.005, 0.035): "RL's steps are better on average: not as in the paper",
    }
    often = {
        (0.05, 0.01, 0.09): "wins minus losses +0.050 [+0.010, +0.090] (above 0; MDE 0.030): RL wins at more "
        "states than it loses: not as in the paper",
        (-0.05, -0.09, -0.01): "RL loses at more states than it wins: as in the paper",
        (0.01, -0.03, 0.05): "wins minus losses +0.010 [-0.030, +0.050] (contains 0; MDE 0.030): contains 0",
    }
    for (diff, low, high), verdict in means.items():  # each half decided by its own interval, independently
        for (n_diff, n_low, n_high), share_verdict in often.items():
            rb["paired"] = _paired(diff, low, high)
            rb["net_win_paired"] = _paired(n_diff, n_low, n_high)
            for better_ci in ([0.3, 0.45], [0.55, 0.7]):  # the win rate's interval changes nothing
                rb["better_ci"] = better_ci
                lines = matched.findings(m)
                base = _claim(lines)["base"]
                assert verdict in base and share_verdict in base and _unexplained(lines, m) == []
                assert f"on average: {fmt.verdict(rb['paired'], digits=3)}" in base
                assert (
                    f"how often: wins {fmt.percent(rb['better'])} / ties {fmt.percent(rb['tie'])} / losses "
                    f"{fmt.percent(rb['worse'])}, wins minus losses"
                ) in base
    sharp = _claim(matched.findings(m))["sharp"]
    assert "a per-step gain beyond sharpening" in sharp  # net win above 0 against the sharpened base
    assert "on average: +0.011 [-0.009, +0.031] (contains 0; MDE 0.030): contains 0" in sharp
    m["matched_states"]["rl_vs_sharp"]["paired"] = _paired(-0.02, -0.035, -0.005)
    assert "no per-step gain beyond sharpening" in _claim(matched.findings(m))["sharp"]
    del m["matched_states"]["rl_vs_sharp"]["net_win_paired"]
    assert (
        "no paired interval of wins minus losses in this run: no verdict"
        in _claim(matched.findings(m))["sharp"]
    )


def _claim(lines: list[str]) -> dict[str, str]:
    """04's verdict on the paper's claim: its header, then one sub-line per comparison, each with its two halves."""
    i = next(i for i, line in enumerate(lines) if line.startswith("- **The paper's claim**"))
    assert lines[i].endswith("in two halves:")
    base, sharp = lines[i + 1], lines[i + 2]
    assert base.startswith("  - RL against the base: how often: ") and "; on average: " in base
    assert sharp.startswith("  - RL against the sharpened base: how often: ")
    return {"base": base, "sharp": sharp}


def test_recovery_findings_say_where_each_interval_lies():
    m = _committed("05_error_recovery")
    text = "\n".join(recovery.findings(m))
    for k, v in m["continuation_difference"].items():
        p = m.get("continuation_paired", {}).get(k)
        said = f"paired by seed {fmt.verdict(p, scale=100)}" if p else f"{fmt.points(v['mean'])} points"
        assert (
            f"**{k}** (continuation): {said}" in text
        )  # issue 53: one interval, the verdict's  # where recorded, the verdict paired by seed decides
        assert f"interval {fmt.side(p['low'], p['high']) if p else fmt.side(*v['ci'])}" in text
    m["concentration"]["rl_vs_base"]["ci"] = [-0.2, -0.1]
    if m["concentration"]["rl_vs_base"].get("paired"):  # where recorded, the paired interval decides
        m["concentration"]["rl_vs_base"]["paired"] |= {"low": -0.2, "high": -0.1, "excludes_zero": True}
    assert "lower at error states" in "\n".join(recovery.findings(m))


def test_llr_findings_without_successful_rl_trajectories_leave_out_the_direction():
    m = _committed("06_likelihood_analysis")
    assert any(line.startswith("- **Direction:**") for line in llr.findings(m))
    del m["cum_llr_successful"]["rl"]
    lines = llr.findings(m)
    assert not any("Direction" in line for line in lines)
    assert _unexplained(lines, m) == []


@pytest.mark.parametrize("env", ["bfcl", "intercode_sql"])
def test_skipped_metrics_and_findings_on_an_environment_without_a_step_oracle(env):
    cfg = config.load("smoke")  # a skip's summary reads no setting of the profile
    oracle = envs.step_oracle(env)
    assert not oracle["step_oracle"]
    for module, result, why in (
        (matched, matched.Probe(oracle), matched.SKIPPED),
        (recovery, recovery.Recovery(oracle), recovery.SKIPPED),
    ):
        m = module.summary(cfg, result)
        assert m == probing.skipped(oracle, why) == {**oracle, "skipped": why}
        assert module.figures(result) == {} and module.statement(result) == probing.oracle_statement(oracle)
        lines = module.findings(m)
        assert lines == [
            f"- **Skipped on {env}:** {why}, and {env} has none ({oracle['oracle_note']}); the paper "
            "runs this analysis on FrozenLake and DeepCoder-MT only."
        ]
        assert _unexplained(lines, m) == []


def _paired(diff: float, low: float, high: float, mde: float = 0.03) -> dict:
    return {
        "diff": diff,
        "low": low,
        "high": high,
        "mde": mde,
        "sd_diff": 0.02,
        "excludes_zero": low > 0 or high < 0,
        "n_seeds": 3,
        "per_seed": [diff, diff, diff],
    }


def _with_differences(s: dict) -> None:
    """Hand-made mean quality differences of every comparison, and the symmetric control, in a seed summary."""
    s["rl_sharp_vs_sharp"] = copy.deepcopy(s["rl_vs_sharp"])
    for k in ("rl_vs_base", "rl_vs_sharp", "sharp_vs_base", "rl_sharp_vs_sharp"):
        s[k] |= {
            "mean_diff": 0.011,
            "mean_diff_ci": [-0.004, 0.026],
            "paired": _paired(0.011, -0.009, 0.031),
            "net_win": 0.05,
            "net_win_paired": _paired(0.05, 0.01, 0.09),
        }
    s["rl_sharp_vs_sharp"]["paired"] = _paired(0.021, 0.004, 0.038)


def test_matched_findings_report_mean_differences_ties_and_the_symmetric_control():
    """Issue 27: beside win rates, each comparison's mean quality difference (ties count as 0) paired by seed with
    its MDE and the shares of wins, ties and losses; the symmetric control's verdict is its paired interval."""
    m = copy.deepcopy(_committed("04_step_level_probing"))
    _with_differences(m["matched_states"])
    m["power"] = 0.8
    lines = matched.findings(m)
    text = "\n".join(lines)
    assert _unexplained(lines, m) == []
    assert "RL minus base +0.011 [-0.009, +0.031] (contains 0; MDE 0.030)" in text
    s = m["matched_states"]["rl_vs_base"]
    assert (
        f"rl vs base {fmt.percent(s['better'])} / {fmt.percent(s['tie'])} / {fmt.percent(s['worse'])}" in text
    )
    assert "**Symmetric control**" in text and "+0.021 [+0.004, +0.038] (above 0; MDE 0.030)" in text
    assert "a per-step gain beyond sharpening" in text and text.count("dead)") == 4
    m["matched_states"]["rl_sharp_vs_sharp"]["paired"] = _paired(0.001, -0.02, 0.022)
    sym = next(x for x in matched.findings(m) if "**Symmetric control**" in x)
    assert "on average: +0.001 [-0.020, +0.022]" in sym and matched._UNDECIDED in sym
    m["matched_states"]["rl_sharp_vs_sharp"].pop(
        "net_win_paired", None
    )  # a run without the net-wins interval
    assert "cannot tell RL's per-step gain from sharpening" in "\n".join(matched.findings(m))


def test_recovery_findings_decide_by_the_paired_intervals():
    m = copy.deepcopy(_committed("05_error_recovery"))
    _with_differences(m["superior_action"])
    m["power"] = 0.8
    for key in ("rl_vs_base", "rl_vs_sharp"):
        m["concentration"][key]["paired"] = _paired(-0.05, -0.09, -0.01)
        m["concentration"][key]["ci"] = [
            -0.1,
            0.2,
        ]  # the seeds-then-states interval contains 0; paired decides
    m["continuation_paired"] = {k: _paired(0.04, 0.01, 0.07) for k in m["continuation_difference"]}
    lines = recovery.findings(m)
    text = "\n".join(lines)
    assert _unexplained(lines, m) == []
    assert text.count("lower at error states") == 2 and "**Symmetric control**" in text
    for k in m["continuation_difference"]:
        assert f"**{k}** (continuation):" in text
    assert "paired by seed +4.0 [+1.0, +7.0] (above 0; MDE 3.0) points: interval above 0." in text


def test_llr_direction_is_decided_by_the_interval_of_the_difference():
    """Issue 27: the direction is the side of 0 of the paired interval of RL's minus the base's cumulative LLR
    (`llr.llr_difference`), never whether two separate intervals overlap; a run without it gets no verdict."""
    m = _committed("06_likelihood_analysis")
    m.pop("cum_llr_difference", None)
    m["cum_llr_successful"]["rl"]["ci"] = [5.0, 6.0]  # far apart intervals decide nothing
    direction = next(line for line in llr.findings(m) if line.startswith("- **Direction:**"))
    assert "no verdict from this run" in direction
    cases = {
        (1.7, 0.9, 2.5): "are likelier under RL",
        (-0.4, -0.7, -0.1): "are less likely under RL",
        (0.3, -0.5, 1.1): "cannot tell the direction",
    }
    for (diff, low, high), verdict in cases.items():
        m["cum_llr_difference"] = _paired(diff, low, high)
        lines = llr.findings(m)
        direction = next(line for line in lines if line.startswith("- **Direction:**"))
        assert verdict in direction and fmt.verdict(m["cum_llr_difference"], digits=2) in direction
        assert _unexplained(lines, m) == []


def test_llr_difference_pairs_the_seeds():
    """`llr.llr_difference`: per seed, the mean final cumulative LLR of its successful trajectories minus the
    base's, as `stats.paired_verdict` of the seed means."""
    import pandas as pd

    from helpers import stats

    rows = []
    for k, (r, b) in enumerate([(2.0, 1.0), (3.0, 0.5), (2.5, 1.5)]):
        for role, v in (("rl", r), ("base", b)):
            for t, extra in enumerate((0.2, -0.2)):  # two successful trajectories, last turn's value counts
                rows += [
                    {
                        "rl_seed": f"grpo-s{k}",
                        "trajectories_of": role,
                        "trajectory": t,
                        "turn": 1,
                        "cum_llr": 99.0,
                        "success": True,
                    },
                    {
                        "rl_seed": f"grpo-s{k}",
                        "trajectories_of": role,
                        "trajectory": t,
                        "turn": 2,
                        "cum_llr": v + extra,
                        "success": True,
                    },
                ]
            rows.append(
                {
                    "rl_seed": f"grpo-s{k}",
                    "trajectories_of": role,
                    "trajectory": 9,
                    "turn": 1,
                    "cum_llr": -50.0,
                    "success": False,
                }
            )
    d = llr.llr_difference(pd.DataFrame(rows), ["grpo-s0", "grpo-s1", "grpo-s2"])
    assert d == stats.paired_verdict([2.0, 3.0, 2.5], [1.0, 0.5, 1.5], 0.95, llr.POWER)
    assert d["diff"] == pytest.approx(1.5)


def test_llr_findings_say_the_rl_side_is_a_kl_and_compare_the_base_sign_with_the_papers():
    """Issue 30: a positive ratio on RL's own trajectories holds for any two policies (a KL), so the findings say so,
    and the base trajectories' sign, decided by its interval, is set beside the paper's (about +26)."""
    m = _committed("06_likelihood_analysis")
    text = "\n".join(llr.findings(m))
    assert "KL(pi_RL || pi_base)" in text
    cases = {
        (-1.2, -0.6): "the opposite sign",
        (0.4, 0.9): "the same sign",
        (-0.2, 0.3): "no sign to compare",
    }
    for (lo, hi), words in cases.items():
        (line,) = llr.kl_caveat({"mean": (lo + hi) / 2, "ci": [lo, hi]}, 26.0)
        assert words in line and "the paper's is about +26" in line
    assert "opposite" in llr.kl_caveat({"mean": 0.5, "ci": [0.2, 0.8]}, -3.0)[0]
    assert "paper" not in llr.kl_caveat({"mean": 0.5, "ci": [0.2, 0.8]}, None)[0]


def test_recovery_findings_name_the_depth_confound_of_concentration():
    """Issue 30: error states sit later than matched states, so the concentration verdict carries that caveat."""
    m = _committed("05_error_recovery")
    text = "\n".join(recovery.findings(m))
    assert "depth confound" in text and text.index("**Concentration**") < text.index("depth confound")
    m = copy.deepcopy(m)
    m["concentration"] = {}
    assert "depth confound" not in "\n".join(recovery.findings(m))
