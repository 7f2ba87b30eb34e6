"""The scripted model: a loopback Anthropic Messages server that plays a per-task model script.

This module owns the offline stand-in for the model behind the real Claude Code CLI:

* ``load_model_script`` / ``session_steps``: read and validate ``tasks/<suite>/model-script.yaml``
  (``model-script/v1``, schema ``schemas/model-script.schema.json``) and pick one session's steps.
* ``ScriptedModel``: a context manager running a ``ThreadingHTTPServer`` on ``127.0.0.1:<free port>``
  for one session. ``POST /v1/messages`` (streaming SSE or JSON), ``HEAD /``, ``POST .../count_tokens``;
  everything else is a 404 in the Anthropic error shape.

Step choice is stateless with respect to request order: it depends only on the request itself.
``k`` = number of assistant messages in ``messages``; the eligible steps are those whose ``when``
phrases all occur (and no ``unless`` phrase occurs) in the conversation text (system prompt plus
every text and tool-result text in ``messages``, compared case-insensitively with whitespace runs
collapsed); the reply is ``eligible[k]`` or, past the end, a final text turn. A request without
``tools`` (a side query such as a title request) gets ``"ok"``; a subagent request (header
``x-claude-code-agent-id``) gets the final text, so an Agent tool call cannot recurse into the script.
``{{name}}`` in step strings is replaced from ``variables``; ``{{api_key}}`` is the request's key.

Runs can differ like real ones (``resolve_variation``): a step with ``chance: p`` is played with
probability p, a ``choose`` step plays one of its weighted alternatives (a list of steps each),
and ``defaults.usage_jitter`` scales every token count of every turn by a lognormal factor with
that log-scale standard deviation. All draws are made once, when the session's model is built,
from a hash of its ``variation_key`` (the cell passes task/arm/run/role) and the step's position
in the script, so a rerun of the same cell plays exactly the same turns and an edit to one step
leaves every other step's draws alone. Without a variation key the script plays its nominal run:
no chance step, the first alternative of every choice, no jitter.
The only state kept is the per-step counter of scripted HTTP failures (``fail.times``), under a lock.

The request log never contains headers, keys or bodies: one JSON line per request with the path,
whether it streamed, the chosen step index (or null), the kind of reply and the HTTP status.

Run ``python -m skillbench.execution.scripted_model SCRIPT TASK ROLE`` to serve one session by hand.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import re
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import NormalDist
from typing import Any

from skillbench.base.artifacts import ArtifactError, validate
from skillbench.base.records import USAGE_FIELDS

__all__ = [
    "BUILTIN_DEFAULTS",
    "ScriptedModel",
    "conversation_text",
    "load_model_script",
    "main",
    "resolve_variation",
    "session_steps",
]

BUILTIN_DEFAULTS: dict[str, Any] = {
    "usage": {
        "input_tokens": 1500,
        "output_tokens": 120,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    },
    "final_text": "Done.",
}
SIDE_QUERY_TEXT = "ok"
SIDE_QUERY_USAGE = {
    "input_tokens": 8,
    "output_tokens": 1,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}
COUNT_TOKENS_REPLY = {"input_tokens": 1000}
DEFAULT_MODEL = "claude-sonnet-4-20250514"
MAX_BODY_BYTES = 64 * 1024 * 1024
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_WHITESPACE = re.compile(r"\s+")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


# ---------------------------------------------------------------------------------------------
# Script loading


def load_model_script(path: str | Path) -> dict[str, Any]:
    """Read a ``model-script/v1`` YAML file; raise ``ArtifactError`` naming the file and the bad field."""
    from skillbench.experiment.configcheck import read_yaml

    path = Path(path)
    document = read_yaml(path, what="model script")
    return validate(document, "model-script", source=path)


def session_steps(script: dict[str, Any], task: str, role: str) -> list[dict[str, Any]]:
    """A deep copy of the steps the script plays for ``task`` in session role ``role``."""
    tasks = script.get("tasks") or {}
    if task not in tasks:
        raise ArtifactError(f"model script: no entry for task {task!r} (tasks: {', '.join(sorted(tasks)) or 'none'})")
    roles = tasks[task] or {}
    if role not in roles:
        raise ArtifactError(
            f"model script: task {task!r} has no steps for role {role!r} (roles: {', '.join(sorted(roles)) or 'none'})"
        )
    return copy.deepcopy(list(roles[role]))


def proposer_steps(script: dict[str, Any]) -> list[dict[str, Any]]:
    """A deep copy of the proposer's steps; the script must have a top-level `proposer` list."""
    if not script.get("proposer"):
        raise ArtifactError("model script: no `proposer` steps; the scripted proposer has nothing to play")
    return copy.deepcopy(list(script["proposer"]))


