"""GPU tier: the HF backend on CUDA against CPU, vLLM against HF, and RL steps with vLLM rollouts and weight sync.

Marked `gpu` (skipped without CUDA) and `vllm` (skipped without vllm); `scripts/gpu_check.sh` runs them. The first
ones use the smoke profile's tiny model, built on the fly (no downloads), in float32 so backends can be compared
tightly. Issue 28 added the path Qwen3 takes on a GPU: a wider tiny Qwen3 (`WIDE`: head_dim 64, the smoke base's
SFT) in bfloat16, HF against vLLM with a bfloat16 tolerance (`BF16_RTOL`); a weight sync checked through
`generate()` with vLLM's prefix cache on (a stale prefix would give log-probs of neither model); and TRL's
colocated engine after its own weight sync. The engines of the module run one at a time (`engines`).
The tests at the end run on CPU: the vLLM backend's calls against a stand-in engine (wake-up order, the prefix
cache reset after a sync, engine arguments), the TRL rollout's sleep-mode calls, the bfloat16 tolerance against HF
on CPU, that the sync test's perturbation is large enough for a stale prefix to fail it, and the benchmark's
bandwidth table.
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
# A tiny Qwen3 whose attention takes the kernels Qwen3-4B's does on a GPU (bfloat16 and Qwen3's head_dim 64 and up:
# FlashAttention in vLLM; float32 takes the FlexAttention fallback, as vLLM's FlashAttention backend supports float16
# and bfloat16 only), with the smoke base's tokenizer and SFT.
WIDE = dict(
    model__tiny__hidden_size=256,
    model__tiny__num_layers=2,
    model__tiny__num_heads=4,
    model__tiny__num_kv_heads=2,
    model__tiny__head_dim=64,
    model__tiny__intermediate_size=512,
)
# bfloat16 tolerance on a log-prob: |a - b| <= BF16_RTOL * (1 + |log p|). bfloat16 keeps 8 significant bits (unit
# roundoff 2^-9 = 0.002): rounding the weights and every activation perturbs each logit by a fraction of a percent of
# the logit gaps, so a token's log-prob moves in proportion to its size (a log-prob of -20 is a gap of 20 logits).
# Measured on CPU (test_bf16_tolerance_admits_hf_bfloat16_on_cpu), HF in bfloat16 against float32 on the WIDE model:
# at most 0.035 * (1 + |log p|) over 1158 tokens (0.017 on the model's own greedy tokens). Two bfloat16
# implementations (vLLM's and HF's) each that far from float32 differ by at most 0.07 (1 + |log p|); 0.1 leaves room
# for the GPU kernels' other summation orders, and a missed weight sync moves log-probs by far more (the
# perturbation below moves some sampled tokens' log-probs by far more than the tolerance: test_a_stale_prefix_...).
BF16_RTOL = 0.1
# The weight change of the sync tests: every weight times (1 + N(0, 1)), seeded. Smaller changes left a stale prefix
# inside the tolerance (test_a_stale_prefix_... on CPU: with 0.1 and 0.3 a prefix of the old weights moved the sampled
# tokens' log-probs by 0.08-0.13 against a tolerance of 0.2-0.27; with 1.0 by up to 9 on tokens of log-prob near 0).
PERTURB = 1.0


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


class Engines:
    """The module's vLLM engines, one at a time: asking for another kind closes the one that runs (`close()`: engine
    core, vllm's distributed state, torch's cache), so the next starts in the memory it gave back."""

    def __init__(self):
        self.key, self.policy = None, None

    def get(self, key: str, path, dtype: str):
        from helpers.policy_vllm import VLLMPolicy

        if self.key != key:
            self.close()
            self.policy = VLLMPolicy.from_pretrained(
                path,
                device="cuda",
                dtype=dtype,
                gpu_memory_utilization=0.2,
                max_model_len=1024,
                enable_sleep_mode=True,
                enforce_eager=True,
            )
            self.key = key
        return self.policy

    def close(self):
        if self.policy is not None:
            self.policy.close()
        self.key, self.policy = None, None


@pytest.fixture(scope="module")
def engines():
    e = Engines()
    yield e
    e.close()


@pytest.fixture
def vllm_policy(tiny, engines):
    """The smoke model's float32 engine (kept for the tests that follow while they ask for the same one)."""
    return engines.get("smoke-float32", tiny[1], "float32")


