"""Config and author-input checks: one clear line per mistake, before any job."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from skillbench.base.artifacts import ArtifactError, load_schema
from skillbench.decision.gate import SEQUENTIAL_DEFAULTS
from skillbench.experiment import configcheck, skillformat

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "config" / "config.yaml"


def user_config(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_misspelt_key_is_one_line_with_the_closest_valid_key(tmp_path):
    with pytest.raises(configcheck.ConfigError) as caught:
        configcheck.load_config(DEFAULT, user_config(tmp_path, {"run": 2}), log_path=tmp_path / "errors.log")
    lines = str(caught.value).splitlines()
    assert lines[0] == f"{tmp_path / 'mine.yaml'}: unknown key `run`; did you mean `runs`?"
    assert len(lines) == 2 and "errors.log" in lines[1]
    # The schema dump is in the log, not in the message.
    assert "additionalProperties" in (tmp_path / "errors.log").read_text()
    assert "additionalProperties" not in str(caught.value)


def test_a_nested_typo_names_its_full_key(tmp_path):
    with pytest.raises(configcheck.ConfigError) as caught:
        configcheck.load_config(DEFAULT, user_config(tmp_path, {"gate": {"min_run": 2}}))
    assert "unknown key `gate.min_run`; did you mean `gate.min_runs`?" in str(caught.value)


def test_a_number_given_as_text_explains_the_config_flag():
    config = yaml.safe_load(DEFAULT.read_text())
    config["evolution"]["generations"] = "1"
    with pytest.raises(configcheck.ConfigError) as caught:
        configcheck.validate_config(config)
    assert "key `evolution.generations`: '1' is not of type 'integer'" in str(caught.value)
    assert "--configfile" in str(caught.value)


def test_a_six_line_file_over_the_default_is_a_whole_config_with_defaults(tmp_path):
    path = user_config(
        tmp_path,
        {"experiment": "mine", "runs": 5, "tasks": {"only": ["money-thousands"]}, "evolution": {"generations": 0}},
    )
    config = configcheck.load_config(DEFAULT, path)
    assert config["runs"] == 5 and config["tasks"]["suite"] == "tasks/demo/tasks.yaml"
    assert config["gate"]["min_runs"] == 3 and "baseline" in config["arms"]


def test_defaults_do_not_leak_between_configs():
    first = configcheck.validate_config({})
    first["gate"]["min_runs"] = 99
    assert configcheck.validate_config({})["gate"]["min_runs"] == 3


def test_a_design_that_can_never_promote_is_named():
    config = configcheck.validate_config({"runs": 2, "evolution": {"generations": 1}})
    warnings = configcheck.design_warnings(config, 3)
    assert len(warnings) == 1 and warnings[0].startswith("runs is 2 but gate.min_runs is 3: no candidate can ever")
    enough = configcheck.validate_config({"runs": 3, "evolution": {"generations": 1}})
    assert configcheck.design_warnings(enough, 3) == []
    # A sweep cannot promote by design.
    assert configcheck.design_warnings(configcheck.validate_config({"runs": 1}), 3) == []
    one_task = configcheck.design_warnings(configcheck.validate_config({"evolution": {"generations": 1}}), 1)
    assert len(one_task) == 1 and "single task that neither arm resolves blocks any promotion" in one_task[0]


def reasons(*lines: str) -> list[dict]:
    return [{"reasons": list(lines)}]


def test_the_advice_after_no_promotion_matches_the_reason():
    low_runs = configcheck.validate_config({"runs": 2, "evolution": {"generations": 1}})
    assert "set `runs` to at least 3" in configcheck.next_step(low_runs, 3, [])
    fine = configcheck.validate_config({"evolution": {"generations": 1}})
    thin = reasons("promotion evidence base is too thin: 1/3 paired tasks are gated (at least 50% required)")
    assert "lower `gate.min_gated_task_ratio`" in configcheck.next_step(fine, 3, thin)
    assert configcheck.next_step(fine, 3, reasons("median cost_usd improvement is 0.0% (required 5.0%)")) == (
        "Raise `evolution.generations` to continue the chain."
    )
    # A budget that stopped the looks: more generations would meet the same cap.
    budget = reasons(
        "cut short: cut short at look 1 after 2 runs per (task, arm): the next batch would pass "
        "budget.max_sessions 10 (spent 8 sessions; the next batch needs 4 more)"
    )
    advice = configcheck.next_step(fine, 3, budget)
    assert advice.startswith("The budget (`budget.max_sessions`) stopped the sequential design")
    assert "generations" not in advice


def gate_decision(tasks: int, runs: int, saving: float) -> dict:
    """The real gate's decision on `tasks` tasks of `runs` runs per arm, every run resolved, the candidate `saving`
    cheaper on every task with some run-to-run noise."""
    from rowfactory import make_row
    from skillbench.decision.aggregate import aggregate_by_task
    from skillbench.decision.gate import evaluate_candidate
    from skillbench.decision.policy import resolve_policy

    noise = [1.0, 1.1, 0.92, 1.04, 0.96, 1.02]
    rows = []
    for task in range(tasks):
        for run in range(runs):
            rows.append(make_row(f"t{task}", "workflow", run, cost_usd=(1 + task) * noise[run % 6]))
            # The saving differs a little from task to task, as real ones do (the cost test's spread).
            task_saving = saving * (1 + 0.1 * (task % 3 - 1))
            candidate_cost = (1 + task) * (1 - task_saving) * noise[(run + 1) % 6]
            rows.append(make_row(f"t{task}", "candidate_workflow", run, cost_usd=candidate_cost))
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm="workflow",
        candidate_arm="candidate_workflow",
        model="claude-test-model",
        policy=resolve_policy(None),
        rows=rows,
        generation=0,
    )


def test_a_keep_incumbent_for_want_of_quality_runs_names_runs_or_margin_not_generations():
    """18 runs against 18 cannot show the resolution within the default 10-point margin, though every run resolved
    and the candidate is clearly cheaper: the advice is more runs or a wider margin, never more generations (a new
    candidate would fail the same test)."""
    decision = gate_decision(tasks=3, runs=6, saving=0.3)
    assert decision["decision"] != "promote"
    assert decision["tests"]["cost"]["conclusion"] == "cheaper"
    assert decision["tests"]["quality"]["conclusion"] == "inconclusive"
    config = configcheck.validate_config({"runs": 6, "evolution": {"generations": 1}})
    advice = configcheck.next_step(config, 3, [decision])
    assert advice.startswith(
        "The resolution test decided: candidate 18/18, incumbent 18/18 cannot show the resolution within the "
        "10-point margin (gate.quality_margin_pct; the interval reaches"
    ), advice
    needed = int(re.search(r"about (\d+) runs per arm would show it \((\d+) per task", advice).group(1))
    assert needed > 18 and f"`runs: {-(-needed // 3)}`" in advice
    assert "set `gate.quality_margin_pct` to" in advice and "Raise `evolution.generations`" not in advice
    # The advised design does show it: the same candidate over that many runs is promoted.
    bigger = gate_decision(tasks=3, runs=-(-needed // 3), saving=0.3)
    assert bigger["tests"]["quality"]["conclusion"] in ("not_worse", "better"), bigger["reasons"]


def test_a_cost_test_without_degrees_of_freedom_asks_for_tasks():
    decision = gate_decision(tasks=1, runs=20, saving=0.3)
    assert decision["decision"] != "promote"
    config = configcheck.validate_config({"runs": 20, "evolution": {"generations": 1}})
    advice = configcheck.next_step(config, 1, [decision])
    assert advice.startswith("The cost test decided: over 1 gated task(s) it has 0 degree(s) of freedom"), advice
    assert "add tasks" in advice and "Raise `evolution.generations`" not in advice


def test_a_candidate_the_evidence_ruled_out_is_answered_with_more_generations():
    decision = gate_decision(tasks=4, runs=12, saving=-0.2)  # dearer on every task
    assert decision["tests"]["cost"]["conclusion"] == "not_cheaper"
    config = configcheck.validate_config({"runs": 12, "evolution": {"generations": 1}})
    assert configcheck.next_step(config, 4, [decision]) == configcheck.GENERATIONS_ADVICE


def test_an_undefined_yaml_alias_is_named_as_such(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text("tasks:\n  a:\n    work: *steps\n")
    with pytest.raises(ArtifactError) as caught:
        configcheck.read_yaml(path, what="model script")
    message = str(caught.value)
    assert "undefined alias 'steps'" in message and "line 3" in message and "UTF-8" not in message
    path.write_text("x: &steps [1]\ny: *steps\n")
    assert configcheck.read_yaml(path) == {"x": [1], "y": [1]}


def skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_the_incumbent_and_demo_overlay_skills_are_valid_agent_skills():
    skillformat.check_skill_root(REPO / ".claude" / "skills")
    skillformat.check_overlay(REPO / "tasks" / "demo" / "overlays" / "verify-once")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no frontmatter\n", "must start with YAML frontmatter"),
        ("---\nname: other-name\ndescription: d\n---\nbody\n", "must match skill name"),
        ("---\nname: change-work\n---\nbody\n", "Missing required field in frontmatter: description"),
        ("---\nname: change-work\ndescription: " + "x" * 1025 + "\n---\n", "exceeds 1024 character limit"),
        ("---\nname: Change_Work\ndescription: d\n---\n", "must be lowercase"),
        ("---\nname: [unclosed\ndescription: d\n---\n", "Invalid YAML in frontmatter"),
    ],
)
def test_an_overlay_skill_that_breaks_the_format_is_refused(tmp_path, text, problem):
    overlay = tmp_path / "overlay"
    skill(overlay / ".claude" / "skills", "change-work", text)
    with pytest.raises(skillformat.SkillFormatError) as caught:
        skillformat.check_overlay(overlay)
    assert problem in str(caught.value)
    assert "change-work/SKILL.md" in str(caught.value)


def script_check(path: Path, **overrides):
    arguments = {
        "suite_tasks": ["money-thousands", "sku-normalization"],
        "selected_tasks": ["money-thousands"],
        "arm_roles": {"workflow_direct": ["direct"], "baseline": ["baseline"]},
        "selected_arms": ["workflow_direct", "baseline"],
        "needs_proposer": False,
        **overrides,
    }
    return configcheck.check_model_script(path, **arguments)


SCRIPT_HEAD = (
    "schema: model-script/v1\ndefaults: {usage: {input_tokens: 1, output_tokens: 1, "
    "cache_read_input_tokens: 0, cache_creation_input_tokens: 0}, final_text: Done.}\n"
)


def test_a_model_script_with_anchors_that_covers_every_task_and_role_passes(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT_HEAD + "tasks:\n  money-thousands:\n    direct: &steps [{text: hi}]\n    baseline: *steps\n")
    assert script_check(path)["tasks"]["money-thousands"]["baseline"] == [{"text": "hi"}]


def test_model_script_typos_and_gaps_are_named_before_any_job(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(
        SCRIPT_HEAD + "tasks:\n  money-thousand:\n    direct: [{text: hi}]\n"
        "  sku-normalization:\n    drect: [{text: hi}]\n"
    )
    with pytest.raises(ArtifactError) as caught:
        script_check(path, needs_proposer=True)
    lines = str(caught.value).splitlines()
    assert f"{path}: task `money-thousand` is not in the task suite; did you mean `money-thousands`?" in lines
    assert (
        f"{path}: task `sku-normalization`: role `drect` is not a session role of any arm; did you mean "
        "`direct`?" in lines
    )
    assert (
        f"{path}: task `money-thousands` has no steps for role `direct` (a session of arm `workflow_direct`)" in lines
    )
    assert f"{path}: no `proposer` steps, but this experiment runs a proposer session" in lines


def test_a_model_script_schema_error_names_the_field(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT_HEAD + "tasks:\n  money-thousands:\n    direct: [{txt: hi}]\n")
    with pytest.raises(ArtifactError) as caught:
        script_check(path)
    assert "key `tasks.money-thousands.direct[0]`" in str(caught.value)


def test_a_script_that_tasks_share_through_an_alias_is_named_once_at_its_first_task(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(
        SCRIPT_HEAD + "tasks:\n  money-thousands: &shared\n    direct: [{txt: hi}]\n  sku-normalization: *shared\n"
    )
    with pytest.raises(ArtifactError) as caught:
        script_check(path)
    assert "key `tasks.money-thousands.direct[0]`" in str(caught.value)
    assert "sku-normalization" not in str(caught.value)


def test_a_sequential_design_is_warned_about_by_its_most_runs():
    from skillbench.experiment.configcheck import design_warnings

    config = {
        "evolution": {"generations": 1},
        "gate": {"min_runs": 3, "min_gated_task_ratio": 0.0},
        "runs": {"min": 2, "max": 2, "step": 1},
    }
    assert any("runs is 2 but gate.min_runs is 3" in line for line in design_warnings(config, 3))
    assert design_warnings({**config, "runs": {"min": 2, "max": 10, "step": 2}}, 3) == []


def test_the_sequential_designs_defaults_are_the_ones_its_schema_describes():
    # Inside `oneOf` a schema default is never filled in, so the gate states them; the schema's words must agree.
    design = next(branch for branch in load_schema("config")["properties"]["runs"]["oneOf"] if "properties" in branch)
    for key, value in SEQUENTIAL_DEFAULTS.items():
        assert f"(default {value})" in design["properties"][key]["description"], key
