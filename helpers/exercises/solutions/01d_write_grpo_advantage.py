import pandas as pd

from helpers import base_model, config, fmt, train
from helpers.envs import load_tasks, settings
from helpers.exercises import checks
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout


def my_grpo_advantages(rewards: list[float], group_ids: list, norm_by_std: bool = True) -> list[float]:
    """GRPO advantage of each trajectory: its reward minus its group's mean, over the group's sample standard
    deviation + 1e-6 (not divided when norm_by_std is False). A group of one keeps its reward (mu 0, sigma 1)."""
    groups = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for members in groups.values():
        r = [rewards[i] for i in members]
        if len(r) == 1:
            mu, sigma = 0.0, 1.0
        else:
            mu = sum(r) / len(r)
            sigma = (sum((x - mu) ** 2 for x in r) / (len(r) - 1)) ** 0.5  # unbiased, as verl
        for i in members:
            out[i] = (rewards[i] - mu) / (sigma + 1e-6) if norm_by_std else rewards[i] - mu
    return out


verdict_d = checks.grpo_advantages(my_grpo_advantages)
print(verdict_d)
if verdict_d.passed:  # then apply it to one batch the base plays, G samples per training task
    conf_d = config.load(profile)
    tasks_d = load_tasks(conf_d.env.name, "train", n=8, seed=conf_d.seed + 1, **settings(conf_d))
    base_d = HFPolicy.from_pretrained(base_model.path_of(conf_d), device=conf_d.model.device, name="base")
    batch_d = rollout(
        base_d,
        conf_d.env.name,
        tasks_d,
        [t.t_max for t in tasks_d],
        conf_d.train.group_size,
        Sampling.from_config(conf_d.sampling),
        seed=conf_d.seed + 1,
        step_quality=False,
    )
    frame_d = pd.DataFrame(
        {"task": [e.group for e in batch_d], "reward": [train.rl_reward(e) for e in batch_d]}
    )
    for norm_d, label_d in ((True, "GRPO"), (False, "Dr.GRPO")):
        frame_d[label_d] = my_grpo_advantages(list(frame_d["reward"]), list(frame_d["task"]), norm_d)
    rows_d = {}
    for task_d, grp_d in frame_d.groupby("task"):
        won_d, lost_d = grp_d[grp_d["reward"] > 0], grp_d[grp_d["reward"] <= 0]
        rows_d[task_d] = {
            "successes": f"{len(won_d)} of {len(grp_d)}",
            "GRPO A of a success": won_d["GRPO"].mean() if len(won_d) else None,
            "GRPO A of a failure": lost_d["GRPO"].mean() if len(lost_d) else None,
            "Dr.GRPO A of a success": won_d["Dr.GRPO"].mean() if len(won_d) else None,
        }
    print(f"The base on {len(tasks_d)} training tasks, {conf_d.train.group_size} trajectories each:")
    print(fmt.table(pd.DataFrame(rows_d).T.rename_axis("group (task|budget)"), digits=3).to_string())
