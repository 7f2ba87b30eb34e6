"""The tests behind a decision, which both rules report: the cost test on the policy's objective and its
alternative, the quality (resolution) test, and the per-task checks (a credible cost rise above its cap, a
resolution drop, the task's own saving), at the generation's share of alpha or a look's; and the sentences that say
what they found. The statistics themselves live in ``stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillbench.base.records import ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import is_valid
from skillbench.decision.pairs import PairEvidence, metric_value
from skillbench.decision.policy import OBJECTIVES, GatePolicy, generation_alpha

# A candidate can win on cost or on resolution; an identical candidate must clear neither more
# than its generation's alpha of the time in total, so the resolution route spends a tenth of it
# (weighted Bonferroni) and the cost test the rest.
RESOLUTION_ROUTE_SHARE = 0.1


def pair_tests(
    pair: PairEvidence,
    rows: Sequence[ResultRow] | None,
    policy: GatePolicy,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> dict[str, Any]:
    """``candidate_tests`` over the pair's gated and paired tasks."""
    return candidate_tests(
        rows or [],
        incumbent_arm=pair.incumbent_arm,
        candidate_arm=pair.candidate_arm,
        gated_tasks=pair.gated_tasks(),
        paired_tasks=pair.paired_tasks,
        policy=policy,
        look_alphas=look_alphas,
        generation=generation,
    )


def _valid_runs(rows: Sequence[ResultRow], arms: tuple[str, str]) -> dict[tuple[str, str], list[ResultRow]]:
    grouped: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row["arm"] in arms and is_valid(row):
            grouped.setdefault((row["task"], row["arm"]), []).append(row)
    return grouped


def _design(tasks: list[str], runs: dict[tuple[str, str], list[ResultRow]], arms: tuple[str, str]) -> dict[str, Any]:
    counts = sorted({len(runs.get((task, arm), [])) for task in tasks for arm in arms})
    per_arm = counts[0] if len(counts) == 1 else None
    if not tasks:
        text = "no gated task"
    elif per_arm is not None:
        text = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} × {per_arm} run{'s' if per_arm != 1 else ''} per arm"
    else:
        text = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} × {counts[0]}–{counts[-1]} runs per arm (unequal)"
    return {"tasks": len(tasks), "runs_per_arm": per_arm, "text": text}


