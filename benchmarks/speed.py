"""Issue 51's speed-ups, each against the code before it, in one process on the committed cpu base.

    .venv/bin/python benchmarks/speed.py [--repeats 3] [--only update probe ...] [--json benchmarks/speed.json]

Every case times the old path and the new one alternately (`--repeats` times each, one torch thread, as a training
worker or an evaluation worker runs), reports the median of each and their ratio (new / old: below 1 is faster),
and says whether the new path's records are bit-identical to the old one's or, where they are not, how far apart
they are:

* `update`: one GRPO update (`ppo.ppo_update`) on one RL step's 64 trajectories, the minibatch cut into
  micro-batches of 32 (before) or 8 (`train.micro_batch_size` in configs/cpu.yaml now), from the same weights and
  AdamW state; the gradient is the same sum in another order, so the weights after the step differ by rounding.
* `attention`: one evaluation rollout (100 test maps x 8 samples at T_max, as notebook 02 evaluates a model) with
  the per-turn pre-fill's attention through transformers' SDPA path, which copies the keys and values once per
  query group (before), against SDPA with `enable_gqa` (`attention.SDPA_GQA`); the same trajectories.
* `chunks`: the same evaluation rollout generated as one batch of 800 trajectories (before) against chunks of
  `policy.ROLLOUT_ROWS` one after the other (an HF policy's `rollout_rows` on the CPU); other random draws past the first chunk: both successes are printed.
* `probe`: the budget-swap probe's scoring of four replies at each opening prompt of 40 test maps (every budget):
  every prompt + reply as its own sequence (`HFPolicy._score_rows`, before) against each distinct prompt pre-filled
  once (`HFPolicy.score` now); log-probs equal to rounding.
* `monitor`: the training monitor's R_single on the probe pool (`probing.state_quality`, 128 states x 4 samples):
  one call padded to the longest prompt (before) against four calls by prompt length (`probing.LENGTH_BUCKETS`);
  other random draws, the same estimand: both means are printed.
* `tokenise`: one scripted player's evaluation as notebook 02's instrument section runs it (every budget), with the
  tokenizer called on every observation (`rollout.ENCODE_CACHE_SIZE = 0`, before) and with each distinct text
  tokenised once; bit-identical records.
* `instrument`: notebook 02's instrument section on scripted players at 20 test maps (`instrument.success_by_budget`),
  one worker (before) against `eval.workers` 2; bit-identical table. Needs two idle cores to show its gain.
* `plays`: a probe of four agents (the base at four temperatures: R_single at 60 states x G 16 and 4
  continuations from each, as notebooks 04 and 05 play them through `evaluate.recorded_plays`), one agent after
  another in this process with two torch threads, as the notebook's kernel ran them (before), against two agents at a
  time in worker processes of one thread (`eval.workers` 2); byte-identical probe files. Needs two idle cores.
* `sweep`: notebook 03's evaluation of one seed group (the base and the sharpened base: 50 test maps x 8 samples at
  every T of `sweep.t_fractions`), every cell drawn on the sweep's own stream (before) against the cells notebook 02
  evaluates too read from its records (`pass_kt.shared_cells`; 02's evaluation of the group is made first, untimed)
  and the others drawn; other draws at the shared T: both mean successes are printed.
* `maps`: the cpu profile's selected FrozenLake map set (its random maps: 750 training and 75 test maps), every
  candidate judged here one by one (`frozenlake_maps.DRAW_WORKERS = 1`, before) against blocks of candidates judged
  by two worker processes; the same maps. Needs two idle cores.

The numbers depend on the machine and its load; the ratios are what to compare (README, Speed).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (
    attention,
    base_model,
    budget,
    budget_reading,
    budgetmix,
    config,
    evaluate,
    instrument,
    models,
    pass_kt,
    probing,
    rollout,
    store,
)
from helpers.agents import Agent
from helpers.budget import task_budgets
from helpers.envs import frozenlake as fl
from helpers.envs import frozenlake_maps, load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.ppo import ppo_update
from helpers.rl_runs import probe_pool

CASES = (
    "update",
    "attention",
    "chunks",
    "probe",
    "monitor",
    "tokenise",
    "instrument",
    "plays",
    "maps",
    "sweep",
)


def alternate(old: Callable, new: Callable, repeats: int) -> tuple[float, float, object, object]:
    """Median seconds of `old()` and `new()` run alternately `repeats` times each, and the last result of each."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    out = {}
    for _ in range(repeats):
        for key, fn in (("old", old), ("new", new)):
            t0 = time.perf_counter()
            out[key] = fn()
            times[key].append(time.perf_counter() - t0)
    return statistics.median(times["old"]), statistics.median(times["new"]), out["old"], out["new"]


