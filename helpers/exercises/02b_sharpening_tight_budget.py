import pandas as pd

from helpers import base_model, budget, config, evaluate, store
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling, Tempered
from helpers.rollout import rollout

conf = config.load(profile)
maps = load_tasks(conf.env.name, "test", n=conf.eval.n_tasks, seed=conf.seed, **settings(conf))
plain = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
chosen_t = store.Run.read_metrics(conf.results_name, "02_budgetmix_training")["sharpened"]["temperature"]
samp = Sampling.from_config(conf.sampling)
runs_x = []
for temp in (1.0, 0.5, 0.0):  # 0 = greedy decoding
    for (_frac, T), cell_x in budget.fraction_cells(maps, [0.25, 1.0]).items():
        episodes = rollout(
            Tempered(plain, temp),
            conf.env.name,
            cell_x,
            T,
            conf.eval.n_samples,
            samp,
            seed=conf.seed + 1000,
            step_quality=False,
            model_name=f"temperature {temp:g}",
        )
        runs_x += [evaluate.trajectory_record(e) for e in episodes]
by_temp = pd.DataFrame(runs_x)
boot_x = (conf.eval.n_bootstrap, conf.eval.ci, conf.seed)
success_x = evaluate.budget_table(by_temp, *boot_x)
print(
    f"the base on {len(maps)} test maps x {conf.eval.n_samples} samples (the notebook's sharpened base: "
    f"temperature {chosen_t:g})"
)
print(success_x.pivot(index="model", columns="fraction", values="success").round(3).to_string())
print("greedy minus temperature 1, points (paired over maps and samples):")
gain_x = evaluate.gain_table(by_temp, "temperature 0", "temperature 1", *boot_x)
print(gain_x.round({"gain_points": 1, "low": 1, "high": 1}).to_string(index=False))
