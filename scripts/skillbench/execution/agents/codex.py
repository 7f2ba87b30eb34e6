"""The OpenAI Codex CLI adapter: its headless command line, its home config, and the strict reading of its JSONL.

Codex CLI (npm `@openai/codex`) is a Node launcher (`bin/codex.js`) that execs a native executable from the
platform package (`@openai/codex-linux-x64`, `vendor/x86_64-unknown-linux-musl/`: `bin/codex`, its ripgrep in
`codex-path/`, its own bubblewrap in `codex-resources/`). The sandbox binds that vendor folder read-only and starts
the native executable directly (`install`): no Node at all.

A session runs `codex exec --json --ephemeral --ignore-rules --skip-git-repo-check -` with the prompt on stdin
(`-`) and everything else in `$CODEX_HOME/config.toml` — `CODEX_HOME` is `~/.codex` of the session's fresh home
(`home_config`): a custom provider `skillbench` (`wire_api = "responses"`) whose `base_url` is the gateway's
forwarder (`/v1` added: Codex posts to `<base_url>/responses`) and whose key comes from `KEY_VARIABLE`, the only
place the session's token lives. Under the `none` backend the forwarder's port is known only when it starts, so
the argv is wrapped in `sh -c` to pass the address it exported as a `-c` override.

Switched off there: approvals (`never`), Codex's own sandbox for sessions that may write (`danger-full-access`;
the cell's bwrap contains the CLI and `contain_shells` every shell it starts), hooks, plugins, apps, memories,
goals, sub-agents, image tools, web search, notify, MCP servers (none configured; the repository's `.codex/` is
covered), update checks, analytics, feedback, history, the bundled system skills, and AGENTS.md
(`project_doc_max_bytes = 0`: task-repository guidance is not loaded, as for Copilot). A read-only session (no
Edit, Write or Bash) runs in Codex's `read-only` sandbox, so the shell it reads with cannot write; a session
without Skill gets no skill listing and an empty skills folder.

Codex has no skill tool: it lists the skills it finds in `.agents/skills` (the adapter's `skills_dir`) in its
prompt and the model reads a SKILL.md with its shell. A skill's use is proven by a completed `command_execution`
item with exit code 0 whose command is exactly one read of `<skills_dir>/<skill>/SKILL.md` (`skill_read`) and whose
output is the file's whole text (a read of its first line showed the model only `---`).

Its stdout is one JSON object per line (`thread.started`, `turn.started`, `item.started|updated|completed`,
`turn.completed` with the usage, `turn.failed`, `error`); `read_stream` reads it strictly.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbench.execution.agents.base import (
    FileText,
    SessionRequest,
    SessionSandbox,
    StreamReading,
    refuse_extensions,
    skill_folders,
)
from skillbench.execution.gateway import bridge_base_url
from skillbench.execution.sandbox import SANDBOX_WORKSPACE, AgentInstall
from skillbench.execution.streams import SESSION_ID, captured_events, count

PROVIDER = "skillbench"
BASE_URL_VARIABLE = "SKILLBENCH_CODEX_BASE_URL"
KEY_VARIABLE = "SKILLBENCH_CODEX_API_KEY"
SKILLS_DIR = ".agents/skills"
TARGET = "x86_64-unknown-linux-musl"
NATIVE_PACKAGE = "codex-linux-x64"
# The one function tool the adapter's sessions use: every harness tool becomes a command of it (apply_patch
# included, which Codex intercepts and applies itself as a `file_change`).
SHELL_TOOL = "exec_command"
SHELL_TOOLS = frozenset({"Read", "Grep", "Glob", "Bash", "Skill", "Edit", "Write"})
WRITE_TOOLS = frozenset({"Edit", "Write", "Bash"})
REASONING_EFFORTS = frozenset({"minimal", "low", "medium", "high", "xhigh"})
# What a task repository holds that Codex would load config, hooks, rules, skills or plugins from.
COVERED_PATHS = (".codex", ".agents/plugins")
# Codex features switched off in every session (each an extension point or a tool the harness does not offer).
DISABLED_FEATURES = (
    "apps",
    "browser_use",
    "computer_use",
    "goals",
    "hooks",
    "image_generation",
    "in_app_browser",
    "memories",
    "plugins",
    "shell_snapshot",
    "skill_search",
    "sleep_tool",
    "tool_suggest",
    "view_image",
)

EVENT_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
ITEM_EVENTS = frozenset({"item.started", "item.updated", "item.completed"})
ITEM_TYPES = frozenset(
    {
        "agent_message",
        "reasoning",
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "collab_tool_call",
        "web_search",
        "todo_list",
        "error",
    }
)
# Codex's tool items -> the harness's names (a Read, Grep, Glob or Skill is a command too: counted as Bash).
HARNESS_NAMES = {
    "command_execution": "Bash",
    "file_change": "Edit",
    "web_search": "WebSearch",
    "todo_list": "TodoWrite",
    "collab_tool_call": "Task",
}
_ITEM_ID = re.compile(r"[A-Za-z0-9._:-]{1,256}")
# The shells Codex wraps a command in (`/bin/bash -lc '<cmd>'`).
_SHELLS = frozenset({"bash", "sh", "dash", "/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh", "/bin/dash"})
_SED_FROM_START = re.compile(r"1,\d+p")
# Characters that make a command more than one plain read (lists, pipes, redirections, substitutions, globs).
_SHELL_SYNTAX = frozenset("$`;|&<>()*?[]{}~!\\\n")


# ---------------------------------------------------------------------------------------------------------
# The session


def offers_skills(request: SessionRequest) -> bool:
    return "Skill" in request.tools and "Skill" not in request.disallowed_tools


def allowed_tools(request: SessionRequest) -> list[str]:
    """The session's harness tools that are not disallowed (ValueError for a tool Codex has no counterpart for,
    and for a session left with none)."""
    denied = set(request.disallowed_tools)
    allowed = [tool for tool in request.tools if tool not in denied]
    unknown = [tool for tool in allowed if tool not in SHELL_TOOLS]
    if unknown:
        raise ValueError(f"the codex adapter has no counterpart for the tool {unknown[0]!r}; use claude-code for it")
    if not allowed:
        raise ValueError("a codex session needs at least one tool")
    return allowed


def read_only(request: SessionRequest) -> bool:
    """Whether the session may not write (no Edit, Write or Bash): then its workspace is bound read-only. Codex's
    own `read-only` sandbox cannot start inside the cell's Bubblewrap (its bubblewrap fails to set up a loopback
    device; its legacy Landlock sandbox runs no command), so it stays off in every session."""
    return not WRITE_TOOLS.intersection(allowed_tools(request))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value)  # a TOML basic string is a JSON string


def home_config(request: SessionRequest) -> str:
    """`~/.codex/config.toml` of a session (no secret: the key is named, never written)."""
    base_url = f"{bridge_base_url()}/v1" if request.sandbox_backend == "bwrap" else None
    top: dict[str, Any] = {
        "model": request.model,
        "model_provider": PROVIDER,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        "project_doc_max_bytes": 0,
        "project_doc_fallback_filenames": [],
        "web_search": "disabled",
        "notify": [],
    }
    if request.effort in REASONING_EFFORTS:
        top["model_reasoning_effort"] = request.effort
    tables: dict[str, dict[str, Any]] = {
        "history": {"persistence": "none"},
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "shell_environment_policy": {"inherit": "core"},
        "skills": {"include_instructions": offers_skills(request)},
        "skills.bundled": {"enabled": False},
        "features": dict.fromkeys(DISABLED_FEATURES, False),
        "agents": {"enabled": False},
        f"model_providers.{PROVIDER}": {
            "name": PROVIDER,
            **({"base_url": base_url} if base_url else {}),
            "wire_api": "responses",
            "env_key": KEY_VARIABLE,
        },
    }
    lines = [f"{key} = {_toml(value)}" for key, value in top.items()]
    for name, table in tables.items():
        lines += ["", f"[{name}]", *(f"{key} = {_toml(value)}" for key, value in table.items())]
    return "\n".join(lines) + "\n"


def cli_command(cli: str, request: SessionRequest) -> list[str]:
    """The headless argv, the prompt on stdin (`-`); under the `none` backend the forwarder's exported address
    reaches the config through `sh -c`."""
    refuse_extensions("codex", request)
    read_only(request)  # refuses a tool Codex has no counterpart for
    argv = [
        cli,
        "exec",
        "--json",
        "--strict-config",
        "--ephemeral",
        "--ignore-rules",
        "--skip-git-repo-check",
        "--color",
        "never",
    ]
    if request.sandbox_backend == "bwrap":
        return [*argv, "-"]
    override = f'model_providers.{PROVIDER}.base_url="${{{BASE_URL_VARIABLE}}}/v1"'
    return ["/bin/sh", "-c", f'exec "$@" -c "{override.replace(chr(34), chr(92) + chr(34))}" -', "codex", *argv]


def native_install(executable: Path) -> AgentInstall:
    """The platform package's vendor folder of the CLI whose launcher (or native executable) is `executable`
    (ValueError when it has none)."""
    resolved = Path(executable).resolve()
    if resolved.name == "codex" and resolved.parent.name == "bin" and resolved.parent.parent.name == TARGET:
        folder = resolved.parent.parent
    else:
        modules = next((parent for parent in resolved.parents if parent.name == "node_modules"), None)
        folder = (modules / "@openai" / NATIVE_PACKAGE / "vendor" / TARGET) if modules else resolved.parent
    if not (folder / "bin" / "codex").is_file():
        raise ValueError(
            f"the Codex CLI at {executable} has no native executable at {folder}/bin/codex (npm installs it from "
            f"@openai/{NATIVE_PACKAGE}); run `make setup`"
        )
    return AgentInstall("codex", folder, entry="bin/codex")


# ---------------------------------------------------------------------------------------------------------
# Tool calls of a model script


def _relative(path: Any) -> str:
    text = str(path or "")
    prefix = SANDBOX_WORKSPACE + "/"
    return text[len(prefix) :] if text.startswith(prefix) else text


def _patch_lines(text: str, mark: str) -> list[str]:
    return [mark + line for line in text.split("\n")]


def _apply_patch(body: list[str]) -> dict[str, Any]:
    patch = "\n".join(["*** Begin Patch", *body, "*** End Patch"])
    return {"cmd": f"apply_patch <<'SKILLBENCH_PATCH'\n{patch}\nSKILLBENCH_PATCH\n"}


def tool_form(name: str, tool_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A tool call in the harness's terms (Claude Code's names and arguments) as a Codex `exec_command` call.

    Bash{command} runs as is; Read{file_path, offset, limit} is `cat` (or `sed -n a,bp`); Grep{pattern, path} is
    `grep -rn`; Glob{pattern, path} is `find -path`; Skill{skill} is `cat <skills_dir>/<skill>/SKILL.md` (what
    `skill_read` counts); Edit{file_path, old_string, new_string} and Write{file_path, content} are `apply_patch`
    heredocs (Codex applies them itself): an Edit replaces whole lines (old_string must be whole lines of the
    file), a Write adds the file. Any other tool keeps its name and arguments.
    """
    arguments = dict(tool_input)
    if name == "Bash":
        return SHELL_TOOL, {"cmd": str(arguments.get("command") or "")}
    if name == "Read":
        path = shlex.quote(str(arguments.get("file_path") or ""))
        offset, limit = arguments.get("offset"), arguments.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            start = offset if isinstance(offset, int) and offset > 0 else 1
            end = str(start + limit - 1) if isinstance(limit, int) and limit > 0 else "$"
            return SHELL_TOOL, {"cmd": f"sed -n {shlex.quote(f'{start},{end}p')} -- {path}"}
        return SHELL_TOOL, {"cmd": f"cat -- {path}"}
    if name == "Skill":
        skill_file = f"{SKILLS_DIR}/{arguments.get('skill')}/SKILL.md"
        return SHELL_TOOL, {"cmd": f"cat {shlex.quote(skill_file)}"}
    if name == "Grep":
        where = shlex.quote(str(arguments.get("path") or "."))
        return SHELL_TOOL, {"cmd": f"grep -rn -e {shlex.quote(str(arguments.get('pattern') or ''))} -- {where}"}
    if name == "Glob":
        root = str(arguments.get("path") or ".").rstrip("/") or "/"
        pattern = str(arguments.get("pattern") or "*").replace("**/", "*").replace("**", "*")
        return SHELL_TOOL, {"cmd": f"find {shlex.quote(root)} -path {shlex.quote(f'{root}/{pattern}')}"}
    if name == "Edit":
        old, new = str(arguments.get("old_string") or ""), str(arguments.get("new_string") or "")
        if old.endswith("\n"):
            old, new = old[:-1], new[:-1] if new.endswith("\n") else new
        path = _relative(arguments.get("file_path"))
        return SHELL_TOOL, _apply_patch(
            [f"*** Update File: {path}", "@@", *_patch_lines(old, "-"), *_patch_lines(new, "+")]
        )
    if name == "Write":
        content = str(arguments.get("content") or "")
        content = content[:-1] if content.endswith("\n") else content
        return SHELL_TOOL, _apply_patch(
            [f"*** Add File: {_relative(arguments.get('file_path'))}", *_patch_lines(content, "+")]
        )
    return name, arguments


