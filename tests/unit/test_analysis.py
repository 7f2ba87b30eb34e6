"""The analysis API: a results folder as DataFrames, and regrading that matches `skillbench gate`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rowfactory import make_overlay, make_row
from skillbench import analysis
from skillbench.base import artifacts
from skillbench.decision import promotion
from skillbench.decision.policy import resolve_policy

GENERATED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TASKS = [f"t{index:02d}" for index in range(12)]


def stored_run(root: Path) -> Path:
    """A results folder as the pipeline leaves it: bindings, gen0's overlay and rows, and each cell's record."""
    artifacts.write_artifact(
        root / "tasks" / "bindings.json",
        {"schema": "task-bindings/v1", "suite": "s.yaml", "tasks": [{"id": t} for t in TASKS], "skipped_expensive": []},
        "task-bindings",
    )
    gen = root / "gen0"
    artifacts.write_artifact(
        gen / "overlay.json",
        make_overlay(),
        "overlay",
    )
    rows = []
    for index, task in enumerate(TASKS):
        for run in range(3):
            rows.append(make_row(task, "workflow", run, cost_usd=[1.0, 1.1, 0.92][run] * (1 + index % 3)))
            saving = 0.8 * (1 + 0.01 * index) * [0.97, 1.05, 1.0][(run + index) % 3] * (1 + index % 3)
            rows.append(make_row(task, "candidate_workflow", run, cost_usd=saving))
    (gen / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for row in rows:
        cellset = "gen0/cells" if row["arm"].startswith("candidate_") else "cells"
        folder = root / cellset / row["task"] / row["arm"] / f"run{row['run']}"
        timing = {
            "started_at": "2026-01-01T11:00:00Z",
            "finished_at": "2026-01-01T11:00:04Z",
            "wall_s": 4.0,
            "sessions_s": 3.0,
            "setup_s": 0.1,
            "verify_s": 0.1,
            "oracle_s": 0.1,
            "overhead_s": 0.7,
            "sessions": [
                {"role": "work", "started_at": "2026-01-01T11:00:00.5Z", "finished_at": "2026-01-01T11:00:03.5Z"}
            ],
        }
        artifacts.write_artifact(
            folder / "record.json",
            {"schema": "cell-record/v1", "row": row, "attempt": 1, "timing": timing},
            "cell-record",
        )
    return root


def test_regrading_a_generation_gives_the_document_skillbench_gate_writes(tmp_path):
    root = stored_run(tmp_path / "results" / "exp")
    written = promotion.grade(
        results=str(root / "gen0" / "results.jsonl"),
        overlay_json=str(root / "gen0" / "overlay.json"),
        bindings=str(root / "tasks" / "bindings.json"),
        policy=resolve_policy(None),
        model="claude-test-model",
        effort="high",
        out=str(tmp_path / "promotion.json"),
        generated_at=GENERATED_AT,
    )
    assert analysis.regrade_generation(root, 0, generated_at=GENERATED_AT) == written
    assert written["decisions"][0]["decision"] == "promote"
    # Rows held in a DataFrame regrade the same; another policy is another document.
    same = analysis.regrade(
        analysis.generation_rows(root, 0),
        overlay=artifacts.read_artifact(root / "gen0" / "overlay.json", "overlay"),
        bindings=artifacts.read_artifact(root / "tasks" / "bindings.json", "task-bindings"),
        generated_at=GENERATED_AT,
    )
    assert same == written
    stricter = analysis.regrade_generation(root, 0, {"min_improvement_pct": 30.0}, generated_at=GENERATED_AT)
    assert stricter["decisions"][0]["decision"] == "keep_incumbent"
    with pytest.raises(ValueError, match="objective must be one of"):
        analysis.regrade_generation(root, 0, {"objective": "median"})


def test_a_results_folder_as_data_frames(tmp_path):
    root = stored_run(tmp_path / "results" / "exp")
    (root / "gen0" / "promotion.json").write_text(
        json.dumps(analysis.regrade_generation(root, 0, generated_at=GENERATED_AT))
    )
    rows = analysis.rows(root)
    assert len(rows) == 72 and {tuple(served) for served in rows["generations"]} == {(0,)}
    cells = analysis.cells(root)
    assert len(cells) == 72
    assert set(cells[cells["arm"] == "workflow"]["generation"].isna()) == {True}  # shared by every generation
    assert set(cells[cells["arm"] == "candidate_workflow"]["generation"]) == {0}
    assert cells["wall_s"].sum() == pytest.approx(288.0)
    sessions = analysis.sessions(root)
    assert (
        len(sessions) == 72 and set(sessions["role"]) == {"work"} and sessions["seconds"].sum() == pytest.approx(216.0)
    )
    decisions = analysis.decisions(root)
    (decision,) = decisions.to_dict("records")
    document = artifacts.read_artifact(root / "gen0" / "promotion.json", "promotion")
    cost = document["decisions"][0]["tests"]["cost"]
    assert (decision["decision"], decision["objective"], decision["estimate_pct"]) == (
        "promote",
        "total_spend",
        cost["estimate_pct"],
    )
    assert decision["generation_alpha"] == 0.025


def test_rows_count_each_cell_once_with_the_generations_it_served(tmp_path):
    """An incumbent cell is read by the sweep and by every generation's gate: grouping by arm counts it once."""
    root = stored_run(tmp_path / "results" / "exp")
    gen0 = artifacts.read_jsonl(root / "gen0" / "results.jsonl", "result-row")
    incumbent = [row for row in gen0 if row["arm"] == "workflow"]
    (root / "sweep").mkdir()
    (root / "sweep" / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in incumbent))
    second = incumbent + [{**row, "cost_usd": row["cost_usd"] * 0.9} for row in gen0 if row["arm"] != "workflow"]
    (root / "gen1").mkdir()
    (root / "gen1" / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in second))

    rows = analysis.rows(root)
    assert len(rows) == 36 + 36 + 36  # the incumbent's cells, generation 0's candidate cells, generation 1's
    spent = rows.groupby("arm")["cost_usd"].sum()
    assert spent["workflow"] == pytest.approx(sum(row["cost_usd"] for row in incumbent))
    shared = rows[rows["arm"] == "workflow"]
    assert set(shared["shared"]) == {True} and set(shared["in_sweep"]) == {True}
    assert {tuple(served) for served in shared["generations"]} == {(0, 1)}
    candidates = rows[rows["arm"] == "candidate_workflow"]
    assert {tuple(served) for served in candidates["generations"]} == {(0,), (1,)} and not candidates["shared"].any()
    # One generation's rows as its gate read them, incumbent rows included.
    assert len(analysis.generation_rows(root, 1)) == 72 and len(analysis.generation_rows(root, None)) == 36


