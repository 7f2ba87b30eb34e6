"""Artifact I/O: canonical JSON, atomic writes, and schema validation.

Every JSON artifact names its kind in a ``schema`` field (``<kind>/v<N>``), is
validated against ``schemas/<kind>.schema.json`` by its producer before an
atomic write and by its consumer on read, and is written canonically (sorted
keys, two-space indent, trailing newline) so deterministic steps rerun
byte-identically.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema


def _schema_dir() -> Path:
    """`schemas/` of the source tree (a checkout or an editable install), else the copy a wheel installs
    under `<prefix>/share/skillbench/schemas` (pyproject's data-files)."""
    source = Path(__file__).resolve().parents[2] / "schemas"
    installed = Path(sys.prefix) / "share" / "skillbench" / "schemas"
    return source if source.is_dir() or not installed.is_dir() else installed


SCHEMA_DIR = _schema_dir()


class ArtifactError(ValueError):
    """An artifact (or input document) failed validation; the message names file, field and fix."""


def canonical_json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def compact_json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@cache
def load_schema(kind: str) -> dict[str, Any]:
    path = SCHEMA_DIR / f"{kind}.schema.json"
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ArtifactError(f"unknown artifact kind {kind!r}: no schema at {path}") from exc
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def schema_kinds() -> list[str]:
    return sorted(path.name.removesuffix(".schema.json") for path in SCHEMA_DIR.glob("*.schema.json"))


def _json_path(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def schema_errors(document: Any, kind: str) -> list[str]:
    """Every violation as ``<json path>: <message>``, deepest-first order fixed for reproducibility."""
    validator = jsonschema.Draft202012Validator(load_schema(kind))
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


def read_json(path: Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ArtifactError(f"{path}: file is missing") from exc
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
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise ArtifactError(f"{path}: file is missing") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path} line {number}: not valid JSON ({exc})") from exc
        rows.append(validate(row, kind, source=f"{path} line {number}"))
    return rows


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
