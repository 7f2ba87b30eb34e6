"""MCP servers of an arm: configuration checks, the per-session tool surface, the CLI's `--mcp-config`, evidence.

Owns:

* `check_mcp_config`: `mcp_servers` and the MCP/tool-surface keys of every arm, checked at parse
  time (a bad key fails naming it): commands resolve to absolute paths under the system trees or
  a mount, never inside a workspace; mounts are read-only host trees at `/opt/…` or `/srv/…`;
  tool lists name only declared servers and tools;
* `session_surface`: what one session may use — `--tools`/`--allowedTools` (built-ins plus the
  MCP tools its role may use) and `--disallowedTools` (everything else a server offers, since
  `--tools` does not filter MCP tools);
* `mcp_config_json`: the credential-free `--mcp-config` skillbench writes itself; each server
  starts through `env -i` in its own nested Bubblewrap (`sandbox.mcp_server_args`);
* evidence from the stream: `init_server_status` (`system/init`'s `mcp_servers`), per-server use
  and semantic-error counts (`mcp_counts`), and the stderr tail of a server that failed to start
  (`server_log_tail`, from the CLI's per-server log in the session's home — diagnostics only);
* `strip_guidance`: the "no MCP" baseline's guidance files without lines about unavailable tools.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbench.base.errors import SkillbenchError

MCP_PREFIX = "mcp__"
SYSTEM_COMMAND_PATH = "/usr/local/bin:/usr/bin:/bin"
TRUSTED_COMMAND_TREES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")
MOUNT_ROOTS = ("/opt/", "/srv/")
WORKSPACE_MODES = ("none", "read-only", "read-write")
GUIDANCE_FILES = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", ".claude/CLAUDE.md")
MAX_GUIDANCE_BYTES = 1024 * 1024
MAX_LOG_TAIL_CHARS = 2000
# Tool names the CLI gives a server's tools: every character outside [A-Za-z0-9_-] becomes "_".
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class McpConfigError(SkillbenchError, ValueError):
    """An `mcp_servers` entry or an arm's MCP / tool-surface key is invalid."""


def tool_prefix(server: str) -> str:
    return f"{MCP_PREFIX}{_NAME_CHARS.sub('_', server)}__"


def tool_name(server: str, tool: str) -> str:
    return f"{tool_prefix(server)}{tool}"


def split_tool(name: str, servers: dict[str, Any]) -> tuple[str, str] | None:
    """(server, tool) of an `mcp__<server>__<tool>` name among `servers`; None for a non-MCP name."""
    if not name.startswith(MCP_PREFIX):
        return None
    for server in servers:
        prefix = tool_prefix(server)
        if name.startswith(prefix) and len(name) > len(prefix):
            return server, name[len(prefix) :]
    raise McpConfigError(f"{name!r} names no server declared under `mcp_servers` ({sorted(servers)})")


