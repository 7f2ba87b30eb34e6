"""Aggregation: medians over valid rows, exclusions, savings and the broken-incumbent check."""

from __future__ import annotations

import pytest
from rowfactory import make_row
from skillbench.base.records import EXCLUDED_ERROR_KINDS, SYSTEMIC_ERROR_KINDS
from skillbench.decision.aggregate import (
    aggregate,
    aggregate_by_task,
    broken_incumbent_arms,
    savings,
)

FAILING_KINDS_NOT_OK = EXCLUDED_ERROR_KINDS | {"skill-not-invoked", "plan-evidence-invalid"}


def test_error_kind_sets_follow_the_contract():
    assert EXCLUDED_ERROR_KINDS == {
        "session-error",
        "infra-error",
        "evidence-unverified",
        "cleanup-failure",
        "cancelled",
        "budget-exhausted",
    }
    assert SYSTEMIC_ERROR_KINDS == {"session-error", "infra-error", "cleanup-failure"}
    assert SYSTEMIC_ERROR_KINDS <= EXCLUDED_ERROR_KINDS


def test_median_of_three_rows_and_resolved_count():
    rows = [
        make_row(run=0, input_tokens=1000, resolved=True),
        make_row(run=1, input_tokens=3000, resolved=False),
        make_row(run=2, input_tokens=2000, resolved=True),
    ]
    summary = aggregate(rows)
    assert summary["input_tokens"] == 2000
    assert summary["resolved"] == 2
    assert (summary["runs"], summary["valid_runs"], summary["excluded_runs"]) == (3, 3, 0)
    assert summary["error_kinds"] == {"oracle-failed": 1}
    assert summary["class"] == "demo"
    assert (summary["task"], summary["arm"]) == ("demo-task", "workflow")


def test_session_error_is_excluded_from_cost_median():
    rows = [
        make_row(run=0, cost_usd=1.0),
        make_row(run=1, cost_usd=3.0),
        make_row(run=2, cost_usd=100.0, resolved=False, error_kind="session-error"),
    ]
    summary = aggregate(rows)
    assert summary["cost_usd"] == 2.0
    assert (summary["valid_runs"], summary["excluded_runs"]) == (2, 1)
    assert summary["error_kinds"] == {"session-error": 1}


def test_even_count_median_averages_the_middle_values():
    rows = [make_row(run=0, output_tokens=100, duration_s=1.0), make_row(run=1, output_tokens=201, duration_s=2.0)]
    summary = aggregate(rows)
    assert summary["output_tokens"] == 150.5
    assert summary["duration_s"] == 1.5


def test_unmeasured_cost_on_a_valid_row_makes_cost_unavailable():
    rows = [make_row(run=0, cost_usd=1.0), make_row(run=1, cost_usd=None)]
    assert aggregate(rows)["cost_usd"] is None


def test_unmeasured_cost_on_an_excluded_row_does_not_matter():
    rows = [make_row(run=0, cost_usd=1.0), make_row(run=1, cost_usd=None, resolved=False, error_kind="infra-error")]
    assert aggregate(rows)["cost_usd"] == 1.0


@pytest.mark.parametrize("kind", sorted(EXCLUDED_ERROR_KINDS))
def test_group_with_only_excluded_rows(kind):
    rows = [make_row(run=index, resolved=False, error_kind=kind, input_tokens=999) for index in range(2)]
    summary = aggregate(rows)
    assert summary["valid_runs"] == 0
    assert summary["excluded_runs"] == 2
    assert summary["input_tokens"] == 0
    assert summary["diff_files"] == 0
    assert summary["cost_usd"] is None
    assert summary["resolved"] == 0


def test_transcripts_missing_and_skill_not_invoked_are_counted():
    rows = [
        make_row(run=0, transcript_missing=True, resolved=False, error_kind="evidence-unverified", skill_invoked=None),
        make_row(run=1, resolved=False, error_kind="skill-not-invoked", skill_invoked=False),
        make_row(run=2, resolved=False, error_kind="skill-not-invoked", skill_invoked=False),
    ]
    summary = aggregate(rows)
    assert summary["transcripts_missing"] == 1
    assert summary["skill_not_invoked"] == 2
    assert summary["error_kinds"] == {"evidence-unverified": 1, "skill-not-invoked": 2}
    assert summary["valid_runs"] == 2


def test_aggregate_rejects_empty_and_mixed_groups():
    with pytest.raises(ValueError):
        aggregate([])
    with pytest.raises(ValueError):
        aggregate([make_row(arm="workflow"), make_row(arm="baseline")])


def test_aggregate_by_task_keeps_first_appearance_order():
    rows = [
        make_row(task="zeta", arm="workflow"),
        make_row(task="zeta", arm="baseline"),
        make_row(task="alpha", arm="baseline"),
        make_row(task="alpha", arm="workflow"),
        make_row(task="zeta", arm="workflow", run=1),
    ]
    by_task = aggregate_by_task(rows)
    assert list(by_task) == ["zeta", "alpha"]
    assert list(by_task["zeta"]) == ["workflow", "baseline"]
    assert list(by_task["alpha"]) == ["baseline", "workflow"]
    assert by_task["zeta"]["workflow"]["runs"] == 2


def test_savings_rules():
    baseline = {
        "input_tokens": 2000,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1000,
        "output_tokens": 300,
        "cost_usd": None,
        "duration_s": 30.0,
    }
    arm = {
        "input_tokens": 1000,
        "cache_creation_input_tokens": 50,
        "cache_read_input_tokens": 1500,
        "output_tokens": 200,
        "cost_usd": 0.25,
        "duration_s": 40.0,
    }
    assert savings(baseline, arm) == {
        "input_tokens": 50.0,
        "cache_creation_input_tokens": 0.0,
        "cache_read_input_tokens": -50.0,
        "output_tokens": 33.3,
        "cost_usd": None,
        "duration_s": -33.3,
    }


def test_broken_incumbent_arms():
    rows = [
        make_row(task="a", arm="workflow", resolved=False),
        make_row(task="b", arm="workflow", resolved=False),
        make_row(task="a", arm="workflow_direct", resolved=False),
        make_row(task="b", arm="workflow_direct", resolved=True),
        make_row(task="a", arm="review", resolved=False, error_kind="session-error"),
        make_row(task="a", arm="baseline", resolved=False),
    ]
    by_task = aggregate_by_task(rows)
    # review never resolved (all excluded) → broken too; absent arms are ignored; baseline is not an incumbent.
    assert broken_incumbent_arms(by_task, ["workflow", "workflow_direct", "review", "absent"]) == [
        "workflow",
        "review",
    ]
    assert broken_incumbent_arms(by_task, []) == []
