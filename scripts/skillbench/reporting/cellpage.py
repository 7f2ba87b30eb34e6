"""The page of one cell: what its sessions did, turn by turn, and what came of it (pure: records in, HTML out).

A maintainer opens it instead of reading JSONL: the outcome, cost and time; each session's turns from the
parent-captured transcript (text, tool calls and their results, skill invocations marked); the patch; verify's
output; the hidden oracle's outcome. The oracle's output appears only on the author-only page
(``author_only=True``), never on the page the shared report holds. A review cell (its row carries ``review``)
shows its score against the hidden labels instead of verify and the oracle: the counts and ratios of the row,
never the labels' defects. A trigger cell (its row carries ``trigger``) shows the skill its prompt is labelled
for beside the skills the session invoked instead.

Everything the agent, a task or the model could have influenced is text to this module: every value goes through
``html.escape`` into markup built from constant strings, no Markdown, no raw HTML, and the page's
Content-Security-Policy allows no script, no external resource, only its own stylesheet (by hash).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillbench.base.records import CellTiming, ResultRow, ReviewMetrics, TriggerMetrics

# One text block (a message, a tool's input or output) shows this much; the transcript file has the rest.
MAX_TEXT_CHARS = 20_000
MAX_PATCH_CHARS = 200_000
COLOUR = re.compile(r"#[0-9a-f]{6}")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2328; margin: 0 auto; max-width: 1100px; padding: 16px 24px; }
header { border-left: 8px solid var(--arm); padding-left: 12px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; } h3 { font-size: 14px; }
.verdict { font-weight: 600; } .yes { color: #1a7f37; } .no { color: #cf222e; }
table { border-collapse: collapse; margin: 4px 0 12px; } td, th { border: 1px solid #d0d7de; padding: 3px 8px; }
th { background: #f6f8fa; text-align: left; font-weight: 600; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px; overflow-x: auto; white-space: pre-wrap;
      word-break: break-word; margin: 4px 0; font: 12px/1.4 ui-monospace, monospace; }
.turn { border: 1px solid #d0d7de; border-radius: 6px; margin: 8px 0; padding: 6px 10px; }
.assistant { background: #fff; } .user { background: #fbfbfc; } .system, .result { background: #f6f8fa; }
.who { font-size: 12px; color: #57606a; }
.tool { border-left: 3px solid #8c959f; padding-left: 8px; margin: 6px 0; }
.skill { border-left-color: #8250df; } .mcp { border-left-color: #1b7c83; } .error { border-left-color: #cf222e; }
.badge { display: inline-block; font-size: 11px; font-weight: 600; border-radius: 10px; padding: 0 8px;
         background: #eaeef2; } .skill .badge { background: #8250df; color: #fff; }
.add { color: #116329; } .del { color: #82071e; } .hunk { color: #8250df; } .file { font-weight: 600; }
.note { color: #57606a; font-size: 12px; }
"""


@dataclass(frozen=True)
class Transcript:
    """One session of the cell: its role, its parsed events (None when unreadable) and what was wrong."""

    role: str
    path: str
    events: list[dict[str, Any]] | None
    problem: str | None = None
    # The session as its ATIF trajectory (every CLI's turns in one shape), when the cell wrote one.
    trajectory: dict[str, Any] | None = None


