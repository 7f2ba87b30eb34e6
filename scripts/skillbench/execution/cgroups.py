"""Per-cell limits the kernel enforces: every process of a cell runs in a cgroup of the cell's own.

A cell's sandbox (`Sandbox(cgroup=…)`) starts each of its processes — setup, the CLI and every sandbox nested in
it (the agent's commands, git, MCP servers), verify and the oracle — through `CellCgroup.join_argv`: a shell that
moves itself into the cell's cgroup and then execs the sandbox, so all of them and their children are counted
together. The cgroup has `memory.max` = `sandbox.limits.memory_mb` plus the cell's disk quota (the quota is a tmpfs,
and what the agent writes there is charged to its memory) and `pids.max` = `sandbox.limits.processes`. Past the
memory limit the kernel's OOM killer kills a process of that cell only; past the process limit a fork fails in that
cell only. The cgroup's own counters (`events`: `oom_kill` of memory.events, `max` of pids.events) say whether a
session hit a limit: its counted outcome (`memory-limit-exceeded`, `process-limit-exceeded`), never a guess.

Where the cgroup goes (`placement`):

* cgroup v2 (one hierarchy, `cgroup2`, with the memory and pids controllers): beside the job's own cgroup, under
  its parent, which must hand those controllers down (`cgroup.subtree_control`; enabled there when it holds no
  process). The job's own cgroup is a leaf (v2 lets only leaves hold processes), so its parent is the domain the
  job was given: a SLURM step's, a delegated systemd unit's, a container's, or the root.
* cgroup v1 (the memory and pids controllers each on a hierarchy of its own, as on a hybrid host): under the job's
  own cgroup in each of the two (v1 lets a cgroup hold processes and children).

So a cell stays inside whatever limit its job was given (a SLURM allocation, a container's): its cgroup is nested
in that one. Creating a cgroup and moving a process into it needs write access there: root, or a delegated subtree.
Where there is none, `preflight` refuses the run with the fix (`CgroupError`).

A cell's cgroup is named after the process that made it (`base.process.process_stamp`); on exit its processes are
killed and it is removed. A killed job cannot remove its own: the next cell's `cell_cgroup` removes those whose
process is gone (`sweep_orphaned`).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from skillbench.base.errors import SkillbenchError
from skillbench.base.process import STAMP_PATTERN, process_stamp, run_managed, stamp_orphaned
from skillbench.base.records import ErrorKind
from skillbench.experiment.settings import SandboxSettings

MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
MEMINFO = Path("/proc/meminfo")
PREFIX = "skillbench-cell-"
PROBE_PREFIX = "skillbench-probe-"
CONTROLLERS = ("memory", "pids")
MIB = 1024 * 1024
# How long closing a cgroup waits for its processes to be gone before it gives up (a cleanup failure).
KILL_WAIT_S = 10.0
KILL_POLL_S = 0.02
PROBE_TIMEOUT_S = 10.0
# Moves the shell into each cgroup whose `cgroup.procs` is named, then becomes the command: $1 is how many files
# follow, then the files, then the command. Exit 125 when a move fails (the cell's job cannot count the process).
JOIN_SCRIPT = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
FIX = (
    "per-cell memory and process limits (sandbox.limits.memory_mb, sandbox.limits.processes) need a cgroup this job "
    "may create: run as root, or inside a delegated cgroup (docs/threat-model.md, config/README.md); or set both "
    "limits to 0 to run cells without them, or sandbox.backend: none (contains nothing; rows cannot promote)"
)


class CgroupError(SkillbenchError, RuntimeError):
    """A cell's cgroup cannot be made, joined or removed on this machine."""


@dataclass(frozen=True)
class CgroupLimits:
    """What a cell's cgroup allows: bytes of memory and number of processes (None: no limit on that one)."""

    memory_bytes: int | None
    pids: int | None


def cell_limits(sandbox: SandboxSettings, disk_mb: int) -> CgroupLimits | None:
    """The cgroup limits of a cell under `sandbox` whose disk quota is `disk_mb` (a tmpfs, charged to the cell's
    memory): None when the cell gets no cgroup (the `none` backend, or both limits 0)."""
    limits = sandbox.limits
    if sandbox.backend != "bwrap" or (limits.memory_mb == 0 and limits.processes == 0):
        return None
    return CgroupLimits(
        memory_bytes=(limits.memory_mb + disk_mb) * MIB if limits.memory_mb else None,
        pids=limits.processes or None,
    )


