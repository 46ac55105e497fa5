"""Step probing and error recovery on DeepCoder-MT, driven by scripted policies with known answers.

Two scripted policies play the real environment (programs run in the sandbox): `solver` submits the task's
reference solution, `failer` submits `print(0)`, which passes exactly the tests whose expected output is 0. So
every oracle value, injected error and win rate below has an answer computed from the task's tests alone.
"""

from __future__ import annotations

import ast

import numpy as np
import pandas as pd
import pytest

from helpers import models, probing
from helpers.envs import StepOracle, Task, make, step_oracle
from helpers.envs.code import CodeEnv, extract_program, fence, kit_tasks
from helpers.envs.code_mutations import mutate, mutation_sites
from helpers.policy import Generation, Sampling
from helpers.rollout import ChatFormat, continue_from, rollout

T_MAX = 3
WRONG = fence("print(0)")
SAMPLING = Sampling(1.0, 1.0, 64, seed=0)


class ScriptedPolicy:
    """A sampling policy (the `helpers.policy.Policy` generate interface) whose reply is a fixed function of the
    task named in the prompt: what a scripted player is, at the token level the analyses work on."""

    def __init__(self, name: str, tokenizer, tasks: list[Task], reply):
        self.name = name
        self.tokenizer = tokenizer
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.tasks = tasks
        self.reply = reply

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        out = []
        for ids in prompt_token_ids:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            task = next(t for t in self.tasks if t.payload["problem"].split("\n")[0] in text)  # by its title
            reply = self.reply(task)
            tokens = [*self.tokenizer(reply, add_special_tokens=False)["input_ids"], self.eos_token_id]
            out.append(Generation(tokens, [0.0] * len(tokens), reply))
        return out


def zero_fraction(task: Task) -> float:
    """The known pass rate of `print(0)`: the share of tests whose expected output is 0."""
    tests = task.payload["tests"]
    return sum(t["output"].strip() == "0" for t in tests) / len(tests)


@pytest.fixture(scope="module")
def setup():
    tasks = [
        t for t in kit_tasks(t_max=T_MAX) if t.task_id in ("kit-000", "kit-001")
    ]  # Spread, Sum of digits
    assert [round(zero_fraction(t), 4) for t in tasks] == [round(2 / 6, 4), round(1 / 6, 4)]  # not trivial
    env = CodeEnv()
    corpus = ["system", "user", "assistant", WRONG] * 20
    for t in tasks:
        corpus += [m["content"] for m in env.reset(t, T_MAX)] + [fence(t.payload["reference"])]
        corpus.append(env.step(WRONG).observation)
    import string

    corpus += list(string.printable)
    tok = models.train_tokenizer(corpus)
    solver = ScriptedPolicy("solver", tok, tasks, lambda t: fence(t.payload["reference"]))
    failer = ScriptedPolicy("failer", tok, tasks, lambda t: WRONG)
    base = rollout(failer, "deepcoder", tasks, T_MAX, 1, SAMPLING, seed=0)  # fails every turn
    rl = rollout(solver, "deepcoder", tasks, T_MAX, 1, SAMPLING, seed=0)  # solves at the first turn
    return tasks, tok, solver, failer, base, rl


def test_deepcoder_declares_a_step_oracle_and_bfcl_and_sql_do_not():
    assert step_oracle("deepcoder")["step_oracle"] and step_oracle("frozenlake")["step_oracle"]
    assert isinstance(CodeEnv(), StepOracle) and isinstance(make("frozenlake"), StepOracle)
    for name in ("bfcl", "intercode_sql"):
        info = step_oracle(name)
        assert info["step_oracle"] is False and len(info["oracle_note"]) > 40
        state = probing.ProbeState(Task("x", name, {}, 3).to_dict(), name, 3, 0, [], [1], "base")
        with pytest.raises(ValueError, match=f"environment '{name}' has none"):
            probing.inject_error(state, None, seed=0)


def test_scripted_trajectories_are_what_the_environment_says(setup):
    tasks, _, _, _, base, rl = setup
    assert [(t.n_turns, t.success) for t in base] == [(T_MAX, False)] * 2
    assert [(t.n_turns, t.success) for t in rl] == [(1, True)] * 2
    for tr, task in zip(base, tasks, strict=True):
        n = len(task.payload["tests"])
        k = round(zero_fraction(task) * n)
        assert all(f"passed {k} of {n} tests" in turn["observation"] for turn in tr.turns)
        assert [turn["quality"] for turn in tr.turns] == pytest.approx([zero_fraction(task)] * T_MAX)


