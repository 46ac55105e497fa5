"""Float32 master weights with autocast: a bfloat16-configured RL run still updates every parameter at lr 1e-6.

An AdamW step on bfloat16 weights rounds away any update smaller than about 1/256 of the weight, so at the paper's
lr 1e-6 almost nothing moves (and no norm weight, whose values sit near 1). The kit trains float32 weights and uses
`model.dtype` as the compute precision (`helpers.models.load_trainable`, `helpers.models.autocast`). CPU autocast
with bfloat16 runs the same code path as CUDA's, so all of this is checked here without a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import base_model, config, models, ppo, store, train
from helpers.backends import rollout_policy_for
from helpers.envs import load_tasks, settings
from helpers.policy import AutocastHFPolicy, HFPolicy, Sampling
from helpers.rollout import rollout

BF16 = {"model__dtype": "bfloat16", "train__lr": 1e-6}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke profile in bfloat16 at lr 1e-6, its base, and a batch of trajectories whose rewards differ within
    every task group (so every group has non-zero advantages)."""
    with store.results_at(tmp_path_factory.mktemp("precision") / "results"):
        cfg = config.load("smoke", train__minibatch_size=32, **BF16)
        path = base_model.path_of(cfg)
        model, tok = models.load(path)
        tasks = load_tasks(cfg.env.name, "train", n=4, seed=0, **settings(cfg))
        trajs = rollout(
            HFPolicy(model, tok),
            cfg.env.name,
            tasks,
            cfg.env.frozenlake.t_max,
            4,
            Sampling.from_config(cfg.sampling),
            seed=0,
            step_quality=False,
        )
        for i, t in enumerate(trajs):
            t.reward, t.exhausted = float(i % 2), False
        yield cfg, path, trajs


class DtypeProbe:
    """Records the dtype of the LM head's output at every forward pass (bfloat16 under autocast)."""

    def __init__(self, model):
        self.seen: list[torch.dtype] = []
        model.lm_head.register_forward_hook(lambda mod, args, out: self.seen.append(out.dtype))


def updated(before: dict[str, torch.Tensor], model) -> tuple[float, list[str]]:
    """(fraction of elements that changed, names of tensors that did not change at all)."""
    after = dict(model.named_parameters())
    changed = sum(int((before[n] != after[n].detach()).sum()) for n in before)
    total = sum(t.numel() for t in before.values())
    return changed / total, [n for n in before if torch.equal(before[n], after[n].detach())]


def ppo_steps(model, ref, cfg, trajs, steps: int = 3) -> tuple[float, list[str]]:
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        out = train.ppo_update(model, ref, opt, trajs, cfg, rng)
        assert np.isfinite(out["pg_loss"]) and out["advantage_abs_mean"] > 0
    return updated(before, model)


