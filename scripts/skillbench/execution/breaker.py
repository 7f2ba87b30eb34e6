"""The outage breaker: a streak of consecutive systemic failures shared by all concurrent cell jobs.

Cells fold their outcome into one small state file under an exclusive `fcntl` lock, in
completion order. Once the streak reaches the configured limit no new session starts:
later cells fail fast without calling the model. The workflow resets the file when a new
`snakemake` run starts, so a rerun after the outage resumes the cells that did not run.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbench.base.errors import SkillbenchError
from skillbench.base.records import SYSTEMIC_ERROR_KINDS


class OutageTripped(SkillbenchError, RuntimeError):
    """The breaker is open: this cell must not start a session."""


@contextmanager
def _locked_state(path: Path) -> Iterator[dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        raw = os.pread(descriptor, 65536, 0)
        try:
            state = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            state = {}
        state.setdefault("streak", 0)
        state.setdefault("last", [])
        yield state
        payload = json.dumps(state, sort_keys=True).encode()
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, payload, 0)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def reset(path: Path) -> None:
    with _locked_state(path) as state:
        state["streak"] = 0
        state["last"] = []


def check(path: Path, limit: int) -> None:
    """Raise OutageTripped when `limit` (> 0) consecutive systemic failures have been recorded."""
    if limit <= 0:
        return
    with _locked_state(path) as state:
        if state["streak"] >= limit:
            recent = "; ".join(state["last"][-limit:])
            raise OutageTripped(
                f"[systemic-outage] {state['streak']} consecutive session/infra/cleanup failures "
                f"(limit {limit}): no new session starts in this run. Recent: {recent}. "
                "Fix the cause, then rerun snakemake: the cells that did not run will resume."
            )


def record(path: Path, label: str, error_kind: str | None) -> int:
    """Fold one finished cell attempt into the streak; return the new streak."""
    with _locked_state(path) as state:
        if error_kind in SYSTEMIC_ERROR_KINDS:
            state["streak"] += 1
            state["last"] = [*state["last"][-9:], f"{label}: {error_kind}"]
        else:
            state["streak"] = 0
            state["last"] = []
        return state["streak"]
