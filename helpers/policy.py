"""Policies: what the rollout engine, the trainer and the analyses call to sample and to score tokens.

A `Policy` works on token ids, never on text, so a multi-turn conversation is never re-tokenised:

* `generate(prompt_token_ids, sampling) -> list[Generation]` samples one continuation per prompt and returns
  its token ids and their log-probs (the model's own log-probs at temperature 1, the quantity PPO's ratio and the
  likelihood analysis need; temperature and top-p only shape how tokens are drawn);
* `score(prompt_token_ids, continuation_token_ids) -> list[list[float]]` gives teacher-forced per-token log-probs.

The Hugging Face backend (`HFPolicy`, CPU or GPU) carries the KV cache across the turns of a conversation: when
every prompt of a call extends a conversation whose tokens are already in the cache (the previous prompt, the
tokens generated for it, then the new observation), only the new tokens are pre-filled. This is an automatic
prefix cache, as vLLM has, so the rollout engine is the same for both backends. Chunks are left-padded; pad
positions are masked out as keys, and position ids count real tokens only, so the cached computation equals a
clean forward over the unpadded conversation.

Every policy the kit builds can be closed: `policy.close()` drops what it holds (the model, its cache; a vLLM
engine is shut down) and hands the freed memory back (`release_torch_cache`), and `with policy:` closes it on
leaving the block. A wrapper (`Tempered`) closes what it wraps. The kit closes each policy it is done with, so an
evaluation of many models holds one at a time.
"""

from __future__ import annotations

import dataclasses
import gc
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from transformers import DynamicCache

from helpers import models


@dataclass(frozen=True)
class Sampling:
    """How to draw tokens. temperature 0 = greedy. `seed` makes a call reproducible."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    seed: int | None = None

    @classmethod
    def from_config(cls, cfg, seed: int | None = None) -> Sampling:
        return cls(cfg.temperature, cfg.top_p, cfg.max_new_tokens, seed)

    def replace(self, **changes: Any) -> Sampling:
        """This sampling with `changes` (e.g. another seed); every other field is kept, a new one included."""
        return dataclasses.replace(self, **changes)


@dataclass
class Generation:
    """One sampled continuation: token ids (ending with end-of-turn when it stopped), their log-probs, text."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool = True  # False when max_new_tokens cut it off before end-of-turn


def release_torch_cache() -> None:
    """Collect garbage and hand PyTorch's cached GPU blocks back to the driver, so that the next model (or a waking
    vLLM engine) can have them (TRL does the same before its wake-up, "required to avoid OOM in some cases").

    Only where CUDA is in use: on CPU a freed tensor's memory goes back as its last reference goes, and a full
    collection walks every object alive (0.3 s in a process that has just imported the kit, more in a kernel that has
    run notebooks): once per closed policy it was a tenth of a smoke series' time (33 s of DeepCoder's, py-spy)."""
    if torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


