"""Rollout throughput: the kit's lock-step engine with the KV cache carried across turns, against a naive loop
that re-encodes the whole conversation every turn with Hugging Face `generate` (transformers' default SDPA
attention). Same weights, tasks and seeds, in one process; prints environment steps/s and generated tokens/s
of each and the ratio of the kit to the baseline. A middle row runs the kit's engine on transformers' SDPA
attention, to show what the carried cache and the CPU attention (helpers.attention) each contribute.

    .venv/bin/python benchmarks/rollout.py --profile cpu --tasks 16 --samples 8
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import base_model, config, models
from helpers.envs import load_tasks, settings
from helpers.policy import Generation, HFPolicy, Sampling
from helpers.rollout import rollout, summarize


class NaiveHFPolicy:
    """The baseline: every turn, left-pad the full conversations and call `model.generate` from scratch."""

    def __init__(self, model, tokenizer, name="naive"):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.chat_kwargs = {}

    @torch.no_grad()
    def generate(self, prompt_token_ids, sampling: Sampling) -> list[Generation]:
        L = max(len(p) for p in prompt_token_ids)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (L - len(p)) + p for p in prompt_token_ids])
        mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompt_token_ids])
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=sampling.temperature > 0,
            temperature=sampling.temperature,
            top_p=None,
            top_k=None,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.eos_token_id,
            pad_token_id=pad,
            output_logits=True,
            return_dict_in_generate=True,
        )
        new = out.sequences[:, L:]
        logp = torch.stack(out.logits, dim=1).float().log_softmax(-1).gather(-1, new[..., None]).squeeze(-1)
        gens = []
        for b in range(len(prompt_token_ids)):
            toks = new[b].tolist()
            if self.eos_token_id in toks:
                toks = toks[: toks.index(self.eos_token_id) + 1]
            gens.append(
                Generation(
                    toks,
                    logp[b, : len(toks)].tolist(),
                    self.tokenizer.decode(toks, skip_special_tokens=True),
                    finished=bool(toks) and toks[-1] == self.eos_token_id,
                )
            )
        return gens


def measure(policy, cfg, tasks, samples, seed) -> dict:
    sampling = Sampling.from_config(cfg.sampling)
    t0 = time.perf_counter()
    trajs = rollout(
        policy,
        cfg.env.name,
        tasks,
        cfg.env.frozenlake.t_max,
        samples,
        sampling,
        seed=seed,
        step_quality=False,
    )
    dt = time.perf_counter() - t0
    s = summarize(trajs)
    steps = sum(t.n_turns for t in trajs)
    return {
        "seconds": dt,
        "env_steps_per_s": steps / dt,
        "gen_tokens_per_s": s["generated_tokens"] / dt,
        "success": s["success"],
        "trajectories": len(trajs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    cfg = config.load(args.profile)
    path = base_model.path_of(cfg)
    device = models.resolve_device(cfg.model.device)
    model, tok = models.load(path, device=device)  # the kit's attention on the CPU (helpers.attention)
    plain, _ = models.load(path, device=device, attn_implementation="sdpa")  # transformers' default
    tasks = load_tasks(cfg.env.name, "test", n=args.tasks, seed=args.seed, **settings(cfg))
    engines = {
        "naive (HF generate, re-encode every turn)": NaiveHFPolicy(plain, tok),
        "kit engine, transformers' SDPA attention": HFPolicy(plain, tok),
        "kit (lock-step, KV cache carried)": HFPolicy(model, tok),
    }
    results = {}
    for name, pol in engines.items():
        measure(pol, cfg, tasks[:2], 2, args.seed)  # warm-up
        runs = [measure(pol, cfg, tasks, args.samples, args.seed + r) for r in range(args.repeats)]
        results[name] = min(runs, key=lambda r: r["seconds"])
    print(
        f"model {path.name}: {args.tasks} tasks x {args.samples} samples, T_max={cfg.env.frozenlake.t_max}, "
        f"torch threads {torch.get_num_threads()}"
    )
    for name, r in results.items():
        print(
            f"{name:45s} {r['seconds']:7.2f} s  {r['env_steps_per_s']:8.1f} env steps/s  "
            f"{r['gen_tokens_per_s']:8.1f} gen tokens/s  success {r['success']:.3f}"
        )
    naive, _, kit = results.values()
    print(
        f"speed-up (kit / naive): {kit['env_steps_per_s'] / naive['env_steps_per_s']:.2f}x env steps/s, "
        f"{kit['gen_tokens_per_s'] / naive['gen_tokens_per_s']:.2f}x generated tokens/s"
    )


if __name__ == "__main__":
    main()
