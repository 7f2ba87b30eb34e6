"""Disk quotas: every private root of a session job is a tmpfs of its own, seen by that job only.

A job that runs untrusted work (a cell, a task check, a proposer session) first enters a mount
namespace of its own (`enter_private_mounts`; with a user namespace too when the harness is not root,
so it needs no privilege). Each private root it then makes (`private_root`) is a tmpfs of
`sandbox.limits.disk_mb` that holds the workspace, every session's home and tmp, and the grading
scratch. A cell that fills it gets ENOSPC inside its own quota only: the host's disk and a
neighbouring cell never notice, the harness sees that the quota is full (`is_full`) and records the
cell's counted outcome. The mount lives in the job's namespace, so it vanishes with the job, even a
killed one. What a killed job cannot remove is the folder the mount sat on (or, without a quota, the folder
and its files): its name says which process made it, and the next private root of the same kind removes the
ones whose process is gone (`sweep_orphaned_roots`).

The namespace is entered first thing in a session job. A user namespace refuses a threaded caller,
so without root the job must still be one thread then (its modules must not start threads on import,
as numpy's BLAS does). As root only the mount namespace is new, which the kernel gives the calling
thread: every process and thread the job's main thread starts afterwards inherits it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from skillbench.base.artifacts import remove_tree
from skillbench.base.errors import SkillbenchError
from skillbench.base.process import STAMP_PATTERN, process_stamp, run_managed, stamp_orphaned
from skillbench.execution.sandbox import PREFLIGHT_TIMEOUT_S
from skillbench.experiment.settings import SandboxSettings

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
_MNT_DETACH = 0x2
# A quota counts as full when less than this is left: the CLI and git need a little room to fail cleanly.
FULL_MARGIN_BYTES = 256 * 1024

_entered = False


class QuotaError(SkillbenchError, RuntimeError):
    """A private mount namespace or a tmpfs quota cannot be set up on this machine."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise QuotaError(f"{what} failed: {os.strerror(number)} (errno {number})")


def _threads() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 1


def in_private_mounts() -> bool:
    """Whether this process entered its own mount namespace (`enter_private_mounts`)."""
    return _entered


def enter_private_mounts() -> None:
    """Move this (single-threaded) process into a mount namespace of its own; idempotent.

    As root only the mount namespace is new; otherwise a user namespace comes with it that maps the
    caller's own uid and gid to themselves (files it writes keep their owner). Mounts made afterwards
    are private to this process and its children.
    """
    global _entered
    if _entered:
        return
    root = os.geteuid() == 0
    if not root and _threads() != 1:
        raise QuotaError(
            "a session job must enter its private mount namespace before it starts any thread; "
            f"this process already runs {_threads()} threads"
        )
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWNS | (0 if root else _CLONE_NEWUSER)), "unshare (mount namespace)")
    if not root:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    # Nothing mounted here may propagate back to the host's namespace.
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making the mounts private")
    _entered = True


@contextmanager
def private_root(prefix: str, disk_mb: int) -> Iterator[Path]:
    """A fresh folder under the system tmp for one cell's private files, a tmpfs of `disk_mb` MB when the
    quota is on (`disk_mb` > 0; the job must have entered its private mounts). On exit the quota is
    unmounted (its files go with it) and the folder removed; an OSError there is the caller's cleanup
    failure."""
    if disk_mb > 0 and not _entered:
        raise QuotaError(
            "sandbox.limits.disk_mb needs the job's private mount namespace (enter_private_mounts); "
            "set it to 0 to run without a disk quota"
        )
    stamp = process_stamp()
    if stamp is not None:
        sweep_orphaned_roots(prefix)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{stamp}-" if stamp is not None else prefix))
    mounted = False
    try:
        if disk_mb > 0:
            options = f"size={disk_mb}m,mode=0700".encode()
            _check(
                _libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options),
                f"mounting the {disk_mb} MB quota at {folder}",
            )
            mounted = True
        yield folder
    finally:
        if mounted:
            # Detached, so a process that still holds a file there cannot keep the folder from going.
            _check(_libc().umount2(str(folder).encode(), _MNT_DETACH), f"unmounting the quota at {folder}")
        remove_tree(folder)


def sweep_orphaned_roots(prefix: str, folder: Path | None = None) -> list[Path]:
    """Remove the private roots named `prefix…` under `folder` (the system tmp) that a killed job left: this
    user's folders whose process, in this pid namespace, is gone or is another process now (`stamp_orphaned`). A
    root of another pid namespace is left alone: from here its job's live quota looks like an empty folder, and
    removing that folder would unmount the quota under the job. What cannot be removed is left for the next sweep."""
    tmp = folder or Path(tempfile.gettempdir())
    stamped = re.compile(re.escape(prefix) + STAMP_PATTERN + r"-[^/]+")
    uid = os.geteuid()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return removed
    for entry in entries:
        match = stamped.fullmatch(entry.name)
        if match is None or not stamp_orphaned(match["namespace"], match["pid"], match["start"]):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            remove_tree(Path(entry.path))
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def disk_quota_mb(sandbox: SandboxSettings) -> int:
    """A cell's disk quota in MB (config `sandbox.limits.disk_mb`); none under the `none` backend, which contains
    nothing."""
    if sandbox.backend != "bwrap":
        return 0
    return sandbox.limits.disk_mb


def is_full(root: Path, margin: int = FULL_MARGIN_BYTES) -> bool:
    """Whether the quota holding `root` has less than `margin` bytes left."""
    info = os.statvfs(root)
    return info.f_bavail * info.f_frsize < margin


def usage_bytes(root: Path) -> int:
    """Bytes in use on the quota holding `root`."""
    info = os.statvfs(root)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def _probe() -> int:
    """Enter private mounts, make a 1 MB quota, and check that it holds (a 2 MB write fails with ENOSPC)."""
    enter_private_mounts()
    with private_root("skillbench-quota-probe-", 1) as root:
        try:
            (root / "fill").write_bytes(b"\0" * (2 * 1024 * 1024))
        except OSError as exc:
            return 0 if exc.errno == errno.ENOSPC else 3
    return 2


def preflight() -> None:
    """Check once per run, in a child process (the caller's own namespaces stay as they are), that a session job
    can enter its private mounts and that a tmpfs quota holds; raise QuotaError naming the fix if not."""
    library = Path(__file__).resolve().parents[2]
    result = run_managed(
        [sys.executable, "-c", "import sys; from skillbench.execution import quota; sys.exit(quota._probe())"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(library)},
        timeout=PREFLIGHT_TIMEOUT_S,
        cwd="/",
    )
    if not result.ok:
        detail = (result.stderr_tail.strip() or result.detail or f"exit {result.returncode}")[-800:]
        raise QuotaError(
            f"the per-cell disk quota does not work on this machine ({detail}); it needs unprivileged user and "
            "mount namespaces (or root). Fix the machine, or set sandbox.limits.disk_mb: 0 to run cells "
            "without a disk quota"
        )
