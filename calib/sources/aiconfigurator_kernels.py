#!/usr/bin/env python3
"""Resample NVIDIA's measured kernel timings (aiconfigurator-core's PyPI package) into
calib/kernels.json.gz, the kernel set `mrep validate --kernels` checks mrep's time model against.

The package (Apache-2.0) ships, per system, op family, engine and engine release, parquet tables
of kernels it timed on the GPU: aiconfigurator_core/systems/data/<system>/<op>/<engine>/<version>/
*.parquet, with a collection_meta.yaml. This script reads the dense GEMM table, the context
and generation attention tables, the MoE table and the MLA core tables of the systems mrep has chips for, keeps a fixed grid of shapes
(the same grid for every chip, engine and dtype, so they compare like for like), and writes each
group with its provenance: the package and version, the file inside it, the engine release, the
kernel the engine ran and the GPU it reports. Latencies go in microseconds.

Usage: pip download --no-deps aiconfigurator-core==0.12.0 && unzip -q aiconfigurator_core-*.whl -d aic
       python3 calib/sources/aiconfigurator_kernels.py aic/aiconfigurator_core 0.12.0 > calib/kernels.json
       gzip -9n calib/kernels.json
(needs pyarrow and pyyaml; the mrep binary reads only the gzip'd JSON.)
"""
import glob
import json
import os
import sys

import pyarrow.parquet as pq

SYSTEMS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200", "gb200": "GB200",
           "b300_sxm": "B300", "gb300": "GB300", "a100_sxm": "A100-SXM"}
ENGINES = ["trtllm", "vllm", "sglang"]
# the tables' dtype names -> mrep's (the peak a GEMM runs at); fp8_block is DeepSeek-style
# 128-blocked FP8 scaling, kept apart from per-tensor FP8 since its kernels differ
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4"}
ATTN_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
# MoE precisions: weights and activations alike, except w4a16 (MXFP4 weights read into 16-bit
# math, gpt-oss's checkpoint format)
MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4", "w4a16_mxfp4": "w4a16"}

