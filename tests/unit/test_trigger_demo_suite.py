"""The trigger demo (tasks/trigger-demo, config/trigger-demo.yaml): its labelled prompts load as trigger tasks and
cover every skill the trigger arm is measured on, its config and model script validate, and the scripted sessions
invoke a skill according to the prompt and to the skill descriptions they are shown."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from skillbench.execution.scripted_model import ScriptedModel, load_model_script, session_steps
from skillbench.experiment import configcheck, skillformat
from skillbench.experiment.suite import is_trigger_task, load_suite, trigger_label

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "trigger-demo.yaml"
# Variation keys drawn per prompt to measure a rate: the cells' own form (task/arm/run<i>/role).
RUNS = 100


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return configcheck.load_config(REPO / "config" / "config.yaml", CONFIG)


@pytest.fixture(scope="module")
def tasks(config: dict[str, Any]) -> list[dict[str, Any]]:
    return load_suite(REPO / config["tasks"]["suite"])


@pytest.fixture(scope="module")
def measured(config: dict[str, Any]) -> list[str]:
    """The skills the demo's trigger arms are measured on."""
    (skills,) = {tuple(config["arms"][name]["skills"]) for name in config["selected_arms"]}
    return list(skills)


def descriptions(config: dict[str, Any]) -> dict[str, str]:
    """Every skill under the config's skill root → its incumbent description."""
    found = {}
    for path in sorted((REPO / config["skills"]["root"]).glob("*/SKILL.md")):
        match = re.search(r"^description: (.*)$", path.read_text(), re.M)
        assert match, path
        found[path.parent.name] = match.group(1)
    return found


@functools.cache
def demo_script(path: Path) -> dict[str, Any]:
    return load_model_script(path)


def script_path(config: dict[str, Any]) -> Path:
    """The model script the demo plays: model.script, else the one beside the suite."""
    return REPO / (config["model"]["script"] or Path(config["tasks"]["suite"]).parent / "model-script.yaml")


def session_skills(config: dict[str, Any], task: dict[str, Any], shown: dict[str, str], key: str) -> list[str]:
    """The skills one scripted session invokes: its requests as Claude Code sends them (the skills listing in the
    first user message, then each tool result), until the model answers without a tool call."""
    script = demo_script(script_path(config))
    model = ScriptedModel(
        session_steps(script, task["id"], "trigger"),
        defaults=script["defaults"],
        variables={"workspace": "/workspace"},
        variation_key=key,
    )
    listing = "".join(f"- {name}: {text}\n" for name, text in shown.items())
    prompt = config["prompts"]["trigger"].replace("{task}", task["prompt"])
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": f"<system-reminder>\n{listing}</system-reminder>"}]},
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
    ]
    tools = [{"name": name, "input_schema": {"type": "object"}} for name in ("Read", "Grep", "Glob", "Skill")]
    invoked: list[str] = []
    for turn in range(4):
        body = {
            "model": config["model"]["name"],
            "max_tokens": 100,
            "system": "s",
            "messages": messages,
            "tools": tools,
        }
        kind, index = model.choose(body)
        if kind != "step" or index is None or not model.steps[index].get("tools"):
            return invoked
        calls = model.steps[index]["tools"]
        invoked += [call["input"]["skill"] for call in calls if call["name"] == "Skill"]
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}", "name": c["name"]} for c in calls]}
        )
        results = [f"Launching skill: {c['input']['skill']}" if c["name"] == "Skill" else "file text" for c in calls]
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{turn}", "content": r} for r in results],
            }
        )
    raise AssertionError(f"{task['id']}: the session never ends")


def invocation_rates(config: dict[str, Any], task: dict[str, Any], shown: dict[str, str]) -> dict[str, float]:
    """skill → the share of RUNS sessions of `task` that invoked it."""
    counts: dict[str, int] = {}
    for run in range(RUNS):
        for skill in session_skills(config, task, shown, f"{task['id']}/trigger/run{run}/trigger"):
            counts[skill] = counts.get(skill, 0) + 1
    return {skill: count / RUNS for skill, count in counts.items()}


def test_the_config_runs_the_suite_with_a_trigger_arm_over_evolvable_skills(
    config: dict[str, Any], measured: list[str]
) -> None:
    assert config["tasks"]["suite"] == "tasks/trigger-demo/tasks.yaml"
    for name in config["selected_arms"]:
        for session in config["arms"][name]["sessions"]:
            assert session["prompt"] in config["prompts"] and "Skill" in session["tools"]
            assert not {"Edit", "Write", "Bash"} & set(session["tools"])
    assert set(measured) <= set(config["skills"]["evolvable"])
    skillformat.check_skill_root(REPO / config["skills"]["root"])
    assert set(measured) <= set(descriptions(config))


def test_every_prompt_is_a_trigger_task_whose_label_is_a_measured_skill_or_none(
    tasks: list[dict[str, Any]], measured: list[str]
) -> None:
    assert len(tasks) >= 12
    for task in tasks:
        assert is_trigger_task(task), task["id"]
        assert trigger_label(task)["expect"] in [*measured, None], task["id"]


def test_the_model_script_covers_every_prompt_and_the_proposer(
    config: dict[str, Any], tasks: list[dict[str, Any]]
) -> None:
    ids = [task["id"] for task in tasks]
    arms = config["selected_arms"] + [f"candidate_{arm}" for arm in config["evolution"]["arms"]]
    roles = {arm: [s["role"] for s in config["arms"][arm.removeprefix("candidate_")]["sessions"]] for arm in arms}
    checked = configcheck.check_model_script(
        script_path(config),
        suite_tasks=ids,
        selected_tasks=ids,
        arm_roles=roles,
        selected_arms=arms,
        needs_proposer=True,
    )
    assert checked["proposer"]


