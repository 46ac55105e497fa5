"""Profiles: one typed, validated place for every knob of the kit.

A profile is a YAML file in `configs/` (smoke, cpu, cpu_process, gpu, paper). `load(profile, **overrides)`
reads it, applies overrides, and builds the frozen dataclasses below. Every section and key is declared here
with a type; an unknown key, a value of the wrong type or an out-of-range value is an error that names the key
(`train.lr`), so a typo in a profile or a Papermill parameter never silently falls back to a default.

Overrides use either nested dicts (`load("cpu", train={"lr": 1e-4})`) or double underscores
(`load("cpu", train__lr=1e-4)`), so they can be passed as notebook parameters.

Every value is checked before anything uses it: numbers are finite (no .nan, .inf or 1e999), integers at most
INT_MAX, digits ASCII, the profile's name one folder under results/, and each environment's `env.extra` block
against its declared section (ENV_SETTINGS). The YAML reader bounds nesting and alias expansion (MAX_YAML_DEPTH,
MAX_YAML_VALUES: every manifest copies the expanded values), takes anchors, aliases and merge keys as YAML defines
them, and refuses a key given twice or a key that is not a name. Every error is a ConfigError that names the key and
where it is set: `file:line` in the profile, or `overrides`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import itertools
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from helpers.envs import available
from helpers.envs.base import plain

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"
PROFILE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # one folder name under results/ (see Config.check)
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


class ConfigError(ValueError):
    """A profile or override is invalid; the message names the offending key (`key`, dotted: `train.lr`) and, once
    `load` has placed it, the file and line where that key is set or that it came from an override."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


# Every integer knob is at most INT_MAX (unless its domain is tighter): a count, a size or a seed beyond it is a
# typo, and would fail much later (torch's seeds, numpy's draws, sizes of tensors) without naming the key.
INT_MAX = 2**31 - 1
# A profile's YAML is small (the largest has about 400 values, nested 5 deep). Aliases are expanded by every reader
# of a Config (`to_dict`, every manifest), so a few hundred bytes of nested aliases can stand for gigabytes: the
# value count after expanding aliases and the nesting depth are bounded when the file is read.
MAX_YAML_VALUES = 20_000
MAX_YAML_DEPTH = 32


def _show(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters (a message never prints a huge value, nor fails on one)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # pragma: no cover - an int past Python's digit limit, a cycle
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 4] + " ..."


# --------------------------------------------------------------------------------------------- domains


def knob(default: Any, doc: str = "", *, ge=None, gt=None, le=None, lt=None, nonempty: bool = False,
         increasing: bool = False, reported: bool = False, omit_default: bool = False) -> Any:  # fmt: skip
    """A declared knob: its default, what it means, and its domain (checked when a profile loads).

    `ge` / `gt` / `le` / `lt` bound a number (each item of a list); `nonempty` requires at least one item;
    `increasing` requires strictly increasing items. Relations between knobs live in each section's `check`.
    `reported` (environment settings only): the knob changes what the numbers mean, so every metrics.json of that
    environment records its value (`reported_settings`). `omit_default`: the knob is left out of `Config.to_dict`,
    the environment's settings and every recipe while it holds its default (`helpers.envs.base.plain`), so adding it
    changed no existing profile's hashes (tests/config_839d5c0.json).
    """
    meta = {
        "doc": doc,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "nonempty": nonempty,
        "increasing": increasing,
        "reported": reported,
        "omit_default": omit_default,
    }
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _domain(meta: dict) -> str:
    parts = []
    for op, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if meta.get(op) is not None:
            parts.append(f"{sym} {meta[op]}")
    return " and ".join(parts)


