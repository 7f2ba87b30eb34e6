"""The model gateway: the one holder of the provider key, the cost meter and the spend cap of a cell's sessions.

A `ModelGateway` is an HTTP/1.1 reverse proxy for the model APIs that runs in the harness, outside
every sandbox, and listens on a Unix socket (0600, handed to the sandbox's host uid). Each session
gets a fresh token from `open_session` (`sbx-session-…`, never key-shaped) and speaks one wire API
(`skillbench.execution.wires`: Anthropic Messages, OpenAI Responses, Gemini), which owns that API's
routes, where its credentials are, how the key goes upstream, its usage meter and its error shape.
A token belongs to one session, so the token tells the wire: the gateway looks for a live token in
each wire's place and takes the session whose wire that place is. It drops every credential header
(and credential query parameter) the session sent and forwards to the upstream base URL with the
real key, which it alone holds. `close_session` revokes the token; the ledger stays readable.

What it answers:

* `HEAD /` (Claude Code's preconnect, sent without credentials): 200 from the gateway itself;
* the wire's metered routes (`POST /v1/messages`, `POST /v1/responses`,
  `POST /v1beta/models/<model>:streamGenerateContent` and `:generateContent`): admitted against the
  caps, forwarded, streamed back as it arrives (SSE is never buffered whole), metered;
* the wire's free routes (`POST /v1/messages/count_tokens`, `:countTokens`): admitted against the same caps,
  forwarded, recorded in the same ledger (cost 0);
* anything else: 404; a missing, unknown or revoked token, or one in another wire's place: 401, found
  before the body is read: a body over 64 KiB is never read, and the connection then closes (an unread
  body cannot be skipped). Error bodies have the wire's shape (the session's, or without a session the
  wire whose route the path is, else Anthropic's).

A request that names a model the price table has no price for (`pricing.model_price`) is refused before it
goes upstream, and it ends its session: every later request of the session is refused the same way
(`refused: model-unpriced`, the session's row `model-unpriced`, naming the model). The gateway could neither
meter nor cap it.

Every refusal the gateway makes itself carries `x-should-retry: false`, and the status of a cap refusal
is chosen per wire so that its CLI does not retry it (each wire module says what its CLI retries):
Anthropic `402 billing_error` (Claude Code 2.1.197 retries 401 and 429 (and 5xx) with backoff for
minutes otherwise, docs/gateway-findings.md; on a 402 the session ends at once with
`result.is_error: true, api_error_status: 402` and the gateway's message as `result.result`), OpenAI
Responses `429 insufficient_quota`, Gemini `400 FAILED_PRECONDITION`. Upstream statuses are passed
through unchanged; when the upstream cannot be reached (refused, TLS failure, timeout) the CLI gets a
502 in the wire's shape and may retry.

The literal key never leaves the gateway: it is not in any ledger field, and if an upstream
echoed it in a response body or header, the bytes are masked (same length, so Content-Length
holds) before they reach the session.

Caps are checked before a request goes upstream, against what is already spent: the session's
own ledger for `max_usd`, and this gateway's total plus `spent_elsewhere()` (the rest of the run,
never including this gateway's sessions) for `budget_usd`. At or over a cap, the request is
refused and nothing is forwarded. A request is never cut off mid-way, so a cap can be passed by
the request that crosses it (and any others already in flight). Requests whose cost is
unmeasured (`cost_usd` null: an answer without usage, or served by a model without a price) count 0
towards a cap.

The ledger (`ledger(token)`, plain JSON-serialisable dicts; `schemas/ledger.schema.json`, `$defs/session`):

    {
      "label": str,                  # the caller's name for the session
      "wire": str,                   # the wire API it speaks (anthropic, openai-responses, gemini)
      "open": bool,                  # false after close_session
      "opened_at": str, "closed_at": str | null,   # UTC ISO 8601, milliseconds, `Z`
      "max_usd": number | null,      # the session's cap
      "requests": [entry, ...],      # in arrival order
      "totals": totals
    }
    entry = {
      "seq": int,                    # 1, 2, … within the session
      "method": str, "path": str,    # path as the session sent it, query included, credential parameters removed
      "kind": "messages" | "count_tokens",   # a metered generation request of the wire, or a free count
      "model": str | null,           # the request's model (body field, or the path's for Gemini)
      "served_model": str | null,    # the model the response names (pricing follows it when given)
      "stream": bool,                # the request asked for SSE
      "status": int | null,          # HTTP status sent to the session (null while in flight or if none was sent)
      "outcome": "in-flight" | "ok" | "refused" | "upstream-error" | "upstream-failure" | "client-gone"
                 | "gateway-error",
      "refused": "session-cap" | "budget" | "model-unpriced" | null,
      "failure": str | null,         # what went wrong, for every outcome but ok and in-flight
      "request_id": str | null,      # the upstream's request-id header
      "response_id": str | null,     # the response's own id (message id, Responses id, Gemini responseId)
      "tool_calls": [str | null, ...] | null,   # one per tool call the response made, its API call id
      "text": bool | null,           # the response carried text (null: no response body was read)
      "started_at": str, "finished_at": str | null, "duration_s": number | null,
      "usage": usage | null,         # null when nothing was reported
      "cost_usd": number | null      # null = unmeasured (never 0 for an unknown); 0 for refusals, failures
    }                                #   before any byte came back, upstream error statuses and count_tokens
    usage = {
      "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
      "cache_creation_5m_input_tokens", "cache_creation_1h_input_tokens": int | null
    }
    totals = {
      "requests", "forwarded", "refused", "upstream_errors", "upstream_failures", "client_gone",
      "in_flight", "gateway_errors", "unmeasured": int,   # forwarded = sent (or tried) upstream
      "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
      "cache_creation_5m_input_tokens", "cache_creation_1h_input_tokens": int,   # sums of what was reported
      "cost_usd": number | null,     # null when any request's cost is unmeasured
      "measured_cost_usd": number    # the sum of the measured costs (what the caps count)
    }

Outcomes: `upstream-error` = the upstream answered with an error status (or an SSE `error`
event); `upstream-failure` = no usable answer (connection refused, TLS failure, timeout, a stream
cut short); `client-gone` = the session hung up before the answer was relayed (its clock ran
out while the request was in flight); `gateway-error` = the gateway itself failed (e.g.
`spent_elsewhere()` raised), a harness failure. The usage record is the wire's canonical one
(`wires.base`): uncached input, output (reasoning included), cache reads and writes, and the
five-minute/one-hour split of the writes where the API reports one (Anthropic's `usage.cache_creation`;
null otherwise; unsplit writes are priced as five-minute, as the CLI does). For Anthropic SSE it is
`message_start.message.usage` overlaid with the final `message_delta.usage` (authoritative for output
tokens; without it `output_tokens` is null); for JSON it is the body's `usage`.

Prices have the shape of config `agent.prices.usd_per_mtok` (model id -> input, output,
cache_write, cache_write_1h, cache_read, and a community table's `tiers`; `pricing.price_book` also looks
models up in the table `agent.prices.source` names), priced by `pricing.request_cost`; a model without a
complete price has `cost_usd` null.

The bridge into a cell without network (see docs/gateway-findings.md) is built by the pure
helpers at the end: the socket is bound into the sandbox at `BRIDGE_SOCKET`, and `bridge_argv`
starts the CLI through `FORWARDER_SOURCE` run by the system python3, which listens on
127.0.0.1:`BRIDGE_PORT` inside the cell's network namespace, forwards each connection to the
socket, and execs the CLI. Nested sandboxes hide the socket with `hide_bridge_args`.
"""

