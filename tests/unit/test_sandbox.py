"""The sandbox: Bubblewrap argv shape, the scratch environment, the shell-prefix wrapper, settings, preflight."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from gitenv import GIT_ENV
from skillbench.base.process import run_managed
from skillbench.execution import sandbox as sb
from skillbench.execution.agents import claude_code
from skillbench.execution.sandbox import AgentInstall, Sandbox, SandboxError

HOST_SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "GITHUB_TOKEN": "ghp_secretsecretsecret",
    "ANTHROPIC_API_KEY": "sk-ant-api-host-key",
    "SSH_AUTH_SOCK": "/run/ssh.sock",
    "HTTPS_PROXY": "http://proxy.invalid:3128",
}
BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="Bubblewrap is not installed (make setup installs it)")


@pytest.fixture
def private_root():
    """A private root under /tmp, as cells make it (the sandbox user must be able to enter its parents)."""
    root = Path(tempfile.mkdtemp(prefix="skillbench-test-"))
    (root / "workspace" / ".claude" / "skills" / "demo").mkdir(parents=True)
    (root / "workspace" / ".claude" / "skills" / "demo" / "SKILL.md").write_text("---\nname: demo\n---\nbody\n")
    (root / "workspace" / "app.py").write_text("print('hi')\n")
    yield root
    for directory, _subdirs, _files in os.walk(root):
        os.chmod(directory, 0o700)
    shutil.rmtree(root)


def make_sandbox(root: Path, backend: str = "bwrap", **kwargs) -> Sandbox:
    return Sandbox(backend, root / "workspace", root, read_only_paths=[".claude/skills"], **kwargs)


def pairs(argv: list[str]) -> set[tuple[str, ...]]:
    return {tuple(argv[index : index + 3]) for index in range(len(argv) - 2)}


@needs_bwrap
def test_session_argv_never_binds_the_host_root_home_or_results(private_root):
    box = make_sandbox(
        private_root, agent_install=AgentInstall("claude", Path("/bin/true"))
    )  # any world-readable executable
    argv = box.command(["claude", "-p"])
    triples = pairs(argv)
    assert ("--bind", "/", "/") not in triples and ("--ro-bind", "/", "/") not in triples
    assert ("--dev-bind", "/", "/") not in triples
    sources = {argv[index + 1] for index, arg in enumerate(argv) if arg in ("--bind", "--ro-bind", "--dev-bind")}
    for forbidden in (str(Path.home()), os.getcwd(), str(Path.cwd() / "results"), "/root", "/etc", "/home", "/tmp"):
        assert forbidden not in sources
    assert ("--bind", str(box.clone), "/workspace") in triples
    assert ("--bind", str(box.home_host), "/home/agent") in triples
    assert ("--bind", str(box.tmp_host), "/tmp") in triples
    assert ("--tmpfs", "/run", "--bind") in triples
    assert ("--ro-bind", str(box.clone / ".claude/skills"), "/workspace/.claude/skills") in triples
    skills = argv.index(str(box.clone / ".claude/skills"))
    assert skills > argv.index(str(box.clone))  # the read-only skills bind lands on top of the workspace
    assert argv[-5:] == ["--chdir", "/workspace", "--", "claude", "-p"]
    assert ("--ro-bind", "/bin/true", "/opt/claude/claude") in triples or (
        "--ro-bind",
        "/usr/bin/true",
        "/opt/claude/claude",
    ) in triples
    assert argv[argv.index("--remount-ro") + 1] == "/"


@needs_bwrap
def test_namespaces_capabilities_and_identity(private_root):
    box = make_sandbox(private_root)
    argv = box.command(["true"])
    for flag in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--unshare-net",
    ):
        assert flag in argv
    assert ("--cap-drop", "ALL") in {tuple(argv[i : i + 2]) for i in range(len(argv) - 1)}
    assert argv[argv.index("--uid") + 1] == str(sb.SANDBOX_UID)
    # No network at all: the CLI reaches its model only through the gateway's socket (sessions.bridged_command).
    launcher = argv[: argv.index(shutil.which("bwrap") and str(Path(shutil.which("bwrap")).resolve()))]
    if os.geteuid() == 0:
        assert any(arg.endswith("setpriv") for arg in launcher) and f"--reuid={box.host_uid}" in launcher
        assert sb.HOST_ID_BASE <= box.host_uid < sb.HOST_ID_BASE + sb.HOST_ID_SLOTS
        assert "--bounding-set=-all" in argv and "--no-new-privs" in argv
    else:
        assert not any(arg.endswith("setpriv") for arg in launcher)


@needs_bwrap
def test_verifiers_get_a_read_only_workspace_and_no_network(private_root):
    box = make_sandbox(private_root)
    argv = box.command(["sh", "-c", "true"], read_only_workspace=True)
    triples = pairs(argv)
    assert ("--ro-bind", str(box.clone), "/workspace") in triples
    assert ("--bind", str(box.clone), "/workspace") not in triples
    assert "--unshare-net" in argv


@needs_bwrap
def test_contained_process_sees_a_scratch_environment_and_nothing_of_the_host(private_root, monkeypatch):
    for name, value in HOST_SECRETS.items():
        monkeypatch.setenv(name, value)
    box = make_sandbox(private_root)
    environment = box.environment()
    assert not set(HOST_SECRETS) & set(environment)
    result = box.run(
        ["/bin/sh", "-c", "env; id -u; ls /root /home 2>&1; cat /proc/1/environ | tr '\\0' '\\n'"], timeout=30
    )
    assert result.ok, result.stderr_tail
    for name, value in HOST_SECRETS.items():
        assert name not in result.stdout_tail and value not in result.stdout_tail
    assert f"\n{sb.SANDBOX_UID}\n" in result.stdout_tail
    assert "cannot access '/root'" in result.stdout_tail and "\nagent\n" in result.stdout_tail


@needs_bwrap
def test_capabilities_are_gone_so_read_only_binds_cannot_be_undone(private_root):
    box = make_sandbox(private_root)
    script = (
        "grep CapEff /proc/self/status; umount /workspace/.claude/skills 2>&1; echo umount=$?; "
        "echo pwn >> .claude/skills/demo/SKILL.md 2>&1; echo write=$?; echo ok > /usr/x 2>&1; echo usr=$?"
    )
    result = box.run(["/bin/sh", "-c", script], timeout=30)
    assert "CapEff:\t0000000000000000" in result.stdout_tail
    assert "umount=0" not in result.stdout_tail and "write=0" not in result.stdout_tail
    assert "usr=0" not in result.stdout_tail
    assert "pwn" not in (box.clone / ".claude/skills/demo/SKILL.md").read_text()


@needs_bwrap
def test_read_only_workspace_really_is(private_root):
    box = make_sandbox(private_root)
    result = box.run(["/bin/sh", "-c", "echo changed > app.py; echo exit=$?"], timeout=30, read_only_workspace=True)
    assert "Read-only file system" in result.stderr_tail and "exit=2" in result.stdout_tail
    assert (box.clone / "app.py").read_text() == "print('hi')\n"


def tool_env_names() -> set[str]:
    return set(sb.tool_environment(home="/h", tmp="/t", path="/usr/bin:/bin")) | {"PWD", "SHLVL", "_"}


def test_shell_prefix_run_directly_gives_an_empty_environment(tmp_path):
    prefix = tmp_path / "shell-prefix"
    prefix.write_text(sb.shell_prefix_script(sb.ToolExec(home="/h", tmp="/t", path="/usr/bin:/bin")))
    prefix.chmod(0o500)
    result = subprocess.run(
        [str(prefix), "env"],
        capture_output=True,
        text=True,
        env={**os.environ, **HOST_SECRETS, "CLAUDE_CODE_SHELL_PREFIX": str(prefix)},
    )
    assert result.returncode == 0, result.stderr
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names <= tool_env_names()
    assert "HOME=/h" in result.stdout and "PATH=/usr/bin:/bin" in result.stdout
    for value in HOST_SECRETS.values():
        assert value not in result.stdout


@pytest.mark.parametrize("args", [[], ["echo a", "echo b"]])
def test_shell_prefix_refuses_the_wrong_number_of_arguments(tmp_path, args):
    prefix = tmp_path / "shell-prefix"
    prefix.write_text(
        sb.shell_prefix_script(sb.ToolExec(home="/h", tmp="/t", path="/usr/bin:/bin", nested_bwrap="/nowhere"))
    )
    prefix.chmod(0o500)
    result = subprocess.run([str(prefix), *args], capture_output=True, text=True)
    assert result.returncode == 64
    assert "expected exactly one command argument" in result.stderr


@needs_bwrap
def test_bash_tool_commands_run_in_their_own_pid_namespace_without_network(private_root):
    """The CLI holds the key in its environment; a tool command must not reach it through /proc."""
    box = make_sandbox(private_root)
    script = (
        "env; echo ---; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; grep -a -l sk-only /proc/*/environ; "
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9), 2)\" 2>&1 | tail -1"
    )
    env = box.environment(
        {
            "ANTHROPIC_API_KEY": "sk-only-for-the-cli",
            "CLAUDE_CODE_SHELL_PREFIX": box.shell_prefix,
            "TOOL_COMMAND": script,
        }
    )
    # The outer shell plays the CLI: it holds the key and starts the tool command through the prefix.
    play_cli = '"$CLAUDE_CODE_SHELL_PREFIX" "$TOOL_COMMAND"; echo parent-sees=$ANTHROPIC_API_KEY'
    result = box.run(["/bin/sh", "-c", play_cli], timeout=30, env=env)
    assert result.ok, result.stderr_tail
    inner, parent = result.stdout_tail.rsplit("parent-sees=", 1)
    assert parent.strip() == "sk-only-for-the-cli"
    assert "sk-only" not in inner and "ANTHROPIC" not in inner
    pids = inner.split("---", 1)[1].splitlines()[1].split()
    assert "1" in pids and len(pids) <= 6  # only the nested sandbox's own processes
    assert "Network is unreachable" in inner or "ConnectionRefusedError" in inner


@needs_bwrap
@needs_bwrap
def test_tool_commands_cannot_plant_claude_settings(private_root):
    """A settings file the CLI reloads could point ANTHROPIC_BASE_URL (and the key) anywhere."""
    box = make_sandbox(private_root)
    (box.home_host / ".claude").mkdir()
    script = (
        "echo '{}' > ~/.claude/settings.json; echo user=$?; echo '{}' > .claude/settings.local.json; "
        "echo project=$?; echo ok > notes.txt; echo workspace=$?"
    )
    env = box.environment({"CLAUDE_CODE_SHELL_PREFIX": box.shell_prefix, "TOOL_COMMAND": script})
    result = box.run(["/bin/sh", "-c", '"$CLAUDE_CODE_SHELL_PREFIX" "$TOOL_COMMAND"'], timeout=30, env=env)
    assert "user=2" in result.stdout_tail or "user=1" in result.stdout_tail
    assert "project=0" not in result.stdout_tail and "workspace=0" in result.stdout_tail
    assert not (box.clone / ".claude" / "settings.local.json").exists()
    assert not (box.home_host / ".claude" / "settings.json").exists()


def test_clone_gets_a_project_claude_folder_to_protect(private_root):
    shutil.rmtree(private_root / "workspace" / ".claude")
    box = make_sandbox(private_root)
    assert (box.clone / ".claude").is_dir()
    (box.clone / ".claude").rmdir()
    (box.clone / ".claude").symlink_to("/etc")
    with pytest.raises(SandboxError, match="real directory"):
        make_sandbox(private_root)


def test_private_trees_are_handed_to_the_sandbox_user_and_outside_sources_copied(private_root, tmp_path):
    box = make_sandbox(private_root)
    outside = Path(tempfile.mkdtemp(prefix="skillbench-test-evidence-"))
    try:
        (outside / "evidence.json").write_text("{}")
        os.chmod(outside / "evidence.json", 0o600)
        staged = private_root / ".oracle-x"
        staged.mkdir(mode=0o700)
        (staged / "oracle_test.py").write_text("print('oracle')\n")
        os.chmod(staged / "oracle_test.py", 0o400)
        argv = box.command(["true"], extra_read_only=[(outside, "/evidence"), (staged, "/workspace/.oracle-x")])
        sources = {argv[i + 2]: argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"}
        if os.geteuid() == 0:
            assert Path(sources["/evidence"]).parent == box.mounts_host
            assert os.stat(box.clone / "app.py").st_uid == box.host_uid
            assert os.stat(staged / "oracle_test.py").st_uid == box.host_uid
        else:
            assert sources["/evidence"] == str(outside)
        assert sources["/workspace/.oracle-x"] == str(staged)
        result = box.run(
            ["/bin/sh", "-c", "cat /evidence/evidence.json /workspace/.oracle-x/oracle_test.py"],
            timeout=30,
            extra_read_only=[(outside, "/evidence"), (staged, "/workspace/.oracle-x")],
        )
        assert result.ok and "oracle" in result.stdout_tail, result.stderr_tail
    finally:
        shutil.rmtree(outside)


def test_symlinked_clone_is_refused(private_root):
    link = private_root / "link"
    link.symlink_to(private_root / "workspace")
    with pytest.raises(SandboxError, match="real directory"):
        Sandbox("bwrap", link, private_root)


def test_unknown_backend_is_refused(private_root):
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        make_sandbox(private_root, backend="docker")
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        claude_code.claude_settings(sandbox_backend="docker")


def test_none_backend_wraps_nothing(private_root):
    box = make_sandbox(private_root, backend="none")
    assert box.command(["echo", "hi"]) == ["echo", "hi"]
    assert box.workspace == str(box.clone)


def test_claude_settings_disable_hooks_allow_tools_and_deny_proc():
    settings = json.loads(claude_code.claude_settings(sandbox_backend="bwrap"))
    assert settings["disableAllHooks"] is True and "hooks" not in settings
    # The CLI's own bundled skills (verify, debug, …) are off: only the skills under test are offered
    # (tests/workflow/test_init.py reads the offered list from the CLI's init event).
    assert settings["disableBundledSkills"] is True
    assert settings["permissions"]["allow"] == ["Read", "Edit", "Write", "Bash", "Skill"]
    assert settings["permissions"]["disableBypassPermissionsMode"] == "disable"
    deny = settings["permissions"]["deny"]
    assert {"WebFetch", "WebSearch", "Read(//proc/**)", "Edit(//proc/**)", "Read(//home/agent/.claude/**)"} <= set(deny)
    assert "sandbox" not in settings
    assert "defaultMode" not in settings["permissions"]


def test_claude_settings_can_turn_on_the_cli_sandbox():
    settings = json.loads(claude_code.claude_settings(sandbox_backend="bwrap", cli_sandbox=True))
    inner = settings["sandbox"]
    assert inner["enabled"] and inner["failIfUnavailable"] and inner["allowUnsandboxedCommands"] is False
    assert inner["network"]["deniedDomains"] == ["*"] and inner["network"]["allowedDomains"] == []
    assert inner["filesystem"]["allowWrite"] == ["/workspace", "/tmp"]
    assert "sandbox" not in json.loads(claude_code.claude_settings(sandbox_backend="none", cli_sandbox=True))


def test_claude_settings_without_bubblewrap_keep_host_paths_open():
    deny = json.loads(claude_code.claude_settings(sandbox_backend="none"))["permissions"]["deny"]
    assert not [rule for rule in deny if "(" in rule]


def test_preflight_names_a_missing_bubblewrap():
    with pytest.raises(SandboxError, match=r"Bubblewrap \('/nonexistent/bwrap'\) was not found.*bubblewrap"):
        sb.preflight("/nonexistent/bwrap")


def test_preflight_reports_a_sandbox_that_does_not_start():
    folder = Path(tempfile.mkdtemp(prefix="skillbench-test-bwrap-"))
    try:
        folder.chmod(0o755)
        fake = folder / "bwrap"
        fake.write_text("#!/bin/sh\necho 'setting up uid map: Permission denied' >&2\nexit 1\n")
        fake.chmod(0o755)
        with pytest.raises(SandboxError) as raised:
            sb.preflight(str(fake))
        message = str(raised.value)
        assert message.startswith("Bubblewrap preflight failed (failed, exit 1): setting up uid map")
        assert "user namespaces" in message and "sandbox.backend: none" in message
    finally:
        shutil.rmtree(folder)


@needs_bwrap
def test_preflight_passes_here():
    sb.preflight("bwrap")


def host_git(clone: Path, *args: str) -> None:
    """Git on the host, as the test author (the clone belongs to the sandbox's host id)."""
    subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(clone), *args], check=True, env=GIT_ENV, capture_output=True
    )


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="per-sandbox host ids are only used when the harness runs as root")
def test_live_sandboxes_never_share_a_host_id(private_root, tmp_path):
    other_root = Path(tempfile.mkdtemp(prefix="skillbench-test-"))
    try:
        (other_root / "workspace").mkdir()
        first, second = make_sandbox(private_root), Sandbox("bwrap", other_root / "workspace", other_root)
        assert first.host_uid != second.host_uid
        assert os.stat(first.clone / "app.py").st_uid == first.host_uid
        lock = sb.HOST_ID_LOCKS / str(first.host_uid)
        first.close()
        descriptor = os.open(lock, os.O_RDWR)
        try:
            import fcntl

            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by close()
        finally:
            os.close(descriptor)
        second.close()
    finally:
        shutil.rmtree(other_root)


