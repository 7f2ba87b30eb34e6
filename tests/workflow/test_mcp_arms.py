"""MCP servers, per-session tool surfaces, a "no MCP" baseline and a plugin comparator, through the real CLI.

One snakemake run of four arms on one demo task with the scripted model; then a dry run after a plugin
change. The MCP servers use the official MCP Python SDK from tools/mcp-python (`make setup`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO, Project

SUITE = Path(__file__).parent / "suites" / "mcp"
EXPERIMENT = "mcptest"
SDK = {"/opt/mcp/sdk": "tools/mcp-python"}


def _config() -> dict:
    probe = {
        "command": "/usr/bin/python3",
        "args": ["/opt/mcp/probe/probe.py"],
        "mounts": {"/opt/mcp/probe": "mcp/probe", **SDK},
        "env": {"PYTHONPATH": "/opt/mcp/sdk", "PYTHONDONTWRITEBYTECODE": "1"},
        "tools": ["find_definition", "containment_report", "write_marker"],
        "roles": {"plan": ["find_definition", "containment_report"]},
    }
    crash = {
        "command": "python3",
        "args": ["/opt/mcp/probe/crash.py"],
        "mounts": {"/opt/mcp/probe": "mcp/probe"},
        "tools": ["anything"],
    }
    return {
        "experiment": EXPERIMENT,
        "runs": 1,
        "tasks": {"suite": "tasks/mcptest/tasks.yaml", "only": ["money-thousands"]},
        "agent": {"attempts": 1, "heartbeat_s": 1},
        "evolution": {"generations": 0},
        "mcp_servers": {"probe": probe, "crash": crash},
        "prompts": {"probe": "{task}"},
        "arms": {
            "mcp_arm": {
                "mcp_servers": ["probe"],
                "sessions": [
                    {"role": "plan", "prompt": "probe", "tools": ["Read", "Grep", "Glob", "Write"]},
                    {"role": "work", "prompt": "probe"},
                ],
            },
            "crash_arm": {"mcp_servers": ["crash"], "sessions": [{"role": "crash", "prompt": "probe"}]},
            "nomcp": {
                "no_mcp": True,
                "disallowed_tools": ["Skill"],
                "disable_slash_commands": True,
                "sessions": [{"role": "baseline", "prompt": "probe"}],
            },
            "plugin_arm": {
                "plugins": ["tasks/demo/plugins/lookup-kit"],
                "disable_slash_commands": False,
                "sessions": [{"role": "plugin", "prompt": "probe", "skill": "lookup-kit:lean-change"}],
            },
        },
        "selected_arms": ["mcp_arm", "crash_arm", "nomcp", "plugin_arm"],
        "report": {"baseline_arm": "nomcp"},
    }


def _setup(project: Project) -> None:
    target = project.root / "tasks" / "mcptest"
    shutil.copytree(REPO / "tasks" / "demo", target, ignore=shutil.ignore_patterns("mcp", "plugins"))
    # Servers live outside the suite folder: a mount may not be, hold or lie inside the suite.
    shutil.copytree(SUITE / "servers", project.root / "mcp" / "probe")
    shutil.copy2(SUITE / "model-script.yaml", target / "model-script.yaml")
    (target / "project" / "CLAUDE.md").write_text(
        "# Guidance\n\nKeep changes small.\nUse the probe MCP server (mcp__probe__find_definition) to find symbols.\n"
        "Run the tests before you finish.\n"
    )


def _events(project: Project, arm: str, role: str) -> list[dict]:
    folder = project.results(EXPERIMENT, "cells", "money-thousands", arm, "run0", "transcripts")
    files = sorted(path for path in folder.glob("*.jsonl") if path.name.startswith(role))
    assert files, f"no {role} transcript in {folder}: {sorted(folder.iterdir())}"
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def _init(events: list[dict]) -> dict:
    return next(event for event in events if event.get("type") == "system" and event.get("subtype") == "init")


def _results(events: list[dict]) -> dict[str, dict]:
    uses = {
        block["id"]: block["name"]
        for event in events
        if event.get("type") == "assistant"
        for block in event["message"]["content"]
        if block.get("type") == "tool_use"
    }
    found = {}
    for event in events:
        if event.get("type") != "user" or not isinstance(event.get("message", {}).get("content"), list):
            continue
        for block in event["message"]["content"]:
            if block.get("type") == "tool_result":
                content = block.get("content")
                text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
                found.setdefault(uses[block["tool_use_id"]], []).append((bool(block.get("is_error")), text))
    return found


def test_mcp_servers_surfaces_nomcp_and_plugin_arm(project: Project) -> None:
    _setup(project)
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "mcp suite")
    config = _config()
    project.snakemake(f"{'results'}/{EXPERIMENT}/sweep/results.jsonl", config=config)
    rows = {row["arm"]: row for row in project.rows(EXPERIMENT)}

    # An MCP call reaches the server; its result reaches the transcript and the row's counts.
    plan = _events(project, "mcp_arm", "plan")
    init = _init(plan)
    # Newer CLIs add fields (2.1.332: `source`) to each server's entry.
    assert ("probe", "connected") in [(server["name"], server["status"]) for server in init["mcp_servers"]]
    results = _results(plan)
    definition = results["mcp__probe__find_definition"]
    assert (False, "PROBE-DEFINITION inventory/pricing.py:29 def format_money(cents)") in definition
    assert any(error for error, _text in definition), "the unknown symbol must come back as an error"
    row = rows["mcp_arm"]
    assert row["mcp_tool_uses"] == {"probe": 5}
    assert row["mcp_semantic_errors"] == {"probe": 2}  # the unknown symbol, and the forbidden write_marker
    assert row["tool_use_counts"]["mcp__probe__find_definition"] == 2

    # The plan surface: no write_marker and no Edit offered, and calling them fails.
    assert "mcp__probe__find_definition" in init["tools"] and "mcp__probe__write_marker" not in init["tools"]
    assert "Edit" not in init["tools"]
    assert all(error for error, _text in results["mcp__probe__write_marker"])
    assert all(error for error, _text in results["Edit"])
    readme = (project.results(EXPERIMENT, "cells", "money-thousands", "mcp_arm", "run0", "patch.diff")).read_text()
    assert "EDITED" not in readme
    work = _results(_events(project, "mcp_arm", "work"))
    assert work["mcp__probe__write_marker"] == [(False, "PROBE-MARKER written: from-work")]
    # A server's mounts are the server's: the agent's commands see empty folders, the CLI's Read is denied.
    ((_error, listing),) = work["Bash"]
    assert listing.split("listed")[0].split() == ["/opt/mcp/probe:", "/opt/mcp/sdk:"], listing
    assert "read-exit=1" in listing and "def " not in listing and "import" not in listing
    ((read_error, read_text),) = work["Read"]
    assert read_error and "import" not in read_text

    # The server's containment: no key in its environment or any /proc it sees, no network, no home.
    ((error, text),) = results["mcp__probe__containment_report"]
    report = json.loads(text.removeprefix("PROBE-REPORT "))
    assert not error
    assert not [key for key in report["env_keys"] if key.startswith(("ANTHROPIC", "CLAUDE"))], report["env_keys"]
    assert report["proc_leaks"] == []
    assert report["interfaces"] == ["lo"] and report["network"].startswith("refused")
    assert report["exists"] == {
        "/home/agent": False,
        "/opt/claude": False,
        "/opt/claude/claude": False,
        "/workspace/README.md": True,
        "/root": False,
        "/etc/shadow": False,
    }
    assert report["workspace_writable"] is False

    # A server that dies at start: an excluded harness error, its stderr tail in the cell log.
    crashed = rows["crash_arm"]
    assert crashed["error_kind"] == "infra-error" and "crash (failed)" in crashed["error_detail"]
    log = project.root / "logs" / EXPERIMENT / "run_cell" / "cells" / "money-thousands" / "crash_arm" / "run0.log"
    assert "probe server crashing on purpose: missing index" in log.read_text()

    # "No MCP" (with --disable-slash-commands): nothing mcp__ advertised, no skills, and the guidance no
    # longer mentions the server.
    nomcp = _init(_events(project, "nomcp", "baseline"))
    assert nomcp["mcp_servers"] == [] and not [tool for tool in nomcp["tools"] if tool.startswith("mcp__")]
    assert nomcp["skills"] == [] and "Skill" not in nomcp["tools"]  # --disable-slash-commands
    assert rows["nomcp"]["mcp_tool_uses"] == {}
    nomcp_log = project.root / "logs" / EXPERIMENT / "run_cell" / "cells" / "money-thousands" / "nomcp" / "run0.log"
    assert "no-MCP arm: rewrote CLAUDE.md" in nomcp_log.read_text()

    # The plugin arm proves its skill by the qualified name and records the plugin's digest.
    plugin_row = rows["plugin_arm"]
    assert plugin_row["skill_invoked"] is True, plugin_row["error_detail"]
    (pinned,) = plugin_row["plugins"]
    assert pinned["name"] == "lookup-kit" and pinned["version"] == "0.1.0" and len(pinned["digest"]) == 64
    plugin_init = _init(_events(project, "plugin_arm", "plugin"))
    assert "lookup-kit:lean-change" in plugin_init["skills"]

    # A changed plugin changes the binding: its cells run again, the others do not.
    skill = project.root / "tasks" / "demo" / "plugins" / "lookup-kit" / "skills" / "lean-change" / "SKILL.md"
    skill.write_text(skill.read_text() + "\n5. Say which tests ran.\n")
    dry = project.snakemake("-n", f"results/{EXPERIMENT}/sweep/results.jsonl", config=config)
    planned = dry.stdout + dry.stderr
    cells = f"output: results/{EXPERIMENT}/cells/money-thousands"
    assert f"{cells}/plugin_arm/run0/record.json" in planned
    assert f"{cells}/mcp_arm/run0/record.json" not in planned
