"""Session evidence: CLI argv, strict stream parsing, skill proof, records, transcripts, sums, costs, progress."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import sys
import textwrap
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from settingsfactory import job_settings
from skillbench.base.artifacts import load_schema
from skillbench.base.process import ProcessResult
from skillbench.base.records import USAGE_FIELDS
from skillbench.execution.agents.claude_code import cli_command, evidence_window, read_stream, skill_was_invoked
from skillbench.execution.sessions import SessionProgress, cost_check, session_record, sum_sessions
from skillbench.execution.streams import (
    MAX_TRANSCRIPT_BYTES,
    TRANSCRIPT_SOURCE,
    measured_cost,
    parse_event_stream,
    persist_transcript,
)
from skillbench.experiment.settings import PriceSettings

SAMPLE = Path(__file__).parent / "fixtures" / "streams" / "sample-stream.jsonl"
SAMPLE_SESSION = "918b6f71-7965-4af7-bc78-b9256db66093"
SONNET_4_PRICES = {"claude-sonnet-4-20250514": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}}
CANARY = "CANARY-7f3a9e-DO-NOT-PERSIST"
SESSION = "sess-0001"


# ---------------------------------------------------------------------------------------------------------
# Stream builders


def init_event() -> dict:
    return {"type": "system", "subtype": "init", "session_id": SESSION, "tools": ["Bash", "Skill"]}


def tool_use(tool_id: str, name: str, arguments: dict, message_id: str = "msg_1") -> dict:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}
    return {"type": "assistant", "message": {"id": message_id, "role": "assistant", "content": [block]}}


def tool_result(tool_id: str, content="done", is_error=None) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def text_reply(text: str, message_id: str = "msg_9") -> dict:
    return {"type": "assistant", "message": {"id": message_id, "content": [{"type": "text", "text": text}]}}


def result_event(**overrides) -> dict:
    event = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 1234,
        "num_turns": 2,
        "session_id": SESSION,
        "total_cost_usd": 0.5,
        "usage": {field: 10 + index for index, field in enumerate(USAGE_FIELDS)},
    }
    event.update(overrides)
    return event


def skill_events(skill: str = "change-work", *, field: str = "skill", is_error=None) -> list[dict]:
    return [
        init_event(),
        tool_use("toolu_1", "Skill", {field: skill}),
        tool_result("toolu_1", "Launching skill", is_error),
        result_event(),
    ]


def encode(events: list[dict]) -> bytes:
    return "".join(json.dumps(event) + "\n" for event in events).encode()


def process_result(capture: bytes | None, *, state="ok", returncode=0, overflow=False, **fields) -> ProcessResult:
    return ProcessResult(
        state=state,
        returncode=returncode,
        stdout_tail=fields.pop("stdout_tail", (capture or b"").decode("utf-8", "replace")[-65536:]),
        stderr_tail=fields.pop("stderr_tail", ""),
        duration_s=fields.pop("duration_s", 9.87),
        stdout_capture=capture,
        stdout_capture_overflow=overflow,
        detail=fields.pop("detail", None),
    )


def record_for(
    capture: bytes | None,
    *,
    expected_skill=None,
    transcript_dir=None,
    secrets=(),
    ledger=None,
    limit_hit=None,
    **proc,
):
    result = process_result(capture, **proc)
    return session_record(
        result,
        reading=read_stream(
            result.stdout_capture, overflow=result.stdout_capture_overflow, limit=MAX_TRANSCRIPT_BYTES, mcp_servers=()
        ),
        expected_skill=expected_skill,
        transcript_dir=transcript_dir,
        transcript_prefix="demo-task-workflow-run0",
        secrets=secrets,
        started_at="2026-11-29T07:37:12Z",
        finished_at="2026-11-29T07:37:13Z",
        ledger=ledger,
        limit_hit=limit_hit,
    )


def ledger_entry(outcome="ok", *, refused=None, cost=0.01, failure=None, **usage) -> dict:
    counts = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    counts.update(usage)
    return {
        "seq": 1, "method": "POST", "path": "/v1/messages?beta=true", "kind": "messages", "model": "m",
        "served_model": "m", "stream": True, "status": 200 if outcome == "ok" else 402, "outcome": outcome,
        "refused": refused, "failure": failure, "request_id": None, "started_at": "2026-11-29T07:37:12.000Z",
        "finished_at": "2026-11-29T07:37:12.500Z", "duration_s": 0.5,
        "usage": {**counts, "cache_creation_5m_input_tokens": None, "cache_creation_1h_input_tokens": None},
        "cost_usd": cost,
    }  # fmt: skip


def ledger_of(*entries: dict) -> dict:
    from skillbench.execution.gateway import ledger_totals

    return {
        "label": "demo", "open": False, "opened_at": "2026-11-29T07:37:12.000Z",
        "closed_at": "2026-11-29T07:37:13.000Z", "max_usd": None, "requests": list(entries),
        "totals": ledger_totals(list(entries)),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# CLI argv


def test_cli_command_narrows_tools_and_keeps_the_prompt_off_argv():
    argv = cli_command(
        "claude",
        tools=["Read", "Bash", "Skill"],
        disallowed_tools=["WebFetch", "Agent"],
        model="claude-sonnet-4-20250514",
        effort="high",
        settings_json='{"permissions":{}}',
    )
    assert argv == [
        "claude", "-p", "--input-format", "text", "--output-format", "stream-json", "--verbose",
        "--settings", '{"permissions":{}}',
        "--strict-mcp-config", "--mcp-config", '{"mcpServers":{}}',
        "--tools", "Read,Bash,Skill", "--allowedTools", "Read,Bash,Skill",
        "--permission-mode", "dontAsk",
        "--model", "claude-sonnet-4-20250514",
        "--effort", "high",
        "--disallowedTools", "WebFetch", "--disallowedTools", "Agent",
    ]  # fmt: skip


def test_cli_command_omits_optional_flags():
    argv = cli_command(
        "claude", tools=[], disallowed_tools=[], model="m", effort=None, settings_json=None, permission_mode=None
    )
    assert "--settings" not in argv and "--effort" not in argv and "--permission-mode" not in argv
    assert argv[argv.index("--tools") + 1] == ""


# ---------------------------------------------------------------------------------------------------------
# Strict parsing


def test_parse_accepts_blank_lines_and_line_separators_inside_strings():
    raw = b'\n{"type":"system","text":"a\xe2\x80\xa8b\xc2\x85c"}\n\n' + encode([result_event()])
    events = parse_event_stream(raw)
    assert [event["type"] for event in events] == ["system", "result"]
    assert events[0]["text"] == "a\u2028b\x85c"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"type":"result"}\n\xff\xfe\n', "not valid UTF-8"),
        (b'{"type":"result","total_cost_usd":NaN}\n', "non-finite number NaN"),
        (b'{"type":"result","total_cost_usd":-Infinity}\n', "non-finite number -Infinity"),
        (b'{"type":"result","total_cost_usd":1e999}\n', "non-finite number 1e999"),
        (b'{"type":"system"}\n{"type":"result"\n', "line 2 is not valid JSON"),
        (b'{"type":"system"}\n[1,2]\n', "line 2 is not a JSON object"),
        (b'{"type":"system","type":"result"}\n', "duplicate key 'type'"),
        (b"\n  \n", "no events"),
        (b"[" * 100000 + b"]" * 100000 + b"\n", "line 1"),
    ],
)
def test_parse_rejects_with_a_precise_message(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_event_stream(raw)


def test_evidence_window_cuts_at_the_single_result():
    trailing = {"type": "system", "subtype": "task_updated"}
    events = [init_event(), result_event(), trailing]
    window, result = evidence_window(events)
    assert window == events[:2] and result is events[1]
    with pytest.raises(ValueError, match="exactly one result event, found 0"):
        evidence_window([init_event()])
    with pytest.raises(ValueError, match="exactly one result event, found 2"):
        evidence_window([result_event(), result_event()])
    with pytest.raises(ValueError, match="'assistant' event follows the result"):
        evidence_window([result_event(), text_reply("late")])


# ---------------------------------------------------------------------------------------------------------
# Session records


def test_real_sample_stream_gives_exact_usage_and_the_cli_cost():
    record = record_for(SAMPLE.read_bytes())
    assert record["ok"] is True and record["error_kind"] is None and record["error_detail"] is None
    assert record["session_id"] == SAMPLE_SESSION
    assert record["input_tokens"] == 3003
    assert record["cache_creation_input_tokens"] == 903
    assert record["cache_read_input_tokens"] == 603
    assert record["output_tokens"] == 153
    # Without the gateway's ledger the cost is unmeasured; what the CLI reported is only the cross-check.
    assert record["cost_usd"] is None and record["cli_cost_usd"] == 0.01487115
    assert record["num_turns"] == 3
    assert record["duration_s"] == 0.3
    assert record["tool_use_counts"] == {"Write": 1, "Bash": 1}
    assert record["transcript_missing"] is False and record["evidence_diagnostics"] == []
    assert "skill_invoked" not in record and "transcript_artifact" not in record
    assert (record["started_at"], record["finished_at"]) == ("2026-11-29T07:37:12Z", "2026-11-29T07:37:13Z")


def test_duration_falls_back_to_wall_time():
    events = [init_event(), result_event()]
    del events[1]["duration_ms"]
    assert record_for(encode(events), duration_s=12.345)["duration_s"] == 12.3


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"type":"system"}\n\xc3\x28\n', "not valid UTF-8"),
        (b'{"type":"result","total_cost_usd":NaN}\n', "non-finite"),
        (encode([init_event(), text_reply("no result")]), "found 0"),
        (encode([init_event(), result_event(), result_event()]), "found 2"),
        (encode([init_event(), result_event(), tool_use("toolu_9", "Bash", {})]), "follows the result"),
    ],
)
def test_unparseable_streams_are_session_errors_and_unverified_evidence(raw, message):
    record = record_for(raw, expected_skill="change-work")
    assert record["ok"] is False
    assert record["error_kind"] == "session-error"
    assert message in record["error_detail"]["event_stream_error"]
    assert record["skill_invoked"] is None
    assert record["transcript_missing"] is True
    assert any(message in item for item in record["evidence_diagnostics"])
    assert record["cost_usd"] is None


def test_system_events_after_the_result_are_fine_and_invisible_to_evidence():
    smuggled = {
        "type": "system",
        "subtype": "task_notification",
        "message": {"content": [
            {"type": "tool_use", "id": "toolu_x", "name": "Skill", "input": {"skill": "change-work"}},
            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"},
        ]},
    }  # fmt: skip
    raw = encode([init_event(), result_event(), {"type": "system", "subtype": "task_updated"}, smuggled])
    record = record_for(raw, expected_skill="change-work")
    assert record["error_kind"] == "skill-not-invoked"
    assert record["skill_invoked"] is False
    assert record["tool_use_counts"] == {}
    assert record_for(raw)["ok"] is True


def test_a_capture_overflow_is_the_agents_counted_output_limit_and_keeps_the_stream_as_far_as_it_got(tmp_path):
    # The CLI was stopped mid-event: the capture ends inside a line, which the transcript leaves out.
    flood = [init_event(), tool_use("toolu_1", "Read", {"file_path": "/workspace/big.txt"})]
    flood += [tool_result("toolu_1", f"line {CANARY}")]
    capture = encode(flood) + b'{"type": "user", "message": {"content": [{"type": "tool_res'
    record = record_for(
        capture,
        overflow=True,
        state="overflow",
        returncode=-15,
        expected_skill="change-work",
        transcript_dir=tmp_path / "transcripts",
        secrets=[CANARY],
    )
    assert (record["ok"], record["error_kind"]) == (False, "output-limit-exceeded")
    assert str(MAX_TRANSCRIPT_BYTES) in record["error_detail"] and "stopped" in record["error_detail"]
    assert record["skill_invoked"] is None and record["transcript_missing"] is False
    kept = tmp_path / record["transcript_artifact"]["path"]
    events = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [event["type"] for event in events] == ["system", "assistant", "user"]
    assert CANARY not in kept.read_text()
    assert "keeps the first 3 complete events" in record["evidence_diagnostics"][0]


def test_missing_capture_is_a_session_error():
    record = record_for(None, expected_skill="change-work")
    assert record["error_kind"] == "session-error"
    assert "did not capture" in record["evidence_diagnostics"][0]


@pytest.mark.parametrize("bad", [None, -1, "12", 1.5, True])
def test_missing_or_malformed_usage_field_is_a_session_error(bad):
    usage = {field: 5 for field in USAGE_FIELDS}
    if bad is None:
        del usage["output_tokens"]
    else:
        usage["output_tokens"] = bad
    record = record_for(encode([init_event(), result_event(usage=usage)]))
    assert record["ok"] is False and record["error_kind"] == "session-error"
    assert record["output_tokens"] == 0 and record["input_tokens"] == 5
    assert "usage output_tokens missing or not a count" in record["error_detail"]["reasons"]


@pytest.mark.parametrize(("raw_cost", "expected"), [(-0.5, None), ("0.5", None), (True, None), (None, None), (0, 0.0)])
def test_unmeasured_cli_cost_is_none_and_the_session_stays_ok(raw_cost, expected):
    record = record_for(encode([init_event(), result_event(total_cost_usd=raw_cost)]))
    assert record["ok"] is True
    assert record["cli_cost_usd"] == expected
    assert (record["cli_cost_usd"] is None) == (expected is None)


def test_measured_cost():
    assert measured_cost(0.0) == 0.0 and measured_cost(2) == 2.0
    assert measured_cost(float("nan")) is None and measured_cost(float("inf")) is None


def test_result_is_error_is_a_session_error():
    record = record_for(encode([init_event(), result_event(is_error=True, api_error_status=400)]))
    assert record["ok"] is False and record["error_kind"] == "session-error"
    assert "result is_error" in record["error_detail"]["reasons"]


def test_error_max_turns_is_a_session_error():
    record = record_for(encode([init_event(), result_event(subtype="error_max_turns")]), returncode=0)
    assert record["error_kind"] == "session-error"
    assert record["error_detail"]["subtype"] == "error_max_turns"


def test_non_zero_exit_is_a_session_error_with_redacted_tails():
    raw = encode([init_event(), result_event()])
    record = record_for(
        raw,
        state="failed",
        returncode=1,
        stderr_tail=f"fatal: key {CANARY} rejected",
        stdout_tail='{"type":"user","x-api-key":"plain"}\nsecret ' + CANARY,
        secrets=[CANARY],
    )
    detail = record["error_detail"]
    assert record["ok"] is False and record["error_kind"] == "session-error"
    assert detail["returncode"] == 1 and detail["process_state"] == "failed"
    assert detail["stderr_tail"] == "fatal: key [REDACTED] rejected"
    assert CANARY not in json.dumps(detail) and "plain" not in detail["stdout_tail"]
    assert set(detail) >= {
        "subtype",
        "returncode",
        "process_state",
        "stderr_tail",
        "stdout_tail",
        "process_detail",
        "event_stream_error",
    }


def test_cancelled_process_is_cancelled():
    record = record_for(encode([init_event()]), state="cancelled", returncode=-15, expected_skill="change-work")
    assert record["ok"] is False
    assert record["error_kind"] == "cancelled"
    assert record["error_detail"]["process_state"] == "cancelled"


def test_hostile_tool_names_count_as_tool():
    raw = encode(
        [
            init_event(),
            tool_use("t1", "Bash", {}),
            tool_use("t2", "rm -rf /; echo", {}, "m2"),
            tool_use("t3", "x" * 65, {}, "m3"),
            result_event(),
        ]
    )
    assert record_for(raw)["tool_use_counts"] == {"Bash": 1, "tool": 2}


# ---------------------------------------------------------------------------------------------------------
# Skill proof


def test_skill_invoked_proves_the_skill():
    record = record_for(encode(skill_events()), expected_skill="change-work")
    assert record["ok"] is True and record["skill_invoked"] is True
    assert record["tool_use_counts"] == {"Skill": 1}


@pytest.mark.parametrize(
    ("requested", "field"),
    [("plug:change-work", "skill"), ("/change-work with args", "command"), ("a:b:change-work", "name")],
)
def test_plugin_qualified_and_slash_forms_prove_the_skill(requested, field):
    assert record_for(encode(skill_events(requested, field=field)), expected_skill="change-work")["skill_invoked"]


def test_skill_never_called_is_skill_not_invoked():
    raw = encode(
        [init_event(), tool_use("toolu_1", "Skill", {"skill": "other-skill"}), tool_result("toolu_1"), result_event()]
    )
    record = record_for(raw, expected_skill="change-work")
    assert record["ok"] is False
    assert record["error_kind"] == "skill-not-invoked"
    assert record["skill_invoked"] is False
    assert record["error_detail"] == "the event stream shows no successful change-work invocation"
    assert record["transcript_missing"] is False


def test_a_read_of_part_of_the_skill_file_is_no_skill_proof():
    # Only the Skill tool's success proves the skill: a Read of its file's first line (or of all of it) does not.
    skill_file = "/workspace/.claude/skills/change-work/SKILL.md"
    events = [
        init_event(),
        tool_use("toolu_1", "Read", {"file_path": skill_file, "offset": 1, "limit": 1}),
        tool_result("toolu_1", "     1\t---"),
        result_event(),
    ]
    record = record_for(encode(events), expected_skill="change-work")
    assert (record["skill_invoked"], record["error_kind"]) == (False, "skill-not-invoked")


def test_failed_skill_result_is_not_proof():
    record = record_for(encode(skill_events(is_error=True)), expected_skill="change-work")
    assert record["error_kind"] == "skill-not-invoked"


def test_session_error_is_never_overwritten_by_evidence_outcomes():
    raw = encode([init_event(), result_event()])
    record = record_for(raw, state="failed", returncode=2, expected_skill="change-work")
    assert record["error_kind"] == "session-error"
    assert record["skill_invoked"] is False
    assert record["evidence_diagnostics"] == ["the event stream shows no successful change-work invocation"]


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            [init_event(), tool_use("toolu_1", "Bash", {}), tool_result("toolu_1"),
             tool_use("toolu_1", "Skill", {"skill": "change-work"}, "m2"), tool_result("toolu_2"), result_event()],
            "duplicate tool_use id toolu_1",
        ),
        (
            [init_event(), tool_result("toolu_1"), tool_use("toolu_1", "Skill", {"skill": "change-work"}),
             result_event()],
            "does not follow",
        ),
        ([init_event(), tool_use("toolu_1", "Skill", {"skill": "change-work"}), result_event()], "has no tool_result"),
        ([init_event(), tool_use("bad id!", "Bash", {}), result_event()], "no well-formed id"),
        (
            [init_event(), tool_use("toolu_1", "Skill", {"skill": "change-work"}), tool_result("toolu_1"),
             tool_result("toolu_1"), result_event()],
            "duplicate tool_result",
        ),
        (
            [init_event(), tool_use("toolu_1", "Skill", {"skill": "change-work"}),
             tool_result("toolu_1", is_error="no"), result_event()],
            "non-boolean is_error",
        ),
    ],
)  # fmt: skip
def test_ambiguous_skill_evidence_is_unverified(events, message):
    record = record_for(encode(events), expected_skill="change-work")
    assert record["ok"] is False
    assert record["error_kind"] == "evidence-unverified"
    assert record["skill_invoked"] is None
    assert record["transcript_missing"] is True
    assert message in record["error_detail"]
    assert record["evidence_diagnostics"] == [record["error_detail"]]


def test_skill_was_invoked_without_a_request_is_false():
    assert skill_was_invoked([init_event(), result_event()], "change-work") is False
    with pytest.raises(ValueError):
        skill_was_invoked([], "  ")


# ---------------------------------------------------------------------------------------------------------
# Transcripts


def canary_stream() -> bytes:
    return encode([
        init_event(),
        text_reply(f"I found the key {CANARY} in the config", "m0"),
        tool_use("toolu_1", "Bash", {"command": f"curl -H 'x: {CANARY}' example.invalid"}, "m1"),
        tool_result("toolu_1", [{"type": "text", "text": f"echo {CANARY}"}]),
        tool_use("toolu_2", "Skill", {"skill": "change-work", "headers": {"X-API-Key": "header-value-9"}}, "m2"),
        tool_result("toolu_2", "Launching skill"),
        result_event(),
        {"type": "system", "subtype": "task_updated"},
    ])  # fmt: skip


def test_transcript_is_redacted_canonical_private_and_digest_bound(tmp_path):
    directory = tmp_path / "run" / "transcripts"
    raw = canary_stream()
    record = record_for(raw, expected_skill="change-work", transcript_dir=directory, secrets=[CANARY])
    assert record["ok"] is True, record
    artifact = record["transcript_artifact"]
    name = f"demo-task-workflow-run0-{SESSION}.jsonl"
    path = directory / name
    data = path.read_bytes()
    assert artifact == {
        "path": f"transcripts/{name}",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "source": TRANSCRIPT_SOURCE,
    }
    schema = load_schema("result-row")
    jsonschema.validate(artifact, {"$defs": schema["$defs"], "$ref": "#/$defs/transcript"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert CANARY.encode() not in data and b"header-value-9" not in data
    lines = data.decode().splitlines()
    assert len(lines) == 8, "every captured event, including trailing system events, is kept"
    for line in lines:
        assert line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    events = [json.loads(line) for line in lines]
    assert events[4]["message"]["content"][0]["input"]["headers"] == {"X-API-Key": "[REDACTED]"}
    assert events[2]["message"]["content"][0]["input"]["command"] == "curl -H 'x: [REDACTED]' example.invalid"


def test_transcript_is_written_once(tmp_path):
    directory = tmp_path / "transcripts"
    raw = encode(skill_events())
    persist_transcript(raw, directory=directory, prefix="cell", session_id=SESSION, secrets=[])
    with pytest.raises(FileExistsError):
        persist_transcript(raw, directory=directory, prefix="cell", session_id=SESSION, secrets=[])
    record = session_record(
        process_result(raw),
        reading=read_stream(raw, overflow=False, limit=MAX_TRANSCRIPT_BYTES, mcp_servers=()),
        expected_skill="change-work",
        transcript_dir=directory,
        transcript_prefix="cell",
        secrets=[],
        started_at="a",
        finished_at="b",
    )
    assert record["ok"] is False and record["error_kind"] == "evidence-unverified"
    assert record["transcript_missing"] is True and "transcript_artifact" not in record
    assert "persistence" in record["error_detail"]
    assert record["skill_invoked"] is True


@pytest.mark.parametrize(
    ("prefix", "session_id", "message"),
    [
        ("bad/prefix", SESSION, "unsafe transcript prefix"),
        ("cell", "../escape", "unsafe session id"),
        ("cell", None, "unsafe session id"),
    ],
)
def test_transcript_names_must_be_safe(tmp_path, prefix, session_id, message):
    with pytest.raises(ValueError, match=message):
        persist_transcript(
            encode(skill_events()), directory=tmp_path / "transcripts", prefix=prefix, session_id=session_id, secrets=[]
        )
    assert not (tmp_path / "transcripts").exists() or not any((tmp_path / "transcripts").iterdir())


def test_transcript_directory_must_be_real(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "transcripts").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="not a real directory"):
        persist_transcript(
            encode(skill_events()), directory=tmp_path / "transcripts", prefix="cell", session_id=SESSION, secrets=[]
        )
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_oversized_redacted_transcript_is_refused(tmp_path):
    # Redaction makes a short secret longer; the limit applies to what would be written.
    filler = "q" * (MAX_TRANSCRIPT_BYTES // 4)
    raw = encode([init_event(), text_reply(filler), text_reply(filler, "m2"), result_event()])
    with pytest.raises(ValueError, match="over the"):
        persist_transcript(raw, directory=tmp_path / "transcripts", prefix="cell", session_id=SESSION, secrets=["q"])
    assert list((tmp_path / "transcripts").iterdir()) == []


# ---------------------------------------------------------------------------------------------------------
# Costs and sums


PRICE_CHECK = PriceSettings(table="anthropic-list-2025-05", tolerance_pct=1.0, usd_per_mtok={}, source=None)


def test_the_ledger_gives_the_session_its_tokens_and_cost_and_the_cli_figure_is_the_cross_check():
    ledger = ledger_of(
        ledger_entry(cost=0.006, input_tokens=1000, output_tokens=50),
        ledger_entry(cost=0.004, input_tokens=2003, output_tokens=103, cache_read_input_tokens=603),
    )
    record = record_for(SAMPLE.read_bytes(), ledger=ledger)
    assert record["ok"] is True and record["error_kind"] is None
    assert (record["input_tokens"], record["output_tokens"], record["cache_read_input_tokens"]) == (3003, 153, 603)
    assert record["cost_usd"] == 0.01 and record["cli_cost_usd"] == 0.01487115
    check = cost_check(sum_sessions([record]), PRICE_CHECK)
    assert check["ledger_usd"] == 0.01 and check["cli_usd"] == pytest.approx(0.0149, abs=1e-4)
    assert check["agrees"] is False and check["difference_pct"] > PRICE_CHECK.tolerance_pct


def test_an_unpriced_request_leaves_the_session_unmeasured_never_free():
    record = record_for(SAMPLE.read_bytes(), ledger=ledger_of(ledger_entry(cost=0.01), ledger_entry(cost=None)))
    assert record["cost_usd"] is None
    assert cost_check(sum_sessions([record]), PRICE_CHECK)["agrees"] is None


@pytest.mark.parametrize(("refused", "kind"), [("budget", "budget-exhausted"), ("session-cap", "session-cap-reached")])
def test_a_refusal_at_a_spend_cap_says_which_cap_ended_the_session(refused, kind):
    message = f"skillbench gateway: the {refused} is reached"
    events = [init_event(), result_event(is_error=True, api_error_status=402)]
    ledger = ledger_of(ledger_entry(), ledger_entry("refused", refused=refused, cost=0.0, failure=message))
    record = record_for(encode(events), returncode=1, state="failed", ledger=ledger)
    assert (record["ok"], record["error_kind"], record["error_detail"]) == (False, kind, message)


def pending(outcome: str, *, status=None, waited: float = 0.1) -> dict:
    """A request the session's end (the ledger's `closed_at`, 07:37:13) found unanswered `waited` seconds after it
    was sent (in flight), or that the session hung up on after `waited` seconds (client gone)."""
    from datetime import datetime, timedelta

    entry = ledger_entry(outcome, cost=None if outcome == "in-flight" else 0.0)
    entry.update(status=status, duration_s=waited if outcome == "client-gone" else None)
    if outcome == "in-flight":
        sent = datetime.fromisoformat("2026-11-29T07:37:13.000+00:00") - timedelta(seconds=waited)
        entry.update(finished_at=None, started_at=sent.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    return entry


@pytest.mark.parametrize(
    "last",
    [
        ledger_entry(),
        pending("in-flight"),  # the model was thinking about its last turn when the clock ran out
        pending("in-flight", status=200),  # its answer was streaming
        pending("client-gone", status=200, waited=30.0),
        dict(ledger_entry("upstream-error", cost=0.0), status=400),  # a request the API refused as malformed
    ],
)
def test_a_clock_run_out_in_the_agents_own_work_is_its_counted_timeout(last):
    record = record_for(encode([init_event()]), state="timeout", returncode=-9, ledger=ledger_of(ledger_entry(), last))
    assert record["error_kind"] == "session-timeout" and record["ok"] is False


@pytest.mark.parametrize(
    ("trouble", "said"),
    [
        (pending("in-flight", waited=420.0), "no answer after 420s"),
        (ledger_entry("upstream-failure", cost=0.0, failure="connection refused"), "upstream-failure"),
        (ledger_entry("gateway-error", cost=0.0, failure="spend unreadable"), "gateway-error"),
        (dict(ledger_entry("upstream-error", cost=0.0), status=529), "answered 529"),
        (dict(ledger_entry("upstream-error", cost=0.0), status=429), "answered 429"),
        (pending("client-gone", waited=300.0), "no answer after 300s"),
    ],
)
def test_a_clock_run_out_while_the_model_api_failed_or_stalled_is_the_harnesss(trouble, said):
    ledger = ledger_of(ledger_entry(), trouble)
    record = record_for(encode([init_event()]), state="timeout", returncode=-9, ledger=ledger)
    assert record["error_kind"] == "session-error"
    assert "model API was failing or stalling: 1 of its 2 model requests" in record["error_detail"]
    assert said in record["error_detail"]


@pytest.mark.parametrize(
    ("capture", "proc"),
    [
        (None, {"state": "failed", "returncode": None, "detail": "could not start claude: FileNotFoundError"}),
        (encode([init_event(), result_event()]), {"state": "failed", "detail": "stdin write failed: BrokenPipeError"}),
        (b"not json\n", {"state": "failed", "returncode": 1}),  # the CLI broke its own stream
        (encode([init_event(), result_event(is_error=True)]), {"state": "failed", "returncode": 1}),  # it gave up
    ],
)
def test_what_only_the_harness_or_the_cli_can_have_caused_stays_an_excluded_session_error(capture, proc):
    """The audit's other paths: a CLI that did not start, a prompt not delivered, a broken stream, a CLI that failed
    with a clean ledger (no refusal, no limit, no timeout). The harness's (or its CLI's): excluded from the
    evidence, retried, and counted by the outage breaker."""
    from skillbench.base.records import EXCLUDED_ERROR_KINDS, SYSTEMIC_ERROR_KINDS

    record = record_for(capture, ledger=ledger_of(ledger_entry()), **proc)
    assert record["error_kind"] == "session-error"
    assert "session-error" in EXCLUDED_ERROR_KINDS and "session-error" in SYSTEMIC_ERROR_KINDS


def test_a_request_for_a_model_without_a_price_ends_the_session_as_its_counted_outcome():
    message = "skillbench gateway: this session's request names the model 'claude-haiku-x', which has no price"
    events = [init_event(), result_event(is_error=True, api_error_status=402)]
    ledger = ledger_of(ledger_entry(), ledger_entry("refused", refused="model-unpriced", cost=0.0, failure=message))
    record = record_for(encode(events), returncode=1, state="failed", ledger=ledger)
    assert (record["ok"], record["error_kind"], record["error_detail"]) == (False, "model-unpriced", message)


@pytest.mark.parametrize("kind", ["memory-limit-exceeded", "process-limit-exceeded"])
def test_a_kernel_limit_of_the_cell_decides_even_when_the_cli_died_of_it(kind):
    # The OOM killer took the CLI itself: a killed process and a broken stream, which alone would be the harness's.
    hit = (kind, "the kernel killed 1 process(es) of the cell at its memory limit")
    record = record_for(encode([init_event()])[:-5], state="killed", returncode=-9, limit_hit=hit)
    assert (record["ok"], record["error_kind"], record["error_detail"]) == (False, kind, hit[1])


def test_a_limit_the_session_ran_into_stands_when_its_cli_went_on_and_exited_cleanly():
    # The OOM killer took one of the agent's commands; the CLI finished its turn without the skill and exited 0.
    hit = ("memory-limit-exceeded", "the kernel killed 1 process(es) of the cell at its memory limit")
    record = record_for(encode([init_event(), result_event()]), expected_skill="change-work", limit_hit=hit)
    assert (record["ok"], record["error_kind"], record["error_detail"]) == (False, *hit)
    assert record["skill_invoked"] is False  # what its evidence lacks is a diagnostic, not a second verdict
    assert "no successful change-work invocation" in " ".join(record["evidence_diagnostics"])


def test_a_cancelled_session_stays_cancelled_whatever_the_ledger_says():
    ledger = ledger_of(ledger_entry("refused", refused="budget", cost=0.0, failure="refused"))
    record = record_for(encode([init_event()]), state="cancelled", returncode=-15, ledger=ledger)
    assert record["error_kind"] == "cancelled"


def test_cost_check_reports_the_difference_and_unmeasured_figures():
    assert cost_check({"cost_usd": 1.0, "cli_cost_usd": 1.02}, PRICE_CHECK) == {
        "price_table": "anthropic-list-2025-05",
        "ledger_usd": 1.0,
        "cli_usd": 1.02,
        "agrees": False,
        "difference_pct": pytest.approx(100 * 0.02 / 1.02, abs=1e-3),
    }
    assert cost_check({"cost_usd": 0.0, "cli_cost_usd": 0.0}, PRICE_CHECK)["agrees"] is True
    unmeasured = cost_check({"cost_usd": 1.0, "cli_cost_usd": None}, PRICE_CHECK)
    assert unmeasured["agrees"] is None and unmeasured["difference_pct"] is None


def session(**fields) -> dict:
    base = {
        "ok": True, "error_kind": None, "error_detail": None, "session_id": "s1", "num_turns": 3,
        "cost_usd": 0.10004, "cli_cost_usd": 0.1, "duration_s": 1.25,
        "tool_use_counts": {"Bash": 2}, "input_tokens": 100, "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 20, "output_tokens": 5, "transcript_missing": False, "evidence_diagnostics": [],
    }  # fmt: skip
    base.update(fields)
    return base


def test_sum_sessions_adds_and_merges():
    artifact = {"path": "transcripts/a.jsonl", "sha256": "0" * 64, "bytes": 1, "source": TRANSCRIPT_SOURCE}
    total = sum_sessions([
        session(skill_invoked=True, transcript_artifact=artifact),
        session(session_id="s2", cost_usd=0.2, tool_use_counts={"Bash": 1, "Skill": 1}, duration_s=2.31,
                skill_invoked=True),
    ])  # fmt: skip
    assert total["input_tokens"] == 200 and total["output_tokens"] == 10
    assert total["cache_creation_input_tokens"] == 20 and total["cache_read_input_tokens"] == 40
    assert total["cost_usd"] == 0.3
    assert total["cli_cost_usd"] == 0.2
    assert total["duration_s"] == 3.6
    assert total["num_turns"] == 6
    assert total["ok"] is True and total["error_kind"] is None and total["error_detail"] is None
    assert total["session_ids"] == ["s1", "s2"]
    assert total["skill_invoked"] is True
    assert total["tool_use_counts"] == {"Bash": 3, "Skill": 1}
    assert total["transcript_artifacts"] == [artifact]
    assert total["transcript_missing"] is False and total["evidence_diagnostics"] == []


def test_sum_sessions_propagates_unmeasured_cost_and_first_error():
    total = sum_sessions([
        session(cli_cost_usd=None),
        session(ok=False, cost_usd=None, error_kind="evidence-unverified", error_detail="first",
                transcript_missing=True, evidence_diagnostics=["d1"]),
        session(ok=False, error_kind="session-error", error_detail={"subtype": None}, evidence_diagnostics=["d2"]),
    ])  # fmt: skip
    assert total["cost_usd"] is None and total["cli_cost_usd"] is None
    assert total["ok"] is False
    assert (total["error_kind"], total["error_detail"]) == ("evidence-unverified", "first")
    assert total["transcript_missing"] is True
    assert total["evidence_diagnostics"] == ["d1", "d2"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [([True, True], True), ([True, False], False), ([None, False], False), ([True, None], None), ([], None)],
)
def test_sum_sessions_skill_invoked(values, expected):
    records = [session(skill_invoked=value) for value in values] or [session()]
    assert sum_sessions(records)["skill_invoked"] is expected


def test_sum_sessions_needs_sessions():
    with pytest.raises(ValueError):
        sum_sessions([])


# ---------------------------------------------------------------------------------------------------------
# run_session end to end with a stand-in CLI


def fake_cli(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "fake_claude.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


# ---------------------------------------------------------------------------------------------------------
# Progress


def test_progress_heartbeat_fires_when_quiet():
    output = io.StringIO()
    with SessionProgress("cell-a", output, [], heartbeat_s=0.05):
        time.sleep(0.4)
    text = output.getvalue()
    assert "[cell-a 0m00s] started (heartbeat every 0.05s)" in text
    assert "still running · 0 events · 0 turns · 0 tool calls · last: starting" in text


def test_progress_reports_metadata_from_the_real_stream_in_arbitrary_chunks():
    output = io.StringIO()
    raw = SAMPLE.read_bytes()
    with SessionProgress("cell", output, [], heartbeat_s=60) as progress:
        for start in range(0, len(raw), 37):
            progress.observe(raw[start : start + 37])
    text = output.getvalue()
    assert "session initialized" in text
    assert "turn 1 · Write" in text and "turn 2 · Bash" in text, "blocks of one reply are one turn"
    assert 'tool Bash input={"command":"echo hi && cat hello.txt","description":"echo hi"}' in text
    assert 'tool Bash result=ok output="hi\\nhello from mock"' in text
    assert "tool Write input" not in text, "only read-only tools get previews"
    assert "All done" not in text, "model prose is never logged"
    assert "finished · 3 turns · ok · $0.0149" in text


def test_progress_previews_are_redacted_bounded_and_single_line():
    output = io.StringIO()
    events = [
        tool_use("toolu_1", "Bash", {"command": f"echo {CANARY}\n" + "z" * 5000}),
        tool_use("toolu_2", "Read", {"file_path": "/x", "x-api-key": "header-value-9"}, "m2"),
        tool_result("toolu_1", f"{CANARY}\n" * 3),
        {"type": "system", "subtype": "api_retry", "attempt": 2, "max_retries": 10, "retry_delay_ms": 1100},
        result_event(total_cost_usd="garbage", is_error=True),
    ]
    with SessionProgress("cell", output, [CANARY], heartbeat_s=60) as progress:
        progress.observe(encode(events))
    text = output.getvalue()
    assert CANARY not in text and "header-value-9" not in text
    lines = text.splitlines()
    bash_input = next(line for line in lines if "tool Bash input=" in line)
    preview = bash_input.split("input=", 1)[1]
    assert preview.startswith('{"command":"echo [REDACTED]\\nzzz')
    shown, marker = preview.split("…[truncated ", 1)
    assert len(shown) == 800 and marker.endswith(" chars]")
    assert '"x-api-key":"[REDACTED]"' in text
    assert "API retry 2/10 in 1.1s" in text
    assert "finished · 2 turns · error · cost n/a" in text


def test_progress_observe_never_raises_and_recovers_after_garbage():
    output = io.StringIO()
    with SessionProgress("cell", output, [], heartbeat_s=60) as progress:
        progress.observe(b"\xff\xfe not json\n[1,2]\n{broken\n")
        progress.observe(b"x" * (2 * 1024 * 1024))
        progress.observe(b"still the same giant line\n")
        progress.observe(encode([{"type": "system", "subtype": "init"}]))
        progress.observe(None)  # type: ignore[arg-type]
    assert output.getvalue().count("session initialized") == 1


def test_progress_neutralises_workflow_commands():
    output = io.StringIO()
    with SessionProgress("cell\n::error::injected", output, [], heartbeat_s=60):
        pass
    lines = output.getvalue().splitlines()
    assert lines and not any(line.startswith("::") for line in lines)
    assert any(line.startswith("[:]error::injected") for line in lines)


class CountingStream(io.StringIO):
    """A log stream that counts the writes tried on it after it was closed (each one raises ValueError)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes_after_close = 0

    def write(self, text: str) -> int:
        if self.closed:
            self.writes_after_close += 1
        return super().write(text)


