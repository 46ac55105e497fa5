"""Doorway maps: FrozenLake tasks on which reading the turns left is worth at least 10 points on every map.

On random maps an agent trained on BudgetMix's budget mix gains little by reading its budget (`frozenlake.mix_gap`:
1.7 points on the cpu testbed's selected test maps): a blind policy that rushes loses only at long budgets. A
doorway map makes the budget decide the move, the same way on every map:

    S in a corner, the goal G next to it along one wall, a hole next to it along the other wall; every other cell
    is random decoration (frozen or hole) that S cannot reach, under one of the 8 rotations and reflections.

From S two moves matter. *Rush* (toward G) reaches G with p (the ice's success rate), slips into the hole with
(1 - p) / 2 and stays with (1 - p) / 2. *Press* (into the wall on G's side, away from the hole) never dies and slips
onto G with (1 - p) / 2. With few turns left only rushing can arrive in time; with many, pressing is safe and sure.
The DP (`frozenlake.optimal_q`) gives the threshold: at p = 0.55 and T_max = 8 the optimum rushes iff at most 2
turns are left, on every map (the decoration is unreachable, so it cannot change a number).

`choose_success_rate` picks p by DP: among candidate rates, the one whose smaller gap is largest where both the
mix gap (optimum minus the best deterministic budget-blind policy for the mix, `frozenlake.mix_gap`) and the clock
gap (optimum minus the best *clock-aware* blind policy, which knows how many turns it has taken but not the budget:
`clock_aware_success`) are at least `min_gap` points and Q* separates the best move from the next by at least
`min_margin` at every turns-left value. Train and test maps come from disjoint seed streams and are checked disjoint
by the rendered map.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from helpers.budget import budget_at, budgetmix_candidates
from helpers.envs import frozenlake_dp as fl
from helpers.envs.base import Task, check_split, seeded_subset
from helpers.envs.frozenlake_text import render

FAMILY = "doorway"
ID_PREFIX = "door"
RATES = tuple(
    round(0.3 + 0.05 * i, 2) for i in range(14)
)  # 0.30 .. 0.95: the candidates of choose_success_rate
MIN_GAP = 10.0  # points: the least mix gap and clock gap a chosen rate must give
MIN_MARGIN = 0.02  # the least Q* difference between the best move and the next at every turns-left value
_MOVES = {(0, -1): 0, (1, 0): 1, (0, 1): 2, (-1, 0): 3}  # (dr, dc) -> gymnasium's action index


def _transform(k: int, size: int, r: int, c: int) -> tuple[int, int]:
    """Symmetry k (0..7) of the square: k & 3 quarter turns, then a reflection where k >= 4."""
    for _ in range(k & 3):
        r, c = c, size - 1 - r
    return (r, size - 1 - c) if k >= 4 else (r, c)


def generate(size: int, hole_p: float, seed: int) -> tuple[str, ...]:
    """One doorway map: S at (0, 0), G at (0, 1), a hole at (1, 0), the other cells holes with probability `hole_p`,
    then one of the 8 symmetries of the square (all drawn from `seed`)."""
    if size < 3:
        raise ValueError(f"doorway maps need size >= 3, got {size}")
    rng = np.random.default_rng([int(seed), 11])
    grid = [["H" if rng.random() < hole_p else "F" for _ in range(size)] for _ in range(size)]
    grid[0][0], grid[0][1], grid[1][0] = "S", "G", "H"
    k = int(rng.integers(8))
    out = [[""] * size for _ in range(size)]
    for r in range(size):
        for c in range(size):
            nr, nc = _transform(k, size, r, c)
            out[nr][nc] = grid[r][c]
    return tuple("".join(row) for row in out)


def _neighbours(desc, r: int, c: int) -> dict[str, tuple[int, int]]:
    n, m = len(desc), len(desc[0])
    out = {}
    for dr, dc in _MOVES:
        if 0 <= r + dr < n and 0 <= c + dc < m:
            out.setdefault(desc[r + dr][c + dc], (dr, dc))
    return out


def is_doorway(desc) -> bool:
    """Whether a map has the doorway shape: S in a corner whose two neighbours are G and a hole."""
    n, m = len(desc), len(desc[0])
    r, c = divmod(fl.start_state(desc), m)
    if r not in (0, n - 1) or c not in (0, m - 1):
        return False
    cells = sorted(desc[r + dr][c + dc] for dr, dc in _MOVES if 0 <= r + dr < n and 0 <= c + dc < m)
    return cells == ["G", "H"]


def moves(desc) -> dict[str, int]:
    """The two moves that matter at S: `rush` (toward G) and `press` (into the wall on G's side, away from the
    hole), as gymnasium action indices."""
    if not is_doorway(desc):
        raise ValueError("not a doorway map: S must sit in a corner between G and a hole")
    r, c = divmod(fl.start_state(desc), len(desc[0]))
    near = _neighbours(desc, r, c)
    (gr, gc), (hr, hc) = near["G"], near["H"]
    return {"rush": _MOVES[(gr, gc)], "press": _MOVES[(-hr, -hc)]}


def family(task: Task) -> str:
    """A FrozenLake task's family: `doorway` or `random`."""
    return task.payload.get("family", "random")


