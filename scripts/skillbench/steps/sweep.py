"""Steps of workflow/rules/sweep.smk: cell records → results.jsonl → report.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts, layout
from skillbench.base.records import ResultRow, Schedule
from skillbench.decision.sequential import run_design
from skillbench.experiment.arms import is_candidate
from skillbench.experiment.schedule import batch_fields
from skillbench.reporting import cellpage, report


def batch_rows(records: list[str], *, results_root: str, design: Any, schedules: list[str]) -> list[ResultRow]:
    """The rows of cell records under ``results_root``, each with the batch its cell ran in, its time block and
    start position (from its batch's schedule, one of ``schedules``) and its start time: what the gate pairs by."""
    plan = run_design(design)
    documents: dict[tuple[int, int], Schedule] = {}
    for path in schedules:
        document = cast(Schedule, artifacts.read_artifact(Path(path), "schedule"))
        documents[(document["generation"], document["look"])] = document
    rows = []
    for path in records:
        record = artifacts.read_artifact(Path(path), "cell-record")
        row = artifacts.validate(record["row"], "result-row", source=f"{path} (row)")
        where = layout.parse_cell_record(Path(path).relative_to(results_root))
        if where is None:
            raise ValueError(f"{path} is not a cell record under {results_root}")
        generation, task, arm, run = where
        fields = batch_fields(
            generation,
            task,
            arm,
            run,
            looks=plan["looks"],
            sequential=plan["kind"] == "sequential",
            schedules=documents,
        )
        rows.append(cast(ResultRow, {**row, **fields, "started_at": record["timing"]["started_at"]}))
    return rows


def collect_results(
    *,
    records: list[str],
    bindings: str,
    arm_order: list[str],
    out: str,
    design: Any = 1,
    schedules: list[str] | None = None,
) -> None:
    """A sweep's or a generation's rows (``out``, in `sweep/` or `gen<N>/`), each naming its batch (``design``: the
    config's ``runs``; ``schedules``: the schedule of every generation batch the records ran in)."""
    task_order = [task["id"] for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]]
    rows = batch_rows(
        records, results_root=str(Path(out).parent.parent), design=design, schedules=list(schedules or [])
    )
    ordered = report.canonical_order(cast(list[dict[str, Any]], rows), task_order, arm_order)
    artifacts.write_jsonl(Path(out), ordered, "result-row")


def render_report(
    *,
    results: str,
    bindings: str,
    model: dict[str, Any],
    runs: Any,
    tools: list[str],
    baseline_arm: str,
    arm_order: list[str],
    out: str,
    baseline_arms: dict[str, str] | None = None,
    promotion: str | None = None,
    candidate_diff: str | None = None,
    sweep: str | None = None,
    title: str = "skillbench benchmark",
) -> None:
    """report.md of a sweep or a generation; `model` is the config's model section, `runs` its design; a
    generation's `candidate_diff` is its candidate's whole diff (candidate.diff), and its report also reads the
    sweep's rows (`sweep`), to show how far its anchor moved since them."""
    rows = artifacts.read_jsonl(Path(results), "result-row")
    bound = artifacts.read_artifact(Path(bindings), "task-bindings")
    promotion_doc = artifacts.read_artifact(Path(promotion), "promotion") if promotion else None
    provenance = {
        "model": model["name"],
        "provider": model["provider"],
        "effort": model["effort"] or "CLI default",
        "selected_tasks": [task["id"] for task in bound["tasks"]],
        "skipped_tasks": bound["skipped_expensive"],
        "runs": report.runs_text(runs),
        "run_status": "complete",
        "tools": tools,
    }
    text = report.render_report(
        rows,
        title=title,
        task_order=provenance["selected_tasks"],
        arm_order=arm_order,
        provenance=provenance,
        promotion=promotion_doc,
        baseline_arm=baseline_arm,
        baseline_arms=baseline_arms,
        candidate_diff=Path(candidate_diff).read_text(encoding="utf-8") if candidate_diff else None,
        earlier=artifacts.read_jsonl(Path(sweep), "result-row") if sweep else None,
    )
    oracle_logs = report.oracle_log_section(oracle_log_links(rows, Path(out)))
    artifacts.atomic_write_text(
        Path(out), text + oracle_logs + cellpage.cells_markdown(cell_page_links(rows, Path(out)))
    )


def _row_cell(rows_folder: Path, row: dict[str, Any]) -> Path:
    """The folder of a row's cell: the report sits in `sweep/` or `gen<N>/` of the results root."""
    generation = layout.generation_of_folder(rows_folder.name)
    return Path(layout.row_cell_dir(rows_folder.parent, row, generation, candidate=is_candidate(row["arm"])))


def cell_page_links(rows: list[dict[str, Any]], report_path: Path) -> list[tuple[str, str, int, str]]:
    """(task, arm, run, path relative to the report) of every row's cell page."""
    folder = report_path.parent
    generation = layout.generation_of_folder(folder.name)
    links = []
    for row in rows:
        cells = layout.cellset(generation if is_candidate(row["arm"]) else None)
        page = layout.cell_page(folder.parent, cells, row["task"], row["arm"], row["run"])
        links.append((row["task"], row["arm"], row["run"], os.path.relpath(page, folder)))
    return links


def oracle_log_links(rows: list[dict[str, Any]], report_path: Path) -> list[tuple[dict[str, Any], str]]:
    """(row, path relative to the report) of each existing owner-only oracle log of a run whose oracle failed.

    The report sits in `sweep/` or `gen<N>/` of the results root; the logs beside the records."""
    folder = report_path.parent
    links = []
    for row in rows:
        log = _row_cell(folder, row) / layout.ORACLE_LOG
        if report.oracle_failed(row) and log.is_file():
            links.append((row, os.path.relpath(log, folder)))
    return links
