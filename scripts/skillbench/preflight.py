"""The checks of an experiment that need no agent session: the one list `workflow/rules/common.smk` runs when the
workflow is parsed and `skillbench check` runs before any spend (`experiment_checks`), so the two never drift.

The config against its schema, the arms (with their MCP servers and plugins), the model's access and the CLI,
the task suite and selection, the skills' format, the design's warnings, the candidate arms, an initial overlay
(the checks `freeze_overlay` runs on every candidate, `checked_overlay`: its content review's refusals stop the run,
its flags are warnings), the budget against the first batch and
the scripted model's script. Each problem is one message naming the file or config key and the fix.
`task_repository_warnings` says when a task repository is not what its cells will run (`skillbench check`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbench.base import layout
from skillbench.base.artifacts import ArtifactError
from skillbench.base.errors import SkillbenchError
from skillbench.decision.gate import check_policy_design, run_design
from skillbench.decision.policy import resolve_policy
from skillbench.evolution.apply import committed_target_digests
from skillbench.execution import access, agents, cgroups, environment, mcp, plugins, price_tables, quota, repo, sandbox
from skillbench.execution.pricing import model_price, price_book
from skillbench.experiment import arms, configcheck, overlay, overlayreview, paths, skillformat
from skillbench.experiment import suite as task_suite
from skillbench.experiment.arms import ArmError, required_candidate_arms
from skillbench.experiment.settings import price_settings, sandbox_settings
from skillbench.experiment.suite import load_suite
from skillbench.grading import oracle
from skillbench.reporting.progress import check_budget


def check_arms(config: dict[str, Any], project_root: Path | None = None) -> None:
    """Every arm's sessions, prompts and tool surfaces, its agent, its MCP servers and its plugins."""
    arms.check_arms(config)
    check_arm_agents(config)
    try:
        mcp.check_mcp_config(config, project_root)
        plugins.check_plugins(config, project_root)
    except (mcp.McpConfigError, plugins.PluginError) as exc:
        raise ArmError(str(exc)) from exc


def check_arm_agents(config: dict[str, Any]) -> None:
    """Each arm's agent has an adapter here, and the adapter runs what the arm asks of it (plugins, MCP servers)."""
    problems = []
    for name, definition in config["arms"].items():
        try:
            agent = agents.arm_agent(config, name)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        for key in ("plugins", "mcp_servers"):
            if definition.get(key) and key not in agent.extensions:
                problems.append(
                    f"config arms.{name}.{key}: the {agent.name} adapter does not give its sessions {key}; remove "
                    f"them from the arm or run it on an agent that does ({_agents_with(key)})"
                )
    if problems:
        raise ArmError("\n".join(problems))


def experiment_models(config: dict[str, Any]) -> list[str]:
    """Every model the experiment's sessions ask for: each selected arm's agent's, and the proposer's."""
    models = [agents.session_model(config, agent) for agent in agents.used_agents(config, arms.selected_arms(config))]
    if config["evolution"]["generations"] > 0:
        models.append(config["evolution"]["proposer_model"] or config["model"]["name"])
    return list(dict.fromkeys(models))


def check_prices(config: dict[str, Any], root: Path = price_tables.PROJECT_ROOT) -> None:
    """Every model the experiment asks for has a price when its cost is real money: with `agent.prices.source`, its
    pinned table is there with its pinned digest, and it (or `usd_per_mtok`) prices each model; with a real
    provider, `usd_per_mtok` does if no table is named. A run that cannot measure its cost is refused before it
    spends: its gate could not decide on cost after the sessions were paid for."""
    prices = config["agent"]["prices"]
    provider = config["model"]["provider"]
    if not prices["source"] and provider == "scripted":
        return
    table = price_tables.load_table(prices["source"], root) if prices["source"] else None
    problems = []
    for model in experiment_models(config):
        if model in prices["usd_per_mtok"] or (table is not None and table.price(model) is not None):
            continue
        if table is not None:
            close = difflib.get_close_matches(model, [name for name in table.entries if table.price(name)], n=3)
            hint = f" (it lists {', '.join(close)})" if close else ""
            problems.append(
                f"config agent.prices.source: the table {prices['source']} ({table.path}, sha256 "
                f"{table.pin.sha256[:16]}…) has no price for model {model}{hint}: name a model it prices, or give "
                f"{model}'s price in agent.prices.usd_per_mtok"
            )
            continue
        pinned = ", ".join(sorted(price_tables.read_pins(root))) or "none"
        problems.append(
            f"config agent.prices.usd_per_mtok: model.provider is {provider} but model {model} has no price "
            f"(usd_per_mtok prices {', '.join(sorted(prices['usd_per_mtok'])) or 'nothing'}): every session's cost "
            "would be unmeasured and the gate could not decide after the run was paid for; name a pinned community "
            f"table in agent.prices.source ({pinned}), or give {model}'s price in agent.prices.usd_per_mtok"
        )
    if problems:
        raise price_tables.PriceTableError("\n".join(problems))


