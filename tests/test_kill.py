"""Kill tests: SIGKILL the smoke RL loop and the evaluation sweep at chosen points, resume, and compare with an
uninterrupted run: the same metrics (one row per step), the same records and the same final weights.

The points are named in the kit's code (`helpers.store.crash_point`) and chosen with `KIT_CRASH_AT`: the run
kills itself there with SIGKILL, as a power cut or the OOM killer would, with no cleanup.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import base_model, config, models, store

pytestmark = pytest.mark.slow

OVERRIDES = {"train": {"steps": 4, "checkpoint_every": 2, "eval_every": 2}}
RL = """
import json, sys
from helpers import config, train
cfg = config.load("smoke", **json.loads(sys.argv[1]))
train.rl_train(cfg, "full")
"""
SWEEP = """
import json, sys
from helpers import config, evaluate, store
from helpers.envs import load_tasks, settings
from helpers.policy import Sampling
from helpers import base_model
cfg = config.load("smoke")
tasks = load_tasks("frozenlake", "test", **settings(cfg))
evaluate.evaluate_grid({"base": base_model.path_of(cfg)}, "frozenlake", tasks, [2, 4, 6], 3, Sampling.from_config(cfg.sampling),
                       seed=5, records=store.Records(sys.argv[2]))
"""


# A process that has imported the kit once and forks one child per run (`run`): the child is the run's process,
# dies by the same SIGKILL and exits as `python -c CODE` would (atexit handlers, then its exit status), but does not
# import torch, transformers and the kit again (about 8 s a run on 2 cores; the file has about 18 runs). The parent
# never runs torch, so a fork starts from an interpreter whose only history is its imports.
ZYGOTE = """
import atexit, json, os, sys, traceback
import helpers.base_model, helpers.evaluate, helpers.train  # noqa: F401
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.environ.clear()
            os.environ.update(req["env"])
            os.chdir(req["cwd"])
            fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.argv = ["-c", *req["args"]]
            exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class Zygote:
    """The forking parent of `run` (see ZYGOTE), started on first use, one per test module."""

    def __init__(self):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        env.pop("KIT_CRASH_AT", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            env=env,
            cwd=config.REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(self, code: str, args: list[str], env: dict, log: Path, timeout: float = 1500) -> int:
        req = {"code": code, "args": args, "env": env, "cwd": str(config.REPO_ROOT), "log": str(log)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the parent and its child: one session of their own
            raise subprocess.TimeoutExpired(req["args"], timeout)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the forking parent exited ({self.proc.wait()}); the run's output: {log}")
        return int(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module", autouse=True)
def _zygote():
    global _ZYGOTE
    yield
    if _ZYGOTE is not None:
        _ZYGOTE.close()
        _ZYGOTE = None


_ZYGOTE: Zygote | None = None


def run(code: str, results: Path, crash: str | None = None, *args: str) -> int:
    """Run `code` as `python -c code OVERRIDES *args` writing to `results` (killing itself at `crash`), in a child
    of the forking parent; returns its exit status as subprocess gives it (-9 for SIGKILL)."""
    global _ZYGOTE
    env = {**os.environ, "KIT_RESULTS": str(results), "OMP_NUM_THREADS": "1"}
    env.pop("KIT_CRASH_AT", None)
    if crash:
        env["KIT_CRASH_AT"] = crash
    if _ZYGOTE is None:
        _ZYGOTE = Zygote()
    log = results.parent / f"{results.name}-{len(list(results.parent.glob(results.name + '-*.log')))}.log"
    return _ZYGOTE.run(code, [json.dumps(OVERRIDES), *args], env, log)


@pytest.fixture(scope="module")
def shared_base(tmp_path_factory):
    """The smoke base and probe pool, built once and copied into every results folder."""
    root = tmp_path_factory.mktemp("base")
    with store.results_at(root):
        path = base_model.path_of(config.load("smoke"))
    return path


def fresh(tmp_path: Path, name: str, base: Path) -> Path:
    results = tmp_path / name
    (results / "smoke" / "models").mkdir(parents=True)
    shutil.copytree(base, results / "smoke" / "models" / base.name)
    return results


def final_state(results: Path) -> tuple[list[dict], dict]:
    with store.results_at(results):
        from helpers import train

        cfg = config.load("smoke", **OVERRIDES)
        rows = train.read_metrics(cfg, "full")
        m, _ = models.load(train.trained_model(cfg, "full"))
    return rows, {k: v.clone() for k, v in m.state_dict().items()}


def strip_timing(rows: list[dict]) -> list[dict]:
    timing = ("rollout_s", "update_s", "rollout_tokens_per_s", "tokens_per_s", "monitor_s")
    return [{k: v for k, v in r.items() if k not in timing} for r in rows]


@pytest.fixture(scope="module")
def reference(shared_base, tmp_path_factory):
    results = fresh(tmp_path_factory.mktemp("ref"), "straight", shared_base)
    assert run(RL, results) == 0
    return final_state(results)


@pytest.mark.parametrize(
    "point",
    [
        "append:metrics.jsonl#2",  # mid-write of step 1's metrics row, before the first checkpoint
        "append:metrics.jsonl#4",  # mid-write of step 3's row, after the checkpoint of step 2
        "checkpoint#2",  # the step-4 checkpoint written but not renamed into place
        "final-save",  # the final model half written
    ],
)
def test_rl_run_killed_anywhere_resumes_to_the_uninterrupted_result(point, shared_base, reference, tmp_path):
    results = fresh(tmp_path, "killed", shared_base)
    assert run(RL, results, point) == -signal.SIGKILL, f"the run did not die at {point}"
    assert run(RL, results) == 0
    rows, weights = final_state(results)
    ref_rows, ref_weights = reference
    assert [r["step"] for r in rows] == list(range(OVERRIDES["train"]["steps"] + 1))  # each step exactly once
    assert strip_timing(rows) == strip_timing(ref_rows)
    assert weights.keys() == ref_weights.keys()
    for k in weights:
        torch.testing.assert_close(weights[k], ref_weights[k], rtol=0, atol=0)


def test_a_run_killed_while_saving_never_looks_finished(shared_base, tmp_path):
    results = fresh(tmp_path, "half", shared_base)
    assert run(RL, results, "final-save") == -signal.SIGKILL
    with store.results_at(results):
        from helpers import train

        with pytest.raises(FileNotFoundError, match="notebook 01"):
            train.trained_model(config.load("smoke", **OVERRIDES), "full")


@pytest.mark.parametrize("point", ["append:sweep.jsonl#1", "append:sweep.jsonl#2"])
def test_sweep_killed_mid_append_completes_to_the_same_records(point, shared_base, tmp_path):
    ref = fresh(tmp_path, "ref", shared_base)
    assert run(SWEEP, ref, None, str(ref / "sweep.jsonl")) == 0
    killed = fresh(tmp_path, "killed", shared_base)
    assert run(SWEEP, killed, point, str(killed / "sweep.jsonl")) == -signal.SIGKILL
    assert run(SWEEP, killed, None, str(killed / "sweep.jsonl")) == 0

    def records(results: Path) -> list[dict]:
        rows = store.Records(results / "sweep.jsonl").read()
        return sorted(
            json.dumps({k: v for k, v in r.items() if k != "agent_id"}, sort_keys=True) for r in rows
        )

    assert records(killed) == records(ref)


# ------------------------------------------------------------- issue 29: one writer per folder, a full disk


def start(code: str, results: Path, *args: str, fsize: int | None = None) -> subprocess.Popen:
    """`code` in a process of its own writing to `results` (with a file-size limit of `fsize` bytes: writes past it
    fail with EFBIG, as a full disk fails with ENOSPC)."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "KIT_RESULTS": str(results), "OMP_NUM_THREADS": "1"}
    env.pop("KIT_CRASH_AT", None)
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(OVERRIDES), *args],
        env=env,
        cwd=config.REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit if fsize else None,
    )


def test_two_rl_runs_into_one_results_root_leave_one_row_per_step(shared_base, reference, tmp_path):
    """Issue 29: two RL runs into one results root both exited 0 and left 25-32 duplicated, out-of-order rows in
    metrics.jsonl (17 expected). Now the second waits for the first and then finds the run finished."""
    results = fresh(tmp_path, "two", shared_base)
    runs = [start(RL, results), start(RL, results)]
    outs = [p.communicate(timeout=900) for p in runs]
    assert [p.returncode for p in runs] == [0, 0], [err[-2000:] for _, err in outs]
    rows, weights = final_state(results)
    ref_rows, ref_weights = reference
    assert [r["step"] for r in rows] == list(range(OVERRIDES["train"]["steps"] + 1))
    assert strip_timing(rows) == strip_timing(ref_rows)
    for k in weights:
        torch.testing.assert_close(weights[k], ref_weights[k], rtol=0, atol=0)


def test_a_second_rl_run_waits_for_the_writer_of_its_folder(shared_base, reference, tmp_path):
    """Deterministically overlapped: a process holds the run's folder; the RL run says it waits, and once the
    holder is gone it trains the run to the uninterrupted result."""
    from helpers import train

    results = fresh(tmp_path, "wait", shared_base)
    with store.results_at(results):
        out = train.rl_dir(config.load("smoke", **OVERRIDES), "full")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from helpers import store; "
            "store.acquire(Path(sys.argv[1]), wait=False); print('held', flush=True); "
            "sys.stdin.read()",
            str(out),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=config.REPO_ROOT,
    )
    assert holder.stdout.readline().strip() == "held"
    second = start(RL, results)
    line = second.stderr.readline()
    while line and "waiting for" not in line:
        line = second.stderr.readline()
    assert f"waiting for process {holder.pid}" in line
    assert not (out / "metrics.jsonl").exists()  # nothing written while it waits
    holder.stdin.close()
    holder.wait(timeout=60)
    second.communicate(timeout=900)
    assert second.returncode == 0
    rows, _ = final_state(results)
    assert strip_timing(rows) == strip_timing(reference[0])


def test_two_sweeps_at_once_leave_each_record_once(shared_base, tmp_path):
    """Issue 29: two sweeps at once left 2688 records instead of 1536. Now one writes, and the other either stops
    at once with FolderBusy naming it, or (started after it) finds every cell done."""
    ref = fresh(tmp_path, "ref", shared_base)
    assert run(SWEEP, ref, None, str(ref / "sweep.jsonl")) == 0
    both = fresh(tmp_path, "both", shared_base)
    sweeps = [start(SWEEP, both, str(both / "sweep.jsonl")) for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in sweeps]
    for p, (_, err) in zip(sweeps, outs, strict=True):
        assert p.returncode == 0 or ("FolderBusy" in err and "is being written by process" in err), err[
            -2000:
        ]
    assert 0 in [p.returncode for p in sweeps]

    def records(results: Path) -> list[str]:
        rows = store.Records(results / "sweep.jsonl").read()
        return sorted(
            json.dumps({k: v for k, v in r.items() if k != "agent_id"}, sort_keys=True) for r in rows
        )

    assert records(both) == records(ref)  # each record once: as many as one sweep writes


def test_an_rl_run_on_a_full_disk_stops_clearly_and_resumes_exactly(shared_base, reference, tmp_path):
    """Issue 29: a full disk gave torch's `basic_ios::clear` and left a partial .tmp. Now the error names the file
    and what to do, nothing half-written is left, and the run resumes to the uninterrupted result once there is
    room. (RLIMIT_FSIZE makes the checkpoint's write fail for real, EFBIG, without filling the machine's disk.)"""
    from helpers import train

    results = fresh(tmp_path, "full", shared_base)
    with store.results_at(results):
        out = train.rl_dir(config.load("smoke", **OVERRIDES), "full")
    size = (
        (shared_base / "model.safetensors").stat().st_size
    )  # a checkpoint holds the weights and 2 Adam moments
    first = start(RL, results, fsize=2 * size)
    _, err = first.communicate(timeout=900)
    assert first.returncode == 1, err[-2000:]
    pattern = r"DiskFull: \[Errno 27\] disk full: could not write \S+checkpoint-000002\.pt \(File too large"
    assert re.search(pattern, err), err[-2000:]
    assert "basic_ios" not in err.splitlines()[-1]
    assert not [p.name for p in out.rglob("*.tmp")] and not list(out.glob("checkpoint-*.pt"))
    assert run(RL, results) == 0
    rows, weights = final_state(results)
    assert strip_timing(rows) == strip_timing(reference[0])
    for k in weights:
        torch.testing.assert_close(weights[k], reference[1][k], rtol=0, atol=0)
