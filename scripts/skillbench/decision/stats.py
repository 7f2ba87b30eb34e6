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
from collections.abc import Iterator
from dataclasses import dataclass
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
        "one-sided t-test across tasks of the log ratio of the suite's total spend, incumbent over candidate (each "
        "task's mean metric per run, weighted by its share of both arms' spend); its variance is each task's own run "
        "noise plus the spread between tasks beyond it (Welch-Satterthwaite df); where the suite is large enough "
        "for it, a studentized sign-flip (randomisation) test across tasks must reject too"
    ),
    "per_task": (
        "one-sided t-test across tasks of the mean over tasks of per-task mean log-metric differences (every task "
        "weighs the same); its variance is each task's own run noise plus the spread between tasks beyond it "
        "(Welch-Satterthwaite df); where the suite is large enough for it, a studentized sign-flip (randomisation) "
        "test across tasks must reject too"
    ),
}
QUALITY_METHOD = (
    "task-stratified (Mantel-Haenszel weighted) resolution-rate difference; non-inferiority is tested with "
    "each task's variance at the margin (restricted maximum likelihood, Farrington-Manning), better and worse "
    "with each task's pooled rate; per task, an exact binomial test of the candidate's failures against the "
    "larger of the failure rate of the pair's other runs and the incumbent's own on the task, Holm-adjusted "
    "over the gated tasks the candidate resolved a smaller share of"
)

Cells = list[tuple[list[float], list[float]]]  # per task: (incumbent values, candidate values)

_EXP_LIMIT = 700.0  # exp() of more overflows a float
# An interval whose half-width on the log scale passes this (a factor of e^20, about 5e8, either way) carries no
# information about a skill's cost: its bounds are left out (None) instead of overflowing.
INTERVAL_LOG_LIMIT = 20.0
# Per-task log ratios that agree to within this are one number written twice, not noise: costs are recorded to ten
# decimals, a relative 1e-6 on a session of a hundredth of a cent, and no two real sessions agree that closely by
# chance (their costs vary by percents). Their spread is zero: no p-value is claimed.
RATIO_RESOLUTION = 1e-6
# The studentized sign-flip (randomisation) test across tasks: every flip of the K tasks' arms up to
# ``SIGN_FLIP_EXACT_FLIPS``, else that many (or more, for a small alpha) random flips from a fixed seed.
SIGN_FLIP_EXACT_FLIPS = 4096
SIGN_FLIP_MAX_FLIPS = 2**18
SIGN_FLIP_SEED = 20261203
SIGN_FLIP_RESOLUTION = 64  # random flips per unit of 1/alpha: the smallest p they can give is about alpha / 64


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def _p(value: float) -> float:
    """A p-value to six significant digits: a tiny p stays above zero (only a certainty is 0)."""
    return float(f"{float(value):.6g}")


def _pct_from_log(value: float) -> float:
    """A mean log ratio (incumbent over candidate) as a percent saving: 100 * (1 - exp(-value)). A candidate more
    than e^700 times dearer reads as that (a finite number a document can hold), not as an overflow."""
    return 100.0 * (1.0 - math.exp(min(-value, _EXP_LIMIT)))


def _bound_pct(value: float, half_width: float) -> float | None:
    """An interval bound (or a detectable effect) as a percent saving, 1 dp; None when the interval is so wide that it
    says nothing (a half-width beyond ``INTERVAL_LOG_LIMIT`` on the log scale: a t with one degree of freedom at a
    late generation's alpha), rather than a number no reader could use or an overflow."""
    if not math.isfinite(half_width) or half_width > INTERVAL_LOG_LIMIT:
        return None
    return round(_pct_from_log(value), 1)


def log_of_saving(pct: float) -> float:
    """A percent saving as the log ratio (incumbent over candidate) it is: -log(1 - pct/100); a saving of 100 % or
    more is out of reach (infinite)."""
    return math.inf if pct >= 100 else -math.log(1 - pct / 100)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _sample_variance(values: list[float]) -> float:
    centre = _mean(values)
    return math.fsum((value - centre) ** 2 for value in values) / (len(values) - 1)


# ─── Cost ───────────────────────────────────────────────────────────────────


