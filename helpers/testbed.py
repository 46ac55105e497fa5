"""Notebook 00's analysis: the series' tasks, the cpu tier's FrozenLake testbed (maps, what the agent sees, the DP
oracle, what a budget is worth, the demonstrator and the base), and on another environment one reference episode
and one episode of the base.

The testbed sections are FrozenLake's: off FrozenLake each of their functions returns None (or a line that says
the section is skipped), and `series` returns None on FrozenLake, so the notebook reads straight on every series.
`summary` is notebook 00's metrics.json and `findings` what the notebook says about it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers import base_model, budget, evaluate, fmt, headroom, plots, store
from helpers.agents import Agent, opened
from helpers.config import Config
from helpers.envs import (
    Task,
    bfcl,
    code,
    doorway,
    format_transcript,
    load_tasks,
    make,
    play,
    settings,
    step_oracle,
)
from helpers.envs import frozenlake as fl
from helpers.policy import Sampling
from helpers.rollout import ChatFormat, LastTurnContext, rollout

# the metrics.json name of each testbed column, at the evaluation's budget fractions
_AT_FRACTIONS = {
    "upper_bound": "upper_bound",
    "greedy_habit_success": "greedy_habit",
    "blind_t_max_success": "blind_t_max",
    "blind_mix_success": "blind_mix",
    "noise_points": "noise_points",
    "habit_points": "habit_points",
    "budget_awareness_points": "budget_awareness_points",
    "budget_awareness_vs_mix_points": "budget_awareness_vs_mix_points",
    "solvable_maps": "solvable_maps",
    "demonstrator_success": "demonstrator",
    "base_success": "base",
    "base_success_last_turn_context": "base_last_turn",
    "base_over_demonstrator": "base_over_demonstrator",
}


def is_testbed(cfg: Config) -> bool:
    """Whether this series runs on FrozenLake, the cpu tier's testbed (the other series skip its sections)."""
    return cfg.env.name == "frozenlake"


def tasks(cfg: Config) -> tuple[list[Task], list[Task]]:
    """The series' training and test tasks (all of them)."""
    return tuple(
        load_tasks(cfg.env.name, split, seed=cfg.seed, **settings(cfg)) for split in ("train", "test")
    )


def describe(cfg: Config, train: list[Task], test: list[Task]) -> str:
    """The tasks, their T_max, the step oracle and, on FrozenLake, the maps' settings."""
    t_maxes = sorted({t.t_max for t in test})
    oracle = step_oracle(cfg.env.name)
    lines = [
        f"{cfg.env.name}: {len(train)} training and {len(test)} test tasks, T_max "
        + (str(t_maxes[0]) if len(t_maxes) == 1 else f"{t_maxes[0]}-{t_maxes[-1]} (each task its own)"),
        f"step oracle: {'yes' if oracle['step_oracle'] else 'none'} ({oracle['oracle_note']})",
    ]
    if is_testbed(cfg):
        c = cfg.env.frozenlake
        lines.append(
            f"maps of size {c.size}x{c.size}, {c.hole_p:.0%} holes, slippery={c.is_slippery} "
            f"(success_rate {c.success_rate:g}), T_max = {c.t_max}"
        )
        # issue 26's selection (frozenlake.budget_gaps); on in the cpu profile
        if c.select_min_gap > 0:
            lines.append(
                f"maps kept only if their budget-awareness gap averages at least {c.select_min_gap:g} points "
                "over 25 / 50 / 75 % of T_max (env.frozenlake.select_min_gap), in both splits"
            )
    return "\n".join(lines)


def maps(cfg: Config, test: list[Task]) -> str:
    """The first four test maps (FrozenLake), or that this series skips the testbed sections."""
    if not is_testbed(cfg):
        return f"this series runs on {cfg.env.name}: the FrozenLake testbed sections are skipped (see its own section below)"
    return "\n\n".join(fl.render(t.payload["desc"], fl.start_state(t.payload["desc"])) for t in test[:4])


def map_stats(cfg: Config, train: list[Task], test: list[Task]) -> dict | None:
    """Shortest-path statistics of the training and test maps; None off FrozenLake."""
    return {"train": fl.map_stats(train), "test": fl.map_stats(test)} if is_testbed(cfg) else None


def map_table(cfg: Config, train: list[Task], test: list[Task]) -> pd.DataFrame | None:
    """`map_stats` as a table, one row per split; None off FrozenLake."""
    stats = map_stats(cfg, train, test)
    return None if stats is None else pd.DataFrame(stats).T


