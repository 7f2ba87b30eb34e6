"""Review quality: the evidence a pair's review cases give and the tests both rules report on it (docs/gate.md).

A review case is a paired task of a class in ``REVIEW_CLASSES`` (its rows carry ``review``, the score against the
task's hidden labels): a defect case (``review-defect``) or a clean control (``review-clean``). Over the valid rows
(``aggregate.is_valid``: excluded kinds drop out; a review that broke the contract, or changed the code it reviews,
counts with zeros):

- **Weighted F1 non-inferiority** over the defect cases: the per-case difference of mean weighted F1 (candidate −
  incumbent), averaged with Mantel-Haenszel weights like the resolution test, its standard error from the pooled
  within-cell variance of the runs (the run noise the rows show) or, when larger, from the spread of the per-case
  differences (what a (case, arm)'s runs share), a one-sided t-test against a drop of ``review_f1_margin`` at the
  rule's alpha; "better" at the review route's share of alpha, "worse" at alpha.
- **Per case**: a defect case whose weighted F1 fell by more than the margin, significantly at alpha / defect cases
  (the variance the larger of the pooled within-cell one and the spread of the other cases' differences, as the
  per-task cost regression check); a defect case whose blocker recall fell (the share of runs that found every
  blocking defect, the exact binomial test of ``stats.resolution_drops`` against the pair's rate, at alpha); a clean
  control whose failure rate rose (a finding or a verdict other than approve; the same test).

Both rules report these; the noise-aware rule decides on the tests, the upstream rule on the medians
(``upstream_review_guards``). Pure: rows in, numbers out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal, cast

from skillbench.base.records import REVIEW_CLASSES, ResultRow, ReviewMetrics
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import is_valid
from skillbench.decision.pairs import PairEvidence, Verdict
from skillbench.decision.policy import GatePolicy, generation_alpha
from skillbench.decision.significance import RESOLUTION_ROUTE_SHARE, pair_tests

# A candidate may be promoted on a review-quality gain as on a resolution gain: the two routes share the resolution
# route's alpha (weighted Bonferroni), half each, in a pair with defect cases; other pairs keep it all.
REVIEW_ROUTE_SHARE = 0.5
DEFECT_CLASS = REVIEW_CLASSES[0]
# The blocker and clean-control checks test each case at the policy's alpha ("none"): they can only keep the
# incumbent, and Holm's adjustment over the cases ("holm") let a candidate that misses one case's blocker in 40 % of
# its runs through 16 % of the time in the bench, against 4.5 % unadjusted (docs/gate.md, "Review quality").
# `bench/decision_quality.py --part review` switches it to measure both; nothing else should.
CASE_ADJUSTMENT: Literal["none", "holm"] = "none"

F1_METHOD = (
    "weighted F1 over the defect cases: the Mantel-Haenszel-weighted mean of per-case differences (candidate - "
    "incumbent) of mean weighted F1, standard error the larger of the pooled within-cell variance of the runs' "
    "(t, pooled df) and the spread of the per-case differences' (t, cases - 1 df); non-inferiority one-sided "
    "against a drop of the margin at alpha, better at the review route's alpha; per case, a drop above the margin "
    "significant at alpha / defect cases; blocker recall (runs that found every blocking defect) and clean-control "
    "failures per case by the exact binomial test against the pair's rate, at alpha"
)

Cell = tuple[list[float], list[float]]  # one case's values: (incumbent runs, candidate runs)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


# A review that changed the code it reviews is scored (its row says what it found), but it earns the gate nothing:
# it counts as a review that broke the contract, with zeros on every ratio and no clean-control pass.
EDITED_CODE = "review-edited-code"
RATIOS = ("precision", "recall", "f1", "weighted_precision", "weighted_recall", "weighted_f1", "blocker_recall")


def review_metrics(row: ResultRow) -> ReviewMetrics | None:
    """A row's review score as the gate counts it (None: the row carries none)."""
    metrics = row.get("review")
    if metrics is None or row.get("error_kind") != EDITED_CODE:
        return metrics
    zeroed: dict[str, Any] = {**metrics, **dict.fromkeys(RATIOS, 0.0), "verdict_correct": False}
    if metrics["case"] == "clean":
        zeroed["clean_control_passed"] = False
    return cast("ReviewMetrics", zeroed)


