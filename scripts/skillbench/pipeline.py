"""Rule steps: the I/O edge between Snakemake shims and the library.

Each function reads its inputs (validating them), calls the pure library, and writes its
outputs atomically after validating them. Shims in `scripts/<rule>.py` call exactly one of
these with plain values taken from the `snakemake` object.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from . import artifacts, cells
from .process import ORPHANED, exclusive_writer, run_managed
from .redaction import secrets_from_environment
from .tasks import bind_task as bind_task_files

if TYPE_CHECKING:
    from .gate import PromotionDocument
    from .records import ResultRow

PROJECT_ROOT = Path(__file__).resolve().parents[2]


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


def resolve_cli(name: str, project_root: Path = PROJECT_ROOT) -> Path:
    """The Claude Code CLI: an explicit path, else tools/node_modules/.bin/<name>, else PATH."""
    candidate = Path(name).expanduser()
    if "/" in name:
        if candidate.is_file():
            return candidate.resolve()
        raise artifacts.ArtifactError(f"config agent.cli: {name} does not exist")
    local = project_root / "tools" / "node_modules" / ".bin" / name
    if local.exists():
        return local.resolve()
    found = shutil.which(name)
    if found:
        return Path(found).resolve()
    raise artifacts.ArtifactError(
        f"config agent.cli: {name!r} is neither in {local.parent} nor on PATH; "
        "run `make setup` to install the Claude Code CLI"
    )


# The oldest Claude Code CLI the test suite runs (tools/package.json pins it); older ones are refused
# because their behaviour inside the sandbox is unverified (1.0.x fails there: it loads a yoga.wasm
# beside its bin file, which the sandbox does not mount).
MIN_CLI_VERSION = "2.1.197"
VERSION_PATTERN = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)")
CLI_VERSION_TIMEOUT_S = 60


def cli_version(cli: Path) -> str | None:
    """The CLI's version: from the npm package the binary ships in, else from `<cli> --version`."""
    for parent in cli.parents:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                package = json.loads(manifest.read_text())
            except (OSError, json.JSONDecodeError):
                break
            if package.get("name") == "@anthropic-ai/claude-code":
                return package.get("version")
    result = run_managed(
        [str(cli), "--version"],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "DISABLE_AUTOUPDATER": "1"},
        timeout=CLI_VERSION_TIMEOUT_S,
        cwd="/",
    )
    match = VERSION_PATTERN.match(result.stdout_tail) if result.ok else None
    return ".".join(match.groups()) if match else None


def _version_key(version: str) -> tuple[int, ...]:
    match = VERSION_PATTERN.match(version)
    return tuple(int(part) for part in match.groups()) if match else ()


def check_cli(config: dict[str, Any]) -> str:
    """Parse time: the configured CLI exists and is recent enough; return its version (a key of every cell)."""
    cli = resolve_cli(config["agent"]["cli"])
    version = cli_version(cli)
    if version is None:
        raise artifacts.ArtifactError(
            f"config agent.cli: cannot tell the version of {cli} (neither its npm "
            "package.json nor `--version` names one); point agent.cli at a Claude Code CLI"
        )
    if _version_key(version) < _version_key(MIN_CLI_VERSION):
        raise artifacts.ArtifactError(
            f"config agent.cli: Claude Code {version} at {cli} is older than the oldest "
            f"supported version {MIN_CLI_VERSION}; run `make setup` (it installs the pinned "
            "CLI into tools/) or point agent.cli at a newer one"
        )
    return version


def api_key(config: dict[str, Any]) -> str | None:
    keys = secrets_from_environment([config["model"]["api_key_env"]])
    return keys[0] if keys else None


