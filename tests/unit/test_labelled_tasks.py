"""Review and trigger tasks before any session: the suite's fields, the task check's review problems, the metrics a
row carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from skillbench.experiment.suite import (
    REVIEW_CHANGE_TARGET,
    REVIEW_LABELS_TARGET,
    TaskError,
    hidden_files,
    load_suite,
    oracle_command,
)
from skillbench.grading import review
from skillbench.grading.taskcheck import review_task_problems

LABELS = {
    "schema": "review-labels/v1",
    "verdict": "request_changes",
    "defects": [
        {
            "id": "d1",
            "path": "lib.py",
            "line_start": 3,
            "line_end": 4,
            "severity": "high",
            "blocking": True,
            "category": "correctness",
        }
    ],
}
FINDING = {
    "id": "f1",
    "severity": "high",
    "path": "lib.py",
    "line_start": 4,
    "line_end": 4,
    "category": "correctness",
    "scenario": "a caller passes 0",
    "evidence": "the slice on line 4",
    "recommendation": "slice to count",
    "blocking": True,
}
REFERENCE = {"schema": "review-output/v1", "verdict": "request_changes", "findings": [FINDING]}


def review_task(task_id: str = "slice", **overrides) -> dict:
    task = {
        "id": task_id,
        "class": "review-defect",
        "snapshot": "project",
        "prompt": "Review the change.",
        "review": {"change": "changes/slice.diff", "labels": "labels/slice.json"},
        "solution": {"review": "reviews/slice.json"},
    }
    task.update(overrides)
    return task


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    for folder in ("project", "changes", "labels", "reviews"):
        (tmp_path / folder).mkdir()
    (tmp_path / "project" / "lib.py").write_text("a\nb\nc\nd\n")
    (tmp_path / "changes" / "slice.diff").write_text("diff --git a/lib.py b/lib.py\n")
    (tmp_path / "labels" / "slice.json").write_text(json.dumps(LABELS))
    (tmp_path / "reviews" / "slice.json").write_text(json.dumps(REFERENCE))
    return tmp_path


def load(suite_dir: Path, tasks: list[dict]) -> list[dict]:
    path = suite_dir / "tasks.yaml"
    path.write_text(yaml.safe_dump({"tasks": tasks}))
    return load_suite(path)


def refused(suite_dir: Path, task: dict, *fragments: str) -> None:
    with pytest.raises(TaskError) as caught:
        load(suite_dir, [task])
    for fragment in [str(suite_dir / "tasks.yaml"), f"task {task['id']!r}", *fragments]:
        assert fragment in str(caught.value)


def test_a_review_task_binds_its_labels_and_change_hidden(suite_dir: Path) -> None:
    (task,) = load(suite_dir, [review_task()])
    assert hidden_files(task) == [
        {"source": "labels/slice.json", "target": REVIEW_LABELS_TARGET},
        {"source": "changes/slice.diff", "target": REVIEW_CHANGE_TARGET},
    ]
    assert oracle_command(task) == "review-labels/v1"


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"verify": "true"}, ("field 'verify'", "a review task has no `verify`", "only code tasks have it")),
        ({"oracle": {"command": "true", "files": [{"source": "x", "target": "y"}]}}, ("field 'oracle'",)),
        ({"verify_on_base": "pass"}, ("field 'verify_on_base'",)),
        (
            {"solution": {"patch": "changes/slice.diff"}},
            ("field 'solution.patch'", "reference solution is `solution: {review: …}`"),
        ),
        ({"review": {"change": "changes/slice.diff"}}, ("field 'review'", "'labels' is a required property")),
        ({"review": {"change": "../slice.diff", "labels": "labels/slice.json"}}, ("field 'review.change'", "'..'")),
        ({"review": {"change": "changes/none.diff", "labels": "labels/slice.json"}}, ("field 'review.change'",)),
        ({"solution": {"review": "reviews/none.json"}}, ("field 'solution.review'", "does not exist")),
    ],
)
def test_bad_review_fields_name_the_task_and_the_field(suite_dir: Path, overrides: dict, fragments: tuple) -> None:
    refused(suite_dir, review_task(**overrides), *fragments)


def test_a_review_task_needs_its_review_and_a_code_task_may_not_have_one(suite_dir: Path) -> None:
    task = review_task()
    del task["review"]
    refused(suite_dir, task, "field 'review'", "a review task needs `review: {change: <patch>, labels: <file>}`")
    code = review_task(**{"class": "bug"})
    refused(suite_dir, code, "field 'review'", "only review tasks (class review-defect or review-clean) have it")


def test_a_symlinked_labels_file_is_refused(suite_dir: Path) -> None:
    (suite_dir / "labels" / "link.json").symlink_to(suite_dir / "labels" / "slice.json")
    task = review_task(review={"change": "changes/slice.diff", "labels": "labels/link.json"})
    refused(suite_dir, task, "field 'review.labels'", "symlink")


def workspace(tmp_path: Path, text: str = "a\nb\nc\nd\n") -> Path:
    clone = tmp_path / "clone"
    clone.mkdir(parents=True)
    (clone / "lib.py").write_text(text)
    return clone


def test_fit_labels_and_a_full_marks_reference_pass_the_check(tmp_path: Path) -> None:
    problems = review_task_problems(
        review_task(), json.dumps(LABELS).encode(), json.dumps(REFERENCE).encode(), workspace(tmp_path)
    )
    assert problems == []


def test_labels_on_lines_the_changed_file_lacks_are_refused(tmp_path: Path) -> None:
    problems = review_task_problems(
        review_task(), json.dumps(LABELS).encode(), json.dumps(REFERENCE).encode(), workspace(tmp_path, "a\nb\n")
    )
    assert problems == [
        "labelled defect d1: lib.py has 2 lines as changed, not 4 (label lines are of the file as changed)"
    ]
    missing = {**LABELS, "defects": [{**LABELS["defects"][0], "path": "gone.py"}]}
    reference = {**REFERENCE, "findings": [{**FINDING, "path": "gone.py"}]}
    problems = review_task_problems(
        review_task(), json.dumps(missing).encode(), json.dumps(reference).encode(), workspace(tmp_path / "b")
    )
    assert problems == ["labelled defect d1: gone.py is not a file of the changed code"]


def test_labels_that_do_not_fit_the_class_are_refused(tmp_path: Path) -> None:
    clean_labels = {"schema": "review-labels/v1", "verdict": "approve", "defects": []}
    clean_reference = {"schema": "review-output/v1", "verdict": "approve", "findings": []}
    problems = review_task_problems(
        review_task(), json.dumps(clean_labels).encode(), json.dumps(clean_reference).encode(), workspace(tmp_path)
    )
    assert problems == ["a review-defect task's labels need at least one defect (or make it review-clean)"]
    problems = review_task_problems(
        review_task(**{"class": "review-clean"}),
        json.dumps(LABELS).encode(),
        json.dumps(REFERENCE).encode(),
        workspace(tmp_path / "b"),
    )
    assert problems == ["a review-clean task's labels must have no defects (it is a clean control)"]


def test_a_reference_short_of_full_marks_or_broken_labels_are_refused(tmp_path: Path) -> None:
    clone = workspace(tmp_path)
    weak = {**REFERENCE, "findings": [{**FINDING, "severity": "low"}]}
    (problem,) = review_task_problems(review_task(), json.dumps(LABELS).encode(), json.dumps(weak).encode(), clone)
    assert "severities differ from the labels'" in problem
    (problem,) = review_task_problems(review_task(), b"{not json", json.dumps(REFERENCE).encode(), clone)
    assert problem.startswith("review.labels: review labels are not valid UTF-8 JSON")
    (problem,) = review_task_problems(review_task(), json.dumps(LABELS).encode(), b"[]", clone)
    assert problem.endswith("(review-schema)")


def test_a_broken_review_scores_zero_and_a_right_one_resolves() -> None:
    labels = review.check_labels(LABELS)
    broken = review.review_metrics(None, "review-not-json", labels)
    assert broken["output_error"] == "review-not-json" and broken["verdict"] is None
    assert all(broken[key] == 0.0 for key in review.RATIO_FIELDS)
    assert (broken["tp"], broken["fn"], broken["defects"], broken["blocking_defects"]) == (0, 1, 1, 1)
    assert not review.review_resolved(broken)
    right = review.review_metrics(review.check_review_output(REFERENCE), None, labels)
    assert right["weighted_f1"] == 1.0 and right["clean_control_passed"] is None and review.review_resolved(right)
    non_blocking = {**REFERENCE, "verdict": "comment", "findings": [{**FINDING, "blocking": False}]}
    missed = review.review_metrics(review.check_review_output(non_blocking), None, labels)
    assert missed["tp"] == 1 and missed["blocker_recall"] == 0.0 and not review.review_resolved(missed)


def test_a_clean_control_resolves_only_without_findings() -> None:
    labels = review.check_labels({"schema": "review-labels/v1", "verdict": "approve", "defects": []})
    empty = review.review_metrics(review.empty_review(), None, labels)
    assert empty["case"] == "clean" and empty["clean_control_passed"] is True and review.review_resolved(empty)
    noisy = {"schema": "review-output/v1", "verdict": "comment", "findings": [{**FINDING, "blocking": False}]}
    flagged = review.review_metrics(review.check_review_output(noisy), None, labels)
    assert flagged["fp"] == 1 and flagged["clean_control_passed"] is False and not review.review_resolved(flagged)
    broken = review.review_metrics(None, "review-missing", labels)
    assert broken["clean_control_passed"] is False and not review.review_resolved(broken)


def graded_row(tmp_path: Path, write: dict[str, str]) -> dict:
    """A review cell's row once `ReviewGrader.grade` judged a workspace its session left with `write` written
    (relative path → text) — the `none` backend's view, where nothing keeps the workspace read-only."""
    from types import SimpleNamespace

    from rowfactory import make_row
    from skillbench.execution.workspace import WorkspaceLimits, workspace_snapshot
    from skillbench.grading.graders import REVIEW_OUTPUT_DIR, ReviewGrader

    clone = workspace(tmp_path)
    (clone / REVIEW_OUTPUT_DIR).mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    grader = ReviewGrader(tmp_path / "snapshot")
    grader.labels = review.check_labels(LABELS)
    grader.output_dir = clone / REVIEW_OUTPUT_DIR
    limits = WorkspaceLimits.default()
    grader.before = workspace_snapshot(clone, limits)
    for relative, text in write.items():
        (clone / relative).write_text(text)
    work = SimpleNamespace(clone=clone, limits=limits, context=SimpleNamespace(secrets=[], run_dir=run_dir))
    row = make_row(task="slice", **{"class": "review-defect"})
    row.update(resolved=False, error_kind=None, ok=True)
    grader.grade(work, row)  # type: ignore[arg-type]
    return row


