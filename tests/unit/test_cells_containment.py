"""What a cell measures host-side in an agent's workspace: bounded, and never the agent's way out."""

from __future__ import annotations

import os

import pytest
from skillbench.base.artifacts import remove_tree
from skillbench.execution import repo, workspace
from skillbench.execution.failures import AgentWorkspaceError
from skillbench.execution.workspace import WorkspaceLimits
from skillbench.grading import masks

SMALL = WorkspaceLimits(max_file_bytes=1 << 20, max_total_bytes=4 << 20, max_entries=50)


def test_a_huge_sparse_file_is_oversized_without_being_read(tmp_path):
    (tmp_path / "app.py").write_text("print('hi')\n")
    with open(tmp_path / "big", "wb") as handle:
        handle.truncate(64 << 30)  # 64 GiB, no blocks: reading it whole was a MemoryError
    with pytest.raises(AgentWorkspaceError) as caught:
        workspace.workspace_snapshot(tmp_path, SMALL)
    assert caught.value.kind == "workspace-oversized" and "big is 68719476736 bytes" in str(caught.value)
    with pytest.raises(AgentWorkspaceError, match="big"):
        workspace.check_workspace(tmp_path, SMALL)


def test_total_size_entry_count_and_depth_are_bounded(tmp_path):
    for index in range(5):
        (tmp_path / f"part{index}").write_bytes(b"x" * (1 << 20))
    with pytest.raises(AgentWorkspaceError, match="exceeds 4194304 bytes"):
        workspace.check_workspace(tmp_path, SMALL)
    many = tmp_path / "many"
    many.mkdir()
    for index in range(60):
        (many / str(index)).touch()
    with pytest.raises(AgentWorkspaceError, match="more than 50 entries"):
        workspace.check_workspace(many, SMALL)
    deep = tmp_path / "deep"
    deep.mkdir()
    os.chdir(deep)
    try:
        for _ in range(workspace.MAX_DEPTH + 5):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(tmp_path)
    with pytest.raises(AgentWorkspaceError, match="nest deeper"):
        workspace.check_workspace(deep, WorkspaceLimits.default())
    # pytest's own clean-up of old tmp folders recurses and would fail on a tree this deep in a later session.
    remove_tree(deep)


def test_snapshot_skips_only_the_top_level_git_and_hashes_in_chunks(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "blob").write_bytes(os.urandom(3 * workspace.HASH_CHUNK_BYTES + 7))
    snapshot = workspace.workspace_snapshot(tmp_path, WorkspaceLimits.default())
    assert ".git" not in snapshot and ".git/HEAD" not in snapshot and "sub/.git" in snapshot
    import hashlib

    assert snapshot["blob"].endswith(hashlib.sha256((tmp_path / "blob").read_bytes()).hexdigest())


def test_a_fifo_in_the_workspace_never_blocks_the_snapshot(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    assert workspace.workspace_snapshot(tmp_path, SMALL)["pipe"].startswith("s:")


@pytest.mark.parametrize(
    ("path", "grader"),
    [
        ("conftest.py", True),
        ("tests/conftest.py", True),
        ("pytest.ini", True),
        ("pyproject.toml", True),
        ("sub/setup.cfg", True),
        ("tox.ini", True),
        ("sitecustomize.py", True),
        ("a/b/evil.pth", True),
        ("pkg.dist-info/entry_points.txt", True),
        ("calc.py", False),
        ("conftest.py.bak", False),
        ("docs/pytest.md", False),
    ],
)
def test_grader_config_paths(path, grader):
    assert masks.is_grader_config(path) is grader


def test_grader_config_changes_are_masked_for_the_oracle(tmp_path):
    clone, saved = tmp_path / "clone", tmp_path / "saved"
    clone.mkdir()
    (clone / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (clone / "setup.cfg").write_text("[metadata]\n")
    (clone / "tox.ini").write_text("[tox]\n")
    before = masks.save_grader_config(clone, saved, SMALL)
    (clone / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '--collect-only'\n")
    (clone / "conftest.py").write_text("import os; os._exit(0)\n")
    (clone / "setup.cfg").unlink()
    (clone / "tox.ini").unlink()
    (clone / "tox.ini").mkdir()
    empty = tmp_path / "empty"
    empty.touch()
    binds, changes, unmaskable = masks.grader_config_masks(clone, saved, before, SMALL, empty)
    assert sorted(binds) == sorted([(empty, "conftest.py"), (saved / "pyproject.toml", "pyproject.toml")])
    assert (saved / "pyproject.toml").read_text() == "[project]\nname = 'x'\n"
    assert changes == [
        "conftest.py (added)",
        "pyproject.toml (modified)",
        "setup.cfg (deleted)",
        "tox.ini (no longer a regular file)",
    ]
    assert unmaskable == ["tox.ini"]


def test_python_start_up_files_left_in_a_home_are_named(tmp_path):
    site = tmp_path / ".local" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "zz.pth").write_text("import os\n")
    (site / "sitecustomize.py").write_text("import os\n")
    (tmp_path / ".bashrc").write_text("")
    assert masks.python_startup_files(tmp_path) == [
        ".local/lib/python3.11/site-packages/sitecustomize.py",
        ".local/lib/python3.11/site-packages/zz.pth",
    ]


def test_git_metadata_says_what_a_session_did_to_the_clones_repository(tmp_path):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "config").write_text("[core]\n")
    before = repo.git_metadata(tmp_path)
    assert repo.git_head_problem(tmp_path) is None
    (tmp_path / ".git" / "config").write_text("[core]\n\tfsmonitor = /workspace/steal.sh\n")
    (tmp_path / ".git" / "hooks" / "post-index-change").write_text("#!/bin/sh\n")
    assert repo.git_metadata_changes(before, repo.git_metadata(tmp_path)) == [
        ".git/config",
        ".git/hooks/post-index-change",
    ]
    (tmp_path / ".git" / "HEAD").write_text("garbage\n")
    assert repo.git_head_problem(tmp_path) == "the clone's .git/HEAD is neither a ref nor a commit id"
    (tmp_path / ".git" / "HEAD").unlink()
    (tmp_path / ".git" / "HEAD").symlink_to("/etc/passwd")
    assert "not a regular file" in repo.git_head_problem(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / ".git")
    assert repo.git_head_problem(tmp_path) == "the clone's .git was deleted"


def test_a_tree_nested_past_pythons_recursion_limit_is_still_removed(tmp_path):
    root = tmp_path / "private"
    root.mkdir()
    os.chdir(root)
    try:
        for _ in range(1500):
            os.mkdir("d")
            os.chdir("d")
        os.chmod(".", 0o500)
    finally:
        os.chdir(tmp_path)
    remove_tree(root)
    assert not root.exists()


def test_what_the_agent_does_to_its_cell_is_counted_never_excluded_retried_or_an_outage():
    from skillbench.base.artifacts import load_schema
    from skillbench.base.records import EXCLUDED_ERROR_KINDS, LIMIT_ERROR_KINDS, SYSTEMIC_ERROR_KINDS

    kinds = load_schema("result-row")["properties"]["error_kind"]["enum"]
    assert {"memory-limit-exceeded", "output-limit-exceeded", "session-timeout", "model-unpriced"} <= LIMIT_ERROR_KINDS
    for kind in {"workspace-oversized", "workspace-tampered", *LIMIT_ERROR_KINDS}:
        # Not excluded from the evidence, not retried (a retry is asked for only by a systemic kind), not an outage.
        assert kind in kinds and kind not in EXCLUDED_ERROR_KINDS and kind not in SYSTEMIC_ERROR_KINDS
