"""Process-level estimators against hand computations: GAE on a short trajectory with known values, GiGPO's step
groups on a constructed batch, the oracle-Q process term on a 2x2 map, PPO's clipped value loss against verl's
formula; and in the loop: GRPO bit for bit as before, snapshots, PPO's critic across a resumption."""

from __future__ import annotations

import copy
import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import algos, base_model, config, process, store, supervision, train
from helpers.envs.base import Task
from helpers.envs.frozenlake import FrozenLakeEnv, optimal_q
from helpers.rollout import Trajectory

# ----------------------------------------------------------------------------------------------------- GAE


def test_gae_by_hand_skips_observation_tokens():
    # positions 0..5: prompt, two generated tokens, two observation tokens, one generated token (the last turn)
    mask = torch.tensor([[0, 1, 1, 0, 0, 1]], dtype=torch.float)
    values = torch.tensor([[9.0, 0.5, 0.6, 9.0, 9.0, 0.7]])  # 9 = off the mask: must never be used
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    adv, ret = algos.gae_advantages(rewards, values, mask, gamma=0.9, lam=0.8, whiten=False)
    # t=5: delta = 1 - 0.7 = 0.3 -> A = 0.3
    # t=2: delta = 0.9 * 0.7 - 0.6 = 0.03 -> A = 0.03 + 0.72 * 0.3 = 0.246 (bootstraps from t=5, not from 9)
    # t=1: delta = 0.9 * 0.6 - 0.5 = 0.04 -> A = 0.04 + 0.72 * 0.246 = 0.21712
    want = {1: 0.21712, 2: 0.246, 5: 0.3}
    for t, a in want.items():
        assert adv[0, t].item() == pytest.approx(a, abs=1e-6)
        assert ret[0, t].item() == pytest.approx(a + values[0, t].item(), abs=1e-6)
    # gamma = lam = 1 (verl's defaults): A_t = R - V_t
    adv1, _ = algos.gae_advantages(rewards, values, mask, whiten=False)
    assert [adv1[0, t].item() for t in (1, 2, 5)] == pytest.approx([0.5, 0.4, 0.3], abs=1e-6)


def test_gae_whitens_over_the_whole_batch_and_rows_are_independent():
    mask = torch.tensor([[0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 0, 0]], dtype=torch.float)
    values = torch.tensor([[0.0, 0.5, 0.6, 0.0, 0.0, 0.7], [0.0, 0.0, 0.2, 0.1, 0.0, 0.0]])
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    raw, _ = algos.gae_advantages(rewards, values, mask, whiten=False)
    # row 2 has no reward: A = -V at its generated tokens (gamma = lam = 1): -0.2 + ... = 0 - 0.2 at t=2? no:
    # t=3: delta = 0 - 0.1 -> -0.1; t=2: delta = 0 + 0.1 - 0.2 = -0.1 -> A = -0.1 + (-0.1) = -0.2
    assert [raw[1, 2].item(), raw[1, 3].item()] == pytest.approx([-0.2, -0.1], abs=1e-6)
    white, _ = algos.gae_advantages(rewards, values, mask)
    picked = raw[mask.bool()]
    expected = (picked - picked.mean()) / torch.sqrt(picked.var(unbiased=True) + 1e-8)
    assert torch.allclose(white[mask.bool()], expected, atol=1e-6)


def _traj(
    task_id: str, group: str, turns: list[tuple[int, str, float]], exhausted: bool = False
) -> Trajectory:
    """A trajectory of a 3-token prompt, then per turn `n` generated tokens and (except after the last) a
    2-token observation; `turns` = [(n generated tokens, observation, reward)]."""
    tr = Trajectory.opening(
        [7, 8, 9],
        task_id=task_id,
        env="frozenlake",
        model="m",
        budget=8,
        t_max=8,
        seed=0,
        sample=0,
        group=group,
    )
    for k, (n, obs, r) in enumerate(turns):
        tr.token_ids += [20 + k] * n
        tr.gen_mask += [1] * n
        tr.logprobs += [-0.1] * n
        tr.turns.append({"action": "a", "observation": obs, "reward": r, "done": k == len(turns) - 1})
        tr.reward += r
        if k < len(turns) - 1:
            tr.token_ids += [5, 6]
            tr.gen_mask += [0, 0]
            tr.logprobs += [0.0, 0.0]
    tr.success = tr.reward > 0
    tr.exhausted = exhausted
    return tr


