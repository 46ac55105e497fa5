"""Evaluation grids (notebooks 02 and 03): one batched rollout per (model, budget), resumable."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import base_model, config, evaluate, metrics, probing, store
from helpers.agents import Agent, agent_id, opened
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling, Tempered
from helpers.rollout import rollout


@pytest.fixture(scope="module")
def base_path(tmp_path_factory):
    with store.results_at(tmp_path_factory.mktemp("eval_results")):
        yield base_model.path_of(config.load("smoke"))


class CountingPolicy(HFPolicy):
    calls = 0

    def generate(self, prompt_token_ids, sampling):
        CountingPolicy.calls += 1
        return super().generate(prompt_token_ids, sampling)


def test_grid_resumes_without_duplicating_records(base_path, tmp_path):
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=4, **settings(cfg))
    pol = CountingPolicy.from_pretrained(base_path, name="base")
    rec = store.Records(tmp_path / "grid.jsonl")
    sampling = Sampling(1.0, 1.0, 6)
    first = evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2], 3, sampling, 0, rec)
    assert len(first) == 12 and len(rec) == 12
    # an interrupted sweep: one more budget requested; only the missing cell runs
    calls = CountingPolicy.calls
    both = evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2, 4], 3, sampling, 0, rec)
    assert len(both) == 24 and len(rec) == 24 and CountingPolicy.calls > calls
    # a finished sweep costs nothing to re-plot
    calls = CountingPolicy.calls
    again = evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2, 4], 3, sampling, 0, rec)
    assert CountingPolicy.calls == calls and len(rec) == 24
    assert again.equals(both)
    assert set(again.groupby(["budget", "task_id"]).size()) == {3}
    # and the table feeds Pass@(K,T) directly
    grid = metrics.pass_at_kt(again)
    assert set(grid["T"]) == {2, 4} and set(grid["K"]) == {1, 2, 3}


def test_agents_are_loaded_one_at_a_time_and_only_for_cells_to_run(base_path, tmp_path, monkeypatch):
    """Issue 28: a roster of Agents gives the records loaded policies give (same ids, same numbers), loads each model
    once, never two at a time, closes it after its cells, and loads nothing for a finished grid."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=3, **settings(cfg))
    sampling = Sampling(1.0, 1.0, 6)
    roster = {"base": Agent("base", base_path, cfg), "sharp": Agent("sharp", base_path, cfg, temperature=0.5)}
    held, loads, closed = [], [], []
    real_load = Agent.load

    def load(self):
        assert not held, f"{self.name} loaded while {held} is open"
        policy = real_load(self)
        held.append(self.name)
        loads.append(self.name)
        real_close = policy.close

        def close():
            held.remove(self.name)
            closed.append(policy)
            real_close()

        policy.close = close
        return policy

    monkeypatch.setattr(Agent, "load", load)
    lazy = evaluate.evaluate_grid(
        roster, "frozenlake", tasks, [2, 4], 2, sampling, 0, store.Records(tmp_path / "a")
    )
    assert loads == ["base", "sharp"] and not held
    assert len(closed) == 2 and all(
        (p.policy if isinstance(p, Tempered) else p).model is None for p in closed
    )
    again = evaluate.evaluate_grid(
        roster, "frozenlake", tasks, [2, 4], 2, sampling, 0, store.Records(tmp_path / "a")
    )
    assert loads == ["base", "sharp"] and again.equals(lazy)  # nothing to run: nothing loaded
    monkeypatch.setattr(Agent, "load", real_load)
    loaded = {
        "base": HFPolicy.from_pretrained(base_path, name="base"),
        "sharp": Tempered(HFPolicy.from_pretrained(base_path), 0.5, name="sharp"),
    }
    assert {n: agent_id(a) for n, a in roster.items()} == {n: agent_id(p) for n, p in loaded.items()}
    eager = evaluate.evaluate_grid(
        loaded, "frozenlake", tasks, [2, 4], 2, sampling, 0, store.Records(tmp_path / "b")
    )
    assert eager.equals(lazy)
    with opened(loaded["base"]) as same:  # the caller's policy is used as it is and left open
        assert same is loaded["base"]
    assert loaded["base"].model is not None


