"""Notebook 01's analysis: the training dynamics of GRPO at the full budget (and of BudgetMix, trained alongside):
R_multi (trajectory success) rises during RL; does R_single (the step oracle's quality of single actions, on the
policy's own states and on a fixed pool) rise with it, as one would expect, or fall, as the paper finds?

`runs` and `train` train every RL run the later notebooks compare; `logs`, `step_table` and `curve_columns` feed
the figure; `summary` is notebook 01's metrics.json and `findings` what the notebook says about it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from helpers import fmt, metrics, paper, plots, train
from helpers.config import Config
from helpers.envs import step_oracle

CURVES = {"eval_success": "R_multi (success, full budget)"}
R_SINGLE_CURVES = {"r_single_own": "R_single (own states)", "r_single": "R_single (fixed pool)"}


def runs(cfg: Config) -> list[tuple[str, int]]:
    """Every (budget mode, RL seed) the series trains: GRPO at the full budget and BudgetMix, each RL seed."""
    return [(mode, seed) for mode in train.BUDGET_MODES for seed in cfg.train.seeds]


def logs(cfg: Config) -> dict[str, dict[int, pd.DataFrame]]:
    """Each run's per-step metrics log: {mode: {RL seed: DataFrame}}."""
    return {
        mode: {s: pd.DataFrame(train.read_metrics(cfg, mode, s)) for s in cfg.train.seeds}
        for mode in train.BUDGET_MODES
    }


def step_table(run_logs: dict[str, dict[int, pd.DataFrame]]) -> pd.DataFrame:
    """Every run's per-step metrics in one table, without the per-task and per-state columns."""
    return pd.concat(
        [
            m.drop(columns=[c for c in m if c.endswith(("_by_task", "_by_state"))])
            for by_seed in run_logs.values()
            for m in by_seed.values()
        ]
    )


def curve_columns(cfg: Config) -> dict[str, str]:
    """The logged columns to draw and their labels: R_multi, and both R_single where the environment has a step
    oracle."""
    return CURVES | (R_SINGLE_CURVES if step_oracle(cfg.env.name)["step_oracle"] else {})