def test_a_review_that_changes_the_code_is_counted_and_still_scored(tmp_path: Path) -> None:
    row = graded_row(tmp_path, {".skillbench-output/review-output.json": json.dumps(REFERENCE), "lib.py": "fixed\n"})
    assert (row["resolved"], row["error_kind"]) == (False, "review-edited-code")
    assert (
        row["error_detail"] == "the review changed the workspace beyond .skillbench-output/review-output.json: lib.py"
    )
    assert row["review"]["tp"] == 1 and row["review"]["weighted_f1"] == 1.0


def test_a_review_graded_right_keeps_its_review_beside_the_record(tmp_path: Path) -> None:
    row = graded_row(tmp_path, {".skillbench-output/review-output.json": json.dumps(REFERENCE)})
    assert row["resolved"] and row["error_kind"] is None and row["oracle_passed"]
    assert json.loads((tmp_path / "run" / "review-output.json").read_text()) == REFERENCE


@pytest.mark.parametrize(
    ("written", "kind"),
    [({}, "review-missing"), ({".skillbench-output/review-output.json": "[1]"}, "review-schema")],
)
def test_a_missing_or_broken_review_is_review_invalid(tmp_path: Path, written: dict, kind: str) -> None:
    row = graded_row(tmp_path, written)
    assert (row["resolved"], row["error_kind"], row["review"]["output_error"]) == (False, "review-invalid", kind)
    assert row["error_detail"].startswith(f"{kind}: ")


