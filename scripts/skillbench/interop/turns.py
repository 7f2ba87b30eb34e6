"""A session's turns: each agent CLI's stream read as the model's replies (text, tool calls and their results), and
each reply joined to the gateway's ledger request that produced it.

The stream's own usage is partial (Claude Code splits one reply into several events, each with a placeholder
count), so a turn's tokens and cost always come from its ledger request. How a turn names its request differs
per CLI: Claude Code's events carry the response's message id and the upstream's request id, Copilot's the API's
message id (`apiCallId`) and opencode's the API's tool call ids; Codex and Gemini CLI mark no reply boundaries,
so their items are cut into replies by what the ledger saw each response hold (its tool calls, whether it said
anything), in order. A ledger request no turn claims (a side query: a title, a router) stays a step of its own,
so the steps' tokens add up to the ledger's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolExchange:
    """One tool call as the CLI ran it: its id in the stream, the tool, its arguments and what came back."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: str | None = None
    is_error: bool | None = None


@dataclass
class Turn:
    """One model reply as the stream shows it. `keys` are ids that name its ledger request (response or request
    ids) where the CLI reports them; `api_call_ids` the API's ids of its tool calls where the stream keeps them."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolExchange] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    api_call_ids: set[str] = field(default_factory=set)
    timestamp: str | None = None


@dataclass
class StreamTurns:
    """A session's stream as turns. `bounded`: the CLI marks where each reply ends (else every text or tool call is
    its own turn, and the ledger cuts them into replies). `prompt`: the user's prompt when the stream shows it."""

    turns: list[Turn]
    bounded: bool
    prompt: str | None = None


@dataclass(frozen=True)
class JoinedStep:
    """A step of the trajectory: a turn, its ledger request, or both."""

    turn: Turn | None
    request: Mapping[str, Any] | None


def _text(value: Any) -> str | None:
    """Tool output as text: a string, the text parts of a content list, else its JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, dict) for part in value):
        texts = [part["text"] for part in value if isinstance(part.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {} if value is None else {"input": value}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _stamp(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------------------------------------
# Each CLI's stream


def claude_code_turns(events: list[dict[str, Any]]) -> StreamTurns:
    """Claude Code's stream-json: assistant events of one reply share the message id (and the request id)."""
    turns: list[Turn] = []
    by_message: dict[str, Turn] = {}
    calls: dict[str, ToolExchange] = {}
    for event in events:
        message = event.get("message")
        if not isinstance(message, dict) or event.get("parent_tool_use_id"):
            continue  # a subagent's events are its own conversation; its requests stay ledger steps
        content = message.get("content")
        blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
        if event.get("type") == "assistant":
            message_id = message.get("id") if isinstance(message.get("id"), str) else None
            turn = by_message.get(message_id) if message_id else None
            if turn is None:
                turn = Turn(timestamp=_stamp(event.get("timestamp")))
                turns.append(turn)
                if message_id:
                    by_message[message_id] = turn
                    turn.keys.add(message_id)
            if isinstance(event.get("request_id"), str):
                turn.keys.add(event["request_id"])
            for block in blocks:
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    turn.texts.append(block["text"])
                elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    call = ToolExchange(block["id"], str(block.get("name")), _arguments(block.get("input")))
                    turn.calls.append(call)
                    turn.api_call_ids.add(block["id"])
                    calls[block["id"]] = call
        elif event.get("type") == "user":
            for block in blocks:
                answered = calls.get(str(block.get("tool_use_id")))
                if block.get("type") == "tool_result" and answered is not None:
                    answered.result = _text(block.get("content"))
                    answered.is_error = block.get("is_error") is True
    return StreamTurns(turns, bounded=True)


def opencode_turns(events: list[dict[str, Any]]) -> StreamTurns:
    """opencode's JSON events: `step_start` … `step_finish` bracket one model call; tool parts keep the API's id."""
    turns: list[Turn] = []
    turn: Turn | None = None
    for event in events:
        part = event.get("part")
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "step-start" or turn is None:
            turn = Turn(timestamp=None)
            turns.append(turn)
            if kind == "step-start":
                continue
        if kind == "text" and isinstance(part.get("text"), str):
            turn.texts.append(part["text"])
        elif kind == "tool" and isinstance(part.get("callID"), str):
            state = _mapping(part.get("state"))
            failed = state.get("status") == "error"
            exchange = ToolExchange(
                part["callID"],
                str(part.get("tool")),
                _arguments(state.get("input")),
                result=_text(state.get("error") if failed else state.get("output")),
                is_error=failed,
            )
            turn.calls.append(exchange)
            turn.api_call_ids.add(part["callID"])
        elif kind == "step-finish":
            turn = None
    return StreamTurns([turn for turn in turns if turn.texts or turn.calls], bounded=True)


