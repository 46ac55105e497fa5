"""Notebook hygiene: source notebooks are committed with outputs and Papermill metadata stripped.

python -m helpers.nbtools strip notebooks/*.ipynb     # clean in place
python -m helpers.nbtools check notebooks/*.ipynb     # exit 1 if any is not clean
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

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
