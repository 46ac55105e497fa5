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
    res = probing.seed_summary(
        late, [("rl", "base"), ("rl", "sharp")], conf.eval.n_bootstrap, conf.eval.ci, conf.seed
    )
    later[f"t >= {t_min}"] = {"live states": len(live)} | {
        f"rl better than {b}": "{:.3f} [{:.3f}, {:.3f}]".format(
            res[f"rl_vs_{b}"]["better"], *res[f"rl_vs_{b}"]["better_ci"]
        )
        for b in ("base", "sharp")
    }
print("RL's win rate at matched live states from turn t on (mean over RL seeds, seeds-then-states interval)")
print(pd.DataFrame(later).T.to_string())
