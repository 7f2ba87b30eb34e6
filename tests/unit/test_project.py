"""`skillbench init`: a project folder of the user's own, in a new folder or in their repository, never overwriting."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from gitenv import GIT_ENV
from skillbench.cli import main
from skillbench.experiment import configcheck, project
from skillbench.experiment.runrecord import CHECKOUT, config_layers

SKILL = "---\nname: tidy\ndescription: Use when tidying code.\n---\n\n# tidy\n\nKeep changes small.\n"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = tmp_path / "my-skills" / "tidy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    return folder.parent


def test_init_makes_a_new_folder_a_committed_repository_whose_config_holds_only_what_differs(
    tmp_path, skills, monkeypatch, capsys
):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, GIT_ENV[key])
    assert main(["init", str(tmp_path / "my bench"), "--skills", str(skills)]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "my bench"
    assert f"cd '{folder}'" in out  # quoted: the printed commands work as printed
    assert git(folder, "ls-files").split() == [
        ".claude/skills/tidy/SKILL.md",
        ".gitignore",
        "Snakefile",
        "config/config.yaml",
        "profiles/default/config.yaml",
        "tasks/tasks.yaml",
    ]
    assert f'snakefile:\n        "{CHECKOUT / "Snakefile"}"' in (folder / "Snakefile").read_text()
    own = yaml.safe_load((folder / "config" / "config.yaml").read_text())
    assert own["experiment"] == "my-bench" and own["skills"]["evolvable"] == ["tidy"]
    assert own["arms"]["skilled"]["sessions"][0]["skill"] == "tidy"
    # The CLI in that folder merges it over the workflow's own config, as its Snakefile does.
    monkeypatch.chdir(folder)
    layers = config_layers([], Path("config/config.yaml"))
    assert layers == [CHECKOUT / "config" / "config.yaml", Path("config/config.yaml")]
    merged = configcheck.load_config(*layers)
    assert merged["selected_arms"] == ["skilled", "baseline"] and "baseline" in merged["arms"]


def test_init_adds_to_a_repository_of_ones_own_and_never_overwrites(tmp_path, skills, capsys):
    repository = tmp_path / "lib"
    (repository / ".claude" / "skills" / "tidy").mkdir(parents=True)
    (repository / ".claude" / "skills" / "tidy" / "SKILL.md").write_text(SKILL)
    git(repository, "init", "-q")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "lib")
    assert main(["init", str(repository)]) == 0
    out = capsys.readouterr().out
    assert "your repository (commit the files)" in out and "git add Snakefile" in out
    assert git(repository, "log", "--oneline").count("\n") == 1  # nothing committed for the user
    assert (repository / "profiles" / "default" / "config.yaml").is_file()
    assert main(["init", str(repository)]) == 1
    assert "already has Snakefile, config/config.yaml" in capsys.readouterr().err

    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("x")
    assert main(["init", str(other), "--skills", str(skills)]) == 1
    assert "is a folder with files that is not a git repository" in capsys.readouterr().err
    with pytest.raises(project.ProjectError, match="holds no skill"):
        project.init_project(tmp_path / "empty-project")
