"""Build Hugging Face models from a config.json alone: no weights, no network."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

import torch
from torch import nn

from .errors import ExportError


def _transformers():
    try:
        import transformers  # noqa: PLC0415 - optional dependency
    except ImportError as e:
        raise ExportError("Hugging Face configs need transformers: pip install transformers (or, in a clone of mrep, pip install './exporter[hf]')") from e
    return transformers


def parse_override(text: str) -> tuple[str, Any]:
    """`key=value` with value read as JSON when it parses (2, 0.5, true, null, [1,2]) else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ExportError(f"override {text!r}: expected KEY=VALUE")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def apply_overrides(cfg: dict, overrides: Iterable[str]) -> dict:
    """Apply overrides to a raw config dict. Dotted keys reach nested dicts (text_config.hidden_size);
    a plain key that only the nested text_config has goes there, so shrinking a multimodal model works."""
    cfg = json.loads(json.dumps(cfg))
    for text in overrides:
        key, value = parse_override(text)
        target = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(target.get(p), dict):
                raise ExportError(f"override {text!r}: config has no object {p!r}")
            target = target[p]
        leaf = parts[-1]
        if len(parts) == 1 and leaf not in cfg and isinstance(cfg.get("text_config"), dict):
            target = cfg["text_config"]
        target[leaf] = value
    return cfg


def read_config_json(path: str | os.PathLike) -> dict:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ExportError(f"cannot read config {path}: {e.strerror or e}") from e
    try:
        cfg = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ExportError(f"config {path}: not valid JSON: {e}") from e
    if not isinstance(cfg, dict):
        raise ExportError(f"config {path}: expected a JSON object at the top level, got {type(cfg).__name__}")
    # Hub files written before transformers 5 say torch_dtype; v5 reads it but warns on every load.
    for c in (cfg, cfg.get("text_config")):
        if isinstance(c, dict) and "torch_dtype" in c:
            c.setdefault("dtype", c.pop("torch_dtype"))
    return cfg


def load_hf_config(path: str | os.PathLike, overrides: Iterable[str] = ()):
    """Read a config.json into its transformers config class, with clear errors for bad files."""
    transformers = _transformers()
    path = os.fspath(path)
    raw = apply_overrides(read_config_json(path), overrides)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ExportError(f"config {path}: /model_type is missing; transformers needs it to pick a model class")
    try:
        config_class = transformers.CONFIG_MAPPING[model_type]
    except KeyError:
        raise ExportError(
            f"config {path}: /model_type {model_type!r} is not known to transformers {transformers.__version__}"
        ) from None
    try:
        return config_class.from_dict(raw)
    except Exception as e:  # transformers raises many types for inconsistent configs
        raise ExportError(f"config {path}: transformers rejected it: {e}") from e


def config_dtype(config) -> torch.dtype:
    """The dtype the checkpoint is published in (config dtype/torch_dtype), float32 when unstated."""
    for attr in ("dtype", "torch_dtype"):
        v = getattr(config, attr, None)
        if isinstance(v, torch.dtype):
            return v
        if isinstance(v, str) and v not in ("", "auto"):
            dt = getattr(torch, v.removeprefix("torch."), None)
            if isinstance(dt, torch.dtype):
                return dt
    return torch.float32


def build_hf_model(
    config,
    *,
    device: str = "meta",
    dtype: torch.dtype | None = None,
    attn_implementation: str | None = None,
    experts_implementation: str | None = None,
) -> nn.Module:
    """Instantiate the model class for `config` (causal LM when there is one, else the base model).

    On the meta device nothing is allocated, so DeepSeek-V3 takes well under a second.
    """
    transformers = _transformers()
    kwargs: dict[str, Any] = {"dtype": dtype or config_dtype(config)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if experts_implementation:
        kwargs["experts_implementation"] = experts_implementation
    last: Exception | None = None
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
        try:
            with torch.device(device):
                return auto.from_config(config, **kwargs)
        except ValueError as e:  # this auto class has no mapping for the config
            last = e
            continue
        except Exception as e:
            raise ExportError(f"building {type(config).__name__} failed: {type(e).__name__}: {e}") from e
    raise ExportError(f"no model class in transformers for {type(config).__name__}: {last}")
