"""Notebook 02's analysis: BudgetMix against full-budget GRPO at 25 / 50 / 75 / 100 % of T_max, each RL method
against the sharpened base (the control for plain sharpening) and, symmetrically, each RL method decoded as the
sharpened base is against it (`controls`: same rule, same temperature), and R_single under both.

Every RL seed k has its own evaluation group (`controls.by_seed`): the base and the sharpened base evaluated anew
on draws seeded by k, beside GRPO's and BudgetMix's seed k on the same draws, so the seed differences d_k are
independent replicates. Each comparison's verdict is the paired t-interval over them (`metrics.paired_difference`)
with the minimum detectable effect at 80 % power beside it; the crossed bootstrap intervals stay in the tables.

How BudgetMix draws its budgets in training is `helpers.budget`; this module evaluates what it trained. `evaluate`
rolls out the roster on the test tasks; `success_table`, `gain_table` and `r_single_curves` are the notebook's
tables and figure; `budget_swap` is the budget-swap probe (does any model read the budget line?, FrozenLake only);
`summary` is notebook 02's metrics.json and `findings` what the notebook says about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers import (
    budget,
    budget_control,
    budget_probe,
    budget_reading,
    controls,
    fmt,
    headroom,
    metrics,
    models,
    paper,
    plots,
    scripted,
    stats,
    store,
    train,
)
from helpers import evaluate as evaluation
from helpers.agents import opened
from helpers.config import Config
from helpers.dynamics import R_SINGLE_CURVES, change, measured
from helpers.envs import Task, doorway, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling
from helpers.rollout import ChatFormat

# name -> (method a, method b): a minus b, in points
COMPARISONS = {
    "budgetmix - grpo": ("budgetmix", "grpo"),
    "grpo - sharp": ("grpo", "sharp"),
    "budgetmix - sharp": ("budgetmix", "sharp"),
    "grpo - base": ("grpo", "base"),
    "grpo-sharp - sharp": ("grpo-sharp", "sharp"),  # the symmetric control: both at the sharpened temperature
    "budgetmix-sharp - sharp": ("budgetmix-sharp", "sharp"),
}
POWER = 0.8  # the power at which every minimum detectable effect is stated


@dataclass
class Evaluation:
    """The test tasks, their (fraction, budget) cells, the methods' roster names and every sampled outcome."""

    tasks: list[Task]
    cells: dict[tuple[float, int], list[Task]]
    methods: dict[str, list[str]]
    df: pd.DataFrame

    @property
    def per_task(self) -> pd.DataFrame:
        """Success per (model, budget, task), averaged over the samples."""
        return evaluation.success_by_task(self.df)

    def subset(self, family: str) -> Evaluation | None:
        """The same evaluation on the test tasks of one FrozenLake family (`doorway.family`: `random` or
        `doorway`), None where it has none."""
        keep = [t for t in self.tasks if doorway.family(t) == family]
        if not keep:
            return None
        ids = {t.task_id for t in keep}
        cells = {k: [t for t in ts if t.task_id in ids] for k, ts in self.cells.items()}
        return Evaluation(
            keep, cells, self.methods, self.df[self.df["task_id"].isin(ids)].reset_index(drop=True)
        )


def sharpening_table(sharp: dict) -> pd.Series:
    """The base's success at T_max on the training tasks at each candidate temperature (`controls.sharpened`)."""
    return pd.Series(sharp["success"], name="base success at T_max on training maps").rename_axis(
        "temperature"
    )


NAME = "02_budgetmix_training"
EVAL_RECORDS = "eval_records"  # every evaluated trajectory's record, in this notebook's results folder


def eval_cells(cfg: Config) -> tuple[list[Task], dict[tuple[float, int], list[Task]]]:
    """The evaluation's test tasks (`eval.n_tasks`) and its cells: (fraction, budget) -> tasks, at each of
    `eval.budget_fractions` of each task's own T_max."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    return tasks, budget.fraction_cells(tasks, cfg.eval.budget_fractions)


def eval_stream(cfg: Config, rl_seed: int) -> int:
    """The seed of the draws of RL seed `rl_seed`'s evaluation group (notebook 03 reads them where its cells are
    these: `pass_kt.evaluate`)."""
    return controls.stream(cfg.seed + 1000, rl_seed)


def evaluate(cfg: Config, out: store.Run) -> Evaluation:
    """Every RL seed's group (`controls.by_seed`: base, sharpened base, GRPO and BudgetMix of that seed, each also
    decoded as the sharpened base) on `eval.n_tasks` test tasks at each of `eval.budget_fractions` of each task's
    T_max, the group's draws seeded by its RL seed (`eval_stream`); records in `eval_records` (an interrupted
    evaluation resumes)."""
    tasks, cells = eval_cells(cfg)
    groups = controls.by_seed(controls.agents(cfg))
    sampling = Sampling.from_config(cfg.sampling)
    records = out.records(EVAL_RECORDS)
    parts = []
    for k, group in groups.items():
        frames = evaluation.evaluate_cells(
            group,
            cfg.env.name,
            {(f, b): (ts, b) for (f, b), ts in cells.items()},
            cfg.eval.n_samples,
            sampling,
            seed=eval_stream(cfg, k),
            records=records,
            require_seed=True,
            workers=cfg.eval.workers,
        )
        parts += [frames[(f, b)].assign(fraction=f) for f, b in cells]
    df = pd.concat(parts, ignore_index=True)
    return Evaluation(tasks, cells, controls.methods([n for g in groups.values() for n in g]), df)


def success_table(ev: Evaluation, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Each method's success per fraction of T_max: mean over its RL seeds, interval over seeds and tasks."""
    table = metrics.method_summary(ev.per_task, ev.methods, "success", ["fraction"], n_boot, ci, seed)
    table.insert(0, "budget", table["fraction"].map(budget.budget_label(ev.cells)))
    return table