def _check_domain(name: str, value: Any, meta: dict, key: str) -> None:
    items = value if isinstance(value, list) else [value]
    if meta.get("nonempty") and isinstance(value, list) and not value:
        raise ConfigError(f"{key}: an empty list is not allowed (give at least one value)", key)
    if meta.get("increasing") and any(b <= a for a, b in itertools.pairwise(items)):
        raise ConfigError(
            f"{key}: {_show(value)} is not strictly increasing (expected strictly increasing values)", key
        )
    for v in items:
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        bad = ((meta.get("ge") is not None and v < meta["ge"]) or (meta.get("gt") is not None and v <= meta["gt"])
               or (meta.get("le") is not None and v > meta["le"]) or (meta.get("lt") is not None and v >= meta["lt"]))  # fmt: skip
        if bad:
            what = f" ({meta['doc']})" if meta.get("doc") else ""
            raise ConfigError(f"{key}: {_show(value)} is out of range; allowed: {_domain(meta)}{what}", key)


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
                raise ConfigError(f"{key}.{name}: {_show(value)} needs is_slippery: true (on deterministic ice no "
                                  "map has a budget-awareness gap)", f"{key}.{name}")  # fmt: skip


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
    category: Literal["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"] = (
        "multi_turn_base"
    )  # fmt: skip
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
            raise ConfigError(f"{key}.tasks_file: applies to source 'bundled' (the dump's databases), not "
                              f"{self.source!r}", f"{key}.tasks_file")  # fmt: skip
        if self.tasks_file is not None:
            confined(self.tasks_file, f"{key}.tasks_file")


ENV_SETTINGS: dict[str, type] = {
    "deepcoder": DeepCoderSettings,
    "bfcl": BFCLSettings,
    "intercode_sql": SQLSettings,
}


def reported_settings(env: str, extra: dict[str, dict]) -> dict[str, Any]:
    """The `reported` settings of environment `env` (DeepCoder-MT's `protocol`) from an `env.extra` mapping, each
    at its default where the mapping leaves it out; {} for an environment that has none (FrozenLake). Read from a
    Config (`Config.reported`) and from a manifest's recorded config alike, so the two compare."""
    schema = ENV_SETTINGS.get(env)
    if schema is None:
        return {}
    given = extra.get(env, {})
    return {
        f.name: given.get(f.name, f.default) for f in dataclasses.fields(schema) if f.metadata.get("reported")
    }


@dataclass(frozen=True)
class EnvConfig:
    """Which environment the training notebooks use, and each environment's own settings."""

    name: str = "frozenlake"
    frozenlake: FrozenLakeConfig = field(default_factory=FrozenLakeConfig)
    # The other environments' settings (ENV_SETTINGS), each block checked like a section; only the keys given.
    extra: dict[str, dict] = field(default_factory=dict, metadata={"settings": ENV_SETTINGS})

    def check(self, key: str) -> None:
        known = available()
        if self.name not in known:
            raise ConfigError(
                f"{key}.name: {self.name!r} is not an environment; known: {known}", f"{key}.name"
            )


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
        _require(self.num_heads % self.num_kv_heads == 0, f"{key}.num_kv_heads", self.num_kv_heads,
                 f"a divisor of num_heads ({self.num_heads})")  # fmt: skip
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
            raise ConfigError(f"{key}.device: {_show(self.device)} is not a device; allowed: auto, cpu, cuda, "
                              "cuda:N (N in ASCII digits)", f"{key}.device")  # fmt: skip


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
        _require(self.obs_steps + self.max_steps >= 1, f"{key}.max_steps", self.max_steps,
                 "at least 1 step in all (obs_steps + max_steps)")  # fmt: skip


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
        _require(self.critic_warmup <= self.steps, f"{key}.critic_warmup", self.critic_warmup,
                 "at most train.steps")  # fmt: skip


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
        _require(self.pass_t_k <= self.n_samples, f"{key}.pass_t_k", self.pass_t_k,
                 f"at most sweep.n_samples ({self.n_samples}): Pass@K needs K <= n")  # fmt: skip


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
            _require(self.transcripts.endswith(".jsonl"), f"{key}.transcripts", self.transcripts,
                     "a .jsonl file of transcripts (helpers.likelihood format), 'examples' or null")  # fmt: skip


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
            raise ConfigError(f"{key}.algorithms: {self.algorithms!r} repeats an estimator (expected distinct ones)",
                              f"{key}.algorithms")  # fmt: skip
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(
                f"{key}.seeds: {_show(self.seeds)} repeats a seed (expected distinct seeds)", f"{key}.seeds"
            )
        if self.corruption_levels and "oracle_q" not in self.algorithms:
            raise ConfigError(f"{key}.corruption_levels: {_show(self.corruption_levels)} needs oracle_q among "
                              "process.algorithms (or leave it empty)", f"{key}.corruption_levels")  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    """Batch execution with Papermill."""

    cell_timeout: int = knob(1800, "seconds per notebook cell", ge=1)
    # Notebooks `python -m helpers.run` leaves out of a whole run or a `--from` run (two-digit numbers, e.g. "07"
    # where the paper has no such experiment on this environment); `--only NN` still runs a listed notebook.
    skip: list[str] = knob([], "notebook numbers the runner leaves out")

    def check(self, key: str) -> None:
        for nn in self.skip:
            _require(re.fullmatch(r"[0-9]{2}", nn) is not None, f"{key}.skip", self.skip,
                     "two-digit notebook numbers in ASCII digits ('07')")  # fmt: skip


