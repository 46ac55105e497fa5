"""The sections of a profile: one frozen dataclass per section, every knob declared with its type, default,
meaning and domain (`knob`), and the relations between knobs in each section's `check`.

`helpers.config` gathers them into `Config` (with `EnvConfig` and `ENV_SETTINGS`, the settings of each
environment other than FrozenLake: DeepCoderSettings, BFCLSettings, SQLSettings) and loads profiles into them.
A file a profile names must lie in the kit's data folders (`data_roots`, `confined`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from helpers.config_types import ConfigError, _require, _show, knob
from helpers.envs import available

REPO_ROOT = Path(__file__).resolve().parents[1]
# Files a profile or `-p` may name (`env.extra.intercode_sql.tasks_file`) lie in the kit's data folders: its
# `data/` and `helpers/envs/data/`, the results folder (`$KIT_RESULTS` or `results/`), and the folders listed in
# `$KIT_DATA` (separated by ':'). Any other path (`../../etc/passwd`) is refused: a command line is not a licence to
# read the machine's files into a run.
DATA_ENV = "KIT_DATA"
DB_NAME = r"[A-Za-z0-9_]{1,64}"  # a database's name (`env.extra.intercode_sql.test_dbs`), never a path


def data_roots() -> list[Path]:
    """The folders a configured data file must lie in (resolved): see `DATA_ENV`."""
    roots = [REPO_ROOT / "data", REPO_ROOT / "helpers" / "envs" / "data"]
    roots.append(Path(os.environ.get("KIT_RESULTS") or REPO_ROOT / "results"))
    roots += [Path(p) for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p.strip()]
    return [r.resolve() for r in roots]


def confined(path: str, key: str) -> Path:
    """`path` resolved (symbolic links followed; relative to the working folder, as it is read), or a ConfigError
    naming `key` where it lies outside every `data_roots()` folder."""
    if "\0" in path:
        raise ConfigError(f"{key}: {_show(path)} is not a path (it holds a NUL character)", key)
    p = Path(path).expanduser()
    resolved = p.resolve()
    roots = data_roots()
    if not any(resolved.is_relative_to(r) for r in roots):
        raise ConfigError(
            f"{key}: {_show(path)} is outside the kit's data folders ({', '.join(str(r) for r in roots)}); put the "
            f"file in one of them, or add its folder to ${DATA_ENV}",
            key,
        )
    return resolved


# --------------------------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class FrozenLakeConfig:
    """Text FrozenLake: map generation and the turn budget T_max."""

    size: int = knob(5, "maps are size x size", ge=2, le=12)
    hole_p: float = knob(0.2, "probability that a cell is a hole", ge=0.0, lt=0.9)
    t_max: int = knob(10, "the full turn budget T_max", ge=1)
    is_slippery: bool = False
    success_rate: float = knob(
        1.0 / 3.0, "slippery ice: probability a move goes where intended", gt=0.0, le=1.0
    )
    gamma: float = knob(0.95, "discount of the step-quality oracle Q* (the paper's value)", gt=0.0, le=1.0)
    n_train: int = knob(2000, "distinct training maps (deduplicated, disjoint from test)", ge=1)
    n_test: int = knob(100, "distinct test maps", ge=1)
    map_seed: int = knob(0, "seed of the map generator", ge=0)
    select_min_gap: float = knob(
        0.0,
        "map selection (issue 26): keep only maps whose budget-awareness gap (the budget-aware optimum minus a blind "
        "policy for T_max, by DP: frozenlake.budget_gaps), averaged over 25 / 50 / 75 % of T_max, is at least this "
        "many points; the same rule for train and test; 0 keeps every map (needs is_slippery)",
        ge=0.0,
        le=100.0,
        omit_default=True,
    )
    select_min_mix_gap: float = knob(
        0.0,
        "map selection (issue 26): keep only maps where reading the budget is worth at least this many points to an "
        "agent trained on BudgetMix's budget mix (the budget-aware optimum minus a blind policy tuned to the mix, "
        "both averaged over the mix, by DP: frozenlake.mix_gap); with select_min_gap, a map must pass both; 0 is off "
        "(needs is_slippery)",
        ge=0.0,
        le=100.0,
        omit_default=True,
    )

    doorway_share: float = knob(
        0.0,
        "issue 50: this share of the training and test tasks (and of every subset) are doorway maps "
        "(helpers.envs.doorway: S in a corner between G and a hole, where the optimum rushes only with few turns left "
        "and reading the budget is worth >= doorway_min_gap points on every map); 0 is off (needs is_slippery)",
        ge=0.0,
        lt=1.0,
        omit_default=True,
    )
    doorway_success_rate: float = knob(
        0.0,
        "slippery ice of the doorway maps: probability a move goes where intended; 0 lets the DP choose it "
        "(doorway.choose_success_rate: the largest mix and clock gaps with a Q* margin of 0.02)",
        ge=0.0,
        le=1.0,
        omit_default=True,
    )
    doorway_min_gap: float = knob(
        10.0,
        "the least mix gap and clock gap (points) the chosen doorway success rate must give",
        ge=0.0,
        le=100.0,
        omit_default=True,
    )

    def check(self, key: str) -> None:
        for name in ("select_min_gap", "select_min_mix_gap", "doorway_share"):
            value = getattr(self, name)
            if value > 0 and not self.is_slippery:
                raise ConfigError(
                    f"{key}.{name}: {_show(value)} needs is_slippery: true (on deterministic ice no "
                    "map has a budget-awareness gap)",
                    f"{key}.{name}",
                )


# The settings of the environments other than FrozenLake (`env.extra.<name>`): the keyword arguments of each one's
# `load_tasks` (tests/test_config.py checks them against the signatures). `env.extra` keeps exactly the keys a
# profile gives, each checked and coerced here, so what `envs.settings` passes on, and every recipe that hashes
# it, is what the profile says.


@dataclass(frozen=True)
class DeepCoderSettings:
    """DeepCoder-MT (`helpers.envs.code`): bundled problems or DeepCoder-Preview-Dataset from the hub."""

    source: Literal["bundled", "hub"] = "bundled"
    sets: list[Literal["kit", "humaneval"]] = knob(
        ["kit", "humaneval"], "bundled problem sets", nonempty=True
    )
    subsets: list[Literal["primeintellect", "taco", "lcbv5", "codeforces"]] | None = knob(
        None, "hub subsets (None: each split's own)", nonempty=True
    )
    t_max: int = knob(4, "attempts per problem (T_max)", ge=1)
    max_tests: int | None = knob(None, "tests per problem (None: all of them)", ge=1)
    protocol: Literal["paper", "held_out"] = knob(
        "paper",
        "which tests pay: 'paper' (rLLM's: all of them, the ones the feedback shows included) or 'held_out' (only "
        "a held-out half no feedback shows)",
        reported=True,
    )


@dataclass(frozen=True)
class BFCLSettings:
    """BFCL multi-turn (`helpers.envs.bfcl`): the data ships in the bfcl-eval wheel."""

    source: Literal["bundled"] = "bundled"
    category: Literal[
        "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"
    ] = "multi_turn_base"
    t_max: int | None = knob(None, "turns per entry (None: turns_per_request per user request)", ge=1)
    turns_per_request: int = knob(4, "turns per user request", ge=1)
    docs: Literal["full", "compact"] = knob(
        "full",
        "how the prompt shows the function docs: 'full' (BFCL's JSON schemas) or 'compact' (names, parameters and "
        "types without the prose: helpers.envs.bfcl.render_docs)",
        reported=True,
    )


@dataclass(frozen=True)
class SQLSettings:
    """InterCode-SQL (`helpers.envs.sql`): the wheel's databases (or a task file over them), or Spider."""

    source: Literal["bundled", "hub"] = "bundled"
    t_max: int = knob(10, "queries per question (T_max)", ge=1)
    test_dbs: list[str] = knob(
        ["concert_singer", "pets_1", "car_1", "employee_hire_evaluation", "battle_death"],
        "databases of the test split",
        nonempty=True,
    )
    tasks_file: str | None = knob(None, "a task list written by helpers.envs.sql.write_task_file")

    def check(self, key: str) -> None:
        if len(set(self.test_dbs)) != len(self.test_dbs):
            raise ConfigError(f"{key}.test_dbs: {_show(self.test_dbs)} repeats a database", f"{key}.test_dbs")
        for i, db in enumerate(self.test_dbs):
            if not re.fullmatch(DB_NAME, db):
                raise ConfigError(
                    f"{key}.test_dbs[{i}]: {_show(db)} is not a database name (letters, digits and '_'; not a path)",
                    f"{key}.test_dbs",
                )
        if self.tasks_file is not None and self.source != "bundled":
            raise ConfigError(
                f"{key}.tasks_file: applies to source 'bundled' (the dump's databases), not {self.source!r}",
                f"{key}.tasks_file",
            )
        if self.tasks_file is not None:
            confined(self.tasks_file, f"{key}.tasks_file")


