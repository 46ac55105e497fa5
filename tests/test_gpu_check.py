"""scripts/gpu_check.sh on CPU: its plan fits its budget, and its preflight on a box that lacks packages.

A bare GPU box is simulated without installing anything: a virtual environment (no pip of its own) whose
site-packages holds symlinks to this environment's installed packages except the ones a test takes away (and
except the kit itself). Both imports and pip then see exactly what such a box has. The real check, a fresh
virtualenv with only torch, transformers and accelerate, is run by hand (docs/gpu.md says what it printed).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PREFLIGHT = REPO / "scripts" / "gpu_preflight.py"
GPU_CHECK = REPO / "scripts" / "gpu_check.sh"
sys.path.insert(0, str(REPO / "scripts"))
import build_gpu_wheelhouse  # noqa: E402
import gpu_preflight  # noqa: E402

sys.path.pop(0)

BARE_BOX_LACKS = [
    "gymnasium",
    "pandas",
    "pytest",
    "trl",
    "datasets",
]  # what a torch+transformers+accelerate box lacks
KIT = "agentic-rl-kit"


def _top_level_entries(dist: metadata.Distribution) -> set[str]:
    """The names in site-packages that belong to `dist` (its packages, modules, .pth files and dist-info)."""
    out = set()
    for f in dist.files or []:
        first = Path(str(f)).parts[0]
        if first != "..":
            out.add(first)
    return out


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def make_box(root: Path, lacks: list[str]) -> Path:
    """A virtualenv at `root` that has this environment's packages but `lacks` (and the kit); returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})["purelib"])
    hidden: set[str] = set()
    for dist in metadata.distributions():
        name = gpu_preflight.canonical(dist.metadata["Name"] or "")
        if name in {gpu_preflight.canonical(n) for n in [*lacks, KIT]}:
            hidden |= _top_level_entries(dist)
    for entry in _site_packages().iterdir():
        if (
            entry.name not in hidden
            and not entry.name.startswith("__editable__")
            and entry.name != "__pycache__"
        ):
            (site / entry.name).symlink_to(entry)
    return root / "bin" / "python"


def rebuild_wheel(dist_name: str, out: Path) -> Path:
    """A wheel of an installed pure-Python distribution, rebuilt from its installed files (for an offline test)."""
    dist = metadata.distribution(dist_name)
    base = Path(dist.locate_file(""))
    info = next(f for f in dist.files if str(f).endswith(".dist-info/METADATA")).parts[0]
    tags = [t.split("-") for t in re.findall(r"^Tag: (\S+)$", (base / info / "WHEEL").read_text(), re.M)]
    # a wheel of several tags (py2.py3-none-any) is named with all of them, or pip skips it as py2-only
    if len({(a, p) for _, a, p in tags}) == 1:
        tag = "-".join([".".join(dict.fromkeys(py for py, _, _ in tags)), tags[0][1], tags[0][2]])
    else:
        tag = "-".join(tags[0])
    name = dist.metadata["Name"].replace("-", "_")
    path = out / f"{name}-{dist.version}-{tag}.whl"
    records = io.StringIO()
    writer = csv.writer(records, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in dist.files:
            rel = str(f)
            if (
                rel.startswith("..")
                or "__pycache__" in rel
                or rel.endswith((".pyc", "/RECORD", "/INSTALLER", "/REQUESTED"))
            ):
                continue
            if rel.endswith("direct_url.json"):
                continue
            data = (base / rel).read_bytes()
            zf.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            writer.writerow([rel, f"sha256={digest}", len(data)])
        writer.writerow([f"{info}/RECORD", "", ""])
        zf.writestr(f"{info}/RECORD", records.getvalue())
    return path


def offline_env(**extra: str) -> dict:
    """The environment of a box with no package index: no pip configuration, no index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", **extra)
    return env


def run(cmd: list, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Run `cmd` (paths allowed), by default offline and from the repo root."""
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=env or offline_env(), cwd=cwd
    )


@pytest.fixture(scope="module")
def bare_box(tmp_path_factory):
    """A box with torch, transformers, accelerate (and their dependencies), without what the check also needs."""
    return make_box(tmp_path_factory.mktemp("bare") / "venv", BARE_BOX_LACKS)