@dataclass(frozen=True)
class Config:
    """A whole profile."""

    profile: str = "cpu"
    seed: int = knob(0, "the profile's seed (maps, base, evaluation)", ge=0)
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    probing: ProbingConfig = field(default_factory=ProbingConfig)
    process: ProcessConfig = field(default_factory=ProcessConfig)
    run: RunConfig = field(default_factory=RunConfig)
    # The per-environment series (`python -m helpers.run --env NAME`): the notebooks run on environment NAME with the
    # profile's `per_env.NAME` settings applied, and write to results/<profile>/<NAME>/. None: the profile as
    # written, on `env.name`, results in results/<profile>/ (what `make reproduce` runs).
    series: str | None = None
    # Settings of each environment's series, as overrides of any section but `env.name` (set by the series), e.g.
    # `deepcoder: {env: {extra: {deepcoder: {t_max: 4}}}, sampling: {max_new_tokens: 2048}}`. Every block is
    # checked when the profile loads, whichever series runs.
    per_env: dict[str, dict] = field(default_factory=dict)

    def check(self, key: str) -> None:
        # The profile names its results folder (results/<profile>/): one path component, so that no name can
        # point into another profile's folder (`smoke/models`, `..`), which `--fresh` would then set aside.
        if not re.fullmatch(PROFILE_NAME, self.profile):
            raise ConfigError(f"profile: {_show(self.profile)} is not a profile name (expected ASCII letters, digits, "
                              "'_', '-' and '.', starting with a letter or digit, at most 64: one folder under "
                              "results/)", "profile")  # fmt: skip

    def to_dict(self) -> dict:
        """Plain nested dict (for manifests and hashing); a knob declared `omit_default` is left out at its
        default."""
        return plain(self)

    def reported(self, env: str | None = None) -> dict[str, Any]:
        """The settings of environment `env` (default `env.name`) that every metrics.json on it records beside its
        numbers (`reported_settings`): {"protocol": "paper"} on DeepCoder-MT, {} on FrozenLake."""
        return reported_settings(env or self.env.name, self.env.extra)

    @property
    def results_name(self) -> str:
        """This run's folder under results/: `<profile>`, or `<profile>/<env>` in a per-environment series.
        Notebooks pass it to `helpers.store` and `helpers.report` wherever they read or write a series' results."""
        return self.profile if self.series is None else f"{self.profile}/{self.series}"


# --------------------------------------------------------------------------------------------- loading


