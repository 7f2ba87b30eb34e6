"""The review-output contract, the hidden labels and the deterministic score (skillbench.grading.review)."""

from __future__ import annotations

import json
import random

import pytest
from skillbench.base import artifacts
from skillbench.grading import review
from skillbench.grading.review import ReviewLabelsError, ReviewOutputError


def finding(
    id: str,
    path: str = "src/app.py",
    start: int = 10,
    end: int = 12,
    *,
    severity: str = "high",
    category: str = "correctness",
    blocking: bool = False,
) -> dict:
    return {
        "id": id,
        "severity": severity,
        "path": path,
        "line_start": start,
        "line_end": end,
        "category": category,
        "scenario": "a caller passes an empty list",
        "evidence": "`items[0]` on line 11",
        "recommendation": "return early on an empty list",
        "blocking": blocking,
    }


def defect(
    id: str,
    path: str = "src/app.py",
    start: int = 10,
    end: int = 12,
    *,
    severity: str = "high",
    category: str = "correctness",
    blocking: bool = False,
) -> dict:
    return {
        "id": id,
        "path": path,
        "line_start": start,
        "line_end": end,
        "severity": severity,
        "blocking": blocking,
        "category": category,
    }


def output(*findings: dict, verdict: str | None = None) -> dict:
    if verdict is None:
        verdict = "request_changes" if any(f["blocking"] for f in findings) else "comment" if findings else "approve"
    return {"schema": "review-output/v1", "verdict": verdict, "findings": list(findings)}


def labels(*defects: dict, verdict: str | None = None) -> dict:
    if verdict is None:
        verdict = "request_changes" if any(d["blocking"] for d in defects) else "comment" if defects else "approve"
    return {"schema": "review-labels/v1", "verdict": verdict, "defects": list(defects)}


def score(out: dict, lab: dict) -> dict:
    return review.score_review(review.check_review_output(out), review.check_labels(lab))


# Matching ------------------------------------------------------------------------------------------


def test_of_two_findings_on_one_defect_the_closer_range_matches_and_the_other_is_a_false_positive():
    # Both overlap the defect's lines 10-12; "z-exact" covers exactly them, "a-broad" spans 1-100. The overlap
    # rule prefers the exact one although id order alone would have picked "a-broad".
    result = score(output(finding("a-broad", start=1, end=100), finding("z-exact")), labels(defect("D1")))
    assert result["matches"] == [("z-exact", "D1")]
    assert (result["tp"], result["fp"], result["fn"]) == (1, 1, 0)


def test_one_finding_on_two_defects_matches_the_one_of_its_category_before_the_larger_overlap():
    # The finding (10-20, security) shares 6 of 11 lines with D-style (10-15) and 5 of 11 with D-sec (16-20);
    # category agreement ranks above overlap, so D-sec is the match and D-style is missed.
    result = score(
        output(finding("F", start=10, end=20, category="security")),
        labels(
            defect("D-style", start=10, end=15, category="style"),
            defect("D-sec", start=16, end=20, category="security"),
        ),
    )
    assert result["matches"] == [("F", "D-sec")]
    assert (result["tp"], result["fp"], result["fn"]) == (1, 0, 1)


def test_severity_agreement_ranks_above_overlap_when_the_categories_agree():
    # Same category for both defects; D-low overlaps the finding exactly, D-high only on one line. The finding
    # says high, so D-high is preferred.
    result = score(
        output(finding("F", start=10, end=12, severity="high")),
        labels(defect("D-low", start=10, end=12, severity="low"), defect("D-high", start=12, end=30, severity="high")),
    )
    assert result["matches"] == [("F", "D-high")]


def test_category_agreement_ranks_above_severity_agreement():
    # Equal overlaps (both defects cover the finding's lines exactly): D-cat shares the category, D-sev the
    # severity; category comes first.
    result = score(
        output(finding("F", severity="high", category="security")),
        labels(
            defect("D-cat", severity="low", category="security"),
            defect("D-sev", severity="high", category="style"),
        ),
    )
    assert result["matches"] == [("F", "D-cat")]


def test_exact_ties_go_to_lower_ids():
    # Twins on one defect: the lower finding id matches. One finding on two identical defects: the lower
    # defect id. Listed in reverse so that input order would say otherwise.
    assert score(output(finding("F-b"), finding("F-a")), labels(defect("D")))["matches"] == [("F-a", "D")]
    assert score(output(finding("F")), labels(defect("D-y"), defect("D-x")))["matches"] == [("F", "D-x")]


