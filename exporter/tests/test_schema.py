"""The schema fixtures: valid dumps pass; each invalid one is rejected where cases.json says."""

import json
import os

import pytest
from conftest import SCHEMA_TESTDATA

from mrep_export import SCHEMA_VERSION
from mrep_export.validate import schema_errors, semantic_errors, validate

with open(os.path.join(SCHEMA_TESTDATA, "cases.json"), encoding="utf-8") as _f:
    CASES = json.load(_f)


def _load(rel):
    with open(os.path.join(SCHEMA_TESTDATA, rel), encoding="utf-8") as f:
        return json.load(f)


def test_schema_is_draft_2020_12_with_absolute_id():
    with open(os.path.join(SCHEMA_TESTDATA, "..", "dump.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("https://")
    # the versions a reader knows, the exporter's the newest of them
    assert schema["properties"]["schema_version"]["enum"] == [1, SCHEMA_VERSION] == [1, 2]


@pytest.mark.parametrize("name", CASES["valid"])
def test_valid_fixture(name):
    validate(_load(os.path.join("valid", name)))


@pytest.mark.parametrize("case", CASES["invalid"], ids=[c["file"] for c in CASES["invalid"]])
def test_invalid_fixture(case):
    doc = _load(case["file"])
    s_errs = schema_errors(doc)
    if case["layer"] == "schema":
        assert s_errs, f"{case['file']}: the schema accepted it"
        errs = s_errs
    else:
        assert not s_errs, f"{case['file']}: meant to pass the schema, got {s_errs[0]}"
        errs = list(semantic_errors(doc))
        assert errs, f"{case['file']}: semantic checks accepted it"
    # at or under the case's pointer: validators may name the offending property or its object
    ptr = case["pointer"]
    assert any(e.pointer == ptr or e.pointer.startswith(ptr + "/") for e in errs), [str(e) for e in errs]


def test_at_least_fifteen_invalid_fixtures_cover_both_layers():
    layers = [c["layer"] for c in CASES["invalid"]]
    assert len(layers) >= 15
    assert {"schema", "semantic"} <= set(layers)
