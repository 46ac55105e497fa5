"""The runner (`python -m helpers.run`): command line, planning, progress, failed copies, `--fresh`, the cache root.

Planning is checked on the real notebooks without running any; execution on tiny notebooks written to tmp_path
(a cell that prints, a cell that raises when `overrides` asks it to), a real kernel each, a second or two a run.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import nbformat
import pytest
from jupyter_client.channels import HBChannel

from helpers import config, run, store
from helpers.envs.sql import spider_sqlite

# ------------------------------------------------------------------------------------------ command line


def _doc_examples() -> list[list[str]]:
    out = []
    for line in run.__doc__.splitlines():
        line = line.strip()
        if line.startswith("python -m helpers.run"):
            out.append(shlex.split(line.split("  #")[0])[3:])
    return out


def test_the_docstring_has_examples():
    assert len(_doc_examples()) >= 6 and ["--profile", "smoke", "-p", "seed=1"] in _doc_examples()


@pytest.mark.parametrize("argv", _doc_examples(), ids=" ".join)
def test_every_docstring_example_parses_and_validates(argv, monkeypatch, tmp_path):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    plan = run.make_plan(argv)
    assert plan.series and all(s.paths for s in plan.series)
    assert not any(tmp_path.iterdir()), "planning wrote something"


def test_seed_becomes_an_override_and_reaches_the_config():
    plan = run.make_plan(["--profile", "smoke", "-p", "seed=1"])
    (s,) = plan.series
    assert s.params == {"overrides": {"seed": 1}} and s.cfg.seed == 1


def test_papermill_style_name_value_is_the_same_as_name_equals_value():
    a = run.make_plan(["--profile", "smoke", "-p", "train.lr", "1e-4", "--only", "01"])
    b = run.make_plan(["--profile", "smoke", "-p", "train.lr=1e-4", "--only", "01"])
    assert a.series[0].params == b.series[0].params == {"overrides": {"train": {"lr": 1e-4}}}
    assert a.series[0].cfg.train.lr == 1e-4


def test_dotted_keys_merge_with_explicit_overrides_and_the_env_series():
    plan = run.make_plan(
        [
            "--profile",
            "smoke",
            "--env",
            "bfcl",
            "-p",
            "train.lr=1e-4",
            "-p",
            "seed",
            "2",
            "-p",
            "overrides={'sweep': {'n_samples': 4}, 'train': {'steps': 1}}",
        ]
    )
    (s,) = plan.series
    assert s.params["overrides"] == {
        "sweep": {"n_samples": 4},
        "train": {"steps": 1, "lr": 1e-4},
        "seed": 2,
        "series": "bfcl",
    }
    assert (s.cfg.train.lr, s.cfg.train.steps, s.cfg.seed, s.cfg.results_name) == (1e-4, 1, 2, "smoke/bfcl")


@pytest.mark.parametrize(
    ("param", "match"),
    [
        (["seed"], r"-p seed: no value; expected -p name=value or -p NAME VALUE"),
        (["a", "b", "c"], r"3 words; expected -p name=value"),
        (["=1"], r"'' is not a parameter name .* expected -p name=value"),
        (["no_such_param=1"], r"unknown parameter 'no_such_param'"),
        (["profile=cpu"], r"choose the profile with --profile"),
        (["overrides=3"], r"expected a dict"),
        (["seed=1", "-p", "seed=2"], r"seed is given twice"),
        (["train.lr=1", "-p", "overrides={'train': {'lr': 2}}"], r"train.lr is given twice"),
    ],
)
def test_malformed_parameters_say_what_was_expected(param, match):
    with pytest.raises(run.RunError, match=match):
        run.make_plan(["--profile", "smoke", "-p", *param])


def test_abbreviated_options_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        run.make_plan(["--profil", "smoke"])
    assert e.value.code == 2 and "--profil" in capsys.readouterr().err


def test_config_load_names_an_unknown_key_and_a_bad_value():
    with pytest.raises(config.ConfigError, match=r"unknown key 'train.lrr'"):
        config.load("smoke", train={"lrr": 1e-4})
    with pytest.raises(config.ConfigError, match=r"train.lr: expected a number"):
        config.load("smoke", train={"lr": "fast"})


@pytest.mark.parametrize(
    ("param", "key"), [("train.lrr=1e-4", "train.lrr"), ("train.lr=fast", "train.lr"), ("seed=-1", "seed")]
)
def test_a_bad_override_fails_before_anything_runs_or_moves(param, key, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    old = tmp_path / "smoke" / "executed" / "00_environments.ipynb"
    old.parent.mkdir(parents=True)
    old.write_text("the last good copy")
    monkeypatch.setattr(run, "run_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    assert run.main(["--profile", "smoke", "--env", "all", "--fresh", "-p", param]) == 1
    assert key in capsys.readouterr().err
    assert old.read_text() == "the last good copy" and sorted(p.name for p in tmp_path.iterdir()) == ["smoke"]


def test_fresh_refuses_a_partial_series():
    with pytest.raises(run.RunError, match="--fresh rebuilds whole series"):
        run.make_plan(["--profile", "smoke", "--fresh", "--only", "03"])


# ---------------------------------------------------------------------------------------- progress, kernel


def test_progress_numbers_the_code_cells_that_run(capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# x"),
        nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_code_cell("   "),
        nbformat.v4.new_code_cell("b = 2"),
    ]
    progress = run.CellProgress("cpu", "01_x.ipynb", t0=0.0)
    progress.on_notebook_start(notebook=nb)
    progress.on_cell_execute(cell=nb.cells[3], cell_index=3)
    out = capsys.readouterr().out
    assert out.startswith("[cpu] 01_x.ipynb cell 2/2 · ") and out.endswith(" s elapsed\n")


def test_kernels_get_curve_keys_where_pyzmq_has_them():
    import zmq

    c = run.kernel_config()
    assert c.KernelManager.transport_encryption == "auto" if zmq.has("curve") else "KernelManager" not in c


# ----------------------------------------------------------------------------------- runs of tiny notebooks


def _notebook(folder: Path, name: str, body: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("a tiny notebook"),
        nbformat.v4.new_code_cell('profile = "smoke"\noverrides = {}', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell('print("hello from", profile)'),
        nbformat.v4.new_code_cell(body),
    ]
    path = folder / name
    nbformat.write(nb, path)
    return path


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """One notebook that prints, and raises when `overrides` sets seed=1; results in tmp_path/results."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    body = 'if overrides.get("seed") == 1:\n    raise ValueError("boom")\nprint("ok")'
    _notebook(nbs, "00_tiny.ipynb", body)
    monkeypatch.setattr(run, "NOTEBOOK_DIR", nbs)
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("KIT_BATCH", raising=False)  # main() sets it; restored after the test
    return tmp_path / "results" / "smoke"


