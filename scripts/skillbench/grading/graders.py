"""Graders: how a cell's outcome is judged, chosen by the task's class.

A cell (`skillbench.execution.cells`) runs the arm's sessions and hands the workspace they left to its
grader, which the rule step picks with `grader_for`. `OracleGrader` grades a code change: the task's
visible `verify`, then the hidden oracle with the agent's grader-config changes masked; its output
tail goes to `oracle.log` for the task author only, never to a row, a transcript or evidence.

`ReviewGrader` grades a review task. It applies the task's change to the prepared workspace, uncommitted,
as the last step before the sessions. Under bwrap the sessions see the workspace read-only, with one private
folder bound writable at `.skillbench-output/` for the review; after them the grader reads
`.skillbench-output/review-output.json` with the bounded no-follow reader and scores it on the host against
the labels from the task's hidden snapshot — the labels never enter a sandbox. Any change to the workspace
outside that folder (possible without a sandbox) is the agent's counted outcome `review-edited-code` (the
review is still scored, so the row says what it found); a review that breaks the contract is `review-invalid`
with its kind in the row; a valid review that gets the verdict, a blocker or a clean control wrong is
`review-incorrect`.

`TriggerGrader` grades a labelled prompt: the session (on a read-only workspace) must invoke exactly the skill
its hidden label names, or none; the skills it invoked are read from the parent-captured stream like every
skill proof. Invoking another skill is `trigger-false`, invoking none of the expected `trigger-missed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillbench.base import layout
from skillbench.base.artifacts import ArtifactError, read_regular_file, write_exclusive
from skillbench.base.records import ResultRow, TriggerMetrics
from skillbench.base.redaction import redact_text
from skillbench.execution.cells import CellContext, CellWork, Grader, graded_as_finished
from skillbench.execution.failures import AgentWorkspaceError, InfraError
from skillbench.execution.workspace import workspace_snapshot
from skillbench.experiment.suite import (
    REVIEW_CHANGE_TARGET,
    REVIEW_LABELS_TARGET,
    TRIGGER_LABEL_TARGET,
    is_review_task,
    is_trigger_task,
)
from skillbench.grading import masks, oracle, review
from skillbench.grading.verify import run_checked, run_hidden_oracle, verifier_environment

VERIFY_TAIL_CHARS = 4000


def write_oracle_log(context: CellContext, text: str) -> None:
    """The oracle's output tail for the task author, owner-only beside the record; never staged as evidence."""
    path = context.run_dir / layout.ORACLE_LOG
    path.unlink(missing_ok=True)
    write_exclusive(path, redact_text(text, context.secrets)[-VERIFY_TAIL_CHARS:].encode("utf-8", "replace"), 0o600)


