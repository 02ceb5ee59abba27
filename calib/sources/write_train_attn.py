#!/usr/bin/env python3
"""Fit the training attention figures (chips.Efficiency train_attn_frac) to measured cuDNN
kernels and write them into chips/chips.json for every chip of the silicon they were measured on.

Megatron's attention is cuDNN's fused kernel through Transformer Engine, in 16 bits or, with
--fp8-dot-product-attention, in the recipe's FP8 (per-tensor scaled, or block-scaled MXFP8). mrep
times a causal kernel of h heads over s tokens as FLOPs / (peak x frac x wave / expShare(d)):
FLOPs = 2 x batch x h x s(s+1)/2 x (d_qk + d_v) forward and 2.5x that backward, peak the
precision's, d = (d_qk + d_v)/2, expShare the exponential term of timing.Model.expShare
(d0 = peak / (4 x exponentials per second), over 2.5 backward) and wave the tile quantization of
timing.Model.WaveEfficiency (about 1 here). Each figure is the median over the measured kernels
of the frac that times each exactly; leave-one-shape-out errors go into its source.

- Blackwell (B200, GB200) and Blackwell Ultra (B300, GB300): NVIDIA's published cuDNN training
  benchmark (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results, transcribed by
  --transcribe into calib/sources/transcribed/cudnn_sdpa_training.json): causal, no window
  (the windowed rows are transcribed as a check), non-deterministic backward, 4,096-16,384 tokens, the shapes of Llama-3.1 (64 query and 8
  key-value heads of 128), DeepSeek-V3 and Kimi-K2.6 (128 and 64 heads, 192-wide query-key and
  128-wide values) and Qwen3.5 (forward only), in BF16, FP8 and MXFP8.
- Hopper (H100, H200, H800, H20): 16-bit only, measured on a lent H100 (calib/kernels_cudnn_h100.json:
  64 query and 8 key-value heads of 64 and 128, batch 1, 4,096-16,384 tokens). NVIDIA's H200
  table is printed as a check, not fitted. No FP8 attention is measured on Hopper: its FP8
  attention is timed as 16-bit.

Usage: python3 calib/sources/write_train_attn.py [--transcribe CUDNN_FRONTEND_GIT_DIR]
"""
import collections
import csv
import io
import json
import math
import statistics
import subprocess
import sys

TRANSCRIBED = "calib/sources/transcribed/cudnn_sdpa_training.json"
H100 = "calib/kernels_cudnn_h100.json"
CHIPS = "chips/chips.json"
RESULTS = "benchmark/sdpa_benchmark_training/results/"
FAMILIES = {  # the chip the figures are measured on -> the chips of its silicon
    "GB200": ["B200", "GB200"],
    "GB300": ["B300", "GB300"],
    "H100-SXM": ["H100-SXM", "H100-PCIe", "H100-NVL", "H100-96GB", "H800", "H20", "H200", "H200-NVL"],
}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "mxfp8": "mxfp8"}
SEQS = (4096, 16384)  # the training sequences of the measured runs, and twice and four times them
TILES = [(64, 128), (128, 128), (128, 256)]  # chips.json efficiency_defaults gemm_tiles


