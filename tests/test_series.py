"""The per-environment series: `Config.series` and `per_env`, the store's series folders, the runner's `--env`, the
per-task budgets at fractions of T_max, and the report's BudgetMix table over the tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import budget, config, metrics, report, run, store
from helpers.config import ConfigError
from helpers.envs import available, load_tasks, settings


def _profile(tmp_path: Path, text: str) -> Path:
    """The cpu profile (which has no per_env blocks) with `text` appended, as a file of its own."""
    path = tmp_path / "p.yaml"
    path.write_text((config.CONFIG_DIR / "cpu.yaml").read_text() + "\n" + text)
    return path


# ------------------------------------------------------------------------------------------------- config


def test_without_a_series_nothing_changes():
    cfg = config.load("smoke")
    assert cfg.series is None and cfg.results_name == "smoke" and cfg.env.name == "frozenlake"


@pytest.mark.parametrize("env", ["frozenlake", "deepcoder", "bfcl", "intercode_sql"])
def test_a_series_sets_the_environment_and_its_folder(env):
    cfg = config.load("smoke", series=env)
    assert (cfg.env.name, cfg.series, cfg.results_name) == (env, env, f"smoke/{env}")


def test_the_series_block_applies_and_overrides_win_over_it():
    plain, coder = config.load("smoke"), config.load("smoke", series="deepcoder")
    assert coder.env.extra["deepcoder"]["t_max"] == 3  # configs/smoke.yaml per_env.deepcoder
    assert "oracle_q" in plain.process.algorithms and "oracle_q" not in coder.process.algorithms
    block = config.read_yaml(config.CONFIG_DIR / "smoke.yaml")["per_env"]["bfcl"]
    assert config.load("smoke", series="bfcl").eval.n_tasks == block["eval"]["n_tasks"] != plain.eval.n_tasks
    assert config.load("smoke", series="bfcl", eval={"n_tasks": 5}).eval.n_tasks == 5
    # a block applies only to its own series
    assert config.load("smoke", series="intercode_sql").eval.n_tasks == plain.eval.n_tasks


@pytest.mark.parametrize("profile", ["gpu", "paper"])
def test_gpu_profiles_carry_each_environments_settings(profile):
    by_env = {env: config.load(profile, series=env) for env in available()}
    assert by_env["deepcoder"].sampling.max_new_tokens > by_env["intercode_sql"].sampling.max_new_tokens
    assert by_env["bfcl"].model.max_model_len >= 32768  # ~10k tokens of function docs, up to 28 turns
    assert by_env["bfcl"].env.extra["bfcl"]["turns_per_request"] == 4
    assert (
        by_env["intercode_sql"].env.extra["intercode_sql"]["source"] == "hub"
    )  # the paper: Spider's train set
    assert by_env["bfcl"].process.env == "bfcl" and "07" not in by_env["bfcl"].run.skip
    assert "07" in by_env["deepcoder"].run.skip and "07" in by_env["intercode_sql"].run.skip
    assert by_env["frozenlake"].process.env in (None, "frozenlake")
    assert "oracle_q" in by_env["frozenlake"].process.algorithms
    assert config.load(profile).process.env == (
        "bfcl" if profile == "gpu" else None
    )  # the default: unchanged


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"series": "nosuch"}, r"series: 'nosuch' is not an environment; known: \['bfcl'"),
        (
            {"series": "bfcl", "env": {"name": "deepcoder"}},
            r"env\.name: 'deepcoder' contradicts series 'bfcl'",
        ),
        ({"per_env": {"bfcl": {}}}, r"per_env: set in the profile's YAML"),
        ({"run": {"skip": ["7"]}}, r"run\.skip"),
    ],
)
def test_bad_series_overrides_are_named(overrides, match):
    with pytest.raises(ConfigError, match=match):
        config.load("smoke", **overrides)


@pytest.mark.parametrize(
    ("block", "match"),
    [
        ("per_env:\n  nosuch: {}\n", r"per_env: 'nosuch' is not an environment"),
        (
            "per_env:\n  bfcl:\n    sampling: {max_new_tokns: 3}\n",
            r"per_env\.bfcl: unknown key 'sampling\.max_new_tokns'",
        ),
        ("per_env:\n  bfcl:\n    env: {name: deepcoder}\n", r"per_env\.bfcl\.env\.name: not allowed"),
        ("per_env:\n  bfcl:\n    series: bfcl\n", r"per_env\.bfcl\.series: not allowed"),
        ("per_env:\n  bfcl: 3\n", r"per_env\.bfcl: expected a mapping"),
    ],
)
def test_bad_per_env_blocks_fail_when_the_profile_loads(tmp_path, block, match):
    path = _profile(tmp_path, block)
    with pytest.raises(ConfigError, match=match):
        config.load(path)  # even without a series: every block is checked


# -------------------------------------------------------------------------------------------------- store


def test_a_series_writes_and_reads_in_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_open_series", {})
    with store.results_at(tmp_path):
        cfg = config.load("smoke", series="bfcl")
        r = store.open_run(cfg.results_name, "01_grpo_training", cfg)
        assert r.dir == tmp_path / "smoke" / "bfcl" / "01_grpo_training"
        r.write_metrics({"x": 1})
        # the metrics carry BFCL's reported setting (the prompt's docs: compact in the smoke profile)
        assert store.Run.read_metrics(cfg.results_name, "01_grpo_training") == {"x": 1, "docs": "compact"}
        manifest = json.loads((r.dir / "manifest.json").read_text())
        assert (manifest["profile"], manifest["series"], manifest["results"]) == (
            "smoke",
            "bfcl",
            "smoke/bfcl",
        )
        # the bare profile's folder is another series: reading it from here is refused, not silently wrong
        with pytest.raises(ValueError, match=r"pass cfg\.results_name, not cfg\.profile"):
            store.Run.read_metrics("smoke", "01_grpo_training")
        # a missing input names the command that makes it
        with pytest.raises(FileNotFoundError, match="--profile smoke --env bfcl"):
            store.Run.read_table(cfg.results_name, "04_step_level_probing", "per_state_quality")
        assert (
            store.models_dir(cfg.profile) == tmp_path / "smoke" / "models"
        )  # models are shared by the series


def test_the_default_layout_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_open_series", {})
    with store.results_at(tmp_path):
        cfg = config.load("smoke")
        assert (
            store.open_run(cfg.profile, "00_environments", cfg).dir == tmp_path / "smoke" / "00_environments"
        )


@pytest.mark.parametrize("bad", ["", "a/b/c", "../x", "smoke/..", "/abs"])
def test_bad_series_names_are_refused(bad):
    with pytest.raises(ValueError, match="not a profile or a series name"):
        store.profile_dir(bad)


def test_open_run_refuses_another_profiles_name(monkeypatch):
    monkeypatch.setattr(store, "_open_series", {})
    with pytest.raises(ValueError, match=r"pass cfg\.results_name"):
        store.open_run("cpu", "00_environments", config.load("smoke", series="bfcl"))


# ------------------------------------------------------------------------------------------------- runner


def test_env_choices():
    assert run.environments(None) == [None]
    assert run.environments("all") == list(run.ALL_ENVS)
    assert sorted(run.ALL_ENVS) == available()
    assert run.environments("bfcl, deepcoder") == ["bfcl", "deepcoder"]
    with pytest.raises(run.RunError, match=r"'nosuch'\] is not an environment; allowed: bfcl, deepcoder"):
        run.environments("bfcl,nosuch")
    with pytest.raises(run.RunError, match="given twice"):
        run.environments("bfcl,bfcl")


def test_series_parameters_merge_with_the_users_overrides():
    p = run.series_params({"overrides": {"seed": 3}}, "bfcl")
    assert p == {"overrides": {"seed": 3, "series": "bfcl"}}
    assert run.series_params({"seed": 1}, None) == {"seed": 1}
    with pytest.raises(run.RunError, match="--env asks for 'bfcl'"):
        run.series_params({"overrides": {"series": "deepcoder"}}, "bfcl")


def test_run_skip_leaves_notebooks_out_but_not_with_only():
    paths = run.notebooks()
    cfg = config.load("gpu", series="deepcoder")
    assert [p.name[:2] for p in run.planned(cfg, paths, None)] == [
        p.name[:2] for p in paths if p.name[:2] != "07"
    ]
    seven = run.select(paths, only="07")
    assert run.planned(cfg, seven, "07") == seven


def test_runner_rejects_an_unknown_environment_before_running(capsys):
    assert run.main(["--profile", "smoke", "--env", "nosuch"]) == 1
    err = capsys.readouterr().err
    assert "--env nosuch" in err and "allowed: bfcl, deepcoder, frozenlake, intercode_sql or all" in err


def test_runner_checks_every_series_configuration_first(capsys, tmp_path):
    bad = _profile(tmp_path, "")  # a good profile, then a bad override for the series
    assert run.main(["--profile", str(bad), "--env", "bfcl", "-p", "overrides={'eval': {'n_taskz': 1}}"]) == 1
    assert "eval.n_taskz" in capsys.readouterr().err


# --------------------------------------------------------------------------------- budgets at fractions


def test_fraction_cells_on_one_t_max_are_one_cell_per_fraction():
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", seed=0, **settings(cfg))
    cells = budget.fraction_cells(tasks, [0.25, 0.5, 1.0])
    t = cfg.env.frozenlake.t_max
    assert list(cells) == [(0.25, budget.budget_at(0.25, t)), (0.5, budget.budget_at(0.5, t)), (1.0, t)]
    assert all(ts == tasks for ts in cells.values())
    bound = metrics.upper_bound_at_fractions(cells, "frozenlake")
    exact = metrics.structural_upper_bound(tasks, [b for _, b in cells], "frozenlake")
    assert bound == {f: exact[b] for f, b in cells}
    assert budget.budget_label(cells) == {f: str(b) for f, b in cells}


def test_fraction_cells_give_each_task_its_own_budget():
    tasks = load_tasks("bfcl", "test", n=12, seed=0, turns_per_request=4)
    t_maxes = sorted({t.t_max for t in tasks})
    assert len(t_maxes) > 1, "these entries should differ in T_max"
    cells = budget.fraction_cells(tasks, [0.5, 1.0])
    for (f, b), ts in cells.items():
        assert all(budget.budget_at(f, t.t_max) == b for t in ts)
    for f in (0.5, 1.0):  # every task once per fraction
        assert sorted(t.task_id for (g, _), ts in cells.items() if g == f for t in ts) == sorted(
            t.task_id for t in tasks
        )
    assert budget.budget_label(cells)[1.0] == f"{t_maxes[0]}-{t_maxes[-1]}"
    assert metrics.upper_bound_at_fractions(cells, "bfcl") == {0.5: None, 1.0: None}  # BFCL knows no bound


def test_upper_bound_at_fractions_weights_cells_by_their_tasks():
    tasks = load_tasks("deepcoder", "test", seed=0)
    cells = {(0.5, 2): tasks[:3], (1.0, 4): tasks}
    with_ref = [t for t in tasks if t.payload.get("reference")]
    assert len(with_ref) == len(tasks), "the bundled tasks all have a reference solution"
    assert metrics.upper_bound_at_fractions(cells, "deepcoder") == {0.5: 1.0, 1.0: 1.0}


# ------------------------------------------------------------------------------------------------- report


def _gains(run_dir: store.Run, points: dict[str, float], width: float = 2.0) -> None:
    """A notebook-02 metrics.json holding only what the BudgetMix table reads (gains of BudgetMix minus GRPO)."""
    run_dir.write_metrics(
        {
            "gains_points": {"budgetmix - grpo": points},
            "gains_ci": {"budgetmix - grpo": {f: [v - width, v + width] for f, v in points.items()}},
        }
    )


def test_budgetmix_table_per_task_and_mean(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_open_series", {})
    with store.results_at(tmp_path):
        a = {"0.25": 10.0, "0.5": 4.0, "0.75": 2.0, "1": 0.0}
        b = {"0.25": 4.0, "0.5": 0.0, "0.75": -2.0, "1": 1.0}
        _gains(store.open_run("smoke/bfcl", "02_budgetmix_training"), a)
        _gains(store.open_run("smoke/frozenlake", "02_budgetmix_training"), b)
        s = report.budgetmix_gains("smoke", run.ALL_ENVS)
        assert s["n_tasks"] == 2 and s["tasks"]["deepcoder"] is None and s["tasks"]["intercode_sql"] is None
        assert s["tasks"]["bfcl"][0.25] == (10.0, 8.0, 12.0)
        assert s["mean"] == {0.25: 7.0, 0.5: 2.0, 0.75: 0.0, 1.0: 0.5}
        assert s["paper"] == {0.25: 7.5, 0.5: 5.3, 0.75: 4.0, 1.0: 0.0}
        text = report.budgetmix_markdown("smoke", run.ALL_ENVS)
        assert "| BFCL | +10.0 [+8.0, +12.0] | +4.0 [+2.0, +6.0]" in text
        assert "| **kit: mean of 2 tasks** | +7.0 | +2.0 | 0.0 | +0.5 |" in text
        assert "not run (python -m helpers.run --profile smoke --env deepcoder)" in text
        # the profile's own series (results/smoke/, FrozenLake) stands for FrozenLake where it has no folder
        store.open_run("smoke/frozenlake", "02_budgetmix_training").path("metrics.json").unlink()
        _gains(store.open_run("smoke", "02_budgetmix_training"), a)
        assert report.budgetmix_gains("smoke", run.ALL_ENVS)["tasks"]["frozenlake"][0.25] == (10.0, 8.0, 12.0)
        _gains(store.open_run("smoke/deepcoder", "02_budgetmix_training"), {"0.5": 1.0, "1": 0.0})
        with pytest.raises(
            ValueError, match=r"smoke/deepcoder: notebook 02 has no gain at fraction\(s\) \['0.25', '0.75'\]"
        ):
            report.budgetmix_gains("smoke", ["deepcoder"])


def test_report_cli_rejects_an_unknown_environment(capsys):
    assert report.main(["--profile", "smoke", "--env", "nosuch"]) == 1
    assert "is not an environment" in capsys.readouterr().err
