"""Transcripts from other agents (notebook 06): the JSON-lines format, the Terminus-style loader, the kit's own
generated set, and scoring them with real (tiny) models."""

from __future__ import annotations

import dataclasses
import json
import string

import numpy as np
import pytest
import torch

from helpers import config, likelihood, models
from helpers.policy import HFPolicy
from helpers.rollout import ChatFormat


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    cfg = config.load("smoke")
    corpus = [m["content"] for t in likelihood.example_transcripts(8, seed=1) for m in t.messages]
    corpus += ["system", "user", "assistant", "tool"] * 20 + list(string.printable)
    d = models.build_tiny(cfg.model.tiny, corpus, tmp_path_factory.mktemp("m"))
    base = HFPolicy.from_pretrained(d, name="base")
    rl = HFPolicy.from_pretrained(d, name="rl")
    with torch.no_grad():
        for p in rl.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return base, rl


def test_the_example_set_is_generated_deterministically_and_round_trips(tmp_path):
    a = likelihood.example_transcripts(4, seed=0)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in likelihood.example_transcripts(4, seed=0)]
    assert {t.agent for t in a} == {"base", "rl"} and len(a) == 8
    assert all(t.success for t in a if t.agent == "rl") and not all(t.success for t in a if t.agent == "base")
    path = likelihood.write_transcripts(tmp_path / "t.jsonl", a)
    assert [t.to_dict() for t in likelihood.read_transcripts(path)] == [t.to_dict() for t in a]
    for t in a:  # every assistant turn is a valid Terminus turn; the last one completes the task
        turns = [likelihood.terminus_turn(m["content"]) for m in t.messages if m["role"] == "assistant"]
        assert all(parsed is not None and why == "" for parsed, why in turns)
        assert turns[-1][0]["task_complete"] and not any(p["task_complete"] for p, _ in turns[:-1])


def test_terminus_turns_parse_and_bad_ones_say_why():
    turn = {
        "analysis": "a",
        "plan": "p",
        "commands": [{"keystrokes": "ls\n", "duration": 0.5}, {"keystrokes": "pwd\n"}],
        "task_complete": False,
    }
    parsed, why = likelihood.terminus_turn("Here you go:\n" + json.dumps(turn) + "\nthanks")
    assert why == "" and parsed["commands"] == [
        {"keystrokes": "ls\n", "duration": 0.5},
        {"keystrokes": "pwd\n", "duration": 1.0},
    ]
    assert (
        likelihood.terminus_turn(json.dumps({k: v for k, v in turn.items() if k != "task_complete"}))[0]
        is not None
    )
    bad = {
        "no json": "I will run ls",
        "'plan' must be a string": json.dumps({**turn, "plan": 3}),
        "'commands' must be a list": json.dumps({**turn, "commands": "ls"}),
        "command 0 needs a string 'keystrokes'": json.dumps({**turn, "commands": [{"duration": 1}]}),
        "'duration' must be a non-negative number": json.dumps(
            {**turn, "commands": [{"keystrokes": "x", "duration": -1}]}
        ),
        "'task_complete' must be true or false": json.dumps({**turn, "task_complete": "yes"}),
    }
    for reason, text in bad.items():
        parsed, why = likelihood.terminus_turn(text)
        assert parsed is None and (reason in why or reason == "no json")


