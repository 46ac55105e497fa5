"""Progress bars: widgets when a person runs a notebook, a few plain lines in batch runs.

Interactively (JupyterLab, with ipywidgets installed) `tqdm.auto` draws a widget bar. `python -m helpers.run`
sets KIT_BATCH=1 for the kernels it starts; there a bar is plain text on stdout (not stderr, where a reader of
the executed notebook would take it for a warning) and refreshes at most every 60 s, so an executed notebook keeps
a few progress lines, and the runner itself prints which cell is running. In the worker processes of
`train.parallel_runs` (KIT_WORKER=1) bars are off: the parent shows the progress.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm


def batch_mode() -> bool:
    """True in a kernel started by `python -m helpers.run` (or any run that sets KIT_BATCH=1)."""
    return os.environ.get("KIT_BATCH") == "1"


def bar(iterable: Any = None, **kw: Any) -> tqdm:
    """A tqdm bar with the kit's batch/interactive behaviour."""
    if os.environ.get("KIT_WORKER") == "1":
        kw["disable"] = True
    if batch_mode():
        kw.setdefault("mininterval", 60.0)
        kw.setdefault("maxinterval", 600.0)
        kw.setdefault("file", sys.stdout)
        kw.setdefault("dynamic_ncols", True)
        return text_tqdm(iterable, **kw)
    return tqdm(iterable, **kw)
