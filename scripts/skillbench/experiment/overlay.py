"""Candidate overlays: validation, the content digest, freezing, promotion targets, and applying to a clone.

An overlay is a folder that mirrors `.claude/skills/<skill>/…md`. It is untrusted input:
only Markdown under evolvable skills, no symlinks or hard links, names of printable UTF-8
(no control, bidi-control or other format characters), bounded in entries, files, path
length and bytes, and never byte-identical to the incumbent. Its digest frames every
(path, content) pair with 8-byte lengths, so it names the exact bytes the evidence is about.

An overlay is what every later candidate session reads, so it must never carry a hidden
oracle: `find_oracle_content` compares it with every bound oracle file (see there for the
rule), and freezing refuses a match before any cell runs.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any

from skillbench.base.artifacts import framed_digest, path_kind, read_regular_file, remove_tree, write_exclusive
from skillbench.base.errors import SkillbenchError

MAX_ENTRIES = 256
MAX_FILES = 64
MAX_PATH_BYTES = 512
MAX_TOTAL_BYTES = 4 * 1024 * 1024
OVERLAY_SKILLS_PREFIX = (".claude", "skills")
# A line of an oracle counts as its fingerprint when it is at least this long once whitespace
# runs are collapsed; shorter lines (`import pytest`, `)`, `assert x`) are common to any test.
ORACLE_LINE_MIN_CHARS = 16
# This many distinct fingerprint lines of one oracle in one file (anywhere, any indentation or
# case) is a copy; an oracle with fewer fingerprint lines leaks when all of them appear.
ORACLE_LEAK_LINES = 3
_WHITESPACE = re.compile(r"\s+")


class OverlayError(SkillbenchError, ValueError):
    """The overlay breaks a rule; the message names the overlay, the path and the fix."""


def _real_root(path: Path) -> Path:
    root = Path(path).expanduser().absolute()
    kind = path_kind(root)
    if kind == "missing":
        raise OverlayError(f"overlay {root} does not exist")
    if kind != "folder":
        raise OverlayError(f"overlay {root} must be a real directory, not a symlink or a file")
    # `..` only steps up a folder: it is written out, not refused; a symlink on the way is.
    root = Path(os.path.normpath(root))
    if root.resolve(strict=True) != root:
        link = next((parent for parent in (root, *root.parents) if parent.is_symlink()), None)
        named = f" ({link} is a symlink)" if link is not None else ""
        raise OverlayError(f"overlay path {root} passes through a symlink{named}; give its real path")
    return root


def _name_problem(name: str) -> str | None:
    """Why a file or folder name cannot be part of an overlay (None when it is fine).

    Names end up in diffs, logs, reports and commit messages: a newline forges lines there, and
    bidi controls (U+202E …) or zero-width characters make a reviewer read another name.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            kind = {
                "Cc": "a control character",
                "Cf": "a format (bidi-control or invisible) character",
                "Zl": "a line separator",
                "Zp": "a paragraph separator",
            }.get(category, "an unassigned character")
            return f"contains {kind} (U+{ord(char):04X})"
    return None


def overlay_files(overlay: Path, evolvable: list[str]) -> list[tuple[str, bytes]]:
    """Validate the overlay and return its (relative POSIX path, bytes) pairs, sorted by path."""
    root = _real_root(overlay)
    files = _listed_files(root)
    if not files:
        raise OverlayError(f"overlay {root} contains no files")
    payload: list[tuple[str, bytes]] = []
    total = 0
    for relative in sorted(files):
        _check_allowed(root, relative, evolvable)
        content = read_regular_file(
            root / relative, MAX_TOTAL_BYTES, what=f"overlay file {relative}", error=OverlayError
        )
        total += len(content)
        if total > MAX_TOTAL_BYTES:
            raise OverlayError(f"overlay {root} holds more than {MAX_TOTAL_BYTES} bytes")
        payload.append((relative, content))
    return payload


