"""The same experiment on a real single-node SLURM (the skillbench-slurm executor of profiles/slurm) and locally.

Starts SLURM with .ci/slurm, runs a reduced candidate benchmark with --profile profiles/slurm,
kills the submitting snakemake mid-run, resumes it, and compares rows and the gate decision with
a local run. The session cap of 1 must hold on both executors; the local run, made once for the
module, is also the test that the cap serialises sessions on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import WAIT_S, Project, copy_project
from slurm_fixture import slurm_cluster, slurm_job_history, slurm_unavailable
from test_sweep import assert_no_overlap

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
CONFIG = {
    "experiment": "cluster",
    "tasks": {"only": ["money-thousands"]},
    "runs": 2,
    # This test is about the executor. With runs that vary, two runs of one task are too few for the
    # noise-aware gate to tell the overlay's saving (docs/gate.md); the upstream rule decides on medians.
    "gate": {"min_runs": 2, "rule": "upstream"},
    "selected_arms": ["workflow_direct"],
    "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
}
CAP = ("--resources", "agent_sessions=1")
# On the cluster a batch gets a share of a cap of two: it runs that many of its cells at once, never more.
CLUSTER_CAP = ("--resources", "agent_sessions=2")
# A SLURM job of cells is a batch of them (the profile's group `cells`, commented `rule_cells_run_cell`), or one
# cell (`rule_run_cell_wildcards_…`) where a batch would hold a single cell.
CELL_JOBS = {"cells_run_cell", "run_cell"}


def outcome(project) -> tuple[list, list]:
    rows = [
        (r["task"], r["arm"], r["run"], r["resolved"], r["error_kind"], r["num_turns"], r["cost_usd"])
        for r in project.rows("cluster", "gen0")
    ]
    decided = json.loads(project.results("cluster", "gen0", "promotion.json").read_text())
    return rows, [(d["candidate_arm"], d["decision"], d["reasons"]) for d in decided["decisions"]]


def windows(project) -> list[tuple[str, str, str]]:
    found = []
    for path in project.results("cluster").rglob("record.json"):
        for session in json.loads(path.read_text())["timing"]["sessions"]:
            found.append((session["started_at"], session["finished_at"], str(path)))
    return sorted(found)


def slurm_snakemake(project, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    # SIGINT on timeout: the plugin cancels its SLURM jobs and releases the lock.
    command = [
        "timeout",
        "-s",
        "INT",
        "-k",
        "30",
        str(timeout),
        SNAKEMAKE,
        "--profile",
        "profiles/slurm",
        "--configfile",
        str(project.write_config(CONFIG)),
        *args,
    ]
    return subprocess.run(command, cwd=project.root, capture_output=True, text=True)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Project:
    """The experiment on the local executor under the session cap of one, on two cores: run once, for the
    cap's own test and as the cluster run's reference."""
    local = copy_project(tmp_path_factory.mktemp("local") / "project")
    local.snakemake(*CAP, config=CONFIG)
    return local


def test_session_cap_of_one_serialises_sessions_on_two_cores(local_run):
    assert_no_overlap(windows(local_run))


def test_ready_cells_run_run_major_so_the_arms_of_a_pair_finish_their_runs_together(local_run):
    # All four cells are ready at once (after the task check); under the cap of one they run one at a time.
    runs_in_start_order = [Path(path).parent.name for _, _, path in windows(local_run)]
    assert runs_in_start_order == ["run0", "run0", "run1", "run1"], windows(local_run)


def test_cluster_run_matches_local_run_resumes_after_a_crash_and_batches_use_their_share_of_the_cap(
    project, local_run, tmp_path
):
    reason = slurm_unavailable()
    assert reason is None, f"this machine cannot run the SLURM test: {reason}"

    with slurm_cluster(tmp_path / "slurm") as state:
        command = [
            SNAKEMAKE,
            "--profile",
            "profiles/slurm",
            *CLUSTER_CAP,
            "--configfile",
            str(project.write_config(CONFIG)),
        ]
        crashed = subprocess.Popen(
            command, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + WAIT_S
        while not any(job["rule"] in CELL_JOBS for job in slurm_job_history(state, workdir=project.root)):
            assert crashed.poll() is None, "snakemake ended before any cell was submitted"
            assert time.monotonic() < deadline, "no cell was ever submitted to SLURM"
            time.sleep(0.5)
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.wait()
        # After a crash: cancel the orphaned jobs of the dead run, unlock, rerun.
        subprocess.run(["scancel", "--user", "root"], check=True)
        unlock = slurm_snakemake(project, "--unlock")
        assert unlock.returncode == 0, unlock.stderr[-3000:]
        resumed = slurm_snakemake(project, *CLUSTER_CAP)
        assert resumed.returncode == 0, f"{resumed.stdout[-3000:]}\n{resumed.stderr[-6000:]}"
        jobs = slurm_job_history(state, workdir=project.root)

    # The four cells went to SLURM in batches: fewer cell jobs finished than there are cells.
    finished_cell_jobs = [job for job in jobs if job["rule"] in CELL_JOBS and job["state"] == "COMPLETED"]
    assert 1 <= len(finished_cell_jobs) < 4, jobs
    assert any(job["rule"] == "cells_run_cell" for job in finished_cell_jobs), jobs
    # Bookkeeping rules, task bindings and task checks run in the submitting snakemake, never in the queue: only
    # cells went to SLURM.
    assert {job["rule"] for job in jobs} <= CELL_JOBS, {job["rule"] for job in jobs}

    rows, decisions = outcome(project)
    assert len(rows) == len({row[:3] for row in rows}) == 4, "duplicate or missing rows after the resume"
    assert (rows, decisions) == outcome(local_run)
    assert decisions[0][1] == "promote"
    assert most_at_once(windows(project)) == 2, windows(project)


def most_at_once(windows: list[tuple[str, str, str]]) -> int:
    """The most sessions that were running at one moment."""
    events = sorted([(start, 1) for start, _, _ in windows] + [(end, -1) for _, end, _ in windows])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most
