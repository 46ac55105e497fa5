"""How the kit prints a number: one place for tables, findings sections and figure labels.

Every number is fixed point (never e-notation), a value that rounds to zero prints as 0 (never -0), a missing
value prints as `n/a` and NaN as `NaN`. Fractions (success rates, win rates) are shown either as themselves
(`number`) or in percent / percentage points (`scale=100`); an estimate with its interval is `v [lo, hi]`.

    number(0.5004)                      '0.500'
    number(-0.0001)                     '0.000'
    signed(0.124)                       '+0.124'
    percent(0.714)                      '71.4 %'
    estimate(0.124, (0.047, 0.197), signed=True)            '+0.124 [+0.047, +0.197]'
    estimate(0.116, (0.005, 0.223), scale=100, digits=1, signed=True)   '+11.6 [+0.5, +22.3]'
    side(0.005, 0.223)                  'above 0'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MISSING = "n/a"


def number(x: float | None, digits: int = 3, scale: float = 1.0, sign: bool = False) -> str:
    """`scale * x` in fixed point with `digits` decimals (`sign`: always with + or -); 0 never prints as -0."""
    if x is None:
        return MISSING
    v = scale * float(x)
    if math.isnan(v):
        return "NaN"
    s = f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"
    if float(s) == 0:  # -0.000 and +0.000 print as 0.000
        s = s.lstrip("+-")
    return s


def signed(x: float | None, digits: int = 3, scale: float = 1.0) -> str:
    """A change: `+0.124`, `-0.050`, `0.000`."""
    return number(x, digits, scale, sign=True)


def percent(x: float | None, digits: int = 1) -> str:
    """A fraction in percent: `71.4 %`."""
    s = number(x, digits, scale=100.0)
    return s if s in (MISSING, "NaN") else f"{s} %"


def points(x: float | None, digits: int = 1, sign: bool = True) -> str:
    """A difference of fractions in percentage points: `+11.6`."""
    return number(x, digits, scale=100.0, sign=sign)


def interval(ci: Sequence[float] | None, digits: int = 3, scale: float = 1.0, sign: bool = False) -> str:
    """`[lo, hi]`."""
    if ci is None:
        return MISSING
    lo, hi = ci
    return f"[{number(lo, digits, scale, sign)}, {number(hi, digits, scale, sign)}]"


def estimate(
    value: float | None,
    ci: Sequence[float] | None,
    digits: int = 3,
    scale: float = 1.0,
    signed: bool = False,
    unit: str = "",
) -> str:
    """`v [lo, hi]` (`unit` after the value: `71.4 % [61.8, 80.2]`); `n/a` when the value was not measured."""
    if value is None:
        return MISSING
    v = number(value, digits, scale, signed) + (f" {unit}" if unit else "")
    return v if ci is None else f"{v} {interval(ci, digits, scale, signed)}"


def entry(d: dict | None, key: str = "mean", ci: str | None = None, **kw) -> str:
    """`estimate` of a metrics entry `{key: v, ci: [lo, hi]}` (`ci` defaults to `ci`, or `<key>_ci` when present)."""
    if not d or d.get(key) is None:
        return MISSING
    ci = ci or (f"{key}_ci" if f"{key}_ci" in d else "ci")
    return estimate(d[key], d.get(ci), **kw)


def side(lo: float, hi: float) -> str:
    """Where an interval lies relative to 0: `above 0`, `below 0` or `contains 0` (the verdict, never a point)."""
    if (
        lo is None or hi is None or lo != lo or hi != hi
    ):  # no interval (one seed; NaN is null in metrics.json)
        return "no interval"
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"


def verdict(v: dict, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
    """A paired verdict (`stats.paired_verdict`: diff, low, high, mde): `+2.1 [-0.5, +4.7] (contains 0; MDE 5.3)`,
    the side of 0 decided by the interval and the minimum detectable effect at the design's power beside it."""
    if (
        v.get("n_seeds", 2) < 2 or side(v["low"], v["high"]) == "no interval"
    ):  # one seed: the number, no verdict
        return f"{number(v['diff'], digits, scale, sign=True)}{unit} (one seed: no interval)"
    est = estimate(v["diff"], (v["low"], v["high"]), digits, scale, signed=True, unit=unit)
    return f"{est} ({side(v['low'], v['high'])}; MDE {number(v['mde'], digits, scale)})"


AS_PAPER = "as in the paper (its value lies inside this run's interval)"
NOT_AS_PAPER = "not as in the paper (its value lies outside this run's interval)"


NO_INTERVAL_PAPER = "not judged against the paper (this run has no interval: one seed)"


def against_paper(paper_value: float, low: float | None, high: float | None) -> str:
    """The agreement with the paper said outright, the same way everywhere: whether the paper's value lies inside
    this run's interval (`AS_PAPER`) or outside it (`NOT_AS_PAPER`); `NO_INTERVAL_PAPER` where there is none."""
    if side(low, high) == "no interval":
        return NO_INTERVAL_PAPER
    return AS_PAPER if low <= paper_value <= high else NOT_AS_PAPER


