"""The RL maths of the kit, written to match verl's `core_algos.py` (and verl-agent's GiGPO) formula by formula.

Everything here is a pure function on tensors; `helpers.train` wires them into the loop. Shapes: `B` trajectories,
`L` tokens per (padded) trajectory. `mask[b, l] = 1` marks a token the policy generated; prompt, environment
(observation) and padding tokens have 0 and never reach a loss (they are excluded by `agg_loss`/`masked_mean`,
so they get exactly zero gradient).

- GRPO outcome advantage (verl `compute_grpo_outcome_advantage`): per group of trajectories of the same task,
  A_i = (r_i - mean) / (std + eps) with the unbiased std, or A_i = r_i - mean without std normalisation
  (Dr.GRPO). A group of one has mean 0 and std 1. The scalar is broadcast over the trajectory's response mask.
- GiGPO (verl-agent `core_gigpo.py`): A = A_episode + w * A_step; steps of one task group with an identical anchor
  observation form a step group; step return R_t = r_t + gamma * R_{t+1}; A_step = R_t - mean (optionally / std)
  over the step group, 0 for a step group of one. The episode mean is over trajectories, or over every step of
  the group as verl-agent's default (`compute_mean_std_cross_all_data`).
- GAE (verl `compute_gae_advantage_return`): token-level TD residuals over the response tokens only (observation
  tokens are skipped), returns = advantages + values, advantages whitened over the batch (`masked_whiten`).
- Clipped value loss (verl `compute_value_loss`): 0.5 * agg(max((V - R)^2, (clip(V, V_old -+ c) - R)^2)).
- KL to the reference (verl `kl_penalty`): k1, |k1|, k2, and `low_var_kl` (k3) with verl's clamps.
- PPO-clip policy loss (verl `compute_policy_loss_vanilla`), with dual clip (clip_ratio_c = 3) for negative
  advantages, which verl's vanilla loss always applies.
- Loss aggregation (verl `agg_loss`): `token-mean` (the actor default), `seq-mean-token-sum`,
  `seq-mean-token-mean`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch
import torch.nn.functional as F

# ------------------------------------------------------------------------------------------ masked reductions


def _check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"shapes must match, got {shapes}")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of `x` where `mask` is 1. Masked entries are selected away (not multiplied by 0), so a NaN or inf at a
    masked position cannot leak into the result, and its gradient there is exactly 0."""
    _check_same_shape(x=x, mask=mask)
    picked = torch.where(mask.bool(), x, torch.zeros_like(x))
    return picked.sum() if dim is None else picked.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of `x` over the entries where `mask` is 1: sum(x * mask) / sum(mask) (verl `masked_mean`).

    An all-zero mask gives 0 rather than verl's NaN (the count is clamped to at least 1)."""
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim=dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1.0)


# ------------------------------------------------------------------------------------------------ advantages


def _group_members(group_ids: Sequence[Hashable], n: int) -> dict[Hashable, list[int]]:
    if isinstance(group_ids, torch.Tensor):
        group_ids = group_ids.tolist()  # 0-d tensors hash by identity, not by value
    if len(group_ids) != n:
        raise ValueError(f"group_ids has {len(group_ids)} entries but there are {n} rewards")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    return members


def grpo_advantages(
    rewards: torch.Tensor, group_ids: Sequence[Hashable], eps: float = 1e-6, norm_by_std: bool = True
) -> torch.Tensor:
    """GRPO outcome advantages, one per trajectory (verl `compute_grpo_outcome_advantage`).

    For each group g (the G trajectories sampled for one task): mu_g = mean of its rewards, sigma_g = their
    unbiased standard deviation (a group of one: mu = 0, sigma = 1). Then
        A_i = (r_i - mu_g) / (sigma_g + eps)     (norm_by_std=True, GRPO)
        A_i = r_i - mu_g                         (norm_by_std=False, Dr.GRPO)
    A group whose rewards are all equal gets A = 0: it carries no learning signal.
    `rewards` is the trajectory score (verl sums the token-level rewards); use `broadcast` to spread A over
    the response mask.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (one score per trajectory), got shape {tuple(rewards.shape)}")
    rewards = rewards.detach()
    if not rewards.is_floating_point():
        rewards = rewards.float()
    advantages = torch.empty_like(rewards)
    for members in _group_members(group_ids, rewards.numel()).values():
        r = rewards[members]
        if len(members) == 1:
            mu, sigma = 0.0, 1.0
        else:
            mu, sigma = r.mean(), r.std(unbiased=True)
        advantages[members] = (r - mu) / (sigma + eps) if norm_by_std else r - mu
    return advantages


def broadcast(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-trajectory advantages [B] spread over the tokens [B, L]: A[b] * mask[b, l] (0 off the mask)."""
    if advantages.dim() != 1 or mask.dim() != 2 or advantages.shape[0] != mask.shape[0]:
        raise ValueError(
            f"need advantages [B] and mask [B, L], got {tuple(advantages.shape)} and {tuple(mask.shape)}"
        )
    return advantages[:, None] * mask.to(advantages.dtype)


