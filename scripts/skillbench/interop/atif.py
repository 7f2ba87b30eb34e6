"""ATIF trajectories (Harbor's Agent Trajectory Interchange Format, the version PyPI `atif` pins): one document per
agent session, built from its joined turns (`interop.turns`) and its ledger session.

Every agent step carries its ledger request's metrics (prompt tokens = uncached input + cache reads + cache
writes; cached = cache reads; completion = output; the gateway's priced cost), never the stream's partial usage,
so the steps' completion tokens add up to the ledger's output tokens. The agent names the CLI and its version,
and its `extra` the skills the session was offered, the skill it was expected to use and those it proved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skillbench.interop.turns import JoinedStep, StreamTurns

ATIF_VERSION = "ATIF-v1.8"


def _metrics(request: Mapping[str, Any]) -> dict[str, Any]:
    usage = request.get("usage") or {}
    uncached, output = usage.get("input_tokens"), usage.get("output_tokens")
    reads, writes = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    prompt = None if uncached is None else uncached + (reads or 0) + (writes or 0)
    extra = {
        "request_seq": request["seq"],
        "request_id": request.get("request_id"),
        "outcome": request["outcome"],
        "cache_creation_input_tokens": writes,
        "cache_creation_1h_input_tokens": usage.get("cache_creation_1h_input_tokens"),
    }
    metrics = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "cached_tokens": reads,
        "cost_usd": request.get("cost_usd"),
        "extra": {key: value for key, value in extra.items() if value is not None},
    }
    return {key: value for key, value in metrics.items() if value is not None}


def _agent_step(step_id: int, joined: JoinedStep, model: str | None) -> dict[str, Any]:
    turn, request = joined.turn, joined.request
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": ""}
    served = (request.get("served_model") or request.get("model")) if request is not None else None
    if served or model:
        step["model_name"] = served or model
    timestamp = (request.get("finished_at") or request.get("started_at")) if request is not None else None
    if timestamp or (turn is not None and turn.timestamp):
        step["timestamp"] = timestamp or (turn.timestamp if turn is not None else None)
    if turn is not None:
        step["message"] = "\n\n".join(turn.texts)
        if turn.calls:
            step["tool_calls"] = [
                {"tool_call_id": call.call_id, "function_name": call.name, "arguments": call.arguments}
                for call in turn.calls
            ]
            results = [
                {
                    "source_call_id": call.call_id,
                    "content": call.result if call.result is not None else "",
                    **({"extra": {"is_error": True}} if call.is_error else {}),
                }
                for call in turn.calls
            ]
            step["observation"] = {"results": results}
    if request is not None:
        step["llm_call_count"] = 1
        step["metrics"] = _metrics(request)
        if turn is None:
            step["extra"] = {"ledger_only": True, "why": "a model request the CLI's stream does not show"}
    else:
        step["extra"] = {"unmetered": True, "why": "no ledger request matched this turn of the stream"}
    return step


def trajectory(
    *,
    reading: StreamTurns,
    steps: Sequence[JoinedStep],
    ledger_session: Mapping[str, Any],
    agent: str,
    cli_version: str | None,
    model: str | None,
    session_id: str | None,
    skills: Mapping[str, Any],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The session's ATIF document. `skills`: offered, expected and invoked skills; `extra`: where it came from."""
    documents: list[dict[str, Any]] = []
    if reading.prompt is not None:
        documents.append({"step_id": 1, "source": "user", "message": reading.prompt})
    for joined in steps:
        documents.append(_agent_step(len(documents) + 1, joined, model))
    metered = [step["metrics"] for step in documents if "metrics" in step]
    totals = ledger_session["totals"]
    final = {
        "total_prompt_tokens": sum(item.get("prompt_tokens") or 0 for item in metered),
        "total_completion_tokens": sum(item.get("completion_tokens") or 0 for item in metered),
        "total_cached_tokens": sum(item.get("cached_tokens") or 0 for item in metered),
        "total_steps": len(documents),
        "extra": {"ledger_output_tokens": totals["output_tokens"], "ledger_requests": totals["requests"]},
    }
    if totals.get("cost_usd") is not None:
        final["total_cost_usd"] = totals["cost_usd"]
    document: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "agent": {
            "name": agent,
            "version": cli_version or "unknown",
            **({"model_name": model} if model else {}),
            "extra": {"skills": dict(skills)},
        },
        "steps": documents,
        "final_metrics": final,
        "extra": dict(extra),
    }
    if session_id:
        document["session_id"] = session_id
    return document


def output_tokens(document: Mapping[str, Any]) -> int:
    """The completion tokens of a trajectory's steps, summed."""
    return sum((step.get("metrics") or {}).get("completion_tokens") or 0 for step in document["steps"])
