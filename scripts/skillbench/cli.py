"""The `skillbench` command: check artifacts against their schemas, and the offline tools.

skillbench validate KIND FILE                 exit 0, or exit 1 naming the first failing path (JSON, JSONL or
                                              YAML: a config file, a task suite or a model script)
skillbench kinds                              list the artifact kinds
skillbench gate RESULTS_JSONL --out FILE      regrade stored rows offline (same decision as the pipeline)
skillbench apply RESULTS_DIR                  apply a promoted candidate to the skills (nothing committed)
skillbench status [RESULTS_DIR]               cells done/planned, running, spend, ETA — from the files on disk
skillbench estimate [--configfile FILE]       cells, sessions and expected cost the config implies
skillbench check [--configfile FILE]          every check a run makes before its first session, and verify and
                                              the hidden oracle on each task's base and reference solution: one
                                              line per problem, exit 1 on any (check-tasks: the same)
skillbench init DIR [--skills PATH]           a project folder of your own (skillbench as a module, your skills)
skillbench script init [--configfile FILE]    a skeleton model script per selected task and session role
skillbench export --inspect RESULTS_DIR       Inspect eval logs, one per (generation, arm), into an empty folder
           [--out DIR]                        (default RESULTS_DIR/inspect; needs `pip install 'skillbench[inspect]'`)
skillbench tasks mine --repo PATH --out DIR   tasks from a repository's history (commits changing source and
                                              tests), each checked before it is written; a yield report beside them
skillbench tasks import --harbor DIR… | --swebench FILE --repo PATH | --plugin-eval DIR | --skill-creator FILE
                      --out DIR               tasks from the formats the field uses, checked, or refused by name

A command that takes a results folder reads the experiment's config from its run.json (written when the run
started); an explicit --configfile wins, with a warning when it disagrees.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.base import artifacts
from skillbench.experiment.overlayreview import FLAG_CATEGORIES

YAML_KINDS = ("config", "task", "model-script")
DEFAULT_CONFIG = Path("config/config.yaml")


def _validate_yaml(kind: str, path: Path) -> None:
    """The YAML documents an author writes; raise ArtifactError with one line per mistake."""
    from skillbench.experiment import configcheck
    from skillbench.experiment import suite as tasks

    if kind == "config":
        # A user's config file is merged over the default one, exactly as `snakemake --configfile` does.
        layers = [layer for layer in _layers([]) if layer.resolve() != path.resolve()]
        config = configcheck.load_config(*layers, path)
        note = f" (merged over {', '.join(map(str, layers))})" if layers else ""
        print(f"{path}: valid config{note}")
        try:
            selected = tasks.select_tasks(
                tasks.load_suite(config["tasks"]["suite"]),
                include_expensive=config["tasks"]["include_expensive"],
                only=config["tasks"]["only"],
            ).tasks
        except (artifacts.ArtifactError, OSError) as exc:
            print(f"warning: the task suite cannot be checked from here: {exc}")
            return
        for warning in configcheck.design_warnings(config, len(selected)):
            print(f"warning: {warning}")
        return
    document = configcheck.read_yaml(path, what=f"{kind} file")
    if kind == "task" and isinstance(document, dict) and "tasks" in document:
        suite = tasks.validate_suite(document, path)
        print(f"{path}: valid task suite ({len(suite)} task(s))")
        return
    problems, _detail = configcheck.schema_problems(document, kind, what=str(path))
    if problems:
        raise artifacts.ArtifactError("\n".join(problems))
    print(f"{path}: valid {kind}")


def _validate(kind: str, path: Path) -> int:
    if kind not in artifacts.schema_kinds():
        print(f"unknown kind {kind!r}; known kinds: {', '.join(artifacts.schema_kinds())}", file=sys.stderr)
        return 2
    try:
        if kind in YAML_KINDS or path.suffix in (".yaml", ".yml"):
            _validate_yaml(kind, path)
        elif path.suffix == ".jsonl":
            rows = artifacts.read_jsonl(path, kind)
            print(f"{path}: {len(rows)} valid {kind} row(s)")
        else:
            artifacts.read_artifact(path, kind)
            print(f"{path}: valid {kind}")
    except artifacts.ArtifactError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def gate_default(key: str) -> Any:
    """The default of `gate.<key>` as the config schema states it (the one place a default is written)."""
    return artifacts.load_schema("config")["properties"]["gate"]["properties"][key]["default"]


def _gate(args: argparse.Namespace) -> int:
    from skillbench.base import layout
    from skillbench.decision import gate, promotion
    from skillbench.reporting import posthoc

    results = args.results.resolve()
    # A generation's rows sit in its folder, beside its overlay.json and looks; the bindings in the results root.
    overlay_json = args.overlay or results.parent / layout.OVERLAY
    bindings = args.bindings or Path(layout.bindings(results.parent.parent))
    # The experiment's own policy and design (--configfile, else its run.json), else the defaults.
    root = results.parent.parent
    if args.configfile or Path(layout.run_record(root)).is_file():
        try:
            config = _experiment_config(root, [args.configfile] if args.configfile else [])
        except artifacts.ArtifactError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        policy: dict[str, Any] = dict(config["gate"])
        design = config["runs"]
        accept_flags = list(config["evolution"]["accept_flags"])
    else:
        policy = {}
        design = None
        accept_flags = []
    if args.accept_flag is not None:
        accept_flags = list(dict.fromkeys(args.accept_flag))
    if args.runs is not None:
        try:
            design = json.loads(args.runs)
        except json.JSONDecodeError:
            print(
                f'--runs must be an integer or a JSON mapping like \'{{"min": 2, "max": 10, "step": 1}}\' '
                f"(got {args.runs!r})",
                file=sys.stderr,
            )
            return 1
    # A sequential generation keeps its looks beside the rows; the last one names the pairs a budget cut short.
    looks = sorted(
        (results.parent / layout.LOOKS).glob("look*.json"),
        key=lambda path: int(path.stem[4:]) if path.stem[4:].isdigit() else 0,
    )
    last_look = str(looks[-1]) if looks and isinstance(design, dict) else None
    for key in (
        "rule",
        "metric",
        "min_runs",
        "min_improvement_pct",
        "max_task_regression_pct",
        "max_failed_task_regression_pct",
        "min_gated_task_ratio",
        "alpha",
        "quality_margin_pct",
        "objective",
        "generation_spending",
        "across_agents",
    ):
        if getattr(args, key) is not None:
            policy[key] = getattr(args, key)
    if args.resolution_cost_margin_pct is not None:
        policy["resolution_cost_margin_pct"] = (
            None if args.resolution_cost_margin_pct == "none" else float(args.resolution_cost_margin_pct)
        )
    if args.require_confidence:
        policy["require_confidence"] = True
    if args.allow_unsandboxed:
        policy["allow_unsandboxed"] = True
    try:
        posthoc.refuse_run_document(args.out, results)
    except artifacts.ArtifactError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    rows = artifacts.read_jsonl(results, "result-row")
    models = sorted({row["model"] for row in rows})
    efforts = sorted({str(row["effort"]) for row in rows})
    if len(models) != 1 or len(efforts) != 1:
        print(f"{results}: rows mix models {models} or efforts {efforts}; cannot regrade", file=sys.stderr)
        return 1
    try:
        document = promotion.grade(
            results=str(results),
            overlay_json=str(overlay_json),
            bindings=str(bindings),
            policy=gate.resolve_policy(policy),
            model=models[0],
            effort=rows[0]["effort"],
            out=str(args.out),
            design=design,
            look=last_look,
            generation=args.generation,
            accept_flags=accept_flags,
        )
    except (artifacts.ArtifactError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for line in gate.summarize_gate(document):
        print(line)
    _record_post_hoc(root, results, args.out, document)
    return 0


def _record_post_hoc(root: Path, results: Path, out: Path, document: Any) -> None:
    """A regrade of a run's generation under another policy than the run's: marked post hoc in ``out`` and kept
    beside the run's decision (never replacing it), and said so."""
    from skillbench.base import layout
    from skillbench.reporting import posthoc

    generation = layout.generation_of_folder(results.parent.name)
    recorded = posthoc.record(root, generation, document) if generation is not None else None
    if recorded is None:
        return
    marked, kept = recorded
    artifacts.write_artifact(out, dict(marked), "promotion")
    changed = ", ".join(marked["post_hoc"]["changed"])
    print(
        f"post hoc: not the run's decision ({changed} differ from the run's); {out} says so, and it is kept beside "
        f"the run's promotion.json as {kept} and listed in {layout.summary_markdown(root)}"
    )


