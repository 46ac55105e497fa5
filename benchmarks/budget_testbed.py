"""Exploration (not a test): which FrozenLake testbed rule leaves budget awareness as the main thing to learn?

For each candidate (size, hole share, slip rate, T_max) it draws maps from the kit's generator (`frozenlake.random_map`,
seeds from --seed on), computes by DP on each map the success at 25 / 50 / 75 / 100 % of T_max of the demonstrator,
the greedy habit, the best budget-blind policy for T_max (`headroom.best_blind_policy`) and the optimum, then applies
a stated selection rule: keep a map when its budget-awareness gap averaged over 25, 50 and 75 % of T_max is at least
--min-gap points, the rule of `env.frozenlake.select_min_gap` (`frozenlake.budget_gaps`: the optimum minus the blind
policy coordinate ascent reaches from the T_max optimum's greedy policy; the table itself uses the full search). It prints, for all maps and for the kept ones, the mean headrooms
(noise, habit, budget awareness, in points), the structural bound, the solvable maps per budget, the share of maps
kept (what the generator must over-draw), and the tokens of a full T_max episode under the tiny tokenizer, relative
to today's cpu testbed (4x4, T_max 8). Issue 26's target: budget awareness >= 8 points at 25 % and 50 %, >= 4 at
75 %, bound < 0.95 at 75 %.

    nice -n 19 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/budget_testbed.py --maps 30 \
        --candidate 4,0.2,0.75,8 --candidate 5,0.2,0.8,12

With --profile NAME it reads that profile's own test maps instead (`load_tasks`, selection included) and prints
`helpers.headroom.table` on them: every column and headroom at 25 / 50 / 75 / 100 % of T_max, solvable maps, and
the CPU time the profile's map sets took to build:

    nice -n 19 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/budget_testbed.py --profile cpu --maps 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import base_model, budget, config, headroom, models
from helpers.envs import Task, load_tasks, settings
from helpers.envs import frozenlake as fl
from helpers.rollout import ChatFormat

FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def per_map(task: Task, t_max: int, epsilon: float, habit_gamma: float) -> dict[str, np.ndarray]:
    """Success at each fraction of T_max of the demonstrator, greedy habit, best blind for T_max and optimum."""
    budgets = [budget.budget_at(f, t_max) for f in FRACTIONS]
    habit = fl.stationary_policy(task, habit_gamma)
    blind, _ = headroom.best_blind_policy(task, t_max)
    curve = headroom.blind_success(task, blind, t_max)
    return {
        "demonstrator": np.array(
            [fl.policy_success(task, fl.with_random_moves(habit, epsilon), T) for T in budgets]
        ),
        "greedy_habit": np.array([fl.policy_success(task, habit, T) for T in budgets]),
        "blind_t_max": np.array([curve[T - 1] for T in budgets]),
        "optimum": np.array([fl.upper_bound(task, T) for T in budgets]),
    }


def episode_tokens(chat: ChatFormat, task: Task, t_max: int) -> int:
    """Tokens of an episode that uses every turn: the opening prompt, then per turn a reply and an observation."""
    env = fl.FrozenLakeEnv()
    ids = chat.prompt_ids(env.reset(task, t_max, seed=0))
    reply = chat.action_ids(fl.format_action(0))
    n = len(ids)
    obs = env._observation("")  # a mid-episode observation has the same length as the opening one
    for _ in range(t_max):
        n += len(reply) + len(chat.observation_ids(obs))
    return n


def report(name: str, maps: list[dict], kept: list[bool], t_max: int) -> dict:
    out = {}
    for label, sel in (("all", [True] * len(maps)), ("kept", kept)):
        chosen = [m for m, k in zip(maps, sel, strict=True) if k]
        if not chosen:
            print(f"{name} {label}: no maps")
            continue
        mean = {k: np.mean([m[k] for m in chosen], axis=0) for k in chosen[0]}
        solvable = np.sum([m["optimum"] > 0 for m in chosen], axis=0)
        row = {
            "n": len(chosen),
            "noise": 100 * (mean["greedy_habit"] - mean["demonstrator"]),
            "habit": 100 * (mean["blind_t_max"] - mean["greedy_habit"]),
            "budget_awareness": 100 * (mean["optimum"] - mean["blind_t_max"]),
            "bound": mean["optimum"],
            "solvable": solvable,
        }
        out[label] = row
        fmt = lambda v: " / ".join(f"{x:+.1f}" for x in v)  # noqa: E731
        print(
            f"{name} {label:4s} n={row['n']:3d}  budget awareness {fmt(row['budget_awareness'])}  "
            f"habit {fmt(row['habit'])}  noise {fmt(row['noise'])}  bound "
            f"{' / '.join(f'{x:.2f}' for x in row['bound'])}  solvable {list(map(int, solvable))}"
        )
    return out


def profile_table(name: str, n: int, chat: ChatFormat, reference: float) -> None:
    """`headroom.table` on the first `n` test maps of profile `name` (its own maps, selection included)."""
    cfg = config.load(name)
    c = cfg.env.frozenlake
    start = time.process_time()
    tasks = load_tasks("frozenlake", "test", seed=cfg.seed, **settings(cfg, "frozenlake"))[:n]
    load_tasks("frozenlake", "train", seed=cfg.seed, **settings(cfg, "frozenlake"))
    built = time.process_time() - start
    budgets = [budget.budget_at(f, c.t_max) for f in FRACTIONS]
    df = headroom.table(tasks, budgets, c.t_max, cfg.sft.epsilon, cfg.sft.habit_gamma, seed=cfg.seed)
    cols = [
        "fraction",
        "noise_points",
        "habit_points",
        "budget_awareness_points",
        "budget_awareness_vs_mix_points",
        "within_episode_points",
        "optimum",
        "blind_t_max",
        "greedy_habit",
        "demonstrator",
        "solvable_maps",
    ]
    print(
        f"[profile {name}: {len(tasks)} test maps, {c.size}x{c.size}, holes {c.hole_p}, slip {c.success_rate}, "
        f"T_max {c.t_max}, select_min_gap {c.select_min_gap}; both map sets built in {built:.1f} s cpu]"
    )
    print(df[cols].round(3).to_string())
    tokens = float(np.mean([episode_tokens(chat, t, c.t_max) for t in tasks[:5]]))
    print(f"full episode {tokens:.0f} tokens ({tokens / reference:.2f}x the 4x4 T_max 8 episode)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", action="append", default=[], help="size,hole_p,success_rate,t_max")
    ap.add_argument("--maps", type=int, default=30)
    ap.add_argument("--min-gap", type=float, default=10.0, help="selection: mean gap at 25/50/75 %% (points)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--profile", action="append", default=[], help="a profile whose own test maps to tabulate"
    )
    args = ap.parse_args()
    cfg = config.load("cpu")
    smoke = config.load("smoke")
    tok = models.train_tokenizer(base_model.tokenizer_corpus(base_model.demonstrations(smoke, 40, seed=0)))
    chat = ChatFormat(tok)
    reference = None
    if args.profile:
        ref = Task("ref", "frozenlake", {"desc": ["SFFF", "FHFH", "FFFH", "HFFG"], "is_slippery": True}, 8)
        for name in args.profile:
            profile_table(name, args.maps, chat, episode_tokens(chat, ref, 8))
        return
    for cand in args.candidate or ["4,0.2,0.75,8"]:
        size, hole_p, rate, t_max = cand.split(",")
        size, hole_p, rate, t_max = int(size), float(hole_p), float(rate), int(t_max)
        start = time.process_time()
        maps, tasks, seed = [], [], args.seed
        while len(tasks) < args.maps:
            desc = fl.random_map(size, hole_p, seed)
            seed += 1
            if desc is None:
                continue
            payload = {"desc": list(desc), "is_slippery": True, "success_rate": rate, "gamma": 0.95}
            tasks.append(Task(f"x{seed}", "frozenlake", payload, t_max))
        maps = [per_map(t, t_max, cfg.sft.epsilon, cfg.sft.habit_gamma) for t in tasks]
        kept = [float(fl.budget_gaps(t).mean()) >= args.min_gap for t in tasks]
        tokens = float(np.mean([episode_tokens(chat, t, t_max) for t in tasks[:5]]))
        reference = reference or (tokens if cand == "4,0.2,0.75,8" else None)
        name = f"[{size}x{size} holes {hole_p} slip {rate} T_max {t_max}]"
        report(name, maps, kept, t_max)
        rel = f" ({tokens / reference:.2f}x the 4x4 T_max 8 episode)" if reference else ""
        print(
            f"{name} kept {sum(kept)}/{len(maps)} maps; full episode {tokens:.0f} tokens{rel}; "
            f"DP {time.process_time() - start:.1f} s cpu\n"
        )


if __name__ == "__main__":
    main()
