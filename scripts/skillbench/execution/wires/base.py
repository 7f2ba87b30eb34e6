"""What a wire API is (`WireApi`), the neutral values both sides exchange with it, and the helpers they share.

Neutral values, the same for every API:

* the canonical usage record (`USAGE_RECORD_FIELDS`): `input_tokens` = uncached input,
  `output_tokens` (reasoning and thoughts included), `cache_read_input_tokens`,
  `cache_creation_input_tokens`, and the five-minute/one-hour split of the cache writes where the
  API reports one (null otherwise); a count the response did not report is null;
* `ErrorReply`: a status, headers and a body the gateway answers itself;
* `RequestView`: what the scripted model reads from a request (conversation text, assistant turns
  so far, the tools it offers, whether it is a side query without tools, its model, whether it streams);
* `Reply` / `ToolCall`: what the scripted model answers, with its usage in the model script's
  (Anthropic) terms, which each wire converts to its own fields (`WireApi.canonical_usage` says what
  the gateway's meter reads back from the rendered reply).

`StreamMeter` reads a response's bytes as they pass (SSE events split anywhere, LF or CRLF line ends,
or one JSON body); each wire's meter says which events carry its usage, and what the response was
(`ResponseShape`: its id, its tool calls' ids, whether it said anything), which is how a transcript's
turns are joined to the ledger's requests (`skillbench.interop`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl

# The ledger's usage record; the first four are the script's usage fields too (Anthropic's names).
USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
USAGE_RECORD_FIELDS = (*USAGE_COUNTS, "cache_creation_5m_input_tokens", "cache_creation_1h_input_tokens")
MAX_METERED_JSON_BYTES = 16 * 1024 * 1024
MAX_SSE_LINE_BYTES = 4 * 1024 * 1024
# Headers that carry a credential in any of the APIs: never forwarded, whichever wire a session speaks.
CREDENTIAL_HEADERS = frozenset(
    {"x-api-key", "authorization", "proxy-authorization", "cookie", "x-goog-api-key", "api-key"}
)
# What a route is on the gateway: a generation request (metered, capped) or a free one (never capped).
RouteKind = Literal["messages", "count_tokens"]
# The refusals and failures the gateway answers itself.
ErrorKind = Literal["unauthorized", "not-found", "too-large", "refused", "gateway-error", "unreachable"]

UsageRecord = dict[str, int | None]
# Maps a script step's tool call (Claude Code's tool names and arguments) onto the session's CLI's tool.
ToolForm = Callable[[str, dict[str, Any]], tuple[str, dict[str, Any]]]


def count(value: Any) -> int | None:
    """A token count: a non-negative int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def header_map(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Request headers by lower-cased name; the first of repeated headers wins (as `Message.get` does)."""
    headers: dict[str, str] = {}
    for name, value in items:
        headers.setdefault(name.lower(), value)
    return headers


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def split_path(path: str) -> tuple[str, str]:
    """(route, query) of a request target: the path without its query and trailing slashes, and the raw query."""
    route, _, query = path.partition("?")
    return route.rstrip("/"), query


def query_value(path: str, name: str) -> str | None:
    """The first value of query parameter `name` in a request target."""
    for key, value in parse_qsl(split_path(path)[1], keep_blank_values=True):
        if key == name:
            return value
    return None


def without_params(path: str, names: frozenset[str]) -> str:
    """The request target with every query parameter named in `names` removed; the rest stays byte for byte."""
    route, separator, query = path.partition("?")
    if not separator or not names:
        return path
    kept = [part for part in query.split("&") if part.split("=", 1)[0] not in names]
    return f"{route}?{'&'.join(kept)}" if kept else route


def json_object(raw: bytes) -> Any:
    """The JSON value of a request or response body; None when it is not JSON."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Neutral values


@dataclass(frozen=True)
class ErrorReply:
    """An answer the gateway makes itself."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RequestView:
    """A request as the scripted model reads it, the same for every wire.

    `text` is the conversation text `when`/`unless` phrases are matched against: the system prompt or
    instructions, user text and tool results (never a tool call's arguments). `assistant_turns` is the
    number of model replies already in the conversation; `tools` the names of the tools it offers; `side`
    a side query without tools (a title, a router); `json_schema` the schema a side query asks its answer
    to follow, when it asks for JSON.
    """

    text: str
    assistant_turns: int
    tools: tuple[str, ...]
    side: bool
    model: str | None
    stream: bool
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply, in the session's CLI's tool names and arguments."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A scripted reply: text and tool calls, usage in the script's (Anthropic) terms, the model, and why it stops.

    `id` is the reply's neutral id (`scripted_<turn>_<sequence>`); each wire derives its own ids from it.
    """

    id: str
    model: str
    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Mapping[str, int] = field(default_factory=dict)

    @property
    def stop(self) -> str:
        """`tool_use` when the reply calls tools, else `end_turn`."""
        return "tool_use" if self.tool_calls else "end_turn"


def script_counts(usage: Mapping[str, int]) -> dict[str, int]:
    """The script's usage with every field present (absent = 0)."""
    return {name: int(usage.get(name, 0)) for name in USAGE_COUNTS}


def unsplit_record(input_tokens: int | None, output: int | None, cache_read: int | None) -> UsageRecord:
    """A canonical record for an API without cache writes (OpenAI, Gemini): no writes, no five-minute/one-hour split."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": 0,
        "cache_creation_5m_input_tokens": None,
        "cache_creation_1h_input_tokens": None,
    }


@dataclass
class ResponseShape:
    """What a response was, as far as a transcript needs it: the API's own id of the response (Anthropic's
    message id, a Responses id, Gemini's responseId), one entry per tool call in order (the API's call id,
    None where the API gives none) and whether it carried text. Never its content: the ledger keeps counts."""

    response_id: str | None = None
    tool_calls: list[str | None] = field(default_factory=list)
    text: bool = False

    def ledger_fields(self) -> dict[str, Any]:
        return {"response_id": self.response_id, "tool_calls": list(self.tool_calls), "text": self.text}


def identifier(value: Any) -> str | None:
    """An id field's value when it is a non-empty string of at most 256 characters, else None."""
    return value if isinstance(value, str) and 0 < len(value) <= 256 else None


# ---------------------------------------------------------------------------------------------
# The meter


class StreamMeter:
    """Reads one response's usage from its bytes as they pass through: SSE events, or one JSON body.

    SSE lines end in LF (CRLF tolerated); a CR alone is not a line end here, so a CRLF split across two
    chunks never reads as an extra blank line. A subclass handles each event's JSON data (`event`) and a
    whole JSON body (`body`), and says what was read (`usage`). Past `MAX_SSE_LINE_BYTES` in one line or
    `MAX_METERED_JSON_BYTES` of JSON the usage is unknown (None).
    """

    def __init__(self, content_type: str) -> None:
        self.sse = content_type.split(";", 1)[0].strip().lower() == "text/event-stream"
        self.served_model: str | None = None
        self.error_type: str | None = None
        self.stopped = False
        self.shape = ResponseShape()
        self._pending = b""
        self._data: list[bytes] = []
        self._body = bytearray()
        self._overflow = False

    def feed(self, chunk: bytes) -> None:
        if self._overflow:
            return
        if not self.sse:
            self._body += chunk
            self._overflow = len(self._body) > MAX_METERED_JSON_BYTES
            return
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            self._line_done(line.rstrip(b"\r"))
        if len(self._pending) > MAX_SSE_LINE_BYTES:
            self._overflow = True

    def _line_done(self, line: bytes) -> None:
        if not line:
            if self._data:
                data = json_object(b"\n".join(self._data))
                if isinstance(data, dict):
                    self.event(data)
            self._data = []
        elif line.startswith(b"data:"):
            self._data.append(line[5:].lstrip(b" "))

    def finish(self) -> UsageRecord | None:
        """The usage read so far (call once the body has ended); None when nothing was reported."""
        if self._overflow:
            return None
        if self.sse:
            if self._pending:
                self._line_done(self._pending.rstrip(b"\r"))
                self._pending = b""
            self._line_done(b"")
            return self.usage(streamed=True)
        self.body(json_object(bytes(self._body)))
        return self.usage(streamed=False)

    # -- what a wire's meter says ---------------------------------------------------------------

    def event(self, data: dict[str, Any]) -> None:
        """One SSE event's JSON data."""
        raise NotImplementedError

    def body(self, document: Any) -> None:
        """The whole JSON body (None when it is not JSON)."""
        raise NotImplementedError

    def usage(self, *, streamed: bool) -> UsageRecord | None:
        """The canonical usage of what was read."""
        raise NotImplementedError


class UsageMeter(Protocol):
    """What the gateway reads from a meter while it relays a response."""

    served_model: str | None
    error_type: str | None
    stopped: bool
    shape: ResponseShape

    def feed(self, chunk: bytes) -> None: ...

    def finish(self) -> UsageRecord | None: ...


# ---------------------------------------------------------------------------------------------
# The protocol


class WireApi(Protocol):
    """One model API, both as the gateway relays it and as the scripted model plays it."""

    # The name sessions and adapters use; the request field that holds the conversation (for error messages).
    name: str
    conversation_field: str
    # Headers (lower case) a session's credential may be in, and the query parameters; both are removed upstream.
    credential_headers: frozenset[str]
    credential_params: frozenset[str]
    # The response header that carries the upstream's request id.
    request_id_header: str

    # -- the gateway side ---------------------------------------------------------------------

    def route(self, route: str) -> RouteKind | None:
        """What a POST to `route` (a path without query or trailing slash) is; None: no such route."""
        ...

    def session_token(self, headers: Mapping[str, str], path: str) -> str | None:
        """The session token of a request (`headers` by lower-case name, `path` with its query), where this API
        carries its key."""
        ...

    def upstream_auth(self, key: str) -> tuple[tuple[str, str], ...]:
        """The header(s) that carry the real key upstream."""
        ...

    def request_summary(self, raw: bytes, path: str) -> tuple[str | None, bool]:
        """(model, streams) of a generation request."""
        ...

    def meter(self, content_type: str) -> UsageMeter:
        """A fresh meter of one response with this content type."""
        ...

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        """An error document in this API's shape (`error_type`: this API's error type or status; None: by status)."""
        ...

    def gateway_error(self, kind: ErrorKind, message: str) -> ErrorReply:
        """The gateway's own answer of `kind`; a cap refusal is chosen so that the CLI does not retry it."""
        ...

    # -- the scripted-model side --------------------------------------------------------------

    def read(self, body: Any, path: str) -> RequestView | None:
        """The neutral view of a generation request's JSON body; None when it is not one."""
        ...

    def subagent(self, headers: Mapping[str, str]) -> bool:
        """Whether the CLI marked the request as a subagent's (a fresh conversation on the same endpoint)."""
        ...

    def document(self, reply: Reply) -> dict[str, Any]:
        """The reply as this API's JSON response."""
        ...

    def render(self, reply: Reply, *, stream: bool) -> tuple[str, bytes]:
        """(content type, body) of the reply: this API's SSE stream, or its JSON response."""
        ...

    def count_reply(self, tokens: int) -> dict[str, Any]:
        """The answer to a free token-count request."""
        ...

    def canonical_usage(self, usage: Mapping[str, int]) -> UsageRecord:
        """The canonical record the gateway meters from a reply rendered with the script's `usage`."""
        ...
