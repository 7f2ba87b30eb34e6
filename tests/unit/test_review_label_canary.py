"""Canary: a review task's hidden labels cannot be rebuilt from the proposer's evidence bundle.

The attack of issue 38: review sessions each write a different review (their findings reach the bundle in the
cell's patch and transcript), and each run's score against the hidden labels (tp, fp, verdict_correct) sat beside
them in selected-rows.json. Differencing a handful of runs then tells which reported lines are labelled defects
and which verdict is expected. This test plays that attack on a bundle staged from runs scored by the project's
own scorer against the review demo's labels, and fails if it recovers anything. The attacker is shown to be
competent first: given the runs as they are on disk (findings beside their scores), it rebuilds every label.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rowfactory import make_review_row
from skillbench.evolution import evidence
from skillbench.grading.review import check_labels, review_metrics
from test_evidence import INC, bundle_files, make_row, stage, stream, write_cell, write_rows

REPO = Path(__file__).resolve().parents[2]
LABELS = REPO / "tasks" / "review-demo" / "labels"
PATH = "inventory/catalog.py"
# Lines a session may report: the price-update change's labelled defect lines, and decoys that are no defect.
DEFECT_TASK, CLEAN_TASK = "price-update", "product-listing"
DECOYS = (10, 20, 30)


def labels(task: str) -> dict:
    return dict(check_labels(json.loads((LABELS / f"{task}.json").read_text()), source=task))


def defect_lines(task: str) -> set[int]:
    return {line for defect in labels(task)["defects"] for line in range(defect["line_start"], defect["line_end"] + 1)}


def session_review(lines: list[int], verdict: str) -> dict:
    return {
        "schema": "review-output/v1",
        "verdict": verdict,
        "findings": [
            {
                "id": f"f{line}",
                "severity": "high",
                "path": PATH,
                "line_start": line,
                "line_end": line,
                "category": "correctness",
                "scenario": "a caller passes a negative price",
                "evidence": f"line {line} accepts it",
                "recommendation": "refuse it",
                "blocking": True,
            }
            for line in lines
        ],
    }


def runs_of(task: str) -> list[tuple[dict, dict]]:
    """Six runs of one review task: each reports one line (a defect line or a decoy) with a verdict, scored by the
    project's scorer against the task's real labels. (review, row.review)."""
    reported = sorted(defect_lines(DEFECT_TASK)) + list(DECOYS)
    verdicts = ["request_changes", "approve", "comment"]
    runs = []
    for run, line in enumerate(reported):
        review = session_review([line], verdicts[run % len(verdicts)])
        runs.append((review, dict(review_metrics(review, None, labels(task)))))
    return runs


def cell_files(review: dict) -> tuple[bytes, bytes]:
    """The cell's patch (the review file it wrote) and its transcript (the Write call that wrote it)."""
    text = json.dumps(review)
    patch = (
        "diff --git a/.skillbench-output/review-output.json b/.skillbench-output/review-output.json\n"
        f"--- /dev/null\n+++ b/.skillbench-output/review-output.json\n@@ -0,0 +1 @@\n+{text}\n"
    ).encode()
    return patch, stream(f"Writing the review: {text}")


# ─── The attacker: reads findings and scores wherever they are, and differences them ──────────────────────

FINDINGS = re.compile(r'\{"schema": "review-output/v1".*?\]\}')


def findings_in(text: str) -> list[tuple[str, list[int]]]:
    """(verdict, reported lines) of every review document quoted in a text."""
    found = []
    for match in FINDINGS.finditer(text.replace('\\"', '"')):
        try:
            document = json.loads(match.group(0))
        except ValueError:
            continue
        found.append((document["verdict"], [finding["line_start"] for finding in document["findings"]]))
    return found


