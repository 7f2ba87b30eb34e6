"""The agent CLIs an arm can run (`arms.<name>.agent`), one adapter each; `adapter(name)` finds one."""

from __future__ import annotations

from skillbench.execution.agents.base import AgentAdapter
from skillbench.execution.agents.claude_code import ClaudeCode

DEFAULT_AGENT = "claude-code"
ADAPTERS: dict[str, AgentAdapter] = {adapter.name: adapter for adapter in (ClaudeCode(),)}


def adapter(name: str | None) -> AgentAdapter:
    """The adapter of the agent CLI `name` (None: the default, Claude Code)."""
    try:
        return ADAPTERS[name or DEFAULT_AGENT]
    except KeyError as exc:
        raise ValueError(f"unknown agent {name!r}; use one of {sorted(ADAPTERS)}") from exc