def test_the_matching_is_maximum_even_when_a_preferred_pair_would_block_another():
    # F1 prefers D1 (same category), but F2 can only match D1. A greedy choice of (F1, D1) leaves one pair;
    # the maximum matching pairs F1 with D2 and F2 with D1.
    result = score(
        output(finding("F1", start=10, end=20, category="security"), finding("F2", start=10, end=10)),
        labels(defect("D1", start=5, end=10, category="security"), defect("D2", start=15, end=20)),
    )
    assert result["matches"] == [("F1", "D2"), ("F2", "D1")]
    assert (result["tp"], result["fp"], result["fn"]) == (2, 0, 0)


@pytest.mark.parametrize(
    ("finding_range", "defect_range", "matched"),
    [
        ((5, 10), (10, 15), True),  # share line 10: ranges are inclusive
        ((15, 20), (10, 15), True),  # share line 15
        ((5, 9), (10, 15), False),  # adjacent, no line in common
        ((16, 16), (10, 15), False),
        ((12, 12), (12, 12), True),  # one line each, the same line
        ((1, 100), (50, 50), True),  # containment
    ],
)
def test_ranges_match_when_they_share_a_line_inclusive_of_their_ends(finding_range, defect_range, matched):
    result = score(
        output(finding("F", start=finding_range[0], end=finding_range[1])),
        labels(defect("D", "src/app.py", *defect_range)),
    )
    assert result["tp"] == int(matched)


def test_the_same_finding_twice_is_one_true_positive_and_one_false_positive():
    twin = finding("F2")
    result = score(output(finding("F1"), twin), labels(defect("D")))
    assert (result["tp"], result["fp"], result["fn"]) == (1, 1, 0)
    assert result["precision"] == 0.5
    assert result["recall"] == 1.0


@pytest.mark.parametrize("path", ["./src/app.py", "src/./app.py", "src//app.py", "src\\app.py", "././src/app.py"])
def test_paths_match_once_normalised(path):
    assert score(output(finding("F", path=path)), labels(defect("D", path="src/app.py")))["tp"] == 1


@pytest.mark.parametrize("path", ["src/other.py", "app.py", "src/app.py/x", "SRC/app.py"])
def test_a_different_path_never_matches(path):
    assert score(output(finding("F", path=path)), labels(defect("D", path="src/app.py")))["tp"] == 0


@pytest.mark.parametrize(
    ("path", "normalised"),
    [
        ("./a/b.py", "a/b.py"),
        ("a\\b.py", "a/b.py"),
        ("a//b/./c.py", "a/b/c.py"),
        ("/etc/passwd", None),
        ("\\abs", None),
        ("../outside.py", None),
        ("a/../b.py", None),
        ("./", None),
        ("a\x00b", None),
    ],
)
def test_normalise_path(path, normalised):
    assert review.normalise_path(path) == normalised


def test_the_matching_and_score_do_not_depend_on_the_order_of_findings_or_defects():
    # Ties everywhere: identical twins F-a/F-b on D1, a finding spanning D2 and D3 with nothing to prefer, and a
    # duplicate defect pair; every shuffle must give the first order's answer.
    findings = [
        finding("F-a"),
        finding("F-b"),
        finding("F-span", start=40, end=60),
        finding("F-c", "lib/x.py", 1, 3),
        finding("F-d", "lib/x.py", 1, 3),
    ]
    defects = [
        defect("D1"),
        defect("D2", start=40, end=50),
        defect("D3", start=50, end=60),
        defect("D4", "lib/x.py", 1, 3),
        defect("D5", "lib/x.py", 1, 3),
    ]
    expected = score(output(*findings), labels(*defects))
    generator = random.Random(25)
    for _ in range(30):
        generator.shuffle(findings)
        generator.shuffle(defects)
        assert score(output(*findings), labels(*defects)) == expected
    assert expected["tp"] == 4


def _all_matchings(findings: list[dict], defects: list[dict]):
    """Every matching of findings to overlapping defects on the same path, by exhaustive search."""
    if not findings:
        yield []
        return
    first, rest = findings[0], findings[1:]
    yield from _all_matchings(rest, defects)  # first left unmatched
    for index, candidate in enumerate(defects):
        if (
            first["path"] == candidate["path"]
            and first["line_start"] <= candidate["line_end"]
            and (candidate["line_start"] <= first["line_end"])
        ):
            for tail in _all_matchings(rest, defects[:index] + defects[index + 1 :]):
                yield [(first, candidate), *tail]


