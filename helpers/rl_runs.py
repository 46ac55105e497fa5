"""An RL run on disk: its recipe, its folder, checkpoints, snapshots, the final model, the metrics log, resumption,
and the R_single probe pool every run of a profile shares.

A run's folder is named by a hash of its recipe (`rl_recipe`: base, budget mode, RL seed, training and sampling
settings), so a change of any of them trains anew and committed models are found again by the same recipe. A GRPO
run leaves the other estimators' knobs out of its recipe (`PROCESS_KEYS`), so its folder is what it was before
they existed. Every file is written atomically (a temporary file renamed into place), so a run killed at any
moment resumes to exactly the result of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import torch

from helpers import base_model, models, probing, process, store
from helpers.config import Config
from helpers.envs import load_tasks, settings, step_oracle
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

# Keys that decide how runs are laid out on the machine, not what they compute.
RUN_LAYOUT_KEYS = ("seeds", "parallel_runs", "save_steps")
# Knobs of the estimators other than GRPO: not part of a GRPO run's recipe.
PROCESS_KEYS = (
    "algorithm",
    "gigpo_step_weight",
    "gigpo_gamma",
    "gigpo_mode",
    "gigpo_episode_over_steps",
    "gae_gamma",
    "gae_lam",
    "cliprange_value",
    "vf_coef",
    "critic_lr",
    "critic_warmup",
    "oracle_weight",
    "oracle_corruption",
)


# ------------------------------------------------------------------------------------------- recipes, folders


def recipe_dir(cfg: Config, prefix: str, recipe: dict) -> Path:
    """`<models dir>/<prefix>-<first 10 hex digits of the recipe's sha256>`."""
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return store.models_dir(cfg.profile) / f"{prefix}-{digest}"


def rl_recipe(cfg: Config, mode: str, seed: int | None = None) -> dict:
    """Everything that determines an RL run: base, budget mode, RL seed, training and sampling settings.

    A GRPO run leaves out the knobs of the other estimators (`PROCESS_KEYS`), so its recipe, and with it its folder
    and everything cached under it, is what it was before those estimators existed."""
    return {
        "version": base_model.BASE_RECIPE_VERSION,
        "base": base_model.identity(cfg),
        "mode": mode,
        "rl_seed": run_seed(cfg, seed),
        "train": train_recipe(cfg),
        "sampling": dataclasses.asdict(cfg.sampling),
        "env": cfg.env.name,
        "env_settings": settings(cfg),
        "seed": cfg.seed,
    }


def train_recipe(cfg: Config) -> dict:
    """The `train` settings that determine what an RL run computes."""
    legacy = process.estimator(cfg.train.algorithm).legacy_layout
    skip = RUN_LAYOUT_KEYS + (PROCESS_KEYS if legacy else ())
    return {k: v for k, v in dataclasses.asdict(cfg.train).items() if k not in skip}


def run_seed(cfg: Config, seed: int | None) -> int:
    """The RL seed of a run: `seed`, or the profile's first `train.seeds`."""
    return int(cfg.train.seeds[0] if seed is None else seed)


def run_label(cfg: Config, mode: str, sep: str = " ") -> str:
    """How a run is named in progress bars: the budget mode, after the estimator unless it is GRPO."""
    algo = cfg.train.algorithm
    return mode if process.estimator(algo).legacy_layout else f"{algo}{sep}{mode}"


def progress_label(cfg: Config, mode: str, seed: int | None = None) -> str:
    """How a run is named in its progress bar: `RL oracle_q (oracle corrupted at 0.5) full, seed 0`. Unlike
    `run_label` (part of the run's folder name, which must not change) it tells apart oracle-Q runs that differ
    only in the oracle's corruption level."""
    level = cfg.train.oracle_corruption if cfg.train.algorithm == "oracle_q" else 0.0
    name = run_label(cfg, mode) + (f" (oracle corrupted at {level:g})" if level else "")
    return f"RL {name}, seed {run_seed(cfg, seed)}"


def rl_dir(cfg: Config, mode: str, seed: int | None = None) -> Path:
    """Where the (`mode`, RL `seed`) run of this profile keeps its checkpoints, metrics and final model (a run of
    an estimator other than GRPO has it in its folder's name: `gigpo-budgetmix-s0-<hash>`)."""
    prefix = f"{run_label(cfg, mode, '-')}-s{run_seed(cfg, seed)}"
    return recipe_dir(cfg, prefix, rl_recipe(cfg, mode, seed))


def trained_model(cfg: Config, mode: str, seed: int | None = None, step: int | None = None) -> Path:
    """The final model of a finished RL run, or with `step` < train.steps the policy it saved after that step
    (`train.save_steps`); an error says which notebook trains it."""
    out = rl_dir(cfg, mode, seed)
    final = out / "final" if step is None or step >= cfg.train.steps else snapshot_dir(out, step)
    if not is_complete(final):
        which = process.estimator(cfg.train.algorithm).notebook
        at = "" if step is None or step >= cfg.train.steps else f" saved after step {step} (train.save_steps)"
        raise FileNotFoundError(
            f"no trained {cfg.train.algorithm} {mode} model{at} (RL seed {run_seed(cfg, seed)}) for profile "
            f"{cfg.profile!r}: run notebook {which} first"
        )
    return final


def snapshot_dir(out: Path, step: int) -> Path:
    """Where a run saves its policy after `step` (one of `train.save_steps`)."""
    return out / f"step-{step:06d}"


