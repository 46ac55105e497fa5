"""Notebook 03's analysis: Pass@(K,T), sampling breadth against interaction depth. Does RL extend the Pass@K
boundary at every K, and does its advantage grow with the turn budget T (and shrink or reverse at small T)?

`sweep` lays out the T values, `evaluate` rolls out the roster at each, `grid`, `pass_at_t`, `gaps` and
`heatmaps` are the notebook's tables and figures; `summary` is notebook 03's metrics.json and `findings` what the
notebook says about it. T is counted in turns where every test task has the same T_max, and in percent of each
task's own T_max where they differ (BFCL).

Each RL seed k has its own evaluation group (`controls.by_seed`: the base and the sharpened base anew, GRPO's and
BudgetMix's seed k and both decoded as the sharpened base is), sampled on draws seeded by k, so seed differences are
independent replicates; every gap's verdict is the paired t-interval over them with the minimum detectable effect
at `POWER` beside it (`metrics.paired_difference`), and whether the RL advantage grows with T is the paired interval
of (gap at the largest T) - (gap at the smallest T), never a comparison of two estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import pandas as pd

from helpers import budget, budgetmix, controls, fmt, metrics, plots, stats, store
from helpers import evaluate as evaluation
from helpers.agents import Agent
from helpers.config import Config
from helpers.envs import Task, doorway, load_tasks, settings
from helpers.envs.base import env_class
from helpers.policy import Sampling

# name -> (method a, method b): a minus b, Pass@(K, T) in points
COMPARISONS = {
    "grpo - base": ("grpo", "base"),
    "budgetmix - base": ("budgetmix", "base"),
    "grpo - sharp": ("grpo", "sharp"),
    "budgetmix - sharp": ("budgetmix", "sharp"),
    "grpo-sharp - sharp": ("grpo-sharp", "sharp"),  # the symmetric control: both at the sharpened temperature
    "budgetmix-sharp - sharp": ("budgetmix-sharp", "sharp"),
}
POWER = 0.8  # the power at which every minimum detectable effect is stated
HEATMAPS = (("grpo", "base"), ("grpo", "sharp"), ("budgetmix", "base"))


@dataclass
class Sweep:
    """The sweep's test tasks, the budgets of each T, the roster and its methods."""

    env: str
    tasks: list[Task]
    cells: dict[tuple[float, int], list[Task]]  # (fraction, budget) -> tasks, each its own T_max
    by_T: dict[int, dict[int, list[Task]]]  # T -> {budget: tasks}
    agents: dict[str, Agent]
    methods: dict[str, list[str]]
    groups: dict[int, dict[str, Agent]] = field(default_factory=dict)  # RL seed -> its evaluation group

    @property
    def same_t_max(self) -> bool:
        return len({t.t_max for t in self.tasks}) == 1

    @property
    def T_unit(self) -> str:
        return "turns" if self.same_t_max else "percent of T_max"

    @property
    def Ts(self) -> list[int]:
        return sorted(self.by_T)

    def subset(self, family: str) -> Sweep | None:
        """The same sweep on the test tasks of one FrozenLake family (`doorway.family`), None where it has none."""
        keep = [t for t in self.tasks if doorway.family(t) == family]
        if not keep:
            return None
        ids = {t.task_id for t in keep}
        cells = {k: [t for t in ts if t.task_id in ids] for k, ts in self.cells.items()}
        by_T = {
            T: {b: [t for t in ts if t.task_id in ids] for b, ts in c.items()} for T, c in self.by_T.items()
        }
        return Sweep(self.env, keep, cells, by_T, self.agents, self.methods, self.groups)

    def records(self, df: pd.DataFrame) -> pd.DataFrame:
        """The rows of an evaluation `df` on this sweep's tasks."""
        return df[df["task_id"].isin({t.task_id for t in self.tasks})].reset_index(drop=True)

    def bound(self, k: int) -> dict[int, float | None]:
        """The structural upper bound of Pass@(k, T) per T: what k tries of the best policy reach (None where the
        environment knows none)."""
        if self.same_t_max:
            return metrics.structural_upper_bound(self.tasks, self.Ts, self.env, k=k)
        return {
            round(100 * f): v for f, v in metrics.upper_bound_at_fractions(self.cells, self.env, k=k).items()
        }


