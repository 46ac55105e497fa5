"""Model replies (and ground-truth call strings) parsed into calls with `ast`: bare names, literal arguments
only; model text is never evaluated."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from helpers.envs.base import oversized

# At most this many syntax-tree nodes in one reply (the longest ground-truth turn has a few hundred): the parsed
# tree, and the arguments sent to the worker, stay small whatever the reply (`[ls(a=[0, 0, ...])]` with 3 M
# elements cost the kit's process 2.8 GB and ran).
MAX_NODES = 10_000

_CALL_START = re.compile(r"\[|[A-Za-z_][\w.]*\(")  # a reply that starts like this is meant as a call list
_FENCE = re.compile(r"^```(?:python|py)?\s*\n?(.*?)\n?\s*```$", re.DOTALL)


@dataclass(frozen=True)
class Call:
    """One parsed call: a bare function name and literal arguments."""

    name: str
    args: tuple
    kwargs: dict
    text: str  # the call as written (normalised by ast.unparse), for observations


def parse_calls(text: str, available: set[str] | frozenset[str]) -> tuple[list[Call] | None, str]:
    """Parse a reply into calls, or (None, what was wrong).

    `[]` or a reply that does not start like a call list (plain text to the user) means no calls: ([], "").
    A reply that starts with `[` or `name(` must parse as a list of calls of names in `available` whose
    arguments are literals; otherwise nothing in it may run. A reply over `MAX_REPLY_BYTES` is refused before
    parsing, and one whose tree has more than `MAX_NODES` nodes before any call is read.
    """
    too_long = oversized(text)
    if too_long:
        return None, too_long
    s = text.strip()
    fenced = _FENCE.match(s)
    if fenced:
        s = fenced.group(1).strip()
    s = s.strip("`").strip()
    if not _CALL_START.match(s):
        return [], ""
    # BFCL's decoder completes missing outer brackets the same way.
    source = ("" if s.startswith("[") else "[") + s + ("" if s.endswith("]") else "]")
    try:
        tree = ast.parse(source, mode="eval").body
        if not isinstance(tree, ast.List):
            return None, "the reply is not a list of calls"
        nodes = sum(1 for _ in zip(ast.walk(tree), range(MAX_NODES + 1), strict=False))
        if nodes > MAX_NODES:
            return (
                None,
                f"the reply has more than {MAX_NODES} syntax-tree nodes (values, names, brackets); nothing was run",
            )
        calls = []
        for k, node in enumerate(tree.elts):
            call, why = _parse_call(node, available)
            if call is None:
                return None, f"call {k + 1}: {why}"
            calls.append(call)
    except (
        Exception
    ) as e:  # any parse failure (SyntaxError, ValueError, RecursionError, ...) is an invalid action
        return (
            None,
            f"could not parse the reply as a list of calls ({type(e).__name__}: {_shorten(str(e), 200)})",
        )
    except MemoryError:
        return None, "could not parse the reply as a list of calls (it is too large)"
    return calls, ""


def _parse_call(node: ast.expr, available: set[str] | frozenset[str]) -> tuple[Call | None, str]:
    """One element of the call list: a bare-name call with literal arguments, or (None, why)."""
    shown = _unparse(node)
    if not isinstance(node, ast.Call):
        return None, f"{shown!r} is not a function call"
    if not isinstance(node.func, ast.Name):
        return (
            None,
            f"call functions by their bare name, e.g. cd(folder='x'); got {_unparse(node.func)!r}",
        )
    name = node.func.id
    if name.startswith("_"):
        return None, f"private or dunder name {name!r} cannot be called"
    if name not in available:
        return None, f"unknown function {name!r}; available: {', '.join(sorted(available))}"
    args, kwargs = [], {}
    for i, a in enumerate(node.args):
        if isinstance(a, ast.Starred):
            return None, f"{name}: *args are not allowed"
        value, ok = _literal(a)
        if not ok:
            return None, f"{name}: positional argument {i + 1} is not a literal: {_unparse(a)!r}"
        args.append(value)
    for kw in node.keywords:
        if kw.arg is None:
            return None, f"{name}: **kwargs are not allowed"
        value, ok = _literal(kw.value)
        if not ok:
            return None, f"{name}: argument {kw.arg!r} is not a literal: {_unparse(kw.value)!r}"
        kwargs[kw.arg] = value
    return Call(name, tuple(args), kwargs, _unparse(node, None)), ""


def _literal(node: ast.expr) -> tuple[Any, bool]:
    try:
        return ast.literal_eval(node), True
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None, False


def _shorten(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _unparse(node: ast.AST, n: int | None = 80) -> str:
    """Source text of a node for an observation (shortened to `n`); never raises (ast.unparse does, e.g. on an
    integer literal too long to print)."""
    try:
        text = ast.unparse(node)
    except Exception:
        name = getattr(getattr(node, "func", None), "id", None)
        text = (
            f"{name}(<arguments too long to print>)" if name else f"<{type(node).__name__} too long to print>"
        )
    return text if n is None else _shorten(text, n)


def parse_ground_truth(call_strings: list[str], available: set[str] | frozenset[str]) -> list[Call]:
    """Ground-truth call strings parsed by the same parser as model replies (they are literal calls)."""
    if not call_strings:
        return []
    calls, why = parse_calls("[" + ", ".join(call_strings) + "]", available)
    if calls is None:
        raise ValueError(f"bfcl: unparsable ground truth {call_strings}: {why}")
    return calls
