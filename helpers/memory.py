"""The GPU memory plan of the kit's RL loop: the peak of each phase of a training step, from the model's config.

Arithmetic, not a measurement (nothing has run on a GPU yet). One RL step on one GPU has three phases:

- **rollout**: the trainer's float32 weights, what is not offloaded (AdamW's two moments, the bfloat16 reference, a
  PPO critic with its optimiser), and vLLM's share once it wakes (`model.gpu_memory_utilization` x the GPU);
- **reference**: vLLM asleep, the reference's (and the trainer's, when PPO's old log-probs are recomputed) log-probs
  of the batch without gradients, one micro-batch at a time;
- **update**: weights, AdamW state, gradients, the reference unless offloaded, the critic, and the activations of
  one micro-batch of `train.micro_batch_size` x `model.max_model_len` tokens (the longest the engine admits):
  full-vocabulary logits in `model.dtype`, their float32 copy, log-softmax and its gradient, plus each layer's
  saved tensors (or, with gradient checkpointing, each layer's input and one layer's recomputation).

Gradients are freed after the last optimiser step (`ppo_update`), so the rollout holds none. `choose` tries the
strategies in `STRATEGIES` (nothing offloaded; AdamW state on the CPU around rollouts; the reference on the CPU
except while it scores; gradient checkpointing in the update) and takes the first whose every phase fits, as verl
offloads parameters, gradients and optimiser state of its FSDP workers between phases. A plan that cannot fit
raises `MemoryPlanError` with the numbers and the knobs to change. `python -m helpers.memory --profile gpu
--gpu-gib 79.6` prints the plan of a profile anywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# CUDA context, cuBLAS workspaces and the allocator's fragmentation: an allowance, not measured
OVERHEAD = 2 * GIB


def _qwen3(hidden: int, layers: int, intermediate: int, heads: int, tied: bool) -> dict[str, Any]:
    """A Qwen3 config.json's sizes (8 KV heads of 128, the 151,936-token vocabulary)."""
    return dict(
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        num_attention_heads=heads,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=tied,
    )


# Qwen3's published configs (config.json on the hub), for planning on a machine without the model in its cache
KNOWN: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": _qwen3(1024, 28, 3072, 16, tied=True),
    "Qwen/Qwen3-1.7B": _qwen3(2048, 28, 6144, 16, tied=True),
    "Qwen/Qwen3-4B": _qwen3(2560, 36, 9728, 32, tied=True),
    "Qwen/Qwen3-8B": _qwen3(4096, 36, 12288, 32, tied=False),
}


class MemoryPlanError(RuntimeError):
    """No strategy fits the GPU: the message has the plan's numbers and the knobs to change."""


@dataclass(frozen=True)
class Shape:
    """What the plan needs of a decoder's config (Qwen3's layout: GQA attention with q/k norms, SwiGLU MLP, no
    biases)."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def from_config(cls, c: Any) -> Shape:
        """From a transformers config or its dict (config.json)."""
        get = c.get if isinstance(c, dict) else lambda k, d=None: getattr(c, k, d)
        hidden, heads = int(get("hidden_size")), int(get("num_attention_heads"))
        return cls(
            hidden=hidden,
            layers=int(get("num_hidden_layers")),
            intermediate=int(get("intermediate_size")),
            heads=heads,
            kv_heads=int(get("num_key_value_heads") or heads),
            head_dim=int(get("head_dim") or hidden // heads),
            vocab=int(get("vocab_size")),
            tied=bool(get("tie_word_embeddings", False)),
        )

    @property
    def n_params(self) -> int:
        """Parameters: embeddings, per layer q/k/v/o, q and k norms, the SwiGLU MLP and two norms, the final norm,
        and the LM head unless tied to the embeddings."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        layer = h * q + 2 * h * kv + q * h + 2 * self.head_dim + 3 * h * self.intermediate + 2 * h
        return self.vocab * h * (1 if self.tied else 2) + self.layers * layer + h


@dataclass(frozen=True)
class Strategy:
    """What is moved off the GPU, and whether the update recomputes activations."""

    name: str
    offload_optimizer: bool = False  # AdamW's moments on the CPU outside the update
    offload_reference: bool = False  # the reference on the CPU except while it scores the batch
    checkpointing: bool = False  # gradient checkpointing in the update (HF's, per decoder layer)


STRATEGIES = (
    Strategy("everything on the GPU"),
    Strategy("AdamW state on the CPU around rollouts", offload_optimizer=True),
    Strategy("AdamW state and the reference on the CPU", offload_optimizer=True, offload_reference=True),
    Strategy(
        "offload + gradient checkpointing", offload_optimizer=True, offload_reference=True, checkpointing=True
    ),
)


