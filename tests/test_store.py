import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from helpers import config, store


def test_records_append_and_resume(tmp_path):
    rec = store.Records(tmp_path / "r.jsonl")
    rec.append([{"k": i} for i in range(3)])
    done = rec.keys(lambda r: r["k"])
    rec.append([{"k": i} for i in range(5) if i not in done])  # a resumed loop skips what exists
    assert [r["k"] for r in store.Records(tmp_path / "r.jsonl")] == [0, 1, 2, 3, 4]


def test_torn_last_line_is_dropped_not_merged(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 0}\n{"k": 1}\n{"k": 2, "x": [1, 2')  # a crash mid-write
    rec = store.Records(path)
    with pytest.warns(UserWarning, match="torn last line"):
        assert [r["k"] for r in rec] == [0, 1]
    rec.append({"k": 2})
    assert path.read_text().splitlines() == ['{"k": 0}', '{"k": 1}', '{"k": 2}']


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 0}\n{"k": 1}')
    rec = store.Records(path)
    rec.append({"k": 2})
    assert [r["k"] for r in store.Records(path)] == [0, 1, 2]


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 0}\nnot json\n{"k": 2}\n')
    with pytest.raises(ValueError, match=r"r\.jsonl:2"):
        store.Records(path).read()
    assert path.read_text() == '{"k": 0}\nnot json\n{"k": 2}\n'  # nothing lost


def test_run_writes_metrics_manifest_tables_and_stable_figures():
    cfg = config.load("smoke")
    run = store.open_run("smoke", "99_test", cfg, {"profile": "smoke"})
    run.write_metrics({"a": 1.5, "nan": float("nan")})
    run.write_table("t", pd.DataFrame({"x": [1, 2], "y": [0.1234567891, 2.0]}))
    manifest = json.loads((run.dir / "manifest.json").read_text())
    assert manifest["profile"] == "smoke" and manifest["seed"] == 0 and "torch" in manifest["packages"]
    assert json.loads((run.dir / "metrics.json").read_text()) == {"a": 1.5, "nan": None}
    blobs = []
    for _ in range(2):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        run.save_figure(fig, "f")
        plt.close(fig)
        blobs.append(((run.dir / "figures/f.png").read_bytes(), (run.dir / "figures/f.pdf").read_bytes()))
    assert blobs[0] == blobs[1]
    assert store.Run.read_metrics("smoke", "99_test")["a"] == 1.5
    with pytest.raises(FileNotFoundError, match="run notebook 98_missing"):
        store.Run.read_metrics("smoke", "98_missing")


def test_metrics_on_deepcoder_record_the_protocol_and_a_series_keeps_one(monkeypatch):
    """Issue 29: every metrics.json on DeepCoder-MT records the protocol that produced its numbers (where the
    numbers come from is the metrics' own `env`: notebook 07 may run on `process.env`); FrozenLake's get nothing
    new. A series folder where a notebook ran under one protocol, even one that stopped before its metrics, refuses
    a notebook under the other (it would resume their records and trajectories); a folder from before
    reported.json is judged by its manifests, and a manifest from before the knob reads as 'paper'."""
    monkeypatch.setattr(store, "_open_series", {})
    paper = config.load("smoke", series="deepcoder")
    held = config.load("smoke", series="deepcoder", env={"extra": {"deepcoder": {"protocol": "held_out"}}})
    run = store.open_run(paper.results_name, "00_environments", paper)
    folder = run.dir.parent
    assert json.loads((folder / "reported.json").read_text()) == {"deepcoder": {"protocol": "paper"}}
    asks = r"and this run asks for \{'protocol': 'held_out'\}: .*--fresh"
    with pytest.raises(ValueError, match=rf"with \{{'protocol': 'paper'\}} \(.*reported\.json\), {asks}"):
        store.open_run(held.results_name, "01_grpo_training", held)  # 00 has not written its metrics yet
    run.write_metrics({"env": "deepcoder", "a": 1})
    assert json.loads((run.dir / "metrics.json").read_text()) == {
        "env": "deepcoder",
        "a": 1,
        "protocol": "paper",
    }
    assert (
        "protocol"
        not in json.loads((run.dir / "manifest.json").read_text())["config"]["env"]["extra"]["deepcoder"]
    )
    (folder / "reported.json").unlink()  # a series folder from before it: the manifests say what ran
    with pytest.raises(
        ValueError, match=rf"with \{{'protocol': 'paper'\}} \(notebook 00_environments\), {asks}"
    ):
        store.open_run(held.results_name, "01_grpo_training", held)
    store.open_run(paper.results_name, "01_grpo_training", paper)  # the refused run left no writer behind
    plain = config.load("smoke", env={"extra": {"deepcoder": {"protocol": "held_out"}}})
    for name, metrics, protocol in (
        ("01_grpo_training", {"env": "frozenlake"}, None),
        ("07_process_supervision", {"env": "deepcoder"}, "held_out"),
    ):
        run = store.open_run(plain.results_name, name, plain)
        run.write_metrics(metrics)
        assert json.loads((run.dir / "metrics.json").read_text()).get("protocol") == protocol
    assert not (run.dir.parent / "reported.json").exists()  # FrozenLake's folder: nothing kept


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"a": 1}\n\xff\xfe{"a": 2}\n{"a": 3}\n', "not UTF-8"),
        (b'{"a": 1}\n[1, 2]\n{"a": 3}\n', "a JSON list, not an object"),
        (b'{"a": 1}\n{"a": \n{"a": 3}\n', "corrupt record"),
    ],
)
def test_a_record_file_that_does_not_parse_names_the_file_and_line(tmp_path, content, why):
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"r\.jsonl:2: .*{why}"):
        store.Records(path).read()
    assert path.read_bytes() == content  # nothing already written is lost


