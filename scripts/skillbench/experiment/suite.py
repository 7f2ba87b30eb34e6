"""Task suites: loading, validation and selection of `tasks/<suite>/tasks.yaml`.

A bad suite fails before any agent session is paid for, with a message that names the
file, the task and the field. Structure is checked against `schemas/task.schema.json` (per task);
what a schema cannot say (unique ids, files that must exist and not be symlinks, safe
relative paths, exactly one target) is checked here.

A task is a code change (`verify` and a hidden `oracle`), a review (class `review-defect` or `review-clean`: a
`review.change` patch to review and its hidden `review.labels`) or a labelled prompt (class `trigger`: the skill,
or none, its prompt should make the agent invoke). `hidden_files`, `inline_hidden_files` and `oracle_command`
give every kind one shape for binding: the files snapshotted hidden beside the binding and the command they are
bound with.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from skillbench.base import yamltext
from skillbench.base.artifacts import ArtifactError, schema_errors
from skillbench.base.records import REVIEW_CLASSES, TRIGGER_CLASS

MAX_ORACLE_FILES = 8
MAX_ORACLE_PATH_BYTES = 240
MAX_ORACLE_COMMAND_BYTES = 8192
# Where a review task's labels and change sit in its hidden snapshot, and what they are bound with.
REVIEW_LABELS_TARGET = "review-labels.json"
REVIEW_CHANGE_TARGET = "review-change.diff"
REVIEW_ORACLE_COMMAND = "review-labels/v1"
# Where a trigger task's label sits in its hidden snapshot, and what it is bound with.
TRIGGER_LABEL_TARGET = "trigger-label.json"
TRIGGER_ORACLE_COMMAND = "trigger-label/v1"
# The fields a code task has and the other kinds do not.
CODE_TASK_FIELDS = ("verify", "oracle", "verify_on_base", "oracle_on_base")


class TaskError(ArtifactError):
    """A task suite is invalid; the message names the file, the task and the field."""


@dataclass(frozen=True)
class Selection:
    tasks: list[dict[str, Any]]
    skipped_expensive: list[str]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _fail(suite: Path, task_id: str | None, field: str | None, problem: str) -> TaskError:
    where = f"task {task_id!r}" if task_id else "suite"
    what = f", field {field!r}" if field else ""
    return TaskError(f"{suite}: {where}{what}: {problem}")


def _safe_relative(value: str) -> str | None:
    """Why a path is unsafe as a suite-relative or oracle-relative path, or None if it is fine."""
    if "\\" in value or "\x00" in value:
        return "must not contain backslashes or NUL bytes"
    if len(value.encode("utf-8")) > MAX_ORACLE_PATH_BYTES:
        return f"longer than {MAX_ORACLE_PATH_BYTES} bytes"
    path = PurePosixPath(value)
    if path.is_absolute():
        return "must be relative, not absolute"
    if any(part in ("", ".", "..") for part in value.split("/")):
        return "must not contain '..', '.' or empty parts"
    return None


def _regular_file_inside(suite_dir: Path, relative: str) -> str | None:
    """Why `relative` is not a regular, non-symlink file under the suite folder (None if it is)."""
    current = suite_dir
    parts = PurePosixPath(relative).parts
    for index, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return f"file {relative!r} does not exist under {suite_dir}"
        if stat.S_ISLNK(info.st_mode):
            return f"{relative!r} is (or passes through) a symlink"
        last = index == len(parts) - 1
        if not last and not stat.S_ISDIR(info.st_mode):
            return f"{relative!r}: {part!r} is not a directory"
        if last and not stat.S_ISREG(info.st_mode):
            return f"{relative!r} is not a regular file"
    return None


def _check_oracle(suite: Path, task_id: str, oracle: dict[str, Any]) -> None:
    command = oracle["command"]
    if len(command.encode("utf-8")) > MAX_ORACLE_COMMAND_BYTES:
        raise _fail(suite, task_id, "oracle.command", f"longer than {MAX_ORACLE_COMMAND_BYTES} bytes")
    files = oracle["files"]
    if len(files) > MAX_ORACLE_FILES:
        raise _fail(suite, task_id, "oracle.files", f"{len(files)} files; at most {MAX_ORACLE_FILES} are allowed")
    seen: dict[str, set[str]] = {"source": set(), "target": set()}
    for index, entry in enumerate(files):
        for key in ("source", "target"):
            field = f"oracle.files[{index}].{key}"
            value = entry[key]
            problem = _safe_relative(value)
            if problem:
                raise _fail(suite, task_id, field, f"{value!r} {problem}")
            if key == "target" and PurePosixPath(value).parts[0] == ".git":
                raise _fail(suite, task_id, field, "must not be inside .git")
            if value in seen[key]:
                raise _fail(suite, task_id, field, f"duplicate {key} {value!r}")
            seen[key].add(value)
        problem = _regular_file_inside(suite.parent, entry["source"])
        if problem:
            raise _fail(suite, task_id, f"oracle.files[{index}].source", problem)


def _check_target(suite: Path, task: dict[str, Any]) -> None:
    task_id = task["id"]
    has_repo, has_snapshot = "repo" in task, "snapshot" in task
    if has_repo == has_snapshot:
        given = "both given" if has_repo else "neither given"
        raise _fail(
            suite,
            task_id,
            "repo/snapshot",
            f"exactly one target is required ({given}): `repo` (+ optional `ref`) or `snapshot: <dir>`",
        )
    if "ref" in task and not has_repo:
        raise _fail(suite, task_id, "ref", "only valid together with `repo`")
    if has_snapshot:
        problem = _safe_relative(task["snapshot"])
        if problem:
            raise _fail(suite, task_id, "snapshot", f"{task['snapshot']!r} {problem}")
        directory = suite.parent / task["snapshot"]
        if directory.is_symlink() or not directory.is_dir():
            raise _fail(suite, task_id, "snapshot", f"{directory} is not a real directory")


def _check_solution(suite: Path, task: dict[str, Any]) -> None:
    """A reference solution is a patch file in the suite folder, or a ref of the task's own repository."""
    solution = task.get("solution")
    if not solution:
        return
    for key in ("patch", "review"):
        if key in solution:
            problem = _safe_relative(solution[key]) or _regular_file_inside(suite.parent, solution[key])
            if problem:
                raise _fail(suite, task["id"], f"solution.{key}", problem)
    if "ref" in solution and "repo" not in task:
        raise _fail(
            suite,
            task["id"],
            "solution.ref",
            "a solution ref needs a `repo` target; for a `snapshot` task give `solution: {patch: <file>}`",
        )


