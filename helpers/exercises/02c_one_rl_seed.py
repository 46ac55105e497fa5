import pandas as pd

from helpers import config, controls, evaluate, store
from helpers.metrics import method_difference

conf = config.load(profile)
where = store.profile_dir(conf.results_name) / "02_budgetmix_training" / "eval_records.jsonl"
by_task = evaluate.success_by_task(pd.DataFrame(store.Records(where).read()))
mix = controls.seeds_of(by_task["model"].unique(), "budgetmix")
full = controls.seeds_of(by_task["model"].unique(), "grpo")
studies = {"all seeds (the notebook)": (mix, full)}
studies.update({f"only RL seed {a.rsplit('-s', 1)[1]}": ([a], [b]) for a, b in zip(mix, full, strict=True)})
cells_x = {}
for label, (a, b) in studies.items():
    d = method_difference(
        by_task, a, b, "success", ["fraction"], 100, conf.eval.n_bootstrap, conf.eval.ci, conf.seed
    )
    cells_x[label] = {
        f"{r.fraction:g} T_max": f"{r.difference:+.1f} [{r.low:+.1f}, {r.high:+.1f}]" for r in d.itertuples()
    }
print("BudgetMix minus GRPO, points [95 % interval]: one study per row")
print(pd.DataFrame(cells_x).T.to_string())
