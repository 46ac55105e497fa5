"""Likelihood analysis: how surprising are RL's actions to the base policy, and how likely are whole trajectories?

Two measurements, on any recorded trajectories (JSON lines of `helpers.rollout.Trajectory`, so transcripts of
other environments can be analysed with the same code once they are encoded with `from_transcript`):

* per-token NLL of actions under the base policy: for each action (the generated tokens of one turn), the mean
  of -log pi_base(token | context). The paper: 12.20 for RL actions vs 10.25 for base actions on Terminal-Bench,
  with heavily overlapping distributions: RL's actions stay plausible to the base model.
* the cumulative log-likelihood ratio log pi_RL(tau_<=t) - log pi_base(tau_<=t) summed over the action tokens of
  turns 1..t: the paper finds about 228 for successful RL trajectories against 26 for successful base ones:
  whole RL trajectories are far more likely under RL even though single actions are not surprising.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.policy import Policy
from helpers.rollout import ChatFormat, Trajectory


def token_logprobs(policy: Policy, trajs: list[Trajectory]) -> list[np.ndarray]:
    """Teacher-forced log-probs of every token of each trajectory (position 0, which has no context, is 0)."""
    scores = policy.score([t.token_ids[:1] for t in trajs], [t.token_ids[1:] for t in trajs])
    return [np.concatenate([[0.0], np.asarray(s, dtype=float)]) for s in scores]


def action_nll(policy: Policy, trajs: list[Trajectory]) -> pd.DataFrame:
    """Per action: mean and total negative log-likelihood of its tokens under `policy`."""
    rows = []
    for i, (tr, lp) in enumerate(zip(trajs, token_logprobs(policy, trajs), strict=True)):
        for turn, (s, e) in enumerate(tr.turn_spans()):
            nll = -lp[s:e]
            rows.append({"trajectory": i, "model": tr.model, "task_id": tr.task_id, "turn": turn + 1,
                         "n_tokens": e - s, "nll_mean": float(nll.mean()), "nll_sum": float(nll.sum()),
                         "success": tr.success})  # fmt: skip
    return pd.DataFrame(rows)


def cumulative_llr(policy_a: Policy, policy_b: Policy, trajs: list[Trajectory]) -> pd.DataFrame:
    """Per trajectory and turn t: log pi_a - log pi_b of the action tokens of turns 1..t (and of turn t alone)."""
    lp_a = token_logprobs(policy_a, trajs)
    lp_b = token_logprobs(policy_b, trajs)
    rows = []
    for i, tr in enumerate(trajs):
        cum = 0.0
        for turn, (s, e) in enumerate(tr.turn_spans()):
            step = float(lp_a[i][s:e].sum() - lp_b[i][s:e].sum())
            cum += step
            rows.append({"trajectory": i, "model": tr.model, "task_id": tr.task_id, "turn": turn + 1, "llr": step,
                         "cum_llr": cum, "success": tr.success})  # fmt: skip
    return pd.DataFrame(rows)


def from_transcript(messages: list[dict], chat: ChatFormat, model: str = "transcript", success: bool = False,
                    task_id: str = "transcript") -> Trajectory:  # fmt: skip
    """A chat transcript (system, user, then alternating assistant/user) as a Trajectory: the assistant turns
    are the actions (mask 1), everything else is context. Lets transcripts from other agents (Terminal-Bench,
    say) go through `action_nll` and `cumulative_llr`."""
    if len(messages) < 3 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        raise ValueError(
            "a transcript must start with a system and a user message and contain an assistant turn"
        )
    ids = chat.prompt_ids(messages[:2])
    prompt_len = len(ids)
    mask = [0] * len(ids)
    turns = []
    for m in messages[2:]:
        if m["role"] == "assistant":
            piece = chat.action_ids(m["content"])
            mask += [1] * len(piece)
            turns.append({"action": m["content"]})
        else:
            piece = chat.observation_ids(m["content"])
            mask += [0] * len(piece)
        ids += piece
    return Trajectory(task_id=task_id, env="transcript", model=model, budget=len(turns), t_max=len(turns), seed=0,
                      sample=0, token_ids=ids, gen_mask=mask, logprobs=[0.0] * len(ids), prompt_len=prompt_len,
                      turns=turns, success=success)  # fmt: skip
