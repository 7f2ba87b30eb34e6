"""The results layout: where every artifact of a run lives, for the rules, the shims and the library alike.

```
results/<experiment>/
  tasks/<task>/binding.json, template/, oracle/, check.json     tasks/bindings.json, checks.json
  cells/<task>/<arm>/run<i>/record.json, patch.diff, transcripts/ (and each one's .atif.json), harbor/ (a Harbor
                               trial folder), oracle.log (review-output.json), …
                               the cache: cells of the incumbent arms no generation pairs with a candidate (all of
                               them in a plain sweep), shared by every generation; never compared with a candidate
  pages/cells/<task>/<arm>/run<i>.html, pages/gen<N>/cells/…      each cell's page (one job per cell folder)
  author-pages/…               the same pages with the hidden oracle's output (owner-only)
  gen<N>/                      one generation of the evolution chain
    cells/<task>/<arm>/run<i>/…                                 its batch: the candidate cells and the anchor (fresh
                               cells of each candidate's incumbent arm, run beside them; generation 0's is the sweep's)
    schedule/look<k>.json      the order the cells of the batch before look k were started in (batch gen<N>, or
                               gen<N>/look<k> in a sequential design)
    evidence/  proposal.md  proposer-session.json  proposer-prompt.md  transcripts/
    overlay/ (the proposer's draft)  overlay.json  frozen-overlay/ (read-only; overlay.json holds its digest)
    candidate.diff (the candidate's whole diff against the incumbent)
    looks/look<k>.json  results.jsonl  promotion.json  report.md  report.html  figures/
  sweep/results.jsonl, report.md, report.html, figures/         the incumbent arms alone
  summary.json  summary.md  summary.html  figures/  progress.json
  run.json                     what the run was started with (config files and values, command line, process)
  .outage-breaker.json         the outage breaker shared by concurrent cell jobs
  .progress/plan.json, running/, lock
  .checks/<task>.json          task checks `skillbench check` ran outside a run (reused while their inputs hold)
logs/<experiment>/<rule>/…
```

Every function returns a plain string path. Called with Snakemake wildcards (``"{gen}"``, ``"{task}"``, …)
it returns a rule's file pattern; called with values, the concrete path. ``root`` is
``results/<experiment>`` (``results_root``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = "results"
LOGS = "logs"
CELLS = "cells"
SWEEP = "sweep"
FIGURES = "figures"
FROZEN_OVERLAY = "frozen-overlay"
# A Snakemake wildcard constraint: the folder a cell lives in (the cache, or a generation's batch).
CELLSET_PATTERN = r"cells|gen\d+/cells"
# The batch of a cell of the cache (`cells/`); a generation's cells are batch `gen<N>` (`gen<N>/look<k>` in a
# sequential design, one batch per look).
CACHE_BATCH = "cache"
BATCH_NAME = re.compile(r"gen([0-9]+)(?:/look([0-9]+))?")
GENERATION_FOLDER = re.compile(r"gen([0-9]+)")
# Every finished cell's record under a results root, incumbent and candidate (globs relative to the root).
RECORD = "record.json"
PATCH = "patch.diff"
LEDGER = "ledger.json"
# The hidden oracle's output tail beside a cell's record, for the task author only (0600).
ORACLE_LOG = "oracle.log"
# A cell as a Harbor trial folder, beside the record; a session's ATIF trajectory beside its transcript.
HARBOR = "harbor"
TRAJECTORY_SUFFIX = ".atif.json"
# A review cell's review as its session wrote it (redacted), beside the record.
REVIEW_OUTPUT = "review-output.json"
# Files a generation folder (or a seed folder, `evolution.seed_results`) holds, by name.
ROWS = "results.jsonl"
PROMOTION = "promotion.json"
PROPOSAL = "proposal.md"
OVERLAY = "overlay.json"
CANDIDATE_DIFF = "candidate.diff"
LOOKS = "looks"
PROGRESS_FOLDER = ".progress"
SPEND_FOLDER = ".spend"

Root = str | Path


def _join(*parts: object) -> str:
    return "/".join(str(part) for part in parts)


def results_root(experiment: str) -> str:
    return _join(RESULTS, experiment)


def log_dir(experiment: str) -> str:
    return _join(LOGS, experiment)


def log(experiment: str, *parts: str) -> str:
    """A job's log: ``logs/<experiment>/<rule>[/<job>].log``."""
    return f"{_join(LOGS, experiment, *parts)}.log"


