#!/usr/bin/env python3
"""Write `mrep calibrate --lanes --json` into chips/chips.json: each chip's efficiency.lanes, with
the fit set and leave-one-source-out errors as each figure's source, and the lanes carried to
sibling chips without rows (calib.LaneFallback's order).

Usage: mrep calibrate --lanes --json > /tmp/lanes.json && python3 calib/sources/write_lanes.py /tmp/lanes.json
"""
import collections
import json
import sys

FALLBACK = {"GB300": ["B300", "GB200", "B200"], "B300": ["GB300", "B200", "GB200"], "GB200": ["B200", "GB300", "B300"],
            "B200": ["GB200", "B300", "GB300"], "H100-SXM": ["H100-96GB", "H200"], "H100-96GB": ["H100-SXM", "H200"],
            "H200": ["H100-SXM", "H100-96GB"]}
NAMES = {"gemm_frac": "gemm_frac", "grouped_gemm_frac": "grouped_gemm_frac", "moe_launch_us": "moe_launch_us",
         "attn_frac": "attn_frac", "eager_elementwise": "eager_elementwise"}

fits = json.load(open(sys.argv[1]))
loo = {s["source"]: s for s in fits["leave_one_source_out"]}
p = "chips/chips.json"
d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
lanes = {}
for f in fits["lanes"]:
    fw, chip = f["lane"]["Framework"], f["lane"]["Chip"]
    fig = collections.OrderedDict()
    src = collections.OrderedDict()
    held = "; ".join(f"{s} held out: median {100*loo[s]['median_abs_err']:.0f}%, worst {100*loo[s]['worst_abs_err']:.0f}%" for s in f["sources"] if s in loo)
    why = (f"fitted by mrep calibrate --lanes (mean |log error|) to the {f['rows']} {fw} training rows on {chip}: "
           f"{', '.join(f['sources'])}; median |err| {100*f['median_abs_err_before']:.1f}% before, {100*f['median_abs_err_after']:.1f}% after; {held}")
    for k, v in sorted(f["params"].items()):
        v = round(v, 4)
        if k.startswith("gemm_frac."):
            fig.setdefault("gemm_frac", collections.OrderedDict())[k.split(".", 1)[1]] = v
            src["gemm_frac"] = why
        elif k == "attn_frac":
            fig["attn_frac"], fig["attn_bwd_frac"] = v, round(0.8 * v, 4)
            src["attn_frac"] = why
            src["attn_bwd_frac"] = "0.8 x the lane's attn_frac (FlashAttention-2 paper: backward at ~0.8x the forward)"
        else:
            fig[k] = v
            src[k] = why
    fig["sources"] = src
    lanes[(fw, chip)] = fig
for c in d["chips"]:
    eff = c.setdefault("efficiency", collections.OrderedDict())
    out = collections.OrderedDict()
    for fw in ("megatron", "fsdp"):
        if (fw, c["name"]) in lanes:
            out[fw] = lanes[(fw, c["name"])]
            continue
        for other in FALLBACK.get(c["name"], []):
            if (fw, other) in lanes:
                fig = json.loads(json.dumps(lanes[(fw, other)]), object_pairs_hook=collections.OrderedDict)
                fig["sources"] = {k: f"carried from {other} (no {fw} rows on {c['name']}): {v}" for k, v in fig["sources"].items()}
                out[fw] = fig
                break
    if out:
        eff["lanes"] = out
    else:
        eff.pop("lanes", None)
json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
open(p, "a").write("\n")
