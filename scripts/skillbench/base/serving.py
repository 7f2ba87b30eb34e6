"""Serving and stopping the harness's own threaded HTTP servers (the model gateway, the scripted model), and
the connection handling they share.

The accept loop waits on the listening socket and on a wake-up pipe, so a stop takes effect at once: with
`serve_forever`'s poll interval every session paid up to that interval again when its server stopped. Both
servers keep the sockets of their open connections: a keep-alive handler blocked on reading its next request
would hold its thread until the client hangs up, so a stop hangs them up.
"""

from __future__ import annotations

import os
import selectors
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import ClassVar, Protocol

# A chunk-size or trailer line longer than this ends the connection: a client (the CLI, or the agent behind it)
# must not make a server read without bound. (http.server bounds the request line and headers itself.)
MAX_LINE_BYTES = 1024


class Serving:
    """``server``'s accept loop on a daemon thread named ``name``, until `stop`."""

    def __init__(self, server: socketserver.TCPServer, name: str) -> None:
        self.server = server
        # handle_request() looks once more at a socket the loop found readable, and never waits on it.
        server.timeout = 0
        self._wake_read, self._wake_write = os.pipe()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.server, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _ in selector.select()]
                if self._wake_read in ready:
                    return
                self.server.handle_request()

    def stop(self, open_connections: Callable[[], Iterable[socket.socket]]) -> None:
        """End the loop, close the listening socket, hang up the connections still open (asked for once no new
        one can be accepted) and join the loop's thread."""
        os.write(self._wake_write, b"\0")
        self.thread.join()
        self.server.server_close()
        for connection in open_connections():
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        os.close(self._wake_read)
        os.close(self._wake_write)


class ConnectionOwner(Protocol):
    """What a server keeps of its open connections, so that its stop can hang them up."""

    def _track(self, connection: socket.socket, active: bool) -> None: ...


class KeepAliveHandler(BaseHTTPRequestHandler):
    """One HTTP/1.1 keep-alive connection of a harness server, tracked by `owner` while it is open.

    No idle timeout: a tool call (a long test run) keeps the CLI away for minutes, and a dropped keep-alive
    connection would surface as a spurious retry; the owner's stop hangs open connections up instead. Nothing is
    logged: request lines and headers may carry session tokens or keys. Bodies are read up to
    `max_body_bytes`, Content-Length or chunked."""

    owner: ClassVar[ConnectionOwner]
    max_body_bytes: ClassVar[int]
    protocol_version = "HTTP/1.1"
    sys_version = ""
    timeout = None

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._track(self.connection, False)

    def log_message(self, format: str, *args: object) -> None:
        return

    def read_body(self) -> bytes | None:
        """The request's body; None, with the connection marked to close, when it is malformed or too large (what
        is left of it cannot be skipped safely)."""
        try:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return self._read_chunked()
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0 or length > self.max_body_bytes:
                raise ValueError("bad Content-Length")
            return self.rfile.read(length) if length else b""
        except (ValueError, OSError):
            self.close_connection = True
            return None

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size = int(self._line().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                trailers = 0  # counted against the body's bound, or a stream of short trailer lines never ends
                while (line := self._line()) not in (b"\r\n", b"\n", b""):
                    trailers += len(line)
                    if len(body) + trailers > self.max_body_bytes:
                        raise ValueError("trailers too large")
                return bytes(body)
            if size < 0 or len(body) + size > self.max_body_bytes:
                raise ValueError("chunked body too large")
            body += self.rfile.read(size)
            self._line()

    def _line(self) -> bytes:
        line = self.rfile.readline(MAX_LINE_BYTES + 1)
        if len(line) > MAX_LINE_BYTES:
            raise ValueError("line too long")
        return line

    def send_payload(
        self,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        """A whole response: status, content type and length, `headers`, and the payload unless the request was HEAD."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()
