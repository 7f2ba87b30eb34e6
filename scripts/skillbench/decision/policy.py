"""The promotion policy: one typed record (`GatePolicy`) of the config's `gate` section plus the evidence lifetime,
its validation (`resolve_policy`), the names it chooses between, and the alpha it lets a generation spend.

Defaults live in the config schema only (`schemas/config.schema.json`, `properties.gate`); the one key that is no
config key, how long a promotion's evidence stays valid (`max_age_days`), has its default here
(`POLICY_KEYS_NOT_IN_CONFIG`). A unit test holds every field to the schema's key, type and default. A policy is
built once at a caller's edge (`resolve_policy` of a config section, a CLI's flags, a stored document's policy),
and everything below it takes the record; `as_dict()` is what a promotion document records.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from skillbench.base.artifacts import load_schema
from skillbench.base.errors import SkillbenchError

__all__ = [
    "ACROSS_AGENTS",
    "GENERATION_SPENDING",
    "OBJECTIVES",
    "POLICY_KEYS_NOT_IN_CONFIG",
    "PROMOTION_METRICS",
    "RECORDED_WHEN_SET",
    "RULES",
    "GateInputError",
    "GatePolicy",
    "error_control",
    "generation_alpha",
    "resolve_policy",
]

Rule = Literal["noise_aware", "upstream"]
# The metrics a decision can rank on (lower is better): the config's gate.metric and the promotion schema's metric
# list name these (tests/unit/test_gate.py keeps them equal).
Metric = Literal["output_tokens", "cost_usd", "duration_s", "num_turns"]
# What cheaper means: the suite's total spend or the per-task geometric mean (`stats.cost_test`).
Objective = Literal["total_spend", "per_task"]
# How an experiment's alpha is spent over its generations: ``halving`` gives generation g alpha/2^(g+1), so any
# number of generations together stays below alpha and extending a run never changes the share an earlier
# generation was gated at; ``none`` tests every generation at alpha (per-generation error only).
GenerationSpending = Literal["halving", "none"]
# How the pairs of a candidate that several agent CLIs run combine (``across_agents``): ``all`` promotes only when
# every pair (one per agent) promotes on its own test at the generation's alpha (an intersection-union test: the
# false-promotion rate stays <= alpha without a correction); ``any`` promotes when at least one pair's cheaper
# claim survives Holm's correction across the pairs and every pair's no-worse guards hold.
AcrossAgents = Literal["all", "any"]

RULES: tuple[Rule, ...] = typing.get_args(Rule)
PROMOTION_METRICS: tuple[Metric, ...] = typing.get_args(Metric)
OBJECTIVES: tuple[Objective, ...] = typing.get_args(Objective)
GENERATION_SPENDING: tuple[GenerationSpending, ...] = typing.get_args(GenerationSpending)
ACROSS_AGENTS: tuple[AcrossAgents, ...] = typing.get_args(AcrossAgents)

# How long a promotion's evidence stays valid is the gate's, not the experiment's, to choose: the one key of the
# policy the config has not, and its default (the one place it is stated).
POLICY_KEYS_NOT_IN_CONFIG = frozenset({"max_age_days"})
MAX_AGE_DAYS = 90
# Keys added after promotion/v1's policy record was fixed, which only review cases read: a document records them only
# when they are set away from their default, so the document of a policy that leaves them alone is the document it
# always was, and a document written before they existed still binds (`skillbench apply` checks every recorded key).
RECORDED_WHEN_SET = ("review_f1_margin", "trigger_margin_pct")


class GateInputError(SkillbenchError, ValueError):
    """A policy, a runs design or rows the gate cannot decide on; the message names the key or rows and the fix."""


@dataclass(frozen=True)
class GatePolicy:
    """`gate`: the decision rule, the metric and every threshold both rules check, and the evidence lifetime.

    Fields are in the order a promotion document has always recorded them (`as_dict`)."""

    SECTION: ClassVar[tuple[str, ...]] = ("gate",)

    rule: Rule
    metric: Metric
    min_runs: int
    min_improvement_pct: float
    max_task_regression_pct: float
    max_failed_task_regression_pct: float
    min_gated_task_ratio: float
    require_confidence: bool
    allow_unsandboxed: bool
    max_age_days: int
    alpha: float
    quality_margin_pct: float
    objective: Objective
    generation_spending: GenerationSpending
    resolution_cost_margin_pct: float | None
    across_agents: AcrossAgents
    # Review cases: how much lower the candidate's weighted F1 over the defect cases may be (0..1; docs/gate.md).
    review_f1_margin: float
    trigger_margin_pct: float

    def as_dict(self) -> dict[str, Any]:
        """The policy as a promotion document, a look or the CLI records it: every key in field order, those of
        ``RECORDED_WHEN_SET`` only when set away from their default."""
        recorded = dataclasses.asdict(self)
        defaults = dict(_defaults())
        for key in RECORDED_WHEN_SET:
            if recorded[key] == defaults[key]:
                del recorded[key]
        return recorded


POLICY_KEYS = tuple(item.name for item in dataclasses.fields(GatePolicy))


@functools.cache
def _defaults() -> tuple[tuple[str, Any], ...]:
    """Every policy key's default in field order: the config schema's gate defaults, and ``MAX_AGE_DAYS``."""
    section = load_schema("config")["properties"]["gate"]["properties"]
    stated = {key: spec["default"] for key, spec in section.items()} | {"max_age_days": MAX_AGE_DAYS}
    return tuple((key, stated[key]) for key in POLICY_KEYS)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# Keys that are a share (at most 1) or a number of points (at most 100), from 0.
BOUNDED_KEYS = (
    ("min_gated_task_ratio", 1),
    ("quality_margin_pct", 100),
    ("review_f1_margin", 1),
    ("trigger_margin_pct", 100),
)


def resolve_policy(policy: Mapping[str, Any] | None) -> GatePolicy:
    """The defaults overlaid with ``policy`` as a ``GatePolicy``; raises GateInputError naming any bad key or value."""
    merged = {**dict(_defaults()), **(policy or {})}
    unknown = sorted(set(merged) - set(POLICY_KEYS))
    if unknown:
        raise GateInputError(f"unknown promotion policy key(s): {', '.join(unknown)}")
    if merged["rule"] not in RULES:
        raise GateInputError(f"unsupported promotion rule {merged['rule']!r}: choose one of {', '.join(RULES)}")
    if merged.get("across_agents") == "any" and merged["rule"] != "noise_aware":
        raise GateInputError(
            "promotion policy across_agents any needs rule noise_aware: the Holm correction across agents works on "
            "the cost tests' p-values, which the upstream rule does not decide on"
        )
    if merged["metric"] not in PROMOTION_METRICS:
        raise GateInputError(
            f"unsupported promotion metric {merged['metric']!r}: choose one of {', '.join(PROMOTION_METRICS)}"
        )
    for key in ("min_runs", "max_age_days"):
        value = merged[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise GateInputError(f"promotion policy {key} must be an integer >= 1 (got {value!r})")
    for key in ("min_improvement_pct", "max_task_regression_pct", "max_failed_task_regression_pct"):
        if not is_number(merged[key]) or merged[key] < 0:
            raise GateInputError(f"promotion policy {key} must be a non-negative number (got {merged[key]!r})")
        merged[key] = float(merged[key])
    alpha = merged["alpha"]
    if not is_number(alpha) or not 0 < alpha < 0.5:
        raise GateInputError(f"promotion policy alpha must be a number between 0 and 0.5 (got {alpha!r})")
    merged["alpha"] = float(alpha)
    for key, high in BOUNDED_KEYS:
        if not is_number(merged[key]) or not 0 <= merged[key] <= high:
            raise GateInputError(f"promotion policy {key} must be within 0..{high} (got {merged[key]!r})")
        merged[key] = float(merged[key])
    _check_decision_keys(merged)
    for key in ("require_confidence", "allow_unsandboxed"):
        if not isinstance(merged[key], bool):
            raise GateInputError(f"promotion policy {key} must be true or false (got {merged[key]!r})")
    return GatePolicy(**merged)


def _check_decision_keys(merged: dict[str, Any]) -> None:
    """The objective, the spending over generations and the resolution route's spend margin (normalised in place)."""
    for key, allowed in (
        ("objective", OBJECTIVES),
        ("generation_spending", GENERATION_SPENDING),
        ("across_agents", ACROSS_AGENTS),
    ):
        if merged[key] not in allowed:
            raise GateInputError(f"promotion policy {key} must be one of {', '.join(allowed)} (got {merged[key]!r})")
    cost_margin = merged["resolution_cost_margin_pct"]
    if cost_margin is not None:
        if not is_number(cost_margin) or cost_margin < 0:
            raise GateInputError(
                "promotion policy resolution_cost_margin_pct must be a non-negative number or null "
                f"(got {cost_margin!r})"
            )
        merged["resolution_cost_margin_pct"] = float(cost_margin)