def optimal_episode(cfg: Config, test: list[Task]) -> str:
    """The budget statement and the budget-aware optimal player on the first test map; "" off FrozenLake."""
    if not is_testbed(cfg):
        return ""
    t_max = cfg.env.frozenlake.t_max
    transcript, result = play(
        fl.FrozenLakeEnv(), test[0], t_max, fl.scripted_player(0.0, cfg.seed), seed=cfg.seed
    )
    return (
        f"Budget statement: {budget.statement(t_max, t_max)}\n{format_transcript(transcript)}\n"
        f"success: {result.success}"
    )


def demonstrator_episode(cfg: Config, test: list[Task]) -> str:
    """The demonstrator (best stationary policy with a random move `sft.epsilon` of the time) on the first test
    map, without the system prompt; "" off FrozenLake."""
    if not is_testbed(cfg):
        return ""
    demonstrator = fl.habit_player(cfg.sft.epsilon, cfg.sft.habit_gamma, cfg.seed)
    transcript, result = play(
        fl.FrozenLakeEnv(), test[0], cfg.env.frozenlake.t_max, demonstrator, seed=cfg.seed
    )
    return f"{format_transcript(transcript[1:])}\nsuccess: {result.success}"


def step_quality(cfg: Config, test: list[Task], out: store.Run) -> pd.DataFrame | None:
    """The kit's step oracle at the start of the first test map with h turns left, every h (written as the table
    `step_quality_start_state`); None off FrozenLake."""
    if not is_testbed(cfg):
        return None
    env, rows = fl.FrozenLakeEnv(), {}
    for h in range(1, cfg.env.frozenlake.t_max + 1):
        env.reset(test[0], h, seed=cfg.seed)
        rows[h] = {a: env.step_quality(fl.format_action(i)) for i, a in enumerate(fl.ACTIONS)}
        rows[h] |= {"dead": env.is_dead(), "max Q*": float(env.q_values().max())}
    quality = pd.DataFrame.from_dict(rows, orient="index").rename_axis("turns left h")
    out.write_table("step_quality_start_state", quality.reset_index())
    return quality


def base(cfg: Config) -> tuple[str, pd.DataFrame | None]:
    """Which base the series starts from (built here where absent: SFT, cached by recipe hash), and the phases of its
    SFT (None for a hub model: nothing is built)."""
    path = base_model.path_of(cfg)  # builds the tiny base (SFT) where it is absent
    sft = base_model.summary(cfg)
    note = f"base: {path.name}" + (
        f" (the tiny SFT base, trained on FrozenLake only: on {cfg.env.name} it starts untrained)"
        if sft and not is_testbed(cfg)
        else ""
    )
    return note, pd.DataFrame(sft["phases"]).set_index("context") if sft else None


def _fractions(cfg: Config) -> dict[int, float]:
    """The evaluation's budgets on the testbed and the fraction of T_max each stands for."""
    return {budget.budget_at(f, cfg.env.frozenlake.t_max): f for f in cfg.eval.budget_fractions}


def curve(cfg: Config, test: list[Task], out: store.Run) -> pd.DataFrame | None:
    """Per budget T: the structural upper bound (the budget-aware optimum), the greedy habit, the best budget-blind
    policies (for T_max and for BudgetMix's mix), the demonstrator, the three headrooms between them in points
    (noise, habit, budget awareness: `headroom.table`), the maps solvable at all within T (all exact, by DP) and
    the base evaluated in its rollout context and in a one-turn context (written as the table and figure
    `testbed`); None off FrozenLake."""
    if not is_testbed(cfg):
        return None
    test = [t for t in test if doorway.family(t) == "random"]  # the doorway maps have a section of their own
    t_max = cfg.env.frozenlake.t_max
    Ts = list(range(1, t_max + 1))
    fractions = _fractions(cfg)
    with opened(Agent("base", base_model.path_of(cfg), cfg)) as policy:
        agents = {
            "base": policy,
            "base_last_turn": LastTurnContext(policy, ChatFormat(policy.tokenizer), name="base_last_turn"),
        }
        df = evaluate.evaluate_grid(
            agents,
            "frozenlake",
            test,
            sorted(fractions),
            cfg.eval.n_samples,
            Sampling.from_config(cfg.sampling),
            seed=cfg.seed + 1000,
            records=out.records("base_records"),
        )
    base_at = evaluate.budget_table(df, cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed).pivot(
        index="budget", columns="model"
    )
    h = headroom.table(test, Ts, t_max, cfg.sft.epsilon, cfg.sft.habit_gamma, cfg.seed)
    demonstrator = list(base_model.demonstrator_success(cfg, test, Ts).values())
    if not np.allclose(h["demonstrator"], demonstrator, atol=1e-12):  # one demonstrator, computed two ways
        raise AssertionError(
            "headroom.table's demonstrator is not the base's (base_model.demonstrator_success)"
        )
    c = pd.DataFrame(
        {
            "T": Ts,
            "fraction": [T / t_max for T in Ts],
            "upper_bound": list(fl.upper_bound_curve(test, Ts).values()),
        }
    )
    c = c.join(h[[*HEADROOM_COLUMNS]].reset_index(drop=True))
    for col, (stat, model) in {
        "base": ("success", "base"),
        "base_low": ("low", "base"),
        "base_high": ("high", "base"),
        "base_last_turn": ("success", "base_last_turn"),
    }.items():
        c[col] = c["T"].map(base_at[stat][model])
    c["base_over_demonstrator"] = c["base"] / c["demonstrator"]
    out.write_table("testbed", c)
    out.save_figure(plots.testbed(c, t_max), "testbed")
    return c


