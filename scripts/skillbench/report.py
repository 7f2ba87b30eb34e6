"""``report.md`` rendering: the per (task, arm) median table, savings, provenance and the gate's verdict.

Owns the Markdown layout and number formatting of the benchmark report. Plain rows (and an
optional promotion document) in, one deterministic string out: no timestamps, no I/O.
"""

from __future__ import annotations

from typing import Any

from .aggregate import USAGE_FIELDS, aggregate_by_task, savings

BASELINE_ARM = "baseline"
DASH = "—"
MINUS = "−"

INTRO = (
    "Medians across runs; savings rows = (baseline − arm) / baseline per arm.\n"
    "A negative saving means that arm spent more than baseline. churn =\n"
    "files/+insertions/−deletions vs the clone's starting commit (plans and skills excluded)."
)
TOKEN_WARNING = (
    "**WARNING:** token columns count only each arm's main-loop session — tokens spent by subagents\n"
    "are not in them, so they favour arms that delegate. cost $ is the only column that includes\n"
    "subagent spend; to compare tokens fairly, recount usage from the captured transcripts, counting\n"
    "each message.id once."
)
COLUMNS = (
    "task",
    "class",
    "arm",
    "resolved",
    "input",
    "cache_create",
    "cache_read",
    "output",
    "cost $",
    "wall s",
    "turns",
    "churn",
    "errors",
)
SESSION_IDS_NOTE = (
    "Session ids for every run are in results.jsonl — open the matching transcript to see where each arm "
    "spent its tokens."
)


