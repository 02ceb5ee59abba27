#!/usr/bin/env python3
"""Time, on the GPU at hand, what FP8 training buys a dense decoder layer as torchtitan and
other FSDP stacks run it: torchao's Float8Linear (tensorwise current scaling, the default
recipe torchtitan's float8 converter applies) against the same layer in bf16, forward and
backward, compiled (torch.compile of the layer, as torchtitan compiles each block) and eager, at
4k-32k tokens per micro-batch. Beside it, the bare GEMMs of the same layer (cuBLAS bf16 through
F.linear against torch._scaled_mm in e4m3 with per-tensor scales), forward, data gradient and
weight gradient, so the layer's gain splits into the GEMMs' own and what the casts take back.

torchao's Float8Linear saves its 16-bit input and weight for the backward and casts both again
there (float8_linear.py matmul_with_hp_or_float8_args), so each micro-batch casts each weight
twice and each activation and output gradient once or twice: work that does not shrink with the
micro-batch, and the reason a small micro-batch gains less.

Shapes (one GPU's share, no tensor parallel unless named): a Llama-3-8B layer, a 13B layer of
OLMo-2-13B's dims (5120 hidden, 13824 FFN, 40 heads, full multi-head attention), and Llama-3-70B's
layer sharded over TP 8 (the per-GPU slices torchtitan's TP8 rows run, no communication here).
Attention is SDPA, causal, with the key-value heads repeated to the query heads (torchtitan's
repeat_kv); no RoPE (the same in both precisions, and small).

Usage (GPU machine; torchao importable):
    python3 calib/sources/fp8_training_layers.py OUT.json [SECONDS] [static] [only-static]
static adds compiled layers at one static batch each (1 and 4) with their kernel split;
only-static skips the rest.
Writes OUT.json after every measurement, so a run cut short keeps what it timed.
"""
import json
import os
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = os.environ.get("FP8_LAYERS_DEVICE", "cuda")  # cpu: a smoke test of the script itself, shapes cut
SEQ = 4096 if DEV == "cuda" else 64
BATCHES = [2, 4, 8, 1]  # micro-batch sizes: 4k-32k tokens (1 last: compiled, it recompiles once)

