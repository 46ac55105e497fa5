"""Each analysis module's findings (notebooks 00-03 and 07) on the committed cpu run's metrics.json: every number a
findings section prints is one of its metrics' numbers, formatted (or one of a few named constants of the prose),
and the report's headline table shows the committed numbers."""

from __future__ import annotations

import contextlib
import copy
import json
import re

import pytest

from helpers import budgetmix, dynamics, fmt, pass_kt, remember, report, store, supervision, testbed
from helpers.config import REPO_ROOT

COMMITTED = REPO_ROOT / "results" / "cpu"
FINDINGS = {
    "00_environments": testbed.findings,
    "01_grpo_training": dynamics.findings,
    "02_budgetmix_training": budgetmix.findings,
    "03_pass_at_kt_sweep": pass_kt.findings,
    "07_process_supervision": supervision.findings,
}
# numbers the prose itself states (not measurements): the side of 0, the 95 % of an interval, ...
CONSTANTS = {
    "00_environments": {"0.80": "the testbed's requirement on base over demonstrator", "5": "under 5 points"},
    "01_grpo_training": {
        "0": "cannot be told from 0",
        "5": "the first and last 5 steps",
        "95": "95 % interval",
    },
    "02_budgetmix_training": {
        "0": "above / below 0",
        "4": "the paper's mean of 4 tasks",
        "95": "95 % intervals",
    },
    "03_pass_at_kt_sweep": {"0": "above / below 0", "95": "95 % intervals"},
    "07_process_supervision": {"0": "above 0", "95": "95 % intervals", "01": "notebook 01"},
}
PRINTED = re.compile(r"(?<![\w.+-])[+-]?\d+(?:\.\d+)?")  # a number standing on its own, not part of a name


def _metrics(notebook: str) -> dict:
    return json.loads((COMMITTED / notebook / "metrics.json").read_text())


def _leaves(node) -> list[float]:
    """Every number in a metrics tree: leaves, list items and keys that are numbers ("0.25", "8")."""
    out: list[float] = []
    if isinstance(node, dict):
        for k, v in node.items():
            with contextlib.suppress(ValueError):
                out.append(float(k))
            out += _leaves(v)
    elif isinstance(node, list):
        for v in node:
            out += _leaves(v)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out.append(float(node))
    return out


def _spellings(values: list[float]) -> set[str]:
    """Every way the kit prints these numbers: fixed point with 0-3 decimals, as themselves or in percent (points),
    signed or not, and `:g`; a bare `0` only for a number that is 0 (every small number rounds to it)."""
    out: set[str] = set()
    for x in values:
        out.add(f"{x:g}")
        for scale in (1, 100):
            for digits in range(4):
                out |= {fmt.number(x, digits, scale), fmt.number(x, digits, scale, sign=True)}
    return out if 0.0 in values else out - {"0"}


def unexplained(text: str, m: dict, constants=()) -> list[str]:
    """The numbers `text` prints that are neither a number of `m` (formatted) nor one of `constants`."""
    allowed = _spellings(_leaves(m)) | set(constants)
    return [n for n in PRINTED.findall(text) if n not in allowed]


def test_the_check_catches_a_number_that_is_not_in_the_metrics():
    m = {"a": {"change": 0.124, "change_ci": [0.047, 0.197]}, "0.25": 3}
    assert unexplained("change +0.124 [+0.047, +0.197] at 25 % (3 runs)", m) == []
    assert unexplained("change +0.125 [+0.047, +0.197], 12.4 %, 4x4 maps, Qwen3, s0", m) == ["+0.125", "4"]
    assert unexplained("above 0", m) == ["0"] and unexplained("above 0", m, {"0"}) == []


@pytest.mark.parametrize("notebook", sorted(FINDINGS))
def test_every_printed_number_is_a_metric(notebook):
    m = _metrics(notebook)
    lines = FINDINGS[notebook](m)
    assert lines and all(isinstance(line, str) and line for line in lines)
    text = "\n".join(lines)
    assert unexplained(text, m, CONSTANTS[notebook]) == [], text
    assert report.findings.__doc__  # the dispatch exists ...
    assert report.FINDINGS[notebook] is FINDINGS[notebook]  # ... and reaches the module's findings


