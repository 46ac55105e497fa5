"""Step-level probing: states taken from recorded trajectories, replayed exactly, and actions scored there.

A `ProbeState` is an intermediate state of a recorded trajectory kept as task + budget + seed + action prefix
(so the environment replays to it exactly) together with the token ids the policy saw at that point (the
conversation so far, ending with the generation prompt of turn t). At a state, a policy samples actions and the
environment's step oracle (`Env.step_quality`) scores each without changing the state: normalised Q* on
FrozenLake, the fraction of unit tests a program passes on DeepCoder-MT. Environments without a step oracle
(`Env.step_oracle` False: BFCL, and InterCode-SQL, whose reward of the current result is not one; see
`helpers.envs.sql`) are not probed: `helpers.envs.step_oracle(name)` says so and why, and the error-state
functions refuse them. Depth is d_t = t / T_max with T_max the task's own (`Task.t_max`).

States where no action can still succeed (dead states: `Env.is_dead`; on FrozenLake max Q* = 0, where every valid
move scores the same; DeepCoder-MT has none while a turn is left) say nothing about a step's quality; they are
counted apart and left out of win rates and means. Two policies compared at the same states sample from
independent random streams (`policy_seed`).

Error states: the environment makes the error (`Env.error_action`, see `inject_error`), so the rule is the
environment's: on FrozenLake a worse move that does not end the episode, on DeepCoder-MT a failing program (one of
the base policy's own failing attempts on the task, else a mutation of the reference solution) followed by the
environment's feedback on it.

During training the kit tracks two step-level rewards (helpers.train): R_single on the policy's own states
(the quality of the actions it takes along its own trajectories) and `r_single` here, on a fixed pool of states
drawn once from base-model trajectories.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from helpers import stats
from helpers.envs import make, require_step_oracle
from helpers.envs.base import Env, Task
from helpers.metrics import nested_bootstrap
from helpers.policy import Generation, Policy, Sampling
from helpers.rollout import Trajectory, continue_from


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
    trajs: list[Trajectory],
    tasks: dict[str, Task],
    n: int,
    rng: np.random.Generator,
    source: str,
    exclude: set | None = None,
    at_most: bool = False,
) -> list[ProbeState]:
    """`n` distinct states drawn uniformly from all states of `trajs` (duplicates by task+actions removed); with
    `at_most`, all of them where fewer than `n` exist (else that is an error)."""
    seen = set(exclude or ())
    pool = []
    for tr in trajs:
        for s in states_of(tr, tasks[tr.task_id], source):
            if s.key not in seen:
                seen.add(s.key)
                pool.append(s)
    if at_most:
        n = min(n, len(pool))
    if len(pool) < n:
        raise ValueError(
            f"only {len(pool)} distinct states available from {len(trajs)} trajectories, need {n}"
        )
    idx = rng.choice(len(pool), size=n, replace=False)
    return [pool[i] for i in sorted(idx)]


# A pool's states are sampled in this many calls by prompt length (`sample_actions`) where the kit samples whole
# pools (the training monitor, notebooks 04 and 05): their prompts run from one turn to eight, and one call pads
# every state to the longest (issue 51: 0.32-0.37x the time of one call on the cpu probe pool, benchmarks/speed.py).
LENGTH_BUCKETS = 4


def sample_actions(
    policy: Policy, states: list[ProbeState], k: int, sampling: Sampling, buckets: int = 1
) -> list[list[Generation]]:
    """`k` actions per state from `policy`, in one batched call; or, with `buckets` > 1, in that many calls over
    the states sorted by prompt length (a batch is padded to its longest prompt: a pool whose prompts run from
    one turn to eight wastes about half its pre-fill on padding in one call). Bucket b draws on its own stream,
    `policy_seed(sampling.seed, "bucket b")`."""
    if buckets <= 1 or len(states) <= 1:
        prompts = [s.prefix_ids for s in states for _ in range(k)]
        gens = policy.generate(prompts, sampling)
        return [gens[i * k : (i + 1) * k] for i in range(len(states))]
    order = sorted(range(len(states)), key=lambda i: len(states[i].prefix_ids))
    out: list[list[Generation]] = [[] for _ in states]
    for b in range(min(buckets, len(states))):
        part = order[b * len(order) // buckets : (b + 1) * len(order) // buckets]
        seed = None if sampling.seed is None else policy_seed(sampling.seed, f"bucket {b}")
        gens = policy.generate(
            [states[i].prefix_ids for i in part for _ in range(k)], sampling.replace(seed=seed)
        )
        for j, i in enumerate(part):
            out[i] = gens[j * k : (j + 1) * k]
    return out


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


def policy_seed(seed: int, name: str) -> int:
    """The sampling seed of policy `name` in an analysis seeded by `seed`: two policies compared at the same
    states draw from independent random streams (one shared seed would make near-identical policies sample
    identical actions and tie exactly)."""
    return int.from_bytes(hashlib.sha256(f"{seed}|{name}".encode()).digest()[:4], "little")


def state_quality(
    policy: Policy, states: list[ProbeState], k: int, sampling: Sampling, buckets: int = 1
) -> np.ndarray:
    """Quality [n_states, k] of `k` actions sampled by `policy` at each state (in `buckets` calls by prompt
    length: `sample_actions`).

    `sampling.seed` is combined with the policy's name (`policy_seed`), so policies never share a stream.
    """
    if sampling.seed is not None:
        sampling = sampling.replace(seed=policy_seed(sampling.seed, policy.name))
    gens = sample_actions(policy, states, k, sampling, buckets)
    return score_actions(states, [[g.text for g in row] for row in gens])


def dead_states(states: list[ProbeState], env_kwargs: dict | None = None) -> np.ndarray:
    """True where no action can still succeed in the remaining turns (the environment's `is_dead`; False where
    an environment cannot tell)."""
    out = []
    for s in states:
        env = s.replay(env_kwargs)
        out.append(bool(env.is_dead()) if hasattr(env, "is_dead") else False)
    return np.array(out, dtype=bool)


def best_success(states: list[ProbeState], env_kwargs: dict | None = None) -> np.ndarray:
    """Per state, the best achievable success within its remaining turns (NaN where the environment cannot tell):
    the structural upper bound of a continuation from there."""
    out = []
    for s in states:
        env = s.replay(env_kwargs)
        best = env.best_success() if hasattr(env, "best_success") else None
        out.append(np.nan if best is None else float(best))
    return np.array(out)


# ------------------------------------------------------------------------------------ matched-state pools


def matched_pool(
    trajs_base: list[Trajectory],
    trajs_rl: list[Trajectory],
    tasks: dict[str, Task],
    n: int,
    seed: int,
    at_most: bool = False,
) -> list[ProbeState]:
    """`n` distinct states, half drawn from base trajectories and half from RL trajectories (seeded), so that a
    comparison is not driven by which states each policy happens to visit. With `at_most`, each half is capped at
    the distinct states there are (a pool of candidates for error injection on a small task set); without it,
    too few states is an error."""
    rng = np.random.default_rng(seed)
    half = n // 2
    base = sample_states(trajs_base, tasks, half, rng, "base", at_most=at_most)
    rl = sample_states(trajs_rl, tasks, n - half, rng, "rl", exclude={s.key for s in base}, at_most=at_most)
    return base + rl


def oracle_statement(info: dict) -> str:
    """What a notebook says about the environment's step oracle (`helpers.envs.step_oracle`), as Markdown."""
    if info["step_oracle"]:
        return f"**{info['env']}** has a step oracle: {info['oracle_note']}."
    return (
        f"**{info['env']}** has no step oracle ({info['oracle_note']}), so, as in the paper, nothing is probed "
        "here: `metrics.json` records `step_oracle: false` and why, and the analysis cells are skipped."
    )


