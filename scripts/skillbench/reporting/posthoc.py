"""Decisions under a policy other than the run's own: marked post hoc and kept beside the run's decision.

Moving a threshold after seeing a verdict can flip it, and a flipped verdict read without the one the run started
with misleads. So a regrade of a run's generation (`skillbench gate` with other values, `analysis.regrade_generation`
with another policy) whose policy, accepted content flags or alpha differ from the run's:

* carries `post_hoc` in its document: what differs (`changed`: key → the run's value and this one) and what the
  run's own promotion.json decided;
* is kept as `gen<N>/post-hoc/<digest>.json` (digest of what changed, so the same regrade is one file);
* is listed under its generation in `summary.json` and `summary.md`, beside the run's decision, marked post hoc.

The run's own `promotion.json` is never written here: it is the checkpoint the generation chain and the next
generation's evidence are made from, so a changed file would make Snakemake redo them (a proposer session paid for
again). A regrade whose `--out` is that file is refused (`refuse_run_document`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, cast

from skillbench.base import artifacts, layout
from skillbench.base.records import PromotionDocument
from skillbench.reporting import report

FOLDER = "post-hoc"


class PostHocError(artifacts.ArtifactError):
    """A regrade would replace the run's own decision."""


def refuse_run_document(out: Path, results: Path) -> None:
    """Refuse an `--out` that is the run's own promotion.json of the generation whose rows are regraded."""
    own = results.parent / layout.PROMOTION
    if own.exists() and out.resolve() == own.resolve():
        raise PostHocError(
            f"--out {out} is the run's own decision ({own}); a regrade never replaces it: write it elsewhere (a "
            f"regrade under another policy is also kept beside it, in {results.parent / FOLDER}/)"
        )


def _values(document: PromotionDocument) -> dict[str, Any]:
    values: dict[str, Any] = {f"gate.{key}": value for key, value in document["policy"].items()}
    review = document.get("content_review")
    values["evolution.accept_flags"] = sorted(review["accepted"]) if review else []
    values["generation alpha"] = document["error_control"]["generation_alpha"]
    return values


def differences(run: PromotionDocument, regraded: PromotionDocument) -> dict[str, dict[str, Any]]:
    """What the regrade's policy (and accepted flags, and alpha) changed from the run's: key → both values."""
    before, after = _values(run), _values(regraded)
    return {
        key: {"run": before.get(key), "post_hoc": after.get(key)}
        for key in sorted(set(before) | set(after))
        if artifacts.compact_json(before.get(key)) != artifacts.compact_json(after.get(key))
    }


def mark(regraded: PromotionDocument, run: PromotionDocument, run_path: Path) -> PromotionDocument | None:
    """The regraded document marked post hoc against the run's own, or None when nothing differs (the same
    policy gives the run's decision: not post hoc)."""
    changed = differences(run, regraded)
    if not changed:
        return None
    marked = cast(dict[str, Any], dict(regraded))
    marked["post_hoc"] = {
        "of": str(run_path),
        "changed": changed,
        "run_decisions": [
            {"candidate_arm": decision["candidate_arm"], "decision": decision["decision"]}
            for decision in run["decisions"]
        ],
    }
    return cast(PromotionDocument, artifacts.validate(marked, "promotion"))


def record(root: str | Path, generation: int, regraded: PromotionDocument) -> tuple[PromotionDocument, Path] | None:
    """Keep a regrade of ``generation`` under another policy beside the run's decision (and in the summary); return
    the marked document and where it went, or None when the run has no decision there or nothing differs."""
    root = Path(root)
    run_path = Path(layout.promotion(root, generation))
    if not run_path.is_file():
        return None
    run = cast(PromotionDocument, artifacts.read_artifact(run_path, "promotion"))
    marked = mark(regraded, run, run_path)
    if marked is None:
        return None
    digest = hashlib.sha256(artifacts.compact_json(marked["post_hoc"]["changed"]).encode()).hexdigest()[:16]
    target = Path(layout.generation_dir(root, generation)) / FOLDER / f"{digest}.json"
    target.parent.mkdir(exist_ok=True)
    artifacts.write_artifact(target, cast(dict[str, Any], marked), "promotion")
    refresh_summary(root)
    return marked, target


def entries(root: str | Path, generation: int) -> list[dict[str, Any]]:
    """The post-hoc decisions kept for ``generation``, as summary.json lists them (oldest first)."""
    folder = Path(layout.generation_dir(root, generation)) / FOLDER
    found = []
    for path in sorted(folder.glob("*.json"), key=lambda path: (path.stat().st_mtime, path.name)):
        try:
            document = artifacts.read_artifact(path, "promotion")
        except (artifacts.ArtifactError, OSError):
            continue
        if "post_hoc" not in document:
            continue
        found.append(
            {
                "document": os.path.relpath(path, root),
                "generated_at": document["generated_at"],
                "changed": document["post_hoc"]["changed"],
                "decisions": [
                    {
                        "candidate_arm": decision["candidate_arm"],
                        "decision": decision["decision"],
                        "reason": decision["reasons"][0] if decision["reasons"] else "",
                    }
                    for decision in document["decisions"]
                ],
            }
        )
    return found


def refresh_summary(root: Path) -> None:
    """summary.json and summary.md with every generation's post-hoc decisions (a run that has finished)."""
    path = Path(layout.summary(root))
    if not path.is_file():
        return
    summary = artifacts.read_artifact(path, "summary")
    for generation in summary["generations"]:
        found = entries(root, generation["generation"])
        if found:
            generation["post_hoc"] = found
    artifacts.write_artifact(path, summary, "summary")
    artifacts.atomic_write_text(Path(layout.summary_markdown(root)), report.render_summary(summary))