class OracleGrader:
    """A code-change task: `verify` and the hidden oracle must pass on what the sessions left."""

    requires_change = True
    measures_from_workspace = False

    def __init__(self, oracle_snapshot: Path) -> None:
        self.oracle_snapshot = Path(oracle_snapshot)
        self.oracle_files: list[tuple[str, bytes]] = []
        self.grader_base: Path | None = None
        self.grader_config: dict[str, str] = {}

    def prepare_workspace(self, work: CellWork) -> None:
        """A code-change task's workspace is the task's commit with its setup: nothing to add."""

    def session_workspace(self, work: CellWork) -> tuple[bool, list[tuple[Path, str]]]:
        """The sessions change the code: the workspace is theirs to write."""
        return False, []

    def before_sessions(self, work: CellWork) -> None:
        """Load the oracle snapshot (checked against the binding) and keep every grader-config file as it is now."""
        self.oracle_files = oracle.load_snapshot(self.oracle_snapshot, work.cell.binding)
        self.grader_base = work.private_root / "grader-base"
        try:
            self.grader_config = masks.save_grader_config(work.clone, self.grader_base, work.limits)
        except AgentWorkspaceError as exc:
            raise InfraError(f"the task's workspace is not measurable before any session: {exc}") from exc

    def after_session(self, work: CellWork, role: str, home: Path) -> list[str]:
        planted = masks.python_startup_files(home)
        if not planted:
            return []
        return [
            f"the {role} session left Python start-up files in its home, which "
            f"verify and the oracle never load: {', '.join(planted)}"
        ]

    def grade(self, work: CellWork, row: ResultRow) -> None:
        """Run verify and the hidden oracle and decide `resolved` (the cell then checks that work was produced)."""
        context = work.context
        verify = run_checked(
            work.sandbox,
            work.cell.task["verify"],
            timeout=work.settings.agent.verify_timeout_s,
            env=verifier_environment(work.sandbox, "verify"),
        )
        context.timings["verify"] = verify.elapsed
        row["authored_tests_passed"] = verify.passed
        row["authored_test_output"] = row["verify_output"] = redact_text(verify.output, context.secrets)[
            -VERIFY_TAIL_CHARS:
        ]
        oracle_passed, oracle_elapsed = self._run_oracle(work, row)
        context.timings["oracle"] = oracle_elapsed
        row["oracle_passed"] = oracle_passed
        row["oracle_output"] = "hidden oracle passed" if oracle_passed else "hidden oracle failed"
        row["resolved"] = bool(graded_as_finished(row) and verify.passed and oracle_passed)
        if row["error_kind"] is None and not row["resolved"]:
            row["error_kind"] = "verify-failed" if not verify.passed else "oracle-failed"

    def _run_oracle(self, work: CellWork, row: ResultRow) -> tuple[bool, float]:
        """(passed, seconds) of the hidden oracle, with the agent's grader-config changes masked."""
        assert self.grader_base is not None, "before_sessions runs first"
        binds, changes, unmaskable = masks.grader_config_masks(
            work.clone, self.grader_base, self.grader_config, work.limits, work.sandbox.empty_file
        )
        if changes:
            row["evidence_diagnostics"].append(
                "grader-config files changed in the workspace did not take effect in the oracle run: "
                + ", ".join(changes[:12])
            )
        if unmaskable:
            row["evidence_diagnostics"].append(
                "hidden oracle not run: grader-config path(s) are no longer regular files: " + ", ".join(unmaskable[:8])
            )
            write_oracle_log(work.context, "hidden oracle not run: grader-config path(s) are no longer regular files")
            return False, 0.0
        task = work.cell.task
        oracle_run = run_hidden_oracle(
            work.sandbox,
            task,
            self.oracle_files,
            timeout=work.settings.agent.verify_timeout_s,
            private_root=work.private_root,
            masks=binds,
        )
        write_oracle_log(
            work.context,
            f"$ {task['oracle']['command']}\n[{oracle_run.state}, exit {oracle_run.exit_code}]\n{oracle_run.output}",
        )
        return oracle_run.passed, oracle_run.elapsed


# Where a review session writes its review, relative to the workspace root: the one folder of the workspace it
# may write (bound writable over the read-only workspace under bwrap).
REVIEW_OUTPUT_DIR = ".skillbench-output"
REVIEW_OUTPUT = f"{REVIEW_OUTPUT_DIR}/{layout.REVIEW_OUTPUT}"