def _objective(matching: list[tuple[dict, dict]]) -> tuple[int, int, int, int]:
    """The module docstring's order: pairs, then category agreements, then severity agreements, then the summed
    overlap share of each pair's union in thousandths."""
    overlap = 0
    for f, d in matching:
        shared = min(f["line_end"], d["line_end"]) - max(f["line_start"], d["line_start"]) + 1
        union = max(f["line_end"], d["line_end"]) - min(f["line_start"], d["line_start"]) + 1
        overlap += shared * 1000 // union
    return (
        len(matching),
        sum(f["category"] == d["category"] for f, d in matching),
        sum(f["severity"] == d["severity"] for f, d in matching),
        overlap,
    )


def test_the_matching_is_the_best_by_exhaustive_search_on_random_small_cases():
    generator = random.Random(2025)

    def entry(make, prefix: str, index: int) -> dict:
        start = generator.randint(1, 30)
        return make(
            f"{prefix}{index}",
            generator.choice(["a.py", "b.py"]),
            start,
            start + generator.randint(0, 8),
            severity=generator.choice(["high", "low"]),
            category=generator.choice(["security", "style"]),
        )

    for _ in range(150):
        findings = [entry(finding, "F", i) for i in range(generator.randint(0, 5))]
        defects = [entry(defect, "D", i) for i in range(generator.randint(0, 5))]
        by_id_f = {f["id"]: f for f in findings}
        by_id_d = {d["id"]: d for d in defects}
        chosen = review.match_findings(findings, defects)
        best = max(_objective(matching) for matching in _all_matchings(findings, defects))
        assert _objective([(by_id_f[f], by_id_d[d]) for f, d in chosen]) == best


# Scores --------------------------------------------------------------------------------------------


def test_precision_recall_and_f1_of_a_hand_made_case():
    # Two findings, three defects, one match: P = 1/2, R = 1/3, F1 = 2PR/(P+R) = (1/3)/(5/6) = 0.4.
    result = score(
        output(finding("F1"), finding("F2", "docs/readme.md", 1, 1)),
        labels(defect("D1"), defect("D2", "src/b.py", 1, 5), defect("D3", "src/c.py", 1, 5)),
    )
    assert (result["tp"], result["fp"], result["fn"]) == (1, 1, 2)
    assert result["precision"] == pytest.approx(0.5)
    assert result["recall"] == pytest.approx(1 / 3)
    assert result["f1"] == pytest.approx(0.4)


def test_an_empty_review_of_a_defect_case_claims_nothing_false_and_finds_nothing():
    result = score(output(), labels(defect("D", blocking=True)))
    assert result["precision"] == 1.0  # no findings: no false claim
    assert (result["recall"], result["f1"], result["weighted_recall"], result["weighted_f1"]) == (0.0, 0.0, 0.0, 0.0)
    assert result["blocker_recall"] == 0.0
    assert result["verdict_correct"] is False
    assert result["clean_control_passed"] is None


def test_a_review_whose_every_finding_is_wrong_scores_f1_zero():
    result = score(output(finding("F", "elsewhere.py")), labels(defect("D")))
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)


def test_the_severity_weights_double_per_level():
    weights = review.SEVERITY_WEIGHTS
    assert weights["low"] == 1
    assert weights["medium"] == 2 * weights["low"]
    assert weights["high"] == 2 * weights["medium"]
    assert weights["critical"] == 2 * weights["high"]


def test_calling_a_critical_defect_low_costs_weighted_recall_not_precision():
    # The pair earns min(low, critical) = 1; the finding claims 1, the defect weighs 8.
    result = score(output(finding("F", severity="low")), labels(defect("D", severity="critical")))
    assert result["weighted_precision"] == 1.0
    assert result["weighted_recall"] == pytest.approx(1 / 8)
    assert result["recall"] == 1.0


def test_calling_a_low_defect_critical_costs_weighted_precision_not_recall():
    result = score(output(finding("F", severity="critical")), labels(defect("D", severity="low")))
    assert result["weighted_precision"] == pytest.approx(1 / 8)
    assert result["weighted_recall"] == 1.0
    assert result["weighted_f1"] == pytest.approx(2 * (1 / 8) / (1 + 1 / 8))


