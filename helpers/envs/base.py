"""The environment interface every environment of the kit implements, and the registry.

Records flow one way: an `Env` turns a `Task` and a budget into opening chat messages, then each action text
into a `StepResult`. Environments are deterministic given (task, seed, actions), so a state is stored as
task + seed + action prefix and replays exactly. Malformed actions never raise: they use up the turn, get an
observation saying what was wrong, and set `info["invalid"] = True`.

Step oracles. An environment says whether it has an exact per-step oracle with the class attribute `step_oracle`
(and why, or what the oracle is, in `oracle_note`). Where it is True, `step_quality` scores any action at any
state and the environment also implements the `StepOracle` methods the step-level analyses (notebooks 04 and 05,
`helpers.probing`) need: whether a state is dead (`is_dead`), the best success still achievable (`best_success`),
and how an error is made there (`error_action`): the environment, not the analysis, owns what an incorrect
action is. `step_oracle(name)` reads both attributes without building an environment.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

SPLITS = ("train", "test")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Task:
    """One task instance: `payload` holds everything the environment needs (a map, a problem, ...)."""

    task_id: str
    env: str
    payload: dict
    t_max: int

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "env": self.env, "payload": self.payload, "t_max": self.t_max}

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(task_id=d["task_id"], env=d["env"], payload=d["payload"], t_max=int(d["t_max"]))


# A reply longer than this is refused before any parsing or running (an invalid action saying so): a 6 MB BFCL reply
# holding one call cost the kit's process 2.8 GB while parsing. No legitimate reply comes near it (the longest
# ground-truth BFCL reply, SQL query or reference program is a few KB; the policies generate at most a few thousand
# tokens).
MAX_REPLY_BYTES = 64 * 1024

_SURROGATES = re.compile("[\ud800-\udfff]")


def oversized(text: str, limit: int = MAX_REPLY_BYTES) -> str | None:
    """Why a reply is refused for its size (its UTF-8 length over `limit` bytes), or None; costs no more than
    encoding it once, and nothing for a reply under a quarter of the limit in characters."""
    if len(text) * 4 <= limit:
        return None
    size = len(text) if len(text) > limit else len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return f"the reply is over {limit} bytes long ({size} or more); nothing in it was parsed or run"


def valid_text(text: str) -> str:
    """`text` with every lone surrogate (the only code points UTF-8 cannot encode) replaced by U+FFFD, so any
    tokenizer can encode it: a program's `raise ValueError(chr(0xD800))` put one into an observation and the
    rollout's tokenisation raised out of a training run."""
    if text.isascii():
        return text
    return _SURROGATES.sub("\ufffd", text)


@dataclass
class StepResult:
    """What one action produced. The observation is made valid text here, at the environment boundary
    (`valid_text`), whatever the environment put into it."""

    observation: str
    reward: float
    done: bool
    success: bool
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.observation = valid_text(str(self.observation))


@runtime_checkable
class Env(Protocol):
    """A multi-turn text environment."""

    name: str
    done: bool  # True once the episode has ended (goal, failure, or budget used up)
    # True where `step_quality` is an exact per-step oracle (then `StepOracle` is implemented too)
    step_oracle: bool
    oracle_note: str  # what the oracle is, or why there is none (recorded by the notebooks that need one)

    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        """Start an episode with `budget` turns; returns the opening chat messages (budget stated)."""

    def step(self, action_text: str) -> StepResult:
        """Apply one action (one model reply); uses one turn of the budget."""

    def step_quality(self, action_text: str) -> float | None:
        """Score an action in the current state without changing it; None where no oracle exists."""


@runtime_checkable
class StepOracle(Protocol):
    """What an environment with `step_oracle = True` also implements, for step probing and error recovery."""

    def is_dead(self) -> bool:
        """True where no action can still succeed in the remaining turns (every action then scores the same, so
        the state says nothing about a step's quality)."""

    def best_success(self) -> float | None:
        """The best success probability still achievable from the current state within the remaining turns (the
        structural upper bound of a continuation from here); None where it is unknown."""

    def error_action(self, seed: int, attempts: Sequence[str] = ()) -> str | None:
        """An incorrect action at the current state, chosen deterministically from `seed`, after which the episode
        goes on (something is left to recover from); None where none exists. `attempts` are replies other agents
        made on this task (e.g. the base policy's own): an environment may inject one of them that is incorrect
        here, so the error is one a policy really makes; environments whose errors follow from the oracle alone
        ignore them. The state is unchanged; the caller applies the action with `step`."""


# name -> "module:Class"; modules are imported on first use so a missing optional dependency of one
# environment never breaks the others.
_REGISTRY: dict[str, str] = {
    "frozenlake": "helpers.envs.frozenlake:FrozenLakeEnv",
    "deepcoder": "helpers.envs.code:CodeEnv",
    "bfcl": "helpers.envs.bfcl:BFCLEnv",
    "intercode_sql": "helpers.envs.sql:SQLEnv",
}


