"""The opencode adapter: its command line and inline config, its tool mapping, and the strict reading of real
captured `opencode run --format json` streams (tests/unit/fixtures/agents/opencode/, recorded from opencode-ai
1.18.33 against a loopback model)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agentstreams import AgentStreams, encode, partial_skill_read
from skillbench.execution import agents, sessions, wires
from skillbench.execution.agents import opencode

STREAMS = AgentStreams("opencode", "claude-sonnet-4-5", opencode.read_stream)
capture, events, read, request = STREAMS.capture, STREAMS.events, STREAMS.read, STREAMS.request


def inline_config(argv: list[str]) -> dict[str, Any]:
    (setting,) = [arg for arg in argv if arg.startswith("OPENCODE_CONFIG_CONTENT=")]
    return json.loads(setting.split("=", 1)[1])


# ---------------------------------------------------------------------------------------------------------
# Reading real streams


def test_a_real_session_proves_the_skill_it_loaded_and_counts_its_tools_and_usage() -> None:
    reading = read(capture("skill-and-tools.jsonl"))
    recorded = events("skill-and-tools.jsonl")
    steps = [event["part"] for event in recorded if event["type"] == "step_finish"]
    tools = [event["part"] for event in recorded if event["type"] == "tool_use"]

    assert reading.stream_error is None and reading.cli_failures == []
    assert reading.session_id == recorded[0]["sessionID"]
    assert reading.num_turns == len(steps)
    assert reading.subtype == steps[-1]["reason"]
    assert reading.skill_invoked("demo") is True
    # The second skill call asked for a skill that does not exist: its part failed, so it proves nothing.
    failed = [part["state"]["input"]["name"] for part in tools if part["state"]["status"] == "error"]
    assert failed and all(reading.skill_invoked(name) is False for name in failed)
    assert reading.skill_invoked("another-skill") is False
    expected_counts: dict[str, int] = {}
    for part in tools:
        name = opencode.HARNESS_NAMES[part["tool"]]
        expected_counts[name] = expected_counts.get(name, 0) + 1
    assert reading.tool_use_counts == expected_counts
    assert set(reading.tool_use_counts) <= set(opencode.TOOL_NAMES)
    assert reading.cli_usage["input_tokens"] == sum(step["tokens"]["input"] for step in steps)
    assert reading.cli_usage["output_tokens"] == sum(step["tokens"]["output"] for step in steps)
    assert reading.cli_usage["cache_read_input_tokens"] == sum(step["tokens"]["cache"]["read"] for step in steps)
    assert reading.cli_cost_usd == pytest.approx(sum(step["cost"] for step in steps))
    # opencode lists its skills only in the system prompt: nothing in the stream says what was offered.
    assert reading.offered_skills is None


def test_a_session_whose_tools_were_denied_reads_clean_and_proves_no_skill() -> None:
    reading = read(capture("denied-tools.jsonl"))
    assert reading.stream_error is None and reading.cli_failures == []
    assert reading.skill_invoked("demo") is False
    assert reading.tool_use_counts.get("Read") == 1


def test_a_read_of_part_of_the_skill_file_is_no_skill_proof() -> None:
    # Only the skill tool's success proves a skill: a read of its file's first line (or all of it) does not.
    reading = read(
        partial_skill_read(capture("denied-tools.jsonl"), "/tmp/ocprobe/ws/a.txt", {"offset": 1, "limit": 1})
    )
    assert reading.stream_error is None and reading.skill_invoked("demo") is False


def test_an_error_event_ends_the_session_as_the_clis_failure() -> None:
    reading = read(capture("error.jsonl"))
    assert reading.stream_error is None
    assert reading.subtype == "error"
    assert reading.cli_failures and "UnknownError" in reading.cli_failures[0]


@pytest.mark.parametrize(
    "damage",
    [
        "cut-before-the-end",
        "forged-skill-after-the-end",
        "another-session",
        "duplicate-call",
        "unknown-event",
        "pending-tool",
        "not-json",
    ],
)
def test_a_stream_that_is_no_evidence_is_refused(damage: str) -> None:
    recorded = events("skill-and-tools.jsonl")
    skill = next(event for event in recorded if event["type"] == "tool_use" and event["part"]["tool"] == "skill")
    if damage == "cut-before-the-end":
        raw = encode(recorded[:-1])
    elif damage == "forged-skill-after-the-end":
        forged = json.loads(json.dumps(skill))
        forged["part"]["callID"] = "toolu_forged"
        forged["part"]["state"]["input"]["name"] = "forged-skill"
        raw = encode([*recorded, forged])
    elif damage == "another-session":
        other = json.loads(json.dumps(recorded[1]))
        other["sessionID"] = "ses_other"
        raw = encode([recorded[0], other, *recorded[2:]])
    elif damage == "duplicate-call":
        raw = encode([*recorded[:2], skill, *recorded[2:]])
    elif damage == "unknown-event":
        raw = encode([recorded[0], {"type": "result", "sessionID": recorded[0]["sessionID"]}, *recorded[1:]])
    elif damage == "pending-tool":
        pending = json.loads(json.dumps(skill))
        pending["part"]["state"]["status"] = "running"
        raw = encode([recorded[0], pending, *recorded[2:]])
    else:
        raw = capture("skill-and-tools.jsonl") + b"not json\n"
    reading = read(raw)
    assert reading.stream_error is not None
    assert reading.skill_invoked("forged-skill") is False


def test_no_capture_an_empty_one_and_an_overflow_are_no_evidence() -> None:
    assert read(None).stream_error is not None
    assert read(b"").stream_error is not None
    assert read(capture("skill-and-tools.jsonl"), overflow=True).stream_error is not None


def test_a_cost_of_zero_for_spent_tokens_is_unmeasured_and_a_missing_count_is_a_failure() -> None:
    recorded = events("denied-tools.jsonl")
    unpriced = json.loads(json.dumps(recorded))
    for event in unpriced:
        if event["type"] == "step_finish":
            event["part"]["cost"] = 0
    assert read(encode(unpriced)).cli_cost_usd is None
    uncounted = json.loads(json.dumps(recorded))
    last = next(event for event in reversed(uncounted) if event["type"] == "step_finish")
    del last["part"]["tokens"]["output"]
    reading = read(encode(uncounted))
    assert reading.cli_usage["output_tokens"] is None
    assert any("output_tokens" in failure for failure in reading.cli_failures)


# ---------------------------------------------------------------------------------------------------------
# Command line, config, environment


def test_the_command_runs_headless_with_an_inline_config_that_names_no_secret() -> None:
    argv = opencode.OpenCode().command("/opt/claude/opencode", request())
    assert argv[0] == "/usr/bin/env"
    cli = argv.index("/opt/claude/opencode")
    assert argv[cli + 1 : cli + 4] == ["run", "--format", "json"]
    assert "--auto" in argv and "--title" in argv
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"
    config = inline_config(argv)
    assert config["model"] == config["small_model"] == "anthropic/claude-sonnet-4-5"
    assert "claude-sonnet-4-5" in config["provider"]["anthropic"]["models"]
    options = config["provider"]["anthropic"]["options"]
    assert "apiKey" not in options and opencode.BASE_URL_VARIABLE in options["baseURL"]
    assert config["plugin"] == [] and config["mcp"] == {} and config["share"] == "disabled"
    assert config["autoupdate"] is False and config["lsp"] is False and config["formatter"] is False


def test_the_token_reaches_the_cli_only_through_its_environment() -> None:
    adapter = opencode.OpenCode()
    environment = adapter.environment(base_url="http://127.0.0.1:41952", token="sk-session", shell_prefix="/x")
    assert environment["ANTHROPIC_API_KEY"] == "sk-session"
    assert environment[adapter.base_url_variable] == "http://127.0.0.1:41952"
    assert [name for name, value in environment.items() if value == "sk-session"] == ["ANTHROPIC_API_KEY"]
    assert adapter.base_url_variable not in adapter.environment(base_url=None, token="t", shell_prefix="/x")
    assert "sk-session" not in " ".join(adapter.command("opencode", request()))


def test_a_read_only_session_and_a_baseline_deny_what_they_may_not_use() -> None:
    plan = inline_config(opencode.cli_command("opencode", request(tools=["Read", "Grep", "Glob"])))["permission"]
    assert list(plan)[0] == "*" and plan["*"] == "deny"  # the last matching rule wins: the catch-all comes first
    assert {plan[key] for key in ("read", "grep", "glob")} == {"allow"}
    assert {plan[key] for key in ("edit", "bash", "skill")} == {"deny"} and "task" not in plan
    outside = plan["external_directory"]
    assert list(outside)[0] == "*" and outside["/proc/*"] == outside["/home/agent/.local/*"] == "deny"
    baseline = inline_config(opencode.cli_command("opencode", request(disallowed_tools=["Skill"])))["permission"]
    assert baseline["skill"] == "deny" and baseline["edit"] == baseline["bash"] == "allow"
    writer = opencode.permissions(["Read", "Write"], [])
    assert writer["edit"] == "allow" and writer["bash"] == "deny"


def test_an_arm_with_mcp_servers_or_plugins_is_refused() -> None:
    with pytest.raises(ValueError, match="MCP"):
        opencode.cli_command("opencode", request(mcp_config='{"mcpServers":{"probe":{"command":"x"}}}'))
    with pytest.raises(ValueError, match="plugins"):
        opencode.cli_command("opencode", request(plugin_dirs=["/opt/plugins/kit"]))


def test_tool_calls_in_the_harness_terms_map_onto_opencodes_tools() -> None:
    adapter = opencode.OpenCode()
    assert adapter.tool_form("Read", {"file_path": "/workspace/a.py"}) == ("read", {"filePath": "/workspace/a.py"})
    assert adapter.tool_form("Write", {"file_path": "/w/b", "content": "x"}) == (
        "write",
        {"filePath": "/w/b", "content": "x"},
    )
    assert adapter.tool_form("Edit", {"file_path": "/w/a", "old_string": "a", "new_string": "b"}) == (
        "edit",
        {"filePath": "/w/a", "oldString": "a", "newString": "b"},
    )
    assert adapter.tool_form("Bash", {"command": "ls", "description": "list"}) == (
        "bash",
        {"command": "ls", "description": "list"},
    )
    assert adapter.tool_form("Skill", {"skill": "change-plan"}) == ("skill", {"name": "change-plan"})
    assert adapter.tool_form("Grep", {"pattern": "x", "glob": "*.py"}) == ("grep", {"pattern": "x", "include": "*.py"})
    assert adapter.tool_form("Glob", {"pattern": "**/*.py"}) == ("glob", {"pattern": "**/*.py"})
    assert adapter.tool_form("mcp__probe__find", {"q": 1}) == ("mcp__probe__find", {"q": 1})
    # Every tool opencode offers under another name maps back to the harness's name in the counts.
    assert {opencode.HARNESS_NAMES[adapter.tool_form(name, {})[0]] for name in opencode.TOOL_NAMES} == set(
        opencode.TOOL_NAMES
    )


def test_the_adapter_is_registered_under_its_arm_name() -> None:
    adapter = agents.adapter("opencode")
    assert isinstance(adapter, opencode.OpenCode)
    assert adapter.contain_shells is True
    assert wires.wire(adapter.wire_api).name == "anthropic"  # it speaks Anthropic Messages to the gateway
    config = {"arms": {"oc": {"agent": "opencode", "sessions": []}}, "agents": {"opencode": {"model": "m-1"}}}
    assert agents.arm_agent(config, "oc") is adapter
    assert agents.session_model(config, adapter) == "m-1"


# ---------------------------------------------------------------------------------------------------------
# A task repository's own config


def test_a_repositorys_own_opencode_config_is_covered_only_where_it_exists(tmp_path: Path) -> None:
    clone, private = tmp_path / "clone", tmp_path / "private"
    clone.mkdir()
    private.mkdir()
    (clone / ".opencode" / "plugins").mkdir(parents=True)
    (clone / "opencode.json").write_text('{"plugin": ["evil"]}')
    empty = private / "empty"
    empty.write_bytes(b"")
    sandbox: Any = SimpleNamespace(
        backend="bwrap",
        clone=clone,
        private_root=private,
        empty_file=empty,
        to_sandbox=lambda host: "/workspace/" + Path(host).relative_to(clone).as_posix(),
    )
    covered, scratch = sessions.cover_binds(sandbox, opencode.COVERED_PATHS)
    assert covered == [(empty, "/workspace/opencode.json")]
    ((folder, target),) = scratch
    assert target == "/workspace/.opencode" and folder.is_dir() and list(folder.iterdir()) == []
    assert folder.is_relative_to(private) and not folder.is_relative_to(clone)
    # Each session gets a folder of its own: what one session's CLI wrote there, the next does not see.
    assert sessions.cover_binds(sandbox, opencode.COVERED_PATHS)[1][0][0] != folder
    sandbox.backend = "none"
    assert sessions.cover_binds(sandbox, opencode.COVERED_PATHS) == ([], [])


def test_preflight_refuses_an_opencode_arm_with_mcp_servers_or_plugins() -> None:
    from skillbench.experiment.arms import ArmError
    from skillbench.preflight import check_arm_agents

    session = [{"role": "direct", "prompt": "direct"}]
    check_arm_agents({"arms": {"oc": {"agent": "opencode", "sessions": session}}})
    for key, value in (("mcp_servers", ["probe"]), ("plugins", ["tasks/demo/plugins/kit"])):
        arm = {"agent": "opencode", "sessions": session, key: value}
        with pytest.raises(ArmError, match=f"opencode adapter does not give its sessions {key}"):
            check_arm_agents({"arms": {"oc": arm}})


def test_the_live_progress_lines_count_an_opencode_sessions_turns_and_tools_without_its_content() -> None:
    log = io.StringIO()
    recorded = events("skill-and-tools.jsonl")
    with sessions.SessionProgress("oc", stream=log, heartbeat_s=3600) as progress:
        progress.observe(capture("skill-and-tools.jsonl"))
    assert progress.turns == sum(1 for event in recorded if event["type"] == "step_start")
    assert progress.tool_calls == sum(1 for event in recorded if event["type"] == "tool_use")
    lines = log.getvalue()
    assert "· skill · ok" in lines and "· skill · error" in lines and "· bash · ok" in lines
    texts = [event["part"]["text"] for event in recorded if event["type"] == "text"]
    outputs = [event["part"]["state"].get("output") for event in recorded if event["type"] == "tool_use"]
    assert not [text for text in [*texts, *outputs] if text and text.strip() in lines]
