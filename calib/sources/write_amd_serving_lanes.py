#!/usr/bin/env python3
"""Fit the serving lanes of AMD Instinct chips to AMD's own serving runs and write them into
chips/chips.json (issue 38).

Fit set: calib/amd_serving.json (AMD's own publications: the ATOM engine's nightly CI dashboard
on 8x MI355X, and ATOM's recipes on MI355X and MI300X; every run names its source), the MI355X
runs at 4, 16 and 64 users (mean TTFT, mean TPOT, output throughput). Held out: the runs at 8,
32, 128 and 256 users, and every MI300X run.

1. MI355X, atom lane: the FP8 and FP4 GEMM fractions, the HBM fraction of dense layers and of
   the MoE op's expert reads, the grouped GEMM's share, the step overhead and the request path
   (seven figures: the runs are dense and MoE models, FP8 and MXFP4), with AITER's MoE tiles
   stated (M of 32, 64 or 128 rows), fitted by coordinate descent (two sweeps of one `mrep calibrate --abs-loss
   --lane atom --fit FIGURE` per figure, the others in place: calibrate's joint fit descends
   from every ordering of five figures, hours when each evaluation simulates ~40 runs); leave
   one published source out (the dashboard's two entries, the Qwen3 and Kimi-K2 recipes),
   refitted in one sweep without it.
2. MI355X, sglang and vllm lanes: the kernel figures carried from its atom lane (AMD's AITER
   kernels, which ATOM is built on and SGLang's and vLLM's ROCm builds call), the host figures
   from the same engine's MI300X lane (the engine's work on an x86 host). No SGLang or vLLM run
   on MI355X with per-point figures was found in AMD's publications (their charts are images).
3. MI300X, atom lane: the host figures (step overhead, request path) carried from MI355X's atom
   lane; its kernels keep the chip's own figures. Its 4 recipe rows are the check.
4. MI325X: MI300X's lanes carried (the same CDNA3 compute die; the HBM3E capacity and bandwidth
   are the chip's own figures). No MI325X serving figure was found.

Run from the repository root after `make build`: python3 calib/sources/write_amd_serving_lanes.py
(about half an hour on 2 cores: every evaluation simulates ~40 runs step by step).
"""
import collections
import concurrent.futures
import json
import os
import subprocess
import sys

MREP = os.environ.get("MREP", "bin/mrep")
ROWS = "calib/amd_serving.json"
FIT_CONC = (4, 16, 64)
# the figures fitted: GEMM fractions of the two precisions the runs compute in, the HBM
# fraction of dense layers and of the fused MoE op's expert reads, the grouped GEMM's share,
# the engine's step overhead and request path
PARAMS = ("gemm_frac.fp8", "gemm_frac.fp4", "hbm_frac", "moe_hbm_frac", "grouped_gemm_frac", "step_overhead_us", "request_overhead_us")
RELEASE = "atom: AMD's ATOM runs (nightly CI 2026-05/08 on rocm/atom-dev images, recipes at ffdf3bb5)"


def run(cmd):
    sys.stderr.write(" ".join(cmd) + "\n")
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def rows_file(path, keep):
    """The amd-serving rows keep() admits, as a rows file for calibrate and validate."""
    d = json.load(open(ROWS))
    rows = [r for r in d["rows"] if keep(r)]
    json.dump({"about": "subset of " + ROWS, "rows": rows}, open(path, "w"))
    return len(rows)


def chips_file(path, lane):
    """A chips file holding MI355X with lane as its atom lane (calibrate --lane starts there)."""
    d = json.load(open("chips/chips.json"), object_pairs_hook=collections.OrderedDict)
    c = chip(d, "MI355X")
    c["efficiency"].setdefault("lanes", collections.OrderedDict())["atom"] = lane
    json.dump({"chips": [c]}, open(path, "w"))


# AITER's fused MoE kernels (aiter/fused_moe.py get_block_size_M, which ATOM calls) pick an M
# tile of 32, 64 or 128 rows with N tiles of 128: a handful of tokens per expert pads to 32 rows,
# not to the 64 of mrep's default tiles. Stated, not fitted.
TILES = [[32, 128], [64, 128], [128, 128]]
TILES_SRC = ("AITER's fused MoE tiles (ROCm/aiter aiter/fused_moe.py, get_block_size_M: M of 32, 64 or 128 with tileN 128), "
             "which ATOM's MoE layers call: stated, not fitted")


