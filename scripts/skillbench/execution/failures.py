"""How a cell step fails, and whose failure it is.

`InfraError` is the harness's (excluded evidence, retried), `RetryableCellFailure` asks Snakemake for
another attempt, `CellCancelled` is the run's interruption (no record: the next run redoes the cell),
`AgentWorkspaceError` is the agent's (a counted error kind, never excluded, never retried).
"""

from __future__ import annotations

from skillbench.base.errors import SkillbenchError
from skillbench.base.records import ErrorKind


class InfraError(SkillbenchError, RuntimeError):
    """A harness-side failure (clone, setup, sandbox, verifier crash): the cell is excluded evidence."""


class RetryableCellFailure(SkillbenchError, RuntimeError):
    """A systemic failure on a non-final attempt: fail the job so Snakemake retries it."""


class CellCancelled(SkillbenchError, RuntimeError):
    """The run was interrupted: the cell writes no record, so the next run does it again."""


class AgentWorkspaceError(SkillbenchError, RuntimeError):
    """What the agent left in its workspace makes the cell ungradable: a counted error kind, never excluded."""

    def __init__(self, kind: ErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
