"""The gate's statistics: the tests behind a promotion decision, as pure functions of plain numbers.

Owns the cost test (Welch t on per-task mean log metric differences, tasks as blocks), the
per-task cost regression check, the resolution tests (a task-stratified risk difference with a
non-inferiority margin, and Fisher's exact test per task), the minimum detectable effects, and
the upstream rule's sign test and bootstrap, and the group-sequential machinery (Lan-DeMets
alpha spending, exact efficacy boundaries over the looks, conditional power). Distributions and exact tests come from
``scipy.stats``; nothing here reads files or clocks, and the only randomness is the bootstrap's
fixed seed, so the same numbers always give the same answer.

Every test takes its ``alpha`` as an argument, so an interim look of a sequential design can
call the same functions with the alpha it has spent so far.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize, stats

POWER = 0.8
BOOTSTRAP_RESAMPLES = 10000
BOOTSTRAP_SEED = 20261129
BOOTSTRAP_CONFIDENCE = 0.95

COST_METHOD = (
    "one-sided Welch t-test on the mean over tasks of per-task mean log-metric differences "
    "(tasks are blocks; each task and arm keeps its own run-to-run variance; Satterthwaite df)"
)
QUALITY_METHOD = (
    "task-stratified (Mantel-Haenszel weighted) resolution-rate difference with a pooled within-task "
    "variance; one-sided non-inferiority test against the margin, and Fisher's exact test per task"
)


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def _pct_from_log(value: float) -> float:
    """A mean log ratio (incumbent over candidate) as a percent saving: 100 * (1 - exp(-value))."""
    return 100.0 * (1.0 - math.exp(-value))


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _sample_variance(values: list[float]) -> float:
    centre = _mean(values)
    return math.fsum((value - centre) ** 2 for value in values) / (len(values) - 1)


# ─── Cost ───────────────────────────────────────────────────────────────────


def log_cells(cells: list[tuple[list[float], list[float]]]) -> list[tuple[list[float], list[float]]] | None:
    """The natural log of every value, or None when any value is not positive (no log scale)."""
    if any(value <= 0 for incumbent, candidate in cells for value in (*incumbent, *candidate)):
        return None
    return [([math.log(v) for v in incumbent], [math.log(v) for v in candidate]) for incumbent, candidate in cells]


def cost_test(cells: list[tuple[list[float], list[float]]], *, alpha: float, floor_pct: float) -> dict[str, Any]:
    """Is the candidate cheaper? One entry of ``cells`` per task: (incumbent values, candidate values).

    The estimate is the mean over tasks of (mean log incumbent - mean log candidate), so every
    task counts once whatever its cost level, and a multiplicative saving is one number. Its
    variance is the sum of each task's and arm's own sample variance over its runs, divided by
    the squared task count (Welch), with Satterthwaite degrees of freedom. The one-sided p-value
    tests "not cheaper" (a true saving <= 0). With no run-to-run variance at all the difference
    is exact: p is 0 for a positive estimate and 1 otherwise. The reported interval is the
    two-sided 1 - 2*alpha interval, whose lower bound is above zero exactly when p <= alpha.
    The minimum detectable effect is the saving this design finds with probability 0.8 at this
    alpha, given the observed variance. A cell with a single run has no variance to measure:
    when any cell has one run (only possible with ``min_runs: 1``) the test cannot measure the
    noise, treats the difference as exact and says so (``noise_measured`` false).
    """
    result: dict[str, Any] = {
        "method": COST_METHOD,
        "alpha": alpha,
        "floor_pct": floor_pct,
        "confidence": round(1 - 2 * alpha, 6),
        "estimate_pct": None,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "p_value": None,
        "df": None,
        "se_log": None,
        "mde_pct": None,
        "noise_measured": False,
        "conclusion": "not_computable",
    }
    logs = log_cells(cells) if cells else None
    if not logs or any(not inc or not cand for inc, cand in logs):
        return result
    tasks = len(logs)
    estimate = _mean([_mean(inc) - _mean(cand) for inc, cand in logs])
    noise_measured = all(len(values) >= 2 for pair in logs for values in pair)
    terms = (
        [_sample_variance(values) / len(values) / tasks**2 for pair in logs for values in pair]
        if noise_measured
        else []
    )
    dfs = [len(values) - 1 for pair in logs for values in pair]
    variance = math.fsum(terms)
    if variance <= 0:
        p_value, df, low, high, mde = (0.0 if estimate > 0 else 1.0), None, estimate, estimate, 0.0
    else:
        se = math.sqrt(variance)
        df = variance**2 / math.fsum(term**2 / d for term, d in zip(terms, dfs, strict=True) if term > 0)
        p_value = float(stats.t.sf(estimate / se, df))
        critical = float(stats.t.isf(alpha, df))
        low, high = estimate - critical * se, estimate + critical * se
        mde = (critical + float(stats.t.ppf(POWER, df))) * se
    estimate_pct, low_pct, high_pct = _pct_from_log(estimate), _pct_from_log(low), _pct_from_log(high)
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
            "estimate_pct": round(estimate_pct, 1),
            "ci_low_pct": round(low_pct, 1),
            "ci_high_pct": round(high_pct, 1),
            "p_value": _round(p_value),
            "df": _round(df, 2),
            "se_log": _round(math.sqrt(variance)),
            "mde_pct": round(_pct_from_log(mde), 1),
            "noise_measured": noise_measured,
            "conclusion": conclusion,
        }
    )
    return result


def pooled_log_variance(cells: list[tuple[list[float], list[float]]]) -> tuple[float, int] | None:
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


def task_regression(
    incumbent: list[float], candidate: list[float], *, pooled: tuple[float, int] | None, alpha: float, cap_pct: float
) -> dict[str, Any]:
    """Is the candidate credibly more expensive on one task by more than the cap?

    A single task has too few runs for its own variance, so the test borrows the pooled
    within-cell variance of the whole pair. ``regressed`` when the task's geometric-mean cost
    rose by more than ``cap_pct`` and a one-sided t-test says the rise is real at ``alpha``
    (the caller divides alpha by the number of tasks it checks).
    """
    logs = log_cells([(incumbent, candidate)]) if incumbent and candidate else None
    if not logs:
        return {"regression_pct": None, "p_value": None, "regressed": False}
    inc, cand = logs[0]
    rise = _mean(cand) - _mean(inc)
    regression_pct = 100.0 * (math.exp(rise) - 1.0)
    if pooled is None or pooled[0] <= 0:
        p_value = 0.0 if rise > 0 else 1.0
    else:
        se = math.sqrt(pooled[0] * (1 / len(inc) + 1 / len(cand)))
        p_value = float(stats.t.sf(rise / se, pooled[1]))
    return {
        "regression_pct": round(regression_pct, 1),
        "p_value": _round(p_value),
        "regressed": regression_pct > cap_pct and p_value <= alpha,
    }


# ─── Quality ────────────────────────────────────────────────────────────────


@lru_cache(maxsize=4096)
def resolution_drop_p(
    incumbent_resolved: int, incumbent_runs: int, candidate_resolved: int, candidate_runs: int
) -> float:
    """Fisher's exact one-sided p-value that the candidate resolves this task less often than the incumbent."""
    if incumbent_runs == 0 or candidate_runs == 0:
        return 1.0
    table = np.array(
        [
            [candidate_resolved, candidate_runs - candidate_resolved],
            [incumbent_resolved, incumbent_runs - incumbent_resolved],
        ]
    )
    return round(float(stats.fisher_exact(table, alternative="less").pvalue), 6)


