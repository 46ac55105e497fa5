"""Training: the tiny base policy by SFT, and the RL loop (GRPO and BudgetMix) that trains from it.

The base (cpu tier)
-------------------
The paper trains from Qwen3; the cpu tier has no downloadable weights, so `base_model(cfg)` builds a stand-in: a
tiny Qwen3-architecture model (helpers.models) pre-trained by supervised fine-tuning on demonstrations of a
scripted player that is good but imperfect. The demonstrator is Q*-greedy with a uniformly random move with
probability `sft.epsilon` (0.3 in the cpu profile), over training maps and budgets drawn from the BudgetMix
candidates, failed episodes kept. A model that imitates it is a sensible agent that still wastes moves and falls
into holes: clearly improvable by RL. The loss is on generated (assistant) tokens only. The built model is cached
under `results/<profile>/models/base-<recipe hash>/` and reused while its recipe is unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import string
import time
from pathlib import Path

import numpy as np
import torch

from helpers import budget as budget_lib
from helpers import models, store
from helpers.config import Config
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, make, play, settings
from helpers.policy import token_logprobs
from helpers.progress import bar
from helpers.rollout import ChatFormat

BASE_RECIPE_VERSION = 1  # bump when the demonstrations, tokenizer or SFT code change what gets built


# ------------------------------------------------------------------------------------------ demonstrations


def demonstrations(cfg: Config, n: int, seed: int) -> list[list[dict]]:
    """`n` chat transcripts of the epsilon-noisy Q*-greedy player on training maps (budgets mixed)."""
    env_cfg = settings(cfg, "frozenlake")
    tasks = load_tasks("frozenlake", "train", seed=seed, **env_cfg)
    rng = np.random.default_rng(seed)
    cands = budget_lib.budgetmix_candidates(cfg.env.frozenlake.t_max)
    transcripts = []
    for i in bar(range(n), desc="demonstrations", leave=False):
        task = tasks[int(rng.integers(len(tasks)))]
        budget = int(cands[int(rng.integers(len(cands)))])
        player = fl.scripted_player(cfg.sft.epsilon, seed * 1_000_003 + i)
        transcripts.append(play(make("frozenlake"), task, budget, player, seed=i)[0])
    return transcripts


def tokenizer_corpus(transcripts: list[list[dict]]) -> list[str]:
    """Text to train the tokenizer on: the environment's own messages, role names, every printable character
    (so no character of an unexpected reply is dropped), and an invalid-action observation."""
    corpus = [m["content"] for tr in transcripts for m in tr]
    corpus += ["system", "user", "assistant"] * 50 + list(string.printable) + ["√"]
    env = make("frozenlake")
    task = load_tasks("frozenlake", "test", n=1, size=4, t_max=4, n_train=10, n_test=2)[0]
    env.reset(task, 4)
    corpus += [
        env.step(bad).observation for bad in ("", "<answer>x</answer>", "<answer>Up</answer>" * 2)
    ] * 20
    return corpus


def encode_transcript(chat: ChatFormat, transcript: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of a transcript exactly as a rollout builds them, and the mask of assistant tokens."""
    ids = chat.prompt_ids(transcript[:2])
    mask = [0] * len(ids)
    for msg in transcript[2:]:
        if msg["role"] == "assistant":
            piece = chat.action_ids(msg["content"])
            ids += piece
            mask += [1] * len(piece)
        else:
            piece = chat.observation_ids(msg["content"])
            ids += piece
            mask += [0] * len(piece)
    # the last observation (after the final action) is not part of what the model is trained to predict
    while mask and mask[-1] == 0:
        ids.pop()
        mask.pop()
    return ids, mask


def windows(transcript: list[dict]) -> list[list[dict]]:
    """One example per demonstrated turn: the system prompt, the observation the player acted on, its action.

    The demonstrator is Markov (its move depends only on the map, the position and the turns left, all in the
    current observation), so these windows carry all of its signal; one is about 135 tokens against about 250
    for a whole episode (cpu profile).
    """
    return [[transcript[0], transcript[k - 1], transcript[k]] for k in range(2, len(transcript), 2)]


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


# --------------------------------------------------------------------------------------------------- SFT


