"""The Copilot CLI adapter: its command line and home settings, its tool mapping, its install, and the strict
reading of real captured `copilot --output-format json` streams (tests/unit/fixtures/agents/copilot/, recorded from
@github/copilot 1.0.102 offline against the scripted model on a loopback port)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from agentstreams import AgentStreams, encode, partial_skill_read
from skillbench.execution import agents, sessions, wires
from skillbench.execution.agents import copilot

STREAMS = AgentStreams("copilot", "claude-sonnet-4-5", copilot.read_stream)
capture, events, read, request = STREAMS.capture, STREAMS.events, STREAMS.read, STREAMS.request


def offered_tools(argv: list[str]) -> list[str]:
    return argv[argv.index("--available-tools") + 1 :]


# ---------------------------------------------------------------------------------------------------------
# Reading real streams


def test_a_real_session_proves_the_skill_it_loaded_and_counts_its_tools() -> None:
    reading = read(capture("skill-and-tools.jsonl"))
    recorded = events("skill-and-tools.jsonl")
    starts = [event["data"] for event in recorded if event["type"] == "tool.execution_start"]
    completions = {e["data"]["toolCallId"]: e["data"] for e in recorded if e["type"] == "tool.execution_complete"}

    assert reading.stream_error is None and reading.cli_failures == [] and reading.subtype == "success"
    assert reading.session_id == recorded[-1]["sessionId"]
    assert reading.num_turns == sum(1 for event in recorded if event["type"] == "assistant.turn_start") > 1
    assert reading.skill_invoked("demo") is True
    # The second skill call asked for a skill that does not exist: it failed, so it proves nothing.
    failed = [
        s["arguments"]["skill"]
        for s in starts
        if s["toolName"] == "skill" and not completions[s["toolCallId"]]["success"]
    ]
    assert failed and all(reading.skill_invoked(name) is False for name in failed)
    assert reading.skill_invoked("another-skill") is False
    expected: dict[str, int] = {}
    for start in starts:
        name = copilot.HARNESS_NAMES[start["toolName"]]
        expected[name] = expected.get(name, 0) + 1
    assert reading.tool_use_counts == expected and set(expected) <= set(copilot.TOOL_NAMES)
    # Offered: the enabled skills of the first event (the built-in ones the settings disabled are listed, not offered).
    listed = recorded[0]["data"]["skills"]
    assert reading.offered_skills == sorted(skill["name"] for skill in listed if skill["enabled"])
    assert {skill["name"] for skill in listed if not skill["enabled"]} <= set(copilot.BUILTIN_SKILLS)
    # Copilot reports neither tokens nor a price in its stream: the ledger alone meters the session.
    assert reading.cli_cost_usd is None and reading.cli_usage == {}


def test_a_session_whose_tools_were_not_offered_reads_clean_and_proves_no_skill() -> None:
    reading = read(capture("denied-tools.jsonl"))
    recorded = events("denied-tools.jsonl")
    failed = [e["data"] for e in recorded if e["type"] == "tool.execution_complete" and not e["data"]["success"]]
    assert reading.stream_error is None and reading.cli_failures == []
    assert failed and all("does not exist" in data["error"]["message"] for data in failed)
    assert reading.skill_invoked("demo") is False
    assert reading.tool_use_counts == {"Edit": 1, "Bash": 1, "Read": 1}


def test_a_read_of_part_of_the_skill_file_is_no_skill_proof() -> None:
    # Only the skill tool's success proves a skill: a read of its file's first line (or all of it) does not.
    reading = read(partial_skill_read(capture("denied-tools.jsonl"), "/tmp/cop/ws/a.txt", {"view_range": [1, 1]}))
    assert reading.stream_error is None and reading.skill_invoked("demo") is False


def test_a_model_error_ends_the_session_as_the_clis_failure() -> None:
    reading = read(capture("model-error.jsonl"))
    assert reading.stream_error is None and reading.subtype == "error"
    assert reading.cli_failures[0] == "exit code 1"
    assert any("session.error: 400 scripted model" in failure for failure in reading.cli_failures)
    assert reading.skill_invoked("demo") is False


@pytest.mark.parametrize(
    "damage",
    [
        "no-result",
        "two-results",
        "after-result",
        "complete-without-start",
        "duplicate-start",
        "duplicate-complete",
        "no-success-flag",
        "bad-type",
        "no-data",
        "bad-session-id",
        "no-exit-code",
        "bad-skill-list",
    ],
)
def test_a_stream_that_is_no_evidence_is_refused(damage: str) -> None:
    items = events("skill-and-tools.jsonl")
    result = items[-1]
    start_index = next(i for i, e in enumerate(items) if e["type"] == "tool.execution_start")
    complete_index = next(i for i, e in enumerate(items) if e["type"] == "tool.execution_complete")
    if damage == "no-result":
        items = items[:-1]
    elif damage == "two-results":
        items.insert(len(items) - 1, dict(result))
    elif damage == "after-result":
        items.append(items[1])
    elif damage == "complete-without-start":
        del items[start_index]
    elif damage == "duplicate-start":
        items.insert(start_index, items[start_index])
    elif damage == "duplicate-complete":
        items.insert(complete_index, items[complete_index])
    elif damage == "no-success-flag":
        del items[complete_index]["data"]["success"]
    elif damage == "bad-type":
        items[3]["type"] = "Not A Type"
    elif damage == "no-data":
        del items[3]["data"]
    elif damage == "bad-session-id":
        result["sessionId"] = "../etc"
    elif damage == "no-exit-code":
        del result["exitCode"]
    elif damage == "bad-skill-list":
        items[0]["data"]["skills"] = [{"enabled": True}]
    reading = read(encode(items))
    assert reading.stream_error is not None, damage
    assert reading.skill_invoked("demo") is False


def test_no_capture_an_empty_one_and_an_overflow_are_no_evidence() -> None:
    assert read(None).stream_error is not None
    assert read(b"").stream_error is not None
    assert "exceeds" in str(read(capture("skill-and-tools.jsonl"), overflow=True).stream_error)


def test_a_stream_without_a_skill_listing_offers_none_known() -> None:
    items = [event for event in events("denied-tools.jsonl") if event["type"] != "session.skills_loaded"]
    reading = read(encode(items))
    assert reading.stream_error is None and reading.offered_skills is None


# ---------------------------------------------------------------------------------------------------------
# The command line, the environment and the home


def test_the_command_runs_headless_offline_with_only_the_sessions_tools() -> None:
    argv = copilot.cli_command("/opt/claude/copilot/copilot", request())
    assert argv[:3] == ["/usr/bin/env", "COPILOT_PKG_CACHE_HOME=/opt/claude/copilot", "/opt/claude/copilot/copilot"]
    for flag in ("--allow-all-tools", "--no-ask-user", "--no-auto-update", "--no-custom-instructions"):
        assert flag in argv
    assert "--disable-builtin-mcps" in argv and "--no-remote" in argv
    # Never the flags that trust the folder or open every path.
    assert not {"--allow-all", "--yolo", "--allow-all-paths", "--trust-folder", "--allow-all-urls"} & set(argv)
    assert argv[argv.index("--output-format") + 1] == "json" and argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert "-p" not in argv and "--prompt" not in argv  # the prompt goes on stdin
    tools = offered_tools(argv)
    assert set(tools) == {
        "view",
        "create",
        "edit",
        "bash",
        "read_bash",
        "stop_bash",
        "list_bash",
        "skill",
        "grep",
        "glob",
    }
    assert not {"task", "sql", "fetch_copilot_cli_documentation", "write_agent"} & set(tools)
    assert "--reasoning-effort" not in argv
    effort = copilot.cli_command("c", request(effort="high"))
    assert effort[effort.index("--reasoning-effort") + 1] == "high"


def test_the_token_reaches_the_cli_only_through_its_environment() -> None:
    adapter = copilot.Copilot()
    env = adapter.environment(base_url="http://127.0.0.1:9", token="tok-123", shell_prefix="/p")
    assert env[copilot.KEY_VARIABLE] == "tok-123" and env["COPILOT_PROVIDER_BASE_URL"] == "http://127.0.0.1:9"
    assert env["COPILOT_OFFLINE"] == "true" and env["COPILOT_PROVIDER_TYPE"] == "anthropic"
    assert "COPILOT_ALLOW_ALL" not in env  # its "true" would trust the folder
    assert "COPILOT_PROVIDER_BASE_URL" not in adapter.environment(base_url=None, token="t", shell_prefix="/p")
    argv = adapter.command("/opt/claude/copilot/copilot", request())
    files = adapter.home_files(request())
    assert not any("tok-123" in arg for arg in argv) and not any("tok-123" in text for text in files.values())


def test_the_home_settings_disable_hooks_builtin_skills_and_every_other_skill_folder() -> None:
    files = copilot.Copilot().home_files(request())
    assert set(files) == {".copilot/settings.json"}
    settings = json.loads(files[".copilot/settings.json"])
    assert settings["disableAllHooks"] is True and settings["autoUpdate"] is False
    assert settings["disabledSkills"] == list(copilot.BUILTIN_SKILLS)
    ignored = settings["ignoredSkillsLocations"]
    assert "/workspace/.github/skills" in ignored and "/workspace/.agents/skills" in ignored
    assert not any(location.endswith(".claude/skills") for location in ignored)
    assert "trustedFolders" not in settings
    # A session without the skill tool is offered no skills at all (Copilot would still list them to the model).
    for changes in ({"disallowed_tools": ["Skill"]}, {"tools": ["Read", "Grep", "Glob"]}):
        without = json.loads(copilot.Copilot().home_files(request(**changes))[".copilot/settings.json"])
        assert "/workspace/.claude/skills" in without["ignoredSkillsLocations"], changes


def test_a_read_only_session_and_a_baseline_offer_only_what_they_may_use() -> None:
    readonly = offered_tools(copilot.cli_command("c", request(tools=["Read", "Grep", "Glob"])))
    assert readonly == ["view", "grep", "glob"]
    baseline = offered_tools(copilot.cli_command("c", request(disallowed_tools=["Skill"])))
    assert "skill" not in baseline and "bash" in baseline
    with pytest.raises(ValueError, match="at least one tool"):
        copilot.cli_command("c", request(tools=["Skill"], disallowed_tools=["Skill"]))
    with pytest.raises(ValueError, match="no counterpart"):
        copilot.cli_command("c", request(tools=["Read", "mcp__probe__find"]))


def test_an_arm_with_mcp_servers_or_plugins_is_refused() -> None:
    with pytest.raises(ValueError, match="MCP"):
        copilot.cli_command("c", request(mcp_config='{"mcpServers":{"probe":{"command":"x"}}}'))
    with pytest.raises(ValueError, match="plugins"):
        copilot.cli_command("c", request(plugin_dirs=["/opt/plugins/kit"]))


def test_preflight_refuses_a_copilot_arm_with_mcp_servers_or_plugins() -> None:
    from skillbench.experiment.arms import ArmError
    from skillbench.preflight import check_arm_agents

    session = [{"role": "direct", "prompt": "direct"}]
    check_arm_agents({"arms": {"cp": {"agent": "copilot", "sessions": session}}})
    for key, value in (("mcp_servers", ["probe"]), ("plugins", ["tasks/demo/plugins/kit"])):
        arm = {"agent": "copilot", "sessions": session, key: value}
        with pytest.raises(ArmError, match=f"copilot adapter does not give its sessions {key}"):
            check_arm_agents({"arms": {"cp": arm}})


# ---------------------------------------------------------------------------------------------------------
# Tools and install


def test_tool_calls_in_the_harness_terms_map_onto_copilots_tools() -> None:
    adapter = copilot.Copilot()
    assert adapter.tool_form("Read", {"file_path": "/w/a.py"}) == ("view", {"path": "/w/a.py"})
    assert adapter.tool_form("Read", {"file_path": "/w/a", "offset": 5, "limit": 10}) == (
        "view",
        {"path": "/w/a", "view_range": [5, 14]},
    )
    assert adapter.tool_form("Read", {"file_path": "/w/a", "offset": 7}) == (
        "view",
        {"path": "/w/a", "view_range": [7, -1]},
    )
    assert adapter.tool_form("Write", {"file_path": "/w/b", "content": "x"}) == (
        "create",
        {"path": "/w/b", "file_text": "x"},
    )
    assert adapter.tool_form("Edit", {"file_path": "/w/a", "old_string": "a", "new_string": "b"}) == (
        "edit",
        {"path": "/w/a", "old_str": "a", "new_str": "b"},
    )
    assert adapter.tool_form("Bash", {"command": "ls", "description": "list"}) == (
        "bash",
        {"command": "ls", "description": "list"},
    )
    name, arguments = adapter.tool_form("Bash", {"command": "ls -la"})
    assert name == "bash" and arguments["description"]  # Copilot requires a description
    assert adapter.tool_form("Skill", {"skill": "change-plan"}) == ("skill", {"skill": "change-plan"})
    assert adapter.tool_form("Grep", {"pattern": "x", "path": "src", "glob": "*.py"}) == (
        "grep",
        {"pattern": "x", "paths": "src", "glob": "*.py"},
    )
    assert adapter.tool_form("Glob", {"pattern": "**/*.py"}) == ("glob", {"pattern": "**/*.py"})
    assert adapter.tool_form("mcp__probe__find", {"q": 1}) == ("mcp__probe__find", {"q": 1})
    # Every harness tool maps onto the Copilot tool the counts name it back from.
    assert {copilot.HARNESS_NAMES[adapter.tool_form(name, {})[0]] for name in copilot.TOOL_NAMES} == set(
        copilot.TOOL_NAMES
    )


def test_a_write_of_an_existing_file_rewrites_it_with_edit_and_a_new_file_is_created() -> None:
    files = {"/w/old.py": "a = 1\nb = 2\n", "/w/empty.py": ""}
    adapter = copilot.Copilot()
    # Copilot's create refuses a path that exists: a rewrite is an edit of the whole current text.
    assert adapter.tool_form("Write", {"file_path": "/w/old.py", "content": "c = 3\n"}, files.get) == (
        "edit",
        {"path": "/w/old.py", "old_str": "a = 1\nb = 2\n", "new_str": "c = 3\n"},
    )
    assert adapter.tool_form("Write", {"file_path": "/w/new.py", "content": "d\n"}, files.get) == (
        "create",
        {"path": "/w/new.py", "file_text": "d\n"},
    )
    # An empty file has no text to match: the call stays a create (which Copilot refuses, as it would).
    assert adapter.tool_form("Write", {"file_path": "/w/empty.py", "content": "e"}, files.get)[0] == "create"


def test_a_session_that_may_write_offers_edit_for_rewrites_and_a_read_only_one_neither() -> None:
    writer = offered_tools(copilot.cli_command("c", request(tools=["Read", "Write"])))
    assert writer == ["view", "create", "edit"]
    readonly = offered_tools(copilot.cli_command("c", request(tools=["Read", "Grep", "Glob", "Skill"])))
    assert not {"create", "edit", "bash"} & set(readonly)
    denied = offered_tools(copilot.cli_command("c", request(disallowed_tools=["Write", "Edit", "Bash"])))
    assert not {"create", "edit", "bash"} & set(denied)


def test_the_scripted_model_reads_the_clones_files_and_nothing_outside_it(tmp_path: Path) -> None:
    from skillbench.execution.cells import WORKSPACE_TEXT_BYTES, workspace_text

    clone, outside = tmp_path / "clone", tmp_path / "secret.txt"
    (clone / "pkg").mkdir(parents=True)
    (clone / "pkg" / "mod.py").write_text("x = 1\n")
    (clone / "latin.txt").write_bytes(b"\xe9t\xe9")
    outside.write_text("token")
    (clone / "link.txt").symlink_to(outside)
    (clone / "out").symlink_to(tmp_path)  # a folder link out of the clone
    (clone / "huge.txt").write_bytes(b"x" * (WORKSPACE_TEXT_BYTES + 1))
    read = workspace_text(clone, "/workspace")
    assert read("/workspace/pkg/mod.py") == "x = 1\n"
    paths = ("/workspace/link.txt", "/workspace/../secret.txt", "/workspace/out/secret.txt", "/workspace/huge.txt")
    for path in (*paths, str(outside), "/workspace/pkg", "/workspace/no"):
        assert read(path) is None, path
    assert read("/workspace/latin.txt") is None
    name, arguments = copilot.tool_form("Write", {"file_path": "/workspace/pkg/mod.py", "content": "x = 2\n"}, read)
    assert (name, arguments["old_str"]) == ("edit", "x = 1\n")


def test_the_install_is_the_unpacked_folder_beside_node_modules(tmp_path: Path) -> None:
    loader = tmp_path / "tools" / "node_modules" / "@github" / "copilot" / "npm-loader.js"
    loader.parent.mkdir(parents=True)
    loader.write_text("")
    with pytest.raises(ValueError, match="make setup"):
        copilot.native_install(loader)
    folder = tmp_path / "tools" / "copilot"
    (folder / "pkg" / "linux-x64" / "1.0.102").mkdir(parents=True)
    (folder / "copilot").write_text("")
    install = copilot.native_install(loader)
    assert install.host_path == folder and install.entry == "copilot"
    assert install.executable("bwrap") == f"{install.sandbox_path}/copilot"


def test_the_adapter_is_registered_under_its_arm_name() -> None:
    adapter = agents.adapter("copilot")
    assert isinstance(adapter, copilot.Copilot)
    assert adapter.contain_shells is True and adapter.skills_dir == ".claude/skills"
    assert wires.wire(adapter.wire_api).name == "anthropic"
    config = {"arms": {"cp": {"agent": "copilot", "sessions": []}}, "agents": {"copilot": {"model": "m-1"}}}
    assert agents.arm_agent(config, "cp") is adapter
    assert agents.session_model(config, adapter) == "m-1"


def test_the_live_progress_lines_count_a_copilot_sessions_turns_and_tools_without_its_content() -> None:
    log = io.StringIO()
    recorded = events("skill-and-tools.jsonl")
    with sessions.SessionProgress("cp", stream=log, heartbeat_s=3600) as progress:
        progress.observe(capture("skill-and-tools.jsonl"))
    turns = sum(1 for event in recorded if event["type"] == "assistant.turn_start")
    assert progress.turns == turns
    assert progress.tool_calls == sum(1 for event in recorded if event["type"] == "tool.execution_complete")
    lines = log.getvalue()
    assert "· skill · ok" in lines and "· skill · error" in lines and "· bash · ok" in lines
    assert f"finished · {turns} turns · ok" in lines
    texts = [event["data"]["content"] for event in recorded if event["type"] == "assistant.message"]
    outputs = [
        (event["data"].get("result") or {}).get("content")
        for event in recorded
        if event["type"] == "tool.execution_complete"
    ]
    assert not [text for text in [*texts, *outputs] if text and text.strip() in lines]
    failed = io.StringIO()
    with sessions.SessionProgress("cp", stream=failed, heartbeat_s=3600) as progress:
        progress.observe(capture("model-error.jsonl"))
    assert "turns · error" in failed.getvalue()


def test_preflight_refuses_a_copilot_cli_whose_package_setup_did_not_unpack(tmp_path: Path) -> None:
    from skillbench.base.artifacts import ArtifactError
    from skillbench.preflight import _agent_versions

    package = tmp_path / "tools" / "node_modules" / "@github" / "copilot"
    package.mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": "@github/copilot", "version": copilot.Copilot.min_version})
    )
    (package / "npm-loader.js").write_text("")
    session = [{"role": "direct", "prompt": "direct"}]
    config: dict[str, Any] = {
        "agent": {"cli": "claude"},
        "arms": {"cp": {"agent": "copilot", "sessions": session}},
        "selected_arms": ["cp"],
        "agents": {"copilot": {"cli": str(package / "npm-loader.js")}},
    }
    with pytest.raises(ArtifactError, match="make setup"):
        _agent_versions(config)
    folder = tmp_path / "tools" / "copilot"
    (folder / "pkg" / "linux-x64").mkdir(parents=True)
    (folder / "copilot").write_text("")
    assert _agent_versions(config)["copilot"] == copilot.Copilot.min_version
