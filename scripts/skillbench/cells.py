"""One cell — (task, arm, run) — end to end: clone, setup, sessions, verify, hidden oracle, record.

A cell works in a fresh private folder: a copy of the task's sanitized template, a private
home and tmp, everything run through the cell's sandbox. The result row follows
`schemas/result-row.schema.json`; the record adds timing. Session, infra and cleanup
failures are raised as `RetryableCellFailure` until the last attempt, so Snakemake
retries the job; the last attempt records the excluded row instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from . import arms as arm_config
from . import breaker, oracle, repo, sessions
from .aggregate import SYSTEMIC_ERROR_KINDS
from .artifacts import ArtifactError, remove_tree
from .oracle import ORACLE_ENV_VAR
from .process import CANCEL, ProcessError
from .redaction import redact_text
from .sandbox import Sandbox, SandboxError, claude_settings
from .scripted_model import ScriptedModel, session_steps

VERIFY_TAIL_CHARS = 4000
MAX_DETAIL_CHARS = 2000
CHURN_EXCLUDES = (arm_config.PLAN_DIRECTORY, ".claude/skills")
MAX_FINGERPRINT_BYTES = 4 * 1024 * 1024
SCRIPTED_KEY = "skillbench-scripted-offline-key"


class InfraError(RuntimeError):
    """A harness-side failure (clone, setup, sandbox, verifier crash): the cell is excluded evidence."""


class RetryableCellFailure(RuntimeError):
    """A systemic failure on a non-final attempt: fail the job so Snakemake retries it."""


class CellCancelled(RuntimeError):
    """The run was interrupted: the cell writes no record, so the next run does it again."""


@dataclass
class CellContext:
    """Everything a cell needs that is not the task itself. Paths are absolute."""

    config: dict[str, Any]
    template: Path
    oracle_snapshot: Path
    run_dir: Path
    claude_bin: Path
    cli_version: str | None
    model_script: dict[str, Any] | None
    api_key: str | None
    skills_source: Path | None = None
    skills_root: str = ".claude/skills"
    overlay: Path | None = None
    overlay_digest: str | None = None
    log: TextIO | None = None
    timings: dict[str, float] = field(default_factory=dict)
    session_windows: list[dict[str, str]] = field(default_factory=list)

    @property
    def secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []


def now_iso(timespec: str = "seconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def _say(context: CellContext, message: str) -> None:
    if context.log is not None:
        print(redact_text(message, context.secrets), file=context.log, flush=True)


def skill_fingerprint(clone: Path, skills_root: str, skills: list[str]) -> str | None:
    """Framed digest of every file under the given skills (paths relative to the clone); None without skills."""
    if not skills:
        return None
    frames: list[bytes] = []
    total = 0
    for skill in sorted(skills):
        root = clone / skills_root / skill
        if root.is_symlink() or not root.is_dir():
            raise InfraError(f"skill folder {skills_root}/{skill} is missing or not a real directory")
        for path in sorted(root.rglob("*")):
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise InfraError(f"skill tree holds a non-regular file: {path.relative_to(clone)}")
            payload = path.read_bytes()
            total += len(payload)
            if total > MAX_FINGERPRINT_BYTES:
                raise InfraError(f"skill files exceed {MAX_FINGERPRINT_BYTES} bytes")
            frames += [path.relative_to(clone).as_posix().encode(), payload]
    return oracle.framed_digest(frames)


def workspace_snapshot(clone: Path) -> dict[str, str]:
    """Path → kind/mode/size/digest for everything in the clone except .git."""
    entries: dict[str, str] = {}
    for directory, subdirs, files in os.walk(clone):
        relative_dir = Path(directory).relative_to(clone)
        if relative_dir == Path("."):
            subdirs[:] = [name for name in subdirs if name != ".git"]
        for name in subdirs + files:
            path = Path(directory) / name
            info = os.lstat(path)
            key = (relative_dir / name).as_posix()
            if stat.S_ISDIR(info.st_mode):
                entries[key] = f"d:{stat.S_IMODE(info.st_mode):o}"
            elif stat.S_ISLNK(info.st_mode):
                entries[key] = f"l:{os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[key] = f"f:{stat.S_IMODE(info.st_mode):o}:{info.st_size}:{digest}"
            else:
                entries[key] = f"s:{info.st_mode}"
    return entries


def plan_document_change(before: dict[str, str], after: dict[str, str]) -> str:
    """The one plan document a plan session produced; ValueError naming any other change."""
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    removed = [path for path in changed if path not in after]
    plans = [path for path in changed if path in after and after[path].startswith("f:")
             and path.startswith(f"{arm_config.PLAN_DIRECTORY}/") and path.endswith(".md")]
    new_dirs = [path for path in changed if path not in before and after[path].startswith("d:")]
    plan_parents = {str(Path(plan).parent) for plan in plans}
    allowed_dirs = [path for path in new_dirs if any(parent == path or parent.startswith(f"{path}/")
                                                     for parent in plan_parents)]
    unauthorized = [path for path in changed if path not in plans and path not in allowed_dirs]
    if removed:
        raise ValueError(f"plan session deleted workspace path(s): {', '.join(removed[:8])}")
    if len(plans) != 1:
        raise ValueError(f"plan session must produce exactly one plan document under "
                         f"{arm_config.PLAN_DIRECTORY}/, found {len(plans)}")
    if unauthorized:
        raise ValueError(f"plan session changed unauthorized workspace path(s): {', '.join(unauthorized[:8])}")
    return plans[0]


def _tail(text: str, limit: int) -> str:
    return text[-limit:]


def install_skills(clone: Path, source: Path | None, skills_root: str, git) -> None:
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


def run_verifier(sandbox: Sandbox, command: str, *, timeout: float, env: dict[str, str],
                 extra_read_only=()) -> tuple[bool, str, float]:
    """Run `verify` or the oracle with a read-only workspace and no network; raise on an abnormal end."""
    started = time.monotonic()
    result = sandbox.run(["/bin/sh", "-c", command], timeout=timeout, env=env, read_only_workspace=True,
                         network=False, extra_read_only=extra_read_only)
    elapsed = time.monotonic() - started
    if result.state not in ("ok", "failed") or result.returncode is None:
        raise InfraError(f"verifier did not finish normally ({result.state}): {result.detail or ''}")
    output = f"{result.stdout_tail}\n{result.stderr_tail}".strip()
    return result.ok, output, elapsed


def run_hidden_oracle(sandbox: Sandbox, task: dict[str, Any], files: list[tuple[str, bytes]], *,
                      timeout: float, private_root: Path) -> tuple[bool, float]:
    """Stage the oracle at a random path only now, run it, re-check it, remove it. Output is never kept."""
    if sandbox.backend == "bwrap":
        stage_root = oracle.stage(private_root, files)
        mountpoint = sandbox.clone / stage_root.name
        mountpoint.mkdir(mode=0o700)
        sandbox_root = sandbox.to_sandbox(mountpoint)
        extra = [(stage_root, sandbox_root)]
    else:
        stage_root = oracle.stage(sandbox.clone, files)
        mountpoint = None
        sandbox_root = str(stage_root)
        extra = []
    try:
        env = sandbox.environment({ORACLE_ENV_VAR: sandbox_root})
        passed, _output, elapsed = run_verifier(sandbox, task["oracle"]["command"], timeout=timeout, env=env,
                                                extra_read_only=extra)
        oracle.check_staged(stage_root, files)
    finally:
        oracle.remove_staged(stage_root)
        if mountpoint is not None:
            mountpoint.rmdir()
    return passed, elapsed


def base_row(task: dict[str, Any], binding: dict[str, Any], arm: str, run: int, context: CellContext) -> dict[str, Any]:
    config = context.config
    return {
        "schema": "result-row/v1",
        "task": task["id"], "class": task["class"], "run": run, "arm": arm,
        "ok": False, "resolved": False,
        "authored_tests_passed": False, "authored_test_output": "", "verify_output": "",
        "oracle_passed": False, "oracle_output": "",
        "error_kind": None, "error_detail": None, "evidence_diagnostics": [],
        **dict.fromkeys(sessions.USAGE_FIELDS, 0),
        "cost_usd": None, "cost_check": None, "duration_s": 0.0, "num_turns": 0,
        "session_ids": [], "transcript_artifacts": [], "transcript_missing": False, "skill_invoked": None,
        "tool_use_counts": {}, "plan_produced": False,
        "diff_files": 0, "diff_insertions": 0, "diff_deletions": 0,
        "model": config["model"]["name"], "effort": config["model"]["effort"],
        "provider": config["model"]["provider"], "cli_version": context.cli_version,
        "task_ref": binding["ref"], "task_base_sha": binding["resolved_sha"],
        "sanitized_task_sha": binding["sanitized_sha"], "variant_head_sha": None,
        "task_prompt_digest": binding["prompt_digest"],
        "skill_digest": None, "candidate_overlay_digest": context.overlay_digest,
        "oracle_digest": binding["oracle_digest"], "oracle_command_digest": binding["oracle_command_digest"],
        "oracle_manifest_digest": binding["oracle_manifest_digest"],
        "sandbox_backend": config["sandbox"]["backend"], "recorded_at": now_iso(),
    }


def cost_check(summed: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    prices = config["agent"]["prices"]
    reported, recomputed = summed.get("cost_usd"), summed.get("recomputed_cost_usd")
    agrees = difference = None
    if reported is not None and recomputed is not None:
        difference = 0.0 if recomputed == reported == 0 else round(
            100 * abs(reported - recomputed) / max(recomputed, reported), 3)
        agrees = difference <= prices["tolerance_pct"]
    return {"price_table": prices["table"], "recomputed_usd": recomputed, "agrees": agrees,
            "difference_pct": difference}


def session_environment(sandbox: Sandbox, base_url: str | None, api_key: str) -> dict[str, str]:
    extra = {"ANTHROPIC_API_KEY": api_key, "CLAUDE_CODE_SHELL_PREFIX": sandbox.shell_prefix}
    if base_url:
        extra["ANTHROPIC_BASE_URL"] = base_url
    return sandbox.environment(extra)


def run_one_session(session: dict[str, Any], prompt: str, *, task: dict[str, Any], arm: str, run: int,
                    sandbox: Sandbox, context: CellContext, disallowed: list[str]) -> dict[str, Any]:
    config = context.config
    argv = sessions.cli_command(
        sandbox.claude, tools=config["agent"]["tools"], disallowed_tools=disallowed,
        model=config["model"]["name"], effort=config["model"]["effort"],
        settings_json=claude_settings(sandbox_backend=sandbox.backend))
    label = f"{task['id']}/{arm}/run{run}/{session['role']}"
    with ExitStack() as stack:
        if config["model"]["provider"] == "scripted":
            steps = session_steps(context.model_script, task["id"], session["role"])
            server = stack.enter_context(ScriptedModel(
                steps, defaults=context.model_script.get("defaults", {}),
                variables={"workspace": sandbox.workspace}, variation_key=label))
            base_url, api_key = server.base_url, context.api_key or SCRIPTED_KEY
        else:
            base_url, api_key = config["model"]["base_url"], context.api_key
        progress = stack.enter_context(sessions.SessionProgress(
            label, stream=context.log, secrets=context.secrets, heartbeat_s=config["agent"]["heartbeat_s"]))
        started, window_start = time.monotonic(), now_iso("milliseconds")
        record = sessions.run_session(
            sandbox.command(argv), prompt=prompt, env=session_environment(sandbox, base_url, api_key),
            cwd=None if sandbox.backend == "bwrap" else str(sandbox.clone),
            timeout=config["agent"]["session_timeout_s"], expected_skill=session.get("skill"),
            transcript_dir=context.run_dir / "transcripts", transcript_prefix=f"{session['role']}",
            secrets=context.secrets, prices=config["agent"]["prices"]["usd_per_mtok"], progress=progress)
        context.timings["sessions"] = context.timings.get("sessions", 0.0) + time.monotonic() - started
    context.session_windows.append({"role": session["role"], "started_at": window_start,
                                    "finished_at": now_iso("milliseconds")})
    return record


def execute_cell(task: dict[str, Any], binding: dict[str, Any], arm: str, run: int,
                 context: CellContext, private_root: Path) -> dict[str, Any]:
    """The cell's work; raises InfraError/ProcessError/SandboxError/OSError/ValueError for harness failures."""
    config = context.config
    definition = arm_config.arm_definition(config, arm)
    row = base_row(task, binding, arm, run, context)
    clone = private_root / "workspace"
    repo.clone_template(context.template, clone)
    sandbox = Sandbox(config["sandbox"]["backend"], clone, private_root, bwrap=config["sandbox"]["bwrap"],
                      claude_bin=context.claude_bin, read_only_paths=[context.skills_root])
    git = sandbox.git()
    oracle_files = oracle.load_snapshot(context.oracle_snapshot, binding)
    skills = arm_config.arm_skills(config, arm)
    install_skills(clone, context.skills_source, context.skills_root, git)

    base_fingerprint = skill_fingerprint(clone, context.skills_root, skills)
    if task.get("setup"):
        started = time.monotonic()
        result = sandbox.run(["/bin/sh", "-lc", task["setup"]], timeout=config["agent"]["setup_timeout_s"])
        context.timings["setup"] = time.monotonic() - started
        if not result.ok:
            raise InfraError(f"task setup failed ({result.state}, exit {result.returncode}): "
                             f"{_tail(result.stderr_tail or result.stdout_tail, 1500)}")
        if skill_fingerprint(clone, context.skills_root, skills) != base_fingerprint:
            raise InfraError("task setup changed the evaluated skill fingerprint")
    if arm_config.is_candidate(arm):
        from .overlay import apply_overlay

        if context.overlay is None:
            raise InfraError(f"candidate arm {arm} has no frozen overlay")
        apply_overlay(context.overlay, clone, git, expected_digest=context.overlay_digest,
                      evolvable=config["skills"]["evolvable"])
    expected_fingerprint = skill_fingerprint(clone, context.skills_root, skills)
    row["skill_digest"] = expected_fingerprint
    orig_sha = repo.head_commit(git)
    row["variant_head_sha"] = orig_sha
    before_work = repo.work_digest(git, orig_sha, CHURN_EXCLUDES)

    records: list[dict[str, Any]] = []
    plan_path: str | None = None
    plan_produced = True
    diagnostics: list[str] = []
    for session in definition["sessions"]:
        prompt = arm_config.render_prompt(config, session, task_prompt=task["prompt"], plan_path=plan_path)
        before = workspace_snapshot(clone) if session.get("plan_document") else None
        record = run_one_session(session, prompt, task=task, arm=arm, run=run, sandbox=sandbox, context=context,
                                 disallowed=definition.get("disallowed_tools", []))
        records.append(record)
        if record["error_kind"] == "cancelled" or CANCEL.is_set():
            raise CellCancelled(f"{task['id']}/{arm}/run{run}: interrupted during the {session['role']} session; "
                                "no record is written, so the next run does this cell again")
        if skill_fingerprint(clone, context.skills_root, skills) != expected_fingerprint:
            planning = bool(session.get("plan_document"))
            message = f"{'planning' if planning else 'implementation'} changed the evaluated skill fingerprint"
            if record["ok"]:
                record.update(ok=False, error_detail=message,
                              error_kind="plan-evidence-invalid" if planning else "implementation-evidence-invalid")
            else:
                diagnostics.append(message)
        if not record["ok"]:
            if session.get("plan_document"):
                plan_produced = False
            break
        if session.get("plan_document"):
            try:
                plan_path = plan_document_change(before, workspace_snapshot(clone))
            except ValueError as exc:
                record.update(ok=False, error_kind="plan-evidence-invalid", error_detail=str(exc))
                plan_produced = False
                break

    summed = sessions.sum_sessions(records)
    row.update({key: summed[key] for key in (
        *sessions.USAGE_FIELDS, "cost_usd", "duration_s", "num_turns", "ok", "session_ids", "error_kind",
        "skill_invoked", "transcript_missing", "transcript_artifacts", "tool_use_counts")})
    row["error_detail"] = summed["error_detail"]
    row["evidence_diagnostics"] = [*summed["evidence_diagnostics"], *diagnostics]
    row["cost_check"] = cost_check(summed, config)
    row["plan_produced"] = plan_produced
    if not skills:
        row["skill_invoked"] = None

    verify_env = sandbox.environment()
    passed, output, elapsed = run_verifier(sandbox, task["verify"], timeout=config["agent"]["verify_timeout_s"],
                                           env=verify_env)
    context.timings["verify"] = elapsed
    row["authored_tests_passed"] = passed
    row["authored_test_output"] = row["verify_output"] = _tail(redact_text(output, context.secrets),
                                                               VERIFY_TAIL_CHARS)
    oracle_passed, oracle_elapsed = run_hidden_oracle(
        sandbox, task, oracle_files, timeout=config["agent"]["verify_timeout_s"], private_root=private_root)
    context.timings["oracle"] = oracle_elapsed
    row["oracle_passed"] = oracle_passed
    row["oracle_output"] = "hidden oracle passed" if oracle_passed else "hidden oracle failed"
    row["resolved"] = bool(row["ok"] and passed and oracle_passed)
    if row["error_kind"] is None and not row["resolved"]:
        row["error_kind"] = "verify-failed" if not passed else "oracle-failed"

    files, insertions, deletions = repo.churn(git, orig_sha, CHURN_EXCLUDES)
    row.update(diff_files=files, diff_insertions=insertions, diff_deletions=deletions)
    if row["resolved"] and repo.work_digest(git, orig_sha, CHURN_EXCLUDES) == before_work:
        row.update(resolved=False, error_kind="no-work-produced",
                   error_detail="the arm reported success without any change outside plans and skills")
    patch, truncated = repo.binary_patch(git, orig_sha, CHURN_EXCLUDES)
    if context.secrets:
        # surrogateescape keeps binary hunks byte-exact while secrets in text are replaced.
        patch = redact_text(patch.decode("utf-8", "surrogateescape"), context.secrets).encode(
            "utf-8", "surrogateescape")
    (context.run_dir / "patch.diff").write_bytes(patch)
    if truncated:
        row["evidence_diagnostics"].append(f"patch.diff truncated at {repo.MAX_PATCH_BYTES} bytes")
    row["ok"] = bool(row["ok"])
    return row


