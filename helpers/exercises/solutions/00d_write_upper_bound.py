import numpy as np

from helpers import budget, config
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.exercises import checks


def my_upper_bound(R: np.ndarray, C: np.ndarray, start: int, budget_turns: int) -> float:
    """Best success probability within `budget_turns` turns from `start`: R [n, 4] is the chance that a move
    reaches the goal, C [n, 4, n] the chance that it lands on each square and the episode goes on."""
    value = np.zeros(R.shape[0])  # V_0: no turn left, no chance
    for _ in range(budget_turns):  # one sweep per turn left
        value = (R + C @ value).max(axis=1)
    return float(value[start])


conf_d = config.load(profile)
maps_d = load_tasks("frozenlake", "test", seed=conf_d.seed, **settings(conf_d, "frozenlake"))
budgets_d = [budget.budget_at(f, conf_d.env.frozenlake.t_max) for f in conf_d.eval.budget_fractions]
verdict_d = checks.upper_bound(my_upper_bound, maps_d[:20], budgets_d)
print(verdict_d)
if verdict_d.passed:
    for T in budgets_d:
        bounds_d = [my_upper_bound(*fl.blind_tables(m)[:3], T) for m in maps_d]
        print(f"T = {T}: the bound averaged over {len(maps_d)} test maps is {np.mean(bounds_d):.3f}")
