"""Trigger tasks in the report and the cell pages: each arm's triggering per skill (recall, precision, false
triggers on near misses, cost per prompt), the "Skill triggering" section, and a trigger cell's page."""

from __future__ import annotations

import pytest
from rowfactory import make_review_row, make_row, make_trigger_row
from skillbench.decision.aggregate import TriggerScore, trigger_scores
from skillbench.decision.triggers import trigger_tests
from skillbench.reporting import pages
from skillbench.reporting.report import TRIGGER_COLUMNS, trigger_section
from test_report_review import cell_page, cells
from test_report_review import render as review_render

PLAN, WORK = "change-plan", "change-work"


def trigger_rows() -> list[dict]:
    """Two arms over four labelled prompts, two runs each, plus a code-change row and an excluded trigger run.

    incumbent `trigger`: plans triggered 1/2 runs of plan-a, 2/2 of plan-b; work-a 2/2; the near miss drew
    change-plan once; the plain question drew change-work once.
    candidate: every labelled run triggers as labelled, no false trigger; one run's cost unmeasured."""
    rows = [
        make_trigger_row("plan-a", "trigger", 0, expect=PLAN, invoked=(PLAN,), cost_usd=0.01),
        make_trigger_row("plan-a", "trigger", 1, expect=PLAN, cost_usd=0.03),
        make_trigger_row("plan-b", "trigger", 0, expect=PLAN, invoked=(PLAN,), cost_usd=0.02),
        make_trigger_row("plan-b", "trigger", 1, expect=PLAN, invoked=(PLAN,), cost_usd=0.02),
        make_trigger_row("work-a", "trigger", 0, expect=WORK, invoked=(WORK,), cost_usd=0.04),
        make_trigger_row("work-a", "trigger", 1, expect=WORK, invoked=(WORK,), cost_usd=0.04),
        make_trigger_row("near-a", "trigger", 0, near_miss=True, invoked=(PLAN,), cost_usd=0.02),
        make_trigger_row("near-a", "trigger", 1, near_miss=True, cost_usd=0.01),
        make_trigger_row("ask-a", "trigger", 0, invoked=(WORK,), cost_usd=0.01),
        make_trigger_row("ask-a", "trigger", 1, cost_usd=0.01),
        make_row(
            "ask-a", "trigger", 2, resolved=False, error_kind="infra-error", cost_usd=None, **{"class": "trigger"}
        ),
        make_row("fix", "trigger", 0),
    ]
    for prompt, expect, near in (("plan-a", PLAN, False), ("plan-b", PLAN, False), ("work-a", WORK, False)):
        rows += [
            make_trigger_row(prompt, "candidate_trigger", run, expect=expect, near_miss=near, invoked=(expect,))
            for run in range(2)
        ]
    rows += [make_trigger_row("near-a", "candidate_trigger", run, near_miss=True) for run in range(2)]
    rows += [make_trigger_row("ask-a", "candidate_trigger", 0), make_trigger_row("ask-a", "candidate_trigger", 1)]
    rows[-1]["cost_usd"] = None
    return rows


def by_arm_and_skill(scores: list[TriggerScore]) -> dict[tuple[str, str], TriggerScore]:
    return {(score.arm, score.skill): score for score in scores}


def test_recall_precision_and_false_triggers_are_counted_per_arm_and_skill_over_valid_runs():
    scores = by_arm_and_skill(trigger_scores(trigger_rows()))
    assert list(scores) == [
        ("trigger", PLAN),
        ("trigger", WORK),
        ("candidate_trigger", PLAN),
        ("candidate_trigger", WORK),
    ]
    plan = scores[("trigger", PLAN)]
    # Two prompts labelled for it, 3 of their 4 runs invoked it; one near-miss run (of the 6 others) did too.
    assert (plan.prompts, plan.runs, plan.invoked, plan.recall) == (2, 4, 3, 0.75)
    assert (plan.other_runs, plan.false_triggers, plan.precision) == (6, 1, 0.75)
    assert (plan.near_miss_runs, plan.near_miss_false_triggers, plan.near_miss_restraint) == (2, 1, 0.5)
    work = scores[("trigger", WORK)]
    # The plain question's false trigger is a false trigger, but not on a near miss.
    assert (work.prompts, work.invoked, work.recall, work.false_triggers, work.precision) == (1, 2, 1.0, 1, 2 / 3)
    assert (work.near_miss_false_triggers, work.near_miss_restraint) == (0, 1.0)
    # The excluded run and the code-change row count nowhere; the cost is the median of the ten valid runs.
    assert plan.arm_runs == 10 and plan.cost_per_prompt_usd == pytest.approx(0.02)
    candidate = scores[("candidate_trigger", PLAN)]
    assert (candidate.recall, candidate.precision, candidate.false_triggers) == (1.0, 1.0, 0)
    assert candidate.cost_per_prompt_usd is None  # one run's cost went unmeasured


def test_a_skill_no_run_invoked_has_no_precision_and_a_skill_no_prompt_asks_for_has_no_recall():
    rows = [
        make_trigger_row("plan-a", "trigger", 0, expect=PLAN),
        make_trigger_row("ask-a", "trigger", 0, invoked=(WORK,)),
    ]
    scores = by_arm_and_skill(trigger_scores(rows))
    assert (scores[("trigger", PLAN)].recall, scores[("trigger", PLAN)].precision) == (0.0, None)
    assert (scores[("trigger", WORK)].prompts, scores[("trigger", WORK)].recall) == (0, None)
    assert scores[("trigger", WORK)].precision == 0.0
    assert trigger_scores([make_row("fix", "workflow", 0), make_review_row("rv", "review", 0)]) == []


