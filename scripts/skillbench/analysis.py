"""Analysis and regrading in Python: a results folder as pandas DataFrames, and rows + policy → a promotion document.

Owns the one entry point notebooks and benches use: ``rows``, ``cells``, ``sessions`` and ``decisions`` read a
``results/<experiment>`` folder (validating every artifact against its schema) into one DataFrame each, ``rows``
with each cell once (``generation_rows``: one generation's rows as its gate read them); ``regrade`` turns rows and
a policy into the same ``promotion/v1`` document ``skillbench gate`` writes, and ``regrade_generation`` does it for
a generation folder as stored. Only a regrade of a stored generation under another policy than the run's writes a
file: it is kept beside the run's decision, marked post hoc (`reporting.posthoc`).

    from skillbench import analysis
    frame = analysis.rows("results/demo")                    # each cell once, with the generations it served
    frame.groupby("arm")["cost_usd"].sum()                   # what each arm cost, every cell counted once
    document = analysis.regrade_generation("results/demo", 1, policy={"objective": "per_task"})
    analysis.decisions("results/demo")[["generation", "candidate_arm", "decision", "estimate_pct"]]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pandas as pd

from skillbench.base import artifacts, layout
from skillbench.base.records import PromotionDocument, ResultRow
from skillbench.decision import gate, promotion
from skillbench.reporting import posthoc

__all__ = ["cells", "decisions", "generation_rows", "regrade", "regrade_generation", "rows", "sessions"]


def _generations(root: Path) -> list[int]:
    found = (layout.generation_of_folder(path.name) for path in root.iterdir() if path.is_dir())
    return sorted(generation for generation in found if generation is not None)


def rows(folder: str | Path) -> pd.DataFrame:
    """Every cell's row once, from the sweep's and each generation's ``results.jsonl``: ``generations`` lists the
    generations whose gate read it (an incumbent cell serves several), ``in_sweep`` whether the sweep did, and
    ``shared`` whether more than one of them did. So ``rows(...).groupby("arm")["cost_usd"].sum()`` counts each
    cell once; ``generation_rows`` gives one generation's rows as its gate read them. Each row names its ``batch``
    (``cache``, ``gen<N>``, ``gen<N>/look<k>``): a generation's candidates and its anchor share one."""
    root = Path(folder)
    cells: dict[str, dict[str, Any]] = {}
    for generation in [None, *_generations(root)]:
        path = Path(layout.rows(root, generation))
        if not path.exists():
            continue
        for row in artifacts.read_jsonl(path, "result-row"):
            # A cell's row is the same bytes wherever it is read: its identity across the files.
            entry = cells.setdefault(artifacts.compact_json(row), {**row, "generations": [], "in_sweep": False})
            if generation is None:
                entry["in_sweep"] = True
            else:
                entry["generations"].append(generation)
    for entry in cells.values():
        entry["shared"] = len(entry["generations"]) + entry["in_sweep"] > 1
    return pd.DataFrame(list(cells.values()))


def generation_rows(folder: str | Path, generation: int | None) -> pd.DataFrame:
    """One generation's rows as its gate read them (``None``: the sweep's), its incumbent rows included."""
    path = Path(layout.rows(Path(folder), generation))
    return pd.DataFrame(artifacts.read_jsonl(path, "result-row"))


def _cell_entries(root: Path) -> Iterable[tuple[Path, tuple[int | None, str, str, int], dict[str, Any]]]:
    for path in layout.cell_records_on_disk(root):
        key = layout.parse_cell_record(path.relative_to(root))
        if key is not None:
            yield path, key, artifacts.read_artifact(path, "cell-record")


