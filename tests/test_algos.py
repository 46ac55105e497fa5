"""helpers.algos against hand-computed values and verl's formulas: advantages, KL estimators, loss aggregation,
the PPO-clip loss, and that environment (masked) tokens never receive gradient."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import algos

# ------------------------------------------------------------------------------------------------------- GRPO


def test_grpo_group_of_one_uses_mean_zero_std_one():
    adv = algos.grpo_advantages(torch.tensor([3.0], dtype=torch.float64), ["only"])
    assert adv.dtype == torch.float64
    assert adv.tolist() == pytest.approx([3.0 / (1.0 + 1e-6)], rel=1e-12)
    adv = algos.grpo_advantages(torch.tensor([3.0]), ["only"], norm_by_std=False)
    assert adv.tolist() == pytest.approx([3.0])


def test_grpo_equal_rewards_give_zero_advantage():
    for norm in (True, False):
        adv = algos.grpo_advantages(
            torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]), ["a", "a", "a", "b", "b"], norm_by_std=norm
        )
        assert torch.equal(adv, torch.zeros(5))


def test_grpo_mixed_groups_hand_computed():
    # Groups interleaved on purpose: a = {1, 0, 0, 1}, b = {0.5, 2}, c = {5} (singleton).
    rewards = torch.tensor([1.0, 0.5, 0.0, 0.0, 5.0, 2.0, 1.0])
    groups = ["a", "b", "a", "a", "c", "b", "a"]
    # a: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3); b: mean 1.25, std sqrt(2 * 0.75^2 / 1) = 0.75 sqrt(2)
    sa, sb = math.sqrt(1 / 3), 0.75 * math.sqrt(2)
    expected = [0.5 / sa, -0.75 / sb, -0.5 / sa, -0.5 / sa, 5.0, 0.75 / sb, 0.5 / sa]
    adv = algos.grpo_advantages(rewards, groups, eps=0.0)
    assert adv.tolist() == pytest.approx(expected, rel=1e-6)
    adv_eps = algos.grpo_advantages(rewards, groups)  # default eps 1e-6 in the denominator
    assert adv_eps[0].item() == pytest.approx(0.5 / (sa + 1e-6), rel=1e-6)


def test_grpo_without_std_is_centred_reward():
    rewards = torch.tensor([1.0, 0.5, 0.0, 0.0, 5.0, 2.0, 1.0])
    groups = ["a", "b", "a", "a", "c", "b", "a"]
    adv = algos.grpo_advantages(rewards, groups, norm_by_std=False)
    assert adv.tolist() == pytest.approx([0.5, -0.75, -0.5, -0.5, 5.0, 0.75, 0.5])


def test_grpo_accepts_tensor_and_int_group_ids():
    rewards = torch.tensor([1.0, 0.0, 2.0, 2.0])
    by_list = algos.grpo_advantages(rewards, [7, 7, 9, 9])
    by_tensor = algos.grpo_advantages(rewards, torch.tensor([7, 7, 9, 9]))
    assert torch.equal(by_list, by_tensor)
    assert by_list[2:].tolist() == [0.0, 0.0]


def test_grpo_bad_input():
    with pytest.raises(ValueError, match="group_ids has 2 entries"):
        algos.grpo_advantages(torch.tensor([1.0, 0.0, 1.0]), ["a", "a"])
    with pytest.raises(ValueError, match="1-D"):
        algos.grpo_advantages(torch.ones(2, 3), ["a", "a"])


def test_broadcast_over_response_mask():
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]])
    out = algos.broadcast(torch.tensor([2.0, -1.0]), mask)
    assert out.tolist() == [[0.0, 2.0, 2.0, 0.0], [-1.0, 0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="advantages"):
        algos.broadcast(torch.tensor([1.0]), mask)


# ------------------------------------------------------------------------------------------------------ GiGPO


def test_discounted_returns():
    assert algos.discounted_returns([0.0, 0.0, 1.0], gamma=0.95) == pytest.approx([0.9025, 0.95, 1.0])
    assert algos.discounted_returns([1.0, 1.0], gamma=0.5) == pytest.approx([1.5, 1.0])


def _gigpo_example():
    # Task group g: three trajectories sharing anchor states s0 (all) and s1 (trajectories 0 and 2).
    # Task group h: one trajectory whose first anchor equals g's s0 but belongs to another task group.
    trajectories = [
        [("s0", 0.0), ("s1", 0.0), ("s2", 1.0)],  # success; returns 0.9025, 0.95, 1
        [("s0", 0.0), ("s3", 0.0)],  # returns 0, 0
        [("s0", 0.0), ("s1", 0.0), ("s4", 0.0)],  # returns 0, 0, 0
        [("s0", 1.0)],  # other task
    ]
    return trajectories, ["g", "g", "g", "h"]


def test_gigpo_hand_made_example_mean_norm():
    trajectories, groups = _gigpo_example()
    adv = algos.gigpo_advantages(trajectories, groups, gamma=0.95)
    # Episode: g scores (1, 0, 0) -> mean 1/3 -> (2/3, -1/3, -1/3); h is a singleton -> 1 - 0 = 1.
    # Step group (g, s0): returns (0.9025, 0, 0), mean 0.9025/3. Step group (g, s1): (0.95, 0), mean 0.475.
    # (g, s2), (g, s3), (g, s4), (h, s0) are singletons -> 0.
    m0 = 0.9025 / 3
    expected = [
        [2 / 3 + (0.9025 - m0), 2 / 3 + 0.475, 2 / 3],
        [-1 / 3 - m0, -1 / 3],
        [-1 / 3 - m0, -1 / 3 - 0.475, -1 / 3],
        [1.0],
    ]
    assert len(adv) == 4
    for got, want in zip(adv, expected, strict=True):
        assert got.tolist() == pytest.approx(want, abs=1e-6)


def test_gigpo_step_weight_and_std_mode():
    trajectories, groups = _gigpo_example()
    half = algos.gigpo_advantages(trajectories, groups, step_weight=0.5)
    assert half[0][1].item() == pytest.approx(2 / 3 + 0.5 * 0.475, abs=1e-6)

    std = algos.gigpo_advantages(trajectories, groups, norm_by_std=True, eps=0.0)
    # Episode (1, 0, 0): std sqrt(1/3) -> (2/3)/sqrt(1/3). Step (g, s1): (0.95, 0), std 0.95/sqrt(2) -> +-1/sqrt(2).
    # Step (g, s0): (0.9025, 0, 0) is the episode pattern scaled -> same standardised values.
    z_top, z_low = (2 / 3) / math.sqrt(1 / 3), (-1 / 3) / math.sqrt(1 / 3)
    assert std[0].tolist() == pytest.approx([2 * z_top, z_top + 1 / math.sqrt(2), z_top], abs=1e-5)
    assert std[2].tolist() == pytest.approx([2 * z_low, z_low - 1 / math.sqrt(2), z_low], abs=1e-5)
    assert std[3].tolist() == pytest.approx([1.0])


def test_gigpo_explicit_episode_rewards_and_errors():
    trajectories, groups = _gigpo_example()
    adv = algos.gigpo_advantages(trajectories, groups, episode_rewards=[0.0, 0.0, 0.0, 0.0])
    assert adv[1][1].item() == pytest.approx(0.0)  # singleton step, zero episode advantage
    with pytest.raises(ValueError, match="group_ids"):
        algos.gigpo_advantages(trajectories, ["g"])
    with pytest.raises(ValueError, match="episode_rewards"):
        algos.gigpo_advantages(trajectories, groups, episode_rewards=[1.0])
    with pytest.raises(TypeError, match="trajectory 0, step 0 is not hashable"):
        algos.gigpo_advantages([[(["a", "list"], 1.0)]], ["g"])
    with pytest.raises(ValueError, match="trajectory 1 has no steps"):
        algos.gigpo_advantages([[("s", 1.0)], []], ["g", "g"])


# ------------------------------------------------------------------------------------------------- KL penalty


def test_kl_kinds_zero_when_equal():
    logp = torch.log(torch.tensor([0.1, 0.5, 0.9]))
    for kind in algos.KL_KINDS:
        assert torch.equal(algos.kl_penalty(logp, logp.clone(), kind), torch.zeros(3)), kind


def test_kl_kind_values():
    logp, ref = torch.tensor([math.log(0.3)]), torch.tensor([math.log(0.5)])
    d = math.log(0.3) - math.log(0.5)
    assert algos.kl_penalty(logp, ref, "kl").item() == pytest.approx(d)
    assert algos.kl_penalty(logp, ref, "abs").item() == pytest.approx(abs(d))
    assert algos.kl_penalty(logp, ref, "mse").item() == pytest.approx(0.5 * d * d)
    # k3 in the unclamped middle: r = p_ref / p = 5/3 -> r - log r - 1
    assert algos.kl_penalty(logp, ref, "low_var_kl").item() == pytest.approx(
        5 / 3 - math.log(5 / 3) - 1, rel=1e-6
    )
    assert algos.kl_penalty(logp, ref, "k3").item() == algos.kl_penalty(logp, ref).item()  # default is k3


def test_low_var_kl_clamps():
    logp = torch.zeros(6)
    ref = torch.tensor([1e4, 30.0, 2.6, -30.0, -1e4, -11.5])
    value = algos.kl_penalty(logp, ref, "low_var_kl")
    # Large |ref - logp| on either side hits the outer clamp at 10 (the inner clamp to [-20, 20] keeps exp finite).
    assert value[[0, 1, 3, 4]].tolist() == [10.0, 10.0, 10.0, 10.0]
    # Just past the clamp on each side: exp(2.6) - 3.6 = 9.86 < 10 stays; -11.5 -> e^-11.5 + 10.5 > 10 clamps.
    assert value[2].item() == pytest.approx(math.exp(2.6) - 2.6 - 1, rel=1e-6)
    assert value[5].item() == 10.0
    assert torch.all(torch.isfinite(value))


def test_low_var_kl_gradient_finite_and_zero_at_clamp():
    logp = torch.tensor([0.0, 0.0, math.log(0.3)], requires_grad=True)
    ref = torch.tensor([1e4, -1e4, math.log(0.5)])
    algos.kl_penalty(logp, ref, "low_var_kl").sum().backward()
    grad = logp.grad.tolist()
    assert grad[0] == 0.0 and grad[1] == 0.0  # clamped: no gradient, and no NaN from exp overflow
    assert grad[2] == pytest.approx(1 - 0.5 / 0.3, rel=1e-5)  # d/dlogp [e^(ref-logp) - (ref-logp) - 1]


def test_k1_and_k3_expectations_equal_true_kl_direction():
    # Under x ~ pi, E[k1] = E[k3] = KL(pi || pi_ref): the sign convention of logp vs ref_logp matters.
    pi = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    ref = torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    true_kl = (pi * (pi.log() - ref.log())).sum().item()
    for kind in ("kl", "low_var_kl"):
        expected = (pi * algos.kl_penalty(pi.log(), ref.log(), kind)).sum().item()
        assert expected == pytest.approx(true_kl, rel=1e-9), kind
    assert torch.all(algos.kl_penalty(pi.log(), ref.log(), "low_var_kl") >= 0)


def test_kl_bad_input():
    with pytest.raises(ValueError, match="unknown KL estimator 'full'"):
        algos.kl_penalty(torch.zeros(2), torch.zeros(2), "full")
    with pytest.raises(ValueError, match="shapes must match"):
        algos.kl_penalty(torch.zeros(2), torch.zeros(3))


# ----------------------------------------------------------------------------------------- loss aggregation


RAGGED_MASK = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 0, 1, 0], [1, 1, 1, 1, 1]])


def test_token_mean_over_ragged_mask_is_sum_over_count():
    loss = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    manual = sum(loss[b, t].item() for b in range(3) for t in range(5) if RAGGED_MASK[b, t]) / 10
    assert algos.agg_loss(loss, RAGGED_MASK, "token-mean").item() == pytest.approx(manual)
    assert algos.agg_loss(loss, RAGGED_MASK).item() == pytest.approx(manual)  # the default


def test_seq_mean_modes():
    loss = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    sums = [0 + 1 + 2, 6 + 8, 10 + 11 + 12 + 13 + 14]
    assert algos.agg_loss(loss, RAGGED_MASK, "seq-mean-token-sum").item() == pytest.approx(sum(sums) / 3)
    means = [sums[0] / 3, sums[1] / 2, sums[2] / 5]
    assert algos.agg_loss(loss, RAGGED_MASK, "seq-mean-token-mean").item() == pytest.approx(sum(means) / 3)
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        algos.agg_loss(loss, RAGGED_MASK, "sum")


def test_masked_values_never_leak():
    loss = torch.tensor([[1.0, float("nan")], [float("inf"), 3.0]])
    mask = torch.tensor([[1, 0], [0, 1]])
    for mode in algos.AGG_MODES:
        assert torch.isfinite(algos.agg_loss(loss, mask, mode)), mode
    assert algos.masked_mean(loss, mask).item() == 2.0
    assert algos.masked_mean(loss, torch.zeros(2, 2)).item() == 0.0  # empty mask: 0, not NaN
    assert algos.masked_mean(loss, mask, dim=-1).tolist() == [1.0, 3.0]


# --------------------------------------------------------------------------- masked tokens get no gradient


def _loss_through_logits(logits, labels, mask, old_logp, ref_logp, adv):
    logp = algos.logprobs_from_logits(logits, labels)
    pg, _ = algos.policy_loss(logp, old_logp, adv, mask)
    kl = algos.agg_loss(algos.kl_penalty(logp, ref_logp, "low_var_kl"), mask)
    ent = algos.agg_loss(algos.entropy_from_logits(logits), mask)
    return pg + 0.001 * kl - 0.01 * ent


def test_environment_tokens_get_no_gradient():
    gen = torch.Generator().manual_seed(0)
    B, L, V = 3, 6, 11
    base_logits = torch.randn(B, L, V, generator=gen)
    labels = torch.randint(0, V, (B, L), generator=gen)
    # 1 = token the policy generated; 0 = prompt / environment observation / padding.
    mask = torch.tensor([[1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 1, 0], [1, 0, 1, 0, 1, 0]])
    with torch.no_grad():
        logp0 = algos.logprobs_from_logits(base_logits, labels)
    old_logp = logp0 + 0.3 * torch.randn(B, L, generator=gen)  # some ratios fall outside the clip range
    ref_logp = logp0 + 0.5 * torch.randn(B, L, generator=gen)
    adv = algos.broadcast(torch.tensor([1.0, -1.5, 0.7]), mask)

    def grad_for(logits):
        logits = logits.clone().requires_grad_(True)
        _loss_through_logits(logits, labels, mask, old_logp, ref_logp, adv).backward()
        return logits.grad

    grad = grad_for(base_logits)
    env = mask == 0
    assert torch.all(grad[env] == 0)  # exactly zero at every environment position
    assert torch.all(grad[~env].abs().sum(-1) > 0)  # and non-zero at the generated ones

    # Change the logits at environment positions (including extreme values): every gradient is identical.
    changed = base_logits.clone()
    changed[env] = 1e4 * torch.randn(int(env.sum()), V, generator=gen)
    assert torch.equal(grad_for(changed), grad)


def test_environment_positions_of_old_ref_and_adv_do_not_matter():
    gen = torch.Generator().manual_seed(1)
    logp = torch.randn(2, 4, generator=gen)
    mask = torch.tensor([[1, 0, 1, 0], [0, 1, 1, 1]])
    old = logp + 0.1 * torch.randn(2, 4, generator=gen)
    ref = logp + 0.1 * torch.randn(2, 4, generator=gen)
    adv = torch.randn(2, 4, generator=gen)

    def grads(old, ref, adv):
        x = logp.clone().requires_grad_(True)
        loss, _ = algos.policy_loss(x, old, adv, mask)
        (loss + 0.001 * algos.agg_loss(algos.kl_penalty(x, ref), mask)).backward()
        return x.grad

    env = mask == 0
    g1 = grads(old, ref, adv)
    old2, ref2, adv2 = old.clone(), ref.clone(), adv.clone()
    old2[env], ref2[env], adv2[env] = -1e9, 1e9, float("nan")
    assert torch.equal(grads(old2, ref2, adv2), g1)


# -------------------------------------------------------------------------------------------------- PPO clip


def _grad_of_single_token(ratio: float, advantage: float, **kw) -> tuple[float, float]:
    old = torch.zeros(1, 1)
    logp = torch.full((1, 1), math.log(ratio), requires_grad=True)
    loss, _ = algos.policy_loss(logp, old, torch.full((1, 1), advantage), torch.ones(1, 1), **kw)
    loss.backward()
    return loss.item(), logp.grad.item()


def test_ppo_clip_gradients():
    # A > 0: ratio above 1 + eps is clipped (no gradient); inside or below it is -A * ratio (d/dlogp = -A * r).
    loss, grad = _grad_of_single_token(1.5, 2.0)
    assert grad == 0.0 and loss == pytest.approx(-2.0 * 1.2)
    loss, grad = _grad_of_single_token(1.1, 2.0)
    assert grad == pytest.approx(-2.0 * 1.1) and loss == pytest.approx(-2.0 * 1.1)
    _, grad = _grad_of_single_token(0.5, 2.0)
    assert grad == pytest.approx(-1.0)
    # A < 0: ratio below 1 - eps is clipped; above 1 + eps the gradient still flows (pessimistic bound) ...
    loss, grad = _grad_of_single_token(0.5, -1.0)
    assert grad == 0.0 and loss == pytest.approx(0.8)
    _, grad = _grad_of_single_token(2.0, -1.0)
    assert grad == pytest.approx(2.0)
    # ... until the dual clip at clip_ratio_c = 3: the loss stays at -A * 3 and the gradient stops.
    loss, grad = _grad_of_single_token(5.0, -1.0)
    assert grad == 0.0 and loss == pytest.approx(3.0)
    loss, grad = _grad_of_single_token(5.0, -1.0, clip_ratio_c=10.0)
    assert loss == pytest.approx(5.0) and grad == pytest.approx(5.0)


def test_ppo_asymmetric_clip():
    _, grad = _grad_of_single_token(1.25, 1.0, clip_ratio_high=0.28)  # DAPO-style clip-higher keeps 1.25 live
    assert grad == pytest.approx(-1.25)
    _, grad = _grad_of_single_token(1.25, 1.0)
    assert grad == 0.0
    _, grad = _grad_of_single_token(0.85, -1.0, clip_ratio_low=0.1)
    assert grad == 0.0


def test_ppo_stats_count_only_masked_tokens():
    ratios = torch.tensor([[1.5, 1.0, 0.5, 1.1, 3.0, 5.0]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0, -1.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 1]])  # the 5th token would be clipped (A > 0, r = 3) but is masked
    logp = ratios.log()
    loss, stats = algos.policy_loss(logp, torch.zeros_like(logp), adv, mask)
    # Clipped (L2 > L1): token 0 (A>0, r>1.2) and token 2 (A<0, r<0.8); token 5 (A<0, r=5) is not (L1 > L2).
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    assert stats["clip_frac_lower"] == pytest.approx(1 / 5)  # token 5 hits the dual clip
    assert stats["approx_kl"] == pytest.approx(
        -(math.log(1.5) + 0 + math.log(0.5) + math.log(1.1) + math.log(5.0)) / 5
    )
    per_token = [-1.2, -1.0, 0.8, 1.1, 3.0]
    assert loss.item() == pytest.approx(sum(per_token) / 5)


def test_ppo_on_policy_loss_is_minus_mean_advantage():
    adv = torch.tensor([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    logp = torch.log(torch.tensor([[0.2, 0.7, 0.1], [0.9, 0.5, 0.5]]))
    loss, stats = algos.policy_loss(logp, logp.clone(), adv, mask)
    assert loss.item() == pytest.approx(-(0.5 - 1.0 + 1.0) / 3)
    assert stats["clip_frac"] == 0.0 and stats["approx_kl"] == 0.0 and stats["ratio_mean"] == 1.0


def test_ppo_log_ratio_clamped():
    logp = torch.tensor([[100.0]])
    loss, stats = algos.policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1))
    assert math.isfinite(loss.item()) and stats["approx_kl"] == -20.0


def test_ppo_bad_input():
    z = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        algos.policy_loss(z, z, z, torch.ones(1, 2), clip_ratio_c=1.0)
    with pytest.raises(ValueError, match="shapes must match"):
        algos.policy_loss(z, z, torch.zeros(2), torch.ones(1, 2))


# ------------------------------------------------------------------------------------- logits helpers


def test_entropy_and_logprobs_from_logits():
    V = 7
    assert algos.entropy_from_logits(torch.zeros(2, V)).tolist() == pytest.approx([math.log(V)] * 2)
    logits = torch.randn(3, 4, V, generator=torch.Generator().manual_seed(2))
    expected = torch.distributions.Categorical(logits=logits).entropy()
    assert torch.allclose(algos.entropy_from_logits(logits), expected, atol=1e-6)
    peaked = torch.tensor([[100.0, 0.0, 0.0]])
    assert algos.entropy_from_logits(peaked).item() == pytest.approx(0.0, abs=1e-6)

    labels = torch.randint(0, V, (3, 4), generator=torch.Generator().manual_seed(3))
    logp = algos.logprobs_from_logits(logits, labels)
    assert torch.allclose(
        logp.exp(), torch.softmax(logits, -1).gather(-1, labels[..., None])[..., 0], atol=1e-6
    )
    with pytest.raises(ValueError, match="do not match"):
        algos.logprobs_from_logits(logits, labels[:, :2])