# ---------------------------------------------------------------------------------------------
# Per-run variation


def _uniform(key: str, path: str, purpose: str) -> float:
    """A number in (0, 1) fixed by (key, step path, purpose): the same cell always draws the same."""
    digest = hashlib.sha256(f"{key}\0{path}\0{purpose}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def _merged_phrases(outer: dict[str, Any], inner: dict[str, Any], field: str) -> list[str] | None:
    phrases = _phrases(outer.get(field)) + _phrases(inner.get(field))
    return phrases or None


def _jittered(usage: dict[str, Any], jitter: float, key: str, path: str) -> dict[str, int]:
    result = {}
    for field, value in usage.items():
        factor = math.exp(jitter * NormalDist().inv_cdf(_uniform(key, path, f"usage:{field}")))
        result[field] = max(0, round(int(value) * factor))
    return result


def resolve_variation(
    steps: list[dict[str, Any]], *, variation_key: str | None, defaults_usage: dict[str, int], jitter: float = 0.0
) -> list[dict[str, Any]]:
    """The concrete steps one session plays: chances drawn, choices made, usage jittered.

    ``variation_key`` None plays the nominal run (see the module docstring). A ``choose``
    step's ``when``/``unless`` phrases apply to every step of the chosen alternative. Steps
    without their own usage get the (jittered) defaults, so a jittered run never falls back
    to the same fixed numbers.
    """
    resolved: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]], prefix: str, outer: dict[str, Any]) -> None:
        for index, step in enumerate(items):
            path = f"{prefix}{index}"
            if "chance" in step:
                if variation_key is None or _uniform(variation_key, path, "chance") >= float(step["chance"]):
                    continue
            if "choose" in step:
                alternatives = step["choose"]
                chosen = 0
                if variation_key is not None:
                    total = math.fsum(float(alt["weight"]) for alt in alternatives)
                    point, cumulative = _uniform(variation_key, path, "choose") * total, 0.0
                    for position, alternative in enumerate(alternatives):
                        cumulative += float(alternative["weight"])
                        if point < cumulative:
                            chosen = position
                            break
                    else:
                        chosen = len(alternatives) - 1
                conditions = {field: _merged_phrases(outer, step, field) for field in ("when", "unless")}
                walk(alternatives[chosen]["steps"], f"{path}.{chosen}.", conditions)
                continue
            concrete = {key: copy.deepcopy(value) for key, value in step.items() if key != "chance"}
            for field in ("when", "unless"):
                phrases = _merged_phrases(outer, step, field)
                if phrases:
                    concrete[field] = phrases
            if variation_key is not None and jitter > 0:
                usage = _usage(defaults_usage, step.get("usage"))
                concrete["usage"] = _jittered(usage, jitter, variation_key, path)
            resolved.append(concrete)

    walk(list(steps), "", {})
    return resolved


# ---------------------------------------------------------------------------------------------
# Pure helpers: conversation state, eligibility, substitution, replies


