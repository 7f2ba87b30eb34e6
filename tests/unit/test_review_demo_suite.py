"""The demo review suite (tasks/review-demo) and config/review-demo.yaml: what the demo's two decisions rest on.

The suite must pass the task check (every change applies to the project, the labels fit it, the reference reviews
score full marks, an empty review scores zero on a defect case); the config and its model script must pass every
check the workflow's parse runs and select the review arms; and the scripted reviews must depend on the skill the way
the demo says: with the incumbent's edge-case and blocking rules every blocker is found and marked, without them
none is (the plugin comparator's skill finds every defect and marks none), and the proposer's two candidates keep or
drop exactly those rules.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from skillbench.base.layout import REVIEW_OUTPUT
from skillbench.experiment import arms, configcheck, skillformat
from skillbench.experiment.overlay import find_oracle_content
from skillbench.experiment.suite import load_suite
from skillbench.grading import review
from skillbench.grading.taskcheck import review_task_problems
from skillbench.preflight import experiment_checks

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tasks" / "review-demo"
SKILL = SUITE / "skills" / "code-review" / "SKILL.md"
EDGES, BLOCKERS, CALLERS = "check the edge cases", "mark a finding blocking", "read every caller of a changed function"
TASKS = {task["id"]: task for task in load_suite(str(SUITE / "tasks.yaml"))}
SCRIPT: dict[str, Any] = yaml.safe_load((SUITE / "model-script.yaml").read_text())


def normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def changed_clone(tmp_path: Path, task: dict[str, Any]) -> Path:
    clone = tmp_path / task["id"]
    shutil.copytree(SUITE / task["snapshot"], clone)
    subprocess.run(["git", "init", "-q"], cwd=clone, check=True)
    subprocess.run(["git", "apply", str(SUITE / task["review"]["change"])], cwd=clone, check=True)
    return clone


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_review_task_passes_the_task_check(tmp_path: Path, task_id: str) -> None:
    task = TASKS[task_id]
    clone = changed_clone(tmp_path, task)
    labels = (SUITE / task["review"]["labels"]).read_bytes()
    reference = (SUITE / task["solution"]["review"]).read_bytes()
    assert review_task_problems(task, labels, reference, clone) == []
    assert review_task_problems(task, labels, None, clone) == []
    parsed = review.parse_labels(labels)
    score = review.score_review(review.parse_review_output(reference), parsed)
    assert score["weighted_f1"] == 1.0 and score["blocker_recall"] == 1.0 and score["verdict_correct"]
    empty = review.score_review(review.empty_review(), parsed)
    if task["class"] == "review-defect":
        assert empty["weighted_f1"] == 0.0 and empty["recall"] == 0.0 and not empty["verdict_correct"]
    else:
        assert empty["clean_control_passed"] is True


def test_the_suite_has_three_defect_cases_with_blocking_and_non_blocking_defects_and_a_clean_control() -> None:
    classes = [task["class"] for task in TASKS.values()]
    assert classes.count("review-defect") >= 3 and classes.count("review-clean") >= 1
    for task in TASKS.values():
        defects = review.read_labels(SUITE / task["review"]["labels"])["defects"]
        if task["class"] == "review-defect":
            assert {defect["blocking"] for defect in defects} == {True, False}, task["id"]
            assert len({defect["severity"] for defect in defects}) > 1, task["id"]


def review_config(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(REPO)
    return configcheck.merged_files(REPO / "config" / "config.yaml", REPO / "config" / "review-demo.yaml")


def test_the_config_and_its_model_script_pass_the_parse_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    config = review_config(monkeypatch)
    found = experiment_checks(config, environment_checks=False, repository=str(REPO))
    assert found.problems == [] and found.warnings == []
    assert [task["id"] for task in found.suite or []] == list(TASKS)


def test_the_config_selects_the_review_arms(monkeypatch: pytest.MonkeyPatch) -> None:
    config = configcheck.validate_config(review_config(monkeypatch))
    assert arms.selected_arms(config) == ["review", "plugin_review"]
    # Only the incumbent evolves; the plugin comparator is reported beside it.
    assert arms.evolution_arms(config) == ["review"] and arms.candidate_arms(config) == ["candidate_review"]
    assert arms.arm_skills(config, "review") == ["code-review"] == config["skills"]["evolvable"]
    assert arms.arm_skills(config, "plugin_review") == ["review-kit:quick-review"]
    for arm in ("review", "plugin_review"):
        # A review session may write only its review: no Edit, no Bash.
        tools = set(config["arms"][arm]["sessions"][0]["tools"])
        assert not {"Edit", "Bash"} & tools and "Write" in tools
    assert config["evolution"]["generations"] == 2 and config["report"]["baseline_arm"] == "review"


def written_reviews(steps: list[dict[str, Any]]) -> list[tuple[dict[str, Any], review.ReviewOutput, float]]:
    """(the step that chooses, the review one alternative writes, its weight) for every Write of a review."""
    found = []
    for step in steps:
        alternatives: list[dict[str, Any]] = step["choose"] if "choose" in step else [{"weight": 1.0, "steps": [step]}]
        for alternative in alternatives:
            for inner in alternative["steps"]:
                for tool in inner.get("tools", []):
                    if tool["name"] == "Write" and tool["input"]["file_path"].endswith(REVIEW_OUTPUT):
                        parsed = review.parse_review_output(tool["input"]["content"].encode())
                        found.append((step, parsed, float(alternative["weight"])))
    return found


def phrases(step: dict[str, Any], field: str) -> set[str]:
    value = step.get(field) or []
    return {normalised(phrase) for phrase in ([value] if isinstance(value, str) else value)}


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_the_scripted_reviews_find_the_blockers_only_with_the_skills_rules(task_id: str) -> None:
    labels = review.read_labels(SUITE / TASKS[task_id]["review"]["labels"])
    reviews = written_reviews(SCRIPT["tasks"][task_id]["review"])
    assert reviews
    for step, output, _ in reviews:
        score = review.score_review(output, labels)
        if not labels["defects"]:
            assert score["clean_control_passed"] is True
        elif {EDGES, BLOCKERS} <= phrases(step, "when"):
            assert score["blocker_recall"] == 1.0 and score["verdict_correct"] and score["weighted_f1"] > 0.9
        elif EDGES in phrases(step, "when"):
            # The comparator's skill: every defect found, none marked blocking.
            assert BLOCKERS in phrases(step, "unless")
            assert score["weighted_f1"] > 0.9 and score["blocker_recall"] == 0.0 and not score["verdict_correct"]
        else:
            assert EDGES in phrases(step, "unless")
            assert score["blocker_recall"] == 0.0 and not score["verdict_correct"]
    # Reviews vary per run: the good review sometimes leaves a finding out, so weighted F1 has noise to measure.
    if labels["defects"]:
        good = [output for step, output, _ in reviews if EDGES in phrases(step, "when")]
        assert len({review.score_review(output, labels)["weighted_f1"] for output in good}) > 1


def proposer_overlays(tmp_path: Path) -> dict[str, str]:
    """The SKILL.md each branch of the scripted proposer writes (keyed by the branch's `when`/`unless` phrase)."""
    written = {}
    for index, step in enumerate(SCRIPT["proposer"]):
        for tool in step.get("tools", []):
            if tool["name"] != "Bash":
                continue
            workspace = tmp_path / f"proposer{index}"
            command = tool["input"]["command"].replace("{{workspace}}", str(workspace))
            subprocess.run(["bash", "-c", command], cwd=REPO, check=True)
            overlay = workspace / ".skillbench-output" / "overlay" / ".claude" / "skills"
            skillformat.check_skill_root(str(overlay))
            branch = "generation 1" if "when" in step else "generation 0"
            written[branch] = (overlay / "code-review" / "SKILL.md").read_text()
    return written


def test_the_proposers_candidates_keep_or_drop_the_rules_the_reviews_depend_on(tmp_path: Path) -> None:
    incumbent = normalised(SKILL.read_text())
    assert all(phrase in incumbent for phrase in (EDGES, BLOCKERS, CALLERS))
    overlays = {branch: normalised(text) for branch, text in proposer_overlays(tmp_path).items()}
    assert set(overlays) == {"generation 0", "generation 1"}
    # Generation 0: shorter and without the rules (it misses the blockers); generation 1: only the caller reads go.
    assert len(overlays["generation 0"]) < len(incumbent)
    assert not any(phrase in overlays["generation 0"] for phrase in (EDGES, BLOCKERS, CALLERS))
    assert EDGES in overlays["generation 1"] and BLOCKERS in overlays["generation 1"]
    assert CALLERS not in overlays["generation 1"]


def test_the_plugin_comparators_skill_checks_edge_cases_but_marks_nothing_blocking() -> None:
    text = normalised((SUITE / "plugins" / "review-kit" / "skills" / "quick-review" / "SKILL.md").read_text())
    assert EDGES in text and BLOCKERS not in text and CALLERS not in text


def test_the_skill_and_the_candidates_hold_no_hidden_label_or_reference_review(tmp_path: Path) -> None:
    # The proposer's clone is refused when a skill carries a hidden file's lines, and the output contract's example
    # is the likeliest place for them to creep in.
    hidden = [
        (path.name, path.read_bytes())
        for task in TASKS.values()
        for path in (SUITE / task["review"]["labels"], SUITE / task["solution"]["review"])
    ]
    plugin = SUITE / "plugins" / "review-kit" / "skills" / "quick-review" / "SKILL.md"
    texts = [SKILL.read_text(), plugin.read_text(), *proposer_overlays(tmp_path).values()]
    assert find_oracle_content([(f"skill{i}", text.encode()) for i, text in enumerate(texts)], hidden) == []
