"""The budget-swap probe (helpers.budget_probe) on scripted policies: every budget-blind player gives
responsiveness 0 and total variation 0 exactly; the budget-aware optimum gives 2 at every sensitive state and 0 TV at
controls; random moves a share epsilon of the time scale it to 2(1 - epsilon); and the rebuilt prompts change only
the turns left."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import base_model, budget_probe, budgetmix, config, models, scripted
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling
from helpers.probing import ProbeState
from helpers.rollout import ChatFormat, rollout


@pytest.fixture(scope="module")
def setting():
    smoke, cpu = config.load("smoke"), config.load("cpu")
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    tasks = load_tasks("frozenlake", "test", **{**settings(cpu), "n_train": 50})[:24]
    refs = scripted.references(cpu, tok)
    states = budget_probe.budget_mixed_states(refs["habit+noise"], tasks, 4, Sampling(), seed=0)
    swaps = budget_probe.swap_states(states)
    keep = [s for s in swaps if s.kind == "sensitive"][:40] + [s for s in swaps if s.kind == "control"][:40]
    return cpu, tok, refs, states, keep


def test_there_are_sensitive_and_control_states_by_the_dps_rule(setting):
    _, _, _, states, swaps = setting
    kinds = [s.kind for s in swaps]
    assert kinds.count("sensitive") >= 10 and kinds.count("control") >= 10, (
        len(states),
        kinds.count("sensitive"),
    )
    for s in swaps:
        r1, r2 = s.pair
        if s.kind == "sensitive":
            assert not set(s.optimal[r1]) & set(s.optimal[r2]) and s.cost >= budget_probe.DELTA
        else:
            assert all(s.optimal[r] == s.optimal[r1] for r in s.shown)
    assert {s.total for s in swaps} != {8}  # states come from budget-mixed episodes, not only T_max


def test_blind_players_give_zero_and_the_optimum_two(setting):
    cpu, _, refs, _, swaps = setting
    eps = cpu.sft.epsilon
    for name, player in refs.items():
        df = budget_probe.probe(player, swaps)
        sens, ctrl = df[df["kind"] == "sensitive"], df[df["kind"] == "control"]
        assert (ctrl["tv"] == 0).all(), name
        if player.kind != "optimum":
            assert (sens["responsiveness"] == 0).all() and (sens["tv"] == 0).all(), name
            continue
        scale = 1 - player.epsilon
        assert sens["responsiveness"].to_numpy() == pytest.approx(2 * scale, abs=1e-12), name
        assert (sens["tv"] >= scale - 1e-12).all(), name  # disjoint optimal sets: TV of the greedy parts is 1
        for s, p_opt in zip(swaps, df["p_opt"], strict=True):
            expected = {r: scale + player.epsilon * len(s.optimal[r]) / 4 for r in s.shown}
            assert p_opt == pytest.approx(expected, abs=1e-12), name
    m = budget_probe.summary(budget_probe.probe(refs["optimum+noise"], swaps), n_boot=200)
    assert m["responsiveness"]["mean"] == pytest.approx(2 * (1 - eps))
    assert m["responsiveness"]["low"] == pytest.approx(2 * (1 - eps))  # every state gives the same value
    assert m["n_sensitive"] == m["responsiveness"]["n_states"] > 0


def test_a_partly_aware_player_lands_in_between_with_an_interval(setting):
    """A mixture of the optimum and a blind player is a real scripted policy whose responsiveness is known: the
    share of the optimum times 2 (the blind part cancels), inside the interval; the summary's intervals resample
    maps."""
    _, tok, refs, _, swaps = setting

    class Mixture:
        name, tokenizer, eos_token_id, chat_kwargs = "mix", tok, tok.eos_token_id, {}

        def __init__(self, w):
            self.w = w

        def score(self, prompts, conts):
            a, b = refs["optimum"].score(prompts, conts), refs["blind_t_max"].score(prompts, conts)
            out = []
            for x, y in zip(a, b, strict=True):
                p = self.w * np.exp(sum(x)) + (1 - self.w) * np.exp(sum(y))
                out.append([float(np.log(p)) if p > 0 else -np.inf])
            return out

        def generate(self, prompts, sampling):  # pragma: no cover - the probe only scores
            raise NotImplementedError

    m = budget_probe.summary(budget_probe.probe(Mixture(0.3), swaps), n_boot=500)
    assert m["responsiveness"]["mean"] == pytest.approx(0.6, abs=1e-9)
    assert m["tv_control"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert m["responsiveness"]["n_maps"] <= 24


def test_rebuilt_prompts_change_only_the_turns_left(setting):
    _, tok, _, _, swaps = setting
    chat = ChatFormat(tok)
    for s in swaps[:40]:
        same = budget_probe.swapped_prompt(s.state, chat, s.remaining)
        assert same == list(s.state.prefix_ids)
        for r in s.shown:
            text = tok.decode(budget_probe.swapped_prompt(s.state, chat, r))
            obs = scripted.read_observation(text)
            assert (obs.remaining, obs.total, obs.state) == (r, s.total, s.square)
            original = tok.decode(s.state.prefix_ids)
            i = original.rindex(f"Turns left: {s.remaining} of {s.total}.")
            assert text[:i] == original[:i]
    with pytest.raises(ValueError, match="recorded prefix"):
        bad = ProbeState(**{**swaps[0].state.to_dict(), "prefix_ids": [1, 2, 3]})
        budget_probe.swapped_prompt(bad, chat, 1)


def test_classify_a_hand_made_map_where_the_route_depends_on_the_budget():
    """REFERENCE.md's 5x5 map with a short route along a row of holes and a safe detour (slip 0.8): on the square
    below the start the optimum goes Up to the short route with few turns left and Down to the detour with many, so
    the square is budget-sensitive; the costs agree with Q* computed here."""
    desc = ["SFFFG", "FHHHF", "FFFFF", "FFFFF", "FFFFF"]
    payload = {"desc": desc, "is_slippery": True, "success_rate": 0.8, "gamma": 0.95}
    state = ProbeState(
        Task("risky", "frozenlake", payload, 16).to_dict(), "frozenlake", 16, 0, [], [], "hand"
    )
    s = budget_probe.classify(state, 5, 16, 16)
    assert s is not None and s.kind == "sensitive"
    r1, r2 = s.pair
    assert s.optimal[r1] == [3] and s.optimal[r2] == [1]  # Up with r1 turns left, Down with r2 > r1
    q1, q2 = (fl.optimal_q(desc, r, 1.0, True, 0.8)[r, 5] for r in (r1, r2))
    assert set(np.flatnonzero(q1 >= q1.max() - 1e-12)) == set(s.optimal[r1])
    assert s.cost == pytest.approx(
        min(q1.max() - q1[s.optimal[r2]].max(), q2.max() - q2[s.optimal[r1]].max())
    )
    assert s.cost >= budget_probe.DELTA
    corner = budget_probe.classify(state, 24, 16, 16)  # far from both routes: Up at every budget
    assert corner is not None and corner.kind == "control"


def test_the_sharpened_bases_moves_at_its_temperature():
    """`tempered`: a model's temperature-1 move probabilities shaped at the sharpened base's temperature over the
    four moves (greedy at 0, ties shared), top-p after; the model's own at temperature 1 (its other mass kept)."""
    p = np.array([0.1, 0.4, 0.2, 0.2])  # 0.1 on replies other than the four
    probs = [{3: p, 5: np.array([0.3, 0.3, 0.2, 0.1])}]
    (greedy,) = budget_probe.tempered(probs, 0.0)
    assert greedy[3] == pytest.approx([0, 1, 0, 0]) and greedy[5] == pytest.approx([0.5, 0.5, 0, 0])
    (same,) = budget_probe.tempered(probs, 1.0)
    assert same[3] == pytest.approx(p) and same[3] is not p
    (half,) = budget_probe.tempered(probs, 0.5)
    assert half[3] == pytest.approx(p**2 / (p**2).sum())
    (cut,) = budget_probe.tempered(probs, 1.0, top_p=0.5)  # the most likely moves up to half the mass
    assert cut[3] == pytest.approx([0, 4 / 6, 2 / 6, 0]) or cut[3] == pytest.approx([0, 4 / 6, 0, 2 / 6])
    assert budget_probe.tempered([{1: np.zeros(4)}], 0.1)[0][1] == pytest.approx(np.zeros(4))
    # the probe of a tempered distribution: the sharpened greedy optimum is the optimum
    swaps = [budget_probe.classify(_risky(), 5, 16, 16)]
    blurred = [{r: 0.6 * np.eye(4)[s.optimal[r]].mean(0) + 0.1 for r in s.shown} for s in swaps]
    df = budget_probe.probe_table(swaps, budget_probe.tempered(blurred, 0.0))
    assert df["responsiveness"].tolist() == pytest.approx([2.0])


