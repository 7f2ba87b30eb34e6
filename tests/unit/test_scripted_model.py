"""Tests for skillbench.execution.scripted_model: the HTTP contract, step choice, and real Claude Code CLI sessions.

The real-CLI tests never skip: without tools/node_modules/.bin/claude they fail and say to run
`make setup`. The suite check plays every role of every demo task through the real CLI and checks
the designed outcomes with the task's verify command and hidden oracle.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitenv import GIT_ENV
from settingsfactory import job_settings
from skillbench.base.artifacts import ArtifactError
from skillbench.execution.scripted_model import (
    ScriptedModel,
    conversation_text,
    load_model_script,
    resolve_variation,
    session_steps,
)

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "tools" / "node_modules" / ".bin" / "claude"
SUITE = REPO / "tasks" / "demo"
SKILLS = REPO / ".claude" / "skills"
MODEL = "claude-sonnet-4-20250514"
TOOLS = "Read,Edit,Write,Bash,Skill"
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
DEFAULTS = {
    "usage": {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 7},
    "final_text": "All finished.",
}
# The tools a request offers (Claude Code's names): a step may only call an offered tool.
OFFERED = ("Read", "Edit", "Write", "Bash", "Skill", "Agent")
TOOLS_FIELD = [{"name": name, "description": "run", "input_schema": {"type": "object"}} for name in OFFERED]
CHECK_PATH = "/usr/local/bin:/usr/bin:/bin"


# ---------------------------------------------------------------------------------------------
# HTTP helpers


def post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"content-type": "application/json"})
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def messages_body(assistant_turns: int = 0, *, stream: bool = False, tools: bool = True, extra_text: str = "") -> dict:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "do it " + extra_text}]}]
    for turn in range(assistant_turns):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}", "name": "Bash"}]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "x"}]}
        )
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 100, "system": "You are a test.", "messages": messages}
    if tools:
        body["tools"] = TOOLS_FIELD
    if stream:
        body["stream"] = True
    return body


def parse_sse(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in payload.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def reply_json(url: str, body: dict, headers: dict[str, str] | None = None) -> dict[str, Any]:
    status, _, payload = post(url + "/v1/messages?beta=true", body, headers)
    assert status == 200, payload
    return json.loads(payload)


# ---------------------------------------------------------------------------------------------
# Server-level tests


def test_json_reply_shape_and_tool_ids():
    steps = [{"text": "hi", "tools": [{"name": "Bash", "input": {"command": "ls"}}], "usage": {"output_tokens": 33}}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        message = reply_json(model.base_url, messages_body())
    assert message["type"] == "message" and message["role"] == "assistant" and message["model"] == MODEL
    assert message["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "toolu_0_0", "name": "Bash", "input": {"command": "ls"}},
    ]
    assert message["stop_reason"] == "tool_use" and message["stop_sequence"] is None
    assert message["usage"] == {**DEFAULTS["usage"], "output_tokens": 33}


def test_sse_sequence_carries_full_usage_in_message_delta():
    steps = [{"text": "a", "tools": [{"name": "Read", "input": {"file_path": "/x"}}], "usage": {"input_tokens": 9}}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        status, headers, payload = post(model.base_url + "/v1/messages?beta=true", messages_body(stream=True))
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert int(headers["Content-Length"]) == len(payload)
    events = parse_sse(payload)
    names = [name for name, _ in events]
    assert names == ["message_start"] + ["content_block_start", "content_block_delta", "content_block_stop"] * 2 + [
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"] == {**DEFAULTS["usage"], "input_tokens": 9, "output_tokens": 1}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "a"}
    assert events[4][1]["content_block"] == {"type": "tool_use", "id": "toolu_0_0", "name": "Read", "input": {}}
    assert json.loads(events[5][1]["delta"]["partial_json"]) == {"file_path": "/x"}
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {**DEFAULTS["usage"], "input_tokens": 9}


def test_head_count_tokens_and_unknown_routes():
    with ScriptedModel([], defaults=DEFAULTS) as model:
        host = model.base_url.removeprefix("http://")
        connection = http.client.HTTPConnection(host, timeout=10)
        connection.request("HEAD", "/")
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        connection.close()
        status, _, payload = post(model.base_url + "/v1/messages/count_tokens?beta=true", {"messages": []})
        assert (status, json.loads(payload)) == (200, {"input_tokens": 1000})
        for path in ("/v1/models", "/v1/complete"):
            status, _, payload = post(model.base_url + path, {"x": 1})
            body = json.loads(payload)
            assert status == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error"
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(model.base_url + "/v1/messages", timeout=10)
        assert caught.value.code == 404
        status, _, payload = post(model.base_url + "/v1/messages", b"not json")
        assert status == 400 and json.loads(payload)["error"]["type"] == "invalid_request_error"


def test_keep_alive_connection_serves_several_requests():
    with ScriptedModel([{"text": "one"}], defaults=DEFAULTS) as model:
        connection = http.client.HTTPConnection(model.base_url.removeprefix("http://"), timeout=10)
        connection.request("HEAD", "/")
        first = connection.getresponse()
        first.read()
        for stream in (True, False, True):
            connection.request("POST", "/v1/messages?beta=true", body=json.dumps(messages_body(stream=stream)))
            response = connection.getresponse()
            payload = response.read()
            assert response.status == 200 and not response.will_close
            text = parse_sse(payload)[2][1]["delta"]["text"] if stream else json.loads(payload)["content"][0]["text"]
            assert text == "one"
        connection.close()


def test_step_is_chosen_by_assistant_message_count_not_request_order():
    steps = [{"text": "zero"}, {"text": "one", "usage": {"output_tokens": 77}}, {"text": "two"}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        texts = [reply_json(model.base_url, messages_body(k))["content"][0]["text"] for k in (2, 0, 1, 1, 0)]
        assert texts == ["two", "zero", "one", "one", "zero"]
        final = reply_json(model.base_url, messages_body(3))
        assert final["content"] == [{"type": "text", "text": "All finished."}]
        assert final["stop_reason"] == "end_turn" and final["usage"] == DEFAULTS["usage"]
        assert reply_json(model.base_url, messages_body(1))["usage"]["output_tokens"] == 77
        kinds = [(record["kind"], record["step"]) for record in model.requests]
    assert kinds == [("step", 2), ("step", 0), ("step", 1), ("step", 1), ("step", 0), ("final", None), ("step", 1)]


def test_when_and_unless_filter_steps_on_conversation_text():
    steps = [
        {"text": "start"},
        {"text": "keyed", "when": ["Verify   Command", "once"]},
        {"text": "fallback", "unless": "verify command"},
        {"text": "end"},
    ]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        plain = messages_body(1)
        assert reply_json(model.base_url, plain)["content"][0]["text"] == "fallback"
        keyed = messages_body(1)
        keyed["messages"][2]["content"].append({"type": "text", "text": "Run the verify\ncommand ONCE."})
        assert reply_json(model.base_url, keyed)["content"][0]["text"] == "keyed"
        longer = keyed | {"messages": keyed["messages"] + messages_body(1)["messages"][1:]}
        assert reply_json(model.base_url, longer)["content"][0]["text"] == "end"
        in_tool_result = messages_body(1)
        in_tool_result["messages"][2]["content"][0]["content"] = [{"type": "text", "text": "verify command once"}]
        assert reply_json(model.base_url, in_tool_result)["content"][0]["text"] == "keyed"
        only_partial = messages_body(1, extra_text="the verify command")
        assert reply_json(model.base_url, only_partial)["content"][0]["text"] == "end"


def test_conversation_text_covers_system_blocks_and_tool_results():
    body = {
        "system": [{"type": "text", "text": "SYS"}],
        "messages": [
            {"role": "user", "content": "plain string"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "X", "input": {"q": "HIDDEN"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "RESULT"}]},
        ],
    }
    text = conversation_text(body)
    assert all(part in text for part in ("SYS", "plain string", "RESULT")) and "HIDDEN" not in text


def test_fail_times_then_success_and_permanent_failure(tmp_path):
    steps = [
        {"text": "after outage", "fail": {"status": 500, "times": 2, "message": "overloaded"}},
        {"text": "never", "fail": {"status": 400}},
    ]
    log = tmp_path / "requests.jsonl"
    with ScriptedModel(steps, defaults=DEFAULTS, request_log=log) as model:
        url = model.base_url + "/v1/messages?beta=true"
        first, second = post(url, messages_body()), post(url, messages_body(stream=True))
        for status, _, payload in (first, second):
            assert status == 500
            assert json.loads(payload) == {"type": "error", "error": {"type": "api_error", "message": "overloaded"}}
        assert reply_json(model.base_url, messages_body())["content"][0]["text"] == "after outage"
        for _ in range(3):
            status, _, payload = post(url, messages_body(1))
            assert status == 400 and json.loads(payload)["error"]["type"] == "invalid_request_error"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["status"], r["step"], r["stream"]) for r in records] == [
        (500, 0, False),
        (500, 0, True),
        (200, 0, False),
        (400, 1, False),
        (400, 1, False),
        (400, 1, False),
    ]


def test_variables_and_api_key_are_substituted_and_never_logged(tmp_path):
    steps = [
        {
            "text": "key={{api_key}} in {{ workspace }}",
            "tools": [{"name": "Write", "input": {"file_path": "{{workspace}}/a.txt", "content": ["{{api_key}}", 3]}}],
        }
    ]
    log = tmp_path / "log.jsonl"
    secret = "sk-canary-123456"
    with ScriptedModel(steps, defaults=DEFAULTS, variables={"workspace": "/ws"}, request_log=log) as model:
        message = reply_json(model.base_url, messages_body(), {"x-api-key": secret})
    assert message["content"][0]["text"] == f"key={secret} in /ws"
    assert message["content"][1]["input"] == {"file_path": "/ws/a.txt", "content": [secret, 3]}
    assert secret not in log.read_text() and "x-api-key" not in log.read_text()
    with pytest.raises(ValueError, match="undefined variables: workspace"):
        ScriptedModel(steps, defaults=DEFAULTS)


def test_a_bearer_token_is_the_key_when_no_x_api_key_is_sent():
    """A CLI given an auth token (not an API key) sends `Authorization: Bearer`; `{{api_key}}` is that token."""
    with ScriptedModel([{"text": "key={{api_key}}"}], defaults=DEFAULTS) as model:
        bearer = reply_json(model.base_url, messages_body(), {"Authorization": "Bearer  tok-1 "})
        both = reply_json(model.base_url, messages_body(), {"x-api-key": "k-2", "Authorization": "Bearer tok-3"})
        neither = reply_json(model.base_url, messages_body(), {"Authorization": "Basic dXNlcg=="})
    assert [m["content"][0]["text"] for m in (bearer, both, neither)] == ["key=tok-1", "key=k-2", "key="]


def test_side_query_gets_ok_and_does_not_touch_the_script():
    steps = [{"text": "scripted", "fail": {"status": 529, "times": 1}}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        side = reply_json(model.base_url, messages_body(tools=False))
        assert side["content"] == [{"type": "text", "text": "ok"}] and side["stop_reason"] == "end_turn"
        assert side["usage"]["input_tokens"] < 20 and side["usage"]["output_tokens"] <= 2
        status, _, payload = post(model.base_url + "/v1/messages", messages_body())
        assert status == 529 and json.loads(payload)["error"]["type"] == "overloaded_error"
        assert reply_json(model.base_url, messages_body())["content"][0]["text"] == "scripted"
        assert [r["kind"] for r in model.requests] == ["side", "fail", "step"]


def test_subagent_requests_end_at_once_and_chunked_bodies_are_read():
    with ScriptedModel(
        [{"text": "main", "tools": [{"name": "Agent", "input": {"prompt": "x"}}]}], defaults=DEFAULTS
    ) as model:
        sub = reply_json(model.base_url, messages_body(), {"x-claude-code-agent-id": "agent-1"})
        assert sub["content"] == [{"type": "text", "text": "All finished."}] and sub["stop_reason"] == "end_turn"
        connection = http.client.HTTPConnection(model.base_url.removeprefix("http://"), timeout=10)
        chunks = iter([json.dumps(messages_body())[:40].encode(), json.dumps(messages_body())[40:].encode()])
        connection.request("POST", "/v1/messages", body=chunks, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["content"][0]["text"] == "main"
        connection.close()
        assert [r["kind"] for r in model.requests] == ["subagent", "step"]


def test_concurrent_requests_are_answered_consistently():
    steps = [{"text": f"step {i}", "tools": [{"name": "Bash", "input": {"command": str(i)}}]} for i in range(6)]
    steps[3]["fail"] = {"status": 503, "times": 5}
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        url = model.base_url

        def one(index: int) -> tuple[int, int, str]:
            turn = index % 6
            status, _, payload = post(url + "/v1/messages", messages_body(turn, stream=index % 2 == 0))
            if status != 200:
                return turn, status, ""
            if index % 2 == 0:
                return turn, status, parse_sse(payload)[2][1]["delta"]["text"]
            return turn, status, json.loads(payload)["content"][0]["text"]

        with ThreadPoolExecutor(max_workers=12) as pool:
            results = list(pool.map(one, range(60)))
    failures = [r for r in results if r[1] != 200]
    assert len(failures) == 5 and all(turn == 3 and status == 503 for turn, status, _ in failures)
    assert all(text == f"step {turn}" for turn, status, text in results if status == 200)


def test_stop_closes_the_port_and_the_thread():
    model = ScriptedModel([{"text": "x"}], defaults=DEFAULTS)
    with model:
        url = model.base_url
        connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
        connection.request("HEAD", "/")
        connection.getresponse().read()  # leaves an idle keep-alive connection open
    assert not any(thread.name == "scripted-model" for thread in threading.enumerate())
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/", timeout=2)
    connection.close()


def test_load_model_script_names_file_and_field(tmp_path):
    good = {"schema": "model-script/v1", "defaults": DEFAULTS, "tasks": {"t1": {"work": [{"text": "x"}]}}}
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(good))
    script = load_model_script(path)
    assert session_steps(script, "t1", "work") == [{"text": "x"}]
    with pytest.raises(ArtifactError, match="no steps for role 'plan'"):
        session_steps(script, "t1", "plan")
    with pytest.raises(ArtifactError, match="no entry for task 'nope'"):
        session_steps(script, "nope", "work")
    bad = json.loads(json.dumps(good))
    bad["tasks"]["t1"]["work"][0]["fail"] = {"status": 200}
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ArtifactError, match=r"script\.yaml.*\$\.tasks\.t1\.work\[0\]\.fail\.status"):
        load_model_script(path)
    path.write_text("schema: [unclosed")
    with pytest.raises(ArtifactError, match="script.yaml: model script is not valid YAML: line 1"):
        load_model_script(path)


def test_a_cell_loads_its_own_task_of_the_script_and_nothing_else(tmp_path):
    script = {
        "schema": "model-script/v1",
        "defaults": DEFAULTS,
        "tasks": {"t1": {"work": [{"text": "x"}]}, "t2": {"work": [{"text": "y"}]}},
        "proposer": [{"text": "p"}],
    }
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    mine = load_model_script(path, task="t1")
    assert mine == {"schema": "model-script/v1", "defaults": DEFAULTS, "tasks": {"t1": {"work": [{"text": "x"}]}}}
    with pytest.raises(ArtifactError, match="no entry for task 't3'"):
        session_steps(load_model_script(path, task="t3"), "t3", "work")
    # The cell's own entry is still checked against the schema, naming the file and the field.
    script["tasks"]["t1"]["work"][0]["fail"] = {"status": 200}
    path.write_text(yaml.safe_dump(script))
    with pytest.raises(ArtifactError, match=r"script\.yaml.*\$\.tasks\.t1\.work\[0\]\.fail\.status"):
        load_model_script(path, task="t1")
    assert load_model_script(path, task="t2")["tasks"] == {"t2": {"work": [{"text": "y"}]}}


def test_starting_and_stopping_leaves_no_thread_or_descriptor_behind():
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        with ScriptedModel([{"text": "x"}], defaults=DEFAULTS) as model:
            connection = http.client.HTTPConnection(model.base_url.removeprefix("http://"), timeout=10)
            connection.request("HEAD", "/")
            connection.getresponse().read()
        connection.close()
    assert not any(thread.name == "scripted-model" for thread in threading.enumerate())
    # A hung-up connection's handler thread closes its socket as it ends, just after the stop returns.
    deadline = time.monotonic() + 60
    while len(os.listdir("/proc/self/fd")) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) == before


# ---------------------------------------------------------------------------------------------
# Per-run variation

VARIED = [
    {"text": "start", "usage": {"output_tokens": 10}},
    {"chance": 0.3, "text": "extra look", "usage": {"output_tokens": 20}},
    {
        "when": "go",
        "choose": [
            {"weight": 3, "steps": [{"text": "straight fix", "usage": {"output_tokens": 30}}]},
            {
                "weight": 1,
                "steps": [
                    {"text": "failed attempt", "unless": "stop", "usage": {"output_tokens": 40}},
                    {"text": "retry", "usage": {"output_tokens": 50}},
                ],
            },
        ],
    },
    {"text": "report"},
]
BASE_USAGE = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 7}


def texts(steps: list[dict]) -> list[str]:
    return [step["text"] for step in steps]


def vary(key: str | None, jitter: float = 0.0) -> list[dict]:
    return resolve_variation(VARIED, variation_key=key, defaults_usage=BASE_USAGE, jitter=jitter)


def test_without_a_variation_key_the_nominal_run_plays():
    nominal = vary(None, jitter=0.5)
    assert texts(nominal) == ["start", "straight fix", "report"]
    assert nominal[1] == {"text": "straight fix", "usage": {"output_tokens": 30}, "when": ["go"]}
    assert "usage" not in nominal[2]  # no jitter without a key: the defaults apply as before


def test_a_variation_key_always_draws_the_same_run():
    for key in ("t/workflow/run0/work", "t/workflow/run1/work", "t/candidate_workflow/run0/work"):
        assert vary(key, jitter=0.2) == vary(key, jitter=0.2)
    runs = {tuple(texts(vary(f"t/workflow/run{run}/work"))) for run in range(20)}
    assert len(runs) > 1  # runs differ from one another


def test_chance_and_weights_set_how_often_a_variant_plays():
    keys = [f"task/arm/run{run}/role" for run in range(2000)]
    played = [texts(vary(key)) for key in keys]
    extra = sum("extra look" in run for run in played) / len(keys)
    retried = sum("retry" in run for run in played) / len(keys)
    assert 0.26 < extra < 0.34  # chance 0.3
    assert 0.21 < retried < 0.29  # weight 1 of 4
    both = [run for run in played if "failed attempt" in run]
    assert all(run[-3:] == ["failed attempt", "retry", "report"] for run in both)


def test_a_choice_passes_its_conditions_to_the_steps_it_plays():
    retried = next(vary(f"k{n}") for n in range(100) if "retry" in texts(vary(f"k{n}")))
    failed = next(step for step in retried if step["text"] == "failed attempt")
    assert failed["when"] == ["go"] and failed["unless"] == ["stop"]
    assert next(step for step in retried if step["text"] == "retry")["when"] == ["go"]


def test_usage_jitter_scales_every_token_count_reproducibly():
    first = vary("t/a/run0/r", jitter=0.2)
    assert first == vary("t/a/run0/r", jitter=0.2)
    report = first[-1]["usage"]  # a step without usage gets the jittered defaults
    assert set(report) == set(BASE_USAGE) and report != BASE_USAGE
    factors = [vary(f"t/a/run{run}/r", jitter=0.2)[0]["usage"]["output_tokens"] / 10 for run in range(400)]
    logs = [math.log(max(factor, 0.05)) for factor in factors]
    mean = sum(logs) / len(logs)
    spread = (sum((value - mean) ** 2 for value in logs) / (len(logs) - 1)) ** 0.5
    assert abs(mean) < 0.05 and 0.12 < spread < 0.3  # rounding to whole tokens blurs σ = 0.2 a little
    assert vary("t/a/run0/r", jitter=0.0)[0]["usage"] == {"output_tokens": 10}


def test_the_served_session_plays_the_drawn_run():
    key = next(f"k{n}" for n in range(100) if "retry" in texts(vary(f"k{n}")))
    with ScriptedModel(VARIED, defaults=DEFAULTS, variation_key=key) as model:
        replies = [
            reply_json(model.base_url, messages_body(turn, extra_text="go"))["content"][0]["text"]
            for turn in range(len(model.steps))
        ]
    assert replies == texts(vary(key))
    with ScriptedModel(VARIED, defaults=DEFAULTS) as model:
        assert texts(model.steps) == ["start", "straight fix", "report"]


def test_the_schema_accepts_variation_and_rejects_a_choice_with_its_own_text(tmp_path):
    script = {
        "schema": "model-script/v1",
        "defaults": {**DEFAULTS, "usage_jitter": 0.1},
        "tasks": {"t1": {"work": VARIED}},
    }
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    assert session_steps(load_model_script(path), "t1", "work") == VARIED
    script["tasks"]["t1"]["work"] = [{"text": "both", "choose": [{"weight": 1, "steps": []}]}]
    path.write_text(yaml.safe_dump(script))
    with pytest.raises(ArtifactError, match=r"\$\.tasks\.t1\.work\[0\]"):
        load_model_script(path)
    script["tasks"]["t1"]["work"] = [{"text": "x", "chance": 1.5}]
    path.write_text(yaml.safe_dump(script))
    with pytest.raises(ArtifactError, match="chance"):
        load_model_script(path)
    probe = [{"tools": [{"name": "Edit", "input": {}, "unoffered": True}]}]
    script["tasks"]["t1"]["work"] = probe
    path.write_text(yaml.safe_dump(script))
    assert session_steps(load_model_script(path), "t1", "work") == probe
    script["tasks"]["t1"]["work"] = [{"tools": [{"name": "Edit", "input": {}, "unoffered": False}]}]
    path.write_text(yaml.safe_dump(script))
    with pytest.raises(ArtifactError, match="unoffered"):
        load_model_script(path)


def test_demo_runs_differ_from_one_another_and_replay_identically():
    script = load_model_script(SUITE / "model-script.yaml")
    jitter = script["defaults"]["usage_jitter"]
    assert jitter > 0
    base = {field: 0 for field in USAGE_FIELDS}
    for task in ("money-thousands", "bulk-discount-threshold", "sku-normalization"):
        for arm, role in (("workflow", "work"), ("workflow_direct", "direct"), ("baseline", "baseline")):
            steps = session_steps(script, task, role)
            played = [
                resolve_variation(
                    steps, variation_key=f"{task}/{arm}/run{run}/{role}", defaults_usage=base, jitter=jitter
                )
                for run in range(6)
            ]
            assert len({json.dumps(run, sort_keys=True) for run in played}) == 6, f"{task}/{role}"
            assert {len(run) for run in played} != {len(steps)} or len({len(run) for run in played}) > 1
    # The baseline's money-thousands fix is sometimes wrong, never in the nominal run.
    steps = session_steps(script, "money-thousands", "baseline")
    wrong = '    return f"${cents // 100:,}.{cents % 100:02d}"'

    def ships_wrong_fix(run: list[dict]) -> bool:
        return any(tool["input"].get("new_string") == wrong for step in run for tool in step.get("tools", []))

    assert not ships_wrong_fix(resolve_variation(steps, variation_key=None, defaults_usage=base))
    runs = [
        resolve_variation(steps, variation_key=f"money-thousands/baseline/run{run}/baseline", defaults_usage=base)
        for run in range(200)
    ]
    assert 0.08 < sum(map(ships_wrong_fix, runs)) / len(runs) < 0.22


def test_cli_serves_a_session_and_prints_the_base_url(tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"schema": "model-script/v1", "defaults": DEFAULTS, "tasks": {"t": {"r": []}}}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    command = [
        sys.executable,
        "-m",
        "skillbench.execution.scripted_model",
        str(script),
        "t",
        "r",
        "--var",
        "workspace=/w",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        assert reply_json(base_url, messages_body())["content"][0]["text"] == "All finished."
    finally:
        process.terminate()
        process.wait(timeout=10)
    missing = subprocess.run([*command[:4], "t", "nope"], capture_output=True, text=True, env=env, timeout=30)
    assert missing.returncode == 2 and "no steps for role 'nope'" in missing.stderr


# ---------------------------------------------------------------------------------------------
# Other wires: a Responses (Codex) and a Gemini (Gemini CLI) conversation

# The script is written in Claude Code's tools; the sessions below map them onto their CLI's.
WIRE_STEPS = [
    {
        "text": "Reading the notes.",
        "tools": [{"name": "Bash", "input": {"command": "cat {{workspace}}/notes.txt", "description": "read"}}],
        "usage": {"input_tokens": 900, "output_tokens": 40, "cache_read_input_tokens": 2000},
    },
    {"when": "alpha-marker", "text": "Alpha it is.", "tools": [{"name": "Bash", "input": {"command": "echo alpha"}}]},
    {"unless": "alpha-marker", "text": "Not alpha.", "tools": [{"name": "Bash", "input": {"command": "echo other"}}]},
    {"tools": [{"name": "Skill", "input": {"skill": "change-plan"}}]},
]


def codex_tools(name: str, tool_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("exec_command", {"cmd": tool_input["command"]}) if name == "Bash" else (name, tool_input)


def gemini_tools(name: str, tool_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if name == "Bash":
        return "run_shell_command", {"command": tool_input["command"], "description": tool_input.get("description", "")}
    return name, tool_input


def sse_data(payload: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in payload.decode().splitlines() if line.startswith("data:")]


def codex_request(history: list[dict[str, Any]], *, stream: bool = True) -> dict[str, Any]:
    """What Codex 0.171 sends: developer and user messages, then the turns so far; its shell tool among others."""
    return {
        "model": "gpt-5-codex",
        "stream": stream,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Follow the notes."}]},
            *history,
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "strict": False, "parameters": {"type": "object"}},
            {"type": "function", "name": "view_image", "strict": False, "parameters": {"type": "object"}},
            {"type": "web_search", "external_web_access": False},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": False,
    }


def codex_turn(url: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One Codex turn: the output items of the streamed reply (what Codex adds to its history)."""
    status, headers, payload = post(url + "/v1/responses", codex_request(history), {"Authorization": "Bearer sbx-t"})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream"), payload
    events = sse_data(payload)
    assert events[-1]["type"] == "response.completed"
    items = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert events[-1]["response"]["output"] == items
    return items


