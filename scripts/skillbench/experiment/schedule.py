"""A generation's batch: which cells run side by side, and the randomised order they start in.

Each generation runs its candidates' cells and its anchor — fresh cells of each candidate's incumbent arm, as many
runs as the candidate's — in one time window: one batch, or in a sequential design one batch per look (the runs
that look reads for the first time). Whatever moves while a batch runs (the provider's prompt cache, its backend,
its prices, the time of day) moves both arms of a pair alike, which no analysis of cells run days apart can
promise. The start order is drawn once per batch from a seed naming the experiment and the batch, blocked by task:
the batch's runs are taken in rounds (run r of every task before run r+1, so a stopped batch leaves whole pairs),
each round visits the tasks in a random order, and each (task, run) block starts its arms' cells in a random
order (no arm always goes first).

Pure: the same inputs give the same order. The workflow turns it into each cell's Snakemake priority, the
`schedule` artifact records it, and the rows collected from the cells carry their batch, block and position.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Final, TypedDict

from skillbench.base import layout
from skillbench.base.records import Schedule, ScheduledCell

SCHEDULE_SCHEMA: Final = "schedule/v1"

SCHEDULE_METHOD = (
    "blocked by task: rounds of runs (run r of every task before run r+1), the tasks of a round in a random order, "
    "and within each (task, run) block the arms' cells in a random order; drawn from the seed"
)


class BatchFields(TypedDict):
    """What a result row records of the batch its cell ran in (``block`` and ``position`` are None in the cache)."""

    batch: str
    block: int | None
    position: int | None


def batch_seed(experiment: str, generation: int | str, look: int | None) -> str:
    """The seed of a batch's order: the experiment and the batch, so every rerun of a run draws the same order."""
    return f"{experiment}/{layout.batch_name(generation, look)}"


def batch_order(*, seed: str, tasks: Sequence[str], arms: Sequence[str], runs: Sequence[int]) -> list[ScheduledCell]:
    """Every (task, arm, run) of a batch in the order its cells start (see the module's docstring)."""
    generator = random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    order: list[ScheduledCell] = []
    block = 0
    for run in runs:
        for task in generator.sample(list(tasks), len(tasks)):
            for arm in generator.sample(list(arms), len(arms)):
                order.append({"position": len(order), "block": block, "task": task, "arm": arm, "run": run})
            block += 1
    return order


def start_priorities(order: Sequence[ScheduledCell]) -> dict[tuple[str, str, int], float]:
    """Each cell's Snakemake priority, falling with its position, all in (0, 1): among ready cells the scheduler
    starts the highest first, so the batch's cells start in the drawn order."""
    size = len(order) + 1
    return {(cell["task"], cell["arm"], cell["run"]): 1 - (cell["position"] + 1) / size for cell in order}


def look_runs(looks: Sequence[int], look: int) -> range:
    """The run indices of the batch before look ``look`` (from 1) of a design whose looks read ``looks`` runs per
    (task, arm): the first look's batch is runs 0..looks[0]-1, each later one the runs added since."""
    start = 0 if look == 1 else looks[look - 2]
    return range(start, looks[look - 1])


def look_of_run(looks: Sequence[int], run: int) -> int:
    """The look (from 1) whose batch holds run index ``run``."""
    for index, runs in enumerate(looks, start=1):
        if run < runs:
            return index
    raise ValueError(f"run {run} is past the design's last look ({looks[-1]} runs per (task, arm))")


def schedule_document(
    *,
    experiment: str,
    generation: int,
    look: int,
    sequential: bool,
    tasks: Sequence[str],
    pairs: Sequence[Sequence[str]],
    running: Sequence[Sequence[str]],
    runs: Sequence[int],
) -> Schedule:
    """The ``schedule/v1`` record of one batch: the pairs (incumbent, candidate) it runs, and its cells in order.

    The order is drawn over every pair of the experiment (``pairs``) and kept to the cells of the pairs that run
    (``running``: at a later look of a sequential design, those that continue), so it is the order the cells'
    priorities (``start_priorities`` of the whole draw) gave them."""
    seed = batch_seed(experiment, generation, look if sequential else None)
    arms = [arm for pair in pairs for arm in pair]
    kept = {arm for pair in running for arm in pair}
    cells = [cell for cell in batch_order(seed=seed, tasks=tasks, arms=arms, runs=runs) if cell["arm"] in kept]
    return {
        "schema": SCHEDULE_SCHEMA,
        "generation": generation,
        "look": look,
        "batch": layout.batch_name(generation, look if sequential else None),
        "seed": seed,
        "method": SCHEDULE_METHOD,
        "tasks": list(tasks),
        "runs": list(runs),
        "pairs": [list(pair) for pair in running],
        "cells": [
            {"position": position, "block": cell["block"], "task": cell["task"], "arm": cell["arm"], "run": cell["run"]}
            for position, cell in enumerate(cells)
        ],
    }


def batch_fields(
    generation: int | None,
    task: str,
    arm: str,
    run: int,
    *,
    looks: Sequence[int],
    sequential: bool,
    schedules: Mapping[tuple[int, int], Schedule],
) -> BatchFields:
    """The batch, block and position a cell's row records: the cache for a cell of `cells/`, else its generation's
    batch (the look whose runs hold ``run``), its block and position as the batch's schedule (generation, look →
    ``schedule/v1`` document) recorded them."""
    if generation is None:
        return {"batch": layout.CACHE_BATCH, "block": None, "position": None}
    look = look_of_run(looks, run)
    document = schedules.get((generation, look))
    if document is None:
        raise ValueError(f"no schedule of generation {generation}'s look {look} to place {task}/{arm}/run{run} in")
    for cell in document["cells"]:
        if (cell["task"], cell["arm"], cell["run"]) == (task, arm, run):
            return {"batch": document["batch"], "block": cell["block"], "position": cell["position"]}
    raise ValueError(f"{task}/{arm}/run{run} is not in the schedule of {document['batch']} (its pairs changed since)")
