"""Every schema under schemas/ is a well-formed JSON Schema 2020-12 document whose references resolve."""

import jsonschema
import pytest
from skillbench.base import artifacts


@pytest.mark.parametrize("kind", artifacts.schema_kinds())
def test_every_schema_is_a_well_formed_draft_2020_12_schema(kind):
    jsonschema.Draft202012Validator.check_schema(artifacts.load_schema(kind))


def test_a_malformed_schema_is_refused_by_the_check():
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema({"type": "no-such-type"})


@pytest.mark.parametrize("kind", artifacts.schema_kinds())
def test_every_reference_of_a_schema_resolves(kind):
    schema = artifacts.load_schema(kind)
    registry = artifacts._registry()
    resolver = registry.resolver(base_uri=kind)
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    for ref in refs:
        resolver.lookup(ref)
