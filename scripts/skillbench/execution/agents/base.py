"""What every agent adapter provides, and what a session's parent-captured stream proves.

An arm names its agent CLI (`arms.<name>.agent`, `claude-code` by default). The adapter of that CLI owns
everything that differs between CLIs: its pinned install in `tools/`, its headless command line and
environment, where skills live in the clone, the files it reads from its home, the wire API it speaks
to the model gateway (`skillbench.execution.wires`), how a model script's tool calls (written in Claude
Code's tool names) become its own tools (`tool_form`, for the scripted model), and the strict parse of
its stdout into a `StreamReading`. Everything else — the
sandbox, the gateway and its ledger, grading, the record — is the same for every agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillbench.execution.sandbox import AgentInstall

# The current text of a file at a path as the session's CLI sees it (None when there is no such regular file).
FileText = Callable[[str], str | None]


@dataclass(frozen=True)
class SessionRequest:
    """What one session may do, in skillbench's own terms; an adapter maps it onto its CLI's flags.

    `tools` is the surface in the harness's vocabulary (Read, Grep, Glob, Edit, Write, Bash, Skill, and MCP
    tool names), `disallowed_tools` what must be neither offered nor callable. `hidden` are sandbox paths
    the CLI's own file tools must not open (an MCP server's mounts).
    """

    model: str
    effort: str | None
    tools: Sequence[str]
    disallowed_tools: Sequence[str]
    sandbox_backend: str
    mcp_config: str
    plugin_dirs: Sequence[str] = ()
    disable_slash_commands: bool = False
    hidden: Sequence[str] = ()


@dataclass(frozen=True)
class SessionSandbox:
    """What an adapter asks of one session's sandbox (`AgentAdapter.session_sandbox`).

    `covers` are clone paths covered with an empty file or folder (`sessions.cover_binds`); `read_only_workspace`
    binds the clone read-only for the CLI and everything it starts (Codex: a session that may not write, whose
    own read-only sandbox cannot start inside the cell's).
    """

    covers: tuple[str, ...] = ()
    read_only_workspace: bool = False


@dataclass
class StreamReading:
    """What a session's parent-captured stdout proves, read strictly by its CLI's adapter.

    `stream_error` says why the capture is no evidence at all (None when it is); `cli_failures` are the
    CLI's own reports of a failed session (an error result, a missing usage count). `window` is the
    evidence (nothing after the CLI's final event). `skill_invoked(skill)` proves a skill's use from the
    stream (True/False; ValueError when the stream is ambiguous).
    """

    stream_error: str | None
    window: list[dict[str, Any]] = field(default_factory=list)
    cli_failures: list[str] = field(default_factory=list)
    subtype: str | None = None
    session_id: str | None = None
    num_turns: int = 0
    duration_s: float | None = None
    tool_use_counts: dict[str, int] = field(default_factory=dict)
    cli_cost_usd: float | None = None
    cli_usage: dict[str, int | None] = field(default_factory=dict)
    offered_skills: list[str] | None = None
    mcp_tool_uses: dict[str, int] = field(default_factory=dict)
    mcp_semantic_errors: dict[str, int] = field(default_factory=dict)
    mcp_failed: dict[str, str] = field(default_factory=dict)
    skill_invoked: Callable[[str], bool] = field(default=lambda _skill: False)
    # What the CLI said about how it ran that does not fail the session but the row should say (a diagnostic).
    notes: list[str] = field(default_factory=list)


class AgentAdapter(Protocol):
    """One agent CLI, as skillbench runs it headless in a cell.

    The session's token reaches the CLI only through `environment` (never a file: the agent's commands can read
    the home and the workspace, never the CLI's environment).
    """

    # The name an arm's `agent` key uses, the npm package that installs it (its package.json names the version),
    # the oldest version the suite runs, and the wire API it speaks to the model gateway (a name in
    # `wires.WIRES`).
    name: str
    package: str
    min_version: str
    wire_api: str
    # Where the CLI finds a project's skills, relative to the clone.
    skills_dir: str
    # The environment variable that points the CLI at its model endpoint.
    base_url_variable: str
    # The config key naming the CLI (a path, or a name in tools/node_modules/.bin, then PATH) and its default.
    cli_setting: str
    default_cli: str
    # What of an arm the adapter gives its sessions besides skills: "plugins" (Claude Code plugins), "mcp_servers".
    extensions: frozenset[str]
    # True for a CLI without a hook that restarts its agent's commands contained (Claude Code's shell prefix):
    # then every shell it starts is contained (`Sandbox.command(contain_shells=True)`).
    contain_shells: bool
    # Paths of the clone the CLI would load code or config from (a task repository's own config, plugins): each one
    # present is covered with an empty read-only file or folder in the session's sandbox (`sessions.cover_binds`).
    covered_paths: tuple[str, ...]

    def install(self, executable: Path) -> AgentInstall:
        """What the sandbox binds to run the CLI whose resolved executable is `executable`."""
        ...

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        """How this session's sandbox differs from the cell's: the clone paths it covers (`covered_paths`, and what
        this session must not see) and whether the workspace is read-only to it."""
        ...

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        """Files the CLI reads from its home (relative path -> text), written into each session's fresh home."""
        ...

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        """The headless argv (the prompt goes on stdin)."""
        ...

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        """The CLI's own environment variables: its endpoint (`base_url`, None when the forwarder sets it), its
        key (the session's token), and how its shell commands reach the sandbox's `shell_prefix`."""
        ...

    def read_stream(
        self,
        capture: bytes | None,
        *,
        overflow: bool,
        limit: int,
        mcp_servers: Sequence[str],
        skill_texts: Mapping[str, str] | None = None,
    ) -> StreamReading:
        """The strict reading of a session's stdout (`capture`, None when it was not captured). `skill_texts` (skill
        -> its SKILL.md as the session's clone holds it) is for a CLI whose skill proof is a read of the file: only a
        read that output the whole file proves the skill."""
        ...

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        """For a CLI whose stream never lists the skills it offers: the skills a session's settings let it load from
        `skills_root` (the clone's `skills_dir`, read-only in the session), else None (the stream says, or nothing
        does)."""
        ...

    def tool_form(
        self, name: str, tool_input: dict[str, Any], existing: FileText | None = None
    ) -> tuple[str, dict[str, Any]]:
        """A model script's tool call (Claude Code's name and arguments: Read{file_path}, Bash{command}, …) as
        this CLI's tool call, for the scripted model. `existing` gives the current text of a file at a path as the
        CLI sees it (None when there is none), for a CLI whose tools differ on a file that exists."""
        ...


# ---------------------------------------------------------------------------------------------------------
# Helpers the adapters of CLIs without plugins or MCP servers share


def refuse_extensions(agent: str, request: SessionRequest) -> None:
    """ValueError when a session asks for what the `agent` adapter does not give (MCP servers, plugins)."""
    if request.mcp_config and json.loads(request.mcp_config).get("mcpServers"):
        raise ValueError(f"the {agent} adapter runs no MCP servers; use claude-code for an arm with mcp_servers")
    if request.plugin_dirs:
        raise ValueError(f"the {agent} adapter loads no plugins; use claude-code for an arm with plugins")


def mapped_tools(
    agent: str, table: Mapping[str, Sequence[str]], request: SessionRequest, *, when_empty: str
) -> list[str]:
    """The CLI's tools a session offers: those `table` maps its tools onto (harness name -> the CLI's tools), for
    every tool that is not disallowed. ValueError for a tool the table has no counterpart for (an MCP tool), and for
    a session left with none (`when_empty` says why the CLI cannot be given none)."""
    denied = set(request.disallowed_tools)
    offered: list[str] = []
    for tool in request.tools:
        if tool in denied:
            continue
        if tool not in table:
            raise ValueError(f"the {agent} adapter has no counterpart for the tool {tool!r}; use claude-code for it")
        offered += [name for name in table[tool] if name not in offered]
    if not offered:
        raise ValueError(f"a {agent} session needs at least one tool ({when_empty})")
    return offered


def harness_counts(names: Iterable[str], harness_names: Mapping[str, str]) -> dict[str, int]:
    """How often each tool was called, in the harness's names where the CLI's tool has one (`harness_names`)."""
    counts: dict[str, int] = {}
    for name in names:
        key = harness_names.get(name, name)
        counts[key] = counts.get(key, 0) + 1
    return counts


def skill_folders(skills_root: Path) -> list[str]:
    """The skills a CLI finds in a clone's skills folder: every `<skill>/SKILL.md` folder (no symlink followed),
    sorted; what a session of a CLI whose stream never lists its skills is offered when it may use skills."""
    if not skills_root.is_dir() or skills_root.is_symlink():
        return []
    return sorted(
        entry.name
        for entry in skills_root.iterdir()
        if entry.is_dir() and not entry.is_symlink() and (entry / "SKILL.md").is_file()
    )
