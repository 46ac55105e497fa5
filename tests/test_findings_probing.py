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
CONSTANTS = {"95"}
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
    assert _unexplained(matched.findings(changed), m) == ["12.3"]


def test_report_dispatches_to_the_modules():
    for notebook, module in MODULES.items():
        assert report.FINDINGS[notebook] is module.findings


def test_matched_findings_read_the_verdicts_from_the_intervals():
    m = _committed("04_step_level_probing")
    s = m["matched_states"]
    text = "\n".join(matched.findings(m))
    assert f"RL better than the base** at {fmt.percent(s['rl_vs_base']['better'])} [" in text
    assert "by depth d_t" in text.lower() and text.count("dead)") == 4  # one entry per depth bin
    m["matched_states"]["rl_vs_base"]["better_ci"] = [0.3, 0.45]
    assert "consistent: RL is better at fewer than half" in "\n".join(matched.findings(m))
    m["matched_states"]["rl_vs_base"]["better_ci"] = [0.45, 0.55]
    assert "undecided at this sample size" in "\n".join(matched.findings(m))


def test_recovery_findings_say_where_each_interval_lies():
    m = _committed("05_error_recovery")
    text = "\n".join(recovery.findings(m))
    for k, v in m["continuation_difference"].items():
        assert f"**{k}** (continuation): {fmt.points(v['mean'])} points" in text
        assert f"interval {fmt.side(*v['ci'])}" in text
    m["concentration"]["rl_vs_base"]["ci"] = [-0.2, -0.1]
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
    for module, result, why in ((matched, matched.Probe(oracle), matched.SKIPPED),
                                (recovery, recovery.Recovery(oracle), recovery.SKIPPED)):  # fmt: skip
        m = module.summary(cfg, result)
        assert m == probing.skipped(oracle, why) == {**oracle, "skipped": why}
        assert module.figures(result) == {} and module.statement(result) == probing.oracle_statement(oracle)
        lines = module.findings(m)
        assert lines == [f"- **Skipped on {env}:** {why}, and {env} has none ({oracle['oracle_note']}); the paper "
                         "runs this analysis on FrozenLake and DeepCoder-MT only."]  # fmt: skip
        assert _unexplained(lines, m) == []
