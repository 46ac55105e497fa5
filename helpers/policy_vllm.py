"""The vLLM backend of the Policy protocol (vLLM only), and how it runs colocated with training.

`VLLMPolicy` does what `helpers.policy.HFPolicy` does, on vLLM (GPU only):

* `generate` submits token ids (`{"prompt_token_ids": ids}`), never text, so a multi-turn conversation keeps its
  exact ids; it returns each continuation's ids and the sampled tokens' log-probs (`logprobs=0`). Which log-probs
  depends on the engine's `logprobs_mode`: on an engine this module builds (`from_pretrained`) it is vLLM's
  default `raw_logprobs`, the model's own log-prob before temperature and top-p, as HFPolicy returns; on TRL's
  colocated engine (`owns_llm=False`) TRL sets `processed_logprobs`, the log-prob after temperature and
  top-p/top-k. The two agree at temperature 1 and top-p 1 (the paper's sampling and the kit's profiles).
  Generation stops at the tokenizer's end-of-turn token only (`ignore_eos=True, stop_token_ids=[eos]`), exactly
  where HFPolicy stops. vLLM's automatic prefix cache plays the role of HFPolicy's carried KV cache.
* Seeds: request i of a call with `sampling.seed = s` gets its own seed derived from (s, i), so a call is
  reproducible and the rows of a call draw independently (one shared seed would give identical prompts identical
  samples).
* `score` is teacher forcing through prompt log-probs: prompt + continuation go in with `max_tokens=1,
  prompt_logprobs=0`, and the entries of the continuation positions are read off.

Colocated training on one GPU (the `gpu` profile): the trainer and vLLM share the device. Before the optimiser
step vLLM sleeps (`sleep(level=1)` offloads its weights to CPU and drops the KV cache); after it, `wake_up` brings
the memory back and `sync_weights(model)` pushes the trainer's new weights through the model runner's
`load_weights([(name, tensor)])`, then `reset_prefix_cache()` forgets KV entries computed with the old weights.
This is the path TRL 1.16's colocate mode takes (`trl/generation/vllm_generation.py`, `sync_weights`); it needs
the engine in this process, so the policy builds its `LLM` with `VLLM_ENABLE_V1_MULTIPROCESSING=0` (TRL gets the
same from `distributed_executor_backend="external_launcher"`). Before each `wake_up` PyTorch's cached blocks are
handed back to the driver (`gc.collect()`, `torch.cuda.empty_cache()`, as TRL does): vLLM's sleep-mode memory
comes from the driver, not from PyTorch's caching allocator, so memory the optimiser step freed but PyTorch still
caches would otherwise be out of vLLM's reach (an out-of-memory error on wake-up).

`KIT_VLLM_ENFORCE_EAGER=1` in the environment makes every engine the kit builds (here and in `helpers.train_trl`)
skip CUDA-graph capture and compilation (`enforce_eager=True`): slower decoding, a much faster start, which is what
short runs such as `scripts/gpu_check.sh` want.

Which backend a run uses, and the RL loop's hooks around its optimiser step, are `helpers.backends`'.

vllm is imported lazily: this module imports without it, and using the backend without it is a clear error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from helpers import models
from helpers.policy import Closing, Generation, Sampling, release_torch_cache

_SEED_MOD = 2**31 - 1
ENFORCE_EAGER_ENV = "KIT_VLLM_ENFORCE_EAGER"


def llm_defaults() -> dict[str, Any]:
    """Extra `vllm.LLM` arguments set from the environment: `enforce_eager=True` when KIT_VLLM_ENFORCE_EAGER=1."""
    value = os.environ.get(ENFORCE_EAGER_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return {}
    if value in ("1", "true", "yes"):
        return {"enforce_eager": True}
    raise ValueError(f"{ENFORCE_EAGER_ENV} must be 1 or 0, got {value!r}")


def destroy_vllm_distributed() -> None:
    """vllm's model-parallel groups and distributed environment torn down, where vllm has the helpers."""
    try:
        from vllm.distributed import parallel_state
    except ImportError:  # no vllm, or one without the module: nothing of it was set up here
        return
    for name in ("destroy_model_parallel", "destroy_distributed_environment"):
        fn = getattr(parallel_state, name, None)
        if callable(fn):
            fn()


def require_vllm():
    """The `vllm` module, or an ImportError that says how to get it."""
    try:
        import vllm
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(
            "the vLLM backend needs the `vllm` package (a CUDA machine; `pip install -r requirements-gpu.txt` "
            "pins vllm==0.31.0). Use model.backend=hf to run without it."
        ) from e
    return vllm


def request_seeds(seed: int | None, n: int) -> list[int | None]:
    """Per-request seeds for a call of `n` prompts: distinct, stable across processes, None when unseeded."""
    if seed is None:
        return [None] * n
    return [(int(seed) * 1_000_003 + i * 7_919 + 1) % _SEED_MOD for i in range(n)]