def test_preflight_names_exactly_the_missing_packages(bare_box, tmp_path):
    out = run([bare_box, PREFLIGHT, "--site", tmp_path / "site-packages"])
    assert out.returncode == gpu_preflight.EXIT_MISSING, out.stdout + out.stderr
    assert f"missing: {' '.join(BARE_BOX_LACKS)}\n" in out.stdout
    for name in BARE_BOX_LACKS:
        assert re.search(rf"^  {name} +MISSING +pin ", out.stdout, re.M), name
    for name in ("torch", "transformers", "accelerate"):
        assert re.search(rf"^  {name} +\d", out.stdout, re.M), name  # found, with its version
    assert "run with --install" in out.stdout


def test_preflight_offline_without_a_wheelhouse_says_how_to_get_one(bare_box, tmp_path):
    out = run([bare_box, PREFLIGHT, "--install", "--site", tmp_path / "site-packages"])
    assert out.returncode == gpu_preflight.EXIT_MISSING, out.stdout + out.stderr
    assert "cannot resolve gymnasium pandas pytest trl datasets from the package index" in out.stdout
    assert "scripts/build_gpu_wheelhouse.py" in out.stdout
    assert not (tmp_path / "site-packages").exists()  # nothing was installed
    # an empty wheelhouse: pip names what it lacks
    (tmp_path / "wh").mkdir()
    out = run(
        [
            bare_box,
            PREFLIGHT,
            "--install",
            "--wheelhouse",
            tmp_path / "wh",
            "--site",
            tmp_path / "site-packages",
        ]
    )
    assert out.returncode == gpu_preflight.EXIT_MISSING
    assert "from the wheelhouse" in out.stdout and "gymnasium" in out.stdout


def test_gpu_check_stops_when_its_preflight_fails(bare_box, tmp_path):
    env = offline_env(PY=str(bare_box), GPU_CHECK_SITE=str(tmp_path / "site-packages"), TMPDIR=str(tmp_path))
    out = run(["bash", GPU_CHECK, "--no-vllm"], env=env)
    assert out.returncode == gpu_preflight.EXIT_MISSING, out.stdout + out.stderr
    assert "missing: gymnasium pandas pytest trl datasets" in out.stdout
    assert "the preflight failed (exit 3" in out.stdout and "== base" not in out.stdout


def install_from_rebuilt_wheels(tmp_path, lacks: list[str]):
    """A box without `lacks`, a wheelhouse of their wheels rebuilt from this venv, and the preflight's install from
    it into a private folder: (the box, the preflight's completed process, that folder)."""
    box = make_box(tmp_path / "venv", lacks)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for name in lacks:
        rebuild_wheel(name, wheelhouse)
    site = tmp_path / "site" / "site-packages"
    return box, run([box, PREFLIGHT, "--install", "--wheelhouse", wheelhouse, "--site", site]), site


def test_preflight_refuses_a_site_not_named_site_packages(tmp_path):
    out = run([sys.executable, PREFLIGHT, "--site", tmp_path / "mysite"])
    assert out.returncode == gpu_preflight.EXIT_MISSING
    assert "must be a folder named site-packages" in out.stdout and "dill" in out.stdout


def _plan(*args: str, **env: str) -> tuple[int, str, dict[str, int], int]:
    out = run(["bash", GPU_CHECK, "--plan", *args], env={**os.environ, **env})
    limits = {m[0]: int(m[1]) for m in re.findall(r"^  (\w+) +limit +(\d+) s$", out.stdout, re.M)}
    budget = re.search(r"budget (\d+) s", out.stdout)
    return out.returncode, out.stdout + out.stderr, limits, int(budget.group(1)) if budget else -1


