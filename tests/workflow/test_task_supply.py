"""Task supply through the real command, the sandbox, the agent CLI and snakemake: a small library's history is mined
into a suite that runs offline (replayed solutions), and each importer's fixture, in its real format, is imported,
checked and run for one cell.

Kept small for the suite's time budget: one mining run of an eight-commit history (the rejection reasons are unit
tests too), one sweep of one mined task on a two-phase arm and a baseline, and one cell per importer.
"""

from __future__ import annotations

import json
import shlex
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
    result = skillbench(project, "tasks", "mine", "--repo", "statkit", "--out", "tasks/mined")
    return {"repo": repo, "commits": commits, "before": before, "result": result}


def test_mining_turns_the_fixing_commits_into_checked_tasks_and_rejects_the_rest(project: Project, mined: dict) -> None:
    result = mined["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((project.root / "tasks/mined/mining-report.json").read_text())
    commits = mined["commits"]
    assert (report["scanned"], report["candidates"], report["accepted"]) == (8, 5, 2)
    assert {task["commit"] for task in report["tasks"]} == {commits["round-half"], commits["negative-total"]}
    reasons = {item["commit"]: item["reason"] for item in report["rejections"]}
    assert reasons[commits["clamp-feature"]] == "only-collection-errors"
    assert reasons[commits["leaky-fix"]] == "prompt-leaked-fix"
    assert reasons[commits["refactor"]] == "no-fail-to-pass"
    assert reasons[commits["docs"]] == "no-test-change" and reasons[commits["tests-only"]] == "no-source-change"
    # The user's branches, index and work tree are as they were; the miner's refs are all it added.
    assert user_state(mined["repo"]) == mined["before"]
    refs = minerepo.git(mined["repo"], "for-each-ref", "--format=%(refname)", "refs/skillbench").split()
    assert len(refs) == 4 and all(ref.startswith("refs/skillbench/mined/") for ref in refs)
    # The prompts were written by the (offline) issue session, and never quote a line the solution adds.
    suite = yaml.safe_load((project.root / "tasks/mined/tasks.yaml").read_text())["tasks"]
    for task in suite:
        assert task["prompt"].startswith("# ") and "return total(values) / len(values)" not in task["prompt"]
    assert list((project.root / "tasks/mined/mining-sessions").glob("*/transcripts/issue-*.jsonl"))
    # The last line names the commands that check and size the suite, and they work as printed.
    check, estimate = (line.split("next:")[-1].strip() for line in result.stdout.strip().splitlines()[-2:])
    checked = subprocess.run(shlex.split(check), cwd=project.root, capture_output=True, text=True, timeout=RUN_S)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("solution: verify and oracle pass") == 2
    sized = subprocess.run(shlex.split(estimate), cwd=project.root, capture_output=True, text=True, timeout=RUN_S)
    assert sized.returncode == 0 and "tasks reach 80% power" in sized.stdout and "the suite has 2" in sized.stdout


def test_a_mined_task_runs_offline_by_replaying_its_solution_and_its_oracle_stays_hidden(
    project: Project, mined: dict
) -> None:
    assert mined["result"].returncode == 0
    suite = yaml.safe_load((project.root / "tasks/mined/tasks.yaml").read_text())["tasks"]
    task = next(task for task in suite if task["id"].startswith(mined["commits"]["round-half"][:8]))
    config = project.write_config(
        {
            "experiment": "mined",
            "tasks": {"suite": "tasks/mined/tasks.yaml", "only": [task["id"]]},
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


def sweep_one(project: Project, out: str, experiment: str, extra: dict | None = None) -> list[dict]:
    """Run one cell of an imported suite offline (one task, one run, one arm)."""
    document = yaml.safe_load((project.root / out / "experiment.yaml").read_text())
    config = project.write_config({**document, "experiment": experiment, "runs": 1, **(extra or {})})
    project.snakemake(f"results/{experiment}/sweep/results.jsonl", "--configfile", str(config))
    return project.rows(experiment)


def test_a_harbor_task_is_imported_checked_and_run(project: Project) -> None:
    result = skillbench(
        project, "tasks", "import", "--harbor", str(FIXTURES / "harbor/word-count"), "--out", "tasks/harbor"
    )
    assert result.returncode == 0, result.stderr
    assert "word-count: base: oracle fails as expected" in result.stdout
    task = yaml.safe_load((project.root / "tasks/harbor/tasks.yaml").read_text())["tasks"][0]
    assert task["setup"].startswith("python3 -c") and "pytest" in task["setup"]  # the Dockerfile's pip install
    assert "/app" not in task["prompt"]
    [row] = sweep_one(project, "tasks/harbor", "harbor")
    assert row["resolved"] is True and row["arm"] == "baseline"


def test_swebench_instances_of_a_local_clone_are_imported_checked_and_run(project: Project, mined: dict) -> None:
    instances = project.root / "instances.json"
    instances.write_text(json.dumps([minerepo.swebench_instance(mined["repo"], mined["commits"])]))
    result = skillbench(
        project, "tasks", "import", "--swebench", "instances.json", "--repo", "statkit", "--out", "tasks/swe"
    )
    assert result.returncode == 0, result.stderr
    [row] = sweep_one(project, "tasks/swe", "swe", {"selected_arms": ["baseline"]})
    assert row["task"] == "example-statkit-7" and row["resolved"] is True


def test_plugin_eval_cases_are_imported_checked_and_run(project: Project) -> None:
    result = skillbench(
        project, "tasks", "import", "--plugin-eval", str(FIXTURES / "plugin-eval/evals"), "--out", "tasks/plugin"
    )
    assert result.returncode == 0, result.stderr
    task = yaml.safe_load((project.root / "tasks/plugin/tasks.yaml").read_text())["tasks"][0]
    assert task["setup"].startswith("bash -c") and "greeting.txt" in task["verify"]
    [row] = sweep_one(project, "tasks/plugin", "plugin")
    # No reference solution to replay: the scripted session does nothing, and the file checks say so.
    assert row["resolved"] is False and row["error_kind"] in ("verify-failed", "no-work-produced")


def test_skill_creator_trigger_queries_are_imported_checked_and_run(project: Project) -> None:
    evals = FIXTURES / "skill-creator/change-plan/evals/evals.json"
    result = skillbench(project, "tasks", "import", "--skill-creator", str(evals), "--out", "tasks/triggers")
    assert result.returncode == 0, result.stderr
    tasks = yaml.safe_load((project.root / "tasks/triggers/tasks.yaml").read_text())["tasks"]
    assert [task["trigger"]["expect"] for task in tasks] == ["change-plan", None]
    [row] = sweep_one(
        project,
        "tasks/triggers",
        "triggers",
        {"tasks": {"suite": "tasks/triggers/tasks.yaml", "only": [tasks[0]["id"]]}},
    )
    assert row["resolved"] is True and row["trigger"]["invoked"] == ["change-plan"]
