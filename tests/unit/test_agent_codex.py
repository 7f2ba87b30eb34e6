"""The Codex CLI adapter: its home config and command line, its tool mapping, its install, its skill proof, and the
strict reading of `codex exec --json` streams (tests/unit/fixtures/agents/codex/: recorded from @openai/codex
0.171.0 against the scripted model and a loopback stand-in that answers 400; other streams are built here)."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path
from typing import Any

import pytest
from agentstreams import AgentStreams, encode
from skillbench.execution import agents, sessions
from skillbench.execution.agents import codex
from skillbench.execution.agents.base import SessionRequest

STREAMS = AgentStreams("codex", "gpt-5.5", codex.read_stream)
capture, events, read, request = STREAMS.capture, STREAMS.events, STREAMS.read, STREAMS.request


# The demo skill's SKILL.md as the session's clone holds it (`skill_texts`), and what its first line alone shows.
SKILL_TEXT = "---\nname: demo\ndescription: demo skill\n---\nDo the demo.\n"
TEXTS = {"demo": SKILL_TEXT}


def command(
    item_id: str, cmd: str, exit_code: int | None, status: str = "completed", output: str = SKILL_TEXT
) -> list[dict[str, Any]]:
    item = {"id": item_id, "type": "command_execution", "command": cmd, "aggregated_output": output}
    return [
        {"type": "item.started", "item": {**item, "exit_code": None, "status": "in_progress"}},
        {"type": "item.completed", "item": {**item, "exit_code": exit_code, "status": status}},
    ]


def stream(*middle: dict[str, Any], end: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    usage = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 7}
    return [
        {"type": "thread.started", "thread_id": "0000-thread"},
        {"type": "turn.started"},
        *middle,
        end or {"type": "turn.completed", "usage": usage},
    ]


# ---------------------------------------------------------------------------------------------------------
# Reading streams


def proof(raw: bytes, texts: dict[str, str] | None = None):
    """The reading of `raw` given the skills' texts (`TEXTS` by default), as a session gives them."""
    return codex.read_stream(
        raw, overflow=False, limit=1 << 20, mcp_servers=[], skill_texts=TEXTS if texts is None else texts
    )


def test_a_real_session_proves_the_skill_it_read_and_counts_its_tools_and_tokens() -> None:
    recorded = events("skill-and-tools.jsonl")
    reading = proof(capture("skill-and-tools.jsonl"))
    assert reading.stream_error is None and reading.cli_failures == [] and reading.subtype == "success"
    assert reading.session_id == recorded[0]["thread_id"] and reading.num_turns == 1
    assert reading.skill_invoked("demo") is True
    # The read of a skill that does not exist failed (exit 1): it proves nothing.
    assert reading.skill_invoked("missing") is False
    items = [event["item"] for event in recorded if event["type"] == "item.completed"]
    commands = sum(1 for item in items if item["type"] == "command_execution")
    changes = sum(1 for item in items if item["type"] == "file_change")
    assert reading.tool_use_counts == {"Bash": commands, "Edit": changes} and commands == 5 and changes == 2
    usage = recorded[-1]["usage"]
    assert reading.cli_usage == {
        "input_tokens": usage["input_tokens"] - usage["cached_input_tokens"],
        "output_tokens": usage["output_tokens"],
        "cache_read_input_tokens": usage["cached_input_tokens"],
        "cache_creation_input_tokens": usage["cache_write_input_tokens"],
    }
    # Codex never prices a session and never lists its skills in the stream.
    assert reading.cli_cost_usd is None and reading.offered_skills is None


def test_a_real_failed_turn_is_the_clis_failure_and_a_warning_item_is_not() -> None:
    reading = read(capture("turn-failed.jsonl"))
    assert reading.stream_error is None and reading.subtype == "error"
    assert len(reading.cli_failures) == 1 and reading.cli_failures[0].startswith("turn.failed: ")
    assert "invalid_request_error" in reading.cli_failures[0]
    assert read(encode(stream())).cli_failures == []


