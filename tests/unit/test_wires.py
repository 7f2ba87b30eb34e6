"""Tests for skillbench.execution.wires: each wire API's routes, credentials, usage meter, error shapes, request
view and reply rendering.

The request bodies here follow what the real CLIs sent to a loopback stand-in (Codex 0.171.0 `codex exec
--json`, Gemini CLI 0.61.0 `-p … -o stream-json`, Claude Code): the same item and part shapes, shortened.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from skillbench.execution import wires
from skillbench.execution.wires import base
from skillbench.execution.wires.base import Reply, ToolCall

ANTHROPIC = wires.wire("anthropic")
RESPONSES = wires.wire("openai-responses")
GEMINI = wires.wire("gemini")
ALL = [ANTHROPIC, RESPONSES, GEMINI]
IDS = [api.name for api in ALL]
TOKEN = "sbx-session-abcdef0123456789"
KEY = "real-provider-key-0123456789"
SCRIPT_USAGE = {
    "input_tokens": 1200,
    "output_tokens": 85,
    "cache_read_input_tokens": 3000,
    "cache_creation_input_tokens": 0,
}
WRITES_USAGE = {**SCRIPT_USAGE, "cache_creation_input_tokens": 400}


def reply(usage: dict[str, int] = SCRIPT_USAGE, *, text: str | None = "Reading it.", calls: int = 1) -> Reply:
    tool_calls = tuple(
        ToolCall(id=f"toolu_2_{n}", name="exec_command", input={"cmd": f"cat notes-{n}.txt", "tty": False})
        for n in range(calls)
    )
    return Reply(id="scripted_02_0007", model="test-model-1", text=text, tool_calls=tool_calls, usage=usage)


def metered(api: base.WireApi, content_type: str, chunks: list[bytes]) -> tuple[base.UsageMeter, Any]:
    meter = api.meter(content_type)
    for chunk in chunks:
        meter.feed(chunk)
    return meter, meter.finish()


def sse(events: list[dict[str, Any]], *, named: bool = True, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    frames = []
    for event in events:
        head = f"event: {event.get('type', 'message')}{end}" if named else ""
        frames.append(f"{head}data: {json.dumps(event)}{end}{end}")
    return "".join(frames).encode()


# ---------------------------------------------------------------------------------------------
# Routes


def test_each_wire_knows_its_routes_and_which_are_metered():
    assert ANTHROPIC.route("/v1/messages") == "messages"
    assert ANTHROPIC.route("/v1/messages/count_tokens") == "count_tokens"
    assert RESPONSES.route("/v1/responses") == "messages"
    assert GEMINI.route("/v1beta/models/gemini-2.5-pro:streamGenerateContent") == "messages"
    assert GEMINI.route("/v1beta/models/gemini-2.5-pro:generateContent") == "messages"
    assert GEMINI.route("/v1beta/models/gemini-2.5-pro:countTokens") == "count_tokens"
    for api in ALL:
        others = {"/v1/messages", "/v1/responses", "/v1beta/models/gemini-2.5-pro:generateContent"}
        others -= {route for route in others if api.route(route)}
        assert all(api.route(route) is None for route in others)
        assert api.route("/v1/models") is None and api.route("/") is None
    for odd in ("/v1beta/models/:generateContent", "/v1beta/models/a/b:generateContent", "/v1beta/models/m:embed"):
        assert GEMINI.route(odd) is None
    assert set(wires.WIRES) == {"anthropic", "openai-responses", "gemini"}
    with pytest.raises(ValueError, match="unknown wire"):
        wires.wire("chat-completions")


def test_the_request_model_and_streaming_come_from_the_body_or_the_gemini_path():
    body = json.dumps({"model": "m-1", "stream": True, "messages": []}).encode()
    assert ANTHROPIC.request_summary(body, "/v1/messages?beta=true") == ("m-1", True)
    assert RESPONSES.request_summary(body, "/v1/responses") == ("m-1", True)
    assert RESPONSES.request_summary(b"not json", "/v1/responses") == (None, False)
    streamed = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=x"
    assert GEMINI.request_summary(b"{}", streamed) == ("gemini-2.5-pro", True)
    assert GEMINI.request_summary(b"{}", "/v1beta/models/gemini-2.5-flash:generateContent") == (
        "gemini-2.5-flash",
        False,
    )


# ---------------------------------------------------------------------------------------------
# Credentials


def test_session_tokens_are_read_only_where_each_wire_carries_its_key():
    by_x_api_key = {"x-api-key": TOKEN}
    by_bearer = {"authorization": f"Bearer {TOKEN}"}
    by_goog = {"x-goog-api-key": TOKEN}
    path = "/v1/messages"
    assert ANTHROPIC.session_token(by_x_api_key, path) == ANTHROPIC.session_token(by_bearer, path) == TOKEN
    assert ANTHROPIC.session_token(by_goog, path) is None
    assert RESPONSES.session_token(by_bearer, "/v1/responses") == TOKEN
    assert RESPONSES.session_token(by_x_api_key, "/v1/responses") is None
    assert RESPONSES.session_token({"authorization": f"Basic {TOKEN}"}, "/v1/responses") is None
    route = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    assert GEMINI.session_token(by_goog, route) == TOKEN
    assert GEMINI.session_token({}, f"{route}?alt=sse&key={TOKEN}") == TOKEN
    assert GEMINI.session_token(by_bearer, route) == TOKEN
    assert GEMINI.session_token(by_x_api_key, route) is None
    assert GEMINI.session_token({}, f"{route}?alt=sse") is None
    # The header wins over the query, as the first of repeated headers wins.
    assert GEMINI.session_token(by_goog, f"{route}?key=other") == TOKEN
    assert base.header_map([("X-Api-Key", "first"), ("x-api-key", "second")]) == {"x-api-key": "first"}


def test_credentials_are_removed_before_forwarding_and_the_rest_of_the_query_is_kept():
    for api in ALL:
        assert {
            "x-api-key",
            "authorization",
            "x-goog-api-key",
            "cookie",
            "proxy-authorization",
        } <= api.credential_headers
    params = GEMINI.credential_params
    route = "/v1beta/models/m:streamGenerateContent"
    assert base.without_params(f"{route}?alt=sse&key={TOKEN}", params) == f"{route}?alt=sse"
    assert base.without_params(f"{route}?key={TOKEN}&alt=sse", params) == f"{route}?alt=sse"
    assert base.without_params(f"{route}?key={TOKEN}", params) == route
    assert base.without_params(f"{route}?access_token={TOKEN}&x=1&keys=2", params) == f"{route}?x=1&keys=2"
    # Anthropic's query goes upstream byte for byte.
    assert base.without_params("/v1/messages?beta=true", ANTHROPIC.credential_params) == "/v1/messages?beta=true"


def test_the_real_key_goes_upstream_where_each_api_expects_it():
    assert ANTHROPIC.upstream_auth(KEY) == (("x-api-key", KEY),)
    assert RESPONSES.upstream_auth(KEY) == (("Authorization", f"Bearer {KEY}"),)
    assert GEMINI.upstream_auth(KEY) == (("x-goog-api-key", KEY),)


# ---------------------------------------------------------------------------------------------
# Meters: every byte offset, CRLF, JSON, and the round trip from the scripted model's rendering


@pytest.mark.parametrize("api", ALL, ids=IDS)
@pytest.mark.parametrize("usage", [SCRIPT_USAGE, WRITES_USAGE], ids=["reads", "writes"])
def test_a_rendered_reply_meters_back_to_the_canonical_usage_wherever_the_stream_is_split(api, usage):
    content_type, stream = api.render(reply(usage, calls=2), stream=True)
    assert content_type.startswith("text/event-stream")
    expected = api.canonical_usage(usage)
    for offset in range(len(stream) + 1):
        meter, record = metered(api, content_type, [stream[:offset], stream[offset:]])
        assert record == expected, offset
    assert meter.served_model == "test-model-1" and meter.stopped and meter.error_type is None
    byte_by_byte = [stream[index : index + 1] for index in range(len(stream))]
    assert metered(api, content_type, byte_by_byte)[1] == expected
    if b"\r\n" not in stream:
        assert metered(api, content_type, [stream.replace(b"\n", b"\r\n")])[1] == expected
    else:
        assert metered(api, content_type, [stream.replace(b"\r\n", b"\n")])[1] == expected
    json_type, document = api.render(reply(usage), stream=False)
    assert json_type.startswith("application/json") and json.loads(document) == api.document(reply(usage))
    meter, record = metered(api, json_type, [document[:5], document[5:]])
    assert record == expected and meter.served_model == "test-model-1"


@pytest.mark.parametrize("api", ALL, ids=IDS)
def test_a_meter_reads_what_the_response_was_for_the_ledger_streamed_or_whole(api):
    """The response's id, its tool calls' ids in order and whether it said anything: how a transcript's turns find
    their ledger requests (`skillbench.interop.turns`)."""
    for stream in (True, False):
        content_type, body = api.render(reply(calls=2), stream=stream)
        meter, _usage = metered(api, content_type, [body])
        fields = meter.shape.ledger_fields()
        assert fields["tool_calls"] == ["toolu_2_0", "toolu_2_1"] and fields["text"] is True, (api.name, stream)
        assert fields["response_id"] and "scripted_02_0007" in fields["response_id"]
        content_type, body = api.render(reply(text=None, calls=0), stream=stream)
        meter, _usage = metered(api, content_type, [body])
        assert meter.shape.ledger_fields()["tool_calls"] == [] and meter.shape.text is False


def test_canonical_usage_is_uncached_input_and_has_no_writes_where_the_api_has_none():
    assert ANTHROPIC.canonical_usage(WRITES_USAGE) == {
        **WRITES_USAGE,
        "cache_creation_5m_input_tokens": None,
        "cache_creation_1h_input_tokens": None,
    }
    for api in (RESPONSES, GEMINI):
        assert api.canonical_usage(WRITES_USAGE) == {
            "input_tokens": 1600,  # what the script calls a cache write is plain input here
            "output_tokens": 85,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": 0,
            "cache_creation_5m_input_tokens": None,
            "cache_creation_1h_input_tokens": None,
        }


def test_the_responses_meter_reads_the_completed_event_with_cached_and_reasoning_tokens():
    usage = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 700,
        "output_tokens_details": {"reasoning_tokens": 512},
        "total_tokens": 5700,
    }
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5-codex", "usage": None}},
        {"type": "response.output_text.delta", "delta": "hi"},
        {"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-5-2025-08-07", "usage": usage}},
    ]
    meter, record = metered(RESPONSES, "text/event-stream", [sse(events)])
    assert record == base.unsplit_record(904, 700, 4096)  # reasoning is part of output_tokens already
    assert meter.served_model == "gpt-5-2025-08-07" and meter.stopped
    # Cut before response.completed: nothing was reported.
    cut = sse(events[:2])
    meter, record = metered(RESPONSES, "text/event-stream", [cut])
    assert record is None and not meter.stopped
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "x"}}}
    assert metered(RESPONSES, "text/event-stream", [sse([failed])])[0].error_type == "server_error"
    error_event = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    assert metered(RESPONSES, "text/event-stream", [sse([error_event])])[0].error_type == "rate_limit_exceeded"
    no_details = {"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 2}}}
    assert metered(RESPONSES, "text/event-stream", [sse([no_details])])[1] == base.unsplit_record(10, 2, 0)


def test_the_gemini_meter_takes_the_last_usage_metadata_and_counts_thoughts_as_output():
    def chunk(metadata: dict[str, int] | None, finish: bool = False) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": "x"}]}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        document: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-pro-002"}
        if metadata is not None:
            document["usageMetadata"] = metadata
        return document

    final = {
        "promptTokenCount": 9000,
        "cachedContentTokenCount": 8000,
        "candidatesTokenCount": 120,
        "thoughtsTokenCount": 300,
        "totalTokenCount": 9420,
    }
    chunks = [chunk({"promptTokenCount": 9000, "totalTokenCount": 9000}), chunk(None), chunk(final, finish=True)]
    stream = sse(chunks, named=False, crlf=True)
    for offset in range(0, len(stream) + 1, 7):
        meter, record = metered(GEMINI, "text/event-stream", [stream[:offset], stream[offset:]])
        assert record == base.unsplit_record(1000, 420, 8000), offset
    assert meter.served_model == "gemini-2.5-pro-002" and meter.stopped
    # Proto3 JSON leaves zero counts out; a stream that never finished has no output count.
    assert metered(GEMINI, "text/event-stream", [sse([chunk({"promptTokenCount": 50}, True)], named=False)])[
        1
    ] == base.unsplit_record(50, 0, 0)
    unfinished = metered(GEMINI, "text/event-stream", [sse(chunks[:2], named=False)])[1]
    assert unfinished == base.unsplit_record(9000, None, 0)
    # A JSON array of chunks (streamGenerateContent without alt=sse) and one JSON body.
    assert metered(GEMINI, "application/json", [json.dumps(chunks).encode()])[1] == base.unsplit_record(1000, 420, 8000)
    assert metered(GEMINI, "application/json", [json.dumps(chunks[-1]).encode()])[1] == base.unsplit_record(
        1000, 420, 8000
    )
    error = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    assert metered(GEMINI, "text/event-stream", [sse([error], named=False)])[0].error_type == "RESOURCE_EXHAUSTED"
    assert metered(GEMINI, "application/json", [b"not json"])[1] is None


def test_meters_treat_nonsense_as_unreported_and_stop_at_their_limits():
    for api in ALL:
        assert metered(api, "application/json", [b"[1, 2"])[1] is None
        assert metered(api, "text/event-stream", [b"data: {not json}\n\n"])[1] is None
    oversized = b"data: " + b"x" * (base.MAX_SSE_LINE_BYTES + 10)
    assert metered(GEMINI, "text/event-stream", [oversized, b"\n\n"])[1] is None
    negative = {"type": "response.completed", "response": {"usage": {"input_tokens": -1, "output_tokens": True}}}
    assert metered(RESPONSES, "text/event-stream", [sse([negative])])[1] == base.unsplit_record(None, None, 0)
    more_cached = {"type": "response.completed", "response": {"usage": {
        "input_tokens": 5, "input_tokens_details": {"cached_tokens": 6}, "output_tokens": 1}}}  # fmt: skip
    assert metered(RESPONSES, "text/event-stream", [sse([more_cached])])[1]["input_tokens"] is None


# ---------------------------------------------------------------------------------------------
# Error shapes and refusals


def test_error_documents_have_each_apis_shape():
    assert json.loads(ANTHROPIC.error_body(404, "no")) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "no"},
    }
    assert json.loads(ANTHROPIC.error_body(529, "busy", "overloaded_error"))["error"]["type"] == "overloaded_error"
    assert json.loads(RESPONSES.error_body(400, "bad")) == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}
    }
    assert json.loads(RESPONSES.error_body(503, "down"))["error"]["type"] == "server_error"
    assert json.loads(RESPONSES.error_body(401, "who"))["error"]["code"] == "invalid_api_key"
    assert json.loads(GEMINI.error_body(429, "slow")) == {
        "error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}
    }
    assert json.loads(GEMINI.error_body(400, "x", "FAILED_PRECONDITION"))["error"]["status"] == "FAILED_PRECONDITION"


def test_cap_refusals_are_the_statuses_each_cli_gives_up_on():
    message = "skillbench gateway: this session's spend cap of $0.0100 is reached"
    anthropic = ANTHROPIC.gateway_error("refused", message)
    assert anthropic.status == 402 and ("x-should-retry", "false") in anthropic.headers
    assert json.loads(anthropic.body) == {"type": "error", "error": {"type": "billing_error", "message": message}}
    responses = RESPONSES.gateway_error("refused", message)
    assert responses.status == 429 and ("x-should-retry", "false") in responses.headers
    assert json.loads(responses.body)["error"] == {
        "message": message,
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
    gemini = GEMINI.gateway_error("refused", message)
    assert gemini.status == 400
    assert json.loads(gemini.body) == {"error": {"code": 400, "message": message, "status": "FAILED_PRECONDITION"}}
    for api in ALL:
        unauthorized = api.gateway_error("unauthorized", "no token")
        assert unauthorized.status == 401 and ("x-should-retry", "false") in unauthorized.headers
        assert api.gateway_error("not-found", "x").status == 404
        assert api.gateway_error("gateway-error", "x").status == 500
        unreachable = api.gateway_error("unreachable", "x")
        assert unreachable.status == 502 and not unreachable.headers  # a transient failure the CLI may retry
        assert "no token" in unauthorized.body.decode()


# ---------------------------------------------------------------------------------------------
# Request views of realistic multi-turn requests


def responses_request() -> dict[str, Any]:
    """Codex 0.171's third request of a session: two turns of shell calls and their outputs so far."""
    return {
        "model": "gpt-5-codex",
        "stream": True,
        "input": [
            {"type": "message", "id": "msg_a", "role": "developer",
             "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
            {"type": "message", "id": "msg_b", "role": "user",
             "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}]},
            {"type": "message", "id": "msg_c", "role": "user",
             "content": [{"type": "input_text", "text": "Follow the notes."}]},
            {"type": "message", "status": "completed", "id": "msg_scripted_00_0001", "role": "assistant",
             "content": [{"type": "output_text", "text": "Reading the notes.", "annotations": []}]},
            {"type": "function_call", "status": "completed", "id": "fc_toolu_0_0", "name": "exec_command",
             "arguments": "{\"cmd\":\"cat notes.txt SECRET-ARGUMENT\"}", "call_id": "toolu_0_0"},
            {"type": "function_call_output", "id": "fco_1", "call_id": "toolu_0_0",
             "output": "Chunk ID: 944a62\nProcess exited with code 0\nOutput:\nthe notes say alpha-marker here\n"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {"type": "function_call", "status": "completed", "id": "fc_toolu_1_0", "name": "exec_command",
             "arguments": "{\"cmd\":\"ls\"}", "call_id": "toolu_1_0"},
            {"type": "function_call", "status": "completed", "id": "fc_toolu_1_1", "name": "view_image",
             "arguments": "{\"path\":\"a.png\"}", "call_id": "toolu_1_1"},
            {"type": "function_call_output", "call_id": "toolu_1_0",
             "output": [{"type": "input_text", "text": "notes.txt"}]},
            {"type": "function_call_output", "call_id": "toolu_1_1", "output": "no image"},
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "strict": False, "parameters": {"type": "object"}},
            {"type": "function", "name": "view_image", "strict": False, "parameters": {"type": "object"}},
            {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "close_agent"}]},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
            {"type": "web_search", "external_web_access": False},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a233ac",
    }  # fmt: skip


def gemini_request() -> dict[str, Any]:
    """Gemini CLI 0.61's third request of a session: two shell calls and their function responses so far."""
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"},
                                       {"text": "Follow the notes."}]},
            {"role": "model", "parts": [
                {"text": "Thinking about SECRET-THOUGHT", "thought": True},
                {"text": "Reading the notes."},
                {"functionCall": {"id": "toolu_0_0", "args": {"command": "cat notes.txt SECRET-ARGUMENT"},
                                  "name": "run_shell_command"},
                 "thoughtSignature": "skip_thought_signature_validator"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "id": "toolu_0_0",
                "response": {"output": "<untrusted_context>Output: the notes say alpha-marker</untrusted_context>"}}}]},
            {"role": "model", "parts": [{"functionCall": {"id": "toolu_1_0", "args": {"command": "ls"},
                                                          "name": "run_shell_command"}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "id": "toolu_1_0",
                                                             "response": {"error": "exit 2", "details": ["denied"]}}}]},
        ],
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI, an autonomous CLI agent."}]},
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "parametersJsonSchema": {"type": "object"}},
            {"name": "run_shell_command", "parametersJsonSchema": {"type": "object"}},
            {"name": "activate_skill", "parametersJsonSchema": {"type": "object"}},
        ]}],
        "generationConfig": {"temperature": 1, "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8192}},
    }  # fmt: skip


