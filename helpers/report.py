"""The headline table: every paper number from REFERENCE.md beside the kit's measurement of the same quantity.

    python -m helpers.report --profile cpu                # prints the Markdown table the README shows
    python -m helpers.report --profile cpu --findings     # and every notebook's findings section
    python -m helpers.report --profile gpu --env bfcl     # the same for one per-environment series
    python -m helpers.report --profile gpu --env all      # BudgetMix's gains per task and their mean, as the
                                                          # paper's table, then each series' headline table

It reads only the notebooks' metrics.json files (through `helpers.store`), so the README's numbers are the
committed run's numbers.
"""

from __future__ import annotations

import argparse
import re
import sys

from helpers import llr, matched, paper, recovery, store


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


def _fmt(x, pct: bool = False, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    return f"{100 * x:.1f} %" if pct else f"{x:.{digits}g}" if abs(x) >= 100 else f"{x:.{digits}f}"


def _iv(d: dict | None, pct: bool = False, key: str = "mean", ci: str = "ci", digits: int = 3) -> str:
    """`value [low, high]` of a metrics entry, as a percentage or a number; n/a when absent."""
    if not d:
        return "n/a"
    v, (lo, hi) = d[key], d[ci]
    if pct:
        return f"{100 * v:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _signed(d: dict | None) -> str:
    """A change and its interval, signed; n/a where it was not measured (no step oracle for R_single)."""
    if not d or d.get("change") is None:
        return "n/a"
    return f"{d['change']:+.3f} [{d['change_ci'][0]:+.3f}, {d['change_ci'][1]:+.3f}]"


def _points(d: dict, key: str = "mean", ci: str = "ci") -> str:
    """A difference of fractions and its interval in percentage points, signed."""
    return f"{100 * d[key]:+.1f} [{100 * d[ci][0]:+.1f}, {100 * d[ci][1]:+.1f}]"


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
                f"{100 * paper.value(paper.MATCHED_STATES_RL_BETTER[pe]):.1f} % ({paper.MATCHED_STATES_RL_BETTER[pe].setting})",
                _iv(m04["rl_vs_base"], True, "better", "better_ci"),
                _iv(m04["rl_vs_sharp"], True, "better", "better_ci"),
            )
        )
        q = {k: m04[f"mean_quality_{k}"] for k in ("base", "sharp", "rl")}
        rows.append(
            (
                "Mean step quality at matched states: RL / comparison",
                paper.MEAN_STEP_QUALITY,
                f"{_iv(q['rl'])} / {_iv(q['base'])}",
                f"{_iv(q['rl'])} / {_iv(q['sharp'])}",
            )
        )
    m05 = _get(profile, "05_error_recovery", default={})
    if m05 and "skipped" not in m05:  # 05 records `skipped` where the environment has no step oracle
        s = m05["superior_action"]
        rows.append(
            (
                "RL picks the better action after an injected error",
                f"{100 * paper.value(paper.ERROR_STATES_RL_SUPERIOR[pe]):.1f} % ({paper.ERROR_STATES_RL_SUPERIOR[pe].setting})",
                _iv(s["rl_vs_base"], True, "better", "better_ci"),
                _iv(s["rl_vs_sharp"], True, "better", "better_ci"),
            )
        )
        c = m05["concentration"]
        rows.append(("Concentration: RL's win rate at error states minus at matched states (points)",
                     "positive (claimed, no number)", _points(c["rl_vs_base"], "error_minus_matched"),
                     _points(c["rl_vs_sharp"], "error_minus_matched")))  # fmt: skip
        cont = {r["model"]: r for r in m05["continuation"]}
        rl_p, base_p = paper.CONTINUATION_SUCCESS[pe]
        diff = m05["continuation_difference"]
        rows.append(("Continuation success from identical error states: RL minus comparison (points)",
                     f"{100 * (rl_p.value - base_p.value):+.1f} ({100 * rl_p.value:.1f} vs {100 * base_p.value:.1f} %, {rl_p.setting})",
                     _points(diff["rl - base"]) + f" (RL {100 * cont['rl']['success']:.1f} %, base "
                     f"{100 * cont['base']['success']:.1f} %, bound {100 * m05['continuation_upper_bound']['mean']:.1f} %)",
                     _points(diff["rl - sharp"]) + f" (sharpened {100 * cont['sharp']['success']:.1f} %)"))  # fmt: skip
    m06 = _get(profile, "06_likelihood_analysis", default={})
    if m06:
        n, llr = m06["nll_base_policy"], m06["cum_llr_successful"]
        rows.append(
            (
                "Per-token NLL under the base policy: RL actions / comparison's actions",
                f"{paper.NLL_BASE_POLICY['rl_actions'].value:.2f} / {paper.NLL_BASE_POLICY['base_actions'].value:.2f} (Terminal-Bench)",
                f"{_iv(n.get('rl'))} / {_iv(n.get('base'))}",
                f"{_iv(n.get('rl'))} / {_iv(n.get('sharp'))}",
            )
        )
        rows.append(
            (
                "Cumulative log pi_RL - log pi_base, successful trajectories: RL / comparison",
                f"about {paper.CUMULATIVE_LLR['rl_trajectories'].value:.0f} / {paper.CUMULATIVE_LLR['base_trajectories'].value:.0f} (Terminal-Bench)",
                f"{_iv(llr.get('rl'))} / {_iv(llr.get('base'))}",
                f"{_iv(llr.get('rl'))} / {_iv(llr.get('sharp'))}",
            )
        )
    m01 = _get(profile, "01_grpo_training", "grpo", default={})
    if m01:
        rows.append(("Change of R_multi / R_single (own states) during GRPO",
                     f"{paper.TRAINING_DYNAMICS['R_multi_change'].value:+.3f} / {paper.TRAINING_DYNAMICS['R_single_change'].value:+.3f} (DeepCoder-MT)",
                     f"{_signed(m01['R_multi'])} / {_signed(m01.get('R_single'))}",
                     "(training: no comparison)"))  # fmt: skip
    m02 = _get(profile, "02_budgetmix_training", default={})
    if m02:
        g, ci = m02["gains_points"], m02["gains_ci"]
        for f, rep in paper.BUDGETMIX_GAIN_POINTS.items():
            k = f"{f:g}"
            sharp = m02["gains_points"]["budgetmix - sharp"][k], m02["gains_ci"]["budgetmix - sharp"][k]
            rows.append((f"Success at {f:.0%} of T_max: BudgetMix minus full-budget GRPO (points)",
                         f"{rep.value:+.1f} ({rep.setting})",
                         f"{g['budgetmix - grpo'][k]:+.1f} [{ci['budgetmix - grpo'][k][0]:+.1f}, {ci['budgetmix - grpo'][k][1]:+.1f}]",
                         f"BudgetMix minus sharpened base {sharp[0]:+.1f} [{sharp[1][0]:+.1f}, {sharp[1][1]:+.1f}]"))  # fmt: skip
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
            rows.append((f"Pass@(K={m03['K']}, T={T}): GRPO minus comparison (points)",
                         "grows with T; shrinks or reverses at small T", f"{gb:+.1f} [{cb[0]:+.1f}, {cb[1]:+.1f}]",
                         f"{gs:+.1f} [{cs[0]:+.1f}, {cs[1]:+.1f}]"))  # fmt: skip
    return rows