def upper_bound(cfg: Config, ev: Evaluation) -> dict[float, float | None]:
    """The structural upper bound at each fraction (None where the environment knows none)."""
    return metrics.upper_bound_at_fractions(ev.cells, cfg.env.name)


def success_figure(cfg: Config, ev: Evaluation, table: pd.DataFrame) -> plt.Figure:
    """Success by budget, each method's bar with its interval, beside the structural upper bound where known."""
    upper = upper_bound(cfg, ev)
    bound = upper if None not in upper.values() else None
    return plots.budget_bars(table.rename(columns={"method": "model"}), bound, cfg.eval.ci)


MIN_HEADROOM = 5.0  # points: below it `headroom_captured` gives no share
# The scripted references of `headroom_captured`: what a policy captures without reading the budget line at all.
CAPTURE_REFERENCES = {
    "blind_t_max": "best budget-blind policy for T_max",
    "blind_mix": "best budget-blind policy for BudgetMix's mix",
    "blind_own_budget": "best budget-blind policy for each budget itself",
    "optimum": "budget-aware optimum",
}


def headroom_captured(cfg: Config, ev: Evaluation, table: pd.DataFrame) -> pd.DataFrame | None:
    """The share of the budget-awareness headroom each method captures at each budget, in percent:
    100 (success - blind_T_max) / (optimum - blind_T_max), where blind_T_max is the best budget-blind policy for T_max
    and both are exact by DP on these test maps (`headroom.table`). A model's share is the mean over its seeds with
    the t-interval over them (each seed's own success). Beside the methods stand scripted references that read no
    budget: the best blind policy for BudgetMix's mix and the best blind policy tuned to each budget, whose shares
    say how much of the "headroom" a budget-blind agent trained at (or for) the tight budgets reaches without ever
    reading the turns left; only the budget-swap probe tells reading from that. Where the headroom is under
    `MIN_HEADROOM` points a share is not defined (NaN): a few points of headroom against tens of points of sampling
    noise and habit would give shares of -1000 %. A negative share is success below the blind policy for T_max.
    None off FrozenLake (no DP)."""
    if cfg.env.name != "frozenlake":
        return None
    budgets = {f: b for f, b in ev.cells}
    (t_max,) = {t.t_max for t in ev.tasks}  # FrozenLake's test maps share one T_max
    h = headroom.table(
        ev.tasks, sorted(set(budgets.values())), t_max, cfg.sft.epsilon, cfg.sft.habit_gamma, cfg.seed
    )
    rows = []
    for f, b in budgets.items():
        blind, best = float(h.loc[b, "blind_t_max"]), float(h.loc[b, "optimum"])
        width = best - blind

        def share(x, w=width, lo=blind):
            x = np.asarray(x, dtype=float)
            return 100.0 * (x - lo) / w if w >= MIN_HEADROOM / 100 else np.full(np.shape(x), np.nan)

        for m in ev.methods:
            r = table[(table["method"] == m) & (table["fraction"] == f)].iloc[0]
            per_seed = share(r["per_seed"])
            iv = (
                stats.paired_t_interval(per_seed, np.zeros_like(per_seed), cfg.eval.ci)
                if per_seed.size >= 2 and np.isfinite(per_seed).all()
                else {"low": np.nan, "high": np.nan}
            )
            rows.append(
                {
                    "fraction": f,
                    "budget": b,
                    "who": m,
                    "kind": "model",
                    "share_pct": float(np.mean(per_seed)),
                    "low": iv["low"],
                    "high": iv["high"],
                    "n_seeds": int(per_seed.size),
                }
            )
        for ref in CAPTURE_REFERENCES:
            rows.append(
                {
                    "fraction": f,
                    "budget": b,
                    "who": ref,
                    "kind": "scripted",
                    "share_pct": float(share(h.loc[b, ref])),
                    "low": np.nan,
                    "high": np.nan,
                    "n_seeds": 0,
                }
            )
    out = pd.DataFrame(rows)
    out["headroom_points"] = out["fraction"].map(
        {f: 100.0 * (h.loc[b, "optimum"] - h.loc[b, "blind_t_max"]) for f, b in budgets.items()}
    )
    return out


def captured_wide(captured: pd.DataFrame | None) -> pd.DataFrame | None:
    """`headroom_captured` as the notebook shows it: one row per method or reference, one column per budget
    (`share [low, high]` in percent; '-' where the headroom is under `MIN_HEADROOM` points), the headroom in points
    as the first row."""
    if captured is None:
        return None
    cols = {
        f: f"{fmt.number(float(f), 0, scale=100)} % (T = {b})"
        for f, b in captured[["fraction", "budget"]].drop_duplicates().itertuples(index=False)
    }
    first = captured.drop_duplicates("fraction")
    rows = {
        "headroom (points)": {cols[r.fraction]: fmt.number(r.headroom_points, 1) for r in first.itertuples()}
    }
    for who, g in captured.groupby("who", sort=False):
        label = CAPTURE_REFERENCES.get(who, who)
        rows[label] = {
            cols[r.fraction]: (
                "-"
                if not np.isfinite(r.share_pct)
                else fmt.estimate(r.share_pct, [r.low, r.high], digits=0)
                if np.isfinite(r.low)
                else fmt.number(r.share_pct, 0)
            )
            for r in g.itertuples()
        }
    return pd.DataFrame(rows).T.rename_axis("share of the budget-awareness headroom, %")


