"""Hidden oracles: capture into a digest-bound read-only snapshot, re-check, stage for one cell.

The oracle is captured once per task (bounded sizes, regular non-symlink files only) before
any session runs. A cell stages it only after its sessions and `verify` have finished, in a
private folder with 0400 files, re-checks the bytes after use, and never persists the
oracle command's output.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
from pathlib import Path
from typing import Any

from skillbench.base.artifacts import framed_digest, path_kind, read_regular_file, remove_tree, write_exclusive
from skillbench.base.records import TaskBinding
from skillbench.execution.failures import InfraError

MAX_ORACLE_FILE_BYTES = 512 * 1024
MAX_ORACLE_TOTAL_BYTES = 2 * 1024 * 1024
ORACLE_ENV_VAR = "SKILLBENCH_ORACLE_ROOT"
STAGE_PREFIX = ".oracle-"


class OracleError(InfraError):
    """The oracle snapshot is unreadable, oversized, or no longer matches its digests."""


def read_bounded_regular(path: Path, limit: int) -> bytes:
    """A file's bytes (regular, not a symlink, at most `limit` bytes, unchanged while read), refused as OracleError."""
    return read_regular_file(path, limit, error=OracleError)


def oracle_binding(command: str, files: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Digests that bind the command, the manifest and the content of an oracle (files sorted by target)."""
    ordered = sorted(files)
    manifest: list[bytes] = []
    content: list[bytes] = [command.encode("utf-8")]
    entries = []
    for target, payload in ordered:
        sha = hashlib.sha256(payload).hexdigest()
        manifest += [target.encode("utf-8"), sha.encode(), str(len(payload)).encode()]
        content += [target.encode("utf-8"), payload]
        entries.append({"target": target, "sha256": sha, "size": len(payload)})
    return {
        "oracle_digest": framed_digest(content),
        "oracle_command_digest": hashlib.sha256(command.encode("utf-8")).hexdigest(),
        "oracle_manifest_digest": framed_digest(manifest),
        "oracle_files": entries,
    }


def capture_oracle(suite_dir: Path, entries: list[dict[str, str]]) -> list[tuple[str, bytes]]:
    """Read every hidden file ({source, target}: `suite.hidden_files`) bounded, with no symlink on the path."""
    files = []
    total = 0
    for entry in entries:
        path = suite_dir / entry["source"]
        current = suite_dir
        for part in Path(entry["source"]).parts[:-1]:
            current = current / part
            if path_kind(current) != "folder":
                raise OracleError(f"oracle source parent {current} must be a real directory")
        payload = read_bounded_regular(path, MAX_ORACLE_FILE_BYTES)
        total += len(payload)
        if total > MAX_ORACLE_TOTAL_BYTES:
            raise OracleError(f"oracle files exceed {MAX_ORACLE_TOTAL_BYTES} bytes in total")
        files.append((entry["target"], payload))
    return files


def write_snapshot(destination: Path, files: list[tuple[str, bytes]]) -> None:
    """Write the snapshot folder: read-only files (0400) under owner-only folders."""
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True, mode=0o700)
    for target, payload in files:
        path = destination / target
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_exclusive(path, payload, 0o400)


def load_snapshot(snapshot: Path, binding: TaskBinding) -> list[tuple[str, bytes]]:
    """Re-read a snapshot and require it to match its recorded per-file digests."""
    files = []
    for entry in binding["oracle_files"]:
        payload = read_bounded_regular(snapshot / entry["target"], MAX_ORACLE_FILE_BYTES)
        if hashlib.sha256(payload).hexdigest() != entry["sha256"] or len(payload) != entry["size"]:
            raise OracleError(f"oracle snapshot file {entry['target']} no longer matches its digest")
        files.append((entry["target"], payload))
    return files


def stage(parent: Path, files: list[tuple[str, bytes]]) -> Path:
    """Stage the oracle files in a fresh randomly named private folder under `parent`."""
    root = parent / f"{STAGE_PREFIX}{secrets.token_hex(16)}"
    root.mkdir(mode=0o700)
    for target, payload in files:
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_exclusive(path, payload, 0o400)
    return root


def check_staged(root: Path, files: list[tuple[str, bytes]]) -> None:
    for target, payload in files:
        if read_bounded_regular(root / target, MAX_ORACLE_FILE_BYTES) != payload:
            raise OracleError(f"oracle file {target} changed during verification")


def remove_staged(root: Path) -> None:
    remove_tree(root)
