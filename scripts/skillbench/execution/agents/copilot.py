"""The GitHub Copilot CLI adapter: its headless command line, its home settings, and the strict reading of its JSONL.

Copilot CLI (npm `@github/copilot`) is a launcher (`npm-loader.js`) that starts a native executable from the
platform package (`@github/copilot-linux-x64`), which on its first run unpacks its JavaScript, its built-in
skills and its own ripgrep into a package cache (`$COPILOT_PKG_CACHE_HOME/pkg/linux-x64/<version>`, by default
under `~/.cache/copilot`). A fresh home per session would unpack 235 MB every time, so `make setup` does it once
(`COPILOT_SEA_EXTRACT_ONLY=1`) into `tools/copilot/`, next to a hard link of the native executable: that one
folder is the install the sandbox binds read-only (`install`), and the command points the package cache at it.

A session runs `copilot --output-format json --allow-all-tools --available-tools … --model <model>` with the
prompt on stdin, offline (`COPILOT_OFFLINE=true`: no GitHub login, telemetry, web tools, GitHub MCP server or
auto-update) against the gateway as an Anthropic provider (`COPILOT_PROVIDER_TYPE=anthropic`,
`COPILOT_PROVIDER_BASE_URL` set by the forwarder, the session's token as `COPILOT_PROVIDER_API_KEY` and only
there). `--available-tools` offers only the session's tools (the harness's names mapped by `TOOL_NAMES`), so a
denied tool is not even offered and a call to it fails as a tool that does not exist.

What a task repository could add: its folder is never trusted (no `--trust-folder`, no `COPILOT_ALLOW_ALL=true`,
a fresh home whose settings list no trusted folder), and Copilot loads no repository hooks, MCP servers or
plugins from an untrusted folder; the home settings also disable every hook (`disableAllHooks`).
`--no-custom-instructions` drops AGENTS.md, CLAUDE.md and `.github/copilot-instructions.md`; its skill folders
other than `.claude/skills` (`.github/skills`, `.agents/skills`, the home's) are ignored
(`ignoredSkillsLocations`) and its built-in skills disabled, so the skills offered are the arm's. Custom agents
(`.github/agents`) are listed but only reachable through the `task` tool, which is never offered. Its file tools
refuse every path outside the workspace and the cell's private temp folder (no `--allow-all-paths`), symlinks
resolved, and so do its checks of the paths a shell command names; it
has no shell-prefix hook, so its shells are the harness's contained ones (`contain_shells`).

Its stdout is one JSON object per line: `session.*`, `user.message`, `assistant.*`, `model.*`, `tool.*` events
(each with an `id`, a `timestamp` and `data`), and a last `result` event with the session id, the exit code and
its usage (`premiumRequests`, durations, code changes: no tokens, no cost). `read_stream` reads it strictly:
well-formed events, tool executions whose completions match one start each, exactly one `result`, last. The
first event, `session.skills_loaded`, lists every skill found; the enabled ones are the offered skills. A skill's
use is proven by a `skill` tool execution for that skill whose completion reports success.
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
    mapped_tools,
    refuse_extensions,
)
from skillbench.execution.sandbox import SANDBOX_HOME, SANDBOX_WORKSPACE, AgentInstall
from skillbench.execution.streams import SESSION_ID, captured_events

PROVIDER_TYPE = "anthropic"
BASE_URL_VARIABLE = "COPILOT_PROVIDER_BASE_URL"
KEY_VARIABLE = "COPILOT_PROVIDER_API_KEY"
# The folder `make setup` fills (next to tools/node_modules): the native executable and its unpacked package.
INSTALL_FOLDER = "copilot"
NATIVE_PACKAGE = "copilot-linux-x64"
PLATFORM = "linux-x64"

# The harness's tool names -> the Copilot tools that give them (bash runs commands; read/stop/list_bash reach the
# shells it started in the background).
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "Read": ("view",),
    # Write rewrites an existing file with edit (create refuses a path that exists): both are Write's.
    "Write": ("create", "edit"),
    "Edit": ("edit",),
    "Bash": ("bash", "read_bash", "stop_bash", "list_bash"),
    "Skill": ("skill",),
    "Grep": ("grep",),
    "Glob": ("glob",),
}
HARNESS_NAMES = {tools[0]: harness for harness, tools in TOOL_NAMES.items()}
# The skills the pinned version ships built in (under builtin/ in its package): disabled in every session.
BUILTIN_SKILLS = ("customize-cloud-agent", "discover-resources", "github-pr-media")
REASONING_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
# Switches in the CLI's environment (none names a secret).
SWITCHES = {
    "COPILOT_OFFLINE": "true",
    "COPILOT_PROVIDER_TYPE": PROVIDER_TYPE,
    "COPILOT_AUTO_UPDATE": "false",
}

_EVENT_TYPE = re.compile(r"[a-z][a-z_]*(\.[a-z][a-z_]*)*")
_CALL_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def tool_form(name: str, tool_input: dict[str, Any], existing: FileText | None = None) -> tuple[str, dict[str, Any]]:
    """A tool call in the harness's terms (Claude Code's names and arguments) as Copilot's tool and arguments.

    Read{file_path, offset, limit} -> view{path, view_range}, Write{file_path, content} -> create{path, file_text}
    for a new file; Copilot's create refuses a path that exists and it offers no other overwrite (1.0.102 gives an
    Anthropic model no apply_patch, write or str_replace_editor), so a Write of a file that `existing` reads (with
    some text) is edit{path, old_str: its whole current text, new_str: content}; Edit{file_path, old_string,
    new_string} -> edit{path, old_str, new_str} (it has no replace_all), Bash{command, description} ->
    bash{command, description}, Skill{skill} -> skill{skill}, Grep{pattern, path, glob, output_mode, -i, -n} ->
    grep{pattern, paths, …}, Glob{pattern, path} -> glob{pattern, paths}. Any other tool keeps its name and
    arguments.
    """
    arguments = dict(tool_input)
    if name == "Read":
        mapped: dict[str, Any] = {"path": arguments.get("file_path")}
        offset, limit = arguments.get("offset"), arguments.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            start = offset if isinstance(offset, int) and offset > 0 else 1
            mapped["view_range"] = [start, start + limit - 1 if isinstance(limit, int) and limit > 0 else -1]
        return "view", mapped
    if name == "Write":
        path, content = arguments.get("file_path"), arguments.get("content")
        current = existing(path) if existing is not None and isinstance(path, str) else None
        if current:
            return "edit", {"path": path, "old_str": current, "new_str": content}
        return "create", {"path": path, "file_text": content}
    if name == "Edit":
        return "edit", {
            "path": arguments.get("file_path"),
            "old_str": arguments.get("old_string"),
            "new_str": arguments.get("new_string"),
        }
    if name == "Bash":
        command = arguments.get("command")
        description = arguments.get("description") or str(command or "")[:60] or "Run a command"
        return "bash", {"command": command, "description": description}
    if name == "Skill":
        return "skill", {"skill": arguments.get("skill")}
    if name in ("Grep", "Glob"):
        mapped = {"pattern": arguments.get("pattern")}
        if arguments.get("path"):
            mapped["paths"] = arguments["path"]
        if name == "Grep":
            mapped.update({key: arguments[key] for key in ("glob", "output_mode", "-i", "-n") if key in arguments})
        return name.lower(), mapped
    return name, arguments


def available_tools(request: SessionRequest) -> list[str]:
    """Copilot's tools a session offers (`base.mapped_tools` with `TOOL_NAMES`)."""
    return mapped_tools("copilot", TOOL_NAMES, request, when_empty="Copilot offers all of its own for none")


