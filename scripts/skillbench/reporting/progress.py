"""Run progress: cells done/planned, cells running, spend so far, an ETA; ``progress.json`` and ``skillbench status``.

Owns the run plan (written when a run starts: which cells the config implies and the session
cap), the registry of running cells (one small file per running cell job, removed when it
ends), the progress snapshot recomputed from the files on disk, its one-line rendering, and
``progress.json`` (replaced atomically under an exclusive lock each time a cell job ends).
Everything is recomputed from disk, so the same numbers come out while a run goes on, after it
finished and after a crash: a running entry whose process is gone counts as interrupted.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import hashlib
import json
import math
import os
import socket
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypedDict

from skillbench.base import artifacts, layout
from skillbench.base.records import RunRecord
from skillbench.decision.aggregate import is_valid
from skillbench.decision.policy import GatePolicy
from skillbench.decision.promotion import is_promoted
from skillbench.execution.access import RunSpend
from skillbench.experiment import runrecord
from skillbench.experiment.configcheck import GENERATIONS_ADVICE


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return artifacts.utc_timestamp(moment)


# ─── The plan ────────────────────────────────────────────────────────────────


def run_plan(
    *,
    experiment: str,
    task_ids: list[str],
    arms: list[str],
    candidate_arms: list[str],
    runs: int,
    generations: int,
    session_cap: int | None,
    started_at: str,
    anchor_arms: list[str] | None = None,
) -> dict[str, Any]:
    """What a run will do, fixed when it starts: the cells of every arm and the generations it may run.

    ``arms`` are the incumbent arms; ``anchor_arms`` those each generation runs afresh beside its candidates (their
    cells live in the generation's folder, generation 0's serving the sweep too), the others live in the cache."""
    return {
        "schema": "progress-plan/v1",
        "experiment": experiment,
        "tasks": list(task_ids),
        "arms": list(arms),
        "anchor_arms": list(anchor_arms or []),
        "candidate_arms": list(candidate_arms),
        "runs": runs,
        "generations": generations,
        "session_cap": session_cap,
        "started_at": started_at,
    }


def write_plan(results_dir: str | Path, plan: dict[str, Any]) -> None:
    """Written when a run starts (workflow/rules/run_hooks.smk); a new plan forgets an earlier run's running cells."""
    root = Path(results_dir)
    artifacts.atomic_write_text(Path(layout.progress_plan(root)), artifacts.canonical_json(plan))
    running = Path(layout.progress_running(root))
    running.mkdir(parents=True, exist_ok=True)
    for entry in running.glob("*.json"):
        entry.unlink(missing_ok=True)


def _anchor_arms(plan: dict[str, Any]) -> list[str]:
    """A plan's anchor arms (none in a plan written before anchors ran)."""
    return list(plan.get("anchor_arms") or [])


def incumbent_cell_count(plan: dict[str, Any]) -> int:
    """The cache's cells: the incumbent arms no generation runs as its anchor."""
    cached = [arm for arm in plan["arms"] if arm not in _anchor_arms(plan)]
    return len(plan["tasks"]) * plan["runs"] * len(cached)


def candidate_cell_count(plan: dict[str, Any]) -> int:
    """One generation's batch: its candidates' cells and its anchor's."""
    return len(plan["tasks"]) * plan["runs"] * (len(plan["candidate_arms"]) + len(_anchor_arms(plan)))


def planned_cells(plan: dict[str, Any], generations: int) -> Callable[[tuple[int | None, str, str, int]], bool]:
    """Whether a cell, by its (generation or None, task, arm, run), is one the plan may run in ``generations``
    generations (sets made once: a snapshot asks for every record of the run)."""
    tasks, candidates, runs = set(plan["tasks"]), set(plan["candidate_arms"]), plan["runs"]
    anchors = set(_anchor_arms(plan))
    cached = set(plan["arms"]) - anchors
    batch = candidates | anchors

    def planned(key: tuple[int | None, str, str, int]) -> bool:
        generation, task, arm, run = key
        if task not in tasks or run >= runs:
            return False
        if generation is None:
            return arm in cached
        return generation < generations and arm in batch

    return planned


