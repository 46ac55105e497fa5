"""The RL loop: GRPO, GiGPO, PPO or the oracle-Q process reward, at the full budget or with BudgetMix, from the
profile's base, with checkpoints and metrics.

The base comes from `helpers.base_model` (the tiny SFT model on the cpu tier, Qwen3 on a GPU box); the advantage,
KL, PPO-clip, GAE and value-loss formulas from `helpers.algos`; what each estimator gives each token from
`helpers.process`. The budget mode (`full` or `budgetmix`) and the estimator (`train.algorithm`) are independent:
BudgetMix only changes the budget each task group is given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from helpers import base_model, models, store
from helpers import budget as budget_lib
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.policy import pad_batch, shared_prefix_len, token_logprobs
from helpers.progress import bar

# --------------------------------------------------------------------------------- RL: GRPO and BudgetMix
#
# One step: sample `tasks_per_step` training tasks; give each task group one budget (T_max in `full` mode, a
# uniform draw from the BudgetMix candidates in `budgetmix` mode; nothing else differs); roll out G trajectories
# per task with the current policy; reward 1 on success, 0 otherwise (and 0 whenever the budget ran out before
# the episode ended, which matters for environments that would score an unfinished episode); advantages (GRPO
# within each task group, or GiGPO / PPO's GAE / GRPO plus the oracle's process term, `train.algorithm`);
# PPO-clip + low_var_kl to the frozen base over generated tokens only, token-mean; AdamW (PPO's critic on its own
# AdamW). Environment tokens never enter the loss: the mask is the rollout's generated-token mask.

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


# Keys that decide how runs are laid out on the machine, not what they compute.
RUN_LAYOUT_KEYS = ("seeds", "parallel_runs", "save_steps")
# Knobs of the estimators other than GRPO: not part of a GRPO run's recipe.
PROCESS_KEYS = ("algorithm", "gigpo_step_weight", "gigpo_gamma", "gigpo_mode", "gigpo_episode_over_steps",
                "gae_gamma", "gae_lam", "cliprange_value", "vf_coef", "critic_lr", "critic_warmup",
                "oracle_weight", "oracle_corruption")  # fmt: skip


def train_recipe(cfg: Config) -> dict:
    """The `train` settings that determine what an RL run computes."""
    skip = RUN_LAYOUT_KEYS + (PROCESS_KEYS if cfg.train.algorithm == "grpo" else ())
    return {k: v for k, v in dataclasses.asdict(cfg.train).items() if k not in skip}


def run_seed(cfg: Config, seed: int | None) -> int:
    """The RL seed of a run: `seed`, or the profile's first `train.seeds`."""
    return int(cfg.train.seeds[0] if seed is None else seed)


def rl_dir(cfg: Config, mode: str, seed: int | None = None) -> Path:
    """Where the (`mode`, RL `seed`) run of this profile keeps its checkpoints, metrics and final model (a run of
    an estimator other than GRPO has it in its folder's name: `gigpo-budgetmix-s0-<hash>`)."""
    algo = cfg.train.algorithm
    prefix = f"{mode}-s{run_seed(cfg, seed)}" if algo == "grpo" else f"{algo}-{mode}-s{run_seed(cfg, seed)}"
    return _recipe_dir(cfg, prefix, rl_recipe(cfg, mode, seed))


def trained_model(cfg: Config, mode: str, seed: int | None = None, step: int | None = None) -> Path:
    """The final model of a finished RL run, or with `step` < train.steps the policy it saved after that step
    (`train.save_steps`); an error says which notebook trains it."""
    out = rl_dir(cfg, mode, seed)
    final = out / "final" if step is None or step >= cfg.train.steps else snapshot_dir(out, step)
    if not _complete(final):
        which = "01_grpo_training" if cfg.train.algorithm == "grpo" else "07_process_supervision"
        at = "" if step is None or step >= cfg.train.steps else f" saved after step {step} (train.save_steps)"
        raise FileNotFoundError(
            f"no trained {cfg.train.algorithm} {mode} model{at} (RL seed {run_seed(cfg, seed)}) for profile "
            f"{cfg.profile!r}: run notebook {which} first"
        )
    return final


def snapshot_dir(out: Path, step: int) -> Path:
    """Where a run saves its policy after `step` (one of `train.save_steps`)."""
    return out / f"step-{step:06d}"


