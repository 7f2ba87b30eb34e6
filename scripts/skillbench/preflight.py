"""The checks of an experiment that need no agent session, run when the workflow is parsed.

The arms (with their MCP servers and plugins) and an initial overlay (the checks `freeze_overlay` runs on
every candidate, `checked_overlay`). Each raises a `SkillbenchError` whose message names the config key
or file and the fix, before any job starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbench.evolution.apply import committed_target_digests
from skillbench.execution import mcp, plugins, quota, sandbox
from skillbench.experiment import arms, overlay, skillformat
from skillbench.experiment.arms import ArmError, required_candidate_arms
from skillbench.experiment.suite import load_suite
from skillbench.grading import oracle


def check_arms(config: dict[str, Any], project_root: Path | None = None) -> None:
    """Every arm's sessions, prompts and tool surfaces, its MCP servers and its plugins."""
    arms.check_arms(config)
    try:
        mcp.check_mcp_config(config, project_root)
        plugins.check_plugins(config, project_root)
    except (mcp.McpConfigError, plugins.PluginError) as exc:
        raise ArmError(str(exc)) from exc


def suite_oracles(suite: str) -> list[tuple[str, bytes]]:
    """Every oracle file the task suite declares (selected or not), as (label, bytes), read from its sources."""
    found: list[tuple[str, bytes]] = []
    for task in load_suite(suite):
        files = oracle.capture_oracle(Path(suite).parent, task["oracle"])
        found += [(f"{target} of task {task['id']}", payload) for target, payload in files]
    return found


def checked_overlay(
    source: str,
    skills: dict[str, Any],
    oracles: list[tuple[str, bytes]],
    paired_arms: Callable[[set[str]], list[str]],
    repository: str,
) -> tuple[Any, set[str], list[str], list[str], dict[str, Any]]:
    """(files, touched skills, paired candidate arms, promotion targets, their committed digests) of an overlay
    that passed every check a candidate must pass before any cell: no oracle content, the skill format, a real
    change, the experiment's paired arms (`paired_arms` of the touched skills), bound targets."""
    files = overlay.overlay_files(Path(source), skills["evolvable"])
    overlay.refuse_oracle_content(files, oracles, source)
    skillformat.check_overlay(Path(source))
    overlay.require_change(files, Path(skills["root"]))
    touched = overlay.touched_skills(files)
    candidates = paired_arms(touched)
    targets = overlay.promotion_targets(files, skills_root=skills["root"], mirrors=skills["mirrors"])
    bases = committed_target_digests(Path(repository), targets)
    return files, touched, candidates, targets, bases


def check_initial_overlay(config: dict[str, Any], repository: str = ".") -> None:
    """Parse time: validate evolution.initial_overlay as freeze_overlay will, so a bad overlay costs no session."""
    source = config["evolution"]["initial_overlay"]
    if not source or config["evolution"]["generations"] == 0:
        return
    checked_overlay(
        source,
        config["skills"],
        suite_oracles(config["tasks"]["suite"]),
        lambda touched: required_candidate_arms(config, touched, source),
        repository,
    )


def check_containment(config: dict[str, Any]) -> None:
    """Once per run, before any session: the sandbox and the per-cell disk quota work on this machine."""
    if config["sandbox"]["backend"] != "bwrap":
        return
    sandbox.preflight(config["sandbox"]["bwrap"])
    if quota.disk_quota_mb(config):
        quota.preflight()
