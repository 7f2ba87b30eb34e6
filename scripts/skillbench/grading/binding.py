"""Binding a task: its resolved commit, the sanitized template every cell clones, and the hidden
oracle's read-only snapshot with its digests (`bind_task`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from skillbench.base.records import TaskBinding
from skillbench.execution import repo
from skillbench.experiment.suite import task_digests
from skillbench.grading import oracle as oracle_assets


def bind_task(task: dict[str, Any], *, suite: Path, template_dir: Path, oracle_dir: Path) -> TaskBinding:
    """Resolve a task's target to an immutable commit, build its sanitized template, snapshot its oracle.

    Returns the task binding (schema `task-binding`), which every cell and every promotion
    of the task is bound to.
    """
    suite_dir = Path(suite).parent
    oracle_files = oracle_assets.capture_oracle(suite_dir, task["oracle"])
    if "snapshot" in task:
        sanitized = repo.build_template(destination=template_dir, snapshot=suite_dir / task["snapshot"])
        resolved, ref, target = sanitized, "HEAD", f"snapshot:{task['snapshot']}"
    else:
        source = Path(task["repo"]).expanduser().resolve()
        ref = task.get("ref", "HEAD")
        resolved = repo.resolve_commit(source, ref)
        sanitized = repo.build_template(destination=template_dir, repo=source, sha=resolved)
        target = f"repo:{source}"
    oracle_assets.write_snapshot(oracle_dir, oracle_files)
    binding = {
        "schema": "task-binding/v1",
        "id": task["id"],
        "class": task["class"],
        "expensive": task["expensive"],
        "target": target,
        "ref": ref,
        "resolved_sha": resolved,
        "sanitized_sha": sanitized,
        **task_digests(task),
        **oracle_assets.oracle_binding(task["oracle"]["command"], oracle_files),
    }
    return cast("TaskBinding", binding)