def load(profile: str | Path = "cpu", **overrides: Any) -> Config:
    """Load a profile by name (`configs/<name>.yaml`) or path, apply overrides, validate.

    Checked in this order, so an error is blamed where it lies: the profile as written (its top level), then each
    `per_env` block over it, then the overrides. An error names the key and where it is set: `file:line` for a key
    of the file (or the line of the nearest section above a key the file leaves at its default), `overrides` for
    one given here."""
    path = Path(profile)
    if path.suffix not in (".yaml", ".yml"):
        path = CONFIG_DIR / f"{profile}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise ConfigError(f"unknown profile {str(profile)!r}: expected one of {known} or a .yaml path")
    raw, lines = read_yaml_lines(path)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}:1: a profile must be a mapping of sections, got {type(raw).__name__}")
    raw.setdefault("profile", path.stem)
    _check_tree(overrides, "overrides")
    extra = _nest(overrides)

    def located(e: ConfigError, *within: tuple) -> ConfigError:
        """`e` with where its key is set: the overrides, else the file's line (under each prefix of `within`)."""
        keypath = _keypath(e.key) if e.key else ()
        if keypath and _has(extra, keypath):
            return ConfigError(f"overrides: {e}", e.key)
        for prefix in within:
            line = _line_of(lines, prefix + keypath, len(prefix) if prefix else 0)
            if line is not None:
                return ConfigError(f"{path}:{line}: {e}", e.key)
        return ConfigError(f"{path}: {e}", e.key)

    if "per_env" in extra:
        raise ConfigError(
            "per_env: set in the profile's YAML, not as an override (override the sections instead)",
            "per_env",
        )
    try:
        blocks = _per_env_blocks(raw.get("per_env", {}))
        _build(Config, {k: v for k, v in raw.items() if k != "series"}, "")  # the profile as written
    except ConfigError as e:
        raise located(e, ()) from None
    for name, block in blocks.items():  # every block is checked, not only the one this series applies
        try:
            _build(Config, _with_series(raw, name, block, {}), "")
        except ConfigError as e:
            blamed = ConfigError(f"per_env.{name}: {e}", e.key)
            line = _line_of(lines, ("per_env", name, *_keypath(e.key or "")), 2)
            raise ConfigError(f"{path}:{line}: {blamed}" if line else f"{path}: {blamed}", e.key) from None
    series = extra.get("series", raw.get("series"))
    try:
        if series is None:
            _merge(raw, extra, "")
            return _build(Config, raw, "")
        return _build(Config, _with_series(raw, series, blocks.get(series, {}), extra), "")
    except ConfigError as e:
        raise located(e, (), ("per_env", series)) from None


def _keypath(key: str) -> tuple:
    """`train.seeds[1]` as ('train', 'seeds', 1)."""
    out: list = []
    for part in key.split("."):
        name, *indices = part.split("[")
        if name:
            out.append(name)
        out += [int(i.rstrip("]")) for i in indices if i.rstrip("]").isdecimal()]
    return tuple(out)


def _has(tree: Any, keypath: tuple) -> bool:
    """Whether nested `tree` sets `keypath` (or a prefix of it to a value that is not a mapping)."""
    node = tree
    for k in keypath:
        inside = (
            k in node
            if isinstance(node, dict)
            else isinstance(node, list | tuple) and isinstance(k, int) and 0 <= k < len(node)
        )
        if inside:
            node = node[k]
        else:
            return node is not tree and not isinstance(node, dict)
    return True


def _line_of(lines: dict[tuple, int], keypath: tuple, keep: int = 0) -> int | None:
    """The line of `keypath` in the file, or of its longest prefix that is there (at least `keep` parts long)."""
    for n in range(len(keypath), keep - 1, -1):
        if n and keypath[:n] in lines:
            return lines[keypath[:n]]
    return None


def _check_tree(value: Any, key: str) -> None:
    """Overrides are Python values: mapping keys must be names, and nesting is bounded as in a file."""
    stack = [(value, key, 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep; no knob is", key)
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise ConfigError(
                        f"{where}: key {_show(k)} is not a name (keys are strings such as 'lr')", key
                    )
                stack.append((v, f"{where}.{k}", depth + 1))
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node))