def test_every_step_fits_the_budget():
    for args in ((), ("--vllm",), ("--no-vllm",), ("--steps", "base,gpu_tests,rl_loop_hf,trl_hf")):
        rc, text, limits, budget = _plan(*args)
        assert rc == 0, text
        assert limits and sum(limits.values()) <= budget, text
    rc, text, limits, _ = _plan("--vllm")
    assert list(limits) == [
        "base",
        "gpu_tests",
        "rl_loop_hf",
        "trl_hf",
        "benchmark",
        "rl_loop_vllm",
        "trl_vllm",
    ]
    rc, text, limits, _ = _plan("--no-vllm")
    assert list(limits) == ["base", "gpu_tests", "rl_loop_hf", "trl_hf", "benchmark"]
    # a cold build of the smoke base on a fresh box: first imports without bytecode (the preflight installs with
    # --no-compile), about 25 s on a fast phase of a 2-core CPU whose speed varies 2-2.5x
    assert limits["base"] >= 120, "the base step's limit must cover a cold build"
    assert sum(limits.values()) <= 540, "without vLLM the check promises to finish within 9 minutes"
    # the optional Qwen3-4B step runs only when asked for, last, with its own limit in the budget
    rc, text, with_qwen3, budget = _plan("--no-vllm", "--qwen3")
    assert rc == 0 and list(with_qwen3) == [*limits, "qwen3_4b"] and budget == sum(with_qwen3.values()), text
    rc, text, limits, _ = _plan("--no-vllm", "--steps", "base,qwen3_4b")
    assert rc == 0 and list(limits) == ["base", "qwen3_4b"], text


def test_budget_and_step_errors_name_the_problem():
    rc, text, _, _ = _plan("--no-vllm", GPU_CHECK_BUDGET="100")
    assert rc == 2 and "add up to 540 s, more than GPU_CHECK_BUDGET=100 s" in text
    rc, text, _, _ = _plan("--steps", "base,bogus")
    assert rc == 2 and "unknown step 'bogus'" in text
    rc, text, _, _ = _plan("--no-vllm", "--steps", "trl_vllm")
    assert rc == 2 and "needs vllm" in text
    rc, text, _, _ = _plan("--frobnicate")
    assert rc == 2 and "unknown argument --frobnicate" in text


