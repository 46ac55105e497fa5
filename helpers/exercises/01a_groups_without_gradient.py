import pandas as pd
import torch

from helpers import algos, base_model, config, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
g_max = 2 * conf.train.group_size
seed0 = conf.train.seeds[0]
maps = load_tasks(conf.env.name, "train", n=32, seed=conf.seed + 1, **settings(conf))
wasted = {}
models_x = {"base": base_model.path_of(conf), f"grpo-s{seed0}": train.trained_model(conf, "full", seed0)}
for who, path in models_x.items():
    actor_x = HFPolicy.from_pretrained(path, device=conf.model.device, name=who)
    episodes = rollout(
        actor_x,
        conf.env.name,
        maps,
        [m.t_max for m in maps],
        g_max,
        Sampling.from_config(conf.sampling),
        seed=conf.seed + 1,
        step_quality=False,
    )
    for G in sorted({2, 4, conf.train.group_size, g_max}):
        group_x = [e for e in episodes if e.sample < G]  # the first G samples of every task
        rewards = torch.tensor([train.rl_reward(e) for e in group_x])
        adv = algos.grpo_advantages(rewards, [e.group for e in group_x])
        flat = pd.DataFrame({"group": [e.group for e in group_x], "zero": (adv.abs() < 1e-6).numpy()})
        wasted[(who, G)] = {
            "success": float(rewards.mean()),
            "groups with all A = 0": float(flat.groupby("group")["zero"].all().mean()),
        }
print(f"{len(maps)} training tasks at the full budget; G trajectories per task")
print(pd.DataFrame(wasted).T.rename_axis(["model", "G"]).round(3).to_string())