@dataclass(frozen=True)
class LimitEvents:
    """How often a cgroup's processes ran into its limits: OOM kills of its processes, times its own memory limit
    left an allocation nothing to reclaim (v2 `oom`; v1 keeps no such count: `CellCgroup.peaks_at_limit`), refused
    forks. An OOM kill without its own limit reached was the machine's (or an enclosing cgroup's) doing."""

    oom_kills: int = 0
    pids_refused: int = 0
    own_limit_ooms: int = 0

    def since(self, earlier: LimitEvents) -> LimitEvents:
        return LimitEvents(
            self.oom_kills - earlier.oom_kills,
            self.pids_refused - earlier.pids_refused,
            self.own_limit_ooms - earlier.own_limit_ooms,
        )


@dataclass(frozen=True)
class Placement:
    """Where a cell's cgroup is made: cgroup `version` 2 (one parent folder) or 1 (the memory and the pids
    hierarchy's parent folder, in that order)."""

    version: int
    parents: tuple[Path, ...]


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root in its hierarchy, filesystem type, super options) of each cgroup mount in `mountinfo`."""
    found = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        unescape = lambda text: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), text)  # noqa: E731
        found.append((unescape(fields[4]), unescape(fields[3]), rest[0], set(rest[2].split(","))))
    return found


def _own_paths(cgroups: str) -> dict[str, str]:
    """This process's cgroup per hierarchy, from /proc/self/cgroup: "" for the v2 hierarchy, else each controller."""
    paths: dict[str, str] = {}
    for line in cgroups.splitlines():
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if number == "0" and names == "":
            paths[""] = path
        for name in names.split(","):
            if name:
                paths[name] = path
    return paths


def _in_mount(mount_point: str, mount_root: str, path: str) -> Path | None:
    """The folder of cgroup `path` under a mount of its hierarchy whose root is `mount_root`; None if outside it."""
    relative = os.path.relpath(path, mount_root) if mount_root != "/" else path.lstrip("/")
    if relative.startswith(".."):
        return None
    return Path(mount_point) / relative if relative not in ("", ".") else Path(mount_point)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CgroupError(f"{path} cannot be read ({exc.strerror or exc}); {FIX}") from exc


def placement(mountinfo: Path = MOUNTINFO, own: Path = OWN_CGROUPS) -> Placement:
    """Where this job makes its cells' cgroups (see the module's docstring); CgroupError naming the fix if nowhere."""
    mounts = _mounts(_read(mountinfo))
    paths = _own_paths(_read(own))
    for point, root, kind, _options in mounts:
        if kind != "cgroup2" or "" not in paths:
            continue
        folder = _in_mount(point, root, paths[""])
        if folder is None:
            continue
        parent = folder if folder == Path(point) else folder.parent
        available = set(_read(parent / "cgroup.controllers").split())
        if set(CONTROLLERS) <= available:
            return Placement(2, (parent,))
    parents = []
    for controller in CONTROLLERS:
        found = [
            _in_mount(point, root, paths[controller])
            for point, root, kind, options in mounts
            if kind == "cgroup" and controller in options and controller in paths
        ]
        folders = [folder for folder in found if folder is not None]
        if not folders:
            raise CgroupError(f"this machine has no cgroup hierarchy with the {controller} controller; {FIX}")
        parents.append(folders[0])
    return Placement(1, tuple(parents))


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        raise CgroupError(f"writing {value!r} to {path} failed ({exc.strerror or exc}); {FIX}") from exc


def _delegate(parent: Path) -> None:
    """Make a v2 `parent` hand the memory and pids controllers to its children, unless it already does."""
    enabled = set(_read(parent / "cgroup.subtree_control").split())
    missing = [name for name in CONTROLLERS if name not in enabled]
    if missing:
        _write(parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))


