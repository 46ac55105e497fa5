"""Notebook 06's analysis: plausible actions, improbable trajectories. The per-token NLL of actions under the base
policy and the cumulative log-likelihood ratio log pi_RL - log pi_base of successful trajectories, for the base,
the sharpened base and every GRPO seed, on recorded trajectories of the test tasks at each task's T_max; and the
same two numbers for transcripts recorded elsewhere when the profile names a file.

The measurements themselves (`action_nll`, `cumulative_llr`, transcripts) are `helpers.likelihood`'s; this module
chooses the trajectories, summarises over RL seeds with a seeds-then-trajectories interval
(`metrics.nested_bootstrap`), gives the notebook's metrics.json (`summary`) and reads it back (`findings`). Every
log-prob of the recorded trajectories is recorded too (`scorer`): Run All on committed results loads no model, and
the base scores each set of trajectories once, not once per RL seed. Transcripts from a file are scored live.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from helpers import controls, evaluate, fmt, likelihood, metrics, paper, stats, store
from helpers.agents import AgentLike, opened, opened_on_demand
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling

NOTEBOOK = "06_likelihood_analysis"
ROLES = ("rl", "base", "sharp")
POWER = 0.8  # the power at which every minimum detectable effect is stated


@dataclass
class Recorded:
    """The trajectories notebook 06 scores: the results they belong to (`profile`), the test tasks, the agents
    (base, sharp, every GRPO seed; not loaded: each scoring opens what it needs, the base and at most one RL seed at
    a time), the GRPO seeds' names and each agent's recorded trajectories."""

    profile: str
    tasks: list
    agents: dict[str, AgentLike]
    rl_names: list[str]
    trajs: dict[str, list]

    def count_table(self) -> pd.DataFrame:
        """Per agent (the rows): how many test trajectories were recorded and how many succeeded."""
        rows = {
            n: {"trajectories": len(t), "successful": int(sum(x.success for x in t))}
            for n, t in self.trajs.items()
        }
        return pd.DataFrame.from_dict(rows, orient="index").rename_axis("policy")

    def counts(self) -> dict[str, str]:
        """Per agent: how many trajectories, how many successful."""
        return {
            n: f"{len(t)} trajectories, {sum(x.success for x in t)} successful" for n, t in self.trajs.items()
        }


def record(cfg: Config) -> Recorded:
    """Every agent's trajectories on the first `probing.n_trajectories` test tasks (a trajectory per task at least,
    no more tasks than that), at each task's own T_max, recorded once and read back from the store."""
    p = cfg.probing
    tasks = load_tasks(cfg.env.name, "test", seed=cfg.seed, **settings(cfg))[: p.n_trajectories]
    n_per_task = max(1, -(-p.n_trajectories // len(tasks)))
    sampling = Sampling.from_config(cfg.sampling)
    agents = controls.agents(cfg, modes=("full",), symmetric=False)  # notebook 06 has no symmetric control
    trajs = {
        name: evaluate.recorded_trajectories(
            cfg.results_name,
            f"likelihood-{name}",
            agents[name],
            cfg.env.name,
            tasks,
            None,
            n_per_task,
            sampling,
            seed=cfg.seed + 6000,
            step_quality=False,
        )
        for name in agents
    }
    return Recorded(cfg.results_name, tasks, agents, controls.seeds_of(agents, "grpo"), trajs)


@contextmanager
def scorer(rec: Recorded, name: str) -> Iterator[evaluate.RecordedScores]:
    """Agent `name`'s log-probs, recorded (`evaluate.RecordedScores`): its model is loaded only for trajectories it
    has not scored yet, and closed on leaving the block."""
    with opened_on_demand(rec.agents[name], name) as get:
        yield evaluate.RecordedScores(rec.profile, f"scores-{name}", rec.agents[name], get)


def action_nll(rec: Recorded) -> pd.DataFrame:
    """Per action of the base's, the sharpened base's and every GRPO seed's trajectories: its per-token NLL under
    the base policy (`likelihood.action_nll`); column `actions_of` names the agent."""
    with scorer(rec, "base") as base:
        return pd.concat(
            [
                likelihood.action_nll(base, rec.trajs[name]).assign(actions_of=name)
                for name in ["base", "sharp", *rec.rl_names]
            ]
        )


def by_source(nll: pd.DataFrame) -> pd.DataFrame:
    """`action_nll` rows with the GRPO seeds pooled: `actions_of` is base, sharp or rl (for the histogram)."""
    return nll.assign(
        actions_of=nll["actions_of"].str.replace(r"-s\d+$", "", regex=True).replace({"grpo": "rl"})
    )


def nll_summary(
    nll: pd.DataFrame, rl_names: list[str], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float, float]]:
    """Mean per-token NLL per trajectory of each source's actions, (mean, low, high): base and sharp over their
    trajectories, rl over seeds then trajectories."""
    per_traj = nll.groupby(["actions_of", "trajectory"])["nll_mean"].mean()
    boot = (n_boot, ci, seed)
    return {
        "base": metrics.nested_bootstrap([per_traj["base"].to_numpy()], lambda x: x, *boot),
        "sharp": metrics.nested_bootstrap([per_traj["sharp"].to_numpy()], lambda x: x, *boot),
        "rl": metrics.nested_bootstrap([per_traj[n].to_numpy() for n in rl_names], lambda x: x, *boot),
    }


def cumulative(rec: Recorded) -> pd.DataFrame:
    """The cumulative LLR of every GRPO seed against the base (`likelihood.cumulative_llr`) on that seed's, the
    base's and the sharpened base's trajectories; columns `trajectories_of` (rl, base, sharp) and `rl_seed`."""
    rows = []
    with scorer(rec, "base") as base:
        for name in rec.rl_names:
            with scorer(rec, name) as rl:  # one RL seed at a time, beside the base
                rows += [
                    likelihood.cumulative_llr(rl, base, rec.trajs[src]).assign(
                        trajectories_of=role, rl_seed=name
                    )
                    for role, src in (("rl", name), ("base", "base"), ("sharp", "sharp"))
                ]
    return pd.concat(rows, ignore_index=True)


def llr_summary(
    ratio: pd.DataFrame, rl_names: list[str], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float, float]]:
    """The final cumulative LLR of successful trajectories per source, (mean, low, high) over seeds then
    trajectories; a source without a successful trajectory has no entry."""
    finals: dict[str, list] = {role: [] for role in ROLES}
    for name in rl_names:
        for role in ROLES:
            one = ratio[(ratio["rl_seed"] == name) & (ratio["trajectories_of"] == role)]
            final = one[one["success"]].groupby("trajectory")["cum_llr"].last().to_numpy()
            if final.size:
                finals[role].append(final)
    return {
        role: metrics.nested_bootstrap(v, lambda x: x, n_boot, ci, seed) for role, v in finals.items() if v
    }