def review_rows(rows: Sequence[ResultRow], pair: PairEvidence) -> dict[str, tuple[list[ResultRow], list[ResultRow]]]:
    """Per paired review case (sorted): each arm's valid rows."""
    arms = pair.arms
    cases: dict[str, tuple[list[ResultRow], list[ResultRow]]] = {}
    for row in rows:
        if row["task"] in pair.tasks and row["class"] in REVIEW_CLASSES and row["arm"] in arms and is_valid(row):
            cell = cases.setdefault(row["task"], ([], []))
            cell[arms.index(row["arm"])].append(row)
    return dict(sorted(cases.items()))


def has_review_cases(rows: Sequence[ResultRow] | None, pair: PairEvidence) -> bool:
    """A paired task of a review class (and rows to score it from)."""
    return bool(rows) and any(task.row["class"] in REVIEW_CLASSES for task in pair.tasks.values())


def has_defect_cases(rows: Sequence[ResultRow] | None, pair: PairEvidence) -> bool:
    """A paired defect case (``review-defect``): the review route then shares the resolution route's alpha."""
    return bool(rows) and any(task.row["class"] == DEFECT_CLASS for task in pair.tasks.values())


def review_alphas(alphas: dict[str, float]) -> dict[str, float]:
    """The look alphas of a pair with defect cases: the resolution route's share split with the review route."""
    return {**alphas, "resolution": alphas["resolution"] * (1 - REVIEW_ROUTE_SHARE)}


def _values(rows: list[ResultRow], key: str) -> list[float]:
    return [float(metrics[key]) for row in rows if (metrics := review_metrics(row)) is not None]  # type: ignore[literal-required]


def pooled_variance(cells: list[Cell]) -> tuple[float, int]:
    """(pooled within-cell variance, its degrees of freedom) over every case and arm with two runs or more."""
    squares, df = 0.0, 0
    for cell in cells:
        for values in cell:
            if len(values) >= 2:
                centre = _mean(values)
                squares += math.fsum((value - centre) ** 2 for value in values)
                df += len(values) - 1
    return (squares / df, df) if df else (0.0, 0)


