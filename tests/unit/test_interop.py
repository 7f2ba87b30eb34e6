"""Results in other tools' formats: each CLI's recorded stream joined to its ledger requests (every step's tokens
the ledger's, side queries kept as steps of their own), a cell's ATIF trajectories and Harbor trial folder, and the
refusals that keep a changed file or someone else's folder safe."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import atif
import pytest
from rowfactory import make_row
from skillbench.base import artifacts
from skillbench.execution.streams import parse_event_stream
from skillbench.interop import harbor, inspect_log
from skillbench.interop.atif import output_tokens, trajectory
from skillbench.interop.harbor import ExportError, read_trial, write_cell_exports
from skillbench.interop.turns import join_ledger, stream_turns

FIXTURES = Path(__file__).parent / "fixtures"


def request(seq: int, output: int, *, calls: list[str | None], text: bool, **ids: str) -> dict[str, Any]:
    """A settled ledger entry of a generation request."""
    return {
        "seq": seq,
        "method": "POST",
        "path": "/v1/messages",
        "kind": "messages",
        "model": "m",
        "served_model": "m",
        "stream": True,
        "status": 200,
        "outcome": "ok",
        "refused": None,
        "failure": None,
        "request_id": ids.get("request_id"),
        "response_id": ids.get("response_id"),
        "tool_calls": calls,
        "text": text,
        "started_at": f"2026-12-01T00:00:0{seq}.000Z",
        "finished_at": f"2026-12-01T00:00:0{seq}.500Z",
        "duration_s": 0.5,
        "usage": {
            "input_tokens": 100,
            "output_tokens": output,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_creation_5m_input_tokens": None,
            "cache_creation_1h_input_tokens": None,
        },
        "cost_usd": output / 1000,
    }


def session(requests: list[dict[str, Any]], role: str = "work") -> dict[str, Any]:
    return {
        "role": role,
        "label": role,
        "wire": "anthropic",
        "open": False,
        "opened_at": "2026-12-01T00:00:00.000Z",
        "closed_at": "2026-12-01T00:00:09.000Z",
        "max_usd": None,
        "requests": requests,
        "totals": {
            "requests": len(requests),
            "output_tokens": sum(entry["usage"]["output_tokens"] for entry in requests),
            "cost_usd": round(sum(entry["cost_usd"] for entry in requests), 10),
        },
    }


def events(path: Path) -> list[dict[str, Any]]:
    return parse_event_stream(path.read_bytes())


def document(agent: str, events_: list[dict[str, Any]], ledger: dict[str, Any]) -> dict[str, Any]:
    reading = stream_turns(agent, events_)
    built = trajectory(
        reading=reading,
        steps=join_ledger(reading, ledger),
        ledger_session=ledger,
        agent=agent,
        cli_version="1.0.0",
        model="m",
        session_id="s",
        skills={"offered": [], "expected": None, "invoked": None},
        extra={},
    )
    atif.Trajectory.model_validate(built)
    artifacts.validate(built, "atif-trajectory")
    return built


def shape(built: dict[str, Any]) -> list[tuple[str, list[str], int | None]]:
    """Each agent step's text, tool names and the ledger request it carries."""
    return [
        (
            step["message"][:12],
            [call["function_name"] for call in step.get("tool_calls") or []],
            (step.get("metrics") or {}).get("extra", {}).get("request_seq"),
        )
        for step in built["steps"]
        if step["source"] == "agent"
    ]


def test_claude_code_replies_split_over_several_events_are_one_step_with_the_ledgers_tokens() -> None:
    # The stream carries placeholder usage per event; the ledger's side query (a title) is no turn of the stream.
    ledger = session(
        [
            request(1, 300, calls=["toolu_a"], text=True, response_id="msg_mock_00_6c782fba"),
            request(2, 7, calls=[], text=True),
            request(3, 200, calls=["toolu_b"], text=False, request_id="req_mock_1fceeb342677"),
            request(4, 50, calls=[], text=True, response_id="msg_mock_02_e946d4ab"),
        ]
    )
    built = document("claude-code", events(FIXTURES / "streams" / "sample-stream.jsonl"), ledger)
    steps = shape(built)
    assert [seq for *_rest, seq in steps] == [1, 2, 3, 4]
    assert steps[0][1] and steps[1] == ("", [], 2)  # the side query: a step of its own, with its tokens
    assert output_tokens(built) == 557 == ledger["totals"]["output_tokens"]
    assert built["final_metrics"]["total_cost_usd"] == ledger["totals"]["cost_usd"]


