"""A finished cell in the formats other tools read: each session's ATIF trajectory beside its transcript, and the
cell as a Harbor trial folder (`run<i>/harbor/`: `config.json`, `result.json` with the reward, `agent/` with the
trajectories, `verifier/` with the reward files), which `harbor view`, Phoenix's Harbor plugin and Docent read.

`result.json` follows Harbor's `TrialResult` (schema version 1): the reward is the row's `resolved`, the other
rewards the grade's parts (visible verify, hidden oracle, skill proof, a review's F1, a trigger's verdict), the
agent result the ledger's tokens and cost, and its metadata the arm, the row's verdict and every trajectory's
digest (`interop.inspect_log` refuses a trajectory that no longer matches it). Written after the record, by the
cell's own job; the folder appears whole (built aside, then renamed into place) or not at all.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillbench.base import artifacts, layout
from skillbench.base.errors import SkillbenchError
from skillbench.execution import agents
from skillbench.execution.streams import MAX_TRANSCRIPT_BYTES, parse_event_stream
from skillbench.interop import atif
from skillbench.interop.turns import StreamTurns, join_ledger, stream_turns

TRIAL_RESULT = "result.json"
TRIAL_CONFIG = "config.json"
TRAJECTORY = "trajectory.json"
# As private as the transcripts they are made of (the run folder's transcripts are owner-only).
PRIVATE = 0o600
# A fixed namespace, so the same cell always gets the same trial id.
TRIAL_NAMESPACE = uuid.UUID("4f1f2f0e-43a1-5b7e-9a43-5c0d1e11a7b5")


class ExportError(SkillbenchError, ValueError):
    """A file an export reads is not what the record says it is; the message names the file."""


def checked_bytes(path: Path, sha256: str, *, what: str) -> bytes:
    """The bytes of `path`, refused (naming the file) when they no longer have the digest recorded for them."""
    data = artifacts.read_regular_file(path, limit=MAX_TRANSCRIPT_BYTES * 4, what=what)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ExportError(
            f"{path}: its SHA-256 does not match the {sha256[:16]}… recorded for it; the file was changed after the "
            "cell wrote it: restore it, or run the cell again"
        )
    return data


def _message(detail: Any) -> str | None:
    """A row's error detail as Harbor's exception message (a string): a session's structured detail as JSON."""
    if detail is None or isinstance(detail, str):
        return detail
    return json.dumps(detail, sort_keys=True, ensure_ascii=False)


def _unique(names: Sequence[str | None]) -> list[str]:
    return list(dict.fromkeys(name for name in names if name))


def _skills(
    agent: str, raw: bytes, offered: Sequence[str], expected: str | None, skill_texts: Mapping[str, str] | None
) -> dict[str, Any]:
    """The skills the session was offered (its stream's list, else the row's) and those its own stream proves it
    used, by its adapter's proof (None when the proof is ambiguous); `skill_texts` are the SKILL.md texts the
    session's clone held, which a proof by reading the file (Codex) must have shown whole."""
    reading = agents.adapter(agent).read_stream(
        raw, overflow=False, limit=MAX_TRANSCRIPT_BYTES, mcp_servers=[], skill_texts=skill_texts
    )
    listed = _unique([*(reading.offered_skills or []), *offered])
    invoked: list[str] | None = None
    if reading.stream_error is None:
        try:
            invoked = [skill for skill in _unique([*listed, expected]) if reading.skill_invoked(skill)]
        except ValueError:
            invoked = None
    return {"offered": listed, "expected": expected, "invoked": invoked}


def _transcript_of(row: Mapping[str, Any], role: str, used: set[str]) -> Mapping[str, Any] | None:
    for item in row.get("transcript_artifacts") or []:
        name = Path(item["path"]).name
        if item["path"] not in used and name.startswith(f"{role}-"):
            used.add(item["path"])
            return item
    return None


