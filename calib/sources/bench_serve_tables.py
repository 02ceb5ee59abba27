#!/usr/bin/env python3
"""Write calib/bench_serve.json: serving benchmarks (`vllm bench serve`, `sglang.bench_serving`)
published by the engines' own projects, every row of each table on a random dataset, as
bench_serve rows (TTFT, TPOT, output throughput under a closed loop of users).

Sources (each run below names its own, with the commit read):
- vllm-project/vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md @5ffe2dd5, Table 4
  (Llama-3.1-8B, one H100, 8 users, 150 requests of about 20k in / 2k out, +-15 percent).
- vllm-project/perf-dashboard benchmark/results/gptoss_fp4_vllm_tp8_isl1024_osl1024_conc64.json
  @5533cde6 (gpt-oss-120b MXFP4 on 8 H200, TP8, 1024/1024 fixed, 64 users, 640 requests).
- sgl-project/sgl-cookbook docs/autoregressive/{Llama/Llama3.1.md @1e3601bc, Llama/Llama4.md
  @855445bd, DeepSeek/DeepSeek-R1.md @268193cc, Qwen/Qwen3.md @8e3bdb7e}: bench_serving at
  1/16/100 (or 64) users, 5x or 10x the users in requests, random 1000/1000, 1000/8000 and
  8000/1000 without --random-range-ratio, so lengths are uniform from 1 to the target: the rows
  carry the actual mean lengths the runs printed and a spread of 1.

Skipped and why: runs on ShareGPT (sgl-cookbook GPT-OSS.md and DeepSeek-V3.md, sglang
benchmark/benchmark_vllm_060): their length distribution is not a uniform one; vllm-project/recipes'
DeepSeek "expected output" (one request, GPU not stated); TensorRT-LLM's trtllm-serve tutorial
output (GPU not stated, not a measurement to fit). Model names map to the bundled architecture:
Llama-3.1-70B (base) -> Llama-3.1-70B-Instruct, DeepSeek-R1-0528 -> DeepSeek-V3,
Qwen3-235B-A22B-Instruct-2507 -> Qwen3-235B-A22B.

Run from the repository root: python3 calib/sources/bench_serve_tables.py
"""
import json

