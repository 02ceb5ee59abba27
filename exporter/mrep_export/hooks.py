"""Dump at checkpoints during training, with real weight statistics, so runs can be compared."""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from torch import nn

from .dump import DumpSummary, dump_model

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def checkpoint_path(out_dir: str | os.PathLike, name: str, step: int, gz: bool = True) -> str:
    """`<out_dir>/<name>-step<step, 8 digits>.json[.gz]`: sorts by step, safe on any file system."""
    safe = _UNSAFE.sub("_", name).strip("_") or "model"
    return os.path.join(os.fspath(out_dir), f"{safe}-step{step:08d}.json" + (".gz" if gz else ""))


class CheckpointDumper:
    """For custom loops: `dumper.maybe_dump(step)` every step, or `dumper.dump(step)` at a checkpoint.

    >>> dumper = CheckpointDumper(model, "dumps", label="lr3e-4", every=100)
    >>> for step in range(steps):
    ...     train_step()
    ...     dumper.maybe_dump(step)
    """

    def __init__(
        self,
        model: nn.Module,
        out_dir: str | os.PathLike,
        *,
        label: str | None = None,
        name: str | None = None,
        config: Any = None,
        every: int | None = None,
        tags: Iterable[str] = (),
        gz: bool = True,
    ) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.model = model
        self.out_dir = os.fspath(out_dir)
        self.label = label
        self.name = name
        self.config = config
        self.every = every
        self.tags = tuple(tags)
        self.gz = gz
        self.written: list[DumpSummary] = []

    def dump(self, step: int, model: nn.Module | None = None) -> DumpSummary:
        model = model if model is not None else self.model
        os.makedirs(self.out_dir, exist_ok=True)
        name = self.name or type(model).__name__
        path = checkpoint_path(self.out_dir, self.label or name, step, self.gz)
        summary = dump_model(
            model,
            path,
            config=self.config,
            name=self.name,
            label=self.label,
            step=step,
            tags=self.tags,
            stats=True,
            source={"kind": "checkpoint", "path": os.path.basename(path)},  # no machine paths in the hash
        )
        self.written.append(summary)
        return summary

    def maybe_dump(self, step: int) -> DumpSummary | None:
        if self.every is None or step % self.every != 0:
            return None
        return self.dump(step)


def trainer_callback(out_dir: str | os.PathLike | None = None, **kwargs: Any):
    """A transformers TrainerCallback that dumps on every checkpoint save (on_save).

    Dumps go to `out_dir`, or `<args.output_dir>/mrep` when None. Keyword arguments go to
    CheckpointDumper (label, name, tags, gz).
    """
    from transformers import TrainerCallback  # noqa: PLC0415 - optional dependency

    class MrepTrainerCallback(TrainerCallback):
        def __init__(self) -> None:
            self.dumper: CheckpointDumper | None = None

        def on_save(self, args, state, control, model=None, **_: Any):
            if model is None:
                return control
            if self.dumper is None:
                target = out_dir if out_dir is not None else os.path.join(args.output_dir, "mrep")
                self.dumper = CheckpointDumper(model, target, **kwargs)
            self.dumper.dump(int(state.global_step), model=model)
            return control

    return MrepTrainerCallback()
