"""The Gemini CLI adapter: its command line and home settings, its tool mapping, its install, and the strict reading
of real captured `gemini -o stream-json` streams (tests/unit/fixtures/agents/gemini/, recorded from
@google/gemini-cli 0.61.0 offline against the scripted model on a loopback port, with this adapter's settings)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from agentstreams import AgentStreams, encode, partial_skill_read
from skillbench.execution import agents, sessions, wires
from skillbench.execution.agents import gemini

STREAMS = AgentStreams("gemini", "gemini-2.5-pro", gemini.read_stream)
capture, events, read, request = STREAMS.capture, STREAMS.events, STREAMS.read, STREAMS.request


def settings(**changes: Any) -> dict[str, Any]:
    files = gemini.Gemini().home_files(request(**changes))
    assert set(files) == {".gemini/settings.json"}
    loaded: dict[str, Any] = json.loads(files[".gemini/settings.json"])
    return loaded


# ---------------------------------------------------------------------------------------------------------
# Reading real streams


def test_a_real_session_proves_the_skill_it_activated_and_counts_its_tools_and_tokens() -> None:
    reading = read(capture("skill-and-tools.jsonl"))
    recorded = events("skill-and-tools.jsonl")
    uses = [event for event in recorded if event["type"] == "tool_use"]
    results = {event["tool_id"]: event["status"] for event in recorded if event["type"] == "tool_result"}

    assert reading.stream_error is None and reading.cli_failures == [] and reading.subtype == "success"
    assert reading.session_id == recorded[0]["session_id"]
    assert reading.skill_invoked("demo") is True
    # The second activation asked for a skill that is not offered: it failed, so it proves nothing.
    activations = [
        (use["parameters"]["name"], results[use["tool_id"]]) for use in uses if use["tool_name"] == "activate_skill"
    ]
    assert activations == [("demo", "success"), ("no-such-skill", "error")]
    assert reading.skill_invoked("no-such-skill") is False and reading.skill_invoked("another-skill") is False
    expected: dict[str, int] = {}
    for use in uses:
        name = gemini.HARNESS_NAMES[use["tool_name"]]
        expected[name] = expected.get(name, 0) + 1
    assert reading.tool_use_counts == expected and set(expected) == set(gemini.TOOL_NAMES) - {"Write"}
    # Turns: the model's replies (text and tool uses) between tool results; two tools in one reply are one turn.
    assert reading.num_turns == 6
    # Tokens from the result's stats (input is the prompt less its cached part); no price in the stream.
    stats = recorded[-1]["stats"]
    assert reading.cli_usage == {
        "input_tokens": stats["input"],
        "output_tokens": stats["output_tokens"],
        "cache_read_input_tokens": stats["cached"],
        "cache_creation_input_tokens": 0,
    }
    assert stats["input"] + stats["cached"] == stats["input_tokens"] and stats["cached"] > 0
    assert reading.cli_cost_usd is None and reading.offered_skills is None


def test_a_session_whose_tools_were_not_registered_reads_clean_and_proves_no_skill() -> None:
    reading = read(capture("denied-tools.jsonl"))
    recorded = events("denied-tools.jsonl")
    failed = [event for event in recorded if event["type"] == "tool_result" and event["status"] == "error"]
    assert reading.stream_error is None and reading.cli_failures == []
    assert len(failed) == 3 and all(event["error"]["type"] == "tool_not_registered" for event in failed)
    assert reading.skill_invoked("demo") is False
    assert reading.tool_use_counts == {"Edit": 1, "Bash": 1, "Skill": 1, "Read": 1}


def test_a_read_of_part_of_the_skill_file_is_no_skill_proof() -> None:
    # Only the skill tool's success proves a skill: a read of its file's first line (or all of it) does not.
    reading = read(
        partial_skill_read(
            capture("denied-tools.jsonl"), "/tmp/gprobe/fx/denied-tools/ws/notes.txt", {"offset": 0, "limit": 1}
        )
    )
    assert reading.stream_error is None and reading.skill_invoked("demo") is False


def test_a_model_error_ends_the_session_as_the_clis_failure() -> None:
    reading = read(capture("model-error.jsonl"))
    assert reading.stream_error is None and reading.subtype == "error"
    assert reading.cli_failures[0].startswith("result error: [API Error:")
    assert "scripted model: tool write_file not offered" in reading.cli_failures[0]
    assert reading.skill_invoked("demo") is False


def test_an_error_event_of_severity_error_is_a_failure_and_a_warning_is_not() -> None:
    items = events("skill-and-tools.jsonl")
    warning = {"type": "error", "timestamp": "t", "severity": "warning", "message": "retrying"}
    error = {"type": "error", "timestamp": "t", "severity": "error", "message": "the stream was invalid"}
    assert read(encode([*items[:-1], warning, items[-1]])).cli_failures == []
    assert read(encode([*items[:-1], error, items[-1]])).cli_failures == ["error event: the stream was invalid"]


def _use(items: list[dict[str, Any]]) -> int:
    return next(i for i, e in enumerate(items) if e["type"] == "tool_use")


def _result(items: list[dict[str, Any]]) -> int:
    return next(i for i, e in enumerate(items) if e["type"] == "tool_result")


DAMAGES: dict[str, Any] = {
    "no-result": lambda items: items.pop(),
    "two-results": lambda items: items.insert(len(items) - 1, dict(items[-1])),
    "after-result": lambda items: items.append(items[2]),
    "result-without-use": lambda items: items.pop(_use(items)),
    "duplicate-use": lambda items: items.insert(_use(items), items[_use(items)]),
    "duplicate-result": lambda items: items.insert(_result(items), items[_result(items)]),
    "no-status": lambda items: items[_result(items)].pop("status"),
    "bad-type": lambda items: items[2].update(type="assistant.message"),
    "no-timestamp": lambda items: items[2].pop("timestamp"),
    "late-init": lambda items: items.insert(2, dict(items[0])),
    "bad-session-id": lambda items: items[0].update(session_id="../etc"),
    "no-stats": lambda items: items[-1].pop("stats"),
    "bad-result-status": lambda items: items[-1].update(status="done"),
    "bad-role": lambda items: items[1].update(role="system"),
    "bad-parameters": lambda items: items[_use(items)].update(parameters=["demo"]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_stream_that_is_no_evidence_is_refused(damage: str) -> None:
    items = events("skill-and-tools.jsonl")
    DAMAGES[damage](items)
    reading = read(encode(items))
    assert reading.stream_error is not None, damage
    assert reading.skill_invoked("demo") is False


def test_no_capture_an_empty_one_and_an_overflow_are_no_evidence() -> None:
    assert read(None).stream_error is not None
    assert read(b"").stream_error is not None
    assert "exceeds" in str(read(capture("skill-and-tools.jsonl"), overflow=True).stream_error)


def test_a_stream_without_init_has_no_session_id_and_missing_counts_are_failures() -> None:
    items = events("skill-and-tools.jsonl")[1:]
    del items[-1]["stats"]["cached"]
    reading = read(encode(items))
    assert reading.stream_error is None and reading.session_id is None
    assert reading.cli_failures == ["usage cache_read_input_tokens missing or not a count"]


# ---------------------------------------------------------------------------------------------------------
# The command line, the environment and the home


def test_the_command_runs_headless_with_no_extensions_and_the_prompt_on_stdin() -> None:
    argv = gemini.cli_command("/opt/claude/gemini/bundle/gemini.js", request())
    assert argv[0] == "/opt/claude/gemini/bundle/gemini.js"
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("--approval-mode") + 1] == "yolo"
    assert argv[argv.index("--extensions") + 1] == "none"
    assert argv[argv.index("--model") + 1] == "gemini-2.5-pro"
    assert not {"-p", "--prompt", "-i", "--sandbox", "-s", "--skip-trust", "--yolo"} & set(argv)


def test_the_token_reaches_the_cli_only_through_its_environment() -> None:
    adapter = gemini.Gemini()
    env = adapter.environment(base_url="http://127.0.0.1:9", token="tok-123", shell_prefix="/p")
    assert env["GEMINI_API_KEY"] == "tok-123" and env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    assert env["GEMINI_CLI_NO_RELAUNCH"] == "true" and env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert "GOOGLE_GEMINI_BASE_URL" not in adapter.environment(base_url=None, token="t", shell_prefix="/p")
    argv = adapter.command("/opt/claude/gemini/bundle/gemini.js", request())
    files = adapter.home_files(request())
    assert not any("tok-123" in arg for arg in argv) and not any("tok-123" in text for text in files.values())


def test_the_home_settings_switch_off_every_extension_point_and_offer_only_the_sessions_tools() -> None:
    loaded = settings()
    assert loaded["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert loaded["hooksConfig"]["enabled"] is False and "mcpServers" not in loaded
    assert loaded["experimental"]["enableAgents"] is False
    assert loaded["general"]["enableAutoUpdate"] is False and loaded["general"]["checkpointing"]["enabled"] is False
    assert loaded["privacy"]["usageStatisticsEnabled"] is False and loaded["telemetry"]["enabled"] is False
    assert loaded["ide"]["enabled"] is False and loaded["tools"]["sandbox"] is False
    assert loaded["advanced"]["ignoreLocalEnv"] is True and loaded["advanced"]["autoConfigureMemory"] is False
    assert loaded["skills"] == {"enabled": True, "disabled": list(gemini.BUILTIN_SKILLS)}
    core = loaded["tools"]["core"]
    assert set(core) == {
        "read_file",
        "list_directory",
        "grep_search",
        "glob",
        "replace",
        "write_file",
        "run_shell_command",
        "activate_skill",
    }
    assert not {"web_fetch", "google_web_search", "invoke_agent", "save_memory", "write_todos"} & set(core)


def test_a_read_only_session_and_a_baseline_register_only_what_they_may_use() -> None:
    readonly = settings(tools=["Read", "Grep", "Glob"])
    assert readonly["tools"]["core"] == ["read_file", "list_directory", "grep_search", "glob"]
    assert readonly["skills"]["enabled"] is False
    baseline = settings(disallowed_tools=["Skill"])
    assert "activate_skill" not in baseline["tools"]["core"] and "run_shell_command" in baseline["tools"]["core"]
    assert baseline["skills"]["enabled"] is False
    with pytest.raises(ValueError, match="at least one tool"):
        gemini.cli_command("c", request(tools=["Skill"], disallowed_tools=["Skill"]))
    with pytest.raises(ValueError, match="no counterpart"):
        gemini.cli_command("c", request(tools=["Read", "mcp__probe__find"]))


def test_an_arm_with_mcp_servers_or_plugins_is_refused() -> None:
    with pytest.raises(ValueError, match="MCP"):
        gemini.cli_command("c", request(mcp_config='{"mcpServers":{"probe":{"command":"x"}}}'))
    with pytest.raises(ValueError, match="plugins"):
        gemini.cli_command("c", request(plugin_dirs=["/opt/plugins/kit"]))


def test_the_offered_skills_are_the_clones_skill_folders_when_the_session_may_use_skills(tmp_path: Path) -> None:
    root = tmp_path / ".agents" / "skills"
    for name in ("change-work", "change-plan"):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\n")
    (root / "notes").mkdir()  # no SKILL.md: not a skill
    (root / "linked").symlink_to(root / "change-work")  # a link is not loaded as a skill folder of its own
    adapter = gemini.Gemini()
    assert adapter.configured_skills(root, request()) == ["change-plan", "change-work"]
    assert adapter.configured_skills(root, request(disallowed_tools=["Skill"])) == []
    assert adapter.configured_skills(tmp_path / "missing", request()) == []


# ---------------------------------------------------------------------------------------------------------
# Tools and install


def test_tool_calls_in_the_harness_terms_map_onto_gemini_clis_tools() -> None:
    adapter = gemini.Gemini()
    assert adapter.tool_form("Read", {"file_path": "/w/a.py"}) == ("read_file", {"file_path": "/w/a.py"})
    assert adapter.tool_form("Read", {"file_path": "/w/a", "offset": 5, "limit": 10}) == (
        "read_file",
        {"file_path": "/w/a", "start_line": 5, "end_line": 14},
    )
    assert adapter.tool_form("Read", {"file_path": "/w/a", "offset": 7}) == (
        "read_file",
        {"file_path": "/w/a", "start_line": 7},
    )
    assert adapter.tool_form("Write", {"file_path": "/w/b", "content": "x"}) == (
        "write_file",
        {"file_path": "/w/b", "content": "x"},
    )
    name, arguments = adapter.tool_form(
        "Edit", {"file_path": "/w/a", "old_string": "a", "new_string": "b", "replace_all": True}
    )
    assert name == "replace" and arguments["instruction"]  # Gemini CLI requires an instruction
    assert {key: arguments[key] for key in ("file_path", "old_string", "new_string", "allow_multiple")} == {
        "file_path": "/w/a",
        "old_string": "a",
        "new_string": "b",
        "allow_multiple": True,
    }
    assert adapter.tool_form("Bash", {"command": "ls", "description": "list"}) == (
        "run_shell_command",
        {"command": "ls", "description": "list"},
    )
    assert adapter.tool_form("Skill", {"skill": "change-plan"}) == ("activate_skill", {"name": "change-plan"})
    assert adapter.tool_form("Grep", {"pattern": "x", "path": "src", "glob": "*.py", "-i": True}) == (
        "grep_search",
        {"pattern": "x", "dir_path": "src", "include_pattern": "*.py", "case_sensitive": False},
    )
    assert adapter.tool_form("Glob", {"pattern": "**/*.py", "path": "src"}) == (
        "glob",
        {"pattern": "**/*.py", "dir_path": "src"},
    )
    assert adapter.tool_form("mcp__probe__find", {"q": 1}) == ("mcp__probe__find", {"q": 1})
    # Every harness tool maps onto a Gemini CLI tool the counts name it back from.
    assert {gemini.HARNESS_NAMES[adapter.tool_form(name, {})[0]] for name in gemini.TOOL_NAMES} == set(
        gemini.TOOL_NAMES
    )


def test_the_install_is_the_package_folder_and_its_bundle_entry(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / "@google" / "gemini-cli"
    (package / "bundle").mkdir(parents=True)
    (package / "bundle" / "gemini.js").write_text("")
    bin_link = tmp_path / "node_modules" / ".bin" / "gemini"
    bin_link.parent.mkdir()
    bin_link.symlink_to(package / "bundle" / "gemini.js")
    with pytest.raises(ValueError, match="package.json"):
        gemini.package_install(bin_link)
    (package / "package.json").write_text("{}")
    install = gemini.package_install(bin_link)
    assert install.host_path == package and install.entry == "bundle/gemini.js"
    assert install.executable("bwrap") == f"{install.sandbox_path}/bundle/gemini.js"
    other = tmp_path / "gemini"
    other.write_text("")
    with pytest.raises(ValueError, match="make setup"):
        gemini.package_install(other)


def test_the_adapter_is_registered_under_its_arm_name() -> None:
    adapter = agents.adapter("gemini")
    assert isinstance(adapter, gemini.Gemini)
    assert adapter.contain_shells is True and adapter.skills_dir == ".agents/skills"
    assert adapter.covered_paths == (".gemini",)
    assert wires.wire(adapter.wire_api).name == "gemini"
    config = {"arms": {"gm": {"agent": "gemini", "sessions": []}}, "agents": {"gemini": {"model": "m-1"}}}
    assert agents.arm_agent(config, "gm") is adapter
    assert agents.session_model(config, adapter) == "m-1"


def test_the_live_progress_lines_count_a_gemini_sessions_turns_and_tools_without_its_content() -> None:
    log = io.StringIO()
    recorded = events("skill-and-tools.jsonl")
    with sessions.SessionProgress("gm", stream=log, heartbeat_s=3600) as progress:
        progress.observe(capture("skill-and-tools.jsonl"))
    assert progress.turns == read(capture("skill-and-tools.jsonl")).num_turns
    assert progress.tool_calls == sum(1 for event in recorded if event["type"] == "tool_result")
    lines = log.getvalue()
    assert "· activate_skill · ok" in lines and "· activate_skill · error" in lines
    assert "· run_shell_command · ok" in lines
    assert f"finished · {progress.turns} turns · ok" in lines
    texts = [event["content"] for event in recorded if event["type"] == "message"]
    outputs = [event.get("output") for event in recorded if event["type"] == "tool_result"]
    assert not [text for text in [*texts, *outputs] if text and text.strip() in lines]
    failed = io.StringIO()
    with sessions.SessionProgress("gm", stream=failed, heartbeat_s=3600) as progress:
        progress.observe(capture("model-error.jsonl"))
    assert "turns · error" in failed.getvalue()


def test_preflight_finds_the_pinned_gemini_cli_and_refuses_a_path_that_is_not_its_package(tmp_path: Path) -> None:
    from skillbench.base.artifacts import ArtifactError
    from skillbench.preflight import _agent_versions

    package = tmp_path / "tools" / "node_modules" / "@google" / "gemini-cli"
    (package / "bundle").mkdir(parents=True)
    (package / "bundle" / "gemini.js").write_text("")
    (package / "package.json").write_text(
        json.dumps({"name": "@google/gemini-cli", "version": gemini.Gemini.min_version})
    )
    session = [{"role": "direct", "prompt": "direct"}]
    config: dict[str, Any] = {
        "agent": {"cli": "claude"},
        "arms": {"gm": {"agent": "gemini", "sessions": session}},
        "selected_arms": ["gm"],
        "agents": {"gemini": {"cli": str(package / "bundle" / "gemini.js")}},
    }
    assert _agent_versions(config)["gemini"] == gemini.Gemini.min_version
    (package / "package.json").write_text(json.dumps({"name": "@google/gemini-cli", "version": "0.60.9"}))
    with pytest.raises(ArtifactError, match="older than"):
        _agent_versions(config)


def test_the_demo_model_scripts_commands_are_ones_gemini_cli_runs() -> None:
    # Gemini CLI refuses a shell command with command substitution ("Blocked: command substitution detected"), so a
    # demo step with `$(…)` or backticks would fail on a gemini arm (config/agents-demo.yaml's gm_direct) alone.
    import yaml

    script = yaml.safe_load((Path(__file__).parents[2] / "tasks" / "demo" / "model-script.yaml").read_text())
    commands: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("name") == "Bash" and isinstance(node.get("input"), dict):
                commands.append(str(node["input"].get("command")))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(script["tasks"])
    assert len(commands) > 20  # every task's roles run commands
    assert [command for command in commands if "$(" in command or "`" in command] == []
