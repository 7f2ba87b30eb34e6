"""`skillbench export --inspect`: a results folder as Inspect eval logs (`inspect view`, `inspect_ai.analysis`).

One `.eval` per (generation, arm): the sweep's arms and each generation's (`sweep/results.jsonl`,
`gen<N>/results.jsonl`), a sample per task and an epoch per run. A sample's scores are the row's: resolved, the
ledger's cost, the skill proof, and a review's F1 or a trigger's verdict where the task has them; its messages and
events are the cell's ATIF trajectories (the Harbor trial folder's, each checked against its recorded digest; for a
cell from before trial folders, built again from its transcripts, each checked against the row's digest, and its
ledger). The gate's decisions about the arm go into the log's metadata. The hidden oracle's output never does.

Needs the optional `inspect` extra (`pip install 'skillbench[inspect]'`); without it the export is refused in one
line. It writes only into an empty folder, or one holding nothing but an earlier export's files (its manifest names
them): anything else there is refused before a file is written, so nothing already there is lost.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbench.base import artifacts, layout
from skillbench.decision.promotion import is_promoted
from skillbench.experiment.arms import is_candidate
from skillbench.interop.harbor import ExportError, grade_parts, numbers, read_trial, session_trajectories

MANIFEST = "skillbench-inspect.json"
EXTRA_MISSING = "skillbench export --inspect needs the inspect extra: pip install 'skillbench[inspect]'"
SCORES = ("resolved", "cost_usd", "verify", "oracle", "skill_used", "review_f1", "trigger_correct")


def _inspect() -> Any:
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError as exc:
        raise ExportError(EXTRA_MISSING) from exc
    import inspect_ai

    return inspect_ai


def generations(root: Path) -> list[tuple[str, Path, Path | None]]:
    """(name, rows file, promotion document or None) of the sweep and of each generation that has rows."""
    found: list[tuple[str, Path, Path | None]] = []
    sweep = Path(layout.rows(root, None))
    if sweep.exists():
        found.append(("sweep", sweep, None))
    numbered = sorted((layout.generation_of_folder(path.name), path) for path in root.glob("gen*") if path.is_dir())
    for gen, _folder in numbered:
        if gen is None:
            continue
        rows = Path(layout.rows(root, gen))
        promotion = Path(layout.promotion(root, gen))
        if rows.exists():
            found.append((layout.generation_name(gen), rows, promotion if promotion.exists() else None))
    return found


def cell_trajectories(root: Path, generation: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cell's ATIF trajectories: its trial folder's, else built from its transcripts and ledger."""
    gen = layout.generation_of_folder(generation)
    run_dir = Path(layout.row_cell_dir(root, row, gen, candidate=is_candidate(row["arm"])))
    if (run_dir / layout.HARBOR).is_dir():
        return read_trial(run_dir / layout.HARBOR)[1]
    ledger_path = run_dir / layout.LEDGER
    if not ledger_path.exists():
        return []
    ledger = artifacts.read_artifact(ledger_path, "ledger")
    return [document for _path, document in session_trajectories(run_dir, row, ledger["sessions"], expected_skills=[])]


