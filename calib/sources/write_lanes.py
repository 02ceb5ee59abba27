#!/usr/bin/env python3
"""Write `mrep calibrate --lanes --json` into chips/chips.json: each chip's efficiency.lanes as the
fit computed them (calib.WithLanes: the figures fitted on the chip's own rows, the others carried
from its silicon or host siblings), each figure with its source. The leave-one-source-out errors
of the fit sets are appended to the fitted figures' sources.

Usage: mrep calibrate --lanes --json > /tmp/lanes.json && python3 calib/sources/write_lanes.py /tmp/lanes.json
"""
import collections
import json
import sys

fits = json.load(open(sys.argv[1]), object_pairs_hook=collections.OrderedDict)
loo = {s["source"]: s for s in fits["leave_one_source_out"]}
p = "chips/chips.json"
d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
for c in d["chips"]:
    eff = c.setdefault("efficiency", collections.OrderedDict())
    # serving engines' lanes (trtllm, vllm, sglang) are fitted elsewhere and kept as they are
    kept = collections.OrderedDict((k, v) for k, v in eff.get("lanes", {}).items() if k not in ("megatron", "fsdp"))
    lanes = fits["chips"].get(c["name"])
    if not lanes:
        eff.pop("lanes", None)
        if kept:
            eff["lanes"] = kept
        continue
    for fw, lane in lanes.items():
        for k, v in list(lane.items()):
            if isinstance(v, float):
                lane[k] = round(v, 4)
            elif k == "gemm_frac":
                lane[k] = collections.OrderedDict((dt, round(x, 4)) for dt, x in sorted(v.items()))
        for k, src in lane.get("sources", {}).items():
            held = [f"{s} held out: median {100*e['median_abs_err']:.0f}%, worst {100*e['worst_abs_err']:.0f}%"
                    for s, e in loo.items() if s in src]
            if held:
                lane["sources"][k] = src + "; leave-one-source-out: " + "; ".join(held)
    lanes.update(kept)
    eff["lanes"] = collections.OrderedDict(sorted(lanes.items()))
json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
open(p, "a").write("\n")
