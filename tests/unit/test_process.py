"""run_managed: process groups, timeouts, bounded output, stdin, cancellation, leftover descendants."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from skillbench.base import process
from skillbench.base.process import run_managed

ENV = {"PATH": "/usr/bin:/bin"}


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def wait_for(path: Path, seconds: float = 60.0) -> None:
    """Until `path` exists (a generous bound: a loaded machine is slow, never wrong)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.01)


# Child code that publishes a file whole: written beside it, then renamed into place, so a reader that sees the
# name reads the complete content, never a half-written one.
PUBLISH = """
import os
def publish(path, text):
    with open(path + ".part", "w") as handle:
        handle.write(text)
    os.replace(path + ".part", path)
"""


# A grandchild that proves it started, then would write a sentinel later unless it is killed first.
GRANDCHILD = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[1]).write_text("started")
time.sleep(float(sys.argv[3]))
pathlib.Path(sys.argv[2]).write_text("survived")
"""


def spawn_grandchild_code(started: Path, sentinel: Path, delay: float) -> str:
    return f"""
    import subprocess, sys, pathlib, time
    subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}, {str(started)!r}, {str(sentinel)!r}, "{delay}"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not pathlib.Path({str(started)!r}).exists():
        time.sleep(0.01)
    """


def test_ok_exit_keeps_tails():
    result = run_managed(py("import sys; print('out'); print('err', file=sys.stderr)"), env=ENV, timeout=10)
    assert result.state == "ok" and result.ok
    assert result.returncode == 0
    assert result.stdout_tail == "out\n"
    assert result.stderr_tail == "err\n"
    assert result.stdout_capture is None
    assert result.detail is None


def test_environment_is_exactly_the_one_given(monkeypatch):
    monkeypatch.setenv("SKILLBENCH_PARENT_ONLY", "leak")
    result = run_managed(
        py("import os; print(os.environ.get('SKILLBENCH_PARENT_ONLY'), os.environ.get('FOO'))"),
        env={"FOO": "bar"},
        timeout=10,
    )
    assert result.stdout_tail.strip() == "None bar"


def test_env_must_be_explicit():
    with pytest.raises(TypeError):
        run_managed(py("pass"), env=None, timeout=10)  # type: ignore[arg-type]


def test_non_zero_exit_is_failed():
    result = run_managed(py("import sys; sys.stderr.write('boom'); sys.exit(3)"), env=ENV, timeout=10)
    assert result.state == "failed" and not result.ok
    assert result.returncode == 3
    assert result.stderr_tail == "boom"


def test_death_by_signal_is_killed():
    result = run_managed(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), env=ENV, timeout=10)
    assert result.state == "killed"
    assert result.returncode == -signal.SIGKILL


def test_timeout_kills_a_sigterm_ignoring_child_and_its_grandchild(tmp_path):
    started, sentinel = tmp_path / "started", tmp_path / "sentinel"
    code = (
        spawn_grandchild_code(started, sentinel, 1.5)
        + """
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    """
    )
    began = time.monotonic()
    result = run_managed(py(code), env=ENV, timeout=1.0, terminate_grace=0.3)
    assert result.state == "timeout" and not result.ok
    assert time.monotonic() - began < 5
    assert "SIGKILL" in result.detail
    assert started.exists(), "the grandchild must have run for this test to mean anything"
    time.sleep(2.0)
    assert not sentinel.exists()


def test_cooperative_child_exits_within_grace_without_sigkill():
    result = run_managed(py("import time; time.sleep(60)"), env=ENV, timeout=0.5, terminate_grace=5.0)
    assert result.state == "timeout"
    assert result.returncode == -signal.SIGTERM
    assert "SIGKILL" not in result.detail
    assert result.duration_s < 3


@pytest.mark.parametrize(("exit_code", "state"), [(0, "killed"), (4, "failed")])
def test_detached_grandchild_left_after_exit_is_killed(tmp_path, exit_code, state):
    started, sentinel = tmp_path / "started", tmp_path / "sentinel"
    code = spawn_grandchild_code(started, sentinel, 1.0) + f"\n    sys.exit({exit_code})\n"
    result = run_managed(py(code), env=ENV, timeout=10)
    assert result.returncode == exit_code
    assert result.state == state and not result.ok
    assert "descendants" in result.detail
    assert started.exists()
    time.sleep(1.5)
    assert not sentinel.exists()


@pytest.mark.parametrize(("exit_code", "state"), [(0, "killed"), (3, "failed")])
def test_output_held_open_outside_the_group_is_reported_and_never_ok(tmp_path, exit_code, state):
    """A descendant in a session of its own is out of the group's reach but may keep our pipes open."""
    holder_pid = tmp_path / "holder.pid"
    code = f"""
    import pathlib, subprocess, sys
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    pathlib.Path({str(holder_pid)!r}).write_text(str(holder.pid))
    sys.exit({exit_code})
    """
    try:
        result = run_managed(py(code), env=ENV, timeout=10, terminate_grace=0)
    finally:
        if holder_pid.exists():
            os.kill(int(holder_pid.read_text()), signal.SIGKILL)
    assert result.returncode == exit_code
    assert result.state == state and not result.ok
    assert "output pipes stayed open" in result.detail


