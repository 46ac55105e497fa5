"""The budget-swap probe: does a policy's move depend on the turns left it is told, where it should?

At a state of a FrozenLake episode (map, square, the conversation so far) the prompt is rebuilt with only the number
of turns left in its latest budget line changed ("Turns left: r of T." for every r in 1..T at which the goal can
still be reached), and the policy's exact move probabilities are read by scoring the four replies. The DP says what
each budget asks for: O(r), the moves greedy on finite-horizon Q* (gamma 1) with r turns left.

* A **budget-sensitive** state has two budgets r1 < r2 whose optimal move sets are disjoint and where taking the
  other budget's move costs at least `DELTA` success at each (REFERENCE.md); of such pairs the one with the largest
  smaller cost is probed. There, responsiveness = [P(O1|r1) - P(O1|r2)] + [P(O2|r2) - P(O2|r1)], in [-2, 2]: 0 for
  any policy that ignores the budget line, 2 for the budget-aware optimum, 2(1 - epsilon) for it with random moves
  a share epsilon of the time.
* A **control** state has the same optimal move set at every budget shown (at least two): a policy that reads the
  budget has no reason to move there, so total variation at control states is the probe's own floor.

Reported (`summary`): responsiveness and total variation (between the distributions at r1 and r2; at control
states between the smallest and the largest budget shown; the mass on replies other than the four counts as a fifth
outcome) at sensitive and at control states, and P(budget-optimal move) by budget shown, each a mean over states
with a percentile interval that resamples maps (`stats.cluster_bootstrap`). States come from budget-mixed
trajectories of a policy (`budget_mixed_states`); the classification is the DP's, independent of the policy probed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers import budget, stats
from helpers.envs import Task, make
from helpers.envs import frozenlake as fl
from helpers.policy import Policy, Sampling
from helpers.probing import ProbeState, states_of
from helpers.rollout import ChatFormat, Trajectory, rollout
from helpers.scripted import shaped

DELTA = 0.02  # the least success the other budget's move must cost at a budget-sensitive state
ATOL = 1e-12  # moves within this of the best Q* are optimal (ties shared, as frozenlake.optimal_policy)


@dataclass
class SwapState:
    """A probe state with what the DP says about it at every budget shown."""

    state: ProbeState
    square: int
    remaining: int  # the turns left the episode really had there
    total: int
    shown: list[int]  # the budgets the prompt is rebuilt with (1..total where the goal is still reachable)
    optimal: dict[int, list[int]]  # O(r) at each shown budget
    kind: str  # "sensitive" or "control"
    pair: tuple[int, int]  # (r1, r2): the probed pair (sensitive) or the smallest and largest shown (control)
    cost: float  # the smaller of the two costs of the other budget's move (sensitive; 0 for control)


def _q(task: Task, r: int) -> np.ndarray:
    desc, slip, rate = fl.dynamics(task)
    return fl._optimal_q(desc, int(r), 1.0, slip, rate)[int(r)]


def classify(
    state: ProbeState, square: int, remaining: int, total: int, delta: float = DELTA
) -> SwapState | None:
    """The state's kind by DP, or None where it is neither sensitive nor a control (or fewer than two budgets can
    still reach the goal)."""
    task = Task.from_dict(state.task)
    qs = {r: _q(task, r)[square] for r in range(1, total + 1)}
    shown = [r for r, q in qs.items() if q.max() > 0]
    if len(shown) < 2:
        return None
    opt = {r: [int(a) for a in np.flatnonzero(qs[r] >= qs[r].max() - ATOL)] for r in shown}
    best, best_cost = None, -1.0
    for i, r1 in enumerate(shown):
        for r2 in shown[i + 1 :]:
            if set(opt[r1]) & set(opt[r2]):
                continue
            c1 = qs[r1].max() - qs[r1][opt[r2]].max()
            c2 = qs[r2].max() - qs[r2][opt[r1]].max()
            cost = float(min(c1, c2))
            if cost >= delta and cost > best_cost + 1e-15:
                best, best_cost = (r1, r2), cost
    common = dict(state=state, square=square, remaining=remaining, total=total, shown=shown, optimal=opt)
    if best is not None:
        return SwapState(**common, kind="sensitive", pair=best, cost=best_cost)
    if all(opt[r] == opt[shown[0]] for r in shown):
        return SwapState(**common, kind="control", pair=(shown[0], shown[-1]), cost=0.0)
    return None


def _replayed(state: ProbeState) -> tuple[list[dict], str | None, int, int, int]:
    """(opening messages, the latest observation or None at the opening, square, turns left, total) at a state."""
    env = make(state.env)
    msgs = env.reset(Task.from_dict(state.task), state.budget, seed=state.seed)
    obs = None
    for a in state.actions:
        obs = env.step(a).observation
    if env.done:
        raise ValueError(
            f"budget probe: the state of {state.task['task_id']} after {state.t} moves is terminal"
        )
    return msgs, obs, int(env.state), int(env.remaining), int(env.total)


def swap_states(states: list[ProbeState], delta: float = DELTA) -> list[SwapState]:
    """The budget-sensitive and control states among `states` (FrozenLake), in order; the rest are dropped."""
    out = []
    for s in states:
        if s.env != "frozenlake":
            raise ValueError(f"the budget-swap probe is defined on FrozenLake, got {s.env}")
        _, _, square, remaining, total = _replayed(s)
        c = classify(s, square, remaining, total, delta)
        if c is not None:
            out.append(c)
    return out


def swapped_prompts(state: ProbeState, chat: ChatFormat, shown: list[int]) -> dict[int, list[int]]:
    """The state's prompt token ids with only the turns left of its latest budget line set to each r of `shown`,
    tokenised as a rollout tokenises it (the opening prompt, or the prefix and the latest observation's tokens);
    checked to rebuild the recorded prefix exactly at the true budget."""
    msgs, obs, _, remaining, total = _replayed(state)
    line = budget.statement(total, remaining)

    def swap(text: str, r: int) -> str:
        i = text.rindex(line)
        return text[:i] + budget.statement(total, r) + text[i + len(line) :]

    if obs is None:
        ids, head = chat.prompt_ids(msgs), []
    else:
        ids = chat.observation_ids(obs)
        head = list(state.prefix_ids[: len(state.prefix_ids) - len(ids)])

    def rebuild(r: int) -> list[int]:
        if obs is None:
            return chat.prompt_ids([*msgs[:-1], {**msgs[-1], "content": swap(msgs[-1]["content"], r)}])
        return head + chat.observation_ids(swap(obs, r))

    if list(state.prefix_ids) != head + ids:
        raise ValueError(
            "budget probe: the state's recorded prefix is not what this chat format builds; pass the "
            "ChatFormat of the policy that recorded it"
        )
    return {int(r): rebuild(r) for r in shown}


def swapped_prompt(state: ProbeState, chat: ChatFormat, r: int) -> list[int]:
    """`swapped_prompts` at one budget."""
    return swapped_prompts(state, chat, [r])[int(r)]


def move_probabilities(policy: Policy, swaps: list[SwapState], chat: ChatFormat | None = None) -> list[dict]:
    """Per swap state, {budget shown: P(move) [4]}: exact, by scoring the four replies at each rebuilt prompt in
    one `policy.score` call. The mass on other replies is 1 - the sum."""
    chat = chat or ChatFormat(policy.tokenizer, getattr(policy, "chat_kwargs", None))
    replies = [chat.action_ids(fl.format_action(a)) for a in range(4)]
    keys, prompts = [], []
    for i, s in enumerate(swaps):
        for r, p in swapped_prompts(s.state, chat, s.shown).items():
            keys += [(i, r)] * 4
            prompts += [p] * 4
    scores = policy.score(prompts, replies * (len(prompts) // 4)) if prompts else []
    out: list[dict] = [{} for _ in swaps]
    for j in range(0, len(scores), 4):
        i, r = keys[j]
        out[i][r] = np.exp([float(np.sum(scores[j + a])) for a in range(4)])
    return out


def _tv(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation over the four moves and "anything else" (1 - the sum)."""
    return 0.5 * float(np.abs(p - q).sum() + abs((1 - p.sum()) - (1 - q.sum())))


def tempered(probs: list[dict], temperature: float, top_p: float = 1.0) -> list[dict]:
    """Move probabilities (`move_probabilities`'s) of the same model sampled at a fixed `temperature` and `top_p`:
    the sharpened base, a `policy.Tempered` whose `score` is the model's own, temperature-1 one. The temperature
    acts on the four moves (`scripted.shaped`): p^(1/temperature) renormalised over them (0 = greedy: the most
    likely moves, ties shared), then top-p; the mass on other replies is dropped, so a tempered distribution sums
    to 1 over the four moves. At temperature 1 and top-p 1 the probabilities are the model's own, that mass kept.
    (A model samples token by token. Where the four replies share every token but the move's own, as the kit's
    tokenizers make them, this is its move distribution given a valid reply up to the tokens after the move, which a
    trained model all but fixes; the mass a tempered model puts off the four replies is not modelled.)"""
    if temperature == 1 and top_p >= 1:
        return [{r: np.asarray(p, float).copy() for r, p in d.items()} for d in probs]

    def one(p) -> np.ndarray:
        p = np.asarray(p, float)
        return np.zeros(4) if p.sum() <= 0 else shaped(p / p.sum(), float(temperature), float(top_p))

    return [{r: one(p) for r, p in d.items()} for d in probs]


def flat(swaps: list[SwapState], probs: list[dict]) -> np.ndarray:
    """`move_probabilities`'s result as one array (per state, per budget shown in order, the four moves): the form
    `evaluate.recorded_per_state` records."""
    return np.asarray([x for s, p in zip(swaps, probs, strict=True) for r in s.shown for x in p[r]], float)


def flat_move_probabilities(
    policy: Policy, swaps: list[SwapState], chat: ChatFormat | None = None
) -> np.ndarray:
    """`move_probabilities` in `flat`'s form: what the budget-swap probe records per model."""
    return flat(swaps, move_probabilities(policy, swaps, chat))


def unflat(swaps: list[SwapState], values) -> list[dict]:
    """`flat`'s inverse on the same swap states."""
    values = np.asarray(values, float)
    if len(values) != 4 * sum(len(s.shown) for s in swaps):
        raise ValueError(f"budget probe: {len(values)} recorded numbers do not fit these {len(swaps)} states")
    out, i = [], 0
    for s in swaps:
        d = {}
        for r in s.shown:
            d[r], i = values[i : i + 4].copy(), i + 4
        out.append(d)
    return out


def probe_table(swaps: list[SwapState], probs: list[dict]) -> pd.DataFrame:
    """One row per swap state from its move probabilities (`move_probabilities`, `tempered`): task_id, t, square,
    turns left, total, kind, r1, r2, the cost, responsiveness (sensitive states; NaN at controls), total variation
    at (r1, r2), and P(budget-optimal move) per budget shown (column `p_opt`, a dict)."""
    rows = []
    for s, p in zip(swaps, probs, strict=True):
        r1, r2 = s.pair
        o1, o2 = s.optimal[r1], s.optimal[r2]
        resp = np.nan
        if s.kind == "sensitive":
            resp = (p[r1][o1].sum() - p[r2][o1].sum()) + (p[r2][o2].sum() - p[r1][o2].sum())
        rows.append(
            {
                "task_id": s.state.task["task_id"],
                "t": s.state.t,
                "square": s.square,
                "remaining": s.remaining,
                "total": s.total,
                "kind": s.kind,
                "r1": r1,
                "r2": r2,
                "cost": s.cost,
                "responsiveness": float(resp),
                "tv": _tv(p[r1], p[r2]),
                "p_opt": {r: float(p[r][s.optimal[r]].sum()) for r in s.shown},
            }
        )
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


# the columns of `probe_table` (also of an empty one: a pool without swap states)
PROBE_COLUMNS = [
    "task_id",
    "t",
    "square",
    "remaining",
    "total",
    "kind",
    "r1",
    "r2",
    "cost",
    "responsiveness",
    "tv",
    "p_opt",
]


def probe(policy: Policy, swaps: list[SwapState], chat: ChatFormat | None = None) -> pd.DataFrame:
    """`probe_table` of `policy`'s exact move probabilities at the swap states."""
    return probe_table(swaps, move_probabilities(policy, swaps, chat))


def summary(df: pd.DataFrame, n_boot: int = 2000, ci: float = 0.95, seed: int = 0) -> dict:
    """Means over states with map-resampling intervals: responsiveness and TV at sensitive states, TV at control
    states, and P(budget-optimal move) by budget shown (over the states that show it), with the counts."""

    def interval(values, tasks) -> dict:
        m, lo, hi = stats.cluster_bootstrap(np.asarray(values, float), list(tasks), n_boot, ci, seed)
        return {"mean": m, "low": lo, "high": hi, "n_states": len(values), "n_maps": len(set(tasks))}

    sens, ctrl = df[df["kind"] == "sensitive"], df[df["kind"] == "control"]
    out: dict = {"n_sensitive": len(sens), "n_control": len(ctrl), "ci": ci}
    if len(sens):
        out["responsiveness"] = interval(sens["responsiveness"], sens["task_id"])
        out["tv_sensitive"] = interval(sens["tv"], sens["task_id"])
    if len(ctrl):
        out["tv_control"] = interval(ctrl["tv"], ctrl["task_id"])
    by_budget: dict[int, tuple[list, list]] = {}
    for task_id, p_opt in zip(df["task_id"], df["p_opt"], strict=True):
        for r, v in p_opt.items():
            by_budget.setdefault(int(r), ([], []))[0].append(v)
            by_budget[int(r)][1].append(task_id)
    out["p_optimal_by_budget"] = {r: interval(v, t) for r, (v, t) in sorted(by_budget.items())}
    return out


def mixed_budgets(tasks: list[Task], seed: int) -> list[int]:
    """One budget per task, drawn from BudgetMix's candidates at its T_max (`budget.sample_budgets`, seeded)."""
    rng = np.random.default_rng([int(seed), 7])
    return [budget.sample_budgets(t.t_max, 1, rng)[0] for t in tasks]


def distinct_states(
    trajs: list[Trajectory], tasks: list[Task], source: str | None = None
) -> list[ProbeState]:
    """Every distinct state of `trajs`, in order (the first of each): distinct by what the probe reads there, the
    task, the budget and the prompt's token ids (two episodes with the same moves can slip to different squares).
    `source` names the states' policy (default: each trajectory's model)."""
    by_id = {t.task_id: t for t in tasks}
    seen, out = set(), []
    for tr in trajs:
        for s in states_of(tr, by_id[tr.task_id], source or tr.model):
            key = (s.task["task_id"], s.budget, tuple(s.prefix_ids))
            if key not in seen:
                seen.add(key)
                out.append(s)
    return out


def budget_mixed_states(
    policy: Policy,
    tasks: list[Task],
    n_samples: int,
    sampling: Sampling,
    seed: int,
    env_kwargs: dict | None = None,
) -> list[ProbeState]:
    """Every distinct state (`distinct_states`) of `n_samples` trajectories per task of `policy`, each task at a
    budget drawn from BudgetMix's candidates at its T_max (`mixed_budgets`), so states cover every budget."""
    trajs = rollout(
        policy,
        "frozenlake",
        tasks,
        mixed_budgets(tasks, seed),
        n_samples,
        sampling,
        seed=seed,
        env_kwargs=env_kwargs,
        step_quality=False,
    )
    return distinct_states(trajs, tasks, policy.name)
