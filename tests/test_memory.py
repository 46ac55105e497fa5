"""The GPU memory plan (`helpers.memory`, issue 48): its arithmetic against measured CPU-side sizes of small Qwen3
models, the gpu profile's plan on one 80 GB GPU, and the refusals with their numbers and knobs. Seconds, no GPU."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from helpers import config, memory, run
from helpers.memory import GIB, KNOWN, STRATEGIES, Shape

SMALL = [  # tied and untied embeddings, grouped-query attention, a head_dim that is not hidden / heads
    dict(
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=160,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=300,
        tie_word_embeddings=True,
    ),
    dict(
        hidden_size=48,
        num_hidden_layers=3,
        intermediate_size=96,
        num_attention_heads=6,
        num_key_value_heads=6,
        head_dim=8,
        vocab_size=257,
        tie_word_embeddings=False,
    ),
]
GPU_80 = int(79.6 * GIB)  # what an 80 GB H100 reports


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("cfg", SMALL)
def test_the_plan_counts_what_a_small_qwen3_holds(cfg):
    """Parameters, float32 weights, AdamW's state after a step, gradients and the bfloat16 reference, measured on
    the CPU, against the plan's 4N, 8N, 4N and 2N bytes."""
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg))
    n = Shape.from_config(cfg).n_params
    assert sum(p.numel() for p in model.parameters()) == n
    assert _bytes(model.parameters()) == 4 * n
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    assert _bytes(p.grad for p in model.parameters()) == 4 * n
    opt.step()
    moments = [v for s in opt.state.values() for k, v in s.items() if k != "step"]
    assert _bytes(moments) == 8 * n  # the step counters are one scalar per tensor, which the plan leaves out
    assert _bytes(model.to(torch.bfloat16).parameters()) == 2 * n
    assert Shape.from_config(model.config) == Shape.from_config(cfg)


def test_qwen3_sizes_and_the_issues_arithmetic():
    """Qwen3-4B is 4.02 B parameters (15.0 GiB in float32), Qwen3-8B 8.19 B; issue 48's count for the gpu profile
    as it was (everything on the GPU, vLLM at 0.35): weights 15 + AdamW 30 + reference 7.5 + vLLM 27.9 at wake-up,
    and the gradients (15) only in the update, since they are now freed after the last step."""
    four, eight = Shape.from_config(KNOWN["Qwen/Qwen3-4B"]), Shape.from_config(KNOWN["Qwen/Qwen3-8B"])
    assert 4.0e9 < four.n_params < 4.05e9 and 8.1e9 < eight.n_params < 8.25e9
    cfg = config.load("gpu", train__micro_batch_size=2, model__max_model_len=8192)
    p = memory.plan(cfg, four, GPU_80, STRATEGIES[0])
    r = {k: round(v / GIB, 1) for k, v in p.phases["rollout"].items()}
    assert r == {
        "weights (float32)": 15.0,
        "AdamW state": 30.0,
        "reference": 7.5,
        "vLLM at wake-up": 27.9,
        "overhead": 2.0,
    }
    assert "gradients" not in p.phases["rollout"] and round(p.phases["update"]["gradients"] / GIB, 1) == 15.0
    assert not p.fits


def test_the_gpu_profile_fits_one_80_gb_gpu():
    """With AdamW state and the reference off the GPU around rollouts and gradient checkpointing in the update, at
    micro_batch_size 1 and max_model_len 6144 (configs/gpu.yaml); PPO's arm is out of 07's grid there."""
    cfg = config.load("gpu")
    p = memory.choose(cfg, memory.shape_of(cfg.model.name_or_path), GPU_80)
    assert (
        p.fits and p.strategy.offload_optimizer and p.strategy.offload_reference and p.strategy.checkpointing
    )
    assert max(p.peak(ph) for ph in p.phases) <= GPU_80
    assert (
        "ppo" not in cfg.process.algorithms
        and "ppo" not in config.load("gpu", series="frozenlake").process.algorithms
    )
    assert memory.check_series(cfg, ["01", "02", "07"], GPU_80)[0].startswith("without a critic (grpo)")
    assert memory.check_series(cfg, ["01"], None) == []  # no GPU: no plan


