"""Trigger tasks through the real CLI: a labelled prompt's one short session, judged by the skills its stream
proves it invoked — the labelled one, none, a near miss's false trigger, a missed trigger."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Project, copy_project

SUITE = Path(__file__).resolve().parent / "suites" / "review"
EXPERIMENT = "trigger"
PROMPTS = ["asks-for-review", "asks-a-question", "near-miss-review", "asks-for-tests"]
CONFIG = {
    "experiment": EXPERIMENT,
    "tasks": {"suite": "tasks/review/tasks.yaml", "only": PROMPTS},
    "runs": 1,
    "model": {"script": "tasks/review/trigger-script.yaml"},
    "skills": {"root": "tasks/review/skills", "evolvable": ["code-review", "test-writer"]},
    "arms": {
        "trigger": {
            "sessions": [{"role": "trigger", "prompt": "trigger", "tools": ["Read", "Grep", "Glob", "Skill"]}],
            "skills": ["code-review", "test-writer"],
        }
    },
    "selected_arms": ["trigger"],
    "report": {"baseline_arm": "trigger"},
    "prompts": {"trigger": "{task}\n\nIf one of your skills is meant for this, invoke it first; then stop."},
    "evolution": {"generations": 0},
}


@pytest.fixture(scope="module")
def triggered(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = copy_project(tmp_path_factory.mktemp("trigger") / "project", commit=False)
    shutil.copytree(SUITE, project.root / "tasks" / "review")
    project.git("init", "-q")
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture")
    project.snakemake(f"results/{EXPERIMENT}/sweep/results.jsonl", config=CONFIG)
    return project


def rows(project: Project) -> dict[str, dict]:
    return {row["task"]: row for row in project.rows(EXPERIMENT)}


def test_the_labelled_skill_or_none_resolves(triggered: Project) -> None:
    found = rows(triggered)
    review, question = found["asks-for-review"], found["asks-a-question"]
    assert review["resolved"] and review["trigger"] == {
        "expected": "code-review",
        "near_miss": False,
        "invoked": ["code-review"],
        "false_triggers": [],
        "correct": True,
    }
    assert question["resolved"] and question["trigger"]["invoked"] == [] and question["trigger"]["correct"]
    assert review["cost_usd"] > 0 and question["cost_usd"] > 0


def test_a_near_miss_that_triggers_and_a_missed_trigger_are_counted(triggered: Project) -> None:
    found = rows(triggered)
    near, missed = found["near-miss-review"], found["asks-for-tests"]
    assert (near["resolved"], near["error_kind"], near["ok"]) == (False, "trigger-false", True)
    assert near["trigger"]["near_miss"] and near["trigger"]["false_triggers"] == ["code-review"]
    assert (missed["resolved"], missed["error_kind"], missed["ok"]) == (False, "trigger-missed", True)
    assert missed["trigger"]["invoked"] == [] and missed["trigger"]["expected"] == "test-writer"


def test_a_trigger_label_is_checked_and_bound_before_any_session(triggered: Project) -> None:
    check = triggered.results(EXPERIMENT, "tasks", "asks-for-tests", "check.json").read_text()
    assert "trigger: a labelled prompt" in check
    snapshot = triggered.results(EXPERIMENT, "tasks", "asks-for-tests", "oracle", "trigger-label.json")
    assert '"expect": "test-writer"' in snapshot.read_text()
