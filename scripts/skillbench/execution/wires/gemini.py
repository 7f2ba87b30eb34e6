"""The Gemini API (`generativelanguage`, v1beta) on the wire (Gemini CLI with `gemini-api-key` auth).

Gateway side:

* routes: `POST /v1beta/models/<model>:streamGenerateContent` (SSE with `?alt=sse`, which the CLI's SDK
  always sets) and `:generateContent` (metered, capped), `:countTokens` (free); `/v1/…` likewise;
* the session token is in `x-goog-api-key`, else the `?key=` query parameter, else `Authorization: Bearer`
  (the CLI sends that with `GEMINI_API_KEY_AUTH_MECHANISM=bearer`). Upstream the key goes in
  `x-goog-api-key`, and `key` and `access_token` are removed from the query (the ledger records the path
  without them);
* the model is the path's, and the method says whether it streams;
* usage is the `usageMetadata` of the last chunk that has one (SSE `data:` chunks, one JSON body, or a
  JSON array of chunks): `{promptTokenCount, cachedContentTokenCount, candidatesTokenCount,
  thoughtsTokenCount, toolUsePromptTokenCount}`, absent counts being 0 (proto3 JSON leaves zeros out).
  Canonical input = prompt + tool-use prompt − cached, cache reads = cached, output = candidates +
  thoughts; no cache writes (0), no five-minute/one-hour split (null). A stream that ends without a
  `finishReason` has no output count. The served model is `modelVersion`; a chunk `{"error": …}` is an
  upstream error;
* errors are `{"error": {"code", "message", "status"}}`.

Retries, as read in Gemini CLI 0.61.0's bundle (`packages/core/src/utils/retry.ts`, `isRetryableError`,
`classifyGoogleError`) and observed against a loopback stand-in (`-p … -o stream-json --yolo`): it retries
429, 499 and 5xx (ten attempts, 5 s to 30 s backoff) and network errors, never a 400, and it does not retry
401, 402, 403 or 404 (a 404 is "model not found"); it ignores `x-should-retry`. So a cap refusal is
`400 FAILED_PRECONDITION` — what the real API says when billing stands in the way, and never retried — with
the gateway's message, which the CLI shows in its `result` event. The gateway's other own refusals keep
their statuses (401 UNAUTHENTICATED, 404, 413, 500 INTERNAL — which the CLI does retry — and 502).

Scripted-model side: the conversation text is the `systemInstruction` text plus every text part of
`contents` (thoughts left out) and every string in a `functionResponse.response`; never a call's `args`.
The assistant turns are the `model` contents; offered tools are `tools[].functionDeclarations[].name`; a
tool call is a `functionCall` part (with the call's id) and its result arrives as a `functionResponse`
part. The SSE framing is `data: <json>` and CRLF CRLF, one data line per event and no `event:` line: the
SDK's stream reader matches exactly that. A reply's last chunk carries `finishReason: STOP` (without one
the CLI takes the stream for invalid and retries it) and the full `usageMetadata`; the earlier chunks
carry the prompt count only, as the real API's do.
"""

from __future__ import annotations

import json
import re
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
    query_value,
    script_counts,
    split_path,
    unsplit_record,
)

ROUTE = re.compile(
    r"/(?:v1beta|v1)/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent|countTokens)"
)
METHOD_KINDS: dict[str, RouteKind] = {
    "streamGenerateContent": "messages",
    "generateContent": "messages",
    "countTokens": "count_tokens",
}
NO_RETRY = ("x-should-retry", "false")
REFUSAL_STATUS = 400
REFUSAL_ERROR_STATUS = "FAILED_PRECONDITION"
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# The gateway's own answers: (status, error status, whether it carries x-should-retry: false).
GATEWAY_ERRORS: dict[str, tuple[int, str, bool]] = {
    "unauthorized": (401, "UNAUTHENTICATED", True),
    "not-found": (404, "NOT_FOUND", True),
    "too-large": (413, "INVALID_ARGUMENT", True),
    "refused": (REFUSAL_STATUS, REFUSAL_ERROR_STATUS, True),
    "gateway-error": (500, "INTERNAL", True),
    "unreachable": (502, "UNAVAILABLE", False),
}
JSON_MIME = "application/json"


