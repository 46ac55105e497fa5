"""The headline table: every paper number from REFERENCE.md beside the kit's measurement of the same quantity.

    python -m helpers.report --profile cpu                # prints the Markdown table the README shows
    python -m helpers.report --profile cpu --findings     # and every notebook's findings section
    python -m helpers.report --profile gpu --env bfcl     # the same for one per-environment series
    python -m helpers.report --profile gpu --env all      # BudgetMix's gains per task and their mean, as the
                                                          # paper's table, then each series' headline table
    python -m helpers.report --readme                     # rewrites the README's results block from results/cpu
    python -m helpers.report --readme --check             # exits 1 when the README's block is not the committed run's

It reads only the notebooks' metrics.json files (through `helpers.store`), so the README's numbers are the
committed run's numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys

from helpers import (
    budget_reading,
    budgetmix,
    dynamics,
    fmt,
    instrument,
    llr,
    matched,
    paper,
    pass_kt,
    recovery,
    remember,
    store,
    supervision,
    testbed,
)
from helpers.config import ENV_SETTINGS, REPO_ROOT, reported_settings


def _get(profile: str, notebook: str, *keys, default=None):
    try:
        node = store.Run.read_metrics(profile, notebook)
    except FileNotFoundError:
        return default
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


def _percent(d: dict, key: str) -> str:
    """A fraction of a metrics entry and its interval in percent: `71.4 % [61.8, 80.2]`."""
    return fmt.entry(d, key, scale=100, digits=1, unit="%")


def _points(d: dict, key: str = "mean") -> str:
    """A difference of fractions and its interval in percentage points, signed: `+11.6 [+0.5, +22.3]`."""
    return fmt.entry(d, key, "ci", scale=100, digits=1, signed=True)


def _gain(value: float, ci: list[float]) -> str:
    """A gain already in points and its interval, signed: `+11.6 [+0.5, +22.3]`."""
    return fmt.estimate(value, ci, digits=1, signed=True)


def headline(profile: str = "cpu") -> list[tuple[str, str, str, str]]:
    """(quantity, paper and its setting, kit: RL against the base, kit: RL against the sharpened base) rows.

    Every kit value is a mean over RL seeds with a 95 % interval over seeds and tasks or states."""

    rows = []
    # the paper's number for this series' environment where it reports one (DeepCoder-MT), else FrozenLake's
    env = profile.split("/")[1] if "/" in profile else "frozenlake"
    pe = env if env in paper.MATCHED_STATES_RL_BETTER else "frozenlake"
    m04 = _get(profile, "04_step_level_probing", "matched_states", default={})
    if m04:
        rows.append(
            (
                "RL better than the comparison at matched states",
                f"{fmt.percent(paper.value(paper.MATCHED_STATES_RL_BETTER[pe]))} ({paper.MATCHED_STATES_RL_BETTER[pe].setting})",
                _percent(m04["rl_vs_base"], "better"),
                _percent(m04["rl_vs_sharp"], "better"),
            )
        )
        q = {k: m04[f"mean_quality_{k}"] for k in ("base", "sharp", "rl")}
        rows.append(
            (
                "Mean step quality at matched states: RL / comparison",
                paper.MEAN_STEP_QUALITY,
                f"{fmt.entry(q['rl'])} / {fmt.entry(q['base'])}",
                f"{fmt.entry(q['rl'])} / {fmt.entry(q['sharp'])}",
            )
        )
    m05 = _get(profile, "05_error_recovery", default={})
    if m05 and "skipped" not in m05:  # 05 records `skipped` where the environment has no step oracle
        s = m05["superior_action"]
        rows.append(
            (
                "RL picks the better action after an injected error",
                f"{fmt.percent(paper.value(paper.ERROR_STATES_RL_SUPERIOR[pe]))} ({paper.ERROR_STATES_RL_SUPERIOR[pe].setting})",
                _percent(s["rl_vs_base"], "better"),
                _percent(s["rl_vs_sharp"], "better"),
            )
        )
        c = m05["concentration"]
        rows.append(
            (
                "Concentration: RL's win rate at error states minus at matched states (points)",
                "positive (claimed, no number)",
                _points(c["rl_vs_base"], "error_minus_matched"),
                _points(c["rl_vs_sharp"], "error_minus_matched"),
            )
        )
        cont = {r["model"]: r for r in m05["continuation"]}
        rl_p, base_p = paper.CONTINUATION_SUCCESS[pe]
        diff = m05["continuation_difference"]
        rows.append(
            (
                "Continuation success from identical error states: RL minus comparison (points)",
                f"{fmt.points(rl_p.value - base_p.value)} ({fmt.number(rl_p.value, 1, 100)} vs {fmt.percent(base_p.value)}, {rl_p.setting})",
                _points(diff["rl - base"]) + f" (RL {fmt.percent(cont['rl']['success'])}, base "
                f"{fmt.percent(cont['base']['success'])}, bound {fmt.percent(m05['continuation_upper_bound']['mean'])})",
                _points(diff["rl - sharp"]) + f" (sharpened {fmt.percent(cont['sharp']['success'])})",
            )
        )
    m06 = _get(profile, "06_likelihood_analysis", default={})
    if m06:
        n, llr = m06["nll_base_policy"], m06["cum_llr_successful"]
        rows.append(
            (
                "Per-token NLL under the base policy: RL actions / comparison's actions",
                f"{fmt.number(paper.NLL_BASE_POLICY['rl_actions'].value, 2)} / {fmt.number(paper.NLL_BASE_POLICY['base_actions'].value, 2)} (Terminal-Bench)",
                f"{fmt.entry(n.get('rl'))} / {fmt.entry(n.get('base'))}",
                f"{fmt.entry(n.get('rl'))} / {fmt.entry(n.get('sharp'))}",
            )
        )
        rows.append(
            (
                "Cumulative log pi_RL - log pi_base, successful trajectories: RL / comparison",
                f"about {fmt.number(paper.CUMULATIVE_LLR['rl_trajectories'].value, 0)} / {fmt.number(paper.CUMULATIVE_LLR['base_trajectories'].value, 0)} (Terminal-Bench)",
                f"{fmt.entry(llr.get('rl'))} / {fmt.entry(llr.get('base'))}",
                f"{fmt.entry(llr.get('rl'))} / {fmt.entry(llr.get('sharp'))}",
            )
        )
    m01 = _get(profile, "01_grpo_training", "grpo", default={})
    if m01:
        rows.append(
            (
                "Change of R_multi / R_single (own states) during GRPO",
                f"{fmt.signed(paper.TRAINING_DYNAMICS['R_multi_change'].value)} / {fmt.signed(paper.TRAINING_DYNAMICS['R_single_change'].value)} (DeepCoder-MT)",
                f"{fmt.entry(m01['R_multi'], 'change', signed=True)} / {fmt.entry(m01.get('R_single'), 'change', signed=True)}",
                "(training: no comparison)",
            )
        )
    m02 = _get(profile, "02_budgetmix_training", default={})
    if m02:
        g, ci = m02["gains_points"], m02["gains_ci"]
        for f, rep in paper.BUDGETMIX_GAIN_POINTS.items():
            k = f"{f:g}"
            sharp = m02["gains_points"]["budgetmix - sharp"][k], m02["gains_ci"]["budgetmix - sharp"][k]
            rows.append(
                (
                    f"Success at {f:.0%} of T_max: BudgetMix minus full-budget GRPO (points)",
                    f"{fmt.signed(rep.value, 1)} ({rep.setting})",
                    _gain(g["budgetmix - grpo"][k], ci["budgetmix - grpo"][k]),
                    f"BudgetMix minus sharpened base {_gain(*sharp)}",
                )
            )
    m03 = _get(profile, "03_pass_at_kt_sweep", default={})
    if m03:
        Ts = m03["T_values"]
        for T in dict.fromkeys((Ts[0], Ts[len(Ts) // 4], Ts[-1])):
            gb, cb = (
                m03["pass_at_t_gap_points"]["grpo - base"][str(T)],
                m03["pass_at_t_gap_ci"]["grpo - base"][str(T)],
            )
            gs, cs = (
                m03["pass_at_t_gap_points"]["grpo - sharp"][str(T)],
                m03["pass_at_t_gap_ci"]["grpo - sharp"][str(T)],
            )
            rows.append(
                (
                    f"Pass@(K={m03['K']}, T={T}): GRPO minus comparison (points)",
                    "grows with T; shrinks or reverses at small T",
                    _gain(gb, cb),
                    _gain(gs, cs),
                )
            )
    return rows


def markdown(profile: str = "cpu") -> str:
    """The headline table in Markdown (what the README shows); its kit column names the settings that change what
    the numbers mean where the series has any (DeepCoder-MT's protocol)."""
    facts = next((f for nb in sorted(FINDINGS) if (f := reported(_get(profile, nb, default={})))), {})
    tier = ", ".join([f"{profile} tier", *(f"{k} {v}" for k, v in facts.items())])
    lines = [
        f"| quantity | paper | kit ({tier}): RL against the base | RL against the sharpened base |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in headline(profile)]
    return fmt.no_negative_zero("\n".join(lines))


# ------------------------------------------------------------------------------------------------ findings
#
# Each notebook ends with a short section that says what its run found, generated from its metrics.json (never
# typed numbers), beside the paper's number where the paper gives one. Each notebook's findings live beside the
# code that writes its metrics (its analysis module).


FINDINGS = {
    "00_environments": testbed.findings,
    "01_grpo_training": dynamics.findings,
    "02_budgetmix_training": budgetmix.findings,
    "03_pass_at_kt_sweep": pass_kt.findings,
    "04_step_level_probing": matched.findings,
    "05_error_recovery": recovery.findings,
    "06_likelihood_analysis": llr.findings,
    "07_process_supervision": supervision.findings,
}


def findings(profile: str, notebook: str) -> str:
    """The 'what this run found' section of a notebook, as Markdown, from its metrics.json: first the settings
    that change what its numbers mean (`reported_lines`), then the notebook's own findings."""
    m = store.Run.read_metrics(profile, notebook)
    calibration = instrument_lines(m)
    opening = budget_reading.headline(m) if notebook == "02_budgetmix_training" else ""
    head = [opening, ""] if opening else []  # 02 opens with what its evidence says together
    first = remember.lines(notebook, m)  # three plain lines, then the long findings
    body = head + reported_lines(m) + calibration + FINDINGS[notebook](m)
    return fmt.no_negative_zero("\n".join(first + body))


def instrument_lines(m: dict) -> list[str]:
    """What the notebook's own analysis does on a planted effect and on a null (`helpers.instrument`, recorded under
    `instrument` in 02's and 05's metrics.json), first, so the reader sees the instrument's power before its verdict
    on RL; nothing where the notebook did not run it."""
    if not m.get("instrument"):
        return []
    return [
        "- **Can this instrument see it?** Scripted players whose difference is known by DP, through this "
        "notebook's own analysis (section above):"
    ] + [f"  {line}" for line in instrument.findings(m["instrument"])]


def reported(m: dict) -> dict:
    """The `Config.reported` settings a metrics.json records (`store.Run.write_metrics`): {"protocol": ...} on
    DeepCoder-MT, {} on FrozenLake or where the metrics predate them."""
    keys = reported_settings(m["env"], {}) if isinstance(m.get("env"), str) else {}
    return {k: m[k] for k in keys if k in m}


def reported_lines(m: dict) -> list[str]:
    """One findings line per recorded `reported` setting: its value, its knob and what it means."""
    facts, env = reported(m), m.get("env")
    if not facts:
        return []
    docs = {f.name: f.metadata["doc"] for f in dataclasses.fields(ENV_SETTINGS[env]) if f.name in facts}
    return [
        f"- **{TASK_NAMES.get(env, env)} {k}:** `{v}` (`env.extra.{env}.{k}`; {docs[k]})."
        for k, v in facts.items()
    ]


# ------------------------------------------------------------------------------------ BudgetMix over the tasks

TASK_NAMES = {
    "deepcoder": "DeepCoder-MT",
    "bfcl": "BFCL",
    "intercode_sql": "InterCode-SQL",
    "frozenlake": "FrozenLake",
}
FRACTIONS = tuple(paper.BUDGETMIX_GAIN_POINTS)  # 0.25, 0.5, 0.75, 1.0: the paper's table


def budgetmix_gains(profile: str, envs: tuple[str, ...] | list[str]) -> dict:
    """BudgetMix minus full-budget GRPO (points) at 25 / 50 / 75 / 100 % of T_max per task (each series' notebook
    02, `results/<profile>/<env>/`; for the profile's own `env.name`, `results/<profile>/` where that series has no
    folder of its own) and their mean over the tasks that ran, beside the paper's mean of its four tasks.

    Returns {"tasks": {env: {fraction: (gain, low, high)} or None where the series has not run}, "mean": {fraction:
    gain}, "n_tasks": tasks in the mean, "paper": {fraction: gain}}. The mean has no interval: the tasks' intervals
    come from different resamplings and do not combine into one."""
    from helpers import config

    own = config.load(
        profile
    ).env.name  # the profile's own series (results/<profile>/) stands for its environment
    tasks: dict[str, dict | None] = {}
    for env in envs:
        m = _get(f"{profile}/{env}", "02_budgetmix_training")
        if m is None and env == own:
            m = _get(profile, "02_budgetmix_training")
        if m is None:
            tasks[env] = None
            continue
        g, ci = m["gains_points"]["budgetmix - grpo"], m["gains_ci"]["budgetmix - grpo"]
        missing = [f"{f:g}" for f in FRACTIONS if f"{f:g}" not in g]
        if missing:
            raise ValueError(
                f"{profile}/{env}: notebook 02 has no gain at fraction(s) {missing} of T_max "
                "(eval.budget_fractions must hold 0.25, 0.5, 0.75 and 1.0 for this table)"
            )
        tasks[env] = {f: (g[f"{f:g}"], *ci[f"{f:g}"]) for f in FRACTIONS}
    ran = [v for v in tasks.values() if v is not None]
    mean = {f: sum(v[f][0] for v in ran) / len(ran) for f in FRACTIONS} if ran else {}
    return {
        "tasks": tasks,
        "mean": mean,
        "n_tasks": len(ran),
        "paper": {f: paper.value(v) for f, v in paper.BUDGETMIX_GAIN_POINTS.items()},
    }


def budgetmix_markdown(profile: str, envs: tuple[str, ...] | list[str]) -> str:
    """`budgetmix_gains` as a Markdown table: one row per task, the kit's mean, the paper's mean."""
    s = budgetmix_gains(profile, envs)
    head = " | ".join(f"{fmt.number(f, 0, scale=100)} % of T_max" for f in FRACTIONS)
    lines = [f"| task ({profile}) | {head} |", "|---" * (len(FRACTIONS) + 1) + "|"]
    for env, v in s["tasks"].items():
        cells = (
            [_gain(v[f][0], v[f][1:]) for f in FRACTIONS]
            if v
            else [f"not run (python -m helpers.run --profile {profile} --env {env})"]
            + [""] * (len(FRACTIONS) - 1)
        )
        lines.append(f"| {TASK_NAMES.get(env, env)} | " + " | ".join(cells) + " |")
    if s["mean"]:
        lines.append(
            f"| **kit: mean of {s['n_tasks']} task{'s' if s['n_tasks'] > 1 else ''}** | "
            + " | ".join(fmt.signed(s["mean"][f], 1) for f in FRACTIONS)
            + " |"
        )
    lines.append(
        "| **paper: mean of 4 tasks** | " + " | ".join(fmt.signed(s["paper"][f], 1) for f in FRACTIONS) + " |"
    )
    lines.append("")
    lines.append(
        "BudgetMix minus full-budget GRPO, points, with 95 % intervals over seeds and tasks; the paper's "
        "summaries give only the mean over its four tasks (parity at 100 %), not each task's gain."
    )
    return fmt.no_negative_zero("\n".join(lines))


# ------------------------------------------------------------------------------------------ the README's block

README = REPO_ROOT / "README.md"
BEGIN = "<!-- results:begin (generated by `python -m helpers.report --readme` from the committed run; do not edit) -->"
END = "<!-- results:end -->"
TITLES = {
    "00_environments": "Testbed (notebook 00)",
    "01_grpo_training": "Training dynamics: R_multi and R_single (notebook 01)",
    "02_budgetmix_training": "BudgetMix (notebook 02)",
    "03_pass_at_kt_sweep": "Pass@(K,T) (notebook 03)",
    "04_step_level_probing": "Single steps at matched states (notebook 04)",
    "05_error_recovery": "Error recovery (notebook 05)",
    "06_likelihood_analysis": "Likelihoods (notebook 06)",
    "07_process_supervision": "Process supervision (notebook 07)",
}


def run_facts(profile: str = "cpu") -> str:
    """One paragraph on the run the numbers come from: the commit(s) and device its manifests name, and each
    notebook's time from the runner's run.json."""
    folder = store.profile_dir(profile)
    manifests = [json.loads(p.read_text()) for p in sorted(folder.glob("*/manifest.json"))]
    commits = sorted({m["git_commit"][:7] for m in manifests if m.get("git_commit")})
    devices = sorted({m["device"] for m in manifests if m.get("device")})
    run = json.loads((folder / "executed" / "run.json").read_text())
    times = ", ".join(f"{n['notebook'][:2]} {fmt.number(n['seconds'], 0)} s" for n in run["notebooks"])
    return (
        f"One `make reproduce` of the `{profile}` profile: commit {' / '.join(f'`{c}`' for c in commits)} (every "
        f"manifest), on {' / '.join(devices)}; {fmt.number(run['seconds'] / 60, 1)} min of notebook time ({times})."
    )


# --------------------------------------------------------------------------------------- the short version
#
# One verdict per claim of the paper, each decided by the side of 0 of its interval (`fmt.side`), never by two point
# estimates, generated from the same metrics.json files as everything else in the README block.


def _budgets(paired: dict, where: str) -> list[str]:
    """The fractions of T_max (as `25 %`) whose paired interval lies `where` ("above 0", "below 0", "contains 0")."""
    return [
        f"{fmt.number(float(f), 0, scale=100)} %"
        for f, v in paired.items()
        if fmt.side(v["low"], v["high"]) == where
    ]


def _list(items: list[str]) -> str:
    return ", ".join(items) if items else "none"


def _interval(v: dict, digits: int = 1, scale: float = 1.0) -> str:
    """A paired verdict or a `{change, change_ci}` entry as `+2.1 [-0.5, +4.7] (contains 0)`."""
    if "diff" in v:
        lo, hi, x = v["low"], v["high"], v["diff"]
    else:
        (lo, hi), x = v["change_ci"], v["change"]
    return f"{fmt.estimate(x, (lo, hi), digits, scale, signed=True)} ({fmt.side(lo, hi)})"


def _paper_gains(m: dict) -> str:
    """The paper's BudgetMix-minus-GRPO points as 02's metrics.json records them: `+7.5 / ... points at 25 / ... %`."""
    pp = m.get("paper", {}).get("budgetmix_minus_grpo_points", {})
    if not pp:
        return "no number"
    fr = " / ".join(fmt.number(float(f), 0, scale=100) for f in pp)
    return f"{' / '.join(fmt.number(v, 1, sign=True) for v in pp.values())} points at {fr} % of T_max, mean of 4 tasks"


def short_version(profile: str = "cpu") -> list[str]:
    """The README's short version: for each claim of the paper the run tests, the kit's verdict from its interval,
    with the interval. A notebook whose metrics are missing (or predate a quantity) contributes no line."""
    out: list[str] = []
    m1 = _get(profile, "01_grpo_training")
    if m1 and "grpo" in m1:
        rm, rs = m1["grpo"]["R_multi"], m1["grpo"]["R_single"]
        sides = fmt.side(*rm["change_ci"]), fmt.side(*rs["change_ci"])
        word = {"above 0": "rose", "below 0": "fell"}
        verdict = (
            "as in the paper"
            if sides == ("above 0", "below 0")
            else f"unlike the paper, R_single {word.get(sides[1], 'did not move distinguishably')}"
            if sides[0] == "above 0"
            else "R_multi did not rise distinguishably"
        )
        out.append(
            f"- **R_multi rises while R_single falls** (01; paper, DeepCoder-MT): R_multi {_interval(rm, 3)}, "
            f"R_single on the policy's own states {_interval(rs, 3)}: {verdict}."
        )
    m2 = _get(profile, "02_budgetmix_training")
    if m2 and "gains_paired" in m2:
        g = m2["gains_paired"]["budgetmix - grpo"]
        out.append(
            f"- **BudgetMix beats full-budget GRPO at tight budgets, parity at T_max** (02; paper "
            f"{_paper_gains(m2)}): interval above 0 at {_list(_budgets(g, 'above 0'))}, "
            f"below 0 at {_list(_budgets(g, 'below 0'))}, containing 0 at {_list(_budgets(g, 'contains 0'))} "
            "of T_max."
        )
        if "grpo-sharp - sharp" in m2["gains_paired"]:
            a, b = m2["gains_paired"]["grpo - sharp"], m2["gains_paired"]["grpo-sharp - sharp"]
            out.append(
                f"- **RL learned more than sharpening gives** (02, the kit's control): GRPO minus the sharpened "
                f"base is above 0 at {_list(_budgets(a, 'above 0'))} of T_max; decoded as the sharpened base is "
                f"(the symmetric control), at {_list(_budgets(b, 'above 0'))}."
            )
    probe = (m2 or {}).get("budget_probe", {}).get("agents", {})
    models = {
        k: v["responsiveness"] for k, v in probe.items() if v.get("kind") == "model" and "responsiveness" in v
    }
    if models:
        reading = [k for k, r in models.items() if fmt.side(r["low"], r["high"]) == "above 0"]
        largest = max(abs(r["mean"]) for r in models.values())
        optimum = probe.get("optimum", {}).get("responsiveness", {}).get("mean")
        out.append(
            f"- **Does any model read the budget line?** (02, the budget-swap probe; the paper does not measure "
            f"it): responsiveness above 0 for {_list(reading)} of {len(models)} models; the largest in size "
            f"{fmt.number(largest, 3)}"
            + (f", against {fmt.number(optimum, 1)} for the scripted budget-aware optimum" if optimum else "")
            + ". A BudgetMix lead with no model reading the budget is a budget-blind one."
        )
    d = (m2 or {}).get("doorway")
    if d and "openings" in d.get("reading", {}):
        out.append(_doorway_short(d))
    m3 = _get(profile, "03_pass_at_kt_sweep")
    if m3 and "grpo - base" in m3.get("trend", {}):
        t = m3["trend"]["grpo - base"]
        word = {"above 0": "it grows with T", "below 0": "it shrinks with T"}.get(
            fmt.side(t["low"], t["high"]), "this sample cannot tell"
        )
        out.append(
            f"- **RL's Pass@(8,T) advantage grows with T** (03): GRPO minus base at T = {t['T_max']} minus at "
            f"T = {t['T_min']}, paired by seed, {_interval(t)} points: {word}."
        )
    m4 = _get(profile, "04_step_level_probing")
    s4 = (m4 or {}).get("matched_states", {})
    if s4.get("rl_vs_base", {}).get("paired"):
        parts = []
        for key, label in (("rl_vs_base", "the base"), ("rl_vs_sharp", "the sharpened base")):
            d = s4.get(key, {})
            if d.get("paired") and d.get("net_win_paired"):
                parts.append(
                    f"against {label}, wins minus losses {_interval(d['net_win_paired'], 3)} and mean quality "
                    f"{_interval(d['paired'], 3)}"
                )
        out.append(
            "- **RL is not better at single steps** (04; paper: better at "
            f"{fmt.percent(m4['paper'].get(m4.get('env', 'frozenlake'), m4['paper'].get('frozenlake')))} of "
            "matched states, mean quality no better): " + "; ".join(parts) + " (above 0: RL's steps better)."
        )
    m5 = _get(profile, "05_error_recovery")
    if m5 and m5.get("concentration", {}).get("rl_vs_base", {}).get("paired"):
        c = m5["concentration"]["rl_vs_base"]["paired"]
        cont = m5.get("continuation_paired", {}).get("rl - base")
        out.append(
            f"- **RL's advantage concentrates at error states** (05): win rate at error states minus at matched "
            f"states {_interval(c, 1, 100)} points"
            + (
                f"; continuation success from the same error states, RL minus base {_interval(cont, 1, 100)} "
                "points"
                if cont
                else ""
            )
            + " (error states also sit later in the episode: a depth confound)."
        )
    m6 = _get(profile, "06_likelihood_analysis")
    if m6 and m6.get("cum_llr_difference") and "base" in m6.get("cum_llr_successful", {}):
        d, b = m6["cum_llr_difference"], m6["cum_llr_successful"]["base"]
        out.append(
            f"- **Successful RL trajectories are far likelier under RL** (06): RL minus base trajectories, "
            f"paired by seed, {_interval(d, 2)}, as any two differing policies give on the RL side (a KL); the "
            f"base's successful trajectories {fmt.entry(b, digits=3)} ({fmt.side(*b['ci'])}; paper about "
            f"{fmt.number(m6['paper']['cum_llr_base'], 0, sign=True)})."
        )
    m7 = _get(profile, "07_process_supervision")
    if m7 and "gains_ci" in m7:
        first = (
            min(m7["gains_ci"]["oracle_q - grpo"], key=float) if "oracle_q - grpo" in m7["gains_ci"] else None
        )
        if first is not None:
            better = [
                k.split(" - ")[0]
                for k in ("oracle_q - grpo", "gigpo - grpo", "ppo - grpo")
                if k in m7["gains_ci"] and m7["gains_ci"][k][first][0] > 0
            ]
            seeds = len(m7.get("seeds", []))
            out.append(
                f"- **Precise process supervision helps at tight budgets** (07; paper, FrozenLake: oracle-Q and "
                f"GiGPO): minus GRPO at {fmt.number(float(first), 0, scale=100)} % of T_max, interval above 0 for "
                f"{_list(better)}"
                + (
                    f" ({seeds} RL seed: the intervals cover the test tasks, not training's variance)"
                    if seeds == 1
                    else f" ({seeds} RL seeds)"
                )
                + "."
            )
    return out


def _doorway_short(d: dict) -> str:
    """The short version's line on doorway maps: does BudgetMix read its budget where reading pays?"""
    r = d["reading"]["openings"]["by_seed"].get("budgetmix", {})
    c = d.get("control") or {}
    vs = d.get("vs_rush", {}).get("budgetmix", {})
    late = [f for f in ("0.75", "1") if f in vs]
    return (
        "- **BudgetMix teaches the agent to read its budget** (02, doorway maps, where reading is worth about "
        f"{fmt.number(d.get('mix_gap', float('nan')), 0)} points; the paper's premise, not measured there): opening "
        f"responsiveness minus the base's {_interval(r, 3)} (optimum 2); the supervised "
        f"control reaches {fmt.number(c.get('openings', {}).get('mean', float('nan')), 2)}; BudgetMix minus always-rush, "
        + ", ".join(f"{fmt.number(float(f), 0, scale=100)} %: {_interval(vs[f], 1)}" for f in late)
        + " points (at these fractions of T_max): "
        + (
            "it reads the budget."
            if r["low"] > 0 and r["diff"] >= 0.5
            else f"not at the recipe's compute{_curve_note()}."
            if not r["low"] > 0
            else "by a sliver at most, nowhere near the control."
        )
    )


def _curve_note(profile: str = "cpu_budget_curve") -> str:
    """What the compute curve adds to the doorway line: whether BudgetMix reads at its longest run ("" where the curve
    was not run)."""
    from helpers import budget_curve

    try:
        m = store.Run.read_metrics(profile, budget_curve.NAME)
    except FileNotFoundError:
        return ""
    r = m["steps"][str(m["train_steps"])]["responsiveness"]
    times = m["train_steps"] // m["recipe_steps"]
    return f", and {'' if r['low'] > 0.1 else 'not '}at {times}x it (the compute curve, {fmt_iv(r)})"


def fmt_iv(v: dict) -> str:
    """A mean with its interval, three decimals."""
    return fmt.estimate(v["mean"], [v["low"], v["high"]], digits=3, signed=True)


def curve_section(profile: str = "cpu_budget_curve") -> list[str]:
    """The compute curve's findings (`helpers.budget_curve`), where it was run."""
    from helpers import budget_curve

    try:
        m = store.Run.read_metrics(profile, budget_curve.NAME)
    except FileNotFoundError:
        return []
    return [
        "#### The compute curve: BudgetMix on doorway maps at up to five times the recipe's RL steps",
        "",
        *budget_curve.findings(m),
        "",
    ]


def readme_block(profile: str = "cpu") -> str:
    """The README's results block: the run, the headline table, and every notebook's findings as it prints them."""
    short = short_version(profile)
    parts = [BEGIN, "", run_facts(profile), ""]
    if short:
        parts += [
            "### The short version: one verdict per claim, each decided by its interval",
            "",
            *short,
            "",
        ]
    parts += [
        "### Headline: the paper's numbers beside the kit's",
        "",
        "Means over the RL seeds; 95 % intervals resample the seeds and the maps or states.",
        "",
        markdown(profile),
        "",
        "### What each notebook found",
        "",
    ]
    for notebook in sorted(FINDINGS):
        try:
            text = findings(profile, notebook)
        except FileNotFoundError:
            continue
        parts += [f"#### {TITLES[notebook]}", "", text, ""]
    if profile == "cpu":
        parts += curve_section()
    return "\n".join([*parts, END])


def update_readme(profile: str = "cpu", check: bool = False, path=README) -> bool:
    """Write `readme_block` between the README's markers (or, with `check`, only compare). Returns whether the
    README already held it."""
    text = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{path} has no results block (a line {BEGIN!r} ... {END!r})")
    block = readme_block(profile)
    new = pattern.sub(lambda _: block, text)
    if new != text and not check:
        store.write_atomic(path, new)
    return new == text


def main(argv: list[str] | None = None) -> int:
    from helpers.run import ALL_ENVS, RunError, environments

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument(
        "--env",
        help="a per-environment series (frozenlake, deepcoder, bfcl, intercode_sql), a comma "
        "list, or all: BudgetMix's gains per task and their mean, then each series",
    )
    ap.add_argument("--findings", action="store_true", help="also print every notebook's findings section")
    ap.add_argument(
        "--readme", action="store_true", help="write the README's results block from the profile's run"
    )
    ap.add_argument(
        "--check", action="store_true", help="with --readme: only check that the block is current"
    )
    args = ap.parse_args(argv)
    if args.readme:
        same = update_readme(args.profile, check=args.check)
        if args.check and not same:
            print(
                f"README.md's results block is not {args.profile}'s run: python -m helpers.report --readme",
                file=sys.stderr,
            )
            return 1
        print("README.md's results block " + ("is current" if same else "rewritten"))
        return 0
    try:
        envs = environments(args.env)
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    names = [args.profile] if envs == [None] else [f"{args.profile}/{e}" for e in envs]
    if envs != [None] and len(envs) > 1:
        print(budgetmix_markdown(args.profile, [e for e in ALL_ENVS if e in envs]) + "\n")
    for name in names:
        if len(names) > 1:
            print(f"\n### {name}\n")
        print(markdown(name))
        if args.findings:
            for notebook in sorted(FINDINGS):
                try:
                    text = findings(name, notebook)
                except FileNotFoundError:
                    continue
                print(f"\n#### {notebook}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
