"""Steps of workflow/rules/report.smk: read the rows, records and documents a figure or page needs, render it
(skillbench.reporting.figures and pages are pure), write it atomically."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts, layout
from skillbench.base.records import CellRecord, ProposerSession, ResultRow, TaskBindings
from skillbench.execution.repo import MAX_PATCH_BYTES
from skillbench.execution.streams import MAX_TRANSCRIPT_BYTES, parse_event_stream
from skillbench.experiment.arms import is_candidate
from skillbench.reporting import cellpage, figures, pages

# The oracle log is a tail (grading.graders keeps the last characters); read no more than a generous bound.
MAX_ORACLE_LOG_BYTES = 1024 * 1024


def _read_rows(path: Path) -> list[ResultRow]:
    return cast(list[ResultRow], artifacts.read_jsonl(path, "result-row"))  # validated against its schema


def _read_cell_record(path: Path) -> CellRecord:
    return cast(CellRecord, artifacts.read_artifact(path, "cell-record"))  # validated against its schema


def _task_order(bindings: str) -> list[str]:
    document = cast(TaskBindings, artifacts.read_artifact(Path(bindings), "task-bindings"))
    return [task["id"] for task in document["tasks"]]


def plot_cost_resolution(*, results: str, bindings: str, arm_order: list[str], title: str, out: str) -> None:
    rows = _read_rows(Path(results))
    facets = figures.cost_resolution_data(rows, _task_order(bindings), arm_order)
    colours = figures.arm_colours(arm_order)
    artifacts.atomic_write_text(Path(out), figures.plot_cost_resolution(facets, title=title, colours=colours))


def plot_paired_improvement(*, promotion: str, candidate_arm: str, out: str) -> None:
    document = artifacts.read_artifact(Path(promotion), "promotion")
    artifacts.atomic_write_text(Path(out), figures.plot_forest(figures.forest_data(document, candidate_arm)))


def plot_generation_chain(*, summary: str, promotions: list[str], out: str) -> None:
    document = artifacts.read_artifact(Path(summary), "summary")
    gates = [artifacts.read_artifact(Path(path), "promotion") for path in promotions]
    artifacts.atomic_write_text(Path(out), figures.plot_generations(figures.generation_chain_data(document, gates)))


def _transcript_role(record: CellRecord, index: int, path: str) -> str:
    """The session role of a cell's ``index``-th transcript (files are named ``<role>-<session id>.jsonl``)."""
    roles = [session["role"] for session in record["timing"]["sessions"]]
    name = Path(path).name
    return next((r for r in roles if name.startswith(f"{r}-")), roles[index] if index < len(roles) else "session")


def _record_sessions(record_path: Path, record: CellRecord) -> list[dict[str, Any]]:
    """Each session of a cell as the gateway's ledger measured it: its role, cost and model requests."""
    row = record["row"]
    ledger_path = record_path.parent / layout.LEDGER
    if not ledger_path.is_file():
        return []  # a cell whose job wrote no ledger (none of its sessions started)
    ledger = artifacts.read_artifact(ledger_path, "ledger")
    return [
        {
            "role": figures.session_role(row["arm"], session["role"]),
            "cost_usd": session["totals"]["cost_usd"],
            "num_turns": sum(entry["kind"] == "messages" for entry in session["requests"]),
        }
        for session in ledger["sessions"]
    ]


def run_records(results: list[str]) -> list[Path]:
    """The cell records behind the rows of each ``results.jsonl`` (sweep/ or gen<N>/), each once, in row order:
    each in the folder of its batch (``layout.row_cell_dir``)."""
    records: dict[Path, None] = {}
    for path in map(Path, results):
        root, generation = path.parent.parent, layout.generation_of_folder(path.parent.name)
        for row in _read_rows(path):
            cell = layout.row_cell_dir(root, row, generation, candidate=is_candidate(row["arm"]))
            records[Path(cell) / layout.RECORD] = None
    return list(records)


def plot_run_figures(
    *,
    results: list[str],
    proposer_sessions: list[str],
    arm_order: list[str],
    spend_title: str,
    timeline_title: str,
    spend_out: str,
    timeline_out: str,
) -> None:
    """The run's two figures from the cell records behind every results.jsonl, read once: where the money went
    (cost and turns per session role, the proposer's sessions included) and the cells on worker slots."""
    sessions: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    for path in run_records(results):
        record = _read_cell_record(path)
        sessions += _record_sessions(path, record)
        cells.append(_timeline_cell(path, record))
    for path in map(Path, proposer_sessions):
        session = cast(ProposerSession, artifacts.read_artifact(path, "proposer-session"))["session"]
        sessions.append(
            {"role": "proposer", "cost_usd": session.get("cost_usd"), "num_turns": session.get("num_turns")}
        )
    artifacts.atomic_write_text(Path(spend_out), figures.plot_spend(figures.spend_data(sessions), title=spend_title))
    colours = figures.arm_colours(arm_order)
    artifacts.atomic_write_text(
        Path(timeline_out), figures.plot_timeline(figures.timeline_data(cells), title=timeline_title, colours=colours)
    )