def live_verdict(probe: access.Probe, model: str, upstream: str, key_env: str) -> tuple[bool, str]:
    """(answered, one line) for what the provider said to `skillbench check --live`'s request for ``model``."""
    said = f"{probe.status} {probe.error_type or 'error'}: {probe.message}" if probe.error_type or probe.message else ""
    kind = probe.error_type or ""
    if probe.status < 300:
        cost = "unmeasured" if probe.cost_usd is None else f"${probe.cost_usd:.6f}"
        return True, f"live: model {model} answered through the gateway ({upstream}, the key from {key_env}; {cost})"
    if probe.status == 401 or kind == "authentication_error":
        why = f"the key in {key_env} was refused ({said}): export a valid key"
    elif probe.status == 403 or kind == "permission_error":
        why = f"the key in {key_env} has no access to model {model} ({said}): use a model the account may use"
    elif probe.status == 404 or kind == "not_found_error":
        why = f"no model {model} there ({said}): name a model the API serves (model.name, or agents.<cli>.model)"
    elif probe.status == 502 and kind == "api_error":
        why = f"the API could not be reached ({said}): check model.base_url and the network"
    elif probe.status in (402, 429) or kind in ("billing_error", "rate_limit_error"):
        why = f"the account cannot be charged or is out of quota ({said})"
    else:
        why = f"the request failed ({said})"
    return False, f"live: model {model} at {upstream}: {why}"


