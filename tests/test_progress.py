"""Progress in batch runs: a few plain lines, no carriage returns, no escape codes, no lines of spaces."""

from __future__ import annotations

import nbformat
import pytest
from tqdm.auto import tqdm

from helpers import nbtools, progress
from helpers.config import REPO_ROOT

EXECUTED = sorted((REPO_ROOT / "results" / "cpu" / "executed").glob("*.ipynb"))


class Clock:
    """A fake `time.monotonic` the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress.time, "monotonic", c)
    return c


@pytest.fixture
def batch(monkeypatch):
    monkeypatch.setenv("KIT_BATCH", "1")
    monkeypatch.delenv("KIT_WORKER", raising=False)


def test_batch_bar_prints_a_line_a_minute_and_one_at_the_end(batch, clock, capsys):
    b = progress.bar(total=600, desc="RL full, seed 0", leave=False)
    assert isinstance(b, progress.LineBar)
    for _ in range(600):  # ten minutes, a step a second, three bars open at once
        inner = progress.bar(range(3), desc="evaluation cells", leave=False)
        for _ in inner:
            pass
        b.update(1)
        b.set_postfix(success="0.50", kl="0.012")
        clock.t += 1.0
    b.close()
    out = capsys.readouterr()
    assert out.err == ""
    assert "\r" not in out.out and "\x1b" not in out.out
    lines = out.out.splitlines()
    assert 9 <= len(lines) <= 11, lines  # one a minute and the closing line; the short inner loops leave none
    assert all(line.strip() and line.startswith("RL full, seed 0: ") for line in lines), lines
    assert lines[-1] == "RL full, seed 0: 600/600 (10:00), success=0.50, kl=0.012"
    assert nbtools.stream_problems(out.out) == []


def test_short_loop_leaves_nothing_unless_leave(batch, clock, capsys):
    for _ in progress.bar(range(5), desc="quick", leave=False):
        clock.t += 1.0
    assert capsys.readouterr().out == ""
    for _ in progress.bar(range(5), desc="kept"):
        clock.t += 1.0
    assert capsys.readouterr().out == "kept: 5/5 (0:05)\n"


def test_no_repeated_line_when_the_count_did_not_move(batch, clock, capsys):
    b = progress.bar(total=10, desc="runs")
    b.update(1)
    for _ in range(10):  # the parallel parent polls every 2 s with update(0)
        clock.t += 61.0
        b.update(0)
    b.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["runs: 1/10 (1:01)"], lines


def test_workers_print_nothing(batch, clock, monkeypatch, capsys):
    monkeypatch.setenv("KIT_WORKER", "1")
    b = progress.bar(total=3, desc="RL", leave=True)
    clock.t += 120
    b.update(3)
    b.close()
    assert capsys.readouterr().out == ""


def test_interactive_bar_is_tqdm(monkeypatch):
    monkeypatch.delenv("KIT_BATCH", raising=False)
    b = progress.bar(total=1, disable=True)
    assert isinstance(b, tqdm)
    b.close()


def test_batch_environment_turns_third_party_bars_off():
    env = progress.batch_environment()
    assert env["KIT_BATCH"] == "1" and env["TQDM_DISABLE"] == "1"
    assert env["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"


def test_clock():
    assert [progress.clock(s) for s in (0, 61.9, 3600 + 62)] == ["0:00", "1:01", "1:01:02"]


def _with_stream(text: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])
    ]
    return nb


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("RL: 0/60 (0:00)\rRL: 60/60 (2:00)\n", "carriage return"),
        ("RL full seed 0:  50%|#####     | 30/60 [01:00<01:00, 2.0s/it]\n", "tqdm text bar"),
        ("RL 1\n\x1b[A\n", "escape code"),
        ("done\n" + " " * 55 + "\n", "line of spaces"),
        ("".join(f"RL: {i}/60 ({i}:00)\n" for i in range(60)), "progress lines"),
    ],
)
def test_output_check_finds_what_tqdm_left_in_the_committed_notebooks(text, problem):
    found = nbtools.progress_problems(_with_stream(text))
    assert len(found) == 1 and problem in found[0], found


def test_output_check_passes_a_few_plain_lines():
    assert (
        nbtools.progress_problems(_with_stream("step oracle: True\nRL: 30/60 (1:00)\nRL: 60/60 (2:00)\n"))
        == []
    )


def test_committed_executed_notebooks_have_clean_progress():
    found = {p.name: nbtools.progress_problems(nbformat.read(p, as_version=4)) for p in EXECUTED}
    assert EXECUTED and not any(found.values()), {k: v for k, v in found.items() if v}
