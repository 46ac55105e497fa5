"""The tiny model, the HF policy (generate/score, carried KV cache) and lock-step rollouts."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from helpers import base_model, config, models, store
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling, pad_batch
from helpers.rollout import ChatFormat, Trajectory, rollout, summarize


@pytest.fixture(scope="module")
def cfg():
    return config.load("smoke")


@pytest.fixture(scope="module")
def tiny_dir(cfg, tmp_path_factory):
    """An untrained tiny model (random weights sample varied tokens, which exercises every code path)."""
    transcripts = base_model.demonstrations(cfg, 40, seed=0)
    return models.build_tiny(
        cfg.model.tiny, base_model.tokenizer_corpus(transcripts), tmp_path_factory.mktemp("tiny")
    )


@pytest.fixture(scope="module")
def tasks(cfg):
    return load_tasks("frozenlake", "test", **settings(cfg))


def test_tokenizer_round_trip_and_small_pieces(tiny_dir, tasks):
    _, tok = models.load(tiny_dir)
    texts = [
        fl.SYSTEM_PROMPT,
        fl.render(tasks[0].payload["desc"], 0),
        "<answer>Left</answer>",
        "Turns left: 3 of 6.",
    ]
    for text in texts:
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    ids = tok("<answer>Left</answer>", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<answer>", "Left", "</answer>"]
    grid = fl.render(tasks[0].payload["desc"], 0)
    assert len(tok(grid, add_special_tokens=False)["input_ids"]) == len(grid)  # one token per grid cell


def test_chat_template_assistant_mask(tiny_dir, tasks):
    _, tok = models.load(tiny_dir)
    from helpers.envs import play

    transcript, _ = play(fl.FrozenLakeEnv(), tasks[0], 4, fl.scripted_player(0.0))
    out = tok.apply_chat_template(transcript, return_assistant_tokens_mask=True, return_dict=True)
    marked = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    expected = [
        i for m in transcript if m["role"] == "assistant" for i in ChatFormat(tok).action_ids(m["content"])
    ]
    assert marked == expected
    # and the incremental encoding used by rollouts and SFT gives the same ids and mask as the template
    ids, mask = base_model.encode_transcript(ChatFormat(tok), transcript)
    assert ids == out["input_ids"][: len(ids)]
    assert mask == out["assistant_masks"][: len(ids)]


def test_loads_by_path_with_auto_classes(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert AutoModelForCausalLM.from_pretrained(tiny_dir).config.model_type == "qwen3"
    assert AutoTokenizer.from_pretrained(tiny_dir).chat_template


def test_generate_logprobs_match_score(tiny_dir, tasks):
    pol = HFPolicy.from_pretrained(tiny_dir)
    trajs = rollout(pol, "frozenlake", tasks[:4], 4, 3, Sampling(1.0, 1.0, 6), seed=0)
    prompts = [t.token_ids[: t.prompt_len] for t in trajs]
    conts = [t.token_ids[t.prompt_len :] for t in trajs]
    for t, s in zip(trajs, pol.score(prompts, conts), strict=True):
        m = np.array(t.gen_mask[t.prompt_len :], bool)
        assert m.any()
        np.testing.assert_allclose(np.array(s)[m], np.array(t.logprobs[t.prompt_len :])[m], atol=2e-5)


def test_repeated_prompts_are_prefilled_once_with_the_same_logprobs(tiny_dir, tasks):
    """Issue 51: where prompts repeat (the budget-swap probe scores four replies at each prompt), `score` pre-fills
    each distinct prompt once and reads the replies off its cache: the log-probs of scoring every prompt +
    continuation as its own sequence, for replies of different lengths and an empty one, over several groups."""
    pol = HFPolicy.from_pretrained(tiny_dir, score_batch=3)  # 3 distinct prompts per group: several groups
    chat = ChatFormat(pol.tokenizer)
    env = fl.FrozenLakeEnv()
    prompts = [chat.prompt_ids(env.reset(t, r)) for t in tasks[:4] for r in (1, 3)]
    replies = [chat.action_ids(fl.format_action(a)) for a in range(4)] + [[5], [], chat.encode("<answer>")]
    p = [ids for ids in prompts for _ in replies]
    c = replies * len(prompts)
    shared, plain = pol.score(p, c), pol._score_rows(p, c)
    assert [len(s) for s in shared] == [len(x) for x in c]
    for a, b in zip(shared, plain, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5)
    # prompts that never repeat, or are too short to share, take the plain path
    assert pol.score(prompts[:2], c[:2]) == pol._score_rows(prompts[:2], c[:2])


def test_a_text_is_tokenised_once_and_every_caller_gets_its_own_list(tiny_dir):
    """Issue 51: `ChatFormat.encode` remembers each text's ids per tokenizer (bit-identical to the tokenizer's), and
    hands out copies, so a rollout that extends one never changes what the next caller reads."""
    from helpers import rollout as rollout_module

    _, tok = models.load(tiny_dir)
    chat = ChatFormat(tok)
    text = fl.render(["SFFF", "FHFH", "FFFH", "HFFG"], 0)
    first = chat.encode(text)
    assert first == tok(text, add_special_tokens=False)["input_ids"]
    first.append(-1)
    assert chat.encode(text) == first[:-1]
    assert text in rollout_module._encoded[tok]
    size = rollout_module.ENCODE_CACHE_SIZE
    try:  # full memory starts again; none (the benchmark's baseline) calls the tokenizer every time
        rollout_module.ENCODE_CACHE_SIZE = 1
        assert (
            chat.encode("Turns left: 3 of 6.")
            == tok("Turns left: 3 of 6.", add_special_tokens=False)["input_ids"]
        )
        assert list(rollout_module._encoded[tok]) == ["Turns left: 3 of 6."]
        rollout_module.ENCODE_CACHE_SIZE = 0
        assert chat.encode(text) == first[:-1]
    finally:
        rollout_module.ENCODE_CACHE_SIZE = size


def test_a_large_rollout_runs_in_chunks_that_keep_its_order_and_draw_their_own_streams(tiny_dir, tasks):
    """Issue 51: past its `rollout_rows` (`policy.ROLLOUT_ROWS` for an HF policy on the CPU) a rollout runs in chunks;
    the first chunk is exactly what a rollout of its tasks alone gives, the trajectories come back grouped by task,
    and later chunks sample on streams of their own (`chunk_seed`). (Not the draws of one batch: a sampler's draws
    depend on the batch it samples.) A policy without `rollout_rows` (vLLM, a scripted player) takes one batch."""
    from helpers import policy as policy_module
    from helpers import rollout as rollout_module

    pol = HFPolicy.from_pretrained(tiny_dir)
    assert pol.rollout_rows == policy_module.ROLLOUT_ROWS
    sampling = Sampling(1.0, 1.0, 6)
    pol.rollout_rows = 4  # 3 tasks x 2 samples: chunks of 4, 2
    chunked = rollout(pol, "frozenlake", tasks[:3], 4, 2, sampling, seed=5)
    first = rollout(pol, "frozenlake", tasks[:2], 4, 2, sampling, seed=5)
    pol.rollout_rows = None
    whole = rollout(pol, "frozenlake", tasks[:3], 4, 2, sampling, seed=5)
    assert (
        [t.task_id for t in chunked]
        == [t.task_id for t in whole]
        == [t.task_id for t in tasks[:3] for _ in "ab"]
    )
    assert [t.token_ids for t in chunked[:4]] == [t.token_ids for t in first]
    assert (
        rollout_module.chunk_seed(5, 0) == 5 and len({rollout_module.chunk_seed(5, c) for c in range(4)}) == 4
    )


def test_carried_cache_equals_reencoding(tiny_dir, tasks):
    cached = HFPolicy.from_pretrained(tiny_dir, prefix_cache=True)
    naive = HFPolicy.from_pretrained(tiny_dir, prefix_cache=False)
    a = rollout(cached, "frozenlake", tasks[:5], 5, 2, Sampling(1.0, 1.0, 6), seed=4)
    b = rollout(naive, "frozenlake", tasks[:5], 5, 2, Sampling(1.0, 1.0, 6), seed=4)
    assert [t.token_ids for t in a] == [t.token_ids for t in b]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.logprobs, y.logprobs, atol=2e-5)


def test_rollout_is_deterministic_for_a_seed(tiny_dir, tasks):
    pol = HFPolicy.from_pretrained(tiny_dir)
    a = rollout(pol, "frozenlake", tasks[:3], 4, 2, Sampling(1.0, 1.0, 6), seed=7)
    pol.reset_cache()
    b = rollout(pol, "frozenlake", tasks[:3], 4, 2, Sampling(1.0, 1.0, 6), seed=7)
    c = rollout(pol, "frozenlake", tasks[:3], 4, 2, Sampling(1.0, 1.0, 6), seed=8)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.token_ids for t in a] != [t.token_ids for t in c]


def test_token_bookkeeping(tiny_dir, tasks):
    pol = HFPolicy.from_pretrained(tiny_dir)
    trajs = rollout(pol, "frozenlake", tasks[:4], 3, 2, Sampling(1.0, 1.0, 6), seed=1)
    chat = ChatFormat(pol.tokenizer)
    for t in trajs:
        assert len(t.token_ids) == len(t.gen_mask) == len(t.logprobs)
        spans = t.turn_spans()
        assert len(spans) == t.n_turns <= t.budget
        for (s, e), turn in zip(spans, t.turns, strict=True):
            assert pol.tokenizer.decode(t.token_ids[s:e], skip_special_tokens=True) == turn["action"]
        # the environment's tokens are the chat format's encoding of each observation
        s_next = spans[1][0] if len(spans) > 1 else None
        if s_next is not None:
            obs = chat.observation_ids(t.turns[0]["observation"])
            assert t.token_ids[s_next - len(obs) : s_next] == obs
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.gen_mask, strict=True) if not m)


def test_budget_exhaustion_ends_with_reward_zero(tiny_dir, tasks):
    pol = HFPolicy.from_pretrained(tiny_dir)
    # Greedy decoding of an untrained model never writes a valid answer: every episode runs out of turns.
    trajs = rollout(pol, "frozenlake", tasks[:3], 2, 1, Sampling(0.0, 1.0, 4), seed=0)
    for t in trajs:
        if not any(turn["success"] for turn in t.turns):
            assert t.n_turns == 2 and t.reward == 0.0 and not t.success and t.turns[-1]["done"]
    assert summarize(trajs)["n"] == 3


def test_trajectories_round_trip_through_json_lines(tiny_dir, tasks, tmp_path):
    pol = HFPolicy.from_pretrained(tiny_dir)
    trajs = rollout(pol, "frozenlake", tasks[:2], 3, 2, Sampling(1.0, 1.0, 6), seed=2)
    rec = store.Records(tmp_path / "t.jsonl")
    rec.append([t.to_dict() for t in trajs])
    back = [Trajectory.from_dict(d) for d in store.Records(tmp_path / "t.jsonl")]
    assert back == trajs


def test_base_model_is_cached_by_recipe(cfg):
    path = base_model.path_of(cfg)
    mtime = (path / "model.safetensors").stat().st_mtime
    assert base_model.path_of(cfg) == path and (path / "model.safetensors").stat().st_mtime == mtime
    other = config.load("smoke", sft__epsilon=0.5)
    assert base_model.path_of(other) != path
    summary = (path / "sft_summary.json").read_text()
    assert "final_loss" in summary


def test_sft_lowers_the_loss_on_assistant_tokens(cfg):
    transcripts = base_model.demonstrations(cfg, 64, seed=1)
    import tempfile

    d = models.build_tiny(cfg.model.tiny, base_model.tokenizer_corpus(transcripts), tempfile.mkdtemp())
    model, tok = models.load(d)
    chat = ChatFormat(tok)
    data = [base_model.encode_transcript(chat, t) for t in transcripts[:16]]
    ids, attn, m = pad_batch([x[0] for x in data], [x[1] for x in data], tok.pad_token_id)

    def loss():
        with torch.no_grad():
            from helpers.policy import token_logprobs

            lp, _ = token_logprobs(model, ids, attn)
            return float(-(lp * m[:, 1:]).sum() / m[:, 1:].sum())

    before = loss()
    small = config.load("smoke", sft__max_steps=30, sft__max_seconds=60.0)
    base_model.sft(model, tok, transcripts, small)
    assert loss() < before - 0.5


def test_a_shared_prefix_gives_the_plain_forward_exactly(tiny_dir, cfg):
    """Running the system prompt once and broadcasting its keys and values is the same computation: the same
    log-probs and the same gradient as the plain forward over every row."""
    from helpers.policy import shared_prefix_len, token_logprobs

    model, tok = models.load(tiny_dir)
    chat = ChatFormat(tok)
    data = [base_model.encode_transcript(chat, t) for t in base_model.demonstrations(cfg, 6, seed=3)]
    ids, attn, mask = pad_batch([d[0] for d in data], [d[1] for d in data], tok.pad_token_id)
    P = shared_prefix_len([d[0] for d in data])
    assert P >= 16
    grads, lps = [], []
    for shared in (0, P):
        model.zero_grad()
        lp, _ = token_logprobs(model, ids, attn, shared_prefix=shared)
        (-(lp * mask[:, 1:]).sum()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        lps.append(lp.detach() * attn[:, 1:])
    torch.testing.assert_close(lps[0], lps[1], rtol=0, atol=1e-5)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_last_turn_context_shows_exactly_a_window_example(tiny_dir, cfg, tasks):
    """The one-turn context a base is measured in is, token for token, what SFT's `window` examples hold."""
    from helpers.rollout import LastTurnContext

    model, tok = models.load(tiny_dir)
    chat = ChatFormat(tok)
    transcript = base_model.demonstrations(cfg, 1, seed=5)[0]
    view = LastTurnContext(HFPolicy(model, tok), chat)
    for k in range(2, len(transcript), 2):
        conversation = base_model.encode_transcript(chat, [*transcript[:k], transcript[k]])[0]
        prompt = conversation[: len(conversation) - len(chat.action_ids(transcript[k]["content"]))]
        window = base_model.encode_transcript(chat, base_model.examples([transcript[: k + 1]], "window")[-1])[
            0
        ]
        assert view.window(prompt) + chat.action_ids(transcript[k]["content"]) == window


