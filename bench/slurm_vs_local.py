"""The SLURM test's experiment on the single-node cluster against the local executor, back to back.

The experiment of tests/workflow/test_slurm.py (one task, the incumbent and the candidate arm, 2 runs, one
generation from the demo's initial overlay, session cap 1) in two throwaway copies of the project: once with
`snakemake --cores 2`, once with `--profile profiles/slurm` against the cluster `.ci/slurm up` starts (the bench
starts it in a scratch state folder and stops it after). Reports both walls, their ratio (goal ≤ 1.5×) and the
cluster jobs. Needs root (SLURM and munge).

    .venv/bin/python bench/slurm_vs_local.py [--group-components cells=4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from throwaway import REPO, SNAKEMAKE, copy_project, job_environment

CONFIG = {
    "experiment": "cluster",
    "tasks": {"only": ["money-thousands"]},
    "runs": 2,
    "gate": {"min_runs": 2, "rule": "upstream"},
    "selected_arms": ["workflow_direct"],
    "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
}
CAP = ["--resources", "agent_sessions=1"]


def timed_run(root: Path, extra: list[str]) -> float:
    (root / "bench.yaml").write_text(json.dumps(CONFIG))
    started = time.monotonic()
    done = subprocess.run(
        [SNAKEMAKE, *extra, *CAP, "--configfile", "bench.yaml"],
        cwd=root,
        env=job_environment(root),
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(extra)} failed:\n{done.stderr[-4000:]}")
    return wall


def cluster_jobs(root: Path) -> list[str]:
    """The comment (rule) of every SLURM job whose working directory is ``root``."""
    listed = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", "%k|%Z"], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line.split("|")[0] for line in listed.splitlines() if line.split("|")[-1] == str(root))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group-components", default=None, help="e.g. cells=8 (default: the profile's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skillbench-slurm-bench-") as scratch:
        base = Path(scratch)
        local, cluster, state = base / "local", base / "cluster", base / "slurm"
        copy_project(local)
        copy_project(cluster)
        subprocess.run([str(REPO / ".ci" / "slurm"), "up", str(state)], check=True, capture_output=True)
        try:
            local_s = timed_run(local, ["--cores", "2"])
            grouping = ["--group-components", args.group_components] if args.group_components else []
            cluster_s = timed_run(cluster, ["--profile", "profiles/slurm", *grouping])
            jobs = cluster_jobs(cluster)
        finally:
            subprocess.run([str(REPO / ".ci" / "slurm"), "down", str(state)], capture_output=True)
    report = {
        "local_s": round(local_s, 1),
        "slurm_s": round(cluster_s, 1),
        "ratio": round(cluster_s / local_s, 2),
        "slurm_jobs": jobs,
        "goal_ratio": 1.5,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
