"""Containment: Bubblewrap command wrapping, the scratch environment, Claude Code settings, the preflight.

Every subprocess a cell runs in its clone (setup, sessions, verify, oracle, git) is wrapped
here. Under `bwrap`:

* the sandbox never runs as host root: when the harness is root, Bubblewrap is started through
  `setpriv` as the unprivileged host id `UNPRIVILEGED_HOST_ID` (no capabilities, empty bounding
  set, no_new_privs), and the sandbox's private folders and clone are handed to that id;
* inside, the process is `agent` (uid/gid 1000) in new user, PID, IPC, UTS and cgroup
  namespaces with every capability dropped, `--die-with-parent` and `--new-session`;
* the clone is `/workspace` (the only writable project tree; skill roots are bound read-only
  over it), home and tmp are private folders, `/run` is a tmpfs, and only system folders are
  visible, read-only — never the host root, home or results; `/etc/passwd` and `/etc/group`
  are synthetic; the root itself is remounted read-only;
* `verify` and the oracle add a read-only workspace and no network.

The environment is built from scratch; the model key is added by the caller for the CLI process
only. Claude Code runs every Bash tool command through the shell-prefix wrapper
(`CLAUDE_CODE_SHELL_PREFIX`), which clears the environment and starts the command in a nested
Bubblewrap with its own PID namespace and `/proc`, no network, and the CLI's settings and state
(`~/.claude`, `~/.claude.json`, `/workspace/.claude`) read-only: a tool command can neither read
the CLI's environment or memory through `/proc`, nor reach any socket, nor plant a settings file
whose `env` would send the key elsewhere. The CLI's own file tools are held back by the deny
rules of `claude_settings`. The `none` backend runs on the host (for machines without user
namespaces); it contains nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .process import run_managed

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_HOME = "/home/agent"
SANDBOX_TMP = "/tmp"
SANDBOX_TOOLS = "/opt/claude"
SANDBOX_CLAUDE = f"{SANDBOX_TOOLS}/claude"
SANDBOX_SHELL_PREFIX = f"{SANDBOX_TOOLS}/shell-prefix"
SANDBOX_BWRAP = f"{SANDBOX_TOOLS}/bwrap"
SANDBOX_PATH = f"{SANDBOX_TOOLS}:/usr/local/bin:/usr/bin:/bin"
SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOSTNAME = "skillbench"
# The host uid/gid a sandbox runs as when the harness itself is root. Nothing on the host should
# own files under this id; every file it creates lives in a cell's private root.
UNPRIVILEGED_HOST_ID = 65432
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("/etc/ssl", "/etc/ca-certificates", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
               "/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime", "/etc/python3", "/etc/python3.11")
SYNTHETIC_PASSWD = (
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"agent:x:{SANDBOX_UID}:{SANDBOX_GID}:agent:{SANDBOX_HOME}:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
SYNTHETIC_GROUP = f"root:x:0:\nagent:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"
PREFLIGHT_TIMEOUT_S = 10
BACKENDS = ("bwrap", "none")
# Tools a session may use without a prompt (the arm's --tools narrows this further).
ALLOWED_TOOLS = ("Read", "Edit", "Write", "Bash", "Skill")
DENIED_TOOLS = ("WebFetch", "WebSearch", "Agent", "Task", "NotebookEdit")
# Host-owned sandbox paths the CLI's own file tools must not open (the Read/Edit/Write tools run
# inside the CLI process, which holds the model key).
PROTECTED_PATHS = ("/proc", "/sys", "/dev")


class SandboxError(RuntimeError):
    """The sandbox cannot be built or does not work on this machine."""


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
    return {name: value for name, value in base_environment(home=home, tmp=tmp, path=path).items()
            if not name.startswith(("CLAUDE_", "DISABLE_"))}


# Files the CLI (re)reads its settings and state from. A settings file is reloaded while the session
# runs, and its `env` can point ANTHROPIC_BASE_URL (and so the key) anywhere: tool commands get them
# read-only, and the CLI's own file tools are denied them (see claude_settings).
CLI_STATE_PATHS = (f"{SANDBOX_HOME}/.claude", f"{SANDBOX_HOME}/.claude.json", f"{SANDBOX_WORKSPACE}/.claude")


def nested_namespace_args() -> list[str]:
    """The nested sandbox of one Bash tool command: same files, own PID namespace and /proc, no network."""
    args = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--unshare-pid",
            "--unshare-ipc", "--unshare-net", "--die-with-parent", "--cap-drop", "ALL",
            "--dev-bind", "/", "/", "--proc", "/proc"]
    for path in CLI_STATE_PATHS:
        args += ["--ro-bind-try", path, path]
    return args


def shell_prefix_script(*, home: str, tmp: str, path: str, nested_bwrap: str | None = None) -> str:
    """Claude Code runs every Bash tool command as `<prefix> <command>`; this restarts it with an empty environment.

    So a command the model writes never sees ANTHROPIC_API_KEY or anything else the CLI holds. With
    `nested_bwrap` (the bwrap backend) the command also runs in a nested Bubblewrap: a PID namespace
    and /proc of its own (the CLI's /proc/<pid>/environ and memory are out of reach) and no network.
    The nested sandbox binds the sandbox's own root (`/`), which never holds more than the outer
    sandbox shows.
    """
    variables = " ".join(f"{name}={value}" for name, value in tool_environment(home=home, tmp=tmp, path=path).items())
    command = "/bin/bash -c \"$1\""
    if nested_bwrap:
        command = f"{nested_bwrap} {' '.join(nested_namespace_args())} -- {command}"
    return (
        "#!/bin/sh\n"
        "# skillbench: run one Bash tool command with a fixed, credential-free environment.\n"
        'if [ "$#" -ne 1 ]; then echo "shell-prefix: expected exactly one command argument" >&2; exit 64; fi\n'
        f"exec /usr/bin/env -i {variables} {command}\n"
    )


def bwrap_namespace_args(*, network: bool) -> list[str]:
    args = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--hostname", SANDBOX_HOSTNAME, "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    return [*args, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


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
        raise SandboxError(f"Bubblewrap ({name!r}) was not found; install the Debian package `bubblewrap` "
                           "(make setup does) or set sandbox.backend: none on machines without user namespaces")
    return str(Path(found).resolve())


def host_identity() -> tuple[int, int]:
    """The host uid/gid sandboxed processes run as: never root."""
    if os.geteuid() == 0:
        return UNPRIVILEGED_HOST_ID, UNPRIVILEGED_HOST_ID
    return os.geteuid(), os.getegid()


def launcher_args() -> list[str]:
    """As root, start Bubblewrap as the unprivileged host id with no capabilities at all; otherwise nothing."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not setpriv:
        raise SandboxError("setpriv (util-linux) was not found; the harness runs as root and needs it to start "
                           "the sandbox as an unprivileged user")
    uid, gid = host_identity()
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


def preflight(bwrap: str) -> None:
    """Run `true` inside the full namespace set and the nested tool sandbox once; raise if containment fails here."""
    if not sys.platform.startswith("linux"):
        raise SandboxError("the bwrap sandbox works only on Linux; set sandbox.backend: none elsewhere")
    executable = resolve_bwrap(bwrap)
    argv = [*launcher_args(), executable, *bwrap_namespace_args(network=False), *system_mount_args(),
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", executable, SANDBOX_BWRAP,
            "--", SANDBOX_BWRAP, *nested_namespace_args(), "--", "/bin/true"]
    result = run_managed(argv, env={"PATH": "/usr/bin:/bin"}, timeout=PREFLIGHT_TIMEOUT_S, cwd="/")
    if not result.ok:
        detail = "; ".join(part for part in (result.stderr_tail.strip()[-1000:], result.detail) if part)
        raise SandboxError(f"Bubblewrap preflight failed ({result.state}, exit {result.returncode}): {detail}. "
                           f"The sandbox ({executable}) needs unprivileged user namespaces, including nested ones; "
                           "fix the machine or set sandbox.backend: none (rows are then stamped and cannot promote)")


def claude_settings(*, sandbox_backend: str, cli_sandbox: bool = False) -> str:
    """The Claude Code settings every session gets with --settings (compact, key-sorted JSON).

    * hooks are off (`disableAllHooks`), bypass mode is disabled;
    * `permissions.allow` pre-approves the harness's tools (the arm's --tools still narrows the list);
      web, subagent and notebook tools are denied;
    * under bwrap the CLI's own file tools (Read/Edit/Write run inside the CLI process, which holds
      the model key) may not open /proc, /sys, /dev or ~/.claude, nor write the CLI's settings and
      state (`CLI_STATE_PATHS`); the CLI resolves symlinks before it applies these rules;
    * `cli_sandbox=True` (bwrap only) also turns on the CLI's own Bash sandbox as a second layer:
      writes only to /workspace and /tmp, every network domain denied, no unsandboxed fallback,
      fail if unavailable. It works inside our Bubblewrap once socat is installed (Claude Code
      needs bwrap and socat for it), but it is off by default because it changes what the
      measured agent sees: while each Bash command runs it mounts /dev/null over absent dotfiles
      (.bashrc, .gitconfig, .mcp.json, .vscode, ...), which show up as untracked entries in
      /workspace and make `git add -A` fail. The first layer (the shell-prefix's nested
      Bubblewrap) does not depend on it.
    """
    if sandbox_backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {sandbox_backend!r}; use one of {BACKENDS}")
    deny = [*DENIED_TOOLS]
    settings: dict = {"disableAllHooks": True}
    if sandbox_backend == "bwrap":
        for root in (*PROTECTED_PATHS, f"{SANDBOX_HOME}/.claude"):
            deny += [f"Read(/{root}/**)", f"Edit(/{root}/**)", f"Write(/{root}/**)"]
        for state in CLI_STATE_PATHS:
            deny += [f"Edit(/{state})", f"Write(/{state})", f"Edit(/{state}/**)", f"Write(/{state}/**)"]
        if cli_sandbox:
            settings["sandbox"] = {
                "enabled": True,
                "failIfUnavailable": True,
                "allowUnsandboxedCommands": False,
                "autoAllowBashIfSandboxed": True,
                "network": {"allowedDomains": [], "deniedDomains": ["*"], "allowLocalBinding": False,
                            "allowAllUnixSockets": False},
                "filesystem": {"allowWrite": [SANDBOX_WORKSPACE, SANDBOX_TMP]},
            }
    settings["permissions"] = {"allow": list(ALLOWED_TOOLS), "deny": deny, "disableBypassPermissionsMode": "disable"}
    return json.dumps(settings, separators=(",", ":"), sort_keys=True)


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
    """One cell's containment: a clone plus a private root holding home, tmp and wrappers."""

    backend: str
    clone: Path
    private_root: Path
    bwrap: str = "bwrap"
    claude_bin: Path | None = None
    read_only_paths: list[str] = field(default_factory=list)

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
        if self.backend == "bwrap":
            # Project settings live in <clone>/.claude; it must exist so that tool commands get it
            # read-only (an empty folder is invisible to git, churn and patches).
            project_claude = self.clone / ".claude"
            if project_claude.is_symlink() or (project_claude.exists() and not project_claude.is_dir()):
                raise SandboxError(f"{project_claude} must be a real directory")
            project_claude.mkdir(exist_ok=True)
            self.bwrap = resolve_bwrap(self.bwrap)
            self.launcher = launcher_args()
        self.host_uid, self.host_gid = host_identity() if self.backend == "bwrap" else (os.geteuid(), os.getegid())
        prefix = self.tools_host / "shell-prefix"
        prefix.write_text(shell_prefix_script(home=self.home, tmp=self.tmp, path=self.path,
                                              nested_bwrap=SANDBOX_BWRAP if self.backend == "bwrap" else None))
        prefix.chmod(0o500)
        (self.tools_host / "passwd").write_text(SYNTHETIC_PASSWD)
        (self.tools_host / "group").write_text(SYNTHETIC_GROUP)
        if self.launcher:
            for tree in (self.private_root, self.clone):
                if tree != self.private_root and tree.is_relative_to(self.private_root):
                    continue
                if not all(self._allows(parent, stat.S_IXOTH) for parent in tree.parents):
                    raise SandboxError(f"{tree} lies under a folder the sandbox user (host uid {self.host_uid}) "
                                       "cannot enter; put private roots under a world-searchable folder such as /tmp")
                _hand_over(tree, self.host_uid, self.host_gid)
            claude = Path(self.claude_bin).resolve() if self.claude_bin is not None else None
            if claude is not None and not (all(self._allows(parent, stat.S_IXOTH) for parent in claude.parents)
                                           and self._allows(claude, stat.S_IROTH | stat.S_IXOTH)):
                raise SandboxError(f"the Claude Code CLI {self.claude_bin} is not readable by the sandbox user "
                                   f"(host uid {self.host_uid}); install it under world-readable folders")

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
    def claude(self) -> str:
        if self.claude_bin is None:
            raise SandboxError("no Claude Code CLI was given to this sandbox")
        return SANDBOX_CLAUDE if self.backend == "bwrap" else str(self.claude_bin)

    @property
    def shell_prefix(self) -> str:
        return SANDBOX_SHELL_PREFIX if self.backend == "bwrap" else str(self.tools_host / "shell-prefix")

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
        copy = self.mounts_host / f"{len(os.listdir(self.mounts_host))}-{host.name}"
        if host.is_dir():
            shutil.copytree(host, copy, symlinks=True)
        else:
            shutil.copy2(host, copy, follow_symlinks=False)
        _hand_over(copy, self.host_uid, self.host_gid)
        return copy

    def command(self, argv: Sequence[str], *, read_only_workspace: bool = False, network: bool = True,
                extra_read_only: Sequence[tuple[Path, str]] = ()) -> list[str]:
        """Wrap `argv` so it runs contained; `extra_read_only` binds (host path, sandbox path) pairs."""
        if self.backend == "none":
            return list(argv)
        args = [*self.launcher, self.bwrap, *bwrap_namespace_args(network=network), *system_mount_args(),
                "--ro-bind", str(self.tools_host / "passwd"), "/etc/passwd",
                "--ro-bind", str(self.tools_host / "group"), "/etc/group",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run",
                "--ro-bind" if read_only_workspace else "--bind", str(self.clone), SANDBOX_WORKSPACE,
                "--bind", str(self.home_host), SANDBOX_HOME,
                "--bind", str(self.tmp_host), SANDBOX_TMP,
                "--ro-bind", str(self.tools_host / "shell-prefix"), SANDBOX_SHELL_PREFIX,
                "--ro-bind", self.bwrap, SANDBOX_BWRAP]
        if self.claude_bin is not None:
            args += ["--ro-bind", str(Path(self.claude_bin).resolve()), SANDBOX_CLAUDE]
        # Skill roots stay read-only even while the workspace is writable: a session must not
        # rewrite the skills it is being measured on.
        for relative in self.read_only_paths:
            host = self.clone / relative
            if host.is_dir() and not host.is_symlink():
                if self.launcher:
                    _hand_over(host, self.host_uid, self.host_gid)
                args += ["--ro-bind", str(host), f"{SANDBOX_WORKSPACE}/{relative}"]
        for host, target in extra_read_only:
            args += ["--ro-bind", str(self._readable_source(host)), target]
        # The root itself (a tmpfs holding the mount points) is read-only too: nothing can be
        # created beside the binds.
        return [*args, "--remount-ro", "/", "--chdir", SANDBOX_WORKSPACE, "--", *argv]

    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            read_only_workspace: bool = False, network: bool = True,
            extra_read_only: Sequence[tuple[Path, str]] = (), **kwargs):
        wrapped = self.command(argv, read_only_workspace=read_only_workspace, network=network,
                               extra_read_only=extra_read_only)
        cwd = "/" if self.backend == "bwrap" else str(self.clone)
        return run_managed(wrapped, env=env if env is not None else self.environment(), timeout=timeout, cwd=cwd,
                           **kwargs)

    def git(self, timeout: float = 120):
        """A repo.GitRunner that runs git on the clone inside the sandbox with hooks and filters off."""
        from .repo import SAFE_GIT_CONFIG, SANITIZED_IDENTITY

        def run(args: Sequence[str], capture_stdout_bytes: int | None = None):
            env = self.environment({"GIT_CONFIG_GLOBAL": "/dev/null", **SANITIZED_IDENTITY})
            return self.run(["git", *SAFE_GIT_CONFIG, *args], timeout=timeout, env=env,
                            capture_stdout_bytes=capture_stdout_bytes)

        return run

