"""Containment: Bubblewrap command wrapping, the scratch environment, Claude Code settings, the preflight.

Every subprocess a cell runs in its clone (setup, sessions, verify, oracle, git) is wrapped
here. Under `bwrap`:

* the sandbox never runs as host root: when the harness is root, Bubblewrap is started through
  `setpriv` as an unprivileged host uid of its own (no capabilities, empty bounding set,
  no_new_privs). Each Sandbox takes a free id from `HOST_ID_BASE`…`+HOST_ID_SLOTS` and holds a
  lock on it while it lives, so concurrent cells never share a uid (and so never share
  RLIMIT_NPROC); its private folders and clone are handed to that id;
* a cell's sandbox starts every command in the cell's cgroup (`execution.cgroups`: memory and
  processes of the whole cell, the CLI included) and shows every process of the cell (nested
  sandboxes too) the cell's `/proc/meminfo`; `prlimit` adds the file size limit. A sandbox without
  a cgroup (the proposer's, a task check's) gets per-process limits (`SandboxLimits`, config
  `sandbox.limits`) with `prlimit` instead: processes (per host uid) and file size always; address
  space on everything the agent starts (Bash tool commands, git, setup, verify, oracle) but not on
  the CLI process itself, whose JavaScript engine reserves more address space than it uses;
* inside, the process is `agent` (uid/gid 1000) in new user, PID, IPC, UTS and cgroup
  namespaces with every capability dropped, `--die-with-parent` and `--new-session`;
* the clone is `/workspace` (the only writable project tree; skill roots are bound read-only
  over it), home and tmp are private folders (a fresh pair per session, and a fresh empty pair
  for verify and for the oracle: `fresh_scratch`), `/run` is a tmpfs, and only system folders
  are visible, read-only — never the host root, home or results; `/etc/passwd` and
  `/etc/group` are synthetic; the root itself is remounted read-only;
* `verify` and the oracle add a read-only workspace and no network.

The environment is built from scratch; the model key is added by the caller for the CLI process
only, and nothing the CLI starts on its own inherits it from a file the agent wrote:

* Claude Code runs every Bash tool command through the shell-prefix wrapper
  (`CLAUDE_CODE_SHELL_PREFIX`), which clears the environment and starts the command in a nested
  Bubblewrap with its own PID namespace and `/proc`, no network, and the CLI's settings and state
  (`~/.claude`, `~/.claude.json`, `/workspace/.claude`) read-only;
* the CLI also runs `git` itself (status, log, config at start-up) with its own environment. It
  finds git on PATH, and `/opt/claude/git` comes first: a wrapper that starts the real git the
  same way (empty environment, nested sandbox, no network, own `/proc`) with hooks and fsmonitor
  off, so whatever a session planted in the clone's `.git` (hooks, fsmonitor, filters, pager,
  external diff) runs, if at all, without the key, without the network and without sight of the
  CLI's process;
* the CLI's shell snapshot (made at a session's first Bash call) runs a login bash with the
  CLI's environment, sourcing the home's dotfiles: the shell start-up files
  (`SHELL_STARTUP_FILES`) are empty and read-only in every sandbox, and every session gets a
  fresh home, so no session sources a file an earlier session or its own commands wrote.

* an arm's MCP servers are started by the CLI through `mcp_server_argv`: `env -i`, then a nested
  Bubblewrap of their own (own user and PID namespace and `/proc`, no capabilities, `--clearenv`
  plus the server's allow list, no network unless the arm allows it, no home, the system trees,
  the server's read-only mounts and the workspace read-only unless the arm says otherwise). The
  mounts are bound read-only into the session's sandbox at the same paths first; trees every
  uid can read are bound as they are (`share_read_only`), others are copied.

So a command the agent writes can neither read the CLI's environment or memory, nor reach any
socket, nor plant a settings file whose `env` would send the key elsewhere. The CLI's own file
tools are held back by the deny rules of `claude_settings`.

The harness's own git after a session (`harness_git`) never reads the clone's `.git`: it uses a
harness-owned copy of the repository made before the first session, outside the workspace,
with a harness-written config, on a read-only workspace without network.

The `none` backend runs on the host (for machines without user namespaces); it contains nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from skillbench.base.errors import SkillbenchError
from skillbench.base.process import ProcessResult, run_managed
from skillbench.execution.gateway import hide_bridge_args
from skillbench.experiment.settings import LimitSettings, default_limits

if TYPE_CHECKING:
    # Types only: repo's runners are what git() hands out; repo itself is imported where a runner is built.
    from skillbench.execution.cgroups import CellCgroup
    from skillbench.execution.repo import GitRunner, ScriptRunner

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_HOME = "/home/agent"
SANDBOX_TMP = "/tmp"
SANDBOX_TOOLS = "/opt/claude"
SANDBOX_SHELL_PREFIX = f"{SANDBOX_TOOLS}/shell-prefix"
SANDBOX_BWRAP = f"{SANDBOX_TOOLS}/bwrap"
SANDBOX_GIT_WRAPPER = f"{SANDBOX_TOOLS}/git"
# The cell's /proc/meminfo (`cgroups.synthetic_meminfo`), bound over /proc/meminfo in every sandbox of the cell.
SANDBOX_MEMINFO = f"{SANDBOX_TOOLS}/meminfo"
# A second /proc of each sandbox, with no file bound over it. The kernel mounts a fresh /proc (a nested sandbox's)
# only beside one that hides nothing; the real /proc, with the cell's meminfo bound over it, hides its file. Each
# nested sandbox mounts its own here too, over its parent's, so none shows another PID namespace's processes.
SANDBOX_PROC_COPY = "/run/skillbench-proc"
# Where each MCP server's launcher appears: the CLI runs `<launcher>` through the shell prefix, which starts
# exactly these (and nothing else) with the servers' mounts visible.
SANDBOX_MCP_LAUNCHERS = f"{SANDBOX_TOOLS}/mcp"
# Where the harness-owned git directory appears to the harness's own git runs (never to a session).
SANDBOX_HARNESS_GIT = "/run/skillbench-git"
# The real shells, for a CLI whose shells are contained (`Sandbox.command(contain_shells=True)`): the CLI's
# /usr/bin/bash and /usr/bin/dash are the harness's wrappers, and the harness's own scripts run on these.
SANDBOX_REAL_SHELLS = f"{SANDBOX_TOOLS}/real"
CONTAINED_SHELLS = ("/usr/bin/bash", "/usr/bin/dash")
SANDBOX_PATH = f"{SANDBOX_TOOLS}:/usr/local/bin:/usr/bin:/bin"
SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOSTNAME = "skillbench"
# The host uid/gid the preflight runs as when the harness itself is root. Nothing on the host should
# own files under these ids; every file a sandbox creates lives in a cell's private root.
UNPRIVILEGED_HOST_ID = 65432
# Each Sandbox takes its own host id from this range (see allocate_host_id), so RLIMIT_NPROC,
# which the kernel counts per uid, bounds one cell and not all of them together.
HOST_ID_BASE = 200_000
HOST_ID_SLOTS = 4096
HOST_ID_LOCKS = Path(tempfile.gettempdir()) / "skillbench-host-ids"
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = (
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/python3",
    "/etc/python3.11",
)
SYNTHETIC_PASSWD = (
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"agent:x:{SANDBOX_UID}:{SANDBOX_GID}:agent:{SANDBOX_HOME}:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
SYNTHETIC_GROUP = f"root:x:0:\nagent:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"
PREFLIGHT_TIMEOUT_S = 10
BACKENDS = ("bwrap", "none")
# Host-owned sandbox paths the CLI's own file tools must not open (the Read/Edit/Write tools run
# inside the CLI process, which holds the model key).
PROTECTED_PATHS = ("/proc", "/sys", "/dev")


class SandboxError(SkillbenchError, RuntimeError):
    """The sandbox cannot be built or does not work on this machine."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-sandbox resource limits (config `sandbox.limits`); 0 switches a limit off.

    In a cell, `processes` and `memory_mb` are its cgroup's (`execution.cgroups`). In a sandbox without a
    cgroup, `processes` is RLIMIT_NPROC of the sandbox's own host uid (every process and thread, the CLI
    included) and `memory_mb` RLIMIT_AS of each process the agent starts (not the CLI). `file_mb` is
    RLIMIT_FSIZE (the largest file any process of the cell can write); `disk_mb` is the cell's disk quota
    (`skillbench.execution.quota`: one tmpfs over workspace, homes and tmp).
    """

    processes: int
    memory_mb: int
    file_mb: int
    disk_mb: int

    @classmethod
    def of(cls, limits: LimitSettings) -> SandboxLimits:
        """The sandbox's share of `sandbox.limits` (the typed section)."""
        return cls(
            processes=limits.processes, memory_mb=limits.memory_mb, file_mb=limits.file_mb, disk_mb=limits.disk_mb
        )

    @classmethod
    def default(cls) -> SandboxLimits:
        """The schema's default limits, for a sandbox set up without a config."""
        return cls.of(default_limits())

    def prlimit_args(self, *, memory: bool, processes: bool = True) -> list[str]:
        """`prlimit` options for these limits (soft = hard, so the sandbox cannot raise them)."""
        args = []
        if processes and self.processes > 0:
            args.append(f"--nproc={self.processes}")
        if self.file_mb > 0:
            args.append(f"--fsize={self.file_mb * 1024 * 1024}")
        if memory and self.memory_mb > 0:
            args.append(f"--as={self.memory_mb * 1024 * 1024}")
        return args


