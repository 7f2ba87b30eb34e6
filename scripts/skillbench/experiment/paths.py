"""The config's path-valued keys: each checked for what it must name before anything reads it.

Every relative path of a config resolves from the folder snakemake runs in (the project root), never from the
config file's folder, so a path written relative to the config file is the commonest mistake: the message names
the key, the folder the path resolved from and, when the path exists relative to a config file, how to write it.
`evolution.seed_results` names a generation folder (`results/<experiment>/gen<N>`, or `sweep`); an experiment
folder (`results/<experiment>`) stands for its last generation that has rows (`seed_folder`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillbench.base import layout
from skillbench.base.errors import SkillbenchError


class PathProblem(SkillbenchError, ValueError):
    """A path-valued key does not name what it must; the message names the key, the path and the fix."""


def _at(config: dict[str, Any], key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _applies(config: dict[str, Any], key: str) -> bool:
    evolving = bool(config["evolution"]["generations"])
    if key == "model.script":
        return config["model"]["provider"] == "scripted"
    if key == "evolution.seed_results":
        # Generation 0 reads a seed only when the proposer writes its candidate.
        return evolving and not config["evolution"]["initial_overlay"]
    if key.startswith("evolution."):
        return evolving
    return True


# (key, what it must name): a file, a folder, or a generation folder of an earlier run.
PATH_KEYS = (
    ("tasks.suite", "file"),
    ("skills.root", "folder"),
    ("model.script", "file"),
    ("evolution.initial_overlay", "folder"),
    ("evolution.seed_results", "seed"),
    ("evolution.learnings", "file"),
)
IMPLIED_SCRIPT = " (model.script is null: the scripted model plays model-script.yaml beside the task suite)"


def generation_folders(folder: Path) -> list[Path]:
    """The generation folders of an experiment folder that hold rows, the sweep's first, then by generation."""
    found = []
    if Path(layout.rows(folder, None)).is_file():
        found.append(Path(layout.rows(folder, None)).parent)
    numbered = []
    for entry in folder.iterdir() if folder.is_dir() else []:
        number = layout.generation_of_folder(entry.name)
        if number is not None and (entry / layout.ROWS).is_file():
            numbered.append((number, entry))
    return found + [entry for _, entry in sorted(numbered)]


def seed_folder(value: str | None) -> str | None:
    """`evolution.seed_results` as the folder the proposer's evidence comes from: a folder holding `results.jsonl`
    as given, or an experiment folder's last generation with rows (else its sweep). Raises PathProblem."""
    if not value:
        return value
    folder = Path(value)
    if (folder / layout.ROWS).is_file():
        return value
    found = generation_folders(folder)
    if found:
        return os.path.join(value, found[-1].name)
    raise PathProblem(f"config evolution.seed_results: {value} {_seed_problem(folder)}")


def _seed_problem(folder: Path) -> str:
    if not folder.exists():
        return "does not exist"
    if not folder.is_dir():
        return "is not a folder"
    return (
        f"holds no {layout.ROWS}: name a generation folder of an earlier run (results/<experiment>/gen<N>, or its "
        "sweep), or the experiment folder results/<experiment> for its last generation"
    )


def _problem(path: Path, kind: str) -> str | None:
    if kind == "seed":
        try:
            seed_folder(str(path))
        except PathProblem:
            return _seed_problem(path)
        return None
    if not path.exists():
        return "does not exist"
    if kind == "file" and not path.is_file():
        return "is not a file"
    if kind == "folder" and not path.is_dir():
        return "is not a folder"
    return None


def _where(value: str, workdir: Path, config_files: Sequence[Path], kind: str) -> str:
    """How a relative path was read, and how to write it when it names the right thing relative to a config file."""
    if Path(value).expanduser().is_absolute():
        return ""
    note = f" (a relative path resolves from {workdir}, the folder snakemake runs in, not from the config file's"
    for config_file in config_files:
        candidate = (workdir / config_file).parent / value
        if _problem(candidate, kind) is None:
            written = min(os.path.relpath(candidate, workdir), os.path.normpath(candidate), key=len)
            return f"{note}: relative to {config_file} it exists, so write it as {written})"
    if ".." in Path(value).parts:
        return f"{note}; `..` steps up from {workdir}, to {os.path.normpath(workdir / value)})"
    return note + ")"


def path_problems(
    config: dict[str, Any], *, workdir: Path | None = None, config_files: Sequence[str | Path] = ()
) -> dict[str, str]:
    """Every path-valued key (that the experiment reads) that does not name what it must: key -> one line naming
    the key, the path, what is wrong, the folder it resolved from and the fix."""
    workdir = (workdir or Path.cwd()).absolute()
    files = [Path(path) for path in config_files]
    problems: dict[str, str] = {}
    entries: list[tuple[str, str, str]] = [
        (key, kind, value)
        for key, kind in PATH_KEYS
        if _applies(config, key) and isinstance(value := _at(config, key), str) and value
    ]
    if config["model"]["provider"] == "scripted" and not config["model"]["script"]:
        entries.append(("model.script", "file", str(Path(config["tasks"]["suite"]).parent / "model-script.yaml")))
    entries += [
        (f"skills.mirrors[{index}]", "folder", mirror) for index, mirror in enumerate(config["skills"]["mirrors"])
    ]
    for key, kind, value in entries:
        if key == "model.script" and "tasks.suite" in problems:
            continue
        path = Path(value).expanduser()
        problem = _problem(path if path.is_absolute() else workdir / path, kind)
        if problem is None:
            continue
        if key == "model.script":
            # A script is written, not found: say how to start one.
            implied = IMPLIED_SCRIPT if not config["model"]["script"] else _where(value, workdir, files, kind)
            problems[key] = f"config {key}: {value} {problem}{implied}; `skillbench script init` writes a skeleton"
            continue
        problems[key] = f"config {key}: {value} {problem}{_where(value, workdir, files, kind)}"
    return problems
