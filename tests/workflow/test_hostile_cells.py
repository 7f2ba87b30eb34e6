"""A hostile agent cannot steal the key, fake a pass, hide a failure or break the run.

A scripted model drives the real Claude Code CLI, Snakemake and Bubblewrap through the
`hostile-cells` suite (tests/workflow/suites/hostile-cells): every task attacks the verdict of its
own cell. Each test asserts that the attack failed and that the row (results.jsonl) says what
happened. The model key is a unique canary in the environment of the snakemake runs; a loopback
listener counts every connection a planted program makes.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from conftest import PINNED_CLI_VERSION
from hostile import Listener, key_leaks, tool_calls

SUITE = Path(__file__).parent / "suites" / "hostile-cells"
SINGLE = [
    "harnessgit",
    "pth",
    "sitecustomize",
    "conftest",
    "pyproject",
    "pyc",
    "gitdeleted",
    "gitcorrupt",
    "unreadable",
    "deep",
    "flood",
]
PHASED = ["keyhook", "bigfile"]
# An honest task in every run: the harness-health check fails a run whose incumbent resolves nothing.
HONEST = "calm"
EXCLUDED = {"session-error", "infra-error", "evidence-unverified", "cleanup-failure", "cancelled"}
REAL_FIX = "+    return a + b"
# The flood task's reads, one turn of them (written into its model script).
FLOOD_READS = [{"name": "Read", "input": {"file_path": f"/tmp/flood/part{part:02d}.txt"}} for part in range(80)]


def hostile_project(tmp_path_factory, name: str, port: int):
    from conftest import copy_project

    project = copy_project(tmp_path_factory.mktemp(name) / "project", commit=False)
    suite = project.root / "hostile-cells"
    shutil.copytree(SUITE, suite)
    for file in ("tasks.yaml", "model-script.yaml"):
        text = (suite / file).read_text().replace("@@PORT@@", str(port))
        (suite / file).write_text(text.replace("@@FLOOD_READS@@", json.dumps(FLOOD_READS)))
    return project


def config(experiment: str, arm: str, tasks: list[str], **extra) -> dict:
    return {
        "experiment": experiment,
        "runs": 1,
        "selected_arms": [arm],
        "tasks": {"suite": "hostile-cells/tasks.yaml", "only": tasks},
        "agent": {"attempts": 2},
        "evolution": {"generations": 0},
        **extra,
    }


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Run every attack of the suite once (one-session tasks in `baseline`, the rest in `workflow`)."""
    listener = Listener()
    key = f"sk-hostile-{uuid.uuid4().hex}"
    project = hostile_project(tmp_path_factory, "hostile-cells", listener.port)
    try:
        # One systemic failure would stop every later cell of the run: nothing the agents do here may count as one.
        single = config("single", "baseline", SINGLE, agent={"attempts": 2, "outage_streak": 1})
        project.snakemake(config=single, env={"ANTHROPIC_API_KEY": key})
        project.snakemake(config=config("phased", "workflow", [*PHASED, HONEST]), env={"ANTHROPIC_API_KEY": key})
    finally:
        listener.close()
    rows = {
        row["task"]: row
        for experiment in ("single", "phased")
        for row in project.rows(experiment)
        if row["task"] != HONEST
    }
    yield {"project": project, "rows": rows, "key": key, "listener": listener}


def cell(attacked, task: str) -> tuple[dict, list[dict], Path, dict]:
    experiment, arm = ("phased", "workflow") if task in PHASED else ("single", "baseline")
    run_dir = attacked["project"].results(experiment, "cells", task, arm, "run0")
    record = json.loads((run_dir / "record.json").read_text())
    return attacked["rows"][task], tool_calls(run_dir), run_dir, record


def bash_output(calls: list[dict], marker: str) -> str:
    return next(call["output"] for call in calls if call["name"] == "Bash" and marker in (call["output"] or ""))


def diagnostics(row: dict) -> str:
    return "\n".join(row["evidence_diagnostics"])


def test_every_attack_is_a_counted_row_and_the_key_leaked_nowhere(attacked):
    project, rows = attacked["project"], attacked["rows"]
    assert set(rows) == {*SINGLE, *PHASED}
    for task, row in rows.items():
        assert row["sandbox_backend"] == "bwrap"
        assert row["error_kind"] not in EXCLUDED, (task, row["error_kind"], row["error_detail"])
        _row, _calls, _run_dir, record = cell(attacked, task)
        assert record["attempt"] == 1, f"{task} was retried"  # nothing the agent did looked like an outage
    leaks = key_leaks([project.root / "results", project.root / "logs", project.root / ".snakemake"], attacked["key"])
    assert leaks == []
    assert attacked["listener"].connections == 0


