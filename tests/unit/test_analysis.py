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
    frame = analysis.rows(root)
    same = analysis.regrade(
        frame[frame["generation"] == 0],
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
    assert len(rows) == 72 and set(rows["generation"]) == {0}
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
