"""One cell — (task, arm, run) — end to end: clone, setup, sessions, verify, hidden oracle, record.

A cell works in a fresh private folder: a copy of the task's sanitized template, a private
home and tmp, everything run through the cell's sandbox (its own host uid and resource
limits). The result row follows `schemas/result-row.schema.json`; the record adds timing.

What the agent controls never decides the verdict, and never makes the run look like the
harness failed:

* each session gets a fresh home and tmp; verify and the oracle each get a fresh, empty pair
  too, with `PYTHONNOUSERSITE=1`, a read-only workspace and no network;
* files that configure the grader rather than being the agent's code (`GRADER_CONFIG_NAMES`,
  `GRADER_CONFIG_GLOBS`: conftest.py, pytest/tox/setup.cfg/pyproject files, sitecustomize,
  .pth, entry points, compiled bytecode) do not take effect in the oracle run: a changed one is bound over with
  its content from before the first session, an added one with an empty file, and the row's
  `evidence_diagnostics` names them; one that is no longer a regular file fails the oracle;
* the harness's git after the sessions uses its own copy of the repository
  (`repo.make_harness_git_dir`), so a deleted or corrupted `.git` only adds a diagnostic;
* the workspace is measured host-side with bounded reads (`WorkspaceLimits`): too many or too
  large files end the cell as `workspace-oversized`, a workspace the harness's git cannot read
  as `workspace-tampered` — counted outcomes of the agent, neither excluded nor systemic;
* a verify or oracle run that times out or leaves processes behind is a failed check, not an
  infra error.

Session, infra and cleanup failures (the harness's own) are raised as `RetryableCellFailure`
until the last attempt, so Snakemake retries the job; the last attempt records the excluded
row instead.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

from . import arms as arm_config
from . import breaker, oracle, repo, sessions
from .aggregate import SYSTEMIC_ERROR_KINDS
from .artifacts import ArtifactError, remove_tree, utc_timestamp, write_exclusive
from .errors import SkillbenchError
from .oracle import ORACLE_ENV_VAR
from .process import CANCEL
from .records import CellRecord, CellTiming, ErrorKind, ResultRow, SessionWindow, TaskBinding
from .redaction import redact_text
from .sandbox import Sandbox, SandboxError, SandboxLimits
from .scripted_model import ScriptedModel, session_steps

VERIFY_TAIL_CHARS = 4000
MAX_DETAIL_CHARS = 2000
CHURN_EXCLUDES = (arm_config.PLAN_DIRECTORY, ".claude/skills")
MAX_FINGERPRINT_BYTES = 4 * 1024 * 1024
HASH_CHUNK_BYTES = 1024 * 1024
# Files that configure the grader (pytest, the Python start-up) rather than being the agent's code.
GRADER_CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
# Compiled bytecode is not reviewable code: a planted __pycache__ entry whose header matches an
# unchanged source would otherwise be imported instead of it (verify and the oracle also keep
# their bytecode cache elsewhere, PYTHONPYCACHEPREFIX).
GRADER_CONFIG_GLOBS = ("*.pth", "*.dist-info/entry_points.txt", "*.egg-info/entry_points.txt", "*.pyc")
MAX_GRADER_CONFIG_BYTES = 4 * 1024 * 1024
MAX_HOME_ENTRIES = 20_000
MAX_DEPTH = 200


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


@dataclass(frozen=True)
class WorkspaceLimits:
    """Host-side bounds on what the harness measures in a workspace (config `sandbox.limits`)."""

    max_file_bytes: int = 256 * 1024 * 1024
    max_total_bytes: int = 2 * 1024 * 1024 * 1024
    max_entries: int = 100_000

    @classmethod
    def from_config(cls, section: dict | None) -> WorkspaceLimits:
        section = section or {}
        defaults = cls()
        return cls(
            max_file_bytes=int(section.get("workspace_file_mb", defaults.max_file_bytes >> 20)) << 20,
            max_total_bytes=int(section.get("workspace_mb", defaults.max_total_bytes >> 20)) << 20,
            max_entries=int(section.get("workspace_entries", defaults.max_entries)),
        )


@dataclass
class CellContext:
    """Everything a cell needs that is not the task itself. Paths are absolute."""

    config: dict[str, Any]
    template: Path
    oracle_snapshot: Path
    run_dir: Path
    claude_bin: Path
    cli_version: str | None
    model_script: dict[str, Any] | None
    api_key: str | None
    skills_source: Path | None = None
    skills_root: str = ".claude/skills"
    overlay: Path | None = None
    overlay_digest: str | None = None
    log: TextIO | None = None
    timings: dict[str, float] = field(default_factory=dict)
    session_windows: list[SessionWindow] = field(default_factory=list)

    @property
    def secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []


def now_iso(timespec: str = "seconds") -> str:
    return utc_timestamp(timespec=timespec)


def _say(context: CellContext, message: str) -> None:
    if context.log is not None:
        print(redact_text(message, context.secrets), file=context.log, flush=True)


def skill_fingerprint(clone: Path, skills_root: str, skills: list[str]) -> str | None:
    """Framed digest of every file under the given skills (paths relative to the clone); None without skills."""
    if not skills:
        return None
    frames: list[bytes] = []
    total = 0
    for skill in sorted(skills):
        root = clone / skills_root / skill
        if root.is_symlink() or not root.is_dir():
            raise InfraError(f"skill folder {skills_root}/{skill} is missing or not a real directory")
        for path in sorted(root.rglob("*")):
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise InfraError(f"skill tree holds a non-regular file: {path.relative_to(clone)}")
            payload = path.read_bytes()
            total += len(payload)
            if total > MAX_FINGERPRINT_BYTES:
                raise InfraError(f"skill files exceed {MAX_FINGERPRINT_BYTES} bytes")
            frames += [path.relative_to(clone).as_posix().encode(), payload]
    return oracle.framed_digest(frames)


def _scan(root: Path, *, max_entries: int, skip_top_git: bool = False):
    """(relative path, host path, lstat) of everything under `root`, iteratively; no symlink is followed.

    Raises AgentWorkspaceError past `max_entries` entries or MAX_DEPTH levels; OSError when a
    folder cannot be listed.
    """
    count = 0
    stack: list[tuple[Path, str, int]] = [(root, "", 0)]
    while stack:
        directory, prefix, depth = stack.pop()
        with os.scandir(directory) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            if skip_top_git and not prefix and name == ".git":
                continue
            key = f"{prefix}{name}"
            count += 1
            if count > max_entries:
                raise AgentWorkspaceError("workspace-oversized", f"more than {max_entries} entries (at {key})")
            path = directory / name
            info = os.lstat(path)
            yield key, path, info
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 > MAX_DEPTH:
                    raise AgentWorkspaceError(
                        "workspace-oversized", f"folders nest deeper than {MAX_DEPTH} levels (at {key[:300]})"
                    )
                stack.append((path, f"{key}/", depth + 1))


def _walk(clone: Path, limits: WorkspaceLimits):
    """(relative path, host path, lstat) of everything in the clone except the top-level .git, bounded."""
    total = 0
    try:
        for key, path, info in _scan(clone, max_entries=limits.max_entries, skip_top_git=True):
            if stat.S_ISREG(info.st_mode):
                if info.st_size > limits.max_file_bytes:
                    raise AgentWorkspaceError(
                        "workspace-oversized",
                        f"{key} is {info.st_size} bytes; a workspace file may have at most {limits.max_file_bytes}",
                    )
                total += info.st_size
                if total > limits.max_total_bytes:
                    raise AgentWorkspaceError(
                        "workspace-oversized", f"the workspace exceeds {limits.max_total_bytes} bytes (at {key})"
                    )
            yield key, path, info
    except OSError as exc:
        raise AgentWorkspaceError("workspace-tampered", f"the workspace cannot be read: {exc}") from exc


def check_workspace(clone: Path, limits: WorkspaceLimits) -> None:
    """Raise AgentWorkspaceError when the workspace is too large to measure (metadata only, no reads)."""
    for _entry in _walk(clone, limits):
        pass


def file_digest(path: Path, limit: int) -> str:
    """SHA-256 of a regular file read in chunks, refusing non-regular files and files past `limit` bytes."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        read = 0
        while chunk := os.read(descriptor, HASH_CHUNK_BYTES):
            read += len(chunk)
            if read > limit:
                raise AgentWorkspaceError("workspace-oversized", f"{path.name} grew past {limit} bytes while hashed")
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(descriptor)


