"""A JSON Schema of a profile, generated from the config's dataclasses and knobs, so that an editor completes
and checks a YAML profile as it is written.

`python -m helpers.config_schema [--out FILE]` prints it (or writes FILE); with the YAML language server, a
profile that starts with `# yaml-language-server: $schema=<FILE>` gets every section and knob completed, with
its meaning, default and domain. The schema is a guide for the editor: `helpers.config.load` is still the
check that counts (relations between knobs, the file's YAML quirks, where an error lies).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from helpers.config import INT_MAX, Config
from helpers.envs import available

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def schema() -> dict:
    """The JSON Schema of a profile (the mapping `configs/<name>.yaml` holds)."""
    out = {"$schema": DIALECT, "title": "A profile of the kit (configs/<name>.yaml)", **_section(Config)}
    per_env = out["properties"]["per_env"]
    per_env["propertyNames"] = {"enum": available()}
    per_env["additionalProperties"] = {
        "type": "object",
        "description": "overrides of any section but env.name",
    }
    return out


def _section(cls: type) -> dict:
    """A section's dataclass as a closed object: every field with its type, default, meaning and domain."""
    hints = typing.get_type_hints(cls)
    props = {}
    for f in dataclasses.fields(cls):
        meta = dict(f.metadata)
        if "settings" in meta:  # env.extra: each environment's block, checked against its own section
            props[f.name] = {
                "type": "object",
                "additionalProperties": False,
                "properties": {env: _section(settings) for env, settings in sorted(meta["settings"].items())},
            }
            continue
        prop = _type(hints[f.name], meta)
        if meta.get("doc"):
            prop["description"] = meta["doc"]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if default is not dataclasses.MISSING and not dataclasses.is_dataclass(default):
            prop["default"] = default
        props[f.name] = prop
    doc = (cls.__doc__ or "").strip()
    return {"type": "object", "description": doc, "additionalProperties": False, "properties": props}


def _type(tp: Any, meta: dict) -> dict:
    """The schema of one value of type `tp` (bounded as the knob's `meta` says), as `_coerce` takes it."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _section(tp)
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type(a, meta) for a in typing.get_args(tp)]}
    if tp is type(None):
        return {"type": "null"}
    if origin is list:
        (item,) = typing.get_args(tp)
        out = {"type": "array", "items": _type(item, meta)}
        if meta.get("nonempty"):
            out["minItems"] = 1
        return out
    if origin is dict:
        return {"type": "object"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is str:
        return {"type": "string"}
    if tp is int:
        out = {"type": "integer", "minimum": -INT_MAX - 1, "maximum": INT_MAX}
    elif tp is float:
        out = {"type": "number"}
    else:  # pragma: no cover - a schema bug, as in `_coerce`
        raise TypeError(f"unsupported type {tp}")
    for op, word in _BOUNDS.items():
        if meta.get(op) is not None:
            out[word] = meta[op] if word not in out else (max if op == "ge" else min)(out[word], meta[op])
    return out


def main(argv: list[str] | None = None) -> None:
    """`python -m helpers.config_schema [--out FILE]`: print the schema, or write it to FILE."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the schema here (default: print it)")
    args = parser.parse_args(argv)
    text = json.dumps(schema(), indent=2) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
