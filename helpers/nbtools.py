"""Notebook hygiene, and running a notebook the way a reader does.

python -m helpers.nbtools strip notebooks/*.ipynb     # clean in place
python -m helpers.nbtools check notebooks/*.ipynb     # exit 1 if any is not clean

Source notebooks are committed with outputs and Papermill metadata stripped (`strip`, `problems`). `run_all`
executes a notebook as JupyterLab's Run All does (one kernel, top to bottom, in the notebook's folder, nothing
injected), and `output_problems` lists what a reader should never see in an executed notebook: an error,
anything on stderr (warnings), a `PosixPath(...)`, an absolute path of this machine, a number in scientific
notation; `progress_problems` what a batch run's progress must not leave (carriage returns, escape codes, lines of
spaces, dozens of progress lines).

Why `strip` is the kit's own and not `nbstripout` (0.9.1) as a git filter: `nbstripout --keep-id
--drop-tagged-cells injected-parameters` with `--extra-keys` for the Papermill metadata and the six
`language_info` keys a kernel adds gives byte for byte what `strip` gives on the committed notebooks (both
leave them as they are) and on Papermill's executed ones (results/cpu/executed), but not on a notebook saved
from JupyterLab: nbstripout only removes keys and cannot write one, so the kernelspec this environment's
kernel saves ("display_name": "Python 3 (ipykernel)") stays where `strip` writes the kit's `KERNELSPEC`
("Python 3"), and every save would show as a change of the source. Without `--keep-id` it also renumbers the
cell ids (to 0, 1, ...), changing every cell of every committed notebook. Its Python API
(`nbstripout.strip_output`) would replace only `strip`'s loop over the cells, at the price of a dependency
(and it keeps the outputs of cells tagged `keep_output`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from helpers.config import REPO_ROOT

if TYPE_CHECKING:
    from traitlets.config import Config as TraitletsConfig

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """What keeps a notebook from being a clean source (outputs, counts, Papermill traces, kernelspec)."""
    found = []
    if nb.metadata.get("kernelspec", {}).get("name") != "python3":
        found.append("kernelspec is not python3")
    if "papermill" in nb.metadata:
        found.append("papermill metadata")
    if not any("parameters" in c.metadata.get("tags", []) for c in nb.cells):
        found.append("no cell tagged 'parameters'")
    for i, c in enumerate(nb.cells):
        if "injected-parameters" in c.metadata.get("tags", []):
            found.append(f"cell {i}: injected parameters")
        if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count")):
            found.append(f"cell {i}: outputs")
    return found


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove outputs, execution counts, Papermill metadata and injected-parameter cells."""
    nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    for c in nb.cells:
        for key in ("papermill", "execution", "collapsed", "scrolled"):
            c.metadata.pop(key, None)
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    nb.metadata.pop("papermill", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def kernel_config() -> TraitletsConfig:
    """Kernel-manager settings for the notebooks' kernels (the runner's and `run_all`'s; JupyterLab gets the same with
    `--MappingKernelManager.transport_encryption=auto`): CurveZMQ keys from the manager (where pyzmq has
    CurveZMQ and the kernelspec declares it, as ipykernel's does), so the kernel does not run over TCP
    unencrypted (and does not warn that it does)."""
    import zmq
    from traitlets.config import Config as TraitletsConfig

    c = TraitletsConfig()
    if zmq.has("curve"):
        c.KernelManager.transport_encryption = "auto"
    return c


def run_all(path: Path, timeout: int = 600) -> tuple[nbformat.NotebookNode, list[dict]]:
    """Execute `path` top to bottom in a fresh `python3` kernel started in its folder, as JupyterLab's Run All
    does: no runner, no injected parameters, the environment as it is. Returns the executed notebook and, per code
    cell, its index and seconds. A failing cell raises nbclient's `CellExecutionError` (naming the cell)."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started: dict[int, float] = {}
    times: list[dict] = []

    def start(cell, cell_index, **_):
        started[cell_index] = time.perf_counter()

    def done(cell, cell_index, **_):
        times.append({"cell": cell_index, "seconds": time.perf_counter() - started[cell_index]})

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        on_cell_execute=start,
        on_cell_executed=done,
        resources={"metadata": {"path": str(Path(path).parent)}},
        config=kernel_config(),
    )
    client.execute()
    return nb, times


def artefacts(profile_root: Path) -> dict[str, int]:
    """What training and evaluation leave under a profile's folder: every file below `models/` and `probes/` (by
    size) and every record file (by its number of lines). Equal before and after a run means the run trained and
    sampled nothing new: it read what was there."""
    found = {}
    for p in sorted(profile_root.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(profile_root).as_posix()
        if p.suffix == ".jsonl":
            found[rel] = sum(1 for _ in p.open("rb"))
        elif rel.startswith(("models/", "probes/")):
            found[rel] = p.stat().st_size
    return found


_SCIENTIFIC = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?e[-+]\d+\b")
_TEXT_TYPES = ("text/plain", "text/html", "text/markdown")


def _machine_paths() -> list[str]:
    """Absolute folders of this machine that must not appear in a notebook's outputs."""
    found = {
        str(REPO_ROOT),
        tempfile.gettempdir().rstrip("/") + "/",
        sys.prefix,
        os.path.expanduser("~") + "/",
    }
    if os.environ.get("KIT_RESULTS"):
        found.add(str(Path(os.environ["KIT_RESULTS"]).resolve()))
    return sorted(p for p in found if len(p) > 2)


