"""Plugin comparator arms: manifest checks, the pinning digest, qualified skill proof."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from skillbench.execution import (
    plugins,  # noqa: E402
    sessions,  # noqa: E402
)


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
    with pytest.raises(plugins.PluginError, match="needs a `name` without spaces"):
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
    assert sessions.skill_was_invoked(_skill_stream(requested), "kit:lean") is proved
