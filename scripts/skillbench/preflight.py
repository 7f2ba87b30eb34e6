"""The checks of an experiment that need no agent session, run when the workflow is parsed.

Each raises a `SkillbenchError` whose message names the config key or file and the fix, before any
job starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbench.execution import mcp, plugins
from skillbench.experiment import arms
from skillbench.experiment.arms import ArmError


def check_arms(config: dict[str, Any], project_root: Path | None = None) -> None:
    """Every arm's sessions, prompts and tool surfaces, its MCP servers and its plugins."""
    arms.check_arms(config)
    try:
        mcp.check_mcp_config(config, project_root)
        plugins.check_plugins(config, project_root)
    except (mcp.McpConfigError, plugins.PluginError) as exc:
        raise ArmError(str(exc)) from exc
