"""Git plumbing: deterministic snapshot commits, sanitized templates, clones, churn and patches.

A task's template is a parentless single-commit repository with a fixed identity and
date, no refs, no remotes, no reflogs and no other objects, so nothing a session does in a
clone can recover the target's history (where a solution may live).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

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
MAX_METADATA_FILE_BYTES = 1024 * 1024
MAX_METADATA_ENTRIES = 512
CLAUDE_SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json")
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
    """Resolve `ref` in a local repository to an immutable commit id."""
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise GitError(f"task repository {repo} does not exist")
    sha = checked(host_git(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    if not SHA_PATTERN.match(sha):
        raise GitError(f"{repo}: ref {ref!r} did not resolve to a commit id (got {sha!r})")
    return sha


def export_tree(repo: Path, sha: str, destination: Path) -> None:
    """Write the files of commit `sha` into `destination` without touching the source repository's state."""
    destination = Path(destination).absolute()
    destination.mkdir(parents=True, exist_ok=False)
    with tempfile.TemporaryDirectory(prefix="skillbench-index-") as scratch:
        index_env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git = host_git(Path(repo).expanduser(), extra_env=index_env)
        checked(git, "read-tree", sha)
        checked(git, "--work-tree", str(destination), "checkout-index", "--all", "--force")


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
    *, destination: Path, snapshot: Path | None = None, repo: Path | None = None, sha: str | None = None
) -> str:
    """Build the sanitized template of a task from a snapshot folder or a repository commit."""
    if (snapshot is None) == (repo is None):
        raise ValueError("exactly one of snapshot or repo is required")
    if repo is not None and sha is None:
        raise ValueError("a template from a repository needs the commit (sha)")
    if destination.exists():
        shutil.rmtree(destination)
    if snapshot is not None:
        shutil.copytree(snapshot, destination, symlinks=True)
        if (destination / ".git").exists():
            raise GitError(f"snapshot folder {snapshot} must not contain a .git entry")
    elif repo is not None and sha is not None:
        export_tree(repo, sha, destination)
    # A task repository's own Claude Code settings could point the CLI at another endpoint
    # (settings.env) or grant it tools; the harness passes its own settings, so the target's go.
    for name in CLAUDE_SETTINGS_FILES:
        path = destination / name
        if path.is_file() or path.is_symlink():
            path.unlink()
    return commit_tree_as_template(destination)


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
    """Stage everything and commit; False when there was nothing to commit."""
    checked(git, "add", "--all", "--force")
    staged = git(["diff", "--cached", "--quiet"])
    if staged.ok:
        return False
    checked(git, "commit", "--quiet", "--no-verify", "-m", message)
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
