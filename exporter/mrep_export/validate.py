"""Check a dump against the contract: the JSON Schema, then the semantic rules the schema cannot say.

The Go ingester applies the same rules (ingest/semantic.go); schemas/testdata/cases.json lists
fixtures that each side must reject with the same JSON pointer.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from typing import Any, Iterator

# A symlink to schemas/dump.schema.json (the single source) that wheels carry as a file.
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "dump.schema.json")


class DumpInvalid(ValueError):
    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer or '/'}: {message}")
        self.pointer = pointer
        self.message = message


@lru_cache(maxsize=1)
def _validator(schema_path: str):
    import jsonschema  # noqa: PLC0415 - test/dev dependency

    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def schema_errors(doc: Any, schema_path: str = SCHEMA_PATH) -> list[DumpInvalid]:
    v = _validator(os.path.abspath(schema_path))
    return [DumpInvalid(_pointer(e.absolute_path), e.message) for e in v.iter_errors(doc)]


def _product(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def semantic_errors(doc: dict) -> Iterator[DumpInvalid]:
    """Rules beyond the schema: tree shape, numel, ties, statistics."""
    modules = doc["modules"]
    index: dict[str, int] = {}
    for i, m in enumerate(modules):
        if m["name"] in index:
            yield DumpInvalid(f"/modules/{i}/name", f"duplicate module name {m['name']!r}")
        index.setdefault(m["name"], i)
    tensors: set[str] = set()
    for i, m in enumerate(modules):
        name, parent = m["name"], m["parent"]
        if name == "":
            if parent is not None:
                yield DumpInvalid(f"/modules/{i}/parent", "the root module has no parent")
        elif parent is None:
            yield DumpInvalid(f"/modules/{i}/parent", f"module {name!r} has no parent but is not the root")
        elif parent not in index or index[parent] >= i:
            yield DumpInvalid(f"/modules/{i}/parent", f"parent {parent!r} is not a module listed before {name!r}")
        for kind in ("params", "buffers"):
            seen: set[str] = set()
            for j, t in enumerate(m[kind]):
                at = f"/modules/{i}/{kind}/{j}"
                if t["name"] in seen:
                    yield DumpInvalid(f"{at}/name", f"duplicate tensor name {t['name']!r} in module {name!r}")
                seen.add(t["name"])
                if t["shape"] is None:
                    if not t.get("lazy"):
                        yield DumpInvalid(f"{at}/shape", "shape is null but the tensor is not lazy")
                elif t["numel"] != _product(t["shape"]):
                    yield DumpInvalid(
                        f"{at}/numel", f"numel {t['numel']} is not the product of shape {t['shape']}"
                    )
                full = f"{name}.{t['name']}" if name else t["name"]
                tied = t.get("tied_to")
                if tied is not None and tied not in tensors:
                    yield DumpInvalid(f"{at}/tied_to", f"tied_to {tied!r} names no tensor listed before it")
                tensors.add(full)
                st = t.get("stats")
                if st is not None:
                    yield from _stats_errors(st, t, f"{at}/stats")
    trace = doc.get("trace")
    if trace is not None:
        for k, tm in enumerate(trace["modules"]):
            if tm["name"] not in index:
                yield DumpInvalid(f"/trace/modules/{k}/name", f"traced module {tm['name']!r} is not in the tree")
            if tm["flops"] != sum(tm["ops"].values()):
                yield DumpInvalid(f"/trace/modules/{k}/flops", "flops is not the sum of ops")


def _stats_errors(st: dict, t: dict, at: str) -> Iterator[DumpInvalid]:
    for key in ("mean", "std", "min", "max"):
        v = st.get(key)
        if v is not None and not math.isfinite(v):
            yield DumpInvalid(f"{at}/{key}", "statistic is not finite")
    if st["min"] > st["max"]:
        yield DumpInvalid(f"{at}/min", f"min {st['min']} is above max {st['max']}")
    elif not (st["min"] <= st["mean"] <= st["max"]):
        yield DumpInvalid(f"{at}/mean", f"mean {st['mean']} is outside [min, max]")
    if st["std"] is not None and st["std"] < 0:
        yield DumpInvalid(f"{at}/std", "std is negative")
    finite = t["numel"] - st["nonfinite"]
    if finite < 0:
        yield DumpInvalid(f"{at}/nonfinite", f"nonfinite {st['nonfinite']} exceeds numel {t['numel']}")
    elif sum(st["hist"]["counts"]) != finite:
        yield DumpInvalid(
            f"{at}/hist/counts", f"histogram counts sum to {sum(st['hist']['counts'])}, expected {finite}"
        )


def validate(doc: Any, schema_path: str = SCHEMA_PATH) -> None:
    """Raise DumpInvalid for the first problem: schema first, then semantics."""
    errs = schema_errors(doc, schema_path)
    if errs:
        raise errs[0]
    for e in semantic_errors(doc):
        raise e
