"""The gate's statistics: the tests behind a promotion decision, as pure functions of plain numbers.

Owns the cost test (tasks are the unit of replication: a t-test across tasks with K - 1 degrees of
freedom on per-task log ratios, weighted by each task's share of the suite's spend or equally),
its power and the design that reaches it, the per-task cost regression check, the resolution
tests (a task-stratified risk difference whose non-inferiority test uses the variance at the
margin, and a per-task resolution-drop test that borrows the pair's pooled resolution rate, Holm
over the tasks), the minimum detectable effects, the upstream rule's sign test and bootstrap,
and the group-sequential machinery (Lan-DeMets alpha spending, exact efficacy boundaries over the
looks, conditional power). Distributions come from ``scipy.stats``; nothing here reads files or
clocks, and the only randomness is the bootstrap's fixed seed, so the same numbers always give the
same answer.

Every test takes its ``alpha`` as an argument, so an interim look of a sequential design (and each
generation of an experiment) can call the same functions with the alpha it may spend.
"""

from __future__ import annotations

import importlib
import math
from functools import lru_cache
from typing import Any

import numpy as np

from skillbench.decision.policy import OBJECTIVES


class _OnFirstUse:
    """A scipy module imported when a test first needs it: importing scipy is most of what parsing the workflow
    costs (every cluster job parses it twice), and the parse only reads the run design."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


integrate, optimize, stats = (_OnFirstUse(f"scipy.{name}") for name in ("integrate", "optimize", "stats"))

POWER = 0.8
BOOTSTRAP_RESAMPLES = 10000
BOOTSTRAP_SEED = 20261129
BOOTSTRAP_CONFIDENCE = 0.95

# What "cheaper" means: the suite's total spend (what a user pays: every task weighs its share of
# the spend) or the per-task geometric mean (every task weighs the same).
COST_METHODS = {
    "total_spend": (
        "one-sided t-test across tasks (K - 1 df) of the log ratio of the suite's total spend, incumbent over "
        "candidate (each task's mean metric per run, weighted by its share of both arms' spend); the standard "
        "error is the spread of the per-task log ratios between tasks"
    ),
    "per_task": (
        "one-sided t-test across tasks (K - 1 df) of the mean over tasks of per-task mean log-metric "
        "differences (every task weighs the same); the standard error is their spread between tasks"
    ),
}
QUALITY_METHOD = (
    "task-stratified (Mantel-Haenszel weighted) resolution-rate difference; non-inferiority is tested with "
    "each task's variance at the margin (restricted maximum likelihood, Farrington-Manning), better and worse "
    "with each task's pooled rate; per task, an exact binomial test of the candidate's failures against the "
    "larger of the failure rate of the pair's other runs and the incumbent's own on the task, Holm-adjusted "
    "over the gated tasks"
)

Cells = list[tuple[list[float], list[float]]]  # per task: (incumbent values, candidate values)


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def _p(value: float) -> float:
    """A p-value to six significant digits: a tiny p stays above zero (only a certainty is 0)."""
    return float(f"{float(value):.6g}")


def _pct_from_log(value: float) -> float:
    """A mean log ratio (incumbent over candidate) as a percent saving: 100 * (1 - exp(-value))."""
    return 100.0 * (1.0 - math.exp(-value))


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _sample_variance(values: list[float]) -> float:
    centre = _mean(values)
    return math.fsum((value - centre) ** 2 for value in values) / (len(values) - 1)


# ─── Cost ───────────────────────────────────────────────────────────────────


def log_cells(cells: Cells) -> Cells | None:
    """The natural log of every value, or None when any value is not positive (no log scale)."""
    if any(value <= 0 for incumbent, candidate in cells for value in (*incumbent, *candidate)):
        return None
    return [([math.log(v) for v in incumbent], [math.log(v) for v in candidate]) for incumbent, candidate in cells]


def cost_components(cells: Cells, objective: str) -> tuple[list[float], list[float], float] | None:
    """Per task its log ratio (incumbent over candidate) and weight, and the objective's estimate on the log scale.

    ``total_spend``: a task's ratio is of the two arms' mean metric per run, its weight its share of both
    arms' summed means (symmetric in the arms, so swapping them negates the estimate exactly), and the
    estimate the log ratio of the suite's totals. ``per_task``: a task's ratio is of the arms' geometric
    means, every weight is 1/K and the estimate their mean. None when a cell is empty or a value is not
    positive."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown cost objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    logs = log_cells(cells) if cells else None
    if not logs or any(not inc or not cand for inc, cand in logs):
        return None
    if objective == "per_task":
        ratios = [_mean(inc) - _mean(cand) for inc, cand in logs]
        return ratios, [1 / len(ratios)] * len(ratios), _mean(ratios)
    means = [(_mean(inc), _mean(cand)) for inc, cand in cells]
    total = math.fsum(a + b for a, b in means)
    ratios = [math.log(a / b) for a, b in means]
    weights = [(a + b) / total for a, b in means]
    return ratios, weights, math.log(math.fsum(a for a, _ in means) / math.fsum(b for _, b in means))


