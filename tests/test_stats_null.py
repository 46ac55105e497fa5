"""The null calibration of helpers.stats through the kit's own rollouts: two copies of one scripted policy (the
demonstrator) with different random streams, 5 seeds per arm paired by seed, give a 95 % t-interval that excludes 0 in
at most 10 % of replicates; a planted effect of a stated size (the budget-aware optimum against the demonstrator,
known exactly by DP on these maps) larger than the design's minimum detectable effect is detected in most."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import base_model, config, models, scripted, stats
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers.rollout import rollout

pytestmark = pytest.mark.slow  # thousands of episodes

SEEDS, BUDGET = 5, 4  # 5 seeds per arm as issue 27 asks; T = 4 (50 % of T_max)
N_NULL, NULL_SAMPLES = 30, 2  # 30 replicates, 2 episodes per map and seed
N_PLANTED, PLANTED_SAMPLES = 10, 4


@pytest.fixture(scope="module")
def setting():
    smoke, cpu = config.load("smoke"), config.load("cpu")
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    tasks = load_tasks("frozenlake", "test", **{**settings(cpu), "n_train": 50})[:8]
    return cpu, tok, tasks


def _arms(player, tasks, replicates: int, samples: int, seed: int) -> np.ndarray:
    """[replicates, SEEDS, n_tasks] mean success: one rollout call, sample j of a task is (replicate, seed, k)."""
    trajs = rollout(
        player,
        "frozenlake",
        tasks,
        BUDGET,
        replicates * SEEDS * samples,
        Sampling(),
        seed=seed,
        step_quality=False,
    )
    s = np.array([tr.success for tr in trajs], dtype=float).reshape(len(tasks), replicates, SEEDS, samples)
    return s.mean(axis=3).transpose(1, 2, 0)


def test_identical_policies_null_and_a_planted_effect(setting):
    cpu, tok, tasks = setting
    demo = lambda s, name: scripted.ScriptedPolicy.from_config(cpu, "habit", tok, True, seed=s, name=name)  # noqa: E731
    a = _arms(demo(1, "copy-a"), tasks, N_NULL, NULL_SAMPLES, 101)
    b = _arms(demo(2, "copy-b"), tasks, N_NULL, NULL_SAMPLES, 202)
    t_excl = [stats.excludes_zero(stats.paired_t_interval(a[r], b[r])) for r in range(N_NULL)]
    boot_excl = [
        stats.excludes_zero(stats.paired_nested_bootstrap(a[r], b[r], n_boot=500, seed=r))
        for r in range(N_NULL)
    ]
    print(
        f"null: t-interval excludes 0 in {np.mean(t_excl):.0%}, nested bootstrap in {np.mean(boot_excl):.0%}"
    )
    assert np.mean(t_excl) <= 0.10, np.mean(t_excl)

    # the planted effect: the budget-aware optimum against the demonstrator, its size exact by DP on these maps
    opt = scripted.ScriptedPolicy.from_config(cpu, "optimum", tok, False, seed=3, name="optimum")
    effect = np.mean(
        [
            fl.policy_success(t, opt.exact_policy(t, BUDGET), BUDGET)
            - fl.policy_success(t, base_model.demonstrator_policy(cpu, t), BUDGET)
            for t in tasks
        ]
    )
    c = _arms(opt, tasks, N_PLANTED, PLANTED_SAMPLES, 303)
    d = _arms(demo(4, "demo"), tasks, N_PLANTED, PLANTED_SAMPLES, 404)
    # the design's MDE from the observed seed-difference SD of the planted design itself (pooled over replicates)
    sd = float(
        np.sqrt(
            np.mean([stats.variance_components(c[r], d[r])["sd_seed_mean"] ** 2 for r in range(N_PLANTED)])
        )
    )
    mde = stats.mde(sd, SEEDS)
    found = [stats.paired_t_interval(c[r], d[r]) for r in range(N_PLANTED)]
    detected = np.mean([f["low"] > 0 for f in found])
    print(f"planted effect {100 * effect:.1f} points, MDE {100 * mde:.1f}, detected {detected:.0%}")
    assert effect > mde, (effect, mde)
    assert detected >= 0.7, (detected, effect, mde, stats.power(effect, sd, SEEDS))
    assert np.mean([f["diff"] for f in found]) == pytest.approx(
        effect, abs=3 * sd / np.sqrt(N_PLANTED * SEEDS)
    )