def comparisons(ev: Evaluation) -> dict[str, tuple[str, str]]:
    """The `COMPARISONS` whose methods were both evaluated (a roster without BudgetMix, say, has fewer)."""
    return {c: (a, b) for c, (a, b) in COMPARISONS.items() if ev.methods.get(a) and ev.methods.get(b)}


def gain_table(ev: Evaluation, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Each of `COMPARISONS` per fraction, in points; intervals resample the tasks jointly (paired) and each
    method's seeds separately; beside them the verdict paired by seed (`metrics.paired_difference`: `t_low`,
    `t_high`, `excludes_zero`, the minimum detectable effect `mde_points` at `POWER` and the seed differences
    `per_seed_diff`)."""
    per_task = ev.per_task
    parts = []
    for name, (a, b) in comparisons(ev).items():
        boot = metrics.method_difference(
            per_task, ev.methods[a], ev.methods[b], "success", ["fraction"], 100, n_boot, ci, seed
        ).rename(columns={"difference": "gain_points"})
        t = metrics.paired_difference(
            per_task, ev.methods[a], ev.methods[b], "success", ["fraction"], 100, ci, POWER
        )
        t = t.rename(
            columns={
                "low": "t_low",
                "high": "t_high",
                "mde": "mde_points",
                "per_seed": "per_seed_diff",
                "sd_diff": "sd_diff_points",
            }
        )
        parts.append(
            boot.merge(
                t[
                    [
                        "fraction",
                        "t_low",
                        "t_high",
                        "excludes_zero",
                        "mde_points",
                        "sd_diff_points",
                        "n_seeds",
                        "per_seed_diff",
                    ]
                ],
                on="fraction",
            ).assign(comparison=name)
        )
    gains = pd.concat(parts)
    gains.insert(0, "budget", gains["fraction"].map(budget.budget_label(ev.cells)))
    return gains


def r_single_curves(cfg: Config, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> plt.Figure | None:
    """Both step-level rewards of GRPO and BudgetMix during training (notebook 01 logged them); None where the
    environment has no step oracle."""
    if not store.Run.read_metrics(cfg.results_name, "01_grpo_training")["step_oracle"]["step_oracle"]:
        return None
    logs = {
        controls.MODE_NAMES[mode]: {
            s: pd.DataFrame(train.read_metrics(cfg, mode, s)) for s in cfg.train.seeds
        }
        for mode in train.BUDGET_MODES
    }
    bands = metrics.seed_bands(logs, R_SINGLE_CURVES, n_boot, ci, seed)
    return plots.seed_curves(logs, R_SINGLE_CURVES, "", bands, ci)


# ------------------------------------------------------------------------------------- the budget-swap probe

# the scripted references probed beside the models (`scripted.references`), with how findings names them
SWAP_REFERENCES = {
    "habit": "greedy habit",
    "blind_t_max": "best budget-blind for T_max",
    "optimum": "budget-aware optimum",
    "optimum+noise": "optimum with the demonstrator's random moves",
}
SWAP_SKIPPED = "it is defined on FrozenLake only (the DP says which move each budget asks for)"


@dataclass
class BudgetSwap:
    """The budget-swap probe of notebook 02: the pooled swap states, every agent's per-state rows
    (`budget_probe.probe_table` with a column `agent`), their summaries (`budget_probe.summary`) and the table."""

    swaps: list[budget_probe.SwapState]
    per_state: pd.DataFrame
    summaries: dict[str, dict]
    kinds: dict[str, str]  # agent -> "model" or "scripted"
    pool: dict = field(default_factory=dict)  # how the pool was drawn: sources, trajectories, distinct states
    table: pd.DataFrame = field(default_factory=pd.DataFrame)


def swap_pool(
    cfg: Config, agents: dict, names: list[str], family: str = "random"
) -> tuple[list[budget_probe.SwapState], dict]:
    """The probe's states: one budget-mixed trajectory per test task (`eval.n_tasks`) of each of `names`, at a
    budget per task drawn from BudgetMix's candidates (the same draws for every model), recorded once
    (`evaluate.recorded_trajectories`); their distinct states pooled in roster order, classified by the DP
    (`budget_probe.swap_states`), and at most `probing.n_states` of each kind kept (a seeded draw, in pool order).
    Only the test tasks of one `family` (`doorway.family`): the random maps and the doorway maps have pools of
    their own."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    tasks = [t for t in tasks if doorway.family(t) == family]
    budgets = budget_probe.mixed_budgets(tasks, cfg.seed + 2000)
    sampling = Sampling.from_config(cfg.sampling)
    trajs = [
        tr
        for name in names
        for tr in evaluation.recorded_trajectories(
            cfg.results_name,
            f"{SWAP_PREFIX[family]}-{name}",
            agents[name],
            cfg.env.name,
            tasks,
            budgets,
            1,
            sampling,
            seed=cfg.seed + 2000,
            step_quality=False,
        )
    ]
    states = budget_probe.distinct_states(trajs, tasks)
    swaps = budget_probe.swap_states(states)
    rng = np.random.default_rng(cfg.seed + 2001)
    keep = set()
    for kind in ("sensitive", "control"):
        idx = [i for i, s in enumerate(swaps) if s.kind == kind]
        n = min(cfg.probing.n_states, len(idx))
        keep |= {int(i) for i in rng.choice(idx, size=n, replace=False)} if n else set()
    pool = {
        "sources": list(names),
        "n_tasks": len(tasks),
        "n_trajectories": len(trajs),
        "n_distinct_states": len(states),
        "n_swap_states": len(swaps),
    }
    return [s for i, s in enumerate(swaps) if i in keep], pool