def doorway_section(cfg: Config, test: list[Task], out: store.Run) -> dict | None:
    """The doorway maps (`helpers.envs.doorway`): the success rates the DP weighed (`doorway.rate_table`) and the one
    chosen, one test map with its two moves, the exact success by budget of the optimum, the blind policy for the
    mix (rush), the blind policy for T_max (press) and the demonstrator, and each map's mix gap (written as the
    table `doorway_curve`); None where the run has no doorway maps."""
    doors = [t for t in test if doorway.family(t) == doorway.FAMILY]
    if not is_testbed(cfg) or not doors:
        return None
    f, t_max = cfg.env.frozenlake, cfg.env.frozenlake.t_max
    Ts = list(range(1, t_max + 1))
    curve = doorway.references(doors, Ts).T
    curve["demonstrator"] = list(base_model.demonstrator_success(cfg, doors, Ts).values())
    curve.index.name = "T"
    out.write_table("doorway_curve", curve.reset_index())
    gaps = np.array([fl.mix_gap(t) for t in doors])
    first = doors[0]
    mv = doorway.moves(first.payload["desc"])
    rate = float(first.payload["success_rate"])
    example = (
        f"{first.task_id} (ice {rate:g}; rush = {fl.ACTIONS[mv['rush']]}, press = {fl.ACTIONS[mv['press']]}):\n"
        + fl.render(first.payload["desc"], fl.start_state(first.payload["desc"]))
    )
    row = doorway.gaps(first.payload["desc"], rate, t_max)
    return {
        "rates": doorway.rate_table(t_max, f.size),
        "curve": curve,
        "example": example,
        "metrics": {
            "n_test_maps": len(doors),
            "share": f.doorway_share,
            "success_rate": rate,
            "min_gap": f.doorway_min_gap,
            "rush_up_to": row["rush_up_to"],
            "margin": row["margin"],
            "clock_gap": row["clock_gap"],
            "mix_gap_min": float(gaps.min()),
            "mix_gap_mean": float(gaps.mean()),
            "mix_gap_max": float(gaps.max()),
            **{name: {str(T): float(curve.loc[T, name]) for T in Ts} for name in curve.columns},
        },
    }


def mix_gap_per_map(test: list[Task]) -> dict:
    """The random test maps' mix gaps (`frozenlake.mix_gap`, points): mean, median, max, and how many reach 10."""
    gaps = np.array([fl.mix_gap(t) for t in test if doorway.family(t) == "random"])
    return {
        "mean": float(gaps.mean()),
        "median": float(np.median(gaps)),
        "max": float(gaps.max()),
        "n_at_least_10": int((gaps >= 10).sum()),
        "n_maps": len(gaps),
    }


# the columns of `headroom.table` the testbed keeps (the blind policy tuned to each budget itself stays there)
HEADROOM_COLUMNS = (
    "greedy_habit",
    "blind_t_max",
    "blind_mix",
    "demonstrator",
    "noise_points",
    "habit_points",
    "budget_awareness_points",
    "budget_awareness_vs_mix_points",
    "solvable_maps",
)


def _number(column: str, value) -> int | float:
    """A testbed table's value as metrics.json keeps it: counts as int, everything else as float."""
    return int(value) if column == "solvable_maps" else float(value)


