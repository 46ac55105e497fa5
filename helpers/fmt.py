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


def joined(values: Sequence[float] | dict, digits: int = 2, **kw) -> str:
    """Values in a row: `0.30 / 0.59 / 0.74 / 0.82` (a dict's values in its order)."""
    vals = values.values() if isinstance(values, dict) else values
    return " / ".join(number(v, digits, **kw) for v in vals)


_NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212](0(?:\.0+)?)(?![\d.])")


def no_negative_zero(text: str) -> str:
    """Text with every number that rounds to zero printed as 0, never -0 (`-0.0` -> `0.0`; `-0.05` unchanged)."""
    return _NEGATIVE_ZERO.sub(r"\1", text)
