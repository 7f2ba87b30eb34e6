"""The promotion gate: every decision example of the reference plus the skillbench additions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from rowfactory import MODEL, make_binding, make_row
from skillbench.base.artifacts import ArtifactError, load_schema, validate
from skillbench.base.errors import SkillbenchError
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.gate import (
    MAIN_LOOP_ONLY_METRICS,
    MAIN_LOOP_ONLY_WARNING,
    POLICY_KEYS_NOT_IN_CONFIG,
    PROMOTION_METRICS,
    RECORDED_WHEN_SET,
    RULES,
    bootstrap_median_ci,
    evaluate_candidate,
    promotion_document,
    resolve_policy,
    sign_test,
    summarize_gate,
)

INC, CAND = "workflow", "candidate_workflow"
GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def arm_rows(task: str, arm: str, resolved=(True, True, True), **fields) -> list[dict]:
    """One row per entry of ``resolved``; list-valued fields are spread over the runs."""
    rows = []
    for run, outcome in enumerate(resolved):
        per_run = {key: value[run] if isinstance(value, list) else value for key, value in fields.items()}
        if isinstance(outcome, str):  # an error kind
            per_run.setdefault("error_kind", outcome)
            outcome = False
        rows.append(make_row(task, arm, run, resolved=outcome, **per_run))
    return rows


def decide(rows: list[dict], *, model: str | None = MODEL, rows_for_stats: bool = True, **policy) -> dict:
    """The reference examples are the upstream rule's; the noise-aware rule has its own section below."""
    policy.setdefault("rule", "upstream")
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm=INC,
        candidate_arm=CAND,
        model=model,
        policy=resolve_policy(policy),
        rows=rows if rows_for_stats else None,
    )


def binding(candidates=(CAND,)) -> dict:
    return make_binding(
        candidates,
        selected_tasks=[{"id": "t1", "oracle_digest": "7" * 64}],
        target_base_digests={".claude/skills/plan/SKILL.md": "a" * 64},
    )


def document(
    rows: list[dict], *, run_status: str = "complete", policy=None, pairs=((INC, CAND),), generation: int = 0
) -> dict:
    doc = promotion_document(
        rows,
        pairs=list(pairs),
        policy=resolve_policy({"rule": "upstream", **(policy or {})}),
        binding=binding([candidate for _, candidate in pairs]),
        run_status=run_status,
        generated_at=GENERATED_AT,
        generation=generation,
    )
    return validate(doc, "promotion")


# ─── Reference examples (schema 3 §9.1 and schema 4 §10.1) ──────────────────


def test_output_token_improvement_promotes_with_main_loop_warning():
    rows = (
        arm_rows("t1", INC, output_tokens=1000)
        + arm_rows("t1", CAND, output_tokens=880)
        + arm_rows("t2", INC, output_tokens=800)
        + arm_rows("t2", CAND, output_tokens=720)
    )
    result = decide(rows, metric="output_tokens")
    assert result["decision"] == "promote"
    assert [task["improvement_pct"] for task in result["tasks"]] == [12.0, 10.0]
    assert result["median_improvement_pct"] == 11.0
    assert result["reasons"] == ["median output_tokens improvement is 11.0% (required 5.0%)"]
    assert result["metric_warning"] == MAIN_LOOP_ONLY_WARNING
    assert result["gated_tasks"] == ["t1", "t2"] and result["ungated_tasks"] == []
    assert result["resolution_margin"] == 0


def test_cheaper_candidate_with_a_resolution_regression_keeps_the_incumbent():
    rows = arm_rows("t1", INC, cost_usd=1.0) + arm_rows("t1", CAND, resolved=(True, True, False), cost_usd=0.5)
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == [
        "t1: resolution regressed from 100% to 67%",
        "t1: candidate must resolve every valid run for the oracle-backed quality floor "
        "(the incumbent resolves 3/3; got 2/3)",
    ]
    assert result["metric_warning"] is None


def test_one_run_and_no_model_is_insufficient():
    rows = arm_rows("t1", INC, resolved=(True,)) + arm_rows("t1", CAND, resolved=(True,))
    result = decide(rows, model=None)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"][:2] == [
        "a named model is required so prompt evidence cannot drift",
        "t1: needs at least 3 valid runs per arm (got 1/1)",
    ]


def test_a_task_regression_above_the_cap_keeps_the_incumbent():
    rows = (
        arm_rows("t1", INC, cost_usd=1.0)
        + arm_rows("t1", CAND, cost_usd=0.5)
        + arm_rows("t2", INC, cost_usd=1.0)
        + arm_rows("t2", CAND, cost_usd=1.25)
    )
    result = decide(rows)
    assert [task["improvement_pct"] for task in result["tasks"]] == [50.0, -25.0]
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == ["t2: cost_usd regressed 25.0%, above the 20.0% task cap"]


def test_unmeasured_cost_is_insufficient():
    rows = arm_rows("t1", INC, cost_usd=1.0) + arm_rows("t1", CAND, cost_usd=[0.5, None, 0.5])
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == [
        "t1: cost_usd was not measured on every run in both paired arms; "
        "cannot rank on it (fix cost capture or choose another metric)"
    ]
    task = result["tasks"][0]
    assert task["candidate_metric"] is None and task["improvement_pct"] is None
    assert task["paired"]["differences"] == [0.5, None, 0.5]
    assert (task["paired"]["wins"], task["paired"]["losses"], task["paired"]["ties"]) == (2, 0, 0)


def test_resolution_margin_of_two_promotes():
    rows = arm_rows("t1", INC, resolved=(True, False, False)) + arm_rows("t1", CAND)
    result = decide(rows)
    assert result["decision"] == "promote"
    assert result["resolution_margin"] == 2
    assert result["reasons"] == [
        "candidate improves total task resolution by 2 runs (at least 2 required) with no task regression"
    ]


def test_partial_candidate_where_the_incumbent_resolves_fails_the_quality_floor():
    rows = arm_rows("t1", INC, resolved=(True, False, False)) + arm_rows("t1", CAND, resolved=(True, True, False))
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == [
        "t1: candidate must resolve every valid run for the oracle-backed quality floor "
        "(the incumbent resolves 1/3; got 2/3)"
    ]
    task = result["tasks"][0]
    assert task["quality_floor_enforced"] is True
    assert task["candidate_quality_floor_met"] is False


def test_seven_unverified_runs_block_promotion_despite_three_clean_ones():
    unverified = ("evidence-unverified",) * 7
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, resolved=(True, True, True, *unverified), cost_usd=0.5)
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == ["t1: promotion requires zero excluded runs in both paired arms (got 0/7)"]
    task = result["tasks"][0]
    assert (task["incumbent_resolved"], task["candidate_resolved"]) == ("3/3", "3/3")
    assert (task["incumbent_excluded_runs"], task["candidate_excluded_runs"]) == (0, 7)


def test_skill_not_invoked_keeps_an_unresolved_task_gated_and_enforces_the_floor():
    rows = arm_rows("t1", INC, resolved=(False,) * 3) + arm_rows("t1", CAND, resolved=("skill-not-invoked",) * 3)
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == [
        "t1: candidate must resolve every valid run for the oracle-backed quality floor "
        "(a run never invoked the skill under test; got 0/3)"
    ]
    task = result["tasks"][0]
    assert task["gated"] and task["skill_attributable_failure"] and task["quality_floor_enforced"]


