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
print(
    both.pivot_table(index="depth_bin", columns=["comparison", "states"], values=["win", "n_live"])
    .round(3)
    .to_string()
)