def anthropic_request() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-20250514",
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Follow the notes."}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading the notes."},
                {"type": "tool_use", "id": "toolu_0_0", "name": "Bash", "input": {"command": "cat SECRET-ARGUMENT"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0_0",
                                          "content": [{"type": "text", "text": "the notes say alpha-marker here"}]}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1_0", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1_0", "content": "notes.txt"}]},
        ],
        "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}},
                  {"type": "web_search_20250305", "name": "web_search"}],
    }  # fmt: skip


GEMINI_PATH = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


@pytest.mark.parametrize(
    ("api", "body", "path", "tools", "model", "stream"),
    [
        (ANTHROPIC, anthropic_request(), "/v1/messages?beta=true", ("Bash", "Read", "web_search"),
         "claude-sonnet-4-20250514", True),
        (RESPONSES, responses_request(), "/v1/responses",
         ("exec_command", "view_image", "close_agent", "apply_patch", "web_search"), "gpt-5-codex", True),
        (GEMINI, gemini_request(), GEMINI_PATH, ("read_file", "run_shell_command", "activate_skill"),
         "gemini-2.5-pro", True),
    ],
    ids=IDS,
)  # fmt: skip
def test_a_multi_turn_request_reads_into_the_neutral_view(api, body, path, tools, model, stream):
    view = api.read(body, path)
    assert view is not None
    assert view.assistant_turns == 2 and view.tools == tools and view.side is False
    assert (view.model, view.stream) == (model, stream)
    assert "alpha-marker" in view.text and "Follow the notes." in view.text
    assert "SECRET-ARGUMENT" not in view.text and "SECRET-THOUGHT" not in view.text
    assert api.read({"model": "m"}, path) is None and api.read([], path) is None
    without_tools = {key: value for key, value in body.items() if key != "tools"}
    assert api.read(without_tools, path).side is True