def agent_label(row: ResultRow) -> str:
    """The agent CLI a row's sessions ran, as a page names it (a row from before agents were recorded: Claude Code)."""
    agent = row.get("agent") or "claude-code"
    return "Claude Code" if agent == "claude-code" else agent


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int = MAX_TEXT_CHARS) -> tuple[str, str]:
    """(shown text, a note about the rest)."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"… {len(text) - limit} more characters not shown"


def _pre(text: Any, *, limit: int = MAX_TEXT_CHARS) -> str:
    shown, rest = _clip(text if isinstance(text, str) else json.dumps(text, indent=2, ensure_ascii=False), limit)
    return f"<pre>{_e(shown)}</pre>" + (f'<p class="note">{_e(rest)}</p>' if rest else "")


def _yes_no(value: Any) -> str:
    if value is None:
        return '<span class="note">n/a</span>'
    return '<span class="yes">yes</span>' if value else '<span class="no">no</span>'


def _table(rows: Iterable[tuple[str, str]]) -> str:
    """Rows of (label, cell HTML): labels are escaped here (a tool input's keys are the agent's), cells already are."""
    return "<table>" + "".join(f"<tr><th>{_e(label)}</th><td>{cell}</td></tr>" for label, cell in rows) + "</table>"


def _money(value: Any) -> str:
    return _e(f"${value:.4f}") if isinstance(value, (int, float)) else '<span class="note">not measured</span>'


def _seconds(value: Any) -> str:
    return _e(f"{value:.1f} s") if isinstance(value, (int, float)) else '<span class="note">n/a</span>'


# ─── Transcripts ─────────────────────────────────────────────────────────────


def _blocks(event: dict[str, Any]) -> list[Any]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _result_text(content: Any) -> str:
    """A tool result's content as text: a string, or the text of its text blocks (other blocks as JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block.get("text", "") if isinstance(block, dict) and block.get("type") == "text" else json.dumps(block)
            for block in content
        ]
        return "\n".join(str(part) for part in parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _skill_name(block: dict[str, Any]) -> str | None:
    """The skill a Skill tool call asks for (``skill``, or ``command`` in older CLIs), None for other tools."""
    if block.get("name") != "Skill":
        return None
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        return "?"
    name = tool_input.get("skill") or tool_input.get("command") or "?"
    return str(name)


def _failed_tools(events: list[dict[str, Any]]) -> set[str]:
    failed = set()
    for event in events:
        for block in _blocks(event):
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error"):
                failed.add(str(block.get("tool_use_id")))
    return failed


def _tool_use(block: dict[str, Any], failed: set[str]) -> str:
    name = str(block.get("name", "?"))
    skill = _skill_name(block)
    kind = "skill" if skill is not None else "mcp" if name.startswith("mcp__") else ""
    if skill is not None:
        outcome = " — the call failed" if str(block.get("id")) in failed else ""
        badge = f'<span class="badge">skill invoked: {_e(skill)}</span>{_e(outcome)}'
    else:
        badge = f'<span class="badge">{_e(name)}</span>'
    return (
        f'<div class="tool {kind}">{badge} <span class="note">{_e(block.get("id", ""))}</span>'
        + _tool_input(block.get("input", {}))
        + "</div>"
    )


def _tool_input(value: Any) -> str:
    """A tool call's input: one row per field with its text as written (a file's content with its line breaks),
    or the JSON of an input that is not a flat mapping."""
    flat = isinstance(value, dict) and value and all(isinstance(v, (str, int, float, bool)) for v in value.values())
    if not flat:
        return _pre(value)
    rows = [(str(key), _pre(item) if isinstance(item, str) else _e(json.dumps(item))) for key, item in value.items()]
    return _table(rows)


def _tool_result(block: dict[str, Any]) -> str:
    error = bool(block.get("is_error"))
    label = "tool result (error)" if error else "tool result"
    text = _result_text(block.get("content"))
    return (
        f'<div class="tool {"error" if error else ""}"><span class="badge">{_e(label)}</span> '
        f'<span class="note">{_e(block.get("tool_use_id", ""))}</span>{_pre(text)}</div>'
    )


def _usage(event: dict[str, Any]) -> str:
    message = event.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict):
        return ""
    counted = [
        f"{key.replace('_tokens', '').replace('_', ' ')} {value}"
        for key, value in sorted(usage.items())
        if isinstance(value, int)
    ]
    return f' <span class="note">tokens: {_e(", ".join(counted))}</span>' if counted else ""


