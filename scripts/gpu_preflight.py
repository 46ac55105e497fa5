#!/usr/bin/env python3
"""Preflight of `scripts/gpu_check.sh`: which packages the check needs are missing, and getting them.

A GPU box often has only torch (a CUDA container, a cluster module), sometimes transformers and accelerate too. The
check also needs transformers, accelerate, tokenizers, gymnasium (FrozenLake's dynamics), pandas (the RL loop's
R_single tables; a dependency of datasets), pytest (the GPU tests), trl and datasets (the TRL steps). This script

1. lists every package the check needs, with the version found or MISSING and the steps that need it;
2. with `--install`, resolves what is missing against what the box already has (`pip install --dry-run --report`,
   pins from requirements-gpu.txt) and installs exactly that, without dependencies, into a private folder
   (`--site`, default build/gpu-check-site/<python>-<platform>/site-packages) that the check puts on its PYTHONPATH: the box's
   own environment is never modified (the folder must be called site-packages: dill, which datasets uses to
   fingerprint data, pickles modules found anywhere else by value and fails on pyarrow's), and torch and vllm are
   never installed (CUDA builds that must match the box's driver: if what is missing needs other versions of them,
   that is reported, not done); transformers, accelerate and their dependencies are, when the box lacks them;
   the packages come from a wheelhouse (`--wheelhouse`, default build/gpu-wheelhouse when it exists; built on a
   networked machine by scripts/build_gpu_wheelhouse.py and copied along) or else from the package index;
3. imports what each step imports, with the repo root and the private folder on the path, and names what fails.

It needs only the standard library and pip (>= 22.2 for `--report`). Exit status: 0 ready; 3 packages are missing
and could not be installed; 4 an import failed; 5 torch is missing (or vllm, with `--vllm require`), or Python is
older than 3.11. `--why-no-cuda` prints torch's CUDA build, the driver and the cause when torch sees no GPU.

    python scripts/gpu_preflight.py                       # check only
    python scripts/gpu_preflight.py --install             # check, install what is missing, check the imports
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO / "requirements-gpu.txt"
DEFAULT_WHEELHOUSE = REPO / "build" / "gpu-wheelhouse"

# What the box must bring: never installed here (CUDA builds that must match the driver, and gigabytes).
BOX = ("torch", "vllm")

# (distribution, import name, what needs it). Everything except torch (and the optional vllm) is installable.
PACKAGES: list[tuple[str, str, str]] = [
    ("torch", "torch", "every step"),
    ("transformers", "transformers", "every step"),
    ("accelerate", "accelerate", "trl_* (and transformers' Trainer)"),
    ("tokenizers", "tokenizers", "every step (the tiny model's tokenizer)"),
    ("numpy", "numpy", "every step"),
    ("pyyaml", "yaml", "every step (profiles)"),
    ("tqdm", "tqdm", "every step (progress)"),
    ("gymnasium", "gymnasium", "every step (FrozenLake's dynamics)"),
    ("pandas", "pandas", "rl_loop_* (R_single tables), trl_* (datasets)"),
    ("pytest", "pytest", "gpu_tests"),
    ("trl", "trl", "trl_*"),
    ("datasets", "datasets", "trl_*"),
]
OPTIONAL = [("vllm", "vllm", "gpu_tests' vLLM tests, benchmark's vLLM half, rl_loop_vllm, trl_vllm")]

# What each step of gpu_check.sh imports (statements run with the repo root and the private folder on the path).
IMPORTS: dict[str, list[str]] = {
    "base": ["import helpers.base_model", "import helpers.config"],
    "gpu_tests": ["import pytest", "import helpers.train", "import helpers.policy_vllm"],
    "rl_loop": ["import helpers.train", "import helpers.probing", "import helpers.rollout"],
    "trl": [
        "import helpers.train_trl",
        "from trl import GRPOConfig, GRPOTrainer",
        "from datasets import Dataset",
    ],
    "benchmark": ["import helpers.envs", "import helpers.policy", "import helpers.rollout"],
}
VLLM_IMPORTS = ["from vllm import LLM, SamplingParams"]

EXIT_MISSING, EXIT_IMPORT, EXIT_BOX = 3, 4, 5
MIN_PYTHON = (3, 11)  # what requirements-gpu.txt was resolved on (vllm 0.31.0 and the kit's pins)
# The oldest Linux driver branch each CUDA major version of a torch build needs (NVIDIA's CUDA toolkit release
# notes: CUDA 13.x needs R580 and later, CUDA 12.x R525 and later). PyPI's torch 2.13.0 and vllm 0.31.0 are CUDA 13.0.
DRIVER_FOR_CUDA = {13: 580, 12: 525, 11: 450}


def python_problem(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> str:
    """Why this Python cannot run the check ('' when it can): requirements-gpu.txt needs Python >= 3.11, and on 3.10
    pip only says that no version of some package matches."""
    if tuple(version[:2]) >= MIN_PYTHON:
        return ""
    have = ".".join(map(str, version[:3]))
    return (
        f"gpu_preflight: Python {have} is too old: the GPU stack (requirements-gpu.txt: vllm 0.31.0, torch 2.13.0) "
        f"needs Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}. Run the check with a Python 3.11 interpreter: "
        "PY=/path/to/python3.11 scripts/gpu_check.sh (docs/gpu.md, Set-up)."
    )


def driver_version() -> str | None:
    """The NVIDIA kernel driver's version ('580.65.06'), from /proc or nvidia-smi; None without a driver."""
    proc = Path("/proc/driver/nvidia/version")
    if proc.is_file():
        m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", proc.read_text())
        if m:
            return m.group(1)
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()[:1]
    return first[0].strip() if out.returncode == 0 and first else None


