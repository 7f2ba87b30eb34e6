"""Gemini CLI as an arm's agent, through the real CLI (tools/node_modules/.bin/gemini) and the scripted model.

One snakemake run of four gemini arms on one demo task whose project snapshot carries hostile Gemini CLI config
(a .gemini/ with project settings naming an MCP server, hooks and a tool discovery command, a .env, skills, a
subagent, a command and a policy; a root .env pointing the CLI at another system prompt; foreign skills in
.agents/skills; a GEMINI.md): a session that proves its skill, one that skips it, a baseline without skills and a
read-only session that tries to edit. Every assertion reads that one run.
"""

from __future__ import annotations

import json

import pytest
from agent_arms import AgentArms, pinned_version
from conftest import REPO, Project

EXPERIMENT = "gmtest"
MODEL = "gemini-2.5-pro"
PINNED = pinned_version("@google/gemini-cli")
MARKERS = ("-RAN", "PLAN-WROTE", "BASH-WROTE")
FOREIGN = ("foreign-skills-listed", "foreign-system-prompt-loaded", "foreign-agents-listed", "foreign-commands-listed")
INCUMBENT = sorted(path.name for path in (REPO / ".claude" / "skills").iterdir() if (path / "SKILL.md").is_file())


CLI = AgentArms(
    "gemini",
    "gm",
    EXPERIMENT,
    MODEL,
    {"input": 1.25, "output": 10.0, "cache_write": 1.25, "cache_write_1h": 1.25, "cache_read": 0.31},
    commit_ignored=True,
)
ARMS = CLI.arms
_rows, _cell, _events = CLI.rows, CLI.cell, CLI.events


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return CLI.run(tmp_path_factory)


def _tools(project: Project, arm: str) -> list[tuple[str, str, str]]:
    """(tool, status, output or error) of every tool call in the arm's one transcript."""
    events = _events(project, arm)
    names = {event["tool_id"]: event["tool_name"] for event in events if event["type"] == "tool_use"}
    calls = []
    for event in events:
        if event["type"] == "tool_result":
            text = event.get("output") or (event.get("error") or {}).get("message") or ""
            calls.append((names[event["tool_id"]], event["status"], str(text)))
    return calls


def _bash_outputs(project: Project, arm: str) -> list[str]:
    return [
        line
        for tool, status, text in _tools(project, arm)
        if tool == "run_shell_command" and status == "success"
        for line in text.splitlines()
    ]


def test_rows_carry_the_agent_its_version_and_the_skills_it_offered(run: Project) -> None:
    rows = _rows(run)
    assert set(rows) == set(ARMS)
    for arm, row in rows.items():
        assert row["agent"] == "gemini" and row["cli_version"] == PINNED and row["model"] == MODEL, arm
        assert _events(run, arm)[0]["type"] == "init"
    # Offered: the skills in the clone's .agents/skills (the incumbent family, none of the repository's own) — for the
    # arms whose sessions may use skills; the others' CLI had skills switched off. The stream does not list them, so
    # the row's list is checked against what the CLI's system prompt listed to the model.
    assert rows["gm_skill"]["offered_skills"] == rows["gm_skip"]["offered_skills"] == INCUMBENT
    assert "change-work" in INCUMBENT
    assert rows["gm_baseline"]["offered_skills"] == [] and rows["gm_readonly"]["offered_skills"] == []
    for arm in ("gm_skill", "gm_skip", "gm_baseline"):
        listed = sorted(line.removeprefix("listed=") for line in _bash_outputs(run, arm) if line.startswith("listed="))
        assert listed == rows[arm]["offered_skills"], arm


def test_the_cell_pages_show_turns_and_tool_calls_as_the_row_does(run: Project) -> None:
    CLI.assert_pages_show_turns_as_the_row_does(run)


def test_a_session_proves_its_skill_from_the_stream_and_resolves(run: Project) -> None:
    row = _rows(run)["gm_skill"]
    assert row["skill_invoked"] is True and row["error_kind"] is None, row["error_detail"]
    assert row["resolved"] is True and row["diff_files"] >= 2
    skill_calls = [(status, text) for tool, status, text in _tools(run, "gm_skill") if tool == "activate_skill"]
    assert [status for status, _text in skill_calls] == ["success"] and "change-work" in skill_calls[0][1]
    assert "skills-are-listed" in _bash_outputs(run, "gm_skill")
    # The row's cost is the gateway's ledger; Gemini CLI reports tokens but no price to cross-check it with.
    assert row["cost_usd"] and row["cost_usd"] > 0
    assert row["cli_cost_usd"] is None