def live_check(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(notes, problems) of one minimal request per model the experiment's Anthropic-wire sessions ask for, each
    through a gateway of its own with the key from the harness's environment (`skillbench check --live`)."""
    model = config["model"]
    if model["provider"] == "scripted":
        return ["live: model.provider is scripted: no key and no API to ask (nothing is billed)"], []
    key = environment.api_key(model["api_key_env"])
    if not key:
        return [], []  # check_model_access already said so
    upstream = model["base_url"] or access.ANTHROPIC_API_URL
    prices = price_book(price_settings(config["agent"]["prices"]))
    wanted = {agents.session_model(config, agent): agent.wire_api for agent in _used_agents(config)}
    if config["evolution"]["generations"] > 0:
        wanted.setdefault(model_of_proposer(config), agents.DEFAULT_ADAPTER.wire_api)
    notes, problems = [], []
    for name, wire in wanted.items():
        if wire != "anthropic":
            notes.append(f"live: model {name} not asked (its CLI speaks the {wire} wire; only Anthropic's is probed)")
            continue
        if model_price(prices, name) is None:
            # The gateway would refuse it before anything went upstream, as it refuses it in a run.
            notes.append(f"live: model {name} not asked (it has no price in the price table, agent.prices)")
            continue
        try:
            probe = access.probe_model(upstream=upstream, api_key=key, model=name, prices=prices)
        except (SkillbenchError, OSError) as exc:
            problems.append(f"live: model {name} at {upstream}: the request could not be made ({exc})")
            continue
        answered, line = live_verdict(probe, name, upstream, model["api_key_env"])
        (notes if answered else problems).append(line)
    return notes, problems


def model_of_proposer(config: dict[str, Any]) -> str:
    return str(config["evolution"]["proposer_model"] or config["model"]["name"])


def _used_agents(config: dict[str, Any]) -> list[agents.AgentAdapter]:
    return agents.used_agents(config, arms.selected_arms(config))


def price_provenance(config: dict[str, Any]) -> dict[str, str] | None:
    """What run.json records of `agent.prices.source`: the table's source, file and pinned digest (None without)."""
    source = config["agent"]["prices"]["source"]
    if not source:
        return None
    table = price_tables.load_table(source)
    return {"source": source, "path": str(table.path), "sha256": table.pin.sha256}


def _agents_with(extension: str) -> str:
    return ", ".join(sorted(name for name, agent in agents.ADAPTERS.items() if extension in agent.extensions))


def suite_oracles(suite: str) -> list[tuple[str, bytes]]:
    """Every hidden answer the task suite declares (selected or not), as (label, bytes), read from its sources: a
    code task's oracle files; a review task's labels and reference review (not the change it reviews, which every
    session sees)."""
    found: list[tuple[str, bytes]] = []
    for task in load_suite(suite):
        entries = [
            entry for entry in task_suite.hidden_files(task) if entry["target"] != task_suite.REVIEW_CHANGE_TARGET
        ]
        if task_suite.is_review_task(task) and "review" in (task.get("solution") or {}):
            entries.append({"source": task["solution"]["review"], "target": "reference-review.json"})
        files = oracle.capture_oracle(Path(suite).parent, entries)
        found += [(f"{target} of task {task['id']}", payload) for target, payload in files]
    return found


@dataclass(frozen=True)
class CheckedOverlay:
    """An overlay that passed every check a candidate must pass before any cell: its files, the skills it touches,
    the paired candidate arms, the promotion targets and their committed digests, its content review (no refusal,
    its flags) and the task tools the review allowed."""

    files: list[tuple[str, bytes]]
    touched: set[str]
    candidates: list[str]
    targets: list[str]
    bases: dict[str, Any]
    review: overlayreview.ContentReview
    task_tools: list[str]
    incumbent: dict[str, bytes | None]


def checked_overlay(
    source: str,
    skills: dict[str, Any],
    oracles: list[tuple[str, bytes]],
    paired_arms: Callable[[set[str]], list[str]],
    repository: str,
    task_tools: list[str],
) -> CheckedOverlay:
    """Every check a candidate must pass before any cell: no oracle content, nothing its content review refuses
    (against the incumbent skill files, with `task_tools` the task's own programs), the skill format, a real
    change, the experiment's paired arms (`paired_arms` of the touched skills), bound targets."""
    files = overlay.overlay_files(Path(source), skills["evolvable"])
    overlay.refuse_oracle_content(files, oracles, source)
    incumbent = overlayreview.incumbent_files(files, Path(skills["root"]))
    review = overlayreview.review_overlay(files, incumbent, task_tools)
    overlayreview.refuse_content(review, source)
    skillformat.check_overlay(Path(source))
    overlay.require_change(files, Path(skills["root"]))
    touched = overlay.touched_skills(files)
    candidates = paired_arms(touched)
    targets = overlay.promotion_targets(files, skills_root=skills["root"], mirrors=skills["mirrors"])
    bases = committed_target_digests(Path(repository), targets)
    return CheckedOverlay(files, touched, candidates, targets, bases, review, list(task_tools), incumbent)


def selected_task_tools(config: dict[str, Any]) -> list[str]:
    """The task's own tools of the experiment: the programs the selected tasks' `setup` and `verify` start."""
    selection = task_suite.select_tasks(
        load_suite(config["tasks"]["suite"]),
        include_expensive=config["tasks"].get("include_expensive", False),
        only=config["tasks"].get("only") or (),
    )
    return overlayreview.suite_task_tools(selection.tasks)


def check_initial_overlay(config: dict[str, Any], repository: str = ".") -> list[str]:
    """Parse time: validate evolution.initial_overlay as freeze_overlay will, so a bad overlay costs no session.
    Returns a warning per flag category the config does not accept (the candidate would run but not promote)."""
    source = config["evolution"]["initial_overlay"]
    if not source or config["evolution"]["generations"] == 0:
        return []
    checked = checked_overlay(
        source,
        config["skills"],
        suite_oracles(config["tasks"]["suite"]),
        lambda touched: required_candidate_arms(config, touched, source),
        repository,
        selected_task_tools(config),
    )
    accepted = config["evolution"].get("accept_flags") or []
    return overlayreview.flag_warnings(checked.review.flags, accepted, source)


def check_seed_results(config: dict[str, Any]) -> None:
    """``evolution.seed_results`` must name another experiment's folder: this experiment's sweep holds generation
    0's anchor (it runs beside generation 0's candidate, which the seed's proposer writes), and its generations
    come after it, so seeding from either would make the run wait for itself."""
    seed = config["evolution"]["seed_results"]
    if not seed or not config["evolution"]["generations"]:
        return
    own = Path(layout.results_root(config["experiment"])).resolve()
    folder = Path(seed).resolve()
    if folder == own or own in folder.parents:
        raise ValueError(
            f"config evolution.seed_results: {seed} is inside this experiment's own results ({own}); generation 0's "
            "proposer must be fed from an earlier experiment: run the sweep under another `experiment` name and "
            "name its sweep folder here"
        )


def check_containment(config: dict[str, Any]) -> None:
    """Once per run, before any session: the sandbox, the per-cell disk quota and the cell's cgroup (its memory and
    process limits) work on this machine."""
    if config["sandbox"]["backend"] != "bwrap":
        return
    sandbox.preflight(config["sandbox"]["bwrap"])
    settings = sandbox_settings(config["sandbox"])
    if quota.disk_quota_mb(settings):
        quota.preflight()
    cgroups.preflight(cgroups.cell_limits(settings, quota.disk_quota_mb(settings)))


def memory_fit_problem(config: dict[str, Any], sessions: int, host_mb: int) -> str | None:
    """Why `sessions` cells at once cannot each have the memory their cgroup allows on a machine with `host_mb` MiB
    (None when they can): a cell's limit is `sandbox.limits.memory_mb` plus its disk quota (a tmpfs, in memory)."""
    settings = sandbox_settings(config["sandbox"])
    disk_mb = quota.disk_quota_mb(settings)
    limits = cgroups.cell_limits(settings, disk_mb)
    if limits is None or limits.memory_bytes is None:
        return None
    cell_mb = limits.memory_bytes // cgroups.MIB
    if sessions * cell_mb <= host_mb:
        return None
    return (
        f"{sessions} concurrent sessions (resources agent_sessions, or the cores) x {cell_mb} MiB per cell "
        f"(sandbox.limits.memory_mb {settings.limits.memory_mb} + sandbox.limits.disk_mb {disk_mb}) need "
        f"{sessions * cell_mb} MiB, more than this machine's {host_mb} MiB: lower sandbox.limits.memory_mb (or "
        "disk_mb), or the session cap (--resources agent_sessions=N)"
    )


def check_host_memory(config: dict[str, Any], sessions: int) -> None:
    """Once per local run: `memory_fit_problem` on this machine (its memory, or its cgroup's limit when lower)."""
    settings = sandbox_settings(config["sandbox"])
    if cgroups.cell_limits(settings, quota.disk_quota_mb(settings)) is None:
        return
    problem = memory_fit_problem(config, sessions, cgroups.host_memory_mb(where=cgroups.placement()))
    if problem is not None:
        raise PreflightError(problem)


class PreflightError(SkillbenchError, ValueError):
    """The experiment cannot run as configured: one line per problem, each naming the file or key and the fix."""


@dataclass
class Preflight:
    """What the checks found: problems (any stops the run before a session), warnings, and the version of each
    agent CLI the selected arms run (Claude Code's always: the proposer runs it)."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    agent_versions: dict[str, str] = field(default_factory=dict)
    # The task suite as loaded and validated (every task, selected or not), so the workflow reads it once.
    suite: list[dict[str, Any]] | None = None

    @property
    def cli_version(self) -> str | None:
        """Claude Code's version (the proposer's CLI)."""
        return self.agent_versions.get(agents.DEFAULT_AGENT)


def _named(message: str, source: str) -> str:
    """A library message names the merged config as `config <key>`; name the user's file instead."""
    return f"{source}: {message.removeprefix('config ')}" if message.startswith("config ") else message


