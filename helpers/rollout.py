"""Lock-step multi-turn rollouts: environment -> policy -> environment, many trajectories at once.

Each turn makes one batched `policy.generate` call over every live trajectory, then steps every environment;
finished trajectories drop out. Token ids accumulate turn by turn and are never re-tokenised from text: the
opening prompt, then per turn the generated tokens (mask 1, with their sampling log-probs) and the tokens of
the environment's reply in the chat format (mask 0). That id sequence is exactly what the trainer scores and
what the likelihood analysis reads.

A `Trajectory` also keeps per-turn records (action text, observation, reward, step quality, invalid flag) and
serialises to a JSON line that loads back identically.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from helpers import models
from helpers.envs import make
from helpers.envs.base import Task
from helpers.policy import Policy, Sampling

SENTINEL = "\x00OBSERVATION\x00"
ACTION = "\x00ACTION\x00"
THINK_END = "</think>"
# texts remembered per tokenizer (a FrozenLake run meets a few thousand distinct ones); 0 remembers none
ENCODE_CACHE_SIZE = 1 << 16
_encoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {text: token ids}


def encode_cached(tokenizer, text: str) -> list[int]:
    """`tokenizer(text, add_special_tokens=False)["input_ids"]`, remembered by text for as long as the tokenizer
    lives. Rollouts meet the same observation texts and openings over and over (a 4x4 map has 16 squares), and a
    tokenizer maps a text to the same ids every time, so this is the same list, computed once: a copy is returned,
    so a caller may extend it. The memory is bounded: past `ENCODE_CACHE_SIZE` texts it starts again."""
    try:
        memo = _encoded.setdefault(tokenizer, {}) if ENCODE_CACHE_SIZE > 0 else None
    except TypeError:  # a tokenizer that cannot be weakly referenced: no memory
        memo = None
    if memo is None:  # ENCODE_CACHE_SIZE 0 (benchmarks/speed.py's baseline) or no weak reference: no memory
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    ids = memo.get(text)
    if ids is None:
        if len(memo) >= ENCODE_CACHE_SIZE:
            memo.clear()
        ids = memo[text] = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(ids)


class ChatFormat:
    """Turns chat messages into token ids the way the model's chat template does, one piece at a time.

    A conversation's ids are accumulated, never re-rendered: the opening prompt (the template's render with its
    generation prompt), then per turn the tokens the model generated and its end-of-turn, then `observation_ids`
    (the rest of the closed assistant turn, the environment's message, the next generation prompt). The
    observation wrapper is read off a render the template does produce (system, user, assistant, user, with the
    generation prompt): the text between the assistant's end-of-turn and the last user message's content, and
    after it. Templates that rewrite earlier turns when a conversation grows (Qwen3's drops the think blocks of
    turns before the last user message) are therefore fine: the model's turns stay in the history exactly as it
    generated them, behind the generation prompt it was given (with thinking off, Qwen3's empty
    `<think>\n\n</think>\n\n` block before every action; with thinking on, its own think blocks), which is also
    what the trainer scores: on-policy, as SkyRL's `qwen3_acc_thinking` keeps it. `docs/gpu.md` says more.
    """

    def __init__(self, tokenizer, chat_kwargs: dict | None = None):
        self.tokenizer = tokenizer
        self.kw = dict(chat_kwargs or {})
        self.eos_token_id = int(tokenizer.eos_token_id)
        self._openings: dict[tuple, str] = {}  # (role, content) pairs -> rendered opening
        eos = tokenizer.eos_token
        opening = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        head = self._render(opening, False)
        self.generation_prompt = self._render(opening, True)[len(head) :]
        convo = self._render(
            [*opening, {"role": "assistant", "content": ACTION}, {"role": "user", "content": SENTINEL}], True
        )
        end = convo.find(ACTION + eos)
        if not convo.startswith(head) or end < 0 or convo.count(SENTINEL) != 1:
            raise ValueError(
                "chat template: cannot find where an assistant turn ends and the next user message starts "
                f"(the assistant's text followed by the end-of-turn token {eos!r}) in {convo!r}"
            )
        self.obs_prefix, self.obs_suffix = convo[end + len(ACTION) + len(eos) :].split(SENTINEL)
        if not self.obs_suffix.endswith(self.generation_prompt):
            raise ValueError(
                f"chat template: the generation prompt after a user message ({self.obs_suffix!r}) does not end as "
                f"the opening's ({self.generation_prompt!r}); the model would be asked to write a different turn"
            )
        # a template with a thinking switch (Qwen3's): the environment reads the answer after the think block
        self.thinks = models.knows_thinking(tokenizer)

    def answer(self, text: str) -> str:
        """What the environment reads of a generated turn: with a thinking template, the text after the last
        `</think>` (a turn that never closed its think block answers nothing); otherwise the text itself."""
        if not self.thinks:
            return text
        if THINK_END in text:
            return text.rsplit(THINK_END, 1)[1].lstrip("\n")
        return "" if "<think>" in text else text

    def _render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **self.kw
        )

    def encode(self, text: str) -> list[int]:
        """The ids of `text` without special tokens (`encode_cached`: each distinct text is tokenised once)."""
        return encode_cached(self.tokenizer, text)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The opening messages with the generation prompt (each distinct opening rendered once per format)."""
        plain = all(m.keys() == {"role", "content"} and isinstance(m["content"], str) for m in messages)
        key = tuple((m["role"], m["content"]) for m in messages) if plain else None
        text = self._openings.get(key) if key is not None else None
        if text is None:
            text = self._render(messages, True)
            if key is not None:
                self._openings[key] = text
        return self.encode(text)

    def observation_ids(self, observation: str) -> list[int]:
        """The tokens that follow the model's end-of-turn: the environment's reply and the next generation prompt."""
        return self.encode(self.obs_prefix + observation + self.obs_suffix)

    def action_ids(self, action: str) -> list[int]:
        """An assistant reply as the model would generate it (used for demonstrations)."""
        return [*self.encode(action), self.eos_token_id]


class LastTurnContext:
    """A policy that sees only the system prompt and the latest observation of the conversation.

    Rollouts give a model the whole conversation; this wrapper cuts each prompt to what a one-turn `window`
    example of SFT holds (`helpers.base_model.examples`), token for token, so a base can be measured in the
    context it was trained on as well as in the context it plays in. Only for measurement: trajectories still
    record the whole conversation.
    """

    def __init__(self, policy: Policy, chat: ChatFormat, name: str | None = None):
        self.policy = policy
        self.name = name or f"{policy.name} (last turn only)"
        self.tokenizer = policy.tokenizer
        self.eos_token_id = policy.eos_token_id
        self.chat_kwargs = getattr(policy, "chat_kwargs", None)
        self.rollout_rows = getattr(policy, "rollout_rows", None)
        # the tokens that open a user turn, e.g. <|im_start|> user
        self._marker = chat.encode(chat.obs_prefix.lstrip("\n").split("\n")[0])

    def window(self, ids: list[int]) -> list[int]:
        """The system part of `ids` followed by its last user turn."""
        m = self._marker
        starts = [i for i in range(len(ids) - len(m) + 1) if ids[i : i + len(m)] == m]
        if len(starts) < 2:
            return list(ids)
        return ids[: starts[0]] + ids[starts[-1] :]

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list:
        return self.policy.generate([self.window(p) for p in prompt_token_ids], sampling)

    def score(self, prompt_token_ids, continuation_token_ids):  # pragma: no cover - not used for scoring
        raise NotImplementedError("LastTurnContext is for sampling only")


@dataclass
class Trajectory:
    """One episode, at the token level and turn by turn."""

    task_id: str
    env: str
    model: str
    budget: int
    t_max: int
    seed: int
    sample: int  # index among the samples of this task
    token_ids: list[int] = field(default_factory=list)
    gen_mask: list[int] = field(default_factory=list)  # 1 = generated by the policy
    logprobs: list[float] = field(default_factory=list)  # sampling log-prob where gen_mask = 1, else 0.0
    prompt_len: int = 0  # tokens of the opening prompt
    turns: list[dict] = field(
        default_factory=list
    )  # action, observation, reward, done, success, invalid, quality
    success: bool = False
    reward: float = 0.0
    group: str = ""  # the task group (same task, same budget) GRPO normalises within
    exhausted: bool = False  # the budget ran out before the episode ended by itself
    start_turn: int = 0  # turns already played before the first recorded one (continuations from a state)
    # the conversation had no room for another turn within the policy's `max_context` (vLLM's max_model_len): the
    # episode ended there unfinished, as if its budget had run out, instead of the engine raising mid-run
    context_full: bool = False

    @classmethod
    def opening(cls, ids: list[int], **fields) -> Trajectory:
        """A trajectory that starts from the context `ids` (not generated by the policy: mask 0)."""
        ids = list(ids)
        return cls(
            token_ids=ids, gen_mask=[0] * len(ids), logprobs=[0.0] * len(ids), prompt_len=len(ids), **fields
        )

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Trajectory:
        return cls(**d)

    def turn_spans(self) -> list[tuple[int, int]]:
        """[start, end) of the generated tokens of each turn in `token_ids`."""
        spans, start = [], None
        for i, m in enumerate([*self.gen_mask, 0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                spans.append((start, i))
                start = None
        return spans


def episode_seed(seed: int, task_id: str, sample: int) -> int:
    """A per-episode seed that is the same in every process (Python's hash() is salted per process)."""
    digest = hashlib.sha256(f"{seed}|{task_id}|{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def rollout(
    policy: Policy,
    env_name: str,
    tasks: list[Task],
    budgets: int | list[int],
    n_samples: int,
    sampling: Sampling,
    seed: int = 0,
    env_kwargs: dict | None = None,
    step_quality: bool = True,
    chat: ChatFormat | None = None,
    model_name: str | None = None,
) -> list[Trajectory]:
    """Run `n_samples` trajectories per task in lock step; `budgets` is one int or one per task.

    Trajectories come back grouped by task (task 0's samples first). `step_quality` records the environment's
    oracle score of every action before it is applied (None where the environment has none).
    """
    if isinstance(budgets, int):
        budgets = [budgets] * len(tasks)
    if len(budgets) != len(tasks):
        raise ValueError(f"rollout(): {len(budgets)} budgets for {len(tasks)} tasks")
    chat = chat or ChatFormat(policy.tokenizer, getattr(policy, "chat_kwargs", None))
    env_kwargs = env_kwargs or {}
    name = model_name or policy.name

    trajs, envs = [], []
    for task, budget in zip(tasks, budgets, strict=True):
        for j in range(n_samples):
            env = make(env_name, **env_kwargs)
            s = episode_seed(seed, task.task_id, j)
            ids = chat.prompt_ids(env.reset(task, budget, seed=s))
            trajs.append(
                Trajectory.opening(
                    ids,
                    task_id=task.task_id,
                    env=env_name,
                    model=name,
                    budget=int(budget),
                    t_max=task.t_max,
                    seed=s,
                    sample=j,
                    group=f"{task.task_id}|{budget}",
                )
            )
            envs.append(env)

    _in_chunks(policy, chat, trajs, envs, sampling, seed, step_quality)
    return trajs


def continue_from(
    policy: Policy,
    states: list,
    n_samples: int,
    sampling: Sampling,
    seed: int = 0,
    env_kwargs: dict | None = None,
    chat: ChatFormat | None = None,
    model_name: str | None = None,
) -> list[Trajectory]:
    """Continue `n_samples` trajectories from each `helpers.probing.ProbeState` with its remaining budget.

    The environment is replayed to the state; the token ids start from the state's prefix (whose tokens were
    not generated by this policy: mask 0), and only the continuation's turns are recorded. Where the environment
    has its own randomness (FrozenLake's slips) continuation j of a state draws it from a stream fixed by the state
    and j alone (`reseed`), so the n continuations do not share their dynamics noise while two policies compared
    from the same state face the same noise; `seed` seeds the policy's own sampling (give each policy its own).
    """
    chat = chat or ChatFormat(policy.tokenizer, getattr(policy, "chat_kwargs", None))
    name = model_name or policy.name
    trajs, envs = [], []
    for s in states:
        for j in range(n_samples):
            env = s.replay(env_kwargs)
            if env.done:
                raise ValueError(
                    f"state of {s.task['task_id']} after {s.t} actions is terminal; nothing to continue"
                )
            if hasattr(env, "reseed"):
                env.reseed(episode_seed(s.seed, f"{s.task['task_id']}|{s.budget}|{s.t}", j))
            trajs.append(
                Trajectory.opening(
                    s.prefix_ids,
                    task_id=s.task["task_id"],
                    env=s.env,
                    model=name,
                    budget=s.budget,
                    t_max=s.task["t_max"],
                    seed=s.seed,
                    sample=j,
                    group=f"{s.task['task_id']}|{s.budget}|{s.t}",
                    start_turn=s.t,
                )
            )
            envs.append(env)
    _in_chunks(policy, chat, trajs, envs, sampling, seed, step_quality=False)
    return trajs


def chunk_seed(seed: int, chunk: int) -> int:
    """The sampling seed of chunk `chunk` of a rollout seeded `seed`: chunk 0 keeps `seed` (a rollout of one chunk
    draws as it always did), every other chunk has a stream of its own."""
    if chunk == 0:
        return int(seed)
    return int.from_bytes(hashlib.sha256(f"{seed}|chunk {chunk}".encode()).digest()[:4], "little")


def _in_chunks(policy, chat, trajs, envs, sampling, seed, step_quality) -> None:
    """`_lock_step` over the policy's `rollout_rows` trajectories at a time (all at once where it has none), chunk c
    sampling on `chunk_seed(.., c)`."""
    size = getattr(policy, "rollout_rows", None) or max(len(trajs), 1)
    base = sampling.seed if sampling.seed is not None else seed
    for c, start in enumerate(range(0, len(trajs), size)):
        rows = slice(start, start + size)
        chunk = sampling if c == 0 else sampling.replace(seed=chunk_seed(base, c))
        _lock_step(policy, chat, trajs[rows], envs[rows], chunk, seed, step_quality)


# Tokens a policy with a `max_context` keeps free beyond a whole turn: the end-of-turn token the kit appends to a reply
# cut off at max_new_tokens, and the one output token vLLM needs room for when the trajectory is scored (a prompt plus
# its requested tokens must fit max_model_len: `VLLMPolicy.score` asks for one).
CONTEXT_RESERVE = 2


def _lock_step(policy, chat, trajs, envs, sampling, seed, step_quality) -> None:
    """The lock-step loop: one batched generation over the live trajectories per turn, then every env steps.

    A policy with a `max_context` (tokens the engine holds: prompt plus generation) gets only conversations with room
    for a whole turn (`sampling.max_new_tokens`) and `CONTEXT_RESERVE` more; the others end before that turn with
    `context_full` set and without the observation that followed their last action (never acted on), so every
    trajectory it makes can be scored by an engine of the same `max_model_len` (issue 48)."""
    live = list(range(len(trajs)))
    limit = getattr(policy, "max_context", None)
    turn_end: dict[int, int] = {}  # tokens of each trajectory up to its last action (before its observation)
    if limit is not None:
        for tr in trajs:
            if len(tr.token_ids) + sampling.max_new_tokens + CONTEXT_RESERVE > limit:
                raise ValueError(
                    f"the opening prompt of {tr.task_id} is {len(tr.token_ids)} tokens: with max_new_tokens "
                    f"{sampling.max_new_tokens} it does not fit max_context {limit} (model.max_model_len)"
                )
    turn = 0
    while live:
        if limit is not None:
            for i in live:
                tr = trajs[i]
                if len(tr.token_ids) + sampling.max_new_tokens + CONTEXT_RESERVE > limit:
                    tr.context_full = True
                    if i in turn_end:  # drop the trailing observation
                        cut = turn_end[i]
                        del tr.token_ids[cut:], tr.gen_mask[cut:], tr.logprobs[cut:]
            live = [i for i in live if not trajs[i].context_full]
            if not live:
                break
        gens = policy.generate([trajs[i].token_ids for i in live], _turn_sampling(sampling, seed, turn))
        for i, g in zip(live, gens, strict=True):
            tr, env = trajs[i], envs[i]
            answer = chat.answer(g.text)
            quality = env.step_quality(answer) if step_quality else None
            dead = bool(env.is_dead()) if step_quality and hasattr(env, "is_dead") else None
            result = env.step(answer)
            tr.token_ids += g.token_ids
            tr.gen_mask += [1] * len(g.token_ids)
            tr.logprobs += g.logprobs
            if not g.finished:  # cut off by max_new_tokens: close the turn as the chat format requires
                tr.token_ids.append(chat.eos_token_id)
                tr.gen_mask.append(0)
                tr.logprobs.append(0.0)
            tr.turns.append(
                {
                    "action": g.text,
                    "observation": result.observation,
                    "reward": result.reward,
                    "done": result.done,
                    "success": result.success,
                    "invalid": bool(result.info.get("invalid")),
                    "quality": quality,
                    "dead": dead,
                    "truncated": not g.finished,
                }
            )
            tr.reward += result.reward
            if result.done:
                tr.success = result.success
                ended = result.success or result.info.get("terminated") or result.info.get("submitted")
                tr.exhausted = not ended and tr.start_turn + tr.n_turns >= tr.budget
            else:
                turn_end[i] = len(tr.token_ids)
                obs = chat.observation_ids(result.observation)
                tr.token_ids += obs
                tr.gen_mask += [0] * len(obs)
                tr.logprobs += [0.0] * len(obs)
        live = [i for i in live if not envs[i].done]
        turn += 1


def _turn_sampling(sampling: Sampling, seed: int, turn: int) -> Sampling:
    base = sampling.seed if sampling.seed is not None else seed
    return sampling.replace(seed=base * 1009 + turn)


def summarize(trajs: list[Trajectory]) -> dict[str, Any]:
    """Success, mean turns, invalid-action rate and tokens of a batch of trajectories."""
    n = max(len(trajs), 1)
    actions = [t for tr in trajs for t in tr.turns]
    return {
        "n": len(trajs),
        "success": sum(tr.success for tr in trajs) / n,
        "mean_turns": sum(tr.n_turns for tr in trajs) / n,
        "invalid_rate": sum(t["invalid"] for t in actions) / max(len(actions), 1),
        "generated_tokens": sum(sum(tr.gen_mask) for tr in trajs),
    }