def _normalise(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().casefold()


def _phrases(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


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


def _eligible(step: dict[str, Any], normalised_text: str) -> bool:
    if any(_normalise(p) not in normalised_text for p in _phrases(step.get("when"))):
        return False
    return not any(_normalise(p) in normalised_text for p in _phrases(step.get("unless")))


def _substitute(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: variables[match.group(1)], value)
    if isinstance(value, list):
        return [_substitute(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, variables) for key, item in value.items()}
    return value


def _referenced_variables(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_VARIABLE.findall(value))
    if isinstance(value, list):
        return set().union(*(_referenced_variables(item) for item in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_referenced_variables(item) for item in value.values())) if value else set()
    return set()


def _usage(base: dict[str, Any], override: dict[str, Any] | None = None) -> dict[str, int]:
    merged = {field: int(base.get(field, 0)) for field in USAGE_FIELDS}
    for field, value in (override or {}).items():
        if field in merged:
            merged[field] = int(value)
    return merged


def _error_body(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    kind = error_type or _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _status_phrase(status: int) -> str:
    try:
        return f"scripted failure: {HTTPStatus(status).phrase}"
    except ValueError:
        return "scripted failure"


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


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
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], separators=(",", ":"))}
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
# The server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the stdlib default of 5 drops bursts of parallel connects into SYN retries


