"""PPO's old log-probs (issue 48, item 4): recomputed by the trainer before the first epoch wherever the rollout
engine's numerics differ from the trainer's, the engine's kept only for the logged mismatch. On a tiny random Qwen3
and hand-made trajectories, in seconds."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from helpers import config, ppo
from helpers.policy import pad_batch, token_logprobs
from helpers.rollout import Trajectory

VOCAB = 64
PLANT = 0.7  # log-prob the stand-in engine adds on planted tokens (ratio exp(-0.7) = 0.50: past a 0.2 clip)


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(cfg).eval()


def trajectories(model, plant: set[tuple[int, int]] = frozenset()) -> list[Trajectory]:
    """Four trajectories in two task groups with rewards that differ within each group; the generated tokens carry
    the model's own float32 log-probs (an exact engine), plus PLANT at the (trajectory, position) pairs of `plant`."""
    rng = np.random.default_rng(0)
    trajs = []
    for i, n in enumerate((14, 18, 11, 20)):
        ids = [1, 2, 3, 4, *rng.integers(5, VOCAB, n - 4).tolist()]
        gen = [0] * 4 + [int(k % 3 != 0) for k in range(n - 4)]  # observations between the generated tokens
        t = Trajectory(
            task_id=f"t{i // 2}",
            env="frozenlake",
            model="m",
            budget=4,
            t_max=4,
            seed=0,
            sample=i % 2,
            token_ids=ids,
            gen_mask=gen,
            prompt_len=4,
            group=f"g{i // 2}",
            reward=float(i % 2),
        )
        trajs.append(t)
    ids, attn, _ = pad_batch([t.token_ids for t in trajs], [t.gen_mask for t in trajs], 0)
    with torch.no_grad():
        lp = token_logprobs(model, ids, attn)[0]
    for i, t in enumerate(trajs):
        t.logprobs = [0.0] + [
            float(lp[i, k - 1]) + (PLANT if (i, k) in plant else 0.0) if t.gen_mask[k] else 0.0
            for k in range(1, len(t.token_ids))
        ]
    return trajs


def cfg_for(dtype: str = "float32", **kw):
    over = dict(
        model__dtype=dtype,
        train__micro_batch_size=1,
        train__minibatch_size=2,
        train__ppo_epochs=2,
        train__lr=1e-3,
        train__algorithm="grpo",
    )
    return config.load("smoke", **{**over, **kw})


def update(cfg, trajs, model, recompute_old=None) -> dict:
    ref = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    return ppo.ppo_update(model, ref, opt, trajs, cfg, np.random.default_rng(0), recompute_old=recompute_old)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_recomputed_old_logprobs_make_the_first_minibatch_ratio_exactly_one(dtype):
    """With the engine off by PLANT on some tokens (and, in bfloat16, by autocast against float32 logs), the trainer's
    own log-probs are the old ones: the first minibatch's ratio is exactly 1 on every generated token."""
    model = tiny_model()
    trajs = trajectories(model, plant={(0, 6), (1, 8), (3, 11)})
    out = update(cfg_for(dtype), trajs, model, recompute_old=True)
    assert out["first_ratio_dev"] == 0.0
    assert all(p.grad is None for p in model.parameters()), "the last step's gradients were kept"


def test_a_planted_engine_mismatch_is_reported():
    """Mean and max |delta log p| and the share of generated tokens whose engine ratio lies past the clip."""
    model = tiny_model()
    plant = {(0, 5), (1, 8), (2, 9), (3, 12)}
    trajs = trajectories(model, plant=plant)
    n_gen = sum(sum(t.gen_mask[1:]) for t in trajs)
    assert all(trajs[i].gen_mask[k] for i, k in plant)
    out = update(cfg_for(), trajs, model, recompute_old=True)
    assert out["engine_logp_delta_max"] == pytest.approx(PLANT, abs=1e-5)
    assert out["engine_logp_delta_mean"] == pytest.approx(PLANT * len(plant) / n_gen, abs=1e-5)
    assert out["engine_clip_frac"] == pytest.approx(len(plant) / n_gen)
    exact = update(cfg_for(), trajectories(tiny_model()), tiny_model(), recompute_old=True)
    assert exact["engine_logp_delta_max"] < 1e-5 and exact["engine_clip_frac"] == 0.0


def test_without_the_recompute_the_engine_logprobs_are_the_old_ones():
    """The cpu and smoke profiles (HF backend, float32) keep the engine's log-probs and log nothing new, so their
    numbers are what they were; a planted mismatch then moves the first ratio off 1 (the clip sees it)."""
    cfg = cfg_for()
    assert not ppo.recompute_old_logprobs(cfg) and not ppo.recompute_old_logprobs(config.load("cpu"))
    assert ppo.recompute_old_logprobs(cfg_for("bfloat16"))
    assert ppo.recompute_old_logprobs(config.load("smoke", model__backend="vllm"))
    model = tiny_model()
    out = update(cfg, trajectories(model, plant={(0, 5)}), model)
    assert "engine_logp_delta_max" not in out and "first_ratio_dev" not in out
    assert out["clip_frac"] > 0  # the planted token's ratio exp(-0.7) was clipped
