"""Profiles: one typed, validated place for every knob of the kit.

A profile is a YAML file in `configs/` (smoke, cpu, cpu_process, gpu, paper). `load(profile, **overrides)`
reads it, applies overrides, and builds the frozen dataclasses below. Every section and key is declared here
with a type; an unknown key, a value of the wrong type or an out-of-range value is an error that names the key
(`train.lr`), so a typo in a profile or a Papermill parameter never silently falls back to a default.

Overrides use either nested dicts (`load("cpu", train={"lr": 1e-4})`) or double underscores
(`load("cpu", train__lr=1e-4)`), so they can be passed as notebook parameters.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from helpers.envs import available

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"


class ConfigError(ValueError):
    """A profile or override is invalid; the message names the offending key."""


# --------------------------------------------------------------------------------------------- domains


def knob(default: Any, doc: str = "", *, ge=None, gt=None, le=None, lt=None, nonempty: bool = False,
         increasing: bool = False) -> Any:  # fmt: skip
    """A declared knob: its default, what it means, and its domain (checked when a profile loads).

    `ge` / `gt` / `le` / `lt` bound a number (each item of a list); `nonempty` requires at least one item;
    `increasing` requires strictly increasing items. Relations between knobs live in each section's `check`.
    """
    meta = {
        "doc": doc,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "nonempty": nonempty,
        "increasing": increasing,
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
        raise ConfigError(f"{key}: an empty list is not allowed (give at least one value)")
    if meta.get("increasing") and any(b <= a for a, b in itertools.pairwise(items)):
        raise ConfigError(
            f"{key}: {value!r} is not strictly increasing (expected strictly increasing values)"
        )
    for v in items:
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        bad = ((meta.get("ge") is not None and v < meta["ge"]) or (meta.get("gt") is not None and v <= meta["gt"])
               or (meta.get("le") is not None and v > meta["le"]) or (meta.get("lt") is not None and v >= meta["lt"]))  # fmt: skip
        if bad:
            what = f" ({meta['doc']})" if meta.get("doc") else ""
            raise ConfigError(f"{key}: {value!r} is out of range; allowed: {_domain(meta)}{what}")


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


@dataclass(frozen=True)
class EnvConfig:
    """Which environment the training notebooks use, and each environment's own settings."""

    name: str = "frozenlake"
    frozenlake: FrozenLakeConfig = field(default_factory=FrozenLakeConfig)
    # Other environments keep their settings as free-form dicts until they declare a section here.
    extra: dict[str, dict] = field(default_factory=dict)

    def check(self, key: str) -> None:
        known = available()
        if self.name not in known:
            raise ConfigError(f"{key}.name: {self.name!r} is not an environment; known: {known}")
        for env, settings in self.extra.items():
            if env not in known:
                raise ConfigError(f"{key}.extra: {env!r} is not an environment; known: {known}")
            if not isinstance(settings, dict):
                raise ConfigError(f"{key}.extra.{env}: expected a mapping of settings, got {settings!r}")


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
    """The base model: `tiny` (built by the kit) or a hub name / local path (Qwen/Qwen3-4B)."""

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
        if self.device not in ("auto", "cpu", "cuda") and not (
            self.device.startswith("cuda:") and self.device[5:].isdigit()
        ):
            raise ConfigError(
                f"{key}.device: {self.device!r} is not a device; allowed: auto, cpu, cuda, cuda:N"
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
            raise ConfigError(f"{key}.seeds: {self.seeds!r} repeats a seed (expected distinct seeds)")
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
            raise ConfigError(f"{key}.env: {self.env!r} is not an environment; known: {available()}")
        if len(set(self.algorithms)) != len(self.algorithms):
            raise ConfigError(
                f"{key}.algorithms: {self.algorithms!r} repeats an estimator (expected distinct ones)"
            )
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"{key}.seeds: {self.seeds!r} repeats a seed (expected distinct seeds)")
        if self.corruption_levels and "oracle_q" not in self.algorithms:
            raise ConfigError(f"{key}.corruption_levels: {self.corruption_levels!r} needs oracle_q among "
                              "process.algorithms (or leave it empty)")  # fmt: skip


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
                len(nn) == 2 and nn.isdigit(), f"{key}.skip", self.skip, "two-digit notebook numbers ('07')"
            )


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

    def to_dict(self) -> dict:
        """Plain nested dict (for manifests and hashing)."""
        return dataclasses.asdict(self)

    @property
    def results_name(self) -> str:
        """This run's folder under results/: `<profile>`, or `<profile>/<env>` in a per-environment series.
        Notebooks pass it to `helpers.store` and `helpers.report` wherever they read or write a series' results."""
        return self.profile if self.series is None else f"{self.profile}/{self.series}"


