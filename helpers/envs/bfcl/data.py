"""BFCL's multi-turn entries, their ground truth and function docs, read from the pinned bfcl-eval wheel; the
split by scenario index (the same in every category)."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path

import bfcl_eval
from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
DATA_DIR = Path(bfcl_eval.__file__).parent / "data"
N_ENTRIES = 200  # per category; index i is the same scenario in every category


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@functools.lru_cache(maxsize=8)
def load_entries(category: str = "multi_turn_base") -> tuple[dict, ...]:
    """The entries of one category from the bfcl-eval wheel, each with its `ground_truth` (a list of call
    strings per turn). Cached: treat as read-only."""
    if category not in CATEGORIES:
        raise ValueError(f"bfcl: unknown category {category!r}; choose one of {list(CATEGORIES)}")
    entries = _read_jsonl(DATA_DIR / f"BFCL_v4_{category}.json")
    answers = {
        a["id"]: a["ground_truth"]
        for a in _read_jsonl(DATA_DIR / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    for e in entries:
        e["ground_truth"] = answers[e["id"]]
        if len(e["ground_truth"]) != len(e["question"]):
            raise ValueError(
                f"bfcl: {e['id']} has {len(e['question'])} turns but {len(e['ground_truth'])} answers"
            )
    return tuple(entries)


@functools.lru_cache(maxsize=16)
def function_docs(class_name: str) -> tuple[dict, ...]:
    """The function docs (BFCL's JSON schema dicts) of one backend class, in the wheel's order."""
    if class_name not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
        raise ValueError(f"bfcl: unknown backend class {class_name!r}")
    return tuple(_read_jsonl(DATA_DIR / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def entry_index(entry_id: str) -> int:
    """The scenario index of an entry id, e.g. 17 for 'multi_turn_miss_func_17'."""
    return int(entry_id.rsplit("_", 1)[1])


@functools.lru_cache(maxsize=1)
def split_indices() -> dict[str, frozenset[int]]:
    """The scenario indices of each split: the half with the smallest sha256 of 'bfcl-split:<index>' is 'test'."""
    ranked = sorted(range(N_ENTRIES), key=lambda i: hashlib.sha256(f"bfcl-split:{i}".encode()).hexdigest())
    return {"test": frozenset(ranked[: N_ENTRIES // 2]), "train": frozenset(ranked[N_ENTRIES // 2 :])}


def split_of(entry_id: str) -> str:
    """'test' or 'train' for an entry id (the same for all categories of one scenario index)."""
    return "test" if entry_index(entry_id) in split_indices()["test"] else "train"


def task_payload(entry: dict, category: str) -> dict:
    """Everything an episode needs, copied out of the cached entry (function docs come from the wheel)."""
    return copy.deepcopy(
        {
            "id": entry["id"],
            "category": category,
            "question": entry["question"],
            "initial_config": entry["initial_config"],
            "involved_classes": entry["involved_classes"],
            "missed_function": entry.get("missed_function", {}),
            "ground_truth": entry["ground_truth"],
            "long_context": "long_context" in category,
        }
    )