def test_missing_a_critical_defect_weighs_more_than_missing_a_low_one():
    found_critical = score(
        output(finding("F", severity="critical")),
        labels(defect("D-crit", severity="critical"), defect("D-low", "src/b.py", severity="low")),
    )
    found_low = score(
        output(finding("F", "src/b.py", severity="low")),
        labels(defect("D-crit", severity="critical"), defect("D-low", "src/b.py", severity="low")),
    )
    assert found_critical["weighted_recall"] == pytest.approx(8 / 9)
    assert found_low["weighted_recall"] == pytest.approx(1 / 9)
    assert found_critical["recall"] == found_low["recall"] == 0.5


def test_blocker_recall_counts_blocking_defects_matched_by_blocking_findings():
    # D1 found and flagged blocking; D2 found but not flagged (it would have merged); D3 is not blocking.
    result = score(
        output(
            finding("F1", blocking=True),
            finding("F2", "src/b.py"),
            finding("F3", "src/c.py"),
        ),
        labels(
            defect("D1", blocking=True),
            defect("D2", "src/b.py", blocking=True),
            defect("D3", "src/c.py"),
        ),
    )
    assert result["tp"] == 3
    assert result["blocker_recall"] == 0.5


def test_blocker_recall_without_blocking_defects_is_vacuously_full():
    assert score(output(finding("F")), labels(defect("D")))["blocker_recall"] == 1.0


def test_the_verdict_is_correct_when_it_is_the_labels_verdict():
    lab = labels(defect("D", blocking=True))
    assert score(output(finding("F", blocking=True)), lab)["verdict_correct"] is True
    assert score(output(finding("F")), lab)["verdict_correct"] is False


def test_a_clean_control_passes_with_no_finding_and_approve():
    result = score(output(), labels())
    assert result["clean_control_passed"] is True
    assert (result["precision"], result["recall"], result["f1"], result["weighted_f1"]) == (1.0, 1.0, 1.0, 1.0)
    assert result["verdict_correct"] is True


@pytest.mark.parametrize(
    "out",
    [
        output(finding("nit", severity="low"), verdict="approve"),  # an approving review with a remark
        output(finding("nit", severity="low")),  # comment
        output(finding("F", blocking=True)),  # request_changes
    ],
)
def test_any_finding_fails_a_clean_control(out):
    result = score(out, labels())
    assert result["clean_control_passed"] is False
    assert result["fp"] == 1
    assert result["precision"] == 0.0
    assert result["f1"] == 0.0


def test_a_clean_control_fails_a_review_with_no_finding_that_does_not_approve():
    result = score(output(verdict="comment"), labels())
    assert result["clean_control_passed"] is False
    assert result["verdict_correct"] is False


# Reading the review output ---------------------------------------------------------------------------


def write(tmp_path, document) -> object:
    path = tmp_path / "review-output.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def refused(path) -> ReviewOutputError:
    with pytest.raises(ReviewOutputError) as caught:
        review.read_review_output(path)
    assert caught.value.kind in review.REVIEW_ERROR_KINDS
    return caught.value


def test_a_valid_review_output_is_read_as_written(tmp_path):
    document = output(finding("F1", "./src/app.py", blocking=True), finding("F2", severity="low"))
    assert review.read_review_output(write(tmp_path, document)) == document


def test_a_review_never_written_is_missing(tmp_path):
    assert refused(tmp_path / "review-output.json").kind == "review-missing"


def test_a_symlink_or_folder_is_unreadable(tmp_path):
    target = write(tmp_path, output())
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert refused(link).kind == "review-unreadable"
    (tmp_path / "folder").mkdir()
    assert refused(tmp_path / "folder").kind == "review-unreadable"


def test_a_review_over_the_byte_limit_is_oversized(tmp_path):
    text = json.dumps(output())
    path = tmp_path / "review-output.json"
    path.write_text(text + " " * (review.MAX_REVIEW_BYTES - len(text)), encoding="utf-8")
    assert review.read_review_output(path) == output()  # exactly at the limit: fine
    path.write_text(text + " " * (review.MAX_REVIEW_BYTES + 1 - len(text)), encoding="utf-8")
    assert refused(path).kind == "review-oversized"


def test_a_review_over_the_finding_limit_is_oversized(tmp_path):
    at_limit = [finding(f"F{i}", start=i + 1, end=i + 1) for i in range(review.MAX_FINDINGS)]
    assert len(review.read_review_output(write(tmp_path, output(*at_limit)))["findings"]) == review.MAX_FINDINGS
    over = [*at_limit, finding("extra")]
    assert refused(write(tmp_path, output(*over))).kind == "review-oversized"