def check_model_access(config: dict[str, Any]) -> None:
    """The real API needs its key in the environment: say so before any job starts."""
    if config["model"]["provider"] == "anthropic" and not api_key(config):
        raise artifacts.ArtifactError(
            f"model.provider is anthropic but the environment variable {config['model']['api_key_env']} is empty; "
            "export the key (never put it in config), or use model.provider: scripted for an offline run"
        )
    base_url = config["model"]["base_url"]
    if base_url:
        from urllib.parse import urlsplit

        parts = urlsplit(base_url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.username
            or parts.password
            or parts.query
            or parts.fragment
        ):
            raise artifacts.ArtifactError(
                f"model.base_url must be a plain http(s) URL without credentials, query or fragment (got {base_url!r})"
            )


def load_script(path: str | None) -> dict[str, Any] | None:
    """The scripted model's script (the rule's input), or None for the real API."""
    from .scripted_model import load_model_script

    return load_model_script(path) if path else None


def run_cell(
    *,
    config: dict[str, Any],
    task: dict[str, Any],
    arm: str,
    run: int,
    binding: str,
    template: str,
    oracle_snapshot: str,
    skills_root: str,
    model_script: str | None,
    record_out: str,
    attempt: int,
    breaker_state: str,
    cli_version: str,
    overlay_json: str | None = None,
    log=None,
) -> None:
    """`task` is the definition the workflow validated when it was parsed and `cli_version` the CLI's version
    it found then (the rule's params)."""
    overlay_digest = artifacts.read_artifact(Path(overlay_json), "overlay")["digest"] if overlay_json else None
    task_binding = artifacts.read_artifact(Path(binding), "task-binding")
    cli = resolve_cli(config["agent"]["cli"])
    context = cells.CellContext(
        config=config,
        template=Path(template),
        oracle_snapshot=Path(oracle_snapshot),
        run_dir=Path(record_out).parent,
        claude_bin=cli,
        cli_version=cli_version,
        api_key=api_key(config),
        model_script=load_script(model_script),
        skills_source=Path(skills_root),
        overlay=frozen_overlay_of(overlay_json) if overlay_json else None,
        overlay_digest=overlay_digest,
        log=log,
    )
    run_dir = Path(record_out).parent
    # One writer per cell: an orphaned job of a crashed snakemake may still be tearing this cell down.
    with exclusive_writer(run_dir.parent / f".{run_dir.name}.lock", what=f"cell {run_dir}"):
        record = cells.run_cell(
            task,
            task_binding,
            arm,
            run,
            context,
            attempt=attempt,
            attempts=config["agent"]["attempts"],
            breaker_state=Path(breaker_state),
        )
        artifacts.validate(record["row"], "result-row", source=f"{record_out} (row)")
        if ORPHANED.is_set():
            raise cells.CellCancelled(
                f"cell {run_dir}: the snakemake that started it is gone; no record is written, "
                "so the next run does this cell again"
            )
        artifacts.write_artifact(Path(record_out), record, "cell-record")


def frozen_overlay_of(overlay_json: str | Path) -> Path:
    """The frozen copy lives beside overlay.json."""
    return Path(overlay_json).parent / "frozen-overlay"


def canonical_order(rows: list[dict[str, Any]], task_order: list[str], arm_order: list[str]) -> list[dict[str, Any]]:
    """Task-file order, then run-major, arm-minor."""
    return sorted(rows, key=lambda row: (task_order.index(row["task"]), row["run"], arm_order.index(row["arm"])))


def collect_results(*, records: list[str], bindings: str, arm_order: list[str], out: str) -> None:
    task_order = [task["id"] for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]]
    rows = []
    for path in records:
        record = artifacts.read_artifact(Path(path), "cell-record")
        rows.append(artifacts.validate(record["row"], "result-row", source=f"{path} (row)"))
    artifacts.write_jsonl(Path(out), canonical_order(rows, task_order, arm_order), "result-row")


def runs_text(runs: Any) -> Any:
    """The design as the report states it: the integer of a fixed design, a sentence for a sequential one."""
    if isinstance(runs, int):
        return runs
    return f"{runs['min']} to {runs['max']}, step {runs['step']} (sequential; each pair's looks are in its decision)"