def test_a_responses_conversation_calls_mapped_tools_and_branches_on_their_results(tmp_path):
    with ScriptedModel(
        WIRE_STEPS,
        defaults=DEFAULTS,
        variables={"workspace": "/w"},
        wire="openai-responses",
        tool_form=codex_tools,
        request_log=tmp_path / "requests.jsonl",
    ) as model:
        first = codex_turn(model.base_url, [])
        assert [item["type"] for item in first] == ["message", "function_call"]
        assert first[0]["content"][0]["text"] == "Reading the notes."
        call = first[1]
        assert (call["name"], call["call_id"]) == ("exec_command", "toolu_0_0")
        assert json.loads(call["arguments"]) == {"cmd": "cat /w/notes.txt"}  # a JSON string, as the API sends it

        def result(output: str) -> dict[str, Any]:
            return {"type": "function_call_output", "call_id": call["call_id"], "output": output}

        history = [*first, result("Process exited with code 0\nOutput:\nthe notes say alpha-marker")]
        second = codex_turn(model.base_url, history)
        assert second[0]["content"][0]["text"] == "Alpha it is."
        assert json.loads(second[1]["arguments"]) == {"cmd": "echo alpha"} and second[1]["call_id"] == "toolu_1_0"
        other = codex_turn(model.base_url, [*first, result("Output:\nnothing of note")])
        assert other[0]["content"][0]["text"] == "Not alpha."

        done = {"type": "function_call_output", "call_id": "toolu_1_0", "output": "alpha"}
        # The Skill step maps onto nothing Codex offers: an error Codex does not retry, naming the tool.
        status, _, payload = post(model.base_url + "/v1/responses", codex_request([*history, *second, done]))
        error = json.loads(payload)["error"]
        assert (status, error["type"]) == (400, "invalid_request_error")
        assert error["message"].startswith("scripted model: tool Skill not offered by this session")
        assert "it offers: exec_command, view_image, web_search" in error["message"]
        final = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "skip"}]}
        assert codex_turn(model.base_url, [*history, *second, done, final])[0]["content"][0]["text"] == "All finished."

        status, _, payload = post(model.base_url + "/v1/responses", codex_request([], stream=False))
        response = json.loads(payload)
        assert status == 200 and response["object"] == "response" and response["status"] == "completed"
        assert response["usage"]["input_tokens_details"] == {"cached_tokens": 2000}
        status, _, payload = post(model.base_url + "/v1/messages", messages_body())
        assert status == 404 and json.loads(payload)["error"]["type"] == "invalid_request_error"
        status, _, payload = post(model.base_url + "/v1/responses", {"model": "m"})
        assert status == 400 and "JSON object with input" in json.loads(payload)["error"]["message"]
    kinds = [(record["kind"], record["step"]) for record in model.requests]
    assert kinds == [
        ("step", 0),
        ("step", 1),
        ("step", 2),
        ("not-offered", 3),
        ("final", None),
        ("step", 0),
        ("not-found", None),
        ("invalid", None),
    ]
    logged = [json.loads(line)["kind"] for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert logged == [kind for kind, _ in kinds]


GEMINI_PATH = "/v1beta/models/gemini-2.5-pro"


def gemini_request(history: list[dict[str, Any]]) -> dict[str, Any]:
    """What Gemini CLI 0.61 sends: its system instruction, the user's turn, the turns so far, its tools."""
    return {
        "contents": [{"role": "user", "parts": [{"text": "<session_context>…</session_context>"}, {"text": "Go."}]}]
        + history,
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}, {"name": "read_file"}]}],
        "generationConfig": {"temperature": 1, "thinkingConfig": {"includeThoughts": True}},
    }


