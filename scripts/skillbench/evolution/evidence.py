"""The proposer's evidence bundle: which rows to show, and a bounded, redacted, verified copy of their artifacts.

Owns evidence selection (unresolved rows first, then the most expensive resolved ones), the compact
row a proposer reads, the learning-queue filter, the mapping of a result row to its cell's run
folder, and staging the bundle folder itself. A staged transcript must be exactly the artifact its
row names (owner-only regular file, size and SHA-256 as recorded); anything else refuses the whole
bundle. Every payload is redacted before it is measured; each file and the bundle are bounded, and
an over-budget bundle loses selected rows from the end, then the prior proposal, then fails. The
bundle is written into a hidden sibling folder and renamed into place, so a failure or a killed
job never leaves a plausible bundle behind.

Review tasks (rows with ``review`` metrics, scored against hidden labels) reach the proposer as per (task, arm)
aggregates only: ``review-scores.json`` holds each (task, arm)'s means over its valid runs (`review_scores`), and
their rows are never selected. A run's findings are in its transcript and patch; its score against the labels
(tp, fp, verdict_correct, even resolved) beside them would tell which reported lines are labelled defects and which
verdict is expected, and a handful of runs differenced against each other rebuilds every label (issue 38; the canary
is tests/unit/test_review_label_canary.py). So no review run's transcript, patch or per-run score is staged, the
aggregates name neither the case (defect or clean control) nor the class, and a gate-summary line says "a review
task" where its reason named one. Nothing here reads a task's labels or the hidden snapshot.

Trigger tasks (labelled prompts) reach the proposer as per-skill figures only: ``trigger-scores.json`` (schema
``trigger-scores``) holds each arm's recall, precision, false triggers and near-miss restraint per skill
(`aggregate.trigger_scores`). Their rows are never selected (a prompt's outcome beside its transcript would tell its
label), and a gate-summary line says "a trigger prompt" where its reason named a trigger task.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, cast

from skillbench.base import artifacts, layout
from skillbench.base.errors import SkillbenchError, raised_as
from skillbench.base.records import (
    EXCLUDED_ERROR_KINDS,
    EvidenceFile,
    EvidenceManifest,
    EvidenceSources,
)
from skillbench.base.redaction import redact_text, redact_value
from skillbench.decision import aggregate
from skillbench.decision.aggregate import is_review_row, is_trigger_row
from skillbench.decision.gate import summarize_gate
from skillbench.execution.streams import MAX_TRANSCRIPT_BYTES, TRANSCRIPT_SOURCE
from skillbench.experiment.arms import CANDIDATE_PREFIX

MANIFEST_SCHEMA = "evidence-manifest/v1"
MAX_EVIDENCE_ROWS = 12
MAX_TRANSCRIPTS_PER_ROW = 2
MAX_LEARNINGS = 40
VERIFY_TAIL_CHARS = 600
MAX_FILE_BYTES = 256 * 1024
MAX_BUNDLE_BYTES = 2 * 1024 * 1024
# A patch is read whole (and redacted whole) up to this size; beyond it only its tail is read.
MAX_SOURCE_BYTES = MAX_TRANSCRIPT_BYTES
EXCLUDED = EXCLUDED_ERROR_KINDS

ROWS_FILE = "selected-rows.json"
LEARNINGS_FILE = "learnings.json"
GATE_FILE = "gate-summary.json"
PROPOSAL_FILE = "prior-proposal.md"
REVIEW_SCORES_FILE = "review-scores.json"
TRIGGER_SCORES_FILE = "trigger-scores.json"
TRIGGER_SCORES_SCHEMA = "trigger-scores/v1"
# What a gate-summary line says in place of a trigger task's id.
TRIGGER_TASK_STANDIN = "a trigger prompt"
MANIFEST_FILE = "manifest.json"
TRANSCRIPT_KEYS = frozenset({"path", "sha256", "bytes", "source"})

# What a gate-summary line says in place of a review task's id (its reasons may name its case).
REVIEW_TASK_STANDIN = "a review task"

Origin = Literal["harness", "agent"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_TRANSCRIPT_NAME = re.compile(r"[A-Za-z0-9._-]+\.jsonl")


class EvidenceError(SkillbenchError, ValueError):
    """The evidence cannot be staged as asked; the message names the file or field and the fix."""


def read_manifest(bundle: Path) -> EvidenceManifest:
    """The bundle's manifest, validated against its schema."""
    with raised_as(EvidenceError, artifacts.ArtifactError):
        return cast(EvidenceManifest, artifacts.read_artifact(Path(bundle) / MANIFEST_FILE, "evidence-manifest"))


