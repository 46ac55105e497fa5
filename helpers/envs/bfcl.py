"""BFCL multi-turn function calling on bfcl-eval's own executable backends, scored as BFCL's checker scores.

An entry of the Berkeley Function Calling Leaderboard's multi-turn categories is a short conversation: a few
user requests (turns) against stateful Python backends (a file system, a trading bot, a travel agency, ...)
loaded from the entry's `initial_config`. The data, the function docs and the backend classes all come from
the pinned `bfcl-eval` wheel (installed with `--no-deps`: the backends need only `mpmath`).

Protocol. The system prompt is BFCL's default prompt (Python call format, function docs as JSON), composed
from bfcl-eval's own prompt constants. The user turns are shown one at a time. Each model reply is one
interaction turn against the budget and is one of:
- a list of calls, `[cd(folder='document'), mkdir(dir_name='temp')]` (a single bare call works too, and a
  ```python fence is stripped): every call is checked first, then they run in order on this episode's backend
  instances and their results come back as the next observation; the user turn goes on;
- a reply without calls (plain text, or `[]`): it ends the user turn; the next user request is shown, or, after
  the last one, the episode ends and is scored;
- a malformed call list (it starts like one but does not parse), a call of an unknown or not-yet-available
  function, of a private or dunder name, a dotted name, `*args`/`**kwargs`, or an argument that is not a Python
  literal: nothing in the reply runs; the observation says what was wrong and `info["invalid"]` is set (the
  user turn goes on; BFCL's inference loop would end it).
Calls are parsed with `ast` and their arguments read with `ast.literal_eval`: model text is never evaluated, and
any failure while parsing (a literal too long to print, nesting too deep, ...) is an invalid action, never an
exception out of `step()`. Positional arguments are bound by the method's own signature, as in the ground truth
(`sort('a.txt')`); BFCL's prompting decoder would silently drop them. A call that raises gives `Error during
execution: ...`, the result string BFCL's executor produces. The model's calls run in a worker process under
`CallLimits` (2 s, 100 000 characters of result, 1 GB of memory by default: `power(base=7, exponent=10**7)` would
run for seconds): one that hits a limit is stopped, leaves the state as it was, and its result says which limit. In miss_func entries the held-out functions become callable, and their
docs are shown with BFCL's "I have updated some more functions" message, when their turn comes. (BFCL's
executor would run any public method, shown or not; one entry, multi_turn_miss_func_49, has a ground-truth call
of `tail` two turns before it is shown, so its ground truth does not replay here.)

Each episode gets a fresh set of backend instances loaded with a deep copy of `initial_config`, then deep
copied as a whole: some backends alias module-level data into instance state (e.g. the long-context credit
cards of `TravelAPI`), which the copy severs. bfcl-eval's `execute_multi_turn_func_call` is not used: it
caches instances in module globals and `eval`s call strings.

Scoring (BFCL's `multi_turn_checker`): after every user turn whose ground truth is non-empty, (1) the model must
have executed at least one call in that turn, (2) the model's instances must equal fresh ground-truth instances,
run through that turn's ground-truth calls, on every public attribute (`state_checker`), and (3) the ground
truth's results of that turn must be contained, as a multiset, in all the model's results so far
(`response_checker`). Both checkers are bfcl-eval's own pure functions. Success = every turn passes and every
user turn was completed within the budget; reward 1 on success, else 0. There is no step oracle
(`step_quality` is None) and no known structural upper bound.

Tasks: multi_turn_base by default; `category` selects multi_turn_miss_func, multi_turn_miss_param or
multi_turn_long_context (200 entries each, ids `<category>_<index>`). The split is by entry index, the same in
every category (the categories are variants of the same 200 scenarios): the 100 indices with the smallest
sha256 of `bfcl-split:<index>` are the test split, the other 100 the training split.
"""

from __future__ import annotations

import ast
import copy
import decimal
import functools
import hashlib
import importlib
import json
import os
import pickle
import re
import selectors
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bfcl_eval
import mpmath
import numpy as np
from bfcl_eval.constants.default_prompts import (
    DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
    OUTPUT_FORMAT_MAPPING,
    PARAM_TYPE_MAPPING,
    PROMPT_STYLE_TEMPLATES,
    PROMPT_TEMPLATE_MAPPING,
)
from bfcl_eval.constants.executable_backend_config import (
    CLASS_FILE_PATH_MAPPING,
    MULTI_TURN_FUNC_DOC_FILE_MAPPING,
    STATELESS_CLASSES,
)
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

