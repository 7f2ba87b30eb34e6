"""A complete, schema-valid result row for unit tests; keyword arguments override any column."""

from __future__ import annotations

from skillbench.base.artifacts import validate
from skillbench.base.records import EXCLUDED_ERROR_KINDS

NOT_OK_KINDS = EXCLUDED_ERROR_KINDS | {"skill-not-invoked", "plan-evidence-invalid"}
MODEL = "claude-test-model"


def make_row(task: str = "demo-task", arm: str = "workflow", run: int = 0, **fields) -> dict:
    """A complete, schema-valid result row; ``fields`` override any column. Rows are of batch ``gen0`` (a candidate
    and its anchor side by side) unless ``batch`` says otherwise; ``batch=None`` makes a row of before batches were
    recorded (no batch, block, position or start)."""
    resolved = fields.pop("resolved", True)
    batch = fields.pop("batch", "gen0")
    error_kind = fields.pop("error_kind", None if resolved else "oracle-failed")
    row = {
        "schema": "result-row/v1",
        "task": task,
        "class": "demo",
        "run": run,
        "arm": arm,
        "ok": error_kind not in NOT_OK_KINDS,
        "resolved": resolved,
        "authored_tests_passed": error_kind not in {"verify-failed"} | NOT_OK_KINDS,
        "authored_test_output": "",
        "verify_output": "",
        "oracle_passed": resolved,
        "oracle_output": "hidden oracle passed" if resolved else "hidden oracle failed",
        "error_kind": error_kind,
        "error_detail": None,
        "evidence_diagnostics": [],
        "input_tokens": 1000,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 100,
        "cost_usd": 1.0,
        "cli_cost_usd": None,
        "cost_check": None,
        "duration_s": 10.0,
        "num_turns": 5,
        "session_ids": [f"session-{task}-{arm}-{run}"],
        "transcript_artifacts": [],
        "transcript_missing": False,
        "skill_invoked": True,
        "tool_use_counts": {},
        "plan_produced": True,
        "diff_files": 1,
        "diff_insertions": 10,
        "diff_deletions": 2,
        "model": MODEL,
        "effort": "high",
        "provider": "scripted",
        "agent": "claude-code",
        "cli_version": "2.0.0",
        "offered_skills": None,
        "task_ref": "HEAD",
        "task_base_sha": "1" * 40,
        "sanitized_task_sha": "2" * 40,
        "variant_head_sha": "3" * 40,
        "task_prompt_digest": "4" * 64,
        "skill_digest": "5" * 64,
        "candidate_overlay_digest": "6" * 64 if arm.startswith("candidate_") else None,
        "oracle_digest": "7" * 64,
        "oracle_command_digest": "8" * 64,
        "oracle_manifest_digest": "9" * 64,
        "sandbox_backend": "bwrap",
        "recorded_at": "2026-01-01T00:00:00Z",
    }
    if batch is not None:
        cached = batch == "cache"
        row.update(batch=batch, block=None if cached else run, position=None if cached else 0)
        row["started_at"] = "2026-01-01T00:00:00Z"
    row.update(fields)
    return validate(row, "result-row")


def make_binding(candidates=("candidate_workflow",), selected_tasks=(), target_base_digests=None) -> dict:
    """The promotion binding fields gate.promotion_document needs, with test values."""
    return {
        "benchmark_model": MODEL,
        "effort": "high",
        "proposer_model": None,
        "candidate_origin": "manual-initial-overlay",
        "candidate_overlay_digest": "6" * 64,
        "required_candidate_arms": list(candidates),
        "selected_tasks": list(selected_tasks),
        "target_base_digests": dict(target_base_digests or {}),
    }


def make_overlay(generation: int = 0) -> dict:
    """gen<N>/overlay.json of a verify-once style candidate for the workflow arm, with test digests."""
    return {
        "schema": "overlay/v1",
        "generation": generation,
        "candidate_origin": "manual-initial-overlay",
        "source": "overlay",
        "proposer_model": None,
        "digest": "6" * 64,
        "files": [{"path": ".claude/skills/change-work/SKILL.md", "sha256": "a" * 64, "bytes": 10}],
        "touched_skills": ["change-work"],
        "required_candidate_arms": ["candidate_workflow"],
        "pairs": [["workflow", "candidate_workflow"]],
        "targets": [".claude/skills/change-work/SKILL.md"],
        "target_base_digests": {".claude/skills/change-work/SKILL.md": "b" * 64},
    }


