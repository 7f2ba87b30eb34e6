"""A session job's way to its model: the job's gateway, the upstream of each session, and the run's spend.

Every job that runs sessions (a cell, a proposer) starts one `skillbench.execution.gateway.ModelGateway`
in its own process, outside every sandbox, with the provider key from the harness's environment
(`model_access`). Its Unix socket lives in the job's private root and is bound into each session's
sandbox, which has no network of its own; the CLI gets a session token and the forwarder's loopback
address. A session's upstream is its scripted model (`model.provider: scripted`, one loopback server per
session) or the configured API.

The run-wide budget (`budget.max_usd`) is enforced at the gateway: before each request it adds this
job's spend to what the rest of the run has spent (`RunSpend`: the recorded cost of every finished
cell and proposer session on disk, plus the live spend of every other running job, which each job
keeps in `.progress/spend/`). A job that passes a cap learns it from the gateway's refusal, as its
sessions' records say.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.base import artifacts, layout
from skillbench.execution.gateway import ModelGateway

# The scripted model accepts any key; the gateway sends this one upstream when the environment holds none.
SCRIPTED_KEY = "skillbench-scripted-offline-key"
ANTHROPIC_API_URL = "https://api.anthropic.com"
# How long the recorded spend on disk is reused before it is read again (a request reads it at most this stale).
RECORDED_SPEND_TTL_S = 2.0


@dataclass(frozen=True)
class ModelAccess:
    """What one job's sessions need to reach their model: its gateway and that gateway's socket on the host."""

    gateway: ModelGateway
    socket: Path
    provider: str
    base_url: str | None
    session_cap_usd: float | None

    def upstream(self, scripted_url: str | None) -> str:
        """A session's upstream: its scripted model's URL, or the configured API."""
        if self.provider == "scripted":
            if scripted_url is None:
                raise ValueError("a scripted session needs its scripted model's URL")
            return scripted_url
        return self.base_url or ANTHROPIC_API_URL


def live_spend_file(results_root: str | Path, job: str) -> Path:
    """Where a running job keeps its measured spend so far (one small JSON file per job)."""
    name = hashlib.sha256(job.encode()).hexdigest()[:32]
    return Path(layout.progress_spend(results_root)) / f"{name}.json"


class RunSpend:
    """The run's spend outside one job: recorded on disk, and live in the other running jobs."""

    def __init__(self, results_root: str | Path, job: str) -> None:
        self.root = Path(results_root)
        self.own = live_spend_file(results_root, job)
        self._lock = threading.Lock()
        self._recorded: tuple[float, float] | None = None

    def recorded(self) -> float:
        """Measured cost of every finished cell and proposer session under the results folder (cached briefly)."""
        with self._lock:
            if self._recorded is not None and time.monotonic() - self._recorded[0] < RECORDED_SPEND_TTL_S:
                return self._recorded[1]
        total = 0.0
        for path in layout.cell_records_on_disk(self.root):
            cost = artifacts.read_artifact(path, "cell-record")["row"].get("cost_usd")
            total += cost or 0.0
        for path in layout.proposer_sessions_on_disk(self.root):
            cost = artifacts.read_artifact(path, "proposer-session")["session"].get("cost_usd")
            total += cost or 0.0
        with self._lock:
            self._recorded = (time.monotonic(), total)
        return total

    def live(self) -> float:
        """The measured spend other running jobs report (their files under `.progress/spend/`); a file a job on
        this host left when it died is not counted (its record, if it wrote one, is)."""
        folder = self.own.parent
        total = 0.0
        for path in folder.glob("*.json") if folder.is_dir() else ():
            if path == self.own:
                continue
            try:
                document = json.loads(path.read_text())
                if document["host"] == socket.gethostname() and not _alive(int(document["pid"])):
                    continue
                total += float(document["usd"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a file being replaced right now
        return total

    def __call__(self) -> float:
        return self.recorded() + self.live()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def model_access(
    *,
    private_root: Path,
    config: dict[str, Any],
    api_key: str | None,
    socket_owner: tuple[int, int] | None,
    results_root: str | Path | None,
    job: str,
) -> Iterator[ModelAccess]:
    """Start the job's gateway (socket in `private_root`, handed to `socket_owner`) and stop it afterwards.

    `config` holds the model, agent (prices) and budget sections; `job` names the job in the run's live
    spend; without `results_root` there is no run to share a budget with (only the session cap holds).
    """
    model, budget = config["model"], config.get("budget") or {}
    if model["provider"] != "scripted" and not api_key:
        raise ValueError(f"model.provider {model['provider']} needs an API key and none was given")
    spend = RunSpend(results_root, job) if results_root is not None else None
    socket_path = private_root / "gateway" / "model.sock"
    socket_path.parent.mkdir(mode=0o711, exist_ok=True)
    if socket_owner is not None:
        os.chown(socket_path.parent, *socket_owner)

    gateway: ModelGateway | None = None

    def report(_label: str, _entry: dict[str, Any]) -> None:
        if spend is not None and gateway is not None:
            spend.own.parent.mkdir(parents=True, exist_ok=True)
            document = {
                "job": job,
                "usd": round(gateway.spent_usd(), 10),
                "pid": os.getpid(),
                "host": socket.gethostname(),
            }
            artifacts.atomic_write_text(spend.own, json.dumps(document, sort_keys=True) + "\n")

    gateway = ModelGateway(
        socket_path,
        api_key=api_key or SCRIPTED_KEY,
        prices=config["agent"]["prices"]["usd_per_mtok"],
        budget_usd=budget.get("max_usd") if spend is not None else None,
        spent_elsewhere=spend,
        socket_owner=socket_owner,
        on_settled=report,
    )
    with gateway:
        try:
            yield ModelAccess(
                gateway=gateway,
                socket=socket_path,
                provider=model["provider"],
                base_url=model.get("base_url"),
                session_cap_usd=budget.get("max_session_usd"),
            )
        finally:
            if spend is not None:
                spend.own.unlink(missing_ok=True)
