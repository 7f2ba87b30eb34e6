"""Steps of workflow/rules/tasks.smk: bind a task, check it before any session, merge the bindings and the checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts
from skillbench.base.records import TaskBinding
from skillbench.execution.environment import secrets
from skillbench.experiment.settings import check_settings
from skillbench.grading import taskcheck
from skillbench.grading.binding import bind_task as bind_task_files
from skillbench.steps.session import start_session_job


def bind_task(*, suite: str, task: dict[str, Any], binding_out: str, template_out: str, oracle_out: str) -> None:
    """`task` is the definition the workflow validated when it was parsed."""
    bound = bind_task_files(task, suite=Path(suite), template_dir=Path(template_out), oracle_dir=Path(oracle_out))
    for warning in bound.warnings:
        print(warning)
    artifacts.write_artifact(Path(binding_out), bound.binding, "task-binding")


def merge_bindings(*, suite: str, binding_paths: list[str], skipped_expensive: list[str], out: str) -> None:
    """Bindings in the order given (suite order), with the expensive tasks the selection left out."""
    document = {
        "schema": "task-bindings/v1",
        "suite": suite,
        "tasks": [artifacts.read_artifact(Path(path), "task-binding") for path in binding_paths],
        "skipped_expensive": skipped_expensive,
    }
    artifacts.write_artifact(Path(out), document, "task-bindings")


def merge_checks(*, suite: str, check_paths: list[str], out: str) -> None:
    """One file that says every selected task passed its check, in suite order: the single input every session
    job waits for, so no job lists every task's check. It carries each check's one-line summary, never the
    command output check.json holds for the task author."""
    entries = []
    for path in check_paths:
        check = artifacts.read_artifact(Path(path), "task-check")
        if not check["ok"]:
            raise taskcheck.TaskCheckError(f"{path}: task {check['task']} did not pass its check: {check['summary']}")
        entries.append({"task": check["task"], "summary": check["summary"]})
    artifacts.write_artifact(Path(out), {"schema": "task-checks/v1", "suite": suite, "tasks": entries}, "task-checks")


def check_task(
    *,
    settings: dict[str, Any],
    api_key_env: str,
    task: dict[str, Any],
    suite: str,
    binding: str,
    template: str,
    oracle_snapshot: str,
    out: str,
) -> dict[str, Any]:
    """The task check before any session: write check.json (0600: it holds oracle output) or raise naming why.

    `settings` holds the config sections the check reads (agent timeouts, sandbox)."""
    typed = check_settings(settings)
    start_session_job(typed.sandbox)
    task_binding = cast(TaskBinding, artifacts.read_artifact(Path(binding), "task-binding"))
    document = taskcheck.check_task(
        task,
        task_binding,
        settings=typed,
        template=Path(template),
        oracle_snapshot=Path(oracle_snapshot),
        solution=taskcheck.solution_bytes(task, Path(suite), task_binding),
        secrets=secrets(api_key_env),
    )
    artifacts.validate(document, "task-check", source=out)
    print(document["summary"])
    if not document["ok"]:
        raise taskcheck.TaskCheckError(
            "\n".join(document["problems"]) + "\nNo session has run. Fix the task in the suite (or its oracle or "
            "solution); `skillbench check-tasks` checks the suite without starting a run."
        )
    artifacts.write_artifact(Path(out), document, "task-check", mode=0o600)
    return document
