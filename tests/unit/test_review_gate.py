"""The gate on review cases: weighted-F1 non-inferiority, the per-case blocks, and the two routes to promotion."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from rowfactory import MODEL, make_binding, make_row
from skillbench.base.artifacts import load_schema, validate
from skillbench.decision import review
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.gate import (
    GateInputError,
    evaluate_candidate,
    promotion_document,
    resolve_policy,
    run_design,
    sequential_decision,
)

INC, CAND = "review", "candidate_review"
DEFECTS, CLEANS, RUNS = 6, 2, 8
# A review's weighted F1 over its runs on a case: it varies, as real reviews do (mean 0.65).
F1_RUNS = (0.62, 0.71, 0.55, 0.68, 0.74, 0.6, 0.66, 0.64)


def metrics(case: str, f1: float = 0.65, blocker: float = 1.0, fp: int = 0, passed: bool = True) -> dict:
    """A review row's `review`: a defect case found its blocker (``blocker``), a clean control passed or not."""
    defect = case == "defect"
    return {
        "case": case,
        "output_error": None,
        "verdict": "request_changes" if defect else ("approve" if passed else "comment"),
        "expected_verdict": "request_changes" if defect else "approve",
        "findings": (2 if defect else 0) + fp,
        "defects": 2 if defect else 0,
        "blocking_defects": 1 if defect else 0,
        "tp": 2 if defect else 0,
        "fp": fp,
        "fn": 0,
        "precision": f1,
        "recall": f1,
        "f1": f1,
        "weighted_precision": f1,
        "weighted_recall": f1,
        "weighted_f1": f1,
        "blocker_recall": blocker,
        "verdict_correct": passed,
        "clean_control_passed": None if defect else passed,
    }


def broken(case: str) -> dict:
    """A review that broke the contract: zeros everywhere, the verdict wrong."""
    return {
        **metrics(case, f1=0.0, blocker=0.0, passed=False),
        "output_error": "review-not-json",
        "verdict": None,
        "findings": 0,
        "tp": 0,
        "fn": 2 if case == "defect" else 0,
        "verdict_correct": False,
    }


def suite_rows(
    arm: str,
    *,
    cost: float = 1.0,
    f1_shift: float = 0.0,
    case_f1: dict[str, float] | None = None,
    missed_blockers: dict[str, int] | None = None,
    failed_controls: dict[str, int] | None = None,
    reviews: dict[tuple[str, int], dict] | None = None,
    runs: int = RUNS,
    defects: int = DEFECTS,
    cleans: int = CLEANS,
    error_kinds: dict[tuple[str, int], str] | None = None,
) -> list[dict]:
    """One arm's rows on the review suite: ``d0..`` defect cases and ``c0..`` clean controls.

    The cost of a run varies by run and, for the candidate, its ratio by case (so the cost test measures a spread);
    ``f1_shift`` moves every defect case's F1, ``case_f1`` one case's; ``missed_blockers`` / ``failed_controls`` say
    how many of a case's first runs missed the blocker / failed the control; ``reviews`` replaces a run's metrics."""
    rows = []
    tasks = [(f"d{k}", "defect") for k in range(defects)] + [(f"c{k}", "clean") for k in range(cleans)]
    for index, (task, case) in enumerate(tasks):
        for run in range(runs):
            jitter = 1 + 0.04 * ((run * 7 + index * 3) % 5 - 2)
            ratio = 1 + (0.03 * (index % 3 - 1) if arm == CAND else 0.0)
            if case == "defect":
                shift = (case_f1 or {}).get(task, f1_shift)
                f1 = round(min(1.0, max(0.0, F1_RUNS[run % len(F1_RUNS)] + shift)), 4)
                found = run >= (missed_blockers or {}).get(task, 0)
                value = metrics(case, f1=f1, blocker=1.0 if found else 0.0)
                resolved = found
            else:
                passed = run >= (failed_controls or {}).get(task, 0)
                value = metrics(case, f1=1.0, fp=0 if passed else 2, passed=passed)
                resolved = passed
            value = (reviews or {}).get((task, run), value)
            kind = (error_kinds or {}).get((task, run))
            if value["output_error"] is not None:
                resolved, kind = False, kind or "review-invalid"
            rows.append(
                make_row(
                    task,
                    arm,
                    run,
                    resolved=resolved and kind is None,
                    error_kind=kind if kind else (None if resolved else "review-incorrect"),
                    cost_usd=round(cost * jitter * ratio, 6),
                    review=value,
                    **{"class": f"review-{case}"},
                )
            )
    return rows


