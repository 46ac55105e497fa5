import pandas as pd

from helpers import base_model, config, probing, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
pr = conf.probing
seed0 = conf.train.seeds[0]
maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))
samp = Sampling.from_config(conf.sampling)
roster = {"base": HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")}
for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
    roster[f"{label}-s{seed0}"] = HFPolicy.from_pretrained(
        train.trained_model(conf, mode_x, seed0), device=conf.model.device, name=f"{label}-s{seed0}"
    )
# the notebook's matched states of RL seed 0, rebuilt in memory from the same rollouts
episodes = {
    who: rollout(roster[who], conf.env.name, maps, [m.t_max for m in maps], 2, samp, seed=conf.seed + 4000)
    for who in ("base", f"grpo-s{seed0}")
}
states_x = probing.matched_pool(
    episodes["base"],
    episodes[f"grpo-s{seed0}"],
    {m.task_id: m for m in maps},
    pr.n_states,
    seed=conf.seed + 4001,
)
scores = {
    who: probing.state_quality(
        pol,
        states_x,
        pr.g,
        Sampling(samp.temperature, samp.top_p, samp.max_new_tokens, seed=conf.seed + 4002),
    )
    for who, pol in roster.items()
}
per_x = probing.state_table(states_x, scores)
versus = {}
for who in list(roster)[1:]:
    w = probing.win_summary(per_x, who, "base")
    versus[f"{who} vs base"] = {
        "live states": w["n_live"],
        "better": w[f"{who}_better"],
        "tie": w["tie"],
        "worse": w["base_better"],
        "quality": w[f"mean_quality_{who}"],
        "quality of base": w["mean_quality_base"],
    }
print(f"{len(states_x)} matched states of RL seed {seed0}, {pr.g} actions per policy per state")
print(pd.DataFrame(versus).T.round(3).to_string())
