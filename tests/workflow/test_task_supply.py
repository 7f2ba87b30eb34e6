"""Task supply through the real command, the sandbox, the agent CLI and snakemake: a small library's history is mined
into a suite that runs offline (replayed solutions), and each importer's fixture, in its real format, is imported,
checked and run for one cell.

Kept small for the suite's time budget: one mining run over the newest six commits of a small history (one task and
every kind of rejection, two candidates checked at a time; the rejection reasons are unit tests too), one sweep of
the mined task on a two-phase arm and a baseline, ONE sweep of the Harbor, SWE-bench and plugin-eval imports on the
baseline, and one of a trigger query on its own arm.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, RUN_S, Project, copy_project

sys.path.insert(0, str(REPO / "tests" / "unit"))
import minerepo  # noqa: E402

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
FIXTURES = REPO / "tests" / "workflow" / "suites" / "imports"


def skillbench(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SKILLBENCH, *args], cwd=project.root, capture_output=True, text=True, timeout=RUN_S, check=False
    )


def user_state(repo: Path) -> dict[str, str]:
    return {
        "refs": minerepo.git(repo, "for-each-ref", "refs/heads", "refs/tags"),
        "head": minerepo.git(repo, "rev-parse", "HEAD"),
        "index": (repo / ".git" / "index").read_bytes().hex(),
        "status": minerepo.git(repo, "status", "--porcelain", "--untracked-files=all"),
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return copy_project(tmp_path_factory.mktemp("supply") / "project")


@pytest.fixture(scope="module")
def mined(project: Project) -> dict:
    repo = project.root / "statkit"
    commits = minerepo.make_history(repo)
    before = user_state(repo)
    # The newest six commits (every kind of rejection, one task): two candidates checked at a time.
    since = commits["negative-total"]
    result = skillbench(
        project, "tasks", "mine", "--repo", "statkit", "--out", "tasks/mined", "--since", since, "--jobs", "2"
    )
    return {"repo": repo, "commits": commits, "before": before, "result": result}


def test_mining_turns_the_fixing_commits_into_checked_tasks_and_rejects_the_rest(project: Project, mined: dict) -> None:
    result = mined["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((project.root / "tasks/mined/mining-report.json").read_text())
    commits = mined["commits"]
    assert (report["scanned"], report["candidates"], report["accepted"]) == (6, 4, 1)
    assert [task["commit"] for task in report["tasks"]] == [commits["round-half"]]
    reasons = {item["commit"]: item["reason"] for item in report["rejections"]}
    assert reasons[commits["clamp-feature"]] == "only-collection-errors"
    assert reasons[commits["leaky-fix"]] == "prompt-leaked-fix"
    assert reasons[commits["refactor"]] == "no-fail-to-pass"
    assert reasons[commits["docs"]] == "no-test-change" and reasons[commits["tests-only"]] == "no-source-change"
    # The user's branches, index and work tree are as they were; the miner's refs are all it added.
    assert user_state(mined["repo"]) == mined["before"]
    refs = minerepo.git(mined["repo"], "for-each-ref", "--format=%(refname)", "refs/skillbench").split()
    assert len(refs) == 2 and all(ref.startswith("refs/skillbench/mined/") for ref in refs)
    # The prompts were written by the (offline) issue session, and never quote a line the solution adds.
    suite = yaml.safe_load((project.root / "tasks/mined/tasks.yaml").read_text())["tasks"]
    for task in suite:
        assert task["prompt"].startswith("# ") and "return total(values) / len(values)" not in task["prompt"]
    assert list((project.root / "tasks/mined/mining-sessions").glob("*/transcripts/issue-*.jsonl"))
    # The last line names the commands that check and size the suite, and they work as printed.
    check, estimate = (line.split("next:")[-1].strip() for line in result.stdout.strip().splitlines()[-2:])
    checked = subprocess.run(shlex.split(check), cwd=project.root, capture_output=True, text=True, timeout=RUN_S)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("solution: verify and oracle pass") == 1
    sized = subprocess.run(shlex.split(estimate), cwd=project.root, capture_output=True, text=True, timeout=RUN_S)
    assert sized.returncode == 0 and "tasks reach 80% power" in sized.stdout and "the suite has 1" in sized.stdout


IMPORTS_SUITE = "tasks/imports"


@pytest.fixture(scope="module")
def imported(project: Project, mined: dict) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every importer's fixture, imported and checked (the checks are part of each import)."""
    instances = project.root / "instances.json"
    instances.write_text(json.dumps([minerepo.swebench_instance(mined["repo"], mined["commits"])]))
    evals = FIXTURES / "skill-creator/change-plan/evals/evals.json"
    return {
        "harbor": skillbench(
            project, "tasks", "import", "--harbor", str(FIXTURES / "harbor/word-count"), "--out", "tasks/harbor"
        ),
        "swe": skillbench(
            project, "tasks", "import", "--swebench", "instances.json", "--repo", "statkit", "--out", "tasks/swe"
        ),
        "plugin": skillbench(
            project, "tasks", "import", "--plugin-eval", str(FIXTURES / "plugin-eval/evals"), "--out", "tasks/plugin"
        ),
        "triggers": skillbench(project, "tasks", "import", "--skill-creator", str(evals), "--out", "tasks/triggers"),
    }