def update_setting(cfg, mode: str = "budgetmix") -> tuple:
    """The committed base as a trainable policy and as the frozen reference, and one RL step's trajectories of it
    (`train.tasks_per_step` training maps x `train.group_size`, budgets by `mode`)."""
    model, tok = models.load_trainable(base_model.path_of(cfg), device="cpu")
    ref, _ = models.load(base_model.path_of(cfg), device="cpu", dtype=cfg.model.dtype)
    tasks = load_tasks(cfg.env.name, "train", seed=cfg.seed, **settings(cfg))
    rng = np.random.default_rng([0, 1])
    idx = rng.choice(len(tasks), size=cfg.train.tasks_per_step, replace=False)
    step = [tasks[i] for i in idx]
    trajs = rollout.rollout(
        HFPolicy(model, tok),
        cfg.env.name,
        step,
        task_budgets(mode, [t.t_max for t in step], rng),
        cfg.train.group_size,
        Sampling.from_config(cfg.sampling),
        seed=1,
        step_quality=False,
    )
    return model, ref, trajs


def one_update(cfg, model, ref, trajs, **train) -> Callable:
    """One `ppo_update` from the base's weights and a fresh AdamW, with `train` knobs set; returns the weights."""
    weights = copy.deepcopy(model.state_dict())
    c = config.load(cfg.profile, train=train)

    def run():
        model.load_state_dict(weights)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        ppo_update(model, ref, opt, trajs, c, np.random.default_rng(0))
        return [p.detach().clone() for p in model.parameters()]

    return run


def case_update(cfg, repeats: int) -> dict:
    model, ref, trajs = update_setting(cfg)

    def update(micro: int):
        return one_update(cfg, model, ref, trajs, micro_batch_size=micro)

    old_s, new_s, a, b = alternate(update(32), update(8), repeats)
    delta = max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": delta == 0.0,
        "note": f"max |weight delta| {delta:.1e}",
    }


def evaluation_setting(cfg) -> tuple[HFPolicy, list, Sampling]:
    """The committed base, the profile's test maps and its sampling: what notebook 02 evaluates a model on."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    return HFPolicy.from_pretrained(base_model.path_of(cfg)), tasks, Sampling.from_config(cfg.sampling)


def evaluation_rollout(cfg, policy, tasks: list, sampling: Sampling) -> list:
    """One model's evaluation cell at T_max: `eval.n_samples` episodes per map, one seed for every case."""
    return rollout.rollout(
        policy,
        cfg.env.name,
        tasks,
        [t.t_max for t in tasks],
        cfg.eval.n_samples,
        sampling,
        seed=3,
        step_quality=False,
    )


def case_attention(cfg, repeats: int) -> dict:
    policy, tasks, sampling = evaluation_setting(cfg)

    def evaluate(gqa: bool):
        def run():
            attention.SDPA_GQA = gqa
            try:
                trajs = evaluation_rollout(cfg, policy, tasks, sampling)
            finally:
                attention.SDPA_GQA = True
                policy.reset_cache()
            return [t.token_ids for t in trajs]

        return run

    old_s, new_s, a, b = alternate(evaluate(False), evaluate(True), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": a == b,
        "note": f"{len(a)} trajectories (token ids compared)",
    }


def case_chunks(cfg, repeats: int) -> dict:
    policy, tasks, sampling = evaluation_setting(cfg)
    rows = policy.rollout_rows

    def evaluate(chunk: int | None):
        def run():
            policy.rollout_rows = chunk
            try:
                trajs = evaluation_rollout(cfg, policy, tasks, sampling)
            finally:
                policy.rollout_rows = rows
                policy.reset_cache()
            return float(np.mean([t.success for t in trajs]))

        return run

    n = len(tasks) * cfg.eval.n_samples
    old_s, new_s, a, b = alternate(evaluate(None), evaluate(rows), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": False,
        "note": f"{n} trajectories, chunks of {rows}; other draws: success {a:.3f} (one batch), {b:.3f} (chunks)",
    }


def case_probe(cfg, repeats: int) -> dict:
    policy = HFPolicy.from_pretrained(base_model.path_of(cfg))
    chat = rollout.ChatFormat(policy.tokenizer, policy.chat_kwargs)
    tasks = load_tasks(cfg.env.name, "test", n=40, seed=cfg.seed, **settings(cfg))
    prompts = budget_reading.opening_prompts(tasks, chat)
    replies = [chat.action_ids(fl.format_action(a)) for a in range(4)]
    p = [ids for ids in prompts.values() for _ in range(4)]
    c = replies * len(prompts)
    old_s, new_s, a, b = alternate(lambda: policy._score_rows(p, c), lambda: policy.score(p, c), repeats)
    delta = max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": delta == 0.0,
        "note": f"{len(prompts)} prompts x 4 replies; max |log-prob delta| {delta:.1e}",
    }


