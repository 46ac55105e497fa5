"""The optional `qwen3_4b` step of scripts/gpu_check.sh (scripts/gpu_check_steps.py `qwen3`), on CPU.

On a GPU box it runs when Qwen/Qwen3-4B is complete in the local Hugging Face cache; here: the skip when it is not
(an empty HF_HOME), the model-folder checks, and (slow) the whole step end to end on a tiny Qwen3 with the real
tokenizer, named through GPU_CHECK_QWEN3 as a box would name a local copy.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from helpers import models
from helpers import qwen3_tokenizer as q
from helpers.config import TinyModelConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import gpu_check_steps as steps

sys.path.pop(0)


def test_without_qwen3_in_the_cache_the_step_is_skipped_with_its_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(steps.QWEN3_ENV, raising=False)
    report = tmp_path / "qwen3_4b.json"
    assert steps.main(["qwen3", "--device", "cpu", "--json", str(report)]) == steps.EXIT_SKIPPED
    result = json.loads(report.read_text())
    assert (
        result["outcome"] == "skipped"
        and "Qwen/Qwen3-4B is not in the local Hugging Face cache" in result["reason"]
    )
    assert "qwen3: SKIPPED" in capsys.readouterr().out
    assert steps.qwen3_outcome(result) == ("skipped", steps.EXIT_SKIPPED)


def test_a_folder_missing_a_weight_shard_is_not_run(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"")
    folder, reason = steps.find_qwen3(str(tmp_path))
    assert folder is None and "model-00002-of-00002.safetensors" in reason
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"")
    assert steps.find_qwen3(str(tmp_path)) == (tmp_path, "")
    assert steps.find_qwen3(str(tmp_path / "nowhere"))[0] is None
    assert steps.missing_model_files(tmp_path / "nowhere") == [
        "config.json",
        "tokenizer_config.json",
        "model.safetensors (or model.safetensors.index.json)",
    ]


def test_the_verdict_needs_moved_weights_and_finite_numbers():
    ok = {"update": {"pg_loss": 0.1, "kl": 0.0}, "unchanged_watched_tensors": []}
    assert steps.qwen3_outcome(ok) == ("pass", steps.EXIT_PASS)
    assert steps.qwen3_outcome({**ok, "unchanged_watched_tensors": ["x"]}) == ("fail", steps.EXIT_FAIL)
    # no reward variance in any group: nothing had to move
    flat = {**ok, "unchanged_watched_tensors": ["x"], "reward_variance": False}
    assert steps.qwen3_outcome(flat) == ("pass", steps.EXIT_PASS)
    assert steps.qwen3_outcome({**ok, "update": {"pg_loss": float("nan")}}) == ("fail", steps.EXIT_FAIL)


def test_the_learning_signal_is_the_reward_the_update_sees():
    """Reward variance is measured on `rl_reward` (what ppo_update's advantages use), not on the environment's reward:
    an episode that reached the goal but filled the context (or ran out of budget) counts 0."""

    def traj(reward: float, context_full: bool = False, exhausted: bool = False) -> SimpleNamespace:
        return SimpleNamespace(reward=reward, context_full=context_full, exhausted=exhausted)

    assert steps.reward_variance([traj(1.0), traj(0.0)], 2)
    assert not steps.reward_variance([traj(1.0, context_full=True), traj(0.0)], 2)
    assert not steps.reward_variance([traj(1.0, exhausted=True), traj(0.0)], 2)
    # groups are consecutive: variance across two groups is none within either
    assert not steps.reward_variance([traj(1.0), traj(1.0), traj(0.0), traj(0.0)], 2)
    assert steps.reward_variance([traj(1.0), traj(1.0), traj(0.0), traj(1.0)], 2)


def test_the_qwen3_step_runs_end_to_end_on_a_tiny_qwen3(qwen3_dir, tmp_path, monkeypatch):
    """A random Qwen3 of width 32 with Qwen3's real tokenizer and 151,936-row embedding, named by GPU_CHECK_QWEN3:
    one rollout batch (1 task x 2 samples: a group) and one update in bfloat16 compute on CPU; the report has every phase."""
    folder = tmp_path / "tiny-qwen3"
    shutil.copytree(qwen3_dir, folder)
    tok = q.load(folder)
    size = TinyModelConfig(
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        max_position_embeddings=4096,
    )
    models.tiny_model(size, tok, vocab_size=q.VOCAB_SIZE).save_pretrained(folder)
    monkeypatch.setenv(steps.QWEN3_ENV, str(folder))
    report = tmp_path / "qwen3_4b.json"
    code = steps.main(
        [
            "qwen3",
            "--device",
            "cpu",
            "--tasks",
            "1",
            "--max-new-tokens",
            "8",
            "--lr",
            "1e-3",
            "--json",
            str(report),
        ]
    )
    result = json.loads(report.read_text())
    assert code == steps.EXIT_PASS and result["outcome"] == "pass", result
    assert result["model"] == str(folder) and result["trajectories"] == 2 and result["generated_tokens"] > 0
    assert set(result["phases"]) == {"load", "rollout", "update"}
    assert all(p["seconds"] >= 0 and p["peak_allocated_gib"] is None for p in result["phases"].values())
    assert result["peak_gib"] is None and result["unchanged_watched_tensors"] == []
