"""``report.md`` and ``summary.md`` rendering: the per (task, arm) median table, savings, provenance, the gate's
verdict, and the run's summary across generations.

Owns the Markdown layout and number formatting of the benchmark report and the run summary, the canonical
order of rows (task-file order, run-major, arm-minor), and the summary document's outcome. Plain rows and
documents in, deterministic values out: no timestamps, no I/O. Every string a report takes from rows,
documents or config goes through `markup` (`md_text`, `md_code`, `md_prose`), so it renders as text.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from skillbench.base import layout
from skillbench.base.records import LIMIT_ERROR_KINDS, USAGE_FIELDS
from skillbench.decision.aggregate import (
    REVIEW_MEANS,
    ReviewSummary,
    TriggerScore,
    aggregate_by_task,
    is_valid,
    percent_saved,
    resolved_by_task,
    review_summaries,
    savings,
    trigger_scores,
)
from skillbench.experiment.configcheck import GENERATIONS_ADVICE
from skillbench.reporting.markup import md_code, md_fenced, md_prose, md_text

DEFAULT_BASELINE_ARM = "baseline"
DASH = "—"
MINUS = "−"

# Session time (summed over an arm's sessions) below this many seconds is dominated by start-up and machine
# load: its savings swing from run to run and are not shown.
NOISY_WALL_S = 60.0
NOISY = "†"
SUBAGENT_TOOLS = frozenset({"Task", "Agent"})
HOW_TO_READ = (
    "## How to read this\n"
    "\n"
    "- One line per task and arm: medians over the arm's valid runs. **resolved** counts the runs that passed the\n"
    "  task's verify and its hidden oracle; runs excluded for session/infra errors are named there and left out.\n"
    "- **cost $** is the median cost of one run; **$/resolved** is what one *resolved* run costs — every valid run's\n"
    "  cost divided by the resolved runs — the fair price when arms differ in quality (n/a when none resolved).\n"
    "- **savings %** rows compare an arm with the baseline arm, (baseline − arm) / baseline, positive = cheaper,\n"
    "  over the runs that resolved in both arms only, with both resolution counts beside them (arm vs baseline);\n"
    "  n/a when either arm resolved nothing. Their $/resolved column compares what a resolved run costs.\n"
    f"- **wall s** is the summed session time; {NOISY} marks medians under {NOISY_WALL_S:.0f} s, where start-up and\n"
    "  machine load dominate: no wall-time saving is shown for them.\n"
    "- **churn** = files/+insertions/−deletions against the clone's starting commit (plans and skills excluded)."
)
TOKEN_WARNING = (
    "**WARNING:** subagents were possible in this run (a Task/Agent tool was allowed or used): token columns count\n"
    "only each arm's main-loop session — tokens spent by subagents are not in them, so they favour arms that\n"
    "delegate. cost $ is the only column that includes subagent spend; to compare tokens fairly, recount usage\n"
    "from the captured transcripts, counting each message.id once."
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
    "$/resolved",
    "wall s",
    "turns",
    "churn",
    "errors",
)
REVIEW_COLUMNS = (
    "task",
    "case",
    "arm",
    "valid runs",
    "contract broken",
    "precision",
    "recall",
    "F1",
    "weighted F1",
    "blocker recall",
    "verdict correct",
    "clean control passed",
    "clean-control FP",
    "cost $",
)
REVIEW_HOW_TO_READ = (
    "Review tasks are scored on the host against hidden labels no session sees: one line per task and arm, means\n"
    "over the arm's valid runs. **contract broken** counts the runs whose review-output.json broke the contract (by\n"
    "kind) or that changed anything else (review-edited-code); a broken review scores 0.00 on every ratio and a\n"
    "wrong verdict. A ratio over nothing is 1.00: no finding makes no false claim, no defect leaves nothing to miss\n"
    "(so a clean control's recall is 1.00). **weighted F1** weights each finding by severity (critical 8, high 4,\n"
    "medium 2, low 1); **blocker recall** is the share of blocking defects a blocking finding matched. A clean\n"
    "control passes with no finding and an approve verdict; **clean-control FP** counts its findings over the runs.\n"
    "A review run is **resolved** (table above) when its sessions ran, the review kept the contract, the verdict is\n"
    "right and it found every blocker (defect case) or passed (clean control). **cost $** is the median cost of one\n"
    "run."
)
TRIGGER_COLUMNS = (
    "arm",
    "skill",
    "prompts",
    "recall",
    "precision",
    "false triggers",
    "near-miss false triggers",
    "runs",
    "cost per prompt $",
)
TRIGGER_HOW_TO_READ = (
    "Trigger tasks are labelled prompts: which skill, if any, each should make the agent invoke, a label no session\n"
    "sees. One line per arm and skill (every skill a prompt is labelled for or a session invoked), counted over the\n"
    "arm's valid runs, which skills a run invoked read from its parent-captured stream. **prompts** are those\n"
    "labelled for the skill; **recall** is the share of their runs that invoked it, **precision** the share of the\n"
    "runs that invoked it whose prompt was labelled for it (n/a: no run invoked it). **false triggers** count the\n"
    "runs on every other prompt that invoked the skill anyway, **near-miss false triggers** those on near misses\n"
    "(prompts close to a skill's domain that should trigger none). **runs** are all the arm's trigger runs and\n"
    "**cost per prompt $** the median cost of one. A trigger run is **resolved** (table above) when it invoked\n"
    "exactly its labelled skill, or none."
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


def _wall(seconds: float) -> str:
    return _whole(seconds) + (NOISY if seconds < NOISY_WALL_S else "")


def subagents_possible(rows: list[dict[str, Any]], tools: list[str] | None) -> bool:
    """A subagent tool was allowed to the sessions (when the tool list is known) or some run used one."""
    used = any(SUBAGENT_TOOLS & set(row.get("tool_use_counts") or {}) for row in rows)
    return used or bool(tools is not None and SUBAGENT_TOOLS & set(tools))


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
    return ", ".join(f"{md_text(kind)}×{count}" for kind, count in sorted(error_kinds.items()))


def _arm_line(task: str, arm: str, summary: dict[str, Any]) -> str:
    files, insertions, deletions = (
        _whole(summary[field]) for field in ("diff_files", "diff_insertions", "diff_deletions")
    )
    churn = f"{files}/+{insertions}/{MINUS}{deletions}"
    return _table_line(
        [
            md_text(task),
            md_text(summary["class"]),
            md_text(arm),
            _resolved_cell(summary),
            *(_whole(summary[field]) for field in USAGE_FIELDS),
            _cost(summary["cost_usd"]),
            _cost(summary["cost_per_resolved_usd"]),
            _wall(summary["duration_s"]),
            _whole(summary["num_turns"]),
            churn,
            _errors_cell(summary["error_kinds"]),
        ]
    )


def _savings_line(
    task: str,
    task_class: str,
    arm: str,
    summaries: dict[str, dict[str, Any]],
    resolved_only: dict[str, dict[str, Any] | None],
    baseline_arm: str,
) -> str:
    """Savings of ``arm`` against the baseline over resolved runs only, next to both arms' resolution."""
    arm_all, base_all = summaries[arm], summaries[baseline_arm]
    resolution = f"{arm_all['resolved']}/{arm_all['valid_runs']} vs {base_all['resolved']}/{base_all['valid_runs']}"
    arm_resolved, base_resolved = resolved_only.get(arm), resolved_only.get(baseline_arm)
    if arm_resolved is None or base_resolved is None:
        saved: dict[str, float | None] = dict.fromkeys((*USAGE_FIELDS, "cost_usd", "duration_s"))
        basis = "n/a: an arm resolved nothing"
    else:
        saved = savings(base_resolved, arm_resolved)
        basis = "over resolved runs"
    noisy = base_all["duration_s"] < NOISY_WALL_S or arm_all["duration_s"] < NOISY_WALL_S
    return _table_line(
        [
            md_text(task),
            md_text(task_class),
            f"**{md_text(arm)} savings %**",
            resolution,
            *(_pct(saved[field]) for field in USAGE_FIELDS),
            _pct(saved["cost_usd"]),
            _pct(percent_saved(base_all["cost_per_resolved_usd"], arm_all["cost_per_resolved_usd"])),
            NOISY if noisy else _pct(saved["duration_s"]),
            DASH,
            DASH,
            basis,
        ]
    )


