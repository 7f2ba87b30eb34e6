"""The noise-aware rule (the default, docs/gate.md): the upstream guards, then a cost test across tasks on the
policy's objective and a quality test at the generation's share of alpha; per-task guards (a resolution drop, a
skipped skill, a credible cost rise) keep the incumbent, and a promotion on resolution alone needs its spend within
the policy's margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillbench.base.records import Decision, ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.pairs import (
    PairEvidence,
    TaskEvidence,
    Verdict,
    check_evidence_base,
    decision_record,
    pair_guards,
    task_run_counts,
    unmeasured_reason,
)
from skillbench.decision.policy import GatePolicy
from skillbench.decision.review import f1_sentence, pair_review_tests, review_guards
from skillbench.decision.significance import cost_sentence, p_text, pct_text, quality_sentence
from skillbench.decision.triggers import pair_trigger_tests, trigger_regressions, trigger_unshown


def _noise_aware_task_checks(
    verdict: Verdict, task: TaskEvidence, check: dict[str, Any], policy: GatePolicy, paired: int
) -> None:
    """One paired task under the noise-aware rule: run counts, the metric, Fisher's test, skill use, cost rise."""
    row, metric, alpha = task.row, policy.metric, policy.alpha
    name = row["task"]
    if not row["gated"]:
        if check["regressed"]:
            verdict.regression(
                f"{name}: {metric} rose {check['regression_pct']:.1f}% on a task neither arm resolved, above the "
                f"{policy.max_failed_task_regression_pct:.1f}% failed-task cap (one-sided p "
                f"{p_text(check['regression_p_value'])}, alpha/{paired})"
            )
        return
    verdict.lacking(task_run_counts(task, policy.min_runs))
    # A run that measured zero (a session that exited at once) is a cheap observation, floored on the log scale by
    # the cost test (stats.floor_zeros), not a gap in the evidence.
    if task.run_unmeasured:
        verdict.lacking([unmeasured_reason(name, metric)])
    if check["resolution_dropped"]:
        verdict.regression(
            f"{name}: resolution fell from {row['incumbent_resolved']} to {row['candidate_resolved']} "
            f"(one-sided p {p_text(check['resolution_drop_p_value'])}, Holm-adjusted over the tasks it resolved "
            f"less often {p_text(check['resolution_drop_adjusted_p'])}, alpha {alpha:g})"
        )
    skips_inc, skips_cand = task.skipped_skill
    if skips_inc < skips_cand:
        verdict.regression(
            f"{name}: the candidate never invoked the skill under test in {skips_cand} run(s) (incumbent: {skips_inc})"
        )
    if check["regressed"]:
        verdict.regression(
            f"{name}: {metric} rose {check['regression_pct']:.1f}%, above the "
            f"{policy.max_task_regression_pct:.1f}% task cap (one-sided p "
            f"{p_text(check['regression_p_value'])}, alpha/{paired})"
        )


def resolution_route(tests: dict[str, Any], policy: GatePolicy) -> tuple[bool, str]:
    """Whether a candidate whose resolution is credibly better may be promoted on that alone, and the sentence why."""
    quality, margin = tests["quality"], policy.resolution_cost_margin_pct
    if margin is None:
        return True, quality_sentence(quality)
    spend = tests["cost"] if tests["cost"]["objective"] == "total_spend" else tests["cost_alternative"]
    p_within = gate_stats.cost_within_pct(spend, margin)
    shown = p_within is not None and p_within <= quality["alpha"]
    cost = (
        f"total spend {pct_text(-spend['estimate_pct'] if spend['estimate_pct'] is not None else None)} against the "
        f"incumbent's, shown to be at most {margin:g}% higher (one-sided p {p_text(p_within)}, alpha "
        f"{quality['alpha']:g})"
    )
    if shown:
        return True, f"{quality_sentence(quality)}; {cost}"
    return False, (
        f"{quality_sentence(quality)}, but a promotion on resolution alone needs the total spend shown to be at most "
        f"{margin:g}% higher than the incumbent's (resolution_cost_margin_pct; one-sided p {p_text(p_within)}, alpha "
        f"{quality['alpha']:g})"
    )


