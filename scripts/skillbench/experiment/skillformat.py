"""The Agent Skills format of every SKILL.md the harness benchmarks: the incumbent family and candidate overlays.

A skill whose frontmatter the CLI cannot read is not loaded, and a session that "ran" it measures nothing, so
every SKILL.md is checked with the reference validator (PyPI `skills-ref`) before any session: YAML frontmatter
between `---` lines, a `name` that matches its folder (lowercase letters, digits and single hyphens, at most 64
characters), a non-empty `description` of at most 1024 characters, and only the fields the format allows.
"""

from __future__ import annotations

from pathlib import Path

from skills_ref import validate as reference_validate

from skillbench.base.artifacts import ArtifactError


class SkillFormatError(ArtifactError):
    """A SKILL.md breaks the Agent Skills format; the message names the file and every problem."""


def skill_problems(skill_dir: Path) -> list[str]:
    """Every problem the reference validator finds in one skill folder (empty when it is valid)."""
    return list(reference_validate(Path(skill_dir)))


def check_skill_folders(folders: list[Path], *, what: str) -> None:
    """Raise SkillFormatError naming every invalid SKILL.md among `folders` (each a `<skill>/` folder)."""
    problems = []
    for folder in sorted(folders):
        found = skill_problems(folder)
        if found:
            problems.append(f"{folder}/SKILL.md: {'; '.join(found)}")
    if problems:
        raise SkillFormatError(
            f"{what} breaks the Agent Skills format: "
            + " | ".join(problems)
            + ". Fix the frontmatter: `---`, `name: <folder name>`, `description: <what the skill "
            "does and when to use it>`, `---`"
        )


def check_skill_root(root: str | Path) -> None:
    """Every skill of the incumbent family (`<root>/<skill>/SKILL.md`)."""
    root = Path(root)
    if not root.is_dir():
        raise SkillFormatError(f"skills.root {root} is not a folder")
    folders = [path for path in root.iterdir() if path.is_dir() and not path.name.startswith(".")]
    missing = [folder for folder in folders if not (folder / "SKILL.md").is_file()]
    if missing:
        raise SkillFormatError(
            f"skill folder(s) without a SKILL.md under {root}: {', '.join(folder.name for folder in sorted(missing))}"
        )
    check_skill_folders(folders, what=f"the incumbent skill family {root}")


def check_overlay(overlay: str | Path) -> None:
    """Every SKILL.md an overlay carries (`.claude/skills/<skill>/SKILL.md`); other Markdown files need no frontmatter.

    An overlay that carries only a skill's other files keeps the incumbent's SKILL.md, which `check_skill_root`
    covers."""
    skills = Path(overlay) / ".claude" / "skills"
    if not skills.is_dir():
        return
    folders = [path.parent for path in skills.glob("*/*") if path.name.lower() == "skill.md"]
    check_skill_folders(folders, what=f"overlay {overlay}")