# ─── Generations ────────────────────────────────────────────────────────────


def generation_name(gen: int | str) -> str:
    return f"gen{gen}"


def generation_of_folder(name: str) -> int | None:
    """N of a ``gen<N>`` folder name; None for any other name (``sweep``, a seed folder)."""
    match = GENERATION_FOLDER.fullmatch(name)
    return int(match.group(1)) if match else None


def generation_dir(root: Root, gen: int | str) -> str:
    return _join(root, generation_name(gen))


def stage_dir(root: Root, gen: int | str | None) -> str:
    """Where a set of rows, its report and figures live: ``gen<N>``, or ``sweep`` for the incumbent arms alone."""
    return _join(root, SWEEP) if gen is None else generation_dir(root, gen)


def rows(root: Root, gen: int | str | None) -> str:
    return _join(stage_dir(root, gen), ROWS)


def report(root: Root, gen: int | str | None) -> str:
    return _join(stage_dir(root, gen), "report.md")


def report_page(root: Root, gen: int | str | None) -> str:
    return _join(stage_dir(root, gen), "report.html")


def stage_figure(root: Root, gen: int | str | None, name: str) -> str:
    return _join(stage_dir(root, gen), FIGURES, name)


def overlay(root: Root, gen: int | str) -> str:
    """The frozen candidate's record (``overlay.json``: digest, files, paired arms, promotion targets)."""
    return _join(generation_dir(root, gen), OVERLAY)


def candidate_diff(root: Root, gen: int | str) -> str:
    """The candidate's whole diff against the incumbent skills (``candidate.diff``, written when it is frozen)."""
    return _join(generation_dir(root, gen), CANDIDATE_DIFF)


def frozen_overlay(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), FROZEN_OVERLAY)


def frozen_overlay_beside(overlay_json: Root) -> Path:
    """The frozen copy lives beside its overlay.json."""
    return Path(overlay_json).parent / FROZEN_OVERLAY


def overlay_draft(root: Root, gen: int | str) -> str:
    """The folder the proposer writes its candidate into (freeze_overlay reads it)."""
    return _join(generation_dir(root, gen), "overlay")


def proposal(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), PROPOSAL)


def proposer_session(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), "proposer-session.json")


def proposer_prompt(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), "proposer-prompt.md")


def proposer_transcripts(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), "transcripts")


def evidence(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), "evidence")


def look(root: Root, gen: int | str, look: int | str) -> str:
    return _join(generation_dir(root, gen), LOOKS, f"look{look}.json")


def promotion(root: Root, gen: int | str) -> str:
    return _join(generation_dir(root, gen), PROMOTION)


def schedule(root: Root, gen: int | str, look: int | str) -> str:
    """The recorded start order of a generation's batch (the cells look ``look`` reads for the first time)."""
    return _join(generation_dir(root, gen), "schedule", f"look{look}.json")


# ─── Batches: the cells that ran together ─────────────────────────────────────


def batch_name(gen: int | str, look: int | None) -> str:
    """``gen<N>`` (a fixed design: one batch), or ``gen<N>/look<k>`` (the batch before look k of a sequential one)."""
    return generation_name(gen) if look is None else f"{generation_name(gen)}/look{look}"


def batch_generation(batch: str) -> int | None:
    """The generation whose folder holds a batch's cells; None for the cache (and for a name that is no batch)."""
    match = BATCH_NAME.fullmatch(batch)
    return int(match.group(1)) if match else None


# ─── Cells ──────────────────────────────────────────────────────────────────


def cellset(gen: int | str | None) -> str:
    """The folder (below the root) of a cell: ``cells`` for incumbent arms, ``gen<N>/cells`` for candidates."""
    return CELLS if gen is None else _join(generation_name(gen), CELLS)


def cellset_generation(name: str) -> str | None:
    """The generation (as the ``gen`` wildcard spells it) of a candidate cellset; None for ``cells``."""
    if name == CELLS:
        return None
    folder, _, rest = name.partition("/")
    number = generation_of_folder(folder)
    if rest != CELLS or number is None:
        raise ValueError(f"{name!r} is not a cell folder ({CELLSET_PATTERN})")
    return folder.removeprefix("gen")


