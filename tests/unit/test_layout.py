"""The results layout: rule patterns, the paths the library reads and the names it parses agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from skillbench.base import layout


def test_a_rule_pattern_filled_with_values_is_the_concrete_path():
    pattern = layout.cell_record("results/x", "{cellset}", "{task}", "{arm}", "{run}")
    filled = pattern.format(cellset=layout.cellset(3), task="fix-bug", arm="candidate_plan", run=2)
    assert filled == layout.cell_record("results/x", layout.cellset(3), "fix-bug", "candidate_plan", 2)
    assert filled == "results/x/gen3/cells/fix-bug/candidate_plan/run2/record.json"
    assert layout.promotion("results/x", "{gen}").format(gen=0) == layout.promotion("results/x", 0)


@pytest.mark.parametrize("gen", [None, 0, 12])
def test_a_cell_record_path_parses_back_to_its_cell(tmp_path, gen):
    path = Path(layout.cell_record(tmp_path, layout.cellset(gen), "t1", "arm_a", 7))
    assert layout.parse_cell_record(path.relative_to(tmp_path)) == (gen, "t1", "arm_a", 7)


def test_other_paths_are_not_cells(tmp_path):
    for relative in (
        "cells/t1/arm/run1/patch.diff",
        "sweep/cells/t1/arm/run1/record.json",
        "cells/t1/arm/x/record.json",
    ):
        assert layout.parse_cell_record(Path(relative)) is None


def test_the_cellset_wildcard_constraint_accepts_exactly_the_cell_folders():
    constraint = re.compile(layout.CELLSET_PATTERN)
    for gen in (None, 0, 41):
        assert constraint.fullmatch(layout.cellset(gen))
    for other in ("sweep/cells", "gen/cells", "gen1"):
        assert not constraint.fullmatch(other)
    assert layout.cellset_generation(layout.cellset(4)) == "4"
    assert layout.cellset_generation(layout.cellset(None)) is None
    with pytest.raises(ValueError, match="is not a cell folder"):
        layout.cellset_generation("sweep/cells")


def test_records_on_disk_are_the_incumbent_and_candidate_cells_only(tmp_path):
    made = [Path(layout.cell_record(tmp_path, layout.cellset(gen), "t", "a", 0)) for gen in (None, 0, 1)]
    stray = tmp_path / "gen0" / "evidence" / "t" / "a" / "run0" / "record.json"
    for path in [*made, stray]:
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    assert layout.cell_records_on_disk(tmp_path) == sorted(made)


def test_a_row_lives_in_the_folder_of_its_batch():
    anchor = {"task": "t", "arm": "workflow", "run": 1, "batch": "gen2/look3"}
    cached = {"task": "t", "arm": "baseline", "run": 1, "batch": layout.CACHE_BATCH}
    assert layout.row_cell_dir("r", anchor, 2, candidate=False) == layout.cell_dir(
        "r", "gen2/cells", "t", "workflow", 1
    )
    assert layout.row_cell_dir("r", cached, 2, candidate=False) == layout.cell_dir("r", "cells", "t", "baseline", 1)
    # A row of before batches were recorded: a candidate's under the generation given, any other arm's in the cache.
    shared = layout.row_cell_dir("r", {"task": "t", "arm": "workflow", "run": 1}, 2, candidate=False)
    candidate = layout.row_cell_dir("r", {"task": "t", "arm": "candidate_workflow", "run": 1}, 2, candidate=True)
    assert shared == layout.cell_dir("r", layout.cellset(None), "t", "workflow", 1)
    assert candidate == layout.cell_dir("r", layout.cellset(2), "t", "candidate_workflow", 1)
    assert [layout.batch_generation(name) for name in ("gen0", "gen12/look2", "cache", "gen1/x")] == [0, 12, None, None]
    assert layout.batch_name(3, None) == "gen3" and layout.batch_name(3, 2) == "gen3/look2"
    assert layout.generation_of_folder(Path(layout.generation_dir("r", 2)).name) == 2
    assert layout.generation_of_folder(layout.SWEEP) is None


def test_the_run_plans_under_results_are_found(tmp_path):
    for experiment in ("a", "b"):
        plan = Path(layout.progress_plan(tmp_path / experiment))
        plan.parent.mkdir(parents=True)
        plan.write_text("{}")
    found = sorted(layout.root_of_plan(plan) for plan in layout.planned_runs(tmp_path))
    assert found == [tmp_path / "a", tmp_path / "b"]


def test_the_results_root_is_recovered_from_a_job_output():
    root = "results/exp"
    for gen in (None, 3):
        record = layout.cell_record(root, layout.cellset(gen), "t", "a", 1)
        assert layout.root_of_cell_file(record, layout.cellset(gen)) == root
    assert layout.root_of_generation_file(layout.evidence(root, 2)) == root
    assert layout.root_of_look(layout.look(root, 2, 1)) == root
