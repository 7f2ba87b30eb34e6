"""Git plumbing: deterministic snapshot commits, sanitized templates, clones, churn and patches.

A task's template is a parentless single-commit repository with a fixed identity and
date, no refs, no remotes, no reflogs and no other objects, so nothing a session does in a
clone can recover the target's history (where a solution may live).

A task's `repo:` target is a stranger's repository, and git runs programs its config names
(filters, fsmonitor, hooks, pagers, `include.path` pulls in more). `open_target` never lets git
read the target's config, attributes or hooks: it makes a bare git directory of its own (git's
own defaults, no template) whose `objects/info/alternates` borrows the target's object store,
copies the target's ref files into it (bounded, regular files only, never through a symlink),
and runs every git command there with an environment built from nothing (`git_environment`: no
system or global config, no replace objects, no system attributes) and `TARGET_GIT_SETTINGS`
(no hooks, no fsmonitor, no attributes or excludes file). Files come out through `read-tree` and
`checkout-index` into the template; an in-tree `.gitattributes` can still name a filter or a
driver, but none is defined, so nothing runs (`text`/`eol`/`ident` conversions still apply, as
for any checkout). Committed symlinks stay symlinks in the template (git never writes through
one), and the template's sanitizer looks at `.claude` without following links. Supported
targets: a work tree with a `.git` folder, a linked worktree or submodule (a `.git` file whose
`gitdir:` names the git directory, `commondir` naming the shared one), and a bare repository;
refused: a `.git` symlink, a repository that borrows objects through its own
`objects/info/alternates`, and the reftable ref format.

Before the first session of a cell, `make_harness_git_dir` copies the clone's repository to a
harness-owned folder outside the workspace and gives it a config of its own (no hooks, info,
filters, drivers). Every git command after a session (churn, work digest, patch) uses that
copy with the clone as work tree (`Sandbox.harness_git`), never the clone's `.git`, which the
agent can rewrite or delete. In-tree `.gitattributes` files are still read (git 2.39 has no
`attr.tree`), but they can only name filters and diff drivers, and none is defined in the
harness's config, so nothing runs; they can change how a change is counted (e.g. `-diff`),
and the `.gitattributes` change is itself part of the recorded patch.
`git_metadata` fingerprints what a session could plant in the clone's `.git` so the row can
say what it did.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from skillbench.base.artifacts import path_kind, read_regular_file
from skillbench.base.errors import SkillbenchError
from skillbench.base.process import ProcessResult, run_managed

GIT_TIMEOUT_S = 120
SANITIZED_IDENTITY = {
    "GIT_AUTHOR_NAME": "skillbench",
    "GIT_AUTHOR_EMAIL": "skillbench@invalid",
    "GIT_COMMITTER_NAME": "skillbench",
    "GIT_COMMITTER_EMAIL": "skillbench@invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
SANITIZED_MESSAGE = "Sanitized benchmark task snapshot"
# Config that keeps git from running anything a repository's own files could name.
SAFE_GIT_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "gc.auto=0",
    "-c",
    "init.defaultBranch=main",
)
# The harness's own git after a session: on top of SAFE_GIT_CONFIG, no attributes or excludes
# file outside the repository, and no pager.
HARNESS_GIT_SETTINGS: tuple[tuple[str, str], ...] = (
    *((key, value) for key, _, value in (option.partition("=") for option in SAFE_GIT_CONFIG[1::2])),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
)
HARNESS_CONFIG_TEXT = (
    "# skillbench: the harness's own copy of a cell's repository; nothing in it names a program.\n"
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n"
)
# What a harness-owned copy takes from the clone's .git (objects and refs); everything else
# (config, hooks, info, logs) is the harness's own or absent.
HARNESS_GIT_KEEP = ("HEAD", "objects", "refs", "packed-refs", "index")
GIT_METADATA_ENTRIES = ("config", "hooks", "info")
# Reading a task's target repository (`open_target`): the harness's settings, plus symlinks checked out as
# symlinks and submodules never entered (their own config would be read).
TARGET_GIT_SETTINGS: tuple[tuple[str, str], ...] = (
    *HARNESS_GIT_SETTINGS,
    ("core.symlinks", "true"),
    ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"),
    ("status.relativePaths", "false"),
)
TARGET_ENVIRONMENT = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_ATTR_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0"}
MAX_REF_FILE_BYTES = 4096
MAX_PACKED_REFS_BYTES = 64 * 1024 * 1024
MAX_REF_FILES = 100_000
MAX_LISTED_CHANGES = 5
MAX_METADATA_FILE_BYTES = 1024 * 1024
MAX_METADATA_ENTRIES = 512
CLAUDE_SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json")
# Refs the task miner writes in a user's repository (`skillbench tasks mine`): its base and solution commits. The
# work tree is never expected to be at one of them, so binding one warns about nothing.
MINED_REF_PREFIX = "refs/skillbench/"
SHA_PATTERN = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")

# runner(args, capture_stdout_bytes=None) -> ProcessResult; the cell's runs git inside its sandbox.
GitRunner = Callable[..., ProcessResult]
MAX_PATCH_BYTES = 300_000
MAX_DIFF_BYTES = 64 * 1024 * 1024


class GitError(SkillbenchError, RuntimeError):
    """A git command failed or a repository is not in the state the harness requires."""


def git_environment(home: str = "/nonexistent") -> dict[str, str]:
    """A minimal environment: no user or system git config, no prompts, fixed identity."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        **SANITIZED_IDENTITY,
    }


