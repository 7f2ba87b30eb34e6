"""What an author writes for the scripted model beyond the schema: shared steps, and the skeleton to start from.

* Shared steps: a script's top-level `steps:` names step lists; a step `{use: <name>}` plays that list in its place
  (its `when`/`unless`/`chance` apply to every step of it), in any task, role or the proposer, nested at will.
  YAML anchors repeat a whole list but cannot splice one into another, so without this a suite's scripts repeat
  their common reads and verify runs by hand. `expand_shared_steps` resolves the uses of one step list (the scripted
  model plays the result); `shared_step_problems` names an unknown list (with the closest name) or a cycle.
* The skeleton (`skillbench script init`): per selected task and session role, the skill (for a session that must
  invoke one), a read of each file the task's prompt and verify command name, the verify command, and a closing
  text; a plan session writes its plan document; a proposer that copies an evolvable skill into its overlay with a
  line added and writes its proposal. The reads and the verify run are shared steps per task. The change itself is
  the author's to write (an `Edit` step after the reads).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from skillbench.experiment.configcheck import did_you_mean

# Paths a prompt or a verify command names: a word with a slash or a file extension (`src/app.py`, `README.md`).
_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]{1,8})(?![\w/-])")
SKELETON_USAGE = {
    "input_tokens": 2000,
    "output_tokens": 150,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}


class SharedStepError(ValueError):
    """A `use:` names no shared step list, or the lists use each other in a cycle."""


def expand_shared_steps(steps: Iterable[Mapping[str, Any]], shared: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """``steps`` with every `use: <name>` step replaced by the named list of ``shared`` (as a one-alternative
    `choose`, so its when/unless/chance apply to all of it), recursively; raise SharedStepError."""
    return _expand(list(steps), dict(shared or {}), ())


def _expand(steps: list[Any], shared: dict[str, Any], trail: tuple[str, ...]) -> list[dict[str, Any]]:
    expanded = []
    for step in steps:
        step = copy.deepcopy(step)
        if "use" in step:
            name = step.pop("use")
            if name not in shared:
                raise SharedStepError(f"`use: {name}` names no list under `steps`{did_you_mean(name, list(shared))}")
            if name in trail:
                raise SharedStepError(f"shared steps use each other in a cycle: {' -> '.join((*trail, name))}")
            step["choose"] = [{"weight": 1, "steps": _expand(list(shared[name]), shared, (*trail, name))}]
        elif "choose" in step:
            for alternative in step["choose"]:
                alternative["steps"] = _expand(list(alternative["steps"]), shared, trail)
        expanded.append(step)
    return expanded


def shared_step_problems(document: Mapping[str, Any], where: str) -> list[str]:
    """One line per `use:` of the script that names no shared list, and per cycle among the lists."""
    shared = document.get("steps") or {}
    lists: list[tuple[str, Any]] = [(f"steps.{name}", steps) for name, steps in shared.items()]
    lists += [("proposer", document.get("proposer") or [])]
    for task, roles in (document.get("tasks") or {}).items():
        lists += [(f"tasks.{task}.{role}", steps) for role, steps in (roles or {}).items()]
    problems: list[str] = []
    for place, steps in lists:
        try:
            expand_shared_steps(steps or [], shared)
        except SharedStepError as exc:
            line = f"{where}: {place}: {exc}"
            if line not in problems:
                problems.append(line)
    return problems


# ─── The skeleton ──────────────────────────────────────────────────────────────────────────────────────────


def named_paths(*texts: str) -> list[str]:
    """The relative paths a prompt or command names, in order of appearance, each once."""
    found: list[str] = []
    for text in texts:
        for match in _PATH.finditer(text or ""):
            path = match.group(1).strip("./") if match.group(1).startswith("./") else match.group(1)
            if not path.startswith(("/", "$")) and path not in found:
                found.append(path)
    return found


class _Dumper(yaml.SafeDumper):
    """YAML an author edits: multi-line strings (a command, a file's content) as literal blocks."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def skeleton_yaml(document: dict[str, Any]) -> str:
    """The skeleton as YAML an author reads and edits (keys in the schema's order, literal blocks)."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)


def _read_step(paths: list[str]) -> dict[str, Any]:
    return {
        "text": "Reading the files the task names first.",
        "tools": [{"name": "Read", "input": {"file_path": f"{{{{workspace}}}}/{path}"}} for path in paths],
    }


def _verify_step(command: str) -> dict[str, Any]:
    return {"tools": [{"name": "Bash", "input": {"command": command, "description": "Run the task's verify command"}}]}


def skeleton(
    tasks: list[dict[str, Any]],
    files: Mapping[str, list[str]],
    sessions: Mapping[str, dict[str, Any]],
    *,
    proposer_skill: str | None,
    skills_root: str,
) -> dict[str, Any]:
    """A `model-script/v1` document: for each task (with ``files[task]`` the paths its prompt and verify name that
    exist in its target) and each session role of ``sessions`` (role → the first session of that role: its
    `skill`, `plan_document`), the steps a session of that role plays; a proposer when ``proposer_skill`` names the
    evolvable skill its candidate changes."""
    shared: dict[str, Any] = {}
    scripted: dict[str, Any] = {}
    for task in tasks:
        task_id = task["id"]
        reads, verify = f"{task_id}-read", f"{task_id}-verify"
        if files.get(task_id):
            shared[reads] = [_read_step(list(files[task_id]))]
        shared[verify] = [_verify_step(task["verify"])]
        roles: dict[str, Any] = {}
        for role, session in sessions.items():
            steps: list[dict[str, Any]] = []
            if session.get("skill"):
                steps.append({"tools": [{"name": "Skill", "input": {"skill": session["skill"]}}]})
            if files.get(task_id):
                steps.append({"use": reads})
            if session.get("plan_document"):
                plan = f"{{{{workspace}}}}/docs/plans/{task_id}.md"
                content = f"# Plan: {task_id}\n\n1. Read the files the task names.\n2. Change them.\n3. Run verify.\n"
                steps.append({"tools": [{"name": "Write", "input": {"file_path": plan, "content": content}}]})
                steps.append({"text": "The plan is written."})
            else:
                steps.append({"use": verify})
                steps.append({"text": f"Done: `{task['verify']}` was run; its output is above."})
            roles[role] = steps
        scripted[task_id] = roles
    document: dict[str, Any] = {
        "schema": "model-script/v1",
        "defaults": {"usage": dict(SKELETON_USAGE), "final_text": "Done."},
        "steps": shared,
        "tasks": scripted,
    }
    if proposer_skill:
        document["proposer"] = proposer_steps(proposer_skill, skills_root)
    return document


def proposer_steps(skill: str, skills_root: str) -> list[dict[str, Any]]:
    """A proposer that reads the gate's last verdict, writes a candidate of ``skill`` (its SKILL.md with one line
    added) under `.skillbench-output/overlay/` and its case in `.skillbench-output/proposal.md`."""
    # The paths go through a variable, as the CLI's permission check reads a command's literal redirect targets.
    command = (
        f"set -e\nout={{{{workspace}}}}/.skillbench-output/overlay/.claude/skills/{skill}\n"
        f'mkdir -p "$out"\ncp {skills_root}/{skill}/SKILL.md "$out/SKILL.md"\n'
        "printf '\\nRun the verify command once, after the last change.\\n' >> \"$out/SKILL.md\"\n"
    )
    proposal = (
        f"# Proposal: {skill}\n\nPattern: what the evidence shows.\nChange: the line added to {skill}.\n"
        "Expected effect: fewer turns at the same resolution.\nRisks: none measured yet.\n"
    )
    return [
        {
            "text": "What did the last gate decide?",
            "tools": [{"name": "Read", "input": {"file_path": "{{evidence}}/gate-summary.json"}}],
        },
        {"tools": [{"name": "Bash", "input": {"command": command, "description": "Write the candidate overlay"}}]},
        {
            "tools": [
                {
                    "name": "Write",
                    "input": {"file_path": "{{workspace}}/.skillbench-output/proposal.md", "content": proposal},
                }
            ]
        },
    ]
