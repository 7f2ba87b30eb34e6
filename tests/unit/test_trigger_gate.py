"""The gate's trigger tests: per skill, recall on its labelled prompts and restraint on every other prompt."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rowfactory import make_binding, make_row
from skillbench.base.artifacts import validate
from skillbench.decision.gate import promotion_document, resolve_policy
from skillbench.decision.stats import quality_test
from skillbench.decision.triggers import trigger_blocks, trigger_tests

ARMS = ("trigger", "candidate_trigger")
PROMPTS = {  # prompt -> its label
    "plan-a": "change-plan",
    "plan-b": "change-plan",
    "work-a": "change-work",
    "work-b": "change-work",
    "near-a": None,
    "near-b": None,
}


def rows(invoked_by_arm: dict[str, dict[str, list[list[str]]]]) -> list[dict]:
    """Rows of both arms: arm → prompt → the skills each run invoked (one list per run)."""
    found = []
    for arm, prompts in invoked_by_arm.items():
        for prompt, runs in prompts.items():
            for run, invoked in enumerate(runs):
                expected = PROMPTS[prompt]
                correct = sorted(invoked) == ([expected] if expected else [])
                trigger = {
                    "expected": expected,
                    "near_miss": prompt.startswith("near"),
                    "invoked": sorted(invoked),
                    "false_triggers": sorted(skill for skill in invoked if skill != expected),
                    "correct": correct,
                }
                error_kind = None if correct else ("trigger-false" if trigger["false_triggers"] else "trigger-missed")
                found.append(
                    make_row(
                        prompt,
                        arm,
                        run,
                        resolved=correct,
                        error_kind=error_kind,
                        trigger=trigger,
                        **{"class": "trigger"},
                    )
                )
    return found


def faithful(runs: int) -> dict[str, list[list[str]]]:
    """Every run invokes exactly its prompt's label."""
    return {prompt: [[label] if label else [] for _ in range(runs)] for prompt, label in PROMPTS.items()}


