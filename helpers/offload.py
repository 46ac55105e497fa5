"""Moving AdamW's state and the frozen reference between the GPU and the CPU around the phases of an RL step.

`helpers.memory` decides what to move (its `Strategy`); `Offload` does it at the points the loop calls: the AdamW
state goes to the CPU before each rollout (when vLLM takes its share) and comes back for the optimiser steps, the
reference comes to the GPU only while it scores the batch. On the CPU profiles nothing is planned and nothing moves
(`Offload.none()`), so their numbers do not change. A move changes where tensors live, not their values.
"""

from __future__ import annotations

import torch

from helpers.policy import release_torch_cache


def optimizer_to(opt: torch.optim.Optimizer, device: str | torch.device) -> None:
    """Move every tensor of the optimiser's state but its step counters (AdamW's moments) to `device`; the step
    counters stay where AdamW keeps them (a scalar on the CPU, unless `capturable`)."""
    for state in opt.state.values():
        for k, v in state.items():
            if torch.is_tensor(v) and k != "step":
                state[k] = v.to(device)


class Offload:
    """The moves of one run: `optimizer_out` before a rollout, `reference_in` / `reference_out` around the reference's
    scoring, `optimizer_in` before the first optimiser step. Calls that have nothing to move do nothing."""

    def __init__(self, device: str, opt=None, reference=None, optimizer: bool = False, ref: bool = False):
        self.device, self.opt, self.reference = device, opt, reference
        self.optimizer, self.ref = optimizer and opt is not None, ref and reference is not None

    @classmethod
    def none(cls) -> Offload:
        return cls("cpu")

    @property
    def active(self) -> bool:
        return self.optimizer or self.ref

    def optimizer_out(self) -> None:
        if self.optimizer:
            optimizer_to(self.opt, "cpu")
            release_torch_cache()

    def optimizer_in(self) -> None:
        if self.optimizer:
            optimizer_to(self.opt, self.device)

    def reference_in(self) -> None:
        if self.ref:
            self.reference.to(self.device)

    def reference_out(self) -> None:
        if self.ref:
            self.reference.to("cpu")
            release_torch_cache()
