"""MCP configuration checks, per-session tool surfaces, the --mcp-config document and stream evidence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from skillbench import preflight  # noqa: E402
from skillbench.execution import (
    mcp,  # noqa: E402
    sandbox,  # noqa: E402
    sessions,  # noqa: E402
)
from skillbench.execution.agents import claude_code
from skillbench.experiment import arms  # noqa: E402


def make_project(root: Path) -> Path:
    (root / "suite" / "project").mkdir(parents=True)
    (root / "suite" / "tasks.yaml").write_text("tasks:\n  - {id: t1, snapshot: project}\n")
    (root / "suite" / "project" / "server.py").write_text("print('hi')\n")
    (root / "servers").mkdir()
    (root / "servers" / "index.py").write_text("print('index')\n")
    return root


def make_config(**server) -> dict:
    definition = {
        "command": "/usr/bin/python3",
        "args": ["/opt/mcp/srv/index.py"],
        "mounts": {"/opt/mcp/srv": "servers"},
        "tools": ["find", "edit"],
        "roles": {"plan": ["find"]},
        **server,
    }
    return {
        "tasks": {"suite": "suite/tasks.yaml"},
        "model": {"api_key_env": "ANTHROPIC_API_KEY"},
        "agent": {"tools": ["Read", "Edit", "Bash"]},
        "prompts": {"p": "{task}"},
        "mcp_servers": {"index": definition},
        "arms": {
            "a": {
                "mcp_servers": ["index"],
                "sessions": [{"role": "plan", "prompt": "p"}, {"role": "work", "prompt": "p"}],
            }
        },
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"command": "bin/server"}, "mcp_servers.index.command: 'bin/server' is relative"),
        ({"command": "suite/project/server.py"}, "is relative"),
        ({"command": "no-such-program-xyz"}, "mcp_servers.index.command: 'no-such-program-xyz' is not on"),
        ({"roles": {"plan": ["delete"]}}, "mcp_servers.index.roles.plan: ['delete'] are not among"),
        ({"env": {"ANTHROPIC_API_KEY": "x"}}, "mcp_servers.index.env.ANTHROPIC_API_KEY"),
        ({"mounts": {"/home/x": "servers"}}, "mcp_servers.index.mounts: target '/home/x'"),
        ({"mounts": {"/opt/mcp/srv": "missing"}}, "mcp_servers.index.mounts./opt/mcp/srv: 'missing' does not exist"),
    ],
)
def test_bad_server_config_fails_naming_the_key(tmp_path, change, message):
    root = make_project(tmp_path)
    with pytest.raises(mcp.McpConfigError) as caught:
        mcp.check_mcp_config(make_config(**change), root)
    assert message in str(caught.value)


def test_command_inside_a_task_workspace_is_refused(tmp_path):
    root = make_project(tmp_path)
    config = make_config(command=str(root / "suite" / "project" / "server.py"))
    with pytest.raises(mcp.McpConfigError, match="mcp_servers.index.command: .* inside a task workspace"):
        mcp.check_mcp_config(config, root)
    with pytest.raises(mcp.McpConfigError, match="inside a task workspace"):
        mcp.check_mcp_config(make_config(command="/workspace/tool"), root)
    with pytest.raises(mcp.McpConfigError, match="mounts./opt/mcp/srv: 'suite/project' lies inside the task suite"):
        mcp.check_mcp_config(make_config(mounts={"/opt/mcp/srv": "suite/project"}), root)


def test_a_command_under_a_mount_or_the_system_trees_is_accepted(tmp_path):
    root = make_project(tmp_path)
    resolved = mcp.check_mcp_config(make_config(command="/opt/mcp/srv/index.py"), root)
    assert resolved["index"] == {
        "command": "/opt/mcp/srv/index.py",
        "mounts": {"/opt/mcp/srv": str((root / "servers").resolve())},
    }
    assert mcp.check_mcp_config(make_config(command="python3"), root)["index"]["command"].startswith("/usr/")


def make_hostile_suite(root: Path) -> Path:
    """A suite with hidden oracles, a reference solution and a repository task; the project is a git repository."""
    suite = root / "suite"
    (suite / "oracles").mkdir()
    (suite / "oracles" / "hidden_test.py").write_text("ORACLE-CANARY\n")
    (suite / "solutions").mkdir()
    (suite / "solutions" / "fix.patch").write_text("FIX-CANARY\n")
    for repository in (root / "target-repo", root):
        repository.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repository)], check=True, capture_output=True)
    (root / "results" / "demo").mkdir(parents=True)
    (root / "shared" / "tools").mkdir(parents=True)
    (root / "shared" / "oracle-copy.py").symlink_to(suite / "oracles" / "hidden_test.py")
    (suite / "tasks.yaml").write_text(
        "tasks:\n"
        "  - {id: t1, snapshot: project, oracle: {files: [{source: oracles/hidden_test.py, target: t.py}]},"
        " solution: {patch: solutions/fix.patch}}\n"
        f"  - {{id: t2, repo: {root / 'target-repo'}, oracle: {{files: []}}}}\n"
    )
    return root


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("suite", "'suite' is the task suite folder"),
        ("suite/oracles", "'suite/oracles' lies inside the task suite folder"),
        ("suite/oracles/hidden_test.py", "'suite/oracles/hidden_test.py' lies inside the task suite folder"),
        (".", "'.' contains the task suite folder"),
        ("results", "'results' is the results folder"),
        ("results/demo", "'results/demo' lies inside the results folder"),
        (".git", "'.git' is the skills repository's git directory"),
        ("target-repo", "'target-repo' is the repository of task t2"),
        ("target-repo/.git", "'target-repo/.git' lies inside the repository of task t2"),
        ("shared/oracle-copy.py", "'shared/oracle-copy.py' lies inside the task suite folder"),
    ],
)
def test_a_mount_that_is_holds_or_lies_inside_what_a_session_may_not_see_is_refused(tmp_path, source, message):
    root = make_hostile_suite(make_project(tmp_path))
    with pytest.raises(mcp.McpConfigError) as caught:
        mcp.check_mcp_config(make_config(mounts={"/opt/mcp/srv": source}), root)
    assert f"config mcp_servers.index.mounts./opt/mcp/srv: {message}" in str(caught.value)
    assert "keep the server's files in a folder of their own outside the task suite" in str(caught.value)


def test_a_mount_holding_an_oracle_kept_outside_the_suite_folder_is_refused(tmp_path):
    root = make_project(tmp_path)
    (root / "oracles-elsewhere").mkdir()
    (root / "oracles-elsewhere" / "hidden.py").write_text("x\n")
    (root / "suite" / "tasks.yaml").write_text(
        "tasks:\n  - {id: t1, snapshot: project, oracle: {files: [{source: ../oracles-elsewhere/hidden.py}]}}\n"
    )
    with pytest.raises(mcp.McpConfigError, match="'oracles-elsewhere' contains a hidden oracle file of task t1"):
        mcp.check_mcp_config(make_config(mounts={"/opt/mcp/srv": "oracles-elsewhere"}), root)


def test_a_mount_of_the_server_s_own_folder_beside_the_suite_is_accepted(tmp_path):
    root = make_hostile_suite(make_project(tmp_path))
    resolved = mcp.check_mcp_config(make_config(mounts={"/opt/mcp/srv": "shared/tools"}), root)
    assert resolved["index"]["mounts"] == {"/opt/mcp/srv": str((root / "shared" / "tools").resolve())}


@pytest.mark.parametrize(
    ("arm", "message"),
    [
        ({"mcp_servers": ["nope"]}, "arms.a.mcp_servers: ['nope'] are not declared"),
        (
            {"sessions": [{"role": "plan", "prompt": "p", "tools": ["Read", "mcp__other__find"]}]},
            "arms.a.sessions[0].tools: 'mcp__other__find' names no MCP server this arm loads",
        ),
        ({"disallowed_tools": ["mcp__index__drop"]}, "arms.a.disallowed_tools: 'mcp__index__drop': server 'index'"),
        ({"no_mcp": True}, "arms.a: no_mcp is true but the arm loads MCP servers"),
        ({"mcp_access": {"other": {"network": True}}}, "arms.a.mcp_access.other"),
    ],
)
def test_bad_arm_mcp_keys_fail_naming_the_key(tmp_path, arm, message):
    root = make_project(tmp_path)
    config = make_config()
    config["arms"]["a"].update(arm)
    with pytest.raises(mcp.McpConfigError) as caught:
        mcp.check_mcp_config(config, root)
    assert message in str(caught.value)


def test_check_arms_reports_mcp_errors_as_arm_errors(tmp_path):
    root = make_project(tmp_path)
    config = make_config(command="relative/server")
    config["skills"] = {"evolvable": []}
    with pytest.raises(arms.ArmError, match="mcp_servers.index.command"):
        preflight.check_arms(config, root)


def test_session_surfaces_follow_roles_and_overrides():
    config = make_config()
    definition = config["arms"]["a"]
    plan_tools, plan_denied = mcp.session_surface(config, definition, {"role": "plan"})
    assert plan_tools == ["Read", "Edit", "Bash", "mcp__index__find"]
    assert plan_denied == ["mcp__index__edit"]
    work_tools, work_denied = mcp.session_surface(config, definition, {"role": "work"})
    assert work_tools == ["Read", "Edit", "Bash", "mcp__index__find", "mcp__index__edit"] and work_denied == []
    review = {"role": "review", "tools": ["Read", "mcp__index__find"], "disallowed_tools": ["Bash"]}
    tools, denied = mcp.session_surface(config, definition, review)
    assert tools == ["Read", "mcp__index__find"] and denied == ["Bash", "mcp__index__edit"]
    wildcard = {"role": "review", "tools": ["Read", "mcp__index__*"]}
    assert mcp.session_surface(config, definition, wildcard)[0] == ["Read", "mcp__index__find", "mcp__index__edit"]
    no_mcp = {"sessions": [{"role": "b", "prompt": "p"}], "no_mcp": True, "disallowed_tools": ["Skill"]}
    tools, denied = mcp.session_surface(config, no_mcp, {"role": "b"})
    assert not [tool for tool in tools if tool.startswith("mcp__")] and denied == ["Skill"]


def test_server_names_are_normalised_like_the_cli():
    assert mcp.tool_name("code.intel v2", "find") == "mcp__code_intel_v2__find"


def test_mcp_config_is_credential_free_and_sandboxes_every_server():
    config = make_config(env={"PYTHONPATH": "/opt/mcp/sdk"})
    servers = mcp.arm_servers(config, config["arms"]["a"])

    def argv(name, server):
        return sandbox.mcp_server_argv(
            command="/usr/bin/python3",
            args=server["args"],
            env=mcp.server_environment(server),
            mounts=["/opt/mcp/srv"],
            network=server["network"],
            workspace=server["workspace"],
        )

    document = json.loads(mcp.mcp_config_json(servers, argv))
    entry = document["mcpServers"]["index"]
    assert entry["type"] == "stdio" and entry["command"] == "/usr/bin/env"
    args = entry["args"]
    assert args[:2] == ["-i", "PATH=/usr/bin:/bin"] and "env" not in entry
    for flag in ("--unshare-net", "--unshare-pid", "--clearenv", "--die-with-parent"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    position = args.index(sandbox.SANDBOX_WORKSPACE)
    assert args[position - 1] == "--ro-bind"
    assert args[-3:] == ["--", "/usr/bin/python3", "/opt/mcp/srv/index.py"]
    assert "ANTHROPIC" not in json.dumps(document)
    config["arms"]["a"]["mcp_access"] = {"index": {"network": True, "workspace": "none"}}
    opened = json.loads(mcp.mcp_config_json(mcp.arm_servers(config, config["arms"]["a"]), argv))
    assert "--unshare-net" not in opened["mcpServers"]["index"]["args"]
    assert sandbox.SANDBOX_WORKSPACE not in opened["mcpServers"]["index"]["args"]


def test_cli_argv_always_strict_and_carries_plugins_and_flags():
    argv = claude_code.cli_command(
        "claude",
        tools=["Read", "mcp__i__f"],
        disallowed_tools=["mcp__i__g"],
        model="m",
        effort=None,
        settings_json=None,
        mcp_config='{"mcpServers":{"i":{}}}',
        plugin_dirs=["/opt/p/0-x"],
        disable_slash_commands=True,
    )
    assert argv[argv.index("--mcp-config") - 1] == "--strict-mcp-config"
    assert argv[argv.index("--plugin-dir") + 1] == "/opt/p/0-x"
    assert "--disable-slash-commands" in argv
    assert argv[argv.index("--allowedTools") + 1] == "Read,mcp__i__f"
    assert argv[argv.index("--disallowedTools") + 1] == "mcp__i__g"


def _use(tool_id, name):
    return {
        "type": "assistant",
        "message": {"id": tool_id, "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": {}}]},
    }


def _result(tool_id, content, is_error=False):
    return {
        "type": "user",
        "message": {
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": is_error}]
        },
    }


def test_counts_uses_and_semantic_errors_per_server():
    events = [
        {"type": "system", "subtype": "init", "mcp_servers": [{"name": "index", "status": "connected"}]},
        _use("t1", "mcp__index__find"),
        _result("t1", [{"type": "text", "text": "found"}]),
        _use("t2", "mcp__index__find"),
        _result("t2", "Error executing tool find: nope", is_error=True),
        _use("t3", "mcp__index__find"),
        _result("t3", '{"result": "{\\"error\\": \\"index stale\\"}"}'),
        _use("t4", "mcp__index__find"),
        _result("t4", '{"ok": false, "reason": "x"}'),
        _use("t5", "Read"),
        _result("t5", '{"error": "not mcp"}'),
    ]
    uses, errors = mcp.mcp_counts(events, ["index", "other"])
    assert uses == {"index": 4, "other": 0}
    assert errors == {"index": 3, "other": 0}
    assert mcp.failed_servers(events, ["index"]) == {}
    assert mcp.failed_servers(events, ["index", "other"]) == {"other": "missing"}


def test_a_failed_server_makes_the_session_an_excluded_harness_error():
    from skillbench.base.process import ProcessResult

    events = [
        {
            "type": "system",
            "subtype": "init",
            "tools": ["Read"],
            "mcp_servers": [{"name": "index", "status": "failed"}],
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1,
            "session_id": "s1",
            "total_cost_usd": 0.0,
            "duration_ms": 10,
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    ]
    raw = "\n".join(json.dumps(event) for event in events).encode() + b"\n"
    outcome = ProcessResult(
        state="ok", returncode=0, duration_s=0.1, stdout_tail="", stderr_tail="", stdout_capture=raw
    )
    record = sessions.session_record(
        outcome,
        reading=claude_code.read_stream(raw, overflow=False, limit=len(raw) + 1, mcp_servers=["index"]),
        expected_skill=None,
        transcript_dir=None,
        transcript_prefix="x",
        secrets=[],
        started_at="a",
        finished_at="b",
    )
    assert record["ok"] is False and record["error_kind"] == "infra-error"
    assert record["mcp_failed"] == {"index": "failed"} and "index (failed)" in record["error_detail"]


def test_strip_guidance_drops_lines_about_unavailable_tools(tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / "CLAUDE.md").write_text("Keep it small.\nAsk the index MCP server first.\nRun tests.\n")
    (tmp_path / ".claude" / "CLAUDE.md").write_text("Use mcp__tickets__search for tickets.\nBe brief.\n")
    (tmp_path / "AGENTS.md").write_text("The tickets server knows the backlog.\nNothing else.\n")
    (tmp_path / "README.md").write_text("MCP is mentioned here but this is no guidance file.\n")
    changed = mcp.strip_guidance(tmp_path, ["tickets"])
    assert changed == ["CLAUDE.md", "AGENTS.md", ".claude/CLAUDE.md"]
    assert (tmp_path / "CLAUDE.md").read_text() == "Keep it small.\nRun tests.\n"
    assert (tmp_path / ".claude" / "CLAUDE.md").read_text() == "Be brief.\n"
    assert (tmp_path / "AGENTS.md").read_text() == "Nothing else.\n"
    assert "MCP" in (tmp_path / "README.md").read_text()


def test_server_log_tail_reads_the_cli_mcp_log(tmp_path):
    folder = tmp_path / ".cache" / "claude-cli-nodejs" / "-workspace" / "mcp-logs-index"
    folder.mkdir(parents=True)
    (folder / "2026.jsonl").write_text(
        "\n".join(
            json.dumps(entry)
            for entry in [
                {"debug": "Starting"},
                {"error": "Server stderr: index crashed: no such table\n"},
                {"debug": "Connection failed after 13ms: exit 3"},
            ]
        )
        + "\n"
    )
    tail = mcp.server_log_tail(tmp_path, "index")
    assert "index crashed: no such table" in tail and "Connection failed" in tail and "Starting" not in tail
    assert mcp.server_log_tail(tmp_path, "other") == ""


def test_heartbeat_counts_mcp_calls_and_previews_them():
    import io
    import time

    output = io.StringIO()
    event = _use("t1", "mcp__index__find")
    event["message"]["content"][0]["input"] = {"name": "format_money"}
    with sessions.SessionProgress("cell", output, [], heartbeat_s=0.05) as progress:
        progress.observe(json.dumps(event).encode() + b"\n")
        progress.observe(json.dumps(_result("t1", [{"type": "text", "text": "found it"}])).encode() + b"\n")
        progress.observe(json.dumps(_use("t2", "mcp__index__find")).encode() + b"\n")
        progress.observe(json.dumps(_result("t2", '{"error": "stale index"}')).encode() + b"\n")
        time.sleep(0.3)
    text = output.getvalue()
    assert 'tool mcp__index__find input={"name":"format_money"}' in text
    assert "tool mcp__index__find result=ok" in text
    assert "tool mcp__index__find result=error (envelope)" in text
    assert "2 tool calls (2 MCP)" in text


def test_only_world_readable_trees_are_bound_without_a_copy(tmp_path):
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="skillbench-test-", dir="/tmp"))
    try:
        tree = base / "sdk"
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "mod.py").write_text("x = 1\n")
        for path in (base, tree, tree / "pkg"):
            path.chmod(0o755)
        (tree / "pkg" / "mod.py").chmod(0o644)
        assert sandbox.world_readable_tree(tree)
        (tree / "pkg" / "mod.py").chmod(0o600)
        assert not sandbox.world_readable_tree(tree)
        (tree / "pkg" / "mod.py").chmod(0o644)
        base.chmod(0o700)
        assert not sandbox.world_readable_tree(tree), "a parent the sandbox uid cannot enter"
    finally:
        shutil.rmtree(base)
