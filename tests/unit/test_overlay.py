"""Candidate overlays: every bad overlay gets its own clear error; digests, freezing and targets."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from gitenv import GIT_ENV
from skillbench.evolution.apply import committed_target_digests
from skillbench.experiment import overlay
from skillbench.experiment.overlay import OverlayError

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


def test_an_overlay_path_may_step_up_with_dotdot_but_not_pass_through_a_symlink(candidate, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert [path for path, _ in overlay.overlay_files(Path("../candidate"), EVOLVABLE)] == [
        ".claude/skills/change-work/SKILL.md"
    ]
    (tmp_path / "linked").symlink_to(tmp_path)
    with pytest.raises(OverlayError, match=rf"passes through a symlink \({tmp_path / 'linked'} is a symlink\)"):
        overlay.overlay_files(Path("../linked/candidate"), EVOLVABLE)


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
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**GIT_ENV, "HOME": str(repo)})


def test_committed_targets_and_drift(tmp_path, candidate):
    repo = tmp_path / "repo"
    write(repo, ".claude/skills/change-work/SKILL.md", "# work\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "skills")
    targets = [".claude/skills/change-work/SKILL.md"]
    digests = committed_target_digests(repo, targets)
    assert list(digests) == targets
    write(repo, ".claude/skills/change-work/SKILL.md", "# work, edited but not committed\n")
    with pytest.raises(OverlayError, match="differ from HEAD"):
        committed_target_digests(repo, targets)
    # The refusal names the repository as a folder (never `.`) and where skills of one's own go.
    with pytest.raises(OverlayError) as uncommitted:
        committed_target_digests(repo, ["plugin/skills/change-work/SKILL.md"])
    assert f"is not committed at HEAD of the git repository {repo.resolve()} (the folder snakemake runs in)" in str(
        uncommitted.value
    )
    assert "`skillbench init DIR --skills PATH`" in str(uncommitted.value)
    with pytest.raises(OverlayError, match=r"promotion target \.\./skills/x/SKILL\.md lies outside the git repository"):
        committed_target_digests(repo, ["../skills/x/SKILL.md"])


# ─── Hostile names and links ────────────────────────────────────────────────


def test_a_hard_link_is_refused(candidate, tmp_path):
    outside = write(tmp_path, "elsewhere.md", "# shared inode\n")
    os.link(outside, candidate / ".claude/skills/change-work/linked.md")
    with pytest.raises(OverlayError, match=r"hard link: \.claude/skills/change-work/linked\.md has 2 links"):
        overlay.overlay_files(candidate, EVOLVABLE)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("evil\nname.md", "control character (U+000A)"),
        ("tab\there.md", "control character (U+0009)"),
        ("esc\x1b[31m.md", "control character (U+001B)"),
        ("gnp\u202etxt.md", "format (bidi-control or invisible) character (U+202E)"),
        ("iso\u2066late.md", "format (bidi-control or invisible) character (U+2066)"),
        ("zero\u200bwidth.md", "format (bidi-control or invisible) character (U+200B)"),
        ("line\u2028sep.md", "line separator (U+2028)"),
    ],
)
def test_names_with_control_or_bidi_characters_are_refused(candidate, name, what):
    write(candidate, f".claude/skills/change-work/{name}", "# x\n")
    with pytest.raises(OverlayError, match="rename it to plain printable characters") as error:
        overlay.overlay_files(candidate, EVOLVABLE)
    assert what in str(error.value)


def test_a_folder_name_with_a_control_character_is_refused(candidate):
    write(candidate, ".claude/skills/change-work/sub\rdir/SKILL.md", "# x\n")
    with pytest.raises(OverlayError, match=r"U\+000D"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_a_name_that_is_not_utf8_is_refused(candidate):
    folder = os.fsencode(candidate / ".claude/skills/change-work")
    with open(os.path.join(folder, b"bad\xff.md"), "wb") as handle:
        handle.write(b"# x\n")
    with pytest.raises(OverlayError, match="is not valid UTF-8"):
        overlay.overlay_files(candidate, EVOLVABLE)


def test_ordinary_unicode_names_pass(candidate):
    write(candidate, ".claude/skills/change-work/référence-日本.md", "# notes\n")
    assert len(overlay.overlay_files(candidate, EVOLVABLE)) == 2


# ─── Hidden oracle content ──────────────────────────────────────────────────

ORACLE = b'''"""Hidden oracle for the money task."""

from shop.money import format_money


def test_thousands_get_a_separator():
    assert format_money(123456789) == "1,234,567.89"
    assert format_money(100000) == "1,000.00"


def test_small_amounts_are_unchanged():
    assert format_money(5) == "0.05"
'''
ORACLES = [("test_money.py of task money-thousands", ORACLE)]


def leaks(text: str) -> list[str]:
    return overlay.find_oracle_content([(".claude/skills/change-work/SKILL.md", text.encode())], ORACLES)


def test_an_exact_copy_of_an_oracle_is_found():
    found = leaks("# work\n\n" + ORACLE.decode() + "\nThe end.\n")
    assert found == [
        ".claude/skills/change-work/SKILL.md holds hidden oracle test_money.py of task money-thousands "
        "(its whole content)"
    ]


def test_a_reformatted_excerpt_of_an_oracle_is_found():
    # Three assertions, re-indented as Markdown bullets, upper-cased and wrapped differently.
    excerpt = """# work
When formatting money, the graders check:
- `ASSERT   FORMAT_MONEY(123456789) == "1,234,567.89"`
- `assert format_money(100000)
  == "1,000.00"`
- def   test_small_amounts_are_unchanged():
"""
    found = leaks(excerpt)
    assert len(found) == 1 and "3 of its" in found[0] and "money-thousands" in found[0]


def test_common_test_lines_and_a_single_shared_line_are_not_a_leak():
    text = """# work
Write tests with pytest: `import pytest`, then `def test_x():` and `assert x == y`.
Use `from shop.money import format_money` to reach the helper.
"""
    assert leaks(text) == []


def test_an_oracle_with_fewer_distinctive_lines_leaks_when_all_of_them_appear():
    small = [("t.py of task tiny", b"def test_it():\n    assert run('--frobnicate') == 42\n")]
    files = [("SKILL.md", b"Tip: assert  run('--frobnicate') == 42 passes.")]
    assert overlay.find_oracle_content(files, small) == [
        "SKILL.md holds hidden oracle t.py of task tiny (1 of its 1 distinctive lines)"
    ]


def test_refuse_oracle_content_names_the_overlay_file_and_the_oracle_but_not_its_content(candidate):
    write(candidate, ".claude/skills/change-work/SKILL.md", "# work\n" + ORACLE.decode())
    files = overlay.overlay_files(candidate, EVOLVABLE)
    with pytest.raises(OverlayError) as error:
        overlay.refuse_oracle_content(files, ORACLES, str(candidate))
    message = str(error.value)
    assert ".claude/skills/change-work/SKILL.md holds hidden oracle test_money.py of task money-thousands" in message
    assert "1,234,567.89" not in message
    overlay.refuse_oracle_content([("x.md", b"# an unrelated skill\n")], ORACLES, "clean")  # no refusal
