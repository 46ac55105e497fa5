import numpy as np
import pandas as pd
import torch

from helpers import base_model, config, models, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

conf = config.load(profile)
base_dir = base_model.path_of(conf)
device = models.resolve_device(conf.model.device)
maps = load_tasks(conf.env.name, "train", n=conf.train.tasks_per_step, seed=conf.seed + 2, **settings(conf))
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
n_batch = len(batch)
updates = {}
for epochs, minibatch in ((1, n_batch), (1, n_batch // 2), (2, n_batch)):
    recipe = config.load(profile, train={"ppo_epochs": epochs, "minibatch_size": minibatch})
    actor_x, _ = models.load_trainable(base_dir, device=device)  # a fresh copy of the base, in memory
    ref_x, _ = models.load(base_dir, device=device, dtype=conf.model.dtype)
    opt = torch.optim.AdamW(actor_x.parameters(), lr=recipe.train.lr, weight_decay=recipe.train.weight_decay)
    got = train.ppo_update(actor_x, ref_x, opt, batch, recipe, np.random.default_rng(0))  # one RL update
    updates[f"{epochs} epoch(s), minibatches of {minibatch}"] = {
        k: got[k] for k in ("clip_frac", "approx_kl", "kl", "grad_norm")
    }
print(f"one batch of {n_batch} trajectories from the base, updated in memory (nothing is saved)")
print(pd.DataFrame(updates).T.to_string())
