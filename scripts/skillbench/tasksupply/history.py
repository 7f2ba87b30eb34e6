"""A repository's history as task candidates, and the refs the miner owns in it.

Every read goes through `repo.open_target` (a harness-owned git directory that borrows the repository's objects:
git never reads its config, attributes, hooks or filters). The miner writes exactly two kinds of thing into the
user's repository: a pack of the commits and trees it made (into `objects/pack/`) and loose ref files under
`refs/skillbench/`. It never runs git there, and never touches a branch, the index or the work tree.

A candidate is a first-parent commit that changes both source files and test files. Its base is the commit with
its source and test changes undone (every other change kept); its solution is the commit with only its test
changes undone, so the base-to-solution diff holds nothing but the source change.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from skillbench.base.errors import SkillbenchError
from skillbench.execution import repo

MINED_REF_ROOT = repo.MINED_REF_PREFIX
SOURCE_SUFFIXES = (".py",)
TEST_FOLDERS = ("tests", "test", "testing")
_TEST_NAME = re.compile(r"^(test_.*\.py|.*_test\.py|conftest\.py)$")
_SLUG_WORD = re.compile(r"[a-z0-9]+")
ZERO_SHA = re.compile(r"^0+$")
MAX_LISTING_BYTES = 64 * 1024 * 1024


class MiningError(SkillbenchError, ValueError):
    """The repository or the range cannot be mined; the message names the option, the problem and the fix."""


@dataclass(frozen=True)
class FileChange:
    """One path a commit changed against its first parent (modes and blob ids on both sides; zeros: absent)."""

    path: str
    old_mode: str
    old_sha: str
    new_mode: str
    new_sha: str

    @property
    def added(self) -> bool:
        return bool(ZERO_SHA.match(self.old_sha))

    @property
    def deleted(self) -> bool:
        return bool(ZERO_SHA.match(self.new_sha))


@dataclass(frozen=True)
class Commit:
    """A first-parent commit: its id, first parent, message and what it changed, sorted into source and tests."""

    sha: str
    parent: str | None
    subject: str
    body: str
    source: list[FileChange] = field(default_factory=list)
    tests: list[FileChange] = field(default_factory=list)
    other: list[FileChange] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.sha[:10]


def is_test_path(path: str) -> bool:
    """A test file: under a tests/test/testing folder, or named like a pytest test module or conftest."""
    parts = PurePosixPath(path).parts
    return any(part in TEST_FOLDERS for part in parts[:-1]) or bool(_TEST_NAME.match(parts[-1]))


def is_source_path(path: str, globs: Sequence[str] = ()) -> bool:
    """A source file: a Python module that is not a test (and matches one of `globs` when any are given)."""
    if is_test_path(path) or not path.endswith(SOURCE_SUFFIXES):
        return False
    return not globs or any(fnmatch.fnmatch(path, pattern) for pattern in globs)


def check_repository(source: Path) -> repo.TargetLayout:
    """The repository's layout, or a MiningError for what cannot be mined: not a repository, a shallow clone."""
    try:
        layout = repo.locate_target(source)
    except repo.TargetRepositoryError as exc:
        raise MiningError(f"--repo {source}: {exc}") from exc
    if (layout.common_dir / "shallow").exists():
        raise MiningError(
            f"--repo {source}: a shallow clone (its {layout.common_dir / 'shallow'} cuts the history); mining walks "
            "the history: run `git fetch --unshallow` in it first"
        )
    return layout


def dirty_warning(reader: repo.TargetReader) -> str | None:
    """A warning when the work tree has uncommitted changes (mining reads commits, so they are left out)."""
    try:
        head = reader.resolve("HEAD")
        changes = reader.work_tree_changes(head)
    except repo.GitError:
        return None
    if changes is None or not (changes.changed or changes.untracked):
        return None
    shown = ", ".join((changes.changed + changes.untracked)[:3])
    count = len(changes.changed) + len(changes.untracked)
    return (
        f"warning: --repo {reader.layout.source}: the work tree has {count} uncommitted change(s) ({shown}); mining "
        "reads commits, not the work tree, so they are not part of any task"
    )


