"""Sequential designs: alpha-spending boundaries, the looks' decisions, and their record in promotion.json."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from rowfactory import MODEL, make_binding, make_row, write_cell_record
from skillbench.base.artifacts import validate
from skillbench.decision import stats
from skillbench.decision.gate import promotion_document, resolve_policy, run_design, sequential_decision

INC, CAND = "workflow", "candidate_workflow"
GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DESIGN = run_design({"min": 2, "max": 6, "step": 2})


TASKS = tuple(f"t{index:02d}" for index in range(12))


def pair_rows(runs: int, *, tasks=TASKS, saving=0.0, seed=1, sigma=0.1, candidate_resolves=None, first_run=0) -> list:
    """Rows of both arms for ``runs`` runs per (task, arm): lognormal costs, the candidate ``saving`` cheaper."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, sigma, size=(len(tasks), 10, 2))  # drawn for 10 runs, so fewer runs are a prefix
    rows = []
    for index, task in enumerate(tasks):
        for run in range(runs):
            for side, (arm, factor) in enumerate(((INC, 1.0), (CAND, 1.0 - saving))):
                resolved = True
                if arm == CAND and candidate_resolves is not None:
                    resolved = candidate_resolves[run % len(candidate_resolves)]
                cost = float((1 + index % 4) * factor * math.exp(noise[index, run, side]))
                rows.append(make_row(task, arm, first_run + run, resolved=resolved, cost_usd=cost))
    return rows


def decide(rows, design=DESIGN, **policy):
    return sequential_decision(
        rows, incumbent_arm=INC, candidate_arm=CAND, model=MODEL, policy=resolve_policy(policy), design=design
    )


# ─── Design ─────────────────────────────────────────────────────────────────


def test_plain_integer_runs_is_the_fixed_design():
    assert run_design(5) == {"kind": "fixed", "looks": [5], "max": 5}


def test_sequential_design_lists_its_looks_and_ends_at_max():
    design = run_design({"min": 2, "max": 9, "step": 3})
    assert design["looks"] == [2, 5, 8, 9]
    assert design["kind"] == "sequential" and design["spending"] == "pocock"


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ({"min": 1, "max": 4, "step": 1}, "runs.min must be at least 2"),
        ({"min": 4, "max": 2, "step": 1}, "runs.max (2) must be at least runs.min (4)"),
        ({"min": 2, "max": 4}, "runs.step must be an integer >= 1"),
        ({"min": 2, "max": 4, "step": 1, "spending": "haybittle"}, "runs.spending must be one of"),
        ({"min": 2, "max": 4, "step": 1, "look": 3}, "unknown key(s) look"),
    ],
)
def test_bad_sequential_design_names_the_field(runs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_design(runs)


# ─── Boundaries ─────────────────────────────────────────────────────────────


def test_a_single_look_spends_all_alpha_at_the_usual_critical_value():
    (look,) = stats.sequential_boundaries([1.0], alpha=0.05, spending="pocock")
    assert look["z"] == pytest.approx(1.6449, abs=1e-3)
    assert look["nominal_alpha"] == pytest.approx(0.05, abs=1e-6)


@pytest.mark.parametrize("spending", ["pocock", "obrien_fleming"])
def test_boundaries_hold_the_overall_false_promotion_rate(spending):
    """Brownian motion under H0, looked at five times: crossing any boundary happens alpha of the time."""
    fractions = [0.2, 0.4, 0.6, 0.8, 1.0]
    bounds = [look["z"] for look in stats.sequential_boundaries(fractions, alpha=0.05, spending=spending)]
    rng = np.random.default_rng(20261201)
    increments = rng.normal(size=(200_000, 5)) * np.sqrt(np.diff([0.0, *fractions]))
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    crossed = (z >= np.array(bounds)).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)
    # Naive repeated testing at 0.05 would be far above alpha.
    assert (z >= 1.6449).any(axis=1).mean() > 0.1


def test_obrien_fleming_keeps_alpha_for_the_last_look_and_pocock_spreads_it():
    fractions = [0.25, 0.5, 0.75, 1.0]
    obf = stats.sequential_boundaries(fractions, alpha=0.05, spending="obrien_fleming")
    pocock = stats.sequential_boundaries(fractions, alpha=0.05, spending="pocock")
    assert obf[0]["z"] > 3.5 > pocock[0]["z"]
    assert obf[-1]["nominal_alpha"] > pocock[-1]["nominal_alpha"]
    assert sum(stats.spent_increments(fractions, alpha=0.05, spending="pocock")) == pytest.approx(0.05)


def test_conditional_power_follows_the_trend():
    assert stats.conditional_power(0.2, 0.05, runs=2, max_runs=10, threshold=0.1) > 0.9
    assert stats.conditional_power(0.0, 0.05, runs=2, max_runs=10, threshold=0.1) < 0.01


# ─── Looks ──────────────────────────────────────────────────────────────────