def _per_env_blocks(per_env: Any) -> dict[str, dict]:
    """The profile's `per_env` mapping, checked: known environments, each a mapping that leaves `env.name`,
    `series` and `profile` alone."""
    if not isinstance(per_env, dict):
        raise ConfigError(
            f"per_env: expected a mapping of environment -> settings, got {_show(per_env)}", "per_env"
        )
    for name, block in per_env.items():
        if name not in available():
            raise ConfigError(
                f"per_env: {_show(name)} is not an environment; known: {available()}", "per_env"
            )
        if not isinstance(block, dict):
            raise ConfigError(
                f"per_env.{name}: expected a mapping of sections, got {_show(block)}", f"per_env.{name}"
            )
        for key in ("series", "per_env", "profile"):
            if key in block:
                raise ConfigError(f"per_env.{name}.{key}: not allowed in a per-environment block",
                                  f"per_env.{name}.{key}")  # fmt: skip
        if "name" in (block.get("env") or {}):
            raise ConfigError(f"per_env.{name}.env.name: not allowed (the series sets it to {name!r})",
                              f"per_env.{name}.env.name")  # fmt: skip
    return per_env


def _with_series(raw: dict, series: Any, block: dict, extra: dict) -> dict:
    """The profile `raw` as series `series` runs it: its `per_env` block, then the overrides, with env.name set."""
    if not isinstance(series, str) or series not in available():
        raise ConfigError(f"series: {_show(series)} is not an environment; known: {available()}", "series")
    asked = (extra.get("env") or {}).get("name") if isinstance(extra.get("env"), dict) else None
    if asked is not None and asked != series:
        raise ConfigError(f"env.name: {_show(asked)} contradicts series {series!r} (the series sets env.name; give "
                          "one)", "env.name")  # fmt: skip
    out = copy.deepcopy(raw)
    _merge(out, copy.deepcopy(block), "")
    _merge(out, copy.deepcopy(extra), "")
    out.setdefault("env", {})
    if not isinstance(out["env"], dict):
        raise ConfigError(f"env: expected a mapping, got {_show(out['env'])}", "env")
    out["env"]["name"] = series
    out["series"] = series
    return out


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "null": "null", "seq": "a list",
          "map": "a mapping", "timestamp": "a date", "binary": "binary data", "set": "a set"}  # fmt: skip


def read_yaml(path: Path) -> Any:
    """Parse a YAML file strictly (see `read_yaml_lines`)."""
    return read_yaml_lines(path)[0]