def home_settings(request: SessionRequest) -> dict[str, Any]:
    """`~/.copilot/settings.json` of a session: no hooks, no built-in skills, and no skill folder but the harness's
    (`.claude/skills`) — and not that one either when the session may not use skills: Copilot lists (and describes
    to the model) every skill it finds even when its `skill` tool is not offered."""
    ignored = [
        f"{SANDBOX_WORKSPACE}/.github/skills",
        f"{SANDBOX_WORKSPACE}/.agents/skills",
        f"{SANDBOX_HOME}/.copilot/skills",
        f"{SANDBOX_HOME}/.agents/skills",
    ]
    if "Skill" not in request.tools or "Skill" in request.disallowed_tools:
        ignored.append(f"{SANDBOX_WORKSPACE}/.claude/skills")
    return {
        "disableAllHooks": True,
        "autoUpdate": False,
        "disabledSkills": list(BUILTIN_SKILLS),
        "ignoredSkillsLocations": ignored,
    }


def cli_command(cli: str, request: SessionRequest) -> list[str]:
    """The headless argv: the package cache beside the executable (through `env`), the prompt on stdin."""
    refuse_extensions("copilot", request)
    argv = [
        "/usr/bin/env",
        f"COPILOT_PKG_CACHE_HOME={Path(cli).parent}",
        cli,
        "--output-format",
        "json",
        "--allow-all-tools",
        "--no-ask-user",
        "--no-auto-update",
        "--no-custom-instructions",
        "--disable-builtin-mcps",
        "--disable-client-telemetry",
        "--no-experimental",
        "--no-remote",
        "--secret-env-vars",
        KEY_VARIABLE,
        "--model",
        request.model,
    ]
    if request.effort in REASONING_EFFORTS:
        argv += ["--reasoning-effort", str(request.effort)]
    return [*argv, "--available-tools", *available_tools(request)]