RUNS = [
    {"source": "vllm-project/vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md @5ffe2dd543a30f34309d71d8374803612223e9fb", "engine": "vllm", "version": "v0.19.1 (inferred, not stated for this table)", "model": "Llama-3.1-8B", "chip": "H100-SXM", "tp": 1, "gpus": 1, "weight": "BF16 (assumed; not stated)", "kv": "BF16 (auto)", "conc": 8, "requests": 150, "isl": 20000, "osl": 2000, "spread": 0.15, "figs": {"ttft.median": 763.6, "itl.median": 15.18, "output_throughput.mean": 450.3}},
    {"source": "vllm-project/vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md @5ffe2dd543a30f34309d71d8374803612223e9fb", "engine": "vllm", "version": "v0.19.1 (inferred, not stated for this table)", "model": "Llama-3.1-8B", "chip": "H100-SXM", "tp": 1, "gpus": 1, "weight": "BF16 (assumed; not stated)", "kv": "FP8", "conc": 8, "requests": 150, "isl": 20000, "osl": 2000, "spread": 0.15, "figs": {"ttft.median": 742.8, "itl.median": 12.93, "output_throughput.mean": 517.5}},
    {"source": "vllm-project/perf-dashboard benchmark/results/gptoss_fp4_vllm_tp8_isl1024_osl1024_conc64.json + agg_gptoss_fp4_vllm_tp8_isl1024_osl1024_conc64.json + server.log @5533cde66f7a52fdf5802d654f447e9201a01875 (removed again in later commit 29c3b079)", "engine": "vllm", "version": "0.15.1 per server.log banner (agg json says image vllm/vllm-openai:v0.13.0 – conflict)", "model": "gpt-oss-120b", "chip": "H200", "tp": 8, "gpus": 8, "weight": "MXFP4 MoE (quantization=mxfp4), BF16 activations", "kv": "", "conc": 64, "requests": 640, "isl": 1024, "osl": 1024, "spread": 0.0, "figs": {"ttft.median": 330.675, "ttft.mean": 333.587, "tpot.median": 6.613, "output_throughput.mean": 9216.78}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 422.0, "spread": 1.0, "figs": {"ttft.median": 131.77, "ttft.mean": 131.61, "tpot.median": 18.63, "output_throughput.mean": 52.88}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 495.9, "osl": 510.1, "spread": 1.0, "figs": {"ttft.median": 147.02, "ttft.mean": 264.84, "tpot.median": 26.08, "output_throughput.mean": 513.48}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 100, "requests": 500, "isl": 499.7, "osl": 505.3, "spread": 1.0, "figs": {"ttft.median": 184.22, "ttft.mean": 245.98, "tpot.median": 48.67, "output_throughput.mean": 1919.38}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 4194.1, "osl": 422.0, "spread": 1.0, "figs": {"ttft.median": 318.02, "ttft.mean": 395.25, "tpot.median": 18.81, "output_throughput.mean": 50.69}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 3750.2, "osl": 520.9, "spread": 1.0, "figs": {"ttft.median": 531.82, "ttft.mean": 603.42, "tpot.median": 36.73, "output_throughput.mean": 389.0}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama3.1.md @1e3601bc19dbca27b9791e741e13505acb21cdfe", "engine": "sglang", "version": "0.5.6", "model": "Llama-3.1-70B-Instruct", "chip": "A100-SXM", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 64, "requests": 320, "isl": 3980.9, "osl": 531.2, "spread": 1.0, "figs": {"ttft.median": 616.38, "ttft.mean": 633.32, "tpot.median": 82.85, "output_throughput.mean": 788.27}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama4.md @855445bd4d6116d9881e4b6056e62e95d0828f73", "engine": "sglang", "version": "0.5.9", "model": "Llama-4-Scout-17B-16E-Instruct", "chip": "MI300X", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 422.0, "spread": 1.0, "figs": {"ttft.median": 68.57, "ttft.mean": 4246.98, "tpot.median": 7.4, "output_throughput.mean": 57.42}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama4.md @855445bd4d6116d9881e4b6056e62e95d0828f73", "engine": "sglang", "version": "0.5.9", "model": "Llama-4-Scout-17B-16E-Instruct", "chip": "MI300X", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 620.9, "osl": 510.1, "spread": 1.0, "figs": {"ttft.median": 87.42, "ttft.mean": 124.44, "tpot.median": 12.0, "output_throughput.mean": 1152.47}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Llama/Llama4.md @855445bd4d6116d9881e4b6056e62e95d0828f73", "engine": "sglang", "version": "0.5.9", "model": "Llama-4-Scout-17B-16E-Instruct", "chip": "MI300X", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 100, "requests": 500, "isl": 499.7, "osl": 505.3, "spread": 1.0, "figs": {"ttft.median": 129.96, "ttft.mean": 204.46, "tpot.median": 42.9, "output_throughput.mean": 2944.82}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 421.0, "spread": 1.0, "figs": {"ttft.median": 140.76, "ttft.mean": 153.0, "tpot.median": 9.15, "output_throughput.mean": 105.24}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 16, "requests": 80, "isl": 495.9, "osl": 509.1, "spread": 1.0, "figs": {"ttft.median": 131.71, "ttft.mean": 273.51, "tpot.median": 17.46, "output_throughput.mean": 795.3}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 100, "requests": 500, "isl": 499.7, "osl": 504.3, "spread": 1.0, "figs": {"ttft.median": 147.62, "ttft.mean": 563.14, "tpot.median": 41.98, "output_throughput.mean": 2282.9}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 4445.2, "spread": 1.0, "figs": {"ttft.median": 126.19, "ttft.mean": 125.76, "tpot.median": 9.2, "output_throughput.mean": 108.07}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 16, "requests": 80, "isl": 495.9, "osl": 3977.8, "spread": 1.0, "figs": {"ttft.median": 153.75, "ttft.mean": 176.02, "tpot.median": 15.59, "output_throughput.mean": 912.02}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 64, "requests": 320, "isl": 496.7, "osl": 4064.7, "spread": 1.0, "figs": {"ttft.median": 158.15, "ttft.mean": 223.91, "tpot.median": 26.72, "output_throughput.mean": 2207.16}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 1, "requests": 10, "isl": 4194.1, "osl": 421.0, "spread": 1.0, "figs": {"ttft.median": 154.96, "ttft.mean": 165.91, "tpot.median": 9.27, "output_throughput.mean": 103.56}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 16, "requests": 80, "isl": 3750.2, "osl": 519.9, "spread": 1.0, "figs": {"ttft.median": 189.59, "ttft.mean": 486.8, "tpot.median": 19.23, "output_throughput.mean": 733.41}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/DeepSeek/DeepSeek-R1.md @268193ccf59631fe01880790f184bee7c35eee95", "engine": "sglang", "version": "0.5.6.post1", "model": "DeepSeek-V3", "chip": "B200", "tp": 8, "gpus": 8, "weight": "FP8 (native DeepSeek block FP8)", "kv": "", "conc": 64, "requests": 320, "isl": 3980.9, "osl": 530.2, "spread": 1.0, "figs": {"ttft.median": 224.92, "ttft.mean": 913.93, "tpot.median": 40.99, "output_throughput.mean": 1468.5}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 421.0, "spread": 1.0, "figs": {"ttft.median": 92.18, "ttft.mean": 99.03, "tpot.median": 10.12, "output_throughput.mean": 96.65}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 495.9, "osl": 509.1, "spread": 1.0, "figs": {"ttft.median": 88.82, "ttft.mean": 215.7, "tpot.median": 16.12, "output_throughput.mean": 832.04}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 100, "requests": 500, "isl": 499.7, "osl": 504.3, "spread": 1.0, "figs": {"ttft.median": 122.68, "ttft.mean": 260.55, "tpot.median": 34.04, "output_throughput.mean": 2738.78}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 610.1, "osl": 4445.2, "spread": 1.0, "figs": {"ttft.median": 109.36, "ttft.mean": 110.6, "tpot.median": 10.24, "output_throughput.mean": 97.17}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 495.9, "osl": 3977.8, "spread": 1.0, "figs": {"ttft.median": 101.61, "ttft.mean": 169.71, "tpot.median": 14.91, "output_throughput.mean": 935.49}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 64, "requests": 320, "isl": 496.7, "osl": 4064.7, "spread": 1.0, "figs": {"ttft.median": 129.11, "ttft.mean": 265.03, "tpot.median": 24.07, "output_throughput.mean": 2387.34}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 1, "requests": 10, "isl": 4194.1, "osl": 421.0, "spread": 1.0, "figs": {"ttft.median": 114.85, "ttft.mean": 139.9, "tpot.median": 10.33, "output_throughput.mean": 93.94}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 16, "requests": 80, "isl": 3750.2, "osl": 519.9, "spread": 1.0, "figs": {"ttft.median": 168.48, "ttft.mean": 284.29, "tpot.median": 16.66, "output_throughput.mean": 820.69}},
    {"source": "sgl-project/sgl-cookbook docs/autoregressive/Qwen/Qwen3.md @8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894", "engine": "sglang", "version": "0.5.6", "model": "Qwen3-235B-A22B", "chip": "B200", "tp": 8, "gpus": 8, "weight": "BF16", "kv": "", "conc": 64, "requests": 320, "isl": 3980.9, "osl": 530.2, "spread": 1.0, "figs": {"ttft.median": 203.27, "ttft.mean": 238.22, "tpot.median": 34.27, "output_throughput.mean": 1790.43}},
]

DTYPES = {  # (dtype of the GEMMs, weights, KV cache) per run, from the weight column
    "BF16": ("bf16", "bf16", "bf16"),
    "FP8 (native DeepSeek block FP8)": ("fp8", "fp8", "bf16"),
    "MXFP4 MoE (quantization=mxfp4), BF16 activations": ("bf16", "fp4", "bf16"),
    "BF16 (assumed; not stated)": ("bf16", "bf16", "bf16"),
}
METRIC = {"ttft": "s", "tpot": "s", "itl": "s", "output_throughput": "tok/s"}


def rows():
    out = []
    for r in RUNS:
        dt, wt, kv = DTYPES[r["weight"]]
        if r["kv"].startswith("FP8"):
            kv = "fp8"
        tag = r["source"].split()[1].split("/")[-1].replace(".md", "").replace(".json", "").lower()
        for fig, v in r["figs"].items():
            metric, stat = fig.split(".")
            unit = METRIC[metric]
            measured = v / 1e3 if unit == "s" else v
            out.append({
                "id": f"BS-{r['engine']}-{tag}-{r['chip'].lower()}-kv{kv}-isl{round(r['isl'])}-osl{round(r['osl'])}-c{r['conc']}-{metric}-{stat}",
                "kind": "bench_serve", "source": r["source"], "engine": r["engine"],
                "engine_version": r["version"], "model": r["model"], "chip": r["chip"],
                "dtype": dt, "weight_dtype": wt, "kv_dtype": kv, "gpus": r["gpus"], "tp": r["tp"],
                "isl": round(r["isl"]), "osl": round(r["osl"]), "length_spread": r["spread"],
                "concurrency": r["conc"], "requests": r["requests"], "metric": metric, "stat": stat,
                "measured": round(measured, 6), "unit": unit,
                "note": f"{r['engine']} {r['version']}: {r['conc']} users in a closed loop, {r['requests']} requests, "
                        f"lengths about {round(r['isl'])} in / {round(r['osl'])} out (uniform over mean x [1-{r['spread']}, 1+{r['spread']}])",
            })
    return out


def main():
    about = ("Serving benchmarks the engines' own projects published (vLLM: its blog and perf-dashboard; "
             "SGLang: sgl-cookbook), as bench_serve rows: TTFT, TPOT and output throughput of a closed loop "
             "of users, predicted by running the requests through the engine's scheduler step by step "
             "(serve.Replica.Simulate). Written by calib/sources/bench_serve_tables.py, which names every "
             "source and what was skipped. Nothing is fitted to them unless a chip's lane says so.")
    rs = rows()
    with open("calib/bench_serve.json", "w") as f:
        json.dump({"about": about, "rows": rs}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(rs)} rows written to calib/bench_serve.json")


if __name__ == "__main__":
    main()
