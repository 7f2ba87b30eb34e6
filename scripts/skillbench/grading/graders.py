"""Graders: how a cell's outcome is judged, chosen by the task's class.

A cell (`skillbench.execution.cells`) runs the arm's sessions and hands the workspace they left to its
grader, which the rule step picks with `grader_for`. `OracleGrader` grades a code change: the task's
visible `verify`, then the hidden oracle with the agent's grader-config changes masked; its output
tail goes to `oracle.log` for the task author only, never to a row, a transcript or evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbench.base import layout
from skillbench.base.artifacts import write_exclusive
from skillbench.base.records import ResultRow
from skillbench.base.redaction import redact_text
from skillbench.execution.cells import CellContext, CellWork, Grader
from skillbench.execution.failures import AgentWorkspaceError, InfraError
from skillbench.grading import masks, oracle
from skillbench.grading.verify import run_checked, run_hidden_oracle, verifier_environment

VERIFY_TAIL_CHARS = 4000


def write_oracle_log(context: CellContext, text: str) -> None:
    """The oracle's output tail for the task author, owner-only beside the record; never staged as evidence."""
    path = context.run_dir / layout.ORACLE_LOG
    path.unlink(missing_ok=True)
    write_exclusive(path, redact_text(text, context.secrets)[-VERIFY_TAIL_CHARS:].encode("utf-8", "replace"), 0o600)


class OracleGrader:
    """A code-change task: `verify` and the hidden oracle must pass on what the sessions left."""

    def __init__(self, oracle_snapshot: Path) -> None:
        self.oracle_snapshot = Path(oracle_snapshot)
        self.oracle_files: list[tuple[str, bytes]] = []
        self.grader_base: Path | None = None
        self.grader_config: dict[str, str] = {}

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
        row["resolved"] = bool(row["ok"] and verify.passed and oracle_passed)
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


def grader_for(task: dict[str, Any], *, oracle_snapshot: Path) -> Grader:
    """The grader of one cell of `task` (every task class today is a code change judged by its oracle)."""
    return OracleGrader(oracle_snapshot)
