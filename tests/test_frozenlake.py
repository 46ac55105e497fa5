import gymnasium as gym
import numpy as np
import pytest

from helpers import budget
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, make, play

SMALL = {"size": 4, "hole_p": 0.2, "t_max": 6, "n_train": 150, "n_test": 20}


def random_maps(n, seed=0, size=5):
    return [fl.random_map(size, 0.25, seed * 1000 + i) for i in range(n)]


def gym_render_state(genv):
    return int(genv.unwrapped.s)


@pytest.mark.parametrize("slippery", [False, True])
def test_dynamics_match_gymnasium(slippery):
    rng = np.random.default_rng(1)
    for i, desc in enumerate(random_maps(15, seed=2)):
        task = fl.Task(f"t{i}", "frozenlake", {"desc": list(desc), "is_slippery": slippery}, t_max=20)
        env = make("frozenlake")
        env.reset(task, budget=20, seed=100 + i)
        ref = gym.make("FrozenLake-v1", desc=list(desc), is_slippery=slippery)
        s_ref, _ = ref.reset(seed=100 + i)
        assert env.state == s_ref
        while not env.done:
            a = int(rng.integers(4))
            res = env.step(fl.format_action(a))
            s_ref, r_ref, term, _, _ = ref.step(a)
            assert (env.state, res.reward) == (int(s_ref), float(r_ref))
            assert res.done == (term or env.remaining == 0)
            assert res.success == (fl.render(desc, env.state).count("√") == 1)
            if term:
                break


def value_iteration(desc, horizon, gamma, slippery):
    """Independent finite-horizon value iteration with plain loops over gymnasium's P."""
    P = gym.make("FrozenLake-v1", desc=list(desc), is_slippery=slippery).unwrapped.P
    n = len(P)
    V = [0.0] * n
    Q = [[[0.0] * 4 for _ in range(n)]]
    for _ in range(horizon):
        q = [
            [sum(p * (r + gamma * (0.0 if d else V[s2])) for p, s2, r, d in P[s][a]) for a in range(4)]
            for s in range(n)
        ]
        V = [max(row) for row in q]
        Q.append(q)
    return np.array(Q)


@pytest.mark.parametrize("slippery", [False, True])
def test_optimal_q_matches_value_iteration(slippery):
    for desc in random_maps(8, seed=3):
        for gamma in (0.95, 1.0):
            ours = fl.optimal_q(desc, 9, gamma=gamma, is_slippery=slippery)
            assert ours.shape == (10, 25, 4)
            np.testing.assert_allclose(ours, value_iteration(desc, 9, gamma, slippery), atol=1e-12)


def test_upper_bound_is_shortest_path_reachability_when_deterministic():
    for i, desc in enumerate(random_maps(30, seed=4)):
        task = fl.Task(f"t{i}", "frozenlake", {"desc": list(desc)}, t_max=10)
        sp = fl.shortest_path(desc)
        for T in range(1, 11):
            assert fl.upper_bound(task, T) == (1.0 if sp <= T else 0.0)


def test_splits_are_disjoint_distinct_and_reproducible():
    train = load_tasks("frozenlake", "train", **SMALL)
    test = load_tasks("frozenlake", "test", **SMALL)
    key = lambda t: fl.render(t.payload["desc"], fl.start_state(t.payload["desc"]))  # noqa: E731
    assert len(train) == 150 and len(test) == 20
    assert len({key(t) for t in train}) == 150 and len({key(t) for t in test}) == 20
    assert not {key(t) for t in train} & {key(t) for t in test}
    assert [t.payload for t in load_tasks("frozenlake", "test", **SMALL)] == [t.payload for t in test]
    sub = load_tasks("frozenlake", "test", n=5, seed=1, **SMALL)
    assert len(sub) == 5 and {t.task_id for t in sub} <= {t.task_id for t in test}
    for t in test:
        assert fl.shortest_path(t.payload["desc"]) is not None


def test_invalid_actions_use_the_turn_and_say_why():
    task = load_tasks("frozenlake", "test", **SMALL)[0]
    env = make("frozenlake")
    env.reset(task, budget=3)
    s0 = env.state
    for text, why in [("Left", "no <answer>"), ("<answer>jump</answer>", "unknown move"),
                      ("<answer>Up</answer><answer>Up</answer>", "2 answers")]:  # fmt: skip
        before = env.remaining
        if env.done:
            break
        res = env.step(text)
        assert res.info["invalid"] and why in res.observation and env.state == s0
        assert env.remaining == before - 1 and res.reward == 0.0
    assert env.done and not res.success and "Out of turns" in res.observation
    with pytest.raises(RuntimeError):
        env.step("<answer>Up</answer>")


def test_parser_is_case_insensitive_and_tolerates_surrounding_text():
    assert fl.parse_action("<answer>left</answer>")[0] == 0
    assert fl.parse_action("I go <ANSWER> Up </ANSWER>.")[0] == 3


def test_budget_is_stated_and_exhaustion_fails():
    task = load_tasks("frozenlake", "test", **SMALL)[0]
    env = make("frozenlake")
    msgs = env.reset(task, budget=2)
    assert msgs[1]["content"].endswith(budget.statement(2, 2))
    _transcript, res = play(env, task, 1, lambda e: "<answer>nope</answer>")
    assert res.done and res.reward == 0.0 and "Out of turns" in res.observation


def test_step_quality_is_normalised_q_and_does_not_change_state():
    task = load_tasks("frozenlake", "test", **SMALL)[0]
    env = make("frozenlake")
    env.reset(task, budget=6)
    q = env.q_values()
    qual = [env.step_quality(fl.format_action(a)) for a in range(4)]
    assert max(qual) == 1.0 and env.remaining == 6 and env.t == 0
    np.testing.assert_allclose(qual, q / q.max())
    assert env.step_quality("garbage") == 0.0


def test_optimal_player_always_succeeds_with_full_budget_on_deterministic_maps():
    tasks = load_tasks("frozenlake", "test", **SMALL)
    wins = [play(make("frozenlake"), t, 6, fl.scripted_player(0.0))[1].success for t in tasks]
    assert all(wins)


def test_budgets():
    assert budget.budgetmix_candidates(8) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert budget.budgetmix_candidates(10) == list(range(1, 11))
    assert budget.budgetmix_candidates(5) == [1, 2, 3, 4, 5]
    assert budget.budgetmix_candidates(30) == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert budget.budgetmix_candidates(25) == [3, 5, 8, 10, 13, 15, 18, 20, 23, 25]
    assert [budget.budget_at(f, 10) for f in (0.25, 0.5, 0.75, 1.0)] == [3, 5, 8, 10]
    with pytest.raises(ValueError):
        budget.statement(3, 4)
