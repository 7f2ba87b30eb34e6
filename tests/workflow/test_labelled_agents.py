"""Review and trigger arms on every agent CLI the project supports. A review arm proves its skill, writes its
review through its own tools into the one writable folder, cannot write the code it reviews, and is scored
against the hidden labels. A trigger arm runs one short session per labelled prompt (the labelled skill, none, a
near miss's false trigger, a missed trigger), its invoked skills proved from its own CLI's stream.

Every cell's results also open in other tools: each session's ATIF trajectory (validated with PyPI `atif`'s
models) has the ledger's tokens step by step, each cell is a Harbor trial whose reward is its row's, and
`skillbench export --inspect` writes Inspect logs that `read_eval_log` reads back. The runs price their models
from the pinned LiteLLM table (`agent.prices.source`), and the report names it with its digest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import atif
import pytest
from conftest import Project, copy_project

SUITE = Path(__file__).resolve().parent / "suites" / "review"
TOOLS = ["Read", "Grep", "Glob", "Write", "Skill"]
# The pinned community price table every model below is priced from (tools/price-tables.json).
PRICE_SOURCE = "litellm@1.110.2"
PRICE_DIGEST = "8943af58bf9f979c6a4bef815687117ffa341e462a41faed9be17b5c33d3dcc2"
# agent -> the model its sessions ask for, and that model's input and output USD per token in the pinned table.
AGENTS = {
    "claude-code": ("claude-sonnet-4-5", 3e-06, 1.5e-05),
    "codex": ("gpt-5.5", 5e-06, 3e-05),
    "copilot": ("claude-sonnet-4-5", 3e-06, 1.5e-05),
    "gemini": ("gemini-2.5-pro", 1.25e-06, 1e-05),
    "opencode": ("claude-sonnet-4-5", 3e-06, 1.5e-05),
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
        "model": {"name": AGENTS["claude-code"][0]},
        "agent": {"attempts": 1, "prices": {"source": PRICE_SOURCE, "usd_per_mtok": {}}},
        "agents": {agent: {"model": model} for agent, (model, *_rates) in AGENTS.items() if agent != "claude-code"},
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
    folder = f"results/{settings['experiment']}/sweep"
    project.snakemake(f"{folder}/results.jsonl", f"{folder}/report.md", config=settings)
    return project


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return run(tmp_path_factory, config("review", "reviewagents", ["cli-review"], skill="code-review"))


@pytest.fixture(scope="module")
def triggered(tmp_path_factory: pytest.TempPathFactory) -> Project:
    settings = config("trigger", "triggeragents", TRIGGER_PROMPTS)
    settings["model"]["script"] = "tasks/review/trigger-script.yaml"
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


def review_cell(project: Project, agent: str) -> Path:
    return project.results("reviewagents", "cells", "cli-review", arm_name("review", agent), "run0")


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_cli_session_is_an_atif_trajectory_with_the_ledgers_tokens_step_by_step(
    reviewed: Project, agent: str
) -> None:
    cell = review_cell(reviewed, agent)
    (session,) = json.loads((cell / "ledger.json").read_text())["sessions"]
    requests = [entry for entry in session["requests"] if entry["kind"] == "messages"]
    (path,) = sorted((cell / "transcripts").glob("*.atif.json"))
    document = json.loads(path.read_text())
    trajectory = atif.Trajectory.model_validate(document)
    assert trajectory.schema_version == "ATIF-v1.8"
    assert (trajectory.agent.name, trajectory.agent.model_name) == (agent, AGENTS[agent][0])
    (row,) = [row for row in reviewed.rows("reviewagents") if row["arm"] == arm_name("review", agent)]
    assert trajectory.agent.version == row["cli_version"]
    steps = [step for step in trajectory.steps if step.source == "agent"]
    # One agent step per model request, each with its own request's tokens: the stream's partial usage is not used.
    assert len(steps) == len(requests) == 5
    assert [step.metrics.extra["request_seq"] for step in steps] == [entry["seq"] for entry in requests]
    assert sum(step.metrics.completion_tokens for step in steps) == session["totals"]["output_tokens"] == 400
    assert round(sum(step.metrics.cost_usd for step in steps), 10) == session["totals"]["cost_usd"]
    # Each step's tool calls are the ones its response made, and every call has its result.
    assert [len(step.tool_calls or []) for step in steps] == [len(entry["tool_calls"]) for entry in requests]
    assert all(len(step.observation.results) == len(step.tool_calls) for step in steps if step.tool_calls)
    assert "Review written" in steps[-1].message
    skills = document["agent"]["extra"]["skills"]
    assert skills["expected"] == "code-review" and skills["invoked"] == ["code-review"]


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_cell_is_a_harbor_trial_whose_reward_is_its_row(reviewed: Project, agent: str) -> None:
    (row,) = [row for row in reviewed.rows("reviewagents") if row["arm"] == arm_name("review", agent)]
    trial = review_cell(reviewed, agent) / "harbor"
    result = json.loads((trial / "result.json").read_text())
    assert result["verifier_result"]["rewards"]["reward"] == float(row["resolved"]) == 1.0
    assert result["verifier_result"]["rewards"]["review_f1"] == row["review"]["f1"]
    assert result["agent_result"]["cost_usd"] == row["cost_usd"]
    assert result["agent_result"]["metadata"]["skillbench"]["arm"] == row["arm"]
    assert (trial / "verifier" / "reward.txt").read_text() == "1\n"
    atif.Trajectory.model_validate_json((trial / "agent" / "trajectory.json").read_text())


def test_rows_are_priced_from_the_pinned_table_and_the_report_names_it_with_its_digest(reviewed: Project) -> None:
    for row in reviewed.rows("reviewagents"):
        model, per_input, per_output = AGENTS[row["agent"]]
        assert row["model"] == model
        assert row["cost_check"]["price_table"] == f"{PRICE_SOURCE} sha256:{PRICE_DIGEST}"
        # The scripted usage (no cache) at the table's rates: gpt-5.5 costs what LiteLLM says, not a hand table.
        expected = row["input_tokens"] * per_input + row["output_tokens"] * per_output
        cell = reviewed.results("reviewagents", "cells", "cli-review", row["arm"], "run0")
        (session,) = json.loads((cell / "ledger.json").read_text())["sessions"]
        assert session["totals"]["cost_usd"] == pytest.approx(expected, rel=1e-9), row["agent"]
        assert row["cost_usd"] == round(session["totals"]["cost_usd"], 4)  # a row's cost has four decimals
    report = reviewed.results("reviewagents", "sweep", "report.md").read_text()
    assert f"`{PRICE_SOURCE}` (SHA-256 `{PRICE_DIGEST}`)" in report
    run = json.loads(reviewed.results("reviewagents", "run.json").read_text())
    assert run["price_table"]["source"] == PRICE_SOURCE and run["price_table"]["sha256"] == PRICE_DIGEST


def test_export_inspect_writes_logs_that_inspect_reads_back_and_refuses_a_folder_of_other_files(
    reviewed: Project, tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    results = reviewed.results("reviewagents")
    command = [sys.executable, "-m", "skillbench.cli", "export", "--inspect", str(results), "--out"]
    env = {**os.environ, "PYTHONPATH": str(reviewed.root / "scripts")}
    done = subprocess.run([*command, str(tmp_path / "logs")], capture_output=True, text=True, env=env, check=True)
    assert "5 Inspect log(s)" in done.stdout
    rows = {row["arm"]: row for row in reviewed.rows("reviewagents")}
    for agent in AGENTS:
        arm = arm_name("review", agent)
        log = read_eval_log(str(tmp_path / "logs" / f"reviewagents_sweep_{arm}.eval"))
        (sample,) = log.samples
        assert (sample.id, sample.epoch, log.eval.config.epochs) == ("cli-review", 1, 1)
        assert sample.scores["resolved"].value == 1.0 and sample.scores["skill_used"].value == 1.0
        assert sample.scores["cost_usd"].value == rows[arm]["cost_usd"]
        assert sample.scores["review_f1"].value == 1.0
        assert sum(1 for event in sample.events if event.event == "model") == 5
        assert log.eval.metadata["skillbench"]["arm"] == arm
    # Into a folder that holds someone else's file: refused in one line, and the file is as it was.
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    refused = subprocess.run([*command, str(other)], capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and "notes.txt" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert sorted(path.name for path in other.iterdir()) == ["notes.txt"]
    assert (other / "notes.txt").read_text() == "keep me"
