"""Multi-GPU RL through TRL: the kit's lock-step rollouts handed to `trl.GRPOTrainer` as its rollout function.

    accelerate launch --config_file configs/accelerate/deepspeed_zero3.yaml -m helpers.train_trl \\
        --profile paper --mode budgetmix

The single-process RL loop (`helpers.train.rl_train`) is the reference; this module runs the same algorithm where
one GPU is not enough, with TRL doing the distributed optimisation (accelerate + DeepSpeed ZeRO-3) and the kit
doing everything that is specific to the paper:

* Data: one row per training task, whose `prompt` is the task id. TRL repeats every row G times (its
  `RepeatSampler`) and hands each process its slice of prompts; the rollout function maps task ids back to tasks.
* Rollouts: `KitRollout` runs `helpers.rollout.rollout` (one trajectory per repeated prompt, G per task group) with
  the trainer's current weights: through TRL's colocated vLLM engine when `use_vllm` (TRL pushes the weights before
  each call), else through `HFPolicy` over the unwrapped model (ZeRO-3 parameters gathered for the whole rollout).
  It returns, per trajectory, the opening prompt's ids, `completion_ids` = everything after the prompt (generated
  and environment tokens, exactly as the rollout accumulated them), their sampling `logprobs`, `env_mask` (1 =
  model token, 0 = environment token; TRL multiplies its loss mask by it) and the reward as `env_reward`, which
  `env_reward()` hands back to TRL as the reward function.
* Budgets: `full` gives every group T_max; `budgetmix` draws one budget per task group from the BudgetMix candidates
  with a generator seeded by sha256(profile seed, task id, trainer step), so every process that holds samples of
  a group draws the same budget (Python's `hash()` is salted per process and would not).
* Loss: GRPO advantages within groups (TRL's eps is 1e-4, verl's 1e-6); PPO-clip epsilon 0.2; KL to the frozen
  base with beta = `train.kl_coef` (0.001) as TRL's k3 estimator without the bias correction
  (`use_bias_correction_kl=False`; verl's `low_var_kl` additionally clamps at +-10, TRL does not); aggregation
  `loss_type="dapo"`: the sum over all model tokens of the accumulated batch divided by their number across
  processes, which is verl's `token-mean`. Constant learning rate, AdamW with weight decay, as the kit's loop.
* Precision: the trained model keeps float32 weights (TRL's own default) and `model.dtype` becomes the compute
  precision through `bf16`/`fp16` (accelerate's autocast; DeepSpeed keeps float32 masters itself). Loading it in
  bfloat16 would make every AdamW step at lr 1e-6 round away (see `helpers.models.load_trainable`). Rollouts on
  the trainer's model run under the same autocast.
* Batch geometry: a rollout batch is `train.tasks_per_step * train.group_size` trajectories across all processes
  (TRL's `generation_batch_size`); each optimiser step takes `train.minibatch_size` of them (so several optimiser
  steps per rollout batch, PPO-style, with TRL recomputing the old log-probs); `train.micro_batch_size` bounds the
  per-device batch. `train.steps` counts rollout batches, as in `rl_train`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from transformers import AutoTokenizer, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from helpers import base_model, models
from helpers import config as config_lib
from helpers.budget import BUDGET_MODES, check_mode, group_budget
from helpers.config import Config
from helpers.envs import load_tasks, settings
from helpers.envs.base import Task
from helpers.policy import Sampling, hf_policy
from helpers.policy_vllm import VLLMPolicy, llm_defaults
from helpers.ppo import rl_reward
from helpers.rl_runs import PROCESS_KEYS, recipe_dir, rl_dir
from helpers.rollout import ChatFormat, Trajectory, rollout

REWARD_KEY = "env_reward"


def runs(prompts: list[str]) -> list[tuple[str, int]]:
    """Consecutive identical prompts as (prompt, count): TRL's sampler repeats each task G times in a row."""
    out: list[tuple[str, int]] = []
    for p in prompts:
        if out and out[-1][0] == p:
            out[-1] = (p, out[-1][1] + 1)
        else:
            out.append((p, 1))
    return out


def env_reward(prompts, completions, **kwargs) -> list[float]:
    """TRL reward function: the reward the rollout computed (0 when the budget ran out unfinished)."""
    if REWARD_KEY not in kwargs:
        raise KeyError(f"reward function: the rollout function did not return {REWARD_KEY!r}")
    return [float(r) for r in kwargs[REWARD_KEY]]


