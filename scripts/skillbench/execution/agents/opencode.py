"""The opencode adapter: its headless command line, its inline config, and the strict reading of its JSON events.

opencode (npm `opencode-ai`, one native executable) runs `opencode run --format json --auto --pure --title …
--model anthropic/<model>` with the prompt on stdin. Its configuration comes inline
(`OPENCODE_CONFIG_CONTENT`, merged after every file it reads, set in the argv through `env`: it names no
secret), built by `session_config`: the Anthropic provider pointed at the gateway's forwarder through an
`{env:…}` reference (the forwarder's address is the CLI's environment, `BASE_URL_VARIABLE`), the session's
model declared, no plugins, MCP servers, instructions, LSP servers, formatters, sharing, snapshots or
auto-update, and a permission table that denies everything but the session's tools (`permissions`), so a
denied tool is not even offered. The session's token reaches the CLI only as `ANTHROPIC_API_KEY`.

What a task repository could add to that — `opencode.json(c)` and `.opencode/` (plugins that run inside the
CLI process, MCP servers, commands, agents, config) — is covered in the session's sandbox
(`COVERED_PATHS`): opencode's own switch for it (`OPENCODE_DISABLE_PROJECT_CONFIG`) still loads
`.opencode/` plugins and drops the inline config. opencode has no shell-prefix hook, so its shells are the
harness's contained ones (`contain_shells`).

Its stdout is one JSON object per line: `step_start`, `text`, `reasoning`, `tool_use` (a tool part once it has
completed or failed: request and result in one event), `step_finish` (one per model request, with its tokens
and cost) and `error`. `read_stream` reads it strictly: one session id, well-formed tool parts with unique call
ids, and an end — a final `step_finish` whose reason is not `tool-calls`, or an `error` — with nothing after
it. A skill's use is proven by a `skill` tool part for that skill whose state is `completed`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbench.execution.agents.base import (
    FileText,
    SessionRequest,
    SessionSandbox,
    StreamReading,
    harness_counts,
    refuse_extensions,
    skill_folders,
)
from skillbench.execution.sandbox import SANDBOX_HOME, AgentInstall
from skillbench.execution.streams import captured_events, count, nonnegative

# Where the forwarder's address reaches the CLI (the config refers to it as {env:…}).
BASE_URL_VARIABLE = "SKILLBENCH_OPENCODE_BASE_URL"
PROVIDER = "anthropic"
SESSION_TITLE = "skillbench session"  # a given title spares the CLI its extra title request to the model

# The harness's tool names -> opencode's tool (and permission) names.
TOOL_NAMES = {
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "Bash": "bash",
    "Skill": "skill",
    "Grep": "grep",
    "Glob": "glob",
}
HARNESS_NAMES = {cli: harness for harness, cli in TOOL_NAMES.items()}
# Each permission opencode checks, and the harness tools that grant it (opencode's `edit` covers write too).
PERMISSION_TOOLS = {
    "read": ("Read",),
    "list": ("Read", "Glob"),
    "glob": ("Glob",),
    "grep": ("Grep",),
    "edit": ("Edit", "Write"),
    "bash": ("Bash",),
    "skill": ("Skill",),
}
# Arguments of the harness's tool calls -> opencode's, per tool (anything not named here is dropped).
ARGUMENTS = {
    "read": {"file_path": "filePath", "offset": "offset", "limit": "limit"},
    "write": {"file_path": "filePath", "content": "content"},
    "edit": {
        "file_path": "filePath",
        "old_string": "oldString",
        "new_string": "newString",
        "replace_all": "replaceAll",
    },
    "bash": {"command": "command", "description": "description", "timeout": "timeout"},
    "skill": {"skill": "name", "name": "name"},
    "grep": {"pattern": "pattern", "path": "path", "glob": "include", "include": "include"},
    "glob": {"pattern": "pattern", "path": "path"},
}
# Paths outside the workspace the CLI's own tools may not touch (opencode's `*` matches across folders).
PRIVATE_PATTERNS = tuple(
    pattern
    for root in (
        "/proc",
        "/sys",
        "/dev",
        "/run",
        *(f"{SANDBOX_HOME}/{state}" for state in (".config", ".local", ".cache")),
    )
    for pattern in (root, f"{root}/*")
)
# Paths of a task repository opencode would load code or config from (relative to the clone).
COVERED_PATHS = ("opencode.json", "opencode.jsonc", ".opencode")
# Switches for what the config cannot turn off.
SWITCHES = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
    "OPENCODE_PURE": "1",
}

EVENT_TYPES = frozenset({"step_start", "step_finish", "text", "reasoning", "tool_use", "error"})
TOOL_STATES = frozenset({"completed", "error"})
CALL_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def tool_form(name: str, tool_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A tool call in the harness's terms (Claude Code's names and arguments) as opencode's tool and arguments.

    A tool opencode does not have under another name (an MCP tool) keeps its name and arguments.
    """
    cli_name = TOOL_NAMES.get(name)
    if cli_name is None:
        return name, dict(tool_input)
    renames = ARGUMENTS[cli_name]
    arguments: dict[str, Any] = {}
    for key, value in tool_input.items():
        if key in renames:
            arguments[renames[key]] = value
    if cli_name == "bash" and "description" not in arguments:
        arguments["description"] = str(arguments.get("command", ""))[:60]
    return cli_name, arguments