def _testbed_metrics(cfg: Config, train: list[Task], test: list[Task], c: pd.DataFrame) -> dict:
    """The `frozenlake` section of notebook 00's metrics: the testbed at the evaluation's budget fractions."""
    fl_cfg, fractions = cfg.env.frozenlake, _fractions(cfg)
    at = c.set_index("T").loc[sorted(fractions)]
    key = {T: f"{fractions[T]:g}" for T in at.index}
    testbed = {
        "size": fl_cfg.size,
        "hole_p": fl_cfg.hole_p,
        "t_max": fl_cfg.t_max,
        "is_slippery": fl_cfg.is_slippery,
        "success_rate": fl_cfg.success_rate,
        "n_train_maps": len(train),
        "n_test_maps": len(test),
        "map_stats": map_stats(cfg, train, test),
        "budget_at_fraction": {key[T]: int(T) for T in at.index},
        **{
            name: {key[T]: _number(col, at.loc[T, col]) for T in at.index}
            for name, col in _AT_FRACTIONS.items()
        },
        "upper_bound_per_T": dict(zip(c["T"], c["upper_bound"], strict=True)),
        "base_ci": {key[T]: [float(at.loc[T, "base_low"]), float(at.loc[T, "base_high"])] for T in at.index},
        "base_sft": base_model.summary(cfg),
        "eval_n_samples": cfg.eval.n_samples,
    }
    testbed["min_base_over_demonstrator"] = min(testbed["base_over_demonstrator"].values())
    return testbed


# the environment's own answer to a task, reply by reply (None where the data has none)
REFERENCE = {
    "deepcoder": lambda t: [code.fence(t.payload["reference"])] if t.payload.get("reference") else None,
    "bfcl": bfcl.ground_truth_replies,
    "intercode_sql": lambda t: [f"```sql\n{t.payload['gold']}\n```", "submit"],
}


def series(cfg: Config, test: list[Task]) -> dict | None:
    """Off FrozenLake: the first test task played with the environment's reference answer (scored by the step
    oracle where one exists) and by the base at the task's T_max. Returns {"metrics": notebook 00's `series`
    section, "text": one line, "reference": a table of the reference's turns, "base": a table of the base's};
    None on FrozenLake, where the testbed is this section."""
    if is_testbed(cfg):
        return None
    env_name, oracle = cfg.env.name, step_oracle(cfg.env.name)
    task = test[0]
    reference = REFERENCE[env_name](task)
    rows, result = [], None
    if reference:
        env = make(env_name)
        env.reset(task, max(task.t_max, len(reference)), seed=cfg.seed)  # the whole reference fits the budget
        for reply in reference:
            if env.done:
                break
            quality = env.step_quality(reply) if oracle["step_oracle"] else None
            result = env.step(reply)
            rows.append(
                {"reply": reply[:70], "step_quality": quality, "reward": result.reward, "done": result.done}
            )
    with opened(Agent("base", base_model.path_of(cfg), cfg)) as policy:
        (episode,) = rollout(
            policy, env_name, [task], task.t_max, 1, Sampling.from_config(cfg.sampling), seed=cfg.seed
        )
    return {
        "metrics": {
            "task_id": task.task_id,
            "t_max": task.t_max,
            "reference_turns": len(rows),
            "reference_success": None if result is None else bool(result.success),
            "reference_step_quality": [r["step_quality"] for r in rows],
            "base_success": bool(episode.success),
            "base_turns": episode.n_turns,
            "base_invalid_turns": sum(t["invalid"] for t in episode.turns),
        },
        "text": f"{task.task_id}: the reference answer "
        f"{'succeeds' if result and result.success else 'does not succeed'} in {len(rows)} turns; the base "
        f"{'succeeds' if episode.success else 'fails'} in {episode.n_turns}",
        "reference": pd.DataFrame(rows or [{"reply": "(no reference answer in this data source)"}]),
        "base": pd.DataFrame(
            [
                {
                    "action": t["action"][:70],
                    "observation": t["observation"][:70],
                    "quality": t["quality"],
                    "invalid": t["invalid"],
                }
                for t in episode.turns
            ]
        ),
    }


def code_demo_turns(demo: dict) -> pd.DataFrame | None:
    """The DeepCoder-MT demo's turns as a table (tests passed, step quality, reward), or None where
    `code.demo_or_skip` skipped the episode (this machine cannot run the sandbox): no program ran, so nothing was
    scored, and the notebook shows no table rather than an empty one."""
    return pd.DataFrame(demo["turns"]) if demo["turns"] else None


