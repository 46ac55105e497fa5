"""The TRL path on CPU: a 2-step GRPOTrainer run of the smoke profile's tiny model through the kit's rollouts.

One trainer run (module fixture) is shared: it trains BudgetMix for 2 rollout batches, recording what TRL made of
the rollout function's output, then the tests check steps, loss, the environment mask and the weights.
"""

from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys

import pytest

from helpers import budget as budget_lib
from helpers import config, store
from helpers import train_trl as tt
from helpers.rollout import ChatFormat


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl")
    # a caller's KIT_RESULTS (gpu_check.sh) is reused
    with store.results_at(os.environ.get("KIT_RESULTS") or root / "results"):
        cfg = config.load("smoke")
        trainer = tt.build_trainer(cfg, "budgetmix", max_steps=2, output_dir=root / "run")
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        seen = []  # what TRL built from each rollout (its masks are what enters the loss)
        original = trainer._generate_and_score_completions

        def recording(inputs):
            out = original(inputs)
            seen.append(
                {k: out[k].detach().cpu() for k in ("completion_ids", "completion_mask", "tool_mask")}
            )
            return out

        trainer._generate_and_score_completions = recording
        trainer.train()
        yield cfg, trainer, before, seen


def test_two_steps_with_finite_loss(run):
    _, trainer, _, seen = run
    assert trainer.state.global_step == 2
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert len(seen) == 2  # one rollout batch per optimiser step in the smoke geometry


def test_env_mask_zeros_exactly_the_environment_tokens(run):
    cfg, trainer, _, seen = run
    trajs = trainer.kit_rollout.last
    out = tt.KitRollout.to_trl(trajs)
    chat = ChatFormat(trainer.processing_class)
    assert len(trajs) == cfg.train.tasks_per_step * cfg.train.group_size
    assert any(0 in m for m in out["env_mask"]), "no multi-turn trajectory: the check below would be vacuous"
    for t, prompt, comp, mask in zip(
        trajs, out["prompt_ids"], out["completion_ids"], out["env_mask"], strict=True
    ):
        assert prompt + comp == t.token_ids
        # Rebuild the environment's tokens from the turn records alone: each turn's observation in the chat
        # format (except after the last turn), and the end-of-turn the rollout appends to a cut-off action.
        env_tokens, actions = [], []
        for turn in t.turns:
            actions.append(turn["action"])
            if turn["truncated"]:
                env_tokens.append(chat.eos_token_id)
            if not turn["done"]:
                env_tokens += chat.observation_ids(turn["observation"])
        assert [tok for tok, m in zip(comp, mask, strict=True) if m == 0] == env_tokens
        # and the model's tokens are the actions, one contiguous span per turn
        spans, cur = [], []
        for tok, m in zip(comp, mask, strict=True):
            if m:
                cur.append(tok)
            elif cur:
                spans.append(cur)
                cur = []
        spans += [cur] if cur else []
        decoded = [trainer.processing_class.decode(s, skip_special_tokens=True) for s in spans]
        assert decoded == actions
    # TRL took the mask as given: its tool_mask (which multiplies the loss mask) equals env_mask on every token
    last = seen[-1]
    for i, mask in enumerate(out["env_mask"]):
        n = len(mask)
        assert last["completion_ids"][i, :n].tolist() == out["completion_ids"][i]
        assert last["tool_mask"][i, :n].tolist() == mask
        assert (last["completion_mask"][i] * last["tool_mask"][i]).sum().item() == sum(mask)


def test_weights_changed(run):
    _, trainer, before, _ = run
    delta = sum((before[n] - p.detach()).abs().sum().item() for n, p in trainer.model.named_parameters())
    assert delta > 0
    # where a group's rewards differed, the policy gradient (not only weight decay) moved the weights
    for h in trainer.state.log_history:
        if "loss" in h and h["reward_std"] > 0:
            assert h["frac_reward_zero_std"] < 1 and h["grad_norm"] > 0


def test_budgetmix_budgets_are_shared_by_processes(run):
    cfg, trainer, _, _ = run
    trajs = trainer.kit_rollout.last
    cands = budget_lib.budgetmix_candidates(cfg.env.frozenlake.t_max)
    by_task = {}
    for t in trajs:
        by_task.setdefault(t.task_id, set()).add(t.budget)
        assert t.budget in cands
    assert all(len(b) == 1 for b in by_task.values())  # one budget per task group
    # the draw depends only on (seed, task id, step): another interpreter with another hash salt agrees
    # (the function's own source, run alone: importing the kit in two more interpreters would take seconds)
    code = f"import hashlib\n{inspect.getsource(budget_lib.group_seed)}\nprint(group_seed(0, 'task-7', 3))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": salt},
        ).stdout.strip()
        for salt in ("1", "2")
    }
    assert outs == {str(budget_lib.group_seed(0, "task-7", 3))}
    task = trainer.kit_rollout.tasks[trajs[0].task_id]
    draw = budget_lib.group_budget
    assert len({draw("budgetmix", task, 0, step) for step in range(40)}) > 1  # varies across steps
    assert draw("full", task, 0, 5) == task.t_max