def test_the_limits_are_the_schemas():
    schema = artifacts.load_schema("review-output")
    assert schema["properties"]["findings"]["maxItems"] == review.MAX_FINDINGS
    assert artifacts.load_schema("review-labels")["properties"]["defects"]["maxItems"] == review.MAX_LABELS


@pytest.mark.parametrize("payload", [b"\xff\xfe{}", b'{"verdict": "appro\xe9"}'])
def test_bytes_that_are_not_utf8_are_refused_as_such(tmp_path, payload):
    path = tmp_path / "review-output.json"
    path.write_bytes(payload)
    assert refused(path).kind == "review-not-utf8"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  \n",
        "{",
        "verdict: approve",
        '{"schema": "review-output/v1", "verdict": "approve", "findings": [], "findings": []}',
        '{"schema": "review-output/v1", "verdict": "approve", "findings": [NaN]}',
    ],
    ids=["empty", "blank", "truncated", "yaml", "duplicate-key", "nan"],
)
def test_text_that_is_not_strict_json_is_refused_as_such(tmp_path, text):
    path = tmp_path / "review-output.json"
    path.write_text(text, encoding="utf-8")
    assert refused(path).kind == "review-not-json"


def _without(document: dict, key: str) -> dict:
    return {k: v for k, v in document.items() if k != key}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "$"),
        (_without(output(), "verdict"), "$"),
        ({**output(), "summary": "looks fine"}, "$"),
        (output(verdict="lgtm"), "$.verdict"),
        ({**output(), "schema": "review-output/v2"}, "$.schema"),
        (output(_without(finding("F"), "evidence")), "$.findings[0]"),
        (output({**finding("F"), "confidence": 0.9}), "$.findings[0]"),
        (output(finding("F", severity="blocker")), "$.findings[0].severity"),
        (output(finding("F", start=0, end=3)), "$.findings[0].line_start"),
        (output({**finding("F"), "blocking": "no"}), "$.findings[0].blocking"),
        (output(finding("F", category="Security")), "$.findings[0].category"),
        (output({**finding("F"), "evidence": "   "}), "$.findings[0].evidence"),
        (output(finding("F", start=12, end=10)), "$.findings[0].line_end"),
        (output(finding("F"), finding("F", "src/b.py")), "$.findings[1].id"),
        (output(finding("F", "/src/app.py")), "$.findings[0].path"),
        (output(finding("F", "../app.py")), "$.findings[0].path"),
    ],
    ids=[
        "not-an-object",
        "missing-key",
        "extra-key",
        "unknown-verdict",
        "wrong-schema",
        "finding-missing-key",
        "finding-extra-key",
        "unknown-severity",
        "line-zero",
        "blocking-not-boolean",
        "category-not-lower-case",
        "blank-evidence",
        "range-backwards",
        "duplicate-id",
        "absolute-path",
        "path-outside",
    ],
)
def test_wrong_keys_or_values_are_a_schema_error_naming_the_field(tmp_path, document, field):
    error = refused(write(tmp_path, document))
    assert error.kind == "review-schema"
    assert error.field == field
    assert field in str(error)


@pytest.mark.parametrize(
    "document",
    [
        output(finding("F", blocking=True), verdict="approve"),
        output(finding("F", blocking=True), verdict="comment"),
        output(finding("F"), verdict="request_changes"),
        output(verdict="request_changes"),
    ],
    ids=["approve-with-blocker", "comment-with-blocker", "request-changes-without-blocker", "request-changes-empty"],
)
def test_a_verdict_that_contradicts_the_findings_is_inconsistent(tmp_path, document):
    assert refused(write(tmp_path, document)).kind == "review-inconsistent-verdict"


@pytest.mark.parametrize(
    "document",
    [output(), output(finding("nit", severity="low"), verdict="approve"), output(verdict="comment")],
    ids=["approve-empty", "approve-with-remark", "comment-empty"],
)
def test_verdicts_without_a_blocking_finding_may_approve_or_comment(tmp_path, document):
    assert review.read_review_output(write(tmp_path, document)) == document


def test_every_error_kind_is_distinct_and_reachable():
    # The kinds this file provokes above, one test each: a new kind needs a test.
    assert set(review.REVIEW_ERROR_KINDS) == {
        "review-missing",
        "review-unreadable",
        "review-oversized",
        "review-not-utf8",
        "review-not-json",
        "review-schema",
        "review-inconsistent-verdict",
    }