def test_cells_of_the_same_tasks_run_as_one_grid_with_the_records_of_each_cell(base_path, tmp_path):
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=3, **settings(cfg))
    sampling = Sampling(1.0, 1.0, 6)
    pol = HFPolicy.from_pretrained(base_path, name="base")
    cells = {(0.5, 2): (tasks, 2), (1.0, 4): (tasks, 4), ("first task", 3): (tasks[:1], 3)}
    frames = evaluate.evaluate_cells(
        {"base": pol}, "frozenlake", cells, 2, sampling, 0, store.Records(tmp_path / "a")
    )
    assert list(frames) == list(cells)
    for key, (ts, b) in cells.items():  # as the cell alone gives it
        alone = evaluate.evaluate_grid(
            {"base": pol}, "frozenlake", ts, [b], 2, sampling, 0, store.Records(tmp_path / f"b{b}")
        )
        assert frames[key].equals(alone)


def test_a_cell_cut_short_is_redone_without_touching_other_tasks_cells_of_the_same_budget(
    base_path, tmp_path
):
    """Cells of different tasks at one budget share a records file (BFCL's fractions of T_max over entries whose
    T_max differ): redoing one that a kill cut short rewrites the file without that cell's records only; the other
    cell's records stay, and it is not rolled out again."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=4, **settings(cfg))
    sampling = Sampling(1.0, 1.0, 6)
    pol = CountingPolicy.from_pretrained(base_path, name="base")
    rec = store.Records(tmp_path / "shared.jsonl")
    cells = {"first two": (tasks[:2], 2), "last two": (tasks[2:], 2)}
    whole = evaluate.evaluate_cells({"base": pol}, "frozenlake", cells, 3, sampling, 0, rec)
    rows = rec.read()
    assert len(rows) == 12
    cut = [
        r for r in rows if not (r["task_id"] == tasks[3].task_id and r["sample"] == 2)
    ]  # a kill mid-append
    store.Records.rewrite(rec.path, cut)
    calls = CountingPolicy.calls
    again = evaluate.evaluate_cells(
        {"base": pol}, "frozenlake", cells, 3, sampling, 0, store.Records(rec.path)
    )
    after = store.Records(rec.path).read()
    assert len(after) == 12 and sorted(map(str, after)) == sorted(map(str, rows))
    first = {r["task_id"] for r in after} & {t.task_id for t in tasks[:2]}
    assert len(first) == 2 and CountingPolicy.calls > calls
    for key in cells:
        assert again[key].equals(whole[key])
    calls = CountingPolicy.calls  # and now every cell is complete: nothing runs
    evaluate.evaluate_cells({"base": pol}, "frozenlake", cells, 3, sampling, 0, store.Records(rec.path))
    assert CountingPolicy.calls == calls


def test_budget_and_gain_tables_pair_models_on_tasks():
    import pandas as pd

    rows = []
    for model, wins in (("a", [1, 1, 0, 0]), ("b", [0, 1, 0, 0])):
        for i, w in enumerate(wins):
            rows.append(
                {"model": model, "task_id": f"t{i}", "budget": 4, "fraction": 0.5, "success": bool(w)}
            )
    df = pd.DataFrame(rows)
    table = evaluate.budget_table(df, n_boot=200)
    assert table.set_index("model").loc["a", "success"] == 0.5
    gain = evaluate.gain_table(df, "a", "b", n_boot=200)
    assert gain["gain_points"].iloc[0] == pytest.approx(25.0)
    assert gain["low"].iloc[0] <= 25.0 <= gain["high"].iloc[0]


def test_per_state_numbers_are_computed_once_and_read_back_exactly(tmp_path):
    """`recorded_per_state`: the first call computes and records, the next reads the record back bit for bit
    without computing (the agent is never loaded: `opened_on_demand`); another agent name, recipe or state pool
    computes anew. The Run All test relies on this for notebooks 04 and 05."""
    from helpers.agents import opened_on_demand
    from helpers.probing import ProbeState

    states = [
        ProbeState({"task_id": f"t{i}"}, "frozenlake", 4, i, ["1"] * i, [1, 2], "base") for i in range(3)
    ]
    values = np.array([[0.1, 1 / 3], [np.nan, 0.0], [2.0 / 7, 1.0]])
    loads: list[str] = []

    class Counted(Agent):
        def load(self):
            loads.append(self.name)
            return HFPolicy.__new__(HFPolicy)  # never used: compute below does not sample

    cfg = config.load("smoke")
    agent = Counted("base", tmp_path / "models" / "base", cfg)
    with store.results_at(tmp_path):

        def call(agent=agent, recipe=(4, "s"), pool=states):
            calls = []
            with opened_on_demand(agent) as policy:
                got = evaluate.recorded_per_state(
                    "smoke",
                    "quality-x",
                    agent,
                    pool,
                    list(recipe),
                    lambda: (calls.append(policy()), values)[1],
                )
            return got, len(calls)

        first, n1 = call()
        again, n2 = call()
        assert (n1, n2) == (1, 0) and loads == ["base"]  # loaded once, for the computation only
        np.testing.assert_array_equal(first, values)
        np.testing.assert_array_equal(again, values)  # NaN where it was, every double exact
        assert call(recipe=(5, "s"))[1] == 1
        assert call(pool=states[:2])[1] == 1
        assert (
            call(agent=Counted("sharp", agent.path, cfg))[1] == 1
        )  # the name seeds the stream: its own record
        assert len(list((tmp_path / "smoke" / "probes").glob("quality-x-*.json"))) == 4


def test_a_cell_drawn_on_another_stream_is_not_reused_where_the_seed_is_required(base_path, tmp_path):
    """Issue 27: each RL seed's group has its own evaluation stream; a cell recorded with another seed (or by an older
    kit, without one) is rolled out again under `require_seed`, never read as if it were this stream's."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=2, **settings(cfg))
    pol = CountingPolicy.from_pretrained(base_path, name="base")
    rec = store.Records(tmp_path / "grid.jsonl")
    sampling = Sampling(1.0, 1.0, 6)
    first = evaluate.evaluate_grid(
        {"base": pol}, "frozenlake", tasks, [2], 2, sampling, 0, rec, require_seed=True
    )
    assert set(first["seed"]) == {0}
    calls = CountingPolicy.calls
    evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2], 2, sampling, 0, rec, require_seed=True)
    assert CountingPolicy.calls == calls  # the same stream: read back
    other = evaluate.evaluate_grid(
        {"base": pol}, "frozenlake", tasks, [2], 2, sampling, 7, rec, require_seed=True
    )
    assert CountingPolicy.calls > calls and set(other["seed"]) == {7} and len(rec) == 4
    legacy = [{k: v for k, v in r.items() if k != "seed"} for r in rec.read()]
    rec = store.Records.rewrite(rec.path, legacy)
    calls = CountingPolicy.calls
    evaluate.evaluate_grid(
        {"base": pol}, "frozenlake", tasks, [2], 2, sampling, 7, rec
    )  # without: legacy is read
    assert CountingPolicy.calls == calls
    evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2], 2, sampling, 7, rec, require_seed=True)
    assert CountingPolicy.calls > calls