def workspace_snapshot(clone: Path, limits: WorkspaceLimits | None = None) -> dict[str, str]:
    """Path → kind/mode/size/digest for everything in the clone except .git (bounded, chunked hashing)."""
    limits = limits or WorkspaceLimits()
    entries: dict[str, str] = {}
    for key, path, info in _walk(clone, limits):
        if stat.S_ISDIR(info.st_mode):
            entries[key] = f"d:{stat.S_IMODE(info.st_mode):o}"
        elif stat.S_ISLNK(info.st_mode):
            entries[key] = f"l:{os.readlink(path)}"
        elif stat.S_ISREG(info.st_mode):
            try:
                digest = file_digest(path, limits.max_file_bytes)
            except OSError as exc:
                raise AgentWorkspaceError("workspace-tampered", f"{key} cannot be read: {exc}") from exc
            entries[key] = f"f:{stat.S_IMODE(info.st_mode):o}:{info.st_size}:{digest}"
        else:
            entries[key] = f"s:{info.st_mode}"
    return entries


def is_grader_config(relative: str) -> bool:
    """Whether a workspace path (relative, `/`-separated) configures the grader; fnmatch's `*` spans folders."""
    return relative.rsplit("/", 1)[-1] in GRADER_CONFIG_NAMES or any(
        fnmatch.fnmatch(relative, pattern) for pattern in GRADER_CONFIG_GLOBS
    )


def grader_config_files(clone: Path, limits: WorkspaceLimits) -> dict[str, tuple[str, Path]]:
    """Every grader-config path in the workspace: relative path → (fingerprint, host path)."""
    found: dict[str, tuple[str, Path]] = {}
    for key, path, info in _walk(clone, limits):
        if not is_grader_config(key):
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_GRADER_CONFIG_BYTES:
            try:
                found[key] = (f"f:{file_digest(path, MAX_GRADER_CONFIG_BYTES)}", path)
            except OSError:
                found[key] = ("unreadable", path)
        else:
            found[key] = (f"other:{stat.S_IFMT(info.st_mode):o}:{info.st_size}", path)
    return found


def save_grader_config(clone: Path, destination: Path, limits: WorkspaceLimits) -> dict[str, str]:
    """Keep a copy of every grader-config file as it is before the first session; return their fingerprints."""
    destination.mkdir(mode=0o700)
    fingerprints: dict[str, str] = {}
    for key, (fingerprint, path) in grader_config_files(clone, limits).items():
        fingerprints[key] = fingerprint
        if fingerprint.startswith("f:"):
            copy = destination / key
            copy.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(path, copy, follow_symlinks=False)
    return fingerprints


