"""The Anthropic Messages API on the wire (Claude Code; opencode and GitHub Copilot CLI speak it too).

Gateway side:

* routes: `POST /v1/messages` (metered, capped), `POST /v1/messages/count_tokens` (free); the gateway
  answers `HEAD /` (Claude Code's preconnect, sent without credentials) itself, for every wire;
* the session token is in `x-api-key`, else `Authorization: Bearer`; upstream the key goes in `x-api-key`;
* the request's model and `stream` are body fields;
* usage: for SSE, `message_start.message.usage` overlaid with the final `message_delta.usage`
  (authoritative for output tokens; without it `output_tokens` is null); for JSON, the body's `usage`.
  The five-minute/one-hour split of cache writes comes from `usage.cache_creation` (null when not
  reported); the served model is `message.model`;
* errors are `{"type": "error", "error": {"type", "message"}}`. Every refusal the gateway makes itself
  carries `x-should-retry: false`: Claude Code 2.1.197 retries 401 and 429 (and 5xx) with backoff for
  minutes otherwise (docs/gateway-findings.md). A cap refusal is `402 billing_error`, which the CLI never
  retries: the session ends at once with `result.is_error: true, api_error_status: 402` and the gateway's
  message as `result.result`. An unreachable upstream is `502 api_error` without the header: the CLI may
  retry a transient failure.

Scripted-model side: the conversation text is the system prompt plus every text and tool-result text
in `messages` (never a tool call's input); assistant turns are the `assistant` messages; the offered
tools are `tools[].name`; tool calls are `tool_use` content blocks. A subagent request carries the
header `x-claude-code-agent-id`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillbench.execution.wires.base import (
    CREDENTIAL_HEADERS,
    USAGE_COUNTS,
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
)

MESSAGES_ROUTE = "/v1/messages"
COUNT_TOKENS_ROUTE = "/v1/messages/count_tokens"
NO_RETRY = ("x-should-retry", "false")
REFUSAL_STATUS = 402
REFUSAL_ERROR_TYPE = "billing_error"
# usage.cache_creation field -> ledger field
CACHE_SPLIT = (
    ("ephemeral_5m_input_tokens", "cache_creation_5m_input_tokens"),
    ("ephemeral_1h_input_tokens", "cache_creation_1h_input_tokens"),
)
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
# The gateway's own answers: (status, error type, whether it carries x-should-retry: false).
GATEWAY_ERRORS: dict[str, tuple[int, str, bool]] = {
    "unauthorized": (401, "authentication_error", True),
    "not-found": (404, "not_found_error", True),
    "too-large": (413, "request_too_large", True),
    "refused": (REFUSAL_STATUS, REFUSAL_ERROR_TYPE, True),
    "gateway-error": (500, "api_error", True),
    "unreachable": (502, "api_error", False),
}
SUBAGENT_HEADER = "x-claude-code-agent-id"
# Content blocks that call a tool (the model's own and the server's).
TOOL_CALL_BLOCKS = ("tool_use", "server_tool_use")


def usage_record(start: Any, final: Any = None, *, streamed: bool = False) -> UsageRecord | None:
    """The ledger's usage from a response's usage object(s); None when nothing was reported.

    `start` is the JSON body's `usage`, or for SSE `message_start.message.usage`; `final` is the
    last `message_delta.usage`, whose counts win. A stream without a final usage has no output
    count (`message_start` carries a placeholder).
    """
    if not isinstance(start, dict) and not isinstance(final, dict):
        return None
    merged: dict[str, Any] = dict(start) if isinstance(start, dict) else {}
    if isinstance(final, dict):
        merged.update({name: value for name, value in final.items() if value is not None})
    elif streamed:
        merged.pop("output_tokens", None)
    record: UsageRecord = {name: count(merged.get(name)) for name in USAGE_COUNTS}
    split = merged.get("cache_creation")
    for source, target in CACHE_SPLIT:
        record[target] = count(split.get(source)) if isinstance(split, dict) else None
    return record


class UsageMeter(StreamMeter):
    """Reads the usage of one Messages response from its bytes as they pass through (SSE events or one JSON body)."""

    def __init__(self, content_type: str) -> None:
        super().__init__(content_type)
        self.start_usage: Any = None
        self.final_usage: Any = None
        self._document: Any = None

    def event(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            self.start_usage = message.get("usage")
            self.served_model = message.get("model") if isinstance(message.get("model"), str) else None
            self.shape.response_id = identifier(message.get("id"))
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self._block(data["content_block"])
        elif kind == "message_delta" and isinstance(data.get("usage"), dict):
            self.final_usage = data["usage"]
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            error = data.get("error")
            self.error_type = str(error.get("type")) if isinstance(error, dict) else "error"

    def body(self, document: Any) -> None:
        self._document = document
        if not isinstance(document, dict):
            return
        if isinstance(document.get("model"), str):
            self.served_model = document["model"]
        self.shape.response_id = identifier(document.get("id"))
        for block in document.get("content") or []:
            if isinstance(block, dict):
                self._block(block)

    def _block(self, block: dict[str, Any]) -> None:
        if block.get("type") in TOOL_CALL_BLOCKS:
            self.shape.tool_calls.append(identifier(block.get("id")))
        elif block.get("type") == "text":
            self.shape.text = True

    def usage(self, *, streamed: bool) -> UsageRecord | None:
        if streamed:
            return usage_record(self.start_usage, self.final_usage, streamed=True)
        if not isinstance(self._document, dict):
            return None
        return usage_record(self._document.get("usage"))


# ---------------------------------------------------------------------------------------------
# Reading a request


def _texts_of(content: Any) -> list[str]:
    """Text carried by a message content (string, text blocks, tool results and their nested text)."""
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_result":
                texts.extend(_texts_of(block.get("content")))
    return texts


def conversation_text(body: dict[str, Any]) -> str:
    """System prompt text plus every text / tool-result text in ``messages``, newline-joined."""
    parts = _texts_of(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            parts.extend(_texts_of(message.get("content")))
    return "\n".join(parts)


def assistant_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def offered_tools(body: dict[str, Any]) -> tuple[str, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str))


# ---------------------------------------------------------------------------------------------
# Rendering a reply


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {compact(data)}\n\n"


def render_sse(message: dict[str, Any]) -> bytes:
    """The SSE stream for a complete message: start, one delta per block, message_delta, stop."""
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, stop_sequence=None, usage=dict(usage, output_tokens=1))
    frames = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        opening: dict[str, Any]
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": compact(block["input"])}
        frames.append(
            _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        frames.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": dict(usage),
            },
        )
    )
    frames.append(_sse("message_stop", {"type": "message_stop"}))
    return "".join(frames).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# The wire


class AnthropicMessages:
    """The Anthropic Messages API (see the module docstring)."""

    name = "anthropic"
    conversation_field = "messages"
    credential_headers = CREDENTIAL_HEADERS
    credential_params: frozenset[str] = frozenset()
    request_id_header = "request-id"

    # -- the gateway side ---------------------------------------------------------------------

    def route(self, route: str) -> RouteKind | None:
        if route == MESSAGES_ROUTE:
            return "messages"
        if route == COUNT_TOKENS_ROUTE:
            return "count_tokens"
        return None

    def session_token(self, headers: Mapping[str, str], path: str) -> str | None:
        return headers.get("x-api-key") or bearer(headers)

    def upstream_auth(self, key: str) -> tuple[tuple[str, str], ...]:
        return (("x-api-key", key),)

    def request_summary(self, raw: bytes, path: str) -> tuple[str | None, bool]:
        body = json_object(raw)
        if not isinstance(body, dict):
            return None, False
        model = body.get("model")
        return (model if isinstance(model, str) else None), body.get("stream") is True

    def meter(self, content_type: str) -> UsageMeter:
        return UsageMeter(content_type)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        kind = error_type or ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()

    def gateway_error(self, kind: ErrorKind, message: str) -> ErrorReply:
        status, error_type, no_retry = GATEWAY_ERRORS[kind]
        return ErrorReply(status, self.error_body(status, message, error_type), (NO_RETRY,) if no_retry else ())

    # -- the scripted-model side --------------------------------------------------------------

    def read(self, body: Any, path: str) -> RequestView | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return None
        model = body.get("model")
        return RequestView(
            text=conversation_text(body),
            assistant_turns=assistant_turns(body),
            tools=offered_tools(body),
            side=not body.get("tools"),
            model=model if isinstance(model, str) and model else None,
            stream=body.get("stream") is True,
        )

    def subagent(self, headers: Mapping[str, str]) -> bool:
        return bool(headers.get(SUBAGENT_HEADER))

    def document(self, reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
        return {
            "id": f"msg_{reply.id}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": reply.stop,
            "stop_sequence": None,
            "usage": dict(reply.usage),
        }

    def render(self, reply: Reply, *, stream: bool) -> tuple[str, bytes]:
        message = self.document(reply)
        if stream:
            return "text/event-stream; charset=utf-8", render_sse(message)
        return "application/json", json.dumps(message).encode("utf-8")

    def count_reply(self, tokens: int) -> dict[str, Any]:
        return {"input_tokens": tokens}

    def canonical_usage(self, usage: Mapping[str, int]) -> UsageRecord:
        record = usage_record(script_counts(usage))
        assert record is not None
        return record