# ─── Gated / ungated tasks ──────────────────────────────────────────────────


def test_ungated_task_within_the_failed_task_cap_does_not_block_promotion():
    rows = (
        arm_rows("t1", INC, cost_usd=1.0)
        + arm_rows("t1", CAND, cost_usd=0.9)
        + arm_rows("t2", INC, resolved=(False,) * 3, cost_usd=1.0)
        + arm_rows("t2", CAND, resolved=(False,) * 3, cost_usd=1.5)
    )
    result = decide(rows)
    assert result["decision"] == "promote"
    assert result["gated_tasks"] == ["t1"] and result["ungated_tasks"] == ["t2"]
    assert result["median_improvement_pct"] == 10.0  # median over gated tasks only
    assert result["reasons"] == [
        "not gated on 1 task(s) neither arm resolved: t2 (evidence base: 1/2 paired tasks gated)",
        "median cost_usd improvement is 10.0% (required 5.0%)",
    ]
    ungated = result["tasks"][1]
    assert ungated["gated"] is False and ungated["quality_floor_enforced"] is False


def test_ungated_task_with_150_percent_regression_hits_the_failed_task_cap():
    rows = (
        arm_rows("t1", INC, cost_usd=1.0)
        + arm_rows("t1", CAND, cost_usd=0.9)
        + arm_rows("t2", INC, resolved=(False,) * 3, cost_usd=1.0)
        + arm_rows("t2", CAND, resolved=(False,) * 3, cost_usd=2.5)
    )
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == [
        "t2: cost_usd regressed 150.0% on a task neither arm resolved, above the 100.0% failed-task cap",
        "not gated on 1 task(s) neither arm resolved: t2 (evidence base: 1/2 paired tasks gated)",
    ]


def test_no_gated_task_is_insufficient():
    rows = arm_rows("t1", INC, resolved=(False,) * 3) + arm_rows("t1", CAND, resolved=(False,) * 3, cost_usd=0.5)
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == [
        "not gated on 1 task(s) neither arm resolved: t1 (evidence base: 0/1 paired tasks gated)",
        "no task supplied quality signal: neither arm resolved a run anywhere in the set",
    ]


def test_too_thin_a_gated_evidence_base_is_insufficient():
    rows = arm_rows("a", INC) + arm_rows("a", CAND, cost_usd=0.5)
    for task in ("b", "c"):
        rows += arm_rows(task, INC, resolved=(False,) * 3) + arm_rows(task, CAND, resolved=(False,) * 3)
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert (
        result["reasons"][-1]
        == "promotion evidence base is too thin: 1/3 paired tasks are gated (at least 50% required)"
    )


def test_an_unresolved_task_with_too_few_runs_stays_gated():
    rows = arm_rows("t1", INC, resolved=(False,) * 2) + arm_rows("t1", CAND, resolved=(False,) * 2)
    result = decide(rows)
    assert result["tasks"][0]["gated"] is True
    assert result["reasons"] == ["t1: needs at least 3 valid runs per arm (got 2/2)"]


# ─── Run pairing, ties, single tasks ────────────────────────────────────────


def test_unequal_valid_run_counts_are_insufficient():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, resolved=(True,) * 4, cost_usd=0.5)
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == ["t1: paired arms have different valid run counts (3/4 valid; 0/0 excluded)"]
    assert result["tasks"][0]["paired"]["run_indices"] == [0, 1, 2]


def test_missing_arm_on_a_task_is_insufficient():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5) + arm_rows("t2", INC)
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"][0] == "t2: both workflow and candidate_workflow are required"
    assert [task["task"] for task in result["tasks"]] == ["t1"]


def test_no_paired_task_is_insufficient():
    result = decide(arm_rows("t1", INC))
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == [
        "t1: both workflow and candidate_workflow are required",
        "no paired task results were found",
    ]
    assert result["median_improvement_pct"] is None


def test_single_task_suite_promotes_on_efficiency():
    rows = arm_rows("only", INC, cost_usd=1.0) + arm_rows("only", CAND, cost_usd=0.9)
    result = decide(rows)
    assert result["decision"] == "promote"
    assert result["reasons"] == ["median cost_usd improvement is 10.0% (required 5.0%)"]
    assert result["statistics"]["sign_test"] == {"wins": 1, "losses": 0, "ties": 0, "p_value": 1.0}
    bootstrap = result["statistics"]["bootstrap"]
    assert (bootstrap["ci_low_pct"], bootstrap["ci_high_pct"], bootstrap["excludes_zero"]) == (10.0, 10.0, True)


def test_ties_keep_the_incumbent():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND) + arm_rows("t2", INC) + arm_rows("t2", CAND)
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["median_improvement_pct"] == 0.0
    assert result["reasons"] == ["median cost_usd improvement is 0.0% (required 5.0%)"]
    assert result["statistics"]["sign_test"] == {"wins": 0, "losses": 0, "ties": 2, "p_value": 1.0}
    assert result["statistics"]["bootstrap"]["excludes_zero"] is False
    paired = result["tasks"][0]["paired"]
    assert (paired["runs"], paired["wins"], paired["losses"], paired["ties"]) == (3, 0, 0, 3)


def test_improvement_exactly_at_the_threshold_promotes():
    rows = arm_rows("t1", INC, cost_usd=1.0) + arm_rows("t1", CAND, cost_usd=0.95)
    assert decide(rows)["decision"] == "promote"


def test_margin_of_one_is_noise_and_falls_back_to_efficiency():
    rows = arm_rows("t1", INC, resolved=(True, True, False)) + arm_rows("t1", CAND, cost_usd=0.98)
    result = decide(rows)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == [
        "total resolution improved by only 1 run — within the noise floor (2 required); deciding on efficiency instead",
        "median cost_usd improvement is 2.0% (required 5.0%)",
    ]


def test_zero_incumbent_metric_is_insufficient():
    rows = arm_rows("t1", INC, num_turns=0) + arm_rows("t1", CAND, num_turns=0)
    result = decide(rows, metric="num_turns")
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == ["t1: incumbent num_turns is zero; choose a metric with signal"]
    assert result["metric_warning"] == MAIN_LOOP_ONLY_WARNING


def test_paired_runs_match_run_indices_valid_in_both_arms():
    rows = arm_rows("t1", INC, resolved=(True,) * 4, cost_usd=[1.0, 2.0, 3.0, 4.0]) + arm_rows(
        "t1", CAND, resolved=(True, "session-error", True, True), cost_usd=[0.5, 0.1, 3.5, 4.0]
    )
    paired = decide(rows)["tasks"][0]["paired"]
    assert paired == {
        "runs": 3,
        "run_indices": [0, 2, 3],
        "incumbent_values": [1.0, 3.0, 4.0],
        "candidate_values": [0.5, 3.5, 4.0],
        "differences": [0.5, -0.5, 0.0],
        "wins": 1,
        "losses": 1,
        "ties": 1,
    }


def test_without_rows_paired_stats_are_null():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5)
    result = decide(rows, rows_for_stats=False)
    assert result["decision"] == "promote"
    assert result["tasks"][0]["paired"] is None