def cost_test(cells: Cells, *, alpha: float, floor_pct: float, objective: str = "total_spend") -> dict[str, Any]:
    """Is the candidate cheaper on the objective? One entry of ``cells`` per task: (incumbent values, candidate values).

    Tasks are the unit of replication: whatever a (task, arm)'s runs share — a cached incumbent cell's
    prompt-cache state, the machine's load that hour — is in the per-task log ratio, so the standard error
    is the spread of those ratios between tasks, ``s * sqrt(sum of squared weights)``, and the t-test has
    K - 1 degrees of freedom (K tasks). The one-sided p-value tests "not cheaper"; ``p_higher`` tests "not
    costlier" (small: credibly costlier). The interval is the two-sided 1 - 2*alpha one, whose lower bound
    is above zero exactly when p <= alpha; the minimum detectable effect is the saving found with
    probability 0.8 at this spread. Fewer than two tasks, or per-task ratios that do not vary at all
    (no noise measured), give no test: a p-value would claim a certainty the runs cannot give.
    """
    result: dict[str, Any] = {
        "method": COST_METHODS.get(objective, ""),
        "objective": objective,
        "alpha": alpha,
        "floor_pct": floor_pct,
        "confidence": round(1 - 2 * alpha, 6),
        "tasks": len(cells),
        "effective_tasks": None,
        "estimate_pct": None,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "p_value": None,
        "p_higher": None,
        "df": None,
        "se_log": None,
        "mde_pct": None,
        "noise_measured": False,
        "conclusion": "not_computable",
    }
    components = cost_components(cells, objective)
    if components is None:
        return result
    ratios, weights, estimate = components
    result["estimate_pct"] = round(_pct_from_log(estimate), 1)
    result["effective_tasks"] = round(1 / math.fsum(w * w for w in weights), 2)
    if len(ratios) < 2:
        return result
    spread = _sample_variance(ratios)
    # Identical per-task ratios (up to rounding) measure no noise at all.
    if spread <= (1e-9 * max(1.0, max(abs(ratio) for ratio in ratios))) ** 2:
        return result
    df = len(ratios) - 1
    se = math.sqrt(spread * math.fsum(w * w for w in weights))
    p_value = float(stats.t.sf(estimate / se, df))
    critical = float(stats.t.isf(alpha, df))
    low, high = estimate - critical * se, estimate + critical * se
    mde = (critical + float(stats.t.ppf(POWER, df))) * se
    estimate_pct, high_pct = _pct_from_log(estimate), _pct_from_log(high)
    if p_value <= alpha and estimate_pct >= floor_pct:
        conclusion = "cheaper"
    elif p_value <= alpha:
        conclusion = "below_floor"
    elif high_pct < floor_pct:
        conclusion = "not_cheaper"
    else:
        conclusion = "inconclusive"
    result.update(
        {
            "ci_low_pct": round(_pct_from_log(low), 1),
            "ci_high_pct": round(high_pct, 1),
            "p_value": _p(p_value),
            "p_higher": _p(float(stats.t.cdf(estimate / se, df))),
            "df": df,
            "se_log": _round(se),
            "mde_pct": round(_pct_from_log(mde), 1),
            "noise_measured": True,
            "conclusion": conclusion,
        }
    )
    return result


