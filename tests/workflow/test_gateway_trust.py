"""The keyless design against a hostile agent, through the real Claude Code CLI, Snakemake and Bubblewrap.

The provider key lives only in the model gateway each session job runs outside every sandbox; a
session gets a token `sbx-session-…` valid while it runs, and the CLI's sandbox reaches nothing but
the gateway's socket through a forwarder inside its own network namespace. The suite
(tests/workflow/suites/keyless) attacks that from inside cells and each test asserts that the attack
failed and what the row says:

* `keyless` (scripted model, baseline arm, a 64 MB disk quota per cell): a key hunt from Bash and the
  CLI's Read tool; a cell that fills its quota next to an innocent one (both alone on two cores);
  a task setup that tries the host's network.
* `paid` (model.provider: anthropic through a loopback TLS stand-in upstream with a test CA, the
  workflow arm, 3 runs on one core, budget.max_usd a few cents): the upstream sees the real key on
  every request and nothing in a sandbox does; the budget stops the run mid-cell at the gateway;
  the plan session's token is revoked before the work session's is issued. Then `retried` (its own
  experiment and budget): a session that fails after two billed turns, tried twice; both attempts'
  spend must count.
* Parse-time refusals (snakemake -n): a plugin with an LSP server, a plugin whose manifest name is a
  path, an MCP server that mounts the task suite.

The key-form search (`hostile.key_leaks`) covers every file the runs wrote.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from conftest import RUN_S
from hostile import Listener, host_address, key_leaks, tool_calls
from skillbench.execution import gateway
from skillbench.execution.scripted_model import (
    ScriptedModel,
    conversation_text,
    load_model_script,
    render_sse,
    session_steps,
)

SUITE = Path(__file__).parent / "suites" / "keyless"
TOKEN_PREFIX = gateway.TOKEN_PREFIX
# What a leak would look like in a kept file: the literal token, or the redaction that replaced a secret.
REDACTED = "[REDACTED]"
EXCLUDED = {"session-error", "infra-error", "evidence-unverified", "cleanup-failure", "cancelled", "budget-exhausted"}
# The price table of config/config.yaml (USD per million tokens).
PRICE = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}
KEYHUNT_STEPS = 10  # keyhunt's scripted turns: nine tool calls and the closing text
DISK_MB = 64
# The host's /tmp may lose at most this much while a cell fills its quota (results, logs and other
# users' files included). The fill tries 12 chunks of 16 MB into each of /tmp and /workspace, so a quota that
# leaked either folder onto the host would take 192 MB or more; a shared machine's other work took 32.4 MB of
# the root file system during one fill, which a slack of half the quota did not absorb.
HOST_TMP_SLACK_MB = 128
# Every turn of the `paid` script costs the same: 2000 input and 100 output tokens.
PAID_REQUEST_USD = (2000 * PRICE["input"] + 100 * PRICE["output"]) / 1e6
BUDGET_USD = 0.07
# Between one and two attempts of `retried` (two priced turns each).
RETRY_BUDGET_USD = 0.02
PAID_JOBS = 1  # the budget run's --cores: how many cells can spend at once


def usd(usage: dict) -> float:
    return (
        (usage.get("input_tokens") or 0) * PRICE["input"]
        + (usage.get("output_tokens") or 0) * PRICE["output"]
        + (usage.get("cache_creation_input_tokens") or 0) * PRICE["cache_write"]
        + (usage.get("cache_read_input_tokens") or 0) * PRICE["cache_read"]
    ) / 1e6


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def masked(key: str) -> str:
    """What the gateway puts in place of the key in anything the upstream sends back."""
    return (gateway.MASK.decode() * len(key))[: len(key)]


def outputs(calls: list[dict]) -> str:
    return "\n".join(call["output"] or "" for call in calls)


def bash_output(calls: list[dict], command: str) -> str:
    """The output of the one Bash call whose command holds `command` (outputs may quote earlier ones: the
    key hunt prints the CLI's own session file)."""
    found = [call["output"] or "" for call in calls if call["name"] == "Bash" and command in call["input"]["command"]]
    assert len(found) == 1, (command, [call["input"] for call in calls])
    return found[0]


def kept_files(project) -> list[Path]:
    return [project.root / "results", project.root / "logs", project.root / ".snakemake"]


def tokens_kept(project) -> list[str]:
    """Every file the run wrote that holds a session token."""
    return [
        str(path)
        for root in kept_files(project)
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and TOKEN_PREFIX.encode() in path.read_bytes()
    ]


def keyless_project(tmp_path_factory, name: str, values: dict[str, str]):
    """A copy of the workflow with the keyless suite at keyless/, its placeholders filled."""
    from conftest import copy_project

    project = copy_project(tmp_path_factory.mktemp(name) / "project", commit=False)
    suite = project.root / "keyless"
    shutil.copytree(SUITE, suite)
    for file in ("tasks.yaml", "model-script.yaml"):
        text = (suite / file).read_text()
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        (suite / file).write_text(text)
    return project


class HostFreeSpace:
    """The least free space /tmp had while the block ran, sampled every 0.1 s."""

    def __init__(self, path: str = "/tmp") -> None:
        self.path = path
        self.before = shutil.disk_usage(path).free
        self.least = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.least = min(self.least, shutil.disk_usage(self.path).free)

    def __enter__(self) -> HostFreeSpace:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def dropped_mb(self) -> float:
        return (self.before - self.least) / 2**20


# ---------------------------------------------------------------------------------------------
# The keyless run: key hunt, disk quota, setup network


@pytest.fixture(scope="module")
def listener():
    """A listener on every host address, checked reachable from the host on loopback and the machine's own address."""
    listener = Listener(host="0.0.0.0")
    address = host_address()
    assert listener.reachable_from_host(["127.0.0.1", address]), "the host cannot reach its own listener"
    yield listener, address
    listener.close()


@pytest.fixture(scope="module")
def keyless(tmp_path_factory, listener):
    """The diskfill and innocent cells alone on two cores (so they run side by side), then the rest of the run."""
    counter, address = listener
    project = keyless_project(tmp_path_factory, "keyless", {"@@PORT@@": str(counter.port), "@@HOST_IP@@": address})
    key = f"sk-keyless-{uuid.uuid4().hex}"
    config = {
        "experiment": "keyless",
        "runs": 1,
        "selected_arms": ["baseline"],
        "tasks": {"suite": "keyless/tasks.yaml", "only": ["keyhunt", "diskfill", "innocent", "setupnet"]},
        "agent": {"attempts": 1},
        "evolution": {"generations": 0},
        "sandbox": {"limits": {"disk_mb": DISK_MB}},
    }
    pair = [f"results/keyless/cells/{task}/baseline/run0/record.json" for task in ("diskfill", "innocent")]
    with HostFreeSpace() as host_tmp:
        project.snakemake(*pair, config=config, env={"ANTHROPIC_API_KEY": key})
    # The rest: its rows and report (the paid run makes every target of a run, pages and summary included).
    sweep = ["results/keyless/sweep/results.jsonl", "results/keyless/sweep/report.md"]
    result = project.snakemake(*sweep, config=config, env={"ANTHROPIC_API_KEY": key})
    records = project.results("keyless", "cells").glob("*/baseline/run0/record.json")
    rows = {path.parts[-4]: json.loads(path.read_text())["row"] for path in records}
    yield {
        "project": project,
        "rows": rows,
        "key": key,
        "listener": counter,
        "host_tmp": host_tmp,
        "output": result.stdout + result.stderr,
    }


def cell(run: dict, task: str, arm: str = "baseline", index: int = 0, experiment: str = "keyless"):
    run_dir = run["project"].results(experiment, "cells", task, arm, f"run{index}")
    record = json.loads((run_dir / "record.json").read_text())
    ledger = json.loads((run_dir / "ledger.json").read_text())
    return record["row"], tool_calls(run_dir), run_dir, record, ledger


def test_no_file_of_the_keyless_run_holds_the_key_and_no_listener_was_reached(keyless):
    project = keyless["project"]
    assert set(keyless["rows"]) == {"keyhunt", "diskfill", "innocent", "setupnet"}
    for task, row in keyless["rows"].items():
        assert row["sandbox_backend"] == "bwrap"
        assert row["error_kind"] not in EXCLUDED, (task, row["error_kind"], row["error_detail"])
        _row, calls, _run_dir, record, _ledger = cell(keyless, task)
        assert record["attempt"] == 1
        text = outputs(calls)
        assert TOKEN_PREFIX not in text and REDACTED not in text, f"{task}: a tool result carried a secret"
    assert key_leaks(kept_files(project), keyless["key"]) == []
    assert tokens_kept(project) == []
    assert keyless["key"] not in keyless["output"]
    assert keyless["listener"].connections == 0


def test_the_key_hunt_finds_neither_the_key_nor_the_token(keyless):
    row, calls, _run_dir, _record, _ledger = cell(keyless, "keyhunt")
    environ = bash_output(calls, "echo environ-done")
    assert "== env" in environ and "== /proc/1/environ" in environ and "== /proc/1/cmdline" in environ
    assert "ANTHROPIC" not in environ and "CLAUDE_CODE" not in environ
    # Bash runs in a PID namespace of its own: no /proc/<pid> of the CLI (whose argv holds its settings), the
    # forwarder or the cell's Bubblewrap.
    assert "--settings" not in environ and "--mcp-config" not in environ and "forwarder.py" not in environ
    home = bash_output(calls, "echo home-done")
    assert "== ~/.claude.json" in home and "== ~/.claude" in home
    # The gateway's socket is covered by a tmpfs in every nested sandbox: the folder is empty.
    listing = home.split("/run/skillbench-gateway:\n")[1].split("== ~/.claude.json")[0]
    assert [line.split()[-1] for line in listing.splitlines()[1:] if line.strip()] == [".", ".."], listing
    found = bash_output(calls, "echo grep-done")
    assert found.split("token-files:")[1].split("key-env-files:")[0].strip() == "", found
    assert found.split("key-env-files:")[1].split("grep-done")[0].strip() == "", found
    echoed = bash_output(calls, "echo echo-done")
    key = keyless["key"]
    assert masked(key)[::-1] in echoed  # the model's copy of the key reached the agent masked
    assert row["error_kind"] is None and row["resolved"] is True and row["oracle_passed"] is True


def test_the_forwarder_the_gateway_socket_and_the_host_are_unreachable_from_bash(keyless):
    _row, calls, _run_dir, _record, _ledger = cell(keyless, "keyhunt")
    network = bash_output(calls, "echo net-done")
    lines = dict(line.split(": ", 1) for line in network.splitlines() if ": " in line)
    for name in ("forwarder", "host-loopback", "host-address"):
        assert lines[name].startswith(("ConnectionRefusedError", "OSError: [Errno 101]")), network
    assert lines["gateway-socket"].startswith("FileNotFoundError"), network
    assert "connected" not in network.replace("connect(", "")
    assert keyless["listener"].connections == 0


def test_the_read_tool_is_denied_proc_and_shows_no_token_in_the_clis_state(keyless):
    _row, calls, _run_dir, _record, _ledger = cell(keyless, "keyhunt")
    reads = {call["input"]["file_path"]: call for call in calls if call["name"] == "Read"}
    assert set(reads) == {"/proc/self/environ", "/proc/self/cmdline", "/home/agent/.claude.json"}
    for path in ("/proc/self/environ", "/proc/self/cmdline"):
        assert reads[path]["error"] is True and "denied" in reads[path]["output"].lower(), reads[path]
    state = reads["/home/agent/.claude.json"]["output"]
    assert TOKEN_PREFIX not in state and REDACTED not in state and "ANTHROPIC" not in state


def test_the_key_hunts_ledger_prices_every_turn_and_holds_no_secret(keyless):
    row, _calls, run_dir, _record, ledger = cell(keyless, "keyhunt")
    (session,) = ledger["sessions"]
    assert session["role"] == "baseline" and session["open"] is False and session["closed_at"] is not None
    entries = session["requests"]
    messages = [entry for entry in entries if entry["kind"] == "messages"]
    assert all(entry["outcome"] == "ok" and entry["status"] == 200 for entry in messages), messages
    # The script's turns (900 input, 60 output tokens each); anything else is a side query of the CLI.
    turns = [entry for entry in messages if entry["usage"]["input_tokens"] == 900]
    assert len(turns) == KEYHUNT_STEPS == row["num_turns"], (len(turns), row["num_turns"])
    measured = round(sum(entry["cost_usd"] for entry in entries), 10)
    assert session["totals"]["cost_usd"] == measured
    assert measured == pytest.approx(sum(usd(entry["usage"]) for entry in messages), abs=1e-9)
    assert row["cost_usd"] == round(measured, 4)
    assert row["cost_check"]["ledger_usd"] == row["cost_usd"] and row["cost_check"]["agrees"] is True
    text = (run_dir / "ledger.json").read_text()
    assert TOKEN_PREFIX not in text and key_leaks([run_dir / "ledger.json"], keyless["key"]) == []


def test_a_cell_that_fills_its_quota_is_its_counted_outcome_and_the_neighbour_is_untouched(keyless):
    row, calls, _run_dir, record, _ledger = cell(keyless, "diskfill")
    fill = bash_output(calls, "echo fill-done")
    tmp_line = next(line for line in fill.splitlines() if line.startswith("/tmp: wrote"))
    workspace_line = next(line for line in fill.splitlines() if line.startswith("/workspace: wrote"))
    assert tmp_line.endswith("then: No space left on device") and workspace_line.endswith(
        "then: No space left on device"
    ), fill
    written = float(tmp_line.split("wrote ")[1].split(" MB")[0]) + float(
        workspace_line.split("wrote ")[1].split(" MB")[0]
    )
    assert DISK_MB - 24 <= written <= DISK_MB, fill  # the quota (less the clone, homes and CLI state) and no more
    assert row["error_kind"] == "disk-quota-exceeded" and row["resolved"] is False
    assert f"{DISK_MB} MB disk quota" in row["error_detail"]
    assert record["attempt"] == 1
    # Counted: the report counts the run as valid (not excluded).
    report = keyless["project"].results("keyless", "sweep", "report.md").read_text()
    diskfill_line = next(line for line in report.splitlines() if line.startswith("| diskfill |"))
    assert "| 0/1 |" in diskfill_line and "excluded" not in diskfill_line, diskfill_line
    # The host never saw the fill.
    assert keyless["host_tmp"].dropped_mb < HOST_TMP_SLACK_MB, keyless["host_tmp"].dropped_mb

    innocent, innocent_calls, _dir, innocent_record, _ = cell(keyless, "innocent")
    # Precondition: the innocent session ran while the neighbour's quota was full.
    filled_at = float(fill.split("filled-at=")[1].split()[0])
    (filler,) = record["timing"]["sessions"]
    (neighbour,) = innocent_record["timing"]["sessions"]
    assert epoch(neighbour["started_at"]) < epoch(filler["finished_at"]) and filled_at < epoch(
        neighbour["finished_at"]
    ), (filled_at, filler, neighbour)
    assert "room-exit=0" in bash_output(innocent_calls, "room-exit")
    assert "innocent-add 4" in bash_output(innocent_calls, "innocent-add")
    assert innocent["resolved"] is True and innocent["error_kind"] is None


def test_setup_has_no_network(keyless):
    row, calls, run_dir, _record, _ledger = cell(keyless, "setupnet")
    seen = bash_output(calls, "cat setup-network.txt")
    lines = [line for line in seen.splitlines() if line.strip()]
    assert len(lines) == 2 and not any("connected" in line for line in lines), seen
    assert all(("Network is unreachable" in line or "ConnectionRefusedError" in line) for line in lines), seen
    assert keyless["listener"].connections == 0  # neither the task check's setup nor the cell's reached it
    assert row["resolved"] is True and row["error_kind"] is None
    check = json.loads(keyless["project"].results("keyless", "tasks", "setupnet", "check.json").read_text())
    assert check["ok"] is True, check


# ---------------------------------------------------------------------------------------------
# The paid run: the real-provider path over TLS, the budget, token life


def make_test_ca(folder: Path) -> dict[str, Path]:
    """A test CA and a server certificate for 127.0.0.1 it signed (openssl CLI)."""
    folder.mkdir()
    ca_key, ca, key, request, cert = (folder / name for name in ("ca.key", "ca.pem", "key.pem", "req.csr", "cert.pem"))
    extensions = folder / "server.ext"
    extensions.write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
    )

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=skillbench test CA",
        "-keyout", str(ca_key), "-out", str(ca),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(request))
    openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-out", str(cert), "-extfile", str(extensions),
    )  # fmt: skip
    return {"ca": ca, "cert": cert, "key": key}


