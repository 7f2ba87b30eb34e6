"""Serving and stopping the harness's own threaded servers (the model gateway, the scripted model).

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
from collections.abc import Callable, Iterable


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
