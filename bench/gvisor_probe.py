"""Feasibility probes for a gVisor (`runsc run`) cell backend, and its start-up overhead against Bubblewrap.

Each probe starts one `runsc run` sandbox from an OCI bundle shaped like a cell: a read-only root of the
system trees (`/usr`, `/etc`), a private tmpfs `/tmp`, the workspace bind-mounted read-write at
`/workspace`, and `--network=none`. The process runs as uid 1000 with no capabilities unless a probe says
otherwise. What each probe asks (docs/gvisor.md has the measured answers):

    workspace   a file written in the bind-mounted workspace is on the host afterwards
    socket      a host Unix socket bind-mounted in is reachable (with and without `--host-uds=open`);
                one in a folder that is not mounted, an abstract one and the host's TCP loopback are not
    nested      Bubblewrap (Debian's, bound in with /usr) starts inside, as uid 1000 and as root
    claude      the pinned Claude Code CLI (tools/node_modules/.bin/claude) prints its version inside
    statx       Debian 12's coreutils `ls`/`stat` work (they call statx with AT_NO_AUTOMOUNT)
    overhead    median wall time of `/bin/true` under `runsc run` (a fresh container each time) and
                under `bwrap` with the same mounts, interleaved

Needs root (runsc's default mode; `--rootless` is passed otherwise), runsc and bwrap on PATH (`make gvisor`).

    .venv/bin/python bench/gvisor_probe.py [--runs 10] [--only socket,nested]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLAUDE = REPO / "tools" / "node_modules" / ".bin" / "claude"
AGENT_UID = 1000
# Every capability a root process in a container usually keeps; the "root" probes grant them.
ROOT_CAPABILITIES = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_SYS_ADMIN",
    "CAP_SYS_CHROOT",
    "CAP_NET_ADMIN",
]
GREETING = b"gateway-here\n"
TIMEOUT_S = 120


@dataclass
class Outcome:
    """What one command printed, how it exited and how long it took."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def brief(self) -> dict[str, object]:
        return {
            "returncode": self.returncode,
            "stdout": self.stdout.strip()[-600:],
            "stderr": self.stderr.strip()[-600:],
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Cell:
    """One OCI bundle and its state folder under a scratch folder; `run` starts a fresh container of it."""

    scratch: Path
    runsc: str
    counter: int = 0
    workspace: Path = field(init=False)

    def __post_init__(self) -> None:
        self.workspace = self.scratch / "workspace"
        self.workspace.mkdir()
        # The agent's uid inside owns its clone, as the harness hands a cell's clone to the cell's uid.
        if os.geteuid() == 0:
            os.chown(self.workspace, AGENT_UID, AGENT_UID)
        rootfs = self.scratch / "bundle" / "rootfs"
        for folder in ("usr", "etc", "workspace", "tmp", "proc", "dev", "opt", "run"):
            (rootfs / folder).mkdir(parents=True)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            (rootfs / link).symlink_to(target)
        (self.scratch / "state").mkdir()

    def run(
        self,
        argv: Sequence[str],
        *,
        binds: Sequence[tuple[Path, str, bool]] = (),
        root: bool = False,
        flags: Sequence[str] = (),
    ) -> Outcome:
        """`argv` in a new sandbox with the workspace and `binds` (host path, sandbox path, writable)."""
        self.counter += 1
        bundle = self.scratch / "bundle"
        (bundle / "config.json").write_text(json.dumps(oci_config(argv, self.workspace, binds, root=root)))
        command = [
            self.runsc,
            "--root",
            str(self.scratch / "state"),
            "--network=none",
            *(["--rootless"] if os.geteuid() != 0 else []),
            *flags,
            "run",
            "--bundle",
            str(bundle),
            f"probe-{os.getpid()}-{self.counter}",
        ]
        return timed(command)


def oci_config(
    argv: Sequence[str], workspace: Path, binds: Sequence[tuple[Path, str, bool]], *, root: bool
) -> dict[str, object]:
    """A cell's OCI runtime config: read-only system trees, private /tmp, the workspace writable, no network."""

    def bind(source: Path | str, destination: str, writable: bool) -> dict[str, object]:
        return {
            "destination": destination,
            "type": "bind",
            "source": str(source),
            "options": ["rbind", "rw" if writable else "ro"],
        }

    uid = 0 if root else AGENT_UID
    capabilities = ROOT_CAPABILITIES if root else []
    return {
        "ociVersion": "1.0.2",
        "hostname": "cell",
        "root": {"path": "rootfs", "readonly": True},
        "process": {
            "user": {"uid": uid, "gid": uid},
            "args": list(argv),
            "env": ["PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"],
            "cwd": "/workspace",
            "noNewPrivileges": not root,
            "capabilities": {key: capabilities for key in ("bounding", "effective", "permitted")},
        },
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"},
            {"destination": "/run", "type": "tmpfs", "source": "tmpfs"},
            bind("/usr", "/usr", False),
            bind("/etc", "/etc", False),
            bind(workspace, "/workspace", True),
            *(bind(source, destination, writable) for source, destination, writable in binds),
        ],
        "linux": {"namespaces": [{"type": kind} for kind in ("pid", "ipc", "uts", "mount", "network")]},
    }


