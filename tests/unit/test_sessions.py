"""Session evidence: CLI argv, strict stream parsing, skill proof, records, transcripts, sums, costs, progress."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest
from skillbench.base.artifacts import load_schema
from skillbench.base.process import ProcessResult
from skillbench.base.records import USAGE_FIELDS
from skillbench.execution.sessions import (
    MAX_TRANSCRIPT_BYTES,
    TRANSCRIPT_SOURCE,
    SessionProgress,
    cli_command,
    cost_check,
    evidence_window,
    measured_cost,
    parse_event_stream,
    persist_transcript,
    recompute_cost,
    run_session,
    session_record,
    skill_was_invoked,
    sum_sessions,
)

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


def record_for(capture: bytes | None, *, expected_skill=None, transcript_dir=None, secrets=(), prices=None, **proc):
    return session_record(
        process_result(capture, **proc),
        expected_skill=expected_skill,
        transcript_dir=transcript_dir,
        transcript_prefix="demo-task-workflow-run0",
        secrets=secrets,
        prices=prices,
        started_at="2026-11-29T07:37:12Z",
        finished_at="2026-11-29T07:37:13Z",
    )


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


def test_real_sample_stream_gives_exact_usage_and_cost():
    record = record_for(SAMPLE.read_bytes(), prices=SONNET_4_PRICES)
    assert record["ok"] is True and record["error_kind"] is None and record["error_detail"] is None
    assert record["session_id"] == SAMPLE_SESSION
    assert record["input_tokens"] == 3003
    assert record["cache_creation_input_tokens"] == 903
    assert record["cache_read_input_tokens"] == 603
    assert record["output_tokens"] == 153
    assert record["cost_usd"] == 0.01487115
    assert record["recomputed_cost_usd"] == pytest.approx(0.01487115, abs=1e-12)
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


def test_capture_overflow_is_a_session_error():
    record = record_for(encode(skill_events()), overflow=True, expected_skill="change-work")
    assert record["error_kind"] == "session-error"
    assert str(MAX_TRANSCRIPT_BYTES) in record["error_detail"]["event_stream_error"]
    assert record["transcript_missing"] is True


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
def test_unmeasured_cost_is_none_and_the_session_stays_ok(raw_cost, expected):
    record = record_for(encode([init_event(), result_event(total_cost_usd=raw_cost)]))
    assert record["ok"] is True
    assert record["cost_usd"] == expected
    assert (record["cost_usd"] is None) == (expected is None)


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
        expected_skill="change-work",
        transcript_dir=directory,
        transcript_prefix="cell",
        secrets=[],
        prices=None,
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


def test_recompute_cost_reproduces_the_cli_figure():
    result = json.loads(SAMPLE.read_text().splitlines()[-1])
    recomputed = recompute_cost(result["modelUsage"], SONNET_4_PRICES)
    assert recomputed == pytest.approx(result["total_cost_usd"], abs=1e-12)
    assert recompute_cost(result["modelUsage"], {"other-model": SONNET_4_PRICES["claude-sonnet-4-20250514"]}) is None
    usage = {"claude-sonnet-4-20250514": dict(result["modelUsage"]["claude-sonnet-4-20250514"])}
    del usage["claude-sonnet-4-20250514"]["cacheReadInputTokens"]
    assert recompute_cost(usage, SONNET_4_PRICES) is None
    assert recompute_cost(result["modelUsage"], {"claude-sonnet-4-20250514": {"input": 3.0}}) is None
    assert recompute_cost({}, SONNET_4_PRICES) == 0.0


SONNET = "claude-sonnet-4-20250514"
HAIKU = "claude-3-5-haiku-20241022"
PRICE_CHECK = {"table": "anthropic-list-2025-05", "tolerance_pct": 1.0}


def cli_reported_cost(tokens: dict, one_hour: int, *, base_input: float, output: float) -> float:
    """The cost as the CLI computes it from Anthropic's multipliers: a 5-minute cache write costs 1.25x the
    input price, a 1-hour one 2x, a cache read 0.1x; the 1-hour writes are counted inside the cache writes."""
    five_minute = tokens["cache_creation_input_tokens"] - one_hour
    return (
        tokens["input_tokens"] * base_input
        + tokens["output_tokens"] * output
        + five_minute * 1.25 * base_input
        + one_hour * 2 * base_input
        + tokens["cache_read_input_tokens"] * 0.1 * base_input
    ) / 1_000_000


def model_usage(tokens: dict, **extra) -> dict:
    return {
        "inputTokens": tokens["input_tokens"],
        "outputTokens": tokens["output_tokens"],
        "cacheCreationInputTokens": tokens["cache_creation_input_tokens"],
        "cacheReadInputTokens": tokens["cache_read_input_tokens"],
        **extra,
    }


TOKENS = {
    "input_tokens": 1200,
    "output_tokens": 800,
    "cache_creation_input_tokens": 40_000,
    "cache_read_input_tokens": 90_000,
}


@pytest.mark.parametrize("prices", [SONNET_4_PRICES, {SONNET: {**SONNET_4_PRICES[SONNET], "cache_write_1h": 6.0}}])
def test_one_hour_cache_writes_reported_in_model_usage_are_priced_at_the_one_hour_rate(prices):
    # Without cache_write_1h in the table (an old config) the 1-hour rate is 2x input, Anthropic's price.
    usage = {SONNET: model_usage(TOKENS, cacheCreationEphemeral1hInputTokens=30_000)}
    expected = cli_reported_cost(TOKENS, 30_000, base_input=3.0, output=15.0)
    assert recompute_cost(usage, prices) == pytest.approx(expected, abs=1e-10)
    # The split changes the figure: pricing every write as 5-minute would be 30 % cheaper here.
    assert recompute_cost({SONNET: model_usage(TOKENS)}, prices) == pytest.approx(
        cli_reported_cost(TOKENS, 0, base_input=3.0, output=15.0), abs=1e-10
    )


def test_the_price_table_sets_the_one_hour_rate_when_it_has_one():
    usage = {SONNET: model_usage(TOKENS, cacheCreationEphemeral1hInputTokens=10_000)}
    prices = {SONNET: {**SONNET_4_PRICES[SONNET], "cache_write_1h": 10.0}}
    expected = (1200 * 3.0 + 800 * 15.0 + 30_000 * 3.75 + 10_000 * 10.0 + 90_000 * 0.3) / 1_000_000
    assert recompute_cost(usage, prices) == pytest.approx(expected, abs=1e-10)
    assert recompute_cost(usage, {SONNET: {**SONNET_4_PRICES[SONNET], "cache_write_1h": -1}}) is None


def test_a_one_hour_split_larger_than_the_cache_writes_is_malformed():
    usage = {SONNET: model_usage(TOKENS, cacheCreationEphemeral1hInputTokens=40_001)}
    assert recompute_cost(usage, SONNET_4_PRICES) is None
    assert (
        recompute_cost({SONNET: model_usage(TOKENS, cacheCreationEphemeral1hInputTokens="9")}, SONNET_4_PRICES) is None
    )


def split_session(one_hour: int, *, reported: float, model_usage_split: bool = False, models: tuple = (SONNET,)):
    """A session whose result reports the cache-write split as the pinned CLI does: in `usage.cache_creation`."""
    usage = {
        **TOKENS,
        "cache_creation": {"ephemeral_1h_input_tokens": one_hour, "ephemeral_5m_input_tokens": 40_000 - one_hour},
    }
    split = {"cacheCreationEphemeral1hInputTokens": one_hour} if model_usage_split else {}
    by_model = {model: model_usage(TOKENS, **(split if model == SONNET else {})) for model in models}
    init = {**init_event(), "model": SONNET}
    return encode([init, result_event(usage=usage, modelUsage=by_model, total_cost_usd=reported)])


def test_the_cost_cross_check_agrees_with_a_cli_that_prices_one_hour_writes():
    reported = round(cli_reported_cost(TOKENS, 25_000, base_input=3.0, output=15.0), 8)
    record = record_for(split_session(25_000, reported=reported), prices=SONNET_4_PRICES)
    assert record["recomputed_cost_usd"] == pytest.approx(reported, abs=1e-10)
    check = cost_check(sum_sessions([record]), PRICE_CHECK)
    assert check["agrees"] is True and check["difference_pct"] == 0.0
    # Priced all as 5-minute writes, the same session would disagree by far more than the tolerance.
    all_five_minute = cli_reported_cost(TOKENS, 0, base_input=3.0, output=15.0)
    assert 100 * (reported - all_five_minute) / reported > 10 * PRICE_CHECK["tolerance_pct"]


def test_a_split_in_model_usage_is_not_counted_twice():
    reported = cli_reported_cost(TOKENS, 25_000, base_input=3.0, output=15.0)
    record = record_for(split_session(25_000, reported=reported, model_usage_split=True), prices=SONNET_4_PRICES)
    assert record["recomputed_cost_usd"] == pytest.approx(reported, abs=1e-10)


def test_the_main_loop_split_goes_to_the_session_model_only():
    # The result's usage covers the main loop, which runs on the model system/init names; another model's
    # cache writes (a subagent's, a side call's) stay 5-minute.
    prices = {**SONNET_4_PRICES, HAIKU: {"input": 0.8, "output": 4.0, "cache_write": 1.0, "cache_read": 0.08}}
    record = record_for(split_session(25_000, reported=0.5, models=(SONNET, HAIKU)), prices=prices)
    sonnet = cli_reported_cost(TOKENS, 25_000, base_input=3.0, output=15.0)
    haiku = cli_reported_cost(TOKENS, 0, base_input=0.8, output=4.0)
    assert record["recomputed_cost_usd"] == pytest.approx(sonnet + haiku, abs=1e-10)
    # Without system/init naming the model, a split that several models could own cannot be placed.
    usage = {**TOKENS, "cache_creation": {"ephemeral_1h_input_tokens": 5, "ephemeral_5m_input_tokens": 0}}
    by_model = {SONNET: model_usage(TOKENS), HAIKU: model_usage(TOKENS)}
    assert recompute_cost(by_model, prices, result_usage=usage) is None
    assert recompute_cost(
        by_model, prices, result_usage={**usage, "cache_creation": {"ephemeral_1h_input_tokens": 0}}
    ) == (pytest.approx(cli_reported_cost(TOKENS, 0, base_input=3.0, output=15.0) + haiku, abs=1e-10))


def test_without_a_split_every_cache_write_is_priced_as_five_minute():
    five_minute = cli_reported_cost(TOKENS, 0, base_input=3.0, output=15.0)
    for usage in (dict(TOKENS), {**TOKENS, "cache_creation": None}, {**TOKENS, "cache_creation": {}}):
        events = [
            init_event(),
            result_event(usage=usage, modelUsage={SONNET: model_usage(TOKENS)}, total_cost_usd=five_minute),
        ]
        record = record_for(encode(events), prices=SONNET_4_PRICES)
        assert record["recomputed_cost_usd"] == pytest.approx(five_minute, abs=1e-10)
        assert cost_check(sum_sessions([record]), PRICE_CHECK)["agrees"] is True
    malformed = {**TOKENS, "cache_creation": {"ephemeral_1h_input_tokens": -3}}
    events = [init_event(), result_event(usage=malformed, modelUsage={SONNET: model_usage(TOKENS)})]
    assert record_for(encode(events), prices=SONNET_4_PRICES)["recomputed_cost_usd"] is None


def test_cost_check_reports_the_difference_and_unmeasured_figures():
    assert cost_check({"cost_usd": 1.02, "recomputed_cost_usd": 1.0}, PRICE_CHECK) == {
        "price_table": "anthropic-list-2025-05",
        "recomputed_usd": 1.0,
        "agrees": False,
        "difference_pct": pytest.approx(100 * 0.02 / 1.02, abs=1e-3),
    }
    assert cost_check({"cost_usd": 0.0, "recomputed_cost_usd": 0.0}, PRICE_CHECK)["agrees"] is True
    unmeasured = cost_check({"cost_usd": None, "recomputed_cost_usd": 1.0}, PRICE_CHECK)
    assert unmeasured["agrees"] is None and unmeasured["difference_pct"] is None


def session(**fields) -> dict:
    base = {
        "ok": True, "error_kind": None, "error_detail": None, "session_id": "s1", "num_turns": 3,
        "cost_usd": 0.10004, "recomputed_cost_usd": 0.1, "duration_s": 1.25,
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
    assert total["recomputed_cost_usd"] == 0.2
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
        session(recomputed_cost_usd=None),
        session(ok=False, cost_usd=None, error_kind="evidence-unverified", error_detail="first",
                transcript_missing=True, evidence_diagnostics=["d1"]),
        session(ok=False, error_kind="session-error", error_detail={"subtype": None}, evidence_diagnostics=["d2"]),
    ])  # fmt: skip
    assert total["cost_usd"] is None and total["recomputed_cost_usd"] is None
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


def test_run_session_sends_the_prompt_on_stdin_and_records_evidence(tmp_path):
    prompt_copy = tmp_path / "prompt.txt"
    argv = fake_cli(
        tmp_path,
        f"""
        import sys
        open({str(prompt_copy)!r}, "wb").write(sys.stdin.buffer.read())
        sys.stdout.buffer.write(open({str(SAMPLE)!r}, "rb").read())
    """,
    )
    output = io.StringIO()
    with SessionProgress("cell", output, [], heartbeat_s=60) as progress:
        record = run_session(
            argv, prompt="Fix the bug ✓", env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), timeout=30,
            expected_skill=None, transcript_dir=tmp_path / "transcripts", transcript_prefix="cell", secrets=[],
            prices=SONNET_4_PRICES, progress=progress,
        )  # fmt: skip
    assert prompt_copy.read_text() == "Fix the bug ✓"
    assert record["ok"] is True and record["output_tokens"] == 153
    assert record["transcript_artifact"]["path"] == f"transcripts/cell-{SAMPLE_SESSION}.jsonl"
    assert record["started_at"].endswith("Z") and record["started_at"] <= record["finished_at"]
    assert "finished · 3 turns · ok · $0.0149" in output.getvalue()


def test_run_session_overflowing_stdout_is_a_session_error(tmp_path):
    argv = fake_cli(
        tmp_path,
        """
        import json, sys
        line = json.dumps({"type": "system", "subtype": "noise", "pad": "p" * 65536}) + "\\n"
        for _ in range(130):
            sys.stdout.write(line)
        sys.stdout.write(json.dumps({"type": "result"}) + "\\n")
    """,
    )
    record = run_session(
        argv, prompt="p", env={"PATH": "/usr/bin:/bin"}, cwd=None, timeout=30, expected_skill="change-work",
        transcript_dir=tmp_path / "transcripts", transcript_prefix="cell", secrets=[], prices=None,
    )  # fmt: skip
    assert record["error_kind"] == "session-error"
    assert "exceeds" in record["error_detail"]["event_stream_error"]
    assert not (tmp_path / "transcripts").exists()


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


def test_progress_survives_a_closed_stream():
    output = io.StringIO()
    progress = SessionProgress("cell", output, [], heartbeat_s=0.02)
    with progress:
        output.close()
        progress.observe(encode([init_event()]))
        time.sleep(0.1)


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


FAKE_CLI = """#!{python}
import json, os, sys
prompt = sys.stdin.read()
env = {{k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC", "CLAUDE", "MCP"))}}
seen = {{"argv": sys.argv[1:], "prompt": prompt, "env": env}}
with open({seen!r}, "w") as handle:
    json.dump(seen, handle)
usage = {{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
by_model = {{"m": {{"inputTokens": 10, "outputTokens": 5, "cacheCreationInputTokens": 0, "cacheReadInputTokens": 0}}}}
for event in (
    {{"type": "system", "subtype": "init", "session_id": "sess-launch", "model": "m"}},
    {{"type": "result", "subtype": "success", "is_error": False, "duration_ms": 10, "num_turns": 1,
      "session_id": "sess-launch", "total_cost_usd": 0.000105, "usage": usage,
      "modelUsage": by_model}},
):
    print(json.dumps(event), flush=True)
"""


def launch_config(provider: str) -> dict:
    return {
        "model": {"provider": provider, "effort": None, "base_url": "http://127.0.0.1:9/api"},
        "agent": {
            "heartbeat_s": 60,
            "session_timeout_s": 60,
            "prices": {"usd_per_mtok": {"m": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}}},
        },
    }


@pytest.mark.parametrize("provider", ["scripted", "anthropic"])
def test_launch_session_runs_the_cli_with_the_prompt_on_stdin_and_records_it(tmp_path, provider):
    from skillbench.execution.sandbox import Sandbox
    from skillbench.execution.scripted_model import ScriptedModel
    from skillbench.execution.sessions import SCRIPTED_KEY, SessionSurface, launch_session

    seen_file = tmp_path / "seen.json"
    cli = tmp_path / "fake-claude"
    cli.write_text(FAKE_CLI.format(python=sys.executable, seen=str(seen_file)))
    cli.chmod(0o755)
    (tmp_path / "root" / "workspace").mkdir(parents=True)
    sandbox = Sandbox("none", tmp_path / "root" / "workspace", tmp_path / "root", claude_bin=cli)
    started: list[ScriptedModel] = []

    def scripted() -> ScriptedModel:
        started.append(ScriptedModel([], defaults={}))
        return started[-1]

    log = io.StringIO()
    api_key = None if provider == "scripted" else "sk-launch-secret-123456"
    try:
        record = launch_session(
            sandbox,
            SessionSurface(tools=["Read", "Bash"], disallowed_tools=["Skill"], extra_env={"MCP_TIMEOUT": "5"}),
            label="demo/launch",
            prompt=f"do the task {api_key}",
            model="m",
            config=launch_config(provider),
            api_key=api_key,
            scripted_model=scripted,
            transcript_dir=tmp_path / "run" / "transcripts",
            transcript_prefix="work",
            log=log,
        )
    finally:
        sandbox.close()
    seen = json.loads(seen_file.read_text())
    assert seen["prompt"] == f"do the task {api_key}" and all("do the task" not in arg for arg in seen["argv"])
    assert ["--tools", "Read,Bash"] == seen["argv"][seen["argv"].index("--tools") :][:2]
    assert "--disallowedTools" in seen["argv"] and seen["argv"][seen["argv"].index("--model") + 1] == "m"
    assert seen["env"]["CLAUDE_CODE_SHELL_PREFIX"] == sandbox.shell_prefix and seen["env"]["MCP_TIMEOUT"] == "5"
    if provider == "scripted":
        assert len(started) == 1 and seen["env"]["ANTHROPIC_BASE_URL"] == started[0].base_url
        assert seen["env"]["ANTHROPIC_API_KEY"] == SCRIPTED_KEY
    else:
        assert started == [] and seen["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/api"
        assert seen["env"]["ANTHROPIC_API_KEY"] == api_key
    assert record["ok"] is True and record["session_id"] == "sess-launch"
    assert record["recomputed_cost_usd"] == pytest.approx(record["cost_usd"], abs=1e-12)
    assert record["transcript_artifact"]["path"] == "transcripts/work-sess-launch.jsonl"
    assert (tmp_path / "run" / "transcripts" / "work-sess-launch.jsonl").is_file()
    assert "[demo/launch" in log.getvalue() and "sk-launch-secret" not in log.getvalue()