def swap_summary(
    swaps: list[budget_probe.SwapState],
    probs: dict[str, list[dict]],
    kinds: dict[str, str],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    pool: dict | None = None,
) -> BudgetSwap:
    """Every agent's probe on the same swap states from its move probabilities (`probs`: agent -> per state,
    {budget shown: P(move) [4]}): the per-state rows, the summaries (intervals resample maps, with the same draws
    for every agent) and the table: one row per agent, responsiveness with its interval, total variation at
    sensitive and at control states, P(budget-optimal move) by budget shown, and the counts."""
    frames, summaries, rows = [], {}, []
    for name, p in probs.items():
        df = budget_probe.probe_table(swaps, p)
        frames.append(df.assign(agent=name))
        m = summaries[name] = budget_probe.summary(df, n_boot, ci, seed)
        resp = m.get("responsiveness", {})
        row = {
            "agent": name,
            "kind": kinds[name],
            "responsiveness": resp.get("mean", np.nan),
            "low": resp.get("low", np.nan),
            "high": resp.get("high", np.nan),
            "tv_sensitive": m.get("tv_sensitive", {}).get("mean", np.nan),
            "tv_control": m.get("tv_control", {}).get("mean", np.nan),
        }
        row |= {f"P(opt) r={r}": v["mean"] for r, v in m["p_optimal_by_budget"].items()}
        rows.append(row | {"n_sensitive": m["n_sensitive"], "n_control": m["n_control"]})
    table = pd.DataFrame(rows).set_index("agent")
    per_state = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return BudgetSwap(swaps, per_state, summaries, dict(kinds), dict(pool or {}), table)


SWAP_PREFIX = {"random": "budgetswap", "doorway": "doorwayswap"}  # the recorded files of each family's probe


def budget_swap(cfg: Config, out: store.Run, family: str = "random") -> BudgetSwap | None:
    """The budget-swap probe (`helpers.budget_probe`) of every roster model, the sharpened base and the scripted
    references (`SWAP_REFERENCES`) on one pool of swap states (`swap_pool`): each model loaded once, one at a time,
    and only where its move probabilities are not recorded yet (`evaluate.recorded_per_state`, under
    `probes/budgetswap-<agent>-<hash>.json`), so a rerun on recorded results loads none. The sharpened base is the
    base's recorded probabilities at its temperature (`budget_probe.tempered`). Writes the table `budget_probe`
    (`budget_probe_doorway` for the doorway maps' pool, `family`). None where the environment is not FrozenLake
    (`SWAP_SKIPPED`) or has no test task of the family."""
    if cfg.env.name != "frozenlake":
        return None
    if family != "random" and not any(
        doorway.is_doorway_id(t.task_id)
        for t in load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    ):
        return None
    agents = controls.agents(
        cfg, symmetric=False
    )  # a tempered twin's move probabilities are its model's, tempered
    names = [n for n in agents if n != "sharp"]  # the sharpened base is the base's model
    swaps, pool = swap_pool(cfg, agents, names, family)
    tokenizer = agents["base"].tokenizer()
    chat = ChatFormat(tokenizer, models.chat_kwargs(tokenizer))  # as the models' rollouts render it
    states = [s.state for s in swaps]
    recipe = ["budget-swap", [s.shown for s in swaps]]
    plays = {
        name: [
            evaluation.Play(
                name,
                f"{SWAP_PREFIX[family]}-{name}",
                states,
                recipe,
                budget_probe.flat_move_probabilities,
                (swaps, chat),
            )
        ]
        for name in names
    }
    # each model loaded once, only where its numbers are not recorded, two at a time in workers (`eval.workers`)
    values = evaluation.recorded_plays(cfg.results_name, agents, plays, cfg.eval.workers)
    probs = {name: budget_probe.unflat(swaps, values[name]) for name in names}
    sharp_t = agents["sharp"].temperature
    probs = {
        "base": probs["base"],
        "sharp": budget_probe.tempered(probs["base"], sharp_t, cfg.sampling.top_p),
        **{n: p for n, p in probs.items() if n != "base"},
    }
    refs = {
        name: scripted.ScriptedPolicy.from_config(
            cfg, name.split("+")[0], tokenizer, name.endswith("+noise"), name=name, chat_kwargs=chat.kw
        )
        for name in SWAP_REFERENCES
    }
    kinds = {n: "model" for n in probs} | {n: "scripted" for n in refs}
    probs |= {n: budget_probe.move_probabilities(r, swaps, chat) for n, r in refs.items()}
    pool |= {"sharp_temperature": sharp_t, "delta": budget_probe.DELTA, "n_per_kind": cfg.probing.n_states}
    swap = swap_summary(swaps, probs, kinds, cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed, pool)
    out.write_table(
        "budget_probe" if family == "random" else f"budget_probe_{family}", swap.table.reset_index()
    )
    return swap