def floor_zeros(cells: Cells) -> Cells | None:
    """Each task's values with a zero replaced by half the smallest positive value the task measured in either arm;
    None when a value is negative or a task measured nothing but zeros (there is no scale to put them on).

    A run that cost nothing (a session that exited at once) is cheaper than anything the meter resolved on the task;
    half its cheapest measured run is the usual stand-in for a value below the detection limit. It keeps the zero
    the task's cheapest run, symmetric in the arms, and bounds its log-scale weight to log 2 below the cheapest run,
    so one instant exit can neither make a geometric mean zero nor a log ratio infinite. The run still counts in the
    resolution test as what it was (a failure, if it resolved nothing)."""
    if all(min(incumbent, default=1.0) > 0 and min(candidate, default=1.0) > 0 for incumbent, candidate in cells):
        if all(incumbent or candidate for incumbent, candidate in cells):
            return cells
    floored: Cells = []
    for incumbent, candidate in cells:
        values = (*incumbent, *candidate)
        if any(value < 0 for value in values):
            return None
        positive = [value for value in values if value > 0]
        if not positive:
            return None
        floor = min(positive) / 2
        floored.append(([max(v, floor) for v in incumbent], [max(v, floor) for v in candidate]))
    return floored


def log_cells(cells: Cells) -> Cells | None:
    """The natural log of every value (zeros floored: ``floor_zeros``), or None when a value is negative or a task
    measured only zeros (no log scale)."""
    positive = floor_zeros(cells)
    if positive is None:
        return None
    return [([math.log(v) for v in incumbent], [math.log(v) for v in candidate]) for incumbent, candidate in positive]