def joined(values: Sequence[float] | dict, digits: int = 2, **kw) -> str:
    """Values in a row: `0.30 / 0.59 / 0.74 / 0.82` (a dict's values in its order)."""
    vals = values.values() if isinstance(values, dict) else values
    return " / ".join(number(v, digits, **kw) for v in vals)


_NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212](0(?:\.0+)?)(?![\d.])")


def no_negative_zero(text: str) -> str:
    """Text with every number that rounds to zero printed as 0, never -0 (`-0.0` -> `0.0`; `-0.05` unchanged)."""
    return _NEGATIVE_ZERO.sub(r"\1", text)


# ------------------------------------------------------------------------------------------------------ tables

NOT_APPLICABLE = (
    "-"  # a table cell where the quantity does not apply (a NaN in a column that has values elsewhere)
)

# Whole words for the kit's column names (the rest: underscores become spaces, tokens below in plain words).
HEADERS = {
    "n_maps": "maps",
    "n_states": "states",
    "n_dead": "dead states",
    "n_live": "live states",
    "n_sensitive": "budget-sensitive states",
    "n_control": "control states",
    "n_continuations": "continuations per state",
    "n_tasks": "tasks",
    "n_seeds": "seeds",
    "upper_bound": "structural upper bound",
    "mean_diff": "mean difference",
    "better_low": "better low (descriptive)",
    "better_high": "better high (descriptive)",
    "diff_low": "difference low (descriptive)",
    "diff_high": "difference high (descriptive)",
    "t_low": "verdict low (paired by seed)",
    "t_high": "verdict high (paired by seed)",
    "mde": "minimum detectable effect",
    "ci": "interval",
    "per_seed": "per seed",
    "gain_points": "gain (points)",
    "true_points": "true difference (points)",
    "estimate_points": "estimate (points)",
    "error_minus_matched": "error states minus matched states",
    "paired": "paired verdict",
    "step_quality": "step quality",
    "process_exact_share": "share of steps reported exactly",
    "process_corr": "correlation with the exact signal",
    "level": "oracle corruption",
    "final_loss": "final loss",
    "batch_size": "batch size",
    "depth_bin": "depth t / T_max",
    "tv_sensitive": "TV distance (budget-sensitive)",
    "tv_control": "TV distance (control)",
}
# Paper names and method names that stay as they are (`oracle_q` is an estimator's name, `T_max` the paper's).
KEEP = {"R_multi", "R_single", "R_single_pool", "T_max", "oracle_q", "Pass@K", "Pass@T"}
TOKENS = {"rl": "RL", "sharp": "sharpened", "kl": "KL", "nll": "NLL", "llr": "LLR", "tv": "TV"}
# Whole words (between spaces) that name the analyses' three columns: base, sharpened base, RL.
PARTS = {"sharp": "sharpened base", "rl_sharp": "sharpened RL", "rl": "RL"}


def header(name: object) -> object:
    """A column, index or row label in plain words: `n_states` -> `states`, `budget_awareness_points` -> `budget
    awareness (points)`, `rl_sharp vs sharp` -> `sharpened RL vs sharpened base`; paper names (R_multi, T_max),
    method names (`grpo-s0`, `oracle_q - grpo`) and non-text labels (a budget fraction, K) unchanged."""
    if not isinstance(name, str) or name in KEEP:
        return name
    if name in HEADERS:
        return HEADERS[name]
    points = name.endswith("_points")
    stem = name[: -len("_points")] if points else name
    words = []
    for part in stem.replace("_vs_", " vs ").split(" "):
        if part in KEEP or part in PARTS:
            words.append(PARTS.get(part, part))
        else:
            words += [TOKENS.get(t, t) for t in part.split("_") if t]
    return " ".join(words) + (" (points)" if points else "")


def _cell(x: object, digits: int, column: object) -> object:
    """One table cell as text: floats fixed point, NaN/None as `-`, intervals `[lo, hi]`, other lists `a / b`,
    a paired verdict (`stats.paired_verdict`) as `fmt.verdict`, other dicts `key: value, ...`."""
    import numpy as np

    if x is None:
        return NOT_APPLICABLE
    if isinstance(x, bool | np.bool_ | int | np.integer):
        return x
    if isinstance(x, float | np.floating):
        return NOT_APPLICABLE if math.isnan(x) else number(float(x), digits)
    if isinstance(x, dict):
        if {"diff", "low", "high"} <= x.keys():
            return verdict({"mde": float("nan"), **x}, digits).replace("; MDE NaN", "")
        return ", ".join(f"{header(k)}: {_cell(v, digits, k)}" for k, v in x.items())
    if isinstance(x, list | tuple | np.ndarray):
        vals = [_cell(v, digits, None) for v in x]
        if len(vals) == 2 and isinstance(column, str) and (column == "ci" or column.endswith("_ci")):
            return f"[{vals[0]}, {vals[1]}]"
        return " / ".join(map(str, vals))
    return x