def swap_metrics(swap: BudgetSwap | None) -> dict | None:
    """The probe's entry of metrics.json (JSON keys: budgets as strings), None where it was not run."""
    if swap is None:
        return None
    agents = {}
    for name, m in swap.summaries.items():
        agents[name] = {
            **{k: v for k, v in m.items() if k != "p_optimal_by_budget"},
            "kind": swap.kinds[name],
            "p_optimal_by_budget": {str(r): v for r, v in m["p_optimal_by_budget"].items()},
        }

    def maps(kind: str) -> int:
        return len({s.state.task["task_id"] for s in swap.swaps if s.kind == kind})

    kinds = [s.kind for s in swap.swaps]
    return {
        **swap.pool,
        "n_sensitive": kinds.count("sensitive"),
        "n_control": kinds.count("control"),
        "n_maps_sensitive": maps("sensitive"),
        "n_maps_control": maps("control"),
        "order": list(swap.summaries),
        "agents": agents,
    }


def captured_metrics(captured: pd.DataFrame | None) -> dict | None:
    """`headroom_captured` in metrics.json: the headroom in points per fraction, and per method or reference its
    share (percent) with the t-interval over seeds (None where undefined)."""
    if captured is None:
        return None

    def num(x) -> float | None:
        return float(x) if np.isfinite(x) else None

    first = captured.drop_duplicates("fraction")
    return {
        "headroom_points": {f"{r.fraction:g}": float(r.headroom_points) for r in first.itertuples()},
        "min_headroom_points": MIN_HEADROOM,
        "references": dict(CAPTURE_REFERENCES),
        "shares": {
            who: {
                f"{r.fraction:g}": {
                    "share": num(r.share_pct),
                    "low": num(r.low),
                    "high": num(r.high),
                    "kind": r.kind,
                }
                for r in g.itertuples()
            }
            for who, g in captured.groupby("who", sort=False)
        },
    }


def _by_fraction(frame: pd.DataFrame, col: str) -> dict[str, object]:
    return {f"{r.fraction:g}": getattr(r, col) for r in frame.itertuples()}


def _interval_by_fraction(frame: pd.DataFrame) -> dict[str, list]:
    return {f"{r.fraction:g}": [r.low, r.high] for r in frame.itertuples()}


def _paired_by_fraction(frame: pd.DataFrame) -> dict[str, dict]:
    """A comparison's verdicts paired by seed, per fraction: {diff, low, high, mde, sd_diff, excludes_zero,
    n_seeds, per_seed} in points."""
    return {
        f"{r.fraction:g}": {
            "diff": float(r.gain_points),
            "low": float(r.t_low),
            "high": float(r.t_high),
            "mde": float(r.mde_points),
            "sd_diff": float(r.sd_diff_points),
            "excludes_zero": bool(r.excludes_zero),
            "n_seeds": int(r.n_seeds),
            "per_seed": [float(x) for x in r.per_seed_diff],
        }
        for r in frame.itertuples()
    }


def summary(
    cfg: Config,
    sharp: dict,
    ev: Evaluation,
    table: pd.DataFrame,
    gains: pd.DataFrame,
    swap: BudgetSwap | None = None,
    captured: pd.DataFrame | None = None,
) -> dict:
    """Notebook 02's metrics.json: success and gains per fraction of T_max with their intervals, the sharpened
    base, the upper bound, R_single's change under both methods (from notebook 01), the paper's gains, the
    budget-swap probe (`swap_metrics`: None where it was not run) and the share of the budget-awareness headroom
    each method captures (`headroom_captured`: None off FrozenLake)."""
    dynamics = store.Run.read_metrics(cfg.results_name, "01_grpo_training")
    rows = {m: table[table["method"] == m] for m in ev.methods}
    by_comparison = {
        c: gains[gains["comparison"] == c] for c in COMPARISONS if (gains["comparison"] == c).any()
    }
    return {
        "sharpened": sharp,
        "success": {m: _by_fraction(r, "success") for m, r in rows.items()},
        "success_ci": {m: _interval_by_fraction(r) for m, r in rows.items()},
        "success_per_seed": {m: _by_fraction(r, "per_seed") for m, r in rows.items()},
        "gains_points": {c: _by_fraction(g, "gain_points") for c, g in by_comparison.items()},
        "gains_ci": {c: _interval_by_fraction(g) for c, g in by_comparison.items()},
        "gains_paired": {c: _paired_by_fraction(g) for c, g in by_comparison.items()},
        "power": POWER,
        "upper_bound": {f"{f:g}": v for f, v in upper_bound(cfg, ev).items()},
        "budget_at_fraction": {f"{f:g}": b for f, b in budget.budget_label(ev.cells).items()},
        "r_single_change": {
            m: dynamics[m]["R_single"] for m in ("grpo", "budgetmix") if "R_single" in dynamics[m]
        },
        "env": cfg.env.name,
        "step_oracle": dynamics["step_oracle"],
        "n_test_tasks": len(ev.tasks),
        "n_samples": cfg.eval.n_samples,
        "seeds": cfg.train.seeds,
        "budget_probe": swap_metrics(swap),
        "headroom_captured": captured_metrics(captured),
        "paper": {
            "budgetmix_minus_grpo_points": {
                f"{f:g}": paper.value(v) for f, v in paper.BUDGETMIX_GAIN_POINTS.items()
            }
        },
    }


# ------------------------------------------------------------------------------------------ the doorway maps


@dataclass
class Doorway:
    """Notebook 02's doorway section: success (methods and exact references), the probe's two arms per agent, and
    the metrics (`metrics["doorway"]`)."""

    success: pd.DataFrame
    probe: pd.DataFrame
    metrics: dict


