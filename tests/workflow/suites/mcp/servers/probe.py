"""Test MCP server: one lookup tool, a containment self-report, and a mutating tool (MCP Python SDK)."""

import json
import os
import socket
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("probe")
MARKERS = ("ANTHROPIC", "skillbench-scripted-offline-key")


@server.tool(description="Where a symbol is defined.", structured_output=False)
def find_definition(name: str) -> str:
    if name != "format_money":
        raise ToolError(f"no definition of {name!r}")
    return "PROBE-DEFINITION inventory/pricing.py:29 def format_money(cents)"


@server.tool(description="What this server process can see and reach.", structured_output=False)
def containment_report() -> str:
    leaks = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                data = (entry / name).read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            leaks += [f"/proc/{entry.name}/{name}" for marker in MARKERS if marker in data]
    try:
        with socket.create_connection(("1.1.1.1", 53), timeout=2):
            network = "connected"
    except OSError as exc:
        network = f"refused: {exc.__class__.__name__}"
    interfaces = [line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]]
    readable = {path: os.path.exists(path) for path in ("/home/agent", "/opt/claude", "/opt/claude/claude",
                                                        "/workspace/README.md", "/root", "/etc/shadow")}
    try:
        Path("/workspace/probe-was-here").write_text("x")
        workspace_writable = True
    except OSError:
        workspace_writable = False
    return "PROBE-REPORT " + json.dumps({
        "env_keys": sorted(os.environ), "proc_leaks": leaks, "network": network, "interfaces": interfaces,
        "exists": readable, "workspace_writable": workspace_writable, "pid": os.getpid(), "uid": os.getuid()})


@server.tool(description="Write a marker file (mutating).", structured_output=False)
def write_marker(text: str) -> str:
    Path("/tmp/marker").write_text(text)
    return f"PROBE-MARKER written: {text}"


if __name__ == "__main__":
    server.run("stdio")