def quality_test(
    tables: list[tuple[int, int, int, int]], *, alpha: float, margin_pct: float, better_alpha: float
) -> dict[str, Any]:
    """Is the candidate's resolution worse? One (incumbent resolved, runs, candidate resolved, runs) per task.

    The difference (candidate - incumbent) is averaged over tasks with Mantel-Haenszel weights
    n_inc*n_cand/(n_inc+n_cand) (equal weights for a balanced design), so a task's own
    difficulty never leaks into the comparison. Its variance uses each task's pooled
    resolution rate, which stays positive whenever a task has both outcomes (a task one arm
    always fails and the other always passes is not mistaken for certainty). Three one-sided
    p-values: ``p_noninferiority`` (H0: the candidate is worse by at least the margin),
    ``p_worse`` (H0: not worse; small = credibly worse) and ``p_better`` (H0: not better),
    which must reach ``better_alpha`` (the share of the false-promotion rate the resolution
    route may spend) for the conclusion "better".
    With no variance (every task all-resolved or all-failed in both arms) the difference is 0
    and non-inferiority holds.
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
    weights = [n_i * n_c / (n_i + n_c) for _, n_i, _, n_c in usable]
    total = math.fsum(weights)
    difference = math.fsum(w * (x_c / n_c - x_i / n_i) for w, (x_i, n_i, x_c, n_c) in zip(weights, usable, strict=True))
    difference /= total
    variance = (
        math.fsum(
            w**2 * ((x_i + x_c) / (n_i + n_c)) * (1 - (x_i + x_c) / (n_i + n_c)) * (1 / n_i + 1 / n_c)
            for w, (x_i, n_i, x_c, n_c) in zip(weights, usable, strict=True)
        )
        / total**2
    )
    if variance <= 0:
        p_noninferiority = 0.0 if difference + margin > 0 else 1.0
        p_worse = 1.0 if difference >= 0 else 0.0
        p_better = 1.0 if difference <= 0 else 0.0
        low = high = difference
        mde = 0.0
    else:
        se = math.sqrt(variance)
        p_noninferiority = float(stats.norm.sf((difference + margin) / se))
        p_worse = float(stats.norm.cdf(difference / se))
        p_better = float(stats.norm.sf(difference / se))
        critical = float(stats.norm.isf(alpha))
        low, high = difference - critical * se, difference + critical * se
        mde = (critical + float(stats.norm.ppf(POWER))) * se
    if p_better <= better_alpha:
        conclusion = "better"
    elif p_worse <= alpha:
        conclusion = "worse"
    elif p_noninferiority <= alpha:
        conclusion = "not_worse"
    else:
        conclusion = "inconclusive"
    result.update(
        {
            "difference_pct": round(100 * difference, 1),
            "ci_low_pct": round(100 * low, 1),
            "ci_high_pct": round(100 * high, 1),
            "p_noninferiority": _round(p_noninferiority),
            "p_worse": _round(p_worse),
            "p_better": _round(p_better),
            "mde_pct": round(100 * mde, 1),
            "conclusion": conclusion,
        }
    )
    return result


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