@dataclass(frozen=True)
class TinyModelConfig:
    """Size of the tiny Qwen3-architecture model the cpu tier builds (see CPU-TIER-NOTES)."""

    hidden_size: int = knob(128, ge=8)
    num_layers: int = knob(4, ge=1)
    num_heads: int = knob(4, ge=1)
    num_kv_heads: int = knob(2, ge=1)
    head_dim: int = knob(32, ge=2)
    intermediate_size: int = knob(384, ge=1)
    max_position_embeddings: int = knob(1024, ge=16)

    def check(self, key: str) -> None:
        _require(
            self.num_heads % self.num_kv_heads == 0,
            f"{key}.num_kv_heads",
            self.num_kv_heads,
            f"a divisor of num_heads ({self.num_heads})",
        )
        _require(self.head_dim % 2 == 0, f"{key}.head_dim", self.head_dim, "even (rotary embeddings)")


@dataclass(frozen=True)
class ModelConfig:
    """The base model: `tiny` or `tiny-qwen3` (built by the kit, `helpers.models.TINY`) or a hub name / local path
    (Qwen/Qwen3-4B)."""

    name_or_path: str = "tiny"
    backend: Literal["hf", "vllm"] = "hf"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    gpu_memory_utilization: float = knob(
        0.45, "vLLM's share of GPU memory, colocated with training", gt=0.0, le=1.0
    )
    max_model_len: int = knob(4096, ge=16)

    def check(self, key: str) -> None:
        # ASCII digits only: str.isdigit() also takes '²' or '٣', which torch cannot read
        if self.device not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:[0-9]{1,4}", self.device):
            raise ConfigError(
                f"{key}.device: {_show(self.device)} is not a device; allowed: auto, cpu, cuda, "
                "cuda:N (N in ASCII digits)",
                f"{key}.device",
            )


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling of actions during rollouts (the paper: temperature 1.0, top-p 1.0)."""

    temperature: float = knob(1.0, "0 = greedy", ge=0.0)
    top_p: float = knob(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = knob(12, ge=1)


@dataclass(frozen=True)
class SFTConfig:
    """Supervised pre-training of the tiny base on an imperfect scripted player (helpers.base_model)."""

    n_demos: int = knob(4000, "demonstration episodes, each at the full budget T_max", ge=1)
    epsilon: float = knob(0.25, "probability that the demonstrator moves uniformly at random", ge=0.0, le=1.0)
    habit_gamma: float = knob(0.99, "discount of the demonstrator's budget-blind habit", gt=0.0, lt=1.0)
    obs_steps: int = knob(600, "phase 1: steps on single observations (no system prompt, no history)", ge=0)
    obs_batch_size: int = knob(64, ge=1)
    context: Literal["observation", "window", "episode"] = "episode"  # phase 2 examples (see base_model.sft)
    lr: float = knob(1e-3, gt=0.0)
    batch_size: int = knob(32, ge=1)
    max_steps: int = knob(300, "phase 2 steps", ge=0)
    max_seconds: float = knob(
        7200.0,
        "a guard against a runaway: SFT that runs longer stops with an error (not part of the recipe)",
        gt=0.0,
    )
    warmup_steps: int = knob(50, ge=1)
    weight_decay: float = knob(0.01, ge=0.0)
    seed: int = knob(0, ge=0)
    budget_line_loss: bool = knob(
        False,
        "also learn the number of turns left in each observation after the first (predicted from the turn before): "
        "the base then reads the budget line, though its budget-blind demonstrator never acts on it",
        omit_default=True,
    )

    def check(self, key: str) -> None:
        _require(
            self.obs_steps + self.max_steps >= 1,
            f"{key}.max_steps",
            self.max_steps,
            "at least 1 step in all (obs_steps + max_steps)",
        )


@dataclass(frozen=True)
class TrainConfig:
    """The RL loop (GRPO, BudgetMix); defaults follow verl and the paper."""

    steps: int = knob(80, ge=0)
    tasks_per_step: int = knob(8, ge=1)
    group_size: int = knob(8, "G trajectories per task (16 in the paper)", ge=1)
    lr: float = knob(1e-4, gt=0.0)
    weight_decay: float = knob(0.01, ge=0.0)
    kl_coef: float = knob(0.001, ge=0.0)
    kl_kind: Literal["low_var_kl", "kl", "mse"] = "low_var_kl"
    clip_ratio: float = knob(0.2, gt=0.0, lt=1.0)
    ppo_epochs: int = knob(1, ge=1)
    minibatch_size: int = knob(64, "trajectories per optimiser step", ge=1)
    micro_batch_size: int = knob(32, "trajectories per forward/backward pass", ge=1)
    norm_by_std: bool = True
    max_grad_norm: float = knob(1.0, gt=0.0)
    checkpoint_every: int = knob(20, ge=1)
    n_probe_states: int = knob(64, "size of the fixed probe pool for R_single", ge=1)
    probe_samples: int = knob(4, "actions sampled per probe state", ge=1)
    eval_every: int = knob(10, ge=1)
    eval_tasks: int = knob(32, "training maps on which R_multi is monitored", ge=1)
    seeds: list[int] = knob([0], "RL seeds: one run per seed and budget mode", ge=0, nonempty=True)
    parallel_runs: int = knob(1, "RL runs trained at once, in separate processes", ge=1)
    # Also save the policy after these steps (<run>/step-NNNNNN/), so a shorter run can be compared with this one
    # without training it again: the first k steps of a run are the whole of a k-step run. Layout, not recipe.
    save_steps: list[int] = knob([], "steps after which the policy is also saved", ge=1, increasing=True)
    # The advantage estimator (helpers.process), independent of the budget mode (full or BudgetMix):
    #   grpo      outcome advantage within each task group (verl compute_grpo_outcome_advantage)
    #   gigpo     episode-level plus step-level advantage over anchor-state groups (verl-agent GiGPO)
    #   ppo       a learned critic and token-level GAE (verl compute_gae_advantage_return, compute_value_loss)
    #   oracle_q  GRPO's outcome advantage plus a process term from the environment's DP oracle Q*
    algorithm: Literal["grpo", "gigpo", "ppo", "oracle_q"] = "grpo"
    gigpo_step_weight: float = knob(
        1.0, "w in A = A_episode + w * A_step (verl-agent step_advantage_w)", ge=0.0
    )
    gigpo_gamma: float = knob(
        0.95, "discount of GiGPO's step returns R_t = r_t + gamma R_t+1", gt=0.0, le=1.0
    )
    gigpo_mode: Literal["mean_norm", "mean_std_norm"] = "mean_norm"  # verl-agent's default: centre, no std
    # verl-agent's default (compute_mean_std_cross_all_data): the episode-level mean over every step of the group
    gigpo_episode_over_steps: bool = True
    gae_gamma: float = knob(1.0, "PPO: GAE discount (verl algorithm.gamma)", gt=0.0, le=1.0)
    gae_lam: float = knob(1.0, "PPO: GAE lambda (verl algorithm.lam)", ge=0.0, le=1.0)
    cliprange_value: float = knob(
        0.5, "PPO: value clipping around the rollout's values (verl's critic)", gt=0.0
    )
    # PPO: the value loss's factor (the 0.5 of verl's compute_value_loss: verl's critic is a model of its own, so
    # there is no coefficient weighing its loss against the policy's)
    vf_coef: float = knob(0.5, "PPO: factor of the clipped value loss", gt=0.0)
    critic_lr: float = knob(1e-5, "PPO: the critic's lr (verl critic.optim.lr: 10x its actor's 1e-6)", gt=0.0)
    critic_warmup: int = knob(
        0, "PPO: first steps that update only the critic (verl trainer.critic_warmup)", ge=0
    )
    oracle_weight: float = knob(1.0, "oracle_q: weight w of the process term (Q*/V* - 1)", ge=0.0)
    oracle_corruption: float = knob(
        0.0, "oracle_q: share of (state, turns left) whose action values the oracle shuffles", ge=0.0, le=1.0
    )

    def check(self, key: str) -> None:
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(
                f"{key}.seeds: {_show(self.seeds)} repeats a seed (expected distinct seeds)", f"{key}.seeds"
            )
        _require(
            self.critic_warmup <= self.steps,
            f"{key}.critic_warmup",
            self.critic_warmup,
            "at most train.steps",
        )


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation at fractions of T_max (notebook 02) and bootstrap settings."""

    budget_fractions: list[float] = knob(
        [0.25, 0.5, 0.75, 1.0], gt=0.0, le=1.0, nonempty=True, increasing=True
    )
    n_samples: int = knob(8, "trajectories per test task and budget", ge=1)
    n_tasks: int = knob(100, "test tasks (at most the test split)", ge=1)
    n_bootstrap: int = knob(1000, ge=1)
    ci: float = knob(0.95, "confidence level of every interval", gt=0.0, lt=1.0)
    # The sharpening control (helpers.controls): the base at the temperature, among these (0 = greedy), whose
    # full-budget success on `sharpen_tasks` training maps comes closest to the RL model's.
    sharpen_temperatures: list[float] = knob([1.0, 0.7, 0.5, 0.3, 0.1, 0.0], ge=0.0, nonempty=True)
    sharpen_tasks: int = knob(64, ge=1)
    workers: int = knob(
        1,
        "models evaluated at once in notebooks 02 and 03, each in a worker process with one thread (layout "
        "only: the records are the same)",
        ge=1,
        omit_default=True,
    )