def _complete(final: Path) -> bool:
    """A final model counts only once its folder was renamed into place, which happens after every file of it
    was written (`rl_train`), so a run killed while saving never looks finished."""
    return (final / "model.safetensors").exists() and (final / "tokenizer_config.json").exists()


def probe_pool_path(cfg: Config) -> Path:
    """Where the profile's R_single probe pool is kept (its recipe: size, seed, environment, base)."""
    recipe = {
        "n": cfg.train.n_probe_states,
        "seed": cfg.seed,
        "env": settings(cfg),
        "base": base_model.identity(cfg),
    }
    return _recipe_dir(cfg, "probe-pool", recipe).with_suffix(".jsonl")


def probe_pool(cfg: Config, policy) -> list:
    """The fixed R_single probe pool: states drawn once from base-model trajectories on training maps; empty where
    the environment has no step oracle (BFCL, InterCode-SQL: nothing could score the states)."""
    from helpers import probing
    from helpers.envs import step_oracle
    from helpers.policy import Sampling
    from helpers.rollout import rollout

    if not step_oracle(cfg.env.name)["step_oracle"]:
        return []
    env_cfg = settings(cfg)
    path = probe_pool_path(cfg)
    records = store.Records(path)
    if len(records) == cfg.train.n_probe_states:
        return [probing.ProbeState.from_dict(d) for d in records]
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
    store.Records.rewrite(path, [s.to_dict() for s in states])
    return states


def _padded(trajs, rows, dev) -> tuple[torch.Tensor, ...]:
    """Token ids, attention mask, generated-token mask and sampling log-probs of `rows`, right-padded to the
    longest of them only (a micro-batch of similar lengths wastes little on padding)."""
    sub = [trajs[i] for i in rows]
    ids, attn, gen = pad_batch([t.token_ids for t in sub], [t.gen_mask for t in sub], 0)
    old = torch.zeros_like(gen)
    for j, t in enumerate(sub):
        old[j, : len(t.logprobs)] = torch.tensor(t.logprobs)
    return ids.to(dev), attn.to(dev), gen.to(dev), old.to(dev)


def _shared(trajs, rows) -> int:
    """Tokens every trajectory of `rows` starts with (the environment's system prompt): run once per batch."""
    return shared_prefix_len([trajs[i].token_ids[: trajs[i].prompt_len] for i in rows])


def _rows(per_traj: list[torch.Tensor], rows, lengths: np.ndarray, width: int, dev) -> torch.Tensor:
    """Per-trajectory token vectors (length len(token_ids) - 1) of `rows`, right-padded to `width`."""
    out = torch.zeros(len(rows), width)
    for j, r in enumerate(rows):
        out[j, : lengths[r] - 1] = per_traj[int(r)]
    return out.to(dev)


