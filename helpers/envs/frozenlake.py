"""Text FrozenLake on gymnasium's own dynamics: the environment (task loading, reset, step, its step oracle), the
policies computed from its DP oracle, and the scripted players and reference curves built on them.

The agent sees the map rendered as text and answers one move per turn as `<answer>Left</answer>`
(`frozenlake_text`). Moves are applied by gymnasium's `FrozenLakeEnv` (any map through `desc`, slippery or not),
seeded at reset, so an episode is fixed by (task, seed, actions).

The maps are generated, selected and split into disjoint train and test sets in `frozenlake_maps`.

`optimal_q(desc, horizon, gamma)` is finite-horizon Q* by dynamic programming on the environment's own
transition table (`env.unwrapped.P`), index h = turns left (`frozenlake_dp`). It scores steps (`step_quality`,
gamma 0.95 as in the paper) and, with gamma = 1, gives the structural upper bound: the best success probability
within T turns.

`frozenlake_text`, `frozenlake_dp` and `frozenlake_maps` sit below this module and never import it, nor does
`helpers.envs.doorway` (it builds on them; the environment lists doorway tasks). Their public names, and the
oracle's private ones other modules use, are re-exported here under their own names (`frozenlake.map_sets`,
`frozenlake.render`, `frozenlake._optimal_q`, ...).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
from gymnasium.utils import seeding

from helpers.envs import doorway
from helpers.envs.base import StepResult, Task, check_split, seeded_subset

# the oracle (`frozenlake_dp`), the maps (`frozenlake_maps`) and the text (`frozenlake_text`), re-exported here
from helpers.envs.frozenlake_dp import (
    DEFAULT_SLIP as DEFAULT_SLIP,
)
from helpers.envs.frozenlake_dp import (
    _blind_objective as _blind_objective,
)
from helpers.envs.frozenlake_dp import (
    _movable as _movable,
)
from helpers.envs.frozenlake_dp import (
    _optimal_q as _optimal_q,
)
from helpers.envs.frozenlake_dp import (
    _tables as _tables,
)
from helpers.envs.frozenlake_dp import (
    blind_success as blind_success,
)
from helpers.envs.frozenlake_dp import (
    blind_tables as blind_tables,
)
from helpers.envs.frozenlake_dp import (
    coordinate_ascent as coordinate_ascent,
)
from helpers.envs.frozenlake_dp import (
    dynamics as dynamics,
)
from helpers.envs.frozenlake_dp import (
    horizon_weights as horizon_weights,
)
from helpers.envs.frozenlake_dp import (
    mix_gap as mix_gap,
)
from helpers.envs.frozenlake_dp import (
    optimal_q as optimal_q,
)
from helpers.envs.frozenlake_dp import (
    start_state as start_state,
)
from helpers.envs.frozenlake_dp import (
    upper_bound as upper_bound,
)
from helpers.envs.frozenlake_maps import (
    SELECT_FRACTIONS as SELECT_FRACTIONS,
)
from helpers.envs.frozenlake_maps import (
    budget_gaps as budget_gaps,
)
from helpers.envs.frozenlake_maps import (
    map_cache_dir as map_cache_dir,
)
from helpers.envs.frozenlake_maps import (
    map_sets as map_sets,
)
from helpers.envs.frozenlake_maps import (
    random_map as random_map,
)
from helpers.envs.frozenlake_maps import (
    selected as selected,
)
from helpers.envs.frozenlake_maps import (
    shortest_path as shortest_path,
)
from helpers.envs.frozenlake_text import (
    ACTIONS as ACTIONS,
)
from helpers.envs.frozenlake_text import (
    SLIPPERY_NOTE as SLIPPERY_NOTE,
)
from helpers.envs.frozenlake_text import (
    SYSTEM_PROMPT as SYSTEM_PROMPT,
)
from helpers.envs.frozenlake_text import (
    format_action as format_action,
)
from helpers.envs.frozenlake_text import (
    observation as observation,
)
from helpers.envs.frozenlake_text import (
    parse_action as parse_action,
)
from helpers.envs.frozenlake_text import (
    render as render,
)

# ------------------------------------------------------------------------ policies from the oracle's tables


@functools.lru_cache(maxsize=4096)
def _stationary_q(
    desc: tuple[str, ...], gamma: float, is_slippery: bool, success_rate: float, tol: float = 1e-10
) -> np.ndarray:
    """Infinite-horizon Q* [n_states, 4] with discount gamma < 1, by value iteration to convergence."""
    if not 0 < gamma < 1:
        raise ValueError(f"the stationary policy needs a discount in (0, 1), got {gamma}")
    R, C = _tables(desc, is_slippery, success_rate)
    Q = np.zeros_like(R)
    for _ in range(100_000):
        new = R + gamma * C @ Q.max(axis=1)
        if np.abs(new - Q).max() < tol:
            return new
        Q = new
    raise RuntimeError("value iteration did not converge")  # pragma: no cover - gamma < 1 contracts


def stationary_policy(task: Task, gamma: float = 0.99) -> np.ndarray:
    """The best stationary policy, as probabilities [n_states, 4]: greedy on infinite-horizon Q* (discount
    `gamma`), ties shared equally. It ignores the turns left: on slippery ice it takes the safe detour even
    when the budget is too short for it."""
    desc, slippery, rate = dynamics(task)
    q = _stationary_q(desc, float(gamma), slippery, rate)
    best = np.isclose(q, q.max(axis=1, keepdims=True), rtol=0, atol=1e-9).astype(float)
    return best / best.sum(axis=1, keepdims=True)


def optimal_policy(task: Task, horizon: int) -> np.ndarray:
    """The budget-aware optimal policy [horizon + 1, n_states, 4] (index h = turns left): greedy on
    finite-horizon Q* with gamma = 1, ties shared equally (row h = 0 is unused)."""
    desc, slippery, rate = dynamics(task)
    q = _optimal_q(desc, int(horizon), 1.0, slippery, rate)
    best = np.isclose(q, q.max(axis=2, keepdims=True), rtol=0, atol=1e-12).astype(float)
    return best / best.sum(axis=2, keepdims=True)


def with_random_moves(policy: np.ndarray, epsilon: float) -> np.ndarray:
    """A policy that moves uniformly at random with probability epsilon and follows `policy` otherwise."""
    return (1.0 - epsilon) * policy + epsilon / 4.0


def policy_success(task: Task, policy: np.ndarray, budget: int) -> float:
    """Exact probability that `policy` reaches the goal within `budget` turns from the start.

    `policy` is [n_states, 4] (stationary) or [>= budget + 1, n_states, 4] indexed by turns left. Computed by
    policy evaluation on the same transition table as the oracle: V_0 = 0,
    V_h(s) = sum_a pi_h(a | s) (R(s, a) + sum_s' C(s, a, s') V_{h-1}(s')).
    """
    desc, slippery, rate = dynamics(task)
    R, C = _tables(desc, slippery, rate)
    V = np.zeros(R.shape[0])
    for h in range(1, int(budget) + 1):
        pi = policy if policy.ndim == 2 else policy[h]
        V = (pi * (R + C @ V)).sum(axis=1)
    return float(V[start_state(desc)])


# ---------------------------------------------------------------------------------------- the environment


@functools.lru_cache(maxsize=4096)
def _gym_template(desc: tuple[str, ...], is_slippery: bool, success_rate: float) -> GymFrozenLake:
    """One gymnasium environment per map, built once: building its transition table `P` is most of what a
    reset costs. Episodes use shallow copies: they share the read-only `P` and get their own state and random
    generator at `reset(seed=...)`."""
    return GymFrozenLake(desc=list(desc), is_slippery=is_slippery, success_rate=success_rate)


class FrozenLakeEnv:
    """Text FrozenLake with a turn budget; implements `helpers.envs.base.Env`."""

    name = "frozenlake"
    step_oracle = True
    oracle_note = (
        "finite-horizon Q* by dynamic programming on gymnasium's transition table (gamma from the task, 0.95 as in "
        "the paper), normalised by the best action's Q* at the state with the remaining turns as horizon"
    )

    def __init__(self) -> None:
        self.task: Task | None = None
        self.done = True

    # -- tasks --------------------------------------------------------------------------------------------
    @classmethod
    def load_tasks(
        cls,
        split: str,
        n: int | None = None,
        source: str = "bundled",
        seed: int = 0,
        *,
        size: int = 5,
        hole_p: float = 0.2,
        t_max: int = 10,
        is_slippery: bool = False,
        success_rate: float = DEFAULT_SLIP,
        gamma: float = 0.95,
        n_train: int = 2000,
        n_test: int = 100,
        map_seed: int = 0,
        select_min_gap: float = 0.0,
        select_min_mix_gap: float = 0.0,
        doorway_share: float = 0.0,
        doorway_success_rate: float = 0.0,
        doorway_min_gap: float = 10.0,
    ) -> list[Task]:
        """Tasks of one split; with `n`, a seeded subset of it (the whole split keeps its stored order).

        `select_min_gap` > 0 keeps only maps whose budget-awareness gap (`budget_gaps` at 25 / 50 / 75 % of
        `t_max`, on the task's dynamics) averages at least that many points, and `select_min_mix_gap` > 0 only maps
        whose `mix_gap` (against a blind policy tuned to BudgetMix's mix) is at least that many, in both splits
        (`map_sets`).

        `doorway_share` > 0 makes that share of each split (and of every subset: `n` is split by the share, each part a
        seeded subset) doorway tasks (`helpers.envs.doorway`), listed after the random maps, on ice of
        `doorway_success_rate` (0: chosen by DP, `doorway.choose_success_rate` with `doorway_min_gap`). Random maps of
        the doorway shape are left out of the random part, so the shape alone tells the two families apart."""
        check_split(split, "frozenlake")
        if source != "bundled":
            raise ValueError("frozenlake maps are generated locally; source must be 'bundled'")
        select = None
        if select_min_gap > 0 or select_min_mix_gap > 0:
            if not is_slippery:
                raise ValueError(
                    "frozenlake: select_min_gap and select_min_mix_gap need slippery ice (is_slippery: true); on deterministic ice a "
                    "blind policy along a shortest path is optimal at every budget, so no map has a gap"
                )
            select = (
                bool(is_slippery),
                float(success_rate),
                int(t_max),
                float(select_min_gap),
                float(select_min_mix_gap),
            )
        doors: list[Task] = []
        if doorway_share > 0:
            if not is_slippery:
                raise ValueError("frozenlake: doorway tasks need slippery ice (is_slippery: true)")
            rate = doorway_success_rate or doorway.choose_success_rate(t_max, size, doorway_min_gap)
            n_door = {s: round(doorway_share * k) for s, k in (("train", n_train), ("test", n_test))}
            n_train, n_test = n_train - n_door["train"], n_test - n_door["test"]
            k = None if n is None else round(doorway_share * n)
            n = None if n is None else n - k
            doors = doorway.tasks(
                split,
                k,
                seed,
                size=size,
                hole_p=hole_p,
                t_max=t_max,
                success_rate=rate,
                gamma=gamma,
                n_train=n_door["train"],
                n_test=n_door["test"],
                map_seed=map_seed,
            )
        maps = map_sets(size, hole_p, n_train, n_test, map_seed, select)[split]
        if doors:
            maps = [d for d in maps if not doorway.is_doorway(d)]
        return [
            Task(
                task_id=f"fl{size}-{split}-{i:05d}",
                env=cls.name,
                payload={
                    "desc": list(desc),
                    "is_slippery": is_slippery,
                    "success_rate": success_rate,
                    "gamma": gamma,
                },
                t_max=t_max,
            )
            for i, desc in seeded_subset(list(enumerate(maps)), n, seed)
        ] + doors

    @staticmethod
    def upper_bound(task: Task, budget: int) -> float:
        return upper_bound(task, budget)

    # -- episode ------------------------------------------------------------------------------------------
    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        self.task = task
        self.desc, self.is_slippery, self.success_rate = dynamics(task)
        self.gamma = float(task.payload.get("gamma", 0.95))
        self._gym = copy.copy(_gym_template(self.desc, self.is_slippery, self.success_rate))
        self.state, _ = self._gym.reset(seed=seed)
        self.total = self.remaining = int(budget)
        self.t = 0
        self.done = False
        system = SYSTEM_PROMPT + (SLIPPERY_NOTE if self.is_slippery else "")
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self._observation("")},
        ]

    def _observation(self, note: str) -> str:
        return observation(self.desc, self.state, self.total, self.remaining, note)

    def step(self, action_text: str) -> StepResult:
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        action, why = parse_action(action_text)
        self.t += 1
        self.remaining -= 1
        info = {"invalid": action is None, "action": action, "t": self.t, "remaining": self.remaining}
        if action is None:
            self.done = self.remaining == 0
            note = f"Invalid action: {why}. Reply with <answer>Left</answer>, Down, Right or Up."
            if self.done:
                note += " Out of turns."
            info["state"] = int(self.state)
            return StepResult(self._observation(note), 0.0, self.done, False, info)
        self.state, reward, terminated, _, _ = self._gym.step(action)
        self.state = int(self.state)
        cell = self.desc[self.state // len(self.desc[0])][self.state % len(self.desc[0])]
        success = cell == "G"
        self.done = bool(terminated) or self.remaining == 0
        note = "You reached the goal." if success else "You fell into a hole." if cell == "H" else ""
        if self.done and not terminated:
            note = "Out of turns."
        info["state"] = self.state
        info["terminated"] = bool(terminated)  # the episode ended by itself (goal or hole), not by the budget
        return StepResult(self._observation(note), float(reward), self.done, success, info)

    # -- oracle -------------------------------------------------------------------------------------------
    def q_values(self) -> np.ndarray:
        """Q*(s, .) at the current state with the remaining budget as horizon (gamma from the task)."""
        q = _optimal_q(self.desc, self.remaining, self.gamma, self.is_slippery, self.success_rate)
        return q[self.remaining, self.state]

    @staticmethod
    def action_index(action_text: str) -> int | None:
        """The move a reply makes (an index into `q_values()`), or None for an invalid reply."""
        return parse_action(action_text)[0]

    def oracle_key(self) -> tuple[int, int]:
        """What the oracle's answer depends on within a map: (state, turns left)."""
        return int(self.state), int(self.remaining)

    def is_dead(self) -> bool:
        """No move can still reach the goal in the remaining turns (max Q* = 0): every valid move scores the
        same there, so such a state says nothing about how good a policy's step is."""
        return bool(self.q_values().max() <= 0.0)

    def best_success(self) -> float:
        """The best success probability from the current state within the remaining turns (the structural upper
        bound of a continuation from here: max_a Q* with gamma = 1 and the remaining budget as horizon)."""
        q = _optimal_q(self.desc, self.remaining, 1.0, self.is_slippery, self.success_rate)
        return float(q[self.remaining, self.state].max())

    def reseed(self, seed: int) -> None:
        """Draw the slips of the rest of the episode from a fresh stream (continuations of one state that should
        not share their dynamics noise); the state itself is unchanged."""
        self._gym.unwrapped.np_random, _ = seeding.np_random(int(seed))

    def incorrect_actions(self) -> list[str]:
        """Suboptimal moves that do not end the episode (see `incorrect_actions`)."""
        return incorrect_actions(self)

    def error_action(self, seed: int, attempts: Sequence[str] = ()) -> str | None:
        """The injected error (`helpers.envs.base.StepOracle`): one of `incorrect_actions()`, chosen uniformly by a
        generator seeded with `seed`; None where every move is optimal or ends the episode. FrozenLake's errors
        follow from Q* alone, so `attempts` are not used."""
        candidates = self.incorrect_actions()
        if not candidates:
            return None
        return candidates[int(np.random.default_rng(seed).integers(len(candidates)))]

    def step_quality(self, action_text: str) -> float | None:
        """Q*(s, a) / max_a' Q*(s, a'): 1 for a best action, 0 for an invalid one or a move into a hole.

        Where no action can reach the goal within the remaining turns (max Q* = 0) every valid action is equally
        good and scores 1.
        """
        if self.done:
            raise RuntimeError("step_quality() on a finished episode")
        action, _ = parse_action(action_text)
        if action is None:
            return 0.0
        q = self.q_values()
        best = q.max()
        return 1.0 if best <= 0 else float(q[action] / best)


def incorrect_actions(env: FrozenLakeEnv) -> list[str]:
    """Moves at the current state whose Q* is below the best and that do not end the episode (no hole, no goal).

    These are the candidates for an injected error: a worse move after which the agent still has a state to
    recover from (a move into a hole would leave nothing to recover).
    """
    q = env.q_values()
    best = q.max()
    out = []
    for a in range(4):
        if q[a] >= best - 1e-12:
            continue
        P = env._gym.unwrapped.P[env.state][a]
        ends = any(done for p, _, _, done in P if p > 0)
        if not ends:
            out.append(format_action(a))
    return out


def q_greedy_action(env: FrozenLakeEnv, rng: np.random.Generator, epsilon: float = 0.0) -> int:
    """A scripted player: with probability epsilon a uniformly random move, else a best move by Q* (ties
    broken at random)."""
    if rng.random() < epsilon:
        return int(rng.integers(4))
    q = env.q_values()
    best = np.flatnonzero(np.isclose(q, q.max()))
    return int(rng.choice(best))


def scripted_player(epsilon: float = 0.0, seed: int = 0):
    """A player `f(env) -> action_text`: Q*-greedy, random with probability epsilon (0 = optimal)."""
    rng = np.random.default_rng(seed)
    return lambda env: format_action(q_greedy_action(env, rng, epsilon))


def habit_player(epsilon: float = 0.0, gamma: float = 0.99, seed: int = 0):
    """The cpu tier's demonstrator `f(env) -> action_text`: a budget-blind, cautious habit plus noise.

    With probability epsilon a uniformly random move; otherwise a move of the best stationary policy
    (`stationary_policy`: greedy on infinite-horizon Q* with discount `gamma`), which ignores the turns left. Its
    errors are therefore systematic (it takes the safe detour even when too few turns remain for it, and never
    rushes) as well as noisy.
    """
    rng = np.random.default_rng(seed)

    def play(env: FrozenLakeEnv) -> str:
        if rng.random() < epsilon:
            return format_action(int(rng.integers(4)))
        pi = stationary_policy(env.task, gamma)[env.state]
        return format_action(int(rng.choice(4, p=pi)))

    return play


def map_stats(tasks: list[Task]) -> dict:
    """Shortest-path statistics of a map set."""
    lengths = np.array([shortest_path(t.payload["desc"]) for t in tasks])
    holes = np.array([sum(row.count("H") for row in t.payload["desc"]) for t in tasks])
    return {
        "n_maps": len(tasks),
        "shortest_path_mean": float(lengths.mean()),
        "shortest_path_median": float(np.median(lengths)),
        "shortest_path_min": int(lengths.min()),
        "shortest_path_max": int(lengths.max()),
        "holes_mean": float(holes.mean()),
    }


def upper_bound_curve(tasks: list[Task], budgets: list[int]) -> dict[int, float]:
    """The structural upper bound per budget T: best success probability within T turns, averaged over tasks."""
    return {int(T): float(np.mean([upper_bound(t, T) for t in tasks])) for T in budgets}


def stationary_success_curve(tasks: list[Task], budgets: list[int], gamma: float = 0.99) -> dict[int, float]:
    """Exact success within each budget T of the best stationary (budget-blind) policy, averaged over tasks."""
    return {
        int(T): float(np.mean([policy_success(t, stationary_policy(t, gamma), T) for t in tasks]))
        for T in budgets
    }
