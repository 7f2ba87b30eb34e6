"""Review tasks in the report, the HTML pages and the run summaries: the per-case review table, a review cell's page,
and the commands that read rows still reading review rows right."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from rowfactory import make_review, make_review_row, make_row
from skillbench.reporting import cellpage, pages, progress
from skillbench.reporting.report import REVIEW_COLUMNS, render_report, review_section

TIMING = {
    "started_at": "2026-01-01T00:00:00Z",
    "finished_at": "2026-01-01T00:00:30Z",
    "wall_s": 30.0,
    "sessions_s": 20.0,
    "setup_s": 1.0,
    "verify_s": 0.0,
    "oracle_s": 0.0,
    "overhead_s": 9.0,
    "sessions": [{"role": "review", "started_at": "2026-01-01T00:00:01Z", "finished_at": "2026-01-01T00:00:21Z"}],
}
HALF_FOUND = make_review(
    "defect",
    findings=2,
    tp=1,
    fp=1,
    fn=1,
    precision=0.5,
    recall=0.5,
    f1=0.5,
    weighted_precision=0.25,
    weighted_recall=0.25,
    weighted_f1=0.25,
    blocker_recall=0.0,
    verdict="comment",
    verdict_correct=False,
)
NOISY_CLEAN = make_review(
    "clean",
    findings=2,
    fp=2,
    precision=0.0,
    f1=0.0,
    weighted_precision=0.0,
    weighted_f1=0.0,
    verdict="comment",
    verdict_correct=False,
    clean_control_passed=False,
)


def review_rows() -> list[dict]:
    """Two review tasks and a code-change task, rows in an order unlike the suite's and the report's."""
    return [
        make_review_row("rv-defect", "candidate_review", 0, cost_usd=0.2),
        make_row(
            "rv-defect",
            "candidate_review",
            1,
            resolved=False,
            error_kind="infra-error",
            cost_usd=None,
            **{"class": "review-defect"},
        ),
        make_review_row(
            "rv-defect", "candidate_review", 2, cost_usd=0.4, resolved=False, error_kind="review-edited-code"
        ),
        make_review_row("rv-defect", "review", 0, cost_usd=0.3),
        make_review_row("rv-defect", "review", 1, review=HALF_FOUND, cost_usd=0.5),
        make_review_row("rv-defect", "review", 2, review=make_review(output_error="review-not-json"), cost_usd=0.2),
        make_row("fix", "review", 0),
        make_review_row("rv-clean", "review", 0, case="clean", cost_usd=0.1),
        make_review_row("rv-clean", "review", 1, case="clean", review=NOISY_CLEAN, cost_usd=0.3),
        make_review_row("rv-clean", "review", 2, case="clean", cost_usd=0.2),
    ]


def render(rows: list[dict], **overrides) -> str:
    arguments = {
        "title": "review demo",
        "task_order": ["rv-clean", "fix", "rv-defect"],
        "arm_order": ["review", "candidate_review"],
        "provenance": {},
    }
    arguments.update(overrides)
    return render_report(rows, **arguments)


def review_table(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("| " + " | ".join(REVIEW_COLUMNS) + " |")
    end = lines.index("", start)
    return lines[start + 2 : end]


def test_the_review_table_has_one_line_per_review_task_and_arm_in_suite_and_report_order():
    table = review_table(render(review_rows()))
    assert table == [
        # A clean control: one run called two findings (false positives) and commented; recall is 1.00 (nothing to
        # miss), precision and F1 the mean of 1, 0, 1.
        "| rv-clean | clean | review | 3 | 0 | 0.67 | 1.00 | 0.67 | 0.67 | 1.00 | 2/3 | 2/3 | 2 | 0.2000 |",
        # Full marks, half found with the blocker missed, and a broken review scoring 0 on every ratio.
        "| rv-defect | defect | review | 3 | 1 (review-not-json×1) | 0.50 | 0.50 | 0.50 | 0.42 | 0.33 | 1/3 | — | — "
        "| 0.3000 |",
        # The infra error is excluded (named, left out of every mean); the review that edited code is counted.
        "| rv-defect | defect | candidate_review | 2 (1 excluded) | 1 (review-edited-code×1) | 1.00 | 1.00 | 1.00 "
        "| 1.00 | 1.00 | 2/2 | — | — | 0.3000 |",
    ]


def test_the_section_explains_its_columns_and_sits_between_the_benchmark_table_and_the_provenance():
    text = render(review_rows())
    lines = text.splitlines()
    heading = lines.index("## Review quality")
    assert (
        lines.index(
            "| task | class | arm | resolved | input | cache_create | cache_read | output | cost $ "
            "| $/resolved | wall s | turns | churn | errors |"
        )
        < heading
        < lines.index("## Run provenance")
    )
    how = "\n".join(lines[heading : heading + 14])
    for term in ("**contract broken**", "**weighted F1**", "**blocker recall**", "**clean-control FP**", "**cost $**"):
        assert term in how
    assert "hidden labels" in how
    # The review rows are in the benchmark table too, with the review error kinds that say why they failed.
    benchmark = [line for line in lines if line.startswith("| rv-defect | review-defect | review |")]
    assert benchmark and benchmark[0].endswith("| review-incorrect×1, review-invalid×1 |")


def test_a_report_without_review_tasks_has_no_review_section():
    rows = [make_row("fix", "workflow", 0), make_row("fix", "baseline", 0, resolved=False)]
    text = render(rows, title="demo", task_order=["fix"], arm_order=["workflow", "baseline"])
    assert "Review quality" not in text and "review" not in text.lower()
    assert review_section(rows, ["fix"], ["workflow"]) == []
    # Adding a review task adds its benchmark line and its section, and leaves every other line as it was.
    mixed = render(
        [*rows, make_review_row("rv", "workflow", 0)],
        title="demo",
        task_order=["fix", "rv"],
        arm_order=["workflow", "baseline"],
    ).splitlines()
    added = [line for line in mixed if line not in text.splitlines()]
    assert added[0].startswith("| rv | review-defect | workflow | 1/1 |")
    assert added[1] == "## Review quality"
    assert added[-1] == "- Selected tasks (2): fix, rv"
    remaining = iter(mixed)
    assert all(any(line == later for later in remaining) for line in text.splitlines() if "Selected tasks" not in line)


def test_unlisted_review_tasks_and_arms_follow_in_order_of_appearance():
    rows = [
        make_review_row("late", "extra", 0),
        make_review_row("early", "review", 0),
        make_review_row("late", "review", 0),
    ]
    lines = review_section(rows, ["early"], ["review"])
    assert [line.split(" | ")[0:3] for line in lines if line.startswith(("| early", "| late"))] == [
        ["| early", "defect", "review"],
        ["| late", "defect", "review"],
        ["| late", "defect", "extra"],
    ]


def test_a_review_arm_whose_every_run_was_excluded_shows_no_means_and_an_unmeasured_cost():
    rows = [
        make_row(
            "rv", "review", run, resolved=False, error_kind="session-error", cost_usd=None, **{"class": "review-clean"}
        )
        for run in range(2)
    ]
    assert review_table(render(rows, task_order=["rv"], arm_order=["review"])) == [
        "| rv | clean | review | 0 (2 excluded) | 0 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | 0 | n/a |"
    ]


def test_the_run_page_shows_the_review_table_as_an_html_table():
    page = pages.render_page(render(review_rows()), [])
    assert "<h2>Review quality</h2>" in page
    table = page[page.index("<h2>Review quality</h2>") :]
    table = table[table.index("<table>") : table.index("</table>")]
    assert "<th>weighted F1</th>" in table and "<th>clean-control FP</th>" in table
    assert "<td>1 (review-not-json×1)</td>" in table
    assert table.count("<tr>") == 4  # the header and the three lines


# ─── A review cell's page ───────────────────────────────────────────────────


def cell_page(row: dict, **overrides) -> str:
    values = {
        "label": f"cells/{row['task']}/{row['arm']}/run{row['run']}",
        "row": row,
        "timing": TIMING,
        "transcripts": [],
        "patch": 'diff --git a/review-output.json b/review-output.json\n+{"verdict": "comment"}\n',
        "colour": "#0969da",
    }
    values.update(overrides)
    return cellpage.render_cell_page(**values)


def cells(page: str, label: str) -> str:
    """The cell of the row headed ``label`` in the page's tables."""
    match = re.search(rf"<tr><th>{re.escape(label)}</th><td>(.*?)</td></tr>", page)
    assert match, label
    return match.group(1)


