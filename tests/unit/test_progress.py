"""Progress of a run from the files on disk: cells done/planned, running and interrupted cells, spend, ETA."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rowfactory import make_row
from skillbench.base import layout
from skillbench.base.artifacts import read_artifact, validate
from skillbench.experiment import runrecord
from skillbench.reporting import progress

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def plan(**overrides) -> dict:
    values = {
        "experiment": "exp",
        "task_ids": ["alpha", "beta"],
        "arms": ["workflow", "baseline"],
        "candidate_arms": ["candidate_workflow"],
        "runs": 2,
        "generations": 2,
        "session_cap": 2,
        "started_at": "2026-01-01T11:00:00Z",
    }
    values.update(overrides)
    return progress.run_plan(**values)


def write_record(root: Path, cellset: str, task: str, arm: str, run: int, *, cost=0.5, wall=30.0) -> None:
    folder = root / cellset / task / arm / f"run{run}"
    folder.mkdir(parents=True)
    record = {
        "schema": "cell-record/v1",
        "row": make_row(task, arm, run, cost_usd=cost),
        "attempt": 1,
        "timing": {"wall_s": wall, "started_at": "2026-01-01T11:00:00Z", "finished_at": "2026-01-01T11:00:30Z"},
    }
    (folder / "record.json").write_text(json.dumps(record))


def write_run(root: Path, pid: int, *, config: dict | None = None) -> dict:
    """run.json of a run of experiment `exp` by process `pid` (this test's own process: a live run)."""
    record = runrecord.run_record(
        config={"experiment": "exp", **(config or {})},
        config_files=[],
        overrides={},
        argv=[".venv/bin/snakemake", "--cores", "2", "--configfile", "my.yaml"],
        profile={"profile": None, "workflow_profile": None},
        workdir=root.parent.parent,
        snakefile=str(root.parent.parent / "Snakefile"),
        secrets=[],
        started_at="2026-01-01T11:00:00Z",
        provenance={"version": None, "commit": None},
        pid=pid,
    )
    runrecord.write_run_record(root, record)
    return record


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_summary_counts_spend_and_eta():
    finished = [
        {"cost_usd": 0.5, "wall_s": 10.0},
        {"cost_usd": None, "wall_s": 30.0},
        {"cost_usd": 0.25, "wall_s": 20.0},
    ]
    state = summary_of(finished=finished, running=2, proposer_costs=[0.1, None], alive=True)
    assert state["cells_planned"] == 2 * 2 * 2 + 2 * (2 * 2 * 1)  # incumbent cells + two generations of candidates
    assert (state["cells_done"], state["cells_running"], state["state"]) == (3, 2, "running")
    assert state["spend_usd"] == pytest.approx(0.85) and state["unmeasured_costs"] == 2
    assert state["median_cell_s"] == 20.0
    assert state["eta_s"] == 7 * 20.0  # 13 cells left, in waves of 2 sessions, 20 s each
    assert (
        progress.format_line(state) == "[progress] exp: 3/16 cells, 2 running, $0.85 spent (+2 unmeasured), ETA 2m20s"
    )


def summary_of(**values) -> dict:
    arguments = {
        "plan": plan(),
        "finished": [],
        "running": 0,
        "interrupted": 0,
        "proposer_costs": [],
        "generations": 2,
        "finished_run": False,
        "now": NOW,
    }
    arguments.update(values)
    return validate(progress.summarize(**arguments), "progress")


def test_the_state_says_whether_the_run_lives_finished_or_waits_for_a_look():
    starting = summary_of(alive=True)
    assert (starting["eta_s"], starting["state"]) == (None, "running")
    assert progress.format_line(starting).endswith("ETA after the first cell")
    # Between batches of a sequential design no cell runs, and what comes next depends on the look.
    between = summary_of(alive=True, sequential=True, finished=[{"cost_usd": 1.0, "wall_s": 5.0}] * 8)
    assert (between["state"], between["eta_s"]) == ("waiting_for_look", None)
    assert progress.format_line(between).endswith(", waiting for a look")
    # Gone without finishing: interrupted, whatever was left, and no ETA.
    gone = summary_of(alive=False, finished=[{"cost_usd": 1.0, "wall_s": 5.0}] * 3)
    assert (gone["state"], gone["eta_s"]) == ("interrupted", None)
    assert progress.format_line(gone) == "[progress] exp: 3/16 cells, 0 running, $3.00 spent, run interrupted"
    # A finished sequential run needed fewer cells than it might have run: the plan is what it did.
    done = summary_of(alive=False, finished_run=True, finished=[{"cost_usd": 1.0, "wall_s": 5.0}] * 8)
    assert (done["eta_s"], done["state"], done["cells_planned"]) == (0.0, "finished", 8)
    assert progress.format_line(done).endswith("8/8 cells, 0 running, $8.00 spent, finished")
    # Without a run record, a running cell job is the only sign of life.
    assert summary_of(running=1)["state"] == "running" and summary_of()["state"] == "interrupted"


def test_snapshot_from_disk_counts_only_planned_cells_and_sees_interrupted_jobs(tmp_path):
    root = tmp_path / "results" / "exp"
    progress.write_plan(root, plan())
    write_record(root, "cells", "alpha", "workflow", 0, cost=0.5, wall=10.0)
    write_record(root, "cells", "alpha", "baseline", 1, cost=None, wall=20.0)
    write_record(root, "gen0/cells", "beta", "candidate_workflow", 0, cost=0.25, wall=30.0)
    write_record(root, "cells", "alpha", "workflow", 5, cost=9.0)  # run 5 is not in this run's plan
    write_record(root, "gen7/cells", "alpha", "candidate_workflow", 0, cost=9.0)  # nor is generation 7
    running = Path(layout.progress_running(root))
    (running / "a.json").write_text(json.dumps({"cell": "cells/beta/workflow/run0", "pid": 1, "host": "node-b"}))
    (running / "b.json").write_text(
        json.dumps({"cell": "cells/beta/baseline/run0", "pid": dead_pid(), "host": "node-a"})
    )
    state = progress.snapshot(root, now=NOW, host="node-a")
    assert (state["cells_done"], state["cells_planned"]) == (3, 16)
    assert (state["cells_running"], state["cells_interrupted"]) == (1, 1)  # another host's entry is trusted
    assert state["spend_usd"] == 0.75 and state["unmeasured_costs"] == 1
    assert state["state"] == "running"


def test_a_promotion_ends_the_chain_and_the_plan(tmp_path):
    root = tmp_path / "exp"
    progress.write_plan(root, plan())
    (root / "gen0").mkdir()
    (root / "gen0" / "promotion.json").write_text(json.dumps({"decisions": [{"decision": "promote"}]}))
    assert progress.snapshot(root, now=NOW)["cells_planned"] == 8 + 4


def test_update_writes_a_valid_progress_json_and_status_needs_a_plan(tmp_path):
    root = tmp_path / "exp"
    assert progress.update(root) is None
    with pytest.raises(ValueError, match="no run plan"):
        progress.snapshot(root)
    progress.write_plan(root, plan())
    write_record(root, "cells", "alpha", "workflow", 0)
    state = progress.update(root)
    assert read_artifact(root / "progress.json", "progress") == state


def test_an_update_reads_only_the_records_and_spend_files_that_changed(tmp_path, monkeypatch):
    root = tmp_path / "exp"
    progress.write_plan(root, plan())
    for task in ("alpha", "beta"):
        write_record(root, "cells", task, "workflow", 0, cost=0.5)
    meter = Path(layout.spend_meter(root))
    meter.mkdir(parents=True)
    (meter / "done.json").write_text(json.dumps({"job": "a", "usd": 0.5, "final": True}))
    (meter / "live.json").write_text(json.dumps({"job": "b", "usd": 0.2, "final": False}))
    progress.update(root)

    reads: list[str] = []
    read_text = Path.read_text

    def counted(path: Path, *args, **kwargs) -> str:
        reads.append(path.name if path.name != "record.json" else "/".join(path.parts[-5:-1]))
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    write_record(root, "cells", "alpha", "baseline", 1, cost=0.25)  # a new cell
    (meter / "live.json").write_text(json.dumps({"job": "b", "usd": 0.3, "final": True}))
    state = progress.update(root)
    record_reads = [name for name in reads if name.startswith("cells/")]
    assert record_reads == ["cells/alpha/baseline/run1"]
    assert "done.json" not in reads and "live.json" in reads
    assert (state["cells_done"], state["spend_usd"]) == (3, 1.25)

    # A changed record is read again; a removed one is no longer counted; a damaged tally is read as none.
    monkeypatch.setattr(Path, "read_text", read_text)
    (root / "cells" / "beta" / "workflow" / "run0" / "record.json").unlink()
    record = root / "cells" / "alpha" / "workflow" / "run0" / "record.json"
    document = json.loads(record.read_text())
    document["row"]["cost_usd"] = 2.0
    record.write_text(json.dumps(document, indent=1))
    state = progress.update(root)
    assert (state["cells_done"], state["spend_usd"]) == (2, 2.25)
    for damaged in ("{not json", '{"records": [1], "final_spend": "x"}', '{"final_spend": {"done.json": "9"}}'):
        Path(layout.progress_tally(root)).write_text(damaged)
        state = progress.update(root)
        assert (state["cells_done"], state["spend_usd"]) == (2, 2.25)


def test_tracking_a_cell_registers_it_while_it_runs_and_prints_the_run_line(tmp_path, capsys):
    root = tmp_path / "exp"
    progress.write_plan(root, plan())
    write_run(root, os.getpid())
    with pytest.raises(RuntimeError):
        with progress.tracking_cell(root, "cells/alpha/workflow/run0"):
            assert progress.running_cells(root) == (["cells/alpha/workflow/run0"], [])
            assert progress.snapshot(root)["cells_running"] == 1
            raise RuntimeError("the cell failed")
    assert progress.running_cells(root) == ([], [])
    assert capsys.readouterr().out == "[progress] exp: 0/16 cells, 0 running, $0.00 spent, ETA after the first cell\n"
    assert read_artifact(root / "progress.json", "progress")["cells_running"] == 0


def test_a_new_run_forgets_the_running_entries_of_the_last(tmp_path):
    root = tmp_path / "exp"
    progress.write_plan(root, plan())
    (Path(layout.progress_running(root)) / "x.json").write_text(
        json.dumps({"cell": "c", "pid": dead_pid(), "host": "h"})
    )
    progress.write_plan(root, plan())
    assert progress.running_cells(root, host="h") == ([], [])


CONFIG = {
    "experiment": "exp",
    "runs": 2,
    "arms": {"workflow": {"sessions": [{"role": "plan"}, {"role": "work"}]}, "baseline": {"sessions": [{"role": "b"}]}},
    "selected_arms": [],
    "skills": {"evolvable": ["change-work"]},
    "evolution": {"generations": 2, "initial_overlay": None, "arms": ["workflow"]},
}


def test_planned_work_counts_cells_and_sessions(monkeypatch):
    from skillbench.experiment import arms

    monkeypatch.setattr(arms, "arm_skills", lambda config, arm: ["change-work"] if arm == "workflow" else [])
    work = progress.planned_work(CONFIG, ["alpha", "beta", "gamma"])
    assert work["candidate_arms"] == ["candidate_workflow"]
    # The cache holds baseline; each generation's batch is the candidate's cells and its anchor's (workflow), as
    # many; generation 0's anchor is the sweep's workflow cells.
    assert work["anchor_arms"] == ["workflow"]
    assert len(work["incumbent_cells"]) == 3 * 2 and len(work["candidate_cells_per_generation"]) == 3 * 2
    assert len(work["anchor_cells_per_generation"]) == 3 * 2 and work["anchor_sessions_per_generation"] == 3 * 2 * 2
    assert work["cells"] == 6 + 2 * (6 + 6)
    assert work["sessions"] == (3 * 2 * 1) + 2 * (3 * 2 * 2 + 3 * 2 * 2) + 2  # cache + batches + proposers
    no_proposer = progress.planned_work(
        {**CONFIG, "evolution": {**CONFIG["evolution"], "generations": 1, "initial_overlay": "overlay/"}}, ["alpha"]
    )
    assert no_proposer["proposer_sessions"] == 0


def test_cost_estimate_prices_each_cell_from_earlier_rows(monkeypatch):
    from skillbench.experiment import arms

    monkeypatch.setattr(arms, "arm_skills", lambda config, arm: ["change-work"] if arm == "workflow" else [])
    work = progress.planned_work(
        {**CONFIG, "runs": 1, "evolution": {**CONFIG["evolution"], "generations": 1}}, ["alpha", "beta"]
    )
    earlier = [
        make_row("alpha", "workflow", 0, cost_usd=1.0),
        make_row("alpha", "workflow", 1, cost_usd=3.0),
        make_row("beta", "workflow", 0, cost_usd=2.0),
        make_row("alpha", "baseline", 0, cost_usd=0.5),
        make_row("beta", "baseline", 0, cost_usd=None),
        make_row("beta", "baseline", 1, resolved=False, error_kind="infra-error", cost_usd=50.0),
    ]
    estimate = progress.cost_estimate(work, earlier, proposer_costs=[0.1])
    # alpha/workflow 1–3 (median 2) twice (incumbent and candidate), beta/workflow 2 twice,
    # alpha/baseline 0.5, beta/baseline priced like baseline anywhere (0.5), one proposer 0.1.
    assert estimate == {"low_usd": 7.1, "expected_usd": 9.1, "high_usd": 11.1, "rows": 4, "proposer_priced": True}
    assert progress.cost_estimate(work, [make_row(cost_usd=None)], []) is None


def test_closing_lines_carry_the_runs_config_into_every_command(tmp_path):
    root = tmp_path / "results" / "exp"
    progress.write_plan(root, plan(generations=1))
    write_run(root, os.getpid())
    write_record(root, "cells", "alpha", "workflow", 0, cost=0.5)
    (root / "summary.json").write_text(
        json.dumps(
            {
                "outcome": "promoted",
                "promoted_generation": 0,
                "generations_requested": 1,
                "generations": [{"generation": 0}],
            }
        )
    )
    lines = progress.closing_lines(root, ok=True)
    assert lines[0].startswith("skillbench: generation 0's candidate was PROMOTED (1/1 cells, $0.50 measured spend")
    assert any(
        line.strip().startswith("reports:") and str(root / "gen0" / "report.html")[:-4] in line for line in lines
    )
    # The report command is the run's own snakemake with the run's config: as printed, it reports this experiment.
    html = next(line for line in lines if line.strip().startswith("HTML:"))
    assert f".venv/bin/snakemake --report {root / 'report.html'} --configfile my.yaml" in html
    assert lines[-1].strip().startswith(f"next:      skillbench apply {root}")
    assert (
        lines[-2].strip()
        == f"diff:      {root / 'gen0' / 'report.md'}   (the candidate's whole diff and content flags)"
    )
    assert sum(len(line) for line in lines) < 1000
    # The end hook leaves a progress.json that says how the run ended.
    assert read_artifact(root / "progress.json", "progress")["state"] == "finished"

    failed = progress.closing_lines(root, ok=False)
    assert "stopped with errors" in failed[0] and any(f"skillbench status {root}" in line for line in failed)
    assert any("resume:    .venv/bin/snakemake --cores 2 --configfile my.yaml" in line for line in failed)
    assert read_artifact(root / "progress.json", "progress")["state"] == "interrupted"
    stopped = progress.closing_lines(root, ok=False, interrupted=True, log="/x/.snakemake/log/run.log")
    assert stopped[0].startswith(f"skillbench: run of {root} interrupted")
    assert stopped[-1] == "  log:       /x/.snakemake/log/run.log"


def test_status_says_a_run_whose_snakemake_is_gone_was_interrupted_and_how_to_resume(tmp_path, capsys):
    from skillbench.cli import main

    root = tmp_path / "results" / "exp"
    progress.write_plan(root, plan())
    write_record(root, "cells", "alpha", "workflow", 0, cost=0.5, wall=10.0)
    write_run(root, dead_pid())
    # A killed snakemake leaves its lock behind: the unlock command carries the run's config too.
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("results/exp/x\n")
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[progress] exp: 1/16 cells, 0 running, $0.50 spent, run interrupted"
    assert out[1].startswith("  state: interrupted;")
    assert "  unlock:    .venv/bin/snakemake --unlock --configfile my.yaml" in "\n".join(out)
    assert "  resume:    .venv/bin/snakemake --cores 2 --configfile my.yaml" in "\n".join(out)
    # The same run, alive (this process): running, with its process named.
    write_run(root, os.getpid())
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ETA 1m20s" in out and "state: running" in out and f"snakemake: pid {os.getpid()}" in out
    assert "resume:" not in out


REPO = Path(__file__).resolve().parents[2]


def test_status_command_prints_the_run_line_and_the_interrupted_cells(tmp_path, capsys):
    from skillbench.cli import main

    root = tmp_path / "exp"
    progress.write_plan(root, plan())
    write_record(root, "cells", "alpha", "workflow", 0, cost=0.5, wall=10.0)
    entry = {"cell": "cells/alpha/baseline/run0", "pid": dead_pid(), "host": socket.gethostname()}
    (Path(layout.progress_running(root)) / "a.json").write_text(json.dumps(entry))
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[progress] exp: 1/16 cells, 0 running, 1 interrupted, $0.50 spent, run interrupted"
    assert out[1].startswith("  state: interrupted;")
    assert out[2] == "  interrupted cells (their job died): cells/alpha/baseline/run0"
    assert main(["status", str(tmp_path / "nothing")]) == 1
    assert "no run plan" in capsys.readouterr().err


def test_estimate_command_counts_the_default_experiment_and_prices_it(tmp_path, capsys, monkeypatch):
    from skillbench.cli import main

    monkeypatch.chdir(REPO)
    earlier = tmp_path / "earlier"
    for task in ("money-thousands", "bulk-discount-threshold", "sku-normalization"):
        for arm in ("workflow", "workflow_direct", "baseline"):
            write_record(earlier, "cells", task, arm, 0, cost=0.25)
    assert main(["estimate", "--results", str(earlier)]) == 0
    out = capsys.readouterr().out
    # 48 baseline cells in the cache, then two generations of 48 candidate cells beside an anchor of 48 fresh cells
    # of workflow (two sessions each: 96 per generation); generation 0's anchor is the sweep's workflow cells.
    assert "at most 240 cells, 434 agent sessions" in out
    assert "incumbent arms baseline (the cache, shared by generations): 48 cells" in out
    assert "48 candidate cells each, beside an anchor of 48 fresh cells of workflow (96 sessions per generation" in out
    # 240 cells at $0.25, the proposer sessions not priced (no earlier proposer session).
    assert "expected cost $60.00 (range $60.00 – $60.00)" in out and "proposer sessions not priced" in out
    # One run per cell measures no noise: the design is recommended for an assumed one, and says why, beside the
    # cost those same rows price (never "no earlier rows" next to "priced from 9 earlier row(s)").
    assert "design for a 15% saving at 80% power in generation 1 (alpha 0.0125; run-to-run sd 0.31 assumed" in out
    assert (
        f"the 9 earlier row(s) under {earlier} hold one run per (task, arm), and one run cannot measure run-to-run "
        "noise"
    ) in out
    assert "no earlier rows" not in out and "priced from 9 earlier row(s)" in out
    assert "with these 3 tasks: out of reach within 30 runs per (task, arm); add tasks" in out
    # Three tasks cannot show a 15 % saving in either generation: each says so before a session is paid for.
    assert (
        "  warning: generation 1 (alpha 0.0125, 3 tasks × 16 runs) has 0% power for a 15% saving (--saving), under "
        "20%: its sessions can hardly change the decision; add tasks or raise runs (`skillbench estimate` sizes the "
        "design), or set evolution.generations to 1"
    ) in out
    assert "warning: generation 0 (alpha 0.025, 3 tasks × 16 runs) has 2% power for a 15% saving (--saving)" in out
    assert main(["estimate", "--results", str(tmp_path / "none")]) == 0
    assert "no earlier measured rows" in capsys.readouterr().out


def test_estimate_refuses_a_design_that_cannot_run_and_says_what_the_budget_allows(tmp_path, capsys, monkeypatch):
    from skillbench.cli import main

    monkeypatch.chdir(REPO)
    # The overlay changes change-work, which two arms load: a candidate of one arm only cannot exist.
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        "experiment: estimate-probe\nselected_arms: [workflow, workflow_direct, baseline]\nevolution:\n"
        "  generations: 1\n  initial_overlay: tasks/demo/overlays/verify-once\n  arms: [workflow_direct]\n"
    )
    assert main(["estimate", "--configfile", str(wrong)]) == 1
    err = capsys.readouterr().err
    assert "evolution.arms" in err and "nothing to estimate: fix these first" in err

    capped = tmp_path / "capped.yaml"
    capped.write_text(
        "experiment: estimate-probe\nruns: 3\nselected_arms: [workflow, workflow_direct, baseline]\n"
        "budget: {max_sessions: 200, max_usd: 1}\n"
    )
    assert main(["estimate", "--configfile", str(capped)]) == 0
    out = capsys.readouterr().out
    # 9 baseline cells in the cache; two generations of 27 candidate sessions beside an anchor of 27; two proposers.
    assert "budget.max_sessions 200: the plan needs up to 119 sessions; the plan fits in it" in out
    assert "budget.max_usd 1: looks start no batch whose projected cost passes it" in out
    # No rows yet: the sweep to run first is a command that works (a target, then top-level --config only).
    # Two runs of every incumbent arm in the cache (rule sample_costs): no proposer, no anchor before its candidate;
    # one run would price the sessions but cannot measure how runs differ, and the command says so.
    assert f"snakemake sample_costs --cores 2 --configfile {capped} --config runs=2\n" in out, out
    assert "one run would price the sessions but cannot measure run-to-run noise" in out
    assert re.search(rf"then estimate again: \S*skillbench estimate --configfile {re.escape(str(capped))}\n", out), out


