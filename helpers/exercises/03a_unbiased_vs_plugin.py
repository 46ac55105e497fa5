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
    per["method"] = per["model"].str.replace(r"-s\d+$", "", regex=True)
    means = per[per["T"].isin(keep_t)].groupby(["method", "T"])[["pass", "plug_in"]].mean()
    bias.append(means.assign(K=k_try, bias_points=100 * (means["plug_in"] - means["pass"])))
out_x = pd.concat(bias).reset_index()
wide_x = out_x.pivot_table(index=["T", "method"], columns="K", values=["pass", "bias_points"])
print(wide_x.round(3).to_string())
