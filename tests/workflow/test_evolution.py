"""Candidate overlays, the promotion gate, the evolution loop, resume and apply — real snakemake and CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import WAIT_S
from skillbench.decision.policy import resolve_policy
from test_sweep import jobs_run

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
# One run of two tasks: enough to see the pipeline promote, resume and apply, far too few for the noise-aware
# rule (the task is the unit of replication), so these runs decide with the upstream rule's median floor.
SMALL = {
    "tasks": {"only": ["money-thousands", "sku-normalization"]},
    "runs": 1,
    "gate": {"rule": "upstream", "min_runs": 1},
}


def small(experiment: str, **evolution) -> dict:
    return {"experiment": experiment, **SMALL, "selected_arms": ["workflow_direct"], "evolution": evolution}


def promotion(project, experiment: str, gen: int) -> dict:
    return json.loads(project.results(experiment, f"gen{gen}", "promotion.json").read_text())


def decisions(summary: dict) -> list[tuple[int, str, str]]:
    return [
        (g["generation"], d["candidate_arm"], d["decision"]) for g in summary["generations"] for d in g["decisions"]
    ]


def test_manual_overlay_is_benchmarked_gated_and_regraded_offline(project):
    config = {
        "experiment": "manual",
        **SMALL,
        "selected_arms": ["workflow", "workflow_direct", "baseline"],
        "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
    }
    project.snakemake(config=config)

    overlay = json.loads(project.results("manual", "gen0", "overlay.json").read_text())
    assert overlay["required_candidate_arms"] == ["candidate_workflow", "candidate_workflow_direct"]
    assert overlay["candidate_origin"] == "manual-initial-overlay"
    rows = project.rows("manual", "gen0")
    assert [row["arm"] for row in rows[:5]] == [
        "workflow",
        "candidate_workflow",
        "workflow_direct",
        "candidate_workflow_direct",
        "baseline",
    ]
    # Generation 0's batch: both candidates beside their anchor (fresh cells of their incumbent arms, which are the
    # sweep's too), started in the order its schedule recorded; baseline, paired with no candidate, is the cache's.
    assert {row["arm"]: row["batch"] for row in rows} == {
        "workflow": "gen0",
        "candidate_workflow": "gen0",
        "workflow_direct": "gen0",
        "candidate_workflow_direct": "gen0",
        "baseline": "cache",
    }
    schedule = json.loads(project.results("manual", "gen0", "schedule", "look1.json").read_text())
    batch = sorted((row for row in rows if row["batch"] == "gen0"), key=lambda row: row["position"])
    assert [(row["task"], row["arm"], row["run"]) for row in batch] == [
        (cell["task"], cell["arm"], cell["run"]) for cell in schedule["cells"]
    ]
    starts = [row["started_at"] for row in batch]
    inversions = sum(later < earlier for index, earlier in enumerate(starts) for later in starts[index + 1 :])
    assert inversions <= 2, starts  # started in their drawn order (two slots; a second's rounding aside)
    assert sorted(row["task"] for row in project.rows("manual", "sweep") if row["arm"] == "workflow") == sorted(
        row["task"] for row in rows if row["arm"] == "workflow"
    )
    assert all(row["batch"] == "gen0" for row in project.rows("manual", "sweep") if row["arm"] != "baseline")
    for row in rows:
        if row["arm"].startswith("candidate_"):
            assert row["candidate_overlay_digest"] == overlay["digest"]
            incumbent = next(
                r for r in rows if r["arm"] == row["arm"].removeprefix("candidate_") and r["task"] == row["task"]
            )
            assert row["skill_digest"] != incumbent["skill_digest"]
    # Runs vary (the scripted model draws each cell's turns from its task, arm and run), so one run of
    # each arm is compared in total: the verify-once overlay drops the whole-suite turn of every session.
    for arm in ("workflow", "workflow_direct"):
        spent = {name: sum(row["cost_usd"] for row in rows if row["arm"] == name) for name in (arm, f"candidate_{arm}")}
        assert spent[f"candidate_{arm}"] < 0.95 * spent[arm], spent

    decided = promotion(project, "manual", 0)
    assert decided["run_status"] == "complete"
    assert [d["decision"] for d in decided["decisions"]] == ["promote", "promote"]
    assert [d["concurrency"]["batches"] for d in decided["decisions"]] == [["gen0"], ["gen0"]]
    assert decided["candidate_overlay_digest"] == overlay["digest"]
    assert decided["target_base_digests"] == overlay["target_base_digests"]
    for decision in decided["decisions"]:
        assert decision["statistics"]["sign_test"]["wins"] == 2

    report = project.results("manual", "gen0", "report.md").read_text()
    assert "candidate_workflow_direct" in report and "Candidate vs incumbent" in report

    regraded = project.root / "regraded.json"
    result = subprocess.run(
        [
            SKILLBENCH,
            "gate",
            str(project.results("manual", "gen0", "results.jsonl")),
            "--out",
            str(regraded),
            "--min-runs",
            "1",
            "--rule",
            "upstream",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    offline = json.loads(regraded.read_text())
    for document in (offline, decided):
        document.pop("generated_at")
        document.pop("evidence_expires_at")
    assert offline == decided

    # The run's own policy (its run.json) says min_runs 1; the gate's default minimum is stricter.
    stricter = subprocess.run(
        [
            SKILLBENCH,
            "gate",
            str(project.results("manual", "gen0", "results.jsonl")),
            "--out",
            str(regraded),
            "--min-runs",
            str(resolve_policy(None).min_runs),
        ],
        capture_output=True,
        text=True,
    )
    assert stricter.returncode == 0
    assert "insufficient_evidence" in stricter.stdout


def test_bad_overlay_fails_before_any_session(project):
    bad = project.root / "bad-overlay" / ".claude" / "skills" / "change-work"
    bad.mkdir(parents=True)
    (bad / "helper.py").write_text("print('not markdown')\n")
    result = project.snakemake(config=small("bad", generations=1, initial_overlay="bad-overlay"), check=False)
    assert result.returncode != 0
    assert "helper.py is not allowed" in result.stdout + result.stderr
    assert not (project.root / "results" / "bad").exists()


def test_drifted_skill_target_fails_before_any_session(project):
    skill = project.root / ".claude" / "skills" / "change-work" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nAn uncommitted edit.\n")
    result = project.snakemake(
        config=small("drift", generations=1, initial_overlay="tasks/demo/overlays/verify-once"), check=False
    )
    assert result.returncode != 0
    assert "differ from HEAD" in result.stdout + result.stderr
    assert not (project.root / "results" / "drift").exists()


def run_until(project, config: dict, ready, timeout: float = WAIT_S) -> subprocess.Popen:
    """Start snakemake and return once `ready()` holds (the caller then kills it)."""
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        "--cores",
        "2",
        "--configfile",
        str(project.write_config(config)),
    ]
    process = subprocess.Popen(
        command, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "snakemake finished before the interruption point"
        assert time.monotonic() < deadline, "the interruption point never came"
        time.sleep(0.2)
    return process


def test_evolution_loop_promotes_resumes_after_sigkill_and_applies(project):
    config = small("evo", generations=3)
    logs = project.root / "logs" / "evo" / "run_cell" / "gen1"
    process = run_until(project, config, lambda: logs.exists() and any(logs.rglob("*.log")))
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    finished = {path: path.stat().st_mtime_ns for path in project.results("evo").rglob("record.json")}
    # Generation 0's batch (the candidate and its anchor, which the sweep shows too) had finished; nothing is cached.
    assert len({path for path in finished if "/gen0/cells/" in str(path)}) == 4
    assert not any("/gen" not in str(path) for path in finished)
    project.snakemake("--unlock", config=config)
    resumed = project.snakemake(config=config)
    output = resumed.stdout + resumed.stderr

    for path, mtime in finished.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was recomputed"
    rerun_cells = jobs_run(output, "run_cell")
    assert all("cellset=gen1/cells" in job for job in rerun_cells), rerun_cells
    assert jobs_run(output, "propose_overlay") == []
    assert jobs_run(output, "freeze_overlay") == []

    summary = json.loads(project.results("evo", "summary.json").read_text())
    assert summary["outcome"] == "promoted" and summary["promoted_generation"] == 1
    assert decisions(summary) == [
        (0, "candidate_workflow_direct", "keep_incumbent"),
        (1, "candidate_workflow_direct", "promote"),
    ]
    assert not project.results("evo", "gen2").exists()
    # Each generation ran its own anchor beside its candidate: fresh sessions, the gate comparing only those. The
    # scripted model plays a (task, arm, run) alike whenever it runs, so the anchors cost what the sweep's did.
    anchors = [
        [row for row in project.rows("evo", f"gen{gen}") if not row["arm"].startswith("candidate_")] for gen in (0, 1)
    ]
    assert anchors[0] == project.rows("evo", "sweep")
    assert [row["batch"] for row in anchors[0] + anchors[1]] == ["gen0", "gen0", "gen1", "gen1"]
    assert [row["cost_usd"] for row in anchors[0]] == [row["cost_usd"] for row in anchors[1]]
    assert not {s for row in anchors[0] for s in row["session_ids"]} & {
        s for row in anchors[1] for s in row["session_ids"]
    }
    assert promotion(project, "evo", 1)["decisions"][0]["concurrency"]["batches"] == ["gen1"]
    # Generation 1's report: what its anchor cost, and how far it moved since the sweep's cells (not at all here).
    report = project.results("evo", "gen1", "report.md").read_text()
    assert "## The anchor" in report and "fresh cells of workflow_direct (batch gen1): anchor 2 cells" in report
    assert "| workflow_direct | all tasks (sum of task means) | gen0 |" in report and "| +0.0 |" in report
    # Generation 1's proposer saw generation 0's rejection.
    staged = project.results("evo", "gen1", "evidence", "gate-summary.json").read_text()
    assert "keep_incumbent" in staged
    assert "run the verify command once" in project.results("evo", "gen1", "proposal.md").read_text()

    applied = subprocess.run(
        [SKILLBENCH, "apply", "results/evo", "--configfile", "test-config.yaml", "--yes"],
        cwd=project.root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert applied.returncode == 0, applied.stderr
    assert ".claude/skills/change-work/SKILL.md" in applied.stdout
    # What it wrote was shown first: no content flags, and the whole diff.
    assert "content flags: none" in applied.stdout and "\n+- Run the verify command once" in applied.stdout
    diff = project.git("diff", "--", ".claude/skills")
    assert "+- Run the verify command once" in diff
    assert project.git("status", "--porcelain", "--", ".claude/skills").startswith(" M")


def test_generation_zero_evidence_comes_from_seed_results_and_learnings(project):
    # The direct arm resolves nothing on this task, so the full target would stop at the harness-health
    # check; the seed only needs the sweep's rows.
    project.snakemake(
        "results/seed/sweep/results.jsonl",
        config={
            "experiment": "seed",
            **SMALL,
            "selected_arms": ["workflow_direct"],
            "tasks": {"only": ["bulk-discount-threshold"]},
            "evolution": {"generations": 0},
        },
    )
    learnings = project.root / "learnings.jsonl"
    learnings.write_text(
        '{"skill": "change-work", "task": "t", "friction": "ran the suite twice", "suggestion": "once"}\n'
        '{"skill": "unrelated-skill", "friction": "not for this family"}\n'
        "not json\n"
    )
    config = {
        **small("seeded", generations=1, seed_results="results/seed/sweep", learnings="learnings.jsonl"),
        "tasks": {"only": ["bulk-discount-threshold"]},
    }
    project.snakemake("results/seeded/gen0/evidence", config=config)

    evidence = project.results("seeded", "gen0", "evidence")
    rows = json.loads((evidence / "selected-rows.json").read_text())
    assert [(row["task"], row["arm"], row["error_kind"]) for row in rows] == [
        ("bulk-discount-threshold", "workflow_direct", "oracle-failed")
    ]
    assert rows[0]["patch_file"] == "patch-0.diff" and (evidence / "patch-0.diff").is_file()
    assert rows[0]["transcript_files"] and all((evidence / name).is_file() for name in rows[0]["transcript_files"])
    staged_learnings = json.loads((evidence / "learnings.json").read_text())
    assert [item["skill"] for item in staged_learnings] == ["change-work"]
    assert oct(evidence.stat().st_mode & 0o777) == "0o700"
    # The proposer has not run: only the evidence was asked for.
    assert not project.results("seeded", "gen0", "proposal.md").exists()
