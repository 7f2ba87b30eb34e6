"""Sequential runs on the noisy demo: interim looks stop early or continue, resume after SIGKILL, regrade
offline, and a budget cuts batches short — real snakemake, real CLI, scripted model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import Project, copy_project
from test_evolution import SKILLBENCH, run_until
from test_sweep import jobs_run

VERIFY_ONCE = "run the verify command once"
# Three tasks: workflow resolves all of them (two degrees of freedom for its cost test), workflow_direct two.
TASKS = ["money-thousands", "bulk-discount-threshold", "sku-normalization"]


def direct_ignores_the_skill_rule(source: Path, target: Path) -> None:
    """The demo's model script, except that direct sessions play the incumbent's turns whatever change-work says:
    the verify-once overlay then saves nothing on workflow_direct (a candidate no better than its incumbent),
    while plan + work sessions still finish right after the verify run (a real saving on workflow)."""

    def strip(steps: list) -> list:
        kept = []
        for step in steps:
            if step.get("when") == VERIFY_ONCE:
                continue
            step = {key: value for key, value in step.items() if not (key == "unless" and value == VERIFY_ONCE)}
            if "choose" in step:
                step["choose"] = [{**option, "steps": strip(option["steps"])} for option in step["choose"]]
            if "steps" in step:
                step["steps"] = strip(step["steps"])
            kept.append(step)
        return kept

    script = yaml.safe_load(source.read_text())
    for roles in script["tasks"].values():
        if "direct" in roles:
            roles["direct"] = (
                strip(roles["direct"])
                if isinstance(roles["direct"], list)
                else {**roles["direct"], "steps": strip(roles["direct"]["steps"])}
            )
    target.write_text(yaml.safe_dump(script, sort_keys=False))


def sequential_config(project, experiment: str, **extra) -> dict:
    direct_ignores_the_skill_rule(project.root / "tasks/demo/model-script.yaml", project.root / "seq-script.yaml")
    return {
        "experiment": experiment,
        "tasks": {"only": TASKS},
        "selected_arms": ["workflow", "workflow_direct"],
        # O'Brien-Fleming spending keeps the first look strict, so a real but modest saving continues.
        "runs": {"min": 2, "max": 4, "step": 1, "spending": "obrien_fleming"},
        "model": {"script": "seq-script.yaml"},
        "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
        # The looks are under test, not the resolution: every run resolves, and a 100-point margin lets four
        # runs of three tasks decide on cost alone; the one generation tests at the whole alpha.
        "gate": {"quality_margin_pct": 100.0, "generation_spending": "none"},
        **extra,
    }


EXPERIMENT = "seq"


@pytest.fixture(scope="module")
def first_batch(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A project whose first batch (every pair's `min` runs, before look 1) has run: both tests go on from a copy
    of it, as a user resuming the run would (the budget is run control, so changing it reruns no finished cell)."""
    project = copy_project(tmp_path_factory.mktemp("seq-first") / "project")
    project.snakemake("--until", "run_cell", config=sequential_config(project, EXPERIMENT))
    assert not project.results(EXPERIMENT, "gen0", "looks").exists()
    # Every pair's first two runs on the three tasks, the candidates' beside their anchor (generation 0's, the
    # sweep's cells of the incumbent arms), all under gen0/cells.
    assert len(records(project, EXPERIMENT)) == len(TASKS) * 2 * 4
    assert all(cell.startswith("gen0/cells/") for cell in records(project, EXPERIMENT))
    return project


def resume_from(first_batch: Project, tmp_path: Path) -> Project:
    """A copy of the first batch's project (mtimes kept, so snakemake sees its cells finished)."""
    target = tmp_path / "project"
    shutil.copytree(first_batch.root, target, symlinks=True)
    return Project(target)


def checkpoints_run(output: str, rule: str) -> list[str]:
    """The wildcards line of every job of checkpoint `rule` that this snakemake invocation ran."""
    found = []
    for block in re.split(r"\n(?=\[)", output):
        if re.search(rf"^(local)?checkpoint {rule}:", block, re.MULTILINE):
            match = re.search(r"wildcards: (.*)", block)
            found.append(match.group(1) if match else "")
    return found


def looks(project, experiment: str) -> list[dict]:
    folder = project.results(experiment, "gen0", "looks")
    return [
        json.loads((folder / f"look{index}.json").read_text())
        for index in range(1, len(list(folder.glob("look*.json"))) + 1)
    ]


def records(project, experiment: str) -> set[str]:
    root = project.results(experiment)
    return {str(path.parent.relative_to(root)) for path in root.rglob("record.json")}