def test_a_review_output_error_is_a_skillbench_error():
    from skillbench.base.errors import SkillbenchError

    with pytest.raises(SkillbenchError):
        review.parse_review_output(b"{")


# Labels --------------------------------------------------------------------------------------------


def test_labels_are_read_as_written(tmp_path):
    document = labels(defect("D1", blocking=True), defect("D2", "src/b.py", severity="low"))
    path = tmp_path / "review-labels.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert review.read_labels(path) == document


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{", "not valid UTF-8 JSON"),
        (json.dumps({**labels(), "verdict": "comment"}), "clean control"),
        (json.dumps(labels(defect("D", blocking=True), verdict="comment")), "request_changes"),
        (json.dumps(labels(defect("D"), verdict="request_changes")), "without a blocking defect"),
        (json.dumps(labels(defect("D"), defect("D", "src/b.py"))), "$.defects[1].id"),
        (json.dumps(labels(defect("D", start=9, end=3))), "$.defects[0].line_end"),
        (json.dumps(labels({**defect("D"), "scenario": "x"})), "$.defects[0]"),
        (json.dumps(_without(labels(), "defects")), "defects"),
    ],
)
def test_unusable_labels_are_refused_naming_the_problem(tmp_path, text, named):
    path = tmp_path / "review-labels.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ReviewLabelsError) as caught:
        review.read_labels(path)
    assert named in str(caught.value)


def test_missing_labels_are_refused(tmp_path):
    with pytest.raises(ReviewLabelsError):
        review.read_labels(tmp_path / "review-labels.json")


# The task check ------------------------------------------------------------------------------------


def test_a_reference_that_finds_every_defect_exactly_passes_the_task_check():
    lab = labels(defect("D1", blocking=True, severity="critical"), defect("D2", "src/b.py", severity="low"))
    reference = output(finding("R1", blocking=True, severity="critical"), finding("R2", "./src/b.py", severity="low"))
    assert review.check_review_task(lab, reference) == []


def test_a_clean_control_with_an_empty_approving_reference_passes_the_task_check():
    assert review.check_review_task(labels(), output()) == []


def test_a_reference_that_misses_a_defect_fails_the_task_check_naming_it():
    lab = labels(defect("D1"), defect("D2", "src/b.py"))
    problems = review.check_review_task(lab, output(finding("R1")))
    assert len(problems) == 1
    assert "D2" in problems[0]


def test_a_reference_with_a_finding_no_defect_explains_fails_the_task_check_naming_it():
    problems = review.check_review_task(labels(defect("D1")), output(finding("R1"), finding("R-extra", "src/z.py")))
    assert len(problems) == 1
    assert "R-extra" in problems[0]


def test_a_reference_with_other_severities_fails_the_task_check():
    problems = review.check_review_task(labels(defect("D1", severity="high")), output(finding("R1", severity="medium")))
    assert len(problems) == 1
    assert "severit" in problems[0]


def test_a_reference_that_does_not_block_a_blocking_defect_fails_on_blockers_and_verdict():
    problems = review.check_review_task(labels(defect("D1", blocking=True)), output(finding("R1")))
    assert len(problems) == 2
    assert any("blocking" in problem for problem in problems)
    assert any("verdict" in problem for problem in problems)


def test_a_reference_that_breaks_the_contract_fails_the_task_check_with_its_kind():
    problems = review.check_review_task(labels(), output(finding("R1", blocking=True), verdict="approve"))
    assert len(problems) == 1
    assert "review-inconsistent-verdict" in problems[0]


def test_unusable_labels_fail_the_task_check():
    problems = review.check_review_task(labels(defect("D1", start=5, end=1)), output(finding("R1")))
    assert len(problems) == 1
    assert "line_end" in problems[0]


def test_a_clean_control_whose_reference_has_a_finding_fails_the_task_check():
    problems = review.check_review_task(labels(), output(finding("R1", severity="low"), verdict="approve"))
    assert problems and "R1" in problems[0]


# Records ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "kind", "path"),
    [
        (review.ReviewOutput, "review-output", ()),
        (review.ReviewFinding, "review-output", ("properties", "findings", "items")),
        (review.ReviewLabels, "review-labels", ()),
        (review.ReviewDefect, "review-labels", ("properties", "defects", "items")),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_a_review_record_names_the_fields_of_its_schema(record, kind, path):
    node = artifacts.load_schema(kind)
    for key in path:
        node = node[key]
    assert set(record.__annotations__) == set(node["properties"])
    assert set(record.__required_keys__) == set(node["required"])
