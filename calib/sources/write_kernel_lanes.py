#!/usr/bin/env python3
"""Put the engines' measured-kernel figures into chips/chips.json's vLLM and SGLang lanes, and
refit SGLang's host overheads on top of them (issue 32).

1. `mrep calibrate --kernels --json` fits each engine's lane on each NVIDIA chip to that
   engine's kernels in calib/kernels.json.gz (aiconfigurator-core 0.12.0): GEMM fraction per
   precision, prefill attention's share and op cost, decode attention's KV bandwidth (16- and
   8-bit caches) and op cost, each on half the shapes and taken only where the other half
   improves. The vLLM and SGLang lanes take the figures taken; TensorRT-LLM's lanes do not yet
   (its chips' host figures were fitted end to end with the old kernel figures, and with the
   kernel figures alone its trtllm-bench rows come out 6-12% too slow).
2. With --refit-host, SGLang's host figures (step, per-sequence and per-request overheads) are
   refitted with the kernel figures in place (`mrep calibrate --lane sglang`), to the same rows
   as write_serving_lanes.py fitted them: sgl-cookbook's runs at 1 and 16 users, median TTFT and
   TPOT (calib/bench_serve.json); B200 leaving one model out, A100 one row. The runs at 64 and
   100 users stay held out. The shipped lanes were refitted so when the attention figures came
   in; with the MoE figures (issue 32) the refit drives B200's per-sequence overhead to 0 (two
   concurrencies cannot separate a host cost per sequence from the experts a larger batch
   touches), so the host figures of that fit are kept and the step is off by default.

Every figure keeps the source the fit wrote. Lanes are merged: figures this script does not fit
stay as they are. Run from the repository root after `make build`:
    python3 calib/sources/write_kernel_lanes.py [--refit-host] [--only FIG,FIG]
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

MREP = os.environ.get("MREP", "bin/mrep")
ENGINES = ("vllm", "sglang")
# the lane figures of calibrate --kernels, as chips.json spells them
FIGURES = {"attn_frac", "attn_overhead_us", "attn_decode_hbm_frac", "attn_decode_overhead_us", "attn_decode_hbm_frac_8bit",
           "moe_hbm_frac", "moe_overhead_us", "mla_frac", "mla_decode_frac", "mla_decode_frac_8bit"}
# figures fitted per precision, written as one map each
MAPS = ("gemm_frac", "moe_gemm_frac")
# --only FIG,FIG: merge just those figures (each fit runs on top of the lanes as shipped, so a
# full rerun also refines the figures already there)
ONLY = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else set()


def run(*args):
    return json.loads(subprocess.run([MREP, *args], check=True, capture_output=True, text=True).stdout)


def kernel_lanes():
    out = collections.defaultdict(dict)
    for f in run("calibrate", "--kernels", "--json"):
        if f["engine"] not in ENGINES:
            continue
        lane, src = collections.OrderedDict(), collections.OrderedDict()
        for p in f["params"]:
            if not p["adopted"]:
                continue
            name = p["name"]
            if ONLY and name.split(".", 1)[0] not in ONLY:
                continue
            base = name.split(".", 1)[0]
            if base in MAPS and "." in name:
                lane.setdefault(base, collections.OrderedDict())[name.split(".", 1)[1]] = p["after"]
                src[base] = f["lane"]["sources"][name]  # one source line for the map
            elif name in FIGURES:
                lane[name] = p["after"]
                src[name] = f["lane"]["sources"][name]
        if lane:
            out[f["chip"]][f["engine"]] = (lane, src)
    return out


def source(chip, leave):
    return ("fitted together with the lane's measured-kernel figures in place (mrep --chips-file LANES calibrate --rows bench-serve "
            f"--where chip={chip} --where engine=sglang --where concurrency=1,16 --where stat=median --abs-loss --fit "
            f"step_overhead_us,request_overhead_us,seq_overhead_us --leave-out {leave} --lane sglang; calib/sources/write_kernel_lanes.py) "
            f"to the runs at 1 and 16 users of sgl-cookbook's tables on {chip} (calib/bench_serve.json; median TTFT and TPOT). "
            "The runs at 64 and 100 users are held out (mrep validate --rows bench-serve)")


def merge(d, chip, engine, figs, srcs):
    c = next(c for c in d["chips"] if c["name"] == chip)
    eff = c.setdefault("efficiency", collections.OrderedDict())
    lanes = eff.setdefault("lanes", collections.OrderedDict())
    lane = lanes.setdefault(engine, collections.OrderedDict())
    sources = lane.pop("sources", collections.OrderedDict())
    for k, v in figs.items():
        if isinstance(v, dict):
            g = lane.setdefault(k, collections.OrderedDict())
            g.update(v)
        else:
            lane[k] = v
    sources.update(srcs)
    lane["sources"] = sources
    eff["lanes"] = collections.OrderedDict(sorted(lanes.items()))


def main():
    p = "chips/chips.json"
    d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
    kl = kernel_lanes()
    for chip, engines in kl.items():
        for engine, (figs, srcs) in engines.items():
            merge(d, chip, engine, figs, srcs)
            print(chip, engine, dict(figs))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        json.dump(d, tmp)
    if "--refit-host" not in sys.argv:
        os.unlink(tmp.name)
        json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
        open(p, "a").write("\n")
        return
    for chip, leave in (("B200", "model"), ("A100-SXM", "row")):
        [f] = run("--chips-file", tmp.name, "calibrate", "--rows", "bench-serve", "--where", f"chip={chip}", "--where", "engine=sglang",
                  "--where", "concurrency=1,16", "--where", "stat=median", "--abs-loss",
                  "--fit", "step_overhead_us,request_overhead_us,seq_overhead_us", "--leave-out", leave, "--lane", "sglang", "--json")
        figs = collections.OrderedDict((k, round(f["params"][k], {"step_overhead_us": 1, "seq_overhead_us": 2, "request_overhead_us": 0}[k]))
                                       for k in ("step_overhead_us", "seq_overhead_us", "request_overhead_us"))
        src = collections.OrderedDict((k, source(chip, leave)) for k in figs)
        merge(d, chip, "sglang", figs, src)
        print(chip, "sglang host", dict(figs))
    os.unlink(tmp.name)
    json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
    open(p, "a").write("\n")


if __name__ == "__main__":
    main()
