"""The identical-player null and planted effects through the verdicts of notebooks 02-06 (issue 27).

Two copies of one scripted player (the demonstrator: its habit with random moves; `helpers.scripted`) with different
random streams stand in the slots of the two policies compared; each replicate's data go through the function whose
interval the notebook's findings decide by, and that 95 % interval must exclude 0 in at most MAX_EXCLUDED of the
N_NULL replicates. N_NULL = 150 keeps the file under 50 s on one core; the bound is the issue's 10 % (15 of 150). A
calibrated interval (exclusion probability 0.05) would exceed it with probability binom.sf(15, 150, 0.05) = 0.0036
per test, a conservative one less often; every replicate is seeded, so a given code gives one fixed outcome (no
flake), and that probability is the chance that a correct change of the code trips the test. Measured on the
committed code: at most 10 of 150 per verdict. Each planted effect (the budget-aware optimum against the demonstrator, its size
exact by DP) must be detected.

Data are drawn as the modules draw them now: every RL seed k has its own base-side draws (`controls.by_seed`,
`controls.stream`). Notebooks 02/03: seed k's base, GRPO and BudgetMix are evaluated on stream(1000, k), so the
copies of a pair share the ice (common random numbers) and seeds share nothing; replicate r is samples r of one
rollout call per player. Notebooks 04/05: replicate r is a run with `cfg.seed = r`, and `_replicate` draws seed k's
base and RL trajectories, its matched pool, error pool, action streams and continuations with the seeds
`matched.recorded`, `matched.probe`, `matched.quality_table`, `recovery.error_pools` and `recovery.continuation` use;
`test_04_05_replicate_is_the_modules` checks that on replicate 0 against those functions themselves.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from helpers import (
    base_model,
    budgetmix,
    config,
    controls,
    likelihood,
    matched,
    metrics,
    models,
    pass_kt,
    probing,
    recovery,
    scripted,
    stats,
    store,
)
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers.rollout import ChatFormat, rollout

pytestmark = pytest.mark.slow

N_NULL, MAX_EXCLUDED = 150, 15  # at most 10 % of the null replicates may exclude 0 (module docstring)
N_PLANTED = 8
SEEDS_02 = 5  # notebooks 02/03: RL seeds, each with its own base-side evaluation group
BUDGET, SAMPLES, N_TASKS_02 = 4, 2, 4  # notebook 02/03: T = 4 (50 % of T_max), 2 samples per task and player
COPIES = 3  # notebooks 04/05: RL seeds, as the cpu profile's three
N_MATCHED, G, N_ERR, N_CONT = (
    8,
    4,
    6,
    2,
)  # notebooks 04/05 per seed: matched states, G, error states, continuations
N_BOOT = 200
CI = 0.95


def test_the_replicate_count_bounds_a_false_failure():
    assert MAX_EXCLUDED / N_NULL <= 0.10 and binom.sf(MAX_EXCLUDED, N_NULL, 0.05) < 5e-3


@pytest.fixture(scope="module")
def setting():
    smoke = config.load("smoke")
    cpu = config.load(
        "cpu",
        eval__n_bootstrap=N_BOOT,
        probing__n_states=N_MATCHED,
        probing__g=G,
        probing__n_error_states=N_ERR,
        probing__n_continuations=N_CONT,
        train__seeds=list(range(COPIES)),
    )
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    tasks = load_tasks("frozenlake", "test", **{**settings(cpu), "n_train": 50})[:20]

    def player(kind: str, noisy: bool, seed: int, name: str) -> scripted.ScriptedPolicy:
        return scripted.ScriptedPolicy.from_config(cpu, kind, tok, noisy, seed=seed, name=name)

    return cpu, tok, tasks, player


def _excluded(verdicts) -> np.ndarray:
    return np.array([stats.excludes_zero(v) for v in verdicts])


def _check(what: str, verdicts) -> np.ndarray:
    excluded = _excluded(verdicts)
    print(f"{what}: the 95 % interval excludes 0 in {excluded.sum()} of {excluded.size} null replicates")
    assert excluded.size == N_NULL and excluded.sum() <= MAX_EXCLUDED
    return excluded


# ----------------------------------------------------------------------------------- notebooks 02 and 03


def _records(players: dict, tasks, replicates: int, samples: int = SAMPLES) -> pd.DataFrame:
    """Every player's records: one rollout call each on its RL seed's stream (`controls.stream(1000, k)`, as
    `budgetmix.evaluate` seeds group k); column `rep` = sample // samples; `task_id` carries the replicate
    (`<task>#<rep>`), so one Pass@K table holds every replicate."""
    rows = []
    for name, p in players.items():
        stream = controls.stream(1000, controls.rl_seed_of(name))
        for tr in rollout(
            p,
            "frozenlake",
            tasks,
            BUDGET,
            replicates * samples,
            Sampling(),
            seed=stream,
            step_quality=False,
            model_name=name,
        ):
            rep = tr.sample // samples
            rows.append(
                {
                    "model": name,
                    "task_id": f"{tr.task_id}#{rep}",
                    "budget": tr.budget,
                    "fraction": tr.budget / tr.t_max,
                    "success": bool(tr.success),
                    "rep": rep,
                }
            )
    return pd.DataFrame(rows)


def _group(player, kinds: dict[str, tuple[str, bool]], seed0: int) -> tuple[dict, dict[str, list[str]]]:
    """Players `<method>-s<k>` for each method of `kinds` ({method: (kind, noisy)}) and RL seed k, each with its own
    random stream; and the methods' names."""
    names = {m: [f"{m}-s{k}" for k in range(SEEDS_02)] for m in kinds}
    players = {
        n: player(*kinds[m], seed0 + 10 * i + k, n)
        for i, m in enumerate(kinds)
        for k, n in enumerate(names[m])
    }
    return players, names