def cells(folder: str | Path) -> pd.DataFrame:
    """One row per finished cell: where it lives (``generation`` None for a cell of the cache, which every generation
    shares; a generation's candidate and anchor cells under its number), its attempt, its timing and what its row
    says about it (resolved, cost, error kind)."""
    collected = []
    for _, (generation, task, arm, run), record in _cell_entries(Path(folder)):
        timing = {key: value for key, value in record["timing"].items() if key != "sessions"}
        row = record["row"]
        collected.append(
            {
                "generation": generation,
                "task": task,
                "arm": arm,
                "run": run,
                "attempt": record["attempt"],
                **timing,
                "sessions": len(record["timing"]["sessions"]),
                "resolved": row["resolved"],
                "cost_usd": row["cost_usd"],
                "error_kind": row["error_kind"],
            }
        )
    return pd.DataFrame(collected)


def sessions(folder: str | Path) -> pd.DataFrame:
    """One row per agent session: each cell's sessions (role, start, end, seconds) and each generation's proposer
    session (role ``proposer``, its cost and turns)."""
    root = Path(folder)
    collected: list[dict[str, Any]] = []
    for _, (generation, task, arm, run), record in _cell_entries(root):
        for session in record["timing"]["sessions"]:
            started = datetime.fromisoformat(session["started_at"].replace("Z", "+00:00"))
            finished = datetime.fromisoformat(session["finished_at"].replace("Z", "+00:00"))
            collected.append(
                {
                    "generation": generation,
                    "task": task,
                    "arm": arm,
                    "run": run,
                    "role": session["role"],
                    "started_at": session["started_at"],
                    "finished_at": session["finished_at"],
                    "seconds": (finished - started).total_seconds(),
                    "cost_usd": None,
                    "num_turns": None,
                }
            )
    for generation in _generations(root):
        path = Path(layout.proposer_session(root, generation))
        if path.exists():
            session = artifacts.read_artifact(path, "proposer-session")["session"]
            collected.append(
                {
                    "generation": generation,
                    "task": None,
                    "arm": None,
                    "run": None,
                    "role": "proposer",
                    "started_at": None,
                    "finished_at": None,
                    "seconds": None,
                    "cost_usd": session.get("cost_usd"),
                    "num_turns": session.get("num_turns"),
                }
            )
    return pd.DataFrame(collected)


def _decision_entry(generation: int, document: Mapping[str, Any], decision: Mapping[str, Any]) -> dict[str, Any]:
    cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
    return {
        "generation": generation,
        "incumbent_arm": decision["incumbent_arm"],
        "candidate_arm": decision["candidate_arm"],
        "rule": decision["rule"],
        "decision": decision["decision"],
        "objective": cost["objective"],
        "estimate_pct": cost["estimate_pct"],
        "ci_low_pct": cost["ci_low_pct"],
        "ci_high_pct": cost["ci_high_pct"],
        "p_value": cost["p_value"],
        "tasks": cost["tasks"],
        "cost_conclusion": cost["conclusion"],
        "resolution_difference_pct": quality["difference_pct"],
        "p_noninferiority": quality["p_noninferiority"],
        "quality_conclusion": quality["conclusion"],
        "generation_alpha": document["error_control"]["generation_alpha"],
        "reason": decision["reasons"][0] if decision["reasons"] else "",
    }


def decisions(folder: str | Path) -> pd.DataFrame:
    """One row per (generation, candidate arm) of every ``promotion.json``: the decision, the cost test it ran
    (objective, estimate, interval, p-value), the quality test's difference and non-inferiority p-value, the
    generation's alpha and the first reason."""
    root = Path(folder)
    collected = []
    for generation in _generations(root):
        path = Path(layout.promotion(root, generation))
        if path.exists():
            document = artifacts.read_artifact(path, "promotion")
            collected += [_decision_entry(generation, document, decision) for decision in document["decisions"]]
    return pd.DataFrame(collected)


def _as_rows(given: pd.DataFrame | Iterable[Mapping[str, Any]]) -> list[ResultRow]:
    """Rows as the gate takes them, each validated against the result-row schema (a DataFrame's NaN is None)."""
    if isinstance(given, pd.DataFrame):
        added = ("generation", "generations", "in_sweep", "shared")
        frame = given.drop(columns=[column for column in added if column in given.columns])
        given = [
            {
                key: (None if not isinstance(value, list | dict) and pd.isna(value) else value)
                for key, value in row.items()
            }
            for row in frame.to_dict("records")
        ]
    return [cast(ResultRow, artifacts.validate(dict(row), "result-row")) for row in given]


