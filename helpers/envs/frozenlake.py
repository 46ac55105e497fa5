"""Text FrozenLake on gymnasium's own dynamics, with its finite-horizon DP oracle Q*.

The agent sees the map rendered as text (RAGEN's symbols: `P` player, `_` frozen, `O` hole, `G` goal, `X` player
in a hole, `√` player on the goal) and answers one move per turn as `<answer>Left</answer>`. Moves are applied by
gymnasium's `FrozenLakeEnv` (any map through `desc`, slippery or not), seeded at reset, so an episode is fixed by
(task, seed, actions).

Maps come from gymnasium's random-map generator; start and goal are then placed at random distinct cells with a
path between them (rLLM's variant). Train and test maps are drawn from disjoint seed streams and deduplicated
by the rendered map, and the split is checked to be disjoint.

`optimal_q(desc, horizon, gamma)` is finite-horizon Q* by dynamic programming on the environment's own
transition table (`env.unwrapped.P`), index h = turns left. It scores steps (`step_quality`, gamma 0.95 as in
the paper) and, with gamma = 1, gives the structural upper bound: the best success probability within T turns.
"""

from __future__ import annotations

import functools
import re
from collections import deque

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from helpers.budget import statement
from helpers.envs.base import StepResult, Task

ACTIONS = ("Left", "Down", "Right", "Up")  # gymnasium's order: LEFT=0 DOWN=1 RIGHT=2 UP=3
_ACTION_INDEX = {a.lower(): i for i, a in enumerate(ACTIONS)}
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)

SYSTEM_PROMPT = (
    "You are playing FrozenLake. Move the player P to the goal G without stepping into a hole O. "
    "_ is frozen ice. Moves: Left, Down, Right, Up. Reply with one move as <answer>Move</answer>."
)
SLIPPERY_NOTE = " The ice is slippery: a move may go sideways instead."


def format_action(action: int) -> str:
    """The canonical reply for an action index, e.g. '<answer>Left</answer>'."""
    return f"<answer>{ACTIONS[action]}</answer>"


def parse_action(text: str) -> tuple[int | None, str]:
    """Parse a reply into an action index, or (None, what was wrong).

    The reply must contain exactly one `<answer>...</answer>` whose content, stripped and case-folded, is one of
    the four moves. Text around the tag is allowed (a larger model may explain itself); two answers, an empty
    answer or an unknown move are invalid.
    """
    found = _ANSWER.findall(text)
    if not found:
        return None, "no <answer>...</answer> tag found"
    if len(found) > 1:
        return None, f"{len(found)} answers given; give exactly one"
    move = found[0].strip().lower()
    if move not in _ACTION_INDEX:
        return None, f"unknown move {found[0].strip()[:20]!r}"
    return _ACTION_INDEX[move], ""


def render(desc: tuple[str, ...] | list[str], state: int) -> str:
    """The map as text with the player at `state`."""
    ncol = len(desc[0])
    rows = []
    for r, line in enumerate(desc):
        cells = []
        for c, ch in enumerate(line):
            here = r * ncol + c == state
            if ch == "H":
                cells.append("X" if here else "O")
            elif ch == "G":
                cells.append("√" if here else "G")
            else:
                cells.append("P" if here else "_")
        rows.append("".join(cells))
    return "\n".join(rows)


def start_state(desc: tuple[str, ...] | list[str]) -> int:
    """Index of the start cell S."""
    flat = "".join(desc)
    return flat.index("S")


# ------------------------------------------------------------------------------------------- the oracle


@functools.lru_cache(maxsize=4096)
def _tables(desc: tuple[str, ...], is_slippery: bool) -> tuple[np.ndarray, np.ndarray]:
    """Dense expected reward R[s, a] and continuation C[s, a, s'] = sum of p * (1 - done) from gymnasium's P."""
    env = GymFrozenLake(desc=list(desc), is_slippery=is_slippery)
    P = env.unwrapped.P
    n = env.unwrapped.observation_space.n
    R = np.zeros((n, 4))
    C = np.zeros((n, 4, n))
    for s in range(n):
        for a in range(4):
            # A move into a wall can list the same next state twice: accumulating sums them.
            for p, s2, r, done in P[s][a]:
                R[s, a] += p * r
                C[s, a, s2] += p * (1.0 - float(done))
    return R, C