def weights_asleep(gen) -> bool:
    """Whether TRL's colocated engine has its weights asleep (to be pushed before a rollout). TRL 1.16 keeps this in
    the private `VLLMGeneration._llm_weights_sleeping`; a TRL without it counts as asleep, so the weights are pushed
    (a redundant push costs one copy; a missing one would roll out on discarded weights)."""
    return bool(getattr(gen, "_llm_weights_sleeping", True))


class KitRollout:
    """TRL `rollout_func`: the kit's lock-step multi-turn rollout over the tasks named by the prompts."""

    def __init__(self, cfg: Config, mode: str, tasks: list[Task], tokenizer, chat_kwargs: dict | None = None):
        check_mode(mode)
        self.cfg, self.mode = cfg, mode
        self.tasks = {t.task_id: t for t in tasks}
        if len(self.tasks) != len(tasks):
            raise ValueError("training tasks must have distinct task ids (the prompt is the task id)")
        self.tokenizer = tokenizer
        self.chat = ChatFormat(tokenizer, chat_kwargs)
        self.calls = 0
        self.last: list[Trajectory] = []  # the trajectories of the latest call (tests and logging read them)

    def __call__(self, prompts: list[str], trainer) -> dict[str, list]:
        unknown = sorted({p for p in prompts if p not in self.tasks})
        if unknown:
            raise KeyError(f"rollout: prompt {unknown[0]!r} is not a training task id")
        step = int(trainer.state.global_step)
        rank = int(trainer.accelerator.process_index)
        call_seed = int.from_bytes(
            hashlib.sha256(f"rollout|{self.cfg.seed}|{self.calls}|{rank}".encode()).digest()[:4], "little"
        )
        self.calls += 1
        args = trainer.args
        sampling = Sampling.from_config(self.cfg.sampling).replace(
            temperature=args.temperature, top_p=args.top_p
        )
        # One rollout call per group size (normally a single call: every process holds whole groups of G).
        groups = runs(prompts)
        trajs_by_group: list[list[Trajectory]] = [[] for _ in groups]
        with self._policy(trainer) as policy:
            for size in sorted({n for _, n in groups}):
                idx = [i for i, (_, n) in enumerate(groups) if n == size]
                tasks = [self.tasks[groups[i][0]] for i in idx]
                budgets = [group_budget(self.mode, t, self.cfg.seed, step) for t in tasks]
                trajs = rollout(
                    policy,
                    self.cfg.env.name,
                    tasks,
                    budgets,
                    size,
                    sampling,
                    seed=call_seed,
                    step_quality=False,
                    chat=self.chat,
                    model_name=self.mode,
                )
                for k, i in enumerate(idx):
                    trajs_by_group[i] = trajs[k * size : (k + 1) * size]
        self.last = [t for g in trajs_by_group for t in g]
        return self.to_trl(self.last)

    @staticmethod
    def to_trl(trajs: list[Trajectory]) -> dict[str, list]:
        """TRL's view of trajectories: prompt ids, the rest of the conversation, its masks and the rewards."""
        return {
            "prompt_ids": [t.token_ids[: t.prompt_len] for t in trajs],
            "completion_ids": [t.token_ids[t.prompt_len :] for t in trajs],
            "logprobs": [t.logprobs[t.prompt_len :] for t in trajs],
            "env_mask": [t.gen_mask[t.prompt_len :] for t in trajs],
            REWARD_KEY: [rl_reward(t) for t in trajs],
            "budget": [t.budget for t in trajs],
        }

    @contextmanager
    def _policy(self, trainer):
        """The policy over the trainer's current weights, for the duration of one rollout."""
        if trainer.use_vllm:
            gen = trainer.vllm_generation
            # TRL synced the weights before calling us; with sleep mode it left the engine's KV cache asleep (its own
            # generate() wakes it), so do what its generate() does around the call.
            if gen.enable_sleep_mode and weights_asleep(gen):
                gen.sync_weights()
            if gen.enable_sleep_mode:
                gen.llm.wake_up(tags=["kv_cache"])
            try:
                yield VLLMPolicy(
                    gen.llm,
                    self.tokenizer,
                    name=self.mode,
                    chat_kwargs=self.chat.kw,
                    owns_llm=False,
                    max_context=trainer.args.vllm_max_model_length,
                )
            finally:
                if gen.enable_sleep_mode:
                    gen.llm.sleep(level=2)
                    gen._llm_weights_sleeping = True
            return
        from trl.models import unwrap_model_for_generation

        was_training = trainer.model.training
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model:
            # puts the model in eval mode; computes in the trainer's mixed precision, as its loss does
            policy = hf_policy(model, self.tokenizer, compute_dtype(trainer.args), name=self.mode)
            policy.chat_kwargs = self.chat.kw
            policy.max_context = self.cfg.model.max_model_len  # the same guard as with vLLM
            try:
                yield policy
            finally:
                policy.reset_cache()
                trainer.model.train(was_training)  # TRL reads model.training to tell training from evaluation


