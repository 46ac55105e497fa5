"""Paired statistics over RL seeds, what a design can detect, and a bootstrap over clusters of units.

Two arms trained with the same seeds (BudgetMix and GRPO, say, seed i of one paired with seed i of the other: they
share the base, the seed's base-side pools and its evaluation streams) are compared through the seed differences
d_i = (mean over tasks of arm a, seed i) - (the same of arm b, seed i):

* `paired_t_interval`: mean(d) +- t_{n-1, (1+ci)/2} sd(d) / sqrt(n), the t-interval on seed differences. It treats
  the evaluation tasks as fixed (inference about these test maps) and covers seed-to-seed variance and each seed's
  evaluation noise, since both are in d_i. It is exact for normal d_i, and the default verdict.
* `paired_nested_bootstrap`: a percentile bootstrap that resamples seed pairs, then tasks within each drawn pair
  (the same tasks for both arms of the pair), so it also covers the sampling of tasks. It is not the default: with
  few seeds a percentile bootstrap has no t-quantile, and resampling tasks inside resampled seeds counts the
  within-seed noise twice; under the identical-policy null of tests/test_stats_null.py (5 seeds) it excluded 0 in
  0 of 30 replicates (the t-interval in 1 of 30), so there it is conservative.
* `mde`: the smallest true difference a two-sided paired t-test at level alpha detects with the stated power
  (exact, by the noncentral t), for n seeds, from the SD of a seed difference; `design_sd` builds that SD for m
  tasks from a between-seed SD and a within-seed per-task SD (`variance_components` estimates both from data), so
  more maps shrink only the second part.
* `paired_verdict`: the verdict of one comparison as the notebooks report it: the t-interval, whether it excludes 0,
  and beside it the MDE at 80 % power of the design that produced it (from `variance_components` of [n_seeds,
  n_tasks] arrays, or `unit_variance_components` of per-seed unit differences whose units differ between seeds,
  such as each seed's own probe states), so an interval that contains 0 says how large an effect it could have
  missed.
* `cluster_bootstrap`: a mean over units (probe states) with a percentile interval that resamples clusters (the
  maps the states come from), since states of one map are not independent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize
from scipy.stats import nct, norm
from scipy.stats import t as student_t


def _check_ci(ci: float) -> None:
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")


def _pair(a: np.ndarray | Sequence, b: np.ndarray | Sequence) -> tuple[np.ndarray, np.ndarray]:
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_arr.shape != b_arr.shape:
        raise ValueError(
            f"paired arms need the same shape (seed i with seed i), got {a_arr.shape} and {b_arr.shape}"
        )
    if a_arr.shape[0] < 2:
        raise ValueError(f"a paired interval over seeds needs at least 2 seeds, got {a_arr.shape[0]}")
    if not (np.all(np.isfinite(a_arr)) and np.all(np.isfinite(b_arr))):
        raise ValueError("paired arms contain NaN or inf")
    return a_arr, b_arr


def seed_differences(a: np.ndarray | Sequence, b: np.ndarray | Sequence) -> np.ndarray:
    """d_i = mean of a's seed i - mean of b's seed i; `a`, `b` are [n_seeds] seed means or [n_seeds, n_tasks]."""
    a_arr, b_arr = _pair(a, b)
    if a_arr.ndim == 1:
        return a_arr - b_arr
    return a_arr.mean(axis=1) - b_arr.mean(axis=1)


def paired_t_interval(a: np.ndarray | Sequence, b: np.ndarray | Sequence, ci: float = 0.95) -> dict:
    """The t-interval of the mean seed difference (module docstring): {diff, low, high, se, n_seeds, per_seed}."""
    _check_ci(ci)
    d = seed_differences(a, b)
    n = d.size
    se = float(d.std(ddof=1) / np.sqrt(n))
    half = float(student_t.ppf((1 + ci) / 2, n - 1)) * se
    mean = float(d.mean())
    return {
        "diff": mean,
        "low": mean - half,
        "high": mean + half,
        "se": se,
        "n_seeds": n,
        "per_seed": [float(x) for x in d],
        "method": "t-interval on paired seed differences",
    }


def paired_nested_bootstrap(
    a: np.ndarray, b: np.ndarray, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> dict:
    """Mean seed difference of [n_seeds, n_tasks] arrays with a two-level percentile bootstrap: each draw resamples
    seed pairs, then, within each drawn pair, tasks (one draw of tasks for both arms). {diff, low, high, n_seeds}."""
    _check_ci(ci)
    a_arr, b_arr = _pair(a, b)
    if a_arr.ndim != 2:
        raise ValueError("paired_nested_bootstrap needs [n_seeds, n_tasks] arrays")
    d = a_arr - b_arr
    n, m = d.shape
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, n, size=(n_boot, n))
    tasks = rng.integers(0, m, size=(n_boot, n, m))
    stats = d[seeds[..., None], tasks].mean(axis=(1, 2))
    low, high = np.percentile(stats, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return {
        "diff": float(d.mean()),
        "low": float(low),
        "high": float(high),
        "n_seeds": n,
        "method": "nested bootstrap: seed pairs, then tasks",
    }


def excludes_zero(interval: dict) -> bool:
    """Whether an interval ({low, high}) lies wholly on one side of 0: the only way a verdict is decided."""
    return bool(interval["low"] > 0 or interval["high"] < 0)


def variance_components(a: np.ndarray, b: np.ndarray) -> dict:
    """From [n_seeds, n_tasks] arrays of two paired arms: the within-seed SD of a per-task difference
    (`sd_within`, the mean over seeds of its variance over tasks), the SD of the seed differences (`sd_seed_mean`)
    and the between-seed SD (`sd_between`, what is left of the latter's variance after the within part / n_tasks,
    floored at 0). `design_sd(sd_between, sd_within, n_tasks)` then gives the seed-difference SD of another design."""
    a_arr, b_arr = _pair(a, b)
    d = a_arr - b_arr
    m = d.shape[1]
    within = float(d.var(axis=1, ddof=1).mean()) if m > 1 else 0.0
    seed_var = float(d.mean(axis=1).var(ddof=1))
    return {
        "sd_within": float(np.sqrt(within)),
        "sd_seed_mean": float(np.sqrt(seed_var)),
        "sd_between": float(np.sqrt(max(seed_var - within / m, 0.0))),
        "n_seeds": d.shape[0],
        "n_tasks": m,
    }


def design_sd(sd_between: float, sd_within: float, n_tasks: float) -> float:
    """The SD of one seed difference when each seed is evaluated on `n_tasks` tasks: sqrt(between^2 + within^2/m)."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    return float(np.sqrt(sd_between**2 + sd_within**2 / n_tasks))