@dataclass
class CellCgroup:
    """One cell's cgroup: v2 one folder, v1 a folder in the memory and one in the pids hierarchy; its limits."""

    version: int
    folders: tuple[Path, ...]
    limits: CgroupLimits
    # cgroup v1 keeps no count of its limit's OOMs: how often `events` found the usage's peak at the limit.
    peaks_at_limit: int = 0

    @property
    def memory_folder(self) -> Path:
        return self.folders[0]

    @property
    def pids_folder(self) -> Path:
        return self.folders[-1]

    def join_argv(self) -> list[str]:
        """The argv prefix that starts a command inside this cgroup (as the harness's user, before any sandbox)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        return ["/bin/sh", "-c", JOIN_SCRIPT, "sh", str(len(procs)), *procs]

    def events(self) -> LimitEvents:
        """The OOM kills and refused forks counted so far (0 for a counter this kernel does not keep)."""
        memory = self.memory_folder
        own = _counter(memory / "memory.events", "oom") if self.version == 2 else self._v1_peaks_at_limit()
        memory_file = "memory.events" if self.version == 2 else "memory.oom_control"
        return LimitEvents(
            oom_kills=_counter(memory / memory_file, "oom_kill"),
            pids_refused=_counter(self.pids_folder / "pids.events", "max"),
            own_limit_ooms=own,
        )

    def _v1_peaks_at_limit(self) -> int:
        """cgroup v1: count the usage's peak (memory, and memory+swap) reaching the limit since the last call, then
        start the peaks afresh, so the count rises for the interval in which the cell reached its own limit."""
        if self.limits.memory_bytes is None:
            return self.peaks_at_limit
        peaks = []
        for name in ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"):
            raw = _read_or(self.memory_folder / name, "0").strip()
            peaks.append(int(raw) if raw.isdigit() else 0)
        if max(peaks) >= self.limits.memory_bytes:
            self.peaks_at_limit += 1
            for name in ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"):
                if (self.memory_folder / name).exists():
                    _write(self.memory_folder / name, "0")
        return self.peaks_at_limit

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.folders:
            try:
                pids.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
            except FileNotFoundError:
                continue
        return sorted(pids)

    def close(self, wait_s: float = KILL_WAIT_S) -> None:
        """Kill what still runs in the cgroup and remove it (idempotent); CgroupError if it cannot be removed."""
        if self.version == 2 and (self.memory_folder / "cgroup.kill").exists():
            try:
                _write(self.memory_folder / "cgroup.kill", "1")
            except CgroupError:
                pass
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.processes()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            remaining = [folder for folder in self.folders if not _removed(folder)]
            if not remaining:
                return
            if time.monotonic() >= deadline:
                raise CgroupError(
                    f"the cell's cgroup {remaining[0]} could not be removed within {wait_s:g}s "
                    f"({len(pids)} processes still in it)"
                )
            time.sleep(KILL_POLL_S)


def _counter(path: Path, name: str) -> int:
    for line in _read_or(path, "").splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _read_or(path: Path, missing: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return missing
    except OSError as exc:
        raise CgroupError(f"{path} cannot be read ({exc.strerror or exc})") from exc


def _removed(folder: Path) -> bool:
    """Remove an empty cgroup folder; True once it is gone, False while processes keep it busy."""
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return False
        raise CgroupError(f"the cell's cgroup {folder} could not be removed ({exc.strerror or exc})") from exc
    return True


def create(where: Placement, limits: CgroupLimits, prefix: str = PREFIX) -> CellCgroup:
    """A new cgroup for one cell at `where` with `limits`, named after this process (`process_stamp`)."""
    stamp = process_stamp()
    name = f"{prefix}{stamp}-{secrets.token_hex(3)}" if stamp is not None else f"{prefix}{secrets.token_hex(6)}"
    if where.version == 2:
        _delegate(where.parents[0])
    made: list[Path] = []
    cgroup = CellCgroup(where.version, tuple(parent / name for parent in where.parents), limits)
    try:
        for folder in cgroup.folders:
            try:
                folder.mkdir(mode=0o755)
            except OSError as exc:
                raise CgroupError(f"making the cell's cgroup {folder} failed ({exc.strerror or exc}); {FIX}") from exc
            made.append(folder)
        _set_limits(cgroup, limits)
    except BaseException:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    return cgroup


def _set_limits(cgroup: CellCgroup, limits: CgroupLimits) -> None:
    memory, pids = cgroup.memory_folder, cgroup.pids_folder
    if cgroup.version == 2:
        _write(memory / "memory.max", str(limits.memory_bytes) if limits.memory_bytes else "max")
        if limits.memory_bytes and (memory / "memory.swap.max").exists():
            _write(memory / "memory.swap.max", "0")  # the limit is memory, not memory plus whatever swap holds
    elif limits.memory_bytes:
        _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():
            _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
    _write(pids / "pids.max", str(limits.pids) if limits.pids else "max")


def sweep_orphaned(where: Placement, prefix: str = PREFIX) -> list[Path]:
    """Kill what runs in, and remove, the cgroups named `prefix…` at `where` whose process (in this pid namespace) is
    gone (`base.process.stamp_orphaned`): what a killed job left. What cannot be removed is left for the next sweep."""
    stamped = re.compile(re.escape(prefix) + STAMP_PATTERN + r"-[0-9a-f]+")
    removed: list[Path] = []
    for parent in where.parents:
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            match = stamped.fullmatch(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
            if not stamp_orphaned(match["namespace"], match["pid"], match["start"]):
                continue
            try:
                CellCgroup(where.version, (Path(entry.path),), CgroupLimits(None, None)).close(wait_s=1.0)
            except CgroupError:
                continue
            removed.append(Path(entry.path))
    return removed


@contextmanager
def cell_cgroup(limits: CgroupLimits | None, where: Placement | None = None) -> Iterator[CellCgroup | None]:
    """A cgroup for one cell's processes with `limits` (None: no cgroup), removed with whatever still runs in it on
    exit; cgroups that killed jobs left are removed first."""
    if limits is None:
        yield None
        return
    where = where or placement()
    sweep_orphaned(where)
    cgroup = create(where, limits)
    try:
        yield cgroup
    finally:
        cgroup.close()


def preflight(limits: CgroupLimits | None) -> None:
    """Check once per run that a cell's cgroup can be made here with `limits` and joined; CgroupError with the fix."""
    if limits is None:
        return
    where = placement()
    sweep_orphaned(where, PROBE_PREFIX)
    cgroup = create(where, limits, PROBE_PREFIX)
    try:
        result = run_managed(
            [*cgroup.join_argv(), "/bin/true"], env={"PATH": "/usr/bin:/bin"}, timeout=PROBE_TIMEOUT_S, cwd="/"
        )
        if not result.ok:
            detail = (result.stderr_tail.strip() or result.detail or f"exit {result.returncode}")[-400:]
            raise CgroupError(f"a process could not join the cell's cgroup {cgroup.folders[0]} ({detail}); {FIX}")
    finally:
        cgroup.close()


