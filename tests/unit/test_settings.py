"""The typed job settings and the gate's policy: every field is a config key with the schema's type and default, and
the shipped configs build."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from skillbench.base.artifacts import load_schema
from skillbench.decision.policy import POLICY_KEYS_NOT_IN_CONFIG, RECORDED_WHEN_SET, GatePolicy, resolve_policy
from skillbench.execution.quota import disk_quota_mb
from skillbench.execution.sandbox import SandboxLimits
from skillbench.execution.workspace import WorkspaceLimits
from skillbench.experiment import configcheck, settings
from skillbench.steps.session import budget_resource, job_run_control

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema("config")
JOB_RECORDS = (settings.CellSettings, settings.ProposerSettings, settings.CheckSettings)
# Fields that are no config key: the job's JSON sections, kept for the readers the workflow's parse shares.
NOT_CONFIG = {"sections"}
JSON_TYPES = {int: {"integer"}, float: {"number"}, str: {"string"}, bool: {"boolean"}, type(None): {"null"}}


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def schema_node(path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = SCHEMA
    for key in path:
        assert key in node.get("properties", {}), f"config key {'.'.join(path)} is not in the schema"
        node = resolve(node["properties"][key])
    return node


def config_fields(record: type) -> Iterator[tuple[type, dataclasses.Field[Any], Any, tuple[str, ...]]]:
    """(record, field, type, schema path) of every config-valued field under `record`, nested records included."""
    hints = typing.get_type_hints(record)
    for item in dataclasses.fields(record):
        kind = hints[item.name]
        if item.name in NOT_CONFIG:
            continue
        if dataclasses.is_dataclass(kind):
            yield from config_fields(kind)  # type: ignore[arg-type]
            continue
        section = item.metadata.get("section", getattr(record, "SECTION", ()))
        yield record, item, kind, (*section, item.metadata.get("key", item.name))


def records_under(record: type) -> Iterator[type]:
    yield record
    for kind in typing.get_type_hints(record).values():
        if dataclasses.is_dataclass(kind):
            yield from records_under(kind)  # type: ignore[arg-type]


def json_types(kind: Any) -> set[str]:
    """The JSON types a field's Python type admits."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return set().union(*(json_types(arg) for arg in typing.get_args(kind)))
    origin = typing.get_origin(kind) or kind
    if origin is typing.Literal:
        return set().union(*(JSON_TYPES[type(arg)] for arg in typing.get_args(kind)))
    if origin is tuple:
        return {"array"}
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return {"object"}
    return JSON_TYPES[origin]


def schema_types(node: dict[str, Any]) -> set[str]:
    if "enum" in node:
        names = {type(None): "null", str: "string", int: "integer", float: "number", bool: "boolean"}
        return {names[type(value)] for value in node["enum"]}
    kind = node["type"]
    return set(kind) if isinstance(kind, list) else {kind}


ALL_FIELDS = sorted(
    {
        (record.__name__, item.name): (record, item, kind, path)
        for job in JOB_RECORDS
        for record, item, kind, path in config_fields(job)
    }.values(),
    key=lambda entry: entry[3],
)
# The gate policy's fields, but the one key the config has not (the evidence lifetime).
POLICY_FIELDS = [entry for entry in config_fields(GatePolicy) if entry[1].name not in POLICY_KEYS_NOT_IN_CONFIG]
TYPED_FIELDS = ALL_FIELDS + POLICY_FIELDS


@pytest.mark.parametrize("record, item, kind, path", TYPED_FIELDS, ids=[".".join(entry[3]) for entry in TYPED_FIELDS])
def test_every_settings_field_is_a_config_key_of_the_schemas_type(record, item, kind, path):
    node = schema_node(path)
    assert json_types(kind) == schema_types(node), f"{record.__name__}.{item.name} vs {'.'.join(path)}"
    if typing.get_origin(kind) is typing.Literal:
        assert set(typing.get_args(kind)) == set(node["enum"]), f"{record.__name__}.{item.name}: not the schema's enum"
    if "array" in schema_types(node):
        (element,) = typing.get_args(kind)[:1]
        assert json_types(element) == schema_types(resolve(node["items"]))


