#!/usr/bin/env python3
"""Write calib/amd_serving.json: AMD's own published LLM serving benchmarks on Instinct GPUs, as
bench_serve rows (the row format of calib/bench_serve.json: one row per figure, TTFT and TPOT in
s, output throughput in tok/s of the whole deployment), from the transcription
calib/sources/transcribed/amd_serving.json (one run per benchmark point, each naming its source).

Sources used (every run names its own, with the commit read):
- ROCm/ATOM gh-pages benchmark-dashboard/data.js (rocm.github.io/ATOM/benchmark-dashboard): the
  ATOM engine's nightly CI on 8x MI355X, newest entry labelled 'AMD Instinct MI355X' for
  DeepSeek-R1-0528 FP8 TP8 (+MTP3), DeepSeek-R1-0528-MXFP4 TP4 (+MTP3), gpt-oss-120b TP1
  (ATOM commit 14926968, image rocm/atom-dev:nightly_202605231519, gh-pages ee40f760) and
  Llama-3.3-70B-Instruct-MXFP4 TP1 (ATOM 514ed7c8, gh-pages d42315af); 1k/1k and 8k/1k, 4 to 256
  users, random range ratio 0.8, 10x users in prompts; mean TTFT, mean TPOT, output and total
  throughput (82 runs). These use InferenceMAX's scenario grid and client settings (their notes say
  so): AMD's own CI runs, not InferenceX data.
- ROCm/ATOM recipes/Qwen3-235b.md (MI355, TP8+EP8 and TP4+EP4, fixed lengths 1000-10000 in /
  1000 out, mean TTFT, mean TPOT, total throughput only), recipes/Kimi-K2-Thinking.md (MI355,
  TP4, MXFP4, 1k/1k), recipes/DeepSeek-R1.md (8x MI300X, FP8 and FP8+MTP3, 1k/1k at 128 and 256
  users, output throughput and mean TPOT).

Skipped and why: the ROCm blog 'Scaling AI Inference Performance with vLLM on MI355X' (8 Dec
2025), 'Supercharge DeepSeek-R1 Inference on MI300X' (SGLang) and 'Prefill Decode Disaggregation
on MI300X SGLang': their per-point figures are only in chart images, the text states ratios; the
amd.com article 'Single Node and Distributed Inference Performance on MI355X' (Jan 2026): only
search excerpts were reachable, no per-point numbers in them; 'AMD Instinct MI355X GPU Sets a New
Bar for DeepSeek Inference' and the ROCm blog 'DP Attention and TBO for DeepSeek-V4': figures
sourced from InferenceX (held out); the ATOM dashboard's ATOM-vLLM and ATOM-SGLang series (their
client and configuration vary by series and date, not resolved) and entries without an MI355X
label. No MI325X serving figure was found. Total throughput is kept in the transcription only
(bench_serve has no such metric); output throughput is never derived from it.

Lengths: ATOM's client (atom/benchmarks/benchmark_serving.py) draws each length uniformly from
[ratio x L, L], so the rows carry the mean, L x (1 + ratio) / 2, and the spread about it,
(1 - ratio) / (1 + ratio) (ratio 1: fixed lengths). Model names map to the bundled architecture:
Llama-3.3-70B -> Llama-3.1-70B-Instruct, Kimi-K2-Thinking -> Kimi-K2-Instruct, DeepSeek-R1-0528 ->
DeepSeek-R1, Qwen3-235B-A22B-Instruct-2507-FP8 -> Qwen3-235B-A22B.

Run from the repository root: python3 calib/sources/amd_serving_tables.py
"""
import json

SRC = "calib/sources/transcribed/amd_serving.json"
OUT = "calib/amd_serving.json"
METRIC = {"ttft": "s", "tpot": "s", "itl": "s", "e2el": "s", "output_throughput": "tok/s"}


