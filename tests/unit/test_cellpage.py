"""A cell's page: its sessions turn by turn, and everything the agent or a task wrote shown as text."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from rowfactory import make_row
from skillbench.execution import sessions
from skillbench.experiment.settings import PriceSettings
from skillbench.reporting import cellpage

HOSTILE = "</pre></textarea></style><script>document.title='pwned'</script><img src=x onerror=alert(1)>"
TIMING = {
    "started_at": "2026-01-01T00:00:00Z",
    "finished_at": "2026-01-01T00:00:30Z",
    "wall_s": 30.0,
    "sessions_s": 20.0,
    "setup_s": 1.0,
    "verify_s": 2.0,
    "oracle_s": 3.0,
    "overhead_s": 4.0,
    "sessions": [{"role": "work", "started_at": "2026-01-01T00:00:01Z", "finished_at": "2026-01-01T00:00:21Z"}],
}


def hostile_events() -> list[dict]:
    """A session whose every agent-written field carries markup: text, tool names and inputs, results, the result."""
    return [
        {"type": "system", "subtype": "init", "model": HOSTILE, "tools": ["Read"], "cwd": "/workspace"},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": HOSTILE},
                    {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": HOSTILE}},
                    {"type": "tool_use", "id": "t2", "name": HOSTILE, "input": {HOSTILE: HOSTILE, "n": 3}},
                ],
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "Launching skill"},
                    {"type": "tool_result", "tool_use_id": HOSTILE, "content": [{"type": "text", "text": HOSTILE}]},
                ]
            },
        },
        {"type": "user", "isSynthetic": True, "message": {"content": [{"type": "text", "text": HOSTILE}]}},
        {"type": HOSTILE, "payload": HOSTILE},
        {"type": "result", "subtype": "success", "num_turns": 2, "total_cost_usd": 0.5, "result": HOSTILE},
    ]


def page(**overrides) -> str:
    values = {
        "label": "cells/fix/workflow/run0",
        "row": make_row(
            "fix", "workflow", 0, verify_output=HOSTILE, error_detail={"stdout_tail": HOSTILE}, skill_invoked=True
        ),
        "timing": TIMING,
        "transcripts": [cellpage.Transcript("work", "transcripts/work-1.jsonl", hostile_events())],
        "patch": f"diff --git a/x b/x\n+{HOSTILE}\n-old\n",
        "colour": "#0969da",
    }
    values.update(overrides)
    return cellpage.render_cell_page(**values)


def test_every_value_the_agent_wrote_is_text_not_markup():
    text = page()
    # Markup appears only as the page's own constant tags: no script, image, iframe or textarea.
    for tag in ("<script", "<img", "<iframe", "<textarea", "</pre></textarea>"):
        assert tag not in text, tag
    escaped = "&lt;/pre&gt;&lt;/textarea&gt;&lt;/style&gt;&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;"
    assert text.count(escaped) >= 9  # text, skill, tool name and input, results, synthetic text, result, verify...
    assert "+&lt;/pre&gt;" in text  # the patch line


def test_the_page_allows_no_script_and_only_its_own_stylesheet():
    text = page()
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text).group(1)
    assert policy.startswith("default-src &#x27;none&#x27;;") and "script-src" not in policy
    style = re.search(r"<style>(.*?)</style>", text, re.DOTALL).group(1)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src &#x27;sha256-{digest}&#x27;" in policy
    # The arm's colour is only ever one of ours.
    assert "--arm: #57606a" in page(colour="red;}body{background:url(x)")


def test_skill_invocations_are_marked_and_the_session_says_which_skills_it_used():
    text = page()
    assert '<div class="tool skill"><span class="badge">skill invoked: &lt;/pre&gt;' in text
    assert "skills invoked: &lt;/pre&gt;" in text


def test_the_oracle_output_is_only_on_the_author_page():
    secret = "assert total == 1000  # the hidden oracle's expectation"
    shared = page(oracle_log=secret)
    assert secret not in shared and "hidden oracle: <span" in shared and "author-pages/" in shared
    author = page(author_only=True, oracle_log=secret)
    assert "assert total == 1000" in author and "author-only page" in author


def test_an_unreadable_transcript_and_a_missing_patch_are_said_not_hidden():
    text = page(transcripts=[cellpage.Transcript("work", "t.jsonl", None, "not valid JSON")], patch=None)
    assert "transcript not readable: not valid JSON" in text and "no patch recorded" in text


def test_the_reports_cells_section_links_each_run():
    section = cellpage.cells_markdown([("fix", "workflow", 0, "../cells/fix/workflow/run0/cell.html")])
    assert "| fix | workflow | [run 0](../cells/fix/workflow/run0/cell.html) |" in section
    assert cellpage.cells_markdown([]) == ""


def test_one_model_reply_streamed_as_several_events_is_one_turn():
    reply = {"id": "msg_1", "usage": {"input_tokens": 5, "output_tokens": 1}}
    events = [
        {"type": "assistant", "message": {**reply, "content": [{"type": "text", "text": "Reading."}]}},
        {"type": "assistant", "message": {**reply, "content": [{"type": "tool_use", "id": "t", "name": "Read"}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}},
        {"type": "assistant", "message": {"id": "msg_2", "content": [{"type": "text", "text": "Done."}]}},
    ]
    text = page(transcripts=[cellpage.Transcript("work", "t.jsonl", events)])
    assert text.count("turn 1: assistant") == 2 and text.count("tokens: input 5, output 1") == 1
    assert "turn 2: assistant" in text and "turn 3" not in text


def test_the_cost_shows_the_gateways_meter_and_the_clis_own_figure_beside_it():
    prices = PriceSettings(table="list-prices-test", tolerance_pct=1.0, usd_per_mtok={}, source=None)
    check = sessions.cost_check({"cost_usd": 0.25, "cli_cost_usd": 0.5}, prices)
    text = page(row=make_row("fix", "workflow", 0, cost_usd=0.25, cli_cost_usd=0.5, cost_check=check))
    assert "$0.2500" in text and "$0.5000" in text
    assert "list-prices-test; agrees: False" in text


def test_the_page_names_the_agent_cli_that_ran_the_cell():
    assert "Claude Code 2.1.197," in page(row=make_row("fix", "workflow", 0, cli_version="2.1.197"))
    text = page(row=make_row("fix", "gm_direct", 0, agent="gemini", cli_version="0.61.0"))
    assert "gemini 0.61.0," in text and "Claude Code" not in text


def test_a_cell_folders_pages_are_rendered_in_one_step(tmp_path):
    """One job renders every page of a cell folder: the shared pages by task, arm and run, the author-only ones
    (with the oracle's output) in owner-only folders."""
    import os
    import sys

    from skillbench.base import layout
    from skillbench.steps.report import render_cell_pages

    sys.path.insert(0, os.path.dirname(__file__))
    from test_analysis import stored_run

    root = stored_run(tmp_path / "results" / "exp")
    (root / "cells" / "t00" / "workflow" / "run0" / "oracle.log").write_text("AssertionError: 1000 != 1,000\n")
    records = sorted(str(path) for path in (root / "cells").rglob("record.json"))
    render_cell_pages(
        records=records,
        arm_order=["workflow"],
        pages_out=layout.cell_pages(root, "cells"),
        authors_out=layout.cell_author_pages(root, "cells"),
    )
    pages = sorted(path.relative_to(root) for path in (root / "pages").rglob("*.html"))
    assert len(pages) == 36 and pages[0] == Path("pages/cells/t00/workflow/run0.html")
    shared = (root / "pages" / "cells" / "t00" / "workflow" / "run0.html").read_text()
    assert "cells/t00/workflow/run0" in shared and "AssertionError" not in shared
    assert "author-pages/cells/t00/workflow/run0.html" in shared
    author = root / "author-pages" / "cells" / "t00" / "workflow" / "run0.html"
    assert "AssertionError: 1000 != 1,000" in author.read_text()
    assert author.stat().st_mode & 0o777 == 0o600
    assert all(folder.stat().st_mode & 0o077 == 0 for folder in [author.parent, *author.parents[:3]])


def codex_trajectory() -> dict:
    """A Codex session as its ATIF trajectory: the prompt, a turn that reads the skill, a turn that edits."""
    read = "cat .agents/skills/change-work/SKILL.md"
    return {
        "schema_version": "ATIF-v1.8",
        "agent": {
            "name": "codex",
            "version": "0.171.0",
            "extra": {"skills": {"offered": ["change-work"], "expected": "change-work", "invoked": ["change-work"]}},
        },
        "steps": [
            {"step_id": 1, "source": "user", "message": "Use the change-work skill for: group thousands"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Reading the skill first.",
                "tool_calls": [{"tool_call_id": "c1", "function_name": "exec_command", "arguments": {"cmd": read}}],
                "observation": {"results": [{"source_call_id": "c1", "content": "---\nname: change-work\n"}]},
                "metrics": {"prompt_tokens": 900, "completion_tokens": 60, "cost_usd": 0.0017},
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "c2", "function_name": "exec_command", "arguments": {"cmd": "apply_patch <<EOF"}}
                ],
                "observation": {"results": [{"source_call_id": "c2", "content": "bad", "extra": {"is_error": True}}]},
                "metrics": {"prompt_tokens": 1000, "completion_tokens": 80},
            },
        ],
    }


