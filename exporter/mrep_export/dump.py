"""Walk an nn.Module into an mrep dump (schemas/dump.schema.json) and write it atomically."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gzip
import hashlib
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import torch
from torch import nn

from . import __version__
from .errors import ExportError

SCHEMA_VERSION = 2  # 2: stats carry the Frobenius norm and a CountSketch (drift without the weights)
HIST_BINS = 32

_EXPERTS_CLASS = re.compile(r"expert", re.IGNORECASE)


@dataclass(frozen=True)
class TensorRow:
    """One parameter as the summary lists it (the seed's LayerInfo)."""

    name: str
    shape: tuple[int, ...] | None
    numel: int
    dtype: str
    bytes: int
    requires_grad: bool
    tied_to: str | None = None
    stats: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class DumpSummary:
    """What dump_model returns, so a script can assert on a model without Go."""

    name: str
    total_params: int
    trainable_params: int
    frozen_params: int
    total_bytes: int
    bytes_by_dtype: Mapping[str, int]
    num_modules: int
    tensors: list[TensorRow]
    content_hash: str
    has_stats: bool
    path: str | None = None
    lazy_params: int = 0

    @property
    def non_trainable_params(self) -> int:
        return self.frozen_params

    @property
    def total_memory_mb(self) -> float:
        return self.total_bytes / 2**20

    def largest(self, n: int = 1) -> list[TensorRow]:
        rows = [t for t in self.tensors if t.tied_to is None]
        return sorted(rows, key=lambda t: t.numel, reverse=True)[:n]


@dataclass
class _Walk:
    modules: list[dict] = field(default_factory=list)
    rows: list[TensorRow] = field(default_factory=list)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


def tensor_stats(t: torch.Tensor, bins: int = HIST_BINS) -> dict | None:
    """Mean, std, min, max and a fixed-bin histogram (equal-width bins over [min, max], the top
    edge in the last bin, as torch.histc bins) over the finite values, computed by torch
    in float32 exactly as `t.float().mean()` etc. would; None when there is nothing to measure."""
    if t.device.type == "meta" or t.is_complex() or t.numel() == 0:
        return None
    f = t.detach().float().reshape(-1)
    finite = torch.isfinite(f)
    n_finite = int(finite.sum())
    nonfinite = f.numel() - n_finite
    if nonfinite:
        f = f[finite]
    if n_finite == 0:
        return None
    lo, hi = float(f.min()), float(f.max())
    if lo == hi:
        counts = [n_finite] + [0] * (bins - 1)
    else:
        # bincount, not histc: histc counts in float32 and loses exactness past 2**24 per bin.
        idx = ((f - lo) * (bins / (hi - lo))).floor_().clamp_(0, bins - 1).long()
        counts = torch.bincount(idx, minlength=bins).tolist()
    std = float(f.std()) if n_finite >= 2 else None
    norm, sketch = norm_and_sketch(t)
    return {
        "mean": float(f.mean()),
        "std": std,
        "min": lo,
        "max": hi,
        "nonfinite": nonfinite,
        "hist": {"lo": lo, "hi": hi, "counts": counts},
        "norm": norm,
        "sketch": sketch,
    }


# CountSketch of a tensor: element i (flattened, row-major) is added with sign s(i) to bucket
# b(i). A sketch is linear, so sketch(B) - sketch(A) = sketch(B - A), and the squared norm of a
# CountSketch is an unbiased estimate of the squared norm of what it sketches (relative error
# about 1/sqrt(2K) on the norm for K buckets; Charikar, Chen, Farach-Colton 2002). mrep thus
# estimates ||W_b - W_a|| / ||W_a|| between any two checkpoints without their weights.
#
# b and s must be the same for every dump ever written (changing anything here breaks drift
# between dumps of two exporter versions). The tensor is cut into chunks of C elements and
# each chunk into rows of K; element i = c * C + r * K + k goes to bucket
#     b(i) = (k + g(r) + g'(c)) mod K   with sign   s(i) = s0(r * K + k) * t(c),
# where g, g', s0, t are bits of murmur3's 32-bit finaliser (fmix32) of the index xor a seed.
# Two elements of one row never share a bucket; two of different rows or chunks do with
# probability 1/K; signs are pseudo-random per element. Applying it is a row-wise gather and
# a column sum per chunk, cache-friendly: about 5 ms per 10^6 elements on a CPU core.
# A tensor of at most K elements is its own sketch: its drift is exact.
SKETCH_BUCKETS = 1024  # a power of two dividing the chunk
_SKETCH_CHUNK = 1 << 20
_SEED_ROW, _SEED_SIGN, _SEED_CHUNK, _SEED_CHUNK_SIGN = 0x9E3779B9, 0x7F4A7C15, 0x85EBCA77, 0xC2B2AE3D
_layouts: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


def _mul32(x, c: int):
    """x * c mod 2^32 without overflowing int64 (x < 2^32): in 16-bit halves of c."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & 0xFFFFFFFF


def _fmix32(x):
    """murmur3's finaliser: a bijection on 32-bit values that mixes every input bit."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x85EBCA6B)
    x = x ^ (x >> 13)
    x = _mul32(x, 0xC2B2AE35)
    return x ^ (x >> 16)


def _layout(buckets: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk of C elements viewed as rows of K: the gather index that moves column k of row r
    to bucket (k + g(r)) mod K, and the signs s0, on the device whose tensors they sketch
    (computed on the CPU, so every device sketches with the same b and s)."""
    key = (buckets, torch.device(device))
    if key not in _layouts:
        if (buckets, torch.device("cpu")) not in _layouts:
            rows = _SKETCH_CHUNK // buckets
            g = _fmix32(torch.arange(rows, dtype=torch.int64) ^ _SEED_ROW) % buckets
            cols = torch.arange(buckets, dtype=torch.int64)
            index = (cols[None, :] - g[:, None]) % buckets  # out[r, b] = in[r, (b - g(r)) mod K]
            j = torch.arange(_SKETCH_CHUNK, dtype=torch.int64)
            signs = ((_fmix32(j ^ _SEED_SIGN) & 1) * 2 - 1).to(torch.float64)
            _layouts[(buckets, torch.device("cpu"))] = (index, signs)
        index, signs = _layouts[(buckets, torch.device("cpu"))]
        _layouts[key] = (index.to(device), signs.to(device))
    return _layouts[key]


def norm_and_sketch(t: torch.Tensor, buckets: int = SKETCH_BUCKETS) -> tuple[float, list[float]]:
    """The Frobenius norm of the finite values (float64) and the CountSketch of the tensor with
    non-finite values as zero, rounded to float32 (the weights' own precision at most)."""
    if buckets <= 0 or buckets & (buckets - 1) or _SKETCH_CHUNK % buckets:
        raise ExportError(f"sketch buckets must be a power of two up to {_SKETCH_CHUNK}, got {buckets}")
    flat = t.detach().reshape(-1)
    n = flat.numel()
    if n <= buckets:
        f = torch.nan_to_num(flat.to(torch.float64), nan=0.0, posinf=0.0, neginf=0.0)
        return float(torch.linalg.vector_norm(f)), [float(x) for x in f.to(torch.float32).tolist()]
    # on the tensor's own device: a model trained on a GPU is dumped where its weights are
    # (the chunks' squares are summed there too, so a GPU waits once per tensor, not per chunk)
    dev = flat.device
    index, signs = _layout(buckets, dev)
    sk = torch.zeros(buckets, dtype=torch.float64, device=dev)
    sq = torch.zeros((), dtype=torch.float64, device=dev)
    for c, start in enumerate(range(0, n, _SKETCH_CHUNK)):
        f = torch.nan_to_num(flat[start : start + _SKETCH_CHUNK].to(torch.float64), nan=0.0, posinf=0.0, neginf=0.0)
        m = f.numel()
        sq += f.dot(f)
        f.mul_(signs[:m])
        rows = -(-m // buckets)
        if m < rows * buckets:  # the last chunk's last row: the missing elements are zeros
            f = torch.cat([f, torch.zeros(rows * buckets - m, dtype=torch.float64, device=dev)])
        u = torch.gather(f.view(rows, buckets), 1, index[:rows]).sum(0)
        u = torch.roll(u, _fmix32(c ^ _SEED_CHUNK) % buckets)
        sk += u if _fmix32(c ^ _SEED_CHUNK_SIGN) & 1 else -u
    return math.sqrt(float(sq)), [float(x) for x in sk.to(torch.float32).tolist()]


class _Progress:
    """A progress line on stderr while statistics are computed, only when stderr is a terminal
    (logs and CI output stay clean): "mrep_export: statistics 120/291 tensors (41%)"."""

    def __init__(self, total: int, stream: Any = None, every_s: float = 0.5) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.on = total > 0 and bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.every_s, self.done, self.shown = total, every_s, 0, 0.0

    def step(self) -> None:
        self.done += 1
        if self.on and (time.monotonic() - self.shown >= self.every_s or self.done == self.total):
            self.shown = time.monotonic()
            self.stream.write(f"\rmrep_export: statistics {self.done}/{self.total} tensors ({100 * self.done // self.total}%)")
            if self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()


def _walk(model: nn.Module, want_stats: bool, progress_stream: Any = None) -> _Walk:
    w = _Walk()
    first_seen: dict[int, str] = {}
    real = [p for p in model.parameters() if p.device.type != "meta"] if want_stats else []
    progress = _Progress(len(real), progress_stream)
    # remove_duplicate=False: a module reachable under two names appears under both, and its
    # tensors under the second name are recorded as tied to the first.
    for qname, mod in model.named_modules(remove_duplicate=False):
        parent = None if qname == "" else qname.rpartition(".")[0]
        experts_like = bool(_EXPERTS_CLASS.search(type(mod).__name__))
        params = []
        for pname, p in mod._parameters.items():
            if p is None:
                continue
            full = f"{qname}.{pname}" if qname else pname
            lazy = isinstance(p, nn.parameter.UninitializedParameter)
            shape = None if lazy else [int(d) for d in p.shape]
            numel = 0 if lazy else int(p.numel())
            entry: dict[str, Any] = {
                "name": pname,
                "shape": shape,
                "dtype": dtype_name(p.dtype),
                "numel": numel,
                "device": p.device.type,
                "requires_grad": bool(p.requires_grad),
            }
            if lazy:
                entry["lazy"] = True
            if experts_like and shape is not None and len(shape) >= 3:
                entry["expert_axis"] = 0
            tied = first_seen.get(id(p))
            stats = None
            if tied is not None:
                entry["tied_to"] = tied
            else:
                first_seen[id(p)] = full
                if want_stats and not lazy:
                    stats = tensor_stats(p)
                    if stats is not None:
                        entry["stats"] = stats
                    if p.device.type != "meta":
                        progress.step()
            params.append(entry)
            w.rows.append(
                TensorRow(
                    name=full,
                    shape=None if shape is None else tuple(shape),
                    numel=numel,
                    dtype=entry["dtype"],
                    bytes=numel * _element_size(p.dtype),
                    requires_grad=entry["requires_grad"],
                    tied_to=tied,
                    stats=stats,
                )
            )
        buffers = []
        for bname, b in mod._buffers.items():
            if b is None:
                continue
            full = f"{qname}.{bname}" if qname else bname
            entry = {
                "name": bname,
                "shape": [int(d) for d in b.shape],
                "dtype": dtype_name(b.dtype),
                "numel": int(b.numel()),
                "device": b.device.type,
                "persistent": bname not in mod._non_persistent_buffers_set,
            }
            tied = first_seen.get(id(b))
            if tied is not None:
                entry["tied_to"] = tied
            else:
                first_seen[id(b)] = full
            buffers.append(entry)
        w.modules.append(
            {
                "name": qname,
                "class": type(mod).__name__,
                "py_module": type(mod).__module__,
                "parent": parent,
                "params": params,
                "buffers": buffers,
            }
        )
    return w


def jsonable(obj: Any) -> Any:
    """Make a config value JSON-safe: dtypes and odd objects become strings, non-finite floats null."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, torch.dtype):
        return dtype_name(obj)
    return str(obj)


def config_dict(config: Any) -> dict | None:
    """The model config as a JSON-safe dict, from whatever a codebase keeps it in: a dict or any
    mapping (Lightning's hparams), an HF config (to_dict), a dataclass (nanoGPT's GPTConfig), a
    namespace (argparse, SimpleNamespace), an OmegaConf/dict-like object, or a plain object's
    public attributes."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return jsonable(config)
    if hasattr(config, "to_dict") and callable(config.to_dict):
        return jsonable(config.to_dict())
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return jsonable({f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
    if hasattr(config, "keys") and hasattr(config, "__getitem__"):
        try:
            return jsonable({str(k): config[k] for k in config.keys()})
        except (TypeError, KeyError) as e:
            raise ExportError(f"config {type(config).__name__} looks like a mapping but cannot be read as one: {e}") from e
    attrs = getattr(config, "__dict__", None)
    if isinstance(attrs, dict):
        return jsonable({k: v for k, v in attrs.items() if not k.startswith("_") and not callable(v)})
    raise ExportError(
        f"config must be a mapping, a dataclass, a namespace or an object with attributes, got "
        f"{type(config).__name__}; pass config={{...}} with the architecture keys (num_attention_heads, ...)"
    )


# Wrappers that hold the user's model under another name: torch.compile keeps it in _orig_mod,
# DistributedDataParallel and DataParallel in module. Their prefixes ("_orig_mod.", "module.")
# would otherwise make a checkpoint of a compiled model a different model from the plain one.
_WRAPPERS = {
    "OptimizedModule": "_orig_mod",
    "DistributedDataParallel": "module",
    "DataParallel": "module",
}


def unwrap(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """The model inside torch.compile / DDP / DataParallel wrappers (nested in any order), and
    the wrappers' class names, outermost first. FSDP (v1) flattens parameters: it is refused
    with the way out, since names and full shapes exist only inside summon_full_params."""
    seen: list[str] = []
    while True:
        cls = type(model).__name__
        attr = _WRAPPERS.get(cls)
        if cls == "FullyShardedDataParallel":
            raise ExportError(
                "model is wrapped in FSDP, whose parameters are flat shards: dump the inner module with "
                "full shapes, e.g. `with FSDP.summon_full_params(model): dump_model(model.module, path)`, "
                "or use FSDP2 (fully_shard), whose parameters keep their names and global shapes"
            )
        inner = getattr(model, attr, None) if attr else None
        if not isinstance(inner, nn.Module):
            return model, seen
        seen.append(cls)
        model = inner


def canonical_json(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def content_hash(doc: Mapping[str, Any]) -> str:
    """sha256 of the canonical dump without run.created_at and run.content_hash."""
    run = {k: v for k, v in doc["run"].items() if k not in ("created_at", "content_hash")}
    body = dict(doc, run=run)
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def _created_at(created_at: _dt.datetime | str | None) -> str:
    if isinstance(created_at, str):
        return created_at
    if created_at is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        created_at = (
            _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc)
            if epoch
            else _dt.datetime.now(_dt.timezone.utc)
        )
    return created_at.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _framework() -> dict:
    try:
        import transformers  # noqa: PLC0415 - optional dependency

        tv = transformers.__version__
    except ImportError:
        tv = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": tv,
        "mrep_export": __version__,
    }


def _default_name(model: nn.Module, config: Any) -> str:
    """The model's name: the config's name_or_path (last part), else its model_type, else the
    class (a run of nanoGPT's GPT is named GPT; an HF model by its checkpoint)."""
    if config is not None:
        for attr in ("name_or_path", "_name_or_path", "model_type"):
            v = config.get(attr) if isinstance(config, Mapping) else getattr(config, attr, None)
            if isinstance(v, str) and v.strip("/ "):
                return v.rstrip("/").rsplit("/", 1)[-1]
    return type(model).__name__


def build_dump(
    model: nn.Module,
    *,
    config: Any = None,
    name: str | None = None,
    label: str | None = None,
    step: int | None = None,
    tags: Iterable[str] = (),
    stats: bool | str = "auto",
    source: Mapping[str, Any] | None = None,
    trace: Mapping[str, Any] | None = None,
    created_at: _dt.datetime | str | None = None,
    measurement: Mapping[str, Any] | None = None,
) -> tuple[dict, DumpSummary]:
    """Build the dump document and its summary without writing anything."""
    if not isinstance(model, nn.Module):
        raise ExportError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    model, _ = unwrap(model)  # a compiled or DDP model is the same model: the same dump
    if config is None:
        config = getattr(model, "config", None)
    if stats not in ("auto", True, False):
        raise ExportError(f"stats must be 'auto', True or False, got {stats!r}")
    if step is not None and (not isinstance(step, int) or step < 0):
        raise ExportError(f"step must be a non-negative integer, got {step!r}")
    # 'auto' and True both measure whatever has real values; meta and lazy tensors have none.
    w = _walk(model, want_stats=stats is not False)
    if not w.rows:
        raise ExportError(f"model {type(model).__name__} has no parameters: nothing to dump")

    cfg = config_dict(config)
    model_info: dict[str, Any] = {
        "name": name or _default_name(model, config),
        "root_class": f"{type(model).__module__}.{type(model).__qualname__}",
        "source": dict(source) if source else {"kind": "module"},
    }

    if cfg is not None:
        if isinstance(cfg.get("model_type"), str) and "model_type" not in model_info["source"]:
            model_info["source"]["model_type"] = cfg["model_type"]
        if isinstance(cfg.get("text_config"), Mapping):
            model_info["text_config_key"] = "text_config"
    first = next(iter(model.parameters()), None)
    if first is not None:
        model_info["dtype"] = dtype_name(first.dtype)

    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": model_info,
        "config": cfg,
        "framework": _framework(),
        "run": {
            "label": label,
            "step": step,
            "tags": sorted(set(tags)),
            "created_at": _created_at(created_at),
            "content_hash": "",
        },
        "modules": w.modules,
    }
    if trace is not None:
        doc["trace"] = dict(trace)
    if measurement is not None:
        doc["measurement"] = dict(measurement)
    doc["run"]["content_hash"] = content_hash(doc)

    unique = [r for r in w.rows if r.tied_to is None]
    by_dtype: dict[str, int] = {}
    for r in unique:
        by_dtype[r.dtype] = by_dtype.get(r.dtype, 0) + r.bytes
    trainable = sum(r.numel for r in unique if r.requires_grad)
    total = sum(r.numel for r in unique)
    summary = DumpSummary(
        name=model_info["name"],
        total_params=total,
        trainable_params=trainable,
        frozen_params=total - trainable,
        total_bytes=sum(by_dtype.values()),
        bytes_by_dtype=by_dtype,
        num_modules=len(w.modules),
        tensors=w.rows,
        content_hash=doc["run"]["content_hash"],
        has_stats=any(r.stats is not None for r in unique),
        lazy_params=sum(1 for r in unique if r.shape is None),
    )
    return doc, summary


def write_json_atomic(doc: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Write doc to path via a temp file in the same directory and a rename, so a reader never
    sees half a dump. `.gz` paths are gzipped with a zero mtime so equal dumps are equal bytes."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ExportError(f"cannot write dump to {path}: directory {directory} does not exist")
    gz = path.endswith(".gz")
    if gz:
        # keys sorted: the compact form is then canonical as written, and mrep hashes module
        # items as they stand instead of rebuilding them (about a third of a large ingest)
        data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    else:
        data = (json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    except OSError as e:
        raise ExportError(f"cannot write dump to {path}: {e.strerror or e}") from e
    try:
        # mkstemp creates 0600; a dump is no secret, so give it the mode open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as raw:
            if gz:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as zf:
                    zf.write(data)
            else:
                raw.write(data)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ExportError(f"cannot write dump to {path}: {e.strerror or e}") from e


def dump_model(
    model: nn.Module,
    path: str | os.PathLike,
    *,
    config: Any = None,
    name: str | None = None,
    label: str | None = None,
    step: int | None = None,
    tags: Iterable[str] = (),
    stats: bool | str = "auto",
    trace: tuple[int, int] | None = None,
    trace_inputs: Any = None,
    source: Mapping[str, Any] | None = None,
    created_at: _dt.datetime | str | None = None,
    measurement: Mapping[str, Any] | None = None,
) -> DumpSummary:
    """Dump any nn.Module to `path` (`.json` or `.json.gz`) and return its summary.

    Meta-device models work (no statistics); tied tensors are recorded once and referenced after;
    `trace=(batch, seq)` runs one real forward under FlopCounterMode and records FLOPs per module.
    """
    model, _ = unwrap(model)
    traced = None
    if trace is not None:
        from .trace import trace_flops  # noqa: PLC0415 - only needed when tracing

        traced = trace_flops(model, trace[0], trace[1], inputs=trace_inputs)
    doc, summary = build_dump(
        model,
        config=config,
        name=name,
        label=label,
        step=step,
        tags=tags,
        stats=stats,
        source=source,
        trace=traced,
        created_at=created_at,
        measurement=measurement,
    )
    write_json_atomic(doc, path)
    return DumpSummary(**{**summary.__dict__, "path": os.fspath(path)})
