"""Aggregation of result rows: per (task, arm) medians, savings, and the incumbent health check.

Owns which error kinds are excluded from evidence, which count toward the outage breaker,
the median-based summary of one (task, arm) group, savings against the baseline arm, and the
"broken incumbent" harness-health check. Plain rows in, plain dicts out; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillbench.base.records import EXCLUDED_ERROR_KINDS, USAGE_FIELDS

MEDIAN_FIELDS = (*USAGE_FIELDS, "duration_s", "num_turns", "diff_files", "diff_insertions", "diff_deletions")
SAVINGS_FIELDS = (*USAGE_FIELDS, "cost_usd", "duration_s")


def is_valid(row: Mapping[str, Any]) -> bool:
    """A row is evidence unless its error kind is one of the excluded kinds."""
    return row.get("error_kind") not in EXCLUDED_ERROR_KINDS


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
    summary["cost_usd"] = statistics.median(costs) if measured else None
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
