"""Aggregation of result rows: per (task, arm) medians, savings, the incumbent health check, and the review and
trigger summaries the report and the proposer's evidence both show.

Owns which error kinds are excluded from evidence, which count toward the outage breaker,
the median-based summary of one (task, arm) group, savings against the baseline arm, the
"broken incumbent" harness-health check, one (task, arm)'s review quality (`ReviewSummary`) and each arm's
triggering per skill (`TriggerScore`, over the labelled prompts the gate's trigger tests read too). Plain rows in,
plain values out; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillbench.base.records import EXCLUDED_ERROR_KINDS, REVIEW_CLASSES, TRIGGER_CLASS, USAGE_FIELDS

MEDIAN_FIELDS = (*USAGE_FIELDS, "duration_s", "num_turns", "diff_files", "diff_insertions", "diff_deletions")
SAVINGS_FIELDS = (*USAGE_FIELDS, "cost_usd", "duration_s")


def is_valid(row: Mapping[str, Any]) -> bool:
    """A row is evidence unless its error kind is one of the excluded kinds."""
    return row.get("error_kind") not in EXCLUDED_ERROR_KINDS


def median_cost(valid: Sequence[Mapping[str, Any]]) -> float | None:
    """The median cost of the valid rows; None with no row or when any left its cost unmeasured, so an arm never
    ranks on a cost it did not demonstrate."""
    costs = [float(cost) for row in valid if (cost := row.get("cost_usd")) is not None]
    return statistics.median(costs) if valid and len(costs) == len(valid) else None


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summarise the rows of one (task, arm) group.

    Medians are taken over valid rows only (``statistics.median``: even counts average the two
    middle values); with no valid row every median is 0 and ``cost_usd`` is None. ``cost_usd``
    is also None when any valid row left cost unmeasured, so an arm never ranks on a cost it
    did not demonstrate.
    """
    if not rows:
        raise ValueError("aggregate needs at least one row")
    groups = {(row["task"], row["arm"]) for row in rows}
    if len(groups) != 1:
        raise ValueError(f"aggregate takes one (task, arm) group, got {sorted(groups)}")
    valid = [row for row in rows if is_valid(row)]

    summary: dict[str, Any] = {"task": rows[0]["task"], "arm": rows[0]["arm"], "class": rows[0]["class"]}
    for field in MEDIAN_FIELDS:
        values = [row.get(field) or 0 for row in valid]
        summary[field] = statistics.median(values) if values else 0
    costs = [cost for row in valid if (cost := row.get("cost_usd")) is not None]
    measured = bool(valid) and len(costs) == len(valid)
    summary["cost_usd"] = median_cost(valid)
    resolved = sum(1 for row in rows if row.get("resolved"))
    # What one resolved run costs once failures are paid for too: the fair price when arms differ in quality.
    summary["cost_per_resolved_usd"] = sum(costs) / resolved if measured and resolved else None

    error_kinds: dict[str, int] = {}
    for row in rows:
        kind = row.get("error_kind")
        if kind:
            error_kinds[kind] = error_kinds.get(kind, 0) + 1
    summary.update(
        {
            "resolved": resolved,
            "runs": len(rows),
            "valid_runs": len(valid),
            "excluded_runs": len(rows) - len(valid),
            "transcripts_missing": sum(1 for row in rows if row.get("transcript_missing")),
            "error_kinds": dict(sorted(error_kinds.items())),
            "skill_not_invoked": error_kinds.get("skill-not-invoked", 0),
        }
    )
    return summary