def skipped(oracle: dict, why: str) -> dict:
    """The metrics of a step-level notebook on an environment without a step oracle: the oracle's record
    (`helpers.envs.step_oracle`) and why the analysis did not run."""
    return {**oracle, "skipped": why}


def skipped_findings(m: dict) -> list[str]:
    """The findings of a step-level notebook that skipped (`skipped`): what it needs and why the environment lacks
    it."""
    return [
        f"- **Skipped on {m['env']}:** {m['skipped']}, and {m['env']} has none ({m['oracle_note']}); the paper "
        "runs this analysis on FrozenLake and DeepCoder-MT only."
    ]


def state_table(states: list[ProbeState], quality: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per state: task, source, turn t, depth d_t, whether it is dead, and each policy's mean quality over its
    G actions (one column per entry of `quality`)."""
    df = pd.DataFrame(
        {
            "task_id": [s.task["task_id"] for s in states],
            "source": [s.source for s in states],
            "t": [s.t for s in states],
            "depth": [s.depth for s in states],
            "dead": dead_states(states),
        }
    )
    for name, q in quality.items():
        df[name] = np.nanmean(q, axis=1)
    return df


def win_summary(df: pd.DataFrame, a: str = "rl", b: str = "base", tol: float = 1e-9) -> dict:
    """How often policy `a`'s mean quality beats `b`'s at the live states: fractions better, tied, worse, the
    means, and paired tests. Dead states (`dead` column) are counted apart and left out of everything else."""
    from scipy.stats import ttest_rel, wilcoxon

    dead = df["dead"].to_numpy(bool) if "dead" in df else np.zeros(len(df), bool)
    live = df[~dead]
    diff = (live[a] - live[b]).to_numpy()
    nonzero = np.abs(diff) > tol
    n = max(len(diff), 1)
    out = {
        "n_states": len(df),
        "n_dead": int(dead.sum()),
        "n_live": len(live),
        f"{a}_better": float(np.sum(diff > tol) / n) if len(diff) else float("nan"),
        "tie": float(np.sum(~nonzero) / n) if len(diff) else float("nan"),
        f"{b}_better": float(np.sum(diff < -tol) / n) if len(diff) else float("nan"),
        f"{a}_better_among_untied": float(np.mean(diff[nonzero] > 0)) if nonzero.any() else float("nan"),
        f"mean_quality_{b}": float(live[b].mean()),
        f"mean_quality_{a}": float(live[a].mean()),
        "mean_diff": float(diff.mean()) if len(diff) else float("nan"),
    }
    out["wilcoxon_p"] = float(wilcoxon(diff[nonzero]).pvalue) if nonzero.sum() >= 1 else 1.0
    out["paired_t_p"] = float(ttest_rel(live[a], live[b]).pvalue) if nonzero.any() else 1.0
    return out


def wins(df: pd.DataFrame, a: str = "rl", b: str = "base", tol: float = 1e-9) -> np.ndarray:
    """Per live state: 1 where `a` beats `b`, 0 otherwise (ties count as not better), for intervals."""
    live = df[~df["dead"].to_numpy(bool)] if "dead" in df else df
    return ((live[a] - live[b]).to_numpy() > tol).astype(float)


def by_depth(df: pd.DataFrame, bins: list[float], a: str = "rl", b: str = "base") -> pd.DataFrame:
    """`win_summary` within bins of normalised depth d_t = t / T_max (dead states counted per bin)."""
    labels = [f"[{lo:.2f}, {hi:.2f})" for lo, hi in itertools.pairwise(bins)]
    binned = pd.cut(df["depth"], bins=bins, labels=labels, right=False, include_lowest=True)
    rows = []
    keys = (
        "n_states",
        "n_dead",
        "n_live",
        f"{a}_better",
        "tie",
        f"{b}_better",
        f"mean_quality_{b}",
        f"mean_quality_{a}",
    )
    for label, g in df.groupby(binned, observed=True):
        s = win_summary(g, a, b)
        rows.append({"depth_bin": str(label), **{k: s[k] for k in keys}})
    return pd.DataFrame(rows)


def differences(df: pd.DataFrame, a: str = "rl", b: str = "base") -> np.ndarray:
    """Per live state: `a`'s mean quality minus `b`'s (a tie is 0): the unit of the mean quality difference."""
    live = df[~df["dead"].to_numpy(bool)] if "dead" in df else df
    return (live[a] - live[b]).to_numpy(dtype=float)


def net_wins(df: pd.DataFrame, a: str = "rl", b: str = "base", tol: float = 1e-9) -> np.ndarray:
    """Per live state: +1 where `a`'s mean quality beats `b`'s, -1 where it loses, 0 at a tie: the unit of wins minus
    losses (tie-aware: under identical policies its mean is 0 whatever the share of ties, unlike a win rate's 1/2)."""
    d = differences(df, a, b)
    return np.where(d > tol, 1.0, np.where(d < -tol, -1.0, 0.0))


def paired_units(per_seed: list[np.ndarray], ci: float = 0.95, target_power: float = 0.8) -> dict | None:
    """The verdict paired by seed of per-seed unit values whose mean is 0 under no effect (`differences`,
    `net_wins`): `stats.paired_verdict` of the seed means against 0 (the t-interval over seeds), with the MDE at
    `target_power` from the units' variance components. None with fewer than 2 seeds that have units."""
    kept = [np.asarray(d, dtype=float) for d in per_seed if len(d)]
    if len(kept) < 2:
        return None
    means = [float(d.mean()) for d in kept]
    return stats.paired_verdict(means, [0.0] * len(means), ci, target_power, units=kept)


def quality_difference(
    per_seed: list[np.ndarray], n_boot: int = 1000, ci: float = 0.95, seed: int = 0, target_power: float = 0.8
) -> dict:
    """The mean oracle-quality difference of a comparison from each seed's per-state differences (`differences`;
    ties count as 0, so unlike a win rate it is not capped by ties): the mean over seeds with a seeds-then-states
    interval (`mean_diff`, `mean_diff_ci`), the per-seed means, and the verdict paired by seed (`paired`:
    `paired_units`, the t-interval of the seed means against 0 with the MDE at `target_power` from the states'
    variance components). A seed without live states leaves the verdict out (NaN)."""
    kept = [d for d in per_seed if d.size]
    if not kept:
        return {
            "mean_diff": float("nan"),
            "mean_diff_ci": [float("nan")] * 2,
            "mean_diff_per_seed": [],
            "paired": None,
        }
    point, low, high = nested_bootstrap(kept, n_boot=n_boot, ci=ci, seed=seed)
    means = [float(d.mean()) for d in kept]
    return {
        "mean_diff": point,
        "mean_diff_ci": [low, high],
        "mean_diff_per_seed": means,
        "paired": paired_units(kept, ci, target_power),
    }


def wins_minus_losses(per_seed: list[np.ndarray], ci: float = 0.95, target_power: float = 0.8) -> dict:
    """Wins minus losses from each seed's `net_wins`: the mean over seeds (`net_win`), the per-seed values and the
    verdict paired by seed (`net_win_paired`: `paired_units`)."""
    kept = [d for d in per_seed if len(d)]
    means = [float(np.mean(d)) for d in kept]
    return {
        "net_win": float(np.mean(means)) if means else float("nan"),
        "net_win_per_seed": means,
        "net_win_paired": paired_units(kept, ci, target_power),
    }


def seed_summary(
    per_state: pd.DataFrame,
    pairs: list[tuple[str, str]],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    target_power: float = 0.8,
) -> dict:
    """Win rates and mean qualities over RL seeds: `per_state` holds the state tables of every seed (column
    `rl_seed`; each seed has its own states). For each (a, b) of `pairs`: the mean over seeds of the fraction of
    live states where a beats b, with a seeds-then-states bootstrap interval (`metrics.nested_bootstrap`), the
    per-seed values, ties and losses; wins minus losses (`wins_minus_losses`: the mean over seeds of `net_wins`,
    with its verdict paired by seed); the mean quality difference a - b with its interval and its verdict paired by
    seed (`quality_difference`); and every policy's mean quality likewise. Dead states are counted apart. A verdict
    is the paired interval's side of 0 (never a win rate against 1/2, which ties pull below 1/2 under no effect)."""
    groups = dict(tuple(per_state.groupby("rl_seed", sort=True)))
    out: dict = {
        "n_seeds": len(groups),
        "n_states_per_seed": [len(g) for g in groups.values()],
        "n_dead_per_seed": [int(g["dead"].sum()) for g in groups.values()],
    }
    for a, b in pairs:
        key = f"{a}_vs_{b}"
        win = nested_bootstrap([wins(g, a, b) for g in groups.values()], n_boot=n_boot, ci=ci, seed=seed)
        per = [win_summary(g, a, b) for g in groups.values()]
        out[key] = {
            "better": win[0],
            "better_ci": [win[1], win[2]],
            "better_per_seed": [p[f"{a}_better"] for p in per],
            "tie": float(np.mean([p["tie"] for p in per])),
            "worse": float(np.mean([p[f"{b}_better"] for p in per])),
            "tie_per_seed": [p["tie"] for p in per],
            "worse_per_seed": [p[f"{b}_better"] for p in per],
            "wilcoxon_p_per_seed": [p["wilcoxon_p"] for p in per],
            **wins_minus_losses([net_wins(g, a, b) for g in groups.values()], ci, target_power),
            **quality_difference(
                [differences(g, a, b) for g in groups.values()], n_boot, ci, seed, target_power
            ),
        }
    names = sorted({x for pair in pairs for x in pair})
    for name in names:
        q = nested_bootstrap(
            [g.loc[~g["dead"], name].to_numpy() for g in groups.values()], n_boot=n_boot, ci=ci, seed=seed
        )
        out[f"mean_quality_{name}"] = {"mean": q[0], "ci": [q[1], q[2]]}
    return out


# ------------------------------------------------------------------------------------------- error states


def attempts_of(trajs: list[Trajectory]) -> dict[str, list[str]]:
    """Per task id, every action the trajectories took there, in order: the replies an environment may inject as
    errors (`Env.error_action`), so that an injected error is one a policy really made."""
    out: dict[str, list[str]] = {}
    for tr in trajs:
        out.setdefault(tr.task_id, []).extend(turn["action"] for turn in tr.turns)
    return out


def inject_error(state: ProbeState, chat, seed: int, attempts: list[str] | tuple = ()) -> ProbeState | None:
    """The error state one step after `state`: an incorrect action is injected there and applied.

    The environment makes the error (`Env.error_action`) with a seed derived from (seed, task id, t), given the
    `attempts` recorded on the task: on FrozenLake one of the moves whose Q* is below the best that do not end the
    episode, chosen uniformly; on DeepCoder-MT a failing program. Returns None where the environment has no error
    to make or the episode would end. The new state's token prefix is the old one plus the injected reply and the
    environment's observation of it (DeepCoder-MT: its failing-test feedback), encoded exactly as a rollout would
    encode them.
    """
    require_step_oracle(state.env, "error injection")
    env = state.replay()
    key = int.from_bytes(
        hashlib.sha256(f"{seed}|{state.task['task_id']}|{state.t}".encode()).digest()[:4], "little"
    )
    action = env.error_action(key, tuple(attempts))
    if action is None:
        return None
    result = env.step(action)
    if env.done:
        return None
    prefix = list(state.prefix_ids) + chat.action_ids(action) + chat.observation_ids(result.observation)
    return ProbeState(
        task=state.task,
        env=state.env,
        budget=state.budget,
        seed=state.seed,
        actions=[*state.actions, action],
        prefix_ids=prefix,
        source=state.source,
        trajectory_success=state.trajectory_success,
    )


def error_pool(
    states: list[ProbeState], chat, seed: int, n: int, attempts: dict[str, list[str]] | None = None
) -> list[ProbeState]:
    """Up to `n` error states, injected at `states` in order (states without an error to make are skipped);
    `attempts` (`attempts_of`) are the replies recorded per task that the environment may inject."""
    out = []
    for s in states:
        e = inject_error(s, chat, seed, (attempts or {}).get(s.task["task_id"], ()))
        if e is not None:
            out.append(e)
        if len(out) == n:
            break
    return out


def continuation_success(
    policy: Policy, states: list[ProbeState], n: int, sampling: Sampling, seed: int
) -> np.ndarray:
    """Per state, the success rate of `n` continuations by `policy` with the remaining budget.

    The policy samples from its own stream (`policy_seed`); the environment's noise of continuation j is the same
    for every policy (`rollout.continue_from`), so two policies are compared on the same draws of the ice.
    """
    trajs = continue_from(policy, states, n, sampling, seed=policy_seed(seed, policy.name))
    return np.array([t.success for t in trajs], dtype=float).reshape(len(states), n).mean(axis=1)
