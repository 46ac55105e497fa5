"""Evaluation grids: models x turn budgets, n samples per task, one batched rollout per (model, budget).

Each finished (model, budget) cell appends one compact record per trajectory (model, task, budget, sample,
success, reward, turns, invalid turns) to a `helpers.store.Records` file as soon as it is done, so an interrupted
grid resumes at the first missing cell and a finished one costs nothing to re-plot. Full trajectories (token
ids, log-probs) can be kept in a second record file for the likelihood analysis.

Models are loaded one at a time (`helpers.agents`): each model's cells run together, then it is closed, and a model
whose cells are all in the records is never loaded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import parallel, store
from helpers.agents import Agent, AgentLike, agent_id, opened, opened_on_demand
from helpers.envs.base import Task
from helpers.metrics import bootstrap_ci, paired_bootstrap_diff
from helpers.policy import Policy, Sampling
from helpers.progress import bar
from helpers.rollout import Trajectory, rollout

RECORD_KEYS = ("model", "task_id", "budget", "success")


def trajectory_record(tr: Trajectory) -> dict:
    """The compact per-trajectory record the tables are built from."""
    return {
        "model": tr.model,
        "task_id": tr.task_id,
        "budget": tr.budget,
        "t_max": tr.t_max,
        "fraction": tr.budget / tr.t_max,
        "sample": tr.sample,
        "success": bool(tr.success),
        "reward": tr.reward,
        "turns": tr.n_turns,
        "invalid_turns": sum(t["invalid"] for t in tr.turns),
        "exhausted": tr.exhausted,
    }


def evaluate_grid(
    models: dict[str, AgentLike],
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
    require_seed: bool = False,
    workers: int = 1,
) -> pd.DataFrame:
    """Success records for every (model, budget) cell; complete cells already in `records` are reused.

    Every record carries the evaluation `seed`; with `require_seed` a cell counts as done only if its records were
    drawn with this seed (records of another seed, or of none, are dropped and rolled out again): an analysis that
    gives each RL seed its own stream (`controls.by_seed`) never reuses a cell drawn on another stream.

    The same tasks, samples and seeds are used for every model and budget, so comparisons are paired.
    `models` maps a name to an `Agent` (loaded for its cells, then closed), a loaded policy (the caller's: used
    as it is) or a model path (loaded on `device` in float32, then closed). A cell is rolled out in batches of at
    most `max_batch` trajectories (whole tasks) to bound memory.

    Resume: a cell counts as done only when `records` holds all of its len(tasks) x n_samples records for the
    same agent (`agent_id`: model and temperature), so a changed model is evaluated anew and a cell cut short by
    a kill mid-append is dropped (the file is rewritten without it, atomically; records of other tasks stay) and
    rolled out again, to exactly the records an uninterrupted run writes. Records of a cell asked for that another
    agent or stream drew are dropped with it, so the frame returned holds this agent's and this stream's only.

    `workers` > 1 rolls out that many models at once, each in a worker process with one thread
    (`parallel.ordered_map`; `Agent`s only, a loaded policy stays here); the parent writes every cell, in the same
    order as one process does, so the records are the same (tested; the cpu series' records were byte for byte those
    of one process). The full trajectories' log-probs can differ in their last bits (one thread against the
    parent's). A model's cells then reach the file together, when the model is done.
    """
    if not tasks:
        raise ValueError(
            f"evaluate_grid on {env_name}: the task list is empty (check the split, n_tasks or the "
            "task source)"
        )
    if not models:
        raise ValueError("evaluate_grid: no models to evaluate")
    # one writer per records folder: a second sweep into the same records stops here (FolderBusy, naming this one)
    # before it computes anything; two at once would both append what is missing (duplicated records)
    records.claim()
    wanted = {t.task_id for t in tasks}
    ids = {name: agent_id(m) for name, m in models.items()}
    expected = len(tasks) * n_samples
    rows = records.read(require=RECORD_KEYS)

    def cell(r: dict) -> tuple:
        return (
            r["model"],
            r["budget"],
            r.get("agent_id"),
            r.get("seed", seed) if not require_seed else r.get("seed"),
        )

    counts: dict[tuple, int] = {}
    for r in rows:
        if r["task_id"] in wanted:
            counts[cell(r)] = counts.get(cell(r), 0) + 1
    done = {(m, T) for (m, T, a, sd), n in counts.items() if n == expected and ids.get(m) == a and sd == seed}
    # records of the cells asked for that are not a done cell's own: cut short, made by another model, or drawn on
    # another stream (left by an earlier layout of the analysis)
    stale = {
        (m, T, a, sd)
        for m, T, a, sd in counts
        if m in models and T in budgets and ((m, T) not in done or (a, sd) != (ids[m], seed))
    }
    # rewrite the file without them: only these tasks' records at the budgets asked for (cells of other tasks at the
    # same budget, and of other budgets on another stream, share the file: `evaluate_cells`, `copy_cells`)
    if stale:
        keep = [r for r in rows if r["task_id"] not in wanted or cell(r) not in stale]
        records, rows = store.Records.rewrite(records.path, keep), keep
    # model -> its budgets still to roll out, in the caller's order (a model with none is never loaded)
    todo = {name: [T for T in budgets if (name, T) not in done] for name in models}
    todo = {name: Ts for name, Ts in todo.items() if Ts}
    progress = bar(total=sum(map(len, todo.values())), desc="evaluation cells", leave=False)
    per_call = max(1, max_batch // n_samples)
    keep = trajectories is not None

    def write(name: str, recs: list[dict], full: list[dict] | None) -> None:
        if full is not None:
            trajectories.append(full)
        records.append([{**r, "agent_id": ids[name], "seed": seed} for r in recs])
        progress.update(1)

    args = (env_name, tasks, n_samples, sampling, seed, per_call, keep)
    if workers > 1 and len(todo) > 1 and all(isinstance(models[n], Agent) for n in todo):
        jobs = [(models[name], name, device, Ts, *args) for name, Ts in todo.items()]
        for name, cells in zip(todo, parallel.ordered_map(_agent_cells, jobs, workers), strict=True):
            for _, recs, full in cells:
                write(name, recs, full)
    else:
        for name, todo_budgets in todo.items():
            with opened(models[name], name, device) as policy:  # one model at a time
                for _, recs, full in _cells(policy, name, todo_budgets, *args):
                    write(name, recs, full)  # each cell as soon as it is done
    progress.close()
    df = pd.DataFrame(records.read(require=RECORD_KEYS) if todo else rows)  # a finished grid: as read above
    return df[
        df["model"].isin(list(models)) & df["budget"].isin(budgets) & df["task_id"].isin(wanted)
    ].reset_index(drop=True)


def _cells(
    policy: Policy,
    name: str,
    budgets: list[int],
    env_name: str,
    tasks: list[Task],
    n_samples: int,
    sampling: Sampling,
    seed: int,
    per_call: int,
    keep: bool,
):
    """Roll out one model's cells, one budget after another: yields (budget, compact records, the full trajectories
    or None), each in batches of `per_call` tasks."""
    for T in budgets:
        trajs = []
        for i in range(0, len(tasks), per_call):
            trajs += rollout(
                policy,
                env_name,
                tasks[i : i + per_call],
                T,
                n_samples,
                sampling,
                seed=seed,
                step_quality=False,
                model_name=name,
            )
        yield T, [trajectory_record(t) for t in trajs], [t.to_dict() for t in trajs] if keep else None


def _agent_cells(agent: Agent, name: str, device: str, budgets: list[int], *args) -> list[tuple]:
    """`_cells` of an agent loaded here and closed after (what a worker process of `evaluate_grid` runs)."""
    with opened(agent, name, device) as policy:
        return list(_cells(policy, name, budgets, *args))


def evaluate_cells(
    models: dict[str, AgentLike],
    env_name: str,
    cells: dict[Hashable, tuple[list[Task], int]],
    n_samples: int,
    sampling: Sampling,
    seed: int,
    records: store.Records,
    **kw,
) -> dict[Hashable, pd.DataFrame]:
    """`evaluate_grid` for cells of (tasks, budget) with their own tasks each (the fractions of T_max of tasks whose
    T_max differ), each model loaded once per set of tasks rather than once per cell: cells of the same tasks
    form one grid over their budgets. Returns each cell's records, in the order of `cells`, as `evaluate_grid` of
    that cell alone returns them."""
    groups: dict[tuple[str, ...], list[Hashable]] = {}
    for key, (ts, _) in cells.items():
        groups.setdefault(tuple(t.task_id for t in ts), []).append(key)
    frames: dict[Hashable, pd.DataFrame] = {}
    for keys in groups.values():
        ts = cells[keys[0]][0]
        budgets = list(dict.fromkeys(cells[k][1] for k in keys))
        df = evaluate_grid(models, env_name, ts, budgets, n_samples, sampling, seed, records, **kw)
        for k in keys:
            frames[k] = df[df["budget"] == cells[k][1]].reset_index(drop=True)
    return {k: frames[k] for k in cells}


def copy_cells(
    models: dict[str, AgentLike],
    seeds: dict[str, int],
    cells: dict[Hashable, tuple[list[Task], list[Task], int]],
    n_samples: int,
    source: Path,
    target: store.Records,
) -> dict[str, list[Hashable]]:
    """Copy complete cells of another evaluation into `target`: for each cell key -> (the source's tasks, the tasks
    wanted, a subset of them, budget) and each model, the source's records of the wanted tasks, where the source holds
    the whole cell as `evaluate_grid` writes it (all its tasks x `n_samples`, the same agent, drawn with the model's
    seed in `seeds`).

    Cells complete in `target` already are left alone; an incomplete one there (a kill mid-append) is dropped first.
    After the copy, `evaluate_grid` on `target` with the wanted tasks, the budget and the seed reads these cells
    instead of rolling them out. `source` is a records file, only read (a missing one gives nothing, and no folder is
    made for it). Returns the cells the source could not give, by model (loading nothing)."""
    ids = {name: agent_id(m) for name, m in models.items()}
    keys_at: dict[int, list[Hashable]] = {}
    for key, (_, _, b) in cells.items():
        keys_at.setdefault(b, []).append(key)
    wanted = {key: {t.task_id for t in ts} for key, (_, ts, _) in cells.items()}
    whole = {key: {t.task_id for t in ts} for key, (ts, _, _) in cells.items()}

    def by_cell(rows: list[dict], tasks: dict[Hashable, set]) -> dict[tuple[str, Hashable], list[dict]]:
        out: dict[tuple[str, Hashable], list[dict]] = {(name, key): [] for name in models for key in cells}
        for r in rows:
            name = r["model"]
            if name in ids and r.get("seed") == seeds[name] and r.get("agent_id") == ids[name]:
                for key in keys_at.get(r["budget"], ()):
                    if r["task_id"] in tasks[key]:
                        out[(name, key)].append(r)
        return out

    have = by_cell(target.read(require=RECORD_KEYS), wanted)
    todo = [cell for cell, rows in have.items() if len(rows) != len(wanted[cell[1]]) * n_samples]
    torn = {(name, cells[key][2]): wanted[key] for name, key in todo if have[(name, key)]}
    if torn:  # a copy cut short: drop what it wrote of those cells
        rows = target.read(require=RECORD_KEYS)
        target = store.Records.rewrite(
            target.path, [r for r in rows if r["task_id"] not in torn.get((r["model"], r["budget"]), ())]
        )
    missing: dict[str, list[Hashable]] = {}
    if todo:
        got = by_cell(store.Records(source).read(require=RECORD_KEYS) if source.exists() else [], whole)
        copied: dict[int, dict] = {}  # by identity: a record of two cells (the same budget) is copied once
        for name, key in todo:
            if len(got[(name, key)]) == len(whole[key]) * n_samples:
                copied.update({id(r): r for r in got[(name, key)] if r["task_id"] in wanted[key]})
            else:
                missing.setdefault(name, []).append(key)
        target.append(list(copied.values()))
    return missing


def success_by_task(df: pd.DataFrame) -> pd.DataFrame:
    """Per (model, budget, task): success rate over the samples."""
    return df.groupby(["model", "budget", "fraction", "task_id"], as_index=False)["success"].mean()


def budget_table(df: pd.DataFrame, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Success per (model, budget) as the mean over tasks of per-task success, with a bootstrap CI over tasks."""
    rows = []
    for (model, budget, fraction), g in success_by_task(df).groupby(
        ["model", "budget", "fraction"], sort=False
    ):
        low, high = bootstrap_ci(g["success"].to_numpy(), n_boot=n_boot, ci=ci, seed=seed)
        rows.append(
            {
                "model": model,
                "budget": budget,
                "fraction": fraction,
                "success": g["success"].mean(),
                "low": low,
                "high": high,
                "n_tasks": len(g),
            }
        )
    return pd.DataFrame(rows)