def render_report(
    *,
    results: str,
    bindings: str,
    config: dict[str, Any],
    arm_order: list[str],
    out: str,
    promotion: str | None = None,
    title: str = "skillbench benchmark",
) -> None:
    from .report import render_report as render

    rows = artifacts.read_jsonl(Path(results), "result-row")
    bound = artifacts.read_artifact(Path(bindings), "task-bindings")
    promotion_doc = artifacts.read_artifact(Path(promotion), "promotion") if promotion else None
    provenance = {
        "model": config["model"]["name"],
        "provider": config["model"]["provider"],
        "effort": config["model"]["effort"] or "CLI default",
        "selected_tasks": [task["id"] for task in bound["tasks"]],
        "skipped_tasks": bound["skipped_expensive"],
        "runs": runs_text(config["runs"]),
        "run_status": "complete",
        "tools": config["agent"]["tools"],
    }
    text = render(
        rows,
        title=title,
        task_order=provenance["selected_tasks"],
        arm_order=arm_order,
        provenance=provenance,
        promotion=promotion_doc,
        baseline_arm=config["report"]["baseline_arm"],
    )
    artifacts.atomic_write_text(Path(out), text + oracle_log_section(rows, Path(out)))


def oracle_log_section(rows: list[dict[str, Any]], report: Path) -> str:
    """Links to the oracle's output of every run whose hidden oracle failed, for the task author.

    The logs are owner-only files beside the records (`run<i>/oracle.log`); the report shows only the link, never
    their content, and the evidence a proposer sees never holds them."""
    from . import arms as arm_config
    from .cells import ORACLE_LOG

    results_root, folder = report.parent.parent, report.parent
    links = []
    for row in rows:
        if row["oracle_passed"] or row["oracle_output"] != "hidden oracle failed":
            continue
        cellset = folder.name + "/cells" if arm_config.is_candidate(row["arm"]) else "cells"
        log = results_root / cellset / row["task"] / row["arm"] / f"run{row['run']}" / ORACLE_LOG
        if log.is_file():
            relative = os.path.relpath(log, folder)
            links.append(f"- {row['task']} / {row['arm']} / run {row['run']}: [{relative}]({relative})")
    if not links:
        return ""
    return (
        "\n## Oracle output of failed runs (for task authors)\n\nThe hidden oracle's output is kept out of every "
        "report, transcript and evidence bundle; these owner-only files hold its tail. If every arm fails the "
        "same way, check the oracle (`skillbench check-tasks`) before blaming the agent.\n\n" + "\n".join(links) + "\n"
    )


def bound_oracles(bindings: str, oracle_dirs: list[str]) -> list[tuple[str, bytes]]:
    """Every bound hidden oracle file as (label, bytes), re-checked against its binding's digests.

    `oracle_dirs` are the tasks' snapshot folders (`…/tasks/<task>/oracle`), one per bound task."""
    from . import oracle
    from .overlay import OverlayError

    folders = {Path(folder).parent.name: Path(folder) for folder in oracle_dirs}
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


def freeze_overlay(
    *,
    config: dict[str, Any],
    generation: int,
    source: str,
    frozen_out: str,
    overlay_out: str,
    candidate_origin: str,
    proposer_model: str | None,
    bindings: str,
    oracle_dirs: list[str],
    repository: str = ".",
) -> None:
    """Validate and freeze a candidate overlay, derive its paired arms, bind its promotion targets.

    An overlay that carries any bound hidden oracle's content is refused before any cell runs."""
    from . import arms as arm_config
    from . import overlay, skillformat

    evolvable = config["skills"]["evolvable"]
    files = overlay.overlay_files(Path(source), evolvable)
    overlay.refuse_oracle_content(files, bound_oracles(bindings, oracle_dirs), source)
    try:
        skillformat.check_overlay(Path(source))
    except skillformat.SkillFormatError as exc:
        raise overlay.OverlayError(str(exc)) from exc
    overlay.require_change(files, Path(config["skills"]["root"]))
    touched = overlay.touched_skills(files)
    candidates = required_candidate_arms(config, touched, source)
    targets = overlay.promotion_targets(
        files, skills_root=config["skills"]["root"], mirrors=config["skills"]["mirrors"]
    )
    bases = overlay.committed_target_digests(Path(repository), targets)
    digest = overlay.freeze(Path(source), Path(frozen_out), evolvable)
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
        "pairs": [[arm_config.incumbent_of(arm), arm] for arm in candidates],
        "targets": targets,
        "target_base_digests": bases,
    }
    artifacts.write_artifact(Path(overlay_out), document, "overlay")


