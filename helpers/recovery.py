"""Notebook 05's analysis: error-state recovery. After an injected error, does RL pick the better next action,
does its advantage concentrate at error states, and does it recover more often with the remaining budget?

For every GRPO seed k: candidates drawn like notebook 04's matched states (more of them, shuffled), an error
injected at each by the environment (`probing.error_pool`) until the pool is full; at each error state the base,
the sharpened base, the RL model and the RL model decoded as the sharpened base is (`rl_sharp`, the symmetric
control) sample G actions (`probing.state_quality`) and continue `n_continuations` times
(`probing.continuation_success`), beside the structural bound of the same states (`probing.best_success`).
Concentration is RL's win rate at its error states minus at its matched states (notebook 04's table), per seed.
Everything base-side (the base trajectories the candidates and injected replies come from, the draws of the pool,
the streams) is seed k's own (`controls.stream`), so the seed differences are independent replicates. Every number
is a mean over RL seeds with a seeds-then-states interval (`metrics.nested_bootstrap`); every comparison's verdict
is the t-interval over the seed differences with the minimum detectable effect at `POWER` beside it
(`stats.paired_verdict`). On an
environment without a step oracle nothing is injected and `summary` records why (`probing.skipped`).

`recover` computes, `summary` gives the notebook's metrics.json and `findings` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers import (
    controls,
    envs,
    evaluate,
    fmt,
    matched,
    metrics,
    models,
    paper,
    plots,
    probing,
    stats,
    store,
)
from helpers.agents import Agent, AgentLike
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers.rollout import ChatFormat

NOTEBOOK = "05_error_recovery"
PAIRS = matched.PAIRS
RL_PAIRS = tuple((a, b) for a, b in PAIRS if a.startswith("rl"))  # the comparisons of an RL model
POWER = matched.POWER
SKIPPED = "error injection and recovery need a step oracle"


@dataclass
class Recovery:
    """What notebook 05 computes (empty where the environment has no step oracle): the error pools, the per-state
    table of the next action's quality, its summary over seeds (`superior`), the concentration, the continuation
    table (one row per role), the continuation differences (RL minus each comparison) and the bound."""

    oracle: dict
    tasks: list = field(default_factory=list)
    errors: dict[str, list[probing.ProbeState]] = field(default_factory=dict)
    per_state: pd.DataFrame = field(default_factory=pd.DataFrame)
    superior: dict = field(default_factory=dict)
    concentration: dict = field(default_factory=dict)
    continuation: pd.DataFrame = field(default_factory=pd.DataFrame)
    differences: dict = field(default_factory=dict)
    upper: tuple = ()
    paired: dict = field(default_factory=dict)  # the continuation differences paired by seed

    @property
    def has_oracle(self) -> bool:
        return bool(self.oracle["step_oracle"])


def error_pools(cfg: Config, agents: dict[str, Agent], tasks: list) -> dict[str, list[probing.ProbeState]]:
    """Every GRPO seed's error states (`seed_error_pool`), from the base's and the seed's trajectories of notebook
    04."""
    tokenizer = agents["base"].tokenizer()
    chat = ChatFormat(tokenizer, models.chat_kwargs(tokenizer))  # as the policies' rollouts render it
    errors = {}
    for name in controls.seeds_of(agents, "grpo"):
        k = matched.rl_seed(name)
        base = matched.recorded(cfg, agents, tasks, f"base-s{k}")  # this seed's own base trajectories
        errors[name] = seed_error_pool(cfg, chat, base, matched.recorded(cfg, agents, tasks, name), tasks, k)
    return errors


def seed_error_pool(
    cfg: Config, chat: ChatFormat, base: list, rl: list, tasks: list, k: int
) -> list[probing.ProbeState]:
    """RL seed `k`'s error states from its own base trajectories and its RL model's (`base`, `rl`): candidates
    from both, a balanced, shuffled pool larger than needed (some states admit no error), errors injected in order
    (replies the base took on the task, `probing.attempts_of`), each draw on the seed's own stream. Notebook 05 and
    `instrument` (scripted players in the same slots) build their pools with it."""
    p = cfg.probing
    by_id = {t.task_id: t for t in tasks}
    attempts = probing.attempts_of(base)  # replies the env may inject
    candidates = probing.matched_pool(
        base,
        rl,
        by_id,
        min(4 * p.n_error_states, 400),
        seed=controls.stream(cfg.seed + 5000, k),
        at_most=True,
    )
    order = np.random.default_rng(controls.stream(cfg.seed + 5001, k)).permutation(len(candidates))
    return probing.error_pool(
        [candidates[i] for i in order], chat, controls.stream(cfg.seed + 5002, k), p.n_error_states, attempts
    )


def concentration(
    per_state: pd.DataFrame, matched_states: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> dict:
    """Per comparison with RL (both tables holding its columns): the win rate at error states minus at matched
    states, mean over seeds, its interval (seeds, then the states of each pool), the per-seed values and the verdict
    paired by seed (`paired`: the t-interval over the per-seed values, with the MDE at `POWER`)."""
    out = {}
    for a, b in RL_PAIRS:
        if not {a, b} <= set(per_state.columns) & set(matched_states.columns):
            continue
        per_seed = [
            (
                probing.wins(per_state[per_state["rl_seed"] == s], a, b),
                probing.wins(matched_states[matched_states["rl_seed"] == s], a, b),
            )
            for s in sorted(per_state["rl_seed"].unique())
        ]
        point, low, high = metrics.nested_bootstrap(per_seed, lambda e, m: e - m, n_boot, ci, seed)
        values = [float(e.mean() - m.mean()) for e, m in per_seed]
        paired = stats.paired_verdict(values, [0.0] * len(values), ci, POWER) if len(values) >= 2 else None
        out[f"{a}_vs_{b}"] = {
            "error_minus_matched": point,
            "ci": [low, high],
            "per_seed": values,
            "paired": paired,
        }
    return out


def continuation(
    cfg: Config, agents: dict[str, AgentLike], errors: dict[str, list]
) -> tuple[pd.DataFrame, dict, tuple, dict]:
    """Continuation success of every role from every seed's error states: the table (one row per role), RL minus
    the base and minus the sharpened base and, symmetrically, RL decoded as the sharpened base minus it, the
    structural bound (mean, low, high), and each difference paired by seed (`stats.paired_verdict`, the MDE from the
    states' variance components). Each agent is opened once (`matched.by_agent`); each draws from its own stream
    (seeded by its pool's RL seed), so the order changes nothing."""
    p, sampling = cfg.probing, Sampling.from_config(cfg.sampling)
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    plays = {
        agent: [
            evaluate.Play(
                (name, role),
                f"continuation-{name}-{role}",
                errors[name],
                [p.n_continuations, repr(sampling), seed],
                probing.continuation_success,
                (errors[name], p.n_continuations, sampling, seed),
            )
            for name, role in agent_plays
            for seed in [controls.stream(cfg.seed + 5004, matched.rl_seed(name))]
        ]
        for agent, agent_plays in matched.by_agent(errors).items()
    }
    # (pool, role) -> per-state continuation success; each agent loaded once, two at a time (`eval.workers`)
    success = evaluate.recorded_plays(cfg.results_name, agents, plays, cfg.eval.workers)
    rates: dict[str, list] = {role: [] for role, _ in matched.roles(next(iter(errors)))} if errors else {}
    bounds = []
    for name, pool in errors.items():
        bounds.append(probing.best_success(pool))
        for role, _ in matched.roles(name):
            rates[role].append(success[name, role])
    upper = metrics.nested_bootstrap(bounds, lambda x: x, *boot)
    rows = []
    for role, per_seed in rates.items():
        point, low, high = metrics.nested_bootstrap(per_seed, lambda x: x, *boot)
        rows.append(
            {
                "model": role,
                "success": point,
                "low": low,
                "high": high,
                "per_seed": [round(float(r.mean()), 4) for r in per_seed],
                "upper_bound": upper[0],
                "n_states": sum(len(r) for r in per_seed),
                "n_continuations": p.n_continuations,
            }
        )
    differences, paired = {}, {}
    for a, b in RL_PAIRS:
        units = [r - o for r, o in zip(rates[a], rates[b], strict=True)]
        differences[f"{a} - {b}"] = metrics.nested_bootstrap(units, lambda x: x, *boot)
        if len(units) >= 2:
            means = [float(u.mean()) for u in units]
            paired[f"{a} - {b}"] = stats.paired_verdict(
                means, [0.0] * len(means), cfg.eval.ci, POWER, units=units
            )
    return pd.DataFrame(rows), differences, upper, paired


def recover(cfg: Config, out: store.Run) -> Recovery:
    """Inject the errors, score the next action, measure concentration and continue from every error state;
    writes the tables `error_state_quality` and `continuation_success`."""
    oracle = envs.step_oracle(cfg.env.name)
    if not oracle["step_oracle"]:
        return Recovery(oracle)
    tasks = load_tasks(cfg.env.name, "test", seed=cfg.seed, **settings(cfg))
    agents = matched.roster(cfg)
    errors = error_pools(cfg, agents, tasks)
    per_state = matched.quality_table(agents, errors, cfg.probing.g, cfg, cfg.seed + 5003)
    out.write_table("error_state_quality", per_state)
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    superior = probing.seed_summary(per_state, list(PAIRS), *boot, target_power=POWER)
    states_04 = store.Run.read_table(cfg.results_name, matched.NOTEBOOK, "per_state_quality")
    conc = concentration(per_state, states_04, *boot)
    table, differences, upper, paired = continuation(cfg, agents, errors)
    out.write_table("continuation_success", table)
    return Recovery(oracle, tasks, errors, per_state, superior, conc, table, differences, upper, paired)


def statement(r: Recovery) -> str:
    """What the notebook says first, as Markdown: the step oracle and the size of every seed's error pool."""
    pools = "\n".join(
        f"- {name}: {len(e)} error states ({sum(s.source == 'base' for s in e)} from base trajectories)"
        for name, e in r.errors.items()
    )
    return probing.oracle_statement(r.oracle) + (f"\n\n{pools}" if pools else "")


def superior_table(r: Recovery) -> pd.DataFrame:
    """Per comparison: the fraction of live error states where the first policy's next action is better, its
    interval, and ties."""
    return pd.DataFrame(
        {
            f"{a} vs {b}": {
                "better": d["better"],
                "low": d["better_ci"][0],
                "high": d["better_ci"][1],
                "tie": d["tie"],
            }
            for a, b in PAIRS
            if (d := r.superior.get(f"{a}_vs_{b}"))
        }
    )


def concentration_table(r: Recovery) -> pd.DataFrame:
    """The concentration per comparison, one row each."""
    return pd.DataFrame(r.concentration).T


def figures(r: Recovery, ci: float = 0.95, env: str | None = None) -> dict[str, plt.Figure]:
    """The notebook's figures by file name (none where nothing was injected), with the paper's numbers for `env`
    (by default the tasks' environment; FrozenLake's where the paper reports none) as reference marks, and the
    concentration (RL's win rate at error states minus at matched states) and the continuation's differences (paired by seed),
    each with its verdict's interval."""
    if not r.has_oracle:
        return {}
    env = env or (r.tasks[0].env if r.tasks else "frozenlake")
    reported = env if env in paper.ERROR_STATES_RL_SUPERIOR else "frozenlake"
    rl, base = (paper.value(v) for v in paper.CONTINUATION_SUCCESS[reported])
    fig = plots.error_recovery(
        r.superior,
        r.continuation,
        ci,
        paper.value(paper.ERROR_STATES_RL_SUPERIOR[reported]),
        {"rl": rl, "base": base},
    )
    figs = {"error_recovery": fig, "concentration": plots.concentration(r.concentration)}
    if any(r.paired.values()):  # the continuation's verdicts, paired by seed (two RL seeds at least)
        figs["continuation_paired"] = plots.continuation_differences(r.paired)
    return figs


def summary(cfg: Config, r: Recovery) -> dict:
    """Everything notebook 05 reports, for its metrics.json (and `findings`)."""
    if not r.has_oracle:  # recorded and skipped, as the paper does
        return probing.skipped(r.oracle, SKIPPED)
    reported = cfg.env.name if cfg.env.name in paper.ERROR_STATES_RL_SUPERIOR else "frozenlake"
    return {
        **r.oracle,
        "n_error_states_per_seed": [len(e) for e in r.errors.values()],
        "superior_action": r.superior,
        "concentration": r.concentration,
        "continuation": r.continuation.to_dict(orient="records"),
        "continuation_difference": {k: {"mean": v[0], "ci": [v[1], v[2]]} for k, v in r.differences.items()},
        "continuation_paired": r.paired,
        "continuation_upper_bound": {"mean": r.upper[0], "ci": [r.upper[1], r.upper[2]]},
        "power": POWER,
        "t_max": sorted({t.t_max for t in r.tasks}),
        "seeds": cfg.train.seeds,
        "sharpened_temperature": controls.sharpened(cfg)["temperature"],
        "paper": {
            "setting": paper.ERROR_STATES_RL_SUPERIOR[reported].setting,
            "rl_superior_action": paper.value(paper.ERROR_STATES_RL_SUPERIOR[reported]),
            "continuation_rl": paper.value(paper.CONTINUATION_SUCCESS[reported][0]),
            "continuation_base": paper.value(paper.CONTINUATION_SUCCESS[reported][1]),
        },
    }


def _paper_gap(m: dict) -> str:
    """The paper's RL-minus-base continuation gap judged outright against this run's paired interval ("" without
    one)."""
    v, pp = m.get("continuation_paired", {}).get("rl - base"), m["paper"]
    if not v:
        return ""
    return f"; its RL-minus-base gap against this run's paired interval: {fmt.against_paper(pp['continuation_rl'] - pp['continuation_base'], v['low'], v['high'])}"


def findings(m: dict) -> list[str]:
    """The 'what this run found' section of notebook 05, from its metrics.json."""
    if "skipped" in m:
        return probing.skipped_findings(m)
    s, c, pp = m["superior_action"], m["concentration"], m["paper"]
    where = pp.get("setting", "FrozenLake")
    cont = {r["model"]: r for r in m["continuation"]}
    lines = [
        f"Error states per GRPO seed: {m['n_error_states_per_seed']} (dead, left out: {s['n_dead_per_seed']}); "
        "means over seeds; each verdict's 95 % interval is paired by seed.",
        f"- **RL picks the better next action** than the base at {fmt.percent(s['rl_vs_base']['better'])} of live "
        f"error states ({matched.against_paper(s['rl_vs_base'], pp['rl_superior_action'], where)}), than the "
        f"sharpened base at {fmt.percent(s['rl_vs_sharp']['better'])} (verdicts paired by seed below).",
    ]
    if (s["rl_vs_base"].get("paired") or None) is not None:
        lines += matched.difference_findings(m, "superior_action", "live error states")
    labels = {
        "rl_vs_base": "the base",
        "rl_vs_sharp": "the sharpened base",
        "rl_sharp_vs_sharp": "the sharpened base, RL decoded alike",
    }
    for key, label in labels.items():
        if key not in c:
            continue
        d = c[key]
        paired = d.get("paired")
        lo_hi = (paired["low"], paired["high"]) if paired else d["ci"]  # paired by seed where recorded
        verdict = {
            "above 0": "higher at error states: RL's advantage concentrates there",
            "below 0": "lower at error states",
        }.get(fmt.side(*lo_hi), "not distinguishable at this sample size")
        said = (
            f"paired by seed {fmt.verdict(paired, scale=100)} points"
            if paired
            else fmt.entry(d, "error_minus_matched", "ci", digits=1, scale=100, signed=True, unit="points")
        )
        lines.append(
            f"- **Concentration** (win rate over {label}, error states minus matched states): {said}: {verdict}."
        )
    if any(k in c for k in labels):
        lines.append(
            "  Read with the depth confound: an error state is injected one step after a state drawn like the matched "
            "ones, so error states sit later in the episode on average, and RL's win rate itself changes with depth "
            "(notebook 04's bins d_t). The difference mixes 'after an error' with 'later in the episode'; exercise "
            "05a splits both pools at d_t = 0.5."
        )
    lines.append(
        "- **Continuation success** from the same error states: "
        + "; ".join(f"{k} {fmt.percent(v['success'])}" for k, v in cont.items())
        + f"; structural upper bound {fmt.percent(m['continuation_upper_bound']['mean'])} (paper, {where}: RL "
        f"{fmt.percent(pp['continuation_rl'])} vs base {fmt.percent(pp['continuation_base'])}{_paper_gap(m)})."
    )
    paired = m.get("continuation_paired", {})
    for k, v in m["continuation_difference"].items():
        p = paired.get(k)
        if p is None:  # a run from before the paired verdicts: the seeds-then-states interval decides
            lines.append(
                f"- **{k}** (continuation): {fmt.entry(v, digits=1, scale=100, signed=True, unit='points')}, "
                f"interval {fmt.side(*v['ci'])}."
            )
        else:
            lines.append(
                f"- **{k}** (continuation): paired by seed {fmt.verdict(p, scale=100)} points: interval "
                f"{fmt.side(p['low'], p['high'])}."
            )
    return lines
