"""Exploration (not a test): why does no RL arm of the cpu series read the budget line, and what would?

Issue 26 asks for an RL arm that moves notebook 02's budget-swap probe (`helpers.budget_probe`: responsiveness 0 for
a policy that ignores "Turns left: r of T.", 2 for the budget-aware optimum). This script trains variants from the
profile's base and probes each on one pool of swap states (`budgetmix.swap_pool` over the base's and the variants'
budget-mixed trajectories), beside the base:

* `--rl NAME:key=value;...`: one RL run in BudgetMix mode, seed 0, with config overrides (`train__lr=3e-4`,
  `train__algorithm=oracle_q`, `train__steps=200`, ...), as the series trains it (`train.rl_train`);
* `--sft NAME:STEPS:LR`: the supervised control. The base fine-tuned by SFT (`base_model.sft`, episode context) on
  demonstrations of the budget-aware optimum with the demonstrator's random moves (`sft.epsilon`), each at a
  budget drawn from BudgetMix's candidates: can this model, from this base, learn to read the number at all when
  told directly which move each budget asks for?

    nice -n 19 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/budget_reading.py --profile cpu \\
        --rl grpo: --rl grpo_lr3e-4:train__lr=3e-4 --rl 'oracle_q:train__algorithm=oracle_q;train__save_steps=[20]' \\
        --sft sft150:150:1e-3 --sft sft600:600:1e-3

Models go to results/<profile>/models (RL, by recipe hash) and results/_cache/budget_reading (SFT controls); each is
trained once and reused. It prints the probe table (responsiveness with its interval over maps, total variation at
sensitive and control states, P(budget-optimal move) by budget shown). Measured on 2 cores, 2026-12-04, on the cpu
testbed (maps selected by their budget-awareness gap): README, "Budget awareness: what the probe found".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import base_model, budget, budget_probe, budgetmix, config, models, rl_runs, store, train
from helpers.agents import Agent
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks, make, play, settings
from helpers.rollout import ChatFormat


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def rl_variant(profile: str, spec: str) -> list[tuple[str, Path]]:
    """`NAME:key=value;...` -> [(name, the final model of a BudgetMix run, seed 0, with those overrides)], preceded
    by (`NAME@STEP`, the policy it saved after STEP) for every step of `train__save_steps=[...]` (a compute curve)."""
    name, _, rest = spec.partition(":")
    overrides = {k: _value(v) for k, v in (kv.split("=", 1) for kv in rest.split(";") if kv)}
    cfg = config.load(profile, **overrides)
    t0 = time.time()
    path = train.rl_train(cfg, "budgetmix", 0)
    print(f"{name}: {path} ({time.time() - t0:.0f} s)", flush=True)
    steps = [s for s in cfg.train.save_steps if s < cfg.train.steps]
    return [(f"{name}@{s}", rl_runs.trained_model(cfg, "budgetmix", 0, step=s)) for s in steps] + [
        (name, path)
    ]


def optimum_demonstrations(cfg, n: int, seed: int) -> list[list[dict]]:
    """`n` transcripts of the budget-aware optimum (finite-horizon Q*, gamma 1, ties shared) with random moves a
    share `sft.epsilon` of the time, each at a budget drawn from BudgetMix's candidates, on training maps."""
    tasks = load_tasks("frozenlake", "train", **settings(cfg))
    rng = np.random.default_rng(seed)
    cands = budget.budgetmix_candidates(cfg.env.frozenlake.t_max)

    def player(i: int):
        r = np.random.default_rng([seed, i])

        def act(env) -> str:
            if r.random() < cfg.sft.epsilon:
                return fl.format_action(int(r.integers(4)))
            pi = fl.optimal_policy(env.task, env.remaining)[env.remaining, env.state]
            return fl.format_action(int(r.choice(4, p=pi)))

        return act

    out = []
    for i in range(n):
        task, T = tasks[int(rng.integers(len(tasks)))], int(rng.choice(cands))
        out.append(play(make("frozenlake"), task, T, player(i), seed=seed * 1_000_003 + i)[0])
    return out


def sft_control(profile: str, spec: str) -> tuple[str, Path]:
    """`NAME:STEPS:LR` -> (name, the base fine-tuned on the optimum's demonstrations for STEPS steps at LR)."""
    name, steps, lr = spec.split(":")
    cfg = config.load(
        profile, sft__obs_steps=0, sft__max_steps=int(steps), sft__lr=float(lr), sft__warmup_steps=10
    )
    out = store.results_root() / "_cache" / "budget_reading" / f"{base_model.folder_name(cfg)}-{steps}-{lr}"
    if not (out / "config.json").exists():
        model, tok = models.load(str(base_model.path_of(config.load(profile))), device="cpu", dtype="float32")
        t0 = time.time()
        base_model.sft(model, tok, optimum_demonstrations(cfg, 3000, seed=7), cfg)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        print(f"{name}: SFT {steps} steps at lr {lr} in {time.time() - t0:.0f} s", flush=True)
    return name, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--rl", action="append", default=[], help="NAME:key=value;... (BudgetMix, seed 0)")
    ap.add_argument("--sft", action="append", default=[], help="NAME:STEPS:LR (the supervised control)")
    args = ap.parse_args()
    cfg = config.load(args.profile)
    variants = [v for s in args.rl for v in rl_variant(args.profile, s)]
    variants += [sft_control(args.profile, s) for s in args.sft]
    agents = {"base": Agent("base", base_model.path_of(cfg), cfg)}
    agents |= {name: Agent(name, path, cfg) for name, path in variants}
    swaps, pool = budgetmix.swap_pool(cfg, agents, list(agents))
    tok = agents["base"].tokenizer()
    chat = ChatFormat(tok, models.chat_kwargs(tok))
    probs = {}
    for name, agent in agents.items():
        policy = agent.load()
        try:
            probs[name] = budget_probe.move_probabilities(policy, swaps, chat)
        finally:
            policy.close()
    swap = budgetmix.swap_summary(
        swaps, probs, dict.fromkeys(probs, "model"), cfg.eval.n_bootstrap, cfg.eval.ci, cfg.seed, pool
    )
    print(f"pool: {pool}")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(swap.table.drop(columns=["kind"]).round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
