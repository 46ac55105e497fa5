"""Papermill smoke run: every notebook in notebooks/ runs with the smoke profile and writes its metrics, on each of
the paper's four environments: FrozenLake as the profile's own series (results/smoke/<NN_name>/, the layout `make
reproduce` writes) and DeepCoder-MT, BFCL and InterCode-SQL as per-environment series (`--env`,
results/smoke/<env>/<NN_name>/). The frozenlake series (`--env frozenlake`) is the same run in a folder of its
own, so it is not run again here (tests/test_series.py checks the runner's `--env all`).
Each series runs once per session, on first use (`smoke_series`), so `-k bfcl` runs only BFCL's series.

New notebooks are covered the moment they exist. The notebooks run in order (later ones read earlier ones'
results), through the same runner as `make reproduce`, in one kernel per series (`--one-kernel`: each notebook
starts from an empty namespace, without the start-up and imports of a kernel of its own; the results are the
same). With the tiny model the numbers mean nothing; every code path runs for real, the sandbox, bfcl-eval's
backends and SQLite included.
"""

from __future__ import annotations

import json
import math

import nbformat
import pytest

from helpers import config, nbtools, report, run, store

NOTEBOOKS = run.notebooks()
# None: the profile as written (FrozenLake, results/smoke/); then each other environment's series
SERIES = [None, *(e for e in run.ALL_ENVS if e != "frozenlake")]


@pytest.fixture(scope="session")
def smoke_series(shared_tmp):
    """`smoke_series(series)` runs that series once per session, on first use, and returns (results root, the
    runner's exit code): `-k bfcl` runs bfcl's series only. Every series writes under one root, as `make reproduce`
    lays them out, and shares the session's smoke base (conftest's KIT_BASE_CACHE). The root is shared by the
    session's workers (pytest-xdist): the worker that needs a series first runs it, holding its lock
    (`store.one_writer`), and a worker that needs it meanwhile waits for it and reads its exit code."""
    root = shared_tmp / "smoke_results"
    marks = shared_tmp / "smoke_series"  # each series' exit code and lock, outside the results root
    root.mkdir(exist_ok=True)
    marks.mkdir(exist_ok=True)

    def get(series: str | None):
        done = marks / f"{series or 'default'}.json"
        with store.one_writer(done.with_suffix(".running"), wait=True):
            if not done.exists():
                with store.results_at(root):
                    code = run.main(
                        ["--profile", "smoke", "--one-kernel", *([] if series is None else ["--env", series])]
                    )
                store.write_atomic(done, json.dumps({"exit_code": code}))
        return root, json.loads(done.read_text())["exit_code"]

    return get


def _folder(root, series):
    return root / "smoke" if series is None else root / "smoke" / series


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_environments.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_source_notebook_is_clean(path):
    assert nbtools.problems(nbformat.read(path, as_version=4)) == []


@pytest.mark.notebooks
@pytest.mark.parametrize("series", SERIES, ids=lambda s: s or "default")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_smoke_profile(path, series, smoke_series):
    root, _ = smoke_series(series)
    cfg = config.load("smoke", **({} if series is None else {"series": series}))
    out = _folder(root, series)
    log = json.loads((out / "executed" / "run.json").read_text())
    ran = {r["notebook"]: r for r in log["notebooks"]}
    if path.name[:2] in cfg.run.skip:
        assert path.name not in ran
        return
    assert path.name in ran, (
        f"{cfg.results_name}: {path.name} did not run (an earlier notebook failed: {log})"
    )
    assert ran[path.name]["ok"], ran[path.name].get("error")
    metrics = json.loads((out / path.stem / "metrics.json").read_text())
    assert metrics, f"{cfg.results_name}/{path.stem} wrote an empty metrics.json"
    manifest = json.loads((out / path.stem / "manifest.json").read_text())
    assert (manifest["profile"], manifest["series"]) == ("smoke", series)
    assert manifest["config"]["env"]["name"] == cfg.env.name
    executed = nbformat.read(out / "executed" / path.name, as_version=4)
    assert nbtools.progress_problems(executed) == [], f"{path.name}: {nbtools.progress_problems(executed)}"
    with store.results_at(root):  # every notebook's findings section, on every environment
        assert report.findings(cfg.results_name, path.stem).strip()


