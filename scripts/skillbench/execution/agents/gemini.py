"""The Gemini CLI adapter: its headless command line, its home settings, and the strict reading of its stream-json.

Gemini CLI (npm `@google/gemini-cli`) is one Node program (`bundle/gemini.js` and its chunks, no native part
it needs); the sandbox binds its package folder read-only (`install`) and runs it on the system's Node (its
shebang is `/usr/bin/env node`; the sandbox's `/usr` is the host's). Its optional native modules (node-pty,
keytar) sit beside it in `node_modules`, outside the bound folder, so it runs its shells as plain child processes.

A session runs `gemini -o stream-json --approval-mode yolo --extensions none -m <model>` with the prompt on
stdin (with no `-p` and a stdin that is not a terminal it runs headless on what stdin holds). Its environment
says: the API key auth (`GEMINI_API_KEY`, the session's token and only there), the gateway's address
(`GOOGLE_GEMINI_BASE_URL`, set by the forwarder), no relaunch into a child Node with a bigger heap
(`GEMINI_CLI_NO_RELAUNCH`), and a trusted workspace (`GEMINI_CLI_TRUST_WORKSPACE`): Gemini CLI reads
workspace skills (`.agents/skills`, the harness's `skills_dir`) only in a trusted folder.

Trust also makes it load what a task repository puts in `.gemini/` (project settings, which override the
home's, with MCP servers, hooks and a tool discovery command it runs at start-up; `.env`, commands, agents,
skills, policies): that folder is covered in the session's sandbox (`covered_paths`), and the home settings
ignore a generic `.env` in the project (`advanced.ignoreLocalEnv`; variables the harness sets win over any
file anyway). The home settings (`~/.gemini/settings.json`, read-only, `home_settings`) give the auth type
(without it the CLI exits 41) and switch off hooks, subagents, the built-in skills, telemetry and usage
statistics, auto-update and its notice, checkpointing, its own sandbox, IDE integration, loop detection's extra
model calls, todos and the session retention sweep; MCP servers could come only from the fresh home (it names
none), extensions (`--extensions none`) or the covered project settings. `tools.core` is the session's tool
surface: only the Gemini tools its tools map onto (`TOOL_NAMES`) are registered, so a denied tool is not
offered and a call to it fails as a tool that does not exist; without the Skill tool, skills are off
(`skills.enabled`), so none is even listed.
`GEMINI.md` files are the task repository's own instructions, like Claude Code's `CLAUDE.md`: loaded (there is
no switch for them: the CLI always adds its default name), and their `@file` imports stay inside the workspace.

Its file tools refuse every path outside the workspace, the skill folders and its project temp folder under
`~/.gemini/tmp`, symlinks resolved; it has no shell-prefix hook, so its shells are the harness's contained ones
(`contain_shells`).

Its stdout is one JSON object per line: `init` (session id, model), `message` (user and assistant text),
`tool_use` (name, id, parameters), `tool_result` (id, `success` or `error`), `error` (warnings and non-fatal
errors) and a last `result` with `status` and `stats` (tokens, no cost). `read_stream` reads it strictly:
well-formed events, tool results matching one tool use each, at most one `init` and it first, exactly one
`result`, last. A skill's use is proven by an `activate_skill` tool use for that skill whose result is `success`.
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
    skill_folders,
)
from skillbench.execution.sandbox import AgentInstall
from skillbench.execution.streams import SESSION_ID, captured_events, count

BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"
KEY_VARIABLE = "GEMINI_API_KEY"
# The entry point inside the package folder (its package.json `bin`).
ENTRY = "bundle/gemini.js"
# Switches in the CLI's environment (none names a secret).
SWITCHES = {
    "GEMINI_CLI_NO_RELAUNCH": "true",
    "GEMINI_CLI_TRUST_WORKSPACE": "true",
    "NO_COLOR": "1",
}

# The harness's tool names -> the Gemini CLI tools that give them (list_directory is a read).
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "Read": ("read_file", "list_directory"),
    "Write": ("write_file",),
    "Edit": ("replace",),
    "Bash": ("run_shell_command",),
    "Skill": ("activate_skill",),
    "Grep": ("grep_search",),
    "Glob": ("glob",),
}
HARNESS_NAMES = {tool: harness for harness, tools in TOOL_NAMES.items() for tool in tools}
# The skills the pinned version ships built in (under bundle/builtin/): disabled in every session.
BUILTIN_SKILLS = ("antigravity-support", "skill-creator")
# Paths of a task repository Gemini CLI would load code or config from in a trusted folder (relative to the clone).
COVERED_PATHS = (".gemini",)

EVENT_TYPES = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
TOOL_STATUSES = frozenset({"success", "error"})
RESULT_STATUSES = frozenset({"success", "error"})
ROLES = frozenset({"user", "assistant"})
_CALL_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def tool_form(name: str, tool_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A tool call in the harness's terms (Claude Code's names and arguments) as Gemini CLI's tool and arguments.

    Read{file_path, offset, limit} -> read_file{file_path, start_line, end_line}, Write{file_path, content} ->
    write_file{file_path, content}, Edit{file_path, old_string, new_string, replace_all} -> replace{file_path,
    instruction, old_string, new_string, allow_multiple} (it requires an instruction), Bash{command, description}
    -> run_shell_command{command, description}, Skill{skill} -> activate_skill{name}, Grep{pattern, path, glob,
    -i} -> grep_search{pattern, dir_path, include_pattern, case_sensitive}, Glob{pattern, path} ->
    glob{pattern, dir_path}. Any other tool keeps its name and arguments.
    """
    arguments = dict(tool_input)
    if name == "Read":
        mapped: dict[str, Any] = {"file_path": arguments.get("file_path")}
        offset, limit = arguments.get("offset"), arguments.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            start = offset if isinstance(offset, int) and offset > 0 else 1
            mapped["start_line"] = start
            if isinstance(limit, int) and limit > 0:
                mapped["end_line"] = start + limit - 1
        return "read_file", mapped
    if name == "Write":
        return "write_file", {"file_path": arguments.get("file_path"), "content": arguments.get("content")}
    if name == "Edit":
        mapped = {
            "file_path": arguments.get("file_path"),
            "instruction": arguments.get("instruction") or "Apply the scripted edit.",
            "old_string": arguments.get("old_string"),
            "new_string": arguments.get("new_string"),
        }
        if arguments.get("replace_all") is True:
            mapped["allow_multiple"] = True
        return "replace", mapped
    if name == "Bash":
        command = arguments.get("command")
        description = arguments.get("description") or str(command or "")[:60]
        return "run_shell_command", {"command": command, "description": description}
    if name == "Skill":
        return "activate_skill", {"name": arguments.get("skill", arguments.get("name"))}
    if name in ("Grep", "Glob"):
        mapped = {"pattern": arguments.get("pattern")}
        if arguments.get("path"):
            mapped["dir_path"] = arguments["path"]
        if name == "Grep":
            if arguments.get("glob"):
                mapped["include_pattern"] = arguments["glob"]
            if "-i" in arguments:
                mapped["case_sensitive"] = not arguments["-i"]
            return "grep_search", mapped
        return "glob", mapped
    return name, arguments