def grader_config_masks(
    clone: Path, saved: Path, before: dict[str, str], limits: WorkspaceLimits, empty: Path
) -> tuple[list[tuple[Path, str]], list[str], list[str]]:
    """How the oracle run undoes the agent's grader-config changes.

    Returns (binds of (host file, path relative to the workspace), changes for the row, paths that
    cannot be masked because they are no longer regular files).
    """
    after = grader_config_files(clone, limits)
    binds: list[tuple[Path, str]] = []
    changes: list[str] = []
    unmaskable: list[str] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key, (None, None))[0]
        if old == new:
            continue
        if new is None:
            changes.append(f"{key} (deleted)")
        elif not new.startswith("f:"):
            changes.append(f"{key} (no longer a regular file)")
            unmaskable.append(key)
        elif old is None:
            changes.append(f"{key} (added)")
            binds.append((empty, key))
        elif old.startswith("f:"):
            changes.append(f"{key} (modified)")
            binds.append((saved / key, key))
        else:
            changes.append(f"{key} (replaced)")
            binds.append((empty, key))
    return binds, changes, unmaskable


def python_startup_files(home: Path) -> list[str]:
    """Grader-config files (.pth, sitecustomize, …) a session left in its home, relative to it; bounded."""
    found: list[str] = []
    try:
        for key, _path, info in _scan(home, max_entries=MAX_HOME_ENTRIES):
            if stat.S_ISREG(info.st_mode) and is_grader_config(key):
                found.append(key)
    except (OSError, AgentWorkspaceError) as exc:
        found.append(f"(home not fully scanned: {str(exc)[:200]})")
    return found[:20]


def plan_document_change(before: dict[str, str], after: dict[str, str]) -> str:
    """The one plan document a plan session produced; ValueError naming any other change."""
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    removed = [path for path in changed if path not in after]
    plans = [
        path
        for path in changed
        if path in after
        and after[path].startswith("f:")
        and path.startswith(f"{arm_config.PLAN_DIRECTORY}/")
        and path.endswith(".md")
    ]
    new_dirs = [path for path in changed if path not in before and after[path].startswith("d:")]
    plan_parents = {str(Path(plan).parent) for plan in plans}
    allowed_dirs = [
        path for path in new_dirs if any(parent == path or parent.startswith(f"{path}/") for parent in plan_parents)
    ]
    unauthorized = [path for path in changed if path not in plans and path not in allowed_dirs]
    if removed:
        raise ValueError(f"plan session deleted workspace path(s): {', '.join(removed[:8])}")
    if len(plans) != 1:
        raise ValueError(
            f"plan session must produce exactly one plan document under "
            f"{arm_config.PLAN_DIRECTORY}/, found {len(plans)}"
        )
    if unauthorized:
        raise ValueError(f"plan session changed unauthorized workspace path(s): {', '.join(unauthorized[:8])}")
    return plans[0]


def _tail(text: str, limit: int) -> str:
    return text[-limit:]


def install_skills(clone: Path, source: Path | None, skills_root: str, git) -> None:
    """Commit the incumbent skill family into the clone, so every arm starts from the same skills."""
    if source is None:
        return
    target = clone / skills_root
    if target.is_symlink() or target.is_file():
        raise InfraError(f"the task's {skills_root} is not a directory")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=False)
    repo.commit_all(git, "benchmark incumbent skills")


@dataclass(frozen=True)
class VerifierRun:
    """One run of `verify` or the oracle: its verdict, output tail, process state and exit code."""

    passed: bool
    output: str
    elapsed: float
    state: str
    exit_code: int | None


def run_checked(
    sandbox: Sandbox, command: str, *, timeout: float, env: dict[str, str], extra_read_only=()
) -> VerifierRun:
    """Run `verify` or the oracle with a read-only workspace and no network.

    A run that times out or leaves processes behind failed (the agent's code did that); only a
    cancelled run or one that never started is the harness's.
    """
    started = time.monotonic()
    result = sandbox.run(
        ["/bin/sh", "-c", command],
        timeout=timeout,
        env=env,
        read_only_workspace=True,
        network=False,
        extra_read_only=extra_read_only,
    )
    elapsed = time.monotonic() - started
    if result.state == "cancelled" or CANCEL.is_set():
        raise CellCancelled("interrupted while a verifier ran; the next run does this cell again")
    if result.state not in ("ok", "failed", "timeout", "killed"):
        raise InfraError(f"verifier did not start or finish normally ({result.state}): {result.detail or ''}")
    output = f"{result.stdout_tail}\n{result.stderr_tail}".strip()
    if result.state in ("timeout", "killed"):
        output = f"{output}\n[skillbench: the run {result.state}: {result.detail or ''}]".strip()
    return VerifierRun(result.ok, output, elapsed, result.state, result.returncode)


def run_verifier(
    sandbox: Sandbox, command: str, *, timeout: float, env: dict[str, str], extra_read_only=()
) -> tuple[bool, str, float]:
    """`run_checked` as (passed, output, elapsed)."""
    run = run_checked(sandbox, command, timeout=timeout, env=env, extra_read_only=extra_read_only)
    return run.passed, run.output, run.elapsed


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


ORACLE_LOG = "oracle.log"