def f1_test(cells: list[Cell], *, alpha: float, gain_alpha: float, margin: float) -> dict[str, Any]:
    """Is the candidate's weighted F1 worse than the incumbent's by the margin? One (incumbent, candidate) per case.

    The estimate is the Mantel-Haenszel-weighted mean of the per-case differences of means (every case its own
    stratum, so a case's difficulty never leaks into the comparison); its standard error takes the pooled within-cell
    variance of the runs, with that variance's degrees of freedom, or the spread of the per-case differences (K - 1
    df) when that is larger: an effect a (case, arm)'s runs share, or a candidate better on some cases and worse on
    others, is no evidence the runs can multiply. ``p_noninferiority`` tests H0 "worse by at least
    the margin", ``p_worse`` H0 "not worse", ``p_better`` H0 "not better" (it must reach ``gain_alpha``, the review
    route's share). Runs that do not vary at all measure no noise: no test (as the cost test claims none)."""
    result: dict[str, Any] = {
        "alpha": alpha,
        "gain_alpha": gain_alpha,
        "margin": margin,
        "cases": len(cells),
        "incumbent_runs": sum(len(cell[0]) for cell in cells),
        "candidate_runs": sum(len(cell[1]) for cell in cells),
        "incumbent_mean": None,
        "candidate_mean": None,
        "difference": None,
        "ci_low": None,
        "ci_high": None,
        "se": None,
        "df": None,
        "p_noninferiority": None,
        "p_worse": None,
        "p_better": None,
        "mde": None,
        "variance_from": None,
        "noise_measured": False,
        "conclusion": "not_computable",
    }
    usable = [cell for cell in cells if cell[0] and cell[1]]
    if not usable:
        return result
    weights = [len(a) * len(b) / (len(a) + len(b)) for a, b in usable]
    total = math.fsum(weights)
    inc = math.fsum(w * _mean(a) for w, (a, _) in zip(weights, usable, strict=True)) / total
    cand = math.fsum(w * _mean(b) for w, (_, b) in zip(weights, usable, strict=True)) / total
    difference = cand - inc
    result.update({"incumbent_mean": _round(inc), "candidate_mean": _round(cand), "difference": _round(difference)})
    variance, df = pooled_variance(usable)
    if df == 0 or variance <= 1e-12:
        return result
    runs_se = (
        math.sqrt(
            variance * math.fsum(w * w * (1 / len(a) + 1 / len(b)) for w, (a, b) in zip(weights, usable, strict=True))
        )
        / total
    )
    se, source = runs_se, "runs"
    # What a (case, arm)'s runs share, and effects that differ by case, are in the spread of the per-case
    # differences: the test takes it when it is the larger (the cases then are the unit, with K - 1 df).
    if len(usable) >= 2:
        differences = [_mean(b) - _mean(a) for a, b in usable]
        centre = _mean(differences)
        spread = math.fsum((value - centre) ** 2 for value in differences) / (len(differences) - 1)
        cases_se = math.sqrt(spread * math.fsum(w * w for w in weights)) / total
        if cases_se > runs_se:
            se, df, source = cases_se, len(usable) - 1, "cases"
    t = gate_stats.stats.t
    p_ni = float(t.sf((difference + margin) / se, df))
    p_worse, p_better = float(t.cdf(difference / se, df)), float(t.sf(difference / se, df))
    critical = float(t.isf(alpha, df))
    if p_better <= gain_alpha:
        conclusion = "better"
    elif p_worse <= alpha:
        conclusion = "worse"
    elif p_ni <= alpha:
        conclusion = "not_worse"
    else:
        conclusion = "inconclusive"
    result.update(
        {
            "ci_low": _round(difference - critical * se),
            "ci_high": _round(difference + critical * se),
            "se": _round(se),
            "df": df,
            "p_noninferiority": gate_stats._p(p_ni),
            "p_worse": gate_stats._p(p_worse),
            "p_better": gate_stats._p(p_better),
            "mde": _round((critical + float(t.ppf(gate_stats.POWER, df))) * se),
            "variance_from": source,
            "noise_measured": True,
            "conclusion": conclusion,
        }
    )
    return result


def case_drop(
    cell: Cell, *, pooled: tuple[float, int], others: list[float], alpha: float, margin: float
) -> dict[str, Any]:
    """One defect case's weighted-F1 drop: its difference of means, the one-sided p-value that it fell (variance the
    larger of the pooled within-cell one and the spread of the other cases' differences), and whether it fell by
    more than the margin at ``alpha`` (the caller divides alpha by the defect cases)."""
    a, b = cell
    if not a or not b:
        return {"difference": None, "p_value": None, "dropped": False}
    difference = _mean(b) - _mean(a)
    options = []
    if pooled[1] and pooled[0] > 0:
        options.append((pooled[0] * (1 / len(a) + 1 / len(b)), pooled[1]))
    if len(others) >= 2:
        centre = _mean(others)
        spread = math.fsum((value - centre) ** 2 for value in others) / (len(others) - 1)
        if spread > 0:
            options.append((spread, len(others) - 1))
    if not options:
        return {"difference": _round(difference), "p_value": None, "dropped": False}
    variance, df = max(options)
    p_value = gate_stats._p(float(gate_stats.stats.t.cdf(difference / math.sqrt(variance), df)))
    return {"difference": _round(difference), "p_value": p_value, "dropped": difference < -margin and p_value <= alpha}


def _successes(rows: list[ResultRow], case: str) -> int:
    """Defect case: runs that found every blocking defect; clean control: runs that passed it."""
    if case == "defect":
        return sum(1 for value in _values(rows, "blocker_recall") if value >= 1.0)
    return sum(1 for row in rows if (metrics := review_metrics(row)) is not None and metrics["clean_control_passed"])