def _first_appearance(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def aggregate_by_task(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{task: {arm: aggregate}}`` with tasks and arms in the order they first appear in ``rows``."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for row in rows:
        grouped.setdefault(row["task"], {}).setdefault(row["arm"], []).append(row)
    return {task: {arm: aggregate(group) for arm, group in arms.items()} for task, arms in grouped.items()}


def aggregate_resolved(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``aggregate`` over the resolved runs of one (task, arm) group only; None when no run resolved.

    Savings are compared on these, so a cheap arm that fails the task never shows as a saving."""
    resolved = [row for row in rows if row.get("resolved") and is_valid(row)]
    return aggregate(resolved) if resolved else None


def resolved_by_task(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any] | None]]:
    """``{task: {arm: aggregate_resolved}}`` in first-appearance order."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        grouped.setdefault(row["task"], {}).setdefault(row["arm"], []).append(row)
    return {task: {arm: aggregate_resolved(group) for arm, group in arms.items()} for task, arms in grouped.items()}


def savings(baseline: dict[str, Any], arm: dict[str, Any]) -> dict[str, float | None]:
    """Percent saved by ``arm`` relative to ``baseline`` per usage field, cost and wall time.

    Positive means cheaper than baseline. None when either side is unmeasured; 0.0 when the
    baseline value is zero (no signal to compare against).
    """
    result: dict[str, float | None] = {}
    for field in SAVINGS_FIELDS:
        base, value = baseline.get(field), arm.get(field)
        result[field] = 0.0 if base == 0 and value is not None else percent_saved(base, value)
    return result


def percent_saved(base: float | None, value: float | None) -> float | None:
    """(base − value) / base in percent, 1 dp; None when either is unmeasured or the base is 0."""
    if base is None or value is None or base == 0:
        return None
    return round(100 * (base - value) / base, 1)


def broken_incumbent_arms(by_task: dict[str, dict[str, dict[str, Any]]], incumbent_arms: Iterable[str]) -> list[str]:
    """Incumbent arms that ran somewhere and resolved nothing on every task they ran.

    Deliberately no ``valid_runs > 0`` requirement: an incumbent whose runs were all excluded
    is just as unable to certify the harness as one that failed every oracle.
    """
    broken = []
    for arm in _first_appearance(incumbent_arms):
        ran = [arms[arm] for arms in by_task.values() if arm in arms]
        if ran and all(summary["resolved"] == 0 for summary in ran):
            broken.append(arm)
    return broken


# ─── Review quality per (task, arm) ─────────────────────────────────────────

# The review metrics whose mean over the scored runs a summary carries.
REVIEW_MEANS = ("precision", "recall", "f1", "weighted_f1", "blocker_recall")


def is_review_row(row: Mapping[str, Any]) -> bool:
    """A row of a review task: it carries review metrics, or its task's class is a review class."""
    return row.get("review") is not None or row.get("class") in REVIEW_CLASSES


@dataclass(frozen=True)
class ReviewSummary:
    """One (task, arm)'s review quality over its valid runs. Counts and the session's scores only: nothing of the
    labels (no expected verdict, no defect), so a consumer may hand any field to the proposer."""

    task: str
    arm: str
    task_class: str
    case: str  # "defect" or "clean"
    runs: int
    valid_runs: int
    excluded_runs: int
    # Valid runs with review metrics (a valid run without them, which no grader should write, is unscored).
    scored: int
    resolved: int
    # Valid runs whose review broke the contract or that edited code, and those defects by kind.
    broken_runs: int
    broken_kinds: dict[str, int]
    contract_broken: int
    edited_code: int
    # Means of `REVIEW_MEANS` over the scored runs; None with no scored run.
    means: dict[str, float | None]
    verdict_correct: int
    # Clean controls only (None on a defect case): passed runs, and the findings, every one a false positive.
    clean_control_passed: int | None
    clean_control_fp: int | None
    # The median cost of a valid run; None when one went unmeasured or no run was valid (as `aggregate`).
    cost_usd: float | None


def review_summary(rows: Sequence[Mapping[str, Any]]) -> ReviewSummary:
    """The review quality of one (task, arm) group of rows."""
    head = aggregate(rows)
    valid = [row for row in rows if is_valid(row)]
    scored = [row["review"] for row in valid if row.get("review") is not None]
    clean = rows[0].get("class") == "review-clean" or any(review.get("case") == "clean" for review in scored)
    broken: dict[str, int] = {}
    broken_runs = 0
    for row in valid:
        edited = row.get("error_kind") == "review-edited-code"
        kinds = [
            kind for kind in ((row.get("review") or {}).get("output_error"), edited and "review-edited-code") if kind
        ]
        broken_runs += bool(kinds)
        for kind in kinds:
            broken[kind] = broken.get(kind, 0) + 1
    return ReviewSummary(
        task=head["task"],
        arm=head["arm"],
        task_class=head["class"],
        case="clean" if clean else "defect",
        runs=head["runs"],
        valid_runs=head["valid_runs"],
        excluded_runs=head["excluded_runs"],
        scored=len(scored),
        resolved=sum(1 for row in valid if row.get("resolved")),
        broken_runs=broken_runs,
        broken_kinds=dict(sorted(broken.items())),
        contract_broken=sum(1 for review in scored if review.get("output_error")),
        edited_code=sum(1 for row in valid if row.get("error_kind") == "review-edited-code"),
        means={
            field: statistics.fmean(float(review[field]) for review in scored) if scored else None
            for field in REVIEW_MEANS
        },
        verdict_correct=sum(1 for review in scored if review["verdict_correct"]),
        clean_control_passed=sum(1 for review in scored if review["clean_control_passed"]) if clean else None,
        clean_control_fp=sum(int(review["fp"]) for review in scored) if clean else None,
        cost_usd=head["cost_usd"],
    )


def review_summaries(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], ReviewSummary]:
    """(task, arm) → its `review_summary`, over the review rows only, in order of first appearance."""
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if is_review_row(row):
            grouped.setdefault((row["task"], row["arm"]), []).append(row)
    return {key: review_summary(group) for key, group in grouped.items()}


# ─── Skill triggering per arm and skill ─────────────────────────────────────


def is_trigger_row(row: Mapping[str, Any]) -> bool:
    """A row of a trigger task (a labelled prompt): it carries trigger metrics, or its class is `trigger`."""
    return row.get("trigger") is not None or row.get("class") == TRIGGER_CLASS


def trigger_runs(
    rows: Sequence[Mapping[str, Any]], arms: Iterable[str] | None = None
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(prompt, arm) → the `trigger` of each of its valid runs (of `arms` only, when given)."""
    wanted = None if arms is None else set(arms)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        trigger = row.get("trigger")
        if (wanted is None or row["arm"] in wanted) and is_valid(row) and isinstance(trigger, dict):
            runs.setdefault((row["task"], row["arm"]), []).append(dict(trigger))
    return runs


def trigger_labels(runs: Mapping[tuple[str, str], list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """prompt → its label as its rows record it ({"expected": skill or None, "near_miss": bool}), sorted by prompt."""
    labels: dict[str, dict[str, Any]] = {}
    for (prompt, _arm), triggers in sorted(runs.items()):
        labels.setdefault(
            prompt, {"expected": triggers[0]["expected"], "near_miss": bool(triggers[0].get("near_miss"))}
        )
    return labels


def trigger_skills(
    labels: Mapping[str, Mapping[str, Any]], runs: Mapping[tuple[str, str], list[dict[str, Any]]]
) -> list[str]:
    """The measured skills, sorted: every skill a prompt is labelled for or a session invoked."""
    labelled = {label["expected"] for label in labels.values() if label["expected"] is not None}
    invoked = {skill for triggers in runs.values() for trigger in triggers for skill in trigger["invoked"]}
    return sorted(labelled | invoked)


@dataclass(frozen=True)
class TriggerScore:
    """One arm's triggering of one skill over the labelled prompts' valid runs (counts over runs, not prompts).

    Aggregates only: no prompt is named, so no consumer can read from it which skill a given prompt expects."""

    arm: str
    skill: str
    # Prompts labelled for the skill, their runs, and those runs that invoked it (recall = invoked / runs).
    prompts: int
    runs: int
    invoked: int
    recall: float | None
    # Runs on every other prompt (labelled for another skill or none), and those that invoked the skill anyway.
    other_runs: int
    false_triggers: int
    # Of those, the runs on near-miss prompts and the ones that invoked the skill; restraint = the share that did not.
    near_miss_runs: int
    near_miss_false_triggers: int
    near_miss_restraint: float | None
    # Of the runs that invoked the skill, the share whose prompt was labelled for it; None when none invoked it.
    precision: float | None
    # Every valid trigger run of the arm, and the median cost of one (None when one went unmeasured).
    arm_runs: int
    cost_per_prompt_usd: float | None


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def trigger_scores(rows: Sequence[Mapping[str, Any]]) -> list[TriggerScore]:
    """Per arm (in order of first appearance) and measured skill (sorted): recall, false triggers, near-miss
    restraint, precision and cost per prompt. Empty when no row is a trigger task's."""
    trigger_rows = [row for row in rows if is_trigger_row(row)]
    runs = trigger_runs(trigger_rows)
    labels = trigger_labels(runs)
    skills = trigger_skills(labels, runs)
    scores = []
    for arm in _first_appearance(row["arm"] for row in trigger_rows):
        own = [row for row in trigger_rows if row["arm"] == arm and is_valid(row)]
        cost = median_cost(own)
        mine = {prompt: triggers for (prompt, name), triggers in runs.items() if name == arm}
        for skill in skills:
            labelled = [prompt for prompt in mine if labels[prompt]["expected"] == skill]
            others = [prompt for prompt in mine if labels[prompt]["expected"] != skill]
            hits = [skill in trigger["invoked"] for prompt in labelled for trigger in mine[prompt]]
            misfires = [skill in trigger["invoked"] for prompt in others for trigger in mine[prompt]]
            near = [
                skill in trigger["invoked"]
                for prompt in others
                if labels[prompt]["near_miss"]
                for trigger in mine[prompt]
            ]
            scores.append(
                TriggerScore(
                    arm=arm,
                    skill=skill,
                    prompts=len(labelled),
                    runs=len(hits),
                    invoked=sum(hits),
                    recall=_share(sum(hits), len(hits)),
                    other_runs=len(misfires),
                    false_triggers=sum(misfires),
                    near_miss_runs=len(near),
                    near_miss_false_triggers=sum(near),
                    near_miss_restraint=_share(len(near) - sum(near), len(near)),
                    precision=_share(sum(hits), sum(hits) + sum(misfires)),
                    arm_runs=len(own),
                    cost_per_prompt_usd=cost,
                )
            )
    return scores
