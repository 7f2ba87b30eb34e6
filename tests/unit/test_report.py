"""report.md rendering: golden table lines, savings rows, footers, provenance and the gate section."""

from __future__ import annotations

from datetime import UTC, datetime

from rowfactory import make_binding, make_row
from skillbench.base.artifacts import validate
from skillbench.decision.gate import promotion_document, resolve_policy
from skillbench.reporting.report import render_report

HEADER = (
    "| task | class | arm | resolved | input | cache_create | cache_read | output | cost $ | $/resolved | wall s "
    "| turns | churn | errors |"
)
PROVENANCE = {
    "model": "claude-test-model",
    "provider": "scripted",
    "effort": "high",
    "cli_version": "2.0.0",
    "sandbox_backends": ["bwrap"],
    "selected_tasks": ["demo-task"],
    "skipped_tasks": [],
    "runs": 1,
}


def demo_rows() -> list[dict]:
    return [
        make_row(
            "demo-task",
            "baseline",
            0,
            input_tokens=2000,
            cache_creation_input_tokens=400,
            cache_read_input_tokens=10000,
            output_tokens=600,
            cost_usd=0.5,
            duration_s=84.0,
            num_turns=10,
            diff_files=3,
            diff_insertions=40,
            diff_deletions=10,
        ),
        make_row(
            "demo-task",
            "workflow",
            0,
            input_tokens=1000,
            cache_creation_input_tokens=200,
            cache_read_input_tokens=5000,
            output_tokens=300,
            cost_usd=None,
            duration_s=42.4,
            num_turns=7,
            diff_files=2,
            diff_insertions=30,
            diff_deletions=5,
        ),
        make_row(
            "demo-task",
            "baseline",
            1,
            resolved=False,
            error_kind="session-error",
            input_tokens=0,
            cost_usd=None,
            transcript_missing=True,
            skill_invoked=None,
        ),
    ]


def render(rows=None, **overrides) -> str:
    arguments = {
        "title": "skillbench demo",
        "task_order": ["demo-task"],
        "arm_order": ["workflow", "baseline"],
        "provenance": PROVENANCE,
    }
    arguments.update(overrides)
    return render_report(demo_rows() if rows is None else rows, **arguments)


def test_golden_table_lines():
    lines = render().splitlines()
    assert lines[0] == "# skillbench demo"
    table_start = lines.index(HEADER)
    assert lines[table_start + 1] == "| --- " * 14 + "|"
    assert lines[table_start + 2 : table_start + 5] == [
        "| demo-task | demo | workflow | 1/1 | 1000 | 200 | 5000 | 300 | n/a | n/a | 42† | 7 | 2/+30/−5 | — |",
        "| demo-task | demo | baseline | 1/1 (1 excluded) | 2000 | 400 | 10000 | 600 | 0.5000 | 0.5000 | 84 | 10 "
        "| 3/+40/−10 | session-error×1 |",
        "| demo-task | demo | **workflow savings %** | 1/1 vs 1/1 | 50.0 | 50.0 | 50.0 | 50.0 | n/a | n/a | † | — | — "
        "| over resolved runs |",
    ]
    assert lines[table_start + 5] == ""


def test_how_to_read_this_comes_before_the_table():
    lines = render().splitlines()
    start = lines.index("## How to read this")
    assert start < lines.index(HEADER)
    text = "\n".join(lines[start : lines.index(HEADER)])
    for term in ("**resolved**", "**cost $**", "**$/resolved**", "**savings %**", "**wall s**", "**churn**"):
        assert term in text
    assert "files/+insertions/−deletions" in text


def test_footers():
    lines = render().splitlines()
    assert any(line.startswith("1 run(s) hit session/infra/cleanup errors") for line in lines)
    assert any("excluded from medians and resolve denominators" in line for line in lines)
    assert any(line.startswith("1 run(s) had no locatable or readable session transcript") for line in lines)
    assert "Session ids for every run are in results.jsonl" in "\n".join(lines)