def test_oracle_values_dead_states_and_bounds_on_known_answers(setup):
    tasks, _, solver, failer, base, _ = setup
    by_id = {t.task_id: t for t in tasks}
    states = [s for tr in base for s in probing.states_of(tr, by_id[tr.task_id], "base")]
    assert [s.t for s in states] == [0, 1, 2, 0, 1, 2]
    assert [s.depth for s in states] == pytest.approx([0, 1 / 3, 2 / 3] * 2)  # d_t = t / T_max of the task
    for s in states:
        env = s.replay()
        assert env.remaining == T_MAX - s.t and not env.done
    q_solver = probing.state_quality(solver, states, 2, SAMPLING)
    q_failer = probing.state_quality(failer, states, 2, SAMPLING)
    np.testing.assert_array_equal(q_solver, np.ones((6, 2)))
    expected = np.repeat([zero_fraction(t) for t in tasks], 3)
    np.testing.assert_allclose(q_failer, np.column_stack([expected, expected]))
    assert not probing.dead_states(states).any()  # a turn is left at every live DeepCoder-MT state
    np.testing.assert_array_equal(probing.best_success(states), np.ones(6))  # the reference solves it now


def test_win_rate_arithmetic_on_known_answers(setup):
    tasks, _, solver, failer, base, _ = setup
    by_id = {t.task_id: t for t in tasks}
    states = [s for tr in base for s in probing.states_of(tr, by_id[tr.task_id], "base")]
    q = {
        "base": probing.state_quality(failer, states, 2, SAMPLING),
        "rl": probing.state_quality(solver, states, 2, SAMPLING),
    }
    table = probing.state_table(states, q)
    s = probing.win_summary(table)
    expected_base = np.mean([zero_fraction(t) for t in tasks])
    assert (s["n_states"], s["n_dead"], s["n_live"]) == (6, 0, 6)
    assert (s["rl_better"], s["tie"], s["base_better"]) == (1.0, 0.0, 0.0)
    assert s["mean_quality_rl"] == 1.0 and s["mean_quality_base"] == pytest.approx(expected_base)
    assert s["mean_diff"] == pytest.approx(1 - expected_base)
    reverse = probing.win_summary(table, "base", "rl")
    assert (reverse["base_better"], reverse["rl_better"]) == (0.0, 1.0)
    twin = probing.win_summary(table.assign(rl=table["base"]))  # the same quality everywhere: all ties
    assert (twin["rl_better"], twin["tie"]) == (0.0, 1.0)
    depth = probing.by_depth(table, [0.0, 0.5, 1.0])
    assert depth["n_states"].tolist() == [4, 2] and depth["rl_better"].tolist() == [1.0, 1.0]
    per_seed = pd.concat([table.assign(rl_seed=0), table.assign(rl_seed=1)], ignore_index=True)
    summary = probing.seed_summary(per_seed, [("rl", "base")], n_boot=50)
    assert summary["rl_vs_base"]["better"] == 1.0 and summary["rl_vs_base"]["better_ci"] == [1.0, 1.0]
    assert summary["mean_quality_base"]["mean"] == pytest.approx(expected_base)


def test_matched_pools_of_code_trajectories(setup):
    tasks, _, _, _, base, rl = setup
    by_id = {t.task_id: t for t in tasks}
    with pytest.raises(ValueError, match="distinct states"):  # the solver's trajectories hold only 2 states
        probing.matched_pool(base, rl, by_id, 8, seed=0)
    pool = probing.matched_pool(base, rl, by_id, 8, seed=0, at_most=True)
    from_base = [s for s in pool if s.source == "base"]
    from_rl = [s for s in pool if s.source == "rl"]
    assert len(from_base) == 4 and all(s.t == 0 for s in from_rl)
    assert {s.key for s in from_base}.isdisjoint(s.key for s in from_rl)
    assert probing.matched_pool(base, rl, by_id, 8, seed=0, at_most=True) == pool


