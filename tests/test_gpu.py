"""GPU tier: the HF backend on CUDA against CPU, vLLM against HF, and RL steps with vLLM rollouts and weight sync.

Marked `gpu` (skipped without CUDA) and `vllm` (skipped without vllm); `scripts/gpu_check.sh` runs them. All use
the smoke profile's tiny model, built on the fly (no downloads), in float32 so backends can be compared tightly.
The tests at the end run on CPU: the vLLM backend's calls against a stand-in engine (wake-up order, engine
arguments) and the benchmark's bandwidth table.
"""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import base_model, config, models, store, train
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout

REPO = Path(__file__).resolve().parents[1]
GREEDY = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=6, seed=0)
LOGP_ATOL = 2e-3  # float32 on both sides; kernels differ (cuBLAS vs CPU, vLLM's attention), so not bit-exact


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The smoke profile, its built base model and a few test tasks (under a temporary KIT_RESULTS unless set)."""
    root = tmp_path_factory.mktemp("gpu")
    # a caller's KIT_RESULTS (gpu_check.sh) is reused
    with store.results_at(os.environ.get("KIT_RESULTS") or root / "results"):
        cfg = config.load("smoke")
        path = base_model.path_of(cfg)
        tasks = load_tasks(cfg.env.name, "test", n=6, seed=0, **settings(cfg))
        yield cfg, path, tasks


def greedy_rollout(policy, cfg, tasks):
    return rollout(
        policy, cfg.env.name, tasks, cfg.env.frozenlake.t_max, 1, GREEDY, seed=0, step_quality=False
    )


def assert_same_trajectories(a, b):
    for x, y in zip(a, b, strict=True):
        assert x.token_ids == y.token_ids, f"{x.task_id}: greedy continuations differ"
        assert x.gen_mask == y.gen_mask
        np.testing.assert_allclose(x.logprobs, y.logprobs, atol=LOGP_ATOL)


@pytest.mark.gpu
def test_hf_cuda_matches_cpu(tiny):
    cfg, path, tasks = tiny
    cpu = HFPolicy.from_pretrained(path, device="cpu", dtype="float32")
    gpu = HFPolicy.from_pretrained(path, device="cuda", dtype="float32")
    a, b = greedy_rollout(cpu, cfg, tasks), greedy_rollout(gpu, cfg, tasks)
    assert any(t.n_turns > 1 for t in a)  # multi-turn: the carried KV cache is exercised on both devices
    assert_same_trajectories(a, b)
    prompts = [t.token_ids[: t.prompt_len] for t in a]
    conts = [t.token_ids[t.prompt_len :] for t in a]
    for x, y in zip(cpu.score(prompts, conts), gpu.score(prompts, conts), strict=True):
        np.testing.assert_allclose(x, y, atol=LOGP_ATOL)


@pytest.fixture(scope="module")
def vllm_policy(tiny):
    """One colocated-style engine for the module (a second LLM in one process is not worth the start-up)."""
    from helpers.policy_vllm import VLLMPolicy

    _, path, _ = tiny
    policy = VLLMPolicy.from_pretrained(path, device="cuda", dtype="float32", gpu_memory_utilization=0.2,
                                        max_model_len=512, enable_sleep_mode=True, enforce_eager=True)  # fmt: skip
    yield policy
    del policy
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.vllm
def test_vllm_matches_hf(tiny, vllm_policy):
    cfg, path, tasks = tiny
    hf = HFPolicy.from_pretrained(path, device="cuda", dtype="float32")
    a, b = greedy_rollout(hf, cfg, tasks), greedy_rollout(vllm_policy, cfg, tasks)
    assert any(t.n_turns > 1 for t in a)
    assert_same_trajectories(a, b)
    prompts = [t.token_ids[: t.prompt_len] for t in a]
    conts = [t.token_ids[t.prompt_len :] for t in a]
    for x, y in zip(hf.score(prompts, conts), vllm_policy.score(prompts, conts), strict=True):
        np.testing.assert_allclose(x, y, atol=LOGP_ATOL)
    # seeded sampling is reproducible call to call, and the rows of a call draw independently
    s = Sampling(temperature=2.0, top_p=1.0, max_new_tokens=6, seed=123)  # hot, so 32 rows cannot all agree
    same = [prompts[0]] * 32
    g1, g2 = vllm_policy.generate(same, s), vllm_policy.generate(same, s)
    assert [g.token_ids for g in g1] == [g.token_ids for g in g2]
    assert len({tuple(g.token_ids) for g in g1}) > 1


@pytest.mark.gpu
@pytest.mark.vllm
def test_grpo_steps_with_vllm_rollouts_and_weight_sync(tiny, vllm_policy):
    """Two RL steps as `rl_train` takes them with the vLLM backend: roll out with vLLM, sleep, PPO update, wake up
    with the new weights. vLLM's log-probs must move, and agree with the trained HF model's."""
    from helpers.backends import after_update, before_update

    cfg, path, _ = tiny
    # a large step, so the change is unmistakable; 8 groups of 8, so some group has rewards that differ
    cfg = config.load("smoke", model__device="cuda", train__lr=3e-2, train__tasks_per_step=8, train__group_size=8,
                      train__minibatch_size=64)  # fmt: skip
    model, tok = models.load(path, device="cuda", dtype="float32")
    ref, _ = models.load(path, device="cuda", dtype="float32")
    ref.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    tasks = load_tasks(cfg.env.name, "train", n=cfg.train.tasks_per_step, seed=0, **settings(cfg))
    probe = greedy_rollout(HFPolicy(ref, tok), cfg, tasks[:2])
    prompts = [t.token_ids[: t.prompt_len] for t in probe]
    conts = [t.token_ids[t.prompt_len :] for t in probe]
    vllm_policy.wake_up(model)  # start from the same weights as the trainer
    before = vllm_policy.score(prompts, conts)
    rng = np.random.default_rng(0)
    sampling = Sampling.from_config(cfg.sampling)
    for step in (1, 2):
        trajs = rollout(vllm_policy, cfg.env.name, tasks, cfg.env.frozenlake.t_max, cfg.train.group_size, sampling,
                        seed=step, step_quality=False)  # fmt: skip
        before_update(vllm_policy)
        assert vllm_policy.asleep
        upd = train.ppo_update(model, ref, opt, trajs, cfg, rng)
        assert np.isfinite(upd["pg_loss"])
        after_update(vllm_policy, model)
        assert not vllm_policy.asleep
    after = vllm_policy.score(prompts, conts)
    hf_after = HFPolicy(model, tok).score(prompts, conts)
    moved = max(abs(x - y) for a, b in zip(before, after, strict=True) for x, y in zip(a, b, strict=True))
    assert moved > 1e-2, "vLLM's outputs did not change after the update: weights were not synced"
    for x, y in zip(after, hf_after, strict=True):
        np.testing.assert_allclose(x, y, atol=LOGP_ATOL)


@pytest.mark.gpu
def test_bf16_update_on_cuda_moves_every_float32_parameter(tiny):
    """The gpu profile's precision on CUDA: float32 master weights, bfloat16 autocast, lr 1e-6 (tests/test_precision.py
    checks the same on CPU)."""
    cfg, path, tasks = tiny
    cfg = config.load("smoke", model__device="cuda", model__dtype="bfloat16", train__lr=1e-6)
    model, tok = models.load_trainable(path, device="cuda")
    ref, _ = models.load(path, device="cuda", dtype="bfloat16")
    trajs = rollout(HFPolicy(model, tok), cfg.env.name, tasks[:4], cfg.env.frozenlake.t_max, 4,
                    Sampling.from_config(cfg.sampling), seed=0, step_quality=False)  # fmt: skip
    for i, t in enumerate(trajs):
        t.reward, t.exhausted = float(i % 2), False  # non-zero advantages in every group
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    for _ in range(3):
        train.ppo_update(model, ref, opt, trajs, cfg, np.random.default_rng(0))
    unchanged = [n for n, p in model.named_parameters() if torch.equal(before[n], p.detach())]
    assert unchanged == [] and {p.dtype for p in model.parameters()} == {torch.float32}


# ------------------------------------------------------------------------------ CPU: what runs without a GPU


def test_request_seeds_are_distinct_and_stable():
    from helpers.policy_vllm import request_seeds

    seeds = request_seeds(7, 64)
    assert len(set(seeds)) == 64 and seeds == request_seeds(7, 64)
    assert seeds != request_seeds(8, 64)
    assert request_seeds(None, 3) == [None, None, None]


def test_vllm_backend_refuses_cpu_and_hf_backend_shares_the_model(tiny):
    from helpers.backends import after_update, before_update, load, rollout_policy_for

    cfg, path, _ = tiny
    with pytest.raises(ValueError, match="CUDA"):
        load(path, backend="vllm", device="cpu")
    model, tok = models.load(path)
    policy = rollout_policy_for(cfg, model, tok, name="full")
    assert isinstance(policy, HFPolicy) and policy.model is model
    before_update(policy)  # no-ops for the HF backend
    after_update(policy, model)


class _FakeLLM:
    """Stands in for `vllm.LLM`: records the calls the policy makes, in order."""

    def __init__(self, calls: list, **kwargs):
        self.calls, self.kwargs = calls, kwargs
        runner_model = types.SimpleNamespace(load_weights=lambda w: calls.append(("load_weights", w[0][0])))
        worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=runner_model))
        self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=worker),
                                                engine_core=types.SimpleNamespace(shutdown=lambda: calls.append("shutdown")))  # fmt: skip

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self, tags):
        self.calls.append(("wake_up", tuple(tags)))

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")


def test_wake_up_empties_torch_cache_before_vllm_takes_memory_back(monkeypatch):
    from helpers import policy
    from helpers.policy_vllm import VLLMPolicy

    calls: list = []
    monkeypatch.setattr(policy.gc, "collect", lambda: calls.append("gc"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    tok = types.SimpleNamespace(eos_token_id=2)
    model = torch.nn.Linear(2, 2)
    for level in (1, 2):
        calls.clear()
        policy = VLLMPolicy(_FakeLLM(calls), tok, sleep_level=level)
        policy.sleep()
        policy.wake_up(model)
        assert calls == [("sleep", level), "gc", "empty_cache", ("wake_up", ("weights",)),
                         ("load_weights", "weight"), ("load_weights", "bias"), "reset_prefix_cache",
                         "gc", "empty_cache", ("wake_up", ("kv_cache",))]  # fmt: skip
        assert not policy.asleep
    # level 2 dropped the weights: waking without a model is refused before any memory comes back
    calls.clear()
    policy = VLLMPolicy(_FakeLLM(calls), tok, sleep_level=2)
    policy.sleep()
    with pytest.raises(ValueError, match="level 2"):
        policy.wake_up()
    assert calls == [("sleep", 2)] and policy.asleep


def test_close_shuts_the_engine_down_and_gives_the_memory_back(monkeypatch):
    """Issue 28: an engine the kit built is shut down (engine core, vllm's distributed state, then gc and torch's
    cache), once, by close() or by leaving a `with` block; TRL's engine is only let go."""
    from helpers import policy, policy_vllm
    from helpers.policy_vllm import VLLMPolicy

    calls: list = []
    monkeypatch.setattr(policy.gc, "collect", lambda: calls.append("gc"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(policy_vllm, "destroy_vllm_distributed", lambda: calls.append("destroy_distributed"))
    tok = types.SimpleNamespace(eos_token_id=2)
    with VLLMPolicy(_FakeLLM(calls), tok, name="m") as p:
        assert calls == []
    assert calls == ["shutdown", "destroy_distributed", "gc", "empty_cache"] and p.llm is None
    p.close()  # a second close does nothing
    assert len(calls) == 4
    with pytest.raises(RuntimeError, match="closed"):
        p.generate([[1]], Sampling())
    calls.clear()
    VLLMPolicy(_FakeLLM(calls), tok, owns_llm=False).close()
    assert calls == ["gc", "empty_cache"]


def test_vllm_distributed_teardown_without_vllm_is_a_no_op():
    from helpers.policy_vllm import destroy_vllm_distributed

    destroy_vllm_distributed()  # nothing of vllm was set up here (or no vllm at all): nothing to do, no error


def test_enforce_eager_from_the_environment(tiny, monkeypatch):
    from helpers import policy_vllm
    from helpers.policy_vllm import VLLMPolicy, llm_defaults

    monkeypatch.delenv("KIT_VLLM_ENFORCE_EAGER", raising=False)
    assert llm_defaults() == {}
    for on in ("1", "true"):
        monkeypatch.setenv("KIT_VLLM_ENFORCE_EAGER", on)
        assert llm_defaults() == {"enforce_eager": True}
    monkeypatch.setenv("KIT_VLLM_ENFORCE_EAGER", "0")
    assert llm_defaults() == {}
    monkeypatch.setenv("KIT_VLLM_ENFORCE_EAGER", "sometimes")
    with pytest.raises(ValueError, match="KIT_VLLM_ENFORCE_EAGER"):
        llm_defaults()
    # the engine the policy builds gets it, and an explicit argument wins
    _, path, _ = tiny
    built: list = []
    fake_vllm = types.SimpleNamespace(LLM=lambda **kw: built.append(kw) or _FakeLLM([], **kw))
    monkeypatch.setattr(policy_vllm, "require_vllm", lambda: fake_vllm)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # restored after the test
    monkeypatch.setenv("KIT_VLLM_ENFORCE_EAGER", "1")
    VLLMPolicy.from_pretrained(path, device="cuda")
    VLLMPolicy.from_pretrained(path, device="cuda", enforce_eager=False)
    monkeypatch.delenv("KIT_VLLM_ENFORCE_EAGER")
    VLLMPolicy.from_pretrained(path, device="cuda")
    assert [kw.get("enforce_eager") for kw in built] == [True, False, None]
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("rollout_vllm", REPO / "benchmarks" / "rollout_vllm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bandwidth_table_matches_the_most_specific_name_first():
    bench = _benchmark_module()
    assert bench.peak_bandwidth("NVIDIA GH200 480GB") == 4000.0
    assert bench.peak_bandwidth("NVIDIA H200") == 4800.0
    assert bench.peak_bandwidth("NVIDIA H100 80GB HBM3") == 3350.0
    assert bench.peak_bandwidth("NVIDIA H100 PCIe") == 2000.0
    assert bench.peak_bandwidth("NVIDIA L40S") == 864.0 and bench.peak_bandwidth("NVIDIA L4") == 300.0
    assert bench.peak_bandwidth("Some Future GPU") is None and bench.peak_bandwidth("x", 123.0) == 123.0
    fragments = [f.lower() for f, _ in bench.PEAK_GBS]
    for i, early in enumerate(fragments):
        for late in fragments[i + 1 :]:
            assert early not in late, f"{late!r} can never match: {early!r} comes first and is part of it"
