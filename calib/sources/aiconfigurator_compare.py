#!/usr/bin/env python3
"""aiconfigurator's own prediction of every serving benchmark in calib/bench_serve.json, for the
comparison `go test ./calib -run TestAgainstAIConfigurator` prints (issue 32).

NVIDIA's aiconfigurator 0.12.0 (PyPI: aiconfigurator and aiconfigurator-core, Apache-2.0) is run
as a user would run it, through the Python form of `aiconfigurator cli estimate --estimate-mode
agg`: aiconfigurator.cli.api.cli_estimate(model, system, mode="agg", ...), one fixed
configuration per row: the row's engine as the backend (the shipped release closest to the
row's; the package accepts no other), its chip as the system (no AMD systems: those rows are
unsupported), TP = the row's, batch = its concurrency, its ISL/OSL, bf16 weights and KV unless
the row says fp8; MoE experts TP-sharded (vLLM's and SGLang's default under --tp). The models
are the configs the package bundles (Llama-3.1-70B-Instruct as Meta-Llama-3.1-70B, the same
architecture). Only the rows' configurations are read, never their measured values. Each row
gets aiconfigurator's TTFT, TPOT and output tokens/s and the seconds its estimate took (warm:
the import and each table's first load are timed apart).

Usage (Python 3.11+, a scratch venv):
    python3 -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator==0.12.0
    /tmp/aicvenv/bin/python calib/sources/aiconfigurator_compare.py > calib/aiconfigurator_bench_serve.json
"""
import json
import logging
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOE_EP = False  # experts TP-sharded, as the engines shard them under --tp

t0 = time.perf_counter()
from aiconfigurator.cli.api import cli_estimate  # noqa: E402
from aiconfigurator_core.sdk.perf_database import get_database_view, get_supported_databases  # noqa: E402

IMPORT_S = time.perf_counter() - t0

# keep the console quiet (the package logs many low-fidelity-fallback warnings)
logging.getLogger("aiconfigurator").setLevel(logging.ERROR)

SYSTEM = {"H100-SXM": "h100_sxm", "H200": "h200_sxm", "B200": "b200_sxm", "A100-SXM": "a100_sxm"}
# Bundled model configs (HuggingFace is not reachable from this machine; cli_estimate
# resolves these names from aiconfigurator_core/model_configs/ offline).
MODEL = {
    "Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",  # same architecture as -Instruct
    "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
    "DeepSeek-V3": "deepseek-ai/DeepSeek-V3",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "Llama-4-Scout-17B-16E-Instruct": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
}
MOE_MODELS = {"Qwen3-235B-A22B", "DeepSeek-V3", "gpt-oss-120b", "Llama-4-Scout-17B-16E-Instruct"}


def _vt(v):
    out = []
    for p in v.replace("post", ".").replace("v", "").split("."):
        try:
            out.append(int(p))
        except ValueError:
            break
    return tuple(out + [0] * (4 - len(out)))


def closest_version(engine_version, supported):
    """Closest queryable version the package ships for (system, backend), by numeric distance."""
    ev = _vt(engine_version.split()[0])

    def dist(v):
        a, b = _vt(v), ev
        return tuple(abs(x - y) for x, y in zip(a, b))

    return min(supported, key=dist)


def build_kwargs(r, rec):
    kw = dict(
        mode="agg",
        backend_name=r["engine"],
        backend_version=rec["version"],
        database_mode="SILICON",
        isl=int(r["isl"]),
        osl=int(r["osl"]),
        batch_size=int(r["concurrency"]),
        tp_size=int(r["tp"]),
        pp_size=1,
        attention_dp_size=1,
        kvcache_quant_mode={"bf16": "bfloat16", "fp8": "fp8"}[r["kv_dtype"]],
    )
    if r["model"] in MOE_MODELS:
        # vLLM / SGLang default for `--tp N` without expert parallel: experts TP-sharded
        kw["moe_tp_size"], kw["moe_ep_size"] = (1, int(r["tp"])) if MOE_EP else (int(r["tp"]), 1)
    # weights: bf16 rows -> bf16 GEMM; fp8 (DeepSeek-V3 block-fp8) and fp4 (gpt-oss MXFP4)
    # are auto-inferred from the checkpoint config shipped with the package.
    if r["weight_dtype"] == "bf16":
        kw["gemm_quant_mode"] = "bfloat16"
    return kw


