#!/usr/bin/env bash
# Regenerate the bundled dumps in examples/dumps from the real configs in examples/configs.
# Usage: make examples   (or: PY=.venv/bin/python examples/generate.sh)
# The clock is pinned so that regenerating with the same versions gives the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CONFIGS=${MREP_CONFIGS:-examples/configs}
OUT=examples/dumps
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1767225600}   # 2026-01-01T00:00:00Z
mkdir -p "$OUT"

for name in Llama-3.1-8B Llama-3.1-70B-Instruct Llama-3.2-1B-Instruct Mistral-7B-v0.1 \
            Mixtral-8x7B-v0.1 Qwen2.5-7B gpt2 DeepSeek-V3 Llama-4-Scout-17B-16E-Instruct \
            Qwen3-30B-A3B Qwen3-235B-A22B gpt-oss-120b; do
  "$PY" -m mrep_export --hf-config "$CONFIGS/$name.json" -o "$OUT/$name.json.gz" --label base
done

# The older TensorRT-LLM tables' "LLaMA 7B" and "LLaMA 70B" (measured calibration rows).
for name in Llama-2-7b Llama-2-70b; do
  "$PY" -m mrep_export --hf-config "$CONFIGS/$name.RECONSTRUCTED.json" -o "$OUT/$name.json.gz" --name "$name" --label base
done

# DeepSeek-V2-Lite and DeepSeek-V2, the models of AMD's MI355X MoE training runs (Primus's
# moe_package), reconstructed from Primus's Megatron model files and kernel-benchmark shapes.
for name in DeepSeek-V2-Lite DeepSeek-V2; do
  "$PY" -m mrep_export --hf-config "$CONFIGS/$name.RECONSTRUCTED.json" -o "$OUT/$name.json.gz" --name "$name" --label base -q
done

# The model zoo: models people deploy and train today, each from its published config.json
# (examples/configs/README.md says where each came from), named explicitly. Llama-3.1-405B:
# 405,853,388,800 parameters, the published count.
for name in Llama-3.1-405B Llama-3.2-3B-Instruct Llama-4-Maverick-17B-128E-Instruct \
            Qwen2.5-3B Qwen2.5-14B Qwen2.5-32B Qwen3-0.6B Qwen3-1.7B Qwen3-4B Qwen3-8B Qwen3-14B Qwen3-32B \
            Qwen3-Coder-480B-A35B-Instruct DeepSeek-R1 DeepSeek-V3.2 Mixtral-8x22B-v0.1 MiniMax-M2.5 \
            gemma-2-2b gemma-2-9b gemma-2-27b gemma-3-1b-it gemma-3-4b-it gemma-3-27b-it phi-4 gpt-oss-20b; do
  "$PY" -m mrep_export --hf-config "$CONFIGS/$name.json" -o "$OUT/$name.json.gz" --name "$name" --label base -q
done
# Kimi-K2's config names model_type kimi_k2 (remote code); its architecture is DeepSeek-V3's
# (DeepseekV3ForCausalLM), which transformers builds natively.
"$PY" -m mrep_export --hf-config "$CONFIGS/Kimi-K2-Instruct.json" -o "$OUT/Kimi-K2-Instruct.json.gz" --name Kimi-K2-Instruct \
  --label base --override model_type=deepseek_v3 -q

# One config changed: grouped-query attention undone (8 -> 32 KV heads), for `mrep diff`.
"$PY" -m mrep_export --hf-config "$CONFIGS/Llama-3.1-8B.json" -o "$OUT/Llama-3.1-8B-mha.json.gz" \
  --name Llama-3.1-8B --label mha --override num_key_value_heads=32

# DeepSeek-V3 with every layer MoE (first_k_dense_replace 0): AMD's Primus time-to-train script
# runs it so (--moe_layer_freq 1), the model of the held-out MI355X DeepSeek-V3 rows.
"$PY" -m mrep_export --hf-config "$CONFIGS/DeepSeek-V3.json" -o "$OUT/DeepSeek-V3-allmoe.json.gz" \
  --name DeepSeek-V3 --label allmoe --override first_k_dense_replace=0

# Small configs with a real forward traced by FlopCounterMode: the reference the Go analyzer
# is checked against (dense GQA, MoE, MLA).
small="--override num_hidden_layers=2 --override hidden_size=64 --override num_attention_heads=4"
"$PY" -m mrep_export --hf-config "$CONFIGS/Llama-3.1-8B.json" -o "$OUT/tiny-llama-trace.json.gz" \
  --name tiny-llama $small --override intermediate_size=160 --override num_key_value_heads=2 \
  --override head_dim=16 --override vocab_size=256 --label trace --trace 2,16
"$PY" -m mrep_export --hf-config "$CONFIGS/Mixtral-8x7B-v0.1.json" -o "$OUT/tiny-mixtral-trace.json.gz" \
  --name tiny-mixtral $small --override intermediate_size=160 --override num_key_value_heads=2 \
  --override head_dim=16 --override vocab_size=256 --override num_local_experts=4 --label trace --trace 2,16
"$PY" -m mrep_export --hf-config "$CONFIGS/DeepSeek-V3.json" -o "$OUT/tiny-deepseek-trace.json.gz" \
  --name tiny-deepseek $small --override intermediate_size=160 --override moe_intermediate_size=32 \
  --override n_routed_experts=8 --override num_experts_per_tok=2 --override n_group=2 --override topk_group=1 \
  --override first_k_dense_replace=1 --override q_lora_rank=32 --override kv_lora_rank=16 \
  --override qk_nope_head_dim=16 --override qk_rope_head_dim=8 --override v_head_dim=16 \
  --override num_key_value_heads=4 --override vocab_size=256 --override max_position_embeddings=256 \
  --override rope_scaling=null --label trace --trace 2,16

# A real (tiny) training run dumped at checkpoints, for history and diff.
"$PY" examples/train_checkpoints.py