def rebuild(runs: list[dict]) -> dict[str, dict]:
    """Labels rebuilt from runs, each {task, reviews: [(verdict, lines)], scores: row.review or None}: a run whose
    reported lines all scored (fp 0) names defect lines; a run with tp 0 names non-defects; a run whose verdict
    was scored correct names the expected verdict."""
    rebuilt: dict[str, dict] = {}
    for run in runs:
        scores = run["scores"]
        if not scores or not run["reviews"]:
            continue
        verdict, lines = run["reviews"][-1]
        label = rebuilt.setdefault(run["task"], {"defect_lines": set(), "not_defects": set(), "verdict": None})
        if scores.get("fp") == 0 and scores.get("tp"):
            label["defect_lines"] |= set(lines)
        if scores.get("tp") == 0 and scores.get("fp"):
            label["not_defects"] |= set(lines)
        if scores.get("verdict_correct") is True:
            label["verdict"] = verdict
    return {task: label for task, label in rebuilt.items() if label["defect_lines"] or label["verdict"]}


def runs_in_bundle(files: dict[str, bytes]) -> list[dict]:
    """Every staged run with the reviews its staged files quote and whatever per-run scores sit beside them."""
    rows = json.loads(files[evidence.ROWS_FILE])
    runs = []
    for row in rows:
        texts = [files[name].decode() for name in [row.get("patch_file"), *row.get("transcript_files", [])] if name]
        scores = row.get("review") or {
            key: row[key] for key in ("tp", "fp", "verdict_correct") if key in row
        }  # wherever a per-run score may sit
        reviews = [review for text in texts for review in findings_in(text)]
        runs.append({"task": row["task"], "reviews": reviews, "scores": scores})
    return runs


def test_the_attacker_rebuilds_the_labels_from_the_runs_as_they_are_on_disk():
    """Without the bundle's defences: findings beside their per-run scores give every defect line and verdict."""
    runs = [
        {"task": task, "reviews": [(review["verdict"], [f["line_start"] for f in review["findings"]])], "scores": s}
        for task in (DEFECT_TASK, CLEAN_TASK)
        for review, s in runs_of(task)
    ]
    rebuilt = rebuild(runs)
    assert rebuilt[DEFECT_TASK]["defect_lines"] == defect_lines(DEFECT_TASK)
    assert rebuilt[DEFECT_TASK]["verdict"] == labels(DEFECT_TASK)["verdict"]
    assert rebuilt[CLEAN_TASK]["verdict"] == labels(CLEAN_TASK)["verdict"] == "approve"


def test_labels_cannot_be_rebuilt_from_a_staged_review_bundle(tmp_path):
    root = tmp_path / "results" / "exp"
    rows = []
    for task, case in ((DEFECT_TASK, "defect"), (CLEAN_TASK, "clean")):
        for run, (review, scores) in enumerate(runs_of(task)):
            patch, transcript = cell_files(review)
            row = make_review_row(task, "review", run, case=case, review=scores, cost_usd=0.01 * (run + 1))
            rows.append(write_cell(root, row, patch=patch, transcripts=(transcript,)))
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [*rows, make_row("t", INC, 0)]))
    files = bundle_files(destination)

    assert rebuild(runs_in_bundle(files)) == {}
    # Not one of the sessions' reviews is staged anywhere, nor a per-run score of a review task.
    staged = b"".join(files.values()).decode()
    assert findings_in(staged) == []
    for row in json.loads(files[evidence.ROWS_FILE]):
        assert row["task"] not in (DEFECT_TASK, CLEAN_TASK), row
    # What the proposer gets instead: per (task, arm) aggregates, with neither the case nor the class.
    scores = json.loads(files[evidence.REVIEW_SCORES_FILE])
    assert [(entry["task"], entry["arm"], entry["runs"]) for entry in scores] == [
        (DEFECT_TASK, "review", 6),
        (CLEAN_TASK, "review", 6),
    ]
    for entry in scores:
        assert not {"case", "class", "tp", "fp", "fn", "verdict_correct"} & set(entry), entry
    assert manifest["counts"]["rows_read"] == 13