def staged_fit(rows, params, sweeps, tag):
    """Coordinate descent over params, one calibrate per parameter (a golden-section search
    with the others in place), sweeps times: calibrate's own joint fit descends from every
    ordering of the parameters, hours here where each evaluation simulates ~40 runs."""
    lane = collections.OrderedDict(gemm_tiles=TILES, sources=collections.OrderedDict(gemm_tiles=TILES_SRC))
    cf = f"/tmp/mrep_amd_chips_{tag}.json"
    for _ in range(sweeps):
        for p in params:
            chips_file(cf, lane)
            out = run([MREP, "--chips-file", cf, "calibrate", rows, "--abs-loss", "--fit", p, "--lane", "atom", "--json"])
            [f] = json.loads(out)
            for k, v in f["lane_figures"].items():
                if k in ("sources", "gemm_tiles"):
                    continue
                if k == "gemm_frac":
                    lane.setdefault("gemm_frac", collections.OrderedDict()).update(v)
                else:
                    lane[k] = v
    chips_file(cf, lane)
    return lane, cf


def validate(rows, cf=None):
    cmd = [MREP, "validate", rows, "--json"]
    if cf:
        cmd[1:1] = ["--chips-file", cf]
    return [r for r in json.loads(run(cmd))["rows"] if not r.get("skipped")]


def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def errs(rows):
    return [abs(r["predicted"] / r["measured"] - 1) for r in rows]


def source_name(src):
    s = src.split(" :: ")[0]
    if "benchmark-dashboard" in s:
        return "ATOM dashboard " + s.split("/blob/")[1][:8]
    return "ATOM " + s.rsplit("/", 1)[1]


def chip(d, name):
    return next(c for c in d["chips"] if c["name"] == name)


def set_lane(d, chip_name, engine, figs, src, release):
    eff = chip(d, chip_name).setdefault("efficiency", collections.OrderedDict())
    ls = eff.setdefault("lanes", collections.OrderedDict())
    lane = ls.setdefault(engine, collections.OrderedDict())
    sources = lane.pop("sources", collections.OrderedDict())
    lane.pop("release", None)
    for k, v in figs.items():
        if k == "gemm_frac":
            lane.setdefault("gemm_frac", collections.OrderedDict()).update(v)
        else:
            lane[k] = v
        sources[k] = src[k] if isinstance(src, dict) else src
    lane["sources"] = sources
    lane["release"] = release
    eff["lanes"] = collections.OrderedDict(sorted(ls.items()))


def lane_figs(f):
    """A fit's lane figures as chips.json nests them (gemm_frac.DTYPE -> gemm_frac: {DTYPE})."""
    out = collections.OrderedDict()
    for k, v in f["params"].items():
        v = round(v, 4) if v < 10 else round(v, 1)
        if k.startswith("gemm_frac."):
            out.setdefault("gemm_frac", collections.OrderedDict())[k.split(".", 1)[1]] = v
        else:
            out[k] = v
    return out