# ---------------------------------------------------------------------------------------------------------
# The stream


def _check_item(index: int, kind: str, event: dict[str, Any], items: dict[str, dict[str, Any]], done: set[str]) -> None:
    item = event.get("item")
    if not isinstance(item, dict):
        raise ValueError(f"event {index + 1} ({kind}) has no item")
    item_id, item_type = item.get("id"), item.get("type")
    if not isinstance(item_id, str) or not _ITEM_ID.fullmatch(item_id):
        raise ValueError(f"event {index + 1} ({kind}) has no well-formed item id")
    if item_type not in ITEM_TYPES:
        raise ValueError(f"item {item_id} has an unknown type {str(item_type)[:40]!r}")
    if item_id in done:
        raise ValueError(f"item {item_id} has an event after its completion")
    known = items.get(item_id)
    if known is not None and known.get("type") != item_type:
        raise ValueError(f"item {item_id} changes its type")
    if kind == "item.started" and known is not None:
        raise ValueError(f"duplicate item.started for {item_id}")
    if kind == "item.updated" and known is None:
        raise ValueError(f"item.updated for {item_id} has no start")
    if item_type == "command_execution":
        if not isinstance(item.get("command"), str):
            raise ValueError(f"command item {item_id} has no command")
        exit_code = item.get("exit_code")
        if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
            raise ValueError(f"command item {item_id} has an exit code that is not an integer")
    if item_type in ("command_execution", "file_change", "mcp_tool_call") and not isinstance(item.get("status"), str):
        raise ValueError(f"item {item_id} has no status")
    items[item_id] = item
    if kind == "item.completed":
        done.add(item_id)