def resolve_prlimit() -> str:
    found = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not found:
        raise SandboxError(
            "prlimit (util-linux) was not found; the sandbox needs it to set resource limits "
            "(install util-linux, or set every sandbox.limits value to 0)"
        )
    return found


def resolve_git() -> str:
    """The real git (never the wrapper a sandbox puts first on its PATH)."""
    found = shutil.which("git", path="/usr/bin:/bin:/usr/local/bin")
    if not found:
        raise SandboxError("git was not found in /usr/bin, /bin or /usr/local/bin; install it (make system does)")
    return found


def allocate_host_id(hint: str) -> tuple[int, int]:
    """A host uid no other live Sandbox on this machine uses, and the descriptor whose lock holds it.

    The lock (flock on `<HOST_ID_LOCKS>/<uid>`) is released when the descriptor is closed or the
    process dies, so a crashed cell never keeps its id. The search starts at a slot derived from
    `hint` (the private root) to keep collisions rare.
    """
    HOST_ID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(HOST_ID_LOCKS)
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        raise SandboxError(f"{HOST_ID_LOCKS} must be a directory owned by the harness user")
    start = int.from_bytes(hashlib.sha256(hint.encode()).digest()[:4], "big") % HOST_ID_SLOTS
    for offset in range(HOST_ID_SLOTS):
        uid = HOST_ID_BASE + (start + offset) % HOST_ID_SLOTS
        descriptor = os.open(HOST_ID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        return uid, descriptor
    raise SandboxError(f"all {HOST_ID_SLOTS} sandbox host ids are in use")


def base_environment(*, home: str, tmp: str, path: str) -> dict[str, str]:
    """The whole environment of a sandboxed process; nothing is inherited from the host."""
    return {
        "HOME": home,
        "USER": "agent",
        "LOGNAME": "agent",
        "TMPDIR": tmp,
        "PATH": path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "CI": "1",
        "NO_COLOR": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_TMPDIR": tmp,
    }


def tool_environment(*, home: str, tmp: str, path: str) -> dict[str, str]:
    """The environment a Bash tool command starts with: the base environment without the CLI's own switches."""
    return {
        name: value
        for name, value in base_environment(home=home, tmp=tmp, path=path).items()
        if not name.startswith(("CLAUDE_", "DISABLE_"))
    }


# Shell start-up files in the home. The CLI makes its shell snapshot with a login bash that
# sources them while holding the key: they are bound read-only and empty in every sandbox.
SHELL_STARTUP_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".bash_logout",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".zlogout",
)
# Files the CLI (re)reads its settings and state from. A settings file is reloaded while the session
# runs, and its `env` can point ANTHROPIC_BASE_URL (and so the key) anywhere: tool commands get them
# read-only, and the CLI's own file tools are denied them (see claude_settings).
# opencode keeps its session store (the conversation it reloads every step), config and caches under the XDG folders.
# Copilot keeps its settings (which it reloads, and whose hooks would run), session state and logs in ~/.copilot.
# Gemini CLI keeps its settings, policies, chats and project temp folder in ~/.gemini, and a trusted workspace's
# .gemini/ (covered in its sessions) would hold project settings whose MCP servers, hooks and commands it runs.
# Codex keeps its config, its SQLite state, logs and the helper links it makes in CODEX_HOME (~/.codex).
CLI_STATE_PATHS = (
    f"{SANDBOX_HOME}/.claude",
    f"{SANDBOX_HOME}/.claude.json",
    f"{SANDBOX_WORKSPACE}/.claude",
    f"{SANDBOX_HOME}/.config/opencode",
    f"{SANDBOX_HOME}/.local/share/opencode",
    f"{SANDBOX_HOME}/.local/state/opencode",
    f"{SANDBOX_HOME}/.cache/opencode",
    f"{SANDBOX_HOME}/.copilot",
    f"{SANDBOX_HOME}/.gemini",
    f"{SANDBOX_WORKSPACE}/.gemini",
    f"{SANDBOX_HOME}/.codex",
)


