"""Does BudgetMix learn to read its budget with more compute? The compute curve of issue 50.

Notebook 02 asks at the recipe's compute (60 RL steps) whether BudgetMix teaches the agent to read its turns left
on doorway maps (`helpers.budget_reading`). Where it does not, this curve asks whether more compute changes that:
BudgetMix runs of five times the recipe's steps (profile `cpu_budget_curve`: the cpu profile in every key but
`train.steps`, `train.save_steps`, `train.seeds` and the monitor's cadence, checked by a test), and at the base and
every saved step, on the held-out doorway test maps:

* the opening responsiveness (`budget_reading.opening_table`: 2 for the optimum, 0 for any budget-blind policy),
* success at 25 / 50 / 75 / 100 % of T_max (`eval.n_samples` episodes per map and budget), beside the exact
  optimum and always-rush values.

Each (seed, step) is one record of `curve_records.jsonl` (an interrupted run resumes), and the summary per step is
the mean over seeds with the t-interval over them. Run it with `python -m helpers.budget_curve` (`make
budget-curve`); it writes `results/cpu_budget_curve/budget_curve/`.
"""

from __future__ import annotations

import argparse

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from helpers import (
    base_model,
    budget,
    budget_control,
    budget_reading,
    config,
    fmt,
    models,
    plots,
    stats,
    store,
    train,
)
from helpers.agents import Agent, opened
from helpers.config import Config
from helpers.policy import Sampling
from helpers.progress import bar
from helpers.rollout import ChatFormat, rollout

PROFILE = "cpu_budget_curve"
NAME = "budget_curve"
MODE = "budgetmix"


def checkpoints(cfg: Config) -> list[int]:
    """The RL steps measured: 0 (the base), every `train.save_steps` and the final step."""
    return [0, *[s for s in cfg.train.save_steps if s < cfg.train.steps], cfg.train.steps]


def _path(cfg: Config, seed: int, step: int):
    return base_model.path_of(cfg) if step == 0 else train.trained_model(cfg, MODE, seed, step)


def measure(cfg: Config, seed: int, step: int) -> dict:
    """One (seed, step): opening responsiveness and doorway success by budget of the policy saved after `step`."""
    tasks = budget_control.doorway_tasks(cfg, "test")
    cells = budget.fraction_cells(tasks, cfg.eval.budget_fractions)
    sampling = Sampling.from_config(cfg.sampling)
    with opened(Agent(f"{MODE}-s{seed}@{step}", _path(cfg, seed, step), cfg)) as policy:
        chat = ChatFormat(policy.tokenizer, models.chat_kwargs(policy.tokenizer))
        table = budget_reading.opening_table(tasks, budget_reading.opening_probs(policy, tasks, chat))
        success = {}
        for (f, b), ts in cells.items():
            trajs = rollout(
                policy,
                "frozenlake",
                ts,
                b,
                cfg.eval.n_samples,
                sampling,
                seed=cfg.seed + 1000 + seed,
                step_quality=False,
            )
            success[f"{f:g}"] = float(np.mean([t.success for t in trajs]))
    return {
        "seed": seed,
        "step": step,
        "responsiveness": float(table["responsiveness"].mean()),
        "p_rush_long": float(table["p_rush_long"].mean()),
        "success": success,
    }


def summary(cfg: Config, records: list[dict]) -> dict:
    """Per step: mean over seeds with the t-interval over them, of the responsiveness and of the success at each
    fraction of T_max; the exact references beside."""
    df = pd.DataFrame(records)
    tasks = budget_control.doorway_tasks(cfg, "test")
    refs = budget_reading.references(tasks, budget.fraction_cells(tasks, cfg.eval.budget_fractions))
    out: dict = {
        "steps": {},
        "references": refs,
        "seeds": cfg.train.seeds,
        "n_maps": len(tasks),
        "recipe_steps": config.load("cpu").train.steps,
        "train_steps": cfg.train.steps,
    }
    for step, g in df.groupby("step"):
        row = {
            "responsiveness": _t(g["responsiveness"], cfg.eval.ci),
            "p_rush_long": _t(g["p_rush_long"], cfg.eval.ci),
        }
        row["success"] = {f: _t([s[f] for s in g["success"]], cfg.eval.ci) for f in g["success"].iloc[0]}
        out["steps"][str(int(step))] = row
    return out


def _t(values, ci: float) -> dict:
    v = np.asarray(list(values), float)
    if v.size < 2:
        return {"mean": float(v.mean()), "low": float("nan"), "high": float("nan"), "n": int(v.size)}
    iv = stats.paired_t_interval(v, np.zeros_like(v), ci)
    return {"mean": float(v.mean()), "low": float(iv["low"]), "high": float(iv["high"]), "n": int(v.size)}


def figure(m: dict) -> plt.Figure:
    """Responsiveness and success at 100 % of T_max against RL steps, each with its interval over seeds."""
    steps = sorted(int(s) for s in m["steps"])
    with plots.style():
        return _draw(m, steps)