def main():
    keep = ("id", "engine", "engine_version", "model", "chip", "weight_dtype", "kv_dtype", "tp", "isl", "osl", "concurrency", "metric")
    rows = [{k: r.get(k) for k in keep} for r in json.load(open(os.path.join(ROOT, "calib", "bench_serve.json")))["rows"]]
    supported_dbs = get_supported_databases()

    # --- one-time startup: load each perf database that will be used (cached in-process afterwards)
    db_load_s = {}
    plan = []
    for r in rows:
        rec = {"id": r["id"], "supported": False, "reason": "", "backend": r["engine"], "version": None,
               "system": None, "pred_ttft_s": None, "pred_tpot_s": None, "pred_output_tok_s": None,
               "pred_metric": None, "wall_s": None}
        sysname = SYSTEM.get(r["chip"])
        if sysname is None:
            rec["reason"] = f"no aiconfigurator system for chip {r['chip']} (package ships NVIDIA systems only)"
            plan.append((r, rec, None))
            continue
        rec["system"] = sysname
        versions = supported_dbs.get(sysname, {}).get(r["engine"], [])
        if not versions:
            rec["reason"] = f"no {r['engine']} perf database for {sysname}"
            plan.append((r, rec, None))
            continue
        rec["version"] = closest_version(r["engine_version"], versions)
        key = (sysname, r["engine"], rec["version"])
        if key not in db_load_s:
            t = time.perf_counter()
            get_database_view(sysname, r["engine"], rec["version"], allow_missing_data=False,
                              database_mode="SILICON", transfer_policy=None)
            db_load_s[key] = time.perf_counter() - t
        plan.append((r, rec, key))

    # --- one-time warm-up: the first estimate per (model, system, backend, version) lazily loads
    # the perf tables it needs (~1-3 s); time that separately and keep it out of per-row wall_s.
    first_call_s = {}
    for r, rec, key in plan:
        if key is None:
            continue
        wk = (MODEL[r["model"]],) + key
        if wk in first_call_s:
            continue
        kw = build_kwargs(r, rec)
        t = time.perf_counter()
        try:
            cli_estimate(MODEL[r["model"]], rec["system"], **kw)
        except Exception:
            pass
        first_call_s[wk] = time.perf_counter() - t

    results, details = [], []
    for r, rec, key in plan:
        det = {"id": r["id"]}
        if key is not None:
            kw = build_kwargs(r, rec)
            det["call"] = {"model_path": MODEL[r["model"]], "system_name": rec["system"], **kw}
            t = time.perf_counter()
            try:
                res = cli_estimate(MODEL[r["model"]], rec["system"], **kw)
                wall = time.perf_counter() - t
                raw = res.raw
                rec.update(
                    supported=True,
                    pred_ttft_s=raw["ttft"] / 1000.0,
                    pred_tpot_s=raw["tpot"] / 1000.0,
                    pred_output_tok_s=raw["tokens/s"],
                    wall_s=wall,
                )
                if r["metric"] == "ttft":
                    rec["pred_metric"] = rec["pred_ttft_s"]
                elif r["metric"] in ("tpot", "itl"):
                    rec["pred_metric"] = rec["pred_tpot_s"]
                    if r["metric"] == "itl":
                        rec["reason"] = "metric itl compared with aiconfigurator TPOT (it has no separate ITL)"
                elif r["metric"] == "output_throughput":
                    rec["pred_metric"] = rec["pred_output_tok_s"]
                det.update(
                    kv_cache_warning=res.kv_cache_warning,
                    resolved={k: raw.get(k) for k in ("parallel", "gemm", "kvcache", "fmha", "moe", "comm",
                                                        "bs", "concurrency", "num_total_gpus", "tokens/s/gpu",
                                                        "tokens/s/user", "seq/s", "request_latency", "memory")},
                )
            except Exception as e:  # record, don't hide
                rec["wall_s"] = time.perf_counter() - t
                rec["reason"] = f"aiconfigurator error: {type(e).__name__}: {str(e)[:300]}"
        results.append(rec)
        details.append(det)
        sys.stderr.write("%s %s %s\n" % (rec["id"][:70], rec["supported"], rec["pred_metric"]))

    walls = sorted(x["wall_s"] for x in results if x["supported"])
    about = ("aiconfigurator 0.12.0 (PyPI, Apache-2.0) run by calib/sources/aiconfigurator_compare.py on every row of "
             "calib/bench_serve.json: cli_estimate(mode='agg') per row; pred_metric is its prediction of the row's own metric "
             "(ttft and tpot in s, output_throughput in tok/s of the replica); wall_s the warm estimate's seconds. Startup: "
             "import %.1f s, each table's first load 0.7-3.3 s." % IMPORT_S)
    json.dump({"about": about, "median_wall_s": statistics.median(walls) if walls else None, "rows": results},
              sys.stdout, indent=1, default=float)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