def test_injected_error_is_the_base_policys_own_failing_attempt_with_its_feedback(setup):
    tasks, tok, _, _, base, rl = setup
    by_id = {t.task_id: t for t in tasks}
    chat = ChatFormat(tok)
    starts = [probing.states_of(tr, by_id[tr.task_id], "rl")[0] for tr in rl]  # turn 0 of each task
    attempts = probing.attempts_of(base)
    assert attempts == {t.task_id: [WRONG] * T_MAX for t in tasks}
    errors = probing.error_pool(starts, chat, seed=5, n=10, attempts=attempts)
    assert len(errors) == 2
    for s, e, task in zip(starts, errors, tasks, strict=True):
        assert e.actions == [WRONG] and e.t == 1 and e.source == "rl"
        env = e.replay()
        assert not env.done and env.remaining == T_MAX - 1
        fresh = CodeEnv()
        fresh.reset(task, T_MAX)
        obs = fresh.step(WRONG).observation  # the environment's own feedback on the injected program
        n = len(task.payload["tests"])
        assert f"passed {round(zero_fraction(task) * n)} of {n} tests" in obs
        assert e.prefix_ids == s.prefix_ids + chat.action_ids(WRONG) + chat.observation_ids(obs)
    assert [e.actions for e in probing.error_pool(starts, chat, seed=5, n=10, attempts=attempts)] == [
        e.actions for e in errors
    ]


def test_without_attempts_the_error_is_a_mutated_reference_that_fails_some_tests(setup):
    tasks, tok, _, _, _, rl = setup
    by_id = {t.task_id: t for t in tasks}
    chat = ChatFormat(tok)
    starts = [probing.states_of(tr, by_id[tr.task_id], "rl")[0] for tr in rl]
    passing_attempts = {t.task_id: [fence(t.payload["reference"]), "no program here"] for t in tasks}
    errors = probing.error_pool(
        starts, chat, seed=7, n=10, attempts=passing_attempts
    )  # neither is a failing program
    assert len(errors) == 2
    for s, e, task in zip(starts, errors, tasks, strict=True):
        program = extract_program(e.actions[-1])
        reference = task.payload["reference"]
        assert program is not None and program.strip() != reference.strip()
        assert ast.dump(ast.parse(program)) != ast.dump(ast.parse(reference))
        assert any(mutate(reference, site) == program for site in mutation_sites(reference))
        assert s.replay().step_quality(e.actions[-1]) < 1.0  # it fails some tests
    again = probing.error_pool(starts, chat, seed=7, n=10, attempts=passing_attempts)
    assert [e.actions for e in again] == [e.actions for e in errors]


def test_no_error_can_be_made_at_the_last_turn(setup):
    tasks, tok, _, _, base, _ = setup
    by_id = {t.task_id: t for t in tasks}
    last = probing.states_of(base[0], by_id[base[0].task_id], "base")[-1]
    assert last.t == T_MAX - 1
    assert (
        probing.inject_error(last, ChatFormat(tok), seed=0, attempts=[WRONG]) is None
    )  # nothing left to recover


def test_recovery_from_identical_error_states(setup):
    tasks, tok, solver, failer, base, rl = setup
    by_id = {t.task_id: t for t in tasks}
    starts = [probing.states_of(tr, by_id[tr.task_id], "rl")[0] for tr in rl]
    errors = probing.error_pool(starts, ChatFormat(tok), seed=5, n=10, attempts=probing.attempts_of(base))
    np.testing.assert_array_equal(
        probing.continuation_success(solver, errors, 2, SAMPLING, seed=1), [1.0, 1.0]
    )
    np.testing.assert_array_equal(
        probing.continuation_success(failer, errors, 2, SAMPLING, seed=1), [0.0, 0.0]
    )
    np.testing.assert_array_equal(probing.best_success(errors), [1.0, 1.0])
    trajs = continue_from(solver, errors, 1, SAMPLING)
    assert [(t.start_turn, t.n_turns, t.success) for t in trajs] == [(1, 1, True)] * 2
    trajs = continue_from(failer, errors, 1, SAMPLING)
    assert [(t.n_turns, t.success, t.exhausted) for t in trajs] == [(T_MAX - 1, False, True)] * 2
    table = probing.state_table(
        errors,
        {
            "base": probing.state_quality(failer, errors, 2, SAMPLING),
            "rl": probing.state_quality(solver, errors, 2, SAMPLING),
        },
    )
    assert probing.wins(table).tolist() == [1.0, 1.0]  # the superior action after the error, every time


def test_mutation_sites_and_mutants():
    program = "n = int(input())\nif n > 2 and n % 2 == 0:\n    print(n - 1)\ni = 0\ni += 1\n"
    sites = mutation_sites(program)
    mutants = {mutate(program, s) for s in sites}
    assert len(mutants) == len(sites) >= 6
    assert "if n >= 2 and n % 2 == 0:" in "\n".join(mutants)
    assert any("n + 1" in m for m in mutants) and any(" or " in m for m in mutants)
    assert all("i += 1" in m for m in mutants)  # augmented assignments are left alone
    assert mutation_sites("def f(:\n") == []