def sft(
    model, tokenizer, transcripts: list[list[dict]], cfg: Config, log: store.Records | None = None
) -> dict:
    """Supervised fine-tuning on transcripts, loss on assistant tokens only (token mean over the batch).

    With `sft.context = "window"` (the cpu profile) each example is one demonstrated turn in the context the
    player acted on (`windows`); with "episode" it is a whole transcript. Why windows: on 2 CPU cores the tiny
    model sat on the plateau where it predicts the four moves uniformly (loss ln(4)/4 per assistant token) for
    as long as each calibration run on whole episodes went (400-800 steps); on windows, about half the tokens
    per example, it left the plateau after about 600 steps (see configs/cpu.yaml). The model still sees whole multi-turn conversations in
    every rollout: the last observation sits at the same relative position before the answer either way.

    AdamW with linear warm-up then constant lr, length-grouped random batches, until `sft.max_steps` (or the
    `sft.max_seconds` guard). Returns a summary (steps, final loss, tokens/s).
    """
    c = cfg.sft
    chat = ChatFormat(tokenizer)
    examples = [w for t in transcripts for w in windows(t)] if c.context == "window" else transcripts
    data = [encode_transcript(chat, t) for t in examples]
    rng = np.random.default_rng(c.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(c.warmup_steps, 1)))
    model.train()
    t0, tokens, losses = time.time(), 0, []
    progress = bar(total=c.max_steps, desc="SFT", leave=False)
    step = 0
    lengths = np.array([len(ids) for ids, _ in data])
    batches: list[np.ndarray] = []
    for step in range(1, c.max_steps + 1):
        if not batches:  # length-grouped batches: draw 16 batches' worth, sort by length, shuffle the batches
            pool = rng.integers(len(data), size=16 * c.batch_size)
            pool = pool[np.argsort(lengths[pool], kind="stable")]
            batches = [pool[i : i + c.batch_size] for i in range(0, len(pool), c.batch_size)]
            rng.shuffle(batches)
        idx = batches.pop()
        ids, attn, loss_mask = pad_batch(
            [data[i][0] for i in idx], [data[i][1] for i in idx], tokenizer.pad_token_id
        )
        logp, _ = token_logprobs(model, ids, attn)
        m = loss_mask[:, 1:]
        loss = -(logp * m).sum() / m.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        tokens += int(attn.sum())
        losses.append(loss.item())
        progress.update(1)
        if step % 50 == 0:
            progress.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
            if log is not None:
                log.append({"step": step, "loss": float(np.mean(losses[-50:])), "seconds": time.time() - t0})
        if time.time() - t0 > c.max_seconds:
            break
    progress.close()
    model.eval()
    seconds = time.time() - t0
    return {
        "steps": step,
        "final_loss": float(np.mean(losses[-50:])),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
    }


def base_summary(cfg: Config) -> dict:
    """What SFT of the base reported (steps, final loss, tokens/s); {} for a hub model."""
    path = base_model(cfg) / "sft_summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def base_recipe(cfg: Config) -> dict:
    """Everything that determines the built base model."""
    return {
        "version": BASE_RECIPE_VERSION,
        "tiny": dataclasses.asdict(cfg.model.tiny),
        "sft": dataclasses.asdict(cfg.sft),
        "frozenlake": dataclasses.asdict(cfg.env.frozenlake),
        "seed": cfg.seed,
    }


def base_model(cfg: Config, force: bool = False) -> Path:
    """Path of the profile's base model: a hub name/path as configured, or the tiny SFT base (built once)."""
    if cfg.model.name_or_path != "tiny":
        return Path(cfg.model.name_or_path)
    recipe = base_recipe(cfg)
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    out = store.models_dir(cfg.profile) / f"base-{digest}"
    if (out / "sft_summary.json").exists() and not force:
        return out
    if out.exists():
        shutil.rmtree(out)  # an interrupted build: start it again
    transcripts = demonstrations(cfg, cfg.sft.n_demos, cfg.seed + cfg.sft.seed)
    tmp = out.with_name(out.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    models.build_tiny(cfg.model.tiny, tokenizer_corpus(transcripts), tmp, seed=cfg.seed)
    model, tokenizer = models.load(tmp)
    summary = sft(model, tokenizer, transcripts, cfg, log=store.Records(tmp / "sft_log.jsonl"))
    model.save_pretrained(tmp)
    (tmp / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True))
    (tmp / "sft_summary.json").write_text(json.dumps(summary, indent=2))
    tmp.rename(out)
    return out