def decide(rows: list[dict], **policy) -> dict:
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm=INC,
        candidate_arm=CAND,
        model=MODEL,
        policy=resolve_policy(policy or None),
        rows=rows,
    )


def case_record(decision: dict, task: str) -> dict:
    return next(case for case in decision["tests"]["review"]["cases"] if case["task"] == task)


def document(rows: list[dict], **policy) -> dict:
    doc = promotion_document(
        rows,
        pairs=[(INC, CAND)],
        policy=resolve_policy(policy or None),
        binding=make_binding([CAND]),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC),
    )
    return validate(doc, "promotion")


# ─── Promotion routes ───────────────────────────────────────────────────────


def test_a_cheaper_reviewer_of_equal_quality_is_promoted_on_cost_and_the_document_says_so():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7)
    doc = document(rows)
    decision = doc["decisions"][0]
    assert decision["decision"] == "promote", decision["reasons"]
    tests = decision["tests"]["review"]
    assert tests["route"] == "cost"
    assert (tests["defect_cases"], tests["clean_cases"]) == (DEFECTS, CLEANS)
    assert tests["weighted_f1"]["conclusion"] == "not_worse"
    assert tests["weighted_f1"]["difference"] == pytest.approx(0.0, abs=1e-9)
    assert decision["reasons"][0].startswith("cost_usd saving in total spend")
    assert any(reason.startswith("review quality not worse") for reason in decision["reasons"])
    assert [case["task"] for case in tests["cases"]] == sorted([f"d{k}" for k in range(DEFECTS)] + ["c0", "c1"])


def test_a_better_reviewer_at_equal_cost_is_promoted_on_review_quality():
    rows = suite_rows(INC) + suite_rows(CAND, f1_shift=0.2)
    decision = decide(rows)
    assert decision["decision"] == "promote", decision["reasons"]
    assert decision["tests"]["review"]["route"] == "review_quality"
    assert decision["tests"]["cost"]["conclusion"] != "cheaper"
    assert decision["reasons"][0].startswith("review quality credibly better")
    assert "not credibly higher" in decision["reasons"][0]
    # The review route shares the resolution route's alpha: half each, in a pair with defect cases.
    f1 = decision["tests"]["review"]["weighted_f1"]
    assert f1["gain_alpha"] == decision["tests"]["quality"]["better_alpha"] == pytest.approx(0.025 * 0.1 / 2)


def test_a_gain_on_some_cases_only_is_no_evidence_the_runs_can_multiply():
    # Much better on three cases, a little worse on three: the runs alone would call the mean gain certain; the
    # spread between the cases says it is not, and the test takes the larger.
    shifts = {"d0": 0.3, "d1": 0.3, "d2": 0.3, "d3": -0.05, "d4": -0.05, "d5": -0.05}
    rows = suite_rows(INC) + suite_rows(CAND, case_f1=shifts)
    decision = decide(rows)
    f1 = decision["tests"]["review"]["weighted_f1"]
    assert f1["variance_from"] == "cases" and f1["df"] == DEFECTS - 1
    assert f1["difference"] == pytest.approx(0.125, abs=0.01) and f1["conclusion"] == "not_worse"  # F1 clips at 1
    assert decision["decision"] == "keep_incumbent" and decision["tests"]["review"]["route"] is None
    uniform = suite_rows(INC) + suite_rows(CAND, f1_shift=0.125)
    assert decide(uniform)["tests"]["review"]["weighted_f1"]["variance_from"] == "runs"
    assert decide(uniform)["tests"]["review"]["route"] == "review_quality"