def _per_task(df: pd.DataFrame) -> pd.DataFrame:
    out = df.groupby(["model", "budget", "fraction", "task_id", "rep"], as_index=False)["success"].mean()
    return out


def _gains(df: pd.DataFrame, a: list[str], b: list[str]) -> pd.DataFrame:
    """Notebook 02's verdict (`budgetmix.gain_table`'s `metrics.paired_difference`, read by the findings as
    `gains_paired`) of a minus b, one row per replicate."""
    return metrics.paired_difference(
        _per_task(df), a, b, "success", ["fraction", "rep"], 100, CI, budgetmix.POWER
    )


def _pass_gaps(df: pd.DataFrame, a: list[str], b: list[str], k: int = SAMPLES) -> pd.DataFrame:
    """Notebook 03's verdict (`pass_kt.gaps`' `metrics.paired_difference` of Pass@(K, T), read by the findings as
    `pass_at_t_gap_paired`) of a minus b, one row per replicate."""
    per_task = metrics.per_task_pass(df, k)
    per_task["rep"] = per_task["task_id"].str.rsplit("#", n=1).str[1].astype(int)
    return metrics.paired_difference(per_task, a, b, "pass", ["T", "rep"], 100, CI, pass_kt.POWER)


@pytest.fixture(scope="module")
def success(setting):
    _, _, tasks, player = setting
    habit = ("habit", True)
    players, names = _group(player, {"base": habit, "grpo": habit, "budgetmix": habit}, 100)
    return _records(players, tasks[:N_TASKS_02], N_NULL), names


def _rows(table: pd.DataFrame) -> list[dict]:
    return [{"low": r.low, "high": r.high} for r in table.itertuples()]


def test_02_budgetmix_minus_grpo_null(success):
    df, names = success
    _check("02 budgetmix - grpo, paired by seed", _rows(_gains(df, names["budgetmix"], names["grpo"])))


