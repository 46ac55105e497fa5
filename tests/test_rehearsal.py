"""The qwen3_rehearsal profile (issue 28): the gpu profile's code paths on CPU with Qwen3's real tokenizer.

`make rehearse` runs the whole series and the TRL path under torchrun (minutes, not part of `make test`); here the
profile is checked to load, and (slow) its base is built and played the way the series plays it.
"""

from __future__ import annotations

import torch

from helpers import base_model, config, models
from helpers import qwen3_tokenizer as q
from helpers.agents import Agent, opened
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import ChatFormat, rollout


def test_the_profile_loads_and_names_a_base_of_its_own():
    cfg = config.load("qwen3_rehearsal")
    gpu = config.load("gpu")
    assert cfg.model.name_or_path == "tiny-qwen3" and base_model.is_built(cfg)
    assert (cfg.model.backend, cfg.model.device, cfg.model.dtype) == ("hf", "cpu", gpu.model.dtype)
    assert base_model.recipe(cfg)["tokenizer"] == "qwen3" and "tokenizer" not in base_model.recipe(
        config.load("smoke")
    )
    smoke_like = config.load("smoke", model__tiny__max_position_embeddings=2048)
    assert base_model.folder_name(cfg) != base_model.folder_name(smoke_like)
    assert cfg.train.minibatch_size % 2 == 0  # the TRL path runs on 2 processes


def test_a_qwen3_base_is_built_and_played_in_bfloat16(tmp_path, monkeypatch):
    """The base SFT'd with Qwen3's tokenizer (a few steps), loaded for evaluation in bfloat16 and rolled out with
    thinking off, as every notebook of the series does (about 40 s)."""
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("KIT_BASE_CACHE", raising=False)
    cfg = config.load("qwen3_rehearsal", sft__n_demos=4, sft__obs_steps=2, sft__max_steps=1)
    path = base_model.path_of(cfg)
    tok = models.load_tokenizer(path)
    assert len(tok) == 151669 and tok.convert_tokens_to_ids("<think>") == 151667
    assert base_model.summary(cfg)["steps"] == 3
    with opened(Agent("base", path, cfg)) as policy:
        assert isinstance(policy, HFPolicy) and policy.model.dtype == torch.bfloat16
        assert policy.model.get_input_embeddings().weight.shape[0] == q.VOCAB_SIZE
        assert policy.chat_kwargs == {"enable_thinking": False}
        tasks = load_tasks("frozenlake", "test", n=2, **settings(cfg))
        trajs = rollout(policy, "frozenlake", tasks, 2, 2, Sampling.from_config(cfg.sampling), seed=0)
        chat = ChatFormat(tok, policy.chat_kwargs)
        assert len(trajs) == 4
        assert all(tok.decode(t.token_ids[: t.prompt_len]).endswith(chat.generation_prompt) for t in trajs)
        assert chat.generation_prompt.endswith("<think>\n\n</think>\n\n")
    assert policy.model is None  # closed on leaving the block