def _cells(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return ["".join(o.get("text", "")) + o.get("evalue", "") for c in nb.cells for o in c.get("outputs", [])]


def test_a_run_prints_each_cell_and_the_kernel_does_not_warn(tiny, capfd):
    assert run.main(["--profile", "smoke"]) == 0
    out, err = capfd.readouterr()
    # Papermill's injected parameters cell counts: it runs too
    for k in (1, 2, 3, 4):
        assert f"[smoke] 00_tiny.ipynb cell {k}/4 · " in out
    assert "without encryption" not in out + err and "WARNING" not in err
    assert "hello from smoke" in "".join(_cells(tiny / "executed" / "00_tiny.ipynb"))
    assert sorted(p.name for p in (tiny / "executed").iterdir()) == ["00_tiny.ipynb", "run.json"]
    log = json.loads((tiny / "executed" / "run.json").read_text())
    assert log["ok"] and log["notebooks"][0]["copy"] == "00_tiny.ipynb"


def test_a_failed_run_keeps_the_last_good_copy_and_a_later_pass_removes_the_failed_one(tiny, capsys):
    executed = tiny / "executed"
    assert run.main(["--profile", "smoke"]) == 0
    good = (executed / "00_tiny.ipynb").read_text()
    capsys.readouterr()

    assert run.main(["--profile", "smoke", "-p", "seed=1"]) == 1
    err = capsys.readouterr().err
    failed = executed / "00_tiny.failed.ipynb"
    assert str(failed) in err and "ValueError: boom" in err and "00_tiny.ipynb is kept" in err
    assert (executed / "00_tiny.ipynb").read_text() == good
    assert "boom" in "".join(_cells(failed))
    assert not (executed / "00_tiny.running.ipynb").exists()
    (entry,) = json.loads((executed / "run.json").read_text())["notebooks"]
    assert not entry["ok"] and entry["failed_copy"] == failed.name and entry["kept_copy"] == "00_tiny.ipynb"

    assert run.main(["--profile", "smoke"]) == 0
    assert not failed.exists() and (executed / "00_tiny.ipynb").exists()


# what a notebook finds when it starts: its names, working folder, open figures, __main__.__spec__, execution count
STARTS = (
    "import os, sys, matplotlib.pyplot as plt\n"
    "print('start', sorted(k for k in globals() if not k.startswith('_') and k not in ('os', 'sys', 'plt')),"
    " os.getcwd(), plt.get_fignums(), hasattr(sys.modules['__main__'], '__spec__'),"
    " get_ipython().execution_count)\n"
    "print('pid', os.getpid())\n"
)


def _said(path: Path, word: str) -> str:
    return next(line for line in "".join(_cells(path)).splitlines() if line.startswith(word + " "))


def test_one_kernel_gives_each_notebook_what_a_fresh_kernel_gives_and_stops_at_a_failure(
    tmp_path, monkeypatch, capsys
):
    """`--one-kernel`: the second notebook runs in the first one's process, and finds what the first found in a
    fresh kernel (no names left behind, figures closed, the working folder, execution count and `__spec__` back);
    a failure still ends the series and keeps the failed copy; the next run starts a kernel of its own.

    After its first heartbeat every heartbeat counts as missed, as on a loaded machine where a busy kernel answers
    later than the heartbeat's 1 s: the runner reads liveness from the kernel's process, so a live kernel is never
    taken for a dead one (with heartbeats this test failed so, "Kernel didn't respond to heartbeats"; and once in
    three make test runs, unpatched, "Kernel died before replying to kernel_info")."""
    beats = iter([True])
    monkeypatch.setattr(HBChannel, "is_beating", lambda self: next(beats, False))
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _notebook(nbs, "00_first.ipynb", STARTS + "left_behind = 1\nplt.figure()\nos.chdir('/')")
    _notebook(nbs, "01_second.ipynb", STARTS + "if overrides.get('seed') == 1:\n    raise ValueError('boom')")
    _notebook(nbs, "02_third.ipynb", "print('third ran')")
    monkeypatch.setattr(run, "NOTEBOOK_DIR", nbs)
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("KIT_BATCH", raising=False)
    executed = tmp_path / "results" / "smoke" / "executed"

    assert run.main(["--profile", "smoke", "--one-kernel"]) == 0
    first, second = executed / "00_first.ipynb", executed / "01_second.ipynb"
    assert _said(first, "start") == _said(second, "start")
    assert f" {nbs} [] True " in _said(second, "start")
    assert _said(first, "pid") == _said(second, "pid")  # one kernel for the series
    pid = _said(first, "pid")

    assert run.main(["--profile", "smoke", "--one-kernel", "-p", "seed=1"]) == 1
    assert "01_second.ipynb failed in cell" in capsys.readouterr().err
    failed = executed / "01_second.failed.ipynb"
    assert _said(executed / "00_first.ipynb", "pid") == _said(failed, "pid") != pid
    log = json.loads((executed / "run.json").read_text())
    assert [r["ok"] for r in log["notebooks"]] == [True, False]  # 02 did not run after the failure


def test_fresh_moves_the_series_aside_and_deletes_it_only_when_every_notebook_passed(tiny, capsys):
    root = tiny.parent
    (tiny / "models").mkdir(parents=True)
    (tiny / "models" / "old-model").write_text("x")
    (tiny / "bfcl").mkdir()
    (tiny / "bfcl" / "keep").write_text("another series")

    assert run.main(["--profile", "smoke", "--fresh", "-p", "seed=1"]) == 1
    err = capsys.readouterr().err
    (previous,) = root.glob(".previous-smoke-*")
    assert f"the previous results are kept in {previous}" in err
    assert (previous / "models" / "old-model").exists() and not (tiny / "models").exists()
    assert (tiny / "bfcl" / "keep").exists() and not (previous / "bfcl").exists()

    assert run.main(["--profile", "smoke", "--fresh"]) == 0
    out = capsys.readouterr().out
    assert "every notebook passed; removed" in out
    assert list(root.glob(".previous-smoke-*")) == [previous]  # this run's own is gone; the older one stays
    executed = tiny / "executed"
    assert (executed / "00_tiny.ipynb").exists() and not (executed / "00_tiny.failed.ipynb").exists()
    assert (tiny / "bfcl" / "keep").exists()


def test_fresh_for_one_environment_moves_only_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path))
    for f in ("smoke/models/m", "smoke/bfcl/01_x/metrics.json", "smoke/deepcoder/d"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    previous = run.set_aside(config.load("smoke", series="bfcl"))
    assert previous is not None and previous.parent == tmp_path
    assert previous.name.startswith(".previous-smoke-bfcl-")
    assert (previous / "01_x" / "metrics.json").exists() and not (tmp_path / "smoke" / "bfcl").exists()
    assert (tmp_path / "smoke" / "models" / "m").exists()  # shared by every series of the profile
    assert (tmp_path / "smoke" / "deepcoder" / "d").exists()
    assert run.set_aside(config.load("smoke", series="bfcl")) is None  # nothing left to move


def test_previous_folders_are_gitignored():
    assert "results/.previous-*/" in (config.REPO_ROOT / ".gitignore").read_text().splitlines()


def test_make_reproduce_rebuilds_from_scratch():
    makefile = (config.REPO_ROOT / "Makefile").read_text()
    assert "-m helpers.run --profile $(PROFILE) --fresh" in makefile


# ------------------------------------------------------------------------------------------------ the cache


def test_the_cache_follows_the_results_root_unless_kit_cache_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("KIT_CACHE", raising=False)
    monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "elsewhere"))
    assert spider_sqlite.cache_root() == (tmp_path / "elsewhere" / "_cache").resolve()
    assert spider_sqlite.cache_dir() == (tmp_path / "elsewhere" / "_cache" / "spider_sqlite").resolve()
    with store.results_at(tmp_path / "other"):
        assert spider_sqlite.cache_root() == (tmp_path / "other" / "_cache").resolve()
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    assert spider_sqlite.cache_root() == (tmp_path / "cache").resolve()
    monkeypatch.delenv("KIT_RESULTS")
    monkeypatch.delenv("KIT_CACHE")
    assert spider_sqlite.cache_root() == (config.REPO_ROOT / "results" / "_cache").resolve()