def _listed_files(root: Path) -> list[str]:
    """Every file below ``root`` (relative POSIX paths), refusing too many entries, bad names and non-files."""
    entries = 0
    files: list[str] = []
    for directory, subdirs, names in os.walk(root):
        for name in sorted(subdirs + names):
            entries += 1
            if entries > MAX_ENTRIES:
                raise OverlayError(f"overlay {root} has more than {MAX_ENTRIES} entries")
            if _is_file_entry(root, Path(directory) / name):
                files.append((Path(directory) / name).relative_to(root).as_posix())
            if len(files) > MAX_FILES:
                raise OverlayError(f"overlay {root} has more than {MAX_FILES} files")
    return files


def _is_file_entry(root: Path, path: Path) -> bool:
    """True for a regular file, False for a folder; refuse a bad name, a symlink, a special file or a hard link."""
    relative = path.relative_to(root).as_posix()
    problem = _name_problem(path.name)
    if problem:
        raise OverlayError(f"overlay {root}: the name {relative!r} {problem}; rename it to plain printable characters")
    if len(relative.encode("utf-8")) > MAX_PATH_BYTES:
        raise OverlayError(f"overlay path longer than {MAX_PATH_BYTES} bytes: {relative[:80]}…")
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OverlayError(f"overlay {root} contains a symlink: {relative}; copy the file instead")
    if stat.S_ISDIR(info.st_mode):
        return False
    if not stat.S_ISREG(info.st_mode):
        raise OverlayError(f"overlay {root} contains a special file: {relative}")
    if info.st_nlink > 1:
        raise OverlayError(
            f"overlay {root} contains a hard link: {relative} has {info.st_nlink} links; "
            "write an independent copy of the file instead"
        )
    return True


def _check_allowed(root: Path, relative: str, evolvable: list[str]) -> None:
    parts = PurePosixPath(relative).parts
    if (
        len(parts) < 4
        or parts[:2] != OVERLAY_SKILLS_PREFIX
        or parts[2] not in evolvable
        or not relative.lower().endswith(".md")
    ):
        raise OverlayError(
            f"overlay {root}: {relative} is not allowed; an overlay may only contain Markdown files under "
            f".claude/skills/<skill>/ for the evolvable skills {evolvable}"
        )