@pytest.mark.parametrize(
    ("events_", "problem"),
    [
        ([], "contains no events"),
        (stream()[1:], "thread.started"),
        ([*stream()[:1], *stream()], "thread.started"),
        ([{"type": "thread.started", "thread_id": "a b"}, *stream()[1:]], "thread_id"),
        (stream({"type": "turn.progress"}), "unknown type"),
        (stream()[:-1], "before the session's end"),
        ([*stream(), {"type": "item.completed", "item": {"id": "x", "type": "agent_message"}}], "session's end"),
        (stream(command("c1", "ls", 0)[0]), "never completed"),
        (stream(*command("c1", "ls", 0), command("c1", "ls", 0)[1]), "after its completion"),
        (stream(*command("c1", "ls", 0)[:1], *command("c1", "ls", 0)), "duplicate item.started"),
        (stream({"type": "item.updated", "item": {"id": "t", "type": "todo_list"}}), "no start"),
        (stream({"type": "item.completed", "item": {"id": "i", "type": "image_view"}}), "unknown type"),
        (stream({"type": "item.completed", "item": {"type": "agent_message"}}), "item id"),
        (stream({"type": "item.completed"}), "has no item"),
        (
            stream(*command("c1", "ls", 0)[:1], {"type": "item.completed", "item": {"id": "c1", "type": "reasoning"}}),
            "type",
        ),
        (
            stream({"type": "item.completed", "item": {"id": "c", "type": "command_execution", "status": "completed"}}),
            "command",
        ),
        (stream(*command("c1", "ls", True)), "not an integer"),  # type: ignore[arg-type]
        (stream({"type": "item.completed", "item": {"id": "f", "type": "file_change", "changes": []}}), "status"),
        (stream({"type": "error"}), "no message"),
        (stream({"type": "turn.started"}), "inside a turn"),
        ([*stream()[:1], {"type": "turn.completed", "usage": {}}], "ends no turn"),
    ],
)
def test_a_malformed_stream_is_no_evidence(events_: list[dict[str, Any]], problem: str) -> None:
    reading = read(encode(events_))
    assert reading.stream_error is not None and problem in reading.stream_error, reading.stream_error
    assert reading.skill_invoked("demo") is False and reading.window == []


def test_a_missing_or_overflowed_capture_and_broken_lines_are_no_evidence() -> None:
    assert "did not capture" in str(read(None).stream_error)
    assert "exceeds" in str(read(encode(stream()), overflow=True).stream_error)
    assert "not valid JSON" in str(read(b'{"type":"thread.started"\n').stream_error)


def test_unreadable_usage_is_a_failure_not_a_zero() -> None:
    for usage in ({}, {"input_tokens": 5, "cached_input_tokens": 9, "output_tokens": 1}, {"input_tokens": -1}):
        reading = read(encode(stream(end={"type": "turn.completed", "usage": usage})))
        assert reading.stream_error is None and reading.subtype == "error"
        assert [failure for failure in reading.cli_failures if failure.startswith("usage ")], usage


def test_a_forged_end_written_by_a_command_breaks_the_stream() -> None:
    # A command that reached the CLI's stdout could add a turn.completed after the real one: no evidence then.
    forged = {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}}
    assert "ends no turn" in str(read(encode([*stream(), forged])).stream_error)


# ---------------------------------------------------------------------------------------------------------
# The skill proof


@pytest.mark.parametrize(
    "cmd",
    [
        "/bin/bash -lc 'cat .agents/skills/demo/SKILL.md'",
        "/bin/bash -lc 'cat -- /workspace/.agents/skills/demo/SKILL.md'",
        "bash -c 'sed -n 1,200p .agents/skills/demo/SKILL.md'",
        "cat ./.agents/skills/demo/SKILL.md",
    ],
)
def test_exactly_one_read_of_the_whole_skill_file_proves_the_skill(cmd: str) -> None:
    reading = proof(encode(stream(*command("c1", cmd, 0))))
    assert reading.skill_invoked("demo") is True
    assert reading.skill_invoked("other") is False
    # Without the file's text there is nothing to hold the read against: it proves nothing.
    assert proof(encode(stream(*command("c1", cmd, 0))), {}).skill_invoked("demo") is False


