import numpy as np
import pandas as pd

from helpers import base_model, config, fmt, likelihood, train
from helpers.envs import load_tasks, settings
from helpers.exercises import checks
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout


def my_cumulative_llr(logp_a: np.ndarray, logp_b: np.ndarray, spans: list[tuple[int, int]]) -> list[float]:
    """After each turn t: the sum over turns 1..t of log pi_a - log pi_b of the action tokens, where logp_a[j] is
    the log-prob of token j under policy a and spans[t] the [start, end) token span of turn t's action."""
    per_turn = [float(logp_a[s:e].sum() - logp_b[s:e].sum()) for s, e in spans]  # action tokens only
    return np.cumsum(per_turn).tolist()


conf_d = config.load(profile)
seed_d = conf_d.train.seeds[0]
tasks_d = load_tasks(conf_d.env.name, "test", seed=conf_d.seed, **settings(conf_d))[:6]
base_d = HFPolicy.from_pretrained(base_model.path_of(conf_d), device=conf_d.model.device, name="base")
rl_d = HFPolicy.from_pretrained(
    train.trained_model(conf_d, "full", seed_d), device=conf_d.model.device, name=f"grpo-s{seed_d}"
)
played_d = [
    tr
    for pol_d in (base_d, rl_d)
    for tr in rollout(
        pol_d,
        conf_d.env.name,
        tasks_d,
        [t.t_max for t in tasks_d],
        1,
        Sampling.from_config(conf_d.sampling),
        seed=conf_d.seed + 6000,
        step_quality=False,
    )
]
verdict_d = checks.cumulative_llr(my_cumulative_llr, rl_d, base_d, played_d)
print(verdict_d)
if verdict_d.passed:  # then each trajectory's total, by who played it
    lp_rl_d = likelihood.token_logprobs(rl_d, played_d)
    lp_base_d = likelihood.token_logprobs(base_d, played_d)
    rows_d = [
        {
            "played by": tr.model,
            "task": tr.task_id,
            "turns": len(tr.turn_spans()),
            "success": tr.success,
            "RL minus base log-likelihood, all turns": my_cumulative_llr(
                lp_rl_d[i], lp_base_d[i], tr.turn_spans()
            )[-1],
        }
        for i, tr in enumerate(played_d)
    ]
    print(fmt.table(pd.DataFrame(rows_d), digits=2, index=["played by", "task"]).to_string())
