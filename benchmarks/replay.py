"""The replay policy of issue 29 under each DeepCoder-MT protocol: a policy that never solves anything, only
replays the input/expected-output pairs shown in earlier feedback as a lookup table (stdin tests), on the kit's
bundled stdin problems. Under the paper's protocol (the shown tests also pay) it is rewarded; under `held_out`
(the reward comes from tests never shown) it should not be.

    python benchmarks/replay.py [--t-max 4] [--n 32]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, the kit installed or not

from helpers.envs.code import CodeEnv, fence, kit_tasks

_PAIR = re.compile(r"Input:\n(.*?)\nExpected:\n(.*?)\nActual:", re.DOTALL)


def replay_program(seen: dict[str, str]) -> str:
    """A program that prints the expected output of every input seen so far, and nothing for any other."""
    return (
        f"import sys\ntable = {seen!r}\ndata = sys.stdin.read().rstrip('\\n')\nprint(table.get(data, ''))\n"
    )


def replay_episode(env: CodeEnv, task, t_max: int) -> bool:
    """One episode of the replay policy; whether it succeeded."""
    env.reset(task, t_max)
    seen: dict[str, str] = {}
    for _ in range(t_max):
        res = env.step(fence(replay_program(seen)))
        if res.done:
            return res.success
        for given, expected in _PAIR.findall(res.observation):
            if "...(truncated)..." not in given + expected:
                seen[given] = expected
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--t-max", type=int, default=4)
    ap.add_argument("--n", type=int, default=32, help="bundled kit tasks")
    args = ap.parse_args()
    tasks = [t for t in kit_tasks(args.t_max) if {x["kind"] for x in t.payload["tests"]} == {"stdin"}][
        : args.n
    ]
    for protocol in CodeEnv.PROTOCOLS:
        env = CodeEnv(protocol=protocol)
        solved = sum(replay_episode(env, t, args.t_max) for t in tasks)
        print(
            f"protocol {protocol:9s}: the replay policy solved {solved}/{len(tasks)} kit tasks at T_max = {args.t_max}"
        )


if __name__ == "__main__":
    main()
