"""The exercises (helpers.exercises): two or three per notebook, each a `.py` snippet with its `.toml` beside it,
snippets that use only `profile` (their one free name), import only the kit, the standard library, pandas, numpy
and torch, leave the notebook's variables alone, call nothing that writes results, and a section that renders
every field and the measured runtime (or says it has none). Ruff lints and formats the snippets (`make check`).

Fast: nothing here runs a snippet (tests/test_notebooks.py runs them all on the smoke series)."""

from __future__ import annotations

import ast
import builtins
import json
import re
import shutil
import sys

import nbformat
import pytest

from helpers import exercises, run
from helpers.config import REPO_ROOT

ALLOWED_ROOTS = {"helpers", "numpy", "pandas", "torch"} | set(sys.stdlib_module_names)
# calls that write under the results folder (records, tables, models, caches): a snippet must not make them
WRITES = {
    "open_run",
    "write_metrics",
    "write_table",
    "save_figure",
    "write_manifest",
    "rl_train",
    "train_runs",
    "train_many",
    "train_grid",
    "recorded_trajectories",
    "evaluate_grid",
    "sharpened",
    "agents",
    "rewrite",
    "write_atomic",
    "write_text",
    "save_pretrained",
    "evaluate",
    "probe_pool",
}
NOTEBOOKS = {p.stem: p for p in run.notebooks()}