@pytest.fixture(scope="module")
def wide(tiny):
    """The WIDE tiny Qwen3 (head_dim 64), SFT'd as the smoke base is, in the same results folder; test tasks."""
    cfg = config.load("smoke", **WIDE)
    return cfg, base_model.path_of(cfg), tiny[2]


def bf16_close(got, ref, what: str = "") -> None:
    """Every log-prob of `got` within the bfloat16 tolerance of `ref` (see BF16_RTOL)."""
    for g, r in zip(got, ref, strict=True):
        g, r = np.asarray(g, dtype=float), np.asarray(r, dtype=float)
        assert g.shape == r.shape
        excess = np.abs(g - r) - BF16_RTOL * (1 + np.abs(r))
        assert (excess <= 0).all(), (
            f"{what}: log-probs differ beyond the bfloat16 tolerance by {excess.max():.3g}"
        )


def perturb(model, scale: float = PERTURB, seed: int = 0) -> None:
    """Change every weight in place: times (1 + scale N(0, 1)), drawn on the CPU from `seed` (the same on any device)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + scale * torch.randn(p.shape, generator=gen).to(p.device, p.dtype))


def last_reply_prompts(trajs) -> list[list[int]]:
    """Each trajectory's conversation up to its last reply: multi-turn prompts of several KV blocks."""
    out = []
    for t in trajs:
        m = t.gen_mask
        starts = [i for i in range(1, len(m)) if m[i] and not m[i - 1]]
        out.append(t.token_ids[: starts[-1]])
    return out


def first_divergence(a: list[int], b: list[int]) -> int | None:
    # both stop at end-of-turn (kept) or at the same max_new_tokens, so one cannot be a strict prefix of the other
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


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
    cfg = config.load(
        "smoke",
        model__device="cuda",
        train__lr=3e-2,
        train__tasks_per_step=8,
        train__group_size=8,
        train__minibatch_size=64,
    )
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
        trajs = rollout(
            vllm_policy,
            cfg.env.name,
            tasks,
            cfg.env.frozenlake.t_max,
            cfg.train.group_size,
            sampling,
            seed=step,
            step_quality=False,
        )
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
    trajs = rollout(
        HFPolicy(model, tok),
        cfg.env.name,
        tasks[:4],
        cfg.env.frozenlake.t_max,
        4,
        Sampling.from_config(cfg.sampling),
        seed=0,
        step_quality=False,
    )
    for i, t in enumerate(trajs):
        t.reward, t.exhausted = float(i % 2), False  # non-zero advantages in every group
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    for _ in range(3):
        train.ppo_update(model, ref, opt, trajs, cfg, np.random.default_rng(0))
    unchanged = [n for n, p in model.named_parameters() if torch.equal(before[n], p.detach())]
    assert unchanged == [] and {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.gpu
@pytest.mark.vllm
def test_bf16_vllm_matches_hf_with_head_dim_64(wide, engines):
    """Qwen3's GPU path: bfloat16 weights and head_dim 64 (vLLM's FlashAttention), HF on CUDA against vLLM, both
    against HF in float32. Teacher-forced log-probs over whole multi-turn conversations within the bfloat16
    tolerance; greedy continuations the same token for token, or parting only where float32 itself puts the two
    tokens within the tolerance of each other (a near tie that bfloat16 may break either way)."""
    cfg, path, tasks = wide
    hf32 = HFPolicy.from_pretrained(path, device="cuda", dtype="float32")
    hf16 = HFPolicy.from_pretrained(path, device="cuda", dtype="bfloat16")
    vl = engines.get("wide-bfloat16", path, "bfloat16")
    ref = greedy_rollout(hf32, cfg, tasks)
    assert any(t.n_turns > 1 for t in ref) and max(len(t.token_ids) for t in ref) > 128  # several KV blocks
    prompts = [t.token_ids[: t.prompt_len] for t in ref]
    conts = [t.token_ids[t.prompt_len :] for t in ref]
    lp32 = hf32.score(prompts, conts)
    bf16_close(hf16.score(prompts, conts), lp32, "HF bfloat16 vs float32")
    bf16_close(vl.score(prompts, conts), lp32, "vLLM bfloat16 vs HF float32")
    long = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=16, seed=0)
    ps = last_reply_prompts(ref)
    agreed = 0
    for p, gv, gh in zip(ps, vl.generate(ps, long), hf16.generate(ps, long), strict=True):
        k = first_divergence(gv.token_ids, gh.token_ids)
        same = gv.token_ids[:k] if k is not None else gv.token_ids
        agreed += len(same)
        if k is not None:  # a near tie in float32, or a real disagreement
            a, b = hf32.score([p + same, p + same], [[gv.token_ids[k]], [gh.token_ids[k]]])
            assert abs(a[0] - b[0]) <= BF16_RTOL * (1 + abs(max(a[0], b[0]))), f"greedy tokens part at {k}"
        if same:
            bf16_close([gv.logprobs[: len(same)]], hf32.score([p], [same]), "vLLM's sampled log-probs")
    assert agreed >= len(ps), "greedy continuations agree on almost nothing"


