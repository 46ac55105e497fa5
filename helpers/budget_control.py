"""The supervised positive control of notebook 02 (issue 50): can this model learn to read its budget at all?

Before asking whether BudgetMix RL teaches the agent to read the turns left, show that the model *can* read them
when it is taught directly: fine-tune the base on the budget-aware optimum's moves on doorway training maps
(`helpers.envs.doorway`), at budgets drawn from BudgetMix's candidates, with the base's own SFT
(`base_model.sft`: first single observations, then whole episodes), and measure its responsiveness on the held-out
doorway test maps with the same probe as the RL models (`budget_reading`: openings, and mid-episode swaps where
swap states are given). A control that stays near 0 would mean the number is unreadable to this model, and no RL
result could be read; one near 2 (the optimum's) means the question is RL's alone.

Why two phases: the base itself learned to play only after a first phase on single observations (`base_model.sft`),
and an exploration earlier on 2026-12-06 (its code was not kept) found the same here, whole episodes alone or
single observations alone leaving responsiveness near or below 1 after 300 steps. With both phases the committed run
reaches 1.999 at the openings in 62 s on 2 cores (notebook 02's metrics, `doorway.control`). Recorded in the
notebook's folder by its recipe, never saved as a model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time

import numpy as np

from helpers import base_model, budget, budget_probe, budget_reading, models, store
from helpers.config import Config
from helpers.envs import Task, doorway, load_tasks, make, play, settings
from helpers.envs import frozenlake as fl
from helpers.policy import HFPolicy
from helpers.rollout import ChatFormat


def doorway_tasks(cfg: Config, split: str) -> list[Task]:
    """The doorway tasks of a split (all of them)."""
    return [
        t
        for t in load_tasks("frozenlake", split, seed=cfg.seed, **settings(cfg, "frozenlake"))
        if doorway.family(t) == doorway.FAMILY
    ]


def demonstrations(cfg: Config, n: int, seed: int) -> list[list[dict]]:
    """`n` episodes of the budget-aware optimum (Q*-greedy, ties at random) on doorway training maps, each at a
    budget drawn from BudgetMix's candidates."""
    tasks = doorway_tasks(cfg, "train")
    if not tasks:
        raise ValueError(
            "budget control: the profile has no doorway tasks (env.frozenlake.doorway_share is 0)"
        )
    rng = np.random.default_rng([seed, 50])
    out = []
    for i in range(n):
        task = tasks[int(rng.integers(len(tasks)))]
        b = budget.sample_budgets(task.t_max, 1, rng)[0]
        out.append(
            play(
                make("frozenlake"),
                task,
                b,
                fl.scripted_player(0.0, seed * 1_000_003 + i),
                seed=seed * 1_000_003 + i,
            )[0]
        )
    return out


def recipe(cfg: Config) -> dict:
    """What decides the control's result: the base, its knobs and the doorway settings."""
    p = cfg.probing
    return {
        "base": base_model.identity(cfg),
        "demos": p.control_demos,
        "obs_steps": p.control_obs_steps,
        "steps": p.control_steps,
        "lr": p.control_lr,
        "batch_size": p.control_batch_size,
        "frozenlake": settings(cfg, "frozenlake"),
        "seed": cfg.seed,
        "version": 1,
    }


def sft_config(cfg: Config) -> Config:
    """The profile with its `sft` section set to the control's recipe (observations, then whole episodes)."""
    p = cfg.probing
    sft = dataclasses.replace(
        cfg.sft,
        obs_steps=p.control_obs_steps,
        max_steps=p.control_steps,
        lr=p.control_lr,
        batch_size=p.control_batch_size,
        obs_batch_size=p.control_batch_size * 2,
        context="episode",
        warmup_steps=min(cfg.sft.warmup_steps, 20),
        budget_line_loss=False,
    )
    return dataclasses.replace(cfg, sft=sft)


def run(cfg: Config, out: store.Run, swaps: list | None = None) -> dict:
    """Fine-tune a copy of the base on the optimum's doorway moves and probe it against the base on the doorway test
    maps (openings; and the mid-episode `swaps` where given). Recorded in `doorway_control.json` under its recipe:
    a rerun reads it."""
    path = out.path("doorway_control.json")
    key = hashlib.sha256(json.dumps(recipe(cfg), sort_keys=True, default=str).encode()).hexdigest()[:16]
    if path.exists():
        stored = json.loads(path.read_text())
        if stored.get("recipe") == key and (swaps is None) == (stored.get("swap") is None):
            return stored
    test = doorway_tasks(cfg, "test")
    transcripts = demonstrations(cfg, cfg.probing.control_demos, cfg.seed)
    t0 = time.time()
    with HFPolicy.from_pretrained(base_model.path_of(cfg), name="base") as policy:
        chat = ChatFormat(policy.tokenizer, models.chat_kwargs(policy.tokenizer))
        base_open = budget_reading.opening_table(test, budget_reading.opening_probs(policy, test, chat))
        summary = base_model.sft(policy.model, policy.tokenizer, transcripts, sft_config(cfg))
        policy.reset_cache()
        opened = budget_reading.opening_table(test, budget_reading.opening_probs(policy, test, chat))
        swap = None
        if swaps:
            table = budget_probe.probe(policy, swaps, chat)
            swap = budget_reading.interval(table["responsiveness"].dropna(), seed=cfg.seed)
    boot = (cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
    result = {
        "recipe": key,
        "steps": int(summary["steps"]),
        "phases": summary["phases"],
        "seconds": time.time() - t0,
        "n_demos": len(transcripts),
        "n_maps": len(test),
        "openings": budget_reading.interval(opened["responsiveness"], *boot),
        "swap": swap,
        "base_openings": float(base_open["responsiveness"].mean()),
        "target": cfg.probing.control_target,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, path)
    return result
