"""Claude Code plugins an arm loads (`--plugin-dir`): checks, the manifest digest that pins them, mounts.

A plugin is a folder with `.claude-plugin/plugin.json` (a `name`, optionally a `version`) and its
skills under `skills/<skill>/SKILL.md`; the CLI lists them as `<plugin>:<skill>`. The CLI loads a
folder without a manifest under the folder's name, so skillbench refuses one at parse time: a
comparator arm must be pinned. The digest covers every file of the plugin (framed paths and
contents), so any change to the plugin changes the arm's cells and their rows.

A comparator plugin is skills and nothing that runs: the folder may hold only the manifest (with
the keys of `MANIFEST_KEYS`), `skills/<skill>/…` and README/LICENSE files, all regular files. The
CLI starts the programs a plugin declares (LSP servers, MCP servers, hooks, monitors, commands,
agents, `bin/`) with the session's environment and network, so every such entry or manifest key is
refused by `refuse_plugin_process`, the one place that would change if plugin processes are ever
allowed (contained in a nested sandbox). The manifest `name` is kebab-case (`PLUGIN_NAME`) and never
enters a path: the CLI sees the plugin at `/opt/skillbench-plugins/<index>`, and `stage_plugin`
makes the harness's own copy of exactly the allow-listed, digested files for it to see.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from skillbench.base.artifacts import framed_digest, read_regular_file
from skillbench.base.errors import SkillbenchError

MANIFEST = ".claude-plugin/plugin.json"
SANDBOX_PLUGINS = "/opt/skillbench-plugins"
MAX_PLUGIN_BYTES = 16 * 1024 * 1024
MAX_PLUGIN_FILES = 2000
MAX_MANIFEST_BYTES = 64 * 1024
MAX_VERSION_CHARS = 128
PLUGIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
SKILL_FOLDER = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MANIFEST_KEYS = frozenset({"name", "version", "description", "author", "homepage", "repository", "license", "keywords"})
# What makes the CLI start a plugin's own programs: manifest keys, and files or folders at the plugin's root.
PROCESS_KEYS = frozenset({"lspServers", "mcpServers", "hooks", "monitors", "commands", "agents"})
PROCESS_ENTRIES = frozenset({".lsp.json", ".mcp.json", "hooks", "bin", "commands", "agents", "monitors"})
DOCUMENT_FILE = re.compile(r"^(README|LICENSE|LICENCE|COPYING|NOTICE)(\.(md|txt|rst))?$", re.IGNORECASE)


class PluginError(SkillbenchError, ValueError):
    """A plugin folder or its manifest is missing or invalid."""


def refuse_plugin_process(where: str, what: str) -> None:
    """Refuse a plugin entry that makes the CLI start a program. The one place to change if plugin processes
    are ever supported (they would need a nested sandbox like MCP servers)."""
    raise PluginError(
        f"{where}: {what} declares a plugin process (LSP servers, MCP servers, hooks, monitors, commands, agents "
        "and bin/ are started by the CLI with the session's environment); plugin processes are not supported: "
        "a comparator plugin may hold only .claude-plugin/plugin.json, skills/<skill>/… and README/LICENSE files"
    )


def allowed_entry(relative: str) -> bool:
    """Whether a file (a POSIX path relative to the plugin folder) may be part of a comparator plugin."""
    parts = PurePosixPath(relative).parts
    if relative == MANIFEST:
        return True
    if len(parts) == 1:
        return bool(DOCUMENT_FILE.match(parts[0]))
    return len(parts) >= 3 and parts[0] == "skills" and bool(SKILL_FOLDER.match(parts[1]))


def plugin_files(root: Path, where: str, source: str) -> list[str]:
    """The plugin's files (relative POSIX paths, sorted), each allowed; PluginError naming the first that is not."""
    files: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted(subdirs + names):
            path = Path(directory) / name
            relative = path.relative_to(root).as_posix()
            if path.parent == root and name in PROCESS_ENTRIES:
                refuse_plugin_process(where, f"{source}/{relative}")
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise PluginError(f"{where}: plugin {source}: {relative} is not a regular file (symlinks are refused)")
            if not allowed_entry(relative):
                raise PluginError(
                    f"{where}: plugin {source}: {relative} is not allowed; a comparator plugin may hold only "
                    ".claude-plugin/plugin.json, skills/<skill>/… and README/LICENSE files"
                )
            files.append(relative)
            if len(files) > MAX_PLUGIN_FILES:
                raise PluginError(f"{where}: plugin {source} has more than {MAX_PLUGIN_FILES} files")
    return sorted(files)


def _file_frames(root: Path, files: list[str], where: str) -> list[bytes]:
    """(relative path, content) frames of every file, read without following links, bounded in total."""
    frames: list[bytes] = []
    total = 0
    for relative in files:
        content = read_regular_file(
            root / relative, MAX_PLUGIN_BYTES, what=f"plugin file {relative}", error=PluginError
        )
        total += len(content)
        if total > MAX_PLUGIN_BYTES:
            raise PluginError(f"{where}: plugin {root} is larger than {MAX_PLUGIN_BYTES} bytes")
        frames += [relative.encode(), content]
    return frames


def plugin_digest(root: Path, where: str = "plugin") -> str:
    """Framed SHA-256 over every file of the plugin (relative path, then content); only allowed regular files."""
    return framed_digest(_file_frames(root, plugin_files(root, where, str(root)), where))


