"""What a ``promotion/v1`` document holds besides its decisions: the schema id, the binding fields and their
check, the run statuses, the quality-rule texts it records beside the policy, the plugin pins of a pair, the
candidate's content flags and the hold they put on a promotion (``hold_flagged``), and the one-line summary of a
document (``summarize_gate``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from skillbench.base.records import ContentFlag, ContentReviewBlock, Decision, ResultRow
from skillbench.decision.policy import GateInputError
from skillbench.experiment.overlayreview import FLAG_CATEGORIES, flag_line, unaccepted_categories

PROMOTION_SCHEMA = "promotion/v1"

QUALITY_RULES = {
    "upstream": (
        "no per-task resolution-rate regression on gated tasks; where the incumbent resolves a run or a "
        "run never invoked the skill under test, the candidate must resolve every valid run"
    ),
    "noise_aware": (
        "over all paired runs of the gated tasks, stratified by task, the candidate's resolution rate must be "
        "shown (one-sided, at the generation's alpha, with the variance at the margin) to be no more than "
        "quality_margin_pct points below the incumbent's; no gated task may show a resolution drop at alpha "
        "(an exact binomial test against the pair's other runs' failure rate, Holm over the gated tasks the "
        "candidate resolved less often); the "
        "candidate may not skip the skill under test more often than the incumbent; a promotion on resolution "
        "alone needs the total spend shown to be within resolution_cost_margin_pct of the incumbent's"
    ),
}

RUN_STATUSES = ("complete", "aborted")

ABORTED_REASON = "run aborted; partial evidence cannot promote"

BINDING_FIELDS = (
    "benchmark_model",
    "effort",
    "proposer_model",
    "candidate_origin",
    "candidate_overlay_digest",
    "required_candidate_arms",
    "selected_tasks",
    "target_base_digests",
)


def check_promotion_inputs(
    pairs: list[tuple[str, str]], binding: dict[str, Any], run_status: str, generated_at: datetime
) -> None:
    """Raise ValueError unless the run status, the clock and the binding fit a promotion document."""
    if run_status not in RUN_STATUSES:
        raise GateInputError(f"run_status must be one of {', '.join(RUN_STATUSES)} (got {run_status!r})")
    if generated_at.tzinfo is None or generated_at.utcoffset() is None:
        raise GateInputError("generated_at must be timezone-aware")
    missing = [name for name in BINDING_FIELDS if name not in binding]
    unknown = sorted(set(binding) - set(BINDING_FIELDS))
    if missing or unknown:
        raise GateInputError(f"promotion binding fields: missing {missing or 'none'}, unknown {unknown or 'none'}")
    candidates = [candidate for _, candidate in pairs]
    if list(binding["required_candidate_arms"]) != candidates:
        raise GateInputError(
            f"required_candidate_arms {binding['required_candidate_arms']} do not match the paired candidates "
            f"{candidates}"
        )
    if len(set(candidates)) != len(candidates):
        raise GateInputError(f"duplicate candidate arm in pairs: {candidates}")


def plugin_pins(rows: Sequence[ResultRow], incumbent_arm: str, candidate_arm: str) -> dict[str, list[dict[str, Any]]]:
    """The Claude Code plugins each arm of a pair loaded (name, version, digest), as its rows recorded them:
    a decision names the exact plugin bytes it was made on."""

    def pins(arm: str) -> list[dict[str, Any]]:
        seen = {
            (plugin["name"], plugin["digest"]): plugin
            for row in rows
            if row["arm"] == arm
            for plugin in row.get("plugins") or []
        }
        return [seen[key] for key in sorted(seen)]

    return {"incumbent": pins(incumbent_arm), "candidate": pins(candidate_arm)}


def hold_flagged(
    decisions: list[Decision], flags: Sequence[ContentFlag], accepted: Sequence[str]
) -> ContentReviewBlock:
    """Hold back every decision that would promote a candidate whose text carries a flag of a category the user has
    not accepted (`evolution.accept_flags`): it becomes keep_incumbent, its first reason naming the categories, the
    first flags and the fix. Returns promotion.json's ``content_review`` block.

    keep_incumbent, not a decision of its own: the candidate is not promoted and the loop goes on to the next
    generation as after any rejection (whose proposer reads this reason), while the block's ``held`` and the reason
    tell it apart from a candidate the evidence rejected. The statistics stay as the evidence gave them."""
    unknown = sorted(set(accepted) - set(FLAG_CATEGORIES))
    if unknown:
        raise GateInputError(f"accept_flags {unknown} are not flag categories ({', '.join(FLAG_CATEGORIES)})")
    missing = unaccepted_categories(flags, accepted)
    held = False
    if missing:
        counts = ", ".join(f"{c}: {sum(f['category'] == c for f in flags)}" for c in missing)
        example = "; ".join([flag_line(flag) for flag in flags if flag["category"] in missing][:2])
        reason = (
            f"held back by content flags the config does not accept ({counts}; e.g. {example}): the evidence alone "
            f"would promote it. Read the candidate's diff in the generation's report.md; to promote it, add "
            f"{', '.join(missing)} to evolution.accept_flags"
        )
        for decision in decisions:
            if decision["decision"] == "promote":
                decision["decision"] = "keep_incumbent"
                decision["reasons"] = [reason, *decision["reasons"]]
                held = True
    order = {category: index for index, category in enumerate(FLAG_CATEGORIES)}
    return {
        "flags": list(flags),
        "accepted": sorted(set(accepted), key=order.__getitem__),
        "unaccepted": missing,
        "held": held,
    }


def _concurrency_tail(decision: Mapping[str, Any]) -> str:
    """A decision made on rows that did not run side by side says so on its summary line."""
    concurrency = decision.get("concurrency")
    if isinstance(concurrency, dict) and not concurrency.get("concurrent"):
        return " (NOT CONCURRENT: the incumbent's rows did not run beside the candidate's)"
    return ""


def summarize_gate(promotion: Mapping[str, Any]) -> list[str]:
    """One line per decision — ``<candidate_arm>: <decision> — <first three reasons>``, marked when its rows did not
    run side by side — for proposers and logs, and
    with several decisions a last line on the verdict across agents (what decides whether the generation promotes)."""
    lines = [
        f"{decision.get('candidate_arm')}: {decision.get('decision')} — {'; '.join(decision.get('reasons', [])[:3])}"
        + _concurrency_tail(decision)
        for decision in promotion.get("decisions", [])
    ]
    agents = promotion.get("agents")
    if isinstance(agents, dict) and len(lines) > 1:
        lines.append(f"across agents ({agents.get('rule')}): {agents.get('decision')} — {agents.get('reason')}")
    return lines