def cost_within_pct(test: dict[str, Any], margin_pct: float) -> float | None:
    """One-sided p-value against "the candidate costs at least ``margin_pct`` % more" from a ``cost_test`` result
    (small: shown to cost less than that); None when the test was not computable."""
    if test["se_log"] is None or test["estimate_pct"] is None:
        return None
    estimate = -math.log(1 - test["estimate_pct"] / 100)
    return _p(float(stats.t.sf((estimate + math.log(1 + margin_pct / 100)) / test["se_log"], test["df"])))


def cost_power(
    *,
    saving_pct: float,
    tasks: int,
    runs: int,
    run_variance: float,
    shared_sd: float,
    alpha: float,
    floor_pct: float = 0.0,
    spend_efficiency: float = 1.0,
) -> float:
    """Chance that ``cost_test`` finds a true ``saving_pct`` saving (p <= alpha and the estimate at the floor).

    A per-task log ratio varies by 2 * (shared_sd² + run_variance / runs): what a (task, arm)'s runs share
    does not average away over more runs. ``spend_efficiency`` is the effective share of the tasks the
    weights leave (1 for equal weights; (mean cost)² / mean(cost²) for spend weights). Exact for normal
    per-task ratios: the estimate is normal, the spread's estimate a scaled chi-square with K - 1 df."""
    if tasks < 2:
        return 0.0
    effect = -math.log(1 - saving_pct / 100)
    floor = -math.log(1 - floor_pct / 100)
    spread = math.sqrt(2 * (shared_sd**2 + run_variance / runs))
    se = spread / math.sqrt(tasks * spend_efficiency)
    df = tasks - 1
    critical = float(stats.t.isf(alpha, df))

    def reached(scale: float) -> float:
        # scale = the estimated spread over the true one; the estimate must pass the boundary and the floor.
        return float(stats.norm.sf((max(floor, critical * se * scale) - effect) / se)) * float(
            stats.chi2.pdf(scale * scale * df, df) * 2 * scale * df
        )

    value, _ = integrate.quad(reached, 0.0, math.inf, limit=200)
    return min(1.0, max(0.0, value))


