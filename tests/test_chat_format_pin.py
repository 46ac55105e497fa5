"""The kit's own tokenizer and template: every id `ChatFormat` produces is pinned to what 839d5c0 produced.

ChatFormat learned Qwen3's official template (issue 28); the cpu and smoke profiles' tiny tokenizer and template
must not see a single id change, or every committed cpu number would move. `pieces()` renders prompts,
observations, actions and the last-turn window of several conversations (FrozenLake demonstrations of both
profiles, plus edge texts: empty, unicode, special-token text, a think block) and the test compares the sha256 of
all their ids with the digests recorded by running this same function on the code of 839d5c0. A second digest pins
the tokenizer itself, so a failure says whether the tokenizer or ChatFormat moved.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from helpers import base_model, config, models
from helpers.rollout import ChatFormat, LastTurnContext

EDGE_TEXTS = [
    "",
    "√ café naïve 🤖",
    "<|im_end|> and <|im_start|>user",
    "<think>\nhm\n</think>\n\n<answer>Up</answer>",
    "a\n\n\nb  \t c",
    "<answer>Left</answer>",
]

# sha256 of `pieces(...)` at 839d5c0 (before ChatFormat knew Qwen3's template), per profile: (tokenizer, ids)
PINNED = {
    "smoke": (
        "5c485104e44736fd5ecff10e11f817e43d355c68f3a70ba9de42722d33defad9",
        "65494b7324d5efd36dad52d06e392ec8511d38693210bbde4081f3d702b85644",
    ),
    # re-pinned 2026-12-04: the cpu testbed's maps changed (issue 26's selection), so its demonstrations, the tiny
    # tokenizer trained on them and every id with it; smoke's pin (unchanged maps) still guards ChatFormat itself.
    # Re-pinned 2026-12-06: a quarter of the cpu maps are doorway maps (issue 50), the same reasons
    "cpu": (
        "c0564f503e5848ba83482bb459b432d1fa38adfe61ba82ff0dfcf1a36a3b87ab",
        "1c165f949759e8a51d8a718a4d109e57f10acce81e628c4e0267afc19455167c",
    ),
}


class _Echo:
    """The least a LastTurnContext wraps: a tokenizer and an eos id (its window() is what is pinned)."""

    def __init__(self, tok):
        self.name, self.tokenizer, self.eos_token_id = "echo", tok, tok.eos_token_id


def tokenizer_digest(tok) -> str:
    return hashlib.sha256(json.dumps(sorted(tok.get_vocab().items())).encode()).hexdigest()


def pieces(tok, transcripts: list[list[dict]]) -> dict:
    """Every id ChatFormat gives for these transcripts and the edge texts."""
    chat = ChatFormat(tok)
    window = LastTurnContext(_Echo(tok), chat)
    out: dict[str, list] = {
        "prefix": chat.encode(chat.obs_prefix),
        "suffix": chat.encode(chat.obs_suffix),
        "eos": [chat.eos_token_id],
        "marker": window._marker,
    }
    for k, tr in enumerate(transcripts):
        first = next(i for i, m in enumerate(tr) if m["role"] == "assistant")
        out[f"prompt{k}"] = chat.prompt_ids(tr[:first])
        out[f"prompt_user_only{k}"] = chat.prompt_ids(tr[1:first])
        ids = list(out[f"prompt{k}"])
        for j, m in enumerate(tr[first:]):
            piece = (
                chat.action_ids(m["content"])
                if m["role"] == "assistant"
                else chat.observation_ids(m["content"])
            )
            out[f"turn{k}.{j}"] = piece
            ids += piece
        out[f"window{k}"] = window.window(ids)
        out[f"transcript{k}"] = base_model.encode_transcript(chat, tr)
    for k, text in enumerate(EDGE_TEXTS):
        out[f"edge_obs{k}"] = chat.observation_ids(text)
        out[f"edge_act{k}"] = chat.action_ids(text)
        out[f"edge_prompt{k}"] = chat.prompt_ids(
            [{"role": "system", "content": text}, {"role": "user", "content": text}]
        )
    return out


# the profile as pinned: smoke without its doorway maps (issue 50), so its pin still guards ChatFormat against 839d5c0
AS_PINNED = {"smoke": {"env": {"frozenlake": {"doorway_share": 0.0}}}}


def digests(profile: str, tmp_path) -> tuple[str, str]:
    cfg = config.load(profile, **AS_PINNED.get(profile, {}))
    transcripts = base_model.demonstrations(cfg, 40, seed=0)
    folder = models.build_tiny(cfg.model.tiny, base_model.tokenizer_corpus(transcripts), tmp_path / profile)
    _, tok = models.load(folder)
    shown = base_model.demonstrations(cfg, 6, seed=1) + base_model.demonstrations(cfg, 2, seed=2)
    ids = hashlib.sha256(json.dumps(pieces(tok, shown)).encode()).hexdigest()
    return tokenizer_digest(tok), ids


@pytest.mark.parametrize("profile", sorted(PINNED))
def test_chat_format_ids_unchanged_for_the_kit_tokenizer(profile, tmp_path):
    tok_digest, ids_digest = digests(profile, tmp_path)
    assert tok_digest == PINNED[profile][0], "the tiny tokenizer itself changed (not ChatFormat)"
    assert ids_digest == PINNED[profile][1], "ChatFormat produces other ids for the kit's own template"


if __name__ == "__main__":  # prints the digests of the code checked out (how PINNED was recorded)
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        for p in sys.argv[1:] or sorted(PINNED):
            print(p, digests(p, Path(d)))
