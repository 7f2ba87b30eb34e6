"""A generation with trigger tasks writes a promotion.json its schema accepts, with the per-skill tests in it."""

from __future__ import annotations

from datetime import UTC, datetime

from rowfactory import make_binding
from skillbench.base.artifacts import validate
from skillbench.decision.gate import promotion_document
from skillbench.decision.policy import resolve_policy
from test_trigger_gate import ARMS, faithful, rows

GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def document(invoked_by_arm: dict) -> dict:
    return validate(
        promotion_document(
            rows(invoked_by_arm),
            pairs=[ARMS],
            policy=resolve_policy({"min_runs": 3}),
            binding=make_binding([ARMS[1]]),
            run_status="complete",
            generated_at=GENERATED_AT,
        ),
        "promotion",
    )


def test_a_faithful_candidates_decision_records_every_skills_tests_and_validates() -> None:
    (decision,) = document({ARMS[0]: faithful(40), ARMS[1]: faithful(40)})["decisions"]
    triggers = decision["tests"]["triggers"]
    assert sorted(triggers) == ["change-plan", "change-work"]
    assert {triggers[skill][test]["conclusion"] for skill in triggers for test in ("recall", "restraint")} == {
        "not_worse"
    }


def test_a_candidate_that_stops_a_skill_triggering_is_kept_out_in_a_valid_document() -> None:
    broken = faithful(40)
    broken["plan-a"] = broken["plan-b"] = [[] for _ in range(40)]
    (decision,) = document({ARMS[0]: faithful(40), ARMS[1]: broken})["decisions"]
    assert decision["decision"] != "promote"
    assert decision["tests"]["triggers"]["change-plan"]["recall"]["conclusion"] == "worse"
    assert any("change-plan triggering on its labelled prompts credibly worse" in r for r in decision["reasons"])
