"""The benchmark sweep end to end: real snakemake, real Claude Code CLI, scripted model, Bubblewrap."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import cli_under_test

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
SWEEP = {"evolution": {"generations": 0}}
ARMS = ["workflow", "workflow_direct", "baseline"]
TWO_TASKS = {
    "experiment": "one",
    "tasks": {"only": ["money-thousands", "bulk-discount-threshold"]},
    "runs": 1,
    "selected_arms": ARMS,
    **SWEEP,
}


def jobs_run(output: str, rule: str) -> list[str]:
    """The wildcards line of every job of `rule` that this snakemake invocation ran."""
    found = []
    for block in re.split(r"\n(?=\[)", output):
        if re.search(rf"^(local)?rule {rule}:", block, re.MULTILINE):
            match = re.search(r"wildcards: (.*)", block)
            found.append(match.group(1) if match else "")
    return found


def planned_jobs(output: str, rule: str) -> list[str]:
    """The wildcards line of every job of `rule` a `--dry-run` lists."""
    found, current = [], None
    for line in output.splitlines():
        header = re.match(r"^(?:local)?rule (\w+):", line)
        if header:
            current = header.group(1)
            if current == rule:
                found.append("")
        elif current == rule and line.strip().startswith("wildcards:"):
            found[-1] = line.strip().removeprefix("wildcards: ")
    return found


def test_two_task_sweep_resumes_and_reruns_only_what_changed(project):
    project.snakemake(config=TWO_TASKS)

    rows = project.rows("one")
    assert [(row["task"], row["arm"], row["run"]) for row in rows] == [
        (task, arm, 0) for task in TWO_TASKS["tasks"]["only"] for arm in ARMS
    ]
    results = project.results("one", "sweep", "results.jsonl")
    check = subprocess.run([SKILLBENCH, "validate", "result-row", str(results)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr

    by_arm = {row["arm"]: row for row in rows if row["task"] == "bulk-discount-threshold"}
    # The demo script makes the arms differ: direct mode fixes only the visible symptom.
    assert by_arm["workflow"]["resolved"] and by_arm["baseline"]["resolved"]
    assert not by_arm["workflow_direct"]["resolved"]
    assert by_arm["workflow_direct"]["error_kind"] == "oracle-failed"
    assert by_arm["workflow_direct"]["authored_tests_passed"] is True
    assert by_arm["workflow_direct"]["oracle_output"] == "hidden oracle failed"
    assert by_arm["workflow"]["skill_invoked"] is True and by_arm["baseline"]["skill_invoked"] is None
    assert len(by_arm["workflow"]["session_ids"]) == 2 and by_arm["workflow"]["plan_produced"] is True
    for row in rows:
        assert row["sandbox_backend"] == "bwrap" and row["cli_version"]
        assert row["cost_usd"] > 0 and row["cost_check"]["agrees"] is True
        run_dir = project.results("one", "cells", row["task"], row["arm"], "run0")
        assert project.results("one", "summary.json").is_file()
        assert (run_dir / "patch.diff").read_bytes().startswith(b"diff --git")
        for artifact in row["transcript_artifacts"]:
            events = [json.loads(line) for line in (run_dir / artifact["path"]).read_text().splitlines()]
            # Newer CLIs send other system events (ui_invalidate) before init; nothing else may come first.
            first = next(index for index, event in enumerate(events) if event.get("subtype") == "init")
            assert all(event["type"] == "system" for event in events[: first + 1])
            assert events[-1]["type"] == "result"

    report = project.results("one", "sweep", "report.md").read_text()
    assert "| bulk-discount-threshold | investigation-bug | workflow | 1/1 |" in report
    assert "**workflow_direct savings %**" in report
    assert "oracle-failed×1" in report
    # The oracle's output is kept for the task author only: an owner-only file beside the record, linked
    # from the report for the failed run, never in the report, the row or the transcripts.
    oracle_log = project.results("one", "cells", "bulk-discount-threshold", "workflow_direct", "run0", "oracle.log")
    assert oracle_log.stat().st_mode & 0o777 == 0o600
    tail = oracle_log.read_text()
    assert "failed" in tail and "bulk-discount-threshold_oracle_test.py" in tail
    assert "[../cells/bulk-discount-threshold/workflow_direct/run0/oracle.log]" in report
    assert "bulk-discount-threshold_oracle_test.py" not in report
    passed_log = project.results("one", "cells", "money-thousands", "workflow", "run0", "oracle.log").read_text()
    assert "[ok, exit 0]" in passed_log and "failed" not in passed_log

    again = project.snakemake(config=TWO_TASKS)
    assert "Nothing to be done" in again.stdout + again.stderr

    untouched = project.results("one", "cells", "bulk-discount-threshold", "baseline", "run0", "record.json")
    before = untouched.stat().st_mtime_ns
    project.results("one", "cells", "bulk-discount-threshold", "workflow", "run0", "record.json").unlink()
    rerun = project.snakemake(config=TWO_TASKS)
    output = rerun.stdout + rerun.stderr
    assert jobs_run(output, "run_cell") == ["cellset=cells, task=bulk-discount-threshold, arm=workflow, run=0"]
    assert jobs_run(output, "bind_task") == []
    assert untouched.stat().st_mtime_ns == before
    assert len(project.rows("one")) == 6

    # How a job runs (retries, the outage streak, the heartbeat) is not what it measures: changing it reruns nothing.
    steered = project.snakemake(
        "--dry-run", config={**TWO_TASKS, "agent": {"attempts": 3, "outage_streak": 9, "heartbeat_s": 5}}
    )
    assert "Nothing to be done" in steered.stdout + steered.stderr
    # The price table feeds the cost cross-check a row records: a new price reruns every cell.
    repriced = project.snakemake("--dry-run", config={**TWO_TASKS, "agent": {"prices": {"tolerance_pct": 2.5}}})
    assert len(re.findall(r"^rule run_cell:", repriced.stdout, re.MULTILINE)) == 6
    # The CLI's version keys every cell: after an upgrade nothing measured by the old CLI is reused.
    newer_cli = reporting_cli(project.root, "2.1.999")
    upgraded = project.snakemake("--dry-run", config={**TWO_TASKS, "agent": {"cli": newer_cli}})
    assert len(re.findall(r"^rule run_cell:", upgraded.stdout, re.MULTILINE)) == 6
    assert "params" in upgraded.stdout
    # A CLI older than the oldest supported version is refused when the workflow is parsed.
    old_cli = reporting_cli(project.root, "1.0.44")
    refused = project.snakemake("--dry-run", config={**TWO_TASKS, "agent": {"cli": old_cli}}, check=False)
    assert refused.returncode != 0
    assert f"agent.cli: claude-code 1.0.44 at {old_cli} is older than the oldest supported version 2.1.197" in (
        refused.stdout + refused.stderr
    )

    # Editing one task's prompt rebinds that task and reruns exactly its cells; an unselected task's edit
    # changes nothing.
    suite = project.root / "tasks" / "demo" / "tasks.yaml"
    text = suite.read_text()
    unselected = text.replace("Add order cancellation.", "Add order cancellation (edited).", 1)
    assert unselected != text
    suite.write_text(unselected)
    nothing = project.snakemake("--dry-run", config=TWO_TASKS)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr
    edited = unselected.replace("A customer ordered exactly 10", "A customer (edited) ordered exactly 10", 1)
    assert edited != unselected
    suite.write_text(edited)
    dry = project.snakemake("--dry-run", config=TWO_TASKS)
    planned = dry.stdout + dry.stderr
    assert sorted(planned_jobs(planned, "run_cell")) == [
        f"cellset=cells, task=bulk-discount-threshold, arm={arm}, run=0" for arm in sorted(ARMS)
    ]
    assert planned_jobs(planned, "bind_task") == ["task=bulk-discount-threshold"]


def reporting_cli(folder: Path, version: str) -> str:
    """A wrapper around the CLI under test that reports another version."""
    real = cli_under_test()
    wrapper = folder / f"claude-{version}"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{version} (Claude Code)"; exit 0; fi\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_bad_config_key_fails_before_any_job(project):
    result = project.snakemake(config={"experiment": "bad", "agent": {"session_timeout": 5}, **SWEEP}, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "unknown key `agent.session_timeout`; did you mean `agent.session_timeout_s`?" in output
    # One line, not a schema dump; the dump is in the log.
    assert len(output.splitlines()) < 15, output
    assert "additionalProperties" in (project.root / "logs" / "config-errors.log").read_text()
    assert not (project.root / "results" / "bad").exists()


def test_design_mistakes_are_named_at_parse_time(project):
    """A design that can never promote is a warning; a skill or overlay in a broken format is an error."""
    never = project.snakemake("--dry-run", config={"experiment": "never", "runs": 2, "evolution": {"generations": 1}})
    assert "WARNING: runs is 2 but gate.min_runs is 3: no candidate can ever be promoted" in never.stdout + never.stderr

    overlay = project.root / "bad-overlay" / ".claude" / "skills" / "change-work"
    overlay.mkdir(parents=True)
    (overlay / "SKILL.md").write_text("# change-work\n\nRun the verify command once.\n")
    result = project.snakemake(
        "--dry-run",
        check=False,
        config={"experiment": "badoverlay", "evolution": {"generations": 1, "initial_overlay": "bad-overlay"}},
    )
    assert result.returncode != 0
    assert "SKILL.md: SKILL.md must start with YAML frontmatter (---)" in result.stdout + result.stderr

    incumbent = project.root / ".claude" / "skills" / "change-plan" / "SKILL.md"
    incumbent.write_text(incumbent.read_text().replace("name: change-plan", "name: change_plan", 1))
    result = project.snakemake("--dry-run", check=False, config={"experiment": "badskill", **SWEEP})
    assert result.returncode != 0
    assert "change-plan/SKILL.md: Skill name 'change_plan' contains invalid characters" in result.stdout + result.stderr
    assert not (project.root / "results").exists()


def test_bad_task_suite_fails_before_any_job(project):
    suite = project.root / "tasks" / "demo" / "tasks.yaml"
    suite.write_text(suite.read_text().replace("id: money-thousands", "id: money thousands"))
    result = project.snakemake(config={"experiment": "bad"}, check=False)
    assert result.returncode != 0
    assert "task 'money thousands'" in result.stdout + result.stderr
    assert not (project.root / "results" / "bad").exists()


def assert_no_overlap(windows):
    assert len(windows) >= 4
    for (_, end, first), (start, _, second) in zip(windows, windows[1:], strict=False):
        assert end <= start, f"sessions overlap: {first} and {second}"


def test_anthropic_provider_without_a_key_fails_before_any_job(project):
    result = project.snakemake(
        config={"experiment": "nokey", "model": {"provider": "anthropic"}}, env={"ANTHROPIC_API_KEY": ""}, check=False
    )
    assert result.returncode != 0
    assert "ANTHROPIC_API_KEY is empty" in result.stdout + result.stderr
    assert not (project.root / "results" / "nokey").exists()