def test_a_review_cells_page_shows_its_score_and_not_verify_or_the_oracle():
    page = cell_page(make_review_row("rv", "review", 1, review=HALF_FOUND))
    assert "<h2>Review against the hidden labels</h2>" in page
    assert "<h2>Verify</h2>" not in page and "<h2>Hidden oracle</h2>" not in page
    assert cells(page, "error kind") == "review-incorrect"
    assert cells(page, "review kept the contract") == '<span class="yes">yes</span>'
    assert cells(page, "verdict (expected)") == "comment (request_changes)"
    assert cells(page, "matched: TP / FP / FN") == "1 / 1 / 1"
    assert cells(page, "precision / recall / F1") == "0.50 / 0.50 / 0.50"
    assert cells(page, "weighted precision / recall / F1") == "0.25 / 0.25 / 0.25"
    assert cells(page, "blocker recall") == "0.00"
    assert cells(page, "clean control passed") == '<span class="note">n/a</span>'
    assert "verify passed" not in page and "hidden oracle passed" not in page
    # The author-only page of a review cell holds nothing more, and does not claim an oracle's output.
    author = cell_page(make_review_row("rv", "review", 1, review=HALF_FOUND), author_only=True)
    assert "author-only page" in author and "hidden oracle" not in author


def test_a_broken_review_names_its_contract_defect_and_its_error_kind():
    page = cell_page(make_review_row("rv", "review", 0, review=make_review(output_error="review-schema")))
    assert cells(page, "error kind") == "review-invalid"
    assert "broken: review-schema" in cells(page, "review-output.json")
    assert cells(page, "review kept the contract") == '<span class="no">no</span>'
    assert cells(page, "verdict (expected)") == "none (request_changes)"
    edited = cell_page(make_review_row("rv", "review", 0, resolved=False, error_kind="review-edited-code"))
    assert "review-edited-code" in cells(edited, "review-output.json")