def effective_generations(root: Path, plan: dict[str, Any]) -> int:
    """Generations the run does: all it may run, or up to the first promoted one (the chain stops there)."""
    for generation in range(plan["generations"]):
        promotion = Path(layout.promotion(root, generation))
        try:
            document = json.loads(promotion.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and is_promoted(document):
            return generation + 1
    return plan["generations"]


# ─── Running cells ───────────────────────────────────────────────────────────


def _entry_name(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()[:24] + ".json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    # A killed job whose parent died too stays a zombie until something reaps it: it is not running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def running_cells(root: Path, host: str | None = None) -> tuple[list[str], list[str]]:
    """(running, interrupted) cell labels. An entry of this host whose process is gone was interrupted;
    entries of other hosts (cluster nodes) are taken at their word."""
    host = host or socket.gethostname()
    running, interrupted = [], []
    folder = Path(layout.progress_running(root))
    for entry in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            document = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        label = str(document.get("cell", entry.stem))
        if document.get("host") == host and not _alive(int(document.get("pid", 0))):
            interrupted.append(label)
        else:
            running.append(label)
    return running, interrupted


# ─── The snapshot ────────────────────────────────────────────────────────────


def _proposer_costs(root: Path, generations: int) -> list[float | None]:
    costs = []
    for generation in range(generations):
        path = Path(layout.proposer_session(root, generation))
        if path.is_file():
            try:
                costs.append(json.loads(path.read_text(encoding="utf-8"))["session"].get("cost_usd"))
            except (OSError, ValueError, KeyError, TypeError):
                costs.append(None)
    return costs


def run_state(*, alive: bool, running: int, finished_run: bool, interrupted: int, waiting_for_look: bool) -> str:
    """finished / interrupted / running / waiting_for_look, from whether the run's snakemake lives (``alive``), its
    running cell jobs, whether this run wrote the summary, jobs that died, and whether the next batch of cells waits
    for a look of a sequential design."""
    if not alive:
        return "finished" if finished_run and not interrupted else "interrupted"
    if running:
        return "running"
    return "waiting_for_look" if waiting_for_look else "running"


def summarize(
    *,
    plan: dict[str, Any],
    finished: list[dict[str, Any]],
    running: int,
    interrupted: int,
    proposer_costs: list[float | None],
    generations: int,
    finished_run: bool,
    now: datetime,
    alive: bool | None = None,
    sequential: bool = False,
    metered_usd: float = 0.0,
) -> dict[str, Any]:
    """The progress snapshot from plain values.

    ``finished`` holds one ``{"cost_usd": float | None, "wall_s": float}`` per finished planned cell;
    ``finished_run`` says this run wrote the run summary; ``alive`` whether the run's snakemake still lives (None:
    unknown, then a running cell job is the sign of life); ``sequential`` that later batches wait for looks.
    Spend sums measured costs (cells and proposer sessions), or is ``metered_usd`` (the experiment's spend meter,
    which also holds retried and killed attempts) where that says more; unmeasured ones are counted, never 0.
    ETA (a running run only) = remaining cells in waves of ``session_cap`` × the median cell wall time.
    """
    planned = incumbent_cell_count(plan) + generations * candidate_cell_count(plan)
    done = len(finished)
    costs = [cell["cost_usd"] for cell in finished] + list(proposer_costs)
    measured = [cost for cost in costs if cost is not None]
    median_cell = statistics.median(cell["wall_s"] for cell in finished) if finished else None
    remaining = max(planned - done, 0)
    state = run_state(
        alive=bool(running) if alive is None else alive,
        running=running,
        finished_run=finished_run,
        interrupted=interrupted,
        waiting_for_look=sequential and remaining > 0,
    )
    cap = plan.get("session_cap") or 1
    if state == "finished":
        # A sequential design whose looks stopped early did not need the cells it might have run.
        planned, eta = done, 0.0
    elif state != "running" or median_cell is None:
        eta = None
    else:
        eta = round(-(-remaining // cap) * median_cell, 1)
    return {
        "schema": "progress/v1",
        "experiment": plan["experiment"],
        "state": state,
        "cells_done": done,
        "cells_planned": planned,
        "cells_running": running,
        "cells_interrupted": interrupted,
        "generations": generations,
        "spend_usd": round(max(sum(measured), metered_usd), 6),
        "unmeasured_costs": len(costs) - len(measured),
        "median_cell_s": None if median_cell is None else round(median_cell, 3),
        "session_cap": plan.get("session_cap"),
        "eta_s": eta,
        "started_at": plan["started_at"],
        "updated_at": _iso(now),
    }


def _run_record(root: Path) -> RunRecord | None:
    try:
        return runrecord.read_run_record(root)
    except artifacts.ArtifactError:
        return None


def _parsed(timestamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _ended_finished(root: Path, started_at: str) -> bool:
    """This run ended with every target made: its end hook wrote a finished progress.json after it started, or
    the summary (made last) is newer than the start."""
    started = _parsed(started_at)
    try:
        last = json.loads(Path(layout.progress(root)).read_text(encoding="utf-8"))
        updated = _parsed(str(last.get("updated_at")))
        if last.get("state") == "finished" and updated is not None and started is not None and updated >= started:
            return True
    except (OSError, ValueError, AttributeError):
        pass
    try:
        written = datetime.fromtimestamp(Path(layout.summary(root)).stat().st_mtime, UTC)
    except OSError:
        return False
    return started is None or written >= started.replace(microsecond=0)


def snapshot(
    results_dir: str | Path,
    *,
    now: datetime | None = None,
    host: str | None = None,
    alive: bool | None = None,
    ended_ok: bool | None = None,
    tally: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Recompute progress from the files under ``results/<experiment>``. The run's end hook says ``alive=False`` and
    whether every target was made (``ended_ok``); otherwise run.json's process and the files decide. ``tally``
    (`update` keeps it in the progress folder) holds what an earlier snapshot read of each record and each final
    spend file: only a file that changed since is read again, and the tally is brought up to date."""
    root = Path(results_dir)
    plan_path = Path(layout.progress_plan(root))
    if not plan_path.is_file():
        raise artifacts.ArtifactError(
            f"{plan_path}: no run plan; start the run with snakemake first "
            f"(or check that {root} is a results/<experiment> folder)"
        )
    plan = artifacts.read_json(plan_path)
    record = _run_record(root)
    if alive is None and record is not None:
        alive = runrecord.run_alive(record)
    generations = effective_generations(root, plan)
    tally = tally if tally is not None else {}
    seen: dict[str, Any] = tally["records"] if isinstance(tally.get("records"), dict) else {}
    noted: dict[str, Any] = {}
    finished = []
    planned = planned_cells(plan, generations)
    for path in layout.cell_records_on_disk(root):
        key = layout.parse_cell_record(path.relative_to(root))
        if key is not None and planned(key):
            cell = _finished_cell(path, seen, noted)
            if cell is not None:
                finished.append(cell)
    tally["records"] = noted
    running, interrupted = running_cells(root, host)
    sequential = record is not None and isinstance(record["config"].get("runs"), dict)
    started = record["started_at"] if record is not None else plan["started_at"]
    return summarize(
        plan=plan,
        finished=finished,
        running=len(running),
        interrupted=len(interrupted),
        proposer_costs=_proposer_costs(root, generations),
        generations=generations,
        finished_run=(_ended_finished(root, started) if ended_ok is None else ended_ok) and not running,
        now=now or _now(),
        alive=alive,
        sequential=sequential,
        metered_usd=_metered(root, tally),
    )


def _finished_cell(path: Path, seen: dict[str, Any], noted: dict[str, Any]) -> dict[str, Any] | None:
    """A finished cell's cost and wall time from its record, noted in ``noted`` by path (mtime, size, cost, wall);
    taken from ``seen`` (an earlier snapshot's notes) when the record has not changed since."""
    try:
        stat = path.stat()
        known = seen.get(str(path))
        if isinstance(known, list) and len(known) == 4 and known[:2] == [stat.st_mtime_ns, stat.st_size]:
            cost, wall = known[2], known[3]
        else:
            document = json.loads(path.read_text(encoding="utf-8"))
            cost, wall = document["row"].get("cost_usd"), float(document["timing"]["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    noted[str(path)] = [stat.st_mtime_ns, stat.st_size, cost, wall]
    return {"cost_usd": cost, "wall_s": wall}


def _metered(root: Path, tally: dict[str, Any]) -> float:
    """The experiment's spend meter, reading only the files not final when ``tally`` last saw them."""
    known = tally.get("final_spend")
    if not isinstance(known, dict) or not all(isinstance(usd, int | float) for usd in known.values()):
        known = None
    meter = RunSpend(root, known_final=known)
    spent = meter()
    tally["final_spend"] = meter.finals()
    return spent


STATE_TEXT = {
    "finished": "finished",
    "interrupted": "run interrupted",
    "running": "running",
    "waiting_for_look": "waiting for a look",
}


def state_name(state: str) -> str:
    """A progress state as words (``waiting_for_look`` is "waiting for a look")."""
    return "waiting for a look" if state == "waiting_for_look" else state


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def format_line(progress: dict[str, Any]) -> str:
    """One line for the terminal, e.g. ``[progress] demo: 12/63 cells, 2 running, $2.41 spent, ETA 3m10s``."""
    parts = [f"{progress['cells_done']}/{progress['cells_planned']} cells", f"{progress['cells_running']} running"]
    if progress["cells_interrupted"]:
        parts.append(f"{progress['cells_interrupted']} interrupted")
    spend = f"${progress['spend_usd']:.2f} spent"
    if progress["unmeasured_costs"]:
        spend += f" (+{progress['unmeasured_costs']} unmeasured)"
    parts.append(spend)
    if progress["state"] != "running":
        parts.append(STATE_TEXT[progress["state"]])
    elif progress["eta_s"] is None:
        parts.append("ETA after the first cell")
    else:
        parts.append(f"ETA {_duration(progress['eta_s'])}")
    return f"[progress] {progress['experiment']}: " + ", ".join(parts)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    lock = Path(layout.progress_lock(root))
    lock.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def update(
    results_dir: str | Path, *, alive: bool | None = None, ended_ok: bool | None = None
) -> dict[str, Any] | None:
    """Recompute and atomically replace ``progress.json`` under the lock; None when no run plan exists."""
    root = Path(results_dir)
    if not Path(layout.progress_plan(root)).is_file():
        return None
    with _locked(root):
        tally = _read_tally(root)
        progress = snapshot(root, alive=alive, ended_ok=ended_ok, tally=tally)
        artifacts.write_artifact(Path(layout.progress(root)), progress, "progress")
        artifacts.atomic_write_text(Path(layout.progress_tally(root)), artifacts.compact_json(tally))
    return progress


def _read_tally(root: Path) -> dict[str, Any]:
    """The tally the last update left (an empty one when there is none or it cannot be read: all is read again)."""
    try:
        tally = json.loads(Path(layout.progress_tally(root)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return tally if isinstance(tally, dict) else {}


@contextmanager
def tracking_cell(results_dir: str | Path, label: str, *, stream: TextIO | None = None) -> Iterator[None]:
    """Register a running cell for the duration of its job; when it ends, refresh ``progress.json`` and print
    the run line. Progress is a view: a failure to record it never fails the cell."""
    root = Path(results_dir)
    entry = Path(layout.progress_running(root)) / _entry_name(label)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        document = {"cell": label, "pid": os.getpid(), "host": socket.gethostname(), "started_at": _iso(_now())}
        artifacts.atomic_write_text(entry, artifacts.canonical_json(document))
    except OSError:
        pass
    try:
        yield
    finally:
        entry.unlink(missing_ok=True)
        try:
            progress = update(root)
        except (OSError, artifacts.ArtifactError) as exc:
            print(f"[progress] not updated: {exc}", file=stream or sys.stdout)
        else:
            if progress is not None:
                print(format_line(progress), file=stream or sys.stdout, flush=True)


# ─── The end of a run ────────────────────────────────────────────────────────


def command_beside(program: str, name: str) -> str:
    """``name`` as the user can type it: beside ``program`` (e.g. .venv/bin/), relative when inside the cwd."""
    folder = Path(program).parent
    candidate = folder / name
    if not candidate.exists():
        return name
    try:
        relative = candidate.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return str(candidate)
    return str(relative)


def resume_lines(root: Path, record: RunRecord | None, snakemake: str) -> list[str]:
    """How to go on with a run that is not running: the run's own command (after --unlock when snakemake's lock
    outlived it)."""
    if record is None:
        return ["  resume:    run the same snakemake command again: finished cells are kept"]
    lines = []
    if snakemake_lock_held(Path(record["workdir"])):
        unlock = runrecord.snakemake_command(record, "--unlock", fallback=snakemake)
        lines.append(f"  unlock:    {unlock}   (snakemake's lock outlived the run; nothing else is running here)")
    lines.append(f"  resume:    {runrecord.typed_command(record)}   (finished cells are kept, the rest run)")
    return lines


def snakemake_lock_held(workdir: Path) -> bool:
    """Snakemake's lock files of ``workdir`` exist (a live run's, or one a killed run left behind)."""
    locks = workdir / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


def status_lines(root: Path, state: dict[str, Any], record: RunRecord | None, snakemake: str) -> list[str]:
    """What `skillbench status` adds under the run line: who runs it, what died, how to go on."""
    lines = []
    if record is not None and state["state"] in ("running", "waiting_for_look"):
        process = record["process"]
        lines.append(f"  snakemake: pid {process['pid']} on {process['host']}, `{runrecord.typed_command(record)}`")
    if state["state"] == "waiting_for_look":
        lines.append("  no cell is running: the next batch of cells starts if the interim look says continue")
    _running, interrupted = running_cells(root)
    if interrupted:
        lines.append(f"  interrupted cells (their job died): {', '.join(interrupted)}")
    if state["state"] == "interrupted":
        lines.append("  the run is not running and did not finish (stopped by Ctrl-C, an error, or a kill)")
        lines += resume_lines(root, record, runrecord.program(record, snakemake))
    return lines


def closing_lines(
    results_dir: str | Path,
    *,
    ok: bool,
    snakemake_bin: str = "snakemake",
    interrupted: bool = False,
    log: str | None = None,
) -> list[str]:
    """What the user reads when snakemake ends: outcome, where the reports are, the HTML report command and the
    next step. Every command carries the options the run was started with (run.json), so it acts on this
    experiment as printed."""
    root = Path(results_dir)
    record = _run_record(root)
    snakemake = runrecord.program(record, command_beside(snakemake_bin, "snakemake"))
    skillbench = command_beside(snakemake_bin, "skillbench")
    try:
        state = update(root, alive=False, ended_ok=ok)
    except (OSError, artifacts.ArtifactError):
        state = None
    counts = ""
    if state is not None:
        counts = f" ({state['cells_done']}/{state['cells_planned']} cells, ${state['spend_usd']:.2f} measured spend)"
    logged = [f"  log:       {log}"] if log else []
    if not ok and interrupted:
        return [
            f"skillbench: run of {root} interrupted{counts}.",
            "  kept:      every cell that finished has its record (cells stopped by a second Ctrl-C have none)",
            f"  progress:  {skillbench} status {root}",
            *[line for line in resume_lines(root, record, snakemake) if not line.startswith("  unlock:")],
            *logged,
        ]
    if not ok:
        return [
            f"skillbench: run of {root} stopped with errors{counts}.",
            f"  why:       the failed jobs' error lines are above; their logs are under {layout.log_dir(root.name)}/",
            f"  progress:  {skillbench} status {root}",
            *[line for line in resume_lines(root, record, snakemake) if not line.startswith("  unlock:")],
            *logged,
        ]
    summary_path = Path(layout.summary(root))
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = None
    reports = [Path(layout.report(root, None))]
    if summary is None:
        # Only the targets named on the command line (say, the sweep's rows): no summary, no report to build yet.
        made = [path for path in (Path(layout.rows(root, None)), *reports) if path.is_file()]
        return [
            f"skillbench: the targets asked for are made{counts}.",
            *([f"  made:      {', '.join(str(path) for path in made)}"] if made else []),
        ]
    if summary["outcome"] == "sweep":
        outcome = "benchmark sweep finished"
    elif summary["outcome"] == "promoted":
        outcome = f"generation {summary['promoted_generation']}'s candidate was PROMOTED"
    else:
        outcome = f"no candidate cleared the gate in {summary['generations_requested']} generation(s)"
    reports += [Path(layout.report(root, g["generation"])) for g in summary["generations"]]
    report_command = runrecord.snakemake_command(record, "--report", layout.html_report(root), fallback=snakemake)
    lines = [
        f"skillbench: {outcome}{counts}.",
        f"  summary:   {layout.summary_markdown(root)}",
        f"  reports:   {', '.join(str(path) for path in reports)}",
        f"  HTML:      {report_command}   (figures, every report and a page per cell; open it in a browser)",
    ]
    if summary.get("capped_cells"):
        lines.append(
            f"  capped:    {summary['capped_cells']} cell(s) reached budget.max_session_usd: counted as censored "
            "observations at the cap (rows session-cap-reached), not run again"
        )
    if summary["outcome"] == "promoted":
        promoted = layout.report(root, summary["promoted_generation"])
        lines += [
            f"  diff:      {promoted}   (the candidate's whole diff and content flags)",
            f"  next:      {skillbench} apply {root}   (shows them again; --yes writes; then `git diff`, commit)",
        ]
    elif summary.get("next_step"):
        # A sweep the budget cut short says so too: raising budget.max_usd finishes its cells.
        lines.append(f"  next:      {summary['next_step']}")
    elif summary["outcome"] == "not_promoted":
        lines.append(f"  next:      {GENERATIONS_ADVICE}")
    return lines


# ─── Before a run: what the config implies ───────────────────────────────────


def planned_work(config: dict[str, Any], task_ids: list[str]) -> dict[str, Any]:
    """Cells and agent sessions a config implies: the cache's cells (the incumbent arms no generation anchors on),
    then per generation its batch — the candidates' cells and the anchor's (fresh cells of each candidate's
    incumbent arm, as many runs; generation 0's are the sweep's cells of those arms) — and its proposer session."""
    from skillbench.experiment import arms as arm_config

    incumbent = arm_config.selected_arms(config)
    generations = config["evolution"]["generations"]
    candidates = arm_config.candidate_arms(config)
    anchors = arm_config.anchor_arms(config)
    # A sequential design (runs: {min, max, step}) may run up to max.
    runs = config["runs"] if isinstance(config["runs"], int) else config["runs"]["max"]

    def sessions_of(arm: str) -> int:
        return len(arm_config.arm_definition(config, arm)["sessions"])

    def cells_of(arms: list[str]) -> list[dict[str, Any]]:
        return [
            {"task": task, "arm": arm, "run": run, "sessions": sessions_of(arm)}
            for task in task_ids
            for run in range(runs)
            for arm in arms
        ]

    cells = cells_of(arm_config.cached_arms(config))
    candidate_cells = cells_of(candidates)
    anchor_cells = cells_of(anchors)
    proposers = max(generations - (1 if config["evolution"]["initial_overlay"] else 0), 0)
    per_generation = candidate_cells + anchor_cells
    return {
        "tasks": list(task_ids),
        "incumbent_arms": incumbent,
        "anchor_arms": anchors,
        "candidate_arms": candidates,
        "runs": runs,
        "generations": generations,
        "incumbent_cells": cells,
        "candidate_cells_per_generation": candidate_cells,
        "anchor_cells_per_generation": anchor_cells,
        "anchor_sessions_per_generation": sum(c["sessions"] for c in anchor_cells),
        "proposer_sessions": proposers,
        "cells": len(cells) + generations * len(per_generation),
        "sessions": sum(c["sessions"] for c in cells)
        + generations * sum(c["sessions"] for c in per_generation)
        + proposers,
    }


def cost_estimate(
    work: dict[str, Any], previous: list[dict[str, Any]], proposer_costs: list[float]
) -> dict[str, Any] | None:
    """Expected cost (and a low–high range) of ``planned_work`` from earlier rows: each planned cell costs what the
    same (task, incumbent arm) cost before (median; min and max for the range), falling back to the arm's, then
    every row's. A candidate cell is priced like its incumbent. None without a measured earlier row."""
    from skillbench.experiment.arms import incumbent_of

    measured = [row for row in previous if row.get("cost_usd") is not None and is_valid(row)]
    if not measured:
        return None

    def costs(predicate: Callable[[Any], bool]) -> list[float]:
        return [row["cost_usd"] for row in measured if predicate(row)]

    def price(cell: dict[str, Any]) -> tuple[float, float, float]:
        arm = incumbent_of(cell["arm"])
        found = (
            costs(lambda r: r["task"] == cell["task"] and incumbent_of(r["arm"]) == arm)
            or costs(lambda r: incumbent_of(r["arm"]) == arm)
            or costs(lambda r: True)
        )
        return min(found), statistics.median(found), max(found)

    batch = work["candidate_cells_per_generation"] + work.get("anchor_cells_per_generation", [])
    cells = work["incumbent_cells"] + work["generations"] * batch
    priced = [price(cell) for cell in cells]
    proposer = (
        (min(proposer_costs), statistics.median(proposer_costs), max(proposer_costs))
        if proposer_costs
        else (0.0, 0.0, 0.0)
    )
    extra = [value * work["proposer_sessions"] for value in proposer]
    return {
        "low_usd": round(sum(p[0] for p in priced) + extra[0], 4),
        "expected_usd": round(sum(p[1] for p in priced) + extra[1], 4),
        "high_usd": round(sum(p[2] for p in priced) + extra[2], 4),
        "rows": len(measured),
        "proposer_priced": bool(proposer_costs),
    }


class _CostTerms(TypedDict):
    alpha: float
    floor_pct: float
    spend_efficiency: float


def _cost_terms(policy: GatePolicy, generation: int, spend_efficiency: float) -> _CostTerms:
    """What the cost test of generation ``generation`` decides at: its route's alpha, the floor and the spend
    efficiency its objective weighs tasks by (``stats.cost_power``'s and ``stats.cheapest_design``'s keywords)."""
    from skillbench.decision import gate

    alpha, _ = _design_terms(policy, generation)
    return {
        "alpha": alpha * (1 - gate.RESOLUTION_ROUTE_SHARE),
        "floor_pct": policy.min_improvement_pct,
        "spend_efficiency": spend_efficiency if policy.objective == "total_spend" else 1.0,
    }


def _design_terms(policy: GatePolicy, generation: int) -> tuple[float, int]:
    """Generation ``generation``'s alpha, and the runs per arm over all tasks that show the resolution within the
    margin when every run resolves."""
    from skillbench.decision import gate
    from skillbench.decision import stats as gate_stats

    alpha = gate.generation_alpha(policy, generation)
    margin = policy.quality_margin_pct / 100
    critical = float(gate_stats.stats.norm.isf(alpha))
    return alpha, math.ceil(critical**2 * (1 - margin) / margin) if margin > 0 else 0


def recommend_design(
    *,
    saving_pct: float,
    run_variance: float,
    spend_efficiency: float,
    shared_sd: float,
    policy: GatePolicy,
    generation: int,
    tasks: int | None = None,
    power: float = 0.8,
) -> dict[str, Any] | None:
    """The fewest runs (tasks × runs per task and arm) with which generation ``generation``'s gate promotes a true
    ``saving_pct`` saving with probability ``power``: the cost test at the generation's alpha (the task is the unit
    of replication, so a (task, arm)'s shared effects ``shared_sd`` cap what more runs buy), at least the policy's
    ``min_runs``, and — when every run resolves — enough runs per arm to show the resolution within the margin.
    With ``tasks`` given, the fewest runs for that suite; None when out of reach."""
    from skillbench.decision import stats as gate_stats

    _, quality_runs = _design_terms(policy, generation)
    return gate_stats.cheapest_design(
        saving_pct=saving_pct,
        run_variance=run_variance,
        shared_sd=shared_sd,
        **_cost_terms(policy, generation, spend_efficiency),
        tasks=tasks,
        power=power,
        min_runs=policy.min_runs,
        min_runs_per_arm=quality_runs,
    )


def tasks_needed(
    *,
    runs: int,
    saving_pct: float,
    run_variance: float,
    spend_efficiency: float,
    shared_sd: float,
    policy: GatePolicy,
    generation: int,
    power: float = 0.8,
    max_tasks: int = 200,
) -> dict[str, Any] | None:
    """The fewest tasks with which `runs` runs per (task, arm) reach `power` for a true ``saving_pct`` saving in
    generation ``generation`` (the same tests as `recommend_design`); None when even `max_tasks` do not. What a user
    mining or writing tasks needs to know: how many more to get."""

    _, quality_runs = _design_terms(policy, generation)
    for count in range(2, max_tasks + 1):
        if count * runs < quality_runs or runs < policy.min_runs:
            continue
        reached = generation_power(
            policy,
            generation,
            saving_pct=saving_pct,
            tasks=count,
            runs=runs,
            run_variance=run_variance,
            spend_efficiency=spend_efficiency,
            shared_sd=shared_sd,
        )
        if reached >= power:
            return {"tasks": count, "runs": runs, "power": round(reached, 3)}
    return None


def generation_power(
    policy: GatePolicy,
    generation: int,
    *,
    saving_pct: float,
    tasks: int,
    runs: int,
    run_variance: float,
    spend_efficiency: float,
    shared_sd: float,
) -> float:
    """The chance that generation ``generation``'s cost test (at its share of alpha, the policy's floor and
    objective) finds a true ``saving_pct`` saving with ``tasks`` × ``runs`` (``stats.cost_power``)."""
    from skillbench.decision import stats as gate_stats

    return gate_stats.cost_power(
        saving_pct=saving_pct,
        tasks=tasks,
        runs=runs,
        run_variance=run_variance,
        shared_sd=shared_sd,
        **_cost_terms(policy, generation, spend_efficiency),
    )


# Below this power for the saving a user wants, a generation's sessions can hardly change its decision.
LOW_POWER = 0.2


def generation_warnings(
    policy: GatePolicy,
    *,
    generations: int,
    tasks: int,
    runs: int,
    saving_pct: float,
    saving_key: str,
    run_variance: float,
    spend_efficiency: float,
    shared_sd: float,
) -> list[str]:
    """One line per generation of the chain (from 0) whose design cannot pass the resolution test at its alpha,
    or whose power for a true ``saving_pct`` saving (``saving_key`` names where that figure comes from) is below
    ``LOW_POWER``: each names the key to change and how. None for the upstream rule (it tests nothing), or when
    ``runs`` is below ``min_runs`` (``configcheck.design_warnings`` says that no generation can promote)."""
    if policy.rule != "noise_aware" or runs < policy.min_runs or tasks < 1:
        return []
    lines = []
    for generation in range(generations):
        alpha, quality_runs = _design_terms(policy, generation)
        # Later generations only spend sessions; the first one's fix is the design itself.
        stop = f", or set evolution.generations to {generation}" if generation else ""
        head = f"generation {generation} (alpha {alpha:.4g}, {tasks} task{'s' if tasks != 1 else ''} × {runs} runs)"
        if tasks * runs < quality_runs:
            lines.append(
                f"{head} cannot pass the resolution test: showing it within gate.quality_margin_pct "
                f"({policy.quality_margin_pct:g} points) at that alpha takes {quality_runs} runs per arm, the design "
                f"has {tasks * runs}; set runs to at least {math.ceil(quality_runs / tasks)} (or add tasks){stop}"
            )
            continue
        power = generation_power(
            policy,
            generation,
            saving_pct=saving_pct,
            tasks=tasks,
            runs=runs,
            run_variance=run_variance,
            spend_efficiency=spend_efficiency,
            shared_sd=shared_sd,
        )
        if power < LOW_POWER:
            lines.append(
                f"{head} has {100 * power:.0f}% power for a {saving_pct:g}% saving ({saving_key}), under "
                f"{100 * LOW_POWER:.0f}%: its sessions can hardly change the decision; add tasks or raise runs "
                f"(`skillbench estimate` sizes the design){stop}"
            )
    return lines


def measured_noise(rows: list[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    """From earlier rows: the run-to-run variance the cost test's per-task ratios see (relative variance of a run
    around its (task, arm)'s mean, pooled over cells with two or more valid runs) and the spend efficiency of the
    task costs ((mean)² / mean of squares of the per-task mean cost). None without a cell of two measured runs."""
    cells: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        value = row.get(metric)
        if is_valid(row) and value is not None and value > 0:
            cells.setdefault((row["task"], row["arm"]), []).append(float(value))
    squares = dof = 0.0
    for values in cells.values():
        if len(values) >= 2:
            centre = statistics.fmean(values)
            squares += sum((value / centre - 1) ** 2 for value in values)
            dof += len(values) - 1
    if not dof:
        return None
    task_costs: dict[str, list[float]] = {}
    for (task, _), values in cells.items():
        task_costs.setdefault(task, []).append(statistics.fmean(values))
    means = [statistics.fmean(values) for values in task_costs.values()]
    efficiency = statistics.fmean(means) ** 2 / statistics.fmean([mean * mean for mean in means])
    return {"run_variance": squares / dof, "spend_efficiency": efficiency, "cells": len(cells), "tasks": len(means)}


def earlier_costs(results_dir: Path) -> tuple[list[dict[str, Any]], list[float]]:
    """Rows of every finished cell under ``results/<experiment>`` and the measured proposer session costs."""
    rows = []
    for path in layout.cell_records_on_disk(results_dir):
        try:
            rows.append(json.loads(path.read_text(encoding="utf-8"))["row"])
        except (OSError, ValueError, KeyError):
            continue
    proposers = []
    for path in sorted(Path(found) for found in glob.glob(layout.proposer_session(results_dir, "*"))):
        try:
            cost = json.loads(path.read_text(encoding="utf-8"))["session"].get("cost_usd")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if cost is not None:
            proposers.append(cost)
    return rows, proposers


def check_budget(
    config: dict[str, Any], task_ids: list[str], incumbent_arms: list[str], candidate_arms: list[str], first_runs: int
) -> None:
    """Fail at parse time when ``budget.max_sessions`` cannot pay for the first batch (the sweep's cells — the
    cache's and generation 0's anchor, one cell of every incumbent arm per task and run — and the first
    generation's candidate cells at the first look's runs): caps act between batches, so a cap below the first
    batch would be passed before any look could stop it."""
    from skillbench.experiment import arms as arm_config

    cap = config["budget"]["max_sessions"]
    if cap is None:
        return
    sessions = sum(
        len(arm_config.arm_definition(config, arm)["sessions"]) * first_runs * len(task_ids)
        for arm in [*incumbent_arms, *candidate_arms]
    )
    if sessions > cap:
        anchors = [arm_config.incumbent_of(arm) for arm in candidate_arms]
        anchored = f", generation 0's anchor ({', '.join(anchors)}) included" if anchors else ""
        raise ValueError(
            f"config budget.max_sessions: {cap} is below the first batch's {sessions} agent sessions "
            f"({len(task_ids)} task(s) x {first_runs} run(s) of arms {', '.join([*incumbent_arms, *candidate_arms])}"
            f"{anchored}); raise the cap, or lower runs (runs.min) or the tasks/arms selected"
        )


def budget_lines(budget: dict[str, Any], sessions: int) -> list[str]:
    """What the budget does to a plan of at most ``sessions`` agent sessions (an estimate's lines)."""
    lines = []
    cap = budget.get("max_sessions")
    if cap is not None:
        verdict = "the plan fits in it" if sessions <= cap else "looks start no batch past it, so fewer may run"
        lines.append(f"  budget.max_sessions {cap}: the plan needs up to {sessions} sessions; {verdict}")
    if budget.get("max_usd") is not None:
        lines.append(f"  budget.max_usd {budget['max_usd']:g}: looks start no batch whose projected cost passes it")
    return lines


# ─── Between batches of a sequential design: the budget ─────────────────────


def recorded_spend(arm_sessions: dict[str, int], results_root: str | Path) -> dict[str, Any]:
    """Sessions of every finished cell under the experiment's results folder (records on disk) and the spend
    so far: the experiment's spend meter (which also holds retried and killed attempts and proposer
    sessions), or the records' cost_usd where they say more. ``arm_sessions`` is each incumbent arm's
    sessions per cell."""
    from skillbench.experiment.arms import incumbent_of

    sessions, usd = 0, 0.0
    for path in layout.cell_records_on_disk(results_root):
        row = artifacts.read_artifact(path, "cell-record")["row"]
        sessions += arm_sessions[incumbent_of(row["arm"])]
        usd += row.get("cost_usd") or 0.0
    return {"sessions": sessions, "usd": round(max(usd, RunSpend(results_root)()), 6)}


@dataclass
class BatchBudget:
    """What a look may still start: the spend so far and the batches already admitted at this look.

    A batch's price: each missing cell costs its arm's sessions, and the mean recorded cost per finished cell."""

    spend: dict[str, Any]
    cost_per_cell: float
    arm_sessions: dict[str, int]
    budget: dict[str, Any]
    tasks: list[str]
    present: set[tuple[str, str, int]]
    planned_sessions: int = 0
    planned_usd: float = 0.0
    planned_cells: set[tuple[str, str, int]] = field(default_factory=set)

    @classmethod
    def from_disk(
        cls,
        results_root: str | Path,
        arm_sessions: dict[str, int],
        budget: dict[str, Any],
        present: list[dict[str, Any]],
    ) -> BatchBudget:
        """The budget of a look over ``present`` rows, with the spend recorded under ``results_root``."""
        spend = recorded_spend(arm_sessions, results_root)
        finished = len(layout.cell_records_on_disk(results_root))
        return cls(
            spend=spend,
            cost_per_cell=spend["usd"] / finished if finished else 0.0,
            arm_sessions=arm_sessions,
            budget=budget,
            tasks=sorted({row["task"] for row in present}),
            present={(row["task"], row["arm"], row["run"]) for row in present},
            planned_sessions=spend["sessions"],
            planned_usd=spend["usd"],
        )

    def admit(self, pair: tuple[str, str], runs: int, next_runs: int) -> list[str]:
        """Admit the pair's batch (runs ``runs``..``next_runs``-1 of both arms) and return [], or return the caps
        it would pass (and admit nothing)."""
        from skillbench.experiment.arms import incumbent_of

        batch = (
            {(task, arm, run) for task in self.tasks for arm in pair for run in range(runs, next_runs)}
            - self.present
            - self.planned_cells
        )
        sessions = sum(self.arm_sessions[incumbent_of(arm)] for _, arm, _ in batch)
        projected = len(batch) * self.cost_per_cell
        over = []
        max_sessions, max_usd = self.budget.get("max_sessions"), self.budget.get("max_usd")
        if max_sessions is not None and self.planned_sessions + sessions > max_sessions:
            over.append(
                f"budget.max_sessions {max_sessions} (spent {self.spend['sessions']} sessions; the "
                f"next batch needs {sessions} more)"
            )
        if max_usd is not None and self.planned_usd + projected > max_usd:
            over.append(
                f"budget.max_usd {max_usd:g} (spent ${self.spend['usd']:.4f}; the next batch is "
                f"projected at ${projected:.4f})"
            )
        if not over:
            self.planned_sessions += sessions
            self.planned_usd += projected
            self.planned_cells |= batch
        return over