def test_a_plan_that_cannot_fit_is_refused_with_its_numbers_and_knobs():
    cfg = config.load("gpu", series="bfcl")  # 32,768-token conversations
    with pytest.raises(memory.MemoryPlanError) as e:
        memory.check_series(cfg, ["01"], GPU_80)
    text = str(e.value)
    assert "train.algorithm=grpo" in text and "update over by" in text and "DOES NOT FIT" in text
    assert "train.micro_batch_size (1) or model.max_model_len (32768)" in text
    assert "model.gpu_memory_utilization (0.35)" in text
    with pytest.raises(memory.MemoryPlanError, match="without ppo: its critic is a second model"):
        memory.check_series(config.load("gpu", process__algorithms=["grpo", "ppo"]), ["07"], GPU_80)
    ppo = memory.choose(
        config.load("gpu"), Shape.from_config(KNOWN["Qwen/Qwen3-4B"]), int(139 * GIB), critic=True
    )
    assert ppo.fits  # an H200's memory holds the critic


def test_the_runner_prints_the_plan_and_refuses_before_it_starts(monkeypatch, capsys):
    monkeypatch.setattr(memory, "gpu_bytes_of", lambda device: GPU_80)
    nb = sorted(run.notebooks())
    run.check_memory(config.load("gpu"), nb)
    assert "memory plan (4.02 B parameters, 79.6 GiB GPU" in capsys.readouterr().out
    with pytest.raises(run.RunError, match=r"bfcl: train\.algorithm=grpo: the memory plan does not fit"):
        run.check_memory(config.load("gpu", series="bfcl"), nb)
    monkeypatch.setattr(memory, "gpu_bytes_of", lambda device: None)  # the CPU profiles: nothing printed
    run.check_memory(config.load("cpu"), nb)
    assert capsys.readouterr().out == ""


class _Moves:
    """Records when `ppo_update` asks for the memory plan's moves, beside the reference's forward passes and the
    optimiser's steps."""

    active = True

    def __init__(self, events: list):
        self.events = events

    def reference_in(self):
        self.events.append("reference_in")

    def reference_out(self):
        self.events.append("reference_out")

    def optimizer_in(self):
        self.events.append("optimizer_in")

    def optimizer_out(self):
        self.events.append("optimizer_out")


def test_the_update_moves_the_reference_in_only_to_score_and_the_optimizer_state_before_its_first_step():
    import copy

    import numpy as np
    from test_ppo_old_logprobs import cfg_for, tiny_model, trajectories

    from helpers import ppo

    events: list = []
    model = tiny_model()
    ref = copy.deepcopy(model).requires_grad_(False)
    ref.register_forward_pre_hook(lambda *a: events.append("ref") if events[-1:] != ["ref"] else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.register_step_pre_hook(lambda *a: events.append("step"))
    ppo.ppo_update(
        model,
        ref,
        opt,
        trajectories(model),
        cfg_for("bfloat16"),
        np.random.default_rng(0),
        offload=_Moves(events),
    )
    assert (
        events[:4] == ["reference_in", "ref", "reference_out", "optimizer_in"] and events[4:] == ["step"] * 4
    )


def test_gradient_checkpointing_gives_the_update_it_replaces():
    """The plan's last strategy: HF gradient checkpointing in the update (without the shared-prefix cache, which
    checkpointing cannot keep) computes the same losses and weights as the plain update, on CPU."""
    import numpy as np
    from test_ppo_old_logprobs import cfg_for, tiny_model, trajectories

    from helpers import ppo

    outs, weights = [], []
    for ckpt in (False, True):
        model = tiny_model()
        trajs = trajectories(model)
        if ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ref = tiny_model().requires_grad_(False)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        outs.append(ppo.ppo_update(model, ref, opt, trajs, cfg_for(), np.random.default_rng(0)))
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert outs[0]["pg_loss"] == pytest.approx(outs[1]["pg_loss"], abs=1e-6)
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=1e-6)


def test_offload_keeps_the_optimizer_state_and_does_nothing_on_the_cpu_profiles():
    from helpers import offload, train

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    before = {k: v.clone() for s in opt.state.values() for k, v in s.items()}
    offload.optimizer_to(opt, "cpu")
    after = {k: v for s in opt.state.values() for k, v in s.items()}
    assert all(torch.equal(before[k], after[k]) for k in before)
    moves = train.offload_for(config.load("cpu"), None, "cpu", model, opt, model)
    assert not moves.active