def read_yaml_lines(path: Path) -> tuple[Any, dict[tuple, int]]:
    """Parse a profile's YAML strictly; returns the data and the line of every key and list item (by key path).

    Every problem is a ConfigError naming the file and line: syntax errors; a key given twice in one mapping
    (YAML lets the last win); a key that is not a name (`1:`, `[a, b]:`, `yes:`, `null:`); nesting deeper than
    MAX_YAML_DEPTH; aliases that expand the file past MAX_YAML_VALUES values, or refer to a node that contains them;
    integers of more digits than any knob takes. Anchors, aliases and merge keys (`<<: *defaults`) work as in YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        _scan_events(text, path)
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            lines = {} if node is None else _walk(node, path)
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    except ConfigError:
        raise
    except (ValueError, TypeError, OverflowError) as e:  # a scalar YAML's constructors cannot convert
        raise ConfigError(f"{path}: YAML value error: {e}") from None
    return data, lines


@dataclass
class _Open:
    """A collection `_scan_events` is inside: its anchor, kind, values so far, children read and the current one's
    place (key or index)."""

    anchor: str | None
    mapping: bool
    values: int = 1
    children: int = 0
    at: str | int | None = None


def _scan_events(text: str, path: Path) -> None:
    """Bound nesting and alias expansion from the parser's events, before anything is built (the events are read
    one by one: a deep or explosive file costs no more than its length here). Errors name the line and the key."""
    loader = yaml.SafeLoader(text)
    stack: list[_Open] = []

    def where() -> str:
        parts = (str(f.at) if isinstance(f.at, str) else f"[{f.at}]" for f in stack if f.at is not None)
        text = ".".join(parts).replace(".[", "[") or "the top level"
        return text if len(text) <= 100 else text[:95] + " ..."

    try:
        sizes: dict[str, int] = {}  # anchor -> values of the node it names, aliases expanded
        total = 0
        while loader.check_event():
            ev = loader.get_event()
            line = ev.start_mark.line + 1
            if stack and isinstance(ev, yaml.NodeEvent):  # a child of the innermost collection begins
                top = stack[-1]
                if not top.mapping:
                    top.at = top.children
                elif top.children % 2 == 0:  # a key: the place of the value after it
                    top.at = ev.value if isinstance(ev, yaml.ScalarEvent) else "?"
            add = None  # values of a child that is complete now
            if isinstance(ev, yaml.CollectionStartEvent):
                total += 1
                stack.append(_Open(ev.anchor, isinstance(ev, yaml.MappingStartEvent)))
                if len(stack) > MAX_YAML_DEPTH:
                    raise ConfigError(f"{path}:{line}: {where()}: nested more than {MAX_YAML_DEPTH} levels deep (no "
                                      "knob is nested more than 4); flatten it")  # fmt: skip
            elif isinstance(ev, yaml.CollectionEndEvent):
                done = stack.pop()
                add = done.values
                if done.anchor is not None:
                    sizes[done.anchor] = add
            elif isinstance(ev, yaml.ScalarEvent):
                total += (add := 1)
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                if any(f.anchor == ev.anchor for f in stack):
                    raise ConfigError(f"{path}:{line}: {where()}: alias *{ev.anchor} refers to a node that contains "
                                      "it (a recursive value); no knob takes one")  # fmt: skip
                total += (add := sizes.get(ev.anchor, 1))
            if add is not None and stack:
                stack[-1].values += add
                stack[-1].children += 1
            if total > MAX_YAML_VALUES:
                raise ConfigError(f"{path}:{line}: {where()}: with its aliases expanded the file holds more than "
                                  f"{MAX_YAML_VALUES} values (a profile has a few hundred): every manifest would "
                                  "copy them all; write the values out or alias less")  # fmt: skip
    finally:
        loader.dispose()


def _walk(root: yaml.Node, path: Path) -> dict[tuple, int]:
    """Line of every key and list item by key path; refuses keys that are not names and keys given twice."""
    lines: dict[tuple, int] = {}
    stack: list[tuple[yaml.Node, tuple]] = [(root, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault((*where, i), item.start_mark.line + 1)
                stack.append((item, (*where, i)))
        elif isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            merged: list[yaml.Node] = []
            for key_node, value in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag == _MERGE_TAG:
                    merged += value.value if isinstance(value, yaml.SequenceNode) else [value]
                    continue
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                    kind = _KINDS.get(key_node.tag.rsplit(":", 1)[-1], key_node.tag)
                    shown = (
                        f"key {key_node.value!r}"
                        if isinstance(key_node, yaml.ScalarNode)
                        else f"a key that is {kind}"
                    )
                    dotted = ".".join(map(str, where)) or "the top level"
                    raise ConfigError(f"{path}:{line}: {shown} under {dotted} is not a name (YAML reads it as "
                                      f"{kind}); keys are names such as 'lr': quote it if it is one")  # fmt: skip
                k = key_node.value
                if k in seen:
                    raise ConfigError(f"{path}:{line}: key {k!r} is given twice in this mapping (first on line "
                                      f"{seen[k]}); remove one")  # fmt: skip
                seen[k] = line
                lines[(*where, k)] = line
                stack.append((value, (*where, k)))
            for m in merged:  # `<<: *defaults`: its keys, where this mapping does not set them itself
                if isinstance(m, yaml.MappingNode):
                    stack.append((yaml.MappingNode(m.tag, [(kn, v) for kn, v in m.value
                                                           if not (isinstance(kn, yaml.ScalarNode) and kn.value in seen)],
                                                   m.start_mark, m.end_mark), where))  # fmt: skip
        elif node.tag == _INT_TAG and len(node.value.lstrip("+-").replace("_", "")) > 30:
            dotted = ".".join(map(str, where))
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: {dotted}: an integer of {len(node.value)} digits "
                              f"is out of range; allowed: integers up to 2**31 - 1 = {INT_MAX}")  # fmt: skip
    return lines


def _nest(overrides: dict[str, Any]) -> dict[str, Any]:
    """Turn `train__lr=1e-4` into `{"train": {"lr": 1e-4}}`; nested dicts pass through."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split("__")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {p} is given as a value and as a section", key.replace("__", "."))
        node[parts[-1]] = value
    return nested