def test_every_skill_has_prompts_for_it_prompts_for_none_and_a_near_miss_that_can_trigger_it(
    config: dict[str, Any], tasks: list[dict[str, Any]], measured: list[str]
) -> None:
    shown = descriptions(config)
    plain_none = [task for task in tasks if trigger_label(task) == {"expect": None, "near_miss": False}]
    assert len(plain_none) >= 2
    near = [task for task in tasks if trigger_label(task)["near_miss"]]
    for skill in measured:
        assert len([task for task in tasks if trigger_label(task)["expect"] == skill]) >= 3, skill
        # A near miss for the skill: now and then its sessions invoke it, though they never should.
        assert any(0 < invocation_rates(config, task, shown).get(skill, 0) < 0.5 for task in near), skill
    for task in plain_none:
        assert invocation_rates(config, task, shown) == {}, task["id"]


def test_the_incumbent_descriptions_trigger_their_skills_most_of_the_time_but_not_always(
    config: dict[str, Any], tasks: list[dict[str, Any]], measured: list[str]
) -> None:
    shown = descriptions(config)
    for skill in measured:
        rates = [invocation_rates(config, task, shown) for task in tasks if trigger_label(task)["expect"] == skill]
        recall = sum(rate.get(skill, 0) for rate in rates) / len(rates)
        assert 0.8 < recall < 1.0, (skill, recall)
        # Only the labelled skill: a prompt for one skill never invokes the other.
        assert all(set(rate) <= {skill} for rate in rates), skill


def test_a_description_that_no_longer_says_what_the_skill_is_for_loses_its_recall(
    config: dict[str, Any], tasks: list[dict[str, Any]], measured: list[str]
) -> None:
    incumbent = descriptions(config)
    for skill in measured:
        shown = {**incumbent, skill: "Helps with tasks."}
        labelled = [task for task in tasks if trigger_label(task)["expect"] == skill]
        before = sum(invocation_rates(config, task, incumbent).get(skill, 0) for task in labelled)
        after = sum(invocation_rates(config, task, shown).get(skill, 0) for task in labelled)
        assert after < before / 2, (skill, before, after)
        # The other skill's prompts trigger as often as with the incumbent descriptions.
        for other in [task for task in tasks if trigger_label(task)["expect"] not in (skill, None)]:
            assert invocation_rates(config, other, shown) == invocation_rates(config, other, incumbent), other["id"]


def proposed(config: dict[str, Any], tmp_path: Path) -> dict[str, dict[str, str]]:
    """The descriptions each generation's scripted proposer writes, by running its overlay commands in a clone of the
    skills: "first" (no earlier verdict) and "after_rejection" (the gate summary says keep_incumbent), each the
    full description set a candidate's sessions are shown."""
    script = demo_script(script_path(config))
    found = {}
    for step in script["proposer"]:
        commands = [tool["input"]["command"] for tool in step.get("tools", []) if tool["name"] == "Bash"]
        if not commands:
            continue
        generation = "after_rejection" if "keep_incumbent" in str(step.get("when", "")) else "first"
        clone = tmp_path / generation
        shutil.copytree(REPO / config["skills"]["root"], clone / config["skills"]["root"])
        workspace = clone / "workspace"
        for command in commands:
            subprocess.run(["bash", "-c", command.replace("{{workspace}}", str(workspace))], cwd=clone, check=True)
        overlay = workspace / ".skillbench-output" / "overlay"
        skillformat.check_overlay(overlay)
        found[generation] = {**descriptions(config), **descriptions({"skills": {"root": overlay / ".claude/skills"}})}
    return found


def first_request_tokens(config: dict[str, Any], task: dict[str, Any], shown: dict[str, str]) -> int:
    """The cache write of a session's first request in the nominal run (the skills listing it is shown)."""
    script = demo_script(script_path(config))
    model = ScriptedModel(
        session_steps(script, task["id"], "trigger"), defaults=script["defaults"], variables={"workspace": "/w"}
    )
    listing = "".join(f"- {name}: {text}\n" for name, text in shown.items())
    body = {
        "model": "m",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": listing + task["prompt"]}],
        "tools": [{"name": n} for n in ("Read", "Skill")],
    }
    _kind, index = model.choose(body)
    assert index is not None
    return int(model.steps[index]["usage"]["cache_creation_input_tokens"])


def recall(config: dict[str, Any], tasks: list[dict[str, Any]], shown: dict[str, str], skill: str) -> float:
    labelled = [task for task in tasks if trigger_label(task)["expect"] == skill]
    return sum(invocation_rates(config, task, shown).get(skill, 0) for task in labelled) / len(labelled)


def test_the_proposers_first_candidate_loses_recall_and_its_second_keeps_it_for_fewer_tokens(
    config: dict[str, Any], tasks: list[dict[str, Any]], measured: list[str], tmp_path: Path
) -> None:
    incumbent = descriptions(config)
    candidates = proposed(config, tmp_path)
    assert set(candidates) == {"first", "after_rejection"}
    first, second = candidates["first"], candidates["after_rejection"]
    # Generation 0: shorter, and some skill is then invoked on far fewer of its prompts.
    assert sum(map(len, first.values())) < sum(map(len, incumbent.values()))
    assert any(recall(config, tasks, first, skill) < recall(config, tasks, incumbent, skill) / 2 for skill in measured)
    # Generation 1: shorter still, every skill triggers as with the incumbent, nothing else is invoked more often.
    assert sum(map(len, second.values())) < sum(map(len, first.values()))
    for task in tasks:
        assert invocation_rates(config, task, second) == invocation_rates(config, task, incumbent), task["id"]
        # The shorter listing is fewer input tokens in every session.
        assert first_request_tokens(config, task, second) < first_request_tokens(config, task, incumbent), task["id"]
