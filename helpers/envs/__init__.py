"""Environments: FrozenLake (planning), and the others registered in `base._REGISTRY`."""

from helpers.envs.base import (
    Env,
    StepOracle,
    StepResult,
    Task,
    available,
    format_transcript,
    load_tasks,
    make,
    play,
    register,
    require_step_oracle,
    settings,
    step_oracle,
)

__all__ = [
    "Env",
    "StepOracle",
    "StepResult",
    "Task",
    "available",
    "format_transcript",
    "load_tasks",
    "make",
    "play",
    "register",
    "require_step_oracle",
    "settings",
    "step_oracle",
]