from __future__ import annotations

import copy
import hashlib
import http.client
import math
import os
import secrets
import socket
import socketserver
import ssl
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from skillbench.base.artifacts import utc_timestamp
from skillbench.base.errors import SkillbenchError
from skillbench.base.redaction import redact_text
from skillbench.base.serving import KeepAliveHandler, Serving
from skillbench.execution.pricing import model_price, request_cost
from skillbench.execution.wires import DEFAULT_WIRE, WIRES, WireApi, base, wire
from skillbench.execution.wires.anthropic import (
    CACHE_SPLIT,
    COUNT_TOKENS_ROUTE,
    MESSAGES_ROUTE,
    NO_RETRY,
    REFUSAL_ERROR_TYPE,
    REFUSAL_STATUS,
    UsageMeter,
    usage_record,
)
from skillbench.execution.wires.base import (
    MAX_METERED_JSON_BYTES,
    MAX_SSE_LINE_BYTES,
    USAGE_RECORD_FIELDS,
    ErrorReply,
    header_map,
    split_path,
    without_params,
)

__all__ = [
    "CACHE_SPLIT",
    "COUNT_TOKENS_ROUTE",
    "MAX_METERED_JSON_BYTES",
    "MAX_SSE_LINE_BYTES",
    "MESSAGES_ROUTE",
    "NO_RETRY",
    "REFUSAL_ERROR_TYPE",
    "REFUSAL_STATUS",
    "GatewayError",
    "ModelGateway",
    "SecretMask",
    "UsageMeter",
    "bridge_argv",
    "bridge_base_url",
    "hide_bridge_args",
    "ledger_totals",
    "request_cost",
    "usage_record",
]

