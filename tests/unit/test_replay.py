"""Replaying a reference solution through a session's own tools (`replay: solution` in a model script)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import gitenv
import pytest
from skillbench.execution import agents, replay
from skillbench.execution.scripted_model import ScriptedModel, resolve_variation

WORKSPACE = "/workspace"
OLD = "def area(width, height):\n    return width + height\n\n\ndef name():\n    return 'box'\n"
NEW = "def area(width, height):\n    return width * height\n\n\ndef name():\n    return 'box'\n"


def diff(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> bytes:
    """A real `git diff` between two trees of files."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def run(*args):
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=gitenv.GIT_ENV)

    run("init", "-q")
    for states in (before, after):
        for path in list(repo.rglob("*")):
            if path.is_file() and ".git" not in path.parts:
                path.unlink()
        for relative, text in states.items():
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            (repo / relative).write_text(text)
        run("add", "-A")
        run("commit", "-q", "--allow-empty", "-m", "state")
    return subprocess.run(["git", "-C", str(repo), "diff", "HEAD~1", "HEAD"], check=True, capture_output=True).stdout


def reader(files: dict[str, str]):
    return lambda path: files.get(path.removeprefix(f"{WORKSPACE}/"))


def test_a_hunk_whose_old_text_is_unique_becomes_one_edit(tmp_path: Path) -> None:
    patch = diff(tmp_path, {"shapes.py": OLD}, {"shapes.py": NEW})
    plan = replay.plan_replay(patch, reader({"shapes.py": OLD}), WORKSPACE)
    assert plan.reads == [f"{WORKSPACE}/shapes.py"]
    [edit] = plan.edits
    assert edit["name"] == "Edit"
    text = OLD.replace(edit["input"]["old_string"], edit["input"]["new_string"])
    assert text == NEW


def test_an_ambiguous_hunk_falls_back_to_writing_the_whole_file(tmp_path: Path) -> None:
    before = "x = 1\n" * 6 + "y = 2\n" + "x = 1\n" * 6
    after = before.replace("y = 2\n", "y = 3\n")
    twice = before + before  # the hunk's old text occurs twice
    patch = diff(tmp_path, {"a.py": twice}, {"a.py": after + before})
    plan = replay.plan_replay(patch, reader({"a.py": twice}), WORKSPACE)
    [call] = plan.edits
    assert call["name"] == "Write" and call["input"]["content"] == after + before


def test_new_deleted_and_renamed_files_are_written_and_removed(tmp_path: Path) -> None:
    before = {"old.py": "a = 1\n", "gone.py": "b = 2\n", "keep.py": OLD}
    after = {"new_name.py": "a = 1\n", "added.py": "c = 3\n", "keep.py": NEW}
    patch = diff(tmp_path, before, after)
    plan = replay.plan_replay(patch, reader(before), WORKSPACE)
    calls = [(call["name"], call["input"].get("file_path") or call["input"]["command"]) for call in plan.edits]
    assert ("Write", f"{WORKSPACE}/added.py") in calls
    assert ("Bash", "rm -f -- gone.py") in calls
    assert ("Write", f"{WORKSPACE}/new_name.py") in calls and ("Bash", "rm -f -- old.py") in calls


def test_a_binary_solution_cannot_be_replayed() -> None:
    patch = b"diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/logo.png and b/logo.png differ\n"
    with pytest.raises(replay.ReplayError, match="binary"):
        replay.parse_patch(patch)


def test_a_hunk_that_does_not_fit_the_file_is_refused(tmp_path: Path) -> None:
    patch = diff(tmp_path, {"shapes.py": OLD}, {"shapes.py": NEW})
    with pytest.raises(replay.ReplayError, match="does not fit"):
        replay.plan_replay(patch, reader({"shapes.py": "something else\n"}), WORKSPACE)


TASK = {
    "id": "area",
    "prompt": "The area of a box is wrong for width 2 and height 3.",
    "verify": "python3 -m pytest -q",
}


def steps_for(tmp_path: Path, session: dict, files: dict[str, str]) -> list[dict]:
    patch = diff(tmp_path, {"shapes.py": OLD}, {"shapes.py": NEW})
    return replay.session_steps(task=TASK, session=session, patch=patch, read_text=reader(files), workspace=WORKSPACE)


def test_a_plan_session_invokes_its_skill_and_writes_only_the_plan(tmp_path: Path) -> None:
    steps = steps_for(tmp_path, {"role": "plan", "skill": "change-plan", "plan_document": True}, {"shapes.py": OLD})
    names = [tool["name"] for step in steps for tool in step.get("tools", [])]
    assert names[0] == "Skill" and names[-1] == "Write"
    assert "Edit" not in names
    written = steps[-1]["tools"][0]["input"]
    assert written["file_path"] == f"{WORKSPACE}/docs/plans/area.md" and TASK["prompt"] in written["content"]


def test_a_work_session_reads_the_plan_edits_and_runs_verify(tmp_path: Path) -> None:
    files = {"shapes.py": OLD, "docs/plans/area.md": "# Plan\n"}
    steps = steps_for(tmp_path, {"role": "work", "skill": "change-work"}, files)
    nominal = resolve_variation(steps, variation_key=None, defaults_usage={})
    names = [tool["name"] for step in nominal for tool in step.get("tools", [])]
    assert names == ["Skill", "Read", "Read", "Edit", "Bash"]
    assert nominal[-1]["tools"][0]["input"]["command"] == TASK["verify"]


def test_runs_of_a_replayed_task_differ_like_the_demos(tmp_path: Path) -> None:
    steps = steps_for(tmp_path, {"role": "baseline"}, {"shapes.py": OLD})
    counts = {
        len(resolve_variation(steps, variation_key=f"area/baseline/run{run}/baseline", defaults_usage={}))
        for run in range(24)
    }
    assert len(counts) >= 3  # an investigation turn now and then, a second verify run now and then


def test_a_replayed_steps_file_text_is_sent_verbatim_braces_and_all() -> None:
    content = "template = '{{ name }} and {{workspace}}'\n"
    step = {"tools": [{"name": "Write", "input": {"file_path": "/w/t.py", "content": content}}], "verbatim": True}
    model = ScriptedModel([step], defaults={}, variables={"workspace": "/elsewhere"})
    [call] = model._tool_calls(0, 0, "")
    assert call.input["content"] == content


@pytest.mark.parametrize("name", sorted(agents.ADAPTERS))
def test_every_agent_cli_maps_a_replayed_edit_onto_its_own_tools(tmp_path: Path, name: str) -> None:
    adapter = agents.ADAPTERS[name]
    files = {"shapes.py": OLD}
    steps = resolve_variation(steps_for(tmp_path, {"role": "baseline"}, files), variation_key=None, defaults_usage={})
    mapped = [
        adapter.tool_form(tool["name"], tool["input"], reader(files))
        for step in steps
        for tool in step.get("tools", [])
    ]
    assert len(mapped) == 3  # read, edit, verify
    edit_name, edit_input = mapped[1]
    assert "width * height" in repr(edit_input), f"{name} lost the edit's new text ({edit_name})"


def test_is_replay_reads_only_a_replay_entry() -> None:
    script = {"tasks": {"a": {"replay": "solution"}, "b": {"work": []}}}
    assert replay.is_replay(script, "a") and not replay.is_replay(script, "b") and not replay.is_replay(None, "a")