@pytest.mark.gpu
@pytest.mark.vllm
@pytest.mark.parametrize("via", ["sync_weights", "wake_up", "sleep_wake"])
def test_weight_sync_through_generate_with_the_prefix_cache(wide, engines, monkeypatch, via):
    """`generate` on a prompt fills vLLM's prefix cache; the weights change; the kit's sync path pushes them
    (`sync_weights` as `rollout_policy_for` does, `wake_up(model)` on an awake engine, or the RL loop's sleep /
    update / wake); `generate` on the same prompt must give the log-probs of a fresh HF forward of the NEW weights
    and must not reuse the cached prefix. A stale prefix would give the old prompt keys and values under new
    weights: log-probs of neither model (test_a_stale_prefix_would_fail_the_sync_test measures how far off)."""
    from helpers.backends import after_update, before_update

    cfg, path, tasks = wide
    vl = engines.get("wide-bfloat16", path, "bfloat16")
    model, tok = models.load_trainable(path, device="cuda")
    vl.sync_weights(model)  # start from the files' weights whatever an earlier test pushed
    ps = last_reply_prompts(greedy_rollout(HFPolicy(model, tok), cfg, tasks[:3]))
    seen: list = []  # every RequestOutput of the kit's generate calls: how many prompt tokens the cache served
    real_generate = vl.llm.generate
    monkeypatch.setattr(vl.llm, "generate", lambda *a, **k: seen.append(out := real_generate(*a, **k)) or out)
    cached = lambda: [getattr(o, "num_cached_tokens", None) for o in seen[-1]]  # noqa: E731
    greedy = Sampling(
        temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0
    )  # seeded; hot, so not only sure tokens
    vl.generate(ps, greedy)
    vl.generate(ps, greedy)  # the same prompts again: served from the prefix cache
    if None not in cached():
        assert all(n > 0 for n in cached()), f"the prefix cache is not in use: {cached()}"
    perturb(model)
    if via == "sync_weights":
        vl.sync_weights(model)
    elif via == "wake_up":
        vl.wake_up(model)  # awake: syncs without a sleep (whose own reset would hide a missing one)
    else:
        before_update(vl)
        after_update(vl, model)
    new = vl.generate(ps, greedy)
    if None not in cached():
        assert cached() == [0] * len(ps), f"prompt tokens served from before the sync: {cached()}"
    hf_new = HFPolicy(model, tok)
    ref = hf_new.score(ps, [g.token_ids for g in new])
    bf16_close([g.logprobs for g in new], ref, f"after the sync ({via})")
    was = HFPolicy(models.load(path, device="cuda")[0], tok).score(ps, [g.token_ids for g in new])
    moved = max(abs(a - b) for x, y in zip(ref, was, strict=True) for a, b in zip(x, y, strict=True))
    assert moved > 5 * BF16_RTOL, (
        "the perturbation hardly moved the log-probs: the test would not see a stale cache"
    )
    again = vl.generate(ps, greedy)  # the cache refilled with the new weights' keys and values
    assert [g.token_ids for g in again] == [g.token_ids for g in new]
    bf16_close([g.logprobs for g in again], ref, "from the refilled cache")


