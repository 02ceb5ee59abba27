#!/usr/bin/env bash
# test deployment
# One replica on 8 GPUs (TP1, EP8, attention data-parallel x8); the plan runs 2 replicas behind a load balancer, each started like this one.
# Written by mrep for vLLM (V1 engine) 0.33.0. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-deepseek-ai/DeepSeek-V3}  # the model's Hugging Face id or local path
vllm serve "$MODEL" \
  --tensor-parallel-size 1 \
  --data-parallel-size 8 \
  --enable-expert-parallel \
  --max-num-seqs 32 \
  --max-num-batched-tokens 8192 \
  --gpu-memory-utilization 0.90 \
  --max-model-len 3072 \
  --kv-cache-dtype fp8 \
  --quantization fp8 \
  --port 8000

# benchmark (another shell, once the server is up):
# vllm bench serve --model "$MODEL" \
#   --dataset-name random \
#   --random-input-len 2000 \
#   --random-output-len 500 \
#   --random-range-ratio 0 \
#   --ignore-eos \
#   --num-prompts 640 \
#   --max-concurrency 64 \
#   --port 8000
