"""helpers.verify (`make verify`): two runs' metrics.json compared leaf by leaf, timings ignored; the reference is
another folder or the committed run read from git. And the runner's warning at the end of a series when a
notebook's numbers differ from the committed run of the same recipe (helpers.run.differs_from_committed)."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import run, verify
from helpers.config import REPO_ROOT

COMMITTED = REPO_ROOT / "results" / "cpu"


def _write(folder, name, obj):
    path = folder / name / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


@pytest.fixture
def two_runs(tmp_path):
    metrics = {"success": {"T=6": 0.5, "T=3": 0.25}, "n": 12, "seconds": 3.0, "sft": {"tokens_per_s": 9e3}}
    for side in ("a", "b"):
        _write(tmp_path / side, "00_environments", metrics)
        _write(tmp_path / side, "01_grpo_training", {"grpo": {"R_multi": [0.1, 0.2]}, "wall_time_s": 5})
    return tmp_path / "a", tmp_path / "b"


def test_equal_folders(two_runs, capsys):
    a, b = two_runs
    diffs, n = verify.verify(a, b)
    assert diffs == [] and n == 5  # 2 + 1 numbers in 00 (timings left out), 2 in 01
    assert verify.main(["--run", str(a), "--reference", str(b)]) == 0
    assert "every one equal" in capsys.readouterr().out


def test_one_changed_leaf_is_named(two_runs, capsys):
    a, b = two_runs
    _write(a, "01_grpo_training", {"grpo": {"R_multi": [0.1, 0.3]}, "wall_time_s": 5})
    diffs, _ = verify.verify(a, b)
    assert [(d.file, d.path, d.run, d.reference) for d in diffs] == [
        ("01_grpo_training/metrics.json", "/grpo/R_multi[1]", 0.3, 0.2)
    ]
    assert verify.main(["--run", str(a), "--reference", str(b)]) == 1
    out = capsys.readouterr().out
    assert "/grpo/R_multi[1]" in out and "1 of 5 leaves differ" in out


def test_a_missing_file_is_a_difference(two_runs):
    a, b = two_runs
    shutil.rmtree(b / "01_grpo_training")
    diffs, _ = verify.verify(a, b)
    assert [(d.file, d.run, d.reference) for d in diffs] == [
        ("01_grpo_training/metrics.json", "<present>", "<missing>")
    ]
    assert verify.main(["--run", str(a), "--reference", str(a / "nothing")]) == 2


def test_timing_keys_are_ignored_and_nothing_else(two_runs):
    a, b = two_runs
    faster = {"success": {"T=6": 0.5, "T=3": 0.25}, "n": 12, "seconds": 1.0, "sft": {"tokens_per_s": 4e4}}
    _write(a, "00_environments", faster)
    assert verify.verify(a, b)[0] == []
    _write(a, "00_environments", {**faster, "n": 13})
    assert [d.path for d in verify.verify(a, b)[0]] == ["/n"]


def test_the_committed_run_against_git(tmp_path):
    """The reference read from git at HEAD is the committed run: equal to the working tree's results/cpu."""
    diffs, n = verify.verify(COMMITTED)
    assert diffs == [] and n > 1000
    copy = tmp_path / "cpu"
    shutil.copytree(COMMITTED, copy, ignore=shutil.ignore_patterns("models", "trajectories", "executed"))
    assert verify.verify(copy, COMMITTED) == (diffs, n)


def _copy_notebook(results, stem):
    dst = results / "cpu" / stem
    dst.mkdir(parents=True)
    for name in ("metrics.json", "manifest.json"):
        shutil.copy(COMMITTED / stem / name, dst / name)
    return dst


def _bump_first_number(obj) -> bool:
    """Add 1 to the first float leaf of a parsed metrics.json (in place); False when it has none."""
    items = (
        list(obj.items()) if isinstance(obj, dict) else list(enumerate(obj)) if isinstance(obj, list) else []
    )
    for k, v in items:
        if isinstance(v, float):
            obj[k] = v + 1
            return True
        if _bump_first_number(v):
            return True
    return False


def test_the_runner_warns_when_numbers_differ_from_the_committed_run_of_the_same_recipe(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    stem = "03_pass_at_kt_sweep"
    folder = _copy_notebook(tmp_path, stem)
    assert run.differs_from_committed("cpu", [stem]) == []  # the same numbers
    metrics = json.loads((folder / "metrics.json").read_text())
    _bump_first_number(metrics)
    path = verify.compare(
        {stem: metrics}, {stem: json.loads((COMMITTED / stem / "metrics.json").read_text())}
    )[0]
    assert len(path) == 1
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (warning,) = run.differs_from_committed("cpu", [stem])
    assert warning.startswith(f"{stem}: 1 of ") and str(path[0]) in warning and "make verify" in warning
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["seed"] += 1  # another recipe: nothing committed to compare with
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert run.differs_from_committed("cpu", [stem]) == []
    assert run.differs_from_committed("cpu", ["07_process_supervision"]) == []  # not run here
