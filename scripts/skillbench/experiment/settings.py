"""The typed settings of a session job: one frozen record per config section a job reads, built once at the job's
edge from the sections its rule passes as the `settings` param (and from its run-control resources).

Defaults live in the schema only (`schemas/config.schema.json`). A job's sections were validated with the schema's
defaults filled when the workflow was parsed, so the builders read every key directly and a missing key is a bug,
not a fallback. The one place a default is needed without a config (a sandbox or a workspace measurement set up
by a test or a bench) is `schema_defaults()`: the schema's defaults of an empty config, filled by the same
validator the workflow uses.

Each record names the config section it comes from (`SECTION`, or a field's `metadata["section"]`), so a unit test
holds every field to the schema's key, type and default.

The rule params stay the JSON sections Snakemake hashes (what triggers a rerun does not change); `sections` keeps
them for the readers the workflow's parse shares (`experiment.arms`, `execution.mcp`, `execution.plugins`, the
agent adapters), which take a config-shaped mapping.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from skillbench.base.records import Provider, SandboxBackend

# A run-control resource cannot be null: "none" stands for no spend cap (steps.session.BUDGET_RESOURCES).
NO_CAP = "none"


@dataclass(frozen=True)
class LimitSettings:
    """`sandbox.limits`: per-cell resource limits and the workspace bounds; 0 switches a resource limit off."""

    SECTION: ClassVar[tuple[str, ...]] = ("sandbox", "limits")

    processes: int
    memory_mb: int
    file_mb: int
    disk_mb: int
    workspace_file_mb: int
    workspace_mb: int
    workspace_entries: int


@dataclass(frozen=True)
class SandboxSettings:
    """`sandbox`: the backend (bwrap, or none: no containment), the Bubblewrap executable and the limits."""

    SECTION: ClassVar[tuple[str, ...]] = ("sandbox",)

    backend: SandboxBackend
    bwrap: str
    limits: LimitSettings


@dataclass(frozen=True)
class ModelSettings:
    """`model`: the provider, the pinned model id, the effort flag, the scripted model's script, the key's variable."""

    SECTION: ClassVar[tuple[str, ...]] = ("model",)

    provider: Provider
    name: str
    effort: str | None
    script: str | None
    api_key_env: str
    base_url: str | None


@dataclass(frozen=True)
class PriceSettings:
    """`agent.prices`: the price table's label, the CLI-vs-ledger tolerance, the rates per model id and the pinned
    community table under them (`source`, e.g. litellm@1.110.2; None: the config's rates alone)."""

    SECTION: ClassVar[tuple[str, ...]] = ("agent", "prices")

    table: str
    tolerance_pct: float
    # model id -> price field -> USD per million tokens (`execution.pricing` reads an entry).
    usd_per_mtok: Mapping[str, Mapping[str, float]]
    source: str | None


@dataclass(frozen=True)
class StepTimeouts:
    """The agent section's limits of a task's setup and of verify and the hidden oracle (all a task check reads)."""

    SECTION: ClassVar[tuple[str, ...]] = ("agent",)

    setup_timeout_s: int
    verify_timeout_s: int


@dataclass(frozen=True)
class AgentSettings:
    """`agent` without its run control: the CLI, the tools, the timeouts and the price table."""

    SECTION: ClassVar[tuple[str, ...]] = ("agent",)

    cli: str
    tools: tuple[str, ...]
    session_timeout_s: int
    setup_timeout_s: int
    verify_timeout_s: int
    prices: PriceSettings

    @property
    def steps(self) -> StepTimeouts:
        return StepTimeouts(setup_timeout_s=self.setup_timeout_s, verify_timeout_s=self.verify_timeout_s)


@dataclass(frozen=True)
class RunControl:
    """How a session job runs but not what it measures: the agent's tries, outage streak and heartbeat, and the
    spend caps its gateway enforces (`budget.max_usd`, `budget.max_session_usd`; None = no cap). They reach a job
    as resources, so changing them reruns nothing."""

    SECTION: ClassVar[tuple[str, ...]] = ("agent",)

    attempts: int
    outage_streak: int
    heartbeat_s: float
    max_usd: float | None = field(metadata={"section": ("budget",)})
    max_session_usd: float | None = field(metadata={"section": ("budget",)})


@dataclass(frozen=True)
class SkillsSettings:
    """`skills`: the incumbent skills folder, the skills an overlay may change, the trees that mirror them."""

    SECTION: ClassVar[tuple[str, ...]] = ("skills",)

    root: str
    evolvable: tuple[str, ...]
    mirrors: tuple[str, ...]


@dataclass(frozen=True)
class SessionJobSettings:
    """What a session job (a cell, a proposer session) reads of the config, typed; `sections` is its rule's param."""

    model: ModelSettings
    agent: AgentSettings
    sandbox: SandboxSettings
    skills: SkillsSettings
    run: RunControl
    # The job's config sections as JSON (arms, prompts, mcp_servers, agents, ...), for the readers the
    # workflow's parse shares.
    sections: dict[str, Any]


@dataclass(frozen=True)
class CellSettings(SessionJobSettings):
    """A cell's settings (the run_cell rule's `settings` param and resources)."""


@dataclass(frozen=True)
class ProposerSettings(SessionJobSettings):
    """The proposer's settings: its model (None = `model.name`) and the arms it evolves, besides a session job's."""

    proposer_model: str | None = field(metadata={"section": ("evolution",)})
    evolved_arms: tuple[str, ...] = field(metadata={"section": ("evolution",), "key": "arms"})


@dataclass(frozen=True)
class CheckSettings:
    """A task check's settings (the check_task rule's `settings` param): the step timeouts and the sandbox."""

    timeouts: StepTimeouts
    sandbox: SandboxSettings


def limit_settings(section: Mapping[str, Any]) -> LimitSettings:
    return LimitSettings(
        processes=int(section["processes"]),
        memory_mb=int(section["memory_mb"]),
        file_mb=int(section["file_mb"]),
        disk_mb=int(section["disk_mb"]),
        workspace_file_mb=int(section["workspace_file_mb"]),
        workspace_mb=int(section["workspace_mb"]),
        workspace_entries=int(section["workspace_entries"]),
    )


def sandbox_settings(section: Mapping[str, Any]) -> SandboxSettings:
    return SandboxSettings(
        backend=section["backend"], bwrap=str(section["bwrap"]), limits=limit_settings(section["limits"])
    )


def model_settings(section: Mapping[str, Any]) -> ModelSettings:
    return ModelSettings(
        provider=section["provider"],
        name=str(section["name"]),
        effort=section["effort"],
        script=section["script"],
        api_key_env=str(section["api_key_env"]),
        base_url=section["base_url"],
    )


def price_settings(section: Mapping[str, Any]) -> PriceSettings:
    return PriceSettings(
        table=str(section["table"]),
        tolerance_pct=float(section["tolerance_pct"]),
        usd_per_mtok={model: dict(rates) for model, rates in section["usd_per_mtok"].items()},
        source=section["source"],
    )


def step_timeouts(section: Mapping[str, Any]) -> StepTimeouts:
    return StepTimeouts(
        setup_timeout_s=int(section["setup_timeout_s"]), verify_timeout_s=int(section["verify_timeout_s"])
    )


def agent_settings(section: Mapping[str, Any]) -> AgentSettings:
    return AgentSettings(
        cli=str(section["cli"]),
        tools=tuple(section["tools"]),
        session_timeout_s=int(section["session_timeout_s"]),
        setup_timeout_s=int(section["setup_timeout_s"]),
        verify_timeout_s=int(section["verify_timeout_s"]),
        prices=price_settings(section["prices"]),
    )


def skills_settings(section: Mapping[str, Any]) -> SkillsSettings:
    return SkillsSettings(
        root=str(section["root"]), evolvable=tuple(section["evolvable"]), mirrors=tuple(section["mirrors"])
    )


def _cap(value: Any) -> float | None:
    return None if value is None or value == NO_CAP else float(value)


def run_control(agent: Mapping[str, Any], budget: Mapping[str, Any]) -> RunControl:
    """Run control from the agent and budget sections (a config), or from a job's resources (the same keys, the
    budget's caps as their resource values: a number's repr or "none")."""
    return RunControl(
        attempts=int(agent["attempts"]),
        outage_streak=int(agent["outage_streak"]),
        heartbeat_s=float(agent["heartbeat_s"]),
        max_usd=_cap(budget["max_usd"]),
        max_session_usd=_cap(budget["max_session_usd"]),
    )


def _session_sections(sections: dict[str, Any], run: RunControl) -> dict[str, Any]:
    return {
        "model": model_settings(sections["model"]),
        "agent": agent_settings(sections["agent"]),
        "sandbox": sandbox_settings(sections["sandbox"]),
        "skills": skills_settings(sections["skills"]),
        "run": run,
        "sections": sections,
    }


def cell_settings(sections: dict[str, Any], run: RunControl) -> CellSettings:
    """A cell's settings from its rule's `settings` param (validated config sections) and its run control."""
    return CellSettings(**_session_sections(sections, run))


def proposer_settings(sections: dict[str, Any], run: RunControl) -> ProposerSettings:
    """The proposer's settings from its rule's `settings` param and its run control."""
    evolution = sections["evolution"]
    return ProposerSettings(
        **_session_sections(sections, run),
        proposer_model=evolution["proposer_model"],
        evolved_arms=tuple(evolution["arms"]),
    )


def check_settings(sections: Mapping[str, Any]) -> CheckSettings:
    """A task check's settings from its rule's `settings` param (or a whole validated config)."""
    return CheckSettings(timeouts=step_timeouts(sections["agent"]), sandbox=sandbox_settings(sections["sandbox"]))


@functools.cache
def _defaults() -> dict[str, Any]:
    from skillbench.experiment.configcheck import validate_config

    return validate_config({})


def schema_defaults() -> dict[str, Any]:
    """The config an empty config becomes: every default the schema states, filled by the workflow's validator.
    A fresh copy each call (callers may change it)."""
    import copy

    return copy.deepcopy(_defaults())


def default_limits() -> LimitSettings:
    """`sandbox.limits` as the schema's defaults state them: for a sandbox or a measurement set up without a
    config."""
    return limit_settings(_defaults()["sandbox"]["limits"])