from helpers.budget import statement
from helpers.envs.base import StepResult, Task, play

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
DATA_DIR = Path(bfcl_eval.__file__).parent / "data"
N_ENTRIES = 200  # per category; index i is the same scenario in every category
END_OF_TURN_REPLY = "I have no more function calls for this request."
_CALL_START = re.compile(r"\[|[A-Za-z_][\w.]*\(")  # a reply that starts like this is meant as a call list
_FENCE = re.compile(r"^```(?:python|py)?\s*\n?(.*?)\n?\s*```$", re.DOTALL)

# ------------------------------------------------------------------------------------------------ the data


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@functools.lru_cache(maxsize=8)
def load_entries(category: str = "multi_turn_base") -> tuple[dict, ...]:
    """The entries of one category from the bfcl-eval wheel, each with its `ground_truth` (a list of call
    strings per turn). Cached: treat as read-only."""
    if category not in CATEGORIES:
        raise ValueError(f"bfcl: unknown category {category!r}; choose one of {list(CATEGORIES)}")
    entries = _read_jsonl(DATA_DIR / f"BFCL_v4_{category}.json")
    answers = {
        a["id"]: a["ground_truth"]
        for a in _read_jsonl(DATA_DIR / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    for e in entries:
        e["ground_truth"] = answers[e["id"]]
        if len(e["ground_truth"]) != len(e["question"]):
            raise ValueError(
                f"bfcl: {e['id']} has {len(e['question'])} turns but {len(e['ground_truth'])} answers"
            )
    return tuple(entries)


@functools.lru_cache(maxsize=16)
def function_docs(class_name: str) -> tuple[dict, ...]:
    """The function docs (BFCL's JSON schema dicts) of one backend class, in the wheel's order."""
    if class_name not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
        raise ValueError(f"bfcl: unknown backend class {class_name!r}")
    return tuple(_read_jsonl(DATA_DIR / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def entry_index(entry_id: str) -> int:
    """The scenario index of an entry id, e.g. 17 for 'multi_turn_miss_func_17'."""
    return int(entry_id.rsplit("_", 1)[1])


@functools.lru_cache(maxsize=1)
def split_indices() -> dict[str, frozenset[int]]:
    """The scenario indices of each split: the half with the smallest sha256 of 'bfcl-split:<index>' is 'test'."""
    ranked = sorted(range(N_ENTRIES), key=lambda i: hashlib.sha256(f"bfcl-split:{i}".encode()).hexdigest())
    return {"test": frozenset(ranked[: N_ENTRIES // 2]), "train": frozenset(ranked[N_ENTRIES // 2 :])}


def split_of(entry_id: str) -> str:
    """'test' or 'train' for an entry id (the same for all categories of one scenario index)."""
    return "test" if entry_index(entry_id) in split_indices()["test"] else "train"


def system_prompt(docs: list[dict]) -> str:
    """BFCL's default system prompt (Python call format, no tool-call tag, JSON docs, plaintext, classic style),
    composed from bfcl-eval's own templates."""
    style = PROMPT_STYLE_TEMPLATES["classic"]
    return PROMPT_TEMPLATE_MAPPING["plaintext"].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=style["tool_call_no_tag"].format(
            output_format=OUTPUT_FORMAT_MAPPING["python"], param_types=PARAM_TYPE_MAPPING["python"]
        ),
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json", functions=json.dumps(docs, indent=4)),
    )


# ------------------------------------------------------------------------------------------- the parser


@dataclass(frozen=True)
class Call:
    """One parsed call: a bare function name and literal arguments."""

    name: str
    args: tuple
    kwargs: dict
    text: str  # the call as written (normalised by ast.unparse), for observations


def parse_calls(text: str, available: set[str] | frozenset[str]) -> tuple[list[Call] | None, str]:
    """Parse a reply into calls, or (None, what was wrong).

    `[]` or a reply that does not start like a call list (plain text to the user) means no calls: ([], "").
    A reply that starts with `[` or `name(` must parse as a list of calls of names in `available` whose
    arguments are literals; otherwise nothing in it may run.
    """
    s = text.strip()
    fenced = _FENCE.match(s)
    if fenced:
        s = fenced.group(1).strip()
    s = s.strip("`").strip()
    if not _CALL_START.match(s):
        return [], ""
    # BFCL's decoder completes missing outer brackets the same way.
    source = ("" if s.startswith("[") else "[") + s + ("" if s.endswith("]") else "]")
    try:
        tree = ast.parse(source, mode="eval").body
        if not isinstance(tree, ast.List):
            return None, "the reply is not a list of calls"
        calls = []
        for k, node in enumerate(tree.elts):
            call, why = _parse_call(node, available)
            if call is None:
                return None, f"call {k + 1}: {why}"
            calls.append(call)
    except (
        Exception
    ) as e:  # any parse failure (SyntaxError, ValueError, RecursionError, ...) is an invalid action
        return (
            None,
            f"could not parse the reply as a list of calls ({type(e).__name__}: {_shorten(str(e), 200)})",
        )
    except MemoryError:
        return None, "could not parse the reply as a list of calls (it is too large)"
    return calls, ""


def _parse_call(node: ast.expr, available: set[str] | frozenset[str]) -> tuple[Call | None, str]:
    """One element of the call list: a bare-name call with literal arguments, or (None, why)."""
    shown = _unparse(node)
    if not isinstance(node, ast.Call):
        return None, f"{shown!r} is not a function call"
    if not isinstance(node.func, ast.Name):
        return (
            None,
            f"call functions by their bare name, e.g. cd(folder='x'); got {_unparse(node.func)!r}",
        )
    name = node.func.id
    if name.startswith("_"):
        return None, f"private or dunder name {name!r} cannot be called"
    if name not in available:
        return None, f"unknown function {name!r}; available: {', '.join(sorted(available))}"
    args, kwargs = [], {}
    for i, a in enumerate(node.args):
        if isinstance(a, ast.Starred):
            return None, f"{name}: *args are not allowed"
        value, ok = _literal(a)
        if not ok:
            return None, f"{name}: positional argument {i + 1} is not a literal: {_unparse(a)!r}"
        args.append(value)
    for kw in node.keywords:
        if kw.arg is None:
            return None, f"{name}: **kwargs are not allowed"
        value, ok = _literal(kw.value)
        if not ok:
            return None, f"{name}: argument {kw.arg!r} is not a literal: {_unparse(kw.value)!r}"
        kwargs[kw.arg] = value
    return Call(name, tuple(args), kwargs, _unparse(node, None)), ""


def _literal(node: ast.expr) -> tuple[Any, bool]:
    try:
        return ast.literal_eval(node), True
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None, False


def _shorten(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _unparse(node: ast.AST, n: int | None = 80) -> str:
    """Source text of a node for an observation (shortened to `n`); never raises (ast.unparse does, e.g. on an
    integer literal too long to print)."""
    try:
        text = ast.unparse(node)
    except Exception:
        name = getattr(getattr(node, "func", None), "id", None)
        text = (
            f"{name}(<arguments too long to print>)" if name else f"<{type(node).__name__} too long to print>"
        )
    return text if n is None else _shorten(text, n)


# ----------------------------------------------------------------------------------------- the backends


def backend_class(class_name: str) -> type:
    """A backend class of bfcl-eval by name, e.g. 'GorillaFileSystem'."""
    if class_name not in CLASS_FILE_PATH_MAPPING:
        raise ValueError(f"bfcl: unknown backend class {class_name!r}")
    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)


def result_text(result: Any) -> str:
    """A call's result as BFCL's executor stringifies it: str as is, dict as JSON (str() if not serialisable),
    anything else with str()."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # BFCL's executor catches everything here too
            return str(result)
    return str(result)


def run_call(instance: Any, name: str, args: tuple, kwargs: dict) -> str:
    """One backend method call as BFCL's executor runs it; never raises: an exception (also one while turning the
    result into text, e.g. an integer too long to print) becomes BFCL's 'Error during execution: ...' result."""
    # MathAPI sets the process-wide decimal and mpmath precision before each use and never restores it:
    # restore both, so nothing outside the call changes (results are the same either way).
    with decimal.localcontext(), mpmath.workprec(mpmath.mp.prec):
        try:
            return result_text(getattr(instance, name)(*args, **kwargs))
        except Exception as e:
            try:
                return f"Error during execution: {e}"
            except Exception:
                return f"Error during execution: {type(e).__name__}"


@dataclass(frozen=True)
class CallLimits:
    """Limits on one backend call with the model's arguments: wall-clock seconds, characters of its result,
    megabytes of memory it may add."""

    time_s: float = 2.0
    output_chars: int = 100_000
    memory_mb: int = 1024

    def __post_init__(self) -> None:
        for key in ("time_s", "output_chars", "memory_mb"):
            if getattr(self, key) <= 0:
                raise ValueError(f"bfcl: call limit {key} must be positive, got {getattr(self, key)!r}")


# The worker: reads (pickled instance, method, arguments, output cap), runs the call with `run_call`, answers with
# the result text and the instance's new state. The backends are bfcl-eval's trusted code; the arguments are the
# model's literals, which can make a call run for minutes (`power(base=7, exponent=10**7)`) or return megabytes.
_WORKER = r"""
import os, pickle, resource, struct, sys
sys.path.insert(0, sys.argv[2])  # the kit's root, also where it is not pip-installed
out = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)  # a backend that prints cannot garble the channel
from helpers.envs.bfcl import run_call

def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return bytes(buf)

def write(obj):
    data = pickle.dumps(obj)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(out, view):]

with open("/proc/self/statm") as f:
    size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
extra = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
write("ready")
while True:
    state, name, args, kwargs, cap = pickle.loads(read_exact(struct.unpack("<Q", read_exact(8))[0]))
    try:
        instance = pickle.loads(state)
        text = run_call(instance, name, args, kwargs)
        reply = ("over", len(text)) if len(text) > cap else ("ok", text, pickle.dumps(instance))
    except MemoryError:
        reply = ("memory",)
    except BaseException as e:
        reply = ("failed", f"{type(e).__name__}: {e}"[:300])
    write(reply)
"""


class _CallWorker:
    """One process per kit process that runs model-argument calls under `CallLimits`; killed and restarted when a
    call overruns (the parent's instances never saw the call, so nothing changed)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.memory_mb: int | None = None
        self.lock = threading.Lock()

    def _start(self, memory_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _WORKER, str(memory_mb), str(Path(__file__).resolve().parents[2])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.memory_mb = memory_mb
        self.buf = bytearray()
        if self._read(time.monotonic() + 120) != "ready":
            self._stop()
            raise RuntimeError(
                "bfcl: the call worker did not start (python -I -c ... import helpers.envs.bfcl)"
            )

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None

    def _read(self, deadline: float) -> Any:
        """One framed reply, or None on timeout or a dead worker."""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if len(self.buf) >= 8:
                    n = struct.unpack("<Q", self.buf[:8])[0]
                    if len(self.buf) >= 8 + n:
                        obj = pickle.loads(bytes(self.buf[8 : 8 + n]))
                        del self.buf[: 8 + n]
                        return obj
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    if time.monotonic() >= deadline:
                        return None
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk

    def run(self, instance: Any, call: Call, limits: CallLimits) -> tuple[str, Any | None]:
        """(result text, the instance after the call) or (an error result, None) when a limit was hit."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None or self.memory_mb != limits.memory_mb:
                self._stop()
                self._start(limits.memory_mb)
            job = pickle.dumps(
                (pickle.dumps(instance), call.name, call.args, call.kwargs, limits.output_chars)
            )
            try:
                self.proc.stdin.write(struct.pack("<Q", len(job)) + job)
                self.proc.stdin.flush()
            except OSError:
                reply = None
            else:
                reply = self._read(time.monotonic() + limits.time_s)
            if reply is None or reply[0] != "ok":
                if reply is None:
                    self._stop()
                return _limit_text(reply, limits), None
            return reply[1], pickle.loads(reply[2])


def _limit_text(reply: tuple | None, limits: CallLimits) -> str:
    """The result a call gets when it hit a limit (its effects are discarded)."""
    if reply is None:
        why = f"the call did not finish within its time limit of {limits.time_s:g} s and was stopped"
    elif reply[0] == "over":
        why = f"the result is {reply[1]} characters long, over the limit of {limits.output_chars}"
    elif reply[0] == "memory":
        why = f"the call ran out of memory (limit {limits.memory_mb} MB)"
    else:
        why = f"the call failed in the backend worker ({reply[1]})"
    return f"Error during execution: {why}; nothing was changed."


_CALL_WORKER = _CallWorker()


class Backends:
    """Fresh instances of an entry's backend classes, loaded with its initial_config, and call dispatch. With
    `limits`, every call runs in the call worker under them (the model's backends); without, here (the ground
    truth's, trusted)."""

    def __init__(
        self,
        involved_classes: list[str],
        initial_config: dict,
        long_context: bool,
        limits: CallLimits | None = None,
    ) -> None:
        self.instances: dict[str, Any] = {}
        self.limits = limits
        for class_name in involved_classes:
            instance = backend_class(class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(
                    copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context
                )
            self.instances[class_name] = instance
        # One deep copy of all instances together severs any alias of module-level data (and keeps
        # references between instances' own objects, such as the file system's current directory).
        self.instances = copy.deepcopy(self.instances)
        # Method name -> class; a later class wins, as in BFCL's executor (no name is shared in practice).
        self.owner = {d["name"]: c for c in involved_classes for d in function_docs(c)}

    def execute(self, call: Call) -> str:
        """Run one parsed call; an exception becomes BFCL's 'Error during execution: ...' result, and so does a
        call that hits a limit (then the instance is left as it was)."""
        owner = self.owner[call.name]
        if self.limits is None:
            return run_call(self.instances[owner], call.name, call.args, call.kwargs)
        text, after = _CALL_WORKER.run(self.instances[owner], call, self.limits)
        if after is not None:
            self.instances[owner] = after
        return text


def parse_ground_truth(call_strings: list[str], available: set[str] | frozenset[str]) -> list[Call]:
    """Ground-truth call strings parsed by the same parser as model replies (they are literal calls)."""
    if not call_strings:
        return []
    calls, why = parse_calls("[" + ", ".join(call_strings) + "]", available)
    if calls is None:
        raise ValueError(f"bfcl: unparsable ground truth {call_strings}: {why}")
    return calls


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
        self, call_time_limit_s: float = 2.0, call_output_chars: int = 100_000, call_memory_mb: int = 1024
    ) -> None:
        """The call limits apply to every call the model makes (see `CallLimits`)."""
        self.call_limits = CallLimits(call_time_limit_s, call_output_chars, call_memory_mb)
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
    ) -> list[Task]:
        """Tasks of one split of one category; with `n`, a seeded subset (kept in index order).

        T_max is `t_max` if given, else `turns_per_request` x the entry's number of user turns (replaying the
        ground truth needs at most 2 per user turn: one reply with the calls, one without).
        """
        if source != "bundled":
            raise ValueError("bfcl: the data ships in the bfcl-eval wheel; source must be 'bundled'")
        if split not in ("train", "test"):
            raise ValueError(f"bfcl: split must be 'train' or 'test', got {split!r}")
        if t_max is not None and t_max < 1:
            raise ValueError(f"bfcl: t_max must be at least 1, got {t_max}")
        if turns_per_request < 1:
            raise ValueError(f"bfcl: turns_per_request must be at least 1, got {turns_per_request}")
        entries = [e for e in load_entries(category) if split_of(e["id"]) == split]
        if n is not None and n < len(entries):
            pick = np.sort(np.random.default_rng(seed).choice(len(entries), size=n, replace=False))
            entries = [entries[i] for i in pick]
        return [
            Task(
                task_id=e["id"],
                env=cls.name,
                payload=task_payload(e, category),
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
        self.model_results: list[str] = []  # all the model's results so far (BFCL's response check)
        self.failure: dict | None = None  # the first failed check
        self.done = False
        system = system_prompt([self.docs[name] for name in self.docs if name in self.available])
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self._with_budget(self._request(0))},
        ]

    def _request(self, turn: int) -> str:
        """The user message(s) of a turn; a held-out turn shows the new docs with BFCL's message."""
        if turn in self.held_out:
            new = [self.docs[name] for name in self.held_out[turn]]
            return f"{json.dumps(new, indent=4)}\n{DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}"
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
        if calls:
            results = [self.backends.execute(c) for c in calls]
            self.model_results.extend(results)
            self.turn_call_steps += 1
            info["calls"] = [c.text for c in calls]
            info["results"] = results
            note = "\n".join(f"{c.text} -> {r}" for c, r in zip(calls, results, strict=True))
            return self._finish_step(note, info)
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
            check = response_checker(self.model_results, gt_results, self.turn)
        if not check["valid"]:
            self.failure = {k: check[k] for k in ("valid", "error_type", "error_message")}

    def step_quality(self, action_text: str) -> float | None:
        """No exact step oracle exists for BFCL (as the paper notes): None."""
        return None


def task_payload(entry: dict, category: str) -> dict:
    """Everything an episode needs, copied out of the cached entry (function docs come from the wheel)."""
    return copy.deepcopy(
        {
            "id": entry["id"],
            "category": category,
            "question": entry["question"],
            "initial_config": entry["initial_config"],
            "involved_classes": entry["involved_classes"],
            "missed_function": entry.get("missed_function", {}),
            "ground_truth": entry["ground_truth"],
            "long_context": "long_context" in category,
        }
    )


# -------------------------------------------------------------------------------------- scripted player


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
