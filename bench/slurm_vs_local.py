"""The SLURM test's experiment on the single-node cluster against the local executor, back to back.

The experiment of tests/workflow/test_slurm.py (one task, the incumbent and the candidate arm, 2 runs, one
generation from the demo's initial overlay, session cap 1 unless `--cap`) in two throwaway copies of the
project: once with `snakemake --cores 2`, once with `--profile profiles/slurm` against the cluster `.ci/slurm up`
starts (the bench starts it in a scratch state folder and stops it after). Reports both walls, their ratio
(goal ≤ 1.5×) and the cluster jobs. Needs root (SLURM and munge).

    .venv/bin/python bench/slurm_vs_local.py [--group-components cells=4] [--repeat 3] [--cap 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from throwaway import REPO, copy_project, run_snakemake

CONFIG = {
    "experiment": "cluster",
    "tasks": {"only": ["money-thousands"]},
    "runs": 2,
    "gate": {"min_runs": 2, "rule": "upstream"},
    "selected_arms": ["workflow_direct"],
    "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
}


def timed_run(root: Path, extra: list[str], cap: int) -> float:
    (root / "bench.yaml").write_text(json.dumps(CONFIG))
    return run_snakemake(root, [*extra, "--resources", f"agent_sessions={cap}", "--configfile", "bench.yaml"])


def cluster_jobs(root: Path, run_started: float) -> list[dict]:
    """Every SLURM job whose working directory is ``root``: its comment (rule), and when it was submitted,
    started and ended inside SLURM, in seconds from the run's start."""
    listed = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", "%k|%V|%S|%e|%Z"], capture_output=True, text=True, check=True
    ).stdout
    jobs = []
    for line in listed.splitlines():
        comment, submitted, started, ended, workdir = line.split("|")
        if workdir != str(root):
            continue
        at = {
            name: round(_epoch(value) - run_started, 1)
            for name, value in (("submitted_s", submitted), ("started_s", started), ("ended_s", ended))
        }
        jobs.append({"rule": comment, **at})
    return sorted(jobs, key=lambda job: job["submitted_s"])


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group-components", default=None, help="e.g. cells=8 (default: the profile's)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of both runs, back to back")
    parser.add_argument("--cap", type=int, default=1, help="agent_sessions for both runs (the test's is 1)")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="skillbench-slurm-bench-") as scratch:
        base = Path(scratch)
        state = base / "slurm"
        subprocess.run([str(REPO / ".ci" / "slurm"), "up", str(state)], check=True, capture_output=True)
        try:
            for index in range(args.repeat):
                local, cluster = base / f"local{index}", base / f"cluster{index}"
                copy_project(local)
                copy_project(cluster)
                local_s = timed_run(local, ["--cores", "2"], args.cap)
                grouping = ["--group-components", args.group_components] if args.group_components else []
                started = time.time()
                cluster_s = timed_run(cluster, ["--profile", "profiles/slurm", *grouping], args.cap)
                rounds.append(
                    {
                        "local_s": round(local_s, 1),
                        "slurm_s": round(cluster_s, 1),
                        "ratio": round(cluster_s / local_s, 2),
                        "slurm_jobs": cluster_jobs(cluster, started),
                    }
                )
        finally:
            subprocess.run([str(REPO / ".ci" / "slurm"), "down", str(state)], capture_output=True)
    ratios = [entry["ratio"] for entry in rounds]
    report = {"session_cap": args.cap, "rounds": rounds, "median_ratio": statistics.median(ratios), "goal_ratio": 1.5}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