def test_each_view_takes_the_system_prompt_and_every_tool_result():
    codex = RESPONSES.read(responses_request() | {"instructions": "INSTRUCTIONS"}, "/v1/responses")
    assert codex is not None
    assert all(part in codex.text for part in ("INSTRUCTIONS", "Codex CLI", "notes.txt", "no image", "<cwd>"))
    assert RESPONSES.read({"input": "just a string", "tools": []}, "/v1/responses").text == "just a string"
    gemini = GEMINI.read(gemini_request(), GEMINI_PATH)
    assert gemini is not None and all(part in gemini.text for part in ("autonomous CLI agent", "exit 2", "denied"))
    claude = ANTHROPIC.read(anthropic_request(), "/v1/messages")
    assert claude is not None and "You are Claude Code." in claude.text and "notes.txt" in claude.text


def test_a_side_query_that_asks_for_json_carries_its_schema():
    schema = {"type": "OBJECT", "properties": {"score": {"type": "INTEGER"}}, "required": ["score"]}
    router = {
        "contents": [{"role": "user", "parts": [{"text": "rate this"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema},
    }
    view = GEMINI.read(router, "/v1beta/models/gemini-2.5-flash-lite:generateContent")
    assert view is not None and view.side and view.json_schema == schema and view.stream is False
    structured = {"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": schema}}}
    assert RESPONSES.read(structured, "/v1/responses").json_schema == schema
    assert ANTHROPIC.read(anthropic_request(), "/v1/messages").json_schema is None


def test_only_claude_code_marks_subagent_requests():
    assert ANTHROPIC.subagent({"x-claude-code-agent-id": "agent-1"}) is True
    assert ANTHROPIC.subagent({}) is False
    assert not RESPONSES.subagent({"x-claude-code-agent-id": "a"}) and not GEMINI.subagent(
        {"x-claude-code-agent-id": "a"}
    )


# ---------------------------------------------------------------------------------------------
# Rendering tool calls in each API's form


def events_of(stream: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in stream.decode().splitlines() if line.startswith("data:")]


def test_responses_renders_function_call_items_with_json_string_arguments_and_call_ids():
    _, stream = RESPONSES.render(reply(calls=2), stream=True)
    events = events_of(stream)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    frames = stream.decode().split("\n\n")
    assert all(frame.startswith(f"event: {event['type']}\n") for frame, event in zip(frames, events, strict=False))
    done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["message", "function_call", "function_call"]
    assert done[0]["content"] == [{"type": "output_text", "text": "Reading it.", "annotations": []}]
    assert done[1]["call_id"] == "toolu_2_0" and done[1]["name"] == "exec_command"
    assert json.loads(done[1]["arguments"]) == {"cmd": "cat notes-0.txt", "tty": False}
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done
    assert completed["usage"] == {
        "input_tokens": 4200,
        "input_tokens_details": {"cached_tokens": 3000},
        "output_tokens": 85,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 4285,
    }


def test_gemini_renders_function_call_parts_in_sse_chunks_the_cli_can_read():
    _, stream = GEMINI.render(reply(calls=1), stream=True)
    # The SDK's reader: `data: <one line of JSON>` then CRLF CRLF, no `event:` lines.
    frames = stream.split(b"\r\n\r\n")
    assert frames[-1] == b"" and all(frame.startswith(b"data: {") and b"\n" not in frame for frame in frames[:-1])
    chunks = events_of(stream)
    assert [chunk["candidates"][0]["content"]["parts"] for chunk in chunks] == [
        [{"text": "Reading it."}],
        [
            {
                "functionCall": {
                    "id": "toolu_2_0",
                    "name": "exec_command",
                    "args": {"cmd": "cat notes-0.txt", "tty": False},
                }
            }
        ],
    ]
    assert "finishReason" not in chunks[0]["candidates"][0] and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[0]["usageMetadata"] == {"promptTokenCount": 4200, "totalTokenCount": 4200}
    assert chunks[-1]["usageMetadata"] == {
        "promptTokenCount": 4200,
        "candidatesTokenCount": 85,
        "totalTokenCount": 4285,
        "cachedContentTokenCount": 3000,
    }
    assert all(chunk["modelVersion"] == "test-model-1" for chunk in chunks)


def test_anthropic_renders_tool_use_blocks_as_before():
    document = ANTHROPIC.document(reply())
    assert document["id"] == "msg_scripted_02_0007" and document["stop_reason"] == "tool_use"
    assert document["content"][1] == {
        "type": "tool_use",
        "id": "toolu_2_0",
        "name": "exec_command",
        "input": {"cmd": "cat notes-0.txt", "tty": False},
    }
    text_only = ANTHROPIC.document(reply(calls=0))
    assert text_only["stop_reason"] == "end_turn" and [block["type"] for block in text_only["content"]] == ["text"]


def test_count_replies():
    assert ANTHROPIC.count_reply(1000) == {"input_tokens": 1000}
    assert GEMINI.count_reply(1000) == {"totalTokens": 1000}
