"""The budget-swap probe (helpers.budget_probe) on scripted policies: every budget-blind player gives
responsiveness 0 and total variation 0 exactly; the budget-aware optimum gives 2 at every sensitive state and 0 TV at
controls; random moves a share epsilon of the time scale it to 2(1 - epsilon); and the rebuilt prompts change only
the turns left."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import base_model, budget_probe, config, models, scripted
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling
from helpers.probing import ProbeState
from helpers.rollout import ChatFormat


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