def required_candidate_arms(config: dict[str, Any], touched: set[str], source: str) -> list[str]:
    """The paired candidate arms an overlay needs; they must be exactly the experiment's evolution arms."""
    from . import arms as arm_config
    from . import overlay

    expected = [f"{arm_config.CANDIDATE_PREFIX}{arm}" for arm in arm_config.evolution_arms(config)]
    needed = [
        arm
        for arm in arm_config.candidate_arms_for(config, touched)
        if arm_config.incumbent_of(arm) in arm_config.selected_arms(config)
    ]
    if needed != expected:
        raise overlay.OverlayError(
            f"overlay {source} changes {sorted(touched)}, which needs the paired arms {needed or 'none'}; this "
            f"experiment benchmarks {expected} (evolution.arms). Change a skill of every one of those arms, or "
            "set evolution.arms to the arms the overlay is about"
        )
    return expected


def generation_arm_order(config: dict[str, Any], candidates: list[str]) -> list[str]:
    """Each incumbent arm followed by its candidate, in config order."""
    from . import arms as arm_config

    order: list[str] = []
    for arm in arm_config.selected_arms(config):
        order.append(arm)
        order += [candidate for candidate in candidates if arm_config.incumbent_of(candidate) == arm]
    return order


def promotion_binding(
    model: str, effort: str | None, overlay_doc: dict[str, Any], bindings_doc: dict[str, Any]
) -> dict[str, Any]:
    return {
        "benchmark_model": model,
        "effort": effort,
        "proposer_model": overlay_doc["proposer_model"],
        "candidate_origin": overlay_doc["candidate_origin"],
        "candidate_overlay_digest": overlay_doc["digest"],
        "required_candidate_arms": overlay_doc["required_candidate_arms"],
        "selected_tasks": bindings_doc["tasks"],
        "target_base_digests": overlay_doc["target_base_digests"],
    }


def run_status(rows: list[dict[str, Any]], tasks: list[str], arms: list[str]) -> str:
    """`complete` when every (task, arm) has the same runs 0..R-1 and nothing was cancelled, else `aborted`.

    The pipeline only gates a generation whose cells all finished; a partial results.jsonl (a regrade of
    an interrupted run) must never promote."""
    if any(row["error_kind"] == "cancelled" for row in rows):
        return "aborted"
    runs = {(task, arm): set() for task in tasks for arm in arms}
    for row in rows:
        if (row["task"], row["arm"]) in runs:
            runs[(row["task"], row["arm"])].add(row["run"])
    seen = set().union(*runs.values()) if runs else set()
    expected = set(range(max(seen) + 1)) if seen else set()
    return "complete" if expected and all(found == expected for found in runs.values()) else "aborted"


