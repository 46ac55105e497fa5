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


@pytest.mark.parametrize("slippery,rate", [(False, 1 / 3), (True, 1 / 3), (True, 0.75)])
def test_dynamics_match_gymnasium(slippery, rate):
    rng = np.random.default_rng(1)
    for i, desc in enumerate(random_maps(15, seed=2)):
        payload = {"desc": list(desc), "is_slippery": slippery, "success_rate": rate}
        task = fl.Task(f"t{i}", "frozenlake", payload, t_max=20)
        env = make("frozenlake")
        env.reset(task, budget=20, seed=100 + i)
        ref = gym.make("FrozenLake-v1", desc=list(desc), is_slippery=slippery, success_rate=rate)
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


def value_iteration(desc, horizon, gamma, slippery, rate=1 / 3):
    """Independent finite-horizon value iteration with plain loops over gymnasium's P."""
    P = gym.make("FrozenLake-v1", desc=list(desc), is_slippery=slippery, success_rate=rate).unwrapped.P
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


@pytest.mark.parametrize("slippery,rate", [(False, 1 / 3), (True, 1 / 3), (True, 0.75)])
def test_optimal_q_matches_value_iteration(slippery, rate):
    for desc in random_maps(8, seed=3):
        for gamma in (0.95, 1.0):
            ours = fl.optimal_q(desc, 9, gamma=gamma, is_slippery=slippery, success_rate=rate)
            assert ours.shape == (10, 25, 4)
            np.testing.assert_allclose(ours, value_iteration(desc, 9, gamma, slippery, rate), atol=1e-12)


def slippery_task(desc, rate=0.75, i=0):
    payload = {"desc": list(desc), "is_slippery": True, "success_rate": rate}
    return fl.Task(f"s{i}", "frozenlake", payload, t_max=8)


def test_policy_success_matches_simulation_on_gymnasium():
    """Exact success of a stationary policy by policy evaluation = the rate in 4000 simulated gymnasium games."""
    desc = ("SFFF", "FHFH", "FFFH", "HFFG")
    task = slippery_task(desc)
    pi = fl.with_random_moves(fl.stationary_policy(task), 0.25)
    rng = np.random.default_rng(0)
    for T in (3, 6, 8):
        exact = fl.policy_success(task, pi, T)
        env = gym.make("FrozenLake-v1", desc=list(desc), is_slippery=True, success_rate=0.75)
        wins = 0
        for g in range(4000):
            s, _ = env.reset(seed=g)
            for _ in range(T):
                s, r, term, _, _ = env.step(int(rng.choice(4, p=pi[s])))
                if term:
                    wins += r == 1.0
                    break
        se = np.sqrt(exact * (1 - exact) / 4000)
        assert abs(wins / 4000 - exact) < 4 * se + 1e-9, (T, wins / 4000, exact)


def test_upper_bound_is_the_budget_aware_optimum_and_beats_every_stationary_policy():
    for i, desc in enumerate(random_maps(10, seed=5, size=4)):
        task = slippery_task(desc, i=i)
        opt = fl.optimal_policy(task, 8)
        stationary = fl.stationary_policy(task, 0.99)
        for T in range(1, 9):
            bound = fl.upper_bound(task, T)
            assert fl.policy_success(task, opt, T) == pytest.approx(bound, abs=1e-12)
            assert fl.policy_success(task, stationary, T) <= bound + 1e-12
            assert fl.policy_success(task, fl.with_random_moves(stationary, 0.3), T) <= bound + 1e-12


def test_knowing_the_budget_is_worth_nothing_without_slip_and_something_with_it():
    """Deterministic ice: the stationary policy walks a shortest path, so it matches the budget-aware optimum at
    every T. Slippery ice: at a tight budget the cautious detour costs success the optimum does not give up."""
    maps = random_maps(20, seed=6, size=4)
    for i, desc in enumerate(maps):
        task = fl.Task(f"d{i}", "frozenlake", {"desc": list(desc)}, t_max=8)
        pi = fl.stationary_policy(task, 0.99)
        for T in range(1, 9):
            assert fl.policy_success(task, pi, T) == pytest.approx(fl.upper_bound(task, T), abs=1e-12)
    gaps = [
        fl.upper_bound(slippery_task(d), 3)
        - fl.policy_success(slippery_task(d), fl.stationary_policy(slippery_task(d)), 3)
        for d in maps
    ]
    assert min(gaps) >= -1e-12 and max(gaps) > 0.05


def test_habit_player_follows_the_stationary_policy_and_ignores_the_budget():
    desc = ("SFFF", "FHFH", "FFFH", "HFFG")
    task = slippery_task(desc)
    pi = fl.stationary_policy(task)
    for budget_ in (2, 8):
        env = make("frozenlake")
        env.reset(task, budget_, seed=3)
        player = fl.habit_player(0.0, 0.99, seed=1)
        while not env.done:
            action, _ = fl.parse_action(player(env))
            assert pi[env.state, action] > 0
            env.step(fl.format_action(action))


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
    for text, why in [
        ("Left", "no <answer>"),
        ("<answer>jump</answer>", "unknown move"),
        ("<answer>Up</answer><answer>Up</answer>", "2 answers"),
    ]:
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