def _opening_means(
    cfg: Config, tasks: list[Task], agents: dict, refs: dict, chat: ChatFormat
) -> dict[str, dict]:
    """Opening responsiveness of every agent (models loaded one at a time) and scripted reference."""
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    out = {}
    for name, agent in agents.items():
        with opened(agent, name) as policy:
            out[name] = budget_reading.interval(
                budget_reading.opening_table(tasks, budget_reading.opening_probs(policy, tasks, chat))[
                    "responsiveness"
                ],
                *boot,
            )
    for name, ref in refs.items():
        out[name] = budget_reading.interval(
            budget_reading.opening_table(tasks, budget_reading.opening_probs(ref, tasks, chat))[
                "responsiveness"
            ],
            *boot,
        )
    return out


def doorway_section(cfg: Config, out: store.Run, ev: Evaluation) -> Doorway | None:
    """Everything notebook 02 reports on the doorway maps (`helpers.budget_reading`: success beside the exact
    references, the probe at openings and mid-episode, reading per seed; the supervised control of
    `helpers.budget_control`), from the evaluation `ev` of all test tasks (`evaluate`); None where the run has no
    doorway test task."""

    door = ev.subset(doorway.FAMILY)
    if door is None:
        return None
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    table = success_table(door, *boot)
    refs = budget_reading.references(door.tasks, door.cells)
    gains = gain_table(door, *boot)
    paired = gains[gains["comparison"] == "budgetmix - grpo"]
    swap = budget_swap(cfg, out, doorway.FAMILY)
    agents = {n: a for n, a in controls.agents(cfg, symmetric=False).items() if n != "sharp"}
    tokenizer = agents["base"].tokenizer()
    chat = ChatFormat(tokenizer, models.chat_kwargs(tokenizer))
    ref_players = {
        n: scripted.ScriptedPolicy.from_config(
            cfg, n.split("+")[0], tokenizer, n.endswith("+noise"), name=n, chat_kwargs=chat.kw
        )
        for n in SWAP_REFERENCES
    }
    methods = controls.methods(list(agents))
    arms = {"openings": _opening_means(cfg, door.tasks, agents, ref_players, chat)}
    if swap is not None and swap.summaries["base"].get("responsiveness"):
        arms["swap"] = {n: s["responsiveness"] for n, s in swap.summaries.items() if s.get("responsiveness")}
    reading_m = {
        arm: {
            "per_agent": {n: v["mean"] for n, v in per.items()},
            "intervals": per,
            "by_seed": budget_reading.reading({n: v["mean"] for n, v in per.items()}, methods, cfg.eval.ci),
        }
        for arm, per in arms.items()
    }
    control = budget_control.run(cfg, out, swap.swaps if swap is not None else None)
    m = {
        "n_maps": len(door.tasks),
        "success_rate": float(door.tasks[0].payload["success_rate"]),
        "mix_gap": float(np.mean([fl.mix_gap(t) for t in door.tasks])),
        "h_star": budget_reading.threshold(door.tasks[0]),
        "success": {
            meth: {f"{r.fraction:g}": float(r.success) for r in g.itertuples()}
            for meth, g in table.groupby("method", sort=False)
        },
        "references": refs,
        "vs_rush": budget_reading.vs_reference(table, refs, budget_reading.REFERENCES[1], cfg.eval.ci),
        "vs_optimum": budget_reading.vs_reference(table, refs, budget_reading.REFERENCES[0], cfg.eval.ci),
        "budgetmix_minus_grpo": {
            f"{r.fraction:g}": {
                "diff": float(r.gain_points),
                "low": float(r.t_low),
                "high": float(r.t_high),
                "mde": float(r.mde_points),
                "excludes_zero": bool(r.excludes_zero),
            }
            for r in paired.itertuples()
        },
        "reading": reading_m,
        "control": control,
    }
    probe = pd.DataFrame({arm: {n: v["mean"] for n, v in per.items()} for arm, per in arms.items()})
    probe.index.name = "responsiveness (optimum 2, blind 0)"
    success = budget_reading.success_frame(table, refs)
    out.write_table("doorway_success", success.reset_index())
    out.write_table("doorway_probe", probe.reset_index())
    return Doorway(success, probe, m)


# ------------------------------------------------------------------------------------------------ findings


def gain_cells(m: dict, comparison: str) -> str:
    """A comparison's gain at every fraction with its interval: `+11.6 [+0.5, +22.3] / ...` (points)."""
    g, ci = m["gains_points"][comparison], m["gains_ci"][comparison]
    return " / ".join(fmt.estimate(g[f], ci[f], digits=1, signed=True) for f in g)


def paper_agreement(m: dict) -> str:
    """BudgetMix minus GRPO against the paper's gains, said outright per budget: where the paper's gain lies inside
    this run's paired interval (as in the paper) and where outside (not as in the paper); "" without paired verdicts."""
    paired, paper_gain = (
        m.get("gains_paired", {}).get("budgetmix - grpo"),
        m["paper"]["budgetmix_minus_grpo_points"],
    )
    judged = {
        f: v
        for f, v in (paired or {}).items()
        if f in paper_gain and fmt.side(v["low"], v["high"]) != "no interval"
    }
    if not judged:  # no paired verdicts, or no interval (one seed)
        return ""
    inside = [f for f, v in judged.items() if v["low"] <= paper_gain[f] <= v["high"]]
    outside = [f for f in judged if f not in inside]
    return (
        f"; as in the paper (its gain inside this run's paired interval) at {', '.join(inside) or 'no budget'}, "
        f"not as in the paper at {', '.join(outside) or 'no budget'} of T_max"
    )


def fraction_label(fractions) -> str:
    """Fractions of T_max in percent: `25 / 50 / 75 / 100`."""
    return " / ".join(fmt.number(float(f), 0, scale=100) for f in fractions)


