"""Typed records: the documents that cross module boundaries, one TypedDict per schema object.

Each type names exactly the fields of its JSON Schema in `schemas/` (a unit test keeps the two in
step), so a producer that misspells a field or a consumer that reads one that does not exist is a
type error, not a silent `None`. The schemas stay the contract on disk; these types are the same
contract inside the library.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# The token counts a session reports and a row carries: the one list of them, for every module.
USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")

ErrorKind = Literal[
    "session-error",
    "cancelled",
    "skill-not-invoked",
    "evidence-unverified",
    "plan-evidence-invalid",
    "implementation-evidence-invalid",
    "verify-failed",
    "oracle-failed",
    "no-work-produced",
    "workspace-oversized",
    "workspace-tampered",
    "disk-quota-exceeded",
    "memory-limit-exceeded",
    "process-limit-exceeded",
    "output-limit-exceeded",
    "session-timeout",
    "session-cap-reached",
    "model-unpriced",
    "budget-exhausted",
    "infra-error",
    "cleanup-failure",
    "review-invalid",
    "review-edited-code",
    "review-incorrect",
    "trigger-missed",
    "trigger-false",
]

# Task classes scored against hidden review labels rather than an oracle (`skillbench.grading.review`).
REVIEW_CLASSES = ("review-defect", "review-clean")


# The task class of a labelled prompt: which skill (or none) the agent should invoke for it.
TRIGGER_CLASS = "trigger"


class TriggerMetrics(TypedDict):
    """A trigger cell's outcome against its label (`schemas/result-row.schema.json`, `trigger`)."""

    # The skill the prompt should make the agent invoke; None: no skill should be invoked.
    expected: str | None
    near_miss: bool
    # The skills the session's stream proves it invoked (sorted).
    invoked: list[str]
    # Invoked skills other than the expected one.
    false_triggers: list[str]
    # Whether exactly the expected skill (or, for None, no skill) was invoked.
    correct: bool


class ReviewMetrics(TypedDict):
    """A review cell's score against its hidden labels (`schemas/result-row.schema.json`, `review`)."""

    case: Literal["defect", "clean"]
    # Why the review output broke the contract (a `grading.review.REVIEW_ERROR_KINDS` kind), None when it kept it.
    output_error: str | None
    verdict: str | None
    expected_verdict: str
    findings: int
    defects: int
    blocking_defects: int
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


class TranscriptArtifact(TypedDict):
    path: str
    sha256: str
    bytes: int
    source: str


# The model providers and sandbox backends a config may name (the config schema's enums; rows record them).
Provider = Literal["scripted", "anthropic"]
SandboxBackend = Literal["bwrap", "none"]

ResultRow = TypedDict(
    "ResultRow",
    {
        "schema": Literal["result-row/v1"],
        "task": str,
        "class": str,
        "run": int,
        "arm": str,
        "ok": bool,
        "resolved": bool,
        "authored_tests_passed": bool,
        "authored_test_output": str,
        "verify_output": str,
        "oracle_passed": bool,
        "oracle_output": str,
        "error_kind": ErrorKind | None,
        "error_detail": str | dict[str, Any] | None,
        "evidence_diagnostics": list[str],
        "input_tokens": int,
        "cache_creation_input_tokens": int,
        "cache_read_input_tokens": int,
        "output_tokens": int,
        "cost_usd": float | None,
        "cli_cost_usd": float | None,
        "cost_check": dict[str, Any] | None,
        "duration_s": float,
        "num_turns": int,
        "session_ids": list[str],
        "transcript_artifacts": list[TranscriptArtifact],
        "transcript_missing": bool,
        "skill_invoked": bool | None,
        "tool_use_counts": dict[str, int],
        "mcp_tool_uses": NotRequired[dict[str, int]],
        "mcp_semantic_errors": NotRequired[dict[str, int]],
        "plugins": NotRequired[list[dict[str, Any]]],
        "review": NotRequired[ReviewMetrics | None],
        "trigger": NotRequired[TriggerMetrics | None],
        "plan_produced": bool,
        "diff_files": int,
        "diff_insertions": int,
        "diff_deletions": int,
        "model": str,
        "effort": str | None,
        "provider": Provider,
        "agent": str,
        "cli_version": str | None,
        "offered_skills": list[str] | None,
        "task_ref": str,
        "task_base_sha": str,
        "sanitized_task_sha": str,
        "variant_head_sha": str | None,
        "task_prompt_digest": str,
        "skill_digest": str | None,
        "candidate_overlay_digest": str | None,
        "oracle_digest": str,
        "oracle_command_digest": str,
        "oracle_manifest_digest": str,
        "sandbox_backend": SandboxBackend,
        "recorded_at": str,
        # A spend cap stopped a session: a censored observation, counted (`skillbench.execution.cells`).
        "censored": NotRequired[bool],
        # The batch the cell ran in, its time block and start position, and its start: set when rows are collected
        # (`skillbench.experiment.schedule`); absent in rows collected before batches were recorded.
        "batch": NotRequired[str],
        "block": NotRequired[int | None],
        "position": NotRequired[int | None],
        "started_at": NotRequired[str],
    },
)
ResultRow.__doc__ = "One (task, arm, run) outcome: `schemas/result-row.schema.json`."


