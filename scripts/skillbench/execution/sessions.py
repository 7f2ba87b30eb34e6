"""One headless agent session: its launch, its record, and the sum of a cell's sessions.

Owns the one way a session is launched (`launch_session`, for cells and the proposer alike, for every
agent CLI: the arm's adapter builds the command line and reads the stream), the per-session record
(`session_record`: the adapter's strict reading of the parent-captured stdout — the only admissible
evidence, files under the session's HOME are the agent's — and the gateway's ledger, which gives the
tokens and the cost and decides whose a failure is), its per-cell sum, the cost cross-check, and
progress reporting.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from skillbench.base.artifacts import ArtifactError, read_regular_file, utc_timestamp
from skillbench.base.process import ProcessResult, run_managed
from skillbench.base.records import USAGE_FIELDS, ErrorKind
from skillbench.base.redaction import redact_text, redact_value
from skillbench.execution import cgroups, gateway, mcp
from skillbench.execution.agents import claude_code
from skillbench.execution.agents.base import AgentAdapter, SessionRequest, StreamReading
from skillbench.execution.pricing import price_label
from skillbench.execution.streams import (
    MAX_TRANSCRIPT_BYTES,
    SESSION_ID,
    TRUNCATED_SESSION,
    count,
    measured_cost,
    nonnegative,
    persist_transcript,
    redact_stream_tail,
    truncated_events,
)
from skillbench.experiment.settings import PriceSettings, SessionJobSettings

if TYPE_CHECKING:
    from skillbench.execution.access import ModelAccess
    from skillbench.execution.sandbox import Sandbox
    from skillbench.execution.scripted_model import ScriptedModel

ERROR_TAIL_CHARS = 2000


# ---------------------------------------------------------------------------------------------------------
# Costs


def cost_check(summed: dict[str, Any], prices: PriceSettings, model: str | None = None) -> dict[str, Any]:
    """The row's `cost_check`: the gateway's priced ledger (the row's cost) against what the CLI reported.

    `prices` is config `agent.prices`; `price_table` names the table that priced `model` (with a community
    table's digest); `agrees` is None when either figure is unmeasured (a CLI that reports no cost, an unpriced
    model).
    """
    measured, reported = summed.get("cost_usd"), summed.get("cli_cost_usd")
    agrees = difference = None
    if measured is not None and reported is not None:
        difference = (
            0.0 if measured == reported == 0 else round(100 * abs(reported - measured) / max(measured, reported), 3)
        )
        agrees = difference <= prices.tolerance_pct
    return {
        "price_table": price_label(prices, model),
        "ledger_usd": measured,
        "cli_usd": reported,
        "agrees": agrees,
        "difference_pct": difference,
    }


# ---------------------------------------------------------------------------------------------------------
# Session records


def _failure_reasons(result: ProcessResult, reading: StreamReading) -> list[str]:
    """Why the session failed; empty when it did not."""
    reasons = []
    if not result.ok:
        reasons.append(f"process {result.state} (returncode {result.returncode})")
    if reading.stream_error is not None:
        reasons.append(f"event stream: {reading.stream_error}")
    return reasons + reading.cli_failures


def _failure_detail(
    result: ProcessResult, reading: StreamReading, reasons: list[str], secrets: Sequence[str]
) -> dict[str, Any]:
    return redact_value(
        {
            "subtype": reading.subtype,
            "returncode": result.returncode,
            "process_state": result.state,
            "stderr_tail": result.stderr_tail[-ERROR_TAIL_CHARS:],
            # A session can fail with an empty stderr; the stream tail is then the only clue.
            "stdout_tail": redact_stream_tail(result.stdout_tail[-ERROR_TAIL_CHARS:], secrets),
            "process_detail": result.detail,
            "event_stream_error": reading.stream_error,
            "reasons": reasons,
        },
        secrets,
    )


def _mark_mcp_failure(record: dict[str, Any], mcp_failed: dict[str, str]) -> None:
    if mcp_failed and record["error_kind"] != "cancelled":
        # Not the agent's doing: its tools were never there. The cell log gets the server's stderr tail.
        listed = ", ".join(f"{name} ({status})" for name, status in mcp_failed.items())
        record.update(
            ok=False,
            error_kind="infra-error",
            error_detail=f"MCP server(s) did not start: {listed}; see the cell log for their stderr",
        )


def _gather_evidence(
    record: dict[str, Any],
    result: ProcessResult,
    reading: StreamReading,
    *,
    expected_skill: str | None,
    transcript_dir: Path | None,
    transcript_prefix: str,
    secrets: Sequence[str],
    installed_skills: Sequence[str] = (),
) -> list[str]:
    """Prove the skill invocation and keep the transcript, into `record`; return what could not be verified."""
    diagnostics: list[str] = []
    if expected_skill is not None:
        try:
            record["skill_invoked"] = reading.skill_invoked(expected_skill)
        except ValueError as exc:
            record["skill_invoked"] = None
            diagnostics.append(f"unverifiable skill evidence: {exc}")
    record["skills_invoked"] = _skills_invoked(reading, installed_skills)
    if transcript_dir is not None:
        try:
            record["transcript_artifact"] = persist_transcript(
                result.stdout_capture or b"",
                directory=transcript_dir,
                prefix=transcript_prefix,
                session_id=reading.session_id,
                secrets=secrets,
            )
        except (OSError, ValueError) as exc:
            diagnostics.append(f"unverifiable transcript persistence: {exc}")
    return diagnostics


def _skills_invoked(reading: StreamReading, installed_skills: Sequence[str]) -> list[str] | None:
    """Every skill the session was offered or found installed that the stream proves it invoked (sorted; None when
    the stream is ambiguous about one): what a trigger task is judged by."""
    candidates = sorted({*(reading.offered_skills or []), *installed_skills})
    try:
        return [skill for skill in candidates if reading.skill_invoked(skill)]
    except ValueError:
        return None


def _judge_evidence(
    record: dict[str, Any],
    diagnostics: list[str],
    *,
    expected_skill: str | None,
    already_failed: bool,
    secrets: Sequence[str],
) -> None:
    """Fail a session that did not invoke its skill or whose evidence is unverified.

    A session that `already_failed` (its own error, or an MCP server that never started) keeps that
    verdict; what is wrong with its evidence only becomes a diagnostic.
    """
    if expected_skill is not None:
        record.setdefault("skill_invoked", None)
        if record["skill_invoked"] is False:
            detail = f"the event stream shows no successful {expected_skill} invocation"
            if already_failed:
                diagnostics.append(detail)
            elif not diagnostics:
                record.update(ok=False, error_kind="skill-not-invoked", error_detail=redact_text(detail, secrets))
    if diagnostics:
        diagnostics = [redact_text(diagnostic, secrets) for diagnostic in diagnostics]
        record["transcript_missing"] = True
        record["evidence_diagnostics"] = diagnostics
        if not already_failed:
            record.update(ok=False, error_kind="evidence-unverified", error_detail="; ".join(diagnostics))


def session_record(
    result: ProcessResult,
    *,
    reading: StreamReading,
    expected_skill: str | None,
    transcript_dir: Path | None,
    transcript_prefix: str,
    secrets: Sequence[str],
    started_at: str,
    finished_at: str,
    ledger: dict[str, Any] | None = None,
    installed_skills: Sequence[str] = (),
    limit_hit: tuple[ErrorKind, str] | None = None,
) -> dict[str, Any]:
    """The record of one session, from its process outcome, its adapter's `reading` of the parent-captured stdout
    and the gateway's ledger.

    The token counts and `cost_usd` are the ledger's (every request the session made, priced by the
    gateway); `cli_cost_usd` is what the CLI reported, the cross-check. The ledger, the capture and the cell's
    cgroup (`limit_hit`: the kind and detail of a kernel limit the session ran into, `cgroups.limit_hit`) decide
    whose a failure is (`_verdict`). The record counts each MCP server's tool uses and semantic errors, and a
    server the CLI did not connect makes the session an `infra-error` (the harness's, excluded) whose
    `mcp_failed` names it. A stream cut at the capture's limit is kept as far as it got (`_keep_truncated`).
    """
    stream_error = reading.stream_error
    reasons = _failure_reasons(result, reading)
    session_error = bool(reasons)
    mcp_failed = reading.mcp_failed if stream_error is None else {}
    session_id = reading.session_id
    record: dict[str, Any] = {
        "ok": not session_error,
        "error_kind": "cancelled" if result.state == "cancelled" else ("session-error" if session_error else None),
        "error_detail": _failure_detail(result, reading, reasons, secrets) if session_error else None,
        "session_id": session_id if isinstance(session_id, str) and SESSION_ID.fullmatch(session_id) else None,
        "num_turns": reading.num_turns,
        "cost_usd": None,
        "cli_cost_usd": reading.cli_cost_usd,
        "duration_s": round(reading.duration_s if reading.duration_s is not None else result.duration_s, 1),
        "tool_use_counts": reading.tool_use_counts,
        "mcp_tool_uses": reading.mcp_tool_uses,
        "mcp_semantic_errors": reading.mcp_semantic_errors,
        "mcp_failed": mcp_failed,
        **{field: reading.cli_usage.get(field) or 0 for field in USAGE_FIELDS},
        "offered_skills": reading.offered_skills,
        # What the CLI said about how it ran that the row should carry (e.g. Codex on fallback model metadata).
        "cli_notes": [redact_text(note, secrets) for note in reading.notes],
        "transcript_missing": False,
        "evidence_diagnostics": [],
        "started_at": started_at,
        "finished_at": finished_at,
    }
    if ledger is not None:
        totals = ledger["totals"]
        record.update({field: totals[field] for field in USAGE_FIELDS}, cost_usd=totals["cost_usd"])
    _verdict(record, result, ledger, limit_hit)
    _mark_mcp_failure(record, mcp_failed)
    if expected_skill is None and transcript_dir is None:
        return record
    if result.stdout_capture_overflow and record["error_kind"] != "cancelled":
        _keep_truncated(record, result, expected_skill, transcript_dir, transcript_prefix, secrets)
        return record
    if stream_error is not None:
        diagnostics = [f"unverifiable event stream: {stream_error}"]
    else:
        diagnostics = _gather_evidence(
            record,
            result,
            reading,
            expected_skill=expected_skill,
            transcript_dir=transcript_dir,
            transcript_prefix=transcript_prefix,
            secrets=secrets,
            installed_skills=installed_skills,
        )
    _judge_evidence(
        record,
        diagnostics,
        expected_skill=expected_skill,
        # A verdict of its own (a limit, a refusal, a timeout) stands even when the CLI exited cleanly after it.
        already_failed=not record["ok"],
        secrets=secrets,
    )
    return record


# The ledger's refusal reasons (`gateway`), as the session's error kind.
REFUSAL_KINDS: dict[str, ErrorKind] = {
    "budget": "budget-exhausted",
    "session-cap": "session-cap-reached",
    "model-unpriced": "model-unpriced",
}
# A model request that has had no answer (not even its status line) for this long was stalled by the model API:
# a clock that runs out then is not the agent's. Long enough for any answer's head to arrive, streamed or not.
STALLED_REQUEST_S = 120.0


def _verdict(
    record: dict[str, Any],
    result: ProcessResult,
    ledger: dict[str, Any] | None,
    limit_hit: tuple[ErrorKind, str] | None,
) -> None:
    """Whose a failed session is: the agent's counted outcome, or (only) the harness's or the model API's.

    In this order, the first that holds decides:

    * the run was interrupted: `cancelled` (the cell writes no record);
    * the session ran into a limit of its cell's cgroup: `memory-limit-exceeded` (the kernel killed a process at the
      cell's memory limit) or `process-limit-exceeded` (a fork was refused at its process limit) — the agent's;
    * the gateway refused a request: past the run's budget `budget-exhausted` (the run's doing: excluded, never
      retried); past the session's own cap `session-cap-reached`; naming a model without a price `model-unpriced`
      (both the agent's, counted);
    * its stdout outgrew the capture: `output-limit-exceeded` (the agent's flood; the CLI was stopped);
    * its clock ran out: `session-timeout` (the agent's), unless the ledger shows the model API failing or stalling
      then (`upstream_trouble`): a `session-error`;
    * any other failure (the CLI failed or broke its stream, the prompt was not delivered, the process did not
      start) stays a `session-error`: the harness's, excluded, retried and counted by the outage breaker.
    """
    if result.state == "cancelled":
        return
    refused = [entry for entry in (ledger or {}).get("requests", []) if entry["outcome"] == "refused"]
    if limit_hit is not None:
        record.update(ok=False, error_kind=limit_hit[0], error_detail=limit_hit[1])
    elif refused:
        record.update(ok=False, error_kind=REFUSAL_KINDS[refused[-1]["refused"]], error_detail=refused[-1]["failure"])
    elif result.stdout_capture_overflow:
        record.update(
            ok=False,
            error_kind="output-limit-exceeded",
            error_detail=(
                f"the CLI's event stream outgrew the {MAX_TRANSCRIPT_BYTES}-byte capture (the agent's tool output "
                "flooded it); the CLI was stopped and the stream kept as far as it got"
            ),
        )
    elif result.state == "timeout":
        trouble = upstream_trouble(ledger) if ledger is not None else None
        if trouble is not None:
            record.update(
                ok=False,
                error_kind="session-error",
                error_detail=f"the session's clock ran out while the model API was failing or stalling: {trouble}",
            )
        else:
            record.update(
                ok=False,
                error_kind="session-timeout",
                error_detail=(
                    f"the session ran its clock out in its own work ({result.detail or 'timed out'}); the model "
                    "API neither failed nor stalled"
                ),
            )


def _waited_s(entry: dict[str, Any], closed_at: str | None) -> float:
    """How long a request had waited for its answer when the session ended (0 when the ledger cannot say)."""
    if entry["duration_s"] is not None:
        return float(entry["duration_s"])
    if closed_at is None:
        return 0.0
    try:
        return (datetime.fromisoformat(closed_at) - datetime.fromisoformat(entry["started_at"])).total_seconds()
    except ValueError:
        return 0.0


def upstream_trouble(ledger: dict[str, Any]) -> str | None:
    """What in a session's ledger shows the model API (or the gateway) failing or stalling, or None.

    Trouble is: a request the upstream could not answer (`upstream-failure`), a gateway failure, an error status the
    API gives when it is down or overloaded (5xx, 429), or a request that got no answer at all — not even its
    status line — for `STALLED_REQUEST_S`. A request still being answered, or waiting briefly, when the clock ran
    out is the agent's: its session spent its time on its own work and turns."""
    found = []
    for entry in ledger["requests"]:
        status = entry["status"]
        if entry["outcome"] in ("upstream-failure", "gateway-error"):
            found.append(f"request {entry['seq']} {entry['outcome']} ({entry['failure']})")
        elif entry["outcome"] == "upstream-error" and status is not None and (status >= 500 or status == 429):
            found.append(f"request {entry['seq']} answered {status}")
        elif entry["outcome"] in ("in-flight", "client-gone") and status is None:
            waited = _waited_s(entry, ledger.get("closed_at"))
            if waited >= STALLED_REQUEST_S:
                found.append(f"request {entry['seq']} had no answer after {waited:.0f}s")
    if not found:
        return None
    return f"{len(found)} of its {len(ledger['requests'])} model requests: " + "; ".join(found[:3])


def _keep_truncated(
    record: dict[str, Any],
    result: ProcessResult,
    expected_skill: str | None,
    transcript_dir: Path | None,
    transcript_prefix: str,
    secrets: Sequence[str],
) -> None:
    """A stream cut at the capture's limit is no proof of anything (skill use unverifiable), but it is the
    evidence of what the agent did: its complete events are kept as the session's transcript."""
    if expected_skill is not None:
        record["skill_invoked"] = None
    kept = truncated_events(result.stdout_capture or b"")
    events = kept.count(b"\n")
    diagnostics = [f"the event stream was cut at its {MAX_TRANSCRIPT_BYTES}-byte capture"]
    if transcript_dir is not None:
        try:
            record["transcript_artifact"] = persist_transcript(
                kept,
                directory=transcript_dir,
                prefix=transcript_prefix,
                session_id=TRUNCATED_SESSION,
                secrets=secrets,
            )
            diagnostics[0] += f"; its transcript keeps the first {events} complete events"
        except (OSError, ValueError) as exc:
            record["transcript_missing"] = True
            diagnostics.append(f"unverifiable transcript persistence: {exc}")
    record["evidence_diagnostics"] = [redact_text(diagnostic, secrets) for diagnostic in diagnostics]


def _utc_now() -> str:
    return utc_timestamp()


@dataclass(frozen=True)
class SessionSurface:
    """What a session can reach: its tools, MCP servers and plugins, and the binds and environment they need."""

    tools: list[str]
    disallowed_tools: list[str]
    mcp_config: str = claude_code.EMPTY_MCP_CONFIG
    mcp_servers: list[str] = dataclasses.field(default_factory=list)
    plugin_dirs: list[str] = dataclasses.field(default_factory=list)
    disable_slash_commands: bool = False
    # (host path, path in the sandbox), bound read-only into the session's sandbox.
    binds: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    # (host path, path in the sandbox), bound writable (a session's own scratch folders, never a shared tree).
    writable_binds: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    # Sandbox paths only an MCP server may read: hidden from the agent's commands and the CLI's file tools.
    hidden_from_tools: list[str] = dataclasses.field(default_factory=list)
    extra_env: dict[str, str] = dataclasses.field(default_factory=dict)
    # The workspace bound read-only (a review session: only its `writable_binds` take what it writes).
    read_only_workspace: bool = False


def session_environment(sandbox: Sandbox, agent: AgentAdapter, base_url: str | None, token: str) -> dict[str, str]:
    """The CLI's environment in `sandbox`: the sandbox's own, and the agent's: the gateway's address (None when the
    forwarder sets it) and the session's token, never the provider key."""
    return sandbox.environment(agent.environment(base_url=base_url, token=token, shell_prefix=sandbox.shell_prefix))


def bridged_command(
    sandbox: Sandbox,
    agent: AgentAdapter,
    argv: list[str],
    surface: SessionSurface,
    socket: Path,
    *,
    read_only_workspace: bool = False,
) -> tuple[list[str], str | None]:
    """The sandbox command that starts `argv` (the CLI) behind the gateway's bridge, and the base URL to give it.

    Under bwrap the sandbox has no network of its own: the gateway's socket and the forwarder are bound in,
    and the forwarder listens on the namespace's loopback. The `none` backend runs the forwarder on the host
    on a free port, which it hands to the CLI itself.
    """
    if sandbox.backend != "bwrap":
        inner = gateway.bridge_argv(
            argv, forwarder=str(gateway.FORWARDER), port=0, socket_path=str(socket), export=agent.base_url_variable
        )
        return sandbox.command(inner, extra_read_only=surface.binds), None
    binds = [*surface.binds, (socket, gateway.BRIDGE_SOCKET), (gateway.FORWARDER, gateway.BRIDGE_FORWARDER)]
    command = sandbox.command(
        gateway.bridge_argv(argv),
        extra_read_only=binds,
        extra_writable=surface.writable_binds,
        contain_shells=agent.contain_shells,
        read_only_workspace=read_only_workspace,
    )
    return command, gateway.bridge_base_url()


def cover_binds(sandbox: Sandbox, paths: Sequence[str]) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """Binds that cover each of `paths` (relative to the clone) present in the clone, so the CLI and the agent's
    commands find nothing there (an agent's `covered_paths`): (read-only, writable) binds. A file is covered with an
    empty read-only file, a folder with a fresh empty folder of the session's own (a CLI may write into the folder
    it reads its config from). Under bwrap only: the `none` backend contains nothing."""
    read_only: list[tuple[Path, str]] = []
    writable: list[tuple[Path, str]] = []
    if sandbox.backend != "bwrap":
        return read_only, writable
    covers = sandbox.private_root / "covers"
    for relative in paths:
        host = sandbox.clone / relative
        if not os.path.lexists(host):
            continue
        if host.is_dir():
            covers.mkdir(mode=0o755, exist_ok=True)
            source = Path(tempfile.mkdtemp(prefix=f"{Path(relative).name}-", dir=covers))
            source.chmod(0o755)
            writable.append((source, sandbox.to_sandbox(host)))
        else:
            read_only.append((sandbox.empty_file, sandbox.to_sandbox(host)))
    return read_only, writable


def write_home_files(sandbox: Sandbox, files: dict[str, str]) -> None:
    """The CLI's own files (its config) in the session's fresh home, owned by the sandbox user, read-only to it."""
    home = sandbox.home_host.resolve()
    for relative, text in files.items():
        target = (home / relative).resolve()
        if not target.is_relative_to(home) or target == home:
            raise ValueError(f"an agent's home file {relative!r} is not inside its home")
        created = [parent for parent in reversed(target.parents) if parent.is_relative_to(home) and parent != home]
        for folder in created:
            folder.mkdir(mode=0o700, exist_ok=True)
        target.write_text(text)
        target.chmod(0o400)
        if sandbox.launcher:
            for path in (*created, target):
                os.lchown(path, sandbox.host_uid, sandbox.host_gid)


def launch_session(
    sandbox: Sandbox,
    surface: SessionSurface,
    *,
    label: str,
    prompt: str,
    model: str,
    settings: SessionJobSettings,
    access: ModelAccess,
    secrets: Sequence[str],
    scripted_model: Callable[[], ScriptedModel],
    transcript_dir: Path,
    transcript_prefix: str,
    log: TextIO | None,
    expected_skill: str | None = None,
    agent: AgentAdapter | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one headless session of `model` by the `agent` CLI (Claude Code by default) in `sandbox`: its record
    (`session_record`) and ledger.

    The session's model is reached through the job's gateway (`access`) with a token of its own, revoked when
    the session ends, speaking the adapter's wire API; its upstream is the scripted model `scripted_model()`
    builds (`model.provider: scripted`) or the configured API. `secrets` (the provider key) are redacted from
    everything kept; `label` names the session in the progress lines written to `log`.
    """
    agent = agent or claude_code.ClaudeCode()
    request = SessionRequest(
        model=model,
        effort=settings.model.effort,
        tools=surface.tools,
        disallowed_tools=surface.disallowed_tools,
        sandbox_backend=sandbox.backend,
        mcp_config=surface.mcp_config,
        plugin_dirs=surface.plugin_dirs,
        disable_slash_commands=surface.disable_slash_commands,
        hidden=surface.hidden_from_tools,
    )
    argv = agent.command(sandbox.agent_executable, request)
    configured_skills = agent.configured_skills(sandbox.clone / agent.skills_dir, request)
    installed = installed_skills(sandbox.clone / agent.skills_dir)
    # As the session will see them (read-only to it): what a read of a SKILL.md must show to prove its skill.
    texts = skill_texts(sandbox.clone / agent.skills_dir, installed)
    sandbox.hide_from_tools(surface.hidden_from_tools)
    write_home_files(sandbox, agent.home_files(request))
    with ExitStack() as stack:
        scripted_url = stack.enter_context(scripted_model()).base_url if access.provider == "scripted" else None
        token = access.gateway.open_session(
            label, upstream=access.upstream(scripted_url), max_usd=access.session_cap_usd, wire=agent.wire_api
        )
        kept_secrets = [*secrets, token]
        progress = stack.enter_context(
            SessionProgress(label, stream=log, secrets=kept_secrets, heartbeat_s=settings.run.heartbeat_s)
        )
        shape = agent.session_sandbox(request)
        covered, scratch = cover_binds(sandbox, shape.covers)
        bound = dataclasses.replace(
            surface, binds=[*surface.binds, *covered], writable_binds=[*surface.writable_binds, *scratch]
        )
        command, base_url = bridged_command(
            sandbox,
            agent,
            argv,
            bound,
            access.socket,
            read_only_workspace=shape.read_only_workspace or surface.read_only_workspace,
        )
        started_at = _utc_now()
        cgroup = sandbox.cgroup
        events_before = cgroup.events() if cgroup is not None else None
        try:
            outcome = run_managed(
                command,
                env={**session_environment(sandbox, agent, base_url, token), **surface.extra_env},
                cwd=None if sandbox.backend == "bwrap" else str(sandbox.clone),
                timeout=settings.agent.session_timeout_s,
                stdin_data=prompt.encode("utf-8"),
                capture_stdout_bytes=MAX_TRANSCRIPT_BYTES,
                stdout_observer=progress.observe,
                stop_on_overflow=True,
            )
        finally:
            ledger = access.gateway.close_session(token)
        hit = None
        if cgroup is not None and events_before is not None:
            hit = cgroups.limit_hit(cgroup.events().since(events_before), cgroup.limits)
        reading = agent.read_stream(
            outcome.stdout_capture,
            overflow=outcome.stdout_capture_overflow,
            limit=MAX_TRANSCRIPT_BYTES,
            mcp_servers=surface.mcp_servers,
            skill_texts=texts,
        )
        if reading.offered_skills is None:
            reading.offered_skills = configured_skills
        record = session_record(
            outcome,
            reading=reading,
            expected_skill=expected_skill,
            transcript_dir=transcript_dir,
            transcript_prefix=transcript_prefix,
            secrets=kept_secrets,
            started_at=started_at,
            finished_at=_utc_now(),
            ledger=ledger,
            installed_skills=installed,
            limit_hit=hit,
        )
    return record, ledger


# The most of one SKILL.md the harness reads to check a read of it (`skill_texts`).
MAX_SKILL_TEXT_BYTES = 1 << 20


def skill_texts(skills_root: Path, skills: Sequence[str]) -> dict[str, str]:
    """Each of `skills`' SKILL.md under the clone's skills root as UTF-8 text (read-only during sessions, so as the
    session saw it): what a read of the file must have output to prove the skill. A file that cannot be read, is
    not UTF-8 or is larger than `MAX_SKILL_TEXT_BYTES` is left out, and then proves nothing."""
    texts = {}
    for skill in skills:
        try:
            raw = read_regular_file(skills_root / skill / "SKILL.md", MAX_SKILL_TEXT_BYTES, what="skill file")
            texts[skill] = raw.decode("utf-8")
        except (ArtifactError, OSError, UnicodeDecodeError):
            continue
    return texts


def installed_skills(skills_root: Path) -> list[str]:
    """The skill folders (with a SKILL.md) of the clone's skills root, as the harness installed them before the
    session: what a CLI that does not list its offered skills may invoke."""
    if skills_root.is_symlink() or not skills_root.is_dir():
        return []
    return sorted(
        entry.name
        for entry in skills_root.iterdir()
        if entry.is_dir() and not entry.is_symlink() and (entry / "SKILL.md").is_file()
    )


def _sum_costs(values: list[Any]) -> float | None:
    # One unmeasured session makes the cell unmeasured: a partial sum would look cheaper than it was.
    if any(value is None for value in values):
        return None
    return round(sum(values), 4)


def sum_sessions(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine the session records of one cell."""
    if not records:
        raise ValueError("sum_sessions needs at least one session record")
    total: dict[str, Any] = {field: sum(record[field] for record in records) for field in USAGE_FIELDS}
    total["cost_usd"] = _sum_costs([record["cost_usd"] for record in records])
    total["cli_cost_usd"] = _sum_costs([record.get("cli_cost_usd") for record in records])
    total["duration_s"] = round(sum(record["duration_s"] for record in records), 1)
    total["num_turns"] = sum(record["num_turns"] for record in records)
    total["ok"] = all(record["ok"] for record in records)
    total["session_ids"] = [record.get("session_id") for record in records]
    failed = [record for record in records if record.get("error_kind")]
    details = [record["error_detail"] for record in records if record.get("error_detail")]
    total["error_kind"] = failed[0]["error_kind"] if failed else None
    # Kind and detail come from the same session so the detail explains the kind.
    total["error_detail"] = (failed[0].get("error_detail") if failed else None) or (details[0] if details else None)
    invoked = [record["skill_invoked"] for record in records if "skill_invoked" in record]
    if False in invoked:
        total["skill_invoked"] = False
    elif None in invoked or not invoked:
        total["skill_invoked"] = None
    else:
        total["skill_invoked"] = True
    offered = [record["offered_skills"] for record in records if record.get("offered_skills") is not None]
    total["offered_skills"] = offered[0] if offered else None
    total["transcript_missing"] = any(record.get("transcript_missing", False) for record in records)
    total["transcript_artifacts"] = [
        record["transcript_artifact"] for record in records if "transcript_artifact" in record
    ]
    total["evidence_diagnostics"] = [item for record in records for item in record.get("evidence_diagnostics", [])]
    total["evidence_diagnostics"] += [note for record in records for note in record.get("cli_notes", [])]
    tool_use_counts: dict[str, int] = {}
    for record in records:
        for name, uses in record.get("tool_use_counts", {}).items():
            tool_use_counts[name] = tool_use_counts.get(name, 0) + int(uses)
    total["tool_use_counts"] = tool_use_counts
    for field in ("mcp_tool_uses", "mcp_semantic_errors"):
        summed: dict[str, int] = {}
        for record in records:
            for name, uses in record.get(field, {}).items():
                summed[name] = summed.get(name, 0) + int(uses)
        total[field] = summed
    return total


# ---------------------------------------------------------------------------------------------------------
# Progress


MAX_PROGRESS_LINE_BYTES = 1024 * 1024
# The most stdout the reader thread queues for the progress lines between two heartbeat ticks.
MAX_QUEUED_BYTES = 16 * 1024 * 1024
MAX_PENDING = 256
MAX_PREVIEW_CHARS = 800
_PREVIEWED_TOOLS = frozenset({"Read", "Bash", "Grep", "Glob"})
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _neutralize(text: str) -> str:
    # A CI runner treats a line starting with "::" as a workflow command.
    return "\n".join("[:]" + line[2:] if line.startswith("::") else line for line in text.split("\n"))


def _preview(value: Any, secrets: Sequence[str]) -> str:
    try:
        value = redact_value(value, secrets)
    except ValueError:
        value = str(value)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = json.dumps(str(value), ensure_ascii=False)
    text = redact_text(text, secrets).translate(_LINE_BREAKS)
    if len(text) <= MAX_PREVIEW_CHARS:
        return text
    return f"{text[:MAX_PREVIEW_CHARS]}…[truncated {len(text) - MAX_PREVIEW_CHARS} chars]"


def _small_int(value: Any) -> str:
    return str(value) if count(value) is not None else "?"


# Codex's tool items, as the progress lines name them.
CODEX_ITEM_NAMES = {"command_execution": "command", "file_change": "patch", "mcp_tool_call": "MCP tool"}
CODEX_EVENTS = frozenset({"turn.started", "item.completed", "turn.completed", "turn.failed"})


class SessionProgress:
    """Live, redacted metadata about a running session: turns, tool calls, retries, and a heartbeat.

    Model prose is never logged; tool inputs/results of a few read-only tools are shown as bounded,
    redacted previews. `observe` runs on the stdout reader thread, so it only queues the chunk: a reader that
    parsed and redacted every event itself would fall behind a CLI that writes fast, and a CLI that exits with
    output still queued for a full pipe loses it. The heartbeat thread (and exit) reads the chunks and prints
    the messages.
    """

    def __init__(
        self, label: str, stream: TextIO | None = None, secrets: Sequence[str] = (), heartbeat_s: float = 60.0
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stdout
        self.secrets = tuple(secret for secret in secrets if secret)
        self.heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._skipping = False
        self._started = time.monotonic()
        self._last_spoke = self._started
        self.events = 0
        self.turns = 0
        self.tool_calls = 0
        self.mcp_calls = 0
        self._last_message_id: Any = None
        self._pending_tools: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._in_gemini_turn = False
        self._last_activity = "starting"
        self._queue: collections.deque[str] = collections.deque(maxlen=MAX_PENDING)
        # Stdout chunks the reader thread handed over, not read yet (None: a gap where the queue was full).
        self._queue_chunks: list[bytes | None] = []
        self._queued_bytes = 0
        self._dropped = 0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SessionProgress:
        with self._lock:
            self._say(f"started (heartbeat every {self.heartbeat_s:g}s)")
        self._thread = threading.Thread(target=self._heartbeat, name=f"progress-{self.label}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        self._digest()
        self._flush()

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._started)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def _say(self, message: str) -> None:
        # Caller holds the lock. Queue only: the reader thread must never block on a slow log pipe.
        if len(self._queue) == self._queue.maxlen:
            self._dropped += 1
        self._queue.append(_neutralize(redact_text(f"[{self.label} {self._elapsed()}] {message}", self.secrets)))
        self._last_spoke = time.monotonic()

    def _flush(self) -> None:
        with self._lock:
            messages = list(self._queue)
            self._queue.clear()
            dropped, self._dropped = self._dropped, 0
        if dropped:
            messages.insert(0, f"[{self.label}] ({dropped} progress messages dropped)")
        try:
            for message in messages:
                print(message, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass

    def _heartbeat(self) -> None:
        tick = min(1.0, max(self.heartbeat_s / 2, 0.01))
        while not self._done.wait(tick):
            self._digest()
            with self._lock:
                if time.monotonic() - self._last_spoke >= self.heartbeat_s:
                    mcp = f" ({self.mcp_calls} MCP)" if self.mcp_calls else ""
                    self._say(
                        f"still running · {self.events} events · {self.turns} turns · "
                        f"{self.tool_calls} tool calls{mcp} · last: {self._last_activity}"
                    )
            self._flush()

    def observe(self, chunk: bytes) -> None:
        """Queue one stdout chunk for the heartbeat thread. Never raises, never blocks on I/O."""
        try:
            with self._lock:
                if self._queued_bytes + len(chunk) > MAX_QUEUED_BYTES:
                    self._queue_chunks.append(None)  # a gap: the line it falls in cannot be read
                    return
                self._queue_chunks.append(bytes(chunk))
                self._queued_bytes += len(chunk)
        except Exception:
            pass

    def _digest(self) -> None:
        """Read the queued chunks (the heartbeat thread, and exit). Never raises."""
        with self._lock:
            chunks, self._queue_chunks, self._queued_bytes = self._queue_chunks, [], 0
        for chunk in chunks:
            if chunk is None:
                with self._lock:
                    self._buffer.clear()
                    self._skipping = True
                continue
            self._consume(chunk)

    def _consume(self, chunk: bytes) -> None:
        try:
            with self._lock:
                self._buffer.extend(chunk)
                while (newline := self._buffer.find(b"\n")) >= 0:
                    line = bytes(self._buffer[:newline])
                    del self._buffer[: newline + 1]
                    if self._skipping:
                        self._skipping = False
                    else:
                        self._observe_line(line)
                if len(self._buffer) > MAX_PROGRESS_LINE_BYTES:
                    # An enormous event cannot be parsed from a bounded buffer; skip to its end.
                    self._buffer.clear()
                    self._skipping = True
        except Exception:
            pass

    def _observe_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            event = json.loads(line.decode("utf-8", errors="replace"))
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.events += 1
        kind = event.get("type")
        if kind == "assistant":
            self._observe_assistant(event)
        elif kind == "user":
            self._observe_user(event)
        elif kind == "system" and event.get("subtype") == "api_retry":
            delay = nonnegative(event.get("retry_delay_ms"))
            attempt = f"{_small_int(event.get('attempt'))}/{_small_int(event.get('max_retries'))}"
            self._last_activity = f"API retry {attempt}"
            wait = f" in {delay / 1000:.1f}s" if delay is not None else ""
            self._say(f"API retry {attempt}{wait}: the model endpoint did not answer")
        elif kind == "system" and event.get("subtype") == "init":
            self._last_activity = "session init"
            self._say("session initialized")
        elif kind == "step_start":  # opencode: one model request begins
            self.turns += 1
            self._last_activity = "model request"
        elif kind == "tool_use" and isinstance(event.get("part"), dict):  # opencode: a tool part once it has run
            self._observe_tool_part(event["part"])
        elif kind == "assistant.turn_start":  # Copilot: one model turn begins
            self.turns += 1
            self._last_activity = "model request"
        elif kind in ("tool.execution_start", "tool.execution_complete") and isinstance(event.get("data"), dict):
            self._observe_tool_execution(kind, event["data"])  # Copilot
        elif kind in ("message", "tool_use", "tool_result") and "part" not in event:
            self._observe_gemini(kind, event)
        elif kind in CODEX_EVENTS:
            self._observe_codex(str(kind), event)
        elif kind == "result":
            cost = measured_cost(event.get("total_cost_usd"))
            self._last_activity = "result"
            failed = (
                event.get("is_error") or str(event.get("subtype")).startswith("error") or event.get("status") == "error"
            )
            status = "error" if failed or event.get("exitCode") not in (None, 0) else "ok"
            shown = f"${cost:.4f}" if cost is not None else "cost n/a"
            turns = event["num_turns"] if "num_turns" in event else self.turns  # Copilot's and Gemini's count none
            self._say(f"finished · {_small_int(turns)} turns · {status} · {shown}")

    def _observe_tool_part(self, part: dict[str, Any]) -> None:
        """An opencode tool part (request and result in one event): its name and outcome, never its content."""
        name = claude_code.tool_name(part.get("tool"))
        state = part.get("state")
        status = "error" if isinstance(state, dict) and state.get("status") == "error" else "ok"
        self.tool_calls += 1
        self._last_activity = f"{name} result {status}"
        self._say(f"turn {self.turns} · {name} · {status}")

    def _observe_codex(self, kind: str, event: dict[str, Any]) -> None:
        """Codex: its one turn begins, an item is done, or the turn ends (it reports no cost of its own)."""
        if kind == "turn.started":
            self.turns += 1
            self._last_activity = "model request"
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            self._observe_codex_item(event["item"])
        elif kind in ("turn.completed", "turn.failed"):
            self._last_activity = "result"
            status = "ok" if kind == "turn.completed" else "error"
            self._say(f"finished · {_small_int(self.tool_calls)} tool calls · {status} · cost n/a")

    def _observe_codex_item(self, item: dict[str, Any]) -> None:
        """A Codex tool item (a command, a patch, an MCP call) once done: its kind and outcome, never its content."""
        name = CODEX_ITEM_NAMES.get(str(item.get("type")))
        if name is None:
            return
        status = "ok" if item.get("status") == "completed" else "error"
        self.tool_calls += 1
        self.mcp_calls += 1 if item.get("type") == "mcp_tool_call" else 0
        self._last_activity = f"{name} result {status}"
        self._say(f"turn {self.turns} · {name} · {status}")

    def _observe_tool_execution(self, kind: str, data: dict[str, Any]) -> None:
        """A Copilot tool execution's start (its name, remembered) or completion (name and outcome, never content)."""
        call_id = data.get("toolCallId")
        if not isinstance(call_id, str):
            return
        if kind == "tool.execution_start":
            self._pending_tools[call_id] = claude_code.tool_name(data.get("toolName"))
            while len(self._pending_tools) > MAX_PENDING:
                self._pending_tools.popitem(last=False)
            return
        name = self._pending_tools.pop(call_id, "tool")
        status = "ok" if data.get("success") is True else "error"
        self.tool_calls += 1
        self._last_activity = f"{name} result {status}"
        self._say(f"turn {self.turns} · {name} · {status}")

    def _observe_gemini(self, kind: str, event: dict[str, Any]) -> None:
        """A Gemini CLI message (a turn begins with the model's first text or tool use after input or results), tool
        use (its name, remembered) or tool result (name and outcome, never content)."""
        if kind == "tool_result" or (kind == "message" and event.get("role") == "user"):
            self._in_gemini_turn = False
        elif not self._in_gemini_turn:
            self._in_gemini_turn = True
            self.turns += 1
            self._last_activity = "model reply"
        call_id = event.get("tool_id")
        if kind == "message" or not isinstance(call_id, str):
            return
        if kind == "tool_use":
            self._pending_tools[call_id] = claude_code.tool_name(event.get("tool_name"))
            while len(self._pending_tools) > MAX_PENDING:
                self._pending_tools.popitem(last=False)
            return
        name = self._pending_tools.pop(call_id, "tool")
        status = "ok" if event.get("status") == "success" else "error"
        self.tool_calls += 1
        self._last_activity = f"{name} result {status}"
        self._say(f"turn {self.turns} · {name} · {status}")

    def _observe_assistant(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        message_id = message.get("id") if isinstance(message, dict) else None
        # The CLI emits one assistant event per content block; blocks of one reply share the message id.
        if message_id is None or message_id != self._last_message_id:
            self.turns += 1
        self._last_message_id = message_id
        uses = [
            block
            for block in claude_code.content_blocks(event)
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        if not uses:
            self._last_activity = "model reply"
            return
        names = [claude_code.tool_name(block.get("name")) for block in uses]
        self.tool_calls += len(names)
        self.mcp_calls += sum(1 for name in names if name.startswith(mcp.MCP_PREFIX))
        self._last_activity = ", ".join(names[:4])
        self._say(f"turn {self.turns} · {self._last_activity}")
        for block, name in zip(uses, names, strict=True):
            tool_id = block.get("id")
            if isinstance(tool_id, str) and claude_code.TOOL_ID.fullmatch(tool_id):
                self._pending_tools[tool_id] = name
                while len(self._pending_tools) > MAX_PENDING:
                    self._pending_tools.popitem(last=False)
            if name in _PREVIEWED_TOOLS or name.startswith(mcp.MCP_PREFIX):
                self._say(f"tool {name} input={_preview(block.get('input'), self.secrets)}")

    def _observe_user(self, event: dict[str, Any]) -> None:
        for block in claude_code.content_blocks(event):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tool_id = block.get("tool_use_id")
            name = self._pending_tools.pop(tool_id, "tool") if isinstance(tool_id, str) else "tool"
            status = "error" if block.get("is_error") is True else "ok"
            if status == "ok" and name.startswith(mcp.MCP_PREFIX) and mcp.is_error_envelope(block.get("content")):
                status = "error (envelope)"
            self._last_activity = f"{name} result {status}"
            if name in _PREVIEWED_TOOLS or name.startswith(mcp.MCP_PREFIX):
                self._say(f"tool {name} result={status} output={_preview(block.get('content'), self.secrets)}")