def transcribe(gitdir):
    """Every causal, non-deterministic cuDNN row of the benchmark's results."""
    commit = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    files = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", commit, RESULTS],
                           capture_output=True, text=True, check=True).stdout.split()
    rows = []
    for f in sorted(x for x in files if x.endswith(".csv")):
        txt = subprocess.run(["git", "--git-dir", gitdir, "show", f"{commit}:{f}"], capture_output=True, text=True, check=True).stdout
        for r in csv.DictReader(io.StringIO(txt)):
            if (r.get("backend"), r.get("attn_mask"), r.get("deterministic_bwd"), r.get("success")) != ("cudnn", "top_left", "False", "True"):
                continue
            if r["q_seqlen"] != r["kv_seqlen"]:
                continue
            w = r.get("sliding_window_size")
            if r["data_type"] not in DTYPES:
                continue
            base = {"file": f, "gpu": r["gpu_name"], "cudnn": r.get("cudnn_backend_version"), "model": r["model_name"],
                    "dtype": DTYPES[r["data_type"]], "batch": int(r["batch_size"]), "seq": int(r["q_seqlen"]),
                    "heads_q": int(r["num_q_heads"]), "heads_kv": int(r["num_kv_heads"]),
                    "head_dim_qk": int(r["head_dim_qk"]), "head_dim_v": int(r["head_dim_vo"]),
                    "window": int(float(w)) if w not in (None, "", "None") else 0}
            if r["profile_pass"] == "both":  # the H200 files time both passes in one row
                if r.get("fwd_time_ms") and r.get("bwd_time_ms"):
                    rows += [{**base, "pass": "fwd", "ms": float(r["fwd_time_ms"])}, {**base, "pass": "bwd", "ms": float(r["bwd_time_ms"])}]
            elif r["profile_pass"] in ("fwd", "bwd"):
                rows.append({**base, "pass": r["profile_pass"], "ms": float(r["time_ms"])})
    about = (f"cuDNN SDPA training benchmark results published by NVIDIA in NVIDIA/cudnn-frontend @{commit} "
             f"({RESULTS}*/*.csv): the cudnn backend's causal (top_left), non-deterministic-backward rows in BF16, FP8 "
             "and MXFP8 (window: the diagonal band's left bound, 0 for none). Transcribed by "
             "calib/sources/write_train_attn.py --transcribe.")
    json.dump({"about": about, "rows": rows}, open(TRANSCRIBED, "w"), indent=1)
    open(TRANSCRIBED, "a").write("\n")


def wave(chip, queries, groups):
    """timing.Model.WaveEfficiency(queries, 128, 128, groups)."""
    sms, best = chip["sms"], 0.0
    for tm_, tn_ in TILES:
        tm, tn = math.ceil(queries / tm_), math.ceil(128 / tn_)
        quant = queries / (tm * tm_) * 128 / (tn * tn_)
        n = tm * tn * groups
        split = 1.0
        if n < sms:
            split = max(1, min(math.floor(sms / n), math.floor(128 / 128)))
        n *= split
        best = max(best, quant * n / (math.ceil(n / sms) * sms))
    return best


def frac_of(chip, r):
    """The fraction of the precision's peak that times the kernel r exactly (timing.Model.Kernel)."""
    peak = chip["peak_tflops"]["fp8" if r["dtype"] != "bf16" else "bf16"] * 1e12
    s, d = r["seq"], (r["head_dim_qk"] + r["head_dim_v"]) / 2
    flops = 2 * r["batch"] * r["heads_q"] * s * (s + 1) / 2 * (r["head_dim_qk"] + r["head_dim_v"])
    d0 = peak / (4 * chip["exp_tera"] * 1e12)
    if r["pass"] == "bwd":
        flops *= 2.5
        d0 /= 2.5
    exp_share = (d + d0) / d * 128 / (128 + d0)
    eta = flops / (peak * r["ms"] * 1e-3)
    return eta * exp_share / wave(chip, s, r["batch"] * r["heads_q"])


