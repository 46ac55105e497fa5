"""Notebook 04's analysis: matched-state probing. Does RL pick better single actions than the base at the same
states, and where in a trajectory (normalised depth d_t = t / T_max)?

For every GRPO seed k: a pool of matched states drawn equally from the base's and that seed's trajectories on the
test tasks at the full budget (`probing.matched_pool`); at each state the base, the sharpened base, the RL model
and the RL model decoded as the sharpened base is (`rl_sharp`: the symmetric control, same temperature as the
sharpened base) sample G actions from independent streams and the environment's step oracle scores them
(`probing.state_quality`). Everything base-side is drawn per seed (`controls.by_seed`, `controls.stream`): seed
k's base trajectories, pool and action streams are its own, so seed differences are independent replicates.
Win rates (with ties and losses) and mean quality differences (ties count as 0, so ties do not cap them) are means
over RL seeds with a seeds-then-states interval, and each comparison's verdict is the t-interval over the seeds'
mean differences with the minimum detectable effect at `POWER` beside it (`probing.seed_summary`); dead states are
counted apart. On an environment without a step oracle nothing is
probed and `summary` records why (`probing.skipped`).

`probe` computes, `summary` gives the notebook's metrics.json and `findings` reads it back: writer and reader of
the schema side by side.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import pandas as pd

from helpers import controls, envs, evaluate, fmt, metrics, paper, plots, probing, store
from helpers.agents import AgentLike
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling

NOTEBOOK = "04_step_level_probing"
PAIRS = (("rl", "base"), ("rl", "sharp"), ("sharp", "base"), ("rl_sharp", "sharp"))
POWER = 0.8  # the power at which every minimum detectable effect is stated
SKIPPED = "matched-state probing needs a step oracle"


@dataclass
class Probe:
    """What notebook 04 computes: the oracle's record, the pools of every GRPO seed and the per-state table
    (columns of `probing.state_table` and `rl_seed`), its summary over seeds, the win rates by depth bin and their
    intervals. Empty where the environment has no step oracle."""

    oracle: dict
    tasks: list = field(default_factory=list)
    pools: dict[str, list[probing.ProbeState]] = field(default_factory=dict)
    per_state: pd.DataFrame = field(default_factory=pd.DataFrame)
    seeds: dict = field(default_factory=dict)
    depth: pd.DataFrame = field(default_factory=pd.DataFrame)
    depth_intervals: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def has_oracle(self) -> bool:
        return bool(self.oracle["step_oracle"])


def roster(cfg: Config) -> dict[str, AgentLike]:
    """The GRPO roster (`controls.agents`, with the symmetric twins) and every seed's base-side agents under their
    per-seed names (`controls.by_seed`: `base-s<k>`, `sharp-s<k>`)."""
    agents = controls.agents(cfg, modes=("full",))
    return agents | {n: a for g in controls.by_seed(agents).values() for n, a in g.items()}


def rl_seed(name: str) -> int | None:
    """The RL seed of a roster name (`grpo-s1`, `base-s1` -> 1)."""
    return controls.rl_seed_of(name)


def recorded(cfg: Config, agents: dict[str, AgentLike], tasks: list, name: str) -> list:
    """Agent `name`'s probing trajectories, two per test task at each task's own T_max (shared with notebook 05),
    on the draws of its RL seed (`controls.stream`: `base-s1` and `grpo-s1` share them, `base-s0` has its own)."""
    sampling = Sampling.from_config(cfg.sampling)
    k = rl_seed(name)
    seed = cfg.seed + 4000 if k is None else controls.stream(cfg.seed + 4000, k)
    return evaluate.recorded_trajectories(
        cfg.results_name, f"probe-{name}", agents[name], cfg.env.name, tasks, None, 2, sampling, seed=seed
    )


def roles(name: str) -> tuple[tuple[str, str], ...]:
    """(role, agent) of the four policies compared at the pool of RL seed `name`: that seed's base and sharpened
    base (`base-s<k>`, `sharp-s<k>`), the RL model and the RL model decoded as the sharpened base is."""
    k = rl_seed(name)
    return (
        ("base", f"base-s{k}"),
        ("sharp", f"sharp-s{k}"),
        ("rl", name),
        ("rl_sharp", controls.sharp_name(name)),
    )


def by_agent(pools: dict[str, list]) -> dict[str, list[tuple[str, str]]]:
    """Agent -> the (pool, role) pairs it plays, so each agent is opened once for all of its pools (each agent plays
    in its own seed's pool)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name in pools:
        for role, agent in roles(name):
            out.setdefault(agent, []).append((name, role))
    return out


def quality_table(
    agents: dict[str, AgentLike], pools: dict[str, list], g: int, cfg: Config, seed: int
) -> pd.DataFrame:
    """Per state of every seed's pool: each role's mean oracle quality over its G actions, sampled with the pool's
    RL seed's stream of `seed` (`controls.stream`; each policy draws from its own stream, so the order in which the
    agents are opened changes nothing)."""
    sampling = {
        name: Sampling.from_config(cfg.sampling, seed=controls.stream(seed, rl_seed(name))) for name in pools
    }
    plays = {
        agent: [
            evaluate.Play(
                (name, role),
                f"quality-{name}-{role}",
                pools[name],
                [g, repr(sampling[name]), probing.LENGTH_BUCKETS],
                probing.state_quality,
                (pools[name], g, sampling[name], probing.LENGTH_BUCKETS),
            )
            for name, role in agent_plays
        ]
        for agent, agent_plays in by_agent(pools).items()
    }
    # (pool, role) -> [n_states, g] qualities; each agent loaded once, two at a time in workers (`eval.workers`)
    quality = evaluate.recorded_plays(cfg.results_name, agents, plays, cfg.eval.workers)
    tables = [
        probing.state_table(pool, {role: quality[name, role] for role, _ in roles(name)}).assign(
            rl_seed=int(name.rsplit("-s", 1)[1])
        )
        for name, pool in pools.items()
    ]
    return pd.concat(tables, ignore_index=True)


def probe(cfg: Config, out: store.Run) -> Probe:
    """Build every GRPO seed's matched pool, score the three policies there, summarise over seeds and by depth;
    writes the tables `per_state_quality` and `by_depth`."""
    oracle = envs.step_oracle(cfg.env.name)
    if not oracle["step_oracle"]:
        return Probe(oracle)
    p = cfg.probing
    tasks = load_tasks(cfg.env.name, "test", seed=cfg.seed, **settings(cfg))
    by_id = {t.task_id: t for t in tasks}
    agents = roster(cfg)
    pools = {
        name: probing.matched_pool(
            recorded(cfg, agents, tasks, f"base-s{rl_seed(name)}"),
            recorded(cfg, agents, tasks, name),
            by_id,
            p.n_states,
            seed=controls.stream(cfg.seed + 4001, rl_seed(name)),
        )
        for name in controls.seeds_of(agents, "grpo")
    }
    per_state = quality_table(agents, pools, p.g, cfg, cfg.seed + 4002)
    out.write_table("per_state_quality", per_state)
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    seeds = probing.seed_summary(per_state, list(PAIRS), *boot, target_power=POWER)
    depth = pd.concat(
        [
            probing.by_depth(per_state, p.depth_bins, a, b).assign(comparison=f"{a} vs {b}")
            for a, b in PAIRS[:2]
        ]
    )
    out.write_table("by_depth", depth)
    intervals = depth_win_intervals(per_state, p.depth_bins, "rl", "base", *boot)
    return Probe(oracle, tasks, pools, per_state, seeds, depth, intervals)


def depth_win_intervals(
    per_state: pd.DataFrame,
    bins: list[float],
    a: str = "rl",
    b: str = "base",
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Per bin of normalised depth (the bins and labels of `probing.by_depth`): the fraction of live states where
    `a` beats `b`, mean over RL seeds (column `rl_seed`), with a seeds-then-states interval
    (`metrics.nested_bootstrap`). Columns depth_bin, better, low, high."""
    labels = [f"[{lo:.2f}, {hi:.2f})" for lo, hi in itertools.pairwise(bins)]
    binned = pd.cut(per_state["depth"], bins=bins, labels=labels, right=False, include_lowest=True)
    rows = []
    for label, g in per_state.groupby(binned, observed=True):
        seeds = g.groupby("rl_seed") if "rl_seed" in g else [(0, g)]
        per_seed = [w for _, s in seeds if (w := probing.wins(s, a, b)).size]
        if per_seed:
            point, low, high = metrics.nested_bootstrap(per_seed, n_boot=n_boot, ci=ci, seed=seed)
            rows.append({"depth_bin": str(label), "better": point, "low": low, "high": high})
    return pd.DataFrame(rows, columns=["depth_bin", "better", "low", "high"])


def statement(r: Probe) -> str:
    """What the notebook says first, as Markdown: the step oracle and the size of every seed's pool."""
    pools = "\n".join(
        f"- {name}: {len(pool)} states ({sum(s.source == 'base' for s in pool)} from base trajectories)"
        for name, pool in r.pools.items()
    )
    return probing.oracle_statement(r.oracle) + (f"\n\n{pools}" if pools else "")


def win_table(r: Probe) -> pd.DataFrame:
    """Per comparison: the fractions of live states better / tied / worse (means over seeds) and the interval of
    `better`; the mean quality difference (ties count as 0) with its seeds-then-states interval, and its verdict
    paired by seed (`t_low`, `t_high`) with the minimum detectable effect (`mde`)."""
    return pd.DataFrame(
        {
            f"{a} vs {b}": comparison_row(r.seeds[f"{a}_vs_{b}"])
            for a, b in PAIRS
            if r.has_oracle and f"{a}_vs_{b}" in r.seeds
        }
    )


def comparison_row(d: dict) -> dict:
    """One comparison of `probing.seed_summary` as a table column: the descriptive intervals (seeds-then-states) of
    the win rate and the mean difference, labelled so (`fmt.HEADERS`), beside the verdict's paired interval."""
    row = {k: d[k] for k in ("better", "tie", "worse")} | dict(
        zip(("better_low", "better_high"), d["better_ci"], strict=True)
    )
    row |= {
        "mean_diff": d.get("mean_diff"),
        "diff_low": d.get("mean_diff_ci", [None])[0],
        "diff_high": d.get("mean_diff_ci", [None, None])[1],
    }
    v = d.get("paired") or {}
    return row | {"t_low": v.get("low"), "t_high": v.get("high"), "mde": v.get("mde")}


def figures(r: Probe, ci: float = 0.95, env: str | None = None) -> dict[str, plt.Figure]:
    """The notebook's figures by file name (none where nothing was probed), with the paper's fraction of matched
    states where RL is better for `env` (by default the tasks' environment; FrozenLake's where the paper reports
    none) as a reference line."""
    if not r.has_oracle:
        return {}
    env = env or (r.tasks[0].env if r.tasks else "frozenlake")
    reported = env if env in paper.MATCHED_STATES_RL_BETTER else "frozenlake"
    return {
        "quality_distributions": plots.quality_distributions(r.per_state[~r.per_state["dead"]]),
        "rl_win_rate_by_depth": plots.win_rate_by_depth(
            r.depth[r.depth["comparison"] == "rl vs base"],
            "rl",
            "base",
            r.depth_intervals,
            ci,
            paper.value(paper.MATCHED_STATES_RL_BETTER[reported]),
        ),
        "matched_differences": plots.matched_differences(win_table(r), ci),
    }


def summary(cfg: Config, r: Probe) -> dict:
    """Everything notebook 04 reports, for its metrics.json (and `findings`)."""
    if not r.has_oracle:  # recorded and skipped, as the paper does
        return probing.skipped(r.oracle, SKIPPED)
    return {
        **r.oracle,
        "matched_states": r.seeds,
        "by_depth": r.depth.to_dict(orient="records"),
        "by_source": {src: probing.win_summary(g) for src, g in r.per_state.groupby("source")},
        "g": cfg.probing.g,
        "t_max": sorted({t.t_max for t in r.tasks}),
        "seeds": cfg.train.seeds,
        "sharpened_temperature": controls.sharpened(cfg)["temperature"],
        "power": POWER,
        "paper": {env: paper.value(v) for env, v in paper.MATCHED_STATES_RL_BETTER.items()},
    }


def win(d: dict) -> str:
    """A win rate and its interval in percent: `61.0 % [52.1, 69.3]` (for tables; findings prose gives the win rate
    alone, `fmt.percent`, and decides by the paired interval of wins minus losses)."""
    return fmt.entry(d, "better", digits=1, scale=100, unit="%")


def against_paper(d: dict, paper_value: float, where: str) -> str:
    """The paper's win rate beside this run's, with the agreement said outright: whether the paper's value lies
    inside this run's interval over seeds and states (the notebook's table shows it)."""
    return f"paper, {where}: {fmt.percent(paper_value)}: {fmt.against_paper(paper_value, *d['better_ci'])}"


LABELS = {
    "rl_vs_base": "RL minus base",
    "rl_vs_sharp": "RL minus sharpened base",
    "sharp_vs_base": "sharpened base minus base",
    "rl_sharp_vs_sharp": "RL decoded as the sharpened base minus the sharpened base",
}


def difference(d: dict) -> str:
    """A comparison's mean quality difference, paired by seed: `+0.012 [-0.003, +0.027] (contains 0; MDE 0.020)`."""
    v = d.get("paired")
    return fmt.verdict(v, digits=3) if v else fmt.MISSING


def difference_findings(m: dict, key: str = "matched_states", where: str = "live states") -> list[str]:
    """The mean quality differences of every comparison (ties count as 0, so ties do not cap them) with their
    verdicts paired by seed and the MDE, the shares of wins, ties and losses, and the symmetric control: RL decoded
    as the sharpened base is against it. A verdict is the side of 0 of the paired interval."""
    s = m[key]
    pairs = [k for k in LABELS if k in s]
    n = s["n_seeds"]
    lines = [
        f"- **Mean quality difference** at {where} (a tie counts as 0; paired by seed: t-interval over the {n} seeds' "
        f"means, each seed with its own base-side draws, MDE at {fmt.percent(m['power'], 0)} power): "
        + "; ".join(f"{LABELS[k]} {difference(s[k])}" for k in pairs)
        + ". Wins / ties / losses: "
        + "; ".join(
            f"{k.replace('_vs_', ' vs ')} {fmt.percent(s[k]['better'])} / {fmt.percent(s[k]['tie'])} / "
            f"{fmt.percent(s[k]['worse'])}"
            for k in pairs
        )
        + ".",
    ]
    sym = s.get("rl_sharp_vs_sharp")
    if sym is not None and sym.get("paired"):
        v = sym["paired"]
        reading = {
            "above 0": "RL's steps are better than the sharpened base's when both are decoded alike: a "
            "per-step gain beyond sharpening",
            "below 0": "the sharpened base's steps are better when both are decoded alike: no per-step gain "
            "beyond sharpening",
        }.get(
            fmt.side(v["low"], v["high"]),
            "decoded alike, this sample cannot tell RL's per-step gain from "
            "sharpening (an effect below the MDE could be missed)",
        )
        judged = (
            halves(sym, "sharp")
            if sym.get("net_win_paired")
            else [f"on average: {difference(sym)}: {reading}"]
        )
        lines.append(
            f"- **Symmetric control** (RL decoded at the sharpened base's temperature "
            f"{m['sharpened_temperature']:g}, against the sharpened base), on the same two halves: "
            + "; ".join(judged)
            + "."
        )
    return lines


CLAIM = "- **The paper's claim** (RL is not uniformly better at single steps; its mean step quality no better than the base's)"

# The paper's claim has two halves, each decided by its own paired interval: how often RL's steps are better
# (wins minus losses; the paper: RL better at well under half of the states) and how good they are on average (the
# mean quality difference; the paper: no better than the base). A verdict per half, against the base and against the
# sharpened base, so a reader sees which half agrees with the paper.
_VERDICTS = {  # (how often, on average) by comparison: the base is the paper's; the sharpened base the kit's control
    "base": (
        {
            "above 0": "RL wins at more states than it loses: not as in the paper",
            "below 0": "RL loses at more states than it wins: as in the paper",
        },
        {
            "above 0": "RL's steps are better on average: not as in the paper",
            "below 0": "RL's steps are worse on average: as in the paper (no better)",
        },
    ),
    "sharp": (
        {
            "above 0": "RL wins at more states than it loses: a per-step gain beyond sharpening",
            "below 0": "the sharpened base wins at more states",
        },
        {
            "above 0": "RL's steps are better on average: a per-step gain beyond sharpening",
            "below 0": "the sharpened base's steps are better on average: no per-step gain beyond sharpening",
        },
    ),
}
_UNDECIDED = "contains 0: this sample cannot tell (an effect below the MDE could be missed)"


def net_win(d: dict) -> str:
    """Wins minus losses beside the shares, paired by seed where recorded: `wins 61.0 % / ties 2.0 % / losses
    37.0 %, wins minus losses +0.240 [+0.110, +0.370] (above 0; MDE 0.100)`."""
    shares = (
        f"wins {fmt.percent(d['better'])} / ties {fmt.percent(d['tie'])} / losses {fmt.percent(d['worse'])}"
    )
    v = d.get("net_win_paired")
    return shares + (f", wins minus losses {fmt.verdict(v, digits=3)}" if v else "")


def halves(d: dict, against: str = "base") -> list[str]:
    """The two halves of the claim for one comparison, each with its paired interval and its verdict: how often
    (wins minus losses, `net_win_paired`) and how much (the mean quality difference, `paired`), worded for the
    comparison (`against`: "base" or "sharp", `_VERDICTS`). A half whose paired interval the run did not record says
    so instead of guessing from a point."""
    often, mean = _VERDICTS[against]
    out = []
    v = d.get("net_win_paired")
    if v:
        out.append(f"how often: {net_win(d)}: {often.get(fmt.side(v['low'], v['high']), _UNDECIDED)}")
    else:
        out.append(
            f"how often: {net_win(d)} (no paired interval of wins minus losses in this run: no verdict)"
        )
    p = d.get("paired")
    out.append(f"on average: {difference(d)}: {mean.get(fmt.side(p['low'], p['high']), _UNDECIDED)}")
    return out


def claim(s: dict) -> list[str]:
    """The verdicts on the paper's claim, one line per comparison, each split into its two halves (`halves`):
    against the base (the paper's comparison) and against the sharpened base (the kit's control: a step gain that
    sharpening also gives is not RL's own). Never a win rate against 1/2: under no effect a win rate is
    (1 - ties) / 2, below 1/2 wherever there are ties. A run from before the paired verdicts (no `paired`) gets no
    verdict."""
    rb, rs = s["rl_vs_base"], s["rl_vs_sharp"]
    if not rb.get("paired"):
        return [
            f"{CLAIM}: no verdict from this run: it predates the paired, tie-aware interval of the mean quality "
            "difference, and a win rate against one half is no test (ties pull it below one half under no "
            "effect)."
        ]
    lines = [f"{CLAIM}, in two halves:", "  - RL against the base: " + "; ".join(halves(rb)) + "."]
    if rs.get("paired"):
        lines.append("  - RL against the sharpened base: " + "; ".join(halves(rs, "sharp")) + ".")
    return lines


def findings(m: dict) -> list[str]:
    """The 'what this run found' section of notebook 04, from its metrics.json: win rates as described numbers, the
    verdicts from the paired intervals (`claim`, `difference_findings`)."""
    if "skipped" in m:
        return probing.skipped_findings(m)
    s = m["matched_states"]
    env = m.get("env", "frozenlake")
    reported = env if env in m["paper"] else "frozenlake"
    where = (
        paper.MATCHED_STATES_RL_BETTER[reported].setting
        if reported in paper.MATCHED_STATES_RL_BETTER
        else reported
    )
    q = {k: s[f"mean_quality_{k}"] for k in ("base", "sharp", "rl")}
    rb = s["rl_vs_base"]
    lines = [
        f"Matched states per GRPO seed: {s['n_states_per_seed']} (of them dead, left out: {s['n_dead_per_seed']}); "
        f"G = {m['g']} actions per policy and state; means over {s['n_seeds']} seeds; each verdict's 95 % "
        "interval is paired by seed.",
        f"- **RL better than the base** at {fmt.percent(rb['better'])} of live states (tie {fmt.percent(rb['tie'])}, "
        f"worse {fmt.percent(rb['worse'])}; {against_paper(rb, m['paper'][reported], where)}).",
        f"- **RL better than the sharpened base** (temperature {m['sharpened_temperature']:g}) at "
        f"{fmt.percent(s['rl_vs_sharp']['better'])}; the sharpened base better than the base at "
        f"{fmt.percent(s['sharp_vs_base']['better'])} (the verdicts: wins minus losses and the mean difference, "
        "paired by seed, below; the win rates' own intervals are in the table above).",
        "- **Mean quality** (live states): "
        + "; ".join(f"{k} {fmt.number(v['mean'])}" for k, v in q.items())
        + ".",
    ]
    lines += claim(s)
    if (s["rl_vs_base"].get("paired") or None) is not None:
        lines += difference_findings(m)
    rows = [r for r in m["by_depth"] if r["comparison"] == "rl vs base"]
    if rows:
        lines.append(
            "- **By depth d_t** (RL better than base, live states): "
            + "; ".join(
                f"{r['depth_bin']} {fmt.percent(r['rl_better'], 0)} (n = {r['n_live']}, {r['n_dead']} dead)"
                for r in rows
            )
            + " (the paper: RL's advantage appears only late in trajectories; these bins have no interval "
            "on their trend, so they describe and do not decide)."
        )
    return lines
