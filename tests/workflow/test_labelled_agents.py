"""Review and trigger arms on every agent CLI the project supports. A review arm proves its skill, writes its
review through its own tools into the one writable folder, cannot write the code it reviews, and is scored
against the hidden labels. A trigger arm runs one short session per labelled prompt (the labelled skill, none, a
near miss's false trigger, a missed trigger), its invoked skills proved from its own CLI's stream."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Project, copy_project

SUITE = Path(__file__).resolve().parent / "suites" / "review"
TOOLS = ["Read", "Grep", "Glob", "Write", "Skill"]
# agent -> (its arm, the model its sessions ask for, that model's USD per million tokens)
# agent -> (the model its sessions ask for, that model's USD per million tokens); None: the default model.
AGENTS = {
    "claude-code": (None, None),
    "codex": (
        "gpt-5.5",
        {"input": 1.25, "output": 10.0, "cache_write": 0.0, "cache_write_1h": 0.0, "cache_read": 0.125},
    ),
    "copilot": (
        "claude-sonnet-4-5",
        {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
    ),
    "gemini": (
        "gemini-2.5-pro",
        {"input": 1.25, "output": 10.0, "cache_write": 1.25, "cache_write_1h": 1.25, "cache_read": 0.31},
    ),
    "opencode": (
        "claude-sonnet-4-5",
        {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3},
    ),
}
TRIGGER_PROMPTS = ["asks-for-review", "asks-a-question", "near-miss-review", "asks-for-tests"]


def arm_name(role: str, agent: str) -> str:
    return f"{role}_{agent.removesuffix('-code')}"


def config(role: str, experiment: str, tasks: list[str], **session: object) -> dict:
    """One arm per agent CLI (`<role>_<agent>`), each with one session of `role`, on `tasks` of the review suite."""
    arms = {
        arm_name(role, agent): {
            **({} if agent == "claude-code" else {"agent": agent}),
            "sessions": [{"role": role, "prompt": role, "tools": TOOLS, **session}],
            **({"skills": ["code-review", "test-writer"]} if role == "trigger" else {}),
        }
        for agent in AGENTS
    }
    return {
        "experiment": experiment,
        "tasks": {"suite": "tasks/review/tasks.yaml", "only": tasks},
        "runs": 1,
        "skills": {"root": "tasks/review/skills", "evolvable": ["code-review", "test-writer"]},
        "agent": {
            "attempts": 1,
            "prices": {"usd_per_mtok": {model: price for model, price in AGENTS.values() if model}},
        },
        "agents": {agent: {"model": model} for agent, (model, _price) in AGENTS.items() if model},
        "arms": arms,
        "selected_arms": list(arms),
        "report": {
            "baseline_arm": arm_name(role, "claude-code"),
            "baseline_arms": {agent: arm_name(role, agent) for agent in AGENTS if agent != "claude-code"},
        },
        "prompts": {
            "review": "Use the {skill} skill to review the uncommitted changes: {task}\n\nWrite your review to "
            ".skillbench-output/review-output.json (review-output/v1); the rest of the repository is read-only.",
            "trigger": "{task}\n\nIf one of your skills is meant for this, invoke it first; then stop.",
        },
        "evolution": {"generations": 0},
    }


def run(tmp_path_factory: pytest.TempPathFactory, settings: dict) -> Project:
    project = copy_project(tmp_path_factory.mktemp(settings["experiment"]) / "project", commit=False)
    shutil.copytree(SUITE, project.root / "tasks" / "review")
    project.git("init", "-q")
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture")
    project.snakemake(f"results/{settings['experiment']}/sweep/results.jsonl", config=settings)
    return project


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return run(tmp_path_factory, config("review", "reviewagents", ["cli-review"], skill="code-review"))


@pytest.fixture(scope="module")
def triggered(tmp_path_factory: pytest.TempPathFactory) -> Project:
    settings = config("trigger", "triggeragents", TRIGGER_PROMPTS)
    settings["model"] = {"script": "tasks/review/trigger-script.yaml"}
    return run(tmp_path_factory, settings)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_cli_runs_a_read_only_review_scored_against_the_labels(reviewed: Project, agent: str) -> None:
    arm = arm_name("review", agent)
    (row,) = [row for row in reviewed.rows("reviewagents") if row["arm"] == arm]
    assert row["agent"] == agent
    assert row["skill_invoked"] is True, row
    assert row["resolved"] and row["error_kind"] is None, row
    assert (row["review"]["tp"], row["review"]["fp"], row["review"]["fn"]) == (1, 0, 0)
    cell = reviewed.results("reviewagents", "cells", "cli-review", arm, "run0")
    # Its last step tried to rewrite the code: the workspace is as the review found it.
    assert (cell / "patch.diff").read_bytes() == b""
    assert row["cost_usd"] is not None and row["cost_usd"] > 0


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_cli_proves_which_skill_a_labelled_prompt_triggered(triggered: Project, agent: str) -> None:
    arm = arm_name("trigger", agent)
    found = {row["task"]: row for row in triggered.rows("triggeragents") if row["arm"] == arm}
    assert sorted(found) == sorted(TRIGGER_PROMPTS)
    review, question = found["asks-for-review"], found["asks-a-question"]
    assert review["agent"] == agent and review["cost_usd"] > 0
    assert review["resolved"] and review["trigger"] == {
        "expected": "code-review",
        "near_miss": False,
        "invoked": ["code-review"],
        "false_triggers": [],
        "correct": True,
    }
    assert question["resolved"] and question["trigger"]["invoked"] == [] and question["trigger"]["correct"]
    # A near miss that loads the review skill, and a prompt for test-writer that loads none: the agent's outcomes.
    near, missed = found["near-miss-review"], found["asks-for-tests"]
    assert (near["resolved"], near["error_kind"], near["ok"]) == (False, "trigger-false", True)
    assert near["trigger"]["near_miss"] and near["trigger"]["false_triggers"] == ["code-review"]
    assert (missed["resolved"], missed["error_kind"], missed["ok"]) == (False, "trigger-missed", True)
    assert missed["trigger"]["invoked"] == [] and missed["trigger"]["expected"] == "test-writer"


def test_a_trigger_label_is_checked_and_bound_hidden_before_any_session(triggered: Project) -> None:
    check = triggered.results("triggeragents", "tasks", "asks-for-tests", "check.json").read_text()
    assert "trigger: a labelled prompt" in check
    snapshot = triggered.results("triggeragents", "tasks", "asks-for-tests", "oracle", "trigger-label.json")
    assert '"expect": "test-writer"' in snapshot.read_text()
