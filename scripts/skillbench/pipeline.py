"""Rule steps: the I/O edge between Snakemake shims and the library.

Each function reads its inputs (validating them), calls the library, and writes its outputs
atomically after validating them. Shims in `scripts/<rule>.py` call exactly one of these with
plain values taken from the rule's params, inputs, outputs, wildcards, log and resources — never
the workflow's config: a rule's params are its job's whole interface (docs/internals.md). Where
a library module reads config-shaped sections, the rule passes exactly those sections as a
`settings` param. The parse-time check of an initial overlay (`check_initial_overlay`) lives
here too, beside the rule step whose checks it runs early.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, cast

from . import artifacts, cells, layout
from .environment import api_key, load_script, resolve_cli, secrets
from .errors import SkillbenchError
from .process import ORPHANED, exclusive_writer
from .progress import BatchBudget
from .records import Decision, TaskBinding
from .tasks import bind_task as bind_task_files


def bind_task(*, suite: str, task: dict[str, Any], binding_out: str, template_out: str, oracle_out: str) -> None:
    """`task` is the definition the workflow validated when it was parsed."""
    binding = bind_task_files(task, suite=Path(suite), template_dir=Path(template_out), oracle_dir=Path(oracle_out))
    artifacts.write_artifact(Path(binding_out), binding, "task-binding")


def merge_bindings(*, suite: str, binding_paths: list[str], skipped_expensive: list[str], out: str) -> None:
    """Bindings in the order given (suite order), with the expensive tasks the selection left out."""
    document = {
        "schema": "task-bindings/v1",
        "suite": suite,
        "tasks": [artifacts.read_artifact(Path(path), "task-binding") for path in binding_paths],
        "skipped_expensive": skipped_expensive,
    }
    artifacts.write_artifact(Path(out), document, "task-bindings")


# Agent settings that steer how a session job runs (retries, the outage streak, the heartbeat), not what it
# measures: they reach a job as resources, so changing them reruns nothing (docs/internals.md).
RUN_CONTROL_KEYS = ("attempts", "outage_streak", "heartbeat_s")


def with_run_control(settings: dict[str, Any], run_control: dict[str, Any]) -> dict[str, Any]:
    """The job's settings with the run-control values put back into its agent section."""
    return {**settings, "agent": {**settings["agent"], **{key: run_control[key] for key in RUN_CONTROL_KEYS}}}


def run_cell(
    *,
    settings: dict[str, Any],
    run_control: dict[str, Any],
    task: dict[str, Any],
    arm: str,
    run: int,
    binding: str,
    template: str,
    oracle_snapshot: str,
    model_script: str | None,
    record_out: str,
    attempt: int,
    results_root: str,
    cli_version: str,
    overlay_json: str | None = None,
    log: TextIO | None = None,
) -> None:
    """`task` is the definition the workflow validated when it was parsed, `cli_version` the CLI's version it
    found then, `settings` the config sections a cell reads (the rule's params) and `run_control` how the job runs
    (its resources)."""
    settings = with_run_control(settings, run_control)
    overlay_digest = artifacts.read_artifact(Path(overlay_json), "overlay")["digest"] if overlay_json else None
    task_binding = artifacts.read_artifact(Path(binding), "task-binding")
    run_dir = Path(record_out).parent
    context = cells.CellContext(
        config=settings,
        template=Path(template),
        oracle_snapshot=Path(oracle_snapshot),
        run_dir=run_dir,
        claude_bin=resolve_cli(settings["agent"]["cli"]),
        cli_version=cli_version,
        api_key=api_key(settings["model"]["api_key_env"]),
        model_script=load_script(model_script),
        skills_source=Path(settings["skills"]["root"]),
        overlay=layout.frozen_overlay_beside(overlay_json) if overlay_json else None,
        overlay_digest=overlay_digest,
        log=log,
    )
    # One writer per cell: an orphaned job of a crashed snakemake may still be tearing this cell down.
    with exclusive_writer(run_dir.parent / f".{run_dir.name}.lock", what=f"cell {run_dir}"):
        record = cells.run_one_cell(
            cells.Cell(task, cast(TaskBinding, task_binding), arm, run),
            context,
            attempt=attempt,
            attempts=settings["agent"]["attempts"],
            breaker_state=Path(layout.breaker(results_root)),
        )
        artifacts.validate(record["row"], "result-row", source=f"{record_out} (row)")
        if ORPHANED.is_set():
            raise cells.CellCancelled(
                f"cell {run_dir}: the snakemake that started it is gone; no record is written, "
                "so the next run does this cell again"
            )
        artifacts.write_artifact(Path(record_out), record, "cell-record")


