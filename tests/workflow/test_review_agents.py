"""A review arm on every agent CLI the project supports: each proves its skill, writes its review through its own
tools into the one writable folder, cannot write the code it reviews, and is scored against the hidden labels."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Project, copy_project

SUITE = Path(__file__).resolve().parent / "suites" / "review"
EXPERIMENT = "reviewagents"
TOOLS = ["Read", "Grep", "Glob", "Write", "Skill"]
# agent -> (its arm, the model its sessions ask for, that model's USD per million tokens)
AGENTS = {
    "claude-code": ("review_claude", None, None),
    "codex": (
        "review_codex",
        "gpt-5.5",
        {"input": 1.25, "output": 10.0, "cache_write": 0.0, "cache_write_1h": 0.0, "cache_read": 0.125},
    ),
    "copilot": (
        "review_copilot",
        "claude-sonnet-4-5",
        {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
    ),
    "gemini": (
        "review_gemini",
        "gemini-2.5-pro",
        {"input": 1.25, "output": 10.0, "cache_write": 1.25, "cache_write_1h": 1.25, "cache_read": 0.31},
    ),
    "opencode": (
        "review_opencode",
        "claude-sonnet-4-5",
        {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
    ),
}


def config() -> dict:
    arms = {
        arm: {
            **({} if agent == "claude-code" else {"agent": agent}),
            "sessions": [{"role": "review", "prompt": "review", "skill": "code-review", "tools": TOOLS}],
        }
        for agent, (arm, _model, _price) in AGENTS.items()
    }
    prices = {model: price for _arm, model, price in AGENTS.values() if model}
    return {
        "experiment": EXPERIMENT,
        "tasks": {"suite": "tasks/review/tasks.yaml", "only": ["cli-review"]},
        "runs": 1,
        "skills": {"root": "tasks/review/skills", "evolvable": ["code-review"]},
        "agent": {"attempts": 1, "prices": {"usd_per_mtok": prices}},
        "agents": {agent: {"model": model} for agent, (_arm, model, _price) in AGENTS.items() if model},
        "arms": arms,
        "selected_arms": [arm for arm, _model, _price in AGENTS.values()],
        "report": {
            "baseline_arm": "review_claude",
            "baseline_arms": {agent: arm for agent, (arm, _m, _p) in AGENTS.items() if agent != "claude-code"},
        },
        "prompts": {
            "review": "Use the {skill} skill to review the uncommitted changes: {task}\n\nWrite your review to "
            ".skillbench-output/review-output.json (review-output/v1); the rest of the repository is read-only."
        },
        "evolution": {"generations": 0},
    }


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = copy_project(tmp_path_factory.mktemp("reviewagents") / "project", commit=False)
    shutil.copytree(SUITE, project.root / "tasks" / "review")
    project.git("init", "-q")
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture")
    project.snakemake(f"results/{EXPERIMENT}/sweep/results.jsonl", config=config())
    return project


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_cli_runs_a_read_only_review_scored_against_the_labels(reviewed: Project, agent: str) -> None:
    arm = AGENTS[agent][0]
    (row,) = [row for row in reviewed.rows(EXPERIMENT) if row["arm"] == arm]
    assert row["agent"] == agent
    assert row["skill_invoked"] is True, row
    assert row["resolved"] and row["error_kind"] is None, row
    assert (row["review"]["tp"], row["review"]["fp"], row["review"]["fn"]) == (1, 0, 0)
    cell = reviewed.results(EXPERIMENT, "cells", "cli-review", arm, "run0")
    # Its last step tried to rewrite the code: the workspace is as the review found it.
    assert (cell / "patch.diff").read_bytes() == b""
    assert row["cost_usd"] is not None and row["cost_usd"] > 0