# ─── Statistics and the confidence rule ─────────────────────────────────────


@pytest.mark.parametrize(
    ("improvements", "expected"),
    [
        ([10.0] * 5, (5, 0, 0, 0.0625)),
        ([-3.0] * 5, (0, 5, 0, 0.0625)),
        ([1.0] * 5 + [-1.0], (5, 1, 0, 0.21875)),
        ([1.0] * 10, (10, 0, 0, 0.001953)),
        ([1.0, -1.0], (1, 1, 0, 1.0)),
        ([0.0, 0.0, 4.0], (1, 0, 2, 1.0)),
        ([], (0, 0, 0, 1.0)),
    ],
)
def test_sign_test_p_values(improvements, expected):
    result = sign_test(improvements)
    assert (result["wins"], result["losses"], result["ties"], result["p_value"]) == expected


def test_bootstrap_is_reproducible_and_reports_its_parameters():
    first = bootstrap_median_ci([10.0, 12.0, 8.0, 15.0, 9.0])
    assert first == bootstrap_median_ci([10.0, 12.0, 8.0, 15.0, 9.0])
    assert (first["resamples"], first["seed"]) == (10000, 20261129)
    assert first["ci_low_pct"] > 0 and first["excludes_zero"] is True
    assert first["ci_low_pct"] <= 10.0 <= first["ci_high_pct"]
    empty = bootstrap_median_ci([])
    assert (empty["ci_low_pct"], empty["ci_high_pct"], empty["excludes_zero"]) == (None, None, False)


def _five_tasks(candidate_costs: list[float]) -> list[dict]:
    rows = []
    for index, cost in enumerate(candidate_costs):
        rows += arm_rows(f"t{index}", INC, cost_usd=100.0) + arm_rows(f"t{index}", CAND, cost_usd=cost)
    return rows


def test_require_confidence_keeps_the_incumbent_when_the_ci_includes_zero():
    rows = _five_tasks([60.0, 110.0, 70.0, 115.0, 80.0])  # improvements 40, -10, 30, -15, 20
    assert decide(rows)["decision"] == "promote"
    result = decide(rows, require_confidence=True)
    assert result["decision"] == "keep_incumbent"
    assert result["statistics"]["bootstrap"]["excludes_zero"] is False
    assert result["reasons"] == [
        "median cost_usd improvement is 20.0% (required 5.0%)",
        "bootstrap 95% CI of the median cost_usd improvement is [-15.0%, 40.0%]; "
        "require_confidence needs its lower bound above 0%",
    ]


def test_require_confidence_promotes_when_the_ci_excludes_zero():
    rows = _five_tasks([90.0, 88.0, 92.0, 85.0, 91.0])  # improvements 10, 12, 8, 15, 9
    result = decide(rows, require_confidence=True)
    assert result["decision"] == "promote"
    assert result["statistics"]["bootstrap"]["excludes_zero"] is True
    assert result["statistics"]["sign_test"]["p_value"] == 0.0625


# ─── Sandbox, policy, document ──────────────────────────────────────────────


def test_unsandboxed_runs_cannot_promote_unless_allowed():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5, sandbox_backend="none")
    result = decide(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"][0] == (
        "3 run(s) of workflow/candidate_workflow ran without a sandbox (sandbox_backend none); "
        "unsandboxed evidence cannot promote unless the policy sets allow_unsandboxed"
    )
    assert decide(rows, allow_unsandboxed=True)["decision"] == "promote"


def test_unsandboxed_rows_of_other_arms_do_not_matter():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5) + arm_rows("t1", "baseline", sandbox_backend="none")
    assert decide(rows)["decision"] == "promote"


def test_policy_validation():
    # What a promotion document records of a policy resolves back to the same policy (apply re-checks it so).
    custom = resolve_policy({"alpha": 0.1, "min_runs": 4, "resolution_cost_margin_pct": None})
    assert resolve_policy(custom.as_dict()) == custom != resolve_policy(None)
    assert set(PROMOTION_METRICS) >= set(MAIN_LOOP_ONLY_METRICS)
    with pytest.raises(ValueError, match="unsupported promotion metric"):
        resolve_policy({"metric": "input_tokens"})
    # An expected error: rule logs and the skillbench command show it as one line, without a traceback.
    with pytest.raises(SkillbenchError, match="unknown promotion policy"):
        resolve_policy({"min_run": 3})
    with pytest.raises(ValueError, match="min_runs"):
        resolve_policy({"min_runs": 0})
    with pytest.raises(ValueError, match="require_confidence"):
        resolve_policy({"require_confidence": "yes"})
    with pytest.raises(ValueError, match="min_gated_task_ratio"):
        resolve_policy({"min_gated_task_ratio": 1.5})


def test_custom_policy_values_appear_in_reason_texts():
    rows = arm_rows("t1", INC, resolved=(True,) * 2) + arm_rows("t1", CAND, resolved=(True,) * 2, cost_usd=0.7)
    result = decide(rows, min_runs=2, min_improvement_pct=40.0)
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"] == ["median cost_usd improvement is 30.0% (required 40.0%)"]


def test_promotion_document_binds_evidence_and_validates():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5)
    doc = document(rows)
    assert doc["schema"] == "promotion/v1"
    assert doc["run_status"] == "complete"
    assert doc["generated_at"] == "2026-03-01T12:00:00Z"
    assert doc["evidence_expires_at"] == "2026-05-30T12:00:00Z"
    assert datetime.fromisoformat(doc["evidence_expires_at"]) - GENERATED_AT == timedelta(days=90)
    assert doc["policy"]["metric"] == "cost_usd"
    assert doc["policy"]["metric_warning"] is None
    assert doc["policy"]["quality_rule"]
    assert doc["benchmark_model"] == MODEL
    assert doc["required_candidate_arms"] == [CAND]
    assert [decision["decision"] for decision in doc["decisions"]] == ["promote"]


def test_promotion_document_normalises_the_timezone():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5)
    doc = promotion_document(
        rows,
        pairs=[(INC, CAND)],
        policy=resolve_policy({"max_age_days": 30, "rule": "upstream"}),
        binding=binding(),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
    )
    validate(doc, "promotion")
    assert (doc["generated_at"], doc["evidence_expires_at"]) == ("2026-03-01T12:00:00Z", "2026-03-31T12:00:00Z")


def test_aborted_run_forces_insufficient_evidence():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5)
    doc = document(rows, run_status="aborted")
    decision = doc["decisions"][0]
    assert decision["decision"] == "insufficient_evidence"
    assert decision["reasons"][0] == "run aborted; partial evidence cannot promote"
    assert doc["run_status"] == "aborted"