def collect_results(*, records: list[str], bindings: str, arm_order: list[str], out: str) -> None:
    from .report import canonical_order

    task_order = [task["id"] for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]]
    rows = []
    for path in records:
        record = artifacts.read_artifact(Path(path), "cell-record")
        rows.append(artifacts.validate(record["row"], "result-row", source=f"{path} (row)"))
    artifacts.write_jsonl(Path(out), canonical_order(rows, task_order, arm_order), "result-row")


def render_report(
    *,
    results: str,
    bindings: str,
    model: dict[str, Any],
    runs: Any,
    tools: list[str],
    baseline_arm: str,
    arm_order: list[str],
    out: str,
    promotion: str | None = None,
    title: str = "skillbench benchmark",
) -> None:
    """report.md of a sweep or a generation; `model` is the config's model section, `runs` its design."""
    from . import report

    rows = artifacts.read_jsonl(Path(results), "result-row")
    bound = artifacts.read_artifact(Path(bindings), "task-bindings")
    promotion_doc = artifacts.read_artifact(Path(promotion), "promotion") if promotion else None
    provenance = {
        "model": model["name"],
        "provider": model["provider"],
        "effort": model["effort"] or "CLI default",
        "selected_tasks": [task["id"] for task in bound["tasks"]],
        "skipped_tasks": bound["skipped_expensive"],
        "runs": report.runs_text(runs),
        "run_status": "complete",
        "tools": tools,
    }
    text = report.render_report(
        rows,
        title=title,
        task_order=provenance["selected_tasks"],
        arm_order=arm_order,
        provenance=provenance,
        promotion=promotion_doc,
        baseline_arm=baseline_arm,
    )
    artifacts.atomic_write_text(Path(out), text + report.oracle_log_section(oracle_log_links(rows, Path(out))))


def oracle_log_links(rows: list[dict[str, Any]], report_path: Path) -> list[tuple[dict[str, Any], str]]:
    """(row, path relative to the report) of each existing owner-only oracle log of a run whose oracle failed.

    The report sits in `sweep/` or `gen<N>/` of the results root; the logs beside the records."""
    from .arms import is_candidate
    from .cells import ORACLE_LOG
    from .report import oracle_failed

    folder = report_path.parent
    results_root, generation = folder.parent, layout.generation_of_folder(folder.name)
    links = []
    for row in rows:
        if not oracle_failed(row):
            continue
        cell = layout.row_cell_dir(
            results_root, row["task"], row["arm"], row["run"], generation, candidate=is_candidate(row["arm"])
        )
        log = Path(cell) / ORACLE_LOG
        if log.is_file():
            links.append((row, os.path.relpath(log, folder)))
    return links


def bound_oracles(bindings: str, oracle_dirs: list[str]) -> list[tuple[str, bytes]]:
    """Every bound hidden oracle file as (label, bytes), re-checked against its binding's digests.

    `oracle_dirs` are the tasks' snapshot folders (`…/tasks/<task>/oracle`), one per bound task."""
    from . import oracle
    from .overlay import OverlayError

    folders = {layout.task_of_oracle_snapshot(folder): Path(folder) for folder in oracle_dirs}
    found: list[tuple[str, bytes]] = []
    for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]:
        if task["id"] not in folders:
            raise OverlayError(f"{bindings}: task {task['id']} is bound but its oracle snapshot was not given")
        try:
            files = oracle.load_snapshot(folders[task["id"]], task)
        except (OSError, oracle.OracleError) as exc:
            raise OverlayError(f"oracle snapshot of task {task['id']} is unreadable: {exc}") from exc
        found += [(f"{target} of task {task['id']}", payload) for target, payload in files]
    return found


def suite_oracles(suite: str) -> list[tuple[str, bytes]]:
    """Every oracle file the task suite declares (selected or not), as (label, bytes), read from its sources."""
    from . import oracle
    from .tasks import load_suite

    found: list[tuple[str, bytes]] = []
    for task in load_suite(suite):
        files = oracle.capture_oracle(Path(suite).parent, task["oracle"])
        found += [(f"{target} of task {task['id']}", payload) for target, payload in files]
    return found