def test_findings_00_testbed_numbers():
    m = _metrics("00_environments")
    text = "\n".join(testbed.findings(m))
    fl = m["frozenlake"]
    assert (
        f"Structural upper bound** at 25 / 50 / 75 / 100 % of T_max: {fmt.joined(fl['upper_bound'])}" in text
    )
    for headroom in (
        "noise_points",
        "habit_points",
        "budget_awareness_points",
        "budget_awareness_vs_mix_points",
    ):
        assert fmt.joined(fl[headroom], 1, sign=True) in text
    aware = list(fl["budget_awareness_points"].values())
    shows = min(aware[:2]) >= 8 and aware[2] >= 4
    assert (
        "at least 8 points at 25 % and 50 % of T_max and 4 at 75 %"
        if shows
        else "under 8 points at 25 % or 50 %"
    ) in text
    # issue 50: reading the budget is judged against the blind policy for the mix, per map, never by the T_max gap
    assert (
        "Only the last (against the blind policy for the mix) needs an agent that *reads* the budget" in text
    )
    if fl.get("mix_gap_per_map"):
        mg = fl["mix_gap_per_map"]
        assert f"{fmt.number(mg['mean'], 1)} points per map" in text and f"{mg['n_at_least_10']} of" in text
    if fl.get("doorway"):
        d = fl["doorway"]
        assert f"success rate {d['success_rate']:g}" in text
        assert f"worth {fmt.number(d['mix_gap_min'], 1)} to {fmt.number(d['mix_gap_max'], 1)} points" in text
    assert f"{fmt.joined(fl['solvable_maps'], 0)} of {fl['n_test_maps']}" in text
    assert f"lowest {fmt.number(fl['min_base_over_demonstrator'], 2)}" in text
    assert ("met)" if fl["min_base_over_demonstrator"] >= 0.8 else "NOT met)") in text


def _deepcoder_00() -> dict:
    """The committed notebook 00 metrics as a DeepCoder-MT series would write them (without the protocol)."""
    m = _metrics("00_environments")
    return {k: v for k, v in m.items() if k != "frozenlake"} | {
        "env": "deepcoder",
        "tasks": {"train": 40, "test": 20, "t_max": [5, 5]},
        "step_oracle": {"step_oracle": True, "oracle_note": "the share of unit tests passed"},
        "series": {
            "task_id": "dc-7",
            "t_max": 5,
            "reference_turns": 1,
            "reference_success": True,
            "reference_step_quality": [1.0],
            "base_success": False,
            "base_turns": 5,
            "base_invalid_turns": 3,
        },
    }


def test_findings_00_on_another_environment():
    m = _deepcoder_00()
    lines = testbed.findings(m)
    text = "\n".join(lines)
    assert lines[0] == "- **deepcoder:** 40 training and 20 test tasks, T_max 5."
    assert (
        "succeeds in 1 turns; step quality per turn 1.00." in text
        and "fails in 5 turns, 3 of them invalid" in text
    )
    assert "**Step oracle on deepcoder:** yes: the share of unit tests passed." in text
    assert unexplained(text, m) == []


def test_findings_and_headline_on_deepcoder_name_the_protocol(tmp_path, monkeypatch):
    """Issue 29: a DeepCoder-MT series' findings open with the protocol its metrics.json records, and its headline
    table's kit column names it; metrics without one (FrozenLake, the committed run) print as before."""
    monkeypatch.setattr(store, "_open_series", {})
    m = _deepcoder_00() | {"protocol": "held_out"}
    folder = tmp_path / "smoke" / "deepcoder" / "00_environments"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(m))
    with store.results_at(tmp_path):
        text = report.findings("smoke/deepcoder", "00_environments")
        header = report.markdown("smoke/deepcoder").splitlines()[0]
    first, *rest = text.splitlines()
    assert first.startswith(
        "- **DeepCoder-MT protocol:** `held_out` (`env.extra.deepcoder.protocol`; which tests pay"
    )
    assert rest == testbed.findings(m) and unexplained(text, m) == []
    assert "| kit (smoke/deepcoder tier, protocol held_out): RL against the base |" in header
    assert report.reported_lines(_metrics("00_environments")) == [] and report.reported(_deepcoder_00()) == {}


def test_findings_01_changes_and_the_paper():
    m = _metrics("01_grpo_training")
    text = "\n".join(dynamics.findings(m))
    rm = m["grpo"]["R_multi"]
    assert f"change {fmt.entry(rm, 'change', signed=True)}, interval {fmt.side(*rm['change_ci'])}" in text
    agree = fmt.against_paper(m["paper"]["R_multi_change"], *rm["change_ci"])
    assert f"(paper, DeepCoder-MT: {fmt.signed(m['paper']['R_multi_change'])}: {agree})" in text


