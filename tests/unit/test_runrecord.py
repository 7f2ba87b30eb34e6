"""run.json: what a run was started with, read back by every command that takes its results folder."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from skillbench.base import artifacts, layout
from skillbench.experiment import configcheck, runrecord

REPO = Path(__file__).resolve().parents[2]
ARGV = [".venv/bin/snakemake", "--cores", "2", "--configfile", "my.yaml", "extra.yaml", "--config", "runs=5", "-n"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's folder: the default config and their own file over it."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_bytes((REPO / "config" / "config.yaml").read_bytes())
    (tmp_path / "my.yaml").write_text("experiment: pricing\nruns: 4\n")
    (tmp_path / "extra.yaml").write_text("gate: {rule: upstream}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def started_run(project: Path, pid: int, argv: list[str] = ARGV) -> Path:
    """run.json of experiment `pricing` as the start hook writes it, for snakemake process `pid`."""
    config = configcheck.load_config("config/config.yaml", "my.yaml", "extra.yaml")
    config["runs"] = 5  # --config runs=5
    record = runrecord.run_record(
        config=config,
        config_files=runrecord.config_file_entries(
            ["config/config.yaml"],
            [str(project / "my.yaml"), str(project / "extra.yaml")],
            runrecord.workflow_options(argv[1:]),
            project,
        ),
        overrides={"runs": 5},
        argv=argv,
        profile=runrecord.profile_of(runrecord.workflow_options(argv[1:]), None, str(project / "Snakefile"), project),
        workdir=project,
        snakefile=str(project / "Snakefile"),
        secrets=["sk-secret-value"],
        started_at="2026-01-01T11:00:00Z",
        provenance=runrecord.skillbench_provenance(),
        pid=pid,
    )
    root = project / "results" / "pricing"
    runrecord.write_run_record(root, record)
    return root


def test_the_options_that_choose_the_workflow_and_its_config_are_kept_as_typed():
    argv = ["-s", "wf/Snakefile", "--cores", "2", "--configfile", "a.yaml", "b.yaml", "--config", "x=1", "y=z"]
    argv += ["--profile=p", "-n", "--workflow-profile", "none", "--directory", "here", "target.txt", "-C", "w=2"]
    assert runrecord.workflow_options(argv) == [
        "-s",
        "wf/Snakefile",
        "--configfile",
        "a.yaml",
        "b.yaml",
        "--config",
        "x=1",
        "y=z",
        "--profile=p",
        "--workflow-profile",
        "none",
        "--directory",
        "here",
        "-C",
        "w=2",
    ]


def test_run_json_records_the_files_as_typed_resolved_and_digested_and_redacts_the_command(project):
    argv = [*ARGV[:-1], "--config", "token=sk-secret-value"]
    root = started_run(project, os.getpid(), argv)
    record = artifacts.read_artifact(Path(layout.run_record(root)), "run")
    assert [(entry["given"], entry["source"]) for entry in record["config_files"]] == [
        ("config/config.yaml", "snakefile"),
        ("my.yaml", "command line"),
        ("extra.yaml", "command line"),
    ]
    assert record["config_files"][1]["path"] == str(project / "my.yaml")
    assert record["config_files"][1]["sha256"] == hashlib.sha256(b"experiment: pricing\nruns: 4\n").hexdigest()
    assert "sk-secret-value" not in json.dumps(record)
    assert record["command"][-1] == "token=[REDACTED]"
    assert record["config"]["runs"] == 5 and record["experiment"] == "pricing"
    assert record["process"]["pid"] == os.getpid() and record["process"]["start_ticks"]


def test_printed_commands_carry_the_runs_config_options(project):
    record = runrecord.read_run_record(started_run(project, os.getpid()))
    assert runrecord.snakemake_command(record, "--report", "results/pricing/report.html") == (
        ".venv/bin/snakemake --report results/pricing/report.html --configfile my.yaml extra.yaml --config runs=5"
    )
    assert runrecord.typed_command(record) == " ".join(ARGV)


def test_a_results_folder_gives_its_runs_config_and_an_explicit_configfile_wins_with_a_warning(project):
    root = started_run(project, os.getpid())
    config, notes = runrecord.experiment_config(root, [])
    assert (config["experiment"], config["runs"], config["gate"]["rule"]) == ("pricing", 5, "upstream")
    assert notes == []
    # The user edits a file after the run started: the run's own values still hold, and they are told.
    (project / "my.yaml").write_text("experiment: pricing\nruns: 9\n")
    config, notes = runrecord.experiment_config(root, [])
    assert config["runs"] == 5
    assert notes == [
        f"note: my.yaml changed since the run started; using the config the run was started with "
        f"({layout.run_record(root)})"
    ]
    # An explicit --configfile wins, and says where it disagrees with the run's.
    config, notes = runrecord.experiment_config(root, [Path("my.yaml")])
    assert config["runs"] == 9 and config["gate"]["rule"] == "noise_aware"
    assert len(notes) == 1 and notes[0].startswith("warning: my.yaml differ from the config")
    assert "in gate, runs;" in notes[0]


def test_a_results_folder_without_run_json_falls_back_to_the_default_config_and_says_so(project):
    config, notes = runrecord.experiment_config(project / "results" / "old", [])
    assert config["experiment"] == "demo"
    assert "has no run.json" in notes[0] and "pass --configfile" in notes[0]


def test_a_second_run_is_refused_while_the_first_lives(project):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        root = started_run(project, sleeper.pid)
        message = runrecord.busy_message(root)
        assert message is not None
        assert f"snakemake pid {sleeper.pid}" in message and "started 2026-01-01T11:00:00Z" in message
        assert "`.venv/bin/snakemake --cores 2 --configfile my.yaml extra.yaml --config runs=5 -n`" in message
        assert message.count(". ") == 0 and message.endswith(".")  # one sentence
    finally:
        sleeper.kill()
        sleeper.wait()
    assert runrecord.busy_message(root) is None  # the first run is gone
    started_run(project, os.getpid())
    assert runrecord.busy_message(root) is None  # the run itself (its own parse) is not a second run


def test_the_gate_command_regrades_with_the_runs_own_policy(project, capsys):
    from skillbench.cli import main
    from test_cli import _stored_generation

    gen = _stored_generation(project)
    out = project / "promotion.json"
    config = configcheck.load_config("config/config.yaml")
    config["experiment"] = "demo"
    config["gate"]["rule"] = "upstream"
    record = runrecord.run_record(
        config=config,
        config_files=[],
        overrides={},
        argv=["snakemake"],
        profile={"profile": None, "workflow_profile": None},
        workdir=project,
        snakefile="Snakefile",
        secrets=[],
        started_at="2026-01-01T11:00:00Z",
        provenance={"version": None, "commit": None},
        pid=os.getpid(),
    )
    runrecord.write_run_record(gen.parent, record)
    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["policy"]["rule"] == "upstream"
    # --configfile wins (and says the run was graded otherwise).
    (project / "strict.yaml").write_text(yaml.safe_dump({"experiment": "demo", "gate": {"rule": "noise_aware"}}))
    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--configfile", "strict.yaml"]) == 0
    assert json.loads(out.read_text())["policy"]["rule"] == "noise_aware"
    assert "differ from the config" in capsys.readouterr().err