def findings(m: dict) -> list[str]:
    """What notebook 02 found: success per budget, the sharpened base, BudgetMix minus GRPO against the paper, each
    RL method against the sharpened base, and R_single under both methods."""
    sh = m["sharpened"]
    units = "maps" if m.get("env", "frozenlake") == "frozenlake" else "tasks"
    lines = [
        f"Test {units}: {m['n_test_tasks']} x {m['n_samples']} samples; RL methods averaged over seeds "
        f"{m['seeds']}; points with 95 % intervals over seeds and tasks, at {fraction_label(m['success']['base'])} % "
        "of each task's T_max.",
        "- **Success:** "
        + "; ".join(f"{name} {fmt.joined(v)}" for name, v in m["success"].items())
        + (
            f"; structural upper bound {fmt.joined(m['upper_bound'])}."
            if None not in m["upper_bound"].values()
            else f"; no structural upper bound ({m.get('env', 'the environment')} knows none)."
        ),
        f"- **Sharpened base:** temperature {sh['temperature']:g}, chosen on {sh['n_tasks']} training {units} (base "
        f"{fmt.number(sh['success'].get(str(sh['temperature']), float('nan')))} against GRPO's "
        f"{fmt.number(sh['target'])} at T_max).",
        "- **BudgetMix minus GRPO:** "
        + (
            f"{fmt.joined(m['gains_points']['budgetmix - grpo'], 1, sign=True)} points, the verdicts paired by seed "
            "below"
            if "gains_paired" in m
            else f"{gain_cells(m, 'budgetmix - grpo')} points"
        )
        + " (paper, mean of 4 tasks: "
        + fmt.joined(m["paper"]["budgetmix_minus_grpo_points"], 1, sign=True)
        + paper_agreement(m)
        + ").",
    ]
    if "gains_paired" in m:
        lines += paired_findings(m)
    else:  # a run from before the paired verdicts: the crossed bootstrap's intervals decide
        lines += _bootstrap_findings(m)
    rs = {k: v for k, v in m["r_single_change"].items() if measured(v)}
    if len(rs) == 2:
        grpo_side, mix_side = fmt.side(*rs["grpo"]["change_ci"]), fmt.side(*rs["budgetmix"]["change_ci"])
        grpo_word = {"below 0": "as in the paper", "above 0": "not as in the paper"}.get(
            grpo_side, "this sample cannot tell whether it degrades, as the paper says"
        )
        mix_word = "not as in the paper" if mix_side == "below 0" else "as in the paper"
        lines.append(
            f"- **R_single on own states** over training (paper: degrades under full-budget RL, stable or better "
            f"under BudgetMix): GRPO {change(rs['grpo'])}, interval {grpo_side}: {grpo_word}; BudgetMix "
            f"{change(rs['budgetmix'])}, interval {mix_side}: {mix_word}."
        )
    else:
        lines.append(
            f"- **R_single:** not measured: {m.get('env', 'this environment')} has no step oracle "
            f"({(m.get('step_oracle') or {}).get('oracle_note', 'none declared')})."
        )
    return lines + captured_findings(m) + swap_findings(m) + budget_reading.findings(m)


def captured_findings(m: dict) -> list[str]:
    """The share of the budget-awareness headroom each RL method captures, beside what budget-blind references
    capture without reading the budget (so that a share is never read as budget reading by itself)."""
    c = m.get("headroom_captured")
    if not c:
        return []

    def cells(who: str) -> str:
        v = c["shares"][who]
        return " / ".join(
            "-"
            if x["share"] is None
            else fmt.estimate(x["share"], [x["low"], x["high"]], digits=0) + " %"
            if x["low"] is not None
            else fmt.number(x["share"], 0) + " %"
            for x in v.values()
        )

    models = [w for w in ("grpo", "budgetmix", "grpo-sharp", "budgetmix-sharp") if w in c["shares"]]
    return [
        f"- **Share of the budget-awareness headroom captured** (100 (success - best blind policy for T_max) / "
        f"(optimum - it); headroom {fmt.joined(c['headroom_points'], 1)} points at "
        f"{fraction_label(c['headroom_points'])} % of T_max; '-' where it is under {c['min_headroom_points']:g} "
        "points; t-interval over seeds): " + "; ".join(f"{w} {cells(w)}" for w in models) + ".",
        f"  Without reading the budget at all, the {c['references']['blind_mix']} captures {cells('blind_mix')} and "
        f"the {c['references']['blind_own_budget']} {cells('blind_own_budget')}: a share is budget awareness only "
        "where the budget-swap probe below also moves; otherwise it is a budget-blind policy tuned to tighter "
        "budgets.",
    ]


def _bootstrap_findings(m: dict) -> list[str]:
    lines = []
    sides = {f: fmt.side(*v) for f, v in m["gains_ci"]["budgetmix - grpo"].items()}
    above = [f for f, v in sides.items() if v == "above 0"]
    below = [f for f, v in sides.items() if v == "below 0"]
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
        beats = [f for f, v in m["gains_ci"][c].items() if fmt.side(*v) == "above 0"]
        lines.append(
            f"- **{c}:** {gain_cells(m, c)} points: the interval is above 0 (RL beats the sharpened base) at "
            f"{', '.join(beats) or 'no budget'} of T_max."
        )
    return lines


SHARP_COMPARISONS = {
    "grpo - sharp": "GRPO against the sharpened base",
    "budgetmix - sharp": "BudgetMix against the sharpened base",
    "grpo-sharp - sharp": "GRPO decoded as the sharpened base is, against it (symmetric)",
    "budgetmix-sharp - sharp": "BudgetMix decoded as the sharpened base is, against it (symmetric)",
}