# ---------------------------------------------------------------------------------------------------------
# Configuration


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _suite_tasks(config: dict[str, Any], project_root: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The suite's folder and its task entries as written (an unreadable suite gives none: the suite check
    names that problem)."""
    from skillbench.base import yamltext

    suite = project_root / config["tasks"]["suite"]
    try:
        document = yamltext.safe_load(suite.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError):
        return suite.parent.resolve(), []
    tasks = document.get("tasks") if isinstance(document, dict) else None
    return suite.parent.resolve(), [task for task in tasks or [] if isinstance(task, dict)]


def workspace_roots(config: dict[str, Any], project_root: Path) -> list[str]:
    """Host folders a cell's workspace is made from (the suite's task snapshots), the results, and the
    workspace as the sandbox shows it."""
    from skillbench.execution.sandbox import SANDBOX_WORKSPACE

    roots = [SANDBOX_WORKSPACE, str((project_root / "results").resolve())]
    suite_dir, tasks = _suite_tasks(config, project_root)
    for task in tasks:
        if isinstance(task.get("snapshot"), str):
            roots.append(str((suite_dir / task["snapshot"]).resolve()))
    return list(dict.fromkeys(roots))


def protected_paths(config: dict[str, Any], project_root: Path) -> list[tuple[Path, str]]:
    """(host path, what it is) that a server mount may neither be, contain nor lie inside: the task suite
    folder, every hidden oracle file and reference solution of the suite, every task repository (its history
    holds the fix), the results folder, and the skills repository's git directory."""
    from skillbench.execution.repo import GitError, locate_target

    suite_dir, tasks = _suite_tasks(config, project_root)
    found = [(suite_dir, "the task suite folder"), ((project_root / "results").resolve(), "the results folder")]
    for task in tasks:
        name = task.get("id", "?")
        oracle = task.get("oracle")
        for item in (oracle.get("files") if isinstance(oracle, dict) else None) or []:
            if isinstance(item, dict) and isinstance(item.get("source"), str):
                found.append(((suite_dir / item["source"]).resolve(), f"a hidden oracle file of task {name}"))
        review = task.get("review")
        if isinstance(review, dict) and isinstance(review.get("labels"), str):
            found.append(((suite_dir / review["labels"]).resolve(), f"the hidden review labels of task {name}"))
        solution = task.get("solution")
        for key in ("patch", "review"):
            if isinstance(solution, dict) and isinstance(solution.get(key), str):
                found.append(((suite_dir / solution[key]).resolve(), f"the reference solution of task {name}"))
        if isinstance(task.get("repo"), str):
            found.append((Path(task["repo"]).expanduser().resolve(), f"the repository of task {name}"))
    try:
        skills_repository = locate_target(project_root)
    except GitError:
        skills_repository = None
    if skills_repository is not None:
        for git_dir in dict.fromkeys((skills_repository.git_dir, skills_repository.common_dir)):
            found.append((git_dir.resolve(), "the skills repository's git directory"))
    return found


def protected_mount_problem(host: Path, protected: list[tuple[Path, str]]) -> str | None:
    """How a mount's host path meets a protected path (`is` / `lies inside` / `contains` …), or None."""
    for path, what in protected:
        if host == path:
            return f"is {what} ({path})"
        if host.is_relative_to(path):
            return f"lies inside {what} ({path})"
        if path.is_relative_to(host):
            return f"contains {what} ({path})"
    return None


def resolve_command(command: str, where: str, mounts: dict[str, str], forbidden: list[str]) -> str:
    """The server command as an absolute path the sandbox can run: under the system trees or a mount target."""
    if "/" not in command:
        found = shutil.which(command, path=SYSTEM_COMMAND_PATH)
        if not found:
            raise McpConfigError(f"{where}.command: {command!r} is not on {SYSTEM_COMMAND_PATH}; give an absolute path")
        command = found
    if not command.startswith("/"):
        raise McpConfigError(
            f"{where}.command: {command!r} is relative; give an absolute path (or a bare program "
            f"name on {SYSTEM_COMMAND_PATH}), or put the program in a mount and name its mount path"
        )
    for target in mounts:
        if _inside(command, [target]):
            return command
    if _inside(command, forbidden) or _inside(os.path.realpath(command), forbidden):
        raise McpConfigError(
            f"{where}.command: {command!r} lies inside a task workspace or the results; "
            "an MCP server must be a trusted program the agent cannot change"
        )
    real = os.path.realpath(command)
    if not any(real.startswith(tree) or command.startswith(tree) for tree in TRUSTED_COMMAND_TREES):
        raise McpConfigError(
            f"{where}.command: {command!r} is neither under the system trees "
            f"{[tree.rstrip('/') for tree in TRUSTED_COMMAND_TREES]} nor under a mount; "
            "mount its folder and name its mount path"
        )
    if not os.access(real, os.X_OK):
        raise McpConfigError(f"{where}.command: {command!r} is not an executable file")
    return command


def resolve_mounts(
    mounts: dict[str, str],
    where: str,
    project_root: Path,
    forbidden: list[str],
    protected: list[tuple[Path, str]],
) -> dict[str, str]:
    """Mount target -> absolute host path, each an existing folder or file outside every workspace, and
    neither being, containing nor lying inside a `protected_paths` entry."""
    resolved: dict[str, str] = {}
    for target, source in mounts.items():
        if not any(target.startswith(root) for root in MOUNT_ROOTS) or ".." in target.split("/"):
            raise McpConfigError(
                f"{where}.mounts: target {target!r} must be an absolute path under {' or '.join(MOUNT_ROOTS)}"
            )
        host = (project_root / source).resolve() if not os.path.isabs(source) else Path(os.path.realpath(source))
        if not host.exists():
            raise McpConfigError(
                f"{where}.mounts.{target}: {source!r} does not exist (relative paths are taken "
                f"from the project root {project_root}; run `make setup` for tools/mcp-python)"
            )
        problem = protected_mount_problem(host, protected)
        if problem:
            raise McpConfigError(
                f"{where}.mounts.{target}: {source!r} {problem}; a server's mounts must hold nothing a session "
                "may not see (oracles, solutions, the suite, results, git history): keep the server's files in "
                "a folder of their own outside the task suite"
            )
        if _inside(str(host), forbidden):
            raise McpConfigError(f"{where}.mounts.{target}: {source!r} lies inside a task workspace or the results")
        resolved[target] = str(host)
    return resolved


