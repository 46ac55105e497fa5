"""The BFCL call worker caps its address space where it can (Linux: /proc/self/statm and RLIMIT_AS) and still
starts where it cannot (macOS, simulated), so notebook 00's BFCL demo does not need Linux. Each check runs in a
child process: a cap set in the test process would cap pytest itself."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.sandbox.wire import LENGTH, FrameReader

ROOT = str(Path(__file__).resolve().parents[1])

PROBE = """
import json, resource, sys
sys.platform = {platform!r}
from helpers.envs.bfcl import worker
before = resource.getrlimit(resource.RLIMIT_AS)
capped = worker.limit_address_space(64)
print(json.dumps({{"capped": capped, "before": before, "after": resource.getrlimit(resource.RLIMIT_AS)}}))
"""


def child(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": ROOT}, timeout=120, **kw)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cap is Linux's")
def test_on_linux_the_worker_caps_its_address_space():
    out = json.loads(child(PROBE.format(platform="linux"), capture_output=True, text=True, check=True).stdout)
    assert out["capped"] is True and out["after"] != out["before"]
    assert 64 << 20 < out["after"][0] < out["before"][0] or out["before"][0] == -1


def test_off_linux_the_worker_leaves_the_address_space_alone():
    out = json.loads(
        child(PROBE.format(platform="darwin"), capture_output=True, text=True, check=True).stdout
    )
    assert out["capped"] is False and out["after"] == out["before"]


def test_off_linux_the_worker_starts_and_says_ready():
    """The whole start-up off Linux (simulated): the worker sends "ready" and ends when its stdin closes."""
    code = "import sys; sys.platform = 'darwin'; from helpers.envs.bfcl import worker; worker.main(64)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": ROOT},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    reader = FrameReader(proc.stdout.fileno(), LENGTH)
    try:
        first = reader.read(time.monotonic() + 60)
        assert first is not None, proc.stderr.read().decode()[-2000:]
        assert pickle.loads(first) == "ready"
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
        reader.close()
