"""A session job's way to its model: the job's gateway, the upstream of each session, and the run's spend.

Every job that runs sessions (a cell, a proposer) starts one `skillbench.execution.gateway.ModelGateway`
in its own process, outside every sandbox, with the provider key from the harness's environment
(`model_access`). Its Unix socket lives in the job's private root and is bound into each session's
sandbox, which has no network of its own; the CLI gets a session token and the forwarder's loopback
address. A session's upstream is its scripted model (`model.provider: scripted`, one loopback server per
session) or the configured API.

The experiment-wide budget (`budget.max_usd`) is enforced at the gateway: before each request it adds
this gateway's spend to the experiment's spend meter (`RunSpend`: one file per gateway ever started
under `results/<experiment>/.spend/`, kept after its job ends, so retried and killed attempts count).
A job that passes a cap learns it from the gateway's refusal, as its sessions' records say.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.base import artifacts, layout
from skillbench.execution.gateway import ModelGateway
from skillbench.execution.pricing import price_book
from skillbench.experiment.settings import SessionJobSettings

# The scripted model accepts any key; the gateway sends this one upstream when the environment holds none.
SCRIPTED_KEY = "skillbench-scripted-offline-key"
ANTHROPIC_API_URL = "https://api.anthropic.com"


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


def spend_file(results_root: str | Path, job: str) -> Path:
    """A new file in the experiment's spend meter for this attempt of `job` (one per gateway started)."""
    name = hashlib.sha256(job.encode()).hexdigest()[:16]
    return Path(layout.spend_meter(results_root)) / f"{name}-{os.getpid()}-{time.time_ns()}.json"