def test_a_valid_review_that_misses_the_blocker_is_review_incorrect(tmp_path: Path) -> None:
    lenient = {**REFERENCE, "verdict": "comment", "findings": [{**FINDING, "blocking": False}]}
    row = graded_row(tmp_path, {".skillbench-output/review-output.json": json.dumps(lenient)})
    assert (row["resolved"], row["error_kind"]) == (False, "review-incorrect")
    assert row["error_detail"] == "the verdict comment is wrong for this change"


def trigger_task(task_id: str = "asks", **overrides) -> dict:
    task = {
        "id": task_id,
        "class": "trigger",
        "snapshot": "project",
        "prompt": "Review my change.",
        "trigger": {"expect": "code-review"},
    }
    task.update(overrides)
    return task


def test_a_trigger_task_binds_its_label_inline(suite_dir: Path) -> None:
    from skillbench.experiment.suite import TRIGGER_LABEL_TARGET, inline_hidden_files

    (task,) = load(suite_dir, [trigger_task(trigger={"expect": None, "near_miss": True})])
    assert hidden_files(task) == [] and oracle_command(task) == "trigger-label/v1"
    assert inline_hidden_files(task) == [(TRIGGER_LABEL_TARGET, b'{"expect": null, "near_miss": true}')]


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"verify": "true"}, ("field 'verify'", "a trigger task has no `verify`")),
        ({"solution": {"review": "reviews/slice.json"}}, ("field 'solution'", "only code and review tasks have it")),
        ({"review": {"change": "changes/slice.diff", "labels": "labels/slice.json"}}, ("field 'review'",)),
        ({"trigger": {"expect": "Not A Skill"}}, ("field 'trigger.expect'",)),
        ({"trigger": {}}, ("'expect' is a required property",)),
    ],
)
def test_bad_trigger_fields_name_the_task_and_the_field(suite_dir: Path, overrides: dict, fragments: tuple) -> None:
    refused(suite_dir, trigger_task(**overrides), *fragments)


