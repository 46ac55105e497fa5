#!/usr/bin/env python3
"""The training steps of `scripts/gpu_check.sh`, one subcommand each, runnable on CPU too (the tests do).

    python scripts/gpu_check_steps.py rl-loop --device cuda --backend hf --dtype bfloat16
    python scripts/gpu_check_steps.py trl --device cuda --vllm
    python scripts/gpu_check_steps.py qwen3 --device cuda --json qwen3_4b.json   # only if Qwen3-4B is cached

Each trains the smoke profile's tiny model for a few steps at the paper's learning rate (1e-6) in the given compute
precision, then compares the trained weights with the base's: with float32 master weights every tensor must have
moved (in pure bfloat16 almost nothing does at that learning rate). It prints one `RESULT {json}` line with an `outcome` and
exits with its code:

* 0 `pass`: every tensor moved (for `trl`: and at least one rollout batch had reward variance);
* 1 `fail`: the run failed, or a rollout batch had reward variance (a learning signal) and a tensor did not move;
* 8 `no-signal` (`trl` only): every task group of every rollout batch had one reward for all its samples, so GRPO's
  advantages were all zero and nothing had to move: neither a pass nor a failure, a draw of the dice (the check
  reports it as such and can be run again), never a pass by chance and never a failure by chance.

`qwen3` is the optional `qwen3_4b` step: when Qwen/Qwen3-4B is complete in the local Hugging Face cache (looked up
with `local_files_only=True`: nothing is downloaded), or a folder is named with `--model` or `GPU_CHECK_QWEN3`, it
runs one FrozenLake rollout of the model through the kit's `rollout` and one RL update (`ppo_update` on float32
master weights, bfloat16 compute, as `rl_train` does), and reports the times and the peak GPU memory of each phase
(`torch.cuda.max_memory_allocated`); it exits 0 (`pass`), 1 (`fail`), or 9 (`skipped`: the model is not cached,
which the check reports and which does not change its exit status).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VLLM_SETTINGS = {"model__max_model_len": 512, "model__gpu_memory_utilization": 0.3}
EXIT_PASS, EXIT_FAIL, EXIT_NO_SIGNAL, EXIT_SKIPPED = 0, 1, 8, 9
QWEN3_4B = "Qwen/Qwen3-4B"
QWEN3_ENV = "GPU_CHECK_QWEN3"  # a local model folder for the qwen3 step instead of the cached Qwen3-4B


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
    cfg = config.load(
        "smoke",
        model__device=args.device,
        model__backend=args.backend,
        model__dtype=args.dtype,
        train__lr=args.lr,
        **extra,
    )
    mode = "full" if args.backend == "vllm" else "budgetmix"
    final = train.rl_train(cfg, mode)
    last = train.read_metrics(cfg, mode)[-1]
    keys = ("step", "success", "kl", "grad_norm", "rollout_tokens_per_s", "rollout_s", "update_s")
    return {
        "final": str(final),
        **{k: last[k] for k in keys if k in last},
        **weight_change(base_model.path_of(cfg), final),
    }


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
    return {
        "rc": rc,
        "final": str(final),
        "losses": losses,
        "signal": learning_signal(history),
        **weight_change(base_model.path_of(cfg), final),
    }


def learning_signal(history: list[dict]) -> dict:
    """Which logged TRL steps had reward variance within some task group (`frac_reward_zero_std` < 1: a nonzero
    GRPO advantage somewhere), from the trainer's log history."""
    logged = [h for h in history if "frac_reward_zero_std" in h]
    with_signal = [h.get("step") for h in logged if h["frac_reward_zero_std"] < 1.0]
    return {
        "logged_steps": len(logged),
        "steps_with_signal": with_signal,
        "reward_std": [h.get("reward_std") for h in logged],
    }


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


def missing_model_files(folder: Path) -> list[str]:
    """What a saved causal LM folder lacks to be loaded offline: config, tokenizer, every weight shard."""
    missing = [f for f in ("config.json", "tokenizer_config.json") if not (folder / f).is_file()]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        missing += [s for s in shards if not (folder / s).is_file()]
    elif not (folder / "model.safetensors").is_file():
        missing.append("model.safetensors (or model.safetensors.index.json)")
    return missing