def _draw(m: dict, steps: list[int]) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (key, label) in zip(
        axes,
        (("responsiveness", "opening responsiveness (optimum 2)"), ("success", "doorway success at T_max")),
        strict=True,
    ):
        vals = [
            m["steps"][str(s)][key] if key != "success" else m["steps"][str(s)]["success"]["1"] for s in steps
        ]
        ax.plot(
            steps,
            [v["mean"] for v in vals],
            marker="o",
            color=plots.PALETTE["budgetmix"],
            label="BudgetMix (mean of seeds)",
        )
        ax.fill_between(
            steps,
            [v["low"] for v in vals],
            [v["high"] for v in vals],
            alpha=0.2,
            color=plots.PALETTE["budgetmix"],
        )
        if key == "success":
            ax.axhline(m["references"]["optimum"]["1"], color="black", ls="--", label="optimum")
            ax.axhline(
                m["references"]["rush (blind for the mix)"]["1"],
                color=plots.PALETTE["ppo"],
                ls="-.",
                label="always rush",
            )
        else:
            ax.axhline(2.0, color="black", ls="--", label="optimum")
            ax.axhline(0.0, color="grey", ls=":", label="budget-blind")
        ax.axvline(m["recipe_steps"], color="grey", lw=0.8)
        ax.set_xlabel("RL steps")
        ax.set_ylabel(label)
        ax.legend(fontsize=plots.MIN_FONT)
    fig.suptitle("BudgetMix on doorway maps against RL compute (95 % t-intervals over seeds)")
    fig.tight_layout()
    return fig


def findings(m: dict) -> list[str]:
    """What the curve shows, each number with its t-interval over seeds; "reads" needs the interval of the final
    step's responsiveness to lie above 0.1 (a twentieth of the optimum's 2)."""
    last, base = m["steps"][str(m["train_steps"])], m["steps"]["0"]
    recipe = m["steps"].get(str(m["recipe_steps"]))
    r = last["responsiveness"]
    reads = r["low"] > 0.1
    return [
        f"- **Compute curve** (BudgetMix, seeds {m['seeds']}, up to {m['train_steps']} RL steps, "
        f"{m['train_steps'] // m['recipe_steps']}x the recipe; {m['n_maps']} doorway test maps; t-intervals over "
        f"seeds): opening responsiveness {fmt_iv(base['responsiveness'], 3)} at the base"
        + (f", {fmt_iv(recipe['responsiveness'], 3)} at {m['recipe_steps']} steps" if recipe else "")
        + f" and {fmt_iv(r, 3)} at {m['train_steps']} (optimum 2). P(rush) with more than h* turns left, where the "
        f"optimum presses, {fmt_iv(base['p_rush_long'])} at the base and {fmt_iv(last['p_rush_long'])} at "
        f"{m['train_steps']}; success at T_max {fmt_iv(base['success']['1'])} -> {fmt_iv(last['success']['1'])}, "
        f"against always-rush {m['references']['rush (blind for the mix)']['1']:.3f} and the optimum "
        f"{m['references']['optimum']['1']:.3f}.",
        "  "
        + (
            "More compute teaches BudgetMix to read its budget on doorway maps."
            if reads
            else f"{m['train_steps'] // m['recipe_steps']} times the recipe's compute does not teach BudgetMix to read "
            "its budget on doorway maps: it moves toward rushing at every budget alike (a budget-blind shift), while "
            "the supervised control of notebook 02 reads it."
        ),
    ]


def fmt_iv(v: dict, digits: int = 2) -> str:
    """A mean with its interval."""
    return fmt.estimate(v["mean"], [v["low"], v["high"]], digits=digits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=PROFILE)
    args = parser.parse_args(argv)
    cfg = config.load(args.profile)
    out = store.open_run(cfg.results_name, NAME, cfg, {"profile": args.profile})
    train.train_runs(cfg, [(MODE, s) for s in cfg.train.seeds])
    records = out.records("curve_records")
    done = {(r["seed"], r["step"]) for r in records.read()}
    todo = [(s, step) for step in checkpoints(cfg) for s in cfg.train.seeds if (s, step) not in done]
    for seed, step in bar(todo, desc="compute curve"):
        records.append(measure(cfg, seed, step))
    m = summary(cfg, records.read())
    rows = [
        {
            "step": int(s),
            "responsiveness": v["responsiveness"]["mean"],
            "low": v["responsiveness"]["low"],
            "high": v["responsiveness"]["high"],
            **{f"success_{f}": x["mean"] for f, x in v["success"].items()},
        }
        for s, v in m["steps"].items()
    ]
    out.write_table("budget_curve", pd.DataFrame(rows).sort_values("step"))
    out.save_figure(figure(m), "budget_curve")
    out.write_metrics(m)
    out.write_manifest()
    print("\n".join(findings(m)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
