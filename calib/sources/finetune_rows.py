#!/usr/bin/env python3
"""Write calib/finetune.json: measured peak memory of fine-tunes, one row per published figure.

Every row names its source (repository, commit, file, section) and carries the source's own words
in its note. The rows were transcribed by hand from these files (a helper read each file at the
commit named and checked every quoted figure against it); this script holds the transcription so
the shipped file can be re-made and reviewed in one place:
  huggingface/peft @5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 docs/source/accelerate/deepspeed.md, fsdp.md,
      method_comparison/MetaMathQA/results/*.json
  unslothai/unsloth @0a2c397393e2f0085e58476887d5e1d5af294cb0 README.md (its LLaMA-Factory and Mistral 7b tables)
  axolotl-ai-cloud/axolotl @ca796fb56e5bfa02ddd30464cfa5aabba4dd5f66 and @50f2b94d examples/gpt-oss/README.md with
      the example configs of the same commits
Units: "GB" in prose and "GRAM" columns are read as 10^9 bytes; torch figures in bytes or GiB as given;
Unsloth's "memory MB" as MiB (torch.cuda.max_memory_reserved / 2^20, its notebooks' own print).
What each figure measured (memory_stat): reserved (torch.cuda.max_memory_reserved), or device
(nvidia-smi or a monitoring screenshot: the reserved pool plus the CUDA context).

Usage: python3 calib/sources/finetune_rows.py > calib/finetune.json
"""
import json

GB = 1e9 / 2**30
PEFT = "huggingface/peft @5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 "
UNSLOTH = "unslothai/unsloth @0a2c397393e2f0085e58476887d5e1d5af294cb0 README.md "
AXO = "axolotl-ai-cloud/axolotl @ca796fb56e5bfa02ddd30464cfa5aabba4dd5f66 examples/gpt-oss/README.md "

ALL = ["*q_proj", "*k_proj", "*v_proj", "*o_proj", "*gate_proj", "*up_proj", "*down_proj"]
QV = ["*q_proj", "*v_proj"]

rows = []


def row(id, source, model, chip, gpus, mbs, seq, gib, stat, note, **kw):
    r = {"id": id, "kind": "train_memory", "source": source, "model": model, "chip": chip, "dtype": "bf16",
         "gpus": gpus, "tp": 1, "seq": seq, "mbs": mbs, "gbs": mbs * gpus,
         "memory_stat": stat, "measured": round(gib, 3), "unit": "GiB", "note": note}
    r.update(kw)
    rows.append(r)


# PEFT's accelerate guides: trl SFTTrainer + PEFT, packing to 2048, gradient checkpointing, flash
# attention, LoRA r=8 alpha 16 dropout 0.1 on all linear layers (examples/sft/run_peft_*.sh)
row("FT-peft-ds3-llama2-70b-lora-8xh100", PEFT + "docs/source/accelerate/deepspeed.md 'Use PEFT and DeepSpeed with ZeRO3'",
    "Llama-2-70b", "H100-SXM", 8, 8, 2048, 64 * GB, "device",
    "\"the memory consumed per GPU is 64 GB (80%) as seen in the screenshot\"; per_device_train_batch_size 8, max_seq_len 2048 packed, use_flash_attn, gradient checkpointing, DeepSpeed ZeRO-3 bf16",
    stack="hf", zero=3, recompute="full", lora_rank=8, lora_targets=ALL, lora_dropout=0.1)
row("FT-peft-ds3-llama2-70b-qlora-2x40gb", PEFT + "docs/source/accelerate/deepspeed.md 'Use PEFT QLoRA and DeepSpeed with ZeRO3'",
    "Llama-2-70b", "A100-SXM", 2, 2, 2048, 36.6 * GB, "device",
    "\"the memory consumed per GPU is **36.6 GB**\" on 2X40GB GPUs (A100 40GB assumed: the verdict is taken at the A100-SXM's 80 GB); batch 2, 2048 packed, NF4 with bf16 quant storage, ZeRO-3",
    stack="hf", zero=3, recompute="full", lora_rank=8, lora_targets=ALL, lora_dropout=0.1, qlora=True)
row("FT-peft-fsdp-llama2-70b-qlora-2gpu", PEFT + "docs/source/accelerate/fsdp.md 'Use PEFT QLoRA and FSDP'",
    "Llama-2-70b", "A100-SXM", 2, 2, 2048, 35.6 * GB, "device",
    "\"When disabling CPU offloading, the GPU memory usage is **35.6 GB/ GPU**\" (GPU type not stated: A100-SXM assumed); batch 2, 2048 packed, FSDP FULL_SHARD",
    stack="hf", framework="fsdp", zero=3, recompute="full", lora_rank=8, lora_targets=ALL, lora_dropout=0.1, qlora=True, param_dtype="bf16")
row("FT-peft-fsdp-llama2-70b-qlora-2gpu-offload", PEFT + "docs/source/accelerate/fsdp.md 'Use PEFT QLoRA and FSDP'",
    "Llama-2-70b", "A100-SXM", 2, 2, 2048, 19.6 * GB, "device",
    "\"the memory consumed per GPU is **19.6 GB** while CPU RAM usage is around **107 GB**\" on 2x24GB GPUs (A100-SXM assumed for the verdict); fsdp_offload_params true",
    stack="hf", framework="fsdp", zero=3, recompute="full", lora_rank=8, lora_targets=ALL, lora_dropout=0.1, qlora=True, param_dtype="bf16", offload_params=True)