def first_parent_commits(reader: repo.TargetReader, *, since: str | None, until: str | None) -> list[str]:
    """Commit ids of the first-parent history from `until` (default HEAD) back to, not including, `since`; newest
    first."""
    tip = reader.resolve(until or "HEAD")
    args = ["rev-list", "--first-parent", tip]
    if since:
        args.append(f"^{reader.resolve(since)}")
    result = reader.git(args, capture_stdout_bytes=MAX_LISTING_BYTES)
    if not result.ok or result.stdout_capture is None:
        raise MiningError(f"--repo {reader.layout.source}: cannot list its history: {result.stderr_tail[-300:]}")
    return result.stdout_capture.decode().split()


def read_commit(reader: repo.TargetReader, sha: str, globs: Sequence[str] = ()) -> Commit:
    """A commit's parent, message and changes against its first parent, sorted into source, tests and the rest."""
    meta = reader.git(["show", "-s", "--format=%P%x00%s%x00%b", sha], capture_stdout_bytes=1 << 20)
    if not meta.ok or meta.stdout_capture is None:
        raise MiningError(f"cannot read commit {sha[:12]}: {meta.stderr_tail[-300:]}")
    parents, subject, body = (meta.stdout_capture.decode("utf-8", "replace").split("\0", 2) + ["", ""])[:3]
    parent = parents.split()[0] if parents.split() else None
    commit = Commit(sha=sha, parent=parent, subject=subject.strip(), body=body.strip())
    if parent is None:
        return commit
    listing = reader.git(
        ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", parent, sha], capture_stdout_bytes=MAX_LISTING_BYTES
    )
    if not listing.ok or listing.stdout_capture is None:
        raise MiningError(f"cannot list the changes of {sha[:12]}: {listing.stderr_tail[-300:]}")
    fields = listing.stdout_capture.decode("utf-8", "surrogateescape").split("\0")
    for index in range(0, len(fields) - 1, 2):
        meta_line, path = fields[index], fields[index + 1]
        old_mode, new_mode, old_sha, new_sha, _status = meta_line.lstrip(":").split(" ")
        change = FileChange(path, old_mode, old_sha, new_mode, new_sha)
        if is_test_path(path):
            commit.tests.append(change)
        elif is_source_path(path, globs):
            commit.source.append(change)
        else:
            commit.other.append(change)
    return commit


def task_slug(commit: Commit) -> str:
    """A task id from the commit: its short id and the first words of its subject."""
    words = _SLUG_WORD.findall(commit.subject.lower())[:6]
    return "-".join([commit.sha[:8], *words])[:72].rstrip("-")


def _tree_with(reader: repo.TargetReader, commit: str, undo: Sequence[FileChange]) -> str:
    """The tree of `commit` with each of `undo` put back as it was in the first parent (removed when added)."""
    with tempfile.TemporaryDirectory(prefix="skillbench-mine-index-") as scratch:
        index = Path(scratch) / "index"
        reader.checked("read-tree", commit, index=index)
        lines = []
        for change in undo:
            if change.added:
                lines.append(f"0 {'0' * len(change.old_sha)}\t{change.path}")
            else:
                lines.append(f"{change.old_mode} {change.old_sha}\t{change.path}")
        result = repo.target_git(
            ["--git-dir", str(reader.harness_dir), "update-index", "-z", "--index-info"],
            index=index,
            stdin_data=("\0".join(lines) + "\0").encode("utf-8", "surrogateescape"),
        )
        if not result.ok:
            raise MiningError(f"cannot build the task tree of {commit[:12]}: {result.stderr_tail[-300:]}")
        return reader.checked("write-tree", index=index).strip()


def _commit_tree(reader: repo.TargetReader, tree: str, parent: str, message: str) -> str:
    result = repo.target_git(
        ["--git-dir", str(reader.harness_dir), "commit-tree", tree, "-p", parent, "-F", "-"],
        stdin_data=message.encode("utf-8"),
    )
    sha = result.stdout_tail.strip()
    if not result.ok or not repo.SHA_PATTERN.match(sha):
        raise MiningError(f"cannot write a task commit over {parent[:12]}: {result.stderr_tail[-300:]}")
    return sha


@dataclass(frozen=True)
class TaskRefs:
    """The two refs a mined task binds: its base and its reference solution (names and commit ids), and the pack
    that brought their commits into the repository."""

    base_ref: str
    base: str
    solution_ref: str
    solution: str
    pack: str