def markdown(profile: str = "cpu") -> str:
    """The headline table in Markdown (what the README shows)."""
    lines = [
        f"| quantity | paper | kit ({profile} tier): RL against the base | RL against the sharpened base |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in headline(profile)]
    return no_negative_zero("\n".join(lines))


# ------------------------------------------------------------------------------------------------ findings
#
# Each notebook ends with a short section that says what its run found, generated from its metrics.json (never
# typed numbers), beside the paper's number where the paper gives one.


def _pts(x: float) -> str:
    return f"{x:+.1f}"


def _f3(values: dict) -> str:
    return " / ".join(f"{v:.2f}" for v in values.values())


def _oracle_line(m: dict) -> str:
    o = m.get("step_oracle")
    if not o:
        return ""
    return (f"- **Step oracle on {m.get('env', o.get('env'))}:** " + ("yes: " if o["step_oracle"] else "none: ")
            + o["oracle_note"] + ".")  # fmt: skip


def _findings_00(m: dict) -> list[str]:
    if "frozenlake" not in m:  # a series on another environment: its tasks, the reference episode, the base
        t, s = m["tasks"], m["series"]
        lo, hi = t["t_max"]
        ref = s["reference_success"]
        lines = [
            f"- **{m['env']}:** {t['train']} training and {t['test']} test tasks, T_max "
            + (f"{lo}." if lo == hi else f"{lo} to {hi} (each task its own)."),
            _oracle_line(m),
            f"- **Reference answer** on {s['task_id']}: "
            + ("the data source has none." if ref is None else
               f"{'succeeds' if ref else 'does NOT succeed'} in {s['reference_turns']} turns"
               + (f"; step quality per turn {' / '.join('n/a' if q is None else f'{q:.2f}' for q in s['reference_step_quality'])}."
                  if any(q is not None for q in s["reference_step_quality"]) else "; no step quality (no oracle)."))
            + f" **Base** at T_max = {s['t_max']}: {'succeeds' if s['base_success'] else 'fails'} in "
            f"{s['base_turns']} turns, {s['base_invalid_turns']} of them invalid.",
        ]  # fmt: skip
        return [line for line in lines if line]
    fl = m["frozenlake"]
    fr = " / ".join(f"{100 * float(k):.0f}" for k in fl["upper_bound"])
    lines = [
        f"- **Setting:** {fl['size']}x{fl['size']} maps, {fl['hole_p']:.0%} holes, slippery ice (success rate "
        f"{fl['success_rate']:g}), T_max = {fl['t_max']}; {fl['n_train_maps']} training and {fl['n_test_maps']} "
        "test maps.",
        f"- **Structural upper bound** at {fr} % of T_max: {_f3(fl['upper_bound'])}"
        + ("; no budget is solved outright." if max(fl["upper_bound"].values()) < 0.95 else "."),
        "- **Value of knowing the budget** (optimum minus best stationary policy): "
        + " / ".join(_pts(v) for v in fl["value_of_knowing_budget_points"].values())
        + (
            " points: a budget-aware agent can gain at every budget, so BudgetMix has something to learn."
            if min(fl["value_of_knowing_budget_points"].values()) >= 5
            else " points (under 5 somewhere: there the budget carries little information)."
        ),
        f"- **Demonstrator** (exact): {_f3(fl['demonstrator_success'])}; **base** in the context it plays in (whole "
        f"conversation): {_f3(fl['base_success'])}, in a one-turn context: "
        f"{_f3(fl['base_success_last_turn_context'])}.",
        f"- **Base over demonstrator:** {_f3(fl['base_over_demonstrator'])} (lowest "
        f"{fl['min_base_over_demonstrator']:.2f}; the testbed asks for at least 0.80 at every budget: "
        f"{'met' if fl['min_base_over_demonstrator'] >= 0.8 else 'NOT met'}).",
    ]
    sft = fl.get("base_sft") or {}
    if sft:
        lines.append(
            f"- **SFT of the base:** {sft['steps']} steps in {sft['seconds']:.0f} s "
            f"({sft['tokens_per_s']:.0f} tokens/s), final loss {sft['final_loss']:.3f} per assistant token."
        )
    return lines


def _ci(d: dict, key: str = "change", scale: float = 1.0, digits: int = 3) -> str:
    lo, hi = d[f"{key}_ci"]
    return f"{scale * d[key]:+.{digits}f} [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}]"


def _sign(lo: float, hi: float) -> str:
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"


def measured(d: dict | None) -> bool:
    """Whether a training-dynamics entry (helpers.train.training_dynamics) holds numbers: on an environment without
    a step oracle R_single is absent or all None."""
    return isinstance(d, dict) and d.get("start") is not None


def _findings_01(m: dict) -> list[str]:
    g, p = m["grpo"], m["paper"]
    g = {k: v for k, v in g.items() if not isinstance(v, dict) or "start" not in v or measured(v)}
    lines = [f"Over {g['n_seeds']} RL seeds (mean change, 95 % interval over seeds and tasks or states):"]
    if "R_single" not in g:
        o = m.get("step_oracle") or {}
        lines.append(f"- **No R_single on {m.get('env', 'this environment')}:** it has no step oracle "
                     f"({o.get('oracle_note', 'none declared')}), so only R_multi is tracked, as the paper does.")  # fmt: skip
    for key, label in (("R_multi", "R_multi"), ("R_single", "R_single on the policy's own states"),
                       ("R_single_pool", "R_single on the fixed pool")):  # fmt: skip
        if key not in g:
            continue
        d = g[key]
        paper_txt = f" (paper, DeepCoder-MT: {p[key + '_change']:+.3f})" if key + "_change" in p else ""
        lines.append(
            f"- **{label}:** {d['start']:.3f} -> {d['end']:.3f}, change {_ci(d)}, interval "
            f"{_sign(*d['change_ci'])}{paper_txt}."
        )
    rs, rm = g.get("R_single"), g["R_multi"]
    if rs is None:
        verdict = (f"R_multi changed by {_ci(rm)}; the step-reward half of the claim cannot be tested without an "
                   "oracle")  # fmt: skip
    elif rm["change_ci"][0] > 0 and rs["change_ci"][1] < 0:
        verdict = "as in the paper, trajectory reward rose while step reward fell"
    elif rm["change_ci"][0] > 0 and rs["change_ci"][0] > 0:
        verdict = "unlike the paper, step reward rose with trajectory reward"
    elif rm["change_ci"][0] > 0:
        verdict = (
            "trajectory reward rose; the change of step reward cannot be told from 0 at this sample size"
        )
    else:
        verdict = "the rise of trajectory reward cannot be told from 0 at this sample size"
    lines.append(f"- **The paper's claim** (R_multi up, R_single down): {verdict}.")
    b = m.get("budgetmix")
    if b:
        lines.append(
            f"- **BudgetMix** (same base, same seeds): R_multi change {_ci(b['R_multi'])}"
            + (
                f", R_single (own states) change {_ci(b['R_single'])}."
                if measured(b.get("R_single"))
                else "."
            )
        )
    st = m["grpo_steps"]
    lines.append(
        f"- Invalid actions {100 * st['invalid_rate_first_5_steps']:.1f} % in the first 5 steps, "
        f"{100 * st['invalid_rate_last_5_steps']:.1f} % in the last 5; KL to the base "
        f"{st['kl_last_5_steps']:.3f} at the end; {st['seconds_per_step']:.2f} s per step."
    )
    return lines


def _gain_line(m: dict, comparison: str) -> str:
    g, ci = m["gains_points"][comparison], m["gains_ci"][comparison]
    return " / ".join(f"{g[f]:+.1f} [{ci[f][0]:+.1f}, {ci[f][1]:+.1f}]" for f in g)


def _decided(ci: dict) -> dict:
    return {f: _sign(*v) for f, v in ci.items()}


def _findings_02(m: dict) -> list[str]:
    fr = " / ".join(f"{100 * float(f):.0f}" for f in m["success"]["base"])
    sh = m["sharpened"]
    lines = [
        f"Test {'maps' if m.get('env', 'frozenlake') == 'frozenlake' else 'tasks'}: {m['n_test_tasks']} x "
        f"{m['n_samples']} samples; RL methods averaged over seeds {m['seeds']}; points with 95 % intervals over "
        f"seeds and tasks, at {fr} % of each task's T_max.",
        "- **Success:** "
        + "; ".join(f"{name} {_f3(v)}" for name, v in m["success"].items())
        + (
            f"; structural upper bound {_f3(m['upper_bound'])}."
            if None not in m["upper_bound"].values()
            else f"; no structural upper bound ({m.get('env', 'the environment')} knows none)."
        ),
        f"- **Sharpened base:** temperature {sh['temperature']:g}, chosen on {sh['n_tasks']} training {'maps' if m.get('env', 'frozenlake') == 'frozenlake' else 'tasks'} (base "
        f"{sh['success'].get(str(sh['temperature']), float('nan')):.3f} against GRPO's {sh['target']:.3f} at T_max).",
        f"- **BudgetMix minus GRPO:** {_gain_line(m, 'budgetmix - grpo')} points (paper, mean of 4 tasks: "
        + " / ".join(f"{v:+.1f}" for v in m["paper"]["budgetmix_minus_grpo_points"].values())
        + ").",
    ]
    d = _decided(m["gains_ci"]["budgetmix - grpo"])
    above = [f for f, v in d.items() if v == "above 0"]
    below = [f for f, v in d.items() if v == "below 0"]
    if above or below:
        lines.append(
            f"  The interval is above 0 at {', '.join(above) or 'no budget'} and below 0 at "
            f"{', '.join(below) or 'no budget'} of T_max; elsewhere this sample cannot decide."
        )
    else:
        lines.append(
            "  Every interval contains 0: at this sample size the data cannot decide whether BudgetMix "
            "helps at any budget."
        )
    for c in ("grpo - sharp", "budgetmix - sharp"):
        d = _decided(m["gains_ci"][c])
        beats = [f for f, v in d.items() if v == "above 0"]
        lines.append(
            f"- **{c}:** {_gain_line(m, c)} points: the interval is above 0 (RL beats the sharpened base) at "
            f"{', '.join(beats) or 'no budget'} of T_max."
        )
    rs = {k: v for k, v in m["r_single_change"].items() if measured(v)}
    if len(rs) == 2:
        lines.append(
            f"- **R_single on own states** over training: GRPO {_ci(rs['grpo'])}, BudgetMix {_ci(rs['budgetmix'])} "
            "(paper: degrades under full-budget RL, stable or better under BudgetMix)."
        )
    else:
        lines.append(
            f"- **R_single:** not measured: {m.get('env', 'this environment')} has no step oracle "
            f"({(m.get('step_oracle') or {}).get('oracle_note', 'none declared')})."
        )
    return lines


def _findings_03(m: dict) -> list[str]:
    Ts, k = m["T_values"], m["K"]
    g = m["pass_at_t_gap_points"]
    ci = m["pass_at_t_gap_ci"]

    def row(c: str) -> str:
        return " / ".join(f"{g[c][str(T)]:+.1f}" for T in Ts)

    lines = [
        f"Pass@(K={k}, T) on {m['n_tasks']} test tasks x {m['n_samples']} samples, T = {' / '.join(map(str, Ts))}"
        + (" (percent of each task's T_max)" if m.get("T_unit", "turns") != "turns" else "")
        + "; RL averaged over seeds; gaps in points with 95 % intervals over seeds and tasks.",
        "- **Pass@T:** "
        + "; ".join(
            f"{meth} " + " / ".join(f"{v:.2f}" for v in vals.values())
            for meth, vals in m["pass_at_t"].items()
        )
        + (
            "; upper bound " + " / ".join(f"{m['upper_bound'][str(T)]:.2f}" for T in Ts) + "."
            if all(m["upper_bound"][str(T)] is not None for T in Ts)
            else "; no structural upper bound (the environment knows none)."
        ),
    ]
    for c in g:
        d = {T: _sign(*ci[c][str(T)]) for T in Ts}
        above = [str(T) for T in Ts if d[T] == "above 0"]
        below = [str(T) for T in Ts if d[T] == "below 0"]
        lines.append(
            f"- **{c}:** {row(c)}; interval above 0 at T = {', '.join(above) or 'none'}"
            + (f", below 0 at T = {', '.join(below)}" if below else "")
            + "."
        )
    first, last = g["grpo - base"][str(Ts[0])], g["grpo - base"][str(Ts[-1])]
    lines.append(
        f"- **The paper's claim** (the RL advantage grows with T and shrinks at small T): GRPO minus base "
        f"is {first:+.1f} points at T = {Ts[0]} and {last:+.1f} at T = {Ts[-1]}"
        f" ({'grows' if last > first else 'does not grow'} with T)."
    )
    big = m["gap_by_K_at_T_max"]
    ks = sorted(big["grpo-base"], key=int)
    lines.append(
        f"- **Along K at T = {Ts[-1]}:** GRPO minus base {big['grpo-base'][ks[0]]:+.1f} points at K = "
        f"{ks[0]}, {big['grpo-base'][ks[-1]]:+.1f} at K = {ks[-1]}; GRPO minus sharpened base "
        f"{big['grpo-sharp'][ks[0]]:+.1f} and {big['grpo-sharp'][ks[-1]]:+.1f}."
    )
    return lines


def _pct0(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.0f} %"


def _win(d: dict) -> str:
    lo, hi = d["better_ci"]
    return f"{100 * d['better']:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def _frac_label(fractions) -> str:
    return " / ".join(f"{100 * float(f):.0f}" for f in fractions)


def _gain_cells(m: dict, key: str) -> str:
    g, ci = m["gains_points"][key], m["gains_ci"][key]
    return " / ".join(f"{g[f]:+.1f} [{ci[f][0]:+.1f}, {ci[f][1]:+.1f}]" for f in g)


def _where(m: dict, key: str, side: str) -> list[str]:
    return [f"{100 * float(f):.0f} %" for f, v in m["gains_ci"][key].items() if _sign(*v) == side]


def _stabilises(m: dict, key: str) -> str:
    """The paper's FrozenLake claim for one estimator: better than GRPO across budgets, at tight ones most."""
    g, ci = m["gains_points"][key], m["gains_ci"][key]
    fr = list(g)
    tight, loose = fr[0], fr[-1]
    above, below = _where(m, key, "above 0"), _where(m, key, "below 0")
    if ci[tight][0] > 0 and g[tight] >= g[loose]:
        verdict = (f"as in the paper: above GRPO at the tightest budget ({100 * float(tight):.0f} % of T_max), and "
                   "by more than at the full budget")  # fmt: skip
    elif above:
        verdict = (
            f"in part: above GRPO at {', '.join(above)} of T_max, not the pattern of the tightest budget most"
        )
    elif below:
        verdict = f"not here: below GRPO at {', '.join(below)} of T_max"
    else:
        verdict = "not shown here: no budget's interval excludes 0"
    return verdict


def _precision_key(mode: str, level: str) -> str:
    """The gains key of the oracle corrupted at `level` against GRPO in the same budget mode."""
    suffix = "" if mode == "full" else f"+{mode}"
    name = f"oracle_q{suffix}" if float(level) == 0 else f"oracle_q{suffix}@{level}"
    return f"{name} - grpo{suffix}"


def _method_order(m: dict):
    """Sort key of method names in the grid's order: estimator, then full budget before BudgetMix."""
    rank = {a: i for i, a in enumerate(m["algorithms"])}
    return lambda name: (rank.get(name.split("+")[0].split("@")[0], len(rank)), "+" in name, name)


def _findings_07(m: dict) -> list[str]:
    fr = list(next(iter(m["success"].values())))
    order = _method_order(m)
    n_seeds = len(m["seeds"])
    lines = [
        f"{m['env']}: {', '.join(m['algorithms'])}, each at the full budget and with BudgetMix; {n_seeds} RL "
        f"seed{'s' if n_seeds > 1 else ''} ({', '.join(map(str, m['seeds']))}), {m['steps']} RL steps per run; "
        f"{m['n_test_tasks']} test tasks x {m['n_samples']} samples per cell; success at {_frac_label(fr)} % of "
        "T_max, points with 95 % intervals over seeds and tasks."
    ]
    if m["reduced"]:
        lines.append(
            f"- **Reduced grid** ({n_seeds} seed{'s' if n_seeds > 1 else ''}, {m['steps']} of {m['train_steps']} "
            "steps): "
            + ("with one seed the intervals cover the test tasks only, not the variance of training; " if n_seeds == 1 else "")
            + "the full grid is `configs/cpu_process.yaml` on the cpu tier."
        )  # fmt: skip
    if m["grpo_from_longer_runs"]:
        lines.append(
            f"- GRPO's and BudgetMix's models are the profile's GRPO runs (notebook 01) after {m['steps']} steps."
        )
    ub = m.get("upper_bound")
    lines.append(
        "- **Success:** "
        + "; ".join(f"{k} {_f3(m['success'][k])}" for k in sorted(m["success"], key=order) if "@" not in k)
        + (f"; structural upper bound {_f3(ub)}." if ub else ".")
    )
    gains = m["gains_points"]
    claim = m["paper"]["claim"]
    lines.append(f"- **The paper's claims:** {claim}.")
    for algo in ("oracle_q", "gigpo"):
        key = f"{algo} - grpo"
        if key in gains and m["env"] == "frozenlake":
            lines.append(
                f"- **{algo} minus GRPO** (full budget): {_gain_cells(m, key)} points: {_stabilises(m, key)}."
            )
    for algo in ("ppo", "gigpo"):
        key = f"{algo} - grpo"
        if key not in gains or (algo == "gigpo" and m["env"] == "frozenlake"):
            continue
        tight = [f for f in gains[key] if float(f) < 1]
        better = [f"{100 * float(f):.0f} %" for f in tight if m["gains_ci"][key][f][0] > 0]
        setting = "a learned critic, no oracle" if algo == "ppo" else "no exact step oracle"
        lines.append(
            f"- **{algo} minus GRPO** ({setting}): {_gain_cells(m, key)} points: "
            + (f"better than GRPO at {', '.join(better)} of T_max (the paper, on BFCL: no better under constrained "
               "budgets)" if better else "no better than GRPO at any constrained budget, as the paper finds on BFCL")
            + "."
        )  # fmt: skip
    for mode_key in sorted((k for k in gains if k.endswith("+budgetmix - grpo+budgetmix")), key=order):
        lines.append(f"- **{mode_key}:** {_gain_cells(m, mode_key)} points.")
    mix = sorted((k for k in gains if k.split(" - ")[0] == f"{k.split(' - ')[-1]}+budgetmix"), key=order)
    if mix:
        first = fr[0]
        helped = [k.split(" - ")[-1] for k in mix if m["gains_ci"][k][first][0] > 0]
        lines.append(
            "- **BudgetMix in each estimator** (BudgetMix minus full budget): "
            + "; ".join(f"{k.split(' - ')[-1]} {_gain_cells(m, k)}" for k in mix)
            + f" points; above 0 at {100 * float(first):.0f} % of T_max for {', '.join(helped) or 'none of them'} "
            "(the paper: BudgetMix drops into GRPO, GiGPO and PPO unchanged)."
        )  # fmt: skip
    p = m["precision"]
    if p["levels"]:
        levels = [f"{lv:g}" for lv in p["levels"]]
        lines.append(
            f"- **Precision** (oracle-Q, {p['mode']} budget; corruption = share of states whose action values the "
            "oracle shuffles): success at "
            + "; ".join(f"{100 * float(f):.0f} % " + " / ".join(f"{p['success'][lv][f]:.2f}" for lv in levels) for f in fr)
            + f" at levels {' / '.join(levels)}."
        )  # fmt: skip
        corr = [p["process_corr"].get(lv) for lv in levels]
        lines.append(
            "  Correlation of the reported with the exact process term during training: "
            + " / ".join("n/a" if c is None else f"{c:.2f}" for c in corr)
            + "."
        )
        gk = {lv: _precision_key(p["mode"], lv) for lv in levels}
        first = fr[0]
        pts = {lv: (gains[k][first], m["gains_ci"][k][first]) for lv, k in gk.items() if k in gains}
        if pts:
            kept = [lv for lv, (_, ci) in pts.items() if ci[0] > 0]
            lines.append(
                f"  Gain over GRPO at {100 * float(first):.0f} % of T_max: "
                + " / ".join(f"{v:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}]" for v, ci in pts.values())
                + f" points at levels {' / '.join(pts)}; the interval is above 0 at "
                + (f"level{'s' if len(kept) > 1 else ''} {', '.join(kept)}" if kept else "no level")
                + "."
            )
    dyn = m["dynamics"]
    parts = []
    for name in sorted(dyn, key=order):
        d = dyn[name]
        if "@" in name or "R_multi" not in d:
            continue
        rs = f", R_single {_ci(d['R_single'])}" if "R_single" in d else ""
        parts.append(f"{name} R_multi {_ci(d['R_multi'])}{rs}")
    if parts:
        lines.append(
            "- **Training dynamics** (change from the first to the last evaluation): "
            + "; ".join(parts)
            + "."
        )
    return lines


FINDINGS = {
    "00_environments": _findings_00,
    "04_step_level_probing": matched.findings,
    "05_error_recovery": recovery.findings,
    "06_likelihood_analysis": llr.findings,
    "01_grpo_training": _findings_01,
    "02_budgetmix_training": _findings_02,
    "03_pass_at_kt_sweep": _findings_03,
    "07_process_supervision": _findings_07,
}


def findings(profile: str, notebook: str) -> str:
    """The 'what this run found' section of a notebook, as Markdown, from its metrics.json."""
    m = store.Run.read_metrics(profile, notebook)
    return no_negative_zero("\n".join(FINDINGS[notebook](m)))


_NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212](0(?:\.0+)?)(?![\d.])")


