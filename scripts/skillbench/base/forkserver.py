"""A step server: one long-lived process per local snakemake run that has a `shell:` step's shim imported and
forks each job of that step from there, so a job's slot does not pay for an interpreter's start and the
library's imports (0.2–0.3 s of every cell, bench/harness_overhead.py).

The job's own process, the shim the rule's command starts, hands the server its command line, working folder,
environment, umask and standard streams (the descriptors themselves) and waits. The server forks a child that
takes them on and runs the shim as `__main__`, so the child sees what the shim would have seen and a job's
result does not depend on which way it ran. The job's process exits with the child's status. Signals keep their
meaning: SIGTERM to the job's process is forwarded to the child; a job process that dies (SIGKILL) has its
child sent SIGTERM; the child watches its ancestors up to snakemake as any job does (`process.watch_parent`).
On SIGTERM the server stops taking jobs, sends its children SIGTERM and ends when they have; once snakemake is
gone it stops taking jobs and ends when its children, which see that for themselves, have.

Trust: only the snakemake process that started the server may use it, for the one shim it was started for. Its
socket lives in a folder only the user can open, and a connection is served only if the kernel says the peer
runs as the same user and is a direct child of that snakemake (every job is; no agent, sandbox or session is).
A job that finds no server, or is refused before anything was forked, runs the shim itself: the server only
saves time.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import struct
import sys

# The job's side runs before the library is imported, in every cell's slot: it imports only what the interpreter
# has loaded already and `socket` (no typing, dataclasses, pathlib or json; mypy reads this name as True).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

# Where a job finds the run's server: set in the snakemake process by `start`, inherited by its jobs only.
ADDRESS_ENV = "SKILLBENCH_STEP_SERVER"
STREAMS = (0, 1, 2)
# A request's length, then the child's pid (the reply); the child's wait status at its end. A request's fields
# are NUL-separated: none can hold a NUL (paths, a command line and an environment cannot).
_SIZE = struct.Struct("!Q")
_STATUS = struct.Struct("!i")
_PEER = struct.Struct("iII")  # struct ucred: pid, uid, gid
REQUEST_WAIT_S = 10.0
PARENT_POLL_S = 0.5
STOP_WAIT_S = 10.0
BACKLOG = 128

# True in a child the server forked: the shim runs there and must not hand itself over again.
_in_server_child = False


# ─── The job's side ─────────────────────────────────────────────────────────


def hand_over(script: str, arguments: list[str]) -> int | None:
    """Run `script` with `arguments` in the run's step server and return its exit status, or None when no server
    runs it (none was started, it is gone, or it refused before forking): the caller then runs it itself."""
    address = os.environ.get(ADDRESS_ENV)
    if _in_server_child or not address:
        return None
    mask = os.umask(0)
    os.umask(mask)
    fields = [os.path.realpath(script), os.getcwd(), str(mask), str(len(arguments)), *arguments]
    request = b"\0".join([*map(os.fsencode, fields), *(key + b"=" + value for key, value in os.environb.items())])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
        socket.send_fds(connection, [_SIZE.pack(len(request))], list(STREAMS))
        connection.sendall(request)
        reply = _receive(connection, _SIZE.size)
    except OSError:
        reply = None
    if reply is None:
        connection.close()
        return None
    with connection:
        return _relay(connection, _SIZE.unpack(reply)[0])


def _relay(connection: socket.socket, child: int) -> int:
    """Wait for the child's status, forwarding SIGTERM to it; SIGINT is ignored as the shim itself ignores it
    (`process.install_signal_handlers`: a terminal's first Ctrl-C lets running cells finish)."""
    try:
        handle: int | None = os.pidfd_open(child)
    except OSError:
        handle = None  # it has ended already: its status is on the way

    def forward(signum: int, frame: object) -> None:
        if handle is not None:
            try:
                signal.pidfd_send_signal(handle, signum)
            except OSError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = _receive(connection, _STATUS.size)
    except OSError:
        status = None
    if status is None:
        print(f"[skillbench] the step server ended before its job (pid {child}) did", file=sys.stderr, flush=True)
        return 1
    code = os.waitstatus_to_exitcode(_STATUS.unpack(status)[0])
    return code if code >= 0 else 128 - code


def _receive(connection: socket.socket, size: int) -> bytes | None:
    """Exactly `size` bytes, or None if the other side closed first."""
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# ─── The snakemake side ─────────────────────────────────────────────────────


class StepServer:
    """A running server: where jobs reach it, its process, and the private folder its socket lives in."""

    def __init__(self, address: str, process: subprocess.Popen[bytes], folder: str) -> None:
        self.address = address
        self.process = process
        self.folder = folder

    def stop(self) -> None:
        """SIGTERM, then wait for it to end (its running children with it); again is a no-op."""
        import shutil
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def launch(script: Path, python: str, library: Path) -> StepServer | None:
    """Start a server for `script` that serves only this process's children; None when no socket could be made
    here (a socket path longer than the kernel allows, under a long TMPDIR)."""
    import shutil
    import subprocess
    import tempfile

    folder = tempfile.mkdtemp(prefix="skillbench-steps-")  # mode 0700: only the user can reach the socket
    address = os.path.join(folder, "server.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address)
        listener.listen(BACKLOG)
    except OSError:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
        return None
    # Jobs that connect before the server has imported the library wait in the backlog; if it fails to start,
    # closing the last listener refuses them and they run their shims themselves.
    with listener:
        process = subprocess.Popen(
            [python, "-m", "skillbench.base.forkserver", str(listener.fileno()), str(os.getpid()), str(script)],
            pass_fds=[listener.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(library)},
            # In snakemake's process group, as its jobs are: whatever ends the group (a SIGKILL to it, a closed
            # terminal) ends the server and the cells it forked as it would have ended cells run in their jobs.
        )
    return StepServer(address, process, folder)


_started: list[StepServer] = []


def start(script: Path, python: str, library: Path) -> StepServer | None:
    """In the snakemake process, once per run before any job: launch the run's server for `script` and tell the
    jobs where it is. `stop` ends it; so does snakemake's exit."""
    import atexit

    server = launch(script, python, library)
    if server is not None:
        os.environ[ADDRESS_ENV] = server.address
        _started.append(server)
        atexit.register(stop)
    return server


def stop() -> None:
    """Stop the servers `start` started in this process (after the run's last job, before its closing lines)."""
    os.environ.pop(ADDRESS_ENV, None)
    while _started:
        _started.pop().stop()


# ─── The server ─────────────────────────────────────────────────────────────


class Request:
    """What a job handed over: the shim's command line, and the process state it would have run in."""

    def __init__(self, body: bytes, streams: list[int]) -> None:
        fields = [os.fsdecode(field) for field in body.split(b"\0")]
        self.script, self.cwd, umask, count = fields[:4]
        self.umask = int(umask)
        self.arguments = fields[4 : 4 + int(count)]
        if len(self.arguments) != int(count):
            raise ValueError("a request with fewer arguments than it announced")
        self.env = dict(entry.partition("=")[::2] for entry in fields[4 + int(count) :])
        self.streams = streams


class _Job:
    """A forked child, the pidfd that says when it has ended, and its job's connection (None once it is gone)."""

    def __init__(self, child: int, handle: int, connection: socket.socket) -> None:
        self.child = child
        self.handle = handle
        self.connection: socket.socket | None = connection
        self.stopped = False  # sent SIGTERM by the server: once, whichever of a stop or the job's end came first

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            try:
                signal.pidfd_send_signal(self.handle, signal.SIGTERM)
            except OSError:
                pass  # it has ended: its pidfd is about to be reaped


class Server:
    """The accept loop: forks a child per accepted request and reports each child's status to its job."""

    def __init__(self, listener: socket.socket, parent: int, script: str) -> None:
        self.listener: socket.socket | None = listener
        self.parent = parent
        self.script = script
        self.jobs: dict[int, _Job] = {}  # by pidfd
        self.served = 0
        self.stop_requested = False

    def run(self) -> Request:
        """Serve until stopped (then exit the process); returns only in a forked child, with its request."""

        def request_stop(signum: int, frame: object) -> None:
            # Only a flag: the loop looks at it at least every PARENT_POLL_S, never halfway through a fork.
            self.stop_requested = True

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, request_stop)
        while not self.stop_requested and os.getppid() == self.parent:
            request = self._step()
            if request is not None:
                return request
        # Stopped, or snakemake is gone: take no more jobs, and end when the running ones have. A stop is passed on
        # to them; snakemake's end each sees for itself (`process.watch_parent`) and says so in its cell's log.
        assert self.listener is not None
        self.listener.close()
        self.listener = None
        if self.stop_requested:
            for job in self.jobs.values():
                job.stop()
        while self.jobs:
            self._step()
        if self.served:
            plural = "" if self.served == 1 else "s"
            print(f"[skillbench] the step server forked {self.served} job{plural}", file=sys.stderr, flush=True)
        raise SystemExit(0)

    def _step(self) -> Request | None:
        import select

        poller = select.poll()
        if self.listener is not None:
            poller.register(self.listener, select.POLLIN)
        for handle, job in self.jobs.items():
            poller.register(handle, select.POLLIN)
            if job.connection is not None:
                poller.register(job.connection, select.POLLIN)
        ready = {descriptor for descriptor, _events in poller.poll(PARENT_POLL_S * 1000)}
        # Ended children first, then gone jobs, then new jobs: a descriptor closed here is not reused before the
        # events of this round are done with.
        for handle in ready & set(self.jobs):
            self._reap(self.jobs.pop(handle))
        for job in self.jobs.values():
            if job.connection is not None and job.connection.fileno() in ready:
                # The job's process is gone (or spoke out of turn): its child ends as if it had had SIGTERM.
                job.connection.close()
                job.connection = None
                job.stop()
        if self.listener is not None and self.listener.fileno() in ready:
            return self._accept()
        return None

    def _accept(self) -> Request | None:
        assert self.listener is not None
        connection, _ = self.listener.accept()
        request = self._read(connection)
        if request is None:
            connection.close()
            return None
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            child = os.fork()
        except OSError:
            child = -1  # no process to spare: refused, the job runs its shim itself
        if child == 0:
            self._become_child(connection, request)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            return request
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for descriptor in request.streams:
            os.close(descriptor)
        if child < 0:
            connection.close()
            return None
        self.served += 1
        handle = os.pidfd_open(child)
        self.jobs[handle] = _Job(child, handle, connection)
        try:
            connection.sendall(_SIZE.pack(child))
        except OSError:
            pass  # the job's process is gone: the next poll sees its connection closed
        return None

    def _read(self, connection: socket.socket) -> Request | None:
        """The request of a direct child of our snakemake running as our user, for our shim; None otherwise."""
        streams: list[int] = []
        try:
            pid, uid, _gid = _PEER.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER.size))
            if uid != os.getuid() or _parent_of(pid) != self.parent:
                return None
            connection.settimeout(REQUEST_WAIT_S)
            header, streams, _flags, _address = socket.recv_fds(connection, _SIZE.size, len(STREAMS))
            if len(header) != _SIZE.size or len(streams) != len(STREAMS):
                raise ValueError("a request without its header and three streams")
            body = _receive(connection, _SIZE.unpack(header)[0])
            if body is None:
                raise ValueError("a request cut short")
            request = Request(body, streams)
            if request.script != self.script:
                raise ValueError(f"a request for {request.script}, not {self.script}")
            connection.settimeout(None)
            return request
        except (OSError, ValueError, TypeError):
            for descriptor in streams:
                os.close(descriptor)
            return None

    def _become_child(self, connection: socket.socket, request: Request) -> None:
        """In the forked child: drop the server's descriptors and take on the job's process state."""
        global _in_server_child
        _in_server_child = True
        connection.close()
        if self.listener is not None:
            self.listener.close()
        for handle, job in self.jobs.items():
            os.close(handle)
            if job.connection is not None:
                job.connection.close()
        for target, descriptor in zip(STREAMS, request.streams, strict=True):
            os.dup2(descriptor, target)
            os.close(descriptor)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request.cwd)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.env)
        import tempfile  # the library has it loaded

        tempfile.tempdir = None  # found again from this job's TMPDIR
        if isinstance(sys.stdout, io.TextIOWrapper):
            # As a fresh interpreter would: line-buffered on a terminal, block-buffered otherwise.
            sys.stdout.reconfigure(line_buffering=os.isatty(1))

    def _reap(self, job: _Job) -> None:
        _pid, status = os.waitpid(job.child, 0)
        os.close(job.handle)
        if job.connection is not None:
            try:
                job.connection.sendall(_STATUS.pack(status))
            except OSError:
                pass
            job.connection.close()


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def preload(script: str) -> None:
    """Import every module `script` imports at its top, as its own run would: what a forked child then saves."""
    import ast
    import importlib

    with open(script, encoding="utf-8") as source:
        tree = ast.parse(source.read(), script)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            importlib.import_module(node.module)


def main(arguments: list[str]) -> None:
    """`python -m skillbench.base.forkserver LISTENER_FD PARENT_PID SCRIPT`: serve SCRIPT's jobs on the
    inherited listening socket for snakemake PARENT_PID; in each forked child, run SCRIPT as `__main__`."""
    import runpy

    descriptor, parent, script = int(arguments[0]), int(arguments[1]), os.path.realpath(arguments[2])
    listener = socket.socket(fileno=descriptor)
    # As when the shim is run as a script: its folder first on the path (PYTHONPATH was only for this start).
    sys.path[0] = os.path.dirname(script)
    os.environ.pop("PYTHONPATH", None)
    preload(script)
    request = Server(listener, parent, script).run()
    sys.argv = [request.script, *request.arguments]
    runpy.run_path(request.script, run_name="__main__")


if __name__ == "__main__":
    # Run as the package's module, not as `__main__`: the shim reads this module's `_in_server_child`.
    from skillbench.base.forkserver import main as serve_main

    serve_main(sys.argv[1:])
