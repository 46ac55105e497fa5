"""Scripted players as Policy objects (helpers.scripted): rolled out by the kit's own `rollout`, their success agrees
with the DP's exact success; `score` and `generate` agree; what they read off a prompt is the environment's state."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from helpers import base_model, config, models, scripted
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers.rollout import ChatFormat, rollout

Z = 3.29  # two-sided 99.9 %: the tests are seeded, so this only sets how far off an honest player may land


@pytest.fixture(scope="module")
def cpu():
    return config.load("cpu")


@pytest.fixture(scope="module")
def tok():
    """The tiny model's tokenizer, trained as the kit trains it (no model weights needed)."""
    smoke = config.load("smoke")
    return models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))


@pytest.fixture(scope="module")
def tasks(cpu):
    """The cpu profile's first 12 test maps (the test split does not depend on n_train)."""
    return load_tasks("frozenlake", "test", **{**settings(cpu), "n_train": 50})[:12]


@pytest.fixture(scope="module")
def refs(cpu, tok):
    return scripted.references(cpu, tok)


def _exact(player: scripted.ScriptedPolicy, tasks, budget: int) -> np.ndarray:
    return np.array([fl.policy_success(t, player.exact_policy(t, budget), budget) for t in tasks])


def test_exact_policies_are_the_dp_policies(cpu, refs, tasks):
    """The arrays the players play are the kit's own: the demonstrator, the optimum, the best blind policies."""
    t = tasks[0]
    assert np.allclose(refs["habit+noise"].exact_policy(t, 8), base_model.demonstrator_policy(cpu, t))
    assert np.allclose(refs["optimum"].exact_policy(t, 8)[1:], fl.optimal_policy(t, 8)[1:])
    for T in (2, 8):
        assert _exact(refs["optimum"], tasks, T) == pytest.approx([fl.upper_bound(x, T) for x in tasks])
    from helpers import headroom

    blind = [headroom.best_blind_policy(x, 8)[1] for x in tasks]
    assert _exact(refs["blind_t_max"], tasks, 8) == pytest.approx(blind, abs=1e-12)


@pytest.mark.parametrize("budget", [3, 8])
def test_rolled_out_success_agrees_with_the_exact_success(refs, tasks, budget):
    n = 24
    for name, player in refs.items():
        trajs = rollout(
            player, "frozenlake", tasks, budget, n, Sampling(max_new_tokens=8), seed=11, step_quality=False
        )
        observed = np.mean([tr.success for tr in trajs])
        p = _exact(player, tasks, budget)
        se = np.sqrt(np.sum(n * p * (1 - p))) / (n * len(tasks))
        assert abs(observed - p.mean()) <= Z * se + 1e-9, (name, budget, observed, p.mean(), se)
        assert all(not t["invalid"] for tr in trajs for t in tr.turns)


def test_what_a_player_reads_is_the_environments_state(refs, tasks, tok):
    trajs = rollout(
        refs["habit+noise"], "frozenlake", tasks[:4], 6, 3, Sampling(), seed=3, step_quality=False
    )
    for tr in trajs:
        task = next(x for x in tasks if x.task_id == tr.task_id)
        env = fl.FrozenLakeEnv()
        env.reset(task, tr.budget, seed=tr.seed)
        for t, (start, _) in enumerate(tr.turn_spans()):
            obs = scripted.read_observation(tok.decode(tr.token_ids[:start]))
            assert obs.desc == tuple(task.payload["desc"])
            assert (obs.state, obs.remaining, obs.total) == (env.state, 6 - t, 6)
            env.step(tr.turns[t]["action"])


def test_score_and_generate_agree(refs, tasks, tok):
    chat = ChatFormat(tok)
    env = fl.FrozenLakeEnv()
    prompt = chat.prompt_ids(env.reset(tasks[1], 5, seed=0))
    for name, player in refs.items():
        scores = player.score([prompt] * 4, player.replies)
        probs = np.exp([sum(s) for s in scores])
        assert probs.sum() == pytest.approx(1.0, abs=1e-12), name
        assert probs == pytest.approx(player.table(tuple(tasks[1].payload["desc"]), 5)[env.state], abs=1e-12)
        gens = player.generate([prompt] * 2000, Sampling(seed=5))
        for g in gens[:20]:
            assert g.logprobs == pytest.approx(player.score([prompt], [g.token_ids])[0], abs=1e-12)
            assert g.finished and g.token_ids[-1] == tok.eos_token_id
        counts = np.bincount([fl.parse_action(g.text)[0] for g in gens], minlength=4)
        support = probs > 0
        assert counts[~support].sum() == 0, name
        if support.sum() > 1:
            assert chisquare(counts[support], 2000 * probs[support] / probs[support].sum()).pvalue > 1e-3, (
                name
            )
    bogus = chat.action_ids("<answer>Jump</answer>")
    assert np.isneginf(sum(refs["habit+noise"].score([prompt], [bogus])[0]))


def test_temperature_zero_and_the_budget_line_move_only_the_aware_player(refs, tasks, tok):
    """Greedy decoding takes a most likely move; changing only the turns left changes the optimum's distribution
    somewhere on these maps and never a blind player's."""
    chat = ChatFormat(tok)
    env = fl.FrozenLakeEnv()
    moved = 0
    for task in tasks:
        ids = {r: chat.prompt_ids(env.reset(task, 8, seed=0)) for r in (8,)}
        text = tok.decode(ids[8])
        for r in (1, 2, 3):
            swapped = chat.encode(text.replace("Turns left: 8 of 8.", f"Turns left: {r} of 8."))
            for name, player in refs.items():
                a, b = player.move_probs(ids[8]), player.move_probs(swapped)
                if player.kind != "optimum":
                    assert np.array_equal(a, b), name
                elif not np.allclose(a, b):
                    moved += 1
        g = refs["habit+noise"].generate([ids[8]], Sampling(temperature=0.0, seed=1))[0]
        p = refs["habit+noise"].move_probs(ids[8])
        assert p[fl.parse_action(g.text)[0]] == pytest.approx(p.max())
    assert moved > 0


def test_a_prompt_without_an_observation_is_refused(refs, tok):
    with pytest.raises(ValueError, match="no FrozenLake observation"):
        refs["habit"].move_probs(ChatFormat(tok).prompt_ids([{"role": "user", "content": "hello"}]))


def test_a_reply_cut_by_max_new_tokens_is_unfinished_and_invalid(refs, tasks, tok):
    prompt = ChatFormat(tok).prompt_ids(fl.FrozenLakeEnv().reset(tasks[0], 4, seed=0))
    (g,) = refs["optimum"].generate([prompt], Sampling(max_new_tokens=2, seed=0))
    assert not g.finished and len(g.token_ids) == 2
    assert fl.parse_action(g.text)[0] is None
    assert g.logprobs == pytest.approx(refs["optimum"].score([prompt], [g.token_ids])[0])
