"""Running untrusted work contained: cells end to end, agent sessions and their evidence, the
Bubblewrap sandbox, the harness's git, the scripted model, MCP servers and plugins, the outage
breaker. Imports `base` and `experiment`; how a cell is graded comes in from above (a grader)."""
