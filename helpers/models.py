"""Models: the tiny Qwen3-architecture base the cpu tier builds, and loading any model by name or path.

No weights can be downloaded where the kit is developed, so the cpu tier makes its own model:

* a BPE tokenizer trained with `tokenizers` on text the environment itself produces (system prompt,
  observations, actions). Plain BPE merges whole grid rows and whole `<answer>Left</answer>` strings into
  single tokens and then learns badly, so the pre-tokenizer splits every non-letter character, keeps words
  like `Left` whole, and isolates the answer tags and the chat special tokens;
* a Qwen3-style chat template (`<|im_start|>role ... <|im_end|>`) with `{% generation %}` markers, so
  `apply_chat_template(..., return_assistant_tokens_mask=True)` marks the assistant tokens;
* a randomly initialised `Qwen3ForCausalLM` of the profile's size.

Both are saved with `save_pretrained`, so `AutoTokenizer`, `AutoModelForCausalLM` (and vLLM) load them by path.

`model.name_or_path: tiny-qwen3` builds the same small model with Qwen3's real tokenizer instead
(`helpers.qwen3_tokenizer`: its byte-level BPE, special tokens and official chat template, and the 151,936-row
embedding of the real models): the GPU tier's tokenizer and chat format on a model a CPU can train (the
`qwen3_rehearsal` profile). `TINY` maps each name the kit builds to its tokenizer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from helpers import (
    attention,  # registers the CPU attention (decoding without SDPA's slow masked path)
    qwen3_tokenizer,
)
from helpers.config import TinyModelConfig

transformers.utils.logging.disable_progress_bar()  # loading a model is not a long loop worth a bar

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
TINY = {
    "tiny": "kit",
    "tiny-qwen3": "qwen3",
}  # the models the kit builds (model.name_or_path) -> their tokenizer
SPECIAL_TOKENS = [PAD, IM_START, IM_END]

# Isolated pieces: special tokens and answer tags; words with the space before them, as GPT-2's byte-level BPE
# keeps them (" left", "Turns"); and every other character on its own (grid cells, digits, punctuation, spaces,
# newlines). The leading space takes a FrozenLake system prompt from 107 tokens to 70.
PRETOKENIZE = r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>|</?answer>| ?[A-Z]?[a-z]+|[\s\S]"

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_tokenizer(corpus: list[str], vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """A BPE tokenizer trained on `corpus`, wrapped as a fast tokenizer with the chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PRETOKENIZE), behavior="isolated")
    tok.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
    )
    fast.add_special_tokens({"additional_special_tokens": [IM_START]})
    return fast


def tiny_model(
    cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerFast, seed: int = 0, vocab_size: int | None = None
) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3ForCausalLM of the profile's size (tied embeddings), with `vocab_size` rows of
    embedding (default: one per token of `tokenizer`)."""
    config = Qwen3Config(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny(
    cfg: TinyModelConfig, corpus: list[str], out_dir: str | Path, seed: int = 0, tokenizer: str = "kit"
) -> Path:
    """Make the tokenizer (`kit`: trained on `corpus`; `qwen3`: Qwen3's real one, with the real models'
    151,936-row embedding) and the model, and save both to `out_dir` (loadable by path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer == "qwen3":
        tok = qwen3_tokenizer.load(qwen3_tokenizer.build(out_dir))
        model = tiny_model(cfg, tok, seed, vocab_size=qwen3_tokenizer.VOCAB_SIZE)
    elif tokenizer == "kit":
        tok = train_tokenizer(corpus)
        model = tiny_model(cfg, tok, seed)
        tok.save_pretrained(out_dir)
    else:
        raise ValueError(f"tokenizer must be one of {sorted(set(TINY.values()))}, got {tokenizer!r}")
    model.save_pretrained(out_dir)
    return out_dir


def check_exists(name_or_path: str | Path) -> None:
    """Fail at once, naming the path, when a model is neither a local folder nor in the Hugging Face cache (and
    downloads are off or impossible), instead of transformers' "Repo id must be in the form ..." far away."""
    import os

    from huggingface_hub import constants, try_to_load_from_cache

    path = Path(name_or_path)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"model folder {path} has no config.json: not a saved model (an interrupted save?)"
            )
        return
    name = str(name_or_path)
    looks_like_repo = name.count("/") == 1 and not name.startswith((".", "/")) and not path.suffix
    if looks_like_repo:
        cached = try_to_load_from_cache(name, "config.json")
        if isinstance(cached, str) or not os.environ.get("HF_HUB_OFFLINE"):
            return  # in the cache, or transformers may download it
    raise FileNotFoundError(
        f"model {name!r}: no local folder of that name and no cached hub model (cache: {constants.HF_HUB_CACHE}); "
        "set model.name_or_path to a folder with config.json or a hub name such as Qwen/Qwen3-4B"
    )


