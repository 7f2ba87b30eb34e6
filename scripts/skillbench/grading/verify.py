"""Running `verify` and the hidden oracle in the cell sandbox.

Both get a fresh, empty home and tmp, no user site-packages, a bytecode cache outside the tree, a
read-only workspace and no network. The oracle is staged only now, at a random path, re-checked after
its run and removed. A run that times out or leaves processes behind failed (the agent's code did
that); only a cancelled run or one that never started is the harness's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.base.process import CANCEL
from skillbench.execution.failures import CellCancelled, InfraError
from skillbench.execution.sandbox import Sandbox
from skillbench.grading import oracle
from skillbench.grading.oracle import ORACLE_ENV_VAR


@dataclass(frozen=True)
class VerifierRun:
    """One run of `verify` or the oracle: its verdict, output tail, process state and exit code."""

    passed: bool
    output: str
    elapsed: float
    state: str
    exit_code: int | None
    # The whole stdout, when the caller asked for it (`capture_stdout_bytes`); else None.
    stdout: bytes | None = None


def run_checked(
    sandbox: Sandbox,
    command: str,
    *,
    timeout: float,
    env: dict[str, str],
    extra_read_only: Sequence[tuple[Path, str]] = (),
    capture_stdout_bytes: int | None = None,
) -> VerifierRun:
    """Run `verify` or the oracle with a read-only workspace and no network (`capture_stdout_bytes`: keep that much
    of its stdout whole, beside the tails).

    A run that times out or leaves processes behind failed (the agent's code did that); only a
    cancelled run or one that never started is the harness's.
    """
    started = time.monotonic()
    result = sandbox.run(
        ["/bin/sh", "-c", command],
        timeout=timeout,
        env=env,
        read_only_workspace=True,
        extra_read_only=extra_read_only,
        capture_stdout_bytes=capture_stdout_bytes,
    )
    elapsed = time.monotonic() - started
    if result.state == "cancelled" or CANCEL.is_set():
        raise CellCancelled("interrupted while a verifier ran; the next run does this cell again")
    if result.state not in ("ok", "failed", "timeout", "killed"):
        raise InfraError(f"verifier did not start or finish normally ({result.state}): {result.detail or ''}")
    output = f"{result.stdout_tail}\n{result.stderr_tail}".strip()
    if result.state in ("timeout", "killed"):
        output = f"{output}\n[skillbench: the run {result.state}: {result.detail or ''}]".strip()
    return VerifierRun(result.ok, output, elapsed, result.state, result.returncode, result.stdout_capture)


def verifier_environment(sandbox: Sandbox, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A fresh, empty home and tmp, no user site-packages, no bytecode from the tree: nothing a session left runs."""
    sandbox.fresh_scratch(name)
    return sandbox.environment(
        {"PYTHONNOUSERSITE": "1", "PYTHONPYCACHEPREFIX": f"{sandbox.tmp}/pycache", **(extra or {})}
    )


def run_hidden_oracle(
    sandbox: Sandbox,
    task: dict[str, Any],
    files: list[tuple[str, bytes]],
    *,
    timeout: float,
    private_root: Path,
    masks: Sequence[tuple[Path, str]] = (),
) -> VerifierRun:
    """Stage the oracle at a random path only now, run it, re-check it, remove it.

    `masks` binds (host file, workspace-relative path) over grader-config files the agent changed. The output
    is for the task author only (`oracle.log`, the task check): never a row, a transcript or evidence.
    """
    extra = (
        [(host, sandbox.to_sandbox(sandbox.clone / relative)) for host, relative in masks]
        if sandbox.backend == "bwrap"
        else []
    )
    if sandbox.backend == "bwrap":
        stage_root = oracle.stage(private_root, files)
        mountpoint = sandbox.clone / stage_root.name
        mountpoint.mkdir(mode=0o700)
        sandbox_root = sandbox.to_sandbox(mountpoint)
        extra.append((stage_root, sandbox_root))
    else:
        stage_root = oracle.stage(sandbox.clone, files)
        mountpoint = None
        sandbox_root = str(stage_root)
    try:
        env = verifier_environment(sandbox, "oracle", {ORACLE_ENV_VAR: sandbox_root})
        run = run_checked(sandbox, task["oracle"]["command"], timeout=timeout, env=env, extra_read_only=extra)
        oracle.check_staged(stage_root, files)
    finally:
        oracle.remove_staged(stage_root)
        if mountpoint is not None:
            mountpoint.rmdir()
    return run