def test_02_grpo_minus_base_null(success):
    df, names = success
    _check("02 grpo - base, paired by seed", _rows(_gains(df, names["grpo"], names["base"])))


def test_03_pass_at_kt_null(success):
    df, names = success
    _check("03 Pass@(2, T) grpo - base, paired by seed", _rows(_pass_gaps(df, names["grpo"], names["base"])))


def test_02_03_verdicts_are_the_modules(success):
    """Replicate 0 through the modules' own tables: `budgetmix.gain_table` (and `_paired_by_fraction`, what
    `summary` writes as `gains_paired`) and `pass_kt.gaps` give the rows the nulls above test."""
    df, names = success
    one = df[df["rep"] == 0].assign(task_id=lambda d: d["task_id"].str.rsplit("#", n=1).str[0])
    ev = budgetmix.Evaluation(
        sorted(set(one["task_id"])), {}, names, one.drop(columns="rep").reset_index(drop=True)
    )
    g = budgetmix.gain_table(ev, N_BOOT, CI, 0)
    mine = _gains(df, names["budgetmix"], names["grpo"]).iloc[0]
    row = g[g["comparison"] == "budgetmix - grpo"].iloc[0]
    assert (row.t_low, row.t_high, row.mde_points) == pytest.approx((mine.low, mine.high, mine.mde))
    paired = budgetmix._paired_by_fraction(g[g["comparison"] == "budgetmix - grpo"])
    assert next(iter(paired.values()))["excludes_zero"] == bool(mine.excludes_zero)
    sw = pass_kt.Sweep("frozenlake", ev.tasks, {}, {}, {}, names)
    gaps = pass_kt.gaps(sw, metrics.per_task_pass(one, SAMPLES), N_BOOT, CI, 0)
    row = gaps[gaps["comparison"] == "grpo - base"].iloc[0]
    mine = _pass_gaps(df, names["grpo"], names["base"]).iloc[0]
    assert (row.t_low, row.t_high, row.mde) == pytest.approx((mine.low, mine.high, mine.mde))


def test_02_03_planted_effect_detected(setting):
    """BudgetMix's slot holds the budget-aware optimum, GRPO's the demonstrator: the paired verdicts of 02 (success)
    and 03 (Pass@(4, T)) must find the exact DP difference (20 maps, 4 samples, 5 seeds)."""
    cpu, _, tasks, player = setting
    players, names = _group(player, {"budgetmix": ("optimum", False), "grpo": ("habit", True)}, 300)
    df = _records(players, tasks, N_PLANTED, samples=4)
    opt = players[names["budgetmix"][0]]
    effect = 100 * np.mean(
        [
            fl.policy_success(t, opt.exact_policy(t, BUDGET), BUDGET)
            - fl.policy_success(t, base_model.demonstrator_policy(cpu, t), BUDGET)
            for t in tasks
        ]
    )
    gains = _gains(df, names["budgetmix"], names["grpo"])
    print(
        f"02 planted: true {effect:+.1f} points, estimates {gains['diff'].mean():+.1f}, "
        f"MDE {gains['mde'].mean():.1f}, detected in {(gains['low'] > 0).sum()} of {len(gains)}"
    )
    assert effect > 10 and effect > gains["mde"].mean()
    assert (gains["low"] > 0).mean() >= 0.8
    assert gains["diff"].mean() == pytest.approx(effect, abs=5)
    gaps = _pass_gaps(df, names["budgetmix"], names["grpo"], k=4)  # 03's function; GRPO's slot as the base's
    print(f"03 planted: Pass@(4, T) gap detected in {(gaps['low'] > 0).sum()} of {len(gaps)}")
    assert (gaps["low"] > 0).mean() >= 0.8


# ----------------------------------------------------------------------------------- notebooks 04 and 05

ROLES_NULL = ("base", "rl")  # the roles the null replicates draw (the composition test checks all four)