def test_another_clis_session_shows_its_turns_and_tool_calls_from_its_trajectory_as_the_row_does():
    """A Codex cell's page shows turns and tool calls like Claude Code's, not raw JSON events, and says the skill
    was invoked where the row does (the adapter's proof, which the trajectory records)."""
    raw = [{"type": "thread.started", "thread_id": "t"}, {"type": "item.completed", "item": {"type": "reasoning"}}]
    row = make_row("fix", "cx_skill", 0, agent="codex", skill_invoked=True)
    text = page(
        row=row, transcripts=[cellpage.Transcript("skilled", "t/skilled-1.jsonl", raw, None, codex_trajectory())]
    )
    assert "turn 1: assistant" in text and "turn 2: assistant" in text and "Reading the skill first." in text
    assert "tokens: prompt 900, output 60, $0.0017" in text
    assert '<span class="badge">skill invoked: change-work</span>' in text
    assert "skills invoked: change-work" in text and "no skill invoked" not in text
    assert "tool result (error)" in text and "exec_command" in text
    assert "event item.completed" not in text and "thread.started" not in text
    # A trajectory whose proof is ambiguous says so rather than "no skill invoked".
    unsure = codex_trajectory()
    unsure["agent"]["extra"]["skills"]["invoked"] = None
    text = page(row=row, transcripts=[cellpage.Transcript("skilled", "t/skilled-1.jsonl", raw, None, unsure)])
    assert "skill use not provable from the stream" in text