def _risky() -> ProbeState:
    desc = ["SFFFG", "FHHHF", "FFFFF", "FFFFF", "FFFFF"]
    payload = {"desc": desc, "is_slippery": True, "success_rate": 0.8, "gamma": 0.95}
    return ProbeState(Task("risky", "frozenlake", payload, 16).to_dict(), "frozenlake", 16, 0, [], [], "hand")


def test_recorded_numbers_come_back_as_the_same_probabilities(setting):
    _, _, refs, _, swaps = setting
    probs = budget_probe.move_probabilities(refs["optimum+noise"], swaps)
    back = budget_probe.unflat(swaps, budget_probe.flat(swaps, probs))
    assert all(
        b.keys() == p.keys() and all((b[r] == p[r]).all() for r in p)
        for b, p in zip(back, probs, strict=True)
    )
    with pytest.raises(ValueError, match="do not fit"):
        budget_probe.unflat(swaps, budget_probe.flat(swaps, probs)[:-4])


def test_distinct_states_are_distinct_prompts(setting):
    _, _, refs, states, _ = setting
    keys = [(s.task["task_id"], s.budget, tuple(s.prefix_ids)) for s in states]
    assert len(set(keys)) == len(keys)
    tasks = load_tasks("frozenlake", "test", **{**settings(config.load("cpu")), "n_train": 50})[:3]
    trajs = rollout(
        refs["habit+noise"], "frozenlake", tasks, budget_probe.mixed_budgets(tasks, 1), 3, Sampling(), seed=1
    )
    once = budget_probe.distinct_states(trajs, tasks)
    assert budget_probe.distinct_states(trajs + trajs, tasks) == once  # pooling a copy adds nothing
    assert {s.source for s in once} == {"habit+noise"}