TOKEN_PREFIX = "sbx-session-"
UPSTREAM_FAILURE_STATUS = 502
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the Messages API's own request limit
# The most of a request's body the gateway reads when the request has no live session's token.
UNAUTHORIZED_DRAIN_BYTES = 64 * 1024
# sockaddr_un's sun_path holds 108 bytes, its terminating NUL included.
MAX_SOCKET_PATH_BYTES = 107
RELAY_CHUNK_BYTES = 64 * 1024
UPSTREAM_TIMEOUT_S = 600.0  # the CLI's own request timeout
IDLE_UPSTREAM_CONNECTIONS = 4
# How long close_session waits for the session's requests in flight to settle, and stop for the handlers still
# settling: the last bytes of an answer reach the CLI a moment before the relay settles its entry, so a CLI that
# exits at once would otherwise leave its last request unmeasured. A request still waiting on the upstream stays
# in flight.
SETTLE_WAIT_S = 5.0
LEDGER_USAGE_FIELDS = USAGE_RECORD_FIELDS
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
# Headers a session sends that never go upstream besides its wire's credential headers (replaced by the key):
# the framing, and Accept-Encoding (the gateway asks for identity so it can read the usage).
DROPPED_REQUEST_HEADERS = HOP_BY_HOP | {"content-length", "accept-encoding", "expect"}
# The gateway sends its own Date and Server; the framing is the gateway's too.
DROPPED_RESPONSE_HEADERS = HOP_BY_HOP | {"content-length", "set-cookie", "proxy-authenticate", "date", "server"}


class GatewayError(SkillbenchError, RuntimeError):
    """The gateway cannot be built or started as asked."""


# ---------------------------------------------------------------------------------------------
# Usage: the wires' meters (`wires.*.UsageMeter`); Anthropic's is re-exported here as `UsageMeter`.


# What the key becomes in anything an upstream sends back (repeated, cut to the key's length).
MASK = b"KEY-MASKED-"