class SessionWindow(TypedDict):
    role: str
    started_at: str
    finished_at: str


class CellTiming(TypedDict):
    started_at: str
    finished_at: str
    wall_s: float
    sessions_s: float
    setup_s: float
    verify_s: float
    oracle_s: float
    overhead_s: float
    sessions: list[SessionWindow]


class CellRecord(TypedDict):
    """What `run_cell` writes: `schemas/cell-record.schema.json`."""

    schema: Literal["cell-record/v1"]
    row: ResultRow
    attempt: int
    timing: CellTiming


class ScheduledCell(TypedDict):
    """One cell of a batch in start order: its position, its block (one run of one task, every arm) and itself."""

    position: int
    block: int
    task: str
    arm: str
    run: int


class Schedule(TypedDict):
    """`gen<N>/schedule/look<k>.json`, the start order of one batch: `schemas/schedule.schema.json`."""

    schema: Literal["schedule/v1"]
    generation: int
    look: int
    batch: str
    seed: str
    method: str
    tasks: list[str]
    runs: list[int]
    pairs: list[list[str]]
    cells: list[ScheduledCell]


class OracleFileBinding(TypedDict):
    target: str
    sha256: str
    size: int


TaskBinding = TypedDict(
    "TaskBinding",
    {
        "schema": Literal["task-binding/v1"],
        "id": str,
        "class": str,
        "expensive": bool,
        "target": str,
        "ref": str,
        "resolved_sha": str,
        "sanitized_sha": str,
        "prompt_digest": str,
        "setup_digest": str,
        "verify_digest": str,
        "oracle_digest": str,
        "oracle_command_digest": str,
        "oracle_manifest_digest": str,
        "oracle_files": list[OracleFileBinding],
    },
)
TaskBinding.__doc__ = "One task bound to an immutable commit: `schemas/task-binding.schema.json`."


class TaskBindings(TypedDict):
    """Every selected task's binding in suite order: `schemas/task-bindings.schema.json`."""

    schema: Literal["task-bindings/v1"]
    suite: str
    tasks: list[TaskBinding]
    skipped_expensive: list[str]


class OverlayFile(TypedDict):
    path: str
    sha256: str
    bytes: int


class ContentFlag(TypedDict):
    """Text a candidate adds that touches tests, secrets, the network or the shell (`schemas/overlay.schema.json`
    `$defs/flag`; `skillbench.experiment.overlayreview`)."""

    file: str
    line: int
    category: str
    rule: str
    text: str


class ContentReviewRecord(TypedDict):
    """overlay.json's `content_review`: the rule set, the task tools it allowed, the flags, the diff's digest."""

    rules: str
    task_tools: list[str]
    flags: list[ContentFlag]
    diff_sha256: str


