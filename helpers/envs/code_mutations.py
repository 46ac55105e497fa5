"""Single-point mutations of a program: DeepCoder-MT's injected errors where no failing attempt is at hand.

`CodeEnv.error_action` takes a failing program from the policy's own attempts, or else from the mutants of the task's
reference solution made here (`mutation_sites`, `mutate`), in a seeded random order, and runs each in the sandbox
to find one that fails a test. Here a program is only parsed and unparsed with `ast`, never run.
"""

from __future__ import annotations

import ast

# connective or a boolean constant swapped, an integer constant off by one, min and max confused, or a statement
# left out. Augmented assignments (`i += 1`) and the bodies of while loops are left alone: a mutated loop counter
# tends to loop forever, which costs the sandbox's time limit on every test.
_BINOP_SWAP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BOOL_SWAP = {ast.And: ast.Or, ast.Or: ast.And}
_NAME_SWAP = {"min": "max", "max": "min"}


def _nodes(program: str) -> list[ast.AST]:
    """The program's nodes in `ast.walk` order (the module first), without those inside augmented assignments."""
    tree = ast.parse(program)
    skip = {id(n) for a in ast.walk(tree) if isinstance(a, ast.AugAssign) for n in ast.walk(a)}
    return [tree] + [n for n in ast.walk(tree) if id(n) not in skip and n is not tree]


def mutation_sites(program: str) -> list[tuple[int, str, int]]:
    """Every single-point mutation of `program` as (node index in `_nodes` order, kind, position); [] where the
    program does not parse. The program is parsed with `ast`, never run here."""
    try:
        nodes = _nodes(program)
    except SyntaxError:
        return []
    sites: list[tuple[int, str, int]] = []
    for k, n in enumerate(nodes):
        if isinstance(n, ast.Compare):
            sites += [(k, "compare", j) for j, op in enumerate(n.ops) if type(op) in _CMP_SWAP]
        elif isinstance(n, ast.BinOp) and type(n.op) in _BINOP_SWAP:
            sites.append((k, "binop", 0))
        elif isinstance(n, ast.BoolOp):
            sites.append((k, "boolop", 0))
        elif isinstance(n, ast.Constant) and type(n.value) in (int, bool):
            sites.append((k, "constant", 0))
        elif isinstance(n, ast.Name) and n.id in _NAME_SWAP and isinstance(n.ctx, ast.Load):
            sites.append((k, "name", 0))
        body = getattr(n, "body", None)
        if isinstance(body, list) and len(body) >= 2 and not isinstance(n, ast.While):
            sites += [(k, "drop", j) for j, stmt in enumerate(body) if not isinstance(stmt, ast.AugAssign)]
    return sites


def mutate(program: str, site: tuple[int, str, int]) -> str:
    """`program` with the mutation at `site` (from `mutation_sites`) applied, as source text."""
    nodes = _nodes(program)
    k, kind, j = site
    n = nodes[k]
    if kind == "binop":
        n.op = _BINOP_SWAP[type(n.op)]()
    elif kind == "compare":
        n.ops[j] = _CMP_SWAP[type(n.ops[j])]()
    elif kind == "boolop":
        n.op = _BOOL_SWAP[type(n.op)]()
    elif kind == "constant":
        n.value = (not n.value) if type(n.value) is bool else n.value + 1
    elif kind == "name":
        n.id = _NAME_SWAP[n.id]
    elif kind == "drop":
        del n.body[j]
    else:
        raise ValueError(f"unknown mutation kind {kind!r} in site {site}")
    return ast.unparse(nodes[0]) + "\n"
