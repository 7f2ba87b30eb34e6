"""Steps of workflow/rules/evolve.smk: the proposer's evidence, the proposer session, freezing a candidate
(with the checks `skillbench.preflight` also runs on an initial overlay at parse time), the run's summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from skillbench.base import artifacts, layout
from skillbench.base.errors import SkillbenchError
from skillbench.decision.aggregate import aggregate_by_task, broken_incumbent_arms
from skillbench.decision.gate import summarize_gate
from skillbench.decision.promotion import is_promoted
from skillbench.evolution import evidence
from skillbench.evolution.proposer import ProposerError, run_proposer
from skillbench.execution.agents import DEFAULT_ADAPTER
from skillbench.execution.environment import api_key, load_script, resolve_cli, secrets
from skillbench.experiment import overlay, overlayreview, skillformat
from skillbench.experiment.arms import check_candidate_arms, incumbent_of
from skillbench.experiment.configcheck import next_step
from skillbench.experiment.settings import proposer_settings
from skillbench.grading import oracle
from skillbench.preflight import checked_overlay
from skillbench.reporting import posthoc, report
from skillbench.steps.session import job_run_control, start_session_job


def bound_oracles(bindings: str, oracle_dirs: list[str]) -> list[tuple[str, bytes]]:
    """Every bound hidden oracle file as (label, bytes), re-checked against its binding's digests.

    `oracle_dirs` are the tasks' snapshot folders (`…/tasks/<task>/oracle`), one per bound task."""
    folders = {layout.task_of_oracle_snapshot(folder): Path(folder) for folder in oracle_dirs}
    found: list[tuple[str, bytes]] = []
    for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]:
        if task["id"] not in folders:
            raise overlay.OverlayError(f"{bindings}: task {task['id']} is bound but its oracle snapshot was not given")
        try:
            files = oracle.load_snapshot(folders[task["id"]], task)
        except (OSError, oracle.OracleError) as exc:
            raise overlay.OverlayError(f"oracle snapshot of task {task['id']} is unreadable: {exc}") from exc
        found += [(f"{target} of task {task['id']}", payload) for target, payload in files]
    return found


def freeze_overlay(
    *,
    generation: int,
    source: str,
    frozen_out: str,
    overlay_out: str,
    diff_out: str,
    candidate_origin: str,
    proposer_model: str | None,
    bindings: str,
    oracle_dirs: list[str],
    skills: dict[str, Any],
    candidate_arms: list[str],
    arm_skills: dict[str, list[str]],
    task_tools: list[str],
    repository: str = ".",
) -> None:
    """Validate and freeze a candidate overlay, derive its paired arms, bind its promotion targets, record its
    content review and write its whole diff against the incumbent (`diff_out`).

    `skills` is the config's skills section (root, evolvable, mirrors), `candidate_arms` the experiment's,
    `arm_skills` the skills of each selected arm and `task_tools` the programs the tasks' own commands start. An
    overlay that carries any bound hidden oracle's content, or content its review refuses, is refused before any
    cell runs; its flags are recorded for the gate."""
    try:
        checked = checked_overlay(
            source,
            skills,
            bound_oracles(bindings, oracle_dirs),
            lambda touched: check_candidate_arms(candidate_arms, arm_skills, touched, source),
            repository,
            task_tools,
        )
    except skillformat.SkillFormatError as exc:
        raise overlay.OverlayError(str(exc)) from exc
    diff = overlayreview.overlay_diff(checked.files, checked.incumbent, skills["root"])
    digest = overlay.freeze(Path(source), Path(frozen_out), skills["evolvable"])
    document = {
        "schema": "overlay/v1",
        "generation": generation,
        "candidate_origin": candidate_origin,
        "source": source,
        "proposer_model": proposer_model,
        "digest": digest,
        "files": overlay.overlay_summary(checked.files),
        "touched_skills": sorted(checked.touched),
        "required_candidate_arms": checked.candidates,
        "pairs": [[incumbent_of(arm), arm] for arm in checked.candidates],
        "targets": checked.targets,
        "target_base_digests": checked.bases,
        "content_review": overlayreview.review_record(checked.review, checked.task_tools, diff),
    }
    artifacts.atomic_write_text(Path(diff_out), diff)
    artifacts.write_artifact(Path(overlay_out), document, "overlay")
    for flag in checked.review.flags:
        print(f"flagged: {overlayreview.flag_line(flag)}")


