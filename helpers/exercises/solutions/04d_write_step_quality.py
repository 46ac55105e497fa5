import copy

import numpy as np

from helpers import config
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, settings
from helpers.exercises import checks


def my_step_quality(q: np.ndarray, action: int | None) -> float:
    """The oracle's score of one reply: q [4] holds Q* of each move with the remaining budget as horizon,
    `action` the move the reply names (an index into frozenlake.ACTIONS) or None for an invalid reply."""
    if action is None:  # no parsable move: the worst score
        return 0.0
    best = float(np.max(q))
    if best <= 0:  # a dead state: no move can still succeed, every valid move is as good as any other
        return 1.0
    return float(q[action] / best)


conf_d = config.load(profile)
maps_d = load_tasks("frozenlake", "test", seed=conf_d.seed, **settings(conf_d, "frozenlake"))[:12]
rng_d = np.random.default_rng(conf_d.seed)
paused_d = []  # (an environment paused at a state, a reply to score there)
for m in maps_d:
    env_d = fl.FrozenLakeEnv()
    env_d.reset(m, m.t_max, seed=int(rng_d.integers(1 << 30)))
    while not env_d.done:
        replies_d = [f"<answer>{move}</answer>" for move in fl.ACTIONS] + ["I will go left"]
        paused_d += [(copy.deepcopy(env_d), r) for r in replies_d]
        env_d.step(f"<answer>{fl.ACTIONS[int(rng_d.integers(4))]}</answer>")
verdict_d = checks.step_quality(my_step_quality, paused_d)
print(verdict_d)
if verdict_d.passed:
    dead_d = [env.is_dead() for env, r in paused_d if r.startswith("<answer>")]
    print(
        f"{len(paused_d)} (state, reply) pairs on {len(maps_d)} maps; {np.mean(dead_d):.0%} of them at dead states"
    )