class _Base:
    """What `recovery.error_pools` asks of the roster's `base` Agent: its tokenizer."""

    def __init__(self, tok):
        self._tok = tok

    def tokenizer(self):
        return self._tok


def _agents(player, tok) -> dict:
    """The roster of `matched.roster` with scripted copies of one player: `base`, and per RL seed k `base-s<k>`,
    `sharp-s<k>`, `grpo-s<k>`, `grpo-s<k>-sharp`, each with its own random stream."""
    out: dict = {"base": _Base(tok)}
    for k in range(COPIES):
        for i, role_agent in enumerate(matched.roles(f"grpo-s{k}")):
            name = role_agent[1]
            out[name] = player("habit", True, 1000 + 10 * k + i, name)
    return out


def _replicate(cfg, agents: dict, tasks, chat, roles=ROLES_NULL) -> dict:
    """One run of notebooks 04 and 05 seeded by `cfg.seed`, each RL seed with its own base-side draws, seeded as
    the modules seed them: {"pools", "errors", "t04", "t05" (per-state tables with `rl_seed`), "cont"}."""
    by_id = {t.task_id: t for t in tasks}
    sampling, p = Sampling.from_config(cfg.sampling), cfg.probing
    budgets = tasks[0].t_max if len({t.t_max for t in tasks}) == 1 else [t.t_max for t in tasks]
    out: dict = {"pools": {}, "errors": {}, "t04": [], "t05": [], "cont": {}}
    for k in range(COPIES):
        name = f"grpo-s{k}"
        agent_of = dict(matched.roles(name))
        trajs = {
            who: rollout(
                agents[who],
                cfg.env.name,
                tasks,
                budgets,
                2,
                sampling,
                seed=controls.stream(cfg.seed + 4000, k),
                model_name=f"probe-{who}",
            )
            for who in (f"base-s{k}", name)
        }  # matched.recorded
        base, rl = trajs[f"base-s{k}"], trajs[name]
        pool = probing.matched_pool(base, rl, by_id, p.n_states, seed=controls.stream(cfg.seed + 4001, k))
        errors = recovery.seed_error_pool(cfg, chat, base, rl, tasks, k)  # as notebook 05 builds it
        out["pools"][name], out["errors"][name] = pool, errors
        for key, states, offset in (("t04", pool, 4002), ("t05", errors, 5003)):
            s = Sampling.from_config(cfg.sampling, seed=controls.stream(cfg.seed + offset, k))
            q = {
                role: probing.state_quality(
                    agents[agent_of[role]], states, p.g, s, buckets=probing.LENGTH_BUCKETS
                )
                for role in roles
            }
            out[key].append(probing.state_table(states, q).assign(rl_seed=k))
        for role in roles:
            out["cont"][name, role] = probing.continuation_success(
                agents[agent_of[role]],
                errors,
                p.n_continuations,
                sampling,
                controls.stream(cfg.seed + 5004, k),
            )
    out["t04"], out["t05"] = (pd.concat(out[k], ignore_index=True) for k in ("t04", "t05"))
    return out


@pytest.fixture(scope="module")
def probe_null(setting):
    cpu, tok, tasks, player = setting
    agents, chat = _agents(player, tok), ChatFormat(tok, models.chat_kwargs(tok))
    return [_replicate(dataclasses.replace(cpu, seed=r), agents, tasks[:6], chat) for r in range(N_NULL)]


def _by_seed(table: pd.DataFrame, unit) -> list[np.ndarray]:
    return [unit(g, "rl", "base") for _, g in table.groupby("rl_seed", sort=True)]


def test_04_mean_quality_difference_null(probe_null):
    """`probing.seed_summary`'s `rl_vs_base` `paired` (what `matched.findings` decides by): `probing.paired_units`
    of the per-seed state differences (ties count as 0)."""
    _check(
        "04 mean quality difference rl - base, paired by seed",
        [
            probing.paired_units(_by_seed(d["t04"], probing.differences), CI, matched.POWER)
            for d in probe_null
        ],
    )