def recorded_policy(recorded: Mapping[str, Any]) -> GatePolicy:
    """The policy a promotion document recorded (its ``policy``, without the texts the document adds beside it)."""
    return resolve_policy({key: value for key, value in recorded.items() if key in POLICY_KEYS})


def generation_alpha(policy: GatePolicy, generation: int) -> float:
    """The alpha generation ``generation`` (from 0) may spend: the policy's alpha, halved once more per
    generation under ``halving`` (alpha/2, alpha/4, ...: the experiment's total stays below alpha)."""
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise GateInputError(f"generation must be an integer >= 0 (got {generation!r})")
    if policy.generation_spending == "none":
        return policy.alpha
    return policy.alpha / 2 ** (generation + 1)


def error_control(policy: GatePolicy, generation: int) -> dict[str, Any]:
    """What a promotion document states about the experiment's error rate: the alpha this generation spent and
    the bound on promoting anything, over every generation, when no candidate is better."""
    share = generation_alpha(policy, generation)
    if policy.generation_spending == "none":
        statement = (
            f"every generation is tested at alpha {policy.alpha:g} (generation_spending none): an experiment of "
            f"G generations whose candidates are no better promotes one of them with probability up to G × "
            f"{policy.alpha:g}"
        )
    else:
        statement = (
            f"generation {generation} is tested at alpha {share:.4g} (alpha {policy.alpha:g} halved once per "
            f"generation): over all its generations and looks, an experiment whose candidates are no better "
            f"promotes one of them with probability at most {policy.alpha:g}"
        )
    return {
        "alpha": policy.alpha,
        "spending": policy.generation_spending,
        "generation": generation,
        "generation_alpha": round(share, 8),
        "statement": statement,
    }
