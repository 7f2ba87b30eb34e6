"""The bench's trigger part: simulated trigger suites decided by the real gate, and the table it writes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "decision_quality.py"
SEED = 20261201


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/decision_quality.py as a module (it is a script, not a package); registered so its worker processes
    can find the functions they are sent."""
    spec = importlib.util.spec_from_file_location("decision_quality", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["decision_quality"] = module
    spec.loader.exec_module(module)
    return module


def test_a_fifty_point_recall_drop_on_one_skill_is_never_promoted(bench: ModuleType) -> None:
    counts = bench.run_trigger_row(("B3", 30, SEED))
    assert counts["promoted"] == 0
    # What keeps it out is the skill's own recall test, credibly worse in every decision, not the cost or the
    # resolution of the suite.
    assert counts["worse"] == counts["decisions"] == 30
    assert counts["triggers_pass"] == 0


def test_an_equally_triggering_cheaper_candidate_can_be_promoted(bench: ModuleType) -> None:
    counts = bench.run_trigger_row(("P3×32i", 30, SEED))
    assert 0 < counts["promoted"] <= counts["triggers_pass"] <= 30


def test_the_candidates_truth_is_the_scenarios_shift_on_one_skill_only(bench: ModuleType) -> None:
    rows = {scenario.name: scenario for scenario in bench.trigger_scenarios()}
    suite = bench.draw_trigger_suite(np.random.default_rng(SEED), 3)
    first = bench.TRIGGER_SKILLS[0]
    labelled = np.array([label == first for label in suite.labels])

    recall = bench.candidate_chances(suite, rows["B3"], 0) - suite.chances
    assert np.allclose(recall[labelled, 0], -0.5)
    assert np.allclose(recall[~labelled, 0], 0.0) and np.allclose(recall[:, 1:], 0.0)

    restraint = bench.candidate_chances(suite, rows["M4"], 0) - suite.chances
    assert np.allclose(restraint[~labelled, 0], 0.2) and np.allclose(restraint[labelled, 0], 0.0)
    assert np.allclose(restraint[:, 1:], 0.0)


def test_the_part_writes_a_row_per_scenario_between_its_markers_only(bench: ModuleType, tmp_path: Path) -> None:
    docs = tmp_path / "gate.md"
    before, after = "# Gate\n\nprose before\n\n", "\n\nprose after\n"
    docs.write_text(f"{before}{bench.TRIGGER_START}\nold table\n{bench.TRIGGER_END}{after}", encoding="utf-8")
    bench.main(["--part", "trigger", "--trigger-trials", "2", "--workers", "1", "--docs", str(docs)])
    text = docs.read_text(encoding="utf-8")
    assert text.startswith(before + bench.TRIGGER_START) and text.endswith(bench.TRIGGER_END + after)
    assert "old table" not in text
    table = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| row ")]
    names = [line.split(" | ")[0].removeprefix("| ") for line in table if not line.startswith("| ---")]
    assert names == [scenario.name for scenario in bench.trigger_scenarios()]
    assert all(len(line.split(" | ")) == len(table[0].split(" | ")) for line in table)