def _checked_overlay(
    source: str,
    skills: dict[str, Any],
    oracles: list[tuple[str, bytes]],
    paired_arms: Callable[[set[str]], list[str]],
    repository: str,
) -> tuple[Any, set[str], list[str], list[str], dict[str, Any]]:
    """(files, touched skills, paired candidate arms, promotion targets, their committed digests) of an overlay
    that passed every check a candidate must pass before any cell: no oracle content, the skill format, a real
    change, the experiment's paired arms (`paired_arms` of the touched skills), bound targets."""
    from . import overlay, skillformat

    files = overlay.overlay_files(Path(source), skills["evolvable"])
    overlay.refuse_oracle_content(files, oracles, source)
    skillformat.check_overlay(Path(source))
    overlay.require_change(files, Path(skills["root"]))
    touched = overlay.touched_skills(files)
    candidates = paired_arms(touched)
    targets = overlay.promotion_targets(files, skills_root=skills["root"], mirrors=skills["mirrors"])
    bases = overlay.committed_target_digests(Path(repository), targets)
    return files, touched, candidates, targets, bases


def freeze_overlay(
    *,
    generation: int,
    source: str,
    frozen_out: str,
    overlay_out: str,
    candidate_origin: str,
    proposer_model: str | None,
    bindings: str,
    oracle_dirs: list[str],
    skills: dict[str, Any],
    candidate_arms: list[str],
    arm_skills: dict[str, list[str]],
    repository: str = ".",
) -> None:
    """Validate and freeze a candidate overlay, derive its paired arms, bind its promotion targets.

    `skills` is the config's skills section (root, evolvable, mirrors), `candidate_arms` the experiment's and
    `arm_skills` the skills of each selected arm. An overlay that carries any bound hidden oracle's content is
    refused before any cell runs."""
    from . import overlay, skillformat
    from .arms import check_candidate_arms, incumbent_of

    try:
        files, touched, candidates, targets, bases = _checked_overlay(
            source,
            skills,
            bound_oracles(bindings, oracle_dirs),
            lambda touched: check_candidate_arms(candidate_arms, arm_skills, touched, source),
            repository,
        )
    except skillformat.SkillFormatError as exc:
        raise overlay.OverlayError(str(exc)) from exc
    digest = overlay.freeze(Path(source), Path(frozen_out), skills["evolvable"])
    document = {
        "schema": "overlay/v1",
        "generation": generation,
        "candidate_origin": candidate_origin,
        "source": source,
        "proposer_model": proposer_model,
        "digest": digest,
        "files": overlay.overlay_summary(files),
        "touched_skills": sorted(touched),
        "required_candidate_arms": candidates,
        "pairs": [[incumbent_of(arm), arm] for arm in candidates],
        "targets": targets,
        "target_base_digests": bases,
    }
    artifacts.write_artifact(Path(overlay_out), document, "overlay")


def check_initial_overlay(config: dict[str, Any], repository: str = ".") -> None:
    """Parse time: validate evolution.initial_overlay as freeze_overlay will, so a bad overlay costs no session."""
    from .arms import required_candidate_arms

    source = config["evolution"]["initial_overlay"]
    if not source or config["evolution"]["generations"] == 0:
        return
    _checked_overlay(
        source,
        config["skills"],
        suite_oracles(config["tasks"]["suite"]),
        lambda touched: required_candidate_arms(config, touched, source),
        repository,
    )


class HarnessHealthError(SkillbenchError, RuntimeError):
    """An incumbent arm resolved nothing on every task: the environment, not the skills, is broken."""


