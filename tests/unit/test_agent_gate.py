"""The gate across agent CLIs: one candidate whose evolution arms run several agents gets one paired comparison per
agent, and gate.across_agents says how their verdicts combine (rows in, promotion document out)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest
from rowfactory import make_binding, make_row
from skillbench.base.artifacts import validate
from skillbench.decision import stats
from skillbench.decision.gate import (
    GateInputError,
    check_policy_design,
    promotion_document,
    resolve_policy,
    run_design,
    summarize_gate,
)
from skillbench.decision.promotion import is_promoted

GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
# One evolution arm per agent, each with its candidate: the pairs of one candidate overlay.
AGENTS = {"claude-code": "workflow", "opencode": "oc_workflow", "copilot": "cp_workflow"}
PAIRS = [(arm, f"candidate_{arm}") for arm in AGENTS.values()]
NOISE = [1.0, 1.12, 0.9, 1.05, 0.95]


def agent_rows(
    agent: str, *, saving: float, tasks: int = 12, runs: int = 3, resolved: bool = True, spread: float = 1.0
) -> list[dict]:
    """One agent's incumbent and candidate rows: ``tasks`` tasks at four cost levels with run noise (``spread``: its
    power, so 2 doubles the log noise), the candidate ``saving`` cheaper on each (negative: dearer); ``resolved``
    False makes the candidate fail every other run."""
    incumbent = AGENTS[agent]
    noise = [value**spread for value in NOISE]
    rows = []
    for index in range(tasks):
        scale = 1 + 0.25 * (index % 4)
        for run in range(runs):
            rows.append(
                make_row(f"t{index:02d}", incumbent, run, agent=agent, cost_usd=scale * noise[(run + index) % 5])
            )
            candidate_resolved = resolved or run % 2 == 0
            rows.append(
                make_row(
                    f"t{index:02d}",
                    f"candidate_{incumbent}",
                    run,
                    agent=agent,
                    resolved=candidate_resolved,
                    cost_usd=scale * (1 - saving) * noise[(run + index + 1) % 5],
                )
            )
    return rows


def grade(rows: list[dict], **policy) -> dict:
    document = promotion_document(
        rows,
        pairs=PAIRS,
        policy=resolve_policy(policy),
        binding=make_binding([candidate for _, candidate in PAIRS]),
        run_status="complete",
        generated_at=GENERATED_AT,
    )
    return validate(document, "promotion")


def verdicts(document: dict) -> dict[str, str]:
    return {verdict["agent"]: verdict["verdict"] for verdict in document["agents"]["verdicts"]}


def test_a_candidate_every_agent_finds_cheaper_is_promoted_with_one_verdict_per_agent():
    rows = [row for agent in AGENTS for row in agent_rows(agent, saving=0.2)]
    document = grade(rows)
    assert document["policy"]["across_agents"] == "all"
    assert [d["decision"] for d in document["decisions"]] == ["promote"] * 3
    assert verdicts(document) == dict.fromkeys(AGENTS, "promote")
    assert [v["candidate_arm"] for v in document["agents"]["verdicts"]] == [c for _, c in PAIRS]
    assert document["agents"]["decision"] == "promote" and is_promoted(document)
    assert "intersection-union" in document["agents"]["statement"]
    assert summarize_gate(document)[-1].startswith("across agents (all): promote")


def test_a_candidate_one_agent_regresses_on_is_kept_under_either_rule():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.2),
        *agent_rows("copilot", saving=-0.3),
    ]
    for rule in ("all", "any"):
        document = grade(rows, across_agents=rule)
        assert verdicts(document)["copilot"] == "keep_incumbent", rule
        assert document["agents"]["decision"] == "keep_incumbent" and not is_promoted(document), rule
        assert "copilot (candidate_cp_workflow)" in document["agents"]["reason"], rule
    assert verdicts(document)["claude-code"] == "promote"


def test_a_candidate_one_agent_resolves_worse_on_is_kept_under_any():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.0),
        *agent_rows("copilot", saving=0.3, resolved=False),
    ]
    document = grade(rows, across_agents="any")
    copilot = next(v for v in document["agents"]["verdicts"] if v["agent"] == "copilot")
    assert copilot["no_worse"] is False and copilot["verdict"] == "keep_incumbent"
    assert document["agents"]["decision"] == "keep_incumbent" and not is_promoted(document)


def test_any_promotes_one_agents_saving_when_the_others_are_no_worse_and_all_does_not():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.0),
        *agent_rows("copilot", saving=0.0),
    ]
    every = grade(rows)
    assert verdicts(every) == {"claude-code": "promote", "opencode": "keep_incumbent", "copilot": "keep_incumbent"}
    assert every["agents"]["decision"] == "keep_incumbent" and not is_promoted(every)

    some = grade(rows, across_agents="any")
    assert verdicts(some) == {"claude-code": "promote", "opencode": "no_worse", "copilot": "no_worse"}
    assert some["agents"]["decision"] == "promote" and is_promoted(some)
    # The pairs' own decisions are the same under both rules: only how they combine differs.
    assert [d["decision"] for d in some["decisions"]] == [d["decision"] for d in every["decisions"]]


def test_any_needs_every_other_agents_spend_shown_within_the_margin_not_merely_not_shown_dearer():
    """An agent 8 % dearer whose noisy runs cannot show it dearer is no evidence that it is not: under any, every
    pair must show its total spend within resolution_cost_margin_pct (10 %) of the incumbent's."""
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.0),
        *agent_rows("copilot", saving=-0.08, spread=3.0),
    ]
    document = grade(rows, across_agents="any")
    copilot = next(v for v in document["agents"]["verdicts"] if v["agent"] == "copilot")
    cost = next(d for d in document["decisions"] if d["candidate_arm"] == "candidate_cp_workflow")["tests"]["cost"]
    assert cost["p_higher"] > 0.05  # not credibly dearer: the old guard let it through
    assert cost["margin_pct"] == 10.0 and cost["p_within_margin"] > 0.025
    assert copilot["no_worse"] is False and copilot["verdict"] == "keep_incumbent"
    assert document["agents"]["decision"] == "keep_incumbent"
    assert "total spend shown within the spend margin" in document["agents"]["statement"]
    # With the margin null (any price), the old guard — not credibly dearer — is what any asks.
    priced = grade(rows, across_agents="any", resolution_cost_margin_pct=None)
    assert verdicts(priced)["copilot"] == "no_worse"