def test_load_trainable_keeps_float32_whatever_the_profile_says(smoke):
    _, path, _ = smoke
    model, tok = models.load_trainable(path, device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert tok.padding_side == "left"
    ref, _ = models.load(path, dtype="bfloat16")  # the frozen reference keeps the profile's dtype
    assert {p.dtype for p in ref.parameters()} == {torch.bfloat16}


def test_autocast_helper():
    lin = torch.nn.Linear(4, 4)
    x = torch.ones(2, 4)
    with models.autocast("cpu", "bfloat16"):
        assert lin(x).dtype == torch.bfloat16
    with models.autocast(torch.device("cpu"), "float32"):
        assert lin(x).dtype == torch.float32
    with pytest.raises(ValueError, match=r"model\.dtype .*'bf16'"):
        models.autocast("cpu", "bf16")


def test_bf16_update_moves_every_parameter_with_float32_masters(smoke):
    cfg, path, trajs = smoke
    ref, _ = models.load(path, dtype=cfg.model.dtype)
    model, _ = models.load_trainable(path)
    probe = DtypeProbe(model)
    frac, unchanged = ppo_steps(model, ref, cfg, trajs)
    assert unchanged == [], f"parameters left unchanged: {unchanged}"
    assert frac > 0.95
    assert probe.seen and set(probe.seen) == {torch.bfloat16}  # the policy's forward ran in bfloat16
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    # the defect this guards against: the same steps on bfloat16 weights leave most of them, and every norm, as is
    bf16_model, _ = models.load(path, dtype="bfloat16")
    frac_bf16, unchanged_bf16 = ppo_steps(bf16_model, ref, cfg, trajs)
    assert frac_bf16 < 0.5
    assert any("norm" in n for n in unchanged_bf16)


def test_rl_train_in_bf16_trains_float32_weights_under_autocast(smoke, monkeypatch):
    """The whole loop (`rl_train`): its policy's forward passes in the update run under bfloat16 autocast on float32
    weights, its reference in bfloat16, and every saved weight moved (via scripts/gpu_check_steps.py on CPU)."""
    cfg, _, _ = smoke
    seen = []
    original = ppo.token_logprobs

    def recording(model, ids, attn, **kw):
        dtype = next(model.parameters()).dtype
        seen.append(
            (
                torch.is_grad_enabled(),
                dtype,
                torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"),
            )
        )
        return original(model, ids, attn, **kw)

    monkeypatch.setattr(ppo, "token_logprobs", recording)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    try:
        import gpu_check_steps
    finally:
        sys.path.pop(0)
    result = gpu_check_steps.rl_loop(
        type("Args", (), {"device": "cpu", "backend": "hf", "dtype": "bfloat16", "lr": cfg.train.lr})
    )
    assert result["saved_dtypes"] == ["float32"]
    assert result["unchanged_tensors"] == [] and result["changed_fraction"] > 0.95
    policy_calls = [s for s in seen if s[0]]  # with gradients: the PPO update
    ref_calls = [s for s in seen if not s[0] and s[1] == torch.bfloat16]  # the frozen reference's log-probs
    # without gradients on the float32 policy: PPO's old log-probs, recomputed under the same autocast (bfloat16
    # compute differs from the rollout's, helpers.ppo.recompute_old_logprobs)
    old_calls = [s for s in seen if not s[0] and s[1] != torch.bfloat16]
    assert policy_calls and all(s[1:] == (torch.float32, torch.bfloat16) for s in policy_calls)
    assert ref_calls and old_calls and all(s[1:] == (torch.float32, torch.bfloat16) for s in old_calls)


def test_hf_rollouts_compute_in_the_profiles_dtype(smoke):
    cfg, path, _ = smoke
    model, tok = models.load_trainable(path)
    probe = DtypeProbe(model)
    policy = rollout_policy_for(cfg, model, tok)
    assert isinstance(policy, AutocastHFPolicy) and policy.model is model
    tasks = load_tasks(cfg.env.name, "test", n=2, seed=0, **settings(cfg))
    trajs = rollout(
        policy,
        cfg.env.name,
        tasks,
        cfg.env.frozenlake.t_max,
        2,
        Sampling.from_config(cfg.sampling),
        seed=0,
        step_quality=False,
    )
    assert any(t.n_turns > 1 for t in trajs)  # the carried KV cache (bfloat16 under autocast) is reused
    assert all(np.isfinite(t.logprobs).all() for t in trajs)
    assert set(probe.seen) == {torch.bfloat16}
    scored = policy.score(
        [t.token_ids[: t.prompt_len] for t in trajs], [t.token_ids[t.prompt_len :] for t in trajs]
    )
    assert all(np.isfinite(s).all() for s in scored)
    # float32 profiles (the cpu tier) keep the plain HF policy, exactly as before
    plain = rollout_policy_for(config.load("smoke"), model, tok)
    assert type(plain) is HFPolicy
    with pytest.raises(ValueError, match=r"model\.dtype"):
        AutocastHFPolicy(model, tok, "half")