def case_monitor(cfg, repeats: int) -> dict:
    policy = HFPolicy.from_pretrained(base_model.path_of(cfg))
    probes = probe_pool(cfg, policy)
    sampling = Sampling.from_config(cfg.sampling).replace(seed=31)
    k = cfg.train.probe_samples

    def quality(buckets: int):
        def run():
            q = probing.state_quality(policy, probes, k, sampling, buckets=buckets)
            policy.reset_cache()
            return float(np.nanmean(q))

        return run

    old_s, new_s, a, b = alternate(quality(1), quality(probing.LENGTH_BUCKETS), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": False,
        "note": f"{len(probes)} states x {k}; other draws: mean quality {a:.3f} (one call), {b:.3f} "
        f"({probing.LENGTH_BUCKETS} buckets)",
    }


def case_tokenise(cfg, repeats: int) -> dict:
    tok = instrument.tokenizer(cfg)
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))

    cells = budget.fraction_cells(tasks, cfg.eval.budget_fractions)
    sampling = Sampling.from_config(cfg.sampling)
    size = rollout.ENCODE_CACHE_SIZE

    def evaluate(memory: int):
        def run():
            rollout.ENCODE_CACHE_SIZE = memory
            rollout._encoded.clear()  # every run starts cold
            try:
                return instrument._player_records(cfg, tok, "demonstrator", 0, cells, sampling)
            finally:
                rollout.ENCODE_CACHE_SIZE = size

        return run

    old_s, new_s, a, b = alternate(evaluate(0), evaluate(size), repeats)
    return {"old_s": old_s, "new_s": new_s, "identical": a == b, "note": f"{len(a)} trajectories"}


def case_instrument(cfg, repeats: int) -> dict:
    tok = instrument.tokenizer(cfg)
    one = config.load(cfg.profile, eval={"n_tasks": 20, "workers": 1})
    two = config.load(cfg.profile, eval={"n_tasks": 20, "workers": 2})
    old_s, new_s, a, b = alternate(
        lambda: instrument.success_by_budget(one, tok),
        lambda: instrument.success_by_budget(two, tok),
        repeats,
    )
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": bool(a.equals(b)),
        "note": "20 test maps, 1 vs 2 workers",
    }


def case_plays(cfg, repeats: int) -> dict:
    policy, tasks, sampling = evaluation_setting(cfg)
    with policy:
        trajs = rollout.rollout(
            policy, cfg.env.name, tasks[:40], cfg.env.frozenlake.t_max, 2, sampling, seed=1
        )
    states = probing.sample_states(
        trajs, {t.task_id: t for t in tasks}, 60, np.random.default_rng(0), "base", at_most=True
    )
    roster = {
        f"base@{t:g}": Agent(f"base@{t:g}", base_model.path_of(cfg), cfg, temperature=t)
        for t in (1.0, 0.7, 0.5, 0.3)
    }
    seeded = sampling.replace(seed=7)
    plays = {
        name: [
            evaluate.Play(
                (name, "q"), "quality", states, [16], probing.state_quality, (states, 16, seeded, 4)
            ),
            evaluate.Play(
                (name, "c"), "cont", states, [4], probing.continuation_success, (states, 4, seeded, 5)
            ),
        ]
        for name in roster
    }

    def play(workers: int, threads: int):
        def run():
            torch.set_num_threads(threads)
            with tempfile.TemporaryDirectory() as root, store.results_at(Path(root)):
                evaluate.recorded_plays(cfg.profile, roster, plays, workers)
                folder = store.profile_dir(cfg.profile) / "probes"
                files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
            torch.set_num_threads(1)
            return files

        return run

    old_s, new_s, a, b = alternate(play(1, 2), play(2, 1), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": a == b,
        "note": f"{len(a)} probe files, 4 agents x {len(states)} states; one process of 2 threads vs 2 workers",
    }


