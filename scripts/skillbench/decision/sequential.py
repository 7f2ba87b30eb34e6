"""Sequential designs: the ``runs`` setting as a design (``run_design``), the looks' alphas (Lan-DeMets spending
over information fractions, ``look_alphas``), and the replay of the looks over a pair's rows in run order
(``sequential_decision``: an interim look promotes, keeps the incumbent for futility, or continues).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from skillbench.base.records import Decision, ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.noise_aware import noise_aware_decision
from skillbench.decision.pairs import TEST_KEYS, check_unique_rows, metric_warning, pair_evidence
from skillbench.decision.policy import GateInputError, GatePolicy, generation_alpha, is_number, resolve_policy
from skillbench.decision.significance import RESOLUTION_ROUTE_SHARE, candidate_tests, p_text
from skillbench.decision.stats import bootstrap_median_ci, sign_test

SEQUENTIAL_DEFAULTS: dict[str, Any] = {"spending": "pocock", "futility_power": 0.1}

SEQUENTIAL_METHOD = (
    "group-sequential: the cost test, the resolution route and the non-inferiority tests each have efficacy "
    "boundaries from Lan-DeMets alpha spending over the looks' information fractions (runs so far / max runs), "
    "exact for nested batches of a normal statistic; futility stops (conditional power against the last look's "
    "boundaries) are non-binding"
)


def run_design(runs: Any) -> dict[str, Any]:
    """The ``runs`` setting as a design: a plain integer is the fixed design (one look), a mapping
    ``{min, max, step}`` (optionally ``spending``, ``futility_power``) the sequential one.

    Returns ``kind`` (fixed/sequential), ``looks`` (runs per (task, arm) at each look, the last
    being ``max``), ``max`` and, for a sequential design, ``spending`` and ``futility_power``.
    Raises ValueError naming the bad field.
    """
    if isinstance(runs, int) and not isinstance(runs, bool):
        if runs < 1:
            raise GateInputError(f"runs must be >= 1 (got {runs})")
        return {"kind": "fixed", "looks": [runs], "max": runs}
    if not isinstance(runs, dict):
        raise GateInputError(f"runs must be an integer or a mapping {{min, max, step}} (got {runs!r})")
    unknown = sorted(set(runs) - {"min", "max", "step", "spending", "futility_power"})
    if unknown:
        raise GateInputError(
            f"runs: unknown key(s) {', '.join(unknown)} (allowed: min, max, step, spending, futility_power)"
        )
    for key in ("min", "max", "step"):
        value = runs.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise GateInputError(f"runs.{key} must be an integer >= 1 (got {value!r})")
    low, high, step = runs["min"], runs["max"], runs["step"]
    if low < 2:
        raise GateInputError(
            f"runs.min must be at least 2: a look needs two runs per cell to measure noise (got {low})"
        )
    if high < low:
        raise GateInputError(f"runs.max ({high}) must be at least runs.min ({low})")
    spending = runs.get("spending", SEQUENTIAL_DEFAULTS["spending"])
    if spending not in gate_stats.SPENDING_FUNCTIONS:
        raise GateInputError(
            f"runs.spending must be one of {', '.join(gate_stats.SPENDING_FUNCTIONS)} (got {spending!r})"
        )
    futility = runs.get("futility_power", SEQUENTIAL_DEFAULTS["futility_power"])
    if not is_number(futility) or not 0 <= futility < 1:
        raise GateInputError(f"runs.futility_power must be a number in [0, 1) (got {futility!r})")
    looks = list(range(low, high + 1, step))
    if looks[-1] != high:
        looks.append(high)
    return {"kind": "sequential", "looks": looks, "max": high, "spending": spending, "futility_power": float(futility)}


def look_alphas(design: dict[str, Any], alpha: float) -> list[dict[str, Any]]:
    """Per look: the nominal alphas of the cost test, the resolution route and the non-inferiority test.

    Each is a group-sequential boundary over the looks (``stats.sequential_boundaries``) at its share of
    ``alpha`` (the generation's): the cost route 0.9, the resolution route 0.1, non-inferiority all of it."""
    fractions = [runs / design["max"] for runs in design["looks"]]
    spending = design["spending"]
    bounds = gate_stats.sequential_boundaries(fractions, alpha=alpha * (1 - RESOLUTION_ROUTE_SHARE), spending=spending)
    resolution = gate_stats.sequential_boundaries(fractions, alpha=alpha * RESOLUTION_ROUTE_SHARE, spending=spending)
    quality = gate_stats.sequential_boundaries(fractions, alpha=alpha, spending=spending)
    return [
        {
            "runs": runs,
            "fraction": bound["fraction"],
            "boundary_z": bound["z"],
            "spent_alpha": bound["spent_alpha"],
            "cost": bound["nominal_alpha"],
            "resolution": res["nominal_alpha"],
            "quality": qual["nominal_alpha"],
            "quality_z": qual["z"],
        }
        for runs, bound, res, qual in zip(design["looks"], bounds, resolution, quality, strict=True)
    ]


def _first_runs(rows: Sequence[ResultRow], arms: tuple[str, str], runs: int) -> list[ResultRow]:
    """Each (task, arm) of the pair's first ``runs`` rows in run order, whatever number its runs start from."""
    by_cell: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row["arm"] in arms:
            by_cell.setdefault((row["task"], row["arm"]), []).append(row)
    kept = {id(row) for cell in by_cell.values() for row in sorted(cell, key=lambda row: row["run"])[:runs]}
    return [row for row in rows if id(row) in kept]


def _complete_for(rows: Sequence[ResultRow], tasks: list[str], arms: tuple[str, str], runs: int) -> bool:
    """Every (task, arm) of the pair has at least ``runs`` rows."""
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        counts[(row["task"], row["arm"])] = counts.get((row["task"], row["arm"]), 0) + 1
    return all(counts.get((task, arm), 0) >= runs for task in tasks for arm in arms)


def _final_boundaries(decision: Decision, design: dict[str, Any], alphas: list[dict[str, Any]]) -> tuple[float, float]:
    """The last look's boundaries the conditional powers aim at: the cost test's in t units at its degrees of freedom
    (they do not change with runs: K - 1 tasks), and the non-inferiority test's on the z scale."""
    last = alphas[-1]
    df = decision["tests"]["cost"]["df"]
    cost = float(gate_stats.stats.t.isf(last["cost"], df)) if df and last["cost"] > 0 else math.inf
    quality = last["quality_z"] if last["quality_z"] is not None else math.inf
    return cost, float(quality)


def _futility(
    decision: Decision, design: dict[str, Any], runs: int, policy: GatePolicy, alphas: list[dict[str, Any]]
) -> tuple[str | None, dict[str, float | None]]:
    """Why continuing cannot plausibly promote (or None), and the conditional powers behind it."""
    cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
    powers: dict[str, float | None] = {"cost": None, "quality": None}
    alpha = policy.alpha
    if quality["p_worse"] is not None and quality["p_worse"] <= alpha:
        return f"resolution credibly worse (one-sided p {p_text(quality['p_worse'])} <= alpha {alpha:g})", powers
    cost_boundary, quality_boundary = _final_boundaries(decision, design, alphas)
    scale = math.sqrt(runs / design["max"])
    if cost["estimate_pct"] is not None and cost["se_log"]:
        estimate = gate_stats.log_of_saving(cost["estimate_pct"])
        # The last look needs the estimate past both its boundary (at the final standard error) and the floor.
        threshold = max(cost_boundary * cost["se_log"] * scale, gate_stats.log_of_saving(policy.min_improvement_pct))
        powers["cost"] = round(
            gate_stats.conditional_power(
                estimate, cost["se_log"], runs=runs, max_runs=design["max"], threshold=threshold
            ),
            4,
        )
    if quality["difference_pct"] is not None and quality["ci_high_pct"] is not None:
        difference = quality["difference_pct"] / 100
        z_quality = float(gate_stats.stats.norm.isf(quality["alpha"])) if quality["alpha"] > 0 else math.inf
        se = (quality["ci_high_pct"] - quality["difference_pct"]) / 100 / z_quality if math.isfinite(z_quality) else 0.0
        if se > 0:
            threshold = -policy.quality_margin_pct / 100 + quality_boundary * se * scale
            powers["quality"] = round(
                gate_stats.conditional_power(difference, se, runs=runs, max_runs=design["max"], threshold=threshold), 4
            )
    floor = design["futility_power"]
    if powers["cost"] is not None and powers["cost"] < floor and quality["conclusion"] != "better":
        return (
            f"futility: if the current trend holds, {design['max']} runs per cell reach the cost boundary and the "
            f"{policy.min_improvement_pct:.1f}% floor with probability {powers['cost']:.2f} (< {floor:g})"
        ), powers
    if powers["quality"] is not None and powers["quality"] < floor:
        return (
            f"futility: if the current trend holds, {design['max']} runs per cell show the resolution within "
            f"{policy.quality_margin_pct:.0f} points with probability {powers['quality']:.2f} (< {floor:g})"
        ), powers
    return None, powers


def _look_decision(
    decision: Decision,
    *,
    guard_regression: bool,
    final: bool,
    design: dict[str, Any],
    runs: int,
    policy: GatePolicy,
    alphas: list[dict[str, Any]],
) -> tuple[str, str | None, dict[str, float | None]]:
    """promote / keep_incumbent / insufficient_evidence / continue for one look's decision.

    An interim look that would promote while a gated task's resolution fell (the candidate resolved fewer of its
    runs there, not yet enough to keep the incumbent) continues instead: the next batch's runs on that task are
    what tell a drop from noise, and the last look decides with them."""
    if not final and decision["decision"] == "promote":
        fallen = _fallen_tasks(decision)
        if fallen:
            return (
                "continue",
                f"resolution fell on {', '.join(fallen)}: more runs before a promotion",
                {
                    "cost": None,
                    "quality": None,
                },
            )
    if final or decision["decision"] in ("promote", "insufficient_evidence"):
        return decision["decision"], None, {"cost": None, "quality": None}
    cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
    # A task regression or a skipped skill keeps the incumbent at once; so does a cost test that
    # already rules out the floor.
    if guard_regression or cost["conclusion"] == "not_computable":
        return decision["decision"], None, {"cost": None, "quality": None}
    if cost["conclusion"] == "not_cheaper" and quality["conclusion"] != "better":
        return "keep_incumbent", None, {"cost": None, "quality": None}
    why, powers = _futility(decision, design, runs, policy, alphas)
    if why:
        return "keep_incumbent", why, powers
    return "continue", None, powers


def _fallen_tasks(decision: Decision) -> list[str]:
    """Gated tasks the candidate resolved a smaller share of its runs than the incumbent."""
    fallen = []
    for task in decision["tasks"]:
        if task["gated"]:
            (x_inc, n_inc), (x_cand, n_cand) = (
                map(int, task[key].split("/")) for key in ("incumbent_resolved", "candidate_resolved")
            )
            if n_inc and n_cand and x_cand * n_inc < x_inc * n_cand:
                fallen.append(task["task"])
    return fallen


def _finite(value: float) -> float | None:
    """A statistic to four decimals; None when it is infinite (a saving of 100 %: nothing left to compare)."""
    return round(value, 4) if math.isfinite(value) else None


def _look_record(
    index: int,
    look: dict[str, Any],
    decision: Decision,
    verdict: str,
    why: str | None,
    powers: dict[str, float | None],
) -> dict[str, Any]:
    """The schema's record of one look: the cost statistic against its boundary, and what the look said."""
    cost = decision["tests"]["cost"]
    statistic = boundary_t = None
    if cost["estimate_pct"] is not None and cost["se_log"]:
        statistic = _finite(gate_stats.log_of_saving(cost["estimate_pct"]) / cost["se_log"])
    if cost["df"] and look["cost"] > 0:
        # The cost test has K - 1 degrees of freedom: the boundary it must reach in t units.
        boundary_t = round(float(gate_stats.stats.t.isf(look["cost"], cost["df"])), 4)
    return {
        "look": index + 1,
        "runs": look["runs"],
        "fraction": look["fraction"],
        "statistic": statistic,
        "p_value": cost["p_value"],
        "boundary_z": look["boundary_z"],
        "boundary_t": boundary_t,
        "nominal_alpha": look["cost"],
        "spent_alpha": look["spent_alpha"],
        "quality_alpha": look["quality"],
        "estimate_pct": cost["estimate_pct"],
        "conditional_power": powers,
        "decision": verdict,
        "reason": why or (decision["reasons"][0] if decision["reasons"] else ""),
    }


def _replay_looks(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy,
    design: dict[str, Any],
    alphas: list[dict[str, Any]],
    generation: int = 0,
) -> tuple[Decision | None, list[dict[str, Any]], int | None]:
    """Take the looks in order until one decides or its rows are not all there yet.

    Returns the last look's decision (None when no look could be taken), the look records and,
    when the replay stopped for missing rows, the runs per cell the next look needs."""
    arms = (incumbent_arm, candidate_arm)
    tasks = sorted({row["task"] for row in rows if row["arm"] in arms})
    looks: list[dict[str, Any]] = []
    decision: Decision | None = None
    for index, look in enumerate(alphas):
        runs = look["runs"]
        if not _complete_for(rows, tasks, arms, runs) or not tasks:
            return decision, looks, runs
        subset = _first_runs(rows, arms, runs)
        # The looks' run counts are the design; the boundaries, not min_runs, control the error.
        look_policy = dataclasses.replace(policy, min_runs=min(policy.min_runs, runs))
        pair = pair_evidence(
            aggregate_by_task(subset),
            incumbent_arm=incumbent_arm,
            candidate_arm=candidate_arm,
            policy=look_policy,
            rows=subset,
        )
        decision, guard_regression = noise_aware_decision(
            pair,
            model=model,
            policy=look_policy,
            rows=subset,
            look_alphas={key: look[key] for key in ("cost", "resolution", "quality")},
            generation=generation,
        )
        final = index == len(alphas) - 1
        verdict, why, powers = _look_decision(
            decision,
            guard_regression=guard_regression,
            final=final,
            design=design,
            runs=runs,
            policy=policy,
            alphas=alphas,
        )
        looks.append(_look_record(index, look, decision, verdict, why, powers))
        if verdict != "continue":
            decision["decision"] = verdict
            if why:
                decision["reasons"].insert(0, why)
            break
    return decision, looks, None


def sequential_decision(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy | None,
    design: dict[str, Any],
    generation: int = 0,
) -> Decision:
    """Replay the looks of a sequential design over one pair's rows (runs so far, in run order).

    Look k uses each (task, arm)'s first ``design["looks"][k]`` runs in run order (so run numbers may start
    anywhere); the looks spend the generation's alpha (``generation_alpha``). The first look that decides
    (promote, keep_incumbent, insufficient_evidence) ends the pair; a look whose rows are not
    all there yet ends the replay with ``continue`` and ``next_runs`` (the runs per cell the
    next look needs). The result is the last look's decision (the schema's decision fields)
    plus ``looks`` (one record per look taken) and ``sequential`` (design, status, next_runs).
    Pure and deterministic, so the pipeline's looks and an offline regrade agree.
    """
    policy = policy if policy is not None else resolve_policy(None)
    if policy.rule != "noise_aware":
        raise GateInputError("a sequential runs design needs gate.rule: noise_aware")
    check_unique_rows(rows)
    alphas = look_alphas(design, generation_alpha(policy, generation))
    decision, looks, next_runs = _replay_looks(
        rows,
        incumbent_arm=incumbent_arm,
        candidate_arm=candidate_arm,
        model=model,
        policy=policy,
        design=design,
        alphas=alphas,
        generation=generation,
    )
    status = "decided" if next_runs is None else "continue"
    if decision is None:
        decision = _pending_decision(
            incumbent_arm, candidate_arm, policy, next_runs or design["looks"][0], generation=generation
        )
    elif status == "continue":
        decision["decision"] = "insufficient_evidence"
        decision["reasons"].insert(
            0, f"look {len(looks)} says continue: {next_runs} runs per (task, arm) are needed for the next look"
        )
    else:
        if looks[-1]["decision"] != decision["decision"]:
            looks[-1]["decision"] = decision["decision"]
        decision["reasons"].insert(
            0,
            f"sequential design: decided at look {len(looks)} of {len(alphas)} after {looks[-1]['runs']} runs per "
            "(task, arm)",
        )
    decision["looks"] = looks
    decision["sequential"] = {
        "method": SEQUENTIAL_METHOD,
        "looks_planned": design["looks"],
        "spending": design["spending"],
        "futility_power": design["futility_power"],
        "status": status,
        "next_runs": next_runs,
        "cut_short": False,
    }
    return decision


def _pending_decision(
    incumbent_arm: str, candidate_arm: str, policy: GatePolicy, runs: int, *, generation: int
) -> Decision:
    empty = candidate_tests(
        [],
        incumbent_arm=incumbent_arm,
        candidate_arm=candidate_arm,
        gated_tasks=[],
        paired_tasks=[],
        policy=policy,
        generation=generation,
    )
    return {
        "incumbent_arm": incumbent_arm,
        "candidate_arm": candidate_arm,
        "rule": policy.rule,
        "decision": "insufficient_evidence",
        "metric": policy.metric,
        "metric_warning": metric_warning(policy.metric),
        "median_improvement_pct": None,
        "resolution_margin": 0,
        "reasons": [f"no look taken yet: the first look needs {runs} runs per (task, arm)"],
        "gated_tasks": [],
        "ungated_tasks": [],
        "tasks": [],
        "statistics": {"sign_test": sign_test([]), "bootstrap": bootstrap_median_ci([])},
        "tests": {key: empty[key] for key in TEST_KEYS},
    }
