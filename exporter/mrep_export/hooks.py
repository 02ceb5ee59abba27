"""Dump at checkpoints during training, with real weight statistics and the measured step time,
so runs can be compared with each other and with mrep's prediction."""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import time
import warnings
from typing import Any, Callable, Iterable

import torch
from torch import nn

from .dump import DumpSummary, dump_model
from .errors import ExportError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

_PRECISION = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


def checkpoint_path(out_dir: str | os.PathLike, name: str, step: int, gz: bool = True) -> str:
    """`<out_dir>/<name>-step<step, 8 digits>.json[.gz]`: sorts by step, safe on any file system."""
    safe = _UNSAFE.sub("_", name).strip("_") or "model"
    return os.path.join(os.fspath(out_dir), f"{safe}-step{step:08d}.json" + (".gz" if gz else ""))


def _dist() -> tuple[int, int]:
    """(global rank, world size) under torch.distributed, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _device_name(model: nn.Module) -> str:
    p = next(iter(model.parameters()), None)
    if p is not None and p.device.type == "cuda":
        return torch.cuda.get_device_name(p.device)
    return p.device.type if p is not None else "cpu"


def _precision(model: nn.Module) -> str:
    p = next(iter(model.parameters()), None)
    return _PRECISION.get(p.dtype, str(p.dtype).removeprefix("torch.")) if p is not None else "fp32"


class CheckpointDumper:
    """For custom loops: `dumper.maybe_dump(step, tokens=n)` after every optimizer step, or
    `dumper.dump(step)` at a checkpoint.

    >>> dumper = CheckpointDumper(model, "dumps", label="lr3e-4", every=100)
    >>> dumper.maybe_dump(0)            # the model as initialised
    >>> for step in range(1, steps + 1):
    ...     train_step()
    ...     dumper.maybe_dump(step, tokens=batch["input_ids"].numel())

    Each dump after the first carries a measurement: the median wall time between consecutive
    calls since the previous dump (one optimizer step each), tokens per step on all ranks
    together (`tokens` is this rank's; data parallel is assumed), the world size, the device
    and the precision (`precision=`, else the parameters' dtype; say "bf16" under autocast).
    The median discards the odd step (an evaluation, a checkpoint save). A model on a CUDA GPU
    is timed on the GPU's own clock: a CUDA event recorded at each step's end, resolved without
    waiting as the GPU passes it, and a dump waits once for the GPU to reach the last one. The
    host's clock would time the launches, not the steps: early in training nothing makes the
    host wait, and it issues tens of steps ahead (on an H100, the first 20 steps of a 9.7 ms step
    were issued 1.2 ms apart, so a dump every 10 steps read 8x too fast). Elsewhere, or with an
    injected `clock`, the host's clock times the steps. Under torch.distributed only global
    rank 0 writes; every rank may call it.

    `ingest_db=` hands each dump to `mrep ingest` as soon as it is written, so measured step
    times reach a history (a team's PostgreSQL, `postgres://…`, or a SQLite file) without a
    manual step. The `mrep` binary (`mrep_bin=`, else found on PATH) runs in the background,
    so training does not wait for the database; the URL goes to it in the MREP_DB environment
    variable, never on a command line another user's `ps` could read. A missing binary or a
    failed ingest is a warning, never an error in the training loop: the dump stays on disk,
    and `mrep ingest DIR` later stores whatever is missing (a dump ingested twice is stored
    once). `wait_ingests()` waits for those started and returns their failures.
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
        precision: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
        ingest_db: str | None = None,
        mrep_bin: str | None = None,
    ) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.ingest_db = ingest_db
        self.mrep_bin = mrep_bin
        self._ingests: list[tuple[str, subprocess.Popen]] = []
        self.ingest_failures: list[str] = []
        self.dump_failures: list[str] = []
        self._warned_no_bin = False
        self.model = model
        self.out_dir = os.fspath(out_dir)
        self.label = label
        self.name = name
        self.config = config
        self.every = every
        self.tags = tuple(tags)
        self.gz = gz
        self.precision = precision
        self.clock = clock
        self.written: list[DumpSummary] = []
        self._last: float | None = None  # clock at the previous step's end
        self._times: list[float] = []  # step times since the previous dump
        self._device: torch.device | None = None  # the CUDA device whose events time the steps
        self._timed_on_gpu: bool | None = None  # decided at the first step
        # CUDA events at step ends not yet turned into step times; the first is the last
        # boundary already counted (the next step time starts there)
        self._pending: list[torch.cuda.Event] = []
        self._tokens: int | None = None
        self._seq: int | None = None

    def _on_gpu(self) -> bool:
        """Whether the steps are timed by CUDA events: the model is on a CUDA GPU and no clock
        was injected."""
        if self._timed_on_gpu is None:
            p = next(iter(self.model.parameters()), None)
            self._timed_on_gpu = self.clock is time.perf_counter and p is not None and p.device.type == "cuda"
            if self._timed_on_gpu:
                self._device = p.device
        return self._timed_on_gpu

    def _resolve(self, wait: bool) -> None:
        """Turn the step ends the GPU has passed into step times; with wait, all of them."""
        while len(self._pending) >= 2:
            start, end = self._pending[0], self._pending[1]
            if wait:
                end.synchronize()
            elif not end.query():
                return
            self._times.append(start.elapsed_time(end) / 1e3)
            self._pending.pop(0)

    def step_done(self, tokens: int | None = None, seq_len: int | None = None) -> None:
        """Record the end of one optimizer step (maybe_dump calls it)."""
        if self._on_gpu():
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(torch.cuda.current_stream(self._device))
            self._pending.append(ev)
            self._resolve(wait=False)
        else:
            now = self.clock()
            if self._last is not None:
                self._times.append(now - self._last)
            self._last = now
        if tokens is not None:
            if tokens < 1:
                raise ExportError(f"tokens must be a positive count of this rank's tokens in the step, got {tokens}")
            self._tokens = int(tokens)
        if seq_len is not None:
            self._seq = int(seq_len)

    def measurement(self, model: nn.Module | None = None) -> dict | None:
        """What was measured since the previous dump, or None before two steps were seen."""
        if self._pending:
            self._resolve(wait=True)
        if not self._times:
            return None
        model = model if model is not None else self.model
        _, world = _dist()
        return {
            "step_time_s": statistics.median(self._times),
            "steps_timed": len(self._times),
            "tokens_per_step": None if self._tokens is None else self._tokens * world,
            "seq_len": self._seq,
            "world_size": world,
            "device": _device_name(model)[:128],
            "precision": (self.precision or _precision(model))[:16],
        }

    def dump(self, step: int, model: nn.Module | None = None) -> DumpSummary | None:
        """Dump now (global rank 0 only; other ranks return None)."""
        model = model if model is not None else self.model
        rank, _ = _dist()
        measured = self.measurement(model)
        self._times = []
        if rank != 0:
            return None
        name = self.name or type(model).__name__
        path = checkpoint_path(self.out_dir, self.label or name, step, self.gz)
        try:
            os.makedirs(self.out_dir, exist_ok=True)
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
                measurement=measured,
            )
        except Exception as e:
            # a dump is a by-product of training: a directory that cannot be made, a full disk
            # or statistics that fail on a tensor (a device the exporter has not met) is a
            # warning, never the end of a training run
            why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
            msg = f"mrep dump at step {step} not written ({path}): {why}"
            self.dump_failures.append(msg)
            warnings.warn(msg + "; training goes on", stacklevel=2)
            try:
                os.remove(path)  # no partial dump left behind
            except OSError:
                pass
            return None
        self.written.append(summary)
        if self.ingest_db:
            self._ingest(path)
        return summary

    def _ingest(self, path: str) -> None:
        """Start `mrep ingest path` into ingest_db in the background."""
        self._reap(block=False)
        binary = self.mrep_bin or shutil.which("mrep")
        if binary is None:
            if not self._warned_no_bin:
                warnings.warn(f"mrep is not on PATH: dumps stay in {self.out_dir}; store them with `mrep ingest {self.out_dir}`", stacklevel=3)
                self._warned_no_bin = True
            return
        env = dict(os.environ, MREP_DB=self.ingest_db)
        try:
            # its own session: a timeout stops it and anything it started, not the training job
            proc = subprocess.Popen([binary, "ingest", path], env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=os.name == "posix")
        except OSError as e:
            self._fail(path, str(e))
            return
        self._ingests.append((path, proc))

    def _reap(self, block: bool) -> None:
        running = []
        for path, proc in self._ingests:
            if not block and proc.poll() is None:
                running.append((path, proc))
                continue
            _, err = proc.communicate()
            if proc.returncode != 0:
                self._fail(path, err.strip())
        self._ingests = running

    def _fail(self, path: str, why: str) -> None:
        msg = f"mrep ingest {path}: {why}"
        self.ingest_failures.append(msg)
        warnings.warn(msg + " (the dump stays on disk; `mrep ingest` it later)", stacklevel=4)

    def wait_ingests(self, timeout: float | None = 120.0) -> list[str]:
        """Wait for the background ingests, at most `timeout` seconds in all (None: as long as
        they take); returns every failure seen so far. An ingest still running then is stopped
        (its transaction stores nothing) and reported: its dump stays on disk for `mrep ingest`."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        finished = []
        for path, proc in self._ingests:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                proc.wait(timeout=left)
                finished.append((path, proc))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the ingest's whole session
                except (AttributeError, OSError):
                    proc.kill()
                proc.communicate()
                self._fail(path, f"still running after {timeout:g} s (a lock held on the history?): stopped")
        self._ingests = finished
        self._reap(block=True)
        return list(self.ingest_failures)

    def maybe_dump(self, step: int, tokens: int | None = None, seq_len: int | None = None) -> DumpSummary | None:
        """Call after every optimizer step (and once at step 0, before training): records the
        step's end and dumps when step is a multiple of `every`."""
        self.step_done(tokens, seq_len)
        if self.every is None or step % self.every != 0:
            return None
        return self.dump(step)


def _tokens_in(batch: Any) -> tuple[int | None, int | None]:
    """(tokens, sequence length) of a batch holding input_ids, else (None, None)."""
    ids = batch.get("input_ids") if isinstance(batch, dict) else None
    if isinstance(ids, torch.Tensor) and ids.dim() >= 1:
        return int(ids.numel()), int(ids.shape[-1])
    return None, None


def trainer_callback(out_dir: str | os.PathLike | None = None, **kwargs: Any):
    """A transformers TrainerCallback that dumps at the start of training (step 0) and on every
    checkpoint save (on_save), each with the measured step time since the previous dump.

    Dumps go to `out_dir`, or `<args.output_dir>/mrep` when None. Keyword arguments go to
    CheckpointDumper (label, name, tags, gz, precision; precision defaults to bf16 or fp16 when
    the TrainingArguments say so). Tokens per step are counted from the batches' input_ids.
    """
    from transformers import TrainerCallback  # noqa: PLC0415 - optional dependency

    class MrepTrainerCallback(TrainerCallback):
        def __init__(self) -> None:
            self.dumper: CheckpointDumper | None = None
            self._tokens = 0
            self._seq: int | None = None

        def _ensure(self, args, model) -> CheckpointDumper:
            if self.dumper is None:
                target = out_dir if out_dir is not None else os.path.join(args.output_dir, "mrep")
                opts = dict(kwargs)
                if "precision" not in opts and (getattr(args, "bf16", False) or getattr(args, "fp16", False)):
                    opts["precision"] = "bf16" if args.bf16 else "fp16"
                self.dumper = CheckpointDumper(model, target, **opts)
                # Trainer does not hand batches to callbacks: count tokens in the forward
                model.register_forward_pre_hook(self._count, with_kwargs=True)
            return self.dumper

        def _count(self, module: nn.Module, args: tuple, kw: dict) -> None:
            ids = kw.get("input_ids", args[0] if args and isinstance(args[0], torch.Tensor) else None)
            if isinstance(ids, torch.Tensor) and module.training:
                self._tokens += int(ids.numel())
                self._seq = int(ids.shape[-1])

        def on_train_begin(self, args, state, control, model=None, **_: Any):
            if model is not None:
                d = self._ensure(args, model)
                d.dump(int(state.global_step), model=model)
                d.step_done()  # the clock starts here
            return control

        def on_step_end(self, args, state, control, **_: Any):
            if self.dumper is not None:
                self.dumper.step_done(self._tokens or None, self._seq)
                self._tokens = 0
            return control

        def on_save(self, args, state, control, model=None, **_: Any):
            if model is None:
                return control
            self._ensure(args, model).dump(int(state.global_step), model=model)
            return control

    return MrepTrainerCallback()


def lightning_callback(out_dir: str | os.PathLike | None = None, **kwargs: Any):
    """A PyTorch Lightning Callback: dumps at the start of training (step 0) and at every
    checkpoint save, each with the measured step time; tokens are counted from batches that
    are dicts holding input_ids (or pass tokens_per_batch=). Dumps go to `out_dir`, or
    `<trainer.default_root_dir>/mrep`. Keyword arguments go to CheckpointDumper."""
    try:
        from lightning.pytorch import Callback  # noqa: PLC0415 - optional dependency
    except ImportError:
        try:
            from pytorch_lightning import Callback  # noqa: PLC0415
        except ImportError as e:
            raise ExportError("lightning_callback needs PyTorch Lightning: pip install pytorch-lightning (or, in a clone of mrep, pip install './exporter[lightning]')") from e
    tokens_per_batch = kwargs.pop("tokens_per_batch", None)

    class MrepLightningCallback(Callback):
        def __init__(self) -> None:
            self.dumper: CheckpointDumper | None = None
            self._tokens = 0
            self._seq: int | None = None

        def _ensure(self, trainer, module) -> CheckpointDumper:
            if self.dumper is None:
                target = out_dir if out_dir is not None else os.path.join(trainer.default_root_dir, "mrep")
                opts = dict(kwargs)
                if "precision" not in opts:
                    p = str(getattr(trainer, "precision", ""))
                    opts["precision"] = "bf16" if "bf16" in p else "fp16" if "16" in p else None
                self.dumper = CheckpointDumper(module, target, **opts)
            return self.dumper

        def on_train_start(self, trainer, pl_module) -> None:
            d = self._ensure(trainer, pl_module)
            d.dump(int(trainer.global_step), model=pl_module)
            d.step_done()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            n, seq = _tokens_in(batch)
            self._tokens += tokens_per_batch or n or 0
            self._seq = seq or self._seq
            # one optimizer step per accumulate_grad_batches batches
            if (batch_idx + 1) % max(1, getattr(trainer, "accumulate_grad_batches", 1)) == 0 and self.dumper is not None:
                self.dumper.step_done(self._tokens or None, self._seq)
                self._tokens = 0

        def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
            self._ensure(trainer, pl_module).dump(int(trainer.global_step), model=pl_module)

    return MrepLightningCallback()