def native_install(executable: Path) -> AgentInstall:
    """The install folder `make setup` made for the CLI whose launcher (or native executable) is `executable`:
    `<tools>/copilot/` beside the `node_modules` that holds it, with the native executable and its unpacked
    package (ValueError when setup has not made it)."""
    resolved = Path(executable).resolve()
    modules = next((parent for parent in resolved.parents if parent.name == "node_modules"), None)
    folder = modules.parent / INSTALL_FOLDER if modules is not None else resolved.parent
    native = folder / "copilot"
    if not native.is_file() or not (folder / "pkg" / PLATFORM).is_dir():
        raise ValueError(
            f"the Copilot CLI at {executable} has no unpacked package at {folder} (the native executable and "
            "pkg/ it unpacks on first start); run `make setup`, which unpacks it once, read-only for every session"
        )
    return AgentInstall("copilot", folder, entry="copilot")


# ---------------------------------------------------------------------------------------------------------
# The stream


def _check_event(index: int, event: dict[str, Any]) -> str:
    kind = event.get("type")
    if not isinstance(kind, str) or not _EVENT_TYPE.fullmatch(kind):
        raise ValueError(f"event {index + 1} has no well-formed type")
    if kind == "result":
        sid = event.get("sessionId")
        if not isinstance(sid, str) or not SESSION_ID.fullmatch(sid):
            raise ValueError("the result event has no well-formed sessionId")
        if not isinstance(event.get("exitCode"), int) or isinstance(event.get("exitCode"), bool):
            raise ValueError("the result event has no exitCode")
        if not isinstance(event.get("usage"), dict):
            raise ValueError("the result event has no usage")
        return kind
    if not isinstance(event.get("id"), str) or not isinstance(event.get("timestamp"), str):
        raise ValueError(f"event {index + 1} ({kind}) has no id or timestamp")
    if not isinstance(event.get("data"), dict):
        raise ValueError(f"event {index + 1} ({kind}) has no data")
    return kind


def _check_tools(index: int, kind: str, data: dict[str, Any], started: dict[str, str], done: set[str]) -> None:
    if kind not in ("tool.execution_start", "tool.execution_complete"):
        return
    call_id = data.get("toolCallId")
    if not isinstance(call_id, str) or not _CALL_ID.fullmatch(call_id):
        raise ValueError(f"{kind} in event {index + 1} has no well-formed toolCallId")
    if kind == "tool.execution_start":
        name = data.get("toolName")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"tool call {call_id} has no well-formed toolName")
        if not isinstance(data.get("arguments", {}), dict):
            raise ValueError(f"tool call {call_id} has arguments that are not an object")
        if call_id in started:
            raise ValueError(f"duplicate tool.execution_start for {call_id}")
        started[call_id] = name
        return
    if call_id not in started:
        raise ValueError(f"tool.execution_complete for {call_id} has no start")
    if call_id in done:
        raise ValueError(f"duplicate tool.execution_complete for {call_id}")
    if not isinstance(data.get("success"), bool):
        raise ValueError(f"tool call {call_id} completes with no success flag")
    done.add(call_id)


def evidence_window(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's events, checked: each well-formed, tool completions matching one start each, and exactly one
    `result`, the last event (a killed CLI writes none; anything after it is not the session's)."""
    if not events:
        raise ValueError("the stream has no events")
    started: dict[str, str] = {}
    done: set[str] = set()
    for index, event in enumerate(events):
        kind = _check_event(index, event)
        if kind == "result" and index != len(events) - 1:
            raise ValueError(f"event {index + 1} is a result event before the stream's end")
        if kind != "result":
            _check_tools(index, kind, event["data"], started, done)
    if events[-1]["type"] != "result":
        raise ValueError(f"the stream ends with a {events[-1]['type']!r} event, before the session's result")
    return events


def offered_skills(window: list[dict[str, Any]]) -> list[str] | None:
    """The enabled skills of the first `session.skills_loaded` event (None when the stream has none)."""
    for event in window:
        if event["type"] != "session.skills_loaded":
            continue
        skills = event["data"].get("skills")
        if not isinstance(skills, list):
            raise ValueError("session.skills_loaded has no skill list")
        names: list[str] = []
        for skill in skills:
            if not isinstance(skill, dict) or not isinstance(skill.get("name"), str):
                raise ValueError("session.skills_loaded lists a skill without a name")
            if skill.get("enabled") is True and skill["name"] not in names:
                names.append(skill["name"])
        return sorted(names)
    return None


def _tool_calls(window: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], bool | None]]:
    """(tool name, arguments, success or None when it never completed) of every tool execution, in order."""
    outcomes = {
        event["data"]["toolCallId"]: event["data"]["success"]
        for event in window
        if event["type"] == "tool.execution_complete"
    }
    return [
        (event["data"]["toolName"], event["data"].get("arguments") or {}, outcomes.get(event["data"]["toolCallId"]))
        for event in window
        if event["type"] == "tool.execution_start"
    ]


