"""Strict reading of a CLI's parent-captured JSON-lines stdout, and its redacted transcript.

Only what the harness captured from a session's stdout is evidence (files under the session's home are
the agent's to write). A capture is read strictly — UTF-8, one JSON object per line, finite numbers, no
duplicate keys — and kept once as a redacted, canonical transcript whose digest the row carries.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillbench.base.artifacts import write_exclusive
from skillbench.base.redaction import redact_text, redact_value

MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024


TRANSCRIPT_SOURCE = "parent-captured-stream-json"
# What a transcript cut at the capture's limit is named after (its session id may be in the part that was cut).
TRUNCATED_SESSION = "truncated"


SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,200}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        # 1e999 parses to inf without ever hitting parse_constant.
        raise ValueError(f"non-finite number {text}")
    return number


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Last-wins would let one line carry two readings of the same field.
            raise ValueError(f"duplicate key {key[:80]!r}")
        result[key] = value
    return result


def parse_event_stream(raw: bytes) -> list[dict[str, Any]]:
    """Every event of a stream-json capture, strictly: UTF-8, one JSON object per non-blank line, finite numbers."""
    try:
        text = bytes(raw).decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError(f"event stream is not valid UTF-8 (byte {exc.start})") from exc
    events: list[dict[str, Any]] = []
    # Only "\n" separates events: str.splitlines would also split inside strings holding U+2028 or U+0085.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(
                line, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
            )
        except ValueError as exc:
            raise ValueError(f"event stream line {number} is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise ValueError(f"event stream line {number} is nested too deeply") from exc
        if not isinstance(event, dict):
            raise ValueError(f"event stream line {number} is not a JSON object")
        events.append(event)
    if not events:
        raise ValueError("event stream contains no events")
    return events


def captured_events(capture: bytes | None, *, overflow: bool, limit: int) -> list[dict[str, Any]]:
    """The events of a session's parent-captured stdout; ValueError when nothing was captured, the capture
    overflowed `limit` bytes, or a line is not one JSON object (`parse_event_stream`)."""
    if capture is None:
        raise ValueError("the parent did not capture the session's stdout")
    if overflow:
        raise ValueError(f"captured event stream exceeds {limit} bytes")
    return parse_event_stream(capture)


def truncated_events(capture: bytes) -> bytes:
    """The complete lines of a capture cut at its limit: everything up to its last newline (the rest is an event
    the cut broke)."""
    end = capture.rfind(b"\n")
    return capture[: end + 1] if end >= 0 else b""


def nonnegative(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    if not math.isfinite(raw) or raw < 0:
        return None
    return float(raw)


def measured_cost(raw: Any) -> float | None:
    """A reported cost as a finite non-negative float; None when unmeasured (never a fake 0.0)."""
    return nonnegative(raw)


def count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "…"


def persist_transcript(
    raw: bytes, *, directory: Path, prefix: str, session_id: Any, secrets: Sequence[str]
) -> dict[str, Any]:
    """Write the redacted, canonical event stream once as ``<directory>/<prefix>-<session_id>.jsonl``.

    ``directory`` is the run folder's ``transcripts`` directory; the returned path is relative to the
    run folder.
    """
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(f"unsafe transcript prefix {short(prefix)}")
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise ValueError(f"unsafe session id {short(session_id)}")
    directory = Path(directory)
    if directory.name != "transcripts":
        raise ValueError(f"transcript directory must be <run folder>/transcripts, not {directory}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    mode = directory.lstat().st_mode
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise ValueError(f"transcript directory is not a real directory: {directory}")
    directory.chmod(0o700)

    # Re-parsing proves the artifact is the complete structured stream, not arbitrary captured bytes.
    events = parse_event_stream(raw)
    try:
        lines = [
            json.dumps(
                redact_value(event, secrets), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
            for event in events
        ]
    except RecursionError as exc:
        raise ValueError("event stream is nested too deeply to redact") from exc
    payload = "".join(line + "\n" for line in lines).encode("utf-8")
    if len(payload) > MAX_TRANSCRIPT_BYTES:
        raise ValueError(f"redacted transcript is {len(payload)} bytes, over the {MAX_TRANSCRIPT_BYTES} limit")
    parse_event_stream(payload)

    name = f"{prefix}-{session_id}.jsonl"
    path = directory / name
    write_exclusive(path, payload, 0o600)
    return {
        "path": f"transcripts/{name}",
        "sha256": hashlib.sha256(payload).hexdigest(),
        "bytes": len(payload),
        "source": TRANSCRIPT_SOURCE,
    }


def redact_stream_tail(text: str, secrets: Sequence[str]) -> str:
    """Redact a stdout tail line by line, structurally where a line is a whole JSON object."""
    out = []
    for line in text.split("\n"):
        try:
            out.append(json.dumps(redact_value(json.loads(line), secrets), ensure_ascii=False))
        except (ValueError, RecursionError):
            out.append(redact_text(line, secrets))
    return "\n".join(out)