def test_a_clear_saving_is_promoted_at_the_first_look():
    tasks = tuple(f"t{index:02d}" for index in range(30))  # 60 resolved runs per arm show the 10-point margin
    decision = decide(pair_rows(2, saving=0.4, sigma=0.02, tasks=tasks))
    assert decision["decision"] == "promote"
    assert [look["decision"] for look in decision["looks"]] == ["promote"]
    look = decision["looks"][0]
    assert look["runs"] == 2 and look["p_value"] <= look["nominal_alpha"] < 0.05
    assert decision["sequential"]["status"] == "decided"
    assert decision["reasons"][0].startswith("sequential design: decided at look 1 of 3")


def test_a_costlier_candidate_stops_for_futility_at_the_first_look():
    rows = pair_rows(6, saving=-0.05, sigma=0.05, seed=3)
    decision = decide(rows)
    assert decision["decision"] == "keep_incumbent"
    assert len(decision["looks"]) == 1 and decision["looks"][0]["decision"] == "keep_incumbent"
    assert decision["tests"]["cost"]["conclusion"] == "not_cheaper"
    assert any(reason.endswith("the interval rules out a saving of 5.0% or more") for reason in decision["reasons"])


def test_a_pair_that_needs_more_runs_says_continue_and_how_many():
    rows = pair_rows(2, saving=0.15, sigma=0.15, seed=5)
    decision = decide(rows)
    assert [look["decision"] for look in decision["looks"]] == ["continue"]
    assert decision["sequential"] == {**decision["sequential"], "status": "continue", "next_runs": 4}
    assert decision["decision"] == "insufficient_evidence"
    # With the next batch present, the replay takes the second look.
    more = decide(pair_rows(4, saving=0.15, sigma=0.15, seed=5))
    assert more["looks"][0] == decision["looks"][0]
    assert len(more["looks"]) >= 2 or more["sequential"]["status"] == "decided"


def test_runs_beyond_the_deciding_look_do_not_change_the_decision():
    """The looks are a replay over runs in order, so an offline regrade of stored rows gets the same looks."""
    decided = decide(pair_rows(6, saving=0.15, sigma=0.15, seed=5))
    assert decided["sequential"]["status"] == "decided"
    used = decided["looks"][-1]["runs"]
    again = decide([row for row in pair_rows(6, saving=0.15, sigma=0.15, seed=5) if row["run"] < used])
    assert again["looks"] == decided["looks"] and again["decision"] == decided["decision"]


def test_a_credibly_worse_resolution_keeps_the_incumbent_early():
    rows = pair_rows(
        2, saving=0.3, sigma=0.02, tasks=("t1", "t2", "t3", "t4", "t5", "t6"), candidate_resolves=(False, False)
    )
    decision = decide(rows)
    assert decision["decision"] == "keep_incumbent"
    assert len(decision["looks"]) == 1


def test_sequential_looks_need_the_noise_aware_rule():
    with pytest.raises(ValueError, match="noise_aware"):
        decide(pair_rows(2), rule="upstream")


def test_promotion_document_records_the_looks_and_validates():
    rows = pair_rows(2, saving=0.15, sigma=0.15, seed=5)
    binding = make_binding(
        [CAND],
        selected_tasks=[{"id": "t1", "oracle_digest": "7" * 64}],
        target_base_digests={".claude/skills/plan/SKILL.md": "a" * 64},
    )
    doc = promotion_document(
        rows,
        pairs=[(INC, CAND)],
        policy=resolve_policy(None),
        binding=binding,
        run_status="complete",
        generated_at=GENERATED_AT,
        design=DESIGN,
        cut_short={CAND: "budget.max_sessions reached"},
    )
    validate(doc, "promotion")
    (decision,) = doc["decisions"]
    assert decision["sequential"]["cut_short"] is True
    assert decision["reasons"][0] == "cut short: budget.max_sessions reached"
    assert decision["decision"] == "insufficient_evidence"


# ─── Budget and planning ────────────────────────────────────────────────────