def timed(command: Sequence[str]) -> Outcome:
    start = time.perf_counter()
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=TIMEOUT_S)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        returncode, stdout, stderr = -9, str(expired.stdout or ""), f"timed out after {TIMEOUT_S} s"
    return Outcome(list(command), returncode, stdout, stderr, time.perf_counter() - start)


def probe_workspace(cell: Cell) -> dict[str, object]:
    marker = f"written inside at {time.time()}"
    outcome = cell.run(["/bin/sh", "-c", f"echo '{marker}' > /workspace/inside.txt"])
    written = cell.workspace / "inside.txt"
    survived = written.is_file() and written.read_text().strip() == marker
    return {"survives": survived, "owner_uid": written.stat().st_uid if survived else None, "run": outcome.brief()}


class SocketServer:
    """A host Unix socket (path or abstract) or TCP loopback listener that greets each client, like a gateway."""

    def __init__(self, family: int, address: str | bytes | tuple[str, int]) -> None:
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.bind(address)
        if isinstance(address, str) and not address.startswith("\0"):
            os.chmod(address, 0o777)
        self.listener.listen(8)
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            with client:
                client.sendall(GREETING)

    def close(self) -> None:
        self.listener.close()


# Run inside the sandbox: try each address, print one JSON line of what happened.
CONNECT_SCRIPT = """
import json, socket, sys
results = {}
for name, family, address in json.loads(sys.argv[1]):
    if family == "tcp":
        address = (address[0], address[1])
    elif family == "abstract":
        address = "\\0" + address
    kind = socket.AF_INET if family == "tcp" else socket.AF_UNIX
    try:
        with socket.socket(kind, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(address)
            results[name] = "reached: " + client.recv(64).decode().strip()
    except OSError as error:
        results[name] = "refused: " + type(error).__name__ + ": " + str(error)
print(json.dumps(results))
"""


def probe_socket(cell: Cell) -> dict[str, object]:
    shared, hidden = cell.scratch / "gateway", cell.scratch / "hidden"
    for folder in (shared, hidden):
        folder.mkdir()
        os.chmod(folder, 0o755)
    abstract = f"skillbench-probe-{os.getpid()}"
    servers = [
        SocketServer(socket.AF_UNIX, str(shared / "gateway.sock")),
        SocketServer(socket.AF_UNIX, str(hidden / "gateway.sock")),
        SocketServer(socket.AF_UNIX, "\0" + abstract),
        SocketServer(socket.AF_INET, ("127.0.0.1", 0)),
    ]
    port = servers[3].listener.getsockname()[1]
    targets = [
        ("bound_socket", "unix", "/gateway/gateway.sock"),
        ("unbound_socket_host_path", "unix", str(hidden / "gateway.sock")),
        ("abstract_socket", "abstract", abstract),
        ("host_tcp_loopback", "tcp", ["127.0.0.1", port]),
    ]
    argv = ["/usr/bin/python3", "-c", CONNECT_SCRIPT, json.dumps(targets)]
    report: dict[str, object] = {}
    try:
        for mode, flags in (("host_uds_default", []), ("host_uds_open", ["--host-uds=open"])):
            outcome = cell.run(argv, binds=[(shared, "/gateway", False)], flags=flags)
            report[mode] = parsed_line(outcome)
        report["host_accepts"] = [server.accepted for server in servers]
    finally:
        for server in servers:
            server.close()
    return report


def parsed_line(outcome: Outcome) -> object:
    try:
        return json.loads(outcome.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"unparsed": outcome.brief()}