def _bindings(tree: ast.AST) -> tuple[set[str], dict[str, str]]:
    """Names a piece of code binds at its top level (not inside comprehensions, lambdas or functions): assigned
    names, and imported names with what they import."""
    assigned: set[str] = set()
    imported: dict[str, str] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp | ast.Lambda):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            assigned.add(node.name)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                imported[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                imported[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return assigned, imported


def _notebook_bindings(stem: str) -> tuple[set[str], dict[str, str]]:
    nb = nbformat.read(NOTEBOOKS[stem], as_version=4)
    assigned: set[str] = set()
    imported: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            a, i = _bindings(ast.parse(cell.source))
            assigned |= a
            imported.update(i)
    return assigned, imported


def test_every_notebook_has_two_to_four_exercises():
    assert set(NOTEBOOKS) == {e.notebook for e in exercises.EXERCISES}
    for stem in NOTEBOOKS:
        chosen = exercises.for_notebook(stem)
        assert 2 <= len(chosen) <= 4, (stem, [e.key for e in chosen])
        assert [e.key for e in chosen] == [f"{stem[:2]}{c}" for c in "abcd"[: len(chosen)]]
        assert exercises.for_notebook(stem[:2]) == chosen


def test_keys_are_unique_and_found():
    keys = [e.key for e in exercises.EXERCISES]
    assert len(keys) == len(set(keys))
    assert all(exercises.get(k).key == k for k in keys)
    with pytest.raises(KeyError, match="no exercise"):
        exercises.get("99z")


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_fields_are_filled_in(ex):
    for name in ("title", "change", "predict", "look_for", "code"):
        assert getattr(ex, name).strip(), f"{ex.key}: empty {name}"
    assert len(re.findall(r"[.?!](?:\s|$)", ex.change)) <= 2, f"{ex.key}: `change` is one or two sentences"


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_code_parses_uses_profile_and_imports_only_the_kit_and_its_libraries(ex):
    tree = ast.parse(ex.code)
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert "profile" in loads, f"{ex.key} does not use `profile`"
    assigned, imported = _bindings(tree)
    assert "profile" not in assigned and "profile" not in imported, f"{ex.key} rebinds `profile`"
    roots = {v.split(".")[0] for v in imported.values()}
    assert roots <= ALLOWED_ROOTS, f"{ex.key} imports {sorted(roots - ALLOWED_ROOTS)}"
    assert any(v.startswith("helpers") for v in imported.values()), (
        f"{ex.key} calls none of the kit's helpers"
    )
    assert "print" in {
        n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_profile_is_the_only_free_name(ex):
    """Ruff's undefined-name check is off for the snippets (they run in the notebook's namespace), so this is it:
    every name a snippet reads is bound in it, a builtin, or `profile`."""
    tree = ast.parse(ex.code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert loads - bound == {"profile"}, f"{ex.key} reads undefined {sorted(loads - bound - {'profile'})}"


def test_every_snippet_file_has_its_fields_beside_it():
    folder = exercises.FOLDER
    snippets = {p.stem for p in folder.glob("*.py")} - {"__init__", "__main__", "answers", "checks"}
    assert snippets == {p.stem for p in folder.glob("*.toml")}
    assert snippets == {e.path.stem for e in exercises.EXERCISES}
    assert all(re.fullmatch(r"\d\d[a-d]_[a-z0-9_]+", stem) for stem in snippets), sorted(snippets)


def test_load_refuses_an_incomplete_exercise(tmp_path):
    ex = exercises.get("04b")
    shutil.copy(ex.path, tmp_path / ex.path.name)
    toml = ex.path.with_suffix(".toml")
    shutil.copy(toml, tmp_path / toml.name)
    assert exercises.load(tmp_path)[0] == ex.__class__(**{**ex.__dict__, "path": tmp_path / ex.path.name})
    (tmp_path / toml.name).write_text(toml.read_text().replace("look_for =", "look_at ="))
    with pytest.raises(ValueError, match="fields"):
        exercises.load(tmp_path)
    shutil.copy(toml, tmp_path / toml.name)
    (tmp_path / ex.path.name).unlink()
    with pytest.raises(FileNotFoundError, match="no snippet"):
        exercises.load(tmp_path)


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_code_calls_nothing_that_writes_results(ex):
    called = set()
    for node in ast.walk(ast.parse(ex.code)):
        if isinstance(node, ast.Call):
            f = node.func
            called.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    assert not called & WRITES, f"{ex.key} calls {sorted(called & WRITES)}"
    assert "open(" not in ex.code and "to_csv" not in ex.code


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: e.key)
def test_code_leaves_the_notebooks_variables_alone(ex):
    """Pasted at the end of its notebook, a snippet rebinds no name the notebook binds (an import of the same
    object under the same name is fine)."""
    nb_assigned, nb_imported = _notebook_bindings(ex.notebook)
    assigned, imported = _bindings(ast.parse(ex.code))
    assert not assigned & (nb_assigned | set(nb_imported)), (
        f"{ex.key} rebinds {sorted(assigned & (nb_assigned | set(nb_imported)))}"
    )
    clash = {n for n, what in imported.items() if n in nb_assigned or nb_imported.get(n, what) != what}
    assert not clash, f"{ex.key} imports over the notebook's {sorted(clash)}"


def _entry(ex, **kw):
    return {
        "seconds": 3.4,
        "code": ex.digest,
        "commit": "abc1234def5678",
        "profile": "cpu",
        "cpu_count": 2,
        "torch_threads": 2,
        "date": "2026-12-01T00:00:00+00:00",
        **kw,
    }


def test_section_renders_every_field_and_says_not_measured_yet(tmp_path):
    first, second, *rest = exercises.for_notebook("03_pass_at_kt_sweep")
    path = tmp_path / "exercises.json"
    path.write_text(
        json.dumps({"exercises": {first.key: _entry(first), second.key: _entry(second, code="0" * 12)}})
    )
    text = exercises.section("03_pass_at_kt_sweep", path)
    assert text.startswith("## Exercises\n")
    for e in (first, second, *rest):
        for field in (e.title, e.change, e.predict, e.look_for):
            assert field in text
        assert f"```python\n{e.code.rstrip()}\n```" in text
    blocks = text.split("\n### ")[1:]
    assert "about 3 s on 2 cores with the cpu profile, measured at commit abc1234 on 2026-12-01" in blocks[0]
    assert "not measured yet (its code changed" in blocks[1]
    assert all("not measured yet" in b for b in blocks[2:])


def test_runtime_in_words():
    ex = exercises.get("04b")
    assert exercises.runtime(ex, {"exercises": {"04b": _entry(ex, seconds=0.04)}}).startswith(
        "under 1 s on 2 cores"
    )
    dirty = exercises.runtime(
        ex, {"exercises": {"04b": _entry(ex, seconds=12.6, commit="abc1234ffff-dirty")}}
    )
    assert (
        dirty
        == "about 13 s on 2 cores with the cpu profile, measured at commit abc1234 (with uncommitted changes) on "
        "2026-12-01"
    )
    assert exercises.runtime(ex, {}) == "not measured yet"
    solved = exercises.get("03d")
    assert exercises.runtime(solved, {"exercises": {"03d": _entry(solved, seconds=2.0)}}).startswith(
        "about 2 s (the reference solution filled in) on 2 cores"
    )
    changed = {"exercises": {"03d": _entry(solved, code=exercises.Exercise.digest.fget(ex))}}
    assert "code changed" in exercises.runtime(solved, changed)


def test_section_without_any_measurement(tmp_path):
    text = exercises.section("00", tmp_path / "missing.json")
    assert text.count("not measured yet") == len(exercises.for_notebook("00")) and "measured at" not in text
    with pytest.raises(KeyError, match="no exercises"):
        exercises.section("99_nothing", tmp_path / "missing.json")


def test_committed_timings_belong_to_known_exercises():
    measured = exercises.timings().get("exercises", {})
    keys = {e.key for e in exercises.EXERCISES}
    assert set(measured) <= keys
    for key, entry in measured.items():
        assert entry["seconds"] > 0 and entry["cpu_count"] >= 1 and len(entry["code"]) == 12, key


def test_results_snapshot_sees_a_new_or_changed_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.json").write_text("{}")
    before = exercises.results_snapshot(tmp_path)
    assert list(before) == ["a/x.json"]
    (tmp_path / "a" / "x.json").write_text('{"changed": 1}')
    (tmp_path / "y.csv").write_text("")
    after = exercises.results_snapshot(tmp_path)
    assert set(after) == {"a/x.json", "y.csv"} and after["a/x.json"] != before["a/x.json"]


# ----------------------------------------------------------------------- exercises v2: answers after predictions


def test_section_hides_every_answer_after_its_prediction_and_names_the_one_call(tmp_path):
    for stem in NOTEBOOKS:
        text = exercises.section(stem, tmp_path / "missing.json")
        for e in exercises.for_notebook(stem):
            block = text.split(f"### {e.key} ")[1].split("\n### ")[0]
            predict, answer = block.index(e.predict), block.index(e.look_for)
            opened = block.index(f"<details>\n<summary>{exercises.SUMMARY}</summary>")
            assert predict < opened < answer < block.index("</details>", answer), e.key
            assert f'`exercises.paste("{e.key}")`' in block


def test_committed_solutions_file_is_up_to_date():
    assert exercises.SOLUTIONS.read_text() == exercises.solutions(), (
        "docs/solutions.md is stale: python -c 'from helpers import exercises; exercises.write_solutions()'"
    )
    text = exercises.solutions()
    for e in exercises.EXERCISES:
        assert e.look_for in text and e.predict in text
        if e.solution:
            assert e.solution.rstrip() in text


def test_every_notebook_has_an_exercise_that_trains_or_implements():
    """Implement-exercises have a reference solution; train-exercises run the kit's PPO update in memory."""
    for stem in NOTEBOOKS:
        kinds = [exercises.is_implement(e) or "ppo_update" in e.code for e in exercises.for_notebook(stem)]
        assert any(kinds), stem


IMPLEMENT = [e for e in exercises.EXERCISES if exercises.is_implement(e)]


@pytest.mark.parametrize("ex", IMPLEMENT, ids=lambda e: e.key)
def test_solution_passes_its_check_and_the_skeleton_does_not(ex, capsys, monkeypatch):
    """On the committed cpu results (read, never written): the skeleton runs and says NOT YET, the reference
    solution says PASSED. The verdict is the snippet's `verdict_d`."""
    assert "NotImplementedError" in ex.code and "NotImplementedError" not in ex.solution
    monkeypatch.setenv("KIT_RESULTS", str(REPO_ROOT / "results"))
    before = exercises.results_snapshot(REPO_ROOT / "results" / "cpu")
    ns = exercises.run(ex.key, "cpu")
    assert not ns["verdict_d"].passed and capsys.readouterr().out.startswith("NOT YET")
    ns = {"profile": "cpu", "__name__": "__exercise__"}
    exec(compile(ex.solution, f"<solution {ex.key}>", "exec"), ns)
    assert ns["verdict_d"].passed, str(ns["verdict_d"])
    assert capsys.readouterr().out.startswith("PASSED")
    assert exercises.results_snapshot(REPO_ROOT / "results" / "cpu") == before, (
        f"{ex.key} wrote into the results"
    )


def test_solution_differs_from_its_skeleton_only_in_the_function_body():
    """What the student sees around the function (the check, what runs after it) is the reference solution's; the
    solution may import more (`math`) but not less."""
    for ex in IMPLEMENT:
        mine, ref = ast.parse(ex.code), ast.parse(ex.solution)
        imports = ast.Import | ast.ImportFrom
        assert {ast.dump(n) for n in mine.body if isinstance(n, imports)} <= {
            ast.dump(n) for n in ref.body if isinstance(n, imports)
        }, ex.key
        rest = (
            [n for n in mine.body if not isinstance(n, imports)],
            [n for n in ref.body if not isinstance(n, imports)],
        )
        assert len(rest[0]) == len(rest[1]), ex.key
        for a, b in zip(*rest, strict=True):
            if isinstance(a, ast.FunctionDef) and a.name.startswith("my_"):
                assert (
                    isinstance(b, ast.FunctionDef)
                    and a.name == b.name
                    and ast.dump(a.args) == ast.dump(b.args)
                )
            else:
                assert ast.dump(a) == ast.dump(b), (ex.key, ast.unparse(a)[:80])


def test_checks_catch_a_wrong_implementation():
    from helpers.exercises import checks

    plug_in = checks.pass_at_k(lambda n, c, k: 1 - (1 - c / n) ** k)
    assert not plug_in.passed and "the kit gives" in plug_in.detail
    crash = checks.pass_at_k(lambda n, c, k: 1 / 0)
    assert not crash.passed and "ZeroDivisionError" in crash.detail
    no_centring = checks.gigpo_step_advantages(lambda trajs, ids, g: [[0.0] * len(s) for s in trajs])
    assert not no_centring.passed and str(no_centring).startswith("NOT YET")
    population_std = checks.grpo_advantages(
        lambda r, g, norm: [
            (x - _mean(r, g, i)) / ((_var0(r, g, i) ** 0.5) + 1e-6 if norm else 1.0) for i, x in enumerate(r)
        ]
    )
    assert not population_std.passed and "the kit gives" in population_std.detail
    bankers = checks.budgetmix_candidates(lambda t: sorted({max(1, round(i / 10 * t)) for i in range(1, 11)}))
    assert not bankers.passed and "T_max=13" in bankers.detail


def _members(g: list, i: int) -> list[int]:
    return [j for j, h in enumerate(g) if h == g[i]]


def _mean(r: list, g: list, i: int) -> float:
    m = _members(g, i)
    return sum(r[j] for j in m) / len(m) if len(m) > 1 else 0.0


def _var0(r: list, g: list, i: int) -> float:
    """The population variance of i's group (ddof 0, where the kit uses the sample variance); 1 for a group of one."""
    m = _members(g, i)
    return sum((r[j] - _mean(r, g, i)) ** 2 for j in m) / len(m) if len(m) > 1 else 1.0


def test_paste_prints_outside_ipython_and_run_uses_a_fresh_namespace(capsys):
    exercises.paste("03d")
    assert capsys.readouterr().out.strip() == exercises.get("03d").code.strip()
    ns = exercises.run("03d", "cpu")
    assert ns["profile"] == "cpu" and "my_pass_at_k" in ns


def test_readme_counts_the_exercises():
    text = (REPO_ROOT / "README.md").read_text()
    sizes = [len(exercises.for_notebook(stem)) for stem in NOTEBOOKS]
    assert f"{min(sizes)}-{max(sizes)} exercises ({len(exercises.EXERCISES)} in all" in text
