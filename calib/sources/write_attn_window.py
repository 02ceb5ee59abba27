#!/usr/bin/env python3
"""Fit the sliding-window attention figures (chips.Efficiency attn_window_k0, attn_window_k0_bwd)
and the learnable sink's backward cost (attn_sink_bwd_ns) to measured cuDNN kernels, and write
them into chips/chips.json for every chip of the silicon they were measured on.

The model (timing.Model.Kernel): a window of w keys runs at w/(w+K0) of the causal kernel's rate
per score, K0 being the per-query-tile work outside the window's key loop, in keys, one per pass.

- Hopper (H100, H200, H800, H20): measured on a lent H100 (calib/kernels_cudnn_h100.json,
  calib/sources/hopper_moe_attention_kernels.py): K0 fitted to a window sweep (128-4,096 keys,
  8,192 tokens, 64 query and 8 key-value heads of 64 and of 128) against the causal kernel of
  the same shape; and the sink's backward cost per token and query head, the median over the
  causal and 128-key-window sequences of (sink - plain) / (tokens x heads).
- Blackwell (B200, GB200) and Blackwell Ultra (B300, GB300): NVIDIA's published cuDNN benchmark
  (calib/sources/transcribed/cudnn_sdpa_benchmark.json): 128 heads of 64 windowed, against the
  causal kernel of Llama-3.1's 64 heads of 128 brought to a head of 64 by the exponential term
  mrep's timing applies (timing.Model.expShare: d0 = peak / (4 x exp rate)). No sink is measured
  there: Blackwell's attn_sink_bwd_ns is left unset. Only the 128-key window is published, so
  K0 = 128 (1 - r) / r with r the window's rate over the causal one, the median over 4k-16k.

NVIDIA's H200 table (1,024-key windows over 64/8 heads of 64, batch 2, 2,048-32,768 tokens) is
printed as a check of the Hopper fit, not fitted.

Usage: python3 calib/sources/write_attn_window.py [--transcribe CUDNN_FRONTEND_GIT_DIR]
"""
import collections
import csv
import io
import json
import math
import statistics
import subprocess
import sys

TRANSCRIBED = "calib/sources/transcribed/cudnn_sdpa_benchmark.json"
H100 = "calib/kernels_cudnn_h100.json"
CHIPS = "chips/chips.json"
WINDOW = 128
CSV_FILES = [
    "benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260424_100750.csv",
    "benchmark/sdpa_benchmark_training/results/llama3.1/gb300/llama3.1_20260424_100757.csv",
    "benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/gpt_oss_20260424_100011.csv",
    "benchmark/sdpa_benchmark_training/results/gpt_oss/gb300/gpt_oss_20260424_100022.csv",
    "benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv",
    "benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/gpt_oss_20260227_034819.csv",
]
FAMILIES = {  # chips -> where their figures come from
    "hopper": ["H100-SXM", "H100-PCIe", "H100-NVL", "H100-96GB", "H800", "H20", "H200", "H200-NVL"],
    "GB200": ["B200", "GB200"],
    "GB300": ["B300", "GB300"],
}


def transcribe(gitdir):
    """The benchmark's BF16 causal cuDNN rows, non-deterministic backward, one per pass."""
    commit = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    for f in CSV_FILES:
        txt = subprocess.run(["git", "--git-dir", gitdir, "show", f"{commit}:{f}"], capture_output=True, text=True, check=True).stdout
        for r in csv.DictReader(io.StringIO(txt)):
            if (r.get("backend"), r.get("data_type"), r.get("attn_mask"), r.get("deterministic_bwd")) != ("cudnn", "bfloat16", "top_left", "False"):
                continue
            w = r.get("sliding_window_size")
            base = {"file": f, "gpu": r["gpu_name"], "cudnn": r.get("cudnn_backend_version"), "batch": int(r["batch_size"]),
                    "seq": int(r["q_seqlen"]), "heads_q": int(r["num_q_heads"]), "heads_kv": int(r["num_kv_heads"]),
                    "head_dim": int(r["head_dim_qk"]), "window": int(float(w)) if w not in (None, "", "None") else 0}
            if r.get("profile_pass") == "both":
                if r.get("fwd_time_ms"):
                    rows += [{**base, "pass": "fwd", "ms": float(r["fwd_time_ms"])}, {**base, "pass": "bwd", "ms": float(r["bwd_time_ms"])}]
            else:
                rows.append({**base, "pass": r["profile_pass"], "ms": float(r["time_ms"])})
    about = (f"cuDNN SDPA training benchmark results published by NVIDIA in NVIDIA/cudnn-frontend @{commit} "
             "(benchmark/sdpa_benchmark_training/results: BF16, top-left causal, non-deterministic backward, cudnn backend "
             "only; window = the diagonal band's left bound, 0 for none). Transcribed by calib/sources/write_attn_window.py --transcribe.")
    json.dump({"about": about, "rows": rows}, open(TRANSCRIBED, "w"), indent=1)
    open(TRANSCRIBED, "a").write("\n")