def core_tools(request: SessionRequest) -> list[str]:
    """Gemini CLI's tools a session registers (`tools.core`; `base.mapped_tools` with `TOOL_NAMES`)."""
    return mapped_tools("gemini", TOOL_NAMES, request, when_empty="an empty tools.core registers all of its own")


def home_settings(request: SessionRequest) -> dict[str, Any]:
    """`~/.gemini/settings.json` of a session (see the module's doc for why each switch)."""
    core = core_tools(request)
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "blockGitExtensions": True},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "enableNotifications": False,
            "checkpointing": {"enabled": False},
            "sessionRetention": {"enabled": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False, "logPrompts": False},
        "ide": {"enabled": False},
        "tools": {"core": core, "sandbox": False, "shell": {"enableInteractiveShell": False}},
        "skills": {"enabled": "activate_skill" in core, "disabled": list(BUILTIN_SKILLS)},
        "hooksConfig": {"enabled": False},
        "experimental": {"enableAgents": False, "extensionManagement": False, "autoMemory": False},
        "advanced": {"autoConfigureMemory": False, "ignoreLocalEnv": True},
        "model": {"disableLoopDetection": True},
        "useWriteTodos": False,
    }


def loadable_skills(skills_root: Path, request: SessionRequest) -> list[str]:
    """The skills a session's CLI offers, as its stream never lists them: every `<skill>/SKILL.md` folder of the
    clone's skills folder (the only skill folder it reads: the others are covered or in the fresh home, and the
    built-in ones are disabled) when the session may use skills, else none (`skills.enabled` is off)."""
    return skill_folders(skills_root) if "activate_skill" in core_tools(request) else []