def gemini_turn(url: str, history: list[dict[str, Any]], key: str = "sbx-g") -> dict[str, Any]:
    """One Gemini CLI turn: the model content the streamed chunks add up to, as the CLI records it."""
    path = f"{url}{GEMINI_PATH}:streamGenerateContent?alt=sse&key={key}"
    status, headers, payload = post(path, gemini_request(history))
    assert status == 200 and headers["Content-Type"] == "text/event-stream", payload
    chunks = sse_data(payload)
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    return {"role": "model", "parts": parts}


def test_a_gemini_conversation_calls_mapped_tools_and_branches_on_their_results():
    steps = [*WIRE_STEPS[:1], {**WIRE_STEPS[1], "text": "Alpha, key {{api_key}}."}, *WIRE_STEPS[2:]]
    with ScriptedModel(
        steps, defaults=DEFAULTS, variables={"workspace": "/w"}, wire="gemini", tool_form=gemini_tools
    ) as model:
        first = gemini_turn(model.base_url, [])
        assert first["parts"][0] == {"text": "Reading the notes."}
        call = first["parts"][1]["functionCall"]
        assert call == {
            "id": "toolu_0_0",
            "name": "run_shell_command",
            "args": {"command": "cat /w/notes.txt", "description": "read"},
        }

        def result(output: str) -> dict[str, Any]:
            response = {"name": call["name"], "id": call["id"], "response": {"output": output}}
            return {"role": "user", "parts": [{"functionResponse": response}]}

        history = [first, result("Output: the notes say alpha-marker")]
        second = gemini_turn(model.base_url, history, key="sbx-query-key")
        assert second["parts"][0] == {"text": "Alpha, key sbx-query-key."}  # the request's key, from ?key=
        assert second["parts"][1]["functionCall"]["args"]["command"] == "echo alpha"
        assert gemini_turn(model.base_url, [first, result("Output: nothing")])["parts"][0] == {"text": "Not alpha."}
        done = result("alpha")
        path = f"{model.base_url}{GEMINI_PATH}:streamGenerateContent?alt=sse&key=sbx-g"
        status, _, payload = post(path, gemini_request([*history, second, done]))
        error = json.loads(payload)["error"]
        assert (status, error["code"], error["status"]) == (400, 400, "INVALID_ARGUMENT")  # never retried by the CLI
        assert error["message"].startswith("scripted model: tool Skill not offered by this session (it offers: ")

        status, _, payload = post(f"{model.base_url}{GEMINI_PATH}:generateContent", gemini_request([]))
        document = json.loads(payload)
        assert status == 200 and document["candidates"][0]["content"]["parts"][1]["functionCall"]["id"] == "toolu_0_0"
        assert document["usageMetadata"]["cachedContentTokenCount"] == 2000
        status, _, payload = post(f"{model.base_url}{GEMINI_PATH}:countTokens", gemini_request([]))
        assert (status, json.loads(payload)) == (200, {"totalTokens": 1000})
        router = {
            "contents": [{"role": "user", "parts": [{"text": "rate it"}]}],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": {
                    "type": "OBJECT",
                    "properties": {"reasoning": {"type": "STRING"}, "score": {"type": "INTEGER", "minimum": 1}},
                    "required": ["reasoning", "score"],
                },
            },
        }
        status, _, payload = post(f"{model.base_url}/v1beta/models/flash-lite:generateContent", router)
        answer = json.loads(payload)["candidates"][0]["content"]["parts"][0]["text"]
        assert status == 200 and json.loads(answer) == {"reasoning": "scripted model", "score": 1}
        status, _, payload = post(f"{model.base_url}{GEMINI_PATH}:embedContent", gemini_request([]))
        assert status == 404 and json.loads(payload)["error"]["status"] == "NOT_FOUND"
    kinds = [record["kind"] for record in model.requests]
    assert kinds == ["step", "step", "step", "not-offered", "step", "count-tokens", "side", "not-found"]
    assert model.requests[0]["path"] == f"{GEMINI_PATH}:streamGenerateContent?alt=sse"  # the log keeps no key


