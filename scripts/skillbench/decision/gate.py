"""The promotion gate: result rows + policy → a reproducible decision per candidate arm, and the generation's
``promotion/v1`` document.

The entry points: ``evaluate_candidate`` (one pair, under the policy's rule: ``noise_aware`` or ``upstream``) and
``promotion_document`` (every pair of a generation, fixed or sequential, bound to its evidence, with the verdict
across agents and the experiment's error control). The parts live beside it, one module per concern:
``policy`` (the typed policy), ``pairs`` (the gathered evidence and the checks both rules run), ``significance``
(the tests behind a decision), ``upstream`` and ``noise_aware`` (the rules), ``agents`` (across agents),
``sequential`` (looks) and ``document`` (the document's other parts); this module re-exports the names callers use.
Pure: no clock, no files, no randomness beyond a fixed-seed generator, so the same rows and policy always give the
same document.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from skillbench.base.artifacts import utc_timestamp
from skillbench.base.records import ContentFlag, Decision, PromotionDocument, ResultRow
from skillbench.decision.agents import across_agents, check_policy_design, pair_agent
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.document import (
    ABORTED_REASON,
    PROMOTION_SCHEMA,
    QUALITY_RULES,
    check_promotion_inputs,
    hold_flagged,
    plugin_pins,
    summarize_gate,
)
from skillbench.decision.noise_aware import noise_aware_decision
from skillbench.decision.pairs import (
    MAIN_LOOP_ONLY_METRICS,
    MAIN_LOOP_ONLY_WARNING,
    ByTask,
    check_unique_rows,
    comparability_reasons,
    concurrent_rows,
    metric_value,
    metric_warning,
    pair_evidence,
    paired_runs,
)
from skillbench.decision.policy import (
    ACROSS_AGENTS,
    GENERATION_SPENDING,
    OBJECTIVES,
    POLICY_KEYS_NOT_IN_CONFIG,
    PROMOTION_METRICS,
    RECORDED_WHEN_SET,
    RULES,
    GateInputError,
    GatePolicy,
    error_control,
    generation_alpha,
    resolve_policy,
)
from skillbench.decision.sequential import SEQUENTIAL_DEFAULTS, look_alphas, run_design, sequential_decision
from skillbench.decision.significance import RESOLUTION_ROUTE_SHARE, candidate_tests, cost_sentence, quality_sentence
from skillbench.decision.stats import (
    BOOTSTRAP_CONFIDENCE,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_median_ci,
    sign_test,
)
from skillbench.decision.upstream import upstream_decision

__all__ = [
    "ACROSS_AGENTS",
    "BOOTSTRAP_CONFIDENCE",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "GENERATION_SPENDING",
    "MAIN_LOOP_ONLY_METRICS",
    "MAIN_LOOP_ONLY_WARNING",
    "OBJECTIVES",
    "POLICY_KEYS_NOT_IN_CONFIG",
    "PROMOTION_METRICS",
    "QUALITY_RULES",
    "RECORDED_WHEN_SET",
    "RESOLUTION_ROUTE_SHARE",
    "RULES",
    "SEQUENTIAL_DEFAULTS",
    "GateInputError",
    "GatePolicy",
    "across_agents",
    "bootstrap_median_ci",
    "candidate_tests",
    "check_policy_design",
    "comparability_reasons",
    "concurrent_rows",
    "cost_sentence",
    "error_control",
    "evaluate_candidate",
    "generation_alpha",
    "look_alphas",
    "metric_value",
    "pair_agent",
    "paired_runs",
    "promotion_document",
    "quality_sentence",
    "resolve_policy",
    "run_design",
    "sequential_decision",
    "sign_test",
    "summarize_gate",
]


def evaluate_candidate(
    by_task: ByTask,
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy | None = None,
    rows: Sequence[ResultRow] | None = None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> Decision:
    """Decide promote / keep_incumbent / insufficient_evidence for one candidate arm.

    ``by_task`` is ``aggregate_by_task`` output; ``rows`` are the raw rows behind it (for the
    paired per-run statistics, the tests, the sandbox check and the check that every row ran the
    same Claude Code version and model). ``policy.rule`` picks the rule: ``noise_aware``
    (default; needs rows) or ``upstream``. Both report the same tests (``tests``: design, cost,
    quality) and per-task checks, whatever they decide on. ``generation`` (from 0) sets the share of
    alpha the tests spend (``generation_alpha``). Rows that hold one (task, arm, run) twice are refused.
    """
    policy = policy if policy is not None else resolve_policy(None)
    if rows is not None:
        check_unique_rows(rows)
    if policy.rule != "noise_aware" and look_alphas is not None:
        raise GateInputError("sequential looks need gate.rule noise_aware (the upstream rule has no alpha to spend)")
    pair = pair_evidence(by_task, incumbent_arm=incumbent_arm, candidate_arm=candidate_arm, policy=policy, rows=rows)
    if policy.rule == "upstream":
        return upstream_decision(pair, model=model, policy=policy, rows=rows, generation=generation)
    decision, _ = noise_aware_decision(
        pair, model=model, policy=policy, rows=rows, look_alphas=look_alphas, generation=generation
    )
    return decision


def promotion_document(
    rows: Sequence[ResultRow],
    *,
    pairs: list[tuple[str, str]],
    policy: GatePolicy | None,
    binding: dict[str, Any],
    run_status: str,
    generated_at: datetime,
    design: dict[str, Any] | None = None,
    cut_short: dict[str, str] | None = None,
    generation: int = 0,
    content_flags: Sequence[ContentFlag] | None = None,
    accept_flags: Sequence[str] = (),
) -> PromotionDocument:
    """The ``promotion/v1`` document: one decision per (incumbent, candidate) pair, bound to its evidence.

    Each pair compares the candidate's rows with the incumbent's of the same batches (``concurrent_rows``: the
    anchor that ran beside it) and records which in ``concurrency``; rows that record no batch are all compared,
    and the decision says they were not concurrent. With a sequential ``design`` (``run_design``) every decision
    replays its pair's looks over those rows (``sequential_decision``) and carries ``looks`` and ``sequential``; a
    pair named in ``cut_short`` (candidate arm → why, e.g. the budget) whose next look could not run is
    insufficient_evidence with that reason.

    ``binding`` supplies exactly the fields in ``BINDING_FIELDS``; its
    ``required_candidate_arms`` must list the candidates of ``pairs`` in order. An aborted run
    forces every decision to insufficient_evidence. ``generated_at`` must be timezone-aware;
    the evidence expires ``max_age_days`` later. ``generation`` (from 0) is the generation the rows are of:
    it sets the alpha its tests spend, and ``error_control`` states what that means for the experiment.

    ``content_flags`` are the candidate's content flags (overlay.json's ``content_review``; None for an overlay
    record without one) and ``accept_flags`` the categories the user accepts: a promotion a flag of another
    category would carry is held back (``document.hold_flagged``) and the document's ``content_review`` says so.
    """
    policy = policy if policy is not None else resolve_policy(None)
    check_promotion_inputs(pairs, binding, run_status, generated_at)
    check_unique_rows(rows)
    decisions = []
    for incumbent_arm, candidate_arm in pairs:
        # The candidate against what ran beside it: its batch's anchor, never the cache or another generation.
        pair_rows, concurrency = concurrent_rows(rows, incumbent_arm, candidate_arm)
        pair: dict[str, Any] = {
            "incumbent_arm": incumbent_arm,
            "candidate_arm": candidate_arm,
            "model": binding["benchmark_model"],
            "policy": policy,
            "generation": generation,
        }
        if design is not None and design["kind"] == "sequential":
            decision = sequential_decision(pair_rows, **pair, design=design)
            why = (cut_short or {}).get(candidate_arm)
            if decision["sequential"]["status"] == "continue" and why is not None:
                decision["sequential"]["cut_short"] = True
                decision["reasons"].insert(0, f"cut short: {why}")
        else:
            decision = evaluate_candidate(aggregate_by_task(pair_rows), **pair, rows=pair_rows)
        decision["concurrency"] = concurrency
        if not concurrency["concurrent"]:
            decision["reasons"].append(f"not concurrent: {concurrency['note']}")
        if run_status != "complete":
            decision["decision"] = "insufficient_evidence"
            decision["reasons"] = [ABORTED_REASON, *decision["reasons"]]
        pins = plugin_pins(rows, incumbent_arm, candidate_arm)
        if pins["incumbent"] or pins["candidate"]:
            decision["plugins"] = pins
        decisions.append(decision)

    review = None if content_flags is None else hold_flagged(decisions, content_flags, accept_flags)
    generated = generated_at.astimezone(UTC)
    check_policy_design(policy, design)
    document: PromotionDocument = {
        "schema": PROMOTION_SCHEMA,
        "run_status": run_status,
        "generated_at": utc_timestamp(generated),
        "evidence_expires_at": utc_timestamp(generated + timedelta(days=policy.max_age_days)),
        "policy": {
            **policy.as_dict(),
            "metric_warning": metric_warning(policy.metric),
            "quality_rule": QUALITY_RULES[policy.rule],
        },
        "decisions": decisions,
        "agents": across_agents(decisions, rows, policy),
        "error_control": error_control(policy, generation),
        "benchmark_model": binding["benchmark_model"],
        "effort": binding["effort"],
        "proposer_model": binding["proposer_model"],
        "candidate_origin": binding["candidate_origin"],
        "candidate_overlay_digest": binding["candidate_overlay_digest"],
        "required_candidate_arms": binding["required_candidate_arms"],
        "selected_tasks": binding["selected_tasks"],
        "target_base_digests": binding["target_base_digests"],
    }
    if review is not None:
        document["content_review"] = review
    return document