def read_gate_lines(bundle: Path, manifest: EvidenceManifest) -> list[str]:
    """gate-summary.json of a bundle as its manifest records it (size and SHA-256): a list of strings."""
    entry = next((entry for entry in manifest["files"] if entry["name"] == GATE_FILE), None)
    if entry is None:
        return []
    payload = artifacts.read_regular_file(Path(bundle) / GATE_FILE, MAX_FILE_BYTES, what=GATE_FILE, error=EvidenceError)
    if hashlib.sha256(payload).hexdigest() != entry["sha256"]:
        raise EvidenceError(f"{Path(bundle) / GATE_FILE} does not match the SHA-256 its manifest records")
    try:
        lines = json.loads(payload)
    except ValueError as exc:
        raise EvidenceError(f"{Path(bundle) / GATE_FILE} is not JSON: {exc}") from exc
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise EvidenceError(f"{Path(bundle) / GATE_FILE} must hold a list of strings")
    return lines


# ─── Selection (pure) ───────────────────────────────────────────────────────


def _cost(row: dict[str, Any]) -> float:
    value = row.get("cost_usd")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def select_evidence(rows: list[dict[str, Any]], max_rows: int = MAX_EVIDENCE_ROWS) -> list[dict[str, Any]]:
    """The rows a proposer should study: unresolved ones by (task, arm, run), then resolved ones by cost.

    Rows of an excluded error kind (harness, session, cleanup, unverifiable, cancelled) carry no
    signal about the prompt and are dropped. A label-scored task's rows are never selected: a labelled prompt's
    outcome beside its transcript (which holds the prompt) tells its label, and a review run's score beside the
    findings its transcript holds tells which of them are labelled defects; ``trigger-scores.json`` and
    ``review-scores.json`` carry their aggregates instead. Unmeasured cost counts as 0; ties keep input order.
    """
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 0:
        raise ValueError(f"max_rows must be an integer >= 0 (got {max_rows!r})")
    measured = [row for row in rows if row.get("error_kind") not in EXCLUDED and not is_label_scored(row)]
    unresolved = sorted(
        (row for row in measured if not row.get("resolved")),
        key=lambda row: (str(row.get("task")), str(row.get("arm")), int(row.get("run") or 0)),
    )
    resolved = sorted((row for row in measured if row.get("resolved")), key=_cost, reverse=True)
    return (unresolved + resolved)[:max_rows]


def is_label_scored(row: dict[str, Any]) -> bool:
    """A row of a task judged against hidden labels (a review or a trigger task)."""
    return is_review_row(row) or is_trigger_row(row)


def patch_name(index: int) -> str:
    return f"patch-{index}.diff"


def transcript_name(index: int, session: int) -> str:
    return f"transcript-{index}-{session}.jsonl"


def compact_row(
    row: dict[str, Any], index: int, *, patch_staged: bool = False, transcripts_staged: int = 0
) -> dict[str, Any]:
    """Row ``index`` of ``selected-rows.json``: what a proposer can use, naming the files staged for it."""
    return {
        "task": row.get("task"),
        "class": row.get("class"),
        "arm": row.get("arm"),
        "run": row.get("run"),
        "resolved": row.get("resolved"),
        "error_kind": row.get("error_kind"),
        "cost_usd": row.get("cost_usd"),
        "num_turns": row.get("num_turns"),
        "output_tokens": row.get("output_tokens"),
        "churn": (
            f"{row.get('diff_files') or 0}f/+{row.get('diff_insertions') or 0}/\u2212{row.get('diff_deletions') or 0}"
        ),
        "session_ids": list(row.get("session_ids") or []),
        "skill_invoked": row.get("skill_invoked"),
        "patch_file": patch_name(index) if patch_staged else None,
        "transcript_files": [transcript_name(index, session) for session in range(transcripts_staged)],
        "verify_tail": str(row.get("verify_output") or "")[-VERIFY_TAIL_CHARS:],
    }


