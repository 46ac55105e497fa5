"""Run All on a fresh clone: each notebook top to bottom in its own kernel, on the committed cpu artefacts.

This is what a student gets who opens a notebook in JupyterLab and runs all cells: no runner, no injected
parameters (the parameters cell's `profile = "cpu"` stands), and the models and record files committed under
`results/cpu/`. Every notebook must finish without an error and without training or sampling anything new (no
file under `models/` and no record is added or changed), and its outputs must be clean for a reader
(`nbtools.output_problems`: no warnings, no `PosixPath`, no absolute path, no scientific notation). The run
writes into a copy of `results/cpu`, so the committed files stay as they are. If the committed artefacts are
stale (a recipe changed since they were made), a notebook trains and this test says so: regenerate them with
`make reproduce`. `benchmarks/interactive.py` times the same runs.
"""

from __future__ import annotations

import os
import shutil

import pytest

from helpers import nbtools, run
from helpers.config import REPO_ROOT

COMMITTED = REPO_ROOT / "results" / "cpu"
NOTEBOOKS = run.notebooks()


@pytest.fixture(scope="module")
def clone_results(tmp_path_factory):
    """A copy of the committed cpu results, as a fresh clone has them."""
    if not (COMMITTED / "models").is_dir():
        pytest.fail(f"{COMMITTED.relative_to(REPO_ROOT)}/models is missing: the cpu tier's models are committed "
                    "(run `make reproduce` to rebuild them)")  # fmt: skip
    root = tmp_path_factory.mktemp("clone") / "results"
    shutil.copytree(COMMITTED, root / "cpu", ignore=shutil.ignore_patterns("executed"))
    return root


@pytest.mark.interactive
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_run_all_uses_the_committed_artefacts(path, clone_results, monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(clone_results))
    monkeypatch.delenv("KIT_BATCH", raising=False)
    before = nbtools.artefacts(clone_results / "cpu")
    nb, _ = nbtools.run_all(path, timeout=600)
    after = nbtools.artefacts(clone_results / "cpu")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, (
        f"{path.name} trained or sampled anew instead of reading the committed artefacts "
        f"(stale? run `make reproduce`): {changed[:8]}"
    )
    assert nbtools.output_problems(nb) == [], f"{path.name}: {nbtools.output_problems(nb)}"
    assert os.environ["KIT_RESULTS"] == str(clone_results)