class ScriptedModel:
    """One session's scripted model. Use as a context manager; ``base_url`` is set on entry."""

    def __init__(
        self,
        steps: list[dict[str, Any]],
        *,
        defaults: dict[str, Any],
        variables: dict[str, str] | None = None,
        request_log: Path | None = None,
        variation_key: str | None = None,
    ) -> None:
        self.defaults_usage = _usage(BUILTIN_DEFAULTS["usage"], (defaults or {}).get("usage"))
        self.variation_key = variation_key
        self.steps = resolve_variation(
            steps,
            variation_key=variation_key,
            defaults_usage=self.defaults_usage,
            jitter=float((defaults or {}).get("usage_jitter", 0.0)),
        )
        self.final_text = str((defaults or {}).get("final_text", BUILTIN_DEFAULTS["final_text"]))
        self.variables = {str(key): str(value) for key, value in (variables or {}).items()}
        missing = sorted(_referenced_variables(self.steps) - set(self.variables) - {"api_key"})
        if missing:
            raise ValueError(f"model script steps use undefined variables: {', '.join(missing)}")
        self.request_log = Path(request_log) if request_log is not None else None
        self.base_url: str | None = None
        self._lock = threading.Lock()
        self._failures_served: dict[int, int] = {}
        self._sequence = 0
        self._records: list[dict[str, Any]] = []
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("scripted model already started")
        if self.request_log is not None:
            self.request_log.parent.mkdir(parents=True, exist_ok=True)
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        self._server = server
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-model", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # idle keep-alive handlers would otherwise block on read
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if thread is not None:
            thread.join()
        self._server = None
        self._thread = None

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The request-log records so far (same content as the log file)."""
        with self._lock:
            return [dict(record) for record in self._records]

    # -- bookkeeping ---------------------------------------------------------------------------

    def _next_sequence(self) -> int:
        with self._lock:
            self._sequence += 1
            return self._sequence

    def _record(self, path: str, *, stream: bool, step: int | None, kind: str, status: int) -> None:
        record = {"path": path, "stream": stream, "step": step, "kind": kind, "status": status}
        with self._lock:
            self._records.append(record)
            if self.request_log is not None:
                with self.request_log.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record, sort_keys=True) + "\n")

    def _track(self, connection: socket.socket, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    # -- reply construction (pure except for the failure counters) -----------------------------

    def choose(self, body: dict[str, Any], *, subagent: bool = False) -> tuple[str, int | None]:
        """(kind, step index) for a messages request: ``side``, ``subagent``, ``step`` or ``final``.

        A subagent request (the CLI marks it with an agent-id header) starts a fresh conversation on the
        same endpoint; replaying the main script to it would recurse, so it gets the final text at once.
        """
        if not body.get("tools"):
            return "side", None
        if subagent:
            return "subagent", None
        turn = assistant_turns(body)
        text = _normalise(conversation_text(body))
        eligible = [index for index, step in enumerate(self.steps) if _eligible(step, text)]
        if turn < len(eligible):
            return "step", eligible[turn]
        return "final", None

    def _scripted_failure(self, index: int) -> dict[str, Any] | None:
        fail = self.steps[index].get("fail")
        if not fail:
            return None
        with self._lock:
            served = self._failures_served.get(index, 0)
            times = fail.get("times")
            if times is not None and served >= int(times):
                return None
            self._failures_served[index] = served + 1
        return fail

    def build_message(self, body: dict[str, Any], kind: str, index: int | None, api_key: str) -> dict[str, Any]:
        turn = assistant_turns(body)
        sequence = self._next_sequence()
        content: list[dict[str, Any]] = []
        if kind == "side":
            content.append({"type": "text", "text": SIDE_QUERY_TEXT})
            usage = dict(SIDE_QUERY_USAGE)
        elif kind == "subagent":
            content.append({"type": "text", "text": self.final_text})
            usage = dict(SIDE_QUERY_USAGE)
        elif kind == "final":
            content.append({"type": "text", "text": self.final_text})
            usage = dict(self.defaults_usage)
        else:
            assert index is not None
            step = _substitute(self.steps[index], {**self.variables, "api_key": api_key})
            if step.get("text"):
                content.append({"type": "text", "text": step["text"]})
            for position, tool in enumerate(step.get("tools") or []):
                content.append(
                    {"type": "tool_use", "id": f"toolu_{turn}_{position}", "name": tool["name"], "input": tool["input"]}
                )
            if not content:
                content.append({"type": "text", "text": self.final_text})
            usage = _usage(self.defaults_usage, step.get("usage"))
        has_tools = any(block["type"] == "tool_use" for block in content)
        return {
            "id": f"msg_scripted_{turn:02d}_{sequence:04d}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or DEFAULT_MODEL),
            "content": content,
            "stop_reason": "tool_use" if has_tools else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }


class _ModelHandler(BaseHTTPRequestHandler):
    """Serves one connection for `model` (set on the subclass `_make_handler` builds)."""

    model: ScriptedModel
    protocol_version = "HTTP/1.1"
    server_version = "skillbench-scripted-model"
    sys_version = ""
    # No idle timeout: a tool call (a long test run) may keep the CLI away for minutes, and a dropped
    # keep-alive connection would surface as a spurious retry. stop() shuts open connections down.
    timeout = None

    def setup(self) -> None:
        super().setup()
        self.model._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.model._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        return  # the request log is the only record; never echo headers to stderr

    # -- transport helpers ---------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked_body(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY_BYTES:
                raise ValueError("request body too large")
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _read_body_quietly(self) -> bytes | None:
        try:
            return self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return None

    def _send(self, status: int, payload: bytes, content_type: str, request_id: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if content_type.startswith("text/event-stream"):
            self.send_header("Cache-Control", "no-cache")
        if request_id:
            self.send_header("request-id", request_id)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, document: dict[str, Any], request_id: str | None = None) -> None:
        self._send(status, json.dumps(document).encode("utf-8"), "application/json", request_id)

    def _not_found(self, stream: bool = False) -> None:
        route = self.path.split("?", 1)[0]
        self.model._record(self.path, stream=stream, step=None, kind="not-found", status=404)
        self._send_json(404, _error_body(404, f"scripted model: no route for {self.command} {route}"))

    def _api_key(self) -> str:
        """The request's key: `x-api-key`, else a bearer token."""
        api_key = self.headers.get("x-api-key") or ""
        if not api_key:
            authorization = self.headers.get("Authorization") or ""
            if authorization.lower().startswith("bearer "):
                api_key = authorization[7:].strip()
        return api_key

    # -- verbs ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        if self.path.split("?", 1)[0] in ("", "/"):
            self.model._record(self.path, stream=False, step=None, kind="head", status=200)
            self._send(200, b"", "text/plain")
        else:
            self._not_found()

    def _drain_and_404(self) -> None:
        self._read_body_quietly()  # keep the keep-alive stream in sync even for unexpected bodies
        self._not_found()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _drain_and_404

    def do_POST(self) -> None:
        raw = self._read_body_quietly()
        route = self.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/count_tokens"):
            self.model._record(self.path, stream=False, step=None, kind="count-tokens", status=200)
            self._send_json(200, COUNT_TOKENS_REPLY)
        elif route.endswith("/v1/messages"):
            self._answer_messages(raw)
        else:
            self._not_found()

    # -- POST /v1/messages ---------------------------------------------------------------------

    def _answer_messages(self, raw: bytes | None) -> None:
        body = _messages_body(raw)
        if body is None:
            self.model._record(self.path, stream=False, step=None, kind="invalid", status=400)
            self._send_json(400, _error_body(400, "scripted model: body must be a JSON object with messages"))
            return
        stream = body.get("stream") is True
        kind, index = self.model.choose(body, subagent=bool(self.headers.get("x-claude-code-agent-id")))
        fail = self.model._scripted_failure(index) if index is not None else None
        if fail is not None:
            self._send_scripted_failure(fail, index, stream)
        else:
            self._send_message(body, kind, index, stream)

    def _send_scripted_failure(self, fail: dict[str, Any], index: int | None, stream: bool) -> None:
        status = int(fail["status"])
        text = str(fail.get("message") or _status_phrase(status))
        self.model._record(self.path, stream=stream, step=index, kind="fail", status=status)
        self._send_json(status, _error_body(status, text, fail.get("type")))

    def _send_message(self, body: dict[str, Any], kind: str, index: int | None, stream: bool) -> None:
        message = self.model.build_message(body, kind, index, self._api_key())
        request_id = f"req_scripted_{message['id'].rsplit('_', 1)[-1]}"
        self.model._record(self.path, stream=stream, step=index, kind=kind, status=200)
        if stream:
            self._send(200, render_sse(message), "text/event-stream; charset=utf-8", request_id)
        else:
            self._send_json(200, message, request_id)