def scores(s, w):
    """Scores a causal kernel computes over s tokens, a window of w keys capping each row."""
    if w and w < s:
        return w * (w + 1) / 2 + (s - w) * w
    return s * (s + 1) / 2


def rate(batch, s, heads, w, us):
    return batch * heads * scores(s, w) / us


def k0_of(r):
    return WINDOW * (1 - r) / r


def exp_share(chip, d, backward):
    """timing.Model.expShare: a head of d's time per tensor-core FLOP over a 128-wide head's."""
    d0 = chip["peak_tflops"]["bf16"] / (4 * chip["exp_tera"])
    if backward:
        d0 /= 2.5
    return (d + d0) / d * 128 / (128 + d0)


def fit_k0(pairs):
    """The K0 whose w/(w+K0) best matches the measured (window, ratio) pairs in log terms."""
    best = None
    for k0 in range(0, 3001):
        err = sum((math.log(w / (w + k0)) - math.log(r)) ** 2 for w, r in pairs)
        if best is None or err < best[0]:
            best = (err, k0)
    return float(best[1])


def hopper(meas):
    a = [r for r in meas["attention"] if "error" not in r and r["batch"] == 1 and r["seq"] >= 2048 and r["head_dim"] == 64]
    by = {(r["seq"], r["window"], r["sink"]): r for r in a}
    sweep = [r for r in meas["window_sweep"] if "error" not in r]
    out, notes = {}, []
    for key, col in (("attn_window_k0", "fwd_us"), ("attn_window_k0_bwd", "bwd_us")):
        # fitted to the window sweep (8,192 tokens, windows 128-4,096, heads of 64 and 128)
        pairs = []
        for r in sweep:
            full = [f for f in sweep if f["window"] == 0 and f["head_dim"] == r["head_dim"]]
            if r["window"] and full:
                pairs.append((r["window"], rate(1, r["seq"], 64, r["window"], r[col]) / rate(1, r["seq"], 64, 0, full[0][col])))
        k0 = fit_k0(pairs)
        out[key] = k0
        worst = max(abs(w / (w + k0) / r - 1) for w, r in pairs)
        # checked on the 128-key window at 2,048-16,384 tokens
        rs = []
        for s in sorted({r["seq"] for r in a}):
            full, win = by.get((s, 0, False)), by.get((s, WINDOW, False))
            if full and win:
                rs.append(rate(1, s, 64, WINDOW, win[col]) / rate(1, s, 64, 0, full[col]))
        notes.append(f"{col[:3]}: K0 {k0:.0f} keys fitted to {len(pairs)} windows of 128-4,096 keys at 8,192 tokens (worst "
                     f"{100 * worst:.0f}% off); the 128-key window at 2,048-16,384 tokens measured at "
                     f"{', '.join(f'{x:.3f}' for x in rs)} of the causal rate, the fit says {WINDOW / (WINDOW + k0):.3f}")
    extra = []
    for (s, w, sink), r in by.items():
        plain = by.get((s, w, False))
        if sink and plain:
            extra.append((r["bwd_us"] - plain["bwd_us"]) * 1e3 / (s * 64))
    out["attn_sink_bwd_ns"] = round(statistics.median(extra), 2)
    notes.append(f"sink backward {', '.join(f'{x:.2f}' for x in sorted(extra))} ns per token and head")
    src = (f"measured on a lent H100 80GB HBM3 (cuDNN {meas['cudnn_backend']} through cudnn-frontend {meas['cudnn_frontend']}, "
           f"{H100}, calib/sources/hopper_moe_attention_kernels.py): 128-key windows against the causal kernel, 64 query and "
           f"8 key-value heads of 64, 2,048-16,384 tokens: " + "; ".join(notes) + "; fitted by calib/sources/write_attn_window.py")
    return out, src


