"""Checks for the implement-exercises: does the student's function agree with the kit's own?

Each check takes the student's function, calls it on many inputs (random ones, edge cases and the notebook's own
data) beside the kit's implementation, and returns a `Check`: passed or not, on how many inputs, and the first
input where the two disagree (or the error the function raised). A check never raises for a wrong answer, so a
skeleton that is not filled in yet runs and says "not yet"; printing the `Check` is the exercise's last line.
The kit's implementations compared against: `helpers.envs.frozenlake`'s `upper_bound` (00d),
`helpers.algos.grpo_advantages` (01d), `helpers.budget.budgetmix_candidates` (02d), `helpers.metrics.pass_at_k`
(03d), the environments' `step_quality` (04d), `helpers.recovery.concentration` (05c),
`helpers.likelihood.cumulative_llr` (06d) and `helpers.algos.gigpo_advantages` (07d).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from helpers import algos, budget, likelihood, metrics, recovery
from helpers.envs import frozenlake as fl


@dataclass(frozen=True)
class Check:
    """The verdict of one check."""

    what: str  # what was compared, e.g. "your pass_at_k against helpers.metrics.pass_at_k"
    passed: bool
    n_inputs: int  # how many inputs were compared (up to the first disagreement)
    detail: str = ""  # the first disagreement or error; empty when passed

    def __str__(self) -> str:
        if self.passed:
            return f"PASSED: {self.what} agree on all {self.n_inputs} inputs."
        return f"NOT YET: {self.what}: {self.detail}"


def _compare(
    what: str, cases: Sequence[tuple[str, Callable[[], object], Callable[[], object]]], tol: float = 1e-6
) -> Check:
    """Run (description, student call, kit call) cases in order; stop at the first error or disagreement."""
    for i, (desc, mine, kit) in enumerate(cases):
        try:
            got = mine()
        except NotImplementedError:
            return Check(what, False, i, "the function is not filled in yet (it raised NotImplementedError)")
        except Exception as err:  # a student's bug is a verdict, not a crash
            return Check(what, False, i, f"it raised {type(err).__name__}: {err} at {desc}")
        want = kit()
        if got is None:
            return Check(what, False, i, f"it returned None at {desc}; the kit gives {_show(want)}")
        try:
            a = np.asarray(got, dtype=float)
            b = np.asarray(want, dtype=float)
            same = a.shape == b.shape and bool(np.allclose(a, b, rtol=0, atol=tol, equal_nan=True))
        except (TypeError, ValueError):
            same = False
        if not same:
            return Check(what, False, i, f"at {desc} it gives {_show(got)}, the kit gives {_show(want)}")
    return Check(what, True, len(cases))


def _show(x: object) -> str:
    a = np.asarray(x, dtype=float) if not isinstance(x, str) else None
    if a is None or a.size > 12:
        return f"an array of shape {np.shape(x)}" if a is not None else repr(x)
    return np.array2string(a, precision=4) if a.ndim else f"{float(a):.6g}"


# ------------------------------------------------------------------------------------------ 03d: Pass@k


def pass_at_k(
    fn: Callable[[int, int, int], float], n_max: int = 16, trials: int = 300, seed: int = 0
) -> Check:
    """`fn(n, c, k)`, the unbiased Pass@k of one task from n samples with c successes, against
    `helpers.metrics.pass_at_k`: edge cases first (no success, all successes, n - c < k, k = 1, k = n), then
    random (n, c, k)."""
    rng = np.random.default_rng(seed)
    triples = [(8, 0, 1), (8, 0, 8), (8, 8, 1), (8, 3, 6), (8, 3, 1), (8, 3, 8), (1, 1, 1), (16, 5, 4)]
    for _ in range(trials):
        n = int(rng.integers(1, n_max + 1))
        triples.append((n, int(rng.integers(0, n + 1)), int(rng.integers(1, n + 1))))
    cases = [
        (
            f"n={n}, c={c}, k={k}",
            lambda n=n, c=c, k=k: fn(n, c, k),
            lambda n=n, c=c, k=k: metrics.pass_at_k(n, c, k),
        )
        for n, c, k in triples
    ]
    return _compare("your pass_at_k and helpers.metrics.pass_at_k", cases, tol=1e-9)


# ------------------------------------------------------------------------------ 00d: the structural bound


def upper_bound(
    fn: Callable[[np.ndarray, np.ndarray, int, int], float], tasks: Sequence, budgets: Sequence[int]
) -> Check:
    """`fn(R, C, start, budget)`, the best success probability within `budget` turns from `start` on a map with
    rewards R [n, 4] and continuation probabilities C [n, 4, n] (`frozenlake.blind_tables`), against the kit's
    structural upper bound `frozenlake.upper_bound` on every task and budget."""
    cases = []
    for task in tasks:
        R, C, start, _ = fl.blind_tables(task)
        for T in budgets:
            cases.append(
                (
                    f"task {task.task_id}, T={T}",
                    lambda R=R, C=C, s=start, T=T: fn(R.copy(), C.copy(), s, T),
                    lambda task=task, T=T: fl.upper_bound(task, T),
                )
            )
    return _compare("your upper bound and frozenlake.upper_bound", cases, tol=1e-9)


# ----------------------------------------------------------------------------------- 04d: step quality


def step_quality(
    fn: Callable[[np.ndarray, int | None], float], envs_and_replies: Sequence[tuple[object, str]]
) -> Check:
    """`fn(q, action)`, the score of one move (`action` an index into `frozenlake.ACTIONS`, None for an invalid
    reply) at a state whose action values under the remaining budget are q [4], against the environment's own
    `step_quality(reply)`; `envs_and_replies` are environments paused at a state and a reply to score there."""
    cases = []
    for env, reply in envs_and_replies:
        q = np.array(env.q_values(), dtype=float)
        action = fl.parse_action(reply)[0]
        cases.append(
            (
                f"q={np.round(q, 3).tolist()}, action={action}",
                lambda q=q, a=action: fn(q.copy(), a),
                lambda env=env, reply=reply: env.step_quality(reply),
            )
        )
    return _compare("your step quality and the environment's step_quality", cases, tol=1e-9)


# ---------------------------------------------------------------------------------- 06d: cumulative LLR


def cumulative_llr(
    fn: Callable[[np.ndarray, np.ndarray, list[tuple[int, int]]], list[float]],
    policy_a,
    policy_b,
    trajs: Sequence,
) -> Check:
    """`fn(logp_a, logp_b, spans)`, the cumulative log-likelihood ratio log pi_a - log pi_b after each turn of one
    trajectory, from the log-probs of its tokens under each policy and the (start, end) token span of each turn's
    action, against `helpers.likelihood.cumulative_llr` on `trajs`."""
    trajs = list(trajs)
    lp_a = likelihood.token_logprobs(policy_a, trajs)
    lp_b = likelihood.token_logprobs(policy_b, trajs)
    kit = likelihood.cumulative_llr(policy_a, policy_b, trajs)
    cases = []
    for i, tr in enumerate(trajs):
        spans = [tuple(s) for s in tr.turn_spans()]
        want = kit[kit["trajectory"] == i].sort_values("turn")["cum_llr"].to_numpy()
        cases.append(
            (
                f"trajectory {i} ({tr.model}, {len(spans)} turns)",
                lambda a=lp_a[i], b=lp_b[i], s=spans: fn(a.copy(), b.copy(), list(s)),
                lambda w=want: w,
            )
        )
    return _compare("your cumulative LLR and likelihood.cumulative_llr", cases, tol=1e-4)


# ----------------------------------------------------------------------------- 07d: GiGPO step advantage


def random_groups(n_groups: int = 6, group_size: int = 4, seed: int = 0) -> tuple[list, list]:
    """Random GiGPO inputs: `group_size` trajectories per task group, 1 to 6 steps each, anchors drawn from a few
    observations (so some step groups have peers and some not) and a 0/1 reward at the last step."""
    rng = np.random.default_rng(seed)
    trajectories, group_ids = [], []
    for g in range(n_groups):
        for _ in range(group_size):
            n = int(rng.integers(1, 7))
            steps = [(f"obs{int(rng.integers(0, 4))}", 0.0) for _ in range(n)]
            steps[-1] = (steps[-1][0], float(rng.integers(0, 2)))
            trajectories.append(steps)
            group_ids.append(f"task{g}")
    return trajectories, group_ids


def gigpo_step_advantages(
    fn: Callable[[list, list, float], list], trials: int = 20, gamma: float = 0.95, seed: int = 0
) -> Check:
    """`fn(trajectories, group_ids, gamma)`, GiGPO's step advantage A_step(i, t) (mean-normalised, verl-agent's
    default), one list per trajectory, against `helpers.algos.gigpo_advantages` (its step part: the advantage
    with step_weight 1 minus the one with step_weight 0) on random task groups."""

    def kit(trajs: list, ids: list) -> list[np.ndarray]:
        both = algos.gigpo_advantages(trajs, ids, gamma=gamma, step_weight=1.0)
        episode = algos.gigpo_advantages(trajs, ids, gamma=gamma, step_weight=0.0)
        return np.concatenate([(a - e).numpy() for a, e in zip(both, episode, strict=True)])

    def mine(trajs: list, ids: list) -> np.ndarray | None:
        got = fn([list(s) for s in trajs], list(ids), gamma)
        if got is None:
            return None
        return np.concatenate([torch.as_tensor(np.asarray(g, dtype=float)).numpy().ravel() for g in got])

    cases = []
    for k in range(trials):
        trajs, ids = random_groups(seed=seed + k)
        cases.append(
            (f"random groups #{k}", lambda t=trajs, i=ids: mine(t, i), lambda t=trajs, i=ids: kit(t, i))
        )
    return _compare("your step advantages and algos.gigpo_advantages' step part", cases, tol=1e-5)


# ------------------------------------------------------------------------------------- 01d: GRPO advantage


def grpo_advantages(
    fn: Callable[[list[float], list, bool], list[float]], trials: int = 200, seed: int = 0
) -> Check:
    """`fn(rewards, group_ids, norm_by_std)`, GRPO's group-normalised advantage of every trajectory (Dr.GRPO's
    mean-centred one with `norm_by_std=False`), against `helpers.algos.grpo_advantages`: edge cases first (a group
    whose rewards are all equal, a group of one, groups in no order), then random groups of 0/1 and graded
    rewards, with both settings."""
    rng = np.random.default_rng(seed)
    inputs = [
        ([1.0, 0.0, 0.0, 0.0], ["a"] * 4),
        ([1.0, 1.0, 1.0, 1.0], ["a"] * 4),
        ([0.0, 0.0], ["a", "a"]),
        ([1.0], ["a"]),
        ([1.0, 0.0, 1.0, 0.0, 0.0, 1.0], ["a", "b", "b", "a", "c", "c"]),
        ([0.3, 0.9, 0.1], ["a"] * 3),
    ]
    for k in range(trials):
        n_groups, size = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        ids = [f"task{g}" for g in range(n_groups) for _ in range(size)]
        order = rng.permutation(len(ids))  # trajectories of a group need not be adjacent
        graded = k % 2 == 1
        r = rng.random(len(ids)) if graded else rng.integers(0, 2, len(ids)).astype(float)
        inputs.append(([float(r[i]) for i in order], [ids[i] for i in order]))
    cases = []
    for rewards, ids in inputs:
        for norm in (True, False):
            cases.append(
                (
                    f"rewards={rewards}, group_ids={ids}, norm_by_std={norm}",
                    lambda r=rewards, g=ids, n=norm: fn(list(r), list(g), n),
                    lambda r=rewards, g=ids, n=norm: algos.grpo_advantages(
                        torch.tensor(r), g, norm_by_std=n
                    ).numpy(),
                )
            )
    return _compare("your GRPO advantages and algos.grpo_advantages", cases, tol=1e-5)


# --------------------------------------------------------------------------------- 02d: BudgetMix budgets


def budgetmix_candidates(fn: Callable[[int], list[int]], t_maxes: Sequence[int] = range(1, 41)) -> Check:
    """`fn(t_max)`, the sorted distinct BudgetMix budgets max(1, round-half-up(f * T_max)) for f = 0.1, ..., 1.0,
    against `helpers.budget.budgetmix_candidates` for T_max = 1..40. (Above 40 the kit's floating-point product can
    fall just below a half, 0.7 * 45 = 31.4999..., where exact arithmetic i * T_max / 10 rounds up: not compared.)"""
    cases = [(f"T_max={t}", lambda t=t: fn(t), lambda t=t: budget.budgetmix_candidates(t)) for t in t_maxes]
    return _compare("your BudgetMix budgets and budget.budgetmix_candidates", cases, tol=0)


# ------------------------------------------------------------------------------------- 05c: concentration


def concentration(
    fn: Callable[[pd.DataFrame, pd.DataFrame, str, str], list[float]],
    error_states: pd.DataFrame,
    matched_states: pd.DataFrame,
    resamples: int = 10,
    seed: int = 0,
) -> Check:
    """`fn(error_states, matched_states, a, b)`, per RL seed (in sorted order) policy `a`'s win rate over `b` at the
    live error states minus at the live matched states, against the per-seed values of
    `helpers.recovery.concentration`: on notebook 05's and 04's per-state tables, for RL against the base and the
    sharpened base, then on `resamples` resampled copies of both tables (rows drawn with replacement; a copy where a seed has no
    live states left is skipped)."""
    rng = np.random.default_rng(seed)
    tables = [("the notebooks' tables", error_states, matched_states)]
    for k in range(resamples):
        tables.append(
            (
                f"resampled tables #{k}",
                error_states.sample(frac=1.0, replace=True, random_state=int(rng.integers(2**31))),
                matched_states.sample(frac=1.0, replace=True, random_state=int(rng.integers(2**31))),
            )
        )
    cases = []
    for desc, err, mat in tables:
        try:
            kit = recovery.concentration(err, mat, n_boot=10)
        except ValueError:  # a resampled seed with no live states (tiny smoke pools): the kit has no value
            continue
        for a, b in recovery.RL_PAIRS:
            if f"{a}_vs_{b}" in kit:
                cases.append(
                    (
                        f"{desc}, {a} vs {b}",
                        lambda e=err, m=mat, a=a, b=b: fn(e.copy(), m.copy(), a, b),
                        lambda v=kit[f"{a}_vs_{b}"]["per_seed"]: v,
                    )
                )
    return _compare("your concentration and recovery.concentration's per-seed values", cases, tol=1e-9)
