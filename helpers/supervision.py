"""Notebook 07's experiment: GRPO, GiGPO, PPO and the oracle-Q process reward, each at the full budget and with
BudgetMix, and how precise the oracle's step signal must be (the precision curve).

The grid is the profile's `process` section: `algorithms` x the two budget modes x `seeds`, every run at
`process.steps` RL steps (default `train.steps`) and otherwise the profile's `train` settings, plus oracle-Q runs
with the oracle corrupted at each of `corruption_levels` (in `precision_mode`; level 0 is the exact oracle, the
grid's own oracle-Q run). On `process.env` (default `env.name`): the gpu profile runs the same grid on BFCL, where
no step oracle exists (GRPO, GiGPO and PPO only), through the same environment-generic calls.

GRPO's runs are the profile's own (notebook 01 trains them when `process.env` is its environment): at
`train.steps` its final models, at fewer steps the policy its runs saved after that step (`train.save_steps`), so a
reduced grid compares every estimator at the same number of steps without training GRPO again; where no such
snapshot exists a GRPO run of `process.steps` steps is trained.

Method names: the estimator (`grpo`, `gigpo`, `ppo`, `oracle_q`), `+budgetmix` for its BudgetMix runs, and
`@<level>` for a corrupted oracle (`oracle_q@0.5`); the roster names add the seed (`gigpo+budgetmix-s0`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import budget as budget_lib
from helpers import fmt, metrics, store, train
from helpers.budgetmix import fraction_label, gain_cells
from helpers.config import Config
from helpers.dynamics import change
from helpers.envs import load_tasks, settings

MODES = train.BUDGET_MODES


def method_name(algorithm: str, mode: str, level: float | None = None) -> str:
    """`gigpo`, `gigpo+budgetmix`, `oracle_q@0.5` ..."""
    name = algorithm if mode == "full" else f"{algorithm}+{mode}"
    return name if not level else f"{name}@{level:g}"


def experiment_profile(cfg: Config) -> Config:
    """The profile with the experiment's environment (`process.env`) as its environment."""
    env = cfg.process.env or cfg.env.name
    return (
        cfg if env == cfg.env.name else dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, name=env))
    )


def grid_steps(cfg: Config) -> int:
    """RL steps of every run of the grid."""
    return cfg.process.steps or cfg.train.steps


def variant(cfg: Config, algorithm: str, level: float = 0.0, steps: int | None = None) -> Config:
    """The profile of one estimator of the grid: `train.algorithm`, `train.oracle_corruption` and `train.steps`."""
    steps = steps or cfg.train.steps
    if algorithm == "ppo" and cfg.train.critic_warmup > steps:
        raise ValueError(f"train.critic_warmup ({cfg.train.critic_warmup}) exceeds the grid's {steps} steps")
    t = dataclasses.replace(cfg.train, algorithm=algorithm, oracle_corruption=float(level), steps=steps)
    return dataclasses.replace(cfg, train=t)


@dataclass(frozen=True)
class GridRun:
    """One run of the grid: its method, where it lives (`cfg`, mode, seed) and which of its models it uses
    (`step`: None for the final model, k for the policy saved after step k of a longer run)."""

    method: str
    algorithm: str
    mode: str
    seed: int
    level: float
    cfg: Config
    step: int | None = None
    source: str = "trained for this grid"

    @property
    def name(self) -> str:
        """The roster name, e.g. `gigpo+budgetmix-s0`."""
        return f"{self.method}-s{self.seed}"

    def model(self) -> Path:
        return train.trained_model(self.cfg, self.mode, self.seed, step=self.step)

    def logs(self) -> list[dict]:
        """The run's metrics log up to the grid's steps (a longer run's log is cut there)."""
        last = self.step or self.cfg.train.steps
        return [r for r in train.read_metrics(self.cfg, self.mode, self.seed) if r["step"] <= last]


