"""Artifact I/O: canonical JSON, atomic writes, schema validation, bounded no-follow reads and UTC timestamps.

Every JSON artifact names its kind in a ``schema`` field (``<kind>/v<N>``), is
validated against ``schemas/<kind>.schema.json`` by its producer before an
atomic write and by its consumer on read, and is written canonically (sorted
keys, two-space indent, trailing newline) so deterministic steps rerun
byte-identically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
from referencing import Registry, Resource

from skillbench.base.errors import SkillbenchError


def _schema_dir() -> Path:
    """`schemas/` of the source tree (a checkout or an editable install), else the copy a wheel installs
    under `<prefix>/share/skillbench/schemas` (pyproject's data-files)."""
    source = Path(__file__).resolve().parents[3] / "schemas"
    installed = Path(sys.prefix) / "share" / "skillbench" / "schemas"
    return source if source.is_dir() or not installed.is_dir() else installed


SCHEMA_DIR = _schema_dir()


class ArtifactError(SkillbenchError, ValueError):
    """An artifact (or input document) failed validation; the message names file, field and fix."""


def canonical_json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def compact_json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@cache
def load_schema(kind: str) -> dict[str, Any]:
    """The schema of ``kind``. Its own well-formedness is a property of the repository, checked by the unit tests
    (`check_schema` on all of them costs a cell job ~0.3 s at its first read)."""
    path = SCHEMA_DIR / f"{kind}.schema.json"
    try:
        schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ArtifactError(f"unknown artifact kind {kind!r}: no schema at {path}") from exc
    return schema


def schema_kinds() -> list[str]:
    return sorted(path.name.removesuffix(".schema.json") for path in SCHEMA_DIR.glob("*.schema.json"))


def _json_path(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


@cache
def _registry() -> Registry:
    """Every schema by its `$id` (its kind), so one schema can refer to another's definitions."""
    return Registry().with_resources((kind, Resource.from_contents(load_schema(kind))) for kind in schema_kinds())


def schema_errors(document: Any, kind: str) -> list[str]:
    """Every violation as ``<json path>: <message>``, deepest-first order fixed for reproducibility."""
    validator = jsonschema.Draft202012Validator(load_schema(kind), registry=_registry())
    errors = sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{_json_path(error)}: {error.message}" for error in errors]


def validate(document: Any, kind: str, *, source: str | Path = "<document>") -> Any:
    """Return ``document`` if it matches the schema of ``kind``; else raise naming the first bad field."""
    errors = schema_errors(document, kind)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ArtifactError(f"{source}: not a valid {kind} document: {errors[0]}{more}")
    return document


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Write through a temp file in the same directory, fsync, then rename over ``path``.

    A job killed mid-write never leaves a plausible partial file behind (Snakemake
    does not flag partial outputs of checkpoint-dependent jobs as incomplete).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def write_artifact(path: Path, document: Mapping[str, Any], kind: str, *, mode: int = 0o644) -> None:
    validate(document, kind, source=path)
    atomic_write_text(Path(path), canonical_json(document), mode=mode)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ArtifactError(f"{path}: file is missing") from exc


def read_json(path: Path) -> Any:
    path = Path(path)
    try:
        return json.loads(_read_text(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not valid UTF-8 JSON ({exc})") from exc


def read_artifact(path: Path, kind: str) -> dict[str, Any]:
    return validate(read_json(path), kind, source=path)


def write_jsonl(path: Path, rows: list[dict[str, Any]], kind: str) -> None:
    for index, row in enumerate(rows, start=1):
        validate(row, kind, source=f"{path} line {index}")
    atomic_write_text(Path(path), "".join(compact_json(row) + "\n" for row in rows))


def read_jsonl(path: Path, kind: str) -> list[dict[str, Any]]:
    path = Path(path)
    rows = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path} line {number}: not valid JSON ({exc})") from exc
        rows.append(validate(row, kind, source=f"{path} line {number}"))
    return rows


def utc_timestamp(
    moment: datetime | None = None,
    *,
    timespec: str = "seconds",
    for_filename: bool = False,
) -> str:
    """``moment`` (default: now) in UTC as ISO 8601 with a ``Z`` suffix: ``2026-01-31T09:05:00Z``.

    Every timestamp an artifact records has this form (sessions' start and finish are recorded to the
    millisecond). ``for_filename`` gives ISO 8601's basic form instead (``20260131T090500123456Z`` with
    microseconds): no ``:``, which some file systems and tools refuse in names, and it sorts by time.
    """
    current = datetime.now(UTC) if moment is None else moment.astimezone(UTC)
    text = current.isoformat(timespec=timespec).replace("+00:00", "Z")
    return text.replace("-", "").replace(":", "").replace(".", "") if for_filename else text


PathKind = Literal["missing", "symlink", "folder", "file", "other"]


def path_kind(path: Path) -> PathKind:
    """What is at ``path`` itself, never following a symlink there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "folder" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def read_regular_file(
    path: Path,
    limit: int,
    *,
    what: str = "file",
    error: type[Exception] = ArtifactError,
    keep_tail: bool = False,
    inspect: Callable[[os.stat_result], None] | None = None,
) -> bytes:
    """The bytes of a regular, non-symlink file of at most ``limit`` bytes, read through one descriptor.

    Raises ``error`` (its message names ``what``, the path and, for size, the limit) when nothing is
    there, when it is a symlink or not a regular file, when it is swapped between the check and the
    open, when it is larger than ``limit``, and when it changes while being read. With ``keep_tail`` a
    larger file is not refused: its last ``limit`` bytes are read, from the first whole line in them.
    ``inspect`` sees the opened file's status before anything is read, and raises to refuse it.
    """
    path = Path(path)
    descriptor, opened = _open_regular(path, what, error)
    try:
        if inspect is not None:
            inspect(opened)
        start = 0
        if opened.st_size > limit:
            if not keep_tail:
                raise error(f"{what} is {opened.st_size} bytes, over the limit of {limit} bytes: {path}")
            start = opened.st_size - limit
            os.lseek(descriptor, start, os.SEEK_SET)
        payload = _read_to_end(
            descriptor, limit, lambda: error(f"{what} grew past {limit} bytes while being read: {path}")
        )
        after = os.fstat(descriptor)
    finally:
        os.close(descriptor)
    if (opened.st_size, opened.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        raise error(f"{what} changed while being read: {path}")
    if start:
        newline = payload.find(b"\n")
        payload = payload[newline + 1 :] if newline >= 0 else b""
    return payload


def _open_regular(path: Path, what: str, error: type[Exception]) -> tuple[int, os.stat_result]:
    try:
        before = path.lstat()
    except OSError as exc:
        raise error(f"{what} is unavailable: {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(before.st_mode):
        raise error(f"{what} must be a regular non-symlink file: {path}")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise error(f"{what} cannot be opened: {path}: {exc.strerror}") from exc
    opened = os.fstat(descriptor)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
        os.close(descriptor)
        raise error(f"{what} changed while being opened: {path}")
    return descriptor, opened


def _read_to_end(descriptor: int, limit: int, too_long: Callable[[], Exception]) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(descriptor, 64 * 1024):
        total += len(chunk)
        if total > limit:
            raise too_long()
        chunks.append(chunk)
    return b"".join(chunks)


def write_exclusive(path: Path, payload: bytes, mode: int) -> None:
    """Create `path` (never an existing file, never through a symlink), write it whole, fsync.

    The file is ours because we created it, so a partial write is removed rather than left looking
    like evidence.
    """
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(descriptor, mode)
        view = memoryview(payload)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
    except BaseException:
        os.close(descriptor)
        Path(path).unlink(missing_ok=True)
        raise
    os.close(descriptor)


def remove_tree(path: Path) -> None:
    """Remove a folder even where its files or an agent left read-only folders (0500, 0555) behind, or folders
    nested deeper than Python's recursion limit (an agent can nest thousands deep)."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    try:
        for directory, _subdirs, _files in os.walk(path):
            try:
                os.chmod(directory, 0o700)
            except OSError:
                pass
        shutil.rmtree(path)
        return
    except RecursionError:
        pass
    # coreutils walk any depth without a recursion limit.
    for argv in (["chmod", "-R", "--", "u+rwx", str(path)], ["rm", "-rf", "--one-file-system", "--", str(path)]):
        subprocess.run(
            argv, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, capture_output=True, check=False, timeout=600
        )
    if os.path.lexists(path):
        raise OSError(f"could not remove {path}")


def framed_digest(frames: list[bytes]) -> str:
    """SHA-256 over 8-byte big-endian length-prefixed frames (no ambiguity between frame boundaries)."""
    digest = hashlib.sha256()
    for frame in frames:
        digest.update(len(frame).to_bytes(8, "big"))
        digest.update(frame)
    return digest.hexdigest()
