"""Steps of a generation's batch and the gate's checkpoints: the batch's start order, an interim look of a
sequential design, and promotion.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts, layout
from skillbench.base.records import Decision, PromotionDocument
from skillbench.decision import gate, promotion
from skillbench.experiment.schedule import schedule_document
from skillbench.reporting.progress import BatchBudget
from skillbench.steps.sweep import batch_rows


def schedule_batch(
    *,
    experiment: str,
    generation: int,
    look: int,
    sequential: bool,
    tasks: list[str],
    pairs: list[tuple[str, str]],
    runs: list[int],
    previous_look: str | None,
    out: str,
) -> None:
    """The start order of generation ``generation``'s batch before look ``look`` → schedule/look<k>.json: every
    pair's cells at the first look, the pairs the previous look let continue at a later one."""
    running = pairs
    if previous_look is not None:
        document = artifacts.read_artifact(Path(previous_look), "look")
        going_on = {
            (pair["incumbent_arm"], pair["candidate_arm"]) for pair in document["pairs"] if pair["status"] == "continue"
        }
        running = [pair for pair in pairs if pair in going_on]
    schedule = schedule_document(
        experiment=experiment,
        generation=generation,
        look=look,
        sequential=sequential,
        tasks=tasks,
        pairs=pairs,
        running=running,
        runs=runs,
    )
    artifacts.write_artifact(Path(out), schedule, "schedule")
    print(
        f"{schedule['batch']}: {len(schedule['cells'])} cells of {len(running)} pair(s) (candidate and anchor), "
        f"blocked by task, seed {schedule['seed']!r}"
    )


def gate_look(
    *,
    arm_sessions: dict[str, int],
    records: list[str],
    schedules: list[str],
    pairs: list[tuple[str, str]],
    policy: dict[str, Any],
    design: Any,
    budget: dict[str, Any],
    model: str,
    generation: int,
    look: int,
    results_root: str,
    out: str,
) -> dict[str, Any]:
    """One interim look: replay every pair's looks over its rows so far; a pair that continues gets its next
    batch unless that batch's sessions (or projected cost) would pass a budget cap, then it is cut short.

    The next batch's price: each missing cell costs its arm's sessions (`arm_sessions`), and the mean recorded
    cost per finished cell so far. Pairs are admitted in config order, so the first pairs keep their batches."""
    run_design = gate.run_design(design)
    rows = batch_rows(records, results_root=results_root, design=design, schedules=schedules)
    planner = BatchBudget.from_disk(results_root, arm_sessions, budget, present=cast(list[dict[str, Any]], rows))
    entries = []
    for incumbent, candidate in pairs:
        # The candidate against the anchor that ran beside it, as the promotion gate compares them.
        pair_rows, _ = gate.concurrent_rows(rows, incumbent, candidate)
        decision = gate.sequential_decision(
            pair_rows,
            incumbent_arm=incumbent,
            candidate_arm=candidate,
            model=model,
            policy=gate.resolve_policy(policy),
            design=run_design,
            generation=generation,
        )
        entries.append(_look_entry(decision, incumbent, candidate, run_design, planner))
    document = {
        "schema": "look/v1",
        "generation": generation,
        "look": look,
        "looks_planned": run_design["looks"],
        "pairs": entries,
        "spend": planner.spend,
        "budget": {"max_sessions": budget.get("max_sessions"), "max_usd": budget.get("max_usd")},
    }
    artifacts.write_artifact(Path(out), document, "look")
    for entry in entries:
        print(
            f"{layout.generation_name(generation)} look {look}: {entry['candidate_arm']} {entry['status']} after "
            f"{entry['runs']} runs ({entry['decision']}): {entry['reason']}"
        )
    return document


def _look_entry(
    decision: Decision, incumbent: str, candidate: str, run_design: dict[str, Any], planner: BatchBudget
) -> dict[str, Any]:
    """A pair's entry of the look document: its status, and the next batch if the budget admits it."""
    looks = decision["looks"]
    runs = looks[-1]["runs"] if looks else run_design["looks"][0]
    status, next_runs = decision["sequential"]["status"], decision["sequential"]["next_runs"]
    reason = looks[-1]["reason"] if looks else decision["reasons"][0]
    if status == "continue":
        over = planner.admit((incumbent, candidate), runs, next_runs)
        if over:
            status, next_runs = "cut_short", None
            reason = (
                f"cut short at look {len(looks)} after {runs} runs per (task, arm): the next batch would "
                f"pass {' and '.join(over)}"
            )
    return {
        "incumbent_arm": incumbent,
        "candidate_arm": candidate,
        "status": status,
        "decision": looks[-1]["decision"] if looks else "continue",
        "runs": runs,
        "next_runs": next_runs,
        "reason": reason,
    }


def gate_promotion(
    *,
    results: str,
    overlay_json: str,
    bindings: str,
    policy: dict[str, Any],
    model: str,
    effort: str | None,
    design: Any,
    look: str | None,
    out: str,
    accept_flags: list[str],
) -> PromotionDocument:
    """The generation's rows + the gate policy → promotion.json (the same grading `skillbench gate` runs offline);
    `accept_flags` (evolution.accept_flags) are the content-flag categories the user accepts in the candidate."""
    return promotion.grade(
        results=results,
        overlay_json=overlay_json,
        bindings=bindings,
        policy=gate.resolve_policy(policy),
        model=model,
        effort=effort,
        out=out,
        design=design,
        look=look,
        accept_flags=accept_flags,
    )
