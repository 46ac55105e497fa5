"""The config's type and range layer: `ConfigError`, the `knob(...)` field helper and the coercion of raw
values.

`_build(cls, data, key)` turns a mapping (a profile's section as YAML or overrides give it) into the frozen
dataclass `cls` (the sections of `helpers.config_sections`, `helpers.config.Config`): it refuses a key the
class does not declare (naming the closest one), coerces each value to its field's type (`_coerce`: an int
where an int is declared, never a bool; an int or a float, finite, where a float is declared; a Literal's own
values; lists item by item), checks the knob's domain (`knob(ge=..., gt=..., nonempty=..., increasing=...)`)
and runs the class's `check` (relations between knobs). Every error is a ConfigError whose message names the
key (`train.lr`); `helpers.config.load` then adds where the key is set (`file:line`, or `overrides`).

Why not pydantic (v2: `extra="forbid"`, `allow_inf_nan=False`, `Field` bounds)? Tried (issue 49; pydantic 2.14
on a section with these knobs): it validates them, and in strict mode it even coerces as the kit does (a YAML
int for a float knob becomes 1.0; a bool or a string for a number is refused; lax mode would take "yes", 1 or
"true" for a bool and "3" or 1.0 for an int). It cannot keep the kit's errors, which are its contract
(tests/test_config*.py):
- The words: pydantic says "Input should be greater than 0", "Unexpected keyword argument", "Input should be a
  finite number", "List should have at least 1 item after validation, not 0"; the kit names the knob's domain
  and meaning ("train.group_size: 0 is out of range; allowed: >= 1 (G trajectories per task (16 in the
  paper))"), suggests the closest key for an unknown one ("did you mean 'train.lr'?", with the known keys),
  says "is not strictly increasing" (pydantic has no such bound), "an integer of about 401 digits" (`_show`)
  and, for a number past 1.8e308, "is not a finite number" (strict pydantic: "Input should be a valid
  number").
- Which error: pydantic reports them all, in the order the fields are declared, unknown keys last; the kit
  raises the first one in its own order (unknown keys, then the values as written, then `check`), and `load`
  blames that one key at its file and line.
- Strict mode refuses a tuple for a list knob, which a Python override may pass
  (`load("cpu", train__seeds=(0, 1))`).
Keeping the words means mapping every pydantic error type back to a message built from the knob's metadata,
and re-ordering the errors: this layer again, behind pydantic. So the hand-written layer stays, and
`Config.to_dict` (every recipe hash) is untouched.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import types
import typing
from dataclasses import field
from typing import Any, Literal

from helpers.envs import available


class ConfigError(ValueError):
    """A profile or override is invalid; the message names the offending key (`key`, dotted: `train.lr`) and, once
    `load` has placed it, the file and line where that key is set or that it came from an override."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


# Every integer knob is at most INT_MAX (unless its domain is tighter): a count, a size or a seed beyond it is a
# typo, and would fail much later (torch's seeds, numpy's draws, sizes of tensors) without naming the key.
INT_MAX = 2**31 - 1


def _show(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters (a message never prints a huge value, nor fails on one)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # pragma: no cover - an int past Python's digit limit, a cycle
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 4] + " ..."


# --------------------------------------------------------------------------------------------- domains


def knob(
    default: Any,
    doc: str = "",
    *,
    ge=None,
    gt=None,
    le=None,
    lt=None,
    nonempty: bool = False,
    increasing: bool = False,
    reported: bool = False,
    omit_default: bool = False,
) -> Any:
    """A declared knob: its default, what it means, and its domain (checked when a profile loads).

    `ge` / `gt` / `le` / `lt` bound a number (each item of a list); `nonempty` requires at least one item;
    `increasing` requires strictly increasing items. Relations between knobs live in each section's `check`.
    `reported` (environment settings only): the knob changes what the numbers mean, so every metrics.json of that
    environment records its value (`reported_settings`). `omit_default`: the knob is left out of `Config.to_dict`,
    the environment's settings and every recipe while it holds its default (`helpers.envs.base.plain`), so adding it
    changed no existing profile's hashes (tests/config_839d5c0.json).
    """
    meta = {
        "doc": doc,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "nonempty": nonempty,
        "increasing": increasing,
        "reported": reported,
        "omit_default": omit_default,
    }
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _domain(meta: dict) -> str:
    parts = []
    for op, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if meta.get(op) is not None:
            parts.append(f"{sym} {meta[op]}")
    return " and ".join(parts)