def is_review_task(task: dict[str, Any]) -> bool:
    """Whether the task is a review (scored against hidden labels) rather than a code change."""
    return task["class"] in REVIEW_CLASSES


def is_trigger_task(task: dict[str, Any]) -> bool:
    """Whether the task is a labelled prompt: its session is judged by the skills it invokes."""
    return bool(task["class"] == TRIGGER_CLASS)


def hidden_files(task: dict[str, Any]) -> list[dict[str, str]]:
    """The task's files snapshotted at binding ({source, target}): a code task's oracle files; a review task's
    labels and the change it reviews (the change is not secret, but binding it pins what every cell reviews); none
    for a trigger task, whose label is in the suite file (`inline_hidden_files`)."""
    if is_review_task(task):
        return [
            {"source": task["review"]["labels"], "target": REVIEW_LABELS_TARGET},
            {"source": task["review"]["change"], "target": REVIEW_CHANGE_TARGET},
        ]
    if is_trigger_task(task):
        return []
    return list(task["oracle"]["files"])


def trigger_label(task: dict[str, Any]) -> dict[str, Any]:
    """A trigger task's label with its default filled in: {expect, near_miss}."""
    return {"expect": task["trigger"]["expect"], "near_miss": bool(task["trigger"].get("near_miss", False))}