def power(effect: float, sd_diff: float, n_seeds: int, alpha: float = 0.05) -> float:
    """The probability that a two-sided paired t-test at level alpha over n seeds rejects 0 when the true mean seed
    difference is `effect` and one seed difference has SD `sd_diff` (noncentral t with n - 1 degrees of freedom)."""
    if n_seeds < 2 or sd_diff <= 0:
        raise ValueError(f"power needs n_seeds >= 2 and sd_diff > 0, got {n_seeds}, {sd_diff}")
    df = n_seeds - 1
    crit = float(student_t.ppf(1 - alpha / 2, df))
    ncp = effect * np.sqrt(n_seeds) / sd_diff
    out = float(nct.sf(crit, df, ncp) + nct.cdf(-crit, df, ncp))
    if np.isnan(out):  # scipy's noncentral t gives NaN far in the tail (many seeds, large ncp): normal there
        out = float(norm.sf(crit - ncp) + norm.cdf(-crit - ncp))
    return out


def mde(sd_diff: float, n_seeds: int, alpha: float = 0.05, target_power: float = 0.8) -> float:
    """The minimum detectable effect: the smallest |true mean seed difference| at which the two-sided paired
    t-test over `n_seeds` seeds at level `alpha` rejects with probability `target_power` (exact; compare the
    normal approximation (z_{1-alpha/2} + z_power) sd_diff / sqrt(n), which it approaches for many seeds)."""
    if not 0 < target_power < 1 or not alpha < target_power:
        raise ValueError(f"target_power must lie in (alpha, 1), got {target_power}")
    hi = sd_diff * (float(student_t.ppf(1 - alpha / 2, n_seeds - 1)) + 4.0) / np.sqrt(n_seeds)
    while power(hi, sd_diff, n_seeds, alpha) < target_power:
        hi *= 2
    return float(
        optimize.brentq(lambda e: power(e, sd_diff, n_seeds, alpha) - target_power, 0.0, hi, xtol=1e-12)
    )


