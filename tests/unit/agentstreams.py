"""What the agent adapters' unit tests share: the streams recorded from each real CLI
(tests/unit/fixtures/agents/<agent>/), streams built from events, the strict reading of either, and a session
request with the harness's full tool surface."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.execution.agents.base import SessionRequest, StreamReading

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
LIMIT = 1 << 20  # the stream capture limit the readers are given


def encode(items: list[dict[str, Any]]) -> bytes:
    """A JSON-lines stream of `items`."""
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


# Where a session's CLI finds the demo skill's file (the Claude Code skills folder in the workspace).
SKILL_FILE = "/workspace/.claude/skills/demo/SKILL.md"


def partial_skill_read(raw: bytes, path: str, window: dict[str, Any]) -> bytes:
    """A recorded stream whose read of the file `path` became a read of part of the demo skill's SKILL.md: every
    string naming `path` names `SKILL_FILE` instead, and the tool input that named it takes `window` (the CLI's own
    range arguments: a first line only)."""

    def changed(value: Any) -> Any:
        if isinstance(value, dict):
            named = path in value.values()
            value = {key: changed(item) for key, item in value.items()}
            return {**value, **window} if named else value
        if isinstance(value, list):
            return [changed(item) for item in value]
        return value.replace(path, SKILL_FILE) if isinstance(value, str) else value

    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert any(path in json.dumps(event) for event in events), f"the stream reads no {path}"
    return encode([changed(event) for event in events])


@dataclass(frozen=True)
class AgentStreams:
    agent: str  # the fixture folder's name
    model: str  # the model a session request asks for
    read_stream: Callable[..., StreamReading]  # the adapter's reader

    def capture(self, name: str) -> bytes:
        return (FIXTURES / self.agent / name).read_bytes()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.capture(name).splitlines() if line.strip()]

    def read(self, raw: bytes | None, overflow: bool = False) -> StreamReading:
        return self.read_stream(raw, overflow=overflow, limit=LIMIT, mcp_servers=[])

    def request(self, **changes: Any) -> SessionRequest:
        fields: dict[str, Any] = {
            "model": self.model,
            "effort": None,
            "tools": ["Read", "Grep", "Glob", "Edit", "Write", "Bash", "Skill"],
            "disallowed_tools": [],
            "sandbox_backend": "bwrap",
            "mcp_config": '{"mcpServers":{}}',
        }
        return SessionRequest(**{**fields, **changes})