@needs_bwrap
def test_limits_bound_agent_processes_but_not_the_cli(private_root):
    box = make_sandbox(private_root, limits=replace(sb.SandboxLimits.default(), processes=64, memory_mb=256, file_mb=1))
    session = box.command(["claude"])
    assert "--fsize=1048576" in session and not any(arg.startswith("--as=") for arg in session)
    result = box.run(
        [
            "/bin/sh",
            "-c",
            "python3 -c \"x = b'x' * (512 << 20)\" 2>&1 | tail -n 1; "
            "head -c 2000000 /dev/zero > big 2>/dev/null; echo fsize=$?; ls -l big | cut -d' ' -f5",
        ],
        timeout=30,
    )
    assert "MemoryError" in result.stdout_tail
    assert "fsize=0" not in result.stdout_tail and "1048576" in result.stdout_tail
    prefix = (box.tools_host / "shell-prefix").read_text()
    assert f"--as={256 << 20}" in prefix  # Bash tool commands get the address-space limit the CLI does not


@needs_bwrap
def test_git_the_cli_runs_gets_no_key_no_network_and_no_proc(private_root):
    """The CLI runs `git status` itself with the key in its environment; a planted clean filter must not see it."""
    box = make_sandbox(private_root)
    host_git(box.clone, "init", "-q")
    steal = (
        "#!/bin/sh\n{ env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n';"
        " python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9), 1)\" 2>&1 | tail -n 1; }"
        " > /workspace/.git/loot.txt\ncat\n"
    )
    (box.clone / ".git" / "steal.sh").write_text(steal)
    (box.clone / ".git" / "steal.sh").chmod(0o755)
    (box.clone / ".git" / "info").mkdir(exist_ok=True)
    (box.clone / ".git" / "info" / "attributes").write_text("* filter=steal\n")
    host_git(box.clone, "config", "filter.steal.clean", "/workspace/.git/steal.sh")
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{box.host_uid}:{box.host_gid}", str(box.clone)], check=True)
    env = box.environment({"ANTHROPIC_API_KEY": "sk-only-for-the-cli"})
    # The outer shell plays the CLI: `git` resolves on the sandbox PATH, as the CLI resolves it.
    result = box.run(
        ["/bin/sh", "-c", "command -v git; git add app.py; git status --short"], timeout=30, env=env, limit_memory=False
    )
    assert result.ok, result.stderr_tail
    assert result.stdout_tail.splitlines()[0] == sb.SANDBOX_GIT_WRAPPER
    loot = (box.clone / ".git" / "loot.txt").read_text()
    assert "PATH=" in loot  # the planted filter ran ...
    assert "sk-only" not in loot and "ANTHROPIC" not in loot  # ... without the key, in env or /proc
    assert "Network is unreachable" in loot or "ConnectionRefusedError" in loot