def _event(event: dict[str, Any], failed: set[str], turn: int, first_of_turn: bool = True) -> str:
    """One event of a stream; ``turn`` counts model replies (the CLI streams one reply's blocks as several
    events with one message id: the usage is shown on the first)."""
    kind = str(event.get("type", "?"))
    if kind == "system":
        subtype = event.get("subtype", "")
        if subtype == "init":
            tools = event.get("tools")
            count = len(tools) if isinstance(tools, list) else 0
            summary = f"session started: model {event.get('model', '?')}, {count} tools, cwd {event.get('cwd')}"
            return f'<div class="turn system"><span class="who">{_e(summary)}</span></div>'
        return f'<div class="turn system"><span class="who">system: {_e(subtype)}</span></div>'
    if kind == "result":
        rows = [
            ("outcome", _e(event.get("subtype", "")) + (" (error)" if event.get("is_error") else "")),
            ("turns", _e(event.get("num_turns", "n/a"))),
            ("cost (CLI)", _money(event.get("total_cost_usd"))),
            ("duration", _seconds((event.get("duration_ms") or 0) / 1000 if event.get("duration_ms") else None)),
        ]
        final = event.get("result")
        return (
            '<div class="turn result"><span class="who">session result</span>'
            + _table(rows)
            + (_pre(final) if isinstance(final, str) and final else "")
            + "</div>"
        )
    if kind not in ("assistant", "user"):
        return f'<div class="turn system"><span class="who">event {_e(kind)}</span>{_pre(event)}</div>'
    parts = []
    for block in _blocks(event):
        if not isinstance(block, dict):
            parts.append(_pre(block))
        elif block.get("type") == "text":
            text = str(block.get("text", ""))
            if event.get("isSynthetic"):
                shown, rest = _clip(text)
                parts.append(
                    f"<details><summary>text the CLI added ({_e(len(text))} characters, e.g. a loaded skill)"
                    f"</summary><pre>{_e(shown)}</pre>{_e(rest)}</details>"
                )
            else:
                parts.append(_pre(text))
        elif block.get("type") == "thinking":
            parts.append(f"<details><summary>thinking</summary>{_pre(block.get('thinking', ''))}</details>")
        elif block.get("type") == "tool_use":
            parts.append(_tool_use(block, failed))
        elif block.get("type") == "tool_result":
            parts.append(_tool_result(block))
        else:
            parts.append(f'<span class="note">{_e(block.get("type"))}</span>{_pre(block)}')
    if kind == "assistant":
        who = f"turn {turn}: assistant"
    elif event.get("isSynthetic"):
        who = "added by the CLI"
    else:
        results = any(isinstance(block, dict) and block.get("type") == "tool_result" for block in _blocks(event))
        who = "tool results" if results else "user"
    return (
        f'<div class="turn {kind}"><span class="who">{_e(who)}</span>'
        + (_usage(event) if kind == "assistant" and first_of_turn else "")
        + "".join(parts)
        + "</div>"
    )


# The tools a CLI invokes a skill with (Claude Code, opencode and Copilot, Gemini CLI); Codex reads a SKILL.md.
SKILL_TOOLS = frozenset({"Skill", "skill", "activate_skill"})


def _trajectory_call(call: dict[str, Any], result: dict[str, Any] | None, invoked: list[str]) -> str:
    """One tool call of a trajectory step and its result; a skill's invocation (its tool, or a read of its SKILL.md
    for a CLI that has no skill tool) marked as Claude Code's are."""
    name = str(call.get("function_name", "?"))
    arguments = call.get("arguments")
    text = json.dumps(arguments, ensure_ascii=False) if not isinstance(arguments, str) else arguments
    skill = next((skill for skill in invoked if f"{skill}/SKILL.md" in text), None)
    if name in SKILL_TOOLS:
        skill = skill or next((str(value) for value in (arguments or {}).values() if isinstance(value, str)), "?")
    failed = bool(result and (result.get("extra") or {}).get("is_error"))
    if skill is not None:
        badge = f'<span class="badge">skill invoked: {_e(skill)}</span>{_e(" — the call failed" if failed else "")}'
        kind = "skill"
    else:
        badge = f'<span class="badge">{_e(name)}</span>'
        kind = "mcp" if name.startswith("mcp__") else ""
    shown = (
        f'<div class="tool {kind}">{badge} <span class="note">{_e(call.get("tool_call_id", ""))}</span>'
        + _tool_input(arguments if arguments is not None else {})
        + "</div>"
    )
    if result is not None:
        label = "tool result (error)" if failed else "tool result"
        shown += (
            f'<div class="tool {"error" if failed else ""}"><span class="badge">{_e(label)}</span>'
            f"{_pre(_result_text(result.get('content')))}</div>"
        )
    return shown