@pytest.mark.parametrize(
    ("cmd", "output"),
    [
        ("/bin/bash -lc \"sed -n '1,1p' .agents/skills/demo/SKILL.md\"", "---\n"),  # the model saw only `---`
        ("sed -n 1,3p .agents/skills/demo/SKILL.md", "---\nname: demo\ndescription: demo skill\n"),
        ("cat .agents/skills/demo/SKILL.md", ""),  # nothing came out
        ("cat .agents/skills/demo/SKILL.md", SKILL_TEXT + "and more the file does not hold\n"),
    ],
)
def test_a_partial_read_of_the_skill_file_proves_nothing(cmd: str, output: str) -> None:
    reading = proof(encode(stream(*command("c1", cmd, 0, output=output))))
    assert reading.stream_error is None and reading.skill_invoked("demo") is False


@pytest.mark.parametrize(
    ("cmd", "exit_code", "status"),
    [
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md'", 1, "failed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md'", 0, "failed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md'", None, "declined"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md > /dev/null'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md | head -1'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md; true'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md other.txt'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/*/SKILL.md'", 0, "completed"),
        ("/bin/bash -lc 'echo .agents/skills/demo/SKILL.md'", 0, "completed"),
        ("/bin/bash -lc 'sed -n 5,9p .agents/skills/demo/SKILL.md'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/../demo/SKILL.md'", 0, "completed"),
        ("/bin/bash -lc 'cat elsewhere/.agents/skills/demo/SKILL.md'", 0, "completed"),
        ("/bin/bash -lc 'cat $(echo .agents/skills/demo/SKILL.md)'", 0, "completed"),
        ("/bin/bash -lc 'cat .agents/skills/demo/SKILL.md", 0, "completed"),
    ],
)
def test_anything_but_a_successful_plain_read_proves_nothing(cmd: str, exit_code: int | None, status: str) -> None:
    reading = proof(encode(stream(*command("c1", cmd, exit_code, status))))
    assert reading.stream_error is None and reading.skill_invoked("demo") is False


def test_the_expected_skill_must_be_a_plain_name() -> None:
    reading = read(encode(stream(*command("c1", "cat .agents/skills/demo/SKILL.md", 0))))
    for bad in ("", " ", "../demo", "demo/sub"):
        with pytest.raises(ValueError, match="well-formed name"):
            reading.skill_invoked(bad)


# ---------------------------------------------------------------------------------------------------------
# The session: config, argv, environment, sandbox shape


def config_of(req: SessionRequest) -> dict[str, Any]:
    return tomllib.loads(codex.home_config(req))


def test_the_home_config_points_at_the_gateway_and_names_the_key_variable_only() -> None:
    config = config_of(request())
    provider = config["model_providers"][codex.PROVIDER]
    assert config["model_provider"] == codex.PROVIDER and config["model"] == "gpt-5.5"
    assert provider == {
        "name": codex.PROVIDER,
        "base_url": "http://127.0.0.1:41952/v1",
        "wire_api": "responses",
        "env_key": codex.KEY_VARIABLE,
    }
    assert config["approval_policy"] == "never" and config["project_doc_max_bytes"] == 0
    assert (
        config["web_search"] == "disabled" and config["notify"] == [] and config["check_for_update_on_startup"] is False
    )
    assert config["history"] == {"persistence": "none"} and config["analytics"] == {"enabled": False}
    assert config["skills"]["bundled"] == {"enabled": False} and config["agents"] == {"enabled": False}
    assert not [name for name, on in config["features"].items() if on] and {"hooks", "plugins"} <= set(
        config["features"]
    )
    # The none backend learns the forwarder's port only at start: no base_url in the file then.
    assert "base_url" not in config_of(request(sandbox_backend="none"))["model_providers"][codex.PROVIDER]