@needs_bwrap
def test_shell_start_up_files_are_empty_and_read_only(private_root):
    box = make_sandbox(private_root)
    result = box.run(
        [
            "/bin/sh",
            "-c",
            "for f in .bashrc .profile .bash_profile; do echo x >> ~/$f; echo $f=$?; done; wc -c < ~/.bashrc",
        ],
        timeout=30,
    )
    assert ".bashrc=0" not in result.stdout_tail and ".profile=0" not in result.stdout_tail
    assert result.stdout_tail.strip().endswith("0")


def test_fresh_scratch_gives_every_step_an_empty_home_and_tmp(private_root):
    box = make_sandbox(private_root, backend="none")
    (box.home_host / "planted.pth").write_text("import os; os._exit(0)\n")
    home, tmp = box.fresh_scratch("verify")
    assert home == box.home_host and tmp == box.tmp_host
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    assert box.environment()["HOME"] == str(home)
    assert box.fresh_scratch("oracle")[0] != home


@needs_bwrap
def test_harness_git_reads_nothing_the_clone_configures(private_root):
    from skillbench.execution import repo

    box = make_sandbox(private_root)
    clone = box.clone
    host_git(clone, "init", "-q")
    host_git(clone, "add", "-A")
    host_git(clone, "commit", "-qm", "base")
    harness = private_root / "harness-git"
    repo.make_harness_git_dir(clone, harness)
    # Everything the harness's git could run, planted afterwards in the clone and in the tree.
    (clone / ".git" / "info").mkdir(exist_ok=True)
    (clone / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    (clone / ".gitattributes").write_text("* filter=evil diff=evil\n")

    def planted(name: str, then: str = "") -> str:
        # Leaves a marker where the harness's git could write (its own repository, the sandbox tmp).
        return f"sh -c 'touch /run/skillbench-git/ran-{name} /tmp/ran-{name}; {then}' --"

    for key, value in (
        ("filter.evil.clean", planted("clean", "sed s/hi/PWNED/")),
        ("diff.evil.textconv", planted("textconv", "echo PWNED")),
        ("diff.external", planted("external", "echo PWNED")),
        ("core.fsmonitor", planted("fsmonitor")),
        ("core.pager", planted("pager", "echo PWNED")),
        ("core.hooksPath", "/workspace/.git/hooks"),
    ):
        host_git(clone, "config", key, value)
    (clone / ".git" / "hooks").mkdir(exist_ok=True)
    for hook in ("post-index-change", "pre-commit", "reference-transaction"):
        (clone / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\n{planted('hook')}\n")
        (clone / ".git" / "hooks" / hook).chmod(0o755)
    (clone / "app.py").write_text("print('hi there')\n")
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{box.host_uid}:{box.host_gid}", str(clone), str(harness)], check=True)
    work = repo.measure_work(box.harness_script(harness), "HEAD", [".claude/skills"])
    assert b"+print('hi there')" in work.patch and b"PWNED" not in work.patch
    assert (work.files, work.insertions, work.deletions) == (2, 2, 1)
    assert not list(harness.glob("ran-*")) and not list(box.tmp_host.glob("ran-*"))
    # Control: git on the clone's own repository does run what was planted there.
    box.git()(["diff", "--stat"])
    assert (box.tmp_host / "ran-clean").exists()
    shutil.rmtree(clone / ".git")  # the agent deleting its repository changes nothing for the harness
    assert repo.measure_work(box.harness_script(harness), work.base, [".claude/skills"]).digest == work.digest


# ─── The exact argv, pinned ──────────────────────────────────────────────────
# Spelled out here from the containment rules (the module docstring and docs/threat-model.md), not
# taken from the code under test: a change to any Bubblewrap option, mount or limit must show up here.

AGENT_NAMESPACES = ["--unshare-user", "--uid", "1000", "--gid", "1000", "--unshare-pid", "--unshare-ipc"]
# Only system folders are visible, read-only; merged-/usr links stay links.
# (A second, independent statement of the list: the test fails when the code's list changes.)
SYSTEM_PATHS = "/usr /bin /sbin /lib /lib32 /lib64 /libx32".split()
ETC_PATHS = (
    "/etc/ssl /etc/ca-certificates /etc/hosts /etc/resolv.conf /etc/nsswitch.conf /etc/alternatives "
    "/etc/ld.so.cache /etc/localtime /etc/python3 /etc/python3.11"
).split()
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout")
STARTUP_FILES += (".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout")
CLI_STATE = ("/home/agent/.claude", "/home/agent/.claude.json", "/workspace/.claude")
CLI_STATE += tuple(f"/home/agent/{folder}/opencode" for folder in (".config", ".local/share", ".local/state", ".cache"))
CLI_STATE += ("/home/agent/.copilot", "/home/agent/.gemini", "/workspace/.gemini", "/home/agent/.codex")
TOOL_VARIABLES = (
    "HOME=/home/agent USER=agent LOGNAME=agent TMPDIR=/tmp PATH=/opt/claude:/usr/local/bin:/usr/bin:/bin "
    "LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb CI=1 NO_COLOR=1 GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1 "
    "PYTHONDONTWRITEBYTECODE=1"
)


def expected_system_mounts() -> list[str]:
    """Each system path this machine has: a link recreated as the same link, anything else bound read-only."""
    present = [entry for entry in (*SYSTEM_PATHS, *ETC_PATHS) if os.path.lexists(entry)]
    as_link = {entry: ["--symlink", os.readlink(entry), entry] for entry in present if os.path.islink(entry)}
    return [arg for entry in present for arg in as_link.get(entry, ["--ro-bind", entry, entry])]


def expected_cell_argv(box: Sandbox, argv: list[str], *, verifier: bool, contained_shells: bool = False) -> list[str]:
    """A session (writable workspace, no address-space limit) or a verifier (read-only, limited); no network.
    `contained_shells`: a CLI without a shell prefix, whose bash and dash are the harness's wrappers."""
    tools = box.tools_host
    as_root = os.geteuid() == 0
    limits = ["--nproc=64"] if as_root else []  # RLIMIT_NPROC only with a host uid of the sandbox's own
    limits += ["--fsize=1048576"] + ([f"--as={256 << 20}"] if verifier else [])
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
    launcher = []
    if as_root:
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
        uid = box.host_uid
        launcher = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
        launcher += ["--bounding-set=-all", "--no-new-privs", "--"]
    namespaces = [*AGENT_NAMESPACES, "--unshare-uts", "--hostname", "skillbench", "--unshare-cgroup-try"]
    namespaces += ["--unshare-net", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    startup = [arg for name in STARTUP_FILES for arg in ("--ro-bind", str(tools / "empty"), f"/home/agent/{name}")]
    return [
        *[prlimit, *limits, "--"],
        *launcher,
        str(Path(BWRAP).resolve()),
        *namespaces,
        *expected_system_mounts(),
        *["--ro-bind", str(tools / "passwd"), "/etc/passwd", "--ro-bind", str(tools / "group"), "/etc/group"],
        *["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run"],
        *["--ro-bind" if verifier else "--bind", str(box.clone), "/workspace"],
        *["--bind", str(box.home_host), "/home/agent", "--bind", str(box.tmp_host), "/tmp"],
        *["--ro-bind", str(tools / "shell-prefix"), "/opt/claude/shell-prefix"],
        *["--ro-bind", str(tools / "git"), "/opt/claude/git"],
        *["--ro-bind", str(Path(BWRAP).resolve()), "/opt/claude/bwrap"],
        *["--ro-bind", str(Path("/bin/true").resolve()), "/opt/claude/claude"],
        *["--ro-bind", "/usr/bin/bash", "/opt/claude/real/bash", "--ro-bind", "/usr/bin/dash", "/opt/claude/real/dash"],
        *startup,
        *(
            ["--ro-bind", str(tools / "contained-bash"), "/usr/bin/bash"]
            + ["--ro-bind", str(tools / "contained-dash"), "/usr/bin/dash"]
            if contained_shells
            else []
        ),
        *["--ro-bind", str(box.clone / ".claude/skills"), "/workspace/.claude/skills"],
        *["--remount-ro", "/", "--chdir", "/workspace", "--", *argv],
    ]


@needs_bwrap
def test_a_cell_sandbox_argv_is_exactly_the_documented_one(private_root):
    limits = replace(sb.SandboxLimits.default(), processes=64, memory_mb=256, file_mb=1)
    box = make_sandbox(private_root, agent_install=AgentInstall("claude", Path("/bin/true")), limits=limits)
    box.fresh_scratch("session")
    try:
        assert box.command(["claude", "-p"]) == expected_cell_argv(box, ["claude", "-p"], verifier=False)
        verifier = box.command(["sh", "-c", "true"], read_only_workspace=True, limit_memory=True)
        assert verifier == expected_cell_argv(box, ["sh", "-c", "true"], verifier=True)
        contained = box.command(["opencode", "run"], contain_shells=True)
        assert contained == expected_cell_argv(box, ["opencode", "run"], verifier=False, contained_shells=True)
    finally:
        box.close()


@needs_bwrap
def test_the_git_wrapper_is_exactly_the_documented_one(private_root):
    box = make_sandbox(private_root, limits=replace(sb.SandboxLimits.default(), processes=64, memory_mb=256, file_mb=1))
    box.close()
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
    git = shutil.which("git", path="/usr/bin:/bin:/usr/local/bin")
    # Tool commands and git share the cell's uid (no second process limit) but get the address-space limit.
    limits = f"{prlimit} --fsize=1048576 --as={256 << 20} --"
    nested = " ".join(
        [
            "/opt/claude/bwrap",
            *AGENT_NAMESPACES,
            "--unshare-net --die-with-parent --cap-drop ALL --dev-bind / / --proc /proc",
            *(f"--ro-bind-try {path} {path}" for path in CLI_STATE),
            # The real shells are back in place, whether or not the CLI's are the harness's wrappers.
            "--ro-bind /opt/claude/real/bash /usr/bin/bash --ro-bind /opt/claude/real/dash /usr/bin/dash",
            # The gateway's socket folder is covered: a Unix socket would be a way out past the network namespace.
            "--tmpfs /run/skillbench-gateway",
        ]
    )
    assert (box.tools_host / "git").read_text() == (
        "#!/opt/claude/real/dash\n"
        "# skillbench: git with a fixed, credential-free environment, in a nested sandbox without network.\n"
        f"exec /usr/bin/env -i {TOOL_VARIABLES} {limits} {nested} -- "
        f'{git} -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"\n'
    )
    prefix_exec = (box.tools_host / "shell-prefix").read_text().splitlines()[-1]
    assert prefix_exec == f'exec /usr/bin/env -i {TOOL_VARIABLES} {limits} {nested} -- /bin/bash -c "$1"'
    for shell in ("bash", "dash"):
        contained = (box.tools_host / f"contained-{shell}").read_text().splitlines()
        assert contained[0] == "#!/opt/claude/real/dash"
        assert contained[-1] == f'exec /usr/bin/env -i {TOOL_VARIABLES} {limits} {nested} -- /usr/bin/{shell} "$@"'


def test_an_mcp_server_argv_is_exactly_the_documented_one():
    argv = sb.mcp_server_argv(
        command="/usr/bin/python3",
        args=["-m", "srv"],
        env={"PYTHONPATH": "/opt/sdk"},
        mounts=["/opt/sdk"],
        network=False,
        workspace="read-only",
        prlimit=["/usr/bin/prlimit", "--as=1024"],
    )
    assert argv == [
        *["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "/usr/bin/prlimit", "--as=1024", "--"],
        *["/opt/claude/bwrap", *AGENT_NAMESPACES, "--unshare-net", "--die-with-parent", "--cap-drop", "ALL"],
        *["--clearenv", "--setenv", "PYTHONPATH", "/opt/sdk"],
        *expected_system_mounts(),
        *["--ro-bind", "/etc/passwd", "/etc/passwd", "--ro-bind", "/etc/group", "/etc/group"],
        *["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"],
        *["--ro-bind", "/opt/sdk", "/opt/sdk", "--ro-bind", "/workspace", "/workspace"],
        *["--remount-ro", "/", "--chdir", "/workspace", "--", "/usr/bin/python3", "-m", "srv"],
    ]


@needs_bwrap
def test_an_mcp_servers_mounts_are_hidden_from_the_agents_commands_but_not_from_its_launcher(private_root):
    """The CLI starts MCP servers through the shell prefix as `<launcher>`: exactly the harness's launchers run with
    the servers' mounts in view; every other command (the agent's) sees an empty folder there."""
    box = make_sandbox(private_root)
    try:
        box.hide_from_tools(["/opt/mcp/probe"])
        argv = box.mcp_launcher("server-abc", ["/usr/bin/env", "-i", "PATH=/usr/bin", "/opt/claude/bwrap", "x y"])
        assert argv == [f"{sb.SANDBOX_MCP_LAUNCHERS}/server-abc"]
        launcher = (box.tools_host / "mcp" / "server-abc").read_text()
        assert launcher.endswith("exec /usr/bin/env -i PATH=/usr/bin /opt/claude/bwrap 'x y'\n")
        lines = (box.tools_host / "shell-prefix").read_text().splitlines()
        case = lines.index('case "$1" in')
        # Only the whole launcher path matches: a command that starts with it goes to the default branch.
        assert lines[case + 1].startswith(f"  {sb.SANDBOX_MCP_LAUNCHERS}/server-abc) exec ")
        assert "--tmpfs /opt/mcp/probe" not in lines[case + 1] and lines[case + 2] == "esac"
        assert "--tmpfs /opt/mcp/probe" in lines[-1] and lines[-1].endswith('-- /bin/bash -c "$1"')
        assert ("--ro-bind", str(box.tools_host / "mcp"), sb.SANDBOX_MCP_LAUNCHERS) in pairs(box.command(["true"]))
    finally:
        box.close()


@needs_bwrap
@pytest.mark.parametrize("shell", ["bash", "/bin/bash", "sh", "/usr/bin/sh"])
def test_a_contained_clis_shells_cannot_reach_the_cli_process(private_root, shell):
    """A CLI without a shell prefix holds its session token in its environment and writes the stdout the harness
    reads as evidence. Every shell it starts, by name or path, runs contained: it sees neither the CLI's environment
    nor its process (so neither its /proc/<pid>/fd/1 nor its memory), and the agent's commands still work."""
    box = make_sandbox(private_root)
    box.fresh_scratch("session")
    probe = (
        "grep -l 'pyth[o]n3' /proc/[0-9]*/cmdline 2>/dev/null | wc -l | sed s/^/clis=/; "
        "grep -l sbx-session-token /proc/[0-9]*/environ 2>/dev/null | wc -l | sed s/^/leaks=/; "
        'echo token=${SESSION_TOKEN:-none}; echo "works=$(printf %s ok)"; bash -c "echo inner=$$"'
    )
    cli = (
        "import os, subprocess, sys\n"
        f"done = subprocess.run([{shell!r}, '-c', {probe!r}], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout + done.stderr + f'cli={os.getpid()}\\n')\n"
    )
    try:
        argv = ["/usr/bin/env", "SESSION_TOKEN=sbx-session-token", "/usr/bin/python3", "-c", cli]
        result = run_managed(box.command(argv, contain_shells=True), env=box.environment(), timeout=60, cwd="/")
    finally:
        box.close()
    out = result.stdout_tail
    assert result.ok, (out, result.stderr_tail)
    assert "token=none" in out and "leaks=0" in out and "works=ok" in out and "inner=" in out, out
    # A PID namespace of its own: the CLI's process is not among those the shell can see.
    assert "clis=0" in out, out


@needs_bwrap
def test_without_containment_the_same_probe_finds_the_cli(private_root):
    """The control for the test above: without contained shells the probe does see the CLI's token."""
    box = make_sandbox(private_root)
    box.fresh_scratch("session")
    probe = (
        "grep -l sbx-session-token /proc/[0-9]*/environ 2>/dev/null | wc -l | sed s/^/leaks=/; "
        "grep -l 'pyth[o]n3' /proc/[0-9]*/cmdline 2>/dev/null | wc -l | sed s/^/clis=/"
    )
    cli = f"import subprocess; subprocess.run(['bash', '-c', {probe!r}])"
    try:
        argv = ["/usr/bin/env", "SESSION_TOKEN=sbx-session-token", "/usr/bin/python3", "-c", cli]
        result = run_managed(box.command(argv), env=box.environment(), timeout=60, cwd="/")
    finally:
        box.close()
    out = result.stdout_tail
    assert "leaks=" in out and "leaks=0" not in out and "clis=" in out and "clis=0" not in out, out
