"""Skill triggering in a pair: per skill of the labelled prompts, is the candidate's triggering not worse?

A trigger task (`class: trigger`) is a labelled prompt; its rows carry which skills the session invoked
(`trigger`). For each skill — every skill a prompt is labelled for or a session invoked — the pair is compared
twice, prompt by prompt, with the quality test the gate uses for resolution (`stats.quality_test`, against
`trigger_margin_pct`, at the generation's non-inferiority alpha; under the upstream rule at the policy's alpha):

* **recall**: over the prompts labelled for the skill, the runs that invoked it;
* **restraint**: over every other labelled prompt (near misses and prompts for other skills), the runs that did
  not invoke it — the complement of the false-trigger rate, so precision cannot fall unseen.

Each test must show the candidate within the margin (or better); a test that is credibly worse or cannot show
that keeps the incumbent, naming the skill and the figure. Together they are an intersection-union test: every
one must pass, so they need no correction, and a shortened description cannot silently break one skill's
triggering while the suite's resolution looks fine. A gain in triggering promotes through the resolution test
(a trigger row is resolved when exactly the labelled skill, or none, was invoked).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillbench.base.records import ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import trigger_labels, trigger_runs, trigger_skills

# The two tests per skill, in the order a decision records them.
TRIGGER_TESTS = ("recall", "restraint")


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
    for skill in skills:
        labelled = [prompt for prompt in prompts if labels[prompt] == skill]
        others = [prompt for prompt in prompts if labels[prompt] != skill]
        tests[skill] = {
            "prompts": len(labelled),
            "recall": gate_stats.quality_test(
                _tables(runs, labelled, arms, skill, hit=True), alpha=alpha, margin_pct=margin_pct, better_alpha=0.0
            ),
            "restraint": gate_stats.quality_test(
                _tables(runs, others, arms, skill, hit=False), alpha=alpha, margin_pct=margin_pct, better_alpha=0.0
            ),
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