def _distinct(rows: list[dict[str, Any]], field: str) -> list[Any]:
    return list(dict.fromkeys(row.get(field) for row in rows))


def _code_list(values: list[Any]) -> str:
    known = [md_code(value) for value in values if value is not None]
    return ", ".join(known) if known else "unknown"


def _cli_versions_line(rows: list[dict[str, Any]], claude_code_versions: list[Any]) -> str:
    """The agent CLIs' versions: Claude Code's alone (the provenance's, else the rows'), or each agent's from its
    rows when other agents ran (rows from before agents were recorded ran Claude Code)."""
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_agent.setdefault(row.get("agent") or "claude-code", []).append(row)
    if list(by_agent) in ([], ["claude-code"]):
        return f"- Claude Code CLI version: {_code_list(claude_code_versions)}"
    versions = [f"{md_text(agent)} {_code_list(_distinct(runs, 'cli_version'))}" for agent, runs in by_agent.items()]
    return f"- Agent CLI versions: {'; '.join(versions)}"


def _price_tables_line(rows: list[dict[str, Any]]) -> str:
    """The price tables that priced the rows (a community table as its source and SHA-256 digest)."""
    found = ((row.get("cost_check") or {}).get("price_table") for row in rows)
    tables = [table for table in dict.fromkeys(found) if table is not None]
    named = []
    for table in tables:
        source, _, digest = str(table).partition(" sha256:")
        named.append(f"{md_code(source)} (SHA-256 {md_code(digest)})" if digest else md_code(source))
    return f"- Price table{'s' if len(named) > 1 else ''}: {', '.join(named) if named else 'unknown'}"


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
        lines.append(f"- Proposer model: {md_code(provenance['proposer_model'])}")
    lines += [
        f"- Provider: {_code_list(pick('provider', 'provider'))}",
        f"- Reasoning effort: {_code_list(pick('effort', 'effort'))}",
        _cli_versions_line(rows, pick("cli_version", "cli_version")),
        f"- Sandbox backend(s): {_code_list(pick('sandbox_backends', 'sandbox_backend'))}",
        f"- Selected tasks ({len(selected)}): {', '.join(map(md_text, selected)) if selected else 'none'}",
        f"- Skipped expensive tasks ({len(skipped)}): {', '.join(map(md_text, skipped)) if skipped else 'none'}",
        f"- Runs per (task, arm): {md_text(runs)}",
        _price_tables_line(rows),
    ]
    plugins: dict[tuple[str, Any, Any], list[str]] = {}
    for row in rows:
        for plugin in row.get("plugins") or []:
            arms = plugins.setdefault((plugin["name"], plugin.get("version"), plugin["digest"]), [])
            if row["arm"] not in arms:
                arms.append(row["arm"])
    for (name, version, digest), arms in plugins.items():
        lines.append(
            f"- Plugin {md_code(name)} version {md_code(version or 'unversioned')} digest {md_code(digest[:16])} "
            f"(arms: {', '.join(map(md_text, arms))})"
        )
    mcp_uses: dict[str, int] = {}
    for row in rows:
        for server, count in (row.get("mcp_tool_uses") or {}).items():
            mcp_uses[server] = mcp_uses.get(server, 0) + count
    if mcp_uses:
        calls = ", ".join(f"{md_code(server)} {count}" for server, count in mcp_uses.items())
        lines.append(f"- MCP tool calls: {calls}")
    run_status = provenance.get("run_status", "complete")
    if run_status != "complete":
        lines.append(f"- Run status: {md_code(run_status)} — partial evidence; promotion is disabled")
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
        f"Per-run {md_text(metric)} (paired runs):",
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
            lines.append(_table_line([md_text(row["task"]), md_text(arm), *cells, *([DASH] * (width - len(cells)))]))
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
        f"Tests ({deciding}): design {md_prose(tests['design']['text'])}.",
        "",
        _table_line(["test", "estimate", "interval", "p-value", "detectable at 80% power", "conclusion"]),
        _table_line(["---"] * 6),
        _table_line(
            [
                f"{md_text(decision['metric'])} saving in {cost['objective'].replace('_', ' ')} "
                f"(alpha {cost['alpha']:g}, floor {cost['floor_pct']:.1f}%, {cost['tasks']} tasks)",
                _pct(cost["estimate_pct"]) + ("%" if cost["estimate_pct"] is not None else ""),
                "n/a"
                if cost["ci_low_pct"] is None
                else f"{cost['ci_low_pct']:.1f}% to {cost['ci_high_pct']:.1f}% ({cost['confidence']:.0%})",
                _p_value(cost["p_value"]),
                "n/a" if cost["mde_pct"] is None else f"{cost['mde_pct']:.1f}% saving",
                md_text(cost["conclusion"].replace("_", " ")),
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
                md_text(quality["conclusion"].replace("_", " ")),
            ]
        ),
    ]
    if cost["conclusion"] == "inconclusive":
        lines += [
            "",
            f"Not enough tasks or runs to tell: this design detects a {cost['mde_pct']:.1f}% saving 80% of the time, "
            f"and the {cost['confidence']:.0%} interval still holds both no saving and the "
            f"{cost['floor_pct']:.1f}% floor. The task is the unit of replication: more tasks narrow it most "
            "(`skillbench estimate` recommends a design).",
        ]
    return lines + _looks_lines(decision) + _runs_lines(decision)