def write_oracle_log(context: CellContext, text: str) -> None:
    """The oracle's output tail for the task author, owner-only beside the record; never staged as evidence."""
    path = context.run_dir / ORACLE_LOG
    path.unlink(missing_ok=True)
    write_exclusive(
        path, _tail(redact_text(text, context.secrets), VERIFY_TAIL_CHARS).encode("utf-8", "replace"), 0o600
    )


@dataclass(frozen=True)
class Cell:
    """Which cell: a task (its validated definition and its binding), an arm and a run number."""

    task: dict[str, Any]
    binding: TaskBinding
    arm: str
    run: int

    @property
    def label(self) -> str:
        return f"[{self.task['id']}][{self.arm}][run {self.run}]"


def base_row(cell: Cell, context: CellContext) -> ResultRow:
    config, task, binding = context.config, cell.task, cell.binding
    row: dict[str, Any] = {
        "schema": "result-row/v1",
        "task": task["id"],
        "class": task["class"],
        "run": cell.run,
        "arm": cell.arm,
        "ok": False,
        "resolved": False,
        "authored_tests_passed": False,
        "authored_test_output": "",
        "verify_output": "",
        "oracle_passed": False,
        "oracle_output": "",
        "error_kind": None,
        "error_detail": None,
        "evidence_diagnostics": [],
        **dict.fromkeys(sessions.USAGE_FIELDS, 0),
        "cost_usd": None,
        "cost_check": None,
        "duration_s": 0.0,
        "num_turns": 0,
        "session_ids": [],
        "transcript_artifacts": [],
        "transcript_missing": False,
        "skill_invoked": None,
        "tool_use_counts": {},
        "mcp_tool_uses": {},
        "mcp_semantic_errors": {},
        "plugins": _row_plugins(config, cell.arm),
        "plan_produced": False,
        "diff_files": 0,
        "diff_insertions": 0,
        "diff_deletions": 0,
        "model": config["model"]["name"],
        "effort": config["model"]["effort"],
        "provider": config["model"]["provider"],
        "cli_version": context.cli_version,
        "task_ref": binding["ref"],
        "task_base_sha": binding["resolved_sha"],
        "sanitized_task_sha": binding["sanitized_sha"],
        "variant_head_sha": None,
        "task_prompt_digest": binding["prompt_digest"],
        "skill_digest": None,
        "candidate_overlay_digest": context.overlay_digest,
        "oracle_digest": binding["oracle_digest"],
        "oracle_command_digest": binding["oracle_command_digest"],
        "oracle_manifest_digest": binding["oracle_manifest_digest"],
        "sandbox_backend": config["sandbox"]["backend"],
        "recorded_at": now_iso(),
    }
    # The usage fields come from one constant, which a TypedDict literal cannot spread.
    return cast(ResultRow, row)