@dataclass(frozen=True)
class SweepConfig:
    """The Pass@(K,T) sweep (notebook 03)."""

    t_fractions: list[float] = knob([0.25, 0.5, 0.75, 1.0], gt=0.0, le=1.0, nonempty=True, increasing=True)
    n_samples: int = knob(16, "n samples per (task, T); Pass@K for every K <= n", ge=1)
    pass_t_k: int = knob(8, "Pass@T = Pass@(K, T) at this K (8 in the paper)", ge=1)
    n_tasks: int = knob(100, ge=1)

    def check(self, key: str) -> None:
        _require(
            self.pass_t_k <= self.n_samples,
            f"{key}.pass_t_k",
            self.pass_t_k,
            f"at most sweep.n_samples ({self.n_samples}): Pass@K needs K <= n",
        )


@dataclass(frozen=True)
class ProbingConfig:
    """Matched-state probing, error states and likelihoods (notebooks 04-06)."""

    n_states: int = knob(200, "matched states (half from base, half from RL trajectories)", ge=2)
    g: int = knob(16, "actions sampled per policy per state (the paper's G)", ge=1)
    depth_bins: list[float] = knob(
        [0.0, 0.25, 0.5, 0.75, 1.0], ge=0.0, le=1.0, nonempty=True, increasing=True
    )
    n_error_states: int = knob(100, ge=1)
    n_continuations: int = knob(8, ge=1)
    n_trajectories: int = knob(200, "recorded trajectories per policy for the likelihood analysis", ge=1)
    # Notebook 06 also scores transcripts recorded elsewhere (helpers.likelihood's JSON-lines format): a path
    # (absolute, or relative to the repository root), "examples" for the kit's own generated Terminus-style set,
    # or None (no transcripts).
    transcripts: str | None = knob(None, "transcripts for notebook 06: a .jsonl path, 'examples' or None")
    # Notebook 02's supervised positive control on doorway maps (helpers.budget_control; issue 50): the base
    # fine-tuned on the budget-aware optimum's moves, on doorway training maps at BudgetMix budgets.
    control_demos: int = knob(
        2000, "optimum episodes on doorway training maps for the supervised control", ge=1, omit_default=True
    )
    control_obs_steps: int = knob(
        300,
        "control SFT steps on single observations (then control_steps on whole episodes)",
        ge=0,
        omit_default=True,
    )
    control_steps: int = knob(150, "control SFT steps on whole episodes", ge=0, omit_default=True)
    control_lr: float = knob(1.0e-3, "control SFT learning rate", gt=0.0, omit_default=True)
    control_batch_size: int = knob(32, "control SFT batch size", ge=1, omit_default=True)
    control_target: float = knob(
        1.5,
        "the opening responsiveness the control must reach (the optimum: 2)",
        ge=0.0,
        le=2.0,
        omit_default=True,
    )

    def check(self, key: str) -> None:
        _require(len(self.depth_bins) >= 2, f"{key}.depth_bins", self.depth_bins, "at least two bin edges")
        if self.transcripts is not None and self.transcripts != "examples":
            _require(
                self.transcripts.endswith(".jsonl"),
                f"{key}.transcripts",
                self.transcripts,
                "a .jsonl file of transcripts (helpers.likelihood format), 'examples' or null",
            )


