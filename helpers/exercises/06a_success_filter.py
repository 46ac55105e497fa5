import pandas as pd

from helpers import config, metrics, store

conf = config.load(profile)
ratios = store.Run.read_table(conf.results_name, "06_likelihood_analysis", "cumulative_llr")
ends = ratios.groupby(["trajectories_of", "rl_seed", "trajectory"], as_index=False).agg(
    cum_llr=("cum_llr", "last"), success=("success", "first")
)  # each trajectory's total
rl_seeds = sorted(ends["rl_seed"].unique())
survive = {}
for whose, grp in ends.groupby("trajectories_of"):
    for kept, chosen_x in (("successful only (the notebook)", grp[grp["success"]]), ("all", grp)):
        per_seed = [chosen_x.loc[chosen_x["rl_seed"] == r, "cum_llr"].to_numpy() for r in rl_seeds]
        row_x = {"n per RL seed": [len(v) for v in per_seed], "mean cum LLR [interval]": "n/a (none)"}
        if min(row_x["n per RL seed"]) > 0:
            mid, lo, hi = metrics.nested_bootstrap(
                per_seed, lambda x: x, conf.eval.n_bootstrap, conf.eval.ci, conf.seed
            )
            row_x["mean cum LLR [interval]"] = f"{mid:.3f} [{lo:.3f}, {hi:.3f}]"
        survive[(f"{whose}'s trajectories", kept)] = row_x
print("log pi_RL - log pi_base summed over a whole trajectory (mean over RL seeds, seeds-then-trajectories)")
print(pd.DataFrame(survive).T.to_string())
