import numpy as np
import pandas as pd
import torch

from helpers import base_model, config, likelihood, models, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
base_dir = base_model.path_of(conf)
device = models.resolve_device(conf.model.device)
half_step = max(1, conf.train.tasks_per_step // 2)  # half an RL step's tasks: 4 epochs are costly
maps = load_tasks(conf.env.name, "train", n=half_step, seed=conf.seed + 2, **settings(conf))
sampler = HFPolicy.from_pretrained(base_dir, device=device, name="base")
batch = rollout(
    sampler,
    conf.env.name,
    maps,
    [m.t_max for m in maps],
    conf.train.group_size,
    Sampling.from_config(conf.sampling),
    seed=conf.seed + 2,
    step_quality=False,
)
drift = {}
for coef in sorted({0.0, conf.train.kl_coef, 1.0}):
    recipe = config.load(profile, train={"kl_coef": coef, "ppo_epochs": 4, "minibatch_size": len(batch)})
    actor_x, tok = models.load_trainable(base_dir, device=device)  # a fresh copy of the base, in memory
    ref_x, _ = models.load(base_dir, device=device, dtype=conf.model.dtype)
    opt = torch.optim.AdamW(actor_x.parameters(), lr=recipe.train.lr, weight_decay=recipe.train.weight_decay)
    got = train.ppo_update(actor_x, ref_x, opt, batch, recipe, np.random.default_rng(0))
    ratio = likelihood.cumulative_llr(HFPolicy(actor_x, tok, name="updated"), sampler, batch)
    moved = -ratio.groupby("trajectory")["cum_llr"].last().mean()  # KL(base || updated) per trajectory
    drift[f"kl_coef {coef:g}"] = {
        "kl (mean over epochs)": got["kl"],
        "clip_frac": got["clip_frac"],
        "KL(base || updated) per trajectory": moved,
    }
print(f"4 PPO epochs on one batch of {len(batch)} trajectories, lr {conf.train.lr:g}, in memory")
print(pd.DataFrame(drift).T.to_string())