def run_decision(root: Path) -> dict:
    """The run's own decision on gen0 (as the gate wrote it) and a finished run's summary of it."""
    from skillbench.decision.document import summarize_gate
    from skillbench.reporting import report

    document = analysis.regrade_generation(root, 0, generated_at=GENERATED_AT, record=False)
    artifacts.write_artifact(root / "gen0" / "promotion.json", dict(document), "promotion")
    overlay = artifacts.read_artifact(root / "gen0" / "overlay.json", "overlay")
    entry = report.generation_summary(document, overlay, promoted=True, gate_summary=summarize_gate(document))
    summary = {
        "schema": "summary/v1",
        "experiment": "exp",
        "generations_requested": 1,
        "generations": [entry],
        "outcome": "promoted",
        "promoted_generation": 0,
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 0,
        "next_step": None,
    }
    artifacts.write_artifact(root / "summary.json", summary, "summary")
    (root / "summary.md").write_text(report.render_summary(summary))
    return document


def test_a_decision_under_another_policy_is_kept_beside_the_runs_marked_post_hoc(tmp_path, capsys, monkeypatch):
    from skillbench.cli import main

    root = stored_run(tmp_path / "results" / "exp")
    original = run_decision(root)
    run_bytes = (root / "gen0" / "promotion.json").read_bytes()
    # The run's own policy again is the run's decision: nothing post hoc.
    assert "post_hoc" not in analysis.regrade_generation(root, 0, generated_at=GENERATED_AT)
    assert not (root / "gen0" / "post-hoc").exists()

    stricter = analysis.regrade_generation(root, 0, {"min_improvement_pct": 30.0}, generated_at=GENERATED_AT)
    assert stricter["decisions"][0]["decision"] == "keep_incumbent"
    assert stricter["post_hoc"] == {
        "of": str(root / "gen0" / "promotion.json"),
        "changed": {"gate.min_improvement_pct": {"run": 5.0, "post_hoc": 30.0}},
        "run_decisions": [{"candidate_arm": "candidate_workflow", "decision": "promote"}],
    }
    # The run's decision is untouched; the post-hoc one is kept beside it and shown beside it in the summary.
    assert (root / "gen0" / "promotion.json").read_bytes() == run_bytes
    (kept,) = (root / "gen0" / "post-hoc").glob("*.json")
    assert artifacts.read_artifact(kept, "promotion") == stricter
    summary = artifacts.read_artifact(root / "summary.json", "summary")
    assert summary["outcome"] == "promoted" and summary["generations"][0]["post_hoc"][0]["changed"] == {
        "gate.min_improvement_pct": {"run": 5.0, "post_hoc": 30.0}
    }
    markdown = (root / "summary.md").read_text()
    assert "candidate_workflow: promote" in markdown
    assert (
        "- **post hoc, not the run's decision** (under gate.min_improvement_pct 30.0 (the run's: 5.0); "
        f"`gen0/post-hoc/{kept.name}`): candidate_workflow: keep_incumbent — "
    ) in markdown

    # skillbench gate with another margin: its --out says post hoc; the run's own promotion.json is never its --out.
    monkeypatch.chdir(tmp_path)
    rows = root / "gen0" / "results.jsonl"
    assert main(["gate", str(rows), "--out", str(root / "gen0" / "promotion.json"), "--min-runs", "2"]) == 1
    assert "a regrade never replaces it" in capsys.readouterr().err
    assert (root / "gen0" / "promotion.json").read_bytes() == run_bytes
    out = tmp_path / "wider.json"
    assert main(["gate", str(rows), "--out", str(out), "--quality-margin-pct", "20"]) == 0
    assert "post hoc: not the run's decision (gate.quality_margin_pct differ from the run's)" in capsys.readouterr().out
    assert artifacts.read_artifact(out, "promotion")["post_hoc"]["changed"] == {
        "gate.quality_margin_pct": {"run": 10.0, "post_hoc": 20.0}
    }
    assert len(list((root / "gen0" / "post-hoc").glob("*.json"))) == 2
    assert original["decisions"] == artifacts.read_artifact(root / "gen0" / "promotion.json", "promotion")["decisions"]
