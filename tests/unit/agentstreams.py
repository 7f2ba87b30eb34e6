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
