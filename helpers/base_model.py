"""The cpu tier's base policy: a demonstrator, a tokenizer trained on its games, and SFT of a tiny model.

The paper trains from Qwen3; the cpu tier has no downloadable weights, so `path_of(cfg)` builds a stand-in: a
tiny Qwen3-architecture model (helpers.models) pre-trained by supervised fine-tuning on demonstrations of a
scripted player that is good but imperfect. The built model is cached under
`results/<profile>/models/base-<recipe hash>/` and reused while its recipe is unchanged. `tiny-qwen3` builds it with
Qwen3's real tokenizer and chat template (`helpers.models.TINY`; the qwen3_rehearsal profile). For a hub model
(`model.name_or_path` neither) `path_of` is simply that name or path.

A built base's folder says what was asked and what was done: `recipe.json` (`sft.obs_steps`, `sft.max_steps`,
...) and `sft_summary.json` (the steps of each phase); `path_of` refuses a base where they disagree. SFT that runs
past its wall-clock guard `sft.max_seconds` stops with an error and saves nothing.

`KIT_BASE_CACHE` (set by the test suite) names a folder of built bases shared by many results folders: a base
missing from the results is copied from there when the cache has it under the same name (the same recipe hash),
and a newly built one is put there, so a session builds each base once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import string
import time
from pathlib import Path

import numpy as np
import torch

from helpers import models, store
from helpers.config import Config
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, make, play, settings
from helpers.envs.base import plain
from helpers.policy import pad_batch, shared_prefix_len, token_logprobs
from helpers.progress import bar
from helpers.rollout import ChatFormat

BASE_RECIPE_VERSION = 3  # bump when the demonstrations, tokenizer or SFT code change what gets built
# knobs of `sft` that never decide what is built (a guard either lets SFT finish its steps or stops it with an
# error, saving nothing), so they stay out of the recipe hash: raising one on a slow machine keeps the base's name
GUARDS = frozenset({"max_seconds"})

CONTEXTS = ("observation", "window", "episode")


# ------------------------------------------------------------------------------------------ demonstrations


def demonstrations(cfg: Config, n: int, seed: int) -> list[list[dict]]:
    """`n` chat transcripts of the demonstrator on training maps, each at the full budget T_max.

    The demonstrator (`frozenlake.habit_player`) plays the best stationary policy (cautious, budget-blind) and
    moves at random with probability `sft.epsilon`. It is shown the full budget only: the base never sees a
    budget-mixed episode, as the paper's base never saw BudgetMix data.
    """
    env_cfg = settings(cfg, "frozenlake")
    tasks = load_tasks("frozenlake", "train", seed=seed, **env_cfg)
    rng = np.random.default_rng(seed)
    t_max = cfg.env.frozenlake.t_max
    transcripts = []
    for i in bar(range(n), desc="demonstrations", leave=False):
        task = tasks[int(rng.integers(len(tasks)))]
        player = fl.habit_player(cfg.sft.epsilon, cfg.sft.habit_gamma, seed * 1_000_003 + i)
        transcripts.append(play(make("frozenlake"), task, t_max, player, seed=seed * 1_000_003 + i)[0])
    return transcripts


def demonstrator_policy(cfg: Config, task) -> np.ndarray:
    """The demonstrator's action probabilities [n_states, 4] on a task (its habit mixed with random moves)."""
    return fl.with_random_moves(fl.stationary_policy(task, cfg.sft.habit_gamma), cfg.sft.epsilon)


def demonstrator_success(cfg: Config, tasks: list, budgets: list[int]) -> dict[int, float]:
    """Exact success probability of the demonstrator within each budget, averaged over `tasks` (by policy
    evaluation on the transition table, so no sampling noise)."""
    return {
        int(T): float(np.mean([fl.policy_success(t, demonstrator_policy(cfg, t), T) for t in tasks]))
        for T in budgets
    }


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


_REMAINING = re.compile(r"Turns left: (\d+) of \d+\.")


def _remaining_mask(chat: ChatFormat, observation: str) -> tuple[list[int], list[int]]:
    """`chat.observation_ids(observation)` and a mask of the tokens that spell the remaining turns in its budget
    line (the number r of the last `Turns left: r of T.`)."""
    text = chat.obs_prefix + observation + chat.obs_suffix
    enc = chat.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    found = list(_REMAINING.finditer(text))
    if not found:
        return enc["input_ids"], [0] * len(enc["input_ids"])
    lo, hi = found[-1].span(1)
    return enc["input_ids"], [int(a < hi and b > lo) for a, b in enc["offset_mapping"]]


