"""What the workflow tests of each agent CLI share: one snakemake run of four arms of that CLI on one demo task.

The arms are a session that proves its skill (`<prefix>_skill`), one that skips it (`_skip`), a baseline without
skills (`_baseline`) and a read-only session that tries to edit (`_readonly`). The task's project snapshot carries
the CLI's hostile config (`suites/agents-<agent>/hostile`), and the CLI's own model script plays the sessions.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Project, copy_project

SUITES = Path(__file__).parent / "suites"
TASK = "money-thousands"
# The skills the incumbent family holds: what a session that may use skills is offered, and nothing else.
INCUMBENT = sorted(path.name for path in (REPO / ".claude" / "skills").iterdir() if (path / "SKILL.md").is_file())


@dataclass(frozen=True)
class AgentArms:
    agent: str  # the adapter's name (arms.<name>.agent)
    prefix: str  # of the four arms' names
    experiment: str  # also the suite's folder under tasks/
    model: str  # the model its sessions ask for (agents.<agent>.model)
    price: dict[str, float]  # USD per million tokens of `model`, as the test's price table
    commit_ignored: bool = False  # the hostile snapshot holds files git ignores (a .env)
    # More arms of the run beyond the four (name -> definition), and text the model script's placeholders take.
    extra_arms: tuple[tuple[str, dict[str, Any]], ...] = ()
    script_fill: tuple[tuple[str, str], ...] = ()
    model_name: str | None = None  # config model.name (the model of the run's claude-code arms)

    @property
    def suite(self) -> Path:
        return SUITES / f"agents-{self.agent}"

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(f"{self.prefix}_{name}" for name in ("skill", "skip", "baseline", "readonly"))

    @property
    def all_arms(self) -> tuple[str, ...]:
        return (*self.arms, *(name for name, _definition in self.extra_arms))

    def config(self) -> dict[str, Any]:
        def arm(role: str, prompt: str, **extra: Any) -> dict[str, Any]:
            session = {"role": role, "prompt": prompt, **extra.pop("session", {})}
            return {"agent": self.agent, "sessions": [session], **extra}

        skill, skip, baseline, readonly = self.arms
        return {
            "experiment": self.experiment,
            "runs": 1,
            "tasks": {"suite": f"tasks/{self.experiment}/tasks.yaml", "only": [TASK]},
            "agent": {
                "attempts": 1,
                "heartbeat_s": 5,
                "prices": {"table": "test", "tolerance_pct": 1.0, "usd_per_mtok": {self.model: self.price}},
            },
            "agents": {self.agent: {"model": self.model}},
            "evolution": {"generations": 0},
            "arms": {
                skill: arm("skilled", "direct", session={"skill": "change-work"}),
                skip: arm("skip", "direct", session={"skill": "change-work"}),
                baseline: arm("baseline", "baseline", disallowed_tools=["Skill"]),
                readonly: arm("readonly", "baseline", session={"tools": ["Read", "Grep", "Glob"]}),
                **dict(self.extra_arms),
            },
            "selected_arms": list(self.all_arms),
            **({"model": {"name": self.model_name}} if self.model_name else {}),
            "report": {"baseline_arm": baseline},
        }

    def run(self, tmp_path_factory: pytest.TempPathFactory) -> Project:
        """The four arms' one sweep, in a project whose demo suite copy has this CLI's script and hostile snapshot."""
        project = copy_project(tmp_path_factory.mktemp(self.agent) / "project")
        target = project.root / "tasks" / self.experiment
        shutil.copytree(REPO / "tasks" / "demo", target, ignore=shutil.ignore_patterns("mcp", "plugins"))
        script = (self.suite / "model-script.yaml").read_text()
        for placeholder, text in self.script_fill:
            script = script.replace(placeholder, text)
        (target / "model-script.yaml").write_text(script)
        shutil.copytree(self.suite / "hostile", target / "project", dirs_exist_ok=True)
        project.git("add", "-A", *(["--force"] if self.commit_ignored else []))
        project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"{self.agent} suite")
        # The rows, and the cells' pages (one job renders all four).
        targets = [f"results/{self.experiment}/sweep/results.jsonl", f"results/{self.experiment}/pages/cells"]
        project.snakemake(*targets, config=self.config())
        return project

    def page(self, project: Project, arm: str) -> str:
        return project.results(self.experiment, "pages", "cells", TASK, arm, "run0.html").read_text()

    def assert_pages_show_turns_as_the_row_does(self, project: Project) -> None:
        """Each arm's cell page shows its session turn by turn, tool calls and all (from the session's trajectory
        for every CLI but Claude Code), and says the skill was invoked exactly when the row does."""
        for arm, row in self.rows(project).items():
            text = self.page(project, arm)
            if row["error_kind"] == "model-unpriced":
                # Refused before anything went upstream: the CLI's own error turn, and no skill used.
                assert "model-unpriced" in text and "no skill invoked" in text and "skills invoked:" not in text, arm
                continue
            assert "turn 1: assistant" in text and '<span class="badge">' in text, arm
            assert '"type": "item.completed"' not in text and "event item.completed" not in text, arm
            if row["skill_invoked"]:
                assert "skills invoked: change-work" in text and "skill invoked: change-work</span>" in text, arm
            else:
                assert "skills invoked:" not in text, arm

    def rows(self, project: Project) -> dict[str, dict[str, Any]]:
        return {row["arm"]: row for row in project.rows(self.experiment)}

    def cell(self, project: Project, arm: str) -> Path:
        return project.results(self.experiment, "cells", TASK, arm, "run0")

    def events(self, project: Project, arm: str) -> list[dict[str, Any]]:
        """The events of the arm's one transcript."""
        (transcript,) = sorted((self.cell(project, arm) / "transcripts").glob("*.jsonl"))
        return [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]


def pinned_version(package: str) -> str:
    return json.loads((REPO / "tools" / "package.json").read_text())["dependencies"][package]
