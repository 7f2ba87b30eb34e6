"""The scripted model: a loopback model server that plays a per-task model script in the session's wire API.

This module owns the offline stand-in for the model behind the real agent CLI:

* ``load_model_script`` / ``session_steps``: read and validate ``tasks/<suite>/model-script.yaml``
  (``model-script/v1``, schema ``schemas/model-script.schema.json``) and pick one session's steps.
* ``ScriptedModel``: a context manager running a ``ThreadingHTTPServer`` on ``127.0.0.1:<free port>``
  for one session, speaking one wire API (``skillbench.execution.wires``): Anthropic Messages
  (``POST /v1/messages``, ``POST .../count_tokens``), OpenAI Responses (``POST /v1/responses``) or
  Gemini (``POST /v1beta/models/<model>:streamGenerateContent`` and ``:generateContent``;
  ``:countTokens`` answers a count), streaming SSE or JSON as the request asks, and ``HEAD /``;
  everything else is a 404 in the wire's error shape. The wire reads each request into a neutral view
  and renders the neutral reply, tool calls in its own form.

Step choice is stateless with respect to request order: it depends only on the request itself.
``k`` = number of assistant turns in the conversation; the eligible steps are those whose ``when``
phrases all occur (and no ``unless`` phrase occurs) in the conversation text (system prompt or
instructions plus every text and tool-result text, compared case-insensitively with whitespace runs
collapsed); the reply is ``eligible[k]`` or, past the end, a final text turn. A request without
tools (a side query such as a title request) gets ``"ok"`` (or, when it asks for JSON that follows a
schema, the smallest instance of the schema); a subagent request (Anthropic only: header
``x-claude-code-agent-id``) gets the final text, so an Agent tool call cannot recurse into the script.
``{{name}}`` in step strings is replaced from ``variables``; ``{{api_key}}`` is the request's key.

Scripts are written in Claude Code's tool names and arguments (``Read{file_path}``, ``Bash{command}``,
``Skill{skill}``, ``mcp__…``); ``tool_form`` (from the session's agent adapter; identity for Claude Code)
maps each call onto the session's CLI's tool. A mapped tool that the request does not offer is a
scripted-model error, never a silent wrong call: the answer is a 400 in the wire's error shape,
``scripted model: tool <name> not offered by this session (it offers: …)`` (request-log kind
``not-offered``), which none of the CLIs retries, so the session fails with that message. A call
marked ``unoffered: true`` is meant for a tool the session does not offer (a test of the CLI's own
refusal) and is sent without the check. Usage in the script is in Anthropic terms; each wire
converts it to its own usage fields.

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
from http.server import ThreadingHTTPServer
from pathlib import Path
from statistics import NormalDist
from typing import Any, ClassVar

from skillbench.base.artifacts import ArtifactError, validate
from skillbench.base.records import USAGE_FIELDS
from skillbench.base.serving import KeepAliveHandler, Serving
from skillbench.execution.wires import DEFAULT_WIRE, WireApi, wire
from skillbench.execution.wires.anthropic import assistant_turns, conversation_text, render_sse
from skillbench.execution.wires.base import (
    Reply,
    RequestView,
    ToolCall,
    ToolForm,
    header_map,
    json_object,
    split_path,
    without_params,
)
from skillbench.experiment.modelscript import SharedStepError, expand_shared_steps

__all__ = [
    "BUILTIN_DEFAULTS",
    "ScriptedModel",
    "assistant_turns",
    "conversation_text",
    "load_model_script",
    "main",
    "render_sse",
    "resolve_variation",
    "schema_instance",
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
COUNTED_TOKENS = 1000
DEFAULT_MODEL = "claude-sonnet-4-20250514"
MAX_BODY_BYTES = 64 * 1024 * 1024
SIDE_QUERY_STRING = "scripted model"
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_WHITESPACE = re.compile(r"\s+")


# ---------------------------------------------------------------------------------------------
# Script loading


def load_model_script(path: str | Path, *, task: str | None = None) -> dict[str, Any]:
    """Read a ``model-script/v1`` YAML file; raise ``ArtifactError`` naming the file and the bad field.

    With ``task``, the script a cell of that task plays: its defaults and that task's entry only (no other task,
    no proposer), validated as a script of its own. A cell reads nothing else of the file, and validating the
    whole of a large suite's script cost every cell job more than its imports (the run's preflight validates it
    all once)."""
    from skillbench.experiment.configcheck import read_yaml

    path = Path(path)
    document = read_yaml(path, what="model script")
    if task is not None and isinstance(document, dict) and isinstance(document.get("tasks"), dict):
        tasks = document["tasks"]
        document = {key: value for key, value in document.items() if key not in ("tasks", "proposer")}
        document["tasks"] = {task: tasks[task]} if task in tasks else {}
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
    return _shared_expanded(roles[role], script, f"tasks.{task}.{role}")


def proposer_steps(script: dict[str, Any]) -> list[dict[str, Any]]:
    """A deep copy of the proposer's steps; the script must have a top-level `proposer` list."""
    if not script.get("proposer"):
        raise ArtifactError("model script: no `proposer` steps; the scripted proposer has nothing to play")
    return _shared_expanded(script["proposer"], script, "proposer")


