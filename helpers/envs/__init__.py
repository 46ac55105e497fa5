"""Environments: FrozenLake (planning), and the others registered in `base._REGISTRY`."""

from helpers.envs.base import (
    Env,
    StepResult,
    Task,
    available,
    format_transcript,
    load_tasks,
    make,
    play,
    register,
    settings,
)

__all__ = [
    "Env",
    "StepResult",
    "Task",
    "available",
    "format_transcript",
    "load_tasks",
    "make",
    "play",
    "register",
    "settings",
]