def evidence_window(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's events, checked: known types, one `thread.started` first with a well-formed thread id, items
    whose events follow start → update → completion once each, every started item completed, and the stream ending
    with the `turn.completed` or `turn.failed` of its last turn (a killed CLI writes neither)."""
    if not events:
        raise ValueError("the stream has no events")
    items: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    open_turn = False
    for index, event in enumerate(events):
        kind = event.get("type")
        if kind not in EVENT_TYPES:
            raise ValueError(f"event {index + 1} has an unknown type {str(kind)[:40]!r}")
        if (kind == "thread.started") != (index == 0):
            raise ValueError("the stream does not start with exactly one thread.started event")
        if kind == "thread.started":
            thread = event.get("thread_id")
            if not isinstance(thread, str) or not SESSION_ID.fullmatch(thread):
                raise ValueError("thread.started has no well-formed thread_id")
        elif kind == "turn.started":
            if open_turn:
                raise ValueError(f"event {index + 1} starts a turn inside a turn")
            open_turn = True
        elif kind in ("turn.completed", "turn.failed"):
            if not open_turn:
                raise ValueError(f"event {index + 1} ({kind}) ends no turn")
            open_turn = False
        elif kind in ITEM_EVENTS:
            _check_item(index, kind, event, items, done)
        elif not isinstance(event.get("message"), str):
            raise ValueError(f"event {index + 1} (error) has no message")
    if events[-1]["type"] not in ("turn.completed", "turn.failed"):
        raise ValueError(f"the stream ends with a {events[-1]['type']!r} event, before the session's end")
    unfinished = sorted(set(items) - done)
    if unfinished:
        raise ValueError(f"item {unfinished[0]} never completed")
    return events


def completed_items(window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event["item"] for event in window if event["type"] == "item.completed"]


def _skill_path(operand: str, skill: str) -> bool:
    expected = f"{SKILLS_DIR}/{skill}/SKILL.md"
    normalized = posixpath.normpath(operand)
    return normalized in (expected, f"{SANDBOX_WORKSPACE}/{expected}") and ".." not in operand.split("/")


def skill_read(command: str, skill: str) -> bool:
    """Whether `command` (as Codex reports it: `<shell> -lc '<cmd>'` or the bare command) is exactly one read of the
    skill's SKILL.md: `cat [--] PATH` or `sed -n '1,Np' [--] PATH`, PATH `<skills_dir>/<skill>/SKILL.md` relative to
    the workspace or absolute in it; nothing else in the command (no pipe, list, redirection, glob or substitution)."""
    try:
        words = shlex.split(command)
        if len(words) == 3 and words[0] in _SHELLS and words[1] in ("-c", "-lc"):
            words = shlex.split(words[2])
    except ValueError:
        return False
    if not words or any(character in word for word in words for character in _SHELL_SYNTAX):
        return False
    program, operands = words[0], words[1:]
    if program == "sed":
        if len(operands) < 3 or operands[0] != "-n" or not _SED_FROM_START.fullmatch(operands[1]):
            return False
        operands = operands[2:]
    elif program != "cat":
        return False
    if operands[:1] == ["--"]:
        operands = operands[1:]
    return len(operands) == 1 and _skill_path(operands[0], skill)


def skill_was_invoked(window: list[dict[str, Any]], skill: str, text: str | None) -> bool:
    """Whether a completed command item with exit code 0 is exactly a read of the skill's SKILL.md (`skill_read`)
    whose output is the whole file, `text` (a read of its first lines, `sed -n '1,1p'`, showed the model only part
    of the skill; None: the file's text is unknown, so nothing proves it)."""
    expected = skill.strip()
    if not expected or "/" in expected or expected in (".", ".."):
        raise ValueError("the expected skill has no well-formed name")
    if text is None or not text.strip():
        return False
    return any(
        item["type"] == "command_execution"
        and item.get("status") == "completed"
        and item.get("exit_code") == 0
        and skill_read(item["command"], expected)
        and _whole_text(item.get("aggregated_output"), text)
        for item in completed_items(window)
    )


def _whole_text(output: Any, text: str) -> bool:
    """Whether a command's output is the file's whole text (a final newline either side aside)."""
    return isinstance(output, str) and output.rstrip("\n") == text.rstrip("\n")


def tool_use_counts(window: list[dict[str, Any]]) -> dict[str, int]:
    """How often the session used each tool item, in the harness's names (`HARNESS_NAMES`; MCP as mcp__server__tool)."""
    counts: dict[str, int] = {}
    for item in completed_items(window):
        if item["type"] == "mcp_tool_call":
            key = f"mcp__{item.get('server')}__{item.get('tool')}"
        else:
            key = HARNESS_NAMES.get(item["type"], "")
        if key:
            counts[key] = counts.get(key, 0) + 1
    return counts


def _usage(window: list[dict[str, Any]]) -> tuple[dict[str, int | None], list[str]]:
    """Tokens summed over the turns (`turn.completed` usage), in the harness's fields: input without the cached part,
    cache reads = cached input, cache writes as reported (0 when absent), output with the reasoning in it."""
    totals: dict[str, int | None] = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    for event in window:
        if event["type"] != "turn.completed":
            continue
        usage = event.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        given, cached, output = (
            count(usage.get(key)) for key in ("input_tokens", "cached_input_tokens", "output_tokens")
        )
        written = count(usage.get("cache_write_input_tokens", 0))
        values = {
            "input_tokens": given - cached if given is not None and cached is not None and cached <= given else None,
            "output_tokens": output,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
        }
        for field, value in values.items():
            current = totals[field]
            totals[field] = None if value is None or current is None else current + value
    failures = [f"usage {field} missing or not a count" for field, value in totals.items() if value is None]
    return totals, failures


def _failures(window: list[dict[str, Any]]) -> list[str]:
    failures = []
    for event in window:
        if event["type"] == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            failures.append(f"turn.failed: {str(message)[:300]}")
    return failures


def model_notes(window: list[dict[str, Any]]) -> list[str]:
    """Codex's own error item when it has no metadata for the model it was asked for: it then runs on fallback
    metadata (its default instructions, context window and tools), which the row says, naming the fix."""
    notes = []
    for item in completed_items(window):
        message = item.get("message") if item["type"] == "error" else None
        if isinstance(message, str) and message.startswith("Model metadata for") and "fallback metadata" in message:
            notes.append(
                f"codex: {message[:300]} (the session ran on Codex's fallback model metadata; name a model Codex "
                "knows in agents.codex.model to run it on its own)"
            )
    return notes


def read_stream(
    capture: bytes | None,
    *,
    overflow: bool,
    limit: int,
    mcp_servers: Sequence[str],
    skill_texts: Mapping[str, str] | None = None,
) -> StreamReading:
    """A Codex `exec --json` capture, strictly (see `evidence_window`); `skill_texts` (skill -> its SKILL.md as the
    session's clone holds it) is what a read must have output to prove a skill (`skill_was_invoked`)."""
    try:
        window = evidence_window(captured_events(capture, overflow=overflow, limit=limit))
    except ValueError as exc:
        return StreamReading(stream_error=str(exc))
    usage, usage_failures = _usage(window)
    failures = _failures(window) + usage_failures
    return StreamReading(
        stream_error=None,
        window=window,
        cli_failures=failures,
        subtype="error" if failures else "success",
        session_id=window[0]["thread_id"],
        num_turns=sum(1 for event in window if event["type"] == "turn.started"),
        duration_s=None,  # Codex reports no duration: the process's own is the record's
        tool_use_counts=tool_use_counts(window),
        cli_cost_usd=None,  # Codex reports tokens, never a price: the cost is the gateway ledger's
        cli_usage=usage,
        offered_skills=None,  # Codex lists its skills only in its prompt, never in its stream
        skill_invoked=lambda skill: skill_was_invoked(window, skill, (skill_texts or {}).get(skill)),
        notes=model_notes(window),
    )


class Codex:
    """OpenAI Codex CLI (`@openai/codex`), run from the native executable of its platform package."""

    name = "codex"
    package = "@openai/codex"
    # The version the suite runs (tools/package.json pins it); its config keys, tools and stream are what this reads.
    min_version = "0.171.0"
    wire_api = "openai-responses"
    skills_dir = SKILLS_DIR
    base_url_variable = BASE_URL_VARIABLE
    cli_setting = "agents.codex.cli"
    default_cli = "codex"
    # Its shells are started by the CLI itself (no shell-prefix hook): every one is the harness's contained one.
    contain_shells = True
    extensions: frozenset[str] = frozenset()
    covered_paths: tuple[str, ...] = COVERED_PATHS

    def install(self, executable: Path) -> AgentInstall:
        return native_install(executable)

    def session_sandbox(self, request: SessionRequest) -> SessionSandbox:
        # A session without Skill sees an empty skills folder (no listing, no SKILL.md to read); one without Edit,
        # Write and Bash a read-only workspace.
        covers = self.covered_paths if offers_skills(request) else (*self.covered_paths, SKILLS_DIR)
        return SessionSandbox(covers, read_only_workspace=read_only(request))

    def configured_skills(self, skills_root: Path, request: SessionRequest) -> list[str] | None:
        # Listed only in its prompt (its bundled system skills are off): the skills folder's, when it may use them.
        return skill_folders(skills_root) if offers_skills(request) else []

    def home_files(self, request: SessionRequest) -> dict[str, str]:
        return {".codex/config.toml": home_config(request)}

    def command(self, cli: str, request: SessionRequest) -> list[str]:
        return cli_command(cli, request)

    def environment(self, *, base_url: str | None, token: str, shell_prefix: str) -> dict[str, str]:
        extra = {KEY_VARIABLE: token}
        if base_url:
            extra[BASE_URL_VARIABLE] = base_url
        return extra

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
        return read_stream(capture, overflow=overflow, limit=limit, mcp_servers=mcp_servers, skill_texts=skill_texts)
