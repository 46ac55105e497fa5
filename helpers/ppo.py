"""The RL update: the outcome reward, advantages by estimator, PPO-clip epochs with KL to the frozen base, and
PPO's critic.

One update (verl's actor update): GRPO advantages within each task group (or the estimator's per-token advantages,
`helpers.process`); PPO-clip + low_var_kl to the frozen base over generated tokens only, token-mean over each
minibatch, gradient accumulation over micro-batches, AdamW. Environment tokens never enter the loss: the mask is the
rollout's generated-token mask. PPO's critic (`new_critic`) takes one clipped-value-loss step per minibatch on its
own AdamW. The formulas are `helpers.algos`'.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers import algos, models, process
from helpers.config import Config
from helpers.policy import pad_batch, shared_prefix_len, token_logprobs


def rl_reward(traj) -> float:
    """The trajectory's RL reward: the environment's reward, or 0 if the budget (or the context) ran out unfinished."""
    return 0.0 if traj.exhausted or getattr(traj, "context_full", False) else float(traj.reward)


def _padded(trajs, rows, dev, old_lp: dict[int, torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
    """Token ids, attention mask, generated-token mask and old log-probs of `rows`, right-padded to the longest of
    them only (a micro-batch of similar lengths wastes little on padding). The old log-probs are the rollout
    engine's (`Trajectory.logprobs`), or the trainer's recomputed ones (`old_lp`, per trajectory, from token 1)."""
    sub = [trajs[i] for i in rows]
    ids, attn, gen = pad_batch([t.token_ids for t in sub], [t.gen_mask for t in sub], 0)
    old = torch.zeros_like(gen)
    for j, (r, t) in enumerate(zip(rows, sub, strict=True)):
        if old_lp is None:
            old[j, : len(t.logprobs)] = torch.tensor(t.logprobs)
        else:
            lp = old_lp[int(r)]
            old[j, 1 : 1 + len(lp)] = lp.to(old.dtype)
    return ids.to(dev), attn.to(dev), gen.to(dev), old.to(dev)


def recompute_old_logprobs(cfg: Config) -> bool:
    """Whether the trainer recomputes PPO's old log-probs (verl's `old_log_prob`) instead of taking the rollout
    engine's: whenever the engine's numerics differ from the trainer's (a vLLM engine, or compute in a reduced
    precision, where bfloat16 rollouts against float32 masters under autocast put the first minibatch's ratio off
    1 and tokens past the clip silently lose their gradient). The HF backend in float32 (the cpu and smoke
    profiles) samples with the trainer's own float32 weights, so its log-probs are the trainer's up to summation
    order and are kept: those profiles' numbers stay as they were."""
    return cfg.model.backend != "hf" or cfg.model.dtype != "float32"


def _old_logprobs(model, trajs, by_length, lengths, cfg: Config, dev) -> tuple[dict[int, torch.Tensor], dict]:
    """The trainer's log-probs of every trajectory before the update (per trajectory, tokens 1..), computed as the
    first minibatch computes them (`model.dtype` autocast), and how far the engine's were from them over generated
    tokens: mean and max |delta log p|, and the share of tokens whose engine ratio lies past the clip (those the
    update would have given no gradient at its first minibatch)."""
    c = cfg.train
    old: dict[int, torch.Tensor] = {}
    deltas: list[torch.Tensor] = []
    with torch.no_grad():
        for start in range(0, len(trajs), c.micro_batch_size):
            rows = by_length[start : start + c.micro_batch_size]
            ids, attn, gen, engine = _padded(trajs, rows, dev)
            with models.autocast(dev, cfg.model.dtype):
                lp = token_logprobs(model, ids, attn, shared_prefix=_shared(trajs, rows))[0]
            mask = gen[:, 1:].bool()
            deltas.append((lp - engine[:, 1:])[mask].float().cpu())
            old.update({int(r): lp[j, : lengths[r] - 1].detach() for j, r in enumerate(rows)})
    delta = torch.cat(deltas) if deltas else torch.zeros(0)
    if not delta.numel():
        return old, {"engine_logp_delta_mean": None, "engine_logp_delta_max": None, "engine_clip_frac": None}
    # the engine's ratio exp(logp - engine_logp) at the first minibatch, past the clip
    past = ((-delta).exp() - 1).abs() > c.clip_ratio
    return old, {
        "engine_logp_delta_mean": float(delta.abs().mean()),
        "engine_logp_delta_max": float(delta.abs().max()),
        "engine_clip_frac": float(past.float().mean()),
    }


def _shared(trajs, rows) -> int:
    """Tokens every trajectory of `rows` starts with (the environment's system prompt): run once per batch."""
    return shared_prefix_len([trajs[i].token_ids[: trajs[i].prompt_len] for i in rows])


def _rows(per_traj: list[torch.Tensor], rows, lengths: np.ndarray, width: int, dev) -> torch.Tensor:
    """Per-trajectory token vectors (length len(token_ids) - 1) of `rows`, right-padded to `width`."""
    out = torch.zeros(len(rows), width)
    for j, r in enumerate(rows):
        out[j, : lengths[r] - 1] = per_traj[int(r)]
    return out.to(dev)