def test_04_wins_minus_losses_null(probe_null):
    """`probing.seed_summary`'s `net_win_paired`: wins minus losses per state (`probing.net_wins`), paired by seed.
    Its mean is 0 under identical players whatever the ties (a win rate's is (1 - ties) / 2, not 1/2)."""
    _check(
        "04 wins minus losses rl vs base, paired by seed",
        [probing.paired_units(_by_seed(d["t04"], probing.net_wins), CI, matched.POWER) for d in probe_null],
    )


def test_05_next_action_null(probe_null):
    """Notebook 05's `superior_action` is `seed_summary` at the error states: the same two verdicts there."""
    for unit in (probing.differences, probing.net_wins):
        _check(
            f"05 next action ({unit.__name__}) rl vs base, paired by seed",
            [probing.paired_units(_by_seed(d["t05"], unit), CI, recovery.POWER) for d in probe_null],
        )


def _continuation_verdict(d: dict) -> dict:
    """`recovery.continuation`'s `paired` "rl - base": per seed, the per-state differences of continuation success."""
    units = [d["cont"][n, "rl"] - d["cont"][n, "base"] for n in d["errors"]]
    means = [float(u.mean()) for u in units]
    return stats.paired_verdict(means, [0.0] * len(means), CI, recovery.POWER, units=units)


def test_05_continuation_null(probe_null):
    _check("05 continuation rl - base, paired by seed", [_continuation_verdict(d) for d in probe_null])


def test_05_concentration_null(probe_null):
    """`recovery.concentration` itself (its `paired`: the t-interval over the seeds' win rate at error states minus
    at matched states, what `recovery.findings` decides by)."""
    cols = ["rl_seed", "dead", *ROLES_NULL]
    _check(
        "05 concentration rl vs base, paired by seed",
        [
            recovery.concentration(d["t05"][cols], d["t04"][cols], 20, CI, 0)["rl_vs_base"]["paired"]
            for d in probe_null
        ],
    )


def test_04_05_replicate_is_the_modules(setting, probe_null, tmp_path):
    """Replicate 0 of the nulls is what the modules draw: `matched.recorded` + `probing.matched_pool` (as
    `matched.probe`), `matched.quality_table`, `recovery.error_pools` and `recovery.continuation` on the scripted
    roster give the same pools, per-state tables, error states and continuation verdict; `probing.seed_summary`'s
    verdicts are the `paired_units` the nulls compute."""
    cpu, tok, tasks, player = setting
    cfg, tasks, agents = dataclasses.replace(cpu, seed=0), tasks[:6], _agents(player, tok)
    mine = _replicate(
        cfg,
        agents,
        tasks,
        ChatFormat(tok, models.chat_kwargs(tok)),
        roles=("base", "sharp", "rl", "rl_sharp"),
    )
    by_id = {t.task_id: t for t in tasks}
    with store.results_at(tmp_path):
        pools = {
            name: probing.matched_pool(
                matched.recorded(cfg, agents, tasks, f"base-s{k}"),
                matched.recorded(cfg, agents, tasks, name),
                by_id,
                N_MATCHED,
                seed=controls.stream(cfg.seed + 4001, k),
            )
            for k, name in enumerate(controls.seeds_of(agents, "grpo"))
        }
        t04 = matched.quality_table(agents, pools, G, cfg, cfg.seed + 4002)
        errors = recovery.error_pools(cfg, agents, tasks)
        t05 = matched.quality_table(agents, errors, G, cfg, cfg.seed + 5003)
        _, _, _, paired = recovery.continuation(cfg, agents, errors)
    for key, theirs in (("pools", pools), ("errors", errors)):
        assert {n: [s.key for s in p] for n, p in mine[key].items()} == {
            n: [s.key for s in p] for n, p in theirs.items()
        }
    pd.testing.assert_frame_equal(mine["t04"], t04[mine["t04"].columns])
    pd.testing.assert_frame_equal(mine["t05"], t05[mine["t05"].columns])
    assert _continuation_verdict(mine) == paired["rl - base"]
    s = probing.seed_summary(t04, [("rl", "base")], N_BOOT, CI, 0, target_power=matched.POWER)["rl_vs_base"]
    assert s["paired"] == probing.paired_units(_by_seed(t04, probing.differences), CI, matched.POWER)
    assert s["net_win_paired"] == probing.paired_units(_by_seed(t04, probing.net_wins), CI, matched.POWER)
    null0 = probe_null[0]
    pd.testing.assert_frame_equal(null0["t04"], t04[null0["t04"].columns])


