"""Rollout throughput of the vLLM backend against the HF backend on a GPU, and the achieved decode bandwidth.

Both backends run the kit's lock-step rollout on the same FrozenLake tasks with a Qwen3-4B-shaped model with random
weights (built from a `Qwen3Config` with Qwen3-4B's sizes; vLLM gets the same config with `load_format="dummy"`),
so nothing is downloaded. The tokenizer is the smoke profile's tiny one (built on the fly): random weights emit
tokens it does not know, which decode to nothing, so every action is invalid and every episode runs its whole
budget with full-length turns: both backends do the same amount of work.

Reported per backend: generated tokens/s of the rollout, and the decode bandwidth: bytes of weights read per decode
step (every parameter once, in the model's dtype; KV-cache reads not counted, so it is a lower bound) times decode
steps per second, over the GPU's peak memory bandwidth (a table keyed by device name; `--peak-gbs` overrides).
The decode figure comes from a pure decode call (`--decode-batch` prompts, `--decode-tokens` new tokens each),
the way memory-bound decoding is usually measured; the rollout figure counts the lock-step's decode steps (the
longest generation of every turn) over the whole rollout time, prefill and environment included.

    python benchmarks/rollout_vllm.py --tasks 16 --samples 8
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

# `python benchmarks/rollout_vllm.py` puts benchmarks/, not the repo root, first on the path: add the root so the
# kit imports without `pip install -e .`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import base_model, config
from helpers.envs import load_tasks, settings
from helpers.policy import HFPolicy, Sampling
from helpers.rollout import rollout, summarize

# Qwen3-4B's config.json (hub, Qwen/Qwen3-4B)
QWEN3_4B = dict(
    vocab_size=151936,
    hidden_size=2560,
    intermediate_size=9728,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)

# Peak HBM/GDDR bandwidth in GB/s by device-name fragment, most specific first (vendor data sheets): the first
# fragment the device name contains wins, so a fragment must come before every fragment it contains ("GH200"
# before "H200", "L40S" before "L40" before "L4"; tests/test_gpu.py checks the order).
PEAK_GBS = [
    ("GH200", 4000.0),  # GH200 480GB (HBM3); the 144GB HBM3e version has 4900
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5 80GB HBM3
    ("H800", 3350.0),
    ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),  # 40GB
    ("L40S", 864.0),
    ("L40", 864.0),
    ("A10G", 600.0),
    ("L4", 300.0),
    ("RTX 4090", 1008.0),
]


def peak_bandwidth(device_name: str, override: float | None = None) -> float | None:
    """Peak memory bandwidth (GB/s) of the named device, or None when the table does not know it."""
    if override is not None:
        return override
    for fragment, gbs in PEAK_GBS:
        if fragment.lower() in device_name.lower():
            return gbs
    return None


def write_model_dir(tokenizer_dir: Path, out: Path, dtype: str) -> Path:
    """A folder with the Qwen3-4B-shaped config and the tiny tokenizer (vLLM loads it with dummy weights)."""
    from transformers import AutoTokenizer, Qwen3Config

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    cfg = Qwen3Config(
        **QWEN3_4B,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.pad_token_id,
        dtype=dtype,
    )
    cfg.architectures = ["Qwen3ForCausalLM"]
    out.mkdir(parents=True, exist_ok=True)
    cfg.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def weight_bytes(n_params: int, dtype: str) -> int:
    return n_params * torch.empty((), dtype=getattr(torch, dtype)).element_size()


def count_params(cfg: dict) -> int:
    h, i, L, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    per_layer = (
        h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * cfg["head_dim"]
    )  # attn, MLP, norms, q/k norms
    return L * per_layer + v * h + h  # tied embedding / LM head, final norm


def decode_steps(trajs) -> int:
    """Forward passes the lock-step decode makes: per turn, the longest generation of that turn."""
    longest: dict[int, int] = {}
    for t in trajs:
        for k, (a, b) in enumerate(t.turn_spans()):
            longest[k] = max(longest.get(k, 0), b - a)
    return sum(longest.values())


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure_rollout(policy, cfg, tasks, samples: int, sampling: Sampling, seed: int) -> dict:
    _sync()
    t0 = time.perf_counter()
    trajs = rollout(
        policy,
        cfg.env.name,
        tasks,
        cfg.env.frozenlake.t_max,
        samples,
        sampling,
        seed=seed,
        step_quality=False,
    )
    _sync()
    dt = time.perf_counter() - t0
    s = summarize(trajs)
    return {
        "seconds": dt,
        "trajectories": len(trajs),
        "generated_tokens": s["generated_tokens"],
        "gen_tokens_per_s": s["generated_tokens"] / dt,
        "decode_steps": decode_steps(trajs),
        "mean_turns": s["mean_turns"],
    }


def measure_decode(generate, batch: int, n_tokens: int) -> dict:
    """Time one call that decodes `n_tokens` for `batch` short prompts (memory-bound decoding)."""
    prompts = [[1 + (i % 50), 2, 3, 4] for i in range(batch)]
    generate(prompts[:2], 4)  # warm-up
    _sync()
    t0 = time.perf_counter()
    produced = generate(prompts, n_tokens)
    _sync()
    dt = time.perf_counter() - t0
    return {"seconds": dt, "steps": max(produced), "steps_per_s": max(produced) / dt}


def run_hf(model_dir: Path, dtype: str, cfg, tasks, args, sampling, device: str = "cuda") -> dict:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            AutoConfig.from_pretrained(str(model_dir)), dtype=getattr(torch, dtype)
        )
    model.eval()
    policy = HFPolicy(model, tok, name="hf")
    measure_rollout(policy, cfg, tasks[:2], 2, sampling, args.seed)  # warm-up
    r = measure_rollout(policy, cfg, tasks, args.samples, sampling, args.seed)
    policy.reset_cache()

    def generate(prompts, n):
        gens = policy.generate(prompts, Sampling(1.0, 1.0, n, seed=0))
        policy.reset_cache()
        return [len(g.token_ids) for g in gens]

    r["decode"] = measure_decode(generate, args.decode_batch, args.decode_tokens)
    r["n_params"] = sum(p.numel() for p in model.parameters())
    policy = model = None  # free the GPU for the vLLM engine
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return r


def run_vllm(model_dir: Path, dtype: str, cfg, tasks, args, sampling) -> dict:
    from vllm import SamplingParams

    from helpers.policy_vllm import VLLMPolicy, llm_defaults

    eager = {"enforce_eager": True} if args.enforce_eager else {}  # else KIT_VLLM_ENFORCE_EAGER decides
    policy = VLLMPolicy.from_pretrained(
        model_dir,
        device="cuda",
        dtype=dtype,
        name="vllm",
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        load_format="dummy",
        **eager,
    )
    measure_rollout(policy, cfg, tasks[:2], 2, sampling, args.seed)  # warm-up
    r = measure_rollout(policy, cfg, tasks, args.samples, sampling, args.seed)
    r["enforce_eager"] = bool({**llm_defaults(), **eager}.get("enforce_eager", False))

    def generate(prompts, n):
        params = SamplingParams(
            max_tokens=n, min_tokens=n, ignore_eos=True, temperature=1.0, seed=0, detokenize=False
        )
        outs = policy.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return [len(o.outputs[0].token_ids) for o in outs]

    r["decode"] = measure_decode(generate, args.decode_batch, args.decode_tokens)
    return r


def bandwidth(r: dict, bytes_per_step: int, peak: float | None) -> dict:
    out = {}
    for what, steps, secs in (
        ("decode", r["decode"]["steps"], r["decode"]["seconds"]),
        ("rollout", r["decode_steps"], r["seconds"]),
    ):
        gbs = bytes_per_step * steps / secs / 1e9
        out[what] = {"GB/s": gbs, "fraction_of_peak": gbs / peak if peak else None}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument(
        "--max-new-tokens", type=int, default=32, help="tokens per turn (every turn runs to the limit)"
    )
    ap.add_argument("--t-max", type=int, default=6, help="turns per episode")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--decode-batch", type=int, default=1)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM without CUDA graphs or compilation: a faster start, slower decoding (default: "
        "KIT_VLLM_ENFORCE_EAGER)",
    )
    ap.add_argument("--peak-gbs", type=float, default=None, help="the GPU's peak memory bandwidth in GB/s")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        print("rollout_vllm: no CUDA device; this benchmark needs a GPU (benchmarks/rollout.py runs on CPU)")
        return 2
    device = torch.cuda.get_device_name(0)
    peak = peak_bandwidth(device, args.peak_gbs)
    cfg = config.load(
        "smoke", env__frozenlake__t_max=args.t_max, sampling__max_new_tokens=args.max_new_tokens
    )
    tasks = load_tasks(cfg.env.name, "test", n=args.tasks, seed=args.seed, **settings(cfg))
    sampling = Sampling(1.0, 1.0, args.max_new_tokens)
    n_params = count_params(QWEN3_4B)
    bytes_per_step = weight_bytes(n_params, args.dtype)
    results: dict = {
        "device": device,
        "peak_GB/s": peak,
        "dtype": args.dtype,
        "n_params": n_params,
        "weight_bytes": bytes_per_step,
        "tasks": args.tasks,
        "samples": args.samples,
        "t_max": args.t_max,
        "max_new_tokens": args.max_new_tokens,
    }
    with tempfile.TemporaryDirectory() as tmp:
        tiny = base_model.path_of(config.load("smoke"))  # only its tokenizer is used
        model_dir = write_model_dir(tiny, Path(tmp) / "qwen3-4b-shaped", args.dtype)
        results["hf"] = run_hf(model_dir, args.dtype, cfg, tasks, args, sampling)
        if results["hf"]["n_params"] != n_params:
            print(f"note: counted {n_params} parameters, the HF model has {results['hf']['n_params']}")
        results["hf"]["bandwidth"] = bandwidth(results["hf"], bytes_per_step, peak)
        vllm_note = None
        if args.skip_vllm:
            vllm_note = "skipped (--skip-vllm)"
        else:
            try:
                import vllm  # noqa: F401
            except ImportError:
                vllm_note = "skipped: vllm is not installed (pip install -r requirements-gpu.txt)"
        if vllm_note is None:
            results["vllm"] = run_vllm(model_dir, args.dtype, cfg, tasks, args, sampling)
            results["vllm"]["bandwidth"] = bandwidth(results["vllm"], bytes_per_step, peak)
        results["vllm_note"] = vllm_note

    print(
        f"{device}: Qwen3-4B-shaped model ({n_params / 1e9:.2f} B parameters, {args.dtype}, random weights), "
        f"{args.tasks} tasks x {args.samples} samples x {args.t_max} turns x {args.max_new_tokens} tokens; "
        f"peak bandwidth {peak or 'unknown (use --peak-gbs)'} GB/s"
    )
    for name in ("hf", "vllm"):
        if name not in results:
            continue
        r = results[name]
        bw = r["bandwidth"]
        frac = {
            k: (f"{v['fraction_of_peak']:.1%}" if v["fraction_of_peak"] is not None else "n/a")
            for k, v in bw.items()
        }
        print(
            f"{name:5s} rollout {r['seconds']:7.2f} s  {r['gen_tokens_per_s']:9.1f} gen tokens/s  | decode "
            f"batch {args.decode_batch}: {r['decode']['steps_per_s']:7.1f} steps/s = {bw['decode']['GB/s']:7.1f} "
            f"GB/s ({frac['decode']} of peak)  | rollout decode {bw['rollout']['GB/s']:7.1f} GB/s "
            f"({frac['rollout']})"
        )
    if "vllm" in results:
        eager = (
            " (vLLM eager: no CUDA graphs, slower than a full engine)"
            if results["vllm"]["enforce_eager"]
            else ""
        )
        print(
            f"vLLM / HF rollout tokens/s: {results['vllm']['gen_tokens_per_s'] / results['hf']['gen_tokens_per_s']:.2f}x"
            + eager
        )
    else:
        print(f"vLLM part {results['vllm_note']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