def test_status_of_a_live_sequential_run_between_batches_is_waiting_for_a_look(tmp_path, capsys):
    from skillbench.cli import main

    root = tmp_path / "results" / "exp"
    progress.write_plan(root, plan())
    write_record(root, "cells", "alpha", "workflow", 0)
    write_run(root, os.getpid(), config={"runs": {"min": 2, "max": 4, "step": 1}})
    assert progress.snapshot(root)["state"] == "waiting_for_look"
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(", waiting for a look") and "state: waiting for a look;" in out
    assert "the next batch of cells starts if the interim look says continue" in out


def test_the_recommended_design_reaches_the_power_and_shows_the_margin():
    from skillbench.decision import gate, stats

    policy = gate.resolve_policy(None)
    common = {"saving_pct": 15.0, "run_variance": 0.09, "spend_efficiency": 0.8, "shared_sd": 0.0, "policy": policy}
    design = progress.recommend_design(**common, generation=1)
    assert design is not None and design["runs"] >= policy.min_runs
    cost_alpha = gate.generation_alpha(policy, 1) * (1 - gate.RESOLUTION_ROUTE_SHARE)
    reached = stats.cost_power(
        saving_pct=15.0,
        tasks=design["tasks"],
        runs=design["runs"],
        run_variance=0.09,
        shared_sd=0.0,
        alpha=cost_alpha,
        floor_pct=policy.min_improvement_pct,
        spend_efficiency=0.8,
    )
    assert reached == pytest.approx(design["power"], abs=1e-3) and reached >= 0.8
    # Generation 0 spends twice the alpha, so it needs no more runs than generation 1.
    first = progress.recommend_design(**common, generation=0)
    assert first["tasks"] * first["runs"] <= design["tasks"] * design["runs"]
    # With three tasks the cost test has two degrees of freedom: out of reach.
    assert progress.recommend_design(**common, generation=1, tasks=3) is None


