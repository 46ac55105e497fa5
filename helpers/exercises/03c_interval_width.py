import pandas as pd

from helpers import config, controls, metrics, store

conf = config.load(profile)
where = store.profile_dir(conf.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
per = metrics.per_task_pass(pd.DataFrame(store.Records(where).read()), conf.sweep.pass_t_k)
rl_x = controls.seeds_of(per["model"].unique(), "grpo")
base_x = controls.seeds_of(per["model"].unique(), "base")  # each seed's own base (base-s<k>)
task_ids = sorted(per["task_id"].unique())
widths = {}
for n_maps in sorted({max(2, len(task_ids) // 4), max(2, len(task_ids) // 2), len(task_ids)}):
    sub = per[per["task_id"].isin(task_ids[:n_maps])]
    for label, rl_set, base_set in (
        (f"{len(rl_x)} RL seeds", rl_x, base_x),
        ("one RL seed", rl_x[:1], base_x[:1]),
    ):
        d = metrics.method_difference(
            sub, rl_set, base_set, "pass", ["T"], 100, conf.eval.n_bootstrap, conf.eval.ci, conf.seed
        )
        widths[(label, n_maps)] = dict(zip(d["T"], d["high"] - d["low"], strict=True))
print(f"Width (points) of the interval of GRPO minus base, Pass@{conf.sweep.pass_t_k}, by T")
print(pd.DataFrame(widths).T.rename_axis(["seeds", "tasks"]).round(1).to_string())
