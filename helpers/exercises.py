"""Exercises for lecturers: "change X, predict, run", two or three per notebook, as data.

Each `Exercise` names what to change, what to predict before running (and why it is a real question), what the
outcome tells, and a short self-contained snippet a student pastes into a new cell at the end of the notebook. A
snippet uses only the notebook's `profile` parameter (loading the profile itself, with its own overrides), calls
the kit's helpers, and prints a small table. Snippets never write into the results: they read the notebook's
tables and record files, or roll out and update models in memory. Their variable names differ from the notebook's
own, so pasting one leaves the notebook's variables as they were (tests/test_exercises.py checks both).

`section(notebook)` is the Markdown of a notebook's "Exercises" section, with each snippet's runtime as measured
by `benchmarks/exercises.py` (read from `benchmarks/exercises.json`; "not measured yet" where it has no entry for
the snippet's current code).
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from helpers.config import REPO_ROOT

TIMINGS = REPO_ROOT / "benchmarks" / "exercises.json"


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it belongs, what to change and predict, what to look for, and the code to run."""

    notebook: str  # the notebook's stem, e.g. "03_pass_at_kt_sweep"
    key: str  # e.g. "03a"
    title: str
    change: str  # what to change, one or two sentences
    predict: str  # what to predict before running, and why it is a real question
    look_for: str  # what the outcome tells (no numbers given away)
    code: str  # a snippet for a new cell at the end of the notebook; uses only `profile`

    @property
    def digest(self) -> str:
        """A hash of the code, so a runtime measured for other code is not shown for this one."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:12]


def _code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


# ------------------------------------------------------------------------------------- 00 the environments

_00A = _code("""
    import pandas as pd

    from helpers import budget, config
    from helpers.envs import frozenlake as fl
    from helpers.envs import load_tasks, settings

    conf = config.load(profile)
    budgets = [budget.budget_at(f, conf.env.frozenlake.t_max) for f in conf.eval.budget_fractions]
    value_x = {}
    for rate in (1.0, 0.9, 0.75, 0.5, 1 / 3):  # the probability that a move goes where intended
        icy = config.load(profile, env={"frozenlake": {"is_slippery": True, "success_rate": rate}})
        maps = load_tasks("frozenlake", "test", seed=icy.seed, **settings(icy, "frozenlake"))  # the same maps
        bound_x = fl.upper_bound_curve(maps, budgets)
        blind = fl.stationary_success_curve(maps, budgets, icy.sft.habit_gamma)
        value_x[f"success_rate {rate:.2f}"] = {f"T={T}": 100 * (bound_x[T] - blind[T]) for T in budgets}
    print("Value of knowing the budget (points): budget-aware optimum minus the best stationary policy")
    print(pd.DataFrame(value_x).T.round(1).to_string())
