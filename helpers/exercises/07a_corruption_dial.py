import pandas as pd

from helpers import base_model, config, process
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
n_maps = 4 * conf.train.tasks_per_step  # four RL steps' worth of tasks
maps = load_tasks(conf.env.name, "train", n=n_maps, seed=conf.seed + 7, **settings(conf))
sampler = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
batch = rollout(
    sampler,
    conf.env.name,
    maps,
    [m.t_max for m in maps],
    conf.train.group_size,
    Sampling.from_config(conf.sampling),
    seed=conf.seed + 7,
    step_quality=False,
)
dial = {}
for level in (0.0, 0.25, 0.5, 0.75, 1.0):
    exact, told = process.oracle_terms(
        batch, {m.task_id: m for m in maps}, conf.env.name, level, seed=conf.train.seeds[0]
    )
    dial[level] = process.agreement(exact, told)  # share of steps scored exactly, correlation with exact
print(f"the oracle's process terms on {len(batch)} base trajectories ({sum(e.n_turns for e in batch)} steps)")
print(pd.DataFrame(dial).T.rename_axis("corruption level").round(3).to_string())
