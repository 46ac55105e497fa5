"""helpers.instrument: on a small cpu config, notebooks 02's and 05's analyses detect the planted effect (the
budget-aware optimum against the demonstrator, +8 to +22 points by DP on these 20 maps) and not the identical-player null."""

from __future__ import annotations

import pytest

from helpers import config, instrument

pytestmark = pytest.mark.slow  # a few thousand scripted episodes


@pytest.fixture(scope="module")
def result():
    cfg = config.load(
        "cpu", eval__n_tasks=20, probing__n_error_states=20, probing__n_continuations=4, eval__n_bootstrap=500
    )
    return cfg, *instrument.run(cfg)


def test_planted_detected_null_not(result):
    _, table, _ = result
    planted = table[table["case"] == "planted: optimum - demonstrator"]
    null = table[table["case"].str.startswith("null")]
    assert len(planted) == 5 and len(null) == 5  # four budgets of 02, one pool of 05
    assert planted["detected"].all(), planted
    assert (planted["true_points"] > 5).all()
    assert not null["detected"].any(), null
    assert (null["true_points"] == 0).all()
    assert not table["wrong"].any(), table


def test_optimum_never_below_best_blind(result):
    _, table, _ = result
    # the optimum is never worse than the best budget-blind policy, and better somewhere (budget awareness)
    blind = table[
        (table["case"] == "planted: optimum - best blind for T_max")
        & (table["analysis"].str.startswith("02"))
    ]
    assert (blind["true_points"] >= 0).all() and blind["true_points"].sum() > 0


def test_findings_and_metrics(result):
    _, table, m = result
    lines = instrument.findings(m)
    assert len(lines) == 2 + 2 * 3
    assert any("no interval excludes 0, as it should not" in x for x in lines)
    assert any("detected (interval excludes 0) at 4 of 4" in x for x in lines)
    assert m["sizes"]["n_tasks"] == 20 and len(m["rows"]) == len(table)


def test_refuses_other_environments():
    with pytest.raises(ValueError, match="FrozenLake"):
        instrument.run(config.load("smoke", env__name="bfcl"))


@pytest.mark.parametrize("notebook", ["02_budgetmix_training", "05_error_recovery"])
def test_the_committed_run_sees_its_planted_effect_and_not_its_null(notebook):
    """At the sizes the notebooks use (the committed cpu run's own "can this instrument see it?" section): the
    planted optimum-against-demonstrator effect is detected in every row, on the right side, and the identical-player
    null in none."""
    import json

    from helpers.config import REPO_ROOT

    metrics = json.loads((REPO_ROOT / "results" / "cpu" / notebook / "metrics.json").read_text())
    rows = metrics["instrument"]["rows"]
    planted = [r for r in rows if r["case"].startswith("planted") and "demonstrator" in r["case"]]
    null = [r for r in rows if r["case"].startswith("null")]
    assert planted and null
    assert all(r["detected"] and not r["wrong"] and r["true_points"] > 10 for r in planted)
    assert not any(r["detected"] for r in null)


def test_section_reads_its_table_back_only_for_the_same_recipe(tmp_path, monkeypatch):
    """A rerun over a finished run (Run All on the committed artefacts) reads the section's table back from
    `instrument_recipe.json` instead of playing the episodes again, equal to what it played; a changed cfg (or code:
    `recipe` hashes the kit's sources) plays them again."""
    from helpers import store

    cfg = config.load("smoke", eval__n_tasks=4, eval__n_bootstrap=50)
    out = store.open_run(cfg.results_name, "02_budgetmix_training", cfg, {})
    played = []
    real_run = instrument.run
    monkeypatch.setattr(instrument, "run", lambda *a, **k: played.append(a) or real_run(*a, **k))
    first, m1 = instrument.section(cfg, "02", out)
    csv = (out.dir / "instrument.csv").read_bytes()
    again, m2 = instrument.section(cfg, "02", out)
    assert len(played) == 1  # read back, not played
    assert again.equals(first) and m2["rows"] == [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in m1["rows"]
    ]
    assert (out.dir / "instrument.csv").read_bytes() == csv
    other = config.load("smoke", eval__n_tasks=4, eval__n_bootstrap=60)
    assert instrument.recipe(other, "02") != instrument.recipe(cfg, "02") != instrument.recipe(cfg, "05")
    instrument.section(other, "02", out)
    assert len(played) == 2  # another recipe: played again