def test_ppo_token_advantages_put_the_reward_on_the_last_generated_token():
    cfg = config.load("smoke", train__algorithm="ppo")
    tr = _traj("t", "t|8", [(2, "o", 0.0), (1, "g", 1.0)])  # tokens: 3 prompt, 2 gen, 2 obs, 1 gen
    n = len(tr.token_ids) - 1  # 7 columns; column j scores token j + 1: generated columns 2, 3 and 6
    values = [torch.tensor([0.0, 0.0, 0.5, 0.6, 0.0, 0.0, 0.7])]
    adv, ret, _ = train.token_advantages([tr], cfg, torch.tensor([1.0]), torch.tensor([0.0]), values=values)
    assert adv[0].shape == (n,)
    assert [ret[0][j].item() for j in (2, 3, 6)] == pytest.approx([1.0, 1.0, 1.0])  # gamma = lam = 1
    raw = torch.tensor([0.5, 0.4, 0.3])  # R - V at the generated tokens, then whitened over them
    want = (raw - raw.mean()) / torch.sqrt(raw.var() + 1e-8)
    assert torch.allclose(torch.stack([adv[0][j] for j in (2, 3, 6)]), want, atol=1e-5)


# --------------------------------------------------------------------------------------------- value loss


def test_clipped_value_loss_against_verls_formula():
    vpreds = torch.tensor([[1.0, 0.0, 2.0]], requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[0.8, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, frac = algos.value_loss(vpreds, returns, old, mask, cliprange_value=0.5)
    # token 0: V = 1 clipped to 0.5; (1 - 0.8)^2 = 0.04 < (0.5 - 0.8)^2 = 0.09 -> 0.09 (the clipped term)
    # token 1: V = 0 inside the range; both terms (0 - 1)^2 = 1; token 2 is masked
    # verl: 0.5 * token-mean(max(l1, l2)) = 0.5 * (0.09 + 1) / 2
    assert loss.item() == pytest.approx(0.5 * (0.09 + 1.0) / 2)
    assert frac == pytest.approx(0.5)
    loss.backward()
    # the clipped term holds V at its bound: no gradient on token 0; token 1: 0.5 * 2 * (0 - 1) / 2 = -0.5
    assert vpreds.grad[0].tolist() == pytest.approx([0.0, -0.5, 0.0])
    # an independent transcription of verl's compute_value_loss, on random values
    g = torch.Generator().manual_seed(0)
    v, o, r = (torch.randn(4, 6, generator=g) for _ in range(3))
    m = (torch.rand(4, 6, generator=g) > 0.3).float()
    clip = torch.max(torch.min(v, o + 0.5), o - 0.5)
    ref = 0.5 * (torch.max((v - r) ** 2, (clip - r) ** 2) * m).sum() / m.sum()
    assert algos.value_loss(v, r, o, m)[0].item() == pytest.approx(ref.item(), rel=1e-6)
    assert algos.value_loss(v, r, o, m, coef=1.0)[0].item() == pytest.approx(2 * ref.item(), rel=1e-6)


# ------------------------------------------------------------------------------------------------- GiGPO


def test_gigpo_step_groups_on_a_constructed_batch():
    # Task group g: trajectories 0 and 1 both reach anchor "A" after their first move; trajectory 2 goes to "B"
    # and "C", which no other trajectory visits. The opening (turn 0) is the same for all three. Trajectory 3
    # sees "A" too but belongs to another task group, so it shares no step group with them.
    batch = [
        _traj("g", "g|8", [(2, "A", 0.0), (1, "goal", 1.0)]),
        _traj("g", "g|8", [(1, "A", 0.0), (2, "hole", 0.0)]),
        _traj("g", "g|8", [(1, "B", 0.0), (1, "C", 0.0), (1, "hole", 0.0)]),
        _traj("h", "h|8", [(1, "A", 0.0), (1, "hole", 0.0)]),
    ]
    assert process.anchors(batch[0])[1:] == ["A"] and process.anchors(batch[2])[1:] == ["B", "C"]
    assert process.step_group_sizes(batch) == [3, 2, 3, 2, 3, 1, 1, 1, 1]
    c = config.load("smoke", train__algorithm="gigpo").train  # gamma 0.95, w = 1, mean_norm, over steps
    adv = process.gigpo_turn_advantages(batch, [1.0, 0.0, 0.0, 0.0], c)
    # Episode level over the 7 step rows of g (2 + 2 + 3), each carrying its episode's score: mean 2/7.
    # Opening group (all of g): returns 0.95, 0, 0 -> mean 0.95/3. Group "A": returns 1 and 0 -> +-0.5.
    # "B", "C" and h's steps are singletons -> 0; h's episode is a group of one -> 0 - 0 = 0.
    m0 = 0.95 / 3
    want = [
        [5 / 7 + 0.95 - m0, 5 / 7 + 0.5],
        [-2 / 7 - m0, -2 / 7 - 0.5],
        [-2 / 7 - m0, -2 / 7, -2 / 7],
        [0.0, 0.0],
    ]
    for got, w in zip(adv, want, strict=True):
        assert got.tolist() == pytest.approx(w, abs=1e-6)
    # over trajectories instead (plain GRPO at the episode level): mean 1/3
    per_traj = process.gigpo_turn_advantages(
        batch, [1.0, 0.0, 0.0, 0.0], dataclasses.replace(c, gigpo_episode_over_steps=False)
    )
    assert per_traj[0].tolist() == pytest.approx([2 / 3 + 0.95 - m0, 2 / 3 + 0.5], abs=1e-6)
    # each turn's advantage on that turn's generated tokens: columns 2, 3 (turn 0) and 6 (turn 1)
    tok = process.turn_token_advantages(batch[0], adv[0])
    assert tok.tolist() == pytest.approx([0, 0, want[0][0], want[0][0], 0, 0, want[0][1]], abs=1e-6)


def test_gigpo_step_rewards_are_zero_when_the_budget_ran_out():
    tr = _traj("g", "g|2", [(1, "A", 0.0), (1, "B", 0.5)], exhausted=True)
    assert process.step_rewards(tr) == [0.0, 0.0]
    tr.exhausted = False
    assert process.step_rewards(tr) == [0.0, 0.5]


# ------------------------------------------------------------------------------------------------ oracle-Q

# 2x2 map: S F / H G. States 0 = S, 1 = F, 2 = H, 3 = G; actions LEFT 0, DOWN 1, RIGHT 2, UP 3. Slippery with
# success rate 0.75: the intended direction 0.75, each perpendicular one 0.125. gamma 0.95.
TINY = Task(
    "tiny",
    "frozenlake",
    {"desc": ["SF", "HG"], "is_slippery": True, "success_rate": 0.75, "gamma": 0.95},
    t_max=2,
)
# One turn left. From F (1) only a move down reaches G: LEFT slips down 0.125, DOWN 0.75, RIGHT slips down 0.125,
# UP never. From S (0) nothing reaches G in one move: a dead state.
Q1_F = [0.125, 0.75, 0.125, 0.0]
# Two turns left at S: reach F first (RIGHT 0.75; DOWN and UP slip right 0.125; LEFT never), then V_1(F) = 0.75
# discounted once: Q = 0.95 * P(F) * 0.75.
Q2_S = [0.0, 0.95 * 0.125 * 0.75, 0.95 * 0.75 * 0.75, 0.95 * 0.125 * 0.75]
# The process term p = Q / max Q - 1 at each (turns left, state), by action; 0 everywhere at a dead state.
P_HAND = {(2, 0): [-1.0, -5 / 6, 0.0, -5 / 6], (1, 1): [-5 / 6, 0.0, -5 / 6, -1.0], (1, 0): [0.0] * 4}


def test_oracle_q_values_of_the_2x2_map_by_hand():
    q = optimal_q(TINY.payload["desc"], 2, 0.95, True, 0.75)
    assert q[1, 1].tolist() == pytest.approx(Q1_F)
    assert q[1, 0].tolist() == pytest.approx([0.0] * 4)
    assert q[2, 0].tolist() == pytest.approx(Q2_S)
    for (h, s), want in P_HAND.items():
        assert [process.process_term(q[h, s], a) for a in range(4)] == pytest.approx(want)
    assert process.process_term(q[2, 0], None) == -1.0  # an invalid reply
    assert process.process_term(q[1, 0], None) == 0.0  # ... unless nothing can reach the goal any more


def _played(actions: list[str], seed: int) -> tuple[Trajectory, list[float]]:
    """An episode of TINY with budget 2, recorded as a rollout records it, and its p_t from the hand table."""
    env = FrozenLakeEnv()
    env.reset(TINY, 2, seed=seed)
    tr = Trajectory("tiny", "frozenlake", "m", budget=2, t_max=2, seed=seed, sample=0, group="tiny|2")
    want = []
    for a in actions:
        if env.done:
            break
        want.append(P_HAND[(env.remaining, env.state)][FrozenLakeEnv.action_index(a)])
        r = env.step(a)
        tr.turns.append({"action": a, "observation": r.observation, "reward": r.reward})
    return tr, want


def test_oracle_terms_replay_the_episode_at_each_steps_own_remaining_budget():
    # Up at S with two turns left (p = -5/6) stays at S (0.875: up into the wall or a slip left) or slips right
    # to F (0.125); then Left with one turn left: p = -5/6 at F, 0 at S (dead: nothing reaches G in one move).
    moves = ["<answer>Up</answer>", "<answer>Left</answer>"]
    seen = set()
    for seed in range(200):
        tr, want = _played(moves, seed)
        exact, reported = process.oracle_terms([tr], {"tiny": TINY}, "frozenlake")
        assert exact == [pytest.approx(want)] and reported == exact
        seen.add(tuple(want))
        if len(seen) == 2:
            break
    assert seen == {(-5 / 6, -5 / 6), (-5 / 6, 0.0)}  # both paths were exercised
    tr, _ = _played(moves, 0)
    tr.turns[0]["observation"] = "something else"
    with pytest.raises(RuntimeError, match="diverged"):
        process.oracle_terms([tr], {"tiny": TINY}, "frozenlake")
    with pytest.raises(ValueError, match="step oracle"):
        process.oracle_terms([tr], {"tiny": TINY}, "bfcl")


def test_corrupted_oracle_shuffles_a_nested_fraction_of_states_and_keeps_their_values():
    q = np.array([0.1, 0.7, 0.3, 0.0])
    keys = [(s, h) for s in range(40) for h in range(1, 9)]
    assert all(process.corrupted(q, 0.0, 3, "t", k) is q for k in keys)
    hit = {
        lv: {k for k in keys if not np.array_equal(process.corrupted(q, lv, 3, "t", k), q)}
        for lv in (0.3, 0.7)
    }
    for lv in (0.3, 0.7):
        for k in keys:
            out = process.corrupted(q, lv, 3, "t", k)
            assert sorted(out.tolist()) == sorted(q.tolist())  # the same values, so the same V* and scale
    assert hit[0.3] <= hit[0.7]  # nested: a pair shuffled at 0.3 is shuffled at 0.7 ...
    for k in hit[0.3]:  # ... and the same way
        assert np.array_equal(process.corrupted(q, 0.3, 3, "t", k), process.corrupted(q, 0.7, 3, "t", k))
    share = len(hit[0.7]) / len(keys)  # shuffled pairs (a permutation can leave q as it is: 1/24 of them)
    assert 0.55 < share < 0.8
    assert np.array_equal(
        process.corrupted(q, 1.0, 3, "t", (0, 1)), process.corrupted(q, 1.0, 3, "t", (0, 1))
    )
    assert hit[0.7] != {k for k in keys if not np.array_equal(process.corrupted(q, 0.7, 4, "t", k), q)}
    e = [[0.0, -0.5, -1.0, 0.0]]
    assert process.agreement(e, e) == {"process_exact_share": 1.0, "process_corr": pytest.approx(1.0)}
    assert process.agreement(e, [[0.0, -1.0, -0.5, 0.0]])["process_exact_share"] == 0.5


def test_oracle_q_token_advantages_add_the_process_term_to_the_outcome():
    cfg = config.load("smoke", train__algorithm="oracle_q", train__oracle_weight=0.5)
    tr, want = _played(["<answer>Up</answer>", "<answer>Down</answer>"], 1)
    tr.token_ids, tr.gen_mask, tr.logprobs, tr.prompt_len = [1, 2], [0, 0], [0.0, 0.0], 2
    for k in range(tr.n_turns):  # one generated token per turn, an observation token between turns
        tr.token_ids += [3] if k == tr.n_turns - 1 else [3, 4]
        tr.gen_mask += [1] if k == tr.n_turns - 1 else [1, 0]
    adv, _, stats = train.token_advantages(
        [tr], cfg, torch.tensor([0.0]), torch.tensor([0.25]), {"tiny": TINY}
    )
    got = [adv[0][j - 1].item() for j, m in enumerate(tr.gen_mask) if m]
    assert got == pytest.approx([0.25 + 0.5 * p for p in want])
    assert stats["process_exact_share"] == 1.0


# ------------------------------------------------------------------------------------------------- config


def test_process_knobs_are_checked():
    with pytest.raises(config.ConfigError, match=r"train\.algorithm"):
        config.load("smoke", train__algorithm="reinforce")
    with pytest.raises(config.ConfigError, match=r"train\.oracle_corruption"):
        config.load("smoke", train__oracle_corruption=1.5)
    with pytest.raises(config.ConfigError, match=r"train\.critic_warmup"):
        config.load("smoke", train__critic_warmup=99)
    with pytest.raises(config.ConfigError, match=r"process\.algorithms"):
        config.load("smoke", process__algorithms=["gigpo", "gigpo"])
    with pytest.raises(config.ConfigError, match=r"process\.corruption_levels"):
        config.load("smoke", process__algorithms=["grpo"], process__corruption_levels=[0.5])
    for name in ("smoke", "cpu", "cpu_process", "gpu", "paper"):
        config.load(name)


# ---------------------------------------------------------------------------------------- the loop itself


@pytest.fixture(scope="module")
def _shared_results(tmp_path_factory):
    return tmp_path_factory.mktemp("process_results")


@pytest.fixture
def smoke_base(_shared_results, monkeypatch):
    """One smoke base for the tests of this module that only read it (built once, not once per test)."""
    monkeypatch.setenv("KIT_RESULTS", str(_shared_results))
    return base_model.path_of(config.load("smoke"))


def _batch(cfg):
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    pol = HFPolicy.from_pretrained(base_model.path_of(cfg))
    tasks = load_tasks("frozenlake", "train", n=4, seed=5, **settings(cfg))
    trajs = rollout(
        pol, "frozenlake", tasks, [6, 3, 6, 6], 4, Sampling(1.0, 1.0, 6), seed=3, step_quality=False
    )
    assert len({t.success for t in trajs}) == 2, "the batch should hold successes and failures"
    return trajs, {t.task_id: t for t in tasks}


def test_grpo_update_is_bit_identical_to_the_loop_before_the_process_estimators(smoke_base):
    from grpo_reference import ppo_update as reference_update

    from helpers import models

    # the other estimators' knobs set on purpose: they must change nothing in a GRPO update
    cfg = config.load(
        "smoke",
        train__minibatch_size=6,
        train__micro_batch_size=4,
        train__ppo_epochs=2,
        train__gigpo_step_weight=0.3,
        train__gae_lam=0.5,
        train__critic_warmup=2,
    )
    trajs, _ = _batch(cfg)
    ref_model, _ = models.load(base_model.path_of(cfg))
    start = {k: v.clone() for k, v in models.load(base_model.path_of(cfg))[0].state_dict().items()}
    results = []
    for update in (reference_update, train.ppo_update):
        model, _ = models.load_trainable(base_model.path_of(cfg))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        stats = [
            update(model, ref_model, opt, copy.deepcopy(trajs), cfg, np.random.default_rng([0, s]))
            for s in (1, 2)
        ]
        results.append(({k: v.clone() for k, v in model.state_dict().items()}, stats))
    (w_ref, s_ref), (w_new, s_new) = results
    assert w_ref.keys() == w_new.keys()
    assert all(torch.equal(w_ref[k], w_new[k]) for k in w_ref), "GRPO's weights differ from the old loop's"
    assert s_ref == s_new
    assert any(not torch.equal(w_ref[k], start[k]) for k in w_ref), (
        "nothing moved: the comparison proves nothing"
    )


def test_grpo_runs_keep_their_recipe_and_folder():
    cfg = config.load("smoke")
    recipe = train.train_recipe(cfg)
    assert not set(recipe) & set(train.PROCESS_KEYS)
    assert set(recipe) == {f.name for f in dataclasses.fields(cfg.train)} - set(train.RUN_LAYOUT_KEYS) - set(
        train.PROCESS_KEYS
    )
    same = config.load("smoke", train__gae_lam=0.5, train__oracle_weight=2.0, train__save_steps=[2])
    assert train.rl_dir(same, "full", 0) == train.rl_dir(cfg, "full", 0)
    assert train.rl_dir(cfg, "full", 0).name.startswith("full-s0-")
    ppo = config.load("smoke", train__algorithm="ppo")
    assert train.rl_dir(ppo, "full", 0).name.startswith("ppo-full-s0-")
    assert train.rl_dir(ppo, "full", 0) != train.rl_dir(
        dataclasses.replace(ppo, train=dataclasses.replace(ppo.train, gae_lam=0.5)), "full", 0
    )


@pytest.mark.parametrize("algorithm", ["gigpo", "oracle_q", "ppo"])
def test_every_estimator_updates_the_policy_on_a_mixed_budget_batch(algorithm, smoke_base):
    cfg = config.load("smoke", train__algorithm=algorithm, train__lr=1e-2)
    trajs, tasks = _batch(cfg)
    from helpers import models

    ref_model, _ = models.load(base_model.path_of(cfg))
    model, _ = models.load_trainable(base_model.path_of(cfg))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    critic = critic_opt = None
    if algorithm == "ppo":
        critic = process.ValueModel(models.load_trainable(base_model.path_of(cfg))[0])
        critic_opt = torch.optim.AdamW(critic.parameters(), lr=1e-2)
    for s in range(2):
        st = train.ppo_update(
            model, ref_model, opt, trajs, cfg, np.random.default_rng(s), critic, critic_opt, tasks, seed=0
        )
        assert st["grad_norm"] > 0 and np.isfinite(st["pg_loss"])
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    if algorithm == "ppo":
        assert st["vf_loss"] > 0 and critic.head.weight.abs().sum() > 0  # the critic learned too
        # warm-up: the critic moves, the actor does not
        frozen = {k: v.clone() for k, v in model.state_dict().items()}
        st = train.ppo_update(
            model,
            ref_model,
            opt,
            trajs,
            cfg,
            np.random.default_rng(9),
            critic,
            critic_opt,
            update_actor=False,
        )
        assert st["pg_loss"] is None and st["vf_loss"] is not None
        assert all(torch.equal(frozen[k], v) for k, v in model.state_dict().items())


def test_value_model_is_padding_invariant(smoke_base):
    from helpers import models
    from helpers.policy import pad_batch

    critic = process.ValueModel(models.load(base_model.path_of(config.load("smoke")))[0])
    torch.nn.init.normal_(critic.head.weight, std=0.5)
    seqs = [[1, 5, 6, 7, 8], [1, 5, 9]]
    ids, attn, _ = pad_batch(seqs, [[1] * 5, [1] * 3], 0)
    with torch.no_grad():
        both = critic(ids, attn)
        alone = critic(torch.tensor([seqs[1]]), torch.ones(1, 3, dtype=torch.long))
    assert both.shape == (2, 4)
    assert torch.allclose(both[1, :2], alone[0], atol=1e-5)


def _weights(path):
    from helpers import models

    return {k: v.clone() for k, v in models.load(path)[0].state_dict().items()}


def test_a_saved_step_is_the_final_model_of_a_run_that_long(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    long = config.load("smoke", train__steps=3, train__save_steps=[2], train__eval_every=2)
    train.rl_train(long, "budgetmix", 1)
    snap = train.trained_model(long, "budgetmix", 1, step=2)
    assert snap.name == "step-000002"
    short = config.load("smoke", train__steps=2, train__eval_every=2)
    a, b = _weights(snap), _weights(train.rl_train(short, "budgetmix", 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(FileNotFoundError, match="save_steps"):
        train.trained_model(long, "budgetmix", 1, step=1)


def test_ppo_resumes_its_critic_from_the_checkpoint(tmp_path, monkeypatch):
    cfg = config.load(
        "smoke",
        train__algorithm="ppo",
        train__steps=3,
        train__checkpoint_every=2,
        train__eval_every=3,
        train__critic_lr=1e-2,
        train__critic_warmup=1,
    )
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "a"))
    base = base_model.path_of(cfg)
    straight = train.rl_train(cfg, "full")
    rows = train.read_metrics(cfg, "full")
    assert rows[1]["pg_loss"] is None and rows[1]["vf_loss"] is not None  # step 1: critic warm-up
    assert rows[2]["pg_loss"] is not None and rows[2]["algorithm"] == "ppo"
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "b"))
    (tmp_path / "b" / "smoke" / "models").mkdir(parents=True)
    shutil.copytree(base, store.models_dir("smoke") / base.name)
    shutil.copy(next(base.parent.glob("probe-pool-*.jsonl")), store.models_dir("smoke"))
    train.rl_train(cfg, "full", max_steps=2)
    ckpt = torch.load(next(train.rl_dir(cfg, "full").glob("checkpoint-*.pt")), weights_only=False)
    assert {"critic", "critic_optim"} <= set(ckpt)
    a, b = _weights(straight), _weights(train.rl_train(cfg, "full"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


def test_the_full_grid_profile_is_the_cpu_profile_but_for_notebook_07():
    cpu, full = config.load("cpu").to_dict(), config.load("cpu_process").to_dict()
    assert full.pop("profile") == "cpu_process" and cpu.pop("profile") == "cpu"
    assert full.pop("process") != cpu.pop("process")
    assert full == cpu


def test_parallel_runs_of_different_estimators_share_one_probe_pool(tmp_path, monkeypatch):
    # Two workers at once, one GRPO and one GiGPO run: the probe pool is drawn once, before they start (two
    # workers used to race to write it), and each run ends with its own model.
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    cfg = config.load("smoke", train__steps=1, train__eval_every=1)
    gigpo = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, algorithm="gigpo"))
    paths = train.train_many([(cfg, "full", 0), (gigpo, "full", 0)], workers=2)
    assert [p.parent.name.split("-s0-")[0] for p in paths] == ["full", "gigpo-full"]
    assert all((p / "model.safetensors").exists() for p in paths)
    assert len(store.Records(train.probe_pool_path(cfg))) == cfg.train.n_probe_states


def test_gigpo_groups_bfcl_steps_by_observation_without_an_oracle():
    # The environment-generic path (the gpu profile runs notebook 07 on BFCL): two replays of the ground truth
    # and one with a wrong call, recorded as rollouts record them; no step oracle, so no oracle-Q.
    from helpers.envs import bfcl

    task = bfcl.BFCLEnv.load_tasks("train")[0]
    wrong = copy.deepcopy(task.payload["ground_truth"])
    k = next(k for k, calls in enumerate(wrong) if calls)
    wrong[k][0] = bfcl.corrupt_call(wrong[k][0])
    batch = []
    for gt in (None, None, wrong):
        env = bfcl.BFCLEnv()
        env.reset(task, task.t_max)
        tr = Trajectory.opening(
            [1, 2, 3],
            task_id=task.task_id,
            env="bfcl",
            model="m",
            budget=task.t_max,
            t_max=task.t_max,
            seed=0,
            sample=len(batch),
            group="g",
        )
        for reply in bfcl.ground_truth_replies(task, gt):
            r = env.step(reply)
            tr.turns.append({"action": reply, "observation": r.observation, "reward": r.reward})
            tr.reward += r.reward
            if r.done:
                tr.success = r.success
                break
        batch.append(tr)
    assert [t.success for t in batch] == [True, True, False]
    n, m = batch[0].n_turns, batch[1].n_turns
    sizes = process.step_group_sizes(batch)
    mine, theirs = sizes[:n], sizes[n + m :]
    assert mine[: k + 1] == [3] * (k + 1)  # all three agree up to the wrong call ...
    assert mine[k + 1] == 2 and theirs[k + 1] == 1  # ... whose result only the wrong trajectory sees
    # Later the next user request reads the same whatever the state: an anchor is the observation, not the
    # state, so on BFCL step groups can mix states that differ (no exact step signal, as the paper says).
    assert 3 in mine[k + 2 :]
    c = config.load("smoke", train__algorithm="gigpo").train
    adv = process.gigpo_turn_advantages(batch, [t.reward for t in batch], c)
    assert adv[0][0] > 0 > adv[2][0]  # at the shared opening the successful trajectories are ahead
    assert torch.equal(adv[0], adv[1])
    assert not process.has_oracle("bfcl")
    gpu = config.load("gpu")
    assert supervision.experiment_profile(gpu).env.name == "bfcl"
    # PPO is out of the one-GPU grid (its critic does not fit an 80 GB GPU beside the policy: helpers.memory); a
    # larger GPU adds it back with an override
    assert {r.algorithm for r in supervision.grid(gpu)} == {"grpo", "gigpo"}
    with_ppo = config.load("gpu", process__algorithms=["grpo", "gigpo", "ppo"])
    assert {r.algorithm for r in supervision.grid(with_ppo)} == {"grpo", "gigpo", "ppo"}
    with pytest.raises(ValueError, match="no step oracle"):
        supervision.grid(config.load("gpu", process__algorithms=["grpo", "oracle_q"]))


def test_the_report_finds_every_comparison_the_grid_makes(tmp_path, monkeypatch):
    # The precision lines of the findings look gains up by name: the names must be the grid's own.
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    for mode in ("full", "budgetmix"):
        runs = supervision.grid(
            config.load("smoke", process__corruption_levels=[0.0, 0.5, 1.0], process__precision_mode=mode)
        )
        keys = supervision.comparisons(runs)
        for level in ("0", "0.5", "1"):
            assert supervision.precision_key(mode, level) in keys
        assert f"{supervision.method_name('gigpo', 'budgetmix')} - gigpo" in keys


def test_findings_of_the_bfcl_grid_from_made_up_records(tmp_path, monkeypatch):
    # The gpu profile's grid (BFCL: GRPO, GiGPO and, on a GPU that holds its critic, PPO; no oracle, no precision
    # curve), from invented success records: the tables, the summary and the findings are built without a GPU; PPO
    # is made better than GRPO.
    from helpers import report

    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    cfg = config.load("gpu", process__algorithms=["grpo", "gigpo", "ppo"])
    runs = supervision.grid(cfg)
    rng = np.random.default_rng(0)
    rows = [
        {
            "model": r.name,
            "task_id": f"t{i}",
            "fraction": f,
            "sample": j,
            "success": bool(rng.random() < (0.8 if r.algorithm == "ppo" else 0.3)),
        }
        for r in runs
        for i in range(12)
        for f in cfg.eval.budget_fractions
        for j in range(2)
    ]
    df = pd.DataFrame(rows)
    table = supervision.success_table(df, supervision.methods(runs), 200)
    gains = supervision.gain_table(df, runs, 200)
    precision = supervision.precision_table(table, runs)
    assert precision.empty
    m = supervision.summary(cfg, runs, table, gains, {}, precision)
    assert m["env"] == "bfcl" and m["upper_bound"] is None and m["precision"]["levels"] == []
    store.open_run(cfg.profile, "07_process_supervision", cfg).write_metrics(m)
    text = report.findings(cfg.profile, "07_process_supervision")
    assert "**ppo minus GRPO** (a learned critic, no oracle)" in text and "better than GRPO at 25 %" in text
    assert "**gigpo minus GRPO** (no exact step oracle)" in text
    assert "oracle_q" not in text and "Precision" not in text
