"""One cell — (task, arm, run) — end to end: clone, setup, sessions, grading, record.

A cell works in a fresh private folder: a copy of the task's sanitized template, a private
home and tmp, everything run through the cell's sandbox (its own host uid, a cgroup of its own
for its memory and processes: `execution.cgroups`, and a disk quota: `execution.quota`). The
result row follows `schemas/result-row.schema.json`; the record adds timing. How the workspace
the sessions left is judged is the cell's `Grader` (`CellContext.grader`), which the rule step
picks by the task's class (`skillbench.grading.graders`).

What the agent controls never decides the verdict, and never makes the run look like the
harness failed:

* each session gets a fresh home and tmp; the grader's checks get fresh, empty ones too;
* the harness's git after the sessions uses its own copy of the repository
  (`repo.make_harness_git_dir`), so a deleted or corrupted `.git` only adds a diagnostic;
* the workspace is measured host-side with bounded reads (`WorkspaceLimits`): too many or too
  large files end the cell as `workspace-oversized`, a workspace the harness's git cannot read
  as `workspace-tampered` — counted outcomes of the agent, neither excluded nor systemic;
* a verify or oracle run that times out or leaves processes behind is a failed check, not an
  infra error;
* a session that runs into its cell's memory or process limit, floods its event stream past the
  capture, runs its clock out, passes its spend cap or asks for a model without a price ends with
  that counted outcome (`sessions.session_record`), like a full disk quota.

Session, infra and cleanup failures (the harness's own) are raised as `RetryableCellFailure`
until the last attempt, so Snakemake retries the job; the last attempt records the excluded
row instead.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar, cast

from skillbench.base import layout
from skillbench.base.artifacts import ArtifactError, read_regular_file, utc_timestamp
from skillbench.base.process import CANCEL
from skillbench.base.records import SYSTEMIC_ERROR_KINDS, CellRecord, CellTiming, ResultRow, SessionWindow, TaskBinding
from skillbench.base.redaction import redact_text
from skillbench.execution import access, agents, breaker, cgroups, plugins, quota, replay, repo, sessions
from skillbench.execution.access import ModelAccess
from skillbench.execution.agents.base import AgentAdapter
from skillbench.execution.failures import AgentWorkspaceError, CellCancelled, InfraError, RetryableCellFailure
from skillbench.execution.sandbox import AgentInstall, Sandbox, SandboxError, SandboxLimits
from skillbench.execution.scripted_model import ScriptedModel, session_steps
from skillbench.execution.workspace import (
    WorkspaceLimits,
    check_workspace,
    plan_document_change,
    skill_fingerprint,
    workspace_snapshot,
)
from skillbench.experiment import arms as arm_config
from skillbench.experiment.overlay import write_overlay
from skillbench.experiment.settings import CellSettings, PriceSettings

T = TypeVar("T")

MAX_DETAIL_CHARS = 2000


def churn_excludes(skills_root: str) -> tuple[str, ...]:
    """What the agent's change leaves out: plans, and the skills where the cell's agent finds them."""
    return (arm_config.PLAN_DIRECTORY, skills_root)


class Grader(Protocol):
    """How a cell's workspace is judged (one per cell; `skillbench.grading.graders.grader_for` picks it)."""

    # Whether a resolved cell must have changed the code (a review's work is its review, not a change).
    requires_change: bool
    # Whether the sessions' change is measured from the prepared workspace, uncommitted changes included (a review
    # task's change under review is not the agent's), rather than from the clone's HEAD.
    measures_from_workspace: bool

    def prepare_workspace(self, work: CellWork) -> None:
        """Last step of preparing the workspace, after setup and the skills (a review task applies its change)."""

    def before_sessions(self, work: CellWork) -> None:
        """Once the workspace is prepared and measured, before the first session (keep what grading needs)."""

    def session_workspace(self, work: CellWork) -> tuple[bool, list[tuple[Path, str]]]:
        """How the sessions see the workspace: (read-only, the writable (host, sandbox path) binds over it)."""

    def after_session(self, work: CellWork, role: str, home: Path) -> list[str]:
        """Diagnostics for the row about what one session left (`home` is its home on the host)."""

    def grade(self, work: CellWork, row: ResultRow) -> None:
        """Fill the row's verdict: its checks, `resolved`, and the error kind of an unresolved cell."""