def test_the_benchmark_imports_the_kit_from_its_own_folder(tmp_path):
    """`python benchmarks/rollout_vllm.py` works with the kit not installed (the script puts the repo root on the
    path itself)."""
    box = make_box(tmp_path / "venv", [])
    assert run([box, "-c", "import helpers"], cwd=tmp_path).returncode != 0  # the kit is not installed here
    out = run([box, REPO / "benchmarks" / "rollout_vllm.py", "--help"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--enforce-eager" in out.stdout


def test_wheelhouse_builder_targets_the_box_not_itself():
    args = build_gpu_wheelhouse.target_args("3.11", build_gpu_wheelhouse.ARCHES["aarch64"])
    assert args[:9] == [
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--platform",
        "manylinux_2_28_aarch64",
    ]
    pins = gpu_preflight.read_pins()
    needed = {gpu_preflight.canonical(d) for d, _, _ in gpu_preflight.PACKAGES if d not in gpu_preflight.BOX}
    assert set(BARE_BOX_LACKS) <= needed and all(
        n in pins for n in needed
    )  # every package it fetches is pinned
    assert pins["pyarrow"] == "24.0.0" and pins["trl"] == "1.16.0"


def requirement_closure(names: list[str]) -> set[str]:
    """Canonical names of the installed distributions `names` need, themselves included (markers evaluated,
    extras ignored): what a box that has these distributions installed holds."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [gpu_preflight.canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(gpu_preflight.canonical(req.name))
    return seen


def installed() -> set[str]:
    return {
        gpu_preflight.canonical(d.metadata["Name"]) for d in metadata.distributions() if d.metadata["Name"]
    }


def test_preflight_on_a_torch_only_box_asks_for_the_wheelhouse_not_for_cuda_builds(tmp_path):
    """A box with torch alone (and pip): transformers and accelerate are missing like any other package, not a
    reason to stop (exit 5 is kept for torch itself)."""
    keep = requirement_closure(["torch"]) | {"pip"}
    box = make_box(tmp_path / "venv", sorted(installed() - keep))
    assert run([box, "-c", "import transformers"]).returncode != 0
    out = run([box, PREFLIGHT, "--site", tmp_path / "site-packages"])
    assert out.returncode == gpu_preflight.EXIT_MISSING, out.stdout + out.stderr
    for name in ("transformers", "accelerate", "tokenizers", *BARE_BOX_LACKS):
        assert re.search(rf"^  {name} +MISSING +pin ", out.stdout, re.M), name
    assert "missing from the box" not in out.stdout and "CUDA build" not in out.stdout
    assert re.search(r"^  torch +\d", out.stdout, re.M)
    # without torch it is the box that is wrong: exit 5, naming torch only
    bare = make_box(tmp_path / "bare", sorted(installed() - {"pip"}))
    out = run([bare, PREFLIGHT, "--site", tmp_path / "site-packages"])
    assert out.returncode == gpu_preflight.EXIT_BOX and "missing from the box: torch." in out.stdout


@pytest.mark.slow
def test_preflight_installs_transformers_and_accelerate_from_a_wheelhouse(tmp_path):
    """The box lacks transformers, accelerate and what they need beyond torch, and gymnasium and pytest; the
    wheelhouse (wheels rebuilt from this environment's files: offline) brings them into the private folder, every
    step's imports work, the box's own environment is untouched, and a second run finds everything in the folder.
    (One install for both cases: each install costs about 30 s.)"""
    pins = gpu_preflight.read_pins()
    # a wheel rebuilt here has this environment's version: what requirements-gpu.txt pins otherwise (numpy) stays on
    # the box, so pip can resolve the pins from the wheelhouse
    beyond_torch = (
        requirement_closure(["transformers", "accelerate"]) - requirement_closure(["torch"]) - {"pip"}
    )
    lacks = sorted(n for n in beyond_torch if pins.get(n) in (None, metadata.version(n)))
    assert {"transformers", "accelerate", "tokenizers", "safetensors", "huggingface-hub"} <= set(lacks)
    # and two pure-Python ones, whose wheels can be rebuilt from the installed files
    lacks = sorted({*lacks, "gymnasium", "pytest"})
    box, out, site = install_from_rebuilt_wheels(tmp_path, lacks)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"installing {len(lacks)} distributions into {site}" in out.stdout
    assert all(f"{n}=={metadata.version(n)}" in out.stdout for n in ("transformers", "gymnasium", "pytest"))
    for step in gpu_preflight.IMPORTS:
        assert re.search(rf"imports of {step} +ok", out.stdout), step
    assert "ready" in out.stdout
    assert (site / "gymnasium").is_dir() and (site / "transformers").is_dir()
    # the box's own environment is untouched; a second run finds everything in the private folder
    assert run([box, "-c", "import transformers"]).returncode != 0
    assert run([box, "-c", "import gymnasium"]).returncode != 0
    again = run([box, PREFLIGHT, "--site", site])
    assert again.returncode == 0 and "missing" not in again.stdout.replace("MISSING", "")


# A stand-in for the box's interpreter: every `$PY` call of gpu_check.sh, recognised by its arguments. The CUDA checks
# pass, the preflight passes, and each step exits with the code FAKE_RCS gives it ("trl_hf=8,base=1"; default 0).
# Any other call fails loudly (exit 99), so a new `$PY` call in the script shows up here.
FAKE_PY = r"""#!/usr/bin/env bash
args="$*"
case "$args" in
  *find_spec*) exit 0 ;;
  *"gpu_preflight as g"*) echo "$GPU_CHECK_SITE"; exit 0 ;;
  "scripts/gpu_preflight.py --install"*) echo "fake preflight: ready"; exit 0 ;;
  *cuda.is_available*) [ -z "${FAKE_NO_CUDA:-}" ]; exit $? ;;
  "scripts/gpu_preflight.py --why-no-cuda") echo "fake why: torch built for CUDA 13.0, driver R570"; exit 0 ;;
  *get_device_name*) echo "Fake GPU"; exit 0 ;;
  *'m.version("vllm")'*) echo "0.0.fake"; exit 0 ;;
  -) cat > /dev/null; echo "{}"; exit 0 ;;
  *base_model.path_of*) step=base ;;
  "-m pytest "*tests/test_gpu.py) step=gpu_tests ;;
  "scripts/gpu_check_steps.py rl-loop "*"--backend hf"*) step=rl_loop_hf ;;
  "scripts/gpu_check_steps.py rl-loop "*"--backend vllm"*) step=rl_loop_vllm ;;
  "scripts/gpu_check_steps.py trl "*"--vllm") step=trl_vllm ;;
  "scripts/gpu_check_steps.py trl "*) step=trl_hf ;;
  "benchmarks/rollout_vllm.py "*) step=benchmark ;;
  "scripts/gpu_check_steps.py qwen3 "*) step=qwen3_4b ;;
  *) echo "fake python: unexpected call: $args" >&2; exit 99 ;;
