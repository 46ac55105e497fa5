"""The identical-player null and a planted effect through the analyses of notebooks 02-05 (issue 27).

Two copies of one scripted player (the demonstrator: its habit with random moves; `helpers.scripted`) with different
random streams stand in the slots of the two methods compared; the module's own analysis function turns each
replicate's data into a 95 % interval, and the interval must exclude 0 in at most 10 % of the replicates. With
N_NULL = 200 replicates a correctly calibrated interval (exclusion probability 0.05) fails that assertion (more
than 20 exclusions) with probability binom.sf(20, 200, 0.05) = 0.0012; a conservative one less often. Each planted
effect (the budget-aware optimum against the demonstrator, its size exact by DP) must be detected.

Data are generated as the notebooks generate them (every player on the same draws of the ice, error pools built as
`recovery.error_pools` builds them, half of every copy's pool from the comparison's trajectories, the same half for
every copy), at a small scale, in a few batched calls: replicate r uses samples r of one rollout call per copy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from helpers import (
    base_model,
    budgetmix,
    config,
    metrics,
    models,
    pass_kt,
    probing,
    recovery,
    scripted,
)
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers.rollout import ChatFormat, rollout

pytestmark = pytest.mark.slow

N_NULL, N_PLANTED = 200, 10
COPIES = 3  # one copy per RL seed, as the notebooks' three seeds
BUDGET, SAMPLES = 4, 2  # notebook 02/03: T = 4 (50 % of T_max), 2 samples per task and copy in a replicate
N_ERR, N_CONT, N_MATCHED, G = (
    6,
    2,
    8,
    4,
)  # notebooks 04/05 per copy: error states, continuations, matched states, G
N_BOOT = 400
MAX_EXCLUDED = 0.10


def test_the_replicate_count_bounds_a_false_failure():
    assert binom.sf(int(MAX_EXCLUDED * N_NULL), N_NULL, 0.05) < 2e-3


@pytest.fixture(scope="module")
def setting():
    smoke, cpu = config.load("smoke"), config.load("cpu", eval__n_bootstrap=N_BOOT)
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    tasks = load_tasks("frozenlake", "test", **{**settings(cpu), "n_train": 50})[:20]

    def player(kind: str, noisy: bool, seed: int, name: str) -> scripted.ScriptedPolicy:
        return scripted.ScriptedPolicy.from_config(cpu, kind, tok, noisy, seed=seed, name=name)

    return cpu, tok, tasks[:6], player, tasks


def _excluded(intervals) -> np.ndarray:
    return np.array([lo > 0 or hi < 0 for lo, hi in intervals])


def _report(what: str, excluded: np.ndarray) -> None:
    print(f"{what}: the 95 % interval excludes 0 in {excluded.sum()} of {excluded.size} null replicates")


# ----------------------------------------------------------------------------------- notebooks 02 and 03


def _success_frame(players: dict, tasks, replicates: int, samples: int = SAMPLES) -> pd.DataFrame:
    """Records of every player: one rollout call each, all at seed 7 (the same ice); column `rep` = sample // SAMPLES."""
    rows = []
    for name, p in players.items():
        for tr in rollout(p, "frozenlake", tasks, BUDGET, replicates * samples, Sampling(), seed=7, step_quality=False,
                          model_name=name):  # fmt: skip
            rows.append({"model": name, "task_id": tr.task_id, "budget": tr.budget, "fraction": tr.budget / tr.t_max,
                         "success": bool(tr.success), "rep": tr.sample // samples})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def success(setting):
    _, _, tasks, player, _ = setting
    names = {arm: [f"{arm}-s{k}" for k in range(COPIES)] for arm in ("a", "b")}
    players = {n: player("habit", True, 100 + i, n) for i, n in enumerate(names["a"] + names["b"])}
    return _success_frame(players, tasks, N_NULL), names


def _methods(names_a, names_b) -> dict:
    return {"base": names_b[:1], "sharp": names_b[:1], "grpo": names_b, "budgetmix": names_a}


def _gain(setting, df, names_a, names_b):
    """Notebook 02: `budgetmix.gain_table`'s "budgetmix - grpo" with a in BudgetMix's slot, b in GRPO's."""
    tasks = sorted(set(df["task_id"]))
    ev = budgetmix.Evaluation(tasks, {}, _methods(names_a, names_b), df.reset_index(drop=True))
    g = budgetmix.gain_table(ev, N_BOOT, 0.95, 0)
    return g[g["comparison"] == "budgetmix - grpo"].iloc[0]


def test_02_success_by_budget_null(setting, success):
    df, names = success
    rows = [_gain(setting, d, names["a"], names["b"]) for _, d in df.groupby("rep")]
    excluded = _excluded([(r.low, r.high) for r in rows])
    _report("02 budgetmix.gain_table", excluded)
    assert excluded.mean() <= MAX_EXCLUDED


def _pass_gap(setting, df, names_a, names_b, k=SAMPLES):
    """Notebook 03: `pass_kt.gaps`'s "grpo - base" (Pass@(K, T) in points) with a in GRPO's slot, b in the base's."""
    tasks = sorted(set(df["task_id"]))
    methods = {"base": names_b, "sharp": names_b[:1], "grpo": names_a, "budgetmix": names_a[:1]}
    sw = pass_kt.Sweep("frozenlake", tasks, {}, {}, {}, methods)
    per_task = metrics.per_task_pass(df, k)
    g = pass_kt.gaps(sw, per_task, N_BOOT, 0.95, 0)
    return g[g["comparison"] == "grpo - base"].iloc[0]


def test_03_pass_at_kt_null(setting, success):
    df, names = success
    rows = [_pass_gap(setting, d, names["a"], names["b"]) for _, d in df.groupby("rep")]
    excluded = _excluded([(r.low, r.high) for r in rows])
    _report("03 pass_kt.gaps (K = 2)", excluded)
    assert excluded.mean() <= MAX_EXCLUDED


def test_02_03_planted_effect_detected(setting):
    cpu, _, _, player, tasks = setting
    a = [f"opt-s{k}" for k in range(COPIES)]
    b = [f"demo-s{k}" for k in range(COPIES)]
    players = {n: player("optimum", False, 300 + k, n) for k, n in enumerate(a)}
    players |= {n: player("habit", True, 400 + k, n) for k, n in enumerate(b)}
    df = _success_frame(players, tasks, N_PLANTED, samples=4)  # 20 maps x 4 samples x 3 copies
    opt = players[a[0]]
    effect = 100 * np.mean([fl.policy_success(t, opt.exact_policy(t, BUDGET), BUDGET)
                            - fl.policy_success(t, base_model.demonstrator_policy(cpu, t), BUDGET) for t in tasks])  # fmt: skip
    gains = [_gain(setting, d, a, b) for _, d in df.groupby("rep")]
    print(f"02 planted: true {effect:+.1f} points, estimates {np.mean([g.gain_points for g in gains]):+.1f}")
    assert effect > 10
    assert np.mean([g.low > 0 for g in gains]) >= 0.8
    assert np.mean([g.gain_points for g in gains]) == pytest.approx(effect, abs=5)
    gaps = [_pass_gap(setting, d, a, b) for _, d in df.groupby("rep")]
    assert np.mean([g.low > 0 for g in gaps]) >= 0.8


# ----------------------------------------------------------------------------------- notebooks 04 and 05


def _by_rep(trajs) -> dict[int, list]:
    out: dict[int, list] = {}
    for tr in trajs:
        out.setdefault(tr.sample // 2, []).append(tr)
    return out


@pytest.fixture(scope="module")
def probe_null(setting):
    """Per replicate: every copy's matched pool (04) and error pool (05), the base's and each copy's qualities there
    and their continuation success from the error states; the base is one copy, the RL seeds three others."""
    _, tok, tasks, player, _ = setting
    chat = ChatFormat(tok, {})
    by_id = {t.task_id: t for t in tasks}
    base = player("habit", True, 11, "base")
    rl = {f"grpo-s{k}": player("habit", True, 20 + k, f"copy-s{k}") for k in range(COPIES)}
    sampling = Sampling()
    t_max = [t.t_max for t in tasks]
    base_trajs = _by_rep(rollout(base, "frozenlake", tasks, t_max, 2 * N_NULL, sampling, seed=4000))
    rl_trajs = {
        n: _by_rep(rollout(p, "frozenlake", tasks, t_max, 2 * N_NULL, sampling, seed=4000))
        for n, p in rl.items()
    }
    matched_pools, error_pools = [], []
    for r in range(N_NULL):
        attempts = probing.attempts_of(base_trajs[r])
        m, e = {}, {}
        for name in rl:
            m[name] = probing.matched_pool(
                base_trajs[r], rl_trajs[name][r], by_id, N_MATCHED, seed=4001 + r, at_most=True
            )
            cand = probing.matched_pool(
                base_trajs[r], rl_trajs[name][r], by_id, 4 * N_ERR, seed=5000 + r, at_most=True
            )
            order = np.random.default_rng(5001 + r).permutation(len(cand))
            e[name] = probing.error_pool([cand[i] for i in order], chat, 5002, N_ERR, attempts)
        matched_pools.append(m)
        error_pools.append(e)

    def batched(fn, policy, pools_of_rep):
        """fn over the pools of every replicate in one call; back split per replicate."""
        flat = [s for pool in pools_of_rep for s in pool]
        values = fn(policy, flat)
        out, i = [], 0
        for pool in pools_of_rep:
            out.append(values[i : i + len(pool)])
            i += len(pool)
        return out

    quality = lambda p, s: probing.state_quality(p, s, G, Sampling(seed=4002))  # noqa: E731
    cont = lambda p, s: probing.continuation_success(p, s, N_CONT, Sampling(), 5004)  # noqa: E731
    out = {"matched": matched_pools, "errors": error_pools, "q_matched": {}, "q_error": {}, "cont": {}}
    for name, p in rl.items():
        for key, pools, fn in (("q_matched", matched_pools, quality), ("q_error", error_pools, quality),
                               ("cont", error_pools, cont)):  # fmt: skip
            out[key][name, "rl"] = batched(fn, p, [pools[r][name] for r in range(N_NULL)])
            out[key][name, "base"] = batched(
                fn, base, [pools[r][name] for r in range(N_NULL)]
            )  # one call per pool, as the notebook
    return out


def _table(pools: dict, q: dict, r: int) -> pd.DataFrame:
    """matched.quality_table's per-state table of replicate r (the sharpened base's column is the base's)."""
    return pd.concat([probing.state_table(pool, {"rl": q[name, "rl"][r], "base": q[name, "base"][r],
                                                 "sharp": q[name, "base"][r]}).assign(rl_seed=int(name.rsplit("-s", 1)[1]))
                      for name, pool in pools.items()], ignore_index=True)  # fmt: skip


def test_05_continuation_null(probe_null):
    """recovery.continuation's "rl - base": the nested bootstrap of the per-seed differences of continuation success."""
    d = probe_null
    intervals = []
    for r in range(N_NULL):
        per_seed = [d["cont"][n, "rl"][r] - d["cont"][n, "base"][r] for n in d["errors"][r]]
        _, lo, hi = metrics.nested_bootstrap(per_seed, lambda x: x, N_BOOT, 0.95, 0)
        intervals.append((lo, hi))
    excluded = _excluded(intervals)
    _report("05 recovery.continuation (rl - base)", excluded)
    assert excluded.mean() <= MAX_EXCLUDED


def test_05_continuation_composition_is_the_modules(setting, probe_null):
    """The null above composes what recovery.continuation composes: on replicate 0, the module's own call with the
    same players and pools gives the same difference as continuation_success per pool + nested_bootstrap."""
    player = setting[3]
    cfg = config.load("cpu", seed=0, probing__n_continuations=N_CONT, eval__n_bootstrap=N_BOOT)
    errors = probe_null["errors"][0]
    base = player("habit", True, 11, "base")
    agents = {
        "base": base,
        "sharp": base,
        **{n: player("habit", True, 20 + k, f"copy-s{k}") for k, n in enumerate(errors)},
    }
    _, differences, _ = recovery.continuation(cfg, agents, errors)
    sampling = Sampling.from_config(cfg.sampling)
    own = [probing.continuation_success(agents[n], errors[n], N_CONT, sampling, cfg.seed + 5004)
           - probing.continuation_success(base, errors[n], N_CONT, sampling, cfg.seed + 5004) for n in errors]  # fmt: skip
    assert differences["rl - base"] == metrics.nested_bootstrap(
        own, lambda x: x, N_BOOT, cfg.eval.ci, cfg.seed
    )


def test_05_concentration_null(probe_null):
    """Measured: 20 of 200 (10 %, twice the nominal 5 %: at the limit; the cause is test_04_win_minus_loss_null's)."""
    d = probe_null
    intervals = []
    for r in range(N_NULL):
        c = recovery.concentration(_table(d["errors"][r], d["q_error"], r), _table(d["matched"][r], d["q_matched"], r),
                                   N_BOOT, 0.95, 0)  # fmt: skip
        intervals.append(tuple(c["rl_vs_base"]["ci"]))
    excluded = _excluded(intervals)
    _report("05 recovery.concentration (rl vs base)", excluded)
    assert excluded.mean() <= MAX_EXCLUDED


@pytest.mark.xfail(
    strict=True,
    reason="probing.seed_summary / matched.findings: the win rate of identical players "
    "is (1 - ties) / 2, below the 1/2 the verdict compares it with",
)
def test_04_win_rate_null(probe_null):
    d = probe_null
    outside = []
    for r in range(N_NULL):
        s = probing.seed_summary(
            _table(d["matched"][r], d["q_matched"], r), [("rl", "base")], N_BOOT, 0.95, 0
        )
        lo, hi = s["rl_vs_base"]["better_ci"]
        outside.append(lo > 0.5 or hi < 0.5)
    outside = np.array(outside)
    print(f"04 seed_summary: the win rate's interval excludes 1/2 in {outside.sum()} of {outside.size}")
    assert outside.mean() <= MAX_EXCLUDED


@pytest.mark.xfail(
    strict=True,
    reason="metrics.nested_bootstrap as matched.probe / recovery.error_pools use it: "
    "every RL seed's pool shares its base half (probing.matched_pool drawn with one seed for every RL "
    "seed) and the base's draws there, but seeds are resampled as independent: too narrow (23 of 200)",
)
def test_04_win_minus_loss_null(probe_null):
    """What a tie-aware 04 would report: wins minus losses per state (probing.wins both ways), seeds-then-states."""
    d = probe_null
    intervals = []
    for r in range(N_NULL):
        t = _table(d["matched"][r], d["q_matched"], r)
        per_seed = [
            probing.wins(g, "rl", "base") - probing.wins(g, "base", "rl") for _, g in t.groupby("rl_seed")
        ]
        intervals.append(metrics.nested_bootstrap(per_seed, lambda x: x, N_BOOT, 0.95, 0)[1:])
    excluded = _excluded(intervals)
    _report("04 wins - losses", excluded)
    assert excluded.mean() <= MAX_EXCLUDED
