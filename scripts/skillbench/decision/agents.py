"""Across agents: one candidate whose pairs ran several agent CLIs (one pair per agent), and how their verdicts
combine under the policy's ``across_agents`` (``all``: an intersection-union test; ``any``: Holm's correction across
the pairs and every pair no worse).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from skillbench.base.records import Decision, ResultRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import is_valid
from skillbench.decision.noise_aware import resolution_route
from skillbench.decision.policy import GateInputError, GatePolicy
from skillbench.decision.significance import p_text


def check_policy_design(policy: GatePolicy, design: dict[str, Any] | None) -> None:
    """Refuse ``across_agents: any`` with a sequential runs design (``run_design``): its Holm correction across
    agents is not combined with the looks' alpha spending (``all`` needs no correction, so it runs with both)."""
    if design is not None and design["kind"] == "sequential" and policy.across_agents == "any":
        raise GateInputError(
            "gate.across_agents any needs a fixed runs design: the Holm correction across agents is not combined "
            "with a sequential design's looks (use across_agents all, which needs no correction, or a fixed runs)"
        )


def pair_agent(rows: Sequence[ResultRow], incumbent_arm: str, candidate_arm: str) -> str | None:
    """The agent CLI a pair's valid rows ran (None when none recorded one, or they ran several: such a pair is
    insufficient_evidence by the comparable-rows guard)."""
    seen = {
        cast("Mapping[str, str | None]", row).get("agent")
        for row in rows
        if row["arm"] in (incumbent_arm, candidate_arm) and is_valid(row)
    }
    return next(iter(seen)) if len(seen) == 1 else None


def _agent_name(agent: str | None) -> str:
    return agent or "an unrecorded agent"


def _promoted_on_resolution(decision: Decision, policy: GatePolicy) -> bool:
    """Whether a promoting pair promoted on its resolution route (credibly better, spend within the margin)."""
    tests = decision["tests"]
    return tests["quality"]["conclusion"] == "better" and resolution_route(tests, policy)[0]


def across_agents(decisions: Sequence[Decision], rows: Sequence[ResultRow], policy: GatePolicy) -> dict[str, Any]:
    """The candidate's verdict across the agent CLIs its pairs ran (``policy.across_agents``), one verdict per
    pair (the usual setup: one evolution arm per agent).

    ``all`` (default): promote only when every pair promotes on its own tests, each at the generation's alpha —
    an intersection-union test, so a candidate no agent finds better is promoted at most alpha of the time
    without any correction; a pair that keeps the incumbent or lacks evidence keeps the candidate out.

    ``any``: every pair's no-worse guards must hold (its per-task checks, the resolution shown within the margin,
    the total spend shown within ``resolution_cost_margin_pct`` of the incumbent's — not merely not shown dearer,
    which a small per-agent design never shows; a pair without evidence gives insufficient_evidence), and at least one
    pair's promotion claim must survive Holm's correction across the pairs: the cost route's p-values at the cost
    test's alpha, the resolution route's at its own. A pair whose guards hold but whose claim does not is
    ``no_worse``. Pure: the decisions (and their rows, for each pair's agent) in, the block out.
    """
    rule = policy.across_agents
    pvalue = [decision["tests"]["cost"]["p_value"] for decision in decisions]
    adjusted = gate_stats.holm([1.0 if p is None else p for p in pvalue]) if rule == "any" else pvalue
    better = [decision["tests"]["quality"]["p_better"] for decision in decisions]
    better_adjusted = gate_stats.holm([1.0 if p is None else p for p in better]) if rule == "any" else better
    verdicts = []
    for index, decision in enumerate(decisions):
        agent = pair_agent(rows, decision["incumbent_arm"], decision["candidate_arm"])
        cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
        no_worse = bool(decision.get("no_worse", False))
        verdict, reason = decision["decision"], decision["reasons"][0] if decision["reasons"] else ""
        if rule == "any" and verdict != "insufficient_evidence":
            if not no_worse:
                verdict = "keep_incumbent"
            elif verdict == "promote":
                resolution = _promoted_on_resolution(decision, policy)
                p_adj, level = (
                    (better_adjusted[index], quality["better_alpha"])
                    if resolution
                    else (adjusted[index], cost["alpha"])
                )
                if p_adj is None or p_adj > level:
                    verdict = "no_worse"
                    reason = (
                        f"its {'resolution' if resolution else 'cost'} claim does not survive Holm's correction across "
                        f"{len(decisions)} agents (adjusted p {p_text(p_adj)} > alpha {level:g}); no worse"
                    )
            else:
                verdict = "no_worse"
                shown = quality["conclusion"].replace("_", " ")
                reason = f"no worse (resolution {shown}, {_spend_shown_text(policy)}); {reason}"
        verdicts.append(
            {
                "agent": agent,
                "incumbent_arm": decision["incumbent_arm"],
                "candidate_arm": decision["candidate_arm"],
                "pair_decision": decision["decision"],
                "verdict": verdict,
                "no_worse": no_worse,
                "cost_estimate_pct": cost["estimate_pct"],
                "cost_p_value": cost["p_value"],
                "cost_p_adjusted": adjusted[index],
                "reason": reason,
            }
        )
    outcome, why = _across_outcome(rule, verdicts)
    return {
        "rule": rule,
        "decision": outcome,
        "reason": why,
        "statement": _across_statement(rule, len(decisions)),
        "verdicts": verdicts,
    }


