"""opencode as an arm's agent, through the real CLI (tools/node_modules/.bin/opencode) and the scripted model.

One snakemake run of four opencode arms on one demo task whose project snapshot carries a hostile opencode.json,
opencode.jsonc and .opencode/ (an MCP server, plugins, a hook, widened permissions, a redirected provider):
a session that proves its skill, one that skips it, a baseline without skills and a read-only session that tries
to edit; and two hostile sessions beside them: an opencode session whose reads flood its event stream, and a Claude
Code session whose model the run's price table cannot price. Every assertion reads that one run.
"""

from __future__ import annotations

import json

import pytest
from agent_arms import INCUMBENT, AgentArms, pinned_version
from conftest import Project

EXPERIMENT = "octest"
MODEL = "claude-sonnet-4-5"  # in opencode's bundled catalog, so the CLI prices it too
PINNED = pinned_version("opencode-ai")
MARKERS = ("PLUGIN-RAN", "MCP-RAN", "MCP2-RAN", "MCP3-RAN", "HOOK-RAN", "PLAN-WROTE", "BASH-WROTE")
# The flood: 100 reads of 50 KB files in one turn (opencode keeps each read's output, up to 50 KB, in its stream).
FLOOD_FILES = 100
FLOOD_READS = [
    {"name": "Read", "input": {"file_path": f"/tmp/flood/part{part:03d}.txt"}} for part in range(FLOOD_FILES)
]
# The model of the run's Claude Code arm (model.name): the run's price table prices only opencode's.
UNPRICED_MODEL = "claude-unpriced-test-1"