def test_a_session_that_skips_its_skill_is_skill_not_invoked(run: Project) -> None:
    row = _rows(run)["gm_skip"]
    assert row["error_kind"] == "skill-not-invoked" and row["skill_invoked"] is False
    assert not [tool for tool, _status, _text in _tools(run, "gm_skip") if tool == "activate_skill"]


def test_the_clis_own_file_tool_cannot_read_its_environment_or_settings(run: Project) -> None:
    # read_file runs in the process that holds the token: /proc/self/environ, a workspace link to it (made by the
    # agent's own command) and ~/.gemini/settings.json are all outside the paths it may open.
    calls = _tools(run, "gm_skip")
    assert "linked" in _bash_outputs(run, "gm_skip")
    reads = [(status, text) for tool, status, text in calls if tool == "read_file"]
    assert [status for status, _text in reads] == ["success", "success", "error", "error", "error"], calls
    assert all("outside the allowed workspace" in text for _status, text in reads[2:]), reads
    transcript = "\n".join(json.dumps(event) for event in _events(run, "gm_skip"))
    # No dump of the CLI's environment anywhere (the switches next to the token; the token itself is redacted).
    assert "GEMINI_CLI_NO_RELAUNCH=true" not in transcript and "GEMINI_CLI_TRUST_WORKSPACE=true" not in transcript


def test_the_baseline_has_no_skills_and_cannot_load_one(run: Project) -> None:
    row = _rows(run)["gm_baseline"]
    outputs = _bash_outputs(run, "gm_baseline")
    assert "no-skills-listed" in outputs and "skills-are-listed" not in outputs
    skill_calls = [(status, text) for tool, status, text in _tools(run, "gm_baseline") if tool == "activate_skill"]
    assert [status for status, _text in skill_calls] == ["error"] and "not found" in skill_calls[0][1], skill_calls
    assert row["resolved"] is True, row["error_detail"]


def test_a_read_only_session_cannot_edit_write_or_run_commands(run: Project) -> None:
    row = _rows(run)["gm_readonly"]
    calls = _tools(run, "gm_readonly")
    tried = {tool: status for tool, status, _text in calls if tool in ("replace", "write_file", "run_shell_command")}
    assert tried == {"replace": "error", "write_file": "error", "run_shell_command": "error"}, calls
    assert all("not found" in text for tool, _status, text in calls if tool in tried), calls
    assert {status for tool, status, _text in calls if tool == "read_file"} == {"success"}
    assert row["diff_files"] == 0 and row["resolved"] is False
    assert (_cell(run, "gm_readonly") / "patch.diff").read_text().strip() == ""


def test_the_repositorys_own_gemini_config_stays_inert_and_the_token_out_of_reach(run: Project) -> None:
    rows = _rows(run)
    for arm in ("gm_skill", "gm_skip", "gm_baseline"):
        outputs = _bash_outputs(run, arm)
        # The agent's commands run without the CLI's environment, in a PID namespace of their own, and can write
        # neither the home settings nor the (covered) project settings the CLI reads.
        for line in ("env-vars=0", "proc-env=0", "markers=0", "settings-writable=no", "project-settings=read-only"):
            assert line in outputs, (arm, outputs)
        # No foreign skills, subagents, commands or system prompt reached the model; GEMINI.md, the repository's own
        # notes to agents, does (like CLAUDE.md for Claude Code).
        assert not [line for line in outputs if line in FOREIGN], (arm, outputs)
        assert "repository-context-loaded" in outputs, (arm, outputs)
    for arm, row in rows.items():
        events = _events(run, arm)
        # The forged result line written to every stdout the agent's command could see is not the CLI's: the one
        # result is the session's own, and the transcript is named after the init event's session id.
        (transcript,) = (_cell(run, arm) / "transcripts").glob("*.jsonl")
        assert [event["type"] for event in events].count("result") == 1 and events[-1]["stats"], arm
        assert transcript.stem.endswith(events[0]["session_id"]), arm
        patch = (_cell(run, arm) / "patch.diff").read_text()
        assert not [marker for marker in MARKERS if marker in patch], (arm, patch[:2000])
        ledger = json.loads((_cell(run, arm) / "ledger.json").read_text())
        (session,) = ledger["sessions"]
        assert session["wire"] == "gemini", arm
        assert session["requests"] and all(entry["outcome"] == "ok" for entry in session["requests"]), arm
        assert row["error_kind"] in (None, "skill-not-invoked", "no-work-produced", "oracle-failed"), row