@dataclass
class CellContext:
    """Everything a cell needs that is not the task itself. Paths are absolute."""

    settings: CellSettings
    template: Path
    grader: Grader
    run_dir: Path
    agent_install: AgentInstall
    cli_version: str | None
    model_script: dict[str, Any] | None
    api_key: str | None
    skills_source: Path | None = None
    # The agent CLI the arm runs; its skills folder in the clone is where the skills are installed.
    agent: AgentAdapter = agents.DEFAULT_ADAPTER
    overlay: Path | None = None
    overlay_digest: str | None = None
    log: TextIO | None = None
    # The results folder the cell belongs to: the run whose budget its gateway shares (None: no shared budget).
    results_root: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)
    session_windows: list[SessionWindow] = field(default_factory=list)
    # The gateway's ledger of every session the cell ran, in order.
    ledgers: list[dict[str, Any]] = field(default_factory=list)
    # The SKILL.md texts the cell's clone held during its sessions: what the trajectories' skill proof checks a read
    # against once the clone is gone (the Harbor export).
    skill_texts: dict[str, str] = field(default_factory=dict)
    # The task's reference solution, when the model script replays it (`replay: solution`); never in the workspace.
    replayed_solution: bytes | None = None

    @property
    def sections(self) -> dict[str, Any]:
        """The cell's config sections as JSON, for the readers the workflow's parse shares (arms, MCP, plugins)."""
        return self.settings.sections

    @property
    def secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []

    @property
    def skills_root(self) -> str:
        return self.agent.skills_dir


def now_iso(timespec: str = "seconds") -> str:
    return utc_timestamp(timespec=timespec)


def _say(context: CellContext, message: str) -> None:
    if context.log is not None:
        print(redact_text(message, context.secrets), file=context.log, flush=True)


def _tail(text: str, limit: int) -> str:
    return text[-limit:]


def install_skills(clone: Path, source: Path | None, skills_root: str, git: repo.GitRunner) -> None:
    """Commit the incumbent skill family into the clone, so every arm starts from the same skills."""
    if source is None:
        return
    target = clone / skills_root
    if target.is_symlink() or target.is_file():
        raise InfraError(f"the task's {skills_root} is not a directory")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=False)
    repo.commit_all(git, "benchmark incumbent skills")


@dataclass(frozen=True)
class Cell:
    """Which cell: a task (its validated definition and its binding), an arm and a run number."""

    task: dict[str, Any]
    binding: TaskBinding
    arm: str
    run: int

    @property
    def label(self) -> str:
        return f"[{self.task['id']}][{self.arm}][run {self.run}]"


def base_row(cell: Cell, context: CellContext) -> ResultRow:
    settings, sections, task, binding = context.settings, context.sections, cell.task, cell.binding
    return {
        "schema": "result-row/v1",
        "task": task["id"],
        "class": task["class"],
        "run": cell.run,
        "arm": cell.arm,
        "ok": False,
        "resolved": False,
        "authored_tests_passed": False,
        "authored_test_output": "",
        "verify_output": "",
        "oracle_passed": False,
        "oracle_output": "",
        "error_kind": None,
        "error_detail": None,
        "evidence_diagnostics": [],
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": None,
        "cli_cost_usd": None,
        "cost_check": None,
        "duration_s": 0.0,
        "num_turns": 0,
        "session_ids": [],
        "transcript_artifacts": [],
        "transcript_missing": False,
        "skill_invoked": None,
        "tool_use_counts": {},
        "mcp_tool_uses": {},
        "mcp_semantic_errors": {},
        "plugins": _row_plugins(sections, cell.arm),
        "plan_produced": False,
        "diff_files": 0,
        "diff_insertions": 0,
        "diff_deletions": 0,
        "model": agents.session_model(sections, context.agent),
        "effort": settings.model.effort,
        "provider": settings.model.provider,
        "agent": context.agent.name,
        "cli_version": context.cli_version,
        "offered_skills": None,
        "task_ref": binding["ref"],
        "task_base_sha": binding["resolved_sha"],
        "sanitized_task_sha": binding["sanitized_sha"],
        "variant_head_sha": None,
        "task_prompt_digest": binding["prompt_digest"],
        "skill_digest": None,
        "candidate_overlay_digest": context.overlay_digest,
        "oracle_digest": binding["oracle_digest"],
        "oracle_command_digest": binding["oracle_command_digest"],
        "oracle_manifest_digest": binding["oracle_manifest_digest"],
        "sandbox_backend": settings.sandbox.backend,
        "recorded_at": now_iso(),
    }