def test_any_holds_each_agents_cost_claim_to_holms_correction():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.07),
        *agent_rows("copilot", saving=0.0),
    ]
    document = grade(rows, across_agents="any")
    raw = [v["cost_p_value"] for v in document["agents"]["verdicts"]]
    adjusted = [v["cost_p_adjusted"] for v in document["agents"]["verdicts"]]
    assert adjusted == stats.holm(raw) and adjusted != raw
    for verdict, decision in zip(document["agents"]["verdicts"], document["decisions"], strict=True):
        alpha = decision["tests"]["cost"]["alpha"]
        holds = decision["decision"] == "promote" and verdict["cost_p_adjusted"] <= alpha
        assert (verdict["verdict"] == "promote") == holds
    # Under all every pair is tested at the full alpha: the raw p-values decide.
    assert [v["cost_p_adjusted"] for v in grade(rows)["agents"]["verdicts"]] == raw


def test_an_agent_without_evidence_makes_the_candidate_insufficient_under_any():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.0),
        *agent_rows("copilot", saving=0.0, runs=2),
    ]
    document = grade(rows, across_agents="any")
    assert verdicts(document)["copilot"] == "insufficient_evidence"
    assert document["agents"]["decision"] == "insufficient_evidence" and not is_promoted(document)


def test_a_pair_whose_rows_ran_two_agents_has_no_agent_and_no_verdict_to_promote():
    rows = [row for agent in AGENTS for row in agent_rows(agent, saving=0.2)]
    for row in rows:
        if row["arm"] == "candidate_cp_workflow" and row["task"] == "t00":
            row["agent"] = "opencode"
    document = grade(rows)
    stale = document["agents"]["verdicts"][2]
    assert (stale["agent"], stale["verdict"]) == (None, "insufficient_evidence")
    assert not is_promoted(document)