@pytest.mark.parametrize("record, item, kind, path", ALL_FIELDS, ids=[".".join(entry[3]) for entry in ALL_FIELDS])
def test_every_settings_field_built_from_an_empty_config_holds_the_schemas_default(record, item, kind, path):
    # No default is stated in Python: a record built from the config an empty config becomes holds what the
    # schema says, read here from the schema itself.
    defaults = settings.schema_defaults()
    built = {
        settings.CellSettings: settings.cell_settings(
            defaults, settings.run_control(defaults["agent"], defaults["budget"])
        ),
        settings.ProposerSettings: settings.proposer_settings(
            defaults, settings.run_control(defaults["agent"], defaults["budget"])
        ),
        settings.CheckSettings: settings.check_settings(defaults),
    }
    stated = schema_node(path)["default"]
    values = [value for job in built.values() for value in [find(job, record, item.name)] if value is not MISSING]
    assert values, f"no job record carries {record.__name__}.{item.name}"
    for value in values:
        assert (list(value) if isinstance(value, tuple) else value) == stated


MISSING = object()


def find(job: Any, record: type, name: str) -> Any:
    """The value of `record`'s field `name` in the job record `job` (searching its nested records), or MISSING."""
    if isinstance(job, record):
        return getattr(job, name)
    for item in dataclasses.fields(job):
        value = getattr(job, item.name)
        if dataclasses.is_dataclass(value):
            found = find(value, record, name)
            if found is not MISSING:
                return found
    return MISSING


@pytest.mark.parametrize(
    "section, records",
    [
        (("model",), [settings.ModelSettings]),
        (("agent",), [settings.AgentSettings, settings.RunControl]),
        (("agent", "prices"), [settings.PriceSettings]),
        (("sandbox",), [settings.SandboxSettings]),
        (("sandbox", "limits"), [settings.LimitSettings]),
        (("skills",), [settings.SkillsSettings]),
    ],
)
def test_a_typed_section_carries_every_key_the_schema_gives_it(section, records):
    # A key added to the schema of a section the jobs read must reach the typed record (or fail here).
    typed = {
        path[len(section)]
        for record in records
        for _r, _i, _k, path in config_fields(record)
        if path[: len(section)] == section and len(path) == len(section) + 1
    }
    nested = {
        item.name
        for record in records
        for item in dataclasses.fields(record)
        if dataclasses.is_dataclass(typing.get_type_hints(record)[item.name])
    }
    assert typed | nested == set(schema_node(section)["properties"])


@pytest.mark.parametrize("files", [["config.yaml"], ["config.yaml", "mcp-demo.yaml"], ["mcp-demo.yaml"]])
def test_the_shipped_configs_build_every_jobs_settings(files):
    config = configcheck.load_config(*(REPO / "config" / name for name in files))
    run = settings.run_control(config["agent"], config["budget"])
    cell = settings.cell_settings(config, run)
    proposer = settings.proposer_settings(config, run)
    check = settings.check_settings(config)
    assert cell.model.name == config["model"]["name"] and cell.model.script == config["model"]["script"]
    assert list(cell.agent.tools) == config["agent"]["tools"]
    assert cell.agent.prices.usd_per_mtok == config["agent"]["prices"]["usd_per_mtok"]
    assert cell.sandbox.limits.disk_mb == config["sandbox"]["limits"]["disk_mb"]
    assert list(cell.skills.evolvable) == config["skills"]["evolvable"]
    assert cell.run.attempts == config["agent"]["attempts"] and cell.run.max_usd == config["budget"]["max_usd"]
    assert proposer.proposer_model == config["evolution"]["proposer_model"]
    assert check.timeouts == cell.agent.steps and check.sandbox == cell.sandbox
    assert cell.sections is config  # the readers the parse shares see the job's sections as they came


def test_a_section_missing_from_a_jobs_settings_is_an_error_not_a_default():
    config = settings.schema_defaults()
    del config["sandbox"]["limits"]["disk_mb"]
    with pytest.raises(KeyError, match="disk_mb"):
        settings.check_settings(config)