def _trajectory_session(transcript: Transcript, trajectory: dict[str, Any]) -> str:
    """A session of any CLI from its ATIF trajectory: the prompt, then each model turn (its text, tool calls with
    their results, skill invocations marked) with the tokens and cost the gateway's ledger measured for it."""
    skills = ((trajectory.get("agent") or {}).get("extra") or {}).get("skills") or {}
    invoked = skills.get("invoked")
    summary = (
        "skill use not provable from the stream"
        if invoked is None
        else f"skills invoked: {', '.join(invoked)}"
        if invoked
        else "no skill invoked"
    )
    agent = trajectory.get("agent") or {}
    parts = [
        f'<h3>{_e(transcript.role)} session</h3><p class="note">{_e(transcript.path)} (as its ATIF trajectory; '
        f"{_e(agent.get('name'))} {_e(agent.get('version'))})</p>",
        f'<p class="note">{_e(summary)}</p>',
    ]
    turn = 0
    for step in trajectory.get("steps") or []:
        if step.get("source") == "user":
            parts.append(f'<div class="turn user"><span class="who">prompt</span>{_pre(step.get("message", ""))}</div>')
            continue
        turn += 1
        metrics = step.get("metrics") or {}
        counted = [
            f"{label} {metrics[key]}"
            for key, label in (("prompt_tokens", "prompt"), ("completion_tokens", "output"))
            if key in metrics
        ]
        cost = f", {_money(metrics['cost_usd'])}" if "cost_usd" in metrics else ""
        usage = f' <span class="note">tokens: {_e(", ".join(counted))}{cost}</span>' if counted else ""
        results = {item.get("source_call_id"): item for item in (step.get("observation") or {}).get("results") or []}
        body = [_pre(step["message"])] if step.get("message") else []
        body += [
            _trajectory_call(call, results.get(call.get("tool_call_id")), invoked or [])
            for call in step.get("tool_calls") or []
        ]
        parts.append(
            f'<div class="turn assistant"><span class="who">turn {turn}: assistant</span>{usage}{"".join(body)}</div>'
        )
    return "".join(parts)


def _session(transcript: Transcript) -> str:
    if transcript.trajectory is not None:
        return _trajectory_session(transcript, transcript.trajectory)
    heading = f'<h3>{_e(transcript.role)} session</h3><p class="note">{_e(transcript.path)}</p>'
    if transcript.events is None:
        return heading + f'<p class="no">transcript not readable: {_e(transcript.problem or "")}</p>'
    failed = _failed_tools(transcript.events)
    skills = [
        _skill_name(block)
        for event in transcript.events
        if event.get("type") == "assistant"
        for block in _blocks(event)
        if isinstance(block, dict) and block.get("type") == "tool_use" and _skill_name(block) is not None
    ]
    summary = f"skills invoked: {', '.join(str(skill) for skill in skills)}" if skills else "no skill invoked"
    turns, last_reply, rendered = 0, None, []
    for event in transcript.events:
        first = False
        if event.get("type") == "assistant":
            message = event.get("message")
            reply = message.get("id") if isinstance(message, dict) else None
            first = reply is None or reply != last_reply
            turns += first
            last_reply = reply
        rendered.append(_event(event, failed, turns, first))
    problem = f'<p class="no">{_e(transcript.problem)}</p>' if transcript.problem else ""
    return heading + problem + f'<p class="note">{_e(summary)}</p>' + "".join(rendered)


# ─── The page ────────────────────────────────────────────────────────────────