class Closing:
    """`with policy:` closes the policy on leaving the block (see the module docstring); `close` frees it."""

    def close(self) -> None:
        """Free what the policy holds; it cannot sample or score afterwards."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@runtime_checkable
class Policy(Protocol):
    name: str
    tokenizer: object
    eos_token_id: int

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]: ...

    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]: ...


# Trajectories an HF policy on the CPU generates together (its `rollout_rows`): a larger rollout runs in chunks of
# this many, one after the other, whose KV caches stay small enough to be fast (issue 51: 100 maps x 8 samples of the
# cpu base took 0.61x the time in chunks of 256 as in one batch of 800, benchmarks/speed.py); an RL step (64) and the
# training monitor (256) are one chunk. vLLM schedules its own batches and a scripted player has no cache: neither
# sets `rollout_rows`, so their rollouts run as one batch and draw as they always did.
ROLLOUT_ROWS = 256
MIN_SHARED_PREFIX = 16  # below this, running the prefix separately costs more than it saves


def token_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, shared_prefix: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced log p(x_t | x_<t) for t >= 1 of a left- or right-padded batch, and the logits.

    Returns (logp [B, L-1], logits [B, L-1, V]); position ids count real tokens only, so padding never shifts
    positions. Used by `score` and, with gradients, by the trainer.

    `shared_prefix = P > 0` says that every row of a right-padded batch starts with the same P real tokens (the
    system prompt of one environment, say): they are run once and their keys and values broadcast to every row,
    so a batch of B trajectories pays for the prefix once instead of B times. The result, and the gradient
    through it, is the same computation as the plain forward (the prefix's activations are shared exactly).
    """
    B, L = input_ids.shape
    if shared_prefix < MIN_SHARED_PREFIX or B == 1 or shared_prefix >= L:
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        )
        logits = out.logits[:, :-1].float()
    else:
        P = shared_prefix
        head = model(input_ids=input_ids[:1, :P], use_cache=True)
        cache = head.past_key_values
        cache.batch_repeat_interleave(B)
        position_ids = P + (attention_mask[:, P:].long().cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids[:, P:],
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        logits = torch.cat([head.logits.expand(B, -1, -1), out.logits[:, :-1]], dim=1).float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return logp, logits


def shared_prefix_len(seqs: list[list[int]]) -> int:
    """Length of the longest prefix every sequence shares (0 for fewer than two sequences)."""
    if len(seqs) < 2:
        return 0
    return _common_prefix_len(seqs)


def pad_batch(seqs: list[list[int]], masks: list[list[int]], pad_id: int) -> tuple[torch.Tensor, ...]:
    """Right-pad token ids and loss masks into tensors (input_ids, attention_mask, loss_mask)."""
    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), L), dtype=torch.long)
    loss_mask = torch.zeros((len(seqs), L), dtype=torch.float)
    for i, (s, m) in enumerate(zip(seqs, masks, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        loss_mask[i, : len(m)] = torch.tensor(m, dtype=torch.float)
    return ids, attn, loss_mask


def sample_from_logits(
    logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None
) -> torch.Tensor:
    """Draw one token per row with temperature and nucleus (top-p) filtering; greedy at temperature 0."""
    if sampling.temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < sampling.top_p  # always keeps the most likely token
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class Tempered(Closing):
    """A policy sampled at a fixed temperature whatever the caller asks (the sharpened base: the same model,
    sampled at the temperature `helpers.controls` chose). Scoring is the model's own, untouched."""

    def __init__(self, policy: Policy, temperature: float, name: str | None = None):
        self.policy = policy
        self.temperature = float(temperature)
        self.name = name or f"{policy.name}@T={temperature:g}"
        self.tokenizer = policy.tokenizer
        self.eos_token_id = policy.eos_token_id
        self.chat_kwargs = getattr(policy, "chat_kwargs", None)
        self.max_context = getattr(policy, "max_context", None)  # the engine's context guard
        self.rollout_rows = getattr(policy, "rollout_rows", None)  # the engine's chunk size in rollouts

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        return self.policy.generate(prompt_token_ids, sampling.replace(temperature=self.temperature))

    def score(self, prompt_token_ids, continuation_token_ids) -> list[list[float]]:
        return self.policy.score(prompt_token_ids, continuation_token_ids)

    def reset_cache(self) -> None:
        if hasattr(self.policy, "reset_cache"):
            self.policy.reset_cache()

    def close(self) -> None:
        """Close the wrapped policy."""
        if hasattr(self.policy, "close"):
            self.policy.close()


@dataclass
class _PrefixCache:
    """The KV cache of the conversations of the last call, one row each, with the bookkeeping to extend it."""

    kv: DynamicCache
    mask: torch.Tensor  # [B, L] 1 where the cached position holds a real token
    next_pos: torch.Tensor  # [B] position id of each row's next token
    ids: list[list[int]] = field(default_factory=list)  # the real token ids in each row

    def match(self, prompts: list[list[int]]) -> list[int] | None:
        """For each prompt, the row whose cached ids are a strict prefix of it (in order), or None."""
        rows, start = [], 0
        for p in prompts:
            for r in range(start, len(self.ids)):
                ids = self.ids[r]
                if len(ids) < len(p) and p[: len(ids)] == ids:
                    rows.append(r)
                    start = r + 1
                    break
            else:
                return None
        return rows


class HFPolicy(Closing):
    """Policy over a Hugging Face causal LM, with a KV cache carried across turns."""

    def __init__(
        self, model, tokenizer, name: str = "model", prefix_cache: bool = True, score_batch: int = 64
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.pad_token_id = int(tokenizer.pad_token_id)
        self.prefix_cache = prefix_cache
        self.score_batch = score_batch
        self._cache: _PrefixCache | None = None
        self.chat_kwargs = models.chat_kwargs(tokenizer)
        self.max_context: int | None = None  # set it to make rollouts end conversations at this length
        # rollouts of more trajectories run in chunks of this many on the CPU (`ROLLOUT_ROWS`: a small KV cache is
        # a fast one there); a GPU takes the whole batch
        self.rollout_rows: int | None = ROLLOUT_ROWS if self.device.type == "cpu" else None

    @classmethod
    def from_pretrained(
        cls, name_or_path, device: str = "cpu", dtype: str = "float32", name: str | None = None, **kw
    ) -> HFPolicy:
        model, tokenizer = models.load(name_or_path, device=models.resolve_device(device), dtype=dtype)
        return cls(model, tokenizer, name=name or str(name_or_path), **kw)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def reset_cache(self) -> None:
        """Forget cached conversations (after a weight update the cache is stale)."""
        self._cache = None

    def close(self) -> None:
        """Drop the model and the cache (a model shared with a trainer lives on there) and release the memory."""
        self._cache = None
        self.model = None
        release_torch_cache()

    # -------------------------------------------------------------------------------------------- sampling
    @torch.no_grad()
    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        """Sample one continuation per prompt, stopping at end-of-turn or `max_new_tokens`."""
        if not prompt_token_ids:
            return []
        if any(len(p) == 0 for p in prompt_token_ids):
            raise ValueError("generate(): every prompt needs at least one token")
        dev = self.device
        gen = None
        if sampling.seed is not None:
            gen = torch.Generator(device=dev)
            gen.manual_seed(int(sampling.seed))
        B = len(prompt_token_ids)

        rows = self._cache.match(prompt_token_ids) if (self.prefix_cache and self._cache) else None
        if rows is None:
            cache, logits = self._prefill_fresh(prompt_token_ids)
        else:
            cache = self._cache
            self._select(cache, rows)
            # Pre-fill the new tokens of each prompt (left-padded within the chunk).
            new = [p[len(ids) :] for p, ids in zip(prompt_token_ids, cache.ids, strict=True)]
            chunk, chunk_mask = self._left_pad(new)
            logits = self._forward(cache, chunk, chunk_mask)
        cache.ids = [list(p) for p in prompt_token_ids]

        out_ids: list[list[int]] = [[] for _ in range(B)]
        out_lp: list[list[float]] = [[] for _ in range(B)]
        alive = torch.ones(B, dtype=torch.bool, device=dev)
        for step in range(sampling.max_new_tokens):
            logp = torch.log_softmax(logits.float(), dim=-1)
            tok = sample_from_logits(logits.float(), sampling, gen)
            tok_lp = logp.gather(-1, tok[:, None]).squeeze(-1)
            for b in torch.nonzero(alive).flatten().tolist():
                out_ids[b].append(int(tok[b]))
                out_lp[b].append(float(tok_lp[b]))
            alive &= tok != self.eos_token_id
            if not alive.any() or step == sampling.max_new_tokens - 1:
                break
            # Feed the sampled tokens; finished rows feed a masked pad so the batch stays rectangular.
            feed = torch.where(alive, tok, torch.full_like(tok, self.pad_token_id))[:, None]
            logits = self._forward(cache, feed, alive.long()[:, None])
            for b in torch.nonzero(alive).flatten().tolist():
                cache.ids[b].append(out_ids[b][-1])
        # The last sampled token of each row is not in the cache yet; the next call's prompt pre-fills it.
        self._cache = cache if self.prefix_cache else None
        return [
            Generation(
                ids,
                lps,
                self.tokenizer.decode(ids, skip_special_tokens=True),
                finished=bool(ids) and ids[-1] == self.eos_token_id,
            )
            for ids, lps in zip(out_ids, out_lp, strict=True)
        ]

    def _select(self, cache: _PrefixCache, rows: list[int]) -> None:
        """Keep (and repeat or reorder) the cache rows `rows`."""
        idx = torch.tensor(rows, device=self.device)
        cache.kv.batch_select_indices(idx)
        cache.mask, cache.next_pos = cache.mask[idx], cache.next_pos[idx]
        cache.ids = [list(cache.ids[r]) for r in rows]

    def _prefill_fresh(self, prompts: list[list[int]]) -> tuple[_PrefixCache, torch.Tensor]:
        """A new cache for `prompts`, computing each distinct prompt once.

        The prefix every prompt shares (a system prompt) is pre-filled once for a single row, unpadded, then the
        distinct remainders left-padded (every padded chunk then has real tokens before it, so no row is ever
        all padding), and finally rows are repeated so identical prompts (the G samples of a task) share work.
        """
        dev = self.device
        uniq: dict[tuple, int] = {}
        inverse = [uniq.setdefault(tuple(p), len(uniq)) for p in prompts]
        distinct = [list(p) for p in uniq]
        common = min(_common_prefix_len(distinct), min(len(p) for p in distinct) - 1)
        cache = _PrefixCache(
            DynamicCache(),
            torch.zeros(1, 0, dtype=torch.long, device=dev),
            torch.zeros(1, dtype=torch.long, device=dev),
            [[]],
        )
        if common > 0:
            shared = torch.tensor([distinct[0][:common]], device=dev)
            self._forward(cache, shared, torch.ones_like(shared))
            cache.ids = [list(distinct[0][:common])]
        self._select(cache, [0] * len(distinct))
        chunk, chunk_mask = self._left_pad([p[common:] for p in distinct])
        logits = self._forward(cache, chunk, chunk_mask)
        self._select(cache, inverse)
        return cache, logits[torch.tensor(inverse, device=dev)]

    def _left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        L = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), L), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), L), dtype=torch.long)
        for i, s in enumerate(seqs):
            if s:
                ids[i, L - len(s) :] = torch.tensor(s)
                mask[i, L - len(s) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _forward(
        self, cache: _PrefixCache, ids: torch.Tensor, mask: torch.Tensor, last_only: bool = True
    ) -> torch.Tensor:
        """Run a chunk through the model on top of the cache; returns the logits at the chunk's last position (or,
        with `last_only=False`, at every position of the chunk)."""
        position_ids = cache.next_pos[:, None] + mask.cumsum(-1) - 1
        position_ids = position_ids.clamp(min=0)
        cache.mask = torch.cat([cache.mask, mask], dim=1)
        out = self.model(
            input_ids=ids,
            attention_mask=cache.mask,
            position_ids=position_ids,
            past_key_values=cache.kv,
            use_cache=True,
        )
        cache.next_pos = cache.next_pos + mask.sum(-1)
        return out.logits[:, -1] if last_only else out.logits

    # -------------------------------------------------------------------------------------------- scoring
    @torch.no_grad()
    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probs of each continuation token given its prompt (micro-batched, no grad).

        Where prompts repeat (several replies scored at one prompt, as the budget-swap probe asks), each distinct
        prompt is pre-filled once and its replies are read off its cache (`_score_shared`); otherwise every
        prompt + continuation runs as one left-padded sequence."""
        if len(prompt_token_ids) != len(continuation_token_ids):
            raise ValueError("score(): need one continuation per prompt")
        distinct = len({tuple(p) for p in prompt_token_ids})
        if distinct < len(prompt_token_ids) and min(map(len, prompt_token_ids)) >= MIN_SHARED_PREFIX:
            return self._score_shared(prompt_token_ids, continuation_token_ids)
        return self._score_rows(prompt_token_ids, continuation_token_ids)

    def _score_rows(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """`score`, each prompt + continuation as one left-padded sequence, `score_batch` rows at a time."""
        results: list[list[float]] = []
        for i in range(0, len(prompt_token_ids), self.score_batch):
            prompts = prompt_token_ids[i : i + self.score_batch]
            conts = continuation_token_ids[i : i + self.score_batch]
            full, mask = self._left_pad([p + c for p, c in zip(prompts, conts, strict=True)])
            logp, _ = token_logprobs(self.model, full, mask)
            L = full.shape[1]
            for b, c in enumerate(conts):
                results.append(logp[b, L - 1 - len(c) :].tolist() if c else [])
        return results

    def _score_shared(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """`score` for repeated prompts: rows sorted by prompt length, cut into groups of at most `score_batch`
        distinct prompts; each group's prompts are pre-filled once (`_prefill_fresh`: the shared system prompt once,
        each distinct prompt once), the first token of every continuation is read at its prompt's last position,
        and the rest of the continuations run as one right-padded chunk on top of the cache. The same log-probs as
        `_score_rows` up to float rounding (tests/test_policy_rollout.py), at a fraction of the cost when a prompt
        carries several short replies."""
        order = sorted(range(len(prompt_token_ids)), key=lambda i: len(prompt_token_ids[i]))
        groups: list[list[int]] = [[]]
        seen: set[tuple] = set()
        for i in order:
            key = tuple(prompt_token_ids[i])
            if key not in seen and len(seen) == self.score_batch:
                groups.append([])
                seen = set()
            seen.add(key)
            groups[-1].append(i)
        results: list[list[float]] = [[] for _ in prompt_token_ids]
        for rows in groups:
            rows = [
                i for i in rows if continuation_token_ids[i]
            ]  # an empty continuation has nothing to score
            if not rows:
                continue
            conts = [list(continuation_token_ids[i]) for i in rows]
            cache, last = self._prefill_fresh([list(prompt_token_ids[i]) for i in rows])
            first = torch.log_softmax(last.float(), dim=-1)
            heads = first.gather(-1, torch.tensor([[c[0]] for c in conts], device=first.device))[
                :, 0
            ].tolist()
            width = max(len(c) for c in conts) - 1
            rest: list[list[float]] = [[] for _ in rows]
            if width:
                ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                nxt = torch.zeros((len(rows), width), dtype=torch.long)
                for j, c in enumerate(conts):
                    ids[j, : len(c) - 1] = torch.tensor(c[:-1])
                    mask[j, : len(c) - 1] = 1
                    nxt[j, : len(c) - 1] = torch.tensor(c[1:])
                dev = self.device
                logits = self._forward(cache, ids.to(dev), mask.to(dev), last_only=False)
                lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, nxt.to(dev)[..., None])[..., 0]
                rest = [lp[j, : len(c) - 1].tolist() for j, c in enumerate(conts)]
            for j, i in enumerate(rows):
                results[i] = [heads[j], *rest[j]]
        return results


def _common_prefix_len(seqs: list[list[int]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n


class AutocastHFPolicy(HFPolicy):
    """HFPolicy whose forward passes run under `models.autocast(device, dtype)`: rollouts of a float32 trainable
    model in the profile's compute precision, the one its PPO update runs in."""

    def __init__(self, model, tokenizer, dtype: str, **kw: Any):
        super().__init__(model, tokenizer, **kw)
        models.autocast(self.device, dtype)  # an unknown dtype fails here, not at the first rollout
        self.dtype = dtype

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        """HFPolicy.generate under autocast."""
        with models.autocast(self.device, self.dtype):
            return super().generate(prompt_token_ids, sampling)

    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """HFPolicy.score under autocast."""
        with models.autocast(self.device, self.dtype):
            return super().score(prompt_token_ids, continuation_token_ids)


def hf_policy(model, tokenizer, dtype: str = "float32", name: str = "policy") -> HFPolicy:
    """An HF policy over `model` that computes in `dtype`: a plain HFPolicy for float32, else AutocastHFPolicy."""
    if dtype == "float32":
        return HFPolicy(model, tokenizer, name=name)
    return AutocastHFPolicy(model, tokenizer, dtype, name=name)
