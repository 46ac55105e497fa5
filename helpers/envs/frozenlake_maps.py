"""FrozenLake's maps: the generator, the selection rule, and the disjoint train and test sets (kept on disk).

Maps come from gymnasium's random-map generator; start and goal are then placed at random distinct cells with a
path between them (rLLM's variant, `random_map`). Train and test maps are drawn from disjoint seed streams and
deduplicated by the rendered map, and the split is checked to be disjoint (`map_sets`). A profile may keep only maps
on which reading the budget is worth something (`selected`: `budget_gaps`, `mix_gap`, by DP); a selected set is
cached on disk under the hash of the code that draws and judges maps (`_selection_code`). `helpers.envs.frozenlake`
re-exports every public name here; this module sits below the environment and imports only the oracle
(`frozenlake_dp`) and the rendering (`frozenlake_text`).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import inspect
import json
import multiprocessing as mp
import os
from collections import deque
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from helpers.budget import budget_at
from helpers.envs.base import Task
from helpers.envs.frozenlake_dp import (
    _optimal_q,
    blind_success,
    coordinate_ascent,
    dynamics,
    horizon_weights,
    mix_gap,
    start_state,
)
from helpers.envs.frozenlake_text import render

# ------------------------------------------------------------------------------------------ the generator


def shortest_path(desc: tuple[str, ...] | list[str]) -> int | None:
    """Fewest moves from S to G avoiding holes (None if unreachable)."""
    n = len(desc)
    m = len(desc[0])
    start = divmod(start_state(desc), m)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if desc[r][c] == "G":
            return seen[(r, c)]
        for dr, dc in ((0, -1), (1, 0), (0, 1), (-1, 0)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < n and 0 <= nc < m and desc[nr][nc] != "H" and (nr, nc) not in seen:
                seen[(nr, nc)] = seen[(r, c)] + 1
                queue.append((nr, nc))
    return None


def random_map(size: int, hole_p: float, seed: int) -> tuple[str, ...] | None:
    """A map from gymnasium's generator with S and G moved to random distinct reachable cells (or None)."""
    board = [
        list(row.replace("S", "F").replace("G", "F")) for row in generate_random_map(size, 1 - hole_p, seed)
    ]
    rng = np.random.default_rng([seed, 1])
    free = [(r, c) for r in range(size) for c in range(size) if board[r][c] == "F"]
    for _ in range(20):
        i, j = rng.choice(len(free), size=2, replace=False)
        trial = [row[:] for row in board]
        trial[free[i][0]][free[i][1]] = "S"
        trial[free[j][0]][free[j][1]] = "G"
        desc = tuple("".join(row) for row in trial)
        if shortest_path(desc) is not None:
            return desc
    return None


# ------------------------------------------------------------------------------------------ the selection

# The map selection of `env.frozenlake.select_min_gap`: the budgets, as fractions of T_max, whose gaps are averaged.
SELECT_FRACTIONS = (0.25, 0.5, 0.75)


def budget_gaps(task: Task, fractions: Sequence[float] = SELECT_FRACTIONS) -> np.ndarray:
    """The budget-awareness gap of one map, in points, at each fraction of its T_max (`task.t_max`): the optimum's
    success minus that of a blind policy for T_max, the local optimum that coordinate ascent reaches from the greedy
    policy on the optimum's Q* at T_max (one start of `helpers.headroom.best_blind_policy`, which searches from more
    and so can only find a blind policy as good or better at T_max). What the map selection reads: cheap (about 2 ms
    on a 4x4 map) and exact for its policy."""
    desc, slippery, rate = dynamics(task)
    t_max = int(task.t_max)
    q = _optimal_q(desc, t_max, 1.0, slippery, rate)
    start = start_state(desc)
    blind, _ = coordinate_ascent(task, q[t_max].argmax(axis=1), horizon_weights({t_max: 1.0}))
    curve = blind_success(task, blind, t_max)
    budgets = [budget_at(f, t_max) for f in fractions]
    return np.array([100.0 * (q[T, start].max() - curve[T - 1]) for T in budgets])


