"""The evidence of one (incumbent, candidate) pair and the checks both rules run on it.

Owns which rows a pair compares (``concurrent_rows``: the candidate's and the incumbent's of the same batches, the
anchor that ran beside it), what the gate gathers from the rows and their aggregates (``pair_evidence``: a
``TaskEvidence`` per paired task, the tasks one arm lacks), the pair's guards (a named model, sandboxed runs,
comparable rows: one agent CLI, one CLI version, one model), the per-task run counts, the evidence base (enough gated
tasks), the ``Verdict`` a rule builds, and the decision record both rules write; also the metric a row is ranked on
and the refusal of duplicate rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from skillbench.base.records import Decision, ResultRow, TaskFacts, TaskRow
from skillbench.decision.aggregate import is_valid, percent_saved
from skillbench.decision.policy import GateInputError, GatePolicy
from skillbench.decision.stats import bootstrap_median_ci, sign_test

MAIN_LOOP_ONLY_METRICS = ("output_tokens", "num_turns")

MAIN_LOOP_ONLY_WARNING = (
    "WARNING: output_tokens and num_turns come from the main-loop session only; tokens and turns spent "
    "by subagents are not counted, so these metrics favour candidates that push work into subagents. "
    "Prefer cost_usd, which is the only CLI-reported figure that includes subagent spend, or recount "
    "usage from the captured transcripts, counting each message.id once."
)

# The failure that is the skill's own fault: the prompts under test never loaded it.
SKILL_ATTRIBUTABLE_ERROR_KIND = "skill-not-invoked"

# The tests a decision records (the schema's tests object).
TEST_KEYS = ("design", "cost", "cost_alternative", "quality")

# aggregate_by_task's output: task → arm → that (task, arm)'s summary.
ByTask = dict[str, dict[str, dict[str, Any]]]


def check_unique_rows(rows: Sequence[ResultRow]) -> None:
    """Refuse rows that hold one (task, arm, run) of one batch twice: naming each, since the gate cannot tell which to
    count. The same (task, arm, run) may come from two batches (the cache's cell and a generation's anchor)."""
    seen: dict[tuple[str, str, str, int], int] = {}
    for row in rows:
        key = (str(row.get("batch") or ""), row["task"], row["arm"], row["run"])
        seen[key] = seen.get(key, 0) + 1
    duplicated = sorted(key for key, count in seen.items() if count > 1)
    if duplicated:
        named = "; ".join(
            f"task {task}, arm {arm}, run {run} ({seen[(batch, task, arm, run)]} rows)"
            for batch, task, arm, run in duplicated
        )
        raise GateInputError(f"duplicate result rows: {named}; each (task, arm, run) must appear once in a batch")


NOT_CONCURRENT_NOTE = (
    "the rows record no batch (collected before skillbench ran an anchor beside each candidate): the incumbent's "
    "cells may have run hours or days before the candidate's, so a shift between them (the provider's prompt cache, "
    "its backend, its prices, the time of day) would read as a saving; every row was compared"
)


def concurrent_rows(
    rows: Sequence[ResultRow], incumbent_arm: str, candidate_arm: str
) -> tuple[list[ResultRow], dict[str, Any]]:
    """The rows a pair compares, and the decision's ``concurrency`` record.

    A pair compares the candidate with what ran beside it: of the two arms' rows, those of the batches both arms
    ran in (a generation's candidates and its anchor, `batch` gen<N> or gen<N>/look<k>). The incumbent's cells of
    other batches — the cache, another generation — are left out, and so are candidate rows no incumbent row ran
    beside; other arms' rows are kept as they are. Rows that record no batch (collected before batches were) are
    all compared, and the record says they were not concurrent."""
    arms = (incumbent_arm, candidate_arm)
    own = [row for row in rows if row["arm"] in arms]
    if any("batch" not in row for row in own):
        return list(rows), {
            "concurrent": False,
            "batches": [],
            "left_out": {"incumbent": 0, "candidate": 0},
            "window": None,
            "note": NOT_CONCURRENT_NOTE,
        }
    batches = {arm: {row["batch"] for row in own if row["arm"] == arm} for arm in arms}
    shared = sorted(batches[incumbent_arm] & batches[candidate_arm])
    kept = [row for row in rows if row["arm"] not in arms or row["batch"] in shared]
    left_out = {
        side: sum(1 for row in own if row["arm"] == arm and row["batch"] not in shared)
        for side, arm in zip(("incumbent", "candidate"), arms, strict=True)
    }
    starts = sorted(row["started_at"] for row in kept if row["arm"] in arms and "started_at" in row)
    if shared:
        note = f"the candidate was compared with the incumbent's cells that ran beside it (batch {', '.join(shared)})"
        if left_out["incumbent"]:
            note += f"; {left_out['incumbent']} incumbent row(s) of other batches were left out"
        if left_out["candidate"]:
            note += f"; {left_out['candidate']} candidate row(s) no incumbent cell ran beside were left out"
    else:
        note = (
            f"no incumbent cell ran beside the candidate (the candidate's batches: "
            f"{', '.join(sorted(batches[candidate_arm])) or 'none'}; the incumbent's: "
            f"{', '.join(sorted(batches[incumbent_arm])) or 'none'}); cells of another batch are never compared"
        )
    return kept, {
        "concurrent": bool(shared),
        "batches": shared,
        "left_out": left_out,
        "window": [starts[0], starts[-1]] if starts else None,
        "note": note,
    }


def metric_warning(metric: str) -> str | None:
    return MAIN_LOOP_ONLY_WARNING if metric in MAIN_LOOP_ONLY_METRICS else None


def metric_value(row: ResultRow, metric: str) -> float | None:
    """A row's value of one of the ``PROMOTION_METRICS``, as recorded (None: not measured)."""
    return cast("Mapping[str, float | None]", row).get(metric)


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


@dataclass
class Verdict:
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
class TaskEvidence:
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
class PairEvidence:
    """One (incumbent, candidate) pair: the tasks that ran both arms (sorted) and those that did not."""

    incumbent_arm: str
    candidate_arm: str
    tasks: dict[str, TaskEvidence]
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
) -> TaskEvidence:
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
    return TaskEvidence(
        row=row,
        valid=(n_inc, n_cand),
        excluded=(x_inc, x_cand),
        resolved=(r_inc, r_cand),
        skipped_skill=(skips_inc, skips_cand),
        run_unmeasured=m_inc is None or m_cand is None or any(value is None for value in values),
        run_non_positive=any(value is not None and value <= 0 for value in values),
    )


