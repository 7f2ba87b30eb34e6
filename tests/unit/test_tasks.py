"""Task-suite validation: every bad input gets an error naming the task and the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from skillbench.experiment.suite import TaskError, load_suite, select_tasks, task_digests


def good_task(task_id: str = "add-flag", **overrides):
    task = {
        "id": task_id,
        "class": "trivial",
        "snapshot": "project",
        "prompt": "Add a flag.",
        "verify": "python3 -m pytest -q tests",
        "oracle": {
            "command": 'python3 -m pytest "$SKILLBENCH_ORACLE_ROOT/t.py"',
            "files": [{"source": "oracles/t.py", "target": "t.py"}],
        },
    }
    task.update(overrides)
    return task


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "main.py").write_text("print('hi')\n")
    (tmp_path / "oracles").mkdir()
    (tmp_path / "oracles" / "t.py").write_text("def test_ok():\n    assert True\n")
    return tmp_path


def write_suite(suite_dir: Path, tasks) -> Path:
    path = suite_dir / "tasks.yaml"
    path.write_text(yaml.safe_dump({"tasks": tasks}))
    return path


def assert_task_error(suite_dir: Path, tasks, *fragments: str) -> str:
    with pytest.raises(TaskError) as caught:
        load_suite(write_suite(suite_dir, tasks))
    message = str(caught.value)
    assert str(suite_dir / "tasks.yaml") in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_valid_suite_loads_with_defaults(suite_dir):
    tasks = load_suite(write_suite(suite_dir, [good_task()]))
    assert tasks[0]["id"] == "add-flag"
    assert tasks[0]["expensive"] is False


def test_duplicate_id(suite_dir):
    assert_task_error(suite_dir, [good_task(), good_task()], "task 'add-flag'", "field 'id'", "duplicate task id")


def test_bad_slug(suite_dir):
    assert_task_error(suite_dir, [good_task("bad id!")], "task 'bad id!'", "field 'id'")


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ("class", "'class' is a required property"),
        ("prompt", "'prompt' is a required property"),
        ("verify", "field 'verify': a code task needs `verify`"),
        ("oracle", "field 'oracle': a code task needs `oracle`"),
    ],
)
def test_missing_required_field(suite_dir, field, says):
    task = good_task()
    del task[field]
    assert_task_error(suite_dir, [task], "task 'add-flag'", says)


@pytest.mark.parametrize("field", ["class", "prompt", "verify"])
def test_blank_required_field(suite_dir, field):
    assert_task_error(suite_dir, [good_task(**{field: "   "})], "task 'add-flag'", f"field '{field}'", "blank")


def test_blank_oracle_command(suite_dir):
    task = good_task()
    task["oracle"]["command"] = " "
    assert_task_error(suite_dir, [task], "field 'oracle.command'", "blank")


@pytest.mark.parametrize("source", ["/etc/passwd", "../outside.py", "oracles/../oracles/t.py"])
def test_oracle_source_absolute_or_parent(suite_dir, source):
    task = good_task()
    task["oracle"]["files"][0]["source"] = source
    assert_task_error(suite_dir, [task], "field 'oracle.files[0].source'")


@pytest.mark.parametrize("target", ["/abs.py", "../t.py", ".git/hooks/pre-commit"])
def test_oracle_target_unsafe(suite_dir, target):
    task = good_task()
    task["oracle"]["files"][0]["target"] = target
    assert_task_error(suite_dir, [task], "field 'oracle.files[0].target'")


def test_more_than_eight_oracle_files(suite_dir):
    for index in range(9):
        (suite_dir / "oracles" / f"o{index}.py").write_text("")
    task = good_task()
    task["oracle"]["files"] = [{"source": f"oracles/o{i}.py", "target": f"o{i}.py"} for i in range(9)]
    assert_task_error(suite_dir, [task], "field 'oracle.files'", "at most 8")


def test_oracle_file_missing(suite_dir):
    task = good_task()
    task["oracle"]["files"][0]["source"] = "oracles/missing.py"
    assert_task_error(suite_dir, [task], "field 'oracle.files[0].source'", "does not exist")


def test_oracle_file_symlink(suite_dir):
    (suite_dir / "oracles" / "link.py").symlink_to(suite_dir / "oracles" / "t.py")
    task = good_task()
    task["oracle"]["files"][0]["source"] = "oracles/link.py"
    assert_task_error(suite_dir, [task], "field 'oracle.files[0].source'", "symlink")


def test_oracle_directory_symlink(suite_dir):
    (suite_dir / "linked").symlink_to(suite_dir / "oracles")
    task = good_task()
    task["oracle"]["files"][0]["source"] = "linked/t.py"
    assert_task_error(suite_dir, [task], "field 'oracle.files[0].source'", "symlink")


@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_non_boolean_expensive(suite_dir, value):
    assert_task_error(suite_dir, [good_task(expensive=value)], "task 'add-flag'", "field 'expensive'")


def test_no_target(suite_dir):
    task = good_task()
    del task["snapshot"]
    assert_task_error(suite_dir, [task], "field 'repo/snapshot'", "neither given")


def test_both_targets(suite_dir):
    assert_task_error(suite_dir, [good_task(repo=str(suite_dir))], "field 'repo/snapshot'", "both given")


def test_ref_without_repo(suite_dir):
    assert_task_error(suite_dir, [good_task(ref="main")], "field 'ref'")


def test_unknown_field(suite_dir):
    assert_task_error(suite_dir, [good_task(timeout=3)], "task 'add-flag'", "timeout")


def test_snapshot_must_be_a_directory(suite_dir):
    assert_task_error(suite_dir, [good_task(snapshot="nowhere")], "field 'snapshot'", "not a real directory")


def test_not_a_mapping(suite_dir):
    path = suite_dir / "tasks.yaml"
    path.write_text("- id: x\n")
    with pytest.raises(TaskError, match="mapping with a `tasks` list"):
        load_suite(path)


def test_expensive_tasks_are_skipped_and_reported(suite_dir):
    tasks = load_suite(write_suite(suite_dir, [good_task("cheap"), good_task("costly", expensive=True)]))
    selection = select_tasks(tasks, include_expensive=False)
    assert [task["id"] for task in selection.tasks] == ["cheap"]
    assert selection.skipped_expensive == ["costly"]
    everything = select_tasks(tasks, include_expensive=True)
    assert [task["id"] for task in everything.tasks] == ["cheap", "costly"]
    assert everything.skipped_expensive == []


def test_only_expensive_tasks_left_is_an_error(suite_dir):
    tasks = load_suite(write_suite(suite_dir, [good_task("costly", expensive=True)]))
    with pytest.raises(TaskError, match="no tasks selected"):
        select_tasks(tasks, include_expensive=False)


def test_only_names_unknown_task(suite_dir):
    tasks = load_suite(write_suite(suite_dir, [good_task()]))
    with pytest.raises(TaskError, match="unknown task ids"):
        select_tasks(tasks, include_expensive=False, only=["nope"])


def test_digests_change_with_the_text():
    first = task_digests(good_task())
    changed = copy.deepcopy(good_task())
    changed["prompt"] = "Add two flags."
    second = task_digests(changed)
    assert first["prompt_digest"] != second["prompt_digest"]
    assert first["verify_digest"] == second["verify_digest"]
    assert first["setup_digest"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_a_suite_that_is_not_utf8_names_the_file_line_and_fix(suite_dir):
    from skillbench.experiment.suite import TaskError, load_suite

    path = suite_dir / "tasks.yaml"
    path.write_bytes(b"tasks:\n- id: caf\xe9\n")
    with pytest.raises(TaskError) as error:
        load_suite(path)
    message = str(error.value)
    assert str(path) in message and "not UTF-8" in message and "byte 0xe9 on line 2" in message
    assert "save the task suite as UTF-8" in message
