"""Skill triggering in a pair: per skill of the labelled prompts, is the candidate's triggering not worse?

A trigger task (`class: trigger`) is a labelled prompt; its rows carry which skills the session invoked
(`trigger`). For each skill — every skill a prompt is labelled for or a session invoked — the pair is compared
twice, prompt by prompt, with the quality test the gate uses for resolution (`stats.quality_test`, against
`trigger_margin_pct`, at the generation's non-inferiority alpha; under the upstream rule at the policy's alpha):

* **recall**: over the prompts labelled for the skill, the runs that invoked it;
* **restraint**: over every other labelled prompt (near misses and prompts for other skills), the runs that did
  not invoke it — the complement of the false-trigger rate, so precision cannot fall unseen.

The prompt, not the run, is the unit of replication: the binomial test counts only run-to-run noise, so an effect
every run of one (prompt, arm) shares — or a candidate better on one prompt and worse on another — would look like
evidence that more runs multiply (docs/gate.md "Skill triggering": 9 % false promotions over three generations
against one cached incumbent). So each p-value takes the larger of the binomial standard error (at the margin for
non-inferiority, at the pooled rate for "worse"; normal) and the spread of the per-prompt differences (t). Restraint
takes its own prompts' spread (prompts - 1 df; a restraint test has every other prompt). Recall pools the spread
over every skill's labelled prompts, each prompt's difference about its own skill's mean (df: the sum of prompts - 1
over the skills): a skill with three or five prompts alone would leave a t with 2 or 4 df, which cost most of the
power in the bench (an equal candidate at 3 prompts × 32 runs: 10 % promoted in 60 draws, against 51 % pooled) for
no error rate the goals need, and a skill's own disagreeing prompts still raise the pooled spread. When no skill has two
labelled prompts there is no spread to measure: recall then stays the binomial test, recorded as
``variance_from: "runs_only"`` — it counts the runs as independent, so label two prompts or more per skill.

Each test must show the candidate within the margin (or better); a test that is credibly worse or cannot show
that keeps the incumbent, naming the skill and the figure. Together they are an intersection-union test: every
one must pass, so they need no correction, and a shortened description cannot silently break one skill's
triggering while the suite's resolution looks fine. A gain in triggering promotes through the resolution test
(a trigger row is resolved when exactly the labelled skill, or none, was invoked).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from skillbench.base.records import ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import trigger_labels, trigger_runs, trigger_skills

# The two tests per skill, in the order a decision records them.
TRIGGER_TESTS = ("recall", "restraint")
TRIGGER_METHOD = (
    "prompt-stratified (Mantel-Haenszel weighted) invocation-rate difference; standard error the larger of the "
    "binomial one (non-inferiority: each prompt's variance at the margin; worse: its pooled rate; normal) and the "
    "spread of the per-prompt differences (t, prompts - 1 df); a single prompt: the binomial one alone"
)


def _usable(tables: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    return [t for t in tables if t[1] > 0 and t[3] > 0]


def prompt_spread(groups: list[list[tuple[int, int, int, int]]]) -> tuple[float, int] | None:
    """(per-prompt variance of the differences, its degrees of freedom) pooled over groups of prompts: each
    prompt's difference (candidate - incumbent rate) about its own group's mean, so a group's level never counts
    as spread. None with no degree of freedom (no group has two prompts with runs on both sides)."""
    squares, df = 0.0, 0
    for group in groups:
        differences = [x_c / n_c - x_i / n_i for x_i, n_i, x_c, n_c in _usable(group)]
        if len(differences) < 2:
            continue
        centre = math.fsum(differences) / len(differences)
        squares += math.fsum((d - centre) ** 2 for d in differences)
        df += len(differences) - 1
    return (squares / df, df) if df else None


def prompt_test(
    tables: list[tuple[int, int, int, int]],
    *,
    alpha: float,
    margin_pct: float,
    spread: tuple[float, int] | None = None,
) -> dict[str, Any]:
    """One skill's recall or restraint test: ``stats.quality_test`` with the prompt as the unit of replication.

    The binomial test counts only run-to-run noise, so an effect every run of one (prompt, arm) shares — or a
    candidate better on one prompt and worse on another — looks like evidence that more runs multiply. With two
    prompts or more, each p-value takes the larger of its binomial standard error and the spread of the per-prompt
    differences; when the spread is the larger, the test is a t with prompts - 1 degrees of freedom (1 df for two
    prompts: only a near-unanimous pair can pass). A single prompt has no spread to measure: its test stays the
    binomial one, recorded as ``variance_from: "runs_only"`` (it counts the runs as independent; a suite should
    label two prompts or more per skill). ``variance_from`` says which standard error non-inferiority took, ``df``
    its degrees of freedom (null: normal)."""
    result = gate_stats.quality_test(tables, alpha=alpha, margin_pct=margin_pct, better_alpha=0.0)
    result.update({"method": TRIGGER_METHOD, "variance_from": None, "df": None})
    usable = _usable(tables)
    margin = margin_pct / 100.0
    if result["conclusion"] == "not_computable" or margin >= 1.0:
        return result
    measured = spread if spread is not None else prompt_spread([tables])
    if measured is None:
        result["variance_from"] = "runs_only"
        return result
    result["variance_from"] = "runs"
    difference, pooled, at_margin = gate_stats.stratified_difference(usable, margin)
    weights = gate_stats.mh_weights(usable)
    # The spread's variance of the weighted mean: per-prompt variance carried through the weights.
    variance = measured[0] * math.fsum(w * w for w in weights) / math.fsum(weights) ** 2
    df = measured[1]
    t = gate_stats.stats.t
    p_worse, p_better = result["p_worse"], result["p_better"]
    if variance > pooled:
        se = math.sqrt(variance)
        p_worse, p_better = float(t.cdf(difference / se, df)), float(t.sf(difference / se, df))
    p_noninferiority = result["p_noninferiority"]
    if variance > at_margin:
        se = math.sqrt(variance)
        critical = float(t.isf(alpha, df))
        p_noninferiority = float(t.sf((difference + margin) / se, df))
        result.update(
            {
                "ci_low_pct": round(100 * (difference - critical * se), 1),
                "ci_high_pct": round(100 * (difference + critical * se), 1),
                "mde_pct": round(100 * (critical + float(t.ppf(gate_stats.POWER, df))) * se, 1),
                "variance_from": "prompts",
                "df": df,
            }
        )
    # better_alpha 0: a trigger test never promotes (a gain promotes through resolution).
    conclusion = gate_stats.quality_conclusion(p_better, p_worse, p_noninferiority, alpha=alpha, better_alpha=0.0)
    result.update(
        {
            "p_noninferiority": gate_stats._p(p_noninferiority),
            "p_worse": gate_stats._p(p_worse),
            "p_better": gate_stats._p(p_better),
            "conclusion": conclusion,
        }
    )
    return result


def _tables(
    runs: dict[tuple[str, str], list[dict[str, Any]]],
    prompts: list[str],
    arms: tuple[str, str],
    skill: str,
    *,
    hit: bool,
) -> list[tuple[int, int, int, int]]:
    """Per prompt: (incumbent runs that did / did not invoke `skill` as `hit` says, its runs, the candidate's)."""
    tables = []
    for prompt in prompts:
        counts: list[int] = []
        for arm in arms:
            triggers = runs.get((prompt, arm), [])
            counts += [sum(1 for t in triggers if (skill in t["invoked"]) == hit), len(triggers)]
        tables.append((counts[0], counts[1], counts[2], counts[3]))
    return tables


def trigger_tests(
    rows: Sequence[ResultRow], *, arms: tuple[str, str], alpha: float, margin_pct: float
) -> dict[str, dict[str, Any]]:
    """skill → {"prompts": labelled prompts, "recall": quality test, "restraint": quality test} over the pair's
    trigger rows (empty when the pair has none). `arms` is (incumbent, candidate)."""
    runs = trigger_runs(rows, arms)
    recorded = trigger_labels(runs)
    labels = {prompt: label["expected"] for prompt, label in recorded.items()}
    skills = trigger_skills(recorded, runs)
    prompts = sorted(labels)
    tests: dict[str, dict[str, Any]] = {}
    recall = {
        skill: _tables(runs, [prompt for prompt in prompts if labels[prompt] == skill], arms, skill, hit=True)
        for skill in skills
    }
    # Recall's spread is pooled over every skill's labelled prompts: how much a prompt's difference strays from its
    # skill's is the suite's (the agent's, the harness's) more than one skill's, and a skill with three prompts
    # alone would have a t with 2 df. A skill's own disagreeing prompts still raise the pooled spread.
    recall_spread = prompt_spread(list(recall.values()))
    for skill in skills:
        others = [prompt for prompt in prompts if labels[prompt] != skill]
        tests[skill] = {
            "prompts": sum(1 for prompt in prompts if labels[prompt] == skill),
            "recall": prompt_test(recall[skill], alpha=alpha, margin_pct=margin_pct, spread=recall_spread),
            "restraint": prompt_test(_tables(runs, others, arms, skill, hit=False), alpha=alpha, margin_pct=margin_pct),
        }
    return tests


def _what(test: str, skill: str) -> str:
    return (
        f"{skill} triggering on its labelled prompts" if test == "recall" else f"{skill} staying untriggered elsewhere"
    )


def trigger_sentence(skill: str, test: str, result: dict[str, Any]) -> str:
    """One sentence on one skill's test (the candidate's and the incumbent's counts, the difference, the p-value)."""
    counts = (
        f"candidate {result['candidate_resolved']}/{result['candidate_runs']} runs, incumbent "
        f"{result['incumbent_resolved']}/{result['incumbent_runs']}"
    )
    conclusion = result["conclusion"]
    if conclusion == "not_computable":
        return f"{_what(test, skill)} could not be compared ({counts})"
    difference = f"difference {result['difference_pct']:+.1f} points"
    if conclusion == "worse":
        return f"{_what(test, skill)} credibly worse: {counts}, {difference}, one-sided p {result['p_worse']:.3g}"
    if conclusion == "inconclusive":
        return (
            f"{_what(test, skill)} not shown within the {result['margin_pct']:.0f}-point margin: {counts}, "
            f"{difference} (non-inferiority p {result['p_noninferiority']:.3g}, alpha {result['alpha']:g})"
        )
    return f"{_what(test, skill)} not worse: {counts}, {difference}"


def _sentences(tests: dict[str, dict[str, Any]], conclusions: tuple[str, ...]) -> list[str]:
    return [
        trigger_sentence(skill, test, by_test[test])
        for skill, by_test in tests.items()
        for test in TRIGGER_TESTS
        if by_test[test]["conclusion"] in conclusions
    ]


def trigger_regressions(tests: dict[str, dict[str, Any]]) -> list[str]:
    """One sentence per test the candidate is credibly worse on: a regression, which keeps the incumbent (and
    ends a sequential design's looks at once)."""
    return _sentences(tests, ("worse",))


def trigger_unshown(tests: dict[str, dict[str, Any]]) -> list[str]:
    """One sentence per test that could not show the candidate within the margin: no promotion yet (more runs
    may show it)."""
    return _sentences(tests, ("inconclusive",))


def trigger_blocks(tests: dict[str, dict[str, Any]]) -> list[str]:
    """Why the triggering keeps the incumbent, one sentence per failed test (empty: every test passed). A test
    without runs on both sides (a skill no prompt is labelled for has no recall) says nothing and blocks nothing."""
    return _sentences(tests, ("worse", "inconclusive"))


def pair_trigger_tests(
    rows: Sequence[ResultRow] | None, arms: tuple[str, str], *, alpha: float, margin_pct: float
) -> dict[str, dict[str, Any]] | None:
    """The pair's trigger tests, or None when it has no trigger rows (its decision records none)."""
    tests = trigger_tests(rows or [], arms=arms, alpha=alpha, margin_pct=margin_pct)
    return tests or None
