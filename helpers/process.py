"""Process-level advantages for the RL loop: GiGPO's step groups, the oracle-Q process reward, PPO's critic.

`helpers.algos` has the formulas on tensors; this module turns a batch of `Trajectory` records into their inputs
and spreads per-turn values over each turn's generated tokens. Every estimator shares the loop's actor loss
(verl's PPO-clip with dual clip, plus low_var_kl 0.001 to the frozen base, token-mean: the paper's settings for
GRPO, GiGPO and PPO alike) and its budget modes; only the advantages differ. What each gives a token of turn t:

- **grpo**: the trajectory's outcome advantage (the same for every turn).
- **gigpo** (verl-agent): A_episode + w * A_step(t). The anchor of turn t is the observation the action was taken
  in, without history: the environment's reply to the previous action (map, note and the stated budget), or for
  turn 0 the opening prompt, identical for every trajectory of a task group. Step rewards are the environment's
  rewards per turn (all 0 when the budget ran out unfinished, as the outcome reward).
- **oracle_q**: the outcome advantage plus w * p_t with the process term
      p_t = Q*_h(s_t, a_t) / V*_h(s_t) - 1,    h = the turns left at step t (the step's own remaining budget),
  on the environment's finite-horizon DP oracle (gamma from the task, 0.95 on FrozenLake). It is 0 for a best
  action and -1 for a move into a hole (or an invalid reply); where no move can still reach the goal (V* = 0)
  every action is equally good and p = 0. Normalising by V*_h(s) rather than using Q* - V* as is keeps the signal
  the same size whatever is at stake: tight budgets and far-from-goal states have small V*, and those are exactly
  where the paper says process supervision should help; p_t + 1 is the kit's step quality (`Env.step_quality`), so
  R_single measures what this reward scores. p_t is in [-1, 0], on the scale of GRPO's standardised outcome
  advantage.
- **ppo**: token-level GAE on a learned critic (`ValueModel`, verl's critic: the base's transformer with a scalar
  head). Values are per token, as verl's: V at a generated token is the value of the conversation before it, the
  outcome reward sits on the last generated token, and observation tokens are skipped by the GAE recursion. With
  verl's gamma = lam = 1 a token's advantage is R - V(prefix), so the first token of each turn is judged against
  the value of the state the environment showed, and later tokens against what the reply already committed to.

**Corrupted oracle (the precision experiment).** At corruption level f the oracle reports, for a fraction f of the
(state, turns left) pairs of each map, the four action values in a random order (a fixed permutation per pair,
drawn from a hash of the RL seed, the task and the pair, so the same query always gets the same wrong answer, like
a learned reward model's errors). Shuffling keeps every state's set of values, hence V* and the size of p, so the
signal's scale is the same at every level; only which action gets which value is wrong. The pairs corrupted at a
lower level are also corrupted at every higher one (nested levels), and at f = 1 the reported value of an action
is that of a uniformly random action: no information about the action's quality.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from helpers import algos
from helpers.envs import make
from helpers.envs.base import Task, env_class

ALGORITHMS = ("grpo", "gigpo", "ppo", "oracle_q")


def check_algorithm(name: str) -> None:
    """Fail with a message naming the knob when `name` is not an estimator of the loop."""
    if name not in ALGORITHMS:
        raise ValueError(f"train.algorithm must be one of {ALGORITHMS}, got {name!r}")


# --------------------------------------------------------------------------------------- turns and tokens


def turn_token_advantages(traj, per_turn: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """Per-token advantages [len(token_ids) - 1] aligned with `helpers.policy.token_logprobs` (column j scores
    token j + 1): turn t's value on each of the tokens the policy generated in turn t, 0 everywhere else."""
    spans = traj.turn_spans()
    values = torch.as_tensor(per_turn, dtype=torch.float32)
    if len(spans) != len(values):
        raise ValueError(f"{traj.task_id}: {len(values)} per-turn values for {len(spans)} generated turns")
    out = torch.zeros(len(traj.token_ids) - 1)
    for (a, b), v in zip(spans, values, strict=True):
        out[a - 1 : b - 1] = v
    return out