def summarize_run(
    *,
    experiment: str,
    generations_requested: int,
    arms: list[str],
    runs: Any,
    min_runs: int,
    results: list[str],
    promotions: list[str],
    overlays: list[str],
    summary_out: str,
    markdown_out: str,
) -> dict[str, Any]:
    """summary.json and summary.md for the whole run; then fail loudly if an incumbent arm is broken.

    `arms` are the incumbent arms, `runs` the design and `min_runs` the gate's (they shape the advice)."""
    from . import report
    from .aggregate import aggregate_by_task, broken_incumbent_arms
    from .configcheck import next_step
    from .gate import summarize_gate
    from .promotion import is_promoted

    generations = []
    for promotion_path, overlay_path in zip(promotions, overlays, strict=True):
        promotion = artifacts.read_artifact(Path(promotion_path), "promotion")
        overlay_doc = artifacts.read_artifact(Path(overlay_path), "overlay")
        generations.append(
            report.generation_summary(
                promotion, overlay_doc, promoted=is_promoted(promotion), gate_summary=summarize_gate(promotion)
            )
        )
    outcome, promoted = report.run_outcome(generations_requested, generations)
    last_rows = artifacts.read_jsonl(Path(results[-1]), "result-row")
    broken = broken_incumbent_arms(aggregate_by_task(last_rows), arms)
    advice = None
    if outcome == "not_promoted":
        last_reasons = [reason for d in generations[-1]["decisions"] for reason in d["reasons"]] if generations else []
        design = {"gate": {"min_runs": min_runs}, "runs": runs}
        advice = next_step(design, len({row["task"] for row in last_rows}), last_reasons)
    summary = {
        "schema": "summary/v1",
        "experiment": experiment,
        "generations_requested": generations_requested,
        "generations": generations,
        "outcome": outcome,
        "promoted_generation": promoted,
        "broken_incumbent_arms": broken,
        "next_step": advice,
    }
    artifacts.write_artifact(Path(summary_out), summary, "summary")
    artifacts.atomic_write_text(Path(markdown_out), report.render_summary(summary))
    if broken:
        raise HarnessHealthError(
            f"[harness-health] incumbent arm(s) {', '.join(broken)} resolved no run on any task; the report and "
            "promotion evidence were written, but a harness that cannot solve anything measures nothing: check "
            "the task suite, the sandbox and the model before trusting these results"
        )
    return summary


def evidence_source(seed: str | None, generation: int, results_root: str) -> dict[str, Any]:
    """Where generation N's evidence comes from: generation N-1, or the seed folder (evolution.seed_results) for
    generation 0."""
    if generation > 0:
        previous = Path(layout.generation_dir(results_root, generation - 1))
        return {"results_root": Path(results_root), "folder": previous, "generation": generation - 1}
    if not seed:
        return {"results_root": None, "folder": None, "generation": None}
    folder = Path(seed)
    return {"results_root": folder.parent, "folder": folder, "generation": layout.generation_of_folder(folder.name)}


def stage_evidence(
    *,
    generation: int,
    results_root: str,
    seed: str | None,
    learnings: str | None,
    evolvable: list[str],
    api_key_env: str,
    out: str,
) -> None:
    """The evidence bundle of generation `generation`'s proposer (`seed`, `learnings` and `evolvable` as the
    config's evolution.seed_results, evolution.learnings and skills.evolvable)."""
    from . import evidence

    source = evidence_source(seed, generation, results_root)
    folder = source["folder"]
    queue = evidence.read_learnings(Path(learnings) if learnings else None, evolvable)

    def existing(name: str) -> Path | None:
        if folder is None:
            return None
        path = folder / name
        return path if path.is_file() else None

    evidence.stage_evidence(
        destination=Path(out),
        results_root=source["results_root"],
        rows_path=existing(layout.ROWS),
        generation=source["generation"],
        promotion_path=existing(layout.PROMOTION),
        prior_proposal=existing(layout.PROPOSAL),
        learnings=queue,
        secrets=secrets(api_key_env),
    )


def propose_overlay(
    *,
    settings: dict[str, Any],
    run_control: dict[str, Any],
    generation: int,
    evidence_dir: str,
    model_script: str | None,
    overlay_out: str,
    proposal_out: str,
    session_out: str,
    prompt_out: str,
    bindings: str,
    oracle_dirs: list[str],
    repository: str = ".",
    log: TextIO | None = None,
) -> None:
    """One proposer session (`settings`: the config sections the proposer reads) → the generation's candidate
    folder `overlay_out`, proposal.md, the session record and the prompt it was given."""
    from .overlay import OverlayError
    from .proposer import ProposerError, run_proposer

    settings = with_run_control(settings, run_control)

    try:
        oracles = bound_oracles(bindings, oracle_dirs)
    except OverlayError as exc:
        raise ProposerError(str(exc)) from exc
    record = run_proposer(
        config=settings,
        generation=generation,
        evidence=Path(evidence_dir),
        repository=Path(repository),
        claude_bin=resolve_cli(settings["agent"]["cli"]),
        model_script=load_script(model_script),
        api_key=api_key(settings["model"]["api_key_env"]),
        overlay_out=Path(overlay_out),
        proposal_out=Path(proposal_out),
        prompt_out=Path(prompt_out),
        oracles=oracles,
        log=log,
    )
    document = {"schema": "proposer-session/v1", "generation": generation, "session": record}
    artifacts.write_artifact(Path(session_out), document, "proposer-session", mode=0o600)


