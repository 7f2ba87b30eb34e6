"""Containment: Bubblewrap command wrapping, the scratch environment, and the preflight.

Every subprocess a cell runs in its clone (setup, sessions, verify, oracle, git) is wrapped
here. Under `bwrap` the clone is `/workspace` (the only writable project tree), home and
tmp are private, `/run` is a tmpfs, PID/IPC/UTS namespaces are new, and only system
folders are visible (read-only) — never the host root, home or results. `verify` and the
oracle add a read-only workspace and no network. The environment is built from scratch;
the model key is added by the caller for the CLI process only, and Bash tool commands run
through a shell-prefix wrapper that starts them with an empty environment. The `none`
backend runs on the host (for machines without user namespaces); it contains nothing.
"""

from __future__ import annotations

import os
import shutil
import stat
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
SANDBOX_PATH = f"{SANDBOX_TOOLS}:/usr/local/bin:/usr/bin:/bin"
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("/etc/ssl", "/etc/ca-certificates", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
               "/etc/passwd", "/etc/group", "/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime",
               "/etc/python3", "/etc/python3.11")
PREFLIGHT_TIMEOUT_S = 10
BACKENDS = ("bwrap", "none")


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


def shell_prefix_script(*, home: str, tmp: str, path: str) -> str:
    """Claude Code runs every Bash tool command as `<prefix> <command>`; this restarts it with an empty environment.

    So a command the model writes never sees ANTHROPIC_API_KEY or anything else the CLI holds.
    """
    variables = " ".join(f"{name}={value}" for name, value in base_environment(home=home, tmp=tmp, path=path).items()
                         if not name.startswith(("CLAUDE_", "DISABLE_")))
    return (
        "#!/bin/sh\n"
        "# skillbench: run one Bash tool command with a fixed, credential-free environment.\n"
        'if [ "$#" -ne 1 ]; then echo "shell-prefix: expected exactly one command argument" >&2; exit 64; fi\n'
        f'exec /usr/bin/env -i {variables} /bin/bash -c "$1"\n'
    )


def bwrap_namespace_args(*, network: bool) -> list[str]:
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    return [*args, "--die-with-parent", "--new-session"]


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
    return found


def preflight(bwrap: str) -> None:
    """Run `true` inside a full namespace set once; raise if containment does not work here."""
    executable = resolve_bwrap(bwrap)
    argv = [executable, *bwrap_namespace_args(network=False), *system_mount_args(),
            "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    result = run_managed(argv, env={"PATH": "/usr/bin:/bin"}, timeout=PREFLIGHT_TIMEOUT_S)
    if not result.ok:
        detail = (result.detail or result.stderr_tail or "").strip()[-1000:]
        raise SandboxError(f"Bubblewrap preflight failed ({result.state}, exit {result.returncode}): {detail}")


def _real_directory(path: Path, label: str) -> Path:
    path = Path(path).absolute()
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or path.resolve(strict=True) != path:
        raise SandboxError(f"{label} must be a real directory without symlinks: {path}")
    return path


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
        for folder in (self.home_host, self.tmp_host, self.tools_host):
            folder.mkdir(mode=0o700, exist_ok=True)
        if self.backend == "bwrap":
            self.bwrap = resolve_bwrap(self.bwrap)
        prefix = self.tools_host / "shell-prefix"
        prefix.write_text(shell_prefix_script(home=self.home, tmp=self.tmp, path=self.path))
        prefix.chmod(0o500)

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

    def command(self, argv: Sequence[str], *, read_only_workspace: bool = False, network: bool = True,
                extra_read_only: Sequence[tuple[Path, str]] = ()) -> list[str]:
        """Wrap `argv` so it runs contained; `extra_read_only` binds (host path, sandbox path) pairs."""
        if self.backend == "none":
            return list(argv)
        args = [self.bwrap, *bwrap_namespace_args(network=network), *system_mount_args(),
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run",
                "--ro-bind" if read_only_workspace else "--bind", str(self.clone), SANDBOX_WORKSPACE,
                "--bind", str(self.home_host), SANDBOX_HOME,
                "--bind", str(self.tmp_host), SANDBOX_TMP,
                "--ro-bind", str(self.tools_host / "shell-prefix"), SANDBOX_SHELL_PREFIX]
        if self.claude_bin is not None:
            args += ["--ro-bind", str(Path(self.claude_bin).resolve()), SANDBOX_CLAUDE]
        # Skill roots stay read-only even while the workspace is writable: a session must not
        # rewrite the skills it is being measured on.
        for relative in self.read_only_paths:
            host = self.clone / relative
            if host.is_dir() and not host.is_symlink():
                args += ["--ro-bind", str(host), f"{SANDBOX_WORKSPACE}/{relative}"]
        for host, target in extra_read_only:
            args += ["--ro-bind", str(host), target]
        return [*args, "--chdir", SANDBOX_WORKSPACE, "--", *argv]

    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            read_only_workspace: bool = False, network: bool = True,
            extra_read_only: Sequence[tuple[Path, str]] = (), **kwargs):
        wrapped = self.command(argv, read_only_workspace=read_only_workspace, network=network,
                               extra_read_only=extra_read_only)
        cwd = None if self.backend == "bwrap" else str(self.clone)
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

    def cleanup(self) -> None:
        """Remove the private root even where an agent left read-only folders behind."""
        for directory, _subdirs, _files in os.walk(self.private_root):
            try:
                os.chmod(directory, 0o700)
            except OSError:
                pass
        shutil.rmtree(self.private_root)
