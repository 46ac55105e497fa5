import pandas as pd

from helpers import config, probing, store

conf = config.load(profile)
states_x = store.Run.read_table(conf.results_name, "04_step_level_probing", "per_state_quality")
filters = {}
for label, frame in (
    ("dead states set apart (the notebook)", states_x),
    ("dead states counted as live", states_x.assign(dead=False)),
):
    for a, b in (("rl", "base"), ("rl", "sharp")):
        w = probing.win_summary(frame, a, b)  # pooled over the RL seeds
        filters[(label, f"{a} vs {b}")] = {
            "states": w["n_live"],
            "a better": w[f"{a}_better"],
            "tie": w["tie"],
            "b better": w[f"{b}_better"],
            "quality a": w[f"mean_quality_{a}"],
            "quality b": w[f"mean_quality_{b}"],
        }
print(f"{int(states_x['dead'].sum())} of {len(states_x)} matched states are dead")
print(pd.DataFrame(filters).T.round(3).to_string())