@pytest.mark.parametrize(
    ("param", "match"),
    [
        ("seed=" + "-" * 3000 + "1", r"-p seed: the value \(3001 characters\) is nested too deeply"),
        ("seed=" + "not " * 3000 + "1", r"-p seed: the value .* is nested too deeply"),
        ("train.lr=" + "~" * 5000 + "1", r"-p train.lr: the value .* is nested too deeply"),
        ("seed=" + "1" * 5000, r"-p seed: an integer of 5000 digits, too long to read"),
        ("seed=-" + "9" * 4400, r"-p seed: an integer of 4400 digits"),
        ("seed=0x" + "f" * 4000, r"-p seed: an integer of 16000 bits"),
        ("overrides={[]: 1}", r"-p overrides: .* is not a literal the kit can read \(unhashable"),
        ("train.lr={1, []}", r"-p train.lr: .* is not a literal"),
        ("overrides={1: 2}", r"-p overrides: the key 1 is not a config key name"),
        (
            "overrides={'train': {(1, 2): 3}}",
            r"-p overrides.train: the key \(1, 2\) is not a config key name",
        ),
    ],
    ids=[
        "minus-chain",
        "not-chain",
        "tilde-chain",
        "5000-digits",
        "negative-4400",
        "hex",
        "unhashable-key",
        "unhashable-item",
        "int-key",
        "tuple-key",
    ],
)
def test_every_bad_parameter_value_is_a_config_error(param, match):
    """Issue 52: 3000 unary minus signs (or a `not` chain) raised a raw RecursionError out of make_plan, and a
    5000-digit integer was blamed as "expected an integer"; every value that cannot be read is a ConfigError naming
    the parameter."""
    with pytest.raises(config.ConfigError, match=match):
        run.make_plan(["--profile", "smoke", "-p", param])
