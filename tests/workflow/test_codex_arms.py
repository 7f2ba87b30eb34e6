"""OpenAI Codex CLI as an arm's agent, through the real CLI (tools/node_modules/.bin/codex, the native executable of
its platform package) and the scripted model speaking the OpenAI Responses wire.

One snakemake run of four codex arms on one demo task whose project snapshot carries hostile Codex config (a
`.codex/config.toml` with notify, an MCP server and instructions, `.codex/hooks.json`, `.codex/skills`, AGENTS.md
and AGENTS.override.md, a foreign `.agents/skills` skill, a plugin marketplace): a session that proves its skill,
one that reads only its skill's first line, a baseline without skills and a read-only session that tries to edit.
Every assertion reads that one run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_arms import INCUMBENT, AgentArms, pinned_version
from conftest import Project

EXPERIMENT = "cxtest"
MODEL = "gpt-5.5"
PINNED = pinned_version("@openai/codex")
MARKERS = ("-RAN", "PLAN-WROTE", "BASH-WROTE")
FOREIGN = ("foreign-skills-listed", "foreign-instructions-loaded", "foreign-config-loaded")
SKILL_READ = "cat .agents/skills/change-work/SKILL.md"


CLI = AgentArms(
    "codex",
    "cx",
    EXPERIMENT,
    MODEL,
    {"input": 1.25, "output": 10.0, "cache_write": 0.0, "cache_write_1h": 0.0, "cache_read": 0.125},
)
ARMS = CLI.arms
_rows, _cell, _events = CLI.rows, CLI.cell, CLI.events


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return CLI.run(tmp_path_factory)


def _items(project: Project, arm: str) -> list[dict[str, Any]]:
    return [event["item"] for event in _events(project, arm) if event["type"] == "item.completed"]


def _commands(project: Project, arm: str) -> list[tuple[str, int | None, str]]:
    """(command, exit code, output) of every completed command item of the arm's one transcript."""
    return [
        (item["command"], item.get("exit_code"), item.get("aggregated_output") or "")
        for item in _items(project, arm)
        if item["type"] == "command_execution"
    ]


def _outputs(project: Project, arm: str) -> list[str]:
    return [line for _cmd, code, text in _commands(project, arm) if code == 0 for line in text.splitlines()]


def test_rows_carry_the_agent_and_its_version_and_only_the_skills_under_test(run: Project) -> None:
    rows = _rows(run)
    assert set(rows) == set(ARMS)
    for arm, row in rows.items():
        assert row["agent"] == "codex" and row["cli_version"] == PINNED and row["model"] == MODEL, arm
        # A model Codex knows: no fallback metadata, so the row has nothing to say of it.
        assert not [note for note in row["evidence_diagnostics"] if "fallback" in note], arm
    # Codex lists its skills only in its prompt (its bundled system skills are off): the incumbent family for the
    # arms that may use skills — the prompt listed skills (skills-are-listed), never a foreign one — else none.
    assert rows["cx_skill"]["offered_skills"] == rows["cx_skip"]["offered_skills"] == INCUMBENT
    assert rows["cx_baseline"]["offered_skills"] == [] and rows["cx_readonly"]["offered_skills"] == []
    for arm in ("cx_skill", "cx_skip"):
        assert "skills-are-listed" in _outputs(run, arm) and "foreign-skills-listed" not in _outputs(run, arm)


def test_the_cell_pages_show_turns_and_tool_calls_as_the_row_does(run: Project) -> None:
    CLI.assert_pages_show_turns_as_the_row_does(run)


def test_a_session_proves_its_skill_by_reading_it_and_resolves(run: Project) -> None:
    row = _rows(run)["cx_skill"]
    assert row["skill_invoked"] is True and row["error_kind"] is None, row["error_detail"]
    assert row["resolved"] is True and row["diff_files"] >= 2
    reads = [(code, text) for cmd, code, text in _commands(run, "cx_skill") if SKILL_READ in cmd]
    assert len(reads) == 1 and reads[0][0] == 0 and "name: change-work" in reads[0][1], reads
    assert "skills-are-listed" in _outputs(run, "cx_skill")
    # Edits went through Codex's own apply_patch (file_change items), not a shell's redirection.
    changes = [item for item in _items(run, "cx_skill") if item["type"] == "file_change"]
    assert len(changes) == 3 and {item["status"] for item in changes} == {"completed"}, changes
    # The row's cost is the gateway's ledger; Codex reports tokens but no price of its own.
    assert row["cost_usd"] and row["cost_usd"] > 0
    assert row["cli_cost_usd"] is None


