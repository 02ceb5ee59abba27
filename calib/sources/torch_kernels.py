#!/usr/bin/env python3
"""Time dense GEMMs and fused attention with PyTorch on the GPU at hand, on the grid of
calib/sources/aiconfigurator_kernels.py, and write them as a kernel set (the format of
calib/kernels.json.gz): an independent measurement of the same shapes, by a collector no one at
NVIDIA wrote, with the chip's own figures as mrep's prediction (engine "torch").

Each shape is captured CUDA-graph style (n launches back to back in one graph, replayed once;
n sized for ~20 ms), after two warm-up launches, so the time is the GPU's alone, as a serving
engine replays its decode steps. Consecutive launches cycle through enough copies of their
operands (200 MB together, four times the H100's L2) that each reads its weights or KV cache
from HBM, as a model's layers do, not from a cache the previous launch warmed. GEMMs are torch.nn.functional.linear (cuBLAS) in bf16; prefill
attention is scaled_dot_product_attention causal, decode attention the same with one query over
the cache (GQA by enable_gqa); the backend SDPA chose is recorded with each group.

Usage (on the GPU machine): python3 calib/sources/torch_kernels.py CHIP OUT.json
"""
import json
import sys

import torch
import torch.nn.functional as F

# the grid of calib/sources/aiconfigurator_kernels.py (kept equal by hand: both are short)
GEMM_M = [1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
GEMM_NK = [(n, k) for n in (1024, 4096, 6144, 12288, 16384, 51200) for k in (1024, 4096, 8192, 16384)]
ATTN_HEADS = [(32, 8, 128), (64, 8, 128), (8, 1, 128), (16, 2, 128), (32, 32, 128), (64, 64, 64), (40, 8, 128)]
CTX_BATCH, CTX_ISL = [1, 4, 16, 64], [128, 512, 2048, 8192, 16384]
GEN_BATCH, GEN_STEP = [1, 8, 32, 128, 512], [127, 1023, 4095, 16383]
MAX_FLOPS, MAX_BYTES = 3e14, 24e9  # skip shapes that would take seconds or not fit


COLD_BYTES = 200e6


def copies(nbytes):
    """How many copies of a launch's operands keep each launch's reads out of L2."""
    return int(min(64, max(1, -(-COLD_BYTES // max(nbytes, 1)))))


def cycling(fns):
    """One launch per call, each of the next operand copy."""
    state = {"i": 0}

    def fn():
        f = fns[state["i"] % len(fns)]
        state["i"] += 1
        f()
    return fn


def warm_up(fn):
    """Run fn twice on a side stream, as CUDA graph capture wants (lazy init, workspaces), then
    wait for it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def time_us(fn):
    """The best of three graph replays of n launches of fn, per launch, in microseconds."""
    warm_up(fn)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    first = start.elapsed_time(end) * 1e3
    n = int(max(3, min(200, 20000 / max(first, 1))))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = None
    for _ in range(3):
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        t = start.elapsed_time(end) * 1e3 / n
        best = t if best is None else min(best, t)
    return best


def gemms(dev):
    rows = []
    for m in GEMM_M:
        for n, k in GEMM_NK:
            c = copies(2 * (m * k + n * k))
            ops = [(torch.randn(m, k, device=dev, dtype=torch.bfloat16), torch.randn(n, k, device=dev, dtype=torch.bfloat16)) for _ in range(c)]
            fns = [lambda x=x, w=w: F.linear(x, w) for x, w in ops]
            rows.append([m, n, k, round(time_us(cycling(fns)), 3)])
            del ops, fns
    return rows


def attention(dev, decode):
    rows, backends = [], set()
    for b in (GEN_BATCH if decode else CTX_BATCH):
        for L in (GEN_STEP if decode else CTX_ISL):
            for h, hkv, d in ATTN_HEADS:
                kv_len = L + 1 if decode else L
                q_len = 1 if decode else L
                flops = 4 * b * h * q_len * kv_len * d / (1 if decode else 2)
                kv_bytes = 2 * b * hkv * kv_len * d * 2
                if flops > MAX_FLOPS or kv_bytes + 2 * b * h * q_len * d * 2 > MAX_BYTES:
                    continue
                c = copies(kv_bytes + 2 * b * h * q_len * d * 2)
                ops = [(torch.randn(b, h, q_len, d, device=dev, dtype=torch.bfloat16),
                        torch.randn(b, hkv, kv_len, d, device=dev, dtype=torch.bfloat16),
                        torch.randn(b, hkv, kv_len, d, device=dev, dtype=torch.bfloat16)) for _ in range(c)]
                fns = [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=not decode, enable_gqa=hkv != h)
                       for q, k, v in ops]
                try:
                    us = time_us(cycling(fns))
                except RuntimeError as e:  # a backend that cannot take the shape
                    sys.stderr.write("skip %s: %s\n" % ((b, L, h, hkv, d), str(e).splitlines()[0]))
                    continue
                rows.append([b, q_len, kv_len, h, hkv, d, round(us, 3)])
                del ops, fns
    return rows


def main():
    chip, out = sys.argv[1], sys.argv[2]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name(dev)
    rel = torch.__version__
    src = "measured by calib/sources/torch_kernels.py on a lent %s (PyTorch %s, CUDA %s), CUDA-graph replay" % (gpu, rel, torch.version.cuda)
    base = {"chip": chip, "engine": "torch", "release": rel, "gpu": gpu, "source": src}
    groups = [dict(base, family="gemm", dtype="bf16", kv_dtype="", kernel="torch.nn.functional.linear (cuBLAS)",
                   cols=["m", "n", "k", "us"], rows=gemms(dev))]
    cols = ["batch", "queries", "kv_len", "heads", "kv_heads", "head_dim", "us"]
    for fam, dec in (("context_attention", False), ("generation_attention", True)):
        groups.append(dict(base, family=fam, dtype="bf16", kv_dtype="bf16", kernel="torch scaled_dot_product_attention",
                           cols=cols, rows=attention(dev, dec)))
    json.dump({"about": "Kernels timed with PyTorch on the lent GPU by calib/sources/torch_kernels.py: dense bf16 GEMMs "
                        "and SDPA attention on the grid of the aiconfigurator set; latency in microseconds.",
               "groups": groups}, open(out, "w"), separators=(",", ":"))
    sys.stderr.write("%s: %d gemm, %d prefill, %d decode rows\n" % (gpu, len(groups[0]["rows"]), len(groups[1]["rows"]), len(groups[2]["rows"])))


if __name__ == "__main__":
    main()
