"""The comparisons every analysis makes: the base, the sharpened base, and the RL models of each seed.

An RL model that only removed the base's sampling noise would also look better than the base at single steps,
after errors and at every budget. The **sharpened base** tells that apart: the same base model sampled at a lower
temperature, chosen so that its full-budget success on training maps comes closest to the RL model's (greedy
decoding counts as temperature 0). Where RL beats the base but not the sharpened base, the data cannot tell RL's
gain from sharpening; where it beats both, RL learned something sharpening does not give.

The sharpened base is decoded at its low temperature while RL is sampled at temperature 1, so "RL beats the
sharpened base" would also measure RL's own leftover sampling noise. The **symmetric control** removes that: every
RL seed decoded as the sharpened base is (the same model at the sharpened base's temperature, `grpo-s<k>-sharp`),
compared with the sharpened base under the same rule and temperature.

`agents(cfg)` is the roster the notebooks evaluate: `base`, `sharp`, `grpo-s<k>` / `budgetmix-s<k>` and their
sharpened twins `grpo-s<k>-sharp` / `budgetmix-s<k>-sharp` for each RL seed k, as `helpers.agents.Agent`s: nothing is loaded until an analysis opens one, on the profile's backend and
in `model.dtype`, one at a time.

Seeds are replicates only if nothing is shared between them: a base-side sample (the base's and the sharpened
base's rollouts, pools of states drawn from base trajectories, evaluation streams) drawn once for all RL seeds
makes every seed difference d_k share its noise, and intervals over seeds too narrow. `by_seed(roster)` gives each
RL seed k its own comparison group: the base and the sharpened base under per-seed names (`base-s<k>`,
`sharp-s<k>`) beside that seed's RL models, each group evaluated on draws seeded by `stream(seed, k)`; GRPO's and
BudgetMix's seed k are in the same group (common random numbers within a pair). The chosen temperature and the success of every candidate are recorded (`results/<profile>/controls/`,
or `results/<profile>/<env>/controls/` in a per-environment series).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np

from helpers import base_model, store, train
from helpers.agents import Agent, opened
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import Policy, Sampling, Tempered
from helpers.rollout import rollout

MODE_NAMES = {"full": "grpo", "budgetmix": "budgetmix"}
SHARP = "-sharp"  # the suffix of an RL model decoded at the sharpened base's temperature
BASE_SIDE = ("base", "sharp")


def rl_name(mode: str, seed: int) -> str:
    """The roster name of the RL model of `mode` and RL seed `seed`, e.g. `grpo-s1`."""
    return f"{MODE_NAMES[mode]}-s{seed}"


def sharp_name(name: str) -> str:
    """The roster name of RL model `name` decoded as the sharpened base is: `grpo-s1` -> `grpo-s1-sharp`."""
    return f"{name}{SHARP}"


def rl_seed_of(name: str) -> int | None:
    """The RL seed a roster name belongs to (`grpo-s1`, `grpo-s1-sharp`, `base-s1` -> 1), None for `base`/`sharp`."""
    m = re.fullmatch(r"[\w+.@]+?-s(\d+)(?:-sharp)?", name)
    return int(m.group(1)) if m else None


def stream(seed: int, rl_seed: int) -> int:
    """The seed of RL seed `rl_seed`'s own draws in an analysis seeded by `seed` (its base-side rollouts, pools and
    evaluation streams): independent between RL seeds, shared by GRPO's and BudgetMix's seed `rl_seed`."""
    return int.from_bytes(hashlib.sha256(f"{seed}|rl-seed {rl_seed}".encode()).digest()[:4], "little")


def _success(policy: Policy, cfg: Config, tasks, seed: int) -> float:
    trajs = rollout(
        policy,
        cfg.env.name,
        tasks,
        [t.t_max for t in tasks],
        cfg.eval.n_samples,
        Sampling.from_config(cfg.sampling),
        seed=seed,
        step_quality=False,
    )
    return float(np.mean([t.success for t in trajs]))


def sharpened(cfg: Config) -> dict:
    """Choose the sharpened base's temperature (computed once per recipe, then read back).

    Target: the mean full-budget success of the GRPO models (every RL seed) on `eval.sharpen_tasks` training
    maps; candidates: `eval.sharpen_temperatures`, the base sampled at each on the same maps with the same seed.
    Returns {"temperature", "target", "success": {temperature: success}, "rl_success": {name: success}}.
    """
    rl = {rl_name("full", s): train.trained_model(cfg, "full", s) for s in cfg.train.seeds}
    recipe = {
        "base": base_model.identity(cfg),
        "rl": sorted(map(store.portable, rl.values())),
        "eval": [cfg.eval.sharpen_temperatures, cfg.eval.sharpen_tasks, cfg.eval.n_samples],
        "sampling": [cfg.sampling.top_p, cfg.sampling.max_new_tokens],
        "seed": cfg.seed,
    }
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
    out = {
        "temperature": chosen,
        "target": target,
        "success": {str(k): v for k, v in success.items()},
        "rl_success": rl_success,
        "n_tasks": len(tasks),
        "n_samples": cfg.eval.n_samples,
        "recipe": recipe,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_atomic(path, json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out


def agents(
    cfg: Config, modes: tuple[str, ...] = ("full", "budgetmix"), sharp: bool = True, symmetric: bool = True
) -> dict[str, Agent]:
    """The roster, not loaded: base, the sharpened base (if `sharp`), the RL model of every mode and RL seed and,
    with `symmetric` (and `sharp`), each RL model decoded as the sharpened base is (`sharp_name`: the same model at
    the sharpened base's temperature)."""
    base_path: Path = base_model.path_of(cfg)
    out = {"base": Agent("base", base_path, cfg)}
    temperature = sharpened(cfg)["temperature"] if sharp else None
    if sharp:
        out["sharp"] = Agent("sharp", base_path, cfg, temperature=temperature)
    for mode in modes:
        for s in cfg.train.seeds:
            name = rl_name(mode, s)
            out[name] = Agent(name, train.trained_model(cfg, mode, s), cfg)
    if sharp and symmetric:
        for mode in modes:
            for s in cfg.train.seeds:
                name = rl_name(mode, s)
                out[sharp_name(name)] = Agent(sharp_name(name), out[name].path, cfg, temperature=temperature)
    return out


def by_seed(roster: dict[str, Agent]) -> dict[int, dict[str, Agent]]:
    """Each RL seed's comparison group (module docstring): {k: {`base-s<k>`, `sharp-s<k>` (the base-side agents
    renamed, so each group's records, policy streams and files are its own), and every RL model of seed k}}."""
    seeds = sorted({k for n in roster if (k := rl_seed_of(n)) is not None})
    out: dict[int, dict[str, Agent]] = {}
    for k in seeds:
        group = {
            f"{n}-s{k}": dataclasses.replace(roster[n], name=f"{n}-s{k}") for n in BASE_SIDE if n in roster
        }
        out[k] = group | {n: a for n, a in roster.items() if rl_seed_of(n) == k}
    return out


def seeds_of(names, method: str) -> list[str]:
    """The roster names of one method in seed order: `grpo`, `budgetmix` (`grpo-s<k>`), their sharpened twins
    `grpo-sharp`, `budgetmix-sharp` (`grpo-s<k>-sharp`), and `base`, `sharp` where evaluated per seed
    (`base-s<k>`)."""
    stem, sharp = (method[: -len(SHARP)], SHARP) if method.endswith(SHARP) else (method, "")
    pattern = re.compile(rf"{re.escape(stem)}-s(\d+){re.escape(sharp)}")
    found = [(int(m.group(1)), n) for n in names if (m := pattern.fullmatch(n))]
    return [n for _, n in sorted(found)]


RL_METHODS = ("grpo", "budgetmix")


def methods(names) -> dict[str, list[str]]:
    """The methods the notebooks compare and the roster names of each: the base, the sharpened base (per RL seed
    where `by_seed` named them so), GRPO's and BudgetMix's RL seeds and their sharpened twins (`grpo-sharp`,
    `budgetmix-sharp`, where the roster has them); a method's number is the mean over its names."""
    names = list(names)
    out = {m: seeds_of(names, m) or ([m] if m in names else []) for m in BASE_SIDE}
    out |= {m: seeds_of(names, m) for m in RL_METHODS}
    out |= {f"{m}{SHARP}": seeds_of(names, f"{m}{SHARP}") for m in RL_METHODS}
    return {m: ns for m, ns in out.items() if ns or m in RL_METHODS}