def copilot_turns(events: list[dict[str, Any]]) -> StreamTurns:
    """Copilot's JSON events: one `assistant.message` per model call, naming the API's message id (`apiCallId`)."""
    turns: list[Turn] = []
    calls: dict[str, ToolExchange] = {}
    prompt: str | None = None
    for event in events:
        data = _mapping(event.get("data"))
        kind = event.get("type")
        if kind == "user.message" and prompt is None and isinstance(data.get("content"), str):
            prompt = data["content"]
        elif kind == "assistant.message":
            turn = Turn(timestamp=_stamp(event.get("timestamp")))
            if isinstance(data.get("apiCallId"), str):
                turn.keys.add(data["apiCallId"])
            if isinstance(data.get("content"), str) and data["content"]:
                turn.texts.append(data["content"])
            for request in data.get("toolRequests") or []:
                if isinstance(request, dict) and isinstance(request.get("toolCallId"), str):
                    exchange = ToolExchange(
                        request["toolCallId"], str(request.get("name")), _arguments(request.get("arguments"))
                    )
                    turn.calls.append(exchange)
                    turn.api_call_ids.add(request["toolCallId"])
                    calls[request["toolCallId"]] = exchange
            turns.append(turn)
        elif kind == "tool.execution_complete" and data.get("toolCallId") in calls:
            exchange = calls[data["toolCallId"]]
            exchange.is_error = data.get("success") is not True
            result = _mapping(data.get("result"))
            error = _mapping(data.get("error"))
            exchange.result = _text(result.get("content") if not exchange.is_error else error.get("message"))
    return StreamTurns(turns, bounded=True, prompt=prompt)


# Codex's tool items, named as the model's tool (a file change is Codex applying an `apply_patch` command).
CODEX_TOOLS = {
    "command_execution": "exec_command",
    "file_change": "apply_patch",
    "mcp_tool_call": "mcp",
    "web_search": "web_search",
    "collab_tool_call": "collab",
    "todo_list": "update_plan",
}


def _codex_call(item: dict[str, Any]) -> ToolExchange:
    kind = item["type"]
    if kind == "command_execution":
        arguments: dict[str, Any] = {"command": item.get("command")}
        result = _text(item.get("aggregated_output"))
        failed = item.get("status") != "completed" or item.get("exit_code") not in (0, None)
    elif kind == "file_change":
        arguments = {"changes": item.get("changes")}
        result, failed = _text(item.get("status")), item.get("status") != "completed"
    elif kind == "mcp_tool_call":
        arguments = {"server": item.get("server"), "tool": item.get("tool"), "arguments": item.get("arguments")}
        result, failed = _text(item.get("result") or item.get("error")), item.get("status") != "completed"
    else:
        arguments = {key: value for key, value in item.items() if key not in ("id", "type", "status")}
        result, failed = None, item.get("status") == "failed"
    return ToolExchange(str(item.get("id")), CODEX_TOOLS[kind], arguments, result=result, is_error=failed)


def codex_turns(events: list[dict[str, Any]]) -> StreamTurns:
    """Codex's JSONL: completed items in order; no reply boundaries (the ledger cuts them)."""
    turns: list[Turn] = []
    for event in events:
        item = event.get("item")
        if event.get("type") != "item.completed" or not isinstance(item, dict):
            continue
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            turns.append(Turn(texts=[item["text"]]))
        elif item.get("type") in CODEX_TOOLS:
            turns.append(Turn(calls=[_codex_call(item)]))
    return StreamTurns(turns, bounded=False)


def gemini_turns(events: list[dict[str, Any]]) -> StreamTurns:
    """Gemini CLI's stream-json: text deltas, tool uses and their results; no reply boundaries (the ledger cuts
    them). Consecutive text deltas are one text."""
    turns: list[Turn] = []
    calls: dict[str, ToolExchange] = {}
    prompt: str | None = None
    for event in events:
        kind = event.get("type")
        if kind == "message" and isinstance(event.get("content"), str):
            if event.get("role") == "user":
                prompt = prompt if prompt is not None else event["content"]
            elif turns and turns[-1].texts and not turns[-1].calls:
                turns[-1].texts[-1] += event["content"]
            else:
                turns.append(Turn(texts=[event["content"]], timestamp=_stamp(event.get("timestamp"))))
        elif kind == "tool_use" and isinstance(event.get("tool_id"), str):
            exchange = ToolExchange(event["tool_id"], str(event.get("tool_name")), _arguments(event.get("parameters")))
            calls[event["tool_id"]] = exchange
            turns.append(Turn(calls=[exchange], timestamp=_stamp(event.get("timestamp"))))
        elif kind == "tool_result" and event.get("tool_id") in calls:
            exchange = calls[event["tool_id"]]
            exchange.is_error = event.get("status") != "success"
            error = _mapping(event.get("error"))
            exchange.result = _text(event.get("output") if "output" in event else error.get("message"))
    return StreamTurns(turns, bounded=False, prompt=prompt)


