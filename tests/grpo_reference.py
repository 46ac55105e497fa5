"""The GRPO update as it was before GiGPO, PPO and the oracle-Q reward joined the loop (commit 08187cb,
`helpers/train.py`), kept verbatim as the reference that `algorithm=grpo` must reproduce bit for bit.

Not a test module (no `test_` prefix): `tests/test_process.py` imports it.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.config import Config
from helpers.policy import pad_batch, shared_prefix_len, token_logprobs
from helpers.train import rl_reward


def _padded(trajs, rows, dev) -> tuple[torch.Tensor, ...]:
    """Token ids, attention mask, generated-token mask and sampling log-probs of `rows`, right-padded to the
    longest of them only (a micro-batch of similar lengths wastes little on padding)."""
    sub = [trajs[i] for i in rows]
    ids, attn, gen = pad_batch([t.token_ids for t in sub], [t.gen_mask for t in sub], 0)
    old = torch.zeros_like(gen)
    for j, t in enumerate(sub):
        old[j, : len(t.logprobs)] = torch.tensor(t.logprobs)
    return ids.to(dev), attn.to(dev), gen.to(dev), old.to(dev)


def _shared(trajs, rows) -> int:
    """Tokens every trajectory of `rows` starts with (the environment's system prompt): run once per batch."""
    return shared_prefix_len([trajs[i].token_ids[: trajs[i].prompt_len] for i in rows])


def ppo_update(model, ref_model, opt, trajs, cfg: Config, rng: np.random.Generator) -> dict:
    """GRPO advantages, then PPO epochs over minibatches (gradient accumulation over micro-batches).

    Within a minibatch the trajectories are sorted by length before they are cut into micro-batches, and each
    micro-batch is padded only to its own longest trajectory: the gradient of a minibatch is a sum over its
    tokens, so the grouping changes nothing but the padding computed.
    """
    from helpers import algos, models

    c = cfg.train
    rewards = torch.tensor([rl_reward(t) for t in trajs], dtype=torch.float)
    adv = algos.grpo_advantages(rewards, [t.group for t in trajs], eps=1e-6, norm_by_std=c.norm_by_std)
    dev = next(model.parameters()).device
    adv = adv.to(dev)
    lengths = np.array([len(t.token_ids) for t in trajs])
    by_length = np.argsort(lengths, kind="stable")
    ref: dict[int, torch.Tensor] = {}  # reference log-probs per trajectory, from the frozen base
    with torch.no_grad():
        for start in range(0, len(trajs), c.micro_batch_size):
            rows = by_length[start : start + c.micro_batch_size]
            ids, attn, _, _ = _padded(trajs, rows, dev)
            lp = token_logprobs(ref_model, ids, attn, shared_prefix=_shared(trajs, rows))[0]
            ref.update({int(r): lp[j, : lengths[r] - 1] for j, r in enumerate(rows)})

    model.train()
    stats: dict[str, list[float]] = {
        k: [] for k in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl", "grad_norm")
    }
    for _ in range(c.ppo_epochs):
        order = rng.permutation(len(trajs))
        for start in range(0, len(trajs), c.minibatch_size):
            mini = order[start : start + c.minibatch_size]
            mini = mini[np.argsort(lengths[mini], kind="stable")]
            n_tokens = max(1, sum(sum(trajs[i].gen_mask[1:]) for i in mini))
            opt.zero_grad(set_to_none=True)
            for ms in range(0, len(mini), c.micro_batch_size):
                rows = mini[ms : ms + c.micro_batch_size]
                ids, attn, gen, old = _padded(trajs, rows, dev)
                width = ids.shape[1] - 1
                ref_lp = torch.zeros(len(rows), width, device=dev)
                for j, r in enumerate(rows):
                    ref_lp[j, : lengths[r] - 1] = ref[int(r)]
                with models.autocast(dev, cfg.model.dtype):  # float32 weights, model.dtype compute
                    logp, logits = token_logprobs(model, ids, attn, shared_prefix=_shared(trajs, rows))
                mask = gen[:, 1:]
                a = adv[torch.as_tensor(rows, device=dev)]
                pg, st = algos.policy_loss(
                    logp, old[:, 1:], algos.broadcast(a, mask), mask, clip_ratio=c.clip_ratio
                )
                kl = algos.agg_loss(algos.kl_penalty(logp, ref_lp, c.kl_kind), mask)
                weight = mask.sum() / n_tokens  # token-mean over the whole minibatch
                ((pg + c.kl_coef * kl) * weight).backward()
                with torch.no_grad():
                    stats["entropy"].append(algos.masked_mean(algos.entropy_from_logits(logits), mask).item())
                stats["pg_loss"].append(pg.item())
                stats["kl"].append(kl.item())
                stats["clip_frac"].append(st["clip_frac"])
                stats["approx_kl"].append(st["approx_kl"])
            stats["grad_norm"].append(
                float(torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm))
            )
            opt.step()
    model.eval()
    out = {k: float(np.mean(v)) for k, v in stats.items()}
    out["advantage_abs_mean"] = float(adv.abs().mean())
    return out