def optimal_q(desc, horizon: int, gamma: float = 0.95, is_slippery: bool = False) -> np.ndarray:
    """Finite-horizon Q*: array [horizon + 1, n_states, 4], index h = number of turns left.

    Q_0 = 0; Q_h(s, a) = sum over (p, s', r, done) of p * (r + gamma * (1 - done) * max_a' Q_{h-1}(s', a')).
    """
    return _optimal_q(tuple(desc), int(horizon), float(gamma), bool(is_slippery)).copy()


@functools.lru_cache(maxsize=4096)
def _optimal_q(desc: tuple[str, ...], horizon: int, gamma: float, is_slippery: bool) -> np.ndarray:
    R, C = _tables(desc, is_slippery)
    Q = np.zeros((horizon + 1, *R.shape))
    for h in range(1, horizon + 1):
        Q[h] = R + gamma * C @ Q[h - 1].max(axis=1)
    return Q


def upper_bound(task: Task, budget: int) -> float:
    """Best achievable success probability within `budget` turns (max_a Q*_T(start) with gamma = 1)."""
    desc = tuple(task.payload["desc"])
    q = _optimal_q(desc, int(budget), 1.0, bool(task.payload.get("is_slippery", False)))
    return float(q[budget, start_state(desc)].max())


def shortest_path(desc: tuple[str, ...] | list[str]) -> int | None:
    """Fewest moves from S to G avoiding holes (None if unreachable)."""
    n = len(desc)
    m = len(desc[0])
    start = divmod(start_state(desc), m)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if desc[r][c] == "G":
            return seen[(r, c)]
        for dr, dc in ((0, -1), (1, 0), (0, 1), (-1, 0)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < n and 0 <= nc < m and desc[nr][nc] != "H" and (nr, nc) not in seen:
                seen[(nr, nc)] = seen[(r, c)] + 1
                queue.append((nr, nc))
    return None


# --------------------------------------------------------------------------------------------- the maps


def random_map(size: int, hole_p: float, seed: int) -> tuple[str, ...] | None:
    """A map from gymnasium's generator with S and G moved to random distinct reachable cells (or None)."""
    board = [
        list(row.replace("S", "F").replace("G", "F")) for row in generate_random_map(size, 1 - hole_p, seed)
    ]
    rng = np.random.default_rng([seed, 1])
    free = [(r, c) for r in range(size) for c in range(size) if board[r][c] == "F"]
    for _ in range(20):
        i, j = rng.choice(len(free), size=2, replace=False)
        trial = [row[:] for row in board]
        trial[free[i][0]][free[i][1]] = "S"
        trial[free[j][0]][free[j][1]] = "G"
        desc = tuple("".join(row) for row in trial)
        if shortest_path(desc) is not None:
            return desc
    return None


_SPLIT_OFFSET = {"test": 0, "train": 50_000_000}


@functools.lru_cache(maxsize=16)
def map_sets(size: int, hole_p: float, n_train: int, n_test: int, map_seed: int) -> dict[str, list[tuple]]:
    """Disjoint train and test map sets, deduplicated by the rendered map (checked, not assumed)."""
    base = map_seed * 100_000_000
    test: dict[str, tuple] = {}
    seed = base + _SPLIT_OFFSET["test"]
    while len(test) < n_test:
        desc = random_map(size, hole_p, seed)
        seed += 1
        if desc is not None:
            test.setdefault(render(desc, start_state(desc)), desc)
    train: dict[str, tuple] = {}
    seed = base + _SPLIT_OFFSET["train"]
    while len(train) < n_train:
        desc = random_map(size, hole_p, seed)
        seed += 1
        if seed - base - _SPLIT_OFFSET["train"] > 50 * n_train + 10_000:
            raise ValueError(
                f"frozenlake: could not find {n_train} distinct training maps of size {size} disjoint from the "
                f"test maps; lower env.frozenlake.n_train or raise env.frozenlake.size"
            )
        if desc is None:
            continue
        key = render(desc, start_state(desc))
        if key not in test:
            train.setdefault(key, desc)
    overlap = set(train) & set(test)
    assert not overlap, f"train and test maps overlap: {len(overlap)}"
    return {"train": list(train.values()), "test": list(test.values())}


# ---------------------------------------------------------------------------------------- the environment


class FrozenLakeEnv:
    """Text FrozenLake with a turn budget; implements `helpers.envs.base.Env`."""

    name = "frozenlake"

    def __init__(self) -> None:
        self.task: Task | None = None
        self.done = True

    # -- tasks --------------------------------------------------------------------------------------------
    @classmethod
    def load_tasks(
        cls,
        split: str,
        n: int | None = None,
        source: str = "bundled",
        seed: int = 0,
        *,
        size: int = 5,
        hole_p: float = 0.2,
        t_max: int = 10,
        is_slippery: bool = False,
        gamma: float = 0.95,
        n_train: int = 2000,
        n_test: int = 100,
        map_seed: int = 0,
    ) -> list[Task]:
        """Tasks of one split; with `n`, a seeded subset of it (the whole split keeps its stored order)."""
        if source != "bundled":
            raise ValueError("frozenlake maps are generated locally; source must be 'bundled'")
        maps = map_sets(size, hole_p, n_train, n_test, map_seed)[split]
        idx = np.arange(len(maps))
        if n is not None and n < len(maps):
            idx = np.sort(np.random.default_rng(seed).choice(len(maps), size=n, replace=False))
        return [
            Task(
                task_id=f"fl{size}-{split}-{i:05d}",
                env=cls.name,
                payload={"desc": list(maps[i]), "is_slippery": is_slippery, "gamma": gamma},
                t_max=t_max,
            )
            for i in idx
        ]

    @staticmethod
    def upper_bound(task: Task, budget: int) -> float:
        return upper_bound(task, budget)

    # -- episode ------------------------------------------------------------------------------------------
    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        self.task = task
        self.desc = tuple(task.payload["desc"])
        self.is_slippery = bool(task.payload.get("is_slippery", False))
        self.gamma = float(task.payload.get("gamma", 0.95))
        self._gym = GymFrozenLake(desc=list(self.desc), is_slippery=self.is_slippery)
        self.state, _ = self._gym.reset(seed=seed)
        self.total = self.remaining = int(budget)
        self.t = 0
        self.done = False
        system = SYSTEM_PROMPT + (SLIPPERY_NOTE if self.is_slippery else "")
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self._observation("")},
        ]

    def _observation(self, note: str) -> str:
        head = f"{note}\n" if note else ""
        return f"{head}{render(self.desc, self.state)}\n{statement(self.total, self.remaining)}"

    def step(self, action_text: str) -> StepResult:
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        action, why = parse_action(action_text)
        self.t += 1
        self.remaining -= 1
        info = {"invalid": action is None, "action": action, "t": self.t, "remaining": self.remaining}
        if action is None:
            self.done = self.remaining == 0
            note = f"Invalid action: {why}. Reply with <answer>Left</answer>, Down, Right or Up."
            if self.done:
                note += " Out of turns."
            info["state"] = int(self.state)
            return StepResult(self._observation(note), 0.0, self.done, False, info)
        self.state, reward, terminated, _, _ = self._gym.step(action)
        self.state = int(self.state)
        cell = self.desc[self.state // len(self.desc[0])][self.state % len(self.desc[0])]
        success = cell == "G"
        self.done = bool(terminated) or self.remaining == 0
        note = "You reached the goal." if success else "You fell into a hole." if cell == "H" else ""
        if self.done and not terminated:
            note = "Out of turns."
        info["state"] = self.state
        info["terminated"] = bool(terminated)  # the episode ended by itself (goal or hole), not by the budget
        return StepResult(self._observation(note), float(reward), self.done, success, info)

    # -- oracle -------------------------------------------------------------------------------------------
    def q_values(self) -> np.ndarray:
        """Q*(s, .) at the current state with the remaining budget as horizon (gamma from the task)."""
        q = _optimal_q(self.desc, self.remaining, self.gamma, self.is_slippery)
        return q[self.remaining, self.state]

    def incorrect_actions(self) -> list[str]:
        """Suboptimal moves that do not end the episode (see `incorrect_actions`)."""
        return incorrect_actions(self)

    def step_quality(self, action_text: str) -> float | None:
        """Q*(s, a) / max_a' Q*(s, a'): 1 for a best action, 0 for an invalid one or a move into a hole.

        Where no action can reach the goal within the remaining turns (max Q* = 0) every valid action is equally
        good and scores 1.
        """
        if self.done:
            raise RuntimeError("step_quality() on a finished episode")
        action, _ = parse_action(action_text)
        if action is None:
            return 0.0
        q = self.q_values()
        best = q.max()
        return 1.0 if best <= 0 else float(q[action] / best)


def incorrect_actions(env: FrozenLakeEnv) -> list[str]:
    """Moves at the current state whose Q* is below the best and that do not end the episode (no hole, no goal).

    These are the candidates for an injected error: a worse move after which the agent still has a state to
    recover from (a move into a hole would leave nothing to recover).
    """
    q = env.q_values()
    best = q.max()
    out = []
    for a in range(4):
        if q[a] >= best - 1e-12:
            continue
        P = env._gym.unwrapped.P[env.state][a]
        ends = any(done for p, _, _, done in P if p > 0)
        if not ends:
            out.append(format_action(a))
    return out


def q_greedy_action(env: FrozenLakeEnv, rng: np.random.Generator, epsilon: float = 0.0) -> int:
    """A scripted player: with probability epsilon a uniformly random move, else a best move by Q* (ties
    broken at random)."""
    if rng.random() < epsilon:
        return int(rng.integers(4))
    q = env.q_values()
    best = np.flatnonzero(np.isclose(q, q.max()))
    return int(rng.choice(best))


def scripted_player(epsilon: float = 0.0, seed: int = 0):
    """A player `f(env) -> action_text`: Q*-greedy, random with probability epsilon (0 = optimal)."""
    rng = np.random.default_rng(seed)
    return lambda env: format_action(q_greedy_action(env, rng, epsilon))


def map_stats(tasks: list[Task]) -> dict:
    """Shortest-path statistics of a map set."""
    lengths = np.array([shortest_path(t.payload["desc"]) for t in tasks])
    holes = np.array([sum(row.count("H") for row in t.payload["desc"]) for t in tasks])
    return {
        "n_maps": len(tasks),
        "shortest_path_mean": float(lengths.mean()),
        "shortest_path_median": float(np.median(lengths)),
        "shortest_path_min": int(lengths.min()),
        "shortest_path_max": int(lengths.max()),
        "holes_mean": float(holes.mean()),
    }


def upper_bound_curve(tasks: list[Task], budgets: list[int]) -> dict[int, float]:
    """The structural upper bound per budget T: best success probability within T turns, averaged over tasks."""
    return {int(T): float(np.mean([upper_bound(t, T) for t in tasks])) for T in budgets}


def scripted_success(
    tasks: list[Task], budgets: list[int], epsilon: float, seed: int = 0
) -> dict[int, float]:
    """Success rate of the scripted player (one episode per task) at each budget."""
    from helpers.envs.base import play

    out = {}
    for T in budgets:
        player = scripted_player(epsilon, seed)
        wins = [play(FrozenLakeEnv(), t, T, player, seed=seed)[1].success for t in tasks]
        out[int(T)] = float(np.mean(wins))
    return out