def token_advantages(trajs, cfg: Config, rewards: torch.Tensor, adv: torch.Tensor, tasks: dict | None = None,
                     seed: int = 0, values: list[torch.Tensor] | None = None) -> tuple[list, list | None, dict]:  # fmt: skip
    """Per-token advantages of every trajectory for the estimators other than GRPO, as vectors aligned with
    `token_logprobs` (`helpers.process` says what each estimator gives a token), PPO's returns, and statistics.

    `rewards` are the outcome rewards, `adv` GRPO's outcome advantages (the oracle-Q reward builds on them);
    `tasks` maps task ids to tasks (the oracle replays episodes), `seed` is the RL seed (it fixes the corrupted
    oracle) and `values` the critic's values of each trajectory (PPO).
    """
    from helpers import algos, process

    c = cfg.train
    stats: dict = {}
    if c.algorithm == "gigpo":
        per_turn = process.gigpo_turn_advantages(trajs, rewards.tolist(), c)
        sizes = np.array(process.step_group_sizes(trajs))
        stats = {
            "step_group_size_mean": float(sizes.mean()),
            "step_singleton_share": float(np.mean(sizes == 1)),
        }
        return (
            [process.turn_token_advantages(t, a) for t, a in zip(trajs, per_turn, strict=True)],
            None,
            stats,
        )
    if c.algorithm == "oracle_q":
        exact, reported = process.oracle_terms(trajs, tasks or {}, cfg.env.name, c.oracle_corruption, seed)
        flat = [v for row in reported for v in row]
        stats = {"process_term_mean": float(np.mean(flat)), **process.agreement(exact, reported)}
        out = [process.turn_token_advantages(t, float(adv[i]) + c.oracle_weight * torch.tensor(reported[i]))
               for i, t in enumerate(trajs)]  # fmt: skip
        return out, None, stats
    if c.algorithm == "ppo":
        if values is None:
            raise ValueError("train.algorithm=ppo needs the critic's values")
        width = max(len(t.token_ids) for t in trajs) - 1
        r_tok, v_tok, m_tok = (torch.zeros(len(trajs), width) for _ in range(3))
        for i, t in enumerate(trajs):
            n = len(t.token_ids) - 1
            r_tok[i, :n] = process.outcome_token_rewards(t, float(rewards[i]))
            v_tok[i, :n] = values[i]
            m_tok[i, :n] = torch.tensor(t.gen_mask[1:], dtype=torch.float)
        a_tok, ret = algos.gae_advantages(r_tok, v_tok, m_tok, c.gae_gamma, c.gae_lam)
        lens = [len(t.token_ids) - 1 for t in trajs]
        v_var = algos.masked_var(ret - v_tok, m_tok, unbiased=False) / algos.masked_var(
            ret, m_tok, unbiased=False
        )
        stats = {"value_mean": float(algos.masked_mean(v_tok, m_tok)),
                 "explained_variance": float(1 - v_var) if torch.isfinite(v_var) else None}  # fmt: skip
        return [a_tok[i, :n] for i, n in enumerate(lens)], [ret[i, :n] for i, n in enumerate(lens)], stats
    raise ValueError(f"token_advantages: no per-token advantages for algorithm {c.algorithm!r}")