# ---------------------------------------------------------------------------------------------- the trainer


def compute_dtype(args) -> str:
    """The compute precision a TRL/transformers `TrainingArguments` asks for: bfloat16, float16 or float32."""
    return "bfloat16" if args.bf16 else "float16" if args.fp16 else "float32"


@contextmanager
def trl_llm_defaults(extra: dict) -> Iterator[None]:
    """While TRL builds its colocated vLLM engine, pass `extra` (e.g. `enforce_eager=True`) to its `vllm.LLM(...)`
    call, for which `GRPOConfig` has no field. Nothing changes when `extra` is empty."""
    if not extra:
        yield
        return
    from trl.generation import vllm_generation

    original = getattr(vllm_generation, "LLM", None)
    if original is None:
        raise ImportError(
            "TRL's colocated vLLM engine needs the `vllm` package (pip install -r requirements-gpu.txt)"
        )
    vllm_generation.LLM = functools.partial(original, **extra)
    try:
        yield
    finally:
        vllm_generation.LLM = original


@dataclasses.dataclass(frozen=True)
class Geometry:
    """How a rollout batch maps onto TRL's batch arguments."""

    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    steps_per_generation: int
    updates_per_rollout: int  # optimiser steps per rollout batch


def geometry(cfg: Config, world_size: int) -> Geometry:
    """Per-device batch, accumulation and generation steps so that one rollout batch is `tasks_per_step * G`
    trajectories over all processes and one optimiser step takes `minibatch_size` of them."""
    c = cfg.train
    gen = c.tasks_per_step * c.group_size
    mini = min(c.minibatch_size, gen)
    if gen % mini:
        raise ValueError(
            f"train.minibatch_size={c.minibatch_size} must divide tasks_per_step * group_size = {gen}"
        )
    if mini % world_size:
        raise ValueError(
            f"train.minibatch_size ({mini}) must be a multiple of the number of processes ({world_size})"
        )
    per_proc = mini // world_size
    pd = math.gcd(per_proc, min(c.micro_batch_size, per_proc))
    return Geometry(pd, per_proc // pd, gen // (pd * world_size), gen // mini)


# Knobs added with the kit's other estimators (GiGPO, PPO, oracle-Q) and run layout: TRL trains GRPO only, so they
# stay out of its recipe (a TRL run's folder is what it was before they existed).
NEW_TRAIN_KEYS = ("save_steps", *PROCESS_KEYS)


def world_size() -> int:
    """The number of training processes, as the launcher says (torchrun and accelerate set WORLD_SIZE; under
    torchrun on CPU accelerate's PartialState may still report 1, which would double every rank's batch)."""
    env = os.environ.get("WORLD_SIZE")
    if env is not None:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"WORLD_SIZE must be a positive integer, got {env!r}")
        return int(env)
    from accelerate import PartialState

    return PartialState().num_processes


def trl_dir(cfg: Config, mode: str, use_vllm: bool = False, world: int | None = None) -> Path:
    """Where a TRL run of this profile, mode, rollout engine and number of processes keeps its checkpoints, logs and
    final model (runs of 1 and 2 processes take different batches per process, so they never resume each other)."""
    world = world_size() if world is None else world
    recipe = {
        "trainer": "trl",
        "rollouts": "vllm" if use_vllm else "hf",
        "base": base_model.identity(cfg),
        "mode": mode,
        "train": {k: v for k, v in dataclasses.asdict(cfg.train).items() if k not in NEW_TRAIN_KEYS},
        "sampling": dataclasses.asdict(cfg.sampling),
        "env": cfg.env.name,
        "env_settings": settings(cfg),
        "seed": cfg.seed,
    }
    if world != 1:  # a one-process run keeps the folder it had before the world size was recorded
        recipe["world_size"] = world
    return recipe_dir(cfg, f"trl-{mode}", recipe)