def parse_route(route: str) -> tuple[str, str] | None:
    """(model, method) of a Gemini route, or None."""
    match = ROUTE.fullmatch(route)
    return (match["model"], match["method"]) if match else None


def usage_record(metadata: Any, *, finished: bool = True) -> UsageRecord | None:
    """The canonical usage of a `usageMetadata` object; None when it is not one."""
    if not isinstance(metadata, dict):
        return None

    def field(name: str) -> int | None:
        return count(metadata.get(name, 0))

    prompt, cached, tool_prompt = (
        field("promptTokenCount"),
        field("cachedContentTokenCount"),
        field("toolUsePromptTokenCount"),
    )
    uncached = None
    if prompt is not None and cached is not None and tool_prompt is not None and cached <= prompt + tool_prompt:
        uncached = prompt + tool_prompt - cached
    candidates, thoughts = field("candidatesTokenCount"), field("thoughtsTokenCount")
    output = candidates + thoughts if candidates is not None and thoughts is not None and finished else None
    return unsplit_record(uncached, output, cached)


def _first_candidate_parts(candidates: Any) -> list[dict[str, Any]]:
    """The parts of a chunk's first candidate (the one a CLI reads)."""
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        return []
    content = candidates[0].get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


class UsageMeter(StreamMeter):
    """Reads the usage of one Gemini answer: the last `usageMetadata` of its chunks."""

    def __init__(self, content_type: str) -> None:
        super().__init__(content_type)
        self._metadata: Any = None

    def event(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("error"), dict):
            error = data["error"]
            self.error_type = str(error.get("status") or error.get("code") or "error")
            return
        if isinstance(data.get("modelVersion"), str):
            self.served_model = data["modelVersion"]
        if isinstance(data.get("usageMetadata"), dict):
            self._metadata = data["usageMetadata"]
        self.shape.response_id = identifier(data.get("responseId")) or self.shape.response_id
        candidates = data.get("candidates")
        for part in _first_candidate_parts(candidates):
            if isinstance(part.get("functionCall"), dict):
                self.shape.tool_calls.append(identifier(part["functionCall"].get("id")))
            elif isinstance(part.get("text"), str) and part["text"] and part.get("thought") is not True:
                self.shape.text = True
        if isinstance(candidates, list) and any(
            isinstance(candidate, dict) and candidate.get("finishReason") for candidate in candidates
        ):
            self.stopped = True

    def body(self, document: Any) -> None:
        for chunk in document if isinstance(document, list) else [document]:
            if isinstance(chunk, dict):
                self.event(chunk)

    def usage(self, *, streamed: bool) -> UsageRecord | None:
        return usage_record(self._metadata, finished=self.stopped or not streamed)


