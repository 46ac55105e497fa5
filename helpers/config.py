"""Profiles: one typed, validated place for every knob of the kit.

A profile is a YAML file in `configs/` (smoke, cpu, cpu_process, gpu, paper). `load(profile, **overrides)`
reads it, applies overrides, and builds the frozen dataclasses of `helpers.config_sections` into a `Config`.
Every section and key is declared with a type; an unknown key, a value of the wrong type or an out-of-range
value is an error that names the key (`train.lr`), so a typo in a profile or a Papermill parameter never
silently falls back to a default.

Overrides use either nested dicts (`load("cpu", train={"lr": 1e-4})`) or double underscores (`load("cpu",
train__lr=1e-4)`), so they can be passed as notebook parameters.

Every value is checked before anything uses it: numbers are finite (no .nan, .inf or 1e999), integers at most
INT_MAX, digits ASCII, the profile's name one folder under results/, and each environment's `env.extra` block
against its declared section (ENV_SETTINGS). The YAML reader bounds nesting and alias expansion
(MAX_YAML_DEPTH, MAX_YAML_VALUES: every manifest copies the expanded values), takes anchors, aliases and merge
keys as YAML defines them, and refuses a key given twice or a key that is not a name. Every error is a
ConfigError that names the key and where it is set: `file:line` in the profile, or `overrides`.

The config in five files, one concept each, read top to bottom:
- `helpers.config` (this file): the whole profile (`Config`, `EnvConfig`, `ENV_SETTINGS`) and `load`, with the
  per-environment series (`per_env` blocks, `series`) and the overrides merged over the file;
- `helpers.config_sections`: the sections, each knob with its type, default, meaning and domain;
- `helpers.config_types`: `ConfigError`, `knob` and the type and range layer (`_build`, `_coerce`), and why it
  is not pydantic;
- `helpers.config_yaml`: the strict YAML reader with the line of every key;
- `helpers.config_schema`: a JSON Schema of a profile for editors (`python -m helpers.config_schema`).
Import the config's names from here (`from helpers import config`; `config.load`, `config.TrainConfig`, ...).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.config_sections import (
    DATA_ENV,
    DB_NAME,
    REPO_ROOT,
    BFCLSettings,
    DeepCoderSettings,
    EvalConfig,
    FrozenLakeConfig,
    ModelConfig,
    ProbingConfig,
    ProcessConfig,
    RunConfig,
    SamplingConfig,
    SFTConfig,
    SQLSettings,
    SweepConfig,
    TinyModelConfig,
    TrainConfig,
    confined,
    data_roots,
)
from helpers.config_types import INT_MAX, ConfigError, _build, _show, knob
from helpers.config_yaml import MAX_YAML_DEPTH, MAX_YAML_VALUES, read_yaml, read_yaml_lines
from helpers.envs import available
from helpers.envs.base import plain

__all__ = [
    "CONFIG_DIR",
    "DATA_ENV",
    "DB_NAME",
    "ENV_SETTINGS",
    "INT_MAX",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "PROFILE_NAME",
    "REPO_ROOT",
    "BFCLSettings",
    "Config",
    "ConfigError",
    "DeepCoderSettings",
    "EnvConfig",
    "EvalConfig",
    "FrozenLakeConfig",
    "ModelConfig",
    "ProbingConfig",
    "ProcessConfig",
    "RunConfig",
    "SFTConfig",
    "SQLSettings",
    "SamplingConfig",
    "SweepConfig",
    "TinyModelConfig",
    "TrainConfig",
    "confined",
    "data_roots",
    "knob",
    "load",
    "read_yaml",
    "read_yaml_lines",
    "reported_settings",
]

CONFIG_DIR = REPO_ROOT / "configs"
PROFILE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # one folder name under results/ (see Config.check)


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
            raise ConfigError(
                f"profile: {_show(self.profile)} is not a profile name (expected ASCII letters, digits, "
                "'_', '-' and '.', starting with a letter or digit, at most 64: one folder under "
                "results/)",
                "profile",
            )

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
                raise ConfigError(
                    f"per_env.{name}.{key}: not allowed in a per-environment block", f"per_env.{name}.{key}"
                )
        if "name" in (block.get("env") or {}):
            raise ConfigError(
                f"per_env.{name}.env.name: not allowed (the series sets it to {name!r})",
                f"per_env.{name}.env.name",
            )
    return per_env


def _with_series(raw: dict, series: Any, block: dict, extra: dict) -> dict:
    """The profile `raw` as series `series` runs it: its `per_env` block, then the overrides, with env.name set."""
    if not isinstance(series, str) or series not in available():
        raise ConfigError(f"series: {_show(series)} is not an environment; known: {available()}", "series")
    asked = (extra.get("env") or {}).get("name") if isinstance(extra.get("env"), dict) else None
    if asked is not None and asked != series:
        raise ConfigError(
            f"env.name: {_show(asked)} contradicts series {series!r} (the series sets env.name; give one)",
            "env.name",
        )
    out = copy.deepcopy(raw)
    _merge(out, copy.deepcopy(block), "")
    _merge(out, copy.deepcopy(extra), "")
    out.setdefault("env", {})
    if not isinstance(out["env"], dict):
        raise ConfigError(f"env: expected a mapping, got {_show(out['env'])}", "env")
    out["env"]["name"] = series
    out["series"] = series
    return out


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
