"""What every session job (a cell, a task check, a proposer session) shares at its edge: its run control from
its resources, and its start (a private mount namespace for its disk quota, signal handling, the parent watch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillbench.base.process import install_signal_handlers, watch_parent
from skillbench.execution import quota
from skillbench.experiment.settings import RunControl, SandboxSettings, run_control

# Agent settings that steer how a session job runs (retries, the outage streak, the heartbeat), not what it
# measures: they reach a job as resources, so changing them reruns nothing (docs/internals.md).
RUN_CONTROL_KEYS = ("attempts", "outage_streak", "heartbeat_s")
# The spend caps a session job's gateway enforces (budget.max_usd, budget.max_session_usd): run control too, as
# resources named here; a resource cannot be null, so "none" stands for no cap.
BUDGET_RESOURCES = {"max_usd": "budget_usd", "max_session_usd": "session_budget_usd"}


def budget_resource(value: float | None) -> str:
    """A spend cap as a resource value."""
    return "none" if value is None else repr(float(value))


def job_run_control(resources: Mapping[str, Any]) -> RunControl:
    """A session job's run control, typed, from its resources: the agent's, and the budget's caps."""
    budget = {key: resources[name] for key, name in BUDGET_RESOURCES.items()}
    return run_control({key: resources[key] for key in RUN_CONTROL_KEYS}, budget)


def start_session_job(sandbox: SandboxSettings) -> None:
    """The start of a job that runs untrusted work (a cell, a task check, a proposer session).

    Its own mount namespace comes first, while the job is still one thread: every private root it makes is
    then a disk quota of its own (`sandbox.limits.disk_mb`). Then SIGINT is ignored and SIGTERM cancels
    (`install_signal_handlers`), and the job stops its sessions once the snakemake that started it is gone
    (`watch_parent`)."""
    if quota.disk_quota_mb(sandbox):
        quota.enter_private_mounts()
    install_signal_handlers()
    watch_parent()
