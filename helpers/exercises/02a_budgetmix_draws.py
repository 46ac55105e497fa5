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
