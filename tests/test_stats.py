"""Paired statistics (helpers.stats): known answers on hand-made data and the minimum detectable effect against a
simulation (the null calibration by rollouts is tests/test_stats_null.py)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import stats


def test_paired_t_interval_on_hand_made_data():
    """d = 1, 2, 3, 4, 5: mean 3, sd sqrt(2.5), se 0.7071, t_{4, 0.975} = 2.776445."""
    a = np.array([[2.0, 2.0], [4.0, 4.0], [6.0, 6.0], [8.0, 8.0], [10.0, 10.0]])
    b = a / 2 + np.array([[0.0], [0.0], [0.0], [0.0], [0.0]])
    out = stats.paired_t_interval(a, b)
    assert out["diff"] == pytest.approx(3.0)
    assert out["se"] == pytest.approx(np.sqrt(2.5 / 5))
    assert (out["low"], out["high"]) == pytest.approx(
        (3 - 2.776445 * 0.707107, 3 + 2.776445 * 0.707107), abs=1e-5
    )
    assert out["per_seed"] == pytest.approx([1, 2, 3, 4, 5])
    assert stats.excludes_zero(out)
    # the pairing matters: a seed effect shared by both arms cancels in the differences
    shared = np.array([0.0, 5.0, -3.0, 8.0, 1.0])[:, None]
    same = stats.paired_t_interval(a + shared, b + shared)
    assert (same["low"], same["high"]) == pytest.approx((out["low"], out["high"]))


def test_paired_t_interval_refuses_unpaired_arms():
    with pytest.raises(ValueError, match="same shape"):
        stats.paired_t_interval([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.paired_t_interval([1.0], [0.0])


def test_nested_bootstrap_and_variance_components_on_hand_made_data():
    """Constant differences: the bootstrap interval is that constant; the components are the planted SDs."""
    a = np.full((4, 6), 0.7)
    b = np.full((4, 6), 0.5)
    out = stats.paired_nested_bootstrap(a, b, n_boot=200)
    assert (out["diff"], out["low"], out["high"]) == pytest.approx((0.2, 0.2, 0.2))
    # d_ij = s_i + e_j with seed offsets s = (-1, 1, -1, 1) and task noise e = (-1, 1) * 2
    d = np.array([-1.0, 1.0, -1.0, 1.0])[:, None] + np.array([-2.0, 2.0] * 3)[None, :]
    comp = stats.variance_components(d, np.zeros_like(d))
    assert comp["sd_within"] == pytest.approx(np.sqrt(np.var([-2, 2] * 3, ddof=1)))
    assert comp["sd_seed_mean"] == pytest.approx(np.sqrt(np.var([-1, 1, -1, 1], ddof=1)))
    assert comp["sd_between"] == pytest.approx(np.sqrt(4 / 3 - comp["sd_within"] ** 2 / 6))
    assert stats.design_sd(1.0, 2.0, 4) == pytest.approx(np.sqrt(2.0))


def test_mde_is_where_a_simulated_paired_t_test_has_80_percent_power():
    """Exact noncentral-t MDE: many seeds -> the normal formula; 5 seeds -> a simulated t-test rejects at the MDE
    80 % of the time (and about 5 % at 0)."""
    assert stats.mde(1.0, 2000) == pytest.approx((1.959964 + 0.841621) / np.sqrt(2000), rel=2e-3)
    assert stats.mde(1.0, 5) > (1.959964 + 0.841621) / np.sqrt(5)  # few seeds pay for the t-quantiles
    effect = stats.mde(1.0, 5)
    assert stats.power(effect, 1.0, 5) == pytest.approx(0.8, abs=1e-9)
    rng = np.random.default_rng(0)
    for true, expected in ((effect, 0.8), (0.0, 0.05)):
        d = rng.normal(true, 1.0, size=(20000, 5))
        t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / np.sqrt(5))
        assert np.mean(np.abs(t) > 2.776445) == pytest.approx(expected, abs=0.015)


def test_cluster_bootstrap_resamples_clusters():
    """Two maps of many identical states each: the interval spans the two map means (a unit bootstrap would give
    almost nothing); one value per cluster reduces to the plain bootstrap."""
    v = np.array([0.0] * 50 + [1.0] * 50)
    c = ["a"] * 50 + ["b"] * 50
    mean, low, high = stats.cluster_bootstrap(v, c, n_boot=2000)
    assert mean == pytest.approx(0.5)
    assert low == pytest.approx(0.0) and high == pytest.approx(1.0)
    from helpers.metrics import bootstrap_ci

    x = np.random.default_rng(1).normal(size=40)
    _, lo, hi = stats.cluster_bootstrap(x, [str(i) for i in range(40)], n_boot=4000, seed=3)
    ref = bootstrap_ci(x, n_boot=4000, seed=3)
    assert (lo, hi) == pytest.approx(ref, abs=0.05)
