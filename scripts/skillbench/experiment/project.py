"""A project folder of the user's own (`skillbench init DIR`): where their skills, tasks and results live, with
skillbench used as a Snakemake module from its checkout.

The folder is a git repository (a new one, or the user's own repository it is added to): the skills under test must
be committed there, since a candidate is bound to their committed bytes and `skillbench apply` writes them back as
one transaction. It holds

* `Snakefile`: the checkout's `config/config.yaml`, then this folder's `config/config.yaml` merged over it, and
  `use rule * from skillbench` (the checkout's workflow as a module);
* `config/config.yaml`: only what differs: the experiment's name, the suite, the skills (root and which evolve), an
  arm that invokes the first skill, a baseline, a small first design;
* `tasks/tasks.yaml`: the suite, to be written (a commented example);
* `.claude/skills/`: the user's skills (copied in with `--skills`, or the repository's own);
* `profiles/default/config.yaml`: the checkout's workflow profile, which snakemake loads by itself in this folder
  (resume, keep going, the session cap), so every command the tool prints works as printed;
* `.gitignore`: results, logs and Snakemake's state.

Nothing is ever overwritten: a folder that already holds one of these files is refused, naming it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from skillbench.base.errors import SkillbenchError
from skillbench.experiment.runrecord import CHECKOUT

SKILLS = Path(".claude") / "skills"
WRITTEN = ("Snakefile", "config/config.yaml", "tasks/tasks.yaml", "profiles/default/config.yaml")
IGNORED = ("results/", "logs/", ".snakemake/")


class ProjectError(SkillbenchError, ValueError):
    """The project folder cannot be made as asked; the message names the path and the fix."""


@dataclass(frozen=True)
class Project:
    """What `init` made: the folder, the skills it found, whether it made the repository (and committed)."""

    folder: Path
    skills: list[str]
    new_repository: bool


def snakefile(checkout: Path) -> str:
    return f'''# skillbench used as a Snakemake module: its rules and library from {checkout},
# the config, tasks, skills and results of this folder.
configfile: "{checkout / "config" / "config.yaml"}"
# Only what differs from the workflow's own config (merged over it: mappings key by key, anything else replaced).
configfile: "config/config.yaml"


module skillbench:
    snakefile:
        "{checkout / "Snakefile"}"
    config:
        config


use rule * from skillbench
'''


def config_text(experiment: str, skills: list[str]) -> str:
    skill = skills[0] if skills else "my-skill"
    evolvable = ", ".join(skills) if skills else skill
    return f"""# Only what differs from the workflow's own config/config.yaml (every key is described in its
# config/README.md); this file is merged over it. Paths resolve from this folder.
experiment: {experiment}

tasks:
  suite: tasks/tasks.yaml

skills:
  root: .claude/skills
  evolvable: [{evolvable}]

# One arm whose session must invoke the skill under test, and the baseline without skills.
prompts:
  skilled: |-
    Use the {{skill}} skill for: {{task}}

    You are running headless: nobody can answer questions, so make reasonable choices yourself.

    {{verify}}
arms:
  skilled:
    sessions:
      - {{role: work, prompt: skilled, skill: {skill}}}
selected_arms: [skilled, baseline]

# A first verdict: a few runs and one generation. `skillbench estimate` says what design a real
# experiment needs; the gate's advice after a verdict says what would let it decide.
runs: 3
evolution:
  generations: 1
