"""Regenerate the schema fixtures: `.venv/bin/python schemas/testdata/generate.py`.

valid/    dumps the exporter wrote for small real models (fixed seed and clock).
invalid/  each a valid dump with one defect; cases.json says which JSON pointer each one must
          be rejected at and whether the schema or the semantic checks catch it. The Go ingester
          and the Python tests both read cases.json.
"""

from __future__ import annotations

import copy
import json
import os

import torch
from torch import nn

from mrep_export.dump import build_dump, content_hash

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK = "2026-01-01T00:00:00Z"


class TiedLM(nn.Module):
    """An embedding tied to the output head, a norm and a lazy layer: the awkward cases at once."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.ones(8), persistent=False)


def _write(doc: dict, rel: str) -> None:
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, allow_nan=True)
        f.write("\n")


def main() -> None:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    mlp[2].bias.requires_grad_(False)
    doc_mlp, _ = build_dump(mlp, name="mlp", label="seed0", step=0, tags=["fixture"], created_at=CLOCK)
    _write(doc_mlp, "valid/mlp_stats.json")
    # the same dump as schema version 1 wrote it (no norm, no sketch): old dumps keep ingesting
    v1 = copy.deepcopy(doc_mlp)
    v1["schema_version"] = 1
    for m in v1["modules"]:
        for p in m["params"]:
            for key in ("norm", "sketch"):
                (p.get("stats") or {}).pop(key, None)
    v1["run"]["content_hash"] = content_hash(v1)
    _write(v1, "valid/v1_mlp_stats.json")

    with torch.device("meta"):
        tied = TiedLM()
    doc_tied, _ = build_dump(tied, name="tied-lm", created_at=CLOCK)
    _write(doc_tied, "valid/tied_meta.json")

    lazy = nn.Sequential(nn.LazyLinear(4), nn.Linear(4, 4))
    doc_lazy, _ = build_dump(lazy, name="lazy", stats=False, created_at=CLOCK)
    _write(doc_lazy, "valid/lazy.json")

    traced = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    from mrep_export.trace import trace_flops

    tr = trace_flops(traced, 3, 5, inputs=torch.randn(3, 5, 4))
    doc_trace, _ = build_dump(traced, name="traced", stats=False, trace=tr, created_at=CLOCK)
    _write(doc_trace, "valid/traced.json")

    cases = []

    def bad(name: str, layer: str, pointer: str, mutate, base: dict = doc_mlp, what: str = "") -> None:
        d = copy.deepcopy(base)
        mutate(d)
        _write(d, f"invalid/{name}.json")
        cases.append({"file": f"invalid/{name}.json", "layer": layer, "pointer": pointer, "what": what})

    p0 = "/modules/1/params/0"
    bad("schema_version", "schema", "/schema_version", lambda d: d.update(schema_version=99), what="unknown major version")
    bad("missing_modules", "schema", "", lambda d: d.pop("modules"), what="required property missing")
    bad("negative_dim", "schema", f"{p0}/shape/0", lambda d: d["modules"][1]["params"][0].update(shape=[-8, 4]), what="negative dimension")
    bad("numel_string", "schema", f"{p0}/numel", lambda d: d["modules"][1]["params"][0].update(numel="32"), what="wrong type")
    bad("bad_dtype", "schema", f"{p0}/dtype", lambda d: d["modules"][1]["params"][0].update(dtype="Float 32"), what="dtype pattern")
    bad("extra_property", "schema", "", lambda d: d.update(extra=1), what="unknown top-level property")
    bad("bad_hash", "schema", "/run/content_hash", lambda d: d["run"].update(content_hash="md5:abc"), what="hash pattern")
    bad("bad_created_at", "schema", "/run/created_at", lambda d: d["run"].update(created_at="yesterday"), what="timestamp pattern")
    bad("unknown_param_field", "schema", p0, lambda d: d["modules"][1]["params"][0].update(color="red"), what="unevaluated property on a param")
    bad("numel_mismatch", "semantic", f"{p0}/numel", lambda d: d["modules"][1]["params"][0].update(numel=33), what="numel is not the shape's product")
    bad("duplicate_module", "semantic", "/modules/2/name", lambda d: d["modules"][2].update(name="0"), what="duplicate module name")
    bad("orphan_parent", "semantic", "/modules/1/parent", lambda d: d["modules"][1].update(parent="nowhere"), what="parent does not exist")
    bad("second_root", "semantic", "/modules/1/parent", lambda d: d["modules"][1].update(parent=None), what="non-root module without parent")
    bad("dangling_tie", "semantic", "/modules/3/params/0/tied_to", lambda d: d["modules"][3]["params"][0].update(tied_to="0.nothing"), what="tie names no tensor")
    bad("stats_min_above_max", "semantic", f"{p0}/stats/min", lambda d: d["modules"][1]["params"][0]["stats"].update(min=1.0, max=-1.0), what="min above max")
    bad("hist_count", "semantic", f"{p0}/stats/hist/counts", lambda d: d["modules"][1]["params"][0]["stats"]["hist"]["counts"].append(5), what="histogram does not sum to numel")
    bad("sketch_too_long", "semantic", f"{p0}/stats/sketch", lambda d: d["modules"][1]["params"][0]["stats"].update(sketch=[0.5] * 33), what="more sketch buckets than elements")
    bad("negative_norm", "schema", f"{p0}/stats/norm", lambda d: d["modules"][1]["params"][0]["stats"].update(norm=-1.0), what="negative norm")
    bad("null_shape_not_lazy", "semantic", f"{p0}/shape", lambda d: d["modules"][1]["params"][0].update(shape=None), what="null shape without lazy")
    bad("trace_unknown_module", "semantic", "/trace/modules/0/name", lambda d: d["trace"]["modules"][0].update(name="ghost"), base=doc_trace, what="traced module not in tree")

    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"valid": sorted(os.listdir(os.path.join(HERE, "valid"))), "invalid": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
