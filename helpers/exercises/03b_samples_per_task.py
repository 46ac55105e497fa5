import pandas as pd

from helpers import config, metrics, store

conf = config.load(profile)
where = store.profile_dir(conf.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
sweep_x = pd.DataFrame(store.Records(where).read())
half = conf.sweep.n_samples // 2
k_try = min(conf.sweep.pass_t_k, half)
top = sweep_x[sweep_x["budget"] == sweep_x["budget"].max()]
subsets = {
    f"n = {conf.sweep.n_samples}": top,
    f"n = {half}, samples 0-{half - 1}": top[top["sample"] < half],
    f"n = {half}, samples {half}-{2 * half - 1}": top[(top["sample"] >= half) & (top["sample"] < 2 * half)],
}
estimates = {}
for label, frame in subsets.items():
    per = metrics.per_task_pass(frame, k_try)
    for who in (
        f"base-s{conf.train.seeds[0]}",
        f"grpo-s{conf.train.seeds[0]}",
    ):  # seed 0's group (per-seed base)
        values = per.loc[per["model"] == who, "pass"].to_numpy()
        low_x, high_x = metrics.bootstrap_ci(values, conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
        estimates[(label, who)] = {f"Pass@{k_try}": values.mean(), "interval width": high_x - low_x}
print(f"Pass@{k_try} at T = {top['budget'].max()}, {top['task_id'].nunique()} tasks (interval over tasks)")
print(pd.DataFrame(estimates).T.round(3).to_string())