def test_looks_stop_early_or_continue_resume_after_sigkill_and_regrade_offline(first_batch, tmp_path):
    project = resume_from(first_batch, tmp_path)
    config = sequential_config(project, "seq")
    batch_two = project.root / "logs" / "seq" / "run_cell" / "gen0" / "cells"
    process = run_until(project, config, lambda: any(batch_two.glob("*/candidate_workflow/run2.log")))
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {path: path.stat().st_mtime_ns for path in project.results("seq").rglob("record.json")}
    assert project.results("seq", "gen0", "looks", "look1.json").exists()
    assert not project.results("seq", "gen0", "promotion.json").exists()

    project.snakemake("--unlock", config=config)
    resumed = project.snakemake(config=config)
    output = resumed.stdout + resumed.stderr
    for path, mtime in finished.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was recomputed"
    assert all("run=2" in job for job in jobs_run(output, "run_cell")), jobs_run(output, "run_cell")
    assert checkpoints_run(output, "gate_look") == ["gen=0, look=2"]

    # Look 1: the direct candidate saves nothing and stops for futility; the workflow candidate's saving is
    # real but the strict first boundary is not reached, so only its pair gets a third run, and look 2 promotes.
    first, second = looks(project, "seq")
    by_arm = {pair["candidate_arm"]: pair for pair in first["pairs"]}
    assert by_arm["candidate_workflow_direct"]["status"] == "decided"
    assert by_arm["candidate_workflow_direct"]["decision"] == "keep_incumbent"
    assert by_arm["candidate_workflow_direct"]["reason"].startswith("futility:")
    assert (by_arm["candidate_workflow"]["status"], by_arm["candidate_workflow"]["next_runs"]) == ("continue", 3)
    assert [(pair["candidate_arm"], pair["decision"], pair["runs"]) for pair in second["pairs"]] == [
        ("candidate_workflow", "promote", 3),
        ("candidate_workflow_direct", "keep_incumbent", 2),
    ]

    promotion = json.loads(project.results("seq", "gen0", "promotion.json").read_text())
    decided = {d["candidate_arm"]: d for d in promotion["decisions"]}
    assert [look["decision"] for look in decided["candidate_workflow"]["looks"]] == ["continue", "promote"]
    assert [look["decision"] for look in decided["candidate_workflow_direct"]["looks"]] == ["keep_incumbent"]
    assert promotion["run_status"] == "complete"
    report = project.results("seq", "gen0", "report.md").read_text()
    assert "Looks (sequential design" in report and "futility:" in report

    # Only the batches that ran: a third run for the workflow pair (both arms), none for the direct pair.
    cells = records(project, "seq")
    for task in TASKS:
        assert f"gen0/cells/{task}/workflow/run2" in cells and f"gen0/cells/{task}/candidate_workflow/run2" in cells
        assert f"gen0/cells/{task}/workflow_direct/run2" not in cells
        assert f"gen0/cells/{task}/candidate_workflow_direct/run2" not in cells
        assert not any(cell.endswith("run3") for cell in cells)
    rows = project.rows("seq", "gen0")
    counts = Counter((row["task"], row["arm"], row["run"]) for row in rows)
    assert max(counts.values()) == 1 and len(rows) == len(cells)
    # Each look's batch is its own: the first holds both pairs' first two runs, the second the workflow pair's third
    # run, its candidate beside its anchor; each decision compared both batches the pair ran.
    assert {(row["arm"], row["run"], row["batch"]) for row in rows if row["task"] == TASKS[0]} == {
        *(
            (arm, run, "gen0/look1")
            for arm in ("workflow", "candidate_workflow", "workflow_direct", "candidate_workflow_direct")
            for run in (0, 1)
        ),
        ("workflow", 2, "gen0/look2"),
        ("candidate_workflow", 2, "gen0/look2"),
    }
    second_batch = json.loads(project.results("seq", "gen0", "schedule", "look2.json").read_text())
    assert second_batch["pairs"] == [["workflow", "candidate_workflow"]] and len(second_batch["cells"]) == 6
    assert decided["candidate_workflow"]["concurrency"]["batches"] == ["gen0/look1", "gen0/look2"]
    assert decided["candidate_workflow_direct"]["concurrency"]["batches"] == ["gen0/look1"]

    # Offline regrade of the stored rows replays the same looks and decisions.
    regraded = tmp_path / "regraded.json"
    result = subprocess.run(
        [
            SKILLBENCH,
            "gate",
            str(project.results("seq", "gen0", "results.jsonl")),
            "--configfile",
            str(project.root / "test-config.yaml"),
            "--out",
            str(regraded),
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    offline = json.loads(regraded.read_text())
    for document in (offline, promotion):
        document.pop("generated_at")
        document.pop("evidence_expires_at")
    assert offline == promotion


def test_budget_stops_starting_batches_at_the_cap_and_says_so(first_batch, tmp_path):
    # The first batch (3 tasks × 2 runs × workflow 2 sessions + workflow_direct 1 session, both arms) is 36
    # sessions; the workflow pair's second batch would add 12 more.
    project = resume_from(first_batch, tmp_path)
    first_cells = records(project, "seq")
    config = sequential_config(project, "seq", budget={"max_sessions": 40})
    resumed = project.snakemake(config=config)
    assert jobs_run(resumed.stdout + resumed.stderr, "run_cell") == []
    assert records(project, "seq") == first_cells

    (look,) = looks(project, "seq")
    by_arm = {pair["candidate_arm"]: pair for pair in look["pairs"]}
    assert look["spend"]["sessions"] == 36
    assert by_arm["candidate_workflow"]["status"] == "cut_short"
    assert "budget.max_sessions 40" in by_arm["candidate_workflow"]["reason"]
    assert by_arm["candidate_workflow_direct"]["decision"] == "keep_incumbent"
    assert not any(cell.endswith("run2") for cell in records(project, "seq"))

    promotion = json.loads(project.results("seq", "gen0", "promotion.json").read_text())
    decided = {d["candidate_arm"]: d for d in promotion["decisions"]}
    assert decided["candidate_workflow"]["decision"] == "insufficient_evidence"
    assert decided["candidate_workflow"]["sequential"]["cut_short"] is True
    assert decided["candidate_workflow"]["reasons"][0].startswith("cut short: cut short at look 1")
    assert "Cut short:" in project.results("seq", "gen0", "report.md").read_text()
    summary = project.results("seq", "summary.md").read_text()
    assert "**Budget reached:**" in summary and "generation 0 candidate_workflow" in summary
