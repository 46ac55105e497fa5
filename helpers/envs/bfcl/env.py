"""The BFCL environment: user requests one at a time, the model's calls run on this episode's backends (in the
call worker, under `CallLimits`), each finished user turn checked by BFCL's own checkers; and the scripted player
that replays the ground truth (notebook 00's demo, the corruption tests)."""

from __future__ import annotations

import ast
import copy
import hashlib
import json
from typing import Any

from bfcl_eval.constants.default_prompts import (
    DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
    OUTPUT_FORMAT_MAPPING,
    PARAM_TYPE_MAPPING,
    PROMPT_STYLE_TEMPLATES,
    PROMPT_TEMPLATE_MAPPING,
)
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

from helpers.budget import statement
from helpers.envs.base import StepResult, Task, check_split, play, seeded_subset
from helpers.envs.bfcl.data import function_docs, load_entries, split_of, task_payload
from helpers.envs.bfcl.engine import Backends, CallLimits
from helpers.envs.bfcl.parser import parse_calls, parse_ground_truth

END_OF_TURN_REPLY = "I have no more function calls for this request."


DOC_STYLES = ("full", "compact")


def render_docs(docs: list[dict], style: str = "full") -> str:
    """Function docs as the prompt shows them. "full" is BFCL's (the JSON schemas, indented); "compact" keeps every
    name, parameter, type and required list but drops the prose (every "description") and the "response" schemas,
    unindented: the longest system prompt of the test split (multi_turn_base) goes from 48,999 to 7,440 characters.
    The smoke profile uses it, where the tiny model's tokenizer makes nearly a token of every character and
    attention over the full docs dominates the series' time; the calls a model can make are the same."""
    if style == "full":
        return json.dumps(docs, indent=4)
    if style == "compact":
        compact = [_without_prose({k: v for k, v in d.items() if k != "response"}) for d in docs]
        return json.dumps(compact, separators=(",", ":"))
    raise ValueError(f"bfcl: docs must be one of {DOC_STYLES}, got {style!r}")


def _without_prose(obj: Any) -> Any:
    """A schema without its "description" strings (a parameter named "description" is a dict and stays)."""
    if isinstance(obj, dict):
        return {
            k: _without_prose(v) for k, v in obj.items() if not (k == "description" and isinstance(v, str))
        }
    if isinstance(obj, list):
        return [_without_prose(v) for v in obj]
    return obj


def system_prompt(docs: list[dict], doc_style: str = "full") -> str:
    """BFCL's default system prompt (Python call format, no tool-call tag, JSON docs, plaintext, classic style),
    composed from bfcl-eval's own templates; the docs rendered in `doc_style` (`render_docs`)."""
    style, functions = PROMPT_STYLE_TEMPLATES["classic"], render_docs(docs, doc_style)
    return PROMPT_TEMPLATE_MAPPING["plaintext"].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=style["tool_call_no_tag"].format(
            output_format=OUTPUT_FORMAT_MAPPING["python"], param_types=PARAM_TYPE_MAPPING["python"]
        ),
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json", functions=functions),
    )


# ---------------------------------------------------------------------------------------- the environment


