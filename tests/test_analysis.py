"""Matched-state pools, error injection, continuations and likelihoods (notebooks 04-06)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import base_model, config, likelihood, models, probing
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import ChatFormat, continue_from, rollout


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cfg = config.load("smoke")
    transcripts = base_model.demonstrations(cfg, 40, seed=0)
    d = models.build_tiny(
        cfg.model.tiny, base_model.tokenizer_corpus(transcripts), tmp_path_factory.mktemp("m")
    )
    tasks = load_tasks("frozenlake", "test", **settings(cfg))
    a = HFPolicy.from_pretrained(d, name="base")
    b = HFPolicy.from_pretrained(d, name="rl")
    with __import__("torch").no_grad():  # a second, different policy: perturb the weights
        for p in b.model.parameters():
            p.add_(0.05 * __import__("torch").randn_like(p))
    # scripted-looking valid play comes from sampling; an untrained model also makes invalid moves: both fine
    ta = rollout(a, "frozenlake", tasks, 6, 3, Sampling(1.0, 1.0, 6), seed=0)
    tb = rollout(b, "frozenlake", tasks, 6, 3, Sampling(1.0, 1.0, 6), seed=1)
    return cfg, tasks, a, b, ta, tb


def test_pool_is_balanced_distinct_and_replays_exactly(setup):
    _, tasks, a, _, ta, tb = setup
    by_id = {t.task_id: t for t in tasks}
    pool = probing.matched_pool(ta, tb, by_id, 12, seed=0)
    assert sum(s.source == "base" for s in pool) == sum(s.source == "rl" for s in pool) == 6
    assert len({s.key for s in pool}) == 12
    chat = ChatFormat(a.tokenizer)
    source = {(t.task_id, t.seed): t for t in ta + tb}
    for s in pool:
        env = s.replay()
        traj = source[(s.task["task_id"], s.seed)]
        assert [turn["action"] for turn in traj.turns[: s.t]] == s.actions
        if s.t == 0:
            assert s.prefix_ids == chat.prompt_ids(env.reset(by_id[s.task["task_id"]], s.budget, seed=s.seed))
        else:  # the replayed state is the recorded one, and the prefix ends with its observation's tokens
            obs = traj.turns[s.t - 1]["observation"]
            assert fl.render(env.desc, env.state) in obs and f"{env.remaining} of {env.total}" in obs
            assert s.prefix_ids[-len(chat.observation_ids(obs)) :] == chat.observation_ids(obs)
    assert probing.matched_pool(ta, tb, by_id, 12, seed=0) == pool  # seeded


def test_injected_action_is_really_suboptimal_and_nonterminal(setup):
    _, tasks, a, _, ta, tb = setup
    pool = probing.matched_pool(ta, tb, {t.task_id: t for t in tasks}, 12, seed=1)
    errors = probing.error_pool(pool, ChatFormat(a.tokenizer), seed=3, n=12)
    assert errors
    for e in errors:
        before = probing.ProbeState(**{**e.to_dict(), "actions": e.actions[:-1]}).replay()
        q = before.q_values()
        move, _ = fl.parse_action(e.actions[-1])
        assert q[move] < q.max()
        env = e.replay()
        assert not env.done and env.remaining >= 1
    again = probing.error_pool(pool, ChatFormat(a.tokenizer), seed=3, n=12)
    assert [e.actions for e in again] == [e.actions for e in errors]


def test_frozenlake_makes_its_errors_from_q_star_alone(setup):
    """The environment owns the error: FrozenLake's is a uniformly chosen suboptimal, non-terminal move, the same
    whatever attempts of other policies are offered."""
    _, tasks, _, _, ta, tb = setup
    pool = probing.matched_pool(ta, tb, {t.task_id: t for t in tasks}, 12, seed=1)
    for s in pool:
        env = s.replay()
        candidates = env.incorrect_actions()
        picks = {env.error_action(k) for k in range(40)}
        assert picks == set(candidates) or (not candidates and picks == {None})
        assert all(env.error_action(k, ["<answer>Up</answer>"] * 3) == env.error_action(k) for k in range(10))


def test_continuations_start_at_the_state_with_the_remaining_budget(setup):
    _, tasks, a, _, ta, tb = setup
    pool = probing.matched_pool(ta, tb, {t.task_id: t for t in tasks}, 6, seed=2)
    trajs = continue_from(a, pool, 2, Sampling(1.0, 1.0, 6), seed=0)
    assert len(trajs) == 12
    for s, tr in zip([s for s in pool for _ in range(2)], trajs, strict=True):
        assert (
            tr.token_ids[: len(s.prefix_ids)] == s.prefix_ids and sum(tr.gen_mask[: len(s.prefix_ids)]) == 0
        )
        assert 1 <= tr.n_turns <= s.budget - s.t and tr.start_turn == s.t


def test_win_summary_counts_ties_apart():
    import pandas as pd

    df = pd.DataFrame(
        {
            "base": [0.5, 1.0, 0.2, 0.7],
            "rl": [0.5, 0.9, 0.6, 0.9],
            "depth": [0.1, 0.3, 0.6, 0.9],
            "dead": False,
        }
    )
    s = probing.win_summary(df)
    assert (s["rl_better"], s["tie"], s["base_better"]) == (0.5, 0.25, 0.25)
    assert s["rl_better_among_untied"] == pytest.approx(2 / 3)
    d = probing.by_depth(df, [0.0, 0.5, 1.0])
    assert d["n_states"].tolist() == [2, 2]


def test_dead_states_are_counted_apart_and_left_out():
    """A dead state (no move can still succeed) scores every valid move 1: it must not count as a tie, a win
    or in the means."""
    import pandas as pd

    df = pd.DataFrame(
        {
            "base": [0.2, 0.4, 1.0, 1.0],
            "rl": [0.6, 0.3, 1.0, 0.0],
            "depth": 0.5,
            "dead": [False, False, True, True],
        }
    )
    s = probing.win_summary(df)
    assert (s["n_states"], s["n_dead"], s["n_live"]) == (4, 2, 2)
    assert (s["rl_better"], s["tie"], s["base_better"]) == (0.5, 0.0, 0.5)
    assert s["mean_quality_base"] == pytest.approx(0.3) and s["mean_quality_rl"] == pytest.approx(0.45)
    assert probing.wins(df).tolist() == [1.0, 0.0]
    d = probing.by_depth(df, [0.0, 1.0])
    assert (d["n_dead"].item(), d["n_live"].item()) == (2, 2)


def test_a_state_with_the_goal_out_of_reach_is_dead_and_its_bound_is_zero():
    desc = ("SFFF", "FFFF", "FFFF", "FFFG")  # the goal is 6 moves away
    task = fl.Task(
        "d", "frozenlake", {"desc": list(desc), "is_slippery": True, "success_rate": 0.75}, t_max=8
    )
    for budget, dead in ((3, True), (8, False)):
        state = probing.ProbeState(task.to_dict(), "frozenlake", budget, 0, [], [1], "base")
        assert probing.dead_states([state]).tolist() == [dead]
        bound = probing.best_success([state])[0]
        assert (bound == 0.0) == dead and bound == pytest.approx(fl.upper_bound(task, budget))
        env = state.replay()
        assert all(
            env.step_quality(fl.format_action(a)) == (1.0 if dead else env.step_quality(fl.format_action(a)))
            for a in range(4)
        )


def test_two_policies_at_the_same_states_draw_from_independent_streams(setup):
    """The same model under two names must not sample identical actions (a shared seed made near-identical
    policies tie exactly); under one name it reproduces itself."""
    _, tasks, a, _, ta, tb = setup
    pool = probing.matched_pool(ta, tb, {t.task_id: t for t in tasks}, 12, seed=4)
    twin = HFPolicy(a.model, a.tokenizer, name="twin")
    sampling = Sampling(1.0, 1.0, 6, seed=11)
    acts = {
        name: [
            [g.text for g in row]
            for row in probing.sample_actions(
                p, pool, 4, Sampling(1.0, 1.0, 6, probing.policy_seed(11, p.name))
            )
        ]
        for name, p in (("a", a), ("twin", twin))
    }
    assert acts["a"] != acts["twin"]
    np.testing.assert_array_equal(
        probing.state_quality(a, pool, 4, sampling), probing.state_quality(a, pool, 4, sampling)
    )
    assert probing.policy_seed(11, "base") != probing.policy_seed(11, "rl")


def test_llr_of_a_policy_against_itself_is_zero(setup):
    _, _, a, _, ta, _ = setup
    llr = likelihood.cumulative_llr(a, a, ta[:6])
    assert np.allclose(llr["cum_llr"], 0.0) and np.allclose(llr["llr"], 0.0)
    assert llr.groupby("trajectory")["turn"].max().tolist() == [t.n_turns for t in ta[:6]]


def test_llr_accumulates_the_per_turn_ratio(setup):
    _, _, a, b, ta, _ = setup
    llr = likelihood.cumulative_llr(b, a, ta[:4])
    for _, g in llr.groupby("trajectory"):
        assert np.allclose(g["cum_llr"], g["llr"].cumsum())


def test_nll_equals_minus_the_scored_logprobs(setup):
    _, _, a, _, ta, _ = setup
    nll = likelihood.action_nll(a, ta[:5])
    for i, tr in enumerate(ta[:5]):
        scored = a.score([tr.token_ids[: tr.prompt_len]], [tr.token_ids[tr.prompt_len :]])[0]
        lp = np.array([0.0] * tr.prompt_len + scored)
        rows = nll[nll["trajectory"] == i]
        for (s, e), row in zip(tr.turn_spans(), rows.itertuples(), strict=True):
            assert row.nll_sum == pytest.approx(-lp[s:e].sum(), abs=1e-4)
            # and the sampling log-probs recorded by the rollout agree
            assert row.nll_sum == pytest.approx(-sum(tr.logprobs[s:e]), abs=1e-3)


def test_transcripts_of_other_agents_can_be_analysed(setup):
    _, _, a, _, _, _ = setup
    chat = ChatFormat(a.tokenizer)
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "<answer>Up</answer>"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "<answer>Left</answer>"},
    ]
    tr = likelihood.from_transcript(msgs, chat, model="other", success=True)
    assert tr.n_turns == 2 and len(tr.turn_spans()) == 2
    assert (
        a.tokenizer.decode(tr.token_ids[slice(*tr.turn_spans()[1])], skip_special_tokens=True)
        == "<answer>Left</answer>"
    )
    nll = likelihood.action_nll(a, [tr])
    assert len(nll) == 2 and (nll["nll_mean"] > 0).all()


def test_actions_sampled_by_prompt_length_keep_every_state_in_its_place(setup):
    """Issue 51 (the training monitor): `buckets` > 1 samples the states in that many calls by prompt length; every
    state still gets its k actions, in the pool's order, each a generation at that state's prompt, and one seed
    reproduces them."""
    _, tasks, a, _, ta, tb = setup
    pool = probing.matched_pool(ta, tb, {t.task_id: t for t in tasks}, 12, seed=4)
    assert len({len(s.prefix_ids) for s in pool}) > 1  # prompts of several lengths, or the test shows nothing
    sampling = Sampling(1.0, 1.0, 6, seed=11)
    rows = probing.sample_actions(a, pool, 3, sampling, buckets=3)
    assert [len(r) for r in rows] == [3] * len(pool)
    for state, row in zip(pool, rows, strict=True):  # each action is one the policy can reply at that prompt
        lp = a.score([state.prefix_ids] * 3, [g.token_ids for g in row])
        for g, got in zip(row, lp, strict=True):
            np.testing.assert_allclose(got, g.logprobs, atol=2e-5)
    again = probing.sample_actions(a, pool, 3, sampling, buckets=3)
    assert [[g.token_ids for g in r] for r in rows] == [[g.token_ids for g in r] for r in again]
    np.testing.assert_array_equal(
        probing.state_quality(a, pool, 3, sampling, buckets=3),
        probing.state_quality(a, pool, 3, sampling, buckets=3),
    )