def sweep(cfg: Config) -> Sweep:
    """`sweep.n_tasks` test tasks at each of `sweep.t_fractions` of their T_max, and the roster in its per-seed
    groups (`controls.by_seed`)."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.sweep.n_tasks, seed=cfg.seed, **settings(cfg))
    cells = budget.fraction_cells(tasks, cfg.sweep.t_fractions)
    same_t_max = len({t.t_max for t in tasks}) == 1
    by_T: dict[int, dict[int, list[Task]]] = {}
    for (f, b), ts in cells.items():
        by_T.setdefault(b if same_t_max else round(100 * f), {})[b] = ts
    groups = controls.by_seed(controls.agents(cfg))
    agents = {n: a for g in groups.values() for n, a in g.items()}
    return Sweep(cfg.env.name, tasks, cells, by_T, agents, controls.methods(agents), groups)


def describe(cfg: Config, sw: Sweep) -> str:
    """The sweep's size in one line."""
    return (
        f"{cfg.env.name}: {len(sw.agents)} agents x T in {sw.Ts} ({sw.T_unit}) x {len(sw.tasks)} tasks x n = "
        f"{cfg.sweep.n_samples}"
    )


def shared_cells(cfg: Config, sw: Sweep) -> dict[tuple[int, int], tuple[list[Task], list[Task], int]]:
    """The sweep's cells that notebook 02 evaluates too (`budgetmix.eval_cells`), with the same roster and as many
    samples per task: (T, budget) -> (the tasks of 02's cell, the sweep's, among them, budget), where 02 has a cell of
    the same budget whose tasks include the sweep's. A budget is shared only where all of the sweep's cells at it are
    (so one records file never holds a budget's tasks on two streams)."""
    if not sw.groups or cfg.sweep.n_samples != cfg.eval.n_samples:
        return {}
    _, theirs = budgetmix.eval_cells(cfg)
    shared, own_budgets = {}, set()
    for (f, b), ts in sw.cells.items():
        ids = {t.task_id for t in ts}
        src = next((s for (_, bb), s in theirs.items() if bb == b and ids <= {t.task_id for t in s}), None)
        if src is None:
            own_budgets.add(b)
        else:
            shared[(b if sw.same_t_max else round(100 * f), b)] = (src, ts, b)
    return {key: cell for key, cell in shared.items() if key[1] not in own_budgets}


