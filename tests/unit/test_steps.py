"""Rule steps: the run summary and the harness-health failure, oracles against overlays (freeze_overlay and the
parse-time initial-overlay check), and the shims' interface."""

from __future__ import annotations

import re
from pathlib import Path


def test_a_broken_incumbent_fails_the_run_after_the_summary_is_written(tmp_path):
    import json

    import pytest
    from rowfactory import make_row
    from skillbench.base.artifacts import write_jsonl
    from skillbench.steps.evolve import HarnessHealthError, summarize_run

    rows = [make_row("t1", "workflow", run, resolved=False) for run in range(2)]
    rows += [make_row("t1", "baseline", run) for run in range(2)]
    results = tmp_path / "results.jsonl"
    write_jsonl(results, rows, "result-row")
    with pytest.raises(HarnessHealthError, match=r"\[harness-health\] incumbent arm\(s\) workflow"):
        summarize_run(
            experiment="x",
            generations_requested=0,
            arms=["workflow", "baseline"],
            runs=2,
            min_runs=2,
            results=[str(results)],
            promotions=[],
            overlays=[],
            summary_out=str(tmp_path / "summary.json"),
            markdown_out=str(tmp_path / "summary.md"),
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["broken_incumbent_arms"] == ["workflow"]
    assert "[harness-health]" in (tmp_path / "summary.md").read_text()


# ─── Oracles against overlays (freeze_overlay and the parse-time initial-overlay check) ─────────

ORACLE_TEXT = (
    b"def test_rounding_is_bankers():\n    assert round_money(0.125) == 0.12\n    assert round_money(0.135) == 0.14\n"
)


def _suite(tmp_path):
    """A task suite with one oracle, bound the way bind_task binds it (snapshot + bindings.json)."""
    import yaml
    from skillbench.base import artifacts
    from skillbench.experiment import suite as tasks
    from skillbench.grading import oracle

    suite = tmp_path / "suites" / "money"
    (suite / "oracles").mkdir(parents=True)
    (suite / "project").mkdir()
    (suite / "oracles" / "rounding_test.py").write_bytes(ORACLE_TEXT)
    task = {
        "id": "rounding",
        "class": "bug",
        "snapshot": "project",
        "prompt": "Fix rounding.",
        "verify": "true",
        "oracle": {
            "command": "pytest -q",
            "files": [{"source": "oracles/rounding_test.py", "target": "rounding_test.py"}],
        },
    }
    (suite / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [task]}))
    results = tmp_path / "results" / "exp" / "tasks"
    files = oracle.capture_oracle(suite, task["oracle"]["files"])
    oracle.write_snapshot(results / "rounding" / "oracle", files)
    binding = {
        "schema": "task-binding/v1",
        "id": "rounding",
        "class": "bug",
        "expensive": False,
        "target": "snapshot:project",
        "ref": "HEAD",
        "resolved_sha": "1" * 40,
        "sanitized_sha": "2" * 40,
        **tasks.task_digests(task),
        **oracle.oracle_binding(task["oracle"]["command"], files),
    }
    artifacts.write_artifact(
        results / "bindings.json",
        {"schema": "task-bindings/v1", "suite": str(suite), "tasks": [binding], "skipped_expensive": []},
        "task-bindings",
    )
    return suite / "tasks.yaml", results / "bindings.json", [str(results / "rounding" / "oracle")]


def _overlay(tmp_path, text: bytes):
    folder = tmp_path / "overlay" / ".claude" / "skills" / "change-work"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(b"# change-work\n\n" + text)
    return tmp_path / "overlay"


def test_freeze_overlay_refuses_an_overlay_carrying_a_bound_oracle_and_writes_nothing(tmp_path):
    import pytest
    from skillbench.experiment.overlay import OverlayError
    from skillbench.steps.evolve import bound_oracles, freeze_overlay

    _suite_path, bindings, oracle_dirs = _suite(tmp_path)
    assert bound_oracles(str(bindings), oracle_dirs) == [("rounding_test.py of task rounding", ORACLE_TEXT)]
    source = _overlay(tmp_path, b"Remember:\n" + ORACLE_TEXT.replace(b"    ", b"  - "))
    skills = {"root": ".claude/skills", "evolvable": ["change-work"], "mirrors": []}
    with pytest.raises(
        OverlayError,
        match=r"SKILL\.md holds hidden oracle rounding_test\.py of task rounding "
        r"\(3 of its 3 distinctive lines\)",
    ):
        freeze_overlay(
            skills=skills,
            candidate_arms=["candidate_workflow"],
            arm_skills={"workflow": ["change-plan", "change-work"], "baseline": []},
            generation=0,
            source=str(source),
            frozen_out=str(tmp_path / "frozen"),
            overlay_out=str(tmp_path / "overlay.json"),
            diff_out=str(tmp_path / "candidate.diff"),
            task_tools=["python3"],
            candidate_origin="model-proposer",
            proposer_model="m",
            bindings=str(bindings),
            oracle_dirs=oracle_dirs,
        )
    assert not (tmp_path / "frozen").exists() and not (tmp_path / "overlay.json").exists()


def test_a_missing_or_tampered_oracle_snapshot_is_refused(tmp_path):
    import os

    import pytest
    from skillbench.experiment.overlay import OverlayError
    from skillbench.steps.evolve import bound_oracles

    _suite_path, bindings, oracle_dirs = _suite(tmp_path)
    with pytest.raises(OverlayError, match="task rounding is bound but its oracle snapshot was not given"):
        bound_oracles(str(bindings), [])
    snapshot = tmp_path / "results" / "exp" / "tasks" / "rounding" / "oracle" / "rounding_test.py"
    os.chmod(snapshot, 0o600)
    snapshot.write_bytes(b"def test_nothing():\n    pass\n")
    with pytest.raises(OverlayError, match="oracle snapshot of task rounding is unreadable: .*no longer matches"):
        bound_oracles(str(bindings), oracle_dirs)


