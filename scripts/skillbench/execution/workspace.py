"""Bounded host-side measurement of a cell's workspace.

The workspace is the agent's: the harness walks it iteratively without following symlinks, with caps
on entries, depth, file size and total bytes (`WorkspaceLimits`, config `sandbox.limits`), hashes in
chunks, and turns what it cannot measure into the agent's counted error kinds (`workspace-oversized`,
`workspace-tampered`). Also the skill fingerprint (no session may change the evaluated skills) and the
plan session's one-document rule.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from skillbench.base.artifacts import framed_digest
from skillbench.execution.failures import AgentWorkspaceError, InfraError
from skillbench.experiment import arms as arm_config
from skillbench.experiment.settings import LimitSettings, default_limits

HASH_CHUNK_BYTES = 1024 * 1024


MAX_FINGERPRINT_BYTES = 4 * 1024 * 1024


MAX_DEPTH = 200


@dataclass(frozen=True)
class WorkspaceLimits:
    """Host-side bounds on what the harness measures in a workspace (config `sandbox.limits`)."""

    max_file_bytes: int
    max_total_bytes: int
    max_entries: int

    @classmethod
    def of(cls, limits: LimitSettings) -> WorkspaceLimits:
        """The workspace bounds of `sandbox.limits` (the typed section)."""
        return cls(
            max_file_bytes=limits.workspace_file_mb << 20,
            max_total_bytes=limits.workspace_mb << 20,
            max_entries=limits.workspace_entries,
        )

    @classmethod
    def default(cls) -> WorkspaceLimits:
        """The schema's default bounds, for a measurement set up without a config."""
        return cls.of(default_limits())


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
    return framed_digest(frames)


def _scan(root: Path, *, max_entries: int, skip_top_git: bool = False) -> Iterator[tuple[str, Path, os.stat_result]]:
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


def _walk(clone: Path, limits: WorkspaceLimits) -> Iterator[tuple[str, Path, os.stat_result]]:
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
    limits = limits or WorkspaceLimits.default()
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