def check_mcp_config(config: dict[str, Any], project_root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Check `mcp_servers` and every arm's MCP and tool-surface keys; return server -> resolved command/mounts.

    Raises McpConfigError naming the key. The config itself is left as it is (rule params must not
    carry host paths).
    """
    project_root = Path(project_root or Path.cwd()).resolve()
    servers = config.get("mcp_servers") or {}
    forbidden = workspace_roots(config, project_root)
    protected = protected_paths(config, project_root) if servers else []
    resolved = {
        name: _resolved_server(name, server, config["model"].get("api_key_env"), project_root, forbidden, protected)
        for name, server in servers.items()
    }
    for arm, definition in config["arms"].items():
        _check_arm(f"config arms.{arm}", definition, servers)
    return resolved


def _resolved_server(
    name: str,
    server: dict[str, Any],
    api_key_env: str | None,
    project_root: Path,
    forbidden: list[str],
    protected: list[tuple[Path, str]],
) -> dict[str, Any]:
    """One `mcp_servers` entry checked: its mounts and command resolved, its roles' tools declared, no credentials
    in its environment."""
    where = f"config mcp_servers.{name}"
    mounts = resolve_mounts(server.get("mounts") or {}, where, project_root, forbidden, protected)
    command = resolve_command(server["command"], where, mounts, forbidden)
    tools = server["tools"]
    for role, allowed in (server.get("roles") or {}).items():
        unknown = [tool for tool in allowed if tool not in tools]
        if unknown:
            raise McpConfigError(f"{where}.roles.{role}: {unknown} are not among the server's tools {tools}")
    for variable in server.get("env") or {}:
        if variable.startswith(("ANTHROPIC_", "CLAUDE_")) or variable == api_key_env:
            raise McpConfigError(
                f"{where}.env.{variable}: an MCP server never gets model credentials or the CLI's own settings"
            )
    return {"command": command, "mounts": mounts}


def _check_arm(where: str, definition: dict[str, Any], servers: dict[str, Any]) -> None:
    """An arm loads only declared servers, grants access only to those, and names only their tools."""
    names = definition.get("mcp_servers") or []
    unknown = [server for server in names if server not in servers]
    if unknown:
        raise McpConfigError(f"{where}.mcp_servers: {unknown} are not declared under `mcp_servers` ({sorted(servers)})")
    if definition.get("no_mcp") and names:
        raise McpConfigError(f"{where}: no_mcp is true but the arm loads MCP servers {names}")
    for server in definition.get("mcp_access") or {}:
        if server not in names:
            raise McpConfigError(f"{where}.mcp_access.{server}: the arm does not load that server ({names})")
    arm_servers = {server: servers[server] for server in names}
    lists = [(f"{where}.disallowed_tools", definition.get("disallowed_tools") or [])]
    for index, session in enumerate(definition["sessions"]):
        lists += [
            (f"{where}.sessions[{index}].tools", session.get("tools") or []),
            (f"{where}.sessions[{index}].disallowed_tools", session.get("disallowed_tools") or []),
        ]
    for key, names_in_list in lists:
        for tool in names_in_list:
            _check_tool_name(key, tool, arm_servers)


def _check_tool_name(key: str, tool: str, arm_servers: dict[str, Any]) -> None:
    try:
        parts = split_tool(tool, arm_servers)
    except McpConfigError as exc:
        raise McpConfigError(f"{key}: {tool!r} names no MCP server this arm loads ({sorted(arm_servers)})") from exc
    if parts and parts[1] != "*" and parts[1] not in arm_servers[parts[0]]["tools"]:
        raise McpConfigError(
            f"{key}: {tool!r}: server {parts[0]!r} declares no tool {parts[1]!r} ({arm_servers[parts[0]]['tools']})"
        )


def arm_servers(config: dict[str, Any], definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The arm's servers with their effective access (`mcp_access` overrides the server's network/workspace)."""
    result: dict[str, dict[str, Any]] = {}
    for name in definition.get("mcp_servers") or []:
        server = dict(config["mcp_servers"][name])
        server.update((definition.get("mcp_access") or {}).get(name, {}))
        server.setdefault("network", False)
        server.setdefault("workspace", "read-only")
        result[name] = server
    return result


@functools.lru_cache(maxsize=64)
def tree_digest(host: str) -> str:
    """SHA-256 over the relative paths and contents of every regular file under `host` (or of the file)."""
    digest = hashlib.sha256()
    root = Path(host)
    paths = (
        [root]
        if root.is_file()
        else sorted(path for path in root.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    )
    for path in paths:
        relative = path.relative_to(root).as_posix().encode() if path != root else b""
        payload = path.read_bytes()
        for frame in (relative, payload):
            digest.update(len(frame).to_bytes(8, "big"))
            digest.update(frame)
    return digest.hexdigest()


def cache_key(config: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    """What of the arm's MCP servers can change a cell's outcome: their definitions and the digests of their
    mounted trees (never host paths)."""
    servers = arm_servers(config, definition)
    if not servers:
        return {}
    resolved = check_mcp_config(config)
    return {
        name: {
            **server,
            "mount_digests": {target: tree_digest(host) for target, host in resolved[name]["mounts"].items()},
        }
        for name, server in servers.items()
    }


# ---------------------------------------------------------------------------------------------------------
# Tool surface


def session_surface(
    config: dict[str, Any], definition: dict[str, Any], session: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """(tools, disallowed tools) of one session: `tools` go to --tools and --allowedTools.

    Built-ins come from the session's `tools` (else `agent.tools`). MCP tools come from the session's
    `tools` when it names any, else from each server's `roles` entry for the session's role (else all
    the server's tools). Every declared tool of a loaded server that the session may not use is
    disallowed, so it is neither offered nor callable.
    """
    servers = arm_servers(config, definition)
    requested = list(session.get("tools") or config["agent"]["tools"])
    builtins = [tool for tool in requested if not tool.startswith(MCP_PREFIX)]
    explicit = [tool for tool in session.get("tools") or [] if tool.startswith(MCP_PREFIX)]
    mcp_tools: list[str] = []
    for name, server in servers.items():
        if explicit:
            chosen: list[str] = []
            for tool in explicit:
                parts = split_tool(tool, servers)
                if parts and parts[0] == name:
                    chosen += server["tools"] if parts[1] == "*" else [parts[1]]
        else:
            chosen = (server.get("roles") or {}).get(session["role"], server["tools"])
        mcp_tools += [tool_name(name, tool) for tool in server["tools"] if tool in chosen]
    disallowed = [*(definition.get("disallowed_tools") or []), *(session.get("disallowed_tools") or [])]
    for name, server in servers.items():
        disallowed += [tool_name(name, tool) for tool in server["tools"] if tool_name(name, tool) not in mcp_tools]
    disallowed = list(dict.fromkeys(disallowed))
    tools = [tool for tool in [*builtins, *mcp_tools] if tool not in disallowed]
    return tools, disallowed


# ---------------------------------------------------------------------------------------------------------
# --mcp-config


def mcp_config_json(servers: dict[str, dict[str, Any]], server_argv: Callable[[str, dict[str, Any]], list[str]]) -> str:
    """The `--mcp-config` document: every server as a stdio entry whose argv `server_argv(name, server)` builds.

    Nothing in it carries a credential: the server's environment is set inside its argv (`env -i`).
    """
    document: dict[str, dict[str, Any]] = {"mcpServers": {}}
    for name, server in servers.items():
        argv = server_argv(name, server)
        document["mcpServers"][name] = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def launcher_name(server: str) -> str:
    """A file name for a server's launcher (server names are free text): its digest."""
    return "server-" + hashlib.sha256(server.encode()).hexdigest()[:16]


def server_environment(server: dict[str, Any]) -> dict[str, str]:
    """The whole environment of a server process: a minimal base plus the server's `env` allow list."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        **{name: str(value) for name, value in (server.get("env") or {}).items()},
    }


# ---------------------------------------------------------------------------------------------------------
# Evidence


def init_server_status(events: list[dict[str, Any]]) -> dict[str, str] | None:
    """Server name -> status from the first `system/init` event; None without an init event."""
    for event in events:
        if event.get("type") == "system" and event.get("subtype") == "init":
            entries = event.get("mcp_servers")
            status: dict[str, str] = {}
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    status[entry["name"]] = str(entry.get("status"))
            return status
    return None


def init_tools(events: list[dict[str, Any]]) -> list[str] | None:
    for event in events:
        if event.get("type") == "system" and event.get("subtype") == "init":
            tools = event.get("tools")
            return [tool for tool in tools if isinstance(tool, str)] if isinstance(tools, list) else []
    return None


def failed_servers(events: list[dict[str, Any]], expected: list[str]) -> dict[str, str]:
    """Expected servers that `system/init` does not show as connected: name -> status ("missing" if absent)."""
    status = init_server_status(events)
    if status is None:
        return {}
    return {name: status.get(name, "missing") for name in expected if status.get(name) != "connected"}


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block.get("text", "") for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def is_error_envelope(content: Any) -> bool:
    """Whether a successful tool result transported an error: a JSON object with an `error` (or `ok: false`),
    directly or inside the SDK's `{"result": ...}` wrapper."""
    text = _result_text(content).strip()
    for _ in range(2):
        if not text.startswith("{"):
            return False
        try:
            value = json.loads(text)
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
        if value.get("error") not in (None, "", False) or value.get("ok") is False or value.get("isError") is True:
            return True
        inner = value.get("result")
        if isinstance(inner, dict):
            text = json.dumps(inner)
        elif isinstance(inner, str):
            text = inner.strip()
        else:
            return False
    return False


def mcp_counts(events: list[dict[str, Any]], servers: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """(uses, semantic errors) per server: tool calls named `mcp__<server>__…`, and their results that are
    `is_error` or carry an error envelope."""
    prefixes = {tool_prefix(server): server for server in servers}
    uses = dict.fromkeys(servers, 0)
    errors = dict.fromkeys(servers, 0)
    pending: dict[str, str] = {}
    for event in events:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                for prefix, server in prefixes.items():
                    if block["name"].startswith(prefix):
                        uses[server] += 1
                        if isinstance(block.get("id"), str):
                            pending[block["id"]] = server
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in pending:
                server = pending.pop(block["tool_use_id"])
                if block.get("is_error") is True or is_error_envelope(block.get("content")):
                    errors[server] += 1
    return uses, errors


def server_log_tail(home: Path, server: str, limit: int = MAX_LOG_TAIL_CHARS) -> str:
    """The error lines (server stderr, connection failures) of the CLI's per-server log in a session home.

    Diagnostics only: the home is the agent's to write, so this never decides anything.
    """
    cache = home / ".cache" / "claude-cli-nodejs"
    lines: list[str] = []
    try:
        logs = sorted(cache.glob(f"*/mcp-logs-{server}/*.jsonl"))[-3:]
    except OSError:
        return ""
    for log in logs:
        try:
            if log.is_symlink() or log.stat().st_size > 4 * 1024 * 1024:
                continue
            raw = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            text = entry.get("error") or entry.get("debug")
            if isinstance(text, str) and ("error" in entry or "fail" in text.lower() or "exit" in text.lower()):
                lines.append(text.strip())
    return "\n".join(lines)[-limit:]


# ---------------------------------------------------------------------------------------------------------
# "No MCP" guidance


def strip_guidance(clone: Path, server_names: list[str]) -> list[str]:
    """Rewrite the workspace's guidance files without the lines that mention MCP tools or the given servers.

    Returns the rewritten paths (relative). A symlinked or oversized guidance file is left alone.
    """
    words = [re.escape(name) for name in server_names if name]
    pattern = re.compile(r"\bmcp\b|mcp__" + "".join(f"|\\b{word}\\b" for word in words), re.IGNORECASE)
    changed: list[str] = []
    for relative in GUIDANCE_FILES:
        path = clone / relative
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_GUIDANCE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        kept = [line for line in text.splitlines(keepends=True) if not pattern.search(line)]
        if len(kept) != len(text.splitlines(keepends=True)):
            path.write_text("".join(kept), encoding="utf-8")
            changed.append(relative)
    return changed
