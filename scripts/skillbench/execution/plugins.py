"""Claude Code plugins an arm loads (`--plugin-dir`): checks, the manifest digest that pins them, mounts.

A plugin is a folder with `.claude-plugin/plugin.json` (a `name`, optionally a `version`) and its
skills under `skills/<skill>/SKILL.md`; the CLI lists them as `<plugin>:<skill>`. The CLI loads a
folder without a manifest under the folder's name, so skillbench refuses one at parse time: a
comparator arm must be pinned. The digest covers every file of the plugin (framed paths and
contents), so any change to the plugin changes the arm's cells and their rows.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from skillbench.base.artifacts import framed_digest
from skillbench.base.errors import SkillbenchError

MANIFEST = ".claude-plugin/plugin.json"
SANDBOX_PLUGINS = "/opt/skillbench-plugins"
MAX_PLUGIN_BYTES = 16 * 1024 * 1024
MAX_PLUGIN_FILES = 2000


class PluginError(SkillbenchError, ValueError):
    """A plugin folder or its manifest is missing or invalid."""


def plugin_digest(root: Path) -> str:
    """Framed SHA-256 over every file of the plugin (relative path, then content), symlinks refused."""
    frames: list[bytes] = []
    total = 0
    files = 0
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted(names):
            path = Path(directory) / name
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                raise PluginError(f"plugin {root}: {path.relative_to(root)} is not a regular file")
            files += 1
            total += info.st_size
            if files > MAX_PLUGIN_FILES or total > MAX_PLUGIN_BYTES:
                raise PluginError(f"plugin {root} is larger than {MAX_PLUGIN_FILES} files / {MAX_PLUGIN_BYTES} bytes")
            frames += [path.relative_to(root).as_posix().encode(), path.read_bytes()]
    return framed_digest(frames)


def read_plugin(source: str, where: str, project_root: Path) -> dict[str, Any]:
    """{name, version, digest, path} of one plugin folder; PluginError naming `where` when it is not loadable."""
    root = (project_root / source).resolve()
    if not root.is_dir():
        raise PluginError(f"{where}: plugin folder {source!r} does not exist (relative to {project_root})")
    manifest = root / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        raise PluginError(
            f"{where}: plugin folder {source!r} has no {MANIFEST}; add one with a `name` so the "
            "arm is pinned to a known plugin"
        )
    try:
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PluginError(f"{where}: {source}/{MANIFEST} is not valid JSON ({exc})") from exc
    name = document.get("name") if isinstance(document, dict) else None
    if not isinstance(name, str) or not name or " " in name or ":" in name:
        raise PluginError(f"{where}: {source}/{MANIFEST} needs a `name` without spaces or colons")
    version = document.get("version")
    return {
        "name": name,
        "version": version if isinstance(version, str) else None,
        "digest": plugin_digest(root),
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


def sandbox_path(plugin: dict[str, Any], index: int) -> str:
    return f"{SANDBOX_PLUGINS}/{index}-{plugin['name']}"
