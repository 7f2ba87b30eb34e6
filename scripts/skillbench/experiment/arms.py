"""Arms from config: their sessions, prompts, tools, expected skills, and candidate pairing.

Nothing here names a particular skill family: an arm is a list of sessions from
`config["arms"]`, and `candidate_<arm>` is the same arm run on the candidate overlay. An arm's
MCP servers and per-session tool surfaces are checked by `skillbench.execution.mcp`, its plugins by
`skillbench.execution.plugins` (both from `skillbench.preflight.check_arms`, at parse time).
"""

from __future__ import annotations

from typing import Any

from skillbench.base.errors import SkillbenchError
from skillbench.experiment.configcheck import did_you_mean
from skillbench.experiment.overlay import OverlayError

CANDIDATE_PREFIX = "candidate_"
PLAN_DIRECTORY = "docs/plans"


class ArmError(SkillbenchError, ValueError):
    """An arm definition or an arm name does not match the configuration."""


def incumbent_of(arm: str) -> str:
    return arm.removeprefix(CANDIDATE_PREFIX)


def is_candidate(arm: str) -> bool:
    return arm.startswith(CANDIDATE_PREFIX)


def candidate_of(arm: str) -> str:
    """The candidate arm paired with incumbent arm ``arm``: the same sessions on the candidate overlay."""
    return f"{CANDIDATE_PREFIX}{arm}"


def arm_definition(config: dict[str, Any], arm: str) -> dict[str, Any]:
    name = incumbent_of(arm)
    try:
        return config["arms"][name]
    except KeyError as exc:
        raise ArmError(f"arm {arm!r} is not defined under `arms` in the config ({sorted(config['arms'])})") from exc


def arm_skills(config: dict[str, Any], arm: str) -> list[str]:
    """Skills the arm is measured on: those its sessions must invoke, in session order, then the arm's own
    `skills` (a trigger arm's), without repeats."""
    definition = arm_definition(config, arm)
    named = [session["skill"] for session in definition["sessions"] if session.get("skill")]
    return list(dict.fromkeys([*named, *(definition.get("skills") or [])]))


def local_skills(skills: list[str]) -> list[str]:
    """The skills that live in the skills root (plugin skills are `<plugin>:<skill>`)."""
    return [skill for skill in skills if ":" not in skill]


def check_arms(config: dict[str, Any]) -> None:
    """Every session's prompt key exists; skill and tool-surface keys are consistent (MCP servers and plugins
    are checked by `skillbench.preflight.check_arms`, which calls this)."""
    prompts = config.get("prompts", {})
    for name, definition in config["arms"].items():
        sessions = definition["sessions"]
        for index, session in enumerate(sessions):
            where = f"config arms.{name}.sessions[{index}]"
            if session["prompt"] not in prompts:
                raise ArmError(
                    f"{where}.prompt: no prompt named {session['prompt']!r} under `prompts` (known: {sorted(prompts)})"
                )
            if session.get("plan_document") and index == len(sessions) - 1:
                raise ArmError(f"{where}.plan_document: the plan session must be followed by a session that uses it")
        if "Skill" in definition.get("disallowed_tools", []) and arm_skills(config, name):
            raise ArmError(
                f"config arms.{name}: disallows the Skill tool but expects skills {arm_skills(config, name)}"
            )
        if definition.get("disable_slash_commands") and arm_skills(config, name):
            raise ArmError(
                f"config arms.{name}.disable_slash_commands: the arm expects skills "
                f"{arm_skills(config, name)}, which the flag turns off"
            )
        for index, session in enumerate(sessions):
            surface = session.get("tools") or config["agent"]["tools"]
            if session.get("skill") and ("Skill" not in surface or "Skill" in session.get("disallowed_tools", [])):
                raise ArmError(
                    f"config arms.{name}.sessions[{index}].tools: the session must invoke "
                    f"{session['skill']!r} but its surface has no Skill tool"
                )


def selected_arms(config: dict[str, Any]) -> list[str]:
    """The incumbent arms to benchmark: `selected_arms`, or every arm under `arms` when it is empty."""
    chosen = config.get("selected_arms") or list(config["arms"])
    defined = list(config["arms"])
    unknown = list(dict.fromkeys(arm for arm in chosen if arm not in config["arms"]))
    if unknown:
        raise ArmError(
            "\n".join(
                f"config selected_arms: arm `{arm}` is not defined under `arms`{did_you_mean(arm, defined)}"
                for arm in unknown
            )
        )
    return chosen