def test_a_record_missing_a_key_names_the_file_line_and_key(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 0}\n{"loss": 1.0}\n')
    with pytest.raises(ValueError, match=r"m\.jsonl:2: record lacks \['step'\]"):
        store.Records(path).read(require=("step",))


def test_runtime_inputs_fail_at_once_naming_the_problem(tmp_path):
    from helpers import evaluate, models
    from helpers.envs import load_tasks
    from helpers.policy import Sampling

    with pytest.raises(FileNotFoundError, match="no local folder of that name and no cached hub model"):
        models.load(tmp_path / "no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        models.load(tmp_path / "empty")
    with pytest.raises(ValueError, match="the task list is empty"):
        evaluate.evaluate_grid(
            {"m": "x"}, "frozenlake", [], [2], 1, Sampling(), 0, store.Records(tmp_path / "e.jsonl")
        )
    with pytest.raises(ValueError, match="frozenlake: no test tasks"):
        load_tasks("frozenlake", "test", n=0, size=4, t_max=4, n_train=10, n_test=5)


# ------------------------------------------------------------------------ issue 29: one writer per folder

HOLDER = """
import sys
from pathlib import Path
from helpers import store
store.acquire(Path(sys.argv[1]), wait=False)
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder():
    """Start a process that holds the lock of a folder until told to stop (its stdin closed) or killed."""
    started = []

    def start(folder: Path) -> subprocess.Popen:
        p = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=config.REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(config.REPO_ROOT)},
        )
        started.append(p)
        assert p.stdout.readline().strip() == "held"
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=60)


def test_a_second_writer_of_a_results_folder_stops_and_names_the_first(tmp_path, holder, monkeypatch):
    monkeypatch.setattr(store, "_held", {})
    with store.results_at(tmp_path):
        folder = store.profile_dir("smoke") / "03_pass_at_kt_sweep"
        first = holder(folder)
        with pytest.raises(
            store.FolderBusy, match=rf"03_pass_at_kt_sweep is being written by process {first.pid} "
        ):
            store.open_run("smoke", "03_pass_at_kt_sweep")
        with pytest.raises(store.FolderBusy, match=rf"process {first.pid}"):
            store.Records(folder / "sweep_records.jsonl").append({"x": 1})
        assert (
            not (folder / "sweep_records.jsonl").exists()
            or not store.Records(folder / "sweep_records.jsonl").read()
        )
        first.kill()  # the kernel releases the lock of a process that dies, however it dies
        first.wait()
        run = store.open_run("smoke", "03_pass_at_kt_sweep")
        run.records("sweep_records").append({"x": 1})
        assert run.records("sweep_records").read() == [{"x": 1}]
        assert store.open_run("smoke", "03_pass_at_kt_sweep").dir == run.dir  # re-entrant within a process


def test_a_waiting_writer_goes_on_once_the_first_is_done(tmp_path, holder, monkeypatch, capsys):
    monkeypatch.setattr(store, "_held", {})
    folder = tmp_path / "models" / "full-s0-0123456789"
    first = holder(folder)
    threading.Timer(1.0, first.stdin.close).start()  # the first writer finishes a second from now
    t0 = time.monotonic()
    with store.one_writer(folder, wait=True):
        assert time.monotonic() - t0 >= 0.9
        assert folder.resolve() in store._held
    assert folder.resolve() not in store._held
    assert f"waiting for process {first.pid}" in capsys.readouterr().err


def test_fresh_moves_nothing_while_a_writer_is_at_work(tmp_path, holder, monkeypatch):
    from helpers import run

    monkeypatch.setattr(store, "_held", {})
    with store.results_at(tmp_path):
        cfg = config.load("smoke")
        folder = store.profile_dir("smoke") / "01_grpo_training"
        folder.mkdir(parents=True)
        first = holder(folder)
        with pytest.raises(
            run.RunError, match=rf"--fresh: .*01_grpo_training is being written by process {first.pid}"
        ):
            run.set_aside(cfg)
        assert folder.is_dir() and not list(tmp_path.glob(".previous-*"))
        first.stdin.close()
        first.wait(timeout=60)
        assert run.set_aside(cfg) is not None and not folder.exists()


# ---------------------------------------------------------------------------------- issue 29: a full disk


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs, so that ENOSPC is real without filling the machine's disk (needs root, as in CI)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    got = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if got.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and CAP_SYS_ADMIN): {got.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path, leave: int) -> None:
    """Fill the filesystem at `mnt` until about `leave` bytes are free."""
    with (mnt / "filler").open("wb") as f:
        try:
            while shutil.disk_usage(mnt).free > leave:
                f.write(b"\0" * min(65536, max(4096, shutil.disk_usage(mnt).free - leave)))
                f.flush()
        except OSError:
            pass


def test_write_atomic_on_a_full_disk_keeps_the_old_file_and_no_tmp(small_fs):
    path = small_fs / "metrics.json"
    store.write_atomic(path, "old\n")
    _fill(small_fs, 64 * 1024)
    with pytest.raises(
        store.DiskFull,
        match=r"disk full: could not write .*metrics\.json .*MiB free.*Nothing "
        r"half-written was left behind",
    ):
        store.write_atomic(path, "x" * (1 << 20))
    assert path.read_text() == "old\n" and not list(small_fs.glob("*.tmp"))


def test_records_on_a_full_disk_keep_every_whole_record(small_fs):
    rec = store.Records(small_fs / "sweep.jsonl")
    rec.append([{"i": i} for i in range(10)])
    _fill(small_fs, 64 * 1024)
    with pytest.raises(store.DiskFull, match=r"sweep\.jsonl .*the records written so far are kept"):
        rec.append([{"i": i, "pad": "x" * 1000} for i in range(10, 1000)])
    assert store.Records(small_fs / "sweep.jsonl").read() == [{"i": i} for i in range(10)]
    assert (small_fs / "sweep.jsonl").read_bytes().endswith(b"\n")  # cut back to the last whole record


def test_a_checkpoint_on_a_full_disk_is_a_clear_error_and_leaves_no_tmp(small_fs):
    """Issue 29: a full disk gave torch's `basic_ios::clear` and left a partial checkpoint .tmp."""
    import torch

    from helpers import rl_runs

    model = torch.nn.Linear(256, 256)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 256)).sum().backward()
    opt.step()
    rl_runs.save_checkpoint(small_fs, 2, model, opt)  # about 0.8 MB: fits
    _fill(small_fs, 300 * 1024)
    with pytest.raises(
        store.DiskFull,
        match=r"could not write .*checkpoint-000004\.pt .*the run resumes from "
        r"checkpoint-000002\.pt",
    ) as err:
        rl_runs.save_checkpoint(small_fs, 4, model, opt)
    assert "basic_ios" not in str(err.value)
    assert sorted(p.name for p in small_fs.iterdir()) == ["checkpoint-000002.pt", "filler"]
    assert rl_runs.resume(small_fs, "cpu", model, opt) == 2