def is_complete(final: Path) -> bool:
    """A final model counts only once its folder was renamed into place, which happens after every file of it
    was written (`save_final`), so a run killed while saving never looks finished."""
    return (final / "model.safetensors").exists() and (final / "tokenizer_config.json").exists()


def read_metrics(cfg: Config, mode: str, seed: int | None = None) -> list[dict]:
    """The per-step metrics of an RL run."""
    return store.Records(rl_dir(cfg, mode, seed) / "metrics.jsonl").read(require=("step",))


# ----------------------------------------------------------------------------------- checkpoints and resuming


def save_checkpoint(out: Path, step: int, model, opt, critic=None, critic_opt=None) -> None:
    """Model and optimiser (and PPO's critic with its optimiser) after `step`; the last two checkpoints are kept."""
    extra = {} if critic is None else {"critic": critic.state_dict(), "critic_optim": critic_opt.state_dict()}
    path = out / f"checkpoint-{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    before = latest_checkpoint(out)
    then = f"the run resumes from {before.name}" if before else "the run starts again from its base"
    # through a Python file, so a full disk is an OSError with its errno (torch's own writer says basic_ios::clear)
    with store.cleaned_up(tmp, path, then), tmp.open("wb") as f:
        torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict(), **extra}, f)
        f.flush()
        os.fsync(f.fileno())
    if store.crash_point("checkpoint"):  # kill test: die with the checkpoint written but not yet in place
        store.crash()
    tmp.replace(path)
    for old in sorted(out.glob("checkpoint-*.pt"))[:-2]:  # keep the last two
        old.unlink()


def latest_checkpoint(out: Path) -> Path | None:
    """The run's newest checkpoint, or None."""
    found = sorted(out.glob("checkpoint-*.pt"))
    return found[-1] if found else None


def resume(out: Path, device: str, model, opt, critic=None, critic_opt=None) -> int:
    """Load the run's newest checkpoint into the model, optimiser (and critic); returns its step (0: none)."""
    if (ckpt := latest_checkpoint(out)) is None:
        return 0
    state = torch.load(ckpt, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    if critic is not None:
        critic.load_state_dict(state["critic"])
        critic_opt.load_state_dict(state["critic_optim"])
    return int(state["step"])


def save_final(final: Path, model, tok) -> None:
    """Write the final model to a temporary folder and rename it into place when every file is there."""
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    with store.cleaned_up(tmp, final, "the run resumes from its last checkpoint"):
        model.save_pretrained(tmp)
        if store.crash_point("final-save"):  # kill test: die with the final model half written
            store.crash()
        tok.save_pretrained(tmp)
    if final.exists():  # a folder left by an older, non-atomic save
        shutil.rmtree(final)
    tmp.rename(final)


def resume_metrics(metrics: store.Records, start: int) -> None:
    """Keep exactly one row per step up to the checkpoint `start` (a later row is recomputed after resuming).

    The kept rows are written to a temporary file that replaces the log in one rename, so a kill at any moment
    leaves either the old log or the new one, never a log missing rows.
    """
    rows: dict[int, dict] = {}
    for r in metrics.read(require=("step",)):
        if r["step"] <= start:
            rows.setdefault(int(r["step"]), r)  # the first row of a step is the one the checkpoint followed
    store.Records.rewrite(metrics.path, [rows[k] for k in sorted(rows)])


# ---------------------------------------------------------------------------------------------- the probe pool


def probe_pool_path(cfg: Config) -> Path:
    """Where the profile's R_single probe pool is kept (its recipe: size, seed, environment, base)."""
    recipe = {
        "n": cfg.train.n_probe_states,
        "seed": cfg.seed,
        "env": settings(cfg),
        "base": base_model.identity(cfg),
    }
    return recipe_dir(cfg, "probe-pool", recipe).with_suffix(".jsonl")


def probe_pool(cfg: Config, policy) -> list:
    """The fixed R_single probe pool: states drawn once from base-model trajectories on training maps; empty where
    the environment has no step oracle (BFCL, InterCode-SQL: nothing could score the states)."""
    if not step_oracle(cfg.env.name)["step_oracle"]:
        return []
    env_cfg = settings(cfg)
    path = probe_pool_path(cfg)
    records = store.Records(path)
    if len(records) == cfg.train.n_probe_states:
        return [probing.ProbeState.from_dict(d) for d in records]
    tasks = load_tasks(cfg.env.name, "train", n=cfg.train.n_probe_states, seed=cfg.seed + 17, **env_cfg)
    trajs = rollout(
        policy,
        cfg.env.name,
        tasks,
        [t.t_max for t in tasks],
        1,
        Sampling.from_config(cfg.sampling),
        seed=cfg.seed + 17,
        step_quality=False,
    )
    states = probing.sample_states(
        trajs,
        {t.task_id: t for t in tasks},
        cfg.train.n_probe_states,
        np.random.default_rng(cfg.seed + 17),
        "base",
    )
    store.Records.rewrite(path, [s.to_dict() for s in states])
    return states


def build_probe_pool(cfg: Config) -> None:
    """The probe pool of `cfg`'s runs, drawn with the base as `rl_train` draws it (nothing to do if it exists)."""
    if not step_oracle(cfg.env.name)["step_oracle"]:
        return
    if len(store.Records(probe_pool_path(cfg))) == cfg.train.n_probe_states:
        return
    model, tok = models.load(
        base_model.path_of(cfg), device=models.resolve_device(cfg.model.device), dtype=cfg.model.dtype
    )
    probe_pool(cfg, HFPolicy(model, tok, name="base"))
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
