"""Scripted FrozenLake players as `Policy` objects: positive and negative controls through the kit's own calls.

Each player reads what a model reads. It decodes the prompt's token ids, takes the map and the player's square from
the latest observation and the remaining turns from its budget line (`Turns left: r of T.`), and the start square
from the conversation's first observation; it then answers with one of the four canonical replies
(`<answer>Left</answer>` + end-of-turn, tokenised by the same `ChatFormat` as a model's). Its move distribution is
exact, so `score` returns exact log-probabilities: scoring the four replies gives its move probabilities, as it does
for a model. The dynamics (slip rate) are not in the prompt, so a player is told them.

The kinds (`KINDS`), each with random moves a share `epsilon` of the time (0 = without noise):

* `habit`: the demonstrator's budget-blind habit, greedy on infinite-horizon Q* at discount `habit_gamma` (ties
  shared), `frozenlake.stationary_policy`; with `epsilon = sft.epsilon` it is the demonstrator, with 0 the greedy
  habit;
* `blind_t_max`: the best deterministic budget-blind policy for T_max (`headroom.best_blind_policy`);
* `blind_mix`: the best budget-blind policy for BudgetMix's budget mix (`headroom.budgetmix_mix`);
* `optimum`: the budget-aware optimum, greedy on finite-horizon Q* (gamma 1) at the turns left (ties shared),
  `frozenlake.optimal_policy`.

Per token, reply i's log-prob is that of its token given the tokens before it under the mixture of the four replies
(a trie), so the tokens of a reply sum to log P(move) and a reply that is none of the four scores -inf from its first
token off the four. Sampling honours temperature (p^(1/temperature), renormalised; 0 = uniform over the most likely
moves) and top-p at the level of the four moves; the log-probs a generation returns are the temperature-1 ones, as
the Policy protocol asks.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from helpers import headroom
from helpers.envs import Task, doorway
from helpers.envs import frozenlake as fl
from helpers.policy import Generation, Sampling
from helpers.rollout import ChatFormat

KINDS = ("habit", "blind_t_max", "blind_mix", "optimum")
BUDGET_AWARE = frozenset({"optimum"})

_CELL = {"_": "F", "P": "F", "O": "H", "X": "H", "G": "G", "√": "G"}
_OBSERVATION = re.compile(r"(?m)^((?:[P_OGX√]+\n)+)Turns left: (\d+) of (\d+)\.")


@dataclass(frozen=True)
class Observed:
    """What a scripted player reads off a prompt: the map (S at the first observation's square), the player's
    square in the latest observation, and that observation's turns left and total budget."""

    desc: tuple[str, ...]
    state: int
    remaining: int
    total: int


def _grid(block: str) -> tuple[list[str], int]:
    rows = block.rstrip("\n").split("\n")
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"scripted: a map with rows of different lengths: {rows}")
    flat = "".join(rows)
    players = [i for i, ch in enumerate(flat) if ch in "PX√"]
    if len(players) != 1:
        raise ValueError(f"scripted: expected one player on the map, found {len(players)}: {rows}")
    return rows, players[0]