class SecretMask:
    """Replaces a secret in a byte stream with `MASK` of the same length, across chunk boundaries, holding back as
    little as it can.

    The mask is letters and dashes, so a masked key the agent pastes into a shell stays one plain word (a run
    of `*` would be a glob). Only a tail that could still be the start of the secret is held back, so an SSE
    event (which ends in a blank line) is never delayed.
    """

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.mask = (MASK * (len(self.secret) // len(MASK) + 1))[: len(self.secret)]
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = (self._held + chunk).replace(self.secret, self.mask)
        keep = 0
        position = data.find(self.secret[:1], max(0, len(data) - len(self.secret) + 1))
        while position != -1:
            if self.secret.startswith(data[position:]):
                keep = len(data) - position
                break
            position = data.find(self.secret[:1], position + 1)
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return held


# ---------------------------------------------------------------------------------------------
# Upstream


@dataclass(frozen=True)
class Upstream:
    """The upstream base URL, checked: http or https, a host, no credentials, query or fragment."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GatewayError(f"the gateway's upstream must be an http or https URL with a host, not {url!r}")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise GatewayError("the gateway's upstream URL must not carry credentials, a query or a fragment")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


class _UpstreamPool:
    """Keep-alive connections to the upstream, reused one request at a time."""

    def __init__(self, upstream: Upstream, context: ssl.SSLContext | None, timeout: float) -> None:
        self.upstream = upstream
        self.context = context
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def acquire(self) -> tuple[http.client.HTTPConnection, bool]:
        """A connection and whether it was used before (a stale keep-alive may have been closed by the peer)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        if self.upstream.scheme == "https":
            context = self.context or ssl.create_default_context()
            return http.client.HTTPSConnection(
                self.upstream.host, self.upstream.port, timeout=self.timeout, context=context
            ), False
        return http.client.HTTPConnection(self.upstream.host, self.upstream.port, timeout=self.timeout), False

    def release(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < IDLE_UPSTREAM_CONNECTIONS:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _describe_failure(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS verification failed: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failure: {exc.reason or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"name resolution failed: {exc}"
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------
# Sessions and the ledger


@dataclass
class _Session:
    label: str
    max_usd: float | None
    opened_at: str
    pool: _UpstreamPool
    wire: WireApi
    closed_at: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Why the gateway ended the session (it asked for a model it cannot price): every later request is refused.
    ended: str | None = None

    @property
    def measured_spend(self) -> float:
        return sum(entry["cost_usd"] for entry in self.requests if entry["cost_usd"] is not None)


def _digest(token: str) -> str:
    # Sessions are found by the token's digest: the gateway never keeps a live token it could leak.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _checked_usd(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite non-negative number of USD, not {value!r}")
    return float(value)


def ledger_totals(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The `totals` of a ledger from its request entries."""
    outcomes = [entry["outcome"] for entry in entries]
    totals: dict[str, Any] = {
        "requests": len(entries),
        "forwarded": sum(outcome not in ("refused", "gateway-error") for outcome in outcomes),
        "refused": outcomes.count("refused"),
        "upstream_errors": outcomes.count("upstream-error"),
        "upstream_failures": outcomes.count("upstream-failure"),
        "client_gone": outcomes.count("client-gone"),
        "in_flight": outcomes.count("in-flight"),
        "gateway_errors": outcomes.count("gateway-error"),
    }
    for name in LEDGER_USAGE_FIELDS:
        totals[name] = sum((entry["usage"] or {}).get(name) or 0 for entry in entries)
    costs = [entry["cost_usd"] for entry in entries if entry["outcome"] != "in-flight"]
    unmeasured = sum(cost is None for cost in costs) + totals["in_flight"]
    totals["unmeasured"] = unmeasured
    measured = round(float(sum(cost for cost in costs if cost is not None)), 10)
    totals["measured_cost_usd"] = measured
    totals["cost_usd"] = None if unmeasured else measured
    return totals


# ---------------------------------------------------------------------------------------------
# The gateway


class ModelGateway:
    """A reverse proxy for the model API on a Unix socket, holding the key; use as a context manager.

    `socket_owner` (uid, gid) hands the socket to the sandbox's host id (needs root). `prices` is
    `agent.prices.usd_per_mtok`. `budget_usd` with `spent_elsewhere` is the run-wide cap.
    `ssl_context` overrides the default verification (`ssl.create_default_context()`, which honours
    SSL_CERT_FILE) for an https upstream. `on_settled(label, entry)` is called (from a handler
    thread, with a copy) each time a request's ledger entry is final, e.g. to append it to a file.
    """

    def __init__(
        self,
        socket_path: str | Path,
        *,
        upstream: str | None = None,
        api_key: str,
        prices: Mapping[str, Any],
        budget_usd: float | None = None,
        spent_elsewhere: Callable[[], float] | None = None,
        socket_owner: tuple[int, int] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        upstream_timeout_s: float = UPSTREAM_TIMEOUT_S,
        on_settled: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise GatewayError("the gateway needs the provider key (a non-empty string)")
        self.socket_path = Path(socket_path)
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH_BYTES:
            raise GatewayError(
                f"the gateway's socket path {self.socket_path} is longer than the {MAX_SOCKET_PATH_BYTES} bytes a Unix "
                "socket's path may have; point TMPDIR at a shorter folder (a job's private roots are made there)"
            )
        self.upstream = upstream
        if upstream is not None:
            Upstream.parse(upstream)
        # Read as it is (a `pricing.PriceBook` converts a community table's entry only when a model is looked up).
        self.prices = prices
        self.budget_usd = _checked_usd(budget_usd, "budget_usd")
        self.spent_elsewhere = spent_elsewhere or (lambda: 0.0)
        self.socket_owner = socket_owner
        self.on_settled = on_settled
        self._key = api_key.strip()
        self._ssl_context = ssl_context
        self._upstream_timeout_s = upstream_timeout_s
        # One pool of keep-alive connections per upstream base URL (a scripted model is one upstream per session).
        self._pools: dict[str, _UpstreamPool] = {}
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._sessions: dict[str, _Session] = {}
        self._live: set[str] = set()
        self._connections: set[socket.socket] = set()
        self._unauthorized = 0
        self._internal_errors = 0
        self._server: _GatewayServer | None = None
        self._serving: Serving | None = None

    # -- life cycle -----------------------------------------------------------------------------

    def __enter__(self) -> ModelGateway:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._server is not None:
            raise GatewayError("the gateway is already running")
        _remove_stale_socket(self.socket_path)
        self._server = _GatewayServer(self)
        self._serving = Serving(self._server, "model-gateway")

    def _open_connections(self) -> list[socket.socket]:
        with self._lock:
            return list(self._connections)

    def stop(self) -> None:
        """Stop serving, hang up open connections, remove the socket (idempotent)."""
        if self._serving is None:
            return
        self._serving.stop(self._open_connections)
        with self._lock:
            # A request that was answered is settled (and reported) on its handler's thread a moment later; wait
            # for those threads, so whoever stops the gateway sees every request's spend, and none arrives after.
            self._settled.wait_for(lambda: not self._connections, timeout=SETTLE_WAIT_S)
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        _remove_stale_socket(self.socket_path)
        self._server, self._serving = None, None

    # -- sessions -------------------------------------------------------------------------------

    def open_session(
        self, label: str, *, upstream: str | None = None, max_usd: float | None = None, wire: str = DEFAULT_WIRE
    ) -> str:
        """A fresh token for one session speaking the wire API `wire`; give it to the CLI as its API key. Its
        requests go to `upstream` (a base URL), or to the gateway's own when that is None."""
        cap = _checked_usd(max_usd, "max_usd")
        api = _wire_api(wire)
        url = upstream if upstream is not None else self.upstream
        if url is None:
            raise GatewayError(f"session {label!r} has no upstream and the gateway has none either")
        parsed = Upstream.parse(url)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            pool = self._pools.get(url)
            if pool is None:
                pool = self._pools[url] = _UpstreamPool(parsed, self._ssl_context, self._upstream_timeout_s)
            opened = utc_timestamp(timespec="milliseconds")
            self._sessions[_digest(token)] = _Session(str(label), cap, opened, pool, api)
            self._live.add(_digest(token))
        return token

    def close_session(self, token: str, *, settle_wait_s: float = SETTLE_WAIT_S) -> dict[str, Any]:
        """Revoke `token` (its requests are refused from now on) and return its ledger.

        Call it once the session's CLI has ended: the revocation waits (at most `settle_wait_s`) for the requests
        in flight to settle, so every settled request finished before `closed_at`; one still waiting on the
        upstream then stays in the ledger as in flight."""
        digest = _digest(token)
        with self._lock:
            session = self._sessions[digest]
            if digest in self._live:
                self._settled.wait_for(
                    lambda: all(entry["outcome"] != "in-flight" for entry in session.requests), timeout=settle_wait_s
                )
                self._live.discard(digest)
                session.closed_at = utc_timestamp(timespec="milliseconds")
        return self.ledger(token)

    def ledger(self, token: str) -> dict[str, Any]:
        """The session's ledger (a copy; see the module docstring for its shape). KeyError for an unknown token."""
        digest = _digest(token)
        with self._lock:
            session = self._sessions[digest]
            entries = copy.deepcopy(session.requests)
            is_open = digest in self._live
        return {
            "label": session.label,
            "wire": session.wire.name,
            "open": is_open,
            "opened_at": session.opened_at,
            "closed_at": session.closed_at,
            "max_usd": session.max_usd,
            "requests": entries,
            "totals": ledger_totals(entries),
        }

    def spent_usd(self) -> float:
        """The measured spend of every session of this gateway."""
        with self._lock:
            return round(sum(session.measured_spend for session in self._sessions.values()), 10)

    def stats(self) -> dict[str, int]:
        """Requests refused for want of a live token, and handler errors the gateway swallowed."""
        with self._lock:
            return {"unauthorized": self._unauthorized, "internal_errors": self._internal_errors}

    # -- used by the handler --------------------------------------------------------------------

    def _live_session(self, token: str) -> _Session | None:
        digest = _digest(token)
        with self._lock:
            return self._sessions[digest] if digest in self._live else None

    def _count_unauthorized(self) -> None:
        with self._lock:
            self._unauthorized += 1

    def _unpriced(self, session: _Session, model: str | None) -> str | None:
        """Why `session` may not send this request: it names a model the price table cannot price (the gateway could
        neither meter nor cap it), or an earlier one did; that ends the session. None when it may."""
        with self._lock:
            if session.ended is not None:
                return session.ended
            if self._price(model) is not None:
                return None
            named = f"the model {model!r}" if model else "no model"
            session.ended = (
                f"skillbench gateway: this session's request names {named}, which has no price in the price table "
                "(agent.prices.usd_per_mtok): the gateway can neither meter nor cap it, so the session is ended"
            )
            return session.ended

    def _admission(self, session: _Session) -> tuple[str, str] | None:
        """(refusal reason, message) when a cap is already reached, else None."""
        with self._lock:
            own = session.measured_spend
            total = sum(item.measured_spend for item in self._sessions.values())
        if session.max_usd is not None and own >= session.max_usd:
            return "session-cap", (
                f"skillbench gateway: this session's spend cap of ${session.max_usd:.4f} is reached "
                f"(${own:.4f} spent); no further model requests are accepted"
            )
        if self.budget_usd is not None:
            run_total = total + float(self.spent_elsewhere())
            if run_total >= self.budget_usd:
                return "budget", (
                    f"skillbench gateway: the run's budget of ${self.budget_usd:.4f} is reached "
                    f"(${run_total:.4f} spent); no further model requests are accepted"
                )
        return None

    def _begin(self, session: _Session, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            entry["seq"] = len(session.requests) + 1
            session.requests.append(entry)
        return entry

    def _update(self, entry: dict[str, Any], **fields: Any) -> None:
        with self._lock:
            entry.update(fields)

    def _settle(self, session: _Session, entry: dict[str, Any], **fields: Any) -> None:
        with self._lock:
            entry.update(fields)
            final = copy.deepcopy(entry)
            self._settled.notify_all()
        if self.on_settled is not None:
            self.on_settled(session.label, final)

    def _price(self, model: str | None) -> Mapping[str, Any] | None:
        return model_price(self.prices, model)

    def _redact(self, text: str) -> str:
        return redact_text(text, [self._key])

    def _track(self, connection: socket.socket, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)
                self._settled.notify_all()

    def _internal_error(self) -> None:
        with self._lock:
            self._internal_errors += 1


def _remove_stale_socket(path: Path) -> None:
    """Remove a socket left at `path` by an earlier gateway; refuse to replace anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise GatewayError(f"{path} exists and is not a socket; give the gateway a fresh socket path")
    os.unlink(path)


class _GatewayServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, gateway: ModelGateway) -> None:
        self.gateway = gateway
        super().__init__(str(gateway.socket_path), _make_handler(gateway))

    def server_bind(self) -> None:
        super().server_bind()
        # Before listen(): nobody can connect until the socket has its final owner and mode.
        os.chmod(self.gateway.socket_path, 0o600)
        if self.gateway.socket_owner is not None:
            os.chown(self.gateway.socket_path, *self.gateway.socket_owner)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Never print a traceback: the gateway's only record is the ledger.
        self.gateway._internal_error()


def _wire_api(name: str) -> WireApi:
    try:
        return wire(name)
    except ValueError as exc:
        raise GatewayError(str(exc)) from exc


def _wire_of_route(route: str) -> WireApi:
    """The wire whose route `route` is (for the shape of an error without a session); Anthropic's by default."""
    return next((api for api in WIRES.values() if api.route(route) is not None), wire(DEFAULT_WIRE))


class _GatewayHandler(KeepAliveHandler):
    """One session connection (HTTP/1.1 keep-alive); its gateway is the `owner` set on the subclass `_make_handler`
    builds."""

    owner: ClassVar[ModelGateway]
    server_version = "skillbench-gateway"
    max_body_bytes = MAX_REQUEST_BYTES

    @property
    def gateway(self) -> ModelGateway:
        return self.owner

    # -- plumbing -------------------------------------------------------------------------------

    def _error(self, answer: ErrorReply) -> None:
        self.send_payload(answer.status, answer.body, headers=answer.headers)

    def _session(self) -> _Session | None:
        """The live session whose token is in its own wire's place in this request, if any."""
        headers = header_map(self.headers.items())
        for api in WIRES.values():
            token = api.session_token(headers, self.path)
            session = self.gateway._live_session(token) if token else None
            if session is not None and session.wire.name == api.name:
                return session
        return None

    def _unauthorized(self) -> None:
        """401, having read at most a small body (`UNAUTHORIZED_DRAIN_BYTES`, so a keep-alive connection stays in
        step): a larger one, or a chunked one, is never read (bounded by 32 MiB for a session only), and the
        connection closes after the answer, since its unread body cannot be skipped."""
        self.gateway._count_unauthorized()
        answer = _wire_of_route(split_path(self.path)[0]).gateway_error(
            "unauthorized", "skillbench gateway: no live session token"
        )
        length = self.headers.get("Content-Length") or "0"
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if not chunked and length.isdigit() and int(length) <= UNAUTHORIZED_DRAIN_BYTES:
            self.rfile.read(int(length))
            self._error(answer)
            return
        self.close_connection = True
        self.send_payload(answer.status, answer.body, headers=[*answer.headers, ("Connection", "close")])

    # -- verbs ----------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        if self.path.split("?", 1)[0] in ("", "/"):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_payload(404, b"")

    def _other(self) -> None:
        session = self._session()
        if session is None:
            self._unauthorized()
            return
        self.read_body()  # keep a keep-alive connection in step
        self._error(session.wire.gateway_error("not-found", f"skillbench gateway: no route for {self.command}"))

    do_GET = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _other

    def do_POST(self) -> None:
        # The token first: a request without a live session's token is refused before a byte of its body is read.
        session = self._session()
        if session is None:
            self._unauthorized()
            return
        raw = self.read_body()
        route = split_path(self.path)[0]
        if raw is None:
            self._error(
                session.wire.gateway_error("too-large", "skillbench gateway: unreadable or oversized request body")
            )
            return
        kind = session.wire.route(route)
        if kind is None:
            self._error(session.wire.gateway_error("not-found", f"skillbench gateway: no route for POST {route}"))
        else:
            self._forward(session, raw, kind)

    # -- forwarding -----------------------------------------------------------------------------

    def _forward(self, session: _Session, raw: bytes, kind: str) -> None:
        gateway = self.gateway
        model, stream = session.wire.request_summary(raw, self.path)
        entry = gateway._begin(
            session,
            {
                "seq": 0,
                "method": self.command,
                "path": without_params(self.path, session.wire.credential_params),
                "kind": kind,
                "model": model,
                "served_model": None,
                "stream": stream,
                "status": None,
                "outcome": "in-flight",
                "refused": None,
                "failure": None,
                "request_id": None,
                "response_id": None,
                "tool_calls": None,
                "text": None,
                "started_at": utc_timestamp(timespec="milliseconds"),
                "finished_at": None,
                "duration_s": None,
                "usage": None,
                "cost_usd": None,
            },
        )
        started = time.monotonic()

        def done(**fields: Any) -> None:
            gateway._settle(
                session,
                entry,
                finished_at=utc_timestamp(timespec="milliseconds"),
                duration_s=round(time.monotonic() - started, 3),
                **fields,
            )

        try:
            self._answer(session, raw, kind, entry, done)
        except Exception:
            # A gateway bug must not leave the request looking as if it were still in flight.
            if entry["outcome"] == "in-flight":
                done(outcome="gateway-error", failure="the gateway failed while handling this request")
            self.close_connection = True
            raise

    def _answer(
        self, session: _Session, raw: bytes, kind: str, entry: dict[str, Any], done: Callable[..., None]
    ) -> None:
        # An answer the gateway makes itself is settled in the ledger before it is sent: once the CLI has it, the
        # ledger says what it was (the session may end and be read at once).
        gateway = self.gateway
        api = session.wire
        unpriced = gateway._unpriced(session, entry["model"])
        if unpriced is not None:
            answer = api.gateway_error("refused", unpriced)
            done(status=answer.status, outcome="refused", refused="model-unpriced", failure=unpriced, cost_usd=0.0)
            self._error(answer)
            return
        try:
            # Every request, a free count of tokens too, is admitted against the caps: none goes upstream past one.
            refusal = gateway._admission(session)
        except Exception as exc:
            message = f"skillbench gateway: the spend so far could not be read ({type(exc).__name__})"
            answer = api.gateway_error("gateway-error", message)
            done(status=answer.status, outcome="gateway-error", failure=message, cost_usd=0.0)
            self._error(answer)
            return
        if refusal is not None:
            reason, message = refusal
            answer = api.gateway_error("refused", message)
            done(status=answer.status, outcome="refused", refused=reason, failure=message, cost_usd=0.0)
            self._error(answer)
            return
        try:
            connection, response = self._exchange(session.pool, raw, api)
        except (OSError, http.client.HTTPException) as exc:
            failure = gateway._redact(_describe_failure(exc))
            answer = api.gateway_error(
                "unreachable", f"skillbench gateway: the model API could not be reached ({failure})"
            )
            done(status=answer.status, outcome="upstream-failure", failure=failure, cost_usd=0.0)
            self._error(answer)
            return
        self._relay(session, connection, response, entry, kind, done)

    def _upstream_headers(self, length: int, api: WireApi) -> dict[str, str]:
        dropped = DROPPED_REQUEST_HEADERS | api.credential_headers
        headers = {name: value for name, value in self.headers.items() if name.lower() not in dropped}
        for name, value in api.upstream_auth(self.gateway._key):
            headers[name] = value
        headers["Accept-Encoding"] = "identity"
        headers["Content-Length"] = str(length)
        return headers

    def _exchange(
        self, pool: _UpstreamPool, raw: bytes, api: WireApi
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request upstream and read the response head; a stale keep-alive connection is retried once."""
        target = pool.upstream.prefix + without_params(self.path, api.credential_params)
        while True:
            connection, reused = pool.acquire()
            try:
                connection.request(self.command, target, body=raw, headers=self._upstream_headers(len(raw), api))
                return connection, connection.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                connection.close()
                if not reused:
                    raise
            except BaseException:
                connection.close()
                raise

    def _relay(
        self,
        session: _Session,
        connection: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        entry: dict[str, Any],
        kind: str,
        done: Callable[..., None],
    ) -> None:
        """Relay the upstream's answer as it arrives, then settle the ledger entry."""
        gateway, pool = self.gateway, session.pool
        meter = session.wire.meter(response.getheader("Content-Type") or "")
        gateway._update(entry, status=response.status, request_id=response.getheader(session.wire.request_id_header))
        try:
            chunked = self._send_head(response)
        except OSError:
            connection.close()
            done(outcome="client-gone", failure="the session hung up before the answer", cost_usd=0.0)
            return
        failure, client_gone = self._pump(response, meter, chunked)
        if failure is None and client_gone is None and not response.will_close:
            response.close()  # read1 leaves a fully read body open, which would block the connection's reuse
            pool.release(connection)
        else:
            connection.close()
            # The answer went out whole (with its length, or chunked), so only a broken one ends the session's
            # connection; an upstream that closes after each answer does not.
            self.close_connection = failure is not None or client_gone is not None
        usage = meter.finish()
        served = meter.served_model
        fields: dict[str, Any] = {"usage": usage, "served_model": served, **meter.shape.ledger_fields()}
        if failure is not None:
            done(outcome="upstream-failure", failure=failure, **fields)
        elif client_gone is not None:
            done(outcome="client-gone", failure=client_gone, **fields)
        elif response.status >= 400 or meter.error_type is not None:
            what = f"upstream status {response.status}"
            if meter.error_type is not None:
                what += f", stream error {meter.error_type}"
            # An error answer is not billed, unless it came after usage was reported (then: unknown).
            done(outcome="upstream-error", failure=what, cost_usd=0.0 if usage is None else None, **fields)
        elif kind == "count_tokens":
            done(outcome="ok", cost_usd=0.0, **fields)
        else:
            # Pricing follows the model that answered, when the answer names one.
            done(outcome="ok", cost_usd=request_cost(usage, gateway._price(served or entry["model"])), **fields)

    def _send_head(self, response: http.client.HTTPResponse) -> bool:
        """The status line and headers of the answer; True when the body goes out chunked (no length upstream)."""
        key = self.gateway._key
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in DROPPED_RESPONSE_HEADERS and key not in value:
                self.send_header(name, value)
        length = response.getheader("Content-Length")
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", length)
        self.end_headers()
        return length is None

    def _pump(
        self, response: http.client.HTTPResponse, meter: base.UsageMeter, chunked: bool
    ) -> tuple[str | None, str | None]:
        """Copy the body to the session chunk by chunk; (upstream failure, session gone), None where none happened."""
        mask = SecretMask(self.gateway._key)
        while True:
            try:
                chunk = response.read1(RELAY_CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as exc:
                return f"the answer broke off: {self.gateway._redact(_describe_failure(exc))}", None
            if not chunk and response.length:
                # read1 reports a peer that closed early as a quiet end of the body.
                return f"the answer broke off {response.length} bytes short", None
            meter.feed(chunk)
            data = mask.feed(chunk) if chunk else mask.flush()
            try:
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                if not chunk:
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                    return None, None
            except OSError:
                return None, "the session hung up while the answer was relayed"


def _make_handler(gateway: ModelGateway) -> type[_GatewayHandler]:
    return type("GatewayHandler", (_GatewayHandler,), {"owner": gateway})


# ---------------------------------------------------------------------------------------------
# The bridge into a cell without network: pure builders (see docs/gateway-findings.md)

# Where the gateway's socket appears inside a cell's sandbox; nested sandboxes cover the folder.
BRIDGE_SOCKET_DIR = "/run/skillbench-gateway"
BRIDGE_SOCKET = f"{BRIDGE_SOCKET_DIR}/model.sock"
# The forwarder's loopback port inside the cell's own network namespace (each cell has its own, so
# one fixed port never collides).
BRIDGE_PORT = 41952
BRIDGE_PYTHON = "/usr/bin/python3"

# The forwarder (skillbench/execution/forwarder.py), run by the system python3 inside the cell.
FORWARDER = Path(__file__).with_name("forwarder.py")
# Where the forwarder appears inside a cell's sandbox.
BRIDGE_FORWARDER = f"{BRIDGE_SOCKET_DIR}-forwarder.py"


def bridge_argv(
    argv: Sequence[str],
    *,
    forwarder: str = BRIDGE_FORWARDER,
    port: int = BRIDGE_PORT,
    socket_path: str = BRIDGE_SOCKET,
    python: str = BRIDGE_PYTHON,
    export: str | None = None,
) -> list[str]:
    """`argv` (the CLI, inside the sandbox) started behind the forwarder (`forwarder`: its path there). With
    `export`, the forwarder puts its address into that environment variable before it starts `argv` (port 0:
    a free port, for a host without network namespaces)."""
    options = [str(port), socket_path, *(["--export", export] if export else [])]
    return [python, "-I", "-S", forwarder, *options, "--", *argv]


def bridge_base_url(port: int = BRIDGE_PORT) -> str:
    """ANTHROPIC_BASE_URL for a CLI behind the bridge."""
    return f"http://127.0.0.1:{port}"


def hide_bridge_args() -> list[str]:
    """Bubblewrap options for a sandbox nested in a cell's (tool commands, git): cover the gateway's socket.

    A Unix socket ignores network namespaces, so a nested sandbox that binds the cell's root would
    otherwise reach the gateway directly.
    """
    return ["--tmpfs", BRIDGE_SOCKET_DIR]
