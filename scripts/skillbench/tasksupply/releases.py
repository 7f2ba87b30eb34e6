"""A repository's history made from a package's published source releases: one commit per release, in order.

The mined demo (`make mined-demo`) needs a real library's history on a fresh machine, which reaches the package
registry but no code host. A pin file (`tasks/mined-demo.releases.json`, schema `release-history`) names the
package, the sdist of each release with its SHA-256, the changelog inside the sdist and the build backends pip may
use. `build_history`:

- downloads each pinned sdist with `pip download --no-deps --no-binary :all: --require-hashes` into a cache folder
  (a file already there with its pinned digest is kept). pip prepares an sdist's metadata by running its build
  backend, so pip runs inside Bubblewrap: the host read-only, only the download folder writable, its own tmp; the
  digest is checked before that build runs (`--require-hashes`) and again here. Nothing is installed or imported;
- unpacks each archive with `tarfile`'s data filter (regular files and folders only, nothing outside the release's
  top folder), leaving out what the sdist build generated (`generated`: PKG-INFO, *.egg-info);
- commits each release's whole tree over the previous one, with the release's own changelog entry (and those of
  releases the pins skip since the previous commit) as the message, under a fixed identity and the release's build date,
  so the same pins give the same commit ids on every machine (the date: the newest member's time in the sdist).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from skillbench.base import artifacts
from skillbench.base.errors import SkillbenchError

MAX_SDIST_BYTES = 64 * 1024 * 1024
MAX_MEMBER_BYTES = 8 * 1024 * 1024
DOWNLOAD_JOBS = 4
HISTORY_MARKER = "skillbench-release-history"
_HEADING_RULE = re.compile(r"^([-=~^\"'`#*+])\1{2,}\s*$")


class ReleaseHistoryError(SkillbenchError, ValueError):
    """The pins, a download or the repository cannot give the history; the message names the file and the fix."""


@dataclass(frozen=True)
class Release:
    """One pinned release: its version, sdist file name and digest, and the releases it stands in for (listed in
    the pins as skipped: their entries join its commit message)."""

    version: str
    file: str
    sha256: str
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReleasePins:
    """What a pin file says: the package, where its licence and changelog are in each sdist, what to leave out,
    the build backends pip may use, and the releases in order."""

    source: Path
    package: str
    licence: str
    changelog: str
    generated: tuple[str, ...]
    build_constraints: tuple[str, ...]
    releases: tuple[Release, ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.read_bytes()).hexdigest()


def read_pins(path: Path) -> ReleasePins:
    document = artifacts.read_artifact(path, "release-history")
    releases = tuple(
        Release(
            version=entry["version"],
            file=entry["file"],
            sha256=entry["sha256"],
            skipped=tuple(entry.get("skipped", ())),
        )
        for entry in document["releases"]
    )
    versions = [release.version for release in releases]
    if len(set(versions)) != len(versions):
        raise ReleaseHistoryError(f"{path}: releases: a version is listed twice; list each release once, in order")
    return ReleasePins(
        source=path,
        package=document["package"],
        licence=document["licence"],
        changelog=document["changelog"],
        generated=tuple(document["generated"]),
        build_constraints=tuple(document["build_constraints"]),
        releases=releases,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_command(pins: ReleasePins, release: Release, folder: Path, python: str) -> list[str]:
    """pip download of one pinned sdist into `folder` (its requirement and build constraints written there), in
    Bubblewrap: the host read-only, `folder` the one writable path, a private tmp and home, the network kept (pip
    needs the registry)."""
    requirement = folder / "requirement.txt"
    requirement.write_text(f"{pins.package}=={release.version} --hash=sha256:{release.sha256}\n")
    constraints = folder / "build-constraints.txt"
    constraints.write_text("".join(f"{line}\n" for line in pins.build_constraints))
    pip = [python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--require-hashes"]
    pip += ["--no-cache-dir", "--build-constraint", str(constraints), "-r", str(requirement), "-d", str(folder)]
    sandbox = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    sandbox += ["--bind", str(folder), str(folder), "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    sandbox += ["--die-with-parent", "--new-session", "--setenv", "HOME", "/tmp", "--chdir", str(folder), "--"]
    return sandbox + pip


def fetch_sdist(pins: ReleasePins, release: Release, cache: Path, python: str = sys.executable) -> Path:
    """The release's sdist in `cache`, downloaded unless a copy with the pinned digest is there; refused (and not
    kept) when the registry's file is not the pinned one."""
    target = cache / release.file
    if target.is_file() and _sha256(target) == release.sha256:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as scratch:
        folder = Path(scratch).resolve()
        result = subprocess.run(
            download_command(pins, release, folder, python),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        downloaded = folder / release.file
        if result.returncode != 0 or not downloaded.is_file():
            lines = [line for line in result.stderr.splitlines() if "is ignored: it is neither" not in line]
            raise ReleaseHistoryError(
                f"{pins.source}: {pins.package} {release.version}: pip download failed: "
                f"{' '.join(lines)[-600:] or 'no ' + release.file}"
            )
        if downloaded.stat().st_size > MAX_SDIST_BYTES:
            raise ReleaseHistoryError(f"{release.file}: larger than {MAX_SDIST_BYTES} bytes")
        digest = _sha256(downloaded)
        if digest != release.sha256:
            raise ReleaseHistoryError(
                f"{pins.source}: {release.file} from the registry has SHA-256 {digest}, not the pinned "
                f"{release.sha256}: not kept (the registry's file is not the one pinned)"
            )
        os.replace(downloaded, target)
    return target


def fetch_all(pins: ReleasePins, cache: Path, python: str = sys.executable) -> list[Path]:
    """Every pinned sdist, a few downloads at a time (each is mostly waiting on the registry and pip's build env)."""
    with ThreadPoolExecutor(DOWNLOAD_JOBS) as pool:
        return list(pool.map(lambda release: fetch_sdist(pins, release, cache, python), pins.releases))


@dataclass(frozen=True)
class Unpacked:
    """A release's files (path below its top folder -> (bytes, executable)) and when it was built (the newest
    member's time, as git reads a date: the commit's date)."""

    files: dict[str, tuple[bytes, bool]]
    date: str


def unpack(sdist: Path, generated: Sequence[str]) -> Unpacked:
    """The release's files, without the generated ones; refused when a member is not a regular file or folder, or
    lies outside the release's top folder."""
    files: dict[str, tuple[bytes, bool]] = {}
    newest = 0
    with tarfile.open(sdist, "r:*") as archive:
        for member in archive.getmembers():
            parts = PurePosixPath(member.name).parts
            if member.isdir() or len(parts) < 2:
                continue
            if not member.isfile():
                raise ReleaseHistoryError(f"{sdist.name}: {member.name} is not a regular file; refusing the archive")
            relative = PurePosixPath(*parts[1:])
            if relative.is_absolute() or ".." in relative.parts or ".git" in relative.parts:
                raise ReleaseHistoryError(f"{sdist.name}: {member.name} lies outside the release's folder")
            if any(fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in generated):
                continue
            if member.size > MAX_MEMBER_BYTES:
                raise ReleaseHistoryError(f"{sdist.name}: {member.name} is larger than {MAX_MEMBER_BYTES} bytes")
            handle = archive.extractfile(member)
            assert handle is not None
            files[relative.as_posix()] = (handle.read(), bool(member.mode & 0o111))
            newest = max(newest, int(member.mtime))
    return Unpacked(files, f"{newest} +0000")


def changelog_entry(text: str, version: str) -> str:
    """The section of an RST or Markdown changelog whose heading is `version` (or starts with it), without the
    heading; empty when there is none."""
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (first line of the heading, first line after it, title)
    for index, line in enumerate(lines):
        if index + 1 < len(lines) and line.strip() and _HEADING_RULE.match(lines[index + 1]):
            headings.append((index, index + 2, line.strip()))
        elif line.startswith("#"):
            headings.append((index, index + 1, line.lstrip("#").strip()))
    for position, (_start, body, title) in enumerate(headings):
        words = re.split(r"[\s(:,]+", title.lstrip("vV"))
        if words and words[0] in (version, f"v{version}"):
            end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
            return "\n".join(lines[body:end]).strip()
    return ""


def commit_message(pins: ReleasePins, release: Release, files: dict[str, tuple[bytes, bool]]) -> str:
    """`<package> <version>` and the release's changelog entry, then those of the releases it stands in for."""
    payload = files.get(pins.changelog, (b"", False))[0].decode("utf-8", "replace")
    sections = []
    for version in (release.version, *release.skipped):
        entry = changelog_entry(payload, version)
        if entry:
            sections.append(entry if version == release.version else f"{version}:\n\n{entry}")
    body = "\n\n".join(sections) or f"(the sdist's {pins.changelog} has no entry for {release.version})"
    return f"{pins.package} {release.version}\n\n{body}\n"


def _git(repo: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env=env or _git_env(),
    )
    if result.returncode != 0:
        raise ReleaseHistoryError(f"{repo}: git {' '.join(args[:2])} failed: {result.stderr.strip()[-400:]}")
    return result.stdout.strip()


def _git_env(date: str | None = None) -> dict[str, str]:
    """No user or system git config, a fixed identity: the same pins make the same commits everywhere."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "PyPI release",
        "GIT_AUTHOR_EMAIL": "release@pypi.invalid",
        "GIT_COMMITTER_NAME": "skillbench release history",
        "GIT_COMMITTER_EMAIL": "history@skillbench.invalid",
        "LC_ALL": "C",
    }
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return env


def _write_tree(work: Path, files: dict[str, tuple[bytes, bool]]) -> None:
    for child in work.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for relative, (payload, executable) in files.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
        path.chmod(0o755 if executable else 0o644)


def build_history(pins: ReleasePins, repo: Path, cache: Path, python: str = sys.executable) -> str:
    """Make `repo` (a new git repository on branch `main`) with one commit per pinned release; return its HEAD.
    A repository this function already made from the same pins is kept as it is; any other folder is refused."""
    marker = repo / ".git" / HISTORY_MARKER
    if repo.exists():
        if marker.is_file() and json.loads(marker.read_text()).get("pins") == pins.digest:
            return _git(repo, "rev-parse", "HEAD")
        raise ReleaseHistoryError(
            f"{repo}: the folder exists and was not made from {pins.source} as it is now; remove it (and the suite "
            "mined from it) to build it again"
        )
    sdists = fetch_all(pins, cache, python)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=repo.parent if repo.parent.exists() else None))
    try:
        _git(work, "init", "-q", "-b", "main")
        for release, sdist in zip(pins.releases, sdists, strict=True):
            unpacked = unpack(sdist, pins.generated)
            if pins.licence not in unpacked.files:
                raise ReleaseHistoryError(f"{sdist.name}: holds no {pins.licence}; the history must keep the licence")
            _write_tree(work, unpacked.files)
            env = _git_env(unpacked.date)
            message = commit_message(pins, release, unpacked.files)
            _git(work, "add", "-A", env=env)
            _git(work, "commit", "-q", "--allow-empty", "-F", "-", stdin=message, env=env)
        artifacts.atomic_write_text(work / ".git" / HISTORY_MARKER, json.dumps({"pins": pins.digest}) + "\n")
        repo.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work, repo)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _git(repo, "rev-parse", "HEAD")


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m skillbench.tasksupply.releases PINS REPO SDIST_CACHE", file=sys.stderr)
        return 2
    pins_path, repo, cache = (Path(value) for value in argv)
    try:
        pins = read_pins(pins_path)
        head = build_history(pins, repo, cache)
    except (artifacts.ArtifactError, ReleaseHistoryError, OSError) as exc:
        print(f"release history: {exc}", file=sys.stderr)
        return 1
    print(f"{repo}: {len(pins.releases)} releases of {pins.package} as commits on main (HEAD {head[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
