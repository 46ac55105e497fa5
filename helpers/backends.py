"""Which policy backend a run uses, and the RL loop's hooks around its optimiser step.

The layers are one-way: `helpers.policy` (the Policy protocol, `Sampling`, the HF backend and its autocast
variant) <- `helpers.policy_vllm` (the vLLM backend only) <- this module, the one place that chooses between them:

* `load(name_or_path, backend)` builds a policy over saved weights on either backend;
* `load_for(cfg, path, name)` does so on the profile's backend (what evaluations call, so they run on vLLM on a GPU
  box);
* `rollout_policy_for(cfg, model, tokenizer)` picks the policy the RL loop rolls out with, and `before_update` /
  `after_update` are the hooks around its optimiser step (no-ops for the HF backend, which shares the model). The
  trainer keeps float32 weights (`helpers.models.load_trainable`); with `model.dtype` bfloat16 the HF backend rolls
  out under the same autocast as the update (`AutocastHFPolicy`), so the sampling log-probs and the update's agree.
"""

from __future__ import annotations

from pathlib import Path

from helpers import models
from helpers.policy import HFPolicy, Policy, hf_policy
from helpers.policy_vllm import VLLMPolicy


def load(name_or_path, backend: str = "hf", **kw) -> Policy:
    """A policy over a model folder or hub name, with the `hf` or `vllm` backend."""
    if backend == "hf":
        return HFPolicy.from_pretrained(name_or_path, **kw)
    if backend == "vllm":
        return VLLMPolicy.from_pretrained(name_or_path, **kw)
    raise ValueError(f"backend must be 'hf' or 'vllm', got {backend!r}")


def load_for(cfg, path: str | Path, name: str) -> Policy:
    """A policy over a saved model for evaluation, on the profile's backend (what the notebooks can call instead
    of `HFPolicy.from_pretrained` to evaluate with vLLM on a GPU box)."""
    if cfg.model.backend == "vllm":
        return load(
            path,
            backend="vllm",
            device=cfg.model.device,
            dtype=cfg.model.dtype,
            name=name,
            gpu_memory_utilization=cfg.model.gpu_memory_utilization,
            max_model_len=cfg.model.max_model_len,
            seed=cfg.seed,
        )
    return load(path, backend="hf", device=cfg.model.device, dtype=cfg.model.dtype, name=name)


def rollout_policy_for(cfg, model, tokenizer, name: str = "policy") -> Policy:
    """The policy the RL loop rolls out with: the trainer's own model (`hf`, computing in `model.dtype`) or a
    colocated vLLM engine (`vllm`) loaded from the same weights and kept in step with them by `after_update`."""
    backend = cfg.model.backend
    if backend == "hf":
        return hf_policy(model, tokenizer, cfg.model.dtype, name=name)
    if backend != "vllm":
        raise ValueError(f"model.backend must be 'hf' or 'vllm', got {backend!r}")
    device = models.resolve_device(cfg.model.device)
    policy = VLLMPolicy.from_pretrained(
        getattr(model, "name_or_path", None) or cfg.model.name_or_path,
        device=device,
        dtype=cfg.model.dtype,
        name=name,
        gpu_memory_utilization=cfg.model.gpu_memory_utilization,
        max_model_len=min(cfg.model.max_model_len, model.config.max_position_embeddings),
        enable_sleep_mode=True,
        seed=cfg.seed,
    )
    policy.sync_weights(model)  # a resumed run's model differs from the files on disk
    return policy


def before_update(policy) -> None:
    """Before the optimiser step: a colocated vLLM engine sleeps so the trainer has the GPU memory."""
    if isinstance(policy, VLLMPolicy):
        policy.sleep()


def after_update(policy, model) -> None:
    """After the optimiser step: a vLLM engine wakes up with the new weights; the HF policy shares the model, so
    only its conversation cache is dropped."""
    if isinstance(policy, VLLMPolicy):
        policy.wake_up(model)
    else:
        policy.reset_cache()