def permissions(tools: Sequence[str], disallowed_tools: Sequence[str]) -> dict[str, Any]:
    """opencode's permission table for a session: everything denied (the `*` rule first: the last match wins),
    then each permission the session's tools grant allowed; a denied tool is not offered to the model."""
    allowed = {tool for tool in tools if tool not in set(disallowed_tools)}
    table: dict[str, Any] = {"*": "deny"}
    for permission, granting in PERMISSION_TOOLS.items():
        table[permission] = "allow" if allowed.intersection(granting) else "deny"
    # Its file tools run in the process that holds the token: they stay out of its /proc (and /sys, /dev, /run, its
    # state). opencode applies the same rule to the paths a bash command names; those commands run contained anyway.
    table["external_directory"] = {"*": "allow", **{pattern: "deny" for pattern in PRIVATE_PATTERNS}}
    return table


def session_config(request: SessionRequest) -> dict[str, Any]:
    """The inline config of one session (`OPENCODE_CONFIG_CONTENT`)."""
    model = f"{PROVIDER}/{request.model}"
    return {
        "provider": {
            PROVIDER: {
                "options": {"baseURL": "{env:" + BASE_URL_VARIABLE + "}/v1"},
                # Declared, so a model the CLI's bundled catalog does not list still runs (then it prices it at 0).
                "models": {request.model: {}},
            }
        },
        "model": model,
        "small_model": model,
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        "plugin": [],
        "mcp": {},
        "instructions": [],
        "permission": permissions(request.tools, request.disallowed_tools),
    }


def cli_command(cli: str, request: SessionRequest) -> list[str]:
    """The headless argv: the inline config in the CLI's environment (through `env`), the prompt on stdin."""
    refuse_extensions("opencode", request)
    config = json.dumps(session_config(request), separators=(",", ":"), sort_keys=True)
    return [
        "/usr/bin/env",
        f"OPENCODE_CONFIG_CONTENT={config}",
        cli,
        "run",
        "--format",
        "json",
        "--auto",
        "--pure",
        "--title",
        SESSION_TITLE,
        "--model",
        f"{PROVIDER}/{request.model}",
    ]


# ---------------------------------------------------------------------------------------------------------
# The stream


def _event_problem(index: int, event: dict[str, Any], session_id: str | None) -> str | None:
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        return f"event {index + 1} has an unknown type {str(kind)[:40]!r}"
    sid = event.get("sessionID")
    if not isinstance(sid, str) or not sid:
        return f"event {index + 1} has no sessionID"
    if session_id is not None and sid != session_id:
        return f"event {index + 1} belongs to another session"
    if kind != "error" and not isinstance(event.get("part"), dict):
        return f"event {index + 1} ({kind}) has no part"
    return None


