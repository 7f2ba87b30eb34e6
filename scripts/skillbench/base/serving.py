"""Stopping the harness's own threaded HTTP servers (the model gateway, the scripted model).

Both keep the sockets of their open connections: `shutdown()` alone waits for the serving loop, while a
keep-alive handler blocked on reading its next request would hold its thread until the client hangs up.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterable


def stop_serving(
    server: socketserver.BaseServer,
    thread: threading.Thread | None,
    open_connections: Callable[[], Iterable[socket.socket]],
) -> None:
    """Stop `server`'s loop, close its listening socket, hang up the connections still open (asked for once no
    new one can be accepted) and join its thread."""
    server.shutdown()
    server.server_close()
    for connection in open_connections():
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    if thread is not None:
        thread.join()