HARNESS_FAILURES = (InfraError, ProcessError, SandboxError, OSError, ValueError, ArtifactError,
                    repo.GitError, oracle.OracleError)


def run_cell(task: dict[str, Any], binding: dict[str, Any], arm: str, run: int, context: CellContext, *,
             attempt: int, attempts: int, breaker_state: Path) -> dict[str, Any]:
    """Run one cell and return its record; raise RetryableCellFailure on non-final systemic failures."""
    config = context.config
    label = f"[{task['id']}][{arm}][run {run}]"
    breaker.check(breaker_state, config["agent"]["outage_streak"])
    transcripts = context.run_dir / "transcripts"
    if transcripts.exists():
        shutil.rmtree(transcripts)
    context.run_dir.mkdir(parents=True, exist_ok=True)
    transcripts.mkdir(mode=0o700)
    (context.run_dir / "patch.diff").write_bytes(b"")
    started_at, started = now_iso(), time.monotonic()
    _say(context, f"{label} attempt {attempt}/{attempts} starting")
    private_root = Path(tempfile.mkdtemp(prefix="skillbench-cell-"))
    try:
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted before it started")
        row = execute_cell(task, binding, arm, run, context, private_root)
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted; no record is written, so the next run does this cell again")
    except HARNESS_FAILURES as exc:
        if CANCEL.is_set():
            raise CellCancelled(f"{label} interrupted ({type(exc).__name__}); the next run does this cell again") \
                from exc
        row = base_row(task, binding, arm, run, context)
        row.update(error_kind="infra-error",
                   error_detail=_tail(redact_text(f"{type(exc).__name__}: {exc}", context.secrets), MAX_DETAIL_CHARS))
    finally:
        cleanup_error = None
        try:
            remove_tree(private_root)
        except OSError as exc:
            cleanup_error = exc
    if cleanup_error is not None:
        primary = f"primary={row['error_kind']}: {row['error_detail']}"
        row.update(ok=False, resolved=False, error_kind="cleanup-failure",
                   error_detail=_tail(f"{primary}; cleanup: {type(cleanup_error).__name__}: {cleanup_error}",
                                      MAX_DETAIL_CHARS))
    if isinstance(row["error_detail"], str):
        row["error_detail"] = redact_text(row["error_detail"], context.secrets)
    wall = time.monotonic() - started
    streak = breaker.record(breaker_state, label, row["error_kind"])
    cost = "n/a" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
    tokens = row["input_tokens"] + row["output_tokens"]
    _say(context, f"{label} resolved={row['resolved']} tokens={tokens} cost={cost} took={wall:.1f}s "
                  f"error_kind={row['error_kind']}")
    if row["error_detail"]:
        detail = json.dumps(row["error_detail"]) if isinstance(row["error_detail"], dict) else row["error_detail"]
        _say(context, f"{label} detail: {detail[:1200].replace(chr(10), ' ⏎ ')}")
    if row["error_kind"] in SYSTEMIC_ERROR_KINDS and attempt < attempts:
        raise RetryableCellFailure(f"{label} {row['error_kind']} on attempt {attempt}/{attempts} "
                                   f"(outage streak {streak}): {row['error_detail']}")
    in_sessions = context.timings.get("sessions", 0.0)
    return {
        "schema": "cell-record/v1",
        "row": row,
        "attempt": attempt,
        "timing": {
            "started_at": started_at, "finished_at": now_iso(), "wall_s": round(wall, 3),
            "sessions_s": round(in_sessions, 3), "setup_s": round(context.timings.get("setup", 0.0), 3),
            "verify_s": round(context.timings.get("verify", 0.0), 3),
            "oracle_s": round(context.timings.get("oracle", 0.0), 3),
            "overhead_s": round(wall - in_sessions - context.timings.get("verify", 0.0)
                                - context.timings.get("oracle", 0.0), 3),
            "sessions": context.session_windows,
        },
    }