def encode_transcript(
    chat: ChatFormat, transcript: list[dict], budget_line_loss: bool = False
) -> tuple[list[int], list[int]]:
    """Token ids of a transcript exactly as a rollout builds them, and the mask of the tokens SFT learns: the
    assistant's, and with `budget_line_loss` also the number of remaining turns in every observation after the
    first (`sft.budget_line_loss`: predicting r - 1 from the turn before makes the base read the budget line,
    though its budget-blind demonstrator never acts on it; the final observation is then kept up to its number).

    The prompt is every message before the first assistant turn (system and user, or a user message alone).
    """
    first = next(i for i, m in enumerate(transcript) if m["role"] == "assistant")
    ids = chat.prompt_ids(transcript[:first])
    mask = [0] * len(ids)
    for msg in transcript[first:]:
        if msg["role"] == "assistant":
            piece = chat.action_ids(msg["content"])
            ids += piece
            mask += [1] * len(piece)
        elif budget_line_loss:
            piece, marks = _remaining_mask(chat, msg["content"])
            ids += piece
            mask += marks
        else:
            piece = chat.observation_ids(msg["content"])
            ids += piece
            mask += [0] * len(piece)
    # the last observation (after the final action) is not part of what the model is trained to predict
    while mask and mask[-1] == 0:
        ids.pop()
        mask.pop()
    return ids, mask


def examples(transcripts: list[list[dict]], context: str) -> list[list[dict]]:
    """Training examples of one `context`:

    * `episode`: the whole transcript, exactly the context a rollout gives the model at every turn;
    * `window`: one example per turn, the system prompt, the observation acted on and the action (the context
      `helpers.rollout.LastTurnContext` plays with);
    * `observation`: one example per turn, the observation and the action alone (about 48 tokens, cpu profile).

    The demonstrator is Markov (its move depends only on the map and the position in the current observation),
    so every context carries all of its signal.
    """
    turns = [(tr[0], tr[k - 1], tr[k]) for tr in transcripts for k in range(2, len(tr), 2)]
    if context == "episode":
        return list(transcripts)
    if context == "window":
        return [list(t) for t in turns]
    if context == "observation":
        return [[obs, act] for _, obs, act in turns]
    raise ValueError(f"sft context must be one of {CONTEXTS}, got {context!r}")


# --------------------------------------------------------------------------------------------------- SFT


def _phases(c) -> list[tuple[str, int, int]]:
    """(context, steps, batch size) of each SFT phase: the observation phase first, then `sft.context`."""
    phases = [("observation", c.obs_steps, c.obs_batch_size), (c.context, c.max_steps, c.batch_size)]
    return [p for p in phases if p[1] > 0]


def _steps_in_words(phases: list[tuple[str, int, int]], done: list[int]) -> str:
    return ", ".join(
        f"{d} of {steps} {context} steps" for (context, steps, _), d in zip(phases, done, strict=True)
    )


class SFTGuardTripped(RuntimeError):
    """SFT ran past `sft.max_seconds` before doing its steps: the run stops here, and no base is saved."""

    def __init__(self, limit: float, seconds: float, phases: list[tuple[str, int, int]], done: list[int]):
        done = done + [0] * (len(phases) - len(done))
        self.limit, self.seconds, self.done = limit, seconds, done
        super().__init__(
            f"SFT of the base stopped by its wall-clock guard sft.max_seconds = {limit:g} s after {seconds:.0f} s, "
            f"having done {_steps_in_words(phases, done)}; nothing was saved as the base (a half-trained base "
            f"would carry the full recipe's name). This machine trains more slowly than the guard allows: raise "
            f"sft.max_seconds (in the profile, or `python -m helpers.run -p sft.max_seconds=SECONDS`) and run "
            f"again; the steps stay the same, and so does the base's name (a guard is not part of the recipe)."
        )


def check_complete(cfg: Config, summary: dict, where: Path) -> None:
    """Raise when a base's `sft_summary.json` shows fewer steps in a phase than its recipe asks for (a base built
    by a version of the kit whose guard stopped SFT silently): such a base must be rebuilt, not reused."""
    planned = [(context, steps) for context, steps, _ in _phases(cfg.sft)]
    did = [(p["context"], p["steps"]) for p in summary.get("phases", [])]
    if did != planned:
        raise RuntimeError(
            f"the base in {where} did {', '.join(f'{s} {ctx}' for ctx, s in did) or 'no'} steps where its recipe "
            f"asks for {', '.join(f'{s} {ctx}' for ctx, s in planned)}: it was stopped early; delete the folder "
            f"to build it again"
        )


