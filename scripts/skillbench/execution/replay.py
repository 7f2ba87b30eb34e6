"""Replaying a reference solution: how the scripted model plays a task it has no steps for.

A model script may give a task `{replay: solution}` instead of steps per role (the task miner and the importers
write such scripts). A session of that task then plays steps made here from the task's reference solution (a
`git diff`) and the arm's session: a session with a `skill` first invokes it; a plan session (`plan_document`)
reads the files the solution touches and writes a plan document from the prompt; any other session reads those
files, makes the solution's edits through its own tools (`Edit` per hunk when its old text is unique in the file
as the session finds it, else one `Write` of the file's new text; `Bash rm` for a deleted file) and runs the
task's `verify`. Steps are in Claude Code's tool names, so every agent's `tool_form` maps them like any script's.

Runs differ like the demo's: an investigation turn (`chance`), a repeated verify run (`choose`), and the script's
`defaults.usage_jitter`, all drawn from the cell's variation key by the scripted model. Every step is `verbatim`:
file text is sent as it is, never searched for `{{variable}}` placeholders.

Only the harness-side scripted model reads the solution; the session sees nothing but the tool calls.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillbench.base.errors import SkillbenchError

REPLAY_SOLUTION = "solution"
PLAN_DIRECTORY = "docs/plans"
# What a replayed session does now and then: an investigation turn, a second verify run.
INVESTIGATION_CHANCE = 0.35
REPEATED_VERIFY_WEIGHT = 0.2
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}")
STOP_WORDS = frozenset({"should", "instead", "because", "returns", "return", "expected", "without", "following"})


class ReplayError(SkillbenchError, ValueError):
    """A solution cannot be replayed through edit tools (binary, malformed, or it does not fit the files)."""


@dataclass
class Hunk:
    """One hunk: where it starts in the old file (1-based; 0 for an empty file) and its old and new lines."""

    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


@dataclass
class FileChange:
    """One file of a patch: its path before and after (None: added or deleted) and its hunks."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)


def is_replay(script: dict[str, Any] | None, task_id: str) -> bool:
    """Whether the script plays `task_id` by replaying its reference solution."""
    if not script:
        return False
    entry = (script.get("tasks") or {}).get(task_id)
    return isinstance(entry, dict) and entry.get("replay") == REPLAY_SOLUTION


def _path(raw: bytes, prefix: bytes) -> str | None:
    text = raw.rstrip(b"\n").split(b"\t", 1)[0]
    if text == b"/dev/null":
        return None
    if text.startswith(b'"'):
        raise ReplayError(f"a quoted path in the solution ({text[:80]!r}) is not replayed")
    if not text.startswith(prefix):
        raise ReplayError(f"unexpected path {text[:80]!r} in the solution")
    return text[len(prefix) :].decode("utf-8")


def parse_patch(patch: bytes) -> list[FileChange]:
    """The files and hunks of a `git diff` (text only: a binary change raises ReplayError)."""
    changes: list[FileChange] = []
    current: FileChange | None = None
    hunk: Hunk | None = None
    lines = patch.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith(b"diff --git "):
            current, hunk = FileChange(None, None), None
            changes.append(current)
        elif current is None:
            continue
        elif line.startswith((b"Binary files ", b"GIT binary patch")):
            raise ReplayError(f"the solution changes a binary file ({line.strip()[:100]!r})")
        elif hunk is None and line.startswith(b"rename from "):
            current.old_path = line[len(b"rename from ") :].rstrip(b"\n").decode("utf-8")
        elif hunk is None and line.startswith(b"rename to "):
            current.new_path = line[len(b"rename to ") :].rstrip(b"\n").decode("utf-8")
        elif hunk is None and line.startswith(b"--- "):
            current.old_path = _path(line[4:], b"a/")
        elif hunk is None and line.startswith(b"+++ "):
            current.new_path = _path(line[4:], b"b/")
        elif line.startswith(b"@@"):
            match = _HUNK.match(line)
            if not match:
                raise ReplayError(f"malformed hunk header {line.strip()[:100]!r}")
            hunk = Hunk(int(match.group(1)))
            current.hunks.append(hunk)
        elif hunk is not None and line[:1] in (b" ", b"-", b"+"):
            text = line[1:].decode("utf-8", "surrogateescape")
            if line[:1] in (b" ", b"-"):
                hunk.old.append(text)
            if line[:1] in (b" ", b"+"):
                hunk.new.append(text)
        elif hunk is not None and line.startswith(b"\\"):
            _strip_last_newline(hunk, lines[index - 2][:1] if index >= 2 else b" ")
    # A mode-only change has no paths: nothing to type.
    return [change for change in changes if change.old_path is not None or change.new_path is not None]


