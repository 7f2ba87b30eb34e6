"""The OpenAI Responses API on the wire (OpenAI Codex CLI, `wire_api = "responses"`).

Gateway side:

* routes: `POST /v1/responses` (metered, capped); nothing is free;
* the session token is in `Authorization: Bearer`; upstream the key goes there too;
* the request's model and `stream` are body fields;
* usage comes from the final `response.completed` event's `response.usage` (also `response.incomplete`
  and `response.failed`, which end a stream too), or from a JSON body's `usage`:
  `{input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens}`.
  Canonical input = `input_tokens` − cached, cache reads = cached, output = `output_tokens` (which already
  counts the reasoning tokens); the API has no cache writes (0) and no five-minute/one-hour split (null).
  The served model is `response.model`. A stream's `error` event or `response.failed` is an upstream error;
* errors are `{"error": {"message", "type", "param", "code"}}`.

Retries, as observed with Codex 0.171.0 (`codex exec --json` against a loopback stand-in, and its
source, codex-rs `CodexErr::is_retryable` and the API error mapping): it reconnects five times, with
backoff, on every unexpected status — 401, 402, 403, 404, 413 and 5xx included — and ignores
`x-should-retry`. It gives up at once on a 400 (shown as the raw body) and on a 429 whose error type is
`insufficient_quota` ("Quota exceeded. Check your plan and billing details."), and on a stream's
`response.failed` with that code. So a cap refusal is `429` with type and code `insufficient_quota` — the
real API's answer to an exhausted billing quota, and terminal for Codex — plus `x-should-retry: false`
(which the OpenAI SDKs honour, should another CLI speak Responses through one). The gateway's other own
refusals keep their honest statuses (401, 404, 413, 500) and the header; Codex retries those, which costs
nothing (nothing reaches the upstream) but a few seconds.

Scripted-model side: the conversation text is `instructions` plus the text of every `message` item (any
role; `input_text`/`output_text` parts) and every tool result (`function_call_output`,
`custom_tool_call_output` — their `output` string or text parts); never a call's `arguments`. Codex 0.171
sends no `instructions`: its system prompt is a `developer` message. The assistant turns are the runs of
consecutive model items (assistant messages, function calls, reasoning …): Codex records a turn's items
together and appends the tool outputs after them. Offered tools are the `function` and `custom` tools'
names, the tools inside a `namespace`, and the hosted tools' types (`web_search`, `local_shell`). A tool
call is a `function_call` output item with a JSON-string `arguments` and a `call_id`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillbench.execution.wires.base import (
    CREDENTIAL_HEADERS,
    ErrorKind,
    ErrorReply,
    Reply,
    RequestView,
    RouteKind,
    StreamMeter,
    UsageRecord,
    bearer,
    compact,
    count,
    identifier,
    json_object,
    script_counts,
    unsplit_record,
)

RESPONSES_ROUTE = "/v1/responses"
NO_RETRY = ("x-should-retry", "false")
REFUSAL_STATUS = 429
REFUSAL_CODE = "insufficient_quota"
# The gateway's own answers: (status, error type, error code, whether it carries x-should-retry: false).
GATEWAY_ERRORS: dict[str, tuple[int, str, str | None, bool]] = {
    "unauthorized": (401, "invalid_request_error", "invalid_api_key", True),
    "not-found": (404, "invalid_request_error", None, True),
    "too-large": (413, "invalid_request_error", None, True),
    "refused": (REFUSAL_STATUS, REFUSAL_CODE, REFUSAL_CODE, True),
    "gateway-error": (500, "server_error", None, True),
    "unreachable": (502, "server_error", None, False),
}
ERROR_TYPES = {429: "rate_limit_exceeded"}
# Output items the model produced (a run of them is one assistant turn) and tool results.
MODEL_ITEMS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "tool_search_call",
    }
)
TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def usage_record(usage: Any) -> UsageRecord | None:
    """The canonical usage of a Responses `usage` object; None when it is not one."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = count(details.get("cached_tokens", 0)) if isinstance(details, dict) else 0
    total = count(usage.get("input_tokens"))
    uncached = total - cached if total is not None and cached is not None and cached <= total else None
    return unsplit_record(uncached, count(usage.get("output_tokens")), cached)


