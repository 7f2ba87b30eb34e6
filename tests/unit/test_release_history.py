"""A history made from a package's pinned source releases (the mined demo's repository): one commit per release,
the changelog entry as its message, generated files left out, the same commit ids on every machine; archives that
reach outside their folder, a release without its licence and a folder made from other pins are refused."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from skillbench.tasksupply import releases

CHANGELOG = """Changes
=======

1.2.0
-----

* :func:`clamp` bounds a value

1.1.0
-----

* :func:`mean` keeps the fraction

1.0.0
-----

* First release
"""


def sdist(folder: Path, version: str, files: dict[str, str], *, mtime: int = 1_600_000_000) -> Path:
    """A release archive as an sdist lays it out: everything under `pkg-<version>/`."""
    path = folder / f"pkg-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for relative, text in files.items():
            payload = text.encode()
            info = tarfile.TarInfo(f"pkg-{version}/{relative}")
            info.size, info.mtime, info.mode = len(payload), mtime, 0o644
            archive.addfile(info, io.BytesIO(payload))
    return path


def release_files(version: str, code: str) -> dict[str, str]:
    return {
        "LICENSE": "MIT\n",
        "docs/changes.rst": CHANGELOG,
        "pkg/core.py": code,
        "tests/test_core.py": "def test_it():\n    pass\n",
        "PKG-INFO": f"Version: {version}\n",
        "pkg.egg-info/SOURCES.txt": "pkg/core.py\n",
    }


def pins_for(folder: Path, archives: dict[str, Path], skipped: dict[str, list[str]] | None = None) -> Path:
    path = folder / "pins.json"
    entries = []
    for version, archive in archives.items():
        entry: dict[str, object] = {
            "version": version,
            "file": archive.name,
            "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        }
        if skipped and version in skipped:
            entry["skipped"] = skipped[version]
        entries.append(entry)
    document = {
        "schema": "release-history/v1",
        "package": "pkg",
        "licence": "LICENSE",
        "changelog": "docs/changes.rst",
        "generated": ["PKG-INFO", "*.egg-info"],
        "build_constraints": ["setuptools==69.5.1"],
        "releases": entries,
    }
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def cache(tmp_path: Path) -> tuple[Path, Path]:
    """Pinned archives of releases 1.0.0 and 1.2.0 (1.1.0 skipped), already in the download cache."""
    folder = tmp_path / "sdists"
    folder.mkdir()
    first = sdist(folder, "1.0.0", release_files("1.0.0", "def mean(v):\n    return sum(v) // len(v)\n"))
    second = sdist(
        folder, "1.2.0", release_files("1.2.0", "def mean(v):\n    return sum(v) / len(v)\n"), mtime=1_700_000_000
    )
    return pins_for(tmp_path, {"1.0.0": first, "1.2.0": second}, {"1.2.0": ["1.1.0"]}), folder


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_each_release_becomes_a_commit_with_its_changelog_entry(cache: tuple[Path, Path], tmp_path: Path) -> None:
    pins_path, folder = cache
    pins = releases.read_pins(pins_path)
    head = releases.build_history(pins, tmp_path / "repo", folder)
    repo = tmp_path / "repo"
    assert git(repo, "rev-list", "--count", "HEAD") == "2" and git(repo, "rev-parse", "HEAD") == head
    newest = git(repo, "log", "-1", "--format=%B")
    assert newest.startswith("pkg 1.2.0\n\n* :func:`clamp` bounds a value")
    assert "1.1.0:\n\n* :func:`mean` keeps the fraction" in newest  # the skipped release's entry joins it
    assert git(repo, "log", "-1", "--format=%B", "HEAD~1").startswith("pkg 1.0.0\n\n* First release")
    assert git(repo, "log", "-1", "--format=%at", "HEAD") == "1700000000"  # the release's build date
    assert git(repo, "ls-files").split() == ["LICENSE", "docs/changes.rst", "pkg/core.py", "tests/test_core.py"]
    assert git(repo, "diff", "--name-only", "HEAD~1", "HEAD") == "pkg/core.py"
    # The same pins make the same commits anywhere; a folder made from them is kept as it is.
    assert releases.build_history(pins, tmp_path / "again", folder) == head
    assert releases.build_history(pins, repo, folder) == head


def test_a_folder_not_made_from_these_pins_is_refused(cache: tuple[Path, Path], tmp_path: Path) -> None:
    pins_path, folder = cache
    releases.build_history(releases.read_pins(pins_path), tmp_path / "repo", folder)
    pins_path.write_text(pins_path.read_text().replace('"setuptools==69.5.1"', '"setuptools==70.0.0"'))
    with pytest.raises(releases.ReleaseHistoryError, match="was not made from .* as it is now; remove it"):
        releases.build_history(releases.read_pins(pins_path), tmp_path / "repo", folder)


def test_a_release_without_its_licence_is_refused(tmp_path: Path) -> None:
    files = release_files("1.0.0", "x = 1\n")
    del files["LICENSE"]
    archive = sdist(tmp_path, "1.0.0", files)
    pins = releases.read_pins(pins_for(tmp_path, {"1.0.0": archive}))
    with pytest.raises(releases.ReleaseHistoryError, match="holds no LICENSE"):
        releases.build_history(pins, tmp_path / "repo", tmp_path)
    assert not (tmp_path / "repo").exists()


@pytest.mark.parametrize(
    ("name", "kind", "says"),
    [("pkg-1.0.0/link", tarfile.SYMTYPE, "not a regular file"), ("pkg-1.0.0/../escape.py", tarfile.REGTYPE, "outside")],
)
def test_an_archive_reaching_outside_its_folder_is_refused(tmp_path: Path, name: str, kind: bytes, says: str) -> None:
    path = tmp_path / "bad.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, "/etc/passwd"
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(releases.ReleaseHistoryError, match=says):
        releases.unpack(path, ["PKG-INFO"])


def test_pip_runs_in_bubblewrap_and_checks_the_pinned_digest(cache: tuple[Path, Path], tmp_path: Path) -> None:
    pins = releases.read_pins(cache[0])
    folder = tmp_path / "download"
    folder.mkdir()
    command = releases.download_command(pins, pins.releases[0], folder, "/usr/bin/python3")
    assert command[0] == "bwrap" and ["--ro-bind", "/", "/"] == command[1:4]
    assert ["--bind", str(folder), str(folder)] == command[command.index("--bind") : command.index("--bind") + 3]
    pip = command[command.index("--") + 1 :]
    assert pip[:4] == ["/usr/bin/python3", "-m", "pip", "download"]
    assert {"--no-deps", "--require-hashes", "--no-cache-dir"} <= set(pip) and pip[
        pip.index("--no-binary") + 1
    ] == ":all:"
    requirement = (folder / "requirement.txt").read_text()
    assert requirement == f"pkg==1.0.0 --hash=sha256:{pins.releases[0].sha256}\n"
    assert (folder / "build-constraints.txt").read_text() == "setuptools==69.5.1\n"


def test_a_changelog_entry_is_found_under_its_version_heading() -> None:
    assert releases.changelog_entry(CHANGELOG, "1.1.0") == "* :func:`mean` keeps the fraction"
    markdown = "# Changelog\n\n## v2.0.1 (2024-01-02)\n\n- fixed x\n\n## 2.0.0\n\n- y\n"
    assert releases.changelog_entry(markdown, "2.0.1") == "- fixed x"
    assert releases.changelog_entry(markdown, "2.0") == ""


def test_the_shipped_pins_are_valid_and_in_order() -> None:
    pins = releases.read_pins(Path(__file__).resolve().parents[2] / "tasks" / "mined-demo.releases.json")
    versions = [tuple(int(part) for part in release.version.split(".")) for release in pins.releases]
    assert versions == sorted(versions) and len(versions) >= 30 and pins.licence == "LICENSE"
