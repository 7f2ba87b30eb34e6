"""The promotion gate: result rows + policy → a reproducible decision per candidate arm.

Owns the ``promotion/v1`` document and its types
(``PromotionDocument``, ``Decision``, ``TaskRow``), and the two decision rules behind
``evaluate_candidate`` — ``noise_aware`` (default: the upstream guards, then a cost test across
tasks on the policy's objective and a quality test, at the generation's share of the policy's alpha;
docs/gate.md) and ``upstream`` (run minimums, pairing,
gated/ungated tasks, quality floor, task regression caps, resolution margin, median
improvement, optional bootstrap confidence). Both rules take the same steps over one gathered
``_PairEvidence``: the pair's guards (a named model, sandboxed runs, comparable rows — one Claude
Code version and one model), the rule's per-task checks, the evidence base, the rule's outcome,
and one decision record with the tests both rules report (``candidate_tests``; the statistics
themselves live in ``stats``) and the paired per-run values. Also the experiment's error control
(``generation_alpha``, ``error_control``: alpha spent over generations), the refusal of duplicate rows,
and the sequential design (``run_design``, ``look_alphas``, ``sequential_decision``: interim looks that
promote, keep the incumbent for futility, or continue, replayed over the rows in run order). Pure: no clock, no
files, no randomness beyond a fixed-seed generator, so the same rows and policy always give the
same document.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from skillbench.base.artifacts import utc_timestamp
from skillbench.base.records import Decision, PromotionDocument, ResultRow, TaskFacts, TaskRow
from skillbench.decision import stats as gate_stats
from skillbench.decision.aggregate import aggregate_by_task, is_valid, percent_saved
from skillbench.decision.policy import (  # noqa: F401 (re-exported: the gate's callers name them here)
    ACROSS_AGENTS,
    GENERATION_SPENDING,
    OBJECTIVES,
    POLICY_KEYS_NOT_IN_CONFIG,
    PROMOTION_METRICS,
    RULES,
    GateInputError,
    GatePolicy,
    error_control,
    generation_alpha,
    is_number,
    resolve_policy,
)
from skillbench.decision.stats import (
    BOOTSTRAP_CONFIDENCE,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_median_ci,
    sign_test,
)

__all__ = [
    "BOOTSTRAP_CONFIDENCE",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "across_agents",
    "check_policy_design",
    "GateInputError",
    "bootstrap_median_ci",
    "evaluate_candidate",
    "paired_runs",
    "promotion_document",
    "resolve_policy",
    "sign_test",
    "summarize_gate",
]

PROMOTION_SCHEMA = "promotion/v1"
MAIN_LOOP_ONLY_METRICS = ("output_tokens", "num_turns")
MAIN_LOOP_ONLY_WARNING = (
    "WARNING: output_tokens and num_turns come from the main-loop session only; tokens and turns spent "
    "by subagents are not counted, so these metrics favour candidates that push work into subagents. "
    "Prefer cost_usd, which is the only CLI-reported figure that includes subagent spend, or recount "
    "usage from the captured transcripts, counting each message.id once."
)
# A candidate can win on cost or on resolution; an identical candidate must clear neither more
# than its generation's alpha of the time in total, so the resolution route spends a tenth of it
# (weighted Bonferroni) and the cost test the rest.
RESOLUTION_ROUTE_SHARE = 0.1
QUALITY_RULES = {
    "upstream": (
        "no per-task resolution-rate regression on gated tasks; where the incumbent resolves a run or a "
        "run never invoked the skill under test, the candidate must resolve every valid run"
    ),
    "noise_aware": (
        "over all paired runs of the gated tasks, stratified by task, the candidate's resolution rate must be "
        "shown (one-sided, at the generation's alpha, with the variance at the margin) to be no more than "
        "quality_margin_pct points below the incumbent's; no gated task may show a resolution drop at alpha "
        "(Holm over the gated tasks; a z-test whose variance borrows the pair's pooled resolution rate); the "
        "candidate may not skip the skill under test more often than the incumbent; a promotion on resolution "
        "alone needs the total spend shown to be within resolution_cost_margin_pct of the incumbent's"
    ),
}
# The failure that is the skill's own fault: the prompts under test never loaded it.
SKILL_ATTRIBUTABLE_ERROR_KIND = "skill-not-invoked"
RUN_STATUSES = ("complete", "aborted")
ABORTED_REASON = "run aborted; partial evidence cannot promote"


# The tests a decision records (the schema's tests object).
TEST_KEYS = ("design", "cost", "cost_alternative", "quality")

BINDING_FIELDS = (
    "benchmark_model",
    "effort",
    "proposer_model",
    "candidate_origin",
    "candidate_overlay_digest",
    "required_candidate_arms",
    "selected_tasks",
    "target_base_digests",
)


# aggregate_by_task's output: task → arm → that (task, arm)'s summary.
ByTask = dict[str, dict[str, dict[str, Any]]]

# ─── Policy ─────────────────────────────────────────────────────────────────


def check_unique_rows(rows: Sequence[ResultRow]) -> None:
    """Refuse rows that hold one (task, arm, run) twice: naming each, since the gate cannot tell which to count."""
    seen: dict[tuple[str, str, int], int] = {}
    for row in rows:
        key = (row["task"], row["arm"], row["run"])
        seen[key] = seen.get(key, 0) + 1
    duplicated = sorted(key for key, count in seen.items() if count > 1)
    if duplicated:
        named = "; ".join(
            f"task {task}, arm {arm}, run {run} ({seen[(task, arm, run)]} rows)" for task, arm, run in duplicated
        )
        raise GateInputError(f"duplicate result rows: {named}; each (task, arm, run) must appear once")


def metric_warning(metric: str) -> str | None:
    return MAIN_LOOP_ONLY_WARNING if metric in MAIN_LOOP_ONLY_METRICS else None


def metric_value(row: ResultRow, metric: str) -> float | None:
    """A row's value of one of the ``PROMOTION_METRICS``, as recorded (None: not measured)."""
    return cast("Mapping[str, float | None]", row).get(metric)


# ─── Statistics ─────────────────────────────────────────────────────────────


def paired_runs(
    rows: Sequence[ResultRow], *, task: str, incumbent_arm: str, candidate_arm: str, metric: str
) -> dict[str, Any]:
    """Pair run i of the incumbent with run i of the candidate over run indices valid in both arms.

    ``differences`` are incumbent − candidate (positive = the candidate spent less, which is
    better for every promotion metric); a pair with an unmeasured value has a None difference
    and counts as neither win, loss nor tie.
    """
    by_arm: dict[str, dict[int, ResultRow]] = {incumbent_arm: {}, candidate_arm: {}}
    for row in rows:
        if row["task"] == task and row["arm"] in by_arm and is_valid(row):
            by_arm[row["arm"]][row["run"]] = row
    indices = sorted(set(by_arm[incumbent_arm]) & set(by_arm[candidate_arm]))
    incumbent_values = [metric_value(by_arm[incumbent_arm][index], metric) for index in indices]
    candidate_values = [metric_value(by_arm[candidate_arm][index], metric) for index in indices]
    differences = [
        None if inc is None or cand is None else round(inc - cand, 6)
        for inc, cand in zip(incumbent_values, candidate_values, strict=True)
    ]
    measured = [value for value in differences if value is not None]
    return {
        "runs": len(indices),
        "run_indices": indices,
        "incumbent_values": incumbent_values,
        "candidate_values": candidate_values,
        "differences": differences,
        "wins": sum(1 for value in measured if value > 0),
        "losses": sum(1 for value in measured if value < 0),
        "ties": sum(1 for value in measured if value == 0),
    }


# ─── Decision: what both rules gather and check ─────────────────────────────


@dataclass
class _Verdict:
    """What a rule has found so far: its reasons in evaluation order and the two flags it decides on."""

    reasons: list[str] = field(default_factory=list)
    insufficient: bool = False  # the evidence cannot decide: insufficient_evidence
    regressed: bool = False  # a guard found the candidate worse: keep_incumbent

    def lacking(self, reasons: list[str]) -> None:
        """Reasons the evidence cannot decide (an empty list changes nothing)."""
        self.insufficient = self.insufficient or bool(reasons)
        self.reasons += reasons

    def regression(self, reason: str) -> None:
        self.regressed = True
        self.reasons.append(reason)


@dataclass(frozen=True)
class _TaskEvidence:
    """One paired task: its evidence row (the schema's task_row) and the counts the rules check.

    Run counts are (incumbent, candidate) pairs: ``valid``, ``excluded``, ``resolved`` and
    ``skipped_skill`` (skill-not-invoked) runs; ``run_unmeasured`` and ``run_non_positive`` look at
    every valid run of either arm, where the row's medians only summarise them.
    """

    row: TaskFacts
    valid: tuple[int, int]
    excluded: tuple[int, int]
    resolved: tuple[int, int]
    skipped_skill: tuple[int, int]
    run_unmeasured: bool
    run_non_positive: bool


@dataclass(frozen=True)
class _PairEvidence:
    """One (incumbent, candidate) pair: the tasks that ran both arms (sorted) and those that did not."""

    incumbent_arm: str
    candidate_arm: str
    tasks: dict[str, _TaskEvidence]
    unpaired_tasks: list[str]

    @property
    def arms(self) -> tuple[str, str]:
        return self.incumbent_arm, self.candidate_arm

    @property
    def paired_tasks(self) -> list[str]:
        return list(self.tasks)

    def task_rows(self, checks: dict[str, dict[str, Any]]) -> list[TaskRow]:
        """Every paired task's row with the per-task checks of ``candidate_tests``."""
        return [{**task.row, "checks": checks[name]} for name, task in self.tasks.items()]

    def gated_tasks(self) -> list[str]:
        return [name for name, task in self.tasks.items() if task.row["gated"]]

    def ungated_tasks(self) -> list[str]:
        return [name for name, task in self.tasks.items() if not task.row["gated"]]

    def missing_arm_reason(self, task: str) -> str:
        return f"{task}: both {self.incumbent_arm} and {self.candidate_arm} are required"


