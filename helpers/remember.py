"""'What to remember': three plain lines at the top of each notebook's findings, generated from its metrics.json.

Each line says one thing the run found in words a newcomer reads without the kit's vocabulary (no model ids, no
comparison keys), with the number and, for a comparison, the one interval its verdict reads (paired by seed where
the run has one). `lines(notebook, m)` gives the three; `helpers.report.findings` puts them first. A notebook whose
metrics lack a quantity (an older run, another environment) gives fewer lines or none, never a typed number.
"""

from __future__ import annotations

from collections.abc import Callable

from helpers import fmt

HEADING = "**What to remember**"
WORDS = {
    "above 0": "ahead",
    "below 0": "behind",
    "contains 0": "this sample cannot tell which is ahead",
    "no interval": "one seed: no interval",
}


def _pts(v: dict, digits: int = 1, scale: float = 1.0) -> str:
    """A paired verdict as `+9.0 points [+4.1, +14.0]` (no MDE: the long findings give it)."""
    return (
        f"{fmt.number(v['diff'], digits, scale, sign=True)} [{fmt.number(v['low'], digits, scale, sign=True)}, "
        f"{fmt.number(v['high'], digits, scale, sign=True)}]"
    )


def _side(v: dict) -> str:
    return fmt.side(v["low"], v["high"])


def _pct(x: float) -> str:
    return fmt.percent(x, 0)


def _m00(m: dict) -> list[str]:
    f = m.get("frozenlake")
    if not f:
        return []
    top, low = "1", "0.25"
    t = f["t_max"]
    return [
        f"The starting model succeeds on {_pct(f['base_success'][top])} of the test maps with the full {t} turns "
        f"and on {_pct(f['base_success'][low])} with a quarter of them; the best any player could do is "
        f"{_pct(f['upper_bound'][top])} and {_pct(f['upper_bound'][low])}.",
        f"With a quarter of the turns, knowing how many turns are left is worth "
        f"{fmt.number(f['budget_awareness_points'][low], 1)} points over the best player that ignores it; with all "
        f"turns, {fmt.number(f['budget_awareness_points'][top], 1)} points.",
        f"A player that ignores the turns left but is tuned to a mix of budgets comes within "
        f"{fmt.number(f['budget_awareness_vs_mix_points'][low], 1)} points of the best with a quarter of the turns "
        f"and {fmt.number(f['budget_awareness_vs_mix_points'][top], 1)} with all of them: a gain at tight budgets "
        "does not by itself show that a model reads its budget.",
    ]


def _m01(m: dict) -> list[str]:
    g = m.get("grpo", {})
    if "R_multi" not in g:
        return []
    rm = g["R_multi"]
    out = [
        f"Reinforcement learning (GRPO) raised the share of training episodes solved from "
        f"{fmt.number(rm['start'])} to {fmt.number(rm['end'])}: change {fmt.entry(rm, 'change', signed=True)}, "
        f"interval {fmt.side(*rm['change_ci'])}."
    ]
    rs = g.get("R_single")
    if rs and rs.get("start") is not None:
        paper = m.get("paper", {}).get("R_single_change")
        agree = (
            f"; the paper reports {fmt.signed(paper)}: {fmt.against_paper(paper, *rs['change_ci'])}"
            if paper is not None
            else ""
        )
        out.append(
            f"The quality of single moves, scored against the best move at each state, changed by "
            f"{fmt.entry(rs, 'change', signed=True)}, interval {fmt.side(*rs['change_ci'])}{agree}."
        )
    b = m.get("budgetmix", {}).get("R_multi")
    if b:
        out.append(
            f"Trained on mixed budgets (BudgetMix) from the same start, the share solved changed by "
            f"{fmt.entry(b, 'change', signed=True)}, interval {fmt.side(*b['change_ci'])}."
        )
    return out