def ppo_update(model, ref_model, opt, trajs, cfg: Config, rng: np.random.Generator, critic=None, critic_opt=None,
               tasks: dict | None = None, seed: int = 0, update_actor: bool = True) -> dict:  # fmt: skip
    """Advantages (`train.algorithm`), then PPO epochs over minibatches (gradient accumulation over micro-batches).

    Within a minibatch the trajectories are sorted by length before they are cut into micro-batches, and each
    micro-batch is padded only to its own longest trajectory: the gradient of a minibatch is a sum over its
    tokens, so the grouping changes nothing but the padding computed.

    GRPO gives each trajectory one advantage (broadcast over its generated tokens); the other estimators give
    every token its own (`token_advantages`). PPO also needs `critic` and `critic_opt`: the critic's values of the
    rollout feed GAE, and the critic takes one clipped-value-loss step per minibatch, on the same minibatches as the
    actor (verl's critic update); `update_actor=False` (critic warm-up) updates the critic only. `tasks` and `seed`
    are for the oracle-Q reward (see `token_advantages`).
    """
    from helpers import algos

    c = cfg.train
    rewards = torch.tensor([rl_reward(t) for t in trajs], dtype=torch.float)
    adv = algos.grpo_advantages(rewards, [t.group for t in trajs], eps=1e-6, norm_by_std=c.norm_by_std)
    dev = next(model.parameters()).device
    adv = adv.to(dev)
    lengths = np.array([len(t.token_ids) for t in trajs])
    by_length = np.argsort(lengths, kind="stable")
    ref: dict[int, torch.Tensor] = {}  # reference log-probs per trajectory, from the frozen base
    with torch.no_grad():
        for start in range(0, len(trajs), c.micro_batch_size) if update_actor else ():
            rows = by_length[start : start + c.micro_batch_size]
            ids, attn, _, _ = _padded(trajs, rows, dev)
            lp = token_logprobs(ref_model, ids, attn, shared_prefix=_shared(trajs, rows))[0]
            ref.update({int(r): lp[j, : lengths[r] - 1] for j, r in enumerate(rows)})

    per_token, returns, values, extra = None, None, None, {}
    if c.algorithm == "ppo":
        values = _critic_values(critic, trajs, by_length, lengths, c.micro_batch_size, cfg.model.dtype, dev)
    if c.algorithm != "grpo":
        per_token, returns, extra = token_advantages(trajs, cfg, rewards, adv.cpu(), tasks, seed, values)

    model.train()
    stats: dict[str, list[float]] = {
        k: [] for k in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl", "grad_norm")
    }
    if critic is not None:
        critic.train()
        stats.update({k: [] for k in ("vf_loss", "vf_clip_frac", "critic_grad_norm")})
    for _ in range(c.ppo_epochs):
        order = rng.permutation(len(trajs))
        for start in range(0, len(trajs), c.minibatch_size):
            mini = order[start : start + c.minibatch_size]
            mini = mini[np.argsort(lengths[mini], kind="stable")]
            n_tokens = max(1, sum(sum(trajs[i].gen_mask[1:]) for i in mini))
            opt.zero_grad(set_to_none=True)
            for ms in range(0, len(mini), c.micro_batch_size) if update_actor else ():
                rows = mini[ms : ms + c.micro_batch_size]
                ids, attn, gen, old = _padded(trajs, rows, dev)
                width = ids.shape[1] - 1
                ref_lp = torch.zeros(len(rows), width, device=dev)
                for j, r in enumerate(rows):
                    ref_lp[j, : lengths[r] - 1] = ref[int(r)]
                with models.autocast(dev, cfg.model.dtype):  # float32 weights, model.dtype compute
                    logp, logits = token_logprobs(model, ids, attn, shared_prefix=_shared(trajs, rows))
                mask = gen[:, 1:]
                if per_token is None:  # GRPO: one advantage per trajectory
                    a_tok = algos.broadcast(adv[torch.as_tensor(rows, device=dev)], mask)
                else:
                    a_tok = _rows(per_token, rows, lengths, width, dev) * mask
                pg, st = algos.policy_loss(logp, old[:, 1:], a_tok, mask, clip_ratio=c.clip_ratio)
                kl = algos.agg_loss(algos.kl_penalty(logp, ref_lp, c.kl_kind), mask)
                weight = mask.sum() / n_tokens  # token-mean over the whole minibatch
                ((pg + c.kl_coef * kl) * weight).backward()
                with torch.no_grad():
                    stats["entropy"].append(algos.masked_mean(algos.entropy_from_logits(logits), mask).item())
                stats["pg_loss"].append(pg.item())
                stats["kl"].append(kl.item())
                stats["clip_frac"].append(st["clip_frac"])
                stats["approx_kl"].append(st["approx_kl"])
            if update_actor:
                stats["grad_norm"].append(
                    float(torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm))
                )
                opt.step()
            if critic is not None:
                _critic_step(
                    critic, critic_opt, trajs, mini, lengths, values, returns, n_tokens, cfg, dev, stats
                )
    model.eval()
    if critic is not None:
        critic.eval()
    out = {k: float(np.mean(v)) if v else None for k, v in stats.items()}
    if per_token is None:
        out["advantage_abs_mean"] = float(adv.abs().mean())
    else:
        gen = [torch.tensor(t.gen_mask[1:], dtype=torch.bool) for t in trajs]
        out["advantage_abs_mean"] = float(
            torch.cat([a[g].abs() for a, g in zip(per_token, gen, strict=True)]).mean()
        )
    return {**out, **extra}


def _critic_values(critic, trajs, by_length, lengths, micro: int, dtype: str, dev) -> list[torch.Tensor]:
    """The critic's values of every trajectory before the update (verl's `compute_values`), on the CPU."""
    values: list[torch.Tensor | None] = [None] * len(trajs)
    with torch.no_grad():
        for start in range(0, len(trajs), micro):
            rows = by_length[start : start + micro]
            ids, attn, _, _ = _padded(trajs, rows, dev)
            with models.autocast(dev, dtype):
                v = critic(ids, attn)
            for j, r in enumerate(rows):
                values[int(r)] = v[j, : lengths[r] - 1].float().cpu()
    return values  # type: ignore[return-value]