def _rows_by_task(rows: Sequence[ResultRow]) -> dict[str, list[ResultRow]]:
    grouped: dict[str, list[ResultRow]] = {}
    for row in rows:
        grouped.setdefault(row["task"], []).append(row)
    return grouped


def _task_evidence(
    task: str,
    incumbent: dict[str, Any],
    candidate: dict[str, Any],
    *,
    arms: tuple[str, str],
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
) -> _TaskEvidence:
    """One paired task's evidence from its two aggregates (and its rows, for the per-run view)."""
    metric, min_runs = policy.metric, policy.min_runs
    n_inc, n_cand = int(incumbent["valid_runs"]), int(candidate["valid_runs"])
    x_inc, x_cand = int(incumbent["excluded_runs"]), int(candidate["excluded_runs"])
    r_inc, r_cand = int(incumbent["resolved"]), int(candidate["resolved"])
    raw_inc, raw_cand = incumbent.get(metric), candidate.get(metric)
    m_inc = None if raw_inc is None else float(raw_inc)
    m_cand = None if raw_cand is None else float(raw_cand)
    improvement = percent_saved(m_inc, m_cand)
    skips_inc = int(incumbent.get("error_kinds", {}).get(SKILL_ATTRIBUTABLE_ERROR_KIND, 0))
    skips_cand = int(candidate.get("error_kinds", {}).get(SKILL_ATTRIBUTABLE_ERROR_KIND, 0))
    # A task both arms measured cleanly, neither ever resolved, and whose failures are not
    # the skill's own fault says nothing about the candidate: keep it as evidence, not as a gate.
    fully_measured = n_inc >= min_runs and n_cand >= min_runs and n_inc == n_cand and not x_inc and not x_cand
    skill_attributable = bool(skips_inc or skips_cand)
    gated = not (fully_measured and r_inc == 0 and r_cand == 0 and not skill_attributable and improvement is not None)
    values = [metric_value(row, metric) for row in rows or [] if row["arm"] in arms and is_valid(row)]
    row: TaskFacts = {
        "task": task,
        "class": incumbent.get("class", ""),
        "incumbent_resolved": f"{r_inc}/{n_inc}",
        "candidate_resolved": f"{r_cand}/{n_cand}",
        "incumbent_excluded_runs": x_inc,
        "candidate_excluded_runs": x_cand,
        "incumbent_metric": m_inc,
        "candidate_metric": m_cand,
        "improvement_pct": improvement,
        "gated": gated,
        # The floor asks for reliability only where the incumbent shows some, or where the
        # prompts under test never loaded the skill at all.
        "quality_floor_enforced": r_inc > 0 or skill_attributable,
        "skill_attributable_failure": skill_attributable,
        "candidate_quality_floor_met": n_cand > 0 and r_cand == n_cand,
        "paired": (
            None
            if rows is None
            else paired_runs(rows, task=task, incumbent_arm=arms[0], candidate_arm=arms[1], metric=metric)
        ),
    }
    return _TaskEvidence(
        row=row,
        valid=(n_inc, n_cand),
        excluded=(x_inc, x_cand),
        resolved=(r_inc, r_cand),
        skipped_skill=(skips_inc, skips_cand),
        run_unmeasured=m_inc is None or m_cand is None or any(value is None for value in values),
        run_non_positive=any(value is not None and value <= 0 for value in values),
    )


def _pair_evidence(
    by_task: ByTask,
    *,
    incumbent_arm: str,
    candidate_arm: str,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
) -> _PairEvidence:
    """Every task of ``by_task`` in sorted order: paired (both arms ran it) or not."""
    arms = (incumbent_arm, candidate_arm)
    rows_by_task = _rows_by_task(rows or [])
    tasks: dict[str, _TaskEvidence] = {}
    unpaired: list[str] = []
    for task in sorted(by_task):
        aggregates = by_task[task]
        if incumbent_arm not in aggregates or candidate_arm not in aggregates:
            unpaired.append(task)
            continue
        tasks[task] = _task_evidence(
            task,
            aggregates[incumbent_arm],
            aggregates[candidate_arm],
            arms=arms,
            policy=policy,
            rows=None if rows is None else rows_by_task.get(task, []),
        )
    return _PairEvidence(incumbent_arm, candidate_arm, tasks, unpaired)


def _unsandboxed_runs(rows: Sequence[ResultRow], tasks: list[str], arms: tuple[str, str]) -> int:
    wanted = set(tasks)
    return sum(
        1 for row in rows if row["task"] in wanted and row["arm"] in arms and row.get("sandbox_backend") == "none"
    )


# What a pair's rows must share to be compared: the CLI that ran them and the model behind it
# (row field → how a value reads, how a missing value reads, what the cells should share).
COMPARABLE_FIELDS = {
    "agent": ("agent {}", "an unrecorded agent", "one agent"),
    "cli_version": ("CLI version {}", "an unrecorded CLI version", "one CLI version"),
    "model": ("model {}", "an unrecorded model", "one model"),
}


def _arm_values(
    rows: Sequence[ResultRow], field_name: str, tasks: list[str], arms: tuple[str, str]
) -> dict[str, dict[str | None, set[str]]]:
    """Per arm: each value of ``field_name`` its valid rows on ``tasks`` hold, and the tasks that hold it."""
    wanted = set(tasks)
    seen: dict[str, dict[str | None, set[str]]] = {arm: {} for arm in arms}
    for row in rows:
        if row["task"] in wanted and row["arm"] in arms and is_valid(row):
            value = cast("Mapping[str, str | None]", row).get(field_name)
            seen[row["arm"]].setdefault(value, set()).add(row["task"])
    return seen


def comparability_reasons(rows: Sequence[ResultRow], tasks: list[str], arms: tuple[str, str]) -> list[str]:
    """Why a pair's valid rows on ``tasks`` cannot be compared: they ran different agent CLIs, CLI versions or
    models, across the two arms or within one. One reason per field, naming each arm's values and their tasks."""
    reasons = []
    for field_name, (shown, unrecorded, shared) in COMPARABLE_FIELDS.items():
        seen = _arm_values(rows, field_name, tasks, arms)
        if len({value for values in seen.values() for value in values}) < 2:
            continue
        sides = [
            f"the {side}'s cells ({arm}) ran {_values_text(seen[arm], shown, unrecorded)}"
            for side, arm in zip(("incumbent", "candidate"), arms, strict=True)
            if seen[arm]
        ]
        reasons.append(f"rows are not comparable: {'; '.join(sides)}; rerun the stale cells so both arms ran {shared}")
    return reasons


def _values_text(values: dict[str | None, set[str]], shown: str, unrecorded: str) -> str:
    """``Claude Code 2.1.197 (tasks: greet) and Claude Code 2.1.328 (tasks: money)``: each value, then its tasks."""
    return " and ".join(
        f"{unrecorded if value is None else shown.format(value)} (tasks: {', '.join(sorted(values[value]))})"
        for value in sorted(values, key=lambda value: (value is None, str(value)))
    )


def _pair_guards(
    pair: _PairEvidence,
    *,
    model: str | None,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
    needs_rows: bool,
) -> list[str]:
    """Both rules' guards on the evidence as a whole; each one that fails makes it insufficient."""
    reasons = []
    if not model:
        reasons.append("a named model is required so prompt evidence cannot drift")
    if rows is None:
        if needs_rows:
            reasons.append("the noise-aware rule needs the per-run rows; none were supplied")
        return reasons
    if not policy.allow_unsandboxed:
        unsandboxed = _unsandboxed_runs(rows, pair.paired_tasks, pair.arms)
        if unsandboxed:
            reasons.append(
                f"{unsandboxed} run(s) of {pair.incumbent_arm}/{pair.candidate_arm} ran without a sandbox "
                "(sandbox_backend none); unsandboxed evidence cannot promote unless the policy sets "
                "allow_unsandboxed"
            )
    return reasons + comparability_reasons(rows, pair.paired_tasks, pair.arms)


def run_count_reasons(task: str, n_inc: int, n_cand: int, x_inc: int, x_cand: int, min_runs: int) -> list[str]:
    """Both rules' per-task run-count guards (valid runs n, excluded runs x): why the evidence is insufficient."""
    reasons = []
    if n_inc < min_runs or n_cand < min_runs:
        reasons.append(f"{task}: needs at least {min_runs} valid runs per arm (got {n_inc}/{n_cand})")
    if x_inc or x_cand:
        reasons.append(f"{task}: promotion requires zero excluded runs in both paired arms (got {x_inc}/{x_cand})")
    if n_inc != n_cand:
        reasons.append(
            f"{task}: paired arms have different valid run counts ({n_inc}/{n_cand} valid; {x_inc}/{x_cand} excluded)"
        )
    return reasons


def _task_run_counts(task: _TaskEvidence, min_runs: int) -> list[str]:
    return run_count_reasons(task.row["task"], *task.valid, *task.excluded, min_runs)


def _unmeasured_reason(task: str, metric: str) -> str:
    return (
        f"{task}: {metric} was not measured on every run in both paired arms; "
        "cannot rank on it (fix cost capture or choose another metric)"
    )