@dataclass
class Plan:
    """The bytes of each component in each phase, the GPU's bytes, and the strategy."""

    phases: dict[str, dict[str, int]]
    gpu_bytes: int
    strategy: Strategy
    n_params: int
    tokens: int  # tokens of one micro-batch in the update

    def peak(self, phase: str) -> int:
        return sum(self.phases[phase].values())

    @property
    def fits(self) -> bool:
        return all(self.peak(p) <= self.gpu_bytes for p in self.phases)

    def table(self) -> str:
        """The plan as lines: each phase's peak and its parts, in GiB."""
        lines = [
            f"memory plan ({self.n_params / 1e9:.2f} B parameters, {self.gpu_bytes / GIB:.1f} GiB GPU; "
            f"{self.strategy.name}; {self.tokens} tokens per micro-batch):"
        ]
        for phase, parts in self.phases.items():
            mark = "fits" if self.peak(phase) <= self.gpu_bytes else "DOES NOT FIT"
            detail = ", ".join(f"{k} {v / GIB:.1f}" for k, v in parts.items() if v)
            lines.append(f"  {phase:9s} {self.peak(phase) / GIB:6.1f} GiB  {mark:12s} {detail}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "strategy": dataclasses.asdict(self.strategy),
            "gpu_gib": self.gpu_bytes / GIB,
            "n_params": self.n_params,
            "tokens_per_micro_batch": self.tokens,
            "phases": {
                p: {"peak_gib": self.peak(p) / GIB, **{k: v / GIB for k, v in parts.items()}}
                for p, parts in self.phases.items()
            },
        }


def activation_bytes(s: Shape, tokens: int, dtype: str, checkpointing: bool, grad: bool = True) -> int:
    """Activations of one micro-batch of `tokens` tokens (an estimate in the manner of Korthikanti et al. 2022,
    counted for SwiGLU and GQA under autocast). Logits: `model.dtype` logits, the float32 copy and log-softmax that
    `policy.token_logprobs` takes, and (with gradients) their float32 gradient. Per layer, saved for the backward:
    the norms' float32 inputs, the q/k/v/attention outputs and the MLP's gate, up, activation and product in
    `model.dtype`; with checkpointing only each layer's float32 input, plus one layer recomputed."""
    d = DTYPE_BYTES[dtype]
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    logits = s.vocab * (d + 4 + 4 + (4 if grad else 0))
    layer = 2 * 4 * s.hidden + d * (2 * q + 2 * kv + 2 * s.hidden + 4 * s.intermediate)
    if not grad:  # no graph is kept: one layer's tensors at a time
        hidden = layer
    elif checkpointing:
        hidden = s.layers * 4 * s.hidden + layer
    else:
        hidden = s.layers * layer
    return tokens * (logits + hidden)


def plan(cfg, shape: Shape, gpu_bytes: int, strategy: Strategy, critic: bool | None = None) -> Plan:
    """The phases of one RL step of profile `cfg` for a model of `shape` on a GPU of `gpu_bytes`."""
    from helpers import process

    n, d = shape.n_params, DTYPE_BYTES[cfg.model.dtype]
    weights, adam, grads, ref = 4 * n, 8 * n, 4 * n, d * n
    has_critic = process.estimator(cfg.train.algorithm).critic if critic is None else critic
    crit = {"critic weights": 4 * n, "critic AdamW": 8 * n} if has_critic else {}
    vllm = int(cfg.model.gpu_memory_utilization * gpu_bytes) if cfg.model.backend == "vllm" else 0
    tokens = cfg.train.micro_batch_size * cfg.model.max_model_len
    st = strategy
    rollout = {
        "weights (float32)": weights,
        "AdamW state": 0 if st.offload_optimizer else adam,
        "reference": 0 if st.offload_reference else ref,
        **crit,
        "vLLM at wake-up": vllm,
        "overhead": OVERHEAD,
    }
    no_grad = activation_bytes(shape, tokens, cfg.model.dtype, False, grad=False)
    reference = {
        "weights (float32)": weights,
        "AdamW state": 0 if st.offload_optimizer else adam,
        "reference": ref,
        **crit,
        "activations (no grad)": no_grad,
        "overhead": OVERHEAD,
    }
    update = {
        "weights (float32)": weights,
        "AdamW state": adam,
        "gradients": grads,
        "reference": 0 if st.offload_reference else ref,
        **crit,
        "critic gradients": grads if has_critic else 0,
        "activations": activation_bytes(shape, tokens, cfg.model.dtype, st.checkpointing),
        "overhead": OVERHEAD,
    }
    return Plan({"rollout": rollout, "reference": reference, "update": update}, gpu_bytes, st, n, tokens)


def choose(cfg, shape: Shape, gpu_bytes: int, critic: bool | None = None) -> Plan:
    """The first strategy of `STRATEGIES` whose every phase fits; else `MemoryPlanError` naming the knobs."""
    for st in STRATEGIES:
        p = plan(cfg, shape, gpu_bytes, st, critic=critic)
        if p.fits:
            return p
    raise MemoryPlanError(refusal(cfg, p))


