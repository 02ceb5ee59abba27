"""FLOPs per module from one real forward, counted by PyTorch's own FlopCounterMode.

This is the reference the Go analyzer is checked against, so it records exactly what
FlopCounterMode counts (full S x S attention GEMMs, no softmax) and nothing of ours.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .errors import ExportError


def _vocab_size(model: nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    if cfg is None:
        return None
    if hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    v = getattr(cfg, "vocab_size", None)
    return int(v) if v else None


def trace_flops(model: nn.Module, batch: int, seq: int, inputs: Any = None) -> dict:
    """Run model once on (batch, seq) token ids (or `inputs`) and return the dump's `trace` object."""
    if batch < 1 or seq < 1:
        raise ExportError(f"trace needs batch >= 1 and seq >= 1, got {batch},{seq}")
    first = next(iter(model.parameters()), None)
    if first is None:
        raise ExportError(f"model {type(model).__name__} has no parameters: nothing to trace")
    if first.device.type == "meta":
        raise ExportError(
            "trace needs real weights but the model is on the meta device; build it on cpu "
            "(python -m mrep_export --trace does this for Hugging Face configs)"
        )
    device = first.device
    call_kwargs: dict[str, Any] = {}
    if callable(inputs) and not isinstance(inputs, torch.Tensor):
        inputs = inputs(batch, seq)  # a builder: inputs for this batch and sequence length
    positional_ids = False
    if inputs is None:
        vocab = _vocab_size(model)
        if vocab is None:
            raise ExportError(
                f"cannot make inputs for {type(model).__name__}: pass trace_inputs= "
                "(a tensor, a tuple of tensors, a dict of keyword tensors, or a callable (batch, seq) -> those)"
            )
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
        params = inspect.signature(model.forward).parameters
        takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        call_args: tuple = ()
        if "input_ids" in params or takes_kwargs:
            call_kwargs = {"input_ids": ids}
            if getattr(model, "config", None) is not None and hasattr(model.config, "to_dict"):
                call_kwargs["use_cache"] = False
        else:
            # a forward(idx) of one's own code (nanoGPT): the token ids go first, by position
            call_args, positional_ids = (ids,), True
    elif isinstance(inputs, dict):
        call_args = ()
        call_kwargs = dict(inputs)
    elif isinstance(inputs, tuple):
        call_args = inputs
    else:
        call_args = (inputs,)

    was_training = model.training
    model.eval()
    counter = FlopCounterMode(display=False)
    try:
        with torch.no_grad(), counter:
            model(*call_args, **call_kwargs)
    except (TypeError, RuntimeError, ValueError, IndexError) as e:
        if inputs is not None:
            raise ExportError(f"tracing {type(model).__name__} with the given trace_inputs failed: {e}") from e
        how = "as its first argument" if positional_ids else "as input_ids="
        raise ExportError(
            f"tracing {type(model).__name__} with token ids of shape ({batch}, {seq}) {how} failed: {e}. "
            "Pass trace_inputs= what its forward takes: a tensor, a tuple of tensors, a dict of keyword "
            "tensors, or a callable (batch, seq) -> those"
        ) from e
    finally:
        model.train(was_training)

    root = type(model).__name__
    modules = []
    for key, ops in counter.get_flop_counts().items():
        if key == "Global":
            continue
        if key == root:
            name = ""
        elif key.startswith(root + "."):
            name = key[len(root) + 1 :]
        else:
            continue
        by_op = {str(op): int(n) for op, n in ops.items() if n}
        modules.append({"name": name, "flops": sum(by_op.values()), "ops": dict(sorted(by_op.items()))})
    modules.sort(key=lambda m: m["name"])
    cfg = getattr(model, "config", None)
    return {
        "batch": batch,
        "seq": seq,
        "device": device.type,
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "experts_implementation": getattr(cfg, "_experts_implementation", None),
        "total_flops": int(counter.get_total_flops()),
        "modules": modules,
    }
