"""A task author's mistakes are refused before any session is paid for.

Model-script mistakes fail when the workflow is parsed (no job at all); task mistakes fail in the
task's `check_task` job, which every cell of the task waits for.
"""

from __future__ import annotations

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