def test_findings_01_and_02_without_a_step_oracle():
    m01 = copy.deepcopy(_metrics("01_grpo_training"))
    for mode in ("grpo", "budgetmix"):
        for key in ("R_single", "R_single_pool"):
            m01[mode][key] = {"start": None, "end": None, "change": None, "change_ci": [None, None]}
    m01 |= {"env": "bfcl", "step_oracle": {"step_oracle": False, "oracle_note": "no exact step oracle"}}
    text = "\n".join(dynamics.findings(m01))
    assert "**No R_single on bfcl:** it has no step oracle (no exact step oracle)" in text
    assert "R_single on the" not in text and "the step-reward half of the claim cannot be tested" in text
    assert unexplained(text, m01, CONSTANTS["01_grpo_training"]) == []
    m02 = copy.deepcopy(_metrics("02_budgetmix_training"))
    m02 |= {"env": "bfcl", "r_single_change": {}, "step_oracle": m01["step_oracle"]}
    text = "\n".join(budgetmix.findings(m02))
    assert "- **R_single:** not measured: bfcl has no step oracle (no exact step oracle)." in text
    assert "Test tasks:" in text


def test_findings_02_gains_and_their_sides():
    m = _metrics("02_budgetmix_training")
    text = "\n".join(budgetmix.findings(m))
    g, paired = m["gains_points"]["budgetmix - grpo"], m["gains_paired"]["budgetmix - grpo"]
    assert (
        f"**BudgetMix minus GRPO:** {fmt.joined(g, 1, sign=True)} points, the verdicts paired by seed" in text
    )
    assert (
        budgetmix.paired_cells(m, "budgetmix - grpo") in text
    )  # its one interval per budget: the paired one
    decided = [f for f, v in paired.items() if fmt.side(v["low"], v["high"]) != "contains 0"]
    assert ("Every interval contains 0" in text) == (not decided)


INTERVAL = r"\[[-+]?\d[\d.]*, [-+]?\d[\d.]*\]"


def _prose(text: str) -> list[str]:
    """The findings' prose lines (not the instrument's calibration block, whose planted effects are its own)."""
    return [
        x
        for x in text.splitlines()
        if x.strip() and not x.startswith("  -") and "**Can this instrument" not in x
    ]


@pytest.mark.parametrize("notebook", list(report.FINDINGS))
def test_findings_give_one_interval_per_comparison(notebook, monkeypatch):
    """Issue 53: a comparison's prose shows the verdict's interval (paired by seed) only, never a descriptive
    interval beside it (`+7.5 [+1.6, +12.5]; paired by seed +7.5 [-0.2, +15.2]`); the paper's value is judged
    outright against the run's interval; the symmetric control is judged on both halves (how often, on average)."""
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    text = report.findings("cpu", notebook)
    for line in _prose(text):
        assert not re.search(INTERVAL + r"[^\[]{0,12}paired by seed", line), line
    for line in _prose(text):
        if "(paper, " in line and ("RL better than the base" in line or "better next action" in line):
            assert fmt.AS_PAPER in line or fmt.NOT_AS_PAPER in line, line
    sym = [x for x in text.splitlines() if "**Symmetric control**" in x]
    for line in sym:
        assert "how often:" in line and "on average:" in line and "wins minus losses" in line, line
    if notebook in ("04_step_level_probing", "05_error_recovery"):
        assert sym, notebook