# --------------------------------------------------------------------------------- RL: GRPO and BudgetMix
#
# One step: sample `tasks_per_step` training tasks; give each task group one budget (T_max in `full` mode, a
# uniform draw from the BudgetMix candidates in `budgetmix` mode; nothing else differs); roll out G trajectories
# per task with the current policy; reward 1 on success, 0 otherwise (and 0 whenever the budget ran out before
# the episode ended, which matters for environments that would score an unfinished episode); GRPO advantages
# within each task group; PPO-clip + low_var_kl to the frozen base over generated tokens only, token-mean;
# AdamW. Environment tokens never enter the loss: the mask is the rollout's generated-token mask.

BUDGET_MODES = ("full", "budgetmix")


def rl_reward(traj) -> float:
    """The trajectory's RL reward: the environment's reward, or 0 if the budget ran out unfinished."""
    return 0.0 if traj.exhausted else float(traj.reward)


def step_budgets(mode: str, t_max: int, n_groups: int, rng: np.random.Generator) -> list[int]:
    """One budget per task group: T_max (`full`) or a BudgetMix draw (`budgetmix`)."""
    if mode == "full":
        return [t_max] * n_groups
    if mode == "budgetmix":
        return budget_lib.sample_budgets(t_max, n_groups, rng)
    raise ValueError(f"budget mode must be one of {BUDGET_MODES}, got {mode!r}")


def task_budgets(mode: str, t_maxes: list[int], rng: np.random.Generator) -> list[int]:
    """One budget per task group from each task's own T_max (tasks of BFCL, say, differ in T_max)."""
    if len(set(t_maxes)) == 1:
        return step_budgets(mode, t_maxes[0], len(t_maxes), rng)
    return [step_budgets(mode, t, 1, rng)[0] for t in t_maxes]


def _recipe_dir(cfg: Config, prefix: str, recipe: dict) -> Path:
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return store.models_dir(cfg.profile) / f"{prefix}-{digest}"


def rl_recipe(cfg: Config, mode: str) -> dict:
    return {
        "version": BASE_RECIPE_VERSION,
        "base": str(base_model(cfg)),
        "mode": mode,
        "train": dataclasses.asdict(cfg.train),
        "sampling": dataclasses.asdict(cfg.sampling),
        "env": cfg.env.name,
        "env_settings": settings(cfg),
        "seed": cfg.seed,
    }


def rl_dir(cfg: Config, mode: str) -> Path:
    """Where the `mode` run of this profile keeps its checkpoints, metrics and final model."""
    return _recipe_dir(cfg, mode, rl_recipe(cfg, mode))


def trained_model(cfg: Config, mode: str) -> Path:
    """The final model of a finished RL run (an error says which notebook trains it)."""
    final = rl_dir(cfg, mode) / "final"
    if not (final / "config.json").exists():
        nb = "01_grpo_training" if mode == "full" else "02_budgetmix_training"
        raise FileNotFoundError(
            f"no trained {mode} model for profile {cfg.profile!r}: run notebook {nb} first"
        )
    return final


def probe_pool(cfg: Config, policy) -> list:
    """The fixed R_single probe pool: states drawn once from base-model trajectories on training maps."""
    from helpers import probing
    from helpers.policy import Sampling
    from helpers.rollout import rollout

    env_cfg = settings(cfg)
    recipe = {"n": cfg.train.n_probe_states, "seed": cfg.seed, "env": env_cfg, "base": str(base_model(cfg))}
    path = _recipe_dir(cfg, "probe-pool", recipe).with_suffix(".jsonl")
    records = store.Records(path)
    if len(records) == cfg.train.n_probe_states:
        return [probing.ProbeState.from_dict(d) for d in records]
    path.unlink(missing_ok=True)
    tasks = load_tasks(cfg.env.name, "train", n=cfg.train.n_probe_states, seed=cfg.seed + 17, **env_cfg)
    trajs = rollout(policy, cfg.env.name, tasks, [t.t_max for t in tasks], 1,
                    Sampling.from_config(cfg.sampling), seed=cfg.seed + 17, step_quality=False)  # fmt: skip
    states = probing.sample_states(
        trajs,
        {t.task_id: t for t in tasks},
        cfg.train.n_probe_states,
        np.random.default_rng(cfg.seed + 17),
        "base",
    )
    store.Records(path).append([s.to_dict() for s in states])
    return states