def read_observation(text: str) -> Observed:
    """Parse a decoded prompt (the whole conversation, or its last turn only) into an `Observed`.

    The latest observation gives the map, the square and the budget line; the first gives the start square (the
    player's square at reset). A prompt that holds only one observation takes its square as the start."""
    found = list(_OBSERVATION.finditer(text))
    if not found:
        raise ValueError(
            "scripted: no FrozenLake observation (a map followed by 'Turns left: r of T.') in the prompt"
        )
    first_rows, start = _grid(found[0].group(1))
    rows, state = _grid(found[-1].group(1))
    plain = str.maketrans("PX√", "_OG")
    if [r.translate(plain) for r in first_rows] != [r.translate(plain) for r in rows]:
        raise ValueError("scripted: the first and the latest observation show different maps")
    if rows[state // len(rows[0])][state % len(rows[0])] in "X√":
        raise ValueError(
            "scripted: the latest observation is terminal (the player is in a hole or on the goal)"
        )
    cells = [[_CELL[ch] for ch in r] for r in rows]
    ncol = len(rows[0])
    cells[start // ncol][start % ncol] = "S"
    desc = tuple("".join(r) for r in cells)
    return Observed(desc, state, int(found[-1].group(2)), int(found[-1].group(3)))


def _task(desc: tuple[str, ...], is_slippery: bool, success_rate: float, t_max: int) -> Task:
    payload = {"desc": list(desc), "is_slippery": is_slippery, "success_rate": success_rate, "gamma": 1.0}
    return Task(task_id="scripted", env="frozenlake", payload=payload, t_max=t_max)


@functools.lru_cache(maxsize=4096)
def _blind(
    desc: tuple[str, ...], is_slippery: bool, success_rate: float, t_max: int, mix: bool
) -> np.ndarray:
    """The best deterministic budget-blind policy of a map, as probabilities [n_states, 4]."""
    task = _task(desc, is_slippery, success_rate, t_max)
    horizons = headroom.budgetmix_mix(t_max) if mix else t_max
    pi, _ = headroom.best_blind_policy(task, horizons)
    return np.eye(4)[pi]


def _greedy(q: np.ndarray, atol: float) -> np.ndarray:
    best = np.isclose(q, q.max(axis=-1, keepdims=True), rtol=0, atol=atol).astype(float)
    return best / best.sum(axis=-1, keepdims=True)


class ScriptedPolicy:
    """A scripted FrozenLake player (`KINDS`) behind the Policy protocol; see the module docstring."""

    def __init__(
        self,
        kind: str,
        tokenizer,
        *,
        epsilon: float = 0.0,
        habit_gamma: float = 0.99,
        t_max: int = 8,
        is_slippery: bool = True,
        success_rate: float = 0.75,
        seed: int = 0,
        name: str | None = None,
        chat_kwargs: dict | None = None,
        doorway_rate: float | None = None,
    ):
        if kind not in KINDS:
            raise ValueError(f"scripted: kind must be one of {KINDS}, got {kind!r}")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"scripted: epsilon must lie in [0, 1], got {epsilon}")
        self.kind, self.epsilon, self.habit_gamma = kind, float(epsilon), float(habit_gamma)
        self.t_max, self.is_slippery, self.success_rate = int(t_max), bool(is_slippery), float(success_rate)
        self.doorway_rate = None if doorway_rate is None else float(doorway_rate)  # the ice of doorway maps
        self.seed = int(seed)
        self.name = name or (f"{kind}+eps{epsilon:g}" if epsilon else kind)
        self.tokenizer = tokenizer
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.chat_kwargs = dict(chat_kwargs or {})
        self.chat = ChatFormat(tokenizer, self.chat_kwargs)
        self.replies = [self.chat.action_ids(fl.format_action(a)) for a in range(4)]
        self._rng = np.random.default_rng(self.seed)
        self._tables: dict[tuple, np.ndarray] = {}
        # a fast tokenizer decodes without the wrapper's per-call conversions
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._decode = (
            (lambda ids: backend.decode(ids, skip_special_tokens=False))
            if backend
            else (lambda ids: tokenizer.decode(ids, skip_special_tokens=False))
        )

    @classmethod
    def from_config(cls, cfg, kind: str, tokenizer, noisy: bool, **kw) -> ScriptedPolicy:
        """A player on the profile's FrozenLake (T_max, slip) with the demonstrator's habit discount, with random
        moves at the demonstrator's rate `sft.epsilon` (`noisy`) or none."""
        f = cfg.env.frozenlake
        kw.setdefault("doorway_rate", doorway.configured_rate(f))
        return cls(
            kind,
            tokenizer,
            epsilon=cfg.sft.epsilon if noisy else 0.0,
            habit_gamma=cfg.sft.habit_gamma,
            t_max=f.t_max,
            is_slippery=f.is_slippery,
            success_rate=f.success_rate,
            **kw,
        )

    # ------------------------------------------------------------------------------------ the distribution
    def table(self, desc: tuple[str, ...], remaining: int) -> np.ndarray:
        """The move probabilities [n_states, 4] this player uses on map `desc` with `remaining` turns left."""
        key = (tuple(desc), int(remaining) if self.kind in BUDGET_AWARE else 0)
        if key not in self._tables:
            self._tables[key] = self._table(*key)
        return self._tables[key]

    def _table(self, desc: tuple[str, ...], remaining: int) -> np.ndarray:
        slip, rate = self.is_slippery, self.rate_of(desc)
        if self.kind == "habit":
            pi = _greedy(fl._stationary_q(desc, self.habit_gamma, slip, rate), 1e-9)
        elif self.kind in ("blind_t_max", "blind_mix"):
            pi = _blind(desc, slip, rate, self.t_max, self.kind == "blind_mix")
        else:
            pi = _greedy(fl._optimal_q(desc, int(remaining), 1.0, slip, rate)[int(remaining)], 1e-12)
        return fl.with_random_moves(pi, self.epsilon)

    def rate_of(self, desc: tuple[str, ...]) -> float:
        """The ice's success rate on map `desc`: the doorway rate on a doorway map (`doorway.is_doorway`; the
        kit's random maps never have that shape) where this player knows one, the profile's otherwise."""
        if self.doorway_rate is not None and doorway.is_doorway(desc):
            return self.doorway_rate
        return self.success_rate

    def exact_policy(self, task: Task, budget: int) -> np.ndarray:
        """What this player plays on `task` within `budget` turns as one array for `frozenlake.policy_success`:
        [n_states, 4] (budget-blind kinds) or [budget + 1, n_states, 4] indexed by turns left (the optimum)."""
        desc = tuple(task.payload["desc"])
        if self.kind not in BUDGET_AWARE:
            return self.table(desc, budget)
        return np.stack([self.table(desc, max(h, 1)) for h in range(int(budget) + 1)])

    def move_probs(self, prompt_ids: list[int]) -> np.ndarray:
        """P(move) [4] at a prompt, read off its decoded text."""
        text = self._decode(list(prompt_ids))
        obs = read_observation(text)
        if (fl.SLIPPERY_NOTE.strip() in text) != self.is_slippery:
            raise ValueError(
                f"scripted: the prompt's ice (slippery or not) differs from this player's "
                f"is_slippery={self.is_slippery}"
            )
        if obs.remaining < 1:
            raise ValueError("scripted: no turns left at this prompt")
        return self.table(obs.desc, obs.remaining)[obs.state]

    def _token_logprobs(self, p: np.ndarray, cont: list[int]) -> list[float]:
        """Exact per-token log-probs of `cont` under the mixture of the four replies with move probabilities p."""
        out, alive = [], np.ones(4, dtype=bool)
        mass = 1.0
        for i, tok in enumerate(cont):
            nxt = alive & np.array([len(r) > i and r[i] == tok for r in self.replies])
            new = float(p[nxt].sum())
            if new <= 0.0 or mass <= 0.0:
                out += [-np.inf] * (len(cont) - i)
                return out
            out.append(float(np.log(new) - np.log(mass)))
            alive, mass = nxt, new
        return out

    # ------------------------------------------------------------------------------------ the protocol
    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        """One reply per prompt, drawn from the move distribution shaped by temperature and top-p; `sampling.seed`
        (with this player's own `seed`) fixes the draws of a call."""
        rng = self._rng if sampling.seed is None else np.random.default_rng([self.seed, int(sampling.seed)])
        out = []
        for prompt in prompt_token_ids:
            p = self.move_probs(prompt)
            a = int(rng.choice(4, p=shaped(p, sampling.temperature, sampling.top_p)))
            ids = self.replies[a][: sampling.max_new_tokens]
            cut = len(ids) < len(
                self.replies[a]
            )  # max_new_tokens cut the reply: its text is what was generated
            text = self.tokenizer.decode(ids, skip_special_tokens=True) if cut else fl.format_action(a)
            out.append(Generation(list(ids), self._token_logprobs(p, ids), text, finished=not cut))
        return out

    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """Exact per-token log-probs of each continuation given its prompt (temperature 1)."""
        if len(prompt_token_ids) != len(continuation_token_ids):
            raise ValueError("score(): need one continuation per prompt")
        seen: dict[tuple, np.ndarray] = {}  # a prompt scored with several replies is read once
        out = []
        for p, c in zip(prompt_token_ids, continuation_token_ids, strict=True):
            key = tuple(p)
            if key not in seen:
                seen[key] = self.move_probs(p)
            out.append(self._token_logprobs(seen[key], list(c)))
        return out


def shaped(p: np.ndarray, temperature: float, top_p: float = 1.0) -> np.ndarray:
    """Move probabilities as sampling draws them: p^(1/temperature) renormalised (temperature 0: the most likely
    moves, shared equally), then the smallest set of most likely moves whose mass reaches top_p."""
    p = np.asarray(p, dtype=float)
    if temperature == 0:
        q = np.isclose(p, p.max(), rtol=0, atol=1e-12).astype(float)
    else:
        with np.errstate(divide="ignore"):
            logq = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)) / float(temperature), -np.inf)
        q = np.exp(logq - logq.max())
    q = q / q.sum()
    if top_p < 1.0:
        order = np.argsort(-q, kind="stable")
        keep = np.zeros(4, dtype=bool)
        keep[order[(np.cumsum(q[order]) - q[order]) < top_p]] = True
        q = np.where(keep, q, 0.0) / q[keep].sum()
    return q


def references(cfg, tokenizer, seed: int = 0) -> dict[str, ScriptedPolicy]:
    """The scripted references of issue 27, each without and with the demonstrator's noise: `habit+noise` is the
    demonstrator and `habit` the greedy habit; `blind_t_max`, `blind_mix`, `optimum` likewise."""
    out = {}
    for kind in KINDS:
        for noisy in (False, True):
            name = f"{kind}+noise" if noisy else kind
            out[name] = ScriptedPolicy.from_config(cfg, kind, tokenizer, noisy, seed=seed, name=name)
    return out