def test_a_session_that_reads_only_the_first_line_of_its_skill_is_skill_not_invoked(run: Project) -> None:
    row = _rows(run)["cx_skip"]
    assert row["error_kind"] == "skill-not-invoked" and row["skill_invoked"] is False
    # It read the skill file, successfully, with a command shaped like a skill read: the model saw only `---`.
    reads = [(code, text) for cmd, code, text in _commands(run, "cx_skip") if "SKILL.md" in cmd]
    assert reads == [(0, "---\n")], reads
    assert "skills-are-listed" in _outputs(run, "cx_skip")


def test_the_baseline_has_no_skills_and_cannot_load_one(run: Project) -> None:
    row = _rows(run)["cx_baseline"]
    outputs = _outputs(run, "cx_baseline")
    assert "no-skills-listed" in outputs and "skills-are-listed" not in outputs
    reads = [(code, text) for cmd, code, text in _commands(run, "cx_baseline") if SKILL_READ in cmd]
    assert len(reads) == 1 and reads[0][0] != 0 and "No such file" in reads[0][1], reads
    assert row["resolved"] is True and row["skill_invoked"] is None, row


def test_a_read_only_session_cannot_write_by_patch_or_command(run: Project) -> None:
    row = _rows(run)["cx_readonly"]
    commands = _commands(run, "cx_readonly")
    reads = [code for cmd, code, _text in commands if cmd.count("cat -- ")]
    assert reads == [0, 0], commands
    writes = [code for cmd, code, _text in commands if "touch /workspace/BASH-WROTE" in cmd]
    assert len(writes) == 1 and writes[0] != 0, commands
    # Codex's read-only sandbox refuses its own patches too: no completed file change.
    changes = [item for item in _items(run, "cx_readonly") if item["type"] == "file_change"]
    assert changes and {item["status"] for item in changes} == {"failed"}, changes
    assert row["diff_files"] == 0 and row["resolved"] is False
    assert (_cell(run, "cx_readonly") / "patch.diff").read_text().strip() == ""


def test_the_repositorys_own_codex_config_stays_inert_and_the_token_out_of_reach(run: Project) -> None:
    rows = _rows(run)
    for arm in ("cx_skill", "cx_skip", "cx_baseline"):
        outputs = _outputs(run, arm)
        # The agent's commands run without the CLI's environment, in a PID namespace of their own (no /proc/<pid>
        # of the CLI to read), cannot rewrite the CLI's config, and see the repository's .codex/ covered.
        for line in ("env-vars=0", "proc-env=0", "markers=0", "config-writable=no", "codex-dir=0"):
            assert line in outputs, (arm, outputs)
        # No AGENTS.md, foreign config instructions or foreign skills reached the model.
        assert not [line for line in outputs if line in FOREIGN], (arm, outputs)
    for arm, row in rows.items():
        events = _events(run, arm)
        # The forged turn.completed written to every stdout the agent's command could see is not the CLI's.
        assert [event["type"] for event in events].count("turn.completed") == 1, arm
        (transcript,) = (_cell(run, arm) / "transcripts").glob("*.jsonl")
        assert events[0]["type"] == "thread.started" and transcript.stem.endswith(events[0]["thread_id"]), arm
        assert not [item for item in _items(run, arm) if item["type"] == "mcp_tool_call"], arm
        patch = (_cell(run, arm) / "patch.diff").read_text()
        assert not [marker for marker in MARKERS if marker in patch], (arm, patch[:2000])
        ledger = json.loads((_cell(run, arm) / "ledger.json").read_text())
        (session,) = ledger["sessions"]
        assert session["requests"] and all(entry["outcome"] == "ok" for entry in session["requests"]), arm
        assert session["wire"] == "openai-responses", arm
        assert row["error_kind"] in (None, "skill-not-invoked", "no-work-produced", "oracle-failed"), row
