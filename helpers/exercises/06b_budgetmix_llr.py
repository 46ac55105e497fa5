import pandas as pd

from helpers import base_model, config, likelihood, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
seed0 = conf.train.seeds[0]
maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))[: conf.probing.n_trajectories]
pols = {"base": HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")}
for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
    pols[label] = HFPolicy.from_pretrained(
        train.trained_model(conf, mode_x, seed0), device=conf.model.device, name=label
    )
samp = Sampling.from_config(conf.sampling)
episodes = {
    who: rollout(
        pol, conf.env.name, maps, [m.t_max for m in maps], 1, samp, seed=conf.seed + 6000, step_quality=False
    )
    for who, pol in pols.items()
}
table_x = {}
for rl_x in ("grpo", "budgetmix"):
    for whose in (rl_x, "base"):
        ratio = likelihood.cumulative_llr(pols[rl_x], pols["base"], episodes[whose])
        ok = ratio[ratio["success"]].groupby("trajectory")["cum_llr"].last()
        table_x[(f"{rl_x}-s{seed0} vs base", f"{whose}'s trajectories")] = {
            "successful": len(ok),
            "mean cum LLR of the successful": ok.mean() if len(ok) else float("nan"),
        }
print(pd.DataFrame(table_x).T.round(3).to_string())