def test_a_cells_and_the_proposers_scripted_models_speak_their_agents_wire_and_tools(tmp_path):
    """A cell's scripted model speaks the wire of the arm's agent and maps the script's tools with its adapter; the
    proposer's runs Claude Code, whose tool_form keeps the script's calls as written."""
    from skillbench.evolution.proposer import _scripted_proposer
    from skillbench.execution import agents, cells
    from skillbench.execution.agents.claude_code import ClaudeCode
    from skillbench.execution.sandbox import AgentInstall

    class GeminiLike(ClaudeCode):
        name = "gemini-like"
        wire_api = "gemini"

        def tool_form(self, name: str, tool_input: dict[str, Any], existing: Any = None) -> tuple[str, dict[str, Any]]:
            return gemini_tools(name, tool_input)

    script = {"schema": "model-script/v1", "defaults": DEFAULTS, "tasks": {"t": {"work": WIRE_STEPS}}}
    context = cells.CellContext(
        settings=job_settings(),
        template=tmp_path,
        grader=None,  # type: ignore[arg-type]
        run_dir=tmp_path,
        agent_install=AgentInstall("claude", tmp_path / "cli"),
        cli_version=None,
        model_script=script,
        api_key=None,
        agent=GeminiLike(),
    )
    cell = cells.Cell({"id": "t"}, {}, "arm", 1)  # type: ignore[arg-type]
    with cells._scripted_model(context, cell, {"role": "work"}, "/w", "t/arm/run1/work") as model:
        first = gemini_turn(model.base_url, [])
    assert first["parts"][1]["functionCall"]["name"] == "run_shell_command"
    proposer_script = {**script, "proposer": [{"tools": [{"name": "Read", "input": {"file_path": "{{evidence}}/x"}}]}]}
    with _scripted_proposer(proposer_script, {"evidence": "/e"}, agents.DEFAULT_ADAPTER) as model:
        message = reply_json(model.base_url, messages_body())
    assert message["content"] == [
        {"type": "tool_use", "id": "toolu_0_0", "name": "Read", "input": {"file_path": "/e/x"}}
    ]