def build_trainer(
    cfg: Config,
    mode: str = "full",
    max_steps: int | None = None,
    output_dir: str | Path | None = None,
    use_vllm: bool | None = None,
    gradient_checkpointing: bool = False,
    vllm_sleep_mode: bool = False,
    **overrides,
):
    """A `trl.GRPOTrainer` that trains the profile's base with the kit's rollouts (see the module docstring).

    `max_steps` counts rollout batches (default `train.steps`); `use_vllm` defaults to `model.backend == "vllm"`;
    `vllm_sleep_mode` puts TRL's colocated engine to sleep during the optimiser steps (its GPU memory goes to
    training; the rollout wakes it); `gradient_checkpointing` trades compute for activations on long series;
    `overrides` go to `GRPOConfig` last (for experiments; they can break the correspondence with the kit's loop).
    """
    if cfg.train.algorithm != "grpo":
        raise ValueError(
            f"the TRL path trains GRPO only (TRL has no PPO or GiGPO); train.algorithm is "
            f"{cfg.train.algorithm!r}: use helpers.train.rl_train"
        )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    check_mode(mode)
    c = cfg.train
    path = base_model.path_of(cfg)
    device = models.resolve_device(cfg.model.device)
    use_vllm = cfg.model.backend == "vllm" if use_vllm is None else use_vllm
    if use_vllm and not device.startswith("cuda"):
        raise ValueError("use_vllm needs model.device on CUDA")
    world = world_size()
    geo = geometry(cfg, world)
    steps = c.steps if max_steps is None else max_steps
    out = Path(output_dir) if output_dir is not None else trl_dir(cfg, mode, use_vllm, world)
    tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **settings(cfg))
    tokenizer = _tokenizer(path)

    kw = dict(
        output_dir=str(out),
        seed=cfg.seed,
        max_steps=steps * geo.updates_per_rollout,
        per_device_train_batch_size=geo.per_device_train_batch_size,
        gradient_accumulation_steps=geo.gradient_accumulation_steps,
        steps_per_generation=geo.steps_per_generation,
        num_generations=c.group_size,
        learning_rate=c.lr,
        weight_decay=c.weight_decay,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=c.max_grad_norm,
        num_iterations=c.ppo_epochs,
        epsilon=c.clip_ratio,
        beta=c.kl_coef,
        use_bias_correction_kl=False,
        loss_type="dapo",
        scale_rewards="group" if c.norm_by_std else "none",
        temperature=cfg.sampling.temperature,
        top_p=cfg.sampling.top_p,
        max_completion_length=cfg.sampling.max_new_tokens * _t_max(tasks),
        model_init_kwargs={"dtype": "float32"},
        bf16=cfg.model.dtype == "bfloat16",
        fp16=cfg.model.dtype == "float16",
        use_cpu=device == "cpu",
        gradient_checkpointing=gradient_checkpointing,
        logging_steps=1,
        save_strategy="steps",
        save_steps=max(1, c.checkpoint_every * geo.updates_per_rollout),
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        shuffle_dataset=True,
        use_vllm=use_vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=cfg.model.gpu_memory_utilization,
        vllm_max_model_length=cfg.model.max_model_len,
        vllm_tensor_parallel_size=1,
        vllm_enable_sleep_mode=bool(vllm_sleep_mode and use_vllm),
        vllm_importance_sampling_correction=False,
        chat_template_kwargs=models.chat_kwargs(tokenizer) or None,
    )
    if c.kl_kind != "low_var_kl":
        raise ValueError(
            f"TRL's KL is the k3 (low_var_kl) estimator; train.kl_kind={c.kl_kind!r} is not available"
        )
    kw.update(overrides)
    if kw["vllm_tensor_parallel_size"] != 1:
        raise ValueError(
            "the kit's rollout drives one vLLM engine per process; vllm_tensor_parallel_size must be 1"
        )
    if kw["use_vllm"] is False and not kw.get("ds3_gather_for_generation", True):
        raise ValueError(
            "rollouts on the trainer's model need ds3_gather_for_generation=True (ranks run different "
            "numbers of forward passes, which per-layer ZeRO-3 gathers cannot)"
        )
    args = GRPOConfig(**kw)
    rollout_fn = KitRollout(cfg, mode, tasks, tokenizer, models.chat_kwargs(tokenizer))
    dataset = Dataset.from_dict({"prompt": [t.task_id for t in tasks]})
    with trl_llm_defaults(llm_defaults() if args.use_vllm else {}):  # KIT_VLLM_ENFORCE_EAGER=1: enforce_eager
        trainer = GRPOTrainer(
            model=str(path),
            reward_funcs=env_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout_fn,
        )
    trainer.kit_rollout = rollout_fn
    trainer.add_callback(RolloutCounter(rollout_fn))
    return trainer


