"""Writing a made suite: `tasks.yaml`, the offline `model-script.yaml` beside it, an experiment file whose commands
work as printed, and the marker that says where the suite came from.

A folder that already holds a suite from somewhere else (another repository, another importer, a hand-written
one) is refused before anything is written. Every document is checked against its schema (and the suite by the
suite loader) before it is written, atomically.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from skillbench.base.artifacts import atomic_write_text, validate
from skillbench.base.errors import SkillbenchError
from skillbench.experiment import suite as suites

MARKER = ".skillbench-suite.json"
TASKS_FILE = "tasks.yaml"
MODEL_SCRIPT_FILE = "model-script.yaml"
EXPERIMENT_FILE = "experiment.yaml"
DEFAULT_USAGE = {
    "input_tokens": 1800,
    "output_tokens": 160,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}
USAGE_JITTER = 0.15
_SLUG = re.compile(r"[^a-z0-9]+")


class SuiteFolderError(SkillbenchError, ValueError):
    """The output folder cannot take this suite; nothing was written."""


def slug(text: str, fallback: str = "suite") -> str:
    """A lower-case slug of `text` usable as a task id, ref component or experiment name."""
    value = _SLUG.sub("-", text.lower()).strip("-")[:60].strip("-")
    return value or fallback


def shown_path(path: Path) -> str:
    """A path as a command run from the current folder should name it: relative when it lies below, else absolute."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix() or "."
    except ValueError:
        return str(absolute)


def claim(out: Path, origin: str) -> None:
    """Refuse an output folder that holds another suite (tasks.yaml without our marker, or a marker of another
    origin); a folder made from the same origin may be written again."""
    tasks = out / TASKS_FILE
    marker = out / MARKER
    if not tasks.exists() and not marker.exists():
        return
    recorded = None
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8")).get("origin")
        except (OSError, ValueError, AttributeError):
            recorded = None
    if recorded != origin:
        what = f"a suite made from {recorded}" if recorded else "a suite skillbench did not make here"
        raise SuiteFolderError(
            f"--out {out}: the folder already holds {what} ({tasks.name}); nothing was overwritten: name another "
            "folder, or remove this one first"
        )


def write_suite(
    out: Path,
    *,
    origin: str,
    tasks: list[dict[str, Any]],
    script_tasks: dict[str, Any],
    experiment: dict[str, Any],
    header: str,
) -> dict[str, Path]:
    """Check and write tasks.yaml, model-script.yaml, experiment.yaml and the marker; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    tasks_path = out / TASKS_FILE
    document = {"tasks": tasks}
    suites.validate_suite(json.loads(json.dumps(document)), tasks_path)
    script = {
        "schema": "model-script/v1",
        "defaults": {"usage": DEFAULT_USAGE, "final_text": "Done.", "usage_jitter": USAGE_JITTER},
        "tasks": script_tasks,
    }
    validate(script, "model-script", source=out / MODEL_SCRIPT_FILE)
    comment = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.strip().splitlines())
    atomic_write_text(tasks_path, comment + "\n" + _yaml(document))
    script_note = (
        "# The scripted model's script for this suite (model-script/v1). `replay: solution` plays a task by\n"
        "# making its reference solution's edits through the session's own tools (skillbench.execution.replay).\n"
    )
    atomic_write_text(out / MODEL_SCRIPT_FILE, script_note + _yaml(script))
    atomic_write_text(
        out / EXPERIMENT_FILE, "# Merged over config/config.yaml, as snakemake --configfile does.\n" + _yaml(experiment)
    )
    atomic_write_text(out / MARKER, json.dumps({"origin": origin}, sort_keys=True, indent=2) + "\n")
    return {"tasks": tasks_path, "script": out / MODEL_SCRIPT_FILE, "experiment": out / EXPERIMENT_FILE}


def experiment_document(out: Path, name: str, *, runs: int = 3, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The experiment file of a made suite: its name, the suite path as the project root names it, a small design,
    and a benchmark sweep of the incumbent arms (no proposer: its offline script has no steps for one)."""
    return {
        "experiment": slug(name),
        "tasks": {"suite": shown_path(out / TASKS_FILE)},
        "runs": runs,
        "evolution": {"generations": 0},
        **(extra or {}),
    }


def write_file(path: Path, payload: bytes) -> None:
    """A file of the suite (an oracle, a patch, a snapshot file), created with its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(payload)
    os.replace(temporary, path)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (prompts, file text) as literal blocks, so the suite reads as written."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _string)


def _yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def commands(experiment_path: Path, skillbench: str) -> dict[str, str]:
    """The `skillbench check` and `skillbench estimate` commands for the made suite, as a user runs them here
    (`skillbench`: how this process was started, so the printed command works as printed)."""
    configfile = shown_path(experiment_path)
    return {
        "check": f"{skillbench} check --configfile {configfile}",
        "estimate": f"{skillbench} estimate --configfile {configfile}",
    }
