"""Which torch build `make install` asks pip for: the extra pip arguments, printed on one line (empty for the
default route, PyPI and any wheel folder pip is configured with).

On Linux, PyPI's torch wheel pulls in the CUDA libraries (several GB) even where no NVIDIA GPU exists; PyTorch's
CPU index serves the same version without them. The route (`KIT_TORCH_ROUTE`):

- `cpu`: the CPU index, whatever the machine has;
- `default`: what pip does anyway (this script prints nothing);
- `auto` (unset): the CPU index on Linux without an NVIDIA GPU (no `nvidia-smi` on PATH and no
  `/proc/driver/nvidia`), and only when the index answers within `TIMEOUT_S` seconds. A machine that reaches PyPI
  only (the kit's build and test machines) takes the default route, as before.

`make install` runs `pip install <args> torch==<the pin>` with the printed arguments before the requirements, so
the pinned torch is already there when `requirements.txt` is installed. Usage: `python scripts/torch_route.py`
(the reason goes to stderr)."""

from __future__ import annotations

import os
import shutil
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"
TIMEOUT_S = 3.0


def has_nvidia_gpu(
    which: Callable[[str], str | None] = shutil.which, proc: Path = Path("/proc/driver/nvidia")
) -> bool:
    """Whether the machine shows an NVIDIA driver: `nvidia-smi` on PATH or `/proc/driver/nvidia` present."""
    return which("nvidia-smi") is not None or proc.exists()


def reachable(url: str = CPU_INDEX, timeout: float = TIMEOUT_S) -> bool:
    """Whether `url` answers an HTTP HEAD request within `timeout` seconds."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "/", method="HEAD"), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def decide(route: str, platform: str, gpu: bool, index_up: Callable[[], bool]) -> tuple[list[str], str]:
    """The extra pip arguments for torch and the reason, for a `route` (`auto`, `cpu`, `default`), a `platform`
    (`sys.platform`), whether an NVIDIA GPU is present and a check of the CPU index (called only when needed)."""
    cpu = ["--index-url", CPU_INDEX, "--extra-index-url", PYPI]
    if route == "cpu":
        return cpu, "KIT_TORCH_ROUTE=cpu: PyTorch's CPU index"
    if route == "default":
        return [], "KIT_TORCH_ROUTE=default: pip's configured indexes"
    if route != "auto":
        raise ValueError(f"KIT_TORCH_ROUTE={route!r}: use auto, cpu or default")
    if platform != "linux":
        return [], f"{platform}: PyPI's torch wheel has no CUDA libraries here"
    if gpu:
        return [], "an NVIDIA GPU is present: PyPI's torch wheel with CUDA"
    if not index_up():
        return [], f"no NVIDIA GPU, but {CPU_INDEX} does not answer: pip's configured indexes, as before"
    return cpu, "no NVIDIA GPU: PyTorch's CPU index (no CUDA libraries)"


def main() -> int:
    """Print the arguments for this machine on stdout and the reason on stderr."""
    route = os.environ.get("KIT_TORCH_ROUTE", "auto")
    try:
        args, why = decide(route, sys.platform, has_nvidia_gpu(), reachable)
    except ValueError as e:
        print(f"torch route: {e}", file=sys.stderr)
        return 2
    print(f"torch route: {why}", file=sys.stderr)
    print(" ".join(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
