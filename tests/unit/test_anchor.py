"""The concurrent anchor: a generation's batch (its candidates' cells and fresh cells of their incumbent arms) starts
in one drawn order blocked by task, every row names its batch, and the gate compares a candidate only with what ran
beside it; the report shows the anchor's cost and how far it moved since the sweep; capped sessions are counted."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rowfactory import make_binding, make_row, write_cell_record
from skillbench.base import layout
from skillbench.base.artifacts import validate
from skillbench.decision.document import summarize_gate
from skillbench.decision.gate import promotion_document
from skillbench.decision.pairs import concurrent_rows
from skillbench.decision.policy import resolve_policy
from skillbench.experiment import schedule

INC, CAND = "workflow", "candidate_workflow"
TASKS = [f"t{index:02d}" for index in range(8)]


# ─── The batch's start order ────────────────────────────────────────────────


def test_a_batch_starts_its_cells_in_a_drawn_order_blocked_by_task():
    order = schedule.batch_order(seed="demo/gen1", tasks=TASKS, arms=[INC, CAND], runs=range(3))
    assert [cell["position"] for cell in order] == list(range(len(order)))
    assert Counter((cell["task"], cell["arm"], cell["run"]) for cell in order) == Counter(
        (task, arm, run) for task in TASKS for arm in (INC, CAND) for run in range(3)
    )
    # Rounds of runs: every task's run r before any run r+1, so a stopped batch leaves whole pairs.
    assert [cell["run"] for cell in order] == sorted(cell["run"] for cell in order)
    # A block is one run of one task, every arm of the batch, side by side.
    blocks: dict[int, list[dict]] = {}
    for cell in order:
        blocks.setdefault(cell["block"], []).append(cell)
    assert len(blocks) == 3 * len(TASKS)
    for cells in blocks.values():
        assert len({(cell["task"], cell["run"]) for cell in cells}) == 1
        assert sorted(cell["arm"] for cell in cells) == sorted([INC, CAND])
        positions = [cell["position"] for cell in cells]
        assert positions == list(range(positions[0], positions[0] + 2))
    # Drawn, not fixed: the tasks' order differs between rounds, and neither arm always starts its block.
    rounds = [[cell["task"] for cell in order if cell["run"] == run and cell["arm"] == INC] for run in range(3)]
    assert rounds[0] != rounds[1] or rounds[1] != rounds[2]
    firsts = {cells[0]["arm"] for cells in blocks.values()}
    assert firsts == {INC, CAND}


def test_the_order_is_fixed_by_its_seed_and_differs_between_batches():
    def draw(seed: str) -> list[tuple[str, str, int]]:
        return [
            (cell["task"], cell["arm"], cell["run"])
            for cell in schedule.batch_order(seed=seed, tasks=TASKS, arms=[INC, CAND], runs=range(2))
        ]

    assert draw(schedule.batch_seed("demo", 1, None)) == draw("demo/gen1")
    assert draw("demo/gen1") != draw("demo/gen2")
    assert schedule.batch_seed("demo", 0, 2) == "demo/gen0/look2"


def test_the_cells_priorities_follow_the_drawn_order():
    order = schedule.batch_order(seed="s", tasks=TASKS, arms=[INC, CAND], runs=range(2))
    priorities = schedule.start_priorities(order)
    values = [priorities[(cell["task"], cell["arm"], cell["run"])] for cell in order]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    assert all(0 < value < 1 for value in values)


def test_each_run_belongs_to_the_batch_of_its_look():
    looks = [2, 4, 5]
    assert [list(schedule.look_runs(looks, look)) for look in (1, 2, 3)] == [[0, 1], [2, 3], [4]]
    assert [schedule.look_of_run(looks, run) for run in range(5)] == [1, 1, 2, 2, 3]
    with pytest.raises(ValueError, match="past the design's last look"):
        schedule.look_of_run(looks, 5)


def test_a_later_look_records_the_continuing_pairs_cells_in_the_order_their_priorities_gave():
    pairs = [(INC, CAND), ("workflow_direct", "candidate_workflow_direct")]
    arms = [arm for pair in pairs for arm in pair]
    document = schedule.schedule_document(
        experiment="seq",
        generation=0,
        look=2,
        sequential=True,
        tasks=TASKS,
        pairs=pairs,
        running=[pairs[0]],
        runs=range(2, 4),
    )
    validate(document, "schedule")
    assert document["batch"] == "gen0/look2" and document["pairs"] == [[INC, CAND]]
    assert {cell["arm"] for cell in document["cells"]} == {INC, CAND}
    assert [cell["position"] for cell in document["cells"]] == list(range(len(TASKS) * 2 * 2))
    whole = schedule.batch_order(seed=document["seed"], tasks=TASKS, arms=arms, runs=range(2, 4))
    priorities = schedule.start_priorities(whole)
    kept = [priorities[(cell["task"], cell["arm"], cell["run"])] for cell in document["cells"]]
    assert kept == sorted(kept, reverse=True)
    # A fixed design's one batch is named after its generation.
    fixed = schedule.schedule_document(
        experiment="x", generation=3, look=1, sequential=False, tasks=TASKS, pairs=pairs, running=pairs, runs=range(2)
    )
    assert fixed["batch"] == "gen3" and fixed["seed"] == "x/gen3"


def _write_record(root: Path, cellset: str, row: dict, started: str) -> str:
    return write_cell_record(layout.cell_dir(root, cellset, row["task"], row["arm"], row["run"]), row, started)


def test_collected_rows_name_their_batch_block_position_and_start(tmp_path):
    from skillbench.steps.sweep import batch_rows

    root = tmp_path / "results" / "demo"
    document = schedule.schedule_document(
        experiment="demo",
        generation=1,
        look=1,
        sequential=False,
        tasks=["t00"],
        pairs=[(INC, CAND)],
        running=[(INC, CAND)],
        runs=range(2),
    )
    schedule_path = Path(layout.schedule(root, 1, 1))
    schedule_path.parent.mkdir(parents=True)
    schedule_path.write_text(json.dumps(document))
    records = [
        _write_record(root, "cells", make_row("t00", "baseline", 0, batch=None), "2026-01-01T09:00:00Z"),
        *(
            _write_record(root, "gen1/cells", make_row("t00", arm, run, batch=None), f"2026-01-02T10:00:0{run}Z")
            for arm in (INC, CAND)
            for run in range(2)
        ),
    ]
    rows = batch_rows(records, results_root=str(root), design=2, schedules=[str(schedule_path)])
    cached = next(row for row in rows if row["arm"] == "baseline")
    assert (cached["batch"], cached["block"], cached["position"]) == ("cache", None, None)
    assert cached["started_at"] == "2026-01-01T09:00:00Z"
    places = {(cell["arm"], cell["run"]): (cell["block"], cell["position"]) for cell in document["cells"]}
    for row in rows:
        validate(dict(row), "result-row")
        if row["arm"] != "baseline":
            assert row["batch"] == "gen1" and (row["block"], row["position"]) == places[(row["arm"], row["run"])]
            assert row["started_at"] == f"2026-01-02T10:00:0{row['run']}Z"
    # A cell its batch's schedule does not hold is named, not guessed at.
    stray = _write_record(root, "gen1/cells", make_row("t00", INC, 5, batch=None), "2026-01-02T10:00:00Z")
    with pytest.raises(ValueError, match="past the design's last look"):
        batch_rows([stray], results_root=str(root), design=2, schedules=[str(schedule_path)])


# ─── The gate compares what ran together ───────────────────────────────────


def _pair(batch, *, incumbent_cost, candidate_cost, runs=3, arm_batch=None):
    noise = random.Random(7)
    rows = []
    for task in TASKS:
        for run in range(runs):
            # Run-to-run noise (sd 5 %), drawn the same way for every call.
            jitter = (1 + noise.gauss(0, 0.05), 1 + noise.gauss(0, 0.05))
            rows.append(
                make_row(task, INC, run, cost_usd=round(incumbent_cost * jitter[0], 6), batch=arm_batch or batch)
            )
            rows.append(make_row(task, CAND, run, cost_usd=round(candidate_cost * jitter[1], 6), batch=batch))
    return rows


def _document(rows):
    document = promotion_document(
        rows,
        pairs=[(INC, CAND)],
        policy=resolve_policy({"quality_margin_pct": 100.0, "generation_spending": "none", "min_runs": 2}),
        binding=make_binding(),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return validate(document, "promotion")


def test_a_shift_between_the_cache_and_the_candidate_is_not_read_as_a_saving():
    # The cached incumbent ran when every session cost 25 % more (a prompt-cache miss, a price): the candidate is the
    # incumbent's equal, as its anchor, run beside it, shows.
    cache = [
        make_row(row["task"], INC, row["run"], cost_usd=row["cost_usd"] * 1.25, batch="cache")
        for row in _pair("gen1", incumbent_cost=1.0, candidate_cost=1.0)
        if row["arm"] == INC
    ]
    beside = _pair("gen1", incumbent_cost=1.0, candidate_cost=1.0)
    decision = _document(cache + beside)["decisions"][0]
    assert decision["decision"] != "promote"
    assert decision["concurrency"]["concurrent"] is True and decision["concurrency"]["batches"] == ["gen1"]
    assert decision["concurrency"]["left_out"] == {"incumbent": len(cache), "candidate": 0}
    # The same moment against cached cells alone, as rows that record no batch: it reads as a 20 % saving and
    # promotes, and the decision says its rows were not concurrent.
    legacy = [
        make_row(row["task"], row["arm"], row["run"], cost_usd=row["cost_usd"], batch=None)
        for row in cache + [row for row in beside if row["arm"] == CAND]
    ]
    document = _document(legacy)
    (old,) = document["decisions"]
    assert old["decision"] == "promote"
    assert old["concurrency"]["concurrent"] is False and old["concurrency"]["batches"] == []
    assert old["reasons"][-1].startswith("not concurrent: the rows record no batch")
    assert summarize_gate(document)[0].endswith(
        "(NOT CONCURRENT: the incumbent's rows did not run beside the candidate's)"
    )


def test_a_real_saving_beside_the_anchor_promotes_and_the_decision_names_its_batch_and_window():
    rows = _pair("gen2", incumbent_cost=1.0, candidate_cost=0.7)
    rows[0]["started_at"] = "2026-01-01T08:00:00Z"
    decision = _document(rows)["decisions"][0]
    assert decision["decision"] == "promote"
    assert decision["concurrency"]["window"] == ["2026-01-01T00:00:00Z", "2026-01-01T08:00:00Z"]
    assert "beside it (batch gen2)" in decision["concurrency"]["note"]
    assert not any(reason.startswith("not concurrent") for reason in decision["reasons"])


def test_a_candidate_with_no_incumbent_cell_beside_it_is_not_decided_on_other_batches():
    rows = _pair("gen1", incumbent_cost=1.5, candidate_cost=1.0, arm_batch="cache")
    decision = _document(rows)["decisions"][0]
    assert decision["decision"] == "insufficient_evidence"
    assert decision["concurrency"]["concurrent"] is False
    assert decision["concurrency"]["left_out"] == {"incumbent": len(rows) // 2, "candidate": len(rows) // 2}
    assert (
        "no incumbent cell ran beside the candidate (the candidate's batches: gen1; the incumbent's: cache)"
        in (decision["reasons"][-1])
    )


def test_a_sequential_pair_compares_every_look_batch_both_arms_ran_in():
    rows = [
        make_row("t", arm, run, batch="gen0/look1" if run < 2 else "gen0/look2")
        for arm in (INC, CAND)
        for run in range(3)
    ]
    rows.append(make_row("t", "baseline", 0, batch="cache"))
    kept, concurrency = concurrent_rows(rows, INC, CAND)
    assert kept == rows and concurrency["batches"] == ["gen0/look1", "gen0/look2"]
    # The same (task, arm, run) from two batches is not a duplicate; within one batch it is.
    _document(_pair("gen1", incumbent_cost=1.0, candidate_cost=1.0) + [make_row(TASKS[0], INC, 0, batch="cache")])
    with pytest.raises(ValueError, match="duplicate result rows"):
        _document(_pair("gen1", incumbent_cost=1.0, candidate_cost=1.0) + [make_row(TASKS[0], INC, 0, batch="gen1")])


# ─── The report: the anchor's cost, and how far it moved since the sweep ─────


def test_the_report_shows_what_the_anchor_cost_and_how_far_it_moved_since_the_sweep():
    rows = _pair("gen1", incumbent_cost=1.0, candidate_cost=0.7)
    sweep = [
        make_row(row["task"], INC, row["run"], cost_usd=round(row["cost_usd"] / 1.1, 6), batch="gen0")
        for row in rows
        if row["arm"] == INC
    ]
    lines = _report(rows, sweep).splitlines()
    spent = {arm: sum(row["cost_usd"] for row in rows if row["arm"] == arm) for arm in (INC, CAND)}
    assert (
        "- candidate_workflow ran beside its anchor, fresh cells of workflow (batch gen1): anchor 24 cells, "
        f"24 sessions, ${spent[INC]:.2f}; candidate 24 cells, 24 sessions, ${spent[CAND]:.2f}."
    ) in lines
    drift = lines.index("## Drift: the anchor against the incumbent's earlier cells")
    total = next(line for line in lines[drift:] if "all tasks" in line)
    assert total.startswith("| workflow | all tasks (sum of task means) | gen0 |") and "| +10.0 |" in total
    assert "| 24/24 | 24/24 |" in total
    # Generation 0's anchor is the sweep's cells: nothing earlier to compare with.
    zero = _pair("gen0", incumbent_cost=1.0, candidate_cost=0.7)
    text = _report(zero, [row for row in zero if row["arm"] == INC])
    assert "workflow: the sweep's cells are this generation's anchor" in text


def _report(rows: list[dict], earlier: list[dict]) -> str:
    from skillbench.reporting.report import render_report

    return render_report(
        rows,
        title="generation",
        task_order=TASKS,
        arm_order=[INC, CAND],
        provenance={},
        promotion=_document(rows),
        earlier=earlier,
    )


# ─── Sizes, budgets and a capped session ───────────────────────────────────


def test_the_run_plan_counts_each_generations_anchor_once():
    from skillbench.reporting import progress

    plan = progress.run_plan(
        experiment="x",
        task_ids=["a", "b"],
        arms=[INC, "baseline"],
        anchor_arms=[INC],
        candidate_arms=[CAND],
        runs=3,
        generations=2,
        session_cap=2,
        started_at="2026-01-01T00:00:00Z",
    )
    assert progress.incumbent_cell_count(plan) == 2 * 3  # the cache: baseline
    assert progress.candidate_cell_count(plan) == 2 * 3 * 2  # per generation: candidate and anchor
    planned = progress.planned_cells(plan, 2)
    assert planned((None, "a", "baseline", 0)) and not planned((None, "a", INC, 0))
    assert planned((1, "a", INC, 2)) and planned((1, "a", CAND, 2)) and not planned((2, "a", INC, 0))


def test_a_seed_inside_the_experiments_own_results_is_refused(tmp_path):
    from skillbench.preflight import check_seed_results

    config = {"experiment": "demo", "evolution": {"generations": 1, "seed_results": "results/demo/sweep"}}
    with pytest.raises(ValueError, match="generation 0's proposer must be fed from an earlier experiment"):
        check_seed_results(config)
    check_seed_results({**config, "evolution": {"generations": 1, "seed_results": "results/other/sweep"}})
    check_seed_results({**config, "evolution": {"generations": 0, "seed_results": "results/demo/sweep"}})


def test_a_capped_session_is_graded_on_what_it_left_and_counted():
    from skillbench.execution.cells import graded_as_finished

    capped = make_row(resolved=False, error_kind="session-cap-reached", ok=False, censored=True)
    assert graded_as_finished(capped)
    assert not graded_as_finished(make_row(resolved=False, error_kind="session-timeout", ok=False))
    assert graded_as_finished(make_row())
    from skillbench.decision.aggregate import is_valid

    assert is_valid(capped)


def test_the_summary_says_capped_cells_count_and_keeps_the_budget_advice_for_budget_cuts():
    from skillbench.reporting.report import render_summary

    summary = {
        "schema": "summary/v1",
        "experiment": "x",
        "generations_requested": 0,
        "generations": [],
        "outcome": "sweep",
        "promoted_generation": None,
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 2,
        "capped_cells": 3,
        "next_step": None,
    }
    validate(summary, "summary")
    text = render_summary(summary)
    assert "**Session cap reached:** 3 cell(s) had a session stopped at `budget.max_session_usd`" in text
    assert "running them again" in text and "not gaps" in text
    assert "2 cell(s) were cut short (rows `budget-exhausted`, excluded)" in text


def test_check_states_what_each_generations_anchor_costs(monkeypatch):
    from skillbench.cli import DEFAULT_CONFIG, _anchor_text
    from skillbench.experiment import configcheck

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    config = configcheck.load_config(DEFAULT_CONFIG)
    tasks = [{"id": task} for task in ("money-thousands", "bulk-discount-threshold", "sku-normalization")]
    # 3 tasks × 16 runs of workflow's two sessions, beside the candidate's as many.
    assert _anchor_text(config, tasks) == (
        "; each generation's candidates (96 sessions at most) run beside an anchor of 96 sessions of workflow "
        "(generation 0's is the sweep's)"
    )
    assert _anchor_text({**config, "evolution": {**config["evolution"], "generations": 0}}, tasks) == ""
