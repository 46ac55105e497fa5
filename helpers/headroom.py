"""What is left to learn on the FrozenLake testbed, measured apart by dynamic programming: noise, habit, budget.

The demonstrator the base imitates is a budget-blind habit (greedy on infinite-horizon Q* with discount
`sft.habit_gamma`) that moves at random a share `sft.epsilon` of the time. Between it and the budget-aware optimum
(the structural upper bound) lie three gaps, each exact at every budget T (mean over the test maps):

    noise            = greedy habit               - demonstrator        (drop the random moves)
    habit            = best blind policy for T_max - greedy habit        (drop the habit's caution, still blind)
    budget awareness = optimum                    - best blind policy for T_max

"Blind" means a deterministic stationary policy: one move per square, whatever the turns left. The best blind
policy for a horizon is found by coordinate ascent (`best_blind_policy`: change the move of one square at a time,
take the best improvement, stop at a local optimum; from several starts), checked against brute force on small
maps (`brute_force_blind`, tests/test_headroom.py). Only the third gap needs an agent that reads the budget; the
second is what a budget-blind policy can gain by being less cautious, and the first is what sharpening removes.
A budget-blind policy tuned to BudgetMix's budget mix (`budget.budgetmix_candidates`, each budget equally likely)
gives a second reading of the budget-awareness gap: what reading the budget is worth to an agent trained on the mix.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pandas as pd

from helpers import budget
from helpers.envs import Task
from helpers.envs import frozenlake as fl

START_GAMMAS = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)  # greedy on stationary Q* at each discount: one start each
N_RANDOM_STARTS = 4  # and a few uniformly random deterministic policies


# Evaluating and improving blind policies lives with the environment's oracle (`frozenlake`), where the map selection
# of `env.frozenlake.select_min_gap` uses it too; the names stay importable from here.
_tables = fl.blind_tables
blind_success = fl.blind_success
horizon_weights = fl.horizon_weights
coordinate_ascent = fl.coordinate_ascent
_objective = fl._blind_objective


def _starts(task: Task, horizon: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Deterministic starting policies: greedy on stationary Q* at several discounts, greedy on the optimum's
    first-turn Q* at `horizon`, and a few random ones."""
    desc, slippery, rate = fl.dynamics(task)
    n = fl._tables(desc, slippery, rate)[0].shape[0]
    starts = [fl._stationary_q(desc, g, slippery, rate).argmax(axis=1) for g in START_GAMMAS]
    starts.append(fl._optimal_q(desc, int(horizon), 1.0, slippery, rate)[horizon].argmax(axis=1))
    starts += [rng.integers(0, 4, size=n) for _ in range(N_RANDOM_STARTS)]
    return starts


def best_blind_policy(
    task: Task, horizons: dict[int, float] | int, seed: int = 0
) -> tuple[np.ndarray, float]:
    """The best deterministic stationary (budget-blind) policy for a horizon, or for a mix of horizons
    ({horizon: probability}): coordinate ascent from every start of `_starts`, the best local optimum kept.
    Returns (policy [n_states], its expected success over the horizons)."""
    mix = {int(horizons): 1.0} if isinstance(horizons, int | np.integer) else horizons
    weights = horizon_weights(mix)
    rng = np.random.default_rng(seed)
    results = [coordinate_ascent(task, s, weights) for s in _starts(task, max(mix), rng)]
    return max(results, key=lambda r: r[1])


def brute_force_blind(task: Task, horizons: dict[int, float] | int) -> tuple[np.ndarray, float]:
    """The same maximum by enumerating every deterministic policy on the movable squares (small maps only: 4^k
    policies for k movable squares); the check on `best_blind_policy`."""
    mix = {int(horizons): 1.0} if isinstance(horizons, int | np.integer) else horizons
    weights = horizon_weights(mix)
    R, _, _, movable = _tables(task)
    if len(movable) > 8:
        raise ValueError(
            f"brute force over 4^{len(movable)} policies: use a map with at most 8 movable squares"
        )
    grid = np.array(list(itertools.product(range(4), repeat=len(movable))), dtype=int)
    P = np.zeros((len(grid), R.shape[0]), dtype=int)
    P[:, movable] = grid
    values = _objective(blind_success(task, P, len(weights)), weights)
    i = int(values.argmax())
    return P[i], float(values[i])


@functools.cache
def _mix(t_max: int) -> tuple[tuple[int, float], ...]:
    cands = budget.budgetmix_candidates(t_max)
    return tuple((int(T), 1.0 / len(cands)) for T in cands)


def budgetmix_mix(t_max: int) -> dict[int, float]:
    """BudgetMix's budget distribution at T_max: each of `budget.budgetmix_candidates(T_max)` equally likely."""
    return dict(_mix(int(t_max)))


def per_map(
    task: Task, budgets: list[int], t_max: int, epsilon: float, habit_gamma: float, seed: int = 0
) -> dict:
    """Success at each budget of the demonstrator, the greedy habit, the best blind policies (for T_max, for
    BudgetMix's mix, and tuned to each budget itself) and the optimum, on one map: {column: {T: success}}."""
    habit = fl.stationary_policy(task, habit_gamma)
    blind_tmax, _ = best_blind_policy(task, t_max, seed)
    blind_mix, _ = best_blind_policy(task, budgetmix_mix(t_max), seed)
    horizon = max(max(budgets), t_max)
    tmax_curve, mix_curve = blind_success(task, np.stack([blind_tmax, blind_mix]), horizon)
    out: dict[str, dict[int, float]] = {k: {} for k in COLUMNS}
    for T in budgets:
        out["demonstrator"][T] = fl.policy_success(task, fl.with_random_moves(habit, epsilon), T)
        out["greedy_habit"][T] = fl.policy_success(task, habit, T)
        out["blind_t_max"][T] = float(tmax_curve[T - 1])
        out["blind_mix"][T] = float(mix_curve[T - 1])
        out["blind_own_budget"][T] = best_blind_policy(task, T, seed)[1]
        out["optimum"][T] = fl.upper_bound(task, T)
    return out


COLUMNS = ("demonstrator", "greedy_habit", "blind_t_max", "blind_mix", "blind_own_budget", "optimum")


def table(
    tasks: list[Task], budgets: list[int], t_max: int, epsilon: float, habit_gamma: float, seed: int = 0
) -> pd.DataFrame:
    """Per budget T (rows): the mean success over `tasks` of each policy of `COLUMNS`, the three headrooms in
    points (noise, habit, budget awareness; budget awareness also against the mix-tuned blind policy, and what
    remains against a blind policy tuned to T itself), and how many maps are solvable at all within T."""
    maps = [per_map(t, budgets, t_max, epsilon, habit_gamma, seed) for t in tasks]
    rows = []
    for T in budgets:
        row = {"T": T, "fraction": T / t_max}
        row |= {c: float(np.mean([m[c][T] for m in maps])) for c in COLUMNS}
        row["solvable_maps"] = int(sum(m["optimum"][T] > 0 for m in maps))
        rows.append(row)
    df = pd.DataFrame(rows).set_index("T")
    df["noise_points"] = 100 * (df["greedy_habit"] - df["demonstrator"])
    df["habit_points"] = 100 * (df["blind_t_max"] - df["greedy_habit"])
    df["budget_awareness_points"] = 100 * (df["optimum"] - df["blind_t_max"])
    df["budget_awareness_vs_mix_points"] = 100 * (df["optimum"] - df["blind_mix"])
    df["within_episode_points"] = 100 * (df["optimum"] - df["blind_own_budget"])
    return df