def test_codex_items_are_cut_into_replies_by_what_each_response_held() -> None:
    stream = events(FIXTURES / "agents" / "codex" / "skill-and-tools.jsonl")
    # Reply 1: text and one command; 2: two commands; 3: two patches; 4: two commands; 5: the closing text.
    ledger = session(
        [
            request(1, 10, calls=["c1"], text=True),
            request(2, 20, calls=["c2", "c3"], text=False),
            request(3, 30, calls=["c4", "c5"], text=False),
            request(4, 40, calls=["c6", "c7"], text=False),
            request(5, 50, calls=[], text=True),
        ]
    )
    steps = shape(document("codex", stream, ledger))
    assert steps == [
        ("Looking firs", ["exec_command"], 1),
        ("", ["exec_command", "exec_command"], 2),
        ("", ["apply_patch", "apply_patch"], 3),
        ("", ["exec_command", "exec_command"], 4),
        ("Finished.", [], 5),
    ]


def test_copilot_and_opencode_turns_find_their_requests_by_the_apis_tool_call_ids_past_a_side_query() -> None:
    copilot = events(FIXTURES / "agents" / "copilot" / "skill-and-tools.jsonl")
    calls = [
        [call["toolCallId"] for call in event["data"].get("toolRequests") or []]
        for event in copilot
        if event["type"] == "assistant.message"
    ]
    assert calls[-1] == []  # the closing reply: text only
    # A side query (no tools, text) the CLI sent after the first reply: a position-only join would give it away.
    requests = [request(1, 11, calls=list(calls[0]), text=True), request(2, 3, calls=[], text=True)]
    requests += [request(index + 3, 10, calls=list(ids), text=not ids) for index, ids in enumerate(calls[1:])]
    built = document("copilot", copilot, session(requests))
    steps = shape(built)
    assert [seq for *_rest, seq in steps] == list(range(1, len(requests) + 1))
    assert steps[1] == ("", [], 2)
    assert built["steps"][0]["source"] == "user" and built["steps"][0]["message"] == "Do it\n"
    assert output_tokens(built) == sum(entry["usage"]["output_tokens"] for entry in requests)
    opencode = events(FIXTURES / "agents" / "opencode" / "skill-and-tools.jsonl")
    reading = stream_turns("opencode", opencode)
    ids = [[call.call_id for call in turn.calls] for turn in reading.turns]
    ledger = session([request(index + 1, 5, calls=list(found), text=False) for index, found in enumerate(ids)])
    assert [seq for *_rest, seq in shape(document("opencode", opencode, ledger))] == list(range(1, len(ids) + 1))


def test_gemini_text_deltas_are_one_text_and_its_calls_keep_their_results() -> None:
    stream = events(FIXTURES / "agents" / "gemini" / "skill-and-tools.jsonl")
    ledger = session(
        [
            request(1, 10, calls=[None], text=True),
            request(2, 10, calls=[None], text=False),
            request(3, 10, calls=[None, None], text=False),
            request(4, 10, calls=[None], text=False),
            request(5, 10, calls=[None, None], text=False),
            request(6, 10, calls=[], text=True),
        ]
    )
    built = document("gemini", stream, ledger)
    assert [len(step.get("tool_calls") or []) for step in built["steps"][1:]] == [1, 1, 2, 1, 2, 0]
    results = built["steps"][3]["observation"]["results"]
    assert [result["content"] for result in results] == ["", "hello"]
    assert built["steps"][2]["observation"]["results"][0]["extra"] == {"is_error": True}


