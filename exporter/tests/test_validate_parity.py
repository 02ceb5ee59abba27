"""The exporter's validator rejects what Go's ingest rejects (ingest/semantic_test.go), at the
same pointer: a dump the exporter writes is never refused by mrep ingest."""

import copy
import json
import os

import pytest
from conftest import SCHEMA_TESTDATA

from mrep_export.validate import semantic_errors


def _load(name):
    with open(os.path.join(SCHEMA_TESTDATA, "valid", name), encoding="utf-8") as f:
        return json.load(f)


def _p(d, i, j):
    return d["modules"][i]["params"][j]


def _swap_hist(d):
    h = _p(d, 1, 0)["stats"]["hist"]
    h["lo"], h["hi"] = h["hi"], h["lo"]


CASES = [
    ("hist lo above hi", "mlp_stats.json", _swap_hist, "/modules/1/params/0/stats/hist/lo"),
    ("hist outside", "mlp_stats.json", lambda d: _p(d, 1, 0)["stats"]["hist"].update(hi=9.5), "/modules/1/params/0/stats/hist"),
    ("std null", "mlp_stats.json", lambda d: _p(d, 1, 0)["stats"].update(std=None), "/modules/1/params/0/stats/std"),
    ("std beyond range", "mlp_stats.json", lambda d: _p(d, 1, 0)["stats"].update(std=5.0), "/modules/1/params/0/stats/std"),
    ("tie to another dtype", "tied_meta.json", lambda d: _p(d, 3, 0).update(dtype="float16"), "/modules/3/params/0/tied_to"),
    ("name not under parent", "mlp_stats.json", lambda d: d["modules"][3].update(name="x.2"), "/modules/3/name"),
    ("unknown dtype", "mlp_stats.json", lambda d: _p(d, 1, 1).update(dtype="float7"), "/modules/1/params/1/dtype"),
    ("lazy with numel", "lazy.json", lambda d: _p(d, 1, 0).update(numel=16), "/modules/1/params/0/numel"),
    ("expert_axis on a matrix", "mlp_stats.json", lambda d: _p(d, 1, 0).update(expert_axis=0), "/modules/1/params/0/expert_axis"),
    ("trace total below a module", "traced.json", lambda d: d["trace"].update(total_flops=1000), "/trace/total_flops"),
    ("created_at impossible", "mlp_stats.json", lambda d: d["run"].update(created_at="2026-13-45T25:61:00Z"), "/run/created_at"),
    ("NUL in a name", "mlp_stats.json", lambda d: d["modules"][1].update(name="0\x00"), "/modules/1/name"),
    ("lone surrogate in a class", "mlp_stats.json", lambda d: d["modules"][1].update(**{"class": "Lin\ud800ear"}), "/modules/1/class"),
]


@pytest.mark.parametrize("name,fixture,edit,pointer", CASES, ids=[c[0] for c in CASES])
def test_rejected_like_go(name, fixture, edit, pointer):
    doc = copy.deepcopy(_load(fixture))
    edit(doc)
    errs = list(semantic_errors(doc))
    assert errs, name
    assert errs[0].pointer == pointer, (errs[0].pointer, errs[0])


@pytest.mark.parametrize("fixture", ["mlp_stats.json", "tied_meta.json", "traced.json", "lazy.json"])
def test_fixtures_still_pass(fixture):
    assert list(semantic_errors(_load(fixture))) == []
