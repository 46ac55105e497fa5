"""Results depend on the recipe, never on the machine's speed (issue 31): SFT of the base and RL steps in a
throttled process (stopped and continued every 50 ms, so it runs at half speed or less, beside an unthrottled
twin) give the same records and weights as the unthrottled run; SFT's wall-clock guard `sft.max_seconds` stops the
run with an error naming the knob and what was done, saving nothing as the base; a base that an older kit stopped
early is refused, the committed one is found."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from helpers import base_model, config, models, store, train, verify

SMALL = {"sft__obs_steps": 40, "sft__max_steps": 8, "train__steps": 2, "train__eval_every": 2}

# SFT of the base and two RL steps, in a process of its own (under the KIT_RESULTS it is given); it says when its
# imports are done by creating the file named in argv[1], so that the throttling covers the work, not the imports
BUILD = f"""
import pathlib, sys
import torch
torch.set_num_threads(2)
from helpers import base_model, config, train
cfg = config.load("smoke", **{SMALL!r})
pathlib.Path(sys.argv[1]).touch()
base_model.path_of(cfg)
train.rl_train(cfg, "full")
"""


def _start(root):
    env = {**os.environ, "KIT_RESULTS": str(root), "TQDM_DISABLE": "1"}
    env.pop("KIT_BASE_CACHE", None)  # each process builds its base itself, none is copied from the session's
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", BUILD, str(root / "imported")], env=env, cwd=config.REPO_ROOT
    )


def _throttle(proc, imported, period: float = 0.05) -> int:
    """Once `proc` has made the file `imported`, stop and continue it every `period` seconds until it ends; how many
    times it was stopped."""
    while proc.poll() is None and not imported.exists():
        time.sleep(period)
    stops = 0
    while proc.poll() is None:
        time.sleep(period)
        proc.send_signal(signal.SIGSTOP)
        stops += 1
        time.sleep(period)
        proc.send_signal(signal.SIGCONT)
    return stops


def _is_timing(key: str) -> bool:
    return key in verify.TIMING_KEYS or key.endswith("_s")  # rollout_s, update_s, rollout_tokens_per_s


def _outputs(cfg, root, monkeypatch):
    """What the build left: SFT's phases and log, RL's metrics (timings left out), and both models' weights."""
    monkeypatch.setenv("KIT_RESULTS", str(root))
    base = base_model.path_of(cfg)  # found, not rebuilt: it is complete
    final = train.trained_model(cfg, "full")
    weights = {}
    for name, path in (("base", base), ("rl", final)):
        m, _ = models.load(path)
        weights[name] = {k: v.clone() for k, v in m.state_dict().items()}
    records = {
        "sft_phases": json.loads((base / "sft_summary.json").read_text())["phases"],
        "sft_log": [
            {k: v for k, v in r.items() if not _is_timing(k)}
            for r in store.Records(base / "sft_log.jsonl").read()
        ],
        "rl_metrics": [
            {k: v for k, v in r.items() if not _is_timing(k)} for r in train.read_metrics(cfg, "full")
        ],
    }
    return records, weights


@pytest.mark.slow
def test_sft_and_rl_in_a_throttled_process_give_the_same_records_and_weights(tmp_path, monkeypatch):
    plain, slowed = _start(tmp_path / "unthrottled"), _start(tmp_path / "throttled")
    stops = _throttle(slowed, tmp_path / "throttled" / "imported")
    assert plain.wait() == 0 and slowed.returncode == 0
    assert stops >= 10, f"the throttled run was hardly throttled ({stops} stops)"
    cfg = config.load("smoke", **SMALL)
    a, a_w = _outputs(cfg, tmp_path / "unthrottled", monkeypatch)
    b, b_w = _outputs(cfg, tmp_path / "throttled", monkeypatch)
    assert [p["steps"] for p in a["sft_phases"]] == [40, 8]
    assert [r["step"] for r in a["rl_metrics"]] == [0, 1, 2]
    assert b == a
    for name in a_w:
        assert a_w[name].keys() == b_w[name].keys()
        for k in a_w[name]:
            assert torch.equal(a_w[name][k], b_w[name][k]), (name, k)


def test_a_tripped_sft_guard_stops_the_run_and_saves_no_base(monkeypatch, tmp_path):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    cfg = config.load("smoke", sft__max_seconds=1e-3, **SMALL)  # every step takes longer than 1 ms
    with pytest.raises(base_model.SFTGuardTripped) as err:
        base_model.path_of(cfg)
    text = str(err.value)
    assert "sft.max_seconds = 0.001 s" in text
    assert "1 of 40 observation steps, 0 of 8 episode steps" in text and "nothing was saved" in text
    assert err.value.done == [1, 0]
    models_dir = store.models_dir("smoke")
    assert not list(models_dir.glob("base-*/sft_summary.json"))
    assert not [p for p in models_dir.glob("base-*") if not p.name.endswith(".building")]
    with pytest.raises(base_model.SFTGuardTripped):  # and again: nothing half-built is picked up
        base_model.path_of(cfg)


def test_a_base_stopped_early_is_refused_and_the_committed_one_is_complete(tmp_path):
    cfg = config.load("cpu")
    short = {"phases": [{"context": "observation", "steps": 832}], "steps": 832}
    with pytest.raises(
        RuntimeError, match="832 observation steps where its recipe asks for 1000 observation"
    ):
        base_model.check_complete(cfg, short, tmp_path)
    committed = config.REPO_ROOT / "results" / "cpu" / "models"
    spec = base_model.recipe(cfg)
    folders = [p for p in committed.glob("base-*") if json.loads((p / "recipe.json").read_text()) == spec]
    assert len(folders) == 1, folders
    base_model.check_complete(cfg, json.loads((folders[0] / "sft_summary.json").read_text()), folders[0])


def test_the_guard_is_not_part_of_the_recipe_so_raising_it_keeps_the_base_name():
    names = {
        base_model.folder_name(config.load("cpu", sft__max_seconds=s)) for s in (60.0, 900.0, 7200.0, 86400.0)
    }
    assert len(names) == 1, names
    assert "max_seconds" not in base_model.recipe(config.load("cpu"))["sft"]
    # every knob that decides the base is in it: a changed step count names a new base
    assert base_model.folder_name(config.load("cpu", sft__max_steps=301)) not in names
