"""The RL loop: GRPO, GiGPO, PPO or the oracle-Q process reward, at the full budget or with BudgetMix, from the
profile's base, with checkpoints and metrics.

One step: sample `tasks_per_step` training tasks; give each task group one budget (T_max in `full` mode, a
uniform draw from the BudgetMix candidates in `budgetmix` mode, `helpers.budget`; nothing else differs); roll out G
trajectories per task with the current policy; reward 1 on success, 0 otherwise (and 0 whenever the budget ran out
before the episode ended); one update (`helpers.ppo`: advantages by `train.algorithm`, PPO-clip + low_var_kl to
the frozen base over generated tokens only, token-mean; AdamW); log, checkpoint. The pieces live beside it:

* `helpers.budget`: the budget modes and BudgetMix's draw;
* `helpers.process`: the estimators (`ESTIMATORS`: per-token advantages, critic, oracle) and their formulas' inputs;
* `helpers.ppo`: the update and PPO's critic;
* `helpers.rl_runs`: recipes, run folders, checkpoints, resumption, the R_single probe pool;
* `helpers.parallel`: several runs at once in worker processes;
* `helpers.backends`: the policy the loop rolls out with, and the hooks around its optimiser step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from helpers import base_model, memory, models, parallel, process, store
from helpers.backends import after_update, before_update, rollout_policy_for
from helpers.budget import BUDGET_MODES, check_mode, step_budgets, task_budgets
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.metrics import crossed_bootstrap
from helpers.offload import Offload
from helpers.policy import HFPolicy, Policy, Sampling
from helpers.ppo import new_critic, ppo_update, rl_reward
from helpers.probing import LENGTH_BUCKETS, ProbeState, dead_states, state_quality
from helpers.process import token_advantages
from helpers.progress import bar
from helpers.rl_runs import (
    PROCESS_KEYS,
    RUN_LAYOUT_KEYS,
    is_complete,
    probe_pool,
    probe_pool_path,
    progress_label,
    read_metrics,
    resume,
    resume_metrics,
    rl_dir,
    rl_recipe,
    run_seed,
    save_checkpoint,
    save_final,
    snapshot_dir,
    train_recipe,
    trained_model,
)
from helpers.rollout import Trajectory, rollout, summarize

# The loop's public names; those defined beside it are kept here, where notebooks and exercises call them.
__all__ = [
    "BUDGET_MODES",
    "PROCESS_KEYS",
    "RUN_LAYOUT_KEYS",
    "ppo_update",
    "probe_pool",
    "probe_pool_path",
    "read_metrics",
    "rl_dir",
    "rl_recipe",
    "rl_reward",
    "rl_train",
    "run_seed",
    "snapshot_dir",
    "step_budgets",
    "task_budgets",
    "token_advantages",
    "train_many",
    "train_recipe",
    "train_runs",
    "trained_model",
    "training_dynamics",
]


def rl_train(cfg: Config, mode: str = "full", seed: int | None = None, max_steps: int | None = None) -> Path:
    """Train from the base with `train.algorithm` in budget mode `full` or `budgetmix`; returns the final model.

    `seed` is the RL seed (default: the first of `train.seeds`); the base is the same for every seed. Metrics of
    every step are appended to `<run dir>/metrics.jsonl`; a checkpoint is written every `train.checkpoint_every`
    steps and at the end. An interrupted run resumes from its last checkpoint with exactly one metrics row per
    step and the same final weights as an uninterrupted run; a finished run is reused as is. `max_steps` stops
    early (for tests of resumption) without writing the final model.

    Every `train.eval_every` steps the run logs R_multi and the step-level rewards (`monitor`). The estimators
    other than GRPO (`helpers.process`): `ppo` trains a critic beside the policy (in the checkpoints, so a resumed
    run continues it); `oracle_q` needs an environment with a step oracle (FrozenLake). After every step in
    `train.save_steps` the policy is also saved to `<run dir>/step-NNNNNN/` (`trained_model(..., step=)`).
    """
    check_mode(mode)
    c = cfg.train
    est = process.estimator(c.algorithm)
    if est.oracle and not process.has_oracle(cfg.env.name):
        raise ValueError(
            f"train.algorithm={c.algorithm} needs a step oracle, which {cfg.env.name!r} does not have"
        )
    out = rl_dir(cfg, mode, seed)
    final = out / "final"
    if is_complete(final):
        return final
    # One writer per run: a second process training the same run (the same recipe, so the same folder) waits for
    # the first, then finds the run finished (or resumes it from its last checkpoint if the first was stopped).
    with store.one_writer(out, wait=True):
        if is_complete(final):
            return final
        _train(cfg, mode, seed, max_steps, out)
    return final


def _train(cfg: Config, mode: str, seed: int | None, max_steps: int | None, out: Path) -> None:
    """The loop of `rl_train` in the run's folder `out`, of which this process is the one writer."""
    c = cfg.train
    est = process.estimator(c.algorithm)
    rs = run_seed(cfg, seed)
    final = out / "final"
    out.mkdir(parents=True, exist_ok=True)
    store.write_atomic(
        out / "recipe.json", json.dumps(rl_recipe(cfg, mode, seed), indent=2, sort_keys=True, default=str)
    )

    device = models.resolve_device(cfg.model.device)
    base = base_model.path_of(cfg)
    # float32 master weights (a bf16 AdamW step at lr 1e-6 changes nothing); cfg.model.dtype is the compute
    # precision of the policy's forward passes (models.autocast in ppo_update) and the frozen reference's dtype
    model, tok = models.load_trainable(base, device=device)
    ref_model, _ = models.load(base, device=device, dtype=cfg.model.dtype)
    ref_model.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
    critic, critic_opt = new_critic(base, device, cfg) if est.critic else (None, None)
    metrics = store.Records(out / "metrics.jsonl")
    start = resume(out, device, model, opt, critic, critic_opt)
    resume_metrics(metrics, start)
    moves = offload_for(cfg, base, device, model, opt, ref_model)
    moves.optimizer_out()  # a resumed run's AdamW state: off the GPU before vLLM takes its share
    # hf: the policy shares `model`; vllm: a colocated engine that is synced after every update (and shut down at
    # the end, so the next run in this process can start its own)
    with rollout_policy_for(cfg, model, tok, name=mode) as policy:
        train_tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **settings(cfg))
        task_index = {t.task_id: t for t in train_tasks} if est.oracle else None
        monitor = load_tasks(cfg.env.name, "train", n=c.eval_tasks, seed=cfg.seed + 29, **settings(cfg))
        sampling = Sampling.from_config(cfg.sampling)
        probes = probe_pool(cfg, HFPolicy(ref_model, tok, name="base"))
        moves.reference_out()
        watch = Monitor(cfg, monitor, probes, sampling, rs)

        tag = {} if est.legacy_layout else {"algorithm": c.algorithm}  # GRPO's logs stay as they were
        if start == 0 and not len(metrics):
            metrics.append(
                {"step": 0, "mode": mode, **tag, "rl_seed": rs, **first_watch(cfg, rs, watch, policy)}
            )
        last = c.steps if max_steps is None else min(c.steps, max_steps)
        progress = bar(range(start + 1, last + 1), desc=progress_label(cfg, mode, rs), leave=False)
        for step in progress:
            rng = np.random.default_rng([rs, step])
            idx = rng.choice(len(train_tasks), size=min(c.tasks_per_step, len(train_tasks)), replace=False)
            tasks = [train_tasks[i] for i in idx]
            budgets = task_budgets(mode, [t.t_max for t in tasks], rng)
            t0 = time.time()
            trajs = rollout(
                policy,
                cfg.env.name,
                tasks,
                budgets,
                c.group_size,
                sampling,
                seed=rs * 100_003 + step,
                step_quality=False,
            )
            policy.reset_cache()
            t1 = time.time()
            before_update(policy)  # vllm: sleep while the trainer steps
            upd = ppo_update(
                model,
                ref_model,
                opt,
                trajs,
                cfg,
                rng,
                critic=critic,
                critic_opt=critic_opt,
                tasks=task_index,
                seed=rs,
                update_actor=not est.critic or step > c.critic_warmup,
                offload=moves if moves.active else None,
            )
            moves.optimizer_out()  # before vLLM takes its share back
            after_update(
                policy, model
            )  # vllm: wake up and load the new weights; hf: drop the conversation cache
            t2 = time.time()
            row = {
                "step": step,
                "mode": mode,
                **tag,
                "rl_seed": rs,
                **step_stats(trajs, budgets, upd, t0, t1, t2),
            }
            if step % c.eval_every == 0 or step == c.steps:
                row.update(timed(watch, policy))
            metrics.append(row)
            progress.set_postfix(
                success=f"{row['success']:.2f}", kl="-" if row["kl"] is None else f"{row['kl']:.3f}"
            )
            if (
                step in c.save_steps and step < c.steps
            ):  # before any later checkpoint, so a resumed run has it
                save_final(snapshot_dir(out, step), model, tok)
            if step % c.checkpoint_every == 0 or step == c.steps:
                save_checkpoint(out, step, model, opt, critic, critic_opt)
    if last == c.steps:
        save_final(final, model, tok)