def _table_line(cells: list[str] | tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _whole(value: float | int) -> str:
    return f"{value:.0f}"


def _cost(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _ordered(preferred: list[str], present: list[str]) -> list[str]:
    """``preferred`` entries that are present, then anything present but not named, in appearance order."""
    named = [item for item in dict.fromkeys(preferred) if item in present]
    return named + [item for item in present if item not in named]


def _resolved_cell(summary: dict[str, Any]) -> str:
    cell = f"{summary['resolved']}/{summary['valid_runs']}"
    if summary["excluded_runs"]:
        cell += f" ({summary['excluded_runs']} excluded)"
    return cell


def _errors_cell(error_kinds: dict[str, int]) -> str:
    if not error_kinds:
        return DASH
    return ", ".join(f"{kind}×{count}" for kind, count in sorted(error_kinds.items()))


def _arm_line(task: str, arm: str, summary: dict[str, Any]) -> str:
    files, insertions, deletions = (
        _whole(summary[field]) for field in ("diff_files", "diff_insertions", "diff_deletions")
    )
    churn = f"{files}/+{insertions}/{MINUS}{deletions}"
    return _table_line(
        [
            task,
            summary["class"],
            arm,
            _resolved_cell(summary),
            *(_whole(summary[field]) for field in USAGE_FIELDS),
            _cost(summary["cost_usd"]),
            _whole(summary["duration_s"]),
            _whole(summary["num_turns"]),
            churn,
            _errors_cell(summary["error_kinds"]),
        ]
    )


def _savings_line(task: str, task_class: str, arm: str, saved: dict[str, float | None]) -> str:
    return _table_line(
        [
            task,
            task_class,
            f"**{arm} savings %**",
            DASH,
            *(_pct(saved[field]) for field in USAGE_FIELDS),
            _pct(saved["cost_usd"]),
            _pct(saved["duration_s"]),
            DASH,
            DASH,
            DASH,
        ]
    )


def _distinct(rows: list[dict[str, Any]], field: str) -> list[Any]:
    return list(dict.fromkeys(row.get(field) for row in rows))


def _code_list(values: list[Any]) -> str:
    known = [f"`{value}`" for value in values if value is not None]
    return ", ".join(known) if known else "unknown"


def _provenance_lines(rows: list[dict[str, Any]], provenance: dict[str, Any], task_order: list[str]) -> list[str]:
    def pick(key: str, row_field: str) -> list[Any]:
        if key in provenance:
            value = provenance[key]
            return list(value) if isinstance(value, list | tuple) else [value]
        return _distinct(rows, row_field)

    selected = list(provenance.get("selected_tasks", task_order))
    skipped = list(provenance.get("skipped_tasks", []))
    runs = provenance.get("runs", max((row["run"] for row in rows), default=-1) + 1)
    lines = [
        "## Run provenance",
        "",
        f"- Benchmark model: {_code_list(pick('model', 'model'))}",
    ]
    if "proposer_model" in provenance:
        lines.append(f"- Proposer model: `{provenance['proposer_model']}`")
    lines += [
        f"- Provider: {_code_list(pick('provider', 'provider'))}",
        f"- Reasoning effort: {_code_list(pick('effort', 'effort'))}",
        f"- Claude Code CLI version: {_code_list(pick('cli_version', 'cli_version'))}",
        f"- Sandbox backend(s): {_code_list(pick('sandbox_backends', 'sandbox_backend'))}",
        f"- Selected tasks ({len(selected)}): {', '.join(selected) if selected else 'none'}",
        f"- Skipped expensive tasks ({len(skipped)}): {', '.join(skipped) if skipped else 'none'}",
        f"- Runs per (task, arm): {runs}",
    ]
    run_status = provenance.get("run_status", "complete")
    if run_status != "complete":
        lines.append(f"- Run status: `{run_status}` — partial evidence; promotion is disabled")
    return lines


def _metric_value(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric == "cost_usd":
        return f"{value:.4f}"
    if metric == "duration_s":
        return f"{value:.1f}"
    return f"{value:.1f}" if value != int(value) else f"{value:.0f}"


def _paired_cell(paired: dict[str, Any] | None) -> str:
    if paired is None:
        return "n/a"
    return f"{paired['runs']} runs: {paired['wins']}W/{paired['losses']}L/{paired['ties']}T"


def _p_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "< 0.0001" if value < 0.0001 else f"{value:.4f}"


def _signed(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:+.1f}{unit}"


def _runs_lines(decision: dict[str, Any]) -> list[str]:
    """Every paired run's metric value, so the spread behind each median is visible."""
    tasks = [row for row in decision["tasks"] if row.get("paired")]
    if not tasks:
        return []
    width = max(len(row["paired"]["run_indices"]) for row in tasks)
    metric = decision["metric"]
    lines = [
        "",
        f"Per-run {metric} (paired runs):",
        "",
        _table_line(["task", "arm", *(f"run {index + 1}" for index in range(width))]),
        _table_line(["---"] * (2 + width)),
    ]
    for row in tasks:
        paired = row["paired"]
        for arm, values in (
            (decision["incumbent_arm"], paired["incumbent_values"]),
            (decision["candidate_arm"], paired["candidate_values"]),
        ):
            cells = [_metric_value(metric, value) for value in values]
            lines.append(_table_line([row["task"], arm, *cells, *([DASH] * (width - len(cells)))]))
    return lines


def _tests_lines(decision: dict[str, Any]) -> list[str]:
    """What the gate tested: the design, the cost and quality tests, and what the runs could have detected."""
    tests = decision.get("tests")
    if not tests:
        return []
    cost, quality = tests["cost"], tests["quality"]
    deciding = "decided on these tests" if decision.get("rule") == "noise_aware" else "reported only; rule upstream"
    lines = [
        "",
        f"Tests ({deciding}): design {tests['design']['text']}.",
        "",
        _table_line(["test", "estimate", "interval", "p-value", "detectable at 80% power", "conclusion"]),
        _table_line(["---"] * 6),
        _table_line(
            [
                f"{decision['metric']} saving (alpha {cost['alpha']:g}, floor {cost['floor_pct']:.1f}%)",
                _pct(cost["estimate_pct"]) + ("%" if cost["estimate_pct"] is not None else ""),
                "n/a"
                if cost["ci_low_pct"] is None
                else f"{cost['ci_low_pct']:.1f}% to {cost['ci_high_pct']:.1f}% ({cost['confidence']:.0%})",
                _p_value(cost["p_value"]),
                "n/a" if cost["mde_pct"] is None else f"{cost['mde_pct']:.1f}% saving",
                cost["conclusion"].replace("_", " "),
            ]
        ),
        _table_line(
            [
                f"resolution, candidate − incumbent (margin {quality['margin_pct']:g} points)",
                f"{quality['candidate_resolved']}/{quality['candidate_runs']} vs "
                f"{quality['incumbent_resolved']}/{quality['incumbent_runs']}, "
                f"{_signed(quality['difference_pct'], ' points')}",
                "n/a"
                if quality["ci_low_pct"] is None
                else f"{quality['ci_low_pct']:+.1f} to {quality['ci_high_pct']:+.1f} ({1 - 2 * quality['alpha']:.0%})",
                f"non-inferiority {_p_value(quality['p_noninferiority'])}; worse {_p_value(quality['p_worse'])}; "
                f"better {_p_value(quality['p_better'])}",
                "n/a" if quality["mde_pct"] is None else f"{quality['mde_pct']:.1f} points",
                quality["conclusion"].replace("_", " "),
            ]
        ),
    ]
    if cost["conclusion"] == "inconclusive":
        lines += [
            "",
            f"Not enough runs to tell: this design detects a {cost['mde_pct']:.1f}% saving 80% of the time, "
            f"and the {cost['confidence']:.0%} interval still holds both no saving and the "
            f"{cost['floor_pct']:.1f}% floor. More runs per task (or more tasks) narrow it.",
        ]
    return lines + _runs_lines(decision)


def _decision_lines(decision: dict[str, Any]) -> list[str]:
    metric = decision["metric"]
    lines = [
        f"### {decision['candidate_arm']} vs {decision['incumbent_arm']}: {decision['decision']}",
        "",
        _table_line(
            [
                "task",
                "class",
                "incumbent resolved",
                "candidate resolved",
                f"incumbent {metric}",
                f"candidate {metric}",
                "improvement %",
                "gated",
                "paired runs (candidate W/L/T)",
            ]
        ),
        _table_line(["---"] * 9),
    ]
    for row in decision["tasks"]:
        incumbent_resolved = row["incumbent_resolved"]
        if row["incumbent_excluded_runs"]:
            incumbent_resolved += f" ({row['incumbent_excluded_runs']} excluded)"
        candidate_resolved = row["candidate_resolved"]
        if row["candidate_excluded_runs"]:
            candidate_resolved += f" ({row['candidate_excluded_runs']} excluded)"
        lines.append(
            _table_line(
                [
                    row["task"],
                    row["class"],
                    incumbent_resolved,
                    candidate_resolved,
                    _metric_value(metric, row["incumbent_metric"]),
                    _metric_value(metric, row["candidate_metric"]),
                    _pct(row["improvement_pct"]),
                    "yes" if row["gated"] else "no",
                    _paired_cell(row["paired"]),
                ]
            )
        )
    lines += _tests_lines(decision)
    sign = decision["statistics"]["sign_test"]
    boot = decision["statistics"]["bootstrap"]
    if boot["ci_low_pct"] is None:
        interval = "not computable (no gated task with a measured improvement)"
    else:
        verdict = "excludes zero" if boot["excludes_zero"] else "includes zero"
        interval = f"[{boot['ci_low_pct']:.1f}%, {boot['ci_high_pct']:.1f}%] ({verdict})"
    margin = decision["resolution_margin"]
    lines += [
        "",
        f"Decision: **{decision['decision']}** on `{metric}`; median improvement over gated tasks "
        f"{_pct(decision['median_improvement_pct'])}%; resolution margin {'+' if margin > 0 else ''}{margin} run(s).",
        "",
        "Reasons:",
        "",
        *(f"- {reason}" for reason in decision["reasons"]),
        "",
        f"Sign test over gated tasks: {sign['wins']} win(s), {sign['losses']} loss(es), {sign['ties']} tie(s); "
        f"two-sided p = {sign['p_value']:.4f}.",
        "",
        f"Bootstrap {boot['confidence']:.0%} CI of the median improvement ({boot['resamples']} task resamples, "
        f"seed {boot['seed']}): {interval}.",
    ]
    if decision.get("metric_warning"):
        lines += ["", decision["metric_warning"]]
    return lines


def _promotion_lines(promotion: dict[str, Any]) -> list[str]:
    lines = ["## Candidate vs incumbent", ""]
    if promotion.get("run_status", "complete") != "complete":
        lines += [f"Run status `{promotion['run_status']}`: every decision is forced to insufficient_evidence.", ""]
    for index, decision in enumerate(promotion.get("decisions", [])):
        if index:
            lines.append("")
        lines += _decision_lines(decision)
    return lines


def render_report(
    rows: list[dict[str, Any]],
    *,
    title: str,
    task_order: list[str],
    arm_order: list[str],
    provenance: dict[str, Any],
    promotion: dict[str, Any] | None = None,
) -> str:
    """The whole ``report.md`` as one string.

    Tasks follow ``task_order`` and arms ``arm_order``; tasks or arms present in ``rows`` but
    not named there follow in order of first appearance, so no row is silently dropped.
    ``provenance`` keys (each optional; missing ones fall back to the distinct values in the
    rows): model, proposer_model, provider, effort, cli_version, sandbox_backends,
    selected_tasks, skipped_tasks, runs, run_status.
    """
    by_task = aggregate_by_task(rows)
    lines = [f"# {title}", "", INTRO, "", TOKEN_WARNING, "", _table_line(COLUMNS), _table_line(["---"] * len(COLUMNS))]
    for task in _ordered(task_order, list(by_task)):
        arms = by_task[task]
        ordered_arms = _ordered(arm_order, list(arms))
        for arm in ordered_arms:
            lines.append(_arm_line(task, arm, arms[arm]))
        if BASELINE_ARM in arms:
            for arm in ordered_arms:
                if arm != BASELINE_ARM:
                    saved = savings(arms[BASELINE_ARM], arms[arm])
                    lines.append(_savings_line(task, arms[arm]["class"], arm, saved))

    summaries = [summary for arms in by_task.values() for summary in arms.values()]
    excluded = sum(summary["excluded_runs"] for summary in summaries)
    missing = sum(summary["transcripts_missing"] for summary in summaries)
    lines.append("")
    if excluded:
        lines += [
            f"{excluded} run(s) hit session/infra/cleanup errors, were cancelled, or had unverifiable evidence "
            "and were excluded from medians and resolve denominators — see error_kind in results.jsonl.",
            "",
        ]
    if missing:
        lines += [
            f"{missing} run(s) had no locatable or readable session transcript, so they were excluded from "
            "promotion evidence (skill_invoked=null in results.jsonl).",
            "",
        ]
    lines += [SESSION_IDS_NOTE, "", *_provenance_lines(rows, provenance, task_order)]
    if promotion is not None:
        lines += ["", *_promotion_lines(promotion)]
    return "\n".join(lines) + "\n"
