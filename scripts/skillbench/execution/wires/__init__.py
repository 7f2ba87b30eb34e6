"""The wire APIs the model gateway and the scripted model speak, one module each; `wire(name)` finds one.

A wire owns everything that differs between model APIs on both sides of a session: for the gateway,
its routes (metered or free), where a request carries its credentials and how the real key goes
upstream, the request's model, the usage meter over a response and the shape of the gateway's own
refusals; for the scripted model, the neutral reading of a request and the rendering of a neutral
reply (`base`). An agent adapter names its CLI's wire (`AgentAdapter.wire_api`).
"""

from __future__ import annotations

from skillbench.execution.wires.anthropic import AnthropicMessages
from skillbench.execution.wires.base import WireApi
from skillbench.execution.wires.gemini import Gemini
from skillbench.execution.wires.openai_responses import OpenAIResponses

DEFAULT_WIRE = "anthropic"
WIRES: dict[str, WireApi] = {api.name: api for api in (AnthropicMessages(), OpenAIResponses(), Gemini())}


def wire(name: str | None) -> WireApi:
    """The wire API `name` (None: the default, Anthropic Messages)."""
    try:
        return WIRES[name or DEFAULT_WIRE]
    except KeyError as exc:
        raise ValueError(f"unknown wire API {name!r}; use one of {sorted(WIRES)}") from exc