def _model_script(
    config: dict[str, Any], suite: list[dict[str, Any]], selected: list[str], incumbent: list[str]
) -> None:
    generations, initial = config["evolution"]["generations"], config["evolution"]["initial_overlay"]
    suite_tasks = [task["id"] for task in suite]
    configcheck.check_model_script(
        config["model"]["script"] or str(Path(config["tasks"]["suite"]).parent / "model-script.yaml"),
        suite_tasks=suite_tasks,
        selected_tasks=selected,
        arm_roles={name: [session["role"] for session in arm["sessions"]] for name, arm in config["arms"].items()},
        selected_arms=incumbent,
        needs_proposer=generations > 1 or (generations == 1 and not initial),
        replayable=[
            task["id"]
            for task in suite
            if "patch" in (task.get("solution") or {}) or "ref" in (task.get("solution") or {})
        ],
    )


def _agent_versions(config: dict[str, Any]) -> dict[str, str]:
    """Each agent CLI the selected arms run, and Claude Code (the proposer's): found and recent enough."""
    used = agents.used_agents(config, arms.selected_arms(config))
    if agents.DEFAULT_AGENT not in {agent.name for agent in used}:
        used.insert(0, agents.DEFAULT_ADAPTER)
    versions, problems = {}, []
    for agent in used:
        try:
            versions[agent.name] = environment.check_cli(environment.configured_cli(config, agent), agent)
            # What the sandbox will bind is there (e.g. the package Copilot unpacks, provided by setup).
            agent.install(environment.resolve_cli(environment.configured_cli(config, agent), agent=agent))
        except (SkillbenchError, ValueError, OSError) as exc:
            problems.append(str(exc))
    if problems:
        raise ArtifactError("\n".join(problems))
    return versions