# ---------------------------------------------------------------------------------------------
# Reading a request


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (a function response's fields), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def _part_texts(parts: Any) -> list[str]:
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        response = part.get("functionResponse")
        if isinstance(response, dict):
            texts.extend(_strings(response.get("response")))
    return texts


def _instruction_texts(instruction: Any) -> list[str]:
    if isinstance(instruction, str):
        return [instruction]
    if isinstance(instruction, dict):
        return _part_texts(instruction.get("parts"))
    return _part_texts(instruction)


def conversation_text(body: dict[str, Any]) -> str:
    """`systemInstruction` text plus every text part and function response of `contents`, newline-joined."""
    parts = _instruction_texts(body.get("systemInstruction"))
    for content in body.get("contents") or []:
        if isinstance(content, dict):
            parts.extend(_part_texts(content.get("parts")))
    return "\n".join(parts)


def assistant_turns(body: dict[str, Any]) -> int:
    return sum(1 for c in body.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model")


def offered_tools(body: dict[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else []:
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                names.append(declaration["name"])
    return tuple(names)


def _json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    config = body.get("generationConfig")
    if not isinstance(config, dict) or not str(config.get("responseMimeType") or "").startswith(JSON_MIME):
        return None
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return schema if isinstance(schema, dict) else {}


# ---------------------------------------------------------------------------------------------
# Rendering a reply


def _usage_metadata(usage: Mapping[str, int], *, final: bool) -> dict[str, int]:
    counts = script_counts(usage)
    cached = counts["cache_read_input_tokens"]
    prompt = counts["input_tokens"] + cached + counts["cache_creation_input_tokens"]
    if not final:
        return {"promptTokenCount": prompt, "totalTokenCount": prompt}
    metadata = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": counts["output_tokens"],
        "totalTokenCount": prompt + counts["output_tokens"],
    }
    if cached:
        metadata["cachedContentTokenCount"] = cached
    return metadata


def _parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    for call in reply.tool_calls:
        parts.append({"functionCall": {"id": call.id, "name": call.name, "args": call.input}})
    return parts


def _chunk(reply: Reply, parts: list[dict[str, Any]], *, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if final:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": _usage_metadata(reply.usage, final=final),
        "modelVersion": reply.model,
        "responseId": reply.id,
    }


def render_sse(reply: Reply) -> bytes:
    """The SSE stream of a reply: one chunk per part, the last with the finish reason and the full usage."""
    parts = _parts(reply) or [{"text": ""}]
    chunks = [_chunk(reply, [part], final=index == len(parts) - 1) for index, part in enumerate(parts)]
    return "".join(f"data: {compact(chunk)}\r\n\r\n" for chunk in chunks).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# The wire


class Gemini:
    """The Gemini API (see the module docstring)."""

    name = "gemini"
    conversation_field = "contents"
    credential_headers = CREDENTIAL_HEADERS
    credential_params = frozenset({"key", "access_token"})
    request_id_header = "x-request-id"

    # -- the gateway side ---------------------------------------------------------------------

    def route(self, route: str) -> RouteKind | None:
        parsed = parse_route(route)
        return METHOD_KINDS[parsed[1]] if parsed else None

    def session_token(self, headers: Mapping[str, str], path: str) -> str | None:
        return headers.get("x-goog-api-key") or query_value(path, "key") or bearer(headers)

    def upstream_auth(self, key: str) -> tuple[tuple[str, str], ...]:
        return (("x-goog-api-key", key),)

    def request_summary(self, raw: bytes, path: str) -> tuple[str | None, bool]:
        parsed = parse_route(split_path(path)[0])
        if parsed is None:
            return None, False
        return parsed[0], parsed[1] == "streamGenerateContent"

    def meter(self, content_type: str) -> UsageMeter:
        return UsageMeter(content_type)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        name = error_type or STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "UNKNOWN")
        return json.dumps({"error": {"code": status, "message": message, "status": name}}).encode()

    def gateway_error(self, kind: ErrorKind, message: str) -> ErrorReply:
        status, name, no_retry = GATEWAY_ERRORS[kind]
        return ErrorReply(status, self.error_body(status, message, name), (NO_RETRY,) if no_retry else ())

    # -- the scripted-model side --------------------------------------------------------------

    def read(self, body: Any, path: str) -> RequestView | None:
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return None
        model, stream = self.request_summary(b"", path)
        tools = offered_tools(body)
        return RequestView(
            text=conversation_text(body),
            assistant_turns=assistant_turns(body),
            tools=tools,
            side=not tools,
            model=model,
            stream=stream,
            json_schema=_json_schema(body),
        )

    def subagent(self, headers: Mapping[str, str]) -> bool:
        return False

    def document(self, reply: Reply) -> dict[str, Any]:
        return _chunk(reply, _parts(reply) or [{"text": ""}], final=True)

    def render(self, reply: Reply, *, stream: bool) -> tuple[str, bytes]:
        if stream:
            return "text/event-stream", render_sse(reply)
        return "application/json; charset=UTF-8", json.dumps(self.document(reply)).encode("utf-8")

    def count_reply(self, tokens: int) -> dict[str, Any]:
        return {"totalTokens": tokens}

    def canonical_usage(self, usage: Mapping[str, int]) -> UsageRecord:
        counts = script_counts(usage)
        uncached = counts["input_tokens"] + counts["cache_creation_input_tokens"]
        return unsplit_record(uncached, counts["output_tokens"], counts["cache_read_input_tokens"])