def test_sft_runs_its_two_phases_and_records_them(tiny_dir, cfg):
    small = config.load("smoke", sft__obs_steps=3, sft__max_steps=2, sft__batch_size=2, sft__obs_batch_size=4)
    model, tok = models.load(tiny_dir)
    summary = base_model.sft(model, tok, base_model.demonstrations(small, 8, seed=1), small)
    assert [(p["context"], p["steps"]) for p in summary["phases"]] == [("observation", 3), ("episode", 2)]
    assert summary["steps"] == 5 and np.isfinite(summary["final_loss"])
    obs = base_model.examples(base_model.demonstrations(small, 2, seed=1), "observation")
    assert all([m["role"] for m in ex] == ["user", "assistant"] for ex in obs)


def test_a_tempered_policy_samples_at_its_own_temperature(tiny_dir, tasks):
    from helpers.policy import Tempered

    model, tok = models.load(tiny_dir)
    greedy = Tempered(HFPolicy(model, tok), 0.0, name="greedy")
    prompts = [ChatFormat(tok).prompt_ids(fl.FrozenLakeEnv().reset(tasks[0], 4))] * 2
    a = greedy.generate(prompts, Sampling(1.0, 1.0, 6, seed=1))
    b = greedy.generate(prompts, Sampling(1.0, 1.0, 6, seed=2))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]  # greedy: the seed does not matter