def why_no_cuda(
    torch_version: str | None, torch_cuda: str | None, driver: str | None, error: str = ""
) -> list[str]:
    """Lines that say why torch sees no CUDA device: a CPU-only torch build, no NVIDIA driver, or a driver older than
    the branch the build's CUDA needs; and the ways out (docs/gpu.md, *When CUDA is not available*)."""
    lines = [
        f"  torch {torch_version or 'MISSING'}: "
        + (f"built for CUDA {torch_cuda}" if torch_cuda else "a CPU-only build (torch.version.cuda is None)"),
        f"  NVIDIA driver: {driver or 'none found (no /proc/driver/nvidia/version, nvidia-smi absent or failing)'}",
    ]
    if error:
        lines.append(f"  torch says: {error}")
    if torch_version is None:
        lines.append("  cause: torch is not installed for this interpreter")
    elif not torch_cuda:
        lines.append(
            "  cause: this torch has no CUDA; install requirements-gpu.txt's torch (a CUDA 13.0 build)"
        )
    elif driver is None:
        lines.append(
            "  cause: no NVIDIA driver is loaded (a container without --gpus, or a machine without a GPU)"
        )
    else:
        major = int(torch_cuda.split(".")[0])
        need = DRIVER_FOR_CUDA.get(major)
        have = int(driver.split(".")[0])
        if need and have < need:
            lines.append(f"  cause: torch's CUDA {torch_cuda} needs an R{need}+ driver; this one is R{have}")
        else:
            lines.append(
                f"  the driver (R{have}) is new enough for CUDA {torch_cuda}: check CUDA_VISIBLE_DEVICES "
                "and the device files (/dev/nvidia*)"
            )
    lines.append(
        "  ways out (docs/gpu.md, When CUDA is not available): a newer driver; NVIDIA's forward-compatibility "
        "package (cuda-compat, data-centre GPUs); or torch and vllm built for the driver's CUDA (CUDA 12 "
        "wheels from download.pytorch.org and vLLM's releases)"
    )
    return lines