def _config(**overrides):
    from skillbench.evolution.apply import load_config

    config = load_config(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    config.update(overrides)
    return config


def test_a_session_cap_below_the_first_batch_is_a_config_error():
    from skillbench.reporting.progress import check_budget

    config = _config(budget={"max_sessions": 10, "max_usd": None})
    with pytest.raises(ValueError, match=r"budget.max_sessions: 10 is below the first batch's 24 agent sessions"):
        check_budget(
            config,
            ["t1", "t2"],
            ["workflow", "workflow_direct"],
            ["candidate_workflow", "candidate_workflow_direct"],
            2,
        )
    check_budget(
        {**config, "budget": {"max_sessions": 24, "max_usd": None}},
        ["t1", "t2"],
        ["workflow", "workflow_direct"],
        ["candidate_workflow", "candidate_workflow_direct"],
        2,
    )


def test_planned_work_of_a_sequential_design_counts_up_to_max():
    from skillbench.reporting.progress import planned_work

    work = planned_work(_config(runs={"min": 2, "max": 6, "step": 2}), ["t1"])
    assert work["runs"] == 6


def _write_records(root: Path, rows: list[dict]) -> list[str]:
    """Cell records of generation 0's first batch (the candidate's and its anchor's, in gen0/cells)."""
    return [
        write_cell_record(root / "gen0" / "cells" / row["task"] / row["arm"] / f"run{row['run']}", row) for row in rows
    ]


@pytest.mark.parametrize(
    ("budget", "status"),
    [
        ({"max_sessions": None, "max_usd": None}, "continue"),
        # 48 finished cells (about $110); the next batch is 48 more cells at the mean recorded cost per cell.
        ({"max_sessions": None, "max_usd": 150.0}, "cut_short"),
        ({"max_sessions": None, "max_usd": 300.0}, "continue"),
        ({"max_sessions": 192, "max_usd": None}, "continue"),
        ({"max_sessions": 191, "max_usd": None}, "cut_short"),
    ],
)
def test_a_look_starts_the_next_batch_only_within_the_budget(tmp_path, budget, status):
    from skillbench.experiment.arms import session_counts
    from skillbench.experiment.schedule import schedule_document
    from skillbench.steps.gate import gate_look

    rows = pair_rows(2, saving=0.15, sigma=0.15, seed=5)
    paths = _write_records(tmp_path, rows)
    out = tmp_path / "gen0" / "looks" / "look1.json"
    schedule = tmp_path / "gen0" / "schedule" / "look1.json"
    schedule.parent.mkdir(parents=True)
    tasks = sorted({row["task"] for row in rows})
    layout_of_batch = schedule_document(
        experiment="seq",
        generation=0,
        look=1,
        sequential=True,
        tasks=tasks,
        pairs=[(INC, CAND)],
        running=[(INC, CAND)],
        runs=range(2),
    )
    schedule.write_text(json.dumps(layout_of_batch))
    document = gate_look(
        arm_sessions=session_counts(_config()),
        records=paths,
        schedules=[str(schedule)],
        pairs=[(INC, CAND)],
        policy={},
        design={"min": 2, "max": 6, "step": 2},
        budget=budget,
        model=MODEL,
        generation=0,
        look=1,
        results_root=str(tmp_path),
        out=str(out),
    )
    (pair,) = document["pairs"]
    assert pair["status"] == status
    # Both arms have two sessions per cell: 48 cells are 96 sessions, and the next batch adds 96.
    assert document["spend"]["sessions"] == 96
    if status == "continue":
        assert pair["next_runs"] == 4
    else:
        assert pair["next_runs"] is None and pair["reason"].startswith("cut short at look 1 after 2 runs")
    validate(json.loads(out.read_text()), "look")


def test_a_look_over_cells_from_two_cli_versions_refuses_to_decide():
    """The same rows as the first-look promotion above, but the candidate's cells ran a newer CLI."""
    rows = [
        {**row, "cli_version": "2.1.328" if row["arm"] == CAND else "2.1.197"}
        for row in pair_rows(2, saving=0.4, sigma=0.02)
    ]
    decision = decide(rows)
    assert decision["decision"] == "insufficient_evidence"
    assert [look["decision"] for look in decision["looks"]] == ["insufficient_evidence"]
    assert any(
        reason.startswith("rows are not comparable: the incumbent's cells (workflow) ran CLI version 2.1.197")
        and "(candidate_workflow) ran CLI version 2.1.328" in reason
        for reason in decision["reasons"]
    )


def test_a_look_that_would_promote_while_a_tasks_resolution_fell_takes_more_runs_first():
    tasks = tuple(f"t{index:02d}" for index in range(60))
    rows = pair_rows(2, saving=0.4, sigma=0.02, tasks=tasks)
    assert decide(rows)["decision"] == "promote"
    failed = next(row for row in rows if (row["task"], row["arm"], row["run"]) == ("t07", CAND, 1))
    failed.update(resolved=False, oracle_passed=False, error_kind="oracle-failed")
    # Where no other run ever fails, that one failure is already a credible drop (the per-task check keeps the
    # incumbent at once); where the incumbent fails now and then too, it is not yet, and the look asks for more runs.
    assert decide(rows)["decision"] == "keep_incumbent"
    for index in range(20, 30):
        flaky = next(row for row in rows if (row["task"], row["arm"], row["run"]) == (f"t{index:02d}", INC, 0))
        flaky.update(resolved=False, oracle_passed=False, error_kind="oracle-failed")
    decision = decide(rows)
    assert [look["decision"] for look in decision["looks"]] == ["continue"]
    assert decision["looks"][0]["reason"] == "resolution fell on t07: more runs before a promotion"
    assert decision["sequential"]["next_runs"] == 4


def test_looks_take_each_cells_first_runs_whatever_number_they_start_from():
    from_zero = decide(pair_rows(4, saving=0.15, sigma=0.15, seed=5))
    from_one = decide(pair_rows(4, saving=0.15, sigma=0.15, seed=5, first_run=1))
    assert [(look["runs"], look["decision"]) for look in from_one["looks"]] == [
        (look["runs"], look["decision"]) for look in from_zero["looks"]
    ]
    assert from_one["decision"] == from_zero["decision"]
