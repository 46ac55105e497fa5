"""The comparisons every analysis makes: the base, the sharpened base, and the RL models of each seed.

An RL model that only removed the base's sampling noise would also look better than the base at single steps,
after errors and at every budget. The **sharpened base** tells that apart: the same base model sampled at a lower
temperature, chosen so that its full-budget success on training maps comes closest to the RL model's (greedy
decoding counts as temperature 0). Where RL beats the base but not the sharpened base, the data cannot tell RL's
gain from sharpening; where it beats both, RL learned something sharpening does not give.

`agents(cfg)` is the roster the notebooks evaluate: `base`, `sharp`, and `grpo-s<k>` / `budgetmix-s<k>` for each
RL seed k, as `helpers.agents.Agent`s: nothing is loaded until an analysis opens one, on the profile's backend and
in `model.dtype`, one at a time. The chosen temperature and the success of every candidate are recorded (`results/<profile>/controls/`,
or `results/<profile>/<env>/controls/` in a per-environment series).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from helpers import base_model, store, train
from helpers.agents import Agent, opened
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import Policy, Sampling, Tempered
from helpers.rollout import rollout

MODE_NAMES = {"full": "grpo", "budgetmix": "budgetmix"}


def rl_name(mode: str, seed: int) -> str:
    """The roster name of the RL model of `mode` and RL seed `seed`, e.g. `grpo-s1`."""
    return f"{MODE_NAMES[mode]}-s{seed}"


def _success(policy: Policy, cfg: Config, tasks, seed: int) -> float:
    trajs = rollout(policy, cfg.env.name, tasks, [t.t_max for t in tasks], cfg.eval.n_samples,
                    Sampling.from_config(cfg.sampling), seed=seed, step_quality=False)  # fmt: skip
    return float(np.mean([t.success for t in trajs]))


def sharpened(cfg: Config) -> dict:
    """Choose the sharpened base's temperature (computed once per recipe, then read back).

    Target: the mean full-budget success of the GRPO models (every RL seed) on `eval.sharpen_tasks` training
    maps; candidates: `eval.sharpen_temperatures`, the base sampled at each on the same maps with the same seed.
    Returns {"temperature", "target", "success": {temperature: success}, "rl_success": {name: success}}.
    """
    rl = {rl_name("full", s): train.trained_model(cfg, "full", s) for s in cfg.train.seeds}
    recipe = {"base": base_model.identity(cfg), "rl": sorted(map(store.portable, rl.values())),
              "eval": [cfg.eval.sharpen_temperatures, cfg.eval.sharpen_tasks, cfg.eval.n_samples],
              "sampling": [cfg.sampling.top_p, cfg.sampling.max_new_tokens], "seed": cfg.seed}  # fmt: skip
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    path = store.profile_dir(cfg.results_name) / "controls" / f"sharpened-{digest}.json"
    if path.exists():
        return json.loads(path.read_text())
    tasks = load_tasks(cfg.env.name, "train", n=cfg.eval.sharpen_tasks, seed=cfg.seed + 71, **settings(cfg))
    seed = cfg.seed + 73
    rl_success = {}
    for name, p in rl.items():  # one model at a time
        with opened(Agent(name, p, cfg)) as policy:
            rl_success[name] = _success(policy, cfg, tasks, seed)
    target = float(np.mean(list(rl_success.values())))
    with opened(Agent("base", base_model.path_of(cfg), cfg)) as base:
        success = {
            float(T): _success(Tempered(base, T), cfg, tasks, seed) for T in cfg.eval.sharpen_temperatures
        }
    chosen = min(success, key=lambda T: (abs(success[T] - target), -T))  # ties: the higher temperature
    out = {"temperature": chosen, "target": target, "success": {str(k): v for k, v in success.items()},
           "rl_success": rl_success, "n_tasks": len(tasks), "n_samples": cfg.eval.n_samples,
           "recipe": recipe}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_atomic(path, json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out


def agents(
    cfg: Config, modes: tuple[str, ...] = ("full", "budgetmix"), sharp: bool = True
) -> dict[str, Agent]:
    """The roster, not loaded: base, the sharpened base (if `sharp`), and the RL model of every mode and RL seed."""
    base_path: Path = base_model.path_of(cfg)
    out = {"base": Agent("base", base_path, cfg)}
    if sharp:
        out["sharp"] = Agent("sharp", base_path, cfg, temperature=sharpened(cfg)["temperature"])
    for mode in modes:
        for s in cfg.train.seeds:
            name = rl_name(mode, s)
            out[name] = Agent(name, train.trained_model(cfg, mode, s), cfg)
    return out


def seeds_of(names, method: str) -> list[str]:
    """The roster names of one method (`grpo`, `budgetmix`), in seed order."""
    return sorted((n for n in names if n.startswith(f"{method}-s")), key=lambda n: int(n.rsplit("-s", 1)[1]))


def methods(names) -> dict[str, list[str]]:
    """The methods the notebooks compare and the roster names of each: the base, the sharpened base, and GRPO's and
    BudgetMix's RL seeds (a method's number is the mean over its names)."""
    return {"base": ["base"], "sharp": ["sharp"], **{m: seeds_of(names, m) for m in ("grpo", "budgetmix")}}