def is_doorway_id(task_id: str) -> bool:
    """Whether a task id names a doorway task (`tasks` numbers them `door<size>-<split>-<i>`)."""
    return str(task_id).startswith(ID_PREFIX)


def _task(desc, success_rate: float, t_max: int, task_id: str = "doorway", gamma: float = 0.95) -> Task:
    payload = {
        "desc": list(desc),
        "is_slippery": True,
        "success_rate": float(success_rate),
        "gamma": gamma,
        "family": FAMILY,
    }
    return Task(task_id=task_id, env="frozenlake", payload=payload, t_max=int(t_max))


# ------------------------------------------------------------------------------------ the numbers, by DP


def clock_aware_success(task: Task, weights: np.ndarray) -> float:
    """The best success of a *clock-aware* budget-blind policy, averaged over budgets with `weights` (index h-1 is
    budget h): the policy sees its square and how many turns it has taken, not the budget. Exact by backward DP:
    reaching G at turn t + 1 pays in every budget >= t + 1, so V_t(s) = max_a [W_t R(s, a) + C(s, a) V_{t+1}], with
    W_t = P(budget >= t + 1) and V_H = 0; the value is V_0(start)."""
    R, C, start, _ = fl.blind_tables(task)
    w = np.asarray(weights, float)
    tail = w[::-1].cumsum()[::-1]  # W_t = sum of w[h-1] for h >= t + 1
    V = np.zeros(R.shape[0])
    for t in range(len(w) - 1, -1, -1):
        V = (tail[t] * R + C @ V).max(axis=1)
    return float(V[start])


def gaps(desc, success_rate: float, t_max: int) -> dict:
    """What the DP says of one doorway map at one success rate: the mix gap, the clock gap and the blind policy for
    T_max's gaps at 25 / 50 % of T_max (points), the smallest Q* margin over turns left 1..T_max, the largest number
    of turns left at which the optimum rushes, and the move each blind policy plays at S."""
    task = _task(desc, success_rate, t_max)
    d = tuple(desc)
    q = fl._optimal_q(d, int(t_max), 1.0, True, float(success_rate))
    s = fl.start_state(d)
    mv = moves(d)
    cands = budgetmix_candidates(int(t_max))
    w = fl.horizon_weights({T: 1.0 / len(cands) for T in cands})
    optimum = float(sum(wh * q[h + 1, s].max() for h, wh in enumerate(w)))
    sorted_q = np.sort(q[1:, s], axis=1)
    rushes = [h for h in range(1, t_max + 1) if q[h, s].argmax() == mv["rush"]]
    blind_mix = max(
        range(4), key=lambda a: float(fl.blind_success(task, np.full(len(d) * len(d[0]), a), t_max) @ w)
    )
    blind_t = int(q[t_max, s].argmax())
    t_curve = fl.blind_success(task, np.full(len(d) * len(d[0]), blind_t), t_max)
    return {
        "success_rate": float(success_rate),
        "mix_gap": fl.mix_gap(task),
        "clock_gap": 100.0 * (optimum - clock_aware_success(task, w)),
        "gap_t_max_25": 100.0 * (q[budget_at(0.25, t_max), s].max() - t_curve[budget_at(0.25, t_max) - 1]),
        "gap_t_max_50": 100.0 * (q[budget_at(0.5, t_max), s].max() - t_curve[budget_at(0.5, t_max) - 1]),
        "margin": float((sorted_q[:, -1] - sorted_q[:, -2]).min()),
        "rush_up_to": max(rushes) if rushes else 0,
        "blind_mix_move": "rush"
        if blind_mix == mv["rush"]
        else "press"
        if blind_mix == mv["press"]
        else "other",
        "blind_t_max_move": "rush"
        if blind_t == mv["rush"]
        else "press"
        if blind_t == mv["press"]
        else "other",
    }


def rate_table(t_max: int, size: int = 4, rates=RATES) -> pd.DataFrame:
    """`gaps` of the canonical doorway map (no decoration holes: it cannot change a number) at each rate."""
    desc = generate(size, 0.0, 0)
    return pd.DataFrame([gaps(desc, p, t_max) for p in rates]).set_index("success_rate")