def cell(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A finished single-session Claude Code cell: its transcript, record and ledger."""
    run_dir = tmp_path / "results" / "exp" / "cells" / "t1" / "arm_a" / "run0"
    (run_dir / "transcripts").mkdir(parents=True)
    transcript = run_dir / "transcripts" / "work-918b6f71.jsonl"
    shutil.copy(FIXTURES / "streams" / "sample-stream.jsonl", transcript)
    digest = hashlib.sha256(transcript.read_bytes()).hexdigest()
    row = make_row(
        "t1",
        "arm_a",
        model="m",
        cost_usd=0.557,
        input_tokens=300,
        output_tokens=557,
        cache_read_input_tokens=30,
        offered_skills=["demo"],
        cost_check={"price_table": "t", "ledger_usd": 0.557, "cli_usd": None, "agrees": None, "difference_pct": None},
        transcript_artifacts=[
            {
                "path": "transcripts/work-918b6f71.jsonl",
                "sha256": digest,
                "bytes": transcript.stat().st_size,
                "source": "parent-captured-stream-json",
            }
        ],
    )
    timing = {
        "started_at": "2026-12-01T00:00:00Z",
        "finished_at": "2026-12-01T00:00:10Z",
        "sessions": [{"role": "work", "started_at": "2026-12-01T00:00:01Z", "finished_at": "2026-12-01T00:00:09Z"}],
    }
    ledger = {
        "sessions": [
            session(
                [
                    request(1, 300, calls=["toolu_a"], text=True, response_id="msg_mock_00_6c782fba"),
                    request(2, 207, calls=["toolu_b"], text=False, response_id="msg_mock_01_2fd1d907"),
                    request(3, 50, calls=[], text=True, response_id="msg_mock_02_e946d4ab"),
                ]
            )
        ]
    }
    return run_dir, {"row": row, "timing": timing}, ledger


def test_a_cell_becomes_atif_beside_its_transcript_and_a_harbor_trial_with_its_rows_reward(tmp_path: Path) -> None:
    run_dir, record, ledger = cell(tmp_path)
    trial = write_cell_exports(run_dir, record, ledger, experiment="exp", expected_skills=["demo"])
    beside = json.loads((run_dir / "transcripts" / "work-918b6f71.atif.json").read_text())
    assert output_tokens(beside) == 557
    result, (inner,) = read_trial(trial)
    assert inner == beside
    assert result["verifier_result"]["rewards"] == {"reward": 1.0, "verify": 1.0, "oracle": 1.0, "skill_used": 1.0}
    assert result["agent_result"]["cost_usd"] == 0.557 and result["agent_result"]["n_input_tokens"] == 330
    assert (trial / "verifier" / "reward.txt").read_text() == "1\n"
    assert sorted(path.name for path in trial.iterdir()) == ["agent", "config.json", "result.json", "verifier"]


def test_a_changed_transcript_or_trajectory_is_refused_naming_the_file(tmp_path: Path) -> None:
    run_dir, record, ledger = cell(tmp_path)
    trial = write_cell_exports(run_dir, record, ledger, experiment="exp", expected_skills=[])
    (trial / "agent" / "trajectory.json").write_text((trial / "agent" / "trajectory.json").read_text() + " ")
    with pytest.raises(ExportError, match=r"agent/trajectory\.json: its SHA-256 does not match"):
        read_trial(trial)
    with (run_dir / "transcripts" / "work-918b6f71.jsonl").open("a") as stream:
        stream.write('{"type": "system", "subtype": "note"}\n')
    with pytest.raises(ExportError, match=r"work-918b6f71\.jsonl: its SHA-256 does not match"):
        write_cell_exports(run_dir, record, ledger, experiment="exp", expected_skills=[])
    assert (trial / "result.json").exists()  # the trial folder that was there stays whole


def exported_results(tmp_path: Path) -> Path:
    run_dir, record, ledger = cell(tmp_path)
    write_cell_exports(run_dir, record, ledger, experiment="exp", expected_skills=[])
    root = tmp_path / "results" / "exp"
    (root / "sweep").mkdir()
    (root / "sweep" / "results.jsonl").write_text(json.dumps(record["row"]) + "\n")
    return root


def test_export_refuses_a_folder_holding_other_files_before_writing_anything(tmp_path: Path) -> None:
    root = exported_results(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="notes.txt"):
        inspect_log.export_inspect(root, out)
    assert [path.name for path in out.iterdir()] == ["notes.txt"]
    # A folder holding only an earlier export's files is written again.
    again = tmp_path / "again"
    first = inspect_log.export_inspect(root, again)
    assert [path.name for path in inspect_log.export_inspect(root, again)] == [path.name for path in first]


def test_export_without_the_inspect_extra_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    with pytest.raises(ExportError) as refused:
        inspect_log.export_inspect(Path("results/none"))
    assert (
        str(refused.value) == "skillbench export --inspect needs the inspect extra: pip install 'skillbench[inspect]'"
    )
    assert harbor.TRIAL_RESULT == "result.json"


def test_a_session_errors_structured_detail_is_the_trials_exception_message_as_text() -> None:
    """A session error's detail is a mapping on the row (stdout tail, process state, reasons); Harbor's exception
    message is a string, so it is that mapping as JSON, and the trial result stays a valid document."""
    from rowfactory import make_row
    from skillbench.base.artifacts import validate
    from skillbench.interop import harbor

    detail = {"returncode": 1, "process_state": "failed", "reasons": ["result is_error"]}
    row = make_row("t", "workflow", 0, resolved=False, error_kind="session-error", error_detail=detail)
    timing = {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:10Z", "sessions": []}
    result = harbor.trial_result({"row": row, "timing": timing}, experiment="x", trajectories=[])
    message = result["exception_info"]["exception_message"]
    assert isinstance(message, str) and '"reasons": ["result is_error"]' in message
    validate(result, "harbor-trial-result")
