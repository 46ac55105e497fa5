"""Agents: a policy named and identified before it is loaded, loaded only while it is used.

An analysis compares many models (the base, the sharpened base, every RL seed of every method). Loading them all up
front, in float32, holds them all at once: about 64 GB for Qwen3-4B with a few seeds. An `Agent` is the recipe of
one instead: a saved model, the name the analyses give it and a fixed sampling temperature (the sharpened base).
`opened(agent)` loads it on the profile's backend in `model.dtype` (`backends.load_for`: float32 on the cpu tiers,
bfloat16 and vLLM on a GPU box), yields the policy and closes it on leaving the block (the model dropped, a vLLM
engine shut down), so the analyses hold one model at a time. `agent_id(agent)` is what identifies its behaviour in
recipes and records (the model's path relative to the results root, and the temperature), the same string the
loaded policy gives, so nothing has to be loaded to find that its records are already there.

`opened` and `agent_id` also take a policy that is already loaded (the caller keeps it and closes it) or a model
path (loaded with the HF backend in float32, as the kit's evaluation always did).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from helpers import models, store
from helpers.backends import load_for
from helpers.config import Config
from helpers.policy import HFPolicy, Policy, Tempered


@dataclass(frozen=True)
class Agent:
    """A saved model to load on demand as the policy `name` (sampled at `temperature` when one is fixed)."""

    name: str
    path: Path
    cfg: Config = field(repr=False, compare=False)
    temperature: float | None = None

    def load(self) -> Policy:
        """The policy, on the profile's backend and in its dtype (the caller closes it: prefer `opened`)."""
        if self.temperature is None:
            return load_for(self.cfg, self.path, self.name)
        return Tempered(load_for(self.cfg, self.path, str(self.path)), self.temperature, name=self.name)

    def tokenizer(self):
        """The model's tokenizer alone (cheap: no weights are read)."""
        return models.load_tokenizer(self.path)


AgentLike = Agent | Policy | str | Path


def agent_id(agent: AgentLike) -> str:
    """What identifies an agent's behaviour: its model's path (relative to the results root, `store.portable`) or
    name, and a fixed sampling temperature if any; the same for an `Agent` as for the policy it loads."""
    if isinstance(agent, Agent):
        own = store.portable(agent.path)
        return f"{own}@T={agent.temperature:g}" if agent.temperature is not None else own
    if isinstance(agent, str | Path):
        return store.portable(agent)
    inner = getattr(agent, "policy", None)
    own = getattr(getattr(agent, "model", None), "name_or_path", None) or getattr(agent, "name", "?")
    base = agent_id(inner) if inner is not None else store.portable(own)
    temp = getattr(agent, "temperature", None)
    return f"{base}@T={temp:g}" if temp is not None else base


@contextmanager
def opened(agent: AgentLike, name: str | None = None, device: str = "cpu") -> Iterator[Policy]:
    """The agent's policy for the duration of the block, closed after it unless the caller passed it loaded."""
    if hasattr(agent, "generate"):
        yield agent  # the caller's policy: the caller closes it
        return
    if isinstance(agent, Agent):
        policy = agent.load()
    else:
        policy = HFPolicy.from_pretrained(agent, device=device, name=name or str(agent))
    with policy:
        yield policy


@contextmanager
def opened_on_demand(agent: AgentLike, name: str | None = None) -> Iterator[Callable[[], Policy]]:
    """A function that gives the agent's policy, loading it on its first call only and closing it at the end of
    the block: an analysis whose numbers are already recorded never loads the model (`evaluate.recorded_per_state`),
    and one that needs it loads it once for all of its uses."""
    with ExitStack() as stack:
        loaded: list[Policy] = []

        def get() -> Policy:
            if not loaded:
                loaded.append(stack.enter_context(opened(agent, name)))
            return loaded[0]

        yield get
