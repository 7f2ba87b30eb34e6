"""A task author's mistakes are refused before any session is paid for.

Model-script mistakes fail when the workflow is parsed (no job at all); task mistakes fail in the
task's `check_task` job, which every cell of the task waits for.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import RUN_S

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
SWEEP = {"evolution": {"generations": 0}, "runs": 1}


def test_model_script_mistakes_fail_at_parse_time(project):
    script = project.root / "tasks" / "demo" / "model-script.yaml"
    original = script.read_text()

    # A broken alias: one clear line, not "not valid UTF-8 YAML" from every cell.
    broken = original.replace("money-thousands:\n    plan:", "money-thousands:\n    plan: *nowhere\n    x:", 1)
    script.write_text(broken)
    result = project.snakemake("--dry-run", check=False, config={"experiment": "alias", **SWEEP})
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "model script is not valid YAML: line" in output and "found undefined alias 'nowhere'" in output
    assert "UTF-8" not in output

    # A task-name typo: named, with the task it probably meant, and the task left without a script.
    script.write_text(original.replace("\n  money-thousands:\n", "\n  money-thousand:\n", 1))
    result = project.snakemake("--dry-run", check=False, config={"experiment": "typo", **SWEEP})
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "task `money-thousand` is not in the task suite; did you mean `money-thousands`?" in output
    assert "task `money-thousands` has no steps for role `plan` (a session of arm `workflow`)" in output
    assert not (project.root / "results").exists()


def write_authoring_suite(project) -> str:
    """A suite of five broken tasks and one sound one, on a copy of the demo project."""
    demo = project.root / "tasks" / "demo"
    suite = project.root / "tasks" / "authoring"
    shutil.copytree(demo / "project", suite / "project")
    shutil.copytree(demo / "oracles", suite / "oracles")
    shutil.copytree(demo / "solutions", suite / "solutions")
    (suite / "oracles" / "passes_test.py").write_text((demo / "project" / "tests" / "test_pricing.py").read_text())
    money = "oracles/money-thousands_oracle_test.py"
    pytest = "python3 -m pytest -q -p no:cacheprovider"

    def task(task_id, *, verify="tests/test_pricing.py", oracle=money, target="money_test.py", command=None, **extra):
        return {
            "id": task_id,
            "class": "authoring",
            "snapshot": "project",
            "prompt": "Group thousands in money.",
            "verify": f"{pytest} {verify}",
            "oracle": {
                "command": command or f'{pytest} "$SKILLBENCH_ORACLE_ROOT/{target}"',
                "files": [{"source": oracle, "target": target}],
            },
            **extra,
        }

    tasks = [
        task("sound", solution={"patch": "solutions/money-thousands.patch"}, verify_on_base="pass"),
        task("verify-fails-on-base", verify="tests/test_missing.py", verify_on_base="pass"),
        task("verify-passes-on-base", verify_on_base="fail"),
        task("oracle-passes-on-base", oracle="oracles/passes_test.py", target="passes_test.py"),
        task("oracle-cannot-run", command=f'{pytest} "$SKILLBENCH_ORACLE_ROOT/money_tset.py"'),
        task("solution-does-not-pass", solution={"patch": "solutions/bulk-discount-threshold.patch"}),
    ]
    (suite / "tasks.yaml").write_text(yaml.safe_dump({"tasks": tasks}, sort_keys=False))
    script = {
        "schema": "model-script/v1",
        "defaults": {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 10,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
            "final_text": "Done.",
        },
        "tasks": {entry["id"]: {"baseline": [{"text": "Done."}]} for entry in tasks},
    }
    (suite / "model-script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    return str(suite.relative_to(project.root) / "tasks.yaml")


def test_broken_tasks_are_refused_before_any_session(project):
    suite = write_authoring_suite(project)
    config = {"experiment": "authoring", "tasks": {"suite": suite}, "selected_arms": ["baseline"], **SWEEP}
    result = project.snakemake(config=config, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        "task verify-fails-on-base: `verify` fails on the untouched code although the task declares "
        "`verify_on_base: pass`"
    ) in output
    # The declared value is quoted as the task declares it.
    assert (
        "task verify-passes-on-base: `verify` passes on the untouched code although the task declares "
        "`verify_on_base: fail`"
    ) in output
    assert "command: python3 -m pytest -q -p no:cacheprovider tests/test_missing.py" in output
    assert "exit code: 4" in output
    assert (
        "task oracle-passes-on-base: the hidden oracle passes on the untouched code: there is nothing to fix" in output
    )
    assert "task oracle-cannot-run: the hidden oracle cannot run (pytest exit 4: usage error" in output
    assert "money_tset.py" in output  # the output tail names the file that is not there
    assert "task solution-does-not-pass: the hidden oracle fails on the reference solution" in output
    assert "No session has run." in output
    # The sound task passed its check, but no cell of any task ran: nothing was paid for.
    check = json.loads(project.results("authoring", "tasks", "sound", "check.json").read_text())
    assert check["ok"] and check["summary"].startswith("sound: base: oracle fails as expected (exit 1)")
    assert not project.results("authoring", "cells").exists()

    # The author's command says the same, one line per task, without starting a run (`check-tasks` is `check`); the
    # check the run made of the sound task is reused, as nothing it depends on changed.
    checked = subprocess.run(
        [SKILLBENCH, "check-tasks", "--configfile", str(project.root / "test-config.yaml")],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=RUN_S,
    )
    lines = [line for line in checked.stdout.splitlines() if not line.startswith(" ")]
    assert checked.returncode == 1
    assert (
        lines[0]
        == f"{project.root / 'test-config.yaml'}: experiment authoring: 6 task(s), arms baseline, 0 generation(s)"
    )
    assert "check: 5 problems" in checked.stderr
    assert lines[1:] == [
        "sound: base: oracle fails as expected (exit 1); verify passes as declared; solution: verify and oracle pass "
        "(reused: nothing it depends on changed since results/authoring/tasks/sound/check.json)",
        "verify-fails-on-base: REFUSED — `verify` fails on the untouched code although the task declares "
        "`verify_on_base: pass`",
        "verify-passes-on-base: REFUSED — `verify` passes on the untouched code although the task declares "
        "`verify_on_base: fail`",
        "oracle-passes-on-base: REFUSED — the hidden oracle passes on the untouched code: there is nothing to fix "
        "(check the oracle, or bind the task to a commit before the fix)",
        "oracle-cannot-run: REFUSED — the hidden oracle cannot run (pytest exit 4: usage error (a file that does not "
        "exist?))",
        "solution-does-not-pass: REFUSED — the hidden oracle fails on the reference solution",
    ]