def test_the_scores_count_the_same_runs_the_gates_trigger_tests_compare():
    rows = trigger_rows()
    tests = trigger_tests(rows, arms=("trigger", "candidate_trigger"), alpha=0.05, margin_pct=20.0)
    scores = by_arm_and_skill(trigger_scores(rows))
    for skill, test in tests.items():
        incumbent, candidate = scores[("trigger", skill)], scores[("candidate_trigger", skill)]
        assert test["prompts"] == incumbent.prompts
        assert (test["recall"]["incumbent_resolved"], test["recall"]["incumbent_runs"]) == (
            incumbent.invoked,
            incumbent.runs,
        )
        assert (test["recall"]["candidate_resolved"], test["recall"]["candidate_runs"]) == (
            candidate.invoked,
            candidate.runs,
        )
        restrained = incumbent.other_runs - incumbent.false_triggers
        assert (test["restraint"]["incumbent_resolved"], test["restraint"]["incumbent_runs"]) == (
            restrained,
            incumbent.other_runs,
        )


def render(rows: list[dict], **overrides) -> str:
    """The report of ``rows`` over the prompts' suite order, the candidate's arm first."""
    order = {"task_order": ["plan-a", "plan-b", "work-a", "near-a", "ask-a", "fix"]}
    return review_render(rows, **{**order, "arm_order": ["candidate_trigger", "trigger"], **overrides})


def trigger_table(text: str) -> list[str]:
    """The lines of the trigger table, header and rule left out."""
    lines = text.splitlines()
    start = lines.index(_header(TRIGGER_COLUMNS))
    return lines[start + 2 : lines.index("", start)]


def _header(columns: tuple[str, ...]) -> str:
    return "| " + " | ".join(columns) + " |"


def test_the_section_has_one_line_per_arm_in_report_order_and_skill():
    table = trigger_table(render(trigger_rows()))
    assert [line.split(" | ")[:2] for line in table] == [
        ["| candidate_trigger", PLAN],
        ["| candidate_trigger", WORK],
        ["| trigger", PLAN],
        ["| trigger", WORK],
    ]
    assert table[2] == f"| trigger | {PLAN} | 2 | 0.75 (3/4) | 0.75 (3/4) | 1/6 | 1/2 | 10 | 0.0200 |"
    assert table[3] == f"| trigger | {WORK} | 1 | 1.00 (2/2) | 0.67 (2/3) | 1/8 | 0/2 | 10 | 0.0200 |"
    assert table[0].endswith("| 0/6 | 0/2 | 10 | n/a |")


def test_the_section_explains_itself_and_sits_before_the_provenance():
    text = render(trigger_rows())
    assert "## Skill triggering" in text
    section = text[text.index("## Skill triggering") : text.index("## Run provenance")]
    assert "**recall**" in section and "**near-miss false triggers**" in section and "no session\nsees" in section
    # The benchmark table above still lists the trigger rows, with their error kinds.
    assert "trigger-missed×1" in text


def test_a_report_without_trigger_rows_has_no_trigger_section():
    rows = [make_row("fix", "workflow", 0), make_review_row("rv", "review", 0)]
    assert trigger_section(rows, ["workflow", "review"]) == []
    assert "Skill triggering" not in render(rows, task_order=["fix", "rv"], arm_order=["workflow", "review"])


def test_the_run_page_shows_the_trigger_table_as_an_html_table():
    page = pages.render_page(render(trigger_rows()), [])
    table = page[page.index("<h2>Skill triggering</h2>") :]
    table = table[table.index("<table>") : table.index("</table>")]
    assert "<th>near-miss false triggers</th>" in table and table.count("<tr>") == 5


# ─── A trigger cell's page ──────────────────────────────────────────────────


def test_a_trigger_cells_page_shows_the_expected_skill_beside_the_invoked_ones_and_no_verify_or_oracle():
    page = cell_page(make_trigger_row("near-a", "trigger", 0, near_miss=True, invoked=(PLAN,)), patch="")
    assert "<h2>Triggering against the hidden label</h2>" in page
    assert "<h2>Verify</h2>" not in page and "<h2>Hidden oracle</h2>" not in page
    assert cells(page, "error kind") == "trigger-false"
    assert cells(page, "skill expected") == '<span class="note">none</span>'
    assert cells(page, "near miss") == '<span class="yes">yes</span>'
    assert cells(page, "skills invoked") == PLAN and cells(page, "false triggers") == PLAN
    assert cells(page, "triggered as labelled") == '<span class="no">no</span>'
    missed = cell_page(make_trigger_row("plan-a", "trigger", 0, expect=PLAN))
    assert (
        cells(missed, "skill expected") == PLAN and cells(missed, "skills invoked") == '<span class="note">none</span>'
    )
    author = cell_page(make_trigger_row("plan-a", "trigger", 0, expect=PLAN), author_only=True)
    assert "author-only page" in author and "hidden oracle" not in author


def test_a_code_change_cells_page_has_no_trigger_part():
    page = cell_page(make_row("fix", "workflow", 0))
    assert "Triggering against the hidden label" not in page and "skill expected" not in page