def cost_components(cells: Cells, objective: str) -> tuple[list[float], list[float], float] | None:
    """Per task its log ratio (incumbent over candidate) and weight, and the objective's estimate on the log scale.

    ``total_spend``: a task's ratio is of the two arms' mean metric per run, its weight its share of both
    arms' summed means (symmetric in the arms, so swapping them negates the estimate exactly), and the
    estimate the log ratio of the suite's totals. ``per_task``: a task's ratio is of the arms' geometric
    means, every weight is 1/K and the estimate their mean. Zeros are floored (``floor_zeros``); None when a cell
    is empty, a value is negative or a task measured only zeros."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown cost objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    if not cells or any(not inc or not cand for inc, cand in cells):
        return None
    positive = floor_zeros(cells)
    logs = log_cells(cells)
    if positive is None or logs is None:
        return None
    if objective == "per_task":
        ratios = [_mean(inc) - _mean(cand) for inc, cand in logs]
        return ratios, [1 / len(ratios)] * len(ratios), _mean(ratios)
    means = [(_mean(inc), _mean(cand)) for inc, cand in positive]
    total = math.fsum(a + b for a, b in means)
    ratios = [math.log(a / b) for a, b in means]
    weights = [(a + b) / total for a, b in means]
    return ratios, weights, math.log(math.fsum(a for a, _ in means) / math.fsum(b for _, b in means))


@dataclass(frozen=True)
class RunNoise:
    """What each task's own runs say about its log ratio: per task the variance of the ratio (both arms' means) and
    that estimate's degrees of freedom. Swapping a task's arms keeps it; rescaling an arm keeps it (log scale)."""

    variances: tuple[float, ...]
    dofs: tuple[float, ...]


def run_noise(cells: Cells, objective: str) -> RunNoise | None:
    """Per task the variance of its log ratio that its runs show, summed over the arms with Welch-Satterthwaite
    degrees of freedom: ``total_spend`` each arm's variance of its mean relative to the mean squared, s² / (n x̄²)
    (the delta method for the log of a mean: a runaway session raises it as much as it moves the mean); ``per_task``
    the log metric's s² / n. Zeros floored (``floor_zeros``). None when a cell has fewer than two runs (nothing to
    measure: the spread between tasks alone is the yardstick)."""
    positive = floor_zeros(cells) if cells else None
    if positive is None or any(len(inc) < 2 or len(cand) < 2 for inc, cand in positive):
        return None
    logs = log_cells(positive)
    assert logs is not None
    variances, dofs = [], []
    for raw, logged in zip(positive, logs, strict=True):
        terms = []
        for values, log_values in zip(raw, logged, strict=True):
            if objective == "total_spend":
                relative = _sample_variance(values) / _mean(values) ** 2
            else:
                relative = _sample_variance(log_values)
            terms.append((relative / len(values), len(values) - 1))
        total = math.fsum(term for term, _ in terms)
        denominator = math.fsum(term * term / dof for term, dof in terms)
        variances.append(total)
        dofs.append(total * total / denominator if denominator > 0 else float(sum(dof for _, dof in terms)))
    return RunNoise(tuple(variances), tuple(dofs))


def spend_variance(
    ratios: list[float], weights: list[float], noise: RunNoise | None
) -> tuple[float, float, float | None]:
    """(variance of the estimate on the log scale, its degrees of freedom, the shared-effect variance τ² between
    tasks beyond their run noise — None without run noise).

    Each task's ratio varies by its own run noise u_i (what its runs show: a noisy expensive task is seen as noisy)
    plus what its (task, arm)s share, τ², which no run shows and only the spread between tasks s² can: τ² = max(0,
    s² - mean u). The estimate's variance is sum w_i² (u_i + τ²); its degrees of freedom are Welch-Satterthwaite's
    over the tasks' run terms and τ²'s K - 1. Without run noise (one run per cell) it is s² sum w_i² with K - 1 df,
    the spread between tasks alone."""
    count = len(ratios)
    spread = _sample_variance(ratios)
    squares = math.fsum(w * w for w in weights)
    if noise is None:
        return spread * squares, float(count - 1), None
    shared = max(0.0, spread - _mean(list(noise.variances)))
    terms = [w * w * u for w, u in zip(weights, noise.variances, strict=True)]
    shared_term = shared * squares
    variance = math.fsum(terms) + shared_term
    denominator = math.fsum(t * t / dof for t, dof in zip(terms, noise.dofs, strict=True) if t > 0)
    denominator += shared_term * shared_term / (count - 1)
    df = variance * variance / denominator if denominator > 0 else float(count - 1)
    return variance, max(1.0, df), shared


def _flip_signs(tasks: int, flips: int, exact: bool) -> Iterator[np.ndarray]:
    """Rows of +1 (keep a task's arms) / -1 (swap them), in blocks: every one of the 2^K when ``exact`` (the first
    row keeps every task), else ``flips`` random rows from a fixed seed. Small sets are kept for the next test (the
    bench decides thousands of suites of one shape)."""
    if (2**tasks if exact else flips) * tasks <= 2**20:
        yield from _cached_signs(tasks, flips, exact)
    else:
        yield from _sign_blocks(tasks, flips, exact)


@lru_cache(maxsize=32)
def _cached_signs(tasks: int, flips: int, exact: bool) -> tuple[np.ndarray, ...]:
    return tuple(_sign_blocks(tasks, flips, exact))


def _sign_blocks(tasks: int, flips: int, exact: bool) -> Iterator[np.ndarray]:
    block = 2**14
    if exact:
        bits = np.arange(tasks)
        for start in range(0, 2**tasks, block):
            codes = np.arange(start, min(start + block, 2**tasks))
            yield 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
        return
    rng = np.random.default_rng(SIGN_FLIP_SEED)
    for start in range(0, flips, block):
        yield 1.0 - 2.0 * rng.integers(0, 2, (min(block, flips - start), tasks))


def _studentized(
    signs: np.ndarray, ratios: np.ndarray, weights: np.ndarray, noise: RunNoise | None, objective: str
) -> np.ndarray:
    """The cost test's statistic (estimate / its standard error, ``spend_variance``) with each row of ``signs``
    applied to the tasks' arms. Swapping a task's arms negates its ratio and keeps its weight and its run noise; the
    flipped ratios keep their sum of squares, so only their mean, and with it their spread, moves."""
    count = len(ratios)
    flipped_mean = signs @ ratios / count
    spread = np.maximum((np.dot(ratios, ratios) - count * flipped_mean**2) / (count - 1), 0.0)
    squares = float(np.dot(weights, weights))
    if noise is None:
        variance = spread * squares
    else:
        runs = np.asarray(noise.variances)
        variance = float(np.dot(weights * weights, runs)) + np.maximum(spread - runs.mean(), 0.0) * squares
    if objective == "per_task":
        estimate = signs @ (weights * ratios)
    else:
        # A task's arm means in proportion: its share of the spend split by its ratio.
        incumbent, candidate = weights / (1 + np.exp(-ratios)), weights / (1 + np.exp(ratios))
        kept = (signs > 0).astype(float)
        total_incumbent = kept @ incumbent + (1 - kept) @ candidate
        total_candidate = kept @ candidate + (1 - kept) @ incumbent
        estimate = np.log(total_incumbent / total_candidate)
    se = np.sqrt(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, estimate / np.where(se > 0, se, 1.0), np.sign(estimate) * np.inf)


def sign_flip_test(
    ratios: list[float],
    weights: list[float],
    *,
    objective: str,
    alpha: float,
    noise: RunNoise | None = None,
    shift: float = 0.0,
) -> dict[str, Any]:
    """The studentized paired sign-flip (randomisation) test across tasks of "no saving" (one-sided).

    Under an identical candidate each task's two arms are exchangeable, so swapping them (negating the task's log
    ratio, keeping its weight and its run noise) gives a statistic as likely as the observed one, whatever the runs'
    distribution — runaway sessions, a task that dominates the spend and is noisier than the rest. The p-value is the
    share of the 2^K flips whose statistic (the cost test's own, estimate / standard error) reaches the observed one,
    counting ties; above ``SIGN_FLIP_EXACT_FLIPS`` flips it is (1 + random flips that reach it) / (1 + their
    number), with enough of them (``SIGN_FLIP_RESOLUTION`` / alpha) to resolve alpha. Studentizing keeps it valid
    in large suites for a candidate that saves on some tasks and costs more on others with no change in total.
    ``shift`` tests "dearer by at least exp(shift) - 1" instead (the candidate's values divided by exp(shift)).

    The smallest p it can give is its ``floor``: 2^-K with every flip enumerated (every task cheaper, no other flip
    as extreme), 1 / (flips + 1) with random flips. ``applies`` says whether the floor reaches ``alpha``: with fewer
    tasks (fewer than 6 at 0.0225, 7 at 0.01125, ...) no outcome could pass, and the cost test decides on its t
    alone."""
    count = len(ratios)
    values, shares = np.asarray(ratios, dtype=float), np.asarray(weights, dtype=float)
    if shift:
        values = values + shift
        if objective == "total_spend":
            # The candidate's spend divided by exp(shift): each task's share of the spend moves with it.
            shares = shares / (1 + np.exp(-(values - shift))) + shares / (1 + np.exp(values - shift)) / math.exp(shift)
            shares = shares / shares.sum()
    wanted = max(SIGN_FLIP_EXACT_FLIPS, 2 ** math.ceil(math.log2(SIGN_FLIP_RESOLUTION / alpha)))
    flips = min(wanted, SIGN_FLIP_MAX_FLIPS)
    exact = 2**count <= flips
    observed = float(_studentized(np.ones((1, count)), values, shares, noise, objective)[0])
    tolerance = 1e-9 * max(1.0, abs(observed)) if math.isfinite(observed) else 0.0
    reached = 0
    for signs in _flip_signs(count, flips, exact):
        reached += int(np.count_nonzero(_studentized(signs, values, shares, noise, objective) >= observed - tolerance))
    if exact:
        total, floor, p_value = 2**count, 2.0**-count, reached / 2**count
    else:
        total, floor, p_value = flips, 1 / (flips + 1), (1 + reached) / (flips + 1)
    return {
        "p_value": _p(min(1.0, p_value)),
        "flips": total,
        "exact": exact,
        "floor": _p(floor),
        "applies": floor <= alpha,
    }


def _no_noise(ratios: list[float], variance: float) -> bool:
    """Per-task ratios and runs that vary by no more than ``RATIO_RESOLUTION`` (the same number written several
    times, up to rounding): no noise was measured, so no p-value can be claimed."""
    scale = RATIO_RESOLUTION * max(1.0, max(abs(ratio) for ratio in ratios))
    return max(ratios) - min(ratios) <= scale and variance <= scale * scale


def cost_test(
    cells: Cells,
    *,
    alpha: float,
    floor_pct: float,
    objective: str = "total_spend",
    margin_pct: float | None = None,
) -> dict[str, Any]:
    """Is the candidate cheaper on the objective? One entry of ``cells`` per task: (incumbent values, candidate values).

    Tasks are the unit of replication: whatever a (task, arm)'s runs share — a prompt-cache state, the machine's
    load that hour — is in the per-task log ratio, and only the spread between tasks shows it. Each task's ratio also
    varies by its own run noise, which its runs show: the estimate's variance is sum w_i² (u_i + τ²) with u_i the
    task's run noise and τ² the spread between tasks beyond it (``spend_variance``), so a task that carries most of
    the spend and is noisier than the rest is seen as what it is. The one-sided t has Welch-Satterthwaite degrees of
    freedom. Runaway sessions make the spend weights follow the very runs that make a ratio extreme, so the p-value
    that decides is the larger of the t's and the studentized sign-flip test's across tasks (``sign_flip_test``: both
    must reject) whenever the sign-flip test can reach ``alpha``; a suite too small for it gets the t alone, its
    degrees of freedom at most K - 1 (``sign_flip.applies``). ``p_higher`` tests "not costlier" (small: credibly
    costlier; the t's: it only keeps the incumbent). With ``margin_pct``, ``p_within_margin`` tests "dearer by at
    least the margin" the same way (both tests; small: shown within it). The interval is the t's two-sided 1 - 2*alpha
    one; the minimum detectable effect is the saving the t finds with probability 0.8 at this standard error. Zero
    runs are floored (``floor_zeros``). Fewer than two tasks, or ratios and runs that agree up to
    ``RATIO_RESOLUTION`` (no noise measured), give no test: a p-value would claim a certainty the runs cannot give.
    """
    result: dict[str, Any] = {
        "method": COST_METHODS.get(objective, ""),
        "objective": objective,
        "alpha": alpha,
        "floor_pct": floor_pct,
        "confidence": float(f"{1 - 2 * alpha:.12g}"),  # never rounded up to 1 at a late generation's alpha
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
        "shared_sd_log": None,
        "t_p_value": None,
        "sign_flip": None,
        "margin_pct": margin_pct,
        "p_within_margin": None,
    }
    components = cost_components(cells, objective)
    if components is None:
        return result
    ratios, weights, estimate = components
    result["estimate_pct"] = round(_pct_from_log(estimate), 1)
    result["effective_tasks"] = round(1 / math.fsum(w * w for w in weights), 2)
    if len(ratios) < 2:
        return result
    noise = run_noise(cells, objective)
    variance, df, shared = spend_variance(ratios, weights, noise)
    if _no_noise(ratios, variance):
        return result
    flip = sign_flip_test(ratios, weights, objective=objective, alpha=alpha, noise=noise)
    if not flip["applies"]:
        # No randomisation test to lean on: the task stays the unit of replication for the degrees of freedom too.
        df = min(df, float(len(ratios) - 1))
    se = math.sqrt(variance)
    t_p = float(stats.t.sf(estimate / se, df))
    p_value = max(t_p, flip["p_value"]) if flip["applies"] else t_p
    critical = float(stats.t.isf(alpha, df))
    half = critical * se
    mde = (critical + float(stats.t.ppf(POWER, df))) * se
    estimate_pct = _pct_from_log(estimate)
    if p_value <= alpha and estimate_pct >= floor_pct:
        conclusion = "cheaper"
    elif p_value <= alpha:
        conclusion = "below_floor"
    elif estimate + half < log_of_saving(floor_pct):
        conclusion = "not_cheaper"
    else:
        conclusion = "inconclusive"
    if margin_pct is not None:
        shift = math.log(1 + margin_pct / 100)
        within = float(stats.t.sf((estimate + shift) / se, df))
        shifted = sign_flip_test(ratios, weights, objective=objective, alpha=alpha, noise=noise, shift=shift)
        result["p_within_margin"] = _p(max(within, shifted["p_value"]) if shifted["applies"] else within)
    result.update(
        {
            "ci_low_pct": _bound_pct(estimate - half, half),
            "ci_high_pct": _bound_pct(estimate + half, half),
            "p_value": _p(p_value),
            "p_higher": _p(float(stats.t.cdf(estimate / se, df))),
            "df": round(df, 1),
            "se_log": _round(se),
            "mde_pct": _bound_pct(mde, mde),
            "noise_measured": True,
            "conclusion": conclusion,
            "shared_sd_log": None if shared is None else _round(math.sqrt(shared)),
            "t_p_value": _p(t_p),
            "sign_flip": flip,
        }
    )
    return result


def cost_within_pct(test: dict[str, Any], margin_pct: float) -> float | None:
    """One-sided p-value against "the candidate costs at least ``margin_pct`` % more" from a ``cost_test`` result
    (small: shown to cost less than that): the test's own ``p_within_margin`` when it was run at that margin (the t
    and the sign-flip test), else the t's alone; None when the test was not computable."""
    if test.get("margin_pct") == margin_pct and test.get("p_within_margin") is not None:
        return float(test["p_within_margin"])
    if test["se_log"] is None or test["estimate_pct"] is None:
        return None
    estimate = log_of_saving(test["estimate_pct"])
    if not math.isfinite(estimate):
        return 0.0
    return _p(float(stats.t.sf((estimate + math.log(1 + margin_pct / 100)) / test["se_log"], test["df"])))


POWER_DRAWS = 2048
POWER_SEED = 20261204
POWER_FLIPS = 1024  # the sign-flip test's flips in a simulated suite: every one up to this many, else this many drawn
# At a small alpha (a late generation's) 1,024 drawn flips cannot give a share as small as alpha, and the power would
# read 0 where the gate's own test (drawing 1 + 64/alpha) passes: draw at least this many per unit of 1/alpha.
POWER_FLIP_RESOLUTION = 4


@lru_cache(maxsize=4096)
def _simulated_power(
    levels: tuple[float, ...],
    runs: int,
    effect: float,
    run_variance: float,
    shared_sd: float,
    floor: float,
    alpha: float,
) -> float:
    """The chance that ``cost_test`` (total spend) finds a true log ``effect`` in a suite of tasks whose usual
    costs are ``levels``: per (task, arm) a shared log effect (sd ``shared_sd``) and ``runs`` lognormal runs of
    relative variance ``run_variance``, the candidate's scaled by exp(-effect); then the estimate, its variance,
    degrees of freedom and the sign-flip test as ``cost_test`` takes them. Simulated from a fixed seed, so a design
    always gets the same power (and more runs extend the same draws)."""
    tasks = len(levels)
    sigma = math.sqrt(math.log1p(run_variance))
    rng = np.random.default_rng(POWER_SEED)
    base = np.log(np.asarray(levels))[None, :, None]
    shared = shared_sd * rng.standard_normal((POWER_DRAWS, tasks, 2))
    noise = sigma * rng.standard_normal((POWER_DRAWS, tasks, 2, runs))
    logs = base[..., None] + shared[..., None] + noise
    logs[:, :, 1, :] -= effect
    means = np.exp(logs).mean(axis=3)
    incumbent, candidate = means[:, :, 0], means[:, :, 1]
    ratios = np.log(incumbent / candidate)
    weights = (incumbent + candidate) / (incumbent + candidate).sum(axis=1, keepdims=True)
    estimates = np.log(incumbent.sum(axis=1) / candidate.sum(axis=1))
    squares = (weights * weights).sum(axis=1)
    spread = ratios.var(axis=1, ddof=1)
    flips_apply = 2.0**-tasks <= alpha
    run_part = run_mean = None
    if runs >= 2:
        costs = np.exp(logs)
        arms = costs.var(axis=3, ddof=1) / costs.mean(axis=3) ** 2 / runs
        per_task = arms.sum(axis=2)
        run_part = (weights * weights * per_task).sum(axis=1)
        run_mean = per_task.mean(axis=1)
        excess = np.maximum(spread - run_mean, 0.0) * squares
        variance = run_part + excess
        # Welch-Satterthwaite: each task's run term (its arms' variances over their dof) and the excess's K - 1.
        terms = (weights**4 * (arms**2).sum(axis=2) / (runs - 1)).sum(axis=1)
        df = variance**2 / (terms + excess**2 / (tasks - 1))
        if not flips_apply:
            df = np.minimum(df, tasks - 1)
    else:
        variance = spread * squares
        df = np.full(POWER_DRAWS, float(tasks - 1))
    critical = stats.t.isf(alpha, np.maximum(df, 1.0))
    passes = (estimates / np.sqrt(variance) >= critical) & (estimates >= floor)
    if flips_apply:
        # Every flip where the test enumerates them; above, POWER_FLIPS random ones, or enough to resolve alpha (the
        # gate draws more, for a p-value of its own; the chance of rejecting is what counts here).
        flips = min(max(POWER_FLIPS, math.ceil(POWER_FLIP_RESOLUTION / alpha)), SIGN_FLIP_MAX_FLIPS)
        exact = 2**tasks <= flips
        kept = (np.vstack(list(_flip_signs(tasks, flips, exact))) > 0).astype(float)
        if not exact:
            kept[0] = 1.0  # the observed suite itself
        signs = 2 * kept - 1
        candidates = np.flatnonzero(passes)  # only a draw the t passes can need the sign-flip test too
        # Blocks of draws, each array of a block at most about 4M statistics (32 MiB) however many flips a late
        # generation's alpha needs.
        step = max(1, min(128, (1 << 22) // flips))
        for start in range(0, len(candidates), step):
            block = candidates[start : start + step]
            flipped_means = ratios[block] @ signs.T / tasks
            sum_squares = (ratios[block] ** 2).sum(axis=1, keepdims=True)
            flipped_spread = np.maximum((sum_squares - tasks * flipped_means**2) / (tasks - 1), 0.0)
            if run_part is None or run_mean is None:
                flipped_variance = flipped_spread * squares[block, None]
            else:
                flipped_variance = (
                    run_part[block, None]
                    + np.maximum(flipped_spread - run_mean[block, None], 0.0) * squares[block, None]
                )
            totals_incumbent = incumbent[block] @ kept.T + candidate[block] @ (1 - kept).T
            totals_candidate = candidate[block] @ kept.T + incumbent[block] @ (1 - kept).T
            flipped = np.log(totals_incumbent / totals_candidate)
            with np.errstate(divide="ignore", invalid="ignore"):
                statistic = np.where(flipped_variance > 0, flipped / np.sqrt(flipped_variance), np.inf)
            observed = statistic[:, :1]
            reached = (statistic >= observed - 1e-9 * np.maximum(1.0, np.abs(observed))).sum(axis=1)
            share = reached / len(kept) if exact else reached / (len(kept) + 1)
            passes[block] &= share <= alpha
    return float(np.mean(passes))


def task_levels(tasks: int, spend_efficiency: float) -> tuple[float, ...]:
    """Usual costs of ``tasks`` tasks, evenly spread on the log scale over ±h with (mean cost)² / mean(cost²) =
    ``spend_efficiency`` (1: equal costs; 0.76: h = 1, tasks up to e² ≈ 7× apart): the suite ``cost_power``
    simulates."""
    target = min(1.0, spend_efficiency)

    def efficiency(half: float) -> float:
        return 1.0 if half < 1e-9 else (math.sinh(half) / half) ** 2 / (math.sinh(2 * half) / (2 * half))

    low, high = 0.0, 20.0
    for _ in range(60):  # the efficiency falls as the spread grows: bisection
        middle = (low + high) / 2
        low, high = (middle, high) if efficiency(middle) > target else (low, middle)
    return tuple(round(float(value), 9) for value in np.exp(np.linspace(-low, low, tasks)))


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
    weights leave (1 for equal weights; (mean cost)² / mean(cost²) for spend weights): the simulation
    (``_simulated_power``) spreads the task costs evenly on the log scale at that efficiency, and runs the sign-flip
    test on every simulated suite the t passes."""
    if tasks < 2:
        return 0.0
    return _simulated_power(
        task_levels(tasks, spend_efficiency),
        runs,
        round(log_of_saving(saving_pct), 9),
        round(run_variance, 9),
        round(shared_sd, 9),
        log_of_saving(floor_pct),
        alpha,
    )


def known_variance_power(
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
    """The power a z-test would have if it knew the estimate's variance, 2 * (shared_sd² + run_variance / runs) /
    (K * spend_efficiency): ``cost_test`` estimates that variance (from the runs and the spread between tasks) and
    adds the sign-flip test, so its power (``cost_power``) is lower. This bound lets a design search skip what
    cannot reach a power."""
    if tasks < 2:
        return 0.0
    effect, floor = log_of_saving(saving_pct), log_of_saving(floor_pct)
    se = math.sqrt(2 * (shared_sd**2 + run_variance / runs) / (tasks * spend_efficiency))
    return float(stats.norm.sf((max(floor, float(stats.norm.isf(alpha)) * se) - effect) / se))


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
    """The design (tasks × runs per task and arm) with the fewest runs that reaches ``power`` (``cost_power``) for a
    true ``saving_pct`` saving; with ``tasks`` given, the fewest runs for that many tasks. ``min_runs_per_arm``:
    runs per arm over all tasks some other test needs (non-inferiority); ``min_runs``: the policy's runs per
    cell. Per task count only designs cheaper than the best so far are simulated, the known-variance bound
    (``known_variance_power``) screening first; power rises with runs, so bisection finds the fewest. None when
    out of reach."""
    common = {
        "saving_pct": saving_pct,
        "run_variance": run_variance,
        "shared_sd": shared_sd,
        "alpha": alpha,
        "floor_pct": floor_pct,
        "spend_efficiency": spend_efficiency,
    }
    best: dict[str, Any] | None = None
    for count in [tasks] if tasks else range(2, max_tasks + 1):
        if best is not None and count * min_runs > best["tasks"] * best["runs"]:
            break  # every larger suite needs more runs than the best design so far
        low = max(min_runs, -(-min_runs_per_arm // count))
        # Only designs cheaper than the best so far are worth a simulation.
        high = max_runs if best is None else min(max_runs, (best["tasks"] * best["runs"] - 1) // count)
        if low > high or known_variance_power(tasks=count, runs=high, **common) < power:
            continue
        if cost_power(tasks=count, runs=high, **common) < power:
            continue
        while low < high:  # power rises with runs (common random numbers): bisection, bound first
            middle = (low + high) // 2
            if known_variance_power(tasks=count, runs=middle, **common) >= power and (
                cost_power(tasks=count, runs=middle, **common) >= power
            ):
                high = middle
            else:
                low = middle + 1
        best = {"tasks": count, "runs": low, "power": round(cost_power(tasks=count, runs=low, **common), 3)}
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


def mean_log_difference(incumbent: list[float], candidate: list[float]) -> float | None:
    """One task's mean log metric, incumbent minus candidate (zeros floored); None without a log scale."""
    logs = log_cells([(incumbent, candidate)]) if incumbent and candidate else None
    return None if logs is None else _mean(logs[0][0]) - _mean(logs[0][1])


def spread_between(differences: list[float]) -> tuple[float, int] | None:
    """(sample variance, its degrees of freedom) of per-task differences; None with fewer than two."""
    return (_sample_variance(differences), len(differences) - 1) if len(differences) >= 2 else None


def between_task_variance(cells: Cells) -> tuple[float, int] | None:
    """(variance of the per-task mean log differences between tasks, K - 1): what one task's difference varies
    by when (task, arm)s share effects their own runs cannot show. None with fewer than two usable tasks."""
    differences = [mean_log_difference(inc, cand) for inc, cand in cells]
    return spread_between([value for value in differences if value is not None])


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
    and its 1 - 2*alpha interval from the task's own runs (Welch-Satterthwaite; delta method for arithmetic means).
    Zeros are floored (``floor_zeros``); an interval too wide to say anything (``INTERVAL_LOG_LIMIT``: a few runs at
    a late generation's alpha) has no bounds."""
    empty = {"saving_pct": None, "ci_low_pct": None, "ci_high_pct": None}
    components = cost_components([(incumbent, candidate)], objective)
    positive = floor_zeros([(incumbent, candidate)])
    logs = log_cells([(incumbent, candidate)])
    if components is None or positive is None or logs is None:
        return empty
    estimate = components[2]
    if objective == "per_task":
        samples = list(logs[0])
        scales = [1.0, 1.0]
    else:
        samples = list(positive[0])
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
    result["ci_low_pct"] = _bound_pct(estimate - half, half)
    result["ci_high_pct"] = _bound_pct(estimate + half, half)
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


def holm_over_drops(tables: list[tuple[int, int, int, int]], p_values: list[float]) -> list[float]:
    """``resolution_drops``' p-values Holm-adjusted over the tasks the candidate resolved a smaller share of than
    the incumbent; every other task keeps p = 1. A task the candidate resolved as often as the incumbent cannot show
    a drop whatever its runs, so counting it in the family would only blunt the check where it matters: one task of
    six given up (100 % → 75 %) at ten runs is caught from its first failure where the other runs never fail,
    instead of its second. The check can only keep the incumbent: a larger family costs power, never a false
    promotion."""
    fallen = [
        index
        for index, (x_i, n_i, x_c, n_c) in enumerate(tables)
        if n_i and n_c and (n_c - x_c) * n_i > (n_i - x_i) * n_c
    ]
    adjusted = [1.0] * len(tables)
    for index, value in zip(fallen, holm([p_values[index] for index in fallen]), strict=True):
        adjusted[index] = value
    return adjusted


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
    if runs >= max_runs or not (math.isfinite(estimate) and math.isfinite(threshold)):
        return 1.0 if estimate >= threshold else 0.0
    spread = se * math.sqrt(runs * (max_runs - runs)) / max_runs
    if spread <= 0:
        return 1.0 if estimate >= threshold else 0.0
    return float(stats.norm.sf((threshold - estimate) / spread))