def case_maps(cfg, repeats: int) -> dict:
    f = cfg.env.frozenlake
    select = (f.is_slippery, f.success_rate, f.t_max, f.select_min_gap, f.select_min_mix_gap)
    # the random maps only: the doorway share of each split is drawn by `helpers.envs.doorway`
    n_train, n_test = (n - round(f.doorway_share * n) for n in (f.n_train, f.n_test))

    def draw(workers: int):
        def run():
            kept, frozenlake_maps.DRAW_WORKERS = frozenlake_maps.DRAW_WORKERS, workers
            try:
                return frozenlake_maps._draw_sets(f.size, f.hole_p, n_train, n_test, f.map_seed, select)
            finally:
                frozenlake_maps.DRAW_WORKERS = kept

        return run

    old_s, new_s, a, b = alternate(draw(1), draw(2), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": a == b,
        "note": f"{n_train} training and {n_test} test maps of the cpu rule, judged here vs by 2 workers",
    }


class _Folder:
    """Stands in for notebook 03's `store.Run`: `pass_kt.evaluate` only asks it for its record files."""

    def __init__(self, folder: Path):
        self.folder = folder

    def records(self, name: str) -> store.Records:
        return store.Records(self.folder / f"{name}.jsonl")


def case_sweep(cfg, repeats: int) -> dict:
    cfg = config.load(cfg.profile, eval={"workers": 1})  # one process, as every case
    path = base_model.path_of(cfg)
    group = {"base-s0": Agent("base", path, cfg), "sharp-s0": Agent("base", path, cfg, temperature=0.7)}
    tasks = load_tasks(cfg.env.name, "test", n=cfg.sweep.n_tasks, seed=cfg.seed, **settings(cfg))
    cells = budget.fraction_cells(tasks, cfg.sweep.t_fractions)
    by_T = {b: {b: ts} for (_, b), ts in cells.items()}
    sw = pass_kt.Sweep(
        cfg.env.name, tasks, cells, by_T, group, {"base": ["base-s0"], "sharp": ["sharp-s0"]}, {0: group}
    )
    shared = pass_kt.shared_cells(cfg, sw)
    sampling = Sampling.from_config(cfg.sampling)
    with tempfile.TemporaryDirectory() as root, store.results_at(Path(root)):
        _, theirs = budgetmix.eval_cells(cfg)
        evaluate.evaluate_cells(  # notebook 02's evaluation of the group (untimed)
            group,
            cfg.env.name,
            {(f, b): (ts, b) for (f, b), ts in theirs.items()},
            cfg.eval.n_samples,
            sampling,
            seed=budgetmix.eval_stream(cfg, 0),
            records=store.Records(
                store.profile_dir(cfg.results_name) / budgetmix.NAME / "eval_records.jsonl"
            ),
            require_seed=True,
        )
        runs = iter(range(2 * repeats))

        def sweep(borrow: bool):
            def run():
                kept = pass_kt.shared_cells
                if not borrow:
                    pass_kt.shared_cells = lambda cfg, sw: {}
                try:
                    df = pass_kt.evaluate(cfg, sw, _Folder(Path(root) / f"03-{next(runs)}"))
                finally:
                    pass_kt.shared_cells = kept
                at = df["budget"].isin([b for _, b in shared])
                return float(df[at]["success"].mean()), len(df)

            return run

        old_s, new_s, a, b = alternate(sweep(False), sweep(True), repeats)
    return {
        "old_s": old_s,
        "new_s": new_s,
        "identical": False,
        "note": (
            f"{b[1]} records, T = {sorted(sw.Ts)}, {len(shared)} of them 02's; other draws there: success "
            f"{a[0]:.3f} (drawn), {b[0]:.3f} (02's)"
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=CASES, default=list(CASES))
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write the rows here (atomically; other cases' rows are kept)",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = config.load(args.profile)
    if not base_model.is_built(cfg):
        print(f"no built base for {args.profile}: run notebook 00 (or make reproduce) first", file=sys.stderr)
        return 1
    rows = {}
    for name in args.only:
        r = globals()[f"case_{name}"](cfg, args.repeats)
        r["ratio"] = r["new_s"] / r["old_s"]
        rows[name] = r
        same = "bit-identical" if r["identical"] else "not bit-identical"
        print(
            f"{name:11s} old {r['old_s']:7.2f} s  new {r['new_s']:7.2f} s  ratio {r['ratio']:.2f}  {same}; "
            f"{r['note']}",
            flush=True,
        )
    if args.json:
        # the cases run now replace their rows; the others are kept as measured before (each row dated)
        kept = json.loads(args.json.read_text())["cases"] if args.json.exists() else {}
        today = time.strftime("%Y-%m-%d")
        rows = {n: {**r, "repeats": args.repeats, "measured": today} for n, r in rows.items()}
        payload = {"profile": args.profile, "threads": 1, "cases": {**kept, **rows}}
        store.write_atomic(args.json, json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