def _critic_step(critic, critic_opt, trajs, mini, lengths, values, returns, n_tokens, cfg: Config, dev,
                 stats: dict) -> None:  # fmt: skip
    """One optimiser step of the critic on minibatch `mini`: verl's clipped value loss, token-mean."""
    from helpers import algos

    c = cfg.train
    critic_opt.zero_grad(set_to_none=True)
    for ms in range(0, len(mini), c.micro_batch_size):
        rows = mini[ms : ms + c.micro_batch_size]
        ids, attn, gen, _ = _padded(trajs, rows, dev)
        width = ids.shape[1] - 1
        mask = gen[:, 1:]
        with models.autocast(dev, cfg.model.dtype):
            vpred = critic(ids, attn)
        loss, frac = algos.value_loss(vpred, _rows(returns, rows, lengths, width, dev),
                                      _rows(values, rows, lengths, width, dev), mask, c.cliprange_value,
                                      c.vf_coef)  # fmt: skip
        (loss * (mask.sum() / n_tokens)).backward()
        stats["vf_loss"].append(loss.item())
        stats["vf_clip_frac"].append(frac)
    stats["critic_grad_norm"].append(
        float(torch.nn.utils.clip_grad_norm_(critic.parameters(), c.max_grad_norm))
    )
    critic_opt.step()


def _save_checkpoint(out: Path, step: int, model, opt, extra: dict | None = None) -> None:
    path = out / f"checkpoint-{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict(), **(extra or {})}, tmp)
    if store.crash_point("checkpoint"):  # kill test: die with the checkpoint written but not yet in place
        store.crash()
    tmp.replace(path)
    for old in sorted(out.glob("checkpoint-*.pt"))[:-2]:  # keep the last two
        old.unlink()


def _latest_checkpoint(out: Path) -> Path | None:
    found = sorted(out.glob("checkpoint-*.pt"))
    return found[-1] if found else None


def _save_final(final: Path, model, tok) -> None:
    """Write the final model to a temporary folder and rename it into place when every file is there."""
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    if store.crash_point("final-save"):  # kill test: die with the final model half written
        store.crash()
    tok.save_pretrained(tmp)
    if final.exists():  # a folder left by an older, non-atomic save
        shutil.rmtree(final)
    tmp.rename(final)


def _resume_metrics(metrics: store.Records, start: int) -> None:
    """Keep exactly one row per step up to the checkpoint `start` (a later row is recomputed after resuming).

    The kept rows are written to a temporary file that replaces the log in one rename, so a kill at any moment
    leaves either the old log or the new one, never a log missing rows.
    """
    rows: dict[int, dict] = {}
    for r in metrics.read(require=("step",)):
        if r["step"] <= start:
            rows.setdefault(int(r["step"]), r)  # the first row of a step is the one the checkpoint followed
    store.Records.rewrite(metrics.path, [rows[k] for k in sorted(rows)])