class ReviewGrader:
    """A review task: the sessions review the change and write `REVIEW_OUTPUT`, scored against hidden labels."""

    requires_change = False
    measures_from_workspace = True

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = Path(snapshot)
        self.labels: review.ReviewLabels | None = None
        self.before: dict[str, str] = {}
        self.output_dir: Path | None = None

    def prepare_workspace(self, work: CellWork) -> None:
        """Load the labels (checked against the binding) and apply the change to review, uncommitted."""
        hidden = dict(oracle.load_snapshot(self.snapshot, work.cell.binding))
        try:
            self.labels = review.parse_labels(hidden[REVIEW_LABELS_TARGET], source=f"{self.snapshot.name} labels")
        except (KeyError, review.ReviewLabelsError) as exc:
            raise InfraError(f"the task's hidden review labels are unusable: {exc}") from exc
        applied = work.sandbox.apply_patch(hidden[REVIEW_CHANGE_TARGET])
        if not applied.ok:
            raise InfraError(
                f"the change to review does not apply ({applied.state}, exit {applied.returncode}): "
                f"{applied.stderr_tail[-500:]}"
            )
        mount_point = work.clone / REVIEW_OUTPUT_DIR
        if mount_point.exists() or mount_point.is_symlink():
            raise InfraError(f"the task's repository has {REVIEW_OUTPUT_DIR}, where a review session writes its review")
        mount_point.mkdir(mode=0o755)
        # Under bwrap the workspace is read-only to the sessions and this private folder is bound over the mount
        # point; without a sandbox the folder in the clone takes the review.
        self.output_dir = work.private_root / "review-output" if work.sandbox.backend == "bwrap" else mount_point
        self.output_dir.mkdir(mode=0o755, exist_ok=True)

    def session_workspace(self, work: CellWork) -> tuple[bool, list[tuple[Path, str]]]:
        """Read-only, but for the folder the review goes to."""
        assert self.output_dir is not None, "prepare_workspace runs first"
        if work.sandbox.backend != "bwrap":
            return False, []
        return True, [(self.output_dir, f"{work.sandbox.workspace}/{REVIEW_OUTPUT_DIR}")]

    def before_sessions(self, work: CellWork) -> None:
        """The workspace as the review starts: the one file a review may change is `REVIEW_OUTPUT`."""
        self.before = workspace_snapshot(work.clone, work.limits)

    def after_session(self, work: CellWork, role: str, home: Path) -> list[str]:
        return []

    def grade(self, work: CellWork, row: ResultRow) -> None:
        """Score the review the sessions left; decide `resolved` and the error kind of a review that fails."""
        assert self.labels is not None, "prepare_workspace runs first"
        after = workspace_snapshot(work.clone, work.limits)
        edited = sorted(
            path
            for path in set(self.before) | set(after)
            if self.before.get(path) != after.get(path) and path.partition("/")[0] != REVIEW_OUTPUT_DIR
        )
        assert self.output_dir is not None, "prepare_workspace runs first"
        written = self.output_dir / layout.REVIEW_OUTPUT
        output: review.ReviewOutput | None = None
        error: review.ReviewErrorKind | None = None
        detail = None
        try:
            output = review.read_review_output(written)
        except review.ReviewOutputError as exc:
            error, detail = exc.kind, redact_text(str(exc), work.context.secrets)
        _keep_review(work.context, written)
        metrics = review.review_metrics(output, error, self.labels)
        row["review"] = metrics
        passed = review.review_resolved(metrics)
        row["oracle_passed"] = passed
        row["oracle_output"] = "hidden oracle passed" if passed else "hidden oracle failed"
        row["resolved"] = bool(graded_as_finished(row) and passed and not edited)
        if row["error_kind"] is not None or row["resolved"]:
            return
        if edited:
            shown = ", ".join(edited[:8]) + (f", … ({len(edited) - 8} more)" if len(edited) > 8 else "")
            row["error_kind"] = "review-edited-code"
            row["error_detail"] = f"the review changed the workspace beyond {REVIEW_OUTPUT}: {shown}"
        elif error is not None:
            row["error_kind"] = "review-invalid"
            row["error_detail"] = f"{error}: {detail}"
        else:
            row["error_kind"] = "review-incorrect"
            row["error_detail"] = _incorrect_detail(metrics)


def _keep_review(context: CellContext, written: Path) -> None:
    """The review as the session wrote it (bounded, redacted) beside the cell's record, for whoever reads the cell."""
    try:
        payload = read_regular_file(written, review.MAX_REVIEW_BYTES, what="review output")
    except (ArtifactError, OSError):
        return
    text = redact_text(payload.decode("utf-8", "replace"), context.secrets)
    path = context.run_dir / layout.REVIEW_OUTPUT
    path.unlink(missing_ok=True)
    write_exclusive(path, text.encode("utf-8"), 0o644)