def test_models_in_worker_processes_write_the_records_one_process_writes(base_path, tmp_path):
    """`eval.workers`: two models rolled out at once in worker processes give the same records (and full
    trajectories), in the same order, as one process; a loaded policy is never sent to a worker."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=3, **settings(cfg))
    sampling = Sampling(1.0, 1.0, 6)
    roster = {
        "base": Agent("base", base_path, cfg),
        "sharp": Agent("sharp", base_path, cfg, temperature=0.5),
        "greedy": Agent("greedy", base_path, cfg, temperature=0.0),
    }
    runs = {}
    for workers in (1, 2):
        rec, full = store.Records(tmp_path / f"r{workers}"), store.Records(tmp_path / f"t{workers}")
        df = evaluate.evaluate_grid(
            roster, "frozenlake", tasks, [2, 4], 2, sampling, 5, rec, full, workers=workers
        )
        runs[workers] = (
            df,
            rec.read(),
            [{k: v for k, v in t.items() if k != "logprobs"} for t in full.read()],
        )
    (df1, rec1, full1), (df2, rec2, full2) = runs[1], runs[2]
    assert df1.equals(df2) and rec1 == rec2 and full1 == full2
    assert [r["model"] for r in rec2[:: 3 * 2]] == ["base", "base", "sharp", "sharp", "greedy", "greedy"]
    # a policy loaded here is evaluated here, whatever `workers` says
    pol = HFPolicy.from_pretrained(base_path, name="base")
    mixed = evaluate.evaluate_grid(
        {"base": pol, "sharp": roster["sharp"]},
        "frozenlake",
        tasks,
        [2],
        2,
        sampling,
        5,
        store.Records(tmp_path / "m"),
        workers=2,
    )
    same = df1[(df1["budget"] == 2) & df1["model"].isin(["base", "sharp"])].reset_index(drop=True)
    assert mixed.equals(same)


def test_probe_plays_in_worker_processes_record_what_one_process_records(base_path, tmp_path):
    """`recorded_plays` (the probes of notebooks 02, 04 and 05): agents computed two at a time in worker processes
    write byte for byte the probe files one process writes, and a rerun loads no model."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=3, **settings(cfg))
    sampling = Sampling(1.0, 1.0, 6, seed=3)
    with opened(Agent("base", base_path, cfg)) as pol:
        trajs = rollout(pol, "frozenlake", tasks, 4, 2, sampling, seed=1)
    states = probing.sample_states(
        trajs, {t.task_id: t for t in tasks}, 4, np.random.default_rng(0), "base", at_most=True
    )
    roster = {
        "base": Agent("base", base_path, cfg),
        "sharp": Agent("sharp", base_path, cfg, temperature=0.5),
        "greedy": Agent("greedy", base_path, cfg, temperature=0.0),
    }
    plays = {
        name: [
            evaluate.Play(
                (name, "q"), f"quality-{name}", states, [2, "q"], probing.state_quality, (states, 2, sampling)
            ),
            evaluate.Play(
                (name, "c"),
                f"cont-{name}",
                states,
                [2, "c"],
                probing.continuation_success,
                (states, 2, sampling, 4),
            ),
        ]
        for name in roster
    }
    files = {}
    for workers in (1, 2):
        with store.results_at(tmp_path / f"w{workers}"):
            values = evaluate.recorded_plays("smoke", roster, plays, workers=workers)
            folder = store.profile_dir("smoke") / "probes"
            files[workers] = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
            assert list(values) == [(n, k) for n in roster for k in ("q", "c")]
    # a rerun reads every number back: no model is loaded
    with store.results_at(tmp_path / "w2"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(Agent, "load", lambda self: pytest.fail(f"{self.name} was loaded again"))
        again = evaluate.recorded_plays("smoke", roster, plays, workers=2)
    assert all(np.array_equal(again[k], values[k]) for k in values)
    assert len(files[1]) == 6 and files[1] == files[2]


def test_cells_copied_from_another_evaluation_are_read_back_without_a_rollout(base_path, tmp_path):
    """Issue 51: notebook 03 reads the cells notebook 02 evaluated (`copy_cells`): the source's records of the wanted
    tasks, and a cell only where the source holds it whole. The grid then reads the copies instead of rolling them
    out, and drops what the target held of those cells on another stream (an earlier layout's draws); a copy cut
    short is dropped and copied again."""
    cfg = config.load("smoke")
    tasks = load_tasks("frozenlake", "test", n=4, **settings(cfg))
    pol = CountingPolicy.from_pretrained(base_path, name="base")
    sampling = Sampling(1.0, 1.0, 6)
    src = store.Records(tmp_path / "a" / "eval.jsonl")
    evaluate.evaluate_grid({"base": pol}, "frozenlake", tasks, [2, 4], 2, sampling, 5, src, require_seed=True)
    rows = src.read()
    cut = [r for r in rows if not (r["budget"] == 4 and r["task_id"] == tasks[3].task_id)]
    src = store.Records.rewrite(src.path, cut)  # the source's budget-4 cell is incomplete
    dst = store.Records(tmp_path / "b" / "sweep.jsonl")
    evaluate.evaluate_grid(
        {"base": pol}, "frozenlake", tasks[:2], [2], 2, sampling, 9, dst, require_seed=True
    )
    first = {t.task_id for t in tasks[:2]}
    want = [r for r in rows if r["budget"] == 2 and r["task_id"] in first]
    cells = {"two": (tasks, tasks[:2], 2), "four": (tasks, tasks[:2], 4)}

    assert evaluate.copy_cells({"base": pol}, {"base": 5}, cells, 2, src.path, dst) == {"base": ["four"]}
    calls = CountingPolicy.calls
    df = evaluate.evaluate_grid(
        {"base": pol}, "frozenlake", tasks[:2], [2], 2, sampling, 5, dst, require_seed=True
    )
    assert CountingPolicy.calls == calls  # read back, not rolled out
    assert sorted(map(str, store.Records(dst.path).read())) == sorted(
        map(str, want)
    )  # seed 9's draws are gone
    assert sorted(df["success"].tolist()) == sorted(r["success"] for r in want) and set(df["seed"]) == {5}

    store.Records.rewrite(dst.path, store.Records(dst.path).read()[:-1])  # a copy cut short
    assert evaluate.copy_cells({"base": pol}, {"base": 5}, cells, 2, src.path, dst) == {"base": ["four"]}
    assert sorted(map(str, store.Records(dst.path).read())) == sorted(map(str, want))
