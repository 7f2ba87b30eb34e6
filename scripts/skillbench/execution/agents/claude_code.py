"""The Claude Code adapter: the CLI's headless command line, its settings, and the strict reading of its stream.

Claude Code runs `-p --input-format text --output-format stream-json --verbose` with the prompt on stdin,
`--tools` and `--allowedTools` both given (the first narrows what is offered, the second pre-approves it),
`--strict-mcp-config` with skillbench's own `--mcp-config`, hooks off and its file tools kept away from
`/proc`, `/sys`, `/dev` and its own settings (`claude_settings`). Its stdout is JSON lines: exactly one
`result` event, nothing but `system` events after it; usage and the CLI's own cost come from the result;
a skill's use is proven by a `Skill` tool request with a later successful result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbench.base.records import USAGE_FIELDS
from skillbench.execution import mcp
from skillbench.execution.agents.base import FileText, SessionRequest, SessionSandbox, StreamReading
from skillbench.execution.sandbox import (
    BACKENDS,
    CLI_STATE_PATHS,
    PROTECTED_PATHS,
    SANDBOX_HOME,
    SANDBOX_TMP,
    SANDBOX_WORKSPACE,
    AgentInstall,
    SandboxError,
)
from skillbench.execution.streams import captured_events, count, nonnegative

# Tools a session may use without a prompt (the arm's --tools narrows this further).
ALLOWED_TOOLS = ("Read", "Edit", "Write", "Bash", "Skill")
DENIED_TOOLS = ("WebFetch", "WebSearch", "Agent", "Task", "NotebookEdit")

EMPTY_MCP_CONFIG = '{"mcpServers":{}}'


TOOL_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")


_TOOL_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")


_SKILL_INPUT_FIELDS = ("skill", "command", "name")


def cli_command(
    cli: str,
    *,
    tools: list[str],
    disallowed_tools: list[str],
    model: str,
    effort: str | None,
    settings_json: str | None,
    permission_mode: str | None = "dontAsk",
    mcp_config: str = EMPTY_MCP_CONFIG,
    plugin_dirs: Sequence[str] = (),
    disable_slash_commands: bool = False,
) -> list[str]:
    """The headless CLI argv. The prompt always goes on stdin: the variadic flags would swallow a positional.

    `--strict-mcp-config` is always passed, so only the servers of `mcp_config` (which skillbench
    writes) exist: none from the workspace's `.mcp.json`, the home or a plugin.
    """
    argv = [cli, "-p", "--input-format", "text", "--output-format", "stream-json", "--verbose"]
    if settings_json is not None:
        argv += ["--settings", settings_json]
    argv += ["--strict-mcp-config", "--mcp-config", mcp_config]
    for directory in plugin_dirs:
        argv += ["--plugin-dir", directory]
    if disable_slash_commands:
        argv.append("--disable-slash-commands")
    joined = ",".join(tools)
    # --allowedTools only pre-approves; without --tools every built-in tool (subagents, web) stays available.
    # --tools does not filter MCP tools: a server's tools a session may not use come as disallowed_tools.
    argv += ["--tools", joined, "--allowedTools", joined]
    if permission_mode:
        argv += ["--permission-mode", permission_mode]
    argv += ["--model", model]
    if effort:
        argv += ["--effort", effort]
    for tool in disallowed_tools:
        argv += ["--disallowedTools", tool]
    return argv


def evidence_window(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events up to and including the single result event, and that result event."""
    results = [index for index, event in enumerate(events) if event.get("type") == "result"]
    if len(results) != 1:
        raise ValueError(f"expected exactly one result event, found {len(results)}")
    index = results[0]
    # Background-task bookkeeping ("system" events) may trail the result; it carries no tool or usage
    # payload. Anything else after the result could forge evidence.
    trailing = [event.get("type") for event in events[index + 1 :] if event.get("type") != "system"]
    if trailing:
        raise ValueError(f"a {str(trailing[0])[:40]!r} event follows the result event")
    # Cutting here makes "nothing after the result is evidence" a property of what readers can see.
    return events[: index + 1], events[index]


