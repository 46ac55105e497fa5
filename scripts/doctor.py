"""`make doctor`: the pre-lab check of a student's machine. One PASS or FAIL line per check and a final verdict:

1. Python is 3.11 or newer (the pins were checked on 3.11);
2. the disk holding the kit has `MIN_FREE_GB` free (the notebooks write their results and caches there);
3. the virtual environment is there and installed (`.venv/.installed`, written by `make install`);
4. a Jupyter kernel (`python3`, the one notebooks use) starts and answers;
5. notebook 00 runs top to bottom (Run All, `helpers.nbtools.run_all`, as `tests/test_interactive.py` runs it) on a
   copy of the committed cpu run, so the committed files stay as they are;
6. the FrozenLake map cache (`<results root>/_cache/frozenlake-maps`, which notebook 00 builds once) is there
   afterwards, so later Run Alls skip drawing the map sets.

A failed check does not stop the later ones, except that notebook 00 is not run when the kernel does not start.
Exit status 0 when every check passed, 1 otherwise."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_PYTHON = (3, 11)
MIN_FREE_GB = 2.0


@dataclass(frozen=True)
class Check:
    """One check's outcome: its name, whether it passed and what it found."""

    name: str
    ok: bool
    detail: str


def line(c: Check) -> str:
    """`PASS  python: 3.11.9` or `FAIL  ...`."""
    return f"{'PASS' if c.ok else 'FAIL'}  {c.name}: {c.detail}"


def verdict(checks: list[Check]) -> tuple[bool, str]:
    """Whether the machine is ready (every check passed; no checks is not ready) and the closing sentence."""
    failed = [c.name for c in checks if not c.ok]
    if not checks:
        return False, "NOT READY: no check ran"
    if failed:
        return False, f"NOT READY: {len(failed)} of {len(checks)} checks failed ({', '.join(failed)})"
    return True, f"READY: all {len(checks)} checks passed"


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> Check:
    """Python is at least `MIN_PYTHON`."""
    text = ".".join(map(str, version))
    need = ".".join(map(str, MIN_PYTHON))
    return Check("python", tuple(version[:2]) >= MIN_PYTHON, f"{text} (need {need} or newer)")


def check_disk(path: Path = ROOT, free_bytes: int | None = None) -> Check:
    """At least `MIN_FREE_GB` free on the disk that holds `path`."""
    free = shutil.disk_usage(path).free if free_bytes is None else free_bytes
    gb = free / 1e9
    return Check("free disk", gb >= MIN_FREE_GB, f"{gb:.1f} GB free at {path} (need {MIN_FREE_GB:g} GB)")


def check_venv(venv: Path = ROOT / ".venv") -> Check:
    """The virtual environment exists and `make install` finished in it."""
    python = venv / "bin" / "python"
    if not python.exists():
        return Check("virtual environment", False, f"{python} is missing: run make install")
    if not (venv / ".installed").exists():
        return Check(
            "virtual environment", False, f"{venv}/.installed is missing: make install did not finish"
        )
    return Check("virtual environment", True, f"{venv} installed")


def check_kernel(timeout: float = 120) -> Check:
    """A `python3` Jupyter kernel starts and answers within `timeout` seconds (with the notebooks' kernel settings,
    `helpers.nbtools.kernel_config`)."""
    from jupyter_client.manager import KernelManager

    from helpers import nbtools

    t0 = time.perf_counter()
    km = KernelManager(kernel_name="python3", config=nbtools.kernel_config())
    try:
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=timeout)
        kc.stop_channels()
    except Exception as e:  # any failure to start is the finding
        return Check("jupyter kernel", False, f"did not start: {type(e).__name__}: {e}")
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return Check("jupyter kernel", True, f"python3 started and answered in {time.perf_counter() - t0:.1f} s")


def check_notebook(results: Path, work: Path, timeout: int = 900) -> Check:
    """Notebook 00's Run All on a copy of `results/cpu` under `work`, its map cache linked to `results/_cache`."""
    from helpers import nbtools

    committed = results / "cpu"
    if not (committed / "models").is_dir():
        return Check(
            "notebook 00 Run All", False, f"{committed}/models is missing: the committed run is not here"
        )
    root = work / "results"
    shutil.copytree(committed, root / "cpu", ignore=shutil.ignore_patterns("executed"))
    (results / "_cache").mkdir(exist_ok=True)
    (root / "_cache").symlink_to(results / "_cache")  # the cache the student's own Run Alls will read
    old = os.environ.get("KIT_RESULTS")
    os.environ["KIT_RESULTS"] = str(root)
    t0 = time.perf_counter()
    try:
        nbtools.run_all(ROOT / "notebooks" / "00_environments.ipynb", timeout=timeout)
    except Exception as e:  # a failing cell names itself in the message
        first = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        return Check("notebook 00 Run All", False, f"{type(e).__name__} {first}")
    finally:
        if old is None:
            os.environ.pop("KIT_RESULTS", None)
        else:
            os.environ["KIT_RESULTS"] = old
    return Check("notebook 00 Run All", True, f"finished in {time.perf_counter() - t0:.0f} s")


def check_map_cache(results: Path) -> Check:
    """The FrozenLake map cache holds at least one selected map set."""
    cache = results / "_cache" / "frozenlake-maps"
    n = sum(1 for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else 0
    return Check("FrozenLake map cache", n > 0, f"{n} files in {cache}" + ("" if n else ": run notebook 00"))


def run(checks: list[Callable[[], Check]]) -> list[Check]:
    """Run `checks` in order, printing each line as it finishes."""
    done = []
    for f in checks:
        c = f()
        print(line(c), flush=True)
        done.append(c)
    return done


def main() -> int:
    """Every check, then the verdict."""
    sys.path.insert(0, str(ROOT))
    from helpers.store import results_root

    results = results_root().resolve()
    t0 = time.perf_counter()
    done = run([check_python, check_disk, check_venv, check_kernel])
    with tempfile.TemporaryDirectory(prefix="kit-doctor-") as work:
        if done[-1].ok:
            done += run([lambda: check_notebook(results, Path(work))])
        else:
            done.append(Check("notebook 00 Run All", False, "not run: no kernel"))
            print(line(done[-1]))
    done += run([lambda: check_map_cache(results)])
    ok, text = verdict(done)
    print(f"{text} ({time.perf_counter() - t0:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
