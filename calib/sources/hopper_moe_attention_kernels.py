#!/usr/bin/env python3
"""Time, on the GPU at hand, the two kernel classes the GPT-OSS and Qwen3 MoE training rows lean
on that no published table covers for Hopper, with the libraries those runs call:

1. cuDNN's fused attention (the backend Transformer Engine picks on Hopper for BF16, and the only
   one that takes GPT-OSS's learnable softmax sink), through cudnn-frontend's graph API: full
   causal and 128-token sliding-window attention, 64 query and 8 key-value heads, head dims 64
   and 128, with and without the sink, forward and backward, sequence 1k-16k. The same harness
   as NVIDIA's benchmark/sdpa_benchmark_training (top-left diagonal, window as the diagonal
   band's left bound), so its H200, GB200 and GB300 tables sit beside these.
2. The expert GEMMs as Transformer Engine's GroupedLinear issues them on Hopper (one cuBLAS GEMM
   per local expert on a pool of 4 CUDA streams), against one dense GEMM of the same total rows:
   the grouped GEMM's share of the dense rate, per pass (forward, data gradient, weight gradient),
   in BF16 and FP8 (torch._scaled_mm, per-tensor scales: FP8 current scaling's GEMM).

Every launch sequence is captured in a CUDA graph and replayed, so the times are the GPU's alone.

3. A window sweep (windows) and the eager memory-bound passes Megatron makes around a clamped
   GLU and the experts' fp32 output bias, beside a device-to-device copy (eager).

Usage (on the GPU machine, with nvidia-cudnn-frontend importable):
    python3 calib/sources/hopper_moe_attention_kernels.py OUT.json [grouped attention windows eager rope]
"""
import json
import sys
import time
import traceback

import torch

from torch_kernels import warm_up  # the same directory: run as calib/sources/<this file>

DEV = "cuda"


def graph_time_us(fn, reps=None, target_ms=20.0):
    """The best of three replays of a CUDA graph of n calls of fn, per call, in microseconds."""
    warm_up(fn)
    # size n from one eager call
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - t0, 1e-6)
    n = reps or int(min(200, max(3, target_ms / 1e3 / once)))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    torch.cuda.synchronize()
    best = float("inf")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / n)
    return best


def events_time_us(fn, iters=10):
    """Eager timing (for what a graph cannot capture): the best of iters, in microseconds."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3)
    return best


# ---------------------------------------------------------------------------------------------
# 1. cuDNN attention


def built(cudnn, g):
    """Validate and plan a cudnn-frontend graph (heuristics A, then the fallback) and return the
    workspace its plan needs."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return torch.empty(g.get_workspace_size(), device=DEV, dtype=torch.uint8)