def test_a_better_reviewer_that_costs_credibly_more_is_not_promoted_on_review_quality():
    rows = suite_rows(INC) + suite_rows(CAND, cost=1.15, f1_shift=0.2)  # dearer, under the per-task cap
    decision = decide(rows)
    assert decision["decision"] == "keep_incumbent"
    assert decision["tests"]["review"]["route"] is None
    assert any("a promotion on review quality needs no worse elsewhere" in reason for reason in decision["reasons"])


# ─── Blocks ─────────────────────────────────────────────────────────────────


def test_a_cheaper_reviewer_whose_weighted_f1_is_lower_by_more_than_the_margin_keeps_the_incumbent():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, f1_shift=-0.2)
    decision = decide(rows)
    assert decision["decision"] == "keep_incumbent"
    assert decision["tests"]["review"]["weighted_f1"]["conclusion"] == "worse"
    dropped = [case["task"] for case in decision["tests"]["review"]["cases"] if case.get("f1_dropped")]
    assert dropped == [f"d{k}" for k in range(DEFECTS)]
    assert decision["reasons"][0].startswith("d0: weighted F1 fell from 0.65 to 0.45, more than the 0.1 margin")


def test_a_credibly_lower_weighted_f1_keeps_the_incumbent_even_within_the_margin():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, f1_shift=-0.08)
    decision = decide(rows)
    assert not any(case.get("f1_dropped") for case in decision["tests"]["review"]["cases"])
    assert decision["tests"]["review"]["weighted_f1"]["conclusion"] == "worse"
    assert decision["decision"] == "keep_incumbent"
    assert decision["reasons"][0].startswith("review quality credibly worse: weighted F1 over 6 defect case(s)")
    # A drop the runs cannot tell from noise passes.
    small = suite_rows(INC) + suite_rows(CAND, cost=0.7, f1_shift=-0.002)
    assert decide(small)["decision"] == "promote"


def test_a_review_quality_the_runs_cannot_show_within_the_margin_keeps_the_incumbent():
    rows = suite_rows(INC, runs=3, defects=2) + suite_rows(CAND, cost=0.7, runs=3, defects=2)
    decision = decide(rows, review_f1_margin=0.02, quality_margin_pct=100.0)
    assert decision["tests"]["review"]["weighted_f1"]["conclusion"] == "inconclusive"
    assert decision["decision"] == "keep_incumbent"
    assert decision["reasons"][0].startswith("not enough runs to show the review quality is within 0.02")


def test_one_defect_case_that_regresses_keeps_the_incumbent_though_the_mean_looks_fine():
    shifts = {f"d{k}": 0.03 for k in range(12)} | {"d3": -0.35}  # the mean: about no change
    rows = suite_rows(INC, defects=12) + suite_rows(CAND, cost=0.7, case_f1=shifts, defects=12)
    decision = decide(rows)
    assert decision["tests"]["review"]["weighted_f1"]["conclusion"] == "not_worse"
    assert decision["decision"] == "keep_incumbent"
    assert case_record(decision, "d3")["f1_dropped"] is True
    assert [case["task"] for case in decision["tests"]["review"]["cases"] if case.get("f1_dropped")] == ["d3"]
    assert decision["reasons"][0].startswith("d3: weighted F1 fell from 0.65 to 0.30, more than the 0.1 margin")
    # The same drop within the margin blocks nothing.
    assert decide(rows, review_f1_margin=0.4)["decision"] == "promote"


def test_a_defect_case_whose_blocker_recall_fell_keeps_the_incumbent():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, missed_blockers={"d1": 3})
    decision = decide(rows)
    record = case_record(decision, "d1")
    assert (record["incumbent_blocker_recall"], record["candidate_blocker_recall"]) == (1.0, 0.625)
    assert record["blockers_lost"] is True and record["blocker_drop_p_value"] <= 0.05
    assert decision["decision"] == "keep_incumbent"
    assert any(
        reason.startswith("d1: blocker recall fell: every blocking defect found in 5/8 candidate runs against 8/8")
        for reason in decision["reasons"]
    )
    # One miss where the incumbent misses as often is no loss.
    even = suite_rows(INC, missed_blockers={"d1": 1}) + suite_rows(CAND, cost=0.7, missed_blockers={"d1": 1})
    assert case_record(decide(even), "d1")["blockers_lost"] is False