def evaluate(cfg: Config, sw: Sweep, out: store.Run) -> pd.DataFrame:
    """One batched rollout per (agent, T) of `sweep.n_samples` samples per task, each RL seed's group on its own
    draws (`controls.stream`); records in `sweep_records` (an interrupted sweep resumes, a finished one is only
    read).

    A cell notebook 02 evaluates too (`shared_cells`: the same agents, budget and samples per task, the sweep's
    tasks among 02's) is not drawn again: its records are 02's on the sweep's tasks, drawn on 02's stream for that
    RL seed (`budgetmix.eval_stream`), copied from 02's `eval_records`; where 02 has not evaluated a cell (03 run on
    its own), it is evaluated here exactly as 02 evaluates it (02's tasks and stream, in this folder's
    `eval_records`) and copied from there, so the sweep's numbers never depend on what ran before it."""
    sampling = Sampling.from_config(cfg.sampling)
    cells = {(T, b): (ts, b) for T, cell in sw.by_T.items() for b, ts in cell.items()}
    shared = shared_cells(cfg, sw)
    records = out.records("sweep_records")
    theirs = (
        store.profile_dir(cfg.results_name) / budgetmix.NAME / f"{budgetmix.EVAL_RECORDS}.jsonl"
    )  # read only
    groups = sw.groups or {0: sw.agents}

    def grid(agents: dict, grid_cells: dict, seed: int, into: store.Records) -> dict:
        return evaluation.evaluate_cells(
            agents,
            cfg.env.name,
            grid_cells,
            cfg.sweep.n_samples,
            sampling,
            seed=seed,
            records=into,
            require_seed=True,
            workers=cfg.eval.workers,
        )

    if shared:  # 02's draws: each agent's cells on its group's stream in 02
        seeds = {name: budgetmix.eval_stream(cfg, k) for k, group in groups.items() for name in group}
        missing = evaluation.copy_cells(sw.agents, seeds, shared, cfg.sweep.n_samples, theirs, records)
        if missing:  # evaluated here as notebook 02 evaluates them (its tasks), then copied from there
            here = out.records(budgetmix.EVAL_RECORDS)
            theirs_cells = {key: (src, b) for key, (src, _, b) in shared.items()}
            for k, group in groups.items():
                todo = {name: agent for name, agent in group.items() if name in missing}
                if todo:
                    grid(todo, theirs_cells, budgetmix.eval_stream(cfg, k), here)
            left = evaluation.copy_cells(sw.agents, seeds, shared, cfg.sweep.n_samples, here.path, records)
            if left:
                raise RuntimeError(f"{here.path}: the cells evaluated for the sweep are not complete: {left}")
    ours = {key: (ts, b) for key, (_, ts, b) in shared.items()}  # the copies, on the sweep's tasks
    own = {key: cell for key, cell in cells.items() if key not in shared}
    parts = []
    for k, group in groups.items():
        frames = {}
        if shared:  # reads the copies back
            frames |= grid(group, ours, budgetmix.eval_stream(cfg, k), records)
        if own:
            frames |= grid(group, own, controls.stream(cfg.seed + 3000, k), records)
        parts += [frames[(T, b)].assign(budget=T) for T, b in cells]
    return pd.concat(parts, ignore_index=True)


def per_task_k(df: pd.DataFrame) -> pd.DataFrame:
    """pass@K of every (agent, T, task) at every K of the sweep."""
    Ks = sorted(metrics.pass_at_kt(df)["K"].unique())
    return pd.concat([metrics.per_task_pass(df, int(K)).assign(K=int(K)) for K in Ks], ignore_index=True)


