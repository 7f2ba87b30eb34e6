"""The skillbench-slurm executor: what it changes about the SLURM plugin, and that Snakemake finds it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake_executor_plugin_skillbench_slurm import Executor, ExecutorSettings, jobs_at_once
from snakemake_executor_plugin_slurm import Executor as SlurmExecutor

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def executor(**settings: object) -> Executor:
    # The plugin's own constructor talks to SLURM; these tests need only the settings it reads.
    made = Executor.__new__(Executor)
    made.workflow = SimpleNamespace(
        executor_settings=ExecutorSettings(**settings),
        remote_execution_settings=SimpleNamespace(seconds_between_status_checks=10),
    )
    made._next_seconds_between_status_checks = None
    return made


def test_a_cluster_jobs_snakemake_runs_its_cells_itself_not_through_srun():
    args = executor().additional_general_args()
    assert "--executor local" in args and "slurm-jobstep" not in args
    # One job at a time unless the batch holds more sessions (below).
    assert "--jobs 1" in args


@pytest.mark.parametrize(
    ("resources", "at_once"),
    [({"agent_sessions": 3, "mem_mb": 1000}, 3), ({"agent_sessions": 1}, 1), ({"mem_mb": 1000}, 1), ({}, 1)],
)
def test_a_batch_runs_as_many_cells_at_once_as_the_sessions_it_holds(resources, at_once, monkeypatch):
    assert jobs_at_once(resources) == at_once
    # What the SLURM plugin would have the cluster job run, shortened; the batch's share of the cap replaces it.
    planned = "python -m snakemake --target-jobs 'run_cell:run=0' --executor local --jobs 1 --mode remote"
    monkeypatch.setattr(SlurmExecutor, "format_job_exec", lambda self, job: planned)
    command = executor().format_job_exec(SimpleNamespace(resources=resources))
    assert command == planned.replace("--jobs 1", f"--jobs {at_once}")


@pytest.mark.parametrize(("longest", "asked", "used"), [(5, 40, 5), (5, 2, 2), (None, 40, 40), (5, None, 10)])
def test_status_checks_are_never_further_apart_than_the_longest_gap(longest, asked, used):
    made = executor(max_seconds_between_status_checks=longest)
    made.next_seconds_between_status_checks = asked
    assert made.next_seconds_between_status_checks == used


def test_the_profile_selects_it_and_snakemake_knows_every_setting_the_profile_gives():
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "skillbench-slurm"
    flags = subprocess.run([SNAKEMAKE, "--help"], capture_output=True, text=True, check=True).stdout
    for key in profile:
        if key.startswith("skillbench-slurm-"):
            assert f"--{key} " in flags, key
