"""The agent CLIs an arm can run (`arms.<name>.agent`), one adapter each; `adapter(name)` finds one."""

from __future__ import annotations

from typing import Any

from skillbench.execution.agents.base import AgentAdapter
from skillbench.execution.agents.claude_code import ClaudeCode
from skillbench.execution.agents.codex import Codex
from skillbench.execution.agents.copilot import Copilot
from skillbench.execution.agents.gemini import Gemini
from skillbench.execution.agents.opencode import OpenCode

DEFAULT_AGENT = "claude-code"
DEFAULT_ADAPTER: AgentAdapter = ClaudeCode()
ADAPTERS: dict[str, AgentAdapter] = {
    adapter.name: adapter for adapter in (DEFAULT_ADAPTER, OpenCode(), Copilot(), Codex(), Gemini())
}


def adapter(name: str | None) -> AgentAdapter:
    """The adapter of the agent CLI `name` (None: the default, Claude Code)."""
    try:
        return ADAPTERS[name or DEFAULT_AGENT]
    except KeyError as exc:
        raise ValueError(f"unknown agent {name!r}; use one of {sorted(ADAPTERS)}") from exc


def arm_agent(config: dict[str, Any], arm: str) -> AgentAdapter:
    """The adapter of the agent CLI an arm runs (a candidate arm runs its incumbent's)."""
    from skillbench.experiment.arms import incumbent_of

    name = incumbent_of(arm)
    try:
        return adapter(config["arms"][name].get("agent"))
    except ValueError as exc:
        raise ValueError(f"config arms.{name}.agent: {exc} (this version of skillbench has no adapter for it)") from exc


def used_agents(config: dict[str, Any], arms: list[str]) -> list[AgentAdapter]:
    """The adapters of `arms`, each once, Claude Code first when present."""
    found = {arm_agent(config, arm).name: arm_agent(config, arm) for arm in arms}
    return sorted(found.values(), key=lambda agent: (agent.name != DEFAULT_AGENT, agent.name))


def session_model(config: dict[str, Any], agent: AgentAdapter) -> str:
    """The model an agent's sessions ask for: `agents.<name>.model`, else `model.name`."""
    section = (config.get("agents") or {}).get(agent.name) or {}
    return str(section.get("model") or config["model"]["name"])