def dtypes(r):
    """(GEMM dtype, weight dtype, KV dtype) for a run."""
    kv = r["kv"] if r["kv"] in ("fp8", "bf16") else "bf16"
    if r["weight"] == "fp8":
        return "fp8", "fp8", kv
    if r["weight"] == "mxfp4":
        if r["model"] == "gpt-oss-120b":
            return "bf16", "fp4", kv  # MXFP4 MoE weights, BF16 activations (attention BF16)
        if r["model"] == "DeepSeek-R1":
            return "fp8", "fp4", kv  # MoE experts MXFP4, attention FP8 per-channel
        return "fp4", "fp4", kv  # activation format not stated (ATOM picks it by batch size)
    return r["weight"], r["weight"], kv


def lengths(r):
    """Mean ISL, OSL and the relative spread for the client's length convention."""
    ratio = r["spread"] if r["spread"] is not None else 1.0
    if not r["spread_convention"].startswith("atom"):
        raise ValueError(f"{r['id']}: unknown length convention {r['spread_convention']!r}")
    mean = (1 + ratio) / 2
    return round(r["isl"] * mean), round(r["osl"] * mean), round((1 - ratio) / (1 + ratio), 4)


def rows(runs):
    out = []
    for r in runs:
        dt, wt, kv = dtypes(r)
        isl, osl, spread = lengths(r)
        for fig, v in r["figs"].items():
            if fig == "total_throughput":
                continue
            metric, _, stat = fig.partition(".")
            stat = stat or "mean"
            if metric == "e2el":
                metric = "e2e"
            unit = METRIC.get(metric) or METRIC[fig.split(".")[0]]
            measured = v / 1e3 if unit == "s" else v
            row = {
                "id": f"AMD-BS-{r['id']}-{metric}-{stat}",
                "kind": "bench_serve", "source": r["source"], "engine": r["engine"],
                "engine_version": r["version"], "model": r["model"], "chip": r["chip"],
                "dtype": dt, "weight_dtype": wt, "kv_dtype": kv, "gpus": r["gpus"], "tp": r["tp"],
                "isl": isl, "osl": osl, "length_spread": spread,
                "concurrency": r["conc"], "requests": r["requests"], "metric": metric, "stat": stat,
                "measured": round(measured, 6), "unit": unit,
                "note": f"{r['engine']} {r['version']}: {r['model_as_stated']}, {r['conc']} users in a closed loop, "
                        f"{r['requests']} requests, lengths {r['isl']}/{r['osl']} drawn from [{r['spread']} x, 1 x] "
                        f"(mean {isl}/{osl}); {r['note']}",
            }
            if r["ep"] > 1:
                row["ep"] = r["ep"]
            if r["dp_attention"] or r["disagg"]:
                raise ValueError(f"{r['id']}: attention-DP and disaggregated runs need their layout stated")
            if r["mtp"]:
                row["spec_tokens"] = r["mtp"]  # MTP heads; acceptance is the engine's (serve.Figures)
            if r.get("same_method_as_inferencex"):
                row["note"] += "; InferenceMAX's scenario grid and client settings (AMD's own CI run, not InferenceX data)"
            out.append(row)
    return out


def main():
    src = json.load(open(SRC))
    rs = rows(src["runs"])
    ids = [r["id"] for r in rs]
    assert len(ids) == len(set(ids)), "duplicate ids"
    about = ("AMD's own published serving benchmarks on Instinct GPUs (ATOM nightly CI dashboard on MI355X, ATOM "
             "recipes on MI355X and MI300X) as bench_serve rows: mean TTFT, mean TPOT and output throughput of a "
             "closed loop of users, for the whole deployment. Written by calib/sources/amd_serving_tables.py from "
             "calib/sources/transcribed/amd_serving.json, which names every source read and what was skipped. "
             "The CI dashboard's runs use InferenceMAX's scenario grid and client settings (their notes say so). "
             "Nothing is fitted to them unless a chip's lane says so.")
    with open(OUT, "w") as f:
        json.dump({"about": about, "rows": rs}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(rs)} rows from {len(src['runs'])} runs written to {OUT}")


if __name__ == "__main__":
    main()
