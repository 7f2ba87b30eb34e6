"""The default experiment's makespan against its ideal: how long the session slots stood idle.

Runs `snakemake --cores 2` on config/config.yaml (or `--configfile`) in a throwaway copy of the project and
reads when each job started and ended (`.snakemake/metadata`). The session jobs (cells and proposer sessions,
the jobs that hold one of the `agent_sessions` slots) ran from the first one's start to the last one's end:
that span is the makespan. Two ideals:

- packed: the session jobs' slot times (start to end as Snakemake recorded them, job start included) summed and
  spread over the cap without a gap. Its ratio is the idle slot time: scheduling, the steps between
  generations that no session can overlap, a slot waiting for a core. Goal ≤ 1.10.
- cell work: the cells' wall times (each record's own timing) over the cap, the issue's first measure; it also
  counts each job's start and the proposers' sessions as overhead.

It lists the longest stretches in which a slot stood idle and which other jobs ran then.

    .venv/bin/python bench/makespan.py [--runs 16] [--generations 2] [--cap 2] [--configfile config/config.yaml]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from throwaway import copy_project, run_snakemake


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", default=None, help="an experiment config of the project (default: the demo)")
    parser.add_argument("--runs", type=int, default=None, help="override the config's runs")
    parser.add_argument("--generations", type=int, default=None, help="override evolution.generations")
    parser.add_argument("--cap", type=int, default=2, help="agent_sessions (and cores)")
    args = parser.parse_args()
    overrides: dict[str, Any] = {"experiment": "makespan"}
    if args.runs is not None:
        overrides["runs"] = args.runs
    if args.generations is not None:
        overrides["evolution"] = {"generations": args.generations}
    with tempfile.TemporaryDirectory(prefix="skillbench-makespan-") as scratch:
        root = Path(scratch)
        copy_project(root)
        (root / "bench.yaml").write_text(json.dumps(overrides))
        configs = [args.configfile, "bench.yaml"] if args.configfile else ["bench.yaml"]
        wall = run_snakemake(
            root, ["--cores", str(args.cap), "--resources", f"agent_sessions={args.cap}", "--configfile", *configs]
        )
        jobs = recorded_jobs(root)
        # (slot, wall) of each cell: the job's time as Snakemake saw it, and the cell's own time inside it.
        cells = [
            (job["endtime"] - job["starttime"], json.loads((root / output).read_text())["timing"]["wall_s"])
            for output, job in jobs.items()
            if job["rule"] == "run_cell" and output.endswith("/record.json")
        ]
    print(json.dumps(makespan_report(jobs, cells, args.cap, wall), indent=2))
    return 0


def recorded_jobs(root: Path) -> dict[str, dict[str, Any]]:
    """Every output's metadata record (rule, start and end time), by output path."""
    jobs = {}
    for path in (root / ".snakemake" / "metadata").iterdir():
        try:
            output = base64.urlsafe_b64decode(path.name.encode()).decode()
            record = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
        if record.get("starttime") and record.get("endtime"):
            jobs[output] = record
    return jobs


# The one output that stands for its job (a job's outputs are marked started a few milliseconds apart).
JOB_OUTPUT = {"run_cell": "/record.json", "propose_overlay": "/proposal.md"}


def one_per_job(jobs: dict[str, dict[str, Any]]) -> list[tuple[float, float, str]]:
    """(start, end, rule) of each job: a session job by its standing output; any other job by its rule and start
    to the tenth of a second (enough to name the steps that ran beside an idle slot)."""
    found: dict[tuple[float, str], float] = {}
    for output, record in jobs.items():
        rule = record["rule"]
        if rule in JOB_OUTPUT:
            if output.endswith(JOB_OUTPUT[rule]):
                found[(record["starttime"], rule)] = record["endtime"]
            continue
        key = (round(record["starttime"], 1), rule)
        found[key] = max(found.get(key, 0.0), record["endtime"])
    return sorted((start, end, rule) for (start, rule), end in found.items())


def idle_stretches(
    sessions: list[tuple[float, float, str]], others: list[tuple[float, float, str]], cap: int
) -> list[dict[str, Any]]:
    """The stretches inside the span where fewer than ``cap`` session jobs ran, longest first, with the
    non-session jobs that ran during each."""
    events = sorted([(start, 1) for start, _, _ in sessions] + [(end, -1) for _, end, _ in sessions])
    stretches, running, opened = [], 0, None
    for moment, step in events:
        running += step
        if running < cap and opened is None:
            opened = moment
        elif running >= cap and opened is not None:
            stretches.append((opened, moment))
            opened = None
    span_end = max(end for _, end, _ in sessions)
    if opened is not None:
        stretches.append((opened, span_end))
    rows = []
    for begin, finish in stretches:
        if finish <= begin or begin >= span_end:
            continue
        during = sorted({rule for start, end, rule in others if start < finish and end > begin})
        rows.append({"seconds": round(finish - begin, 2), "at_s": None, "other_jobs": during, "_begin": begin})
    first = min(start for start, _, _ in sessions)
    for row in rows:
        row["at_s"] = round(row.pop("_begin") - first, 1)
    return sorted(rows, key=lambda row: -row["seconds"])


def makespan_report(
    jobs: dict[str, dict[str, Any]], cells: list[tuple[float, float]], cap: int, wall: float
) -> dict[str, Any]:
    every = one_per_job(jobs)
    sessions = [job for job in every if job[2] in JOB_OUTPUT]
    others = [job for job in every if job[2] not in JOB_OUTPUT]
    span = max(end for _, end, _ in sessions) - min(start for start, _, _ in sessions)
    slot_seconds = sum(end - start for start, end, _ in sessions)
    packed = slot_seconds / cap
    cell_work = sum(wall for _, wall in cells) / cap
    idle = idle_stretches(sessions, others, cap)
    return {
        "cells": len(cells),
        "proposer_sessions": sum(1 for job in sessions if job[2] == "propose_overlay"),
        "session_cap": cap,
        "workflow_wall_s": round(wall, 1),
        "makespan_s": round(span, 1),
        "ideal_packed_s": round(packed, 1),
        "ratio_packed": round(span / packed, 3),
        "ideal_cell_walls_s": round(cell_work, 1),
        "ratio_cell_walls": round(span / cell_work, 3),
        "median_cell_job_start_and_end_s": round(statistics.median(slot - wall for slot, wall in cells), 3),
        "idle_slot_s": round(span * cap - slot_seconds, 1),
        "longest_idle_stretches": idle[:6],
        "load_1min_after": round(os.getloadavg()[0], 2),
        "goal_ratio_packed": 1.10,
    }


if __name__ == "__main__":
    raise SystemExit(main())