def training_curves(cfg: Config, logs: dict[str, dict[int, pd.DataFrame]]) -> plt.Figure:
    """GRPO's logged R_multi (and R_single) against the RL step: each seed, the mean over seeds and its interval
    over seeds and units (`metrics.seed_bands`)."""
    runs, columns = {"grpo": logs["full"]}, curve_columns(cfg)
    bands = metrics.seed_bands(runs, columns, cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    return plots.seed_curves(runs, columns, "GRPO, full budget", bands, cfg.eval.ci)


def training_dynamics(cfg: Config) -> dict[str, dict]:
    """{mode: `train.training_dynamics` of its RL seeds}: start, end and change of R_multi and R_single."""
    return {
        mode: train.training_dynamics(
            {s: train.read_metrics(cfg, mode, s) for s in cfg.train.seeds},
            cfg.eval.n_bootstrap,
            cfg.eval.ci,
            cfg.seed,
        )
        for mode in train.BUDGET_MODES
    }


def step_stats(cfg: Config, table: pd.DataFrame) -> dict:
    """GRPO's invalid-action rate at the start and the end, its KL to the base, clip fraction and time per step."""
    steps = table[table["mode"] == "full"].dropna(subset=["kl"])
    return {
        "invalid_rate_first_5_steps": float(steps[steps["step"] <= 5]["invalid_rate"].mean()),
        "invalid_rate_last_5_steps": float(steps[steps["step"] > cfg.train.steps - 5]["invalid_rate"].mean()),
        "kl_last_5_steps": float(steps[steps["step"] > cfg.train.steps - 5]["kl"].mean()),
        "clip_frac_mean": float(steps["clip_frac"].mean()),
        "seconds_per_step": float((steps["rollout_s"] + steps["update_s"]).mean()),
    }


def summary(cfg: Config, dyn: dict[str, dict], table: pd.DataFrame) -> dict:
    """Notebook 01's metrics.json: both methods' dynamics (`training_dynamics`), GRPO's step statistics, the paper."""
    return {
        "grpo": dyn["full"],
        "budgetmix": dyn["budgetmix"],
        "grpo_steps": step_stats(cfg, table),
        "seeds": cfg.train.seeds,
        "env": cfg.env.name,
        "step_oracle": step_oracle(cfg.env.name),
        "paper": {k: paper.value(v) for k, v in paper.TRAINING_DYNAMICS.items()},
    }


def change_table(m: dict) -> pd.DataFrame:
    """GRPO's start, end and change (with its interval) of each tracked reward, beside the paper's change."""
    return pd.DataFrame(
        {
            name: {
                "start": d["start"],
                "end": d["end"],
                "change": d["change"],
                "low": d["change_ci"][0],
                "high": d["change_ci"][1],
                "paper change": paper.value(paper.TRAINING_DYNAMICS.get(f"{name}_change", float("nan"))),
            }
            for name, d in m["grpo"].items()
            if isinstance(d, dict) and "change" in d
        }
    ).T


# ------------------------------------------------------------------------------------------------ findings


def measured(d: dict | None) -> bool:
    """Whether a training-dynamics entry (`train.training_dynamics`) holds numbers: on an environment without a
    step oracle R_single is absent or all None."""
    return isinstance(d, dict) and d.get("start") is not None


def change(d: dict) -> str:
    """A change with its interval, signed: `+0.124 [+0.047, +0.197]`."""
    return fmt.entry(d, "change", signed=True)


def findings(m: dict) -> list[str]:
    """What notebook 01 found: each reward's change during GRPO against the paper's, and the paper's claim."""
    g, p = m["grpo"], m["paper"]
    g = {k: v for k, v in g.items() if not isinstance(v, dict) or "start" not in v or measured(v)}
    lines = [f"Over {g['n_seeds']} RL seeds (mean change, 95 % interval over seeds and tasks or states):"]
    if "R_single" not in g:
        o = m.get("step_oracle") or {}
        lines.append(
            f"- **No R_single on {m.get('env', 'this environment')}:** it has no step oracle "
            f"({o.get('oracle_note', 'none declared')}), so only R_multi is tracked, as the paper does."
        )
    for key, label in (
        ("R_multi", "R_multi"),
        ("R_single", "R_single on the policy's own states"),
        ("R_single_pool", "R_single on the fixed pool"),
    ):
        if key not in g:
            continue
        d = g[key]
        paper_txt = (
            f" (paper, DeepCoder-MT: {fmt.signed(p[key + '_change'])}: "
            f"{fmt.against_paper(p[key + '_change'], *d['change_ci'])})"
            if key + "_change" in p
            else ""
        )
        lines.append(
            f"- **{label}:** {fmt.number(d['start'])} -> {fmt.number(d['end'])}, change {change(d)}, interval "
            f"{fmt.side(*d['change_ci'])}{paper_txt}."
        )
    rs, rm = g.get("R_single"), g["R_multi"]
    if rs is None:
        verdict = (
            f"R_multi changed by {change(rm)}; the step-reward half of the claim cannot be tested without an "
            "oracle"
        )
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
            f"- **BudgetMix** (same base, same seeds): R_multi change {change(b['R_multi'])}"
            + (
                f", R_single (own states) change {change(b['R_single'])}."
                if measured(b.get("R_single"))
                else "."
            )
        )
    st = m["grpo_steps"]
    lines.append(
        f"- Invalid actions {fmt.percent(st['invalid_rate_first_5_steps'])} in the first 5 steps, "
        f"{fmt.percent(st['invalid_rate_last_5_steps'])} in the last 5; KL to the base "
        f"{fmt.number(st['kl_last_5_steps'])} at the end; {fmt.number(st['seconds_per_step'], 2)} s per step."
    )
    return lines