def gate_promotion(
    *,
    results: str,
    overlay_json: str,
    bindings: str,
    policy: dict[str, Any],
    model: str,
    effort: str | None,
    out: str,
    generated_at=None,
    design: Any = None,
    look: str | None = None,
) -> PromotionDocument:
    """Rows + policy → promotion.json (the same function `skillbench gate` calls offline).

    With a sequential ``design`` (the config's ``runs`` mapping) every pair replays its looks over
    the rows; ``look`` (the generation's last look document) names the pairs a budget cut short."""
    from datetime import UTC, datetime

    from . import gate

    rows = artifacts.read_jsonl(Path(results), "result-row")
    overlay_doc = artifacts.read_artifact(Path(overlay_json), "overlay")
    bindings_doc = artifacts.read_artifact(Path(bindings), "task-bindings")
    arms = [arm for pair in overlay_doc["pairs"] for arm in pair]
    run_design = gate.run_design(design if design is not None else 1)
    sequential = run_design["kind"] == "sequential"
    if sequential:
        # Pairs stop at different looks, so arms differ in runs; each pair's replay checks its own rows.
        status = "aborted" if any(row["error_kind"] == "cancelled" for row in rows) else "complete"
    else:
        status = run_status(rows, [task["id"] for task in bindings_doc["tasks"]], arms)
    cut_short = None
    if look is not None:
        look_doc = artifacts.read_artifact(Path(look), "look")
        cut_short = {
            pair["candidate_arm"]: pair["reason"] for pair in look_doc["pairs"] if pair["status"] == "cut_short"
        }
    document = gate.promotion_document(
        cast("list[ResultRow]", rows),  # read_jsonl validated them against the result-row schema
        pairs=[tuple(pair) for pair in overlay_doc["pairs"]],
        policy=policy,
        binding=promotion_binding(model, effort, overlay_doc, bindings_doc),
        run_status=status,
        generated_at=generated_at or datetime.now(UTC),
        design=run_design if sequential else None,
        cut_short=cut_short,
    )
    artifacts.write_artifact(Path(out), document, "promotion")
    return document


def is_promoted(promotion: dict[str, Any]) -> bool:
    return bool(promotion["decisions"]) and all(d["decision"] == "promote" for d in promotion["decisions"])


class HarnessHealthError(RuntimeError):
    """An incumbent arm resolved nothing on every task: the environment, not the skills, is broken."""


def summarize_run(
    *,
    config: dict[str, Any],
    results: list[str],
    promotions: list[str],
    overlays: list[str],
    summary_out: str,
    markdown_out: str,
) -> dict[str, Any]:
    """summary.json and summary.md for the whole run; then fail loudly if an incumbent arm is broken."""
    from . import arms as arm_config
    from .aggregate import aggregate_by_task, broken_incumbent_arms
    from .gate import summarize_gate

    generations = []
    for promotion_path, overlay_path in zip(promotions, overlays, strict=True):
        promotion = artifacts.read_artifact(Path(promotion_path), "promotion")
        overlay_doc = artifacts.read_artifact(Path(overlay_path), "overlay")
        generations.append(
            {
                "generation": overlay_doc["generation"],
                "candidate_origin": overlay_doc["candidate_origin"],
                "candidate_overlay_digest": overlay_doc["digest"],
                "touched_skills": overlay_doc["touched_skills"],
                "required_candidate_arms": overlay_doc["required_candidate_arms"],
                "promoted": is_promoted(promotion),
                "run_status": promotion["run_status"],
                "decisions": [
                    {
                        "candidate_arm": d["candidate_arm"],
                        "incumbent_arm": d["incumbent_arm"],
                        "decision": d["decision"],
                        "median_improvement_pct": d["median_improvement_pct"],
                        "reasons": d["reasons"],
                    }
                    for d in promotion["decisions"]
                ],
                "gate_summary": summarize_gate(promotion),
            }
        )
    requested = config["evolution"]["generations"]
    promoted = next((g["generation"] for g in generations if g["promoted"]), None)
    if requested == 0:
        outcome = "sweep"
    elif promoted is not None:
        outcome = "promoted"
    else:
        outcome = "not_promoted"
    last_rows = artifacts.read_jsonl(Path(results[-1]), "result-row")
    broken = broken_incumbent_arms(aggregate_by_task(last_rows), arm_config.selected_arms(config))
    advice = None
    if outcome == "not_promoted":
        from .configcheck import next_step

        last_reasons = [reason for d in generations[-1]["decisions"] for reason in d["reasons"]] if generations else []
        advice = next_step(config, len({row["task"] for row in last_rows}), last_reasons)
    summary = {
        "schema": "summary/v1",
        "experiment": config["experiment"],
        "generations_requested": requested,
        "generations": generations,
        "outcome": outcome,
        "promoted_generation": promoted,
        "broken_incumbent_arms": broken,
        "next_step": advice,
    }
    artifacts.write_artifact(Path(summary_out), summary, "summary")
    artifacts.atomic_write_text(Path(markdown_out), render_summary(summary))
    if broken:
        raise HarnessHealthError(
            f"[harness-health] incumbent arm(s) {', '.join(broken)} resolved no run on any task; the report and "
            "promotion evidence were written, but a harness that cannot solve anything measures nothing: check "
            "the task suite, the sandbox and the model before trusting these results"
        )
    return summary


