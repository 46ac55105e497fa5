#!/usr/bin/env python3
"""Build the wheelhouse that lets `scripts/gpu_check.sh` run on a GPU box with no package index.

Run it on a machine with network access (any OS: pip downloads wheels for the target, not for itself), then copy
`build/gpu-wheelhouse/` into the checkout on the GPU box (or point GPU_CHECK_WHEELHOUSE at it):

    python scripts/build_gpu_wheelhouse.py                        # CPython 3.11 on Linux x86_64
    python scripts/build_gpu_wheelhouse.py --arch aarch64         # Grace (GH200) boxes
    python scripts/build_gpu_wheelhouse.py --python-version 3.12 --out /tmp/wh

For the target Python and platform it resolves the packages the check needs (`gpu_preflight.PACKAGES`) together
with torch at requirements-gpu.txt's pin, resolves torch alone, and downloads the difference: what a box that has
only torch lacks (transformers, accelerate and their dependencies included). torch, vllm and torch's own
dependencies stay out (the box has them, and torch's CUDA wheels alone are gigabytes). The folder gets
`wheelhouse.json` (target, the box set assumed, each wheel's size and sha256); the script fails when the wheels
add up to more than `--max-mib` (128 by default; measured 2026-12-02 for CPython 3.11 on x86_64: 45 wheels,
105.6 MiB, pyarrow 46.6 of them, transformers 11.7, numpy 16.1, pandas 11.8).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_preflight import BOX, PACKAGES, REPO, REQUIREMENTS, canonical, read_pins

ARCHES = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}
ASSUMED_ON_BOX = ("torch",)


def target_args(python_version: str, platforms: list[str]) -> list[str]:
    """pip arguments that select wheels for another interpreter and platform."""
    nodot = python_version.replace(".", "")
    args = [
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "--abi",
        f"cp{nodot}",
    ]
    for p in platforms:
        args += ["--platform", p]
    return args


def resolve(reqs: list[str], constraints: Path, target: list[str]) -> dict[str, str]:
    """What pip installs for `reqs` in an empty environment of the target: {canonical name: version}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            str(report),
            "-c",
            str(constraints),
            *target,
            *reqs,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(
                f"build_gpu_wheelhouse: pip could not resolve {' '.join(reqs)}:\n{out.stderr[-3000:]}"
            )
        items = json.loads(report.read_text())["install"]
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in items}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Download the wheels gpu_check.sh needs on a box with only torch."
    )
    ap.add_argument("--out", type=Path, default=REPO / "build" / "gpu-wheelhouse")
    ap.add_argument("--python-version", default="3.11", help="the GPU box's Python (default %(default)s)")
    ap.add_argument("--arch", choices=sorted(ARCHES), default="x86_64")
    ap.add_argument(
        "--platform",
        action="append",
        default=None,
        help="pip platform tags instead of --arch's manylinux set (repeatable)",
    )
    ap.add_argument(
        "--box",
        nargs="*",
        default=None,
        metavar="NAME==VERSION",
        help="the box's torch if not requirements-gpu.txt's pin, e.g. torch==2.13.0",
    )
    ap.add_argument("--max-mib", type=float, default=128.0)
    args = ap.parse_args(argv)

    pins = read_pins()
    box = {n: f"{n}=={pins[n]}" for n in ASSUMED_ON_BOX}
    for spec in args.box or []:
        name = canonical(spec.split("==")[0])
        if name not in box or "==" not in spec:
            raise SystemExit(f"--box takes torch==VERSION, got {spec!r}")
        box[name] = spec
    platforms = args.platform or ARCHES[args.arch]
    target = target_args(args.python_version, platforms)
    needed = [f"{d}=={pins[canonical(d)]}" for d, _, _ in PACKAGES if d not in BOX]
    constraints = REQUIREMENTS  # the GPU set's pins for every shared dependency (pip reads its markers)

    print(
        f"resolving for CPython {args.python_version} on {', '.join(platforms)} (box: {' '.join(box.values())})"
    )
    everything = resolve([*box.values(), *needed], constraints, target)
    on_box = resolve(list(box.values()), constraints, target)
    wanted = {n: v for n, v in sorted(everything.items()) if n not in on_box and n not in BOX}
    for n, v in on_box.items():
        if everything.get(n) != v:
            print(
                f"  note: {n} resolves to {everything.get(n)} with the check's packages but {v} on the box alone"
            )

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.whl"), out / "wheelhouse.json"]:
        old.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "download",
        "--quiet",
        "--no-deps",
        "-d",
        str(out),
        *target,
        *(f"{n}=={v}" for n, v in wanted.items()),
    ]
    dl = subprocess.run(cmd, capture_output=True, text=True)
    if dl.returncode != 0:
        raise SystemExit(f"build_gpu_wheelhouse: pip download failed:\n{dl.stderr[-3000:]}")

    wheels = sorted(out.glob("*.whl"))
    rows = [{"file": w.name, "bytes": w.stat().st_size, "sha256": sha256(w)} for w in wheels]
    total = sum(r["bytes"] for r in rows)
    manifest = {
        "built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "target": {"python": args.python_version, "implementation": "cp", "platforms": platforms},
        "assumed_on_box": sorted(box.values()),
        "distributions": wanted,
        "wheels": rows,
        "total_bytes": total,
    }
    (out / "wheelhouse.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for r in sorted(rows, key=lambda r: -r["bytes"]):
        print(f"  {r['bytes'] / 2**20:7.2f} MiB  {r['file']}")
    print(f"{len(rows)} wheels, {total / 2**20:.1f} MiB in {out}")
    if len(rows) != len(wanted):
        print(f"build_gpu_wheelhouse: expected {len(wanted)} wheels, got {len(rows)}")
        return 1
    if total > args.max_mib * 2**20:
        print(f"build_gpu_wheelhouse: {total / 2**20:.1f} MiB is over --max-mib {args.max_mib:g}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