def test_scripted_failures_take_the_wires_error_shape():
    steps = [{"text": "after", "fail": {"status": 429, "times": 1, "message": "slow down"}}]
    with ScriptedModel(steps, defaults=DEFAULTS, wire="gemini") as model:
        status, _, payload = post(f"{model.base_url}{GEMINI_PATH}:generateContent", gemini_request([]))
        assert status == 429
        assert json.loads(payload) == {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
        assert gemini_turn(model.base_url, [])["parts"] == [{"text": "after"}]
    with ScriptedModel(steps, defaults=DEFAULTS, wire="openai-responses") as model:
        status, _, payload = post(model.base_url + "/v1/responses", codex_request([]))
        assert status == 429 and json.loads(payload)["error"]["message"] == "slow down"
    with pytest.raises(ValueError, match="unknown wire"):
        ScriptedModel([], defaults=DEFAULTS, wire="smoke-signals")


# ---------------------------------------------------------------------------------------------
# The real CLI


def claude_bin() -> Path:
    if not (CLAUDE.exists() and os.access(CLAUDE, os.X_OK)):
        pytest.fail(f"the real Claude Code CLI is missing at {CLAUDE}: run `make setup` (npm ci in tools/)")
    return CLAUDE


def git(repo: Path, *args: str) -> str:
    env = {**GIT_ENV, "PATH": CHECK_PATH, "HOME": str(repo)}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(path: Path, source: Path | None = None, skills: Path | None = SKILLS) -> Path:
    if source is not None:
        shutil.copytree(source, path)
    else:
        path.mkdir(parents=True)
    if skills is not None:
        shutil.copytree(skills, path / ".claude" / "skills")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "--allow-empty", "-m", "snapshot")
    return path