def candidate_tests(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    gated_tasks: list[str],
    paired_tasks: list[str],
    policy: GatePolicy,
    alpha: float | None = None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> dict[str, Any]:
    """The cost and quality tests over the gated tasks, and the per-task checks over every paired task.

    ``alpha`` defaults to the generation's share of the policy's (``generation_alpha``); an interim
    look of a sequential design passes the alphas it may spend at that look in ``look_alphas``
    (``cost``, ``resolution``, ``quality``: the nominal levels of the cost test, the resolution route
    and the non-inferiority tests), while the per-task checks keep the policy's alpha: they can only
    keep the incumbent. ``cost`` tests the policy's objective; ``cost_alternative`` reports the other
    (total spend next to the per-task geometric mean). Pure: rows in, numbers out.
    """
    alpha = generation_alpha(policy, generation) if alpha is None else alpha
    cost_alpha, resolution_alpha = alpha * (1 - RESOLUTION_ROUTE_SHARE), alpha * RESOLUTION_ROUTE_SHARE
    quality_alpha = alpha
    if look_alphas is not None:
        cost_alpha, resolution_alpha = look_alphas["cost"], look_alphas["resolution"]
        quality_alpha = look_alphas["quality"]
    arms = (incumbent_arm, candidate_arm)
    runs = _valid_runs(rows, arms)
    gated_cells = list(_measured_cells(runs, gated_tasks, arms, policy.metric).values())
    # Every gated task must be measured, or the test is not computable.
    measured = [cell for cell in gated_cells if cell is not None] if None not in gated_cells else []
    objective = policy.objective
    other = next(name for name in OBJECTIVES if name != objective)
    # The total-spend test also says whether the candidate is shown within the spend margin (the resolution route's
    # guard, and across_agents any's for every pair).
    cost, alternative = (
        gate_stats.cost_test(
            measured,
            alpha=round(cost_alpha, 8),
            floor_pct=policy.min_improvement_pct,
            objective=name,
            margin_pct=policy.resolution_cost_margin_pct if name == "total_spend" else None,
        )
        for name in (objective, other)
    )
    quality = gate_stats.quality_test(
        [_resolution_counts(runs, task, arms) for task in gated_tasks],
        alpha=round(quality_alpha, 8),
        margin_pct=policy.quality_margin_pct,
        better_alpha=round(resolution_alpha, 8),
    )
    return {
        "design": _design(gated_tasks, runs, arms),
        "cost": cost,
        "cost_alternative": alternative,
        "quality": quality,
        "checks": _task_checks(
            runs,
            _measured_cells(runs, paired_tasks, arms, policy.metric),
            gated_tasks,
            arms,
            policy,
            alpha=policy.alpha,
            interval_alpha=cost["alpha"],
        ),
    }


Cell = tuple[list[float], list[float]]  # one task's metric values: (incumbent runs, candidate runs)


def _measured_cells(
    runs: dict[tuple[str, str], list[ResultRow]], tasks: list[str], arms: tuple[str, str], metric: str
) -> dict[str, Cell | None]:
    """Per task, both arms' values of ``metric``; None when an arm has no valid run or an unmeasured one."""
    cells: dict[str, Cell | None] = {}
    for task in tasks:
        inc, cand = ([metric_value(row, metric) for row in runs.get((task, arm), [])] for arm in arms)
        measured_inc = [value for value in inc if value is not None]
        measured_cand = [value for value in cand if value is not None]
        complete = len(measured_inc) == len(inc) and len(measured_cand) == len(cand)
        cells[task] = (
            ([float(v) for v in measured_inc], [float(v) for v in measured_cand]) if inc and cand and complete else None
        )
    return cells


def _resolution_counts(
    runs: dict[tuple[str, str], list[ResultRow]], task: str, arms: tuple[str, str]
) -> tuple[int, int, int, int]:
    """(incumbent resolved, incumbent runs, candidate resolved, candidate runs) over one task's valid runs."""
    inc, cand = (runs.get((task, arm), []) for arm in arms)
    return sum(1 for r in inc if r.get("resolved")), len(inc), sum(1 for r in cand if r.get("resolved")), len(cand)


def _task_checks(
    runs: dict[tuple[str, str], list[ResultRow]],
    cells: dict[str, Cell | None],
    gated_tasks: list[str],
    arms: tuple[str, str],
    policy: GatePolicy,
    *,
    alpha: float,
    interval_alpha: float,
) -> dict[str, dict[str, Any]]:
    """Per paired task: a credible cost rise above its cap (at alpha / tasks), the resolution-drop test (Holm over
    the gated tasks the candidate resolved a smaller share of), and the task's own saving on the objective's scale
    with its interval (what a figure draws)."""
    usable = [cell for cell in cells.values() if cell is not None]
    pooled = gate_stats.pooled_log_variance(usable)
    task_alpha = alpha / max(1, len(cells))
    gated_counts = [_resolution_counts(runs, task, arms) for task in gated_tasks]
    drops = dict(zip(gated_tasks, gate_stats.resolution_drops(gated_counts), strict=True))
    adjusted = dict(zip(gated_tasks, gate_stats.holm_over_drops(gated_counts, list(drops.values())), strict=True))
    differences = {name: gate_stats.mean_log_difference(*cell) for name, cell in cells.items() if cell is not None}
    checks: dict[str, dict[str, Any]] = {}
    for task, cell in cells.items():
        cap = policy.max_task_regression_pct if task in gated_tasks else policy.max_failed_task_regression_pct
        # The spread between the other tasks: the task under test must not widen the yardstick it is judged by.
        between = gate_stats.spread_between(
            [value for name, value in differences.items() if name != task and value is not None]
        )
        regression = (
            gate_stats.task_regression(cell[0], cell[1], pooled=pooled, alpha=task_alpha, cap_pct=cap, between=between)
            if cell is not None
            else {"regression_pct": None, "p_value": None, "regressed": False}
        )
        saving = (
            gate_stats.task_saving(cell[0], cell[1], objective=policy.objective, alpha=interval_alpha)
            if cell is not None
            else {"saving_pct": None, "ci_low_pct": None, "ci_high_pct": None}
        )
        checks[task] = {
            "regression_pct": regression["regression_pct"],
            "regression_p_value": regression["p_value"],
            "regression_alpha": round(task_alpha, 6),
            "regressed": regression["regressed"],
            "resolution_drop_p_value": drops.get(task, 1.0),
            "resolution_drop_adjusted_p": adjusted.get(task, 1.0),
            "resolution_dropped": adjusted.get(task, 1.0) <= alpha,
            "saving_pct": saving["saving_pct"],
            "saving_ci_low_pct": saving["ci_low_pct"],
            "saving_ci_high_pct": saving["ci_high_pct"],
        }
    return checks


def pct_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def p_text(value: float | None) -> str:
    """``p = 0.0123`` style text after the letter p."""
    if value is None:
        return "= n/a"
    return "< 0.0001" if value < 0.0001 else f"= {value:.4f}"


def _objective_text(objective: str) -> str:
    return "total spend" if objective == "total_spend" else "per-task geometric mean"


def cost_sentence(cost: dict[str, Any], metric: str, design: str) -> str:
    """One sentence on what the cost test found, for reasons and reports."""
    what = f"{metric} saving in {_objective_text(cost.get('objective', 'per_task'))}"
    conclusion = cost["conclusion"]
    if conclusion == "not_computable":
        if cost["estimate_pct"] is None:
            return (
                f"the {metric} test could not be computed (a gated task has no measured run, or measured zero on "
                "every run of both arms)"
            )
        if cost["tasks"] < 2:
            return (
                f"{what} {pct_text(cost['estimate_pct'])} on one gated task: the test needs at least two, since "
                "the task is the unit of replication"
            )
        return (
            f"{what} {pct_text(cost['estimate_pct'])}, the same on every gated task: the per-task differences do not "
            "vary, so no noise was measured and no p-value can be claimed"
        )
    interval = f"{cost['confidence']:.0%} CI {pct_text(cost['ci_low_pct'])} to {pct_text(cost['ci_high_pct'])}"
    found = (
        f"{what} {pct_text(cost['estimate_pct'])} ({interval}; one-sided p {p_text(cost['p_value'])}, alpha "
        f"{cost['alpha']:g}, {cost['df']:g} df across tasks)"
    )
    if conclusion == "cheaper":
        return f"{found}, at least the {cost['floor_pct']:.1f}% floor"
    if conclusion == "below_floor":
        return f"{found}: credibly cheaper, but the estimate is below the {cost['floor_pct']:.1f}% floor"
    if conclusion == "not_cheaper":
        return f"{found}: the interval rules out a saving of {cost['floor_pct']:.1f}% or more"
    detectable = pct_text(cost["mde_pct"])
    return f"not enough tasks or runs to tell: {found}; {design} detects a {detectable} saving 80% of the time"


def quality_sentence(quality: dict[str, Any]) -> str:
    """One sentence on what the quality test found."""
    counts = (
        f"candidate resolved {quality['candidate_resolved']}/{quality['candidate_runs']}, incumbent "
        f"{quality['incumbent_resolved']}/{quality['incumbent_runs']}"
    )
    if quality["conclusion"] == "not_computable":
        return f"resolution could not be compared ({counts})"
    difference = (
        f"difference {quality['difference_pct']:+.1f} points ({1 - 2 * quality['alpha']:.0%} CI "
        f"{quality['ci_low_pct']:+.1f} to {quality['ci_high_pct']:+.1f})"
    )
    conclusion = quality["conclusion"]
    if conclusion == "better":
        return (
            f"resolution credibly better: {counts}, {difference}, one-sided p {p_text(quality['p_better'])} "
            f"(alpha {quality['better_alpha']:g} for promotions on resolution)"
        )
    if conclusion == "worse":
        return f"resolution credibly worse: {counts}, {difference}, one-sided p {p_text(quality['p_worse'])}"
    if conclusion == "not_worse":
        return (
            f"resolution not worse: {counts}, {difference}, within the {quality['margin_pct']:.0f}-point margin "
            f"(non-inferiority p {p_text(quality['p_noninferiority'])})"
        )
    return (
        f"not enough runs to show the resolution is within {quality['margin_pct']:.0f} points of the incumbent's: "
        f"{counts}, {difference}, non-inferiority p {p_text(quality['p_noninferiority'])}"
    )
