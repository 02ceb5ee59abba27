#!/usr/bin/env python3
"""Fit the serving engines' lanes and write them into chips/chips.json (issue 21).

TensorRT-LLM's MoE figures on Blackwell, the chips' `trtllm` lane:

Fit set: the MoE rows of calib/extended.json on B200 and GB200 whose layout the source states
without doubt: Llama-4-Scout and Qwen3-30B-A3B at TP1 (TensorRT-LLM perf-overview @00f37686)
and DeepSeek-R1 attention-DP8 EP8 (the DeepSeek-R1 best-practice blog @01c4ece9). Held out:
Qwen3-235B-A22B at "TP8" (the document's MoE command turns attention DP on without an EP
size), every dense Blackwell row, every other chip.

1. B200: grouped GEMM fraction (FP4 grouped GEMMs at small per-expert M), step overhead and
   per-sequence overhead (the PyTorch backend's host work per running sequence: scheduling,
   sampling, the KV cache manager), fitted together; leave one model out.
2. GB200, the same GPU: its grouped GEMM fraction is B200's (carried); the host figures, which
   belong to the Grace CPU rather than the GPU, are fitted on its own rows; leave one model out.

SGLang's host costs, the chips' `sglang` lane: the step overhead (a decode step's time beyond
its kernels), the per-running-sequence overhead (the scheduler's and detokenizer's work per
request each step) and the per-request overhead (what a client waits beyond the steps for its
first token: HTTP, tokenizer, scheduler hand-off, streaming), fitted to the sgl-cookbook runs
at 1 and 16 users in calib/bench_serve.json (median TTFT and TPOT; the mean over 10 requests
carries the first one's warm-up). The runs at 64 and 100 users are the held-out check of the
load model (queueing, chunked prefill, batching) and are not fitted. B200: DeepSeek-R1 and
Qwen3-235B, leave one model out; A100 (Llama-3.1-70B) and MI300X (Llama-4-Scout): one model
each, leave one row out.

Run from the repository root after `make build`: python3 calib/sources/write_serving_lanes.py
[--only-trtllm] (the TensorRT-LLM lanes alone, a minute: after a change to what their rows count)
[--carry-sglang-host] (after the TensorRT-LLM lanes, B200's SGLang host figures to the chips with
no SGLang run in the fit sources: the engine's and its host's costs, not the GPU's)
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

MREP = os.environ.get("MREP", "bin/mrep")
MODELS = "model=Llama-4-Scout-17B-16E-Instruct,Qwen3-30B-A3B,DeepSeek-V3"
WHERE = ["--where", MODELS, "--where", "tp=1"]


def calibrate(chip, fit, chips_file=None, rowset="extended", where=WHERE, leave_out="model"):
    cmd = [MREP, "calibrate", "--rows", rowset, "--where", f"chip={chip}", *where, "--abs-loss",
           "--fit", fit, "--leave-out", leave_out, "--json"]
    if chips_file:
        cmd[1:1] = ["--chips-file", chips_file]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    [f] = json.loads(out)
    return f


def summary(f, by="model"):
    def errs(rep):
        return sorted(abs(r["predicted"] / r["measured"] - 1) for r in rep)
    after = errs(f["after"]["rows"])
    if not f.get("leave_one_out"):
        return (f"{f['rows']} rows, as many as the figures fitted: no leave-one-out; the held-out runs under load "
                f"are the check")
    loo = errs(f["leave_one_out"])
    models = sorted({r["model"] for r in f["after"]["rows"]})
    med = lambda xs: xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    return (f"{f['rows']} rows ({', '.join(models)}): median |err| {100*med(after):.1f}%, worst {100*after[-1]:.0f}% "
            f"in sample; " + (f"each {by}'s rows predicted by a fit to the other {by}s' rows" if by != "row" else
            "each row predicted by a fit to the others") + f": median {100*med(loo):.1f}%, worst {100*loo[-1]:.0f}%")


def main():
    b = calibrate("B200", "grouped_gemm_frac,step_overhead_us,seq_overhead_us")
    bp = b["params"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        d = json.load(open("chips/chips.json"))
        gb = next(c for c in d["chips"] if c["name"] == "GB200")
        gb.setdefault("efficiency", {})["grouped_gemm_frac"] = bp["grouped_gemm_frac"]
        gb["efficiency"].pop("lanes", None)
        json.dump({"chips": [gb]}, tmp)
    g = calibrate("GB200", "step_overhead_us,seq_overhead_us", tmp.name)
    os.unlink(tmp.name)
    gp = g["params"]

    fitset = ("the MoE rows of calib/extended.json on {chip} with a layout the source states (TensorRT-LLM "
              "perf-overview @00f37686 Llama-4-Scout and Qwen3-30B-A3B FP4 TP1; DeepSeek-R1 blog @01c4ece9 "
              "FP4 attention-DP8 EP8)")
    cmd = "mrep calibrate --rows extended --where chip={chip} --where " + MODELS + " --where tp=1 --abs-loss --leave-out model"
    lanes = {
        "B200": (collections.OrderedDict([
            ("grouped_gemm_frac", round(bp["grouped_gemm_frac"], 4)),
            ("step_overhead_us", round(bp["step_overhead_us"], 1)),
            ("seq_overhead_us", round(bp["seq_overhead_us"], 2))]),
            f"fitted together ({cmd.format(chip='B200')} --fit grouped_gemm_frac,step_overhead_us,seq_overhead_us) "
            f"to {fitset.format(chip='B200')}: {summary(b)}"),
        "GB200": (collections.OrderedDict([
            ("grouped_gemm_frac", round(bp["grouped_gemm_frac"], 4)),
            ("step_overhead_us", round(gp["step_overhead_us"], 1)),
            ("seq_overhead_us", round(gp["seq_overhead_us"], 2))]),
            f"host figures fitted ({cmd.format(chip='GB200')} --fit step_overhead_us,seq_overhead_us, the grouped "
            f"GEMM fraction carried from B200, the same GPU) to {fitset.format(chip='GB200')}: {summary(g)}. The "
            "per-sequence cost is the Grace host's pace for the engine's Python scheduler, not the GPU's"),
    }
    write("trtllm", lanes)
    for chip, (figs, src) in lanes.items():
        print(chip, "trtllm", dict(figs))
        print("  ", src)
    carry_trtllm_lanes()
    if "--only-trtllm" in sys.argv:
        return
    if "--carry-sglang-host" in sys.argv:
        carry_sglang_host()
        return

    sg = {}
    for chip, leave in (("B200", "model"), ("A100-SXM", "row"), ("MI300X", "row")):
        f = calibrate(chip, "step_overhead_us,request_overhead_us,seq_overhead_us", rowset="bench-serve",
                      where=["--where", "engine=sglang", "--where", "concurrency=1,16", "--where", "stat=median"], leave_out=leave)
        fp = f["params"]
        sg[chip] = (collections.OrderedDict([
            ("step_overhead_us", round(fp["step_overhead_us"], 1)),
            ("seq_overhead_us", round(fp["seq_overhead_us"], 2)),
            ("request_overhead_us", round(fp["request_overhead_us"], 0))]),
            f"fitted together (mrep calibrate --rows bench-serve --where chip={chip} --where engine=sglang --where "
            f"concurrency=1,16 --where stat=median --abs-loss --fit step_overhead_us,request_overhead_us,seq_overhead_us "
            f"--leave-out {leave}) to the runs at 1 and 16 users of sgl-cookbook's tables on {chip} (calib/bench_serve.json; "
            f"median TTFT and TPOT: a mean over 10 requests carries the first request's warm-up): "
            f"{summary(f, leave)}. The runs at 64 and 100 users are held out (mrep validate --rows bench-serve)")
    write("sglang", sg)
    for chip, (figs, src) in sg.items():
        print(chip, "sglang", dict(figs))
        print("  ", src)


# Blackwell Ultra has no TensorRT-LLM run in the fit sources: B300 takes B200's lane (an x86
# host beside an HGX board, the grouped-GEMM kernels of the same architecture) and GB300 takes
# GB200's (a Grace host in an NVL72 rack), the nearest sibling as the training lanes do.
CARRY_TRTLLM = {"B300": "B200", "GB300": "GB200"}


def carry_trtllm_lanes():
    p = "chips/chips.json"
    d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
    lanes = {}
    for chip, sib in CARRY_TRTLLM.items():
        src = next(c for c in d["chips"] if c["name"] == sib)["efficiency"]["lanes"]["trtllm"]
        figs = collections.OrderedDict((k, v) for k, v in src.items() if k != "sources")
        lanes[chip] = (figs, f"carried from {sib}'s trtllm lane (its nearest sibling: the same host, a Blackwell GPU's "
                             f"grouped-GEMM kernels; no TensorRT-LLM run on {chip} is in the fit sources). {sib}'s: "
                             + src["sources"]["step_overhead_us"])
    write("trtllm", lanes)
    for chip in lanes:
        print(chip, "trtllm (carried)", dict(lanes[chip][0]))


# SGLang's host work per step, per running sequence and per request belongs to the engine and
# its host CPU, not the GPU: the chips whose SGLang runs no fit source holds take B200's (an
# x86 host beside an HGX board, as H100's, H200's and B300's are; GB200's and GB300's Grace
# hosts ran TensorRT-LLM's scheduler at about half x86's pace, so theirs is likely an underestimate).
CARRY_SGLANG_HOST = ("H100-SXM", "H200", "B300", "GB200", "GB300")


def carry_sglang_host():
    p = "chips/chips.json"
    d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
    src = next(c for c in d["chips"] if c["name"] == "B200")["efficiency"]["lanes"]["sglang"]
    figs = collections.OrderedDict((k, src[k]) for k in ("step_overhead_us", "seq_overhead_us", "request_overhead_us"))
    lanes = {}
    for chip in CARRY_SGLANG_HOST:
        host = "Grace (likely slower: TensorRT-LLM's per-sequence cost there is twice x86's)" if chip.startswith("GB") else "x86"
        lanes[chip] = (figs, f"carried from B200's sglang lane: SGLang's host work is the engine's and its host CPU's ({host} "
                             f"here), and no SGLang run on {chip} is in the fit sources. B200's: " + src["sources"]["step_overhead_us"])
    write("sglang", lanes)
    for chip in lanes:
        print(chip, "sglang host (carried)", dict(figs))


def write(engine, lanes):
    p = "chips/chips.json"
    d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
    for c in d["chips"]:
        if c["name"] not in lanes:
            continue
        figs, src = lanes[c["name"]]
        srcs = collections.OrderedDict((k, src) for k in figs)
        if engine == "trtllm" and c["name"] == "GB200":
            srcs["grouped_gemm_frac"] = "carried from B200's trtllm lane (the same Blackwell GPU and kernels): " + lanes["B200"][1]
        eff = c.setdefault("efficiency", collections.OrderedDict())
        ls = eff.setdefault("lanes", collections.OrderedDict())
        # merged: the lane's other figures (the measured-kernel ones of write_kernel_lanes.py) stay
        lane = ls.setdefault(engine, collections.OrderedDict())
        sources = lane.pop("sources", collections.OrderedDict())
        lane.update(figs)
        sources.update(srcs)
        lane["sources"] = sources
        eff["lanes"] = collections.OrderedDict(sorted(ls.items()))
    json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
    open(p, "a").write("\n")


if __name__ == "__main__":
    main()
