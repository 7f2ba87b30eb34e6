"""Review tasks: the review-output contract, the hidden labels and the deterministic score of one against the other.

A review session writes `review-output.json` (`schemas/review-output.schema.json`): a verdict and findings, each
with an id, severity, path, inclusive line range, category, scenario, evidence, recommendation and whether it
blocks. `read_review_output` refuses anything else with a `ReviewOutputError` whose `kind` names the defect
(`REVIEW_ERROR_KINDS`), so a cell can tell a missing review from a malformed one. A task's hidden
`review-labels.json` (`schemas/review-labels.schema.json`, `read_labels`) holds the expected verdict and the
labelled defects; a clean control has none.

`score_review` matches findings to defects and counts. The rules, all of them deterministic:

* A finding can match a defect when their paths are equal once normalised (`normalise_path`: `\\` is a separator,
  `./` and empty segments go) and their inclusive line ranges share at least one line.
* The matching is a maximum one (the most pairs). Among maximum matchings, the one with the most pairs whose
  category agrees; then the most whose severity agrees; then the largest summed overlap, each pair's overlap being
  the share of the two ranges' union they have in common (in `OVERLAP_STEPS`ths, rounded down). The criteria are
  packed into one integer weight per pair whose digits cannot carry into each other, so an assignment solve
  (`scipy.optimize.linear_sum_assignment`) optimises them in that order. Exact ties go to lower ids: findings in
  id order each take the lowest-id defect that keeps the matching optimal. The matching depends on the documents'
  content, never on their order.
* TP = matched pairs, FP = unmatched findings (a duplicate of a matched finding is one), FN = unmatched defects.
* A ratio whose denominator is 0 is 1.0: no findings make no false claim (precision), no defects leave nothing to
  miss (recall, blocker recall). F1 is 0.0 when precision and recall are both 0. So every score is a finite
  number; a defect case's empty review has precision 1.0 but recall and F1 0.0.
* Severity weights (`SEVERITY_WEIGHTS`): each level counts twice the one below (critical 8, high 4, medium 2,
  low 1). A matched pair earns the lesser weight of its finding and its defect; weighted precision is the earned
  weight over the weight the findings claim, weighted recall the earned weight over the defects' weight. Calling a
  critical defect low costs recall; calling a low one critical costs precision.
* Blocker recall: the share of blocking defects matched by a blocking finding (one matched by a non-blocking
  finding was seen but would have been merged).
* The verdict is correct when it equals the labels' verdict. A clean control (no defects) passes when the review
  has no finding at all and approves; `clean_control_passed` is None on a defect case.

`check_review_task` is the task check of a review task before any session: the reference review must score full
marks and an empty review nothing on a defect case (or pass a clean control).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast, get_args

from skillbench.base import artifacts
from skillbench.base.errors import SkillbenchError
from skillbench.base.records import ReviewMetrics

if TYPE_CHECKING:
    import numpy as np

MAX_REVIEW_BYTES = 256 * 1024
MAX_FINDINGS = 100
MAX_LABELS_BYTES = 1024 * 1024
MAX_LABELS = 100
SEVERITY_WEIGHTS: dict[str, int] = {"critical": 8, "high": 4, "medium": 2, "low": 1}
OVERLAP_STEPS = 1000
# The score's ratios, as a row's `review` carries them.
RATIO_FIELDS = (
    "precision",
    "recall",
    "f1",
    "weighted_precision",
    "weighted_recall",
    "weighted_f1",
    "blocker_recall",
)

Severity = Literal["critical", "high", "medium", "low"]
Verdict = Literal["approve", "comment", "request_changes"]
ReviewErrorKind = Literal[
    "review-missing",
    "review-unreadable",
    "review-oversized",
    "review-not-utf8",
    "review-not-json",
    "review-schema",
    "review-inconsistent-verdict",
]
REVIEW_ERROR_KINDS: tuple[ReviewErrorKind, ...] = get_args(ReviewErrorKind)


class ReviewOutputError(SkillbenchError, ValueError):
    """A review output the contract refuses; `kind` names the defect, `field` the offending field (a JSON path)."""

    def __init__(self, kind: ReviewErrorKind, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.kind: ReviewErrorKind = kind
        self.field = field


class ReviewLabelsError(SkillbenchError, ValueError):
    """A task's review labels are unusable; the message names the file, the field and the fix."""