def _rounded(value: float | None, places: int = 4) -> float | None:
    return None if value is None else round(value, places)


def review_scores(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per review task and arm (in order of first appearance), over its valid scored runs: the mean weighted F1,
    recall and blocker recall, the share of correct verdicts, the runs whose review broke the contract or that
    edited code, and the median cost of a run (`aggregate.review_summary`). Counts and ratios only, and none that
    would tell the task's case: no case or class, and no figure that exists for one case only (a clean control's
    pass share or findings); a ratio over nothing is 1.0 on either case (`grading.review`)."""
    scores = []
    for summary in aggregate.review_summaries(rows).values():
        if not summary.valid_runs:
            continue
        scored = summary.scored
        scores.append(
            {
                "task": summary.task,
                "arm": summary.arm,
                "runs": summary.valid_runs,
                "scored_runs": scored,
                "resolved": summary.resolved,
                "contract_broken": summary.contract_broken,
                "edited_code": summary.edited_code,
                "mean_weighted_f1": _rounded(summary.means["weighted_f1"]),
                "mean_recall": _rounded(summary.means["recall"]),
                "mean_blocker_recall": _rounded(summary.means["blocker_recall"]),
                "verdict_correct_share": _rounded(summary.verdict_correct / scored) if scored else None,
                "median_cost_usd": _rounded(summary.cost_usd, 6),
            }
        )
    return scores


def trigger_scores(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``trigger-scores/v1`` document of the rows' trigger tasks (None when they hold none): per arm and skill,
    the counts and ratios of `aggregate.trigger_scores`. No prompt is named, so it never says which skill a given
    prompt expects."""
    scores = aggregate.trigger_scores(rows)
    if not scores:
        return None
    entries = []
    for score in scores:
        entry = asdict(score)
        for share in ("recall", "near_miss_restraint", "precision"):
            entry[share] = _rounded(entry[share])
        entry["cost_per_prompt_usd"] = _rounded(entry["cost_per_prompt_usd"], 6)
        entries.append(entry)
    return artifacts.validate({"schema": TRIGGER_SCORES_SCHEMA, "scores": entries}, "trigger-scores")


def withhold_labelled_tasks(lines: list[str], standins: dict[str, str]) -> list[str]:
    """Gate-summary lines with every label-scored task's id replaced by its stand-in (task id → "a trigger prompt"
    or "a review task").

    A gate reason names a task (`<task>: resolution regressed …`, `<task>: new false positives on a clean
    control …`); for a labelled prompt or a review task, that is a per-task outcome or case the proposer could pair
    with the task's id to tell its label, so only aggregates reach it."""
    if not standins:
        return lines
    names = sorted(standins, key=len, reverse=True)
    pattern = re.compile(rf"(?<![A-Za-z0-9_.-])(?:{'|'.join(map(re.escape, names))})(?![A-Za-z0-9_-])")
    return [pattern.sub(lambda match: standins[match.group(0)], line) for line in lines]


def read_learnings(path: Path | None, evolvable: Sequence[str], cap: int = MAX_LEARNINGS) -> list[dict[str, Any]]:
    """The last ``cap`` learning-queue entries about an evolvable skill.

    The queue is hints appended by live skill runs, not an artifact: blank, malformed and
    non-object lines are skipped, and a missing file (or no path) is an empty queue.
    """
    if path is None or cap <= 0:
        return []
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    wanted = set(evolvable)
    kept: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("skill"), str) and entry["skill"] in wanted:
            kept.append(entry)
    return kept[-cap:]


# ─── Run folders and safe reads ─────────────────────────────────────────────


def _component(value: Any, what: str) -> str:
    if not isinstance(value, str) or value in {"", ".", ".."} or "/" in value or "\\" in value or "\0" in value:
        raise EvidenceError(f"result row {what} {value!r} is not a single safe path component")
    return value


