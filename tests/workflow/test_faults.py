"""Fault injection end to end: real snakemake, real Claude Code CLI, a misbehaving scripted model, Bubblewrap.

Each test runs one task of tests/workflow/suites/faults (a copy, beside the project) in one arm, or reads its
task's cell of one shared run of the tasks that need no setting of their own, and asserts the documented outcome
from the cell record, the rule log and snakemake's exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import SNAKEMAKE, Project, copy_project
from hostile import content_blocks
from skillbench.base.process import DRAIN_MESSAGE
from skillbench.execution import gateway

SUITE = Path(__file__).resolve().parent / "suites" / "faults"
DIRECT = "workflow_direct"


def copy_suite(project) -> Path:
    """A private copy of the fault suite next to the project (tests may rewrite its model script)."""
    target = project.root.parent / "faults"
    shutil.copytree(SUITE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def suite(project) -> Path:
    return copy_suite(project)


def merged(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def fault_config(experiment: str, suite: Path, task: str | list[str], *, arm: str = DIRECT, **overrides) -> dict:
    """One task (or a few), one run, one arm, no evolution, one attempt unless the test asks for more."""
    base = {
        "experiment": experiment,
        "tasks": {"suite": str(suite / "tasks.yaml"), "only": [task] if isinstance(task, str) else task},
        "runs": 1,
        "selected_arms": [arm],
        "evolution": {"generations": 0},
        "agent": {"attempts": 1, "heartbeat_s": 5},
    }
    return merged(base, overrides)


def sweep_targets(experiment: str) -> list[str]:
    """The sweep's rows and report. The default target adds the run summary, whose harness-health check
    (rightly) fails a run in which the only incumbent arm resolved nothing, as most fault tasks do."""
    return [f"results/{experiment}/sweep/results.jsonl", f"results/{experiment}/sweep/report.md"]


def run_dir(project, experiment: str, task: str, arm: str = DIRECT, run: int = 0) -> Path:
    return project.results(experiment, "cells", task, arm, f"run{run}")


def record(project, experiment: str, task: str, arm: str = DIRECT, run: int = 0) -> dict:
    return json.loads((run_dir(project, experiment, task, arm, run) / "record.json").read_text())


def cell_log(project, experiment: str, task: str, arm: str = DIRECT, run: int = 0) -> str:
    path = project.root / "logs" / experiment / "run_cell" / "cells" / task / arm / f"run{run}.log"
    return path.read_text()


def transcript_events(project, experiment: str, task: str, arm: str = DIRECT, run: int = 0) -> list[dict]:
    folder = run_dir(project, experiment, task, arm, run) / "transcripts"
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def tool_results(events: list[dict]) -> list[str]:
    texts = []
    for event in events:
        for block in content_blocks(event):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "\n".join(part.get("text", "") for part in inner if isinstance(part, dict))
                texts.append(str(inner))
    return texts


def wait_until(predicate, timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# The fault tasks that need no setting of their own (one arm, one attempt, the bwrap sandbox) run together, once,
# with the model key a canary; each test reads its own cell.
SHARED = "shared"
SHARED_TASKS = ["burst-500", "no-skill", "work-edits-skill", "canary", "capped"]
# A session cap no healthy session of the fault suite reaches (each costs under $0.02); task `capped` passes it.
SESSION_CAP_USD = 0.05


@dataclass
class SharedRun:
    project: Project
    secret: str
    result: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> SharedRun:
    project = copy_project(tmp_path_factory.mktemp("faults") / "project")
    suite = copy_suite(project)
    secret = f"canary{uuid.uuid4().hex}"
    config = fault_config(SHARED, suite, SHARED_TASKS, budget={"max_session_usd": SESSION_CAP_USD})
    result = project.snakemake(config=config, env={"ANTHROPIC_API_KEY": secret})
    return SharedRun(project, secret, result)


def test_500_burst_is_retried_by_the_cli_and_the_cell_survives(shared):
    project = shared.project
    row = record(project, SHARED, "burst-500")["row"]
    assert row["ok"] is True and row["resolved"] is True and row["error_kind"] is None
    assert row["skill_invoked"] is True
    retries = [
        event
        for event in transcript_events(project, SHARED, "burst-500")
        if event.get("type") == "system" and event.get("subtype") == "api_retry"
    ]
    assert [event["error_status"] for event in retries] == [500, 500]
    assert "API retry" in cell_log(project, SHARED, "burst-500")


def test_a_session_stopped_at_its_spend_cap_is_a_counted_censored_observation(shared):
    """The capped session's next request is refused at the gateway: the row is the agent's counted outcome, censored
    at the spend the cap let through, graded on what the session left (its work passes verify and the oracle), never
    excluded and never run again; the summary and the closing lines say so."""
    project = shared.project
    cell = record(project, SHARED, "capped")
    row = cell["row"]
    assert row["error_kind"] == "session-cap-reached" and row["censored"] is True
    assert "spend cap of $0.0500 is reached" in json.dumps(row["error_detail"])
    assert row["ok"] is False and row["resolved"] is True
    assert row["authored_tests_passed"] is True and row["oracle_passed"] is True
    assert row["cost_usd"] >= SESSION_CAP_USD
    assert cell["attempt"] == 1, "a capped session is counted, never retried"
    for other in ("burst-500", "canary"):
        assert record(project, SHARED, other)["row"]["censored"] is False
    report = project.results(SHARED, "sweep", "report.md").read_text()
    assert "| capped | fault | workflow_direct | 1/1 |" in report
    summary = json.loads(project.results(SHARED, "summary.json").read_text())
    assert summary["capped_cells"] == 1
    assert "**Session cap reached:** 1 cell(s)" in project.results(SHARED, "summary.md").read_text()
    output = shared.result.stdout + shared.result.stderr
    assert "capped:    1 cell(s) reached budget.max_session_usd" in output
    assert "raise it and run the same command again" not in output


def test_bad_request_is_retried_then_recorded_as_an_excluded_row(project, suite):
    config = fault_config("bad", suite, "bad-request", agent={"attempts": 2})
    result = project.snakemake(*sweep_targets("bad"), config=config)
    assert result.returncode == 0

    cell = record(project, "bad", "bad-request")
    row = cell["row"]
    assert cell["attempt"] == 2
    assert row["ok"] is False and row["resolved"] is False
    assert row["error_kind"] == "session-error"
    assert row["error_detail"]["process_state"] == "failed"
    assert "API Error: 400 scripted invalid request" in row["error_detail"]["stdout_tail"]
    # Snakemake deletes a job's log before it retries the job, so the rule log holds the last attempt;
    # the first attempt's failure line survives in snakemake's own output (show-failed-logs).
    log = cell_log(project, "bad", "bad-request")
    assert "attempt 2/2 starting" in log and "error_kind=session-error" in log
    output = result.stdout + result.stderr
    assert "session-error on attempt 1/2" in output

    assert [(r["task"], r["error_kind"]) for r in project.rows("bad")] == [("bad-request", "session-error")]
    report = project.results("bad", "sweep", "report.md").read_text()
    assert "| bad-request | fault | workflow_direct | 0/0 (1 excluded) |" in report
    assert "session-error×1" in report
    assert "1 run(s) hit session/infra/cleanup errors" in report


def test_an_agent_that_runs_its_clock_out_is_its_counted_timeout_and_its_tool_process_is_killed(project, suite):
    """The agent's own slow command runs the session clock out: the agent's counted outcome (not excluded, not
    retried, never a reason for the outage breaker), and nothing the session started outlives it."""
    config = fault_config("slow", suite, "slow", agent={"session_timeout_s": 8})
    with WatchedSweep(project, config, *sweep_targets("slow")) as sweep:
        assert sweep.wait() == 0, sweep.output
        # The cell returned, so its session is over: nothing it started may still run.
        assert "long-command" in sweep.kinds_seen(), sweep.seen
        assert sweep.left_behind() == {}

    cell = record(project, "slow", "slow")
    row = cell["row"]
    assert row["error_kind"] == "session-timeout" and row["resolved"] is False
    assert "ran its clock out in its own work (timed out after 8s)" in row["error_detail"]
    assert cell["attempt"] == 1, "a counted outcome is never retried"
    breaker = json.loads(project.results("slow", ".outage-breaker.json").read_text())
    assert breaker["streak"] == 0
    report = project.results("slow", "sweep", "report.md").read_text()
    assert "excluded" not in report.split("| slow |", 1)[1].split("\n", 1)[0]


def test_a_session_that_never_invokes_its_skill_is_skill_not_invoked(shared):
    project = shared.project
    row = record(project, SHARED, "no-skill")["row"]
    assert row["error_kind"] == "skill-not-invoked"
    assert row["skill_invoked"] is False and row["resolved"] is False and row["ok"] is False
    assert "error_kind=skill-not-invoked" in cell_log(project, SHARED, "no-skill")
    # Not excluded: the arm did the work without its skill, which is evidence against the arm.
    report = project.results(SHARED, "sweep", "report.md").read_text()
    assert "| no-skill | fault | workflow_direct | 0/1 |" in report
    assert "excluded" not in report.split("| no-skill |", 1)[1].split("\n", 1)[0]


def test_a_plan_session_that_edits_code_stops_the_arm(project, suite):
    config = fault_config("plancode", suite, "plan-edits-code", arm="workflow")
    project.snakemake(*sweep_targets("plancode"), config=config)

    row = record(project, "plancode", "plan-edits-code", "workflow")["row"]
    assert row["error_kind"] == "plan-evidence-invalid"
    assert "double.py" in row["error_detail"]
    assert row["plan_produced"] is False and row["resolved"] is False
    assert len(row["session_ids"]) == 1
    transcripts = sorted(
        p.name for p in (run_dir(project, "plancode", "plan-edits-code", "workflow") / "transcripts").glob("*.jsonl")
    )
    assert len(transcripts) == 1 and transcripts[0].startswith("plan-")
    assert "/work " not in cell_log(project, "plancode", "plan-edits-code", "workflow")


def skill_edit_outcome(project, experiment: str) -> tuple[dict, list[str]]:
    """The row of the session that appends to its skill, and what its `echo exit=$?` printed."""
    row = record(project, experiment, "work-edits-skill")["row"]
    outputs = [
        text for text in tool_results(transcript_events(project, experiment, "work-edits-skill")) if "exit=" in text
    ]
    assert len(outputs) == 1
    assert f"error_kind={row['error_kind']}" in cell_log(project, experiment, "work-edits-skill")
    return row, outputs


def test_a_work_session_that_edits_its_skill_under_bwrap(shared):
    row, outputs = skill_edit_outcome(shared.project, SHARED)
    assert "Read-only file system" in outputs[0] and "exit=1" in outputs[0]
    assert row["error_kind"] != "implementation-evidence-invalid"
    assert row["ok"] is True and row["resolved"] is True


def test_a_work_session_that_edits_its_skill_without_a_sandbox(project, suite):
    config = fault_config("skilledit-none", suite, "work-edits-skill", sandbox={"backend": "none"})
    project.snakemake(*sweep_targets("skilledit-none"), config=config)
    row, outputs = skill_edit_outcome(project, "skilledit-none")
    assert "exit=0" in outputs[0]
    assert row["error_kind"] == "implementation-evidence-invalid"
    assert row["error_detail"] == "implementation changed the evaluated skill fingerprint"
    assert row["resolved"] is False and row["sandbox_backend"] == "none"


def test_outage_breaker_stops_new_sessions_and_a_rerun_resumes(project, suite):
    config = fault_config("outage", suite, "bad-request", runs=4, agent={"outage_streak": 2, "attempts": 1})
    first = project.snakemake("--cores", "1", config=config, check=False)
    assert first.returncode != 0

    recorded, tripped = [], []
    for run in range(4):
        if (run_dir(project, "outage", "bad-request", run=run) / "record.json").exists():
            recorded.append(run)
        else:
            tripped.append(run)
    assert len(recorded) == 2 and len(tripped) == 2
    for run in recorded:
        assert record(project, "outage", "bad-request", run=run)["row"]["error_kind"] == "session-error"
    for run in tripped:
        log = cell_log(project, "outage", "bad-request", run=run)
        assert "[systemic-outage] 2 consecutive session/infra/cleanup failures" in log
        assert "starting" not in log and "session initialized" not in log
        transcripts = run_dir(project, "outage", "bad-request", run=run) / "transcripts"
        assert not transcripts.exists() or not list(transcripts.glob("*.jsonl"))
    assert "[systemic-outage]" in first.stdout + first.stderr

    script_path = suite / "model-script.yaml"
    script = yaml.safe_load(script_path.read_text())
    script["tasks"]["bad-request"] = script["tasks"]["healthy"]
    script_path.write_text(yaml.safe_dump(script, sort_keys=False))
    project.snakemake("--cores", "1", config=config)

    rows = project.rows("outage")
    assert [row["run"] for row in rows] == [0, 1, 2, 3]
    for run in tripped:
        assert rows[run]["resolved"] is True and rows[run]["error_kind"] is None


def test_the_api_key_never_reaches_results_logs_or_snakemake_metadata(shared):
    project, secret, result = shared.project, shared.secret, shared.result
    row = record(project, SHARED, "canary")["row"]
    assert row["resolved"] is True
    # The key lives in the gateway only: even a model that echoes it (the scripted one knows it) reaches the CLI
    # masked, and the agent's own environment holds neither the key nor the session's token.
    masked = (gateway.MASK.decode() * len(secret))[: len(secret)]
    events = transcript_events(project, SHARED, "canary")
    results = tool_results(events)
    assert any(masked in text for text in results)
    echoed = next(text for text in results if "key-from-env=" in text)
    assert "key-from-env=\n" in echoed + "\n" and "sbx-session-" not in echoed
    assert masked in run_dir(project, SHARED, "canary").joinpath("patch.diff").read_text()

    needle = secret.encode()
    scanned, leaks = 0, []
    for top in ("results", "logs", ".snakemake"):
        for path in (project.root / top).rglob("*"):
            if path.is_file() and not path.is_symlink():
                scanned += 1
                if needle in path.read_bytes():
                    leaks.append(str(path.relative_to(project.root)))
    assert scanned > 10 and leaks == []
    assert secret not in result.stdout + result.stderr


def descendants(root: int) -> dict[int, str]:
    """pid → command line of every live descendant of `root` (from /proc)."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
        commands[int(entry)] = command.strip()
    found, queue = {}, [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found[child] = commands.get(child, "")
            queue.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2 :].split()[0] not in ("Z", "X")