def _strip_last_newline(hunk: Hunk, marker: bytes) -> None:
    """`\\ No newline at end of file` applies to the line before it: the old side, the new side, or both."""
    if marker in (b" ", b"-") and hunk.old and hunk.old[-1].endswith("\n"):
        hunk.old[-1] = hunk.old[-1][:-1]
    if marker in (b" ", b"+") and hunk.new and hunk.new[-1].endswith("\n"):
        hunk.new[-1] = hunk.new[-1][:-1]


def apply_hunks(text: str, hunks: list[Hunk], *, path: str) -> str:
    """The file's text with the hunks applied at their lines (ReplayError when a hunk's old lines are not there)."""
    lines = text.splitlines(keepends=True)
    offset = 0
    for hunk in hunks:
        start = max(hunk.old_start - 1, 0) + offset if hunk.old else hunk.old_start + offset
        if lines[start : start + len(hunk.old)] != hunk.old:
            raise ReplayError(f"{path}: the solution's hunk at line {hunk.old_start} does not fit the file")
        lines[start : start + len(hunk.old)] = hunk.new
        offset += len(hunk.new) - len(hunk.old)
    return "".join(lines)


def _absolute(workspace: str, path: str) -> str:
    return f"{workspace.rstrip('/')}/{path}"


def edit_calls(path: str, text: str, hunks: list[Hunk], workspace: str) -> list[dict[str, Any]]:
    """The tool calls that turn `text` into the solution's text: an Edit per hunk while each one's old text is unique
    in the file as it then is, else one Write of the whole new text."""
    final = apply_hunks(text, hunks, path=path)
    calls: list[dict[str, Any]] = []
    current = text
    for hunk in hunks:
        old, new = "".join(hunk.old), "".join(hunk.new)
        if not old or old == new or current.count(old) != 1:
            return [{"name": "Write", "input": {"file_path": _absolute(workspace, path), "content": final}}]
        current = current.replace(old, new, 1)
        calls.append(
            {"name": "Edit", "input": {"file_path": _absolute(workspace, path), "old_string": old, "new_string": new}}
        )
    return calls


@dataclass(frozen=True)
class ReplayPlan:
    """What replaying a solution takes: the files to read first, then the tool calls that make its edits."""

    reads: list[str]
    edits: list[dict[str, Any]]
    touched: list[str]