def test_an_initial_overlay_carrying_a_suite_oracle_fails_at_parse_time(tmp_path):
    import pytest
    from skillbench.experiment.overlay import OverlayError
    from skillbench.preflight import check_initial_overlay

    suite, _bindings, _dirs = _suite(tmp_path)
    source = _overlay(tmp_path, ORACLE_TEXT)
    config = {
        "skills": {"root": ".claude/skills", "evolvable": ["change-work"], "mirrors": []},
        "tasks": {"suite": str(suite)},
        "evolution": {"initial_overlay": str(source), "generations": 1},
    }
    with pytest.raises(OverlayError, match=r"holds hidden oracle rounding_test\.py of task rounding"):
        check_initial_overlay(config)


def test_freeze_overlay_refuses_a_skill_without_frontmatter(tmp_path):
    import pytest
    from skillbench.experiment.overlay import OverlayError
    from skillbench.steps.evolve import freeze_overlay

    _suite_path, bindings, oracle_dirs = _suite(tmp_path)
    source = _overlay(tmp_path, b"Run the verify command once.\n")
    skills = {"root": ".claude/skills", "evolvable": ["change-work"], "mirrors": []}
    with pytest.raises(OverlayError, match=r"change-work/SKILL\.md: SKILL\.md must start with YAML frontmatter"):
        freeze_overlay(
            skills=skills,
            candidate_arms=["candidate_workflow"],
            arm_skills={"workflow": ["change-plan", "change-work"], "baseline": []},
            generation=0,
            source=str(source),
            frozen_out=str(tmp_path / "frozen"),
            overlay_out=str(tmp_path / "overlay.json"),
            diff_out=str(tmp_path / "candidate.diff"),
            task_tools=["python3"],
            candidate_origin="model-proposer",
            proposer_model="m",
            bindings=str(bindings),
            oracle_dirs=oracle_dirs,
        )
    assert not (tmp_path / "frozen").exists() and not (tmp_path / "overlay.json").exists()


def test_merge_checks_lists_every_passed_check_in_suite_order_without_its_output(tmp_path):
    import json

    import pytest
    from skillbench.base.artifacts import write_artifact
    from skillbench.grading.taskcheck import TaskCheckError
    from skillbench.steps.tasks import merge_checks

    def check(task, ok=True):
        path = tmp_path / task / "check.json"
        step = {"step": "setup", "command": "true", "state": "ok", "exit_code": 0, "expected": "pass", "met": ok}
        document = {"schema": "task-check/v1", "task": task, "ok": ok, "problems": [] if ok else [f"{task} broke"]}
        document |= {"steps": [{**step, "tail": "secret oracle output"}], "summary": f"{task}: fine"}
        write_artifact(path, document, "task-check")
        return str(path)

    out = tmp_path / "checks.json"
    merge_checks(suite="s.yaml", check_paths=[check("b"), check("a")], out=str(out))
    merged = json.loads(out.read_text())
    assert merged["tasks"] == [{"task": "b", "summary": "b: fine"}, {"task": "a", "summary": "a: fine"}]
    assert "secret oracle output" not in out.read_text()
    with pytest.raises(TaskCheckError, match="task c did not pass its check"):
        merge_checks(suite="s.yaml", check_paths=[check("c", ok=False)], out=str(tmp_path / "again.json"))
    assert not (tmp_path / "again.json").exists()


SHIMS = sorted((Path(__file__).resolve().parents[2] / "scripts").glob("*.py"))


def test_shims_hand_the_library_only_what_the_rule_declares():
    """A job's params, inputs, outputs, wildcards, log and resources are its whole interface: a shim that read
    the workflow's config would let a config change reach a cached job without rerunning it."""
    assert SHIMS
    for shim in SHIMS:
        source = shim.read_text()
        used = set(re.findall(r"snakemake\.(\w+)", source))
        assert used <= {"params", "input", "output", "wildcards", "log", "resources"}, (shim.name, used)
        # A `shell:` step's shim has only its command line: nothing from the environment or a config file.
        assert not re.search(r"\benviron\b|getenv|\bconfig\b|yaml", source), shim.name


def test_every_shim_calls_the_one_step_named_like_its_rule_inside_its_rule_log():
    """One shim convention: `scripts/<rule>.py` imports `<rule>` from a `skillbench.steps` module that defines it,
    and calls it once inside `rule_log`, so an expected error reaches the log as one line."""
    import ast
    import importlib

    for shim in SHIMS:
        rule = shim.stem
        tree = ast.parse(shim.read_text())
        steps = [
            node
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skillbench.steps.")
        ]
        assert len(steps) == 1 and [alias.name for alias in steps[0].names] == [rule], shim.name
        assert callable(getattr(importlib.import_module(steps[0].module), rule)), shim.name
        blocks = [node for node in tree.body if isinstance(node, ast.With)]
        assert len(blocks) == 1, shim.name
        managers = [ast.unparse(item.context_expr) for item in blocks[0].items]
        assert any(manager.startswith("rule_log(") for manager in managers), shim.name
        calls = [
            node
            for node in ast.walk(blocks[0])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == rule
        ]
        assert len(calls) == 1, shim.name