def run_claude(
    repo: Path, home: Path, model: ScriptedModel, prompt: str, *, disallow_skill: bool = False, expect_success=True
) -> list[dict[str, Any]]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "tmp").mkdir(exist_ok=True)
    command = [str(claude_bin()), "-p", "--input-format", "text", "--output-format", "stream-json", "--verbose"]
    command += ["--tools", TOOLS, "--allowedTools", TOOLS, "--permission-mode", "dontAsk", "--model", MODEL]
    if disallow_skill:
        command += ["--disallowedTools", "Skill"]
    env = {
        "HOME": str(home),
        "CLAUDE_CODE_TMPDIR": str(home / "tmp"),
        "PATH": CHECK_PATH,
        "PYTHONDONTWRITEBYTECODE": "1",
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "sk-dummy-offline",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    done = subprocess.run(command, input=prompt, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    results = [event for event in events if event.get("type") == "result"]
    assert len(results) == 1, (done.returncode, done.stderr[-2000:], done.stdout[-2000:])
    if expect_success:
        assert done.returncode == 0 and results[0]["subtype"] == "success" and not results[0]["is_error"], results[0]
    return events


def blocks(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    found = []
    for event in events:
        content = (event.get("message") or {}).get("content")
        if event.get("type") in ("assistant", "user") and isinstance(content, list):
            found += [block for block in content if isinstance(block, dict) and block.get("type") == kind]
    return found


def scripted_usage(model: ScriptedModel, defaults: dict[str, Any]) -> dict[str, int]:
    """What the model served: the sum of the usage of every successful main-loop reply."""
    total = dict.fromkeys(USAGE_FIELDS, 0)
    for record in model.requests:
        if record["kind"] == "step":
            usage = {**defaults["usage"], **(model.steps[record["step"]].get("usage") or {})}
        elif record["kind"] == "final":
            usage = defaults["usage"]
        else:
            continue
        for field in USAGE_FIELDS:
            total[field] += usage[field]
    return total


def result_usage(events: list[dict[str, Any]]) -> dict[str, int]:
    usage = next(event for event in events if event.get("type") == "result")["usage"]
    return {field: usage[field] for field in USAGE_FIELDS}


def test_real_cli_loads_a_skill_writes_and_reports_the_scripted_usage(tmp_path):
    skills = tmp_path / "skills"
    (skills / "demo-skill").mkdir(parents=True)
    (skills / "demo-skill" / "SKILL.md").write_text(
        "---\nname: demo-skill\ndescription: Writes a greeting file for the scripted-model test.\n---\n\n"
        "# Demo\n\nAlways write the greeting in lower case.\n"
    )
    repo = make_repo(tmp_path / "repo", skills=skills)
    steps = [
        {"text": "Loading the skill.", "tools": [{"name": "Skill", "input": {"skill": "demo-skill"}}],
         "usage": {"input_tokens": 11, "output_tokens": 21, "cache_creation_input_tokens": 1000}},
        {"when": "write the greeting in lower case", "tools": [
            {"name": "Write", "input": {"file_path": "{{workspace}}/greeting.txt", "content": "hello {{api_key}}\n"}}],
         "usage": {"input_tokens": 12, "output_tokens": 22, "cache_read_input_tokens": 1000}},
        {"unless": "write the greeting in lower case", "tools": [
            {"name": "Write", "input": {"file_path": "{{workspace}}/greeting.txt", "content": "HELLO\n"}}]},
        {"text": "Wrote greeting.txt.", "usage": {"input_tokens": 13, "output_tokens": 23}},
    ]  # fmt: skip
    with ScriptedModel(steps, defaults=DEFAULTS, variables={"workspace": str(repo)}) as model:
        events = run_claude(repo, tmp_path / "home", model, "Use the demo-skill skill.")
    init = next(event for event in events if event.get("subtype") == "init")
    assert init["subtype"] == "init" and "demo-skill" in init["skills"]
    assert sorted(init["tools"]) == sorted(TOOLS.split(","))
    skill_calls = [b for b in blocks(events, "tool_use") if b["name"] == "Skill"]
    assert [call["input"] for call in skill_calls] == [{"skill": "demo-skill"}]
    results = {b["tool_use_id"]: b for b in blocks(events, "tool_result")}
    assert not results[skill_calls[0]["id"]].get("is_error")
    assert any(e.get("tool_use_result") == {"success": True, "commandName": "demo-skill"} for e in events)
    assert not any(block.get("is_error") for block in results.values())
    assert (repo / "greeting.txt").read_text() == "hello sk-dummy-offline\n"  # the skill text chose the step
    assert [r["step"] for r in model.requests if r["kind"] == "step"] == [0, 1, 3]
    assert result_usage(events) == scripted_usage(model, DEFAULTS)
    assert result_usage(events) == {
        "input_tokens": 36, "output_tokens": 66, "cache_read_input_tokens": 1000 + 5 + 5,
        "cache_creation_input_tokens": 1000 + 7 + 7,
    }  # fmt: skip
    assert next(e for e in events if e.get("type") == "result")["result"] == "Wrote greeting.txt."


def test_real_cli_retries_scripted_overload_and_reports_a_scripted_400(tmp_path):
    repo = make_repo(tmp_path / "repo", skills=None)
    steps = [{"text": "recovered", "fail": {"status": 529, "times": 1}, "usage": {"output_tokens": 4}}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        events = run_claude(repo, tmp_path / "home", model, "hello")
    assert [e["error_status"] for e in events if e.get("subtype") == "api_retry"] == [529]
    assert next(e for e in events if e.get("type") == "result")["result"] == "recovered"
    assert [(r["kind"], r["status"]) for r in model.requests if r["kind"] != "head"] == [("fail", 529), ("step", 200)]
    with ScriptedModel([{"fail": {"status": 400, "message": "scripted bad request"}}], defaults=DEFAULTS) as model:
        events = run_claude(repo, tmp_path / "home", model, "hello", expect_success=False)
    result = next(e for e in events if e.get("type") == "result")
    assert result["is_error"] and result["api_error_status"] == 400 and "scripted bad request" in result["result"]


def test_real_cli_ends_a_session_whose_step_calls_a_tool_it_does_not_offer(tmp_path):
    """A step whose tool the session does not offer fails the session with the scripted model's message (a 400
    Claude Code does not retry); a call marked `unoffered` is sent, and the CLI refuses it itself."""
    repo = make_repo(tmp_path / "repo", skills=None)
    steps = [{"text": "Loading a skill.", "tools": [{"name": "Skill", "input": {"skill": "change-work"}}]}]
    with ScriptedModel(steps, defaults=DEFAULTS) as model:
        events = run_claude(repo, tmp_path / "home", model, "hello", disallow_skill=True, expect_success=False)
    result = next(e for e in events if e.get("type") == "result")
    assert result["is_error"] and result["api_error_status"] == 400
    assert "scripted model: tool Skill not offered by this session" in result["result"]
    assert [(r["kind"], r["status"]) for r in model.requests if r["kind"] in ("not-offered", "step")] == [
        ("not-offered", 400)
    ]
    probing = [{**steps[0], "tools": [{**steps[0]["tools"][0], "unoffered": True}]}, {"text": "Refused, as meant."}]
    with ScriptedModel(probing, defaults=DEFAULTS) as model:
        events = run_claude(repo, tmp_path / "home", model, "hello", disallow_skill=True)
    [call] = [block for block in blocks(events, "tool_use") if block["name"] == "Skill"]
    assert [b.get("is_error") for b in blocks(events, "tool_result") if b["tool_use_id"] == call["id"]] == [True]
    assert next(e for e in events if e.get("type") == "result")["result"] == "Refused, as meant."


# ---------------------------------------------------------------------------------------------
# The demo suite, end to end through the real CLI

VERIFY_NOTE = (
    "Verification must be observed in this session: run the tests in the foreground until they finish and "
    "report their actual output. Never background them or wait for scheduled wake-ups."
)
HEADLESS = "You are running headless: nobody can answer questions, so make reasonable choices yourself."
ROLES = ("plan", "work", "direct", "baseline")
# Designed outcomes: (verify passes, oracle passes) per (task, session chain); everything else resolves.
EXPECTED_FAILURES = {("bulk-discount-threshold", "direct"): (True, False)}


def prompt_for(role: str, task: dict[str, Any]) -> str:
    if role == "plan":
        return (
            f"Use the change-plan skill for: {task['prompt']}\n\n{HEADLESS} The plan document under docs/plans/ "
            "is the deliverable of this session; do not change any other file."
        )
    if role == "work":
        return (
            f"Use the change-work skill to execute the plan at docs/plans/{task['id']}.md.\n\n{HEADLESS} "
            f"At the end, report the Definition-of-Done status.\n\n{VERIFY_NOTE}"
        )
    if role == "direct":
        return (
            f"Use the change-work skill for: {task['prompt']}\n\n{HEADLESS} The user explicitly declines a separate "
            f"planning pass and wants direct mode with the skill's execution discipline.\n\n{VERIFY_NOTE}"
        )
    return (
        f"{task['prompt']}\n\nImplement the change in this repository and verify it by running the relevant tests. "
        "Work autonomously without asking questions."
    )


def check(repo: Path, command: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": CHECK_PATH, "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(repo), **(extra_env or {})}
    return subprocess.run(["/bin/sh", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=120)


def play(script: dict[str, Any], task: dict[str, Any], role: str, repo: Path, home: Path) -> dict[str, Any]:
    steps = session_steps(script, task["id"], role)
    with ScriptedModel(steps, defaults=script["defaults"], variables={"workspace": str(repo)}) as model:
        events = run_claude(repo, home, model, prompt_for(role, task), disallow_skill=role == "baseline")
    tool_results = blocks(events, "tool_result")
    errors = [block for block in tool_results if block.get("is_error")]
    assert not errors, f"{task['id']}/{role}: tool errors {errors}"
    kinds = [record["kind"] for record in model.requests]
    assert "final" not in kinds and "fail" not in kinds, f"{task['id']}/{role}: script ran past its end: {kinds}"
    assert result_usage(events) == scripted_usage(model, script["defaults"]), f"{task['id']}/{role}"
    skill_calls = [b["input"].get("skill") for b in blocks(events, "tool_use") if b["name"] == "Skill"]
    init = next(event for event in events if event.get("subtype") == "init")
    if role == "baseline":
        assert skill_calls == [] and "Skill" not in init["tools"]
    else:
        assert skill_calls == ["change-plan" if role == "plan" else "change-work"]
    result = next(e for e in events if e.get("type") == "result")
    return {
        "steps": [record["step"] for record in model.requests if record["kind"] == "step"],
        "turns": result["num_turns"],
        "cost": result["total_cost_usd"],
        "usage": result_usage(events),
        "bash": [b["input"]["command"] for b in blocks(events, "tool_use") if b["name"] == "Bash"],
    }


def changed_files(repo: Path) -> list[str]:
    lines = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    return sorted(line[3:] for line in lines)


def run_chain(script, task, chain: str, base: Path) -> dict[str, Any]:
    repo = make_repo(base / "repo", source=SUITE / task["snapshot"])
    outcome: dict[str, Any] = {}
    if chain == "workflow":
        outcome["plan"] = play(script, task, "plan", repo, base / "home-plan")
        assert changed_files(repo) == [f"docs/plans/{task['id']}.md"], "the plan session touched other files"
        outcome["work"] = play(script, task, "work", repo, base / "home-work")
    else:
        outcome[chain] = play(script, task, chain, repo, base / "home")
    staged = base / "oracle"
    staged.mkdir()
    for item in task["oracle"]["files"]:
        shutil.copyfile(SUITE / item["source"], staged / item["target"])
    verify = check(repo, task["verify"])
    oracle = check(repo, task["oracle"]["command"], {"SKILLBENCH_ORACLE_ROOT": str(staged)})
    outcome["verify"] = verify.returncode == 0
    outcome["oracle"] = oracle.returncode == 0
    outcome["output"] = (verify.stdout + verify.stderr)[-1500:] + (oracle.stdout + oracle.stderr)[-1500:]
    outcome["changed"] = changed_files(repo)
    return outcome


WHOLE_SUITE = "python3 -m pytest -q -p no:cacheprovider tests/"
SUITE_TASKS = yaml.safe_load((SUITE / "tasks.yaml").read_text())["tasks"]


def test_demo_script_covers_every_task_and_role():
    script = load_model_script(SUITE / "model-script.yaml")
    assert len(SUITE_TASKS) >= 4 and any(task.get("expensive") for task in SUITE_TASKS)
    assert {"trivial", "investigation-bug", "cross-module"} <= {task["class"] for task in SUITE_TASKS}
    for task in SUITE_TASKS:
        assert set(ROLES) <= set(script["tasks"][task["id"]]), task["id"]
        for item in task["oracle"]["files"]:
            assert (SUITE / item["source"]).is_file()
        for role in ROLES:
            steps = session_steps(script, task["id"], role)
            for run in range(20):  # every alternative a run can draw states its usage
                played = resolve_variation(
                    steps, variation_key=f"{task['id']}/arm/run{run}/{role}", defaults_usage={}, jitter=0.0
                )
                assert all("usage" in step for step in played), f"{task['id']}/{role}: usage must be explicit"


@pytest.mark.parametrize("task", SUITE_TASKS, ids=[task["id"] for task in SUITE_TASKS])
def test_demo_suite_through_the_real_cli(task, tmp_path):
    claude_bin()
    script = load_model_script(SUITE / "model-script.yaml")
    chains = ("workflow", "direct", "baseline")
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {chain: pool.submit(run_chain, script, task, chain, tmp_path / chain) for chain in chains}
        outcomes = {chain: future.result() for chain, future in futures.items()}
    for chain, outcome in outcomes.items():
        expected = EXPECTED_FAILURES.get((task["id"], chain), (True, True))
        assert (outcome["verify"], outcome["oracle"]) == expected, f"{task['id']}/{chain}:\n{outcome['output']}"
        assert any(not path.startswith("docs/plans/") for path in outcome["changed"]), outcome["changed"]
    # The incumbent change-work skill asks for a whole-suite run after verify; work/direct obey it.
    for chain, role in (("workflow", "work"), ("direct", "direct")):
        bash = outcomes[chain][role]["bash"]
        assert bash == [task["verify"], WHOLE_SUITE], f"{task['id']}/{role} ran {bash}"
    # The baseline explores more: more turns, tokens and cost than plan + work, which cost more than direct.
    baseline, direct = outcomes["baseline"]["baseline"], outcomes["direct"]["direct"]
    plan, work = outcomes["workflow"]["plan"], outcomes["workflow"]["work"]
    assert baseline["turns"] >= plan["turns"] + work["turns"] > direct["turns"]
    tokens = {name: sum(arm["usage"].values()) for name, arm in (("baseline", baseline), ("direct", direct))}
    workflow_tokens = sum(plan["usage"].values()) + sum(work["usage"].values())
    assert tokens["baseline"] > workflow_tokens > tokens["direct"]
    assert baseline["cost"] > plan["cost"] + work["cost"] > direct["cost"] > 0
    assert outcomes["workflow"]["changed"].count(f"docs/plans/{task['id']}.md") == 1


def test_work_session_with_the_verify_once_rule_skips_the_whole_suite_run(tmp_path):
    """A skill that says "run the verify command once" (the demo's promoted candidate) saves that turn."""
    script = load_model_script(SUITE / "model-script.yaml")
    task = next(task for task in SUITE_TASKS if task["id"] == "money-thousands")
    skills = tmp_path / "skills"
    shutil.copytree(SKILLS, skills)
    skill_file = skills / "change-work" / "SKILL.md"
    text = skill_file.read_text()
    assert "run the verify command once" not in text.lower()
    rule = "- Then run the project's whole test suite as well"
    assert rule in text
    skill_file.write_text(text.replace(rule, "- Run the verify command once; do not repeat it. Then stop"))
    repo = make_repo(tmp_path / "repo", source=SUITE / task["snapshot"], skills=skills)
    outcome = play(script, task, "direct", repo, tmp_path / "home")
    assert outcome["bash"] == [task["verify"]]
    assert check(repo, task["verify"]).returncode == 0


# ─── Shared steps and the skeleton ──────────────────────────────────────────────────────────────────────


SHARED_SCRIPT = """\
schema: model-script/v1
defaults:
  usage: {input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0}
  final_text: Done.
steps:
  read-app:
    - tools: [{name: Read, input: {file_path: "{{workspace}}/app.py"}}]
  verify:
    - use: read-app
    - tools: [{name: Bash, input: {command: pytest -q}}]
tasks:
  fix:
    work:
      - tools: [{name: Skill, input: {skill: change-work}}]
      - use: verify
        when: run the verify command once
    baseline:
      - use: verify
  other:
    baseline:
      - use: read-app
"""


def test_a_step_list_is_shared_by_name_across_tasks_and_roles(tmp_path):
    from skillbench.execution.scripted_model import load_model_script, resolve_variation, session_steps

    path = tmp_path / "script.yaml"
    path.write_text(SHARED_SCRIPT)
    script = load_model_script(path, task="fix")
    played = resolve_variation(session_steps(script, "fix", "work"), variation_key=None, defaults_usage={})
    assert [step["tools"][0]["name"] for step in played] == ["Skill", "Read", "Bash"]
    # A used list's when applies to every step of it, nested uses included.
    phrase = ["run the verify command once"]
    assert [step.get("when") for step in played] == [None, phrase, phrase]
    baseline = resolve_variation(session_steps(script, "fix", "baseline"), variation_key="k", defaults_usage={})
    assert [step["tools"][0]["name"] for step in baseline] == ["Read", "Bash"]
    other = load_model_script(path, task="other")
    assert [
        step["tools"][0]["input"] for step in session_steps(other, "other", "baseline")[0]["choose"][0]["steps"]
    ] == [{"file_path": "{{workspace}}/app.py"}]


def test_an_unknown_or_circular_shared_list_is_named_before_any_job(tmp_path):
    from skillbench.experiment import configcheck

    path = tmp_path / "script.yaml"
    path.write_text(SHARED_SCRIPT.replace("      - use: verify\n        when", "      - use: verfy\n        when"))
    with pytest.raises(ArtifactError) as unknown:
        configcheck.check_model_script(
            path,
            suite_tasks=["fix", "other"],
            selected_tasks=["fix"],
            arm_roles={"workflow": ["work"], "baseline": ["baseline"]},
            selected_arms=["workflow", "baseline"],
            needs_proposer=False,
        )
    assert (
        str(unknown.value)
        == f"{path}: tasks.fix.work: `use: verfy` names no list under `steps`; did you mean `verify`?"
    )
    path.write_text(SHARED_SCRIPT.replace("    - use: read-app\n    - tools", "    - use: verify\n    - tools"))
    with pytest.raises(ArtifactError, match=r"shared steps use each other in a cycle: verify -> verify"):
        configcheck.check_model_script(
            path,
            suite_tasks=["fix", "other"],
            selected_tasks=["fix"],
            arm_roles={"baseline": ["baseline"]},
            selected_arms=["baseline"],
            needs_proposer=False,
        )


def test_script_init_writes_a_skeleton_the_checks_accept(tmp_path, monkeypatch, capsys):
    """Per selected task and role: the skill, reads of the files the prompt and verify name, verify, a closing text;
    a plan session writes its plan; a proposer when the experiment runs one. The run's own checks accept it."""
    from skillbench.cli import main
    from skillbench.execution.scripted_model import load_model_script, session_steps
    from skillbench.experiment import configcheck

    for name in ("config", "tasks", ".claude"):
        shutil.copytree(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "skeleton.yaml"
    assert main(["script", "init", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: 3 task(s) × roles plan, work, baseline, and a proposer")
    assert "then " in said and said.rstrip().endswith("skillbench check")
    configcheck.check_model_script(
        out,
        suite_tasks=["money-thousands", "bulk-discount-threshold", "sku-normalization", "order-cancellation"],
        selected_tasks=["money-thousands", "bulk-discount-threshold", "sku-normalization"],
        arm_roles={"workflow": ["plan", "work"], "baseline": ["baseline"]},
        selected_arms=["workflow", "baseline"],
        needs_proposer=True,
    )
    script = load_model_script(out, task="money-thousands")
    work = session_steps(script, "money-thousands", "work")
    assert work[0]["tools"] == [{"name": "Skill", "input": {"skill": "change-work"}}]
    reads = work[1]["choose"][0]["steps"][0]["tools"]
    assert {"name": "Read", "input": {"file_path": "{{workspace}}/tests/test_pricing.py"}} in reads
    verify = work[2]["choose"][0]["steps"][0]["tools"][0]
    assert verify["input"]["command"] == "python3 -m pytest -q -p no:cacheprovider tests/test_pricing.py"
    plan = session_steps(script, "money-thousands", "plan")
    assert plan[-2]["tools"][0]["input"]["file_path"] == "{{workspace}}/docs/plans/money-thousands.md"
    proposer = yaml.safe_load(out.read_text())["proposer"]
    assert ".skillbench-output/overlay/.claude/skills/change-plan" in proposer[1]["tools"][0]["input"]["command"]
    # An existing script is never replaced by accident.
    assert main(["script", "init", "--out", str(out)]) == 1
    assert "pass --force to replace it" in capsys.readouterr().err