class ReviewFinding(TypedDict):
    id: str
    severity: Severity
    path: str
    line_start: int
    line_end: int
    category: str
    scenario: str
    evidence: str
    recommendation: str
    blocking: bool


class ReviewOutput(TypedDict):
    schema: str
    verdict: Verdict
    findings: list[ReviewFinding]


class ReviewDefect(TypedDict):
    id: str
    path: str
    line_start: int
    line_end: int
    severity: Severity
    blocking: bool
    category: str


class ReviewLabels(TypedDict):
    schema: str
    verdict: Verdict
    defects: list[ReviewDefect]


class ReviewScore(TypedDict):
    matches: list[tuple[str, str]]
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float
    weighted_precision: float
    weighted_recall: float
    weighted_f1: float
    blocker_recall: float
    verdict_correct: bool
    clean_control_passed: bool | None


def normalise_path(path: str) -> str | None:
    """`path` as a repository-relative POSIX path (`\\` a separator, no `./` or empty segments); None when it is
    absolute, climbs out with `..` or names nothing."""
    text = path.replace("\\", "/")
    if text.startswith("/") or "\x00" in text:
        return None
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


# Reading -----------------------------------------------------------------------------------------


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"duplicate key {key!r}")
        document[key] = value
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads_strict(text: str) -> Any:
    """JSON as RFC 8259 has it, refusing what Python's reader lets through: duplicate keys, NaN and Infinity."""
    return json.loads(text, object_pairs_hook=_strict_object, parse_constant=_refuse_constant)


