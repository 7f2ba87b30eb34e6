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
        ("a", 0, "y"), ("a", 1, "x"), ("a", 1, "y"), ("b", 0, "y")]


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
    config = {"experiment": "x", "evolution": {"generations": 0}, "selected_arms": ["workflow", "baseline"],
              "arms": {"workflow": {"sessions": [{"role": "work", "prompt": "p"}]},
                       "baseline": {"sessions": [{"role": "baseline", "prompt": "p"}]}}}
    with pytest.raises(HarnessHealthError, match=r"\[harness-health\] incumbent arm\(s\) workflow"):
        summarize_run(config=config, results=[str(results)], promotions=[], overlays=[],
                      summary_out=str(tmp_path / "summary.json"), markdown_out=str(tmp_path / "summary.md"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["broken_incumbent_arms"] == ["workflow"]
    assert "[harness-health]" in (tmp_path / "summary.md").read_text()
