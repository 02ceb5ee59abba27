#!/usr/bin/env python3
"""Write calib/fsdp_training.json: measured FSDP pre-training throughput from two sources beyond
torchtitan's Dec 2024 benchmark, the FSDP lanes' second and third fit sources (issue 34, item 3).

The rows come from calib/sources/transcribed/fsdp_pretrain.json (each figure with its source,
commit and quoted table row). Kept: the rows whose layout, batch, checkpointing and precision
the source (or the config file it runs, at the same commit) states, on models mrep has dumps for.
Left out, listed under "skipped" with why: models without a dump (13B, 34B, 1.8B), fms-fsdp's
block-level "selective AC" (the fraction of blocks is not stated), torchtitan's layer-level
SAC, float8 rowwise (no recipe mrep times), runs without a GPU count or batch, MFU-only rows that
repeat a table, wall times over many iterations, and MoE rows whose GPU count is ambiguous.

Sources:
  IBM fms-fsdp README 'Training throughput benchmarks' @5a296afe (with torch.compile) and
      @4ffb9bd (before it): FSDP1, HSDP within a node for 7B, FULL_SHARD for 70B, seq 4096
      (fms_fsdp/config/training.py), bf16 mixed precision;
  torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @b5bcd76: FSDP2 + TP8 on
      H100 96GB HBM2e (Grand Teton), seq 8192 (llama3_*.toml at the benchmark's torchtitan);
  torchtitan docs/performance.md @3faaa1a0 (Aug 2024): FSDP2 on 64 A100 80GB, and 405B with
      FSDP16 x TP8 on 128 H100 96GB (train_configs/llama3_405b.toml: TP8, compile, async TP).

Usage: python3 calib/sources/fsdp_rows.py > calib/fsdp_training.json
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = json.load(open(os.path.join(HERE, "transcribed", "fsdp_pretrain.json")))

rows, skipped = [], []


def src_of(t):
    s = t["source"] if isinstance(t["source"], str) else json.dumps(t["source"])
    s = re.sub(r"^github ", "", s)
    return re.sub(r"\s+", " ", s)


def keep(i, id, model, chip, gpus, mbs, seq, dtype, recompute, value, note, **kw):
    t = SRC[i]
    r = {"id": id, "kind": "train_throughput", "source": src_of(t), "model": model, "chip": chip, "dtype": dtype,
         "gpus": gpus, "tp": kw.pop("tp", 1), "seq": seq, "mbs": mbs, "framework": "fsdp", "zero": 3,
         "recompute": recompute}
    r.update(kw)
    r["gbs"] = r.pop("gbs", None) or mbs * gpus // r["tp"]
    r.update({"measured": value, "unit": "tok/s/gpu", "note": note + "; as published: " + t["quote"].strip().splitlines()[-1].strip()})
    assert t["tokens_per_s_per_gpu"] == value, (i, t["tokens_per_s_per_gpu"], value)
    rows.append(r)


FMS = "fms-fsdp: FSDP1, bf16 mixed precision, seq 4096 (config default; the 7B trained at 4k)"
# current table, torch.compile on (@5a296afe)
keep(1, "FMS-compile-7b-h100x96", "Llama-2-7b", "H100-SXM", 96, 2, 4096, "bf16", "none", 9600,
     FMS + ", HSDP within each 8-GPU node, torch.compile, no activation checkpointing", compile=True, hsdp_replicas=12)
keep(0, "FMS-compile-7b-a100x128", "Llama-2-7b", "A100-SXM", 128, 2, 4096, "bf16", "none", 4550,
     FMS + ", HSDP within each 8-GPU node, torch.compile, no activation checkpointing", compile=True, hsdp_replicas=16)
# the table before torch.compile (@4ffb9bd)
keep(9, "FMS-7b-h100x96", "Llama-2-7b", "H100-SXM", 96, 2, 4096, "bf16", "none", 7500,
     FMS + ", HSDP within each 8-GPU node, eager, no activation checkpointing", hsdp_replicas=12)
keep(8, "FMS-7b-a100x128", "Llama-2-7b", "A100-SXM", 128, 2, 4096, "bf16", "none", 3700,
     FMS + ", HSDP within each 8-GPU node, eager, no activation checkpointing", hsdp_replicas=16)
keep(15, "FMS-70b-h100x96", "Llama-2-70b", "H100-SXM", 96, 2, 4096, "bf16", "full", 800,
     FMS + ", FULL_SHARD, eager, every block checkpointed")
keep(14, "FMS-70b-a100x128", "Llama-2-70b", "A100-SXM", 128, 2, 4096, "bf16", "full", 370,
     FMS + ", FULL_SHARD, eager, every block checkpointed")

ATP = "torchtitan asyncTP benchmark: FSDP2 x TP8 on H100 96GB HBM2e (500 W), torch.compile, seq 8192 (llama3 toml)"
for i, id, model, gpus, mbs, rc, dt, rec, atp, v in [
    (22, "TTA-70b-256gpu-bf16", "Llama-3.1-70B-Instruct", 256, 16, "full", "bf16", None, False, 597.3),
    (23, "TTA-70b-256gpu-bf16-asynctp", "Llama-3.1-70B-Instruct", 256, 16, "full", "bf16", None, True, 652.4),
    (24, "TTA-70b-256gpu-fp8", "Llama-3.1-70B-Instruct", 256, 16, "full", "fp8", "fp8-cs", False, 809.8),
    (25, "TTA-70b-256gpu-fp8-asynctp", "Llama-3.1-70B-Instruct", 256, 16, "full", "fp8", "fp8-cs", True, 942.4),
    (28, "TTA-8b-64gpu-bf16", "Llama-3.1-8B", 64, 12, "op", "bf16", None, False, 4378),
    (29, "TTA-8b-64gpu-bf16-asynctp", "Llama-3.1-8B", 64, 12, "op", "bf16", None, True, 4809.4),
    (30, "TTA-8b-64gpu-fp8", "Llama-3.1-8B", 64, 12, "op", "fp8", "fp8-cs", False, 5078.1),
    (31, "TTA-8b-64gpu-fp8-asynctp", "Llama-3.1-8B", 64, 12, "op", "fp8", "fp8-cs", True, 5570.1),
]:
    kw = {"tp": 8, "compile": True}
    if rec:
        kw["recipe"] = rec
    if atp:
        kw["tp_overlap"] = True
    keep(i, id, model, "H100-96GB", gpus, mbs, 8192, dt, rc, v,
         ATP + (", async TP" if atp else "") + (", float8 tensorwise (current scaling)" if rec else "") +
         (", full activation checkpointing" if rc == "full" else ", per-op selective checkpointing"), **kw)

PERF = "torchtitan docs/performance.md (Aug 2024): FSDP2"
keep(47, "TTP-8b-a100x64-op", "Llama-3.1-8B", "A100-SXM", 64, 1, 8192, "bf16", "op", 2973,
     PERF + " over 64 A100 80GB, seq 8192 (llama3_8b.toml), per-op selective checkpointing, eager (compile=false in the toml)")
keep(48, "TTP-70b-a100x64-full", "Llama-3.1-70B-Instruct", "A100-SXM", 64, 1, 8192, "bf16", "full", 331,
     PERF + " over 64 A100 80GB, seq 8192 (llama3_70b.toml), full checkpointing, eager (compile=false in the toml)")
keep(52, "TTP-llama2-70b-a100x64-op", "Llama-2-70b", "A100-SXM", 64, 1, 4096, "bf16", "op", 355,
     PERF + " over 64 A100 80GB, seq 4096, per-op selective checkpointing, local batch 1, eager")
keep(53, "TTP-llama2-70b-a100x64-full", "Llama-2-70b", "A100-SXM", 64, 2, 4096, "bf16", "full", 353,
     PERF + " over 64 A100 80GB, seq 4096, full checkpointing, local batch 2, eager")
for i, id, dt, rec, atp, v in [(43, "TTP-405b-h100x128-bf16", "bf16", None, False, 109),
                               (44, "TTP-405b-h100x128-fp8", "fp8", "fp8-cs", False, 177),
                               (45, "TTP-405b-h100x128-fp8-asynctp", "fp8", "fp8-cs", True, 185)]:
    kw = {"tp": 8, "compile": True, "gbs": 32}
    if rec:
        kw["recipe"] = rec
    if atp:
        kw["tp_overlap"] = True
    keep(i, id, "Llama-3.1-405B", "H100-96GB", 128, 2, 8192, dt, "full", v,
         PERF + " 16 x TP8 on 128 H100 95GB HBM2e (lower TDP), seq 8192, full checkpointing, compile and TP8 from llama3_405b.toml @3faaa1a0" +
         (", async TP" if atp else "") + (", float8 tensorwise with float8 all-gather" if rec else ""), **kw)

used = {int(m) for m in re.findall(r"keep\((\d+)", open(__file__).read())} | {22, 23, 24, 25, 28, 29, 30, 31, 43, 44, 45}
for i, t in enumerate(SRC):
    if i in used:
        continue
    prec = (t.get("precision") or "").lower()
    ac = (t.get("activation_checkpointing") or "").lower()
    why = ("float8 rowwise: no recipe mrep times" if "rowwise" in prec else
           "fms-fsdp block-level selective AC: the fraction of blocks checkpointed is not stated" if "fraction" in ac or "block-level" in ac else
           "layer-level selective AC (every other layer) is not a recompute mode of mrep's" if "layer-level" in ac else
           "GPU count or batch not stated" if not t.get("gpus") or not t.get("mbs") else
           "model without a dump in mrep's zoo, or a figure that repeats a table (MFU only, wall time)")
    skipped.append({"index": i, "source": src_of(t)[:160], "model": t.get("model"), "gpu": t.get("gpu"), "why": why})

print(json.dumps({"about": __doc__.strip().splitlines()[0], "rows": rows, "skipped": skipped}, indent=1))