def _range_problems(entries: list[dict[str, Any]], where: str) -> list[tuple[str, str]]:
    """(field, problem) for what the schema cannot say: unique ids, ordered ranges, repository-relative paths."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        field = f"$.{where}[{index}]"
        if entry["id"] in seen:
            problems.append((f"{field}.id", f"id {entry['id']!r} is used twice; ids must be unique"))
        seen.add(entry["id"])
        if entry["line_end"] < entry["line_start"]:
            problems.append(
                (f"{field}.line_end", f"line_end {entry['line_end']} is before line_start {entry['line_start']}")
            )
        if normalise_path(entry["path"]) is None:
            problems.append(
                (f"{field}.path", f"path {entry['path']!r} is not relative to the repository root (absolute or `..`)")
            )
    return problems


def _verdict_problem(verdict: str, entries: list[dict[str, Any]], what: str) -> str | None:
    blocking = [entry["id"] for entry in entries if entry["blocking"]]
    if blocking and verdict != "request_changes":
        return (
            f"verdict {verdict!r} with blocking {what} {', '.join(blocking)}: a blocking {what} needs request_changes"
        )
    if not blocking and verdict == "request_changes":
        return f"verdict 'request_changes' without a blocking {what}: mark the {what} that blocks, or approve/comment"
    return None


def check_review_output(document: Any, *, source: str = "review-output.json") -> ReviewOutput:
    """`document` as a `ReviewOutput` if it keeps the contract; else `ReviewOutputError` (oversized, schema or
    inconsistent verdict)."""
    findings = document.get("findings") if isinstance(document, dict) else None
    if isinstance(findings, list) and len(findings) > MAX_FINDINGS:
        raise ReviewOutputError(
            "review-oversized", f"{source}: {len(findings)} findings, over the limit of {MAX_FINDINGS}"
        )
    errors = artifacts.schema_errors(document, "review-output")
    if errors:
        field = errors[0].split(": ", 1)[0]
        raise ReviewOutputError("review-schema", f"{source}: not a valid review output: {errors[0]}", field=field)
    problems = _range_problems(document["findings"], "findings")
    if problems:
        field, problem = problems[0]
        raise ReviewOutputError("review-schema", f"{source}: {field}: {problem}", field=field)
    inconsistent = _verdict_problem(document["verdict"], document["findings"], "finding")
    if inconsistent:
        raise ReviewOutputError("review-inconsistent-verdict", f"{source}: {inconsistent}", field="$.verdict")
    return cast(ReviewOutput, document)


def parse_review_output(payload: bytes, *, source: str = "review-output.json") -> ReviewOutput:
    """The review output in `payload`, or `ReviewOutputError` naming the first defect."""
    if len(payload) > MAX_REVIEW_BYTES:
        raise ReviewOutputError(
            "review-oversized", f"{source}: {len(payload)} bytes, over the limit of {MAX_REVIEW_BYTES} bytes"
        )
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReviewOutputError("review-not-utf8", f"{source}: not valid UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise ReviewOutputError("review-not-json", f"{source}: empty; a review output is one JSON object")
    try:
        document = _loads_strict(text)
    except ValueError as exc:
        raise ReviewOutputError("review-not-json", f"{source}: not valid JSON ({exc})") from exc
    return check_review_output(document, source=source)


def read_review_output(path: Path) -> ReviewOutput:
    """The review a session wrote at `path`: a regular non-symlink file of at most `MAX_REVIEW_BYTES` bytes
    keeping the contract; else `ReviewOutputError` naming the defect."""
    path = Path(path)
    kind = artifacts.path_kind(path)
    if kind == "missing":
        raise ReviewOutputError("review-missing", f"{path}: the review output was never written")
    if kind != "file":
        raise ReviewOutputError("review-unreadable", f"{path}: the review output must be a regular file, not a {kind}")

    def refuse_oversized(opened: os.stat_result) -> None:
        if opened.st_size > MAX_REVIEW_BYTES:
            raise ReviewOutputError(
                "review-oversized", f"{path}: {opened.st_size} bytes, over the limit of {MAX_REVIEW_BYTES} bytes"
            )

    try:
        payload = artifacts.read_regular_file(
            path, MAX_REVIEW_BYTES, what="review output", error=artifacts.ArtifactError, inspect=refuse_oversized
        )
    except artifacts.ArtifactError as exc:
        raise ReviewOutputError("review-unreadable", str(exc)) from exc
    return parse_review_output(payload, source=str(path))


def check_labels(document: Any, *, source: str = "review-labels.json") -> ReviewLabels:
    """`document` as `ReviewLabels` if it is a usable answer; else `ReviewLabelsError` naming the field."""
    errors = artifacts.schema_errors(document, "review-labels")
    if errors:
        raise ReviewLabelsError(f"{source}: not valid review labels: {errors[0]}")
    problems = _range_problems(document["defects"], "defects")
    if problems:
        field, problem = problems[0]
        raise ReviewLabelsError(f"{source}: {field}: {problem}")
    inconsistent = _verdict_problem(document["verdict"], document["defects"], "defect")
    if inconsistent:
        raise ReviewLabelsError(f"{source}: {inconsistent}")
    if not document["defects"] and document["verdict"] != "approve":
        raise ReviewLabelsError(f"{source}: a clean control (no defects) expects the verdict 'approve'")
    return cast(ReviewLabels, document)


def parse_labels(payload: bytes, *, source: str = "review-labels.json") -> ReviewLabels:
    """Review labels from their bytes (at most `MAX_LABELS_BYTES`), or `ReviewLabelsError`."""
    if len(payload) > MAX_LABELS_BYTES:
        raise ReviewLabelsError(f"{source}: {len(payload)} bytes, over the limit of {MAX_LABELS_BYTES} bytes")
    try:
        document = _loads_strict(payload.decode("utf-8"))
    except ValueError as exc:
        raise ReviewLabelsError(f"{source}: review labels are not valid UTF-8 JSON ({exc})") from exc
    return check_labels(document, source=source)


def read_labels(path: Path) -> ReviewLabels:
    """A task's hidden review labels at `path` (at most `MAX_LABELS_BYTES`), or `ReviewLabelsError`."""
    path = Path(path)
    payload = artifacts.read_regular_file(path, MAX_LABELS_BYTES, what="review labels", error=ReviewLabelsError)
    return parse_labels(payload, source=str(path))


# Scoring -----------------------------------------------------------------------------------------


def _overlap_steps(finding: ReviewFinding, defect: ReviewDefect) -> int | None:
    """None when the two cannot match; else the share of their ranges' union they share, in OVERLAP_STEPS."""
    if normalise_path(finding["path"]) != normalise_path(defect["path"]):
        return None
    shared = min(finding["line_end"], defect["line_end"]) - max(finding["line_start"], defect["line_start"]) + 1
    if shared <= 0:
        return None
    union = max(finding["line_end"], defect["line_end"]) - min(finding["line_start"], defect["line_start"]) + 1
    return shared * OVERLAP_STEPS // union