def sample_scores(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's scores: resolved, the ledger's cost (left out when unmeasured) and the grade's parts."""
    return {**numbers({"resolved": row["resolved"], "cost_usd": row.get("cost_usd")}), **grade_parts(row)}


def _messages(
    inspect_ai: Any, trajectories: Sequence[Mapping[str, Any]], task: str
) -> tuple[str, list[Any], list[Any]]:
    """(input, messages, events) of a cell's sessions, in order."""
    from inspect_ai.event import ModelEvent, ToolEvent
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ChatMessageTool,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.tool import ToolCall, ToolCallError

    prompt: str | None = None
    messages: list[Any] = []
    events: list[Any] = []
    for document in trajectories:
        role = ((document.get("extra") or {}).get("skillbench") or {}).get("role")
        if len(trajectories) > 1:
            messages.append(ChatMessageUser(content=f"(skillbench: the {role} session of the cell starts)"))
        for step in document["steps"]:
            if step["source"] != "agent":
                prompt = prompt if prompt is not None else step["message"]
                messages.append(ChatMessageUser(content=step["message"] or "(empty)"))
                continue
            calls = [
                ToolCall(id=call["tool_call_id"], function=call["function_name"], arguments=call["arguments"])
                for call in step.get("tool_calls") or []
            ]
            model = step.get("model_name") or document["agent"].get("model_name") or "unknown"
            reply = ChatMessageAssistant(content=step["message"], tool_calls=calls or None, model=model)
            messages.append(reply)
            metrics = step.get("metrics") or {}
            if metrics:
                extra = metrics.get("extra") or {}
                usage = ModelUsage(
                    input_tokens=(metrics.get("prompt_tokens") or 0) - (metrics.get("cached_tokens") or 0),
                    output_tokens=metrics.get("completion_tokens") or 0,
                    total_tokens=(metrics.get("prompt_tokens") or 0) + (metrics.get("completion_tokens") or 0),
                    input_tokens_cache_read=metrics.get("cached_tokens"),
                    input_tokens_cache_write=extra.get("cache_creation_input_tokens"),
                    total_cost=metrics.get("cost_usd"),
                )
                output = ModelOutput(
                    model=model,
                    choices=[ChatCompletionChoice(message=reply, stop_reason="tool_calls" if calls else "stop")],
                    usage=usage,
                )
                events.append(
                    ModelEvent(
                        model=model, input=[], tools=[], tool_choice="auto", config=GenerateConfig(), output=output
                    )
                )
            results = {item.get("source_call_id"): item for item in (step.get("observation") or {}).get("results", [])}
            for call in step.get("tool_calls") or []:
                result = results.get(call["tool_call_id"]) or {}
                content = result.get("content") or ""
                failed = bool((result.get("extra") or {}).get("is_error"))
                error = ToolCallError("unknown", content) if failed else None
                messages.append(
                    ChatMessageTool(
                        content=content, tool_call_id=call["tool_call_id"], function=call["function_name"], error=error
                    )
                )
                events.append(
                    ToolEvent(
                        id=call["tool_call_id"],
                        function=call["function_name"],
                        arguments=call["arguments"],
                        result=content,
                        error=error,
                    )
                )
    return prompt if prompt is not None else f"task {task}", messages, events


ROW_METADATA = (
    "task",
    "arm",
    "run",
    "agent",
    "model",
    "cli_version",
    "resolved",
    "ok",
    "error_kind",
    "cost_usd",
    "cli_cost_usd",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "duration_s",
    "num_turns",
    "skill_invoked",
    "tool_use_counts",
    "authored_tests_passed",
    "oracle_passed",
    "cost_check",
)


def _sample(inspect_ai: Any, root: Path, generation: str, row: Mapping[str, Any]) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelUsage
    from inspect_ai.scorer import Score

    prompt, messages, events = _messages(inspect_ai, cell_trajectories(root, generation, row), row["task"])
    reads, writes = row.get("cache_read_input_tokens") or 0, row.get("cache_creation_input_tokens") or 0
    usage = ModelUsage(
        input_tokens=row.get("input_tokens") or 0,
        output_tokens=row.get("output_tokens") or 0,
        total_tokens=(row.get("input_tokens") or 0) + reads + writes + (row.get("output_tokens") or 0),
        input_tokens_cache_read=reads,
        input_tokens_cache_write=writes,
        total_cost=row.get("cost_usd"),
    )
    return EvalSample(
        id=row["task"],
        epoch=row["run"] + 1,
        input=prompt,
        target="",
        messages=messages,
        events=events,
        scores={name: Score(value=value) for name, value in sample_scores(row).items()},
        metadata={key: row.get(key) for key in ROW_METADATA if key in row},
        model_usage={row.get("model") or "unknown": usage},
        error=None,
    )


def gate_metadata(promotion: Mapping[str, Any] | None, arm: str) -> dict[str, Any] | None:
    """The gate's decisions that name the arm (as incumbent or candidate), and whether its generation promoted."""
    if promotion is None:
        return None
    decisions = [
        {
            key: decision.get(key)
            for key in ("incumbent_arm", "candidate_arm", "rule", "decision", "median_improvement_pct", "reasons")
        }
        for decision in promotion["decisions"]
        if arm in (decision["incumbent_arm"], decision["candidate_arm"])
    ]
    return {"run_status": promotion["run_status"], "promoted": is_promoted(promotion), "decisions": decisions}


def eval_log(
    inspect_ai: Any, root: Path, generation: str, arm: str, rows: Sequence[Mapping[str, Any]], promotion: Any
) -> Any:
    """The Inspect log of one arm in one generation."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    samples = [_sample(inspect_ai, root, generation, row) for row in rows]
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    scores = []
    for name in SCORES:
        values = [sample.scores[name].value for sample in samples if name in sample.scores]
        if values:
            metrics = {"mean": EvalMetric(name="mean", value=statistics.fmean(values))}
            if name == "cost_usd":
                metrics["sum"] = EvalMetric(name="sum", value=round(sum(values), 10))
            scores.append(EvalScore(name=name, scorer=name, scored_samples=len(values), metrics=metrics))
    experiment = root.name
    models = sorted({str(row.get("model")) for row in rows})
    return EvalLog(
        status="success",
        eval=EvalSpec(
            created=min((str(row.get("recorded_at")) for row in rows), default=""),
            task=f"{experiment}/{generation}/{arm}",
            task_id=f"{experiment}-{generation}-{arm}",
            dataset=EvalDataset(name=experiment, samples=len(tasks), sample_ids=list(tasks)),
            model="/".join(models) if len(models) > 1 else models[0],
            config=EvalConfig(epochs=max(row["run"] for row in rows) + 1),
            metadata={
                "skillbench": {
                    "experiment": experiment,
                    "generation": generation,
                    "arm": arm,
                    "agent": rows[0].get("agent"),
                    "gate": gate_metadata(promotion, arm),
                }
            },
        ),
        results=EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores),
        stats=EvalStats(
            started_at=min(str(row.get("recorded_at")) for row in rows),
            completed_at=max(str(row.get("recorded_at")) for row in rows),
            model_usage=_usage_by_model(samples),
        ),
        samples=samples,
    )


def _usage_by_model(samples: Sequence[Any]) -> dict[str, Any]:
    """The samples' model usage, summed per model (the log's totals)."""
    totals: dict[str, Any] = {}
    for sample in samples:
        for model, usage in (sample.model_usage or {}).items():
            totals[model] = totals[model] + usage if model in totals else usage
    return totals


def _check_folder(out: Path) -> dict[str, Any]:
    """The earlier export's manifest of `out` ({} for a new or empty folder); refuses a folder holding anything else."""
    if not out.exists():
        return {}
    if not out.is_dir():
        raise ExportError(f"{out}: not a folder; name a new or empty folder with --out")
    manifest_path = out / MANIFEST
    manifest = artifacts.read_json(manifest_path) if manifest_path.is_file() else {"files": []}
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise ExportError(f"{manifest_path}: not an export's manifest; name a new or empty folder with --out")
    ours = set(manifest.get("files", [])) | ({MANIFEST} if manifest_path.is_file() else set())
    foreign = sorted(entry.name for entry in out.iterdir() if entry.name not in ours)
    if foreign:
        raise ExportError(
            f"{out} holds {len(foreign)} file(s) an export did not write (first: {foreign[0]}); nothing was written: "
            "name a new or empty folder with --out"
        )
    return dict(manifest)


