import pandas as pd

from helpers import config, fmt, metrics, store
from helpers.exercises import checks


def my_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k of one task: n samples, c of them successes, k drawn without replacement."""
    raise NotImplementedError("write it: 1 - C(n - c, k) / C(n, k), with the case n - c < k")


verdict_d = checks.pass_at_k(my_pass_at_k)
print(verdict_d)
conf_d = config.load(profile)
if verdict_d.passed:  # then use it on the sweep's records, at T_max, beside the kit's
    where_d = store.profile_dir(conf_d.results_name) / "03_pass_at_kt_sweep" / "sweep_records.jsonl"
    per_d = metrics.per_task_pass(pd.DataFrame(store.Records(where_d).read()), conf_d.sweep.pass_t_k)
    per_d = per_d[per_d["T"] == per_d["T"].max()].copy()
    per_d["yours"] = [
        my_pass_at_k(int(n), int(c), conf_d.sweep.pass_t_k)
        for n, c in zip(per_d["n"], per_d["c"], strict=True)
    ]
    per_d["method"] = per_d["model"].str.replace(r"-s\d+", "", regex=True)
    means_d = per_d.groupby("method")[["yours", "pass"]].mean()
    print(f"Pass@{conf_d.sweep.pass_t_k} at T_max = {per_d['T'].max()}, mean over tasks and seeds:")
    print(
        fmt.table(means_d.rename(columns={"yours": "your Pass@k", "pass": "the kit's"}), digits=4).to_string()
    )
