"""Evaluation grids: models x turn budgets, n samples per task, one batched rollout per (model, budget).

Each finished (model, budget) cell appends one compact record per trajectory (model, task, budget, sample,
success, reward, turns, invalid turns) to a `helpers.store.Records` file as soon as it is done, so an interrupted
grid resumes at the first missing cell and a finished one costs nothing to re-plot. Full trajectories (token
ids, log-probs) can be kept in a second record file for the likelihood analysis.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers import store
from helpers.envs.base import Task
from helpers.policy import HFPolicy, Policy, Sampling
from helpers.progress import bar
from helpers.rollout import Trajectory, rollout


def trajectory_record(tr: Trajectory) -> dict:
    """The compact per-trajectory record the tables are built from."""
    return {
        "model": tr.model, "task_id": tr.task_id, "budget": tr.budget, "t_max": tr.t_max,
        "fraction": tr.budget / tr.t_max, "sample": tr.sample, "success": bool(tr.success), "reward": tr.reward,
        "turns": tr.n_turns, "invalid_turns": sum(t["invalid"] for t in tr.turns), "exhausted": tr.exhausted,
    }  # fmt: skip


def evaluate_grid(
    models: dict[str, str | Path | Policy],
    env_name: str,
    tasks: list[Task],
    budgets: list[int],
    n_samples: int,
    sampling: Sampling,
    seed: int,
    records: store.Records,
    trajectories: store.Records | None = None,
    device: str = "cpu",
    max_batch: int = 512,
) -> pd.DataFrame:
    """Success records for every (model, budget) cell; cells already in `records` are reused, not re-run.

    The same tasks, samples and seeds are used for every model and budget, so comparisons are paired.
    `models` maps a name to a model path or a loaded policy. A cell is rolled out in batches of at most
    `max_batch` trajectories (whole tasks) to bound memory.
    """
    done = records.keys(lambda r: (r["model"], r["budget"]))
    cells = [(name, T) for name in models for T in budgets]
    todo = [c for c in cells if c not in done]
    loaded: dict[str, Policy] = {}
    for name, T in bar(todo, desc="evaluation cells", leave=False):
        if name not in loaded:
            m = models[name]
            loaded[name] = (
                m if hasattr(m, "generate") else HFPolicy.from_pretrained(m, device=device, name=name)
            )
        per_call = max(1, max_batch // n_samples)
        trajs = []
        for i in range(0, len(tasks), per_call):
            trajs += rollout(loaded[name], env_name, tasks[i : i + per_call], T, n_samples, sampling, seed=seed,
                             step_quality=False, model_name=name)  # fmt: skip
        if trajectories is not None:
            trajectories.append([t.to_dict() for t in trajs])
        records.append([trajectory_record(t) for t in trajs])  # written last: a cell counts once complete
    df = pd.DataFrame(records.read())
    wanted = {t.task_id for t in tasks}
    return df[
        df["model"].isin(list(models)) & df["budget"].isin(budgets) & df["task_id"].isin(wanted)
    ].reset_index(drop=True)


def success_by_task(df: pd.DataFrame) -> pd.DataFrame:
    """Per (model, budget, task): success rate over the samples."""
    return df.groupby(["model", "budget", "fraction", "task_id"], as_index=False)["success"].mean()


def budget_table(df: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Success per (model, budget) as the mean over tasks of per-task success, with a bootstrap CI over tasks."""
    from helpers.metrics import bootstrap_ci

    rows = []
    for (model, budget, fraction), g in success_by_task(df).groupby(
        ["model", "budget", "fraction"], sort=False
    ):
        low, high = bootstrap_ci(g["success"].to_numpy(), n_boot=n_boot, ci=ci, seed=seed)
        rows.append({"model": model, "budget": budget, "fraction": fraction, "success": g["success"].mean(),
                     "low": low, "high": high, "n_tasks": len(g)})  # fmt: skip
    return pd.DataFrame(rows)


def gain_table(
    df: pd.DataFrame, a: str, b: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Success of model `a` minus model `b` per budget, in percentage points, with a paired bootstrap CI over
    tasks (both models were evaluated on the same tasks and samples)."""
    from helpers.metrics import paired_bootstrap_diff

    per_task = success_by_task(df).pivot_table(index=["budget", "fraction", "task_id"], columns="model",
                                               values="success")  # fmt: skip
    rows = []
    for (budget, fraction), g in per_task.groupby(level=["budget", "fraction"]):
        diff, low, high = paired_bootstrap_diff(
            g[a].to_numpy(), g[b].to_numpy(), n_boot=n_boot, ci=ci, seed=seed
        )
        rows.append({"budget": budget, "fraction": fraction, "gain_points": 100 * diff, "low": 100 * low,
                     "high": 100 * high})  # fmt: skip
    return pd.DataFrame(rows)


def recorded_trajectories(
    profile: str, name: str, model: str | Path, env_name: str, tasks: list[Task], budget: int, n_samples: int,
    sampling: Sampling, seed: int, device: str = "cpu", step_quality: bool = True,
) -> list[Trajectory]:  # fmt: skip
    """Full trajectories of one model on `tasks` (rolled out once, then read back from the store).

    The analyses of notebooks 04-06 share them; the file name carries a hash of everything that determines
    them, so a changed model or setting records anew.
    """
    import hashlib
    import json

    recipe = json.dumps(
        [str(model), [t.task_id for t in tasks], budget, n_samples, repr(sampling), seed, step_quality]
    )
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:10]
    records = store.Records(store.profile_dir(profile) / "trajectories" / f"{name}-{digest}.jsonl")
    existing = [Trajectory.from_dict(d) for d in records]
    if len(existing) == len(tasks) * n_samples:
        return existing
    records.path.unlink(missing_ok=True)
    policy = HFPolicy.from_pretrained(model, device=device, name=name)
    trajs = rollout(policy, env_name, tasks, budget, n_samples, sampling, seed=seed, step_quality=step_quality,
                    model_name=name)  # fmt: skip
    records.append([t.to_dict() for t in trajs])
    return trajs
