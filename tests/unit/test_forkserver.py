"""The step server: a job handed over runs in a forked child with the job's own process state; signals keep their
meaning; only a direct child of the server's parent, for the server's own shim, is served. Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from skillbench.base import forkserver

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
WAIT_S = 60.0

SHIM = """
import sys

from skillbench.base.forkserver import hand_over

if (status := hand_over(__file__, sys.argv[1:])) is not None:
    sys.exit(status)

import json
import os
import signal
import time
from pathlib import Path

if sys.argv[1] == "report":
    mask = os.umask(0)
    print(json.dumps({"arguments": sys.argv[1:], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"),
                      "umask": mask, "parent": os.getppid(), "pid": os.getpid()}), flush=True)
    sys.exit(int(sys.argv[2]))

def stopped(signum, frame):
    Path(sys.argv[2]).write_text(f"SIGTERM in {os.getpid()}")
    sys.exit(7)

signal.signal(signal.SIGTERM, stopped)
print("waiting", flush=True)
time.sleep(WAIT)
""".replace("WAIT", str(WAIT_S * 2))


@pytest.fixture
def shim(tmp_path):
    path = tmp_path / "shim.py"
    path.write_text(SHIM)
    return path


@pytest.fixture
def server(shim):
    started = forkserver.launch(shim, sys.executable, SCRIPTS)
    assert started is not None
    yield started
    started.stop()


def job_env(server: forkserver.StepServer | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), **extra}
    env.pop(forkserver.ADDRESS_ENV, None)
    if server is not None:
        env[forkserver.ADDRESS_ENV] = server.address
    return env


def report(command: list[str], env: dict[str, str], cwd: Path, umask: int = -1) -> tuple[int, dict]:
    done = subprocess.run(command, env=env, cwd=cwd, umask=umask, capture_output=True, text=True, timeout=WAIT_S)
    return done.returncode, json.loads(done.stdout)


def test_a_handed_over_job_runs_in_a_child_of_the_server_with_the_jobs_own_state(server, shim, tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    command = [sys.executable, str(shim), "report", "3", "a 'quoted' $argument"]
    code, seen = report(command, job_env(server, PROBE="the job's value"), folder, umask=0o027)
    assert seen["parent"] == server.process.pid
    assert code == 3
    assert seen["arguments"] == ["report", "3", "a 'quoted' $argument"]
    assert seen["cwd"] == str(folder)
    assert seen["probe"] == "the job's value"
    assert seen["umask"] == 0o027


def test_without_a_server_the_shim_runs_the_job_itself(shim, tmp_path):
    code, seen = report([sys.executable, str(shim), "report", "0"], job_env(None, PROBE="x"), tmp_path)
    assert code == 0 and seen["parent"] == os.getpid() and seen["probe"] == "x"


def test_a_process_that_is_not_a_direct_child_of_the_servers_parent_is_refused(server, shim, tmp_path):
    # `sh` does not exec the python here (a command follows it): python is a grandchild, as any process a job
    # starts (a session, a sandbox, an agent) would be.
    command = ["sh", "-c", f'"{sys.executable}" "{shim}" report 0; exit $?']
    code, seen = report(command, job_env(server), tmp_path)
    assert code == 0
    assert seen["parent"] not in (server.process.pid, os.getpid())


def test_a_request_for_another_script_is_refused(server, shim, tmp_path):
    other = tmp_path / "other.py"
    other.write_text(shim.read_text())
    code, seen = report([sys.executable, str(other), "report", "0"], job_env(server), tmp_path)
    assert code == 0 and seen["parent"] == os.getpid()


def waiting_job(server, shim, marker: Path) -> subprocess.Popen[str]:
    job = subprocess.Popen(
        [sys.executable, str(shim), "wait", str(marker)], env=job_env(server), stdout=subprocess.PIPE, text=True
    )
    assert job.stdout is not None and job.stdout.readline() == "waiting\n"
    return job


def wait_for(path: Path) -> str:
    deadline = time.monotonic() + WAIT_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.read_text()


def test_sigterm_to_the_job_reaches_its_child_and_the_childs_status_is_the_jobs(server, shim, tmp_path):
    marker = tmp_path / "stopped"
    job = waiting_job(server, shim, marker)
    job.send_signal(signal.SIGTERM)
    assert job.wait(WAIT_S) == 7
    assert wait_for(marker).startswith("SIGTERM in ") and marker.read_text() != f"SIGTERM in {job.pid}"


def test_a_killed_job_process_has_its_child_stopped(server, shim, tmp_path):
    marker = tmp_path / "stopped"
    job = waiting_job(server, shim, marker)
    job.kill()
    job.wait(WAIT_S)
    assert wait_for(marker).startswith("SIGTERM in ")


def test_stopping_the_server_stops_its_running_children_first_and_removes_its_socket(server, shim, tmp_path):
    marker = tmp_path / "stopped"
    job = waiting_job(server, shim, marker)
    server.stop()
    assert wait_for(marker).startswith("SIGTERM in ")
    assert job.wait(WAIT_S) == 7  # the status still reached the job: the server ended after its child
    assert server.process.returncode == 0
    assert not Path(server.folder).exists()


def test_the_server_ends_once_the_process_that_started_it_is_gone(shim, tmp_path):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from skillbench.base import forkserver; "
            f"s = forkserver.launch(Path({str(shim)!r}), sys.executable, Path({str(SCRIPTS)!r})); "
            "print(s.process.pid, flush=True); time.sleep(600)",
        ],
        env=job_env(None),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that does not reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