def _timeline_cell(path: Path, record: CellRecord) -> dict[str, Any]:
    row, timing = record["row"], record["timing"]
    generation = path.parts[-6] if len(path.parts) >= 6 and path.parts[-6].startswith("gen") else ""
    label = "/".join(part for part in (generation, row["task"], row["arm"], f"run{row['run']}") if part)
    return {
        "label": label,
        "arm": row["arm"],
        "started_at": timing["started_at"],
        "finished_at": timing["finished_at"],
        "sessions": timing["sessions"],
    }


def render_report_page(*, markdown: str, figure_files: list[str], out: str, title: str | None = None) -> None:
    """A Markdown report and its figures → one self-contained HTML page."""
    text = Path(markdown).read_text(encoding="utf-8")
    inline = [(*pages.figure_text(path), Path(path).read_bytes()) for path in figure_files]
    artifacts.atomic_write_text(Path(out), pages.render_page(text, inline, title=title))


def _transcripts(run_dir: Path, record: CellRecord) -> list[cellpage.Transcript]:
    """Each session's parent-captured transcript, checked against the digest its row records."""
    agent = record["row"].get("agent") or "claude-code"
    found = []
    for index, artifact in enumerate(record["row"]["transcript_artifacts"]):
        role = _transcript_role(record, index, artifact["path"])
        try:
            raw = artifacts.read_regular_file(run_dir / artifact["path"], MAX_TRANSCRIPT_BYTES, what="transcript")
        except (OSError, artifacts.ArtifactError) as exc:
            found.append(cellpage.Transcript(role, artifact["path"], None, str(exc)))
            continue
        problem = (
            None if hashlib.sha256(raw).hexdigest() == artifact["sha256"] else "does not match its recorded digest"
        )
        # A CLI other than Claude Code (whose own events the page reads) is shown from its ATIF trajectory: every
        # CLI's turns and tool calls in one shape, its skill use the adapter's proof, as on the row.
        trajectory = None if agent == "claude-code" or problem else _trajectory(run_dir / artifact["path"])
        try:
            found.append(cellpage.Transcript(role, artifact["path"], parse_event_stream(raw), problem, trajectory))
        except ValueError as exc:
            found.append(cellpage.Transcript(role, artifact["path"], None, str(exc), trajectory))
    return found


def _trajectory(transcript: Path) -> dict[str, Any] | None:
    """A transcript's ATIF trajectory beside it (None when the cell wrote none, or it cannot be read)."""
    path = Path(layout.trajectory_of_transcript(str(transcript)))
    try:
        document = json.loads(artifacts.read_regular_file(path, MAX_TRANSCRIPT_BYTES * 4, what="trajectory"))
    except (OSError, ValueError, artifacts.ArtifactError):
        return None
    return document if isinstance(document, dict) and isinstance(document.get("steps"), list) else None


def _text_file(path: Path, limit: int) -> str | None:
    """A cell's text artifact (no-follow, bounded), or None when it is not there."""
    try:
        return artifacts.read_regular_file(path, limit, what=path.name).decode("utf-8", "replace")
    except (OSError, artifacts.ArtifactError):
        return None


def render_cell_pages(*, records: list[str], arm_order: list[str], pages_out: str, authors_out: str) -> None:
    """Every cell of one cell folder → its page for the shared report (``pages_out``) and the author-only page that
    also holds the hidden oracle's output (``authors_out``, owner-only like the oracle.log beside the record): one
    job, so a run's tail renders in seconds what one job per cell took minutes for."""
    colours = figures.arm_colours(arm_order)
    pages_dir, authors_dir = Path(pages_out), Path(authors_out)
    pages_dir.mkdir(parents=True, exist_ok=True)
    authors_dir.mkdir(parents=True, exist_ok=True)
    authors_dir.chmod(0o700)
    for path in map(Path, records):
        document = _read_cell_record(path)
        run_dir = path.parent
        row = document["row"]
        cells = layout.cellset(_cell_generation(run_dir))
        root = layout.root_of_cell_file(path, cells)
        name = layout.CELL_PAGE_PATTERN.format(task=row["task"], arm=row["arm"], run=row["run"])
        author = Path(layout.cell_author_page(root, cells, row["task"], row["arm"], row["run"]))
        page = functools.partial(
            cellpage.render_cell_page,
            label=str(run_dir.relative_to(root)),
            row=row,
            timing=document["timing"],
            transcripts=_transcripts(run_dir, document),
            patch=_text_file(run_dir / layout.PATCH, MAX_PATCH_BYTES),
            colour=colours.get(row["arm"], "#57606a"),
            author_page=str(author.relative_to(root)),
        )
        (pages_dir / name).parent.mkdir(parents=True, exist_ok=True)
        artifacts.atomic_write_text(pages_dir / name, page())
        oracle_log = _text_file(run_dir / layout.ORACLE_LOG, MAX_ORACLE_LOG_BYTES)
        target = authors_dir / name
        for folder in reversed(target.relative_to(authors_dir).parents[:-1]):
            (authors_dir / folder).mkdir(mode=0o700, exist_ok=True)
        artifacts.atomic_write_text(target, page(author_only=True, oracle_log=oracle_log), mode=0o600)


def _cell_generation(run_dir: Path) -> int | None:
    """The generation of a candidate cell's folder (``gen<N>/cells/<task>/<arm>/run<i>``), None for ``cells/``."""
    return layout.generation_of_folder(run_dir.parents[3].name)
