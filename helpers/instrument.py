"""Can this instrument see it? Notebooks 02's and 05's analyses on scripted players whose difference is known.

Before a notebook gives its verdict on RL, this module shows what its instrument can detect at the notebook's own
sizes: each analysis is run, through the notebook's own calls, on pairs of scripted FrozenLake players
(`helpers.scripted`, `Policy` objects, so nothing is trained or loaded) in the slots RL and its comparison fill:

* planted effects, whose true size follows exactly from the DP: the budget-aware optimum against the best
  budget-blind policy for T_max (what only budget awareness gains), and the optimum against the demonstrator (the
  base's teacher: its habit with random moves);
* a null: two copies of the demonstrator with different random streams (true difference 0).

Notebook 02 (`success_by_budget`): every player is evaluated as `budgetmix.evaluate` evaluates a model (the cfg's
`eval.n_tasks` test maps at `eval.budget_fractions` of T_max, `eval.n_samples` samples, one copy per RL seed of
`train.seeds`, every copy on the same draws of the ice), and the difference is `budgetmix.gain_table`'s
"budgetmix - grpo" row, with the interval its verdict reads (paired by seed: `t_low`, `t_high`), player a in BudgetMix's slot and player b in GRPO's (and the base's and the sharpened
base's). Notebook 05 (`continuation`): error pools are built as `recovery.error_pools` builds them (per RL seed,
candidates half from b's, half from that copy of a's probing trajectories, on the seed's own draws; errors injected
by the environment), and
`recovery.continuation` continues from them with a's copies as the RL seeds and b as the base (and the sharpened
base); the difference is its "rl - base". Its records go to a temporary results folder, never to the run's own.

The true effect of a case is the same estimand computed exactly: success within each budget by policy evaluation
(02), and success from each error state with its remaining turns (05), averaged like the estimate. `run` gives the
table and `metrics`; `findings` reads the metrics back as sentences.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from helpers import (
    base_model,
    budget,
    budgetmix,
    controls,
    models,
    parallel,
    recovery,
    scripted,
    store,
)
from helpers import evaluate as evaluation
from helpers.config import Config
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling
from helpers.rollout import ChatFormat, rollout

# the players: name -> (scripted kind, with the demonstrator's random moves)
PLAYERS = {
    "optimum": ("optimum", False),
    "best blind for T_max": ("blind_t_max", False),
    "demonstrator": ("habit", True),
    "demonstrator (2nd copy)": ("habit", True),
}
# the cases: name -> (player a, player b), a minus b
CASES = {
    "planted: optimum - best blind for T_max": ("optimum", "best blind for T_max"),
    "planted: optimum - demonstrator": ("optimum", "demonstrator"),
    "null: demonstrator - demonstrator": ("demonstrator (2nd copy)", "demonstrator"),
}
COLUMNS = ["analysis", "case", "budget", "true_points", "estimate_points", "low", "high", "detected", "wrong"]


def tokenizer(cfg: Config):
    """The base's tokenizer where the base is built, else one trained on a few demonstrations (seconds)."""
    # the kit's own base is read where it is built, never built here (that is minutes of SFT)
    if base_model.is_built(cfg):
        path = store.models_dir(cfg.profile) / base_model.folder_name(cfg)
        built = (path / "sft_summary.json").exists()
    else:
        path = base_model.path_of(cfg)
        built = path.exists()
    if built:
        return models.load_tokenizer(path)
    return models.train_tokenizer(
        base_model.tokenizer_corpus(base_model.demonstrations(cfg, 40, seed=cfg.seed))
    )