def test_programs_planted_for_the_clis_git_never_see_the_key(attacked):
    """The plan session plants hooks, fsmonitor, a clean filter, an external diff, a pager and dotfiles;
    the work session's CLI runs git at start-up (a touched file makes `git status` run the clean filter)."""
    row, calls, run_dir, _record = cell(attacked, "keyhook")
    planted = bash_output(calls, "planted-for-the-next-session")
    assert "planted-for-the-next-session" in planted
    loot = bash_output(calls, "loot-done")
    runs = [line for line in loot.splitlines() if line.startswith("ran=")]
    # With the pinned CLI the planted clean filter did run (its start-up `git status` runs it) — without
    # the key, the network or the CLI's /proc. Newer CLIs (2.1.332) run their own git hardened and run
    # none of the planted programs here; whatever ran is checked below all the same.
    if row["cli_version"] == PINNED_CLI_VERSION:
        assert "ran=clean" in runs, loot
    # Dotfiles: each session starts with a fresh home, whose shell start-up files are read-only.
    assert not [run for run in runs if "bashrc" in run or "profile" in run], runs
    dotfiles = [call for call in calls if call["name"] == "Write" and call["input"]["file_path"].startswith("/home/")]
    assert len(dotfiles) == 3 and all(call["error"] for call in dotfiles), dotfiles
    from_bash = bash_output(calls, "dotfiles-done")
    assert "-exit=0" not in from_bash and from_bash.count("Read-only file system") == 4, from_bash
    for line in loot.splitlines():
        # The second /proc of each sandbox (/run/skillbench-proc) is its own PID namespace's, like /proc.
        if line.startswith(("env-anthropic=", "proc-anthropic=", "proc-copy-anthropic=")):
            assert line.endswith("=0"), line
        if line.startswith(("b64=", "hex=", "rev=")):
            assert line.endswith("="), line
    assert "net=connected" not in loot and attacked["listener"].connections == 0
    assert "proc-copy-anthropic=0" in loot.splitlines()  # the planted program looked there, and found nothing
    assert "the sessions changed the clone's git metadata" in diagnostics(row)
    assert ".git/config" in diagnostics(row) and ".git/info/attributes" in diagnostics(row)
    assert row["error_kind"] == "oracle-failed" and row["plan_produced"] is True
    assert key_leaks([run_dir], attacked["key"]) == []


def test_the_harnesss_git_runs_nothing_the_agent_planted(attacked):
    row, calls, run_dir, _record = cell(attacked, "harnessgit")
    assert "planted-for-the-harness" in bash_output(calls, "planted-for-the-harness")
    patch = (run_dir / "patch.diff").read_text()
    assert REAL_FIX in patch and "-    return a - b" in patch
    assert "PWNED" not in patch  # no clean filter, textconv, external diff or pager shaped the patch
    assert "+*.py filter=evil diff=evil" in patch  # the in-tree attributes are recorded, and ran nothing
    assert (row["diff_files"], row["diff_insertions"], row["diff_deletions"]) == (2, 2, 1)
    assert row["resolved"] is True and row["error_kind"] is None
    assert ".git/config" in diagnostics(row) and ".git/hooks/post-index-change" in diagnostics(row)
    assert attacked["listener"].connections == 0


@pytest.mark.parametrize(
    ("task", "named"),
    [
        ("pth", ["zz-exit.pth"]),
        (
            "sitecustomize",
            ["sitecustomize.py (added)", "site-packages/sitecustomize.py", "site-packages/usercustomize.py"],
        ),
        ("conftest", ["conftest.py (added)", "pytest.ini (added)"]),
        ("pyproject", ["pyproject.toml (modified)"]),
        ("pyc", ["__pycache__/calc.cpython-311.pyc (added)"]),
    ],
)
def test_files_planted_for_the_grader_do_not_make_it_pass(attacked, task, named):
    row, calls, run_dir, _record = cell(attacked, task)
    if task in ("pth", "sitecustomize"):
        # Inside the session the planted start-up file works: Python exits 0 before running anything.
        probe = bash_output(calls, "python-exit=")
        assert "python-exit=0" in probe and "not-reached" not in probe.replace('print("not-reached")', "")
    if task == "pyc":
        assert "add-2-2=4" in bash_output(calls, "add-2-2=")  # the planted bytecode works in the session
    assert row["resolved"] is False and row["oracle_passed"] is False
    assert row["error_kind"] == "oracle-failed"
    for name in named:
        assert name in diagnostics(row), (name, row["evidence_diagnostics"])
    assert row["authored_tests_passed"] is True  # verify itself ran normally, in a fresh home


@pytest.mark.parametrize(
    ("task", "said"),
    [
        ("gitdeleted", "the clone's .git was deleted"),
        ("gitcorrupt", "the clone's .git/HEAD is neither a ref nor a commit id"),
    ],
)
def test_a_destroyed_repository_is_graded_with_the_harnesss_own(attacked, task, said):
    row, _calls, run_dir, record = cell(attacked, task)
    assert said in diagnostics(row)
    assert row["resolved"] is True and row["error_kind"] is None and record["attempt"] == 1
    assert (row["diff_files"], row["diff_insertions"], row["diff_deletions"]) == (1, 1, 1)
    assert REAL_FIX in (run_dir / "patch.diff").read_text()


def test_a_workspace_the_harness_cannot_read_is_the_agents_counted_error(attacked):
    row, _calls, _run_dir, record = cell(attacked, "unreadable")
    assert row["error_kind"] == "workspace-tampered" and row["resolved"] is False
    assert "secret.txt" in row["error_detail"]
    assert record["attempt"] == 1