def no_negative_zero(text: str) -> str:
    """Print a number that rounds to zero as 0, never -0 (`-0.0` becomes `0.0`; `-0.05` is left alone)."""
    return _NEGATIVE_ZERO.sub(r"\1", text)


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
            raise ValueError(f"{profile}/{env}: notebook 02 has no gain at fraction(s) {missing} of T_max "
                             "(eval.budget_fractions must hold 0.25, 0.5, 0.75 and 1.0 for this table)")  # fmt: skip
        tasks[env] = {f: (g[f"{f:g}"], *ci[f"{f:g}"]) for f in FRACTIONS}
    ran = [v for v in tasks.values() if v is not None]
    mean = {f: sum(v[f][0] for v in ran) / len(ran) for f in FRACTIONS} if ran else {}
    return {"tasks": tasks, "mean": mean, "n_tasks": len(ran),
            "paper": {f: paper.value(v) for f, v in paper.BUDGETMIX_GAIN_POINTS.items()}}  # fmt: skip


def budgetmix_markdown(profile: str, envs: tuple[str, ...] | list[str]) -> str:
    """`budgetmix_gains` as a Markdown table: one row per task, the kit's mean, the paper's mean."""
    s = budgetmix_gains(profile, envs)
    head = " | ".join(f"{100 * f:.0f} % of T_max" for f in FRACTIONS)
    lines = [f"| task ({profile}) | {head} |", "|---" * (len(FRACTIONS) + 1) + "|"]
    for env, v in s["tasks"].items():
        cells = (
            [f"{v[f][0]:+.1f} [{v[f][1]:+.1f}, {v[f][2]:+.1f}]" for f in FRACTIONS]
            if v
            else [f"not run (python -m helpers.run --profile {profile} --env {env})"]
            + [""] * (len(FRACTIONS) - 1)
        )
        lines.append(f"| {TASK_NAMES.get(env, env)} | " + " | ".join(cells) + " |")
    if s["mean"]:
        lines.append(f"| **kit: mean of {s['n_tasks']} task{'s' if s['n_tasks'] > 1 else ''}** | "
                     + " | ".join(f"{s['mean'][f]:+.1f}" for f in FRACTIONS) + " |")  # fmt: skip
    lines.append(
        "| **paper: mean of 4 tasks** | " + " | ".join(f"{s['paper'][f]:+.1f}" for f in FRACTIONS) + " |"
    )
    lines.append("")
    lines.append("BudgetMix minus full-budget GRPO, points, with 95 % intervals over seeds and tasks; the paper's "
                 "summaries give only the mean over its four tasks (parity at 100 %), not each task's gain.")  # fmt: skip
    return no_negative_zero("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from helpers.run import ALL_ENVS, RunError, environments

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--env", help="a per-environment series (frozenlake, deepcoder, bfcl, intercode_sql), a comma "
                                  "list, or all: BudgetMix's gains per task and their mean, then each series")  # fmt: skip
    ap.add_argument("--findings", action="store_true", help="also print every notebook's findings section")
    args = ap.parse_args(argv)
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
