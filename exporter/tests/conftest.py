import gzip
import json
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the reference config.json files ship in the repository (examples/configs, with their provenance)
CONFIGS = os.environ.get("MREP_CONFIGS", os.path.join(REPO, "examples", "configs"))
SCHEMA_TESTDATA = os.path.join(REPO, "schemas", "testdata")


def config_path(name: str) -> str:
    path = os.path.join(CONFIGS, f"{name}.json")
    if not os.path.exists(path):
        pytest.fail(f"reference config {path} is missing (examples/configs ships with the repository)")
    return path


def load_dump(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)
