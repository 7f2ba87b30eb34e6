"""Binding a task: its resolved commit, the sanitized template every cell clones, and the hidden
oracle's read-only snapshot with its digests (`bind_task`).

A `repo:` target is read through `repo.open_target`, which never lets git read the target's own
config, attributes, hooks or filters; binding also says when the target's work tree differs from
the commit it binds (cells get the commit, so uncommitted work is silently not part of the task).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from skillbench.base.records import TaskBinding
from skillbench.execution import repo
from skillbench.experiment.suite import hidden_files, inline_hidden_files, oracle_command, task_digests
from skillbench.grading import oracle as oracle_assets


@dataclass(frozen=True)
class BoundTask:
    """A task's binding (schema `task-binding`) and the warnings for whoever bound it."""

    binding: TaskBinding
    warnings: list[str]


def _listed(paths: list[str]) -> str:
    shown, hidden = paths[: repo.MAX_LISTED_CHANGES], len(paths) - repo.MAX_LISTED_CHANGES
    return ", ".join(shown) + (f", … ({hidden} more)" if hidden > 0 else "")


def work_tree_warning(task_id: str, source: Path, ref: str, sha: str, changes: repo.WorkTreeChanges) -> str | None:
    """The line that says a target's work tree differs from the commit being bound (None when it does not)."""
    if not changes.changed and not changes.untracked:
        return None
    parts = []
    if changes.changed:
        parts.append(f"{len(changes.changed)} changed ({_listed(changes.changed)})")
    if changes.untracked:
        parts.append(f"{len(changes.untracked)} untracked ({_listed(changes.untracked)})")
    return (
        f"warning: task {task_id}: the work tree of {source} differs from {ref} ({sha[:12]}), the commit being "
        f"bound: {'; '.join(parts)}. Cells start from the commit, not from the work tree: commit the changes, or "
        "bind the ref you meant"
    )


def bind_task(task: dict[str, Any], *, suite: Path, template_dir: Path, oracle_dir: Path) -> BoundTask:
    """Resolve a task's target to an immutable commit, build its sanitized template, snapshot its oracle.

    Returns the task binding, which every cell and every promotion of the task is bound to, and the
    warnings to print (a `repo:` target whose work tree differs from the bound commit).
    """
    suite_dir = Path(suite).parent
    oracle_files = oracle_assets.capture_oracle(suite_dir, hidden_files(task)) + inline_hidden_files(task)
    warnings: list[str] = []
    if "snapshot" in task:
        sanitized = repo.build_template(destination=template_dir, snapshot=suite_dir / task["snapshot"])
        resolved, ref, target = sanitized, "HEAD", f"snapshot:{task['snapshot']}"
    else:
        source = Path(task["repo"]).expanduser().resolve()
        ref = task.get("ref", "HEAD")
        with repo.open_target(source) as reader:
            resolved = reader.resolve(ref)
            sanitized = repo.build_template(destination=template_dir, target=reader, sha=resolved)
            try:
                # The miner's refs are never checked out: the work tree is not expected to be at them.
                mined = ref.startswith(repo.MINED_REF_PREFIX)
                changes = None if mined else reader.work_tree_changes(resolved)
            except repo.GitError as exc:
                warnings.append(f"warning: task {task['id']}: {exc}")
                changes = None
        if changes is not None:
            warning = work_tree_warning(task["id"], source, ref, resolved, changes)
            warnings += [warning] if warning else []
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
        **oracle_assets.oracle_binding(oracle_command(task), oracle_files),
    }
    return BoundTask(binding=cast("TaskBinding", binding), warnings=warnings)