def test_progress_survives_a_closed_stream():
    """A log pipe closed under a running session: observing the stream and the heartbeat go on, neither raises
    nor blocks, and the progress still counts what the session does."""
    output = CountingStream()
    progress = SessionProgress("cell", output, [], heartbeat_s=0.02)
    errors: list[BaseException] = []

    def session() -> None:
        try:
            with progress:
                output.close()
                progress.observe(encode([init_event()]))
                # The heartbeat thread tried to print twice after the close: the first failure did not end it.
                deadline = time.monotonic() + 30
                while output.writes_after_close < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                progress.observe(encode([tool_use("t1", "Bash", {"command": "true"}), tool_result("t1")]))
        except BaseException as error:  # the test reports it below, from the main thread
            errors.append(error)

    worker = threading.Thread(target=session, daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "observe, the heartbeat or the session's end blocked on the closed stream"
    assert errors == []
    assert output.writes_after_close >= 2
    assert (progress.events, progress.turns, progress.tool_calls) == (3, 1, 1)


def test_transcript_file_uses_no_follow(tmp_path):
    directory = tmp_path / "transcripts"
    directory.mkdir(mode=0o700)
    target = tmp_path / "target"
    target.write_text("original")
    os.symlink(target, directory / f"cell-{SESSION}.jsonl")
    with pytest.raises(OSError):
        persist_transcript(encode(skill_events()), directory=directory, prefix="cell", session_id=SESSION, secrets=[])
    assert target.read_text() == "original"


# ---------------------------------------------------------------------------------------------------------
# Launching a session


# A stand-in CLI (a unit test of the launcher, not of the CLI): it records what it was given, sends one Messages
# request with its token to the address it got, and prints a stream-json result with the usage it was answered.
FAKE_CLI = """#!{python}
import http.client, json, os, sys, urllib.parse
prompt = sys.stdin.read()
env = {{k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC", "CLAUDE", "MCP"))}}
seen = {{"argv": sys.argv[1:], "prompt": prompt, "env": env}}
with open({seen!r}, "w") as handle:
    json.dump(seen, handle)
address = urllib.parse.urlsplit(os.environ["ANTHROPIC_BASE_URL"])
connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
body = json.dumps({{"model": "m", "max_tokens": 10, "tools": [{{"name": "Bash"}}],
                    "messages": [{{"role": "user", "content": prompt}}]}})
for _ in range(int(os.environ.get("FAKE_REQUESTS", "1"))):
    connection.request("POST", "/v1/messages", body=body, headers={{"x-api-key": os.environ["ANTHROPIC_API_KEY"]}})
    answer = connection.getresponse()
    reply = json.loads(answer.read())
    if answer.status != 200:
        break
if answer.status != 200:
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": True, "num_turns": 1, "duration_ms": 5,
                      "session_id": "sess-launch", "api_error_status": answer.status, "usage": {{}}}}))
    sys.exit(1)
usage = reply["usage"]
for event in (
    {{"type": "system", "subtype": "init", "session_id": "sess-launch", "model": "m"}},
    {{"type": "assistant", "message": {{"id": reply["id"], "content": reply["content"]}}}},
    {{"type": "result", "subtype": "success", "is_error": False, "duration_ms": 10, "num_turns": 1,
      "session_id": "sess-launch", "total_cost_usd": 0.000105, "usage": usage}},
):
    print(json.dumps(event), flush=True)
"""
PRICES = {"m": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}}