""")

_00B = _code("""
    import pandas as pd

    from helpers import config
    from helpers.envs import frozenlake as fl
    from helpers.envs import load_tasks, settings

    conf = config.load(profile)
    t_top = conf.env.frozenlake.t_max
    maps = load_tasks("frozenlake", "test", seed=conf.seed, **settings(conf, "frozenlake"))
    horizons = sorted({1, 2, t_top // 2, t_top, 2 * t_top, 3 * t_top, 4 * t_top} - {0})
    long_x = pd.DataFrame(
        {
            "upper_bound": fl.upper_bound_curve(maps, horizons),
            "stationary": fl.stationary_success_curve(maps, horizons, conf.sft.habit_gamma),
        }
    )
    long_x["value_of_budget_points"] = 100 * (long_x["upper_bound"] - long_x["stationary"])
    print(f"T_max of the profile: {t_top}")
    print(long_x.rename_axis("T").round(3).to_string())
""")

_00C = _code("""
    import numpy as np
    import pandas as pd

    from helpers import base_model, budget, config
    from helpers.envs import frozenlake as fl
    from helpers.envs import load_tasks, settings

    conf = config.load(profile)
    maps = load_tasks("frozenlake", "test", seed=conf.seed, **settings(conf, "frozenlake"))
    budgets = [budget.budget_at(f, conf.env.frozenlake.t_max) for f in conf.eval.budget_fractions]
    players = {}
    for eps in sorted({0.0, 0.1, conf.sft.epsilon, 0.5}):  # the share of uniformly random moves
        noisy = config.load(profile, sft={"epsilon": eps})
        players[f"eps {eps:g}: demonstrator (habit)"] = base_model.demonstrator_success(noisy, maps, budgets)
        players[f"eps {eps:g}: budget-aware optimum"] = {
            T: float(np.mean([fl.policy_success(m, fl.with_random_moves(fl.optimal_policy(m, T), eps), T)
                              for m in maps]))
            for T in budgets
        }
    print(f"Exact success on {len(maps)} test maps (the base imitates eps {conf.sft.epsilon:g}: demonstrator)")
    print(pd.DataFrame(players).T.rename(columns=lambda T: f"T={T}").round(3).to_string())
""")

# ------------------------------------------------------------------------------------- 01 GRPO training

_01A = _code("""
    import pandas as pd
    import torch

    from helpers import algos, base_model, config, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    g_max = 2 * conf.train.group_size
    seed0 = conf.train.seeds[0]
    maps = load_tasks(conf.env.name, "train", n=32, seed=conf.seed + 1, **settings(conf))
    wasted = {}
    models_x = {"base": base_model.path_of(conf), f"grpo-s{seed0}": train.trained_model(conf, "full", seed0)}
    for who, path in models_x.items():
        actor_x = HFPolicy.from_pretrained(path, device=conf.model.device, name=who)
        episodes = rollout(actor_x, conf.env.name, maps, [m.t_max for m in maps], g_max,
                           Sampling.from_config(conf.sampling), seed=conf.seed + 1, step_quality=False)
        for G in sorted({2, 4, conf.train.group_size, g_max}):
            group_x = [e for e in episodes if e.sample < G]  # the first G samples of every task
            rewards = torch.tensor([train.rl_reward(e) for e in group_x])
            adv = algos.grpo_advantages(rewards, [e.group for e in group_x])
            flat = pd.DataFrame({"group": [e.group for e in group_x], "zero": (adv.abs() < 1e-6).numpy()})
            wasted[(who, G)] = {
                "success": float(rewards.mean()),
                "groups with all A = 0": float(flat.groupby("group")["zero"].all().mean()),
            }
    print(f"{len(maps)} training tasks at the full budget; G trajectories per task")
    print(pd.DataFrame(wasted).T.rename_axis(["model", "G"]).round(3).to_string())
""")

_01B = _code("""
    import numpy as np
    import pandas as pd
    import torch

    from helpers import base_model, config, models, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    base_dir = base_model.path_of(conf)
    device = models.resolve_device(conf.model.device)
    maps = load_tasks(conf.env.name, "train", n=conf.train.tasks_per_step, seed=conf.seed + 2, **settings(conf))
    sampler = HFPolicy.from_pretrained(base_dir, device=device, name="base")
    batch = rollout(sampler, conf.env.name, maps, [m.t_max for m in maps], conf.train.group_size,
                    Sampling.from_config(conf.sampling), seed=conf.seed + 2, step_quality=False)
    n_batch = len(batch)
    updates = {}
    for epochs, minibatch in ((1, n_batch), (1, n_batch // 2), (2, n_batch)):
        recipe = config.load(profile, train={"ppo_epochs": epochs, "minibatch_size": minibatch})
        actor_x, _ = models.load_trainable(base_dir, device=device)  # a fresh copy of the base, in memory
        ref_x, _ = models.load(base_dir, device=device, dtype=conf.model.dtype)
        opt = torch.optim.AdamW(actor_x.parameters(), lr=recipe.train.lr, weight_decay=recipe.train.weight_decay)
        got = train.ppo_update(actor_x, ref_x, opt, batch, recipe, np.random.default_rng(0))  # one RL update
        updates[f"{epochs} epoch(s), minibatches of {minibatch}"] = {
            k: got[k] for k in ("clip_frac", "approx_kl", "kl", "grad_norm")
        }
    print(f"one batch of {n_batch} trajectories from the base, updated in memory (nothing is saved)")
    print(pd.DataFrame(updates).T.to_string())
""")

_01C = _code("""
    import numpy as np
    import pandas as pd
    import torch

    from helpers import base_model, config, likelihood, models, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    base_dir = base_model.path_of(conf)
    device = models.resolve_device(conf.model.device)
    half_step = max(1, conf.train.tasks_per_step // 2)  # half an RL step's tasks: 4 epochs are costly
    maps = load_tasks(conf.env.name, "train", n=half_step, seed=conf.seed + 2, **settings(conf))
    sampler = HFPolicy.from_pretrained(base_dir, device=device, name="base")
    batch = rollout(sampler, conf.env.name, maps, [m.t_max for m in maps], conf.train.group_size,
                    Sampling.from_config(conf.sampling), seed=conf.seed + 2, step_quality=False)
    drift = {}
    for coef in sorted({0.0, conf.train.kl_coef, 1.0}):
        recipe = config.load(profile, train={"kl_coef": coef, "ppo_epochs": 4, "minibatch_size": len(batch)})
        actor_x, tok = models.load_trainable(base_dir, device=device)  # a fresh copy of the base, in memory
        ref_x, _ = models.load(base_dir, device=device, dtype=conf.model.dtype)
        opt = torch.optim.AdamW(actor_x.parameters(), lr=recipe.train.lr, weight_decay=recipe.train.weight_decay)
        got = train.ppo_update(actor_x, ref_x, opt, batch, recipe, np.random.default_rng(0))
        ratio = likelihood.cumulative_llr(HFPolicy(actor_x, tok, name="updated"), sampler, batch)
        moved = -ratio.groupby("trajectory")["cum_llr"].last().mean()  # KL(base || updated) per trajectory
        drift[f"kl_coef {coef:g}"] = {"kl (mean over epochs)": got["kl"], "clip_frac": got["clip_frac"],
                                      "KL(base || updated) per trajectory": moved}
    print(f"4 PPO epochs on one batch of {len(batch)} trajectories, lr {conf.train.lr:g}, in memory")
    print(pd.DataFrame(drift).T.to_string())
""")

# ------------------------------------------------------------------------------------- 02 BudgetMix

_02A = _code("""
    import numpy as np
    import pandas as pd

    from helpers import budget, config
    from helpers.envs import frozenlake as fl
    from helpers.envs import load_tasks, settings

    conf = config.load(profile)
    maps = load_tasks("frozenlake", "train", n=500, seed=conf.seed + 3, **settings(conf, "frozenlake"))
    draws = {}
    for t_top in sorted({3, conf.env.frozenlake.t_max, 2 * conf.env.frozenlake.t_max}):
        drawn = np.array(budget.sample_budgets(t_top, 4000, np.random.default_rng(conf.seed)))  # one per group
        which = np.random.default_rng(conf.seed + 1).integers(len(maps), size=len(drawn))
        hopeless = [fl.upper_bound(maps[i], int(T)) == 0 for i, T in zip(which, drawn, strict=True)]
        draws[f"T_max {t_top}"] = {
            "candidates": budget.budgetmix_candidates(t_top),
            "mean budget / T_max": round(float(drawn.mean()) / t_top, 3),
            "share at <= 25 % of T_max": round(float(np.mean(drawn <= 0.25 * t_top)), 3),
            "share no policy can solve": round(float(np.mean(hopeless)), 3),
        }
    print(f"4000 BudgetMix task groups on {len(maps)} training maps (the maps' own T_max replaced)")
    print(pd.DataFrame(draws).T.to_string())
""")

_02B = _code("""
    import pandas as pd

    from helpers import base_model, budget, config, evaluate, store
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling, Tempered
    from helpers.rollout import rollout

    conf = config.load(profile)
    maps = load_tasks(conf.env.name, "test", n=conf.eval.n_tasks, seed=conf.seed, **settings(conf))
    plain = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
    chosen_t = store.Run.read_metrics(conf.results_name, "02_budgetmix_training")["sharpened"]["temperature"]
    samp = Sampling.from_config(conf.sampling)
    runs_x = []
    for temp in (1.0, 0.5, 0.0):  # 0 = greedy decoding
        for (frac, T), cell_x in budget.fraction_cells(maps, [0.25, 1.0]).items():
            episodes = rollout(Tempered(plain, temp), conf.env.name, cell_x, T, conf.eval.n_samples, samp,
                               seed=conf.seed + 1000, step_quality=False, model_name=f"temperature {temp:g}")
            runs_x += [evaluate.trajectory_record(e) for e in episodes]
    by_temp = pd.DataFrame(runs_x)
    boot_x = (conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
    success_x = evaluate.budget_table(by_temp, *boot_x)
    print(f"the base on {len(maps)} test maps x {conf.eval.n_samples} samples (the notebook's sharpened base: "
          f"temperature {chosen_t:g})")
    print(success_x.pivot(index="model", columns="fraction", values="success").round(3).to_string())
    print("greedy minus temperature 1, points (paired over maps and samples):")
    gain_x = evaluate.gain_table(by_temp, "temperature 0", "temperature 1", *boot_x)
    print(gain_x.round({"gain_points": 1, "low": 1, "high": 1}).to_string(index=False))
""")

_02C = _code("""
    import pandas as pd

    from helpers import config, controls, evaluate, store
    from helpers.metrics import method_difference

    conf = config.load(profile)
    where = store.profile_dir(conf.results_name) / "02_budgetmix_training" / "eval_records.jsonl"
    by_task = evaluate.success_by_task(pd.DataFrame(store.Records(where).read()))
    mix = controls.seeds_of(by_task["model"].unique(), "budgetmix")
    full = controls.seeds_of(by_task["model"].unique(), "grpo")
    studies = {"all seeds (the notebook)": (mix, full)}
    studies.update({f"only RL seed {a.rsplit('-s', 1)[1]}": ([a], [b]) for a, b in zip(mix, full, strict=True)})
    cells_x = {}
    for label, (a, b) in studies.items():
        d = method_difference(by_task, a, b, "success", ["fraction"], 100,
                              conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
        cells_x[label] = {f"{r.fraction:g} T_max": f"{r.difference:+.1f} [{r.low:+.1f}, {r.high:+.1f}]"
                          for r in d.itertuples()}
    print("BudgetMix minus GRPO, points [95 % interval]: one study per row")
    print(pd.DataFrame(cells_x).T.to_string())
""")

# ------------------------------------------------------------------------------------- 03 Pass@(K,T)

_03A = _code("""
    import pandas as pd

    from helpers import config, metrics, store

    conf = config.load(profile)
    where = store.profile_dir(conf.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
    sweep_x = pd.DataFrame(store.Records(where).read())
    budgets = sorted(sweep_x["budget"].unique())
    keep_t = sorted({budgets[len(budgets) // 2], budgets[-1]})
    bias = []
    for k_try in sorted({1, conf.sweep.pass_t_k, conf.sweep.n_samples}):
        per = metrics.per_task_pass(sweep_x, k_try)  # n, c and the unbiased pass@k of every (model, T, task)
        per["plug_in"] = 1 - (1 - per["c"] / per["n"]) ** k_try  # the observed rate taken as exact
        per["method"] = per["model"].str.replace(r"-s\\d+$", "", regex=True)
        means = per[per["T"].isin(keep_t)].groupby(["method", "T"])[["pass", "plug_in"]].mean()
        bias.append(means.assign(K=k_try, bias_points=100 * (means["plug_in"] - means["pass"])))
    out_x = pd.concat(bias).reset_index()
    wide_x = out_x.pivot_table(index=["T", "method"], columns="K", values=["pass", "bias_points"])
    print(wide_x.round(3).to_string())
""")

_03B = _code("""
    import pandas as pd

    from helpers import config, metrics, store

    conf = config.load(profile)
    where = store.profile_dir(conf.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
    sweep_x = pd.DataFrame(store.Records(where).read())
    half = conf.sweep.n_samples // 2
    k_try = min(conf.sweep.pass_t_k, half)
    top = sweep_x[sweep_x["budget"] == sweep_x["budget"].max()]
    subsets = {
        f"n = {conf.sweep.n_samples}": top,
        f"n = {half}, samples 0-{half - 1}": top[top["sample"] < half],
        f"n = {half}, samples {half}-{2 * half - 1}": top[(top["sample"] >= half) & (top["sample"] < 2 * half)],
    }
    estimates = {}
    for label, frame in subsets.items():
        per = metrics.per_task_pass(frame, k_try)
        for who in ("base", f"grpo-s{conf.train.seeds[0]}"):
            values = per.loc[per["model"] == who, "pass"].to_numpy()
            low_x, high_x = metrics.bootstrap_ci(values, conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
            estimates[(label, who)] = {f"Pass@{k_try}": values.mean(), "interval width": high_x - low_x}
    print(f"Pass@{k_try} at T = {top['budget'].max()}, {top['task_id'].nunique()} tasks (interval over tasks)")
    print(pd.DataFrame(estimates).T.round(3).to_string())
""")

_03C = _code("""
    import pandas as pd

    from helpers import config, controls, metrics, store

    conf = config.load(profile)
    where = store.profile_dir(conf.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
    per = metrics.per_task_pass(pd.DataFrame(store.Records(where).read()), conf.sweep.pass_t_k)
    rl_x = controls.seeds_of(per["model"].unique(), "grpo")
    task_ids = sorted(per["task_id"].unique())
    widths = {}
    for n_maps in sorted({max(2, len(task_ids) // 4), max(2, len(task_ids) // 2), len(task_ids)}):
        sub = per[per["task_id"].isin(task_ids[:n_maps])]
        for label, rl_set in ((f"{len(rl_x)} RL seeds", rl_x), ("one RL seed", rl_x[:1])):
            d = metrics.method_difference(sub, rl_set, ["base"], "pass", ["T"], 100,
                                          conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
            widths[(label, n_maps)] = dict(zip(d["T"], d["high"] - d["low"], strict=True))
    print(f"Width (points) of the interval of GRPO minus base, Pass@{conf.sweep.pass_t_k}, by T")
    print(pd.DataFrame(widths).T.rename_axis(["seeds", "tasks"]).round(1).to_string())
""")

# ------------------------------------------------------------------------------------- 04 matched states

_04A = _code("""
    import pandas as pd

    from helpers import config, probing, store

    conf = config.load(profile)
    states_x = store.Run.read_table(conf.results_name, "04_step_level_probing", "per_state_quality")
    n_seeds = states_x["rl_seed"].nunique()
    later = {}
    for t_min in range(0, int(states_x["t"].max()) + 1, 2):
        late = states_x[states_x["t"] >= t_min]
        live = late[~late["dead"]]
        if live["rl_seed"].nunique() < n_seeds:
            continue  # a seed has no live state this late: no interval
        res = probing.seed_summary(late, [("rl", "base"), ("rl", "sharp")], conf.eval.n_bootstrap, conf.eval.ci,
                                   conf.seed)
        later[f"t >= {t_min}"] = {"live states": len(live)} | {
            f"rl better than {b}": "{:.3f} [{:.3f}, {:.3f}]".format(res[f"rl_vs_{b}"]["better"],
                                                                     *res[f"rl_vs_{b}"]["better_ci"])
            for b in ("base", "sharp")
        }
    print("RL's win rate at matched live states from turn t on (mean over RL seeds, seeds-then-states interval)")
    print(pd.DataFrame(later).T.to_string())
""")

_04B = _code("""
    import pandas as pd

    from helpers import config, probing, store

    conf = config.load(profile)
    states_x = store.Run.read_table(conf.results_name, "04_step_level_probing", "per_state_quality")
    filters = {}
    for label, frame in (("dead states set apart (the notebook)", states_x),
                         ("dead states counted as live", states_x.assign(dead=False))):
        for a, b in (("rl", "base"), ("rl", "sharp")):
            w = probing.win_summary(frame, a, b)  # pooled over the RL seeds
            filters[(label, f"{a} vs {b}")] = {
                "states": w["n_live"], "a better": w[f"{a}_better"], "tie": w["tie"],
                "b better": w[f"{b}_better"],
                "quality a": w[f"mean_quality_{a}"], "quality b": w[f"mean_quality_{b}"],
            }
    print(f"{int(states_x['dead'].sum())} of {len(states_x)} matched states are dead")
    print(pd.DataFrame(filters).T.round(3).to_string())
""")

_04C = _code("""
    import pandas as pd

    from helpers import base_model, config, probing, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    pr = conf.probing
    seed0 = conf.train.seeds[0]
    maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))
    samp = Sampling.from_config(conf.sampling)
    roster = {"base": HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")}
    for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
        roster[f"{label}-s{seed0}"] = HFPolicy.from_pretrained(
            train.trained_model(conf, mode_x, seed0), device=conf.model.device, name=f"{label}-s{seed0}")
    # the notebook's matched states of RL seed 0, rebuilt in memory from the same rollouts
    episodes = {who: rollout(roster[who], conf.env.name, maps, [m.t_max for m in maps], 2, samp,
                             seed=conf.seed + 4000) for who in ("base", f"grpo-s{seed0}")}
    states_x = probing.matched_pool(episodes["base"], episodes[f"grpo-s{seed0}"], {m.task_id: m for m in maps},
                                    pr.n_states, seed=conf.seed + 4001)
    scores = {who: probing.state_quality(pol, states_x, pr.g, Sampling(samp.temperature, samp.top_p,
                                                                      samp.max_new_tokens, seed=conf.seed + 4002))
              for who, pol in roster.items()}
    per_x = probing.state_table(states_x, scores)
    versus = {}
    for who in list(roster)[1:]:
        w = probing.win_summary(per_x, who, "base")
        versus[f"{who} vs base"] = {"live states": w["n_live"], "better": w[f"{who}_better"], "tie": w["tie"],
                                    "worse": w["base_better"], "quality": w[f"mean_quality_{who}"],
                                    "quality of base": w["mean_quality_base"]}
    print(f"{len(states_x)} matched states of RL seed {seed0}, {pr.g} actions per policy per state")
    print(pd.DataFrame(versus).T.round(3).to_string())
""")

# ------------------------------------------------------------------------------------- 05 error recovery

_05A = _code("""
    import pandas as pd

    from helpers import config, probing, store

    conf = config.load(profile)
    kinds = {
        "error states": store.Run.read_table(conf.results_name, "05_error_recovery", "error_state_quality"),
        "matched states": store.Run.read_table(conf.results_name, "04_step_level_probing", "per_state_quality"),
    }
    halves = []
    for kind, frame in kinds.items():
        for other in ("base", "sharp"):
            d = probing.by_depth(frame, [0.0, 0.5, 1.0], "rl", other)  # depth t / T_max: early, late half
            halves.append(d.assign(states=kind, comparison=f"rl vs {other}", win=d["rl_better"]))
    both = pd.concat(halves)
    print("RL's win rate (pooled over RL seeds) and live states, by half of the episode")
    print(both.pivot_table(index="depth_bin", columns=["comparison", "states"], values=["win", "n_live"])
          .round(3).to_string())
""")

_05B = _code("""
    import numpy as np
    import pandas as pd

    from helpers import base_model, config, metrics, probing, store, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling, Tempered
    from helpers.rollout import ChatFormat, rollout

    conf = config.load(profile)
    pr = conf.probing
    seed0 = conf.train.seeds[0]
    maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))
    samp = Sampling.from_config(conf.sampling)
    base_dir = base_model.path_of(conf)
    sharp_t = store.Run.read_metrics(conf.results_name, "02_budgetmix_training")["sharpened"]["temperature"]
    roster = {
        "base": HFPolicy.from_pretrained(base_dir, device=conf.model.device, name="base"),
        "sharp": Tempered(HFPolicy.from_pretrained(base_dir, device=conf.model.device), sharp_t, name="sharp"),
    }
    for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
        roster[f"{label}-s{seed0}"] = HFPolicy.from_pretrained(
            train.trained_model(conf, mode_x, seed0), device=conf.model.device, name=f"{label}-s{seed0}")
    # the notebook's error states of RL seed 0, rebuilt in memory from the same rollouts and seeds
    episodes = {who: rollout(roster[who], conf.env.name, maps, [m.t_max for m in maps], 2, samp,
                             seed=conf.seed + 4000) for who in ("base", f"grpo-s{seed0}")}
    cands = probing.matched_pool(episodes["base"], episodes[f"grpo-s{seed0}"], {m.task_id: m for m in maps},
                                 min(4 * pr.n_error_states, 400), seed=conf.seed + 5000, at_most=True)
    perm = np.random.default_rng(conf.seed + 5001).permutation(len(cands))
    err_x = probing.error_pool([cands[j] for j in perm], ChatFormat(roster["base"].tokenizer), conf.seed + 5002,
                               pr.n_error_states, probing.attempts_of(episodes["base"]))
    success_x = {who: probing.continuation_success(pol, err_x, pr.n_continuations, samp, conf.seed + 5004)
                 for who, pol in roster.items()}
    recover = {}
    for who, v in success_x.items():
        mid, lo, hi = metrics.nested_bootstrap([v - success_x["base"]], lambda x: x, conf.eval.n_bootstrap,
                                               conf.eval.ci, conf.seed)
        recover[who] = {"continuation success": round(float(v.mean()), 3),
                        "minus base (points)": f"{100 * mid:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"}
    print(f"{len(err_x)} error states; the best any policy can do: {probing.best_success(err_x).mean():.3f}")
    print(pd.DataFrame(recover).T.to_string())
""")

# ------------------------------------------------------------------------------------- 06 likelihoods

_06A = _code("""
    import pandas as pd

    from helpers import config, metrics, store

    conf = config.load(profile)
    ratios = store.Run.read_table(conf.results_name, "06_likelihood_analysis", "cumulative_llr")
    ends = ratios.groupby(["trajectories_of", "rl_seed", "trajectory"], as_index=False).agg(
        cum_llr=("cum_llr", "last"), success=("success", "first"))  # each trajectory's total
    rl_seeds = sorted(ends["rl_seed"].unique())
    survive = {}
    for whose, grp in ends.groupby("trajectories_of"):
        for kept, chosen_x in (("successful only (the notebook)", grp[grp["success"]]), ("all", grp)):
            per_seed = [chosen_x.loc[chosen_x["rl_seed"] == r, "cum_llr"].to_numpy() for r in rl_seeds]
            row_x = {"n per RL seed": [len(v) for v in per_seed], "mean cum LLR [interval]": "n/a (none)"}
            if min(row_x["n per RL seed"]) > 0:
                mid, lo, hi = metrics.nested_bootstrap(per_seed, lambda x: x, conf.eval.n_bootstrap, conf.eval.ci,
                                                       conf.seed)
                row_x["mean cum LLR [interval]"] = f"{mid:.3f} [{lo:.3f}, {hi:.3f}]"
            survive[(f"{whose}'s trajectories", kept)] = row_x
    print("log pi_RL - log pi_base summed over a whole trajectory (mean over RL seeds, seeds-then-trajectories)")
    print(pd.DataFrame(survive).T.to_string())
""")

_06B = _code("""
    import pandas as pd

    from helpers import base_model, config, likelihood, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    seed0 = conf.train.seeds[0]
    maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))[: conf.probing.n_trajectories]
    pols = {"base": HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")}
    for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
        pols[label] = HFPolicy.from_pretrained(train.trained_model(conf, mode_x, seed0), device=conf.model.device,
                                               name=label)
    samp = Sampling.from_config(conf.sampling)
    episodes = {who: rollout(pol, conf.env.name, maps, [m.t_max for m in maps], 1, samp, seed=conf.seed + 6000,
                             step_quality=False) for who, pol in pols.items()}
    table_x = {}
    for rl_x in ("grpo", "budgetmix"):
        for whose in (rl_x, "base"):
            ratio = likelihood.cumulative_llr(pols[rl_x], pols["base"], episodes[whose])
            ok = ratio[ratio["success"]].groupby("trajectory")["cum_llr"].last()
            table_x[(f"{rl_x}-s{seed0} vs base", f"{whose}'s trajectories")] = {
                "successful": len(ok), "mean cum LLR of the successful": ok.mean() if len(ok) else float("nan")}
    print(pd.DataFrame(table_x).T.round(3).to_string())
""")

_06C = _code("""
    import pandas as pd

    from helpers import config, store

    conf = config.load(profile)
    scored = store.Run.read_table(conf.results_name, "06_likelihood_analysis", "action_nll")
    scored["source"] = scored["actions_of"].str.replace(r"-s\\d+$", "", regex=True)  # grpo-s0 .. -> grpo
    by_turn = scored.pivot_table(index="turn", columns="source", values="nll_mean", aggfunc=["mean", "size"])
    print("Per-token NLL under the base policy of each source's actions, by turn (mean, and how many actions)")
    print(by_turn.round(3).to_string())
""")

# ------------------------------------------------------------------------------------- 07 process supervision

_07A = _code("""
    import pandas as pd

    from helpers import base_model, config, process
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    n_maps = 4 * conf.train.tasks_per_step  # four RL steps' worth of tasks
    maps = load_tasks(conf.env.name, "train", n=n_maps, seed=conf.seed + 7, **settings(conf))
    sampler = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
    batch = rollout(sampler, conf.env.name, maps, [m.t_max for m in maps], conf.train.group_size,
                    Sampling.from_config(conf.sampling), seed=conf.seed + 7, step_quality=False)
    dial = {}
    for level in (0.0, 0.25, 0.5, 0.75, 1.0):
        exact, told = process.oracle_terms(batch, {m.task_id: m for m in maps}, conf.env.name, level,
                                           seed=conf.train.seeds[0])
        dial[level] = process.agreement(exact, told)  # share of steps scored exactly, correlation with exact
    print(f"the oracle's process terms on {len(batch)} base trajectories ({sum(e.n_turns for e in batch)} steps)")
    print(pd.DataFrame(dial).T.rename_axis("corruption level").round(3).to_string())
""")

_07B = _code("""
    import numpy as np
    import pandas as pd

    from helpers import base_model, config, process, train
    from helpers.envs import load_tasks, settings
    from helpers.policy import HFPolicy, Sampling
    from helpers.rollout import rollout

    conf = config.load(profile)
    g_max = 2 * conf.train.group_size
    n_maps = 2 * conf.train.tasks_per_step  # two RL steps' worth of tasks
    maps = load_tasks(conf.env.name, "train", n=n_maps, seed=conf.seed + 8, **settings(conf))
    sampler = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
    steps_x = []
    for budget_mode in train.BUDGET_MODES:
        given = train.task_budgets(budget_mode, [m.t_max for m in maps], np.random.default_rng(conf.seed))
        episodes = rollout(sampler, conf.env.name, maps, given, g_max, Sampling.from_config(conf.sampling),
                           seed=conf.seed + 8, step_quality=False)
        for G in sorted({2, conf.train.group_size, g_max}):
            group_x = [e for e in episodes if e.sample < G]  # the first G samples of every task
            sizes = process.step_group_sizes(group_x)  # one per turn of every trajectory, in order
            turn_of = [i for e in group_x for i in range(e.n_turns)]
            alone = np.equal(sizes, 1)
            steps_x.append(pd.DataFrame({"mode": budget_mode, "G": G, "turn": turn_of, "alone": alone}))
    print("Share of steps whose step group has one member (GiGPO's step advantage is 0 there), by turn")
    shares = pd.concat(steps_x).pivot_table(index=["mode", "G"], columns="turn", values="alone")
    print(shares.round(2).to_string())
""")

_07C = _code("""
    import pandas as pd

    from helpers import config, supervision

    conf = config.load(profile)
    gigpo_x = [r for r in supervision.grid(conf) if r.algorithm == "gigpo"]
    logged = pd.concat([pd.DataFrame(r.logs()).assign(method=r.name) for r in gigpo_x])
    logged = logged.dropna(subset=["step_singleton_share"])
    print("GiGPO's logged step groups per RL step (every step's batch, as trained in the notebook)")
    print(logged.pivot_table(index="step", columns="method", values=["step_singleton_share", "success"])
          .round(3).to_string())
""")


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "00_environments",
        "00a",
        "How slippery should the ice be?",
        "Recompute the value of knowing the budget (budget-aware optimum minus the best stationary policy) on the "
        "same test maps with the ice's `success_rate` at 1.0 (no slip), 0.9, 0.75 (the cpu testbed), 0.5 and 1/3 "
        "(gymnasium's default).",
        "Is the value of knowing the budget largest on dry ice, on the iciest ice, or in between? Write down a "
        "number of points at T_max for 1.0 and for 1/3. It is a real question: slip is what makes a safe detour "
        "cost turns, but it also makes every plan unreliable, whatever the budget.",
        "Where the value peaks over `success_rate`, and so why the testbed uses 0.75: where it is near 0 a "
        "budget-aware agent has nothing to gain and BudgetMix nothing to learn.",
        _00A,
    ),
    Exercise(
        "00_environments",
        "00b",
        "Budgets beyond T_max",
        "Extend the budget T past the profile's T_max, to 2, 3 and 4 times it, and compute the structural upper "
        "bound and the best stationary policy's success there.",
        "As T grows, does the value of knowing the budget keep growing, level off or vanish? And does the upper "
        "bound reach 1? The stationary policy is cautious and budget-blind, which is bad when turns are short, "
        "but what about when they are plentiful?",
        "At which T the value peaks and how fast it decays: a budget only carries information while it binds. "
        "And why the bound stays below 1 however long one plays: on slippery ice some maps cannot be solved "
        "with certainty.",
        _00B,
    ),
    Exercise(
        "00_environments",
        "00c",
        "The demonstrator's two kinds of error",
        "Vary the demonstrator's share of random moves `sft.epsilon` (0, 0.1, the profile's, 0.5) and compare its "
        "exact success with the budget-aware optimum playing with the same random moves.",
        "At T_max, which costs the demonstrator more: its random moves or its budget-blind habit? At epsilon 0 the "
        "demonstrator is the best stationary policy; predict how much of its gap to the optimum is left at the "
        "profile's epsilon.",
        "Compare rows at the same epsilon (the cost of the habit) with rows across epsilons (the cost of noise). "
        "The base imitates the profile's row; greedy decoding (the sharpened base) can remove only the noise, "
        "RL could remove both.",
        _00C,
    ),
    Exercise(
        "01_grpo_training",
        "01a",
        "Groups that carry no gradient",
        "Sample G trajectories per task on 32 training tasks with the base and with the first GRPO seed's final "
        "model, for G from 2 to twice `train.group_size`, and count the task groups whose rewards are all equal.",
        "A GRPO group whose G rewards are equal (all successes or all failures) has advantage 0 everywhere: it "
        "costs G rollouts and teaches nothing. What share of groups is that at G = 8 for the base? Is it larger "
        "or smaller for the trained model, and how fast does it fall with G?",
        "A task solved with probability p wastes its group with probability p^G + (1 - p)^G, so easy and "
        "hopeless maps both waste it. Whether training moves tasks towards the easy end, and what a larger G buys "
        "for its cost.",
        _01A,
    ),
    Exercise(
        "01_grpo_training",
        "01b",
        "Why clip_frac is 0 in the committed runs",
        "Take one RL step's batch from the base and apply the kit's update (`train.ppo_update`) to a fresh copy "
        "of the base three ways: as committed (one epoch, one minibatch), with two minibatches, with two epochs.",
        "The committed runs log `clip_frac` = 0 at every step. Which of the three settings gives a non-zero "
        "`clip_frac`, and why is it exactly 0 in the first? Predict the order of the three `approx_kl` values.",
        "PPO-clip only clips once the weights that compute the loss differ from the ones that sampled the batch: "
        "with one epoch over one minibatch the probability ratio is 1 at every token. Any later minibatch or "
        "epoch sees updated weights. Try a larger `train.lr` to see how the clip engages.",
        _01B,
    ),
    Exercise(
        "01_grpo_training",
        "01c",
        "Does the KL coefficient do anything?",
        "Apply four PPO epochs to half an RL step's batch from the base (in memory) with `train.kl_coef` 0, "
        "the profile's value "
        "(0.001 on cpu) and 1.0, and measure how far each update moved the policy from the base.",
        "The paper (and verl) keep a `low_var_kl` penalty of 0.001 to the base. On this batch, does 0.001 change "
        "the update at all compared with 0? How much does 1.0 hold the policy back?",
        "Compare the drift columns across coefficients: whether a penalty of this size is a real constraint at "
        "this learning rate, or whether the clip and the learning rate are what keep updates small.",
        _01C,
    ),
    Exercise(
        "02_budgetmix_training",
        "02a",
        "What BudgetMix actually draws",
        "Draw BudgetMix budgets (`budget.sample_budgets`) for a T_max of 3, the profile's and twice the profile's, "
        "and count the task groups whose budget no policy could succeed in (structural upper bound 0).",
        "BudgetMix draws from 10 %, 20 %, ..., 100 % of T_max with duplicates removed. Is the drawn budget then "
        "uniform over fractions of T_max? What share of its groups can no policy solve (every trajectory fails, "
        "so the group teaches nothing)?",
        "How the unique-value rule bends the distribution at small T_max, and how much of BudgetMix's training "
        "signal goes to groups that are hopeless by construction (full-budget GRPO wastes none of it that way).",
        _02A,
    ),
    Exercise(
        "02_budgetmix_training",
        "02b",
        "Sharpening at a tight budget",
        "Evaluate the base at temperatures 1.0, 0.5 and 0 (greedy) at 25 % and 100 % of T_max, on the notebook's "
        "test maps and samples per map, in memory.",
        "The sharpened base's temperature was chosen at the full budget to match GRPO there. At 25 % of T_max, "
        "is greedy decoding still better than sampling at 1.0, and by more or fewer points than at T_max?",
        "Whether removing sampling noise is worth more when every turn counts. Where it is, part of an RL "
        "model's advantage over the base at tight budgets may be sharpening too; the notebook's sharpened-base "
        "column is the control for exactly that.",
        _02B,
    ),
    Exercise(
        "02_budgetmix_training",
        "02c",
        "A study with one RL seed",
        "Recompute BudgetMix minus GRPO from the notebook's evaluation records with one RL seed per method (seed "
        "k against seed k), beside the notebook's three-seed estimate.",
        "The three-seed differences are within noise at every budget. Would a study with one RL seed have found "
        "a significant gain, or a significant loss? Predict the spread of the three single-seed estimates at "
        "25 % of T_max.",
        "How far single-seed estimates scatter around the mean, and how narrow each one's interval is: with one "
        "seed the interval covers the test maps only, not training variance, so it can exclude 0 while another "
        "seed says the opposite.",
        _02C,
    ),
    Exercise(
        "03_pass_at_kt_sweep",
        "03a",
        "The unbiased estimator against the plug-in",
        "On the sweep's records, compute each task's naive plug-in 1 - (1 - c/n)^K beside the kit's unbiased "
        "estimator 1 - C(n - c, K) / C(n, K), for K = 1, `sweep.pass_t_k` and `sweep.n_samples`.",
        "The plug-in treats the observed success rate c/n as exact. Is it biased up or down, at which K is the "
        "bias largest, and is it the same for the base and the RL models (whose successes are spread differently "
        "over maps)?",
        "The sign of the bias (Jensen's inequality on a convex function of c/n), that it vanishes at K = 1 and "
        "grows towards K = n, and whether it would change the size of the RL-minus-base gap the notebook reports.",
        _03A,
    ),
    Exercise(
        "03_pass_at_kt_sweep",
        "03b",
        "How many samples per task?",
        "Recompute Pass@K at T_max with half of `sweep.n_samples` per task, once from the first half of the "
        "samples and once from the second, beside the estimate from all of them.",
        "With n = K the unbiased estimator of a task is just 'did any of the K succeed'. Does halving n change "
        "Pass@K on average? Does it change the interval over tasks, and how far apart are the two halves?",
        "The two halves are independent estimates of the same number: their difference is the noise from "
        "sampling alone. More samples per task leave the expectation alone and shrink that noise, which the "
        "interval over tasks partly includes.",
        _03B,
    ),
    Exercise(
        "03_pass_at_kt_sweep",
        "03c",
        "Interval width against the number of tasks",
        "Recompute the interval of GRPO minus base (Pass@K by T) on a quarter, a half and all of the sweep's "
        "tasks, resampling all RL seeds as the notebook does and with a single seed.",
        "An interval over tasks alone shrinks like 1/sqrt(tasks): four times the tasks, half the width. The "
        "notebook's interval also resamples the RL seeds. Predict the width with all tasks against a quarter of "
        "them, for three seeds and for one.",
        "Whether the three-seed width shrinks like the one-seed width or levels off: the part that comes from "
        "training variance does not shrink with more test maps, only with more seeds.",
        _03C,
    ),
    Exercise(
        "04_step_level_probing",
        "04a",
        "Only the later turns",
        "Restrict the notebook's matched states to turns t >= 2, 4, 6 and recompute RL's win rate over the base "
        "and over the sharpened base, with the notebook's seeds-then-states interval.",
        "The paper finds RL's single-step advantage only late in trajectories. Does RL's win rate over the base "
        "rise at later turns here? Over the sharpened base?",
        "Whether a late rise survives the sharpened-base comparison, and how few live states remain late (the "
        "interval shows what that costs). Late states are selected too: only episodes that have not ended reach "
        "them.",
        _04A,
    ),
    Exercise(
        "04_step_level_probing",
        "04b",
        "The dead-state filter",
        "Recompute the matched-state comparison with the dead states (no move can still reach the goal) counted "
        "as live instead of set apart.",
        "At a dead state every valid move scores 1, so two policies differ there only by invalid replies. "
        "Counting them, does RL's win rate over the base go up or down, and how far does the tie share move? "
        "How many of the states are dead?",
        "Ties jump, every win rate is diluted and the mean qualities move towards 1: a win rate is only as "
        "meaningful as its denominator, which is why the notebook (and the paper) set dead states apart.",
        _04B,
    ),
    Exercise(
        "04_step_level_probing",
        "04c",
        "Another comparison: BudgetMix's model",
        "Rebuild the notebook's matched states of the first RL seed in memory and score the BudgetMix model of "
        "that seed there too, beside GRPO's, each against the base.",
        "BudgetMix trained on the same base with mixed budgets. At the same states, is its model better than the "
        "base at more states than GRPO's, at fewer, or the same? Its success at T_max is close to GRPO's.",
        "Whether two RL models with similar success have similar single-step quality at matched states, and "
        "whether the GRPO row matches the notebook's seed-0 numbers (the same states and sampling seeds).",
        _04C,
    ),
    Exercise(
        "05_error_recovery",
        "05a",
        "Concentration, early and late",
        "Split the error states and the matched states at depth d = t / T_max = 0.5 and compare RL's win rate "
        "(against the base and the sharpened base) in each half.",
        "RL wins more often at error states than at matched states. Is that concentration the same in the first "
        "and the second half of the episode, or does it come from one half?",
        "Whether the error-minus-matched difference holds in both halves. Error states are injected one step "
        "after a state like the matched ones, so they sit later on average: read the live-state counts before "
        "the win rates.",
        _05A,
    ),
    Exercise(
        "05_error_recovery",
        "05b",
        "Who else recovers?",
        "Rebuild the notebook's error states of the first RL seed in memory and continue from them with the "
        "BudgetMix model of that seed too, beside the base, the sharpened base and GRPO.",
        "BudgetMix trained on short budgets, where there is no time to waste after a mistake. From identical "
        "error states, predict its continuation success against GRPO's and the sharpened base's.",
        "Whether BudgetMix recovers differently from GRPO beyond the interval, and how both compare with the "
        "sharpened base and with the best any policy could do from these states.",
        _05B,
    ),
    Exercise(
        "06_likelihood_analysis",
        "06a",
        "What survives the success filter",
        "Recompute the cumulative log-likelihood ratio at the end of each trajectory over all trajectories, not "
        "only the successful ones, and count how many trajectories each mean rests on.",
        "How many trajectories per RL seed survive the success filter for RL, the base and the sharpened base? "
        "Including the failures, does the gap between RL's trajectories and the base's widen or narrow?",
        "The surviving n differs by whose trajectories they are (RL succeeds more often), and failures end early "
        "in holes, so their ratio sums fewer turns: whether the paper's direction depends on the filter.",
        _06A,
    ),
    Exercise(
        "06_likelihood_analysis",
        "06b",
        "Another RL model: BudgetMix's trajectories",
        "Roll out the base, GRPO and BudgetMix (first RL seed) on the notebook's test tasks in memory and compute "
        "the cumulative LLR of successful trajectories for BudgetMix against the base as well as for GRPO.",
        "Are BudgetMix's own successful trajectories as improbable under the base (as large a cumulative LLR) as "
        "GRPO's? And the base's successful trajectories under BudgetMix?",
        "Whether the LLR gap is a property of RL training in general or of one run: two RL models from the same "
        "base, trained with different budgets.",
        _06B,
    ),
    Exercise(
        "06_likelihood_analysis",
        "06c",
        "Surprise, turn by turn",
        "Break the notebook's per-token NLL under the base policy down by turn, for the actions of the base, the "
        "sharpened base and the RL models.",
        "RL's actions are slightly less likely under the base than the base's own. Is that so at every turn, or "
        "does the gap grow later in the episode, where RL's trajectories have gone where the base rarely goes?",
        "Which turns carry the gap, and how many actions each turn's mean rests on (later turns come only from "
        "episodes still running).",
        _06C,
    ),
    Exercise(
        "07_process_supervision",
        "07a",
        "The corruption dial",
        "Score one training-sized batch of base trajectories with the oracle-Q process terms at corruption levels "
        "0, 0.25, 0.5, 0.75 and 1, and measure how much of the exact signal each level keeps.",
        "At level 0.5 half of the (state, turns left) pairs get their action values shuffled. What share of the "
        "steps is still scored exactly: 50 %, more or less? And at level 1, where the report carries no "
        "information about actions?",
        "A shuffle can leave a step's term unchanged (equal action values, dead states, the identity "
        "permutation), so the exact share overstates what is left; the correlation with the exact terms is the "
        "better measure, and it is what the precision curve varies.",
        _07A,
    ),
    Exercise(
        "07_process_supervision",
        "07b",
        "GiGPO's anchor groups",
        "Sample task groups from the base at the full budget and with BudgetMix budgets, for G from 2 to twice "
        "`train.group_size`, and count the steps whose anchor observation no other step of the group shares.",
        "GiGPO's step advantage compares steps of a task group that saw the identical observation (map, note, "
        "turns left). At G = 8, what share of the steps at turn 0, turn 1 and later sit in a group of one (step "
        "advantage 0)? Does doubling G help?",
        "Turn 0 always shares its anchor (the opening prompt); after it, slips scatter the trajectories and the "
        "budget line separates the same cell at different turn counts. Where steps are alone GiGPO gives only "
        "GRPO's outcome advantage, which bounds how different it can be.",
        _07B,
    ),
    Exercise(
        "07_process_supervision",
        "07c",
        "Step groups during GiGPO training",
        "Read the trained GiGPO runs' metrics logs (notebook 07's grid) and follow the logged share of singleton "
        "step groups and the batch success step by step.",
        "As GiGPO trains, the policy becomes more deterministic. Should more trajectories then share their states "
        "(fewer singletons, more step signal), or does a rising success rate end episodes sooner and change the "
        "mix of turns?",
        "Whether the step signal GiGPO depends on grows or shrinks over training, and how noisy the per-step "
        "share is at this batch size.",
        _07C,
    ),
)


# ------------------------------------------------------------------------------------------- look-ups


def for_notebook(notebook: str) -> list[Exercise]:
    """The exercises of a notebook, given as its stem (`03_pass_at_kt_sweep`) or its number (`03`)."""
    return [e for e in EXERCISES if e.notebook == notebook or e.notebook[:2] == notebook]


def get(key: str) -> Exercise:
    """The exercise with this key (`03a`)."""
    for e in EXERCISES:
        if e.key == key:
            return e
    raise KeyError(f"no exercise {key!r}; keys: {[e.key for e in EXERCISES]}")


def timings(path: Path = TIMINGS) -> dict:
    """What `benchmarks/exercises.py` measured ({} when nothing has been measured)."""
    return json.loads(path.read_text()) if path.exists() else {}


def runtime(ex: Exercise, measured: dict) -> str:
    """The measured runtime of an exercise in words, or "not measured yet" (none, or measured for other code)."""
    entry = measured.get("exercises", {}).get(ex.key)
    if not entry:
        return "not measured yet"
    if entry.get("code") != ex.digest:
        return "not measured yet (its code changed after it was measured)"
    seconds = "under 1 s" if entry["seconds"] < 1 else f"about {round(entry['seconds'])} s"
    dirty = " (with uncommitted changes)" if entry["commit"].endswith("-dirty") else ""
    return (
        f"{seconds} on {entry['cpu_count']} cores with the {entry['profile']} profile, "
        f"measured at commit {entry['commit'][:7]}{dirty}"
    )


INTRO = (
    "Change one thing, write down your prediction, then paste the code into a new cell at the end of this notebook "
    "(after running it once) and run it. Each snippet uses only the notebook's `profile` parameter, reads what the "
    "notebook wrote or works in memory, and writes nothing into the results; its variable names leave the "
    "notebook's own alone. Runtimes were measured on 2 CPU cores by `benchmarks/exercises.py`."
)


def section(notebook: str, path: Path = TIMINGS, heading: bool = True) -> str:
    """Markdown of a notebook's "Exercises" section: every exercise's fields, code and measured runtime (without
    the heading and introduction where the notebook has them in its own Markdown cell, `heading=False`)."""
    chosen = for_notebook(notebook)
    if not chosen:
        raise KeyError(f"no exercises for notebook {notebook!r}")
    measured = timings(path)
    out = ["## Exercises", "", INTRO] if heading else []
    for e in chosen:
        out += [
            "",
            f"### {e.key} · {e.title}",
            "",
            f"**Change.** {e.change}",
            "",
            f"**Predict.** {e.predict}",
            "",
            f"**Look for.** {e.look_for}",
            "",
            "```python",
            e.code.rstrip(),
            "```",
            "",
            f"*Runtime: {runtime(e, measured)}.*",
        ]
    return "\n".join(out) + "\n"


def results_snapshot(root: str | Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time, to check that an exercise wrote nothing."""
    root = Path(root)
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            p = Path(folder) / name
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out
