"""The bridge inside a cell: 127.0.0.1:PORT of the cell's own network namespace → the gateway's Unix socket.

Run by the system python3 in the cell's sandbox, isolated (`python3 -I -S forwarder.py PORT SOCKET [--export
NAME] -- COMMAND...`; it imports nothing of skillbench). It binds the port before anything else, so the
command never races the listener, forks the forwarder, and execs COMMAND in its own process, so the CLI
stays the sandbox's main process and its exit status is the sandbox's. PORT 0 takes a free port (a host
without network namespaces, the `none` backend), which `--export NAME` hands to COMMAND as
`NAME=http://127.0.0.1:<port>`. The forwarder ends with the namespace, or once its parent is gone.
"""

import ctypes
import os
import signal
import socket
import sys
import threading

PR_SET_PDEATHSIG = 1


def pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(client: socket.socket, path: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gateway:
        try:
            gateway.connect(path)
        except OSError:
            return
        back = threading.Thread(target=pump, args=(gateway, client), daemon=True)
        back.start()
        pump(client, gateway)
        back.join()


def serve(listener: socket.socket, path: str, parent: int) -> None:
    listener.settimeout(1.0)
    while os.getppid() == parent:
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        client.settimeout(None)
        # Every model turn is a small request and a streamed answer: Nagle would add ~40 ms to each.
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=relay, args=(client, path), daemon=True).start()


def main(arguments: list[str]) -> None:
    try:
        separator = arguments.index("--")
    except ValueError:
        sys.exit("usage: forwarder.py PORT SOCKET [--export NAME] -- COMMAND...")
    options, command = arguments[:separator], arguments[separator + 1 :]
    if len(options) not in (2, 4) or (len(options) == 4 and options[2] != "--export") or not command:
        sys.exit("usage: forwarder.py PORT SOCKET [--export NAME] -- COMMAND...")
    port, path = int(options[0]), options[1]
    listener = socket.create_server(("127.0.0.1", port), backlog=64)
    if len(options) == 4:
        os.environ[options[3]] = f"http://127.0.0.1:{listener.getsockname()[1]}"
    parent = os.getpid()
    if os.fork() == 0:
        # Out of the command's process group, so a harness that waits for the group sees the command end when
        # it ends; and ended by the kernel the moment the command does (without a PID namespace to take it).
        os.setsid()
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for descriptor in (0, 1, 2):
            os.dup2(null, descriptor)
        serve(listener, path, parent)
        os._exit(0)
    listener.close()
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