def evidence_base(gated_tasks: list[str], ungated_tasks: list[str], min_gated_ratio: float) -> tuple[bool, list[str]]:
    """Both rules' check that enough paired tasks carry quality signal: (insufficient, reasons)."""
    paired = len(gated_tasks) + len(ungated_tasks)
    reasons = []
    if ungated_tasks:
        reasons.append(
            f"not gated on {len(ungated_tasks)} task(s) neither arm resolved: {', '.join(ungated_tasks)} "
            f"(evidence base: {len(gated_tasks)}/{paired} paired tasks gated)"
        )
    if not paired:
        return True, [*reasons, "no paired task results were found"]
    if not gated_tasks:
        return True, [*reasons, "no task supplied quality signal: neither arm resolved a run anywhere in the set"]
    if len(gated_tasks) < min_gated_ratio * paired:
        return True, [
            *reasons,
            f"promotion evidence base is too thin: {len(gated_tasks)}/{paired} paired tasks are gated "
            f"(at least {min_gated_ratio:.0%} required)",
        ]
    return False, reasons


def _check_evidence_base(verdict: _Verdict, pair: _PairEvidence, policy: GatePolicy) -> None:
    thin, reasons = evidence_base(pair.gated_tasks(), pair.ungated_tasks(), policy.min_gated_task_ratio)
    verdict.insufficient = verdict.insufficient or thin
    verdict.reasons += reasons


def _pair_tests(
    pair: _PairEvidence,
    rows: Sequence[ResultRow] | None,
    policy: GatePolicy,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> dict[str, Any]:
    """``candidate_tests`` over the pair's gated and paired tasks."""
    return candidate_tests(
        rows or [],
        incumbent_arm=pair.incumbent_arm,
        candidate_arm=pair.candidate_arm,
        gated_tasks=pair.gated_tasks(),
        paired_tasks=pair.paired_tasks,
        policy=policy,
        look_alphas=look_alphas,
        generation=generation,
    )


def _decision_record(
    pair: _PairEvidence,
    *,
    rule: str,
    decision: str,
    verdict: _Verdict,
    policy: GatePolicy,
    tests: dict[str, Any],
) -> Decision:
    """The schema's decision for one pair: the verdict, the improvement over gated tasks and the tests."""
    metric = policy.metric
    improvements = _gated_improvements(pair)
    return {
        "incumbent_arm": pair.incumbent_arm,
        "candidate_arm": pair.candidate_arm,
        "rule": rule,
        "decision": decision,
        "metric": metric,
        "metric_warning": metric_warning(metric),
        "median_improvement_pct": _median_improvement(improvements),
        "resolution_margin": _resolution_margin(pair),
        "reasons": verdict.reasons,
        "gated_tasks": pair.gated_tasks(),
        "ungated_tasks": pair.ungated_tasks(),
        "tasks": pair.task_rows(tests["checks"]),
        "statistics": {"sign_test": sign_test(improvements), "bootstrap": bootstrap_median_ci(improvements)},
        "tests": {key: tests[key] for key in TEST_KEYS},
    }


def _gated_improvements(pair: _PairEvidence) -> list[float]:
    return [
        improvement
        for task in pair.tasks.values()
        if task.row["gated"] and (improvement := task.row["improvement_pct"]) is not None
    ]


def _median_improvement(improvements: list[float]) -> float | None:
    return round(statistics.median(improvements), 1) if improvements else None


def _resolution_margin(pair: _PairEvidence) -> int:
    """Candidate resolved runs minus incumbent resolved runs over the paired tasks."""
    return sum(task.resolved[1] for task in pair.tasks.values()) - sum(task.resolved[0] for task in pair.tasks.values())


# ─── The upstream rule ──────────────────────────────────────────────────────


def _upstream_task_checks(verdict: _Verdict, task: _TaskEvidence, policy: GatePolicy) -> None:
    """One paired task under the upstream rule: run counts, resolution, the quality floor, the metric."""
    row, metric = task.row, policy.metric
    name, improvement = row["task"], row["improvement_pct"]
    (n_inc, n_cand), (r_inc, r_cand) = task.valid, task.resolved
    if not row["gated"]:
        cap = policy.max_failed_task_regression_pct
        if improvement is not None and improvement < -cap:
            verdict.regression(
                f"{name}: {metric} regressed {-improvement:.1f}% on a task neither arm resolved, "
                f"above the {cap:.1f}% failed-task cap"
            )
        return
    verdict.lacking(_task_run_counts(task, policy.min_runs))
    rate_inc = r_inc / n_inc if n_inc else 0.0
    rate_cand = r_cand / n_cand if n_cand else 0.0
    if rate_cand < rate_inc:
        verdict.regression(f"{name}: resolution regressed from {rate_inc:.0%} to {rate_cand:.0%}")
    if row["quality_floor_enforced"] and n_cand > 0 and r_cand != n_cand:
        trigger = (
            "a run never invoked the skill under test"
            if row["skill_attributable_failure"]
            else f"the incumbent resolves {r_inc}/{n_inc}"
        )
        verdict.regression(
            f"{name}: candidate must resolve every valid run for the oracle-backed quality floor "
            f"({trigger}; got {r_cand}/{n_cand})"
        )
    task_cap = policy.max_task_regression_pct
    if row["incumbent_metric"] is None or row["candidate_metric"] is None:
        verdict.lacking([_unmeasured_reason(name, metric)])
    elif improvement is None:
        verdict.lacking([f"{name}: incumbent {metric} is zero; choose a metric with signal"])
    elif improvement < -task_cap:
        verdict.regression(f"{name}: {metric} regressed {-improvement:.1f}%, above the {task_cap:.1f}% task cap")


def _upstream_outcome(verdict: _Verdict, pair: _PairEvidence, policy: GatePolicy) -> str:
    """First matching decision wins: insufficiency, a regression, a resolution margin of 2, the median improvement."""
    if verdict.insufficient:
        return "insufficient_evidence"
    if verdict.regressed:
        return "keep_incumbent"
    margin = _resolution_margin(pair)
    if margin >= 2:
        verdict.reasons.append(
            f"candidate improves total task resolution by {margin} runs (at least 2 required) with no task regression"
        )
        return "promote"
    if margin == 1:
        verdict.reasons.append(
            "total resolution improved by only 1 run — within the noise floor (2 required); "
            "deciding on efficiency instead"
        )
    metric, required = policy.metric, policy.min_improvement_pct
    median = _median_improvement(_gated_improvements(pair))
    verdict.reasons.append(f"median {metric} improvement is {median or 0.0:.1f}% (required {required:.1f}%)")
    return "promote" if median is not None and median >= required else "keep_incumbent"


def _confidence_outcome(verdict: _Verdict, pair: _PairEvidence, metric: str) -> str:
    """``require_confidence``: a promotion stands only when the bootstrap CI's lower bound is above 0."""
    bootstrap = bootstrap_median_ci(_gated_improvements(pair))
    low = bootstrap["ci_low_pct"]
    if low is not None and low > 0:
        return "promote"
    if low is None:
        verdict.reasons.append(
            f"no bootstrap confidence interval for the median {metric} improvement could be computed; "
            "require_confidence needs one whose lower bound is above 0%"
        )
    else:
        verdict.reasons.append(
            f"bootstrap {BOOTSTRAP_CONFIDENCE:.0%} CI of the median {metric} improvement is "
            f"[{low:.1f}%, {bootstrap['ci_high_pct']:.1f}%]; require_confidence needs its lower bound above 0%"
        )
    return "keep_incumbent"


def _upstream_decision(
    pair: _PairEvidence,
    *,
    model: str | None,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
    generation: int = 0,
) -> Decision:
    """The upstream rule (``rule: upstream``), kept decision for decision.

    Tasks are evaluated in sorted task-id order. First matching decision wins: any
    insufficiency → insufficient_evidence; any quality or efficiency regression →
    keep_incumbent; resolution margin ≥ 2 → promote; else the median improvement over gated
    tasks must reach ``min_improvement_pct``. ``require_confidence`` additionally demands a
    bootstrap CI whose lower bound is above zero before any promotion.
    """
    verdict = _Verdict()
    verdict.lacking(_pair_guards(pair, model=model, policy=policy, rows=rows, needs_rows=False))
    for task in sorted([*pair.tasks, *pair.unpaired_tasks]):
        if task in pair.tasks:
            _upstream_task_checks(verdict, pair.tasks[task], policy)
        else:
            verdict.lacking([pair.missing_arm_reason(task)])
    _check_evidence_base(verdict, pair, policy)
    decision = _upstream_outcome(verdict, pair, policy)
    if decision == "promote" and policy.require_confidence:
        decision = _confidence_outcome(verdict, pair, policy.metric)
    tests = _pair_tests(pair, rows, policy, generation=generation)
    record = _decision_record(pair, rule="upstream", decision=decision, verdict=verdict, policy=policy, tests=tests)
    record["no_worse"] = not verdict.insufficient and not verdict.regressed
    return record


# ─── The tests behind a decision (both rules report them) ──────────────────


def _valid_runs(rows: Sequence[ResultRow], arms: tuple[str, str]) -> dict[tuple[str, str], list[ResultRow]]:
    grouped: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row["arm"] in arms and is_valid(row):
            grouped.setdefault((row["task"], row["arm"]), []).append(row)
    return grouped


def _design(tasks: list[str], runs: dict[tuple[str, str], list[ResultRow]], arms: tuple[str, str]) -> dict[str, Any]:
    counts = sorted({len(runs.get((task, arm), [])) for task in tasks for arm in arms})
    per_arm = counts[0] if len(counts) == 1 else None
    if not tasks:
        text = "no gated task"
    elif per_arm is not None:
        text = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} × {per_arm} run{'s' if per_arm != 1 else ''} per arm"
    else:
        text = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} × {counts[0]}–{counts[-1]} runs per arm (unequal)"
    return {"tasks": len(tasks), "runs_per_arm": per_arm, "text": text}


