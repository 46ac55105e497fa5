"""Shared fixtures and the test tiers.

Every test writes results under a temporary KIT_RESULTS, never into results/. One session shares its built base
models: `KIT_BASE_CACHE` points at a session folder, so the smoke base (and any other recipe) is built once, by
whichever test needs it first, and copied into every other results folder that asks for the same recipe hash
(helpers.base_model.path_of; the notebooks' kernels and the tests' subprocesses inherit the variable). It shares
its FrozenLake map cache the same way (`KIT_MAP_CACHE`).

Tiers (markers, documented in pyproject.toml and the README), applied here by file and by fixture so the test
files need not carry them:
- `series`: the Papermill smoke series (tests/test_notebooks.py), one fixture run per environment;
- `interactive`: Run All of the cpu notebooks on the committed artefacts (tests/test_interactive.py);
- `slow`: anything that trains, builds a base or starts kernels or subprocesses (every `series` and `interactive`
  test too);
- `gpu`, `vllm`: skipped without a CUDA device or vllm.
`make check` runs the tests that are none of slow, series, interactive; `make test` runs all of them.

Parallel runs (`make test`: pytest-xdist, `-n 2 --dist loadgroup`). Each test is given an `xdist_group`, so that
what shares an expensive fixture runs in one worker: a test file is one group (its module fixtures are built
once), except that the smoke series is one group per environment (each series runs once, in the worker that
took it, and the four spread over both workers) and Run All is one group per notebook (its fixture only copies
the committed results), and the tests that use Qwen3's real tokenizer (`qwen3_dir`) form one group, so it is built
once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# torch threads per test process: OMP_NUM_THREADS when set (`make test` runs two processes side by side with one
# thread each, so they and the notebook kernels they start never oversubscribe two cores), else up to two
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or min(2, os.cpu_count() or 1)))

# files whose every test is slow (they train, build bases, run kernels or sandboxes)
SLOW_FILES = {
    "test_notebooks.py",
    "test_interactive.py",
    "test_kill.py",
    "test_slow_machine.py",
    "test_train.py",
    "test_process.py",
    "test_precision.py",
    "test_evaluate.py",
    "test_trl.py",
    "test_gpu.py",
    "test_scripted.py",
    "test_budget_probe.py",
    "test_stats_null.py",
}
# fixtures that build or run something slow: a test that uses one is slow, wherever it is
SLOW_FIXTURES = {"smoke_series", "smoke_base", "shared_base", "base_path", "clone_results", "qwen3_dir"}
SERIES_FIXTURES = {"smoke_series"}
# single tests that are slow in files that are otherwise fast (measured with --durations): by name, or one case of a
# parametrized test by its full name
SLOW_TESTS = {
    "test_every_humaneval_canonical_solution_passes",
    "test_verdicts_do_not_move_with_load",
    "test_preflight_installs_transformers_and_accelerate_from_a_wheelhouse",  # a venv and a pip install (47 s)
    "test_the_benchmark_imports_the_kit_from_its_own_folder",
    "test_a_qwen3_base_is_built_and_played_in_bfloat16",
    "test_the_qwen3_step_runs_end_to_end_on_a_tiny_qwen3",
    "test_base_model_is_cached_by_recipe",  # builds a base (9 s)
    "test_one_kernel_gives_each_notebook_what_a_fresh_kernel_gives_and_stops_at_a_failure",  # three kernels (6 s)
    "test_assert_tests_that_fail_after_their_check_equal_one_process_per_test",  # a sandbox per test (12 s)
    "test_nothing_the_program_writes_is_taken_as_a_verdict[the runner replaced in __main__]",  # stall guards (21 s)
}


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory) -> Path:
    """A temporary folder that every worker of the session shares (pytest-xdist gives each worker a base temporary
    folder of its own, inside one shared by all of them): what is built there once is used by every worker."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    shared.mkdir(exist_ok=True)
    return shared


def _session_folder(shared_tmp: Path, variable: str, name: str):
    """`shared_tmp/name` as the environment variable `variable` for the whole session (kernels and subprocesses
    inherit it), or the folder the variable names already (as `make test` sets KIT_BASE_CACHE)."""
    if os.environ.get(variable):
        yield Path(os.environ[variable])
        return
    folder = shared_tmp / name
    folder.mkdir(exist_ok=True)
    os.environ[variable] = str(folder)
    yield folder
    os.environ.pop(variable, None)


@pytest.fixture(autouse=True, scope="session")
def _base_cache(shared_tmp):
    """One folder of built bases for the session, shared by its workers (`KIT_BASE_CACHE`)."""
    yield from _session_folder(shared_tmp, "KIT_BASE_CACHE", "base_cache")