def test_the_cpu_attention_equals_sdpa_with_padding_and_a_carried_cache(tiny_dir):
    """helpers.attention (decoding without SDPA's masked path) computes what transformers' SDPA computes."""
    from transformers import DynamicCache

    from helpers import attention

    kit, _ = models.load(tiny_dir)
    sdpa, _ = models.load(tiny_dir, attn_implementation="sdpa")
    assert kit.config._attn_implementation == attention.NAME and sdpa.config._attn_implementation == "sdpa"
    torch.manual_seed(0)
    B, L = 5, 30
    ids = torch.randint(3, 50, (B, L))
    mask = torch.ones(B, L, dtype=torch.long)
    mask[:2, :7] = 0  # left padding, as the rollout's chunks have
    outs = {}
    for name, m in (("kit", kit), ("sdpa", sdpa)):
        with torch.no_grad():
            cache = DynamicCache()
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            first = m(
                input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True
            )
            steps = [first.logits[:, -1]]
            full = mask
            for i in range(3):  # decode steps: a one-token query against the cache
                full = torch.cat([full, torch.ones(B, 1, dtype=torch.long)], dim=1)
                nxt = m(
                    input_ids=ids[:, i : i + 1],
                    attention_mask=full,
                    past_key_values=cache,
                    use_cache=True,
                    position_ids=pos[:, -1:] + i + 1,
                )
                steps.append(nxt.logits[:, -1])
        outs[name] = torch.stack(steps)
    torch.testing.assert_close(outs["kit"], outs["sdpa"], rtol=0, atol=1e-5)