@pytest.mark.notebooks
def test_every_series_passed_and_the_budgetmix_table_covers_the_four_tasks(smoke_series):
    codes = {series: smoke_series(series)[1] for series in SERIES}
    root, _ = smoke_series(None)
    assert set(codes.values()) == {0}, codes
    with store.results_at(root):
        s = report.budgetmix_gains("smoke", run.ALL_ENVS)
        text = report.budgetmix_markdown("smoke", run.ALL_ENVS)
    assert s["n_tasks"] == 4 and all(v is not None for v in s["tasks"].values())
    for gains in s["tasks"].values():
        assert all(math.isfinite(g) and lo <= g <= hi for g, lo, hi in gains.values())
    assert "| **kit: mean of 4 tasks** |" in text and "not run" not in text


@pytest.mark.notebooks
@pytest.mark.parametrize("series", SERIES, ids=lambda s: s or "default")
def test_series_read_their_own_results(series, smoke_series):
    """Notebook 02 reads notebook 01's metrics of its own series: each series' training dynamics are its own."""
    root, _ = smoke_series(series)
    out = _folder(root, series)
    m01 = json.loads((out / "01_grpo_training" / "metrics.json").read_text())
    m02 = json.loads((out / "02_budgetmix_training" / "metrics.json").read_text())
    assert m01["env"] == m02["env"] == (series or "frozenlake")
    assert m02["r_single_change"] == (
        {"grpo": m01["grpo"]["R_single"], "budgetmix": m01["budgetmix"]["R_single"]}
        if "R_single" in m01["grpo"]
        else {}
    )


def test_runner_rejects_unknown_parameter(capsys):
    assert run.main(["--profile", "smoke", "--only", "00", "-p", "no_such_param=1"]) == 1
    assert "unknown parameter" in capsys.readouterr().err


def test_runner_rejects_unknown_notebook(capsys):
    assert run.main(["--profile", "smoke", "--only", "97"]) == 1
    assert "no notebook 97" in capsys.readouterr().err


@pytest.mark.notebooks
@pytest.mark.parametrize("series", SERIES, ids=lambda s: s or "default")
def test_headline_table_on_every_series(series, smoke_series):
    """The headline table reads every series, with or without a step oracle (04/05 skipped, no R_single)."""
    root, _ = smoke_series(series)
    name = f"smoke/{series}" if series else "smoke"
    with store.results_at(root):
        rows = report.headline(name)
    quantities = [r[0] for r in rows]
    assert any(q.startswith("Success at 25% of T_max") for q in quantities), name
    oracle = (series or "frozenlake") in ("frozenlake", "deepcoder")
    assert ("RL picks the better action after an injected error" in quantities) == oracle, name


@pytest.mark.notebooks
def test_exercises_run_on_the_smoke_series(smoke_series, capsys):
    """Every exercise's snippet (helpers.exercises) runs at the end of the smoke series, prints its table and writes
    nothing into the results."""
    from helpers import exercises

    for series in SERIES:  # every series done first: one still running in another worker writes into the root
        root, _ = smoke_series(series)
    with store.results_at(root):
        before = exercises.results_snapshot(root)
        for ex in exercises.EXERCISES:
            exec(
                compile(ex.code, f"<exercise {ex.key}>", "exec"),
                {"profile": "smoke", "__name__": "__exercise__"},
            )
            assert capsys.readouterr().out.strip(), f"exercise {ex.key} printed nothing"
        after = exercises.results_snapshot(root)
    wrote = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not wrote, f"exercises wrote into the results: {wrote[:5]}"