def _row_plugins(config: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    if not config["arms"].get(arm_config.incumbent_of(arm), {}).get("plugins"):
        return []
    return plugins.provenance(plugins.arm_plugins(config, arm_config.incumbent_of(arm)))


def session_surface(
    sandbox: Sandbox, config: dict[str, Any], arm: str, session: dict[str, Any]
) -> sessions.SessionSurface:
    """A session's tool surface, its arm's MCP servers and plugins, and the binds and environment they need.

    Each MCP server runs in a nested sandbox (`--mcp-config` written here, credential-free); plugins
    come as `--plugin-dir`, bound read-only.
    """
    from skillbench.execution import mcp

    definition = arm_config.arm_definition(config, arm)
    tools, disallowed = mcp.session_surface(config, definition, session)
    servers = mcp.arm_servers(config, definition)
    resolved = mcp.check_mcp_config(config) if servers else {}
    binds: list[tuple[Path, str]] = []
    for name in servers:
        binds += [(Path(host), target) for target, host in resolved[name]["mounts"].items()]
    server_mounts = [target for _host, target in binds]

    def server_argv(name: str, server: dict[str, Any]) -> list[str]:
        return sandbox.mcp_launcher(mcp.launcher_name(name), _mcp_server_argv(sandbox, resolved[name], server))

    plugin_dirs = _plugin_dirs(sandbox, config, arm, binds)
    # Servers connect before the first request (else their tools may be missing from it), and the CLI
    # passes a server no more than the allow-listed environment (the server's argv clears it anyway).
    extra_env = (
        {"MCP_CONNECTION_NONBLOCKING": "0", "MCP_TIMEOUT": "30000", "CLAUDE_CODE_MCP_ALLOWLIST_ENV": "1"}
        if servers
        else {}
    )
    for host, _target in binds:
        sandbox.share_read_only(host)
    return sessions.SessionSurface(
        tools=tools,
        disallowed_tools=disallowed,
        mcp_config=mcp.mcp_config_json(servers, server_argv),
        mcp_servers=list(servers),
        plugin_dirs=plugin_dirs,
        disable_slash_commands=bool(definition.get("disable_slash_commands")),
        binds=binds,
        hidden_from_tools=server_mounts if sandbox.backend == "bwrap" else [],
        extra_env=extra_env,
    )


def _mcp_server_argv(sandbox: Sandbox, resolved: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """The argv that starts one MCP server in its nested sandbox (host paths for the `none` backend)."""
    from skillbench.execution import mcp

    mounts = resolved["mounts"]
    if sandbox.backend == "none":
        args = [_host_path(arg, mounts) for arg in server.get("args") or []]
        env = {key: _host_path(value, mounts) for key, value in mcp.server_environment(server).items()}
        return sandbox.mcp_server_argv(
            command=_host_path(resolved["command"], mounts),
            args=args,
            env=env,
            mounts=[],
            network=True,
            workspace="read-write",
        )
    return sandbox.mcp_server_argv(
        command=resolved["command"],
        args=server.get("args") or [],
        env=mcp.server_environment(server),
        mounts=list(mounts),
        network=server["network"],
        workspace=server["workspace"],
    )


def _plugin_dirs(sandbox: Sandbox, config: dict[str, Any], arm: str, binds: list[tuple[Path, str]]) -> list[str]:
    """The arm's plugins as the CLI sees them: a harness-made copy of each (its allow-listed files only, checked
    against the digest that pins the arm), under bwrap bound read-only (added to `binds`)."""
    plugin_dirs: list[str] = []
    staging = sandbox.private_root / "plugins"
    staging.mkdir(mode=0o755, exist_ok=True)
    for index, plugin in enumerate(plugins.arm_plugins(config, arm_config.incumbent_of(arm))):
        copy = staging / f"{len(list(staging.iterdir()))}"
        plugins.stage_plugin(plugin, copy)
        if sandbox.backend == "bwrap":
            target = plugins.sandbox_path(index)
            binds.append((copy, target))
            plugin_dirs.append(target)
        else:
            plugin_dirs.append(str(copy))
    return plugin_dirs


def _host_path(value: str, mounts: dict[str, str]) -> str:
    """A mount-target path rewritten to its host path (the `none` backend has no mounts)."""
    for target, host in mounts.items():
        if value == target or value.startswith(f"{target}/"):
            return host + value[len(target) :]
    return value


# The most the scripted model reads of one workspace file to rewrite it (a script's files are small).
WORKSPACE_TEXT_BYTES = 1 << 20


def workspace_text(clone: Path, workspace: str) -> Callable[[str], str | None]:
    """What the scripted model reads of the cell's clone (`agents.base.FileText`): the UTF-8 text of a regular file
    at a path as the CLI sees it (under `workspace`, the clone's path in the sandbox), None for any other path, for a
    file that is missing, not UTF-8, larger than `WORKSPACE_TEXT_BYTES`, a symlink, or under a folder that resolves
    outside the clone. The clone is the agent's: the file is read through the one bounded, no-follow reader."""
    root = clone.resolve()

    def read(path: str) -> str | None:
        prefix = workspace.rstrip("/") + "/"
        if not path.startswith(prefix):
            return None
        host = root / path[len(prefix) :]
        folder = host.parent.resolve()
        if not folder.is_relative_to(root):
            return None
        try:
            return read_regular_file(folder / host.name, WORKSPACE_TEXT_BYTES, what="workspace file").decode("utf-8")
        except (ArtifactError, OSError, UnicodeDecodeError):
            return None

    return read


def _scripted_model(
    context: CellContext, cell: Cell, session: dict[str, Any], workspace: str, label: str, clone: Path | None = None
) -> ScriptedModel:
    """The session's scripted model; with `clone` (the host folder the CLI sees as `workspace`) the agent's
    `tool_form` may read the clone's files (`workspace_text`). A task the script replays plays steps made from its
    reference solution and the files as the session finds them."""
    script = context.model_script
    if script is None:
        raise InfraError("model.provider is scripted but no model script was given")
    agent = context.agent
    existing = workspace_text(clone, workspace) if clone is not None else None
    if replay.is_replay(script, cell.task["id"]):
        if context.replayed_solution is None or existing is None:
            raise InfraError(f"the model script replays task {cell.task['id']} but its reference solution is missing")
        try:
            steps = replay.session_steps(
                task=cell.task,
                session=session,
                patch=context.replayed_solution,
                read_text=existing,
                workspace=workspace,
            )
        except replay.ReplayError as exc:
            raise InfraError(f"the model script cannot replay task {cell.task['id']}: {exc}") from exc
    else:
        steps = session_steps(script, cell.task["id"], session["role"])
    return ScriptedModel(
        steps,
        defaults=script.get("defaults", {}),
        variables={"workspace": workspace},
        variation_key=label,
        wire=agent.wire_api,
        tool_form=lambda name, tool_input: agent.tool_form(name, tool_input, existing),
    )


def run_one_session(session: dict[str, Any], prompt: str, *, work: CellWork) -> dict[str, Any]:
    """One session of the cell's arm: its record; its ledger, time and window go to the cell's context."""
    cell, sandbox, context = work.cell, work.sandbox, work.context
    if work.access is None:
        raise InfraError("the cell's sessions have no model gateway")
    surface = session_surface(sandbox, context.sections, cell.arm, session)
    read_only, writable = context.grader.session_workspace(work)
    if read_only or writable:
        surface = replace(surface, read_only_workspace=read_only, writable_binds=[*surface.writable_binds, *writable])
    label = f"{cell.task['id']}/{cell.arm}/run{cell.run}/{session['role']}"
    skills_root = sandbox.clone / context.agent.skills_dir
    context.skill_texts.update(sessions.skill_texts(skills_root, sessions.installed_skills(skills_root)))
    started, window_start = time.monotonic(), now_iso("milliseconds")
    record, ledger = sessions.launch_session(
        sandbox,
        surface,
        label=label,
        prompt=prompt,
        model=agents.session_model(context.sections, context.agent),
        settings=context.settings,
        access=work.access,
        secrets=context.secrets,
        scripted_model=lambda: _scripted_model(context, cell, session, sandbox.workspace, label, sandbox.clone),
        transcript_dir=context.run_dir / "transcripts",
        transcript_prefix=f"{session['role']}",
        log=context.log,
        expected_skill=session.get("skill"),
        agent=context.agent,
    )
    context.timings["sessions"] = context.timings.get("sessions", 0.0) + time.monotonic() - started
    context.ledgers.append({"role": session["role"], **ledger})
    from skillbench.execution.mcp import server_log_tail

    for name, status in record.get("mcp_failed", {}).items():
        tail = server_log_tail(sandbox.home_host, name) or "(the CLI logged nothing for it)"
        _say(context, f"[{label}] MCP server {name} did not start (status {status}); its log tail:\n{tail}")
    context.session_windows.append(
        {"role": session["role"], "started_at": window_start, "finished_at": now_iso("milliseconds")}
    )
    return record


def execute_cell(
    cell: Cell, context: CellContext, private_root: Path, cgroup: cgroups.CellCgroup | None = None
) -> ResultRow:
    """The cell's work, its processes in `cgroup` (when given); raises InfraError/SandboxError/OSError/ValueError for
    harness failures."""
    settings = context.settings
    clone = private_root / "workspace"
    repo.clone_template(context.template, clone)
    sandbox = Sandbox(
        settings.sandbox.backend,
        clone,
        private_root,
        bwrap=settings.sandbox.bwrap,
        agent_install=context.agent_install,
        read_only_paths=[context.skills_root],
        limits=SandboxLimits.of(settings.sandbox.limits),
        cgroup=cgroup,
    )
    try:
        with access.model_access(
            private_root=private_root,
            settings=settings,
            api_key=context.api_key,
            socket_owner=(sandbox.host_uid, sandbox.host_gid) if sandbox.launcher else None,
            results_root=context.results_root,
            job=cell.label,
        ) as model_access:
            work = CellWork(
                sandbox=sandbox,
                cell=cell,
                context=context,
                limits=WorkspaceLimits.of(settings.sandbox.limits),
                skills=arm_config.local_skills(arm_config.arm_skills(context.sections, cell.arm)),
                private_root=private_root,
                disk_mb=quota.disk_quota_mb(settings.sandbox),
                access=model_access,
            )
            return _execute(work)
    finally:
        sandbox.close()


@dataclass
class CellWork:
    """One cell at work: its sandbox and context, the harness's bounds, and the skills whose files it guards."""

    sandbox: Sandbox
    cell: Cell
    context: CellContext
    limits: WorkspaceLimits
    skills: list[str]
    private_root: Path
    # The quota (MB) over everything under `private_root`; 0 when there is none.
    disk_mb: int = 0
    # The cell's gateway: its sessions' only way to the model.
    access: ModelAccess | None = None
    # The evaluated skills' fingerprint once the workspace is prepared; no session may change it.
    skill_digest: str | None = None
    # Every skill the sessions' streams prove invoked, once they ran (None: a stream could not tell).
    skills_invoked: list[str] | None = None

    @property
    def clone(self) -> Path:
        return self.sandbox.clone

    @property
    def settings(self) -> CellSettings:
        return self.context.settings

    @property
    def sections(self) -> dict[str, Any]:
        return self.context.sections

    def fingerprint(self) -> str | None:
        return skill_fingerprint(self.clone, self.context.skills_root, self.skills)


@dataclass(frozen=True)
class Baseline:
    """The prepared workspace as the harness measured it before any session, with its own git copy."""

    harness_git: repo.GitRunner
    measure: repo.ScriptRunner
    work: repo.WorkMeasure
    git_metadata: dict[str, str]
    excludes: tuple[str, ...]
    # The clone's HEAD once prepared (the skills, setup and overlay committed).
    head: str


@dataclass
class SessionsOutcome:
    """What the arm's sessions left: their records, diagnostics, the plan, and a workspace that stopped them."""

    records: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    plan_path: str | None = None
    plan_produced: bool = True
    workspace_error: AgentWorkspaceError | None = None


def graded_as_finished(row: ResultRow) -> bool:
    """Whether what the sessions left can resolve the cell: they finished, or a session's spend cap stopped them
    (a censored observation, ``censored``: its work is graded as it is, and counted at the spend the cap let
    through; never excluded, never rerun)."""
    return bool(row["ok"] or row.get("censored"))


def _execute(work: CellWork) -> ResultRow:
    """The cell's steps: prepare the workspace, measure it, run the arm's sessions, grade what they left."""
    row = base_row(work.cell, work.context)
    prepare_workspace(work)
    row["skill_digest"] = work.skill_digest
    baseline = take_baseline(work)
    row["variant_head_sha"] = baseline.head
    outcome = run_sessions(work)
    _record_sessions(row, outcome, work.settings.agent.prices)
    # The session's own cap (budget.max_session_usd) stopped it: the agent spent that much, so the row counts, at
    # that spend, and is graded on what it left. Not the run's budget (budget-exhausted), which is the run's doing.
    row["censored"] = row["error_kind"] == CAPPED_ERROR_KIND
    work.skills_invoked = _skills_invoked(outcome.records)
    if not arm_config.arm_skills(work.sections, work.cell.arm):
        row["skill_invoked"] = None
    _note_git_metadata(row, work.clone, baseline.git_metadata)
    if row["error_kind"] == "budget-exhausted":
        return row  # the run's budget stopped the sessions: nothing of the agent's to grade
    try:
        if outcome.workspace_error is not None:
            raise outcome.workspace_error
        work.context.grader.grade(work, row)
        patch, truncated = _measure_change(row, baseline, work.context.grader.requires_change)
    except AgentWorkspaceError as exc:
        row.update(
            {
                "ok": False,
                "resolved": False,
                "error_kind": exc.kind,
                "error_detail": _tail(redact_text(str(exc), work.context.secrets), MAX_DETAIL_CHARS),
            }
        )
        return row
    _write_patch(work.context, patch)
    if truncated:
        row["evidence_diagnostics"].append(f"patch.diff truncated at {repo.MAX_PATCH_BYTES} bytes")
    row["ok"] = bool(row["ok"])
    return row


def prepare_workspace(work: CellWork) -> None:
    """Install the skills, run the task's setup, then shape the workspace to the arm; fix the skill fingerprint."""
    sections, context, cell = work.sections, work.context, work.cell
    git = work.sandbox.git()
    install_skills(work.clone, context.skills_source, context.skills_root, git)
    base_fingerprint = work.fingerprint()
    if cell.task.get("setup"):
        _run_setup(work)
        if work.fingerprint() != base_fingerprint:
            raise InfraError("task setup changed the evaluated skill fingerprint")
    if arm_config.arm_definition(sections, cell.arm).get("no_mcp"):
        from skillbench.execution.mcp import strip_guidance

        stripped = strip_guidance(work.clone, sorted(sections.get("mcp_servers") or {}))
        if stripped:
            repo.commit_all(git, "benchmark: guidance without unavailable MCP tools")
            _say(context, f"no-MCP arm: rewrote {', '.join(stripped)} without lines about MCP tools")
    if arm_config.is_candidate(cell.arm):
        if context.overlay is None:
            raise InfraError(f"candidate arm {cell.arm} has no frozen overlay")
        write_overlay(
            context.overlay,
            work.clone,
            expected_digest=context.overlay_digest,
            evolvable=list(work.settings.skills.evolvable),
            skills_dir=context.skills_root,
        )
        if not repo.commit_all(git, "benchmark candidate skill overlay"):
            raise InfraError("the candidate overlay is byte-identical to the incumbent skills in the clone")
    context.grader.prepare_workspace(work)
    work.skill_digest = work.fingerprint()


def _run_setup(work: CellWork) -> None:
    started = time.monotonic()
    cgroup = work.sandbox.cgroup
    before = cgroup.events() if cgroup is not None else None
    result = work.sandbox.run(["/bin/sh", "-lc", work.cell.task["setup"]], timeout=work.settings.agent.setup_timeout_s)
    work.context.timings["setup"] = time.monotonic() - started
    if work.disk_mb and quota.is_full(work.private_root):
        raise InfraError(
            f"task setup filled the cell's {work.disk_mb} MB disk quota; raise sandbox.limits.disk_mb for this suite"
        )
    hit = cgroups.limit_hit(cgroup.events().since(before), cgroup.limits) if cgroup and before else None
    if hit is not None:
        # The task's own step, before any agent: the limits are too small for the suite, not the agent's doing.
        raise InfraError(
            f"task setup ran into the cell's limits ({hit[1]}); raise them in sandbox.limits for this suite"
        )
    if not result.ok:
        raise InfraError(
            f"task setup failed ({result.state}, exit {result.returncode}): "
            f"{_tail(result.stderr_tail or result.stdout_tail, 1500)}"
        )


def take_baseline(work: CellWork) -> Baseline:
    """Measure the prepared workspace; from here on the harness's git uses its own copy of the repository."""
    harness_dir = work.private_root / "harness-git"
    repo.make_harness_git_dir(work.clone, harness_dir)
    harness_git, measure = work.sandbox.harness_git(harness_dir), work.sandbox.harness_script(harness_dir)
    excludes = churn_excludes(work.context.skills_root)
    before_work = repo.measure_work(measure, "HEAD", excludes)
    head = before_work.base
    if work.context.grader.measures_from_workspace:
        # Only the harness's copy of the repository commits it: the clone's own git still shows it uncommitted.
        repo.commit_all(harness_git, "benchmark: the workspace the sessions start from")
        before_work = repo.measure_work(measure, "HEAD", excludes)
    git_before = repo.git_metadata(work.clone)
    work.context.grader.before_sessions(work)
    return Baseline(harness_git, measure, before_work, git_before, excludes, head)


def run_sessions(work: CellWork) -> SessionsOutcome:
    """The arm's sessions in order, until one fails; a workspace the harness cannot measure stops them too."""
    outcome = SessionsOutcome()
    session: dict[str, Any] = {}
    try:
        for session in arm_config.arm_definition(work.sections, work.cell.arm)["sessions"]:
            if not _run_session_step(work, session, outcome):
                break
    except AgentWorkspaceError as exc:
        outcome.workspace_error = exc
        if session.get("plan_document") and outcome.plan_path is None:
            outcome.plan_produced = False
    return outcome


def _run_session_step(work: CellWork, session: dict[str, Any], outcome: SessionsOutcome) -> bool:
    """Run one session and check what it left; False when the arm's sessions stop here."""
    cell, clone = work.cell, work.clone
    prompt = arm_config.render_prompt(
        work.sections, session, task_prompt=cell.task["prompt"], plan_path=outcome.plan_path
    )
    planning = bool(session.get("plan_document"))
    before = workspace_snapshot(clone, work.limits) if planning else {}
    home, _tmp = work.sandbox.fresh_scratch(f"session-{session['role']}")
    record = run_one_session(session, prompt, work=work)
    outcome.records.append(record)
    if record["error_kind"] == "cancelled" or CANCEL.is_set():
        raise CellCancelled(
            f"{cell.task['id']}/{cell.arm}/run{cell.run}: interrupted during the {session['role']} "
            "session; no record is written, so the next run does this cell again"
        )
    _check_after_session(work, session, record, home, outcome)
    if not record["ok"]:
        if planning:
            outcome.plan_produced = False
        return False
    if planning:
        try:
            outcome.plan_path = plan_document_change(before, workspace_snapshot(clone, work.limits))
        except ValueError as exc:
            record.update(ok=False, error_kind="plan-evidence-invalid", error_detail=str(exc))
            outcome.plan_produced = False
            return False
    return True


def _check_after_session(
    work: CellWork, session: dict[str, Any], record: dict[str, Any], home: Path, outcome: SessionsOutcome
) -> None:
    """Note Python start-up files left in the session's home; fail a session that changed the evaluated skills."""
    outcome.diagnostics += work.context.grader.after_session(work, session["role"], home)
    if work.disk_mb and quota.is_full(work.private_root):
        raise AgentWorkspaceError(
            "disk-quota-exceeded",
            f"the {session['role']} session filled the cell's {work.disk_mb} MB disk quota (its workspace, "
            "homes and tmp together)",
        )
    check_workspace(work.clone, work.limits)
    if work.fingerprint() != work.skill_digest:
        planning = bool(session.get("plan_document"))
        message = f"{'planning' if planning else 'implementation'} changed the evaluated skill fingerprint"
        if record["ok"]:
            record.update(
                ok=False,
                error_detail=message,
                error_kind="plan-evidence-invalid" if planning else "implementation-evidence-invalid",
            )
        else:
            outcome.diagnostics.append(message)


# The per-cell sums of the session records that the row carries as they are.
SUMMED_ROW_FIELDS = (
    *sessions.USAGE_FIELDS,
    "cost_usd",
    "cli_cost_usd",
    "duration_s",
    "num_turns",
    "ok",
    "session_ids",
    "error_kind",
    "skill_invoked",
    "transcript_missing",
    "transcript_artifacts",
    "tool_use_counts",
    "mcp_tool_uses",
    "mcp_semantic_errors",
    "offered_skills",
    "error_detail",
)


# A session stopped at its own spend cap: the cell is a censored observation.
CAPPED_ERROR_KIND = "session-cap-reached"


def _record_sessions(row: ResultRow, outcome: SessionsOutcome, prices: PriceSettings) -> None:
    if outcome.records:
        summed = sessions.sum_sessions(outcome.records)
        cast(dict[str, Any], row).update({key: summed[key] for key in SUMMED_ROW_FIELDS})
        row["evidence_diagnostics"] = [*summed["evidence_diagnostics"], *outcome.diagnostics]
        row["cost_check"] = sessions.cost_check(summed, prices, row.get("model"))
    else:
        row["evidence_diagnostics"] = list(outcome.diagnostics)
    row["plan_produced"] = outcome.plan_produced


def _skills_invoked(records: list[dict[str, Any]]) -> list[str] | None:
    proven = [record.get("skills_invoked") for record in records]
    if any(skills is None for skills in proven):
        return None
    return sorted({skill for skills in proven for skill in skills or []})


def _note_git_metadata(row: ResultRow, clone: Path, git_before: dict[str, str]) -> None:
    head_problem = repo.git_head_problem(clone)
    if head_problem:
        row["evidence_diagnostics"].append(f"{head_problem}; graded with the harness's own copy of the repository")
        return
    changed = repo.git_metadata_changes(git_before, repo.git_metadata(clone))
    if changed:
        row["evidence_diagnostics"].append(
            "the sessions changed the clone's git metadata, which the harness's git never reads: "
            + ", ".join(changed[:12])
        )


def _measure_change(row: ResultRow, baseline: Baseline, requires_change: bool) -> tuple[bytes, bool]:
    """The agent's change outside plans and skills into the row; a "resolved" cell without one produced no work
    (when its grader `requires_change`)."""
    orig_sha = baseline.work.base
    work = _harness_git_step(
        baseline.harness_git, orig_sha, lambda _git: repo.measure_work(baseline.measure, orig_sha, baseline.excludes)
    )
    row.update({"diff_files": work.files, "diff_insertions": work.insertions, "diff_deletions": work.deletions})
    if requires_change and row["resolved"] and work.digest == baseline.work.digest:
        row.update(
            {
                "resolved": False,
                "error_kind": "no-work-produced",
                "error_detail": "the arm reported success without any change outside plans and skills",
            }
        )
    return work.patch, work.truncated


def _write_patch(context: CellContext, patch: bytes) -> None:
    if context.secrets:
        # surrogateescape keeps binary hunks byte-exact while secrets in text are replaced.
        patch = redact_text(patch.decode("utf-8", "surrogateescape"), context.secrets).encode(
            "utf-8", "surrogateescape"
        )
    (context.run_dir / "patch.diff").write_bytes(patch)


def _harness_git_step(git: repo.GitRunner, orig_sha: str, step: Callable[[repo.GitRunner], T]) -> T:
    """Run one post-session git step; a failure while the harness's own repository is intact is the workspace's."""
    try:
        return step(git)
    except repo.GitError as exc:
        if git(["cat-file", "-e", f"{orig_sha}^{{tree}}"]).ok:
            raise AgentWorkspaceError(
                "workspace-tampered", f"the harness's git cannot read the workspace: {exc}"
            ) from exc
        raise


HARNESS_FAILURES = (
    InfraError,
    SandboxError,
    quota.QuotaError,
    cgroups.CgroupError,
    OSError,
    ValueError,
    ArtifactError,
    repo.GitError,
)


def run_one_cell(cell: Cell, context: CellContext, *, attempt: int, attempts: int, breaker_state: Path) -> CellRecord:
    """Run one cell and return its record; raise RetryableCellFailure on non-final systemic failures."""
    label = cell.label
    breaker.check(breaker_state, context.settings.run.outage_streak)
    _fresh_run_folder(context.run_dir)
    started_at, started = now_iso(), time.monotonic()
    _say(context, f"{label} attempt {attempt}/{attempts} starting")
    row = _budget_left_row(cell, context) or _row_of_attempt(cell, context)
    if isinstance(row["error_detail"], str):
        row["error_detail"] = redact_text(row["error_detail"], context.secrets)
    wall = time.monotonic() - started
    streak = breaker.record(breaker_state, label, row["error_kind"])
    _log_outcome(context, label, row, wall)
    if row["error_kind"] in SYSTEMIC_ERROR_KINDS and attempt < attempts:
        raise RetryableCellFailure(
            f"{label} {row['error_kind']} on attempt {attempt}/{attempts} "
            f"(outage streak {streak}): {row['error_detail']}"
        )
    return {
        "schema": "cell-record/v1",
        "row": row,
        "attempt": attempt,
        "timing": _timing(context, started_at, wall),
    }


def _budget_left_row(cell: Cell, context: CellContext) -> ResultRow | None:
    """A `budget-exhausted` row, without starting anything, when the run's spend already reached `budget.max_usd`."""
    cap = context.settings.run.max_usd
    if cap is None or context.results_root is None:
        return None
    spent = access.RunSpend(context.results_root)()
    if spent < cap:
        return None
    row = base_row(cell, context)
    row["cost_usd"] = 0.0  # nothing started, so nothing was spent
    row["error_kind"] = "budget-exhausted"
    row["error_detail"] = f"the run's budget of ${cap:.4f} was reached (${spent:.4f} spent) before this cell started"
    return row


def _fresh_run_folder(run_dir: Path) -> None:
    """Empty transcripts, an empty patch, no oracle log and no Harbor trial folder: nothing of an earlier attempt
    stays."""
    transcripts = run_dir / "transcripts"
    if transcripts.exists():
        shutil.rmtree(transcripts)
    run_dir.mkdir(parents=True, exist_ok=True)
    transcripts.mkdir(mode=0o700)
    (run_dir / "patch.diff").write_bytes(b"")
    (run_dir / layout.ORACLE_LOG).unlink(missing_ok=True)
    shutil.rmtree(run_dir / layout.HARBOR, ignore_errors=True)


def _row_of_attempt(cell: Cell, context: CellContext) -> ResultRow:
    """The cell's row: its own verdict, an `infra-error` row for a harness failure, `cleanup-failure` after it."""
    label = cell.label
    scratch = ExitStack()
    try:
        disk_mb = quota.disk_quota_mb(context.settings.sandbox)
        private_root = scratch.enter_context(quota.private_root("skillbench-cell-", disk_mb))
        # Entered after the quota, so closed first: its processes are gone before the quota is unmounted.
        cgroup = scratch.enter_context(cgroups.cell_cgroup(cgroups.cell_limits(context.settings.sandbox, disk_mb)))
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted before it started")
        row = execute_cell(cell, context, private_root, cgroup)
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted; no record is written, so the next run does this cell again")
    except HARNESS_FAILURES as exc:
        if CANCEL.is_set():
            raise CellCancelled(
                f"{label} interrupted ({type(exc).__name__}); the next run does this cell again"
            ) from exc
        row = base_row(cell, context)
        row.update(
            {
                "error_kind": "infra-error",
                "error_detail": _tail(redact_text(f"{type(exc).__name__}: {exc}", context.secrets), MAX_DETAIL_CHARS),
            }
        )
    finally:
        cleanup_error: Exception | None = None
        try:
            scratch.close()
        except (OSError, quota.QuotaError, cgroups.CgroupError) as exc:
            cleanup_error = exc
    if cleanup_error is not None:
        primary = f"primary={row['error_kind']}: {row['error_detail']}"
        row.update(
            {
                "ok": False,
                "resolved": False,
                "error_kind": "cleanup-failure",
                "error_detail": _tail(
                    f"{primary}; cleanup: {type(cleanup_error).__name__}: {cleanup_error}", MAX_DETAIL_CHARS
                ),
            }
        )
    return row


def _log_outcome(context: CellContext, label: str, row: ResultRow, wall: float) -> None:
    cost = "n/a" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
    tokens = row["input_tokens"] + row["output_tokens"]
    _say(
        context,
        f"{label} resolved={row['resolved']} tokens={tokens} cost={cost} took={wall:.1f}s "
        f"error_kind={row['error_kind']}",
    )
    if row["error_detail"]:
        detail = json.dumps(row["error_detail"]) if isinstance(row["error_detail"], dict) else row["error_detail"]
        _say(context, f"{label} detail: {detail[:1200].replace(chr(10), ' ⏎ ')}")


def _timing(context: CellContext, started_at: str, wall: float) -> CellTiming:
    in_sessions = context.timings.get("sessions", 0.0)
    verify, oracle_s = context.timings.get("verify", 0.0), context.timings.get("oracle", 0.0)
    return {
        "started_at": started_at,
        "finished_at": now_iso(),
        "wall_s": round(wall, 3),
        "sessions_s": round(in_sessions, 3),
        "setup_s": round(context.timings.get("setup", 0.0), 3),
        "verify_s": round(verify, 3),
        "oracle_s": round(oracle_s, 3),
        "overhead_s": round(wall - in_sessions - verify - oracle_s, 3),
        "sessions": context.session_windows,
    }