def _looks_lines(decision: dict[str, Any]) -> list[str]:
    """A sequential design's interim looks: runs so far, the cost statistic against its boundary, the verdict."""
    looks, sequential = decision.get("looks"), decision.get("sequential")
    if not sequential:
        return []
    planned = ", ".join(str(runs) for runs in sequential["looks_planned"])
    lines = [
        "",
        f"Looks (sequential design, {sequential['spending'].replace('_', '–')} alpha spending, looks at {planned} "
        f"runs per (task, arm); futility below conditional power {sequential['futility_power']:g}):",
        "",
        _table_line(
            [
                "look",
                "runs",
                "saving",
                "statistic t",
                "boundary t (z)",
                "p-value",
                "nominal alpha",
                "conditional power (cost / quality)",
                "decision",
                "why",
            ]
        ),
        _table_line(["---"] * 10),
    ]
    for look in looks or []:
        powers = look["conditional_power"]
        lines.append(
            _table_line(
                [
                    str(look["look"]),
                    str(look["runs"]),
                    _pct(look["estimate_pct"]) + ("%" if look["estimate_pct"] is not None else ""),
                    "n/a" if look["statistic"] is None else f"{look['statistic']:.2f}",
                    ("n/a" if look["boundary_t"] is None else f"{look['boundary_t']:.2f}")
                    + ("" if look["boundary_z"] is None else f" ({look['boundary_z']:.2f})"),
                    _p_value(look["p_value"]),
                    f"{look['nominal_alpha']:.4g}",
                    " / ".join("n/a" if powers[key] is None else f"{powers[key]:.2f}" for key in ("cost", "quality")),
                    md_text(look["decision"].replace("_", " ")),
                    md_prose(look["reason"].replace("|", "/")),
                ]
            )
        )
    if sequential["cut_short"]:
        lines += ["", f"Cut short: {md_prose(decision['reasons'][0])}"]
    elif sequential["status"] == "continue":
        lines += ["", f"Not decided yet: the next look needs {sequential['next_runs']} runs per (task, arm)."]
    return lines


