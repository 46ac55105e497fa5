"""ChatFormat on Qwen3's official chat template, thinking off and on, and thinking decided by the template."""

from __future__ import annotations

import shutil

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from helpers import models
from helpers import qwen3_tokenizer as q
from helpers.envs import load_tasks
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import ChatFormat, rollout

HEAD = "<|im_start|>assistant\n"
EMPTY_THINK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def tok(qwen3_dir):
    return q.load(qwen3_dir)


@pytest.fixture(scope="module")
def tiny_tok():
    return models.train_tokenizer(
        ["system user assistant <answer>Left</answer> </think> abc"] * 5, vocab_size=300
    )


OPENING = [{"role": "system", "content": "You play."}, {"role": "user", "content": "Grid 1"}]
TURNS = [("<answer>Left</answer>", "Grid 2"), ("<answer>Up</answer>", "Grid 3 √"), ("bad", "Invalid. Grid 3")]


def accumulate(chat: ChatFormat, tok, turns=TURNS) -> list[int]:
    """Ids as a rollout builds them: prompt, then per turn the generated reply, end-of-turn, observation."""
    ids = chat.prompt_ids(OPENING)
    for action, obs in turns:
        ids += [*chat.encode(action), tok.eos_token_id, *chat.observation_ids(obs)]
    return ids


def test_thinking_is_decided_by_the_template_not_the_path(qwen3_dir, tok, tiny_tok, tmp_path):
    assert models.knows_thinking(tok) and not models.knows_thinking(tiny_tok)
    copy = shutil.copytree(qwen3_dir, tmp_path / "my-local-model")  # no "qwen3" in the path
    assert models.chat_kwargs(q.load(copy)) == {"enable_thinking": False}
    assert models.chat_kwargs(tok, thinking=True) == {"enable_thinking": True}
    assert models.chat_kwargs(tiny_tok) == {}


def test_thinking_off_wrapper_and_history(tok):
    chat = ChatFormat(tok, models.chat_kwargs(tok))
    assert chat.obs_prefix == "\n<|im_start|>user\n"
    assert chat.obs_suffix == "<|im_end|>\n" + HEAD + EMPTY_THINK
    assert chat.generation_prompt == HEAD + EMPTY_THINK
    # the opening is the template's own render, token for token
    official = tok.apply_chat_template(
        OPENING, add_generation_prompt=True, enable_thinking=False, return_dict=True
    )
    official = list(official["input_ids"])
    assert chat.prompt_ids(OPENING) == official
    ids = accumulate(chat, tok)
    text = tok.decode(ids)
    opening = tok.apply_chat_template(
        OPENING, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    expected = opening + "".join(
        f"{a}<|im_end|>\n<|im_start|>user\n{o}<|im_end|>\n{HEAD}{EMPTY_THINK}" for a, o in TURNS
    )
    assert text == expected  # every action stays behind the empty think block it was generated after
    assert chat.encode(text) == ids  # the pieces tokenise as the whole text would: no merge across a seam
    # the template's render of the same conversation ending on an assistant turn agrees on that last turn
    msgs = [*OPENING]
    for a, o in TURNS:
        msgs += [{"role": "assistant", "content": a}, {"role": "user", "content": o}]
    msgs.append({"role": "assistant", "content": "<answer>Down</answer>"})
    full = tok.apply_chat_template(msgs, tokenize=False, enable_thinking=False)
    last = HEAD + EMPTY_THINK + "<answer>Down</answer><|im_end|>\n"
    assert full.endswith("Invalid. Grid 3<|im_end|>\n" + last)
    assert (text + "<answer>Down</answer><|im_end|>").endswith(last.rstrip("\n"))


def test_thinking_on_keeps_the_generated_think_blocks(tok):
    chat = ChatFormat(tok, models.chat_kwargs(tok, thinking=True))
    assert chat.obs_suffix == "<|im_end|>\n" + HEAD and chat.generation_prompt == HEAD
    turns = [
        ("<think>\nleft is safe\n</think>\n\n<answer>Left</answer>", "Grid 2"),
        ("<think>\nhm", "Grid 2"),
    ]
    text = tok.decode(accumulate(chat, tok, turns))
    assert "<think>\nleft is safe\n</think>" in text  # the history keeps what the model generated
    assert chat.answer(turns[0][0]) == "<answer>Left</answer>"
    assert chat.answer(turns[1][0]) == ""  # a think block that never closed answers nothing
    assert chat.answer("<answer>Up</answer>") == "<answer>Up</answer>"


def test_the_kit_template_reads_every_reply_as_it_is(tiny_tok):
    chat = ChatFormat(tiny_tok)
    assert not chat.thinks
    assert chat.answer("x</think><answer>Up</answer>") == "x</think><answer>Up</answer>"


def test_a_template_without_an_end_of_turn_after_the_reply_is_refused(tok):
    closing = "{{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}"
    assert closing in tok.chat_template
    saved = tok.chat_template
    try:
        tok.chat_template = saved.replace(closing, '{%- elif message.role == "tool" %}')
        with pytest.raises(ValueError, match="end-of-turn"):
            ChatFormat(tok, {"enable_thinking": False})
    finally:
        tok.chat_template = saved


def test_rollout_on_a_random_qwen3_with_the_real_vocabulary(tok):
    """A real HF policy (random Qwen3, 151,936-row embedding, width 16) plays FrozenLake through ChatFormat."""
    config = Qwen3Config(
        vocab_size=q.VOCAB_SIZE,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    tok.padding_side = "left"
    for thinking in (False, True):
        policy = HFPolicy(model, tok, name="random-qwen3")
        chat = ChatFormat(tok, models.chat_kwargs(tok, thinking=thinking))
        tasks = load_tasks("frozenlake", "test", n=2, size=4, t_max=3, n_train=10, n_test=2)
        trajs = rollout(policy, "frozenlake", tasks, 3, 2, Sampling(1.0, 1.0, 6), seed=0, chat=chat)
        assert len(trajs) == 4
        for tr in trajs:
            assert (
                len(tr.token_ids) == len(tr.gen_mask) == len(tr.logprobs) and max(tr.token_ids) < q.VOCAB_SIZE
            )
            assert tok.decode(tr.token_ids[: tr.prompt_len]).endswith(chat.generation_prompt)
            spans = tr.turn_spans()
            assert len(spans) == tr.n_turns >= 1
            for (_, end), turn in zip(spans, tr.turns, strict=True):
                if turn["truncated"]:  # cut off: the rollout closed the turn with end-of-turn itself
                    assert tr.token_ids[end] == tok.eos_token_id
                    end += 1
                else:
                    assert tr.token_ids[end - 1] == tok.eos_token_id
                if not turn["done"]:
                    obs = chat.observation_ids(turn["observation"])
                    assert tr.token_ids[end : end + len(obs)] == obs