def _pack(digits: list[int], maxima: list[int], pairs: int) -> int:
    """`digits` as one integer, most significant first, each in radix `pairs * maximum + 1`: a sum of at most
    `pairs` packed values never carries from one digit into the next, so sums compare digit by digit."""
    value = 0
    for digit, maximum in zip(digits, maxima, strict=True):
        value = value * (pairs * maximum + 1) + digit
    return value


def match_findings(findings: list[ReviewFinding], defects: list[ReviewDefect]) -> list[tuple[str, str]]:
    """The matching of the module's rules as (finding id, defect id) pairs, sorted by finding id."""
    ordered_findings = sorted(findings, key=lambda finding: finding["id"])
    ordered_defects = sorted(defects, key=lambda defect: defect["id"])
    pairs = min(len(ordered_findings), len(ordered_defects))
    if pairs == 0:
        return []
    # NumPy and SciPy load here, on a review's first scoring, not with the module: every cell imports the graders
    # and most cells are not reviews (a third of a second per cell job; docs/internals.md, "How the DAG scales").
    import numpy as np

    maxima = [1, 1, 1, OVERLAP_STEPS]
    weights = np.zeros((len(ordered_findings), len(ordered_defects)))
    for row, finding in enumerate(ordered_findings):
        for column, defect in enumerate(ordered_defects):
            overlap = _overlap_steps(finding, defect)
            if overlap is None:
                continue
            digits = [
                1,
                int(finding["category"] == defect["category"]),
                int(finding["severity"] == defect["severity"]),
                overlap,
            ]
            weights[row, column] = _pack(digits, maxima, pairs)
    return [
        (ordered_findings[row]["id"], ordered_defects[column]["id"])
        for row, column in _lowest_optimal_assignment(weights)
    ]


def _best_total(weights: np.ndarray[Any, np.dtype[np.float64]]) -> float:
    from scipy.optimize import linear_sum_assignment

    if weights.size == 0:
        return 0.0
    rows, columns = linear_sum_assignment(weights, maximize=True)
    return float(weights[rows, columns].sum())


def _lowest_optimal_assignment(weights: np.ndarray[Any, np.dtype[np.float64]]) -> list[tuple[int, int]]:
    """The optimal assignment (of positive weights only) that gives each row in turn the lowest column it can
    take while the total stays optimal, leaving a row unassigned only when no column can: exact ties go to lower
    finding ids, then lower defect ids. (The weights are integers below 2**53, so their sums compare exactly.)"""
    best = _best_total(weights)
    chosen: list[tuple[int, int]] = []
    earned = 0.0
    for row in range(weights.shape[0]):
        if earned == best:
            break
        used = {column for _, column in chosen}
        for column in (weights[row] > 0).nonzero()[0].tolist():
            if column in used:
                continue
            others = [other for other in range(weights.shape[1]) if other not in used and other != column]
            if earned + weights[row, column] + _best_total(weights[row + 1 :][:, others]) == best:
                chosen.append((row, column))
                earned += float(weights[row, column])
                break
    return chosen


def _ratio(numerator: float, denominator: float) -> float:
    return 1.0 if denominator == 0 else numerator / denominator


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def score_review(output: ReviewOutput, labels: ReviewLabels) -> ReviewScore:
    """The review's score against the labels (the module's rules)."""
    findings = {finding["id"]: finding for finding in output["findings"]}
    defects = {defect["id"]: defect for defect in labels["defects"]}
    matches = match_findings(output["findings"], labels["defects"])
    tp = len(matches)
    precision = _ratio(tp, len(findings))
    recall = _ratio(tp, len(defects))
    earned = sum(
        min(SEVERITY_WEIGHTS[findings[f]["severity"]], SEVERITY_WEIGHTS[defects[d]["severity"]]) for f, d in matches
    )
    claimed = sum(SEVERITY_WEIGHTS[finding["severity"]] for finding in findings.values())
    labelled = sum(SEVERITY_WEIGHTS[defect["severity"]] for defect in defects.values())
    weighted_precision = _ratio(earned, claimed)
    weighted_recall = _ratio(earned, labelled)
    blockers = [defect_id for defect_id, defect in defects.items() if defect["blocking"]]
    blocked = {d for f, d in matches if findings[f]["blocking"] and defects[d]["blocking"]}
    clean = not defects
    return {
        "matches": matches,
        "tp": tp,
        "fp": len(findings) - tp,
        "fn": len(defects) - tp,
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "weighted_precision": weighted_precision,
        "weighted_recall": weighted_recall,
        "weighted_f1": _f1(weighted_precision, weighted_recall),
        "blocker_recall": _ratio(len(blocked), len(blockers)),
        "verdict_correct": output["verdict"] == labels["verdict"],
        "clean_control_passed": (not findings and output["verdict"] == "approve") if clean else None,
    }


