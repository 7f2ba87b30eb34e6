"""Disk quotas: a session job's private roots are tmpfs quotas in a mount namespace of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from skillbench.base import process
from skillbench.execution import quota

LIBRARY = Path(__file__).resolve().parents[2] / "scripts"


def run_job(body: str) -> subprocess.CompletedProcess:
    """Run `body` as a fresh single-threaded job process (a test process must keep its own namespaces)."""
    script = "from pathlib import Path\nfrom skillbench.execution import quota\n" + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(LIBRARY)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_quota_stops_writes_inside_it_and_nothing_of_it_reaches_the_host(tmp_path):
    marker = tmp_path / "root.txt"
    result = run_job(
        f"""
        import errno, os
        quota.enter_private_mounts()
        with quota.private_root("skillbench-test-quota-", 4) as root:
            Path({str(marker)!r}).write_text(str(root))
            (root / "small").write_bytes(b"x" * 1024 * 1024)
            try:
                (root / "big").write_bytes(b"x" * 8 * 1024 * 1024)
            except OSError as exc:
                print("refused", errno.errorcode[exc.errno])
            print("full", quota.is_full(root), "used", quota.usage_bytes(root) >= 4 * 1024 * 1024 - 65536)
            # The job's own view has the mount; the host's does not.
            print("mounted", any(str(root) in line for line in open("/proc/self/mounts")))
            print("host", any(str(root) in line for line in open(f"/proc/{{os.getppid()}}/mounts")))
        print("removed", not root.exists())
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == ["refused ENOSPC", "full True used True", "mounted True", "host False", "removed True"]
    root = Path(marker.read_text())
    assert not root.exists()
    assert not any(str(root) in line for line in Path("/proc/self/mounts").read_text().splitlines())


def test_a_quota_needs_the_private_mount_namespace_first():
    result = run_job(
        """
        try:
            with quota.private_root("skillbench-test-quota-", 4):
                print("made")
        except quota.QuotaError as exc:
            print("refused:", exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused:") and "sandbox.limits.disk_mb" in result.stdout


def test_without_a_quota_the_private_root_is_a_plain_folder_removed_after_use():
    with quota.private_root("skillbench-test-quota-", 0) as root:
        (root / "file").write_text("x")
        assert root.is_dir()
    assert not root.exists()


THREADED_JOB = """
import subprocess, sys, threading, time
from skillbench.execution import quota
threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
try:
    quota.enter_private_mounts()
except quota.QuotaError as exc:
    print("refused:", exc)
    sys.exit(0)
with quota.private_root("skillbench-test-quota-", 1) as root:
    probe = subprocess.run(["df", "--output=size", str(root)], capture_output=True, text=True)
    print("quota", probe.stdout.split()[-1])
"""


def run_threaded_job(as_root: bool) -> str:
    command = [sys.executable, "-c", THREADED_JOB]
    if os.geteuid() == 0 and not as_root:
        # An unprivileged user: the sandbox's own preflight id, which owns nothing on the host.
        command = ["setpriv", "--reuid=65432", "--regid=65432", "--clear-groups", "--", *command]
    result = subprocess.run(
        command, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(LIBRARY)}, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_threaded_job_enters_its_private_mounts_only_as_root():
    """A user namespace refuses a threaded caller; as root the main thread moves, and what it starts sees the quota."""
    assert "before it starts any thread" in run_threaded_job(as_root=False)
    if os.geteuid() == 0:
        assert run_threaded_job(as_root=True).split() == ["quota", "1024"]


def test_the_preflight_passes_on_this_machine():
    quota.preflight()


ORPHAN_JOB = """
import sys
from pathlib import Path
from skillbench.execution import quota
quota.enter_private_mounts()
with quota.private_root(sys.argv[1], 1) as root:
    (root / "work").write_text("x")
    Path(sys.argv[2]).write_text(str(root))
    sys.stdin.readline()
    (root / "after").write_text("still mine")
    print("wrote", (root / "after").read_text())
"""


def start_orphan_job(prefix: str, marker: Path) -> tuple[subprocess.Popen, Path]:
    """A job holding a quota root until it reads a line (or is killed)."""
    job = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_JOB, prefix, str(marker)],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(LIBRARY)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(1200):
        if marker.exists() and marker.read_text():
            return job, Path(marker.read_text())
        assert job.poll() is None, job.communicate()
        time.sleep(0.1)
    job.kill()
    raise AssertionError("the job never made its private root")


def test_the_next_private_root_removes_what_a_killed_job_left_and_keeps_a_live_jobs(tmp_path):
    prefix = f"skillbench-test-orphan-{os.getpid()}x-"
    killed, killed_root = start_orphan_job(prefix, tmp_path / "killed")
    alive, alive_root = start_orphan_job(prefix, tmp_path / "alive")
    try:
        killed.kill()
        killed.wait(60)
        # Its quota went with its namespace; the folder it sat on is still on the host.
        assert killed_root.is_dir() and not any(killed_root.iterdir())
        with quota.private_root(prefix, 0) as fresh:
            assert not killed_root.exists()
            assert alive_root.is_dir()
            assert fresh.name.startswith(prefix)
        out, err = alive.communicate("go on\n", timeout=60)
        assert alive.returncode == 0, err
        assert out.split() == ["wrote", "still", "mine"]
        assert not alive_root.exists()
    finally:
        for job in (killed, alive):
            if job.poll() is None:
                job.kill()
                job.wait(60)


def test_a_sweep_leaves_other_namespaces_links_and_live_processes_alone(tmp_path):
    prefix = "skillbench-test-sweep-"
    namespace = os.stat("/proc/self/ns/pid").st_ino
    exited = subprocess.Popen(["sleep", "0"])
    exited_start = process._start_time(exited.pid)
    exited.wait()
    own_start = process._start_time("self")
    assert exited_start is not None and own_start is not None
    gone = tmp_path / f"{prefix}{namespace:x}-{exited.pid:x}-{exited_start:x}-a"
    reused = tmp_path / f"{prefix}{namespace:x}-{os.getpid():x}-{own_start + 1:x}-b"
    live = tmp_path / f"{prefix}{namespace:x}-{os.getpid():x}-{own_start:x}-c"
    foreign = tmp_path / f"{prefix}{namespace + 1:x}-{exited.pid:x}-{exited_start:x}-d"
    unstamped = tmp_path / f"{prefix}k3v9x2q"
    for folder in (gone, reused, live, foreign, unstamped):
        (folder / "nested").mkdir(parents=True)
        (folder / "nested" / "file").write_text("x")
        (folder / "nested").chmod(0o500)
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / f"{prefix}{namespace:x}-{exited.pid:x}-{exited_start:x}-f"
    link.symlink_to(target)
    removed = quota.sweep_orphaned_roots(prefix, tmp_path)
    assert sorted(removed) == sorted([gone, reused])
    assert not gone.exists() and not reused.exists()
    assert all(folder.is_dir() for folder in (live, foreign, unstamped, target))
    assert link.is_symlink()
