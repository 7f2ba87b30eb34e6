"""Every typed record names exactly the fields of its JSON Schema, with the same required ones."""

from __future__ import annotations

import pytest
from skillbench.base import artifacts, records

# (type, schema kind, path to the object schema inside it; "$ref" entries are followed)
RECORDS = [
    (records.ResultRow, "result-row", ()),
    (records.TranscriptArtifact, "result-row", ("properties", "transcript_artifacts", "items")),
    (records.CellRecord, "cell-record", ()),
    (records.CellTiming, "cell-record", ("properties", "timing")),
    (records.SessionWindow, "cell-record", ("properties", "timing", "properties", "sessions", "items")),
    (records.Schedule, "schedule", ()),
    (records.ScheduledCell, "schedule", ("properties", "cells", "items")),
    (records.TaskBinding, "task-binding", ()),
    (records.OracleFileBinding, "task-binding", ("properties", "oracle_files", "items")),
    (records.TaskBindings, "task-bindings", ()),
    (records.OverlayDocument, "overlay", ()),
    (records.OverlayFile, "overlay", ("properties", "files", "items")),
    (records.ProposerSession, "proposer-session", ()),
    (records.Progress, "progress", ()),
    (records.RunRecord, "run", ()),
    (records.RunConfigFile, "run", ("$defs", "config_file")),
    (records.RunProfile, "run", ("properties", "profile")),
    (records.RunSkillbench, "run", ("properties", "skillbench")),
    (records.RunProcess, "run", ("properties", "process")),
    (records.EvidenceManifest, "evidence-manifest", ()),
    (records.EvidenceCounts, "evidence-manifest", ("properties", "counts")),
    (records.EvidenceLimits, "evidence-manifest", ("properties", "limits")),
    (records.EvidenceSources, "evidence-manifest", ("properties", "sources")),
    (records.EvidenceFile, "evidence-manifest", ("properties", "files", "items")),
    (records.PromotionDocument, "promotion", ()),
    (records.Decision, "promotion", ("$defs", "decision")),
    (records.TaskRow, "promotion", ("$defs", "task_row")),
]


def object_schema(kind: str, path: tuple[str, ...]) -> dict:
    schema = artifacts.load_schema(kind)
    node = schema
    for key in path:
        node = node[key]
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


@pytest.mark.parametrize(("record", "kind", "path"), RECORDS, ids=[f"{r.__name__}" for r, _, _ in RECORDS])
def test_a_record_type_and_its_schema_name_the_same_fields(record, kind, path):
    schema = object_schema(kind, path)
    assert set(record.__annotations__) == set(schema["properties"]), f"{record.__name__} vs {kind}{list(path)}"
    assert set(record.__required_keys__) == set(schema.get("required", [])), f"required fields of {record.__name__}"


def test_the_error_kinds_are_the_schemas():
    enum = artifacts.load_schema("result-row")["properties"]["error_kind"]["enum"]
    assert set(records.ErrorKind.__args__) == {kind for kind in enum if kind is not None}