def launch_config(provider: str, base_url: str | None = None, **budget) -> dict:
    return {
        "model": {"provider": provider, "effort": None, "base_url": base_url},
        "agent": {
            "heartbeat_s": 60,
            "session_timeout_s": 60,
            "prices": {"table": "t", "tolerance_pct": 1.0, "usd_per_mtok": PRICES},
        },
        "budget": {"max_usd": None, "max_session_usd": None, **budget},
    }


class KeyRecordingUpstream:
    """A loopback stand-in for the provider's API: answers every Messages request and records its key."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        keys: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                keys.append(self.headers.get("x-api-key", ""))
                usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 0,
                         "cache_creation_input_tokens": 0}  # fmt: skip
                body = json.dumps(
                    {
                        "id": "msg_up_1",
                        "type": "message",
                        "role": "assistant",
                        "model": "m",
                        "content": [{"type": "text", "text": "hi"}],
                        "usage": usage,
                    }  # fmt: skip
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                return

        self.keys = keys
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def launch(
    tmp_path: Path, config: dict, api_key: str | None, prompt: str, log: io.StringIO, requests: int = 1, agent=None
):
    """One session of the stand-in CLI under the `none` backend, through a job's real gateway."""
    from skillbench.execution.access import model_access
    from skillbench.execution.sandbox import AgentInstall, Sandbox
    from skillbench.execution.scripted_model import ScriptedModel
    from skillbench.execution.sessions import SessionSurface, launch_session

    seen_file = tmp_path / "seen.json"
    cli = tmp_path / "fake-claude"
    cli.write_text(FAKE_CLI.format(python=sys.executable, seen=str(seen_file)))
    cli.chmod(0o755)
    root = tmp_path / "root"
    (root / "workspace").mkdir(parents=True)
    sandbox = Sandbox("none", root / "workspace", root, agent_install=AgentInstall("claude", cli))
    started: list[ScriptedModel] = []

    def scripted() -> ScriptedModel:
        started.append(ScriptedModel([{"text": "scripted reply"}], defaults={}))
        return started[-1]

    try:
        with model_access(
            private_root=root,
            settings=job_settings(config),
            api_key=api_key,
            socket_owner=None,
            results_root=None,
            job="demo",
        ) as access:
            record, ledger = launch_session(
                sandbox,
                SessionSurface(
                    tools=["Read", "Bash"],
                    disallowed_tools=["Skill"],
                    extra_env={"MCP_TIMEOUT": "5", "FAKE_REQUESTS": str(requests)},
                ),
                label="demo/launch",
                prompt=prompt,
                model="m",
                settings=job_settings(config),
                access=access,
                secrets=[api_key] if api_key else [],
                scripted_model=scripted,
                transcript_dir=tmp_path / "run" / "transcripts",
                transcript_prefix="work",
                log=log,
                agent=agent,
            )
    finally:
        sandbox.close()
    return record, ledger, json.loads(seen_file.read_text()), started


