"""Grader-config masks: files that configure the grader rather than being the agent's code.

conftest.py, pytest/tox/setup.cfg/pyproject files, sitecustomize, .pth files, entry points and compiled
bytecode (`GRADER_CONFIG_NAMES`, `GRADER_CONFIG_GLOBS`) do not take effect in the oracle run: a changed
one is bound over with its content from before the first session, an added one with an empty file,
and one that is no longer a regular file fails the oracle. Python start-up files a session left in its
home are found for the row's diagnostics (verify and the oracle never load them: fresh homes).
"""

from __future__ import annotations

import fnmatch
import shutil
import stat
from pathlib import Path

from skillbench.execution.failures import AgentWorkspaceError
from skillbench.execution.workspace import WorkspaceLimits, _scan, _walk, file_digest

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