def test_an_already_exited_grandchild_is_not_a_leftover():
    # The grandchild exits at once and is never waited for: an unreaped orphan zombie is not a live process.
    code = """
    import subprocess, time
    subprocess.Popen(["/bin/true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    """
    result = run_managed(py(code), env=ENV, timeout=10)
    assert result.state == "ok", result.detail


def test_tail_is_bounded_and_ends_with_the_last_bytes():
    code = "import sys; sys.stdout.write('x' * 200000 + 'END'); sys.stderr.write('y' * 50000 + 'ERR')"
    result = run_managed(py(code), env=ENV, timeout=10, tail_bytes=1000)
    assert len(result.stdout_tail) == 1000 and result.stdout_tail.endswith("xEND")
    assert len(result.stderr_tail) == 1000 and result.stderr_tail.endswith("yERR")


def test_capture_keeps_the_exact_payload():
    result = run_managed(py("import sys; sys.stdout.write('a' * 5000)"), env=ENV, timeout=10, capture_stdout_bytes=5000)
    assert result.stdout_capture == b"a" * 5000
    assert result.stdout_capture_overflow is False


def test_a_process_that_floods_past_its_capture_is_stopped_when_asked():
    # It would write for minutes; past the capture's bound it is stopped, like a timed-out one, within moments.
    code = (
        "import sys, time\nwhile True:\n    sys.stdout.write('x' * 4096 + '\\n'); sys.stdout.flush(); time.sleep(0.001)"
    )
    started = time.monotonic()
    result = run_managed(py(code), env=ENV, timeout=120, capture_stdout_bytes=64 * 1024, stop_on_overflow=True)
    assert result.state == "overflow" and result.stdout_capture_overflow is True
    assert "outgrew the capture" in (result.detail or "")
    assert len(result.stdout_capture or b"") == 64 * 1024
    assert time.monotonic() - started < 60
    with pytest.raises(ValueError, match="needs capture_stdout_bytes"):
        run_managed(py("pass"), env=ENV, timeout=1, stop_on_overflow=True)


def test_capture_overflow_is_flagged_and_draining_continues():
    code = "import sys; sys.stdout.write('0123456789' * 100000 + 'END')"
    result = run_managed(py(code), env=ENV, timeout=10, capture_stdout_bytes=100, tail_bytes=64)
    assert result.state == "ok"
    assert result.stdout_capture == b"0123456789" * 10
    assert result.stdout_capture_overflow is True
    assert result.stdout_tail.endswith("END")