def _m02(m: dict) -> list[str]:
    p = m.get("gains_paired", {})
    out = []
    mix = p.get("budgetmix - grpo")
    if mix:
        low, top = min(mix, key=float), max(mix, key=float)
        out.append(
            f"Training on mixed budgets (BudgetMix) against training on the full budget (GRPO): "
            f"{_pts(mix[low])} points with a quarter of the turns ({WORDS[_side(mix[low])]}), {_pts(mix[top])} with "
            "all of them (" + WORDS[_side(mix[top])] + "; intervals paired by seed)."
        )
    sharp = p.get("grpo - sharp")
    if sharp:
        low = min(sharp, key=float)
        out.append(
            f"GRPO against the starting model decoded more greedily (lower temperature): {_pts(sharp[low])} "
            f"points with a quarter of the turns ({WORDS[_side(sharp[low])]}): "
            + (
                "training did more than make the model's choices greedier."
                if _side(sharp[low]) == "above 0"
                else "this sample cannot tell that training did more than make the model's choices greedier."
            )
        )
    agents = (m.get("budget_probe") or {}).get("agents", {})
    models = {
        k: v["responsiveness"]
        for k, v in agents.items()
        if v.get("kind") == "model" and "responsiveness" in v
    }
    if models:
        moved = sum(fmt.side(r["low"], r["high"]) == "above 0" for r in models.values())
        optimum = agents.get("optimum", {}).get("responsiveness", {}).get("mean")
        best = max(abs(r["mean"]) for r in models.values())
        against = (
            f", against {fmt.number(optimum, 1)} for a player that plans with its budget" if optimum else ""
        )
        reading = (
            "a lead at tight budgets here comes without reading the budget"
            if moved == 0
            else "those models read their budget"
        )
        out.append(
            f"Changing only the number of turns left in the prompt moves {moved} of {len(models)} models "
            f"(the largest response {fmt.number(best, 3)}{against}): {reading}."
        )
    return out


def _m03(m: dict) -> list[str]:
    gap = m.get("pass_at_t_gap_paired", {}).get("grpo - base")
    if not gap:
        return []
    first, last = min(gap, key=int), max(gap, key=int)
    k = m.get("K")
    out = [
        f"Given {k} attempts per task, GRPO solves {_pct(m['pass_at_t']['grpo'][last])} of the tasks with {last} "
        f"turns against the starting model's {_pct(m['pass_at_t']['base'][last])}.",
        f"GRPO's lead over the starting model: {_pts(gap[first])} points with {first} turn ("
        f"{WORDS[_side(gap[first])]}), {_pts(gap[last])} with {last} turns ({WORDS[_side(gap[last])]}; intervals "
        "paired by seed).",
    ]
    t = m.get("trend", {}).get("grpo - base")
    if t:
        word = {"above 0": "it grows", "below 0": "it shrinks"}.get(_side(t), "this sample cannot tell")
        out.append(
            f"Does the lead grow with more turns? Its change from {first} to {last} turns: {_pts(t)} points: {word}."
        )
    return out


def _m04(m: dict) -> list[str]:
    s = m.get("matched_states", {})
    rb, rs, sym = s.get("rl_vs_base", {}), s.get("rl_vs_sharp", {}), s.get("rl_sharp_vs_sharp", {})
    if not rb.get("net_win_paired"):
        return []
    env = m.get("env", "frozenlake")
    paper = m.get("paper", {}).get(env, m.get("paper", {}).get("frozenlake"))
    out = [
        f"At the same game states, the RL model's next move is better than the starting model's at "
        f"{_pct(rb['better'])} of states and worse at {_pct(rb['worse'])}: wins minus losses "
        f"{_pts(rb['net_win_paired'], 3)} ({WORDS[_side(rb['net_win_paired'])]})"
        + (
            f"; the paper found better at {_pct(paper)}: {fmt.against_paper(paper, *rb['better_ci'])}"
            if paper
            else ""
        )
        + "."
    ]
    if rs.get("net_win_paired"):
        out.append(
            f"Against the starting model decoded more greedily, wins minus losses {_pts(rs['net_win_paired'], 3)} "
            f"({WORDS[_side(rs['net_win_paired'])]})."
        )
    if sym.get("net_win_paired"):
        out.append(
            f"Both decoded the same greedy way, the RL model's moves against the greedy starting model's: wins minus "
            f"losses {_pts(sym['net_win_paired'], 3)} ({WORDS[_side(sym['net_win_paired'])]})."
        )
    return out


def _m05(m: dict) -> list[str]:
    cont = m.get("continuation_paired", {})
    out = []
    if "rl - base" in cont:
        out.append(
            f"From states just after a mistake, the RL model finishes the task more often than the starting model: "
            f"{_pts(cont['rl - base'], 1, 100)} points ({WORDS[_side(cont['rl - base'])]}; paired by seed)."
        )
    if "rl - sharp" in cont:
        out.append(
            f"Against the starting model decoded more greedily, from the same states: {_pts(cont['rl - sharp'], 1, 100)} "
            f"points ({WORDS[_side(cont['rl - sharp'])]})."
        )
    c = m.get("concentration", {}).get("rl_vs_base", {}).get("paired")
    if c:
        word = {"above 0": "larger", "below 0": "smaller"}.get(_side(c))
        out.append(
            f"Is the RL model's edge at single moves larger just after a mistake than elsewhere? "
            f"{_pts(c, 1, 100)} points: "
            + (f"{word} after a mistake." if word else "this sample cannot tell.")
        )
    return out