# --------------------------------------------------------------------------------------------- loading


def load(profile: str | Path = "cpu", **overrides: Any) -> Config:
    """Load a profile by name (`configs/<name>.yaml`) or path, apply overrides, validate."""
    path = Path(profile)
    if path.suffix not in (".yaml", ".yml"):
        path = CONFIG_DIR / f"{profile}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise ConfigError(f"unknown profile {str(profile)!r}: expected one of {known} or a .yaml path")
    raw = read_yaml(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a profile must be a mapping of sections")
    raw.setdefault("profile", path.stem)
    extra = _nest(overrides)
    if "per_env" in extra:
        raise ConfigError(
            "per_env: set in the profile's YAML, not as an override (override the sections instead)"
        )
    blocks = _per_env_blocks(raw.get("per_env", {}))
    for name, block in blocks.items():  # every block is checked, not only the one this series applies
        try:
            _build(Config, _with_series(raw, name, block, {}), "")
        except ConfigError as e:
            raise ConfigError(f"{path}: per_env.{name}: {e}") from None
    series = extra.get("series", raw.get("series"))
    if series is None:
        _merge(raw, extra, "")
        return _build(Config, raw, "")
    return _build(Config, _with_series(raw, series, blocks.get(series, {}), extra), "")


def _per_env_blocks(per_env: Any) -> dict[str, dict]:
    """The profile's `per_env` mapping, checked: known environments, each a mapping that leaves `env.name`,
    `series` and `profile` alone."""
    if not isinstance(per_env, dict):
        raise ConfigError(f"per_env: expected a mapping of environment -> settings, got {per_env!r}")
    for name, block in per_env.items():
        if name not in available():
            raise ConfigError(f"per_env: {name!r} is not an environment; known: {available()}")
        if not isinstance(block, dict):
            raise ConfigError(f"per_env.{name}: expected a mapping of sections, got {block!r}")
        for key in ("series", "per_env", "profile"):
            if key in block:
                raise ConfigError(f"per_env.{name}.{key}: not allowed in a per-environment block")
        if "name" in (block.get("env") or {}):
            raise ConfigError(f"per_env.{name}.env.name: not allowed (the series sets it to {name!r})")
    return per_env


def _with_series(raw: dict, series: Any, block: dict, extra: dict) -> dict:
    """The profile `raw` as series `series` runs it: its `per_env` block, then the overrides, with env.name set."""
    if not isinstance(series, str) or series not in available():
        raise ConfigError(f"series: {series!r} is not an environment; known: {available()}")
    asked = (extra.get("env") or {}).get("name") if isinstance(extra.get("env"), dict) else None
    if asked is not None and asked != series:
        raise ConfigError(
            f"env.name: {asked!r} contradicts series {series!r} (the series sets env.name; give one)"
        )
    out = copy.deepcopy(raw)
    _merge(out, copy.deepcopy(block), "")
    _merge(out, copy.deepcopy(extra), "")
    out.setdefault("env", {})
    if not isinstance(out["env"], dict):
        raise ConfigError(f"env: expected a mapping, got {out['env']!r}")
    out["env"]["name"] = series
    out["series"] = series
    return out


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (YAML lets the last win)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        k = loader.construct_object(key_node, deep=deep)
        if k in seen:
            raise ConfigError(f"{loader.name}:{key_node.start_mark.line + 1}: key {k!r} is given twice in this mapping "
                              f"(first on line {seen[k]}); remove one")  # fmt: skip
        seen[k] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file strictly: syntax errors and duplicated keys name the file and line."""
    text = path.read_text()
    loader = _StrictLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    finally:
        loader.dispose()


def _nest(overrides: dict[str, Any]) -> dict[str, Any]:
    """Turn `train__lr=1e-4` into `{"train": {"lr": 1e-4}}`; nested dicts pass through."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split("__")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
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
        raise ConfigError(f"{key or 'profile'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        where = f"{key}." if key else ""
        raise ConfigError(f"unknown key '{where}{unknown[0]}'; known keys here: {sorted(names)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for name, value in data.items():
        where = f"{key}.{name}" if key else name
        kwargs[name] = _coerce(hints[name], value, where)
        _check_domain(name, kwargs[name], dict(fields[name].metadata), where)
    obj = cls(**kwargs)
    if hasattr(obj, "check"):
        obj.check(key)
    return obj


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {list(allowed)}")
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
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{key}: bad value {value!r}")
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {tp}")  # pragma: no cover - a schema bug, not user input


def _require(ok: bool, key: str, value: Any, what: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {value!r} is out of range (expected {what})")