def _shared_expanded(steps: list[dict[str, Any]], script: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A copy of ``steps`` with each `use:` of a shared step list played in its place."""
    try:
        return expand_shared_steps(steps, script.get("steps"))
    except SharedStepError as exc:
        raise ArtifactError(f"model script: {where}: {exc}") from exc


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


def _status_phrase(status: int) -> str:
    try:
        return f"scripted failure: {HTTPStatus(status).phrase}"
    except ValueError:
        return "scripted failure"


def schema_instance(schema: Any) -> Any:
    """The smallest value that follows a JSON schema (OpenAPI-style upper-case types too): a side query's answer.

    The first of an enum or of `anyOf`/`oneOf`, required properties only, arrays of their minimum length,
    numbers at their minimum (else 1), `false`, and ``"scripted model"`` for strings.
    """
    if not isinstance(schema, dict):
        return SIDE_QUERY_STRING
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for choice in ("anyOf", "oneOf"):
        if isinstance(schema.get(choice), list) and schema[choice]:
            return schema_instance(schema[choice][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if str(item).lower() != "null"), "null")
    kind = str(kind or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        declared = schema.get("properties")
        properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
        required = [name for name in schema.get("required") or [] if isinstance(name, str)]
        return {name: schema_instance(properties.get(name)) for name in required}
    if kind == "array":
        return [schema_instance(schema.get("items"))] * int(schema.get("minItems") or 0)
    if kind in ("integer", "number"):
        minimum = schema.get("minimum")
        return minimum if isinstance(minimum, int | float) and not isinstance(minimum, bool) else 1
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return SIDE_QUERY_STRING


# ---------------------------------------------------------------------------------------------
# The server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the stdlib default of 5 drops bursts of parallel connects into SYN retries


class ScriptedModel:
    """One session's scripted model. Use as a context manager; ``base_url`` is set on entry.

    ``wire`` names the wire API it speaks (``wires.WIRES``); ``tool_form`` maps a step's tool call
    (Claude Code's name and arguments) onto the session's CLI's tool (None: as written).
    """

    def __init__(
        self,
        steps: list[dict[str, Any]],
        *,
        defaults: dict[str, Any],
        variables: dict[str, str] | None = None,
        request_log: Path | None = None,
        variation_key: str | None = None,
        wire: str = DEFAULT_WIRE,
        tool_form: ToolForm | None = None,
    ) -> None:
        self.wire: WireApi = _wire_api(wire)
        self.tool_form = tool_form
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
        templated = [step for step in self.steps if not step.get("verbatim")]
        missing = sorted(_referenced_variables(templated) - set(self.variables) - {"api_key"})
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
        self._serving: Serving | None = None

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
        self._serving = Serving(server, "scripted-model")

    def _open_connections(self) -> list[socket.socket]:
        with self._lock:
            return list(self._connections)

    def stop(self) -> None:
        if self._serving is None:
            return
        self._serving.stop(self._open_connections)
        self._server = None
        self._serving = None

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

    def view(self, request: RequestView | dict[str, Any]) -> RequestView:
        """A request's neutral view: as given, or a JSON body read by this model's wire (an Anthropic body for
        the default wire)."""
        if isinstance(request, RequestView):
            return request
        view = self.wire.read(request, "")
        if view is None:
            raise ValueError(f"not a {self.wire.name} request body")
        return view

    def choose(
        self, request: RequestView | dict[str, Any], *, subagent: bool = False, api_key: str = ""
    ) -> tuple[str, int | None]:
        """(kind, step index) for a generation request: ``side``, ``subagent``, ``step``, ``not-offered`` or
        ``final``.

        A subagent request (the CLI marks it with an agent-id header) starts a fresh conversation on the
        same endpoint; replaying the main script to it would recurse, so it gets the final text at once.
        A step whose (mapped) tool the request does not offer is ``not-offered``.
        """
        view = self.view(request)
        if view.side:
            return "side", None
        if subagent:
            return "subagent", None
        text = _normalise(view.text)
        eligible = [index for index, step in enumerate(self.steps) if _eligible(step, text)]
        if view.assistant_turns >= len(eligible):
            return "final", None
        index = eligible[view.assistant_turns]
        if self.unoffered_tool(view, index, api_key) is not None:
            return "not-offered", index
        return "step", index

    def _mapped_calls(self, index: int, turn: int, api_key: str) -> list[tuple[ToolCall, bool]]:
        """Step `index`'s tool calls, substituted and mapped onto the session's CLI's tools, each with whether it
        must be offered (every call but one marked `unoffered`)."""
        step = self._substituted(index, api_key)
        calls = []
        for position, tool in enumerate(step.get("tools") or []):
            name, arguments = str(tool["name"]), dict(tool["input"])
            if self.tool_form is not None:
                name, arguments = self.tool_form(name, arguments)
            call = ToolCall(id=f"toolu_{turn}_{position}", name=name, input=arguments)
            calls.append((call, tool.get("unoffered") is not True))
        return calls

    def _substituted(self, index: int, api_key: str) -> dict[str, Any]:
        """Step `index` with its `{{variables}}` filled in; a `verbatim` step (a replayed solution's: file text that may
        hold braces of its own) is sent as it is."""
        step = self.steps[index]
        if step.get("verbatim"):
            return step
        substituted: dict[str, Any] = _substitute(step, {**self.variables, "api_key": api_key})
        return substituted

    def _tool_calls(self, index: int, turn: int, api_key: str) -> tuple[ToolCall, ...]:
        return tuple(call for call, _checked in self._mapped_calls(index, turn, api_key))

    def unoffered_tool(self, request: RequestView | dict[str, Any], index: int, api_key: str = "") -> str | None:
        """The first (mapped) tool of step `index` that the request does not offer, if any."""
        view = self.view(request)
        calls = self._mapped_calls(index, view.assistant_turns, api_key)
        return next((call.name for call, checked in calls if checked and call.name not in view.tools), None)

    def not_offered_message(self, request: RequestView | dict[str, Any], index: int, api_key: str = "") -> str:
        """The error a session gets when step `index` calls a tool its request does not offer."""
        view = self.view(request)
        offered = ", ".join(view.tools) or "none"
        return (
            f"scripted model: tool {self.unoffered_tool(view, index, api_key)} not offered by this session "
            f"(it offers: {offered}); the agent adapter's tool_form maps the script's tools onto its CLI's"
        )

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

    def reply(self, request: RequestView | dict[str, Any], kind: str, index: int | None, api_key: str) -> Reply:
        """The neutral reply of kind `kind` (from `choose`; `not-offered` has none, it is an error) to a request."""
        if kind == "not-offered":
            raise ValueError("a step calling a tool the request does not offer has no reply: it is an error")
        view = self.view(request)
        turn = view.assistant_turns
        sequence = self._next_sequence()
        text: str | None
        calls: tuple[ToolCall, ...] = ()
        if kind == "side":
            text = SIDE_QUERY_TEXT if view.json_schema is None else json.dumps(schema_instance(view.json_schema))
            usage = dict(SIDE_QUERY_USAGE)
        elif kind == "subagent":
            text, usage = self.final_text, dict(SIDE_QUERY_USAGE)
        elif kind == "final":
            text, usage = self.final_text, dict(self.defaults_usage)
        else:
            assert index is not None
            calls = self._tool_calls(index, turn, api_key)
            step = self._substituted(index, api_key)
            text = step.get("text") or (None if calls else self.final_text)
            usage = _usage(self.defaults_usage, step.get("usage"))
        return Reply(
            id=f"scripted_{turn:02d}_{sequence:04d}",
            model=view.model or DEFAULT_MODEL,
            text=text,
            tool_calls=calls,
            usage=usage,
        )

    def build_message(
        self, request: RequestView | dict[str, Any], kind: str, index: int | None, api_key: str
    ) -> dict[str, Any]:
        """The reply as the wire's JSON document (for Anthropic, the message)."""
        return self.wire.document(self.reply(request, kind, index, api_key))


def _wire_api(name: str) -> WireApi:
    return wire(name)


class _ModelHandler(KeepAliveHandler):
    """Serves one connection for its model, the `owner` set on the subclass `_make_handler` builds."""

    owner: ClassVar[ScriptedModel]
    server_version = "skillbench-scripted-model"
    max_body_bytes = MAX_BODY_BYTES

    @property
    def model(self) -> ScriptedModel:
        return self.owner

    # -- transport helpers ---------------------------------------------------------------------

    def _send(self, status: int, payload: bytes, content_type: str, request_id: str | None = None) -> None:
        headers = [("Cache-Control", "no-cache")] if content_type.startswith("text/event-stream") else []
        if request_id:
            headers.append((self.model.wire.request_id_header, request_id))
        self.send_payload(status, payload, content_type, headers)

    def _send_json(self, status: int, document: dict[str, Any], request_id: str | None = None) -> None:
        self._send(status, json.dumps(document).encode("utf-8"), "application/json", request_id)

    def _send_error(self, status: int, message: str, error_type: str | None = None) -> None:
        self._send(status, self.model.wire.error_body(status, message, error_type), "application/json")

    def _not_found(self, stream: bool = False) -> None:
        route = self.path.split("?", 1)[0]
        self.model._record(self._logged_path, stream=stream, step=None, kind="not-found", status=404)
        self._send_error(404, f"scripted model: no route for {self.command} {route}")

    @property
    def _logged_path(self) -> str:
        """The request's path for the log: without the credential parameters of the wire (Gemini's `?key=`)."""
        return without_params(self.path, self.model.wire.credential_params)

    def _api_key(self) -> str:
        """The request's key, where the wire carries it."""
        return self.model.wire.session_token(header_map(self.headers.items()), self.path) or ""

    def _route(self) -> str | None:
        """What a POST is on this wire; a base URL with a path prefix before `/v1` is tolerated."""
        route = split_path(self.path)[0]
        kind = self.model.wire.route(route)
        if kind is None and "/v1" in route[1:]:
            kind = self.model.wire.route(route[route.index("/v1", 1) :])
        return kind

    # -- verbs ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        if self.path.split("?", 1)[0] in ("", "/"):
            self.model._record(self._logged_path, stream=False, step=None, kind="head", status=200)
            self._send(200, b"", "text/plain")
        else:
            self._not_found()

    def _drain_and_404(self) -> None:
        self.read_body()  # keep the keep-alive stream in sync even for unexpected bodies
        self._not_found()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _drain_and_404

    def do_POST(self) -> None:
        raw = self.read_body()
        kind = self._route()
        if kind == "count_tokens":
            self.model._record(self._logged_path, stream=False, step=None, kind="count-tokens", status=200)
            self._send_json(200, self.model.wire.count_reply(COUNTED_TOKENS))
        elif kind == "messages":
            self._answer(raw)
        else:
            self._not_found()

    # -- a generation request ------------------------------------------------------------------

    def _answer(self, raw: bytes | None) -> None:
        wire_api = self.model.wire
        view = wire_api.read(json_object(raw) if raw is not None else None, self.path)
        if view is None:
            self.model._record(self._logged_path, stream=False, step=None, kind="invalid", status=400)
            self._send_error(400, f"scripted model: body must be a JSON object with {wire_api.conversation_field}")
            return
        api_key = self._api_key()
        subagent = wire_api.subagent(header_map(self.headers.items()))
        kind, index = self.model.choose(view, subagent=subagent, api_key=api_key)
        fail = self.model._scripted_failure(index) if index is not None else None
        if fail is not None:
            self._send_scripted_failure(fail, index, view.stream)
        elif kind == "not-offered":
            assert index is not None
            message = self.model.not_offered_message(view, index, api_key)
            self.model._record(self._logged_path, stream=view.stream, step=index, kind="not-offered", status=400)
            self._send_error(400, message)
        else:
            self._send_reply(view, kind, index, api_key)

    def _send_scripted_failure(self, fail: dict[str, Any], index: int | None, stream: bool) -> None:
        status = int(fail["status"])
        text = str(fail.get("message") or _status_phrase(status))
        self.model._record(self._logged_path, stream=stream, step=index, kind="fail", status=status)
        self._send_error(status, text, fail.get("type"))

    def _send_reply(self, view: RequestView, kind: str, index: int | None, api_key: str) -> None:
        reply = self.model.reply(view, kind, index, api_key)
        request_id = f"req_scripted_{reply.id.rsplit('_', 1)[-1]}"
        self.model._record(self._logged_path, stream=view.stream, step=index, kind=kind, status=200)
        content_type, payload = self.model.wire.render(reply, stream=view.stream)
        self._send(200, payload, content_type, request_id)


def _make_handler(model: ScriptedModel) -> type[_ModelHandler]:
    """A handler class serving `model` (the server builds one handler per connection)."""
    return type("Handler", (_ModelHandler,), {"owner": model})


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
    parser.add_argument("--wire", default=DEFAULT_WIRE, help="the wire API to speak (default: %(default)s)")
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
            wire=args.wire,
        )
    except (ArtifactError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with model:
        print(model.base_url, flush=True)
        print(
            f"serving {len(steps)} step(s) of {args.task}/{args.role} ({model.wire.name}); "
            f"point the CLI's base URL at {model.base_url}; Ctrl-C stops",
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
