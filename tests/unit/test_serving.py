"""The connection handling the gateway and the scripted model share (base.serving.KeepAliveHandler): bounded
request bodies, keep-alive, and connections their owner can hang up."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from skillbench.base.serving import MAX_LINE_BYTES, KeepAliveHandler, Serving

LIMIT = 4096


class Owner:
    """Counts the connections its handlers report open and closed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        self.closed = threading.Event()

    def _track(self, connection: socket.socket, active: bool) -> None:
        with self.lock:
            if active:
                self.open.add(connection)
            else:
                self.open.discard(connection)
                self.closed.set()


class EchoLength(KeepAliveHandler):
    """Answers a POST with the length of the body it read, or 400 when it could not read one."""

    max_body_bytes = LIMIT

    def do_POST(self) -> None:
        body = self.read_body()
        if body is None:
            self.send_payload(400, b"unreadable", "text/plain")
        else:
            self.send_payload(200, str(len(body)).encode(), "text/plain")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True


@contextmanager
def serving() -> Iterator[tuple[int, Owner]]:
    owner = Owner()
    handler = type("Handler", (EchoLength,), {"owner": owner})
    server = Server(("127.0.0.1", 0), handler)
    loop = Serving(server, "test-serving")
    try:
        yield server.server_address[1], owner
    finally:
        with owner.lock:
            still_open = list(owner.open)
        loop.stop(lambda: still_open)


def exchange(connection: socket.socket, request: bytes) -> bytes:
    """Send `request` and read one response (headers and the short body this server sends)."""
    connection.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[1]
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head.split(b"\r\n", 1)[0] + b" | " + body


def hangs_up(connection: socket.socket) -> bool:
    connection.settimeout(60)
    return connection.recv(1) == b""


def test_a_chunked_body_is_read_whole_and_the_connection_serves_the_next_request() -> None:
    with serving() as (port, owner), socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        chunked = (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
        )
        assert exchange(connection, chunked) == b"HTTP/1.1 200 OK | 11"
        plain = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        assert exchange(connection, plain) == b"HTTP/1.1 200 OK | 3"
        with owner.lock:
            assert len(owner.open) == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (LIMIT + 1),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: many\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % (LIMIT + 1),
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + b"a" * 0x800 + b"\r\n801\r\n",
        # A chunk-size line that never ends: refused once it passes the bound, not read on and on.
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"0" * (4 * MAX_LINE_BYTES),
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n",
        # Short trailer lines that never end: they count against the body's bound.
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: x\r\n" * (LIMIT // 6 + 10),
    ],
    ids=[
        "over-limit",
        "negative",
        "not-a-number",
        "chunk-over-limit",
        "chunks-over-limit",
        "endless-line",
        "negative-chunk",
        "endless-trailers",
    ],
)
def test_a_body_it_cannot_read_safely_is_refused_and_the_connection_closed(request_bytes: bytes) -> None:
    with serving() as (port, owner), socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        assert exchange(connection, request_bytes) == b"HTTP/1.1 400 Bad Request | unreadable"
        assert hangs_up(connection)
        assert owner.closed.wait(60)
        with owner.lock:
            assert not owner.open


def test_stop_hangs_up_a_connection_idle_between_requests() -> None:
    with serving() as (port, owner):
        connection = socket.create_connection(("127.0.0.1", port), timeout=60)
        assert (
            exchange(connection, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n") == b"HTTP/1.1 200 OK | 0"
        )
    with connection:
        assert hangs_up(connection)
    assert owner.closed.wait(60)
