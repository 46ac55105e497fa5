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
        "greedy_habit": fl.stationary_success_curve(maps, horizons, conf.sft.habit_gamma),
    }
)
long_x["optimum_minus_habit_points"] = 100 * (long_x["upper_bound"] - long_x["greedy_habit"])
print(f"T_max of the profile: {t_top}")
print(long_x.rename_axis("T").round(3).to_string())