def load(
    name_or_path: str | Path, device: str = "cpu", dtype: str = "float32", **kw: Any
) -> tuple[torch.nn.Module, PreTrainedTokenizerFast]:
    """Load (model, tokenizer) from a local folder or a hub name such as `Qwen/Qwen3-4B`."""
    tokenizer = load_tokenizer(name_or_path)
    if str(device).startswith("cpu") and "attn_implementation" not in kw:
        kw["attn_implementation"] = attention.NAME
    model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=getattr(torch, dtype), **kw)
    return model.to(device).eval(), tokenizer


def load_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerFast:
    """A model's tokenizer as the kit uses it: padding on the left, a pad token (end-of-text if it has none)."""
    check_exists(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


DTYPES = ("float32", "bfloat16", "float16")


def load_trainable(
    name_or_path: str | Path, device: str = "cpu", **kw: Any
) -> tuple[torch.nn.Module, PreTrainedTokenizerFast]:
    """Load (model, tokenizer) to train: float32 weights whatever the profile's `model.dtype`.

    An optimiser step on bfloat16 weights rounds away any update smaller than about 1/256 of the weight, so at the
    paper's lr 1e-6 AdamW leaves almost every element, and every norm weight, unchanged. The trainable copy
    therefore keeps float32 master weights and `model.dtype` becomes the compute precision of its forward passes
    (`autocast`); the frozen reference model and vLLM may stay in `model.dtype`.
    """
    return load(name_or_path, device=device, dtype="float32", **kw)


def autocast(device: str | torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """Mixed precision for forward passes of a float32 model: `torch.autocast` to `dtype` on the device's type
    (cuda or cpu), or nothing to do for float32. Backward passes run outside it, as torch recommends. float16
    runs without loss scaling (the kit's loop has no GradScaler), so small gradients can underflow: prefer bfloat16."""
    if dtype not in DTYPES:
        raise ValueError(f"model.dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=getattr(torch, dtype))


_PROBE = [{"role": "user", "content": "u"}]


def knows_thinking(tokenizer) -> bool:
    """Whether the tokenizer's chat template reacts to `enable_thinking` (Qwen3's does; the kit's tiny one does
    not): the generation prompt of one conversation rendered with thinking off and on differs."""
    if not getattr(tokenizer, "chat_template", None):
        return False
    off, on = (
        tokenizer.apply_chat_template(
            _PROBE, tokenize=False, add_generation_prompt=True, enable_thinking=flag
        )
        for flag in (False, True)
    )
    return off != on


def chat_kwargs(tokenizer, thinking: bool = False) -> dict:
    """Extra `apply_chat_template` arguments: thinking off (as in the paper) where the template has the switch.

    Decided by the tokenizer's own template, not by the model's name: a local copy of Qwen3 in a folder named
    otherwise still runs with thinking off, and a template without the switch gets no argument it would ignore.
    """
    return {"enable_thinking": bool(thinking)} if knows_thinking(tokenizer) else {}


def resolve_device(device: str) -> str:
    """`auto` -> cuda when available, else cpu."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"model.device is {device!r} but no CUDA device is visible here; use cpu or auto")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise RuntimeError(f"model.device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device