def anchors(traj) -> list[Hashable]:
    """The anchor observation of each turn (the observation without history): the opening prompt's tokens for
    turn 0 (the same for every trajectory of a task group), then the environment's reply to the previous action."""
    return [tuple(traj.token_ids[: traj.prompt_len]), *(t["observation"] for t in traj.turns[:-1])]


def step_rewards(traj) -> list[float]:
    """The environment's reward of each turn; all 0 when the budget ran out unfinished (as `train.rl_reward`)."""
    if traj.exhausted:
        return [0.0] * traj.n_turns
    return [float(t["reward"]) for t in traj.turns]


def gigpo_turn_advantages(trajs: Sequence, episode_rewards: Sequence[float], cfg_train) -> list[torch.Tensor]:
    """GiGPO's advantage of every turn of every trajectory (verl-agent), step groups within each task group."""
    steps = [list(zip(anchors(t), step_rewards(t), strict=True)) for t in trajs]
    return algos.gigpo_advantages(
        steps,
        [t.group for t in trajs],
        episode_rewards=list(episode_rewards),
        gamma=cfg_train.gigpo_gamma,
        step_weight=cfg_train.gigpo_step_weight,
        norm_by_std=cfg_train.gigpo_mode == "mean_std_norm",
        episode_over_steps=cfg_train.gigpo_episode_over_steps,
    )


def step_group_sizes(trajs: Sequence) -> list[int]:
    """The size of the step group of every turn (how many turns of its task group share its anchor)."""
    count: dict[tuple, int] = {}
    keys = [(t.group, a) for t in trajs for a in anchors(t)]
    for k in keys:
        count[k] = count.get(k, 0) + 1
    return [count[k] for k in keys]


# ------------------------------------------------------------------------------------- the oracle process term


def has_oracle(env_name: str) -> bool:
    """Whether the environment has the DP oracle the oracle-Q reward needs (`q_values`, `action_index`)."""
    cls = env_class(env_name)
    return all(hasattr(cls, m) for m in ("q_values", "action_index", "oracle_key"))


def process_term(q: np.ndarray, action: int | None) -> float:
    """p = Q*(s, a) / max_a' Q*(s, a') - 1: 0 for a best action, -1 for an invalid reply or a hopeless move; 0 at
    a state where nothing can reach the goal any more (max Q* = 0)."""
    best = float(np.max(q))
    if best <= 0.0:
        return 0.0
    if action is None:
        return -1.0
    return float(q[action]) / best - 1.0


def _pair_draw(seed: int, task_id: str, key: tuple) -> tuple[float, np.random.Generator]:
    digest = hashlib.sha256(f"{seed}|{task_id}|{key}".encode()).digest()
    u = int.from_bytes(digest[:8], "little") / 2**64
    return u, np.random.default_rng(int.from_bytes(digest[8:16], "little"))


def corrupted(q: np.ndarray, level: float, seed: int, task_id: str, key: tuple) -> np.ndarray:
    """The oracle's report at corruption `level`: `q` itself, or (for a fraction `level` of the pairs `key`) its
    values in a fixed random order. Nested: a pair corrupted at one level is corrupted, the same way, above it."""
    if level <= 0.0:
        return q
    u, rng = _pair_draw(seed, task_id, key)
    if u >= level:
        return q
    return np.asarray(q)[rng.permutation(len(q))]


def oracle_terms(
    trajs: Sequence, tasks: dict[str, Task], env_name: str, level: float = 0.0, seed: int = 0
) -> tuple[list[list[float]], list[list[float]]]:
    """(exact, reported) process terms p_t of every turn of every trajectory, by replaying each episode.

    The environment is deterministic given (task, episode seed, actions), so replaying the recorded actions visits
    the same states with the same turns left; each reply is checked against the recorded observation. `reported`
    uses the oracle corrupted at `level` (see the module docstring), `exact` the true one.
    """
    if not has_oracle(env_name):
        raise ValueError(
            f"train.algorithm=oracle_q needs an environment with a step oracle; {env_name!r} has none"
        )
    exact, reported = [], []
    for tr in trajs:
        env = make(env_name)
        env.reset(tasks[tr.task_id], tr.budget, seed=tr.seed)
        ex, rep = [], []
        for turn in tr.turns:
            q = env.q_values()
            action = env.action_index(turn["action"])
            ex.append(process_term(q, action))
            rep.append(process_term(corrupted(q, level, seed, tr.task_id, env.oracle_key()), action))
            result = env.step(turn["action"])
            if result.observation != turn["observation"]:
                raise RuntimeError(
                    f"replay of {tr.task_id} (seed {tr.seed}) diverged from the recorded episode"
                )
        exact.append(ex)
        reported.append(rep)
    return exact, reported