def run_folder(results_root: Path, row: dict[str, Any], generation: int | None) -> Path:
    """Where a row's cell wrote its artifacts.

    A row that names its batch lives in that batch's folder; an older row of a candidate arm (``candidate_…``) ran in
    generation ``generation``, any other arm's in the cache (``layout.row_cell_dir``).
    """
    task = _component(row.get("task"), "task")
    arm = _component(row.get("arm"), "arm")
    run = row.get("run")
    if not isinstance(run, int) or isinstance(run, bool) or run < 0:
        raise EvidenceError(f"result row run {run!r} is not an integer >= 0")
    base = Path(results_root)
    if arm.startswith(CANDIDATE_PREFIX) and "batch" not in row:
        if generation is None:
            raise EvidenceError(
                f"row {task}/{arm}/run{run} is a candidate arm but no generation was given; "
                "pass the generation whose results.jsonl the rows came from"
            )
    return Path(
        layout.row_cell_dir(
            base, {**row, "task": task, "arm": arm}, generation, candidate=arm.startswith(CANDIDATE_PREFIX)
        )
    )


def _real_subdirectory(root: Path, folder: Path, *, owner_only_last: bool = False) -> bool:
    """True when every component of ``folder`` below ``root`` is a real directory; False when one is missing.

    A symlink or non-directory on the way refuses; ``owner_only_last`` also refuses group/other bits
    on the last component.
    """
    relative = folder.relative_to(root)
    current = root
    for position, part in enumerate(relative.parts, start=1):
        current = current / part
        try:
            metadata = current.lstat()
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(metadata.st_mode) or not stat.S_ISDIR(metadata.st_mode):
            raise EvidenceError(f"{current} must be a real directory, not a symlink or file")
        if owner_only_last and position == len(relative.parts) and stat.S_IMODE(metadata.st_mode) & 0o077:
            raise EvidenceError(f"{current} must be owner-only (0700); run folders keep transcripts private")
    return True


def _read_patch(path: Path) -> bytes:
    # Past MAX_SOURCE_BYTES only the tail, from its first whole line: a partial first line could hold the
    # tail of a secret that redaction would no longer match.
    return artifacts.read_regular_file(path, MAX_SOURCE_BYTES, what="patch", error=EvidenceError, keep_tail=True)


def _transcript_metadata(metadata: Any, where: str) -> tuple[str, str, int]:
    """Check a transcript artifact reference without touching the filesystem."""
    if not isinstance(metadata, dict) or set(metadata) != TRANSCRIPT_KEYS:
        keys = sorted(map(str, metadata)) if isinstance(metadata, dict) else type(metadata).__name__
        raise EvidenceError(f"{where}: transcript metadata must have exactly path, sha256, bytes, source (got {keys})")
    if metadata["source"] != TRANSCRIPT_SOURCE:
        raise EvidenceError(
            f"{where}: transcript source {metadata['source']!r} is not {TRANSCRIPT_SOURCE!r}; "
            "only the parent-captured event stream is evidence"
        )
    relative, digest, size = metadata["path"], metadata["sha256"], metadata["bytes"]
    if not isinstance(relative, str):
        raise EvidenceError(f"{where}: transcript path must be a string (got {relative!r})")
    parts = PurePosixPath(relative).parts
    if (
        relative != f"transcripts/{parts[-1] if parts else ''}"
        or len(parts) != 2
        or not _TRANSCRIPT_NAME.fullmatch(parts[1])
        or parts[1] in {".", ".."}
    ):
        raise EvidenceError(f"{where}: transcript path {relative!r} must be transcripts/<name>.jsonl in the run folder")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise EvidenceError(f"{where}: transcript sha256 {digest!r} is not a lowercase hex SHA-256")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_TRANSCRIPT_BYTES:
        raise EvidenceError(f"{where}: transcript bytes {size!r} must be an integer within 0..{MAX_TRANSCRIPT_BYTES}")
    return relative, digest, size