def find_qwen3(model: str | None = None) -> tuple[Path | None, str]:
    """The model folder the qwen3 step runs (`model`, else $GPU_CHECK_QWEN3, else Qwen3-4B's snapshot in the local
    Hugging Face cache, found without any download), or None and why not."""
    import os

    model = model or os.environ.get(QWEN3_ENV) or None
    if model is not None:
        folder = Path(model)
        if not folder.is_dir():
            return None, f"{folder} is not a folder"
    else:
        from huggingface_hub import constants, snapshot_download

        try:
            folder = Path(snapshot_download(QWEN3_4B, local_files_only=True))
        except Exception as e:  # LocalEntryNotFoundError and kin: not cached (or an unreadable cache)
            return None, (
                f"{QWEN3_4B} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}; "
                f"{type(e).__name__}); `hf download {QWEN3_4B}` on a machine with network"
            )
    missing = missing_model_files(folder)
    if missing:
        return None, f"{folder} lacks {', '.join(missing)}"
    return folder, ""


def _memory(device: str) -> dict:
    """Peak and current GPU memory (GiB) since the last reset, and the device-wide use (vLLM's memory included)."""
    import torch

    if not str(device).startswith("cuda"):
        return {"peak_allocated_gib": None, "allocated_gib": None, "device_used_gib": None}
    free, total = torch.cuda.mem_get_info()
    gib = 2**30
    return {
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / gib,
        "allocated_gib": torch.cuda.memory_allocated() / gib,
        "device_used_gib": (total - free) / gib,
    }