def ppo_update(model, ref_model, opt, trajs, cfg: Config, rng: np.random.Generator) -> dict:
    """GRPO advantages, then PPO epochs over minibatches (gradient accumulation over micro-batches)."""
    from helpers import algos

    c = cfg.train
    rewards = torch.tensor([rl_reward(t) for t in trajs], dtype=torch.float)
    adv = algos.grpo_advantages(rewards, [t.group for t in trajs], eps=1e-6, norm_by_std=c.norm_by_std)
    dev = next(model.parameters()).device
    ids, attn, gen = pad_batch([t.token_ids for t in trajs], [t.gen_mask for t in trajs], 0)
    old = torch.zeros_like(gen)
    for i, t in enumerate(trajs):
        old[i, : len(t.logprobs)] = torch.tensor(t.logprobs)
    ids, attn, gen, old, adv = ids.to(dev), attn.to(dev), gen.to(dev), old.to(dev), adv.to(dev)
    with torch.no_grad():  # reference log-probs from the frozen base
        ref = torch.cat([token_logprobs(ref_model, ids[i : i + c.micro_batch_size], attn[i : i + c.micro_batch_size])[0]
                         for i in range(0, len(trajs), c.micro_batch_size)])  # fmt: skip

    model.train()
    stats: dict[str, list[float]] = {
        k: [] for k in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl", "grad_norm")
    }
    for _ in range(c.ppo_epochs):
        order = rng.permutation(len(trajs))
        for start in range(0, len(trajs), c.minibatch_size):
            mini = order[start : start + c.minibatch_size]
            n_tokens = gen[mini][:, 1:].sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            for ms in range(0, len(mini), c.micro_batch_size):
                mb = torch.as_tensor(mini[ms : ms + c.micro_batch_size], device=dev)
                logp, logits = token_logprobs(model, ids[mb], attn[mb])
                mask = gen[mb][:, 1:]
                pg, st = algos.policy_loss(logp, old[mb][:, 1:], algos.broadcast(adv[mb], mask), mask,
                                           clip_ratio=c.clip_ratio)  # fmt: skip
                kl = algos.agg_loss(algos.kl_penalty(logp, ref[mb], c.kl_kind), mask)
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


def _save_checkpoint(out: Path, step: int, model, opt) -> None:
    path = out / f"checkpoint-{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict()}, tmp)
    tmp.replace(path)
    for old in sorted(out.glob("checkpoint-*.pt"))[:-2]:  # keep the last two
        old.unlink()


def _latest_checkpoint(out: Path) -> Path | None:
    found = sorted(out.glob("checkpoint-*.pt"))
    return found[-1] if found else None