def _tool_part(index: int, part: dict[str, Any], seen: set[str]) -> str:
    """The tool name of a well-formed tool part; ValueError otherwise."""
    call_id = part.get("callID")
    if not isinstance(call_id, str) or not CALL_ID.fullmatch(call_id):
        raise ValueError(f"tool_use in event {index + 1} has no well-formed callID")
    if call_id in seen:
        raise ValueError(f"duplicate tool_use callID {call_id}")
    seen.add(call_id)
    name = part.get("tool")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise ValueError(f"tool_use {call_id} has no well-formed tool name")
    state = part.get("state")
    if not isinstance(state, dict) or state.get("status") not in TOOL_STATES:
        raise ValueError(f"tool_use {call_id} is neither completed nor failed")
    if not isinstance(state.get("input"), dict):
        raise ValueError(f"tool_use {call_id} has no input")
    return name


def evidence_window(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events up to and including the session's end, and that end: the last event, a `step_finish` whose
    reason is not `tool-calls` or an `error`. Every tool part is checked here (ValueError when malformed)."""
    if not events:
        raise ValueError("the stream has no events")
    session_id: str | None = None
    seen: set[str] = set()
    for index, event in enumerate(events):
        problem = _event_problem(index, event, session_id)
        if problem:
            raise ValueError(problem)
        session_id = event["sessionID"]
        if event["type"] == "tool_use":
            _tool_part(index, event["part"], seen)
    last = events[-1]
    if last["type"] == "error":
        return events, last
    if last["type"] == "step_finish" and last["part"].get("reason") != "tool-calls":
        return events, last
    # A killed CLI stops mid-step; a step_finish asking for tools means the loop went on.
    raise ValueError(f"the stream ends with a {last['type']!r} event, before the session's end")


def _usage(window: list[dict[str, Any]]) -> tuple[dict[str, int | None], float | None, list[str]]:
    """Tokens and cost summed over the model requests (`step_finish` events); failures for unreadable counts."""
    totals: dict[str, int | None] = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    cost: float | None = 0.0
    failures: list[str] = []
    for event in window:
        if event["type"] != "step_finish":
            continue
        tokens = event["part"].get("tokens")
        cache = tokens.get("cache") if isinstance(tokens, dict) else None
        values = {
            "input_tokens": count(tokens.get("input")) if isinstance(tokens, dict) else None,
            "output_tokens": count(tokens.get("output")) if isinstance(tokens, dict) else None,
            "cache_read_input_tokens": count(cache.get("read")) if isinstance(cache, dict) else None,
            "cache_creation_input_tokens": count(cache.get("write")) if isinstance(cache, dict) else None,
        }
        for field, value in values.items():
            current = totals[field]
            totals[field] = None if value is None or current is None else current + value
        step_cost = nonnegative(event["part"].get("cost"))
        cost = None if step_cost is None or cost is None else cost + step_cost
    failures += [f"usage {field} missing or not a count" for field, value in totals.items() if value is None]
    # A CLI without a price for the model reports 0 for tokens it did spend: that is no measurement.
    spent = sum(value or 0 for value in totals.values())
    if cost is not None and cost == 0 and spent > 0:
        cost = None
    return totals, (round(cost, 6) if cost is not None else None), failures


def _error_text(event: dict[str, Any]) -> str:
    error = event.get("error")
    name = error.get("name") if isinstance(error, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    message = data.get("message") if isinstance(data, dict) else None
    return f"{str(name)[:80]}: {str(message)[:300]}" if message else str(name)[:80]


def skill_was_invoked(window: list[dict[str, Any]], skill: str) -> bool:
    """Whether a `skill` tool part names `skill` and completed (a failed one, e.g. an unknown skill, does not count)."""
    expected = skill.strip()
    if not expected:
        raise ValueError("the expected skill has no name")
    for event in window:
        part = event.get("part")
        if event.get("type") != "tool_use" or not isinstance(part, dict) or part.get("tool") != "skill":
            continue
        state = part["state"]
        requested = state["input"].get("name")
        if isinstance(requested, str) and requested.strip() == expected and state["status"] == "completed":
            return True
    return False


def tool_use_counts(window: list[dict[str, Any]]) -> dict[str, int]:
    """How often the session used each tool, in the harness's names where opencode's tool has one."""
    return harness_counts((event["part"]["tool"] for event in window if event["type"] == "tool_use"), HARNESS_NAMES)


def read_stream(capture: bytes | None, *, overflow: bool, limit: int, mcp_servers: Sequence[str]) -> StreamReading:
    """An opencode `--format json` capture, strictly (see `evidence_window`)."""
    try:
        window, end = evidence_window(captured_events(capture, overflow=overflow, limit=limit))
    except ValueError as exc:
        return StreamReading(stream_error=str(exc))
    usage, cost, failures = _usage(window)
    if end["type"] == "error":
        failures.insert(0, f"error event: {_error_text(end)}")
        subtype = "error"
    else:
        reason = end["part"].get("reason")
        subtype = reason if isinstance(reason, str) else repr(reason)[:80]
    failures += [f"error event: {_error_text(event)}" for event in window[:-1] if event["type"] == "error"]
    return StreamReading(
        stream_error=None,
        window=window,
        cli_failures=failures,
        subtype=subtype[:80],
        session_id=window[0]["sessionID"],
        num_turns=sum(1 for event in window if event["type"] == "step_finish"),
        duration_s=None,  # the process's own duration (the stream's timestamps leave out the CLI's start-up)
        tool_use_counts=tool_use_counts(window),
        cli_cost_usd=cost,
        cli_usage=usage,
        offered_skills=None,  # opencode lists its skills only in the system prompt, never in its stream
        skill_invoked=lambda skill: skill_was_invoked(window, skill),
    )


class OpenCode:
    """opencode (`opencode-ai`), one native executable."""

    name = "opencode"
    package = "opencode-ai"
    # The version the suite runs (tools/package.json pins it); its config keys and stream are what this reads.
    min_version = "1.18.33"
    wire_api = "anthropic"
    # It also reads `.agents/skills` and `.opencode/skills`; `.claude/skills` is the one the harness fills.
    skills_dir = ".claude/skills"
    base_url_variable = BASE_URL_VARIABLE
    cli_setting = "agents.opencode.cli"
    default_cli = "opencode"
    # No shell-prefix hook: every shell it starts is the harness's contained one.
    contain_shells = True
    extensions: frozenset[str] = frozenset()
    covered_paths: tuple[str, ...] = COVERED_PATHS

    def install(self, executable: Path) -> AgentInstall:
        return AgentInstall("opencode", executable)

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        return SessionSandbox(self.covered_paths)

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        return {}  # its config comes inline (OPENCODE_CONFIG_CONTENT)

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        return cli_command(cli, request)

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        extra = {"ANTHROPIC_API_KEY": token, **SWITCHES}
        if base_url:
            extra[BASE_URL_VARIABLE] = base_url
        return extra

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        # Listed only in its system prompt, and only with its skill tool: the skills folder's, when it has that.
        return (
            skill_folders(skills_root) if "Skill" in request.tools and "Skill" not in request.disallowed_tools else []
        )

    def tool_form(
        self, name: str, tool_input: dict[str, Any], existing: FileText | None = None
    ) -> tuple[str, dict[str, Any]]:
        return tool_form(name, tool_input)

    def read_stream(
        self,
        capture: bytes | None,
        *,
        overflow: bool,
        limit: int,
        mcp_servers: Sequence[str],
        skill_texts: Mapping[str, str] | None = None,
    ) -> StreamReading:
        # The skill tool's own success is the proof: what the skill file holds adds nothing to it.
        return read_stream(capture, overflow=overflow, limit=limit, mcp_servers=mcp_servers)