def test_grouped_query_sdpa_gives_transformers_path_to_the_bit_and_training_keeps_that_path(tiny_dir):
    """Issue 51: a pre-fill without gradients (a rollout's turn, scoring) calls SDPA with `enable_gqa` instead of
    copying the keys and values per query group; its logits equal the copying path's exactly. With gradients (SFT,
    the update) the copying path runs, so the base the kit builds is the one it built before."""
    from helpers import attention

    model, _ = models.load(tiny_dir)
    assert model.config.num_attention_heads > model.config.num_key_value_heads  # grouped query heads
    torch.manual_seed(1)
    B, L = 4, 24  # longer than attention.MAX_QUERY: the SDPA branch
    ids = torch.randint(3, 50, (B, L))
    mask = torch.ones(B, L, dtype=torch.long)
    mask[:2, :5] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("enable_gqa", False))
        return real(*args, **kwargs)

    logits = {}
    try:
        torch.nn.functional.scaled_dot_product_attention = spy
        for gqa in (False, True):
            attention.SDPA_GQA = gqa
            with torch.no_grad():
                logits[gqa] = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        n = model.config.num_hidden_layers
        assert calls == [False] * n + [True] * n  # one call per layer, each path where it should be
        calls.clear()
        model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.sum().backward()
        assert calls == [False] * n
    finally:
        attention.SDPA_GQA = True
        torch.nn.functional.scaled_dot_product_attention = real
    assert torch.equal(logits[False], logits[True])


