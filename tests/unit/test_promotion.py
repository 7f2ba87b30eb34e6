"""promotion.json: a partial set of rows never promotes; a generation promotes only when every decision does."""

from __future__ import annotations

from skillbench.decision.promotion import is_promoted, run_status


def row(task: str, arm: str, run: int, error_kind: str | None = None) -> dict:
    return {"task": task, "arm": arm, "run": run, "error_kind": error_kind}


def test_complete_when_every_task_and_arm_has_the_same_runs():
    rows = [row(t, a, r) for t in ("a", "b") for a in ("x", "candidate_x") for r in range(3)]
    assert run_status(rows, ["a", "b"], ["x", "candidate_x"]) == "complete"


def test_a_missing_cell_or_task_makes_the_run_aborted():
    rows = [row(t, a, r) for t in ("a", "b") for a in ("x", "candidate_x") for r in range(3)]
    assert run_status(rows[:-1], ["a", "b"], ["x", "candidate_x"]) == "aborted"
    assert run_status([r for r in rows if r["task"] == "a"], ["a", "b"], ["x", "candidate_x"]) == "aborted"
    assert run_status([], ["a"], ["x"]) == "aborted"


def test_a_cancelled_row_makes_the_run_aborted():
    rows = [row("a", "x", 0), row("a", "candidate_x", 0, "cancelled")]
    assert run_status(rows, ["a"], ["x", "candidate_x"]) == "aborted"


def test_a_generation_promotes_only_when_every_decision_promotes():
    assert is_promoted({"decisions": [{"decision": "promote"}, {"decision": "promote"}]})
    assert not is_promoted({"decisions": [{"decision": "promote"}, {"decision": "keep_incumbent"}]})
    assert not is_promoted({"decisions": []})


# ─── Content flags: a flagged candidate is held back unless its categories are accepted ─────────────────────

SKILL = ".claude/skills/change-work/SKILL.md"
FLAGS = [
    {
        "file": SKILL,
        "line": 12,
        "category": "tests",
        "rule": "test-weakening",
        "text": "test blocks you, mark it skipped",
    },
    {"file": SKILL, "line": 14, "category": "network", "rule": "url", "text": "https://x.example.com"},
]


def graded(flags=None, accept=(), candidate_cost: float = 0.8, across_agents: str = "all") -> dict:
    """The promotion document of sixteen tasks × three runs on which the gate promotes both pairs (at cost 0.8)."""
    from skillbench.base import artifacts
    from skillbench.decision import gate
    from test_apply import GENERATED_AT, MODEL, PAIRS, result_row, task_binding

    rows = []
    noise = [1.0, 1.1, 0.92, 1.05, 0.96]
    for incumbent, candidate in PAIRS:
        for index in range(16):
            for run in range(3):
                task = f"t{index:02d}"
                rows.append(result_row(incumbent, run, noise[run], "d" * 64, task=task))
                rows.append(result_row(candidate, run, candidate_cost * noise[(run + index) % 5], "d" * 64, task=task))
    document = gate.promotion_document(
        rows,
        pairs=PAIRS,
        policy=gate.resolve_policy({"across_agents": across_agents}),
        binding={
            "benchmark_model": MODEL,
            "effort": "high",
            "proposer_model": None,
            "candidate_origin": "manual-initial-overlay",
            "candidate_overlay_digest": "d" * 64,
            "required_candidate_arms": [candidate for _, candidate in PAIRS],
            "selected_tasks": [task_binding()],
            "target_base_digests": {"x": "e" * 64},
        },
        run_status="complete",
        generated_at=GENERATED_AT,
        content_flags=flags,
        accept_flags=list(accept),
    )
    return artifacts.validate(document, "promotion")


def test_a_flagged_candidate_the_evidence_would_promote_is_kept_out_naming_its_flags():
    document = graded(FLAGS)
    assert [d["decision"] for d in document["decisions"]] == ["keep_incumbent", "keep_incumbent"]
    assert document["agents"]["decision"] == "keep_incumbent" and not is_promoted(document)
    reason = document["decisions"][0]["reasons"][0]
    assert reason.startswith("held back by content flags the config does not accept (tests: 1, network: 1; e.g. ")
    assert f"{SKILL}:12: [tests] test-weakening: 'test blocks you, mark it skipped'" in reason
    assert "add tests, network to evolution.accept_flags" in reason
    assert document["content_review"] == {
        "flags": FLAGS,
        "accepted": [],
        "unaccepted": ["tests", "network"],
        "held": True,
    }
    # The evidence's own verdict is still there: the reasons after the first, the tests, the statistics.
    assert document["decisions"][0]["reasons"][1:] == graded()["decisions"][0]["reasons"]
    assert document["decisions"][0]["tests"] == graded()["decisions"][0]["tests"]


def test_a_flagged_candidate_is_promoted_when_every_category_is_accepted_and_held_when_one_is_not():
    accepted = graded(FLAGS, accept=("network", "tests"))
    assert is_promoted(accepted) and [d["decision"] for d in accepted["decisions"]] == ["promote", "promote"]
    assert accepted["content_review"] == {
        "flags": FLAGS,
        "accepted": ["tests", "network"],
        "unaccepted": [],
        "held": False,
    }
    partly = graded(FLAGS, accept=("tests",))
    assert not is_promoted(partly) and partly["content_review"]["unaccepted"] == ["network"]


def test_flags_change_no_decision_the_evidence_did_not_promote():
    costlier = graded(FLAGS, candidate_cost=1.3)
    assert costlier["decisions"] == graded(candidate_cost=1.3)["decisions"]
    assert costlier["content_review"]["held"] is False
    assert costlier["content_review"]["unaccepted"] == ["tests", "network"]


def test_under_across_agents_any_every_held_pair_keeps_the_candidate_out():
    assert is_promoted(graded(across_agents="any"))
    held = graded(FLAGS, across_agents="any")
    assert held["agents"]["decision"] == "keep_incumbent" and not is_promoted(held)


def test_an_unflagged_candidate_records_an_empty_review_and_an_old_overlay_record_none():
    assert graded([])["content_review"] == {"flags": [], "accepted": [], "unaccepted": [], "held": False}
    assert "content_review" not in graded(None)


def test_an_unknown_accepted_category_is_refused():
    import pytest
    from skillbench.decision.policy import GateInputError

    with pytest.raises(GateInputError, match=r"accept_flags \['everything'\] are not flag categories"):
        graded(FLAGS, accept=("everything",))
