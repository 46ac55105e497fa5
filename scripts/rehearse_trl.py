#!/usr/bin/env python3
"""The TRL path of a profile under torchrun on CPU: TRL's GRPOTrainer with the kit's rollouts on several processes,
then the weights of every rank compared.

    torchrun --nproc_per_node 2 scripts/rehearse_trl.py --profile qwen3_rehearsal --out /tmp/trl

What it checks (`make rehearse` runs it after the qwen3_rehearsal series): accelerate starts a process group across
the ranks (gloo on CPU; `WORLD_SIZE` as torchrun says), the rollout batch is split over them (`train_trl.geometry`),
and after the optimiser steps every rank holds the same weights (DDP averaged the gradients; a rank that trained
alone would differ, since every rank rolls out its own samples). It also reports whether the weights moved from the
base: a batch whose task groups all had one reward (no learning signal) moves them by weight decay only, which is
reported, not failed; from the second step the KL term to the reference gives each rank a gradient of its own
rollouts, so equal weights then show that the gradients were averaged. Rank 0 prints one `RESULT {json}` line; the exit status is 0 when the ranks agree, else 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def digest(model) -> str:
    """sha256 of every parameter's float32 bytes, in name order: equal digests, equal weights."""
    import torch

    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().to(torch.float32).cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    import torch.distributed as dist

    from helpers import config
    from helpers import train_trl as tt

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="qwen3_rehearsal")
    ap.add_argument("--mode", default="budgetmix", choices=["full", "budgetmix"])
    ap.add_argument(
        "--steps",
        type=int,
        default=2,
        help="rollout batches (from the second on, the KL to the reference "
        "gives every rank a gradient of its own rollouts even without reward variance)",
    )
    ap.add_argument("--out", default=None, help="the trainer's folder (default: a temporary one)")
    args = ap.parse_args(argv)
    cfg = config.load(args.profile)
    out = args.out or tempfile.mkdtemp(prefix="rehearse-trl-")
    trainer = tt.build_trainer(cfg, args.mode, max_steps=args.steps, output_dir=out)
    before = digest(trainer.model)
    trainer.train()
    after = digest(trainer.model)
    world = dist.get_world_size() if dist.is_initialized() else 1
    digests = [None] * world
    if world > 1:
        dist.all_gather_object(digests, after)
    else:
        digests = [after]
    if trainer.accelerator.is_main_process:
        signal = [h.get("frac_reward_zero_std") for h in trainer.state.log_history if "loss" in h]
        result = {
            "world_size": world,
            "launcher_world_size": tt.world_size(),
            "steps": trainer.state.global_step,
            "ranks_equal": len(set(digests)) == 1,
            "moved": after != before,
            "frac_reward_zero_std": signal,
            "digests": digests,
        }
        print("RESULT " + json.dumps(result), flush=True)
    equal = len(set(digests)) == 1 and world == tt.world_size()
    if dist.is_initialized():
        dist.barrier()
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
