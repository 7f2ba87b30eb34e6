"""Rule-step helpers: run completeness for the gate, canonical row order, CLI lookup."""

from __future__ import annotations

from skillbench.pipeline import canonical_order, run_status


def row(task: str, arm: str, run: int, error_kind: str | None = None) -> dict:
    return {"task": task, "arm": arm, "run": run, "error_kind": error_kind}


def test_complete_when_every_task_and_arm_has_the_same_runs():
    rows = [row(t, a, r) for t in ("a", "b") for a in ("x", "candidate_x") for r in range(3)]
    assert run_status(rows, ["a", "b"], ["x", "candidate_x"]) == "complete"


def test_a_missing_cell_or_task_makes_the_run_aborted():
    rows = [row(t, a, r) for t in ("a", "b") for a in ("x", "candidate_x") for r in range(3)]
    assert run_status(rows[:-1], ["a", "b"], ["x", "candidate_x"]) == "aborted"
    assert run_status([r for r in rows if r["task"] == "a"], ["a", "b"], ["x", "candidate_x"]) == "aborted"
    assert run_status([], ["a"], ["x"]) == "aborted"


def test_a_cancelled_row_makes_the_run_aborted():
    rows = [row("a", "x", 0), row("a", "candidate_x", 0, "cancelled")]
    assert run_status(rows, ["a"], ["x", "candidate_x"]) == "aborted"


def test_canonical_order_is_task_then_run_then_arm():
    rows = [row("b", "y", 0), row("a", "y", 1), row("a", "x", 1), row("a", "y", 0)]
    ordered = canonical_order(rows, ["a", "b"], ["x", "y"])
    assert [(r["task"], r["run"], r["arm"]) for r in ordered] == [
        ("a", 0, "y"),
        ("a", 1, "x"),
        ("a", 1, "y"),
        ("b", 0, "y"),
    ]


def test_a_broken_incumbent_fails_the_run_after_the_summary_is_written(tmp_path):
    import json

    import pytest
    from rowfactory import make_row
    from skillbench.artifacts import write_jsonl
    from skillbench.pipeline import HarnessHealthError, summarize_run

    rows = [make_row("t1", "workflow", run, resolved=False) for run in range(2)]
    rows += [make_row("t1", "baseline", run) for run in range(2)]
    results = tmp_path / "results.jsonl"
    write_jsonl(results, rows, "result-row")
    config = {
        "experiment": "x",
        "evolution": {"generations": 0},
        "selected_arms": ["workflow", "baseline"],
        "arms": {
            "workflow": {"sessions": [{"role": "work", "prompt": "p"}]},
            "baseline": {"sessions": [{"role": "baseline", "prompt": "p"}]},
        },
    }
    with pytest.raises(HarnessHealthError, match=r"\[harness-health\] incumbent arm\(s\) workflow"):
        summarize_run(
            config=config,
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
    from skillbench import artifacts, oracle, tasks

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
    files = oracle.capture_oracle(suite, task["oracle"])
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
    from skillbench.overlay import OverlayError
    from skillbench.pipeline import bound_oracles, freeze_overlay

    _suite_path, bindings, oracle_dirs = _suite(tmp_path)
    assert bound_oracles(str(bindings), oracle_dirs) == [("rounding_test.py of task rounding", ORACLE_TEXT)]
    source = _overlay(tmp_path, b"Remember:\n" + ORACLE_TEXT.replace(b"    ", b"  - "))
    config = {"skills": {"root": ".claude/skills", "evolvable": ["change-work"], "mirrors": []}}
    with pytest.raises(
        OverlayError,
        match=r"SKILL\.md holds hidden oracle rounding_test\.py of task rounding "
        r"\(3 of its 3 distinctive lines\)",
    ):
        freeze_overlay(
            config=config,
            generation=0,
            source=str(source),
            frozen_out=str(tmp_path / "frozen"),
            overlay_out=str(tmp_path / "overlay.json"),
            candidate_origin="model-proposer",
            proposer_model="m",
            bindings=str(bindings),
            oracle_dirs=oracle_dirs,
        )
    assert not (tmp_path / "frozen").exists() and not (tmp_path / "overlay.json").exists()


def test_a_missing_or_tampered_oracle_snapshot_is_refused(tmp_path):
    import os

    import pytest
    from skillbench.overlay import OverlayError
    from skillbench.pipeline import bound_oracles

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
    from skillbench.overlay import OverlayError
    from skillbench.pipeline import check_initial_overlay

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
    from skillbench.overlay import OverlayError
    from skillbench.pipeline import freeze_overlay

    _suite_path, bindings, oracle_dirs = _suite(tmp_path)
    source = _overlay(tmp_path, b"Run the verify command once.\n")
    config = {"skills": {"root": ".claude/skills", "evolvable": ["change-work"], "mirrors": []}}
    with pytest.raises(OverlayError, match=r"change-work/SKILL\.md: SKILL\.md must start with YAML frontmatter"):
        freeze_overlay(
            config=config,
            generation=0,
            source=str(source),
            frozen_out=str(tmp_path / "frozen"),
            overlay_out=str(tmp_path / "overlay.json"),
            candidate_origin="model-proposer",
            proposer_model="m",
            bindings=str(bindings),
            oracle_dirs=oracle_dirs,
        )
    assert not (tmp_path / "frozen").exists() and not (tmp_path / "overlay.json").exists()


def test_the_summary_advice_after_no_promotion_is_the_one_that_matches():
    from skillbench.pipeline import render_summary

    summary = {
        "experiment": "x",
        "outcome": "not_promoted",
        "generations_requested": 2,
        "generations": [],
        "broken_incumbent_arms": [],
        "next_step": "With runs: 2 no candidate can be promoted.",
    }
    text = render_summary(summary)
    assert "With runs: 2 no candidate can be promoted." in text
    assert "Raise `evolution.generations`" not in text