def test_the_session_speaks_its_adapters_wire_api(tmp_path):
    from skillbench.execution.agents.claude_code import ClaudeCode

    class GeminiSpoken(ClaudeCode):
        wire_api = "gemini"

    # The stand-in CLI speaks Anthropic Messages: in a Gemini session its x-api-key is no credential.
    record, ledger, _, started = launch(
        tmp_path, launch_config("scripted"), None, "p", io.StringIO(), agent=GeminiSpoken()
    )
    assert ledger["wire"] == "gemini" and ledger["totals"]["requests"] == 0
    assert started[0].requests == [] and record["ok"] is False


def test_a_scripted_session_reaches_its_model_only_through_the_gateway_with_a_token(tmp_path):
    log = io.StringIO()
    record, ledger, seen, started = launch(tmp_path, launch_config("scripted"), None, "do the task ✓", log)
    assert seen["prompt"] == "do the task ✓" and all("do the task" not in arg for arg in seen["argv"])
    assert ["--tools", "Read,Bash"] == seen["argv"][seen["argv"].index("--tools") :][:2]
    assert "--disallowedTools" in seen["argv"] and seen["argv"][seen["argv"].index("--model") + 1] == "m"
    assert seen["env"]["MCP_TIMEOUT"] == "5" and "CLAUDE_CODE_SHELL_PREFIX" in seen["env"]
    # The CLI got a session token and the forwarder's address, never the scripted model's own.
    assert seen["env"]["ANTHROPIC_API_KEY"].startswith("sbx-session-")
    assert started[0].base_url not in json.dumps(seen)
    assert [request["kind"] for request in started[0].requests] == ["step"]
    assert ledger["totals"]["requests"] == 1 and ledger["open"] is False and ledger["wire"] == "anthropic"
    assert record["ok"] is True and record["session_id"] == "sess-launch"
    assert record["cost_usd"] == ledger["totals"]["cost_usd"] and record["cost_usd"] > 0
    assert record["transcript_artifact"]["path"] == "transcripts/work-sess-launch.jsonl"
    assert "[demo/launch" in log.getvalue() and seen["env"]["ANTHROPIC_API_KEY"] not in log.getvalue()