# The grid: tokens from a single decode row to a long prefill chunk; the (N, K) of the linear
# layers of 7B-400B models (hidden 4096-16384, their MLP and fused QKV widths).
GEMM_M = [1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
GEMM_NK = [(n, k) for n in (1024, 4096, 6144, 12288, 16384, 51200) for k in (1024, 4096, 8192, 16384)]
ATTN_HEADS = [(32, 8, 128), (64, 8, 128), (8, 1, 128), (16, 2, 128), (32, 32, 128), (64, 64, 64), (40, 8, 128)]
CTX_BATCH, CTX_ISL = [1, 4, 16, 64], [128, 512, 2048, 8192, 16384]
GEN_BATCH, GEN_STEP = [1, 8, 32, 128, 512], [127, 1023, 4095, 16383]
# MoE layers (hidden, expert FFN width, routed experts, top-k) of the models people serve:
# Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3/R1 (or its 6144-wide sibling where a table lacks
# it), gpt-oss-120b, Mixtral-8x7B; tokens entering the layer over the whole EP group (the
# collector's num_tokens), balanced routing; expert TP or EP over 1 to 32 GPUs.
MOE_LAYERS = [(2048, 768, 128, 8), (4096, 1536, 128, 8), (7168, 2048, 256, 8), (6144, 2048, 256, 8),
              (2880, 2880, 128, 4), (4096, 14336, 8, 2)]
MOE_PAR = [(1, 1), (1, 4), (1, 8), (1, 32), (4, 1), (8, 1)]
MOE_TOKENS = [1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
# DeepSeek-V3's multi-head latent attention (TensorRT-LLM's and SGLang's MLA core tables; vLLM
# publishes whole modules only): its 128 heads split over TP 1, 2, 4 and 8, the 576-element
# latent (512 + 64 RoPE) per token, on the attention grid's batches and lengths
MLA_HEADS = [16, 32, 64, 128]


def newest(paths):
    """The file of the engine release with the most rows (ties: the last by name)."""
    best, rows = None, -1
    for p in sorted(paths):
        n = pq.ParquetFile(p).metadata.num_rows
        if n >= rows:
            best, rows = p, n
    return best


def groups(root, pkg_version):
    data = os.path.join(root, "systems", "data")
    for system, chip in SYSTEMS.items():
        for engine in ENGINES:
            for family, table in (("gemm", "gemm/%s/*/gemm_perf.parquet"),
                                  ("context_attention", "attention/%s/*/context_attention_perf.parquet"),
                                  ("generation_attention", "attention/%s/*/generation_attention_perf.parquet"),
                                  ("moe", "moe/%s/*/moe_perf.parquet"),
                                  ("context_mla", "mla/%s/*/context_mla_perf.parquet"),
                                  ("generation_mla", "mla/%s/*/generation_mla_perf.parquet")):
                path = newest(glob.glob(os.path.join(data, system, table % engine)))
                if path is None:
                    continue
                d = pq.read_table(path).to_pydict()
                yield from pick(family, d, chip, engine, os.path.relpath(path, os.path.dirname(root)), pkg_version)


def attention_shape(family, d, i):
    """Row i's (batch, queries, kv_len) on the grid, or None: a prefill (context_*) of isl
    tokens, or one decode step (generation_*) over a cache of isl + step tokens."""
    b = d["batch_size"][i]
    if family.startswith("context_"):
        if b not in CTX_BATCH or d["isl"][i] not in CTX_ISL:
            return None
        return b, d["isl"][i], d["isl"][i]
    if b not in GEN_BATCH or d["step"][i] not in GEN_STEP:
        return None
    return b, 1, d["isl"][i] + d["step"][i]


def pick(family, d, chip, engine, rel, pkg_version):
    n = len(d["latency"])
    out = {}
    for i in range(n):
        if family == "gemm":
            dt = GEMM_DTYPES.get(d["gemm_dtype"][i])
            if dt is None or d["m"][i] not in GEMM_M or (d["n"][i], d["k"][i]) not in GEMM_NK:
                continue
            key = (dt, "")
            row = [d["m"][i], d["n"][i], d["k"][i]]
        elif family == "moe":
            dt = MOE_DTYPES.get(d["moe_dtype"][i])
            layer = (d["hidden_size"][i], d["inter_size"][i], d["num_experts"][i], d["topk"][i])
            par = (d["moe_tp_size"][i], d["moe_ep_size"][i])
            if dt is None or d["distribution"][i] != "balanced" or layer not in MOE_LAYERS or par not in MOE_PAR or d["num_tokens"][i] not in MOE_TOKENS:
                continue
            key = (dt, "")
            row = [d["num_tokens"][i], *layer, *par]
        elif family in ("context_mla", "generation_mla"):
            dt, kv = ATTN_DTYPES.get(d["mla_dtype"][i]), ATTN_DTYPES.get(d["kv_cache_dtype"][i])
            if dt is None or kv is None or d["num_heads"][i] not in MLA_HEADS:
                continue
            shape = attention_shape(family, d, i)
            if shape is None:
                continue
            key = (dt, kv)
            row = [*shape, d["num_heads"][i], 1, 576]
        else:
            dt, kv = ATTN_DTYPES.get(d["attn_dtype"][i]), ATTN_DTYPES.get(d["kv_cache_dtype"][i])
            if dt is None or kv is None or d.get("window_size", [0] * n)[i] != 0 or d.get("beam_width", [1] * n)[i] != 1:
                continue
            if (d["num_heads"][i], d["num_key_value_heads"][i], d["head_dim"][i]) not in ATTN_HEADS:
                continue
            shape = attention_shape(family, d, i)
            if shape is None:
                continue
            key = (dt, kv)
            row = [*shape, d["num_heads"][i], d["num_key_value_heads"][i], d["head_dim"][i]]
        src = d["kernel_source"][i]
        g = out.setdefault((key, src), {})
        lat = d["latency"][i] * 1e3  # ms -> us
        k = tuple(row)
        # a shape timed twice keeps the faster (the engine's autotuner would pick it)
        if k not in g or lat < g[k]:
            g[k] = lat
    for ((dt, kv), src), rows in sorted(out.items()):
        cols = {"gemm": ["m", "n", "k", "us"],
                "moe": ["tokens", "hidden", "inter", "experts", "topk", "tp", "ep", "us"]}.get(
            family, ["batch", "queries", "kv_len", "heads", "kv_heads", "head_dim", "us"])
        yield {"chip": chip, "engine": engine, "release": d["version"][0], "family": family, "dtype": dt, "kv_dtype": kv,
               "kernel": src, "gpu": d["device"][0], "source": "aiconfigurator-core %s: %s" % (pkg_version, rel),
               "cols": cols, "rows": [list(k) + [round(v, 3)] for k, v in sorted(rows.items())]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, version = sys.argv[1], sys.argv[2]
    gs = list(groups(root, version))
    json.dump({"about": "Measured kernel latencies resampled from NVIDIA aiconfigurator-core %s (PyPI, Apache-2.0) by "
                        "calib/sources/aiconfigurator_kernels.py: dense GEMMs, context/generation attention, MoE "
                        "layers (balanced routing) and DeepSeek's MLA, one fixed grid of shapes per chip, engine and dtype; latency in microseconds." % version,
               "groups": gs}, sys.stdout, separators=(",", ":"))
    sys.stderr.write("%d groups, %d rows\n" % (len(gs), sum(len(g["rows"]) for g in gs)))


if __name__ == "__main__":
    main()