def _check_domain(name: str, value: Any, meta: dict, key: str) -> None:
    items = value if isinstance(value, list) else [value]
    if meta.get("nonempty") and isinstance(value, list) and not value:
        raise ConfigError(f"{key}: an empty list is not allowed (give at least one value)", key)
    if meta.get("increasing") and any(b <= a for a, b in itertools.pairwise(items)):
        raise ConfigError(
            f"{key}: {_show(value)} is not strictly increasing (expected strictly increasing values)", key
        )
    for v in items:
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        bad = (
            (meta.get("ge") is not None and v < meta["ge"])
            or (meta.get("gt") is not None and v <= meta["gt"])
            or (meta.get("le") is not None and v > meta["le"])
            or (meta.get("lt") is not None and v >= meta["lt"])
        )
        if bad:
            what = f" ({meta['doc']})" if meta.get("doc") else ""
            raise ConfigError(f"{key}: {_show(value)} is out of range; allowed: {_domain(meta)}{what}", key)


def _build(cls: type, data: Any, key: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{key or 'profile'}: expected a mapping, got {type(data).__name__}", key or None)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    where = f"{key}." if key else ""
    for name in data:
        if not isinstance(name, str):
            raise ConfigError(
                f"{key or 'profile'}: key {_show(name)} is not a name (keys are strings such as "
                f"{sorted(fields)[0]!r})",
                key or None,
            )
    unknown = sorted(set(data) - set(fields))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(fields), n=1)
        hint = f"did you mean '{where}{close[0]}'? " if close else ""
        raise ConfigError(
            f"unknown key '{where}{unknown[0]}'; {hint}known keys here: {sorted(fields)}",
            f"{where}{unknown[0]}",
        )
    kwargs = {}
    for name, value in data.items():
        meta = dict(fields[name].metadata)
        if "settings" in meta:
            kwargs[name] = _coerce_settings(meta["settings"], value, f"{where}{name}")
            continue
        kwargs[name] = _coerce(hints[name], value, f"{where}{name}")
        _check_domain(name, kwargs[name], meta, f"{where}{name}")
    obj = cls(**kwargs)
    if hasattr(obj, "check"):
        obj.check(key)
    return obj


def _coerce_settings(schemas: dict[str, type], value: Any, key: str) -> dict[str, dict]:
    """`env.extra`: each environment's block checked against its section (ENV_SETTINGS), kept with only its keys."""
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: expected a mapping of environment -> settings, got {_show(value)}", key)
    out = {}
    for env, block in value.items():
        if env not in available():
            raise ConfigError(f"{key}: {_show(env)} is not an environment; known: {available()}", key)
        if env not in schemas:
            raise ConfigError(
                f"{key}.{env}: {env}'s settings are not declared here; "
                + (
                    "they are the section env.frozenlake"
                    if env == "frozenlake"
                    else "declare them in helpers/config.py ENV_SETTINGS"
                ),
                f"{key}.{env}",
            )
        if not isinstance(block, dict):
            raise ConfigError(
                f"{key}.{env}: expected a mapping of settings, got {_show(block)}", f"{key}.{env}"
            )
        built = _build(schemas[env], block, f"{key}.{env}")
        out[env] = {k: getattr(built, k) for k in block}
    return out


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if isinstance(value, bool) or value not in allowed:
            raise ConfigError(f"{key}: {_show(value)} is not one of {list(allowed)}", key)
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, key)
            except ConfigError as e:
                errors.append(e)
        raise errors[0] if errors else ConfigError(f"{key}: bad value {_show(value)}", key)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list, got {_show(value)}", key)
        return [_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {_show(value)}", key)
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_show(value)}", key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_show(value)}", key)
        if not -INT_MAX - 1 <= value <= INT_MAX:
            raise ConfigError(
                f"{key}: {_show(value)} is out of range; allowed: integers up to 2**31 - 1 = {INT_MAX} "
                "(every integer knob; most have tighter bounds)",
                key,
            )
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {_show(value)}", key)
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(
                f"{key}: {_show(value)} is not a finite number (allowed: finite numbers; .nan, .inf "
                "and values past 1.8e308 such as 1e999 are not)",
                key,
            )
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_show(value)}", key)
        return value
    raise ConfigError(f"{key}: unsupported type {tp}", key)  # pragma: no cover - a schema bug, not user input


def _require(ok: bool, key: str, value: Any, what: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {_show(value)} is out of range (expected {what})", key)
