"""Shared fixtures: every test writes results under a temporary KIT_RESULTS, never into results/."""

from __future__ import annotations

import os

import pytest
import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    if "KIT_RESULTS" not in os.environ:
        monkeypatch.setenv("KIT_RESULTS", str(tmp_path / "results"))


def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    try:
        import vllm  # noqa: F401

        has_vllm = True
    except ImportError:
        has_vllm = False
    for item in items:
        if item.get_closest_marker("gpu") and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if item.get_closest_marker("vllm") and not has_vllm:
            item.add_marker(pytest.mark.skip(reason="needs vllm"))
