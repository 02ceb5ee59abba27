"""The training hook on a real GPU (skipped where none is present): its measured step time, and
the statistics of a model dumped where it trains.

A loop on a GPU gives the host nothing to wait for early in training, so the host's clock
would time the launches; CheckpointDumper times a CUDA model's steps with CUDA events, and these
tests hold that against events of their own at the same step boundaries. Run them on a machine
with a GPU: `python -m pytest exporter/tests/test_hooks_cuda.py` (CI has none: they skip).
"""
from __future__ import annotations

import statistics

import pytest
import torch
from torch import nn

from conftest import load_dump
from mrep_export.dump import dump_model
from mrep_export.hooks import CheckpointDumper

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _setup():
    """Eight 4096-wide BF16 linears on 8,192 tokens: about 3.3 TFLOP a step forward and backward,
    milliseconds on any current GPU, far above the host's time to issue its few dozen kernels."""
    torch.manual_seed(0)
    width = 4096
    model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(8)]).cuda().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    return model, opt, torch.randn(8192, width, device="cuda", dtype=torch.bfloat16)


def _step(model, opt, x, sync):
    """One optimizer step, then a CUDA event at its end (on the GPU's clock, as the test's own)."""
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if sync:
        loss.item()  # what a loop that logs its loss does
    ev = torch.cuda.Event(enable_timing=True)
    ev.record()
    return ev


def _intervals(events):
    torch.cuda.synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]


def _loop(model, opt, x, steps, dumper, sync_each_step):
    """Train for steps, recording a CUDA event and the dumper at every step's end."""
    events = []
    for _ in range(steps):
        events.append(_step(model, opt, x, sync_each_step))
        dumper.step_done(tokens=x.shape[0])
    return _intervals(events)


@pytest.mark.parametrize("sync_each_step", [False, True])
def test_measured_step_time_is_the_gpus(tmp_path, sync_each_step):
    model, opt, x = _setup()
    dumper = CheckpointDumper(model, tmp_path, name="gpu", precision="bf16")
    _loop(model, opt, x, 5, dumper, sync_each_step)  # warm-up: cuBLAS heuristics, the allocator
    dumper = CheckpointDumper(model, tmp_path, name="gpu", precision="bf16")
    gpu = _loop(model, opt, x, 60, dumper, sync_each_step)
    measured = dumper.measurement()["step_time_s"]
    want = statistics.median(gpu[5:])
    print(f"\nsync_each_step={sync_each_step}: hook {measured * 1e3:.3f} ms, GPU events {want * 1e3:.3f} ms "
          f"({torch.cuda.get_device_name()})")
    assert want > 1e-3
    assert abs(measured - want) / want < 0.05, (measured, want)


def test_a_dump_early_in_training_times_the_gpus_steps(tmp_path):
    """Early in training nothing makes the host wait: it issues tens of steps ahead of the GPU,
    so timing them by the host's clock reads the launches (on an H100 the first 20 steps of this
    loop were issued about 1.2 ms apart against 9.7 ms on the GPU). A dump every 10 steps must
    still report the GPU's step time, from the first."""
    model, opt, x = _setup()
    _loop(model, opt, x, 5, CheckpointDumper(model, tmp_path, name="gpu", precision="bf16"), False)  # warm-up
    torch.cuda.synchronize()
    dumper = CheckpointDumper(model, tmp_path, name="gpu", precision="bf16", every=10)
    events, got = [], []
    for step in range(1, 31):
        events.append(_step(model, opt, x, False))
        if dumper.maybe_dump(step, tokens=x.shape[0]) is not None:
            got.append(load_dump(dumper.written[-1].path)["measurement"]["step_time_s"])
    gpu = _intervals(events)
    # the dumper's windows: steps 1-10 (9 intervals, the first step has none before it), 11-20
    # and 21-30, each interval between the same two step ends as ours (the GPU's clocks move
    # over a run, so each window is held to its own steps)
    want = [statistics.median(gpu[0:9]), statistics.median(gpu[9:19]), statistics.median(gpu[19:29])]
    print(f"\nwindows of 10 steps: {[round(g * 1e3, 3) for g in got]} ms, GPU events {[round(w * 1e3, 3) for w in want]} ms")
    assert len(got) == 3
    for g, w in zip(got, want):
        assert abs(g - w) / w < 0.02, (got, want)


def test_a_model_on_the_gpu_dumps_the_cpus_statistics(tmp_path):
    """A checkpoint of a model trained on a GPU is dumped where its weights are, with the same
    statistics (the CountSketch's buckets and signs are the CPU's) as the same weights on the CPU,
    up to the order float64 sums run in."""
    torch.manual_seed(0)
    gpu = nn.Sequential(nn.Linear(2048, 3000), nn.LayerNorm(3000), nn.Linear(3000, 7)).cuda()
    cpu = nn.Sequential(nn.Linear(2048, 3000), nn.LayerNorm(3000), nn.Linear(3000, 7))
    cpu.load_state_dict({k: v.cpu() for k, v in gpu.state_dict().items()})
    dump_model(gpu, tmp_path / "gpu.json", stats=True)
    dump_model(cpu, tmp_path / "cpu.json", stats=True)

    def stats(path):
        doc = load_dump(str(path))
        return {f"{m['name']}.{p['name']}": p["stats"] for m in doc["modules"] for p in m["params"]}

    g, c = stats(tmp_path / "gpu.json"), stats(tmp_path / "cpu.json")
    assert g.keys() == c.keys() and len(g) == 6
    for k in g:
        assert g[k]["hist"]["counts"] == c[k]["hist"]["counts"], k
        assert g[k]["norm"] == pytest.approx(c[k]["norm"], rel=1e-12), k
        assert g[k]["sketch"] == pytest.approx(c[k]["sketch"], rel=1e-6, abs=1e-9), k
        for s in ("mean", "std", "min", "max"):
            assert g[k][s] == pytest.approx(c[k][s], rel=1e-5, abs=1e-7), (k, s)
