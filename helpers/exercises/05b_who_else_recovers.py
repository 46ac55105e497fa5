import numpy as np
import pandas as pd

from helpers import base_model, config, metrics, probing, store, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling, Tempered
from helpers.rollout import ChatFormat, rollout

conf = config.load(profile)
pr = conf.probing
seed0 = conf.train.seeds[0]
maps = load_tasks(conf.env.name, "test", seed=conf.seed, **settings(conf))
samp = Sampling.from_config(conf.sampling)
base_dir = base_model.path_of(conf)
sharp_t = store.Run.read_metrics(conf.results_name, "02_budgetmix_training")["sharpened"]["temperature"]
roster = {
    "base": HFPolicy.from_pretrained(base_dir, device=conf.model.device, name="base"),
    "sharp": Tempered(HFPolicy.from_pretrained(base_dir, device=conf.model.device), sharp_t, name="sharp"),
}
for mode_x, label in (("full", "grpo"), ("budgetmix", "budgetmix")):
    roster[f"{label}-s{seed0}"] = HFPolicy.from_pretrained(
        train.trained_model(conf, mode_x, seed0), device=conf.model.device, name=f"{label}-s{seed0}"
    )
# the notebook's error states of RL seed 0, rebuilt in memory from the same rollouts and seeds
episodes = {
    who: rollout(roster[who], conf.env.name, maps, [m.t_max for m in maps], 2, samp, seed=conf.seed + 4000)
    for who in ("base", f"grpo-s{seed0}")
}
cands = probing.matched_pool(
    episodes["base"],
    episodes[f"grpo-s{seed0}"],
    {m.task_id: m for m in maps},
    min(4 * pr.n_error_states, 400),
    seed=conf.seed + 5000,
    at_most=True,
)
perm = np.random.default_rng(conf.seed + 5001).permutation(len(cands))
err_x = probing.error_pool(
    [cands[j] for j in perm],
    ChatFormat(roster["base"].tokenizer),
    conf.seed + 5002,
    pr.n_error_states,
    probing.attempts_of(episodes["base"]),
)
success_x = {
    who: probing.continuation_success(pol, err_x, pr.n_continuations, samp, conf.seed + 5004)
    for who, pol in roster.items()
}
recover = {}
for who, v in success_x.items():
    mid, lo, hi = metrics.nested_bootstrap(
        [v - success_x["base"]], lambda x: x, conf.eval.n_bootstrap, conf.eval.ci, conf.seed
    )
    recover[who] = {
        "continuation success": round(float(v.mean()), 3),
        "minus base (points)": f"{100 * mid:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]",
    }
print(f"{len(err_x)} error states; the best any policy can do: {probing.best_success(err_x).mean():.3f}")
print(pd.DataFrame(recover).T.to_string())