def _drop_tests(tables: dict[str, tuple[int, int, int, int]], alpha: float) -> dict[str, tuple[float, float, bool]]:
    """Per case (p-value, Holm-adjusted p-value, dropped at alpha) of ``stats.resolution_drops`` over ``tables``:
    each case at alpha (``CASE_ADJUSTMENT``)."""
    names = list(tables)
    drops = gate_stats.resolution_drops([tables[name] for name in names])
    adjusted = gate_stats.holm(drops)
    return {
        name: (drop, holm, (holm if CASE_ADJUSTMENT == "holm" else drop) <= alpha)
        for name, drop, holm in zip(names, drops, adjusted, strict=True)
    }


def review_evidence(
    rows: Sequence[ResultRow], pair: PairEvidence, policy: GatePolicy, *, alpha: float, gain_alpha: float
) -> dict[str, Any] | None:
    """The decision's ``tests.review`` entry, or None when the pair has no review case.

    ``alpha`` is the non-inferiority test's level (the generation's, or a look's), ``gain_alpha`` the review route's;
    the per-case checks keep the policy's alpha (they can only keep the incumbent)."""
    if not has_review_cases(rows, pair):
        return None
    cases = review_rows(rows, pair)
    unscored = sorted(
        task for task, (inc, cand) in cases.items() if any(review_metrics(row) is None for row in (*inc, *cand))
    )
    kinds = {
        task: next((m["case"] for row in (*inc, *cand) if (m := review_metrics(row)) is not None), "defect")
        for task, (inc, cand) in cases.items()
    }
    defect = [task for task in cases if kinds[task] == "defect"]
    clean = [task for task in cases if kinds[task] == "clean"]
    cells = {task: (_values(cases[task][0], "weighted_f1"), _values(cases[task][1], "weighted_f1")) for task in defect}
    margin = policy.review_f1_margin
    f1 = f1_test(list(cells.values()), alpha=alpha, gain_alpha=gain_alpha, margin=margin)
    pooled = pooled_variance([cell for cell in cells.values() if cell[0] and cell[1]])
    case_alpha = policy.alpha / max(1, len(defect))
    differences = {task: _mean(b) - _mean(a) for task, (a, b) in cells.items() if a and b}
    tables = {
        task: (
            _successes(cases[task][0], kinds[task]),
            len(cases[task][0]),
            _successes(cases[task][1], kinds[task]),
            len(cases[task][1]),
        )
        for task in cases
    }
    blockers = _drop_tests({task: tables[task] for task in defect}, policy.alpha)
    controls = _drop_tests({task: tables[task] for task in clean}, policy.alpha)
    records = []
    for task, (inc, cand) in cases.items():
        record: dict[str, Any] = {
            "task": task,
            "case": kinds[task],
            "incumbent_runs": len(inc),
            "candidate_runs": len(cand),
            "incumbent_successes": tables[task][0],
            "candidate_successes": tables[task][2],
            "incumbent_false_positives": _round(_mean(_values(inc, "fp"))) if inc else None,
            "candidate_false_positives": _round(_mean(_values(cand, "fp"))) if cand else None,
        }
        if kinds[task] == "defect":
            others = [value for name, value in differences.items() if name != task]
            drop = case_drop(cells[task], pooled=pooled, others=others, alpha=case_alpha, margin=margin)
            inc_recall, cand_recall = _values(inc, "blocker_recall"), _values(cand, "blocker_recall")
            p_value, adjusted, lost = blockers[task]
            record.update(
                {
                    "incumbent_weighted_f1": _round(_mean(cells[task][0])) if cells[task][0] else None,
                    "candidate_weighted_f1": _round(_mean(cells[task][1])) if cells[task][1] else None,
                    "incumbent_median_f1": _round(statistics.median(cells[task][0])) if cells[task][0] else None,
                    "candidate_median_f1": _round(statistics.median(cells[task][1])) if cells[task][1] else None,
                    "f1_difference": drop["difference"],
                    "f1_drop_p_value": drop["p_value"],
                    "f1_drop_alpha": round(case_alpha, 8),
                    "f1_dropped": drop["dropped"],
                    "incumbent_blocker_recall": _round(_mean(inc_recall)) if inc_recall else None,
                    "candidate_blocker_recall": _round(_mean(cand_recall)) if cand_recall else None,
                    "blocker_drop_p_value": p_value,
                    "blocker_drop_adjusted_p": adjusted,
                    "blockers_lost": lost,
                }
            )
        else:
            p_value, adjusted, lost = controls[task]
            record.update(
                {"clean_drop_p_value": p_value, "clean_drop_adjusted_p": adjusted, "clean_control_lost": lost}
            )
        records.append(record)
    return {
        "method": F1_METHOD,
        "metric": "weighted_f1",
        "defect_cases": len(defect),
        "clean_cases": len(clean),
        "unscored_cases": unscored,
        "weighted_f1": f1,
        "cases": records,
        "route": None,
    }


