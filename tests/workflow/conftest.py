"""Workflow tests run the real `snakemake` command on a copy of the project in a temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

# The Ctrl-C tests send SIGINT to the snakemake runs they start, as a terminal does. A suite started in the
# background (`make test &`, nohup, a CI runner without a terminal) inherits SIGINT ignored, and an ignored
# signal stays ignored in every child: snakemake would never see those Ctrl-Cs. Its children start with the
# default disposition, as under a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[2]
COPIED = ("Snakefile", "workflow", "scripts", "schemas", "config", "profiles", "tasks", "mcp", ".claude")
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
# Bounds that only a hang reaches: `make test` runs two test workers on two cores, and the machine may be shared,
# so a run that takes a minute when quiet can take ten. RUN_S bounds a whole snakemake run, WAIT_S the wait for
# a run to reach the point a test interrupts it at, or for an outcome after a signal.
RUN_S = 1800
WAIT_S = 900
# Git in test fixtures (every workflow test imports this one): no user or system git config, a fixed identity.
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "PATH": os.environ["PATH"],
}
# Another Claude Code CLI than the pinned one for every test project (`make test-cli CLAUDE_CODE=<version>`).
TEST_CLI = os.environ.get("SKILLBENCH_TEST_CLI")
PINNED_CLI = REPO / "tools" / "node_modules" / ".bin" / "claude"
PINNED_CLI_VERSION = json.loads((REPO / "tools" / "package.json").read_text())["dependencies"][
    "@anthropic-ai/claude-code"
]


def cli_under_test() -> Path:
    """The CLI the tests run: SKILLBENCH_TEST_CLI when set, else the pinned one in tools/."""
    return Path(TEST_CLI).resolve() if TEST_CLI else PINNED_CLI.resolve()


def pytest_report_header() -> str:
    return f"Claude Code CLI under test: {cli_under_test()}"


@dataclass
class Project:
    root: Path

    def write_config(self, overrides: dict) -> Path:
        path = self.root / "test-config.yaml"
        path.write_text(yaml.safe_dump(overrides, sort_keys=False))
        return path

    def snakemake(
        self,
        *args: str,
        config: dict | None = None,
        timeout: float = RUN_S,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        command = [SNAKEMAKE, "--cores", "2", *args]
        if config is not None:
            command += ["--configfile", str(self.write_config(config))]
        result = subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
            )
        return result

    def results(self, experiment: str, *parts: str) -> Path:
        return self.root / "results" / experiment / Path(*parts)

    def rows(self, experiment: str, folder: str = "sweep") -> list[dict]:
        path = self.results(experiment, folder, "results.jsonl")
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True, text=True).stdout


def copy_project(root: Path, *, commit: bool = True) -> Project:
    """A copy of the workflow at `root`, as a user's clone would have it (committed, so skills have a HEAD)."""
    root.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            # tasks/mined-demo/ is what `make mined-demo` builds (gitignored, with a repository of its own).
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "mined-demo"))
        else:
            shutil.copy2(source, root / name)
    (root / "tools").symlink_to(REPO / "tools")
    if TEST_CLI:
        use_cli(root / "config" / "config.yaml", cli_under_test())
    if commit:
        env = GIT_ENV
        subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "fixture"], check=True, env=env)
    return Project(root)


def use_cli(config: Path, cli: Path) -> None:
    """Point the project's default config at `cli`; every test config then inherits it unless it names its own."""
    default = "\n  cli: claude\n"
    text = config.read_text()
    assert text.count(default) == 1, f"{config} no longer names its CLI as `agent.cli: claude`"
    assert cli.is_file(), f"SKILLBENCH_TEST_CLI={TEST_CLI} is not a file"
    config.write_text(text.replace(default, f"\n  cli: {json.dumps(str(cli))}\n"))


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A fresh committed copy of the workflow in a temporary folder."""
    return copy_project(tmp_path / "project")


# `make test` runs the suite on two workers, a test file each at a time (`--dist loadfile`, in collection order).
# The workflow files are the long ones, so they go first, the longest of them (measured) at the head: a long file
# that started last would leave the other worker idle at the end. The unit files then fill the gaps.
LONGEST_FIRST = (
    "test_faults.py",
    "test_hostile_cells.py",
    "test_sequential_runs.py",
    "test_slurm.py",
    "test_evolution.py",
    "test_task_supply.py",
    "test_report_html.py",
    "test_hostile_edges.py",
    "test_sweep.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the whole session's items (this hook sees every item, not only this folder's) for two workers."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        if "workflow" not in item.path.parts:
            return (1, 0)
        name = item.path.name
        return (0, LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST))

    items.sort(key=rank)