def qwen3(args) -> dict:
    """One rollout batch of a Qwen3 model on FrozenLake through the kit's rollout, one RL update on float32 master
    weights with `args.dtype` compute, as `helpers.train.rl_train` takes a step; times and memory of each phase."""
    folder, reason = find_qwen3(args.model)
    if folder is None:
        return {"outcome": "skipped", "reason": reason}
    import time

    import numpy as np
    import torch

    from helpers import config, models
    from helpers.backends import after_update, before_update, rollout_policy_for
    from helpers.envs import load_tasks, settings
    from helpers.policy import Sampling
    from helpers.ppo import ppo_update
    from helpers.rollout import rollout

    n = args.tasks * args.group
    extra = VLLM_SETTINGS if args.backend == "vllm" else {}
    cfg = config.load(
        "gpu",
        model__name_or_path=str(folder),
        model__device=args.device,
        model__backend=args.backend,
        model__dtype=args.dtype,
        train__lr=args.lr,
        train__tasks_per_step=args.tasks,
        train__group_size=args.group,
        train__minibatch_size=n,
        train__micro_batch_size=min(2, n),
        sampling__max_new_tokens=args.max_new_tokens,
        **extra,
    )
    device = models.resolve_device(cfg.model.device)
    cuda = device.startswith("cuda")
    phases: dict[str, dict] = {}

    def phase(name: str, t0: float) -> None:
        phases[name] = {"seconds": time.time() - t0, **_memory(device)}
        if cuda:
            torch.cuda.reset_peak_memory_stats()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    model, tok = models.load_trainable(folder, device=device)
    ref, _ = models.load(folder, device=device, dtype=cfg.model.dtype)
    ref.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    watched = [name for name, _ in model.named_parameters()][:: max(1, len(list(model.parameters())) // 8)]
    before = {name: p.detach().clone() for name, p in model.named_parameters() if name in watched}
    phase("load", t0)
    with rollout_policy_for(cfg, model, tok, name="qwen3") as policy:
        tasks = load_tasks(cfg.env.name, "train", n=args.tasks, seed=cfg.seed, **settings(cfg))
        t0 = time.time()
        trajs = rollout(
            policy,
            cfg.env.name,
            tasks,
            cfg.env.frozenlake.t_max,
            args.group,
            Sampling.from_config(cfg.sampling),
            seed=0,
            step_quality=False,
        )
        policy.reset_cache()
        phase("rollout", t0)
        t0 = time.time()
        before_update(policy)
        upd = ppo_update(model, ref, opt, trajs, cfg, np.random.default_rng(0))
        after_update(policy, model)
        phase("update", t0)
    unchanged = [
        name for name, p in model.named_parameters() if name in before and torch.equal(before[name], p)
    ]
    generated = sum(sum(t.gen_mask[t.prompt_len :]) for t in trajs)
    varied = reward_variance(trajs, args.group)
    return {
        "model": str(folder),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if cuda else None,
        "backend": cfg.model.backend,
        "dtype": cfg.model.dtype,
        "trajectories": len(trajs),
        "turns": [t.n_turns for t in trajs],
        "generated_tokens": int(generated),
        "context_tokens": [len(t.token_ids) for t in trajs],
        "success": float(np.mean([t.reward for t in trajs])),
        "update": {k: upd[k] for k in ("pg_loss", "kl", "grad_norm") if k in upd},
        "reward_variance": varied,
        "watched_tensors": len(before),
        "unchanged_watched_tensors": unchanged,
        "peak_gib": max((p["peak_allocated_gib"] or 0.0) for p in phases.values()) if cuda else None,
        "phases": phases,
        "rc": 0,
    }


def reward_variance(trajs: list, group: int) -> bool:
    """Whether some task group (`group` consecutive trajectories) had RL rewards that differ, a nonzero GRPO advantage:
    the reward the update sees (`helpers.ppo.rl_reward`: 0 for an episode whose budget or context ran out), not the
    environment's."""
    from helpers.ppo import rl_reward

    groups = [trajs[i : i + group] for i in range(0, len(trajs), group)]
    return any(len({rl_reward(t) for t in g}) > 1 for g in groups)


def qwen3_outcome(result: dict) -> tuple[str, int]:
    """The qwen3 step's verdict: skipped (not cached); fail when the update's numbers are not finite, or when some
    task group had rewards that differ (a nonzero GRPO advantage) and a watched tensor did not move; else pass (a
    batch without reward variance has nothing to move at lr 1e-6: the step is about time and memory)."""
    if result.get("outcome") == "skipped":
        return "skipped", EXIT_SKIPPED
    finite = all(v is None or math.isfinite(v) for v in result["update"].values())
    stuck = result.get("reward_variance", True) and result["unchanged_watched_tensors"]
    return ("pass", EXIT_PASS) if finite and not stuck else ("fail", EXIT_FAIL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("rl-loop", "trl", "qwen3"):
        p = sub.add_parser(name)
        p.add_argument("--device", default="cuda")
        p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
        p.add_argument(
            "--lr", type=float, default=1e-6, help="the paper's learning rate (default %(default)g)"
        )
        if name in ("rl-loop", "qwen3"):
            p.add_argument("--backend", default="hf", choices=("hf", "vllm"))
        else:
            p.add_argument("--vllm", action="store_true", help="roll out on TRL's colocated vLLM engine")
        if name == "qwen3":
            p.add_argument(
                "--model", help=f"a local model folder (default ${QWEN3_ENV}, else {QWEN3_4B} if cached)"
            )
            p.add_argument("--tasks", type=int, default=2, help="FrozenLake tasks in the rollout batch")
            p.add_argument("--group", type=int, default=2, help="samples per task")
            p.add_argument(
                "--max-new-tokens", type=int, default=64, help="per reply (the gpu profile has 512)"
            )
            p.add_argument("--json", help="write the step's report here")
    args = ap.parse_args(argv)
    if args.what == "qwen3":
        result = qwen3(args)
        verdict, code = qwen3_outcome(result)
        result["outcome"] = verdict
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        print("RESULT " + json.dumps(result))
        if verdict == "skipped":
            print(f"qwen3: SKIPPED: {result['reason']}")
        else:
            ph = result["phases"]
            peak = "n/a (not on CUDA)" if result["peak_gib"] is None else f"{result['peak_gib']:.1f} GiB"
            print(
                f"qwen3: {result['trajectories']} trajectories, {result['generated_tokens']} generated tokens; "
                f"load {ph['load']['seconds']:.0f} s, rollout {ph['rollout']['seconds']:.0f} s, update "
                f"{ph['update']['seconds']:.0f} s; peak GPU memory {peak}; outcome {verdict.upper()}"
            )
        return code
    result = rl_loop(args) if args.what == "rl-loop" else trl(args)
    verdict, code = outcome(result)
    result["outcome"] = verdict
    print("RESULT " + json.dumps(result))
    print(
        f"{args.what}: weights saved as {'/'.join(result['saved_dtypes'])}, {result['changed_fraction']:.2%} of "
        f"elements changed, {len(result['unchanged_tensors'])} of {result['tensors']} tensors unchanged"
    )
    if "signal" in result:
        sig = result["signal"]
        print(
            f"{args.what}: {len(sig['steps_with_signal'])} of {sig['logged_steps']} logged steps had reward "
            f"variance; outcome {verdict.upper()}"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