def rl_train(cfg: Config, mode: str = "full", max_steps: int | None = None) -> Path:
    """Train from the base with GRPO in budget mode `full` or `budgetmix`; returns the final model's path.

    Metrics of every step are appended to `<run dir>/metrics.jsonl`; a checkpoint is written every
    `train.checkpoint_every` steps and at the end. An interrupted run resumes from its last checkpoint (metrics
    of later steps are dropped and recomputed); a finished run is reused as is. `max_steps` stops early (for
    tests of resumption) without writing the final model.
    """
    from helpers.policy import HFPolicy, Sampling
    from helpers.policy_vllm import after_update, before_update, rollout_policy_for
    from helpers.probing import r_single
    from helpers.rollout import rollout, summarize

    if mode not in BUDGET_MODES:
        raise ValueError(f"budget mode must be one of {BUDGET_MODES}, got {mode!r}")
    c = cfg.train
    out = rl_dir(cfg, mode)
    final = out / "final"
    if (final / "config.json").exists():
        return final
    out.mkdir(parents=True, exist_ok=True)
    (out / "recipe.json").write_text(json.dumps(rl_recipe(cfg, mode), indent=2, sort_keys=True, default=str))

    device = models.resolve_device(cfg.model.device)
    base = base_model(cfg)
    model, tok = models.load(base, device=device, dtype=cfg.model.dtype)
    ref_model, _ = models.load(base, device=device, dtype=cfg.model.dtype)
    ref_model.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)

    start = 0
    metrics = store.Records(out / "metrics.jsonl")
    if (ckpt := _latest_checkpoint(out)) is not None:
        state = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = int(state["step"])
    kept = [r for r in metrics if r["step"] <= start]
    metrics.path.unlink(missing_ok=True)
    metrics.append(kept)
    # hf: the policy shares `model`; vllm: a colocated engine that is synced after every update
    policy = rollout_policy_for(cfg, model, tok, name=mode)

    env_cfg = settings(cfg)
    train_tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **env_cfg)
    monitor = load_tasks(cfg.env.name, "train", n=c.eval_tasks, seed=cfg.seed + 29, **env_cfg)
    sampling = Sampling.from_config(cfg.sampling)
    probes = probe_pool(cfg, HFPolicy(ref_model, tok, name="base"))

    def evaluate(step: int) -> dict:
        trajs = rollout(policy, cfg.env.name, monitor, [t.t_max for t in monitor], c.group_size, sampling, seed=cfg.seed + 29,
                        step_quality=False)  # fmt: skip
        row = {"eval_success": summarize(trajs)["success"]}
        row["r_single"] = r_single(policy, probes, c.probe_samples, Sampling(
            sampling.temperature, sampling.top_p, sampling.max_new_tokens, seed=cfg.seed + 31))  # fmt: skip
        policy.reset_cache()
        return row

    if start == 0:
        metrics.append({"step": 0, "mode": mode, **evaluate(0)})
    last = c.steps if max_steps is None else min(c.steps, max_steps)
    progress = bar(range(start + 1, last + 1), desc=f"RL ({mode})", leave=False)
    for step in progress:
        rng = np.random.default_rng([cfg.seed, step])
        idx = rng.choice(len(train_tasks), size=min(c.tasks_per_step, len(train_tasks)), replace=False)
        tasks = [train_tasks[i] for i in idx]
        budgets = task_budgets(mode, [t.t_max for t in tasks], rng)
        t0 = time.time()
        trajs = rollout(policy, cfg.env.name, tasks, budgets, c.group_size, sampling, seed=cfg.seed * 100_003 + step,
                        step_quality=False)  # fmt: skip
        policy.reset_cache()
        t1 = time.time()
        before_update(policy)  # vllm: sleep while the trainer steps
        upd = ppo_update(model, ref_model, opt, trajs, cfg, rng)
        after_update(policy, model)  # vllm: wake up and load the new weights; hf: drop the conversation cache
        t2 = time.time()
        summary = summarize(trajs)
        row = {
            "step": step, "mode": mode, "reward": float(np.mean([rl_reward(t) for t in trajs])),
            "success": summary["success"], "mean_turns": summary["mean_turns"],
            "invalid_rate": summary["invalid_rate"], "budget_mean": float(np.mean(budgets)), **upd,
            "rollout_tokens_per_s": summary["generated_tokens"] / max(t1 - t0, 1e-9),
            "tokens_per_s": sum(len(t.token_ids) for t in trajs) / max(t2 - t0, 1e-9),
            "rollout_s": t1 - t0, "update_s": t2 - t1,
        }  # fmt: skip
        if step % c.eval_every == 0 or step == c.steps:
            row.update(evaluate(step))
        metrics.append(row)
        progress.set_postfix(success=f"{row['success']:.2f}", kl=f"{row['kl']:.3f}")
        if step % c.checkpoint_every == 0 or step == c.steps:
            _save_checkpoint(out, step, model, opt)
    if last == c.steps:
        model.save_pretrained(final)
        tok.save_pretrained(final)
    return final


def read_metrics(cfg: Config, mode: str) -> list[dict]:
    """The per-step metrics of an RL run."""
    return store.Records(rl_dir(cfg, mode) / "metrics.jsonl").read()