def regrade(
    given_rows: pd.DataFrame | Iterable[Mapping[str, Any]],
    policy: Mapping[str, Any] | None = None,
    *,
    overlay: Mapping[str, Any],
    bindings: Mapping[str, Any],
    generation: int | None = None,
    design: Any = None,
    cut_short: dict[str, str] | None = None,
    generated_at: datetime | None = None,
    accept_flags: Sequence[str] = (),
) -> PromotionDocument:
    """Rows + policy → the ``promotion/v1`` document ``skillbench gate`` writes for them.

    ``overlay`` and ``bindings`` are the generation's ``overlay.json`` and the run's ``tasks/bindings.json``
    documents (what the promotion is bound to); ``policy`` overrides the defaults (the config schema's ``gate``
    defaults); ``generation`` defaults to the overlay's; ``design`` is a ``runs`` setting (a sequential mapping replays
    the looks); ``accept_flags`` the content-flag categories accepted (`evolution.accept_flags`). The rows must come
    from one model and effort, as the pipeline's do."""
    checked = _as_rows(given_rows)
    models = sorted({str(row["model"]) for row in checked})
    efforts = sorted({str(row["effort"]) for row in checked})
    if len(models) != 1 or len(efforts) != 1:
        raise ValueError(f"rows mix models {models} or efforts {efforts}; cannot regrade")
    return promotion.grade_rows(
        checked,
        overlay=artifacts.validate(dict(overlay), "overlay"),
        bindings=artifacts.validate(dict(bindings), "task-bindings"),
        policy=gate.resolve_policy(policy),
        model=models[0],
        effort=checked[0]["effort"],
        generated_at=generated_at or datetime.now(UTC),
        generation=overlay["generation"] if generation is None else generation,
        design=design,
        cut_short=cut_short,
        accept_flags=accept_flags,
    )


def regrade_generation(
    folder: str | Path,
    generation: int,
    policy: Mapping[str, Any] | None = None,
    *,
    design: Any = None,
    generated_at: datetime | None = None,
    record: bool = True,
) -> PromotionDocument:
    """``regrade`` of a stored generation: its ``results.jsonl``, ``overlay.json``, the run's task bindings and, for
    a sequential ``design``, its last look (the pairs a budget cut short) — what ``skillbench gate`` reads.

    Under another policy than the run's own, the document comes back marked ``post_hoc`` and, with ``record``, is
    kept beside the run's decision (``gen<N>/post-hoc/``) and listed in the run's summary (`reporting.posthoc`):
    a verdict a moved threshold flipped is never read without the run's own."""
    root = Path(folder)
    looks = sorted(
        (root / layout.generation_name(generation) / layout.LOOKS).glob("look*.json"),
        key=lambda path: int(path.stem[4:]) if path.stem[4:].isdigit() else 0,
    )
    cut_short = promotion.cut_short_pairs(str(looks[-1])) if looks and isinstance(design, dict) else None
    document = regrade(
        artifacts.read_jsonl(Path(layout.rows(root, generation)), "result-row"),
        policy,
        overlay=artifacts.read_artifact(Path(layout.overlay(root, generation)), "overlay"),
        bindings=artifacts.read_artifact(Path(layout.bindings(root)), "task-bindings"),
        generation=generation,
        design=design,
        cut_short=cut_short,
        generated_at=generated_at,
    )
    run_path = Path(layout.promotion(root, generation))
    if not run_path.is_file():
        return document
    if record:
        recorded = posthoc.record(root, generation, document)
        return recorded[0] if recorded is not None else document
    run = cast(PromotionDocument, artifacts.read_artifact(run_path, "promotion"))
    return posthoc.mark(document, run, run_path) or document