"""


TASKS_TEXT = """# The task suite (config/README.md, "Task suites"): each task a prompt, a visible `verify`, a hidden
# oracle and a target: a local git repository and a ref (the code before the change), or a folder of this suite.
# `skillbench script init` then writes the scripted model's skeleton for these tasks; `skillbench check`
# runs every check a run makes, and each task's check (the oracle fails on the base, passes on the solution).
tasks:
  # - id: fix-parsing
  #   class: bug
  #   repo: ../my-library            # relative to this folder
  #   ref: before-fix                # a tag, branch or commit: the code the agent starts from
  #   prompt: >-
  #     Parsing "1,000" returns 1: make it return 1000.
  #   verify: python3 -m pytest -q tests/test_parse.py
  #   oracle:
  #     command: python3 -m pytest -q "$SKILLBENCH_ORACLE_ROOT/parse_oracle_test.py"
  #     files:
  #       - {source: oracles/parse_oracle_test.py, target: parse_oracle_test.py}
  #   solution: {ref: fix}           # optional: the fixed code, checked to pass verify and the oracle
"""


def experiment_name(name: str) -> str:
    """A folder's name as an experiment name (a slug: letters, digits, `.`, `_`, `-`)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-_")[:128]
    return slug or "experiment"


def _skill_names(root: Path) -> list[str]:
    return sorted(entry.name for entry in root.iterdir() if (entry / "SKILL.md").is_file()) if root.is_dir() else []


def _is_repository(folder: Path) -> bool:
    found = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    return found.returncode == 0 and Path(found.stdout.strip()).resolve() == folder.resolve()


def _git(folder: Path, *args: str) -> None:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ProjectError(f"git {' '.join(args)} in {folder} failed: {(done.stderr or done.stdout).strip()[-300:]}")


def init_project(folder: Path, *, skills: Path | None = None, experiment: str | None = None) -> Project:
    """Make ``folder`` a project of the user's own (see the module docstring); ``skills`` is a folder of skills
    (`<skill>/SKILL.md`) to copy into `.claude/skills`. A new folder becomes a git repository with one commit; an
    existing repository gets the files and no commit (the user commits them)."""
    folder = folder.expanduser().absolute()
    existing = folder.exists() and any(folder.iterdir())
    repository = existing and _is_repository(folder)
    if existing and not repository:
        raise ProjectError(
            f"{folder} is a folder with files that is not a git repository: give a new (or empty) folder, or a git "
            "repository of yours to add the project to"
        )
    taken = [name for name in (*WRITTEN, str(SKILLS) if skills else "") if name and (folder / name).exists()]
    if taken:
        raise ProjectError(f"{folder} already has {', '.join(taken)}; nothing was written (init never overwrites)")
    if skills is not None:
        found = _skill_names(skills)
        if not found:
            raise ProjectError(f"--skills {skills}: no skill folder (<skill>/SKILL.md) in it")
    elif not _skill_names(folder / SKILLS):
        raise ProjectError(
            f"{folder / SKILLS} holds no skill (<skill>/SKILL.md): pass --skills with the folder of the skills to test"
        )
    folder.mkdir(parents=True, exist_ok=True)
    if skills is not None:
        shutil.copytree(skills, folder / SKILLS, ignore=shutil.ignore_patterns(".git"))
    names = _skill_names(folder / SKILLS)
    (folder / "Snakefile").write_text(snakefile(CHECKOUT))
    (folder / "config").mkdir(exist_ok=True)
    (folder / "config" / "config.yaml").write_text(config_text(experiment or experiment_name(folder.name), names))
    (folder / "tasks").mkdir(exist_ok=True)
    (folder / "tasks" / "tasks.yaml").write_text(TASKS_TEXT)
    (folder / "profiles" / "default").mkdir(parents=True, exist_ok=True)
    shutil.copy2(CHECKOUT / "profiles" / "default" / "config.yaml", folder / "profiles" / "default" / "config.yaml")
    ignore = folder / ".gitignore"
    kept = ignore.read_text().splitlines() if ignore.exists() else []
    ignore.write_text("\n".join([*kept, *(line for line in IGNORED if line not in kept)]) + "\n")
    if not repository:
        _git(folder, "init", "--quiet")
        _git(folder, "add", "--all")
        _git(folder, "commit", "--quiet", "--message", "skillbench project: skills, config, profile")
    return Project(folder=folder, skills=names, new_repository=not repository)
