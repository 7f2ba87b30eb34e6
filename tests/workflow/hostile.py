"""Helpers shared by the adversarial workflow tests: a loopback listener and the key-leak search."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from pathlib import Path


class Listener:
    """A TCP listener that counts every connection made to it: on loopback, or on `host` (0.0.0.0: every host
    address, the loopback and the machine's own)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.socket = socket.create_server((host, 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.socket.close()

    def reachable_from_host(self, hosts: list[str], timeout: float = 30) -> bool:
        """Connect once to each of `hosts` from this process, wait until every connection is counted, then start
        counting from zero again: a precondition that a count of 0 later means something."""
        for host in hosts:
            socket.create_connection((host, self.port), 5).close()
        deadline = time.monotonic() + timeout
        while self.connections < len(hosts) and time.monotonic() < deadline:
            time.sleep(0.05)
        reached = self.connections == len(hosts)
        self.connections = 0
        return reached


def host_address() -> str:
    """The host's own non-loopback IPv4 address: the source address of a route out (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # TEST-NET-2: only the route is looked up
        address = probe.getsockname()[0]
    assert not address.startswith("127."), f"no non-loopback address on this host (got {address})"
    return address


def key_forms(key: str) -> dict[str, bytes]:
    """The key and the transformed copies a planted program could write: name → bytes to search for.

    Base64 (standard and URL-safe, padded or not) is taken at each of the 3 byte alignments the
    key can have inside a longer encoded stream: for each, the part of the encoding that depends
    only on the key's own bytes (the groups touched by a neighbouring byte or by padding are cut).
    """
    raw = key.encode()
    forms = {"literal": raw, "reversed": raw[::-1], "hex": raw.hex().encode(), "HEX": raw.hex().upper().encode()}
    for offset in range(3):
        for name, encode in (("base64", base64.b64encode), ("base64url", base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * offset + raw)
            start = 4 if offset else 0
            forms[f"{name}@{offset}"] = encoded[start:-4]
            if offset == 0:
                forms[f"{name}-padded"] = encoded
                forms[f"{name}-unpadded"] = encoded.rstrip(b"=")
    assert all(len(form) >= 16 for form in forms.values()), "the canary key is too short to search for"
    return forms


def key_leaks(roots: list[Path], key: str) -> list[str]:
    """`path: form` for every file under `roots` that holds the key in any form of `key_forms`."""
    forms = key_forms(key)
    leaks = []
    for root in roots:
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                payload = path.read_bytes()
                leaks += [f"{path}: {name}" for name, form in forms.items() if form in payload]
    return leaks


def content_blocks(event: dict) -> list:
    """The content blocks of an assistant or user event; none for other events.

    Newer CLIs send events whose `message` is a string (`system/permission_denied`), so only a dict's
    content counts.
    """
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def tool_calls(run_dir: Path) -> list[dict]:
    """Every tool call of a cell, in session order: name, input, result text and whether it was an error.

    Tool ids are unique within one session's transcript only (sessions of a cell may reuse them).
    """
    calls: dict[tuple[str, str], dict] = {}
    for transcript in sorted((run_dir / "transcripts").glob("*.jsonl"), key=lambda path: path.stat().st_mtime_ns):
        for line in transcript.read_text().splitlines():
            for block in content_blocks(json.loads(line)):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    calls[(transcript.name, block["id"])] = {
                        "name": block["name"],
                        "input": block["input"],
                        "output": None,
                        "error": None,
                    }
                elif block.get("type") == "tool_result" and (transcript.name, block.get("tool_use_id")) in calls:
                    result = block.get("content")
                    if isinstance(result, list):
                        result = "\n".join(part.get("text", "") for part in result if isinstance(part, dict))
                    calls[(transcript.name, block["tool_use_id"])].update(
                        output=str(result), error=bool(block.get("is_error"))
                    )
    return list(calls.values())
