from collections import defaultdict

import numpy as np

from helpers import config
from helpers.exercises import checks


def my_step_advantages(trajectories: list, group_ids: list, gamma: float) -> list:
    """GiGPO's step advantage, one list per trajectory: trajectories[i] is a list of (anchor, reward) steps,
    group_ids[i] its task group. A_step = R_t - mean R over the step group (same task group and anchor)."""
    returns = []
    for steps in trajectories:  # R_t = r_t + gamma * R_{t+1}, backwards
        running, back = 0.0, []
        for _, reward in reversed(steps):
            running = reward + gamma * running
            back.append(running)
        returns.append(back[::-1])
    groups = defaultdict(list)
    for i, steps in enumerate(trajectories):
        for t, (anchor, _) in enumerate(steps):
            groups[(group_ids[i], anchor)].append((i, t))
    out = [[0.0] * len(steps) for steps in trajectories]
    for members in groups.values():
        if len(members) > 1:
            mean = sum(returns[i][t] for i, t in members) / len(members)
            for i, t in members:
                out[i][t] = returns[i][t] - mean
    return out


conf_d = config.load(profile)
verdict_d = checks.gigpo_step_advantages(my_step_advantages)  # gamma 0.95, as in GiGPO
print(verdict_d)
if verdict_d.passed:
    trajs_d, ids_d = checks.random_groups(n_groups=8, group_size=conf_d.train.group_size, seed=conf_d.seed)
    flat_d = np.concatenate([np.asarray(a, dtype=float) for a in my_step_advantages(trajs_d, ids_d, 0.95)])
    print(f"random groups: {np.mean(flat_d == 0):.0%} of {len(flat_d)} steps get a step advantage of 0")
    peers_d = defaultdict(int)
    for steps_d, gid_d in zip(trajs_d, ids_d, strict=True):
        for anchor_d, _ in steps_d:
            peers_d[(gid_d, anchor_d)] += 1
    print(f"{sum(v == 1 for v in peers_d.values())} of {len(peers_d)} step groups have a single step")