ROLLOUT_STATE = "kit_rollout.json"


class RolloutCounter(TrainerCallback):
    """Saves `KitRollout.calls` (it seeds every rollout call) in each checkpoint and restores it on resume, so a
    resumed run draws new seeds instead of repeating the ones of its first calls."""

    def __init__(self, rollout_fn: KitRollout):
        self.rollout_fn = rollout_fn

    def on_save(self, args, state, control, **kw):
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ROLLOUT_STATE).write_text(json.dumps({"calls": self.rollout_fn.calls}))


def restore_rollout_calls(rollout_fn: KitRollout, checkpoint: str | Path | None) -> None:
    """Set `rollout_fn.calls` from a checkpoint written by `RolloutCounter` (a checkpoint without it: left as is)."""
    if checkpoint is None:
        return
    saved = Path(checkpoint) / ROLLOUT_STATE
    if saved.exists():
        rollout_fn.calls = int(json.loads(saved.read_text())["calls"])


def _tokenizer(path):
    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def _t_max(tasks: list[Task]) -> int:
    return max(t.t_max for t in tasks)


def train(cfg: Config, mode: str = "full", max_steps: int | None = None, publish: bool = False, **kw) -> Path:
    """Run (or resume) TRL training; the final model goes to `<run dir>/final` and the logs to `log_history.json`.

    `publish=True` also copies the final model to where the analysis notebooks (03-06) look for the `mode` model
    (`helpers.train.trained_model(cfg, mode)`), so they analyse the TRL-trained model.
    """
    trainer = build_trainer(cfg, mode, max_steps=max_steps, **kw)
    out = Path(trainer.args.output_dir)
    final = out / "final"
    last = get_last_checkpoint(str(out)) if out.exists() else None
    restore_rollout_calls(trainer.kit_rollout, last)
    trainer.train(resume_from_checkpoint=last)
    if trainer.accelerator.is_main_process:
        (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    trainer.save_model(str(final))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(final))
        if publish:
            target = rl_dir(cfg, mode) / "final"
            shutil.copytree(final, target, dirs_exist_ok=True)
            print(f"published to {target} (notebooks 03-06 analyse it)")
    trainer.accelerator.wait_for_everyone()
    return final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="GRPO / BudgetMix with TRL's GRPOTrainer and the kit's rollouts."
    )
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--mode", default="full", choices=BUDGET_MODES)
    ap.add_argument("--max-steps", type=int, default=None, help="rollout batches (default: train.steps)")
    ap.add_argument(
        "--vllm",
        dest="use_vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="roll out with TRL's colocated vLLM (default: model.backend == vllm)",
    )
    ap.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in the backward pass (long multi-turn series)",
    )
    ap.add_argument(
        "--vllm-sleep-mode",
        action="store_true",
        help="TRL's colocated vLLM engine sleeps during optimiser steps (frees its GPU memory)",
    )
    ap.add_argument(
        "--publish",
        action="store_true",
        help="also put the final model where notebooks 03-06 look for the mode's model",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="profile override, e.g. --set model.name_or_path=Qwen/Qwen3-8B",
    )
    args = ap.parse_args(argv)
    cfg = config_lib.load(args.profile, **parse_overrides(args.set))
    final = train(
        cfg,
        args.mode,
        max_steps=args.max_steps,
        publish=args.publish,
        use_vllm=args.use_vllm,
        gradient_checkpointing=args.gradient_checkpointing,
        vllm_sleep_mode=args.vllm_sleep_mode,
    )
    print(f"final model: {final}")
    return 0


def parse_overrides(items: list[str]) -> dict:
    """`["model.device=cuda", "train.lr=1e-6"]` -> `{"model__device": "cuda", "train__lr": 1e-6}` (YAML values;
    YAML 1.1 reads `1e-6`, without a dot, as a string, so a string that is a plain number becomes a float)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override {item!r} is not SECTION.KEY=VALUE")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", parsed.strip()):
            parsed = float(parsed)
        out[key.replace(".", "__")] = parsed
    return out


if __name__ == "__main__":
    raise SystemExit(main())