def _messages_body(raw: bytes | None) -> dict[str, Any] | None:
    """The JSON body of a messages request, or None unless it is an object with a `messages` list."""
    try:
        body = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    return body


def _make_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    """A handler class serving `model` (the server builds one handler per connection)."""
    return type("Handler", (_ModelHandler,), {"model": model})


# ---------------------------------------------------------------------------------------------
# A tiny CLI for humans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m skillbench.execution.scripted_model",
        description="Serve one session of a model script on 127.0.0.1 and print its base URL.",
    )
    parser.add_argument("script", type=Path, help="model-script/v1 YAML file")
    parser.add_argument("task", help="task id in the script")
    parser.add_argument("role", help="session role (plan, work, direct, baseline, ...)")
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="template variable (repeatable); workspace defaults to the current directory",
    )
    parser.add_argument("--request-log", type=Path, help="append one JSON line per request here")
    parser.add_argument(
        "--variation-key",
        help="play the run this key draws (a cell uses task/arm/run<i>/role); omitted: the nominal run",
    )
    args = parser.parse_args(argv)
    variables = {"workspace": str(Path.cwd())}
    for item in args.var:
        name, separator, value = item.partition("=")
        if not separator or not name:
            parser.error(f"--var expects NAME=VALUE, got {item!r}")
        variables[name] = value
    try:
        script = load_model_script(args.script)
        steps = session_steps(script, args.task, args.role)
        model = ScriptedModel(
            steps,
            defaults=script["defaults"],
            variables=variables,
            request_log=args.request_log,
            variation_key=args.variation_key,
        )
    except (ArtifactError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with model:
        print(model.base_url, flush=True)
        print(
            f"serving {len(steps)} step(s) of {args.task}/{args.role}; "
            f"export ANTHROPIC_BASE_URL={model.base_url}; Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