def experiment_checks(
    config: dict[str, Any],
    *,
    source: str = "config",
    log_path: str | Path | None = None,
    verbose: bool = False,
    environment_checks: bool = True,
    repository: str = ".",
    config_files: Sequence[str | Path] = (),
) -> Preflight:
    """Every check of the experiment that needs no session, collected (a later check runs when what it reads is
    sound). Fills the schema's defaults into ``config`` in place, as the workflow's parse does.
    ``environment_checks`` adds the model's access and the CLI (left out by an estimate, which runs neither);
    ``config_files`` are the user's config files, so a path written relative to one of them is named as such."""
    found = Preflight()

    def attempt(check: Callable[[], Any]) -> Any:
        try:
            return check()
        except (SkillbenchError, ValueError, OSError) as exc:
            for line in str(exc).splitlines():
                named = _named(line, source)
                # One line per distinct problem: checks that read the same broken key say the same thing.
                if line.strip() and named not in found.problems:
                    found.problems.append(named)
            return None

    try:
        configcheck.validate_config(config, source=source, log_path=log_path, verbose=verbose)
    except configcheck.ConfigError as exc:
        found.problems += str(exc).splitlines()
        return found
    broken_paths = paths.path_problems(config, config_files=config_files)
    found.problems += [_named(line, source) for line in broken_paths.values()]
    attempt(lambda: check_arms(config))
    attempt(lambda: check_prices(config))
    if environment_checks:
        attempt(lambda: environment.check_model_access(config["model"]))
        found.agent_versions = attempt(lambda: _agent_versions(config)) or {}
    suite = None
    if "tasks.suite" not in broken_paths:
        suite = found.suite = attempt(lambda: load_suite(config["tasks"]["suite"]))
    selection = None
    if suite is not None:
        selection = attempt(
            lambda: task_suite.select_tasks(
                suite, include_expensive=config["tasks"]["include_expensive"], only=config["tasks"]["only"]
            )
        )
    incumbent = attempt(lambda: arms.selected_arms(config))
    design = attempt(lambda: run_design(config["runs"]))
    if design is not None:
        attempt(lambda: check_policy_design(resolve_policy(config["gate"]), design))
    if "skills.root" not in broken_paths:
        attempt(lambda: skillformat.check_skill_root(config["skills"]["root"]))
    candidates = attempt(lambda: arms.candidate_arms(config)) if incumbent is not None else None
    if selection is not None:
        found.warnings += configcheck.design_warnings(config, len(selection.tasks))
    if suite is not None and candidates is not None and "evolution.initial_overlay" not in broken_paths:
        found.warnings += attempt(lambda: check_initial_overlay(config, repository)) or []
    attempt(lambda: check_seed_results(config))
    if selection is not None and incumbent is not None and candidates is not None and design is not None:
        task_ids = [task["id"] for task in selection.tasks]
        attempt(lambda: check_budget(config, task_ids, incumbent, candidates, design["looks"][0]))
        if config["model"]["provider"] == "scripted" and "model.script" not in broken_paths:
            attempt(lambda: _model_script(config, suite or [], task_ids, incumbent))
    return found


