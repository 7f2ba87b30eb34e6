"""Median harness overhead per cell, in-cell and all-in.

In-cell: the cell's own wall time minus its time in sessions, setup, verify and the oracle (the
record's timing). All-in: the slot the cell's job held, from the start Snakemake recorded for it to
its end (`.snakemake/metadata`: job start, the job script's interpreter and imports included), minus
the same work. Runs the default experiment's benchmark sweep (no evolution) with the real snakemake
command in a throwaway copy of the project. Target: ≤ 0.5 s per cell, both.

    .venv/bin/python bench/harness_overhead.py [--runs 3] [--backend bwrap|none] [--cores 2] [--agent codex]

`--agent` runs every arm of the default experiment on that agent CLI (`arms.<name>.agent`; its sessions ask for
`model.name`, which the scripted model plays whatever the CLI calls it).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import tempfile
from pathlib import Path

from throwaway import copy_project, run_snakemake

# The default experiment's arms (config/config.yaml), each given `--agent` when it is set.
ARMS = ("workflow", "workflow_direct", "baseline")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=["bwrap", "none"], default="bwrap")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--agent", default=None, help="the agent CLI every arm runs (default: each arm's own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skillbench-bench-") as scratch:
        root = Path(scratch)
        copy_project(root)
        (root / "bench.yaml").write_text(
            json.dumps(
                {
                    "experiment": "bench",
                    "runs": args.runs,
                    "sandbox": {"backend": args.backend},
                    "evolution": {"generations": 0},
                    **({"arms": {arm: {"agent": args.agent} for arm in ARMS}} if args.agent else {}),
                }
            )
        )
        wall = run_snakemake(root, ["--cores", str(args.cores), "--configfile", "bench.yaml"])
        records = sorted((root / "results" / "bench" / "cells").rglob("record.json"))
        cells = [json.loads(path.read_text()) for path in records]
        timings = [cell["timing"] for cell in cells]
        outcomes = sorted(
            str(cell["row"]["error_kind"] or ("resolved" if cell["row"]["resolved"] else "unresolved"))
            for cell in cells
        )
        slots = job_slots(root, [path.relative_to(root).as_posix() for path in records])
    overhead = [timing["overhead_s"] for timing in timings]
    all_in = [slot - work(timing) for slot, timing in zip(slots, timings, strict=True)]
    report = {
        "cells": len(timings),
        "outcomes": {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))},
        "sandbox_backend": args.backend,
        "agent": args.agent or "each arm's own",
        "median_overhead_s": round(statistics.median(overhead), 3),
        "p90_overhead_s": round(statistics.quantiles(overhead, n=10)[-1], 3) if len(overhead) > 1 else overhead[0],
        "max_overhead_s": round(max(overhead), 3),
        "median_all_in_overhead_s": round(statistics.median(all_in), 3),
        "max_all_in_overhead_s": round(max(all_in), 3),
        "median_cell_wall_s": round(statistics.median(t["wall_s"] for t in timings), 3),
        "median_sessions_s": round(statistics.median(t["sessions_s"] for t in timings), 3),
        "workflow_wall_s": round(wall, 1),
        "target_s": 0.5,
    }
    print(json.dumps(report, indent=2))
    return 0


def work(timing: dict) -> float:
    """Seconds of a cell spent in what it measures: sessions, setup, verify and the oracle."""
    return timing["wall_s"] - timing["overhead_s"]


def job_slots(root: Path, outputs: list[str]) -> list[float]:
    """Seconds each output's job held its slot, from the start to the end time Snakemake recorded for it."""
    slots = []
    for output in outputs:
        name = base64.urlsafe_b64encode(output.encode()).decode()
        metadata = json.loads((root / ".snakemake" / "metadata" / name).read_text())
        slots.append(metadata["endtime"] - metadata["starttime"])
    return slots


if __name__ == "__main__":
    raise SystemExit(main())