def _normalized(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().casefold()


def oracle_fingerprint(content: bytes) -> list[str]:
    """The oracle's distinctive lines, whitespace-collapsed and case-folded, without repeats."""
    lines = (_normalized(line) for line in content.decode("utf-8", errors="replace").splitlines())
    return list(dict.fromkeys(line for line in lines if len(line) >= ORACLE_LINE_MIN_CHARS))


def find_oracle_content(files: list[tuple[str, bytes]], oracles: list[tuple[str, bytes]]) -> list[str]:
    """Every (file, oracle) pair where the file carries the oracle's content, as one sentence each.

    The rule: a file leaks an oracle when it contains the oracle's whole (stripped) bytes, or when
    ORACLE_LEAK_LINES of the oracle's distinct fingerprint lines (lines of at least
    ORACLE_LINE_MIN_CHARS characters) occur anywhere in the file's whitespace-collapsed, case-folded
    text; an oracle with fewer fingerprint lines leaks when all of them occur. Matching the
    normalized text as a whole, not line by line, catches re-indentation, joined or re-wrapped
    lines, Markdown bullets and code fences around the copy. Three distinctive lines of a test is
    more than an independently written skill reproduces by accident, and less than any useful
    excerpt of one (a single assertion with its setup). The sentences name the oracle, never its
    content, so the refusal can be logged anywhere.
    """
    found: list[str] = []
    prints = [(label, content.strip(), oracle_fingerprint(content)) for label, content in oracles]
    for relative, payload in files:
        text = _normalized(payload.decode("utf-8", errors="replace"))
        for label, whole, lines in prints:
            exact = len(whole) >= ORACLE_LINE_MIN_CHARS and whole in payload
            matched = sum(1 for line in lines if line in text)
            needed = min(ORACLE_LEAK_LINES, len(lines))
            if exact or (needed and matched >= needed):
                how = "its whole content" if exact else f"{matched} of its {len(lines)} distinctive lines"
                found.append(f"{relative} holds hidden oracle {label} ({how})")
    return found


def refuse_oracle_content(files: list[tuple[str, bytes]], oracles: list[tuple[str, bytes]], where: str) -> None:
    leaks = find_oracle_content(files, oracles)
    if leaks:
        raise OverlayError(
            f"overlay {where}: {'; '.join(leaks)}. An overlay must never carry a hidden oracle "
            "(every candidate session would read it): remove that content from the overlay"
        )


def digest(files: list[tuple[str, bytes]]) -> str:
    frames: list[bytes] = []
    for relative, content in sorted(files):
        frames += [relative.encode("utf-8"), content]
    return framed_digest(frames)


def touched_skills(files: list[tuple[str, bytes]]) -> set[str]:
    return {PurePosixPath(relative).parts[2] for relative, _ in files}


def skill_relative(relative: str) -> str:
    """`.claude/skills/<skill>/<rest>` → `<skill>/<rest>`."""
    return PurePosixPath(*PurePosixPath(relative).parts[2:]).as_posix()


def require_change(files: list[tuple[str, bytes]], skills_root: Path) -> None:
    """Refuse an overlay whose every file equals the incumbent's bytes."""
    for relative, content in files:
        incumbent = Path(skills_root) / skill_relative(relative)
        if not incumbent.is_file() or incumbent.read_bytes() != content:
            return
    raise OverlayError("the candidate overlay is byte-identical to the incumbent skills; there is nothing to test")


def promotion_targets(files: list[tuple[str, bytes]], *, skills_root: str, mirrors: list[str]) -> list[str]:
    """Every file a promotion writes, repository-relative: the canonical skill file then each mirror."""
    targets: list[str] = []
    for relative, _ in files:
        rest = skill_relative(relative)
        for root in (skills_root, *mirrors):
            target = (PurePosixPath(root) / rest).as_posix()
            if target in targets:
                raise OverlayError(f"two overlay files map to the same promotion target {target}")
            targets.append(target)
    return targets


def freeze(overlay: Path, destination: Path, evolvable: list[str]) -> str:
    """Copy the validated bytes into a read-only folder (files 0400, folders 0500); return the digest."""
    files = overlay_files(overlay, evolvable)
    expected = digest(files)
    destination = Path(destination).absolute()
    if destination.exists():
        remove_tree(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".frozen-", dir=destination.parent))
    try:
        for relative, content in files:
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            write_exclusive(path, content, 0o400)
        for directory, _subdirs, _names in os.walk(staging, topdown=False):
            os.chmod(directory, 0o500)
        os.replace(staging, destination)
    except BaseException:
        remove_tree(staging)
        raise
    if digest(overlay_files(destination, evolvable)) != expected:
        raise OverlayError(f"frozen overlay {destination} does not match the digest of {overlay}")
    return expected


def write_overlay(
    frozen: Path,
    clone: Path,
    *,
    expected_digest: str | None,
    evolvable: list[str],
    skills_dir: str = "/".join(OVERLAY_SKILLS_PREFIX),
) -> str:
    """Write the overlay into a clone's skills (the caller commits it); the digest must match the frozen one.

    An overlay mirrors `.claude/skills/`; `skills_dir` is where the cell's agent finds the skills in the clone
    (`.agents/skills` for some CLIs), and each file lands there."""
    files = overlay_files(frozen, evolvable)
    actual = digest(files)
    if expected_digest is not None and actual != expected_digest:
        raise OverlayError("candidate overlay changed after it was frozen (digest mismatch)")
    for relative, content in files:
        target = clone / skills_dir / skill_relative(relative)
        for parent in reversed(target.relative_to(clone).parents):
            if str(parent) == ".":
                continue
            here = clone / parent
            if here.is_symlink():
                raise OverlayError(f"clone path {parent} is a symlink; refusing to write the overlay through it")
            here.mkdir(mode=0o700, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise OverlayError(f"clone path {relative} is not a regular file")
        temporary = target.with_name(f".{target.name}.overlay-tmp")
        temporary.write_bytes(content)
        os.replace(temporary, target)
    return actual


def overlay_summary(files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    import hashlib

    return [
        {"path": relative, "sha256": hashlib.sha256(content).hexdigest(), "bytes": len(content)}
        for relative, content in files
    ]