esac
rc=0
for kv in ${FAKE_RCS//,/ }; do [ "${kv%%=*}" = "$step" ] && rc=${kv#*=}; done
echo "fake $step: exit $rc"
exit "$rc"
"""


def _fake_check(tmp_path: Path, *args: str, rcs: str = "", **env_extra: str) -> tuple[int, str, list[str]]:
    """gpu_check.sh run end to end with the fake interpreter: (exit status, its output, the steps that ran)."""
    fake = tmp_path / "python"
    if not fake.exists():
        fake.write_text(FAKE_PY)
        fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    env.update(
        PY=str(fake), GPU_CHECK_SITE=str(tmp_path / "site-packages"), TMPDIR=str(tmp_path), FAKE_RCS=rcs
    )
    env.update(env_extra)
    out = run(["bash", GPU_CHECK, *args], env=env)
    text = out.stdout + out.stderr
    assert "unexpected call" not in text, text
    return out.returncode, text, re.findall(r"^fake (\w+): exit", out.stdout, re.M)


def test_the_exit_status_and_the_verdict_line_state_every_fact(tmp_path):
    """The script end to end past its CUDA check, each step stubbed: failure (1) > no learning signal (8) > vLLM
    skipped (6) > 0 decide the exit status, and the summary's last line states each of them that holds."""
    hf = ["base", "gpu_tests", "rl_loop_hf", "trl_hf", "benchmark"]

    def verdict(text: str) -> str:
        lines = [line for line in text.splitlines() if line.startswith("gpu_check (exit ")]
        assert len(lines) == 1, text
        return lines[0]

    rc, text, ran = _fake_check(tmp_path, "--vllm")
    assert rc == 0 and ran == [*hf, "rl_loop_vllm", "trl_vllm"], text
    assert verdict(text) == "gpu_check (exit 0): every step passed, vLLM included" and "on Fake GPU" in text
    rc, text, ran = _fake_check(tmp_path, "--no-vllm")
    assert rc == 6 and ran == hf, text
    assert verdict(text) == "gpu_check (exit 6): passed WITHOUT vLLM; vLLM part SKIPPED: --no-vllm"
    # no learning signal and vLLM skipped: 8, and the line says both (in the summary --out keeps too)
    rc, text, _ = _fake_check(tmp_path, "--no-vllm", "--out", str(tmp_path / "out"), rcs="trl_hf=8")
    line = verdict(text)
    assert rc == 8, text
    assert line.startswith("gpu_check (exit 8): nothing failed, but a TRL step had NO-SIGNAL")
    assert line.endswith("; vLLM part SKIPPED: --no-vllm")
    assert (tmp_path / "out" / "summary.txt").read_text().splitlines()[-1] == line
    assert re.search(r"^trl_hf +NO-SIGNAL ", text, re.M)
    rc, text, _ = _fake_check(tmp_path, "--vllm", rcs="trl_vllm=8")
    assert rc == 8 and "NO-SIGNAL" in verdict(text) and "SKIPPED" not in verdict(text), text
    # a failure wins, and the line still says the other two
    rc, text, ran = _fake_check(tmp_path, "--no-vllm", rcs="trl_hf=8,rl_loop_hf=1")
    line = verdict(text)
    assert rc == 1 and ran == hf and line.startswith("gpu_check (exit 1): a step FAILED"), text
    assert "; also a TRL step had NO-SIGNAL" in line and line.endswith("; vLLM part SKIPPED: --no-vllm")
    assert re.search(r"^rl_loop_hf +FAIL\(1\) ", text, re.M)
    # exit 8 means no signal only from a TRL step; the optional Qwen3 step's skip (9) changes nothing
    rc, text, _ = _fake_check(tmp_path, "--vllm", "--qwen3", rcs="rl_loop_hf=8,qwen3_4b=9")
    assert rc == 1 and "NO-SIGNAL" not in verdict(text) and re.search(r"^rl_loop_hf +FAIL\(8\) ", text, re.M)
    rc, text, ran = _fake_check(tmp_path, "--vllm", "--qwen3", rcs="qwen3_4b=9")
    assert rc == 0 and ran[-1] == "qwen3_4b" and re.search(r"^qwen3_4b +SKIPPED ", text, re.M), text


def test_without_cuda_the_check_names_the_torch_build_and_the_driver(tmp_path):
    """No CUDA device: exit 2 after the preflight's diagnosis (`--why-no-cuda`), and no step runs."""
    rc, text, ran = _fake_check(tmp_path, "--no-vllm", FAKE_NO_CUDA="1")
    assert rc == 2 and ran == [] and "no CUDA device visible" in text
    assert "fake why: torch built for CUDA 13.0, driver R570" in text


@pytest.mark.parametrize(
    ("torch_cuda", "driver", "cause"),
    [
        ("13.0", "570.86.15", "torch's CUDA 13.0 needs an R580+ driver; this one is R570"),
        ("12.8", "570.86.15", "the driver (R570) is new enough for CUDA 12.8"),
        (None, "580.65.06", "this torch has no CUDA"),
        ("13.0", None, "no NVIDIA driver is loaded"),
    ],
)
def test_why_no_cuda_names_the_cause_and_the_ways_out(torch_cuda, driver, cause):
    lines = "\n".join(gpu_preflight.why_no_cuda("2.13.0", torch_cuda, driver))
    assert cause in lines and "forward-compatibility" in lines and "docs/gpu.md" in lines


def test_the_preflight_refuses_python_older_than_3_11():
    assert gpu_preflight.python_problem((3, 11, 9)) == "" and gpu_preflight.python_problem((3, 12, 0)) == ""
    problem = gpu_preflight.python_problem((3, 10, 12))
    assert "Python 3.10.12 is too old" in problem and ">= 3.11" in problem


def test_the_gpu_tests_collect_and_run_without_pytest_xdist():
    """The `gpu_tests` step on a box set up from requirements-gpu.txt, which has no pytest-xdist: conftest gives every
    test an `xdist_group` marker under `--strict-markers`, so conftest registers it itself (issue 48). Collects
    tests/test_gpu.py and runs the fast verdict tests with the plugin disabled; `make test` runs with it."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "not slow",
            "tests/test_gpu.py",
            "tests/test_gpu_check_verdict.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        # not a worker of this session's pytest-xdist: the box the step runs on has none
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
            "OMP_NUM_THREADS": "1",
        },
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "passed" in out.stdout and "deselected" in out.stdout


def test_the_readme_the_docs_and_the_script_agree_on_the_limits_and_the_wheelhouse():
    """Issue 48: the README said 7 and 16 minutes and a 62 MiB wheelhouse where the script and docs/gpu.md said 9 and
    20 and 105.6 MiB. The totals come from `--plan`; the wheelhouse size from docs/gpu.md's build record."""
    without, with_vllm = (sum(_plan(arg)[2].values()) for arg in ("--no-vllm", "--vllm"))
    readme = (REPO / "README.md").read_text()
    docs = (REPO / "docs" / "gpu.md").read_text()
    header = GPU_CHECK.read_text()
    assert (
        f"to {without // 60} minutes ({without} s) without vLLM and {with_vllm // 60} ({with_vllm} s) with it"
        in (" ".join(readme.split()))
    )
    assert f"{without} s ({without // 60} min) / {with_vllm} s ({with_vllm // 60} min)" in docs
    assert (
        f"add up to {without} s, {without // 60} minutes, without vLLM and {with_vllm} s with it"
        in " ".join(header.split()).replace("# ", "")
    )
    built = re.search(
        r"Built \d{4}-\d\d-\d\d for CPython 3\.11 on Linux x86_64: \d+ wheels, ([\d.]+) MiB", docs
    )
    assert built and f"from a {built.group(1)} MiB wheelhouse" in " ".join(readme.split())