def test_promotion_document_with_two_candidates_and_main_loop_metric():
    rows = (
        arm_rows("t1", "workflow")
        + arm_rows("t1", "candidate_workflow", output_tokens=50)
        + arm_rows("t1", "workflow_direct")
        + arm_rows("t1", "candidate_workflow_direct", resolved=(True, False, True))
    )
    pairs = (("workflow", "candidate_workflow"), ("workflow_direct", "candidate_workflow_direct"))
    doc = document(rows, pairs=pairs, policy={"metric": "output_tokens"})
    assert doc["policy"]["metric_warning"] == MAIN_LOOP_ONLY_WARNING
    assert [(d["candidate_arm"], d["decision"]) for d in doc["decisions"]] == [
        ("candidate_workflow", "promote"),
        ("candidate_workflow_direct", "keep_incumbent"),
    ]
    assert summarize_gate(doc) == [
        "candidate_workflow: promote — median output_tokens improvement is 50.0% (required 5.0%)",
        "candidate_workflow_direct: keep_incumbent — t1: resolution regressed from 100% to 67%; "
        "t1: candidate must resolve every valid run for the oracle-backed quality floor "
        "(the incumbent resolves 3/3; got 2/3)",
        # With several pairs, the verdict they make together (every pair must promote, by default).
        "across agents (all): keep_incumbent — every agent must promote (across_agents all); kept by claude-code "
        "(candidate_workflow_direct)",
    ]


def test_promotion_document_rejects_bad_inputs():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND)
    good = {"pairs": [(INC, CAND)], "policy": None, "run_status": "complete", "generated_at": GENERATED_AT}
    with pytest.raises(ValueError, match="timezone-aware"):
        promotion_document(rows, **{**good, "generated_at": datetime(2026, 3, 1)}, binding=binding())
    with pytest.raises(ValueError, match="run_status"):
        promotion_document(rows, **{**good, "run_status": "partial"}, binding=binding())
    with pytest.raises(ValueError, match="do not match"):
        promotion_document(rows, **good, binding=binding(["candidate_other"]))
    incomplete = binding()
    del incomplete["effort"]
    with pytest.raises(ValueError, match="missing"):
        promotion_document(rows, **good, binding=incomplete)


def test_schema_rejects_a_tampered_document():
    rows = arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5)
    doc = document(rows)
    with pytest.raises(ArtifactError):
        validate({**doc, "candidate_overlay_digest": "XYZ"}, "promotion")
    with pytest.raises(ArtifactError):
        validate({**doc, "surprise": True}, "promotion")
    tampered = {**doc, "decisions": [{**doc["decisions"][0], "decision": "maybe"}]}
    with pytest.raises(ArtifactError):
        validate(tampered, "promotion")


def test_summarize_gate_keeps_three_reasons():
    promotion = {
        "decisions": [{"candidate_arm": CAND, "decision": "insufficient_evidence", "reasons": ["a", "b", "c", "d"]}]
    }
    assert summarize_gate(promotion) == ["candidate_workflow: insufficient_evidence — a; b; c"]


def test_gate_is_deterministic():
    rows = _five_tasks([60.0, 110.0, 70.0, 115.0, 80.0])
    assert document(rows) == document(rows)


def test_promotion_schema_describes_every_property_and_closes_its_own_objects():
    schema = load_schema("promotion")

    def walk(node, path="$"):
        if isinstance(node, dict):
            for name, child in node.get("properties", {}).items():
                assert "description" in child, f"{path}.{name} has no description"
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{path} is open"
            for key, child in node.items():
                walk(child, f"{path}.{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{path}[{index}]")

    walk(schema)
    assert schema["properties"]["selected_tasks"]["items"]["type"] == "object"
    assert "additionalProperties" not in schema["properties"]["selected_tasks"]["items"]


# ─── The noise-aware rule (the default) ─────────────────────────────────────


def decide_noisy(
    rows: list[dict], *, model: str | None = MODEL, rows_for_stats: bool = True, generation: int = 0, **policy
) -> dict:
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm=INC,
        candidate_arm=CAND,
        model=model,
        policy=resolve_policy(policy),
        rows=rows if rows_for_stats else None,
        generation=generation,
    )


NOISE = [1.0, 1.12, 0.9, 1.05, 0.95]


def noisy_task(task: str, *, scale: float = 1.0, saving: float = 0.0, runs: int = 3, shift: int = 0, **fields):
    """Incumbent and candidate rows of one task with run-to-run noise; the candidate's noise is rotated."""
    inc = [scale * NOISE[i % 5] for i in range(runs)]
    cand = [scale * (1 - saving) * NOISE[(i + 1 + shift) % 5] for i in range(runs)]
    inc_fields = {key: value[0] for key, value in fields.items()}
    cand_fields = {key: value[1] for key, value in fields.items()}
    return arm_rows(task, INC, (True,) * runs, cost_usd=inc, **inc_fields) + arm_rows(
        task, CAND, (True,) * runs, cost_usd=cand, **cand_fields
    )


def suite(tasks: int = 12, *, saving: float = 0.2, runs: int = 3, **fields) -> list[dict]:
    """``tasks`` noisy tasks at four cost levels, the candidate ``saving`` cheaper on each: enough runs (36 per arm
    at the defaults) for all-resolved runs to show the resolution within the 10-point margin at generation 0."""
    rows = []
    for index in range(tasks):
        rows += noisy_task(
            f"t{index:02d}", scale=1 + 0.25 * (index % 4), saving=saving, runs=runs, shift=index, **fields
        )
    return rows


def test_default_policy_is_the_noise_aware_rule():
    policy = resolve_policy(None)
    assert (policy.rule, policy.alpha, policy.quality_margin_pct) == ("noise_aware", 0.05, 10.0)
    assert (policy.objective, policy.generation_spending, policy.resolution_cost_margin_pct) == (
        "total_spend",
        "halving",
        10.0,
    )
    assert resolve_policy({"resolution_cost_margin_pct": None}).resolution_cost_margin_pct is None
    for bad, message in (
        ({"rule": "median"}, "unsupported promotion rule"),
        ({"alpha": 0.5}, "alpha"),
        ({"quality_margin_pct": -1}, "quality_margin_pct"),
        ({"objective": "median"}, "objective must be one of total_spend, per_task"),
        ({"generation_spending": "bonferroni"}, "generation_spending must be one of halving, none"),
        ({"resolution_cost_margin_pct": -5}, "resolution_cost_margin_pct"),
    ):
        with pytest.raises(ValueError, match=message):
            resolve_policy(bad)


def test_the_generations_of_an_experiment_share_alpha():
    from skillbench.decision.gate import generation_alpha

    policy = resolve_policy(None)
    assert [generation_alpha(policy, g) for g in range(4)] == [0.025, 0.0125, 0.00625, 0.003125]
    assert generation_alpha(resolve_policy({"generation_spending": "none"}), 3) == 0.05
    rows = suite()
    first, second = (decide_noisy(rows, generation=g)["tests"] for g in (0, 1))
    assert (first["cost"]["alpha"], first["quality"]["alpha"], first["quality"]["better_alpha"]) == (
        0.0225,
        0.025,
        0.0025,
    )
    assert (second["cost"]["alpha"], second["quality"]["alpha"]) == (0.01125, 0.0125)
    doc = document(rows, policy={"rule": "noise_aware"}, generation=1)
    assert doc["error_control"] == {
        "alpha": 0.05,
        "spending": "halving",
        "generation": 1,
        "generation_alpha": 0.0125,
        "statement": (
            "generation 1 is tested at alpha 0.0125 (alpha 0.05 halved once per generation): over all its "
            "generations and looks, an experiment whose candidates are no better promotes one of them with "
            "probability at most 0.05"
        ),
    }