def content_blocks(event: dict[str, Any]) -> list[Any]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if content is None:
        content = event.get("content")
    return content if isinstance(content, list) else []


def tool_name(value: Any) -> str:
    """A tool name is an identifier; anything else is content and is counted as the generic "tool"."""
    if isinstance(value, str) and _TOOL_NAME.fullmatch(value.strip()):
        return value.strip()
    return "tool"


def _skill_identifier(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    token = value.split(maxsplit=1)[0].removeprefix("/")
    # Plugin skills are requested as "plugin:skill"; the skill is what we benchmark.
    return token.rsplit(":", 1)[-1] or None


def _skill_request_matcher(skill: str) -> Callable[[Any], bool]:
    """Whether a Skill input field names ``skill``.

    A plugin skill ("plugin:skill") is proved by its qualified name or by its bare name, never by the
    same skill name of another plugin.
    """
    expected = _skill_identifier(skill)
    if expected is None:
        raise ValueError(f"expected skill {skill[:80]!r} has no identifier")
    plugin = skill.strip().rsplit(":", 1)[0] if ":" in skill else None

    def requested(value: Any) -> bool:
        if _skill_identifier(value) != expected:
            return False
        token = value.split(maxsplit=1)[0].removeprefix("/")
        return plugin is None or ":" not in token or token.rsplit(":", 1)[0] == plugin

    return requested


def _block_id(block: dict[str, Any], key: str, index: int) -> str:
    tool_id = block.get(key)
    if not isinstance(tool_id, str) or not TOOL_ID.fullmatch(tool_id):
        raise ValueError(f"{block.get('type')} in event {index + 1} has no well-formed {key}")
    return tool_id


def _is_skill_request(block: dict[str, Any], requested: Callable[[Any], bool]) -> bool:
    name = block.get("name")
    arguments = block.get("input")
    return (
        isinstance(name, str)
        and name.casefold() == "skill"
        and isinstance(arguments, dict)
        and any(requested(arguments.get(field)) for field in _SKILL_INPUT_FIELDS)
    )


def _result_is_error(block: dict[str, Any], tool_id: str) -> bool:
    is_error = block.get("is_error")
    if is_error not in (None, False, True):
        raise ValueError(f"tool_result for {tool_id} has a non-boolean is_error")
    return is_error is True


def _tool_exchanges(
    events: list[dict[str, Any]], requested: Callable[[Any], bool]
) -> tuple[dict[str, tuple[int, bool]], dict[str, tuple[int, bool]]]:
    """Tool requests as id -> (event index, is a matching Skill request); results as id -> (event index, is_error)."""
    requests: dict[str, tuple[int, bool]] = {}
    results: dict[str, tuple[int, bool]] = {}
    for index, event in enumerate(events):
        for block in content_blocks(event):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                tool_id = _block_id(block, "id", index)
                if tool_id in requests:
                    raise ValueError(f"duplicate tool_use id {tool_id}")
                requests[tool_id] = (index, _is_skill_request(block, requested))
            elif block.get("type") == "tool_result":
                tool_id = _block_id(block, "tool_use_id", index)
                if tool_id in results:
                    raise ValueError(f"duplicate tool_result for {tool_id}")
                results[tool_id] = (index, _result_is_error(block, tool_id))
    return requests, results


def skill_was_invoked(events: list[dict[str, Any]], skill: str) -> bool:
    """Whether a Skill request for ``skill`` got a later successful tool result.

    False when no such request exists; ValueError when the stream is ambiguous (bad or duplicate ids, a
    matching request without a result, or a result that does not follow its request).
    """
    requests, results = _tool_exchanges(events, _skill_request_matcher(skill))
    succeeded = False
    for tool_id, (request_index, matched) in requests.items():
        if not matched:
            continue
        if tool_id not in results:
            raise ValueError(f"Skill request {tool_id} has no tool_result")
        result_index, is_error = results[tool_id]
        if result_index <= request_index:
            raise ValueError(f"the tool_result for Skill request {tool_id} does not follow it")
        succeeded = succeeded or not is_error
    return succeeded


def tool_use_counts(window: list[dict[str, Any]]) -> dict[str, int]:
    """How often the session requested each tool (a name that is not an identifier counts as "tool")."""
    counts: dict[str, int] = {}
    for event in window:
        for block in content_blocks(event):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = tool_name(block.get("name"))
                counts[name] = counts.get(name, 0) + 1
    return counts


def _usage_counts(data: dict[str, Any]) -> dict[str, int | None]:
    usage = data.get("usage")
    return {field: count(usage.get(field)) if isinstance(usage, dict) else None for field in USAGE_FIELDS}


def claude_settings(*, sandbox_backend: str, cli_sandbox: bool = False, hidden: Sequence[str] = ()) -> str:
    """The Claude Code settings every session gets with --settings (compact, key-sorted JSON).

    * hooks are off (`disableAllHooks`), bypass mode is disabled; the skills the CLI ships are off
      (`disableBundledSkills`), so a session is offered only the skills under test;
    * `permissions.allow` pre-approves the harness's tools (the arm's --tools still narrows the list);
      web, subagent and notebook tools are denied;
    * under bwrap the CLI's own file tools (Read/Edit/Write run inside the CLI process, which holds
      the session's token) may not open /proc, /sys, /dev, ~/.claude or the `hidden` paths (an MCP
      server's mounts), nor write the CLI's settings and state (`CLI_STATE_PATHS`); the CLI resolves
      symlinks before it applies these rules;
    * `cli_sandbox=True` (bwrap only) also turns on the CLI's own Bash sandbox as a second layer:
      writes only to /workspace and /tmp, every network domain denied, no unsandboxed fallback,
      fail if unavailable. It works inside our Bubblewrap once socat is installed (Claude Code
      needs bwrap and socat for it), but it is off by default because it changes what the
      measured agent sees: while each Bash command runs it mounts /dev/null over absent dotfiles
      (.bashrc, .gitconfig, .mcp.json, .vscode, ...), which show up as untracked entries in
      /workspace and make `git add -A` fail. The first layer (the shell-prefix's nested
      Bubblewrap) does not depend on it.
    """
    if sandbox_backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {sandbox_backend!r}; use one of {BACKENDS}")
    deny = [*DENIED_TOOLS]
    # Only the skills under test are offered: the skills the CLI ships (verify, debug, code-review, …) are off.
    settings: dict[str, Any] = {"disableAllHooks": True, "disableBundledSkills": True}
    if sandbox_backend == "bwrap":
        for root in (*PROTECTED_PATHS, f"{SANDBOX_HOME}/.claude", *hidden):
            deny += [f"Read(/{root}/**)", f"Edit(/{root}/**)", f"Write(/{root}/**)"]
        for state in CLI_STATE_PATHS:
            deny += [f"Edit(/{state})", f"Write(/{state})", f"Edit(/{state}/**)", f"Write(/{state}/**)"]
        if cli_sandbox:
            settings["sandbox"] = {
                "enabled": True,
                "failIfUnavailable": True,
                "allowUnsandboxedCommands": False,
                "autoAllowBashIfSandboxed": True,
                "network": {
                    "allowedDomains": [],
                    "deniedDomains": ["*"],
                    "allowLocalBinding": False,
                    "allowAllUnixSockets": False,
                },
                "filesystem": {"allowWrite": [SANDBOX_WORKSPACE, SANDBOX_TMP]},
            }
    settings["permissions"] = {"allow": list(ALLOWED_TOOLS), "deny": deny, "disableBypassPermissionsMode": "disable"}
    return json.dumps(settings, separators=(",", ":"), sort_keys=True)


def _failures(data: dict[str, Any], usage: dict[str, int | None]) -> list[str]:
    """The CLI's own reports of a failed session in its result event."""
    reasons = []
    subtype = data.get("subtype")
    if data.get("is_error", False):
        reasons.append("result is_error")
    if isinstance(subtype, str) and subtype.startswith("error"):
        reasons.append(f"result subtype {subtype[:80]}")
    reasons.extend(f"usage {name} missing or not a count" for name, value in usage.items() if value is None)
    return reasons


def _offered_skills(window: list[dict[str, Any]]) -> list[str] | None:
    """The skills `system/init` lists (what the CLI offered, not proof that any was invoked)."""
    for event in window:
        if event.get("type") == "system" and event.get("subtype") == "init":
            skills = event.get("skills")
            if isinstance(skills, list):
                return [skill for skill in skills if isinstance(skill, str)][:200]
    return None


def read_stream(capture: bytes | None, *, overflow: bool, limit: int, mcp_servers: Sequence[str]) -> StreamReading:
    """A Claude Code stream-json capture, strictly: exactly one result event, and only `system` events after it."""
    try:
        window, data = evidence_window(captured_events(capture, overflow=overflow, limit=limit))
    except ValueError as exc:
        return StreamReading(stream_error=str(exc))
    usage = _usage_counts(data)
    subtype = data.get("subtype")
    milliseconds = nonnegative(data.get("duration_ms"))
    session_id = data.get("session_id")
    uses, errors = mcp.mcp_counts(window, list(mcp_servers))
    return StreamReading(
        stream_error=None,
        window=window,
        cli_failures=_failures(data, usage),
        subtype=subtype if subtype is None or isinstance(subtype, str) else repr(subtype)[:80],
        session_id=session_id if isinstance(session_id, str) else None,
        num_turns=count(data.get("num_turns")) or 0,
        duration_s=milliseconds / 1000 if milliseconds is not None else None,
        tool_use_counts=tool_use_counts(window),
        cli_cost_usd=nonnegative(data.get("total_cost_usd")),
        cli_usage=usage,
        offered_skills=_offered_skills(window),
        mcp_tool_uses=uses,
        mcp_semantic_errors=errors,
        mcp_failed=mcp.failed_servers(window, list(mcp_servers)),
        skill_invoked=lambda skill: skill_was_invoked(window, skill),
    )


class ClaudeCode:
    """Claude Code (`@anthropic-ai/claude-code`), the default agent."""

    name = "claude-code"
    package = "@anthropic-ai/claude-code"
    # The oldest CLI the test suite runs (tools/package.json pins it): 1.0.x fails in the sandbox (it loads a
    # yoga.wasm beside its bin file, which the sandbox does not mount).
    min_version = "2.1.197"
    wire_api = "anthropic"
    skills_dir = ".claude/skills"
    base_url_variable = "ANTHROPIC_BASE_URL"
    cli_setting = "agent.cli"
    default_cli = "claude"
    extensions = frozenset({"plugins", "mcp_servers"})
    # Its shell prefix restarts every Bash tool command contained; its shells need no wrapping.
    contain_shells = False
    # Its project settings are its own --settings' business (`claude_settings`), MCP is --strict-mcp-config.
    covered_paths: tuple[str, ...] = ()

    def install(self, executable: Path) -> AgentInstall:
        return AgentInstall("claude", executable)

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        return SessionSandbox(self.covered_paths)

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        return {}  # its settings come as --settings

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        return cli_command(
            cli,
            tools=list(request.tools),
            disallowed_tools=list(request.disallowed_tools),
            model=request.model,
            effort=request.effort,
            settings_json=claude_settings(sandbox_backend=request.sandbox_backend, hidden=request.hidden),
            mcp_config=request.mcp_config,
            plugin_dirs=request.plugin_dirs,
            disable_slash_commands=request.disable_slash_commands,
        )

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        # Every Bash tool command goes through the shell prefix: a credential-free, contained restart.
        extra = {"ANTHROPIC_API_KEY": token, "CLAUDE_CODE_SHELL_PREFIX": shell_prefix}
        if base_url:
            extra[self.base_url_variable] = base_url
        return extra

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

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        return None  # its init event lists them

    def tool_form(
        self, name: str, tool_input: dict[str, Any], existing: FileText | None = None
    ) -> tuple[str, dict[str, Any]]:
        # Model scripts are written in Claude Code's own tool names and arguments.
        return name, tool_input
