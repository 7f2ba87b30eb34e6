"""One candidate overlay across two agent CLIs — Claude Code and GitHub Copilot CLI, the real CLIs and the scripted
model — in one evolution generation: a pair per agent, one verdict per agent in promotion.json, and a candidate
that one agent regresses on is not promoted under the default gate.across_agents (all).

The scripted model selects its steps by session role, so the Copilot arm's role (`cp_direct`) plays the demo's
`direct` steps plus one costly turn that only the candidate's skill text triggers: on Copilot the candidate is
dearer, on Claude Code it is cheaper. One run of two tasks is far too few for the noise-aware rule (the task is the
unit of replication), so each pair decides with the upstream rule's median floor, as tests/workflow/test_evolution.py
does; how the pairs combine is the across-agents rule under test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, Project, copy_project

EXPERIMENT = "agentsevo"
# Two tasks the demo's direct steps resolve on both CLIs (on Copilot, sku-normalization's overwrite of an existing
# file does not land, so neither arm resolves it there).
TASKS = ["money-thousands", "order-cancellation"]
COPILOT_MODEL = "claude-sonnet-4-5"
OVERLAY_PHRASE = "run the verify command once"  # what tasks/demo/overlays/verify-once adds to change-work
SCRIPT = "tasks/demo/model-script-agents.yaml"


def _script() -> dict[str, Any]:
    """The demo's script with a `cp_direct` role per task: the `direct` steps, and before the candidate's closing
    report a full-suite run with a long answer that only the overlay's wording triggers (the candidate's regression)."""
    script = yaml.safe_load((REPO / "tasks" / "demo" / "model-script.yaml").read_text())
    for task in TASKS:
        steps = copy.deepcopy(script["tasks"][task]["direct"])
        first = next(index for index, step in enumerate(steps) if step.get("when") == OVERLAY_PHRASE)
        costly = {
            "when": OVERLAY_PHRASE,
            "text": "Running the whole suite as well, and explaining every result at length.",
            "tools": [{"name": "Bash", "input": {"command": "python3 -m pytest -q -p no:cacheprovider tests/"}}],
            "usage": {
                "input_tokens": 8,
                "output_tokens": 9000,
                "cache_creation_input_tokens": 4000,
                "cache_read_input_tokens": 17000,
            },
        }
        script["tasks"][task]["cp_direct"] = [*steps[:first], costly, *steps[first:]]
    return script


def _config() -> dict[str, Any]:
    price = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3}
    return {
        "experiment": EXPERIMENT,
        "tasks": {"only": TASKS, "include_expensive": True},
        "runs": 1,
        "model": {"script": SCRIPT},
        "agent": {"attempts": 1, "prices": {"usd_per_mtok": {COPILOT_MODEL: price}}},
        "agents": {"copilot": {"model": COPILOT_MODEL}},
        "arms": {
            "cp_direct": {
                "agent": "copilot",
                "sessions": [{"role": "cp_direct", "prompt": "direct", "skill": "change-work"}],
            }
        },
        "selected_arms": ["workflow_direct", "cp_direct"],
        "report": {"baseline_arm": "workflow_direct"},
        "evolution": {
            "generations": 1,
            "initial_overlay": "tasks/demo/overlays/verify-once",
            "arms": ["workflow_direct", "cp_direct"],
        },
        "gate": {"rule": "upstream", "min_runs": 1},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = copy_project(tmp_path_factory.mktemp("agentsevo") / "project")
    (project.root / SCRIPT).write_text(yaml.safe_dump(_script(), sort_keys=False))
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "per-agent model script")
    project.snakemake(config=_config(), timeout=900)
    return project


def _promotion(project: Project) -> dict[str, Any]:
    return json.loads(project.results(EXPERIMENT, "gen0", "promotion.json").read_text())


def _cost(rows: list[dict[str, Any]], arm: str) -> float:
    return sum(row["cost_usd"] for row in rows if row["arm"] == arm)


def test_the_overlay_runs_on_every_agent_and_each_agent_is_its_own_pair(run: Project) -> None:
    overlay = json.loads(run.results(EXPERIMENT, "gen0", "overlay.json").read_text())
    assert overlay["required_candidate_arms"] == ["candidate_workflow_direct", "candidate_cp_direct"]
    rows = run.rows(EXPERIMENT, "gen0")
    agents = {row["arm"]: row["agent"] for row in rows}
    assert agents == {
        "workflow_direct": "claude-code",
        "candidate_workflow_direct": "claude-code",
        "cp_direct": "copilot",
        "candidate_cp_direct": "copilot",
    }
    # Every candidate session proved the skill it loaded from the overlay written into its agent's skills folder.
    assert all(row["resolved"] and row["skill_invoked"] for row in rows), [(r["arm"], r["error_kind"]) for r in rows]
    decisions = {(d["incumbent_arm"], d["candidate_arm"]) for d in _promotion(run)["decisions"]}
    assert decisions == {("workflow_direct", "candidate_workflow_direct"), ("cp_direct", "candidate_cp_direct")}


def test_a_candidate_one_agent_regresses_on_is_not_promoted(run: Project) -> None:
    rows = run.rows(EXPERIMENT, "gen0")
    # The script's regression is real in the measured spend: cheaper on Claude Code, dearer on Copilot.
    assert _cost(rows, "candidate_workflow_direct") < _cost(rows, "workflow_direct")
    assert _cost(rows, "candidate_cp_direct") > _cost(rows, "cp_direct")

    promotion = _promotion(run)
    assert promotion["policy"]["across_agents"] == "all"
    verdicts = {verdict["agent"]: verdict for verdict in promotion["agents"]["verdicts"]}
    assert set(verdicts) == {"claude-code", "copilot"} and len(promotion["agents"]["verdicts"]) == 2
    assert verdicts["claude-code"]["verdict"] == "promote"
    assert verdicts["copilot"]["verdict"] == "keep_incumbent"
    assert verdicts["copilot"]["cost_estimate_pct"] < 0 < verdicts["claude-code"]["cost_estimate_pct"]
    assert promotion["agents"]["decision"] == "keep_incumbent"
    assert "copilot (candidate_cp_direct)" in promotion["agents"]["reason"]

    summary = json.loads(run.results(EXPERIMENT, "summary.json").read_text())
    assert summary["outcome"] == "not_promoted" and summary["promoted_generation"] is None
    generation = summary["generations"][0]
    assert generation["promoted"] is False and generation["across_agents"]["decision"] == "keep_incumbent"
    assert {(d["agent"], d["verdict"]) for d in generation["decisions"]} == {
        ("claude-code", "promote"),
        ("copilot", "keep_incumbent"),
    }
    report = run.results(EXPERIMENT, "gen0", "report.md").read_text()
    assert "### Across agents (`across_agents: all`): **keep_incumbent**" in report
    assert "| copilot | candidate_cp_direct vs cp_direct | keep_incumbent | **keep_incumbent** |" in report


def test_nothing_is_applied_from_a_candidate_one_agent_regresses_on(run: Project) -> None:
    import subprocess
    import sys

    skillbench = str(Path(sys.executable).parent / "skillbench")
    result = subprocess.run(
        [skillbench, "apply", f"results/{EXPERIMENT}"], cwd=run.root, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "no promoted generation" in result.stdout + result.stderr