def gain_table(
    df: pd.DataFrame, a: str, b: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Success of model `a` minus model `b` per budget, in percentage points, with a paired bootstrap CI over
    tasks (both models were evaluated on the same tasks and samples)."""
    per_task = success_by_task(df).pivot_table(
        index=["budget", "fraction", "task_id"], columns="model", values="success"
    )
    rows = []
    for (budget, fraction), g in per_task.groupby(level=["budget", "fraction"]):
        diff, low, high = paired_bootstrap_diff(
            g[a].to_numpy(), g[b].to_numpy(), n_boot=n_boot, ci=ci, seed=seed
        )
        rows.append(
            {
                "budget": budget,
                "fraction": fraction,
                "gain_points": 100 * diff,
                "low": 100 * low,
                "high": 100 * high,
            }
        )
    return pd.DataFrame(rows)


def recorded_trajectories(
    profile: str,
    name: str,
    agent: AgentLike,
    env_name: str,
    tasks: list[Task],
    budget: int | list[int] | None,
    n_samples: int,
    sampling: Sampling,
    seed: int,
    step_quality: bool = True,
) -> list[Trajectory]:
    """Full trajectories of one agent on `tasks` (rolled out once, then read back from the store).

    `budget`: one for every task, one per task, or None for each task's own T_max (`Task.t_max`). The analyses of
    notebooks 04-06 share them; the file name carries a hash of everything that determines them (the agent's model
    and temperature, tasks, budgets, samples, sampling, seed), so a changed model or setting records anew; a file
    cut short by a kill is recorded again. An `Agent` is loaded only to record (and closed after).
    """
    budgets = [t.t_max for t in tasks] if budget is None else budget
    if not isinstance(budgets, int) and len(set(budgets)) == 1:
        budgets = int(budgets[0])  # one budget for all: the recipe (and file name) of a single int
    recipe = json.dumps(
        [agent_id(agent), [t.task_id for t in tasks], budgets, n_samples, repr(sampling), seed, step_quality]
    )
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:10]
    path = store.profile_dir(profile) / "trajectories" / f"{name}-{digest}.jsonl"
    existing = [Trajectory.from_dict(d) for d in store.Records(path)]
    if len(existing) == len(tasks) * n_samples:
        return existing
    with opened(agent, name) as policy:
        trajs = rollout(
            policy,
            env_name,
            tasks,
            budgets,
            n_samples,
            sampling,
            seed=seed,
            step_quality=step_quality,
            model_name=name,
        )
    store.Records.rewrite(path, [t.to_dict() for t in trajs])
    return trajs


def _per_state_path(profile: str, name: str, agent: AgentLike, states: list, recipe: list):
    """Where `recorded_per_state` keeps one agent's numbers: a hash of the agent, its own name, the states and
    `recipe`."""
    own = getattr(agent, "name", None)
    key = json.dumps([agent_id(agent), own, [s.to_dict() for s in states], recipe], default=repr)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return store.profile_dir(profile) / "probes" / f"{name}-{digest}.json"


def recorded_per_state(
    profile: str, name: str, agent: AgentLike, states: list, recipe: list, compute: Callable[[], np.ndarray]
) -> np.ndarray:
    """Per-state numbers of one agent at probe states (e.g. the step qualities of its G actions, its continuation
    success), computed once by `compute` and then read back from the store, as `recorded_trajectories` does for
    trajectories. The file name carries a hash of what determines them: the agent (`agent_id` and its name, which
    seeds its stream: `probing.policy_seed`), the states and `recipe` (the caller's settings: G, sampling, seed).
    Run All on committed results reads them instead of sampling again; floats come back exactly (JSON keeps every
    double)."""
    path = _per_state_path(profile, name, agent, states, recipe)
    if path.exists():
        return np.asarray(json.loads(path.read_text())["values"], dtype=float)
    values = np.asarray(compute(), dtype=float)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_atomic(
        path,
        json.dumps(
            {
                "agent": agent_id(agent),
                "name": getattr(agent, "name", None),
                "n_states": len(states),
                "values": values.tolist(),
            }
        ),
    )
    return values


@dataclass(frozen=True, eq=False)
class Play:
    """One agent's probe at a pool of states, recorded by `recorded_per_state` under `name` with `recipe`: its
    per-state numbers are `fn(policy, *args)`. `fn` is a module-level function (it may run in a worker process)."""

    key: Hashable
    name: str
    states: list
    recipe: list
    fn: Callable
    args: tuple = ()


def recorded_plays(
    profile: str, agents: dict[str, AgentLike], plays: dict[str, list[Play]], workers: int = 1
) -> dict[Hashable, np.ndarray]:
    """Every play's per-state numbers (`recorded_per_state`), keyed by `Play.key`; `plays` maps an agent's name to
    what it plays. Each agent is loaded once, and only if one of its plays is not recorded yet. With `workers` > 1
    the agents with something to compute run that many at a time, each in a worker process with one thread
    (`parallel.ordered_map`; `Agent`s only), and this process writes their records in the order one process
    does. Every play draws from its own stream and a forward pass gives the same bits on one thread as on two, so
    the numbers are those one process computes: the 82 probe files of a cpu series run (02's swaps, 04, 05) were
    byte for byte the same computed again in one process of two threads (tests/test_evaluate.py checks it on
    smoke)."""
    todo = {
        a: [p for p in ps if not _per_state_path(profile, p.name, agents[a], p.states, p.recipe).exists()]
        for a, ps in plays.items()
    }
    todo = {a: ps for a, ps in todo.items() if ps}
    computed: dict[Hashable, np.ndarray] = {}
    if workers > 1 and len(todo) > 1 and all(isinstance(agents[a], Agent) for a in todo):
        jobs = [(agents[a], ps) for a, ps in todo.items()]
        for ps, values in zip(todo.values(), parallel.ordered_map(_play_values, jobs, workers), strict=True):
            computed.update({p.key: v for p, v in zip(ps, values, strict=True)})
    out: dict[Hashable, np.ndarray] = {}
    for a, ps in plays.items():
        with opened_on_demand(agents[a], a) as policy:
            for p in ps:
                compute = (
                    (lambda p=p: computed[p.key])
                    if p.key in computed
                    else (lambda p=p: p.fn(policy(), *p.args))
                )
                out[p.key] = recorded_per_state(profile, p.name, agents[a], p.states, p.recipe, compute)
    return out


def _play_values(agent: Agent, plays: list[Play]) -> list[np.ndarray]:
    """The numbers of `plays` by `agent`, loaded here and closed after (what a worker of `recorded_plays` runs)."""
    with opened(agent) as policy:
        return [np.asarray(p.fn(policy, *p.args), dtype=float) for p in plays]


class RecordedScores:
    """An agent's teacher-forced log-probs (`Policy.score`), computed once and then read back from the store, as
    `recorded_per_state` does for probe numbers: each call's log-probs go to `probes/<name>-<hash>.npz`, the hash over
    the agent (`agent_id`) and every token id scored. So Run All on committed results scores nothing, and scoring the
    same trajectories again (notebook 06's base on the base's trajectories, once per RL seed) reads them back.

    `get()` gives the agent's policy (`helpers.agents.opened_on_demand`: loaded on its first call); it is called only
    for a score that is not recorded yet, or for anything else asked of this object (its tokenizer, say). Log-probs
    are stored in float32 when that keeps every value exactly (a float32 model's are), else in float64: they come
    back bit for bit."""

    def __init__(self, profile: str, name: str, agent: AgentLike, get: Callable[[], Policy]):
        self.profile, self.name, self.agent, self._get = profile, name, agent, get

    def path(self, prompts: list[list[int]], continuations: list[list[int]]):
        """Where the log-probs of this call are recorded."""
        key = json.dumps([agent_id(self.agent), prompts, continuations])
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return store.profile_dir(self.profile) / "probes" / f"{self.name}-{digest}.npz"

    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """The policy's `score`, recorded."""
        path = self.path(prompt_token_ids, continuation_token_ids)
        if path.exists():
            with np.load(path) as f:
                values, lengths = f["values"].astype(float), f["lengths"]
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            return [values[b : b + n].tolist() for b, n in zip(starts, lengths, strict=True)]
        scores = self._get().score(prompt_token_ids, continuation_token_ids)
        flat = np.asarray([x for s in scores for x in s], dtype=float)
        narrow = flat.astype(np.float32)
        values = narrow if np.array_equal(narrow.astype(float), flat) else flat
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.tmp.npz")
        with store.cleaned_up(tmp, path):
            np.savez_compressed(
                tmp, values=values, lengths=np.asarray([len(s) for s in scores], dtype=np.int64)
            )
        tmp.replace(path)
        return scores

    def generate(self, *args, **kwargs):
        """The policy's `generate` (a recorded scorer is still a policy: `opened` passes it through)."""
        return self._get().generate(*args, **kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__") or attr in ("profile", "name", "agent", "_get"):
            raise AttributeError(attr)
        return getattr(self._get(), attr)
