import gzip
import json
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("MREP_SHARED", os.path.join(REPO, "..", "shared"))
CONFIGS = os.path.join(SHARED, "configs")
SCHEMA_TESTDATA = os.path.join(REPO, "schemas", "testdata")


def config_path(name: str) -> str:
    path = os.path.join(CONFIGS, f"{name}.json")
    if not os.path.exists(path):
        pytest.fail(f"reference config {path} is missing: shared/ must sit beside the repository")
    return path


def load_dump(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)