def test_stdin_is_delivered_and_closed():
    payload = ("prompt ✓ " * 20000).encode()
    code = "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(f'{len(data)} '.encode() + data[:10])"
    result = run_managed(py(code), env=ENV, timeout=10, stdin_data=payload)
    assert result.state == "ok"
    assert result.stdout_tail == f"{len(payload)} prompt ✓"


def test_stdin_not_delivered_is_never_ok():
    code = "import os, time; os.close(0); time.sleep(0.3)"
    result = run_managed(py(code), env=ENV, timeout=10, stdin_data=b"x" * (4 * 1024 * 1024))
    assert result.returncode == 0
    assert result.state == "failed"
    assert "stdin write failed" in result.detail


def test_observer_sees_every_byte_and_a_failing_observer_never_stops_draining():
    seen = bytearray()
    result = run_managed(
        py("import sys; sys.stdout.write('z' * 100000)"), env=ENV, timeout=10, stdout_observer=seen.extend
    )
    assert bytes(seen) == b"z" * 100000

    calls = []

    def broken(chunk: bytes) -> None:
        calls.append(chunk)
        raise RuntimeError("observer bug")

    result = run_managed(
        py("import sys; sys.stdout.write('z' * 100000 + 'END')"), env=ENV, timeout=10, stdout_observer=broken
    )
    assert result.state == "ok"
    assert len(calls) == 1
    assert result.stdout_tail.endswith("END")


def test_cancel_event_tears_the_group_down_fast(tmp_path):
    started, sentinel = tmp_path / "started", tmp_path / "sentinel"
    code = (
        spawn_grandchild_code(started, sentinel, 1.0)
        + """
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    """
    )
    cancel = threading.Event()
    threading.Thread(target=lambda: (wait_for(started), cancel.set()), daemon=True).start()
    began = time.monotonic()
    result = run_managed(py(code), env=ENV, timeout=60, terminate_grace=0.2, cancel=cancel)
    assert result.state == "cancelled" and not result.ok
    assert time.monotonic() - began < 5
    time.sleep(1.5)
    assert not sentinel.exists()


def test_module_cancel_event_is_the_default(tmp_path):
    marker = tmp_path / "ran"
    process.CANCEL.set()
    try:
        result = run_managed(py(f"open({str(marker)!r}, 'w').close()"), env=ENV, timeout=10)
    finally:
        process.CANCEL.clear()
    assert result.state == "cancelled"
    assert result.returncode is None
    assert not marker.exists(), "a cancelled run must not start the child"


def test_job_scripts_ignore_ctrl_c_and_cancel_on_sigterm():
    """The terminal's first Ctrl-C reaches job scripts too; only snakemake's SIGTERM (second Ctrl-C) cancels."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        process.install_signal_handlers()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert not process.CANCEL.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert process.CANCEL.is_set()
        # The same stop request arriving twice is one request.
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        time.sleep(process.REPEAT_SIGNAL_GRACE_S)
        with pytest.raises(SystemExit):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        process.CANCEL.clear()


def test_a_sigterm_landing_inside_the_first_ones_handler_does_not_deadlock_the_job():
    """Two SIGTERMs may reach a job within microseconds (a second Ctrl-C's to every descendant, and another from
    anyone). The second may run its handler while the first handler holds CANCEL's lock."""
    previous = signal.getsignal(signal.SIGTERM)
    real_condition = process.CANCEL._cond
    outcome: list[str] = []

    class SignalInsideTheLock:
        # Runs the handler again while the lock is held, as a signal delivered at that moment would.
        def __enter__(self):
            real_condition.__enter__()
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

        def __exit__(self, *exc):
            return real_condition.__exit__(*exc)

        def notify_all(self):
            real_condition.notify_all()

    def first_stop():
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        outcome.append("returned")

    stopper = threading.Thread(target=first_stop, daemon=True)
    try:
        process.install_signal_handlers()
        process.CANCEL._cond = SignalInsideTheLock()
        stopper.start()
        stopper.join(30)
        assert outcome == ["returned"], "the nested SIGTERM waited on the lock its own thread held"
        assert process.CANCEL.is_set()
    finally:
        # A deadlocked stopper keeps the real lock forever: the tests after this one get a fresh one.
        process.CANCEL._cond = threading.Condition(threading.Lock()) if stopper.is_alive() else real_condition
        signal.signal(signal.SIGTERM, previous)
        process.CANCEL.clear()


