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
`CallLimits` (2 s of the worker's CPU time, 100 000 characters of result, 1 GB of memory by default: `power(base=7,
exponent=10**7)` would run for seconds): one that hits a limit is stopped, leaves the state as it was, and its
result says which limit (a wall-clock stall guard 30 times the time limit only stops a worker on a starved machine,
and says so). In miss_func entries the held-out functions become callable, and their docs are shown with BFCL's "I
have updated some more functions" message, when their turn comes. (BFCL's executor would run any public method,
shown or not; one entry, multi_turn_miss_func_49, has a ground-truth call of `tail` two turns before it is shown,
so its ground truth does not replay here.)

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

from helpers.envs.bfcl.data import (
    CATEGORIES,
    DATA_DIR,
    N_ENTRIES,
    entry_index,
    function_docs,
    load_entries,
    split_indices,
    split_of,
    task_payload,
)
from helpers.envs.bfcl.engine import Backends, CallLimits, backend_class, result_text, run_call
from helpers.envs.bfcl.env import (
    DOC_STYLES,
    END_OF_TURN_REPLY,
    BFCLEnv,
    corrupt_call,
    demo,
    ground_truth_replies,
    render_docs,
    system_prompt,
)
from helpers.envs.bfcl.parser import Call, parse_calls, parse_ground_truth

__all__ = [
    "CATEGORIES",
    "DATA_DIR",
    "DOC_STYLES",
    "END_OF_TURN_REPLY",
    "N_ENTRIES",
    "BFCLEnv",
    "Backends",
    "Call",
    "CallLimits",
    "backend_class",
    "corrupt_call",
    "demo",
    "entry_index",
    "function_docs",
    "ground_truth_replies",
    "load_entries",
    "parse_calls",
    "parse_ground_truth",
    "render_docs",
    "result_text",
    "run_call",
    "split_indices",
    "split_of",
    "system_prompt",
    "task_payload",
]