def sql_demo_turns(demo: dict) -> pd.DataFrame:
    """The InterCode-SQL demo's turns as a table: its `step_quality` record is InterCode's reward of the query's
    result as if submitted now, recorded by rollouts but **not** a step oracle (`step_oracle("intercode_sql")`),
    so it is labelled by what it is, not as step quality."""
    df = pd.DataFrame(demo["turns"])[["action", "step_quality", "reward", "done", "success"]]
    df.insert(0, "turn", range(1, len(df) + 1))
    return df.rename(columns={"step_quality": "reward if submitted now"})


def summary(
    cfg: Config,
    train: list[Task],
    test: list[Task],
    testbed_curve: pd.DataFrame | None,
    series_episode: dict | None,
    demos: dict[str, dict],
    doors: dict | None = None,
) -> dict:
    """Notebook 00's metrics.json: the tasks, the step oracle, the testbed (FrozenLake) or the series' reference
    and base episodes (elsewhere), and the three environments' scripted demos (`demos`: env -> its `demo()`)."""
    t_maxes = sorted({t.t_max for t in test})
    m = {
        "env": cfg.env.name,
        "step_oracle": step_oracle(cfg.env.name),
        "tasks": {"train": len(train), "test": len(test), "t_max": [t_maxes[0], t_maxes[-1]]},
    }
    if testbed_curve is not None:
        random = [t for t in test if doorway.family(t) == "random"]
        m["frozenlake"] = _testbed_metrics(
            cfg, [t for t in train if doorway.family(t) == "random"], random, testbed_curve
        )
        m["frozenlake"]["mix_gap_per_map"] = mix_gap_per_map(random)
        m["frozenlake"]["doorway"] = None if doors is None else doors["metrics"]
    if series_episode is not None:
        m["series"] = series_episode["metrics"]
    m["deepcoder"] = {
        k: v for k, v in demos["deepcoder"].items() if k not in ("transcript", "turns", "notice")
    }
    m["bfcl"] = {k: v for k, v in demos["bfcl"].items() if k != "transcript"}
    m["intercode_sql"] = {k: v for k, v in demos["intercode_sql"].items() if k not in ("transcript", "turns")}
    return m


# ------------------------------------------------------------------------------------------------ findings


def oracle_line(m: dict) -> str:
    """The step oracle of a series' environment, as a findings line ("" where the metrics do not record it)."""
    o = m.get("step_oracle")
    if not o:
        return ""
    return (
        f"- **Step oracle on {m.get('env', o.get('env'))}:** "
        + ("yes: " if o["step_oracle"] else "none: ")
        + o["oracle_note"]
        + "."
    )


def _series_findings(m: dict) -> list[str]:
    """A series on another environment: its tasks, the reference episode, the base."""
    t, s = m["tasks"], m["series"]
    lo, hi = t["t_max"]
    ref = s["reference_success"]
    quality = s["reference_step_quality"]
    lines = [
        f"- **{m['env']}:** {t['train']} training and {t['test']} test tasks, T_max "
        + (f"{lo}." if lo == hi else f"{lo} to {hi} (each task its own)."),
        oracle_line(m),
        f"- **Reference answer** on {s['task_id']}: "
        + (
            "the data source has none."
            if ref is None
            else f"{'succeeds' if ref else 'does NOT succeed'} in {s['reference_turns']} turns"
            + (
                f"; step quality per turn {fmt.joined(quality)}."
                if any(q is not None for q in quality)
                else "; no step quality (no oracle)."
            )
        )
        + f" **Base** at T_max = {s['t_max']}: {'succeeds' if s['base_success'] else 'fails'} in "
        f"{s['base_turns']} turns, {s['base_invalid_turns']} of them invalid.",
    ]
    return [line for line in lines if line]