def _experiment_config(results_dir: Path, configfiles: list[Path]) -> dict[str, Any]:
    """The config of the experiment under ``results_dir``: its run.json (--configfile wins; without either,
    config/config.yaml), with the notes on stderr."""
    from skillbench.experiment import runrecord

    config, notes = runrecord.experiment_config(results_dir, configfiles, default=DEFAULT_CONFIG)
    for note in notes:
        print(note, file=sys.stderr)
    return config


def _apply(args: argparse.Namespace) -> int:
    """Show the promoted candidate's diff and content flags, then write it only with --yes or a confirmation on a
    terminal; --dry-run writes nothing (not even an interrupted apply's rollback)."""
    from skillbench.evolution import apply

    try:
        # The run's config comes first: its skills section is all an interrupted apply's recovery may touch.
        config = _experiment_config(args.results_dir, args.configfile)
        if args.dry_run:
            if apply.journal_path(args.repository).exists():
                print("an interrupted apply's journal is present: a real apply rolls it back first", file=sys.stderr)
        else:
            recovered = apply.recover_interrupted(args.repository, config["skills"])
            if recovered:
                print(recovered)
        prepared = apply.prepare_promotion(args.results_dir, repository=args.repository, config=config)
        print(apply.format_review(prepared))
        if args.dry_run:
            print("dry run: nothing was written")
            return 0
        if not args.yes and not _confirmed(len(prepared.plan)):
            print(
                "NOT APPLIED: nothing was written. Read the diff and flags above, then run the same command with "
                "--yes (or answer y on a terminal) to write them",
                file=sys.stderr,
            )
            return 1
        written = apply.write_prepared(prepared)
    except (artifacts.ArtifactError, ValueError, OSError) as exc:
        print(f"NOT APPLIED: {exc}", file=sys.stderr)
        return 1
    print(apply.format_applied(written))
    return 0


def _confirmed(files: int) -> bool:
    """A yes typed on a terminal (never when stdin is not one: a pipe or a script cannot confirm)."""
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"Write these {files} file(s) into the working tree? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _default_results_dir() -> Path:
    """The run under results/ that started last (its run.json, else its plan), else results/<experiment> of
    config/config.yaml."""
    import yaml

    from skillbench.base import layout, yamltext

    started = [Path(path).parent for path in Path(layout.RESULTS).glob(layout.run_record("*"))]
    started += [layout.root_of_plan(plan) for plan in layout.planned_runs()]
    if started:
        return max(started, key=lambda root: max(path.stat().st_mtime for path in _run_markers(root)))
    try:
        document = yamltext.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        document = {}
    return Path(layout.results_root(str(document.get("experiment", "demo"))))


def _run_markers(root: Path) -> list[Path]:
    from skillbench.base import layout

    return [path for path in (Path(layout.run_record(root)), Path(layout.progress_plan(root))) if path.is_file()]