def test_a_clean_controls_page_says_whether_it_passed():
    page = cell_page(make_review_row("rv", "review", 0, case="clean", review=NOISY_CLEAN))
    assert cells(page, "case") == "clean control"
    assert cells(page, "clean control passed") == '<span class="no">no</span>'
    assert cells(page, "labelled defects (blocking)") == "0 (0)"


def test_a_code_change_cells_page_keeps_verify_and_the_oracle():
    page = cell_page(make_row("fix", "workflow", 0))
    assert "<h2>Verify</h2>" in page and "<h2>Hidden oracle</h2>" in page
    assert "Review against the hidden labels" not in page and "review kept the contract" not in page


# ─── Commands that read rows ────────────────────────────────────────────────


def test_estimates_price_review_cells_and_count_a_broken_review_as_the_agents_outcome():
    earlier = [
        make_review_row("rv", "review", 0, cost_usd=1.0),
        make_review_row("rv", "review", 1, review=make_review(output_error="review-not-json"), cost_usd=3.0),
        make_review_row("rv", "review", 2, resolved=False, error_kind="infra-error", cost_usd=50.0),
    ]
    work = {
        "incumbent_cells": [{"task": "rv", "arm": "review"}],
        "candidate_cells_per_generation": [],
        "generations": 0,
        "proposer_sessions": 0,
    }
    estimate = progress.cost_estimate(work, earlier, proposer_costs=[])
    assert estimate is not None
    assert (estimate["low_usd"], estimate["expected_usd"], estimate["high_usd"], estimate["rows"]) == (1.0, 2.0, 3.0, 2)
    noise = progress.measured_noise(earlier, "cost_usd")
    assert noise is not None and noise["cells"] == 1


def test_status_counts_review_cells_and_their_spend_broken_reviews_included(tmp_path):
    root = tmp_path / "results" / "exp"
    plan = progress.run_plan(
        experiment="exp",
        task_ids=["rv"],
        arms=["review"],
        candidate_arms=[],
        runs=3,
        generations=0,
        session_cap=1,
        started_at="2026-01-01T11:00:00Z",
    )
    progress.write_plan(root, plan)
    for run, (review, cost) in enumerate([(make_review(), 0.25), (make_review(output_error="review-schema"), 0.5)]):
        folder = root / "cells" / "rv" / "review" / f"run{run}"
        folder.mkdir(parents=True)
        record = {
            "schema": "cell-record/v1",
            "row": make_review_row("rv", "review", run, review=review, cost_usd=cost),
            "attempt": 1,
            "timing": {**TIMING, "wall_s": 10.0 * (run + 1)},
        }
        (folder / "record.json").write_text(json.dumps(record))
    state = progress.snapshot(root, now=datetime(2026, 1, 1, 12, 0, tzinfo=UTC), alive=True)
    assert (state["cells_done"], state["cells_planned"], state["spend_usd"]) == (2, 3, 0.75)
    assert progress.format_line(state).startswith("[progress] exp: 2/3 cells, 0 running, $0.75 spent, ETA ")
