"""Hostile edges through the real snakemake, Claude Code CLI and Bubblewrap (suite tests/workflow/suites/edges).

- A task suite kept outside `tasks/` (config `tasks.suite` allows any path): the proposer hunts for
  its hidden oracle in its clone and everywhere it can reach, and finds nothing.
- A proposer that knows the oracle and writes it into its overlay: freeze_overlay refuses the
  overlay, naming the overlay file and the oracle, before any candidate cell.
- snakemake SIGKILLed while a cell's session runs: no job, CLI, Bubblewrap or session process of the
  run is left paying, and a rerun completes with exactly one record per cell.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from conftest import GIT_ENV, SNAKEMAKE, WAIT_S, copy_project
from test_containment import tool_calls

SUITE = Path(__file__).parent / "suites" / "edges"
CANARY = "EDGE-ORACLE-CANARY-71d0c3"


def edges_project(root: Path, values: dict[str, str] | None = None):
    """A committed project copy whose task suite lives in suites/edges/, outside tasks/."""
    project = copy_project(root)
    suite = project.root / "suites" / "edges"
    shutil.copytree(SUITE, suite)
    replacements = {"@@PROJECT@@": str(project.root), **(values or {})}
    for name in ("model-script.yaml", "leak-script.yaml"):
        text = (suite / name).read_text()
        for placeholder, value in replacements.items():
            text = text.replace(placeholder, value)
        (suite / name).write_text(text)
    for args in (["add", "-A"], ["commit", "-qm", "a task suite outside tasks/"]):
        subprocess.run(["git", "-C", str(project.root), *args], check=True, capture_output=True, env=GIT_ENV)
    return project


def proposer_config(experiment: str, script: str | None = None) -> dict:
    config = {
        "experiment": experiment,
        "runs": 1,
        "selected_arms": ["workflow_direct"],
        "tasks": {"suite": "suites/edges/tasks.yaml", "only": ["greet"]},
        "gate": {"min_runs": 1},
        "agent": {"attempts": 1},
        "evolution": {"generations": 1},
    }
    if script:
        config["model"] = {"script": script}
    return config


# ─── The proposer and the hidden oracle ─────────────────────────────────────


def test_the_proposer_cannot_find_an_oracle_kept_outside_tasks(tmp_path):
    project = edges_project(tmp_path / "project")
    assert "suites/edges/oracles/secret_oracle_test.py" in project.git("ls-files")  # in HEAD, in reach of a clone
    project.snakemake("results/hunt/gen0/overlay.json", config=proposer_config("hunt"))

    calls = tool_calls(project.results("hunt", "gen0"))
    assert [call["name"] for call in calls] == ["Bash", "Read", "Read", "Glob", "Bash", "Write"]
    hunt, clone_read, host_read, glob = calls[:4]
    assert "find-done" in hunt["output"] and "grep-done" in hunt["output"] and "ls-done" in hunt["output"]
    assert hunt["output"].split("find-done")[0].strip() == ""  # no oracle, suite or script file anywhere
    assert hunt["output"].split("find-done")[1].split("grep-done")[0].strip() == ""  # the canary is nowhere
    assert "ls: cannot access '/workspace/suites'" in hunt["output"]
    assert "suites/" not in hunt["output"].split("grep-done")[1]  # nor in the clone's history
    for call in (clone_read, host_read):
        assert call["error"] and "does not exist" in call["output"], call
    assert "No files found" in glob["output"]
    everything = "\n".join(call["output"] or "" for call in calls)
    assert CANARY not in everything and "hello Ada Lovelace" not in everything

    overlay = json.loads(project.results("hunt", "gen0", "overlay.json").read_text())
    assert overlay["files"][0]["path"] == ".claude/skills/change-work/SKILL.md"
    prompt = project.results("hunt", "gen0", "proposer-prompt.md").read_text()
    assert "- Benchmark runs: none yet" in prompt and "- Earlier proposal: no earlier proposal." in prompt


def test_an_overlay_carrying_the_oracle_is_refused_before_any_candidate_cell(tmp_path):
    project = edges_project(tmp_path / "project")
    result = project.snakemake(config=proposer_config("leak", "suites/edges/leak-script.yaml"), check=False)

    assert result.returncode != 0
    log = (project.root / "logs" / "leak" / "freeze_overlay" / "gen0.log").read_text()
    assert (
        "error: overlay results/leak/gen0/overlay: .claude/skills/change-work/SKILL.md holds hidden oracle "
        "secret_oracle_test.py of task greet (4 of its"
    ) in log
    assert "An overlay must never carry a hidden oracle" in log
    assert "hello Ada Lovelace" not in log  # the refusal names the oracle, never its content
    # The proposer did write it (the attack happened) ...
    written = project.results("leak", "gen0", "overlay", ".claude", "skills", "change-work", "SKILL.md")
    assert 'assert   greet("Ada Lovelace") == "hello Ada Lovelace"' in written.read_text()
    # ... but nothing froze it, and no candidate cell ever read it.
    assert not project.results("leak", "gen0", "overlay.json").exists()
    assert not project.results("leak", "gen0", "frozen-overlay").exists()
    assert not project.results("leak", "gen0", "cells").exists()


# ─── A crashed snakemake ────────────────────────────────────────────────────


def process_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, start time, command line) of every live process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(errors="replace")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields and fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), fields[19], cmdline)
    return table


def descendants_of(root: int, table: dict[int, tuple[int, str, str]]) -> dict[int, str]:
    """pid -> start time of every descendant of `root`."""
    found: dict[int, str] = {}
    pending = [root]
    while pending:
        parent = pending.pop()
        for pid, (ppid, started, _) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = started
                pending.append(pid)
    return found


def survivors(tracked: dict[int, str], marker: str, project_root: Path) -> list[str]:
    """Processes of the killed run still alive: a tracked descendant, the session's command, or a job script."""
    left = []
    for pid, (_, started, cmdline) in process_table().items():
        if tracked.get(pid) == started or marker in cmdline or f"{project_root}/.snakemake/scripts" in cmdline:
            left.append(f"{pid}: {cmdline[:200]}")
    return left