def test_new_false_positives_on_a_clean_control_keep_the_incumbent():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, failed_controls={"c1": 3})
    decision = decide(rows)
    record = case_record(decision, "c1")
    assert record["clean_control_lost"] is True
    assert (record["incumbent_false_positives"], record["candidate_false_positives"]) == (0.0, 0.75)
    assert decision["decision"] == "keep_incumbent"
    assert any(
        reason.startswith("c1: new false positives on a clean control: the candidate passed it in 5/8 runs against 8/8")
        for reason in decision["reasons"]
    )
    assert case_record(decision, "c0")["clean_control_lost"] is False


def test_broken_reviews_are_counted_with_their_zeros():
    broken_runs = {("d2", run): broken("defect") for run in range(4)}
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, reviews=broken_runs)
    decision = decide(rows)
    record = case_record(decision, "d2")
    assert record["candidate_runs"] == RUNS  # counted, never excluded
    assert record["candidate_blocker_recall"] == 0.5 and record["blockers_lost"] is True
    assert record["candidate_weighted_f1"] < record["incumbent_weighted_f1"] - 0.25
    assert decision["decision"] == "keep_incumbent"


def test_a_review_that_edited_the_code_earns_nothing_though_its_row_keeps_its_score():
    edited = {("d2", run): "review-edited-code" for run in range(4)} | {("c0", 0): "review-edited-code"}
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, error_kinds=edited)
    assert all(row["review"]["weighted_f1"] > 0 for row in rows if row["error_kind"] == "review-edited-code")
    decision = decide(rows)
    d2, c0 = case_record(decision, "d2"), case_record(decision, "c0")
    assert d2["candidate_runs"] == RUNS and d2["candidate_successes"] == RUNS - 4 and d2["blockers_lost"] is True
    assert d2["candidate_weighted_f1"] < d2["incumbent_weighted_f1"] - 0.25
    assert c0["candidate_successes"] == RUNS - 1
    assert decision["decision"] == "keep_incumbent"


def test_excluded_runs_drop_out_of_the_review_evidence():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, error_kinds={("d0", 0): "session-error"})
    decision = decide(rows)
    assert case_record(decision, "d0")["candidate_runs"] == RUNS - 1
    assert decision["tests"]["review"]["weighted_f1"]["candidate_runs"] == DEFECTS * RUNS - 1
    assert decision["decision"] == "insufficient_evidence"  # the pair's rule: no excluded runs on a gated task


def test_weighted_f1_that_never_varies_claims_nothing():
    flat = {(f"d{k}", run): metrics("defect", f1=0.8) for k in range(DEFECTS) for run in range(RUNS)}
    rows = suite_rows(INC, reviews=flat) + suite_rows(CAND, cost=0.7, reviews=flat)
    decision = decide(rows)
    assert decision["tests"]["review"]["weighted_f1"]["conclusion"] == "not_computable"
    assert decision["decision"] == "insufficient_evidence"
    assert "no noise was measured" in decision["reasons"][0]


def test_a_review_row_without_its_score_is_no_evidence():
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7)
    rows[0] = {**rows[0], "review": None}
    decision = decide(rows)
    assert decision["tests"]["review"]["unscored_cases"] == [rows[0]["task"]]
    assert decision["decision"] == "insufficient_evidence"


def test_clean_controls_alone_are_judged_on_false_positives_only():
    rows = suite_rows(INC, defects=0, cleans=4, runs=10) + suite_rows(CAND, cost=0.7, defects=0, cleans=4, runs=10)
    decision = decide(rows)
    assert decision["tests"]["review"]["defect_cases"] == 0
    assert decision["tests"]["quality"]["better_alpha"] == pytest.approx(0.025 * 0.1)  # no review route to share
    assert decision["decision"] == "promote" and decision["tests"]["review"]["route"] == "cost"
    worse = suite_rows(INC, defects=0, cleans=4, runs=10) + suite_rows(
        CAND, cost=0.7, defects=0, cleans=4, runs=10, failed_controls={"c2": 4}
    )
    assert decide(worse)["decision"] == "keep_incumbent"


# ─── The upstream rule, pairs without review cases, the policy ──────────────