def discounted_returns(step_rewards: Sequence[float], gamma: float = 0.95) -> list[float]:
    """Step returns of one trajectory: R_t = r_t + gamma * R_{t+1}, R_{T} = 0 (verl-agent Eq. 5)."""
    returns = [0.0] * len(step_rewards)
    running = 0.0
    for t in reversed(range(len(step_rewards))):
        running = float(step_rewards[t]) + gamma * running
        returns[t] = running
    return returns


def gigpo_advantages(
    trajectories: Sequence[Sequence[tuple[Hashable, float]]],
    group_ids: Sequence[Hashable],
    episode_rewards: Sequence[float] | None = None,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    eps: float = 1e-6,
    norm_by_std: bool = False,
    episode_over_steps: bool = False,
) -> list[torch.Tensor]:
    """GiGPO advantages (verl-agent `compute_gigpo_outcome_advantage`), one value per step of each trajectory.

    Input: `trajectories[i]` is the list of steps of trajectory i, each `(anchor_obs, reward)`: the observation
    the action was taken in, without history (any hashable, e.g. the rendered map), and the step's reward;
    `group_ids[i]` is its task group (the G trajectories of one task share it); `episode_rewards[i]` is its
    episode score (default: the sum of its step rewards).

        A_episode(i)  = GRPO advantage of the episode scores within the task group
        R_t           = r_t + gamma * R_{t+1}                         (step return)
        A_step(i, t)  = R_t - mean of R over the step group  (/ (std + eps) with norm_by_std)
        A(i, t)       = A_episode(i) + step_weight * A_step(i, t)

    A step group is every step, at any position of any trajectory of the same task group, whose anchor
    observation is identical. A step group of one gets A_step = 0. `norm_by_std=False` is verl-agent's default
    mode ("mean_norm"); it applies to both levels, as there. Returns one tensor of length len(trajectory) each.

    `episode_over_steps=True` is verl-agent's default (`compute_mean_std_cross_all_data=True`): its batch has one
    row per step, each carrying its episode's score, and the episode-level mean (and std) of a task group is taken
    over those rows, so a trajectory counts once per step. `False` takes them over trajectories (plain GRPO).
    """
    n = len(trajectories)
    if isinstance(group_ids, torch.Tensor):
        group_ids = group_ids.tolist()
    if len(group_ids) != n:
        raise ValueError(f"group_ids has {len(group_ids)} entries but there are {n} trajectories")
    if episode_rewards is None:
        episode_rewards = [sum(float(r) for _, r in steps) for steps in trajectories]
    if len(episode_rewards) != n:
        raise ValueError(f"episode_rewards has {len(episode_rewards)} entries but there are {n} trajectories")
    for i, steps in enumerate(trajectories):
        if len(steps) == 0:
            raise ValueError(f"trajectory {i} has no steps")

    # Episode level: GRPO within each task group (over trajectories, or over step rows as verl-agent).
    if episode_over_steps:
        rows = [i for i, steps in enumerate(trajectories) for _ in steps]
        per_row = grpo_advantages(
            torch.tensor([float(episode_rewards[i]) for i in rows], dtype=torch.float32),
            [group_ids[i] for i in rows],
            eps=eps,
            norm_by_std=norm_by_std,
        )
        a_episode = torch.empty(n)
        for r, i in enumerate(rows):
            a_episode[i] = per_row[r]  # every row of a trajectory has the same value
    else:
        a_episode = grpo_advantages(
            torch.tensor(episode_rewards, dtype=torch.float32), group_ids, eps=eps, norm_by_std=norm_by_std
        )

    # Step level: group (task group, anchor observation) over every step of every trajectory.
    returns = [discounted_returns([r for _, r in steps], gamma) for steps in trajectories]
    step_groups: dict[tuple[Hashable, Hashable], list[tuple[int, int]]] = defaultdict(list)
    for i, steps in enumerate(trajectories):
        for t, (anchor, _) in enumerate(steps):
            try:
                step_groups[(group_ids[i], anchor)].append((i, t))
            except TypeError as err:
                raise TypeError(
                    f"anchor observation of trajectory {i}, step {t} is not hashable: {err}"
                ) from None
    a_step = [torch.zeros(len(steps)) for steps in trajectories]
    for members in step_groups.values():
        if len(members) == 1:
            continue  # a singleton step group has no peers to compare with: A_step = 0
        values = torch.tensor([returns[i][t] for i, t in members], dtype=torch.float32)
        centred = values - values.mean()
        if norm_by_std:
            centred = centred / (values.std(unbiased=True) + eps)
        for (i, t), a in zip(members, centred, strict=True):
            a_step[i][t] = a

    return [a_episode[i] + step_weight * a_step[i] for i in range(n)]