def bwrap_argv(
    bwrap: str, workspace: str, command: Sequence[str], *, network_namespace: bool = True, extra: Sequence[str] = ()
) -> list[str]:
    """`command` in a small Bubblewrap sandbox like the harness's: new namespaces (the network one unless told
    otherwise), read-only /usr, own /proc, /dev and /tmp, `workspace` writable at /workspace, and `extra`."""
    kinds = ("user", "ipc", "pid", "uts")
    unshare = ["--unshare-all"] if network_namespace else [f"--unshare-{kind}" for kind in kinds]
    links = [arg for name in ("bin", "lib", "lib64") for arg in ("--symlink", f"usr/{name}", f"/{name}")]
    return [
        bwrap,
        *unshare,
        "--die-with-parent",
        *("--ro-bind", "/usr", "/usr", *links, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"),
        *("--bind", workspace, "/workspace", "--chdir", "/workspace", *extra),
        *command,
    ]


def nested_bwrap_argv(*, network_namespace: bool = True) -> list[str]:
    """Debian's Bubblewrap started inside the runsc sandbox, leaving a mark in the workspace."""
    mark = "echo nested-ok uid=$(id -u) pid=$$ > /workspace/nested.txt; cat /workspace/nested.txt"
    return bwrap_argv("/usr/bin/bwrap", "/workspace", ["/bin/sh", "-c", mark], network_namespace=network_namespace)


# Run inside the sandbox: the namespaces and mounts a nested sandbox needs, one at a time, without bwrap and
# without util-linux (whose `mount` trips over the statx probe's finding); one JSON line of what happened.
NAMESPACE_SCRIPT = """
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
results = {}
def call(name, code):
    results[name] = "ok" if code == 0 else os.strerror(ctypes.get_errno())
NEWNS, NEWUSER, NEWPID, NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
uid, gid = os.getuid(), os.getgid()
results["outer_loopback_listener_from_outside"] = os.environ["OUTER_CONTROL"]
call("unshare", libc.unshare((0 if uid == 0 else NEWUSER) | NEWNS | NEWPID | NEWNET))
if uid != 0:
    for path, text in (("/proc/self/uid_map", f"0 {uid} 1"), ("/proc/self/gid_map", f"0 {gid} 1")):
        try:
            with open(path, "w") as handle:
                handle.write(text)
            results["write " + path] = "ok"
        except OSError as error:
            results["write " + path] = error.strerror
BIND, REMOUNT, RDONLY, REC, PRIVATE = 4096, 32, 1, 16384, 1 << 18
call("mount --make-rprivate /", libc.mount(None, b"/", None, REC | PRIVATE, None))
call("mount tmpfs /run", libc.mount(b"none", b"/run", b"tmpfs", 0, None))
call("bind /workspace", libc.mount(b"/workspace", b"/workspace", None, BIND, None))
call("remount /workspace read-only", libc.mount(None, b"/workspace", None, BIND | REMOUNT | RDONLY, None))
reader, writer = os.pipe()
child = os.fork()
if child == 0:
    call("mount proc", libc.mount(b"proc", b"/proc", b"proc", 0, None))
    results["pid_in_namespace"] = os.getpid()
    with socket.socket() as client:
        client.settimeout(3)
        code = client.connect_ex(("127.0.0.1", int(os.environ["OUTER_PORT"])))
        results["outer_loopback_listener"] = "reached" if code == 0 else os.strerror(code)
    os.write(writer, json.dumps(results).encode())
    os._exit(0)
os.close(writer)
os.waitpid(child, 0)
print(os.read(reader, 65536).decode())
"""

# Starts a loopback listener (as the session's forwarder to the gateway is one), then the namespace script.
NAMESPACE_LAUNCHER = """
import os, socket, subprocess, sys
with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    os.environ["OUTER_PORT"] = str(listener.getsockname()[1])
    with socket.socket() as control:
        # The control: outside the nested namespaces the listener is reachable.
        code = control.connect_ex(listener.getsockname())
        os.environ["OUTER_CONTROL"] = "reached" if code == 0 else os.strerror(code)
    sys.exit(subprocess.run([sys.executable, "-c", sys.argv[1]]).returncode)
"""


def probe_nested(cell: Cell) -> dict[str, object]:
    """Bubblewrap inside runsc (plain, then with /proc/sys/kernel/overflow{u,g}id supplied, which this gVisor's
    /proc lacks), and the raw namespaces and mounts a nested sandbox of another make would need."""
    overflow = cell.scratch / "overflow-id"
    overflow.write_text("65534\n")
    supplied = [(overflow, f"/proc/sys/kernel/overflow{kind}id", False) for kind in ("u", "g")]
    report: dict[str, object] = {}
    for who, root in (("as_uid_1000", False), ("as_root_with_caps", True)):
        for variant, binds, argv in (
            ("bwrap", [], nested_bwrap_argv()),
            ("bwrap_with_overflow_ids", supplied, nested_bwrap_argv()),
            ("bwrap_with_overflow_ids_no_net_namespace", supplied, nested_bwrap_argv(network_namespace=False)),
        ):
            (cell.workspace / "nested.txt").unlink(missing_ok=True)
            outcome = cell.run(argv, binds=binds, root=root)
            report[f"{variant}_{who}"] = {"started": "nested-ok" in outcome.stdout, **outcome.brief()}
        outcome = cell.run(["/usr/bin/python3", "-c", NAMESPACE_LAUNCHER, NAMESPACE_SCRIPT], root=root)
        report[f"namespaces_{who}"] = parsed_line(outcome)
    return report


def probe_claude(cell: Cell) -> dict[str, object]:
    if not CLAUDE.exists():
        return {"skipped": f"{CLAUDE} is missing (make tools)"}
    tools = CLAUDE.parents[1]
    native = timed([str(CLAUDE), "--version"])
    inside = cell.run(["/opt/tools/.bin/claude", "--version"], binds=[(tools, "/opt/tools", False)])
    return {
        "native": native.brief(),
        "runsc": inside.brief(),
        "same_version": inside.returncode == 0 and inside.stdout.strip() == native.stdout.strip(),
    }


STATX_SCRIPT = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(256)
results = {}
for name, flags in (("statx_plain", 0), ("statx_at_no_automount", 0x800)):
    code = libc.syscall(332, -100, b"/workspace", flags, 0x7FF, buffer)
    results[name] = "ok" if code == 0 else os.strerror(ctypes.get_errno())
print(json.dumps(results))
"""


def probe_statx(cell: Cell) -> dict[str, object]:
    listing = cell.run(["/bin/ls", "-ld", "/workspace"])
    syscall = cell.run(["/usr/bin/python3", "-c", STATX_SCRIPT])
    return {"ls_ld_workspace": listing.brief(), "raw_statx": parsed_line(syscall)}


def bwrap_true_argv(workspace: Path) -> list[str]:
    """`/bin/true` in Bubblewrap with the mounts, namespaces and user the runsc bundle has."""
    agent = ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--cap-drop", "ALL"]
    return bwrap_argv("bwrap", str(workspace), ["/bin/true"], extra=["--ro-bind", "/etc", "/etc", *agent])


def probe_overhead(cell: Cell, runs: int) -> dict[str, object]:
    samples: dict[str, list[float]] = {"runsc_run": [], "bwrap": [], "bare": []}
    failures: list[dict[str, object]] = []
    for _ in range(runs):
        for name, start in (
            ("runsc_run", lambda: cell.run(["/bin/true"])),
            ("bwrap", lambda: timed(bwrap_true_argv(cell.workspace))),
            ("bare", lambda: timed(["/bin/true"])),
        ):
            outcome = start()
            if outcome.returncode == 0:
                samples[name].append(outcome.seconds)
            else:
                failures.append({"how": name, **outcome.brief()})
    summary: dict[str, object] = {
        name: {
            "median_s": round(statistics.median(values), 3),
            "min_s": round(min(values), 3),
            "max_s": round(max(values), 3),
            "runs": len(values),
        }
        for name, values in samples.items()
        if values
    }
    if samples["runsc_run"] and samples["bwrap"]:
        extra = statistics.median(samples["runsc_run"]) - statistics.median(samples["bwrap"])
        summary["runsc_minus_bwrap_median_s"] = round(extra, 3)
    summary["failures"] = failures
    return summary


def versions(runsc: str) -> dict[str, str]:
    def first_line(argv: Sequence[str]) -> str:
        outcome = timed(argv)
        return (outcome.stdout or outcome.stderr).strip().splitlines()[0] if outcome.returncode == 0 else "?"

    return {
        "runsc": first_line([runsc, "--version"]),
        "bwrap": first_line(["bwrap", "--version"]),
        "kernel": os.uname().release,
        "cpus": str(os.cpu_count()),
        "load_average_1m": f"{os.getloadavg()[0]:.2f}",
        "euid": str(os.geteuid()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="start-ups of each kind for the overhead probe")
    parser.add_argument("--runsc", default=shutil.which("runsc") or "runsc")
    parser.add_argument("--only", default="", help="comma-separated probes to run (default: all)")
    args = parser.parse_args()
    if not shutil.which(args.runsc):
        parser.error("runsc is not installed: make gvisor")
    probes: dict[str, Callable[[Cell], dict[str, object]]] = {
        "workspace": probe_workspace,
        "socket": probe_socket,
        "nested": probe_nested,
        "claude": probe_claude,
        "statx": probe_statx,
        "overhead": lambda cell: probe_overhead(cell, args.runs),
    }
    chosen = [name for name in args.only.split(",") if name] or list(probes)
    report: dict[str, object] = {"versions": versions(args.runsc)}
    for name in chosen:
        # A fresh scratch folder per probe (0755: runsc's gofer and the agent's uid walk into it).
        with tempfile.TemporaryDirectory(prefix=f"gvisor-probe-{name}-") as scratch:
            os.chmod(scratch, 0o755)
            report[name] = probes[name](Cell(Path(scratch), args.runsc))
    report["load_average_1m_after"] = f"{os.getloadavg()[0]:.2f}"
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