def test_the_readmes_results_block_gives_one_interval_per_comparison(monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    block = report.readme_block("cpu")
    for line in _prose(block):
        assert not re.search(INTERVAL + r"[^\[]{0,12}paired by seed", line), line


def test_findings_02_budget_probe_on_a_hand_made_probe():
    def entry(mean, low, high):
        return {"mean": mean, "low": low, "high": high, "n_states": 30, "n_maps": 12}

    agents = {
        "base": {
            "kind": "model",
            "responsiveness": entry(0.01, -0.02, 0.04),
            "tv_sensitive": entry(0.05, 0, 0.1),
            "tv_control": entry(0.04, 0, 0.1),
        },
        "grpo-s0": {
            "kind": "model",
            "responsiveness": entry(0.2, 0.1, 0.3),
            "tv_sensitive": entry(0.3, 0.2, 0.4),
            "tv_control": entry(0.06, 0, 0.1),
        },
        "budgetmix-s0": {
            "kind": "model",
            "responsiveness": entry(-0.2, -0.3, -0.1),
            "tv_sensitive": entry(0.2, 0.1, 0.3),
            "tv_control": entry(0.07, 0, 0.1),
        },
        "optimum": {"kind": "scripted", "responsiveness": entry(2.0, 2.0, 2.0)},
    }
    bp = {
        "n_sensitive": 30,
        "n_control": 40,
        "n_maps_sensitive": 12,
        "n_maps_control": 20,
        "agents": agents,
        "sources": ["base", "grpo-s0"],
        "n_distinct_states": 500,
        "order": list(agents)[::-1],
    }
    text = "\n".join(budgetmix.swap_findings({"env": "frozenlake", "budget_probe": bp}))
    assert "30 budget-sensitive states on 12 maps and 40 control states on 20 maps" in text
    assert (
        "budgetmix-s0 -0.200 [-0.300, -0.100] (below 0); grpo-s0 +0.200 [+0.100, +0.300] (above 0); base"
        in text
    )
    assert "above 0 for grpo-s0 and below 0 for budgetmix-s0." in text
    assert "budget-aware optimum +2.000." in text
    assert "budgetmix-s0 0.200 / 0.070; grpo-s0 0.300 / 0.060; base 0.050 / 0.040." in text
    none = budgetmix.swap_findings({"env": "bfcl", "budget_probe": None})
    assert none == [f"- **Budget-swap probe:** not run on bfcl: {budgetmix.SWAP_SKIPPED}."]
    empty = budgetmix.swap_findings({"budget_probe": {**bp, "n_sensitive": 0}})
    assert "no budget-sensitive state among the 500 distinct states" in empty[0]


def test_findings_02_budget_probe_of_the_committed_run():
    """The committed probe: the scripted references calibrate it exactly (blind players 0, the optimum 2), and
    findings print every model's responsiveness with the side of 0 its interval lies on."""
    m = _metrics("02_budgetmix_training")
    bp = m["budget_probe"]
    agents = bp["agents"]
    assert agents["habit"]["responsiveness"]["mean"] == agents["blind_t_max"]["responsiveness"]["mean"] == 0
    assert agents["optimum"]["responsiveness"]["mean"] == 2 and agents["optimum"]["tv_control"]["mean"] == 0
    assert {n for n, a in agents.items() if a["kind"] == "model"} == {"sharp", *bp["sources"]}
    text = "\n".join(budgetmix.findings(m))
    for name in bp["sources"]:
        r = agents[name]["responsiveness"]
        assert (
            f"{name} {fmt.estimate(r['mean'], [r['low'], r['high']], signed=True)} ({fmt.side(r['low'], r['high'])})"
            in text
        )


def test_findings_03_claim():
    m = _metrics("03_pass_at_kt_sweep")
    text = "\n".join(pass_kt.findings(m))
    Ts, g = m["T_values"], m["pass_at_t_gap_points"]["grpo - base"]
    first, last = g[str(Ts[0])], g[str(Ts[-1])]
    assert (
        f"is {fmt.signed(first, 1)} points at T = {Ts[0]} and {fmt.signed(last, 1)} at T = {Ts[-1]}" in text
    )
    if "trend" in m:  # decided by the paired interval of the change (issue 27)
        assert f"the change, paired by seed, {fmt.verdict(m['trend']['grpo - base'])}" in text
    else:  # a run from before the paired verdicts
        assert ("(grows with T)" if last > first else "(does not grow with T)") in text


def test_headline_table_of_the_committed_run(monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    rows = report.headline("cpu")
    by = {q: (p, kb, ks) for q, p, kb, ks in rows}
    assert all(len(r) == 4 and all(isinstance(c, str) and c for c in r) for r in rows)
    m01 = _metrics("01_grpo_training")["grpo"]
    assert by["Change of R_multi / R_single (own states) during GRPO"][1] == (
        f"{fmt.entry(m01['R_multi'], 'change', signed=True)} / {fmt.entry(m01['R_single'], 'change', signed=True)}"
    )
    m02 = _metrics("02_budgetmix_training")
    for f in ("0.25", "0.5", "0.75", "1"):
        q = f"Success at {float(f):.0%} of T_max: BudgetMix minus full-budget GRPO (points)"
        g, ci = m02["gains_points"]["budgetmix - grpo"][f], m02["gains_ci"]["budgetmix - grpo"][f]
        assert by[q][1] == fmt.estimate(g, ci, digits=1, signed=True)
    m04 = _metrics("04_step_level_probing")["matched_states"]["rl_vs_base"]
    assert by["RL better than the comparison at matched states"][1] == (
        f"{fmt.percent(m04['better'])} [{fmt.number(m04['better_ci'][0], 1, 100)}, "
        f"{fmt.number(m04['better_ci'][1], 1, 100)}]"
    )
    m03 = _metrics("03_pass_at_kt_sweep")
    assert sum(q.startswith(f"Pass@(K={m03['K']}, T=") for q in by) == len(
        {m03["T_values"][i] for i in (0, len(m03["T_values"]) // 4, -1)}
    )
    assert len(rows) == 2 + 3 + 2 + 1 + 4 + sum(q.startswith("Pass@") for q in by)
    md = report.markdown("cpu").splitlines()
    assert md[1] == "|---|---|---|---|" and len(md) == 2 + len(rows)
    assert not re.search(r"(?<![\w.])-0(?:\.0+)?(?![\d.])", "\n".join(md))


def test_the_readmes_results_block_is_the_committed_run(tmp_path, monkeypatch):
    """The README's results (run facts, headline table, every notebook's findings) are generated from the committed
    metrics.json files: `python -m helpers.report --readme` writes them, and this test fails when they drift."""
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    assert report.update_readme("cpu", check=True), (
        "README.md is stale: run python -m helpers.report --readme"
    )
    # the check can fail: a README whose block differs is reported, and rewriting it makes it current
    stale = tmp_path / "README.md"
    stale.write_text(
        (REPO_ROOT / "README.md").read_text().replace("| quantity | paper |", "| quantity | PAPER |")
    )
    assert not report.update_readme("cpu", check=True, path=stale)
    assert report.update_readme("cpu", path=stale) is False and report.update_readme(
        "cpu", check=True, path=stale
    )


def _verdict(diff: float, low: float, high: float, mde: float = 4.5) -> dict:
    return {
        "diff": diff,
        "low": low,
        "high": high,
        "mde": mde,
        "sd_diff": 3.0,
        "excludes_zero": low > 0 or high < 0,
        "n_seeds": 3,
        "per_seed": [diff - 1, diff, diff + 1],
    }


def test_findings_02_decide_by_the_paired_intervals_and_state_the_mde():
    """Issue 27: with the verdicts paired by seed in the metrics, every side of 0 is the paired interval's (not the
    crossed bootstrap's, not two estimates), the MDE stands beside it, and the symmetric control is reported."""
    m = copy.deepcopy(_metrics("02_budgetmix_training"))
    fr = list(m["gains_points"]["budgetmix - grpo"])
    for c in ("grpo-sharp - sharp", "budgetmix-sharp - sharp"):
        m["gains_points"][c] = {f: 1.5 for f in fr}
        m["gains_ci"][c] = {f: [-4.0, 7.0] for f in fr}
    m["gains_paired"] = {c: {f: _verdict(1.5, -4.0, 7.0) for f in fr} for c in m["gains_points"]}
    m["gains_paired"]["budgetmix - grpo"][fr[0]] = _verdict(6.0, 2.0, 10.0)  # above 0 at the smallest budget
    m["gains_ci"]["budgetmix - grpo"][fr[0]] = [-1.0, 13.0]  # ... where the crossed bootstrap contains 0
    m["power"] = 0.8
    text = "\n".join(budgetmix.findings(m))
    assert unexplained(text, m, CONSTANTS["02_budgetmix_training"]) == [], text
    assert f"The interval is above 0 at {fr[0]} and below 0 at no budget of T_max" in text
    assert "+6.0 [+2.0, +10.0] (above 0; MDE 4.5)" in text and "MDE at 80 % power" in text
    assert "**grpo-sharp - sharp** (GRPO decoded as the sharpened base is" in text
    assert (
        "**budgetmix-sharp - sharp**" in text and "above 0 (RL beats the sharpened base) at no budget" in text
    )


def test_findings_03_decide_growth_with_T_by_the_paired_change():
    m = copy.deepcopy(_metrics("03_pass_at_kt_sweep"))
    Ts = m["T_values"]
    m["pass_at_t_gap_paired"] = {
        c: {str(T): _verdict(2.0, -1.0, 5.0) for T in Ts} for c in m["pass_at_t_gap_points"]
    }
    m["power"] = 0.8
    for low, high, word in (
        (1.0, 9.0, "it grows with T"),
        (-9.0, -1.0, "it shrinks with T"),
        (-3.0, 9.0, "this sample cannot tell whether it grows with T"),
    ):
        m["trend"] = {"grpo - base": _verdict(4.0, low, high) | {"T_min": Ts[0], "T_max": Ts[-1]}}
        text = "\n".join(pass_kt.findings(m))
        assert f"the change, paired by seed, {fmt.verdict(m['trend']['grpo - base'])}: {word}." in text
        assert unexplained(text, m, CONSTANTS["03_pass_at_kt_sweep"]) == [], text
    assert "interval above 0 at T = none" in text  # every paired gap contains 0 here


def test_short_version_decides_each_claim_by_its_interval(monkeypatch):
    """Issue 30: the README's short version is generated, and each verdict follows the side of 0 of its interval,
    not the point: the same point estimate reads differently with an interval that contains 0."""
    committed = {nb: _metrics(nb) for nb in report.FINDINGS}

    def fake(metrics):
        return lambda profile, notebook, *keys, default=None: metrics.get(notebook, default)

    monkeypatch.setattr(report, "_get", fake(committed))
    lines = report.short_version("cpu")
    assert len(lines) == 10 and all(line.startswith("- **") for line in lines)
    door = next(x for x in lines if "doorway maps" in x)  # issue 50: the reading verdict, by its interval
    r = committed["02_budgetmix_training"]["doorway"]["reading"]["openings"]["by_seed"]["budgetmix"]
    assert fmt.side(r["low"], r["high"]) in door
    m = copy.deepcopy(committed)
    rs = m["01_grpo_training"]["grpo"]["R_single"]
    for ci, words in (
        ([0.01, 0.05], "unlike the paper, R_single rose"),
        ([-0.05, -0.01], "as in the paper"),
        ([-0.01, 0.05], "R_single did not move distinguishably"),
    ):
        rs["change"], rs["change_ci"] = 0.02, ci
        monkeypatch.setattr(report, "_get", fake(m))
        assert words in report.short_version("cpu")[0]
    t = m["03_pass_at_kt_sweep"]["trend"]["grpo - base"]
    for (lo, hi), words in (
        ((1.0, 5.0), "it grows with T"),
        ((-5.0, -1.0), "it shrinks with T"),
        ((-1.0, 5.0), "this sample cannot tell"),
    ):
        t |= {"diff": 2.0, "low": lo, "high": hi}
        monkeypatch.setattr(report, "_get", fake(m))
        assert words in next(x for x in report.short_version("cpu") if "grows with T" in x)
    g = m["02_budgetmix_training"]["gains_paired"]["budgetmix - grpo"]
    for v in g.values():
        v |= {"low": -1.0, "high": 1.0}
    monkeypatch.setattr(report, "_get", fake(m))
    line = next(x for x in report.short_version("cpu") if "BudgetMix beats" in x)
    assert "interval above 0 at none, below 0 at none, containing 0 at 25 %, 50 %, 75 %, 100 %" in line
    monkeypatch.setattr(report, "_get", fake({}))
    assert report.short_version("cpu") == []  # no run: no verdicts


JARGON = (
    "rl_sharp",
    "vs sharp",
    "vs base",
    "grpo-s",
    "budgetmix-s",
    "TV distance",
    "total variation",
    "P(opt)",
    "r=1",
    "MDE",
    "R_single",
    "R_multi",
)


@pytest.mark.parametrize("notebook", list(report.FINDINGS))
def test_findings_open_with_three_plain_lines_to_remember(notebook, monkeypatch):
    """Issue 53: each notebook's findings open with 'What to remember': three numbered lines, generated from its
    metrics.json (each with a number), without the kit's vocabulary; the long findings follow."""
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    text = report.findings("cpu", notebook)
    assert text.startswith(remember.HEADING + "\n\n1. "), text[:200]
    block = text.split("\n\n")[1].splitlines()
    assert [x[:3] for x in block] == ["1. ", "2. ", "3. "], block
    for line in block:
        assert re.search(r"\d", line[3:]), line
        assert not [w for w in JARGON if w in line], line
    assert len(text.splitlines()) > 6  # the long findings below


def test_remember_gives_nothing_for_a_skipped_notebook():
    assert remember.lines("04_step_level_probing", {"skipped": "no step oracle"}) == []
