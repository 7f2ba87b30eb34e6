"""The upstream rule (``gate.rule: upstream``), kept decision for decision: run minimums, pairing, gated and
ungated tasks, the quality floor, task regression caps, the resolution margin, the median improvement, and the
optional bootstrap confidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from skillbench.base.records import Decision, ResultRow
from skillbench.decision.pairs import (
    PairEvidence,
    TaskEvidence,
    Verdict,
    check_evidence_base,
    decision_record,
    gated_improvements,
    median_improvement,
    pair_guards,
    resolution_margin,
    task_run_counts,
    unmeasured_reason,
)
from skillbench.decision.policy import GatePolicy
from skillbench.decision.review import pair_review_tests, upstream_review_guards
from skillbench.decision.stats import BOOTSTRAP_CONFIDENCE, bootstrap_median_ci
from skillbench.decision.triggers import pair_trigger_tests, trigger_blocks


def _upstream_task_checks(verdict: Verdict, task: TaskEvidence, policy: GatePolicy) -> None:
    """One paired task under the upstream rule: run counts, resolution, the quality floor, the metric."""
    row, metric = task.row, policy.metric
    name, improvement = row["task"], row["improvement_pct"]
    (n_inc, n_cand), (r_inc, r_cand) = task.valid, task.resolved
    if not row["gated"]:
        cap = policy.max_failed_task_regression_pct
        if improvement is not None and improvement < -cap:
            verdict.regression(
                f"{name}: {metric} regressed {-improvement:.1f}% on a task neither arm resolved, "
                f"above the {cap:.1f}% failed-task cap"
            )
        return
    verdict.lacking(task_run_counts(task, policy.min_runs))
    rate_inc = r_inc / n_inc if n_inc else 0.0
    rate_cand = r_cand / n_cand if n_cand else 0.0
    if rate_cand < rate_inc:
        verdict.regression(f"{name}: resolution regressed from {rate_inc:.0%} to {rate_cand:.0%}")
    if row["quality_floor_enforced"] and n_cand > 0 and r_cand != n_cand:
        trigger = (
            "a run never invoked the skill under test"
            if row["skill_attributable_failure"]
            else f"the incumbent resolves {r_inc}/{n_inc}"
        )
        verdict.regression(
            f"{name}: candidate must resolve every valid run for the oracle-backed quality floor "
            f"({trigger}; got {r_cand}/{n_cand})"
        )
    task_cap = policy.max_task_regression_pct
    if row["incumbent_metric"] is None or row["candidate_metric"] is None:
        verdict.lacking([unmeasured_reason(name, metric)])
    elif improvement is None:
        verdict.lacking([f"{name}: incumbent {metric} is zero; choose a metric with signal"])
    elif improvement < -task_cap:
        verdict.regression(f"{name}: {metric} regressed {-improvement:.1f}%, above the {task_cap:.1f}% task cap")


def _upstream_outcome(verdict: Verdict, pair: PairEvidence, policy: GatePolicy) -> str:
    """First matching decision wins: insufficiency, a regression, a resolution margin of 2, the median improvement."""
    if verdict.insufficient:
        return "insufficient_evidence"
    if verdict.regressed:
        return "keep_incumbent"
    margin = resolution_margin(pair)
    if margin >= 2:
        verdict.reasons.append(
            f"candidate improves total task resolution by {margin} runs (at least 2 required) with no task regression"
        )
        return "promote"
    if margin == 1:
        verdict.reasons.append(
            "total resolution improved by only 1 run — within the noise floor (2 required); "
            "deciding on efficiency instead"
        )
    metric, required = policy.metric, policy.min_improvement_pct
    median = median_improvement(gated_improvements(pair))
    verdict.reasons.append(f"median {metric} improvement is {median or 0.0:.1f}% (required {required:.1f}%)")
    return "promote" if median is not None and median >= required else "keep_incumbent"


def _confidence_outcome(verdict: Verdict, pair: PairEvidence, metric: str) -> str:
    """``require_confidence``: a promotion stands only when the bootstrap CI's lower bound is above 0."""
    bootstrap = bootstrap_median_ci(gated_improvements(pair))
    low = bootstrap["ci_low_pct"]
    if low is not None and low > 0:
        return "promote"
    if low is None:
        verdict.reasons.append(
            f"no bootstrap confidence interval for the median {metric} improvement could be computed; "
            "require_confidence needs one whose lower bound is above 0%"
        )
    else:
        verdict.reasons.append(
            f"bootstrap {BOOTSTRAP_CONFIDENCE:.0%} CI of the median {metric} improvement is "
            f"[{low:.1f}%, {bootstrap['ci_high_pct']:.1f}%]; require_confidence needs its lower bound above 0%"
        )
    return "keep_incumbent"


def upstream_decision(
    pair: PairEvidence,
    *,
    model: str | None,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
    generation: int = 0,
) -> Decision:
    """The upstream rule (``rule: upstream``), kept decision for decision.

    Tasks are evaluated in sorted task-id order. First matching decision wins: any
    insufficiency → insufficient_evidence; any quality or efficiency regression →
    keep_incumbent; resolution margin ≥ 2 → promote; else the median improvement over gated
    tasks must reach ``min_improvement_pct``. ``require_confidence`` additionally demands a
    bootstrap CI whose lower bound is above zero before any promotion.
    """
    verdict = Verdict()
    verdict.lacking(pair_guards(pair, model=model, policy=policy, rows=rows, needs_rows=False))
    for task in sorted([*pair.tasks, *pair.unpaired_tasks]):
        if task in pair.tasks:
            _upstream_task_checks(verdict, pair.tasks[task], policy)
        else:
            verdict.lacking([pair.missing_arm_reason(task)])
    tests = pair_review_tests(pair, rows, policy, None, generation)
    review = tests.get("review")
    if review is not None:
        upstream_review_guards(verdict, review, policy)
    triggers = pair_trigger_tests(
        rows,
        (pair.incumbent_arm, pair.candidate_arm),
        alpha=policy.alpha,
        margin_pct=policy.trigger_margin_pct,
    )
    for reason in trigger_blocks(triggers or {}):
        verdict.regression(reason)
    check_evidence_base(verdict, pair, policy)
    decision = _upstream_outcome(verdict, pair, policy)
    if decision == "promote" and policy.require_confidence:
        decision = _confidence_outcome(verdict, pair, policy.metric)
    record = decision_record(pair, rule="upstream", decision=decision, verdict=verdict, policy=policy, tests=tests)
    if review is not None:
        if decision == "promote":
            review["route"] = "resolution" if resolution_margin(pair) >= 2 else "cost"
        record["tests"]["review"] = review
    if triggers is not None:
        record["tests"]["triggers"] = triggers
    record["no_worse"] = not verdict.insufficient and not verdict.regressed
    return record