def export_inspect(results: Path, out: Path | None = None) -> list[Path]:
    """Write the results folder's Inspect logs into `out` (default `<results>/inspect`); returns their paths."""
    inspect_ai = _inspect()
    from inspect_ai.log import write_eval_log

    root = Path(results)
    out = Path(out) if out is not None else root / "inspect"
    manifest = _check_folder(out)
    logs = []
    for generation, rows_path, promotion_path in generations(root):
        rows = artifacts.read_jsonl(rows_path, "result-row")
        promotion = artifacts.read_artifact(promotion_path, "promotion") if promotion_path else None
        for arm in dict.fromkeys(row["arm"] for row in rows):
            arm_rows = sorted((row for row in rows if row["arm"] == arm), key=lambda row: (row["run"], row["task"]))
            logs.append(
                (
                    f"{root.name}_{generation}_{arm}.eval",
                    eval_log(inspect_ai, root, generation, arm, arm_rows, promotion),
                )
            )
    if not logs:
        raise ExportError(f"{root}: no results.jsonl under sweep/ or gen<N>/; run the experiment first")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, log in logs:
        temporary = out / f".{name}.tmp"
        try:
            write_eval_log(log, str(temporary), format="eval")
            os.replace(temporary, out / name)
        finally:
            temporary.unlink(missing_ok=True)
        written.append(out / name)
    names = sorted(set(manifest.get("files", [])) | {path.name for path in written})
    artifacts.atomic_write_text(out / MANIFEST, artifacts.canonical_json({"files": names, "results": str(root)}))
    return written