def test_a_killed_snakemake_leaves_no_paying_session_and_a_rerun_has_one_record_per_cell(tmp_path):
    marker = f"edges-sleep-{uuid.uuid4().hex}"
    project = edges_project(tmp_path / "project", {"@@SLEEP_MARKER@@": marker})
    config = {
        "experiment": "crash",
        "runs": 2,
        "selected_arms": ["baseline"],
        "tasks": {"suite": "suites/edges/tasks.yaml", "only": ["sleepy"]},
        "agent": {"attempts": 1},
        "evolution": {"generations": 0},
    }
    command = [SNAKEMAKE, "--cores", "2", "--configfile", str(project.write_config(config))]
    snakemake = subprocess.Popen(
        command, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    tracked: dict[int, str] = {}
    try:
        deadline = time.monotonic() + WAIT_S
        while True:  # both cells' sessions are inside their long command
            table = process_table()
            sleeping = [
                pid for pid, (_, _, cmdline) in table.items() if marker in cmdline and cmdline.startswith("python3 -c")
            ]
            if len(sleeping) == 2:
                break
            assert snakemake.poll() is None, "snakemake ended before the sessions were running"
            assert time.monotonic() < deadline, "the sessions never reached their long command"
            time.sleep(0.2)
        tracked = descendants_of(snakemake.pid, table)
        assert len(tracked) >= 6  # job scripts, CLIs, sandboxes, shells, the long commands

        os.kill(snakemake.pid, signal.SIGKILL)  # snakemake alone: its jobs are not signalled
        snakemake.wait()

        # Generous next to the ~1 s the jobs need, and well inside the sessions' 120 s command: an
        # unwatched job would still be sleeping (and paying) at the deadline.
        deadline = time.monotonic() + 60
        while (left := survivors(tracked, marker, project.root)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == [], "processes of the killed run are still alive:\n" + "\n".join(left)
    finally:
        for pid in tracked:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    runs = project.results("crash", "cells", "sleepy", "baseline")
    assert not list(runs.rglob("record.json"))  # the orphaned jobs wrote no record
    for run in (0, 1):
        log = project.root / "logs" / "crash" / "run_cell" / "cells" / "sleepy" / "baseline" / f"run{run}.log"
        assert "is gone: stopping this job's sessions" in log.read_text()

    # The rerun needs no long command (nothing recorded it, so every cell runs again either way).
    script = project.root / "suites" / "edges" / "model-script.yaml"
    script.write_text(script.read_text().replace("time.sleep(120)", "time.sleep(1)"))
    project.snakemake("--unlock", config=config)
    project.snakemake(config=config)

    records = sorted(path.relative_to(runs).as_posix() for path in runs.rglob("record.json"))
    assert records == ["run0/record.json", "run1/record.json"]
    rows = project.rows("crash")
    assert sorted((row["task"], row["arm"], row["run"]) for row in rows) == [
        ("sleepy", "baseline", 0),
        ("sleepy", "baseline", 1),
    ]
    assert all(row["resolved"] and row["error_kind"] is None for row in rows), rows
