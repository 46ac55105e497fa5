"""Step-level probing: states taken from recorded trajectories, replayed exactly, and actions scored there.

A `ProbeState` is an intermediate state of a recorded trajectory kept as task + budget + seed + action prefix
(so the environment replays to it exactly) together with the token ids the policy saw at that point (the
conversation so far, ending with the generation prompt of turn t). At a state, a policy samples actions and the
environment's oracle (`Env.step_quality`: normalised Q* on FrozenLake) scores each without changing the state.

R_single, the step-level reward tracked during training, is the mean quality of actions the current policy
samples at a fixed pool of such states drawn once from base-model trajectories on training maps.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from helpers.envs import make
from helpers.envs.base import Env, Task
from helpers.policy import Generation, Policy, Sampling
from helpers.rollout import Trajectory


@dataclass
class ProbeState:
    """Turn `t` of a recorded trajectory: replay `actions` (the first t actions) from reset(task, budget, seed)."""

    task: dict
    env: str
    budget: int
    seed: int
    actions: list[str]
    prefix_ids: list[int]
    source: str  # which policy's trajectory the state came from
    trajectory_success: bool = False

    @property
    def t(self) -> int:
        return len(self.actions)

    @property
    def depth(self) -> float:
        """Normalised depth d_t = t / T_max."""
        return self.t / Task.from_dict(self.task).t_max

    @property
    def key(self) -> tuple:
        return (self.task["task_id"], self.budget, tuple(self.actions))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ProbeState:
        return cls(**d)

    def replay(self, env_kwargs: dict | None = None) -> Env:
        """A fresh environment advanced to this state."""
        env = make(self.env, **(env_kwargs or {}))
        env.reset(Task.from_dict(self.task), self.budget, seed=self.seed)
        for a in self.actions:
            env.step(a)
        return env


def states_of(traj: Trajectory, task: Task, source: str) -> list[ProbeState]:
    """Every state of a trajectory at which the policy acted (turns 0 .. n_turns - 1)."""
    spans = traj.turn_spans()
    out = []
    for t, (start, _) in enumerate(spans):
        out.append(
            ProbeState(
                task=task.to_dict(),
                env=traj.env,
                budget=traj.budget,
                seed=traj.seed,
                actions=[turn["action"] for turn in traj.turns[:t]],
                prefix_ids=traj.token_ids[:start],
                source=source,
                trajectory_success=traj.success,
            )
        )
    return out


def sample_states(
    trajs: list[Trajectory], tasks: dict[str, Task], n: int, rng: np.random.Generator, source: str,
    exclude: set | None = None,
) -> list[ProbeState]:  # fmt: skip
    """`n` distinct states drawn uniformly from all states of `trajs` (duplicates by task+actions removed)."""
    seen = set(exclude or ())
    pool = []
    for tr in trajs:
        for s in states_of(tr, tasks[tr.task_id], source):
            if s.key not in seen:
                seen.add(s.key)
                pool.append(s)
    if len(pool) < n:
        raise ValueError(
            f"only {len(pool)} distinct states available from {len(trajs)} trajectories, need {n}"
        )
    idx = rng.choice(len(pool), size=n, replace=False)
    return [pool[i] for i in sorted(idx)]


def sample_actions(
    policy: Policy, states: list[ProbeState], k: int, sampling: Sampling
) -> list[list[Generation]]:
    """`k` actions per state from `policy`, in one batched call."""
    prompts = [s.prefix_ids for s in states for _ in range(k)]
    gens = policy.generate(prompts, sampling)
    return [gens[i * k : (i + 1) * k] for i in range(len(states))]


def score_actions(
    states: list[ProbeState], actions: list[list[str]], env_kwargs: dict | None = None
) -> np.ndarray:
    """Quality [n_states, k] of each action at its state (the environment's oracle)."""
    out = np.zeros((len(states), max((len(a) for a in actions), default=0)))
    for i, (s, acts) in enumerate(zip(states, actions, strict=True)):
        env = s.replay(env_kwargs)
        for j, a in enumerate(acts):
            q = env.step_quality(a)
            out[i, j] = np.nan if q is None else q
    return out


def state_quality(policy: Policy, states: list[ProbeState], k: int, sampling: Sampling) -> np.ndarray:
    """Quality [n_states, k] of `k` actions sampled by `policy` at each state."""
    gens = sample_actions(policy, states, k, sampling)
    return score_actions(states, [[g.text for g in row] for row in gens])


def r_single(policy: Policy, states: list[ProbeState], k: int, sampling: Sampling) -> float:
    """R_single: mean step quality of the policy's sampled actions over the probe pool."""
    return float(np.nanmean(state_quality(policy, states, k, sampling)))


# ------------------------------------------------------------------------------------ matched-state pools


def matched_pool(
    trajs_base: list[Trajectory], trajs_rl: list[Trajectory], tasks: dict[str, Task], n: int, seed: int
) -> list[ProbeState]:
    """`n` distinct states, half drawn from base trajectories and half from RL trajectories (seeded), so that a
    comparison is not driven by which states each policy happens to visit."""
    rng = np.random.default_rng(seed)
    half = n // 2
    base = sample_states(trajs_base, tasks, half, rng, "base")
    rl = sample_states(trajs_rl, tasks, n - half, rng, "rl", exclude={s.key for s in base})
    return base + rl


def compare_policies(states: list[ProbeState], q_base: np.ndarray, q_rl: np.ndarray) -> pd.DataFrame:
    """Per state: source, turn t, depth d_t, mean quality of each policy's G actions, and RL minus base."""
    return pd.DataFrame(
        {
            "task_id": [s.task["task_id"] for s in states],
            "source": [s.source for s in states],
            "t": [s.t for s in states],
            "depth": [s.depth for s in states],
            "base": np.nanmean(q_base, axis=1),
            "rl": np.nanmean(q_rl, axis=1),
        }
    ).assign(diff=lambda d: d["rl"] - d["base"])


def win_summary(df: pd.DataFrame, tol: float = 1e-9) -> dict:
    """Fraction of states where RL's mean quality is higher, tied, lower; the means; paired tests."""
    from scipy.stats import ttest_rel, wilcoxon

    diff = df["diff"].to_numpy()
    nonzero = np.abs(diff) > tol
    out = {
        "n_states": len(df),
        "rl_better": float(np.mean(diff > tol)),
        "tie": float(np.mean(~nonzero)),
        "base_better": float(np.mean(diff < -tol)),
        "rl_better_among_untied": float(np.mean(diff[nonzero] > 0)) if nonzero.any() else float("nan"),
        "mean_quality_base": float(df["base"].mean()),
        "mean_quality_rl": float(df["rl"].mean()),
        "mean_diff": float(diff.mean()),
    }
    out["wilcoxon_p"] = float(wilcoxon(diff[nonzero]).pvalue) if nonzero.sum() >= 1 else 1.0
    out["paired_t_p"] = float(ttest_rel(df["rl"], df["base"]).pvalue) if nonzero.any() else 1.0
    return out


def by_depth(df: pd.DataFrame, bins: list[float]) -> pd.DataFrame:
    """`win_summary` within bins of normalised depth d_t = t / T_max."""
    labels = [f"[{a:.2f}, {b:.2f})" for a, b in itertools.pairwise(bins)]
    binned = pd.cut(df["depth"], bins=bins, labels=labels, right=False, include_lowest=True)
    rows = []
    for label, g in df.groupby(binned, observed=True):
        s = win_summary(g)
        rows.append({"depth_bin": str(label), **{k: s[k] for k in ("n_states", "rl_better", "tie", "base_better",
                                                                    "mean_quality_base", "mean_quality_rl")}})  # fmt: skip
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------- error states


def inject_error(state: ProbeState, chat, seed: int) -> ProbeState | None:
    """The error state one step after `state`: an incorrect action is injected there and applied.

    The rule: the candidates are the environment's `incorrect_actions()` at the state (on FrozenLake, moves whose
    Q* is below the best that do not end the episode, so something is left to recover from); one is chosen
    uniformly with a generator seeded by (seed, task id, t). Returns None where no candidate exists or the
    episode would end. The new state's token prefix is the old one plus the injected reply and the observation,
    encoded exactly as a rollout would encode them.
    """
    import hashlib

    env = state.replay()
    candidates = env.incorrect_actions()
    if not candidates:
        return None
    key = int.from_bytes(
        hashlib.sha256(f"{seed}|{state.task['task_id']}|{state.t}".encode()).digest()[:4], "little"
    )
    action = candidates[int(np.random.default_rng(key).integers(len(candidates)))]
    result = env.step(action)
    if env.done:
        return None
    prefix = list(state.prefix_ids) + chat.action_ids(action) + chat.observation_ids(result.observation)
    return ProbeState(
        task=state.task, env=state.env, budget=state.budget, seed=state.seed, actions=[*state.actions, action],
        prefix_ids=prefix, source=state.source, trajectory_success=state.trajectory_success,
    )  # fmt: skip


def error_pool(states: list[ProbeState], chat, seed: int, n: int) -> list[ProbeState]:
    """Up to `n` error states, injected at `states` in order (states without a candidate are skipped)."""
    out = []
    for s in states:
        e = inject_error(s, chat, seed)
        if e is not None:
            out.append(e)
        if len(out) == n:
            break
    return out