def inline_hidden_files(task: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Hidden files the suite file itself holds, as (target, bytes): a trigger task's label, canonical JSON."""
    if not is_trigger_task(task):
        return []
    return [(TRIGGER_LABEL_TARGET, json.dumps(trigger_label(task), sort_keys=True).encode("utf-8"))]


def oracle_command(task: dict[str, Any]) -> str:
    """The command the hidden files are bound with: a code task's oracle command; a fixed text for the others."""
    if is_review_task(task):
        return REVIEW_ORACLE_COMMAND
    if is_trigger_task(task):
        return TRIGGER_ORACLE_COMMAND
    return str(task["oracle"]["command"])


@dataclass(frozen=True)
class TaskKind:
    """What one kind of task needs: the fields it must have, the ones it may not, its solution's forms."""

    name: str
    required: dict[str, str]  # field -> how to write it
    forbidden: tuple[str, ...]
    solutions: tuple[str, ...]  # the `solution` keys it takes


CODE_TASK = TaskKind(
    "a code task", {"verify": "`verify`", "oracle": "`oracle`"}, ("review", "trigger"), ("patch", "ref")
)
REVIEW_TASK = TaskKind(
    "a review task",
    {"review": "`review: {change: <patch>, labels: <file>}`"},
    (*CODE_TASK_FIELDS, "trigger"),
    ("review",),
)
TRIGGER_TASK = TaskKind(
    "a trigger task", {"trigger": "`trigger: {expect: <skill or null>}`"}, (*CODE_TASK_FIELDS, "review", "solution"), ()
)


# Which kind of task a field belongs to, for the message that refuses it on another kind.
FIELD_OWNERS = {
    **dict.fromkeys(CODE_TASK_FIELDS, "code tasks"),
    "review": f"review tasks (class {' or '.join(REVIEW_CLASSES)})",
    "trigger": f"trigger tasks (class {TRIGGER_CLASS})",
    "solution": "code and review tasks",
}


def task_kind(task: dict[str, Any]) -> TaskKind:
    if task["class"] == TRIGGER_CLASS:
        return TRIGGER_TASK
    return REVIEW_TASK if task["class"] in REVIEW_CLASSES else CODE_TASK


def _check_kind(suite: Path, task_id: str, task: Any) -> None:
    """Say plainly which fields each kind of task needs and may not have (the schema's if/then says it obscurely)."""
    if not isinstance(task, dict) or not isinstance(task.get("class"), str):
        return
    kind = task_kind(task)
    classes = f"class {task['class']!r} makes it {kind.name}"
    for field in kind.forbidden:
        if field in task:
            raise _fail(
                suite,
                task_id,
                field,
                f"{kind.name} has no `{field}` ({classes}); only {FIELD_OWNERS[field]} have it: remove it or change "
                "the class",
            )
    for field, written in kind.required.items():
        if field not in task:
            raise _fail(suite, task_id, field, f"{kind.name} needs {written} ({classes})")
    solution = task.get("solution")
    for key in solution if isinstance(solution, dict) else ():
        if key not in kind.solutions:
            forms = " or ".join(f"`solution: {{{form}: …}}`" for form in kind.solutions)
            raise _fail(suite, task_id, f"solution.{key}", f"{kind.name}'s reference solution is {forms}")


def _check_review(suite: Path, task: dict[str, Any]) -> None:
    for key in ("change", "labels"):
        value = task["review"][key]
        problem = _safe_relative(value) or _regular_file_inside(suite.parent, value)
        if problem:
            raise _fail(suite, task["id"], f"review.{key}", problem)


def _schema_field(error: str) -> tuple[str | None, str]:
    """Split '$[2].oracle.files: message' into ('oracle.files', message)."""
    path, _, message = error.partition(": ")
    parts = path.removeprefix("$").lstrip(".")
    if parts.startswith("["):
        parts = parts.partition("]")[2].lstrip(".")
    return (parts or None), message


def validate_suite(document: Any, suite: Path) -> list[dict[str, Any]]:
    """Return the suite's tasks, normalised, or raise TaskError naming task and field."""
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), list):
        raise _fail(suite, None, "tasks", "the file must be a mapping with a `tasks` list")
    if set(document) - {"tasks"}:
        raise _fail(suite, None, None, f"unknown top-level keys: {sorted(set(document) - {'tasks'})}")
    if not document["tasks"]:
        raise _fail(suite, None, "tasks", "the suite has no tasks")
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, task in enumerate(document["tasks"]):
        task_id = task["id"] if isinstance(task, dict) and isinstance(task.get("id"), str) else f"#{index}"
        _check_kind(suite, task_id, task)
        errors = schema_errors(task, "task")
        if errors:
            field, message = _schema_field(errors[0])
            raise _fail(suite, task_id, field, message)
        for field in ("id", "class", "prompt", "verify"):
            if field in task and not task[field].strip():
                raise _fail(suite, task_id, field, "must not be blank")
        if "setup" in task and not task["setup"].strip():
            raise _fail(suite, task_id, "setup", "must not be blank (omit it instead)")
        if task_id in seen:
            raise _fail(suite, task_id, "id", "duplicate task id")
        seen.add(task_id)
        _check_target(suite, task)
        if is_review_task(task):
            _check_review(suite, task)
        elif not is_trigger_task(task):
            if not task["oracle"]["command"].strip():
                raise _fail(suite, task_id, "oracle.command", "must not be blank")
            _check_oracle(suite, task_id, task["oracle"])
        _check_solution(suite, task)
        tasks.append({"expensive": False, **task})
    return tasks


