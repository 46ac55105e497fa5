"""FrozenLake's DP oracle, apart from the environment: finite-horizon Q* on gymnasium's own transition table, and
the exact success of deterministic budget-blind policies (with the local search that finds good ones and the mix gap
it measures). `helpers.envs.frozenlake` re-exports every name here; `helpers.envs.frozenlake_maps` (the map
selection) and `helpers.envs.doorway` build on them without importing the environment (which lists doorway tasks).
The map as text is `helpers.envs.frozenlake_text.render`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake

from helpers.budget import budgetmix_candidates as budget_candidates
from helpers.envs.base import Task

DEFAULT_SLIP = 1.0 / 3.0  # gymnasium's default success_rate of a slippery move


def start_state(desc: tuple[str, ...] | list[str]) -> int:
    """Index of the start cell S."""
    flat = "".join(desc)
    return flat.index("S")


@functools.lru_cache(maxsize=4096)
def _tables(desc: tuple[str, ...], is_slippery: bool, success_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Dense expected reward R[s, a] and continuation C[s, a, s'] = sum of p * (1 - done) from gymnasium's P."""
    env = GymFrozenLake(desc=list(desc), is_slippery=is_slippery, success_rate=success_rate)
    P = env.unwrapped.P
    n = env.unwrapped.observation_space.n
    R = np.zeros((n, 4))
    C = np.zeros((n, 4, n))
    for s in range(n):
        for a in range(4):
            # A move into a wall can list the same next state twice: accumulating sums them.
            for p, s2, r, done in P[s][a]:
                R[s, a] += p * r
                C[s, a, s2] += p * (1.0 - float(done))
    return R, C


def optimal_q(
    desc, horizon: int, gamma: float = 0.95, is_slippery: bool = False, success_rate: float = DEFAULT_SLIP
) -> np.ndarray:
    """Finite-horizon Q*: array [horizon + 1, n_states, 4], index h = number of turns left.

    Q_0 = 0; Q_h(s, a) = sum over (p, s', r, done) of p * (r + gamma * (1 - done) * max_a' Q_{h-1}(s', a')),
    on gymnasium's own transition table for the map (slippery with `success_rate`, or not).
    """
    return _optimal_q(tuple(desc), int(horizon), float(gamma), bool(is_slippery), float(success_rate)).copy()


@functools.lru_cache(maxsize=4096)
def _optimal_q(
    desc: tuple[str, ...], horizon: int, gamma: float, is_slippery: bool, success_rate: float
) -> np.ndarray:
    R, C = _tables(desc, is_slippery, success_rate)
    Q = np.zeros((horizon + 1, *R.shape))
    for h in range(1, horizon + 1):
        Q[h] = R + gamma * C @ Q[h - 1].max(axis=1)
    return Q


def dynamics(task: Task) -> tuple[tuple[str, ...], bool, float]:
    """(map, slippery, success_rate) of a task: everything the transition table depends on."""
    p = task.payload
    return tuple(p["desc"]), bool(p.get("is_slippery", False)), float(p.get("success_rate", DEFAULT_SLIP))


def upper_bound(task: Task, budget: int) -> float:
    """Best achievable success probability within `budget` turns (max_a Q*_T(start) with gamma = 1)."""
    desc, slippery, rate = dynamics(task)
    q = _optimal_q(desc, int(budget), 1.0, slippery, rate)
    return float(q[budget, start_state(desc)].max())


def blind_tables(task: Task) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(R [n, 4], C [n, 4, n], start state, the non-terminal states whose move matters) of a task's map."""
    desc, slippery, rate = dynamics(task)
    R, C = _tables(desc, slippery, rate)
    return R, C, start_state(desc), _movable(desc, slippery, rate)


@functools.lru_cache(maxsize=4096)
def _movable(desc: tuple[str, ...], is_slippery: bool, success_rate: float) -> np.ndarray:
    R, C = _tables(desc, is_slippery, success_rate)
    return np.flatnonzero(C.sum(axis=2).max(axis=1) + R.max(axis=1) > 0)


def blind_success(task: Task, policies: np.ndarray, horizon: int) -> np.ndarray:
    """Exact success from the start within 1..`horizon` turns of each deterministic stationary (budget-blind) policy.

    `policies` is [B, n_states] (a move per square) or [n_states]; returns [B, horizon] (or [horizon]): column h-1
    is the probability of reaching the goal within h turns (V_0 = 0, V_h = R_pi + C_pi V_{h-1}).
    """
    R, C, start, _ = blind_tables(task)
    P = np.atleast_2d(np.asarray(policies, dtype=int))
    states = np.arange(R.shape[0])
    Rb, Cb = R[states, P], C[states, P]  # [B, n], [B, n, n]
    V, out = np.zeros(P.shape, dtype=float), np.empty((P.shape[0], horizon))
    for h in range(horizon):
        V = Rb + np.einsum("bij,bj->bi", Cb, V)
        out[:, h] = V[:, start]
    return out if np.ndim(policies) == 2 else out[0]


def _blind_objective(success: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return success[..., : len(weights)] @ weights


def horizon_weights(horizons: dict[int, float]) -> np.ndarray:
    """Weights over horizons 1..max as a vector (index h-1), from {horizon: probability}."""
    w = np.zeros(max(horizons))
    for h, p in horizons.items():
        w[h - 1] += p
    return w / w.sum()


def coordinate_ascent(task: Task, policy: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, float]:
    """From the deterministic stationary `policy`, repeatedly take the single-square move change that raises the
    weighted success most, until none does (a local optimum). Returns (policy, its objective).
    `helpers.headroom.best_blind_policy` runs it from several starts."""
    _, _, _, movable = blind_tables(task)
    horizon = len(weights)
    pi = np.asarray(policy, dtype=int).copy()
    best = float(_blind_objective(blind_success(task, pi, horizon), weights))
    while True:
        cands = np.repeat(pi[None, :], len(movable) * 4, axis=0)
        cands[np.arange(len(cands)), np.repeat(movable, 4)] = np.tile(np.arange(4), len(movable))
        values = _blind_objective(blind_success(task, cands, horizon), weights)
        i = int(values.argmax())
        if values[i] <= best + 1e-12:
            return pi, best
        pi, best = cands[i], float(values[i])


def mix_gap(task: Task, starts: Sequence[int] | None = None) -> float:
    """The budget-awareness gap of one map against BudgetMix's budget mix, in points: the optimum's success minus
    that of a budget-blind policy tuned to the mix (every `budget.budgetmix_candidates(T_max)` equally likely), both
    averaged over the mix. It is what an agent trained on the mix gains by reading the budget at all: a blind agent
    can rush or be careful, not both. The blind policy is the best local optimum coordinate ascent reaches from the
    greedy policies on the optimum's Q* at the horizons `starts` (default: a quarter, half and all of T_max), so the
    gap can only be overstated against `helpers.headroom.best_blind_policy`'s fuller search (more starts)."""
    desc, slippery, rate = dynamics(task)
    t_max = int(task.t_max)
    cands = budget_candidates(t_max)
    weights = horizon_weights({T: 1.0 / len(cands) for T in cands})
    q = _optimal_q(desc, t_max, 1.0, slippery, rate)
    start = start_state(desc)
    horizons = sorted(set(starts or (max(1, t_max // 4), max(1, t_max // 2), t_max)))
    best = max(coordinate_ascent(task, q[h].argmax(axis=1), weights)[1] for h in horizons)
    optimum = float(sum(w * q[h + 1, start].max() for h, w in enumerate(weights)))
    return 100.0 * (optimum - best)