def main():
    p = "chips/chips.json"
    fit_set = lambda r: r["chip"] == "MI355X" and r["engine"] == "atom" and r["concurrency"] in FIT_CONC
    n = rows_file("/tmp/mrep_amd_fit.json", fit_set)
    before = errs(validate("/tmp/mrep_amd_fit.json"))
    lane, cf = staged_fit("/tmp/mrep_amd_fit.json", PARAMS, 2, "fit")
    after = errs(validate("/tmp/mrep_amd_fit.json", cf))
    # leave one source out: the lane fitted without a source's runs predicts them
    sources = sorted({source_name(r["source"]) for r in json.load(open(ROWS))["rows"] if fit_set(r)})

    def held_out(i, src):
        rows_file(f"/tmp/mrep_amd_loo{i}.json", lambda r: fit_set(r) and source_name(r["source"]) != src)
        rows_file(f"/tmp/mrep_amd_out{i}.json", lambda r: fit_set(r) and source_name(r["source"]) == src)
        _, lcf = staged_fit(f"/tmp/mrep_amd_loo{i}.json", PARAMS, 1, f"loo{i}")
        e = errs(validate(f"/tmp/mrep_amd_out{i}.json", lcf))
        return f"{src} held out: median {100*med(e):.0f}%, worst {100*max(e):.0f}% ({len(e)} rows)"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # each refit is a process of its own
        loo = list(pool.map(held_out, range(len(sources)), sources))
    held = lambda r: r["chip"] == "MI355X" and r["engine"] == "atom" and r["concurrency"] not in FIT_CONC
    rows_file("/tmp/mrep_amd_held.json", held)
    he = errs(validate("/tmp/mrep_amd_held.json", cf))
    how = ("fitted (calib/sources/write_amd_serving_lanes.py: coordinate descent, one mrep calibrate --abs-loss --lane atom per "
           "figure, two sweeps) to AMD's own ATOM runs on MI355X at 4, 16 and 64 users (calib/amd_serving.json: the ATOM CI "
           "dashboard's DeepSeek-R1 FP8 and MXFP4, gpt-oss-120b and Llama-3.3-70B MXFP4 runs, the Qwen3-235B and Kimi-K2 recipes; "
           f"mean TTFT, mean TPOT, output throughput): {n} rows, median |err| {100*med(before):.0f}% before (the chip's own "
           f"figures), {100*med(after):.0f}% after, worst {100*max(after):.0f}%; leave one source out (refitted in one sweep): "
           + "; ".join(loo) + f". Held out, the runs at 8, 32, 128 and 256 users: median {100*med(he):.0f}%, worst {100*max(he):.0f}% "
           f"({len(he)} rows; mrep validate --rows amd-serving)")
    d = json.load(open(p), object_pairs_hook=collections.OrderedDict)
    figs = collections.OrderedDict((k, (round(v, 4) if k != "gemm_frac" else collections.OrderedDict((dt, round(x, 4)) for dt, x in v.items())))
                                   for k, v in lane.items() if k not in ("sources", "gemm_tiles"))
    for k in ("step_overhead_us", "request_overhead_us"):
        if k in figs:
            figs[k] = round(figs[k], 1)
    if os.environ.get("MREP_TRY"):
        print(json.dumps(figs), how)
        return
    set_lane(d, "MI355X", "atom", figs, how, RELEASE)
    set_lane(d, "MI355X", "atom", {"gemm_tiles": TILES}, TILES_SRC, RELEASE)
    atom = chip(d, "MI355X")["efficiency"]["lanes"]["atom"]
    kernel = collections.OrderedDict((k, atom[k]) for k in ("gemm_frac", "hbm_frac", "moe_hbm_frac", "grouped_gemm_frac", "gemm_tiles") if k in atom)
    ksrc = ("carried from MI355X's atom lane: AMD's AITER kernels, which ATOM is built on and SGLang's and vLLM's ROCm builds call; "
            "no run of this engine on MI355X with per-point figures is in AMD's publications. The atom lane's: " + atom["sources"]["hbm_frac"])
    for engine in ("sglang", "vllm"):
        mi300 = chip(d, "MI300X")["efficiency"]["lanes"][engine]
        host = collections.OrderedDict((k, mi300[k]) for k in ("step_overhead_us", "seq_overhead_us", "request_overhead_us") if k in mi300)
        hsrc = (f"carried from MI300X's {engine} lane (the engine's host work on an x86 host, not the GPU's). MI300X's: " +
                mi300["sources"]["step_overhead_us"])
        set_lane(d, "MI355X", engine, kernel, ksrc, f"kernels: as MI355X's atom lane; host: MI300X's {engine} lane")
        set_lane(d, "MI355X", engine, host, hsrc, f"kernels: as MI355X's atom lane; host: MI300X's {engine} lane")
    host = collections.OrderedDict((k, atom[k]) for k in ("step_overhead_us", "request_overhead_us"))
    set_lane(d, "MI300X", "atom", host, "carried from MI355X's atom lane (ATOM's host work on an x86 host, not the GPU's); its 4 "
             "recipe rows on MI300X are the check (mrep validate --rows amd-serving --where chip=MI300X). MI355X's: " + atom["sources"]["step_overhead_us"],
             "host: as MI355X's atom lane")
    for engine, lane in chip(d, "MI300X")["efficiency"]["lanes"].items():
        if engine not in ("sglang", "vllm", "atom"):
            continue
        figs = collections.OrderedDict((k, v) for k, v in lane.items() if k not in ("sources", "release"))
        src = {k: "carried from MI300X's " + engine + " lane (the same CDNA3 compute die; MI325X's HBM3E capacity and bandwidth are "
               "the chip's own figures; no MI325X serving figure is in AMD's publications). MI300X's: " + lane["sources"].get(k, "")
               for k in figs}
        set_lane(d, "MI325X", engine, figs, src, "as MI300X's " + engine + " lane")
    json.dump(d, open(p, "w"), indent=2, ensure_ascii=False)
    open(p, "a").write("\n")
    print(json.dumps({"atom MI355X": dict(atom)}, indent=1, default=str)[:3000])


if __name__ == "__main__":
    main()