def test_a_trigger_label_belongs_to_trigger_tasks_only(suite_dir: Path) -> None:
    task = trigger_task()
    del task["trigger"]
    refused(suite_dir, task, "field 'trigger'", "a trigger task needs `trigger: {expect: <skill or null>}`")
    refused(suite_dir, review_task(trigger={"expect": None}), "field 'trigger'", "only trigger tasks (class trigger)")


@pytest.mark.parametrize(
    ("label", "invoked", "correct", "false_triggers"),
    [
        ({"expect": "code-review"}, ["code-review"], True, []),
        ({"expect": "code-review"}, [], False, []),
        ({"expect": "code-review"}, ["code-review", "test-writer"], False, ["test-writer"]),
        ({"expect": None, "near_miss": True}, [], True, []),
        ({"expect": None, "near_miss": True}, ["code-review"], False, ["code-review"]),
    ],
)
def test_a_trigger_is_correct_only_with_exactly_the_labelled_skill(label, invoked, correct, false_triggers) -> None:
    from skillbench.grading.graders import trigger_metrics

    metrics = trigger_metrics(label, invoked)
    assert (metrics["correct"], metrics["false_triggers"]) == (correct, false_triggers)
    assert metrics["near_miss"] is bool(label.get("near_miss")) and metrics["expected"] == label["expect"]