def _is_call(item: Any) -> bool:
    """An output item that calls a tool: `function_call`, and the custom, shell and other `*_call` items."""
    return isinstance(item, dict) and isinstance(item.get("type"), str) and item["type"].endswith("_call")


class UsageMeter(StreamMeter):
    """Reads the usage of one Responses answer: the terminal event's `response`, or a JSON body."""

    def __init__(self, content_type: str) -> None:
        super().__init__(content_type)
        self._usage: Any = None

    def _response(self, response: Any) -> None:
        if not isinstance(response, dict):
            return
        if isinstance(response.get("model"), str):
            self.served_model = response["model"]
        self.shape.response_id = identifier(response.get("id")) or self.shape.response_id
        output = response.get("output")
        if isinstance(output, list) and output:
            # The whole response's output (a JSON body, or the terminal event): what it said and called, in order.
            self.shape.tool_calls = [identifier(item.get("call_id")) for item in output if _is_call(item)]
            self.shape.text = any(isinstance(item, dict) and item.get("type") == "message" for item in output)

    def event(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        response = data.get("response")
        self._response(response)
        if kind in TERMINAL_EVENTS:
            self.stopped = True
            if isinstance(response, dict):
                self._usage = response.get("usage")
        if kind == "response.failed":
            error = response.get("error") if isinstance(response, dict) else None
            self.error_type = str(error.get("code") or "failed") if isinstance(error, dict) else "failed"
        elif kind == "error":
            self.error_type = str(data.get("code") or "error")

    def body(self, document: Any) -> None:
        self._response(document)
        if isinstance(document, dict):
            self._usage = document.get("usage")

    def usage(self, *, streamed: bool) -> UsageRecord | None:
        return usage_record(self._usage)


# ---------------------------------------------------------------------------------------------
# Reading a request


def _part_texts(content: Any) -> list[str]:
    """The text of a message's content or a tool output: a string, or parts with `text`."""
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts


def _item_type(item: dict[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"  # an easy input message may leave its type out
    return kind if isinstance(kind, str) else None


def conversation_text(body: dict[str, Any]) -> str:
    """`instructions` plus the text of every message and tool output of `input`, newline-joined."""
    parts = _part_texts(body.get("instructions"))
    items = body.get("input")
    if isinstance(items, str):
        parts.append(items)
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = _item_type(item)
        if kind == "message":
            parts.extend(_part_texts(item.get("content")))
        elif kind in TOOL_OUTPUTS:
            parts.extend(_part_texts(item.get("output")))
    return "\n".join(parts)


def _is_model_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = _item_type(item)
    return kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


def assistant_turns(body: dict[str, Any]) -> int:
    """The model's replies so far: runs of consecutive model items in `input`."""
    items = body.get("input")
    turns, previous = 0, False
    for item in items if isinstance(items, list) else []:
        current = _is_model_item(item)
        turns += current and not previous
        previous = current
    return turns


def offered_tools(body: dict[str, Any]) -> tuple[str, ...]:
    names: list[str] = []

    def collect(tools: Any) -> None:
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                collect(tool.get("tools"))
            elif isinstance(tool.get("name"), str):
                names.append(tool["name"])
            elif isinstance(tool.get("type"), str):
                names.append(tool["type"])

    collect(body.get("tools"))
    return tuple(names)


def _json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema" and isinstance(form.get("schema"), dict):
        return form["schema"]
    return None


# ---------------------------------------------------------------------------------------------
# Rendering a reply


def _usage_document(usage: Mapping[str, int]) -> dict[str, Any]:
    counts = script_counts(usage)
    cached = counts["cache_read_input_tokens"]
    prompt = counts["input_tokens"] + cached + counts["cache_creation_input_tokens"]
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": counts["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + counts["output_tokens"],
    }


def _output_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "id": f"msg_{reply.id}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.tool_calls:
        items.append(
            {
                "id": f"fc_{call.id}",
                "type": "function_call",
                "status": "completed",
                "name": call.name,
                "call_id": call.id,
                "arguments": compact(call.input),
            }
        )
    return items


def _response(reply: Reply, *, done: bool) -> dict[str, Any]:
    return {
        "id": f"resp_{reply.id}",
        "object": "response",
        "created_at": 0,
        "status": "completed" if done else "in_progress",
        "error": None,
        "incomplete_details": None,
        "model": reply.model,
        "output": _output_items(reply) if done else [],
        "usage": _usage_document(reply.usage) if done else None,
    }


def render_sse(reply: Reply) -> bytes:
    """The SSE stream of a reply: created, each output item added / streamed / done, completed."""
    frames: list[str] = []

    def emit(data: dict[str, Any]) -> None:
        data["sequence_number"] = len(frames)
        frames.append(f"event: {data['type']}\ndata: {compact(data)}\n\n")

    emit({"type": "response.created", "response": _response(reply, done=False)})
    emit({"type": "response.in_progress", "response": _response(reply, done=False)})
    for index, item in enumerate(_output_items(reply)):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part = item["content"][0]
            emit({"type": "response.output_item.added", "output_index": index, "item": dict(item, content=[])})
            emit({"type": "response.content_part.added", **where, "content_index": 0, "part": dict(part, text="")})
            emit({"type": "response.output_text.delta", **where, "content_index": 0, "delta": part["text"]})
            emit({"type": "response.output_text.done", **where, "content_index": 0, "text": part["text"]})
            emit({"type": "response.content_part.done", **where, "content_index": 0, "part": part})
        else:
            opening = dict(item, status="in_progress", arguments="")
            emit({"type": "response.output_item.added", "output_index": index, "item": opening})
            emit({"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]})
            emit({"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]})
        emit({"type": "response.output_item.done", "output_index": index, "item": item})
    emit({"type": "response.completed", "response": _response(reply, done=True)})
    return "".join(frames).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# The wire


class OpenAIResponses:
    """The OpenAI Responses API (see the module docstring)."""

    name = "openai-responses"
    conversation_field = "input"
    credential_headers = CREDENTIAL_HEADERS
    credential_params: frozenset[str] = frozenset()
    request_id_header = "x-request-id"

    # -- the gateway side ---------------------------------------------------------------------

    def route(self, route: str) -> RouteKind | None:
        return "messages" if route == RESPONSES_ROUTE else None

    def session_token(self, headers: Mapping[str, str], path: str) -> str | None:
        return bearer(headers)

    def upstream_auth(self, key: str) -> tuple[tuple[str, str], ...]:
        return (("Authorization", f"Bearer {key}"),)

    def request_summary(self, raw: bytes, path: str) -> tuple[str | None, bool]:
        body = json_object(raw)
        if not isinstance(body, dict):
            return None, False
        model = body.get("model")
        return (model if isinstance(model, str) else None), body.get("stream") is True

    def meter(self, content_type: str) -> UsageMeter:
        return UsageMeter(content_type)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        kind = error_type or ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        code = "invalid_api_key" if status == 401 else (kind if kind == REFUSAL_CODE else None)
        return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()

    def gateway_error(self, kind: ErrorKind, message: str) -> ErrorReply:
        status, error_type, code, no_retry = GATEWAY_ERRORS[kind]
        body = json.dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})
        return ErrorReply(status, body.encode(), (NO_RETRY,) if no_retry else ())

    # -- the scripted-model side --------------------------------------------------------------

    def read(self, body: Any, path: str) -> RequestView | None:
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            return None
        model = body.get("model")
        tools = offered_tools(body)
        return RequestView(
            text=conversation_text(body),
            assistant_turns=assistant_turns(body),
            tools=tools,
            side=not tools,
            model=model if isinstance(model, str) and model else None,
            stream=body.get("stream") is True,
            json_schema=_json_schema(body),
        )

    def subagent(self, headers: Mapping[str, str]) -> bool:
        return False

    def document(self, reply: Reply) -> dict[str, Any]:
        return _response(reply, done=True)

    def render(self, reply: Reply, *, stream: bool) -> tuple[str, bytes]:
        if stream:
            return "text/event-stream; charset=utf-8", render_sse(reply)
        return "application/json", json.dumps(self.document(reply)).encode("utf-8")

    def count_reply(self, tokens: int) -> dict[str, Any]:
        return {"object": "response.input_tokens", "input_tokens": tokens}

    def canonical_usage(self, usage: Mapping[str, int]) -> UsageRecord:
        counts = script_counts(usage)
        # No cache writes here: what the script calls written cache is plain input for this API.
        uncached = counts["input_tokens"] + counts["cache_creation_input_tokens"]
        return unsplit_record(uncached, counts["output_tokens"], counts["cache_read_input_tokens"])