@pytest.fixture(autouse=True, scope="session")
def _map_cache(shared_tmp):
    """One FrozenLake map cache for the session (`KIT_MAP_CACHE`): every test has a results root of its own, and the
    cpu profile's selected maps cost about 20 s of a core to draw, once per root without it. Tests of the cache
    itself set their own."""
    yield from _session_folder(shared_tmp, "KIT_MAP_CACHE", "frozenlake-maps")


@pytest.fixture(scope="session")
def qwen3_dir(tmp_path_factory):
    """Qwen3's real tokenizer built offline (helpers.qwen3_tokenizer), once per session (about 20 s)."""
    from helpers import qwen3_tokenizer

    return qwen3_tokenizer.build(tmp_path_factory.mktemp("qwen3_tokenizer"))


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    if "KIT_RESULTS" not in os.environ:
        monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "results"))


def pytest_configure(config):
    """Register `xdist_group` here too: the hook below gives every test one, and under `--strict-markers` a box
    without pytest-xdist (requirements-gpu.txt and the GPU check's preflight do not install it) would stop at
    collection with "'xdist_group' not found in markers" (issue 48). pytest-xdist registers it as well; a marker
    registered twice is harmless."""
    config.addinivalue_line("markers", "xdist_group(name): tests of one group run in one pytest-xdist worker")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    try:
        import vllm  # noqa: F401

        has_vllm = True
    except ImportError:
        has_vllm = False
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        name = item.path.name
        if name == "test_interactive.py":
            item.add_marker(pytest.mark.interactive)
        if fixtures & SERIES_FIXTURES:
            item.add_marker(pytest.mark.series)
        if (
            name in SLOW_FILES
            or getattr(item, "originalname", item.name) in SLOW_TESTS
            or item.name in SLOW_TESTS
            or fixtures & SLOW_FIXTURES
            or item.get_closest_marker("series")
            or item.get_closest_marker("interactive")
        ):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(_group(item, name)))
        if item.get_closest_marker("gpu") and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if item.get_closest_marker("vllm") and not has_vllm:
            item.add_marker(pytest.mark.skip(reason="needs vllm"))
    # the longest groups first (a stable sort: each file keeps its order), so that two workers end together
    items[:] = sorted(items, key=_cost_rank)


_GROUPS_LOST: list[str] = []  # a message when pytest-xdist could not group this worker's tests


def pytest_collection_finish(session):
    """In a pytest-xdist worker under `--dist loadgroup`: every grouped test's id must carry its group (xdist adds
    `@group` to it, and schedules by that suffix). pytest 9.2 keeps node ids where pytest-xdist 3.8 cannot add it,
    and the groups were silently ignored: a series' tests ran in both workers, one waiting on the other's lock, and
    module fixtures were built twice. Every test then fails at set-up, saying so (`pytest_runtest_setup`)."""
    # getoption with a default: a pytest started with `-p no:xdist` from inside a worker inherits its environment
    if not os.environ.get("PYTEST_XDIST_WORKER") or not session.config.getoption("loadgroup", default=False):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]
    ]
    if lost:
        _GROUPS_LOST.append(
            f"pytest-xdist's --dist loadgroup did not group {len(lost)} tests (e.g. {lost[0]}): pytest "
            f"{pytest.__version__} with this pytest-xdist ignores xdist_group; install the pins of requirements.txt"
        )


def pytest_runtest_setup(item):
    if _GROUPS_LOST:
        pytest.fail(_GROUPS_LOST[0], pytrace=False)


def _cost_rank(item) -> int:
    """0 the smoke series, 1 Run All, 2 other slow tests (the tests that read every series among them), 3 the fast
    ones: the order the workers take them in. A test that reads every series goes after Run All, when both workers
    have run their series: taken earlier, it ran a series of the other worker's share, and that worker then waited
    for it."""
    if item.get_closest_marker("series") and "series" not in _params(item):
        return 2
    for rank, marker in enumerate(("series", "interactive", "slow")):
        if item.get_closest_marker(marker):
            return rank
    return 3


def _params(item) -> dict:
    return getattr(getattr(item, "callspec", None), "params", {})


def _group(item, file: str) -> str:
    """The xdist group of a test (see the module docstring): its file, its environment's smoke series, or its
    notebook's Run All."""
    params = _params(item)
    if "qwen3_dir" in getattr(
        item, "fixturenames", ()
    ):  # one build of Qwen3's tokenizer (about 20 s) for all of them
        return "qwen3"
    if item.get_closest_marker("series"):
        return f"series-{params.get('series') or 'default'}" if "series" in params else "series-all"
    if item.get_closest_marker("interactive") and "path" in params:
        return f"run-all-{params['path'].stem}"
    return file
