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
        T: float(
            np.mean(
                [fl.policy_success(m, fl.with_random_moves(fl.optimal_policy(m, T), eps), T) for m in maps]
            )
        )
        for T in budgets
    }
print(f"Exact success on {len(maps)} test maps (the base imitates eps {conf.sft.epsilon:g}: demonstrator)")
print(pd.DataFrame(players).T.rename(columns=lambda T: f"T={T}").round(3).to_string())