def test_context_guard_ends_episodes_instead_of_overflowing(tiny_dir, tasks):
    """A policy with `max_context` (vLLM's max_model_len) never gets a prompt without room for a whole turn: the
    episode ends there with `context_full` (reward 0 for RL, as an exhausted budget), and nothing raises."""
    from helpers.ppo import rl_reward

    pol = HFPolicy.from_pretrained(tiny_dir)
    sampling = Sampling(1.0, 1.0, 6)
    prompt_len = len(ChatFormat(pol.tokenizer).prompt_ids(fl.FrozenLakeEnv().reset(tasks[0], 6)))
    pol.max_context = prompt_len + 40  # one turn fits, a few more do not
    trajs = rollout(pol, "frozenlake", tasks[:3], 6, 2, sampling, seed=0)
    assert any(t.context_full for t in trajs)
    for t in trajs:
        for start, _ in t.turn_spans():
            assert start + sampling.max_new_tokens <= pol.max_context  # every generation had room
        if t.context_full:
            assert t.n_turns >= 1 and not t.turns[-1]["done"] and rl_reward(t) == 0.0
            # it ends with its last action (the observation after it dropped), and fits a scoring request
            assert len(t.token_ids) == t.turn_spans()[-1][1] + int(t.turns[-1]["truncated"])
            assert len(t.token_ids) + 1 <= pol.max_context
        assert Trajectory.from_dict(t.to_dict()) == t
    pol.max_context = prompt_len  # not even the opening prompt and one reply fit: a configuration error
    with pytest.raises(ValueError, match="does not fit max_context"):
        rollout(pol, "frozenlake", tasks[:1], 6, 1, sampling, seed=0)


def test_budget_line_loss_adds_exactly_the_turns_left_of_later_observations(tiny_dir, tasks):
    """`sft.budget_line_loss`: the same ids (up to the final observation's turns left, now learned too, where
    the plain encoding drops the final observation); the mask adds, in every observation after the first, the
    tokens that spell its remaining turns (predicted from the turn before), and nothing else of the observation."""
    from helpers.envs import play

    _, tok = models.load(tiny_dir)
    chat = ChatFormat(tok)
    transcript, _ = play(fl.FrozenLakeEnv(), tasks[0], 4, fl.scripted_player(0.0))
    ids, mask = base_model.encode_transcript(chat, transcript)
    ids_b, mask_b = base_model.encode_transcript(chat, transcript, budget_line_loss=True)
    assert ids_b[: len(ids)] == ids
    mask = mask + [0] * (len(ids_b) - len(ids))
    added = [tok.decode([i]) for i, a, b in zip(ids_b, mask, mask_b, strict=True) if b and not a]
    later = [m["content"] for m in transcript[2:] if m["role"] == "user"]
    assert added == [re.findall(r"Turns left: (\d+) of", o)[-1] for o in later]
    assert all(a <= b for a, b in zip(mask, mask_b, strict=True))  # the assistant's tokens stay learned