def _row_plugins(config: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    from . import plugins

    if not config["arms"].get(arm_config.incumbent_of(arm), {}).get("plugins"):
        return []
    return plugins.provenance(plugins.arm_plugins(config, arm_config.incumbent_of(arm)))


def session_surface(
    sandbox: Sandbox, config: dict[str, Any], arm: str, session: dict[str, Any]
) -> sessions.SessionSurface:
    """A session's tool surface, its arm's MCP servers and plugins, and the binds and environment they need.

    Each MCP server runs in a nested sandbox (`--mcp-config` written here, credential-free); plugins
    come as `--plugin-dir`, bound read-only.
    """
    from . import mcp

    definition = arm_config.arm_definition(config, arm)
    tools, disallowed = mcp.session_surface(config, definition, session)
    servers = mcp.arm_servers(config, definition)
    resolved = mcp.check_mcp_config(config) if servers else {}
    binds: list[tuple[Path, str]] = []
    for name in servers:
        binds += [(Path(host), target) for target, host in resolved[name]["mounts"].items()]

    def server_argv(name: str, server: dict[str, Any]) -> list[str]:
        return _mcp_server_argv(sandbox, resolved[name], server)

    plugin_dirs = _plugin_dirs(sandbox, config, arm, binds)
    # Servers connect before the first request (else their tools may be missing from it), and the CLI
    # passes a server no more than the allow-listed environment (the server's argv clears it anyway).
    extra_env = (
        {"MCP_CONNECTION_NONBLOCKING": "0", "MCP_TIMEOUT": "30000", "CLAUDE_CODE_MCP_ALLOWLIST_ENV": "1"}
        if servers
        else {}
    )
    for host, _target in binds:
        sandbox.share_read_only(host)
    return sessions.SessionSurface(
        tools=tools,
        disallowed_tools=disallowed,
        mcp_config=mcp.mcp_config_json(servers, server_argv),
        mcp_servers=list(servers),
        plugin_dirs=plugin_dirs,
        disable_slash_commands=bool(definition.get("disable_slash_commands")),
        binds=binds,
        extra_env=extra_env,
    )


def _mcp_server_argv(sandbox: Sandbox, resolved: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """The argv that starts one MCP server in its nested sandbox (host paths for the `none` backend)."""
    from . import mcp

    mounts = resolved["mounts"]
    if sandbox.backend == "none":
        args = [_host_path(arg, mounts) for arg in server.get("args") or []]
        env = {key: _host_path(value, mounts) for key, value in mcp.server_environment(server).items()}
        return sandbox.mcp_server_argv(
            command=_host_path(resolved["command"], mounts),
            args=args,
            env=env,
            mounts=[],
            network=True,
            workspace="read-write",
        )
    return sandbox.mcp_server_argv(
        command=resolved["command"],
        args=server.get("args") or [],
        env=mcp.server_environment(server),
        mounts=list(mounts),
        network=server["network"],
        workspace=server["workspace"],
    )


def _plugin_dirs(sandbox: Sandbox, config: dict[str, Any], arm: str, binds: list[tuple[Path, str]]) -> list[str]:
    """The arm's plugin folders as the CLI sees them; under bwrap each is bound read-only (added to `binds`)."""
    from . import plugins

    plugin_dirs: list[str] = []
    for index, plugin in enumerate(plugins.arm_plugins(config, arm_config.incumbent_of(arm))):
        if sandbox.backend == "bwrap":
            target = plugins.sandbox_path(plugin, index)
            binds.append((Path(plugin["path"]), target))
            plugin_dirs.append(target)
        else:
            plugin_dirs.append(plugin["path"])
    return plugin_dirs


def _host_path(value: str, mounts: dict[str, str]) -> str:
    """A mount-target path rewritten to its host path (the `none` backend has no mounts)."""
    for target, host in mounts.items():
        if value == target or value.startswith(f"{target}/"):
            return host + value[len(target) :]
    return value


def _scripted_model(context: CellContext, cell: Cell, role: str, workspace: str, label: str) -> ScriptedModel:
    script = context.model_script
    if script is None:
        raise InfraError("model.provider is scripted but no model script was given")
    return ScriptedModel(
        session_steps(script, cell.task["id"], role),
        defaults=script.get("defaults", {}),
        variables={"workspace": workspace},
        variation_key=label,
    )


def run_one_session(
    session: dict[str, Any], prompt: str, *, cell: Cell, sandbox: Sandbox, context: CellContext
) -> dict[str, Any]:
    """One session of the cell's arm: its record, its time in the cell's timings and session windows."""
    config = context.config
    surface = session_surface(sandbox, config, cell.arm, session)
    label = f"{cell.task['id']}/{cell.arm}/run{cell.run}/{session['role']}"
    started, window_start = time.monotonic(), now_iso("milliseconds")
    record = sessions.launch_session(
        sandbox,
        surface,
        label=label,
        prompt=prompt,
        model=config["model"]["name"],
        config=config,
        api_key=context.api_key,
        scripted_model=lambda: _scripted_model(context, cell, session["role"], sandbox.workspace, label),
        transcript_dir=context.run_dir / "transcripts",
        transcript_prefix=f"{session['role']}",
        log=context.log,
        expected_skill=session.get("skill"),
    )
    context.timings["sessions"] = context.timings.get("sessions", 0.0) + time.monotonic() - started
    from .mcp import server_log_tail

    for name, status in record.get("mcp_failed", {}).items():
        tail = server_log_tail(sandbox.home_host, name) or "(the CLI logged nothing for it)"
        _say(context, f"[{label}] MCP server {name} did not start (status {status}); its log tail:\n{tail}")
    context.session_windows.append(
        {"role": session["role"], "started_at": window_start, "finished_at": now_iso("milliseconds")}
    )
    return record


def execute_cell(cell: Cell, context: CellContext, private_root: Path) -> ResultRow:
    """The cell's work; raises InfraError/SandboxError/OSError/ValueError for harness failures."""
    config = context.config
    clone = private_root / "workspace"
    repo.clone_template(context.template, clone)
    sandbox = Sandbox(
        config["sandbox"]["backend"],
        clone,
        private_root,
        bwrap=config["sandbox"]["bwrap"],
        claude_bin=context.claude_bin,
        read_only_paths=[context.skills_root],
        limits=SandboxLimits.from_config(config["sandbox"].get("limits")),
    )
    try:
        work = CellWork(
            sandbox=sandbox,
            cell=cell,
            context=context,
            limits=WorkspaceLimits.from_config(config["sandbox"].get("limits")),
            skills=arm_config.local_skills(arm_config.arm_skills(config, cell.arm)),
            private_root=private_root,
        )
        return _execute(work)
    finally:
        sandbox.close()


@dataclass
class CellWork:
    """One cell at work: its sandbox and context, the harness's bounds, and the skills whose files it guards."""

    sandbox: Sandbox
    cell: Cell
    context: CellContext
    limits: WorkspaceLimits
    skills: list[str]
    private_root: Path
    # The evaluated skills' fingerprint once the workspace is prepared; no session may change it.
    skill_digest: str | None = None

    @property
    def clone(self) -> Path:
        return self.sandbox.clone

    @property
    def config(self) -> dict[str, Any]:
        return self.context.config

    def fingerprint(self) -> str | None:
        return skill_fingerprint(self.clone, self.context.skills_root, self.skills)


@dataclass(frozen=True)
class Baseline:
    """The prepared workspace as the harness measured it before any session, with its own git copy."""

    harness_git: repo.GitRunner
    measure: repo.ScriptRunner
    work: repo.WorkMeasure
    git_metadata: dict[str, str]
    grader_base: Path
    grader_config: dict[str, str]


@dataclass
class SessionsOutcome:
    """What the arm's sessions left: their records, diagnostics, the plan, and a workspace that stopped them."""

    records: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    plan_path: str | None = None
    plan_produced: bool = True
    workspace_error: AgentWorkspaceError | None = None


def _execute(work: CellWork) -> ResultRow:
    """The cell's steps: prepare the workspace, measure it, run the arm's sessions, grade what they left."""
    row = base_row(work.cell, work.context)
    oracle_files = oracle.load_snapshot(work.context.oracle_snapshot, work.cell.binding)
    prepare_workspace(work)
    row["skill_digest"] = work.skill_digest
    baseline = take_baseline(work)
    row["variant_head_sha"] = baseline.work.base
    outcome = run_sessions(work)
    _record_sessions(row, outcome, work.config)
    if not arm_config.arm_skills(work.config, work.cell.arm):
        row["skill_invoked"] = None
    _note_git_metadata(row, work.clone, baseline.git_metadata)
    try:
        if outcome.workspace_error is not None:
            raise outcome.workspace_error
        patch, truncated = _grade(work, row, baseline, oracle_files)
    except AgentWorkspaceError as exc:
        row.update(
            {
                "ok": False,
                "resolved": False,
                "error_kind": exc.kind,
                "error_detail": _tail(redact_text(str(exc), work.context.secrets), MAX_DETAIL_CHARS),
            }
        )
        return row
    _write_patch(work.context, patch)
    if truncated:
        row["evidence_diagnostics"].append(f"patch.diff truncated at {repo.MAX_PATCH_BYTES} bytes")
    row["ok"] = bool(row["ok"])
    return row


def prepare_workspace(work: CellWork) -> None:
    """Install the skills, run the task's setup, then shape the workspace to the arm; fix the skill fingerprint."""
    config, context, cell = work.config, work.context, work.cell
    git = work.sandbox.git()
    install_skills(work.clone, context.skills_source, context.skills_root, git)
    base_fingerprint = work.fingerprint()
    if cell.task.get("setup"):
        _run_setup(work)
        if work.fingerprint() != base_fingerprint:
            raise InfraError("task setup changed the evaluated skill fingerprint")
    if arm_config.arm_definition(config, cell.arm).get("no_mcp"):
        from .mcp import strip_guidance

        stripped = strip_guidance(work.clone, sorted(config.get("mcp_servers") or {}))
        if stripped:
            repo.commit_all(git, "benchmark: guidance without unavailable MCP tools")
            _say(context, f"no-MCP arm: rewrote {', '.join(stripped)} without lines about MCP tools")
    if arm_config.is_candidate(cell.arm):
        from .overlay import apply_overlay

        if context.overlay is None:
            raise InfraError(f"candidate arm {cell.arm} has no frozen overlay")
        apply_overlay(
            context.overlay,
            work.clone,
            git,
            expected_digest=context.overlay_digest,
            evolvable=config["skills"]["evolvable"],
        )
    work.skill_digest = work.fingerprint()


def _run_setup(work: CellWork) -> None:
    started = time.monotonic()
    result = work.sandbox.run(
        ["/bin/sh", "-lc", work.cell.task["setup"]], timeout=work.config["agent"]["setup_timeout_s"]
    )
    work.context.timings["setup"] = time.monotonic() - started
    if not result.ok:
        raise InfraError(
            f"task setup failed ({result.state}, exit {result.returncode}): "
            f"{_tail(result.stderr_tail or result.stdout_tail, 1500)}"
        )


def take_baseline(work: CellWork) -> Baseline:
    """Measure the prepared workspace; from here on the harness's git uses its own copy of the repository."""
    harness_dir = work.private_root / "harness-git"
    repo.make_harness_git_dir(work.clone, harness_dir)
    harness_git, measure = work.sandbox.harness_git(harness_dir), work.sandbox.harness_script(harness_dir)
    before_work = repo.measure_work(measure, "HEAD", CHURN_EXCLUDES)
    git_before = repo.git_metadata(work.clone)
    grader_base = work.private_root / "grader-base"
    try:
        grader_before = save_grader_config(work.clone, grader_base, work.limits)
    except AgentWorkspaceError as exc:
        raise InfraError(f"the task's workspace is not measurable before any session: {exc}") from exc
    return Baseline(harness_git, measure, before_work, git_before, grader_base, grader_before)


def run_sessions(work: CellWork) -> SessionsOutcome:
    """The arm's sessions in order, until one fails; a workspace the harness cannot measure stops them too."""
    outcome = SessionsOutcome()
    session: dict[str, Any] = {}
    try:
        for session in arm_config.arm_definition(work.config, work.cell.arm)["sessions"]:
            if not _run_session_step(work, session, outcome):
                break
    except AgentWorkspaceError as exc:
        outcome.workspace_error = exc
        if session.get("plan_document") and outcome.plan_path is None:
            outcome.plan_produced = False
    return outcome


def _run_session_step(work: CellWork, session: dict[str, Any], outcome: SessionsOutcome) -> bool:
    """Run one session and check what it left; False when the arm's sessions stop here."""
    cell, clone = work.cell, work.clone
    prompt = arm_config.render_prompt(
        work.config, session, task_prompt=cell.task["prompt"], plan_path=outcome.plan_path
    )
    planning = bool(session.get("plan_document"))
    before = workspace_snapshot(clone, work.limits) if planning else {}
    home, _tmp = work.sandbox.fresh_scratch(f"session-{session['role']}")
    record = run_one_session(session, prompt, cell=cell, sandbox=work.sandbox, context=work.context)
    outcome.records.append(record)
    if record["error_kind"] == "cancelled" or CANCEL.is_set():
        raise CellCancelled(
            f"{cell.task['id']}/{cell.arm}/run{cell.run}: interrupted during the {session['role']} "
            "session; no record is written, so the next run does this cell again"
        )
    _check_after_session(work, session, record, home, outcome)
    if not record["ok"]:
        if planning:
            outcome.plan_produced = False
        return False
    if planning:
        try:
            outcome.plan_path = plan_document_change(before, workspace_snapshot(clone, work.limits))
        except ValueError as exc:
            record.update(ok=False, error_kind="plan-evidence-invalid", error_detail=str(exc))
            outcome.plan_produced = False
            return False
    return True


def _check_after_session(
    work: CellWork, session: dict[str, Any], record: dict[str, Any], home: Path, outcome: SessionsOutcome
) -> None:
    """Note Python start-up files left in the session's home; fail a session that changed the evaluated skills."""
    planted = python_startup_files(home)
    if planted:
        outcome.diagnostics.append(
            f"the {session['role']} session left Python start-up files in its home, which "
            f"verify and the oracle never load: {', '.join(planted)}"
        )
    check_workspace(work.clone, work.limits)
    if work.fingerprint() != work.skill_digest:
        planning = bool(session.get("plan_document"))
        message = f"{'planning' if planning else 'implementation'} changed the evaluated skill fingerprint"
        if record["ok"]:
            record.update(
                ok=False,
                error_detail=message,
                error_kind="plan-evidence-invalid" if planning else "implementation-evidence-invalid",
            )
        else:
            outcome.diagnostics.append(message)


# The per-cell sums of the session records that the row carries as they are.
SUMMED_ROW_FIELDS = (
    *sessions.USAGE_FIELDS,
    "cost_usd",
    "duration_s",
    "num_turns",
    "ok",
    "session_ids",
    "error_kind",
    "skill_invoked",
    "transcript_missing",
    "transcript_artifacts",
    "tool_use_counts",
    "mcp_tool_uses",
    "mcp_semantic_errors",
    "error_detail",
)


def _record_sessions(row: ResultRow, outcome: SessionsOutcome, config: dict[str, Any]) -> None:
    if outcome.records:
        summed = sessions.sum_sessions(outcome.records)
        cast(dict[str, Any], row).update({key: summed[key] for key in SUMMED_ROW_FIELDS})
        row["evidence_diagnostics"] = [*summed["evidence_diagnostics"], *outcome.diagnostics]
        row["cost_check"] = sessions.cost_check(summed, config["agent"]["prices"])
    else:
        row["evidence_diagnostics"] = list(outcome.diagnostics)
    row["plan_produced"] = outcome.plan_produced


def _note_git_metadata(row: ResultRow, clone: Path, git_before: dict[str, str]) -> None:
    head_problem = repo.git_head_problem(clone)
    if head_problem:
        row["evidence_diagnostics"].append(f"{head_problem}; graded with the harness's own copy of the repository")
        return
    changed = repo.git_metadata_changes(git_before, repo.git_metadata(clone))
    if changed:
        row["evidence_diagnostics"].append(
            "the sessions changed the clone's git metadata, which the harness's git never reads: "
            + ", ".join(changed[:12])
        )


def _grade(
    work: CellWork, row: ResultRow, baseline: Baseline, oracle_files: list[tuple[str, bytes]]
) -> tuple[bytes, bool]:
    """Run verify and the hidden oracle, decide `resolved`, measure the change; return (patch, truncated)."""
    context = work.context
    passed, output, elapsed = run_verifier(
        work.sandbox,
        work.cell.task["verify"],
        timeout=work.config["agent"]["verify_timeout_s"],
        env=verifier_environment(work.sandbox, "verify"),
    )
    context.timings["verify"] = elapsed
    row["authored_tests_passed"] = passed
    row["authored_test_output"] = row["verify_output"] = _tail(redact_text(output, context.secrets), VERIFY_TAIL_CHARS)
    oracle_passed, oracle_elapsed = _run_oracle(work, row, baseline, oracle_files)
    context.timings["oracle"] = oracle_elapsed
    row["oracle_passed"] = oracle_passed
    row["oracle_output"] = "hidden oracle passed" if oracle_passed else "hidden oracle failed"
    row["resolved"] = bool(row["ok"] and passed and oracle_passed)
    if row["error_kind"] is None and not row["resolved"]:
        row["error_kind"] = "verify-failed" if not passed else "oracle-failed"
    return _measure_change(row, baseline)


def _run_oracle(
    work: CellWork, row: ResultRow, baseline: Baseline, oracle_files: list[tuple[str, bytes]]
) -> tuple[bool, float]:
    """(passed, seconds) of the hidden oracle, with the agent's grader-config changes masked."""
    masks, changes, unmaskable = grader_config_masks(
        work.clone, baseline.grader_base, baseline.grader_config, work.limits, work.sandbox.empty_file
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
        oracle_files,
        timeout=work.config["agent"]["verify_timeout_s"],
        private_root=work.private_root,
        masks=masks,
    )
    write_oracle_log(
        work.context,
        f"$ {task['oracle']['command']}\n[{oracle_run.state}, exit {oracle_run.exit_code}]\n{oracle_run.output}",
    )
    return oracle_run.passed, oracle_run.elapsed


def _measure_change(row: ResultRow, baseline: Baseline) -> tuple[bytes, bool]:
    """The agent's change outside plans and skills into the row; a "resolved" cell without one produced no work."""
    orig_sha = baseline.work.base
    work = _harness_git_step(
        baseline.harness_git, orig_sha, lambda _git: repo.measure_work(baseline.measure, orig_sha, CHURN_EXCLUDES)
    )
    row.update({"diff_files": work.files, "diff_insertions": work.insertions, "diff_deletions": work.deletions})
    if row["resolved"] and work.digest == baseline.work.digest:
        row.update(
            {
                "resolved": False,
                "error_kind": "no-work-produced",
                "error_detail": "the arm reported success without any change outside plans and skills",
            }
        )
    return work.patch, work.truncated


def _write_patch(context: CellContext, patch: bytes) -> None:
    if context.secrets:
        # surrogateescape keeps binary hunks byte-exact while secrets in text are replaced.
        patch = redact_text(patch.decode("utf-8", "surrogateescape"), context.secrets).encode(
            "utf-8", "surrogateescape"
        )
    (context.run_dir / "patch.diff").write_bytes(patch)


def _harness_git_step(git, orig_sha: str, step):
    """Run one post-session git step; a failure while the harness's own repository is intact is the workspace's."""
    try:
        return step(git)
    except repo.GitError as exc:
        if git(["cat-file", "-e", f"{orig_sha}^{{tree}}"]).ok:
            raise AgentWorkspaceError(
                "workspace-tampered", f"the harness's git cannot read the workspace: {exc}"
            ) from exc
        raise


HARNESS_FAILURES = (InfraError, SandboxError, OSError, ValueError, ArtifactError, repo.GitError, oracle.OracleError)


def run_one_cell(cell: Cell, context: CellContext, *, attempt: int, attempts: int, breaker_state: Path) -> CellRecord:
    """Run one cell and return its record; raise RetryableCellFailure on non-final systemic failures."""
    config = context.config
    label = cell.label
    breaker.check(breaker_state, config["agent"]["outage_streak"])
    _fresh_run_folder(context.run_dir)
    started_at, started = now_iso(), time.monotonic()
    _say(context, f"{label} attempt {attempt}/{attempts} starting")
    row = _row_of_attempt(cell, context)
    if isinstance(row["error_detail"], str):
        row["error_detail"] = redact_text(row["error_detail"], context.secrets)
    wall = time.monotonic() - started
    streak = breaker.record(breaker_state, label, row["error_kind"])
    _log_outcome(context, label, row, wall)
    if row["error_kind"] in SYSTEMIC_ERROR_KINDS and attempt < attempts:
        raise RetryableCellFailure(
            f"{label} {row['error_kind']} on attempt {attempt}/{attempts} "
            f"(outage streak {streak}): {row['error_detail']}"
        )
    return {
        "schema": "cell-record/v1",
        "row": row,
        "attempt": attempt,
        "timing": _timing(context, started_at, wall),
    }


def _fresh_run_folder(run_dir: Path) -> None:
    """Empty transcripts, an empty patch and no oracle log: nothing of an earlier attempt stays."""
    transcripts = run_dir / "transcripts"
    if transcripts.exists():
        shutil.rmtree(transcripts)
    run_dir.mkdir(parents=True, exist_ok=True)
    transcripts.mkdir(mode=0o700)
    (run_dir / "patch.diff").write_bytes(b"")
    (run_dir / ORACLE_LOG).unlink(missing_ok=True)


def _row_of_attempt(cell: Cell, context: CellContext) -> ResultRow:
    """The cell's row: its own verdict, an `infra-error` row for a harness failure, `cleanup-failure` after it."""
    label = cell.label
    private_root = Path(tempfile.mkdtemp(prefix="skillbench-cell-"))
    try:
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted before it started")
        row = execute_cell(cell, context, private_root)
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted; no record is written, so the next run does this cell again")
    except HARNESS_FAILURES as exc:
        if CANCEL.is_set():
            raise CellCancelled(
                f"{label} interrupted ({type(exc).__name__}); the next run does this cell again"
            ) from exc
        row = base_row(cell, context)
        row.update(
            {
                "error_kind": "infra-error",
                "error_detail": _tail(redact_text(f"{type(exc).__name__}: {exc}", context.secrets), MAX_DETAIL_CHARS),
            }
        )
    finally:
        cleanup_error = None
        try:
            remove_tree(private_root)
        except OSError as exc:
            cleanup_error = exc
    if cleanup_error is not None:
        primary = f"primary={row['error_kind']}: {row['error_detail']}"
        row.update(
            {
                "ok": False,
                "resolved": False,
                "error_kind": "cleanup-failure",
                "error_detail": _tail(
                    f"{primary}; cleanup: {type(cleanup_error).__name__}: {cleanup_error}", MAX_DETAIL_CHARS
                ),
            }
        )
    return row


def _log_outcome(context: CellContext, label: str, row: ResultRow, wall: float) -> None:
    cost = "n/a" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
    tokens = row["input_tokens"] + row["output_tokens"]
    _say(
        context,
        f"{label} resolved={row['resolved']} tokens={tokens} cost={cost} took={wall:.1f}s "
        f"error_kind={row['error_kind']}",
    )
    if row["error_detail"]:
        detail = json.dumps(row["error_detail"]) if isinstance(row["error_detail"], dict) else row["error_detail"]
        _say(context, f"{label} detail: {detail[:1200].replace(chr(10), ' ⏎ ')}")


def _timing(context: CellContext, started_at: str, wall: float) -> CellTiming:
    in_sessions = context.timings.get("sessions", 0.0)
    verify, oracle_s = context.timings.get("verify", 0.0), context.timings.get("oracle", 0.0)
    return {
        "started_at": started_at,
        "finished_at": now_iso(),
        "wall_s": round(wall, 3),
        "sessions_s": round(in_sessions, 3),
        "setup_s": round(context.timings.get("setup", 0.0), 3),
        "verify_s": round(verify, 3),
        "oracle_s": round(oracle_s, 3),
        "overhead_s": round(wall - in_sessions - verify - oracle_s, 3),
        "sessions": context.session_windows,
    }
