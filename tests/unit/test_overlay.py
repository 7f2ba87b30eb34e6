"""Candidate overlays: every bad overlay gets its own clear error; digests, freezing and targets."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from skillbench import overlay
from skillbench.overlay import OverlayError

EVOLVABLE = ["change-plan", "change-work"]


def write(root: Path, relative: str, content: str | bytes = "# skill\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.fixture
def incumbent(tmp_path: Path) -> Path:
    skills = tmp_path / "skills"
    write(skills, "change-work/SKILL.md", "# work\nRun the tests.\n")
    write(skills, "change-plan/SKILL.md", "# plan\n")
    return skills


@pytest.fixture
def candidate(tmp_path: Path) -> Path:
    root = tmp_path / "candidate"
    write(root, ".claude/skills/change-work/SKILL.md", "# work\nRun the tests once.\n")
    return root


def test_valid_overlay_and_its_digest(candidate):
    files = overlay.overlay_files(candidate, EVOLVABLE)
    assert [path for path, _ in files] == [".claude/skills/change-work/SKILL.md"]
    assert overlay.touched_skills(files) == {"change-work"}
    assert len(overlay.digest(files)) == 64


def test_digest_depends_on_paths_and_bytes_not_order():
    a = [("x.md", b"1"), ("y.md", b"2")]
    assert overlay.digest(a) == overlay.digest(list(reversed(a)))
    assert overlay.digest(a) != overlay.digest([("x.md", b"1"), ("y.md", b"3")])
    # Length framing: moving a byte between path and content changes the digest.
    assert overlay.digest([("ab", b"c")]) != overlay.digest([("a", b"bc")])


def test_symlink_is_refused(candidate, tmp_path):
    target = write(tmp_path, "elsewhere.md")
    (candidate / ".claude/skills/change-work/extra.md").symlink_to(target)
    with pytest.raises(OverlayError, match="symlink"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_symlinked_overlay_root_is_refused(candidate, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(candidate)
    with pytest.raises(OverlayError, match="real directory"):
        overlay.overlay_files(link, EVOLVABLE)


def test_python_file_is_refused(candidate):
    write(candidate, ".claude/skills/change-work/helper.py", "print(1)\n")
    with pytest.raises(OverlayError, match=r"helper\.py is not allowed.*Markdown"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_unknown_skill_is_refused(candidate):
    write(candidate, ".claude/skills/deploy/SKILL.md")
    with pytest.raises(OverlayError, match=r"deploy/SKILL\.md is not allowed"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_file_outside_skills_is_refused(candidate):
    write(candidate, "README.md")
    with pytest.raises(OverlayError, match="README.md is not allowed"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_too_many_files(candidate):
    for index in range(overlay.MAX_FILES):
        write(candidate, f".claude/skills/change-work/ref-{index}.md")
    with pytest.raises(OverlayError, match=f"more than {overlay.MAX_FILES} files"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_oversize_file(candidate):
    write(candidate, ".claude/skills/change-work/big.md", b"x" * (overlay.MAX_TOTAL_BYTES + 1))
    with pytest.raises(OverlayError, match=r"big\.md.*bytes"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_empty_overlay(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(OverlayError, match="no files"):
        overlay.overlay_files(tmp_path / "empty", EVOLVABLE)


def test_identical_copy_is_refused(tmp_path, incumbent):
    root = tmp_path / "same"
    write(root, ".claude/skills/change-work/SKILL.md", (incumbent / "change-work/SKILL.md").read_text())
    files = overlay.overlay_files(root, EVOLVABLE)
    with pytest.raises(OverlayError, match="byte-identical"):
        overlay.require_change(files, incumbent)


def test_changed_copy_passes(candidate, incumbent):
    overlay.require_change(overlay.overlay_files(candidate, EVOLVABLE), incumbent)


def test_freeze_is_read_only_and_digest_bound(candidate, tmp_path):
    frozen = tmp_path / "frozen"
    digest = overlay.freeze(candidate, frozen, EVOLVABLE)
    assert digest == overlay.digest(overlay.overlay_files(candidate, EVOLVABLE))
    skill = frozen / ".claude/skills/change-work/SKILL.md"
    assert stat.S_IMODE(skill.stat().st_mode) == 0o400
    assert stat.S_IMODE((frozen / ".claude").stat().st_mode) == 0o500
    # Freezing again replaces the old copy.
    assert overlay.freeze(candidate, frozen, EVOLVABLE) == digest


def test_promotion_targets_include_mirrors(candidate):
    files = overlay.overlay_files(candidate, EVOLVABLE)
    targets = overlay.promotion_targets(files, skills_root=".claude/skills", mirrors=["plugin/skills"])
    assert targets == [".claude/skills/change-work/SKILL.md", "plugin/skills/change-work/SKILL.md"]


def git(repo: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo)}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_committed_targets_and_drift(tmp_path, candidate):
    repo = tmp_path / "repo"
    write(repo, ".claude/skills/change-work/SKILL.md", "# work\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "skills")
    targets = [".claude/skills/change-work/SKILL.md"]
    digests = overlay.committed_target_digests(repo, targets)
    assert list(digests) == targets
    write(repo, ".claude/skills/change-work/SKILL.md", "# work, edited but not committed\n")
    with pytest.raises(OverlayError, match="differ from HEAD"):
        overlay.committed_target_digests(repo, targets)
    with pytest.raises(OverlayError, match="not committed at HEAD"):
        overlay.committed_target_digests(repo, ["plugin/skills/change-work/SKILL.md"])