def _patch(patch: str | None) -> str:
    if patch is None:
        return '<p class="note">no patch recorded</p>'
    if not patch.strip():
        return '<p class="note">the cell changed nothing</p>'
    shown, rest = _clip(patch, MAX_PATCH_CHARS)
    lines = []
    for line in shown.split("\n"):
        kind = (
            "file"
            if line.startswith(("diff --git", "+++ ", "--- "))
            else "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        lines.append(f'<span class="{kind}">{_e(line)}</span>' if kind else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>" + (f'<p class="note">{_e(rest)}</p>' if rest else "")


def _oracle(row: ResultRow, oracle_log: str | None, author_only: bool, author_page: str) -> str:
    passed = row["oracle_passed"]
    outcome = "passed" if passed else "failed" if row["oracle_output"] == "hidden oracle failed" else "did not run"
    text = f'<p>hidden oracle: <span class="verdict {"yes" if passed else "no"}">{_e(outcome)}</span></p>'
    if not author_only:
        return text + (
            '<p class="note">Its output is kept out of every shared report: the owner-only page '
            f"<code>{_e(author_page)}</code> under the results folder (and oracle.log beside the cell's record) "
            "holds it.</p>"
        )
    if oracle_log is None:
        return text + '<p class="note">no oracle output was kept for this run</p>'
    return (
        text
        + "<p>its output (for the task author only; never shown to an agent or the proposer):</p>"
        + _pre(oracle_log)
    )


def _ratio(value: Any) -> str:
    return _e(f"{value:.2f}") if isinstance(value, (int, float)) else '<span class="note">n/a</span>'


def _review(review: ReviewMetrics, error_kind: str | None) -> str:
    """A review cell's score against its task's hidden labels: what the row holds (counts and ratios; the labels'
    defects are never on a page)."""
    broken = review["output_error"]
    if broken:
        contract = f'<span class="no">broken: {_e(broken)}</span> (every ratio counts 0.00)'
    elif error_kind == "review-edited-code":
        contract = '<span class="no">review-edited-code: the session changed more than review-output.json</span>'
    else:
        contract = '<span class="yes">kept</span>'
    rows = [
        ("case", _e("defect case" if review["case"] == "defect" else "clean control")),
        ("review-output.json", contract),
        ("verdict (expected)", _e(f"{review['verdict'] or 'none'} ({review['expected_verdict']})")),
        ("verdict correct", _yes_no(review["verdict_correct"])),
        ("findings", _e(review["findings"])),
        ("labelled defects (blocking)", _e(f"{review['defects']} ({review['blocking_defects']})")),
        ("matched: TP / FP / FN", _e(f"{review['tp']} / {review['fp']} / {review['fn']}")),
        ("precision / recall / F1", " / ".join(_ratio(review[key]) for key in ("precision", "recall", "f1"))),
        (
            "weighted precision / recall / F1",
            " / ".join(_ratio(review[key]) for key in ("weighted_precision", "weighted_recall", "weighted_f1")),
        ),
        ("blocker recall", _ratio(review["blocker_recall"])),
        ("clean control passed", _yes_no(review["clean_control_passed"])),
    ]
    return (
        _table(rows) + '<p class="note">Scored on the host against the task\'s hidden labels, which no session sees; '
        "a ratio over nothing is 1.00. The review the session wrote is review-output.json in the patch.</p>"
    )


def _skills(names: list[str]) -> str:
    return _e(", ".join(names)) if names else '<span class="note">none</span>'


def _trigger(trigger: TriggerMetrics) -> str:
    """A trigger cell's outcome against its prompt's hidden label: the skill expected, the skills invoked."""
    expected = trigger["expected"]
    rows = [
        ("skill expected", _e(expected) if expected else '<span class="note">none</span>'),
        ("near miss", _yes_no(trigger["near_miss"])),
        ("skills invoked", _skills(trigger["invoked"])),
        ("false triggers", _skills(trigger["false_triggers"])),
        ("triggered as labelled", _yes_no(trigger["correct"])),
    ]
    return (
        _table(rows) + '<p class="note">The label is kept in the task\'s hidden snapshot and no session sees it; the '
        "invoked skills are read from the parent-captured stream, the turns above mark each invocation.</p>"
    )


def render_cell_page(
    *,
    label: str,
    row: ResultRow,
    timing: CellTiming,
    transcripts: list[Transcript],
    patch: str | None,
    colour: str,
    author_only: bool = False,
    oracle_log: str | None = None,
    author_page: str = "author-pages/…",
) -> str:
    """The HTML page of one cell (``label``: its path below the results root, e.g. ``cells/fix/baseline/run0``).

    ``colour`` is the arm's colour in the figures (``#rrggbb``). ``oracle_log`` is shown only when
    ``author_only``; the shared page names ``author_page`` (below the results root) as where it is."""
    colour = colour if COLOUR.fullmatch(colour) else "#57606a"
    style = f":root {{ --arm: {colour}; }}" + STYLE
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    verdict = "resolved" if row["resolved"] else "not resolved"
    why = f" — {row['error_kind']}" if row["error_kind"] else ""
    review, trigger = row.get("review"), row.get("trigger")
    graded = (
        [
            ("review kept the contract", _yes_no(review["output_error"] is None)),
            ("verdict correct", _yes_no(review["verdict_correct"])),
        ]
        if review is not None
        else [("triggered as labelled", _yes_no(trigger["correct"]))]
        if trigger is not None
        else [
            ("plan produced", _yes_no(row["plan_produced"])),
            ("verify passed", _yes_no(row["authored_tests_passed"])),
            ("hidden oracle passed", _yes_no(row["oracle_passed"])),
        ]
    )
    outcome = [
        ("resolved", _yes_no(row["resolved"])),
        ("error kind", _e(row["error_kind"] or "none")),
        ("sessions ok", _yes_no(row["ok"])),
        ("skill invoked", _yes_no(row["skill_invoked"])),
        *graded,
        ("change", _e(f"{row['diff_files']} file(s), +{row['diff_insertions']} −{row['diff_deletions']}")),
        ("tool calls", _e(", ".join(f"{tool} {count}" for tool, count in sorted(row["tool_use_counts"].items())))),
    ]
    check = row["cost_check"]
    cost = [
        ("cost (gateway ledger)", _money(row["cost_usd"])),
        (
            "cost the CLI reported",
            "n/a"
            if check is None
            else _money(check["cli_usd"]) + _e(f" ({check['price_table']}; agrees: {check['agrees']})"),
        ),
        ("turns", _e(row["num_turns"])),
        (
            "tokens",
            _e(
                f"input {row['input_tokens']}, output {row['output_tokens']}, cache read "
                f"{row['cache_read_input_tokens']}, cache write {row['cache_creation_input_tokens']}"
            ),
        ),
        ("wall time", _seconds(timing["wall_s"])),
        ("in sessions", _seconds(timing["sessions_s"])),
        (
            "setup / verify / oracle",
            _e(f"{timing['setup_s']:.1f} s / {timing['verify_s']:.1f} s / {timing['oracle_s']:.1f} s"),
        ),
        ("started / finished", _e(f"{timing['started_at']} / {timing['finished_at']}")),
    ]
    windows = [
        (window["role"], _e(f"{window['started_at']} → {window['finished_at']}")) for window in timing["sessions"]
    ]
    detail = row["error_detail"]
    diagnostics = row["evidence_diagnostics"]
    body = [
        f"<header><h1>{_e(label)}</h1>",
        f'<p class="verdict {"yes" if row["resolved"] else "no"}">{_e(verdict + why)}</p>',
        f'<p class="note">task {_e(row["task"])} ({_e(row["class"])}), arm {_e(row["arm"])}, run {_e(row["run"])}; '
        f"model {_e(row['model'])} via {_e(row['provider'])}, {_e(agent_label(row))} {_e(row['cli_version'])}, "
        f"sandbox {_e(row['sandbox_backend'])}"
        + (
            (
                " — author-only page"
                if review is not None or trigger is not None
                else " — author-only page (holds the hidden oracle's output)"
            )
            if author_only
            else ""
        )
        + "</p></header>",
        "<h2>Outcome</h2>",
        _table(outcome),
    ]
    if detail:
        body += ["<p>error detail:</p>", _pre(detail)]
    if diagnostics:
        body += ["<p>evidence diagnostics:</p>", _pre("\n".join(diagnostics))]
    body += ["<h2>Cost and time</h2>", _table(cost), _table(windows) if windows else ""]
    body += ["<h2>Sessions</h2>"] + [_session(transcript) for transcript in transcripts]
    if not transcripts:
        body.append('<p class="note">no transcript was recorded</p>')
    body += ["<h2>Patch</h2>", _patch(patch)]
    if review is not None:
        body += ["<h2>Review against the hidden labels</h2>", _review(review, row["error_kind"])]
    elif trigger is not None:
        body += ["<h2>Triggering against the hidden label</h2>", _trigger(trigger)]
    else:
        body += ["<h2>Verify</h2>", _pre(row["verify_output"] or "(no output)")]
        body += ["<h2>Hidden oracle</h2>", _oracle(row, oracle_log, author_only, author_page)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(policy)}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(label)}</title><style>{style}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def cells_markdown(links: list[tuple[str, str, int, str]]) -> str:
    """A report's section linking each run's page: (task, arm, run, path relative to the report), grouped by task
    and arm. Task ids and arm names are slugs (the suite and config schemas), so the Markdown holds no markup."""
    if not links:
        return ""
    grouped: dict[tuple[str, str], list[str]] = {}
    for task, arm, run, relative in links:
        grouped.setdefault((task, arm), []).append(f"[run {run}]({relative})")
    lines = [f"| {task} | {arm} | {' '.join(runs)} |" for (task, arm), runs in grouped.items()]
    return (
        "\n## Cells\n\nEach run has a page of its own: its sessions' turns and tool calls (skill invocations "
        "marked), the patch, verify's output, the hidden oracle's outcome, cost and time.\n\n"
        "| task | arm | runs |\n| --- | --- | --- |\n" + "\n".join(lines) + "\n"
    )