def register(name: str, target: str) -> None:
    """Register an environment class given as 'module:Class'."""
    _REGISTRY[name] = target


def available() -> list[str]:
    """Names of the registered environments."""
    return sorted(_REGISTRY)


def env_class(name: str) -> Any:
    """The class registered under `name` (imported on demand)."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown environment {name!r}; registered: {available()}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def step_oracle(name: str) -> dict:
    """Whether environment `name` has an exact step oracle, and what it is or why there is none:
    {"env", "step_oracle", "oracle_note"} (read from the class; nothing is built or loaded)."""
    cls = env_class(name)
    return {
        "env": name,
        "step_oracle": bool(getattr(cls, "step_oracle", False)),
        "oracle_note": str(getattr(cls, "oracle_note", "the environment does not declare a step oracle")),
    }


def require_step_oracle(name: str, what: str) -> None:
    """Fail with a message naming the environment and why, where `what` needs a step oracle it lacks."""
    info = step_oracle(name)
    if not info["step_oracle"]:
        raise ValueError(f"{what} needs a step oracle; environment {name!r} has none: {info['oracle_note']}")


def check_split(split: str, env: str = "") -> None:
    """Fail unless `split` is 'train' or 'test' (every environment's `load_tasks` calls this first); `env` prefixes
    the message."""
    if split not in SPLITS:
        raise ValueError(f"{env + ': ' if env else ''}split must be 'train' or 'test', got {split!r}")


def seeded_subset(items: Sequence[_T], n: int | None, seed: int) -> list[_T]:
    """`n` of `items` drawn without replacement by `seed`, kept in their stored order; all of them where `n` is
    None or not below `len(items)`. The one seeded draw every environment's `load_tasks` makes."""
    if n is None or n >= len(items):
        return list(items)
    pick = np.sort(np.random.default_rng(seed).choice(len(items), size=n, replace=False))
    return [items[i] for i in pick]


# A time limit that decides an outcome (a query's, a backend call's) counts CPU time of the thread or process doing
# the work, so a busy machine only slows the work down. A wall-clock bound STALL_FACTOR times as large (at least
# STALL_MIN_S) stays beside it as a stall guard: work that the CPU limit lets finish gets at least 1/STALL_FACTOR of
# a core for that long, so the guard trips only on a stopped or starved process, and the result says so.
STALL_FACTOR = 30
STALL_MIN_S = 30.0


def stall_guard_s(cpu_limit_s: float) -> float:
    """The wall-clock stall guard beside a CPU-time limit of `cpu_limit_s` seconds."""
    return max(STALL_MIN_S, STALL_FACTOR * float(cpu_limit_s))


def make(name: str, **cfg: Any) -> Env:
    """A fresh environment instance; `cfg` are that environment's settings."""
    return env_class(name)(**cfg)


def load_tasks(
    name: str, split: str, n: int | None = None, source: str = "bundled", seed: int = 0, **cfg: Any
) -> list[Task]:
    """Tasks of one split ('train' or 'test'); splits are disjoint by construction and checked."""
    check_split(split)
    if source not in ("bundled", "hub"):
        raise ValueError(f"source must be 'bundled' or 'hub', got {source!r}")
    tasks = env_class(name).load_tasks(split, n=n, source=source, seed=seed, **cfg)
    if not tasks:
        raise ValueError(
            f"{name}: no {split} tasks (source={source!r}, n={n}, settings {cfg}); nothing to run on"
        )
    return tasks


def play(env: Env, task: Task, budget: int, player: Any, seed: int = 0) -> tuple[list[dict], StepResult]:
    """Play one episode with a scripted `player(env) -> action_text`; returns the chat transcript and the
    last step's result. Used by notebook 00 and by the demonstrations the tiny base learns from."""
    transcript = list(env.reset(task, budget, seed=seed))
    result = None
    while not env.done:
        action = player(env)
        result = env.step(action)
        transcript.append({"role": "assistant", "content": action})
        transcript.append({"role": "user", "content": result.observation})
    return transcript, result


def format_transcript(messages: list[dict]) -> str:
    """A chat transcript as readable text."""
    return "\n".join(f"--- {m['role']}\n{m['content']}" for m in messages)


def settings(cfg: Any, name: str | None = None) -> dict:
    """The settings of environment `name` (default: the profile's) from a profile, for make/load_tasks."""
    name = name or cfg.env.name
    section = getattr(cfg.env, name, None)
    if section is not None and dataclasses.is_dataclass(section):
        return plain(section)
    return dict(cfg.env.extra.get(name, {}))


def plain(obj: Any) -> Any:
    """`dataclasses.asdict`, except that a field declared with `omit_default` in its metadata is left out while it
    holds its default: a knob added later keeps the dicts, and so the hashes and recipes, of every profile that does
    not set it (`config.knob(..., omit_default=True)`, e.g. `env.frozenlake.select_min_gap`)."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return copy.deepcopy(obj)
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("omit_default") and f.default is not dataclasses.MISSING and value == f.default:
            continue
        out[f.name] = plain(value)
    return out
