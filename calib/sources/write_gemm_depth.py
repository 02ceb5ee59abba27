#!/usr/bin/env python3
"""Fit each NVIDIA chip's GEMM depth term, efficiency.gemm_k0, to NVIDIA's measured GEMMs and
write it into chips/chips.json at chip level (every lane inherits it).

A GEMM tile spends K0 steps' time outside its K loop (prologue, epilogue), so at depth K it runs
at K(4096+K0) / (4096(K+K0)) of a 4,096-deep GEMM's rate; from 4,096 on the tables are flat
(timing.GEMMEta, gemmKRef). The tables: calib/kernels.json.gz, aiconfigurator-core 0.12.0's
TensorRT-LLM cuBLAS GEMMs (family gemm, engine trtllm, kernel torch_flow), bf16 and fp8. Only
compute-bound shapes count: M and N of 4,096 and more, where each K below 4,096 has a 4,096-deep
twin of the same M and N. For each such pair the measured ratio r = eff(K)/eff(4096) gives
K0 = 4096 K (1 - r) / (4096 r - K); the figure is the median over the pairs of every other
(M, N), and the other half checks it: the median |log error| of the predicted ratio against the
measured one, with the term and without it (K0 = 0). A figure is written only where the held-out
half improves by a point or more (GB300's BF16 tables are flat to K = 1,024: 2.9% either way). Chips of the same silicon without tables of their own (H100-96GB and H800 share
H100-SXM's; H200-NVL H200's) carry the figure with a note.

Run from the repository root: python3 calib/sources/write_gemm_depth.py
"""
import gzip
import json
import math
import re
import statistics
import sys

KREF = 4096
CARRY = {"H100-96GB": "H100-SXM", "H800": "H100-SXM"}


def pairs(group):
    by = {}
    for m, n, k, us in group["rows"]:
        if m >= KREF and n >= KREF:
            by.setdefault((m, n), {})[k] = 2 * m * n * k / (us * 1e-6)  # FLOP/s
    out = []
    for (m, n), ks in sorted(by.items()):
        if KREF not in ks:
            continue
        for k, rate in sorted(ks.items()):
            if k < KREF:
                out.append(((m, n), k, rate / ks[KREF]))
    return out


def k0_of(k, r):
    den = KREF * r - k
    if den <= 0:
        return None
    return max(0.0, KREF * k * (1 - r) / den)


def predicted(k, k0):
    return k * (KREF + k0) / (KREF * (k + k0))


def fit(group):
    ps = pairs(group)
    shapes = sorted({mn for mn, _, _ in ps})
    fit_set = {mn for i, mn in enumerate(shapes) if i % 2 == 0}
    train = [p for p in ps if p[0] in fit_set]
    held = [p for p in ps if p[0] not in fit_set]
    ks = [v for v in (k0_of(k, r) for _, k, r in train) if v is not None]
    if not ks or not held:
        return None
    k0 = round(statistics.median(ks), 1)
    err = lambda k0: statistics.median(abs(math.log(predicted(k, k0) / r)) for _, k, r in held)
    return {"k0": k0, "fit": len(train), "held": len(held), "before": err(0.0), "after": err(k0)}


def main():
    kt = json.load(gzip.open("calib/kernels.json.gz"))
    fits = {}
    for g in kt["groups"]:
        if g["family"] != "gemm" or g["engine"] != "trtllm" or g["kernel"] != "torch_flow" or g["dtype"] not in ("bf16", "fp8"):
            continue
        f = fit(g)
        if f is None:
            continue
        f["source"] = g["source"]
        fits[(g["chip"], g["dtype"])] = f
    path = "chips/chips.json"
    text = open(path).read()
    doc = json.loads(text)
    written = 0
    for c in doc["chips"]:
        src_chip = CARRY.get(c["name"], c["name"])
        mine = {d: fits[(src_chip, d)] for d in ("bf16", "fp8") if (src_chip, d) in fits}
        mine = {d: f for d, f in mine.items() if f["after"] <= f["before"] - 0.01}
        if not mine:
            continue
        eff = c.setdefault("efficiency", {})
        eff["gemm_k0"] = {d: f["k0"] for d, f in mine.items()}
        parts = []
        for d, f in mine.items():
            parts.append(f"{d} {f['k0']:g}: the median over {f['fit']} compute-bound GEMM pairs (M, N >= 4096; K < 4096 against "
                         f"K = 4096) of {f['source']}; the other {f['held']} pairs' K-ratio median |log error| "
                         f"{100 * f['before']:.1f}% without the term, {100 * f['after']:.1f}% with it")
        note = f"fitted by calib/sources/write_gemm_depth.py on {src_chip}'s tables" + (
            f" (carried: {c['name']} is {src_chip}'s silicon)" if src_chip != c["name"] else "")
        eff.setdefault("sources", {})["gemm_k0"] = note + ": " + "; ".join(parts)
        written += 1
        print(c["name"], eff["gemm_k0"], file=sys.stderr)
    out = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    open(path, "w").write(out)
    print(f"wrote gemm_k0 for {written} chips", file=sys.stderr)


if __name__ == "__main__":
    main()