def attention_case(cudnn, b, s, hq, hkv, d, window, sink):
    """Forward and backward times of one causal (optionally windowed, optionally sunk) SDPA."""
    q = torch.randn(b, s, hq, d, dtype=torch.bfloat16, device=DEV).transpose(1, 2)
    k = torch.randn(b, s, hkv, d, dtype=torch.bfloat16, device=DEV).transpose(1, 2)
    v = torch.randn(b, s, hkv, d, dtype=torch.bfloat16, device=DEV).transpose(1, 2)
    o = torch.empty(b, s, hq, d, dtype=torch.bfloat16, device=DEV).transpose(1, 2)
    dO = torch.randn(b, s, hq, d, dtype=torch.bfloat16, device=DEV).transpose(1, 2)
    stats = torch.empty(b, hq, s, 1, dtype=torch.float32, device=DEV)
    dQ, dK, dV = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    sink_t = torch.randn(1, hq, 1, 1, dtype=torch.float32, device=DEV) * 0.5
    dsink_t = torch.zeros(1, hq, 1, 1, dtype=torch.float32, device=DEV)
    scale = d ** -0.5
    align = cudnn.diagonal_alignment.TOP_LEFT

    gf = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                       compute_data_type=cudnn.data_type.FLOAT)
    qf, kf, vf = gf.tensor_like(q), gf.tensor_like(k), gf.tensor_like(v)
    sf = gf.tensor(dim=(1, hq, 1, 1), stride=(hq, 1, 1, 1), data_type=cudnn.data_type.FLOAT) if sink else None
    kw = dict(attn_scale=scale, diagonal_alignment=align, diagonal_band_right_bound=0)
    if window:
        kw["diagonal_band_left_bound"] = window
    if sink:
        kw["sink_token"] = sf
    of, stf = gf.sdpa(q=qf, k=kf, v=vf, generate_stats=True, **kw)
    of.set_output(True).set_dim(o.size()).set_stride(o.stride())
    stf.set_output(True).set_dim(stats.size()).set_stride(stats.stride()).set_data_type(cudnn.data_type.FLOAT)
    wsf = built(cudnn, gf)
    packf = {qf: q, kf: k, vf: v, of: o, stf: stats}
    if sink:
        packf[sf] = sink_t

    gb = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                       compute_data_type=cudnn.data_type.FLOAT)
    qb, kb, vb, ob, dOb = gb.tensor_like(q), gb.tensor_like(k), gb.tensor_like(v), gb.tensor_like(o), gb.tensor_like(dO)
    stb = gb.tensor_like(stats)
    kwb = dict(attn_scale=scale, diagonal_alignment=align, diagonal_band_right_bound=0)
    if window:
        kwb["diagonal_band_left_bound"] = window
    if sink:
        sb = gb.tensor(dim=(1, hq, 1, 1), stride=(hq, 1, 1, 1), data_type=cudnn.data_type.FLOAT)
        dsb = gb.tensor(dim=(1, hq, 1, 1), stride=(hq, 1, 1, 1), data_type=cudnn.data_type.FLOAT)
        kwb["sink_token"], kwb["dSink_token"] = sb, dsb
    dQb, dKb, dVb = gb.sdpa_backward(q=qb, k=kb, v=vb, o=ob, dO=dOb, stats=stb, **kwb)
    dQb.set_output(True).set_dim(dQ.size()).set_stride(dQ.stride())
    dKb.set_output(True).set_dim(dK.size()).set_stride(dK.stride())
    dVb.set_output(True).set_dim(dV.size()).set_stride(dV.stride())
    if sink:
        dsb.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    wsb = built(cudnn, gb)
    packb = {qb: q, kb: k, vb: v, ob: o, dOb: dO, stb: stats, dQb: dQ, dKb: dK, dVb: dV}
    if sink:
        packb[sb], packb[dsb] = sink_t, dsink_t

    fwd = events_time_us(lambda: gf.execute(packf, wsf), iters=20)
    bwd = events_time_us(lambda: gb.execute(packb, wsb), iters=20)
    return fwd, bwd


def attention(out):
    import cudnn  # nvidia-cudnn-frontend
    out["cudnn_frontend"] = cudnn.__version__
    out["cudnn_backend"] = cudnn.backend_version()
    rows = []
    cases = []
    for d in (128, 64):
        for s in (1024, 2048, 4096, 8192, 16384):
            cases.append((1, s, 64, 8, d, 0, False))
    for s in (1024, 2048, 4096, 8192, 16384):
        cases.append((1, s, 64, 8, 64, 0, True))
    for sink in (False, True):
        for s in (2048, 4096, 8192, 16384):
            cases.append((1, s, 64, 8, 64, 128, sink))
    cases.append((2, 4096, 64, 8, 64, 128, False))  # NVIDIA's H200 gpt_oss row's shape
    for c in cases:
        b, s, hq, hkv, d, w, sink = c
        row = {"batch": b, "seq": s, "heads_q": hq, "heads_kv": hkv, "head_dim": d, "window": w, "sink": sink}
        try:
            row["fwd_us"], row["bwd_us"] = attention_case(cudnn, *c)
        except Exception as e:  # a shape the installed cuDNN refuses: recorded, not fatal
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print("attn", row, flush=True)
        torch.cuda.empty_cache()
    out["attention"] = rows