def make_review(case: str = "defect", **fields) -> dict:
    """A row's ``review`` metrics (schemas/result-row.schema.json ``$defs/review``): a review that kept the contract,
    found every defect and gave the expected verdict; ``fields`` override any metric. A broken review
    (``output_error`` set) scores 0.0 on every ratio with no verdict unless ``fields`` say otherwise."""
    clean = case == "clean"
    broken = fields.get("output_error") is not None
    ratio = 0.0 if broken else 1.0
    review = {
        "case": case,
        "output_error": None,
        "verdict": None if broken else "approve" if clean else "request_changes",
        "expected_verdict": "approve" if clean else "request_changes",
        "findings": 0 if clean or broken else 2,
        "defects": 0 if clean else 2,
        "blocking_defects": 0 if clean else 1,
        "tp": 0 if clean or broken else 2,
        "fp": 0,
        "fn": 0 if clean else 2 if broken else 0,
        **dict.fromkeys(
            ("precision", "recall", "f1", "weighted_precision", "weighted_recall", "weighted_f1", "blocker_recall"),
            ratio,
        ),
        "verdict_correct": not broken,
        "clean_control_passed": (not broken) if clean else None,
    }
    review.update(fields)
    return review


def make_review_row(
    task: str = "review-task", arm: str = "review", run: int = 0, *, case: str = "defect", review=None, **fields
) -> dict:
    """A schema-valid row of a review cell: class ``review-<case>``, resolved when the review is (a valid review, the
    verdict right, every blocker found or the clean control passed), else the review error kind that says why."""
    metrics = make_review(case) if review is None else review
    broken = metrics["output_error"] is not None
    passed = metrics["clean_control_passed"] if metrics["case"] == "clean" else metrics["blocker_recall"] == 1.0
    resolved = not broken and metrics["verdict_correct"] and bool(passed)
    error_kind = None if resolved else "review-invalid" if broken else "review-incorrect"
    defaults = {
        "class": "review-clean" if metrics["case"] == "clean" else "review-defect",
        "resolved": resolved,
        "error_kind": error_kind,
        "oracle_passed": False,
        "oracle_output": "",
        "diff_files": 1,
        "diff_insertions": 20,
        "diff_deletions": 0,
        "review": metrics,
    }
    defaults.update(fields)
    return make_row(task, arm, run, **defaults)


def make_trigger_row(
    task: str = "trigger-prompt",
    arm: str = "trigger",
    run: int = 0,
    *,
    expect: str | None = None,
    near_miss: bool = False,
    invoked: tuple[str, ...] = (),
    **fields,
) -> dict:
    """A schema-valid row of a trigger cell (class ``trigger``): its prompt is labelled ``expect`` (None: no skill),
    the session invoked ``invoked``; resolved when exactly the labelled skill (or none) was, else
    ``trigger-false`` (another skill invoked) or ``trigger-missed``."""
    false_triggers = sorted(skill for skill in invoked if skill != expect)
    correct = not false_triggers and (expect is None or expect in invoked)
    defaults = {
        "class": "trigger",
        "resolved": correct,
        "error_kind": None if correct else "trigger-false" if false_triggers else "trigger-missed",
        "skill_invoked": None,
        "plan_produced": False,
        "diff_files": 0,
        "diff_insertions": 0,
        "diff_deletions": 0,
        "trigger": {
            "expected": expect,
            "near_miss": near_miss,
            "invoked": sorted(invoked),
            "false_triggers": false_triggers,
            "correct": correct,
        },
    }
    defaults.update(fields)
    return make_row(task, arm, run, **defaults)


def write_cell_record(folder, row: dict, started_at: str = "2026-01-01T11:00:00Z") -> str:
    """A cell's record.json (``row`` and a one-second timing from ``started_at``) in run folder ``folder``, which is
    made; returns its path."""
    import json
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True)
    timing = {
        "started_at": started_at,
        "finished_at": started_at,
        "wall_s": 1.0,
        "sessions_s": 0.5,
        "setup_s": 0.1,
        "verify_s": 0.1,
        "oracle_s": 0.1,
        "overhead_s": 0.2,
        "sessions": [],
    }
    record = {"schema": "cell-record/v1", "row": row, "attempt": 1, "timing": timing}
    (folder / "record.json").write_text(json.dumps(record))
    return str(folder / "record.json")