def test_the_upstream_rule_blocks_on_medians_and_points():
    equal = suite_rows(INC) + suite_rows(CAND, cost=0.7)
    promoted = decide(equal, rule="upstream")
    assert promoted["decision"] == "promote" and promoted["tests"]["review"]["route"] == "cost"
    one_miss = suite_rows(INC) + suite_rows(CAND, cost=0.7, missed_blockers={"d4": 1})
    kept = decide(one_miss, rule="upstream")
    assert kept["decision"] == "keep_incumbent"
    assert "d4: mean blocker recall fell from 1.00 to 0.88" in kept["reasons"]
    lower = suite_rows(INC) + suite_rows(CAND, cost=0.7, case_f1={"d0": -0.2})
    assert any(r.startswith("d0: median weighted F1 fell from") for r in decide(lower, rule="upstream")["reasons"])


def test_a_pair_without_review_cases_records_no_review_test_and_no_review_policy():
    rows = [make_row(f"t{k}", arm, run, cost_usd=cost * (1 + 0.01 * ((run + k) % 3))) for k in range(3)
            for arm, cost in ((INC, 1.0), (CAND, 0.9)) for run in range(3)]  # fmt: skip
    doc = document(rows)
    assert set(doc["decisions"][0]["tests"]) == {"design", "cost", "cost_alternative", "quality"}
    assert "review_f1_margin" not in doc["policy"]
    assert "review_f1_margin" in document(rows, review_f1_margin=0.2)["policy"]


def test_a_sequential_look_decides_review_cases_and_records_them():
    design = run_design({"min": 4, "max": 8, "step": 2})
    blocked = suite_rows(INC) + suite_rows(CAND, cost=0.7, missed_blockers={"d1": 4})
    decision = sequential_decision(
        blocked, incumbent_arm=INC, candidate_arm=CAND, model=MODEL, policy=resolve_policy(None), design=design
    )
    assert decision["decision"] == "keep_incumbent"
    assert [look["runs"] for look in decision["looks"]] == [4]  # a block stops at the first look
    assert case_record(decision, "d1")["blockers_lost"] is True
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7)
    doc = validate(
        promotion_document(
            rows,
            pairs=[(INC, CAND)],
            policy=resolve_policy(None),
            binding=make_binding([CAND]),
            run_status="complete",
            generated_at=datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC),
            design=design,
        ),
        "promotion",
    )
    looked = doc["decisions"][0]
    assert looked["decision"] == "promote" and looked["tests"]["review"]["route"] == "cost"
    # A look's review test runs at that look's quality alpha.
    assert looked["tests"]["review"]["weighted_f1"]["alpha"] == looked["looks"][-1]["quality_alpha"]


def test_the_review_margin_is_a_typed_policy_key_with_the_schemas_default():
    spec = load_schema("config")["properties"]["gate"]["properties"]["review_f1_margin"]
    default = resolve_policy(None)
    assert default.review_f1_margin == spec["default"] and type(default.review_f1_margin) is float
    assert resolve_policy({"review_f1_margin": 0}).review_f1_margin == 0.0
    for bad in (-0.1, 1.5, "0.1", True, float("nan")):
        with pytest.raises(GateInputError, match="review_f1_margin"):
            resolve_policy({"review_f1_margin": bad})
    # Recorded only when set away from the default; what is recorded resolves back to the same policy.
    assert "review_f1_margin" not in default.as_dict()
    custom = dataclasses.replace(default, review_f1_margin=0.2)
    assert custom.as_dict()["review_f1_margin"] == 0.2 and resolve_policy(custom.as_dict()) == custom


def test_the_case_checks_test_each_case_at_alpha():
    # One blocker miss of eight where the pair never misses otherwise: a loss at alpha, not after Holm over six cases.
    rows = suite_rows(INC) + suite_rows(CAND, cost=0.7, missed_blockers={"d5": 1})
    record = case_record(decide(rows), "d5")
    assert record["blocker_drop_p_value"] <= 0.05 < record["blocker_drop_adjusted_p"]
    assert record["blockers_lost"] is True
    assert review.CASE_ADJUSTMENT == "none"