def test_bad_transcript_files_fail_naming_the_line_and_field(tmp_path):
    good = likelihood.example_transcripts(1)[0].to_dict()
    cases = {
        "missing field(s) ['success']": {k: v for k, v in good.items() if k != "success"},
        "unknown field(s) ['score']": {**good, "score": 1},
        "message 1 must be": {**good, "messages": [good["messages"][0], {"role": "robot", "content": "x"}]},
        "needs prompt messages followed by at least one assistant turn": {
            **good,
            "messages": good["messages"][:2],
        },
        "'success' must be true or false": {**good, "success": 1},
    }
    for reason, d in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(d) + "\n")
        with pytest.raises(ValueError, match=r"bad\.jsonl:2") as err:
            likelihood.read_transcripts(path)
        assert reason in str(err.value)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(ValueError, match="given twice"):
        likelihood.read_transcripts(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: not JSON"):
        likelihood.read_transcripts(path)


def test_assistant_turns_are_the_masked_actions(policies):
    base, _ = policies
    chat = ChatFormat(base.tokenizer)
    msgs = [
        {"role": "user", "content": "Task: go"},
        {"role": "assistant", "content": "first"},
        {"role": "tool", "content": "out 1"},
        {"role": "user", "content": "out 2"},
        {"role": "assistant", "content": "second"},
    ]
    tr = likelihood.from_transcript(msgs, chat, model="other")
    assert tr.n_turns == 2 and tr.prompt_len == len(chat.prompt_ids(msgs[:1]))
    spans = tr.turn_spans()
    decoded = [base.tokenizer.decode(tr.token_ids[s:e], skip_special_tokens=True) for s, e in spans]
    assert decoded == ["first", "second"]
    between = tr.token_ids[spans[0][1] : spans[1][0]]
    assert between == chat.observation_ids("out 1\nout 2")  # consecutive observations are one observation
    with pytest.raises(ValueError, match="two assistant turns in a row"):
        likelihood.from_transcript([*msgs, {"role": "assistant", "content": "third"}], chat)
    with pytest.raises(ValueError, match="prompt"):
        likelihood.from_transcript(msgs[1:], chat)


def test_terminus_style_marks_turns_that_do_not_parse(policies):
    base, _ = policies
    t = likelihood.example_transcripts(1)[0]
    broken = likelihood.Transcript(
        t.id, t.agent, t.success, [*t.messages[:-1], {"role": "assistant", "content": "done!"}]
    )
    trajs = likelihood.to_trajectories([t, broken], ChatFormat(base.tokenizer), style="terminus")
    assert not any(turn["invalid"] for turn in trajs[0].turns) and "commands" in trajs[0].turns[0]
    assert trajs[1].turns[-1]["invalid"] and trajs[1].turns[-1]["problem"]
    assert [tr.model for tr in trajs] == [t.agent, t.agent]


def test_scoring_a_transcript_file(policies, tmp_path):
    base, rl = policies
    path = likelihood.transcripts_file("examples", tmp_path / "examples.jsonl")
    assert path == tmp_path / "examples.jsonl" and likelihood.transcripts_file(None, path) is None
    assert likelihood.transcripts_file("data/t.jsonl", path) == config.REPO_ROOT / "data" / "t.jsonl"
    info, nll, llr = likelihood.score_transcripts(path, base, {"rl-s0": rl}, n_boot=20)
    transcripts = likelihood.read_transcripts(path)
    n_actions = sum(m["role"] == "assistant" for t in transcripts for m in t.messages)
    assert info["n_read"] == len(transcripts) == 8 and info["too_long"] == 0 and info["invalid_turns"] == 0
    assert len(nll) == n_actions and (nll["nll_mean"] > 0).all()
    assert set(info["nll_base_policy"]) == {"base", "rl"} and set(info["n_transcripts"].values()) == {4}
    successful = {a for t in transcripts if t.success for a in [t.agent]}
    assert set(info["cum_llr_successful"]) == successful
    for _, g in llr.groupby("trajectory"):
        assert np.allclose(g["cum_llr"], g["llr"].cumsum())
    # against itself the ratio is zero
    _, _, self_llr = likelihood.score_transcripts(path, base, {"base": base}, n_boot=20)
    assert np.allclose(self_llr["cum_llr"], 0.0)


def test_transcripts_longer_than_the_context_are_left_out(policies, tmp_path):
    base, _ = policies
    chat = ChatFormat(base.tokenizer)
    trajs = likelihood.to_trajectories(likelihood.example_transcripts(2), chat)
    lengths = sorted(len(t.token_ids) for t in trajs)
    assert likelihood.within_context(trajs, base) == (trajs, 0)  # the smoke model's context holds them all
    limit = lengths[1]  # a model with a shorter context: the two longest transcripts no longer fit
    assert lengths[1] < lengths[2]
    tiny = dataclasses.replace(config.load("smoke").model.tiny, max_position_embeddings=limit)
    short = HFPolicy.from_pretrained(models.build_tiny(tiny, ["abc"], tmp_path / "short"), name="short")
    kept, dropped = likelihood.within_context(trajs, short)
    assert dropped == 2 and sorted(len(t.token_ids) for t in kept) == lengths[:2]


def test_the_transcripts_knob_is_checked():
    assert config.load("smoke", probing__transcripts="examples").probing.transcripts == "examples"
    with pytest.raises(config.ConfigError, match=r"probing\.transcripts"):
        config.load("smoke", probing__transcripts="runs.txt")


def test_recorded_scores_compute_once_and_read_back_bit_for_bit(policies, tmp_path, monkeypatch):
    """notebook 06's log-probs (evaluate.RecordedScores): the first call scores with the policy and records, the
    same call again reads the record without loading anything and gives the same floats; other token ids, or
    another agent, score anew; log-probs that float32 cannot hold exactly are kept in float64."""
    from helpers import evaluate

    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    base, rl = policies
    loads: list[str] = []

    def getter(policy):
        return lambda: loads.append(policy.name) or policy

    prompts, conts = [[1, 2, 3], [4, 5]], [[6, 7, 8, 9], [10]]
    rec = evaluate.RecordedScores("smoke", "scores-base", base, getter(base))
    first = rec.score(prompts, conts)
    assert first == base.score(prompts, conts) and loads == ["base"]
    again = evaluate.RecordedScores("smoke", "scores-base", base, getter(base)).score(prompts, conts)
    assert again == first and loads == ["base"]  # read back: no policy asked for
    rec.score(prompts, [[6, 7, 8, 9], [11]])  # one token id changed: scored anew
    evaluate.RecordedScores("smoke", "scores-base", "another/model", getter(rl)).score(
        prompts, conts
    )  # another id
    assert loads == ["base", "base", "rl"]

    class Wide:  # log-probs with more digits than float32 keeps
        name = "wide"

        def score(self, p, c):
            return [[1 / 3 + i for i in range(len(x))] for x in c]

    wide = evaluate.RecordedScores("smoke", "scores-wide", "wide-agent", Wide)
    assert wide.score(prompts, conts) == Wide().score(prompts, conts)
    back = evaluate.RecordedScores("smoke", "scores-wide", "wide-agent", None).score(prompts, conts)
    assert back == Wide().score(prompts, conts)  # float64 kept: 1/3 is not a float32