def test_a_faithful_candidate_passes_every_skill_test_with_enough_runs() -> None:
    tests = trigger_tests(rows({ARMS[0]: faithful(40), ARMS[1]: faithful(40)}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    assert sorted(tests) == ["change-plan", "change-work"]
    assert tests["change-plan"]["prompts"] == 2
    assert {tests[skill][test]["conclusion"] for skill in tests for test in ("recall", "restraint")} == {"not_worse"}
    assert trigger_blocks(tests) == []


def test_a_description_that_stops_one_skill_triggering_is_blocked_by_name() -> None:
    broken = faithful(40)
    broken["plan-a"] = broken["plan-b"] = [[] for _ in range(40)]  # change-plan never triggers any more
    tests = trigger_tests(rows({ARMS[0]: faithful(40), ARMS[1]: broken}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    assert tests["change-plan"]["recall"]["conclusion"] == "worse"
    assert tests["change-work"]["recall"]["conclusion"] == "not_worse"
    (reason,) = trigger_blocks(tests)
    assert reason.startswith("change-plan triggering on its labelled prompts credibly worse: candidate 0/80 runs")


def test_false_triggers_on_near_misses_are_blocked_as_restraint() -> None:
    noisy = faithful(40)
    noisy["near-a"] = noisy["near-b"] = [["change-work"] for _ in range(40)]
    tests = trigger_tests(rows({ARMS[0]: faithful(40), ARMS[1]: noisy}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    # Two of the four other prompts broke completely, two did not at all: the prompts disagree, so their spread
    # (t, 3 df) decides, and it cannot show the candidate within the margin (nor, with 3 df, credibly worse).
    restraint = tests["change-work"]["restraint"]
    assert restraint["variance_from"] == "prompts" and restraint["df"] == 3
    assert restraint["conclusion"] == "inconclusive"
    assert any(
        reason.startswith("change-work staying untriggered elsewhere not shown within the 20-point margin")
        for reason in trigger_blocks(tests)
    )


def test_too_few_runs_cannot_show_the_margin_and_keep_the_incumbent() -> None:
    tests = trigger_tests(rows({ARMS[0]: faithful(2), ARMS[1]: faithful(2)}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    reasons = trigger_blocks(tests)
    assert reasons and all("not shown within the 20-point margin" in reason for reason in reasons)


def some(runs: int, invoking: int, skill: str) -> list[list[str]]:
    """`runs` runs of which the first `invoking` invoke `skill` and the rest nothing."""
    return [[skill] if run < invoking else [] for run in range(runs)]


def test_prompts_that_disagree_are_not_evidence_the_runs_can_multiply() -> None:
    # The candidate always triggers change-plan on one prompt and less than half the time on the other: on
    # average as good as the incumbent (70 % on both), but the prompts disagree by 60 points.
    incumbent, candidate = faithful(40), faithful(40)
    incumbent["plan-a"] = incumbent["plan-b"] = some(40, 28, "change-plan")
    candidate["plan-a"], candidate["plan-b"] = some(40, 40, "change-plan"), some(40, 16, "change-plan")
    tests = trigger_tests(rows({ARMS[0]: incumbent, ARMS[1]: candidate}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    # Counted as 160 independent runs, the same counts would show the candidate within the margin ...
    binomial = quality_test([(28, 40, 40, 40), (28, 40, 16, 40)], alpha=0.025, margin_pct=20.0, better_alpha=0.0)
    assert binomial["conclusion"] == "not_worse"
    # ... but the prompts are the unit: their spread decides, and it cannot show the margin.
    recall = tests["change-plan"]["recall"]
    assert (recall["candidate_resolved"], recall["incumbent_resolved"]) == (56, 56)
    assert recall["variance_from"] == "prompts" and recall["conclusion"] == "inconclusive"
    assert recall["p_noninferiority"] > binomial["p_noninferiority"]
    assert any(
        reason.startswith("change-plan triggering on its labelled prompts not shown")
        for reason in trigger_blocks(tests)
    )


def test_a_single_prompt_per_skill_falls_back_to_the_binomial_test_and_says_so() -> None:
    single = {prompt: runs for prompt, runs in faithful(40).items() if prompt not in ("plan-b", "work-b")}
    tests = trigger_tests(rows({ARMS[0]: single, ARMS[1]: single}), arms=ARMS, alpha=0.025, margin_pct=20.0)
    recall = tests["change-plan"]["recall"]
    assert tests["change-plan"]["prompts"] == 1
    assert recall["variance_from"] == "runs_only" and recall["df"] is None
    assert recall["conclusion"] == "not_worse"


def test_the_recorded_trigger_tests_say_which_standard_error_decided_and_validate() -> None:
    incumbent, candidate = faithful(40), faithful(40)
    incumbent["plan-a"] = incumbent["plan-b"] = some(40, 28, "change-plan")
    candidate["plan-a"], candidate["plan-b"] = some(40, 40, "change-plan"), some(40, 16, "change-plan")
    doc = promotion_document(
        rows({ARMS[0]: incumbent, ARMS[1]: candidate}),
        pairs=[ARMS],
        policy=resolve_policy({"rule": "noise_aware"}),
        binding=make_binding([ARMS[1]], selected_tasks=[{"id": "plan-a", "oracle_digest": "7" * 64}]),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC),
        generation=0,
    )
    validate(doc, "promotion")
    recall = doc["decisions"][0]["tests"]["triggers"]["change-plan"]["recall"]
    assert recall["variance_from"] == "prompts" and recall["df"] == 2
    assert doc["decisions"][0]["decision"] != "promote"


def test_a_pair_without_trigger_rows_has_no_trigger_tests() -> None:
    assert trigger_tests([make_row("t", ARMS[0]), make_row("t", ARMS[1])], arms=ARMS, alpha=0.05, margin_pct=20.0) == {}


@pytest.mark.parametrize("excluded", ["infra-error", "session-error"])
def test_excluded_runs_do_not_count(excluded: str) -> None:
    found = rows({ARMS[0]: faithful(40), ARMS[1]: faithful(40)})
    for row in found:
        if row["arm"] == ARMS[1] and row["task"] == "plan-a":
            row.update(error_kind=excluded, ok=False, resolved=False, trigger={**row["trigger"], "invoked": []})
    tests = trigger_tests(found, arms=ARMS, alpha=0.025, margin_pct=20.0)
    assert tests["change-plan"]["recall"]["candidate_runs"] == 40
