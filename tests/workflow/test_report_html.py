"""Looking at a run: progress and `skillbench status` on a run killed half-way, the few lines at the end of a
run, and the `snakemake --report` HTML with its figures and the rendered reports — real snakemake and CLI.

One small evolution run (one task, two runs, two incumbent arms, a hand-written candidate) serves every test.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SNAKEMAKE, WAIT_S, Project, copy_project

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
CONFIG = {
    "experiment": "look",
    "tasks": {"only": ["money-thousands"]},
    "runs": 2,
    "selected_arms": ["workflow_direct", "baseline"],
    # One task × two runs is too little evidence for the default (noise-aware) rule to promote anything;
    # the upstream rule promotes this candidate, so the run shows the promoted path of the reports.
    "gate": {"min_runs": 2, "rule": "upstream"},
    "evolution": {"generations": 1, "initial_overlay": "tasks/demo/overlays/verify-once"},
}
CELLS = 1 * 2 * 2 + 1 * 2 * 1  # incumbent cells + the candidate's cells


@dataclass
class Looked:
    project: Project
    status_after_kill: subprocess.CompletedProcess
    progress_after_kill: dict
    rerun: subprocess.CompletedProcess
    status_after_rerun: subprocess.CompletedProcess
    report: str


def killed_half_way(project: Project, results: Path) -> None:
    """Run snakemake until a cell has finished while another is running, then kill it and all its processes."""
    command = [SNAKEMAKE, "--cores", "2", "--configfile", str(project.write_config(CONFIG))]
    process = subprocess.Popen(
        command, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    running = results / ".progress" / "running"

    def half_way() -> bool:
        # A finished cell has refreshed progress.json (and removed its own running entry) and another cell runs.
        try:
            done = json.loads((results / "progress.json").read_text())["cells_done"]
        except (OSError, ValueError):
            return False
        return done >= 1 and any(running.iterdir())

    deadline = time.monotonic() + WAIT_S
    while not half_way():
        assert process.poll() is None, "snakemake finished before the interruption point"
        assert time.monotonic() < deadline, "no cell finished while another ran"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def looked(tmp_path_factory) -> Looked:
    project = copy_project(tmp_path_factory.mktemp("look") / "project")
    results = project.results("look")
    killed_half_way(project, results)
    status_after_kill = subprocess.run(
        [SKILLBENCH, "status", "results/look"], cwd=project.root, capture_output=True, text=True
    )
    progress_after_kill = json.loads((results / "progress.json").read_text())
    project.snakemake("--unlock", config=CONFIG)
    rerun = project.snakemake(config=CONFIG)
    # Without an argument: the run with a plan under results/ (config/config.yaml names another experiment).
    status_after_rerun = subprocess.run([SKILLBENCH, "status"], cwd=project.root, capture_output=True, text=True)
    project.snakemake("--report", "report.html", config=CONFIG)
    return Looked(
        project,
        status_after_kill,
        progress_after_kill,
        rerun,
        status_after_rerun,
        (project.root / "report.html").read_text(),
    )


def test_status_of_a_run_killed_half_way(looked):
    assert looked.status_after_kill.returncode == 0, looked.status_after_kill.stderr
    line = looked.status_after_kill.stdout.splitlines()[0]
    done, planned = map(int, re.search(r"\[progress\] look: (\d+)/(\d+) cells", line).groups())
    assert planned == CELLS and 1 <= done < CELLS, line
    assert re.search(r"0 running, \d+ interrupted, \$\d+\.\d\d spent, run interrupted$", line), line
    assert "  state: interrupted;" in looked.status_after_kill.stdout
    # The killed cell is an incumbent cell or (scheduled first) one of generation 0's candidate cells.
    assert re.search(
        r"interrupted cells \(their job died\): (gen0/)?cells/money-thousands/", looked.status_after_kill.stdout
    ), looked.status_after_kill.stdout
    # The killed snakemake left its lock: status prints the unlock and resume commands with the run's config.
    assert re.search(
        r"unlock: +\S*snakemake --unlock --configfile \S+test-config.yaml", looked.status_after_kill.stdout
    )
    assert re.search(
        r"resume: +\S*snakemake --cores 2 --configfile \S+test-config.yaml", looked.status_after_kill.stdout
    )
    # progress.json, written by the last cell that finished before the kill, is a valid snapshot of that moment.
    check = subprocess.run(
        [SKILLBENCH, "validate", "progress", str(looked.project.results("look", "progress.json"))],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    assert 1 <= looked.progress_after_kill["cells_done"] <= done
    assert looked.progress_after_kill["spend_usd"] > 0


def test_a_run_prints_progress_lines_and_ends_with_a_few_lines_instead_of_every_file(looked):
    stdout, stderr = looked.rerun.stdout, looked.rerun.stderr
    lines = [line for line in stdout.splitlines() if line.startswith("[progress] look: ")]
    assert lines, stdout[-3000:]
    assert lines[-1].startswith(f"[progress] look: {CELLS}/{CELLS} cells")
    assert re.search(r"\$\d+\.\d\d spent", lines[-1])
    assert "all outputs of the run are up to date" in stderr
    assert "localrule all:" not in stderr
    closing = stderr[stderr.index("skillbench: ") :].splitlines()
    assert closing[0].startswith("skillbench: generation 0's candidate was PROMOTED")
    assert closing[1].split() == ["summary:", "results/look/summary.md"]
    assert "results/look/sweep/report.md, results/look/gen0/report.md" in closing[2]
    assert "--report results/look/report.html" in closing[3]
    assert "results/look/gen0/report.md" in closing[4] and "whole diff" in closing[4]
    assert "skillbench apply results/look" in closing[5]
    assert looked.status_after_rerun.stdout.startswith(f"[progress] look: {CELLS}/{CELLS} cells, 0 running")
    assert ", finished" in looked.status_after_rerun.stdout.splitlines()[0]


def report_results(html: str) -> dict:
    match = re.search(r"var results = (\{.*?\});\n", html, re.DOTALL)
    assert match, "no results in the HTML report"
    return json.loads(match.group(1))


def decoded(entry: dict) -> str:
    return base64.b64decode(entry["data_uri"].split("base64,", 1)[1]).decode()


def test_the_html_report_holds_the_figures_and_the_rendered_reports(looked):
    results = report_results(looked.report)
    by_path = {path.removeprefix("results/look/"): entry for path, entry in results.items()}
    figures = [
        "sweep/figures/cost-resolution.svg",
        "gen0/figures/cost-resolution.svg",
        "gen0/figures/forest-candidate_workflow_direct.svg",
        "figures/generations.svg",
        "figures/spend.svg",
        "figures/timeline.svg",
    ]
    pages = ["sweep/report.html", "gen0/report.html", "summary.html"]
    assert set(figures + pages) <= set(by_path), sorted(by_path)
    for figure in figures:
        assert by_path[figure]["mime_type"] == "image/svg+xml"
        assert by_path[figure]["caption"], figure
        assert "<svg" in decoded(by_path[figure])
    for page in pages:
        assert by_path[page]["mime_type"] == "text/html"
    # The reports are pages, not downloads: their tables are HTML, their figures inline.
    generation = decoded(by_path["gen0/report.html"])
    assert "<h2>How to read this</h2>" in generation and "<table>" in generation
    assert "<td><strong>workflow_direct savings %</strong></td>" in generation
    assert "candidate_workflow_direct vs workflow_direct" in generation  # the gate's section
    assert generation.count('<img alt="') == 2 and "data:image/svg+xml;base64," in generation
    summary = decoded(by_path["summary.html"])
    assert "generation 0" in summary.lower() and summary.count('<img alt="') == 3
    assert "skillbench apply results/look" in summary
    # The front page explains the run and names its outcome.
    assert "money-thousands" in looked.report and "promoted" in looked.report
    assert not [path for path in by_path if path.endswith(".md")]