def _across_outcome(rule: str, verdicts: list[dict[str, Any]]) -> tuple[str, str]:
    """The candidate's decision over the agents' verdicts, and the sentence why."""

    def named(kind: str) -> str:
        return ", ".join(f"{_agent_name(v['agent'])} ({v['candidate_arm']})" for v in verdicts if v["verdict"] == kind)

    if not verdicts:
        return "insufficient_evidence", "no candidate pair was decided"
    kinds = {verdict["verdict"] for verdict in verdicts}
    if "insufficient_evidence" in kinds and (rule == "any" or "keep_incumbent" not in kinds):
        return "insufficient_evidence", f"not enough evidence on {named('insufficient_evidence')}"
    if "keep_incumbent" in kinds:
        if rule == "all":
            return "keep_incumbent", f"every agent must promote (across_agents all); kept by {named('keep_incumbent')}"
        return "keep_incumbent", f"a no-worse guard failed on {named('keep_incumbent')} (across_agents any)"
    if rule == "all":
        return "promote", f"every agent promotes: {named('promote')}"
    if "promote" in kinds:
        tail = f"; no worse on {named('no_worse')}" if "no_worse" in kinds else ""
        return "promote", f"better after Holm's correction across agents on {named('promote')}{tail}"
    return (
        "keep_incumbent",
        f"no agent's claim survives Holm's correction across agents; no worse on {named('no_worse')}",
    )


def _spend_shown_text(policy: GatePolicy) -> str:
    margin = policy.resolution_cost_margin_pct
    return "spend not credibly higher" if margin is None else f"spend shown within {margin:g}% of the incumbent's"


def _across_statement(rule: str, pairs: int) -> str:
    if rule == "all":
        return (
            f"across_agents all: each of the {pairs} agent pair(s) is tested at the generation's alpha and all must "
            "promote (an intersection-union test: promoting a candidate that is no better on some agent has "
            "probability at most alpha, with no correction across agents)"
        )
    return (
        f"across_agents any: at least one of the {pairs} agent pair(s) must show its saving (or better resolution) "
        "after Holm's correction across the pairs, and every pair its no-worse guards (per-task checks, resolution "
        "within the margin, total spend shown within the spend margin, resolution_cost_margin_pct): promoting a "
        "candidate no agent finds better, or one that is dearer by the margin on some agent, has probability at most "
        "alpha"
    )
