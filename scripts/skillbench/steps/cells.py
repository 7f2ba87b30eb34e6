"""Step of workflow/rules/cells.smk: one (task, arm, run) cell → its record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO, cast

from skillbench.base import artifacts, layout
from skillbench.base.process import ORPHANED, exclusive_writer
from skillbench.base.records import TaskBinding
from skillbench.execution import agents, cells, replay
from skillbench.execution.environment import api_key, configured_cli, load_script, resolve_cli
from skillbench.execution.failures import CellCancelled
from skillbench.experiment.arms import incumbent_of
from skillbench.experiment.settings import cell_settings
from skillbench.experiment.suite import load_suite
from skillbench.grading import taskcheck
from skillbench.grading.graders import grader_for
from skillbench.interop import harbor
from skillbench.steps.session import job_run_control, start_session_job


def replayed_solution(
    script: dict[str, Any] | None, task: dict[str, Any], model_script: str | None, binding: dict[str, Any]
) -> bytes | None:
    """The reference solution the scripted model replays (`replay: solution`), or None. The cell's task definition
    leaves the solution out (only the check reads it), so it is read from the suite beside the model script, where
    the miner and the importers write both."""
    if not replay.is_replay(script, task["id"]) or model_script is None:
        return None
    suite = Path(model_script).parent / "tasks.yaml"
    definition = next((entry for entry in load_suite(suite) if entry["id"] == task["id"]), None)
    if definition is None or not definition.get("solution"):
        return None
    return taskcheck.solution_bytes(definition, suite, cast(TaskBinding, binding))


def run_cell(
    *,
    settings: dict[str, Any],
    run_control: dict[str, Any],
    task: dict[str, Any],
    arm: str,
    run: int,
    binding: str,
    template: str,
    oracle_snapshot: str,
    model_script: str | None,
    record_out: str,
    ledger_out: str,
    attempt: int,
    results_root: str,
    cli_version: str,
    overlay_json: str | None = None,
    log: TextIO | None = None,
) -> None:
    """`task` is the definition the workflow validated when it was parsed, `cli_version` the CLI's version it
    found then, `settings` the config sections a cell reads (the rule's params) and `run_control` how the job runs
    (its resources)."""
    typed = cell_settings(settings, job_run_control(run_control))
    start_session_job(typed.sandbox)
    overlay_digest = artifacts.read_artifact(Path(overlay_json), "overlay")["digest"] if overlay_json else None
    task_binding = artifacts.read_artifact(Path(binding), "task-binding")
    run_dir = Path(record_out).parent
    agent = agents.arm_agent(settings, arm)
    script = load_script(model_script, task=task["id"])
    context = cells.CellContext(
        settings=typed,
        template=Path(template),
        grader=grader_for(task, oracle_snapshot=Path(oracle_snapshot)),
        run_dir=run_dir,
        agent=agent,
        agent_install=agent.install(resolve_cli(configured_cli(settings, agent), agent=agent)),
        cli_version=cli_version,
        api_key=api_key(typed.model.api_key_env),
        model_script=script,
        replayed_solution=replayed_solution(script, task, model_script, task_binding),
        skills_source=Path(typed.skills.root),
        overlay=layout.frozen_overlay_beside(overlay_json) if overlay_json else None,
        overlay_digest=overlay_digest,
        log=log,
        results_root=Path(results_root),
    )
    # One writer per cell: an orphaned job of a crashed snakemake may still be tearing this cell down.
    with exclusive_writer(run_dir.parent / f".{run_dir.name}.lock", what=f"cell {run_dir}"):
        record = cells.run_one_cell(
            cells.Cell(task, cast(TaskBinding, task_binding), arm, run),
            context,
            attempt=attempt,
            attempts=typed.run.attempts,
            breaker_state=Path(layout.breaker(results_root)),
        )
        artifacts.validate(record["row"], "result-row", source=f"{record_out} (row)")
        if ORPHANED.is_set():
            raise CellCancelled(
                f"cell {run_dir}: the snakemake that started it is gone; no record is written, "
                "so the next run does this cell again"
            )
        ledger = {"schema": "ledger/v1", "sessions": context.ledgers}
        artifacts.write_artifact(Path(ledger_out), ledger, "ledger")
        # Each session as ATIF and the cell as a Harbor trial folder, before the record that vouches for them.
        skills = [session.get("skill") for session in settings["arms"][incumbent_of(arm)]["sessions"]]
        harbor.write_cell_exports(
            run_dir,
            record,
            ledger,
            experiment=Path(results_root).name,
            expected_skills=skills,
            skill_texts=context.skill_texts,
        )
        cut = Path(layout.budget_cut_marker(run_dir))
        if record["row"]["error_kind"] == "budget-exhausted":
            cut.touch()
        else:
            cut.unlink(missing_ok=True)
        artifacts.write_artifact(Path(record_out), record, "cell-record")