def _status(args: argparse.Namespace) -> int:
    from skillbench.experiment import runrecord
    from skillbench.reporting import progress

    root = args.results_dir or _default_results_dir()
    try:
        state = progress.snapshot(root)
        record = runrecord.read_run_record(root)
    except artifacts.ArtifactError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(progress.format_line(state))
    median = "n/a" if state["median_cell_s"] is None else f"{state['median_cell_s']:.1f} s"
    print(
        f"  state: {progress.state_name(state['state'])}; run started {state['started_at']}; median cell {median}; "
        f"session cap {state['session_cap'] or 'unknown'}"
    )
    for line in progress.status_lines(Path(root), state, record, progress.command_beside(sys.argv[0], "snakemake")):
        print(line)
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from skillbench import preflight
    from skillbench.base import layout
    from skillbench.experiment import configcheck
    from skillbench.experiment import suite as tasks
    from skillbench.reporting import progress

    try:
        if args.results is not None and not args.configfile:
            config = _experiment_config(args.results, [])
        else:
            config = configcheck.load_config(*_layers(args.configfile))
        # A design that cannot run has no cost: the same checks as the workflow's parse (not the CLI or the key).
        problems = preflight.experiment_checks(config, source=_source(args.configfile), environment_checks=False)
        if problems.problems:
            print("\n".join(problems.problems), file=sys.stderr)
            print("nothing to estimate: fix these first (`skillbench check` lists every problem)", file=sys.stderr)
            return 1
        suite = tasks.select_tasks(
            tasks.load_suite(config["tasks"]["suite"]),
            include_expensive=config["tasks"]["include_expensive"],
            only=config["tasks"]["only"],
        )
        work = progress.planned_work(config, [task["id"] for task in suite.tasks])
    except (artifacts.ArtifactError, ValueError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    generations = work["generations"]
    print(f"experiment {config['experiment']}: {len(work['tasks'])} task(s) × {work['runs']} run(s)")
    cached = [arm for arm in work["incumbent_arms"] if arm not in work["anchor_arms"]]
    if cached:
        print(
            f"  incumbent arms {', '.join(cached)} (the cache, shared by generations): "
            f"{len(work['incumbent_cells'])} cells"
        )
    if generations:
        anchors = ", ".join(work["anchor_arms"])
        print(
            f"  up to {generations} generation(s) of {', '.join(work['candidate_arms'])}: "
            f"{len(work['candidate_cells_per_generation'])} candidate cells each, beside an anchor of "
            f"{len(work['anchor_cells_per_generation'])} fresh cells of {anchors} "
            f"({work['anchor_sessions_per_generation']} sessions per generation; generation 0's anchor is the "
            f"sweep's cells of {anchors}); {work['proposer_sessions']} proposer session(s); the chain stops at the "
            "first promotion"
        )
    print(f"  at most {work['cells']} cells, {work['sessions']} agent sessions")
    for line in progress.budget_lines(config["budget"], work["sessions"]):
        print(line)
    source = args.results or Path(layout.results_root(config["experiment"]))
    rows, proposers = progress.earlier_costs(source)
    for line in _design_lines(config, work, rows, source, saving_pct=args.saving, shared_sd=args.shared_sd):
        print(line)
    estimate = progress.cost_estimate(work, rows, proposers)
    if estimate is None:
        prices, table = _model_price(config)
        files = [str(path) for path in args.configfile]
        # Run 0 of every incumbent arm, in the cache (rule sample_costs): no proposer, and no generation's anchor
        # runs before its candidate.
        sweep = shlex.join(
            [
                progress.command_beside(sys.argv[0], "snakemake"),
                "sample_costs",
                "--cores",
                "2",
                *(["--configfile", *files] if files else []),
                "--config",
                f"runs={PILOT_RUNS}",
            ]
        )
        again = shlex.join([progress.command_beside(sys.argv[0], "skillbench"), "estimate", *_configfile_args(files)])
        print(
            f"  cost: no earlier measured rows under {source}, so no estimate. Run {PILOT_RUNS} runs of the incumbent "
            "arms first (their cells are kept in the cache; each generation still runs its anchor afresh beside its "
            "candidate; one run would price the sessions but cannot measure run-to-run noise):\n"
            f"    {sweep}\n  then estimate again: {again}\n"
            "  (or pass --results results/<an earlier experiment>)"
        )
        if prices:
            rates = ", ".join(f"{key} {value:g}" for key, value in sorted(prices.items()) if key != "tiers")
            print(f"  price table {table} for {config['model']['name']} (USD per million tokens): {rates}")
        return 0
    note = "" if estimate["proposer_priced"] or not work["proposer_sessions"] else " (proposer sessions not priced)"
    print(
        f"  expected cost ${estimate['expected_usd']:.2f} (range ${estimate['low_usd']:.2f} – "
        f"${estimate['high_usd']:.2f}) if every generation runs, priced from {estimate['rows']} earlier "
        f"row(s) under {source}{note}"
    )
    cap = config["budget"]["max_usd"]
    if cap is not None and estimate["expected_usd"] > cap:
        print(f"  budget.max_usd {cap:g} is below the expected cost: looks start no batch past it")
    if config["model"]["provider"] == "scripted":
        print("  (model.provider is scripted: these are the scripted model's reported costs; nothing is billed)")
    return 0


def _source(configfiles: list[Path]) -> str:
    """How a check names the config it read: the user's files (merged over config/config.yaml)."""
    return ", ".join(map(str, configfiles)) if configfiles else str(DEFAULT_CONFIG)


def _configfile_args(files: list[str]) -> list[str]:
    return [token for name in files for token in ("--configfile", name)]


def _check(args: argparse.Namespace) -> int:
    """Every check a run makes before its first session, then the task checks: one line per problem, exit 1 on any.

    Fails fast: the config's problems come first, and the task checks (which run each task's setup, verify and
    oracle) run only once the config is sound; a task check whose inputs did not change since it passed is
    reused."""
    from skillbench import preflight
    from skillbench.base import layout
    from skillbench.experiment import configcheck
    from skillbench.experiment import suite as tasks

    source = _source(args.configfile)
    try:
        config = configcheck.merged_files(*_layers(args.configfile))
    except artifacts.ArtifactError as exc:
        print(str(exc))
        print(f"check: {source} cannot be read; a run would stop before any session", file=sys.stderr)
        return 1
    found = preflight.experiment_checks(config, source=source, config_files=args.configfile)
    selected: list[dict[str, Any]] = []
    if not found.problems and found.suite is not None:
        try:
            selected = tasks.select_tasks(
                found.suite,
                include_expensive=True if args.all else config["tasks"]["include_expensive"],
                only=args.task or config["tasks"]["only"],
            ).tasks
        except (artifacts.ArtifactError, ValueError) as exc:
            found.problems.append(str(exc))
    if found.problems:
        for problem in found.problems:
            print(problem)
        for warning in found.warnings:
            print(f"warning: {warning}")
        print(
            f"check: {_count(len(found.problems), 'problem')} in {source}; a run would stop on them before any "
            "session is paid for (the task checks run once the config is sound)",
            file=sys.stderr,
        )
        return 1
    arms = ", ".join(config["selected_arms"] or list(config["arms"]))
    print(
        f"{source}: experiment {config['experiment']}: {len(selected)} task(s), arms {arms}, "
        f"{config['evolution']['generations']} generation(s)" + _anchor_text(config, selected)
    )
    warnings = (
        found.warnings + preflight.task_repository_warnings(selected) + _generation_warnings(config, len(selected))
    )
    for warning in warnings:
        print(f"warning: {warning}")
    live_problems: list[str] = []
    if args.live:
        notes, live_problems = preflight.live_check(config)
        for line in notes + live_problems:
            print(line)
    outcome = _check_tasks_of(config, selected, Path(layout.results_root(config["experiment"])))
    problems = len(live_problems) + outcome.refused
    warned = len(warnings) + outcome.warnings
    if problems:
        print(
            f"check: {_count(problems, 'problem')} in {source}; a run would stop on them before any session is "
            "paid for",
            file=sys.stderr,
        )
        return 1
    print(f"check: no problems in {source}" + (f" ({_count(warned, 'warning')})" if warned else ""))
    return 0


def _anchor_text(config: dict[str, Any], selected: list[dict[str, Any]]) -> str:
    """What each generation's batch costs beside its candidates: the anchor's sessions (none without evolution)."""
    from skillbench.reporting import progress

    work = progress.planned_work(config, [task["id"] for task in selected])
    if not work["generations"] or not work["anchor_arms"]:
        return ""
    candidate = sum(cell["sessions"] for cell in work["candidate_cells_per_generation"])
    return (
        f"; each generation's candidates ({candidate} sessions at most) run beside an anchor of "
        f"{work['anchor_sessions_per_generation']} sessions of {', '.join(work['anchor_arms'])} "
        "(generation 0's is the sweep's)"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _layers(configfiles: list[Path]) -> list[Path]:
    from skillbench.experiment.runrecord import config_layers

    return config_layers(configfiles, DEFAULT_CONFIG)


# Run-to-run noise assumed when no earlier rows measure it: a relative sd of about 0.3, typical of real sessions.
ASSUMED_RUN_VARIANCE = 0.094
# The pilot sweep `estimate` recommends: the fewest runs per (task, arm) that measure how runs differ.
PILOT_RUNS = 2


def _design_lines(
    config: dict[str, Any],
    work: dict[str, Any],
    rows: list[dict[str, Any]],
    source: Path,
    *,
    saving_pct: float,
    shared_sd: float,
) -> list[str]:
    """What design the gate needs to promote a true ``saving_pct`` saving 80 % of the time in the experiment's last
    generation: with the suite's tasks, and the cheapest (more tasks beat more runs once (task, arm)s share effects)."""
    from skillbench.decision import gate
    from skillbench.experiment import configcheck
    from skillbench.reporting import progress

    policy = gate.resolve_policy(dict(config["gate"]))
    if policy.rule != "noise_aware":
        return []
    generation = max(work["generations"] - 1, 0)
    noise = progress.measured_noise(rows, policy.metric)
    measured = noise is not None
    variance, efficiency = _noise_terms(noise)
    common = {
        "saving_pct": saving_pct,
        "run_variance": variance,
        "spend_efficiency": efficiency,
        "shared_sd": shared_sd,
        "policy": policy,
        "generation": generation,
    }
    suite = progress.recommend_design(**common, tasks=len(work["tasks"]))
    best = progress.recommend_design(**common)
    alpha = gate.generation_alpha(policy, generation)
    if noise:
        noise_text = f"run-to-run sd {variance**0.5:.2f} measured over {noise['cells']} cells under {source}"
    elif rows:
        # Rows of one run per (task, arm) price the sessions but say nothing of how runs differ.
        noise_text = (
            f"run-to-run sd {variance**0.5:.2f} assumed: the {len(rows)} earlier row(s) under {source} hold one run "
            "per (task, arm), and one run cannot measure run-to-run noise"
        )
    else:
        noise_text = f"run-to-run sd {variance**0.5:.2f} assumed (no earlier rows under {source})"
    lines = [
        f"  design for a {saving_pct:g}% saving at 80% power in generation {generation} (alpha {alpha:.4g}; "
        f"{noise_text}; effects shared by a (task, arm)'s runs sd {shared_sd:g}, --shared-sd):"
    ]
    tasks = len(work["tasks"])
    if suite is None:
        lines.append(f"    with these {tasks} tasks: out of reach within 30 runs per (task, arm); add tasks")
    else:
        lines.append(f"    with these {tasks} tasks: runs: {suite['runs']} (power {suite['power']:.2f})")
    runs = configcheck.most_runs(config["runs"])
    needed = progress.tasks_needed(**common, runs=runs)
    if needed is None:
        lines.append(f"    with runs: {runs} per (task, arm): out of reach within 200 tasks")
    else:
        more = needed["tasks"] - tasks
        lines.append(
            f"    with runs: {runs} per (task, arm): {needed['tasks']} tasks reach 80% power (power "
            f"{needed['power']:.2f}); the suite has {tasks}"
            + (f": add {more} more (mine further, or write them)" if more > 0 else ": enough")
        )
    if best is not None:
        lines.append(
            f"    cheapest: {best['tasks']} tasks × {best['runs']} runs per (task, arm) (power {best['power']:.2f}); "
            "only more tasks average away what a (task, arm)'s runs share: with --shared-sd, more tasks beat more runs"
        )
    if not measured:
        lines.append(
            f"    (run a small sweep of {PILOT_RUNS} runs first to measure the noise: the recommendation then uses it)"
        )
    warnings = progress.generation_warnings(
        policy,
        generations=work["generations"],
        tasks=tasks,
        runs=runs,
        saving_pct=saving_pct,
        saving_key="--saving",
        run_variance=variance,
        spend_efficiency=efficiency,
        shared_sd=shared_sd,
    )
    return lines + [f"  warning: {warning}" for warning in warnings]


def _noise_terms(noise: dict[str, Any] | None) -> tuple[float, float]:
    """The run variance and spend efficiency a design is sized for: measured from earlier rows, else assumed."""
    if noise is None:
        return ASSUMED_RUN_VARIANCE, 1.0
    return noise["run_variance"], noise["spend_efficiency"]


def _generation_warnings(config: dict[str, Any], task_count: int) -> list[str]:
    """`check`'s warning per generation whose design cannot pass the resolution test or has under 20% power for
    the configured minimum saving (`gate.min_improvement_pct`), for the run noise of the experiment's earlier rows
    (else the assumed noise)."""
    from skillbench.base import layout
    from skillbench.decision import gate
    from skillbench.experiment import configcheck
    from skillbench.reporting import progress

    policy = gate.resolve_policy(dict(config["gate"]))
    rows, _ = progress.earlier_costs(Path(layout.results_root(config["experiment"])))
    variance, efficiency = _noise_terms(progress.measured_noise(rows, policy.metric))
    return progress.generation_warnings(
        policy,
        generations=config["evolution"]["generations"],
        tasks=task_count,
        runs=configcheck.most_runs(config["runs"]),
        saving_pct=policy.min_improvement_pct,
        saving_key="gate.min_improvement_pct",
        run_variance=variance,
        spend_efficiency=efficiency,
        shared_sd=0.0,
    )


@dataclass(frozen=True)
class _TaskChecks:
    """What the task checks found: how many tasks were refused, how many warnings binding them printed."""

    refused: int
    warnings: int


def _check_tasks_of(config: dict[str, Any], selected: list[dict[str, Any]], results_root: Path) -> _TaskChecks:
    """Bind and check every selected task (as `check_task` does before a run); one line per task. A check that
    passed with the same inputs (the run's check.json, or an earlier `skillbench check`'s) is reused, not run."""
    import tempfile

    from skillbench.base import layout
    from skillbench.execution import environment
    from skillbench.experiment.settings import check_settings
    from skillbench.grading import taskcheck
    from skillbench.grading.binding import bind_task

    suite = config["tasks"]["suite"]
    settings = check_settings(config)
    secrets = environment.secrets(config["model"]["api_key_env"])
    refused = warned = 0
    contained: bool | None = None
    for task in selected:
        with tempfile.TemporaryDirectory(prefix="skillbench-check-tasks-") as scratch:
            try:
                bound = bind_task(
                    task,
                    suite=Path(suite),
                    template_dir=Path(scratch) / "template",
                    oracle_dir=Path(scratch) / "oracle",
                )
                for warning in bound.warnings:
                    print(warning)
                warned += len(bound.warnings)
                binding = bound.binding
                solution = taskcheck.solution_bytes(task, Path(suite), binding)
                digest = taskcheck.inputs_digest(task, binding, solution, settings)
                reused = _reusable_check(results_root, task["id"], digest)
                if reused is not None:
                    print(f"{reused['summary']} (reused: nothing it depends on changed since {reused['path']})")
                    continue
                if contained is None:
                    contained = _enter_check_sandbox(config)
                if not contained:
                    refused += 1
                    continue
                document = taskcheck.check_task(
                    task,
                    binding,
                    settings=settings,
                    template=Path(scratch) / "template",
                    oracle_snapshot=Path(scratch) / "oracle",
                    solution=solution,
                    secrets=secrets,
                    side_by_side=True,
                )
            except (artifacts.ArtifactError, ValueError, OSError, RuntimeError) as exc:
                print(f"{task['id']}: REFUSED — the check could not run: {exc}")
                refused += 1
                continue
        print(document["summary"])
        if not document["ok"]:
            refused += 1
            for problem in document["problems"]:
                print("  " + problem.replace("\n", "\n  "))
            continue
        try:
            target = Path(layout.checked_task(results_root, task["id"]))
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            artifacts.write_artifact(target, document, "task-check", mode=0o600)
        except OSError:
            pass  # a check that cannot be kept is run again next time
    return _TaskChecks(refused, warned)


def _reusable_check(results_root: Path, task_id: str, digest: str) -> dict[str, Any] | None:
    """A passed check of ``task_id`` with inputs ``digest``: the run's own, else an earlier `skillbench check`'s."""
    from skillbench.base import layout

    for path in (Path(layout.task_check(results_root, task_id)), Path(layout.checked_task(results_root, task_id))):
        if not path.is_file():
            continue
        try:
            document = artifacts.read_artifact(path, "task-check")
        except (artifacts.ArtifactError, OSError):
            continue
        if document.get("ok") and document.get("inputs_sha256") == digest:
            return {**document, "path": str(path)}
    return None


def _enter_check_sandbox(config: dict[str, Any]) -> bool:
    """Before the first task check that runs: the sandbox works here, and the disk quota's mount namespace."""
    from skillbench import preflight
    from skillbench.execution import quota
    from skillbench.experiment.settings import check_settings

    try:
        preflight.check_containment(config)
        if quota.disk_quota_mb(check_settings(config).sandbox):
            quota.enter_private_mounts()
    except (artifacts.ArtifactError, ValueError, OSError, RuntimeError) as exc:
        print(f"sandbox: {exc}")
        return False
    return True


def _script_init(args: argparse.Namespace) -> int:
    """A skeleton model script for the experiment's selected tasks and session roles (and its proposer)."""
    from skillbench.experiment import arms as arm_config
    from skillbench.experiment import configcheck, modelscript
    from skillbench.experiment import suite as tasks

    try:
        config = configcheck.load_config(*_layers(args.configfile))
        suite = config["tasks"]["suite"]
        selected = tasks.select_tasks(
            tasks.load_suite(suite),
            include_expensive=config["tasks"]["include_expensive"],
            only=config["tasks"]["only"],
        ).tasks
        incumbent = arm_config.selected_arms(config)
        sessions: dict[str, dict[str, Any]] = {}
        for arm in incumbent:
            for session in config["arms"][arm]["sessions"]:
                sessions.setdefault(session["role"], session)
        files = {task["id"]: _existing_paths(task, Path(suite)) for task in selected}
    except (artifacts.ArtifactError, ValueError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    evolution = config["evolution"]
    proposer = evolution["generations"] > 1 or (evolution["generations"] == 1 and not evolution["initial_overlay"])
    evolved = [
        skill
        for arm in arm_config.evolution_arms(config)
        for skill in arm_config.arm_skills(config, arm)
        if skill in config["skills"]["evolvable"]
    ]
    document = modelscript.skeleton(
        selected,
        files,
        sessions,
        proposer_skill=evolved[0] if proposer and evolved else None,
        skills_root=config["skills"]["root"],
    )
    out = args.out or Path(config["model"]["script"] or Path(suite).parent / "model-script.yaml")
    if out.exists() and not args.force:
        print(f"{out} exists; pass --force to replace it, or --out to write the skeleton elsewhere", file=sys.stderr)
        return 1
    header = (
        "# A skeleton written by `skillbench script init`: per task and session role, the skill, a read of each\n"
        "# file the task's prompt and verify name, the verify command and a closing text. Write each task's change\n"
        "# as an Edit step after its reads (`{name: Edit, input: {file_path, old_string, new_string}}`), and shape\n"
        '# what differs between arms with `when:`/`unless:` phrases of the skill text (config/README.md, "The\n'
        '# scripted model"). `steps:` lists are shared: `- use: <name>` plays one in place.\n'
    )
    artifacts.atomic_write_text(out, header + modelscript.skeleton_yaml(document))
    roles = ", ".join(sessions)
    print(
        f"wrote {out}: {len(selected)} task(s) × roles {roles}" + (", and a proposer" if "proposer" in document else "")
    )
    unread = [task_id for task_id, found in files.items() if not found]
    if unread:
        print(f"  no file named in the prompt or verify of {', '.join(unread)} was found in its target: add Read steps")
    check = [progress_command("skillbench"), "check", *_configfile_args([str(path) for path in args.configfile])]
    print(f"  next: add each task's change (an Edit step after its reads), then {shlex.join(check)}")
    return 0


def progress_command(name: str) -> str:
    """``name`` as the command beside this one (the checkout's .venv/bin), as every printed command names it."""
    from skillbench.reporting import progress

    return progress.command_beside(sys.argv[0], name)


def _existing_paths(task: dict[str, Any], suite: Path) -> list[str]:
    """The files a task's prompt, setup and verify name that exist in its target (snapshot folder or repo at ref)."""
    from skillbench.experiment import modelscript

    named = modelscript.named_paths(task.get("prompt", ""), task.get("setup") or "", task.get("verify", ""))
    if not named:
        return []
    if "snapshot" in task:
        base = suite.parent / task["snapshot"]
        return [path for path in named if (base / path).is_file()]
    from skillbench.execution import repo

    with repo.open_target(Path(task["repo"]).expanduser().resolve()) as target:
        sha = target.resolve(task.get("ref", "HEAD"))
        listing = target.git(["ls-tree", "-r", "--name-only", sha], capture_stdout_bytes=64 * 1024 * 1024)
    present = set((listing.stdout_capture or b"").decode("utf-8", "replace").splitlines())
    return [path for path in named if path in present]


def _init(args: argparse.Namespace) -> int:
    """A project folder of the user's own, and the commands to go on with, each as it works from there."""
    from skillbench.experiment import project

    try:
        made = project.init_project(args.folder, skills=args.skills, experiment=args.experiment)
    except (artifacts.ArtifactError, ValueError, OSError) as exc:
        print(f"skillbench init: {exc}", file=sys.stderr)
        return 1
    tools = Path(sys.argv[0]).absolute().parent
    skillbench = str(tools / "skillbench")
    snakemake = str(tools / "snakemake") if (tools / "snakemake").exists() else "snakemake"
    repository = "a new git repository, committed" if made.new_repository else "your repository (commit the files)"
    print(
        f"skillbench: made a project in {made.folder} ({repository}): Snakefile (skillbench as a module), "
        f"config/config.yaml (what differs), tasks/tasks.yaml, .claude/skills ({', '.join(made.skills)}), "
        "profiles/default (loaded by snakemake in that folder)"
    )
    steps = [
        f"cd {shlex.quote(str(made.folder))}",
        'write the tasks in tasks/tasks.yaml (the example there; config/README.md, "Task suites")',
        f"{shlex.quote(skillbench)} script init    # the scripted model's skeleton: add each task's change",
        f"{shlex.quote(skillbench)} check",
        f"{shlex.quote(snakemake)} --cores 2",
        f"{shlex.quote(skillbench)} status    # while it runs or after: cells done, spend, what to do next",
    ]
    if not made.new_repository:
        steps.insert(
            1, "git add Snakefile config tasks profiles .gitignore && git commit   # the skills must be committed"
        )
    print("next:")
    for number, step in enumerate(steps):
        print(f"  {number}. {step}" if number else f"  {step}")
    return 0


def _configfile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="extra config files, merged over config/config.yaml as snakemake --configfile does",
    )


def _mine(args: argparse.Namespace) -> int:
    """`skillbench tasks mine`: the suite and its yield report, or one line naming the problem (exit 1)."""
    from skillbench.execution import environment
    from skillbench.experiment import configcheck
    from skillbench.reporting import progress
    from skillbench.tasksupply import miner

    options = miner.MineOptions(
        repo=args.repo,
        out=args.out,
        since=args.since,
        until=args.until,
        max_tasks=args.max,
        paths=tuple(args.paths),
        test_command=args.test_command,
        prompt=args.prompt,
        jobs=args.jobs,
    )
    try:
        config = configcheck.load_config(*_layers(args.configfile))
        _enter_sandbox(config)
        document = miner.mine(
            options,
            config,
            skillbench_command=progress.command_beside(sys.argv[0], "skillbench"),
            api_key=environment.api_key(config["model"]["api_key_env"]),
        )
    except (artifacts.ArtifactError, ValueError, OSError, RuntimeError) as exc:
        print(f"skillbench tasks mine: {exc}", file=sys.stderr)
        return 1
    print(
        f"mined {args.repo}: {document['scanned']} commit(s) scanned, {document['candidates']} candidate(s), "
        f"{document['accepted']} task(s) accepted in {document['wall_s']:.0f} s; "
        f"report: {args.out / 'mining-report.md'}"
    )
    if not document["accepted"]:
        print("no candidate became a task: see the report for each rejection and its reason", file=sys.stderr)
        return 1
    print(f"next: {document['commands']['check']}\n      {document['commands']['estimate']}")
    return 0


def _enter_sandbox(config: dict[str, Any]) -> None:
    """What a command that runs task checks needs first: working containment and, with a disk quota, this process's
    own mount namespace (as `skillbench check` does)."""
    from skillbench import preflight
    from skillbench.execution import quota
    from skillbench.experiment.settings import check_settings

    preflight.check_containment(config)
    if quota.disk_quota_mb(check_settings(config).sandbox):
        quota.enter_private_mounts()


def _tasks(args: argparse.Namespace) -> int:
    if args.tasks_command == "mine":
        return _mine(args)
    return _import(args)


def _import(args: argparse.Namespace) -> int:
    """`skillbench tasks import`: a suite translated from another format, checked, or one line per refusal."""
    from skillbench.experiment import configcheck
    from skillbench.reporting import progress
    from skillbench.tasksupply import importers

    try:
        config = configcheck.load_config(*_layers(args.configfile))
        source = importers.Source(
            harbor=tuple(args.harbor or ()),
            swebench=args.swebench,
            repo=args.repo,
            plugin_eval=args.plugin_eval,
            skill_creator=args.skill_creator,
            skill=args.skill,
        )
        importers.check_source(source)
        _enter_sandbox(config)
        made = importers.import_suite(
            source, args.out, config, skillbench_command=progress.command_beside(sys.argv[0], "skillbench")
        )
    except (artifacts.ArtifactError, ValueError, OSError, RuntimeError) as exc:
        print(f"skillbench tasks import: {exc}", file=sys.stderr)
        return 1
    for line in made.lines:
        print(line)
    print(f"next: {made.commands['check']}\n      {made.commands['estimate']}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give 1 or more")
    return value


def _tasks_parser(commands: Any) -> None:
    tasks = commands.add_parser("tasks", help="make task suites: mine a repository's history, or import other formats")
    which = tasks.add_subparsers(dest="tasks_command", required=True)
    mine = which.add_parser(
        "mine", help="tasks from commits that change source and tests (refs under refs/skillbench/ only)"
    )
    mine.add_argument("--repo", type=Path, required=True, help="a local git repository with its history")
    mine.add_argument("--out", type=Path, required=True, help="the suite folder to write (tasks.yaml and the rest)")
    mine.add_argument("--since", help="stop at this ref (it and its history are not mined)")
    mine.add_argument("--until", help="start from this ref (default HEAD)")
    mine.add_argument("--max", type=int, help="stop after this many accepted tasks")
    mine.add_argument("--paths", nargs="+", default=[], metavar="GLOB", help="source files that count (fnmatch globs)")
    mine.add_argument(
        "--test-command",
        dest="test_command",
        help="how the project runs pytest (default: python3 -m pytest; PYTHONPATH=src … for a src/ layout)",
    )
    mine.add_argument(
        "--prompt",
        choices=["agent", "commit-message"],
        default="agent",
        help="agent: a session writes the issue a user would file (default); commit-message: subject and body",
    )
    mine.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        help="candidates checked at a time (default 1; each runs its base and solution side by side)",
    )
    imports = which.add_parser("import", help="tasks from Harbor, SWE-bench, claude plugin eval or skill-creator files")
    kinds = imports.add_mutually_exclusive_group(required=True)
    kinds.add_argument("--harbor", type=Path, nargs="+", metavar="DIR", help="Harbor task directories")
    kinds.add_argument("--swebench", type=Path, metavar="FILE", help="SWE-bench instances (JSON or JSON lines)")
    kinds.add_argument("--plugin-eval", dest="plugin_eval", type=Path, metavar="DIR", help="a plugin's evals/ folder")
    kinds.add_argument(
        "--skill-creator", dest="skill_creator", type=Path, metavar="FILE", help="skill-creator trigger queries"
    )
    imports.add_argument("--repo", type=Path, help="--swebench: the local clone of the instances' repository")
    imports.add_argument("--skill", help="--skill-creator: the skill the queries are about (default: the file's)")
    imports.add_argument("--out", type=Path, required=True, help="the suite folder to write")
    for parser in (mine, imports):
        parser.add_argument(
            "--configfile",
            type=Path,
            action="append",
            default=[],
            help="config files for the sandbox, model and agent (merged over config/config.yaml)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skillbench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser(
        "validate",
        help="check an artifact (JSON or JSONL) or a config, task suite or model script (YAML) against its schema",
    )
    validate.add_argument("kind", help="artifact kind, e.g. result-row, cell-record, promotion")
    validate.add_argument("file", type=Path)
    commands.add_parser("kinds", help="list the artifact kinds")
    regrade = commands.add_parser("gate", help="regrade a generation's results.jsonl offline")
    regrade.add_argument("results", type=Path, help="gen<N>/results.jsonl")
    regrade.add_argument("--out", type=Path, required=True, help="where to write promotion.json")
    regrade.add_argument("--overlay", type=Path, help="overlay.json (default: beside the results)")
    regrade.add_argument("--bindings", type=Path, help="tasks/bindings.json (default: ../tasks/bindings.json)")
    regrade.add_argument("--configfile", type=Path, help="take the policy from this config's gate section")
    regrade.add_argument(
        "--rule",
        choices=["noise_aware", "upstream"],
        help=f"decision rule (default: the config's, else {gate_default('rule')}); see docs/gate.md",
    )
    regrade.add_argument("--metric", choices=["cost_usd", "output_tokens", "duration_s", "num_turns"])
    regrade.add_argument("--min-runs", dest="min_runs", type=int)
    regrade.add_argument("--min-improvement-pct", dest="min_improvement_pct", type=float)
    regrade.add_argument("--max-task-regression-pct", dest="max_task_regression_pct", type=float)
    regrade.add_argument("--max-failed-task-regression-pct", dest="max_failed_task_regression_pct", type=float)
    regrade.add_argument("--min-gated-task-ratio", dest="min_gated_task_ratio", type=float)
    regrade.add_argument(
        "--alpha",
        type=float,
        help=f"the experiment's false-promotion rate (noise_aware rule; default {gate_default('alpha')})",
    )
    regrade.add_argument(
        "--quality-margin-pct",
        dest="quality_margin_pct",
        type=float,
        help="non-inferiority margin of the resolution rate in points "
        f"(noise_aware rule; default {gate_default('quality_margin_pct'):g})",
    )
    regrade.add_argument(
        "--objective",
        choices=["total_spend", "per_task"],
        help=f"what cheaper means (noise_aware; default {gate_default('objective')})",
    )
    regrade.add_argument(
        "--generation-spending",
        dest="generation_spending",
        choices=["halving", "none"],
        help=f"alpha over generations: halving or none (default {gate_default('generation_spending')})",
    )
    regrade.add_argument(
        "--across-agents",
        dest="across_agents",
        choices=["all", "any"],
        help="how the pairs of several agent CLIs combine: every agent's pair promotes (all), or one survives Holm's "
        f"correction and every other is no worse (any) (default {gate_default('across_agents')})",
    )
    regrade.add_argument(
        "--resolution-cost-margin-pct",
        dest="resolution_cost_margin_pct",
        help="spend rise a promotion on resolution alone may show, in percent, or none "
        f"(default {gate_default('resolution_cost_margin_pct'):g})",
    )
    regrade.add_argument(
        "--generation", type=int, help="the generation whose share of alpha to spend (default: the overlay's)"
    )
    regrade.add_argument(
        "--accept-flag",
        dest="accept_flag",
        action="append",
        choices=list(FLAG_CATEGORIES),
        help="a content-flag category to accept (repeatable; default: the config's evolution.accept_flags)",
    )
    regrade.add_argument("--require-confidence", action="store_true")
    regrade.add_argument("--allow-unsandboxed", action="store_true")
    regrade.add_argument(
        "--runs",
        help="the run design to replay: an integer (fixed) or a JSON mapping "
        '{"min": 2, "max": 10, "step": 1} (sequential; default: the config\'s runs)',
    )
    promote = commands.add_parser(
        "apply",
        help="show a promoted candidate's diff and content flags, then write it into the skills (one transaction) "
        "with --yes or a confirmation",
    )
    promote.add_argument("results_dir", type=Path, help="results/<experiment>")
    promote.add_argument("--yes", action="store_true", help="write without asking (after printing the diff and flags)")
    promote.add_argument("--dry-run", dest="dry_run", action="store_true", help="check and print; write nothing")
    _configfile_option(promote)
    promote.add_argument("--repository", type=Path, default=Path("."))
    status = commands.add_parser("status", help="progress of a run from the files on disk (during or after it)")
    status.add_argument(
        "results_dir",
        type=Path,
        nargs="?",
        help="results/<experiment> (default: the run under results/ that started last)",
    )
    estimate = commands.add_parser(
        "estimate", help="cells, sessions and expected cost a config implies, and the design the gate needs"
    )
    estimate.add_argument("--saving", type=float, default=15.0, help="saving (%%) the design must detect (default 15)")
    estimate.add_argument(
        "--shared-sd",
        dest="shared_sd",
        type=float,
        default=0.0,
        help="sd of the effect every run of one (task, arm) shares, on the log scale (default 0)",
    )
    _configfile_option(estimate)
    estimate.add_argument(
        "--results", type=Path, help="price from the rows under this results folder (default: results/<experiment>)"
    )
    init = commands.add_parser(
        "init", help="a project folder of your own: a git repository using skillbench as a module, your skills"
    )
    init.add_argument("folder", type=Path, help="a new (or empty) folder, or a git repository of yours")
    init.add_argument("--skills", type=Path, help="a folder of skills (<skill>/SKILL.md) to copy into .claude/skills")
    init.add_argument("--experiment", help="the experiment's name (default: the folder's)")
    script = commands.add_parser("script", help="the scripted model's script of an experiment")
    script_commands = script.add_subparsers(dest="script_command", required=True)
    script_init = script_commands.add_parser(
        "init",
        help="write a skeleton per selected task and session role (the skill, the files the task names, verify)",
    )
    _configfile_option(script_init)
    script_init.add_argument(
        "--out", type=Path, help="where to write it (default: model.script, else beside the suite)"
    )
    script_init.add_argument("--force", action="store_true", help="replace an existing script")
    export = commands.add_parser("export", help="a results folder in another tool's format (Inspect eval logs)")
    export.add_argument("--inspect", action="store_true", required=True, help="one .eval per (generation, arm)")
    export.add_argument("results_dir", type=Path, help="results/<experiment>")
    export.add_argument("--out", type=Path, help="a new or empty folder (default: RESULTS_DIR/inspect)")
    for name, summary in (
        (
            "check",
            "every check a run makes before its first session (config, model script, skills, overlay against "
            "the arms, budget, arms/MCP/plugins) and the task checks; one line per problem, exit 1 on any",
        ),
        ("check-tasks", "the same as `check` (kept for older scripts)"),
    ):
        check = commands.add_parser(name, help=summary)
        _configfile_option(check)
        check.add_argument("--task", action="append", default=[], help="check only this task id (repeatable)")
        check.add_argument("--all", action="store_true", help="include tasks marked expensive")
        check.add_argument(
            "--live",
            action="store_true",
            help="with a real provider, one minimal request per model through the gateway (a bad key, a missing "
            "model or no access is one line)",
        )
    _tasks_parser(commands)
    return parser


def _model_price(config: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The price of the config's model and the label of the table it comes from (`agent.prices`, source included)."""
    from skillbench.execution.price_tables import PriceTableError
    from skillbench.execution.pricing import price_book
    from skillbench.experiment.settings import price_settings

    settings = price_settings(config["agent"]["prices"])
    try:
        book = price_book(settings)
    except PriceTableError:
        return None, settings.table
    model = config["model"]["name"]
    return book.get(model), book.label(model)


def _export(args: argparse.Namespace) -> int:
    from skillbench.interop.harbor import ExportError
    from skillbench.interop.inspect_log import export_inspect

    try:
        written = export_inspect(args.results_dir, args.out)
    except (ExportError, artifacts.ArtifactError, OSError) as exc:
        print(f"skillbench export: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    print(
        f"{len(written)} Inspect log(s); open them with: inspect view --log-dir {shlex.quote(str(written[0].parent))}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        return _validate(args.kind, args.file)
    if args.command == "gate":
        return _gate(args)
    if args.command == "apply":
        return _apply(args)
    if args.command == "status":
        return _status(args)
    if args.command == "estimate":
        return _estimate(args)
    if args.command in ("check", "check-tasks"):
        return _check(args)
    if args.command == "export":
        return _export(args)
    if args.command == "tasks":
        return _tasks(args)
    if args.command == "script":
        return _script_init(args)
    if args.command == "init":
        return _init(args)
    if args.command == "kinds":
        print("\n".join(artifacts.schema_kinds()))
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