def _whole(col) -> bool:
    """A float column of whole numbers beyond 0..1 (counts, turns): shown as integers, not `1000.000`."""
    vals = col.dropna()
    return len(vals) > 0 and bool((vals == vals.round()).all()) and bool((vals.abs() > 1).any())


def table(data, digits: int = 3, index: str | list[str] | None = None, rename: dict | None = None):
    """A table for a notebook: `data` (DataFrame or Series) with every all-empty column dropped, numbers as text
    (fixed point with `digits` decimals; whole-number columns as integers), a NaN where a quantity does not apply
    as `-`, dict and list cells as readable text (`_cell`), headers in plain words (`header`, after `rename`), and
    a named index instead of row numbers: the `index` column(s), else the first column when the index is a plain
    range. The values become text: use it for the last expression of a cell. None stays None (a section that does
    not apply to this series shows nothing)."""
    import pandas as pd

    if data is None:
        return None
    df = data.to_frame() if isinstance(data, pd.Series) else data.copy()
    names = [index] if isinstance(index, str) else list(index or [])
    # A section with no rows may have no columns either: then there is no index to set.
    if names and (len(df) or set(names) <= set(df.columns)):
        df = df.set_index(index)
    elif isinstance(df.index, pd.RangeIndex) and df.shape[1] > 1:
        df = df.set_index(df.columns[0])
    if len(df):  # a table with no rows keeps its columns: none of them is "all empty" for lack of data
        df = df.loc[:, [not df.iloc[:, i].isna().all() for i in range(df.shape[1])]]
    cols = []
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        if col.dtype.kind == "f" and _whole(col):
            col = pd.Series([NOT_APPLICABLE if v != v else int(v) for v in col], index=df.index, dtype=object)
        elif col.dtype.kind in "fO":
            col = pd.Series([_cell(v, digits, df.columns[i]) for v in col], index=df.index, dtype=object)
        cols.append(col.rename(df.columns[i]))
    out = pd.concat(cols, axis=1) if cols else df.copy()
    rename = rename or {}
    out.columns = _labels(df.columns, digits, rename)
    out.index = _labels(df.index, digits, rename)
    return out


def _labels(index, digits: int, rename: dict):
    """Index labels: float labels rounded, text labels and level names in plain words (`rename` first)."""
    import pandas as pd

    def one(level: pd.Index, name: object) -> pd.Index:
        if level.dtype.kind == "f":
            level = level.round(max(digits, 3))
        elif level.dtype.kind == "O":
            level = pd.Index([rename.get(v, header(v)) for v in level], dtype=object)
        return level.rename(rename.get(name, header(name)) if name is not None else None)

    if isinstance(index, pd.MultiIndex):
        levels = [one(index.get_level_values(i), n) for i, n in enumerate(index.names)]
        return pd.MultiIndex.from_arrays(levels)
    return one(index, index.name)


def record(
    d: dict, skip: Sequence[str] = (), digits: int = 3, columns: tuple[str, str] = ("quantity", "value")
):
    """A flat dict of results (a demo's summary) as a two-column table, `quantity | value` (`columns`), nested
    dicts one row per entry (`corrupted check: valid`), instead of a printed dict."""
    import pandas as pd

    rows = []
    for k, v in d.items():
        if k in skip:
            continue
        if isinstance(v, dict):
            rows += [(f"{header(k)}: {header(kk)}", _cell(vv, digits, kk)) for kk, vv in v.items()]
        elif isinstance(v, list | tuple):
            rows.append((header(k), ", ".join(map(str, v))))
        else:
            rows.append((header(k), _cell(v, digits, k)))
    return pd.DataFrame(rows, columns=list(columns)).set_index(columns[0])


def pairs(d: dict, key: str = "", digits: int = 3) -> str:
    """A small mapping as text: `T = 1: 21, T = 2: 38` (with `key` "T") or `base: 58, sharp: 79`."""
    lead = f"{key} = " if key else ""
    return ", ".join(f"{lead}{k}: {_cell(v, digits, k)}" for k, v in d.items())


def listing(values: Sequence) -> str:
    """A list as text, without brackets: `1, 2, 3`."""
    return ", ".join(str(_cell(v, 3, None)) for v in values)


def runs(runs: Sequence[tuple[str, int]]) -> str:
    """(budget mode, RL seed) pairs as text: `full: seeds 0, 1, 2; budgetmix: seeds 0, 1, 2`."""
    modes: dict[str, list] = {}
    for mode, seed in runs:
        modes.setdefault(mode, []).append(seed)
    return "; ".join(f"{m}: seed{'s' if len(s) > 1 else ''} {listing(s)}" for m, s in modes.items())