# ---------------------------------------------------------------------------------------------
# 2. grouped expert GEMMs

# (label, local experts, rows per expert, N = fc1 out, K = hidden, fc2 in), from the held-out rows'
# layouts: tokens x top-k x EP ranks / experts rows per expert, force-balanced as the tables say
MOE = [
    ("gpt-oss-120b EP8 MBS1", 16, 1024, 5760, 2880, 2880),
    ("Qwen3-30B-A3B EP16 MBS1", 8, 4096, 1536, 2048, 768),
    ("Qwen3-30B-A3B EP8 MBS1", 16, 2048, 1536, 2048, 768),
    ("Qwen3-235B-A22B TP2 EP32 MBS1", 4, 4096, 3072, 4096, 1536),
]


def gemm_fn(dtype, M, N, K, copies):
    """A function launching one [M,K]x[K,N] GEMM per operand copy given (stream list or None)."""
    if dtype == "bf16":
        As = [torch.randn(M, K, dtype=torch.bfloat16, device=DEV) for _ in range(copies)]
        Bs = [torch.randn(N, K, dtype=torch.bfloat16, device=DEV) for _ in range(copies)]
        Cs = [torch.empty(M, N, dtype=torch.bfloat16, device=DEV) for _ in range(copies)]

        def one(i):
            torch.matmul(As[i], Bs[i].t(), out=Cs[i])
    else:
        As = [torch.randn(M, K, device=DEV).to(torch.float8_e4m3fn) for _ in range(copies)]
        Bs = [torch.randn(N, K, device=DEV).to(torch.float8_e4m3fn) for _ in range(copies)]
        sa = torch.ones((), device=DEV)
        sb = torch.ones((), device=DEV)

        def one(i):
            torch._scaled_mm(As[i], Bs[i].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    return one


def grouped_case(dtype, G, M, N, K, streams):
    dense = gemm_fn(dtype, G * M, N, K, 1)
    per = gemm_fn(dtype, M, N, K, G)
    t_dense = graph_time_us(lambda: dense(0))

    def seq():
        for i in range(G):
            per(i)

    def multi():
        main = torch.cuda.current_stream()
        for st in streams:
            st.wait_stream(main)
        for i in range(G):
            with torch.cuda.stream(streams[i % len(streams)]):
                per(i)
        for st in streams:
            main.wait_stream(st)
    t_seq = graph_time_us(seq)
    t_multi = graph_time_us(multi)
    flops = 2.0 * G * M * N * K
    return {"dense_us": t_dense, "serial_us": t_seq, "streams4_us": t_multi,
            "dense_tflops": flops / t_dense / 1e6, "streams4_tflops": flops / t_multi / 1e6}


def grouped(out):
    streams = [torch.cuda.Stream() for _ in range(4)]
    rows = []
    for label, G, M, N1, H, N2 in MOE:
        # fc1: [M,H] x [H,N1]; fc2: [M,N2] x [N2,H]; each pass as out = [rows, cols] with depth
        passes = []
        for name, n, k in (("fc1", N1, H), ("fc2", H, N2)):
            passes += [(name + " fprop", M, n, k), (name + " dgrad", M, k, n), (name + " wgrad", n, k, M)]
        for dtype in ("bf16", "fp8"):
            for pname, m, n, k in passes:
                row = {"model": label, "dtype": dtype, "pass": pname, "experts": G, "m": m, "n": n, "k": k}
                try:
                    row.update(grouped_case(dtype, G, m, n, k, streams))
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                rows.append(row)
                print("gemm", row, flush=True)
                torch.cuda.empty_cache()
    out["grouped_gemm"] = rows


def windows(out):
    """A window sweep at 8,192 tokens: how fast a window of w keys runs against the causal kernel."""
    import cudnn
    rows = []
    for d in (64, 128):
        for w in (0, 128, 256, 512, 1024, 2048, 4096):
            row = {"batch": 1, "seq": 8192, "heads_q": 64, "heads_kv": 8, "head_dim": d, "window": w, "sink": False}
            try:
                row["fwd_us"], row["bwd_us"] = attention_case(cudnn, 1, 8192, 64, 8, d, w, False)
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print("window", row, flush=True)
    out["window_sweep"] = rows


GPT_OSS_ASSIGNMENTS, GPT_OSS_HIDDEN, GPT_OSS_LOCAL_EXPERTS = 16384, 2880, 16  # 4,096 tokens x top-4 on one GPU, EP8


def glu_clamp():
    """Megatron's eager clamp of GPT-OSS's FC1 output (weighted_bias_quick_geglu_impl): the
    forward, and its input and an output gradient."""
    x = torch.randn(GPT_OSS_ASSIGNMENTS, 2 * GPT_OSS_HIDDEN, dtype=torch.bfloat16, device=DEV, requires_grad=True)
    g = torch.randn(GPT_OSS_ASSIGNMENTS, 2 * GPT_OSS_HIDDEN, dtype=torch.bfloat16, device=DEV)

    def fwd():
        a, b = x.chunk(2, -1)
        return torch.cat((a.clamp(min=None, max=7.0), b.clamp(min=-7.0, max=7.0)), -1)
    return fwd, x, g


def expert_bias():
    """Megatron's TEGroupedMLP._apply_bias over GPT-OSS's local experts (per expert t + b * p in
    fp32, cat, cast back): the forward, its inputs and an output gradient."""
    n, h, experts = GPT_OSS_ASSIGNMENTS, GPT_OSS_HIDDEN, GPT_OSS_LOCAL_EXPERTS
    tokens = [n // experts] * experts
    out_t = torch.randn(n, h, dtype=torch.bfloat16, device=DEV, requires_grad=True)
    bias = torch.randn(experts, h, dtype=torch.bfloat16, device=DEV, requires_grad=True)
    probs = torch.rand(n, dtype=torch.float32, device=DEV, requires_grad=True)
    go = torch.randn(n, h, dtype=torch.bfloat16, device=DEV)

    def fwd():
        parts = torch.split(out_t, tokens)
        ps = torch.split(probs, tokens)
        res = [t + bias[i] * p.unsqueeze(-1) for i, (t, p) in enumerate(zip(parts, ps))]
        return torch.cat(res).to(torch.bfloat16)
    return fwd, (out_t, bias, probs), go


def eager_passes(out):
    """Megatron's eager memory-bound passes around the experts, timed as PyTorch runs them, beside
    a device-to-device copy (the achievable HBM rate): the clamp of a clamped GLU's FC1 output
    and TEGroupedMLP._apply_bias's fp32 bias, forward and backward. The gradients flow on (to the
    GEMMs), not into a leaf's .grad."""
    rows = []
    half, elems, experts = GPT_OSS_ASSIGNMENTS * GPT_OSS_HIDDEN, GPT_OSS_ASSIGNMENTS * GPT_OSS_HIDDEN, GPT_OSS_LOCAL_EXPERTS
    src = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    dst = torch.empty_like(src)
    rows.append({"what": "d2d copy 1 GiB", "us": graph_time_us(lambda: dst.copy_(src)), "bytes": 2 * (1 << 30)})
    del src, dst
    clamp, x, g = glu_clamp()
    rows.append({"what": "glu clamp forward", "us": events_time_us(lambda: clamp(), iters=20), "half_elems": half})
    rows.append({"what": "glu clamp forward+backward", "us": events_time_us(lambda: torch.autograd.grad(clamp(), x, g), iters=20),
                 "half_elems": half})
    del x, g
    bias, ins, go = expert_bias()
    rows.append({"what": "expert bias fp32 forward", "us": events_time_us(lambda: bias(), iters=20), "elems": elems, "experts": experts})
    rows.append({"what": "expert bias fp32 forward+backward", "us": events_time_us(lambda: torch.autograd.grad(bias(), ins, go), iters=20),
                 "elems": elems, "experts": experts})
    for r in rows:
        print("eager", r, flush=True)
    out["eager_passes"] = rows


def eager_rope(out):
    """Megatron's unfused rotary embedding (_apply_rotary_pos_emb_bshd, as it runs GPT-OSS's YaRN
    RoPE) over the queries and keys of 4,096 tokens, eager and replayed from a CUDA graph (the
    GPU's time alone, as when the host runs ahead in training); and the clamp and the fp32 bias
    replayed the same way."""
    rows = []

    def rotate_half(x):
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    for heads, d in ((64 + 8, 64), (32 + 8, 128)):
        t_in = torch.randn(4096, 1, heads, d, dtype=torch.bfloat16, device=DEV, requires_grad=True)
        freqs = torch.randn(4096, 1, 1, d, device=DEV)
        g = torch.randn(4096, 1, heads, d, dtype=torch.bfloat16, device=DEV)
        mscale = 1.3466  # YaRN's concentration at factor 32: 0.1 ln 32 + 1

        def rope():
            t = t_in[..., :d]
            t_pass = t_in[..., d:]
            cos_ = (torch.cos(freqs) * mscale).to(t.dtype)
            sin_ = (torch.sin(freqs) * mscale).to(t.dtype)
            t = (t * cos_) + (rotate_half(t) * sin_)
            return torch.cat((t, t_pass), dim=-1)

        shape = {"elems": 4096 * heads * d, "heads": heads, "head_dim": d}
        rows.append({"what": "rope forward", "us": events_time_us(lambda: rope(), iters=20), **shape})
        rows.append({"what": "rope forward+backward", "us": events_time_us(lambda: torch.autograd.grad(rope(), t_in, g), iters=20), **shape})
        rows.append({"what": "rope forward, graphed", "us": graph_time_us(lambda: rope(), reps=10), **shape})
        rows.append({"what": "rope forward+backward, graphed", "us": graph_time_us(lambda: torch.autograd.grad(rope(), t_in, g), reps=10), **shape})
    clamp, x, gx = glu_clamp()
    half = GPT_OSS_ASSIGNMENTS * GPT_OSS_HIDDEN
    rows.append({"what": "glu clamp forward, graphed", "us": graph_time_us(lambda: clamp(), reps=10), "half_elems": half})
    rows.append({"what": "glu clamp forward+backward, graphed", "us": graph_time_us(lambda: torch.autograd.grad(clamp(), x, gx), reps=10),
                 "half_elems": half})
    del x, gx
    bias, ins, go = expert_bias()
    row = {"what": "expert bias fp32 forward+backward, graphed", "elems": half, "experts": GPT_OSS_LOCAL_EXPERTS}
    try:
        row["us"] = graph_time_us(lambda: torch.autograd.grad(bias(), ins, go), reps=5)
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:300]
    rows.append(row)
    for r in rows:
        print("rope", r, flush=True)
    out["eager_rope"] = rows


def main():
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn_torch": torch.backends.cudnn.version()}
    parts = {"grouped": grouped, "attention": attention, "windows": windows, "eager": eager_passes, "rope": eager_rope}
    for part in [parts[a] for a in sys.argv[2:]] or (grouped, attention):
        try:
            part(out)
        except Exception:
            out.setdefault("errors", []).append(traceback.format_exc()[-2000:])
            print(traceback.format_exc(), flush=True)
        json.dump(out, open(sys.argv[1], "w"), indent=1)
    print(json.dumps({k: v for k, v in out.items() if k not in ("attention", "grouped_gemm")}))


if __name__ == "__main__":
    main()