def plan_replay(patch: bytes, read_text: Callable[[str], str | None], workspace: str) -> ReplayPlan:
    """The reads and edits that replay `patch` on the files `read_text` (a path as the CLI sees it → its text, None
    when missing) finds."""
    reads: list[str] = []
    edits: list[dict[str, Any]] = []
    touched: list[str] = []
    for change in parse_patch(patch):
        source = change.old_path
        target = change.new_path
        touched.append(target or source or "")
        if target is None:
            assert source is not None
            edits.append(
                {
                    "name": "Bash",
                    "input": {"command": f"rm -f -- {shlex.quote(source)}", "description": f"Remove {source}"},
                }
            )
            continue
        if source is None:
            content = apply_hunks("", change.hunks, path=target)
            edits.append({"name": "Write", "input": {"file_path": _absolute(workspace, target), "content": content}})
            continue
        text = read_text(_absolute(workspace, source))
        if text is None:
            raise ReplayError(f"{source}: the file the solution changes is not in the workspace (or not text)")
        reads.append(_absolute(workspace, source))
        if source == target:
            edits += edit_calls(target, text, change.hunks, workspace) if change.hunks else []
        else:
            content = apply_hunks(text, change.hunks, path=target)
            edits.append({"name": "Write", "input": {"file_path": _absolute(workspace, target), "content": content}})
            edits.append(
                {
                    "name": "Bash",
                    "input": {"command": f"rm -f -- {shlex.quote(source)}", "description": f"Remove {source}"},
                }
            )
    if not edits:
        raise ReplayError("the solution changes nothing a session could type")
    return ReplayPlan(reads=reads, edits=edits, touched=touched)


def _step(text: str | None, tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"tools": tools, "verbatim": True, **extra}
    if text:
        step["text"] = text
    return step


def _investigation(prompt: str, workspace: str) -> list[dict[str, Any]]:
    words = [word for word in _WORD.findall(prompt) if word.lower() not in STOP_WORDS]
    if not words:
        return []
    pattern = words[0]
    tool = {"name": "Grep", "input": {"pattern": pattern, "path": workspace}}
    return [_step(f"Looking for where {pattern} is used.", [tool], chance=INVESTIGATION_CHANCE)]


def plan_path(task_id: str) -> str:
    """Where a replayed plan session writes its plan document (under the plan sessions' folder)."""
    return f"{PLAN_DIRECTORY}/{task_id}.md"


def plan_text(task: dict[str, Any], touched: list[str]) -> str:
    first = task["prompt"].strip().splitlines()[0] if task["prompt"].strip() else task["id"]
    files = "\n".join(f"- `{path}`" for path in touched)
    return (
        f"# Plan: {first[:120]}\n\n## Goal\n\n{task['prompt'].strip()}\n\n## Files\n\n{files}\n\n## Steps\n\n"
        "1. Read the files above and find where the behaviour comes from.\n"
        "2. Make the change in those files.\n3. Run the verify command and report its output.\n"
    )


def session_steps(
    *,
    task: dict[str, Any],
    session: dict[str, Any],
    patch: bytes,
    read_text: Callable[[str], str | None],
    workspace: str,
) -> list[dict[str, Any]]:
    """The steps one session of a replayed task plays (see the module docstring)."""
    replay = plan_replay(patch, read_text, workspace)
    steps: list[dict[str, Any]] = []
    if session.get("skill"):
        steps.append(
            _step(f"I'll use the {session['skill']} skill.", [{"name": "Skill", "input": {"skill": session["skill"]}}])
        )
    plan = _absolute(workspace, plan_path(task["id"]))
    reads = list(replay.reads)
    if not session.get("plan_document") and read_text(plan) is not None:
        reads.insert(0, plan)
    if reads:
        steps.append(
            _step("Reading the code involved.", [{"name": "Read", "input": {"file_path": path}} for path in reads])
        )
    steps += _investigation(task["prompt"], workspace)
    if session.get("plan_document"):
        content = plan_text(task, replay.touched)
        steps.append(_step("Writing the plan.", [{"name": "Write", "input": {"file_path": plan, "content": content}}]))
        return steps
    steps += [_step(None, [call]) for call in replay.edits]
    verify = {"name": "Bash", "input": {"command": task["verify"], "description": "Run the verify command"}}
    steps.append(
        {
            "choose": [
                {"weight": 1 - REPEATED_VERIFY_WEIGHT, "steps": [_step("Running the verify command.", [verify])]},
                {
                    "weight": REPEATED_VERIFY_WEIGHT,
                    "steps": [
                        _step("Running the verify command.", [verify]),
                        _step("Running it once more to be sure.", [verify]),
                    ],
                },
            ]
        }
    )
    return steps
