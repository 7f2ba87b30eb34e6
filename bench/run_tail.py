"""A small run's tail: the seconds from its last cell's record to the end of the run (the reports, figures and
cell pages made after the last session), and how long checking its config takes.

Runs a small experiment of the default config in a throwaway copy of the project with the real snakemake command:
the demo suite's tasks (`--tasks`), `--runs` runs of workflow and baseline, and one generation of the demo's
hand-written candidate (tasks/demo/overlays/verify-once), so the tail holds a generation's report, gate and figures
as well as the sweep's. The tail is the run's end (snakemake exiting) minus the newest record.json's mtime. Then it
times `skillbench check` on the same config with one config-level mistake (an arm name with a typo in
`selected_arms`), which must answer without running any task check (goal: under 5 s).

    .venv/bin/python bench/run_tail.py [--tasks 2] [--runs 3] [--cores 2] [--check-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throwaway import copy_project, job_environment, run_snakemake

TASKS = ("money-thousands", "bulk-discount-threshold", "sku-normalization")
SKILLBENCH = str(Path(sys.executable).parent / "skillbench")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2, choices=range(1, len(TASKS) + 1))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--check-only", action="store_true", help="time the check only, run nothing")
    args = parser.parse_args()
    config = {
        "experiment": "tail",
        "runs": args.runs,
        "tasks": {"only": list(TASKS[: args.tasks])},
        "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
    }
    with tempfile.TemporaryDirectory(prefix="skillbench-bench-") as scratch:
        root = Path(scratch)
        copy_project(root)
        if not args.check_only:
            (root / "tail.yaml").write_text(json.dumps(config))
            started = time.time()
            wall = run_snakemake(root, ["--cores", str(args.cores), "--configfile", "tail.yaml"])
            ended = started + wall
            results = root / "results" / "tail"
            records = list(results.rglob("record.json"))
            last_cell = max(os.stat(path).st_mtime for path in records)
            pages = len(list(results.rglob("*.html")))
            tail_jobs = jobs_after(root, last_cell)
        (root / "mistake.yaml").write_text(json.dumps({**config, "selected_arms": ["workflw", "baseline"]}))
        check_started = time.monotonic()
        checked = subprocess.run(
            [SKILLBENCH, "check", "--configfile", "mistake.yaml"],
            cwd=root,
            env=job_environment(root),
            capture_output=True,
            text=True,
        )
        check_s = time.monotonic() - check_started
    load = os.getloadavg()[0]
    said = (checked.stdout + checked.stderr).strip().splitlines()
    print(f"check on a config mistake: {check_s:.2f} s (exit {checked.returncode}: {said[0][:160] if said else ''})")
    print(f"1-minute load average at the end: {load:.2f}")
    if args.check_only:
        return 0
    tail = ended - last_cell
    print(f"{len(records)} cells, {pages} HTML pages; run {wall:.1f} s; tail after the last cell {tail:.1f} s")
    print("jobs that ended after the last cell (rule: jobs, seconds of job wall summed):")
    for rule, (count, seconds) in sorted(tail_jobs.items(), key=lambda item: -item[1][1]):
        print(f"  {rule}: {count}, {seconds:.1f} s")
    return 0


def jobs_after(root: Path, moment: float) -> dict[str, tuple[int, float]]:
    """Per rule, the jobs Snakemake recorded as ending after ``moment`` (one per job, by its first output) and their
    summed wall time."""
    seen: dict[tuple[str, float], float] = {}
    for path in (root / ".snakemake" / "metadata").iterdir():
        try:
            metadata = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        start, end = metadata.get("starttime"), metadata.get("endtime")
        if start is None or end is None or end <= moment:
            continue
        seen[(metadata["rule"], start)] = end - start
    rules: dict[str, tuple[int, float]] = {}
    for (rule, _), seconds in seen.items():
        count, total = rules.get(rule, (0, 0.0))
        rules[rule] = (count + 1, total + seconds)
    return rules


if __name__ == "__main__":
    raise SystemExit(main())