def candidate_tests(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    gated_tasks: list[str],
    paired_tasks: list[str],
    policy: GatePolicy,
    alpha: float | None = None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> dict[str, Any]:
    """The cost and quality tests over the gated tasks, and the per-task checks over every paired task.

    ``alpha`` defaults to the generation's share of the policy's (``generation_alpha``); an interim
    look of a sequential design passes the alphas it may spend at that look in ``look_alphas``
    (``cost``, ``resolution``, ``quality``: the nominal levels of the cost test, the resolution route
    and the non-inferiority tests), while the per-task checks keep the policy's alpha: they can only
    keep the incumbent. ``cost`` tests the policy's objective; ``cost_alternative`` reports the other
    (total spend next to the per-task geometric mean). Pure: rows in, numbers out.
    """
    alpha = generation_alpha(policy, generation) if alpha is None else alpha
    cost_alpha, resolution_alpha = alpha * (1 - RESOLUTION_ROUTE_SHARE), alpha * RESOLUTION_ROUTE_SHARE
    quality_alpha = alpha
    if look_alphas is not None:
        cost_alpha, resolution_alpha = look_alphas["cost"], look_alphas["resolution"]
        quality_alpha = look_alphas["quality"]
    arms = (incumbent_arm, candidate_arm)
    runs = _valid_runs(rows, arms)
    gated_cells = list(_measured_cells(runs, gated_tasks, arms, policy.metric).values())
    # Every gated task must be measured, or the test is not computable.
    measured = [cell for cell in gated_cells if cell is not None] if None not in gated_cells else []
    objective = policy.objective
    other = next(name for name in OBJECTIVES if name != objective)
    cost, alternative = (
        gate_stats.cost_test(measured, alpha=round(cost_alpha, 8), floor_pct=policy.min_improvement_pct, objective=name)
        for name in (objective, other)
    )
    quality = gate_stats.quality_test(
        [_resolution_counts(runs, task, arms) for task in gated_tasks],
        alpha=round(quality_alpha, 8),
        margin_pct=policy.quality_margin_pct,
        better_alpha=round(resolution_alpha, 8),
    )
    return {
        "design": _design(gated_tasks, runs, arms),
        "cost": cost,
        "cost_alternative": alternative,
        "quality": quality,
        "checks": _task_checks(
            runs,
            _measured_cells(runs, paired_tasks, arms, policy.metric),
            gated_tasks,
            arms,
            policy,
            alpha=policy.alpha,
            interval_alpha=cost["alpha"],
        ),
    }


Cell = tuple[list[float], list[float]]  # one task's metric values: (incumbent runs, candidate runs)


def _measured_cells(
    runs: dict[tuple[str, str], list[ResultRow]], tasks: list[str], arms: tuple[str, str], metric: str
) -> dict[str, Cell | None]:
    """Per task, both arms' values of ``metric``; None when an arm has no valid run or an unmeasured one."""
    cells: dict[str, Cell | None] = {}
    for task in tasks:
        inc, cand = ([metric_value(row, metric) for row in runs.get((task, arm), [])] for arm in arms)
        measured_inc = [value for value in inc if value is not None]
        measured_cand = [value for value in cand if value is not None]
        complete = len(measured_inc) == len(inc) and len(measured_cand) == len(cand)
        cells[task] = (
            ([float(v) for v in measured_inc], [float(v) for v in measured_cand]) if inc and cand and complete else None
        )
    return cells


def _resolution_counts(
    runs: dict[tuple[str, str], list[ResultRow]], task: str, arms: tuple[str, str]
) -> tuple[int, int, int, int]:
    """(incumbent resolved, incumbent runs, candidate resolved, candidate runs) over one task's valid runs."""
    inc, cand = (runs.get((task, arm), []) for arm in arms)
    return sum(1 for r in inc if r.get("resolved")), len(inc), sum(1 for r in cand if r.get("resolved")), len(cand)


def _task_checks(
    runs: dict[tuple[str, str], list[ResultRow]],
    cells: dict[str, Cell | None],
    gated_tasks: list[str],
    arms: tuple[str, str],
    policy: GatePolicy,
    *,
    alpha: float,
    interval_alpha: float,
) -> dict[str, dict[str, Any]]:
    """Per paired task: a credible cost rise above its cap (at alpha / tasks), the resolution-drop test (Holm over
    the gated tasks), and the task's own saving on the objective's scale with its interval (what a figure draws)."""
    usable = [cell for cell in cells.values() if cell is not None]
    pooled = gate_stats.pooled_log_variance(usable)
    task_alpha = alpha / max(1, len(cells))
    gated_counts = [_resolution_counts(runs, task, arms) for task in gated_tasks]
    drops = dict(zip(gated_tasks, gate_stats.resolution_drops(gated_counts), strict=True))
    adjusted = dict(zip(gated_tasks, gate_stats.holm(list(drops.values())), strict=True))
    checks: dict[str, dict[str, Any]] = {}
    for task, cell in cells.items():
        cap = policy.max_task_regression_pct if task in gated_tasks else policy.max_failed_task_regression_pct
        # The spread between the other tasks: the task under test must not widen the yardstick it is judged by.
        between = gate_stats.between_task_variance([other for name, other in cells.items() if name != task and other])
        regression = (
            gate_stats.task_regression(cell[0], cell[1], pooled=pooled, alpha=task_alpha, cap_pct=cap, between=between)
            if cell is not None
            else {"regression_pct": None, "p_value": None, "regressed": False}
        )
        saving = (
            gate_stats.task_saving(cell[0], cell[1], objective=policy.objective, alpha=interval_alpha)
            if cell is not None
            else {"saving_pct": None, "ci_low_pct": None, "ci_high_pct": None}
        )
        checks[task] = {
            "regression_pct": regression["regression_pct"],
            "regression_p_value": regression["p_value"],
            "regression_alpha": round(task_alpha, 6),
            "regressed": regression["regressed"],
            "resolution_drop_p_value": drops.get(task, 1.0),
            "resolution_drop_adjusted_p": adjusted.get(task, 1.0),
            "resolution_dropped": adjusted.get(task, 1.0) <= alpha,
            "saving_pct": saving["saving_pct"],
            "saving_ci_low_pct": saving["ci_low_pct"],
            "saving_ci_high_pct": saving["ci_high_pct"],
        }
    return checks


def _pct_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _p_text(value: float | None) -> str:
    """``p = 0.0123`` style text after the letter p."""
    if value is None:
        return "= n/a"
    return "< 0.0001" if value < 0.0001 else f"= {value:.4f}"


def cost_sentence(cost: dict[str, Any], metric: str, design: str) -> str:
    """One sentence on what the cost test found, for reasons and reports."""
    what = f"{metric} saving in {_objective_text(cost.get('objective', 'per_task'))}"
    conclusion = cost["conclusion"]
    if conclusion == "not_computable":
        if cost["estimate_pct"] is None:
            return f"the {metric} test could not be computed (no measured run in some gated task)"
        if cost["tasks"] < 2:
            return (
                f"{what} {_pct_text(cost['estimate_pct'])} on one gated task: the test needs at least two, since "
                "the task is the unit of replication"
            )
        return (
            f"{what} {_pct_text(cost['estimate_pct'])}, the same on every gated task: the per-task differences do not "
            "vary, so no noise was measured and no p-value can be claimed"
        )
    interval = f"{cost['confidence']:.0%} CI {_pct_text(cost['ci_low_pct'])} to {_pct_text(cost['ci_high_pct'])}"
    found = (
        f"{what} {_pct_text(cost['estimate_pct'])} ({interval}; one-sided p {_p_text(cost['p_value'])}, alpha "
        f"{cost['alpha']:g}, {cost['df']} df across tasks)"
    )
    if conclusion == "cheaper":
        return f"{found}, at least the {cost['floor_pct']:.1f}% floor"
    if conclusion == "below_floor":
        return f"{found}: credibly cheaper, but the estimate is below the {cost['floor_pct']:.1f}% floor"
    if conclusion == "not_cheaper":
        return f"{found}: the interval rules out a saving of {cost['floor_pct']:.1f}% or more"
    detectable = _pct_text(cost["mde_pct"])
    return f"not enough tasks or runs to tell: {found}; {design} detects a {detectable} saving 80% of the time"


def quality_sentence(quality: dict[str, Any]) -> str:
    """One sentence on what the quality test found."""
    counts = (
        f"candidate resolved {quality['candidate_resolved']}/{quality['candidate_runs']}, incumbent "
        f"{quality['incumbent_resolved']}/{quality['incumbent_runs']}"
    )
    if quality["conclusion"] == "not_computable":
        return f"resolution could not be compared ({counts})"
    difference = (
        f"difference {quality['difference_pct']:+.1f} points ({1 - 2 * quality['alpha']:.0%} CI "
        f"{quality['ci_low_pct']:+.1f} to {quality['ci_high_pct']:+.1f})"
    )
    conclusion = quality["conclusion"]
    if conclusion == "better":
        return (
            f"resolution credibly better: {counts}, {difference}, one-sided p {_p_text(quality['p_better'])} "
            f"(alpha {quality['better_alpha']:g} for promotions on resolution)"
        )
    if conclusion == "worse":
        return f"resolution credibly worse: {counts}, {difference}, one-sided p {_p_text(quality['p_worse'])}"
    if conclusion == "not_worse":
        return (
            f"resolution not worse: {counts}, {difference}, within the {quality['margin_pct']:.0f}-point margin "
            f"(non-inferiority p {_p_text(quality['p_noninferiority'])})"
        )
    return (
        f"not enough runs to show the resolution is within {quality['margin_pct']:.0f} points of the incumbent's: "
        f"{counts}, {difference}, non-inferiority p {_p_text(quality['p_noninferiority'])}"
    )


# ─── The noise-aware rule ───────────────────────────────────────────────────


def _noise_aware_task_checks(
    verdict: _Verdict, task: _TaskEvidence, check: dict[str, Any], policy: GatePolicy, paired: int
) -> None:
    """One paired task under the noise-aware rule: run counts, the metric, Fisher's test, skill use, cost rise."""
    row, metric, alpha = task.row, policy.metric, policy.alpha
    name = row["task"]
    if not row["gated"]:
        if check["regressed"]:
            verdict.regression(
                f"{name}: {metric} rose {check['regression_pct']:.1f}% on a task neither arm resolved, above the "
                f"{policy.max_failed_task_regression_pct:.1f}% failed-task cap (one-sided p "
                f"{_p_text(check['regression_p_value'])}, alpha/{paired})"
            )
        return
    verdict.lacking(_task_run_counts(task, policy.min_runs))
    if task.run_unmeasured:
        verdict.lacking([_unmeasured_reason(name, metric)])
    elif task.run_non_positive:
        verdict.lacking([f"{name}: {metric} is zero on some run; choose a metric with signal"])
    if check["resolution_dropped"]:
        verdict.regression(
            f"{name}: resolution fell from {row['incumbent_resolved']} to {row['candidate_resolved']} "
            f"(one-sided p {_p_text(check['resolution_drop_p_value'])}, Holm-adjusted over the gated tasks "
            f"{_p_text(check['resolution_drop_adjusted_p'])}, alpha {alpha:g})"
        )
    skips_inc, skips_cand = task.skipped_skill
    if skips_inc < skips_cand:
        verdict.regression(
            f"{name}: the candidate never invoked the skill under test in {skips_cand} run(s) (incumbent: {skips_inc})"
        )
    if check["regressed"]:
        verdict.regression(
            f"{name}: {metric} rose {check['regression_pct']:.1f}%, above the "
            f"{policy.max_task_regression_pct:.1f}% task cap (one-sided p "
            f"{_p_text(check['regression_p_value'])}, alpha/{paired})"
        )


def _objective_text(objective: str) -> str:
    return "total spend" if objective == "total_spend" else "per-task geometric mean"


def _resolution_route(tests: dict[str, Any], policy: GatePolicy) -> tuple[bool, str]:
    """Whether a candidate whose resolution is credibly better may be promoted on that alone, and the sentence why."""
    quality, margin = tests["quality"], policy.resolution_cost_margin_pct
    if margin is None:
        return True, quality_sentence(quality)
    spend = tests["cost"] if tests["cost"]["objective"] == "total_spend" else tests["cost_alternative"]
    p_within = gate_stats.cost_within_pct(spend, margin)
    shown = p_within is not None and p_within <= quality["alpha"]
    cost = (
        f"total spend {_pct_text(-spend['estimate_pct'] if spend['estimate_pct'] is not None else None)} against the "
        f"incumbent's, shown to be at most {margin:g}% higher (one-sided p {_p_text(p_within)}, alpha "
        f"{quality['alpha']:g})"
    )
    if shown:
        return True, f"{quality_sentence(quality)}; {cost}"
    return False, (
        f"{quality_sentence(quality)}, but a promotion on resolution alone needs the total spend shown to be at most "
        f"{margin:g}% higher than the incumbent's (resolution_cost_margin_pct; one-sided p {_p_text(p_within)}, alpha "
        f"{quality['alpha']:g})"
    )


def _spend_guard(tests: dict[str, Any], alpha: float) -> str | None:
    """Why a candidate cheaper per task is still kept: its total spend is credibly higher (per_task objective only)."""
    spend = tests["cost_alternative"]
    if tests["cost"]["objective"] != "per_task" or spend["p_higher"] is None or spend["p_higher"] > alpha:
        return None
    return (
        f"the suite's total spend is credibly higher: {_pct_text(-spend['estimate_pct'])} against the incumbent's "
        f"(one-sided p {_p_text(spend['p_higher'])}, alpha {alpha:g}); a cheaper per-task geometric mean does not "
        "promote a candidate that costs more in total"
    )


def _noise_aware_outcome(verdict: _Verdict, tests: dict[str, Any], policy: GatePolicy) -> str:
    """After the guards: resolution credibly better promotes (if its spend is within the policy's margin), worse or
    unshown keeps; then the cost test decides, and a per-task objective also needs the total spend not credibly higher.

    The sentence that decided leads the reasons."""
    cost, quality, metric = tests["cost"], tests["quality"], policy.metric
    if verdict.insufficient:
        return "insufficient_evidence"
    if verdict.regressed:
        return "keep_incumbent"
    if quality["conclusion"] == "better":
        allowed, sentence = _resolution_route(tests, policy)
        if allowed:
            verdict.reasons.insert(0, sentence)
            return "promote"
        verdict.reasons.append(sentence)
    elif quality["conclusion"] == "worse":
        verdict.reasons.insert(0, quality_sentence(quality))
        return "keep_incumbent"
    if cost["conclusion"] == "not_computable":
        verdict.reasons.insert(0, cost_sentence(cost, metric, tests["design"]["text"]))
        return "insufficient_evidence"
    if quality["conclusion"] == "inconclusive":
        verdict.reasons[:0] = [quality_sentence(quality), cost_sentence(cost, metric, tests["design"]["text"])]
        return "keep_incumbent"
    guard = _spend_guard(tests, policy.alpha) if cost["conclusion"] == "cheaper" else None
    verdict.reasons[:0] = [cost_sentence(cost, metric, tests["design"]["text"]), quality_sentence(quality)]
    if guard:
        verdict.reasons.insert(0, guard)
        return "keep_incumbent"
    return "promote" if cost["conclusion"] == "cheaper" else "keep_incumbent"


def _noise_aware_decision(
    pair: _PairEvidence,
    *,
    model: str | None,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> tuple[Decision, bool]:
    """The default rule: the upstream guards, then a cost test and a quality test at the generation's alpha.

    Guards that make the evidence unusable give insufficient_evidence (as upstream). A gated
    task whose resolution dropped against the suite's failure rate (Holm over the tasks), a
    candidate that skipped the skill under test more often than the incumbent, or a task whose
    cost rose credibly above its cap keeps the incumbent. Then: resolution credibly better →
    promote when its total spend is shown within the policy's margin; resolution credibly worse
    → keep; a cost test that cannot be computed → insufficient_evidence; resolution not shown
    within the margin → keep; cost credibly lower by at least the floor (and, for a per-task
    objective, a total spend not credibly higher) → promote; anything else keeps the incumbent
    with the reason the cost test gives.

    Returns the decision and whether a per-task guard (not a test) kept the incumbent: an
    interim look stops at once on such a regression.
    """
    verdict = _Verdict()
    verdict.lacking(_pair_guards(pair, model=model, policy=policy, rows=rows, needs_rows=True))
    verdict.lacking([pair.missing_arm_reason(task) for task in pair.unpaired_tasks])
    tests = _pair_tests(pair, rows, policy, look_alphas, generation)
    for name, task in pair.tasks.items():
        _noise_aware_task_checks(verdict, task, tests["checks"][name], policy, len(pair.tasks))
    _check_evidence_base(verdict, pair, policy)
    decision = _noise_aware_outcome(verdict, tests, policy)
    record = _decision_record(pair, rule="noise_aware", decision=decision, verdict=verdict, policy=policy, tests=tests)
    record["no_worse"] = not verdict.insufficient and not verdict.regressed and _not_worse_on_tests(tests, policy)
    return record, verdict.regressed


def _not_worse_on_tests(tests: dict[str, Any], policy: GatePolicy) -> bool:
    """The no-worse guards a test gives: the resolution shown within the margin (or better), and the total spend not
    credibly higher (one-sided, at the policy's alpha: a guard that can only keep the incumbent)."""
    spend = tests["cost"] if tests["cost"]["objective"] == "total_spend" else tests["cost_alternative"]
    dearer = spend["p_higher"] is not None and spend["p_higher"] <= policy.alpha
    return tests["quality"]["conclusion"] in ("not_worse", "better") and not dearer


def evaluate_candidate(
    by_task: ByTask,
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy | None = None,
    rows: Sequence[ResultRow] | None = None,
    look_alphas: dict[str, float] | None = None,
    generation: int = 0,
) -> Decision:
    """Decide promote / keep_incumbent / insufficient_evidence for one candidate arm.

    ``by_task`` is ``aggregate_by_task`` output; ``rows`` are the raw rows behind it (for the
    paired per-run statistics, the tests, the sandbox check and the check that every row ran the
    same Claude Code version and model). ``policy.rule`` picks the rule: ``noise_aware``
    (default; needs rows) or ``upstream``. Both report the same tests (``tests``: design, cost,
    quality) and per-task checks, whatever they decide on. ``generation`` (from 0) sets the share of
    alpha the tests spend (``generation_alpha``). Rows that hold one (task, arm, run) twice are refused.
    """
    policy = policy if policy is not None else resolve_policy(None)
    if rows is not None:
        check_unique_rows(rows)
    if policy.rule != "noise_aware" and look_alphas is not None:
        raise GateInputError("sequential looks need gate.rule noise_aware (the upstream rule has no alpha to spend)")
    pair = _pair_evidence(by_task, incumbent_arm=incumbent_arm, candidate_arm=candidate_arm, policy=policy, rows=rows)
    if policy.rule == "upstream":
        return _upstream_decision(pair, model=model, policy=policy, rows=rows, generation=generation)
    decision, _ = _noise_aware_decision(
        pair, model=model, policy=policy, rows=rows, look_alphas=look_alphas, generation=generation
    )
    return decision


# ─── Promotion document ─────────────────────────────────────────────────────


def _utc_text(moment: datetime) -> str:
    return utc_timestamp(moment)


def promotion_document(
    rows: Sequence[ResultRow],
    *,
    pairs: list[tuple[str, str]],
    policy: GatePolicy | None,
    binding: dict[str, Any],
    run_status: str,
    generated_at: datetime,
    design: dict[str, Any] | None = None,
    cut_short: dict[str, str] | None = None,
    generation: int = 0,
) -> PromotionDocument:
    """The ``promotion/v1`` document: one decision per (incumbent, candidate) pair, bound to its evidence.

    With a sequential ``design`` (``run_design``) every decision replays its pair's looks over
    the rows (``sequential_decision``) and carries ``looks`` and ``sequential``; a pair named in
    ``cut_short`` (candidate arm → why, e.g. the budget) whose next look could not run is
    insufficient_evidence with that reason.

    ``binding`` supplies exactly the fields in ``BINDING_FIELDS``; its
    ``required_candidate_arms`` must list the candidates of ``pairs`` in order. An aborted run
    forces every decision to insufficient_evidence. ``generated_at`` must be timezone-aware;
    the evidence expires ``max_age_days`` later. ``generation`` (from 0) is the generation the rows are of:
    it sets the alpha its tests spend, and ``error_control`` states what that means for the experiment.
    """
    policy = policy if policy is not None else resolve_policy(None)
    _check_promotion_inputs(pairs, binding, run_status, generated_at)
    check_unique_rows(rows)
    by_task = aggregate_by_task(rows)
    decisions = []
    for incumbent_arm, candidate_arm in pairs:
        pair: dict[str, Any] = {
            "incumbent_arm": incumbent_arm,
            "candidate_arm": candidate_arm,
            "model": binding["benchmark_model"],
            "policy": policy,
            "generation": generation,
        }
        if design is not None and design["kind"] == "sequential":
            decision = sequential_decision(rows, **pair, design=design)
            why = (cut_short or {}).get(candidate_arm)
            if decision["sequential"]["status"] == "continue" and why is not None:
                decision["sequential"]["cut_short"] = True
                decision["reasons"].insert(0, f"cut short: {why}")
        else:
            decision = evaluate_candidate(by_task, **pair, rows=rows)
        if run_status != "complete":
            decision["decision"] = "insufficient_evidence"
            decision["reasons"] = [ABORTED_REASON, *decision["reasons"]]
        pins = plugin_pins(rows, incumbent_arm, candidate_arm)
        if pins["incumbent"] or pins["candidate"]:
            decision["plugins"] = pins
        decisions.append(decision)

    generated = generated_at.astimezone(UTC)
    check_policy_design(policy, design)
    return {
        "schema": PROMOTION_SCHEMA,
        "run_status": run_status,
        "generated_at": _utc_text(generated),
        "evidence_expires_at": _utc_text(generated + timedelta(days=policy.max_age_days)),
        "policy": {
            **policy.as_dict(),
            "metric_warning": metric_warning(policy.metric),
            "quality_rule": QUALITY_RULES[policy.rule],
        },
        "decisions": decisions,
        "agents": across_agents(decisions, rows, policy),
        "error_control": error_control(policy, generation),
        "benchmark_model": binding["benchmark_model"],
        "effort": binding["effort"],
        "proposer_model": binding["proposer_model"],
        "candidate_origin": binding["candidate_origin"],
        "candidate_overlay_digest": binding["candidate_overlay_digest"],
        "required_candidate_arms": binding["required_candidate_arms"],
        "selected_tasks": binding["selected_tasks"],
        "target_base_digests": binding["target_base_digests"],
    }


# ─── Across agents: one candidate, a pair per agent CLI ─────────────────────


def check_policy_design(policy: GatePolicy, design: dict[str, Any] | None) -> None:
    """Refuse ``across_agents: any`` with a sequential runs design (``run_design``): its Holm correction across
    agents is not combined with the looks' alpha spending (``all`` needs no correction, so it runs with both)."""
    if design is not None and design["kind"] == "sequential" and policy.across_agents == "any":
        raise GateInputError(
            "gate.across_agents any needs a fixed runs design: the Holm correction across agents is not combined "
            "with a sequential design's looks (use across_agents all, which needs no correction, or a fixed runs)"
        )


def pair_agent(rows: Sequence[ResultRow], incumbent_arm: str, candidate_arm: str) -> str | None:
    """The agent CLI a pair's valid rows ran (None when none recorded one, or they ran several: such a pair is
    insufficient_evidence by the comparable-rows guard)."""
    seen = {
        cast("Mapping[str, str | None]", row).get("agent")
        for row in rows
        if row["arm"] in (incumbent_arm, candidate_arm) and is_valid(row)
    }
    return next(iter(seen)) if len(seen) == 1 else None


def _agent_name(agent: str | None) -> str:
    return agent or "an unrecorded agent"


def _promoted_on_resolution(decision: Decision, policy: GatePolicy) -> bool:
    """Whether a promoting pair promoted on its resolution route (credibly better, spend within the margin)."""
    tests = decision["tests"]
    return tests["quality"]["conclusion"] == "better" and _resolution_route(tests, policy)[0]


def across_agents(decisions: Sequence[Decision], rows: Sequence[ResultRow], policy: GatePolicy) -> dict[str, Any]:
    """The candidate's verdict across the agent CLIs its pairs ran (``policy.across_agents``), one verdict per
    pair (the usual setup: one evolution arm per agent).

    ``all`` (default): promote only when every pair promotes on its own tests, each at the generation's alpha —
    an intersection-union test, so a candidate no agent finds better is promoted at most alpha of the time
    without any correction; a pair that keeps the incumbent or lacks evidence keeps the candidate out.

    ``any``: every pair's no-worse guards must hold (its per-task checks, the resolution shown within the margin,
    the total spend not credibly higher; a pair without evidence gives insufficient_evidence), and at least one
    pair's promotion claim must survive Holm's correction across the pairs: the cost route's p-values at the cost
    test's alpha, the resolution route's at its own. A pair whose guards hold but whose claim does not is
    ``no_worse``. Pure: the decisions (and their rows, for each pair's agent) in, the block out.
    """
    rule = policy.across_agents
    pvalue = [decision["tests"]["cost"]["p_value"] for decision in decisions]
    adjusted = gate_stats.holm([1.0 if p is None else p for p in pvalue]) if rule == "any" else pvalue
    better = [decision["tests"]["quality"]["p_better"] for decision in decisions]
    better_adjusted = gate_stats.holm([1.0 if p is None else p for p in better]) if rule == "any" else better
    verdicts = []
    for index, decision in enumerate(decisions):
        agent = pair_agent(rows, decision["incumbent_arm"], decision["candidate_arm"])
        cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
        no_worse = bool(decision.get("no_worse", False))
        verdict, reason = decision["decision"], decision["reasons"][0] if decision["reasons"] else ""
        if rule == "any" and verdict != "insufficient_evidence":
            if not no_worse:
                verdict = "keep_incumbent"
            elif verdict == "promote":
                resolution = _promoted_on_resolution(decision, policy)
                p_adj, level = (
                    (better_adjusted[index], quality["better_alpha"])
                    if resolution
                    else (adjusted[index], cost["alpha"])
                )
                if p_adj is None or p_adj > level:
                    verdict = "no_worse"
                    reason = (
                        f"its {'resolution' if resolution else 'cost'} claim does not survive Holm's correction across "
                        f"{len(decisions)} agents (adjusted p {_p_text(p_adj)} > alpha {level:g}); no worse"
                    )
            else:
                verdict = "no_worse"
                shown = quality["conclusion"].replace("_", " ")
                reason = f"no worse (resolution {shown}, spend not credibly higher); {reason}"
        verdicts.append(
            {
                "agent": agent,
                "incumbent_arm": decision["incumbent_arm"],
                "candidate_arm": decision["candidate_arm"],
                "pair_decision": decision["decision"],
                "verdict": verdict,
                "no_worse": no_worse,
                "cost_estimate_pct": cost["estimate_pct"],
                "cost_p_value": cost["p_value"],
                "cost_p_adjusted": adjusted[index],
                "reason": reason,
            }
        )
    outcome, why = _across_outcome(rule, verdicts)
    return {
        "rule": rule,
        "decision": outcome,
        "reason": why,
        "statement": _across_statement(rule, len(decisions)),
        "verdicts": verdicts,
    }


def _across_outcome(rule: str, verdicts: list[dict[str, Any]]) -> tuple[str, str]:
    """The candidate's decision over the agents' verdicts, and the sentence why."""

    def named(kind: str) -> str:
        return ", ".join(f"{_agent_name(v['agent'])} ({v['candidate_arm']})" for v in verdicts if v["verdict"] == kind)

    if not verdicts:
        return "insufficient_evidence", "no candidate pair was decided"
    kinds = {verdict["verdict"] for verdict in verdicts}
    if "insufficient_evidence" in kinds and (rule == "any" or "keep_incumbent" not in kinds):
        return "insufficient_evidence", f"not enough evidence on {named('insufficient_evidence')}"
    if "keep_incumbent" in kinds:
        if rule == "all":
            return "keep_incumbent", f"every agent must promote (across_agents all); kept by {named('keep_incumbent')}"
        return "keep_incumbent", f"a no-worse guard failed on {named('keep_incumbent')} (across_agents any)"
    if rule == "all":
        return "promote", f"every agent promotes: {named('promote')}"
    if "promote" in kinds:
        tail = f"; no worse on {named('no_worse')}" if "no_worse" in kinds else ""
        return "promote", f"better after Holm's correction across agents on {named('promote')}{tail}"
    return (
        "keep_incumbent",
        f"no agent's claim survives Holm's correction across agents; no worse on {named('no_worse')}",
    )


def _across_statement(rule: str, pairs: int) -> str:
    if rule == "all":
        return (
            f"across_agents all: each of the {pairs} agent pair(s) is tested at the generation's alpha and all must "
            "promote (an intersection-union test: promoting a candidate that is no better on some agent has "
            "probability at most alpha, with no correction across agents)"
        )
    return (
        f"across_agents any: at least one of the {pairs} agent pair(s) must show its saving (or better resolution) "
        "after Holm's correction across the pairs, and every pair its no-worse guards (per-task checks, resolution "
        "within the margin, total spend not credibly higher): promoting a candidate no agent finds better has "
        "probability at most alpha"
    )


def _check_promotion_inputs(
    pairs: list[tuple[str, str]], binding: dict[str, Any], run_status: str, generated_at: datetime
) -> None:
    """Raise ValueError unless the run status, the clock and the binding fit a promotion document."""
    if run_status not in RUN_STATUSES:
        raise GateInputError(f"run_status must be one of {', '.join(RUN_STATUSES)} (got {run_status!r})")
    if generated_at.tzinfo is None or generated_at.utcoffset() is None:
        raise GateInputError("generated_at must be timezone-aware")
    missing = [name for name in BINDING_FIELDS if name not in binding]
    unknown = sorted(set(binding) - set(BINDING_FIELDS))
    if missing or unknown:
        raise GateInputError(f"promotion binding fields: missing {missing or 'none'}, unknown {unknown or 'none'}")
    candidates = [candidate for _, candidate in pairs]
    if list(binding["required_candidate_arms"]) != candidates:
        raise GateInputError(
            f"required_candidate_arms {binding['required_candidate_arms']} do not match the paired candidates "
            f"{candidates}"
        )
    if len(set(candidates)) != len(candidates):
        raise GateInputError(f"duplicate candidate arm in pairs: {candidates}")


def plugin_pins(rows: Sequence[ResultRow], incumbent_arm: str, candidate_arm: str) -> dict[str, list[dict[str, Any]]]:
    """The Claude Code plugins each arm of a pair loaded (name, version, digest), as its rows recorded them:
    a decision names the exact plugin bytes it was made on."""

    def pins(arm: str) -> list[dict[str, Any]]:
        seen = {
            (plugin["name"], plugin["digest"]): plugin
            for row in rows
            if row["arm"] == arm
            for plugin in row.get("plugins") or []
        }
        return [seen[key] for key in sorted(seen)]

    return {"incumbent": pins(incumbent_arm), "candidate": pins(candidate_arm)}


def summarize_gate(promotion: Mapping[str, Any]) -> list[str]:
    """One line per decision — ``<candidate_arm>: <decision> — <first three reasons>`` — for proposers and logs, and
    with several decisions a last line on the verdict across agents (what decides whether the generation promotes)."""
    lines = [
        f"{decision.get('candidate_arm')}: {decision.get('decision')} — {'; '.join(decision.get('reasons', [])[:3])}"
        for decision in promotion.get("decisions", [])
    ]
    agents = promotion.get("agents")
    if isinstance(agents, dict) and len(lines) > 1:
        lines.append(f"across agents ({agents.get('rule')}): {agents.get('decision')} — {agents.get('reason')}")
    return lines


# ─── Sequential designs: interim looks with alpha spending ──────────────────

SEQUENTIAL_DEFAULTS: dict[str, Any] = {"spending": "pocock", "futility_power": 0.1}
SEQUENTIAL_METHOD = (
    "group-sequential: the cost test, the resolution route and the non-inferiority tests each have efficacy "
    "boundaries from Lan-DeMets alpha spending over the looks' information fractions (runs so far / max runs), "
    "exact for nested batches of a normal statistic; futility stops (conditional power against the last look's "
    "boundaries) are non-binding"
)


def run_design(runs: Any) -> dict[str, Any]:
    """The ``runs`` setting as a design: a plain integer is the fixed design (one look), a mapping
    ``{min, max, step}`` (optionally ``spending``, ``futility_power``) the sequential one.

    Returns ``kind`` (fixed/sequential), ``looks`` (runs per (task, arm) at each look, the last
    being ``max``), ``max`` and, for a sequential design, ``spending`` and ``futility_power``.
    Raises ValueError naming the bad field.
    """
    if isinstance(runs, int) and not isinstance(runs, bool):
        if runs < 1:
            raise GateInputError(f"runs must be >= 1 (got {runs})")
        return {"kind": "fixed", "looks": [runs], "max": runs}
    if not isinstance(runs, dict):
        raise GateInputError(f"runs must be an integer or a mapping {{min, max, step}} (got {runs!r})")
    unknown = sorted(set(runs) - {"min", "max", "step", "spending", "futility_power"})
    if unknown:
        raise GateInputError(
            f"runs: unknown key(s) {', '.join(unknown)} (allowed: min, max, step, spending, futility_power)"
        )
    for key in ("min", "max", "step"):
        value = runs.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise GateInputError(f"runs.{key} must be an integer >= 1 (got {value!r})")
    low, high, step = runs["min"], runs["max"], runs["step"]
    if low < 2:
        raise GateInputError(
            f"runs.min must be at least 2: a look needs two runs per cell to measure noise (got {low})"
        )
    if high < low:
        raise GateInputError(f"runs.max ({high}) must be at least runs.min ({low})")
    spending = runs.get("spending", SEQUENTIAL_DEFAULTS["spending"])
    if spending not in gate_stats.SPENDING_FUNCTIONS:
        raise GateInputError(
            f"runs.spending must be one of {', '.join(gate_stats.SPENDING_FUNCTIONS)} (got {spending!r})"
        )
    futility = runs.get("futility_power", SEQUENTIAL_DEFAULTS["futility_power"])
    if not is_number(futility) or not 0 <= futility < 1:
        raise GateInputError(f"runs.futility_power must be a number in [0, 1) (got {futility!r})")
    looks = list(range(low, high + 1, step))
    if looks[-1] != high:
        looks.append(high)
    return {"kind": "sequential", "looks": looks, "max": high, "spending": spending, "futility_power": float(futility)}


def look_alphas(design: dict[str, Any], alpha: float) -> list[dict[str, Any]]:
    """Per look: the nominal alphas of the cost test, the resolution route and the non-inferiority test.

    Each is a group-sequential boundary over the looks (``stats.sequential_boundaries``) at its share of
    ``alpha`` (the generation's): the cost route 0.9, the resolution route 0.1, non-inferiority all of it."""
    fractions = [runs / design["max"] for runs in design["looks"]]
    spending = design["spending"]
    bounds = gate_stats.sequential_boundaries(fractions, alpha=alpha * (1 - RESOLUTION_ROUTE_SHARE), spending=spending)
    resolution = gate_stats.sequential_boundaries(fractions, alpha=alpha * RESOLUTION_ROUTE_SHARE, spending=spending)
    quality = gate_stats.sequential_boundaries(fractions, alpha=alpha, spending=spending)
    return [
        {
            "runs": runs,
            "fraction": bound["fraction"],
            "boundary_z": bound["z"],
            "spent_alpha": bound["spent_alpha"],
            "cost": bound["nominal_alpha"],
            "resolution": res["nominal_alpha"],
            "quality": qual["nominal_alpha"],
            "quality_z": qual["z"],
        }
        for runs, bound, res, qual in zip(design["looks"], bounds, resolution, quality, strict=True)
    ]


def _first_runs(rows: Sequence[ResultRow], arms: tuple[str, str], runs: int) -> list[ResultRow]:
    """Each (task, arm) of the pair's first ``runs`` rows in run order, whatever number its runs start from."""
    by_cell: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row["arm"] in arms:
            by_cell.setdefault((row["task"], row["arm"]), []).append(row)
    kept = {id(row) for cell in by_cell.values() for row in sorted(cell, key=lambda row: row["run"])[:runs]}
    return [row for row in rows if id(row) in kept]


def _complete_for(rows: Sequence[ResultRow], tasks: list[str], arms: tuple[str, str], runs: int) -> bool:
    """Every (task, arm) of the pair has at least ``runs`` rows."""
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        counts[(row["task"], row["arm"])] = counts.get((row["task"], row["arm"]), 0) + 1
    return all(counts.get((task, arm), 0) >= runs for task in tasks for arm in arms)


def _final_boundaries(decision: Decision, design: dict[str, Any], alphas: list[dict[str, Any]]) -> tuple[float, float]:
    """The last look's boundaries the conditional powers aim at: the cost test's in t units at its degrees of freedom
    (they do not change with runs: K - 1 tasks), and the non-inferiority test's on the z scale."""
    last = alphas[-1]
    df = decision["tests"]["cost"]["df"]
    cost = float(gate_stats.stats.t.isf(last["cost"], df)) if df and last["cost"] > 0 else math.inf
    quality = last["quality_z"] if last["quality_z"] is not None else math.inf
    return cost, float(quality)


def _futility(
    decision: Decision, design: dict[str, Any], runs: int, policy: GatePolicy, alphas: list[dict[str, Any]]
) -> tuple[str | None, dict[str, float | None]]:
    """Why continuing cannot plausibly promote (or None), and the conditional powers behind it."""
    cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
    powers: dict[str, float | None] = {"cost": None, "quality": None}
    alpha = policy.alpha
    if quality["p_worse"] is not None and quality["p_worse"] <= alpha:
        return f"resolution credibly worse (one-sided p {_p_text(quality['p_worse'])} <= alpha {alpha:g})", powers
    cost_boundary, quality_boundary = _final_boundaries(decision, design, alphas)
    scale = math.sqrt(runs / design["max"])
    if cost["estimate_pct"] is not None and cost["se_log"]:
        estimate = -math.log(1 - cost["estimate_pct"] / 100)
        # The last look needs the estimate past both its boundary (at the final standard error) and the floor.
        threshold = max(cost_boundary * cost["se_log"] * scale, -math.log(1 - policy.min_improvement_pct / 100))
        powers["cost"] = round(
            gate_stats.conditional_power(
                estimate, cost["se_log"], runs=runs, max_runs=design["max"], threshold=threshold
            ),
            4,
        )
    if quality["difference_pct"] is not None and quality["ci_high_pct"] is not None:
        difference = quality["difference_pct"] / 100
        z_quality = float(gate_stats.stats.norm.isf(quality["alpha"])) if quality["alpha"] > 0 else math.inf
        se = (quality["ci_high_pct"] - quality["difference_pct"]) / 100 / z_quality if math.isfinite(z_quality) else 0.0
        if se > 0:
            threshold = -policy.quality_margin_pct / 100 + quality_boundary * se * scale
            powers["quality"] = round(
                gate_stats.conditional_power(difference, se, runs=runs, max_runs=design["max"], threshold=threshold), 4
            )
    floor = design["futility_power"]
    if powers["cost"] is not None and powers["cost"] < floor and quality["conclusion"] != "better":
        return (
            f"futility: if the current trend holds, {design['max']} runs per cell reach the cost boundary and the "
            f"{policy.min_improvement_pct:.1f}% floor with probability {powers['cost']:.2f} (< {floor:g})"
        ), powers
    if powers["quality"] is not None and powers["quality"] < floor:
        return (
            f"futility: if the current trend holds, {design['max']} runs per cell show the resolution within "
            f"{policy.quality_margin_pct:.0f} points with probability {powers['quality']:.2f} (< {floor:g})"
        ), powers
    return None, powers


def _look_decision(
    decision: Decision,
    *,
    guard_regression: bool,
    final: bool,
    design: dict[str, Any],
    runs: int,
    policy: GatePolicy,
    alphas: list[dict[str, Any]],
) -> tuple[str, str | None, dict[str, float | None]]:
    """promote / keep_incumbent / insufficient_evidence / continue for one look's decision.

    An interim look that would promote while a gated task's resolution fell (the candidate resolved fewer of its
    runs there, not yet enough to keep the incumbent) continues instead: the next batch's runs on that task are
    what tell a drop from noise, and the last look decides with them."""
    if not final and decision["decision"] == "promote":
        fallen = _fallen_tasks(decision)
        if fallen:
            return (
                "continue",
                f"resolution fell on {', '.join(fallen)}: more runs before a promotion",
                {
                    "cost": None,
                    "quality": None,
                },
            )
    if final or decision["decision"] in ("promote", "insufficient_evidence"):
        return decision["decision"], None, {"cost": None, "quality": None}
    cost, quality = decision["tests"]["cost"], decision["tests"]["quality"]
    # A task regression or a skipped skill keeps the incumbent at once; so does a cost test that
    # already rules out the floor.
    if guard_regression or cost["conclusion"] == "not_computable":
        return decision["decision"], None, {"cost": None, "quality": None}
    if cost["conclusion"] == "not_cheaper" and quality["conclusion"] != "better":
        return "keep_incumbent", None, {"cost": None, "quality": None}
    why, powers = _futility(decision, design, runs, policy, alphas)
    if why:
        return "keep_incumbent", why, powers
    return "continue", None, powers


def _fallen_tasks(decision: Decision) -> list[str]:
    """Gated tasks the candidate resolved a smaller share of its runs than the incumbent."""
    fallen = []
    for task in decision["tasks"]:
        if task["gated"]:
            (x_inc, n_inc), (x_cand, n_cand) = (
                map(int, task[key].split("/")) for key in ("incumbent_resolved", "candidate_resolved")
            )
            if n_inc and n_cand and x_cand * n_inc < x_inc * n_cand:
                fallen.append(task["task"])
    return fallen


def _look_record(
    index: int,
    look: dict[str, Any],
    decision: Decision,
    verdict: str,
    why: str | None,
    powers: dict[str, float | None],
) -> dict[str, Any]:
    """The schema's record of one look: the cost statistic against its boundary, and what the look said."""
    cost = decision["tests"]["cost"]
    statistic = boundary_t = None
    if cost["estimate_pct"] is not None and cost["se_log"]:
        statistic = round(-math.log(1 - cost["estimate_pct"] / 100) / cost["se_log"], 4)
    if cost["df"] and look["cost"] > 0:
        # The cost test has K - 1 degrees of freedom: the boundary it must reach in t units.
        boundary_t = round(float(gate_stats.stats.t.isf(look["cost"], cost["df"])), 4)
    return {
        "look": index + 1,
        "runs": look["runs"],
        "fraction": look["fraction"],
        "statistic": statistic,
        "p_value": cost["p_value"],
        "boundary_z": look["boundary_z"],
        "boundary_t": boundary_t,
        "nominal_alpha": look["cost"],
        "spent_alpha": look["spent_alpha"],
        "quality_alpha": look["quality"],
        "estimate_pct": cost["estimate_pct"],
        "conditional_power": powers,
        "decision": verdict,
        "reason": why or (decision["reasons"][0] if decision["reasons"] else ""),
    }


def _replay_looks(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy,
    design: dict[str, Any],
    alphas: list[dict[str, Any]],
    generation: int = 0,
) -> tuple[Decision | None, list[dict[str, Any]], int | None]:
    """Take the looks in order until one decides or its rows are not all there yet.

    Returns the last look's decision (None when no look could be taken), the look records and,
    when the replay stopped for missing rows, the runs per cell the next look needs."""
    arms = (incumbent_arm, candidate_arm)
    tasks = sorted({row["task"] for row in rows if row["arm"] in arms})
    looks: list[dict[str, Any]] = []
    decision: Decision | None = None
    for index, look in enumerate(alphas):
        runs = look["runs"]
        if not _complete_for(rows, tasks, arms, runs) or not tasks:
            return decision, looks, runs
        subset = _first_runs(rows, arms, runs)
        # The looks' run counts are the design; the boundaries, not min_runs, control the error.
        look_policy = dataclasses.replace(policy, min_runs=min(policy.min_runs, runs))
        pair = _pair_evidence(
            aggregate_by_task(subset),
            incumbent_arm=incumbent_arm,
            candidate_arm=candidate_arm,
            policy=look_policy,
            rows=subset,
        )
        decision, guard_regression = _noise_aware_decision(
            pair,
            model=model,
            policy=look_policy,
            rows=subset,
            look_alphas={key: look[key] for key in ("cost", "resolution", "quality")},
            generation=generation,
        )
        final = index == len(alphas) - 1
        verdict, why, powers = _look_decision(
            decision,
            guard_regression=guard_regression,
            final=final,
            design=design,
            runs=runs,
            policy=policy,
            alphas=alphas,
        )
        looks.append(_look_record(index, look, decision, verdict, why, powers))
        if verdict != "continue":
            decision["decision"] = verdict
            if why:
                decision["reasons"].insert(0, why)
            break
    return decision, looks, None


def sequential_decision(
    rows: Sequence[ResultRow],
    *,
    incumbent_arm: str,
    candidate_arm: str,
    model: str | None,
    policy: GatePolicy | None,
    design: dict[str, Any],
    generation: int = 0,
) -> Decision:
    """Replay the looks of a sequential design over one pair's rows (runs so far, in run order).

    Look k uses each (task, arm)'s first ``design["looks"][k]`` runs in run order (so run numbers may start
    anywhere); the looks spend the generation's alpha (``generation_alpha``). The first look that decides
    (promote, keep_incumbent, insufficient_evidence) ends the pair; a look whose rows are not
    all there yet ends the replay with ``continue`` and ``next_runs`` (the runs per cell the
    next look needs). The result is the last look's decision (the schema's decision fields)
    plus ``looks`` (one record per look taken) and ``sequential`` (design, status, next_runs).
    Pure and deterministic, so the pipeline's looks and an offline regrade agree.
    """
    policy = policy if policy is not None else resolve_policy(None)
    if policy.rule != "noise_aware":
        raise GateInputError("a sequential runs design needs gate.rule: noise_aware")
    check_unique_rows(rows)
    alphas = look_alphas(design, generation_alpha(policy, generation))
    decision, looks, next_runs = _replay_looks(
        rows,
        incumbent_arm=incumbent_arm,
        candidate_arm=candidate_arm,
        model=model,
        policy=policy,
        design=design,
        alphas=alphas,
        generation=generation,
    )
    status = "decided" if next_runs is None else "continue"
    if decision is None:
        decision = _pending_decision(
            incumbent_arm, candidate_arm, policy, next_runs or design["looks"][0], generation=generation
        )
    elif status == "continue":
        decision["decision"] = "insufficient_evidence"
        decision["reasons"].insert(
            0, f"look {len(looks)} says continue: {next_runs} runs per (task, arm) are needed for the next look"
        )
    else:
        if looks[-1]["decision"] != decision["decision"]:
            looks[-1]["decision"] = decision["decision"]
        decision["reasons"].insert(
            0,
            f"sequential design: decided at look {len(looks)} of {len(alphas)} after {looks[-1]['runs']} runs per "
            "(task, arm)",
        )
    decision["looks"] = looks
    decision["sequential"] = {
        "method": SEQUENTIAL_METHOD,
        "looks_planned": design["looks"],
        "spending": design["spending"],
        "futility_power": design["futility_power"],
        "status": status,
        "next_runs": next_runs,
        "cut_short": False,
    }
    return decision


def _pending_decision(
    incumbent_arm: str, candidate_arm: str, policy: GatePolicy, runs: int, *, generation: int
) -> Decision:
    empty = candidate_tests(
        [],
        incumbent_arm=incumbent_arm,
        candidate_arm=candidate_arm,
        gated_tasks=[],
        paired_tasks=[],
        policy=policy,
        generation=generation,
    )
    return {
        "incumbent_arm": incumbent_arm,
        "candidate_arm": candidate_arm,
        "rule": policy.rule,
        "decision": "insufficient_evidence",
        "metric": policy.metric,
        "metric_warning": metric_warning(policy.metric),
        "median_improvement_pct": None,
        "resolution_margin": 0,
        "reasons": [f"no look taken yet: the first look needs {runs} runs per (task, arm)"],
        "gated_tasks": [],
        "ungated_tasks": [],
        "tasks": [],
        "statistics": {"sign_test": sign_test([]), "bootstrap": bootstrap_median_ci([])},
        "tests": {key: empty[key] for key in TEST_KEYS},
    }
