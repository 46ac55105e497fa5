"""The profile's YAML reader: strict, bounded, and with the line of every key (`read_yaml_lines`).

A profile is YAML as YAML defines it (anchors, aliases, merge keys), read with these refusals, each a
ConfigError naming the file and line: a key given twice in one mapping, a key that is not a name, nesting
deeper than MAX_YAML_DEPTH, aliases that expand the file past MAX_YAML_VALUES values (or a recursive one), an
integer of more digits than any knob takes. `_scan_events` bounds the file from the parser's events before
anything is built; `_walk` records the line of every key and list item, so that `helpers.config.load` can
blame an error's key where it is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helpers.config_types import INT_MAX, ConfigError

# A profile's YAML is small (the largest has about 400 values, nested 5 deep). Aliases are expanded by every reader
# of a Config (`to_dict`, every manifest), so a few hundred bytes of nested aliases can stand for gigabytes: the
# value count after expanding aliases and the nesting depth are bounded when the file is read.
MAX_YAML_VALUES = 20_000
MAX_YAML_DEPTH = 32


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "seq": "a list",
    "map": "a mapping",
    "timestamp": "a date",
    "binary": "binary data",
    "set": "a set",
}


def read_yaml(path: Path) -> Any:
    """Parse a YAML file strictly (see `read_yaml_lines`)."""
    return read_yaml_lines(path)[0]


def read_yaml_lines(path: Path) -> tuple[Any, dict[tuple, int]]:
    """Parse a profile's YAML strictly; returns the data and the line of every key and list item (by key path).

    Every problem is a ConfigError naming the file and line: syntax errors; a key given twice in one mapping
    (YAML lets the last win); a key that is not a name (`1:`, `[a, b]:`, `yes:`, `null:`); nesting deeper than
    MAX_YAML_DEPTH; aliases that expand the file past MAX_YAML_VALUES values, or refer to a node that contains them;
    integers of more digits than any knob takes. Anchors, aliases and merge keys (`<<: *defaults`) work as in YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        _scan_events(text, path)
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            lines = {} if node is None else _walk(node, path)
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    except ConfigError:
        raise
    except (ValueError, TypeError, OverflowError) as e:  # a scalar YAML's constructors cannot convert
        raise ConfigError(f"{path}: YAML value error: {e}") from None
    return data, lines


@dataclass
class _Open:
    """A collection `_scan_events` is inside: its anchor, kind, values so far, children read and the current one's
    place (key or index)."""

    anchor: str | None
    mapping: bool
    values: int = 1
    children: int = 0
    at: str | int | None = None


def _scan_events(text: str, path: Path) -> None:
    """Bound nesting and alias expansion from the parser's events, before anything is built (the events are read
    one by one: a deep or explosive file costs no more than its length here). Errors name the line and the key."""
    loader = yaml.SafeLoader(text)
    stack: list[_Open] = []

    def where() -> str:
        parts = (str(f.at) if isinstance(f.at, str) else f"[{f.at}]" for f in stack if f.at is not None)
        text = ".".join(parts).replace(".[", "[") or "the top level"
        return text if len(text) <= 100 else text[:95] + " ..."

    try:
        sizes: dict[str, int] = {}  # anchor -> values of the node it names, aliases expanded
        total = 0
        while loader.check_event():
            ev = loader.get_event()
            line = ev.start_mark.line + 1
            if stack and isinstance(ev, yaml.NodeEvent):  # a child of the innermost collection begins
                top = stack[-1]
                if not top.mapping:
                    top.at = top.children
                elif top.children % 2 == 0:  # a key: the place of the value after it
                    top.at = ev.value if isinstance(ev, yaml.ScalarEvent) else "?"
            add = None  # values of a child that is complete now
            if isinstance(ev, yaml.CollectionStartEvent):
                total += 1
                stack.append(_Open(ev.anchor, isinstance(ev, yaml.MappingStartEvent)))
                if len(stack) > MAX_YAML_DEPTH:
                    raise ConfigError(
                        f"{path}:{line}: {where()}: nested more than {MAX_YAML_DEPTH} levels deep (no "
                        "knob is nested more than 4); flatten it"
                    )
            elif isinstance(ev, yaml.CollectionEndEvent):
                done = stack.pop()
                add = done.values
                if done.anchor is not None:
                    sizes[done.anchor] = add
            elif isinstance(ev, yaml.ScalarEvent):
                total += (add := 1)
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                if any(f.anchor == ev.anchor for f in stack):
                    raise ConfigError(
                        f"{path}:{line}: {where()}: alias *{ev.anchor} refers to a node that contains "
                        "it (a recursive value); no knob takes one"
                    )
                total += (add := sizes.get(ev.anchor, 1))
            if add is not None and stack:
                stack[-1].values += add
                stack[-1].children += 1
            if total > MAX_YAML_VALUES:
                raise ConfigError(
                    f"{path}:{line}: {where()}: with its aliases expanded the file holds more than "
                    f"{MAX_YAML_VALUES} values (a profile has a few hundred): every manifest would "
                    "copy them all; write the values out or alias less"
                )
    finally:
        loader.dispose()


def _walk(root: yaml.Node, path: Path) -> dict[tuple, int]:
    """Line of every key and list item by key path; refuses keys that are not names and keys given twice."""
    lines: dict[tuple, int] = {}
    stack: list[tuple[yaml.Node, tuple]] = [(root, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault((*where, i), item.start_mark.line + 1)
                stack.append((item, (*where, i)))
        elif isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            merged: list[yaml.Node] = []
            for key_node, value in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag == _MERGE_TAG:
                    merged += value.value if isinstance(value, yaml.SequenceNode) else [value]
                    continue
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                    kind = _KINDS.get(key_node.tag.rsplit(":", 1)[-1], key_node.tag)
                    shown = (
                        f"key {key_node.value!r}"
                        if isinstance(key_node, yaml.ScalarNode)
                        else f"a key that is {kind}"
                    )
                    dotted = ".".join(map(str, where)) or "the top level"
                    raise ConfigError(
                        f"{path}:{line}: {shown} under {dotted} is not a name (YAML reads it as "
                        f"{kind}); keys are names such as 'lr': quote it if it is one"
                    )
                k = key_node.value
                if k in seen:
                    raise ConfigError(
                        f"{path}:{line}: key {k!r} is given twice in this mapping (first on line "
                        f"{seen[k]}); remove one"
                    )
                seen[k] = line
                lines[(*where, k)] = line
                stack.append((value, (*where, k)))
            for m in merged:  # `<<: *defaults`: its keys, where this mapping does not set them itself
                if isinstance(m, yaml.MappingNode):
                    unset = [
                        (kn, v)
                        for kn, v in m.value
                        if not (isinstance(kn, yaml.ScalarNode) and kn.value in seen)
                    ]
                    stack.append((yaml.MappingNode(m.tag, unset, m.start_mark, m.end_mark), where))
        elif node.tag == _INT_TAG and len(node.value.lstrip("+-").replace("_", "")) > 30:
            dotted = ".".join(map(str, where))
            raise ConfigError(
                f"{path}:{node.start_mark.line + 1}: {dotted}: an integer of {len(node.value)} digits "
                f"is out of range; allowed: integers up to 2**31 - 1 = {INT_MAX}"
            )
    return lines