def test_a_session_without_skill_gets_no_listing_and_an_empty_skills_folder() -> None:
    adapter = codex.Codex()
    assert config_of(request())["skills"]["include_instructions"] is True
    assert adapter.session_sandbox(request()).covers == codex.COVERED_PATHS
    for req in (request(disallowed_tools=["Skill"]), request(tools=["Read", "Bash"])):
        assert config_of(req)["skills"]["include_instructions"] is False
        assert adapter.session_sandbox(req).covers == (*codex.COVERED_PATHS, codex.SKILLS_DIR)


def test_only_a_session_that_may_not_write_gets_a_read_only_workspace() -> None:
    adapter = codex.Codex()
    assert adapter.session_sandbox(request(tools=["Read", "Grep", "Glob"])).read_only_workspace is True
    assert adapter.session_sandbox(request(tools=["Read", "Bash"], disallowed_tools=["Bash"])).read_only_workspace
    for tools in (["Read", "Bash"], ["Read", "Edit"], ["Write"]):
        assert adapter.session_sandbox(request(tools=tools)).read_only_workspace is False, tools


def test_the_argv_keeps_the_prompt_on_stdin_and_the_token_out() -> None:
    argv = codex.cli_command("/opt/claude/codex/bin/codex", request())
    assert argv[:3] == ["/opt/claude/codex/bin/codex", "exec", "--json"] and argv[-1] == "-"
    assert {"--strict-config", "--ephemeral", "--ignore-rules"} <= set(argv)
    env = codex.Codex().environment(base_url="http://127.0.0.1:41952", token="tok-123", shell_prefix="/x")
    assert env == {codex.KEY_VARIABLE: "tok-123", codex.BASE_URL_VARIABLE: "http://127.0.0.1:41952"}
    assert "tok-123" not in codex.home_config(request()) and "tok-123" not in " ".join(argv)
    unsafe = codex.cli_command("/usr/bin/codex", request(sandbox_backend="none"))
    assert unsafe[:2] == ["/bin/sh", "-c"] and f"${{{codex.BASE_URL_VARIABLE}}}/v1" in unsafe[2]


def test_the_argv_refuses_what_codex_cannot_run() -> None:
    with pytest.raises(ValueError, match="no MCP servers"):
        codex.cli_command("codex", request(mcp_config='{"mcpServers":{"s":{}}}'))
    with pytest.raises(ValueError, match="no plugins"):
        codex.cli_command("codex", request(plugin_dirs=["/p"]))
    with pytest.raises(ValueError, match="no counterpart"):
        codex.cli_command("codex", request(tools=["Read", "WebFetch"]))
    with pytest.raises(ValueError, match="at least one tool"):
        codex.cli_command("codex", request(tools=["Read"], disallowed_tools=["Read"]))


def test_the_effort_reaches_the_config_when_codex_knows_it() -> None:
    assert config_of(request(effort="high"))["model_reasoning_effort"] == "high"
    assert "model_reasoning_effort" not in config_of(request(effort="max"))


# ---------------------------------------------------------------------------------------------------------
# Tool calls of a model script


def test_every_script_tool_becomes_one_exec_command() -> None:
    form = codex.Codex().tool_form
    assert form("Bash", {"command": "ls -la"}) == ("exec_command", {"cmd": "ls -la"})
    assert form("Read", {"file_path": "/workspace/a b.py"}) == ("exec_command", {"cmd": "cat -- '/workspace/a b.py'"})
    assert form("Read", {"file_path": "a.py", "offset": 3, "limit": 2}) == (
        "exec_command",
        {"cmd": "sed -n 3,4p -- a.py"},
    )
    skill = form("Skill", {"skill": "demo"})
    assert skill == ("exec_command", {"cmd": "cat .agents/skills/demo/SKILL.md"})
    assert codex.skill_read(skill[1]["cmd"], "demo")
    assert form("Grep", {"pattern": "a b", "path": "src"}) == ("exec_command", {"cmd": "grep -rn -e 'a b' -- src"})
    assert form("Glob", {"pattern": "**/*.py"})[1]["cmd"] == "find . -path './*.py'"
    assert form("mcp__s__t", {"x": 1}) == ("mcp__s__t", {"x": 1})