def _incorrect_detail(metrics: review.ReviewMetrics) -> str:
    """What a valid review got wrong, in the terms of its score (never the labels' content)."""
    if metrics["case"] == "clean":
        return f"the clean control's review has {metrics['findings']} finding(s) and verdict {metrics['verdict']}"
    if not metrics["verdict_correct"]:
        return f"the verdict {metrics['verdict']} is wrong for this change"
    return f"blocking defects flagged as blocking: {metrics['blocker_recall']:.0%}"


class TriggerGrader:
    """A labelled prompt: the session must invoke exactly the labelled skill (or none), and change nothing."""

    requires_change = False
    measures_from_workspace = False

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = Path(snapshot)
        self.label: dict[str, Any] | None = None

    def prepare_workspace(self, work: CellWork) -> None:
        """Load the label from the hidden snapshot (checked against the binding)."""
        hidden = dict(oracle.load_snapshot(self.snapshot, work.cell.binding))
        try:
            self.label = json.loads(hidden[TRIGGER_LABEL_TARGET])
        except (KeyError, ValueError) as exc:
            raise InfraError(f"the task's hidden trigger label is unusable: {exc}") from exc

    def session_workspace(self, work: CellWork) -> tuple[bool, list[tuple[Path, str]]]:
        """The prompt is about the repository; nothing in it is the session's to change."""
        return work.sandbox.backend == "bwrap", []

    def before_sessions(self, work: CellWork) -> None:
        """Nothing to keep: the label is loaded, the workspace is read-only."""

    def after_session(self, work: CellWork, role: str, home: Path) -> list[str]:
        return []

    def grade(self, work: CellWork, row: ResultRow) -> None:
        """Judge the invoked skills against the label."""
        assert self.label is not None, "prepare_workspace runs first"
        if work.skills_invoked is None:
            if row["error_kind"] is None:
                row["ok"], row["error_kind"] = False, "evidence-unverified"
                row["error_detail"] = "the event stream cannot tell which skills the session invoked"
            return
        metrics = trigger_metrics(self.label, work.skills_invoked)
        row["trigger"] = metrics
        row["oracle_passed"] = metrics["correct"]
        row["oracle_output"] = "hidden oracle passed" if metrics["correct"] else "hidden oracle failed"
        row["resolved"] = bool(graded_as_finished(row) and metrics["correct"])
        if row["error_kind"] is not None or row["resolved"]:
            return
        if metrics["false_triggers"]:
            row["error_kind"] = "trigger-false"
            row["error_detail"] = f"the session invoked {', '.join(metrics['false_triggers'])}"
        else:
            row["error_kind"] = "trigger-missed"
            row["error_detail"] = "the session invoked no skill the prompt calls for"


def trigger_metrics(label: dict[str, Any], invoked: list[str]) -> TriggerMetrics:
    """A trigger row's `trigger`: the label against the skills the session's stream proves it invoked."""
    expected = label["expect"]
    false_triggers = sorted(skill for skill in invoked if skill != expected)
    correct = not false_triggers and (expected is None or expected in invoked)
    return {
        "expected": expected,
        "near_miss": bool(label.get("near_miss", False)),
        "invoked": sorted(invoked),
        "false_triggers": false_triggers,
        "correct": correct,
    }


def grader_for(task: dict[str, Any], *, oracle_snapshot: Path) -> Grader:
    """The grader of one cell of `task`: its hidden labels for a review task, its label for a trigger task, else
    its oracle."""
    if is_review_task(task):
        return ReviewGrader(oracle_snapshot)
    if is_trigger_task(task):
        return TriggerGrader(oracle_snapshot)
    return OracleGrader(oracle_snapshot)