def ppo_update(
    model,
    ref_model,
    opt,
    trajs,
    cfg: Config,
    rng: np.random.Generator,
    critic=None,
    critic_opt=None,
    tasks: dict | None = None,
    seed: int = 0,
    update_actor: bool = True,
    recompute_old: bool | None = None,
    offload=None,
) -> dict:
    """Advantages (`train.algorithm`), then PPO epochs over minibatches (gradient accumulation over micro-batches).

    Within a minibatch the trajectories are sorted by length before they are cut into micro-batches, and each
    micro-batch is padded only to its own longest trajectory: the gradient of a minibatch is a sum over its
    tokens, so the grouping changes nothing but the padding computed.

    GRPO gives each trajectory one advantage (broadcast over its generated tokens); the other estimators give
    every token its own (`process.token_advantages`). PPO also needs `critic` and `critic_opt`: the critic's values of the
    rollout feed GAE, and the critic takes one clipped-value-loss step per minibatch, on the same minibatches as the
    actor (verl's critic update); `update_actor=False` (critic warm-up) updates the critic only. `tasks` and `seed`
    are for the oracle-Q reward (see `process.token_advantages`).

    PPO's old log-probs: with `recompute_old` (default `recompute_old_logprobs(cfg)`) the trainer recomputes them
    before the first epoch, so the first minibatch's ratio is 1; the engine's are then used only for the logged
    mismatch (`engine_logp_delta_mean`, `engine_logp_delta_max`, `engine_clip_frac`) and the first minibatch's
    largest |ratio - 1| is logged as `first_ratio_dev`. Otherwise the engine's log-probs are the old ones.
    After the last optimiser step the gradients are freed (`zero_grad(set_to_none=True)`): the rollout that follows
    has that memory (a float32 copy of the weights). `offload` (`helpers.offload.Offload`, from the memory plan)
    brings the reference to the GPU only while it scores the batch and AdamW's state back before the first step;
    with gradient checkpointing on (`model.is_gradient_checkpointing`) the update's forward passes run without the
    shared-prefix cache, which checkpointing cannot keep.
    """
    c = cfg.train
    est = process.estimator(c.algorithm)
    rewards = torch.tensor([rl_reward(t) for t in trajs], dtype=torch.float)
    adv = algos.grpo_advantages(rewards, [t.group for t in trajs], eps=1e-6, norm_by_std=c.norm_by_std)
    dev = next(model.parameters()).device
    adv = adv.to(dev)
    lengths = np.array([len(t.token_ids) for t in trajs])
    by_length = np.argsort(lengths, kind="stable")
    ref: dict[int, torch.Tensor] = {}  # reference log-probs per trajectory, from the frozen base
    if offload is not None and update_actor:
        offload.reference_in()
    with torch.no_grad():
        for start in range(0, len(trajs), c.micro_batch_size) if update_actor else ():
            rows = by_length[start : start + c.micro_batch_size]
            ids, attn, _, _ = _padded(trajs, rows, dev)
            lp = token_logprobs(ref_model, ids, attn, shared_prefix=_shared(trajs, rows))[0]
            ref.update({int(r): lp[j, : lengths[r] - 1] for j, r in enumerate(rows)})

    recompute = recompute_old_logprobs(cfg) if recompute_old is None else recompute_old
    old_lp, mismatch = None, {}
    if recompute and update_actor:
        old_lp, mismatch = _old_logprobs(model, trajs, by_length, lengths, cfg, dev)
    if offload is not None:
        if update_actor:
            offload.reference_out()
        offload.optimizer_in()
    checkpointing = bool(getattr(model, "is_gradient_checkpointing", False))

    per_token, returns, values, extra = None, None, None, {}
    if est.critic:
        values = _critic_values(critic, trajs, by_length, lengths, c.micro_batch_size, cfg.model.dtype, dev)
    if est.token_advantages is not None:
        per_token, returns, extra = process.token_advantages(
            trajs, cfg, rewards, adv.cpu(), tasks, seed, values
        )

    model.train()
    stats: dict[str, list[float]] = {
        k: [] for k in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl", "grad_norm")
    }
    if critic is not None:
        critic.train()
        stats.update({k: [] for k in ("vf_loss", "vf_clip_frac", "critic_grad_norm")})
    first_done, first_dev = False, 0.0
    for _ in range(c.ppo_epochs):
        order = rng.permutation(len(trajs))
        for start in range(0, len(trajs), c.minibatch_size):
            mini = order[start : start + c.minibatch_size]
            mini = mini[np.argsort(lengths[mini], kind="stable")]
            n_tokens = max(1, sum(sum(trajs[i].gen_mask[1:]) for i in mini))
            opt.zero_grad(set_to_none=True)
            for ms in range(0, len(mini), c.micro_batch_size) if update_actor else ():
                rows = mini[ms : ms + c.micro_batch_size]
                ids, attn, gen, old = _padded(trajs, rows, dev, old_lp)
                width = ids.shape[1] - 1
                ref_lp = torch.zeros(len(rows), width, device=dev)
                for j, r in enumerate(rows):
                    ref_lp[j, : lengths[r] - 1] = ref[int(r)]
                with models.autocast(dev, cfg.model.dtype):  # float32 weights, model.dtype compute
                    prefix = 0 if checkpointing else _shared(trajs, rows)
                    logp, logits = token_logprobs(model, ids, attn, shared_prefix=prefix)
                mask = gen[:, 1:]
                if per_token is None:  # GRPO: one advantage per trajectory
                    a_tok = algos.broadcast(adv[torch.as_tensor(rows, device=dev)], mask)
                else:
                    a_tok = _rows(per_token, rows, lengths, width, dev) * mask
                pg, st = algos.policy_loss(logp, old[:, 1:], a_tok, mask, clip_ratio=c.clip_ratio)
                if old_lp is not None and not first_done:  # the first minibatch: the weights of the recompute
                    with torch.no_grad():
                        dev_r = ((logp - old[:, 1:]).exp() - 1).abs()[mask.bool()]
                    first_dev = max(first_dev, float(dev_r.max()) if dev_r.numel() else 0.0)
                kl = algos.agg_loss(algos.kl_penalty(logp, ref_lp, c.kl_kind), mask)
                weight = mask.sum() / n_tokens  # token-mean over the whole minibatch
                ((pg + c.kl_coef * kl) * weight).backward()
                with torch.no_grad():
                    stats["entropy"].append(algos.masked_mean(algos.entropy_from_logits(logits), mask).item())
                stats["pg_loss"].append(pg.item())
                stats["kl"].append(kl.item())
                stats["clip_frac"].append(st["clip_frac"])
                stats["approx_kl"].append(st["approx_kl"])
            if update_actor:
                stats["grad_norm"].append(
                    float(torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm))
                )
                opt.step()
                first_done = True
            if critic is not None:
                _critic_step(
                    critic, critic_opt, trajs, mini, lengths, values, returns, n_tokens, cfg, dev, stats
                )
    # free the last step's gradients before the rollout (a float32 model's worth)
    opt.zero_grad(set_to_none=True)
    if critic_opt is not None:
        critic_opt.zero_grad(set_to_none=True)
    model.eval()
    if critic is not None:
        critic.eval()
    out = {k: float(np.mean(v)) if v else None for k, v in stats.items()}
    if old_lp is not None:
        out.update(mismatch, first_ratio_dev=first_dev)
    if per_token is None:
        out["advantage_abs_mean"] = float(adv.abs().mean())
    else:
        gen = [torch.tensor(t.gen_mask[1:], dtype=torch.bool) for t in trajs]
        out["advantage_abs_mean"] = float(
            torch.cat([a[g].abs() for a, g in zip(per_token, gen, strict=True)]).mean()
        )
    return {**out, **extra}