def fit(chip, rows, label):
    """Each key's median frac, with its leave-one-shape-out errors, as (figures, source notes)."""
    out, notes = collections.OrderedDict(), []
    by = collections.defaultdict(list)
    for r in rows:
        by[r["dtype"] + ("_bwd" if r["pass"] == "bwd" else "")].append((r, frac_of(chip, r)))
    for key in ("bf16", "bf16_bwd", "fp8", "fp8_bwd", "mxfp8", "mxfp8_bwd"):
        pts = by.get(key)
        if not pts:
            continue
        f = statistics.median(x for _, x in pts)
        shapes = sorted({r["model"] for r, _ in pts})
        loo = []
        for m in shapes:
            rest = [x for r, x in pts if r["model"] != m]
            if not rest:
                continue
            fm = statistics.median(rest)
            loo += [abs(x / fm - 1) for r, x in pts if r["model"] == m]  # time error: measured frac over predicted
        out[key] = round(f, 3)
        spread = ", ".join(f"{m} {statistics.median(x for r, x in pts if r['model'] == m):.3f}" for m in shapes)
        held = (f"; each shape held out and predicted from the others: median {100 * statistics.median(loo):.0f}%, "
                f"worst {100 * max(loo):.0f}%") if loo else ""
        notes.append(f"{key} {f:.3f} (median of {len(pts)} kernels; by shape {spread}{held})")
    return out, f"{label}: " + "; ".join(notes) + "; fitted by calib/sources/write_train_attn.py"


def hopper_rows(meas):
    return [{"model": f"d{r['head_dim']}", "dtype": "bf16", "batch": r["batch"], "seq": r["seq"], "heads_q": r["heads_q"],
             "heads_kv": r["heads_kv"], "head_dim_qk": r["head_dim"], "head_dim_v": r["head_dim"], "pass": p, "ms": r[c] / 1e3}
            for r in meas["attention"] if "error" not in r and r["window"] == 0 and not r["sink"] and SEQS[0] <= r["seq"] <= SEQS[1]
            for p, c in (("fwd", "fwd_us"), ("bwd", "bwd_us"))]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--transcribe":
        transcribe(sys.argv[2])
    pub, meas = json.load(open(TRANSCRIBED)), json.load(open(H100))
    d = json.load(open(CHIPS), object_pairs_hook=collections.OrderedDict)
    chips = {c["name"]: c for c in d["chips"]}
    figs = {}
    for name in ("GB200", "GB300"):
        rows = [r for r in pub["rows"] if r["gpu"].replace(" ", "").endswith(name) and SEQS[0] <= r["seq"] <= SEQS[1] and not r["window"]]
        figs[name] = fit(chips[name], rows, f"NVIDIA's cuDNN training benchmark on {name} ({TRANSCRIBED}: NVIDIA/cudnn-frontend "
                         f"{RESULTS}, cuDNN {rows[0]['cudnn']}), causal, 4,096-16,384 tokens, as timing's exponential term "
                         "and waves would time them")
    figs["H100-SXM"] = fit(chips["H100-SXM"], hopper_rows(meas),
                           f"measured on a lent H100 80GB HBM3 (cuDNN {meas['cudnn_backend']} through cudnn-frontend "
                           f"{meas['cudnn_frontend']}, {H100}), causal, 64 query and 8 key-value heads of 64 and 128, "
                           "4,096-16,384 tokens, 16-bit only")
    # NVIDIA's H200 rows: the Hopper fit's prediction, printed
    h = figs["H100-SXM"][0]
    for r in pub["rows"]:
        if "H200" in r["gpu"] and r["dtype"] == "bf16" and SEQS[0] <= r["seq"] <= SEQS[1] and not r["window"]:
            key = "bf16" + ("_bwd" if r["pass"] == "bwd" else "")
            print(f"check: NVIDIA's H200 {r['model']} {r['seq']} {r['pass']}: measured frac {frac_of(chips['H200'], r):.3f}, "
                  f"the H100 fit {h[key]:.3f} ({frac_of(chips['H200'], r) / h[key] - 1:+.0%} faster than timed)")
    for fam, (vals, src) in figs.items():
        print(fam, dict(vals))
        for name in FAMILIES[fam]:
            eff = chips[name].setdefault("efficiency", collections.OrderedDict())
            eff["train_attn_frac"] = vals
            eff.setdefault("sources", collections.OrderedDict())["train_attn_frac"] = (
                src if name == fam else f"carried from {fam} (the same SM and cuDNN kernels): " + src)
    json.dump(d, open(CHIPS, "w"), indent=2, ensure_ascii=False)
    open(CHIPS, "a").write("\n")


if __name__ == "__main__":
    main()