def agreement(exact: list[list[float]], reported: list[list[float]]) -> dict[str, float | None]:
    """How much of the exact signal a corrupted oracle keeps over a batch: the share of steps it reports exactly
    and the correlation of reported with exact terms (None where either is constant)."""
    e = np.array([v for row in exact for v in row])
    r = np.array([v for row in reported for v in row])
    same = float(np.mean(np.isclose(e, r, rtol=0, atol=1e-12))) if e.size else None
    corr = float(np.corrcoef(e, r)[0, 1]) if e.size > 1 and e.std() > 0 and r.std() > 0 else None
    return {"process_exact_share": same, "process_corr": corr}


# ------------------------------------------------------------------------------------------------ the critic


class ValueModel(torch.nn.Module):
    """verl's critic: the base model's transformer (initialised from the base, trained on its own optimiser) with
    a scalar head in place of the LM head; one value per position.

    The head starts at zero, so every value starts at 0 and the first advantages are the whitened returns (a
    random head would only add noise to them); the transformer learns through the head from the first update on.
    """

    def __init__(self, lm: torch.nn.Module):
        super().__init__()
        self.body = lm.base_model  # the decoder without its LM head (Qwen3Model for Qwen3ForCausalLM)
        self.head = torch.nn.Linear(lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Values [B, L-1] of a right-padded batch, aligned with `token_logprobs`: column j is the value of the
        conversation up to token j, the state in which token j + 1 is generated (verl takes the critic's output
        at the positions before the response tokens)."""
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.body(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        )
        return self.head(out.last_hidden_state).squeeze(-1)[:, :-1].float()


def outcome_token_rewards(traj, reward: float) -> torch.Tensor:
    """Token-level rewards [len(token_ids) - 1] for GAE: the trajectory's reward on its last generated token."""
    out = torch.zeros(len(traj.token_ids) - 1)
    last = max(i for i, m in enumerate(traj.gen_mask) if m)
    out[last - 1] = float(reward)
    return out


# ------------------------------------------------------------------------------ per-token advantages, by estimator


def _gigpo(
    trajs,
    cfg,
    rewards: torch.Tensor,
    adv: torch.Tensor,
    tasks: dict | None,
    seed: int,
    values: list[torch.Tensor] | None,
) -> tuple[list, list | None, dict]:
    """GiGPO: episode plus weighted step advantages, spread over each turn's tokens."""
    per_turn = gigpo_turn_advantages(trajs, rewards.tolist(), cfg.train)
    sizes = np.array(step_group_sizes(trajs))
    stats = {"step_group_size_mean": float(sizes.mean()), "step_singleton_share": float(np.mean(sizes == 1))}
    return [turn_token_advantages(t, a) for t, a in zip(trajs, per_turn, strict=True)], None, stats


def _oracle_q(
    trajs,
    cfg,
    rewards: torch.Tensor,
    adv: torch.Tensor,
    tasks: dict | None,
    seed: int,
    values: list[torch.Tensor] | None,
) -> tuple[list, list | None, dict]:
    """Oracle-Q: GRPO's outcome advantage plus the weighted (possibly corrupted) process term of each turn."""
    c = cfg.train
    exact, reported = oracle_terms(trajs, tasks or {}, cfg.env.name, c.oracle_corruption, seed)
    flat = [v for row in reported for v in row]
    stats = {"process_term_mean": float(np.mean(flat)), **agreement(exact, reported)}
    out = [
        turn_token_advantages(t, float(adv[i]) + c.oracle_weight * torch.tensor(reported[i]))
        for i, t in enumerate(trajs)
    ]
    return out, None, stats


def _gae(
    trajs,
    cfg,
    rewards: torch.Tensor,
    adv: torch.Tensor,
    tasks: dict | None,
    seed: int,
    values: list[torch.Tensor] | None,
) -> tuple[list, list | None, dict]:
    """PPO: token-level GAE on the critic's values; also the returns its value loss regresses on."""
    c = cfg.train
    if values is None:
        raise ValueError("train.algorithm=ppo needs the critic's values")
    width = max(len(t.token_ids) for t in trajs) - 1
    r_tok, v_tok, m_tok = (torch.zeros(len(trajs), width) for _ in range(3))
    for i, t in enumerate(trajs):
        n = len(t.token_ids) - 1
        r_tok[i, :n] = outcome_token_rewards(t, float(rewards[i]))
        v_tok[i, :n] = values[i]
        m_tok[i, :n] = torch.tensor(t.gen_mask[1:], dtype=torch.float)
    a_tok, ret = algos.gae_advantages(r_tok, v_tok, m_tok, c.gae_gamma, c.gae_lam)
    lens = [len(t.token_ids) - 1 for t in trajs]
    v_var = algos.masked_var(ret - v_tok, m_tok, unbiased=False) / algos.masked_var(
        ret, m_tok, unbiased=False
    )
    stats = {
        "value_mean": float(algos.masked_mean(v_tok, m_tok)),
        "explained_variance": float(1 - v_var) if torch.isfinite(v_var) else None,
    }
    return [a_tok[i, :n] for i, n in enumerate(lens)], [ret[i, :n] for i, n in enumerate(lens)], stats


@dataclass(frozen=True)
class Estimator:
    """What the RL loop needs to know of one estimator (`train.algorithm`)."""

    name: str
    # per-token advantages (trajs, cfg, rewards, adv, tasks, seed, values) -> (per token, returns, stats);
    # None: GRPO's one outcome advantage per trajectory, broadcast over its generated tokens
    token_advantages: Callable | None = None
    critic: bool = False  # trains PPO's learned critic beside the policy (and warms it up first)
    oracle: bool = False  # replays episodes against the environment's step oracle (needs one)
    legacy_layout: bool = False  # GRPO: recipes, run folders and logs as they were before the others existed
    notebook: str = "07_process_supervision"  # the notebook that trains its runs


ESTIMATORS: dict[str, Estimator] = {
    "grpo": Estimator("grpo", legacy_layout=True, notebook="01_grpo_training"),
    "gigpo": Estimator("gigpo", _gigpo),
    "ppo": Estimator("ppo", _gae, critic=True),
    "oracle_q": Estimator("oracle_q", _oracle_q, oracle=True),
}


def estimator(name: str) -> Estimator:
    """The estimator `train.algorithm` names (a clear error for an unknown one)."""
    check_algorithm(name)
    return ESTIMATORS[name]


def token_advantages(
    trajs,
    cfg,
    rewards: torch.Tensor,
    adv: torch.Tensor,
    tasks: dict | None = None,
    seed: int = 0,
    values: list[torch.Tensor] | None = None,
) -> tuple[list, list | None, dict]:
    """Per-token advantages of every trajectory for the estimators other than GRPO, as vectors aligned with
    `token_logprobs` (the module docstring says what each estimator gives a token), PPO's returns, and statistics.

    `rewards` are the outcome rewards, `adv` GRPO's outcome advantages (the oracle-Q reward builds on them);
    `tasks` maps task ids to tasks (the oracle replays episodes), `seed` is the RL seed (it fixes the corrupted
    oracle) and `values` the critic's values of each trajectory (PPO).
    """
    est = estimator(cfg.train.algorithm)
    if est.token_advantages is None:
        raise ValueError(f"token_advantages: no per-token advantages for algorithm {est.name!r}")
    return est.token_advantages(trajs, cfg, rewards, adv, tasks, seed, values)