def test_geometry_and_groups():
    cfg = config.load(
        "smoke",
        train__tasks_per_step=8,
        train__group_size=16,
        train__minibatch_size=32,
        train__micro_batch_size=4,
    )
    g = tt.geometry(cfg, world_size=4)
    assert (g.per_device_train_batch_size, g.gradient_accumulation_steps) == (4, 2)
    assert g.updates_per_rollout == 4 and g.steps_per_generation == 8
    assert g.per_device_train_batch_size * 4 * g.steps_per_generation == 8 * 16
    with pytest.raises(ValueError, match="minibatch_size"):
        tt.geometry(config.load("smoke", train__minibatch_size=3), world_size=1)
    assert tt.runs(["a", "a", "b", "b", "b", "a"]) == [("a", 2), ("b", 3), ("a", 1)]


def test_bf16_profile_trains_float32_weights_and_moves_every_one(run, tmp_path, monkeypatch):
    """model.dtype bfloat16 at the paper's lr 1e-6: TRL's model keeps float32 weights, accelerate autocasts to
    bfloat16, the kit's HF rollouts compute in bfloat16 too, and 2 steps move every weight tensor (before the fix,
    with the model loaded in bfloat16, 5 of the 13 tensors, all the norms, stayed exactly as they were)."""
    import torch

    rollout_dtypes = []
    original = tt.hf_policy

    def recording(model, tokenizer, dtype="float32", name="policy"):
        rollout_dtypes.append(dtype)
        return original(model, tokenizer, dtype, name=name)

    monkeypatch.setattr(tt, "hf_policy", recording)
    # enough tasks per step that some group has unequal rewards (an all-equal group has no GRPO signal)
    cfg = config.load("smoke", model__dtype="bfloat16", train__lr=1e-6, train__tasks_per_step=8)
    trainer = tt.build_trainer(cfg, "budgetmix", max_steps=2, output_dir=tmp_path / "bf16")
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert trainer.args.bf16 and trainer.accelerator.mixed_precision == "bf16"
    assert tt.compute_dtype(trainer.args) == "bfloat16"
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(before[n], p.detach())]
    assert unchanged == [], f"weights TRL left unchanged: {unchanged}"
    assert rollout_dtypes and set(rollout_dtypes) == {"bfloat16"}


def test_gradient_checkpointing_reaches_trl_and_the_model_and_trains(tmp_path):
    """`build_trainer(gradient_checkpointing=True)` sets TRL's GRPOConfig flag; the model recomputes activations in
    the loss's backward pass (transformers' Trainer turns it on when training starts, not when it is built; the HF
    rollout turns it off to generate and back on), and a rollout batch and an optimiser step run with it."""
    cfg = config.load("smoke")
    trainer = tt.build_trainer(
        cfg, "budgetmix", max_steps=1, output_dir=tmp_path / "gc", gradient_checkpointing=True
    )
    assert trainer.args.gradient_checkpointing is True
    in_loss = []  # whether the model checkpoints when the loss is computed
    original = trainer.compute_loss

    def recording(model, inputs, *args, **kwargs):
        in_loss.append(trainer.model.is_gradient_checkpointing)
        return original(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 1 and len(losses) == 1 and math.isfinite(losses[0])
    assert in_loss and all(in_loss), in_loss
    assert trainer.model.is_gradient_checkpointing


def test_the_cli_flag_asks_for_gradient_checkpointing(monkeypatch):
    asked = []

    def fake_train(cfg, mode, **kw):
        asked.append(kw["gradient_checkpointing"])
        return "final"

    monkeypatch.setattr(tt, "train", fake_train)
    assert tt.main(["--profile", "smoke", "--gradient-checkpointing"]) == 0
    assert tt.main(["--profile", "smoke"]) == 0
    assert asked == [True, False]


def test_trl_vllm_engine_arguments(monkeypatch):
    """`trl_llm_defaults` hands extra arguments (enforce_eager) to the vllm.LLM call inside TRL, and only there."""
    from trl.generation import vllm_generation

    made = []

    def fake_llm(**kw):
        made.append(kw)

    monkeypatch.setattr(vllm_generation, "LLM", fake_llm, raising=False)
    with tt.trl_llm_defaults({"enforce_eager": True}):
        vllm_generation.LLM(model="m", seed=0)
    assert vllm_generation.LLM is fake_llm
    with tt.trl_llm_defaults({}):
        vllm_generation.LLM(model="m")
    assert made == [{"enforce_eager": True, "model": "m", "seed": 0}, {"model": "m"}]
    monkeypatch.delattr(vllm_generation, "LLM")  # no vllm: a clear error, not an AttributeError
    with pytest.raises(ImportError, match="vllm"), tt.trl_llm_defaults({"enforce_eager": True}):
        pass


def test_parse_overrides_reads_numbers_yaml_would_not():
    assert tt.parse_overrides(["train.lr=1e-6", "model.device=cuda", "train.steps=3", "a.b=-2E+3"]) == {
        "train__lr": 1e-6,
        "model__device": "cuda",
        "train__steps": 3,
        "a__b": -2000.0,
    }
    assert tt.parse_overrides(["model.name_or_path=e5"]) == {"model__name_or_path": "e5"}
    with pytest.raises(ValueError, match=r"SECTION\.KEY=VALUE"):
        tt.parse_overrides(["train.lr"])
