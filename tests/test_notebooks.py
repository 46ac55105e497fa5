"""Papermill smoke run: every notebook in notebooks/ runs with the smoke profile and writes its metrics.

New notebooks are covered the moment they exist. The notebooks run once, in order (later ones read earlier
ones' results), through the same runner as `make reproduce`.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from helpers import nbtools, run, store

NOTEBOOKS = run.notebooks()


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("smoke_results")
    with store.results_at(root):
        code = run.main(["--profile", "smoke"])
    return root, code


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_environments.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_source_notebook_is_clean(path):
    assert nbtools.problems(nbformat.read(path, as_version=4)) == []


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_smoke_profile(path, smoke_results):
    root, code = smoke_results
    assert code == 0, "the smoke run failed; see the captured output for the notebook and cell"
    out = root / "smoke" / path.stem
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics, f"{path.stem} wrote an empty metrics.json"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["profile"] == "smoke"
    assert (root / "smoke" / "executed" / path.name).exists()


def test_runner_rejects_unknown_parameter(capsys):
    assert run.main(["--profile", "smoke", "--only", "00", "-p", "no_such_param=1"]) == 1
    assert "unknown parameter" in capsys.readouterr().err


def test_runner_rejects_unknown_notebook(capsys):
    assert run.main(["--profile", "smoke", "--only", "97"]) == 1
    assert "no notebook 97" in capsys.readouterr().err