def gate_look(
    *,
    arm_sessions: dict[str, int],
    records: list[str],
    pairs: list[tuple[str, str]],
    policy: dict[str, Any],
    design: Any,
    budget: dict[str, Any],
    model: str,
    generation: int,
    look: int,
    results_root: str,
    out: str,
) -> dict[str, Any]:
    """One interim look: replay every pair's looks over its rows so far; a pair that continues gets its next
    batch unless that batch's sessions (or projected cost) would pass a budget cap, then it is cut short.

    The next batch's price: each missing cell costs its arm's sessions (`arm_sessions`), and the mean recorded
    cost per finished cell so far. Pairs are admitted in config order, so the first pairs keep their batches."""
    from . import gate

    run_design = gate.run_design(design)
    rows = [artifacts.read_artifact(Path(path), "cell-record")["row"] for path in records]
    planner = BatchBudget.from_disk(results_root, arm_sessions, budget, present=rows)
    entries = []
    for incumbent, candidate in pairs:
        decision = gate.sequential_decision(
            rows,
            incumbent_arm=incumbent,
            candidate_arm=candidate,
            model=model,
            policy=policy,
            design=run_design,
            generation=generation,
        )
        entries.append(_look_entry(decision, incumbent, candidate, run_design, planner))
    document = {
        "schema": "look/v1",
        "generation": generation,
        "look": look,
        "looks_planned": run_design["looks"],
        "pairs": entries,
        "spend": planner.spend,
        "budget": {"max_sessions": budget.get("max_sessions"), "max_usd": budget.get("max_usd")},
    }
    artifacts.write_artifact(Path(out), document, "look")
    for entry in entries:
        print(
            f"{layout.generation_name(generation)} look {look}: {entry['candidate_arm']} {entry['status']} after "
            f"{entry['runs']} runs ({entry['decision']}): {entry['reason']}"
        )
    return document


def _look_entry(
    decision: Decision, incumbent: str, candidate: str, run_design: dict[str, Any], planner: BatchBudget
) -> dict[str, Any]:
    """A pair's entry of the look document: its status, and the next batch if the budget admits it."""
    looks = decision["looks"]
    runs = looks[-1]["runs"] if looks else run_design["looks"][0]
    status, next_runs = decision["sequential"]["status"], decision["sequential"]["next_runs"]
    reason = looks[-1]["reason"] if looks else decision["reasons"][0]
    if status == "continue":
        over = planner.admit((incumbent, candidate), runs, next_runs)
        if over:
            status, next_runs = "cut_short", None
            reason = (
                f"cut short at look {len(looks)} after {runs} runs per (task, arm): the next batch would "
                f"pass {' and '.join(over)}"
            )
    return {
        "incumbent_arm": incumbent,
        "candidate_arm": candidate,
        "status": status,
        "decision": looks[-1]["decision"] if looks else "continue",
        "runs": runs,
        "next_runs": next_runs,
        "reason": reason,
    }


def check_task(
    *,
    settings: dict[str, Any],
    api_key_env: str,
    task: dict[str, Any],
    suite: str,
    binding: str,
    template: str,
    oracle_snapshot: str,
    out: str,
) -> dict[str, Any]:
    """The task check before any session: write check.json (0600: it holds oracle output) or raise naming why.

    `settings` holds the config sections the check reads (agent timeouts, sandbox)."""
    from . import taskcheck

    task_binding = cast(TaskBinding, artifacts.read_artifact(Path(binding), "task-binding"))
    document = taskcheck.check_task(
        task,
        task_binding,
        config=settings,
        template=Path(template),
        oracle_snapshot=Path(oracle_snapshot),
        solution=taskcheck.solution_bytes(task, Path(suite), task_binding),
        secrets=secrets(api_key_env),
    )
    artifacts.validate(document, "task-check", source=out)
    print(document["summary"])
    if not document["ok"]:
        raise taskcheck.TaskCheckError(
            "\n".join(document["problems"]) + "\nNo session has run. Fix the task in the suite (or its oracle or "
            "solution); `skillbench check-tasks` checks the suite without starting a run."
        )
    artifacts.write_artifact(Path(out), document, "task-check", mode=0o600)
    return document
