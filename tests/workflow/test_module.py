"""skillbench used as a Snakemake module, as the workflow catalog shows it: a consumer's own folder holds a
Snakefile with `module skillbench: ...; use rule * from skillbench`, its config, task suite and skills; the
workflow is a checkout elsewhere. Real snakemake, real Claude Code CLI, scripted model, Bubblewrap.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml
from conftest import GIT_ENV, REPO, RUN_S, SNAKEMAKE
from skillbench.base import layout

TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"

CONSUMER_SNAKEFILE = """\
import sys

configfile: "config/config.yaml"


module skillbench:
    snakefile:
        "{workflow}"
    config:
        config


use rule * from skillbench

# Which copy of the library the module imported (an installed one would hide a wrong import path).
print("skillbench library:", sys.modules["skillbench"].__file__, file=sys.stderr)
"""


def make_consumer(root: Path, workflow: Path) -> Path:
    """A user's project as the README's module section sets it up: the workflow's config copied into config/, the
    demo suite copied in (the one `.test/config/config.yaml` runs), and the user's skills (here the demo's),
    committed."""
    root.mkdir()
    (root / "Snakefile").write_text(CONSUMER_SNAKEFILE.format(workflow=workflow / "Snakefile"))
    (root / "config").mkdir()
    shutil.copy2(workflow / "config" / "config.yaml", root / "config" / "config.yaml")
    shutil.copytree(workflow / "tasks" / "demo", root / "tasks" / "demo")
    shutil.copytree(workflow / ".claude" / "skills", root / ".claude" / "skills")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "consumer"], check=True, env=GIT_ENV)
    return root


def run_consumer(consumer: Path, *configfiles: Path) -> subprocess.CompletedProcess:
    command = [SNAKEMAKE, "--cores", "2", "--configfile", *map(str, configfiles)]
    return subprocess.run(command, cwd=consumer, capture_output=True, text=True, timeout=RUN_S)


def test_the_workflow_runs_as_a_module_from_the_consumers_folder(project, tmp_path):
    consumer = make_consumer(tmp_path / "consumer", project.root)
    experiment = yaml.safe_load(TEST_CONFIG.read_text())["experiment"]
    results = consumer / "results" / experiment
    # A breaker left tripped by an earlier run: only the run's preflight resets it, else no session starts.
    breaker = Path(layout.breaker(results))
    breaker.parent.mkdir(parents=True)
    breaker.write_text(json.dumps({"streak": 99, "last": ["infra-error: earlier outage"]}))

    result = run_consumer(consumer, TEST_CONFIG)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]

    assert f"skillbench library: {project.root / 'scripts' / 'skillbench' / '__init__.py'}" in output
    assert json.loads(breaker.read_text())["streak"] == 0
    assert (results / ".progress" / "plan.json").is_file()
    run_dir = results / "cells" / "money-thousands" / "baseline" / "run0"
    row = json.loads((run_dir / "record.json").read_text())["row"]
    assert row["sandbox_backend"] == "bwrap" and row["ok"] is True, row
    assert list((run_dir / "transcripts").glob("*.jsonl"))
    # The closing lines come from the run's end hook, which a module's own onsuccess would not get.
    assert "skillbench: benchmark sweep finished" in output and f"results/{experiment}/summary.md" in output
    # The report command it prints carries the config the run was started with, so it reports this experiment.
    assert f"--report results/{experiment}/report.html --configfile {TEST_CONFIG}" in output
    # Results and logs are the consumer's; the workflow's checkout stays as it was.
    assert (consumer / "logs" / experiment).is_dir()
    assert not (project.root / "results").exists() and not (project.root / "logs").exists()


def test_a_broken_bubblewrap_stops_a_module_run_before_any_job(project, tmp_path):
    consumer = make_consumer(tmp_path / "consumer", project.root)
    broken = tmp_path / "broken-bwrap.yaml"
    broken.write_text(yaml.safe_dump({"sandbox": {"bwrap": "/nonexistent/bwrap"}}))
    experiment = yaml.safe_load(TEST_CONFIG.read_text())["experiment"]

    result = run_consumer(consumer, TEST_CONFIG, broken)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Bubblewrap ('/nonexistent/bwrap') was not found" in output
    assert not (consumer / "results" / experiment / "tasks").exists()
    assert not (consumer / "results" / experiment / "cells").exists()
