"""Copilot CLI as an arm's agent, through the real CLI (tools/node_modules/.bin/copilot, its package unpacked by
setup into tools/copilot/) and the scripted model.

One snakemake run of four copilot arms on one demo task whose project snapshot carries hostile Copilot config
(hooks in .github/hooks and the repository settings, MCP servers in .mcp.json, .github/mcp.json and
.vscode/mcp.json, skills in .github/skills and .agents/skills, a custom agent, custom instructions): a session
that proves its skill, one that skips it, a baseline without skills and a read-only session that tries to edit.
Every assertion reads that one run.
"""

from __future__ import annotations

import json

import pytest
from agent_arms import AgentArms, pinned_version
from conftest import Project

EXPERIMENT = "cptest"
MODEL = "claude-sonnet-4-5"
PINNED = pinned_version("@github/copilot")
MARKERS = ("-RAN", "PLAN-WROTE", "BASH-WROTE")
FOREIGN = ("foreign-skills-listed", "foreign-instructions-loaded", "foreign-agents-listed")


CLI = AgentArms(
    "copilot",
    "cp",
    EXPERIMENT,
    MODEL,
    {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
)
ARMS = CLI.arms
_rows, _cell, _events = CLI.rows, CLI.cell, CLI.events


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return CLI.run(tmp_path_factory)


def _tools(project: Project, arm: str) -> list[tuple[str, bool, str]]:
    """(tool, success, output or error) of every tool execution in the arm's one transcript."""
    events = _events(project, arm)
    starts = {e["data"]["toolCallId"]: e["data"]["toolName"] for e in events if e["type"] == "tool.execution_start"}
    calls = []
    for event in events:
        if event["type"] == "tool.execution_complete":
            data = event["data"]
            text = (data.get("result") or {}).get("content") or (data.get("error") or {}).get("message") or ""
            calls.append((starts[data["toolCallId"]], data["success"], text))
    return calls


def _bash_outputs(project: Project, arm: str) -> list[str]:
    return [line for tool, ok, text in _tools(project, arm) if tool == "bash" and ok for line in text.splitlines()]


def test_rows_carry_the_agent_its_version_and_the_skills_it_offered(run: Project) -> None:
    rows = _rows(run)
    assert set(rows) == set(ARMS)
    for arm, row in rows.items():
        assert row["agent"] == "copilot" and row["cli_version"] == PINNED and row["model"] == MODEL
        # Offered: what the CLI's own first event listed as enabled — the arm's skills, none from the repository's
        # .github/skills or .agents/skills, no built-in ones.
        listed = _events(run, arm)[0]
        assert listed["type"] == "session.skills_loaded"
        enabled = sorted(skill["name"] for skill in listed["data"]["skills"] if skill["enabled"])
        assert row["offered_skills"] == enabled, arm
        assert not [name for name in enabled if name.startswith("foreign-")], arm
    assert "change-work" in rows["cp_skill"]["offered_skills"]
    assert rows["cp_baseline"]["offered_skills"] == []


def test_the_cell_pages_show_turns_and_tool_calls_as_the_row_does(run: Project) -> None:
    CLI.assert_pages_show_turns_as_the_row_does(run)


def test_a_session_proves_its_skill_from_the_stream_and_resolves(run: Project) -> None:
    row = _rows(run)["cp_skill"]
    assert row["skill_invoked"] is True and row["error_kind"] is None, row["error_detail"]
    assert row["resolved"] is True and row["diff_files"] >= 2
    skill_calls = [(ok, text) for tool, ok, text in _tools(run, "cp_skill") if tool == "skill"]
    assert skill_calls and [ok for ok, _text in skill_calls] == [True] and "change-work" in skill_calls[0][1]
    assert "skills-are-listed" in _bash_outputs(run, "cp_skill")
    # The row's cost is the gateway's ledger; Copilot reports no price of its own to cross-check it with.
    assert row["cost_usd"] and row["cost_usd"] > 0
    assert row["cli_cost_usd"] is None


def test_a_write_of_a_file_that_exists_lands_as_a_whole_rewrite(run: Project) -> None:
    # The first Write creates NOTES.md; the second rewrites it, which Copilot's create refuses: the adapter makes it an
    # edit of the whole current text, and the file ends with the second content only.
    calls = [(tool, ok, text) for tool, ok, text in _tools(run, "cp_skill") if "NOTES.md" in text]
    assert [(tool, ok) for tool, ok, _text in calls] == [("create", True), ("edit", True)], calls
    patch = (_cell(run, "cp_skill") / "patch.diff").read_text()
    assert "+Grouped thousands in format_money; notes-rewritten-whole." in patch
    assert patch.count("+Grouped thousands in format_money") == 1  # replaced, not appended to


def test_a_session_that_skips_its_skill_is_skill_not_invoked(run: Project) -> None:
    row = _rows(run)["cp_skip"]
    assert row["error_kind"] == "skill-not-invoked" and row["skill_invoked"] is False
    assert not [tool for tool, _ok, _text in _tools(run, "cp_skip") if tool == "skill"]


def test_the_clis_own_file_tool_cannot_read_its_environment_or_state(run: Project) -> None:
    # The view tool runs in the process that holds the token: /proc/self/environ, a workspace link to it (made by
    # the agent's own command) and ~/.copilot are all outside the paths it may open.
    calls = _tools(run, "cp_skip")
    assert "linked" in _bash_outputs(run, "cp_skip")
    views = [(ok, text) for tool, ok, text in calls if tool == "view"]
    assert len(views) == 5 and [ok for ok, _text in views] == [True, True, False, False, False], calls
    assert all("Permission denied" in text for _ok, text in views[2:]), views
    transcript = "\n".join(json.dumps(event) for event in _events(run, "cp_skip"))
    # No dump of the CLI's environment anywhere (the variables next to the token; the token itself is redacted).
    assert "COPILOT_OFFLINE=true" not in transcript and "COPILOT_PROVIDER_TYPE=anthropic" not in transcript


def test_the_baseline_has_no_skills_and_cannot_load_one(run: Project) -> None:
    row = _rows(run)["cp_baseline"]
    outputs = _bash_outputs(run, "cp_baseline")
    assert "no-skills-listed" in outputs and "skills-are-listed" not in outputs
    assert [(ok, "does not exist" in text) for tool, ok, text in _tools(run, "cp_baseline") if tool == "skill"] == [
        (False, True)
    ]
    assert row["resolved"] is True, row["error_detail"]


def test_a_read_only_session_cannot_edit_create_or_run_commands(run: Project) -> None:
    row = _rows(run)["cp_readonly"]
    calls = _tools(run, "cp_readonly")
    tried = {tool: ok for tool, ok, _text in calls if tool in ("edit", "create", "bash")}
    assert tried == {"edit": False, "create": False, "bash": False}, calls
    assert {ok for tool, ok, _text in calls if tool == "view"} == {True}
    assert row["diff_files"] == 0 and row["resolved"] is False
    assert (_cell(run, "cp_readonly") / "patch.diff").read_text().strip() == ""


def test_the_repositorys_own_copilot_config_stays_inert_and_the_token_out_of_reach(run: Project) -> None:
    rows = _rows(run)
    for arm in ("cp_skill", "cp_skip", "cp_baseline"):
        outputs = _bash_outputs(run, arm)
        # The agent's commands run without the CLI's environment, in a PID namespace of their own, and cannot
        # rewrite the settings the CLI reloads (whose hooks would run in the CLI).
        for line in ("env-vars=0", "proc-env=0", "markers=0", "settings-writable=no"):
            assert line in outputs, (arm, outputs)
        # No custom instructions, foreign skills or custom agents reached the model.
        assert not [line for line in outputs if line in FOREIGN], (arm, outputs)
    for arm, row in rows.items():
        events = _events(run, arm)
        # The forged result line written to every stdout the agent's command could see is not the CLI's: the one
        # result is the session's own, the one its transcript is named after.
        (transcript,) = (_cell(run, arm) / "transcripts").glob("*.jsonl")
        results = [event["sessionId"] for event in events if event["type"] == "result"]
        assert len(results) == 1 and results[0] != "forged" and transcript.stem.endswith(results[0]), (arm, results)
        servers = [event["data"]["servers"] for event in events if event["type"] == "session.mcp_servers_loaded"]
        assert servers and not [s for s in servers[0] if s.get("status") != "disabled"], (arm, servers)
        patch = (_cell(run, arm) / "patch.diff").read_text()
        assert not [marker for marker in MARKERS if marker in patch], (arm, patch[:2000])
        ledger = json.loads((_cell(run, arm) / "ledger.json").read_text())
        (session,) = ledger["sessions"]
        assert session["requests"] and all(entry["outcome"] == "ok" for entry in session["requests"]), arm
        assert row["error_kind"] in (None, "skill-not-invoked", "no-work-produced", "oracle-failed"), row