def load_suite(path: str | Path) -> list[dict[str, Any]]:
    suite = Path(path)
    try:
        document = yamltext.safe_load(suite.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TaskError(f"{suite}: task suite file does not exist") from exc
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise TaskError(
            f"{suite}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line}, offset "
            f"{exc.start}); save the task suite as UTF-8"
        ) from exc
    except yaml.YAMLError as exc:
        raise TaskError(f"{suite}: not valid YAML: {exc}") from exc
    return validate_suite(document, suite)


def select_tasks(tasks: list[dict[str, Any]], *, include_expensive: bool, only: Sequence[str] = ()) -> Selection:
    """Drop expensive tasks unless asked for, and keep only the named ids when `only` is given."""
    known = {task["id"] for task in tasks}
    unknown = [task_id for task_id in only if task_id not in known]
    if unknown:
        raise TaskError(f"tasks.only names unknown task ids: {unknown}; known: {sorted(known)}")
    wanted = [task for task in tasks if not only or task["id"] in only]
    selected = [task for task in wanted if include_expensive or not task["expensive"]]
    skipped = [task["id"] for task in wanted if task["expensive"] and not include_expensive]
    if not selected:
        raise TaskError("no tasks selected after expensive-task filtering; set tasks.include_expensive: true")
    return Selection(selected, skipped)


# Fields only the task check reads (`check_task`): editing them re-checks the task but reruns no binding or cell.
CHECK_ONLY_FIELDS = ("solution", "verify_on_base", "oracle_on_base")


def run_definition(task: dict[str, Any]) -> dict[str, Any]:
    """The part of a task that bindings and cells depend on."""
    return {key: value for key, value in task.items() if key not in CHECK_ONLY_FIELDS}


def task_digests(task: dict[str, Any]) -> dict[str, str]:
    return {
        "prompt_digest": sha256_text(task["prompt"]),
        "setup_digest": sha256_text(task.get("setup", "")),
        "verify_digest": sha256_text(task.get("verify", "")),
    }
