"""promotion.json: a partial set of rows never promotes; a generation promotes only when every decision does."""

from __future__ import annotations

from skillbench.decision.promotion import is_promoted, run_status


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


def test_a_generation_promotes_only_when_every_decision_promotes():
    assert is_promoted({"decisions": [{"decision": "promote"}, {"decision": "promote"}]})
    assert not is_promoted({"decisions": [{"decision": "promote"}, {"decision": "keep_incumbent"}]})
    assert not is_promoted({"decisions": []})
