"""``promotion.json``: a generation's stored rows graded into its promotion document, and what a document says.

Owns grading from the files (rows, frozen overlay record, task bindings, the last sequential look) — the
same function serves the gate rule and the offline `skillbench gate` — the run-status check that keeps a
partial set of rows from promoting, the binding a promotion carries, and whether a document promotes.
The decision itself is `gate`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts
from skillbench.base.records import Decision, PromotionDocument, ResultRow
from skillbench.decision.policy import GatePolicy


def is_promoted(promotion: Mapping[str, Any]) -> bool:
    """A generation promotes when its verdict across agents is `promote`, recomputed from its decisions under its
    policy's ``across_agents`` and stated so by the document (``agents.decision``): under ``all`` every decision is
    `promote`; under ``any`` one pair's claim survives Holm's correction and every other pair is no worse. A
    document written before the verdict across agents existed promotes when every decision is `promote`."""
    decisions = promotion.get("decisions")
    if not isinstance(decisions, list) or not decisions or not all(isinstance(d, dict) for d in decisions):
        return False
    agents = promotion.get("agents")
    if isinstance(agents, dict) and agents.get("decision") != "promote":
        return False
    policy = promotion.get("policy")
    if isinstance(policy, dict) and policy.get("across_agents") == "any":
        from skillbench.decision import gate
        from skillbench.decision.policy import recorded_policy

        recorded = recorded_policy(policy)
        return bool(gate.across_agents(cast("list[Decision]", decisions), [], recorded)["decision"] == "promote")
    return all(d.get("decision") == "promote" for d in decisions)


def run_status(rows: Sequence[Mapping[str, Any]], tasks: list[str], arms: list[str]) -> str:
    """`complete` when every (task, arm) has the same unbroken run numbers (from wherever they start) and nothing
    was cancelled, else `aborted`.

    The pipeline only gates a generation whose cells all finished; a partial results.jsonl (a regrade of
    an interrupted run) must never promote."""
    if any(row["error_kind"] == "cancelled" for row in rows):
        return "aborted"
    runs: dict[tuple[str, str], set[int]] = {(task, arm): set() for task in tasks for arm in arms}
    for row in rows:
        if (row["task"], row["arm"]) in runs:
            runs[(row["task"], row["arm"])].add(row["run"])
    seen: set[int] = set().union(*runs.values()) if runs else set()
    expected = set(range(min(seen), max(seen) + 1)) if seen else set()
    return "complete" if expected and all(found == expected for found in runs.values()) else "aborted"


def promotion_binding(
    model: str, effort: str | None, overlay_doc: dict[str, Any], bindings_doc: dict[str, Any]
) -> dict[str, Any]:
    """What a promotion is bound to: the benchmark model and effort, the candidate and the selected tasks."""
    return {
        "benchmark_model": model,
        "effort": effort,
        "proposer_model": overlay_doc["proposer_model"],
        "candidate_origin": overlay_doc["candidate_origin"],
        "candidate_overlay_digest": overlay_doc["digest"],
        "required_candidate_arms": overlay_doc["required_candidate_arms"],
        "selected_tasks": bindings_doc["tasks"],
        "target_base_digests": overlay_doc["target_base_digests"],
    }


def cut_short_pairs(look: str | None) -> dict[str, str] | None:
    """Candidate arm → reason, for the pairs the generation's last look cut short on a budget."""
    if look is None:
        return None
    look_doc = artifacts.read_artifact(Path(look), "look")
    return {pair["candidate_arm"]: pair["reason"] for pair in look_doc["pairs"] if pair["status"] == "cut_short"}


def grade(
    *,
    results: str,
    overlay_json: str,
    bindings: str,
    policy: GatePolicy,
    model: str,
    effort: str | None,
    out: str,
    generated_at: datetime | None = None,
    design: Any = None,
    look: str | None = None,
    generation: int | None = None,
    accept_flags: Sequence[str] = (),
) -> PromotionDocument:
    """Rows + policy → promotion.json (the gate rule, and `skillbench gate` offline).

    With a sequential ``design`` (the config's ``runs`` mapping) every pair replays its looks over
    the rows; ``look`` (the generation's last look document) names the pairs a budget cut short.
    ``generation`` (the share of alpha the tests spend) defaults to the overlay's own generation; ``accept_flags``
    (`evolution.accept_flags`) are the content-flag categories the user accepts in the candidate."""
    rows = artifacts.read_jsonl(Path(results), "result-row")
    overlay_doc = artifacts.read_artifact(Path(overlay_json), "overlay")
    bindings_doc = artifacts.read_artifact(Path(bindings), "task-bindings")
    document = grade_rows(
        cast("list[ResultRow]", rows),  # read_jsonl validated them against the result-row schema
        overlay=overlay_doc,
        bindings=bindings_doc,
        policy=policy,
        model=model,
        effort=effort,
        generated_at=generated_at or datetime.now(UTC),
        design=design,
        cut_short=cut_short_pairs(look),
        generation=overlay_doc["generation"] if generation is None else generation,
        accept_flags=accept_flags,
    )
    artifacts.write_artifact(Path(out), document, "promotion")
    return document


def grade_rows(
    rows: list[ResultRow],
    *,
    overlay: dict[str, Any],
    bindings: dict[str, Any],
    policy: GatePolicy,
    model: str,
    effort: str | None,
    generated_at: datetime,
    generation: int,
    design: Any = None,
    cut_short: dict[str, str] | None = None,
    accept_flags: Sequence[str] = (),
) -> PromotionDocument:
    """The promotion document of one generation's rows, its overlay record and task bindings: `grade` without the
    files (the analysis API's regrade calls it with rows it holds). The overlay record's content flags hold back a
    promotion unless ``accept_flags`` accepts their categories."""
    from skillbench.decision import gate

    overlay_doc, bindings_doc = overlay, bindings
    arms = [arm for pair in overlay_doc["pairs"] for arm in pair]
    run_design = gate.run_design(design if design is not None else 1)
    sequential = run_design["kind"] == "sequential"
    if sequential:
        # Pairs stop at different looks, so arms differ in runs; each pair's replay checks its own rows.
        status = "aborted" if any(row["error_kind"] == "cancelled" for row in rows) else "complete"
    else:
        status = run_status(rows, [task["id"] for task in bindings_doc["tasks"]], arms)
    return gate.promotion_document(
        rows,
        pairs=[tuple(pair) for pair in overlay_doc["pairs"]],
        policy=policy,
        binding=promotion_binding(model, effort, overlay_doc, bindings_doc),
        run_status=status,
        generated_at=generated_at,
        design=run_design if sequential else None,
        cut_short=cut_short,
        generation=generation,
        content_flags=(overlay_doc.get("content_review") or {}).get("flags"),
        accept_flags=accept_flags,
    )
