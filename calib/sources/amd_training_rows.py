#!/usr/bin/env python3
"""Write calib/amd_training.json: AMD's published Megatron (Primus) MoE pre-training runs on
MI355X, the fit set of the Instinct training lane (issue 34, item 2).

The figures come from calib/sources/transcribed/primus_moe_package.json (AMD-AGI/Primus's
moe_package README, its charts and run scripts at one commit). Kept: the runs of a stack mrep
times as it runs: the DeepSeek-V2-Lite micro-batch sweep on one node (Baseline: NCCL-style
all-to-all, eager, Megatron's own MoE path) and DeepSeek-V2's Base-1F1B run on four nodes.
Left out, with why: loss fusion (mrep has no term for the cross-entropy kernel it replaces),
Primus-Turbo's DeepEP port (64 CUs and BF16 dispatch, not the DeepEP mrep times), sync-free
MoE, NUMA binding and launch tuning (host-side changes mrep has no knob for), and every bar
built on them.

Usage: python3 calib/sources/amd_training_rows.py > calib/amd_training.json
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = json.load(open(os.path.join(HERE, "transcribed", "primus_moe_package.json")))

rows, skipped = [], []
for fig in SRC["figures"]:
    for bar in fig["bars"]:
        base = bar["label"].endswith("Baseline") or bar["label"] == "Base-1F1B"
        if not base:
            skipped.append(f'{fig["model"]} {bar["label"]}: built on a feature mrep does not time')
            continue
        src = f'{SRC["source"]}: {fig["chart"]}, bar {bar["label"]}'
        if fig["model"] == "DeepSeek-V2-Lite":
            mbs = bar["mbs"]
            r = {"id": f'PRIMUS-DSV2Lite-mi355x-8gpu-mbs{mbs}', "kind": "train_throughput", "source": src,
                 "model": "DeepSeek-V2-Lite", "chip": "MI355X", "dtype": "bf16", "gpus": 8, "tp": 1, "pp": 1, "cp": 1,
                 "ep": 8, "etp": 1, "seq": 4096, "mbs": mbs, "gbs": 64 * mbs, "framework": "megatron",
                 "measured": bar["tokens_per_s_per_gpu"], "unit": "tok/s/gpu",
                 "note": "BF16, eager, all-to-all dispatcher, forced balanced routing; GBS 64 x MBS (GA 8) as the script sets "
                         "it for MBS 12 and 14, the sweep's own GBS not stated; memory use as published: " + bar["memory_usage"]}
        else:
            r = {"id": "PRIMUS-DSV2-mi355x-32gpu-base-1f1b", "kind": "train_throughput", "source": src,
                 "model": "DeepSeek-V2", "chip": "MI355X", "dtype": "bf16", "gpus": 32, "tp": 1, "pp": 4, "vp": 1, "cp": 1,
                 "ep": 8, "etp": 1, "seq": 4096, "mbs": 1, "gbs": 256, "framework": "megatron",
                 "grouped_gemm": "legacy",
                 "measured": bar["tokens_per_s_per_gpu"], "unit": "tok/s/gpu",
                 "note": "BF16, eager, all-to-all dispatcher, 1F1B without interleaving (GA 32); Megatron's legacy "
                         "grouped GEMM (moe_use_legacy_grouped_gemm true in configs/MI355X/deepseek_v2-pretrain-baseline.yaml; "
                         "the V2-Lite baseline sets it false)"}
        rows.append(r)

about = ("AMD's published Megatron (Primus) MoE pre-training runs on MI355X: " + SRC["source"] + ". " + SRC["how"] +
         " Test environment: " + SRC["test_environment"] + ". Written by calib/sources/amd_training_rows.py; left out: " +
         "; ".join(skipped) + ".")
print(json.dumps({"about": about, "rows": rows}, indent=1))