def merge_suites(project: Project, parts: dict[str, str], out: str) -> None:
    """One suite holding the tasks of several made suites (each suite's files copied under its own folder, the
    suite-relative paths moved with them, their model scripts joined), so one sweep runs them all."""
    folder = project.root / out
    tasks: list[dict] = []
    script: dict = {}
    for name, source in parts.items():
        shutil.copytree(project.root / source, folder / name)
        model = yaml.safe_load((project.root / source / "model-script.yaml").read_text())
        script = {**model, "tasks": {**script.get("tasks", {}), **model["tasks"]}}
        for task in yaml.safe_load((project.root / source / "tasks.yaml").read_text())["tasks"]:
            if "snapshot" in task:
                task["snapshot"] = f"{name}/{task['snapshot']}"
            for item in task.get("oracle", {}).get("files", []):
                item["source"] = f"{name}/{item['source']}"
            if "patch" in task.get("solution", {}):
                task["solution"]["patch"] = f"{name}/{task['solution']['patch']}"
            tasks.append(task)
    (folder / "tasks.yaml").write_text(yaml.safe_dump({"tasks": tasks}, sort_keys=False))
    (folder / "model-script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))


@pytest.fixture(scope="module")
def import_rows(project: Project, imported: dict) -> dict[str, list[dict]]:
    """ONE offline sweep of the Harbor, SWE-bench and plugin-eval imports on the baseline arm: rows by task."""
    assert all(imported[kind].returncode == 0 for kind in ("harbor", "swe", "plugin"))
    merge_suites(project, {"harbor": "tasks/harbor", "swe": "tasks/swe", "plugin": "tasks/plugin"}, IMPORTS_SUITE)
    config = project.write_config(
        {
            "experiment": "imports",
            "tasks": {"suite": f"{IMPORTS_SUITE}/tasks.yaml"},
            "runs": 1,
            "evolution": {"generations": 0},
            "selected_arms": ["baseline"],
        }
    )
    project.snakemake("results/imports/sweep/results.jsonl", "--configfile", str(config))
    rows: dict[str, list[dict]] = {}
    for row in project.rows("imports"):
        rows.setdefault(row["task"], []).append(row)
    return rows


def test_a_mined_task_runs_offline_by_replaying_its_solution_and_its_oracle_stays_hidden(
    project: Project, mined: dict
) -> None:
    assert mined["result"].returncode == 0
    [task] = yaml.safe_load((project.root / "tasks/mined/tasks.yaml").read_text())["tasks"]
    config = project.write_config(
        {
            "experiment": "mined",
            "tasks": {"suite": "tasks/mined/tasks.yaml"},
            "runs": 1,
            "evolution": {"generations": 0},
            "selected_arms": ["workflow", "baseline"],
        }
    )
    project.snakemake("results/mined/sweep/results.jsonl", "--configfile", str(config))
    rows = project.rows("mined")
    assert {(row["arm"], row["resolved"]) for row in rows} == {("workflow", True), ("baseline", True)}
    # The hidden oracle's new test is in no template a cell clones, and in no patch a session made.
    template = project.results("mined", "tasks", task["id"], "template")
    assert "keeps_the_fraction" not in (template / "tests" / "test_core.py").read_text()
    for patch in project.results("mined").glob("cells/*/*/run*/patch.diff"):
        assert "keeps_the_fraction" not in patch.read_text() and "tests/test_core.py" not in patch.read_text()


def baseline_row(rows: list[dict]) -> dict:
    [row] = [row for row in rows if row["arm"] == "baseline"]
    return row


def test_a_harbor_task_is_imported_checked_and_run(
    project: Project, imported: dict, import_rows: dict[str, list[dict]]
) -> None:
    result = imported["harbor"]
    assert result.returncode == 0, result.stderr
    assert "word-count: base: oracle fails as expected" in result.stdout
    task = yaml.safe_load((project.root / "tasks/harbor/tasks.yaml").read_text())["tasks"][0]
    assert task["setup"].startswith("python3 -c") and "pytest" in task["setup"]  # the Dockerfile's pip install
    assert "/app" not in task["prompt"]
    assert baseline_row(import_rows[task["id"]])["resolved"] is True


def test_swebench_instances_of_a_local_clone_are_imported_checked_and_run(
    imported: dict, import_rows: dict[str, list[dict]]
) -> None:
    assert imported["swe"].returncode == 0, imported["swe"].stderr
    assert baseline_row(import_rows["example-statkit-7"])["resolved"] is True


def test_plugin_eval_cases_are_imported_checked_and_run(
    project: Project, imported: dict, import_rows: dict[str, list[dict]]
) -> None:
    assert imported["plugin"].returncode == 0, imported["plugin"].stderr
    task = yaml.safe_load((project.root / "tasks/plugin/tasks.yaml").read_text())["tasks"][0]
    assert task["setup"].startswith("bash -c") and "greeting.txt" in task["verify"]
    row = baseline_row(import_rows[task["id"]])
    # No reference solution to replay: the scripted session does nothing, and the file checks say so.
    assert row["resolved"] is False and row["error_kind"] in ("verify-failed", "no-work-produced")


def test_skill_creator_trigger_queries_are_imported_checked_and_run(project: Project, imported: dict) -> None:
    assert imported["triggers"].returncode == 0, imported["triggers"].stderr
    tasks = yaml.safe_load((project.root / "tasks/triggers/tasks.yaml").read_text())["tasks"]
    assert [task["trigger"]["expect"] for task in tasks] == ["change-plan", None]
    document = yaml.safe_load((project.root / "tasks/triggers/experiment.yaml").read_text())
    config = project.write_config(
        {
            **document,
            "experiment": "triggers",
            "runs": 1,
            "tasks": {"suite": "tasks/triggers/tasks.yaml", "only": [tasks[0]["id"]]},
        }
    )
    project.snakemake("results/triggers/sweep/results.jsonl", "--configfile", str(config))
    [row] = project.rows("triggers")
    assert row["resolved"] is True and row["trigger"]["invoked"] == ["change-plan"]