@functools.lru_cache(maxsize=64)
def choose_success_rate(
    t_max: int, size: int = 4, min_gap: float = MIN_GAP, min_margin: float = MIN_MARGIN
) -> float:
    """The success rate of doorway ice: of `RATES`, the one whose smaller of mix gap and clock gap is largest among
    those where both reach `min_gap` points and every Q* margin reaches `min_margin`. Raises where none does."""
    table = rate_table(int(t_max), size)
    ok = table[
        (table["mix_gap"] >= min_gap) & (table["clock_gap"] >= min_gap) & (table["margin"] >= min_margin)
    ]
    if ok.empty:
        best = table[["mix_gap", "clock_gap"]].min(axis=1).max()
        raise ValueError(
            f"doorway: no success rate in {RATES[0]:g}..{RATES[-1]:g} gives a mix gap and a clock gap of at least "
            f"{min_gap:g} points with a Q* margin of {min_margin:g} at T_max = {t_max} (the best smaller gap is "
            f"{best:.1f}); lower env.frozenlake.doorway_min_gap or change t_max"
        )
    return float(ok[["mix_gap", "clock_gap"]].min(axis=1).idxmax())


# ----------------------------------------------------------------------------------------------- the maps


_SPLIT_SEED = {"test": 0, "train": 70_000_000}


@functools.lru_cache(maxsize=16)
def map_sets(size: int, hole_p: float, n_train: int, n_test: int, map_seed: int) -> dict[str, list[tuple]]:
    """Disjoint train and test doorway maps: each split from its own seed stream, deduplicated by the rendered map,
    training maps that render as a test map skipped (checked, not assumed)."""
    base = int(map_seed) * 100_000_000 + 3_000_000
    seen: dict[str, dict[str, tuple]] = {"test": {}, "train": {}}
    for split, n in (("test", n_test), ("train", n_train)):
        seed = base + _SPLIT_SEED[split]
        while len(seen[split]) < n:
            desc = generate(size, hole_p, seed)
            seed += 1
            if seed - base - _SPLIT_SEED[split] > 50 * n + 1000:
                raise ValueError(f"doorway: could not draw {n} distinct {split} maps of size {size}")
            key = render(desc, fl.start_state(desc))
            if key not in seen["test"] and key not in seen["train"]:
                seen[split][key] = desc
    assert not set(seen["train"]) & set(seen["test"]), "doorway train and test maps overlap"
    return {split: list(maps.values()) for split, maps in seen.items()}


def tasks(
    split: str,
    n: int | None,
    seed: int,
    *,
    size: int,
    hole_p: float,
    t_max: int,
    success_rate: float,
    gamma: float,
    n_train: int,
    n_test: int,
    map_seed: int,
) -> list[Task]:
    """Doorway tasks of one split (`door<size>-<split>-<i>`), a seeded subset of `n` where given."""
    check_split(split, "frozenlake")
    maps = map_sets(size, hole_p, n_train, n_test, map_seed)[split]
    return [
        _task(desc, success_rate, t_max, f"{ID_PREFIX}{size}-{split}-{i:05d}", gamma)
        for i, desc in seeded_subset(list(enumerate(maps)), n, seed)
    ]


def references(tasks_: list[Task], budgets: list[int]) -> pd.DataFrame:
    """Exact success by budget, averaged over doorway tasks, of the optimum, the blind policy for the mix (always
    rush) and the blind policy for T_max (always press): rows reference, columns budgets."""
    rows = {"optimum": {}, "rush (blind for the mix)": {}, "press (blind for T_max)": {}}
    for T in budgets:
        opt, rush, press = [], [], []
        for t in tasks_:
            d = tuple(t.payload["desc"])
            n_states = len(d) * len(d[0])
            mv = moves(d)
            opt.append(fl.upper_bound(t, T))
            rush.append(fl.blind_success(t, np.full(n_states, mv["rush"]), T)[-1])
            press.append(fl.blind_success(t, np.full(n_states, mv["press"]), T)[-1])
        rows["optimum"][T] = float(np.mean(opt))
        rows["rush (blind for the mix)"][T] = float(np.mean(rush))
        rows["press (blind for T_max)"][T] = float(np.mean(press))
    return pd.DataFrame(rows).T


def configured_rate(fl_cfg) -> float | None:
    """The doorway ice's success rate a FrozenLake config (`env.frozenlake`) gives its doorway tasks, or None where
    it has none (`doorway_share` 0)."""
    if not getattr(fl_cfg, "doorway_share", 0.0):
        return None
    chosen = fl_cfg.doorway_success_rate
    return float(chosen) if chosen else choose_success_rate(fl_cfg.t_max, fl_cfg.size, fl_cfg.doorway_min_gap)