def _spend_guard(tests: dict[str, Any], alpha: float) -> str | None:
    """Why a candidate cheaper per task is still kept: its total spend is credibly higher (per_task objective only)."""
    spend = tests["cost_alternative"]
    if tests["cost"]["objective"] != "per_task" or spend["p_higher"] is None or spend["p_higher"] > alpha:
        return None
    return (
        f"the suite's total spend is credibly higher: {pct_text(-spend['estimate_pct'])} against the incumbent's "
        f"(one-sided p {p_text(spend['p_higher'])}, alpha {alpha:g}); a cheaper per-task geometric mean does not "
        "promote a candidate that costs more in total"
    )


def _noise_aware_outcome(verdict: Verdict, tests: dict[str, Any], policy: GatePolicy) -> str:
    """After the guards: resolution credibly better promotes (if its spend is within the policy's margin), worse or
    unshown keeps; then the cost test decides, and a per-task objective also needs the total spend not credibly higher.
    A pair with review cases first passes the review-quality test (``_review_outcome``), and its ``tests.review``
    records the route a promotion took.

    The sentence that decided leads the reasons."""
    cost, quality, metric = tests["cost"], tests["quality"], policy.metric
    review = tests.get("review")
    if verdict.insufficient:
        return "insufficient_evidence"
    if verdict.regressed:
        return "keep_incumbent"
    if review is not None and review["defect_cases"]:
        decided = _review_outcome(verdict, tests, policy)
        if decided is not None:
            return decided
    if quality["conclusion"] == "better":
        allowed, sentence = resolution_route(tests, policy)
        if allowed:
            verdict.reasons.insert(0, sentence)
            if review is not None:
                review["route"] = "resolution"
            return "promote"
        verdict.reasons.append(sentence)
    elif quality["conclusion"] == "worse":
        verdict.reasons.insert(0, quality_sentence(quality))
        return "keep_incumbent"
    if cost["conclusion"] == "not_computable":
        verdict.reasons.insert(0, cost_sentence(cost, metric, tests["design"]["text"]))
        return "insufficient_evidence"
    if quality["conclusion"] == "inconclusive":
        verdict.reasons[:0] = [quality_sentence(quality), cost_sentence(cost, metric, tests["design"]["text"])]
        return "keep_incumbent"
    guard = _spend_guard(tests, policy.alpha) if cost["conclusion"] == "cheaper" else None
    verdict.reasons[:0] = [cost_sentence(cost, metric, tests["design"]["text"]), quality_sentence(quality)]
    if guard:
        verdict.reasons.insert(0, guard)
        return "keep_incumbent"
    if cost["conclusion"] == "cheaper" and review is not None:
        review["route"] = "cost"
    return "promote" if cost["conclusion"] == "cheaper" else "keep_incumbent"


def _review_outcome(verdict: Verdict, tests: dict[str, Any], policy: GatePolicy) -> str | None:
    """The weighted-F1 test of a pair with defect cases: not computable → insufficient_evidence, credibly worse or not
    shown within the margin → keep; credibly better promotes on review quality when the resolution is not credibly
    worse and the total spend not credibly higher (one-sided at the policy's alpha). None: the cost and resolution
    routes decide (the F1 sentence joins the reasons)."""
    review = tests["review"]
    f1, sentence = review["weighted_f1"], f1_sentence(review)
    conclusion = f1["conclusion"]
    if conclusion == "not_computable":
        verdict.reasons.insert(0, sentence)
        return "insufficient_evidence"
    if conclusion in ("worse", "inconclusive"):
        verdict.reasons.insert(0, sentence)
        return "keep_incumbent"
    if conclusion == "better":
        spend = tests["cost"] if tests["cost"]["objective"] == "total_spend" else tests["cost_alternative"]
        dearer = spend["p_higher"] is not None and spend["p_higher"] <= policy.alpha
        if tests["quality"]["conclusion"] != "worse" and not dearer:
            cost = (
                f"total spend {pct_text(-spend['estimate_pct'] if spend['estimate_pct'] is not None else None)} "
                f"against the incumbent's, not credibly higher (one-sided p {p_text(spend['p_higher'])}, alpha "
                f"{policy.alpha:g})"
            )
            verdict.reasons.insert(0, f"{sentence}; {cost}")
            review["route"] = "review_quality"
            return "promote"
        why = (
            "the resolution is credibly worse"
            if tests["quality"]["conclusion"] == "worse"
            else f"the total spend is credibly higher (one-sided p {p_text(spend['p_higher'])}, alpha {policy.alpha:g})"
        )
        verdict.reasons.append(f"{sentence}, but a promotion on review quality needs no worse elsewhere: {why}")
        return None
    verdict.reasons.append(sentence)
    return None