def host_git(repo: Path, *, extra_env: dict[str, str] | None = None) -> GitRunner:
    """A runner for repositories the harness created or the user trusts (task sources, templates)."""

    def run(args: Sequence[str], capture_stdout_bytes: int | None = None) -> ProcessResult:
        env = {**git_environment(), **(extra_env or {})}
        return run_managed(
            ["git", *SAFE_GIT_CONFIG, "-C", str(repo), *args],
            env=env,
            timeout=GIT_TIMEOUT_S,
            capture_stdout_bytes=capture_stdout_bytes,
        )

    return run


def checked(git: GitRunner, *args: str) -> str:
    result = git(args)
    if not result.ok:
        parts = (result.detail, result.stderr_tail[-1000:])
        detail = "; ".join(part.strip() for part in parts if part and part.strip())
        raise GitError(f"git {' '.join(args[:3])} failed ({result.state}, exit {result.returncode}): {detail.strip()}")
    return result.stdout_tail


def resolve_commit(repo: Path, ref: str) -> str:
    """Resolve `ref` in a repository the harness or the user trusts (the skills repository) to a commit id.

    A task's target repository is read with `open_target` instead."""
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise GitError(f"task repository {repo} does not exist")
    sha = checked(host_git(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    if not SHA_PATTERN.match(sha):
        raise GitError(f"{repo}: ref {ref!r} did not resolve to a commit id (got {sha!r})")
    return sha


# ─── Reading a task's target repository ─────────────────────────────────────


class TargetRepositoryError(GitError):
    """A task's target repository cannot be read the safe way; the message names it and the fix."""


@dataclass(frozen=True)
class TargetLayout:
    """Where a target repository keeps its parts: HEAD in `git_dir`, objects and refs in `common_dir`."""

    source: Path
    work_tree: Path | None
    git_dir: Path
    common_dir: Path


@dataclass(frozen=True)
class WorkTreeChanges:
    """How a target's work tree differs from the commit being bound (tracked changes, untracked files)."""

    changed: list[str]
    untracked: list[str]


def _small_file(path: Path, what: str) -> bytes:
    return read_regular_file(path, MAX_REF_FILE_BYTES, what=what, error=TargetRepositoryError)


def _linked_git_dir(source: Path, dot_git: Path) -> Path:
    """The git directory a `.git` file (`gitdir: <path>`, a linked worktree or a submodule) names."""
    text = _small_file(dot_git, "the .git file").decode("utf-8", "replace").strip()
    if not text.startswith("gitdir: "):
        raise TargetRepositoryError(f"task repository {source}: {dot_git} is a file but not a `gitdir:` link")
    return (source / text.removeprefix("gitdir: ").strip()).resolve()


def locate_target(source: Path) -> TargetLayout:
    """The parts of the target repository at `source`, found without running git."""
    source = Path(source).expanduser().absolute()
    if path_kind(source) != "folder" and not source.is_dir():
        raise TargetRepositoryError(f"task repository {source} does not exist")
    dot_git = source / ".git"
    kind = path_kind(dot_git)
    if kind == "folder":
        work_tree: Path | None = source
        git_dir = dot_git
    elif kind == "file":
        work_tree, git_dir = source, _linked_git_dir(source, dot_git)
    elif kind == "missing" and path_kind(source / "objects") == "folder" and path_kind(source / "HEAD") == "file":
        work_tree, git_dir = None, source
    elif kind == "symlink":
        raise TargetRepositoryError(
            f"task repository {source}: .git is a symlink; name the repository it points to in `repo:` instead"
        )
    else:
        raise TargetRepositoryError(f"task repository {source} is not a git repository (no .git folder or file)")
    common_dir = git_dir
    if path_kind(git_dir / "commondir") == "file":
        shared = _small_file(git_dir / "commondir", "commondir").decode("utf-8", "replace").strip()
        common_dir = (git_dir / shared).resolve()
    for part, wanted in ((git_dir, "folder"), (git_dir / "HEAD", "file"), (common_dir / "objects", "folder")):
        if path_kind(part) != wanted:
            raise TargetRepositoryError(
                f"task repository {source}: {part} is not a {wanted}; skillbench reads a repository's HEAD, "
                "refs and objects only as a work tree's .git, a `gitdir:` link or a bare repository"
            )
    if path_kind(common_dir / "objects" / "info" / "alternates") != "missing":
        raise TargetRepositoryError(
            f"task repository {source} borrows objects from another repository ({common_dir}/objects/info/"
            "alternates); give the task a self-contained clone (`git clone --no-local` or `git repack -a -d` and "
            "remove the alternates file)"
        )
    if path_kind(common_dir / "reftable") != "missing":
        raise TargetRepositoryError(f"task repository {source} uses the reftable ref format, which is not supported")
    return TargetLayout(source=source, work_tree=work_tree, git_dir=git_dir, common_dir=common_dir)


def _ref_files(common_dir: Path) -> list[tuple[str, bytes]]:
    """(path relative to the git directory, content) of every loose ref: regular files only, bounded."""
    found: list[tuple[str, bytes]] = []
    root = common_dir / "refs"
    if path_kind(root) != "folder":
        return found
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [name for name in subdirs if path_kind(Path(directory) / name) == "folder"]
        for name in names:
            path = Path(directory) / name
            if path_kind(path) != "file":
                continue
            if len(found) >= MAX_REF_FILES:
                raise TargetRepositoryError(f"task repository {common_dir} has more than {MAX_REF_FILES} ref files")
            found.append((path.relative_to(common_dir).as_posix(), _small_file(path, "ref file")))
    return found


def _object_format(values: Sequence[bytes]) -> str:
    """sha256 when any ref holds a 64-digit object id, else sha1 (read from the refs, not from the config)."""
    return "sha256" if any(re.match(rb"^\^?[0-9a-f]{64}\b", value) for value in values) else "sha1"


def target_git(
    args: Sequence[str],
    *,
    index: Path | None = None,
    capture_stdout_bytes: int | None = None,
    stdin_data: bytes | None = None,
) -> ProcessResult:
    """git with the harness's settings and an environment built from nothing (no secret, no user config)."""
    env = {**git_environment(), **TARGET_ENVIRONMENT}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    settings = [option for key, value in TARGET_GIT_SETTINGS for option in ("-c", f"{key}={value}")]
    return run_managed(
        ["git", *settings, *args],
        env=env,
        timeout=GIT_TIMEOUT_S,
        capture_stdout_bytes=capture_stdout_bytes,
        stdin_data=stdin_data,
    )


class TargetReader:
    """A harness-owned bare git directory over a target's objects and a copy of its refs (see the module's
    docstring); every git command on the target goes through `git`."""

    def __init__(self, layout: TargetLayout, harness_dir: Path) -> None:
        self.layout = layout
        self.harness_dir = harness_dir

    def git(
        self,
        args: Sequence[str],
        *,
        work_tree: Path | None = None,
        index: Path | None = None,
        capture_stdout_bytes: int | None = None,
    ) -> ProcessResult:
        location = ["--git-dir", str(self.harness_dir), *(["--work-tree", str(work_tree)] if work_tree else [])]
        return target_git([*location, *args], index=index, capture_stdout_bytes=capture_stdout_bytes)

    def checked(self, *args: str, work_tree: Path | None = None, index: Path | None = None) -> str:
        return checked(lambda argv, **_: self.git(argv, work_tree=work_tree, index=index), *args)

    def resolve(self, ref: str) -> str:
        """`ref` (a branch, tag, `HEAD`, a commit id or a rev-parse expression over them) as a commit id."""
        result = self.git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"])
        sha = result.stdout_tail.strip()
        if not result.ok or not SHA_PATTERN.match(sha):
            raise TargetRepositoryError(
                f"task repository {self.layout.source}: ref {ref!r} does not name a commit (branches, tags, HEAD "
                "and commit ids are read from the repository's ref files; reflog forms such as @{1} are not)"
            )
        return sha

    def export(self, sha: str, destination: Path) -> None:
        """Write the files of commit `sha` into the new folder `destination`; symlinks stay symlinks."""
        destination = Path(destination).absolute()
        destination.mkdir(parents=True, exist_ok=False)
        with tempfile.TemporaryDirectory(prefix="skillbench-target-index-") as scratch:
            index = Path(scratch) / "index"
            self.checked("read-tree", sha, index=index)
            self.checked("checkout-index", "--all", "--force", work_tree=destination, index=index)

    def work_tree_changes(self, sha: str) -> WorkTreeChanges | None:
        """How the target's work tree differs from commit `sha` (None for a bare repository)."""
        if self.layout.work_tree is None:
            return None
        with tempfile.TemporaryDirectory(prefix="skillbench-target-status-") as scratch:
            index = Path(scratch) / "index"
            self.checked("read-tree", sha, index=index)
            result = self.git(
                [
                    "status",
                    "--porcelain=v1",
                    "-z",
                    "--untracked-files=normal",
                    "--ignore-submodules=all",
                    "--no-renames",
                ],
                work_tree=self.layout.work_tree,
                index=index,
                capture_stdout_bytes=16 * 1024 * 1024,
            )
        if not result.ok or result.stdout_capture is None:
            raise TargetRepositoryError(
                f"task repository {self.layout.source}: cannot compare its work tree with {sha[:12]}: "
                f"{(result.detail or result.stderr_tail or '').strip()[-300:]}"
            )
        changed: list[str] = []
        untracked: list[str] = []
        for entry in result.stdout_capture.decode("utf-8", "replace").split("\0"):
            if len(entry) > 3:
                (untracked if entry.startswith("??") else changed).append(entry[3:])
        return WorkTreeChanges(changed=changed, untracked=untracked)


@dataclass(frozen=True)
class TargetRefs:
    """A target's HEAD, loose refs ((path, content) relative to the git directory) and packed-refs."""

    head: bytes
    loose: list[tuple[str, bytes]]
    packed: bytes

    def values(self) -> list[bytes]:
        return [self.head, *(content for _, content in self.loose), *self.packed.splitlines()]


def read_target_refs(layout: TargetLayout) -> TargetRefs:
    """The target's HEAD (from its own git directory) and refs (from the shared one), bounded, no-follow."""
    head = _small_file(layout.git_dir / "HEAD", "HEAD")
    if not _HEAD_CONTENT.match(head):
        raise TargetRepositoryError(f"task repository {layout.source}: HEAD is neither a ref nor a commit id")
    packed = b""
    if path_kind(layout.common_dir / "packed-refs") == "file":
        packed = read_regular_file(
            layout.common_dir / "packed-refs", MAX_PACKED_REFS_BYTES, what="packed-refs", error=TargetRepositoryError
        )
    return TargetRefs(head=head, loose=_ref_files(layout.common_dir), packed=packed)


def _write_refs(refs: TargetRefs, harness_dir: Path) -> None:
    (harness_dir / "HEAD").write_bytes(refs.head)
    (harness_dir / "packed-refs").write_bytes(refs.packed)
    for relative, content in refs.loose:
        path = harness_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


@contextmanager
def open_target(source: Path) -> Iterator[TargetReader]:
    """A `TargetReader` over the repository at `source`; its git directory is removed when the block ends."""
    layout = locate_target(source)
    refs = read_target_refs(layout)
    with tempfile.TemporaryDirectory(prefix="skillbench-target-") as scratch:
        harness_dir = Path(scratch) / "git"
        init = ["init", "--quiet", "--bare", "--template=", f"--object-format={_object_format(refs.values())}"]
        result = target_git([*init, str(harness_dir)])
        if not result.ok:
            raise TargetRepositoryError(
                f"cannot prepare a git directory to read {layout.source}: {(result.detail or result.stderr_tail)}"
            )
        harness_dir.chmod(0o700)
        _write_refs(refs, harness_dir)
        (harness_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (harness_dir / "objects" / "info" / "alternates").write_text(f"{layout.common_dir / 'objects'}\n")
        yield TargetReader(layout, harness_dir)


def commit_tree_as_template(work_tree: Path) -> str:
    """Turn a plain folder into a parentless, ref-free, single-commit repository; return the commit id.

    Identity, dates and message are fixed, so the same files always give the same commit id.
    """
    git = host_git(work_tree)
    checked(git, "init", "--quiet")
    checked(git, "add", "--all", "--force")
    tree = checked(git, "write-tree").strip()
    sha = checked(git, "commit-tree", tree, "-m", SANITIZED_MESSAGE).strip()
    checked(git, "update-ref", "--no-deref", "HEAD", sha)
    for ref in checked(git, "for-each-ref", "--format=%(refname)").split():
        checked(git, "update-ref", "-d", ref)
    checked(git, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    shutil.rmtree(work_tree / ".git" / "logs", ignore_errors=True)
    checked(git, "prune", "--expire=now")
    verify_sanitized(work_tree, sha)
    return sha


def verify_sanitized(repo: Path, sha: str) -> None:
    """Fail unless the repository holds exactly one parentless commit and nothing unreachable."""
    git = host_git(repo)
    head = checked(git, "rev-parse", "HEAD").strip()
    if head != sha:
        raise GitError(f"{repo}: HEAD is {head}, expected the sanitized commit {sha}")
    if checked(git, "show", "-s", "--format=%P", "HEAD").strip():
        raise GitError(f"{repo}: the sanitized commit has parents")
    if checked(git, "for-each-ref").strip() or checked(git, "remote").strip():
        raise GitError(f"{repo}: refs or remotes remain after sanitizing")
    unreachable = git(["fsck", "--full", "--no-reflogs", "--unreachable", "--no-progress"])
    if not unreachable.ok or unreachable.stdout_tail.strip():
        raise GitError(f"{repo}: git fsck found problems or unreachable objects: {unreachable.stdout_tail[-500:]}")
    if checked(git, "status", "--porcelain", "--untracked-files=all").strip():
        raise GitError(f"{repo}: the template's work tree differs from its commit")


def build_template(
    *, destination: Path, snapshot: Path | None = None, target: TargetReader | None = None, sha: str | None = None
) -> str:
    """Build the sanitized template of a task from a snapshot folder or a commit of a target repository."""
    if (snapshot is None) == (target is None):
        raise ValueError("exactly one of snapshot or target is required")
    if target is not None and sha is None:
        raise ValueError("a template from a repository needs the commit (sha)")
    if os.path.lexists(destination):
        shutil.rmtree(destination)
    if snapshot is not None:
        shutil.copytree(snapshot, destination, symlinks=True)
        if os.path.lexists(destination / ".git"):
            raise GitError(f"snapshot folder {snapshot} must not contain a .git entry")
    elif target is not None and sha is not None:
        target.export(sha, destination)
    drop_task_settings(destination)
    return commit_tree_as_template(destination)


def drop_task_settings(template: Path) -> list[str]:
    """Remove the task's own Claude Code settings from the template; return what was removed.

    A task repository's settings could point the CLI at another endpoint (settings.env) or grant it
    tools; the harness passes its own. Every step looks at the entry itself (lstat), so nothing is
    followed out of the template: a `.claude` that is a symlink or a file is refused (the cells need a
    real folder there), and a settings entry that is a symlink loses the link, never its target.
    """
    claude = template / ".claude"
    kind = path_kind(claude)
    if kind == "missing":
        return []
    if kind != "folder":
        raise GitError(
            f"the task's .claude is a {kind}, not a folder (template {template}); a committed .claude must be a "
            "real folder, since cells keep the harness's settings there: replace it in the task's commit or bind "
            "another ref"
        )
    removed = []
    for name in CLAUDE_SETTINGS_FILES:
        path = template / name
        kind = path_kind(path)
        if kind in ("file", "symlink"):
            path.unlink()
            removed.append(name)
        elif kind != "missing":
            raise GitError(f"the task's {name} is a {kind} (template {template}); remove it from the task's commit")
    return removed


SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"


def clone_template(template: Path, destination: Path) -> None:
    """A fresh, self-contained copy of the template (no shared objects, no alternates).

    Snakemake drops a timestamp file into directory outputs; it is not part of the task.
    """
    root = str(template)

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [SNAKEMAKE_TIMESTAMP] if directory == root and SNAKEMAKE_TIMESTAMP in names else []

    shutil.copytree(template, destination, symlinks=True, ignore=ignore)


def head_commit(git: GitRunner) -> str:
    sha = checked(git, "rev-parse", "HEAD").strip()
    if not SHA_PATTERN.match(sha):
        raise GitError(f"HEAD is not an immutable commit id: {sha!r}")
    return sha


def commit_all(git: GitRunner, message: str) -> bool:
    """Stage everything and commit; False when there was nothing to commit.

    The commit is tried first and the index asked only when it fails: each git call is a sandbox of its own,
    and a cell commits at least once."""
    checked(git, "add", "--all", "--force")
    if git(["commit", "--quiet", "--no-verify", "-m", message]).ok:
        return True
    if git(["diff", "--cached", "--quiet"]).ok:
        return False
    checked(git, "commit", "--quiet", "--no-verify", "-m", message)  # raises, naming why the commit failed
    return True


def pathspec(excluded: Sequence[str]) -> list[str]:
    return ["--", ".", *(f":(exclude){path}" for path in excluded)]


# One sandboxed run measures the work tree against a base: the base's commit id, the churn, and
# the binary diff (digest and patch come from it). Config comes from GIT_CONFIG_COUNT variables.
MEASURE_SCRIPT = (
    "set -e; git=$1; base=$2; shift 2; "
    '"$git" rev-parse --verify --quiet "$base^{commit}"; '
    '"$git" add --intent-to-add --all --force; '
    '"$git" diff --no-ext-diff --no-textconv --shortstat "$base" "$@"; '
    "printf '\\000'; "
    '"$git" diff --no-ext-diff --no-textconv --binary "$base" "$@"'
)


@dataclass(frozen=True)
class WorkMeasure:
    """The work tree against a base commit: churn, digest of the whole binary diff, and the bounded patch."""

    base: str
    files: int
    insertions: int
    deletions: int
    digest: str
    patch: bytes
    truncated: bool


# runner(script, args, capture_stdout_bytes) -> ProcessResult; Sandbox.harness_script makes one.
ScriptRunner = Callable[..., ProcessResult]


def measure_work(run_script: ScriptRunner, base: str, excluded: Sequence[str]) -> WorkMeasure:
    """Churn, work digest and patch of the work tree against `base` (a commit or HEAD), new files included."""
    result = run_script(MEASURE_SCRIPT, [base, *pathspec(excluded)], capture_stdout_bytes=MAX_DIFF_BYTES)
    if not result.ok or result.stdout_capture is None:
        parts = (result.detail, result.stderr_tail[-1000:])
        detail = "; ".join(part.strip() for part in parts if part and part.strip())
        raise GitError(f"git diff against {base[:12]} failed ({result.state}, exit {result.returncode}): {detail}")
    if result.stdout_capture_overflow:
        raise GitError(f"the diff against {base[:12]} exceeds {MAX_DIFF_BYTES} bytes")
    head, separator, diff = result.stdout_capture.partition(b"\0")
    lines = head.decode("utf-8", "replace").splitlines()
    if not separator or not lines or not SHA_PATTERN.match(lines[0].strip()):
        raise GitError(f"git diff against {base[:12]} gave unexpected output")
    numbers = {}
    for count, word in re.findall(r"(\d+) (file|insertion|deletion)", "\n".join(lines[1:])):
        numbers[word] = int(count)
    return WorkMeasure(
        base=lines[0].strip(),
        files=numbers.get("file", 0),
        insertions=numbers.get("insertion", 0),
        deletions=numbers.get("deletion", 0),
        digest=hashlib.sha256(diff).hexdigest(),
        patch=diff[:MAX_PATCH_BYTES],
        truncated=len(diff) > MAX_PATCH_BYTES,
    )


def config_environment(settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`git -c` settings as GIT_CONFIG_COUNT/KEY/VALUE variables (git >= 2.31), for every git a script runs."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def make_harness_git_dir(clone: Path, destination: Path) -> None:
    """Copy the clone's repository (objects, refs, HEAD, index) to `destination` with a harness-only config.

    Called before any session runs in the clone, so nothing in the copy comes from the agent.
    """
    source = Path(clone) / ".git"
    destination = Path(destination)
    destination.mkdir(mode=0o700)
    for name in HARNESS_GIT_KEEP:
        path = source / name
        if path.is_symlink():
            raise GitError(f"{path} is a symlink; the clone's repository is not the harness's")
        if path.is_dir():
            shutil.copytree(path, destination / name, symlinks=True)
        elif path.is_file():
            shutil.copy2(path, destination / name)
    (destination / "config").write_text(HARNESS_CONFIG_TEXT)


def _metadata_entry(path: Path) -> str:
    """Kind and digest of one path, without following symlinks or blocking on FIFOs; bounded."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return "special"
    if info.st_size > MAX_METADATA_FILE_BYTES:
        return f"large:{info.st_size}"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    try:
        payload = os.read(descriptor, MAX_METADATA_FILE_BYTES + 1)
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    finally:
        os.close(descriptor)
    return f"f:{stat.S_IMODE(info.st_mode):o}:{hashlib.sha256(payload).hexdigest()}"


def git_metadata(clone: Path) -> dict[str, str]:
    """Fingerprint of the clone's `.git` entries a session could use to plant programs ({} if `.git` is gone).

    Keys are paths relative to the clone (`.git` itself maps to its kind). Host-side and bounded:
    never follows a symlink, never reads more than MAX_METADATA_FILE_BYTES per file or
    MAX_METADATA_ENTRIES entries.
    """
    root = Path(clone) / ".git"
    top = _metadata_entry(root)
    entries = {".git": top}
    if top != "dir":
        return entries
    for name in GIT_METADATA_ENTRIES:
        path = root / name
        kind = _metadata_entry(path)
        entries[f".git/{name}"] = kind
        if kind != "dir":
            continue
        for directory, subdirs, files in os.walk(path):
            for child in sorted(subdirs + files):
                if len(entries) >= MAX_METADATA_ENTRIES:
                    entries[".git/…"] = "too-many-entries"
                    return entries
                full = Path(directory) / child
                entries[full.relative_to(clone).as_posix()] = _metadata_entry(full)
    return entries


def git_metadata_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths (relative to the clone) under `.git` whose fingerprint changed, sorted."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


_HEAD_CONTENT = re.compile(rb"^(ref: refs/[^\0\n]{1,400}|[0-9a-f]{40}|[0-9a-f]{64})\n?$")


def git_head_problem(clone: Path) -> str | None:
    """Why the clone's repository is unusable (`.git` gone, replaced, or HEAD not a ref or commit id), or None."""
    root = Path(clone) / ".git"
    kind = _metadata_entry(root)
    if kind == "absent":
        return "the clone's .git was deleted"
    if kind != "dir":
        return f"the clone's .git was replaced (now a {kind.split(':')[0]} entry)"
    head = root / "HEAD"
    if _metadata_entry(head).split(":")[0] != "f":
        return "the clone's .git/HEAD is missing or not a regular file"
    descriptor = os.open(head, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        content = os.read(descriptor, 1024)
    finally:
        os.close(descriptor)
    if not _HEAD_CONTENT.match(content):
        return "the clone's .git/HEAD is neither a ref nor a commit id"
    return None