def report_no_cuda() -> int:
    """`--why-no-cuda`: print the torch build, the driver and the cause; exit 0 (a diagnosis, not a check)."""
    error = ""
    try:
        import torch

        version, cuda = torch.__version__, torch.version.cuda
        try:
            torch.cuda.init()
        except Exception as e:  # the driver's own message (too old, no device) when torch gives one
            error = f"{type(e).__name__}: {e}".strip()[:400]
    except ImportError:
        version, cuda = None, None
    print("gpu_preflight: why torch sees no CUDA device")
    print("\n".join(why_no_cuda(version, cuda, driver_version(), error)))
    return 0


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path = REQUIREMENTS) -> dict[str, str]:
    """`name==version` pins of a requirements file (canonical names; lines with markers keep their first pin)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]*)\s*==\s*([^\s;#]+)", line)
        if m:
            pins.setdefault(canonical(m.group(1)), m.group(2))
    return pins


def default_site() -> Path:
    """The private install folder for this interpreter and platform (under build/, which git ignores)."""
    tag = f"py{sys.version_info.major}{sys.version_info.minor}-{sys.platform}-{platform.machine()}"
    return REPO / "build" / "gpu-check-site" / tag / "site-packages"


def find(import_name: str) -> bool:
    """Whether `import_name` can be found (without importing it)."""
    try:
        return importlib.util.find_spec(import_name) is not None
    except (ImportError, ValueError):
        return False


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def survey(packages: list[tuple[str, str, str]]) -> list[dict]:
    """One row per package: name, import name, whether it can be imported, its version, what needs it."""
    rows = []
    for dist, name, need in packages:
        found = find(name)
        rows.append(
            {
                "dist": dist,
                "import": name,
                "need": need,
                "found": found,
                "version": version_of(dist) if found else None,
            }
        )
    return rows


def print_survey(rows: list[dict], pins: dict[str, str]) -> None:
    optional = {d for d, _, _ in OPTIONAL}
    for r in rows:
        status = (r["version"] or "found") if r["found"] else "MISSING"
        if r["dist"] in optional and not r["found"]:
            print(f"  {r['dist']:13s} {'not installed':18s} {'optional':12s} skipped: {r['need']}")
            continue
        pin = pins.get(canonical(r["dist"]), "")
        kind = "box" if r["dist"] in BOX else (f"pin {pin}" if pin else "")
        print(f"  {r['dist']:13s} {status:18s} {kind:12s} {r['need']}")


def pip(*args: str, site: Path | None = None) -> subprocess.CompletedProcess:
    """Run this interpreter's pip; with `site`, pip also sees what an earlier run installed there."""
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def pip_version() -> tuple[int, ...] | None:
    out = pip("--version")
    m = re.match(r"pip (\d+)\.(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if (out.returncode == 0 and m) else None


def source_args(wheelhouse: Path | None) -> list[str]:
    """pip arguments for where packages come from: the wheelhouse only, or the index (with a short timeout)."""
    if wheelhouse is not None:
        return ["--no-index", "--find-links", str(wheelhouse)]
    return ["--timeout", "20", "--retries", "1"]


def plan_install(
    missing: list[str], pins: dict[str, str], wheelhouse: Path | None, site: Path | None = None
) -> tuple[list[str], str]:
    """What pip would install for the `missing` distributions on top of this environment: ([name==version], error).

    Pins come from requirements-gpu.txt for every distribution not installed here; installed ones are left free, so
    pip keeps them when they do."""
    present = {
        canonical(d.metadata["Name"]) for d in importlib.metadata.distributions() if d.metadata["Name"]
    }
    wanted = [f"{d}=={pins[canonical(d)]}" if canonical(d) in pins else d for d in missing]
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(
            "".join(f"{n}=={v}\n" for n, v in pins.items() if n not in present and n not in BOX)
        )
        report = Path(tmp) / "report.json"
        out = pip(
            "install",
            "--dry-run",
            "--quiet",
            "--report",
            str(report),
            "-c",
            str(constraints),
            *source_args(wheelhouse),
            *wanted,
            site=site,
        )
        if out.returncode != 0:
            return [], (out.stderr or out.stdout).strip()
        items = json.loads(report.read_text())["install"]
    return [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items], ""


def install(reqs: list[str], site: Path, wheelhouse: Path | None) -> str:
    """Install `reqs` (exact pins) without dependencies into `site`; returns pip's error, or ''. No byte-compiling
    (`--no-compile`): Python compiles what the steps import when they first import it, and the thousands of modules of
    transformers that no step imports are left alone (the wheelhouse test: 53 -> 45 s)."""
    site.mkdir(parents=True, exist_ok=True)
    out = pip(
        "install",
        "--quiet",
        "--no-deps",
        "--upgrade",
        "--no-compile",
        "--no-warn-script-location",
        "--target",
        str(site),
        *source_args(wheelhouse),
        *reqs,
    )
    return "" if out.returncode == 0 else (out.stderr or out.stdout).strip()


def check_imports(steps: dict[str, list[str]], site: Path) -> dict[str, str]:
    """Run each step's imports in a fresh interpreter with the repo root and `site` on the path: step -> error."""
    code = (
        "import json, sys, traceback\n"
        f"steps = {json.dumps(steps)}\n"
        "res = {}\n"
        "for step, stmts in steps.items():\n"
        "    for s in stmts:\n"
        "        try:\n"
        "            exec(s, {})\n"
        "        except BaseException as e:\n"
        "            res[step] = f'{s}: {type(e).__name__}: {e}'\n"
        "            break\n"
        "print('PREFLIGHT-RESULT ' + json.dumps(res))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), str(site), os.environ.get("PYTHONPATH")])),
    )
    env.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    for line in out.stdout.splitlines():
        if line.startswith("PREFLIGHT-RESULT "):
            return json.loads(line.removeprefix("PREFLIGHT-RESULT "))
    return {"(all)": f"the import check crashed (exit {out.returncode}): {out.stderr.strip()[-2000:]}"}


def offline_help(missing: list[str]) -> str:
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return (
        "  On a machine with network (any OS), from the repo root:\n"
        f"    python scripts/build_gpu_wheelhouse.py --python-version {py} --arch {platform.machine()}\n"
        f"  then copy build/gpu-wheelhouse/ into this checkout (or set GPU_CHECK_WHEELHOUSE) and run again.\n"
        f"  Or install them into this environment yourself: {' '.join(missing)}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check (and install) what scripts/gpu_check.sh needs.")
    ap.add_argument("--install", action="store_true", help="install what is missing into --site")
    ap.add_argument(
        "--site",
        type=Path,
        default=Path(os.environ.get("GPU_CHECK_SITE") or default_site()),
        help="private install folder put on PYTHONPATH (default: %(default)s)",
    )
    ap.add_argument(
        "--wheelhouse",
        type=Path,
        default=os.environ.get("GPU_CHECK_WHEELHOUSE") or None,
        help=f"install from this folder of wheels only (default: {DEFAULT_WHEELHOUSE} if it exists, "
        "else the package index)",
    )
    ap.add_argument(
        "--vllm",
        choices=("auto", "require", "skip"),
        default="auto",
        help="auto: check vLLM's imports when vllm is installed; require: fail without it",
    )
    ap.add_argument(
        "--why-no-cuda",
        action="store_true",
        help="say why torch sees no CUDA device (torch's CUDA build, the driver) and exit",
    )
    args = ap.parse_args(argv)
    if args.why_no_cuda:
        return report_no_cuda()
    problem = python_problem()
    if problem:
        print(problem)
        return EXIT_BOX
    wheelhouse = args.wheelhouse
    if wheelhouse is None and DEFAULT_WHEELHOUSE.is_dir():
        wheelhouse = DEFAULT_WHEELHOUSE
    if wheelhouse is not None and not Path(wheelhouse).is_dir():
        print(f"gpu_preflight: the wheelhouse {wheelhouse} is not a folder")
        return EXIT_MISSING
    site = args.site.resolve()
    if site.name != "site-packages":
        print(
            f"gpu_preflight: --site must be a folder named site-packages, got {site} (dill, which datasets uses, "
            "pickles modules imported from any other folder by value, and fails on pyarrow's)"
        )
        return EXIT_MISSING
    for p in (str(site), str(REPO)):  # what an earlier run installed counts as present
        if p not in sys.path:
            sys.path.insert(0, p)

    pins = read_pins()
    print(
        f"gpu_preflight: {sys.executable} (Python {platform.python_version()}, {sys.platform} {platform.machine()})"
    )
    rows = survey(PACKAGES + OPTIONAL)
    print_survey(rows, pins)
    missing = [r["dist"] for r in rows[: len(PACKAGES)] if not r["found"]]
    box_missing = [d for d in missing if d in BOX]
    has_vllm = rows[-1]["found"]
    if args.vllm == "require" and not has_vllm:
        box_missing.append("vllm")
    if box_missing:
        print(
            f"missing from the box: {' '.join(box_missing)}. These are not installed here (CUDA builds that "
            f"must match the driver): the box must bring them (requirements-gpu.txt pins torch "
            f"{pins.get('torch')}, vllm {pins.get('vllm')}); everything else comes from the wheelhouse."
        )
        return EXIT_BOX
    if missing:
        print(f"missing: {' '.join(missing)}")
        if not args.install:
            print("  (run with --install to install them into a private folder)")
            return EXIT_MISSING
        pv = pip_version()
        if pv is None or pv < (22, 2):
            print(
                f"gpu_preflight: pip >= 22.2 is needed to install (found: {pv}); install the missing packages "
                "by hand"
            )
            return EXIT_MISSING
        where = f"the wheelhouse {wheelhouse}" if wheelhouse else "the package index"
        reqs, err = plan_install(missing, pins, wheelhouse, site)
        if err:
            print(f"gpu_preflight: pip cannot resolve {' '.join(missing)} from {where}:\n{_indent(err)}")
            if wheelhouse is None:
                print("  No package index reachable? " + offline_help(missing).lstrip())
            else:
                print(
                    f"  Was the wheelhouse built for this Python and platform? See {wheelhouse}/wheelhouse.json."
                )
            return EXIT_MISSING
        kept = [r for r in reqs if canonical(r.split("==")[0]) in BOX]
        reqs = [r for r in reqs if r not in kept]
        for r in kept:
            name = r.split("==")[0]
            print(
                f"  note: the missing packages ask for {r}; the box has {name} {version_of(name)}: kept the box's"
            )
        print(f"installing {len(reqs)} distributions into {site} from {where}: {' '.join(reqs)}")
        err = install(reqs, site, wheelhouse)
        if err:
            print(f"gpu_preflight: pip failed:\n{_indent(err)}")
            return EXIT_MISSING
        importlib.invalidate_caches()
        still = [r["dist"] for r in survey(PACKAGES) if not r["found"]]
        if still:
            print(f"gpu_preflight: still missing after the install: {' '.join(still)}")
            return EXIT_MISSING
    steps = dict(IMPORTS)
    if has_vllm and args.vllm != "skip":
        steps["vllm"] = VLLM_IMPORTS
    failed = check_imports(steps, site)
    for step in steps:
        print(f"  imports of {step:10s} {'FAILED: ' + failed[step] if step in failed else 'ok'}")
    if "(all)" in failed:
        print(failed["(all)"])
    if failed:
        return EXIT_IMPORT
    print(f"gpu_preflight: ready (PYTHONPATH={REPO}{os.pathsep}{site})")
    return 0


def _indent(text: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