def test_first_ctrl_c_drains_second_stops(capsys):
    """In the snakemake process: the first SIGINT asks the scheduler to finish running jobs, the second stops."""
    calls: list[str] = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}

    def scheduler_graceful(signum, frame):
        calls.append("graceful")

    def default_interrupt(signum, frame):
        calls.append("interrupt")

    try:
        signal.signal(signal.SIGTERM, scheduler_graceful)
        signal.signal(signal.SIGINT, default_interrupt)
        process.handle_interrupts()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert calls == ["graceful"] and process.INTERRUPTED.is_set()
        assert "Press Ctrl-C again" in capsys.readouterr().err
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert calls == ["graceful", "interrupt"]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        process.INTERRUPTED.clear()


def test_a_run_started_with_sigint_ignored_keeps_ignoring_it():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        process.handle_interrupts()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        process.INTERRUPTED.clear()


def test_interrupt_during_the_wait_kills_the_group_and_reraises(tmp_path):
    started, sentinel = tmp_path / "started", tmp_path / "sentinel"
    code = spawn_grandchild_code(started, sentinel, 1.0) + "\n    time.sleep(60)\n"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        threading.Thread(target=lambda: (wait_for(started), os.kill(os.getpid(), signal.SIGALRM)), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_managed(py(code), env=ENV, timeout=60)
    finally:
        signal.signal(signal.SIGALRM, previous)
    time.sleep(1.5)
    assert not sentinel.exists()


def test_spawn_failure_is_failed_with_detail(tmp_path):
    result = run_managed([str(tmp_path / "no-such-binary")], env=ENV, timeout=10)
    assert result.state == "failed"
    assert result.returncode is None
    assert "FileNotFoundError" in result.detail


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError):
        run_managed([], env=ENV, timeout=10)
    with pytest.raises(ValueError):
        run_managed(py("pass"), env=ENV, timeout=0)
    with pytest.raises(ValueError):
        run_managed(py("pass"), env=ENV, timeout=1, capture_stdout_bytes=0)