class _LengthCheckedLLM:
    """Stands in for `vllm.LLM` with its length rule (a prompt plus at least one output token within
    max_model_len, else ValueError, as vLLM's input processor): replies are a fixed FrozenLake answer, cut at
    max_tokens or at max_model_len; prompt log-probs are -1 for every token."""

    def __init__(self, max_model_len: int, reply: list[int]):
        self.max_model_len, self.reply, self.prompt_lengths = max_model_len, reply, []

    def generate(self, prompts, params, use_tqdm=False):
        from types import SimpleNamespace as NS

        outs = []
        for p, sp in zip(
            prompts, params if isinstance(params, list) else [params] * len(prompts), strict=True
        ):
            ids = p["prompt_token_ids"]
            self.prompt_lengths.append(len(ids))
            if len(ids) + 1 > self.max_model_len:
                raise ValueError(
                    f"The decoder prompt (length {len(ids)}) plus the number of requested output tokens (at "
                    f"least 1) is longer than the maximum model length of {self.max_model_len}"
                )
            gen = self.reply[: min(sp.max_tokens, self.max_model_len - len(ids))]
            lps = [{t: NS(logprob=-1.0)} for t in gen]
            prompt_lps = [None] + [{t: NS(logprob=-1.0)} for t in ids[1:]]
            outs.append(NS(outputs=[NS(token_ids=gen, logprobs=lps)], prompt_logprobs=prompt_lps))
        return outs


def test_context_full_trajectories_are_scored_on_an_engine_of_the_same_max_model_len(
    tiny_dir, tasks, monkeypatch
):
    """Issue 48: a context-full trajectory kept its last observation and could reach max_model_len, which vLLM
    rejects as a scoring prompt (notebook 06 on BFCL / DeepCoder-MT). Through the vLLM backend on a stand-in engine
    that enforces vLLM's length rule: rollouts reach the limit, and every trajectory is scored without a raise."""
    import sys
    import types

    from helpers import likelihood
    from helpers.policy_vllm import VLLMPolicy

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    _, tok = models.load(tiny_dir)
    chat = ChatFormat(tok)
    reply = [*tok.encode("<answer>Left</answer>", add_special_tokens=False), chat.eos_token_id]
    prompt_len = len(chat.prompt_ids(fl.FrozenLakeEnv().reset(tasks[0], 6)))
    for sampling in (
        Sampling(1.0, 1.0, len(reply)),
        Sampling(1.0, 1.0, len(reply) - 2),
    ):  # finished and cut off
        for room in range(0, 3 * len(reply), 3):
            limit = prompt_len + sampling.max_new_tokens + 2 + room
            llm = _LengthCheckedLLM(limit, reply)
            policy = VLLMPolicy(llm, tok, max_context=limit)
            trajs = rollout(policy, "frozenlake", tasks[:2], 6, 2, sampling, seed=0)
            assert trajs and all(t.n_turns >= 1 for t in trajs)
            scores = likelihood.token_logprobs(policy, trajs)  # one scoring request per trajectory: no raise
            assert [len(s) for s in scores] == [len(t.token_ids) for t in trajs]
            assert max(llm.prompt_lengths) + 1 <= limit
    assert any(t.context_full for t in trajs)
    with pytest.raises(
        ValueError, match=r"raise model\.max_model_len"
    ):  # a longer sequence: the kit's own message
        VLLMPolicy(_LengthCheckedLLM(8, reply), tok, max_context=8).score([[1] * 4], [[2] * 4])


def test_an_rl_step_is_one_chunk_so_training_draws_do_not_depend_on_the_chunk_size():
    """Every CPU profile's RL step (tasks_per_step x group_size trajectories) fits in one chunk of
    `policy.ROLLOUT_ROWS`: chunk 0 keeps the step's seed, so the trained models (and the compute curve's, which
    trains from the same base) draw as one batch does, whatever the chunk size above a step's."""
    from helpers import config
    from helpers import policy as policy_module

    for profile in ("cpu", "cpu_process", "cpu_budget_curve", "smoke"):
        t = config.load(profile).train
        assert t.tasks_per_step * t.group_size <= policy_module.ROLLOUT_ROWS, profile