class HarnessHealthError(SkillbenchError, RuntimeError):
    """An incumbent arm resolved nothing on every task: the environment, not the skills, is broken."""


def stopped_cells(results_root: Path) -> tuple[int, int]:
    """How many cells of the run the run's budget cut short (their records say `budget-exhausted`: excluded, run
    again once the budget is raised), and how many a session's own spend cap stopped (`censored`: counted as they
    are, never run again)."""
    rows = [artifacts.read_artifact(path, "cell-record")["row"] for path in layout.cell_records_on_disk(results_root)]
    return (
        sum(row["error_kind"] == "budget-exhausted" for row in rows),
        sum(bool(row.get("censored")) for row in rows),
    )


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
    generations = []
    held: list[tuple[int, list[str]]] = []
    last_decisions: list[dict[str, Any]] = []
    for promotion_path, overlay_path in zip(promotions, overlays, strict=True):
        promotion = artifacts.read_artifact(Path(promotion_path), "promotion")
        last_decisions = list(promotion["decisions"])
        review = promotion.get("content_review")
        if review and review["held"]:
            held.append((artifacts.read_artifact(Path(overlay_path), "overlay")["generation"], review["unaccepted"]))
        overlay_doc = artifacts.read_artifact(Path(overlay_path), "overlay")
        generations.append(
            report.generation_summary(
                promotion, overlay_doc, promoted=is_promoted(promotion), gate_summary=summarize_gate(promotion)
            )
        )
        # Regrades under another policy, kept beside the decision: a summary made again still lists them.
        post_hoc = posthoc.entries(Path(summary_out).parent, overlay_doc["generation"])
        if post_hoc:
            generations[-1]["post_hoc"] = post_hoc
    outcome, promoted = report.run_outcome(generations_requested, generations)
    last_rows = artifacts.read_jsonl(Path(results[-1]), "result-row")
    broken = broken_incumbent_arms(aggregate_by_task(last_rows), arms)
    cut, capped = stopped_cells(Path(summary_out).parent)
    advice = None
    if cut:
        advice = (
            f"The run's budget (`budget.max_usd`) stopped {cut} cell(s) at the model gateway (their rows are "
            "budget-exhausted, excluded from the gate): raise it and run the same command again; only those cells run."
        )
    elif outcome == "not_promoted" and held:
        generation, categories = held[-1]
        advice = (
            f"Generation {generation}'s candidate was held back by content flags ({', '.join(categories)}) though its "
            f"evidence would promote it: read them and its whole diff in "
            f"{layout.report(Path(summary_out).parent, generation)}; to promote it, add {', '.join(categories)} to "
            "evolution.accept_flags and run the same command again (only the gate reruns)."
        )
    elif outcome == "not_promoted":
        design = {"gate": {"min_runs": min_runs}, "runs": runs}
        advice = next_step(design, len({row["task"] for row in last_rows}), last_decisions)
    summary = {
        "schema": "summary/v1",
        "experiment": experiment,
        "generations_requested": generations_requested,
        "generations": generations,
        "outcome": outcome,
        "promoted_generation": promoted,
        "broken_incumbent_arms": broken,
        "budget_exhausted_cells": cut,
        "capped_cells": capped,
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
    typed = proposer_settings(settings, job_run_control(run_control))
    start_session_job(typed.sandbox)

    try:
        oracles = bound_oracles(bindings, oracle_dirs)
    except overlay.OverlayError as exc:
        raise ProposerError(str(exc)) from exc
    record, ledger = run_proposer(
        settings=typed,
        generation=generation,
        evidence=Path(evidence_dir),
        repository=Path(repository),
        # The proposer runs Claude Code.
        agent_install=DEFAULT_ADAPTER.install(resolve_cli(typed.agent.cli)),
        model_script=load_script(model_script),
        api_key=api_key(typed.model.api_key_env),
        overlay_out=Path(overlay_out),
        proposal_out=Path(proposal_out),
        prompt_out=Path(prompt_out),
        oracles=oracles,
        log=log,
        results_root=Path(layout.root_of_generation_file(session_out)),
    )
    document = {
        "schema": "proposer-session/v1",
        "generation": generation,
        "session": record,
        "ledger": {"role": "proposer", **ledger},
    }
    artifacts.write_artifact(Path(session_out), document, "proposer-session", mode=0o600)