@pytest.mark.gpu
@pytest.mark.vllm
def test_trl_vllm_sync_moves_the_engine(tiny, engines, tmp_path):
    """The TRL path's engine (TRL's colocated `LLM`, sleep mode on, as `--vllm --vllm-sleep-mode` runs it): the kit's
    rollout policy over it gives the trainer's log-probs; after the trainer's weights change, the next rollout
    (whose `_policy` has TRL push the weights, `VLLMGeneration.sync_weights`, which resets the prefix cache) gives
    the new ones."""
    from helpers import train_trl

    engines.close()  # TRL builds its own engine in this process
    cfg, path, tasks = tiny
    cfg = config.load(
        "smoke", model__device="cuda", model__max_model_len=512, model__gpu_memory_utilization=0.2
    )
    trainer = train_trl.build_trainer(
        cfg, "full", max_steps=1, output_dir=tmp_path / "trl", use_vllm=True, vllm_sleep_mode=True
    )
    try:
        tok = trainer.processing_class
        probe = greedy_rollout(HFPolicy.from_pretrained(path, device="cuda"), cfg, tasks[:3])
        ps = last_reply_prompts(probe)
        hot = Sampling(
            temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0
        )  # processed = raw log-probs at T=1
        with trainer.kit_rollout._policy(trainer) as policy:
            before = policy.generate(ps, hot)
        model = trainer.model
        ref_before = HFPolicy(model, tok).score(ps, [g.token_ids for g in before])
        bf16_close([g.logprobs for g in before], ref_before, "TRL's engine before the change")
        perturb(model)
        with trainer.kit_rollout._policy(trainer) as policy:
            after = policy.generate(ps, hot)
        ref_after = HFPolicy(model, tok).score(ps, [g.token_ids for g in after])
        bf16_close([g.logprobs for g in after], ref_after, "TRL's engine after its sync")
        on_old = HFPolicy(models.load(path, device="cuda")[0], tok).score(ps, [g.token_ids for g in after])
        moved = max(
            abs(a - b) for x, y in zip(ref_after, on_old, strict=True) for a, b in zip(x, y, strict=True)
        )
        assert moved > 5 * BF16_RTOL, "the engine's outputs did not move with the trainer's weights"
    finally:
        from helpers.policy_vllm import VLLMPolicy

        VLLMPolicy(trainer.vllm_generation.llm, trainer.processing_class).close()  # shut TRL's engine down
        del trainer


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
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=worker),
            engine_core=types.SimpleNamespace(shutdown=lambda: calls.append("shutdown")),
        )

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self, tags):
        self.calls.append(("wake_up", tuple(tags)))

    reset_result = True  # vLLM's answer: False when blocks are still held by running requests

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")
        return self.reset_result