def check_manifest(document: Any, where: str) -> tuple[str, str | None]:
    """(name, version) of a manifest holding only known keys, a kebab-case name and no plugin process."""
    if not isinstance(document, dict):
        raise PluginError(f"{where}: the manifest must be a JSON object")
    for key in sorted(document):
        if key in PROCESS_KEYS:
            refuse_plugin_process(where, f"the manifest key `{key}`")
        if key not in MANIFEST_KEYS:
            raise PluginError(f"{where}: unknown manifest key `{key}` (allowed: {', '.join(sorted(MANIFEST_KEYS))})")
    name = document.get("name")
    if not isinstance(name, str) or not PLUGIN_NAME.match(name):
        raise PluginError(
            f"{where}: `name` must be kebab-case ({PLUGIN_NAME.pattern}), got {name!r}; the name labels the "
            "plugin's skills (`<name>:<skill>`) and nothing else"
        )
    version = document.get("version")
    if version is not None and (
        not isinstance(version, str)
        or len(version) > MAX_VERSION_CHARS
        or any(ord(char) < 32 or ord(char) == 127 for char in version)
    ):
        raise PluginError(f"{where}: `version` must be a one-line string of at most {MAX_VERSION_CHARS} characters")
    return name, version


def read_plugin(source: str, where: str, project_root: Path) -> dict[str, Any]:
    """{name, version, digest, path, source} of one plugin folder; PluginError naming `where` when it is not
    loadable or holds anything but the allow-listed files."""
    root = (project_root / source).resolve()
    if not root.is_dir():
        raise PluginError(f"{where}: plugin folder {source!r} does not exist (relative to {project_root})")
    manifest = root / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        raise PluginError(
            f"{where}: plugin folder {source!r} has no {MANIFEST}; add one with a `name` so the "
            "arm is pinned to a known plugin"
        )
    files = plugin_files(root, where, source)
    payload = read_regular_file(manifest, MAX_MANIFEST_BYTES, what=f"{source}/{MANIFEST}", error=PluginError)
    try:
        document = json.loads(payload.decode("utf-8"))
    except ValueError as exc:
        raise PluginError(f"{where}: {source}/{MANIFEST} is not valid JSON ({exc})") from exc
    name, version = check_manifest(document, f"{where}: {source}/{MANIFEST}")
    return {
        "name": name,
        "version": version,
        "digest": framed_digest(_file_frames(root, files, where)),
        "path": str(root),
        "source": source,
    }


def check_plugins(config: dict[str, Any], project_root: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every arm's plugins (arm -> [{name, version, digest, path, source}]); a session's `plugin:skill` must
    name one of them and a skill folder it has."""
    project_root = Path(project_root or Path.cwd()).resolve()
    result: dict[str, list[dict[str, Any]]] = {}
    for arm, definition in config["arms"].items():
        loaded = []
        for index, source in enumerate(definition.get("plugins") or []):
            loaded.append(read_plugin(source, f"config arms.{arm}.plugins[{index}]", project_root))
        names = [plugin["name"] for plugin in loaded]
        if len(set(names)) != len(names):
            raise PluginError(f"config arms.{arm}.plugins: two plugins share a name ({names})")
        result[arm] = loaded
        for index, session in enumerate(definition["sessions"]):
            skill = session.get("skill")
            if not skill or ":" not in skill:
                continue
            plugin, _, name = skill.partition(":")
            match = next((entry for entry in loaded if entry["name"] == plugin), None)
            if match is None:
                raise PluginError(
                    f"config arms.{arm}.sessions[{index}].skill: {skill!r} names plugin {plugin!r}, "
                    f"which the arm does not load ({names})"
                )
            if not (Path(match["path"]) / "skills" / name / "SKILL.md").is_file():
                raise PluginError(
                    f"config arms.{arm}.sessions[{index}].skill: plugin {plugin!r} has no skills/{name}/SKILL.md"
                )
    return result


def arm_plugins(config: dict[str, Any], arm: str, project_root: Path | None = None) -> list[dict[str, Any]]:
    """The plugins one incumbent arm loads, read now (name, version, digest, host path)."""
    project_root = Path(project_root or Path.cwd()).resolve()
    return [
        read_plugin(source, f"config arms.{arm}.plugins[{index}]", project_root)
        for index, source in enumerate(config["arms"][arm].get("plugins") or [])
    ]


def provenance(plugins: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What rows and cache keys record of plugins: name, version, digest (never host paths)."""
    return [{"name": plugin["name"], "version": plugin["version"], "digest": plugin["digest"]} for plugin in plugins]


def sandbox_path(index: int) -> str:
    """Where the CLI sees an arm's `index`-th plugin. Built from the index alone, so no manifest can name a mount
    point."""
    return f"{SANDBOX_PLUGINS}/{index}"


def stage_plugin(plugin: dict[str, Any], destination: Path) -> Path:
    """The harness's copy of a read plugin at `destination` (a new folder): exactly its allow-listed files,
    read again without following links and checked against the digest that pins the arm, world-readable and
    read-only. The CLI is given this copy, never the plugin folder itself."""
    root = Path(plugin["path"])
    where = f"plugin {plugin['source']}"
    files = plugin_files(root, where, plugin["source"])
    frames = _file_frames(root, files, where)
    if framed_digest(frames) != plugin["digest"]:
        raise PluginError(f"{where} changed after it was read (digest mismatch); rerun so the arm is pinned again")
    destination.mkdir(mode=0o755)
    for relative, content in zip(frames[0::2], frames[1::2], strict=True):
        path = destination / relative.decode()
        for parent in reversed(path.relative_to(destination).parents[:-1]):
            (destination / parent).mkdir(mode=0o755, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o444)
    for directory, _subdirs, _names in os.walk(destination, topdown=False):
        os.chmod(directory, 0o555)
    return destination