def _critic_values(critic, trajs, by_length, lengths, micro: int, dtype: str, dev) -> list[torch.Tensor]:
    """The critic's values of every trajectory before the update (verl's `compute_values`), on the CPU."""
    values: list[torch.Tensor | None] = [None] * len(trajs)
    with torch.no_grad():
        for start in range(0, len(trajs), micro):
            rows = by_length[start : start + micro]
            ids, attn, _, _ = _padded(trajs, rows, dev)
            with models.autocast(dev, dtype):
                v = critic(ids, attn)
            for j, r in enumerate(rows):
                values[int(r)] = v[j, : lengths[r] - 1].float().cpu()
    return values  # type: ignore[return-value]


def _critic_step(
    critic, critic_opt, trajs, mini, lengths, values, returns, n_tokens, cfg: Config, dev, stats: dict
) -> None:
    """One optimiser step of the critic on minibatch `mini`: verl's clipped value loss, token-mean."""
    c = cfg.train
    critic_opt.zero_grad(set_to_none=True)
    for ms in range(0, len(mini), c.micro_batch_size):
        rows = mini[ms : ms + c.micro_batch_size]
        ids, attn, gen, _ = _padded(trajs, rows, dev)
        width = ids.shape[1] - 1
        mask = gen[:, 1:]
        with models.autocast(dev, cfg.model.dtype):
            vpred = critic(ids, attn)
        loss, frac = algos.value_loss(
            vpred,
            _rows(returns, rows, lengths, width, dev),
            _rows(values, rows, lengths, width, dev),
            mask,
            c.cliprange_value,
            c.vf_coef,
        )
        (loss * (mask.sum() / n_tokens)).backward()
        stats["vf_loss"].append(loss.item())
        stats["vf_clip_frac"].append(frac)
    stats["critic_grad_norm"].append(
        float(torch.nn.utils.clip_grad_norm_(critic.parameters(), c.max_grad_norm))
    )
    critic_opt.step()


def new_critic(base, device: str, cfg: Config) -> tuple[process.ValueModel, torch.optim.Optimizer]:
    """verl's critic: a `ValueModel` initialised from the base, on its own AdamW (`train.critic_lr`)."""
    critic = process.ValueModel(models.load_trainable(base, device=device)[0]).to(device).eval()
    return critic, torch.optim.AdamW(
        critic.parameters(), lr=cfg.train.critic_lr, weight_decay=cfg.train.weight_decay
    )