def pair_evidence(
    by_task: ByTask,
    *,
    incumbent_arm: str,
    candidate_arm: str,
    policy: GatePolicy,
    rows: Sequence[ResultRow] | None,
) -> PairEvidence:
    """Every task of ``by_task`` in sorted order: paired (both arms ran it) or not."""
    arms = (incumbent_arm, candidate_arm)
    rows_by_task = _rows_by_task(rows or [])
    tasks: dict[str, TaskEvidence] = {}
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
    return PairEvidence(incumbent_arm, candidate_arm, tasks, unpaired)


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


def pair_guards(
    pair: PairEvidence,
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


def task_run_counts(task: TaskEvidence, min_runs: int) -> list[str]:
    return run_count_reasons(task.row["task"], *task.valid, *task.excluded, min_runs)


def unmeasured_reason(task: str, metric: str) -> str:
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


def check_evidence_base(verdict: Verdict, pair: PairEvidence, policy: GatePolicy) -> None:
    thin, reasons = evidence_base(pair.gated_tasks(), pair.ungated_tasks(), policy.min_gated_task_ratio)
    verdict.insufficient = verdict.insufficient or thin
    verdict.reasons += reasons


def decision_record(
    pair: PairEvidence,
    *,
    rule: str,
    decision: str,
    verdict: Verdict,
    policy: GatePolicy,
    tests: dict[str, Any],
) -> Decision:
    """The schema's decision for one pair: the verdict, the improvement over gated tasks and the tests."""
    metric = policy.metric
    improvements = gated_improvements(pair)
    return {
        "incumbent_arm": pair.incumbent_arm,
        "candidate_arm": pair.candidate_arm,
        "rule": rule,
        "decision": decision,
        "metric": metric,
        "metric_warning": metric_warning(metric),
        "median_improvement_pct": median_improvement(improvements),
        "resolution_margin": resolution_margin(pair),
        "reasons": verdict.reasons,
        "gated_tasks": pair.gated_tasks(),
        "ungated_tasks": pair.ungated_tasks(),
        "tasks": pair.task_rows(tests["checks"]),
        "statistics": {"sign_test": sign_test(improvements), "bootstrap": bootstrap_median_ci(improvements)},
        "tests": {key: tests[key] for key in TEST_KEYS},
    }


def gated_improvements(pair: PairEvidence) -> list[float]:
    return [
        improvement
        for task in pair.tasks.values()
        if task.row["gated"] and (improvement := task.row["improvement_pct"]) is not None
    ]


def median_improvement(improvements: list[float]) -> float | None:
    return round(statistics.median(improvements), 1) if improvements else None


def resolution_margin(pair: PairEvidence) -> int:
    """Candidate resolved runs minus incumbent resolved runs over the paired tasks."""
    return sum(task.resolved[1] for task in pair.tasks.values()) - sum(task.resolved[0] for task in pair.tasks.values())