def _merge(base: dict, extra: dict, prefix: str) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value, f"{prefix}{key}.")
        else:
            base[key] = value


def _build(cls: type, data: Any, key: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{key or 'profile'}: expected a mapping, got {type(data).__name__}", key or None)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    where = f"{key}." if key else ""
    for name in data:
        if not isinstance(name, str):
            raise ConfigError(f"{key or 'profile'}: key {_show(name)} is not a name (keys are strings such as "
                              f"{sorted(fields)[0]!r})", key or None)  # fmt: skip
    unknown = sorted(set(data) - set(fields))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(fields), n=1)
        hint = f"did you mean '{where}{close[0]}'? " if close else ""
        raise ConfigError(f"unknown key '{where}{unknown[0]}'; {hint}known keys here: {sorted(fields)}",
                          f"{where}{unknown[0]}")  # fmt: skip
    kwargs = {}
    for name, value in data.items():
        meta = dict(fields[name].metadata)
        if "settings" in meta:
            kwargs[name] = _coerce_settings(meta["settings"], value, f"{where}{name}")
            continue
        kwargs[name] = _coerce(hints[name], value, f"{where}{name}")
        _check_domain(name, kwargs[name], meta, f"{where}{name}")
    obj = cls(**kwargs)
    if hasattr(obj, "check"):
        obj.check(key)
    return obj


def _coerce_settings(schemas: dict[str, type], value: Any, key: str) -> dict[str, dict]:
    """`env.extra`: each environment's block checked against its section (ENV_SETTINGS), kept with only its keys."""
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: expected a mapping of environment -> settings, got {_show(value)}", key)
    out = {}
    for env, block in value.items():
        if env not in available():
            raise ConfigError(f"{key}: {_show(env)} is not an environment; known: {available()}", key)
        if env not in schemas:
            raise ConfigError(f"{key}.{env}: {env}'s settings are not declared here; "
                              + ("they are the section env.frozenlake" if env == "frozenlake" else
                                 "declare them in helpers/config.py ENV_SETTINGS"), f"{key}.{env}")  # fmt: skip
        if not isinstance(block, dict):
            raise ConfigError(
                f"{key}.{env}: expected a mapping of settings, got {_show(block)}", f"{key}.{env}"
            )
        built = _build(schemas[env], block, f"{key}.{env}")
        out[env] = {k: getattr(built, k) for k in block}
    return out


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if isinstance(value, bool) or value not in allowed:
            raise ConfigError(f"{key}: {_show(value)} is not one of {list(allowed)}", key)
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, key)
            except ConfigError as e:
                errors.append(e)
        raise errors[0] if errors else ConfigError(f"{key}: bad value {_show(value)}", key)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list, got {_show(value)}", key)
        return [_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {_show(value)}", key)
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_show(value)}", key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_show(value)}", key)
        if not -INT_MAX - 1 <= value <= INT_MAX:
            raise ConfigError(f"{key}: {_show(value)} is out of range; allowed: integers up to 2**31 - 1 = {INT_MAX} "
                              "(every integer knob; most have tighter bounds)", key)  # fmt: skip
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {_show(value)}", key)
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(f"{key}: {_show(value)} is not a finite number (allowed: finite numbers; .nan, .inf "
                              "and values past 1.8e308 such as 1e999 are not)", key)  # fmt: skip
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_show(value)}", key)
        return value
    raise ConfigError(f"{key}: unsupported type {tp}", key)  # pragma: no cover - a schema bug, not user input


def _require(ok: bool, key: str, value: Any, what: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {_show(value)} is out of range (expected {what})", key)