def session_trajectories(
    run_dir: Path,
    row: Mapping[str, Any],
    ledger_sessions: Sequence[Mapping[str, Any]],
    *,
    expected_skills: Sequence[str | None],
    skill_texts: Mapping[str, str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """(path relative to the run folder, ATIF document) of each session of the cell, in the order they ran.

    A transcript is read only when it still has the digest the row recorded (else ExportError naming it); a
    session without a transcript (its stream was no evidence) is its ledger's requests alone.
    """
    agent = row.get("agent") or agents.DEFAULT_AGENT
    used: set[str] = set()
    documents: list[tuple[str, dict[str, Any]]] = []
    for index, session in enumerate(ledger_sessions):
        role = session["role"]
        transcript = _transcript_of(row, role, used)
        offered = list(row.get("offered_skills") or [])
        expected = expected_skills[index] if index < len(expected_skills) else None
        if transcript is not None:
            raw = checked_bytes(run_dir / transcript["path"], transcript["sha256"], what="transcript")
            reading = stream_turns(agent, parse_event_stream(raw))
            skills = _skills(agent, raw, offered, expected, skill_texts)
            path = layout.trajectory_of_transcript(transcript["path"])
        else:
            reading = StreamTurns([], bounded=True)
            skills = {"offered": _unique(offered), "expected": expected, "invoked": None}
            path = f"transcripts/{role}-{index}{layout.TRAJECTORY_SUFFIX}"
        document = atif.trajectory(
            reading=reading,
            steps=join_ledger(reading, session),
            ledger_session=session,
            agent=agent,
            cli_version=row.get("cli_version"),
            model=row.get("model"),
            session_id=Path(transcript["path"]).stem.removeprefix(f"{role}-") if transcript else None,
            skills=skills,
            extra={
                "skillbench": {
                    "task": row["task"],
                    "arm": row["arm"],
                    "run": row["run"],
                    "role": role,
                    "wire": session.get("wire"),
                    "transcript": transcript["path"] if transcript else None,
                    "transcript_sha256": transcript["sha256"] if transcript else None,
                }
            },
        )
        artifacts.validate(document, "atif-trajectory", source=run_dir / path)
        documents.append((path, document))
    return documents


def numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The values that are numbers (booleans as 0/1); an unmeasured or unproven one is left out."""
    return {name: float(value) for name, value in values.items() if isinstance(value, bool | int | float)}


def grade_parts(row: Mapping[str, Any]) -> dict[str, float]:
    """What the row's grade is made of, as numbers: visible verify, the hidden oracle, the skill proof, a review's
    F1, a trigger's verdict (each where the row has it)."""
    return numbers(
        {
            # A review or trigger task has no visible verify of its own.
            "verify": None if row.get("review") or row.get("trigger") else row.get("authored_tests_passed"),
            "oracle": row.get("oracle_passed"),
            "skill_used": row.get("skill_invoked"),
            "review_f1": (row.get("review") or {}).get("f1"),
            "trigger_correct": (row.get("trigger") or {}).get("correct"),
        }
    )


def rewards(row: Mapping[str, Any]) -> dict[str, float]:
    """Harbor's rewards of a cell: `reward` is the row's `resolved`, then the grade's parts."""
    return {"reward": float(row["resolved"]), **grade_parts(row)}


def trial_result(
    record: Mapping[str, Any], *, experiment: str, trajectories: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """Harbor's `TrialResult` of a cell. `trajectories`: (path in the trial folder, SHA-256) of each one."""
    row, timing = record["row"], record["timing"]
    trial_name = f"{row['task']}__{row['arm']}__run{row['run']}"
    agent = row.get("agent") or agents.DEFAULT_AGENT
    config = trial_config(row, trial_name)
    reads, writes = row.get("cache_read_input_tokens") or 0, row.get("cache_creation_input_tokens") or 0
    failed = row.get("error_kind")
    return {
        "schema_version": 1,
        "id": str(uuid.uuid5(TRIAL_NAMESPACE, f"{experiment}/{trial_name}/{timing['started_at']}")),
        "task_name": row["task"],
        "trial_name": trial_name,
        "trial_uri": f"skillbench://{experiment}/{row['task']}/{row['arm']}/run{row['run']}",
        "task_id": {"path": row["task"]},
        "source": experiment,
        "task_checksum": row.get("task_prompt_digest") or "",
        "config": config,
        "agent_info": {
            "name": agent,
            "version": row.get("cli_version") or "unknown",
            "model_info": {"name": row.get("model"), "provider": row.get("provider")},
        },
        "agent_result": {
            "n_input_tokens": (row.get("input_tokens") or 0) + reads + writes,
            "n_cache_tokens": reads,
            "n_output_tokens": row.get("output_tokens") or 0,
            "cost_usd": row.get("cost_usd"),
            "metadata": {
                "skillbench": {
                    "arm": row["arm"],
                    "run": row["run"],
                    "resolved": row["resolved"],
                    "error_kind": failed,
                    "cli_cost_usd": row.get("cli_cost_usd"),
                    "price_table": (row.get("cost_check") or {}).get("price_table"),
                    "trajectories": [{"path": path, "sha256": digest} for path, digest in trajectories],
                }
            },
        },
        "verifier_result": {"rewards": rewards(row)},
        "exception_info": (
            {
                "exception_type": failed,
                "exception_message": _message(row.get("error_detail")) or failed,
                "exception_traceback": "",
                "occurred_at": timing["finished_at"],
            }
            if failed
            else None
        ),
        "started_at": timing["started_at"],
        "finished_at": timing["finished_at"],
        "agent_execution": _sessions_window(timing),
    }


def trial_config(row: Mapping[str, Any], trial_name: str) -> dict[str, Any]:
    """Harbor's `TrialConfig` of a cell, as far as it applies: the task, the trial's name, the agent and model."""
    return {
        "task": {"path": row["task"]},
        "trial_name": trial_name,
        "agent": {"name": row.get("agent") or agents.DEFAULT_AGENT, "model_name": row.get("model")},
    }


def _sessions_window(timing: Mapping[str, Any]) -> dict[str, Any] | None:
    sessions = timing.get("sessions") or []
    if not sessions:
        return None
    return {"started_at": sessions[0]["started_at"], "finished_at": sessions[-1]["finished_at"]}


def write_cell_exports(
    run_dir: Path,
    record: Mapping[str, Any],
    ledger: Mapping[str, Any],
    *,
    experiment: str,
    expected_skills: Sequence[str | None],
    skill_texts: Mapping[str, str] | None = None,
) -> Path:
    """Each session's trajectory beside its transcript, then the cell's Harbor trial folder; returns the folder.
    `skill_texts`: the SKILL.md texts the cell's clone held (`CellContext.skill_texts`)."""
    run_dir = Path(run_dir)
    documents = session_trajectories(
        run_dir, record["row"], ledger["sessions"], expected_skills=expected_skills, skill_texts=skill_texts
    )
    texts = [(path, artifacts.canonical_json(document)) for path, document in documents]
    for path, text in texts:
        artifacts.atomic_write_text(run_dir / path, text, mode=PRIVATE)
    names = [TRAJECTORY] if len(texts) == 1 else [f"{index}-{Path(path).name}" for index, (path, _) in enumerate(texts)]
    digests = [
        (f"agent/{name}", hashlib.sha256(text.encode("utf-8")).hexdigest())
        for name, (_, text) in zip(names, texts, strict=True)
    ]
    result = trial_result(record, experiment=experiment, trajectories=digests)
    artifacts.validate(result, "harbor-trial-result", source=run_dir / layout.HARBOR / TRIAL_RESULT)
    target = run_dir / layout.HARBOR
    staging = Path(tempfile.mkdtemp(prefix=".harbor.", dir=run_dir))
    try:
        files = {f"agent/{name}": text for name, (_, text) in zip(names, texts, strict=True)}
        reward = result["verifier_result"]["rewards"]["reward"]
        files["verifier/reward.txt"] = f"{reward:g}\n"
        files["verifier/reward.json"] = artifacts.canonical_json({"reward": reward})
        files[TRIAL_CONFIG] = artifacts.canonical_json(result["config"])
        files[TRIAL_RESULT] = artifacts.canonical_json(result)
        for name, text in files.items():
            artifacts.atomic_write_text(staging / name, text, mode=PRIVATE)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def read_trial(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A trial folder's result and its trajectories, each refused (naming it) unless it matches its digest."""
    result = artifacts.read_artifact(Path(folder) / TRIAL_RESULT, "harbor-trial-result")
    trajectories = []
    for item in result["agent_result"]["metadata"]["skillbench"]["trajectories"]:
        data = checked_bytes(Path(folder) / item["path"], item["sha256"], what="trajectory")
        trajectories.append(artifacts.validate(_json(data, Path(folder) / item["path"]), "atif-trajectory"))
    return result, trajectories


def _json(data: bytes, path: Path) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not valid UTF-8 JSON ({exc})") from exc