def rl_train(cfg: Config, mode: str = "full", seed: int | None = None, max_steps: int | None = None) -> Path:
    """Train from the base with `train.algorithm` in budget mode `full` or `budgetmix`; returns the final model.

    `seed` is the RL seed (default: the first of `train.seeds`); the base is the same for every seed. Metrics of
    every step are appended to `<run dir>/metrics.jsonl`; a checkpoint is written every `train.checkpoint_every`
    steps and at the end. An interrupted run resumes from its last checkpoint with exactly one metrics row per
    step and the same final weights as an uninterrupted run; a finished run is reused as is. `max_steps` stops
    early (for tests of resumption) without writing the final model.

    Every `train.eval_every` steps the run logs R_multi (success at the full budget on fixed training maps) and
    two step-level rewards: `r_single_own`, the mean oracle quality of the actions the current policy takes on
    its own trajectories of those maps (the paper's step-level reward: it follows the states RL leads to), and
    `r_single`, the mean quality of actions the policy samples at a fixed pool of states from base trajectories
    (the same states at every step, so a change there is a change of the policy, not of where it goes).

    The estimators other than GRPO (`helpers.process`): `ppo` trains a critic beside the policy (in the checkpoints,
    so a resumed run continues it); `oracle_q` needs an environment with a step oracle (FrozenLake). After every
    step in `train.save_steps` the policy is also saved to `<run dir>/step-NNNNNN/` (`trained_model(..., step=)`).
    """
    from helpers import process
    from helpers.policy import HFPolicy, Sampling
    from helpers.policy_vllm import after_update, before_update, rollout_policy_for
    from helpers.probing import dead_states, state_quality
    from helpers.rollout import rollout, summarize

    if mode not in BUDGET_MODES:
        raise ValueError(f"budget mode must be one of {BUDGET_MODES}, got {mode!r}")
    c = cfg.train
    process.check_algorithm(c.algorithm)
    if c.algorithm == "oracle_q" and not process.has_oracle(cfg.env.name):
        raise ValueError(
            f"train.algorithm=oracle_q needs a step oracle, which {cfg.env.name!r} does not have"
        )
    rs = run_seed(cfg, seed)
    out = rl_dir(cfg, mode, seed)
    final = out / "final"
    if _complete(final):
        return final
    out.mkdir(parents=True, exist_ok=True)
    store.write_atomic(out / "recipe.json", json.dumps(rl_recipe(cfg, mode, seed), indent=2, sort_keys=True,
                                                       default=str))  # fmt: skip

    device = models.resolve_device(cfg.model.device)
    base = base_model.path_of(cfg)
    # float32 master weights (a bf16 AdamW step at lr 1e-6 changes nothing); cfg.model.dtype is the compute
    # precision of the policy's forward passes (models.autocast in ppo_update) and the frozen reference's dtype
    model, tok = models.load_trainable(base, device=device)
    ref_model, _ = models.load(base, device=device, dtype=cfg.model.dtype)
    ref_model.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
    critic = critic_opt = None
    if c.algorithm == "ppo":  # verl's critic: initialised from the base, its own optimiser
        critic = process.ValueModel(models.load_trainable(base, device=device)[0]).to(device).eval()
        critic_opt = torch.optim.AdamW(critic.parameters(), lr=c.critic_lr, weight_decay=c.weight_decay)

    def critic_state() -> dict:
        return (
            {} if critic is None else {"critic": critic.state_dict(), "critic_optim": critic_opt.state_dict()}
        )

    start = 0
    metrics = store.Records(out / "metrics.jsonl")
    if (ckpt := _latest_checkpoint(out)) is not None:
        state = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        if critic is not None:
            critic.load_state_dict(state["critic"])
            critic_opt.load_state_dict(state["critic_optim"])
        start = int(state["step"])
    _resume_metrics(metrics, start)
    # hf: the policy shares `model`; vllm: a colocated engine that is synced after every update
    policy = rollout_policy_for(cfg, model, tok, name=mode)

    env_cfg = settings(cfg)
    train_tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **env_cfg)
    task_index = {t.task_id: t for t in train_tasks} if c.algorithm == "oracle_q" else None
    monitor = load_tasks(cfg.env.name, "train", n=c.eval_tasks, seed=cfg.seed + 29, **env_cfg)
    sampling = Sampling.from_config(cfg.sampling)
    probes = probe_pool(cfg, HFPolicy(ref_model, tok, name="base"))

    probe_live = ~dead_states(probes) if probes else np.zeros(0, dtype=bool)

    def evaluate() -> dict:
        trajs = rollout(policy, cfg.env.name, monitor, [t.t_max for t in monitor], c.group_size, sampling,
                        seed=rs * 7_919 + 29, step_quality=True)  # fmt: skip
        success: dict[str, list[float]] = {t.task_id: [] for t in monitor}
        quality: dict[str, list[float]] = {t.task_id: [] for t in monitor}
        for tr in trajs:
            success[tr.task_id].append(float(tr.success))
            quality[tr.task_id] += [
                t["quality"] for t in tr.turns if t["quality"] is not None and not t["dead"]
            ]
        own = [q for qs in quality.values() for q in qs]
        per_state = np.zeros(0)
        if probes:
            q_pool = state_quality(policy, probes, c.probe_samples, Sampling(
                sampling.temperature, sampling.top_p, sampling.max_new_tokens, seed=rs * 7_919 + 31))  # fmt: skip
            per_state = np.nanmean(q_pool, axis=1)[probe_live]
        policy.reset_cache()
        return {
            "eval_success": float(np.mean([t.success for t in trajs])),
            "eval_success_by_task": [float(np.mean(v)) for v in success.values()],
            "r_single_own": float(np.mean(own)) if own else None,
            "r_single_own_by_task": [float(np.mean(v)) if v else None for v in quality.values()],
            "r_single": float(per_state.mean()) if per_state.size else None,
            "r_single_by_state": per_state.tolist(),
        }

    tag = {} if c.algorithm == "grpo" else {"algorithm": c.algorithm}  # GRPO's logs stay as they were
    if start == 0 and not len(metrics):
        metrics.append({"step": 0, "mode": mode, **tag, "rl_seed": rs, **evaluate()})
    last = c.steps if max_steps is None else min(c.steps, max_steps)
    name = mode if c.algorithm == "grpo" else f"{c.algorithm}, {mode}"
    progress = bar(range(start + 1, last + 1), desc=f"RL ({name}, seed {rs})", leave=False)
    for step in progress:
        rng = np.random.default_rng([rs, step])
        idx = rng.choice(len(train_tasks), size=min(c.tasks_per_step, len(train_tasks)), replace=False)
        tasks = [train_tasks[i] for i in idx]
        budgets = task_budgets(mode, [t.t_max for t in tasks], rng)
        t0 = time.time()
        trajs = rollout(policy, cfg.env.name, tasks, budgets, c.group_size, sampling, seed=rs * 100_003 + step,
                        step_quality=False)  # fmt: skip
        policy.reset_cache()
        t1 = time.time()
        before_update(policy)  # vllm: sleep while the trainer steps
        upd = ppo_update(model, ref_model, opt, trajs, cfg, rng, critic=critic, critic_opt=critic_opt,
                         tasks=task_index, seed=rs,
                         update_actor=c.algorithm != "ppo" or step > c.critic_warmup)  # fmt: skip
        after_update(policy, model)  # vllm: wake up and load the new weights; hf: drop the conversation cache
        t2 = time.time()
        summary = summarize(trajs)
        row = {
            "step": step, "mode": mode, **tag, "rl_seed": rs, "reward": float(np.mean([rl_reward(t) for t in trajs])),
            "success": summary["success"], "mean_turns": summary["mean_turns"],
            "invalid_rate": summary["invalid_rate"], "budget_mean": float(np.mean(budgets)), **upd,
            "rollout_tokens_per_s": summary["generated_tokens"] / max(t1 - t0, 1e-9),
            "tokens_per_s": sum(len(t.token_ids) for t in trajs) / max(t2 - t0, 1e-9),
            "rollout_s": t1 - t0, "update_s": t2 - t1,
        }  # fmt: skip
        if step % c.eval_every == 0 or step == c.steps:
            row.update(evaluate())
        metrics.append(row)
        progress.set_postfix(
            success=f"{row['success']:.2f}", kl="-" if row["kl"] is None else f"{row['kl']:.3f}"
        )
        if step in c.save_steps and step < c.steps:  # before any later checkpoint, so a resumed run has it
            _save_final(snapshot_dir(out, step), model, tok)
        if step % c.checkpoint_every == 0 or step == c.steps:
            _save_checkpoint(out, step, model, opt, critic_state())
    if last == c.steps:
        _save_final(final, model, tok)
    return final