def _stream(player: str, copy: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{player}|{copy}".encode()).digest()[:4], "little")


def player(cfg: Config, tok, name: str, copy: int = 0, label: str | None = None) -> scripted.ScriptedPolicy:
    """Copy `copy` of player `name` (`PLAYERS`): its own random stream and name (which seeds its stream too)."""
    kind, noisy = PLAYERS[name]
    return scripted.ScriptedPolicy.from_config(
        cfg,
        kind,
        tok,
        noisy,
        seed=_stream(name, copy),
        name=label or f"{name}#{copy}",
        chat_kwargs=models.chat_kwargs(tok),
    )


def success_from(task: Task, pi: np.ndarray, state: int, remaining: int) -> float:
    """Exact probability that policy `pi` ([n, 4], or [>= remaining + 1, n, 4] by turns left) reaches the goal from
    square `state` within `remaining` turns (the policy evaluation of `frozenlake.policy_success`)."""
    R, C = fl._tables(*fl.dynamics(task))
    V = np.zeros(R.shape[0])
    for h in range(1, int(remaining) + 1):
        p = pi if pi.ndim == 2 else pi[h]
        V = (p * (R + C @ V)).sum(axis=1)
    return float(V[int(state)])


def _row(analysis, case, budget_label, true, est, low, high) -> dict:
    detected = bool(low > 0 or high < 0)
    return {
        "analysis": analysis,
        "case": case,
        "budget": budget_label,
        "true_points": true,
        "estimate_points": est,
        "low": low,
        "high": high,
        "detected": detected,
        "wrong": detected if true == 0 else bool(detected and np.sign(est) != np.sign(true)),
    }


# ---------------------------------------------------------------------------------------- notebook 02


def _player_records(cfg: Config, tok, name: str, copy: int, cells: dict, sampling: Sampling) -> list[dict]:
    """Copy `copy` of player `name` evaluated as `budgetmix.evaluate` evaluates a model: every cell of `cells`,
    on RL seed `copy`'s stream (as budgetmix.evaluate draws seed k's group); one record per trajectory."""
    policy = player(cfg, tok, name, copy)
    records = []
    for (f, b), ts in cells.items():
        trajs = rollout(
            policy,
            cfg.env.name,
            ts,
            b,
            cfg.eval.n_samples,
            sampling,
            seed=controls.stream(cfg.seed + 1000, copy),
            step_quality=False,
        )
        # the cell's fraction, as budgetmix.evaluate records it (b / T_max differs where b was rounded)
        records += [{**evaluation.trajectory_record(t), "fraction": f} for t in trajs]
    return records


def success_by_budget(cfg: Config, tok, cases: dict = CASES) -> pd.DataFrame:
    """Notebook 02's success-by-budget comparison (`budgetmix.gain_table`) of every case, one row per case and
    fraction of T_max (points; `true_points` by DP on the same maps)."""
    tasks = load_tasks(cfg.env.name, "test", n=cfg.eval.n_tasks, seed=cfg.seed, **settings(cfg))
    cells = budget.fraction_cells(tasks, cfg.eval.budget_fractions)
    labels = budget.budget_label(cells)
    sampling = Sampling.from_config(cfg.sampling)
    copies = range(len(cfg.train.seeds))
    used = sorted({p for c in cases.values() for p in c})
    names = {p: [f"{p}#{k}" for k in copies] for p in used}
    # every copy of every player is one job, on its own random stream: the records are the same, in the same
    # order, whatever the number of workers (`cfg.eval.workers` at a time, as models are evaluated)
    jobs = [(cfg, tok, p, k, cells, sampling) for p in used for k in copies]
    parts = parallel.ordered_map(_player_records, jobs, cfg.eval.workers)
    df = pd.DataFrame([r for part in parts for r in part])
    truth = {}
    for p in used:
        ref = player(cfg, tok, p)
        truth[p] = {
            f: float(np.mean([fl.policy_success(t, ref.exact_policy(t, b), b) for t in ts]))
            for (f, b), ts in cells.items()
        }
    rows = []
    for case, (a, b) in cases.items():
        keep = df["model"].isin(names[a] + names[b])
        methods = {"base": names[b][:1], "sharp": names[b][:1], "grpo": names[b], "budgetmix": names[a]}
        ev = budgetmix.Evaluation(tasks, cells, methods, df[keep].reset_index(drop=True))
        gains = budgetmix.gain_table(ev, cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed)
        for r in gains[gains["comparison"] == "budgetmix - grpo"].itertuples():
            true = (
                0.0
                if a.startswith(b) or b.startswith(a)
                else 100 * (truth[a][r.fraction] - truth[b][r.fraction])
            )
            rows.append(
                _row(
                    "02 success by budget",
                    case,
                    f"{100 * r.fraction:g} % ({labels[r.fraction]})",
                    round(true, 2),
                    r.gain_points,
                    r.t_low,
                    r.t_high,
                )
            )
    return pd.DataFrame(rows, columns=COLUMNS)


# ---------------------------------------------------------------------------------------- notebook 05


def error_pools(cfg: Config, chat: ChatFormat, base, rl: dict, tasks: list) -> dict[str, list]:
    """Every RL copy's error states, built as `recovery.error_pools` builds them (`recovery.seed_error_pool`)
    from `matched.recorded`'s probing trajectories (two per test task at T_max) on each RL seed's own draws
    (`controls.stream`): the seed's base trajectories and its RL copy's."""
    sampling = Sampling.from_config(cfg.sampling)

    def recorded(policy, k: int):
        return rollout(
            policy,
            cfg.env.name,
            tasks,
            [t.t_max for t in tasks],
            2,
            sampling,
            seed=controls.stream(cfg.seed + 4000, k),
        )

    out = {}
    for name, policy in rl.items():
        k = controls.rl_seed_of(name)
        base_trajs = recorded(base, k)  # this seed's own base trajectories
        out[name] = recovery.seed_error_pool(cfg, chat, base_trajs, recorded(policy, k), tasks, k)
    return out


def state_truth(states: list, pi_of) -> np.ndarray:
    """Per error state, the exact success of a policy (`pi_of(task, remaining)`) from there."""
    out = []
    for s in states:
        env = s.replay()
        task = Task.from_dict(s.task)
        out.append(success_from(task, pi_of(task, env.remaining), env.state, env.remaining))
    return np.array(out)


def continuation(cfg: Config, tok, cases: dict = CASES) -> pd.DataFrame:
    """Notebook 05's continuation success from the same error states (`recovery.continuation`, "rl - base") of
    every case: player a's copies in the RL seeds' slots, b as the base and the sharpened base; points, with the
    true difference at the same states by DP."""
    # each case is one job, on its players' own streams: the rows are the same whatever the number of workers
    jobs = [(cfg, tok, case, a, b) for case, (a, b) in cases.items()]
    rows = list(parallel.ordered_map(_continuation_row, jobs, cfg.eval.workers))
    return pd.DataFrame(rows, columns=COLUMNS)


def _continuation_row(cfg: Config, tok, case: str, a: str, b: str) -> dict:
    """`continuation`'s row of one case (what a worker process runs)."""
    tasks = load_tasks(cfg.env.name, "test", seed=cfg.seed, **settings(cfg))
    chat = ChatFormat(tok, models.chat_kwargs(tok))
    base = player(cfg, tok, b, 0)
    rl = {f"grpo-s{s}": player(cfg, tok, a, k) for k, s in enumerate(cfg.train.seeds)}
    errors = error_pools(cfg, chat, base, rl, tasks)
    sharp = player(cfg, tok, b, 1)
    agents = {}  # every seed's group, named as controls.by_seed names it (matched.roles)
    for name, policy in rl.items():
        k = controls.rl_seed_of(name)
        agents |= {
            f"base-s{k}": base,
            f"sharp-s{k}": sharp,
            name: policy,
            controls.sharp_name(name): policy,
        }
    with tempfile.TemporaryDirectory() as tmp, store.results_at(tmp):
        _, _, _, paired = recovery.continuation(cfg, agents, errors)
    v = paired["rl - base"]  # the verdict notebook 05 reads: paired by seed
    point, low, high = v["diff"], v["low"], v["high"]
    ref_a, ref_b = player(cfg, tok, a), player(cfg, tok, b)
    if PLAYERS[a] == PLAYERS[b]:
        true = 0.0
    else:
        true = float(
            np.mean(
                [
                    np.mean(state_truth(pool, ref_a.exact_policy) - state_truth(pool, ref_b.exact_policy))
                    for pool in errors.values()
                ]
            )
        )
    n = sum(len(e) for e in errors.values())
    return _row(
        "05 continuation",
        case,
        f"{n} error states",
        round(100 * true, 2),
        100 * point,
        100 * low,
        100 * high,
    )


# ---------------------------------------------------------------------------------------- the section


def run(cfg: Config, analyses: tuple[str, ...] = ("02", "05"), tok=None) -> tuple[pd.DataFrame, dict]:
    """The table of every case through each of `analyses` ("02": `success_by_budget`, "05": `continuation`) at
    the cfg's sizes, and its metrics (`metrics`)."""
    if cfg.env.name != "frozenlake":
        raise ValueError(f"instrument: the scripted players are FrozenLake's, not {cfg.env.name}'s")
    tok = tok or tokenizer(cfg)
    t0 = time.perf_counter()
    parts = []
    if "02" in analyses:
        parts.append(success_by_budget(cfg, tok))
    if "05" in analyses:
        parts.append(continuation(cfg, tok))
    table = pd.concat(parts, ignore_index=True)
    return table, metrics(cfg, table, time.perf_counter() - t0)


def metrics(cfg: Config, table: pd.DataFrame, seconds: float = float("nan")) -> dict:
    """The section's entry of metrics.json: every row of the table, and the sizes it ran at."""
    return {
        "rows": table.to_dict(orient="records"),
        "sizes": {
            "n_tasks": cfg.eval.n_tasks,
            "n_samples": cfg.eval.n_samples,
            "copies": len(cfg.train.seeds),
            "fractions": list(cfg.eval.budget_fractions),
            "n_error_states": cfg.probing.n_error_states,
            "n_continuations": cfg.probing.n_continuations,
        },
        "ci": cfg.eval.ci,
        "seconds": round(seconds, 1),
    }


def findings(m: dict) -> list[str]:
    """What the instrument showed, one sentence per analysis and case."""
    s = m["sizes"]
    rows = pd.DataFrame(m["rows"])
    lines = []
    sizes = {
        "02 success by budget": f"{s['n_tasks']} test maps x {s['n_samples']} samples x {s['copies']} copies per "
        "player (as each RL seed), every budget",
        "05 continuation": f"{s['n_error_states']} error states per copy x {s['copies']} copies x "
        f"{s['n_continuations']} continuations",
    }
    for analysis, g in rows.groupby("analysis", sort=False):
        lines.append(
            f"**{analysis}** on scripted players ({sizes.get(analysis, '')}); points, "
            f"{100 * m['ci']:.0f} % intervals:"
        )
        for case, c in g.groupby("case", sort=False):
            cells = "; ".join(
                f"{r.budget}: true {r.true_points:+.1f}, estimated {r.estimate_points:+.1f} "
                f"[{r.low:+.1f}, {r.high:+.1f}]"
                for r in c.itertuples()
            )
            k, n = int(c["detected"].sum()), len(c)
            if case.startswith("null"):
                verdict = (
                    "no interval excludes 0, as it should not"
                    if k == 0
                    else f"the interval excludes 0 at {k} of {n}: a false positive"
                )
            else:
                verdict = f"detected (interval excludes 0) at {k} of {n}"
                if k < n:
                    small = c.loc[~c["detected"], "true_points"].abs().max()
                    verdict += f"; missed where the true effect is at most {small:.1f} points"
            lines.append(f"- {case}: {cells}: {verdict}.")
        wrong = g[g["wrong"]]
        if len(wrong):
            lines.append(f"  {len(wrong)} interval(s) exclude 0 on the wrong side or for a null.")
    return lines


def recipe(cfg: Config, analysis: str) -> str:
    """What an analysis's table is a function of, as a sha256: the whole cfg, the source of every module of the kit
    (the players, the rollouts, the analyses and the maps all live there) and the versions of the libraries that
    draw or tokenise. Any change to one of them computes the table anew; nothing else can move it."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256(
        json.dumps([analysis, cfg.to_dict(), store.package_versions()], sort_keys=True).encode()
    )
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def section(cfg: Config, analysis: str, out: store.Run) -> tuple[pd.DataFrame | None, dict | None]:
    """A notebook's "can this instrument see it?" section: `run` for one analysis ("02" or "05"), its table written
    as `instrument`; (None, None) off FrozenLake, where the scripted players do not exist.

    The table is a deterministic function of `recipe` (no model is involved), so its metrics are kept in the run's
    folder with their recipe (`instrument_recipe.json`), and a rerun over a finished run (Run All on the committed
    artefacts) whose recipe is the same reads them back instead of playing about 50,000 episodes again (25 s)."""
    if cfg.env.name != "frozenlake":
        return None, None
    key, kept = recipe(cfg, analysis), out.dir / "instrument_recipe.json"
    m = _recorded(kept, key)
    if m is not None:
        print(f"instrument: this cfg and code's table is recorded ({kept.name}): read back, not played again")
        table = pd.DataFrame(m["rows"], columns=COLUMNS)
    else:
        table, m = run(cfg, (analysis,))
        payload = {"analysis": analysis, "recipe": key, "metrics": m}
        store.write_atomic(
            kept, json.dumps(payload, indent=2, sort_keys=True, default=lambda x: x.item()) + "\n"
        )
    out.write_table("instrument", table)
    return table, m


def _recorded(kept: Path, key: str) -> dict | None:
    """The metrics kept in `kept` if they were computed from recipe `key`, else None."""
    try:
        payload = json.loads(kept.read_text())
        return payload["metrics"] if payload["recipe"] == key else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
