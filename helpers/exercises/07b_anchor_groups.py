import numpy as np
import pandas as pd

from helpers import base_model, config, process, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
g_max = 2 * conf.train.group_size
n_maps = 2 * conf.train.tasks_per_step  # two RL steps' worth of tasks
maps = load_tasks(conf.env.name, "train", n=n_maps, seed=conf.seed + 8, **settings(conf))
sampler = HFPolicy.from_pretrained(base_model.path_of(conf), device=conf.model.device, name="base")
steps_x = []
for budget_mode in train.BUDGET_MODES:
    given = train.task_budgets(budget_mode, [m.t_max for m in maps], np.random.default_rng(conf.seed))
    episodes = rollout(
        sampler,
        conf.env.name,
        maps,
        given,
        g_max,
        Sampling.from_config(conf.sampling),
        seed=conf.seed + 8,
        step_quality=False,
    )
    for G in sorted({2, conf.train.group_size, g_max}):
        group_x = [e for e in episodes if e.sample < G]  # the first G samples of every task
        sizes = process.step_group_sizes(group_x)  # one per turn of every trajectory, in order
        turn_of = [i for e in group_x for i in range(e.n_turns)]
        alone = np.equal(sizes, 1)
        steps_x.append(pd.DataFrame({"mode": budget_mode, "G": G, "turn": turn_of, "alone": alone}))
print("Share of steps whose step group has one member (GiGPO's step advantage is 0 there), by turn")
shares = pd.concat(steps_x).pivot_table(index=["mode", "G"], columns="turn", values="alone")
print(shares.round(2).to_string())
