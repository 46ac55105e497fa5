#!/usr/bin/env python3
"""The training steps of `scripts/gpu_check.sh`, one subcommand each, runnable on CPU too (the tests do).

    python scripts/gpu_check_steps.py rl-loop --device cuda --backend hf --dtype bfloat16
    python scripts/gpu_check_steps.py trl --device cuda --vllm

Each trains the smoke profile's tiny model for a few steps at the paper's learning rate (1e-6) in the given compute
precision, then compares the trained weights with the base's: with float32 master weights every tensor must have
moved (in pure bfloat16 almost nothing does at that learning rate). It prints one `RESULT {json}` line with an `outcome` and
exits with its code:

* 0 `pass`: every tensor moved (for `trl`: and at least one rollout batch had reward variance);
* 1 `fail`: the run failed, or a rollout batch had reward variance (a learning signal) and a tensor did not move;
* 8 `no-signal` (`trl` only): every task group of every rollout batch had one reward for all its samples, so GRPO's
  advantages were all zero and nothing had to move: neither a pass nor a failure, a draw of the dice (the check
  reports it as such and can be run again), never a pass by chance and never a failure by chance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VLLM_SETTINGS = {"model__max_model_len": 512, "model__gpu_memory_utilization": 0.3}
EXIT_PASS, EXIT_FAIL, EXIT_NO_SIGNAL = 0, 1, 8


def weight_change(before: Path, after: Path) -> dict:
    """How much of the saved weights moved between two model folders: dtypes, fraction of elements changed,
    tensors that did not change at all."""
    import torch
    from safetensors.torch import load_file

    a, b = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    names = sorted(set(a) & set(b))
    changed = sum(int((a[n].float() != b[n].float()).sum()) for n in names)
    total = sum(a[n].numel() for n in names)
    return {
        "saved_dtypes": sorted({str(b[n].dtype).removeprefix("torch.") for n in names}),
        "changed_fraction": changed / max(total, 1),
        "unchanged_tensors": [n for n in names if torch.equal(a[n].float(), b[n].float())],
        "tensors": len(names),
    }


def rl_loop(args) -> dict:
    """`helpers.train.rl_train` (BudgetMix with the HF backend, full budget with vLLM) on the smoke profile."""
    from helpers import base_model, config, train

    extra = VLLM_SETTINGS if args.backend == "vllm" else {}
    cfg = config.load("smoke", model__device=args.device, model__backend=args.backend, model__dtype=args.dtype,
                      train__lr=args.lr, **extra)  # fmt: skip
    mode = "full" if args.backend == "vllm" else "budgetmix"
    final = train.rl_train(cfg, mode)
    last = train.read_metrics(cfg, mode)[-1]
    keys = ("step", "success", "kl", "grad_norm", "rollout_tokens_per_s", "rollout_s", "update_s")
    return {"final": str(final), **{k: last[k] for k in keys if k in last},
            **weight_change(base_model.path_of(cfg), final)}  # fmt: skip


def trl(args) -> dict:
    """`python -m helpers.train_trl` (BudgetMix, 2 rollout batches) on the smoke profile, through its CLI."""
    from helpers import base_model, config, train_trl

    sets = [f"model.device={args.device}", f"model.dtype={args.dtype}", f"train.lr={args.lr}"]
    if args.vllm:
        sets += [f"{k.replace('__', '.')}={v}" for k, v in VLLM_SETTINGS.items()]
    argv = [
        "--profile",
        "smoke",
        "--mode",
        "budgetmix",
        "--max-steps",
        "2",
        "--vllm" if args.vllm else "--no-vllm",
    ]
    for s in sets:
        argv += ["--set", s]
    rc = train_trl.main(argv)
    cfg = config.load("smoke", **train_trl.parse_overrides(sets))
    final = train_trl.trl_dir(cfg, "budgetmix", args.vllm) / "final"
    history = json.loads((final.parent / "log_history.json").read_text())
    losses = [h["loss"] for h in history if "loss" in h]
    return {"rc": rc, "final": str(final), "losses": losses, "signal": learning_signal(history),
            **weight_change(base_model.path_of(cfg), final)}  # fmt: skip


def learning_signal(history: list[dict]) -> dict:
    """Which logged TRL steps had reward variance within some task group (`frac_reward_zero_std` < 1: a nonzero
    GRPO advantage somewhere), from the trainer's log history."""
    logged = [h for h in history if "frac_reward_zero_std" in h]
    with_signal = [h.get("step") for h in logged if h["frac_reward_zero_std"] < 1.0]
    return {"logged_steps": len(logged), "steps_with_signal": with_signal,
            "reward_std": [h.get("reward_std") for h in logged]}  # fmt: skip


def outcome(result: dict) -> tuple[str, int]:
    """The verdict of a step (see the module docstring): (`pass` | `fail` | `no-signal`, exit code)."""
    if result.get("rc", 0) != 0:
        return "fail", EXIT_FAIL
    moved = not result["unchanged_tensors"]
    signal = result.get("signal")
    if signal is None:  # the RL loop: every tensor must move
        return ("pass", EXIT_PASS) if moved else ("fail", EXIT_FAIL)
    if not signal["logged_steps"]:
        return "fail", EXIT_FAIL  # TRL logged no reward statistics: the run did not do what the check asks
    if signal["steps_with_signal"]:
        return ("pass", EXIT_PASS) if moved else ("fail", EXIT_FAIL)
    return "no-signal", EXIT_NO_SIGNAL


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("rl-loop", "trl"):
        p = sub.add_parser(name)
        p.add_argument("--device", default="cuda")
        p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
        p.add_argument(
            "--lr", type=float, default=1e-6, help="the paper's learning rate (default %(default)g)"
        )
        if name == "rl-loop":
            p.add_argument("--backend", default="hf", choices=("hf", "vllm"))
        else:
            p.add_argument("--vllm", action="store_true", help="roll out on TRL's colocated vLLM engine")
    args = ap.parse_args(argv)
    result = rl_loop(args) if args.what == "rl-loop" else trl(args)
    verdict, code = outcome(result)
    result["outcome"] = verdict
    print("RESULT " + json.dumps(result))
    print(f"{args.what}: weights saved as {'/'.join(result['saved_dtypes'])}, {result['changed_fraction']:.2%} of "
          f"elements changed, {len(result['unchanged_tensors'])} of {result['tensors']} tensors unchanged")  # fmt: skip
    if "signal" in result:
        sig = result["signal"]
        print(f"{args.what}: {len(sig['steps_with_signal'])} of {sig['logged_steps']} logged steps had reward "
              f"variance; outcome {verdict.upper()}")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