def test_run_control_comes_back_from_the_resources_the_workflow_gives_a_job():
    resources = {
        "attempts": 3,
        "outage_streak": 0,
        "heartbeat_s": 7.5,
        "budget_usd": budget_resource(None),
        "session_budget_usd": budget_resource(0.25),
    }
    assert job_run_control(resources) == settings.RunControl(
        attempts=3, outage_streak=0, heartbeat_s=7.5, max_usd=None, max_session_usd=0.25
    )


def test_the_limits_records_default_to_what_the_schema_states_and_take_a_users_limits():
    defaults = settings.schema_defaults()
    limits = defaults["sandbox"]["limits"]
    assert SandboxLimits.default() == SandboxLimits(
        processes=limits["processes"],
        memory_mb=limits["memory_mb"],
        file_mb=limits["file_mb"],
        disk_mb=limits["disk_mb"],
    )
    assert WorkspaceLimits.default().max_file_bytes == limits["workspace_file_mb"] << 20
    assert WorkspaceLimits.default().max_total_bytes == limits["workspace_mb"] << 20
    assert WorkspaceLimits.default().max_entries == limits["workspace_entries"]
    mine = configcheck.merge(defaults, {"sandbox": {"limits": {"disk_mb": 7, "workspace_entries": 9}}})
    typed = settings.sandbox_settings(mine["sandbox"])
    assert SandboxLimits.of(typed.limits).disk_mb == 7 == disk_quota_mb(typed)
    assert WorkspaceLimits.of(typed.limits).max_entries == 9
    assert disk_quota_mb(settings.sandbox_settings({**mine["sandbox"], "backend": "none"})) == 0


# ─── The gate's policy: the config's gate section and the evidence lifetime ──


@pytest.mark.parametrize("record, item, kind, path", POLICY_FIELDS, ids=[".".join(entry[3]) for entry in POLICY_FIELDS])
def test_every_gate_policy_field_holds_the_schemas_default(record, item, kind, path):
    # No default is stated in Python: the default policy holds what the schema says, with the schema's type (the
    # field's type and enum are held to the schema's with the job settings' above).
    node = schema_node(path)
    value = getattr(resolve_policy(None), item.name)
    assert value == node["default"] and type(value) is type(node["default"])


def test_the_gate_policy_carries_every_gate_key_and_only_the_evidence_lifetime_besides():
    names = [item.name for item in dataclasses.fields(GatePolicy)]
    gate_keys = set(schema_node(("gate",))["properties"])
    assert set(names) - POLICY_KEYS_NOT_IN_CONFIG == gate_keys
    assert POLICY_KEYS_NOT_IN_CONFIG <= set(names) and not POLICY_KEYS_NOT_IN_CONFIG & gate_keys
    # The evidence lifetime is no config key: a config that sets it is refused.
    with pytest.raises(configcheck.ConfigError, match="max_age_days"):
        configcheck.validate_config({"gate": {"max_age_days": 30}})
    default = resolve_policy(None)
    assert type(default.max_age_days) is int and default.max_age_days >= 1
    # What a document records: every field, in field order (those only review cases read once set away from their
    # default, so the document of a policy that leaves them alone is the one it always was).
    assert list(default.as_dict()) == [name for name in names if name not in RECORDED_WHEN_SET]
    changed = dataclasses.replace(default, **{name: 0.25 for name in RECORDED_WHEN_SET})
    assert list(changed.as_dict()) == names and resolve_policy(changed.as_dict()) == changed


def test_the_gate_policy_is_built_from_the_validated_config_a_user_wrote():
    defaults = settings.schema_defaults()
    assert resolve_policy(defaults["gate"]) == resolve_policy(None)
    mine = configcheck.validate_config({"gate": {"alpha": 0.1, "objective": "per_task", "min_runs": 5}})
    policy = resolve_policy(mine["gate"])
    assert (policy.alpha, policy.objective, policy.min_runs) == (0.1, "per_task", 5)
    assert policy == dataclasses.replace(resolve_policy(None), alpha=0.1, objective="per_task", min_runs=5)