def render_summary(summary: dict[str, Any]) -> str:
    lines = [f"# skillbench run `{summary['experiment']}`", ""]
    if summary["outcome"] == "sweep":
        lines.append("A benchmark sweep of the incumbent arms (no candidate): see `sweep/report.md`.")
    else:
        lines += ["| generation | origin | candidate digest | arms | decision |", "| --- | --- | --- | --- | --- |"]
        for generation in summary["generations"]:
            decisions = ", ".join(f"{d['candidate_arm']}: {d['decision']}" for d in generation["decisions"])
            lines.append(
                f"| {generation['generation']} | {generation['candidate_origin']} | "
                f"`{generation['candidate_overlay_digest'][:16]}` | "
                f"{', '.join(generation['required_candidate_arms'])} | {decisions} |"
            )
        lines.append("")
        for generation in summary["generations"]:
            lines.append(f"## Generation {generation['generation']}")
            lines.append("")
            lines += [f"- {line}" for line in generation["gate_summary"]]
            lines.append("")
        if summary["outcome"] == "promoted":
            lines.append(
                f"**Outcome: generation {summary['promoted_generation']}'s candidate was promoted.** "
                f"Apply it with `skillbench apply results/{summary['experiment']}`."
            )
        else:
            advice = summary.get("next_step") or "Raise `evolution.generations` to continue the chain."
            lines.append(
                f"**Outcome: no candidate cleared the gate in {summary['generations_requested']} "
                f"generation(s).** {advice}"
            )
    cut_short = [
        f"generation {g['generation']} {d['candidate_arm']}"
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
    if summary["broken_incumbent_arms"]:
        lines += ["", f"**[harness-health]** broken incumbent arms: {', '.join(summary['broken_incumbent_arms'])}"]
    return "\n".join(lines).rstrip() + "\n"


def evidence_source(config: dict[str, Any], generation: int, results_root: str) -> dict[str, Any]:
    """Where generation N's evidence comes from: generation N-1, or evolution.seed_results for generation 0."""
    if generation > 0:
        previous = Path(results_root) / f"gen{generation - 1}"
        return {"results_root": Path(results_root), "folder": previous, "generation": generation - 1}
    seed = config["evolution"]["seed_results"]
    if not seed:
        return {"results_root": None, "folder": None, "generation": None}
    folder = Path(seed)
    name = folder.name
    return {
        "results_root": folder.parent,
        "folder": folder,
        "generation": int(name[3:]) if name.startswith("gen") and name[3:].isdigit() else None,
    }


def stage_evidence(*, config: dict[str, Any], generation: int, results_root: str, out: str) -> None:
    from . import evidence

    source = evidence_source(config, generation, results_root)
    folder = source["folder"]
    learnings_path = config["evolution"]["learnings"]
    learnings = evidence.read_learnings(Path(learnings_path) if learnings_path else None, config["skills"]["evolvable"])

    def existing(name: str) -> Path | None:
        if folder is None:
            return None
        path = folder / name
        return path if path.is_file() else None

    evidence.stage_evidence(
        destination=Path(out),
        results_root=source["results_root"],
        rows_path=existing("results.jsonl"),
        generation=source["generation"],
        promotion_path=existing("promotion.json"),
        prior_proposal=existing("proposal.md"),
        learnings=learnings,
        secrets=[key for key in [api_key(config)] if key],
    )


def propose_overlay(
    *,
    config: dict[str, Any],
    generation: int,
    evidence_dir: str,
    model_script: str | None,
    proposal_out: str,
    session_out: str,
    prompt_out: str,
    bindings: str,
    oracle_dirs: list[str],
    repository: str = ".",
    log=None,
) -> None:
    from .overlay import OverlayError
    from .proposer import ProposerError, run_proposer

    proposal = Path(proposal_out)
    try:
        oracles = bound_oracles(bindings, oracle_dirs)
    except OverlayError as exc:
        raise ProposerError(str(exc)) from exc
    record = run_proposer(
        config=config,
        generation=generation,
        evidence=Path(evidence_dir),
        repository=Path(repository),
        claude_bin=resolve_cli(config["agent"]["cli"]),
        model_script=load_script(model_script),
        api_key=api_key(config),
        overlay_out=proposal.parent / "overlay",
        proposal_out=proposal,
        prompt_out=Path(prompt_out),
        oracles=oracles,
        log=log,
    )
    document = {"schema": "proposer-session/v1", "generation": generation, "session": record}
    artifacts.write_artifact(Path(session_out), document, "proposer-session", mode=0o600)


def check_initial_overlay(config: dict[str, Any], repository: str = ".") -> None:
    """Validate evolution.initial_overlay when the workflow is parsed, so a bad overlay costs no session."""
    from . import overlay

    source = config["evolution"]["initial_overlay"]
    if not source or config["evolution"]["generations"] == 0:
        return
    from . import skillformat

    files = overlay.overlay_files(Path(source), config["skills"]["evolvable"])
    overlay.refuse_oracle_content(files, suite_oracles(config["tasks"]["suite"]), source)
    skillformat.check_overlay(Path(source))
    overlay.require_change(files, Path(config["skills"]["root"]))
    required_candidate_arms(config, overlay.touched_skills(files), source)
    targets = overlay.promotion_targets(
        files, skills_root=config["skills"]["root"], mirrors=config["skills"]["mirrors"]
    )
    overlay.committed_target_digests(Path(repository), targets)


def recorded_spend(config: dict[str, Any], results_root: str) -> dict[str, Any]:
    """Sessions and cost_usd of every finished cell under the experiment's results folder (records on disk)."""
    from . import arms as arm_config

    sessions, usd = 0, 0.0
    for path in sorted(Path(results_root).glob("**/run*/record.json")):
        row = artifacts.read_artifact(path, "cell-record")["row"]
        sessions += len(arm_config.arm_definition(config, row["arm"])["sessions"])
        usd += row.get("cost_usd") or 0.0
    return {"sessions": sessions, "usd": round(usd, 6)}


def gate_look(
    *,
    config: dict[str, Any],
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

    The next batch's price: each missing cell costs its arm's sessions, and the mean recorded cost per
    finished cell so far. Pairs are admitted in config order, so the first pairs keep their batches."""
    from . import arms as arm_config
    from . import gate

    run_design = gate.run_design(design)
    rows = [artifacts.read_artifact(Path(path), "cell-record")["row"] for path in records]
    spend = recorded_spend(config, results_root)
    finished = sum(1 for _ in Path(results_root).glob("**/run*/record.json"))
    cost_per_cell = spend["usd"] / finished if finished else 0.0
    present = {(row["task"], row["arm"], row["run"]) for row in rows}
    tasks = sorted({row["task"] for row in rows})
    planned_sessions, planned_usd, planned_cells = spend["sessions"], spend["usd"], set()
    entries = []
    for incumbent, candidate in pairs:
        decision = gate.sequential_decision(
            rows, incumbent_arm=incumbent, candidate_arm=candidate, model=model, policy=policy, design=run_design
        )
        looks = decision["looks"]
        runs = looks[-1]["runs"] if looks else run_design["looks"][0]
        status, next_runs = decision["sequential"]["status"], decision["sequential"]["next_runs"]
        reason = looks[-1]["reason"] if looks else decision["reasons"][0]
        verdict = looks[-1]["decision"] if looks else "continue"
        if status == "continue":
            batch = (
                {(task, arm, run) for task in tasks for arm in (incumbent, candidate) for run in range(runs, next_runs)}
                - present
                - planned_cells
            )
            sessions = sum(len(arm_config.arm_definition(config, arm)["sessions"]) for _, arm, _ in batch)
            over = []
            if budget.get("max_sessions") is not None and planned_sessions + sessions > budget["max_sessions"]:
                over.append(
                    f"budget.max_sessions {budget['max_sessions']} (spent {spend['sessions']} sessions; the "
                    f"next batch needs {sessions} more)"
                )
            if budget.get("max_usd") is not None and planned_usd + len(batch) * cost_per_cell > budget["max_usd"]:
                over.append(
                    f"budget.max_usd {budget['max_usd']:g} (spent ${spend['usd']:.4f}; the next batch is "
                    f"projected at ${len(batch) * cost_per_cell:.4f})"
                )
            if over:
                status, next_runs = "cut_short", None
                reason = (
                    f"cut short at look {len(looks)} after {runs} runs per (task, arm): the next batch would "
                    f"pass {' and '.join(over)}"
                )
            else:
                planned_sessions += sessions
                planned_usd += len(batch) * cost_per_cell
                planned_cells |= batch
        entries.append(
            {
                "incumbent_arm": incumbent,
                "candidate_arm": candidate,
                "status": status,
                "decision": verdict,
                "runs": runs,
                "next_runs": next_runs,
                "reason": reason,
            }
        )
    document = {
        "schema": "look/v1",
        "generation": generation,
        "look": look,
        "looks_planned": run_design["looks"],
        "pairs": entries,
        "spend": spend,
        "budget": {"max_sessions": budget.get("max_sessions"), "max_usd": budget.get("max_usd")},
    }
    artifacts.write_artifact(Path(out), document, "look")
    for entry in entries:
        print(
            f"gen{generation} look {look}: {entry['candidate_arm']} {entry['status']} after {entry['runs']} runs "
            f"({entry['decision']}): {entry['reason']}"
        )
    return document


def check_budget(
    config: dict[str, Any], task_ids: list[str], incumbent_arms: list[str], candidate_arms: list[str], first_runs: int
) -> None:
    """Fail at parse time when ``budget.max_sessions`` cannot pay for the first batch (the sweep's cells and the
    first generation's candidate cells at the first look's runs): caps act between batches, so a cap below the
    first batch would be passed before any look could stop it."""
    from . import arms as arm_config

    cap = config["budget"]["max_sessions"]
    if cap is None:
        return
    sessions = sum(
        len(arm_config.arm_definition(config, arm)["sessions"]) * first_runs * len(task_ids)
        for arm in [*incumbent_arms, *candidate_arms]
    )
    if sessions > cap:
        raise ValueError(
            f"config budget.max_sessions: {cap} is below the first batch's {sessions} agent sessions "
            f"({len(task_ids)} task(s) x {first_runs} run(s) of arms {', '.join([*incumbent_arms, *candidate_arms])}); "
            "raise the cap, or lower runs (runs.min) or the tasks/arms selected"
        )


def check_task(
    *,
    config: dict[str, Any],
    task: dict[str, Any],
    suite: str,
    binding: str,
    template: str,
    oracle_snapshot: str,
    out: str,
) -> dict[str, Any]:
    """The task check before any session: write check.json (0600: it holds oracle output) or raise naming why."""
    from . import taskcheck

    task_binding = artifacts.read_artifact(Path(binding), "task-binding")
    document = taskcheck.check_task(
        task,
        task_binding,
        config=config,
        template=Path(template),
        oracle_snapshot=Path(oracle_snapshot),
        solution=taskcheck.solution_bytes(task, Path(suite), task_binding),
        secrets=[key for key in [api_key(config)] if key],
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