def read_metrics(cfg: Config, mode: str, seed: int | None = None) -> list[dict]:
    """The per-step metrics of an RL run."""
    return store.Records(rl_dir(cfg, mode, seed) / "metrics.jsonl").read(require=("step",))


# ------------------------------------------------------------------------------------ several runs at once


def _run_in_worker(cfg: Config, mode: str, seed: int, threads: int) -> str:
    os.environ["KIT_WORKER"] = "1"
    torch.set_num_threads(threads)
    return str(rl_train(cfg, mode, seed))


def train_runs(cfg: Config, runs: list[tuple[str, int]], workers: int | None = None) -> dict:
    """Train every (mode, RL seed) of `runs`, `workers` at a time in separate processes (default
    `train.parallel_runs`); returns {(mode, seed): final model path}. See `train_many`."""
    paths = train_many([(cfg, m, s) for m, s in runs], workers)
    return dict(zip(runs, paths, strict=True))


def train_many(runs: list[tuple[Config, str, int]], workers: int | None = None) -> list[Path]:
    """Train every (profile, mode, RL seed) of `runs` (profiles may differ, e.g. in `train.algorithm`), `workers`
    at a time in separate processes (default: the first profile's `train.parallel_runs`); returns the final
    model paths in the order of `runs`.

    The tiny model's steps are small-matrix bound, so two runs with one thread each finish sooner on two cores
    than one after the other with two threads. Finished runs are reused; each run resumes on its own. The base
    is built first, in this process, so the workers never race to build it. Progress comes from the runs'
    metrics logs (one bar per run).
    """
    import concurrent.futures as cf
    import multiprocessing as mp

    if not runs:
        return []
    for cfg in {id(c): c for c, _, _ in runs}.values():
        base_model.path_of(cfg)
    workers = max(1, min(workers or runs[0][0].train.parallel_runs, len(runs)))
    todo = [r for r in runs if not _complete(rl_dir(*r) / "final")]
    if workers == 1 or len(todo) <= 1:
        return [rl_train(c, m, s) for c, m, s in runs]
    for cfg in {probe_pool_path(c): c for c, _, _ in todo}.values():
        _build_probe_pool(cfg)  # here, once: parallel workers would race to write the same file
    threads = max(1, (os.cpu_count() or 1) // workers)
    bars = [bar(total=c.train.steps, desc=f"RL {_label(c, m)} seed {s}", leave=False) for c, m, s in todo]
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        pending = {pool.submit(_run_in_worker, c, m, s, threads) for c, m, s in todo}
        while pending:
            done, pending = cf.wait(pending, timeout=2.0)
            for r, b in zip(todo, bars, strict=True):
                steps = max((row["step"] for row in read_metrics(*r)), default=0)
                b.update(steps - b.n)
            for f in done:
                f.result()  # a failed run raises here, naming its traceback
    for b in bars:
        b.close()
    return [rl_dir(*r) / "final" for r in runs]


def _build_probe_pool(cfg: Config) -> None:
    """The probe pool of `cfg`'s runs, drawn with the base as `rl_train` draws it (nothing to do if it exists)."""
    from helpers.envs import step_oracle
    from helpers.policy import HFPolicy

    if not step_oracle(cfg.env.name)["step_oracle"]:
        return
    if len(store.Records(probe_pool_path(cfg))) == cfg.train.n_probe_states:
        return
    model, tok = models.load(base_model.path_of(cfg), device=models.resolve_device(cfg.model.device),
                             dtype=cfg.model.dtype)  # fmt: skip
    probe_pool(cfg, HFPolicy(model, tok, name="base"))
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _label(cfg: Config, mode: str) -> str:
    return mode if cfg.train.algorithm == "grpo" else f"{cfg.train.algorithm} {mode}"


# --------------------------------------------------------------------------------- what training changed


def training_dynamics(
    runs: dict[int, list[dict]], n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> dict:
    """Start, end and change of R_multi and both step-level rewards over the RL seeds of one method.

    `runs[rl_seed]` is a run's metrics log. Per seed: R_multi (success at the full budget on the monitoring
    maps), R_single on the policy's own states (`r_single_own`) and on the fixed pool (`r_single`) at the first
    and last evaluation. Mean over seeds: the change with an interval that resamples seeds and maps (or pool
    states; `helpers.metrics.crossed_bootstrap`), so it covers training variance as well as the finite set.
    """
    from helpers.metrics import crossed_bootstrap

    names = {"R_multi": "eval_success_by_task", "R_single": "r_single_own_by_task",
             "R_single_pool": "r_single_by_state"}  # fmt: skip
    out: dict = {"per_seed": {}, "n_seeds": len(runs)}
    for metric, col in names.items():
        if any(all(r.get(col) is None for r in rows) for rows in runs.values()):
            continue  # not measured (an environment without a step oracle has no R_single)
        first, last = [], []
        for rs, rows in sorted(runs.items()):
            ev = [r for r in rows if r.get(col) is not None]
            a = np.array([np.nan if v is None else v for v in ev[0][col]], dtype=float)
            b = np.array([np.nan if v is None else v for v in ev[-1][col]], dtype=float)
            first.append(a)
            last.append(b)
            out["per_seed"].setdefault(str(rs), {})[f"{metric}_change"] = float(np.nanmean(b) - np.nanmean(a))
        start, end = np.vstack(first), np.vstack(last)
        change = crossed_bootstrap({"d": end - start}, lambda m: m["d"], n_boot, ci, seed)
        out[metric] = {"start": float(np.nanmean(start)), "end": float(np.nanmean(end)), "change": change[0],
                       "change_ci": [change[1], change[2]], "n_units": start.shape[1]}  # fmt: skip
    return out