class VLLMPolicy(Closing):
    """Policy over a vLLM `LLM` (token ids in, token ids and log-probs out)."""

    def __init__(
        self,
        llm,
        tokenizer,
        name: str = "model",
        chat_kwargs: dict | None = None,
        sleep_level: int = 1,
        owns_llm: bool = True,
        max_context: int | None = None,
    ):
        self.llm = llm
        self.max_context = max_context  # the engine's max_model_len: rollouts end conversations that reach it
        self.tokenizer = tokenizer
        self.name = name
        self.eos_token_id = int(tokenizer.eos_token_id)
        self.chat_kwargs = dict(chat_kwargs or {})
        if sleep_level not in (1, 2):
            raise ValueError(f"sleep_level must be 1 or 2, got {sleep_level!r}")
        self.sleep_level = sleep_level
        self.owns_llm = owns_llm  # False when the LLM belongs to someone else (TRL's colocated engine)
        self.asleep = False

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        device: str = "cuda",
        dtype: str = "bfloat16",
        name: str | None = None,
        gpu_memory_utilization: float = 0.45,
        max_model_len: int = 4096,
        enable_sleep_mode: bool = False,
        seed: int = 0,
        sleep_level: int = 1,
        **llm_kwargs: Any,
    ) -> VLLMPolicy:
        """Build an in-process vLLM engine over a model folder or hub name (same model files as HFPolicy).

        `enable_sleep_mode=True` is needed for `sleep`/`wake_up` (colocated training). Extra keyword arguments go to
        `vllm.LLM` (for example `enforce_eager=True` to skip CUDA-graph capture in short runs; KIT_VLLM_ENFORCE_EAGER=1
        makes that the default).
        """
        if not str(device).startswith("cuda") and device != "auto":
            raise ValueError(
                f"the vLLM backend runs on CUDA only; got device={device!r} (use backend hf on CPU)"
            )
        # The engine must live in this process so its model can take the trainer's weights (see module docstring).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        vllm = require_vllm()
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        llm_kwargs = {**llm_defaults(), **llm_kwargs}
        llm = vllm.LLM(
            model=str(name_or_path),
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_sleep_mode=enable_sleep_mode,
            enable_prefix_caching=True,
            **llm_kwargs,
        )
        if not hasattr(llm.llm_engine, "model_executor"):
            raise RuntimeError(
                "vLLM started its engine in a separate process, so weights cannot be synced in place; "
                "VLLM_ENABLE_V1_MULTIPROCESSING must be 0 before vllm reads its environment"
            )
        return cls(
            llm,
            tokenizer,
            name=name or str(name_or_path),
            chat_kwargs=models.chat_kwargs(tokenizer),
            sleep_level=sleep_level,
            max_context=max_model_len,
        )

    # -------------------------------------------------------------------------------------------- sampling
    def _sampling_params(self, sampling: Sampling, seed: int | None):
        from vllm import SamplingParams

        return SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            seed=seed,
            logprobs=0,
            stop_token_ids=[self.eos_token_id],
            ignore_eos=True,
            detokenize=False,
        )

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling) -> list[Generation]:
        """Sample one continuation per prompt, stopping at end-of-turn or `max_new_tokens`."""
        if not prompt_token_ids:
            return []
        if any(len(p) == 0 for p in prompt_token_ids):
            raise ValueError("generate(): every prompt needs at least one token")
        self._check_awake()
        params = [
            self._sampling_params(sampling, s) for s in request_seeds(sampling.seed, len(prompt_token_ids))
        ]
        outs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompt_token_ids], params, use_tqdm=False
        )
        gens = []
        for out in outs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            lps = [float(pos[tok].logprob) for tok, pos in zip(ids, c.logprobs, strict=True)]
            gens.append(
                Generation(
                    ids,
                    lps,
                    self.tokenizer.decode(ids, skip_special_tokens=True),
                    finished=bool(ids) and ids[-1] == self.eos_token_id,
                )
            )
        return gens

    # -------------------------------------------------------------------------------------------- scoring
    def score(
        self, prompt_token_ids: list[list[int]], continuation_token_ids: list[list[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probs of each continuation token given its prompt (vLLM prompt log-probs)."""
        from vllm import SamplingParams

        if len(prompt_token_ids) != len(continuation_token_ids):
            raise ValueError("score(): need one continuation per prompt")
        if any(len(p) == 0 for p in prompt_token_ids):
            raise ValueError("score(): every prompt needs at least one token")
        self._check_awake()
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0, detokenize=False)
        todo = [i for i, c in enumerate(continuation_token_ids) if c]
        results: list[list[float]] = [[] for _ in prompt_token_ids]
        if not todo:
            return results
        full = [list(prompt_token_ids[i]) + list(continuation_token_ids[i]) for i in todo]
        longest = max(len(f) for f in full)
        if self.max_context is not None and longest + 1 > self.max_context:
            raise ValueError(
                f"score(): a sequence of {longest} tokens does not fit this engine: vLLM needs the prompt plus one "
                f"output token within max_model_len ({self.max_context}); raise model.max_model_len to at least "
                f"{longest + 1} (the kit's rollouts on an engine of the same max_model_len always fit)"
            )
        outs = self.llm.generate([{"prompt_token_ids": f} for f in full], params, use_tqdm=False)
        for i, f, out in zip(todo, full, outs, strict=True):
            start = len(prompt_token_ids[i])  # entry j holds log p(f[j] | f[:j]); entry 0 is None
            results[i] = [float(out.prompt_logprobs[j][f[j]].logprob) for j in range(start, len(f))]
        return results

    # -------------------------------------------------------------------------------------------- colocation
    def reset_cache(self) -> None:
        """Nothing to do: vLLM's prefix cache is keyed by token ids and stays valid until the weights change
        (`sync_weights` resets it). Kept so the RL loop treats both backends alike."""

    def _check_owner(self, what: str) -> None:
        if not self.owns_llm:
            raise RuntimeError(
                f"{what}(): this engine belongs to its creator (TRL), which manages its memory and weights"
            )

    def sleep(self) -> None:
        """Free the GPU for the trainer: level 1 offloads the weights to CPU, level 2 drops them (they are pushed
        again by `sync_weights`); the KV cache is dropped either way."""
        self._check_owner("sleep")
        if not self.asleep:
            self.llm.sleep(level=self.sleep_level)
            self.asleep = True

    def wake_up(self, model=None) -> None:
        """Reallocate the engine's memory; with `model`, load its weights before the KV cache comes back.

        PyTorch's cache is emptied before each part comes back (see the module docstring)."""
        self._check_owner("wake_up")
        if not self.asleep:
            if model is not None:
                self.sync_weights(model)
            return
        if model is None and self.sleep_level == 2:
            raise ValueError("wake_up(): after sleep level 2 the weights are gone; pass the model to load")
        release_torch_cache()
        self.llm.wake_up(tags=["weights"])
        if model is not None:
            self.sync_weights(model)
        release_torch_cache()  # the KV cache is the large part: give it what the trainer freed
        self.llm.wake_up(tags=["kv_cache"])
        self.asleep = False

    def sync_weights(self, model) -> int:
        """Push `model`'s parameters (a Hugging Face model of the same architecture) into the engine, then drop
        the prefix cache. Returns the number of tensors pushed.

        The prefix cache must go: its blocks hold keys and values computed with the old weights, and a later
        `generate` on a prompt that shares a block-aligned prefix with an earlier one would reuse them (stale KV,
        log-probs of neither model). `LLM.sleep` resets it itself, but a sync on an awake engine (the first push
        after building it, `wake_up(model)` on an awake engine) has only this reset. vLLM's
        `LLM.reset_prefix_cache()` returns False and keeps the cache when some blocks are still held by running
        requests (`KVCacheManager.reset_prefix_cache`); `LLM.generate` returns only when its requests are done, so
        that should not happen here, and if it does the sync fails rather than leave stale entries behind."""
        self._check_owner("sync_weights")
        runner_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        n = 0
        with torch.no_grad():
            for pname, param in model.named_parameters():
                runner_model.load_weights([(pname, param.detach())])
                n += 1
        if self.llm.reset_prefix_cache() is False:  # None: an older vllm that returns nothing
            raise RuntimeError(
                "sync_weights(): vLLM refused to reset its prefix cache (blocks still held by running requests), "
                "so KV entries computed with the old weights would be reused"
            )
        return n

    # -------------------------------------------------------------------------------------------- shutdown
    def close(self) -> None:
        """Shut the engine down and give its GPU memory back, so that the next engine (the next model of an
        evaluation, the next RL run in this kernel) can take it; an engine that belongs to TRL is only let go.

        vLLM's `LLM` has no `close`; what releases it (vllm's own tests and examples, vllm 0.31.0): the engine
        core's `shutdown()` (in-process here: `VLLM_ENABLE_V1_MULTIPROCESSING=0`), deleting the `LLM`, vllm's
        distributed state torn down (`destroy_model_parallel`, `destroy_distributed_environment`, which also ends
        the one-process torch.distributed group vLLM made, so the next engine can make its own), then
        `gc.collect()` and `torch.cuda.empty_cache()`. Each step is skipped where this vllm lacks it.
        """
        llm, self.llm = self.llm, None
        if llm is None:
            return
        if self.owns_llm:
            core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            if callable(getattr(core, "shutdown", None)):
                core.shutdown()
            del llm, core
            destroy_vllm_distributed()
        else:
            del llm
        release_torch_cache()

    def _check_awake(self) -> None:
        if self.llm is None:
            raise RuntimeError(f"policy {self.name!r} is closed: its vLLM engine was shut down")
        if self.asleep:
            raise RuntimeError(f"policy {self.name!r}: the vLLM engine is asleep; call wake_up(model) first")
