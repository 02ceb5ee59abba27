#!/usr/bin/env python3
"""Write calib/finetune_time.json: measured step times and throughputs of SFT and LoRA runs.

The rows come from calib/sources/transcribed/finetune_time.json (each figure transcribed with its
source, commit and quoted table row; see the README there). This script keeps the ones mrep can
express as they ran and says in each row's note what it assumed; the others are listed at the end
of the output under "skipped" with why (models mrep has no dump for, a worked example rather
than a measurement, superseded doc versions, runs whose layout or lengths the source does not
state, convergence runs whose recipes were not transcribed).

Fit sets (issue 33, item 4): NVIDIA's own publications only:
  NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (26.06: Llama-3 70B SFT and LoRA on
      GB300, GB200, H100),
  NVIDIA/NeMo docs/source/performance/performance_summary.md (24.07: Llama-2 SFT and LoRA, H100),
  NVIDIA/dgxc-benchmarking ft_llama3 READMEs (v25.04: Llama-3.1 8B and 70B, SFT and LoRA, BF16
      and FP8, 8-32 H100),
  NVIDIA-NeMo/Automodel docs/performance-summary (FSDP2 LoRA, H100).

Usage: python3 calib/sources/finetune_time_rows.py > calib/finetune_time.json
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = json.load(open(os.path.join(HERE, "transcribed", "finetune_time.json")))

ZOO = {"Llama-3.1-70B-Instruct", "Llama-2-7b", "Llama-2-70b", "Llama-3.1-8B", "Qwen2.5-7B", "Qwen2.5-32B"}
CHIP = {"H100": "H100-SXM", "GB200": "GB200", "GB300": "GB300"}
# Megatron's LoRA target names as Hugging Face module globs (mrep's dumps carry HF names).
MEG = {"linear_qkv": ["*q_proj", "*k_proj", "*v_proj"], "linear_proj": ["*o_proj"],
       "linear_fc1": ["*gate_proj", "*up_proj"], "linear_fc2": ["*down_proj"]}
ALL = ["*q_proj", "*k_proj", "*v_proj", "*o_proj", "*gate_proj", "*up_proj", "*down_proj"]

rows, skipped = [], []


def short_source(s):
    """The source up to its section: repository, commit, file, section (no prose after)."""
    return re.sub(r"\s+", " ", s.split("; identical rows")[0]).strip()


def slug(s):
    return re.sub(r"[^A-Za-z0-9.]+", "-", s).strip("-").lower()


for i, t in enumerate(SRC):
    model = t.get("model_guess")
    src = t["source"]
    why = None
    if t.get("superseded"):
        why = "superseded: " + t["superseded"]
    elif t.get("example_value"):
        why = "a worked example of the MFU formula, not a measured run"
    elif "model_verification_cards" in src:
        why = "convergence-check run (Tulu3 packed, NaN/large-grad checks on, 5-25% MFU); its recipe's layout and recompute were not transcribed"
    elif model not in ZOO:
        why = f"model {t.get('model')!r} has no dump in mrep's zoo"
    elif t.get("gpu") not in CHIP:
        why = f"GPU {t.get('gpu')!r}: fp32 or unstated-length runs (no sequence length stated), or a chip not in mrep's database"
    elif not t.get("seq_len"):
        why = "sequence length not stated"
    if why:
        skipped.append({"index": i, "source": short_source(src), "model": t.get("model"), "gpu": t.get("gpu"), "method": t.get("method"), "why": why})
        continue

    prec = (t.get("precision") or "").lower()
    r = {"kind": None, "source": short_source(src), "model": model, "chip": CHIP[t["gpu"]], "gpus": t["gpus"],
         "tp": t.get("tp") or 1, "pp": t.get("pp") or 1, "cp": t.get("cp") or 1, "vp": t.get("vp") or 1,
         "seq": t["seq_len"], "gbs": t["gbs"], "mbs": t["mbs"]}
    notes = []
    automodel = "Automodel" in src
    if automodel:
        # NeMo AutoModel: FSDP2 over the data-parallel ranks (TP2 + sequence parallel for 32B/70B,
        # with activation checkpointing and torch.compile per its benchmark recipes), TE + Triton
        # LoRA kernels, bf16 parameters with fp32 reduction (MixedPrecisionPolicy).
        r["stack"] = "automodel"
        if r["tp"] > 1:
            r["recompute"] = "full"
            notes.append("TP2 recipes: activation checkpointing, async TP, torch.compile, fsdp2 prefetch")
        else:
            r["recompute"] = "none"
            notes.append("1-GPU recipes: no activation checkpointing")
    else:
        r["stack"] = "nemo"
        if "Megatron-Bridge" in src:
            # the performance scripts' settings for every model (scripts/performance: FP8-CS and
            # MXFP8 gather parameters in FP8; grad_reduce_in_fp32=False), as for pre-training
            r["bf16_grads"] = True
            if prec.startswith("fp8") or prec.startswith("mxfp8"):
                r["fp8_param_gather"] = True
    if prec.startswith("fp8") or prec.startswith("mxfp8"):
        r["dtype"] = "fp8"  # the GEMMs' dtype; the recipe says which scaling
        if prec.startswith("fp8-cs"):
            r["recipe"], r["fp8_param_gather"] = "fp8-cs", True
        elif "delayed" in prec:
            r["recipe"], r["fp8_param_gather"] = "fp8-ds", True
        elif prec.startswith("mxfp8"):
            r["recipe"] = "mxfp8"
    else:
        r["dtype"] = "bf16"
    if t["method"] == "lora":
        tg = t.get("lora_targets")
        if isinstance(tg, list):
            r["lora_targets"] = [g for m in tg for g in MEG[m]]
        elif isinstance(tg, str) and "all linear" in tg:
            r["lora_targets"] = ALL
        else:
            # NeMo 1.0's LoRA default (megatron_gpt_finetuning_config.yaml: adapter_dim 32 on
            # attention_qkv); the 24.07 table does not state it.
            r["lora_targets"] = MEG["linear_qkv"]
            notes.append("rank and targets not stated: NeMo 1.0's defaults (rank 32 on attention_qkv) assumed")
        r["lora_rank"] = t.get("lora_rank") or 32
        if r["dtype"] != "bf16" and not automodel:
            # Megatron keeps the frozen base in FP8 (fp8_param_gather / fp8_params): its GEMMs
            # read FP8 weights
            r["base_dtype"] = "fp8"
    if t.get("step_time_s"):
        r["kind"], r["measured"], r["unit"] = "train_step", t["step_time_s"], "s"
    else:
        r["kind"], r["measured"], r["unit"] = "train_throughput", t["tokens_per_s_per_gpu"], "tok/s/gpu"
    if t.get("packed"):
        notes.append(f"sequences packed to {t['seq_len']}")
    if "NVIDIA/NeMo " in src or src.startswith("github NVIDIA/NeMo "):
        # NeMo 1.0's fine-tuning recipes (megatron_gpt_finetuning_config.yaml) run Apex's
        # distributed_fused_adam, which keeps 16-bit parameter remainders instead of fp32 master
        # weights: mrep counts Megatron's 18 bytes per parameter, so a row that does not fit
        # by that count stays as stated and names this (not a setting the run did not use)
        r["lacks"] = "NeMo 1.0's Apex distributed_fused_adam (16-bit parameter remainders instead of fp32 master weights)"
    ver = t.get("version") or ""
    r["id"] = "FT-" + slug(f"{src.split()[1].split('/')[-1]}-{ver.split()[-1] if ver else ''}-{model}-{t['method']}-{t['gpu']}x{t['gpus']}-{t.get('precision_as_stated') or r['dtype']}")
    r["note"] = "; ".join([f"as published: {t['quote'].strip().splitlines()[-1].strip()}"] + notes)
    rows.append({k: r[k] for k in ["id", "kind"] + [k for k in r if k not in ("id", "kind")]})

ids = [r["id"] for r in rows]
dup = {x for x in ids if ids.count(x) > 1}
for r in rows:
    if r["id"] in dup:
        r["id"] += "-" + slug(r["dtype"] + ("-" + r.get("recipe", "") if r.get("recipe") else ""))
assert len({r["id"] for r in rows}) == len(rows), [x for x in ids if ids.count(x) > 1]

print(json.dumps({"about": __doc__.strip().splitlines()[0] + " The fine-tuning lanes' time check and fit set (issue 33).",
                  "rows": rows, "skipped": skipped}, indent=1))
