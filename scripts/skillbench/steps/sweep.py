"""Steps of workflow/rules/sweep.smk: cell records → results.jsonl → report.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from skillbench.base import artifacts, layout
from skillbench.experiment.arms import is_candidate
from skillbench.reporting import cellpage, report


def collect_results(*, records: list[str], bindings: str, arm_order: list[str], out: str) -> None:
    task_order = [task["id"] for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]]
    rows = []
    for path in records:
        record = artifacts.read_artifact(Path(path), "cell-record")
        rows.append(artifacts.validate(record["row"], "result-row", source=f"{path} (row)"))
    artifacts.write_jsonl(Path(out), report.canonical_order(rows, task_order, arm_order), "result-row")


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
    title: str = "skillbench benchmark",
) -> None:
    """report.md of a sweep or a generation; `model` is the config's model section, `runs` its design, and a
    generation's `candidate_diff` its candidate's whole diff (candidate.diff)."""
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
    )
    oracle_logs = report.oracle_log_section(oracle_log_links(rows, Path(out)))
    artifacts.atomic_write_text(
        Path(out), text + oracle_logs + cellpage.cells_markdown(cell_page_links(rows, Path(out)))
    )


def _row_cell(rows_folder: Path, row: dict[str, Any]) -> Path:
    """The folder of a row's cell: the report sits in `sweep/` or `gen<N>/` of the results root."""
    generation = layout.generation_of_folder(rows_folder.name)
    return Path(
        layout.row_cell_dir(
            rows_folder.parent, row["task"], row["arm"], row["run"], generation, candidate=is_candidate(row["arm"])
        )
    )


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
