"""The verdict of scripts/gpu_check_steps.py: a TRL step passes or fails only on what its log shows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import gpu_check_steps as steps

sys.path.pop(0)


def result(history: list[dict], unchanged: list[str], rc: int = 0) -> dict:
    return {"rc": rc, "signal": steps.learning_signal(history), "unchanged_tensors": unchanged}


FLAT = [{"step": 1, "frac_reward_zero_std": 1.0, "reward_std": 0.0}, {"step": 2, "loss": 0.0}]
VARIED = [
    {"step": 1, "frac_reward_zero_std": 1.0, "reward_std": 0.0},
    {"step": 2, "frac_reward_zero_std": 0.5, "reward_std": 0.4},
]


def test_no_reward_variance_is_its_own_outcome_whatever_moved():
    assert steps.outcome(result(FLAT, ["a", "b"])) == ("no-signal", steps.EXIT_NO_SIGNAL)
    assert steps.outcome(result(FLAT, [])) == ("no-signal", steps.EXIT_NO_SIGNAL)


def test_with_a_learning_signal_every_tensor_must_move():
    assert steps.learning_signal(VARIED)["steps_with_signal"] == [2]
    assert steps.outcome(result(VARIED, [])) == ("pass", steps.EXIT_PASS)
    assert steps.outcome(result(VARIED, ["model.norm.weight"])) == ("fail", steps.EXIT_FAIL)


def test_a_failed_run_or_a_log_without_rewards_fails():
    assert steps.outcome(result(VARIED, [], rc=1)) == ("fail", steps.EXIT_FAIL)
    assert steps.outcome(result([{"step": 1, "loss": 0.1}], [])) == ("fail", steps.EXIT_FAIL)
    # the RL loop (no TRL log): every tensor must move
    assert steps.outcome({"unchanged_tensors": []}) == ("pass", steps.EXIT_PASS)
    assert steps.outcome({"unchanged_tensors": ["x"]}) == ("fail", steps.EXIT_FAIL)
