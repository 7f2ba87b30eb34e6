"""What each figure shows, for hand-made rows and documents (the data behind the plots, not pixels)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rowfactory import make_binding, make_row
from skillbench.base.artifacts import validate
from skillbench.decision.gate import promotion_document, resolve_policy
from skillbench.reporting import figures
from skillbench.reporting.pages import render_page


def test_cost_resolution_shows_every_run_the_median_and_the_cost_per_resolved_run():
    rows = [
        make_row("beta", "workflow", 0, cost_usd=0.4),
        make_row("alpha", "baseline", 0, cost_usd=1.0),
        make_row("alpha", "workflow", 0, cost_usd=0.5),
        make_row("alpha", "workflow", 1, resolved=False, cost_usd=0.1),
        make_row("alpha", "workflow", 2, cost_usd=0.6),
        make_row("alpha", "workflow", 3, resolved=False, error_kind="infra-error", cost_usd=None),
        make_row("alpha", "baseline", 1, resolved=False, cost_usd=0.2),
    ]
    facets = figures.cost_resolution_data(rows, task_order=["alpha", "beta"], arm_order=["workflow", "baseline"])
    assert [facet["task"] for facet in facets] == ["alpha", "beta"]
    workflow, baseline = facets[0]["arms"]
    assert workflow["arm"] == "workflow" and baseline["arm"] == "baseline"
    assert [(r["run"], r["cost_usd"], r["resolved"], r["excluded"]) for r in workflow["runs"]] == [
        (0, 0.5, True, False),
        (1, 0.1, False, False),
        (2, 0.6, True, False),
        (3, None, False, True),
    ]
    assert workflow["median_cost_usd"] == 0.5  # over the three valid runs; the excluded run does not count
    assert (workflow["resolved"], workflow["valid_runs"]) == (2, 3)
    assert workflow["cost_per_resolved_usd"] == pytest.approx(1.2 / 2)
    assert baseline["median_cost_usd"] == pytest.approx(0.6)
    assert baseline["cost_per_resolved_usd"] == pytest.approx(1.2)
    assert [arm["arm"] for arm in facets[1]["arms"]] == ["workflow"]


def test_cost_resolution_without_a_resolved_run_or_a_measured_cost_has_no_price():
    rows = [
        make_row("alpha", "workflow", 0, resolved=False, cost_usd=0.3),
        make_row("alpha", "baseline", 0, cost_usd=None),
    ]
    workflow, baseline = figures.cost_resolution_data(rows, ["alpha"], ["workflow", "baseline"])[0]["arms"]
    assert workflow["cost_per_resolved_usd"] is None and workflow["median_cost_usd"] == 0.3
    assert baseline["cost_per_resolved_usd"] is None and baseline["median_cost_usd"] is None


def _promotion(candidate_costs: dict[str, list[float]], rule: str = "noise_aware") -> dict:
    rows = []
    for task, costs in candidate_costs.items():
        for run, cost in enumerate(costs):
            rows.append(make_row(task, "workflow", run, cost_usd=[1.0, 1.1, 0.92][run % 3]))
            rows.append(make_row(task, "candidate_workflow", run, cost_usd=cost))
    document = promotion_document(
        rows,
        pairs=[("workflow", "candidate_workflow")],
        policy=resolve_policy({"rule": rule}),
        binding=make_binding(selected_tasks=[{"id": task} for task in candidate_costs]),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return validate(document, "promotion")


def _suite(saving: float, tasks: int = 12) -> dict[str, list[float]]:
    return {f"t{i:02d}": [round((1 - saving) * f * (1 + 0.01 * i), 4) for f in (0.95, 1.12, 0.9)] for i in range(tasks)}


def test_forest_plot_draws_the_test_the_noise_aware_gate_decided_on():
    promotion = _promotion({**_suite(0.2), "alpha": [0.8, 0.9, 0.7], "beta": [1.1, 1.2, 1.0]})
    data = figures.forest_data(promotion, "candidate_workflow")
    assert (data["candidate_arm"], data["incumbent_arm"], data["metric"]) == (
        "candidate_workflow",
        "workflow",
        "cost_usd",
    )
    decision = promotion["decisions"][0]
    by_task = {task["task"]: task for task in data["tasks"]}
    checks = {row["task"]: row["checks"] for row in decision["tasks"]}
    # Each task: its own saving on the objective's scale (means per run) and the interval of its own runs.
    assert by_task["alpha"]["improvement_pct"] == checks["alpha"]["saving_pct"] == round(100 * (1 - 2.4 / 3.02), 1)
    assert by_task["beta"]["improvement_pct"] == round(100 * (1 - 3.3 / 3.02), 1)
    low, high = by_task["alpha"]["interval"]
    assert low < by_task["alpha"]["improvement_pct"] < high
    assert by_task["alpha"]["label"].startswith("alpha  (3/3 → 3/3 resolved)")
    # The pooled row is the cost test's estimate and its 1 - 2 alpha interval, not a median.
    cost = decision["tests"]["cost"]
    assert data["pooled"] == {
        "improvement_pct": cost["estimate_pct"],
        "interval": (cost["ci_low_pct"], cost["ci_high_pct"]),
        "label": "total spend",
    }
    assert data["confidence"] == cost["confidence"]
    assert data["threshold_pct"] == promotion["policy"]["min_improvement_pct"]
    assert data["regression_limit_pct"] == -promotion["policy"]["max_task_regression_pct"]
    assert data["decision"] == decision["decision"]


def test_forest_plot_of_the_upstream_rule_draws_its_median_and_bootstrap():
    promotion = _promotion({"alpha": [0.8, 0.9, 0.7], "beta": [1.1, 1.2, 1.0]}, rule="upstream")
    data = figures.forest_data(promotion, "candidate_workflow")
    decision = promotion["decisions"][0]
    boot = decision["statistics"]["bootstrap"]
    assert data["pooled"] == {
        "improvement_pct": decision["median_improvement_pct"],
        "interval": (boot["ci_low_pct"], boot["ci_high_pct"]),
        "label": "median over gated tasks",
    }
    by_task = {task["task"]: task for task in data["tasks"]}
    assert by_task["alpha"]["improvement_pct"] == decision["tasks"][0]["improvement_pct"]
    low, high = by_task["alpha"]["interval"]
    assert 0.0 <= low <= by_task["alpha"]["improvement_pct"] <= high <= 30.0


def test_forest_plot_prefers_an_interval_the_gate_stored():
    promotion = _promotion({"alpha": [0.8, 0.9, 0.7]}, rule="upstream")
    task = promotion["decisions"][0]["tasks"][0]
    task.update({"ci_low_pct": 3.5, "ci_high_pct": 33.0, "p_value": 0.25})
    assert figures.forest_data(promotion, "candidate_workflow")["tasks"][0]["interval"] == (3.5, 33.0)
    task["paired"] = None
    del task["ci_low_pct"], task["ci_high_pct"]
    assert figures.forest_data(promotion, "candidate_workflow")["tasks"][0]["interval"] is None
    with pytest.raises(ValueError, match="no decision for candidate_other"):
        figures.forest_data(promotion, "candidate_other")


def test_paired_interval_needs_two_measured_pairs_and_is_reproducible():
    assert figures.paired_interval([1.0, None], [0.5, 0.4], confidence=0.9) is None
    first = figures.paired_interval([1.0, 1.0, 1.0, 1.0], [0.5, 0.9, 0.7, 0.8], confidence=0.9, seed=3)
    assert first == figures.paired_interval([1.0, 1.0, 1.0, 1.0], [0.5, 0.9, 0.7, 0.8], confidence=0.9, seed=3)
    assert 10.0 <= first[0] <= first[1] <= 50.0
    assert figures.paired_interval([2.0, 2.0], [1.0, 1.0], confidence=0.9) == (50.0, 50.0)


def test_generation_chain_shows_each_decision_and_the_estimate_it_was_made_on():
    keep = _promotion(_suite(0.0))
    promote = _promotion(_suite(0.2))
    summary = {
        "experiment": "exp",
        "outcome": "promoted",
        "generations": [
            {
                "generation": gen,
                "candidate_overlay_digest": digest * 64,
                "candidate_origin": "model-proposer",
                "promoted": gen == 1,
                "decisions": [
                    {
                        "candidate_arm": "candidate_workflow",
                        "incumbent_arm": "workflow",
                        "decision": doc["decisions"][0]["decision"],
                        "median_improvement_pct": doc["decisions"][0]["median_improvement_pct"],
                    }
                ],
            }
            for gen, digest, doc in ((0, "a", keep), (1, "b", promote))
        ],
    }
    data = figures.generation_chain_data(summary, [keep, promote])
    assert [(g["generation"], g["digest"], g["promoted"]) for g in data["generations"]] == [
        (0, "aaaaaaaa", False),
        (1, "bbbbbbbb", True),
    ]
    costs = [doc["decisions"][0]["tests"]["cost"] for doc in (keep, promote)]
    assert [(p["generation"], p["decision"], p["improvement_pct"], p["label"]) for p in data["points"]] == [
        (0, "keep_incumbent", costs[0]["estimate_pct"], "total spend"),
        (1, "promote", costs[1]["estimate_pct"], "total spend"),
    ]
    assert data["points"][1]["interval"] == (costs[1]["ci_low_pct"], costs[1]["ci_high_pct"])
    assert data["threshold_pct"] == promote["policy"]["min_improvement_pct"]
    assert data["outcome"] == "promoted"


def test_spend_by_role_counts_unmeasured_costs_apart():
    sessions = [
        {"role": "plan", "cost_usd": 0.1, "num_turns": 4},
        {"role": "work", "cost_usd": 0.3, "num_turns": 9},
        {"role": "plan", "cost_usd": None, "num_turns": None},
        {"role": figures.session_role("candidate_workflow", "plan"), "cost_usd": 0.05, "num_turns": 3},
        {"role": "plan", "cost_usd": 0.2, "num_turns": 6},
    ]
    roles = {role["role"]: role for role in figures.spend_data(sessions)}
    assert list(roles) == ["plan", "work", "plan (candidate)"]
    assert roles["plan"]["sessions"] == 3 and roles["plan"]["unmeasured"] == 1
    assert roles["plan"]["cost_usd"] == pytest.approx(0.3)
    assert roles["plan"]["turns"] == [4, 6]
    assert roles["plan (candidate)"]["cost_usd"] == 0.05


def test_the_spend_figure_takes_each_sessions_cost_and_requests_from_the_cells_ledger(tmp_path):
    from rowfactory import make_row
    from skillbench.base import artifacts
    from skillbench.execution.gateway import ledger_totals
    from skillbench.steps import report as report_steps

    def entry(seq, kind, cost):
        usage = dict.fromkeys(
            ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"], 10
        )
        usage.update(cache_creation_5m_input_tokens=None, cache_creation_1h_input_tokens=None)
        return {
            "seq": seq, "method": "POST", "path": "/v1/messages", "kind": kind, "model": "m", "served_model": "m",
            "stream": True, "status": 200, "outcome": "ok", "refused": None, "failure": None, "request_id": None,
            "started_at": "2026-12-01T00:00:00.000Z", "finished_at": "2026-12-01T00:00:01.000Z", "duration_s": 1.0,
            "usage": usage, "cost_usd": cost,
        }  # fmt: skip

    def session(role, cost, kinds):
        requests = [entry(seq, kind, cost) for seq, kind in enumerate(kinds, start=1)]
        return {
            "role": role, "label": role, "open": False, "opened_at": None, "closed_at": None, "max_usd": None,
            "requests": requests, "totals": {**ledger_totals(requests), "cost_usd": None if cost is None else 0.25},
        }  # fmt: skip

    record = {"schema": "cell-record/v1", "row": make_row("t", "workflow", 0), "attempt": 1, "timing": {}}
    folder = tmp_path / "run0"
    folder.mkdir()
    ledger = {"sessions": [session("plan", 0.125, ["messages", "count_tokens", "messages"]), session("work", None, [])]}
    (folder / "ledger.json").write_text(artifacts.canonical_json({"schema": "ledger/v1", **ledger}))
    found = report_steps._record_sessions(folder / "record.json", record)
    assert found == [
        {"role": "plan", "cost_usd": 0.25, "num_turns": 2},
        {"role": "work", "cost_usd": None, "num_turns": 0},
    ]
    (folder / "ledger.json").unlink()
    assert report_steps._record_sessions(folder / "record.json", record) == []


def test_timeline_puts_overlapping_cells_on_different_slots():
    def cell(label, start, end):
        return {
            "label": label,
            "arm": "workflow",
            "started_at": f"2026-01-01T00:00:{start:02d}Z",
            "finished_at": f"2026-01-01T00:00:{end:02d}Z",
            "sessions": [
                {
                    "role": "work",
                    "started_at": f"2026-01-01T00:00:{start + 1:02d}.5Z",
                    "finished_at": f"2026-01-01T00:00:{end - 1:02d}Z",
                }
            ],
        }

    data = figures.timeline_data([cell("c", 12, 20), cell("a", 0, 10), cell("b", 2, 12), cell("d", 13, 14)])
    assert data["origin"] == "2026-01-01T00:00:00Z"
    placed = {c["label"]: c for c in data["cells"]}
    assert [placed[label]["slot"] for label in "abcd"] == [0, 1, 0, 1]  # c reuses a's slot, d reuses b's
    assert data["slots"] == 2
    assert (placed["b"]["start_s"], placed["b"]["end_s"]) == (2.0, 12.0)
    assert placed["b"]["sessions"] == [{"role": "work", "start_s": 3.5, "end_s": 11.0}]
    assert figures.timeline_data([]) == {"origin": None, "slots": 0, "cells": []}


def test_figures_render_to_deterministic_svg():
    facets = figures.cost_resolution_data([make_row("alpha", "workflow", 0)], ["alpha"], ["workflow"])
    colours = figures.arm_colours(["workflow"])
    first = figures.plot_cost_resolution(facets, title="t", colours=colours)
    assert first.startswith("<?xml") and "<svg" in first
    assert first == figures.plot_cost_resolution(facets, title="t", colours=colours)
    forest = figures.plot_forest(figures.forest_data(_promotion({"alpha": [0.8, 0.9, 0.7]}), "candidate_workflow"))
    assert "alpha" in forest


def test_page_holds_the_rendered_report_and_its_figures_inline():
    markdown = "# Title\n\nSome text.\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    page = render_page(markdown, [("Cost against resolution", "Caption & more.", b"<svg/>")])
    assert page.index("<h1>Title</h1>") < page.index("<figure>") < page.index("<table>")
    assert "<td>1</td>" in page and "<th>a</th>" in page
    assert 'src="data:image/svg+xml;base64,PHN2Zy8+"' in page  # embedded, no external file
    assert "Caption &amp; more." in page
    assert page == render_page(markdown, [("Cost against resolution", "Caption & more.", b"<svg/>")])


def test_page_heading_can_name_the_page():
    page = render_page("# skillbench benchmark\n\ntext\n", [], title="Generation 1 of demo")
    assert "<h1>Generation 1 of demo</h1>" in page and "skillbench benchmark" not in page


def test_every_figure_gives_an_arm_the_same_colour():
    """An arm's colour comes from the experiment's arm order alone, whatever arms a figure shows and in whatever
    order; a candidate is a lighter shade of its incumbent's colour."""
    sweep = figures.arm_colours(["workflow", "workflow_direct", "baseline"])
    generation = figures.arm_colours(["workflow", "candidate_workflow", "workflow_direct", "baseline"])
    assert generation == sweep
    assert len(set(sweep.values())) == len(sweep) == 6  # three arms and their candidates, all distinct
    assert sweep["candidate_workflow"] == figures._lighter(sweep["workflow"])
    rows = [make_row("alpha", arm, 0) for arm in ("baseline", "candidate_workflow", "workflow")]
    facets = figures.cost_resolution_data(rows, ["alpha"], ["workflow", "candidate_workflow", "baseline"])
    cost = figures.plot_cost_resolution(facets, title="t", colours=sweep)
    cells = [
        {
            "label": arm,
            "arm": arm,
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:00:10Z",
            "sessions": [],
        }
        for arm in ("baseline", "candidate_workflow", "workflow")
    ]
    timeline = figures.plot_timeline(figures.timeline_data(cells), title="t", colours=sweep)
    for arm in ("workflow", "candidate_workflow", "baseline"):
        assert sweep[arm] in cost and sweep[arm] in timeline, arm
    assert sweep["workflow_direct"] not in timeline  # an arm a figure does not show takes no colour there
