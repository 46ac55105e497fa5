"""Notebook 02's doorway half (issue 50): does BudgetMix RL teach the agent to read its budget where reading pays?

On a doorway map (`helpers.envs.doorway`) the budget alone decides the move at the start: rush toward the goal with
at most `h*` turns left (2 at T_max 8), press into the wall beside it otherwise. Reading the budget is worth about
11 points under BudgetMix's own mix against the best blind policy for the mix (which always rushes), on every map.
Three measurements, all on the held-out doorway test maps:

* **Success by budget** of every method beside the exact references: the optimum, the blind policy for the mix
  (rush) and the blind policy for T_max (press), by DP. A method that reads the budget beats rush at 75 / 100 % of
  T_max, where rushing throws away what pressing keeps (`vs_reference`: t-interval over seeds).
* **The probe, both arms.** At the *openings* an episode with budget r shows "Turns left: r of r."; at mid-episode
  states (`budgetmix.budget_swap` on the doorway maps) only the turns left are swapped. Responsiveness at an opening
  (`opening_table`) is [P(rush | r <= h*) - P(rush | r > h*)] + [P(press | r > h*) - P(press | r <= h*)] (each a
  mean over the budgets on its side): 2 for the optimum, 0 for any policy that ignores the budget line.
* **Reading per seed** (`reading`): each RL seed's responsiveness minus the base's, t-interval over seeds, for
  BudgetMix and for GRPO (the full-budget control), in both arms.

The supervised positive control (can this model learn to read the number at all?) is `helpers.budget_control`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers import fmt, stats
from helpers.envs import Task, doorway, make
from helpers.envs import frozenlake as fl
from helpers.policy import Policy
from helpers.rollout import ChatFormat

REFERENCES = ("optimum", "rush (blind for the mix)", "press (blind for T_max)")


# ------------------------------------------------------------------------------------------- the openings


def opening_prompts(tasks: list[Task], chat: ChatFormat) -> dict[tuple[str, int], list[int]]:
    """The opening prompt of an episode at every budget r = 1..T_max of every task, as a rollout tokenises it."""
    env = make("frozenlake")
    return {(t.task_id, r): chat.prompt_ids(env.reset(t, r)) for t in tasks for r in range(1, t.t_max + 1)}


def opening_probs(policy: Policy, tasks: list[Task], chat: ChatFormat) -> dict[tuple[str, int], np.ndarray]:
    """P(move) [4] at each opening (`opening_prompts`): exact, by scoring the four replies in one `score` call."""
    prompts = opening_prompts(tasks, chat)
    replies = [chat.action_ids(fl.format_action(a)) for a in range(4)]
    keys = list(prompts)
    scores = policy.score([prompts[k] for k in keys for _ in range(4)], replies * len(keys)) if keys else []
    return {k: np.exp([float(np.sum(scores[4 * i + a])) for a in range(4)]) for i, k in enumerate(keys)}


def threshold(task: Task) -> int:
    """h*: the optimum rushes iff at most h* turns are left (the largest such r in 1..T_max, by DP)."""
    desc, slip, rate = fl.dynamics(task)
    q = fl._optimal_q(desc, task.t_max, 1.0, slip, rate)
    rush = doorway.moves(desc)["rush"]
    s = fl.start_state(desc)
    return max([h for h in range(1, task.t_max + 1) if q[h, s].argmax() == rush], default=0)


def opening_table(tasks: list[Task], probs: dict[tuple[str, int], np.ndarray]) -> pd.DataFrame:
    """One row per doorway map: h*, P(rush) and P(press) averaged over the budgets on each side of h*, and the
    opening responsiveness (module docstring)."""
    rows = []
    for t in tasks:
        mv, h = doorway.moves(t.payload["desc"]), threshold(t)
        short = np.array([probs[(t.task_id, r)] for r in range(1, h + 1)])
        long = np.array([probs[(t.task_id, r)] for r in range(h + 1, t.t_max + 1)])
        rush_s, rush_l = short[:, mv["rush"]].mean(), long[:, mv["rush"]].mean()
        press_s, press_l = short[:, mv["press"]].mean(), long[:, mv["press"]].mean()
        rows.append(
            {
                "task_id": t.task_id,
                "h_star": h,
                "p_rush_short": rush_s,
                "p_rush_long": rush_l,
                "p_press_short": press_s,
                "p_press_long": press_l,
                "responsiveness": (rush_s - rush_l) + (press_l - press_s),
            }
        )
    return pd.DataFrame(rows)


def interval(values, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> dict:
    """Mean over maps with a percentile interval that resamples maps (`stats.cluster_bootstrap`, a map per row)."""
    values = np.asarray(values, float)
    m, lo, hi = stats.cluster_bootstrap(values, list(range(len(values))), n_boot, ci, seed)
    return {"mean": m, "low": lo, "high": hi, "n_maps": len(values)}


# ------------------------------------------------------------------------------------------ reading by seed


def reading(per_agent: dict[str, float], methods: dict[str, list[str]], ci: float = 0.95) -> dict:
    """Each RL method's responsiveness minus the base's, per seed, with the t-interval over seeds (`methods`:
    method -> its seeds' agent names; `per_agent`: agent -> mean responsiveness)."""
    base = per_agent["base"]
    out = {}
    for method in ("budgetmix", "grpo"):
        names = [n for n in methods.get(method, []) if n in per_agent]
        if len(names) < 2:
            continue
        d = np.array([per_agent[n] - base for n in names])
        iv = stats.paired_t_interval(d, np.zeros_like(d), ci)
        out[method] = {
            "diff": float(d.mean()),
            "low": float(iv["low"]),
            "high": float(iv["high"]),
            "excludes_zero": bool(iv["low"] > 0 or iv["high"] < 0),
            "per_seed": [float(x) for x in d],
            "n_seeds": len(names),
        }
    return out


# ------------------------------------------------------------------------------------------- success by budget


def references(tasks: list[Task], cells) -> dict[str, dict[str, float]]:
    """Exact success (DP) of `REFERENCES` at each evaluated fraction: {reference: {fraction: success}}."""
    by_f = {f: b for f, b in cells}
    refs = doorway.references(tasks, sorted(set(by_f.values())))
    return {name: {f"{f:g}": float(refs.loc[name, b]) for f, b in by_f.items()} for name in REFERENCES}


def vs_reference(table: pd.DataFrame, refs: dict, reference: str, ci: float = 0.95) -> dict:
    """Each RL method's success minus a reference's exact value, in points, per fraction: mean over seeds with the
    t-interval over seeds (the reference has no noise of its own)."""
    out: dict = {}
    for method in ("budgetmix", "grpo"):
        rows = table[table["method"] == method]
        for r in rows.itertuples():
            per_seed = 100.0 * (np.asarray(r.per_seed, float) - refs[reference][f"{r.fraction:g}"])
            if per_seed.size < 2:
                continue
            iv = stats.paired_t_interval(per_seed, np.zeros_like(per_seed), ci)
            out.setdefault(method, {})[f"{r.fraction:g}"] = {
                "diff": float(per_seed.mean()),
                "low": float(iv["low"]),
                "high": float(iv["high"]),
                "excludes_zero": bool(iv["low"] > 0 or iv["high"] < 0),
                "n_seeds": int(per_seed.size),
            }
    return out


def success_frame(table: pd.DataFrame, refs: dict) -> pd.DataFrame:
    """Success on the doorway maps by fraction of T_max: the methods (mean over seeds) above the exact references."""
    wide = table.pivot(index="method", columns="fraction", values="success")
    for name in REFERENCES:
        wide.loc[name] = [refs[name][f"{f:g}"] for f in wide.columns]
    return wide


# ---------------------------------------------------------------------------------------------- findings


def _iv(v: dict, digits: int = 3, scale: float = 1.0) -> str:
    return fmt.estimate(v["diff"] * scale, [v["low"] * scale, v["high"] * scale], digits=digits, signed=True)


def findings(m: dict) -> list[str]:
    """What the doorway half of notebook 02 found (empty where the run has no doorway maps)."""
    d = m.get("doorway")
    if not d:
        return []
    fr = " / ".join(fmt.number(float(f), 0, scale=100) for f in d["references"]["optimum"])
    lines = [
        f"- **Doorway maps** ({d['n_maps']} test maps, ice {d['success_rate']:g}; the optimum rushes with at most "
        f"{d['h_star']} turns left): success at {fr} % of T_max: "
        + "; ".join(f"{name} {fmt.joined(v)}" for name, v in d["success"].items())
        + "; exact: "
        + "; ".join(f"{name} {fmt.joined(v)}" for name, v in d["references"].items())
        + ".",
    ]
    for method, label in (("budgetmix", "BudgetMix"), ("grpo", "GRPO")):
        v = d["vs_rush"].get(method)
        if v:
            lines.append(
                f"  {label} minus always-rush (points, t-interval over seeds): "
                + " / ".join(_iv(x, 1) for x in v.values())
                + "."
            )
    bm = d.get("budgetmix_minus_grpo")
    if bm:
        lines.append(
            "  BudgetMix minus GRPO on doorway maps, paired by seed: "
            + " / ".join(fmt.verdict(x) for x in bm.values())
            + "."
        )
    for arm, label in (
        ("openings", "at the openings (r of r)"),
        ("swap", "mid-episode (turns left swapped)"),
    ):
        r = d["reading"].get(arm)
        if not r:
            continue
        per = r["per_agent"]
        lines.append(
            f"- **Reading on doorway maps, {label}:** responsiveness (optimum 2, blind 0): base "
            f"{fmt.number(per['base'], 3)}; the instrument on scripted players: optimum "
            f"{fmt.number(per.get('optimum', float('nan')), 2)} (planted), optimum with 25 % random moves "
            f"{fmt.number(per.get('optimum+noise', float('nan')), 2)}, blind for T_max "
            f"{fmt.number(per.get('blind_t_max', float('nan')), 2)} (null); "
            + "; ".join(
                f"{label_} minus base {_iv(v)} ({'excludes 0' if v['excludes_zero'] else 'contains 0'})"
                for label_, v in (
                    (lbl, r["by_seed"].get(k)) for k, lbl in (("budgetmix", "BudgetMix"), ("grpo", "GRPO"))
                )
                if v
            )
            + " (t-interval over seeds)."
        )
    c = d.get("control")
    if c:
        met = c["openings"]["mean"] >= c["target"]
        lines.append(
            f"- **Supervised positive control:** the base fine-tuned on the optimum's moves on doorway training maps "
            f"({c['steps']} SFT steps, {fmt.number(c['seconds'], 0)} s): responsiveness at the openings "
            f"{fmt.estimate(c['openings']['mean'], [c['openings']['low'], c['openings']['high']])}"
            + (
                f", mid-episode {fmt.estimate(c['swap']['mean'], [c['swap']['low'], c['swap']['high']])}"
                if c.get("swap")
                else ""
            )
            + f", against the base's {fmt.number(c['base_openings'], 3)} at the openings (target >= {c['target']:g}: "
            + (
                "met: the model can learn to read the number, so whether RL teaches it is RL's question alone)."
                if met
                else "NOT met: this model does not learn to read the number from this much supervision, so "
                "no RL result on reading can be read here)."
            )
        )
    return lines


def headline(m: dict) -> str:
    """One sentence that states what notebook 02's evidence together says: the random-map lead, the probe there, and
    on doorway maps the reading by seed against the supervised control ("" without doorway maps)."""
    d = m.get("doorway")
    if not d or "openings" not in d.get("reading", {}):
        return ""
    lead = m.get("gains_paired", {}).get("budgetmix - grpo", {})
    above = [f"{fmt.number(float(f), 0, scale=100)} %" for f, v in lead.items() if v["low"] > 0]
    probe = (m.get("budget_probe") or {}).get("agents", {})
    reads_random = [
        n
        for n, a in probe.items()
        if a.get("kind") == "model"
        and n.startswith("budgetmix")
        and a.get("responsiveness", {}).get("low", 0) > 0
    ]
    r = d["reading"]["openings"]["by_seed"].get("budgetmix")
    sw = d["reading"].get("swap", {}).get("by_seed", {}).get("budgetmix")
    c = d.get("control") or {}
    if r is None:
        return ""
    arms = [a for a in (r, sw) if a]
    moving = [a for a in arms if a["low"] > 0]
    if any(a["diff"] >= 0.5 for a in moving):
        verdict = "BudgetMix learns to read its budget where reading pays"
    elif moving:
        most = max(a["diff"] for a in moving)
        verdict = (
            f"BudgetMix moves with its budget by a sliver at most ({fmt.number(most, 3)} of the optimum's 2), "
            "so its effect comes without reading the budget in any measure that pays"
        )
    else:
        verdict = "on this evidence BudgetMix's effect comes without reading the budget"
    control = c.get("openings", {}).get("mean")
    lead_words = (
        f"BudgetMix leads GRPO on random maps at {', '.join(above)} of T_max"
        if above
        else "BudgetMix does not lead GRPO on random maps at any budget (every paired interval contains 0 or "
        "lies below it)"
    )
    return (
        f"**In one sentence:** {lead_words}; {len(reads_random)} of its {r['n_seeds']} seeds move with the budget "
        f"line there; on doorway maps, where reading is worth about {fmt.number(d.get('mix_gap', float('nan')), 0)} "
        f"points, its opening responsiveness minus the base's is {_iv(r)} (optimum 2)"
        + (f", mid-episode {_iv(sw)}" if sw else "")
        + ", while the supervised control "
        f"reaches {fmt.number(control, 2) if control is not None else 'n/a'}: {verdict}."
    )