def test_the_table_on_scripted_players_is_calibrated(setting):
    """notebook 02's table builder (`budgetmix.swap_summary`) on scripted players only: every budget-blind player
    gives responsiveness 0 and the budget-aware optimum 2, TV 0 at controls; its metrics are JSON and its findings
    print them with the side of 0 each interval lies on."""
    cpu, _, refs, _, swaps = setting
    names = ["habit", "blind_t_max", "optimum", "optimum+noise"]
    probs = {n: budget_probe.move_probabilities(refs[n], swaps) for n in names}
    kinds = {"habit": "model", "blind_t_max": "model", "optimum": "scripted", "optimum+noise": "scripted"}
    swap = budgetmix.swap_summary(
        swaps, probs, kinds, n_boot=100, pool={"sources": ["habit+noise"], "n_distinct_states": len(swaps)}
    )
    t = swap.table
    assert list(t.index) == names and (t["kind"] == pd.Series(kinds)).all()
    assert t.loc["habit", "responsiveness"] == 0 and t.loc["blind_t_max", "responsiveness"] == 0
    assert t.loc["optimum", ["responsiveness", "low", "high"]].tolist() == pytest.approx([2, 2, 2])
    assert t.loc["optimum+noise", "responsiveness"] == pytest.approx(2 * (1 - cpu.sft.epsilon))
    assert (t["tv_control"] == 0).all() and t.loc["optimum", "tv_sensitive"] == pytest.approx(1)
    assert t.loc["optimum", [c for c in t if c.startswith("P(opt)")]].tolist() == [1.0] * 8
    assert (t["n_sensitive"] == sum(s.kind == "sensitive" for s in swaps)).all()
    assert len(swap.per_state) == len(names) * len(swaps)
    m = json.loads(json.dumps({"env": "frozenlake", "budget_probe": budgetmix.swap_metrics(swap)}))
    assert m["budget_probe"]["agents"]["optimum"]["p_optimal_by_budget"]["1"]["mean"] == pytest.approx(1)
    text = "\n".join(budgetmix.swap_findings(m))
    assert "habit 0.000 [0.000, 0.000] (contains 0); blind_t_max 0.000 [0.000, 0.000] (contains 0)." in text
    assert "above 0 for no model and below 0 for no model" in text
    assert "budget-aware optimum +2.000; optimum with the demonstrator's random moves +1.500." in text
