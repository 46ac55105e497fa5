"""Notebook 02's analysis: BudgetMix against full-budget GRPO at 25 / 50 / 75 / 100 % of T_max, each RL method
against the sharpened base (the control for plain sharpening), and R_single under both.

How BudgetMix draws its budgets in training is `helpers.budget`; this module evaluates what it trained. `evaluate`
rolls out the roster on the test tasks; `success_table`, `gain_table` and `r_single_curves` are the notebook's
tables and figure; `summary` is notebook 02's metrics.json and `findings` what the notebook says about it.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd

from helpers import budget, controls, fmt, metrics, paper, plots, store, train
from helpers import evaluate as evaluation
from helpers.config import Config
from helpers.dynamics import R_SINGLE_CURVES, change, measured
from helpers.envs import Task, load_tasks, settings
from helpers.policy import Sampling

# name -> (method a, method b): a minus b, in points
COMPARISONS = {
    "budgetmix - grpo": ("budgetmix", "grpo"),
    "grpo - sharp": ("grpo", "sharp"),
    "budgetmix - sharp": ("budgetmix", "sharp"),
    "grpo - base": ("grpo", "base"),
}


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


def sharpening_table(sharp: dict) -> pd.Series:
    """The base's success at T_max on the training tasks at each candidate temperature (`controls.sharpened`)."""
    return pd.Series(sharp["success"], name="base success at T_max on training maps").rename_axis(
        "temperature"
    )


def evaluate(cfg: Config, out: store.Run) -> Evaluation:
    """Base, sharpened base and every RL seed of GRPO and BudgetMix on `eval.n_tasks` test tasks at each of
    `eval.budget_fractions` of each task's T_max (records in `eval_records`: an interrupted evaluation resumes)."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    cells = budget.fraction_cells(tasks, cfg.eval.budget_fractions)  # (fraction, budget) -> tasks
    agents = controls.agents(cfg)
    sampling = Sampling.from_config(cfg.sampling)
    frames = evaluation.evaluate_cells(agents, cfg.env.name, {(f, b): (ts, b) for (f, b), ts in cells.items()},
                                       cfg.eval.n_samples, sampling, seed=cfg.seed + 1000,
                                       records=out.records("eval_records"))  # fmt: skip
    df = pd.concat([frames[(f, b)].assign(fraction=f) for f, b in cells], ignore_index=True)
    return Evaluation(tasks, cells, controls.methods(agents), df)


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


def gain_table(ev: Evaluation, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Each of `COMPARISONS` per fraction, in points; intervals resample the tasks jointly (paired) and each
    method's seeds separately."""
    per_task = ev.per_task
    gains = pd.concat(
        [
            metrics.method_difference(per_task, ev.methods[a], ev.methods[b], "success", ["fraction"], 100,
                                      n_boot, ci, seed)
            .rename(columns={"difference": "gain_points"})
            .assign(comparison=name)
            for name, (a, b) in COMPARISONS.items()
        ]
    )  # fmt: skip
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


def _by_fraction(frame: pd.DataFrame, col: str) -> dict[str, object]:
    return {f"{r.fraction:g}": getattr(r, col) for r in frame.itertuples()}


def _interval_by_fraction(frame: pd.DataFrame) -> dict[str, list]:
    return {f"{r.fraction:g}": [r.low, r.high] for r in frame.itertuples()}


def summary(cfg: Config, sharp: dict, ev: Evaluation, table: pd.DataFrame, gains: pd.DataFrame) -> dict:
    """Notebook 02's metrics.json: success and gains per fraction of T_max with their intervals, the sharpened
    base, the upper bound, R_single's change under both methods (from notebook 01) and the paper's gains."""
    dynamics = store.Run.read_metrics(cfg.results_name, "01_grpo_training")
    rows = {m: table[table["method"] == m] for m in ev.methods}
    by_comparison = {c: gains[gains["comparison"] == c] for c in COMPARISONS}
    return {
        "sharpened": sharp,
        "success": {m: _by_fraction(r, "success") for m, r in rows.items()},
        "success_ci": {m: _interval_by_fraction(r) for m, r in rows.items()},
        "success_per_seed": {m: _by_fraction(r, "per_seed") for m, r in rows.items()},
        "gains_points": {c: _by_fraction(g, "gain_points") for c, g in by_comparison.items()},
        "gains_ci": {c: _interval_by_fraction(g) for c, g in by_comparison.items()},
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
        "paper": {
            "budgetmix_minus_grpo_points": {
                f"{f:g}": paper.value(v) for f, v in paper.BUDGETMIX_GAIN_POINTS.items()
            }
        },
    }


# ------------------------------------------------------------------------------------------------ findings


def gain_cells(m: dict, comparison: str) -> str:
    """A comparison's gain at every fraction with its interval: `+11.6 [+0.5, +22.3] / ...` (points)."""
    g, ci = m["gains_points"][comparison], m["gains_ci"][comparison]
    return " / ".join(fmt.estimate(g[f], ci[f], digits=1, signed=True) for f in g)


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
        f"- **BudgetMix minus GRPO:** {gain_cells(m, 'budgetmix - grpo')} points (paper, mean of 4 tasks: "
        + fmt.joined(m["paper"]["budgetmix_minus_grpo_points"], 1, sign=True)
        + ").",
    ]
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
    rs = {k: v for k, v in m["r_single_change"].items() if measured(v)}
    if len(rs) == 2:
        lines.append(
            f"- **R_single on own states** over training: GRPO {change(rs['grpo'])}, BudgetMix "
            f"{change(rs['budgetmix'])} (paper: degrades under full-budget RL, stable or better under BudgetMix)."
        )
    else:
        lines.append(
            f"- **R_single:** not measured: {m.get('env', 'this environment')} has no step oracle "
            f"({(m.get('step_oracle') or {}).get('oracle_note', 'none declared')})."
        )
    return lines