def cli_command(cli: str, request: SessionRequest) -> list[str]:
    """The headless argv; the prompt goes on stdin."""
    refuse_extensions("gemini", request)
    core_tools(request)  # refuses a surface Gemini CLI cannot give
    return [
        cli,
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--extensions",
        "none",
        "--model",
        request.model,
    ]


def package_install(executable: Path) -> AgentInstall:
    """The package folder of the CLI whose `bin` (or entry point) is `executable`: `<package>/bundle/gemini.js`
    resolved (ValueError when it is not one)."""
    resolved = Path(executable).resolve()
    folder = resolved.parent.parent
    if resolved.name != Path(ENTRY).name or resolved.parent.name != Path(ENTRY).parent.name:
        raise ValueError(f"{executable} is not the Gemini CLI's {ENTRY} (its npm package's bin); run `make setup`")
    if not (folder / "package.json").is_file():
        raise ValueError(f"the Gemini CLI at {executable} has no package.json beside its bundle; run `make setup`")
    return AgentInstall("gemini", folder, entry=ENTRY)


# ---------------------------------------------------------------------------------------------------------
# The stream


def _check_tool(index: int, kind: str, event: dict[str, Any], started: dict[str, str], done: set[str]) -> None:
    call_id = event.get("tool_id")
    if not isinstance(call_id, str) or not _CALL_ID.fullmatch(call_id):
        raise ValueError(f"{kind} in event {index + 1} has no well-formed tool_id")
    if kind == "tool_use":
        name = event.get("tool_name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"tool call {call_id} has no well-formed tool_name")
        if not isinstance(event.get("parameters", {}), dict):
            raise ValueError(f"tool call {call_id} has parameters that are not an object")
        if call_id in started:
            raise ValueError(f"duplicate tool_use for {call_id}")
        started[call_id] = name
        return
    if call_id not in started:
        raise ValueError(f"tool_result for {call_id} has no tool_use")
    if call_id in done:
        raise ValueError(f"duplicate tool_result for {call_id}")
    if event.get("status") not in TOOL_STATUSES:
        raise ValueError(f"tool call {call_id} ends with neither success nor error")
    done.add(call_id)


def _check_event(index: int, event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise ValueError(f"event {index + 1} has an unknown type {str(kind)[:40]!r}")
    if not isinstance(event.get("timestamp"), str):
        raise ValueError(f"event {index + 1} ({kind}) has no timestamp")
    if kind == "init":
        sid = event.get("session_id")
        if index != 0:
            raise ValueError(f"event {index + 1} is an init event after the stream's start")
        if not isinstance(sid, str) or not SESSION_ID.fullmatch(sid):
            raise ValueError("the init event has no well-formed session_id")
    elif kind == "message":
        if event.get("role") not in ROLES or not isinstance(event.get("content"), str):
            raise ValueError(f"message in event {index + 1} has no role or no text")
    elif kind == "result":
        if event.get("status") not in RESULT_STATUSES:
            raise ValueError("the result event has no status")
        if not isinstance(event.get("stats"), dict):
            raise ValueError("the result event has no stats")
    return str(kind)


def evidence_window(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's events, checked: each well-formed, tool results matching one tool use each, at most one
    `init` (the first event), and exactly one `result`, the last event (a killed CLI writes none; anything after
    it is not the session's)."""
    if not events:
        raise ValueError("the stream has no events")
    started: dict[str, str] = {}
    done: set[str] = set()
    for index, event in enumerate(events):
        kind = _check_event(index, event)
        if kind == "result" and index != len(events) - 1:
            raise ValueError(f"event {index + 1} is a result event before the stream's end")
        if kind in ("tool_use", "tool_result"):
            _check_tool(index, kind, event, started, done)
    if events[-1]["type"] != "result":
        raise ValueError(f"the stream ends with a {events[-1]['type']!r} event, before the session's result")
    return events


def _tool_calls(window: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str | None]]:
    """(tool name, parameters, status or None when it never finished) of every tool use, in order."""
    outcomes = {event["tool_id"]: event["status"] for event in window if event["type"] == "tool_result"}
    return [
        (event["tool_name"], event.get("parameters") or {}, outcomes.get(event["tool_id"]))
        for event in window
        if event["type"] == "tool_use"
    ]


def skill_was_invoked(window: list[dict[str, Any]], skill: str) -> bool:
    """Whether an `activate_skill` tool use names `skill` and succeeded (an unknown or disabled skill fails)."""
    expected = skill.strip()
    if not expected:
        raise ValueError("the expected skill has no name")
    for name, parameters, status in _tool_calls(window):
        requested = parameters.get("name")
        if name == "activate_skill" and isinstance(requested, str) and requested.strip() == expected:
            if status == "success":
                return True
    return False


def tool_use_counts(window: list[dict[str, Any]]) -> dict[str, int]:
    """How often the session called each tool, in the harness's names where Gemini CLI's tool has one."""
    return harness_counts((name for name, _parameters, _status in _tool_calls(window)), HARNESS_NAMES)


def model_turns(window: list[dict[str, Any]]) -> int:
    """The model's turns: each run of assistant text and tool uses between the user's input and tool results."""
    turns, in_turn = 0, False
    for event in window:
        kind = event["type"]
        if kind == "tool_use" or (kind == "message" and event["role"] == "assistant"):
            if not in_turn:
                turns += 1
            in_turn = True
        elif kind == "tool_result" or (kind == "message" and event["role"] == "user"):
            in_turn = False
    return turns


def usage(stats: dict[str, Any]) -> tuple[dict[str, int | None], list[str]]:
    """The result's token counts in the harness's fields (`input` is the prompt less its cached part; Gemini has
    no cache writes), and failures for counts that are missing or not counts."""
    values: dict[str, int | None] = {
        "input_tokens": count(stats.get("input")),
        "output_tokens": count(stats.get("output_tokens")),
        "cache_read_input_tokens": count(stats.get("cached")),
        "cache_creation_input_tokens": 0,
    }
    return values, [f"usage {field} missing or not a count" for field, value in values.items() if value is None]


def _failures(window: list[dict[str, Any]]) -> tuple[list[str], dict[str, int | None]]:
    result = window[-1]
    counts, failures = usage(result["stats"])
    if result["status"] != "success":
        error = result.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        failures.insert(0, f"result error: {str(message)[:300]}" if message else "result status error")
    for event in window:
        if event["type"] == "error" and event.get("severity") == "error":
            failures.append(f"error event: {str(event.get('message'))[:300]}")
    return failures, counts


def read_stream(capture: bytes | None, *, overflow: bool, limit: int, mcp_servers: Sequence[str]) -> StreamReading:
    """A Gemini CLI `-o stream-json` capture, strictly (see `evidence_window`)."""
    try:
        window = evidence_window(captured_events(capture, overflow=overflow, limit=limit))
    except ValueError as exc:
        return StreamReading(stream_error=str(exc))
    failures, counts = _failures(window)
    first = window[0]
    return StreamReading(
        stream_error=None,
        window=window,
        cli_failures=failures,
        subtype=window[-1]["status"],
        session_id=first["session_id"] if first["type"] == "init" else None,
        num_turns=model_turns(window),
        duration_s=None,  # the process's own duration (the result's duration_ms leaves out the CLI's start-up)
        tool_use_counts=tool_use_counts(window),
        cli_cost_usd=None,  # Gemini CLI reports tokens, never a price
        cli_usage=counts,
        offered_skills=None,  # listed only in the system prompt, never in its stream: see `loadable_skills`
        skill_invoked=lambda skill: skill_was_invoked(window, skill),
    )


class Gemini:
    """Google's Gemini CLI (`@google/gemini-cli`), run from its package folder on the system's Node."""

    name = "gemini"
    package = "@google/gemini-cli"
    # The version the suite runs (tools/package.json pins it); its flags, settings keys and stream are what this reads.
    min_version = "0.61.0"
    wire_api = "gemini"
    # It also reads `.gemini/skills` (covered) and the home's (fresh); the harness fills this one.
    skills_dir = ".agents/skills"
    base_url_variable = BASE_URL_VARIABLE
    cli_setting = "agents.gemini.cli"
    default_cli = "gemini"
    # No shell-prefix hook: every shell it starts is the harness's contained one.
    contain_shells = True
    extensions: frozenset[str] = frozenset()
    covered_paths: tuple[str, ...] = COVERED_PATHS

    def install(self, executable: Path) -> AgentInstall:
        return package_install(executable)

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        return SessionSandbox(self.covered_paths)

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        return {".gemini/settings.json": json.dumps(home_settings(request), indent=2, sort_keys=True) + "\n"}

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        return cli_command(cli, request)

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        extra = {KEY_VARIABLE: token, **SWITCHES}
        if base_url:
            extra[BASE_URL_VARIABLE] = base_url
        return extra

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        return loadable_skills(skills_root, request)

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