def _decision_lines(decision: dict[str, Any]) -> list[str]:
    metric = decision["metric"]
    lines = [
        f"### {md_text(decision['candidate_arm'])} vs {md_text(decision['incumbent_arm'])}: "
        f"{md_text(decision['decision'])}",
        "",
        _table_line(
            [
                "task",
                "class",
                "incumbent resolved",
                "candidate resolved",
                f"incumbent {md_text(metric)}",
                f"candidate {md_text(metric)}",
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
                    md_text(row["task"]),
                    md_text(row["class"]),
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
    lines += _concurrency_lines(decision)
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
        f"Decision: **{md_text(decision['decision'])}** on {md_code(metric)}; median improvement over gated tasks "
        f"{_pct(decision['median_improvement_pct'])}%; resolution margin {'+' if margin > 0 else ''}{margin} run(s).",
        "",
        "Reasons:",
        "",
        *(f"- {md_prose(reason)}" for reason in decision["reasons"]),
        "",
        f"Sign test over gated tasks: {sign['wins']} win(s), {sign['losses']} loss(es), {sign['ties']} tie(s); "
        f"two-sided p = {sign['p_value']:.4f}.",
        "",
        f"Bootstrap {boot['confidence']:.0%} CI of the median improvement ({boot['resamples']} task resamples, "
        f"seed {boot['seed']}): {interval}.",
    ]
    if decision.get("metric_warning"):
        lines += ["", md_prose(decision["metric_warning"])]
    return lines


def _concurrency_lines(decision: dict[str, Any]) -> list[str]:
    """Which rows the pair compared: the anchor that ran beside the candidate, or a note that they did not."""
    concurrency = decision.get("concurrency")
    if not concurrency:
        return []
    text = f"Compared: {md_prose(concurrency['note'])}"
    if concurrency["window"]:
        first, last = concurrency["window"]
        text += f"; their cells started from {md_text(first)} to {md_text(last)}"
    prefix = "" if concurrency["concurrent"] else "**Not concurrent.** "
    return ["", prefix + text + "."]


def anchor_lines(rows: Sequence[Mapping[str, Any]], promotion: Mapping[str, Any]) -> list[str]:
    """What the anchor cost: per pair, the incumbent's cells that ran beside the candidate (its batch's) — cells,
    agent sessions and measured spend — next to the candidate's."""
    lines: list[str] = []
    for decision in promotion.get("decisions", []):
        concurrency = decision.get("concurrency")
        if not concurrency or not concurrency["concurrent"]:
            continue
        batches = set(concurrency["batches"])
        sides = []
        for arm in (decision["incumbent_arm"], decision["candidate_arm"]):
            own = [row for row in rows if row["arm"] == arm and row.get("batch") in batches]
            spend = sum(row["cost_usd"] or 0.0 for row in own)
            sessions = sum(len(row["session_ids"]) for row in own)
            sides.append(f"{len(own)} cells, {sessions} sessions, ${spend:.2f}")
        lines.append(
            f"- {md_text(decision['candidate_arm'])} ran beside its anchor, fresh cells of "
            f"{md_text(decision['incumbent_arm'])} (batch {md_text(', '.join(concurrency['batches']))}): anchor "
            f"{sides[0]}; candidate {sides[1]}."
        )
    if not lines:
        return []
    return [
        "## The anchor",
        "",
        "Each candidate is compared only with the incumbent's cells that ran beside it, in one randomised order "
        "blocked by task (`schedule/look<k>.json`): whatever moved while they ran moved both. The anchor runs as "
        "many runs as the candidate (a balanced comparison) and costs what it says here:",
        "",
        *lines,
    ]


def drift_lines(
    rows: Sequence[Mapping[str, Any]], earlier: Sequence[Mapping[str, Any]], task_order: list[str], metric: str
) -> list[str]:
    """The drift diagnostic: each anchor arm (an incumbent arm with rows of a generation's batch) against its earlier
    cells of other batches (the sweep's): how far the incumbent itself moved between them. Per task the mean metric
    over valid measured runs and the resolution; over all tasks the change of the sum of the task means (the total
    spend's view). Never a test of a candidate: no gate compares a candidate with cells of another batch."""
    anchors: dict[str, set[str]] = {}
    for row in rows:
        batch = row.get("batch")
        if batch and layout.batch_generation(batch) is not None and not str(row["arm"]).startswith("candidate_"):
            anchors.setdefault(row["arm"], set()).add(batch)
    if not anchors:
        return []
    table = [
        _table_line(
            [
                "arm",
                "task",
                "earlier batch",
                f"earlier {md_text(metric)} (mean)",
                f"anchor {md_text(metric)} (mean)",
                "change %",
                "earlier resolved",
                "anchor resolved",
            ]
        ),
        _table_line(["---"] * 8),
    ]
    same = []
    for arm, batches in anchors.items():
        now = [row for row in rows if row["arm"] == arm and row.get("batch") in batches]
        before = [row for row in earlier if row["arm"] == arm and row.get("batch") not in batches]
        if not before:
            same.append(arm)
            continue
        earlier_batches = ", ".join(sorted({str(row.get("batch") or "unrecorded") for row in before}))
        totals = [0.0, 0.0]
        complete = True
        for task in _ordered(task_order, sorted({row["task"] for row in now} | {row["task"] for row in before})):
            means = [_mean_metric([r for r in side if r["task"] == task], metric) for side in (before, now)]
            resolved = [_resolved_share([r for r in side if r["task"] == task]) for side in (before, now)]
            if means[0] is None or means[1] is None:
                complete = False
            else:
                totals = [totals[0] + means[0], totals[1] + means[1]]
            table.append(
                _table_line(
                    [
                        md_text(arm),
                        md_text(task),
                        md_text(earlier_batches),
                        _metric_value(metric, means[0]),
                        _metric_value(metric, means[1]),
                        _change(means[0], means[1]),
                        resolved[0],
                        resolved[1],
                    ]
                )
            )
        table.append(
            _table_line(
                [
                    md_text(arm),
                    "all tasks (sum of task means)" + ("" if complete else ", tasks measured in both"),
                    md_text(earlier_batches),
                    _metric_value(metric, totals[0]),
                    _metric_value(metric, totals[1]),
                    _change(totals[0], totals[1]),
                    _resolved_share(before),
                    _resolved_share(now),
                ]
            )
        )
    lines = [
        "## Drift: the anchor against the incumbent's earlier cells",
        "",
        "Not a test of the candidate. The anchor (the incumbent's cells of this generation's batch) against the same "
        "arm's earlier cells, of another batch (the sweep's): how far the incumbent itself moved between them — "
        "the provider's prompt cache, its backend, its prices, the time of day. A comparison with those earlier "
        "cells would have read this change as the candidate's effect, which is why the gate never makes one.",
        "",
    ]
    if len(table) > 2:
        lines += table
    if same:
        lines += [
            *([""] if len(table) > 2 else []),
            f"{', '.join(map(md_text, same))}: the sweep's cells are this generation's anchor (generation 0's "
            "batch), so there is nothing earlier to compare with.",
        ]
    return lines


def _mean_metric(rows: Sequence[Mapping[str, Any]], metric: str) -> float | None:
    values = [row.get(metric) for row in rows if is_valid(row)]
    measured = [float(value) for value in values if value is not None]
    return statistics.fmean(measured) if measured and len(measured) == len(values) else None


def _resolved_share(rows: Sequence[Mapping[str, Any]]) -> str:
    valid = [row for row in rows if is_valid(row)]
    return f"{sum(bool(row['resolved']) for row in valid)}/{len(valid)}"


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None or before <= 0:
        return "n/a"
    return f"{(after / before - 1) * 100:+.1f}"


def _promotion_lines(promotion: dict[str, Any]) -> list[str]:
    lines = ["## Candidate vs incumbent", ""]
    if promotion.get("run_status", "complete") != "complete":
        lines += [
            f"Run status {md_code(promotion['run_status'])}: every decision is forced to insufficient_evidence.",
            "",
        ]
    lines += _agents_lines(promotion.get("agents"))
    for index, decision in enumerate(promotion.get("decisions", [])):
        if index:
            lines.append("")
        lines += _decision_lines(decision)
    return lines


def _agents_lines(agents: dict[str, Any] | None) -> list[str]:
    """The candidate's verdict across the agent CLIs (one row per pair) and the decision they make together; a
    single pair's decision is the candidate's, so it has no such section."""
    if not agents or len(agents["verdicts"]) < 2:
        return []
    adjusted = "p (Holm across agents)" if agents["rule"] == "any" else "p"
    lines = [
        f"### Across agents ({md_code('across_agents: ' + agents['rule'])}): **{md_text(agents['decision'])}**",
        "",
        f"{md_prose(agents['reason'])}. {md_prose(agents['statement'])}.",
        "",
        f"| agent | candidate vs incumbent | pair decision | verdict | saving % | {adjusted} |",
        "| --- | --- | --- | --- | ---: | ---: |",
    ]
    for verdict in agents["verdicts"]:
        p_value = verdict["cost_p_adjusted"]
        lines.append(
            _table_line(
                [
                    md_text(verdict["agent"] or "unrecorded"),
                    f"{md_text(verdict['candidate_arm'])} vs {md_text(verdict['incumbent_arm'])}",
                    md_text(verdict["pair_decision"]),
                    f"**{md_text(verdict['verdict'])}**",
                    _pct(verdict["cost_estimate_pct"]),
                    "n/a" if p_value is None else f"{p_value:.4g}",
                ]
            )
        )
    return [*lines, ""]


def candidate_section(promotion: Mapping[str, Any] | None, diff: str | None) -> list[str]:
    """The candidate's content flags (and what the config accepted) and its whole diff against the incumbent: what
    a promotion would write, shown before anyone applies it."""
    review = (promotion or {}).get("content_review")
    if review is None and diff is None:
        return []
    lines = ["## The candidate's change", ""]
    if review is None:
        lines += ["This candidate was frozen before content reviews were recorded: no flags are known.", ""]
    elif not review["flags"]:
        lines += ["Content flags: none (`evolution.accept_flags` does not matter for it).", ""]
    else:
        accepted = set(review["accepted"])
        verdict = (
            f"**held back**: the evidence would promote it, but {', '.join(map(md_code, review['unaccepted']))} "
            "are not in `evolution.accept_flags`"
            if review["held"]
            else (
                f"categories not accepted: {', '.join(map(md_code, review['unaccepted']))} (a promotion would be "
                "held back)"
                if review["unaccepted"]
                else "every category is accepted in `evolution.accept_flags`"
            )
        )
        lines += [
            f"Content flags: {len(review['flags'])}; {verdict}. Each is text the incumbent did not have that touches "
            "tests, secrets, the network or the shell (`config/README.md`, the content review).",
            "",
            "| file | line | category | rule | matched text | accepted |",
            "| --- | ---: | --- | --- | --- | --- |",
        ]
        for flag in review["flags"]:
            lines.append(
                _table_line(
                    [
                        md_text(flag["file"]),
                        str(flag["line"]),
                        md_text(flag["category"]),
                        md_text(flag["rule"]),
                        md_code(flag["text"]),
                        "yes" if flag["category"] in accepted else "**no**",
                    ]
                )
            )
        lines.append("")
    if diff is None:
        return lines
    if not diff:
        return [*lines, "The candidate's files equal the incumbent's.", ""]
    return [
        *lines,
        "The candidate's whole diff against the incumbent skills (`candidate.diff` beside this report; "
        "`skillbench apply` prints it again before it writes):",
        "",
        md_fenced(diff, "diff"),
        "",
    ]


def render_report(
    rows: list[dict[str, Any]],
    *,
    title: str,
    task_order: list[str],
    arm_order: list[str],
    provenance: dict[str, Any],
    promotion: dict[str, Any] | None = None,
    baseline_arm: str = DEFAULT_BASELINE_ARM,
    baseline_arms: dict[str, str] | None = None,
    candidate_diff: str | None = None,
    earlier: list[dict[str, Any]] | None = None,
) -> str:
    """The whole ``report.md`` as one string (a generation's ends with its candidate's flags and whole diff,
    ``candidate_diff``); savings rows compare every arm with the baseline arm of its own agent:
    ``baseline_arms[agent]``, else ``baseline_arm`` (an arm is never compared with another agent's baseline).

    Tasks follow ``task_order`` and arms ``arm_order``; tasks or arms present in ``rows`` but
    not named there follow in order of first appearance, so no row is silently dropped.
    ``provenance`` keys (each optional; missing ones fall back to the distinct values in the
    rows): model, proposer_model, provider, effort, cli_version, sandbox_backends,
    selected_tasks, skipped_tasks, runs, run_status; ``tools`` (the sessions' allowed tools) decides,
    with the rows' tool use, whether the subagent warning applies. With a ``promotion``, the report says what each
    candidate's anchor cost; with ``earlier`` rows (the sweep's), how far each anchor moved since them (drift).
    """
    by_task = aggregate_by_task(rows)
    resolved_only = resolved_by_task(rows)
    agent_of = arm_agents(rows)
    lines = [f"# {md_text(title)}", "", HOW_TO_READ, ""]
    if subagents_possible(rows, provenance.get("tools")):
        lines += [TOKEN_WARNING, ""]
    lines += [_table_line(COLUMNS), _table_line(["---"] * len(COLUMNS))]
    for task in _ordered(task_order, list(by_task)):
        arms = by_task[task]
        ordered_arms = _ordered(arm_order, list(arms))
        for arm in ordered_arms:
            lines.append(_arm_line(task, arm, arms[arm]))
        for arm in ordered_arms:
            base = baseline_of(arm, agent_of, baseline_arm, baseline_arms or {})
            if base is not None and base != arm and base in arms:
                lines.append(_savings_line(task, arms[arm]["class"], arm, arms, resolved_only[task], base))

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
    limited = sorted(row["error_kind"] for row in rows if row["error_kind"] in LIMIT_ERROR_KINDS)
    if limited:
        kinds = ", ".join(f"{md_text(kind)}×{limited.count(kind)}" for kind in sorted(set(limited)))
        lines += [
            f"{len(limited)} run(s) ended at a limit their agent ran into ({kinds}): they count as unresolved runs of "
            "their arm, never excluded or retried — see error_detail in results.jsonl.",
            "",
        ]
    if missing:
        lines += [
            f"{missing} run(s) had no locatable or readable session transcript, so they were excluded from "
            "promotion evidence (skill_invoked=null in results.jsonl).",
            "",
        ]
    for section in (review_section(rows, task_order, arm_order), trigger_section(rows, arm_order)):
        if section:
            lines += [*section, ""]
    if len(set(agent_of.values())) > 1:
        lines += [*agents_side_by_side(rows, _ordered(arm_order, list(agent_of))), ""]
    lines += [SESSION_IDS_NOTE, "", *_provenance_lines(rows, provenance, task_order)]
    if promotion is not None:
        lines += _generation_lines(rows, promotion, task_order, candidate_diff, earlier)
    return "\n".join(lines) + "\n"


def _generation_lines(
    rows: list[dict[str, Any]],
    promotion: dict[str, Any],
    task_order: list[str],
    candidate_diff: str | None,
    earlier: list[dict[str, Any]] | None,
) -> list[str]:
    """A generation's closing sections: the decision, its anchor's cost, the anchor's drift since the earlier rows,
    and the candidate's flags and whole diff (each section preceded by a blank line, empty ones left out)."""
    metric = str(promotion.get("policy", {}).get("metric", "cost_usd"))
    sections = [
        _promotion_lines(promotion),
        anchor_lines(rows, promotion),
        drift_lines(rows, earlier, task_order, metric) if earlier is not None else [],
        candidate_section(promotion, candidate_diff),
    ]
    return [line for section in sections if section for line in ("", *section)]


def arm_agents(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each arm's agent CLI, as its rows say (rows from before agents were recorded ran Claude Code)."""
    return {row["arm"]: row.get("agent") or "claude-code" for row in rows}


def baseline_of(arm: str, agent_of: dict[str, str], baseline_arm: str, baseline_arms: dict[str, str]) -> str | None:
    """The baseline ``arm`` is compared with: its agent's (``baseline_arms``, else ``baseline_arm``), and only when
    that baseline ran the same agent."""
    agent = agent_of.get(arm)
    base = baseline_arms.get(agent or "", baseline_arm)
    return base if agent_of.get(base) == agent else None


def agents_side_by_side(rows: Sequence[Mapping[str, Any]], arm_order: list[str]) -> list[str]:
    """One table over every task: each agent's arms side by side (resolution, skill use, cost), agent by agent."""
    header = ["agent", "CLI", "arm", "resolved", "skill used", "median cost $", "$/resolved", "offered skills"]
    # Over every task: cost per resolved run is all the valid runs' cost over the runs that resolved.
    lines = ["## Agents side by side", "", _table_line(header), _table_line(["---"] * len(header))]
    agent_of = arm_agents(rows)
    for agent in sorted(set(agent_of.values()), key=lambda name: (name != "claude-code", name)):
        for arm in [arm for arm in arm_order if agent_of.get(arm) == agent]:
            arm_rows = [row for row in rows if row["arm"] == arm]
            valid = [row for row in arm_rows if is_valid(row)]
            resolved = sum(1 for row in valid if row["resolved"])
            costs = [row.get("cost_usd") for row in valid]
            measured = [float(cost) for cost in costs if cost is not None] if None not in costs else None
            versions = sorted({str(row.get("cli_version")) for row in arm_rows if row.get("cli_version")})
            proofs = [row["skill_invoked"] for row in valid if row.get("skill_invoked") is not None]
            offered = sorted({skill for row in arm_rows for skill in row.get("offered_skills") or []})
            lines.append(
                _table_line(
                    [
                        md_text(agent),
                        ", ".join(md_code(version) for version in versions) or "n/a",
                        md_text(arm),
                        f"{resolved}/{len(valid)}",
                        f"{sum(proofs)}/{len(proofs)}" if proofs else DASH,
                        _cost(statistics.median(measured) if measured else None),
                        _cost(sum(measured) / resolved if measured and resolved else None),
                        md_text(", ".join(offered)) if offered else DASH,
                    ]
                )
            )
    return lines


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _share(count: int | None, runs: int) -> str:
    return f"{count}/{runs}" if runs and count is not None else "n/a"


def _review_line(summary: ReviewSummary) -> str:
    runs = str(summary.valid_runs)
    if summary.scored != summary.valid_runs:
        runs += f" ({summary.valid_runs - summary.scored} unscored)"
    if summary.excluded_runs:
        runs += f" ({summary.excluded_runs} excluded)"
    broken = str(summary.broken_runs)
    if summary.broken_kinds:
        broken += f" ({_errors_cell(summary.broken_kinds)})"
    clean = summary.case == "clean"
    return _table_line(
        [
            md_text(summary.task),
            summary.case,
            md_text(summary.arm),
            runs,
            broken,
            *(_ratio(summary.means[field]) for field in REVIEW_MEANS),
            _share(summary.verdict_correct, summary.scored),
            _share(summary.clean_control_passed, summary.scored) if clean else DASH,
            str(summary.clean_control_fp) if clean else DASH,
            _cost(summary.cost_usd),
        ]
    )


def review_section(rows: Sequence[Mapping[str, Any]], task_order: list[str], arm_order: list[str]) -> list[str]:
    """The "Review quality" section: one line per review task (suite order) and arm (report order); no lines when
    no row is a review task's."""
    summaries = review_summaries(rows)
    if not summaries:
        return []
    lines = ["## Review quality", "", REVIEW_HOW_TO_READ, ""]
    lines += [_table_line(REVIEW_COLUMNS), _table_line(["---"] * len(REVIEW_COLUMNS))]
    tasks = _ordered(task_order, _distinct_keys(task for task, _arm in summaries))
    for task in tasks:
        arms = _distinct_keys(arm for name, arm in summaries if name == task)
        lines += [_review_line(summaries[(task, arm)]) for arm in _ordered(arm_order, arms)]
    return lines


def _distinct_keys(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _counted_ratio(part: int, whole: int, ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f} ({part}/{whole})"


def _trigger_line(score: TriggerScore) -> str:
    return _table_line(
        [
            md_text(score.arm),
            md_text(score.skill),
            str(score.prompts),
            _counted_ratio(score.invoked, score.runs, score.recall),
            _counted_ratio(score.invoked, score.invoked + score.false_triggers, score.precision),
            f"{score.false_triggers}/{score.other_runs}" if score.other_runs else "n/a",
            f"{score.near_miss_false_triggers}/{score.near_miss_runs}" if score.near_miss_runs else "n/a",
            str(score.arm_runs),
            _cost(score.cost_per_prompt_usd),
        ]
    )


def trigger_section(rows: Sequence[Mapping[str, Any]], arm_order: list[str]) -> list[str]:
    """The "Skill triggering" section: one line per arm (report order) and measured skill (sorted); no lines when no
    row is a trigger task's."""
    scores = trigger_scores(rows)
    if not scores:
        return []
    lines = ["## Skill triggering", "", TRIGGER_HOW_TO_READ, ""]
    lines += [_table_line(TRIGGER_COLUMNS), _table_line(["---"] * len(TRIGGER_COLUMNS))]
    for arm in _ordered(arm_order, _distinct_keys(score.arm for score in scores)):
        lines += [_trigger_line(score) for score in scores if score.arm == arm]
    return lines


def canonical_order(rows: list[dict[str, Any]], task_order: list[str], arm_order: list[str]) -> list[dict[str, Any]]:
    """Task-file order, then run-major, arm-minor."""
    return sorted(rows, key=lambda row: (task_order.index(row["task"]), row["run"], arm_order.index(row["arm"])))


def runs_text(runs: Any) -> Any:
    """The design as the report states it: the integer of a fixed design, a sentence for a sequential one."""
    if isinstance(runs, int):
        return runs
    return f"{runs['min']} to {runs['max']}, step {runs['step']} (sequential; each pair's looks are in its decision)"


def oracle_log_section(links: list[tuple[dict[str, Any], str]]) -> str:
    """Links (row, relative path) to the oracle's output of every run whose hidden oracle failed, for the task
    author. The report shows only the link, never the owner-only log's content."""
    if not links:
        return ""
    lines = [
        f"- {md_text(row['task'])} / {md_text(row['arm'])} / run {row['run']}: [{md_text(relative)}]({quote(relative)})"
        for row, relative in links
    ]
    return (
        "\n## Oracle output of failed runs (for task authors)\n\nThe hidden oracle's output is kept out of every "
        "report, transcript and evidence bundle; these owner-only files hold its tail. If every arm fails the "
        "same way, check the oracle (`skillbench check-tasks`) before blaming the agent.\n\n" + "\n".join(lines) + "\n"
    )


def oracle_failed(row: dict[str, Any]) -> bool:
    """The run's hidden oracle ran and failed (its output is in the cell's owner-only oracle log)."""
    return not row["oracle_passed"] and row["oracle_output"] == "hidden oracle failed"


# ─── summary.md ─────────────────────────────────────────────────────────────


def generation_summary(
    promotion: dict[str, Any], overlay_doc: dict[str, Any], *, promoted: bool, gate_summary: list[str]
) -> dict[str, Any]:
    """One generation's entry of summary.json: its candidate, its decisions and the gate's summary lines."""
    return {
        "generation": overlay_doc["generation"],
        "candidate_origin": overlay_doc["candidate_origin"],
        "candidate_overlay_digest": overlay_doc["digest"],
        "touched_skills": overlay_doc["touched_skills"],
        "required_candidate_arms": overlay_doc["required_candidate_arms"],
        "promoted": promoted,
        "run_status": promotion["run_status"],
        "decisions": [
            {
                "candidate_arm": d["candidate_arm"],
                "incumbent_arm": d["incumbent_arm"],
                "decision": d["decision"],
                "median_improvement_pct": d["median_improvement_pct"],
                "reasons": d["reasons"],
                **({"agent": v["agent"], "verdict": v["verdict"]} if v else {}),
            }
            for d, v in zip(promotion["decisions"], _verdicts(promotion), strict=True)
        ],
        "gate_summary": gate_summary,
        "error_control": promotion["error_control"],
        **(
            {"across_agents": {key: promotion["agents"][key] for key in ("rule", "decision", "reason")}}
            if promotion.get("agents")
            else {}
        ),
    }


def _verdicts(promotion: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Each decision's verdict across agents (None for a document written before them)."""
    agents = promotion.get("agents")
    if agents and len(agents["verdicts"]) == len(promotion["decisions"]):
        return list(agents["verdicts"])
    return [None] * len(promotion["decisions"])


def _error_control_line(summary: dict[str, Any]) -> list[str]:
    """The experiment-wide error rate the generations' alpha shares add up to (what `alpha` bounds)."""
    controls = [g["error_control"] for g in summary["generations"] if g.get("error_control")]
    if not controls:
        return []
    last = controls[-1]
    shares = ", ".join(f"generation {c['generation']} at {c['generation_alpha']:.4g}" for c in controls)
    total = sum(c["generation_alpha"] for c in controls)
    return ["", f"**Error control:** {shares} (together {total:.4g}); {last['statement']}."]


def run_outcome(requested: int, generations: list[dict[str, Any]]) -> tuple[str, int | None]:
    """(outcome, promoted generation): a sweep, the first promoted generation, or no promotion."""
    promoted = next((g["generation"] for g in generations if g["promoted"]), None)
    if requested == 0:
        return "sweep", promoted
    return ("promoted" if promoted is not None else "not_promoted"), promoted


def _decision_cell(decision: dict[str, Any], several: bool) -> str:
    """``candidate: decision``; with several pairs also ``(agent)``, and ``→ verdict`` when the verdict across
    agents differs from the pair's own decision."""
    agent = f" ({md_text(decision['agent'] or 'unrecorded')})" if several and "agent" in decision else ""
    verdict = decision.get("verdict", decision["decision"])
    shift = f" → {md_text(verdict)}" if verdict != decision["decision"] else ""
    return f"{md_text(decision['candidate_arm'])}{agent}: {md_text(decision['decision'])}{shift}"


def _generation_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| generation | origin | candidate digest | arms | decision |", "| --- | --- | --- | --- | --- |"]
    for generation in summary["generations"]:
        several = len(generation["decisions"]) > 1
        decisions = ", ".join(_decision_cell(decision, several) for decision in generation["decisions"])
        across = generation.get("across_agents")
        if across and len(generation["decisions"]) > 1:
            decisions += f"; across agents ({md_text(across['rule'])}): **{md_text(across['decision'])}**"
        lines.append(
            _table_line(
                [
                    str(generation["generation"]),
                    md_text(generation["candidate_origin"]),
                    md_code(generation["candidate_overlay_digest"][:16]),
                    ", ".join(map(md_text, generation["required_candidate_arms"])),
                    decisions,
                ]
            )
        )
    lines.append("")
    for generation in summary["generations"]:
        lines.append(f"## Generation {generation['generation']}")
        lines.append("")
        lines += [f"- {md_prose(line)}" for line in generation["gate_summary"]]
        lines += _post_hoc_lines(generation.get("post_hoc") or [])
        lines.append("")
    return lines


def _post_hoc_lines(entries: list[dict[str, Any]]) -> list[str]:
    """Regrades under another policy than the run's, beside its decision: marked post hoc, never the verdict."""
    lines = []
    for entry in entries:
        changed = "; ".join(
            f"{key} {json.dumps(values['post_hoc'])} (the run's: {json.dumps(values['run'])})"
            for key, values in entry["changed"].items()
        )
        decisions = "; ".join(
            f"{decision['candidate_arm']}: {decision['decision']} — {decision['reason']}"
            for decision in entry["decisions"]
        )
        lines.append(
            f"- **post hoc, not the run's decision** (under {md_text(changed)}; {md_code(entry['document'])}): "
            f"{md_prose(decisions)}"
        )
    return lines


def _outcome_line(summary: dict[str, Any]) -> str:
    if summary["outcome"] == "promoted":
        return (
            f"**Outcome: generation {summary['promoted_generation']}'s candidate was promoted.** "
            f"Apply it with {md_code('skillbench apply ' + layout.results_root(summary['experiment']))}."
        )
    advice = summary.get("next_step") or GENERATIONS_ADVICE
    return (
        f"**Outcome: no candidate cleared the gate in {summary['generations_requested']} generation(s).** "
        f"{md_prose(advice)}"
    )


def render_summary(summary: dict[str, Any]) -> str:
    """summary.md: the chain of generations, each generation's gate summary and the outcome."""
    lines = [f"# skillbench run {md_code(summary['experiment'])}", ""]
    if summary["outcome"] == "sweep":
        lines.append("A benchmark sweep of the incumbent arms (no candidate): see `sweep/report.md`.")
    else:
        lines += [*_generation_table(summary), _outcome_line(summary), *_error_control_line(summary)]
    cut_short = [
        f"generation {g['generation']} {md_text(d['candidate_arm'])}"
        for g in summary["generations"]
        for d in g["decisions"]
        if d["reasons"] and d["reasons"][0].startswith("cut short:")
    ]
    if cut_short:
        lines += [
            "",
            f"**Budget reached:** no further batch of sessions was started; cut short before a decision: "
            f"{', '.join(cut_short)} (their reports show the looks taken).",
        ]
    if summary["budget_exhausted_cells"]:
        lines += [
            "",
            f"**Budget reached:** the model gateway refused every request past `budget.max_usd`; "
            f"{summary['budget_exhausted_cells']} cell(s) were cut short (rows `budget-exhausted`, excluded).",
        ]
    if summary.get("capped_cells"):
        lines += [
            "",
            f"**Session cap reached:** {summary['capped_cells']} cell(s) had a session stopped at "
            "`budget.max_session_usd`: each is a censored observation (rows `session-cap-reached`, `censored`), "
            "counted at the spend the cap let through and resolved only if verify and the oracle passed on what it "
            "left. They are evidence as they are, not gaps: running them again would only drop the expensive runs.",
        ]
    if summary["broken_incumbent_arms"]:
        broken = ", ".join(map(md_text, summary["broken_incumbent_arms"]))
        lines += ["", f"**[harness-health]** broken incumbent arms: {broken}"]
    return "\n".join(lines).rstrip() + "\n"