def test_runs_that_ran_into_a_limit_of_their_own_are_named_and_counted_not_excluded():
    rows = [
        make_row("demo-task", "workflow", 0, resolved=False, error_kind="memory-limit-exceeded"),
        make_row("demo-task", "workflow", 1, resolved=False, error_kind="output-limit-exceeded"),
        make_row("demo-task", "workflow", 2, resolved=False, error_kind="output-limit-exceeded"),
        make_row("demo-task", "workflow", 3),
    ]
    lines = render(rows).splitlines()
    (note,) = [line for line in lines if "limit their agent ran into" in line]
    assert note.startswith("3 run(s) ended at a limit their agent ran into (memory-limit-exceeded×1, ")
    assert "output-limit-exceeded×2" in note and "never excluded or retried" in note
    assert "| workflow | 1/4 |" in "\n".join(lines)  # every one of them is in the resolve denominator
    assert not any(line.startswith(("3 run(s) hit", "2 run(s) hit", "1 run(s) hit")) for line in lines)


def test_clean_run_has_only_the_session_ids_footer():
    rows = [make_row("demo-task", "workflow", 0)]
    text = render(rows)
    assert "excluded from medians" not in text
    assert "no locatable" not in text
    assert "Session ids for every run are in results.jsonl" in text
    assert not [line for line in text.splitlines() if "savings %**" in line and line.startswith("|")]


def test_provenance_section():
    lines = render().splitlines()
    start = lines.index("## Run provenance")
    assert lines[start + 2 : start + 10] == [
        "- Benchmark model: `claude-test-model`",
        "- Provider: `scripted`",
        "- Reasoning effort: `high`",
        "- Claude Code CLI version: `2.0.0`",
        "- Sandbox backend(s): `bwrap`",
        "- Selected tasks (1): demo-task",
        "- Skipped expensive tasks (0): none",
        "- Runs per (task, arm): 1",
    ]
    assert "Run status" not in "\n".join(lines)


def test_provenance_falls_back_to_rows_and_reports_an_aborted_run():
    text = render(provenance={"skipped_tasks": ["huge-task"], "run_status": "aborted"})
    assert "- Benchmark model: `claude-test-model`" in text
    assert "- Sandbox backend(s): `bwrap`" in text
    assert "- Selected tasks (1): demo-task" in text
    assert "- Skipped expensive tasks (1): huge-task" in text
    assert "- Runs per (task, arm): 2" in text
    assert "- Run status: `aborted` — partial evidence; promotion is disabled" in text


def test_task_and_arm_order_with_unlisted_entries_appended():
    rows = [
        make_row("b-task", "baseline", 0),
        make_row("a-task", "workflow", 0),
        make_row("a-task", "extra", 0),
        make_row("a-task", "baseline", 0),
    ]
    lines = render(rows, task_order=["a-task", "b-task"], arm_order=["baseline", "workflow"]).splitlines()
    table = [line for line in lines if line.startswith(("| a-task", "| b-task"))]
    assert [line.split(" | ")[:3] for line in table] == [
        ["| a-task", "demo", "baseline"],
        ["| a-task", "demo", "workflow"],
        ["| a-task", "demo", "extra"],
        ["| a-task", "demo", "**workflow savings %**"],
        ["| a-task", "demo", "**extra savings %**"],
        ["| b-task", "demo", "baseline"],
    ]


def test_errors_are_sorted_by_kind():
    rows = [
        make_row("demo-task", "workflow", 0, resolved=False, error_kind="verify-failed"),
        make_row("demo-task", "workflow", 1, resolved=False, error_kind="oracle-failed"),
        make_row("demo-task", "workflow", 2, resolved=False, error_kind="verify-failed"),
    ]
    row_line = next(line for line in render(rows).splitlines() if line.startswith("| demo-task | demo | workflow"))
    assert row_line.endswith(
        "| 0/3 | 1000 | 0 | 0 | 100 | 1.0000 | n/a | 10† | 5 | 1/+10/−2 | oracle-failed×1, verify-failed×2 |"
    )


def test_report_is_deterministic():
    assert render() == render()


def _promotion_rows() -> list[dict]:
    rows = []
    for task, candidate_cost in (("alpha", 0.9), ("beta", 0.88)):
        for run in range(3):
            rows.append(make_row(task, "workflow", run, cost_usd=1.0))
            rows.append(make_row(task, "candidate_workflow", run, cost_usd=candidate_cost))
    return rows