def namespace_args(*, network: bool, outer: bool = False) -> list[str]:
    """Bubblewrap's namespace and privilege options, for every sandbox the harness builds.

    Each sandbox runs as `agent` in a new user namespace with its own PID and IPC namespaces, dies
    with its parent and drops every capability; `network` False adds a network namespace of its
    own (no network). The `outer` sandbox (a cell's) also gets its own host name, cgroup namespace
    and terminal session; the sandboxes nested inside it share those with it.
    """
    args = [
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--unshare-pid",
        "--unshare-ipc",
    ]
    if outer:
        args += ["--unshare-uts", "--hostname", SANDBOX_HOSTNAME, "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    args.append("--die-with-parent")
    if outer:
        args.append("--new-session")
    return [*args, "--cap-drop", "ALL"]


def kernel_filesystem_args(tmpfs: str) -> list[str]:
    """A /proc of the sandbox's own PID namespace, a minimal /dev, and an empty tmpfs at `tmpfs`."""
    return ["--proc", "/proc", "--dev", "/dev", "--tmpfs", tmpfs]


def closing_args(*, chdir: str, argv: Sequence[str]) -> list[str]:
    """The root (a tmpfs holding the mount points) made read-only, so nothing can be created beside
    the binds; then the working folder and the command."""
    return ["--remount-ro", "/", "--chdir", chdir, "--", *argv]


def nested_namespace_args(hidden: Sequence[str] = (), *, real_shells: bool = False, meminfo: bool = False) -> list[str]:
    """The nested sandbox of one Bash tool command: same files, own PID namespace and /proc, no network.

    `hidden` are paths of the cell's sandbox the agent's commands must not see (an MCP server's mounts, which
    only the server reads): each is covered with an empty tmpfs. `real_shells` puts the real shells back
    where a contained CLI sees the harness's wrappers (see `contained_shell_script`). `meminfo` shows the cell's
    /proc/meminfo (its memory limit) instead of the host's, with a /proc of the nested sandbox's own at
    `SANDBOX_PROC_COPY` over its parent's (so a sandbox nested in this one can still mount its /proc)."""
    args = [*namespace_args(network=False), "--dev-bind", "/", "/", "--proc", "/proc"]
    if meminfo:
        args += ["--proc", SANDBOX_PROC_COPY, "--ro-bind", SANDBOX_MEMINFO, "/proc/meminfo"]
    for path in CLI_STATE_PATHS:
        args += ["--ro-bind-try", path, path]
    for path in hidden:
        args += ["--tmpfs", path]
    if real_shells:
        for shell in CONTAINED_SHELLS:
            args += ["--ro-bind", f"{SANDBOX_REAL_SHELLS}/{Path(shell).name}", shell]
    # A Unix socket ignores network namespaces: the gateway's socket would otherwise be a way out.
    return [*args, *hide_bridge_args()]


@dataclass(frozen=True)
class ToolExec:
    """How a wrapper script starts what it wraps: with the tool environment only (`home`, `tmp`, `path`), in the
    nested sandbox when `nested_bwrap` is given (less the `hidden` paths; with the cell's /proc/meminfo when
    `meminfo`), under `prlimit` (argv of a prlimit call) when given. Inside the nested sandbox the shells are the
    real ones, whether or not the CLI's are contained."""

    home: str
    tmp: str
    path: str
    nested_bwrap: str | None = None
    prlimit: list[str] | None = None
    hidden: Sequence[str] = ()
    meminfo: bool = False

    def line(self, command: str) -> str:
        """The `exec` line of a wrapper script that runs `command` so."""
        environment = tool_environment(home=self.home, tmp=self.tmp, path=self.path)
        variables = " ".join(f"{name}={value}" for name, value in environment.items())
        if self.nested_bwrap:
            nested = nested_namespace_args(self.hidden, real_shells=True, meminfo=self.meminfo)
            command = f"{self.nested_bwrap} {' '.join(nested)} -- {command}"
        if self.prlimit:
            command = f"{' '.join(self.prlimit)} -- {command}"
        return f"exec /usr/bin/env -i {variables} {command}\n"


def shell_prefix_script(tool_exec: ToolExec, *, launchers: Sequence[str] = (), interpreter: str = "/bin/sh") -> str:
    """Claude Code runs every Bash tool command as `<prefix> <command>`; this restarts it with an empty environment.

    So a command the model writes never sees the session's token or anything else the CLI holds (`tool_exec`). With
    its `nested_bwrap` (the bwrap backend) the command also runs in a nested Bubblewrap: a PID namespace
    and /proc of its own (the CLI's /proc/<pid>/environ and memory are out of reach) and no network.
    The nested sandbox binds the sandbox's own root (`/`), which never holds more than the outer
    sandbox shows, less the `hidden` paths (an MCP server's mounts). The CLI starts its MCP servers
    through this prefix too: a command that is exactly one of the harness's `launchers` runs with the
    hidden paths visible (the launcher starts the server in its own sandbox); nothing else does.
    Its `prlimit` adds the address-space limit the CLI itself does not get (a sandbox without a cgroup), its
    `meminfo` shows a command the cell's /proc/meminfo.
    """
    server_case = ""
    if launchers and tool_exec.hidden:
        server_exec = replace(tool_exec, hidden=()).line('"$1"').strip()
        server_case = f'case "$1" in\n  {"|".join(launchers)}) {server_exec} ;;\nesac\n'
    return (
        f"#!{interpreter}\n"
        "# skillbench: run one Bash tool command with a fixed, credential-free environment.\n"
        'if [ "$#" -ne 1 ]; then echo "shell-prefix: expected exactly one command argument" >&2; exit 64; fi\n'
        + server_case
        + tool_exec.line('/bin/bash -c "$1"')
    )


def git_wrapper_script(tool_exec: ToolExec, *, git: str, interpreter: str = "/bin/sh") -> str:
    """`git` for the CLI and for tool commands: the real git with an empty environment, contained.

    The CLI runs git itself (status, log, config) with its session token in its environment; a hook,
    fsmonitor, filter or pager planted in the clone's `.git` would inherit it. This wrapper is
    first on the sandbox's PATH, so every git the CLI or a tool command starts gets the tool
    environment (no key), and with `tool_exec`'s `nested_bwrap` its own PID namespace and /proc and no network.
    """
    command = f'{git} -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"'
    return (
        f"#!{interpreter}\n"
        "# skillbench: git with a fixed, credential-free environment, in a nested sandbox without network.\n"
        + tool_exec.line(command)
    )


def contained_shell_script(shell: str, tool_exec: ToolExec) -> str:
    """`shell` (/usr/bin/bash or /usr/bin/dash) as a CLI without a shell-prefix hook sees it: the real shell,
    with the tool environment only, in a nested sandbox (PID namespace and /proc of its own, no network):
    `tool_exec`, whose `nested_bwrap` is set.

    Such a CLI starts its agent's commands as `bash -c …` or `sh -c …` (by name or absolute path) with its
    session token in its environment and in its own PID namespace, where a command could read the CLI's
    environment and memory or write into the stdout the harness reads as evidence. Binding this script
    over the CLI's shells puts every shell it starts out of reach of the CLI process; inside, the real
    shells are back in place, so the agent's commands work as usual. Runs on the real dash.
    """
    name = Path(shell).name
    return (
        f"#!{SANDBOX_REAL_SHELLS}/dash\n"
        f"# skillbench: {name} for the CLI: the real {name}, credential-free, in a nested sandbox.\n"
        + tool_exec.line(f'{shell} "$@"')
    )


@dataclass(frozen=True)
class AgentInstall:
    """An agent CLI as a sandbox starts it: its installed executable, or its package folder and the entry point
    in it, bound read-only at `sandbox_path`."""

    name: str
    host_path: Path
    entry: str | None = None

    @property
    def sandbox_path(self) -> str:
        return f"{SANDBOX_TOOLS}/{self.name}"

    def executable(self, backend: str) -> str:
        """The path that starts the CLI, inside the sandbox (bwrap) or on the host (none)."""
        root = self.sandbox_path if backend == "bwrap" else str(self.host_path)
        return f"{root}/{self.entry}" if self.entry else root

    @property
    def host_executable(self) -> Path:
        return self.host_path / self.entry if self.entry else self.host_path


class McpServerLaunch(TypedDict):
    """What `mcp_server_argv` needs to know about one MCP server (see there)."""

    command: str
    args: Sequence[str]
    env: dict[str, str]
    mounts: Sequence[str]
    network: bool
    workspace: str


def mcp_server_argv(
    *,
    command: str,
    args: Sequence[str],
    env: dict[str, str],
    mounts: Sequence[str],
    network: bool,
    workspace: str,
    nested_bwrap: str = SANDBOX_BWRAP,
    prlimit: list[str] | None = None,
) -> list[str]:
    """The argv the CLI starts for one stdio MCP server: its own nested Bubblewrap inside the session's sandbox.

    `env -i` first, so not even Bubblewrap (whose /proc/<pid>/environ the server could read) holds the
    CLI's environment; inside, `--clearenv` plus exactly `env`. Own user, PID and IPC namespaces, every
    capability dropped, no network unless `network`; the system trees, the server's `mounts` (already
    bound read-only at the same paths in the session's sandbox) read-only, a private tmpfs /tmp, no
    home, and the workspace as `workspace` says (`none`, `read-only`, `read-write`).
    """
    argv = ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin"]
    if prlimit:
        argv += [*prlimit, "--"]
    argv += [nested_bwrap, *namespace_args(network=network), "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    # The session's sandbox already shows its synthetic passwd and group at the usual paths.
    argv += [*system_mount_args(), *account_file_args("/etc/passwd", "/etc/group"), *kernel_filesystem_args("/tmp")]
    for target in mounts:
        argv += ["--ro-bind", target, target]
    if workspace != "none":
        argv += ["--bind" if workspace == "read-write" else "--ro-bind", SANDBOX_WORKSPACE, SANDBOX_WORKSPACE]
    return [*argv, *closing_args(chdir=SANDBOX_WORKSPACE if workspace != "none" else "/tmp", argv=[command, *args])]


def world_readable_tree(root: Path) -> bool:
    """Whether any uid can read everything under `root` and reach it (so it can be bound without a copy)."""
    root = Path(root).absolute()
    if not all(os.stat(parent).st_mode & stat.S_IXOTH for parent in root.parents):
        return False
    info = os.stat(root)
    if not stat.S_ISDIR(info.st_mode):
        return bool(info.st_mode & stat.S_IROTH)
    for directory, _subdirs, files in os.walk(root):
        if os.stat(directory).st_mode & (stat.S_IROTH | stat.S_IXOTH) != (stat.S_IROTH | stat.S_IXOTH):
            return False
        for name in files:
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                return False
    return True


def account_file_args(passwd: str, group: str) -> list[str]:
    """`passwd` and `group` bound read-only as the sandbox's /etc/passwd and /etc/group."""
    return ["--ro-bind", passwd, "/etc/passwd", "--ro-bind", group, "/etc/group"]


def system_mount_args() -> list[str]:
    """Read-only system folders; merged-/usr symlinks are recreated as symlinks."""
    args: list[str] = []
    for entry in (*SYSTEM_TREES, *ETC_ENTRIES):
        if os.path.islink(entry):
            args += ["--symlink", os.readlink(entry), entry]
        elif os.path.exists(entry):
            args += ["--ro-bind", entry, entry]
    return args


def resolve_bwrap(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise SandboxError(
            f"Bubblewrap ({name!r}) was not found; install the Debian package `bubblewrap` "
            "(make setup does) or set sandbox.backend: none on machines without user namespaces"
        )
    return str(Path(found).resolve())


def host_identity() -> tuple[int, int]:
    """The host uid/gid sandboxed processes run as: never root."""
    if os.geteuid() == 0:
        return UNPRIVILEGED_HOST_ID, UNPRIVILEGED_HOST_ID
    return os.geteuid(), os.getegid()


def launcher_args(host_id: int | None = None) -> list[str]:
    """As root, start Bubblewrap as an unprivileged host id with no capabilities at all; otherwise nothing."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not setpriv:
        raise SandboxError(
            "setpriv (util-linux) was not found; the harness runs as root and needs it to start "
            "the sandbox as an unprivileged user"
        )
    uid, gid = (host_id, host_id) if host_id is not None else host_identity()
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def preflight(bwrap: str) -> None:
    """Run `true` inside the full namespace set and the nested tool sandbox once; raise if containment fails here."""
    if not sys.platform.startswith("linux"):
        raise SandboxError("the bwrap sandbox works only on Linux; set sandbox.backend: none elsewhere")
    executable = resolve_bwrap(bwrap)
    resolve_prlimit()
    resolve_git()
    argv = [
        *launcher_args(),
        executable,
        *namespace_args(network=False, outer=True),
        *system_mount_args(),
        *kernel_filesystem_args("/tmp"),
        "--ro-bind",
        executable,
        SANDBOX_BWRAP,
        "--",
        SANDBOX_BWRAP,
        *nested_namespace_args(),
        "--",
        "/bin/true",
    ]
    result = run_managed(argv, env={"PATH": "/usr/bin:/bin"}, timeout=PREFLIGHT_TIMEOUT_S, cwd="/")
    if not result.ok:
        detail = "; ".join(part for part in (result.stderr_tail.strip()[-1000:], result.detail) if part)
        raise SandboxError(
            f"Bubblewrap preflight failed ({result.state}, exit {result.returncode}): {detail}. "
            f"The sandbox ({executable}) needs unprivileged user namespaces, including nested ones; "
            "fix the machine or set sandbox.backend: none (rows are then stamped and cannot promote)"
        )


def _real_directory(path: Path, label: str) -> Path:
    path = Path(path).absolute()
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or path.resolve(strict=True) != path:
        raise SandboxError(f"{label} must be a real directory without symlinks: {path}")
    return path


def _hand_over(root: Path, uid: int, gid: int) -> None:
    """Give a tree the sandbox's host id (symlinks themselves, never their targets)."""
    os.lchown(root, uid, gid)
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            os.lchown(os.path.join(directory, name), uid, gid)


@dataclass
class Sandbox:
    """One cell's containment: a clone plus a private root holding home, tmp and wrappers.

    `close()` releases the sandbox's host id; a Sandbox that is never closed keeps it until the
    process ends.
    """

    backend: str
    clone: Path
    private_root: Path
    bwrap: str = "bwrap"
    agent_install: AgentInstall | None = None
    read_only_paths: list[str] = field(default_factory=list)
    limits: SandboxLimits = field(default_factory=SandboxLimits.default)
    # The cell's cgroup (`execution.cgroups`, bwrap only): every command joins it, and it, not per-process limits,
    # bounds the memory and processes of everything the sandbox runs, the CLI included.
    cgroup: CellCgroup | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SandboxError(f"unknown sandbox backend {self.backend!r}; use one of {BACKENDS}")
        self.clone = _real_directory(self.clone, "the clone")
        self.private_root = _real_directory(self.private_root, "the private root")
        self.home_host = self.private_root / "home"
        self.tmp_host = self.private_root / "tmp"
        self.tools_host = self.private_root / "tools"
        self.mounts_host = self.private_root / "mounts"
        for folder in (self.home_host, self.tmp_host, self.tools_host, self.mounts_host):
            folder.mkdir(mode=0o700, exist_ok=True)
        self.launcher: list[str] = []
        self._id_lock: int | None = None
        # Sandbox paths the agent's commands must not see (hide_from_tools), and the MCP launchers written.
        self.hidden_from_tools: list[str] = []
        self._launchers: set[str] = set()
        self.git_executable = resolve_git()
        if self.backend == "bwrap":
            self._prepare_bubblewrap()
        else:
            self.host_uid, self.host_gid = os.geteuid(), os.getegid()
        if self.backend != "bwrap":
            self.cgroup = None
        # RLIMIT_NPROC counts per uid: without a uid of its own the sandbox would share the count
        # with the harness and everything else the user runs. A cell's cgroup counts its processes and memory
        # itself (pids.max, memory.max), so then no per-process limit but the file size is set.
        self._limit_processes = bool(self.launcher) and self.cgroup is None
        self._limit_memory = self.cgroup is None
        wanted = self.backend == "bwrap" and bool(
            self.limits.prlimit_args(memory=self._limit_memory, processes=self._limit_processes)
        )
        self.prlimit = resolve_prlimit() if wanted else None
        self._write_tools()
        self._scratch_count = 0
        self._shared: set[Path] = set()
        if self.launcher:
            self._hand_over_private_trees()
            self._check_cli_is_readable()

    def _prepare_bubblewrap(self) -> None:
        """The project settings folder, the Bubblewrap executable and (as root) a host id of the sandbox's own."""
        # Project settings live in <clone>/.claude; it must exist so that tool commands get it
        # read-only (an empty folder is invisible to git, churn and patches).
        project_claude = self.clone / ".claude"
        if project_claude.is_symlink() or (project_claude.exists() and not project_claude.is_dir()):
            raise SandboxError(f"{project_claude} must be a real directory")
        project_claude.mkdir(exist_ok=True)
        self.bwrap = resolve_bwrap(self.bwrap)
        if os.geteuid() == 0:
            uid, self._id_lock = allocate_host_id(str(self.private_root))
            self.launcher = launcher_args(uid)
            self.host_uid = self.host_gid = uid
        else:
            self.host_uid, self.host_gid = os.geteuid(), os.getegid()

    def _write_tools(self) -> None:
        """The shell-prefix and git wrappers, the synthetic passwd and group, the empty file and (with a memory limit)
        the cell's /proc/meminfo, in `tools_host`."""
        self._write_wrappers()
        (self.tools_host / "passwd").write_text(SYNTHETIC_PASSWD)
        (self.tools_host / "group").write_text(SYNTHETIC_GROUP)
        (self.tools_host / "empty").write_bytes(b"")
        if self._meminfo:
            from skillbench.execution.cgroups import MEMINFO, synthetic_meminfo

            assert self.cgroup is not None and self.cgroup.limits.memory_bytes is not None
            (self.tools_host / "meminfo").write_text(
                synthetic_meminfo(MEMINFO.read_text(), self.cgroup.limits.memory_bytes)
            )

    @property
    def _meminfo(self) -> bool:
        """Whether the sandbox shows its processes the cell's /proc/meminfo (a cell with a memory limit)."""
        return self.cgroup is not None and self.cgroup.limits.memory_bytes is not None

    def _write_wrappers(self) -> None:
        """The shell-prefix and git wrappers (replaced whole: the sandbox's host id may own the old ones)."""
        nested = SANDBOX_BWRAP if self.backend == "bwrap" else None
        launchers = [f"{SANDBOX_MCP_LAUNCHERS}/{name}" for name in sorted(self._launchers)]
        # Under bwrap the wrappers run on the real dash: a contained CLI's /bin/sh is itself a wrapper.
        interpreter = f"{SANDBOX_REAL_SHELLS}/dash" if nested else "/bin/sh"
        tool_exec = ToolExec(
            home=self.home,
            tmp=self.tmp,
            path=self.path,
            nested_bwrap=nested,
            prlimit=self._inner_memory_limit(),
            hidden=self.hidden_from_tools,
            meminfo=self._meminfo,
        )
        scripts = {
            "shell-prefix": shell_prefix_script(tool_exec, launchers=launchers, interpreter=interpreter),
            "git": git_wrapper_script(tool_exec, git=self.git_executable, interpreter=interpreter),
        }
        if nested:
            for shell in CONTAINED_SHELLS:
                scripts[f"contained-{Path(shell).name}"] = contained_shell_script(shell, tool_exec)
        for name, text in scripts.items():
            path = self.tools_host / name
            path.unlink(missing_ok=True)
            path.write_text(text)
            path.chmod(0o500)
            if self.launcher:
                os.lchown(path, self.host_uid, self.host_gid)

    def mcp_launcher(self, name: str, argv: Sequence[str]) -> list[str]:
        """The argv the CLI is given for one MCP server: a harness-written launcher that execs `argv` (the server in
        its own sandbox). Under bwrap the shell prefix starts exactly these launchers with the servers' mounts
        visible, so the mounts can stay hidden from the agent's own commands."""
        if self.backend != "bwrap":
            return list(argv)
        folder = self.tools_host / "mcp"
        folder.mkdir(mode=0o755, exist_ok=True)
        launcher = folder / name
        launcher.unlink(missing_ok=True)
        launcher.write_text(
            "#!/bin/sh\n# skillbench: one MCP server, in its own sandbox.\nexec " + shlex.join(argv) + "\n"
        )
        launcher.chmod(0o500)
        if self.launcher:
            os.lchown(folder, self.host_uid, self.host_gid)
            os.lchown(launcher, self.host_uid, self.host_gid)
        if name not in self._launchers:
            self._launchers.add(name)
            self._write_wrappers()
        return [f"{SANDBOX_MCP_LAUNCHERS}/{name}"]

    def hide_from_tools(self, paths: Sequence[str]) -> None:
        """From the next command on, the agent's commands (Bash tool, git) see an empty folder at each of `paths`
        (sandbox paths an MCP server reads, which only the server may see)."""
        hidden = sorted(set(paths))
        if hidden != self.hidden_from_tools:
            self.hidden_from_tools = hidden
            self._write_wrappers()

    def _hand_over_private_trees(self) -> None:
        """Give the private root and the clone to the sandbox's host id (which must be able to reach them)."""
        for tree in (self.private_root, self.clone):
            if tree != self.private_root and tree.is_relative_to(self.private_root):
                continue
            if not all(self._allows(parent, stat.S_IXOTH) for parent in tree.parents):
                raise SandboxError(
                    f"{tree} lies under a folder the sandbox user (host uid {self.host_uid}) "
                    "cannot enter; put private roots under a world-searchable folder such as /tmp"
                )
            _hand_over(tree, self.host_uid, self.host_gid)

    def _check_cli_is_readable(self) -> None:
        if self.agent_install is None:
            return
        install = self.agent_install.host_path.resolve()
        executable = self.agent_install.host_executable.resolve()
        if not (
            all(self._allows(parent, stat.S_IXOTH) for parent in install.parents)
            and self._allows(install, stat.S_IROTH | (stat.S_IXOTH if install.is_dir() else 0))
            and self._allows(executable, stat.S_IROTH | stat.S_IXOTH)
        ):
            raise SandboxError(
                f"the agent CLI {self.agent_install.host_path} is not readable by the sandbox user "
                f"(host uid {self.host_uid}); install it under world-readable folders"
            )

    def close(self) -> None:
        """Release the host id (idempotent)."""
        if self._id_lock is not None:
            os.close(self._id_lock)
            self._id_lock = None

    def fresh_scratch(self, name: str) -> tuple[Path, Path]:
        """Give the next commands a new, empty home and tmp; return their host paths.

        A session's home is writable by its tool commands, and the CLI's start-up shell sources
        the home's dotfiles with the key in its environment; verify and the oracle must not run
        anything an earlier process left in a home or tmp either.
        """
        self._scratch_count += 1
        root = self.private_root / "scratch" / f"{self._scratch_count}-{name}"
        root.mkdir(parents=True, mode=0o700)
        (root.parent).chmod(0o700)
        home, tmp = root / "home", root / "tmp"
        home.mkdir(mode=0o700)
        tmp.mkdir(mode=0o700)
        if self.launcher:
            for path in (root.parent, root, home, tmp):
                os.lchown(path, self.host_uid, self.host_gid)
        self.home_host, self.tmp_host = home, tmp
        return home, tmp

    @property
    def workspace(self) -> str:
        return SANDBOX_WORKSPACE if self.backend == "bwrap" else str(self.clone)

    @property
    def home(self) -> str:
        return SANDBOX_HOME if self.backend == "bwrap" else str(self.home_host)

    @property
    def tmp(self) -> str:
        return SANDBOX_TMP if self.backend == "bwrap" else str(self.tmp_host)

    @property
    def path(self) -> str:
        if self.backend == "bwrap":
            return SANDBOX_PATH
        host_path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        return f"{self.tools_host}:{host_path}"

    @property
    def agent_executable(self) -> str:
        """The path that starts the sandbox's agent CLI, as a process in the sandbox sees it."""
        if self.agent_install is None:
            raise SandboxError("no agent CLI was given to this sandbox")
        return self.agent_install.executable(self.backend)

    @property
    def shell_prefix(self) -> str:
        return SANDBOX_SHELL_PREFIX if self.backend == "bwrap" else str(self.tools_host / "shell-prefix")

    @property
    def empty_file(self) -> Path:
        """A harness-owned empty file, to bind over a workspace file that must not take effect."""
        return self.tools_host / "empty"

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**base_environment(home=self.home, tmp=self.tmp, path=self.path), **(extra or {})}

    def to_sandbox(self, host_path: Path) -> str:
        """Where a path inside the clone appears to the sandboxed process."""
        relative = Path(host_path).absolute().relative_to(self.clone)
        return f"{self.workspace}/{relative.as_posix()}" if str(relative) != "." else self.workspace

    def _allows(self, path: Path, other_bits: int) -> bool:
        """Whether the sandbox's host id has the permission `other_bits` (given as the "other" bits) on `path`."""
        info = os.stat(path)
        if info.st_uid == self.host_uid:
            bits = other_bits << 6
        elif info.st_gid == self.host_gid:
            bits = other_bits << 3
        else:
            bits = other_bits
        return info.st_mode & bits == bits

    def _readable_source(self, host: Path) -> Path:
        """A host path the sandbox's host id can bind: trees in the private root are handed over, others copied."""
        host = Path(host).absolute()
        if not self.launcher:
            return host
        if host.is_relative_to(self.private_root):
            _hand_over(host, self.host_uid, self.host_gid)
            return host
        if host in self._shared:
            return host
        copy = self.mounts_host / f"{len(os.listdir(self.mounts_host))}-{host.name}"
        if host.is_dir():
            shutil.copytree(host, copy, symlinks=True)
        else:
            shutil.copy2(host, copy, follow_symlinks=False)
        _hand_over(copy, self.host_uid, self.host_gid)
        return copy

    def share_read_only(self, host: Path) -> None:
        """Let `host` be bound read-only as it is rather than copied, when every uid can read it (an MCP
        server's SDK or a plugin: trusted, read-only, possibly large)."""
        host = Path(host).absolute()
        if host not in self._shared and world_readable_tree(host):
            self._shared.add(host)

    def mcp_server_argv(self, **server: Unpack[McpServerLaunch]) -> list[str]:
        """`mcp_server_argv` for this sandbox (the address-space limit included); the `none` backend runs the
        server on the host with only its environment."""
        if self.backend == "none":
            variables = (f"{name}={value}" for name, value in server["env"].items())
            return ["/usr/bin/env", "-i", *variables, server["command"], *server["args"]]
        return mcp_server_argv(**server, prlimit=self._inner_memory_limit())

    def _inner_memory_limit(self) -> list[str] | None:
        """The prlimit call (argv before `--`) that gives a process the agent starts inside the sandbox
        the address-space limit, or None when there is none."""
        if self.prlimit and self._limit_memory and self.limits.memory_mb > 0:
            return [self.prlimit, *self.limits.prlimit_args(memory=True, processes=False)]
        return None

    def _limit_prefix(self, memory: bool) -> list[str]:
        if not self.prlimit:
            return []
        args = self.limits.prlimit_args(memory=memory and self._limit_memory, processes=self._limit_processes)
        return [self.prlimit, *args, "--"] if args else []

    def command(
        self,
        argv: Sequence[str],
        *,
        read_only_workspace: bool = False,
        extra_read_only: Sequence[tuple[Path, str]] = (),
        extra_writable: Sequence[tuple[Path, str]] = (),
        limit_memory: bool = False,
        contain_shells: bool = False,
    ) -> list[str]:
        """Wrap `argv` so it runs contained; `extra_read_only`/`extra_writable` bind (host path, sandbox path) pairs.

        `contain_shells` (a CLI without a shell-prefix hook) binds `contained_shell_script` over its shells, so
        every shell it starts runs in a nested sandbox without its environment.

        Every cell sandbox has a network namespace of its own with nothing in it but loopback: a session reaches
        its model only through the gateway's socket bound in (`sessions.bridged_command`). `limit_memory` adds
        the address-space limit (everything but the CLI process itself) to a sandbox without a cgroup. With a cgroup,
        the command joins it first, and with a memory limit it reads the cell's /proc/meminfo (`SANDBOX_PROC_COPY`
        says why a second /proc comes with it).
        """
        if self.backend == "none":
            return list(argv)
        return [
            *(self.cgroup.join_argv() if self.cgroup is not None else []),
            *self._limit_prefix(limit_memory),
            *self.launcher,
            self.bwrap,
            *namespace_args(network=False, outer=True),
            *system_mount_args(),
            *account_file_args(str(self.tools_host / "passwd"), str(self.tools_host / "group")),
            *kernel_filesystem_args("/run"),
            *(["--proc", SANDBOX_PROC_COPY] if self._meminfo else []),
            *self._cell_binds(read_only_workspace),
            *(self._contained_shell_binds() if contain_shells else []),
            *self._skill_root_binds(),
            *self._extra_binds(extra_read_only, extra_writable),
            *(["--ro-bind", str(self.tools_host / "meminfo"), "/proc/meminfo"] if self._meminfo else []),
            *closing_args(chdir=SANDBOX_WORKSPACE, argv=argv),
        ]

    def _cell_binds(self, read_only_workspace: bool) -> list[str]:
        """The clone, the current home and tmp, the harness's wrappers and CLI, and the empty shell start-up files."""
        args = [
            "--ro-bind" if read_only_workspace else "--bind",
            str(self.clone),
            SANDBOX_WORKSPACE,
            "--bind",
            str(self.home_host),
            SANDBOX_HOME,
            "--bind",
            str(self.tmp_host),
            SANDBOX_TMP,
            "--ro-bind",
            str(self.tools_host / "shell-prefix"),
            SANDBOX_SHELL_PREFIX,
            "--ro-bind",
            str(self.tools_host / "git"),
            SANDBOX_GIT_WRAPPER,
            *(["--ro-bind", str(self.tools_host / "mcp"), SANDBOX_MCP_LAUNCHERS] if self._launchers else []),
            "--ro-bind",
            self.bwrap,
            SANDBOX_BWRAP,
            *(["--ro-bind", str(self.tools_host / "meminfo"), SANDBOX_MEMINFO] if self._meminfo else []),
        ]
        if self.agent_install is not None:
            args += ["--ro-bind", str(self.agent_install.host_path.resolve()), self.agent_install.sandbox_path]
        for shell in CONTAINED_SHELLS:
            args += ["--ro-bind", str(Path(shell).resolve()), f"{SANDBOX_REAL_SHELLS}/{Path(shell).name}"]
        for name in SHELL_STARTUP_FILES:
            args += ["--ro-bind", str(self.empty_file), f"{SANDBOX_HOME}/{name}"]
        return args

    def _contained_shell_binds(self) -> list[str]:
        args: list[str] = []
        for shell in CONTAINED_SHELLS:
            args += ["--ro-bind", str(self.tools_host / f"contained-{Path(shell).name}"), shell]
        return args

    def _skill_root_binds(self) -> list[str]:
        """Skill roots stay read-only even while the workspace is writable: a session must not
        rewrite the skills it is being measured on. (Binds over the workspace, so they come after it.)"""
        args: list[str] = []
        for relative in self.read_only_paths:
            host = self.clone / relative
            if host.is_dir() and not host.is_symlink():
                if self.launcher:
                    _hand_over(host, self.host_uid, self.host_gid)
                args += ["--ro-bind", str(host), f"{SANDBOX_WORKSPACE}/{relative}"]
        return args

    def _extra_binds(self, read_only: Sequence[tuple[Path, str]], writable: Sequence[tuple[Path, str]]) -> list[str]:
        args: list[str] = []
        for host, target in read_only:
            args += ["--ro-bind", str(self._readable_source(host)), target]
        for host, target in writable:
            args += ["--bind", str(self._readable_source(host)), target]
        return args

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        read_only_workspace: bool = False,
        extra_read_only: Sequence[tuple[Path, str]] = (),
        extra_writable: Sequence[tuple[Path, str]] = (),
        limit_memory: bool = True,
        **kwargs: Any,
    ) -> ProcessResult:
        wrapped = self.command(
            argv,
            read_only_workspace=read_only_workspace,
            extra_read_only=extra_read_only,
            extra_writable=extra_writable,
            limit_memory=limit_memory,
        )
        cwd = "/" if self.backend == "bwrap" else str(self.clone)
        return run_managed(
            wrapped, env=env if env is not None else self.environment(), timeout=timeout, cwd=cwd, **kwargs
        )

    def git(self, timeout: float = 120) -> GitRunner:
        """A repo.GitRunner for the clone's own repository, before any session ran in it (hooks and filters off)."""
        from skillbench.execution.repo import SAFE_GIT_CONFIG, SANITIZED_IDENTITY

        def run(args: Sequence[str], capture_stdout_bytes: int | None = None) -> ProcessResult:
            env = self.environment({"GIT_CONFIG_GLOBAL": "/dev/null", **SANITIZED_IDENTITY})
            return self.run(
                [self.git_executable, *SAFE_GIT_CONFIG, *args],
                timeout=timeout,
                env=env,
                capture_stdout_bytes=capture_stdout_bytes,
            )

        return run

    def apply_patch(self, patch: bytes, timeout: float = 120) -> ProcessResult:
        """`git apply` a patch (on stdin) to the clone's work tree, uncommitted, in the sandbox like every git of the
        clone before any session (a reference solution in the task check, a review task's change in a cell)."""
        from skillbench.execution.repo import SAFE_GIT_CONFIG, SANITIZED_IDENTITY

        env = self.environment({"GIT_CONFIG_GLOBAL": "/dev/null", **SANITIZED_IDENTITY})
        return self.run(
            [self.git_executable, *SAFE_GIT_CONFIG, "apply", "--whitespace=nowarn", "-"],
            timeout=timeout,
            env=env,
            stdin_data=patch,
        )

    def harness_git(self, git_dir: Path, timeout: float = 120) -> GitRunner:
        """A repo.GitRunner over the clone's work tree with the harness-owned repository `git_dir`.

        Nothing of the clone's `.git` is read (git always skips a `.git` entry in the work tree):
        no config, attributes file, hooks or index the agent could have written. The workspace is
        read-only, the network is off, and the home is a path that does not exist, so neither
        the agent's ~/.gitconfig nor ~/.config/git/attributes is read either.
        """
        run_script = self.harness_script(git_dir, timeout)

        def run(args: Sequence[str], capture_stdout_bytes: int | None = None) -> ProcessResult:
            return run_script('exec "$@"', list(args), capture_stdout_bytes=capture_stdout_bytes)

        return run

    def harness_script(self, git_dir: Path, timeout: float = 120) -> ScriptRunner:
        """A repo.ScriptRunner: `/bin/sh -c SCRIPT sh GIT ARGS...` with the harness git environment (harness_git)."""
        from skillbench.execution.repo import HARNESS_GIT_SETTINGS, SANITIZED_IDENTITY, config_environment

        git_dir = Path(git_dir)
        location = SANDBOX_HARNESS_GIT if self.backend == "bwrap" else str(git_dir)
        writable = [(git_dir, SANDBOX_HARNESS_GIT)] if self.backend == "bwrap" else []

        def run(script: str, args: Sequence[str], capture_stdout_bytes: int | None = None) -> ProcessResult:
            env = self.environment(
                {
                    "HOME": "/nonexistent",
                    "XDG_CONFIG_HOME": "/nonexistent",
                    "GIT_CONFIG_GLOBAL": "/dev/null",
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_DIR": location,
                    "GIT_WORK_TREE": self.workspace,
                    "GIT_ATTR_NOSYSTEM": "1",
                    **config_environment(HARNESS_GIT_SETTINGS),
                    **SANITIZED_IDENTITY,
                }
            )
            return self.run(
                ["/bin/sh", "-c", script, "sh", self.git_executable, *args],
                timeout=timeout,
                env=env,
                read_only_workspace=True,
                extra_writable=writable,
                capture_stdout_bytes=capture_stdout_bytes,
            )

        return run