def review_metrics(output: ReviewOutput | None, error: ReviewErrorKind | None, labels: ReviewLabels) -> ReviewMetrics:
    """A row's `review`: the score of `output` against `labels`; a review that broke the contract (`output` None,
    `error` its kind) scores 0.0 on every ratio and fails the verdict and the clean control."""
    defects = labels["defects"]
    clean = not defects
    counts = {
        "case": "clean" if clean else "defect",
        "expected_verdict": labels["verdict"],
        "defects": len(defects),
        "blocking_defects": sum(1 for defect in defects if defect["blocking"]),
    }
    if output is None:
        zeros = dict.fromkeys(RATIO_FIELDS, 0.0)
        return cast(
            ReviewMetrics,
            {
                **counts,
                "output_error": error,
                "verdict": None,
                "findings": 0,
                "tp": 0,
                "fp": 0,
                "fn": len(defects),
                **zeros,
                "verdict_correct": False,
                "clean_control_passed": False if clean else None,
            },
        )
    score = cast(dict[str, Any], score_review(output, labels))
    return cast(
        ReviewMetrics,
        {
            **counts,
            "output_error": None,
            "verdict": output["verdict"],
            "findings": len(output["findings"]),
            **{key: score[key] for key in ("tp", "fp", "fn", *RATIO_FIELDS, "verdict_correct", "clean_control_passed")},
        },
    )


def review_resolved(metrics: ReviewMetrics) -> bool:
    """A review that gets it right: a valid review with the right verdict that, on a defect case, flags every
    blocking defect as blocking and, on a clean control, finds nothing."""
    if metrics["output_error"] is not None or not metrics["verdict_correct"]:
        return False
    if metrics["case"] == "clean":
        return metrics["clean_control_passed"] is True
    return metrics["blocker_recall"] == 1.0


def empty_review() -> ReviewOutput:
    """The review that finds nothing and approves."""
    return {"schema": "review-output/v1", "verdict": "approve", "findings": []}


def check_review_task(labels: ReviewLabels, reference_output: ReviewOutput) -> list[str]:
    """What makes a review task unfit to score sessions with, one sentence each (empty: fit): the reference review
    must keep the contract and score full marks; an empty review must score nothing on a defect case and pass a
    clean control."""
    try:
        check_labels(labels, source="the labels")
    except ReviewLabelsError as exc:
        return [str(exc)]
    try:
        check_review_output(reference_output, source="the reference review")
    except ReviewOutputError as exc:
        return [f"{exc} ({exc.kind})"]
    problems = []
    score = score_review(reference_output, labels)
    matched_findings = {f for f, _ in score["matches"]}
    matched_defects = {d for _, d in score["matches"]}
    missed = [defect["id"] for defect in labels["defects"] if defect["id"] not in matched_defects]
    extra = [finding["id"] for finding in reference_output["findings"] if finding["id"] not in matched_findings]
    if missed:
        problems.append(f"the reference review matches no finding to defects {', '.join(sorted(missed))}")
    if extra:
        problems.append(f"the reference review's findings {', '.join(sorted(extra))} match no defect")
    if not missed and not extra and score["weighted_f1"] != 1.0:
        problems.append(
            f"the reference review's severities differ from the labels' (weighted F1 {score['weighted_f1']:.3f})"
        )
    if score["blocker_recall"] != 1.0:
        problems.append("the reference review does not mark every blocking defect's finding as blocking")
    if not score["verdict_correct"]:
        problems.append(
            f"the reference review's verdict {reference_output['verdict']!r} is not the labels' {labels['verdict']!r}"
        )
    empty = score_review(empty_review(), labels)
    if labels["defects"] and (empty["recall"] != 0.0 or empty["f1"] != 0.0 or empty["weighted_f1"] != 0.0):
        problems.append("an empty review scores above zero on this defect case")
    if not labels["defects"] and empty["clean_control_passed"] is not True:
        problems.append("an empty, approving review fails this clean control")
    return problems