def refusal(cfg, p: Plan) -> str:
    """Why the plan cannot fit, with its numbers and the knobs that change them."""
    over = {ph: (p.peak(ph) - p.gpu_bytes) / GIB for ph in p.phases if p.peak(ph) > p.gpu_bytes}
    up = p.phases["update"]
    knobs = [
        f"train.micro_batch_size ({cfg.train.micro_batch_size}) or model.max_model_len ({cfg.model.max_model_len}): "
        f"the update's activations are {up['activations'] / GIB:.1f} GiB for {p.tokens} tokens per micro-batch",
    ]
    if cfg.model.backend == "vllm":
        knobs.append(
            f"model.gpu_memory_utilization ({cfg.model.gpu_memory_utilization}): vLLM's share is "
            f"{p.phases['rollout']['vLLM at wake-up'] / GIB:.1f} GiB at wake-up"
        )
    if up.get("critic weights"):
        knobs.append(
            "train.algorithm / process.algorithms without ppo: its critic is a second model with its own "
            f"AdamW ({(up['critic weights'] + up['critic AdamW'] + up['critic gradients']) / GIB:.1f} GiB)"
        )
    knobs.append(
        "model.name_or_path (a smaller model), or a GPU with more memory; the TRL path "
        "(helpers.train_trl, DeepSpeed ZeRO-3 over several GPUs)"
    )
    return (
        f"the memory plan does not fit one GPU even with {p.strategy.name}: "
        + ", ".join(f"{k} over by {v:.1f} GiB" for k, v in over.items())
        + "\n"
        + p.table()
        + "\nchange: "
        + "; ".join(knobs)
    )


def shape_of(name_or_path: str | Path) -> Shape:
    """The model's shape from its config.json (a local folder, the Hugging Face cache without network), or from
    `KNOWN` for Qwen3's published sizes."""
    path = Path(str(name_or_path))
    if (path / "config.json").is_file():
        return Shape.from_config(json.loads((path / "config.json").read_text()))
    try:
        from transformers import AutoConfig

        return Shape.from_config(AutoConfig.from_pretrained(str(name_or_path), local_files_only=True))
    except (OSError, ValueError):
        if str(name_or_path) in KNOWN:
            return Shape.from_config(KNOWN[str(name_or_path)])
        raise


def gpu_bytes_of(device: str) -> int | None:
    """The total memory of `device`'s GPU, or None without CUDA."""
    import torch

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)


def for_run(cfg, base: str | Path | None = None, gpu_bytes: int | None = None) -> Plan | None:
    """The plan of a run of `cfg` on a GPU of `gpu_bytes` (None: no GPU, no plan): `choose`'s, printed; raises
    `MemoryPlanError`."""
    if gpu_bytes is None:
        return None
    p = choose(cfg, shape_of(base or cfg.model.name_or_path), gpu_bytes)
    print(p.table(), flush=True)
    return p


def check_series(cfg, notebooks: list[str], gpu_bytes: int | None) -> list[str]:
    """Before a series starts (`helpers.run`): the plan of every RL algorithm its notebooks train on this GPU (01 and
    02 `train.algorithm`, 07 each of `process.algorithms`), as printable lines; raises `MemoryPlanError` for the
    first that cannot fit, naming it. Nothing on the CPU (`gpu_bytes` None)."""
    from helpers import process

    if gpu_bytes is None:
        return []
    algorithms = [cfg.train.algorithm] if {"01", "02"} & set(notebooks) else []
    if "07" in notebooks:
        algorithms += [a for a in cfg.process.algorithms if a not in algorithms]
    shape, lines, seen = shape_of(cfg.model.name_or_path), [], set()
    for alg in algorithms:
        critic = process.estimator(alg).critic
        if critic in seen:
            continue
        seen.add(critic)
        try:
            p = choose(cfg, shape, gpu_bytes, critic=critic)
        except MemoryPlanError as e:
            raise MemoryPlanError(f"train.algorithm={alg}: {e}") from None
        lines.append(f"{'with' if critic else 'without'} a critic ({alg}): {p.table()}")
    return lines


def device_of(cfg) -> str:
    """The profile's device, `auto` resolved (cuda when torch sees one)."""
    import torch

    dev = cfg.model.device
    return ("cuda" if torch.cuda.is_available() else "cpu") if dev == "auto" else dev


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.memory --profile gpu --gpu-gib 79.6`: print a profile's plan (and exit 1 if it cannot
    fit)."""
    from helpers import config

    ap = argparse.ArgumentParser(prog="python -m helpers.memory", description=main.__doc__.split(":")[0])
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--gpu-gib", type=float, default=79.6, help="the GPU's memory (default: an 80 GB H100's)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = ap.parse_args(argv)
    over = dict(kv.split("=", 1) for kv in args.set)
    cfg = config.load(args.profile, **{k.replace(".", "__"): _num(v) for k, v in over.items()})
    try:
        p = choose(cfg, shape_of(cfg.model.name_or_path), int(args.gpu_gib * GIB))
    except MemoryPlanError as e:
        print(e)
        return 1
    print(p.table())
    return 0


def _num(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


if __name__ == "__main__":
    raise SystemExit(main())