def offload_for(cfg: Config, base, device: str, model, opt, ref_model) -> Offload:
    """The memory plan of this run on its GPU (`helpers.memory`, printed; a plan that cannot fit raises before
    training starts) and the moves it asks for: AdamW's state and the reference off the GPU outside the phases that
    use them, gradient checkpointing in the update. On the CPU: no plan, nothing moves."""
    p = memory.for_run(cfg, base, gpu_bytes=memory.gpu_bytes_of(device))  # None on the CPU
    if p is None:
        return Offload.none()
    st = p.strategy
    if st.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return Offload(device, opt, ref_model, optimizer=st.offload_optimizer, ref=st.offload_reference)


def step_stats(
    trajs: list[Trajectory], budgets: list[int], upd: dict, t0: float, t1: float, t2: float
) -> dict:
    """A step's row of the metrics log after its step, mode and seed: the rollout's reward, success, turns and
    budgets, the update's statistics, and the throughput (rollout from t0 to t1, update from t1 to t2)."""
    summary = summarize(trajs)
    return {
        "reward": float(np.mean([rl_reward(t) for t in trajs])),
        "success": summary["success"],
        "mean_turns": summary["mean_turns"],
        "invalid_rate": summary["invalid_rate"],
        "budget_mean": float(np.mean(budgets)),
        **upd,
        "rollout_tokens_per_s": summary["generated_tokens"] / max(t1 - t0, 1e-9),
        "tokens_per_s": sum(len(t.token_ids) for t in trajs) / max(t2 - t0, 1e-9),
        "rollout_s": t1 - t0,
        "update_s": t2 - t1,
    }