def blackwell(pub, chip, name):
    rows = [r for r in pub["rows"] if name in r["gpu"].replace(" ", "") and 4096 <= r["seq"] <= 16384]
    out, notes = {}, []
    for key, p in (("attn_window_k0", "fwd"), ("attn_window_k0_bwd", "bwd")):
        rs = []
        for s in sorted({r["seq"] for r in rows}):
            full = [r for r in rows if r["seq"] == s and r["window"] == 0 and r["pass"] == p and r["head_dim"] == 128]
            win = [r for r in rows if r["seq"] == s and r["window"] == WINDOW and r["pass"] == p and r["head_dim"] == 64]
            if not full or not win:
                continue
            f, w = full[0], win[0]
            # the causal kernel's rate per score at a head of 64: the same FLOPs per second at 128
            # wide, x 2 scores per FLOP, slowed by the exponential term
            full64 = rate(f["batch"], s, f["heads_q"], 0, f["ms"] * 1e3) * 2 / exp_share(chip, 64, p == "bwd")
            rs.append(rate(w["batch"], s, w["heads_q"], WINDOW, w["ms"] * 1e3) / full64)
        r = statistics.median(rs)
        out[key] = round(k0_of(r), 1)
        notes.append(f"{p} ratio {', '.join(f'{x:.3f}' for x in rs)} (median {r:.3f})")
    src = (f"NVIDIA's cuDNN benchmark on {name} ({TRANSCRIBED}: NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/"
           f"results, cuDNN {rows[0]['cudnn']}): 128-key windows over 128 heads of 64 against Llama-3.1's causal 64 heads of "
           f"128 brought to a head of 64 by timing's exponential term, 4,096-16,384 tokens: " + "; ".join(notes) +
           "; fitted by calib/sources/write_attn_window.py. No sink is measured on this silicon")
    return out, src


def check_h200(pub, meas, figs):
    """NVIDIA's H200 rows (1,024-key windows, batch 2) against the H100 fit: the window's rate
    predicted from the H100's causal kernel of the same shape."""
    full = {(r["seq"], c): r[c] for r in meas["attention"] if r["batch"] == 1 and r["window"] == 0 and not r["sink"]
            and r["head_dim"] == 64 and "error" not in r for c in ("fwd_us", "bwd_us")}
    for r in pub["rows"]:
        if "H200" not in r["gpu"] or not r["window"] or (r["seq"], "fwd_us") not in full:
            continue
        col, key = ("fwd_us", "attn_window_k0") if r["pass"] == "fwd" else ("bwd_us", "attn_window_k0_bwd")
        k0 = figs[key]
        pred = r["batch"] * scores(r["seq"], r["window"]) / (scores(r["seq"], 0) / full[(r["seq"], col)]) / (r["window"] / (r["window"] + k0))
        print(f"check: NVIDIA's H200 {r['window']}-key window, {r['seq']} tokens, {r['pass']}: {r['ms']:.3f} ms measured, "
              f"{pred / 1e3:.3f} ms from the H100 fit ({pred / 1e3 / r['ms'] - 1:+.0%})")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--transcribe":
        transcribe(sys.argv[2])
    pub, meas = json.load(open(TRANSCRIBED)), json.load(open(H100))
    d = json.load(open(CHIPS), object_pairs_hook=collections.OrderedDict)
    chips = {c["name"]: c for c in d["chips"]}
    figs = {"hopper": hopper(meas), "GB200": blackwell(pub, chips["GB200"], "GB200"), "GB300": blackwell(pub, chips["GB300"], "GB300")}
    check_h200(pub, meas, figs["hopper"][0])
    for fam, (vals, src) in figs.items():
        print(fam, dict(vals))
        for name in FAMILIES[fam]:
            eff = chips[name].setdefault("efficiency", collections.OrderedDict())
            srcs = eff.setdefault("sources", collections.OrderedDict())
            for k, v in vals.items():
                eff[k] = v
                srcs[k] = src if name in ("H100-SXM", "GB200", "GB300") else f"carried from {'H100-SXM' if fam == 'hopper' else fam} (the same SM and cuDNN kernels): " + src
    json.dump(d, open(CHIPS, "w"), indent=2, ensure_ascii=False)
    open(CHIPS, "a").write("\n")


if __name__ == "__main__":
    main()