def test_edits_and_writes_are_apply_patch_heredocs_relative_to_the_workspace() -> None:
    name, edit = codex.tool_form("Edit", {"file_path": "/workspace/p.py", "old_string": "a\n", "new_string": "b\nc\n"})
    assert name == "exec_command"
    assert edit["cmd"] == (
        "apply_patch <<'SKILLBENCH_PATCH'\n*** Begin Patch\n*** Update File: p.py\n@@\n-a\n+b\n+c\n*** End Patch\n"
        "SKILLBENCH_PATCH\n"
    )
    _name, write = codex.tool_form("Write", {"file_path": "/workspace/N.md", "content": "x\ny\n"})
    assert "*** Add File: N.md\n+x\n+y\n*** End Patch" in write["cmd"]


# ---------------------------------------------------------------------------------------------------------
# Registration and install


def test_the_adapter_is_registered_with_the_responses_wire() -> None:
    adapter = agents.adapter("codex")
    assert isinstance(adapter, codex.Codex) and adapter.wire_api == "openai-responses"
    assert adapter.skills_dir == ".agents/skills" and adapter.contain_shells is True
    assert ".codex" in adapter.covered_paths


def test_the_install_is_the_platform_packages_vendor_folder(tmp_path: Path) -> None:
    modules = tmp_path / "node_modules"
    launcher = modules / "@openai" / "codex" / "bin" / "codex.js"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("")
    with pytest.raises(ValueError, match="make setup"):
        codex.native_install(launcher)
    vendor = modules / "@openai" / "codex-linux-x64" / "vendor" / codex.TARGET
    (vendor / "bin").mkdir(parents=True)
    (vendor / "bin" / "codex").write_text("")
    install = codex.native_install(launcher)
    assert install.host_path == vendor and install.entry == "bin/codex" and install.name == "codex"
    assert codex.native_install(vendor / "bin" / "codex").host_path == vendor


def test_progress_lines_name_codex_items_and_their_outcome_never_their_content() -> None:
    output = io.StringIO()
    raw = capture("skill-and-tools.jsonl")
    with sessions.SessionProgress("cell", output, [], heartbeat_s=60) as progress:
        for start in range(0, len(raw), 41):
            progress.observe(raw[start : start + 41])
    lines = output.getvalue().splitlines()
    assert sum("· command · ok" in line for line in lines) == 3
    assert sum("· command · error" in line for line in lines) == 2
    assert sum("· patch · ok" in line for line in lines) == 2
    assert lines[-1].endswith("finished · 7 tool calls · ok · cost n/a")
    text = output.getvalue()
    assert "SKILL.md" not in text and "Looking first" not in text and "echo hi" not in text


def test_a_model_codex_has_no_metadata_for_is_said_on_the_row_not_failed() -> None:
    """Codex asked for a model it does not know (a Claude name in a scripted run) runs on fallback metadata and says
    so in an error item, as it did against the stand-in of this test's recording; the row carries it."""
    warning = {
        "type": "item.completed",
        "item": {
            "id": "item_0",
            "type": "error",
            "message": "Model metadata for `claude-sonnet-4-20250514` not found. Defaulting to fallback metadata; "
            "this can degrade performance and cause issues.",
        },
    }
    reading = read(encode([stream()[0], warning, *stream()[1:]]))
    assert reading.stream_error is None and reading.cli_failures == [] and reading.subtype == "success"
    assert len(reading.notes) == 1 and reading.notes[0].startswith(
        "codex: Model metadata for `claude-sonnet-4-20250514` not found."
    )
    assert "agents.codex.model" in reading.notes[0]
    total = sessions.sum_sessions([{**base_record(), "cli_notes": reading.notes}])
    assert total["evidence_diagnostics"] == reading.notes and total["ok"] is True
    assert read(encode(stream())).notes == []


def base_record() -> dict[str, Any]:
    return {
        "ok": True,
        "session_id": "s",
        "num_turns": 1,
        "cost_usd": 0.01,
        "cli_cost_usd": None,
        "duration_s": 1.0,
        "input_tokens": 1,
        "output_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