def test_04_05_planted_effect_detected(setting):
    """RL's slot holds the budget-aware optimum, the base's the demonstrator: the paired mean quality difference at
    matched states (20 maps, 96 states per seed: with 3 seeds the t-interval has 2 degrees of freedom, so the null
    replicates' 8 states per seed would detect it about half the time) must lie above 0, and so must the mean
    continuation difference."""
    cpu, tok, tasks, player = setting
    agents = _agents(player, tok)
    for k in range(COPIES):
        agents[f"grpo-s{k}"] = player("optimum", False, 2000 + k, f"grpo-s{k}")
    chat = ChatFormat(tok, models.chat_kwargs(tok))
    probing_cfg = dataclasses.replace(cpu.probing, n_states=96, n_error_states=12)
    reps = [
        _replicate(dataclasses.replace(cpu, seed=100 + r, probing=probing_cfg), agents, tasks, chat)
        for r in range(6)
    ]
    q = [probing.paired_units(_by_seed(d["t04"], probing.differences), CI, matched.POWER) for d in reps]
    c = [_continuation_verdict(d) for d in reps]
    print(
        f"04 planted: mean quality difference {np.mean([v['diff'] for v in q]):+.3f} (MDE "
        f"{np.mean([v['mde'] for v in q]):.3f}), detected in {sum(v['low'] > 0 for v in q)} of {len(q)}; 05 "
        f"continuation {np.mean([v['diff'] for v in c]):+.3f} (MDE {np.mean([v['mde'] for v in c]):.3f}), detected "
        f"in {sum(v['low'] > 0 for v in c)} of {len(c)}"
    )
    assert np.mean([v["low"] > 0 for v in q]) >= 0.8
    assert np.mean([v["diff"] for v in c]) > 0


class _Scorer:
    """A policy's teacher-forced log-probs, all that `likelihood.cumulative_llr` reads: a fixed function of the
    tokens (a scripted player scores replies at a prompt, not whole conversations)."""

    def __init__(self, name: str):
        self.name = name

    def score(self, prompts, continuations):
        return [[-0.01 * (t % 97) - 0.1 for t in c] for c in continuations]


def test_06_llr_null_is_zero_by_construction(setting):
    """Notebook 06's cumulative LLR log pi_RL - log pi_base of one policy against a copy of itself is 0 at every
    token (`likelihood.cumulative_llr` subtracts two identical scores), whatever the streams that drew the
    trajectories: an identical-policy null has no sampling variance, so there is no interval to calibrate and no
    replicates are run; this checks only that it is exactly 0. 06's verdicts (RL's successful trajectories against
    the base's, paired by seed) are intervals of differences, tested on hand-made numbers in
    tests/test_findings_probing.py."""
    _, _, tasks, player = setting
    trajs = rollout(
        player("habit", True, 1, "grpo-s0"), "frozenlake", tasks[:4], BUDGET, 2, Sampling(), seed=6000
    )
    llr = likelihood.cumulative_llr(_Scorer("grpo-s0"), _Scorer("base"), trajs)
    assert len(llr) and (llr["cum_llr"] == 0).all()