def cheapest_design(
    *,
    saving_pct: float,
    run_variance: float,
    shared_sd: float,
    alpha: float,
    floor_pct: float,
    spend_efficiency: float,
    tasks: int | None = None,
    power: float = POWER,
    min_runs: int = 1,
    max_runs: int = 30,
    max_tasks: int = 200,
    min_runs_per_arm: int = 0,
) -> dict[str, Any] | None:
    """The design (tasks × runs per task and arm) with the fewest runs that reaches ``power`` for a true
    ``saving_pct`` saving; with ``tasks`` given, the fewest runs for that many tasks. ``min_runs_per_arm``:
    runs per arm over all tasks some other test needs (non-inferiority); ``min_runs``: the policy's runs per
    cell. Power rises with runs, so the first design that reaches it per task count is the cheapest there.
    None when out of reach."""
    best: dict[str, Any] | None = None
    for count in [tasks] if tasks else range(2, max_tasks + 1):
        if best is not None and count * min_runs > best["tasks"] * best["runs"]:
            break  # every larger suite needs more runs than the best design so far

        def power_at(runs: int, count: int = count) -> float:
            return cost_power(
                saving_pct=saving_pct,
                tasks=count,
                runs=runs,
                run_variance=run_variance,
                shared_sd=shared_sd,
                alpha=alpha,
                floor_pct=floor_pct,
                spend_efficiency=spend_efficiency,
            )

        # Power rises with runs (the spread of a task's ratio shrinks toward what its runs share), so the fewest
        # runs that reach it are found by bisection, after one look at the most runs allowed.
        low = max(min_runs, -(-min_runs_per_arm // count))
        if low > max_runs or power_at(max_runs) < power:
            continue
        high = max_runs
        while low < high:
            middle = (low + high) // 2
            if power_at(middle) >= power:
                high = middle
            else:
                low = middle + 1
        if best is None or count * low < best["tasks"] * best["runs"]:
            best = {"tasks": count, "runs": low, "power": round(power_at(low), 3)}
    return best


def pooled_log_variance(cells: Cells) -> tuple[float, int] | None:
    """(pooled within-cell variance of the log metric, its degrees of freedom) over every task and arm."""
    logs = log_cells(cells) if cells else None
    if not logs:
        return None
    squares = df = 0.0
    for pair in logs:
        for values in pair:
            if len(values) >= 2:
                centre = _mean(values)
                squares += math.fsum((value - centre) ** 2 for value in values)
                df += len(values) - 1
    return (squares / df, int(df)) if df else None


def between_task_variance(cells: Cells) -> tuple[float, int] | None:
    """(variance of the per-task mean log differences between tasks, K - 1): what one task's difference varies
    by when (task, arm)s share effects their own runs cannot show. None with fewer than two usable tasks."""
    logs = log_cells(cells) if cells else None
    if not logs:
        return None
    ratios = [_mean(inc) - _mean(cand) for inc, cand in logs if inc and cand]
    return (_sample_variance(ratios), len(ratios) - 1) if len(ratios) >= 2 else None


def task_regression(
    incumbent: list[float],
    candidate: list[float],
    *,
    pooled: tuple[float, int] | None,
    alpha: float,
    cap_pct: float,
    between: tuple[float, int] | None = None,
) -> dict[str, Any]:
    """Is the candidate credibly more expensive on one task by more than the cap?

    A single task has too few runs for its own variance, so the test borrows the pooled
    within-cell variance of the whole pair, or — when it is larger — the spread of the per-task
    differences between tasks (``between``), which also holds what a (task, arm)'s runs share.
    ``regressed`` when the task's geometric-mean cost rose by more than ``cap_pct`` and a
    one-sided t-test says the rise is real at ``alpha`` (the caller divides alpha by the
    number of tasks it checks). With no variance at all there is no test: nothing is claimed.
    """
    logs = log_cells([(incumbent, candidate)]) if incumbent and candidate else None
    if not logs:
        return {"regression_pct": None, "p_value": None, "regressed": False}
    inc, cand = logs[0]
    rise = _mean(cand) - _mean(inc)
    regression_pct = 100.0 * (math.exp(rise) - 1.0)
    options = []
    if pooled is not None and pooled[0] > 0:
        options.append((pooled[0] * (1 / len(inc) + 1 / len(cand)), pooled[1]))
    if between is not None and between[0] > 0:
        options.append(between)
    if not options:
        return {"regression_pct": round(regression_pct, 1), "p_value": None, "regressed": False}
    variance, df = max(options)
    p_value = float(stats.t.sf(rise / math.sqrt(variance), df))
    return {
        "regression_pct": round(regression_pct, 1),
        "p_value": _p(p_value),
        "regressed": regression_pct > cap_pct and p_value <= alpha,
    }


def task_saving(incumbent: list[float], candidate: list[float], *, objective: str, alpha: float) -> dict[str, Any]:
    """One task's own saving on the objective's scale (arithmetic means for total_spend, geometric for per_task)
    and its 1 - 2*alpha interval from the task's own runs (Welch-Satterthwaite; delta method for arithmetic means)."""
    empty = {"saving_pct": None, "ci_low_pct": None, "ci_high_pct": None}
    components = cost_components([(incumbent, candidate)], objective)
    if components is None:
        return empty
    estimate = components[2]
    if objective == "per_task":
        logs = log_cells([(incumbent, candidate)])
        assert logs is not None
        samples = list(logs[0])
        scales = [1.0, 1.0]
    else:
        samples = [incumbent, candidate]
        scales = [_mean(values) ** 2 for values in samples]
    # Each arm's variance of its mean, on the log scale, with its degrees of freedom.
    terms = [
        (_sample_variance(values) / len(values) / scale, len(values) - 1)
        for values, scale in zip(samples, scales, strict=True)
        if len(values) >= 2
    ]
    result = {**empty, "saving_pct": round(_pct_from_log(estimate), 1)}
    variance = math.fsum(term for term, _ in terms)
    if len(terms) < 2 or variance <= 0:
        return result
    df = variance**2 / math.fsum(term**2 / dof for term, dof in terms if term > 0)
    half = float(stats.t.isf(alpha, df)) * math.sqrt(variance)
    result["ci_low_pct"] = round(_pct_from_log(estimate - half), 1)
    result["ci_high_pct"] = round(_pct_from_log(estimate + half), 1)
    return result


# ─── Quality ────────────────────────────────────────────────────────────────


def restricted_rates(
    incumbent_resolved: int, incumbent_runs: int, candidate_resolved: int, candidate_runs: int, difference: float
) -> tuple[float, float]:
    """Maximum-likelihood resolution rates (incumbent, candidate) of one task under the constraint
    candidate - incumbent = ``difference``.

    The log-likelihood is concave in the incumbent's rate q on the feasible interval, and its derivative has
    the sign of the cubic (x_i - n_i q)(q + d)(1 - q - d) + (x_c - n_c (q + d)) q (1 - q), so bisection on
    that sign finds the maximum (at a bound when the derivative keeps one sign)."""
    x0, n0, x1, n1, d = incumbent_resolved, incumbent_runs, candidate_resolved, candidate_runs, difference
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    for _ in range(60):
        q = (low + high) / 2
        slope = (x0 - n0 * q) * (q + d) * (1 - q - d) + (x1 - n1 * (q + d)) * q * (1 - q)
        if slope > 0:
            low = q
        else:
            high = q
    q = (low + high) / 2
    return q, q + d


def mh_weights(tables: list[tuple[int, int, int, int]]) -> list[float]:
    """Mantel-Haenszel weights n_inc*n_cand/(n_inc+n_cand), one per (x_inc, n_inc, x_cand, n_cand) table."""
    return [n_i * n_c / (n_i + n_c) for _, n_i, _, n_c in tables]


def stratified_difference(tables: list[tuple[int, int, int, int]], margin: float) -> tuple[float, float, float]:
    """(difference, its binomial variance at the pooled rates, the same at the margin) of the Mantel-Haenszel
    rate difference over tables that all have runs on both sides (see ``quality_test``)."""
    weights = mh_weights(tables)
    total = math.fsum(weights)
    difference = math.fsum(w * (x_c / n_c - x_i / n_i) for w, (x_i, n_i, x_c, n_c) in zip(weights, tables, strict=True))
    difference /= total
    pooled = (
        math.fsum(
            w**2 * ((x_i + x_c) / (n_i + n_c)) * (1 - (x_i + x_c) / (n_i + n_c)) * (1 / n_i + 1 / n_c)
            for w, (x_i, n_i, x_c, n_c) in zip(weights, tables, strict=True)
        )
        / total**2
    )
    at_margin = 0.0
    for w, table in zip(weights, tables, strict=True):
        p_inc, p_cand = restricted_rates(*table, -margin)
        at_margin += w**2 * (p_inc * (1 - p_inc) / table[1] + p_cand * (1 - p_cand) / table[3])
    return difference, pooled, at_margin / total**2


def quality_conclusion(
    p_better: float, p_worse: float, p_noninferiority: float, *, alpha: float, better_alpha: float
) -> str:
    """A quality test's conclusion from its three p-values: a gain first (it must reach ``better_alpha``), then a
    credible loss, then non-inferiority."""
    if p_better <= better_alpha:
        return "better"
    if p_worse <= alpha:
        return "worse"
    if p_noninferiority <= alpha:
        return "not_worse"
    return "inconclusive"


def quality_test(
    tables: list[tuple[int, int, int, int]], *, alpha: float, margin_pct: float, better_alpha: float
) -> dict[str, Any]:
    """Is the candidate's resolution worse? One (incumbent resolved, runs, candidate resolved, runs) per task.

    The difference (candidate - incumbent) is averaged over tasks with Mantel-Haenszel weights
    n_inc*n_cand/(n_inc+n_cand) (equal weights for a balanced design), so a task's own
    difficulty never leaks into the comparison. ``p_noninferiority`` (H0: the candidate is worse by
    at least the margin) takes each task's variance at the margin — the rates that fit the runs best
    among those exactly a margin apart — so runs that all resolved still carry the uncertainty of
    how many runs they are (9 of 9 is no proof of a rate above 90 %). ``p_worse`` (H0: not worse;
    small = credibly worse) and ``p_better`` (H0: not better; must reach ``better_alpha``, the
    resolution route's share of the false-promotion rate) take each task's pooled rate, which stays
    positive whenever a task has both outcomes. The interval is the difference ± z·(its standard
    error at the margin), so its lower bound is above minus the margin exactly when non-inferiority
    holds at alpha.
    """
    margin = margin_pct / 100.0
    result: dict[str, Any] = {
        "method": QUALITY_METHOD,
        "alpha": alpha,
        "better_alpha": better_alpha,
        "margin_pct": margin_pct,
        "incumbent_resolved": sum(t[0] for t in tables),
        "incumbent_runs": sum(t[1] for t in tables),
        "candidate_resolved": sum(t[2] for t in tables),
        "candidate_runs": sum(t[3] for t in tables),
        "difference_pct": None,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "p_noninferiority": None,
        "p_worse": None,
        "p_better": None,
        "mde_pct": None,
        "conclusion": "not_computable",
    }
    usable = [t for t in tables if t[1] > 0 and t[3] > 0]
    if not usable:
        return result
    difference, pooled, at_margin = stratified_difference(usable, margin)
    if pooled > 0:
        p_worse = float(stats.norm.cdf(difference / math.sqrt(pooled)))
        p_better = float(stats.norm.sf(difference / math.sqrt(pooled)))
    else:
        p_worse = p_better = 1.0  # every task all-resolved or all-failed in both arms: no difference to test
    critical = float(stats.norm.isf(alpha))
    if margin >= 1.0:  # a 100-point margin: every resolution is within it
        p_noninferiority, low, high, mde = 0.0, difference - 1.0, difference + 1.0, 0.0
    elif at_margin > 0:
        se = math.sqrt(at_margin)
        p_noninferiority = float(stats.norm.sf((difference + margin) / se))
        low, high = difference - critical * se, difference + critical * se
        mde = (critical + float(stats.norm.ppf(POWER))) * se
    else:  # a zero margin on runs without variance: nothing can be shown
        p_noninferiority, low, high, mde = 1.0, difference, difference, 0.0
    conclusion = quality_conclusion(p_better, p_worse, p_noninferiority, alpha=alpha, better_alpha=better_alpha)
    result.update(
        {
            "difference_pct": round(100 * difference, 1),
            "ci_low_pct": round(100 * low, 1),
            "ci_high_pct": round(100 * high, 1),
            "p_noninferiority": _p(p_noninferiority),
            "p_worse": _p(p_worse),
            "p_better": _p(p_better),
            "mde_pct": round(100 * mde, 1),
            "conclusion": conclusion,
        }
    )
    return result


def resolution_drops(tables: list[tuple[int, int, int, int]]) -> list[float]:
    """Per task, the one-sided p-value that the candidate fails it more often than the incumbent would.

    An exact binomial test of the candidate's failures on the task against a reference failure rate: the
    larger of the rate of every other run of the pair (every gated task and both arms but the candidate's
    runs on this task; (failures + ½) / (runs + 1), so a suite that never failed still allows a failure now
    and then) and the incumbent's own rate on the task. A task has too few runs to tell on its own what an
    equal candidate's failures would look like (5 of 5 against 3 of 5 is no evidence under Fisher's test), so
    the check borrows the suite's rate: two failures where the rest fails one run in a hundred are a drop,
    the same two where it fails one in ten are not; the incumbent's own rate keeps a task that is hard for
    both arms from looking like a drop. A task where the candidate fails no more often than the incumbent
    has p = 1."""
    failed = sum(t[1] - t[0] + t[3] - t[2] for t in tables)
    runs = sum(t[1] + t[3] for t in tables)
    p_values = []
    for x_i, n_i, x_c, n_c in tables:
        if not n_i or not n_c or (n_c - x_c) / n_c <= (n_i - x_i) / n_i:
            p_values.append(1.0)
            continue
        others = (failed - (n_c - x_c) + 0.5) / (runs - n_c + 1)
        reference = max(others, (n_i - x_i) / n_i)
        p_values.append(_p(float(stats.binom.sf(n_c - x_c - 1, n_c, reference))))
    return p_values


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error over the list), in the list's order."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = _p(running)
    return adjusted


# ─── The upstream rule's statistics ─────────────────────────────────────────


def sign_test(improvements: list[float]) -> dict[str, Any]:
    """Exact two-sided binomial sign test (p = 1/2) over improvement signs; ties are dropped."""
    wins = sum(1 for value in improvements if value > 0)
    losses = sum(1 for value in improvements if value < 0)
    ties = len(improvements) - wins - losses
    p_value = 1.0 if wins + losses == 0 else float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
    return {"wins": wins, "losses": losses, "ties": ties, "p_value": round(min(1.0, p_value), 6)}


@lru_cache(maxsize=256)
def _bootstrap_bounds(improvements: tuple[float, ...], resamples: int, seed: int) -> tuple[float, float]:
    # Cached: both rules of one decision (and the bench's repeated calls) resample the same values.
    if len(set(improvements)) == 1:
        return improvements[0], improvements[0]
    interval = stats.bootstrap(
        (np.asarray(improvements, dtype=float),),
        np.median,
        confidence_level=BOOTSTRAP_CONFIDENCE,
        n_resamples=resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    return float(interval.low), float(interval.high)


def bootstrap_median_ci(
    improvements: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Percentile bootstrap CI of the median per-task improvement, resampling whole tasks.

    ``scipy.stats.bootstrap`` with a fixed seed, so reruns are identical. With no
    improvements the bounds are None; with a single value (or all values equal) every
    resample has the same median and the interval is that value.
    """
    result: dict[str, Any] = {
        "ci_low_pct": None,
        "ci_high_pct": None,
        "confidence": BOOTSTRAP_CONFIDENCE,
        "resamples": resamples,
        "seed": seed,
        "excludes_zero": False,
    }
    if not improvements:
        return result
    low, high = _bootstrap_bounds(tuple(float(value) for value in improvements), resamples, seed)
    # Decide on the reported (rounded) bounds so the document and the rule never disagree.
    result["ci_low_pct"] = round(low, 1)
    result["ci_high_pct"] = round(high, 1)
    result["excludes_zero"] = result["ci_low_pct"] > 0 or result["ci_high_pct"] < 0
    return result


# ─── Group-sequential designs (interim looks) ───────────────────────────────

SPENDING_FUNCTIONS = ("obrien_fleming", "pocock")
_GRID_STEP = 0.02  # spacing of the score grid the crossing probabilities are integrated on
_GRID_LOW = -10.0


def spent_alpha(fraction: float, alpha: float, spending: str) -> float:
    """Lan-DeMets alpha spending: the one-sided type I error spent by information fraction ``fraction``.

    ``obrien_fleming``: 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) — almost nothing early, nearly all of
    alpha at the last look. ``pocock``: alpha ln(1 + (e - 1) t) — about evenly over the looks.
    """
    if fraction <= 0:
        return 0.0
    fraction = min(1.0, fraction)
    if spending == "obrien_fleming":
        return float(2 * stats.norm.sf(stats.norm.isf(alpha / 2) / math.sqrt(fraction)))
    if spending == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * fraction))
    raise ValueError(f"unknown alpha spending function {spending!r}: choose one of {', '.join(SPENDING_FUNCTIONS)}")


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
    # The standardized statistic at look k is S_k / sqrt(t_k), where the score S is a Brownian
    # motion in information time (independent increments N(0, t_k - t_{k-1}) under H0). The
    # sub-density of S_k on the paths that crossed no earlier boundary is carried on a grid;
    # each boundary solves "crossing probability at this look = alpha spent at this look".
    grid = np.arange(_GRID_LOW, 12.0 + _GRID_STEP / 2, _GRID_STEP)
    density: np.ndarray | None = None
    previous_t = 0.0
    previous_spent = 0.0
    bounds = []
    for t in fractions:
        increment = spent_alpha(t, alpha, spending) - previous_spent
        width = math.sqrt(t - previous_t)
        if density is None:
            z = float(stats.norm.isf(increment)) if increment > 0 else math.inf
            bound = z * width
        else:
            weights = density * _GRID_STEP

            def excess(
                b: float, weights: np.ndarray = weights, width: float = width, target: float = increment
            ) -> float:
                return float(np.dot(weights, stats.norm.sf((b - grid) / width))) - target

            bound = math.inf if increment <= 0 else optimize.brentq(excess, -5.0, 15.0, xtol=1e-9)
        bounds.append(bound / math.sqrt(t))
        # Carry the paths that stayed below the boundary to the next look.
        new = stats.norm.pdf(grid / width) / width if density is None else _convolve(density, grid, width)
        density = np.where(grid < bound, new, 0.0)
        previous_t, previous_spent = t, spent_alpha(t, alpha, spending)
    return tuple(bounds)


def _convolve(density: np.ndarray, grid: np.ndarray, width: float) -> np.ndarray:
    kernel = stats.norm.pdf((grid[:, None] - grid[None, :]) / width) / width
    return kernel @ (density * _GRID_STEP)


def sequential_boundaries(fractions: list[float], *, alpha: float, spending: str) -> list[dict[str, float | None]]:
    """Per look, the efficacy boundary of a one-sided group-sequential test at overall level ``alpha``.

    ``fractions`` are the looks' information fractions (runs so far / maximum runs), increasing
    and ending at 1. Returns per look the boundary ``z`` on the standardized scale, its nominal
    one-sided p-value (what a look's test must reach), and the alpha spent so far. The
    boundaries are exact for a normal statistic with independent increments (nested batches of
    runs); an efficacy crossing at any look is then at most ``alpha`` likely under H0. Futility
    stops never raise this rate (they only remove chances to cross), so they are non-binding.
    """
    if not fractions or any(b <= a for a, b in zip(fractions, fractions[1:], strict=False)) or fractions[-1] != 1:
        raise ValueError(f"information fractions must increase to 1 (got {fractions})")
    bounds = _boundaries(tuple(round(f, 9) for f in fractions), round(alpha, 9), spending)
    return [
        {
            "fraction": round(t, 6),
            "z": round(z, 4) if math.isfinite(z) else None,
            "nominal_alpha": round(float(stats.norm.sf(z)), 8) if math.isfinite(z) else 0.0,
            "spent_alpha": round(spent_alpha(t, alpha, spending), 8),
        }
        for t, z in zip(fractions, bounds, strict=True)
    ]


def spent_increments(fractions: list[float], *, alpha: float, spending: str) -> list[float]:
    """Alpha spent at each look alone (the spending function's increments); they sum to ``alpha``.

    Used where the looks' statistics are not a Brownian motion (the resolution tests): testing
    look k at its own increment bounds the error over all looks by their sum (Bonferroni).
    """
    spent = [spent_alpha(t, alpha, spending) for t in fractions]
    return [round(b - a, 8) for a, b in zip([0.0, *spent], spent, strict=False)]


def conditional_power(estimate: float, se: float, *, runs: int, max_runs: int, threshold: float) -> float:
    """Chance that the final estimate (at ``max_runs`` per cell) reaches ``threshold`` if the current trend holds.

    The estimate after the remaining runs is the runs-weighted mean of the current estimate and
    the new runs' (mean ``estimate``, standard error ``se * sqrt(runs / (max_runs - runs))``),
    so given the data so far it is normal with mean ``estimate`` and standard deviation
    ``se * sqrt(runs * (max_runs - runs)) / max_runs``.
    """
    if runs >= max_runs:
        return 1.0 if estimate >= threshold else 0.0
    spread = se * math.sqrt(runs * (max_runs - runs)) / max_runs
    if spread <= 0:
        return 1.0 if estimate >= threshold else 0.0
    return float(stats.norm.sf((threshold - estimate) / spread))
