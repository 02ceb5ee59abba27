"""Check a dump against the contract: the JSON Schema, then the semantic rules the schema cannot say.

The Go ingester applies the same rules (ingest/semantic.go); schemas/testdata/cases.json lists
fixtures that each side must reject with the same JSON pointer.
"""

from __future__ import annotations

import json
import datetime as _dt
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


_DTYPE_BYTES = {
    "float64", "double", "complex128", "complex64", "float32", "float", "int32", "uint32", "complex32",
    "float16", "half", "bfloat16", "int16", "uint16", "int64", "uint64", "long", "int8", "uint8", "bool",
    "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16", "bits1x8",
    "bits2x4", "bits4x2", *(f"uint{i}" for i in range(1, 8)), *(f"int{i}" for i in range(1, 8)),
}  # the dtypes mrep sizes (model/dtype.go); every float8_* variant too


def _known_dtype(dtype: str) -> bool:
    return dtype in _DTYPE_BYTES or dtype.startswith("float8_")


def _created_at_ok(s: str) -> bool:
    try:
        t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return False
    return t.year >= 1970


def _bad_strings(v: Any, at: str = "") -> Iterator[DumpInvalid]:
    """Strings mrep refuses (ingest/scan.go badEscape): a NUL, which PostgreSQL cannot store,
    and a lone UTF-16 surrogate, which Go would read as U+FFFD (a name silently changed)."""
    if isinstance(v, str):
        if "\x00" in v:
            yield DumpInvalid(at or "/", "a string holds a NUL character (\\u0000)")
        elif any(0xD800 <= ord(c) <= 0xDFFF for c in v):
            yield DumpInvalid(at or "/", "a string holds a lone UTF-16 surrogate")
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _bad_strings(k, at)  # a key: the object holding it
            yield from _bad_strings(x, f"{at}/{_escape(k)}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _bad_strings(x, f"{at}/{i}")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def semantic_errors(doc: dict) -> Iterator[DumpInvalid]:
    """Rules beyond the schema: tree shape, numel, ties, statistics (the Go side's ingest.Check)."""
    bad = next(_bad_strings(doc), None)
    if bad is not None:
        yield bad
        return
    if not _created_at_ok(doc["run"]["created_at"]):
        yield DumpInvalid("/run/created_at", f"created_at {doc['run']['created_at']!r} is not a real UTC time")
    modules = doc["modules"]
    index: dict[str, int] = {}
    for i, m in enumerate(modules):
        if m["name"] in index:
            yield DumpInvalid(f"/modules/{i}/name", f"duplicate module name {m['name']!r}")
        index.setdefault(m["name"], i)
    tensors: dict[str, tuple] = {}
    for i, m in enumerate(modules):
        name, parent = m["name"], m["parent"]
        if name == "":
            if parent is not None:
                yield DumpInvalid(f"/modules/{i}/parent", "the root module has no parent")
        elif parent is None:
            yield DumpInvalid(f"/modules/{i}/parent", f"module {name!r} has no parent but is not the root")
        elif parent not in index or index[parent] >= i:
            yield DumpInvalid(f"/modules/{i}/parent", f"parent {parent!r} is not a module listed before {name!r}")
        elif (parent == "" and "." in name) or (parent != "" and not (name.startswith(parent + ".") and "." not in name[len(parent) + 1:])):
            yield DumpInvalid(f"/modules/{i}/name", f"module {name!r} is not named under its parent {parent!r}")
        seen: set[str] = set()  # params and buffers share one namespace per module
        for kind in ("params", "buffers"):
            for j, t in enumerate(m[kind]):
                at = f"/modules/{i}/{kind}/{j}"
                if t["name"] in seen:
                    yield DumpInvalid(f"{at}/name", f"module {name!r} has two tensors (parameters or buffers) named {t['name']!r}")
                seen.add(t["name"])
                if not _known_dtype(t["dtype"]):
                    yield DumpInvalid(f"{at}/dtype", f"unknown dtype {t['dtype']!r}")
                if t["shape"] is None:
                    if not t.get("lazy"):
                        yield DumpInvalid(f"{at}/shape", "shape is null but the tensor is not lazy")
                    elif t["numel"] != 0:
                        yield DumpInvalid(f"{at}/numel", f"a lazy tensor has no size yet, but numel is {t['numel']}")
                elif t["numel"] != _product(t["shape"]):
                    yield DumpInvalid(
                        f"{at}/numel", f"numel {t['numel']} is not the product of shape {t['shape']}"
                    )
                if t.get("expert_axis") is not None and (t["shape"] is None or len(t["shape"]) < 3):
                    yield DumpInvalid(f"{at}/expert_axis", "expert_axis on a tensor that is not expert-stacked")
                full = f"{name}.{t['name']}" if name else t["name"]
                tied = t.get("tied_to")
                if tied is not None:
                    first = tensors.get(tied)
                    if first is None:
                        yield DumpInvalid(f"{at}/tied_to", f"tied_to {tied!r} names no tensor listed before it")
                    elif first[0] != kind:
                        yield DumpInvalid(f"{at}/tied_to", f"a {kind[:-1]} tied to a {first[0][:-1]}")
                    elif (first[1], first[2]) != (t["shape"], t["dtype"]):
                        yield DumpInvalid(f"{at}/tied_to", f"tied to {tied!r} of another shape or dtype")
                tensors[full] = (kind, t["shape"], t["dtype"])
                st = t.get("stats")
                if st is not None:
                    yield from _stats_errors(st, t, f"{at}/stats")
    trace = doc.get("trace")
    if trace is not None:
        traced: set[str] = set()
        for k, tm in enumerate(trace["modules"]):
            if tm["name"] not in index:
                yield DumpInvalid(f"/trace/modules/{k}/name", f"traced module {tm['name']!r} is not in the tree")
            if tm["name"] in traced:
                yield DumpInvalid(f"/trace/modules/{k}/name", f"module {tm['name']!r} is traced twice")
            traced.add(tm["name"])
            if tm["flops"] > trace["total_flops"] or (tm["name"] == "" and tm["flops"] != trace["total_flops"]):
                yield DumpInvalid("/trace/total_flops", "total_flops is inconsistent with the traced modules")
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
    if t["numel"] > 0 and st["nonfinite"] == t["numel"]:
        yield DumpInvalid(f"{at}/nonfinite", "every value is non-finite, yet mean, min and max are finite numbers")
    h = st["hist"]
    if h["lo"] > h["hi"]:
        yield DumpInvalid(f"{at}/hist/lo", "histogram lo is above hi")
    elif h["lo"] < st["min"] or h["hi"] > st["max"]:
        yield DumpInvalid(f"{at}/hist", "histogram range reaches outside [min, max]")
    if st["std"] is None and t["numel"] - st["nonfinite"] > 1:
        yield DumpInvalid(f"{at}/std", "std is null for more than one finite value")
    elif st["std"] is not None and st["std"] > st["max"] - st["min"] + 1e-12 * max(1.0, abs(st["max"])):
        yield DumpInvalid(f"{at}/std", "std is impossible for values in [min, max]")
    finite = t["numel"] - st["nonfinite"]
    if finite < 0:
        yield DumpInvalid(f"{at}/nonfinite", f"nonfinite {st['nonfinite']} exceeds numel {t['numel']}")
    elif sum(st["hist"]["counts"]) != finite:
        yield DumpInvalid(
            f"{at}/hist/counts", f"histogram counts sum to {sum(st['hist']['counts'])}, expected {finite}"
        )
    if len(st.get("sketch") or []) > t["numel"]:
        yield DumpInvalid(f"{at}/sketch", "the sketch has more buckets than the tensor has elements")


def validate(doc: Any, schema_path: str = SCHEMA_PATH) -> None:
    """Raise DumpInvalid for the first problem: schema first, then semantics."""
    errs = schema_errors(doc, schema_path)
    if errs:
        raise errs[0]
    for e in semantic_errors(doc):
        raise e