def host_memory_mb(meminfo: Path = MEMINFO, where: Placement | None = None) -> int:
    """The memory this machine has for the run, in MiB: the host's MemTotal, or less when the run's own cgroup (the
    folder its cells go under: a SLURM allocation, a container) is limited."""
    total_kib = _counter_kib(meminfo, "MemTotal:")
    limits = []
    if where is not None:
        name = "memory.max" if where.version == 2 else "memory.limit_in_bytes"
        try:
            raw = (where.parents[0] / name).read_text().strip()
        except OSError:
            raw = "max"
        if raw.isdigit():
            limits.append(int(raw) // MIB)
    return min([total_kib // 1024, *limits])


def _counter_kib(meminfo: Path, key: str) -> int:
    for line in _read(meminfo).splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise CgroupError(f"{meminfo} has no {key} line")


def synthetic_meminfo(host: str, memory_bytes: int) -> str:
    """`/proc/meminfo` as a cell's processes see it: the host's lines, with every amount capped at the cell's memory
    limit, so a program that sizes itself by the machine's memory sizes itself by the cell's. A snapshot."""
    limit_kib = memory_bytes // 1024
    lines = []
    for line in host.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1] == "kB":
            amount = limit_kib if key == "MemTotal" else min(int(parts[0]), limit_kib)
            line = f"{key + ':':<15} {amount:>8} kB"
        lines.append(line)
    return "\n".join(lines) + "\n"


def limit_hit(hits: LimitEvents, limits: CgroupLimits) -> tuple[ErrorKind, str] | None:
    """The counted outcome of what ran while `hits` were counted (the cgroup's events since it started): the kernel
    killed a process at the cell's own memory limit (`memory-limit-exceeded`; a kill the machine's memory or an
    enclosing cgroup's limit made is not the cell's), or refused a fork at the process limit
    (`process-limit-exceeded`); None when neither happened."""
    if hits.oom_kills > 0 and hits.own_limit_ooms > 0:
        memory = f"{limits.memory_bytes // MIB} MiB" if limits.memory_bytes else "its limit"
        return "memory-limit-exceeded", (
            f"the kernel killed {hits.oom_kills} process(es) of the cell at its memory limit ({memory}: "
            "sandbox.limits.memory_mb plus the disk quota, disk_mb, which its files in the workspace, home and tmp use)"
        )
    if hits.pids_refused > 0:
        return "process-limit-exceeded", (
            f"the cell's process limit ({limits.pids} processes and threads: sandbox.limits.processes) refused "
            f"{hits.pids_refused} new process(es)"
        )
    return None