def cell_label(cells: str, task: str, arm: str, run: int | str) -> str:
    """A cell's path below the root, e.g. ``gen0/cells/fix-bug/candidate_plan/run2`` (also its progress label)."""
    return _join(cells, task, arm, f"run{run}")


def cell_dir(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    return _join(root, cell_label(cells, task, arm, run))


def cell_record(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    return _join(cell_dir(root, cells, task, arm, run), RECORD)


def cell_patch(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    return _join(cell_dir(root, cells, task, arm, run), PATCH)


def cell_transcripts(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    return _join(cell_dir(root, cells, task, arm, run), "transcripts")


def trajectory_of_transcript(transcript: str) -> str:
    """A session's ATIF trajectory beside its transcript (`transcripts/<name>.jsonl` -> `<name>.atif.json`)."""
    return transcript.removesuffix(".jsonl") + TRAJECTORY_SUFFIX


# A cell folder's pages are made in one job per cell folder (``render_cell_pages``), so they live in a folder of
# their own beside the cells: ``pages/<cells>/<task>/<arm>/run<i>.html``, and the author-only ones under
# ``author-pages/`` (0700).
PAGES = "pages"
AUTHOR_PAGES = "author-pages"
CELL_PAGE_PATTERN = "{task}/{arm}/run{run}.html"


def cell_pages(root: Root, cells: str) -> str:
    """The folder of a cell folder's pages (sessions, patch, verify, the oracle's outcome), in the shared report."""
    return _join(root, PAGES, cells)


def cell_author_pages(root: Root, cells: str) -> str:
    """The folder of the same pages with the hidden oracle's output, for the task author only (0700)."""
    return _join(root, AUTHOR_PAGES, cells)


def cell_page(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    """A cell's page in the shared report."""
    return _join(cell_pages(root, cells), CELL_PAGE_PATTERN.format(task=task, arm=arm, run=run))


def cell_author_page(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    """A cell's author-only page (with the hidden oracle's output; 0600, never in the report)."""
    return _join(cell_author_pages(root, cells), CELL_PAGE_PATTERN.format(task=task, arm=arm, run=run))


def row_cell_dir(root: Root, row: Mapping[str, Any], gen: int | str | None, *, candidate: bool) -> str:
    """Where a result row's cell wrote its artifacts: the folder of its batch. A row from before rows recorded their
    batch (no ``batch`` field) is a ``candidate``'s under generation ``gen``, any other arm's in the cache."""
    batch = row.get("batch")
    if isinstance(batch, str):
        folder = cellset(batch_generation(batch))
    else:
        folder = cellset(gen if candidate else None)
    return cell_dir(root, folder, row["task"], row["arm"], row["run"])


def parse_cell_record(relative: Path) -> tuple[int | None, str, str, int] | None:
    """(generation or None, task, arm, run) of a record path relative to the root; None for anything else."""
    parts = relative.parts
    if len(parts) == 5 and parts[0] == CELLS:
        generation = None
    elif len(parts) == 6 and parts[1] == CELLS and generation_of_folder(parts[0]) is not None:
        generation = generation_of_folder(parts[0])
        parts = parts[1:]
    else:
        return None
    run = parts[3]
    if parts[4] != RECORD or not (run.startswith("run") and run[3:].isdigit()):
        return None
    return generation, parts[1], parts[2], int(run[3:])


def cell_records_on_disk(root: Root) -> list[Path]:
    """Every finished cell's record under ``root`` (`cells/*/*/run*/record.json`, and the same under each `gen*/`),
    sorted.

    Walked level by level with `os.scandir` (each cell job's progress update lists them: at 9,000 cells this takes
    0.12 s, `Path.glob` 0.16 s)."""
    base = str(root)
    folders = [os.path.join(base, CELLS)] + [
        os.path.join(folder, CELLS) for folder in _subfolders(base) if os.path.basename(folder).startswith("gen")
    ]
    found = []
    for cells in folders:
        for task in _subfolders(cells):
            for arm in _subfolders(task):
                for run in _subfolders(arm):
                    record = os.path.join(run, RECORD)
                    if os.path.basename(run).startswith("run") and os.path.exists(record):
                        found.append(record)
    return [Path(record) for record in sorted(found)]


def _subfolders(folder: str) -> list[str]:
    """The folders (or links to folders) in ``folder``; none when it is not a folder."""
    try:
        with os.scandir(folder) as entries:
            return [entry.path for entry in entries if entry.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def cell_ledger(root: Root, cells: str, task: str, arm: str, run: int | str) -> str:
    """The gateway's ledger of a cell's sessions (every model request, its usage and cost), beside its record."""
    return _join(cell_dir(root, cells, task, arm, run), LEDGER)


def budget_cut_marker(run_dir: Root) -> str:
    """Beside a cell's record when the run's budget cut the cell short: it runs again once the budget changes."""
    return _join(run_dir, ".budget-exhausted")


def proposer_sessions_on_disk(root: Root) -> list[Path]:
    """Every finished proposer session's record under ``root``, sorted."""
    return sorted(Path(root).glob("gen*/proposer-session.json"))


# ─── Tasks ──────────────────────────────────────────────────────────────────


def task_dir(root: Root, task: str) -> str:
    return _join(root, "tasks", task)


def binding(root: Root, task: str) -> str:
    return _join(task_dir(root, task), "binding.json")


def template(root: Root, task: str) -> str:
    return _join(task_dir(root, task), "template")


def oracle_snapshot(root: Root, task: str) -> str:
    return _join(task_dir(root, task), "oracle")


def task_check(root: Root, task: str) -> str:
    return _join(task_dir(root, task), "check.json")


def checked_task(root: Root, task: str) -> str:
    """A task check `skillbench check` ran outside a run (0600: it holds oracle output), reused while nothing it
    depended on changed."""
    return _join(root, ".checks", f"{task}.json")


def bindings(root: Root) -> str:
    return _join(root, "tasks", "bindings.json")


def task_checks(root: Root) -> str:
    """Every selected task passed its check (``merge_checks``): what each session job waits for."""
    return _join(root, "tasks", "checks.json")


def root_of_cell_file(path: Root, cells: str) -> str:
    """The results root of a file directly in a cell's folder under ``cells`` (``cellset``)."""
    return str(Path(path).parents[len(Path(cells).parts) + 3])


def root_of_generation_file(path: Root) -> str:
    """The results root of a file (or folder) directly in a ``gen<N>`` folder."""
    return str(Path(path).parents[1])


def root_of_look(path: Root) -> str:
    return str(Path(path).parents[2])


def task_of_oracle_snapshot(folder: Root) -> str:
    """The task whose oracle snapshot ``folder`` (``…/tasks/<task>/oracle``) is."""
    return Path(folder).parent.name


# ─── The whole run ──────────────────────────────────────────────────────────


def summary(root: Root) -> str:
    return _join(root, "summary.json")


def summary_markdown(root: Root) -> str:
    return _join(root, "summary.md")


def summary_page(root: Root) -> str:
    return _join(root, "summary.html")


def run_figure(root: Root, name: str) -> str:
    return _join(root, FIGURES, name)


def html_report(root: Root) -> str:
    """Where the closing lines suggest `snakemake --report` writes the HTML report."""
    return _join(root, "report.html")


def run_record(root: Root) -> str:
    """What defines the run (written when it starts): its config, command line and snakemake process."""
    return _join(root, "run.json")


def breaker(root: Root) -> str:
    """The outage breaker's state, shared by every cell job of the run (reset when a run starts)."""
    return _join(root, ".outage-breaker.json")


def progress(root: Root) -> str:
    return _join(root, "progress.json")


def progress_plan(root: Root) -> str:
    return _join(root, PROGRESS_FOLDER, "plan.json")


def progress_running(root: Root) -> str:
    return _join(root, PROGRESS_FOLDER, "running")


def spend_meter(root: Root) -> str:
    """Where every session job (each attempt) keeps what its gateway has measured: the experiment's spend.

    Files stay after their job ends, so a retried or killed attempt's spend still counts toward
    `budget.max_usd`."""
    return _join(root, SPEND_FOLDER)


def progress_tally(root: Root) -> str:
    """What the last progress update read of each record and spend file (a cache: the files decide)."""
    return _join(root, PROGRESS_FOLDER, "tally.json")


def progress_lock(root: Root) -> str:
    return _join(root, PROGRESS_FOLDER, "lock")


def planned_runs(results: Root = RESULTS) -> list[Path]:
    """The run plan of every experiment under ``results/``."""
    return list(Path(results).glob(progress_plan("*")))


def root_of_plan(plan: Path) -> Path:
    return plan.parent.parent