def _grpo_run(c: Config, mode: str, seed: int, steps: int, own: bool) -> GridRun:
    """GRPO's run of the grid: the profile's own (`own`: notebook 01 trains it when the experiment runs on the
    profile's environment), after `steps` of its steps where it saved them, else a run of its own."""
    name = method_name("grpo", mode)
    where = "the profile's GRPO run (notebook 01)" if own else f"the profile's GRPO run on {c.env.name}"
    if steps >= c.train.steps:
        return GridRun(name, "grpo", mode, seed, 0.0, variant(c, "grpo"), source=where)
    try:
        train.trained_model(c, mode, seed, step=steps)
        return GridRun(name, "grpo", mode, seed, 0.0, c, step=steps, source=f"{where}, after step {steps}")
    except FileNotFoundError:
        return GridRun(name, "grpo", mode, seed, 0.0, variant(c, "grpo", steps=steps))


def grid(cfg: Config) -> list[GridRun]:
    """Every run of the experiment: the main grid (estimator x budget mode x seed), then the precision runs."""
    from helpers import process

    c = experiment_profile(cfg)
    p, steps = c.process, grid_steps(c)
    if "oracle_q" in p.algorithms and not process.has_oracle(c.env.name):
        raise ValueError(f"process.algorithms has oracle_q but {c.env.name!r} has no step oracle")
    runs = []
    for algo in p.algorithms:
        for mode in MODES:
            for s in p.seeds:
                if algo == "grpo":
                    runs.append(_grpo_run(c, mode, s, steps, own=c.env.name == cfg.env.name))
                else:
                    runs.append(
                        GridRun(method_name(algo, mode), algo, mode, s, 0.0, variant(c, algo, steps=steps))
                    )
    for level in p.corruption_levels:
        if level > 0:
            for s in p.seeds:
                runs.append(
                    GridRun(
                        method_name("oracle_q", p.precision_mode, level),
                        "oracle_q",
                        p.precision_mode,
                        s,
                        float(level),
                        variant(c, "oracle_q", level, steps),
                    )
                )
    return runs


def train_grid(runs: list[GridRun], workers: int | None = None) -> dict[str, Path]:
    """Train every run of the grid that is not done yet (`train.parallel_runs` at a time); {roster name: model}."""
    todo = [(r.cfg, r.mode, r.seed) for r in runs if r.step is None]
    train.train_many(todo, workers)
    return {r.name: r.model() for r in runs}


def describe(runs: list[GridRun]) -> pd.DataFrame:
    """One row per run of the grid: method, seed, budget mode, steps and which model it uses."""
    rows = []
    for r in runs:
        rows.append(
            {
                "method": r.method,
                "seed": r.seed,
                "budget mode": r.mode,
                "oracle corruption": r.level,
                "steps": r.step or r.cfg.train.steps,
                "model": r.source,
            }
        )
    return pd.DataFrame(rows)


def methods(runs: list[GridRun]) -> dict[str, list[str]]:
    """{method: its roster names, in seed order}, in grid order."""
    out: dict[str, list[str]] = {}
    for r in runs:
        out.setdefault(r.method, []).append(r.name)
    return out


# ----------------------------------------------------------------------------------------------- evaluation


def test_tasks(cfg: Config) -> list:
    c = experiment_profile(cfg)
    return load_tasks(c.env.name, "test", n=c.process.n_tasks, seed=c.seed, **settings(c))


def evaluate(cfg: Config, models: dict[str, Path], run: store.Run) -> pd.DataFrame:
    """Success records of every model at every fraction of each test task's own T_max (`eval.budget_fractions`).

    The same tasks, samples and seed for every model (paired comparisons). One model is loaded at a time, on the
    profile's backend in `model.dtype` (`agents.opened`), and closed before the next. Records are kept per (fraction,
    budget) in the run's folder, so an interrupted evaluation resumes; tasks whose T_max differ (BFCL) get their
    own budget at the same fraction, and the `fraction` column is the nominal fraction.
    """
    from helpers import evaluate as ev
    from helpers.agents import Agent, opened
    from helpers.policy import Sampling
    from helpers.progress import bar

    c = experiment_profile(cfg)
    tasks = test_tasks(c)
    cells: dict[tuple[float, int], list] = {}
    for f in c.eval.budget_fractions:
        for t in tasks:
            cells.setdefault((f, budget_lib.budget_at(f, t.t_max)), []).append(t)
    sampling = Sampling.from_config(c.sampling)
    frames = []
    for name, path in bar(list(models.items()), desc="models", leave=False):
        with opened(Agent(name, path, c)) as policy:  # closed (a vLLM engine shut down) before the next model
            for (f, b), ts in cells.items():
                df = ev.evaluate_grid(
                    {name: policy},
                    c.env.name,
                    ts,
                    [b],
                    c.process.n_samples,
                    sampling,
                    seed=c.seed + 1000,
                    records=run.records(f"eval_f{f:g}_T{b}"),
                )
                frames.append(df.assign(fraction=f))
    return pd.concat(frames, ignore_index=True)