def grid(
    sw: Sweep, df: pd.DataFrame, per_k: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Pass@(K,T) per method (the mean over its RL seeds) with an interval over its seeds and the tasks."""
    agent_grid = metrics.pass_at_kt(df)
    method_of = {name: m for m, names in sw.methods.items() for name in names}
    g = (
        agent_grid.assign(model=agent_grid["model"].map(method_of))
        .groupby(["model", "T", "K"], as_index=False)["pass"]
        .mean()
    )
    g_ci = metrics.method_summary(per_k, sw.methods, "pass", ["T", "K"], n_boot, ci, seed)
    return g.merge(
        g_ci.rename(columns={"method": "model"})[["model", "T", "K", "low", "high", "n_seeds", "n_tasks"]],
        on=["model", "T", "K"],
    )


def grid_figure(sw: Sweep, g: pd.DataFrame, ci: float = 0.95) -> plt.Figure:
    """Pass@K against K, one panel per T, beside the structural upper bound of K tries where known."""
    Ks = sorted(g["K"].unique())
    bound_k = {K: sw.bound(int(K)) for K in Ks}
    upper = {T: {K: bound_k[K][T] for K in Ks} for T in sw.Ts} if None not in bound_k[1].values() else None
    return plots.pass_at_k_curves(g, upper, ci)


def pass_at_t(
    sw: Sweep, per_task: pd.DataFrame, k: int, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Pass@(k, T) per method and T with its interval, beside the upper bound of k tries."""
    upper = sw.bound(k)
    return metrics.method_summary(per_task, sw.methods, "pass", ["T"], n_boot, ci, seed).assign(
        upper_bound=lambda d: d["T"].map(upper)
    )


def solvable(sw: Sweep, per_task: pd.DataFrame) -> pd.DataFrame | None:
    """The rows of `per_task` whose task can be solved at all within its budget at that T (the environment's
    structural bound above 0: on FrozenLake some maps need more turns than the smallest budgets give, so every
    policy scores 0 there and gaps shrink at small T by construction); None where the environment knows no bound
    or T is a fraction of differing T_max."""
    bound = getattr(env_class(sw.env), "upper_bound", None)
    if bound is None or not sw.same_t_max:
        return None
    by_id = {t.task_id: t for t in sw.tasks}
    keep = [
        bound(by_id[task_id], int(T)) for task_id, T in zip(per_task["task_id"], per_task["T"], strict=True)
    ]
    if any(b is None for b in keep):
        return None
    return per_task[[b > 0 for b in keep]]


def solvable_counts(sw: Sweep, per_task: pd.DataFrame) -> dict[int, int] | None:
    """Per T, how many of the sweep's tasks are solvable at all within T (None as for `solvable`)."""
    rows = solvable(sw, per_task)
    return None if rows is None else {T: int(rows[rows["T"] == T]["task_id"].nunique()) for T in sw.Ts}


def pass_at_t_table(sw: Sweep, pass_t: pd.DataFrame, k: int) -> pd.DataFrame:
    """Pass@(k, T) with T as rows, one column per method and the upper bound."""
    upper = sw.bound(k)
    return pass_t.pivot(index="T", columns="method", values="pass").assign(
        upper_bound=[upper[T] for T in sorted(upper)]
    )


def gaps(
    sw: Sweep, per_task: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Each of `COMPARISONS` at each T (points), intervals paired over tasks and over each method's seeds; beside
    them the verdict paired by seed (`metrics.paired_difference`: `t_low`, `t_high`, `excludes_zero`, `mde` at
    `POWER`, the seed differences `per_seed_diff`)."""
    parts = []
    for c, (a, b) in comparisons(sw).items():
        boot = metrics.method_difference(
            per_task, sw.methods[a], sw.methods[b], "pass", ["T"], 100, n_boot, ci, seed
        )
        t = metrics.paired_difference(per_task, sw.methods[a], sw.methods[b], "pass", ["T"], 100, ci, POWER)
        t = t.rename(columns={"low": "t_low", "high": "t_high", "per_seed": "per_seed_diff"})
        parts.append(
            boot.merge(
                t[["T", "t_low", "t_high", "excludes_zero", "mde", "sd_diff", "n_seeds", "per_seed_diff"]],
                on="T",
            ).assign(comparison=c)
        )
    return pd.concat(parts)


def comparisons(sw: Sweep) -> dict[str, tuple[str, str]]:
    """The `COMPARISONS` whose methods were both evaluated."""
    return {c: (a, b) for c, (a, b) in COMPARISONS.items() if sw.methods.get(a) and sw.methods.get(b)}


def paired_by_T(rows: pd.DataFrame) -> dict[str, dict]:
    """One comparison's verdicts paired by seed per T (`gaps` rows): {diff, low, high, mde, sd_diff, excludes_zero,
    n_seeds, per_seed}, in points."""
    return {
        str(r.T): {
            "diff": float(r.difference),
            "low": float(r.t_low),
            "high": float(r.t_high),
            "mde": float(r.mde),
            "sd_diff": float(r.sd_diff),
            "excludes_zero": bool(r.excludes_zero),
            "n_seeds": int(r.n_seeds),
            "per_seed": [float(x) for x in r.per_seed_diff],
        }
        for r in rows.itertuples()
    }


def trend(paired: dict[str, dict], Ts: list[int], ci: float = 0.95) -> dict:
    """Whether a gap grows with T: the paired verdict (`stats.paired_verdict`) of seed k's gap at the largest T minus
    its gap at the smallest T (the seed differences of `paired_by_T`), in points."""
    hi, lo = paired[str(Ts[-1])]["per_seed"], paired[str(Ts[0])]["per_seed"]
    d = [a - b for a, b in zip(hi, lo, strict=True)]
    return stats.paired_verdict(d, [0.0] * len(d), ci, POWER) | {"T_min": Ts[0], "T_max": Ts[-1]}


def solvable_gaps(
    sw: Sweep, per_task: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame | None:
    """`gaps` on the tasks solvable at all within each T only (None where `solvable` is)."""
    rows = solvable(sw, per_task)
    return None if rows is None else gaps(sw, rows, n_boot, ci, seed)


def on_solvable(
    sw: Sweep, per_task: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[dict[int, int], pd.DataFrame] | None:
    """(the tasks solvable at all within each T, `solvable_gaps`), or None where the environment knows no bound."""
    counts = solvable_counts(sw, per_task)
    return None if counts is None else (counts, solvable_gaps(sw, per_task, n_boot, ci, seed))


def heatmaps(
    sw: Sweep,
    g: pd.DataFrame,
    per_k: pd.DataFrame,
    out: store.Run,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """RL minus base (or the sharpened base) over (K, T) in points, mean over RL seeds, for each of `HEATMAPS`:
    {"grpo-base": T x K}; all of them in the figure `gap_heatmaps` (one colour scale, one colourbar) and each in
    `gap_<a>_minus_<b>` on the same scale (saved, not shown twice), cells whose interval excludes 0 marked."""
    wide = g.pivot_table(index=["T", "K"], columns="model", values="pass")
    heat, excludes_0, titles = {}, {}, {}
    for a, b in HEATMAPS:
        heat[f"{a}-{b}"] = (100 * (wide[a] - wide[b])).unstack("K")
        gap_k = metrics.method_difference(
            per_k, sw.methods[a], sw.methods[b], "pass", ["T", "K"], 100, n_boot, ci, seed
        )
        excludes_0[f"{a}-{b}"] = gap_k.assign(s=(gap_k["low"] > 0) | (gap_k["high"] < 0)).pivot(
            index="T", columns="K", values="s"
        )
        titles[f"{a}-{b}"] = f"{plots.label(a)} minus {plots.label(b)}"
    lim = plots.shared_limit(list(heat.values()))
    for (a, b), key in zip(HEATMAPS, heat, strict=True):
        fig = plots.gap_heatmap(heat[key], f"{titles[key]}, Pass@(K,T) in points", excludes_0[key], ci, lim)
        out.save_figure(fig, f"gap_{a}_minus_{b}")
        plt.close(fig)
    panels = {titles[k]: heat[k] for k in heat}
    out.save_figure(plots.gap_heatmaps(panels, {titles[k]: excludes_0[k] for k in heat}, ci), "gap_heatmaps")
    return heat


def summary(
    cfg: Config,
    sw: Sweep,
    g: pd.DataFrame,
    pass_t: pd.DataFrame,
    gaps_t: pd.DataFrame,
    heat: dict[str, pd.DataFrame],
    solvable_t: tuple[dict, pd.DataFrame] | None = None,
) -> dict:
    """Notebook 03's metrics.json: Pass@T at K = `sweep.pass_t_k` and its gaps with intervals, the gaps along K at
    the largest and smallest T, the upper bound and the sweep's size; with `solvable_t` ((counts, gaps) from
    `solvable_counts` and `solvable_gaps`), the tasks solvable at each T and the gaps on those tasks only. Every gap
    also paired by seed (`pass_at_t_gap_paired`, `solvable_gap_paired`: t-interval over the seed differences and
    the MDE at `power`) and each gap's change from the smallest to the largest T (`trend`)."""
    Ts, k = sw.Ts, cfg.sweep.pass_t_k
    gap_rows = {c: gaps_t[gaps_t["comparison"] == c] for c in comparisons(sw)}
    paired = {c: paired_by_T(g_) for c, g_ in gap_rows.items()}
    extra = {}
    if solvable_t is not None:
        counts, sgaps = solvable_t
        rows = {c: sgaps[sgaps["comparison"] == c] for c in comparisons(sw)}
        extra = {
            "solvable_tasks": {str(T): n for T, n in counts.items()},
            "solvable_gap_points": {
                c: {str(r.T): r.difference for r in g_.itertuples()} for c, g_ in rows.items()
            },
            "solvable_gap_ci": {
                c: {str(r.T): [r.low, r.high] for r in g_.itertuples()} for c, g_ in rows.items()
            },
            "solvable_gap_paired": {c: paired_by_T(g_) for c, g_ in rows.items()},
        }
    return {
        "pass_at_t": {
            m: {str(T): v for T, v in pass_t[pass_t["method"] == m].set_index("T")["pass"].items()}
            for m in sw.methods
        },
        "pass_at_t_ci": {
            m: {str(r.T): [r.low, r.high] for r in pass_t[pass_t["method"] == m].itertuples()}
            for m in sw.methods
        },
        "pass_at_t_gap_points": {
            c: {str(r.T): r.difference for r in g_.itertuples()} for c, g_ in gap_rows.items()
        },
        "pass_at_t_gap_ci": {
            c: {str(r.T): [r.low, r.high] for r in g_.itertuples()} for c, g_ in gap_rows.items()
        },
        "pass_at_t_gap_paired": paired,
        "trend": {c: trend(p, Ts, cfg.eval.ci) for c, p in paired.items()} if len(Ts) > 1 else {},
        "power": POWER,
        "gap_by_K_at_T_max": {
            name: {str(K): float(h.loc[Ts[-1], K]) for K in h.columns} for name, h in heat.items()
        },
        "gap_by_K_at_T_min": {
            name: {str(K): float(h.loc[Ts[0], K]) for K in h.columns} for name, h in heat.items()
        },
        "upper_bound": {str(T): v for T, v in sw.bound(k).items()},
        "T_values": Ts,
        "T_unit": sw.T_unit,
        "env": cfg.env.name,
        "K": k,
        "K_max": int(g["K"].max()),
        "n_samples": cfg.sweep.n_samples,
        "n_tasks": len(sw.tasks),
        "seeds": cfg.train.seeds,
        **extra,
    }