def test_measured_noise_pools_the_relative_spread_of_each_cell():
    rows = [make_row("a", "workflow", run, cost_usd=cost) for run, cost in enumerate([0.9, 1.1])]
    rows += [make_row("b", "workflow", run, cost_usd=cost) for run, cost in enumerate([2.7, 3.3])]
    rows += [make_row("b", "baseline", 0, cost_usd=3.0)]
    noise = progress.measured_noise(rows, "cost_usd")
    assert noise["run_variance"] == pytest.approx(0.02)  # (0.1² + 0.1²) per cell, one degree of freedom each
    assert noise["spend_efficiency"] == pytest.approx(2.0**2 / ((1.0 + 9.0) / 2))
    assert progress.measured_noise(rows[:1], "cost_usd") is None


def test_a_generation_whose_design_cannot_pass_the_resolution_test_is_named_with_the_fix():
    """12 tasks × 5 runs show the resolution within 10 points up to generation 2; from generation 3 the halved alpha
    needs more runs per arm than the design has, so those generations' sessions could not change the decision."""
    from skillbench.decision.policy import resolve_policy

    common = {
        "tasks": 12,
        "runs": 5,
        "saving_pct": 15.0,
        "saving_key": "--saving",
        "run_variance": 0.094,
        "spend_efficiency": 1.0,
        "shared_sd": 0.0,
    }
    warnings = progress.generation_warnings(resolve_policy(None), generations=6, **common)
    assert [line.split(" (")[0] for line in warnings] == ["generation 3", "generation 4", "generation 5"]
    assert warnings[0] == (
        "generation 3 (alpha 0.003125, 12 tasks × 5 runs) cannot pass the resolution test: showing it within "
        "gate.quality_margin_pct (10 points) at that alpha takes 68 runs per arm, the design has 60; set runs to at "
        "least 6 (or add tasks), or set evolution.generations to 3"
    )
    # The three generations it can decide have power for a 15 % saving: nothing to warn of.
    assert progress.generation_warnings(resolve_policy(None), generations=3, **common) == []
    # The upstream rule tests nothing, and a design below min_runs is design_warnings' to name.
    assert progress.generation_warnings(resolve_policy({"rule": "upstream"}), generations=6, **common) == []
    assert progress.generation_warnings(resolve_policy({"min_runs": 6}), generations=6, **common) == []


def test_check_warns_of_each_generation_without_power_for_the_configured_minimum_saving(tmp_path, monkeypatch):
    """`skillbench check` sizes the warning by gate.min_improvement_pct: 12 × 5 has no power for a true 5 % saving
    that must also reach the 5 % floor; a hundred tasks × 5 runs have, at generation 0."""
    from skillbench.cli import _generation_warnings
    from skillbench.experiment import configcheck

    config = configcheck.load_config(REPO / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)  # no earlier rows: the assumed run noise
    config["runs"], config["evolution"]["generations"] = 5, 2
    warnings = _generation_warnings(config, 12)
    assert len(warnings) == 2
    assert warnings[0].startswith("generation 0 (alpha 0.025, 12 tasks × 5 runs) has ")
    assert "power for a 5% saving (gate.min_improvement_pct), under 20%" in warnings[0]
    assert warnings[1].endswith("or set evolution.generations to 1")
    config["evolution"]["generations"] = 1
    assert _generation_warnings(config, 100) == []