def job_preflight(config: dict[str, Any]) -> Preflight:
    """The parse of a cluster job, which runs one job of a run the submitting snakemake already checked: fill the
    schema's defaults into ``config`` and read each agent CLI's version (a param of every cell, found as
    `experiment_checks` finds it, so the job's params are the planner's); none of the checks that grow with the
    suite. A problem raises PreflightError."""
    try:
        configcheck.validate_config(config)
        return Preflight(agent_versions=_agent_versions(config))
    except (SkillbenchError, ValueError, OSError) as exc:
        raise PreflightError(str(exc)) from exc


def check_experiment(config: dict[str, Any], **options: Any) -> Preflight:
    """`experiment_checks`, raising PreflightError with every problem (the workflow's parse: no job starts)."""
    found = experiment_checks(config, **options)
    if found.problems:
        raise PreflightError("\n".join(found.problems))
    return found


@dataclass(frozen=True)
class RepositoryState:
    """A task repository as its cells will not see it: where HEAD is, what the task's ref names, what is not
    committed (`git status --porcelain` lines)."""

    head: str
    ref_commit: str
    uncommitted: list[str]


def repository_state(repository: Path, ref: str) -> RepositoryState:
    """HEAD, the commit ``ref`` resolves to, and the uncommitted changes of a task repository.

    The harness's host git with its safe config (no hooks, no fsmonitor, no optional locks), as binding a task
    reads the same repository; a safe-git helper for task repositories (grading/binding.py, execution/repo.py)
    is meant to take over these reads."""
    git = repo.host_git(repository, extra_env={"GIT_OPTIONAL_LOCKS": "0"})
    head = repo.checked(git, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip()
    status = repo.checked(git, "status", "--porcelain=v1", "--untracked-files=normal", "--ignore-submodules=all")
    return RepositoryState(
        head=head,
        ref_commit=repo.resolve_commit(repository, ref),
        uncommitted=[line for line in status.splitlines() if line.strip()],
    )


def task_repository_warnings(
    tasks: list[dict[str, Any]], state: Callable[[Path, str], RepositoryState] = repository_state
) -> list[str]:
    """A warning per task repository (and ref) that has uncommitted changes or whose HEAD is not at the tasks'
    ref: cells run on the committed ref, so neither is benchmarked. Tasks sharing a repository and ref share
    the warning. A mined task's ref (`refs/skillbench/…`) is never checked out: it gets none."""
    groups: dict[tuple[Path, str], list[str]] = {}
    for task in tasks:
        if "repo" in task and not task.get("ref", "HEAD").startswith(repo.MINED_REF_PREFIX):
            groups.setdefault((Path(task["repo"]).expanduser(), task.get("ref", "HEAD")), []).append(task["id"])
    warnings = []
    for (source, ref), ids in groups.items():
        named = f"task{'s' if len(ids) > 1 else ''} {', '.join(ids)}: repository {source}"
        try:
            found = state(source, ref)
        except (SkillbenchError, OSError) as exc:
            warnings.append(f"{named} cannot be read: {exc}")
            continue
        if found.uncommitted:
            shown = ", ".join(line[3:] for line in found.uncommitted[:3])
            more = f" and {len(found.uncommitted) - 3} more" if len(found.uncommitted) > 3 else ""
            warnings.append(
                f"{named} has uncommitted changes ({shown}{more}); cells run on ref {ref} "
                f"({found.ref_commit[:12]}) as committed, without them: commit them to benchmark them"
            )
        if found.head != found.ref_commit:
            warnings.append(
                f"{named} has HEAD at {found.head[:12]}, not at the ref {ref} ({found.ref_commit[:12]}); cells run "
                f"on {ref}: check it out, or set `ref`, if you meant the other"
            )
    return warnings
