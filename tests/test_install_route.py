"""The student install's decisions, offline: which torch build `make install` asks for (`scripts/torch_route.py`)
and `make doctor`'s checks and verdict (`scripts/doctor.py`), with fakes in place of the machine and the network.
Neither starts a kernel or runs a notebook here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import doctor  # noqa: E402
import torch_route  # noqa: E402

sys.path.pop(0)

CPU = ["--index-url", torch_route.CPU_INDEX, "--extra-index-url", torch_route.PYPI]


def _never() -> bool:
    raise AssertionError("the index was checked where the decision did not need it")


def test_linux_without_a_gpu_takes_the_cpu_index_only_where_it_answers():
    assert torch_route.decide("auto", "linux", False, lambda: True)[0] == CPU
    args, why = torch_route.decide("auto", "linux", False, lambda: False)
    assert args == [] and "does not answer" in why  # a machine that reaches PyPI only: the install as before


def test_a_gpu_or_another_platform_keeps_pips_default():
    assert torch_route.decide("auto", "linux", True, _never)[0] == []
    assert torch_route.decide("auto", "darwin", False, _never)[0] == []
    assert torch_route.decide("auto", "win32", False, _never)[0] == []


def test_the_user_can_choose_the_route():
    assert torch_route.decide("cpu", "linux", True, _never)[0] == CPU
    assert torch_route.decide("default", "linux", False, _never)[0] == []
    with pytest.raises(ValueError, match="auto, cpu or default"):
        torch_route.decide("cuda", "linux", False, _never)


def test_gpu_detection_reads_nvidia_smi_and_the_driver(tmp_path):
    absent = tmp_path / "no-driver"
    assert not torch_route.has_nvidia_gpu(lambda name: None, absent)
    assert torch_route.has_nvidia_gpu(lambda name: "/usr/bin/nvidia-smi", absent)
    absent.mkdir()
    assert torch_route.has_nvidia_gpu(lambda name: None, absent)


def test_an_unreachable_index_answers_false_quickly():
    assert not torch_route.reachable("http://127.0.0.1:9", timeout=0.5)  # the discard port: refused at once


def test_main_prints_nothing_on_a_machine_without_the_cpu_index(monkeypatch, capsys):
    monkeypatch.setenv("KIT_TORCH_ROUTE", "auto")
    monkeypatch.setattr(torch_route, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(torch_route, "reachable", lambda: False)
    assert torch_route.main() == 0
    out = capsys.readouterr()
    assert out.out.strip() == "" and "torch route:" in out.err


# ------------------------------------------------------------------------------------------------- make doctor


def test_verdict_is_ready_only_when_every_check_passed():
    ok = [doctor.Check("python", True, "3.11.7"), doctor.Check("free disk", True, "80 GB")]
    assert doctor.verdict(ok) == (True, "READY: all 2 checks passed")
    bad = [*ok, doctor.Check("jupyter kernel", False, "did not start")]
    ready, text = doctor.verdict(bad)
    assert not ready and text == "NOT READY: 1 of 3 checks failed (jupyter kernel)"
    assert not doctor.verdict([])[0]
    assert doctor.line(bad[-1]) == "FAIL  jupyter kernel: did not start"
    assert doctor.line(ok[0]) == "PASS  python: 3.11.7"


def test_python_disk_venv_and_cache_checks(tmp_path):
    assert doctor.check_python((3, 11, 7)).ok and doctor.check_python((3, 12, 0)).ok
    assert not doctor.check_python((3, 10, 14)).ok
    assert doctor.check_disk(tmp_path, free_bytes=int(5e9)).ok
    assert not doctor.check_disk(tmp_path, free_bytes=int(1e9)).ok
    venv = tmp_path / ".venv"
    assert "make install" in doctor.check_venv(venv).detail and not doctor.check_venv(venv).ok
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    assert not doctor.check_venv(venv).ok  # make install did not finish
    (venv / ".installed").write_text("hash")
    assert doctor.check_venv(venv).ok
    assert not doctor.check_map_cache(tmp_path).ok
    (tmp_path / "_cache" / "frozenlake-maps").mkdir(parents=True)
    (tmp_path / "_cache" / "frozenlake-maps" / "set.npz").touch()
    assert doctor.check_map_cache(tmp_path).ok


def test_a_missing_committed_run_fails_the_notebook_check_without_starting_a_kernel(tmp_path):
    c = doctor.check_notebook(tmp_path / "results", tmp_path / "work")
    assert not c.ok and "models is missing" in c.detail


def test_the_guides_pip_line_installs_the_pinned_torch_from_the_routes_index():
    pin = next(
        line.split()[0]
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    guide = (REPO / "docs" / "course.md").read_text()
    assert f"pip install {pin} {' '.join(CPU)}" in guide
    assert f"within {torch_route.TIMEOUT_S:g} s" in guide