def test_wake_up_empties_torch_cache_before_vllm_takes_memory_back(monkeypatch):
    from helpers import policy
    from helpers.policy_vllm import VLLMPolicy

    calls: list = []
    monkeypatch.setattr(policy.gc, "collect", lambda: calls.append("gc"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # a process whose engine uses the GPU
    tok = types.SimpleNamespace(eos_token_id=2)
    model = torch.nn.Linear(2, 2)
    for level in (1, 2):
        calls.clear()
        policy = VLLMPolicy(_FakeLLM(calls), tok, sleep_level=level)
        policy.sleep()
        policy.wake_up(model)
        assert calls == [
            ("sleep", level),
            "gc",
            "empty_cache",
            ("wake_up", ("weights",)),
            ("load_weights", "weight"),
            ("load_weights", "bias"),
            "reset_prefix_cache",
            "gc",
            "empty_cache",
            ("wake_up", ("kv_cache",)),
        ]
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
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # a process whose engine uses the GPU
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


def test_without_cuda_closing_a_policy_runs_no_full_collection(monkeypatch):
    """On CPU a closed policy's tensors go with their last reference: no gc.collect (a walk over every object alive,
    once per closed policy), and torch's cache is left alone."""
    from helpers import policy

    calls: list = []
    monkeypatch.setattr(policy.gc, "collect", lambda: calls.append("gc"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    policy.release_torch_cache()
    assert calls == []


def test_sync_weights_resets_the_prefix_cache_after_loading_and_fails_if_refused():
    """Issue 28: the kit's sync pushes every tensor, then resets vLLM's prefix cache (after the weights, never
    before: a reset first would let nothing stale in, but a generate between the two would); vLLM's
    `reset_prefix_cache()` answers False when blocks are still held, and the sync then fails instead of leaving
    stale keys and values in the cache."""
    from helpers.policy_vllm import VLLMPolicy

    calls: list = []
    policy = VLLMPolicy(_FakeLLM(calls), types.SimpleNamespace(eos_token_id=2))
    assert policy.sync_weights(torch.nn.Linear(2, 2)) == 2
    assert calls == [("load_weights", "weight"), ("load_weights", "bias"), "reset_prefix_cache"]
    calls.clear()
    policy.wake_up(torch.nn.Linear(2, 2))  # awake: wake_up(model) is a sync, with its reset
    assert calls[-1] == "reset_prefix_cache"
    refused = _FakeLLM(calls)
    refused.reset_result = False
    with pytest.raises(RuntimeError, match="prefix cache"):
        VLLMPolicy(refused, types.SimpleNamespace(eos_token_id=2)).sync_weights(torch.nn.Linear(2, 2))


def test_the_trl_rollout_has_trl_push_the_weights_after_a_level_2_sleep():
    """The TRL path with sleep mode (`KitRollout._policy`): TRL's engine sleeps at level 2 between rollouts (weights
    gone), so the rollout has TRL push the trainer's weights (`sync_weights`, which resets the prefix cache), wakes
    the KV cache, and puts the engine back to sleep after; without sleep mode TRL synced before the call."""
    from helpers.train_trl import KitRollout

    calls: list = []
    llm = types.SimpleNamespace(
        wake_up=lambda tags: calls.append(("wake_up", tuple(tags))),
        sleep=lambda level: calls.append(("sleep", level)),
    )

    def sync():
        calls.append("sync_weights")
        gen._llm_weights_sleeping = False

    gen = types.SimpleNamespace(
        enable_sleep_mode=True, _llm_weights_sleeping=True, llm=llm, sync_weights=sync
    )
    trainer = types.SimpleNamespace(
        use_vllm=True, vllm_generation=gen, args=types.SimpleNamespace(vllm_max_model_length=512)
    )
    rollout_fn = KitRollout.__new__(KitRollout)
    rollout_fn.tokenizer, rollout_fn.mode = types.SimpleNamespace(eos_token_id=2), "full"
    rollout_fn.chat = types.SimpleNamespace(kw={})
    for _ in range(2):  # every rollout: the weights slept at level 2 after the previous one
        calls.clear()
        with rollout_fn._policy(trainer) as policy:
            assert calls == ["sync_weights", ("wake_up", ("kv_cache",))] and not policy.owns_llm
        assert calls[-1] == ("sleep", 2) and gen._llm_weights_sleeping
    calls.clear()
    gen.enable_sleep_mode, gen._llm_weights_sleeping = False, False
    with rollout_fn._policy(trainer):
        pass
    assert calls == []


def test_a_trl_without_its_private_sleep_flag_still_gets_the_weights_pushed():
    """`_llm_weights_sleeping` is TRL 1.16's private attribute: a TRL without it counts as asleep, so the rollout has
    TRL push the weights rather than roll out on weights a level-2 sleep discarded."""
    from helpers.train_trl import weights_asleep

    assert weights_asleep(types.SimpleNamespace())
    assert weights_asleep(types.SimpleNamespace(_llm_weights_sleeping=True))
    assert not weights_asleep(types.SimpleNamespace(_llm_weights_sleeping=False))


def test_trl_pushes_the_weights_then_resets_the_prefix_cache():
    """TRL's own colocated sync (the installed trl, `VLLMGeneration.sync_weights`) against a stand-in engine: every
    parameter through the model runner's `load_weights`, then `reset_prefix_cache()`."""
    vllm_generation = pytest.importorskip("trl.generation.vllm_generation")
    calls: list = []
    gen = vllm_generation.VLLMGeneration.__new__(vllm_generation.VLLMGeneration)
    gen.mode, gen.enable_sleep_mode, gen.llm = "colocate", False, _FakeLLM(calls)
    gen.accelerator = types.SimpleNamespace(is_main_process=True)
    gen._iter_named_params = lambda: iter([("w", torch.zeros(1)), ("b", torch.zeros(1))])
    gen.sync_weights()
    assert calls == [("load_weights", "w"), ("load_weights", "b"), "reset_prefix_cache"]


def test_bf16_tolerance_admits_hf_bfloat16_on_cpu(wide):
    """BF16_RTOL's calibration: HF in bfloat16 on CPU against float32 on the WIDE model, teacher-forced over greedy
    multi-turn conversations, within half the tolerance (room for a second bfloat16 implementation, vLLM's)."""
    cfg, path, tasks = wide
    f32 = HFPolicy.from_pretrained(path, device="cpu", dtype="float32")
    b16 = HFPolicy.from_pretrained(path, device="cpu", dtype="bfloat16")
    trajs = greedy_rollout(f32, cfg, tasks)
    prompts = [t.token_ids[: t.prompt_len] for t in trajs]
    conts = [t.token_ids[t.prompt_len :] for t in trajs]
    ref, got = f32.score(prompts, conts), b16.score(prompts, conts)
    ratio = max(
        abs(g - r) / (1 + abs(r)) for x, y in zip(got, ref, strict=True) for g, r in zip(x, y, strict=True)
    )
    assert 0 < ratio <= BF16_RTOL / 2, ratio


def test_a_stale_prefix_would_fail_the_sync_test(wide):
    """The sync test's perturbation is large enough: on CPU, HF with the prompt's keys and values computed by the
    OLD weights and the rest by the NEW ones (what a prefix cache kept across a sync serves) gives the new greedy
    tokens log-probs outside the bfloat16 tolerance of the new weights' own forward."""
    cfg, path, tasks = wide
    old, tok = models.load(path)
    new, _ = models.load(path)
    perturb(new)
    ps = last_reply_prompts(greedy_rollout(HFPolicy(old, tok), cfg, tasks[:3]))
    gens = HFPolicy(new, tok).generate(ps, Sampling(temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0))
    worst = 0.0
    with torch.no_grad():
        for p, g in zip(ps, gens, strict=True):
            cache = old(torch.tensor([p[:-1]]), use_cache=True).past_key_values  # the cached prefix
            ids = torch.tensor([[p[-1], *g.token_ids[:-1]]])
            logits = new(ids, past_key_values=cache, use_cache=True).logits[0].float()
            stale = torch.log_softmax(logits, -1)[torch.arange(len(g.token_ids)), torch.tensor(g.token_ids)]
            excess = np.abs(stale.numpy() - np.array(g.logprobs)) - BF16_RTOL * (1 + np.abs(g.logprobs))
            worst = max(worst, float(excess.max()))
    assert worst > 0, "a stale prefix would pass the sync test's tolerance"


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