def sft(
    model, tokenizer, transcripts: list[list[dict]], cfg: Config, log: store.Records | None = None
) -> dict:
    """Supervised fine-tuning on the demonstrations, loss on assistant tokens only (token mean over the batch).

    Two phases. First `sft.obs_steps` steps on `observation` examples (one observation and its move, no system
    prompt, no history), then `sft.max_steps` steps on `sft.context` examples (`episode` in every profile: the
    whole conversation, which is what a rollout shows the model). Why the first phase: a model initialised at
    random attends almost uniformly, so in a 300-token episode the cells that decide the move are a small part
    of what each answer reads, and the loss sits on the plateau where the four moves are equally likely (ln(4)/4
    per assistant token) for as long as the calibration runs went (1000-1500 steps on 2 cores, episodes or
    windows with the system prompt); on 48-token observations it leaves the plateau within about 200 steps
    (configs/cpu.yaml has the numbers). The second phase then teaches the model to read the latest observation
    out of the whole conversation, so the base plays in the context it was trained on.

    AdamW (beta2 0.95), linear warm-up then cosine decay to 10 % of `sft.lr` over all steps, length-grouped random
    batches. Returns a summary (steps and final loss per phase, tokens/s).

    The base is defined by its steps, never by the machine's speed: when SFT runs longer than `sft.max_seconds`
    (a guard against a run that would take hours), it stops with `SFTGuardTripped`, naming the knob and the steps
    each phase did, and nothing is saved as the base.
    """
    c = cfg.sft
    chat = ChatFormat(tokenizer, models.chat_kwargs(tokenizer))  # as rollouts render it (Qwen3: thinking off)
    phases = _phases(c)
    total = sum(steps for _, steps, _ in phases)
    rng = np.random.default_rng(c.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay, betas=(0.9, 0.95))

    def lr_factor(s: int) -> float:
        if s < c.warmup_steps:
            return (s + 1) / c.warmup_steps
        progress = (s - c.warmup_steps) / max(1, total - c.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * min(1.0, progress)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    model.train()
    t0, tokens, step = time.time(), 0, 0
    out: dict = {"phases": []}
    progress = bar(total=total, desc="SFT", leave=False)
    for context, steps, batch_size in phases:
        data = [encode_transcript(chat, t, c.budget_line_loss) for t in examples(transcripts, context)]
        lengths = np.array([len(ids) for ids, _ in data])
        batches: list[np.ndarray] = []
        losses: list[float] = []
        for _ in range(steps):
            if not batches:  # length-grouped batches: 16 batches' worth, sorted by length, shuffled
                pool = rng.integers(len(data), size=16 * batch_size)
                pool = pool[np.argsort(lengths[pool], kind="stable")]
                batches = [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
                rng.shuffle(batches)
            idx = batches.pop()
            ids, attn, loss_mask = pad_batch(
                [data[i][0] for i in idx], [data[i][1] for i in idx], tokenizer.pad_token_id
            )
            shared = shared_prefix_len([data[i][0] for i in idx])  # the system prompt, in episodes
            logp, _ = token_logprobs(model, ids, attn, shared_prefix=shared)
            m = loss_mask[:, 1:]
            loss = -(logp * m).sum() / m.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tokens += int(attn.sum())
            losses.append(loss.item())
            progress.update(1)
            if step % 50 == 0:
                recent = float(np.mean(losses[-50:]))
                progress.set_postfix(context=context, loss=f"{recent:.3f}")
                if log is not None:
                    log.append(
                        {"step": step, "context": context, "loss": recent, "seconds": time.time() - t0}
                    )
            if time.time() - t0 > c.max_seconds:
                progress.close()
                done = [*(p["steps"] for p in out["phases"]), len(losses)]
                raise SFTGuardTripped(c.max_seconds, time.time() - t0, phases, done)
        out["phases"].append(
            {
                "context": context,
                "steps": len(losses),
                "batch_size": batch_size,
                "final_loss": float(np.mean(losses[-50:])) if losses else None,
            }
        )
    progress.close()
    model.eval()
    seconds = time.time() - t0
    out.update(
        steps=step,
        final_loss=out["phases"][-1]["final_loss"],
        seconds=seconds,
        tokens_per_s=tokens / seconds,
        examples=len(transcripts),
    )
    return out


def summary(cfg: Config) -> dict:
    """What SFT of the base reported (steps, final loss, tokens/s); {} for a hub model."""
    path = path_of(cfg) / "sft_summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def is_built(cfg: Config) -> bool:
    """Whether the profile's base is one the kit builds (`tiny`, `tiny-qwen3`) rather than a hub name or path."""
    return cfg.model.name_or_path in models.TINY


def recipe(cfg: Config) -> dict:
    """Everything that determines the built base model (the tokenizer only where it is not the kit's own, so the
    `tiny` bases keep their names)."""
    out = {
        "version": BASE_RECIPE_VERSION,
        "tiny": dataclasses.asdict(cfg.model.tiny),
        "sft": {k: v for k, v in plain(cfg.sft).items() if k not in GUARDS},
        "frozenlake": plain(cfg.env.frozenlake),
        "seed": cfg.seed,
    }
    tokenizer = models.TINY.get(cfg.model.name_or_path, "kit")
    return out if tokenizer == "kit" else {**out, "tokenizer": tokenizer}


def folder_name(cfg: Config) -> str:
    """The tiny base's folder name, `base-<first 10 hex digits of sha256(recipe)>`, without building it."""
    return "base-" + hashlib.sha256(json.dumps(recipe(cfg), sort_keys=True).encode()).hexdigest()[:10]


def identity(cfg: Config) -> str:
    """What names the base in the recipes built on it: the tiny base's folder name (`base-<recipe hash>`), or the
    hub name or path as configured; never an absolute path of this machine, so a fresh clone finds the committed
    models under the same names."""
    return path_of(cfg).name if is_built(cfg) else cfg.model.name_or_path


def path_of(cfg: Config, force: bool = False) -> Path:
    """Path of the profile's base model: a hub name/path as configured, or the tiny SFT base (built once)."""
    if not is_built(cfg):
        return Path(cfg.model.name_or_path)
    spec = recipe(cfg)
    out = store.models_dir(cfg.profile) / folder_name(cfg)
    if (out / "sft_summary.json").exists() and not force:
        check_complete(cfg, json.loads((out / "sft_summary.json").read_text()), out)
        return out
    # one writer per base: a second process that needs it waits for the first to build it, then reads it
    with store.one_writer(out, wait=True):
        if (out / "sft_summary.json").exists() and not force:
            check_complete(cfg, json.loads((out / "sft_summary.json").read_text()), out)
            return out
        return _build(cfg, spec, out, force)


def _build(cfg: Config, spec: dict, out: Path, force: bool) -> Path:
    """Build the tiny base into `out` (this process is its one writer): from KIT_BASE_CACHE, or SFT."""
    if out.exists():
        shutil.rmtree(out)  # an interrupted build: start it again
    cache = Path(os.environ["KIT_BASE_CACHE"]) if os.environ.get("KIT_BASE_CACHE") and not force else None
    if cache is not None and (cache / out.name / "sft_summary.json").exists():
        check_complete(cfg, json.loads((cache / out.name / "sft_summary.json").read_text()), cache / out.name)
        _copy_atomically(cache / out.name, out)
        return out
    transcripts = demonstrations(cfg, cfg.sft.n_demos, cfg.seed + cfg.sft.seed)
    tmp = out.with_name(out.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    # a failure (a full disk among them: DiskFull) leaves no half-built base behind
    with store.cleaned_up(tmp, out, "the base is built again"):
        models.build_tiny(
            cfg.model.tiny,
            tokenizer_corpus(transcripts),
            tmp,
            seed=cfg.seed,
            tokenizer=models.TINY[cfg.model.name_or_path],
        )
        model, tokenizer = models.load(tmp)
        summary = sft(model, tokenizer, transcripts, cfg, log=store.Records(tmp / "sft_log.jsonl"))
        check_complete(cfg, summary, tmp)
        model.save_pretrained(tmp)
        (tmp / "recipe.json").write_text(json.dumps(spec, indent=2, sort_keys=True))
        (tmp / "sft_summary.json").write_text(json.dumps(summary, indent=2))
    store.release(tmp)  # the SFT log's folder (Records claims it), now renamed
    tmp.rename(out)
    if cache is not None:
        _copy_atomically(out, cache / out.name)
    return out


def _copy_atomically(src: Path, dst: Path) -> None:
    """Copy a built base to `dst` under a temporary name, then rename it; another process that got there first
    wins (the same recipe built the same base)."""
    tmp = dst.with_name(f"{dst.name}.copy-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    try:
        tmp.rename(dst)
    except OSError:
        if not (dst / "sft_summary.json").exists():
            raise
        shutil.rmtree(tmp)