class BFCLEnv:
    """BFCL multi-turn with a turn budget; implements `helpers.envs.base.Env`."""

    name = "bfcl"
    step_oracle = False
    oracle_note = (
        "BFCL scores a whole user turn against its ground-truth calls (state and response checks); there is no "
        "exact score of a single reply at a state, as the paper notes"
    )

    def __init__(
        self,
        call_time_limit_s: float = 2.0,
        call_output_chars: int = 100_000,
        call_memory_mb: int = 1024,
        calls_per_reply: int = 64,
        reply_time_limit_s: float | None = None,
        observation_chars: int = 100_000,
    ) -> None:
        """The call limits apply to every call the model makes, and the reply limits to each reply (see
        `CallLimits`): a step returns within `reply_time_limit_s` of the worker's CPU time (4 x the call limit by
        default) plus a worker restart per stopped call, with an observation of at most `observation_chars` of
        results."""
        self.call_limits = CallLimits(
            call_time_limit_s,
            call_output_chars,
            call_memory_mb,
            calls_per_reply=calls_per_reply,
            reply_time_s=reply_time_limit_s,
            observation_chars=observation_chars,
        )
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
        category: str = "multi_turn_base",
        t_max: int | None = None,
        turns_per_request: int = 4,
        docs: str = "full",
    ) -> list[Task]:
        """Tasks of one split of one category; with `n`, a seeded subset (kept in index order).

        T_max is `t_max` if given, else `turns_per_request` x the entry's number of user turns (replaying the
        ground truth needs at most 2 per user turn: one reply with the calls, one without). `docs` is how the
        prompt shows the function docs (`render_docs`); only a style other than "full" enters the payload, so the
        tasks of every profile that does not set it are unchanged.
        """
        check_split(split, "bfcl")
        if source != "bundled":
            raise ValueError("bfcl: the data ships in the bfcl-eval wheel; source must be 'bundled'")
        if t_max is not None and t_max < 1:
            raise ValueError(f"bfcl: t_max must be at least 1, got {t_max}")
        if turns_per_request < 1:
            raise ValueError(f"bfcl: turns_per_request must be at least 1, got {turns_per_request}")
        if docs not in DOC_STYLES:
            raise ValueError(f"bfcl: docs must be one of {DOC_STYLES}, got {docs!r}")
        style = {} if docs == "full" else {"docs": docs}
        entries = seeded_subset([e for e in load_entries(category) if split_of(e["id"]) == split], n, seed)
        return [
            Task(
                task_id=e["id"],
                env=cls.name,
                payload={**task_payload(e, category), **style},
                t_max=t_max if t_max is not None else turns_per_request * len(e["question"]),
            )
            for e in entries
        ]

    @staticmethod
    def upper_bound(task: Task, budget: int) -> float | None:
        """Unknown for BFCL: None."""
        return None

    # -- episode ------------------------------------------------------------------------------------------
    def reset(self, task: Task, budget: int, seed: int = 0) -> list[dict]:
        """Fresh backends loaded with the entry's initial_config; the first user request. `seed` is unused:
        the backends seed their own randomness from the config."""
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        p = task.payload
        self.task = task
        self.turns: list[list[dict]] = p["question"]
        self.ground_truth: list[list[str]] = p["ground_truth"]
        self.held_out: dict[int, list[str]] = {
            int(t): names for t, names in p.get("missed_function", {}).items()
        }
        self.docs = {d["name"]: d for c in p["involved_classes"] for d in function_docs(c)}
        held = {name for names in self.held_out.values() for name in names}
        self.available = {name for name in self.docs if name not in held}
        args = (p["involved_classes"], p["initial_config"], bool(p["long_context"]))
        self.backends = Backends(*args, limits=self.call_limits)
        self.reference = Backends(*args)  # the ground truth's instances, run turn by turn for the checks
        self.total = self.remaining = int(budget)
        self.t = 0
        self.turn = 0
        self.turn_call_steps = 0  # replies with executed calls in the current user turn
        # all the model's results so far, as digests (`result_digest`): BFCL's response check compares them only for
        # equality, and whole results kept 1.45 MB per reply for the whole episode
        self.model_results: list[str] = []
        self.failure: dict | None = None  # the first failed check
        self.done = False
        self.doc_style = p.get("docs", "full")
        system = system_prompt(
            [self.docs[name] for name in self.docs if name in self.available], self.doc_style
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self._with_budget(self._request(0))},
        ]

    def _request(self, turn: int) -> str:
        """The user message(s) of a turn; a held-out turn shows the new docs with BFCL's message."""
        if turn in self.held_out:
            new = [self.docs[name] for name in self.held_out[turn]]
            return f"{render_docs(new, self.doc_style)}\n{DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}"
        return "\n\n".join(m["content"] for m in self.turns[turn])

    def _with_budget(self, text: str) -> str:
        return f"{text}\n{statement(self.total, self.remaining)}"

    def step(self, action_text: str) -> StepResult:
        """One model reply: run its calls, or end the user turn; see the module doc."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.t += 1
        self.remaining -= 1
        calls, why = parse_calls(action_text, self.available)
        info: dict[str, Any] = {
            "invalid": calls is None,
            "t": self.t,
            "remaining": self.remaining,
            "turn": self.turn,
            "turn_ended": False,
        }
        if calls is None:
            note = (
                f"Invalid reply: {why}. Nothing was executed. Reply with a list of calls such as "
                "[func_name1(param=value), func_name2(param=value)], or without calls to end your turn."
            )
            return self._finish_step(note, info)
        if len(calls) > self.call_limits.calls_per_reply:
            info["invalid"] = True
            note = (
                f"Invalid reply: {len(calls)} calls, over the limit of {self.call_limits.calls_per_reply} calls in "
                "one reply. Nothing was executed."
            )
            return self._finish_step(note, info)
        if calls:
            results = self.backends.execute_reply(calls)
            self.model_results.extend(result_digest(r) for r in results)
            self.turn_call_steps += 1
            info["calls"] = [c.text for c in calls]
            info["results"] = results
            return self._finish_step(self._shown(calls, results), info)
        # No calls: the user turn ends and is checked.
        self._check_turn()
        info["turn_ended"] = True
        self.turn += 1
        self.turn_call_steps = 0
        if self.turn < len(self.turns):
            info["turn"] = self.turn
            self.available |= set(self.held_out.get(self.turn, []))
            return self._finish_step(self._request(self.turn), info)
        self.done = True
        success = self.failure is None
        info["check"] = self.failure or {"valid": True}
        return StepResult(self._with_budget("All requests are done."), float(success), True, success, info)

    def _shown(self, calls: list, results: list[str]) -> str:
        """The calls and their results as the observation shows them: at most `observation_chars` characters of
        call text and results together (each call's text cut to 1000 characters, and the results cut, in order, to
        what is left; the checks see every result whole)."""
        left = self.call_limits.observation_chars
        lines = []
        for c, r in zip(calls, results, strict=True):
            text = c.text if len(c.text) <= 1000 else c.text[:997] + "..."
            if len(r) > left:
                r = (
                    r[: max(left, 0)]
                    + f"...(cut: {len(r)} characters; the observation shows at most {self.call_limits.observation_chars})"
                )
            left -= len(r)
            lines.append(f"{text} -> {r}")
        return "\n".join(lines)

    def _finish_step(self, note: str, info: dict) -> StepResult:
        """A step that did not finish the last user turn: the episode ends only when the budget is spent."""
        if self.remaining == 0:
            self.done = True
            info["check"] = {
                "valid": False,
                "error_type": "multi_turn:force_terminated",
                "error_message": f"out of turns in user turn {self.turn} of {len(self.turns)}",
            }
            note = f"{note}\nOut of turns."
        return StepResult(self._with_budget(note), 0.0, self.done, False, info)

    def _check_turn(self) -> None:
        """BFCL's per-turn checks on the turn that just ended (only the first failure is kept)."""
        gt_calls = parse_ground_truth(self.ground_truth[self.turn], frozenset(self.docs))
        if self.failure is not None or not gt_calls:
            return
        gt_results = [self.reference.execute(c) for c in gt_calls]
        if self.turn_call_steps == 0:
            self.failure = {
                "valid": False,
                "error_type": "multi_turn:empty_turn_model_response",
                "error_message": f"Model response list is empty for turn {self.turn}",
            }
            return
        check = state_checker(self.backends.instances, self.reference.instances)
        if check["valid"]:
            check = response_checker(self.model_results, [result_digest(r) for r in gt_results], self.turn)
        if not check["valid"]:
            self.failure = {k: check[k] for k in ("valid", "error_type", "error_message")}

    def step_quality(self, action_text: str) -> float | None:
        """No exact step oracle exists for BFCL (as the paper notes): None."""
        return None