def _recall_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _p_text(value: float | None) -> str:
    if value is None:
        return "= n/a"
    return "< 0.0001" if value < 0.0001 else f"= {value:.4f}"


def f1_sentence(review: dict[str, Any]) -> str:
    """One sentence on what the weighted-F1 test found, for reasons and reports."""
    f1 = review["weighted_f1"]
    means = (
        f"weighted F1 over {f1['cases']} defect case(s): candidate {_recall_text(f1['candidate_mean'])}, incumbent "
        f"{_recall_text(f1['incumbent_mean'])}"
    )
    conclusion = f1["conclusion"]
    if conclusion == "not_computable":
        if f1["difference"] is None:
            return f"review quality could not be compared: no defect case ran both arms ({means})"
        return (
            f"review quality could not be tested: {means}, and the runs' weighted F1 does not vary, so no noise was "
            "measured and no p-value can be claimed"
        )
    difference = (
        f"difference {f1['difference']:+.3f} ({1 - 2 * f1['alpha']:.0%} CI {f1['ci_low']:+.3f} to {f1['ci_high']:+.3f})"
    )
    if conclusion == "better":
        return (
            f"review quality credibly better: {means}, {difference}, one-sided p {_p_text(f1['p_better'])} "
            f"(alpha {f1['gain_alpha']:g} for promotions on review quality)"
        )
    if conclusion == "worse":
        return f"review quality credibly worse: {means}, {difference}, one-sided p {_p_text(f1['p_worse'])}"
    if conclusion == "not_worse":
        return (
            f"review quality not worse: {means}, {difference}, within the {f1['margin']:g} margin "
            f"(non-inferiority p {_p_text(f1['p_noninferiority'])}, alpha {f1['alpha']:g})"
        )
    return (
        f"not enough runs to show the review quality is within {f1['margin']:g} weighted F1 of the incumbent's: "
        f"{means}, {difference}, non-inferiority p {_p_text(f1['p_noninferiority'])} (alpha {f1['alpha']:g}); "
        f"this design detects a drop of {_recall_text(f1['mde'])} 80% of the time"
    )


def review_guards(verdict: Verdict, review: dict[str, Any], policy: GatePolicy) -> None:
    """The noise-aware rule's per-case checks: each that fails keeps the incumbent, naming the case and metric."""
    if review["unscored_cases"]:
        verdict.lacking(
            [
                f"{task}: a valid review row carries no review metrics; a review task's rows must be scored against "
                "its labels"
                for task in review["unscored_cases"]
            ]
        )
    for case in review["cases"]:
        name = case["task"]
        if case["case"] == "defect":
            if case["f1_dropped"]:
                verdict.regression(
                    f"{name}: weighted F1 fell from {_recall_text(case['incumbent_weighted_f1'])} to "
                    f"{_recall_text(case['candidate_weighted_f1'])}, more than the {policy.review_f1_margin:g} margin "
                    f"(one-sided p {_p_text(case['f1_drop_p_value'])}, alpha/{review['defect_cases']})"
                )
            if case["blockers_lost"]:
                verdict.regression(
                    f"{name}: blocker recall fell: every blocking defect found in {case['candidate_successes']}/"
                    f"{case['candidate_runs']} candidate runs against {case['incumbent_successes']}/"
                    f"{case['incumbent_runs']} (mean blocker recall {_recall_text(case['candidate_blocker_recall'])} "
                    f"against {_recall_text(case['incumbent_blocker_recall'])}; one-sided p "
                    f"{_p_text(case['blocker_drop_p_value'])}, alpha {policy.alpha:g})"
                )
        elif case["clean_control_lost"]:
            verdict.regression(_clean_reason(case, policy.alpha))