CLI = AgentArms(
    "opencode",
    "oc",
    EXPERIMENT,
    MODEL,
    {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
    extra_arms=(
        ("oc_flood", {"agent": "opencode", "sessions": [{"role": "flood", "prompt": "baseline"}]}),
        ("cc_unpriced", {"agent": "claude-code", "sessions": [{"role": "unpriced", "prompt": "baseline"}]}),
    ),
    script_fill=(("@@FLOOD_READS@@", json.dumps(FLOOD_READS)), ("@@FLOOD_FILES@@", str(FLOOD_FILES))),
    model_name=UNPRICED_MODEL,
)
_rows, _cell = CLI.rows, CLI.cell


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return CLI.run(tmp_path_factory)


def _tools(project: Project, arm: str) -> list[tuple[str, str, str]]:
    """(tool, status, output or error) of every tool part in the arm's one transcript."""
    (transcript,) = sorted((_cell(project, arm) / "transcripts").glob("*.jsonl"))
    parts = []
    for line in transcript.read_text().splitlines():
        event = json.loads(line)
        assert event["sessionID"] != "forged"
        if event["type"] == "tool_use":
            state = event["part"]["state"]
            parts.append((event["part"]["tool"], state["status"], state.get("output") or state.get("error") or ""))
    return parts


def _bash_outputs(project: Project, arm: str) -> str:
    return "\n".join(text for tool, status, text in _tools(project, arm) if tool == "bash" and status == "completed")


def test_rows_carry_the_agent_its_version_and_only_the_skills_under_test(run: Project) -> None:
    rows = _rows(run)
    assert set(rows) == {"oc_skill", "oc_skip", "oc_baseline", "oc_readonly", "oc_flood", "cc_unpriced"}
    for row in (rows[arm] for arm in (*CLI.arms, "oc_flood")):
        assert row["agent"] == "opencode" and row["cli_version"] == PINNED and row["model"] == MODEL
    # opencode lists its skills only in its system prompt, with its skill tool: the incumbent family for the arms
    # that have it (the prompt listed skills: skills-are-listed), none for the others.
    assert rows["oc_skill"]["offered_skills"] == rows["oc_skip"]["offered_skills"] == INCUMBENT
    assert rows["oc_baseline"]["offered_skills"] == [] and rows["oc_readonly"]["offered_skills"] == []
    assert "skills-are-listed" in _bash_outputs(run, "oc_skill")


def test_the_cell_pages_show_turns_and_tool_calls_as_the_row_does(run: Project) -> None:
    CLI.assert_pages_show_turns_as_the_row_does(run)


def test_a_session_proves_its_skill_from_the_stream_and_resolves(run: Project) -> None:
    row = _rows(run)["oc_skill"]
    assert row["skill_invoked"] is True and row["error_kind"] is None, row["error_detail"]
    assert row["resolved"] is True and row["diff_files"] >= 2
    skill_parts = [(status, text) for tool, status, text in _tools(run, "oc_skill") if tool == "skill"]
    assert [status for status, _text in skill_parts] == ["completed"]
    assert "change-work" in skill_parts[0][1]
    assert "skills-are-listed" in _bash_outputs(run, "oc_skill")
    # The row's cost is the gateway's ledger; opencode's own figure for the same requests agrees with it.
    check = row["cost_check"]
    assert row["cost_usd"] and row["cost_usd"] > 0 and check["ledger_usd"] == row["cost_usd"]
    assert check["cli_usd"] is not None and check["agrees"] is True, check


def test_a_session_that_skips_its_skill_is_skill_not_invoked(run: Project) -> None:
    row = _rows(run)["oc_skip"]
    assert row["error_kind"] == "skill-not-invoked" and row["skill_invoked"] is False
    assert not [tool for tool, _status, _text in _tools(run, "oc_skip") if tool == "skill"]


def test_the_baseline_has_no_skills_and_cannot_load_one(run: Project) -> None:
    row = _rows(run)["oc_baseline"]
    outputs = _bash_outputs(run, "oc_baseline")
    assert "no-skills-listed" in outputs and "skills-are-listed" not in outputs
    skill_parts = [status for tool, status, _text in _tools(run, "oc_baseline") if tool == "skill"]
    assert skill_parts == ["error"]
    assert row["resolved"] is True, row["error_detail"]


def test_a_read_only_session_cannot_edit_write_or_run_commands(run: Project) -> None:
    row = _rows(run)["oc_readonly"]
    parts = _tools(run, "oc_readonly")
    tried = {tool: status for tool, status, _text in parts if tool in ("edit", "write", "bash")}
    assert tried == {"edit": "error", "write": "error", "bash": "error"}, parts
    assert {status for tool, status, _text in parts if tool == "read"} == {"completed"}
    assert row["diff_files"] == 0 and row["resolved"] is False
    assert (_cell(run, "oc_readonly") / "patch.diff").read_text().strip() == ""


def test_the_repositorys_own_opencode_config_plugins_and_mcp_servers_stay_inert(run: Project) -> None:
    rows = _rows(run)
    for arm in ("oc_skill", "oc_skip", "oc_baseline"):
        outputs = _bash_outputs(run, arm)
        # The covers: an empty opencode.json(c) and a .opencode/ of the session's own (holding only the .gitignore
        # opencode writes into each config folder), for the CLI and the agent's commands alike.
        for line in ("config-bytes=0", "jsonc-bytes=0", "dotdir-entries=0"):
            assert line in outputs.splitlines(), (arm, outputs)
        # The agent's commands run without the CLI's environment, in a PID namespace of their own.
        assert "env-vars=0" in outputs.splitlines() and "proc-env=0" in outputs.splitlines(), (arm, outputs)
        assert "markers=0" in outputs.splitlines(), (arm, outputs)
    for arm, row in ((arm, rows[arm]) for arm in CLI.arms):
        patch = (_cell(run, arm) / "patch.diff").read_text()
        assert not [marker for marker in MARKERS if marker in patch], (arm, patch[:2000])
        assert "opencode" not in patch, (arm, patch[:2000])  # the covers leave the repository's files as they were
        # The provider the repository names (127.0.0.1:9) was never asked: every request reached the gateway.
        ledger = json.loads((_cell(run, arm) / "ledger.json").read_text())
        (session,) = ledger["sessions"]
        assert session["requests"] and all(entry["outcome"] == "ok" for entry in session["requests"]), arm
        assert row["error_kind"] in (None, "skill-not-invoked", "no-work-produced", "oracle-failed"), row


def test_a_flood_of_reads_stops_opencode_and_is_the_agents_counted_output_limit(run: Project) -> None:
    from skillbench.base.records import EXCLUDED_ERROR_KINDS, SYSTEMIC_ERROR_KINDS

    row = _rows(run)["oc_flood"]
    assert row["error_kind"] == "output-limit-exceeded" and row["resolved"] is False, row["error_detail"]
    assert row["error_kind"] not in EXCLUDED_ERROR_KINDS | SYSTEMIC_ERROR_KINDS  # counted, never retried or an outage
    assert json.loads((_cell(run, "oc_flood") / "record.json").read_text())["attempt"] == 1
    (transcript,) = row["transcript_artifacts"]
    kept = _cell(run, "oc_flood") / transcript["path"]
    assert 4 << 20 < kept.stat().st_size <= 8 << 20  # most of the flood, never more than the capture
    reads = [status for tool, status, _text in _tools(run, "oc_flood") if tool == "read"]
    assert reads and set(reads) == {"completed"} and len(reads) < FLOOD_FILES  # cut before the last of them
    assert "flood-ready" in _bash_outputs(run, "oc_flood")


def test_a_request_for_a_model_the_price_table_cannot_price_is_refused_and_the_row_counts_it(run: Project) -> None:
    row = _rows(run)["cc_unpriced"]
    assert row["agent"] == "claude-code" and row["model"] == UNPRICED_MODEL
    assert row["error_kind"] == "model-unpriced" and UNPRICED_MODEL in row["error_detail"], row["error_detail"]
    assert json.loads((_cell(run, "cc_unpriced") / "record.json").read_text())["attempt"] == 1
    ledger = json.loads((_cell(run, "cc_unpriced") / "ledger.json").read_text())
    (session,) = ledger["sessions"]
    # Refused before anything went upstream: nothing spent, nothing unmeasured.
    assert session["requests"] and {entry["refused"] for entry in session["requests"]} == {"model-unpriced"}
    assert row["cost_usd"] == 0.0