def llr_difference(
    ratio: pd.DataFrame, rl_names: list[str], ci: float = 0.95, target_power: float = POWER
) -> dict | None:
    """The verdict on the direction: per RL seed k, the mean final cumulative LLR (under seed k's model) of its
    successful trajectories minus that of the base's successful trajectories, paired by seed
    (`stats.paired_verdict`: t-interval over the seeds' differences, MDE at `target_power`). The base's trajectories
    are one set scored by every seed's model, so the interval covers the RL seeds' variation and not the sampling of
    that set. None with fewer than 2 seeds that have successful trajectories of both."""
    rl, base = [], []
    for name in rl_names:
        finals = {}
        for role in ("rl", "base"):
            one = ratio[(ratio["rl_seed"] == name) & (ratio["trajectories_of"] == role)]
            finals[role] = one[one["success"]].groupby("trajectory")["cum_llr"].last().to_numpy()
        if finals["rl"].size and finals["base"].size:
            rl.append(float(finals["rl"].mean()))
            base.append(float(finals["base"].mean()))
    return stats.paired_verdict(rl, base, ci, target_power) if len(rl) >= 2 else None


def by_turn(ratio: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Per trajectory source (`trajectories_of`) and turn: the mean cumulative LLR over the trajectories still
    running at that turn, mean over RL seeds (column `rl_seed`, each seed's RL model scores them), with a
    seeds-then-trajectories interval (`metrics.nested_bootstrap`), and n, the number of distinct trajectories.
    Columns trajectories_of, turn, mean, low, high, n (what `plots.llr_curves` draws)."""
    ids = [c for c in ("model", "trajectory") if c in ratio] or ["turn"]
    rows = []
    for (name, turn), g in ratio.groupby(["trajectories_of", "turn"], sort=True):
        per_seed = (
            [s["cum_llr"].to_numpy(float) for _, s in g.groupby("rl_seed")]
            if "rl_seed" in g
            else [g["cum_llr"].to_numpy(float)]
        )
        point, low, high = metrics.nested_bootstrap(
            [a for a in per_seed if a.size], n_boot=n_boot, ci=ci, seed=seed
        )
        n = len(g.drop_duplicates(ids)) if ids != ["turn"] else len(g)
        rows.append(
            {"trajectories_of": name, "turn": int(turn), "mean": point, "low": low, "high": high, "n": n}
        )
    return pd.DataFrame(rows, columns=["trajectories_of", "turn", "mean", "low", "high", "n"])


def summary_frame(s: dict[str, tuple[float, float, float]], what: str) -> pd.DataFrame:
    """`nll_summary` / `llr_summary` as a table: one row per source, `what`, low, high."""
    return pd.DataFrame(s, index=[what, "low", "high"]).T


def transcripts(cfg: Config, out: store.Run, rec: Recorded) -> tuple[dict, Path | None]:
    """Score the transcript file the profile names (`probing.transcripts`; `likelihood.score_transcripts`) under
    the base and every GRPO seed, writing the tables `transcript_action_nll` and `transcript_cumulative_llr`.
    Returns (the metrics of the section, the file); {"file": None} where the profile names none."""
    p = cfg.probing
    path = likelihood.transcripts_file(p.transcripts, out.path("example_transcripts.jsonl"))
    if path is None:
        return {"file": None}, None
    with opened(rec.agents["base"]) as base:
        found, t_nll, t_llr = likelihood.score_transcripts(
            path, base, {n: rec.agents[n] for n in rec.rl_names}, cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed
        )
    found["generated_examples"] = p.transcripts == "examples"
    out.write_table("transcript_action_nll", t_nll)
    out.write_table("transcript_cumulative_llr", t_llr)
    return found, path


def summary(
    cfg: Config, rec: Recorded, nll: dict, llr: dict, transcript_metrics: dict, difference: dict | None = None
) -> dict:
    """Everything notebook 06 reports, for its metrics.json (and `findings`); `difference` is `llr_difference`."""
    return {
        "cum_llr_difference": difference,
        "env": cfg.env.name,
        "nll_base_policy": {k: {"mean": v[0], "ci": [v[1], v[2]]} for k, v in nll.items()},
        "cum_llr_successful": {k: {"mean": v[0], "ci": [v[1], v[2]]} for k, v in llr.items()},
        "n_trajectories": {k: len(v) for k, v in rec.trajs.items()},
        "n_successful": {k: int(sum(t.success for t in v)) for k, v in rec.trajs.items()},
        "t_max": sorted({t.t_max for t in rec.tasks}),
        "transcripts": transcript_metrics,
        "seeds": cfg.train.seeds,
        "paper": {
            "nll_rl_actions": paper.value(paper.NLL_BASE_POLICY["rl_actions"]),
            "nll_base_actions": paper.value(paper.NLL_BASE_POLICY["base_actions"]),
            "cum_llr_rl": paper.value(paper.CUMULATIVE_LLR["rl_trajectories"]),
            "cum_llr_base": paper.value(paper.CUMULATIVE_LLR["base_trajectories"]),
        },
    }


def kl_caveat(base: dict, paper_base: float | None) -> list[str]:
    """What the direction does and does not show. On RL's own samples the mean of log pi_RL - log pi_base is
    KL(pi_RL || pi_base) >= 0 for any two policies, so a positive LLR on RL's trajectories is expected whatever RL
    learned (exactly before the success filter; after it, approximately). The informative number is the
    base's successful trajectories: their sign, decided by the interval, beside the paper's."""
    lo, hi = base["ci"]
    where = fmt.side(lo, hi)
    sign = {"above 0": "positive", "below 0": "negative"}.get(where, "not distinguishable from 0")
    line = (
        "- **What the direction shows:** on RL's own samples log pi_RL - log pi_base averages to KL(pi_RL || pi_base), "
        "which is positive for any two policies that differ (exactly before the success filter), so a positive ratio on "
        "RL's trajectories is expected whatever RL learned. "
        f"The base's successful trajectories are the informative part: here {fmt.entry(base, digits=3)}, {sign} "
        f"(interval {where})"
    )
    if paper_base is not None:
        same = (where == "above 0") == (paper_base > 0) and where != "contains 0"
        line += (
            f"; the paper's is about {fmt.number(paper_base, 0, sign=True)}, "
            + (
                "the same sign"
                if same
                else "the opposite sign"
                if where != "contains 0"
                else "no sign to compare"
            )
            + (
                ": RL makes the base's own successes less likely than the base does"
                if where == "below 0"
                else ""
            )
        )
    return [line + "."]


def findings(m: dict) -> list[str]:
    """The 'what this run found' section of notebook 06, from its metrics.json."""
    n, llr, pp = m["nll_base_policy"], m["cum_llr_successful"], m["paper"]
    lines = [
        "- Per-token NLL of actions under the base policy (nats, mean per trajectory): "
        + "; ".join(f"{k} actions {fmt.entry(v)}" for k, v in n.items())
        + f" (paper, Terminal-Bench: RL {fmt.number(pp['nll_rl_actions'], 2)} vs base "
        f"{fmt.number(pp['nll_base_actions'], 2)}).",
        "- Cumulative log-likelihood ratio log pi_RL - log pi_base of successful trajectories: "
        + "; ".join(f"{k} trajectories {fmt.entry(v)}" for k, v in llr.items())
        + f" (paper, Terminal-Bench: about {fmt.number(pp['cum_llr_rl'], 0)} vs {fmt.number(pp['cum_llr_base'], 0)}; "
        "an action here is a few tokens of the tiny model or one reply of Qwen3, a Terminal-Bench action hundreds "
        "of tokens, so only the direction is comparable).",
    ]
    if "rl" in llr and "base" in llr:
        sharp = (
            f"; the sharpened base's successful trajectories score {fmt.entry(llr['sharp'])}."
            if "sharp" in llr
            else "."
        )
        d = m.get("cum_llr_difference")
        if (
            d is None
        ):  # a run from before the interval of the difference: no verdict from two separate intervals
            verdict = (
                "no verdict from this run: it predates the interval of the difference, and whether two "
                "separate intervals overlap is no test of it"
            )
        else:
            verdict = f"RL minus base, paired by seed, {fmt.verdict(d, digits=2)}: " + {
                "above 0": "successful RL trajectories are likelier under RL than successful base trajectories",
                "below 0": "successful RL trajectories are less likely under RL than successful base trajectories",
            }.get(
                fmt.side(d["low"], d["high"]),
                "this sample cannot tell the direction (an effect below the MDE could be missed)",
            )
        lines.append(f"- **Direction:** {verdict}{sharp}")
        lines += kl_caveat(llr["base"], pp.get("cum_llr_base"))
    return lines
