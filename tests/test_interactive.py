"""Run All on a fresh clone: each notebook top to bottom in its own kernel, on the committed cpu artefacts.

This is what a student gets who opens a notebook in JupyterLab and runs all cells: no runner, no injected
parameters (the parameters cell's `profile = "cpu"` stands), and the models and record files committed under
`results/cpu/`. Every notebook must finish without an error and without training or sampling anything new (no
file under `models/` and no record is added or changed), and its outputs must be clean for a reader
(`nbtools.output_problems`: no warnings, no `PosixPath`, no absolute path, no scientific notation). The run
writes into a copy of `results/cpu`, so the committed files stay as they are. If the committed artefacts are
stale (a recipe changed since they were made), a notebook trains and this test says so: regenerate them with
`make reproduce`. Every number it writes to `metrics.json` must equal the committed one (timings aside, as
`helpers.verify` compares). `benchmarks/interactive.py` times the same runs.
"""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import nbtools, run, verify
from helpers.config import REPO_ROOT

COMMITTED = REPO_ROOT / "results" / "cpu"
NOTEBOOKS = run.notebooks()


@pytest.fixture(scope="module")
def clone_results(tmp_path_factory):
    """A copy of the committed cpu results, as a fresh clone has them."""
    if not (COMMITTED / "models").is_dir():
        pytest.fail(
            f"{COMMITTED.relative_to(REPO_ROOT)}/models is missing: the cpu tier's models are committed "
            "(run `make reproduce` to rebuild them)"
        )
    root = tmp_path_factory.mktemp("clone") / "results"
    shutil.copytree(COMMITTED, root / "cpu", ignore=shutil.ignore_patterns("executed"))
    return root


@pytest.mark.interactive
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_run_all_uses_the_committed_artefacts(path, clone_results, monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(clone_results))
    monkeypatch.delenv("KIT_BATCH", raising=False)
    manifest = clone_results / "cpu" / path.stem / "manifest.json"
    written = manifest.stat().st_mtime_ns  # copied with the committed file's time
    before = nbtools.artefacts(clone_results / "cpu")
    nb, _ = nbtools.run_all(path, timeout=600)
    after = nbtools.artefacts(clone_results / "cpu")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, (
        f"{path.name} trained or sampled anew instead of reading the committed artefacts "
        f"(stale? run `make reproduce`): {changed[:8]}"
    )
    assert nbtools.output_problems(nb) == [], f"{path.name}: {nbtools.output_problems(nb)}"
    assert manifest.stat().st_mtime_ns != written, f"{path.name} did not write its results into the copy"
    # Every number is recomputed from the committed records (trajectories, probe numbers, 06's log-probs) and must
    # be the committed number exactly (an analysis change that moves a result shows here, leaf by leaf, without a
    # new run). Nothing is scored by torch here: before 06's log-probs were recorded, its likelihoods agreed to float
    # rounding only (about 2e-7 relative, with one torch thread against the committed run's two).
    name = f"{path.stem}/metrics.json"
    diffs, _ = verify.compare(
        {name: json.loads((clone_results / "cpu" / name).read_text())},
        {name: json.loads((COMMITTED / name).read_text())},
    )
    assert not diffs, f"{path.name}: {len(diffs)} numbers differ from the committed run, e.g. {diffs[:3]}"


def _notebook(*outputs):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = list(outputs)
    nb.cells = [cell]
    return nb


def test_output_problems_flags_what_a_reader_must_not_see():
    from nbformat.v4 import new_output

    clean = _notebook(
        new_output("display_data", data={"text/markdown": "lr 1e-6, in prose", "text/plain": "lr 1e-6"}),
        new_output(
            "display_data", data={"application/vnd.jupyter.widget-view+json": {}, "text/plain": "10%|#"}
        ),
        new_output("stream", name="stdout", text="evaluation cells: 100%\n"),
        new_output("execute_result", data={"text/html": "<table><td>0.695</td></table>"}, execution_count=1),
    )
    assert nbtools.output_problems(clean) == []
    bad = _notebook(
        new_output("stream", name="stderr", text="UserWarning: something\n"),
        new_output("execute_result", data={"text/plain": "PosixPath('x')"}, execution_count=1),
        new_output("stream", name="stdout", text=f"base: {REPO_ROOT}/results/cpu/models/base\n"),
        new_output(
            "execute_result", data={"text/html": "<table><td>6.950000e-01</td></table>"}, execution_count=2
        ),
        new_output("error", ename="ValueError", evalue="boom", traceback=[]),
    )
    found = " | ".join(nbtools.output_problems(bad))
    for what in (
        "stderr",
        "PosixPath",
        "absolute path",
        "scientific notation in a table",
        "error ValueError",
    ):
        assert what in found, (what, found)


def test_artefacts_notice_a_new_record_and_a_new_model_file(tmp_path):
    (tmp_path / "models" / "run").mkdir(parents=True)
    (tmp_path / "03" / "records.jsonl").parent.mkdir()
    (tmp_path / "03" / "records.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "03" / "table.csv").write_text("a\n1\n")
    before = nbtools.artefacts(tmp_path)
    (tmp_path / "03" / "table.csv").write_text(
        "a\n2\n"
    )  # tables and figures are rewritten by every run: fine
    assert nbtools.artefacts(tmp_path) == before
    with (tmp_path / "03" / "records.jsonl").open("a") as f:
        f.write('{"a": 2}\n')
    (tmp_path / "models" / "run" / "model.safetensors").write_bytes(b"0")
    assert set(nbtools.artefacts(tmp_path)) - set(before) == {"models/run/model.safetensors"}
    assert nbtools.artefacts(tmp_path)["03/records.jsonl"] == 2