# PEFT's MetaMathQA method comparison: a bf16 model without autocast, PEFT's fp32 adapters,
# AdamW, batch 4, sequences up to 768, no checkpointing; reserved peak less the reserved at start
MM = PEFT + "method_comparison/MetaMathQA/results/"
for name, byts, kw in [
    ("full-finetuning--llama-3.2-3B-lr_0.00001.json", 38868615168, {"param_dtype": "bf16"}),
    ("lora--llama-3.2-3B-rank32.json", 22292725760, {"lora_rank": 32, "lora_targets": QV}),
    ("lora--llama-3.2-3B-rank64.json", 22552772608, {"lora_rank": 64, "lora_targets": QV}),
    ("lora--llama-3.2-3B-rank10-target-mlp.json", 24698159104, {"lora_rank": 10, "lora_targets": ["*up_proj", "*gate_proj", "*down_proj"]}),
]:
    row("FT-peft-metamathqa-" + name.split("--")[0] + "-" + name.split("--")[1].replace(".json", ""), MM + name,
        "Llama-3.2-3B-Instruct", "L40S", 1, 4, 768, byts / 2**30, "reserved",
        f"accelerator_memory_max {byts} bytes (max_memory_reserved less the reserved at start, over the run); dtype bfloat16, use_amp false, batch_size 4, max_seq_length 768, use_gc false, AdamW",
        stack="hf", recompute="none", **kw)

# LLaMA-Factory's comparison as Unsloth's README reprints it: LLaMA2-7B, one A100, batch 4,
# LoRA rank 8, max length 1024 (LLaMA-Factory's defaults then: lora_target q_proj,v_proj,
# gradient checkpointing on)
LF = UNSLOTH + "'Llama-Factory 3rd party benchmarking' (LLaMA-Factory wiki Performance-Comparison)"
for id, gb, stack, kw in [
    ("FT-llamafactory-llama2-7b-lora-hf", 18, "hf", {}),
    ("FT-llamafactory-llama2-7b-lora-hf-fa2", 17, "hf", {}),
    ("FT-llamafactory-llama2-7b-lora-unsloth", 16, "unsloth", {}),
    ("FT-llamafactory-llama2-7b-qlora-hf", 9, "hf", {"qlora": True}),
    ("FT-llamafactory-llama2-7b-qlora-unsloth", 7, "unsloth", {"qlora": True}),
]:
    row(id, LF, "Llama-2-7b", "A100-SXM", 1, 4, 1024, gb * GB, "device",
        f"GRAM {gb} GB; TGS table: Model LLaMA2-7B, GPU NVIDIA A100 * 1, Batch size 4, Gradient accumulation 2, LoRA rank 8, Max length 1024",
        stack=stack, recompute="full", lora_rank=8, lora_targets=QV, **kw,
        # Unsloth's offloaded checkpoints came in April 2024, after these tables
        **({"offload_checkpoints": False} if stack == "unsloth" else {}))

# Unsloth's Mistral 7b table: QLoRA r16 on all linear layers, batch 4, 2048, adamw_8bit,
# gradient checkpointing (unsloth.ai/blog/mistral-benchmark lists the shared setup)
MIS = UNSLOTH + "'Performance comparisons between popular models' > 'Mistral 7b' (1 A100 40GB)"
for id, mb, stack in [("FT-unsloth-mistral-7b-qlora-hf-fa2", 19385, "hf"), ("FT-unsloth-mistral-7b-qlora-unsloth", 12465, "unsloth")]:
    row(id, MIS, "Mistral-7B-v0.1", "A100-SXM", 1, 4, 2048, mb / 1024, "reserved",
        f"memory MB {mb} (1 A100 40GB; verdict at the A100-SXM's 80 GB); Slim Orca, max_seq_length 2048, batch 4, QLoRA r16 on q,k,v,o,gate,up,down, adamw_8bit, gradient checkpointing",
        stack=stack, recompute="full", lora_rank=16, lora_targets=ALL, qlora=True, optimizer="adam8bit",
        **({"offload_checkpoints": False} if stack == "unsloth" else {}))

# axolotl's gpt-oss examples (device_mem_reserved(gib) from its logs): bf16 (MXFP4 dequantized),
# sample packing to 4096, gradient checkpointing with activation offloading, Cut Cross Entropy
row("FT-axolotl-gptoss-20b-lora-1x48gb", AXO + "+ gpt-oss-20b-sft-lora-singlegpu.yaml",
    "gpt-oss-20b", "L40S", 1, 1, 4096, 44, "reserved",
    "\"(only linear layers @ ~44GiB)\" on 1x48GB; LoRA r8 all-linear, adamw_torch_8bit, sequence_len 4096 packed, gradient checkpointing, activation_offloading, CutCrossEntropy",
    stack="hf", recompute="full", lora_rank=8, loss="fused", offload_checkpoints=True, optimizer="adam8bit", param_dtype="bf16")
for id, gpus, gib, chip in [("FT-axolotl-gptoss-20b-full-8x48gb", 8, 36, "L40S"), ("FT-axolotl-gptoss-20b-full-4x80gb", 4, 46, "H100-SXM")]:
    row(id, AXO + "+ gpt-oss-20b-fft-fsdp2.yaml", "gpt-oss-20b", chip, gpus, 1, 4096, gib, "reserved",
        f"\"FFT SFT ({gpus}x{'48' if gpus == 8 else '80'}GB @ ~{gib}GiB/GPU)\" (GPU type not stated: {chip} assumed); FSDP2, adamw_torch_8bit, bf16, 4096 packed, gradient checkpointing, activation_offloading, CutCrossEntropy",
        stack="hf", framework="fsdp", zero=3, recompute="full", loss="fused", offload_checkpoints=True, optimizer="adam8bit", param_dtype="bf16")

print(json.dumps({"about": __doc__.strip().splitlines()[0] + " The fine-tuning stacks' memory check (kind train_memory: the measured peak per GPU, in GiB).",
                  "rows": rows}, indent=1))