READERS: dict[str, Callable[[list[dict[str, Any]]], StreamTurns]] = {
    "claude-code": claude_code_turns,
    "opencode": opencode_turns,
    "copilot": copilot_turns,
    "codex": codex_turns,
    "gemini": gemini_turns,
}


def stream_turns(agent: str, events: list[dict[str, Any]]) -> StreamTurns:
    """The turns of a session of the agent CLI `agent` (an adapter's name) from its transcript's events."""
    try:
        reader = READERS[agent]
    except KeyError as exc:
        raise ValueError(f"no trajectory reader for agent {agent!r}; known: {sorted(READERS)}") from exc
    return reader(events)


# ---------------------------------------------------------------------------------------------
# The join with the ledger


def metered_requests(ledger_session: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The session's generation requests in order (token counts are free and are no step)."""
    return [entry for entry in ledger_session["requests"] if entry["kind"] == "messages"]


def _claims(turn: Turn, request: Mapping[str, Any]) -> bool:
    """Whether an id of the turn names the request: its response or request id, or one of its tool calls."""
    named = {request.get("response_id"), request.get("request_id")} - {None}
    return bool(turn.keys & named) or bool(turn.api_call_ids & set(request.get("tool_calls") or []))


def _cut_by_ledger(items: list[Turn], requests: list[Mapping[str, Any]]) -> list[tuple[Turn, int | None]]:
    """Items of a stream without reply boundaries, cut into replies in order by what each response held: its text
    first, then as many tool calls as it made. Items left over stay turns without a request."""
    joined: list[tuple[Turn, int | None]] = []
    queue = list(items)
    for index, request in enumerate(requests):
        calls = request.get("tool_calls")
        if calls is None or not queue:
            continue
        turn = Turn(timestamp=queue[0].timestamp)
        while request.get("text") and queue and queue[0].texts and not queue[0].calls:
            turn.texts.extend(queue.pop(0).texts)
        while len(turn.calls) < len(calls) and queue and queue[0].calls:
            turn.calls.extend(queue.pop(0).calls)
        if turn.texts or turn.calls:
            joined.append((turn, index))
    joined.extend((turn, None) for turn in queue)
    return joined


def _match_bounded(turns: list[Turn], requests: list[Mapping[str, Any]]) -> list[tuple[Turn, int | None]]:
    """Each turn's request: the one its ids name; a turn whose ids name none (or that has none) takes the next
    request no turn claimed after the previous turn's, in stream order."""
    taken: set[int] = set()
    indices: list[int | None] = []
    for turn in turns:
        index = next((i for i, request in enumerate(requests) if i not in taken and _claims(turn, request)), None)
        if index is not None:
            taken.add(index)
        indices.append(index)
    last = -1
    for position, index in enumerate(indices):
        if index is None:
            index = next((i for i in range(last + 1, len(requests)) if i not in taken), None)
            if index is not None:
                taken.add(index)
                indices[position] = index
        last = index if index is not None else last
    return list(zip(turns, indices, strict=True))


def join_ledger(reading: StreamTurns, ledger_session: Mapping[str, Any]) -> list[JoinedStep]:
    """The session's steps in order: each turn with its request, and every request no turn claimed."""
    requests = metered_requests(ledger_session)
    joined = (_match_bounded if reading.bounded else _cut_by_ledger)(reading.turns, requests)
    claimed = {index for _turn, index in joined if index is not None}
    ordered: list[tuple[float, int, JoinedStep]] = []
    position = -1.0
    for order, (turn, index) in enumerate(joined):
        position = float(index) if index is not None else position + 0.001
        ordered.append((position, order, JoinedStep(turn, requests[index] if index is not None else None)))
    for index, request in enumerate(requests):
        if index not in claimed:
            ordered.append((float(index) - 0.5, -1, JoinedStep(None, request)))
    return [step for _position, _order, step in sorted(ordered, key=lambda item: (item[0], item[1]))]