def paired_cells(m: dict, comparison: str) -> str:
    """A comparison's verdict paired by seed at every fraction: `25 %: +2.1 [-0.5, +4.7] (contains 0; MDE 5.3)`."""
    v = m["gains_paired"][comparison]
    return "; ".join(f"{fmt.number(float(f), 0, scale=100)} %: {fmt.verdict(x)}" for f, x in v.items())


def _sides(m: dict, comparison: str) -> tuple[list[str], list[str]]:
    v = m["gains_paired"][comparison]
    return (
        [f for f, x in v.items() if fmt.side(x["low"], x["high"]) == "above 0"],
        [f for f, x in v.items() if fmt.side(x["low"], x["high"]) == "below 0"],
    )


def paired_findings(m: dict) -> list[str]:
    """The verdicts of notebook 02: every comparison paired by seed (the t-interval over the seed differences, each
    seed with its own base-side draws) with the minimum detectable effect at the design's power beside it; a
    verdict is the side of 0 the interval lies on, never a comparison of two estimates."""
    pg = m["gains_paired"]
    n = (
        next(iter(pg["budgetmix - grpo"].values()))["n_seeds"]
        if "budgetmix - grpo" in pg
        else len(m["seeds"])
    )
    above, below = _sides(m, "budgetmix - grpo") if "budgetmix - grpo" in pg else ([], [])
    lines = []
    if "budgetmix - grpo" in pg:
        lines.append(
            f"  Paired by seed ({n} seeds, each with its own base-side draws; t-interval on the seed differences, "
            f"MDE at {fmt.percent(m['power'], 0)} power): {paired_cells(m, 'budgetmix - grpo')}. "
            + (
                f"The interval is above 0 at {', '.join(above) or 'no budget'} and below 0 at "
                f"{', '.join(below) or 'no budget'} of T_max; elsewhere this sample cannot decide (an effect below "
                "the MDE could be missed)."
                if above or below
                else "Every interval contains 0: the data cannot decide whether BudgetMix helps at any budget; an effect "
                "below the MDE could be missed."
            )
        )
    for c, label in SHARP_COMPARISONS.items():
        if c not in pg:
            continue
        up, down = _sides(m, c)
        lines.append(
            f"- **{c}** ({label}), paired by seed: {paired_cells(m, c)} (points): the interval is "
            f"above 0 (RL beats the sharpened base) at {', '.join(up) or 'no budget'}"
            + (f" and below 0 at {', '.join(down)}" if down else "")
            + " of T_max."
        )
    return lines


def swap_findings(m: dict) -> list[str]:
    """What the budget-swap probe found: each model's responsiveness with its interval and the side of 0 it lies
    on, the scripted references beside them as the instrument's calibration, and total variation at sensitive and
    at control states (where no budget asks for another move; their TV spans the smallest to the largest budget
    shown, a larger change of the prompt than a sensitive pair's)."""
    if "budget_probe" not in m:  # a run from before the probe
        return []
    bp = m["budget_probe"]
    if bp is None:
        return [f"- **Budget-swap probe:** not run on {m.get('env', 'this environment')}: {SWAP_SKIPPED}."]
    if not bp["n_sensitive"]:
        return [
            f"- **Budget-swap probe:** no budget-sensitive state among the {bp['n_distinct_states']} distinct "
            "states of the models' budget-mixed trajectories: nothing to measure."
        ]
    agents = bp["agents"]
    order = [n for n in bp.get("order", agents) if n in agents]  # the table's order (JSON sorts the keys)
    model_names = [n for n in order if agents[n]["kind"] == "model"]

    def resp(name: str) -> str:
        r = agents[name]["responsiveness"]
        return fmt.estimate(r["mean"], [r["low"], r["high"]], signed=True)

    def tv(name: str, key: str) -> str:
        return fmt.number(agents[name].get(key, {}).get("mean"))

    sides = {
        n: fmt.side(agents[n]["responsiveness"]["low"], agents[n]["responsiveness"]["high"])
        for n in model_names
    }
    above = [n for n, v in sides.items() if v == "above 0"]
    below = [n for n, v in sides.items() if v == "below 0"]
    refs = [n for n in order if agents[n]["kind"] == "scripted"]
    return [
        f"- **Budget-swap probe** (does a model read the budget line?): {bp['n_sensitive']} budget-sensitive states "
        f"on {bp['n_maps_sensitive']} maps and {bp['n_control']} control states on {bp['n_maps_control']} maps, "
        "from budget-mixed trajectories of "
        f"{', '.join(bp['sources'])}, each prompt rebuilt with only the turns left changed. Responsiveness (0 for a "
        "policy that ignores the budget line): "
        + "; ".join(f"{n} {resp(n)} ({sides[n]})" for n in model_names)
        + f". The interval is above 0 for {', '.join(above) or 'no model'} and below 0 for "
        f"{', '.join(below) or 'no model'}.",
        "  The instrument's calibration, scripted players on the same states: "
        + "; ".join(
            f"{SWAP_REFERENCES.get(n, n)} {fmt.signed(agents[n]['responsiveness']['mean'])}" for n in refs
        )
        + ". Total variation at sensitive / control states (at control states no budget asks for another move, and the "
        "budgets compared are the smallest and the largest shown, a larger change of the prompt than a sensitive "
        "pair's): "
        + "; ".join(f"{n} {tv(n, 'tv_sensitive')} / {tv(n, 'tv_control')}" for n in model_names)
        + ".",
    ]