def selected(desc: tuple[str, ...], select: tuple[bool, float, int, float, float] | None) -> bool:
    """Whether a generated map passes the selection `(is_slippery, success_rate, t_max, min_gap, min_mix_gap)`:
    its mean `budget_gaps` over `SELECT_FRACTIONS` is at least min_gap points and its `mix_gap` at least
    min_mix_gap (a rule at 0 is off; None: no selection, every map passes). The mix gap is tried first from the
    shortest horizon alone, an upper bound of the full search's gap, so most maps are rejected by one ascent."""
    if select is None:
        return True
    slippery, rate, t_max, min_gap, min_mix_gap = select
    task = Task(
        "select", "frozenlake", {"desc": list(desc), "is_slippery": slippery, "success_rate": rate}, t_max
    )
    if min_mix_gap > 0 and (
        mix_gap(task, (max(1, t_max // 4),)) < min_mix_gap or mix_gap(task) < min_mix_gap
    ):
        return False
    return not min_gap > 0 or bool(budget_gaps(task).mean() >= min_gap)


# ----------------------------------------------------------------------------------------- the map sets

_SPLIT_OFFSET = {"test": 0, "train": 50_000_000}


@functools.lru_cache(maxsize=16)
def map_sets(
    size: int,
    hole_p: float,
    n_train: int,
    n_test: int,
    map_seed: int,
    select: tuple[bool, float, int, float, float] | None = None,
) -> dict[str, list[tuple]]:
    """Disjoint train and test map sets, deduplicated by the rendered map (checked, not assumed).

    With `select = (is_slippery, success_rate, t_max, min_gap, min_mix_gap)` (`env.frozenlake.select_min_gap` or
    `select_min_mix_gap` > 0) a generated
    map is kept only if it passes `selected`, the same rule for both splits, before deduplication; each split still
    draws from its own seed stream, so the two stay disjoint. Selection costs about 40 ms of CPU per kept map, in
    every process that needs the maps (a notebook's kernel, each RL worker), so a selected set is also kept on disk
    (`map_cache_dir`), named by the hash of its arguments and of the code that draws and judges maps
    (`_selection_code`): a changed rule or gymnasium version draws afresh. Written to a temporary name and renamed,
    so concurrent processes never read half a file.
    """
    if select is None:
        return _draw_sets(size, hole_p, n_train, n_test, map_seed, None)
    key = json.dumps([size, hole_p, n_train, n_test, map_seed, list(select), _selection_code()])
    path = map_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        try:
            stored = json.loads(path.read_text())
            return {split: [tuple(d) for d in stored[split]] for split in ("train", "test")}
        except (json.JSONDecodeError, KeyError, TypeError):
            pass  # a damaged cache file is drawn again and replaced
    sets = _draw_sets(size, hole_p, n_train, n_test, map_seed, select)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({split: [list(d) for d in maps] for split, maps in sets.items()}))
    os.replace(tmp, path)
    return sets


DRAW_WORKERS = 2  # processes that judge the candidate maps of a selected set (1: judged here, one by one)
_BLOCK = 512  # candidates generated, then judged together, at a time


def _candidates(
    size: int, hole_p: float, seed: int, select, pool
) -> Iterator[tuple[int, tuple | None, bool]]:
    """(seed, map or None, whether it passes `selected`) for seeds `seed`, `seed + 1`, ..., in that order. The
    judging, the costly part, is done a block at a time, by `pool` where one is given: the maps and verdicts are the
    same either way (`selected` depends on the map alone), a pool only computes some past the last one used."""
    while True:
        descs = [random_map(size, hole_p, s) for s in range(seed, seed + _BLOCK)]
        todo = [d for d in descs if d is not None]
        if select is None:
            verdicts = [True] * len(todo)
        elif pool is None:
            verdicts = [selected(d, select) for d in todo]
        else:
            verdicts = list(pool.map(selected, todo, [select] * len(todo), chunksize=32))
        judged = iter(verdicts)
        for d in descs:
            yield seed, d, d is not None and next(judged)
            seed += 1


def _judging_pool(select) -> cf.ProcessPoolExecutor | None:
    """Worker processes for judging candidate maps, or None: without a selection rule, with one worker
    (`DRAW_WORKERS`), on one core, or inside one of the kit's worker processes (`KIT_WORKER`)."""
    workers = min(DRAW_WORKERS, os.cpu_count() or 1)
    if select is None or workers <= 1 or os.environ.get("KIT_WORKER"):
        return None
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
    else:
        ctx = mp.get_context("spawn")
    return cf.ProcessPoolExecutor(workers, mp_context=ctx)


def _draw_sets(
    size: int,
    hole_p: float,
    n_train: int,
    n_test: int,
    map_seed: int,
    select: tuple[bool, float, int, float, float] | None,
) -> dict[str, list[tuple]]:
    """`map_sets` drawn from the generator (no cache); a selected set's candidates are judged in worker processes
    (`_judging_pool`), which draws the same maps as judging them one by one."""
    pool = _judging_pool(select)
    try:
        return _draw_sets_with(size, hole_p, n_train, n_test, map_seed, select, pool)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _draw_sets_with(size, hole_p, n_train, n_test, map_seed, select, pool) -> dict[str, list[tuple]]:
    """`_draw_sets` with the candidates judged by `pool` (or here, where None)."""
    base = map_seed * 100_000_000
    rule = (
        ""
        if select is None
        else f" passing the selection (select_min_gap {select[3]}, select_min_mix_gap {select[4]})"
    )
    test: dict[str, tuple] = {}
    for seed, desc, passes in _candidates(size, hole_p, base + _SPLIT_OFFSET["test"], select, pool):
        if len(test) >= n_test:
            break
        if select is not None and seed + 1 - base - _SPLIT_OFFSET["test"] > 200 * n_test + 1_000:
            raise ValueError(
                f"frozenlake: only {len(test)} of {n_test} test maps of size {size}{rule} in "
                f"{seed + 1 - base - _SPLIT_OFFSET['test']} generated maps; lower env.frozenlake.select_min_gap or select_min_mix_gap"
            )
        if passes:
            test.setdefault(render(desc, start_state(desc)), desc)
    train: dict[str, tuple] = {}
    limit = 50 * n_train + 10_000 if select is None else 200 * n_train + 1_000
    for seed, desc, passes in _candidates(size, hole_p, base + _SPLIT_OFFSET["train"], select, pool):
        if len(train) >= n_train:
            break
        if seed + 1 - base - _SPLIT_OFFSET["train"] > limit:
            raise ValueError(
                f"frozenlake: could not find {n_train} distinct training maps of size {size}{rule} disjoint from "
                f"the test maps; lower env.frozenlake.n_train or raise env.frozenlake.size"
                + ("" if select is None else " or lower env.frozenlake.select_min_gap or select_min_mix_gap")
            )
        if desc is None:
            continue
        key = render(desc, start_state(desc))
        if key not in test and key not in train and passes:
            train[key] = desc
    overlap = set(train) & set(test)
    assert not overlap, f"train and test maps overlap: {len(overlap)}"
    return {"train": list(train.values()), "test": list(test.values())}


# -------------------------------------------------------------------------------------------- the cache


def _selection_code() -> str:
    """What a selected map set depends on besides its arguments: the source of every function that draws or judges
    a map, and gymnasium's version (its generator and transition table)."""
    fns = (
        random_map,
        shortest_path,
        selected,
        budget_gaps,
        mix_gap,
        coordinate_ascent,
        blind_success,
        _optimal_q,
        _draw_sets,
        _draw_sets_with,
        _candidates,
    )
    src = "".join(inspect.getsource(getattr(f, "__wrapped__", f)) for f in fns)
    return hashlib.sha256((src + metadata.version("gymnasium")).encode()).hexdigest()


def map_cache_dir() -> Path:
    """Where selected map sets are kept across processes: `KIT_MAP_CACHE` when set (one folder for several results
    roots: the test session's, whose every test has a results root of its own, shares it), else
    `<results root>/_cache/frozenlake-maps` (the results root as `helpers.store.results_root` reads it; this module
    sits below `store` and cannot import it). A file is named by everything that draws it, so sharing is safe."""
    if os.environ.get("KIT_MAP_CACHE"):
        return Path(os.environ["KIT_MAP_CACHE"])
    root = Path(os.environ.get("KIT_RESULTS", Path(__file__).resolve().parents[2] / "results"))
    return root / "_cache" / "frozenlake-maps"
