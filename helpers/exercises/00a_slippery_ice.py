import pandas as pd

from helpers import budget, config
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl

conf = config.load(profile)
budgets = [budget.budget_at(f, conf.env.frozenlake.t_max) for f in conf.eval.budget_fractions]
maps = load_tasks("frozenlake", "test", seed=conf.seed, **settings(conf, "frozenlake"))
value_x = {}
for rate in (1.0, 0.9, 0.75, 0.5, 1 / 3):  # the probability that a move goes where intended
    ice = {"is_slippery": True, "success_rate": rate}
    icy = [Task(t.task_id, t.env, {**t.payload, **ice}, t.t_max) for t in maps]  # the same maps
    bound_x = fl.upper_bound_curve(icy, budgets)
    blind = fl.stationary_success_curve(icy, budgets, conf.sft.habit_gamma)
    value_x[f"success_rate {rate:.2f}"] = {f"T={T}": 100 * (bound_x[T] - blind[T]) for T in budgets}
print("Optimum minus the greedy habit (points): the habit and budget-awareness headrooms together")
print(pd.DataFrame(value_x).T.round(1).to_string())
