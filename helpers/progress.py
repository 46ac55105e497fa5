"""Progress bars: widgets when a person runs a notebook, a few plain lines in batch runs.

Interactively (JupyterLab, with ipywidgets installed) `tqdm.auto` draws a widget bar. `python -m helpers.run`
sets KIT_BATCH=1 for the kernels it starts; there a bar is a `LineBar`: plain lines on stdout (not stderr, where a
reader of the executed notebook would take it for a warning) such as `SFT: 120/400 (1:02)`, at most one a minute
and one when a long loop ends, each ended by a newline: no carriage returns, no cursor-moving escape codes and no
lines of spaces (what tqdm's text bar leaves in a saved notebook when several bars are open or one closes with
`leave=False`). The runner also switches third-party bars off in the kernels (`batch_environment`), and prints
which cell is running. In the worker processes of `train.parallel_runs` (KIT_WORKER=1) bars are off: the parent
shows the progress.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

from tqdm.auto import tqdm

# Every switch that turns a third-party progress bar off (tqdm's own defaults, Hugging Face hub/datasets), and
# transformers' advisory warnings; set in the kernels of a batch run, where only the kit's `LineBar`s report progress.
BATCH_ENV = {
    "KIT_BATCH": "1",
    "TQDM_DISABLE": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


def batch_mode() -> bool:
    """True in a kernel started by `python -m helpers.run` (or any run that sets KIT_BATCH=1)."""
    return os.environ.get("KIT_BATCH") == "1"


def batch_environment() -> dict[str, str]:
    """The environment variables a batch run sets for its kernels: KIT_BATCH and every third-party bar's off switch."""
    return dict(BATCH_ENV)


def clock(seconds: float) -> str:
    """Elapsed time as `m:ss` (or `h:mm:ss` from an hour on)."""
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class LineBar:
    """A progress bar for saved output: `desc: n/total (elapsed)[, postfix]` lines, each ended by `\\n`.

    A line is printed when the count has moved and `mininterval` seconds have passed since the bar's last line, and
    once at `close` when the loop ran at least `mininterval` seconds (a short loop leaves nothing; a long one says
    how long it took) or when `leave` is true. Takes the subset of tqdm's interface the kit uses (iterate, `update`,
    `set_postfix`, `close`, `n`, `total`, a context manager); other tqdm keywords are accepted and ignored."""

    def __init__(
        self,
        iterable: Iterable | None = None,
        desc: str | None = None,
        total: int | None = None,
        leave: bool = True,
        file: IO[str] | None = None,
        mininterval: float = 60.0,
        disable: bool = False,
        **_: Any,
    ) -> None:
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.desc, self.leave, self.disable = total, desc or "", leave, disable
        self.file, self.mininterval = file, mininterval
        self.n, self.postfix = 0, ""
        self.start = self.last_print = time.monotonic()
        self.printed_n: int | None = 0  # the count of the last line (the start counts as printed at 0)
        self.closed = False

    def line(self) -> str:
        """The bar as one line of text."""
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        post = f", {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {count} ({clock(time.monotonic() - self.start)}){post}"

    def _print(self) -> None:
        print(self.line(), file=self.file or sys.stdout, flush=True)
        self.last_print, self.printed_n = time.monotonic(), self.n

    def update(self, n: int = 1) -> None:
        """Count `n` more; print a line if the count moved and `mininterval` has passed since the last one."""
        self.n += n
        if self.disable or self.closed or self.n == self.printed_n:
            return
        if time.monotonic() - self.last_print >= self.mininterval:
            self._print()

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **kw: Any) -> None:
        """Shown after the count in the next line: `success=0.50, kl=0.012`."""
        items = {**(ordered_dict or {}), **kw}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def refresh(self) -> None:
        """Nothing to redraw: lines are printed by `update` and `close`."""

    def close(self) -> None:
        """The closing line, if the loop was long (or `leave`) and the last line does not already say it."""
        if self.closed:
            return
        self.closed = True
        long = time.monotonic() - self.start >= self.mininterval
        said = self.last_print != self.start and self.printed_n == self.n  # the last line has the final count
        if not self.disable and (long or self.leave) and not said:
            self._print()

    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("LineBar: nothing to iterate (give an iterable)")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __len__(self) -> int:
        return self.total or 0

    def __enter__(self) -> LineBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(iterable: Any = None, **kw: Any) -> tqdm | LineBar:
    """A progress bar with the kit's behaviour: a tqdm widget interactively, a `LineBar` in batch runs, off in
    parallel workers."""
    if os.environ.get("KIT_WORKER") == "1":
        kw["disable"] = True
    if batch_mode():
        kw.setdefault("mininterval", 60.0)
        return LineBar(iterable, **kw)
    return tqdm(iterable, **kw)