def skill_was_invoked(window: list[dict[str, Any]], skill: str) -> bool:
    """Whether a `skill` tool execution names `skill` and completed successfully (an unknown skill fails)."""
    expected = skill.strip()
    if not expected:
        raise ValueError("the expected skill has no name")
    for name, arguments, success in _tool_calls(window):
        requested = arguments.get("skill")
        if name == "skill" and isinstance(requested, str) and requested.strip() == expected and success is True:
            return True
    return False


def tool_use_counts(window: list[dict[str, Any]]) -> dict[str, int]:
    """How often the session called each tool, in the harness's names where Copilot's tool has one."""
    return harness_counts((name for name, _arguments, _success in _tool_calls(window)), HARNESS_NAMES)


def _failures(window: list[dict[str, Any]]) -> list[str]:
    result = window[-1]
    failures = [f"exit code {result['exitCode']}"] if result["exitCode"] != 0 else []
    for event in window:
        if event["type"] == "session.error":
            failures.append(f"session.error: {str(event['data'].get('message'))[:300]}")
    return failures


def read_stream(capture: bytes | None, *, overflow: bool, limit: int, mcp_servers: Sequence[str]) -> StreamReading:
    """A Copilot `--output-format json` capture, strictly (see `evidence_window`)."""
    try:
        window = evidence_window(captured_events(capture, overflow=overflow, limit=limit))
        offered = offered_skills(window)
    except ValueError as exc:
        return StreamReading(stream_error=str(exc))
    failures = _failures(window)
    return StreamReading(
        stream_error=None,
        window=window,
        cli_failures=failures,
        subtype="error" if failures else "success",
        session_id=window[-1]["sessionId"],
        num_turns=sum(1 for event in window if event["type"] == "assistant.turn_start"),
        duration_s=None,  # the process's own duration (sessionDurationMs leaves out the CLI's start-up)
        tool_use_counts=tool_use_counts(window),
        cli_cost_usd=None,  # Copilot reports premium requests, never a price, and no tokens in its stream
        cli_usage={},
        offered_skills=offered,
        skill_invoked=lambda skill: skill_was_invoked(window, skill),
    )


class Copilot:
    """GitHub Copilot CLI (`@github/copilot`), run from its native executable and a package unpacked by setup."""

    name = "copilot"
    package = "@github/copilot"
    # The version the suite runs (tools/package.json pins it); its flags, settings keys and stream are what this reads.
    min_version = "1.0.102"
    wire_api = "anthropic"
    # It also reads `.github/skills` and `.agents/skills` (ignored by its settings); the harness fills this one.
    skills_dir = ".claude/skills"
    base_url_variable = BASE_URL_VARIABLE
    cli_setting = "agents.copilot.cli"
    default_cli = "copilot"
    # No shell-prefix hook: every shell it starts is the harness's contained one.
    contain_shells = True
    extensions: frozenset[str] = frozenset()
    # Nothing of the clone to cover: an untrusted folder's hooks, MCP servers and plugins are never loaded.
    covered_paths: tuple[str, ...] = ()

    def install(self, executable: Path) -> AgentInstall:
        return native_install(executable)

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        return SessionSandbox(self.covered_paths)

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        return {".copilot/settings.json": json.dumps(home_settings(request), indent=2, sort_keys=True) + "\n"}

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        return cli_command(cli, request)

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        extra = {KEY_VARIABLE: token, **SWITCHES}
        if base_url:
            extra[BASE_URL_VARIABLE] = base_url
        return extra

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        return None  # its first event lists them

    def tool_form(
        self, name: str, tool_input: dict[str, Any], existing: FileText | None = None
    ) -> tuple[str, dict[str, Any]]:
        return tool_form(name, tool_input, existing)

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