# -------------------------------------------------------------------------------------- scripted player


def result_digest(result: str) -> str:
    """A call result as BFCL's response check needs it: equal results, equal digests (SHA-256 of its UTF-8)."""
    return hashlib.sha256(result.encode("utf-8", "surrogatepass")).hexdigest()


def ground_truth_replies(task: Task, ground_truth: list[list[str]] | None = None) -> list[str]:
    """A scripted player's replies that replay the ground truth (or the given per-turn call lists): per user
    turn, one reply with that turn's calls (if any), then one without calls."""
    replies = []
    for calls in task.payload["ground_truth"] if ground_truth is None else ground_truth:
        if calls:
            replies.append("[" + ", ".join(calls) + "]")
        replies.append(END_OF_TURN_REPLY)
    return replies


def corrupt_call(call: str) -> str:
    """The call with its first argument changed (a string gets a suffix, a number +1, a boolean flipped, a list
    loses its first element or gains one, a dict gains a key; a call without arguments gets an unexpected one):
    a wrong call for the corruption tests and the demo."""
    node = ast.parse(call, mode="eval").body
    if not node.args and not node.keywords:
        node.keywords.append(ast.keyword("extra_argument", ast.Constant(1)))
        return ast.unparse(node)
    old = ast.literal_eval(node.args[0] if node.args else node.keywords[0].value)
    if isinstance(old, bool):
        new = not old
    elif isinstance(old, int | float):
        new = old + 1
    elif isinstance(old, str):
        new = old + "_corrupted"
    elif isinstance(old, list | tuple):
        new = type(old)(old[1:] if old else ["corrupted"])
    elif isinstance(old, dict):
        new = {**old, "corrupted": True}
    else:
        new = "corrupted"
    new_node = ast.parse(repr(new), mode="eval").body
    if node.args:
        node.args[0] = new_node
    else:
        node.keywords[0].value = new_node
    return ast.unparse(node)


def demo(category: str = "multi_turn_base", index: int = 0) -> dict:
    """Notebook 00: a scripted player replays the ground truth of one test entry (and a copy with one corrupted
    call, which must fail); returns the transcript and a few numbers."""
    tasks = BFCLEnv.load_tasks("test", category=category)
    task = tasks[index]
    env = BFCLEnv()

    def scripted(replies: list[str]):
        it = iter(replies)
        return lambda _env: next(it, END_OF_TURN_REPLY)

    transcript, last = play(env, task, task.t_max, scripted(ground_truth_replies(task)))
    wrong = copy.deepcopy(task.payload["ground_truth"])
    k = next(k for k, calls in enumerate(wrong) if calls)  # the first turn with calls
    wrong[k][0] = corrupt_call(wrong[k][0])
    _, bad_last = play(BFCLEnv(), task, task.t_max, scripted(ground_truth_replies(task, wrong)))
    return {
        "task_id": task.task_id,
        "classes": task.payload["involved_classes"],
        "user_turns": len(task.payload["question"]),
        "budget": task.t_max,
        "turns_used": env.t,
        "calls": sum(len(c) for c in task.payload["ground_truth"]),
        "system_prompt_chars": len(transcript[0]["content"]),
        "success": last.success,
        "reward": last.reward,
        "corrupted_call": f"turn {k}: {task.payload['ground_truth'][k][0]} -> {wrong[k][0]}",
        "corrupted_success": bad_last.success,
        "corrupted_check": bad_last.info.get("check"),
        "transcript": transcript,
    }