def doorway_pass(
    sw_all: Sweep, df_all: pd.DataFrame, k: int, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> dict | None:
    """Pass@(1, T) and Pass@(k, T) on the doorway maps alone (issue 50), per method with its interval, beside the
    exact optimum's (the upper bound of k tries) and always-rush's (k independent tries of it); None without doorway
    maps. What reading the budget buys at every depth T, and what sampling breadth buys without it."""
    sw = sw_all.subset(doorway.FAMILY)
    if sw is None or not sw.same_t_max:
        return None
    df = sw.records(df_all)
    rush = doorway.references(sw.tasks, sw.Ts).loc["rush (blind for the mix)"]
    out: dict = {"n_tasks": len(sw.tasks), "T_values": sw.Ts, "K": k}
    for kk in sorted({1, k}):
        t = pass_at_t(sw, metrics.per_task_pass(df, kk), kk, n_boot, ci, seed)
        out[f"pass_at_{kk}"] = {
            m: {
                str(int(r["T"])): float(r["pass"]) for _, r in t[t["method"] == m].sort_values("T").iterrows()
            }
            for m in sw.methods
        }
        out[f"optimum_at_{kk}"] = {str(T): v for T, v in sw.bound(kk).items()}
        out[f"rush_at_{kk}"] = {str(T): float(1 - (1 - rush[T]) ** kk) for T in sw.Ts}
    return out


def doorway_table(d: dict | None) -> pd.DataFrame | None:
    """`doorway_pass` as a table: rows method or reference at K, columns T."""
    if d is None:
        return None
    rows = {}
    for kk in sorted({1, d["K"]}):
        for m, v in d[f"pass_at_{kk}"].items():
            rows[f"{m} (K = {kk})"] = v
        rows[f"optimum (K = {kk}, exact)"] = d[f"optimum_at_{kk}"]
        rows[f"always rush (K = {kk}, exact)"] = d[f"rush_at_{kk}"]
    return pd.DataFrame(rows).T.rename_axis("Pass@(K, T) on doorway maps")


def doorway_findings(m: dict) -> list[str]:
    """Pass@T on the doorway maps, where reading the budget pays (empty without them)."""
    d = m.get("doorway_pass")
    if not d:
        return []
    k = d["K"]
    return [
        f"- **Doorway maps** ({d['n_tasks']} of the sweep's tasks; reported apart, the rest of this notebook is on "
        f"the random maps): Pass@(1, T) at T = {', '.join(map(str, d['T_values']))}: "
        + "; ".join(f"{m_} {fmt.joined(v)}" for m_, v in d["pass_at_1"].items())
        + f"; optimum {fmt.joined(d['optimum_at_1'])}, always rush {fmt.joined(d['rush_at_1'])}. At K = {k}: "
        + "; ".join(f"{m_} {fmt.joined(v)}" for m_, v in d[f"pass_at_{k}"].items())
        + f"; optimum {fmt.joined(d[f'optimum_at_{k}'])}, always rush {fmt.joined(d[f'rush_at_{k}'])}."
    ]


# ------------------------------------------------------------------------------------------------ findings


def findings(m: dict) -> list[str]:
    """What notebook 03 found: Pass@T of every method beside the upper bound, each gap's sign by T, the paper's
    claim (the RL advantage grows with T) and the gaps along K at the largest T."""
    Ts, k = m["T_values"], m["K"]
    g = m["pass_at_t_gap_points"]
    ci = m["pass_at_t_gap_ci"]
    lines = [
        f"Pass@(K={k}, T) on {m['n_tasks']} test tasks x {m['n_samples']} samples, T = {' / '.join(map(str, Ts))}"
        + (" (percent of each task's T_max)" if m.get("T_unit", "turns") != "turns" else "")
        + "; RL averaged over seeds; gaps in points with 95 % intervals over seeds and tasks.",
        "- **Pass@T:** "
        + "; ".join(f"{meth} {fmt.joined(vals)}" for meth, vals in m["pass_at_t"].items())
        + (
            f"; upper bound {fmt.joined([m['upper_bound'][str(T)] for T in Ts])}."
            if all(m["upper_bound"][str(T)] is not None for T in Ts)
            else "; no structural upper bound (the environment knows none)."
        ),
    ]
    paired = m.get("pass_at_t_gap_paired")
    for c in g:
        if paired is not None:  # the verdict paired by seed
            v = paired[c]
            sides = {T: fmt.side(v[str(T)]["low"], v[str(T)]["high"]) for T in Ts}
        else:  # a run from before the paired verdicts: the crossed bootstrap's intervals decide
            sides = {T: fmt.side(*ci[c][str(T)]) for T in Ts}
        above = [str(T) for T in Ts if sides[T] == "above 0"]
        below = [str(T) for T in Ts if sides[T] == "below 0"]
        paired_text = (
            "; paired by seed " + "; ".join(f"T = {T}: {fmt.verdict(paired[c][str(T)])}" for T in Ts)
            if paired is not None
            else ""
        )
        lines.append(
            f"- **{c}:** {fmt.joined([g[c][str(T)] for T in Ts], 1, sign=True)}{paired_text}; interval above 0 at "
            f"T = {', '.join(above) or 'none'}"
            + (f", below 0 at T = {', '.join(below)}" if below else "")
            + "."
        )
    if paired is not None:
        n = paired["grpo - base"][str(Ts[0])]["n_seeds"]
        lines.append(
            f"  Paired intervals: t-intervals on the differences of {n} seeds, each seed with its own "
            f"base-side draws; MDE: the smallest effect found with {fmt.percent(m['power'], 0)} power."
        )
    if "solvable_tasks" in m:
        lines.append(_solvable_line(m))
    first, last = g["grpo - base"][str(Ts[0])], g["grpo - base"][str(Ts[-1])]
    tr = m.get("trend", {}).get("grpo - base")
    if tr is not None:
        grows = {"above 0": "it grows with T", "below 0": "it shrinks with T"}.get(
            fmt.side(tr["low"], tr["high"]), "this sample cannot tell whether it grows with T"
        )
        lines.append(
            f"- **The paper's claim** (the RL advantage grows with T and shrinks at small T): GRPO minus base "
            f"is {fmt.signed(first, 1)} points at T = {Ts[0]} and {fmt.signed(last, 1)} at T = {Ts[-1]}; the "
            f"change, paired by seed, {fmt.verdict(tr)}: {grows}."
        )
    else:  # a run from before the paired verdicts
        lines.append(
            f"- **The paper's claim** (the RL advantage grows with T and shrinks at small T): GRPO minus base "
            f"is {fmt.signed(first, 1)} points at T = {Ts[0]} and {fmt.signed(last, 1)} at T = {Ts[-1]}"
            f" ({'grows' if last > first else 'does not grow'} with T)."
        )
    big = m["gap_by_K_at_T_max"]
    ks = sorted(big["grpo-base"], key=int)
    lines.append(
        f"- **Along K at T = {Ts[-1]}:** GRPO minus base {fmt.signed(big['grpo-base'][ks[0]], 1)} points at K = "
        f"{ks[0]}, {fmt.signed(big['grpo-base'][ks[-1]], 1)} at K = {ks[-1]}; GRPO minus sharpened base "
        f"{fmt.signed(big['grpo-sharp'][ks[0]], 1)} and {fmt.signed(big['grpo-sharp'][ks[-1]], 1)}."
    )
    return lines + doorway_findings(m)


def _solvable_line(m: dict) -> str:
    """The gaps on the tasks solvable at all within each T, with where their intervals lie above 0."""
    Ts, sg, sci = m["T_values"], m["solvable_gap_points"], m["solvable_gap_ci"]

    sp = m.get("solvable_gap_paired")

    def above(c: str) -> str:
        def lies_above(T) -> bool:
            if sp is not None:  # the verdict paired by seed
                return fmt.side(sp[c][str(T)]["low"], sp[c][str(T)]["high"]) == "above 0"
            return fmt.side(*sci[c][str(T)]) == "above 0"

        return ", ".join(str(T) for T in solvable if lies_above(T)) or "none"

    solvable = [T for T in Ts if all(str(T) in sg[c] for c in sg)]  # a T where no task is solvable has no gap
    none = [str(T) for T in Ts if T not in solvable]
    counts = f"{fmt.joined([m['solvable_tasks'][str(T)] for T in Ts], 0)} of {m['n_tasks']}"
    counts += f"; none at T = {', '.join(none)}" if none else ""
    gaps_ = "; ".join(
        f"{c} {fmt.joined([sg[c][str(T)] for T in solvable], 1, sign=True)} (interval above 0 at T = {above(c)})"
        for c in sg
    )
    return (
        f"- **On the tasks solvable at all within T** ({counts}): {gaps_}. A task no policy "
        "can solve within T scores 0 for every policy and pulls the gaps over all tasks towards 0 at small T; "
        "these leave such tasks out."
    )