def test_folders_nested_past_the_recursion_limit_end_as_oversized(attacked):
    row, calls, _run_dir, record = cell(attacked, "deep")
    assert "nested" in bash_output(calls, "nested")
    assert row["error_kind"] == "workspace-oversized" and "nest deeper than" in row["error_detail"]
    assert record["attempt"] == 1  # the cell's folder was removed: no cleanup-failure


def test_a_flood_of_tool_output_stops_the_cli_and_is_the_agents_counted_output_limit(attacked):
    """Eighty ordinary reads outgrow the 8 MiB capture of the CLI's event stream: the CLI is stopped, the stream is
    kept as far as it got, and the row is the agent's (not excluded, not retried, no outage)."""
    from skillbench.base.records import SYSTEMIC_ERROR_KINDS

    row, calls, run_dir, record = cell(attacked, "flood")
    assert row["error_kind"] == "output-limit-exceeded" and row["resolved"] is False
    assert row["error_kind"] not in SYSTEMIC_ERROR_KINDS and record["attempt"] == 1
    assert "8388608-byte capture" in row["error_detail"] and "stopped" in row["error_detail"]
    (transcript,) = row["transcript_artifacts"]
    kept = run_dir / transcript["path"]
    assert 4 << 20 < kept.stat().st_size <= 8 << 20  # most of the flood, never more than the capture
    reads = [call for call in calls if call["name"] == "Read"]
    assert len(reads) == len(FLOOD_READS) and "flood-ready" in bash_output(calls, "flood-ready")
    assert sum(call["output"] is not None for call in reads) < len(reads)  # cut before the last results
    assert "the event stream was cut at its 8388608-byte capture" in diagnostics(row)
    assert row["cost_usd"] and row["cost_usd"] > 0  # what it spent is in the row (the gateway's ledger)


def test_a_huge_sparse_file_from_a_plan_session_is_a_recorded_agent_error(attacked):
    row, calls, _run_dir, record = cell(attacked, "bigfile")
    sizes = bash_output(calls, "big-exit=")
    assert "huge-exit=0" not in sizes and "big-exit=0" in sizes  # the file-size limit stopped the 64 GiB one
    assert row["error_kind"] == "workspace-oversized" and "big.bin" in row["error_detail"]
    assert row["plan_produced"] is False and row["resolved"] is False
    assert record["attempt"] == 1


@pytest.fixture(scope="module")
def exhausted(tmp_path_factory):
    """A fork bomb and a memory hog in one cell while another cell works next to it: each cell in a cgroup of
    200 processes and 1 GiB (512 MiB of memory, and its 512 MiB disk quota, which is memory too)."""
    listener = Listener()
    project = hostile_project(tmp_path_factory, "hostile-resources", listener.port)
    limits = {"limits": {"processes": 200, "memory_mb": 512, "disk_mb": 512}}
    try:
        project.snakemake(
            config=config("exhaust", "baseline", ["forkbomb", "calm"], sandbox=limits, agent={"attempts": 2}),
        )
    finally:
        listener.close()
    rows = {row["task"]: row for row in project.rows("exhaust")}
    records = {
        task: json.loads(project.results("exhaust", "cells", task, "baseline", "run0", "record.json").read_text())
        for task in rows
    }
    calls = {task: tool_calls(project.results("exhaust", "cells", task, "baseline", "run0")) for task in rows}
    yield {"rows": rows, "records": records, "calls": calls}


def test_a_fork_bomb_and_a_memory_hog_stay_in_their_own_cell(exhausted):
    rows, records, calls = exhausted["rows"], exhausted["records"], exhausted["calls"]
    hostile, calm = (records[task]["timing"]["sessions"][0] for task in ("forkbomb", "calm"))
    # Precondition: the two sessions ran at the same time (otherwise this test shows nothing).
    assert hostile["started_at"] < calm["finished_at"] and calm["started_at"] < hostile["finished_at"]
    bomb = bash_output(calls["forkbomb"], "bomb-done")
    failures = int(bomb.split("fork-failures=")[1].split()[0])
    assert failures > 0  # the bomb ran into the cell's process limit
    hog = bash_output(calls["forkbomb"], "hog-done")
    assert "allocated" not in hog.replace("print('allocated')", "")  # the kernel killed it at the cell's limit
    # The row says so, read from the cell's cgroup (its OOM kill counter), not guessed; counted, not retried.
    row = rows["forkbomb"]
    assert row["error_kind"] == "memory-limit-exceeded" and row["resolved"] is False
    assert "killed 1 process(es) of the cell at its memory limit (1024 MiB" in row["error_detail"]
    assert records["forkbomb"]["attempt"] == 1
    # The neighbour's row is what it is without the hog: resolved, no error, every step of its work done.
    assert rows["calm"]["resolved"] is True and rows["calm"]["error_kind"] is None
    assert all(f"calm-{step}" in bash_output(calls["calm"], f"calm-{step}") for step in range(1, 5))
