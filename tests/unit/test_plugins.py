"""Plugin comparator arms: manifest checks, the pinning digest, qualified skill proof."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from skillbench.execution import (
    plugins,  # noqa: E402
)
from skillbench.execution.agents import claude_code


def make_plugin(root: Path, name: str = "kit", manifest: bool = True) -> Path:
    folder = root / "plugins" / name
    (folder / "skills" / "lean").mkdir(parents=True)
    (folder / "skills" / "lean" / "SKILL.md").write_text("---\nname: lean\ndescription: d\n---\nBody\n")
    if manifest:
        (folder / ".claude-plugin").mkdir()
        (folder / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": name, "version": "1.2.0"}))
    return folder


def config_with(sources: list[str], skill: str = "kit:lean") -> dict:
    return {"arms": {"comp": {"plugins": sources, "sessions": [{"role": "r", "prompt": "p", "skill": skill}]}}}


def test_plugins_are_read_with_name_version_and_digest(tmp_path):
    make_plugin(tmp_path)
    loaded = plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)["comp"]
    assert [(plugin["name"], plugin["version"]) for plugin in loaded] == [("kit", "1.2.0")]
    assert plugins.provenance(loaded) == [{"name": "kit", "version": "1.2.0", "digest": loaded[0]["digest"]}]


def test_any_change_to_the_plugin_changes_its_digest(tmp_path):
    folder = make_plugin(tmp_path)
    before = plugins.plugin_digest(folder)
    (folder / "skills" / "lean" / "SKILL.md").write_text("---\nname: lean\ndescription: d\n---\nBody 2\n")
    changed = plugins.plugin_digest(folder)
    (folder / "skills" / "lean" / "extra.md").write_text("more")
    assert len({before, changed, plugins.plugin_digest(folder)}) == 3


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda root: make_plugin(root, manifest=False),
            "config arms.comp.plugins[0]: plugin folder 'plugins/kit' has no .claude-plugin/plugin.json",
        ),
        (lambda root: None, "config arms.comp.plugins[0]: plugin folder 'plugins/kit' does not exist"),
    ],
)
def test_missing_plugin_or_manifest_fails_naming_the_key(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(plugins.PluginError) as caught:
        plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)
    assert message in str(caught.value)


def test_invalid_manifest_and_unknown_plugin_skill_fail(tmp_path):
    folder = make_plugin(tmp_path)
    with pytest.raises(plugins.PluginError, match=r"sessions\[0\].skill: 'other:lean' names plugin 'other'"):
        plugins.check_plugins(config_with(["plugins/kit"], skill="other:lean"), tmp_path)
    with pytest.raises(plugins.PluginError, match="has no skills/nope/SKILL.md"):
        plugins.check_plugins(config_with(["plugins/kit"], skill="kit:nope"), tmp_path)
    (folder / ".claude-plugin" / "plugin.json").write_text('{"name": "has space"}')
    with pytest.raises(plugins.PluginError, match="`name` must be kebab-case"):
        plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)


def _skill_stream(requested: str) -> list[dict]:
    return [
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": requested}}]},
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"Launching skill: {requested}"}]
            },
        },
    ]


@pytest.mark.parametrize(("requested", "proved"), [("kit:lean", True), ("lean", True), ("other:lean", False)])
def test_plugin_skill_proof_needs_the_plugin_qualified_name(requested, proved):
    assert claude_code.skill_was_invoked(_skill_stream(requested), "kit:lean") is proved


# ─── What a comparator plugin may hold ──────────────────────────────────────

PROCESS_REFUSAL = "plugin processes are not supported"


def refusal(tmp_path: Path) -> str:
    with pytest.raises(plugins.PluginError) as caught:
        plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)
    return str(caught.value)


def write_manifest(folder: Path, document: dict) -> None:
    (folder / ".claude-plugin" / "plugin.json").write_text(json.dumps(document))


@pytest.mark.parametrize(
    "name",
    [
        "x/../../../home/agent/.claude",
        "../kit",
        "Kit",
        "kit_tools",
        "-kit",
        "kit.v2",
        "k" * 65,
        "",
        "kit\nother",
    ],
)
def test_a_manifest_name_that_is_not_kebab_case_is_refused(tmp_path, name):
    write_manifest(make_plugin(tmp_path), {"name": name, "version": "1.0.0"})
    message = refusal(tmp_path)
    assert "config arms.comp.plugins[0]: plugins/kit/.claude-plugin/plugin.json: `name` must be kebab-case" in message


@pytest.mark.parametrize("key", sorted(plugins.PROCESS_KEYS))
def test_a_manifest_declaring_a_plugin_process_is_refused(tmp_path, key):
    write_manifest(make_plugin(tmp_path), {"name": "kit", key: {"x": {"command": "python3"}}})
    message = refusal(tmp_path)
    assert f"plugins/kit/.claude-plugin/plugin.json: the manifest key `{key}` declares a plugin process" in message
    assert PROCESS_REFUSAL in message


def test_an_unknown_manifest_key_is_refused(tmp_path):
    write_manifest(make_plugin(tmp_path), {"name": "kit", "settings": {"env": {"ANTHROPIC_BASE_URL": "http://x"}}})
    assert "unknown manifest key `settings`" in refusal(tmp_path)


@pytest.mark.parametrize(
    "entry",
    [".lsp.json", ".mcp.json", "hooks/hooks.json", "bin/helper", "commands/go.md", "agents/a.md", "monitors/m.json"],
)
def test_a_plugin_file_or_folder_that_starts_a_process_is_refused(tmp_path, entry):
    folder = make_plugin(tmp_path)
    (folder / entry).parent.mkdir(parents=True, exist_ok=True)
    (folder / entry).write_text("{}")
    message = refusal(tmp_path)
    assert f"config arms.comp.plugins[0]: plugins/kit/{entry.split('/')[0]} declares a plugin process" in message
    assert PROCESS_REFUSAL in message


@pytest.mark.parametrize("entry", ["settings.json", ".claude-plugin/marketplace.json", "skills/UPPER/SKILL.md", "x/y"])
def test_anything_outside_the_allow_list_is_refused(tmp_path, entry):
    folder = make_plugin(tmp_path)
    (folder / entry).parent.mkdir(parents=True, exist_ok=True)
    (folder / entry).write_text("{}")
    assert f"plugin plugins/kit: {entry} is not allowed; a comparator plugin may hold only" in refusal(tmp_path)


def test_symlinks_in_a_plugin_are_refused(tmp_path):
    folder = make_plugin(tmp_path)
    (folder / "skills" / "lean" / "notes.md").symlink_to("/etc/hostname")
    assert "skills/lean/notes.md is not a regular file (symlinks are refused)" in refusal(tmp_path)


def test_readme_and_license_files_are_allowed(tmp_path):
    folder = make_plugin(tmp_path)
    for name in ("README.md", "LICENSE", "license.txt"):
        (folder / name).write_text("text")
    write_manifest(folder, {"name": "kit", "version": "1.0", "description": "d", "keywords": ["a"], "license": "MIT"})
    assert [plugin["name"] for plugin in plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)["comp"]] == [
        "kit"
    ]


def test_the_staged_copy_holds_exactly_the_digested_files_read_only(tmp_path):
    make_plugin(tmp_path)
    (plugin,) = plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)["comp"]

    copy = plugins.stage_plugin(plugin, tmp_path / "staged")

    files = sorted(path.relative_to(copy).as_posix() for path in copy.rglob("*") if path.is_file())
    assert files == [".claude-plugin/plugin.json", "skills/lean/SKILL.md"]
    assert plugins.plugin_digest(copy) == plugin["digest"]
    assert all(not path.stat().st_mode & 0o222 for path in copy.rglob("*"))


def test_a_plugin_changed_after_it_was_read_is_not_staged(tmp_path):
    folder = make_plugin(tmp_path)
    (plugin,) = plugins.check_plugins(config_with(["plugins/kit"]), tmp_path)["comp"]
    (folder / ".lsp.json").write_text('{"py": {"command": "python3"}}')
    with pytest.raises(plugins.PluginError, match=PROCESS_REFUSAL):
        plugins.stage_plugin(plugin, tmp_path / "staged")
    (folder / ".lsp.json").unlink()
    (folder / "skills" / "lean" / "SKILL.md").write_text("---\nname: lean\ndescription: d\n---\nSwapped\n")
    with pytest.raises(plugins.PluginError, match="changed after it was read"):
        plugins.stage_plugin(plugin, tmp_path / "staged-2")
    assert not (tmp_path / "staged-2").exists()