def per_task(df: pd.DataFrame) -> pd.DataFrame:
    """Success per (model, fraction, task) over the samples."""
    return df.groupby(["model", "fraction", "task_id"], as_index=False)["success"].mean()


def success_table(
    df: pd.DataFrame, methods: dict[str, list[str]], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Success per (fraction, method): the mean over the method's seeds of the mean over tasks, with an interval
    that resamples seeds and tasks (`metrics.crossed_bootstrap`; with one seed it covers the tasks only)."""
    return metrics.method_summary(per_task(df), methods, "success", ["fraction"], n_boot, ci, seed)


def comparisons(runs: list[GridRun]) -> dict[str, tuple[str, str]]:
    """The differences the notebook reports: each estimator minus GRPO in the same budget mode, BudgetMix minus
    full budget for each estimator, and each precision level minus GRPO."""
    ms = methods(runs)
    algos = list(dict.fromkeys(r.algorithm for r in runs if not r.level))
    out = {}
    for mode in MODES:
        for a in algos:
            if a != "grpo" and method_name("grpo", mode) in ms:
                out[f"{method_name(a, mode)} - {method_name('grpo', mode)}"] = (
                    method_name(a, mode),
                    method_name("grpo", mode),
                )
    for a in algos:
        out[f"{method_name(a, 'budgetmix')} - {a}"] = (method_name(a, "budgetmix"), a)
    for r in precision_runs(runs):
        key = f"{r.method} - {method_name('grpo', r.mode)}"
        if method_name("grpo", r.mode) in ms and key not in out:
            out[key] = (r.method, method_name("grpo", r.mode))
    return out


def gain_table(
    df: pd.DataFrame, runs: list[GridRun], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Each comparison of `comparisons` per fraction, in points, with a bootstrap that resamples tasks jointly
    (paired) and each method's seeds independently."""
    ms, pt = methods(runs), per_task(df)
    rows = []
    for name, (a, b) in comparisons(runs).items():
        d = metrics.method_difference(pt, ms[a], ms[b], "success", ["fraction"], 100, n_boot, ci, seed)
        rows.append(d.rename(columns={"difference": "gain_points"}).assign(comparison=name))
    return pd.concat(rows, ignore_index=True)


def upper_bound(cfg: Config) -> dict[float, float] | None:
    """The structural upper bound at each fraction (mean over the test tasks); None where the environment has
    none."""
    from helpers.envs.base import env_class

    c = experiment_profile(cfg)
    bound = getattr(env_class(c.env.name), "upper_bound", None)
    if bound is None:
        return None
    tasks = test_tasks(c)
    out = {}
    for f in c.eval.budget_fractions:
        values = [bound(t, budget_lib.budget_at(f, t.t_max)) for t in tasks]
        if any(v is None for v in values):  # the environment knows no bound (BFCL)
            return None
        out[f] = float(np.mean(values))
    return out


# ------------------------------------------------------------------------------------- training, precision


def logs(runs: list[GridRun]) -> dict[str, dict[int, pd.DataFrame]]:
    """{method: {seed: its metrics log, cut at the grid's steps}} for the training-curve figures."""
    out: dict[str, dict[int, pd.DataFrame]] = {}
    for r in runs:
        out.setdefault(r.method, {})[r.seed] = pd.DataFrame(r.logs())
    return out


def dynamics(runs: list[GridRun], n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> dict[str, dict]:
    """`train.training_dynamics` of every method: start, end and change of R_multi and R_single."""
    by: dict[str, dict[int, list[dict]]] = {}
    for r in runs:
        by.setdefault(r.method, {})[r.seed] = r.logs()
    return {m: train.training_dynamics(rs, n_boot, ci, seed) for m, rs in by.items()}


def dynamics_table(dyn: dict[str, dict]) -> pd.DataFrame:
    """Start, end and change (with its interval) of R_multi and R_single per method."""
    rows = {
        (m, k): {
            "start": d[k]["start"],
            "end": d[k]["end"],
            "change": d[k]["change"],
            "low": d[k]["change_ci"][0],
            "high": d[k]["change_ci"][1],
        }
        for m, d in dyn.items()
        for k in ("R_multi", "R_single")
        if k in d
    }
    return pd.DataFrame(rows).T


def precision_runs(runs: list[GridRun]) -> list[GridRun]:
    """The runs of the precision curve: oracle-Q in `precision_mode` at every corruption level (0 included)."""
    levels = {r.level for r in runs if r.level} | ({0.0} if any(r.level for r in runs) else set())
    modes = {r.mode for r in runs if r.level}
    return [r for r in runs if r.algorithm == "oracle_q" and r.mode in modes and r.level in levels]


def precision_table(table: pd.DataFrame, runs: list[GridRun]) -> pd.DataFrame:
    """Success per (corruption level, fraction) with its interval, and how much of the exact signal the corrupted
    oracle kept during training: the share of steps it scored exactly and the correlation of its process terms
    with the exact ones (means over the runs' steps and seeds)."""
    prec = precision_runs(runs)
    if not prec:
        return pd.DataFrame(columns=["level", "fraction", "success", "low", "high"])
    rows = []
    for level in sorted({r.level for r in prec}):
        mine = [r for r in prec if r.level == level]
        steps = [row for r in mine for row in r.logs() if row["step"] > 0]
        keep = {k: _mean([row.get(k) for row in steps]) for k in ("process_exact_share", "process_corr")}
        t = table[table["method"] == mine[0].method]
        for rec in t.itertuples():
            rows.append(
                {
                    "level": level,
                    "method": rec.method,
                    "fraction": rec.fraction,
                    "success": rec.success,
                    "low": rec.low,
                    "high": rec.high,
                    **keep,
                }
            )
    return pd.DataFrame(rows)


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


# ------------------------------------------------------------------------------------------------- metrics


def _by_fraction(frame: pd.DataFrame, col: str) -> dict[str, object]:
    return {f"{r.fraction:g}": getattr(r, col) for r in frame.itertuples()}


def _per(frame: pd.DataFrame, key: str, col: str, fmt=str) -> dict[str, dict]:
    """{key value: {fraction: col}} (`col` "ci" gives [low, high])."""
    out = {}
    for k, g in frame.groupby(key, sort=False):
        if col == "ci":
            out[fmt(k)] = {f"{r.fraction:g}": [r.low, r.high] for r in g.itertuples()}
        else:
            out[fmt(k)] = _by_fraction(g, col)
    return out


def summary(
    cfg: Config,
    runs: list[GridRun],
    table: pd.DataFrame,
    gains: pd.DataFrame,
    dyn: dict,
    precision: pd.DataFrame,
) -> dict:
    """Everything notebook 07 reports, for its metrics.json (and `findings`)."""
    from helpers import paper

    c = experiment_profile(cfg)
    grid_algos = list(dict.fromkeys(r.algorithm for r in runs if not r.level))
    ub = upper_bound(c)

    def level(x: float) -> str:
        return f"{x:g}"

    return {
        "env": c.env.name,
        "algorithms": grid_algos,
        "seeds": list(c.process.seeds),
        "steps": grid_steps(c),
        "train_steps": c.train.steps,
        "reduced": len(c.process.seeds) < 3 or grid_steps(c) < c.train.steps,
        "n_test_tasks": c.process.n_tasks,
        "n_samples": c.process.n_samples,
        "grpo_from_longer_runs": any(r.step is not None for r in runs),
        "success": _per(table, "method", "success"),
        "success_ci": _per(table, "method", "ci"),
        "success_per_seed": _per(table, "method", "per_seed"),
        "gains_points": _per(gains, "comparison", "gain_points"),
        "gains_ci": _per(gains, "comparison", "ci"),
        "dynamics": {
            m: {k: d[k] for k in ("n_seeds", "R_multi", "R_single", "R_single_pool") if k in d}
            for m, d in dyn.items()
        },
        "precision": {
            "mode": c.process.precision_mode,
            "levels": sorted({float(x) for x in precision["level"]}),
            "success": _per(precision, "level", "success", level),
            "success_ci": _per(precision, "level", "ci", level),
            "process_exact_share": {
                level(k): g["process_exact_share"].iloc[0] for k, g in precision.groupby("level")
            },
            "process_corr": {level(k): g["process_corr"].iloc[0] for k, g in precision.groupby("level")},
        },
        "upper_bound": None if ub is None else {f"{f:g}": v for f, v in ub.items()},
        "paper": {"claim": paper.PROCESS_SUPERVISION},
    }


# ------------------------------------------------------------------------------------------------ findings


def _where(m: dict, key: str, side: str) -> list[str]:
    return [
        f"{fmt.number(float(f), 0, scale=100)} %"
        for f, v in m["gains_ci"][key].items()
        if fmt.side(*v) == side
    ]


def _stabilises(m: dict, key: str) -> str:
    """The paper's FrozenLake claim for one estimator: better than GRPO across budgets, at tight ones most."""
    g, ci = m["gains_points"][key], m["gains_ci"][key]
    fr = list(g)
    tight, loose = fr[0], fr[-1]
    above, below = _where(m, key, "above 0"), _where(m, key, "below 0")
    if ci[tight][0] > 0 and g[tight] >= g[loose]:
        verdict = (
            f"as in the paper: above GRPO at the tightest budget ({fmt.number(float(tight), 0, scale=100)} % of T_max), and "
            "by more than at the full budget"
        )
    elif above:
        verdict = (
            f"in part: above GRPO at {', '.join(above)} of T_max, not the pattern of the tightest budget most"
        )
    elif below:
        verdict = f"not here: below GRPO at {', '.join(below)} of T_max"
    else:
        verdict = "not shown here: no budget's interval excludes 0"
    return verdict


def precision_key(mode: str, level: str) -> str:
    """The gains key of the oracle corrupted at `level` against GRPO in the same budget mode."""
    suffix = "" if mode == "full" else f"+{mode}"
    name = f"oracle_q{suffix}" if float(level) == 0 else f"oracle_q{suffix}@{level}"
    return f"{name} - grpo{suffix}"


def method_order(m: dict):
    """Sort key of method names in the grid's order: estimator, then full budget before BudgetMix."""
    rank = {a: i for i, a in enumerate(m["algorithms"])}
    return lambda name: (rank.get(name.split("+")[0].split("@")[0], len(rank)), "+" in name, name)


def findings(m: dict) -> list[str]:
    """What notebook 07 found: success of every estimator in both budget modes, the paper's claims for each, the
    precision curve and the training dynamics."""
    fr = list(next(iter(m["success"].values())))
    order = method_order(m)
    n_seeds = len(m["seeds"])
    lines = [
        f"{m['env']}: {', '.join(m['algorithms'])}, each at the full budget and with BudgetMix; {n_seeds} RL "
        f"seed{'s' if n_seeds > 1 else ''} ({', '.join(map(str, m['seeds']))}), {m['steps']} RL steps per run; "
        f"{m['n_test_tasks']} test tasks x {m['n_samples']} samples per cell; success at {fraction_label(fr)} % of "
        "T_max, points with 95 % intervals over seeds and tasks."
    ]
    if m["reduced"]:
        lines.append(
            f"- **Reduced grid** ({n_seeds} seed{'s' if n_seeds > 1 else ''}, {m['steps']} of {m['train_steps']} "
            "steps): "
            + (
                "with one seed the intervals cover the test tasks only, not the variance of training; "
                if n_seeds == 1
                else ""
            )
            + "the full grid is `configs/cpu_process.yaml` on the cpu tier."
        )
    if m["grpo_from_longer_runs"]:
        lines.append(
            f"- GRPO's and BudgetMix's models are the profile's GRPO runs (notebook 01) after {m['steps']} steps."
        )
    ub = m.get("upper_bound")
    lines.append(
        "- **Success:** "
        + "; ".join(
            f"{k} {fmt.joined(m['success'][k])}" for k in sorted(m["success"], key=order) if "@" not in k
        )
        + (f"; structural upper bound {fmt.joined(ub)}." if ub else ".")
    )
    gains = m["gains_points"]
    claim = m["paper"]["claim"]
    lines.append(f"- **The paper's claims:** {claim}.")
    for algo in ("oracle_q", "gigpo"):
        key = f"{algo} - grpo"
        if key in gains and m["env"] == "frozenlake":
            lines.append(
                f"- **{algo} minus GRPO** (full budget): {gain_cells(m, key)} points: {_stabilises(m, key)}."
            )
    for algo in ("ppo", "gigpo"):
        key = f"{algo} - grpo"
        if key not in gains or (algo == "gigpo" and m["env"] == "frozenlake"):
            continue
        tight = [f for f in gains[key] if float(f) < 1]
        better = [f"{fmt.number(float(f), 0, scale=100)} %" for f in tight if m["gains_ci"][key][f][0] > 0]
        setting = "a learned critic, no oracle" if algo == "ppo" else "no exact step oracle"
        lines.append(
            f"- **{algo} minus GRPO** ({setting}): {gain_cells(m, key)} points: "
            + (
                f"better than GRPO at {', '.join(better)} of T_max (the paper, on BFCL: no better under constrained "
                "budgets)"
                if better
                else "no constrained budget's interval is above 0 (no better than GRPO detected there; the paper "
                "finds no better on BFCL)"
            )
            + "."
        )
    for mode_key in sorted((k for k in gains if k.endswith("+budgetmix - grpo+budgetmix")), key=order):
        lines.append(f"- **{mode_key}:** {gain_cells(m, mode_key)} points.")
    mix = sorted((k for k in gains if k.split(" - ")[0] == f"{k.split(' - ')[-1]}+budgetmix"), key=order)
    if mix:
        first = fr[0]
        helped = [k.split(" - ")[-1] for k in mix if m["gains_ci"][k][first][0] > 0]
        lines.append(
            "- **BudgetMix in each estimator** (BudgetMix minus full budget): "
            + "; ".join(f"{k.split(' - ')[-1]} {gain_cells(m, k)}" for k in mix)
            + f" points; above 0 at {fmt.number(float(first), 0, scale=100)} % of T_max for {', '.join(helped) or 'none of them'} "
            "(the paper: BudgetMix drops into GRPO, GiGPO and PPO unchanged)."
        )
    p = m["precision"]
    if p["levels"]:
        levels = [f"{lv:g}" for lv in p["levels"]]
        lines.append(
            f"- **Precision** (oracle-Q, {p['mode']} budget; corruption = share of states whose action values the "
            "oracle shuffles): success at "
            + "; ".join(
                f"{fmt.number(float(f), 0, scale=100)} % "
                + fmt.joined([p["success"][lv][f] for lv in levels])
                for f in fr
            )
            + f" at levels {' / '.join(levels)}."
        )
        corr = [p["process_corr"].get(lv) for lv in levels]
        lines.append(
            "  Correlation of the reported with the exact process term during training: "
            + fmt.joined(corr)
            + "."
        )
        gk = {lv: precision_key(p["mode"], lv) for lv in levels}
        first = fr[0]
        pts = {lv: (gains[k][first], m["gains_ci"][k][first]) for lv, k in gk.items() if k in gains}
        if pts:
            kept = [lv for lv, (_, ci) in pts.items() if ci[0] > 0]
            lines.append(
                f"  Gain over GRPO at {fmt.number(float(first), 0, scale=100)} % of T_max: "
                + " / ".join(fmt.estimate(v, ci, digits=1, signed=True) for v, ci in pts.values())
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
        rs = f", R_single {change(d['R_single'])}" if "R_single" in d else ""
        parts.append(f"{name} R_multi {change(d['R_multi'])}{rs}")
    if parts:
        lines.append(
            "- **Training dynamics** (change from the first to the last evaluation): "
            + "; ".join(parts)
            + "."
        )
    return lines