class OverlayFields(TypedDict):
    schema: Literal["overlay/v1"]
    generation: int
    candidate_origin: Literal["manual-initial-overlay", "model-proposer"]
    source: str
    proposer_model: str | None
    digest: str
    files: list[OverlayFile]
    touched_skills: list[str]
    required_candidate_arms: list[str]
    pairs: list[list[str]]
    targets: list[str]
    target_base_digests: dict[str, str]


class OverlayDocument(OverlayFields, total=False):
    """A frozen candidate overlay: `schemas/overlay.schema.json` (``content_review`` since issue 38; a document
    frozen before it has none)."""

    content_review: ContentReviewRecord


class ProposerSession(TypedDict):
    """`gen<N>/proposer-session.json`: `schemas/proposer-session.schema.json`."""

    schema: Literal["proposer-session/v1"]
    generation: int
    session: dict[str, Any]
    # The gateway's ledger of the session (`schemas/ledger.schema.json`, `$defs/session`).
    ledger: dict[str, Any]


class Progress(TypedDict):
    """`progress.json`: `schemas/progress.schema.json`."""

    schema: Literal["progress/v1"]
    experiment: str
    state: Literal["running", "waiting_for_look", "interrupted", "finished"]
    cells_done: int
    cells_planned: int
    cells_running: int
    cells_interrupted: int
    generations: int
    spend_usd: float
    unmeasured_costs: int
    median_cell_s: float | None
    session_cap: int | None
    eta_s: float | None
    started_at: str
    updated_at: str


class RunConfigFile(TypedDict):
    given: str
    path: str
    sha256: str
    source: Literal["snakefile", "command line"]


class RunProfile(TypedDict):
    profile: str | None
    workflow_profile: str | None


class RunSkillbench(TypedDict):
    version: str | None
    commit: str | None


class RunProcess(TypedDict):
    pid: int
    host: str
    start_ticks: str | None


class RunPriceTable(TypedDict):
    """`run.json`'s `price_table`: the pinned community table `agent.prices.source` names."""

    source: str
    path: str
    sha256: str


class _RunRecordOptional(TypedDict, total=False):
    """What run.json has carried since runs could price from a community table (older ones lack it)."""

    price_table: RunPriceTable | None


class RunRecord(_RunRecordOptional):
    """`run.json`: `schemas/run.schema.json`."""

    schema: Literal["run/v1"]
    experiment: str
    started_at: str
    workdir: str
    snakefile: str
    config_files: list[RunConfigFile]
    config_overrides: dict[str, Any]
    config: dict[str, Any]
    command: list[str]
    workflow_options: list[str]
    profile: RunProfile
    skillbench: RunSkillbench
    process: RunProcess


class EvidenceSources(TypedDict):
    results_root: str | None
    rows: str | None
    promotion: str | None
    prior_proposal: str | None


class EvidenceLimits(TypedDict):
    max_rows: int
    max_transcripts_per_row: int
    max_learnings: int
    verify_tail_chars: int
    max_file_bytes: int
    max_bundle_bytes: int


class EvidenceCounts(TypedDict):
    rows_read: int
    rows_excluded: int
    rows_selected: int
    rows_staged: int
    patches: int
    transcripts: int
    learnings: int
    gate_decisions: int


class EvidenceFile(TypedDict):
    name: str
    origin: Literal["harness", "agent"]
    bytes: int
    sha256: str
    truncated: bool


class EvidenceManifest(TypedDict):
    """`manifest.json` of an evidence bundle: `schemas/evidence-manifest.schema.json`. The stager writes it, the
    proposer's prompt is built from it."""

    schema: str
    generation: int | None
    sources: EvidenceSources
    limits: EvidenceLimits
    counts: EvidenceCounts
    files: list[EvidenceFile]
    total_bytes: int
    trimmed_rows: int
    prior_proposal_staged: bool
    prior_proposal_dropped: bool


