"""Review tasks through the real CLI: a review cell reviews a change and is scored against hidden labels.

One run of tests/workflow/suites/review (the sweep and generation 0, one run per cell): a defect case whose
labels carry a canary id, a clean control, a review that edits the code it reviews and one that writes a broken
review. The labels never reach a session (the defect case's session searches every JSON file of the sandbox and its
whole workspace for the canary), the proposer, or anything the run writes outside the task's hidden snapshot.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Project, copy_project

SUITE = Path(__file__).resolve().parent / "suites" / "review"
EXPERIMENT = "review"
CANARY = "CANARY-LBL-7f3e2a"
REVIEW_TOOLS = ["Read", "Grep", "Glob", "Write", "Skill"]
CONFIG = {
    "experiment": EXPERIMENT,
    "tasks": {
        "suite": "tasks/review/tasks.yaml",
        "only": ["longest-words", "mean-length", "edits-code", "broken-review"],
    },
    "runs": 1,
    "skills": {"root": "tasks/review/skills", "evolvable": ["code-review"]},
    "arms": {
        "review": {"sessions": [{"role": "review", "prompt": "review", "skill": "code-review", "tools": REVIEW_TOOLS}]}
    },
    "selected_arms": ["review"],
    "report": {"baseline_arm": "review"},
    "prompts": {
        "review": "Use the {skill} skill to review the uncommitted changes: {task}\n\n"
        "Write your review to .skillbench-output/review-output.json (review-output/v1); "
        "the rest of the repository is read-only."
    },
    "evolution": {"generations": 1},
    "gate": {"min_runs": 1},
}


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = copy_project(tmp_path_factory.mktemp("review") / "project", commit=False)
    shutil.copytree(SUITE, project.root / "tasks" / "review")
    project.git("init", "-q")
    for command in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture"]):
        project.git(*command)
    project.snakemake(config=CONFIG)
    return project


def by_task(rows: list[dict]) -> dict[str, dict]:
    return {row["task"]: row for row in rows}


def test_a_review_cell_is_scored_against_the_hidden_labels(reviewed: Project) -> None:
    rows = by_task(reviewed.rows(EXPERIMENT))
    defect, clean = rows["longest-words"], rows["mean-length"]
    assert defect["resolved"] and defect["error_kind"] is None, defect
    assert defect["review"]["case"] == "defect"
    assert (defect["review"]["tp"], defect["review"]["fp"], defect["review"]["fn"]) == (1, 0, 0)
    assert defect["review"]["blocker_recall"] == 1.0 and defect["review"]["verdict_correct"]
    assert defect["skill_invoked"] is True and defect["cost_usd"] > 0
    assert clean["resolved"] and clean["review"]["case"] == "clean"
    assert clean["review"]["clean_control_passed"] is True and clean["review"]["findings"] == 0
    check = json.loads(reviewed.results(EXPERIMENT, "tasks", "longest-words", "check.json").read_text())
    assert check["ok"] and [step["step"] for step in check["steps"]] == ["apply-change", "review-labels"]


def test_a_review_session_cannot_edit_the_code(reviewed: Project) -> None:
    row = by_task(reviewed.rows(EXPERIMENT))["edits-code"]
    cell = reviewed.results(EXPERIMENT, "gen0", "cells", "edits-code", "review", "run0")  # generation 0's anchor
    transcript = next(cell.glob("transcripts/*.jsonl")).read_text()
    # The CLI refused the unoffered Edit, and the Write over the code failed on the read-only workspace.
    assert row["tool_use_counts"].get("Edit") == 1 and row["tool_use_counts"].get("Write") == 2, row
    assert "read-only file system" in transcript.lower()
    assert (cell / "patch.diff").read_bytes() == b""
    # Its review (the one file it may write) is scored like any other: the attempt is in its transcript.
    assert row["resolved"] and row["review"]["tp"] == 1, row
    assert json.loads((cell / "review-output.json").read_text())["verdict"] == "request_changes"


def test_a_broken_review_is_the_agents_counted_outcome(reviewed: Project) -> None:
    row = by_task(reviewed.rows(EXPERIMENT))["broken-review"]
    assert row["ok"] and not row["resolved"] and row["error_kind"] == "review-invalid", row
    assert row["review"]["output_error"] == "review-not-json"
    assert row["review"]["weighted_f1"] == 0.0 and row["review"]["verdict_correct"] is False
    assert "review-not-json" in row["error_detail"]


def test_the_labels_reach_no_session_no_proposer_and_no_artifact(reviewed: Project) -> None:
    results = reviewed.results(EXPERIMENT)
    hidden = sorted(results.glob("tasks/*/oracle"))
    assert hidden, "the run keeps each task's hidden snapshot"
    assert any(CANARY in path.read_text() for path in results.glob("tasks/longest-words/oracle/*"))
    leaked = [
        path
        for path in results.rglob("*")
        if path.is_file()
        and not any(path.is_relative_to(folder) for folder in hidden)
        and CANARY.encode() in path.read_bytes()
    ]
    assert leaked == []
    # The session searched every file it can see for the canary and found none; the proposer searched its evidence.
    # A session retried after a slow start on a loaded machine leaves one transcript per attempt: one of them ran
    # the search to its end (the canary is in none of them: `leaked` above covers every transcript).
    for transcripts in (
        list(results.glob("gen0/cells/longest-words/review/run0/transcripts/*.jsonl")),
        list(results.glob("gen0/transcripts/proposer-*.jsonl")),
    ):
        assert transcripts and any("No matches found" in path.read_text() for path in transcripts), transcripts
