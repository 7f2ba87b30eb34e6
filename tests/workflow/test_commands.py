"""Every command the tool prints works, as printed, for an experiment that is not the demo.

A user's session on their own suite (tests/workflow/suites/wordcount: one bug in a tiny library, a hidden
oracle, a reference solution, an overlay) with their own config file, `--configfile my.yaml`: check it,
estimate it and run the sweep the estimate suggests, start the run and press Ctrl-C, then run every command the
closing lines print — status, resume, the HTML report, apply — parsed from the output and run exactly as printed,
each checked to have acted on that experiment. Real snakemake, real Claude Code CLI, scripted model, Bubblewrap;
the cell page of a session that wrote markup everywhere is opened in headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from conftest import GIT_ENV, RUN_S, SNAKEMAKE, WAIT_S, Project, copy_project
from skillbench.reporting.screenshot import browser

SUITE = Path(__file__).resolve().parent / "suites" / "wordcount"
EXPERIMENT = "wordcount"
MY_CONFIG = {
    "experiment": EXPERIMENT,
    "tasks": {"suite": "tasks/wordcount/tasks.yaml"},
    "runs": 2,
    "selected_arms": ["workflow_direct", "baseline"],
    # One task × two runs is too little for the noise-aware rule; the upstream rule promotes this candidate.
    "gate": {"min_runs": 2, "rule": "upstream"},
    "evolution": {"generations": 1, "initial_overlay": "tasks/wordcount/overlays/verify-once"},
}
CELLS = 1 * 2 * 2 + 1 * 2 * 1  # incumbent cells + the candidate's


@dataclass
class Session:
    """What the user ran and saw, command by command."""

    project: Project
    outputs: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)

    def run(self, name: str, command: str, timeout: float = RUN_S) -> subprocess.CompletedProcess:
        """Run a printed command as a user pastes it into a shell in the project folder."""
        result = subprocess.run(
            shlex.split(command), cwd=self.project.root, capture_output=True, text=True, timeout=timeout
        )
        self.outputs[name] = result
        return result

    def run_at_terminal(
        self, name: str, command: str, answer: str, timeout: float = RUN_S
    ) -> subprocess.CompletedProcess:
        """Run a printed command with a terminal as its stdin, typing ``answer`` when it asks."""
        controller, terminal = os.openpty()
        try:
            process = subprocess.Popen(
                shlex.split(command),
                cwd=self.project.root,
                stdin=terminal,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            os.write(controller, f"{answer}\n".encode())
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            os.close(terminal)
            os.close(controller)
        result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        self.outputs[name] = result
        return result


def printed(output: str, label: str) -> str:
    """The command of a closing line (`  <label>:   <command>   (comment)`)."""
    line = next(line for line in output.splitlines() if line.strip().startswith(f"{label}:"))
    return line.split(":", 1)[1].split("   (")[0].strip()


def start(project: Project) -> subprocess.Popen:
    return subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", "my.yaml"],
        cwd=project.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"snakemake ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    project = copy_project(tmp_path_factory.mktemp("commands") / "project")
    shutil.copytree(SUITE, project.root / "tasks" / "wordcount")
    (project.root / "my.yaml").write_text(yaml.safe_dump(MY_CONFIG, sort_keys=False))
    subprocess.run(["git", "-C", str(project.root), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(project.root), "commit", "-qm", "my experiment"], check=True, env=GIT_ENV)
    user = Session(project)
    skillbench = str(Path(SNAKEMAKE).parent / "skillbench")
    user.run("check", f"{skillbench} check --configfile my.yaml")

    # The estimate has nothing to price from yet: it prints the sweep to run first, and how to estimate again.
    estimate = user.run("estimate", f"{skillbench} estimate --configfile my.yaml")
    lines = estimate.stdout.splitlines()
    sweep = next(line.strip() for line in lines if line.strip().startswith(SNAKEMAKE))
    again = next(line for line in lines if "then estimate again:" in line).split("then estimate again:", 1)[1]
    user.run("sweep", sweep)
    user.run("estimate again", again.strip())

    # The run, and a second one while it goes; then Ctrl-C (the terminal's SIGINT to the process group).
    results = project.results(EXPERIMENT)
    first = start(project)

    def a_cell_finished_and_another_runs() -> bool:
        try:
            done = json.loads((results / "progress.json").read_text())["cells_done"]
        except (OSError, ValueError):
            return False
        running = results / ".progress" / "running"
        return done >= 1 and running.is_dir() and any(running.iterdir())

    wait_for(a_cell_finished_and_another_runs, first, "cell finishing while another runs")
    user.outputs["second run"] = subprocess.run(
        [SNAKEMAKE, "--cores", "2", "--configfile", "my.yaml"], cwd=project.root, capture_output=True, text=True
    )
    os.killpg(first.pid, signal.SIGINT)
    stdout, stderr = first.communicate(timeout=RUN_S)
    user.outputs["interrupted run"] = subprocess.CompletedProcess(first.args, first.returncode, stdout, stderr)

    user.run("status after the interrupt", printed(stderr, "progress"))
    resumed = user.run("resume", printed(stderr, "resume"))
    user.run("report", printed(resumed.stderr, "HTML"))
    # As printed, apply shows the diff and flags and asks before it writes: the user reads them and types y.
    user.run_at_terminal("apply", printed(resumed.stderr, "next"), answer="y")
    user.run("status after the run", f"{skillbench} status {results.relative_to(project.root)}")
    return user


def test_the_pre_spend_check_passes_the_users_experiment(session):
    check = session.outputs["check"]
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith(f"my.yaml: experiment {EXPERIMENT}: 1 task(s), arms workflow_direct, baseline")
    assert "word-count: base: oracle fails as expected" in check.stdout


def test_the_estimate_suggests_a_sweep_that_runs_and_then_prices_the_experiment(session):
    assert "no earlier measured rows" in session.outputs["estimate"].stdout
    sweep = session.outputs["sweep"]
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    # The suggested sweep ran one run of each incumbent arm of this experiment (later kept by the real run).
    assert (session.project.results(EXPERIMENT, "cells", "word-count", "baseline", "run0", "record.json")).is_file()
    assert not session.project.results("demo").exists()
    again = session.outputs["estimate again"]
    assert again.returncode == 0, again.stderr
    assert re.search(rf"expected cost \$\d+\.\d\d .* under results/{EXPERIMENT}", again.stdout), again.stdout


def test_a_second_run_is_refused_with_one_sentence_naming_the_first(session):
    second = session.outputs["second run"]
    assert second.returncode == 1
    last = second.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"skillbench: results/{EXPERIMENT} is already being run by snakemake pid \d+ on \S+, started \S+Z as "
        rf"`{re.escape(SNAKEMAKE)} --cores 2 --configfile my.yaml`; wait for it to end, or stop it .*\.",
        last,
    ), last
    assert "LockException" not in second.stderr and "Traceback" not in second.stderr


def test_a_ctrl_c_ends_with_skillbenchs_lines_and_status_says_interrupted(session):
    interrupted = session.outputs["interrupted run"]
    assert interrupted.returncode == 130
    closing = interrupted.stderr[interrupted.stderr.rindex("skillbench: run of") :].splitlines()
    assert closing[0].startswith(f"skillbench: run of results/{EXPERIMENT} interrupted")
    assert closing[-1].strip().startswith("log:") and "WorkflowError" not in interrupted.stderr
    status = session.outputs["status after the interrupt"]
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"[progress] {EXPERIMENT}: ") and "state: interrupted;" in status.stdout


def test_the_resume_command_as_printed_finishes_the_run_and_ends_with_skillbenchs_summary(session):
    resumed = session.outputs["resume"]
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    lines = resumed.stderr.rstrip().splitlines()
    start_of_summary = next(i for i, line in enumerate(lines) if line.startswith("skillbench: "))
    assert lines[start_of_summary].startswith(f"skillbench: generation 0's candidate was PROMOTED ({CELLS}/{CELLS}")
    # No Snakemake job listing of every input near the end: Reason lines stay short.
    assert all(len(line) < 400 for line in lines[-25:]), [line for line in lines[-25:] if len(line) >= 400]
    status = session.outputs["status after the run"]
    assert status.stdout.startswith(f"[progress] {EXPERIMENT}: {CELLS}/{CELLS} cells, 0 running")
    assert "state: finished;" in status.stdout


def test_the_report_command_as_printed_reports_this_experiment_with_its_cell_pages(session):
    report = session.outputs["report"]
    assert report.returncode == 0, report.stderr[-3000:]
    html = session.project.results(EXPERIMENT, "report.html").read_text()
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.DOTALL).group(1))
    pages = sorted(path for path in results if "/pages/" in path)
    assert len(pages) == CELLS and all(path.startswith(f"results/{EXPERIMENT}/pages/") for path in pages), pages
    assert not any("author-pages" in path or "/demo/" in path for path in results)


def test_the_apply_command_as_printed_writes_this_experiments_candidate(session):
    applied = session.outputs["apply"]
    assert applied.returncode == 0, applied.stderr
    assert ".claude/skills/change-work/SKILL.md" in applied.stdout
    assert "content flags: none" in applied.stdout and "Write these 1 file(s) into the working tree? [y/N]" in (
        applied.stdout
    )
    diff = session.project.git("diff", "--", ".claude/skills/change-work/SKILL.md")
    assert "+- Run the verify command once" in diff


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_a_hostile_sessions_markup_shows_as_text_in_a_browser(session):
    """The baseline session wrote script, image, iframe and closing tags in its text, a tool's input and output:
    Chromium's DOM of its cell page holds them as text, and none of them as an element."""
    page = session.project.results(EXPERIMENT, "pages", "cells", "word-count", "baseline", "run0.html")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        dom = subprocess.run(
            [browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
            + ["--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    parsed = Dom()
    parsed.feed(dom)
    assert "body" in parsed.tags and "pre" in parsed.tags
    assert not {"script", "img", "iframe", "textarea", "b"} & set(parsed.tags), set(parsed.tags)
    text = "".join(parsed.text)
    assert "</pre></textarea><script>document.title='pwned'</script>" in text
    assert "<iframe src=x></iframe>" in text and "Done <img src=x onerror=alert(1)>." in text
    assert re.search(r"<title>cells/word-count/baseline/run0</title>", dom)
    # The shared page holds the oracle's outcome only; the owner-only page, its output too.
    author = session.project.results(EXPERIMENT, "author-pages", "cells", "word-count", "baseline", "run0.html")
    assert author.stat().st_mode & 0o777 == 0o600
    assert "word_count_oracle_test.py" in author.read_text()
    assert "word_count_oracle_test.py" not in page.read_text() and "hidden oracle: " in page.read_text()
