"""A candidate's tests in the cell sandbox: which pass and fail, read from pytest's short summary.

The project's test command runs in the same sandbox a cell's `verify` runs in (`grading.verify`: fresh home and
tmp, read-only workspace, no network). The tests a commit added or changed are run the way a mined task's hidden
oracle runs them (`overlay_command`): the workspace is copied to the run's own tmp, the staged test files are laid
over the copy at their paths (so their conftest, fixtures and relative imports work as in the repository), and
pytest runs there. Per-test outcomes come from `-rA`'s short summary (`PASSED <node id>`, `FAILED <node id> - …`,
`ERROR <file> - …` for a collection error), node ids relative to the copy's root (`--rootdir=.`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbench.execution import quota
from skillbench.execution.sandbox import AgentInstall, Sandbox, SandboxLimits
from skillbench.experiment.settings import check_settings
from skillbench.grading import oracle
from skillbench.grading.oracle import ORACLE_ENV_VAR
from skillbench.grading.verify import run_checked, verifier_environment

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+\s*$")
_OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*?)(?: - (.*))?$")
# Arguments every mined pytest run gets: no cache in the read-only workspace, node ids relative to where it runs.
PYTEST_ARGS = ("-p", "no:cacheprovider", "--rootdir=.")
# What a probe adds: every outcome in the summary, and the other modules' tests when one cannot be collected.
PROBE_ARGS = ("-rA", "-q", "--continue-on-collection-errors")
# Failures that only say the test module could not import what the commit added.
IMPORT_FAILURE = re.compile(r"^(ImportError|ModuleNotFoundError)\b")
OVERLAY_WORK = "skillbench-oracle-work"


@dataclass
class TestRun:
    """One pytest run: per node id its outcome (passed, failed, error, xfail, xpass) and first message line, the
    files that failed to collect, and how the run ended."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    collection_errors: dict[str, str] = field(default_factory=dict)
    state: str = "ok"
    exit_code: int | None = 0
    output: str = ""
    elapsed: float = 0.0

    @property
    def passed(self) -> set[str]:
        return {node for node, outcome in self.outcomes.items() if outcome == "passed"}

    @property
    def timed_out(self) -> bool:
        return self.state in ("timeout", "killed")


def parse_summary(text: str) -> TestRun:
    """Outcomes from the last `short test summary info` section of pytest's output (`-rA`)."""
    run = TestRun(output=text[-4000:])
    lines = text.splitlines()
    start = max((index for index, line in enumerate(lines) if SUMMARY_HEADER.match(line)), default=None)
    if start is None:
        return run
    for line in lines[start + 1 :]:
        match = _OUTCOME_LINE.match(line)
        if not match:
            continue  # skips, xfail reasons, the closing line
        word, node, message = match.group(1), match.group(2).strip(), (match.group(3) or "").strip()
        if word == "ERROR" and "::" not in node:
            run.collection_errors[node] = message
            continue
        outcome = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfail", "XPASS": "xpass"}[word]
        # A test that errors in teardown after passing is reported twice; the failure wins.
        if run.outcomes.get(node) in ("failed", "error"):
            continue
        run.outcomes[node] = outcome
        if message:
            run.messages[node] = message
    return run


@contextmanager
def sandbox_over(
    config: dict[str, Any], prefix: str, fill: Callable[[Path], None], install: AgentInstall | None = None
) -> Iterator[Sandbox]:
    """A cell's sandbox (the config's backend, limits and disk quota) over a fresh clone that `fill` writes."""
    settings = check_settings(config)
    with quota.private_root(prefix, quota.disk_quota_mb(settings.sandbox)) as root:
        clone = root / "workspace"
        fill(clone)
        sandbox = Sandbox(
            settings.sandbox.backend,
            clone,
            root,
            bwrap=settings.sandbox.bwrap,
            agent_install=install,
            limits=SandboxLimits.of(settings.sandbox.limits),
        )
        try:
            yield sandbox
        finally:
            sandbox.close()


def pytest_command(test_command: str, arguments: Sequence[str]) -> str:
    """The project's test command with the miner's pytest options and `arguments` (files or node ids), quoted."""
    return " ".join([test_command, *PYTEST_ARGS, *(shlex.quote(argument) for argument in arguments)])


def overlay_command(test_command: str, arguments: Sequence[str]) -> str:
    """A hidden oracle's command: copy the workspace (without .git and the oracle's own mount) to the run's tmp, lay
    the staged files over it at their paths, run the tests there."""
    work = f'"${{TMPDIR:-/tmp}}/{OVERLAY_WORK}"'
    return (
        f"rm -rf {work} && mkdir -p {work} && "
        f"tar -C . --exclude=./.git --exclude='./.oracle-*' -cf - . | tar -C {work} -xf - && "
        f'cp -R "${ORACLE_ENV_VAR}"/. {work}/ && cd {work} && ' + pytest_command(test_command, arguments)
    )


def _run(
    sandbox: Sandbox, command: str, *, timeout: float, env: dict[str, str], extra_read_only: Sequence[tuple[Path, str]]
) -> TestRun:
    """One test run as a cell's verifier runs (`verify.run_checked`), with its whole stdout read for the summary."""
    result = run_checked(
        sandbox,
        command,
        timeout=timeout,
        env=env,
        extra_read_only=extra_read_only,
        capture_stdout_bytes=MAX_OUTPUT_BYTES,
    )
    stdout = (result.stdout or b"").decode("utf-8", "replace")
    run = parse_summary(stdout)
    run.state, run.exit_code = result.state, result.exit_code
    run.output = f"{stdout[-6000:]}\n{result.output[-2000:]}".strip()
    run.elapsed = result.elapsed
    return run


def run_suite(sandbox: Sandbox, test_command: str, *, timeout: float) -> TestRun:
    """The project's whole test suite on the workspace as it is."""
    command = pytest_command(test_command, PROBE_ARGS)
    return _run(sandbox, command, timeout=timeout, env=verifier_environment(sandbox, "probe-suite"), extra_read_only=[])


def run_overlaid(
    sandbox: Sandbox,
    test_command: str,
    files: list[tuple[str, bytes]],
    arguments: Sequence[str],
    *,
    timeout: float,
    private_root: Path,
) -> TestRun:
    """`arguments` (test files or node ids) with `files` laid over a copy of the workspace, as an oracle runs."""
    command = overlay_command(test_command, [*PROBE_ARGS, *arguments])
    if sandbox.backend == "bwrap":
        stage_root = oracle.stage(private_root, files)
        mountpoint = sandbox.clone / stage_root.name
        mountpoint.mkdir(mode=0o700)
        binds = [(stage_root, sandbox.to_sandbox(mountpoint))]
        root_in_sandbox = sandbox.to_sandbox(mountpoint)
    else:
        stage_root = oracle.stage(sandbox.clone, files)
        mountpoint, binds, root_in_sandbox = None, [], str(stage_root)
    try:
        env = verifier_environment(sandbox, "probe-oracle", {ORACLE_ENV_VAR: root_in_sandbox})
        return _run(sandbox, command, timeout=timeout, env=env, extra_read_only=binds)
    finally:
        oracle.remove_staged(stage_root)
        if mountpoint is not None:
            mountpoint.rmdir()


def import_only(node: str, base: TestRun) -> bool:
    """Whether a test's failure on the base only says its module could not be collected or import a name."""
    module = node.split("::", 1)[0]
    if module in base.collection_errors or node not in base.outcomes:
        return True
    return bool(IMPORT_FAILURE.match(base.messages.get(node, "")))