def test_a_document_whose_verdict_across_agents_was_edited_does_not_promote():
    rows = [
        *agent_rows("claude-code", saving=0.2),
        *agent_rows("opencode", saving=0.0),
        *agent_rows("copilot", saving=0.0),
    ]
    document = grade(rows, across_agents="any")
    assert is_promoted(document)
    edited = copy.deepcopy(document)
    edited["decisions"][1]["no_worse"] = False
    assert not is_promoted(edited)
    edited = copy.deepcopy(grade(rows))
    edited["agents"]["decision"] = "promote"
    assert not is_promoted(edited)


def test_the_across_agents_policy_key_is_checked():
    assert resolve_policy(None).across_agents == "all"
    with pytest.raises(GateInputError, match="across_agents must be one of all, any"):
        resolve_policy({"across_agents": "most"})
    with pytest.raises(GateInputError, match="across_agents any needs rule noise_aware"):
        resolve_policy({"across_agents": "any", "rule": "upstream"})
    sequential = run_design({"min": 2, "max": 4, "step": 1})
    check_policy_design(resolve_policy({"across_agents": "all"}), sequential)
    check_policy_design(resolve_policy({"across_agents": "any"}), run_design(3))
    with pytest.raises(GateInputError, match="across_agents any needs a fixed runs design"):
        check_policy_design(resolve_policy({"across_agents": "any"}), sequential)


def test_the_report_and_the_summary_show_every_agents_verdict():
    from rowfactory import make_overlay
    from skillbench.reporting import report

    rows = [
        *agent_rows("claude-code", saving=0.2, tasks=4),
        *agent_rows("opencode", saving=0.2, tasks=4),
        *agent_rows("copilot", saving=-0.3, tasks=4),
    ]
    document = grade(rows)
    summary = report.generation_summary(
        document, make_overlay(), promoted=is_promoted(document), gate_summary=summarize_gate(document)
    )
    assert summary["promoted"] is False
    assert summary["across_agents"]["decision"] == document["agents"]["decision"]
    assert [(d["agent"], d["verdict"]) for d in summary["decisions"]] == [
        (v["agent"], v["verdict"]) for v in document["agents"]["verdicts"]
    ]
    text = report.render_report(
        rows,
        title="agents",
        task_order=[f"t{index:02d}" for index in range(4)],
        arm_order=[arm for pair in PAIRS for arm in pair],
        provenance={},
        promotion=document,
        baseline_arm="workflow",
    )
    assert f"### Across agents (`across_agents: all`): **{document['agents']['decision']}**" in text
    for verdict in document["agents"]["verdicts"]:
        line = f"| {verdict['agent']} | {verdict['candidate_arm']} vs {verdict['incumbent_arm']} |"
        assert line in text


def test_an_overlay_for_every_agents_arm_may_list_them_in_any_order():
    from skillbench.experiment.arms import check_candidate_arms
    from skillbench.experiment.overlay import OverlayError

    # A config merged over the default one defines its own arms after the default's: evolution.arms may differ.
    skills = {"workflow_direct": ["change-work"], "oc_direct": ["change-work"], "cp_direct": ["change-work"]}
    expected = ["candidate_cp_direct", "candidate_workflow_direct", "candidate_oc_direct"]
    assert check_candidate_arms(expected, skills, {"change-work"}, "overlay") == expected
    with pytest.raises(OverlayError, match="needs the paired arms"):
        check_candidate_arms(expected[:2], skills, {"change-work"}, "overlay")