# The gate's documents (promotion/v1).
TaskFacts = TypedDict(
    "TaskFacts",
    {
        "task": str,
        "class": str,
        "incumbent_resolved": str,
        "candidate_resolved": str,
        "incumbent_excluded_runs": int,
        "candidate_excluded_runs": int,
        "incumbent_metric": float | None,
        "candidate_metric": float | None,
        "improvement_pct": float | None,
        "gated": bool,
        "quality_floor_enforced": bool,
        "skill_attributable_failure": bool,
        "candidate_quality_floor_met": bool,
        "paired": dict[str, Any] | None,
    },
)
TaskFacts.__doc__ = "What a task row says before the tests ran (every field of the schema's task_row but checks)."


class TaskRow(TaskFacts):
    """One task's evidence in a decision: the task_row of `schemas/promotion.schema.json`."""

    checks: dict[str, Any]


class DecisionFields(TypedDict):
    incumbent_arm: str
    candidate_arm: str
    rule: str
    decision: str
    metric: str
    metric_warning: str | None
    median_improvement_pct: float | None
    resolution_margin: int
    reasons: list[str]
    gated_tasks: list[str]
    ungated_tasks: list[str]
    tasks: list[TaskRow]
    tests: dict[str, Any]
    statistics: dict[str, Any]


# total=False rather than NotRequired: with postponed annotations a class body's NotRequired is
# invisible at run time (Python 3.11), and the schema test reads the required keys at run time.
class Decision(DecisionFields, total=False):
    """The gate's verdict on one candidate arm: the decision of `schemas/promotion.schema.json`.

    ``looks`` and ``sequential`` come with a sequential design, ``plugins`` when either arm loaded one; ``no_worse``
    says whether every no-worse guard held (what ``across_agents: any`` asks of every agent's pair); ``concurrency``
    which rows the pair compared (the batches both arms ran in: the candidate beside its anchor)."""

    concurrency: dict[str, Any]
    looks: list[dict[str, Any]]
    plugins: dict[str, list[dict[str, Any]]]
    sequential: dict[str, Any]
    no_worse: bool


class ContentReviewBlock(TypedDict):
    """promotion.json's `content_review`: the candidate's flags, the categories the config accepted and those it
    did not, and whether a promotion was held back for them."""

    flags: list[ContentFlag]
    accepted: list[str]
    unaccepted: list[str]
    held: bool


class PromotionFields(TypedDict):
    schema: str
    run_status: str
    generated_at: str
    evidence_expires_at: str
    policy: dict[str, Any]
    decisions: list[Decision]
    agents: dict[str, Any]
    error_control: dict[str, Any]
    benchmark_model: str | None
    effort: str | None
    proposer_model: str | None
    candidate_origin: str
    candidate_overlay_digest: str
    required_candidate_arms: list[str]
    selected_tasks: list[dict[str, Any]]
    target_base_digests: dict[str, str]


class PostHocMark(TypedDict):
    """A regrade's `post_hoc`: the run's promotion.json it departs from, what changed, and what the run decided."""

    of: str
    changed: dict[str, dict[str, Any]]
    run_decisions: list[dict[str, str]]


class PromotionDocument(PromotionFields, total=False):
    """promotion.json: `schemas/promotion.schema.json` (``content_review`` when the overlay record has one;
    ``post_hoc`` on a regrade under another policy than the run's, `reporting.posthoc`)."""

    content_review: ContentReviewBlock
    post_hoc: PostHocMark


# Error kinds a row is excluded from evidence for (the harness's failures and interruptions), and the ones
# the outage breaker counts as systemic. Every other kind is the agent's counted outcome.
EXCLUDED_ERROR_KINDS = frozenset(
    {"session-error", "infra-error", "evidence-unverified", "cleanup-failure", "cancelled", "budget-exhausted"}
)


SYSTEMIC_ERROR_KINDS = frozenset({"session-error", "infra-error", "cleanup-failure"})


# The limits a run can run into by what its agent did (a kernel limit of its cell, its capture, its clock, its disk,
# its spend cap, the price table): counted outcomes of the agent like any failed check, never excluded or retried.
LIMIT_ERROR_KINDS = frozenset(
    {
        "memory-limit-exceeded",
        "process-limit-exceeded",
        "output-limit-exceeded",
        "disk-quota-exceeded",
        "session-timeout",
        "session-cap-reached",
        "model-unpriced",
    }
)