def test_the_cost_test_is_a_t_test_across_tasks_with_each_tasks_run_noise():
    """per_task: the mean of the per-task mean log differences; total_spend: the log ratio of the totals, each task
    weighted by its spend. Either way the variance is sum w² (the task's run noise + the spread between tasks beyond
    it), with Welch-Satterthwaite degrees of freedom, and the sign-flip test must reject too (seven tasks reach it)."""
    from math import exp, fsum, log, sqrt

    from scipy import stats

    rows = suite(6, saving=0.1) + noisy_task("wide", scale=4.0, saving=-0.05, shift=3)
    tasks = sorted({row["task"] for row in rows})

    def values(task, arm):
        return [row["cost_usd"] for row in rows if row["task"] == task and row["arm"] == arm]

    def reference(ratios, weights, run_terms, estimate):
        # run_terms: per task, each arm's (variance of its mean, dof)
        runs = [a + b for (a, _), (b, _) in run_terms]
        excess = max(0.0, stats.tvar(ratios) - fsum(runs) / len(runs))
        squares = fsum(w * w for w in weights)
        terms = [w * w * u for w, u in zip(weights, runs, strict=True)]
        variance = fsum(terms) + excess * squares
        dofs = [(a + b) ** 2 / (a * a / da + b * b / db) for (a, da), (b, db) in run_terms]
        denominator = fsum(t * t / d for t, d in zip(terms, dofs, strict=True)) + (excess * squares) ** 2 / 6
        df = variance**2 / denominator
        return stats.t.sf(estimate / sqrt(variance), df), sqrt(variance), df

    logs = {task: ([log(v) for v in values(task, INC)], [log(v) for v in values(task, CAND)]) for task in tasks}
    ratios = [fsum(inc) / 3 - fsum(cand) / 3 for inc, cand in logs.values()]
    terms = [((stats.tvar(inc) / 3, 2), (stats.tvar(cand) / 3, 2)) for inc, cand in logs.values()]
    p_t, se, df = reference(ratios, [1 / 7] * 7, terms, fsum(ratios) / 7)
    per_task = decide_noisy(rows, objective="per_task")["tests"]["cost"]
    assert per_task["t_p_value"] == pytest.approx(p_t, rel=1e-5)
    assert per_task["se_log"] == pytest.approx(se, abs=1e-6) and per_task["df"] == round(df, 1)
    assert per_task["sign_flip"]["applies"] and per_task["sign_flip"]["flips"] == 2**7
    assert per_task["p_value"] == max(per_task["t_p_value"], per_task["sign_flip"]["p_value"])
    assert per_task["tasks"] == 7 and per_task["effective_tasks"] == 7.0
    assert per_task["estimate_pct"] == round(100 * (1 - exp(-fsum(ratios) / 7)), 1)

    means = {task: (fsum(values(task, INC)) / 3, fsum(values(task, CAND)) / 3) for task in tasks}
    shares = [(a + b) / fsum(a + b for a, b in means.values()) for a, b in means.values()]
    spend_ratios = [log(a / b) for a, b in means.values()]
    estimate = log(fsum(a for a, _ in means.values()) / fsum(b for _, b in means.values()))
    relative = [
        tuple((stats.tvar(values(task, arm)) / (fsum(values(task, arm)) / 3) ** 2 / 3, 2) for arm in (INC, CAND))
        for task in tasks
    ]
    p_t, se, df = reference(spend_ratios, shares, relative, estimate)
    spend = decide_noisy(rows)["tests"]["cost"]
    assert spend["objective"] == "total_spend"
    assert spend["estimate_pct"] == round(100 * (1 - exp(-estimate)), 1)
    assert spend["se_log"] == pytest.approx(se, abs=1e-6)
    assert spend["t_p_value"] == pytest.approx(p_t, rel=1e-5)
    assert spend["p_value"] == max(spend["t_p_value"], spend["sign_flip"]["p_value"])
    # The expensive task that got dearer weighs its share of the spend: the total saves less than the average task.
    assert spend["estimate_pct"] < per_task["estimate_pct"]


def test_what_a_task_and_arm_share_is_noise_the_runs_cannot_average_away():
    """Tight runs within each cell, but per-task differences that disagree: the between-task spread decides."""
    rows = []
    for index, effect in enumerate([0.35, -0.15, 0.30, -0.10, 0.25, -0.05, 0.30, -0.10, 0.35, -0.15, 0.25, 0.05]):
        rows += noisy_task(f"t{index:02d}", saving=effect, runs=3, shift=0)
    result = decide_noisy(rows)
    cost = result["tests"]["cost"]
    assert cost["estimate_pct"] > 5 and cost["conclusion"] == "inconclusive"
    assert result["decision"] == "keep_incumbent"
    assert result["reasons"][0].startswith("not enough tasks or runs to tell: cost_usd saving in total spend ")
    assert "12 tasks × 3 runs per arm detects a " in result["reasons"][0]


def test_a_dearer_total_is_never_promoted_for_a_cheaper_task_average():
    """One task costs thirty times the others and rises by half; eleven cheap ones fall 20 %: the user pays more."""
    rows = noisy_task("big", scale=30.0, saving=-0.6, runs=4)
    for index in range(11):
        rows += noisy_task(f"t{index:02d}", saving=0.2, runs=4, shift=index)
    spend = decide_noisy(rows)
    assert spend["tests"]["cost"]["estimate_pct"] < 0 < spend["tests"]["cost_alternative"]["estimate_pct"]
    assert spend["decision"] == "keep_incumbent"
    per_task = decide_noisy(rows, objective="per_task", max_task_regression_pct=100.0)
    assert per_task["tests"]["cost"]["conclusion"] == "cheaper"
    assert per_task["tests"]["cost_alternative"]["objective"] == "total_spend"
    assert per_task["tests"]["cost_alternative"]["p_higher"] <= 0.05
    assert per_task["decision"] == "keep_incumbent"
    assert per_task["reasons"][0].startswith("the suite's total spend is credibly higher: ")


def test_runs_that_do_not_vary_claim_no_certainty():
    """The same saving on every task and run: no noise was measured, so there is no p-value to promote on."""
    rows = []
    for index in range(12):
        rows += arm_rows(f"t{index:02d}", INC, cost_usd=1.0 + index) + arm_rows(
            f"t{index:02d}", CAND, cost_usd=0.9 * (1.0 + index)
        )
    result = decide_noisy(rows)
    cost = result["tests"]["cost"]
    assert (cost["estimate_pct"], cost["p_value"], cost["noise_measured"]) == (10.0, None, False)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"][0] == (
        "cost_usd saving in total spend 10.0%, the same on every gated task: the per-task differences do not vary, "
        "so no noise was measured and no p-value can be claimed"
    )


def test_one_task_is_no_test():
    rows = noisy_task("only", saving=0.3)
    result = decide_noisy(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"][0].endswith(
        "on one gated task: the test needs at least two, since the task is the unit of replication"
    )
    assert result["tests"]["design"] == {"tasks": 1, "runs_per_arm": 3, "text": "1 task × 3 runs per arm"}