# name: (hidden, ffn, heads, kv heads, head dim) as one GPU holds them
LAYERS = {
    "olmo2-13b-dims": (5120, 13824, 40, 40, 128),
    "llama3-8b": (4096, 14336, 32, 8, 128),
    "llama3-70b-tp8-shard": (8192, 28672 // 8, 64 // 8, 1, 128),
}
if DEV == "cpu":
    LAYERS = {k: (h // 16, f // 16, max(nh // 4, 1), max(nkv // 4, 1), 64) for k, (h, f, nh, nkv, _) in LAYERS.items()}


class Layer(nn.Module):
    def __init__(self, h, ffn, nh, nkv, hd):
        super().__init__()
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
        self.wq = nn.Linear(h, nh * hd, bias=False)
        self.wk = nn.Linear(h, nkv * hd, bias=False)
        self.wv = nn.Linear(h, nkv * hd, bias=False)
        self.wo = nn.Linear(nh * hd, h, bias=False)
        self.w1 = nn.Linear(h, ffn, bias=False)
        self.w3 = nn.Linear(h, ffn, bias=False)
        self.w2 = nn.Linear(ffn, h, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        y = self.n1(x)
        q = self.wq(y).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.wk(y).view(b, s, self.nkv, self.hd)
        v = self.wv(y).view(b, s, self.nkv, self.hd)
        rep = self.nh // self.nkv
        k = k[:, :, :, None, :].expand(b, s, self.nkv, rep, self.hd).reshape(b, s, self.nh, self.hd).transpose(1, 2)
        v = v[:, :, :, None, :].expand(b, s, self.nkv, rep, self.hd).reshape(b, s, self.nh, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, self.nh * self.hd))
        y = self.n2(x)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


def timed(fn, iters=8, trials=3):
    """Median over trials of the mean per-call time of iters back-to-back calls, in ms."""
    fn()
    fn()
    if DEV == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(trials):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / iters)
    out.sort()
    return out[len(out) // 2]


def layer_step(layer, x, g):
    def step():
        for p in layer.parameters():
            p.grad = None
        x.grad = None
        layer(x).backward(g)
    return step


def gemm_cases(h, ffn, nh, nkv, hd):
    """The layer's linears as (name, in, out)."""
    return [("wq", h, nh * hd), ("wkv", h, 2 * nkv * hd), ("wo", nh * hd, h), ("w13", h, 2 * ffn), ("w2", ffn, h)]


def kernel_split(step, iters=3):
    """One step's GPU kernel time by class (ms per step), from torch.profiler: GEMMs (cuBLAS,
    CUTLASS), attention (flash / cuDNN / memory-efficient SDPA) and everything else (norms,
    activations, the casts and their amax reductions, copies)."""
    from torch.profiler import ProfilerActivity, profile
    if DEV == "cpu":
        return {}
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    split, names = {"gemm_ms": 0.0, "attention_ms": 0.0, "other_ms": 0.0}, {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        if us <= 0:
            continue
        n = e.key.lower()
        if n.startswith("triton_"):  # inductor's fused kernels (a fused cast's name can say scaled_mm)
            cls = "other_ms"
        elif any(w in n for w in ("flash", "fmha", "attention", "sdpa", "cudnn")):  # cuDNN's names say sm90_ too
            cls = "attention_ms"
        elif any(w in n for w in ("gemm", "sm90_", "cutlass", "xmma", "nvjet", "scaled_mm", "cublas")):
            cls = "gemm_ms"
        else:
            cls = "other_ms"
        split[cls] += us / 1e3 / iters
        split["kernels"] = split.get("kernels", 0) + e.count / iters
        names[e.key[:120]] = round(us / 1e3 / iters, 4)
    top = dict(sorted(names.items(), key=lambda kv: -kv[1])[:25])
    return {k: round(v, 4) for k, v in split.items()} | {"top_kernels_ms": top}


def fp8(t):
    amax = t.abs().max().float().clamp(min=1e-12)
    scale = 448.0 / amax
    return (t.float() * scale).to(torch.float8_e4m3fn), scale.reciprocal()


def time_gemms(name, dims, tokens, rec):
    """Bare GEMMs: bf16 F.linear vs e4m3 _scaled_mm (per-tensor scales, fast accumulation in the
    forward as torchao uses it), for the forward (T x K) (K x N), the data gradient (T x N) (N x K)
    and the weight gradient (N x T) (T x K)."""
    for gname, k, n in gemm_cases(*dims):
        for pas, (m, kk, nn_) in (("fwd", (tokens, k, n)), ("dgrad", (tokens, n, k)), ("wgrad", (n, tokens, k))):
            a = torch.randn(m, kk, device=DEV, dtype=torch.bfloat16)
            w = torch.randn(nn_, kk, device=DEV, dtype=torch.bfloat16)
            t16 = timed(lambda: F.linear(a, w), iters=10)
            a8, sa = fp8(a)
            w8, sw = fp8(w)
            fast = pas == "fwd"
            t8 = timed(lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16,
                                                use_fast_accum=fast), iters=10)
            flops = 2.0 * m * kk * nn_
            rec.append({"layer": name, "tokens": tokens, "gemm": gname, "pass": pas, "m": m, "k": kk, "n": nn_,
                        "bf16_ms": round(t16, 5), "fp8_ms": round(t8, 5),
                        "bf16_tflops": round(flops / t16 / 1e9, 1), "fp8_tflops": round(flops / t8 / 1e9, 1)})
            del a, w, a8, w8


def static_splits(res, left, save, convert):
    """Compiled layers at one static batch each (a compile per batch), batch 1 (4k tokens, the
    smallest micro-batch) and 4, each with its kernel split: what the casts cost per token."""
    for b in [int(v) for v in os.environ.get("FP8_STATIC_BATCHES", "1,4").split(",")]:
        for name, dims in LAYERS.items():
            for prec in ("bf16", "fp8-tensorwise"):
                if left() < 30:
                    res["errors"].append(f"out of time before static {name} {prec} {b}")
                    continue
                try:
                    torch.manual_seed(0)
                    layer = Layer(*dims).to(DEV, torch.bfloat16)
                    if prec != "bf16":
                        convert(layer)
                    run = torch.compile(layer, dynamic=False)
                    x = torch.randn(b, SEQ, dims[0], device=DEV, dtype=torch.bfloat16, requires_grad=True)
                    g = torch.randn_like(x)
                    t0 = time.time()
                    ms = timed(layer_step(run, x, g), iters=5)
                    res["layer_steps"].append({"layer": name, "mode": "compiled-static", "precision": prec, "batch": b,
                                               "tokens": b * SEQ, "fwd_bwd_ms": round(ms, 4),
                                               "wall_s": round(time.time() - t0, 1)})
                    res["kernel_split"].append(dict(layer=name, mode="compiled-static", precision=prec, batch=b,
                                                    **kernel_split(layer_step(run, x, g))))
                    save()
                    del layer, run, x, g
                    torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001
                    res["errors"].append(f"static {name} {prec} {b}: {e!r}"[:2000])
                    traceback.print_exc()
                    save()
                torch._dynamo.reset()


def main():
    out_path = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 420.0
    t_start = time.time()
    res = {"about": __doc__.split("\n\n")[0].replace("\n", " "),
           "gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "torch": torch.__version__, "seq": SEQ,
           "layers": {k: dict(zip(("hidden", "ffn", "heads", "kv_heads", "head_dim"), v)) for k, v in LAYERS.items()},
           "layer_steps": [], "gemms": [], "kernel_split": [], "errors": []}
    try:
        import torchao
        from torchao.float8 import convert_to_float8_training
        res["torchao"] = torchao.__version__
    except Exception as e:  # noqa: BLE001
        res["errors"].append("torchao: " + repr(e))
        convert_to_float8_training = None

    def save():
        res["elapsed_s"] = round(time.time() - t_start, 1)
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)

    def left():
        return budget - (time.time() - t_start)

    def gemms():
        for name, dims in LAYERS.items():
            for b in (1, 8):
                if left() < 15:
                    res["errors"].append(f"out of time before gemms {name} {b}")
                    continue
                try:
                    time_gemms(name, dims, b * SEQ, res["gemms"])
                except Exception as e:  # noqa: BLE001
                    res["errors"].append(f"gemms {name} {b}: {e!r}"[:2000])
                save()

    torch.backends.cuda.matmul.allow_tf32 = True
    # eager layers and their kernel split first (seconds), then the bare GEMMs, then the
    # compiled layers (what torchtitan runs: a compile each, so last, under the time budget)
    for mode in () if "only-static" in sys.argv[3:] else ("eager", "compiled"):
        if mode == "compiled":
            gemms()
        for name, dims in LAYERS.items():
            for prec in ("bf16", "fp8-tensorwise"):
                if left() < 60:
                    res["errors"].append(f"out of time before {mode} {name} {prec}")
                    save()
                    continue
                try:
                    torch.manual_seed(0)
                    layer = Layer(*dims).to(DEV, torch.bfloat16)
                    if prec != "bf16":
                        if convert_to_float8_training is None:
                            continue
                        convert_to_float8_training(layer)
                    run = torch.compile(layer) if mode == "compiled" else layer
                    for b in (BATCHES if mode == "eager" else [b for b in BATCHES if b > 1]):
                        x = torch.randn(b, SEQ, dims[0], device=DEV, dtype=torch.bfloat16, requires_grad=True)
                        g = torch.randn_like(x)
                        if mode == "compiled" and b > 1:
                            torch._dynamo.mark_dynamic(x, 0)  # one graph for every batch above 1
                        t0 = time.time()
                        ms = timed(layer_step(run, x, g), iters=5)
                        res["layer_steps"].append({"layer": name, "mode": mode, "precision": prec, "batch": b,
                                                   "tokens": b * SEQ, "fwd_bwd_ms": round(ms, 4),
                                                   "wall_s": round(time.time() - t0, 1)})
                        save()
                        if name == "olmo2-13b-dims" and b in ((1, 8) if mode == "eager" else (2, 8)):
                            res["kernel_split"].append(dict(layer=name, mode=mode, precision=prec, batch=b,
                                                            **kernel_split(layer_step(run, x, g))))
                            save()
                        del x, g
                    del layer, run
                    if DEV == "cuda":
                        torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001
                    res["errors"].append(f"{mode} {name} {prec}: {e!r}"[:2000])
                    traceback.print_exc()
                    save()
                if mode == "compiled":
                    torch._dynamo.reset()
    if {"static", "only-static"} & set(sys.argv[3:]):
        static_splits(res, left, save, convert_to_float8_training)
    save()
    print(json.dumps({"elapsed_s": res["elapsed_s"], "errors": res["errors"]}, indent=1))
    for r in res["layer_steps"]:
        print(r)


if __name__ == "__main__":
    main()