@dataclass(frozen=True)
class ProcessConfig:
    """Notebook 07: GRPO, GiGPO, PPO and the oracle-Q process reward, each at the full budget and with BudgetMix,
    and the precision experiment (the oracle corrupted at several levels). Every run of the grid uses the profile's
    `train` section except `train.algorithm` (and `train.oracle_corruption`), `steps` and `seeds` below."""

    env: str | None = None  # environment of the experiment (None: env.name); the gpu profile runs it on bfcl
    algorithms: list[Literal["grpo", "gigpo", "ppo", "oracle_q"]] = knob(
        ["grpo", "gigpo", "ppo", "oracle_q"], "the estimators of the grid", nonempty=True
    )
    seeds: list[int] = knob([0, 1, 2], "RL seeds of every method of the grid", ge=0, nonempty=True)
    steps: int | None = knob(None, "RL steps of every run of the grid (None: train.steps)", ge=1)
    # The precision experiment: oracle_q with `train.oracle_corruption` at each level (0 = the exact oracle);
    # empty: none (an environment without a step oracle)
    corruption_levels: list[float] = knob(
        [0.0, 0.25, 0.5, 1.0],
        "oracle corruption levels of the precision curve",
        ge=0.0,
        le=1.0,
        increasing=True,
    )
    precision_mode: Literal["full", "budgetmix"] = "full"  # budget mode of the precision runs
    n_tasks: int = knob(100, "test tasks per evaluation cell", ge=1)
    n_samples: int = knob(8, "trajectories per test task and budget", ge=1)

    def check(self, key: str) -> None:
        if self.env is not None and self.env not in available():
            raise ConfigError(
                f"{key}.env: {_show(self.env)} is not an environment; known: {available()}", f"{key}.env"
            )
        if len(set(self.algorithms)) != len(self.algorithms):
            raise ConfigError(
                f"{key}.algorithms: {self.algorithms!r} repeats an estimator (expected distinct ones)",
                f"{key}.algorithms",
            )
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(
                f"{key}.seeds: {_show(self.seeds)} repeats a seed (expected distinct seeds)", f"{key}.seeds"
            )
        if self.corruption_levels and "oracle_q" not in self.algorithms:
            raise ConfigError(
                f"{key}.corruption_levels: {_show(self.corruption_levels)} needs oracle_q among "
                "process.algorithms (or leave it empty)",
                f"{key}.corruption_levels",
            )


@dataclass(frozen=True)
class RunConfig:
    """Batch execution with Papermill."""

    cell_timeout: int = knob(1800, "seconds per notebook cell", ge=1)
    # Notebooks `python -m helpers.run` leaves out of a whole run or a `--from` run (two-digit numbers, e.g. "07"
    # where the paper has no such experiment on this environment); `--only NN` still runs a listed notebook.
    skip: list[str] = knob([], "notebook numbers the runner leaves out")

    def check(self, key: str) -> None:
        for nn in self.skip:
            _require(
                re.fullmatch(r"[0-9]{2}", nn) is not None,
                f"{key}.skip",
                self.skip,
                "two-digit notebook numbers in ASCII digits ('07')",
            )
