"""Where the code sandbox cannot start (no bubblewrap, no user namespaces, not Linux), the kit says so before it
runs anything: `sandbox.availability()` names the mode this machine allows and what is missing, and notebook 00's
code demo (`code.demo_or_skip`) runs the kit's own two programs only as far as that allows, never crashing."""

from __future__ import annotations

import os
import sys

import pytest

from helpers import sandbox
from helpers.envs import code
from helpers.sandbox import bwrap

MISSING = "bubblewrap (bwrap) is not installed"


def fake(monkeypatch, problems: tuple[str, ...]) -> None:
    """Pretend the probe found `problems` (none: the full boundary)."""
    b = sandbox.Boundary(os.geteuid() == 0, None if problems else "/usr/bin/bwrap", False, None, problems)
    monkeypatch.setattr(bwrap, "_BOUNDARY", b)


def no_program_runs(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a program was run")

    monkeypatch.setattr(sandbox, "run_program", refuse)


def test_the_full_boundary_is_mode_os(monkeypatch):
    fake(monkeypatch, ())
    a = sandbox.availability()
    assert a.mode == "os" and a.full and a.missing == ()
    assert "is available" in a.explain()


def test_linux_without_the_boundary_allows_only_weak_runs_and_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    fake(monkeypatch, (MISSING,))
    a = sandbox.availability()
    assert a.mode == "weak" and not a.full and a.missing == (MISSING,)
    text = a.explain()
    assert MISSING in text and "KIT_SANDBOX=weak" in text and "not run here" in text


def test_off_linux_the_probe_says_so_and_nothing_can_run(monkeypatch):
    """On macOS (simulated) the probe neither looks for bubblewrap nor reads /proc: it names the platform."""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(bwrap, "_BOUNDARY", None)
    monkeypatch.setattr(bwrap.CgroupTree, "find", lambda: pytest.fail("the probe read cgroups off Linux"))
    a = sandbox.availability()
    assert a.mode == "none" and len(a.missing) == 1
    assert "not Linux" in a.missing[0] and "'darwin'" in a.missing[0]
    assert "No program is run here" in a.explain() and "docs/course.md" in a.explain()
    assert not sandbox.boundary().complete


def test_without_bubblewrap_on_the_path_the_probe_finds_it_missing(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(bwrap, "_BOUNDARY", None)
    monkeypatch.setattr(bwrap.shutil, "which", lambda name, *a, **k: None)
    real_exists = os.path.exists
    monkeypatch.setattr(bwrap.os.path, "exists", lambda p: False if p.endswith("/bwrap") else real_exists(p))
    a = sandbox.availability()
    assert a.mode == "weak" and MISSING in a.missing


def test_the_demo_is_skipped_off_linux_and_shows_the_programs_unrun(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(bwrap, "_BOUNDARY", None)
    no_program_runs(monkeypatch)
    d = code.demo_or_skip()
    assert d["sandbox"] == "skipped" and d["success"] is None and d["turns"] == []
    assert "not Linux" in d["notice"] and "Skipped: the demo episode" in d["notice"]
    roles = [m["role"] for m in d["transcript"]]
    assert roles == ["system", "user", "assistant", "assistant"]
    task = next(t for t in code.kit_tasks(t_max=3) if t.task_id == d["task_id"])
    assert code.extract_program(d["transcript"][-1]["content"]).strip() == task.payload["reference"].strip()


def test_on_linux_without_the_boundary_the_demo_runs_only_the_kits_programs_weakly(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    fake(monkeypatch, (MISSING,))
    monkeypatch.delenv(sandbox.ISOLATION_ENV, raising=False)
    seen = []
    real = sandbox.run_program

    def spy(program, tests, setup="", limits=None, batch=True):
        seen.append(limits.isolation)
        return real(program, tests, setup, limits, batch)

    monkeypatch.setattr(sandbox, "run_program", spy)
    d = code.demo_or_skip()
    assert seen and set(seen) == {"weak"}
    assert d["sandbox"] == "weak" and d["success"] is True and len(d["turns"]) == 2
    assert MISSING in d["notice"] and "written by the kit, not by a model" in d["notice"]
    # the environment itself still refuses without the boundary: a model's program is never run weakly unasked
    with pytest.raises(sandbox.SandboxUnavailable):
        code.demo()


def test_a_weak_run_that_cannot_start_falls_back_to_skipping(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    fake(monkeypatch, (MISSING,))

    def broken(*args, **kwargs):
        raise sandbox.SandboxError("the sandbox did not come up within 20 s")

    monkeypatch.setattr(code, "demo", broken)
    d = code.demo_or_skip()
    assert d["sandbox"] == "skipped" and d["success"] is None
    assert "Weak isolation did not start either" in d["notice"] and "did not come up" in d["notice"]


def test_with_the_boundary_the_demo_is_unchanged_and_its_notice_stays_out_of_the_metrics():
    """Where the boundary is there (the machine the committed run was made on), the demo's result is `demo()`'s
    with a notice added; notebook 00's metrics leave the notice out, so its `metrics.json` does not change."""
    if not sandbox.availability(refresh=True).full:
        pytest.skip(sandbox.availability().explain())
    d = code.demo_or_skip()
    plain = code.demo()
    assert {k: v for k, v in d.items() if k != "notice"} == plain
    assert "full operating-system boundary" in d["notice"]
    import inspect

    from helpers import testbed

    assert '"notice"' in inspect.getsource(testbed.summary)


def test_the_turns_table_is_none_when_skipped_and_the_two_turns_when_run(monkeypatch):
    from helpers import testbed

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(bwrap, "_BOUNDARY", None)
    assert testbed.code_demo_turns(code.demo_or_skip()) is None
    ran = {"turns": [{"turn": 1, "passed": 0, "total": 6}, {"turn": 2, "passed": 6, "total": 6}]}
    assert list(testbed.code_demo_turns(ran)["passed"]) == [0, 6]


def notebook_00_demo_cell() -> str:
    """The source of notebook 00's DeepCoder-MT demo cell (found by what it calls, not by its position)."""
    import nbformat

    from helpers.run import NOTEBOOK_DIR

    nb = nbformat.read(NOTEBOOK_DIR / "00_environments.ipynb", as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "code.demo" in c.source]
    assert len(cells) == 1, cells
    return cells[0]


@pytest.mark.parametrize("platform", ["darwin", "linux"])
def test_notebook_00s_demo_cell_says_what_is_missing_and_runs_no_model_code(monkeypatch, capsys, platform):
    """Notebook 00's own cell, run where the boundary is missing: it does not fail, its first line names what is
    missing, and it says what was skipped (off Linux) or that only the kit's programs ran weakly (Linux)."""
    from helpers import fmt, testbed
    from helpers.envs import format_transcript

    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.delenv(sandbox.ISOLATION_ENV, raising=False)
    if platform == "darwin":
        monkeypatch.setattr(bwrap, "_BOUNDARY", None)
        no_program_runs(monkeypatch)
    else:
        fake(monkeypatch, (MISSING,))
    ns = {"format_transcript": format_transcript, "fmt": fmt, "testbed": testbed}
    exec(notebook_00_demo_cell(), ns)
    first = capsys.readouterr().out.splitlines()[0]
    if platform == "darwin":
        assert "not Linux" in first and "Skipped: the demo episode" in first
        assert ns["coder"]["turns"] == []
    else:
        assert MISSING in first and "weak isolation" in first and "not by a model" in first
        assert ns["coder"]["success"] is True
