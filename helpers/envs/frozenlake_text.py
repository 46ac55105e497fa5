"""FrozenLake as text: the map the agent sees and the move it answers (RAGEN's symbols and format).

The map is rendered with `P` player, `_` frozen, `O` hole, `G` goal, `X` player in a hole, `√` player on the goal;
the agent answers one move per turn as `<answer>Left</answer>`. `helpers.envs.frozenlake` re-exports every public
name here; the map selection (`frozenlake_maps`) and `doorway` deduplicate maps by their rendering.
"""

from __future__ import annotations

import re

from helpers.budget import statement
from helpers.envs.base import oversized

ACTIONS = ("Left", "Down", "Right", "Up")  # gymnasium's order: LEFT=0 DOWN=1 RIGHT=2 UP=3
_ACTION_INDEX = {a.lower(): i for i, a in enumerate(ACTIONS)}
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)

SYSTEM_PROMPT = (
    "You are playing FrozenLake. Move the player P to the goal G without stepping into a hole O. "
    "_ is frozen ice. Moves: Left, Down, Right, Up. Reply with one move as <answer>Move</answer>."
)
SLIPPERY_NOTE = " The ice is slippery: a move may go sideways instead."


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


def format_action(action: int) -> str:
    """The canonical reply for an action index, e.g. '<answer>Left</answer>'."""
    return f"<answer>{ACTIONS[action]}</answer>"


def parse_action(text: str) -> tuple[int | None, str]:
    """Parse a reply into an action index, or (None, what was wrong).

    The reply must contain exactly one `<answer>...</answer>` whose content, stripped and case-folded, is one of
    the four moves. Text around the tag is allowed (a larger model may explain itself); two answers, an empty
    answer or an unknown move are invalid, and so is a reply over `MAX_REPLY_BYTES` (not searched at all).
    """
    too_long = oversized(text)
    if too_long:
        return None, too_long
    found = _ANSWER.findall(text)
    if not found:
        return None, "no <answer>...</answer> tag found"
    if len(found) > 1:
        return None, f"{len(found)} answers given; give exactly one"
    move = found[0].strip().lower()
    if move not in _ACTION_INDEX:
        return None, f"unknown move {found[0].strip()[:20]!r}"
    return _ACTION_INDEX[move], ""


def observation(
    desc: tuple[str, ...] | list[str], state: int, total: int, remaining: int, note: str = ""
) -> str:
    """What the agent sees after a turn: the note (if any), the map with the player at `state`, the budget."""
    head = f"{note}\n" if note else ""
    return f"{head}{render(desc, state)}\n{statement(total, remaining)}"
