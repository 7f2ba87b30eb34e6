"""Test MCP server that dies at start with a message on stderr."""

import sys

print("probe server crashing on purpose: missing index", file=sys.stderr, flush=True)
sys.exit(3)