def timed(watch: Monitor, policy: Policy) -> dict:
    """The monitor's row, with the seconds it took (`monitor_s`: benchmarks/series_time.py reads it)."""
    t0 = time.time()
    return {**watch(policy), "monitor_s": time.time() - t0}


def monitor_path(cfg: Config, rs: int, name: str) -> Path:
    """Where the step-0 monitor of the runs from `cfg`'s base with RL seed `rs` and rollout policy `name` (the budget
    mode) is kept: at step 0 every such run watches the base itself on the same maps, probe pool and draws (the
    probe pool's draws follow the policy's name, `probing.policy_seed`), whatever its estimator, so the row is
    computed once (issue 51: notebook 07's runs read 01's) and read by the others. The file name hashes everything
    the row depends on."""
    c = cfg.train
    recipe = {
        "base": base_model.identity(cfg),
        "rl_seed": rs,
        "policy": name,
        "env": cfg.env.name,
        "settings": settings(cfg),
        "seed": cfg.seed,
        "eval_tasks": c.eval_tasks,
        "group_size": c.group_size,
        "probe_samples": c.probe_samples,
        "probe_pool": probe_pool_path(cfg).name,
        "sampling": dataclasses.asdict(cfg.sampling),
        "buckets": LENGTH_BUCKETS,
        "backend": cfg.model.backend,
        "dtype": cfg.model.dtype,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return store.models_dir(cfg.profile) / "monitor" / f"step0-{name}-s{rs}-{digest}.json"


def first_watch(cfg: Config, rs: int, watch: Monitor, policy: Policy) -> dict:
    """The step-0 row (`timed`), read from `monitor_path` where another run from the same base, RL seed and policy
    name wrote it (its `monitor_s` is then this read's), else computed and written there (atomically: two runs that
    compute it at once write the same row)."""
    path = monitor_path(cfg, rs, policy.name)
    t0 = time.time()
    if path.exists():
        return {**json.loads(path.read_text()), "monitor_s": time.time() - t0}
    row = timed(watch, policy)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_atomic(path, json.dumps({k: v for k, v in row.items() if k != "monitor_s"}))
    return row


class Monitor:
    """What a run logs every `train.eval_every` steps, on fixed training maps and a fixed probe pool.

    `tasks` are the maps, `probes` the pool (`probe_pool`), `rs` the RL seed. It logs R_multi (success at the full
    budget on the maps) and two step-level rewards: `r_single_own`, the mean oracle quality of the actions the
    current policy takes on its own trajectories of those maps (the paper's step-level reward: it follows the states
    RL leads to), and `r_single`, the mean quality of actions the policy samples at the probe pool's states from
    base trajectories (the same states at every step, so a change there is a change of the policy, not of where it
    goes).
    """

    def __init__(self, cfg: Config, tasks: list, probes: list[ProbeState], sampling: Sampling, rs: int):
        self.cfg, self.tasks, self.probes, self.sampling, self.rs = cfg, tasks, probes, sampling, rs
        self.live = ~dead_states(probes) if probes else np.zeros(0, dtype=bool)

    def __call__(self, policy: Policy) -> dict:
        c, rs, monitor = self.cfg.train, self.rs, self.tasks
        trajs = rollout(
            policy,
            self.cfg.env.name,
            monitor,
            [t.t_max for t in monitor],
            c.group_size,
            self.sampling,
            seed=rs * 7_919 + 29,
            step_quality=True,
        )
        success: dict[str, list[float]] = {t.task_id: [] for t in monitor}
        quality: dict[str, list[float]] = {t.task_id: [] for t in monitor}
        for tr in trajs:
            success[tr.task_id].append(float(tr.success))
            quality[tr.task_id] += [
                t["quality"] for t in tr.turns if t["quality"] is not None and not t["dead"]
            ]
        own = [q for qs in quality.values() for q in qs]
        per_state = np.zeros(0)
        if self.probes:
            q_pool = state_quality(
                policy,
                self.probes,
                c.probe_samples,
                self.sampling.replace(seed=rs * 7_919 + 31),
                buckets=LENGTH_BUCKETS,
            )
            per_state = np.nanmean(q_pool, axis=1)[self.live]
        policy.reset_cache()
        return {
            "eval_success": float(np.mean([t.success for t in trajs])),
            "eval_success_by_task": [float(np.mean(v)) for v in success.values()],
            "r_single_own": float(np.mean(own)) if own else None,
            "r_single_own_by_task": [float(np.mean(v)) if v else None for v in quality.values()],
            "r_single": float(per_state.mean()) if per_state.size else None,
            "r_single_by_state": per_state.tolist(),
        }


# ------------------------------------------------------------------------------------ several runs at once


def train_runs(cfg: Config, runs: list[tuple[str, int]], workers: int | None = None) -> dict:
    """Train every (mode, RL seed) of `runs`, `workers` at a time in separate processes (default
    `train.parallel_runs`); returns {(mode, seed): final model path}. See `train_many`."""
    paths = train_many([(cfg, m, s) for m, s in runs], workers)
    return dict(zip(runs, paths, strict=True))


def train_many(runs: list[tuple[Config, str, int]], workers: int | None = None) -> list[Path]:
    """Train every (profile, mode, RL seed) of `runs` (profiles may differ, e.g. in `train.algorithm`) with
    `rl_train`, `workers` at a time in separate processes (default: the first profile's `train.parallel_runs`);
    returns the final model paths in the order of `runs` (`helpers.parallel`)."""
    return parallel.train_many(runs, rl_train, workers)


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
    names = {
        "R_multi": "eval_success_by_task",
        "R_single": "r_single_own_by_task",
        "R_single_pool": "r_single_by_state",
    }
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
        out[metric] = {
            "start": float(np.nanmean(start)),
            "end": float(np.nanmean(end)),
            "change": change[0],
            "change_ci": [change[1], change[2]],
            "n_units": start.shape[1],
        }
    return out
