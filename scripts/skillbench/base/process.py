"""One runner for every subprocess of a cell: explicit environment, own process group, bounded output,
timeout and cancellation that take the whole process tree down.

`run_managed` never leaves a descendant behind: on timeout, on cancellation (SIGTERM to the job
script via `install_signal_handlers`, or the death of the snakemake that started the job via
`watch_parent`), on an interrupt inside the wait, and after a normal exit whose descendants are still
running. `exclusive_writer` gives a folder one writer at a time (an flock held for the job's life).
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from skillbench.base.errors import SkillbenchError

CANCEL = threading.Event()
# Set (with CANCEL) when the snakemake process that started this job is gone.
ORPHANED = threading.Event()

# "overflow": stopped because its stdout outgrew the capture (`run_managed(stop_on_overflow=True)`).
STATES = ("ok", "failed", "timeout", "killed", "cancelled", "overflow")
READ_CHUNK_BYTES = 8192
CANCEL_POLL_S = 0.1
GROUP_POLL_S = 0.02
READER_JOIN_S = 1.0


@dataclass(frozen=True)
class ProcessResult:
    state: str
    returncode: int | None
    stdout_tail: str
    stderr_tail: str
    duration_s: float
    stdout_capture: bytes | None = None
    stdout_capture_overflow: bool = False
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "ok"


REPEAT_SIGNAL_GRACE_S = 2.0


def install_signal_handlers() -> None:
    """Ignore SIGINT; make SIGTERM request cancellation; a later second SIGTERM interrupts for real.

    Call from the main thread of a job script. SIGINT is ignored because a terminal's first Ctrl-C reaches the
    job through snakemake's process group, and the first Ctrl-C lets running cells finish (`handle_interrupts`
    in the snakemake process turns a second one into SIGTERM for every job). The first SIGTERM lets every
    `run_managed` tear its process group down and the cell end without a record; a repeat means the operator
    wants out now, and the raised exception still kills the current group on its way up. A repeat within a
    moment of the first is the same stop request arriving twice and is ignored.
    """
    first: list[float] = []

    def handler(signum: int, frame: Any) -> None:
        # `first`, not CANCEL, says whether a stop arrived: it is marked before CANCEL.set() takes the Event's
        # lock, so a second SIGTERM whose handler runs nested inside that call (same thread) returns instead of
        # waiting forever on the lock its own thread holds.
        if first:
            if time.monotonic() - first[0] < REPEAT_SIGNAL_GRACE_S:
                return
            raise SystemExit(128 + signum)
        first.append(time.monotonic())
        CANCEL.set()

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, handler)


class _Sink:
    """Drains one pipe into a bounded tail, plus (stdout only) a bounded capture and an observer."""

    def __init__(
        self,
        tail_bytes: int,
        capture_bytes: int | None = None,
        observer: Callable[[bytes], None] | None = None,
    ) -> None:
        self.tail_bytes = tail_bytes
        self.capture_bytes = capture_bytes
        self.observer = observer
        self.lock = threading.Lock()
        self.tail = bytearray()
        self.capture = bytearray() if capture_bytes is not None else None
        self.overflow = False
        # Set once the capture overflowed: the supervisor may stop the process then (`stop_on_overflow`).
        self.overflowed = threading.Event()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.tail.extend(chunk)
            if len(self.tail) > self.tail_bytes:
                del self.tail[: len(self.tail) - self.tail_bytes]
            if self.capture is not None and self.capture_bytes is not None:
                room = self.capture_bytes - len(self.capture)
                if len(chunk) > room:
                    self.overflow = True
                    self.overflowed.set()
                self.capture.extend(chunk[: max(room, 0)])
        if self.observer is not None:
            try:
                self.observer(chunk)
            except Exception:
                # A broken progress reporter must never stall the drain (a full pipe would block the child).
                self.observer = None

    def drain(self, pipe: IO[bytes]) -> None:
        try:
            while chunk := pipe.read1(READ_CHUNK_BYTES):  # type: ignore[attr-defined]
                self.feed(chunk)
        except (OSError, ValueError):
            pass

    def snapshot(self) -> tuple[str, bytes | None, bool]:
        with self.lock:
            tail = bytes(self.tail).decode("utf-8", errors="replace")
            capture = bytes(self.capture) if self.capture is not None else None
            return tail, capture, self.overflow


def _write_stdin(pipe: IO[bytes], data: bytes, errors: list[str]) -> None:
    try:
        pipe.write(data)
        pipe.flush()
    except (OSError, ValueError) as exc:
        errors.append(f"stdin write failed: {type(exc).__name__}: {exc}")
    finally:
        try:
            pipe.close()
        except (OSError, ValueError):
            pass


def _group_has_live_member(pgid: int) -> bool | None:
    """Whether /proc shows a non-zombie member of the group; None when /proc cannot be read."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name is parenthesised and may itself contain spaces or parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Orphaned zombies stay in the group until init reaps them, and some container inits never do;
    # counting them would turn every clean exit into a false "killed".
    alive = _group_has_live_member(pgid) if sys.platform.startswith("linux") else None
    return True if alive is None else alive


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _terminate_group(proc: subprocess.Popen[bytes], grace: float) -> bool:
    """SIGTERM the group, wait up to ``grace`` for it to vanish, else SIGKILL. True when SIGKILL was needed."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    forced = False
    while True:
        # Reap the leader first: an unreaped zombie leader keeps the group alive in the kernel's eyes.
        proc.poll()
        if not _group_alive(pgid):
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _signal_group(pgid, signal.SIGKILL)
            forced = True
            break
        time.sleep(min(GROUP_POLL_S, remaining))
    # The group can look gone while the leader is a zombie not yet reaped; reap it for its returncode.
    try:
        proc.wait(max(1.0, grace))
    except subprocess.TimeoutExpired:
        pass
    return forced


def _abort(proc: subprocess.Popen[bytes]) -> None:
    # Pipes are left to the daemon reader threads: closing a buffered pipe blocks while another thread
    # reads it, and the readers see EOF as soon as the group is gone.
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(1.0)
    except (subprocess.TimeoutExpired, OSError):
        pass


def run_managed(
    argv: list[str],
    *,
    env: dict[str, str],
    timeout: float,
    cwd: str | Path | None = None,
    stdin_data: bytes | None = None,
    capture_stdout_bytes: int | None = None,
    stdout_observer: Callable[[bytes], None] | None = None,
    terminate_grace: float = 5.0,
    tail_bytes: int = 65536,
    cancel: threading.Event | None = None,
    stop_on_overflow: bool = False,
) -> ProcessResult:
    """Run ``argv`` in its own process group and return how it ended; never raises for child behaviour.

    ``cancel`` defaults to the module-wide `CANCEL` event; tests and callers with their own scope may
    pass another one. With ``stop_on_overflow`` a process whose stdout outgrows ``capture_stdout_bytes`` is
    stopped like a timed-out one (state "overflow"): what it would still write is no evidence anyway.
    """
    if not argv:
        raise ValueError("run_managed needs a non-empty argv")
    if not isinstance(env, Mapping):
        raise TypeError("run_managed needs an explicit env mapping; the parent environment is never inherited")
    if timeout <= 0 or terminate_grace < 0 or tail_bytes <= 0:
        raise ValueError("timeout and tail_bytes must be positive and terminate_grace non-negative")
    if capture_stdout_bytes is not None and capture_stdout_bytes <= 0:
        raise ValueError("capture_stdout_bytes must be positive when given")
    if stop_on_overflow and capture_stdout_bytes is None:
        raise ValueError("stop_on_overflow needs capture_stdout_bytes")
    cancel_event = CANCEL if cancel is None else cancel
    started = time.monotonic()

    def result(state: str, returncode: int | None, detail: str | None, stdout: _Sink, stderr: _Sink) -> ProcessResult:
        stdout_tail, capture, overflow = stdout.snapshot()
        stderr_tail, _, _ = stderr.snapshot()
        return ProcessResult(
            state=state,
            returncode=returncode,
            stdout_tail=stdout_tail,
            stderr_tail=stderr_tail,
            duration_s=round(time.monotonic() - started, 3),
            stdout_capture=capture,
            stdout_capture_overflow=overflow,
            detail=detail,
        )

    stdout_sink = _Sink(tail_bytes, capture_stdout_bytes, stdout_observer)
    stderr_sink = _Sink(tail_bytes)
    if cancel_event.is_set():
        return result("cancelled", None, "cancelled before start", stdout_sink, stderr_sink)
    try:
        proc = subprocess.Popen(
            [str(arg) for arg in argv],
            env={str(key): str(value) for key, value in env.items()},
            cwd=cwd,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return result(
            "failed", None, f"could not start {argv[0]}: {type(exc).__name__}: {exc}", stdout_sink, stderr_sink
        )
    if capture_stdout_bytes is not None and proc.stdout is not None:
        _widen_pipe(proc.stdout.fileno())
    try:
        overflowed = stdout_sink.overflowed if stop_on_overflow else None
        return _supervise(
            proc, stdin_data, stdout_sink, stderr_sink, timeout, terminate_grace, (cancel_event, overflowed), result
        )
    except BaseException:
        _abort(proc)
        raise


# Linux's fcntl that sets a pipe's capacity (F_SETPIPE_SZ); and the capacity a captured stdout pipe asks for.
_F_SETPIPE_SZ = 1031
CAPTURE_PIPE_BYTES = 1 << 20


def _widen_pipe(descriptor: int) -> None:
    """Give a captured stdout a pipe of `CAPTURE_PIPE_BYTES` (64 KiB by default): a CLI whose writes find the pipe
    full queues them in its own memory, and one that exits then (a Bun program does) loses what was queued. What the
    machine does not allow (`/proc/sys/fs/pipe-max-size`) leaves the pipe as it is."""
    try:
        fcntl.fcntl(descriptor, _F_SETPIPE_SZ, CAPTURE_PIPE_BYTES)
    except OSError:
        pass


def _supervise(
    proc: subprocess.Popen[bytes],
    stdin_data: bytes | None,
    stdout_sink: _Sink,
    stderr_sink: _Sink,
    timeout: float,
    grace: float,
    stops: tuple[threading.Event, threading.Event | None],
    result: Callable[[str, int | None, str | None, _Sink, _Sink], ProcessResult],
) -> ProcessResult:
    """`stops`: the cancel event, and the event that stops the process on a capture overflow (None: it runs on)."""
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=stdout_sink.drain, args=(proc.stdout,), daemon=True),
        threading.Thread(target=stderr_sink.drain, args=(proc.stderr,), daemon=True),
    ]
    for thread in readers:
        thread.start()
    stdin_errors: list[str] = []
    writer = None
    if stdin_data is not None and proc.stdin is not None:
        writer = threading.Thread(target=_write_stdin, args=(proc.stdin, stdin_data, stdin_errors), daemon=True)
        writer.start()

    interrupted = _wait_for_exit(proc, timeout, *stops)
    if interrupted is not None:
        state, details = _stop_interrupted(proc, interrupted, timeout, grace)
    else:
        state, details = _exit_state(proc.returncode)
        if _group_alive(proc.pid):
            state, details = _kill_leftover_descendants(proc, state, details)
    state, details = _join_readers(proc, readers, grace, state, details)
    state, details = _check_stdin(writer, stdin_errors, state, details)
    return result(state, proc.returncode, "; ".join(details) or None, stdout_sink, stderr_sink)


def _wait_for_exit(
    proc: subprocess.Popen[bytes],
    timeout: float,
    cancel_event: threading.Event,
    overflowed: threading.Event | None = None,
) -> str | None:
    """Wait for the main process; "cancelled", "overflow" or "timeout" when it had to be given up on, else None.

    The kernel says when the process ends (a pidfd becomes readable), so a cell does not lose the tens of
    milliseconds per process that `Popen.wait`'s sleep-and-retry loop would; cancellation and an overflowed
    capture are checked between waits of at most CANCEL_POLL_S."""
    deadline = time.monotonic() + timeout
    exited = _ExitWaiter(proc)
    try:
        while True:
            if cancel_event.is_set():
                return "cancelled"
            if overflowed is not None and overflowed.is_set():
                return "overflow"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if exited(min(CANCEL_POLL_S, remaining)):
                return None
    finally:
        exited.close()


class _ExitWaiter:
    """Waits up to a number of seconds for ``proc`` to end and reaps it: on its pidfd where the kernel has
    them (Linux 5.3+), else with `Popen.wait`."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.poller: select.poll | None = None
        self.descriptor: int | None = None
        try:
            self.descriptor = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            return  # no pidfd here, or the process is already reaped: Popen.wait answers either way
        self.poller = select.poll()
        self.poller.register(self.descriptor, select.POLLIN)

    def __call__(self, seconds: float) -> bool:
        if self.poller is not None and not self.poller.poll(max(0, int(seconds * 1000))):
            return False
        try:
            self.proc.wait(0 if self.poller is not None else seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


def _stop_interrupted(
    proc: subprocess.Popen[bytes], interrupted: str, timeout: float, grace: float
) -> tuple[str, list[str]]:
    """Take the process group of a cancelled, overflowing or timed-out process down; (state, details)."""
    details = [
        {"cancelled": "cancelled", "overflow": "stopped: its stdout outgrew the capture"}.get(
            interrupted, f"timed out after {timeout:g}s"
        )
    ]
    if _terminate_group(proc, grace):
        details.append(f"process group still alive {grace:g}s after SIGTERM; sent SIGKILL")
    return interrupted, details


def _exit_state(returncode: int | None) -> tuple[str, list[str]]:
    """(state, details) of a main process that ended on its own."""
    if returncode is not None and returncode < 0:
        return "killed", [f"terminated by signal {-returncode}"]
    if returncode == 0:
        return "ok", []
    # (wait() has set a return code by now; None would count as a failure without a status.)
    return "failed", [f"exited with status {returncode}"] if returncode else []


def _kill_leftover_descendants(proc: subprocess.Popen[bytes], state: str, details: list[str]) -> tuple[str, list[str]]:
    # A descendant that closed its pipes would otherwise outlive the cell unnoticed.
    _signal_group(proc.pid, signal.SIGKILL)
    # A non-zero exit stays "failed": the child's own failure is the primary cause.
    return _worsened(state, "killed"), [*details, "descendants outlived the main process; killed its process group"]


def _join_readers(
    proc: subprocess.Popen[bytes], readers: list[threading.Thread], grace: float, state: str, details: list[str]
) -> tuple[str, list[str]]:
    """Wait for the output readers; a pipe held open from outside the group is killed, then reported."""
    for thread in readers:
        thread.join(READER_JOIN_S)
    if not any(thread.is_alive() for thread in readers):
        return state, details
    # Something outside the group (it started its own session) still holds our pipes.
    _signal_group(proc.pid, signal.SIGKILL)
    join_deadline = time.monotonic() + max(1.0, grace)
    for thread in readers:
        thread.join(max(0.0, join_deadline - time.monotonic()))
    if any(thread.is_alive() for thread in readers):
        note = "output pipes stayed open after the process group ended; output may be incomplete"
        return _worsened(state, "killed"), [*details, note]
    return state, details


def _check_stdin(
    writer: threading.Thread | None, stdin_errors: list[str], state: str, details: list[str]
) -> tuple[str, list[str]]:
    """An undelivered prompt means the child worked on something else: never report success."""
    if writer is not None:
        writer.join(READER_JOIN_S)
        if writer.is_alive():
            details = [*details, "stdin writer still blocked after the process ended"]
            state = _worsened(state, "failed")
    if stdin_errors:
        details = [*details, *stdin_errors]
        state = _worsened(state, "failed")
    return state, details


def _worsened(state: str, problem: str) -> str:
    """`problem` replaces "ok"; an earlier failure stays the state, as the primary cause."""
    return problem if state == "ok" else state


def descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from /proc (works without CONFIG_PROC_CHILDREN)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


# In the snakemake process: set once the operator asked the run to stop (Ctrl-C, SIGTERM).
INTERRUPTED = threading.Event()
DRAIN_MESSAGE = (
    "skillbench: interrupted. No new cell starts; the running cells finish and keep their records "
    "(their sessions are paid for). Press Ctrl-C again to stop them now: their sessions are lost and "
    "run again next time."
)


def _stop_descendants() -> None:
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


class SaidOnce(logging.Filter):
    """Lets through the first log record whose message starts with ``prefix`` and drops the rest: Snakemake's
    scheduler logs "Will exit after finishing currently running jobs" each time a job ends after a Ctrl-C, once
    per running job, where once says it."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self._said = threading.Event()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        if not message.startswith(self.prefix):
            return True
        if self._said.is_set():
            return False
        self._said.set()
        return True


# Snakemake's line after the first Ctrl-C (its scheduler repeats it as each running job ends).
SNAKEMAKE_DRAIN_LINE = "Will exit after finishing currently running jobs"


def handle_interrupts(stream: IO[str] | None = None) -> None:
    """In the snakemake process: the first Ctrl-C drains the run, a second one stops it; SIGTERM stops it.

    A session that already ran is money spent, so the first SIGINT only tells Snakemake's scheduler to start
    no new job and wait for the running ones (its own SIGTERM handler, "exit after finishing currently running
    jobs"): running cells finish and write their records. Job scripts ignore SIGINT (`install_signal_handlers`),
    so the terminal's Ctrl-C, which reaches the whole foreground process group, does not cancel them. A second
    SIGINT, or a SIGTERM, sends SIGTERM to every descendant — job scripts cancel their sessions and end without
    a record — and then lets Snakemake handle the signal as usual. A process started with SIGINT ignored (a
    background job of a non-interactive shell) keeps ignoring it; stop such a run with SIGTERM.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    stream = stream or sys.stderr
    previous_int, previous_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def pass_on(previous: object, signum: int, frame: FrameType | None) -> None:
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if not INTERRUPTED.is_set() and callable(previous_term):
            INTERRUPTED.set()
            print(DRAIN_MESSAGE, file=stream, flush=True)
            previous_term(signal.SIGTERM, frame)
            return
        INTERRUPTED.set()
        _stop_descendants()
        pass_on(previous_int, signum, frame)

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        INTERRUPTED.set()
        _stop_descendants()
        pass_on(previous_term, signum, frame)

    if previous_int != signal.SIG_IGN:
        signal.signal(signal.SIGINT, on_interrupt)
    signal.signal(signal.SIGTERM, on_terminate)


# ─── Dying with snakemake ───────────────────────────────────────────────────

PARENT_POLL_S = 1.0
MAX_WATCHED_ANCESTORS = 4


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def _identity(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): a pid reused by another process differs."""
    fields = _proc_stat(pid)
    return fields[19] if fields else None


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None when it is gone: with the pid, it names one
    process even after the pid is reused."""
    return _identity(pid)


def is_running(pid: int, ticks: str | None) -> bool:
    """Whether the process ``pid`` that started at ``ticks`` is still alive (not a zombie, not a reused pid)."""
    now = _identity(pid)
    return now is not None and (ticks is None or now == ticks)


def _is_snakemake(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")[:4]
    except OSError:
        return False
    return any(os.path.basename(arg) == b"snakemake" or arg == b"snakemake" for arg in argv)


def watched_ancestors(max_depth: int = MAX_WATCHED_ANCESTORS) -> list[tuple[int, str]]:
    """(pid, start time) of the ancestors whose death orphans this job: from the parent up to the nearest
    snakemake process. Under Snakemake 9's local executor a job script's parent IS snakemake; a job step
    on a cluster runs under `python -m snakemake`. Without a snakemake within reach, the parent alone:
    ancestors above snakemake (the shell that started it, say) may end while the run goes on."""
    chain: list[tuple[int, str]] = []
    pid = os.getppid()
    for _ in range(max_depth):
        if pid <= 1:
            break
        fields = _proc_stat(pid)
        if fields is None:
            break
        chain.append((pid, fields[19]))
        if _is_snakemake(pid):
            return chain
        pid = int(fields[1])
    return chain[:1]


def watch_parent(interval: float = PARENT_POLL_S, stream: IO[str] | None = None) -> threading.Thread | None:
    """Cancel this job (CANCEL and ORPHANED) as soon as the snakemake that started it is gone.

    A SIGKILLed snakemake cannot forward anything, and its running job scripts would go on paying for
    sessions and writing into cells a rerun starts again. Call once from a job script's main thread;
    `run_managed` then tears the current process group down and the cell ends without a record.
    """
    chain = watched_ancestors()
    if not chain:
        return None
    parent = os.getppid()

    def watch() -> None:
        while not CANCEL.wait(interval):
            gone = [pid for pid, started in chain if _identity(pid) != started]
            if gone or os.getppid() != parent:
                ORPHANED.set()
                CANCEL.set()
                try:
                    print(
                        f"[skillbench] the snakemake process that started this job (pid {chain[-1][0]}) is gone: "
                        "stopping this job's sessions; it writes no record, so the next run redoes it",
                        file=stream or sys.stderr,
                        flush=True,
                    )
                except (OSError, ValueError):
                    pass
                return

    thread = threading.Thread(target=watch, name="skillbench-parent-watch", daemon=True)
    thread.start()
    return thread


# ─── What a killed job leaves behind ────────────────────────────────────────

# A process stamp (`process_stamp`), as a pattern with its three parts named.
STAMP_PATTERN = r"(?P<namespace>[0-9a-f]+)-(?P<pid>[0-9a-f]+)-(?P<start>[0-9a-f]+)"


def _start_time(pid: int | str) -> int | None:
    """When process `pid` ("self" too) started, in clock ticks since boot; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command's closing parenthesis: state is field 3 of stat(5), starttime field 22.
    return int(fields[19]) if len(fields) > 19 else None


def process_stamp() -> str | None:
    """`<pid namespace>-<pid>-<start time>` in hex: this process among every process of this boot (None when /proc
    does not say). What a job names after it (a private root, a cgroup) can be told apart from what a process that is
    gone left (`stamp_orphaned`). Short, because a Unix socket's path has at most 107 bytes."""
    start = _start_time("self")
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{namespace:x}-{os.getpid():x}-{start:x}" if start is not None else None


def stamp_orphaned(namespace: str, pid: str, start: str) -> bool:
    """Whether the process a stamp's parts (hex) name is gone, or its pid is another process's now. False for a stamp
    of another pid namespace: its process cannot be seen from here, so what it left must be left alone."""
    try:
        if int(namespace, 16) != os.stat("/proc/self/ns/pid").st_ino:
            return False
    except OSError:
        return False
    return _start_time(int(pid, 16)) != int(start, 16)


# ─── One writer per folder ──────────────────────────────────────────────────

WRITER_WAIT_S = 30.0


class WriterBusy(SkillbenchError, RuntimeError):
    """Another live process holds the folder's writer lock."""


@contextmanager
def exclusive_writer(
    lock_path: Path, *, what: str, wait_s: float = WRITER_WAIT_S, poll_s: float = 0.2
) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` for the block; wait up to `wait_s` for a holder to go, then fail.

    The lock dies with its holder (the kernel drops it when the process does), so a crash never leaves
    a stale lock behind. The descriptor is not inherited by child processes.
    """
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline or CANCEL.is_set():
                    try:
                        holder = os.pread(descriptor, 64, 0).decode("ascii", errors="replace").strip() or "unknown"
                    except OSError:
                        holder = "unknown"
                    raise WriterBusy(
                        f"{what} is being written by another process (pid {holder}, lock {lock_path}), still after "
                        f"{wait_s:g}s; two writers would corrupt it. Stop that process (a job of an earlier, crashed "
                        "snakemake?) or wait for it to end, then rerun"
                    ) from None
                time.sleep(poll_s)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(descriptor)