class RunSpend:
    """The experiment's spend outside one gateway: the sum of every other file in its spend meter.

    Each gateway keeps one file, replaced atomically after every settled request and marked `final`
    when the gateway stops; a final file never changes again, so it is read once. A file whose job died
    keeps the last spend it reported, which was spent.
    """

    def __init__(
        self, results_root: str | Path, own: Path | None = None, known_final: dict[str, float] | None = None
    ) -> None:
        """``known_final``: final files already read (by name), e.g. by an earlier process (`finals()`)."""
        self.folder = Path(layout.spend_meter(results_root))
        self.own = own
        self._lock = threading.Lock()
        self._final: dict[str, float] = dict(known_final or {})

    def finals(self) -> dict[str, float]:
        """Every final file read so far, by name, and its spend: what a later RunSpend need not read again."""
        with self._lock:
            return dict(self._final)

    def __call__(self) -> float:
        total = 0.0
        own = self.own.name if self.own is not None and self.own.parent == self.folder else None
        for name in self._names():
            if name == own:
                continue
            with self._lock:
                cached = self._final.get(name)
            if cached is not None:
                total += cached
                continue
            try:
                document = json.loads((self.folder / name).read_text())
                usd = float(document["usd"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not yet written: its gateway has settled nothing
            if document.get("final") is True:
                with self._lock:
                    self._final[name] = usd
            total += usd
        return total

    def _names(self) -> list[str]:
        """The meter's files, by name, sorted (one listing: at thousands of cells, a glob of Paths cost more than
        the sum)."""
        try:
            with os.scandir(self.folder) as entries:
                return sorted(entry.name for entry in entries if entry.name.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            return []


def _write_spend(path: Path, job: str, usd: float, *, final: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"job": job, "usd": round(usd, 10), "final": final}
    artifacts.atomic_write_text(path, json.dumps(document, sort_keys=True) + "\n")


@contextmanager
def model_access(
    *,
    private_root: Path,
    settings: SessionJobSettings,
    api_key: str | None,
    socket_owner: tuple[int, int] | None,
    results_root: str | Path | None,
    job: str,
) -> Iterator[ModelAccess]:
    """Start the job's gateway (socket in `private_root`, handed to `socket_owner`) and stop it afterwards.

    `settings` gives the model, the price table and the run's spend cap; `job` names the job in the run's live
    spend; without `results_root` there is no run to share a budget with (only the session cap holds).
    """
    model = settings.model
    if model.provider != "scripted" and not api_key:
        raise ValueError(f"model.provider {model.provider} needs an API key and none was given")
    own = spend_file(results_root, job) if results_root is not None else None
    spend = RunSpend(results_root, own) if results_root is not None else None
    socket_path = private_root / "gateway" / "model.sock"
    socket_path.parent.mkdir(mode=0o711, exist_ok=True)
    if socket_owner is not None:
        os.chown(socket_path.parent, *socket_owner)

    gateway: ModelGateway | None = None
    # Requests settle on the gateway's threads; one at a time, so a later total is never overwritten by an earlier.
    meter_lock = threading.Lock()
    # A final file is read once and trusted from then on: nothing may replace it with a live one.
    finalised = threading.Event()

    def report(_label: str, _entry: dict[str, Any]) -> None:
        if own is not None and gateway is not None:
            with meter_lock:
                if not finalised.is_set():
                    _write_spend(own, job, gateway.spent_usd(), final=False)

    gateway = ModelGateway(
        socket_path,
        api_key=api_key or SCRIPTED_KEY,
        prices=price_book(settings.agent.prices),
        budget_usd=settings.run.max_usd if spend is not None else None,
        spent_elsewhere=spend,
        socket_owner=socket_owner,
        on_settled=report,
    )
    try:
        with gateway:
            yield ModelAccess(
                gateway=gateway,
                socket=socket_path,
                provider=model.provider,
                base_url=model.base_url,
                session_cap_usd=settings.run.max_session_usd,
            )
    finally:
        with meter_lock:
            finalised.set()
            if own is not None and own.exists():  # no file: nothing settled, nothing spent
                _write_spend(own, job, gateway.spent_usd(), final=True)


# ─── One live request before a run (`skillbench check --live`) ─────────────────────────────────────────────

# The smallest request the Messages API answers with a generation: one token out.
PROBE_BODY = {"max_tokens": 1, "messages": [{"role": "user", "content": "Reply with the word ok."}]}
ANTHROPIC_VERSION = "2023-06-01"
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Probe:
    """What the provider answered one minimal request through a gateway: the status, the error's type and message
    (None when it answered), and what the request cost by the gateway's ledger."""

    status: int
    error_type: str | None
    message: str | None
    cost_usd: float | None


class _UnixConnection(http.client.HTTPConnection):
    """HTTP to the gateway's Unix socket."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("gateway", timeout=timeout)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def probe_model(
    *,
    upstream: str,
    api_key: str,
    model: str,
    prices: Any,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Probe:
    """One minimal Messages request for ``model`` (one output token) through a gateway of its own that holds
    ``api_key`` and talks to ``upstream``, as a session's would: a bad key, an unknown model or no access answers
    here, before any session is paid for."""
    folder = Path(tempfile.mkdtemp(prefix="sb-probe-"))
    try:
        gateway = ModelGateway(folder / "model.sock", api_key=api_key, prices=prices, upstream_timeout_s=timeout_s)
        with gateway:
            token = gateway.open_session("live check", upstream=upstream, wire="anthropic")
            connection = _UnixConnection(gateway.socket_path, timeout_s)
            try:
                connection.request(
                    "POST",
                    "/v1/messages",
                    body=json.dumps({"model": model, **PROBE_BODY}),
                    headers={
                        "content-type": "application/json",
                        "x-api-key": token,
                        "anthropic-version": ANTHROPIC_VERSION,
                    },
                )
                response = connection.getresponse()
                status, raw = response.status, response.read()
            finally:
                connection.close()
            ledger = gateway.close_session(token)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    error_type = message = None
    if status >= 300:
        try:
            error = json.loads(raw).get("error") or {}
        except (ValueError, AttributeError):
            error = {}
        error_type = str(error.get("type") or "") or None
        message = str(error.get("message") or raw[:200].decode("utf-8", "replace")).strip()
    return Probe(status, error_type, message, ledger["totals"].get("cost_usd"))