def _clean_reason(case: dict[str, Any], alpha: float | None) -> str:
    tested = "" if alpha is None else f"; one-sided p {_p_text(case['clean_drop_p_value'])}, alpha {alpha:g}"
    return (
        f"{case['task']}: new false positives on a clean control: the candidate passed it in "
        f"{case['candidate_successes']}/{case['candidate_runs']} runs against {case['incumbent_successes']}/"
        f"{case['incumbent_runs']} (false positives per run {_recall_text(case['candidate_false_positives'])} "
        f"against {_recall_text(case['incumbent_false_positives'])}{tested})"
    )


def upstream_review_guards(verdict: Verdict, review: dict[str, Any], policy: GatePolicy) -> None:
    """The upstream rule's review checks, on medians and points: a defect case whose median weighted F1 fell by more
    than the margin, or whose mean blocker recall fell; a clean control the candidate failed more often."""
    if review["unscored_cases"]:
        verdict.lacking([f"{task}: a valid review row carries no review metrics" for task in review["unscored_cases"]])
    for case in review["cases"]:
        name = case["task"]
        if case["case"] == "defect":
            inc, cand = case["incumbent_median_f1"], case["candidate_median_f1"]
            if inc is not None and cand is not None and cand < inc - policy.review_f1_margin:
                verdict.regression(
                    f"{name}: median weighted F1 fell from {inc:.2f} to {cand:.2f}, more than the "
                    f"{policy.review_f1_margin:g} margin"
                )
            inc_recall, cand_recall = case["incumbent_blocker_recall"], case["candidate_blocker_recall"]
            if inc_recall is not None and cand_recall is not None and cand_recall < inc_recall:
                verdict.regression(f"{name}: mean blocker recall fell from {inc_recall:.2f} to {cand_recall:.2f}")
        elif _failure_rate(case, "candidate") > _failure_rate(case, "incumbent"):
            verdict.regression(_clean_reason(case, None))


def _failure_rate(case: dict[str, Any], side: str) -> float:
    runs = case[f"{side}_runs"]
    return 0.0 if not runs else 1 - case[f"{side}_successes"] / runs


def pair_review_tests(
    pair: PairEvidence,
    rows: Sequence[ResultRow] | None,
    policy: GatePolicy,
    look_alphas: dict[str, float] | None,
    generation: int,
) -> dict[str, Any]:
    """``pair_tests``, and with review cases ``review``: a pair with defect cases splits the resolution route's alpha
    with the review route (``review.REVIEW_ROUTE_SHARE``); other pairs' tests are what they always were."""
    if not has_defect_cases(rows, pair):
        tests = pair_tests(pair, rows, policy, look_alphas, generation)
    else:
        share = generation_alpha(policy, generation)
        fixed = {"cost": share * (1 - RESOLUTION_ROUTE_SHARE), "resolution": share * RESOLUTION_ROUTE_SHARE}
        alphas = review_alphas(look_alphas if look_alphas is not None else {**fixed, "quality": share})
        tests = pair_tests(pair, rows, policy, alphas, generation)
    quality = tests["quality"]
    review = review_evidence(rows or [], pair, policy, alpha=quality["alpha"], gain_alpha=quality["better_alpha"])
    return tests if review is None else {**tests, "review": review}