class TlsUpstream:
    """A loopback HTTPS stand-in for the Anthropic Messages API that plays the suite's script and records every
    request's credentials and what it served. A request's task is the one whose prompt it carries and its role
    comes from the prompt template (plan, work, baseline); requests without tools (the CLI's side queries) get the
    scripted model's short answer, and a script's `fail` steps answer with their error."""

    ROLES = (
        ("skill to execute the plan at", "work"),
        ("Use the change-plan skill for", "plan"),
        ("Implement the change in this repository", "baseline"),
    )

    def __init__(self, certs: dict[str, Path], suite: Path, tasks: list[str]) -> None:
        document = load_model_script(suite / "model-script.yaml")
        prompts = {task["id"]: task["prompt"] for task in yaml.safe_load((suite / "tasks.yaml").read_text())["tasks"]}
        self.prompts = {task: prompts[task] for task in tasks}
        self.models = {
            (task, role): ScriptedModel(
                session_steps(document, task, role),
                defaults=document["defaults"],
                variables={"workspace": "/workspace"},
            )
            for task in tasks
            for role in document["tasks"][task]
        }
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs["cert"], certs["key"])
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> TlsUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def session_of(self, body: dict) -> tuple[str, str] | None:
        """(task, role) of a request; a work session's prompt names only the plan, so its task is the one task
        that has work steps."""
        text = " ".join(conversation_text(body).split())
        role = next((role for phrase, role in self.ROLES if phrase in text), None)
        task = next((task for task, prompt in self.prompts.items() if " ".join(prompt.split()) in text), None)
        if task is None:
            having = [candidate for candidate, their_role in self.models if their_role == role]
            task = having[0] if len(having) == 1 else None
        return (task, role) if (task, role) in self.models else None

    def served(self, task: str | None = None) -> list[dict]:
        """The requests answered with a message (and so billed), of one task or all."""
        with self._lock:
            return [r for r in self.requests if r["usage"] is not None and task in (None, r.get("task"))]

    def _handler(self):
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _error(self, status: int, message: str) -> None:
                document = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
                self._send(status, json.dumps(document).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                entry = {
                    "path": self.path,
                    "x-api-key": self.headers.get("x-api-key"),
                    "authorization": self.headers.get("Authorization"),
                    "token_in_headers": any(TOKEN_PREFIX in value for value in self.headers.values()),
                    "token_in_body": TOKEN_PREFIX.encode() in raw,
                    "usage": None,
                }
                with upstream._lock:
                    upstream.requests.append(entry)
                if self.path.split("?", 1)[0].endswith("/count_tokens"):
                    self._send(200, b'{"input_tokens": 1000}')
                    return
                body = json.loads(raw)
                session = upstream.session_of(body)
                if session is None and body.get("tools"):
                    self._error(400, "stand-in: no scripted session for this request")
                    return
                model = upstream.models[session] if session else next(iter(upstream.models.values()))
                kind, index = model.choose(body, subagent=bool(self.headers.get("x-claude-code-agent-id")))
                entry.update(task=session and session[0], role=session and session[1], kind=kind)
                fail = model._scripted_failure(index) if index is not None else None
                if fail is not None:
                    self._error(int(fail["status"]), str(fail.get("message") or "scripted failure"))
                    return
                message = model.build_message(body, kind, index, entry["x-api-key"] or "")
                entry["usage"] = message["usage"]
                if body.get("stream"):
                    self._send(200, render_sse(message), "text/event-stream; charset=utf-8")
                else:
                    self._send(200, json.dumps(message).encode())

        return Handler


@pytest.fixture(scope="module")
def paid(tmp_path_factory):
    """Three runs of the two-session `paid` task, one at a time, through the gateway to the TLS stand-in, with a
    budget that runs out in the second cell; then, in a second experiment with a budget of its own, the `retried`
    task, whose session fails after two priced turns and is tried twice."""
    project = keyless_project(tmp_path_factory, "paid", {"@@PORT@@": "9", "@@HOST_IP@@": "127.0.0.1"})
    certs = make_test_ca(project.root.parent / "ca")
    key = f"sk-upstream-{uuid.uuid4().hex}"
    with TlsUpstream(certs, project.root / "keyless", ["paid", "retried"]) as upstream:
        config = {
            "experiment": "paid",
            "runs": 3,
            "selected_arms": ["workflow"],
            "tasks": {"suite": "keyless/tasks.yaml", "only": ["paid"]},
            "model": {"provider": "anthropic", "base_url": upstream.url},
            "budget": {"max_usd": BUDGET_USD},
            "agent": {"attempts": 1},
            "evolution": {"generations": 0},
        }
        result = project.snakemake(
            "--cores",
            str(PAID_JOBS),
            config=config,
            env={"ANTHROPIC_API_KEY": key, "SSL_CERT_FILE": str(certs["ca"])},
            check=False,  # checked by test_the_paid_run_completes
        )
        paid_requests = list(upstream.requests)
        retry_config = {
            **config,
            "experiment": "retried",
            "runs": 1,
            "selected_arms": ["baseline"],
            "tasks": {"suite": "keyless/tasks.yaml", "only": ["retried"]},
            "budget": {"max_usd": RETRY_BUDGET_USD},
            "agent": {"attempts": 2},
        }
        retried = project.snakemake(
            "results/retried/sweep/results.jsonl",
            config=retry_config,
            env={"ANTHROPIC_API_KEY": key, "SSL_CERT_FILE": str(certs["ca"])},
        )
    run = {
        "project": project,
        "key": key,
        "upstream": upstream,
        "requests": paid_requests,
        "retry_requests": upstream.requests[len(paid_requests) :],
        "returncode": result.returncode,
        "output": result.stdout + result.stderr,
        "retry_output": retried.stdout + retried.stderr,
    }
    run["cells"] = [cell(run, "paid", "workflow", index, experiment="paid") for index in range(3)]
    yield run


def entries(ledger: dict) -> list[dict]:
    return [entry for session in ledger["sessions"] for entry in session["requests"]]


def test_the_paid_run_completes(paid):
    """A run the budget stopped still makes every target: rows, reports, every cell's page and the summary."""
    assert paid["returncode"] == 0, paid["output"][-6000:]


def test_the_upstream_sees_the_real_key_on_every_request_and_never_a_token(paid):
    requests, key = paid["requests"], paid["key"]
    forwarded = [entry for _row, _calls, _dir, _record, ledger in paid["cells"] for entry in entries(ledger)]
    forwarded = [entry for entry in forwarded if entry["outcome"] != "refused"]
    assert len(requests) == len(forwarded) > 0  # every forwarded request, and nothing refused
    everything = requests + paid["retry_requests"]
    assert {request["x-api-key"] for request in everything} == {key}
    assert all(request["authorization"] is None for request in everything)
    assert not any(request["token_in_headers"] or request["token_in_body"] for request in everything)
    assert {request.get("role") for request in requests if request.get("kind") == "step"} == {"plan", "work"}


def test_nothing_in_the_sandbox_or_the_results_holds_the_upstream_key(paid):
    project, key = paid["project"], paid["key"]
    assert key_leaks(kept_files(project), key) == []
    assert tokens_kept(project) == []
    assert key not in paid["output"] and key not in paid["retry_output"]
    for _row, calls, run_dir, _record, _ledger in paid["cells"]:
        text = outputs(calls)
        assert TOKEN_PREFIX not in text and REDACTED not in text and "ANTHROPIC_API_KEY" not in text
        assert TOKEN_PREFIX not in (run_dir / "ledger.json").read_text()
    resolved = next(cell for cell in paid["cells"] if cell[0]["resolved"])
    # The upstream echoed the key into the agent's command: the workspace got the gateway's mask.
    patch = (resolved[2] / "patch.diff").read_text()
    assert f"+the upstream said {masked(key)}" in patch and key not in patch


def test_the_rows_cost_comes_from_the_ledger(paid):
    total = 0.0
    for row, _calls, _dir, _record, ledger in paid["cells"]:
        measured = round(sum(entry["cost_usd"] for entry in entries(ledger)), 10)
        if ledger["sessions"]:
            assert row["cost_usd"] == round(measured, 4), (row["cost_usd"], measured)
            assert row["cost_check"]["ledger_usd"] == row["cost_usd"]
        total += measured
    # Independently of the gateway: what the stand-in served, priced with the same table.
    served = sum(usd(request["usage"]) for request in paid["requests"] if request["usage"])
    assert total == pytest.approx(served, abs=1e-9)
    resolved = next(cell[0] for cell in paid["cells"] if cell[0]["resolved"])
    assert resolved["provider"] == "anthropic" and resolved["cost_check"]["agrees"] is True


def test_the_budget_stops_the_run_at_the_gateway_mid_batch(paid):
    rows = [cell[0] for cell in paid["cells"]]
    kinds = sorted(str(row["error_kind"]) for row in rows)
    assert kinds == ["None", "budget-exhausted", "budget-exhausted"], [
        (r["error_kind"], r["error_detail"]) for r in rows
    ]
    cap = f"${BUDGET_USD:.4f}"
    cut_sessions = []
    for row, _calls, _dir, record, ledger in paid["cells"]:
        if row["error_kind"] != "budget-exhausted":
            continue
        assert record["attempt"] == 1  # never retried
        if ledger["sessions"]:
            # Cut inside the cell: the gateway refused a request and the session ended on it.
            assert f"skillbench gateway: the run's budget of {cap} is reached" in row["error_detail"], row
            last = ledger["sessions"][-1]["requests"][-1]
            assert (last["outcome"], last["refused"], last["status"]) == ("refused", "budget", 402), last
            assert last["cost_usd"] == 0.0
            cut_sessions.append(ledger)
        else:
            assert f"the run's budget of {cap} was reached" in row["error_detail"], row
            assert "before this cell started" in row["error_detail"]
            assert row["session_ids"] == [] and row["num_turns"] == 0
    assert len(cut_sessions) == 1  # one cell was cut mid-way, the next one never started a session

    # The cap is passed by at most the request that crossed it, per cell spending at once.
    spent = sum(row["cost_usd"] for row in rows if row["cost_usd"] is not None)
    largest = max(entry["cost_usd"] for cell in paid["cells"] for entry in entries(cell[4]))
    assert largest == pytest.approx(PAID_REQUEST_USD, abs=1e-9)
    assert BUDGET_USD <= spent + 1e-4 and spent <= BUDGET_USD + PAID_JOBS * largest + 1e-4, spent

    # Nothing was admitted after the cut.
    cut = min(
        epoch(entry["finished_at"])
        for cell in paid["cells"]
        for entry in entries(cell[4])
        if entry["outcome"] == "refused"
    )
    for _row, _calls, _dir, _record, ledger in paid["cells"]:
        for session in ledger["sessions"]:
            after = [entry for entry in session["requests"] if epoch(entry["started_at"]) > cut]
            assert all(entry["outcome"] == "refused" for entry in after), after


def test_a_cell_the_budget_never_started_spent_a_measured_nothing(paid):
    """A cell refused before it started has an empty ledger: its cost is a measured $0, not an unmeasured one
    (which the progress line shows as `+1 unmeasured` and which makes a cost median or sum unknown)."""
    unstarted = [
        cell for cell in paid["cells"] if cell[0]["error_kind"] == "budget-exhausted" and not cell[4]["sessions"]
    ]
    assert len(unstarted) == 1
    row = unstarted[0][0]
    assert row["cost_usd"] == 0.0, row["cost_usd"]


def test_the_summary_says_the_budget_stopped_the_run(paid):
    """summary.md says the gateway refused requests past budget.max_usd and how many cells it cut short, and the
    closing lines tell the user to raise it to finish them."""
    summary = paid["project"].results("paid", "summary.md").read_text()
    assert "**Budget reached:** the model gateway refused every request past `budget.max_usd`" in summary, summary
    assert "2 cell(s) were cut short (rows `budget-exhausted`, excluded)" in summary, summary
    closing = paid["output"][paid["output"].rfind("skillbench:") :]
    assert "budget.max_usd" in closing, closing


def test_the_plan_sessions_token_is_revoked_before_the_work_session_gets_one(paid):
    """The agent never sees its token, so a token's life is shown by the ledger: every request of a session falls
    inside its life, and the plan session is closed before the work session opens. That the gateway refuses a
    revoked token is tests/unit/test_gateway.py::
    test_tokens_are_refused_before_open_after_close_and_from_another_gateway."""
    for _row, _calls, _dir, _record, ledger in paid["cells"]:
        sessions = ledger["sessions"]
        for session in sessions:
            assert session["open"] is False and session["closed_at"] is not None
            for entry in session["requests"]:
                assert session["opened_at"] <= entry["started_at"] <= entry["finished_at"] <= session["closed_at"]
        if len(sessions) == 2:
            plan, work = sessions
            assert (plan["role"], work["role"]) == ("plan", "work")
            assert epoch(plan["closed_at"]) < epoch(work["opened_at"]), (plan["closed_at"], work["opened_at"])
    complete = [cell for cell in paid["cells"] if len(cell[4]["sessions"]) == 2 and cell[0]["resolved"]]
    assert complete, "no cell ran both sessions to the end"


def retried_cell(paid) -> tuple[dict, dict, float]:
    """The `retried` cell's record and row, and what the upstream billed for both its attempts."""
    run_dir = paid["project"].results("retried", "cells", "retried", "baseline", "run0")
    record = json.loads((run_dir / "record.json").read_text())
    billed = [request for request in paid["retry_requests"] if request["usage"] is not None]
    # The first attempt is billed two turns and fails (session-error, retried); the second attempt starts with that
    # spend counted, is billed one turn (under the budget when it started) and is refused the next.
    assert record["attempt"] == 2, record["row"]["error_detail"]
    assert record["row"]["error_kind"] == "budget-exhausted", record["row"]["error_detail"]
    assert len(billed) == 3, [(request.get("task"), request.get("kind")) for request in paid["retry_requests"]]
    return record, record["row"], sum(usd(request["usage"]) for request in billed)


def test_a_retried_attempts_spend_stays_in_the_runs_measured_spend(paid):
    """A session-error is retried; the first attempt was billed all the same. The row is the last attempt's (its
    cost is what the arm did on that attempt), and the experiment's measured spend, in progress.json and the
    closing line, holds both."""
    _record, row, billed = retried_cell(paid)
    assert billed == pytest.approx(3 * PAID_REQUEST_USD, abs=1e-9)
    assert row["cost_usd"] == pytest.approx(PAID_REQUEST_USD, abs=1e-4), row["cost_usd"]
    progress = json.loads(paid["project"].results("retried", "progress.json").read_text())
    assert progress["spend_usd"] == pytest.approx(billed, abs=1e-6), progress
    assert f"${billed:.2f} measured spend" in paid["retry_output"], paid["retry_output"][-2000:]


def test_a_retried_attempts_spend_counts_against_the_budget(paid):
    """budget.max_usd lies between one and two attempts: the second attempt may pass it by one request at most, and
    it is refused at the gateway once the first attempt's spend and its own reach the cap."""
    _record, row, billed = retried_cell(paid)
    assert billed <= RETRY_BUDGET_USD + PAID_REQUEST_USD, (
        f"budget.max_usd ${RETRY_BUDGET_USD:.4f} admitted ${billed:.4f}: the first attempt's spend was not counted"
    )
    assert f"the run's budget of ${RETRY_BUDGET_USD:.4f} is reached" in row["error_detail"], row["error_detail"]


# ---------------------------------------------------------------------------------------------
# Parse time: plugins and MCP mounts


def extension_project(root: Path):
    """A copy of the workflow with the keyless suite, a plugin with an LSP server, a plugin whose manifest name is a
    path, and an MCP server's folder."""
    from conftest import copy_project

    project = copy_project(root / "project", commit=False)
    shutil.copytree(SUITE, project.root / "keyless")
    for folder, name, extra in (
        ("lsp-kit", "lsp-kit", {".lsp.json": '{"python": {"command": "python3", "args": ["-m", "pylsp"]}}\n'}),
        ("escape-kit", "x/../../../home/agent/.claude", {}),
    ):
        plugin = project.root / "plugins" / folder
        (plugin / ".claude-plugin").mkdir(parents=True)
        (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": name, "version": "1.0.0"}))
        (plugin / "skills" / "lean").mkdir(parents=True)
        (plugin / "skills" / "lean" / "SKILL.md").write_text("---\nname: lean\ndescription: Keep it lean.\n---\n")
        for relative, content in extra.items():
            (plugin / relative).write_text(content)
    (project.root / "servers").mkdir()
    (project.root / "servers" / "peek.py").write_text("print('peek')\n")
    return project


def extension_config(case: str) -> dict:
    """A one-task experiment whose only arm loads the hostile extension `case`."""
    base = {
        "experiment": "parse",
        "runs": 1,
        "tasks": {"suite": "keyless/tasks.yaml", "only": ["keyhunt"]},
        "evolution": {"generations": 0},
        "selected_arms": [case],
    }
    session = {"role": "baseline", "prompt": "baseline"}
    if case == "mount":
        server = {
            "command": "/usr/bin/python3",
            "args": ["/opt/mcp/peek/peek.py"],
            "mounts": {"/opt/mcp/peek": "servers", "/opt/mcp/suite": "keyless"},
            "tools": ["peek"],
        }
        return {
            **base,
            "mcp_servers": {"peek": server},
            "arms": {case: {"sessions": [session], "mcp_servers": ["peek"]}},
        }
    arm = {"sessions": [session], "disallowed_tools": ["Skill"], "plugins": [f"plugins/{case}-kit"]}
    return {**base, "arms": {case: arm}}


REFUSALS = {
    "lsp": "config: arms.lsp.plugins[0]: plugins/lsp-kit/.lsp.json declares a plugin process",
    "escape": (
        "config: arms.escape.plugins[0]: plugins/escape-kit/.claude-plugin/plugin.json: `name` must be kebab-case"
    ),
    "mount": "config: mcp_servers.peek.mounts./opt/mcp/suite: 'keyless' is the task suite folder",
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """`snakemake -n` of each hostile extension, in a project of its own, the three at once."""
    from conftest import SNAKEMAKE

    started = {}
    for case in REFUSALS:
        project = extension_project(tmp_path_factory.mktemp(f"refuse-{case}"))
        command = [SNAKEMAKE, "--cores", "2", "-n", "--configfile", str(project.write_config(extension_config(case)))]
        process = subprocess.Popen(
            command, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        started[case] = (project, process)
    done = {}
    for case, (project, process) in started.items():
        output, _ = process.communicate(timeout=RUN_S)
        done[case] = {"project": project, "returncode": process.returncode, "output": output}
    return done


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_hostile_extensions_are_refused_before_any_job(refusals, case):
    """An LSP server in a plugin, a manifest name that is a path (it would mount the plugin over ~/.claude), an MCP
    mount of the task suite: each is refused at parse time, naming the config key and the file."""
    refused = refusals[case]
    assert refused["returncode"] != 0
    assert REFUSALS[case] in refused["output"], refused["output"][-3000:]
    assert "rule run_cell" not in refused["output"] and "check_task" not in refused["output"]
    assert not (refused["project"].root / "results").exists()