# ------------------------------------------------------------------ issue 52: whole lines, kit errors, identity


@pytest.fixture
def mount_tmpfs(tmp_path):
    """Mount small tmpfs filesystems (options given per call) under tmp_path; unmounted afterwards (root only)."""
    mounted: list[Path] = []

    def mount(name: str, options: str, source: str | None = None) -> Path:
        mnt = tmp_path / name
        mnt.mkdir()
        cmd = (
            ["mount", "--bind", source, str(mnt)]
            if source
            else ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)]
        )
        got = subprocess.run(cmd, capture_output=True, text=True)
        if got.returncode != 0:
            pytest.skip(f"cannot mount here (needs root and CAP_SYS_ADMIN): {got.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in reversed(mounted):
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("pad", [100, 30_000, 200_000, 3_000_000], ids=["small", "30k", "200k", "3M"])
def test_records_on_a_filling_disk_are_whole_lines_or_nothing(mount_tmpfs, pad):
    """Appends of every size on a disk that fills: before, a raw `OSError: [Errno 28]` with no path and a torn last
    line (the buffered remainder was flushed after the cut). Now DiskFull naming the file, and the file holds
    exactly the records it held before, byte for byte."""
    mnt = mount_tmpfs("fs", "size=1m")
    rec = store.Records(mnt / "sweep.jsonl")
    rec.append([{"i": i} for i in range(10)])
    before = (mnt / "sweep.jsonl").read_bytes()
    _fill(mnt, 16 * 1024)
    with pytest.raises(
        store.DiskFull, match=r"could not write .*sweep\.jsonl .*the records written so far are kept"
    ):
        for i in range(1000):  # until the disk is full
            rec.append([{"i": 100 + i, "pad": "x" * pad} for _ in range(3)])
            before = (mnt / "sweep.jsonl").read_bytes()
    assert (mnt / "sweep.jsonl").read_bytes() == before


def test_a_read_only_filesystem_is_a_kit_error_naming_the_file(mount_tmpfs):
    """A read-only root gave a raw OSError (EROFS); now a StoreError naming the file and what to do."""
    rw = mount_tmpfs("rw", "size=1m")
    (rw / "runs").mkdir()
    (rw / ".runs.lock").touch()
    (rw / "runs" / "a.jsonl").write_text('{"i": 0}\n')
    ro = mount_tmpfs("ro", "", source=str(rw))
    assert subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode == 0
    with pytest.raises(store.StoreError, match=r"could not write .*a\.jsonl \(the filesystem is read-only"):
        store.Records(ro / "runs" / "a.jsonl").append({"i": 1})
    with pytest.raises(store.StoreError, match=r"could not write .*new \(the filesystem is read-only"):
        store.Records(ro / "new" / "c.jsonl")
    assert store.Records(ro / "runs" / "a.jsonl").read() == [{"i": 0}]
    with pytest.raises(
        store.StoreError, match=r"could not write .*metrics\.json \(the filesystem is read-only"
    ):
        store.write_atomic(ro / "runs" / "metrics.json", "{}")


def test_no_free_inodes_is_disk_full_saying_so(mount_tmpfs):
    mnt = mount_tmpfs("inodes", "size=1m,nr_inodes=16")
    with pytest.raises(OSError):
        for i in range(100):
            (mnt / f"f{i}").touch()
    with pytest.raises(store.DiskFull, match=r"could not write .*x\.jsonl .*no free inodes"):
        store.Records(mnt / "x.jsonl").append({"i": 0})
    assert not (mnt / "x.jsonl").exists()


def test_one_writer_per_folder_whatever_path_reaches_it(mount_tmpfs, tmp_path, holder, monkeypatch):
    """The same folder through a bind mount had its own lock file, so two writers appended (200 rows where one
    writer gives 100). Now the folder itself is locked too (its inode, whatever the path)."""
    monkeypatch.setattr(store, "_held", {})
    monkeypatch.setattr(store, "_held_dirs", {})
    folder = tmp_path / "results" / "smoke" / "03_pass_at_kt_sweep"
    folder.mkdir(parents=True)
    other = mount_tmpfs("elsewhere", "", source=str(folder))
    first = holder(folder)
    with pytest.raises(store.FolderBusy, match="another path to the same folder"):
        store.Records(other / "sweep_records.jsonl").append({"x": 1})
    with pytest.raises(store.FolderBusy, match="another path to the same folder"):
        store.acquire(other, wait=False)
    first.kill()
    first.wait()
    second = holder(other)  # and the other way round
    assert "another path to the same folder" in store.busy(folder.parent)  # what --fresh checks
    with pytest.raises(store.FolderBusy, match="another path to the same folder"):
        store.Records(folder / "sweep_records.jsonl").append({"x": 1})
    second.kill()
    second.wait()
    store.Records(folder / "sweep_records.jsonl").append({"x": 1})
    assert (
        store.acquire(other, wait=False) is False
    )  # this process is its writer already, through either path
    assert store.Records(other / "sweep_records.jsonl").read() == [{"x": 1}]
    store.release(folder)