def test_a_noisy_small_saving_is_not_enough_runs_to_tell():
    rows = []
    for index, effect in enumerate([0.12, -0.02, 0.10, 0.0, 0.08, -0.04, 0.15, -0.06, 0.05, 0.02, -0.03, 0.09]):
        rows += noisy_task(f"t{index:02d}", saving=effect, shift=index)
    result = decide_noisy(rows)
    cost = result["tests"]["cost"]
    assert result["decision"] == "keep_incumbent"
    assert cost["conclusion"] == "inconclusive"
    assert cost["ci_low_pct"] < 0 < cost["estimate_pct"] < cost["mde_pct"]
    assert "12 tasks × 3 runs per arm detects a " in result["reasons"][0]


def test_a_clear_noisy_saving_promotes_and_more_tasks_narrow_the_interval():
    small, large = decide_noisy(suite(12)), decide_noisy(suite(24))
    assert small["decision"] == large["decision"] == "promote"
    assert large["tests"]["cost"]["mde_pct"] < small["tests"]["cost"]["mde_pct"]
    assert large["tests"]["design"]["tasks"] == 24


def test_duplicate_rows_are_refused_by_name():
    rows = suite(3)
    rows.append(dict(next(row for row in rows if (row["task"], row["arm"], row["run"]) == ("t01", CAND, 2))))
    with pytest.raises(ValueError, match=r"duplicate result rows: task t01, arm candidate_workflow, run 2 \(2 rows\)"):
        decide_noisy(rows)
    with pytest.raises(ValueError, match="duplicate result rows"):
        document(rows)


def test_unequal_runs_are_insufficient_under_the_noise_aware_rule():
    rows = noisy_task("t1", saving=0.3) + [make_row("t1", CAND, 3, cost_usd=0.7)]
    result = decide_noisy(rows)
    assert result["decision"] == "insufficient_evidence"
    assert "t1: paired arms have different valid run counts (3/4 valid; 0/0 excluded)" in result["reasons"]
    assert result["tests"]["design"]["runs_per_arm"] is None
    assert result["tests"]["design"]["text"] == "1 task × 3–4 runs per arm (unequal)"


