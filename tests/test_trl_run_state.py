"""The TRL path's run state without training: world size from the launcher and in the run folder, the rollout
counter in checkpoints."""

from __future__ import annotations

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from helpers import config, models
from helpers import train_trl as tt
from helpers.envs import load_tasks, settings


def test_world_size_comes_from_the_launcher(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert tt.world_size() == 2
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        tt.world_size()
    monkeypatch.delenv("WORLD_SIZE")
    assert tt.world_size() == 1  # no launcher: accelerate's single process


def test_runs_of_different_world_sizes_never_share_a_folder():
    cfg = config.load("smoke")
    one, two, four = (tt.trl_dir(cfg, "budgetmix", False, w) for w in (1, 2, 4))
    assert len({one, two, four}) == 3
    assert tt.trl_dir(cfg, "budgetmix", False, 2) == two  # and the same world size finds its own again


def test_the_rollout_counter_is_checkpointed_and_restored(tmp_path):
    cfg = config.load("smoke")
    tok = models.train_tokenizer(["system user assistant <answer>Left</answer>"] * 5, vocab_size=300)
    tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **settings(cfg))
    rollout_fn = tt.KitRollout(cfg, "full", tasks, tok)
    rollout_fn.calls = 7
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    state = TrainerState(global_step=3)
    tt.RolloutCounter(rollout_fn).on_save(args, state, TrainerControl())
    checkpoint = tmp_path / "checkpoint-3"
    assert (checkpoint / tt.ROLLOUT_STATE).exists()
    resumed = tt.KitRollout(cfg, "full", tasks, tok)
    assert resumed.calls == 0
    tt.restore_rollout_calls(resumed, checkpoint)
    assert resumed.calls == 7
    tt.restore_rollout_calls(resumed, None)  # a fresh run: nothing to restore
    assert resumed.calls == 7