def evolution_arms(config: dict[str, Any]) -> list[str]:
    """Incumbent arms every generation pairs a candidate with: `evolution.arms`, or each selected arm
    that loads an evolvable skill. Fixed per experiment, so the work of a generation is known up front."""
    selected = selected_arms(config)
    evolvable = set(config["skills"]["evolvable"])
    chosen = config["evolution"].get("arms") or [arm for arm in selected if evolvable & set(arm_skills(config, arm))]
    for arm in chosen:
        if arm not in selected:
            raise ArmError(f"config evolution.arms: {arm!r} is not a selected arm ({selected})")
        if not evolvable & set(arm_skills(config, arm)):
            raise ArmError(f"config evolution.arms: {arm!r} loads no evolvable skill, so no overlay can change it")
    return chosen


def candidate_arms(config: dict[str, Any]) -> list[str]:
    """The candidate arms every generation benchmarks (none when the experiment does not evolve)."""
    if not config["evolution"]["generations"]:
        return []
    return [candidate_of(arm) for arm in evolution_arms(config)]


def anchor_arms(config: dict[str, Any]) -> list[str]:
    """The incumbent arms each generation runs afresh beside its candidates (its anchor): every candidate's paired
    arm, in the candidates' order; none when the experiment does not evolve."""
    return [incumbent_of(arm) for arm in candidate_arms(config)]


def cached_arms(config: dict[str, Any]) -> list[str]:
    """The incumbent arms whose cells live in the cache (`cells/`, shared by every generation): those no candidate
    is paired with, or every selected arm in a plain sweep. A generation shows them beside its batch for context;
    no gate compares a candidate with them."""
    anchored = set(anchor_arms(config))
    return [arm for arm in selected_arms(config) if arm not in anchored]


def selected_arm_skills(config: dict[str, Any]) -> dict[str, list[str]]:
    """Each selected incumbent arm (config order) and the skills its sessions invoke."""
    selected = selected_arms(config)
    return {arm: arm_skills(config, arm) for arm in config["arms"] if arm in selected}


def required_candidate_arms(config: dict[str, Any], touched: set[str], source: str) -> list[str]:
    """The paired candidate arms an overlay needs; they must be exactly the experiment's evolution arms."""
    expected = [candidate_of(arm) for arm in evolution_arms(config)]
    return check_candidate_arms(expected, selected_arm_skills(config), touched, source)


def check_candidate_arms(
    expected: list[str], arm_skills: dict[str, list[str]], touched: set[str], source: str
) -> list[str]:
    """``expected`` (the experiment's candidate arms, in their order), when they are exactly the candidates of the
    selected arms (``arm_skills``: arm → its skills) that load a skill the overlay at ``source`` touches."""
    needed = [candidate_of(arm) for arm, skills in arm_skills.items() if touched.intersection(skills)]
    # The same arms in any order: evolution.arms may list them in another order than the config defines them (a
    # config merged over the default one puts its own arms after the default's).
    if set(needed) != set(expected):
        raise OverlayError(
            f"overlay {source} changes {sorted(touched)}, which needs the paired arms {needed or 'none'}; this "
            f"experiment benchmarks {expected} (evolution.arms). Change a skill of every one of those arms, or "
            "set evolution.arms to the arms the overlay is about"
        )
    return expected


def session_counts(config: dict[str, Any]) -> dict[str, int]:
    """Agent sessions per cell of every arm under `arms` (a candidate arm runs as many as its incumbent)."""
    return {name: len(definition["sessions"]) for name, definition in config["arms"].items()}


def generation_arm_order(incumbents: list[str], candidates: list[str]) -> list[str]:
    """Each incumbent arm followed by its candidate, in the order given (config order)."""
    order: list[str] = []
    for arm in incumbents:
        order.append(arm)
        order += [candidate for candidate in candidates if incumbent_of(candidate) == arm]
    return order


def render_prompt(
    config: dict[str, Any], session: dict[str, Any], *, task_prompt: str, plan_path: str | None = None
) -> str:
    template = config["prompts"][session["prompt"]]
    values = {
        "task": task_prompt.strip(),
        "skill": session.get("skill", ""),
        "plan": plan_path or "",
        "verify": config["prompts"].get("verify", "").strip(),
    }
    try:
        return template.format(**values).strip() + "\n"
    except (KeyError, IndexError, ValueError) as exc:
        raise ArmError(
            f"config prompts.{session['prompt']}: bad placeholder ({exc}); "
            "use {task} {skill} {plan} {verify}, and {{ }} for literal braces"
        ) from exc