def findings(m: dict) -> list[str]:
    """What notebook 00 found: the testbed's setting, what a budget is worth, the demonstrator and the base (or, on
    another environment, its tasks and the two episodes)."""
    if "frozenlake" not in m:
        return _series_findings(m)
    fl_m = m["frozenlake"]
    fr = " / ".join(fmt.number(float(k), 0, scale=100) for k in fl_m["upper_bound"])
    aware, habit, noise = (fl_m[k] for k in ("budget_awareness_points", "habit_points", "noise_points"))
    at = list(aware.values())  # at 25 / 50 / 75 / 100 % of T_max
    enough = len(at) == 4 and min(at[:2]) >= 8 and at[2] >= 4
    lines = [
        f"- **Setting:** {fl_m['size']}x{fl_m['size']} maps, {fl_m['hole_p']:.0%} holes, slippery ice (success rate "
        f"{fl_m['success_rate']:g}), T_max = {fl_m['t_max']}; {fl_m['n_train_maps']} training and "
        f"{fl_m['n_test_maps']} test maps.",
        f"- **Structural upper bound** at {fr} % of T_max: {fmt.joined(fl_m['upper_bound'])}"
        + ("; no budget is solved outright." if max(fl_m["upper_bound"].values()) < 0.95 else "."),
        f"- **Maps solvable at all** within T (optimum above 0): {fmt.joined(fl_m['solvable_maps'], 0)} of "
        f"{fl_m['n_test_maps']}.",
        "- **Three headrooms** (points, exact by DP, at the same budgets): **noise** (greedy habit minus the "
        f"demonstrator) {fmt.joined(noise, 1, sign=True)}; **habit** (best budget-blind policy for T_max minus the "
        f"greedy habit) {fmt.joined(habit, 1, sign=True)}; **budget awareness** (optimum minus the best "
        f"budget-blind policy for T_max) {fmt.joined(aware, 1, sign=True)}, and against the best budget-blind "
        f"policy for BudgetMix's budget mix {fmt.joined(fl_m['budget_awareness_vs_mix_points'], 1, sign=True)}. "
        "The budget-awareness headroom is what an agent trained at T_max alone misses: "
        + (
            "at least 8 points at 25 % and 50 % of T_max and 4 at 75 %."
            if enough
            else "under 8 points at 25 % or 50 % of T_max, or under 4 at 75 %."
        )
        + " Only the last (against the blind policy for the mix) needs an agent that *reads* the budget: a blind "
        "agent trained on the mix reaches the rest by rushing."
        + (
            f" Averaged over the mix it is {fmt.number(mg['mean'], 1)} points per map (median "
            f"{fmt.number(mg['median'], 1)}, max {fmt.number(mg['max'], 1)}; {mg['n_at_least_10']} of {mg['n_maps']} "
            "maps reach 10): on these random maps reading the budget is worth little."
            if (mg := fl_m.get("mix_gap_per_map"))
            else ""
        ),
        f"- **Demonstrator** (exact): {fmt.joined(fl_m['demonstrator_success'])}; **base** in the context it plays "
        f"in (whole conversation): {fmt.joined(fl_m['base_success'])}, in a one-turn context: "
        f"{fmt.joined(fl_m['base_success_last_turn_context'])}.",
        f"- **Base over demonstrator:** {fmt.joined(fl_m['base_over_demonstrator'])} (lowest "
        f"{fmt.number(fl_m['min_base_over_demonstrator'], 2)}; the testbed asks for at least 0.80 at every budget: "
        f"{'met' if fl_m['min_base_over_demonstrator'] >= 0.8 else 'NOT met'}).",
    ]
    d = fl_m.get("doorway")
    if d:
        lines.append(
            f"- **Doorway maps** ({d['n_test_maps']} test maps, a share of {d['share']:g} of every split; S in a "
            f"corner between the goal and a hole): the DP chose ice of success rate {d['success_rate']:g} (the "
            f"optimum rushes with at most {d['rush_up_to']} turns left and presses into the wall otherwise; Q* margin "
            f"{fmt.number(d['margin'], 3)}). Reading the budget is worth {fmt.number(d['mix_gap_min'], 1)} to "
            f"{fmt.number(d['mix_gap_max'], 1)} points per map under BudgetMix's mix (against the best blind "
            f"policy for the mix, always rush; {fmt.number(d['clock_gap'], 1)} against one that counts its own "
            f"turns): at least {d['min_gap']:g} on every map. Exact success at T = 1..{len(d['optimum'])}: optimum "
            f"{fmt.joined(d['optimum'])}; rush {fmt.joined(d['rush (blind for the mix)'])}; press "
            f"{fmt.joined(d['press (blind for T_max)'])}; the demonstrator {fmt.joined(d['demonstrator'])}."
        )
    sft = fl_m.get("base_sft") or {}
    if sft:
        lines.append(
            f"- **SFT of the base:** {sft['steps']} steps in {fmt.number(sft['seconds'], 0)} s "
            f"({fmt.number(sft['tokens_per_s'], 0)} tokens/s), final loss {fmt.number(sft['final_loss'])} per "
            "assistant token."
        )
    return lines