def make_task_commits(reader: repo.TargetReader, commit: Commit) -> tuple[str, str]:
    """(base, solution) commit ids for a candidate, written in the harness's git directory only."""
    assert commit.parent is not None
    base_tree = _tree_with(reader, commit.sha, [*commit.source, *commit.tests])
    solution_tree = _tree_with(reader, commit.sha, commit.tests)
    base = _commit_tree(reader, base_tree, commit.parent, f"skillbench task base of {commit.sha}\n\n{commit.subject}\n")
    solution = _commit_tree(
        reader, solution_tree, base, f"skillbench task solution of {commit.sha}\n\n{commit.subject}\n"
    )
    return base, solution


def _owner_of(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_uid, info.st_gid


def _give(path: Path, owner: tuple[int, int]) -> None:
    if os.geteuid() == 0 and _owner_of(path) != owner:
        os.chown(path, *owner)


def publish(reader: repo.TargetReader, refs: dict[str, str], keep: Sequence[str]) -> str:
    """Copy the commits and trees behind `refs` (name -> commit id) into the repository as one pack, then write the
    ref files; return the pack's name. `keep` are commits whose objects the repository already has (the pack leaves
    them out)."""
    common = reader.layout.common_dir
    pack_dir = common / "objects" / "pack"
    pack_dir.mkdir(exist_ok=True)
    revs = "".join(f"{sha}\n" for sha in refs.values()) + "".join(f"^{sha}\n" for sha in keep)
    result = repo.target_git(
        ["--git-dir", str(reader.harness_dir), "pack-objects", "--revs", "-q", str(pack_dir / "pack")],
        stdin_data=revs.encode(),
    )
    if not result.ok:
        raise MiningError(f"cannot write the task commits into {common}: {result.stderr_tail[-300:]}")
    owner = _owner_of(common / "objects")
    name = result.stdout_tail.strip()
    for suffix in (".pack", ".idx"):
        packed = pack_dir / f"pack-{name}{suffix}"
        if packed.exists():
            _give(packed, owner)
    for ref, sha in refs.items():
        write_ref(common, ref, sha)
    return name


def write_ref(common_dir: Path, ref: str, sha: str) -> None:
    """Write one loose ref file under the miner's own namespace, atomically, owned like the repository's refs."""
    if not ref.startswith(MINED_REF_ROOT) or ".." in ref or "//" in ref or ref.endswith((".lock", "/")):
        raise MiningError(
            f"refusing to write the ref {ref!r}: the miner writes only well-formed refs under {MINED_REF_ROOT}"
        )
    owner = _owner_of(common_dir / "refs") if (common_dir / "refs").is_dir() else _owner_of(common_dir)
    path = common_dir / ref
    created = []
    for parent in reversed(path.parents):
        if parent.is_relative_to(common_dir / "refs") and not parent.exists():
            parent.mkdir()
            created.append(parent)
    for folder in created:
        _give(folder, owner)
    temporary = path.with_name(f".{path.name}.skillbench-tmp")
    temporary.write_text(f"{sha}\n")
    _give(temporary, owner)
    os.replace(temporary, path)


def task_refs(reader: repo.TargetReader, commit: Commit, namespace: str, task_id: str) -> TaskRefs:
    """Make a candidate's base and solution commits and publish them as `refs/skillbench/<namespace>/<task>/…`."""
    base, solution = make_task_commits(reader, commit)
    prefix = f"{MINED_REF_ROOT}{namespace}/{task_id}"
    names = {f"{prefix}/base": base, f"{prefix}/solution": solution}
    pack = publish(reader, names, keep=[commit.sha])
    return TaskRefs(
        base_ref=f"{prefix}/base", base=base, solution_ref=f"{prefix}/solution", solution=solution, pack=pack
    )


def withdraw(common_dir: Path, refs: TaskRefs) -> None:
    """Remove a rejected candidate's refs and the pack that held only its commits: the repository is as before."""
    for ref in (refs.base_ref, refs.solution_ref):
        (common_dir / ref).unlink(missing_ok=True)
    folder = (common_dir / refs.base_ref).parent
    while folder != common_dir / "refs" and folder.is_relative_to(common_dir / "refs"):
        try:
            folder.rmdir()
        except OSError:
            break
        folder = folder.parent
    if re.fullmatch(r"[0-9a-f]{40,64}", refs.pack):
        for suffix in (".pack", ".idx", ".rev"):
            (common_dir / "objects" / "pack" / f"pack-{refs.pack}{suffix}").unlink(missing_ok=True)