def _promotion(rows: list[dict], run_status: str = "complete", rule: str = "upstream") -> dict:
    doc = promotion_document(
        rows,
        pairs=[("workflow", "candidate_workflow")],
        policy=resolve_policy({"rule": rule}),
        binding=make_binding(selected_tasks=[{"id": "alpha"}, {"id": "beta"}]),
        run_status=run_status,
        generated_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return validate(doc, "promotion")


def test_candidate_vs_incumbent_section():
    rows = _promotion_rows()
    text = render(
        rows, task_order=["alpha", "beta"], arm_order=["workflow", "candidate_workflow"], promotion=_promotion(rows)
    )
    lines = text.splitlines()
    start = lines.index("## Candidate vs incumbent")
    assert lines.index("## Run provenance") < start
    assert lines[start + 2] == "### candidate_workflow vs workflow: promote"
    assert lines[start + 4] == (
        "| task | class | incumbent resolved | candidate resolved | incumbent cost_usd | candidate cost_usd "
        "| improvement % | gated | paired runs (candidate W/L/T) |"
    )
    assert lines[start + 6 : start + 8] == [
        "| alpha | demo | 3/3 | 3/3 | 1.0000 | 0.9000 | 10.0 | yes | 3 runs: 3W/0L/0T |",
        "| beta | demo | 3/3 | 3/3 | 1.0000 | 0.8800 | 12.0 | yes | 3 runs: 3W/0L/0T |",
    ]
    assert (
        "Decision: **promote** on `cost_usd`; median improvement over gated tasks 11.0%; resolution margin 0 run(s)."
        in lines
    )
    assert "- median cost_usd improvement is 11.0% (required 5.0%)" in lines
    assert "Sign test over gated tasks: 2 win(s), 0 loss(es), 0 tie(s); two-sided p = 0.5000." in lines
    assert (
        "Bootstrap 95% CI of the median improvement (10000 task resamples, seed 20261129): "
        "[10.0%, 12.0%] (excludes zero)." in lines
    )
    # The candidate against the anchor that ran beside it, and what the anchor cost.
    assert "Compared: the candidate was compared with the incumbent's cells that ran beside it (batch gen0)" in text
    anchor = lines.index("## The anchor")
    assert anchor > start and lines[anchor + 4] == (
        "- candidate_workflow ran beside its anchor, fresh cells of workflow (batch gen0): anchor 6 cells, "
        "6 sessions, $6.00; candidate 6 cells, 6 sessions, $5.34."
    )


def _noisy_rows(candidate_costs: dict[str, list[float]], runs: int = 3) -> list[dict]:
    rows = []
    for task, costs in candidate_costs.items():
        for run in range(runs):
            rows.append(make_row(task, "workflow", run, cost_usd=[1.0, 1.1, 0.9, 1.05, 0.95][run]))
            rows.append(make_row(task, "candidate_workflow", run, cost_usd=costs[run]))
    return rows


def _suite_costs(savings: list[float]) -> dict[str, list[float]]:
    """One task per saving, named t00, t01, …: the candidate's three runs at that saving, with a little noise."""
    return {
        f"t{index:02d}": [round((1 - saving) * factor, 4) for factor in (0.97, 1.04, 1.0)]
        for index, saving in enumerate(savings)
    }


def test_noise_aware_section_shows_the_tests_and_every_run():
    costs = _suite_costs([0.15, 0.2, 0.18, 0.16, 0.2, 0.17, 0.19, 0.15, 0.18, 0.2, 0.16, 0.17])
    costs["t00"] = [0.8, 0.9, 0.85]
    rows = _noisy_rows(costs)
    text = render(
        rows,
        task_order=list(costs),
        arm_order=["workflow", "candidate_workflow"],
        promotion=_promotion(rows, rule="noise_aware"),
    )
    lines = text.splitlines()
    assert "### candidate_workflow vs workflow: promote" in lines
    assert "Tests (decided on these tests): design 12 tasks × 3 runs per arm." in lines
    cost_line = next(line for line in lines if line.startswith("| cost_usd saving"))
    cells = [cell.strip() for cell in cost_line.strip("|").split("|")]
    assert cells[0] == "cost_usd saving in total spend (alpha 0.0225, floor 5.0%, 12 tasks)"
    assert cells[-1] == "cheaper"
    quality_line = next(line for line in lines if line.startswith("| resolution, candidate"))
    assert "36/36 vs 36/36, +0.0 points" in quality_line and quality_line.endswith("| not worse |")
    assert "| t00 | workflow | 1.0000 | 1.1000 | 0.9000 |" in lines
    assert "| t00 | candidate_workflow | 0.8000 | 0.9000 | 0.8500 |" in lines


def test_noise_aware_section_says_when_there_are_not_enough_runs():
    rows = _noisy_rows(_suite_costs([0.2, -0.1, 0.15, 0.0, 0.1, -0.05, 0.25, -0.1, 0.05, 0.1, -0.05, 0.15]))
    promotion = _promotion(rows, rule="noise_aware")
    decision = promotion["decisions"][0]
    assert decision["decision"] == "keep_incumbent"
    assert decision["tests"]["cost"]["conclusion"] == "inconclusive"
    text = render(rows, task_order=sorted({row["task"] for row in rows}), promotion=promotion)
    assert "Not enough tasks or runs to tell: this design detects a " in text
    assert decision["reasons"][0].startswith("not enough tasks or runs to tell: cost_usd saving in total spend ")


def test_candidate_section_for_an_aborted_run():
    rows = _promotion_rows()
    text = render(rows, task_order=["alpha", "beta"], promotion=_promotion(rows, "aborted"))
    assert "Run status `aborted`: every decision is forced to insufficient_evidence." in text
    assert "### candidate_workflow vs workflow: insufficient_evidence" in text
    assert "- run aborted; partial evidence cannot promote" in text


def test_pipes_in_cells_are_escaped():
    rows = [make_row("demo-task", "workflow", 0, **{"class": "a|b"})]
    assert "| demo-task | a\\|b | workflow | 1/1 |" in render(rows)


def _table_line_of(text: str, arm_cell: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| demo-task | demo | {arm_cell} |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_subagent_warning_only_where_subagents_were_possible():
    no_subagents = {**PROVENANCE, "tools": ["Read", "Edit", "Bash", "Skill"]}
    assert "WARNING" not in render(provenance=no_subagents)
    assert "**WARNING:** subagents were possible" in render(provenance={**PROVENANCE, "tools": ["Read", "Task"]})
    used = [make_row("demo-task", "workflow", 0, tool_use_counts={"Agent": 1}), make_row("demo-task", "baseline", 0)]
    assert "**WARNING:** subagents were possible" in render(used, provenance=no_subagents)


def test_savings_against_a_baseline_that_resolved_nothing_are_not_shown():
    rows = [make_row("demo-task", "baseline", run, resolved=False, cost_usd=1.0) for run in range(2)]
    rows += [make_row("demo-task", "workflow", run, cost_usd=1.68) for run in range(2)]
    cells = _table_line_of(render(rows), "**workflow savings %**")
    assert cells[3] == "2/2 vs 0/2"
    assert cells[4:10] == ["n/a"] * 6  # no −68 % saving over runs that did not do the task
    assert cells[-1] == "n/a: an arm resolved nothing"
    assert _table_line_of(render(rows), "workflow")[9] == "1.6800"  # cost per resolved run
    assert _table_line_of(render(rows), "baseline")[9] == "n/a"


def test_savings_compare_resolved_runs_and_cost_per_resolved_run_pays_for_failures():
    rows = [make_row("demo-task", "baseline", run, cost_usd=1.0, duration_s=300.0) for run in range(2)]
    rows += [
        make_row("demo-task", "workflow", 0, cost_usd=1.0, duration_s=240.0),
        make_row("demo-task", "workflow", 1, resolved=False, cost_usd=0.1, duration_s=30.0),
    ]
    text = render(rows)
    assert _table_line_of(text, "workflow")[8:11] == ["0.5500", "1.1000", "135"]
    cells = _table_line_of(text, "**workflow savings %**")
    assert cells[3] == "1/2 vs 2/2"
    # Over resolved runs the cost is the same; a resolved run of workflow costs 10 % more once its failure is paid.
    assert cells[8:11] == ["0.0", "-10.0", "20.0"]
    assert cells[-1] == "over resolved runs"


def test_wall_time_of_short_cells_is_marked_noisy_and_has_no_saving():
    rows = [make_row("demo-task", "baseline", 0, duration_s=12.0), make_row("demo-task", "workflow", 0, duration_s=4.0)]
    text = render(rows)
    assert _table_line_of(text, "baseline")[10] == "12†"
    assert _table_line_of(text, "**workflow savings %**")[10] == "†"
    long_rows = [
        make_row("demo-task", "baseline", 0, duration_s=600.0),
        make_row("demo-task", "workflow", 0, duration_s=450.0),
    ]
    long_text = render(long_rows)
    assert _table_line_of(long_text, "baseline")[10] == "600"
    assert _table_line_of(long_text, "**workflow savings %**")[10] == "25.0"


def test_savings_rows_compare_with_the_configured_baseline_arm():
    rows = [{**row, "arm": "plain" if row["arm"] == "baseline" else row["arm"]} for row in demo_rows()]
    text = render(rows, arm_order=["workflow", "plain"], baseline_arm="plain")
    assert "| demo-task | demo | **workflow savings %** | 1/1 vs 1/1 | 50.0 |" in text
    # With the default baseline name the same rows have nothing to compare against.
    assert "savings %**" not in "\n".join(line for line in render(rows).splitlines() if line.startswith("|"))


def test_canonical_order_is_task_then_run_then_arm():
    from skillbench.reporting.report import canonical_order

    rows = [{"task": t, "arm": a, "run": r} for t, a, r in [("b", "y", 0), ("a", "y", 1), ("a", "x", 1), ("a", "y", 0)]]
    ordered = canonical_order(rows, ["a", "b"], ["x", "y"])
    assert [(r["task"], r["run"], r["arm"]) for r in ordered] == [
        ("a", 0, "y"),
        ("a", 1, "x"),
        ("a", 1, "y"),
        ("b", 0, "y"),
    ]


def test_the_summary_advice_after_no_promotion_is_the_one_that_matches():
    from skillbench.reporting.report import render_summary

    summary = {
        "experiment": "x",
        "outcome": "not_promoted",
        "generations_requested": 2,
        "generations": [],
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 0,
        "next_step": "With runs: 2 no candidate can be promoted.",
    }
    text = render_summary(summary)
    assert "With runs: 2 no candidate can be promoted." in text
    assert "Raise `evolution.generations`" not in text


def test_a_promoted_run_says_how_to_apply_it():
    from skillbench.reporting.report import render_summary

    generation = {
        "generation": 1,
        "candidate_origin": "model-proposer",
        "candidate_overlay_digest": "a" * 64,
        "required_candidate_arms": ["candidate_workflow"],
        "decisions": [{"candidate_arm": "candidate_workflow", "decision": "promote", "reasons": []}],
        "gate_summary": ["candidate_workflow: promote"],
    }
    summary = {
        "experiment": "x",
        "outcome": "promoted",
        "promoted_generation": 1,
        "generations_requested": 2,
        "generations": [generation],
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 0,
    }
    text = render_summary(summary)
    assert "| 1 | model-proposer | `aaaaaaaaaaaaaaaa` | candidate_workflow | candidate_workflow: promote |" in text
    assert "Apply it with `skillbench apply results/x`." in text


def test_a_run_the_budget_cut_short_says_so_and_how_many_cells():
    from skillbench.reporting.report import render_summary

    summary = {
        "experiment": "x",
        "outcome": "sweep",
        "generations_requested": 0,
        "generations": [],
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 3,
        "next_step": None,
    }
    text = render_summary(summary)
    assert "**Budget reached:** the model gateway refused every request past `budget.max_usd`" in text
    assert "3 cell(s) were cut short (rows `budget-exhausted`, excluded)" in text
    summary["budget_exhausted_cells"] = 0
    assert "Budget reached" not in render_summary(summary)


def test_the_summary_states_the_experiments_error_rate():
    from skillbench.decision.gate import error_control
    from skillbench.reporting.report import render_summary

    policy = resolve_policy(None)
    generations = [
        {
            "generation": gen,
            "candidate_origin": "model-proposer",
            "candidate_overlay_digest": "a" * 64,
            "required_candidate_arms": ["candidate_workflow"],
            "decisions": [{"candidate_arm": "candidate_workflow", "decision": "keep_incumbent", "reasons": []}],
            "gate_summary": ["candidate_workflow: keep_incumbent"],
            "error_control": error_control(policy, gen),
        }
        for gen in (0, 1)
    ]
    summary = {
        "experiment": "x",
        "outcome": "not_promoted",
        "promoted_generation": None,
        "generations_requested": 2,
        "generations": generations,
        "broken_incumbent_arms": [],
        "budget_exhausted_cells": 0,
    }
    text = render_summary(summary)
    assert (
        "**Error control:** generation 0 at 0.025, generation 1 at 0.0125 (together 0.0375); generation 1 is tested "
        "at alpha 0.0125 (alpha 0.05 halved once per generation): over all its generations and looks, an experiment "
        "whose candidates are no better promotes one of them with probability at most 0.05." in text
    )


def test_arms_of_several_agents_are_compared_with_their_own_agents_baseline_and_shown_side_by_side():
    rows = [
        make_row("t", arm, run, agent=agent, cli_version=version, cost_usd=cost, resolved=resolved, **extra)
        for arm, agent, version, cost, resolved, extra in (
            ("workflow", "claude-code", "2.1.197", 1.0, True, {"skill_invoked": True}),
            ("baseline", "claude-code", "2.1.197", 2.0, True, {"skill_invoked": None}),
            ("workflow_opencode", "opencode", "1.18.33", 0.5, True, {"offered_skills": ["change-work", "x"]}),
            ("baseline_opencode", "opencode", "1.18.33", 0.8, False, {"skill_invoked": None}),
            ("workflow_copilot", "copilot", "1.0.102", 0.7, True, {"skill_invoked": False}),
        )
        for run in (0, 1)
    ]
    arms = ["workflow", "baseline", "workflow_opencode", "baseline_opencode", "workflow_copilot"]
    text = render(rows, task_order=["t"], arm_order=arms, baseline_arms={"opencode": "baseline_opencode"})
    savings = [line for line in text.splitlines() if line.startswith("| t |") and "savings %" in line]
    # workflow against baseline, workflow_opencode against baseline_opencode; copilot has no baseline of its own.
    assert [line.split(" | ")[2] for line in savings] == [
        "**workflow savings %**",
        "**workflow_opencode savings %**",
    ]
    assert "| 2/2 vs 0/2 |" in savings[1]
    table = text[text.index("## Agents side by side") :].splitlines()
    assert table[4:9] == [
        "| claude-code | `2.1.197` | workflow | 2/2 | 2/2 | 1.0000 | 1.0000 | — |",
        "| claude-code | `2.1.197` | baseline | 2/2 | — | 2.0000 | 2.0000 | — |",
        "| copilot | `1.0.102` | workflow_copilot | 2/2 | 0/2 | 0.7000 | 0.7000 | — |",
        "| opencode | `1.18.33` | workflow_opencode | 2/2 | 2/2 | 0.5000 | 0.5000 | change-work, x |",
        "| opencode | `1.18.33` | baseline_opencode | 0/2 | — | 0.8000 | n/a | — |",
    ]


def test_provenance_gives_each_agents_cli_version_when_other_agents_ran():
    rows = [
        make_row("demo-task", "workflow", 0, cli_version="2.1.197"),
        make_row("demo-task", "cx_direct", 0, agent="codex", cli_version="0.171.0"),
    ]
    text = render(rows, arm_order=["workflow", "cx_direct"], provenance={})
    assert "- Agent CLI versions: claude-code `2.1.197`; codex `0.171.0`" in text
    assert "Claude Code CLI version" not in text