def unit_variance_components(per_seed: Sequence[np.ndarray | Sequence[float]]) -> dict:
    """`variance_components` for per-seed unit differences whose units differ between seeds (seed k's own states,
    `per_seed[k]`: one paired difference per unit): `sd_within` from the mean over seeds of the variance over units,
    `sd_between` what is left of the seed means' variance after the mean of within / m_k, floored at 0; `n_tasks`
    is the harmonic mean of the m_k (the design's units per seed)."""
    d = [np.asarray(x, dtype=float) for x in per_seed]
    if len(d) < 2 or any(x.size == 0 for x in d):
        raise ValueError(
            f"unit_variance_components needs at least 2 seeds with units, got sizes {[x.size for x in d]}"
        )
    sizes = np.array([x.size for x in d], dtype=float)
    within = np.array([x.var(ddof=1) if x.size > 1 else 0.0 for x in d])
    seed_var = float(np.var([x.mean() for x in d], ddof=1))
    between = max(seed_var - float(np.mean(within / sizes)), 0.0)
    return {
        "sd_within": float(np.sqrt(within.mean())),
        "sd_seed_mean": float(np.sqrt(seed_var)),
        "sd_between": float(np.sqrt(between)),
        "n_seeds": len(d),
        "n_tasks": float(len(d) / np.sum(1.0 / sizes)),
    }


def paired_verdict(
    a: np.ndarray | Sequence,
    b: np.ndarray | Sequence,
    ci: float = 0.95,
    target_power: float = 0.8,
    units: Sequence[np.ndarray | Sequence[float]] | None = None,
) -> dict:
    """One comparison's verdict over paired seeds: `paired_t_interval` of a - b (seed k of a with seed k of b;
    [n_seeds] seed means or [n_seeds, n_tasks]) with `excludes_zero` and the minimum detectable effect `mde` at
    `target_power` for a two-sided test at level 1 - ci, from the SD of one seed difference of this design
    (`sd_diff`: `design_sd` of `variance_components` for [n_seeds, n_tasks] arrays, of `unit_variance_components`
    of `units` (per-seed unit differences) where given, else the SD of the seed differences). An SD of 0 (every
    seed the same) gives an MDE of 0. With a single seed there is no interval: the difference with NaN bounds and
    MDE and `excludes_zero` False (a one-seed series, e.g. the smoke tier's other environments, still reports it)."""
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_arr.shape[:1] == (1,) and a_arr.shape == b_arr.shape:
        d = float(a_arr.mean() - b_arr.mean())
        nan = float("nan")
        return {
            "diff": d,
            "low": nan,
            "high": nan,
            "se": nan,
            "n_seeds": 1,
            "per_seed": [d],
            "excludes_zero": False,
            "sd_diff": nan,
            "mde": nan,
            "power": target_power,
            "ci_level": ci,
        }
    out = paired_t_interval(a, b, ci)
    a_arr = np.asarray(a, dtype=float)
    if units is not None:
        vc = unit_variance_components(units)
    elif a_arr.ndim == 2:
        vc = variance_components(a, b)
    else:
        vc = None
    if vc is None:
        sd = float(np.std(out["per_seed"], ddof=1))
    else:
        sd = design_sd(vc["sd_between"], vc["sd_within"], vc["n_tasks"])
    n = out["n_seeds"]
    effect = mde(sd, n, 1 - ci, target_power) if sd > 0 else 0.0
    return {
        **out,
        "excludes_zero": excludes_zero(out),
        "sd_diff": sd,
        "mde": effect,
        "power": target_power,
        "ci_level": ci,
    }


def scaled(verdict: dict, scale: float) -> dict:
    """A `paired_verdict` in other units (`scale` = 100: points): every difference, bound, SD and MDE scaled."""
    keys = ("diff", "low", "high", "se", "sd_diff", "mde")
    return {
        **verdict,
        **{k: scale * verdict[k] for k in keys if k in verdict},
        "per_seed": [scale * x for x in verdict["per_seed"]],
    }


def cluster_bootstrap(
    values: np.ndarray | Sequence[float],
    clusters: Sequence,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The mean of `values` (one per unit) with a percentile interval that resamples whole clusters (units of one
    cluster, e.g. the states of one map, stay together). Returns (mean, low, high); NaN values are left out."""
    _check_ci(ci)
    v = np.asarray(values, dtype=float)
    c = np.asarray(list(clusters), dtype=object)
    if v.shape != c.shape or v.ndim != 1:
        raise ValueError(
            f"cluster_bootstrap: one cluster per value, got {v.shape} values and {c.shape} clusters"
        )
    keep = ~np.isnan(v)
    v, c = v[keep], c[keep]
    if v.size == 0:
        return float("nan"), float("nan"), float("nan")
    _, inverse = np.unique(c.astype(str), return_inverse=True)
    sums, counts = np.bincount(inverse, weights=v), np.bincount(inverse).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, sums.size, size=(n_boot, sums.size))
    stats = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    low, high = np.percentile(stats, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(v.mean()), float(low), float(high)
