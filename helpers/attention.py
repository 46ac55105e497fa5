"""Attention for small models on the CPU: the same computation as PyTorch's SDPA, without its slow masked path.

With a padding mask (every batched rollout and training batch has one), `scaled_dot_product_attention` on the
CPU falls back to a path that, for the kit's tiny models, costs about 20x a plain `softmax(q k^T) v` (measured on
2 cores: 485 ms against 25 ms per decode step of 512 conversations with 220 cached tokens), and grouped-query
attention first copies the whole key/value cache once per query group (`repeat_kv`). This module registers
`kit_cpu` with transformers' attention and mask interfaces: the query heads of one key/value head are folded
into the query dimension (no copy), scores are masked with the same boolean mask transformers builds for SDPA,
and the result equals SDPA's to float rounding (tests/test_policy_rollout.py). `helpers.models.load` uses it for
models on the CPU; GPUs keep their fused kernels.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "kit_cpu"
MAX_QUERY = 8  # queries of at most this many tokens (decoding) take the plain path; measured crossover ~8-40
SDPA_GQA = True  # longer queries call SDPA with enable_gqa (False: transformers' copying path, the benchmark's baseline)


def kit_cpu_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """softmax(q k^T * scaling + mask) v for query [B, H, q, d], key/value [B, Hk, L, d]; returns [B, q, H, d].

    Longer queries (prefill, training) go to PyTorch's SDPA, which is the faster one there: with a mask and grouped
    query heads, called with `enable_gqa` (transformers' path first copies the keys and values once per query group,
    `repeat_kv`, which cost about half of a pre-fill's attention: issue 51; the output is the same to the bit)
    where no gradient is taken, otherwise through transformers' path."""
    B, H, q, d = query.shape
    if q > MAX_QUERY:
        groups = getattr(module, "num_key_value_groups", 1)
        plain = attention_mask is None or groups == 1 or kwargs.get("position_bias") is not None
        # only without gradients (rollouts, scoring, the reference): SFT and the update keep transformers' path, whose
        # gradients differ from enable_gqa's in the last bits, so the base the kit builds stays the one it built
        if plain or not SDPA_GQA or torch.is_grad_enabled():
            return sdpa_attention_forward(
                module,
                query,
                key,
                value,
                attention_mask,
                dropout=dropout,
                scaling=scaling,
                is_causal=is_causal,
                **kwargs,
            )
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
        )
        return out.transpose(1, 2).contiguous(), None
    Hk, L = key.shape[1], key.shape[2]
    g = H // Hk
    scale = scaling if scaling is not None else d**-0.5
    qg = query.reshape(B, Hk, g * q, d)  # heads h = j * g + i share key/value head j
    scores = torch.matmul(qg, key.transpose(-1, -2)).view(B, Hk, g, q, L) * scale
    if attention_mask is None:
        if q > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
            causal = torch.ones(q, L, dtype=torch.bool, device=query.device).tril(L - q)
            scores = scores.masked_fill(~causal, float("-inf"))
    elif attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask[:, :, None, -q:, :], float("-inf"))
    else:
        scores = scores + attention_mask[:, :, None, -q:, :]
    probs = torch.softmax(scores.float(), dim=-1).to(value.dtype)
    if dropout and module.training:
        probs = torch.nn.functional.dropout(probs, p=dropout)
    out = torch.matmul(probs.view(B, Hk, g * q, L), value).view(B, H, q, d)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, kit_cpu_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)