def test_unmeasured_cost_is_insufficient_under_the_noise_aware_rule():
    rows = arm_rows("t1", INC, cost_usd=1.0) + arm_rows("t1", CAND, cost_usd=[0.5, None, 0.5])
    result = decide_noisy(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["reasons"] == [
        "t1: cost_usd was not measured on every run in both paired arms; "
        "cannot rank on it (fix cost capture or choose another metric)"
    ]
    assert result["tests"]["cost"]["conclusion"] == "not_computable"


def test_all_failed_tasks_are_not_gated_and_cannot_promote():
    rows = arm_rows("t1", INC, (False,) * 3) + arm_rows("t1", CAND, (False,) * 3, cost_usd=0.5)
    result = decide_noisy(rows)
    assert result["decision"] == "insufficient_evidence"
    assert result["ungated_tasks"] == ["t1"]
    assert result["reasons"][-1] == "no task supplied quality signal: neither arm resolved a run anywhere in the set"
    assert result["tests"]["design"]["tasks"] == 0


def test_an_all_failed_task_beside_gated_ones_is_evidence_but_not_gated():
    rows = suite()
    rows += arm_rows("zz", INC, (False,) * 3, cost_usd=[1.0, 1.1, 0.9]) + arm_rows(
        "zz", CAND, (False,) * 3, cost_usd=[1.05, 0.95, 1.0]
    )
    result = decide_noisy(rows)
    assert result["decision"] == "promote"
    assert result["ungated_tasks"] == ["zz"] and len(result["gated_tasks"]) == 12
    assert result["tests"]["design"]["tasks"] == 12


def test_a_run_that_cost_nothing_is_a_cheap_observation_not_a_gap():
    """A session that exits at once costs $0 and resolves nothing: the pair is still decided, the zero counted at half
    the task's cheapest measured run on the log scale, the failure counted by the resolution test."""
    rows = suite(12)
    gone = next(row for row in rows if (row["task"], row["arm"], row["run"]) == ("t03", CAND, 1))
    gone.update(cost_usd=0.0, resolved=False, oracle_passed=False, error_kind="no-work-produced")
    result = decide_noisy(rows)
    assert result["decision"] != "insufficient_evidence"
    assert result["tests"]["cost"]["noise_measured"] is True
    assert result["tests"]["quality"]["candidate_resolved"] == 35
    check = next(task for task in result["tasks"] if task["task"] == "t03")["checks"]
    assert check["saving_pct"] is not None and check["regression_pct"] is not None
    # The zero enters at half the task's cheapest measured run, in either arm.
    assert gate_stats.floor_zeros([([1.0, 2.0], [0.0, 2.0])]) == [([1.0, 2.0], [0.5, 2.0])]
    assert gate_stats.floor_zeros([([0.0, 0.4], [0.8, 1.0])]) == [([0.2, 0.4], [0.8, 1.0])]
    # A metric that is zero on every run of both arms of a task has no scale: no cost test, named as such.
    none = suite(3)
    for row in none:
        if row["task"] == "t01":
            row["num_turns"] = 0
    kept = decide_noisy(none, metric="num_turns")
    assert kept["decision"] == "insufficient_evidence"
    assert kept["reasons"][0].startswith("the num_turns test could not be computed (a gated task has no measured run")


def fail(rows: list[dict], task: str, run: int, arm: str = CAND) -> None:
    row = next(row for row in rows if (row["task"], row["arm"], row["run"]) == (task, arm, run))
    row.update(resolved=False, oracle_passed=False, error_kind="oracle-failed")


def test_one_failure_in_many_runs_is_within_the_margin_but_not_in_few():
    many = suite(16, runs=4)
    fail(many, "t03", 2)
    # Both arms fail a run now and then elsewhere: the one failure is noise, within the margin.
    for task in ("t05", "t09"):
        fail(many, task, 0, arm=INC)
    result = decide_noisy(many)
    assert result["decision"] == "promote"
    assert result["tests"]["quality"]["conclusion"] == "not_worse"
    assert result["tests"]["quality"]["difference_pct"] == round(100 / 64, 1)
    # The upstream rule keeps the incumbent for that one failure.
    assert decide(many)["decision"] == "keep_incumbent"
    # Where no other run of the pair ever fails, the same one failure is a drop on its task: the only task the
    # candidate resolved less often, tested at alpha (a task given up is caught from its first failure).
    clean = suite(16, runs=4)
    fail(clean, "t03", 2)
    kept = decide_noisy(clean)
    assert kept["decision"] == "keep_incumbent"
    check = next(task for task in kept["tasks"] if task["task"] == "t03")["checks"]
    assert check["resolution_dropped"] and check["resolution_drop_adjusted_p"] == check["resolution_drop_p_value"]

    few = suite(6)
    fail(few, "t01", 0)
    fail(few, "t04", 1, arm=INC)
    small = decide_noisy(few)
    assert small["decision"] == "keep_incumbent"
    assert small["tests"]["quality"]["conclusion"] == "inconclusive"
    assert small["reasons"][0].startswith("not enough runs to show the resolution is within 10 points")


def test_all_resolved_runs_prove_only_what_their_number_can():
    """9 of 9 against 9 of 9 is what a candidate resolving 84 % does one time in five: no proof within 16 points."""
    quality = decide_noisy(suite(3), quality_margin_pct=16.0)["tests"]["quality"]
    assert quality["p_noninferiority"] == pytest.approx(0.0952, abs=1e-4)
    assert quality["conclusion"] == "inconclusive"
    assert decide_noisy(suite(12), quality_margin_pct=16.0)["tests"]["quality"]["conclusion"] == "not_worse"


def test_a_task_the_candidate_gave_up_on_keeps_the_incumbent_though_the_average_hides_it():
    """One task of twenty drops from 5/5 to 3/5 while the rest resolve everything: a 2-point average drop."""
    rows = suite(20, runs=5)
    fail(rows, "t04", 1)
    fail(rows, "t04", 3)
    result = decide_noisy(rows)
    assert result["tests"]["quality"]["conclusion"] == "not_worse"
    check = next(task for task in result["tasks"] if task["task"] == "t04")["checks"]
    assert check["resolution_dropped"] and check["resolution_drop_adjusted_p"] <= 0.05
    assert result["decision"] == "keep_incumbent"
    assert any(reason.startswith("t04: resolution fell from 5/5 to 3/5 (one-sided p ") for reason in result["reasons"])
    # A suite where both arms fail now and then explains the same two failures as noise.
    flaky = suite(20, runs=5)
    for task, run in (("t04", 1), ("t04", 3), ("t07", 0), ("t09", 2), ("t10", 4)):
        fail(flaky, task, run)
    for task, run in (("t01", 0), ("t02", 3), ("t05", 1), ("t08", 2), ("t11", 4), ("t06", 2)):
        fail(flaky, task, run, arm=INC)
    assert not any(task["checks"]["resolution_dropped"] for task in decide_noisy(flaky)["tasks"])


def test_credibly_better_resolution_promotes_only_within_the_spend_margin():
    rows = []
    for index in range(6):
        task = f"t{index}"
        rows += arm_rows(task, INC, (False, False, True, False, True), cost_usd=[1.0, 1.1, 0.9, 1.05, 0.95])
        rows += arm_rows(task, CAND, (True,) * 5, cost_usd=[v * (0.98 + 0.01 * index) for v in NOISE])
    result = decide_noisy(rows)
    quality = result["tests"]["quality"]
    assert quality["conclusion"] == "better" and quality["p_better"] <= quality["better_alpha"] == 0.0025
    assert result["decision"] == "promote"
    assert result["reasons"][0].startswith("resolution credibly better: candidate resolved 30/30, incumbent 12/30")
    assert "shown to be at most 10% higher" in result["reasons"][0]
    # 15 % dearer for the same resolution gain: beyond the 10 % the route accepts unless the policy says any cost.
    dear = [{**row, "cost_usd": row["cost_usd"] * 1.15} if row["arm"] == CAND else row for row in rows]
    kept = decide_noisy(dear)
    assert kept["decision"] == "keep_incumbent"
    assert any("a promotion on resolution alone needs the total spend shown" in reason for reason in kept["reasons"])
    assert decide_noisy(dear, resolution_cost_margin_pct=None)["decision"] == "promote"


def test_a_task_regression_blocks_only_when_it_is_credible():
    clear = suite(12)
    clear += arm_rows("zz", INC, cost_usd=[1.0, 1.01, 0.99]) + arm_rows("zz", CAND, cost_usd=[3.0, 3.03, 2.97])
    result = decide_noisy(clear)
    assert result["decision"] == "keep_incumbent"
    check = result["tasks"][-1]["checks"]
    assert check["regressed"] and check["regression_pct"] == 200.0 and check["regression_alpha"] == round(0.05 / 13, 6)
    assert result["reasons"][0].startswith("zz: cost_usd rose 200.0%, above the 20.0% task cap (one-sided p ")

    # Per-task differences that scatter widely between tasks make one task's 30 % rise no evidence of a regression.
    noisy = []
    for index, effect in enumerate([0.45, 0.05, 0.4, 0.1, 0.5, 0.0, 0.45, 0.1, 0.4, 0.05, 0.5]):
        noisy += noisy_task(f"t{index:02d}", saving=effect, shift=index, runs=4)
    noisy += noisy_task("zz", saving=-0.3, runs=4)
    check = decide_noisy(noisy)["tasks"][-1]["checks"]
    assert check["regression_pct"] > 20 and not check["regressed"]


def test_skipping_the_skill_more_than_the_incumbent_keeps_it():
    rows = suite()
    skipped = next(row for row in rows if row["arm"] == CAND and row["task"] == "t02" and row["run"] == 1)
    skipped.update(resolved=False, ok=False, error_kind="skill-not-invoked", skill_invoked=False)
    result = decide_noisy(rows)
    assert result["decision"] == "keep_incumbent"
    assert "t02: the candidate never invoked the skill under test in 1 run(s) (incumbent: 0)" in result["reasons"]


def test_the_noise_aware_rule_needs_rows_a_model_and_a_sandbox():
    rows = suite()
    assert decide_noisy(rows, rows_for_stats=False)["reasons"] == [
        "the noise-aware rule needs the per-run rows; none were supplied"
    ]
    assert decide_noisy(rows, model=None)["decision"] == "insufficient_evidence"
    unsandboxed = [{**row, "sandbox_backend": "none"} for row in rows]
    assert decide_noisy(unsandboxed)["decision"] == "insufficient_evidence"
    assert decide_noisy(unsandboxed, allow_unsandboxed=True)["decision"] == "promote"


def test_alpha_is_a_policy_value_the_tests_honour():
    rows = []
    for index, effect in enumerate([0.2, 0.0, 0.15, 0.05, 0.25, -0.05, 0.2, 0.1, 0.0, 0.15, 0.1, 0.05]):
        rows += noisy_task(f"t{index:02d}", saving=effect, shift=index, runs=3)
    p_value = decide_noisy(rows)["tests"]["cost"]["p_value"]
    assert 0.001 < p_value < 0.02
    assert decide_noisy(rows, alpha=0.01)["decision"] == "keep_incumbent"
    assert decide_noisy(rows, alpha=0.2)["decision"] == "promote"


def test_both_rules_report_the_tests_in_a_valid_document():
    rows = suite()
    for rule in ("noise_aware", "upstream"):
        doc = validate(
            promotion_document(
                rows,
                pairs=[(INC, CAND)],
                policy=resolve_policy({"rule": rule}),
                binding=binding(),
                run_status="complete",
                generated_at=GENERATED_AT,
            ),
            "promotion",
        )
        decision = doc["decisions"][0]
        assert decision["rule"] == rule == doc["policy"]["rule"]
        assert decision["tests"]["cost"]["conclusion"] == "cheaper"
        assert all("checks" in task for task in decision["tasks"])
    assert doc["policy"]["quality_rule"].startswith("no per-task resolution-rate regression")


def test_noise_aware_decisions_are_deterministic():
    rows = suite(6, saving=0.1)
    assert decide_noisy(rows) == decide_noisy(rows)


def test_one_run_per_cell_still_measures_noise_between_tasks():
    rows = []
    for index in range(36):
        rows += arm_rows(f"t{index:02d}", INC, (True,), cost_usd=1.0 + index % 5)
        rows += arm_rows(f"t{index:02d}", CAND, (True,), cost_usd=(1.0 + index % 5) * 0.8 * NOISE[index % 5])
    assert decide_noisy(rows)["decision"] == "insufficient_evidence"  # min_runs 3 by default
    result = decide_noisy(rows, min_runs=1)
    cost = result["tests"]["cost"]
    assert cost["noise_measured"] is True and cost["df"] == 35
    assert result["decision"] == "promote"


def test_a_decision_names_the_plugins_each_arm_loaded_by_digest():
    lean = {"name": "lookup-kit", "version": "1.0.0", "digest": "d" * 64}
    rows = arm_rows("t1", INC) + [{**row, "plugins": [lean]} for row in arm_rows("t1", CAND, cost_usd=0.5)]
    decision = document(rows)["decisions"][0]  # validated against the promotion schema
    assert decision["plugins"] == {"incumbent": [], "candidate": [lean]}
    # Without plugins the document is as before.
    assert "plugins" not in document(arm_rows("t1", INC) + arm_rows("t1", CAND, cost_usd=0.5))["decisions"][0]


# ─── Comparable rows: one Claude Code version and one model per pair ───────

OLD_CLI, NEW_CLI = "2.1.197", "2.1.328"


def saving_pair(**fields) -> list[dict]:
    """Two tasks where the candidate is 20 % cheaper and resolves as often; ``fields`` map a column to
    (incumbent value, candidate value) per task, e.g. ``cli_version=(OLD_CLI, NEW_CLI)``."""
    return noisy_task("greet", saving=0.2, **fields) + noisy_task("money", scale=2.0, saving=0.2, shift=2, **fields)


@pytest.mark.parametrize("rule", ["noise_aware", "upstream"])
def test_one_cli_version_per_pair_keeps_the_decision(rule):
    default = saving_pair() + suite(10)
    upgraded = saving_pair(cli_version=(NEW_CLI, NEW_CLI)) + suite(10, cli_version=(NEW_CLI, NEW_CLI))
    assert decide_noisy(default, rule=rule)["decision"] == "promote"
    assert decide_noisy(upgraded, rule=rule) == decide_noisy(default, rule=rule)


@pytest.mark.parametrize("rule", ["noise_aware", "upstream"])
def test_incumbent_and_candidate_cells_from_different_cli_versions_cannot_promote(rule):
    result = decide_noisy(saving_pair(cli_version=(OLD_CLI, NEW_CLI)), rule=rule)
    assert result["decision"] == "insufficient_evidence"
    assert (
        "rows are not comparable: the incumbent's cells (workflow) ran CLI version 2.1.197 (tasks: greet, money); "
        "the candidate's cells (candidate_workflow) ran CLI version 2.1.328 (tasks: greet, money); "
        "rerun the stale cells so both arms ran one CLI version"
    ) in result["reasons"]
    # The document that carries the refusal is a valid promotion.json.
    assert document(saving_pair(cli_version=(OLD_CLI, NEW_CLI)))["decisions"][0]["decision"] == "insufficient_evidence"


def test_one_arm_that_mixes_cli_versions_cannot_promote_and_the_reason_names_its_tasks():
    rows = saving_pair(cli_version=(NEW_CLI, NEW_CLI))
    stale = [{**row, "cli_version": OLD_CLI} if row["task"] == "money" and row["arm"] == CAND else row for row in rows]
    result = decide_noisy(stale)
    assert result["decision"] == "insufficient_evidence"
    (reason,) = [reason for reason in result["reasons"] if reason.startswith("rows are not comparable")]
    assert "the incumbent's cells (workflow) ran CLI version 2.1.328 (tasks: greet, money)" in reason
    assert (
        "the candidate's cells (candidate_workflow) ran CLI version 2.1.197 (tasks: money) and "
        "CLI version 2.1.328 (tasks: greet)"
    ) in reason


def test_cells_from_different_models_cannot_promote():
    rows = saving_pair(model=("claude-test-model", "claude-other-model"))
    for rule in ("noise_aware", "upstream"):
        result = decide_noisy(rows, rule=rule)
        assert result["decision"] == "insufficient_evidence"
        (reason,) = [reason for reason in result["reasons"] if reason.startswith("rows are not comparable")]
        assert "(workflow) ran model claude-test-model (tasks: greet, money)" in reason
        assert "(candidate_workflow) ran model claude-other-model (tasks: greet, money)" in reason
        assert reason.endswith("rerun the stale cells so both arms ran one model")


def test_excluded_rows_do_not_count_towards_comparability():
    """Only rows that are compared must agree: an excluded cell says nothing about the CLI the evidence ran on."""
    from skillbench.decision.gate import comparability_reasons

    rows = saving_pair(cli_version=(NEW_CLI, NEW_CLI))
    rows.append(make_row("greet", CAND, 3, resolved=False, error_kind="session-error", cli_version=OLD_CLI))
    assert comparability_reasons(rows, ["greet", "money"], (INC, CAND)) == []
    rows.append(make_row("greet", CAND, 4, cli_version=OLD_CLI))
    assert len(comparability_reasons(rows, ["greet", "money"], (INC, CAND))) == 1


# ─── One place for the policy defaults and the metrics ─────────────────────


def test_the_config_schema_and_the_shipped_config_state_the_gates_defaults():
    """The config schema states the defaults (tests/unit/test_settings.py holds every GatePolicy field to them);
    config/config.yaml repeats them, and the policy built from them is the default policy."""
    from pathlib import Path

    import yaml

    section = load_schema("config")["properties"]["gate"]["properties"]
    stated = {key: spec["default"] for key, spec in section.items()}
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "config.yaml").read_text())["gate"]
    assert shipped == stated
    assert all(type(shipped[key]) is type(value) for key, value in stated.items())
    # The config's defaults are the policy a promotion records when the config says nothing (the keys only review
    # cases read are recorded once set away from their default, so such a document is the one it always was).
    default = resolve_policy(None).as_dict()
    assert resolve_policy(shipped) == resolve_policy(None)
    always = {key: value for key, value in stated.items() if key not in RECORDED_WHEN_SET}
    assert {key: default[key] for key in always} == always and set(default) - set(always) == POLICY_KEYS_NOT_IN_CONFIG
    assert set(RECORDED_WHEN_SET) <= set(stated)


def test_the_schemas_name_the_gates_metrics_and_rules():
    config = load_schema("config")["properties"]["gate"]["properties"]
    promotion = load_schema("promotion")
    assert set(config["metric"]["enum"]) == set(PROMOTION_METRICS)
    assert set(promotion["$defs"]["metric"]["enum"]) == set(PROMOTION_METRICS)
    assert set(config["rule"]["enum"]) == set(RULES)
    assert set(promotion["properties"]["policy"]["properties"]["rule"]["enum"]) == set(RULES)
    assert set(promotion["$defs"]["decision"]["properties"]["rule"]["enum"]) == set(RULES)
    recorded = set(promotion["properties"]["policy"]["properties"]) - {"metric_warning", "quality_rule"}
    assert recorded == set(resolve_policy(None).as_dict()) | set(RECORDED_WHEN_SET)
    assert set(RECORDED_WHEN_SET).isdisjoint(promotion["properties"]["policy"]["required"])