def _read_transcript(folder: Path, relative: str, digest: str, size: int) -> bytes:
    """The transcript's bytes, only if it is exactly the owner-only artifact its row recorded."""
    path = folder / relative

    def as_recorded(opened: os.stat_result) -> None:
        if stat.S_IMODE(opened.st_mode) & 0o077:
            raise EvidenceError(f"transcript must be owner-only (0600): {path}")
        if opened.st_size != size:
            raise EvidenceError(f"transcript size {opened.st_size} does not match its result row ({size}): {path}")

    payload = artifacts.read_regular_file(path, size, what="transcript", error=EvidenceError, inspect=as_recorded)
    if len(payload) != size:
        raise EvidenceError(f"transcript changed while being read: {path}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise EvidenceError(f"transcript SHA-256 does not match its result row (tampered or replaced): {path}")
    return payload


# ─── Redaction and bounding ─────────────────────────────────────────────────


def _redacted_json(document: Any, secrets: Sequence[str], name: str) -> bytes:
    try:
        text = redact_text(artifacts.canonical_json(redact_value(document, secrets)), secrets)
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise EvidenceError(f"{name}: cannot be redacted into valid JSON ({exc})") from exc
    return text.encode("utf-8")


def _redacted_jsonl(payload: bytes, secrets: Sequence[str]) -> str:
    """Each parseable line structurally (credential keys blanked), then the whole text literally."""
    lines = payload.decode("utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            lines[number] = json.dumps(
                redact_value(json.loads(line), secrets),
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            )
        except (ValueError, RecursionError):
            pass  # not a JSON line (or one redaction cannot rebuild): the text pass still covers it
    return redact_text("\n".join(lines), secrets)


def _tail(payload: bytes, limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of UTF-8 ``payload``, starting on a character boundary."""
    if len(payload) <= limit:
        return payload, False
    cut = payload[len(payload) - limit :]
    start = 0
    while start < len(cut) and cut[start] & 0xC0 == 0x80:
        start += 1
    return cut[start:], True


def _bounded(name: str, payload: bytes) -> bytes:
    if len(payload) > MAX_FILE_BYTES:
        raise EvidenceError(
            f"{name} is {len(payload)} bytes after redaction, over the per-file limit of {MAX_FILE_BYTES}"
        )
    return payload


# ─── Staging ────────────────────────────────────────────────────────────────


def _check_rows_layout(rows_path: Path, generation: int | None) -> None:
    """A results.jsonl inside gen<N>/ or sweep/ names its generation; a different one would misfile candidates."""
    folder = Path(rows_path).parent.name
    number = layout.generation_of_folder(folder)
    if number is not None and generation != number:
        raise EvidenceError(
            f"{rows_path} holds generation {number}'s rows but generation {generation!r} was given; "
            "pass the generation that produced the rows"
        )
    if folder == layout.SWEEP and generation is not None:
        raise EvidenceError(f"{rows_path} holds sweep rows but generation {generation} was given; pass None")


def _row_files(
    results_root: Path, row: dict[str, Any], index: int, generation: int | None, secrets: Sequence[str]
) -> dict[str, tuple[bytes, bool]]:
    """The redacted, bounded patch and transcripts of selected row ``index``, verified against the row."""
    where = f"selected row {index} ({row.get('task')}/{row.get('arm')}/run{row.get('run')})"
    references = row.get("transcript_artifacts") or []
    if not isinstance(references, list):
        raise EvidenceError(f"{where}: transcript_artifacts must be a list")
    if len(references) > MAX_TRANSCRIPTS_PER_ROW:
        raise EvidenceError(f"{where}: {len(references)} transcripts exceed the limit of {MAX_TRANSCRIPTS_PER_ROW}")
    checked = [_transcript_metadata(reference, where) for reference in references]
    if len({relative for relative, _, _ in checked}) != len(checked):
        raise EvidenceError(f"{where}: the same transcript path is listed twice")

    folder = run_folder(results_root, row, generation)
    files: dict[str, tuple[bytes, bool]] = {}
    if not _real_subdirectory(results_root, folder):
        if checked:
            raise EvidenceError(f"{where}: run folder {folder} is missing but the row names transcripts")
        return files
    patch = folder / "patch.diff"
    if os.path.lexists(patch):
        text = redact_text(_read_patch(patch).decode("utf-8", errors="replace"), secrets)
        files[patch_name(index)] = _tail(text.encode("utf-8"), MAX_FILE_BYTES)
    if checked and not _real_subdirectory(results_root, folder / "transcripts", owner_only_last=True):
        raise EvidenceError(f"{where}: transcript folder {folder / 'transcripts'} is missing")
    for session, (relative, digest, size) in enumerate(checked):
        text = _redacted_jsonl(_read_transcript(folder, relative, digest, size), secrets)
        files[transcript_name(index, session)] = _tail(text.encode("utf-8"), MAX_FILE_BYTES)
    return files


def _read_rows(results_root: Path | None, rows_path: Path | None, generation: int | None) -> list[dict[str, Any]]:
    if rows_path is None:
        return []
    if results_root is None:
        raise EvidenceError(f"{rows_path}: rows were given without results_root; their run folders cannot be found")
    if not Path(results_root).is_dir():
        raise EvidenceError(f"results root {results_root} is not a directory")
    _check_rows_layout(Path(rows_path), generation)
    with raised_as(EvidenceError, artifacts.ArtifactError):
        return artifacts.read_jsonl(Path(rows_path), "result-row")


def _read_prior_proposal(path: Path, secrets: Sequence[str]) -> bytes:
    payload = artifacts.read_regular_file(path, MAX_FILE_BYTES, what="prior proposal", error=EvidenceError)
    text = redact_text(payload.decode("utf-8", errors="replace"), secrets)
    return _bounded(PROPOSAL_FILE, text.encode("utf-8"))


def file_label(name: str) -> tuple[Origin, str]:
    """(origin, what it is) of a bundle file by its name: who wrote its text, as the proposer's prompt labels it."""
    if name.startswith("patch-"):
        return "agent", "the changes one selected session made to its workspace, written by the agent under test"
    if name.startswith("transcript-"):
        return "agent", "one selected session's event stream: the agent under test's messages and its tools' output"
    return FILE_LABELS[name]


# Who wrote each fixed file of a bundle (patches and transcripts: `file_label`).
FILE_LABELS: dict[str, tuple[Origin, str]] = {
    ROWS_FILE: (
        "harness",
        "the selected runs' rows (task, arm, outcome, cost, turns); each verify_tail is the output of the agent's code",
    ),
    GATE_FILE: ("harness", "the gate's decision lines for the previous candidate"),
    REVIEW_SCORES_FILE: ("harness", "review quality per review task and arm (aggregates only)"),
    TRIGGER_SCORES_FILE: ("harness", "skill triggering per arm and skill (aggregates only)"),
    LEARNINGS_FILE: ("agent", "hints appended by live skill runs (agent-written, not ground truth)"),
    PROPOSAL_FILE: ("agent", "the previous proposer's proposal (agent-written)"),
    MANIFEST_FILE: ("harness", "this index of the bundle"),
}


def _file_entry(name: str, payload: bytes, truncated: bool) -> EvidenceFile:
    return {
        "name": name,
        "origin": file_label(name)[0],
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "truncated": truncated,
    }


def _as_given(path: Path | None, secrets: Sequence[str]) -> str | None:
    return None if path is None else redact_text(str(path), secrets)


def _write_bundle(destination: Path, files: dict[str, bytes]) -> None:
    """Write every file into a hidden sibling folder, then rename it to ``destination``; nothing on failure."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent))
    try:
        staging.chmod(0o700)
        for name, payload in files.items():
            artifacts.write_exclusive(staging / name, payload, 0o600)
        if os.path.lexists(destination):
            raise EvidenceError(f"evidence destination appeared while staging: {destination}")
        os.rename(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def stage_evidence(
    *,
    destination: Path,
    results_root: Path | None,
    rows_path: Path | None,
    generation: int | None,
    promotion_path: Path | None,
    prior_proposal: Path | None,
    learnings: list[dict[str, Any]],
    secrets: list[str],
) -> EvidenceManifest:
    """Build the evidence bundle folder ``destination`` and return its ``evidence-manifest/v1`` document.

    ``generation`` is the generation that produced the rows (its candidate cells live under
    ``gen<N>/cells``; None for a sweep). With no ``rows_path`` (a first generation without seed
    results) the bundle holds no rows but is still complete. Every transcript is verified against
    its row before anything is written; any problem raises EvidenceError and leaves no folder.
    """
    destination = Path(destination)
    _check_request(destination, generation)
    rows = _read_rows(results_root, rows_path, generation)
    selected = select_evidence(rows)
    root = Path(results_root) if results_root is not None else Path()
    row_files = [_row_files(root, row, index, generation, secrets) for index, row in enumerate(selected)]
    standins = {str(row["task"]): TRIGGER_TASK_STANDIN for row in rows if is_trigger_row(row)}
    standins.update({str(row["task"]): REVIEW_TASK_STANDIN for row in rows if is_review_row(row)})
    gate_summary = withhold_labelled_tasks(_gate_summary(promotion_path), standins)
    bundle = _Bundle(
        generation=generation,
        sources={
            "results_root": _as_given(results_root, secrets),
            "rows": _as_given(rows_path, secrets),
            "promotion": _as_given(promotion_path, secrets),
            "prior_proposal": _as_given(prior_proposal, secrets),
        },
        rows=rows,
        selected=selected,
        row_files=row_files,
        fixed={
            LEARNINGS_FILE: _bounded(LEARNINGS_FILE, _redacted_json(learnings, secrets, LEARNINGS_FILE)),
            GATE_FILE: _bounded(GATE_FILE, _redacted_json(gate_summary, secrets, GATE_FILE)),
            **_review_file(rows, secrets),
            **_trigger_file(rows, secrets),
        },
        proposal=None if prior_proposal is None else _read_prior_proposal(Path(prior_proposal), secrets),
        learnings=len(learnings),
        gate_decisions=len(gate_summary),
        secrets=secrets,
    )
    payloads, manifest = _fit(bundle, destination / MANIFEST_FILE)
    _write_bundle(destination, payloads)
    return manifest


def _review_file(rows: list[dict[str, Any]], secrets: Sequence[str]) -> dict[str, bytes]:
    """``review-scores.json`` when the rows hold review tasks; nothing otherwise (a bundle without review tasks is
    as before)."""
    scores = review_scores(rows)
    if not scores:
        return {}
    return {REVIEW_SCORES_FILE: _bounded(REVIEW_SCORES_FILE, _redacted_json(scores, secrets, REVIEW_SCORES_FILE))}


def _trigger_file(rows: list[dict[str, Any]], secrets: Sequence[str]) -> dict[str, bytes]:
    """``trigger-scores.json`` when the rows hold trigger tasks; nothing otherwise."""
    document = trigger_scores(rows)
    if document is None:
        return {}
    payload = _redacted_json(document, secrets, TRIGGER_SCORES_FILE)
    with raised_as(EvidenceError, artifacts.ArtifactError):
        artifacts.validate(json.loads(payload), "trigger-scores", source=TRIGGER_SCORES_FILE)
    return {TRIGGER_SCORES_FILE: _bounded(TRIGGER_SCORES_FILE, payload)}


def _check_request(destination: Path, generation: int | None) -> None:
    if os.path.lexists(destination):
        raise EvidenceError(f"evidence destination already exists: {destination}; remove it to restage")
    if generation is not None and (not isinstance(generation, int) or isinstance(generation, bool) or generation < 0):
        raise EvidenceError(f"generation must be an integer >= 0 or None (got {generation!r})")


def _gate_summary(promotion_path: Path | None) -> list[str]:
    if promotion_path is None:
        return []
    with raised_as(EvidenceError, artifacts.ArtifactError):
        return summarize_gate(artifacts.read_artifact(Path(promotion_path), "promotion"))


@dataclass(frozen=True)
class _Bundle:
    """Everything read, verified and redacted for a bundle, before it is fitted into the byte budget."""

    generation: int | None
    sources: EvidenceSources
    rows: list[dict[str, Any]]
    selected: list[dict[str, Any]]
    row_files: list[dict[str, tuple[bytes, bool]]]
    fixed: dict[str, bytes]
    proposal: bytes | None
    learnings: int
    gate_decisions: int
    secrets: list[str]

    def files(self, kept_rows: int, keep_proposal: bool) -> dict[str, tuple[bytes, bool]]:
        """Every file but the manifest, (payload, truncated) by name, with the first ``kept_rows`` selected rows."""
        compact = [
            compact_row(
                row,
                index,
                patch_staged=patch_name(index) in self.row_files[index],
                transcripts_staged=sum(1 for name in self.row_files[index] if name.startswith("transcript-")),
            )
            for index, row in enumerate(self.selected[:kept_rows])
        ]
        staged: dict[str, tuple[bytes, bool]] = {
            ROWS_FILE: (_bounded(ROWS_FILE, _redacted_json(compact, self.secrets, ROWS_FILE)), False),
            **{name: (payload, False) for name, payload in self.fixed.items()},
        }
        if keep_proposal and self.proposal is not None:
            staged[PROPOSAL_FILE] = (self.proposal, False)
        for files in self.row_files[:kept_rows]:
            staged.update(files)
        return staged

    def manifest(self, staged: dict[str, tuple[bytes, bool]], kept_rows: int, keep_proposal: bool) -> EvidenceManifest:
        entries = [_file_entry(name, *staged[name]) for name in sorted(staged)]
        return {
            "schema": MANIFEST_SCHEMA,
            "generation": self.generation,
            "sources": self.sources,
            "limits": {
                "max_rows": MAX_EVIDENCE_ROWS,
                "max_transcripts_per_row": MAX_TRANSCRIPTS_PER_ROW,
                "max_learnings": MAX_LEARNINGS,
                "verify_tail_chars": VERIFY_TAIL_CHARS,
                "max_file_bytes": MAX_FILE_BYTES,
                "max_bundle_bytes": MAX_BUNDLE_BYTES,
            },
            "counts": {
                "rows_read": len(self.rows),
                "rows_excluded": sum(1 for row in self.rows if row.get("error_kind") in EXCLUDED),
                "rows_selected": len(self.selected),
                "rows_staged": kept_rows,
                "patches": sum(1 for name in staged if name.startswith("patch-")),
                "transcripts": sum(1 for name in staged if name.startswith("transcript-")),
                "learnings": self.learnings,
                "gate_decisions": self.gate_decisions,
            },
            "files": entries,
            "total_bytes": sum(entry["bytes"] for entry in entries),
            "trimmed_rows": len(self.selected) - kept_rows,
            "prior_proposal_staged": keep_proposal,
            "prior_proposal_dropped": self.proposal is not None and not keep_proposal,
        }


def _fit(bundle: _Bundle, manifest_path: Path) -> tuple[dict[str, bytes], EvidenceManifest]:
    """The bundle's files (manifest included) and manifest within MAX_BUNDLE_BYTES: selected rows are dropped
    from the end, then the prior proposal; a bundle still over the limit is refused."""
    kept_rows = len(bundle.selected)
    keep_proposal = bundle.proposal is not None
    while True:
        staged = bundle.files(kept_rows, keep_proposal)
        manifest = bundle.manifest(staged, kept_rows, keep_proposal)
        with raised_as(EvidenceError, artifacts.ArtifactError):
            artifacts.validate(manifest, "evidence-manifest", source=manifest_path)
        manifest_bytes = artifacts.canonical_json(manifest).encode("utf-8")
        total = manifest["total_bytes"] + len(manifest_bytes)
        if total <= MAX_BUNDLE_BYTES:
            return {**{name: payload for name, (payload, _) in staged.items()}, MANIFEST_FILE: manifest_bytes}, manifest
        if kept_rows:
            kept_rows -= 1
        elif keep_proposal:
            keep_proposal = False
        else:
            raise EvidenceError(
                f"evidence bundle is {total} bytes with no rows and no prior proposal, over the total byte limit "
                f"of {MAX_BUNDLE_BYTES}; shorten the learning queue"
            )