def noise_aware_decision(
    pair: PairEvidence,
    *,
    model: str | None,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> tuple[Decision, bool]:
    """The default rule: the upstream guards, then a cost test and a quality test at the generation's alpha.

    Guards that make the evidence unusable give insufficient_evidence (as upstream). A gated
    task whose resolution dropped against the suite's failure rate (Holm over the tasks), a
    candidate that skipped the skill under test more often than the incumbent, or a task whose
    cost rose credibly above its cap keeps the incumbent. Then: resolution credibly better →
    promote when its total spend is shown within the policy's margin; resolution credibly worse
    → keep; a cost test that cannot be computed → insufficient_evidence; resolution not shown
    within the margin → keep; cost credibly lower by at least the floor (and, for a per-task
    objective, a total spend not credibly higher) → promote; anything else keeps the incumbent
    with the reason the cost test gives.

    Returns the decision and whether a per-task guard (not a test) kept the incumbent: an
    interim look stops at once on such a regression.
    """
    verdict = Verdict()
    verdict.lacking(pair_guards(pair, model=model, policy=policy, rows=rows, needs_rows=True))
    verdict.lacking([pair.missing_arm_reason(task) for task in pair.unpaired_tasks])
    tests = pair_review_tests(pair, rows, policy, look_alphas, generation)
    for name, task in pair.tasks.items():
        _noise_aware_task_checks(verdict, task, tests["checks"][name], policy, len(pair.tasks))
    if tests.get("review") is not None:
        review_guards(verdict, tests["review"], policy)
    triggers = pair_trigger_tests(
        rows,
        (pair.incumbent_arm, pair.candidate_arm),
        alpha=tests["quality"]["alpha"],
        margin_pct=policy.trigger_margin_pct,
    )
    for reason in trigger_regressions(triggers or {}):
        verdict.regression(reason)
    check_evidence_base(verdict, pair, policy)
    decision = _noise_aware_outcome(verdict, tests, policy)
    unshown = trigger_unshown(triggers or {})
    if decision == "promote" and unshown:
        decision = "keep_incumbent"
        verdict.reasons[:0] = unshown
    record = decision_record(pair, rule="noise_aware", decision=decision, verdict=verdict, policy=policy, tests=tests)
    if tests.get("review") is not None:
        record["tests"]["review"] = tests["review"]
    if triggers is not None:
        record["tests"]["triggers"] = triggers
    record["no_worse"] = (
        not verdict.insufficient and not verdict.regressed and _not_worse_on_tests(tests, policy) and not unshown
    )
    return record, verdict.regressed


def spend_shown_within_margin(tests: dict[str, Any], policy: GatePolicy) -> bool:
    """Whether a pair's total spend is shown not dearer: within ``resolution_cost_margin_pct`` (one-sided at the
    generation's alpha, the t and the sign-flip test: ``stats.cost_within_pct``), or — with the margin null, any
    price — not credibly higher (one-sided at the policy's alpha)."""
    spend = tests["cost"] if tests["cost"]["objective"] == "total_spend" else tests["cost_alternative"]
    margin = policy.resolution_cost_margin_pct
    if margin is None:
        return spend["p_higher"] is None or spend["p_higher"] > policy.alpha
    p_within = gate_stats.cost_within_pct(spend, margin)
    return p_within is not None and p_within <= tests["quality"]["alpha"]


def _not_worse_on_tests(tests: dict[str, Any], policy: GatePolicy) -> bool:
    """The no-worse guards a test gives (``across_agents: any`` asks them of every pair): the resolution shown within
    the margin (or better), the weighted F1 too where there are review cases, and the total spend shown within the
    spend margin (``spend_shown_within_margin``): a pair that merely could not show itself dearer is no evidence
    that it is not."""
    review = tests.get("review")
    review_shown = (
        review is None or not review["defect_cases"] or (review["weighted_f1"]["conclusion"] in ("not_worse", "better"))
    )
    shown = tests["quality"]["conclusion"] in ("not_worse", "better")
    return shown and spend_shown_within_margin(tests, policy) and review_shown