def _m06(m: dict) -> list[str]:
    d, cum = m.get("cum_llr_difference"), m.get("cum_llr_successful", {})
    if not d or "rl" not in cum:
        return []
    rl, base, paper = cum["rl"], cum["base"], m.get("paper", {})
    out = [
        "The RL model's successful episodes are "
        + {"above 0": "more", "below 0": "less"}.get(fmt.side(*rl["ci"]), "not distinguishably more or less")
        + " likely under the RL model than under the starting model: "
        f"the log of the probability ratio summed over an episode is {fmt.entry(rl, digits=2, signed=True)}"
        + (
            f" (the paper: about {fmt.number(paper['cum_llr_rl'], 0, sign=True)}: "
            f"{fmt.against_paper(paper['cum_llr_rl'], *rl['ci'])})"
            if "cum_llr_rl" in paper
            else ""
        )
        + ".",
        f"The starting model's own successful episodes score {fmt.entry(base, digits=2, signed=True)} on the same "
        f"measure; the RL side minus the starting model's side, paired by seed: {_pts(d, 2)} (interval {_side(d)}).",
    ]
    return out + _surprise(m)


def _surprise(m: dict) -> list[str]:
    """How surprised the starting model is, per token, by the RL model's moves and by its own (06's third line)."""
    n = m.get("nll_base_policy", {})
    if "rl" not in n or "base" not in n:
        return []
    return [
        f"Per token, the starting model finds the RL model's moves {fmt.entry(n['rl'], digits=3)} surprising "
        f"(minus the log-probability) against {fmt.entry(n['base'], digits=3)} for its own moves: a model is "
        "likelier under itself on its own samples, so the sign is expected; the size is how far training moved it."
    ]


def _m07(m: dict) -> list[str]:
    ci, pts = m.get("gains_ci", {}), m.get("gains_points", {})
    if "gigpo - grpo" not in ci:
        return []
    low = min(ci["gigpo - grpo"], key=float)
    seeds = len(m.get("seeds", []))
    out = [
        f"This run is reduced ({seeds} RL seed{'s' if seeds != 1 else ''}, {m.get('steps')} steps per setting): "
        "its intervals cover the test tasks, not the variation between training runs."
        if m.get("reduced")
        else f"{seeds} RL seeds per setting.",
        f"Credit given per step (GiGPO) minus GRPO with a quarter of the turns: "
        f"{fmt.estimate(pts['gigpo - grpo'][low], ci['gigpo - grpo'][low], 1, signed=True)} points "
        f"({WORDS[fmt.side(*ci['gigpo - grpo'][low])]}).",
    ]
    if "oracle_q - grpo" in ci:
        out.append(
            f"Exact step scores from the oracle as rewards, minus GRPO with a quarter of the turns: "
            f"{fmt.estimate(pts['oracle_q - grpo'][low], ci['oracle_q - grpo'][low], 1, signed=True)} points "
            f"({WORDS[fmt.side(*ci['oracle_q - grpo'][low])]})."
        )
    return out


REMEMBER: dict[str, Callable[[dict], list[str]]] = {
    "00_environments": _m00,
    "01_grpo_training": _m01,
    "02_budgetmix_training": _m02,
    "03_pass_at_kt_sweep": _m03,
    "04_step_level_probing": _m04,
    "05_error_recovery": _m05,
    "06_likelihood_analysis": _m06,
    "07_process_supervision": _m07,
}


def lines(notebook: str, m: dict) -> list[str]:
    """The notebook's 'What to remember' block (its heading and up to three numbered lines), or [] where its
    metrics hold none of the quantities (a skipped notebook, a run from before them)."""
    if "skipped" in m or notebook not in REMEMBER:
        return []
    try:
        got = REMEMBER[notebook](m)[:3]
    except (
        KeyError,
        TypeError,
        ValueError,
    ):  # metrics from before a quantity, or another environment's shape
        got = []
    return [HEADING, ""] + [f"{i}. {x}" for i, x in enumerate(got, 1)] + [""] if got else []