MAX_PROGRESS_LINES = 30  # per cell: a line a minute of a long cell, and one per long loop
_PROGRESS_LINE = re.compile(r"^[^\n:]{1,120}: \d+(?:/\d+)? \(\d+:\d\d(?::\d\d)?\)", re.M)  # a LineBar's
_TQDM_TEXT = re.compile(r"\d+%\|")  # `  50%|#####     | 30/60`


def stream_problems(text: str, max_progress_lines: int = MAX_PROGRESS_LINES) -> list[str]:
    """What progress output must not leave in a saved stream: carriage returns, terminal escape codes (tqdm's
    cursor moves between nested bars), lines of spaces (a closed bar's erasure), tqdm's text bars, more than
    `max_progress_lines` progress lines."""
    found = []
    if "\r" in text:
        found.append("a carriage return")
    if "\x1b" in text:
        found.append("a terminal escape code")
    if any(line and not line.strip() for line in text.split("\n")):
        found.append("a line of spaces")
    if _TQDM_TEXT.search(text):
        found.append("a tqdm text bar")
    if (n := len(_PROGRESS_LINE.findall(text))) > max_progress_lines:
        found.append(f"{n} progress lines (at most {max_progress_lines})")
    return found


def progress_problems(nb: nbformat.NotebookNode, max_progress_lines: int = MAX_PROGRESS_LINES) -> list[str]:
    """`stream_problems` of each code cell's printed output (all its streams together), as `cell i: ...`: what a
    batch run (`python -m helpers.run`, KIT_BATCH=1) must not leave in an executed notebook."""
    found = []
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
        found += [f"cell {i}: {p}" for p in stream_problems(text, max_progress_lines)]
    return found


def output_problems(nb: nbformat.NotebookNode) -> list[str]:
    """What a reader must not see in an executed notebook: errors, stderr (warnings), `PosixPath(...)`, absolute
    paths of this machine, scientific notation in a table. Widget outputs (progress bars) are fine: their text fallback is
    not shown where the widget renders."""
    found = []
    paths = _machine_paths()
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        for o in c.get("outputs", []):
            kind = o.get("output_type")
            if kind == "error":
                found.append(f"cell {i}: error {o.get('ename')}: {o.get('evalue')}")
                continue
            if kind == "stream":
                text = o.get("text", "")
                if o.get("name") == "stderr" and text.strip():
                    found.append(f"cell {i}: stderr: {text.strip()[:160]!r}")
                texts = [text]
            else:
                data = o.get("data", {})
                if "application/vnd.jupyter.widget-view+json" in data:
                    continue
                texts = [
                    data[t] if isinstance(data[t], str) else "".join(data[t])
                    for t in _TEXT_TYPES
                    if t in data
                ]
            for text in texts:
                if "PosixPath(" in text:
                    found.append(f"cell {i}: PosixPath in the output")
                for p in paths:
                    if p in text:
                        found.append(f"cell {i}: absolute path {p!r} in the output")
            html = data.get("text/html", "") if kind != "stream" else ""
            html = html if isinstance(html, str) else "".join(html)
            if "<table" in html and (m := _SCIENTIFIC.search(html)):  # a table (prose may well say 1e-6)
                found.append(f"cell {i}: scientific notation in a table {m.group(0)!r}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("strip", "check"):
        print(__doc__)
        return 2
    bad = 0
    for name in argv[1:]:
        nb = nbformat.read(name, as_version=4)
        if argv[0] == "strip":
            nbformat.write(strip(nb), name)
        elif found := problems(nb):
            print(f"{Path(name).name}: {', '.join(found)}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