# ─── Dying with snakemake; one writer per folder ────────────────────────────

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_job_whose_snakemake_is_killed_stops_its_sessions_and_says_so(tmp_path):
    """A stand-in `snakemake` (python under that name) starts, through a shell that outlives it, a job that
    runs a long child; SIGKILL the stand-in, and the job cancels the child's whole group and exits."""
    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.symlink_to(sys.executable)
    child_pid, outcome = tmp_path / "child.pid", tmp_path / "outcome"
    code = PUBLISH + f"import time\npublish({str(child_pid)!r}, str(os.getpid()))\ntime.sleep(120)\n"
    job = PUBLISH + textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SCRIPTS!r})
        from skillbench.base import process
        chain = [pid for pid, _ in process.watched_ancestors()]
        publish({str(tmp_path / "chain")!r}, " ".join(map(str, chain)))
        process.watch_parent(interval=0.1, stream=sys.stdout)
        result = process.run_managed([sys.executable, "-c", {code!r}], env={{"PATH": "/usr/bin:/bin"}}, timeout=300)
        publish({str(outcome)!r}, f"{{result.state}} orphaned={{process.ORPHANED.is_set()}}")
    """)
    shell = f"{sys.executable} -c {shlex.quote(job)}; true"
    starter = f"import subprocess, time; subprocess.Popen(['/bin/sh', '-c', {shell!r}]); time.sleep(300)"
    parent = __import__("subprocess").Popen([str(fake), "-c", starter])
    try:
        wait_for(child_pid)
        child = int(child_pid.read_text())
        assert alive(child)
        chain = [int(pid) for pid in (tmp_path / "chain").read_text().split()]  # published before the child started
        assert len(chain) == 2 and chain[1] == parent.pid  # the shell, then the snakemake above it
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        wait_for(outcome)
        assert outcome.read_text() == "cancelled orphaned=True"
        deadline = time.monotonic() + 60
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_without_a_snakemake_ancestor_only_the_parent_is_watched():
    # A child of this test process: its parent is alive and is no snakemake (pytest's own parent may be
    # init when the suite runs detached, and init is never watched).
    child = __import__("subprocess").run(
        py(f"""
        import sys
        sys.path.insert(0, {SCRIPTS!r})
        from skillbench.base import process
        print([pid for pid, _ in process.watched_ancestors()])
    """),
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == f"[{os.getpid()}]"


def test_a_second_writer_waits_then_fails_naming_the_holder_and_gets_the_lock_once_the_holder_dies(tmp_path):
    lock = tmp_path / "cells" / ".run0.lock"
    ready = tmp_path / "ready"
    holder = __import__("subprocess").Popen(
        py(f"""
        import sys, time
        sys.path.insert(0, {SCRIPTS!r})
        from skillbench.base.process import exclusive_writer
        with exclusive_writer(__import__("pathlib").Path({str(lock)!r}), what="cell run0"):
            open({str(ready)!r}, "w").close()
            time.sleep(120)
    """)
    )
    try:
        wait_for(ready)
        started = time.monotonic()
        with pytest.raises(process.WriterBusy) as error:
            with process.exclusive_writer(lock, what="cell run0", wait_s=0.5):
                pass
        assert time.monotonic() - started >= 0.5
        message = str(error.value)
        assert f"cell run0 is being written by another process (pid {holder.pid}, lock {lock})" in message
        holder.kill()  # the kernel drops a dead holder's lock: no stale lock after a crash
        holder.wait()
        with process.exclusive_writer(lock, what="cell run0", wait_s=5):
            assert lock.read_text() == f"{os.getpid()}\n"
    finally:
        if holder.poll() is None:
            holder.kill()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_waiting_for_many_processes_leaves_no_descriptor_behind():
    before = _open_descriptors()
    for _ in range(25):
        assert run_managed(["true"], env=ENV, timeout=60).state == "ok"
    assert run_managed(["sleep", "30"], env=ENV, timeout=0.2).state == "timeout"
    # Pipes close when their reader threads and the Popen object let go of them: soon, not at once.
    deadline = time.monotonic() + 60
    while _open_descriptors() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_descriptors() == before


def test_without_pidfds_exits_timeouts_and_cancellation_still_work(monkeypatch, tmp_path):
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    ok = run_managed(py("print('done')"), env=ENV, timeout=60)
    assert (ok.state, ok.returncode, ok.stdout_tail.strip()) == ("ok", 0, "done")
    assert run_managed(["sleep", "30"], env=ENV, timeout=0.3).state == "timeout"
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    assert run_managed(["sleep", "30"], env=ENV, timeout=60, cancel=cancel).state == "cancelled"


def test_snakemakes_drain_line_is_said_once():
    """Snakemake's scheduler logs its line after a Ctrl-C each time a running job ends; the run prints it once."""
    import logging

    logger = logging.getLogger("test-said-once")
    logger.propagate = False
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger.addHandler(Collect())
    logger.setLevel(logging.INFO)
    logger.addFilter(process.SaidOnce(process.SNAKEMAKE_DRAIN_LINE))
    for _ in range(3):
        logger.info("Will exit after finishing currently running jobs (scheduler).")
        logger.info("Finished job %d.", 7)
    assert seen == ["Will exit after finishing currently running jobs (scheduler)."] + ["Finished job 7."] * 3