def test_a_real_provider_session_sends_the_key_upstream_and_the_cli_never_sees_it(tmp_path):
    upstream = KeyRecordingUpstream()
    key = "sk-launch-secret-0123456789abcdef"
    try:
        log = io.StringIO()
        record, ledger, seen, started = launch(
            tmp_path, launch_config("anthropic", upstream.url), key, f"do the task {key}", log
        )
    finally:
        upstream.close()
    assert started == [] and upstream.keys == [key]
    assert key not in json.dumps(seen["env"]) and seen["env"]["ANTHROPIC_API_KEY"].startswith("sbx-session-")
    assert record["ok"] is True and record["cost_usd"] == pytest.approx((1000 * 3.0 + 100 * 15.0) / 1e6)
    assert key not in log.getvalue()


def test_a_session_past_its_cap_is_refused_at_the_gateway_and_its_row_says_so(tmp_path):
    upstream = KeyRecordingUpstream()
    try:
        # One request costs $0.0045: the first is admitted (nothing spent yet), the second is refused.
        config = launch_config("anthropic", upstream.url, max_session_usd=0.004)
        record, ledger, _seen, _started = launch(tmp_path, config, "sk-cap-0123456789abcdef", "go", io.StringIO(), 2)
    finally:
        upstream.close()
    assert len(upstream.keys) == 1 and [entry["outcome"] for entry in ledger["requests"]] == ["ok", "refused"]
    assert record["error_kind"] == "session-cap-reached" and "spend cap of $0.0040 is reached" in record["error_detail"]
    assert record["cost_usd"] == pytest.approx(0.0045)