# ----------------------------------------------------------------------------------- PPO: GAE and the critic


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of `x` over the entries where `mask` is 1 (verl `masked_var`; Bessel-corrected when `unbiased`)."""
    centred = x - masked_mean(x, mask)
    var = masked_mean(centred.square(), mask)
    if unbiased:
        n = mask.to(x.dtype).sum()
        if n < 2:
            raise ValueError(f"masked_var needs at least 2 unmasked entries, got {int(n)}")
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-8) with mean and unbiased var over all masked entries of the batch
    (verl `masked_whiten`); `shift_mean=False` adds the mean back."""
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + 1e-8)
    return out + mean if not shift_mean else out


def gae_advantages(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    whiten: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the response tokens (verl `compute_gae_advantage_return`).

    All tensors [B, L]; `values[b, t]` is the critic's value of the state before token t, `token_rewards` the
    reward of each token (the outcome on the last generated one), `mask` 1 on generated tokens. Going backwards,
        delta_t = r_t + gamma * V_next - V_t,   A_t = delta_t + gamma * lam * A_next
    where V_next and A_next come from the next *generated* token: on observation and padding tokens (mask 0) both
    are carried through unchanged, so environment tokens neither discount nor bootstrap. Returns
    (advantages, returns) with returns = A + V taken before the advantages are whitened over the batch
    (`masked_whiten`, as verl; `whiten=False` skips it). Off the mask the values mean nothing.
    """
    _check_same_shape(token_rewards=token_rewards, values=values, mask=mask)
    m = mask.to(values.dtype)
    with torch.no_grad():
        next_value = torch.zeros_like(values[:, 0])
        last = torch.zeros_like(values[:, 0])
        out = torch.zeros_like(values)
        for t in reversed(range(values.shape[1])):
            delta = token_rewards[:, t] + gamma * next_value - values[:, t]
            here = delta + gamma * lam * last
            next_value = values[:, t] * m[:, t] + (1 - m[:, t]) * next_value
            last = here * m[:, t] + (1 - m[:, t]) * last
            out[:, t] = last
        returns = out + values
        if whiten:
            out = masked_whiten(out, mask)
    return out, returns


def value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
    mask: torch.Tensor,
    cliprange_value: float = 0.5,
    coef: float = 0.5,
    agg: str = "token-mean",
) -> tuple[torch.Tensor, float]:
    """PPO's clipped value loss (verl `compute_value_loss`), all tensors [B, L]:
        V_clip = clip(V, V_old - c, V_old + c)
        L = coef * agg(max((V - R)^2, (V_clip - R)^2))          (verl: coef = 0.5, c = `cliprange_value` = 0.5)
    and the share of masked tokens where the clipped term is the larger (`vf_clipfrac`)."""
    _check_same_shape(vpreds=vpreds, returns=returns, old_values=old_values, mask=mask)
    clipped = torch.clamp(vpreds, old_values - cliprange_value, old_values + cliprange_value)
    l1 = (vpreds - returns).square()
    l2 = (clipped - returns).square()
    loss = coef * agg_loss(torch.maximum(l1, l2), mask, agg)
    with torch.no_grad():
        frac = masked_mean((l2 > l1).float(), mask).item()
    return loss, frac


# ------------------------------------------------------------------------------------------------ KL penalty

KL_KINDS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from the log-probs of the sampled tokens (verl `kl_penalty`).

    - "kl" / "k1":          logp - ref_logp
    - "abs":                |logp - ref_logp|
    - "mse" / "k2":         0.5 * (logp - ref_logp)^2
    - "low_var_kl" / "k3":  kl = clamp(ref_logp - logp, -20, 20); clamp(exp(kl) - kl - 1, -10, 10)
      (Schulman's k3: non-negative and unbiased; the clamps keep exp() finite and the penalty bounded).
    Aggregate the result with `agg_loss` over the response mask.
    """
    _check_same_shape(logp=logp, ref_logp=ref_logp)
    diff = logp - ref_logp
    if kind in ("kl", "k1"):
        return diff
    if kind == "abs":
        return diff.abs()
    if kind in ("mse", "k2"):
        return 0.5 * diff.square()
    if kind in ("low_var_kl", "k3"):
        kl = torch.clamp(ref_logp - logp, min=-20.0, max=20.0)
        return torch.clamp(torch.exp(kl) - kl - 1.0, min=-10.0, max=10.0)
    raise ValueError(f"unknown KL estimator {kind!r}; choose one of {KL_KINDS}")


# ------------------------------------------------------------------------------------------ loss aggregation

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def agg_loss(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Reduce a per-token loss [B, L] to a scalar over the masked tokens (verl `agg_loss`).

    - "token-mean":          sum over all masked tokens of the batch / their count (verl's actor default)
    - "seq-mean-token-sum":  mean over trajectories of each trajectory's token sum
    - "seq-mean-token-mean": mean over trajectories of each trajectory's token mean
    A trajectory without masked tokens contributes 0 (verl would give NaN there).
    """
    _check_same_shape(loss_mat=loss_mat, mask=mask)
    if loss_mat.dim() != 2:
        raise ValueError(f"loss_mat must be [B, L], got shape {tuple(loss_mat.shape)}")
    if mode == "token-mean":
        return masked_mean(loss_mat, mask)
    if mode == "seq-mean-token-sum":
        return masked_sum(loss_mat, mask, dim=-1).mean()
    if mode == "seq-mean-token-mean":
        return masked_mean(loss_mat, mask, dim=-1).mean()
    raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {AGG_MODES}")


# ----------------------------------------------------------------------------------------------- policy loss


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip policy loss with dual clip, as verl's `compute_policy_loss_vanilla`.

    All tensors are [B, L] (advantages already broadcast over tokens).
        log_ratio = clamp(logp - old_logp, -20, 20);  ratio = exp(log_ratio)
        L1 = -A * ratio;  L2 = -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
        L_clip = max(L1, L2)
        L = min(L_clip, -A * clip_ratio_c)  where A < 0  (dual clip: bounds the loss of a very large ratio),
            L_clip                          elsewhere
    and the loss is `agg_loss(L, mask, agg)`. clip_ratio_low/high default to clip_ratio.
    Stats (floats, over masked tokens): `clip_frac` (share where L2 > L1, i.e. the clip is active),
    `clip_frac_lower` (share where the dual clip is active), `approx_kl` = mean of (old_logp - logp) (verl's
    ppo_kl), `ratio_mean`.
    """
    _check_same_shape(logp=logp, old_logp=old_logp, advantages=advantages, mask=mask)
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c (the dual-clip bound) must be > 1, got {clip_ratio_c}")
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high

    # Positions off the mask are set to neutral values first (ratio 1, A = 0): they are excluded from the loss
    # anyway, and this keeps a NaN or inf stored there out of the backward pass.
    keep = mask.bool()
    advantages = torch.where(keep, advantages, torch.zeros_like(advantages))
    log_ratio = torch.where(keep, logp - old_logp, torch.zeros_like(logp))
    log_ratio = torch.clamp(log_ratio, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    losses_unclipped = -advantages * ratio
    losses_clipped = -advantages * torch.clamp(ratio, 1.0 - low, 1.0 + high)
    losses_clip = torch.maximum(losses_unclipped, losses_clipped)
    losses_dual = torch.minimum(losses_clip, -advantages * clip_ratio_c)
    losses = torch.where(advantages < 0, losses_dual, losses_clip)
    loss = agg_loss(losses, mask, agg)

    with torch.no_grad():
        stats = {
            "clip_frac": masked_mean((losses_clipped > losses_unclipped).float(), mask).item(),
            "clip_frac_lower": masked_mean(
                ((losses_clip > -advantages * clip_ratio_c) & (advantages < 0)).float(), mask
            ).item(),
            "approx_kl": masked_mean(-log_ratio, mask).item(),
            "ratio_mean": masked_mean(ratio, mask).item(),
        }
    return loss, stats


# ------------------------------------------------------------------------------------- logits -> log-probs


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log pi(label) per position: log_softmax(logits)[..., label]. logits [..., V], labels [...] -> [...]."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match")
    return torch.gather(F.log_softmax(logits.float(), dim=-1), -1, labels.long().unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution at each position: logsumexp(z) - sum softmax(z) * z
    (verl `entropy_from_logits`). logits [..., V] -> [...]."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (F.softmax(logits, dim=-1) * logits).sum(dim=-1)