# The `slow` task's long command and the `drain` task's held one (suites/faults/model-script.yaml) as /proc
# shows their command lines. Both sleep for 900 s, far past every bound below: a session that was not stopped
# or released is still in its command when a test looks.
LONG_COMMAND = "python3 -c import time; time.sleep(900)"
HELD_COMMAND = "python3 -c import signal, sys, time;"
HELD_MARKER = "held-until-released"
# How long a test waits for an outcome that takes seconds: generous, for a loaded machine, and far inside the
# 900 s the commands sleep and the 600 s session timeout of slow_sweep.
OUTCOME_S = 240


def session_process_kind(command: str) -> str | None:
    """`claude`, `bwrap` (outer or nested), `long-command` (the scripted Python sleep), `held-command` (the
    sleep a test releases) or None for any other."""
    if command.startswith(LONG_COMMAND):
        return "long-command"
    if command.startswith(HELD_COMMAND) and command.endswith(HELD_MARKER):
        return "held-command"
    name = Path(command.split(" ", 1)[0]).name
    return name if name in ("claude", "bwrap") else None


class WatchedSweep:
    """snakemake in its own process group, with a poller that records every CLI, Bubblewrap, long-command and
    held-command process below it. Only these processes are checked and, on the way out, killed: other snakemake
    runs on the machine (another test session) are never touched."""

    def __init__(self, project, config: dict, *targets: str) -> None:
        self.command = [SNAKEMAKE, "--cores", "2", *targets, "--configfile", str(project.write_config(config))]
        self.root = project.root
        self.seen: dict[int, str] = {}
        self.held: dict[int, str] = {}
        self.kinds: set[str] = set()
        self._lines: list[str] = []
        self._stop = threading.Event()

    def __enter__(self) -> WatchedSweep:
        self.proc = subprocess.Popen(
            self.command, cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._reader.start()
        self._poller.start()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.append(line.decode(errors="replace"))

    @property
    def output(self) -> str:
        """What snakemake printed so far (all of it once `wait` returned)."""
        return "".join(self._lines)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pid, command in descendants(self.proc.pid).items():
                kind = session_process_kind(command)
                if kind:
                    self.seen.setdefault(pid, command)
                    # A pid's command changes when bwrap execs the CLI: keep every kind ever seen.
                    self.kinds.add(kind)
                if kind == "held-command":
                    self.held[pid] = command
            self._stop.wait(0.05)

    def kinds_seen(self) -> set[str]:
        return set(self.kinds)

    def wait_for(self, predicate, timeout: float = OUTCOME_S) -> bool:
        return wait_until(predicate, timeout, step=0.1)

    def in_long_command(self) -> bool:
        return any(command.startswith(LONG_COMMAND) and alive(pid) for pid, command in self.seen.items())

    def holding(self) -> list[int]:
        """The held commands running now: each one keeps its session, and so its cell, from finishing."""
        return [pid for pid in list(self.held) if alive(pid)]

    def release(self) -> None:
        """End every held command (it exits 0 on SIGTERM): their sessions go on and finish."""
        for pid in self.holding():
            os.kill(pid, signal.SIGTERM)

    def draining(self) -> bool:
        """snakemake took the first Ctrl-C: it starts no new job and waits for the running ones."""
        return DRAIN_MESSAGE in self.output

    def left_behind(self) -> dict[int, str]:
        return {pid: command[:120] for pid, command in self.seen.items() if alive(pid)}

    def wait(self, timeout: float = OUTCOME_S) -> int:
        returncode = self.proc.wait(timeout=timeout)
        self._reader.join(30)
        return returncode

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._poller.join(5)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in self.seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(30)


def slow_sweep(project, suite: Path, experiment: str) -> WatchedSweep:
    """The `slow` task with a session timeout past every bound the tests wait for, entered once its session sits
    in its long command."""
    config = fault_config(experiment, suite, "slow", agent={"session_timeout_s": 600})
    return WatchedSweep(project, config, *sweep_targets(experiment))


def enter_long_command(sweep: WatchedSweep) -> None:
    assert sweep.wait_for(sweep.in_long_command), f"no long command in the slow session:\n{sweep.output}"
    assert {"claude", "bwrap", "long-command"} <= sweep.kinds_seen(), sweep.seen


def ctrl_c_twice(sweep: WatchedSweep, *, group: bool = True) -> None:
    """Two Ctrl-Cs: the first drains (running cells go on), the second stops the running cells. The second is
    sent once snakemake has taken the first (two signals sent before it ran its handler would arrive as one)."""
    send = (
        (lambda: os.killpg(sweep.proc.pid, signal.SIGINT))
        if group
        else (lambda: os.kill(sweep.proc.pid, signal.SIGINT))
    )
    send()
    assert sweep.wait_for(sweep.draining), f"snakemake never took the first Ctrl-C:\n{sweep.output[-3000:]}"
    # Draining: the session is still there after the first Ctrl-C.
    assert sweep.in_long_command(), "the first Ctrl-C must let the running cell go on"
    send()


def sessions_gone(sweep: WatchedSweep) -> None:
    """Every session process of the run ends soon after the second Ctrl-C: the long command alone would sleep
    for 900 s, and the session's clock would stop it only after 600 s."""
    assert sweep.wait_for(lambda: not sweep.left_behind()), (
        f"{OUTCOME_S} s after a 2nd SIGINT to snakemake (pid {sweep.proc.pid}, running: {sweep.proc.poll() is None}) "
        f"its session still runs: {sweep.left_behind()}"
    )


def test_first_ctrl_c_lets_running_cells_finish_and_keeps_their_records(project, suite):
    """A finished session is not paid for twice: the first Ctrl-C starts nothing new, the running cells finish
    and write their records, and the next run does only the cells that never started. Both cells that can run
    (two cores) are held in a command until snakemake has taken the Ctrl-C, so none of them can finish, and no
    other cell start, before it."""
    experiment = "drain"
    config = fault_config(experiment, suite, "drain", runs=2, selected_arms=["workflow_direct", "baseline"])
    with WatchedSweep(project, config) as sweep:
        assert sweep.wait_for(lambda: len(sweep.holding()) == 2), sweep.output[-3000:]
        assert not list(project.results(experiment, "cells").rglob("record.json"))
        os.killpg(sweep.proc.pid, signal.SIGINT)
        assert sweep.wait_for(sweep.draining), sweep.output[-3000:]
        sweep.release()
        assert sweep.wait() != 0
    output = sweep.output
    assert "running cells finish and keep their records" in output
    # Two cells finished after the Ctrl-C, and Snakemake's scheduler says its line as each one ends: printed once.
    assert output.count("Will exit after finishing currently running jobs") == 1, output[-3000:]
    assert f"skillbench: run of results/{experiment} interrupted" in output
    records = sorted(project.results(experiment, "cells").rglob("record.json"))
    assert len(records) == 2, output[-3000:]
    for record in records:
        assert json.loads(record.read_text())["row"]["error_kind"] in (None, "verify-failed", "oracle-failed")
    logs = "".join(path.read_text() for path in (project.root / "logs" / experiment).rglob("run*.log"))
    assert "interrupted" not in logs
    # The rerun does the two cells that never started, and keeps the two that finished.
    again = project.snakemake("-n", "--configfile", str(project.root / "test-config.yaml"))
    assert again.stdout.count("rule run_cell:") == 2, again.stdout


def test_ctrl_c_leaves_no_session_process_behind(project, suite):
    """A terminal's Ctrl-C, twice: SIGINT to snakemake's foreground process group (its job scripts included)."""
    with slow_sweep(project, suite, "ctrlc") as sweep:
        enter_long_command(sweep)
        ctrl_c_twice(sweep)
        sessions_gone(sweep)
        assert sweep.wait() != 0
    assert "Terminating processes on user request" in sweep.output
    # rerun-incomplete (profiles/default): the interrupted cell runs again on the next invocation.
    again = project.snakemake("-n", *sweep_targets("ctrlc"), "--configfile", str(project.root / "test-config.yaml"))
    assert "rule run_cell:" in again.stdout


def test_sigint_to_the_snakemake_process_leaves_no_session_process_behind(project, suite):
    """`kill -INT <snakemake pid>`: only snakemake itself gets the signal, not its job scripts."""
    with slow_sweep(project, suite, "sigint") as sweep:
        enter_long_command(sweep)
        ctrl_c_twice(sweep, group=False)
        sessions_gone(sweep)


def test_an_interrupted_cell_writes_no_record_and_runs_again(project, suite):
    """The second Ctrl-C tears the session down; the cell writes no record (an interrupted cell is neither
    evidence nor a harness failure), says so in its log, and the next run does it again."""
    with slow_sweep(project, suite, "cancel") as sweep:
        enter_long_command(sweep)
        ctrl_c_twice(sweep)
        sweep.wait()
    log = cell_log(project, "cancel", "slow")
    assert "interrupted during the direct session" in log, log[-1500:]
    assert not (run_dir(project, "cancel", "slow") / "record.json").exists()
    again = project.snakemake("-n", *sweep_targets("cancel"), "--configfile", str(project.root / "test-config.yaml"))
    assert "rule run_cell:" in again.stdout
