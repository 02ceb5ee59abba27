#!/usr/bin/env bash
# test deployment
# One replica on 8 GPUs (TP1, EP8, attention data-parallel x8); the plan runs 2 replicas behind a load balancer, each started like this one.
# Written by mrep for ATOM 0.1.5. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-deepseek-ai/DeepSeek-V3}  # the model's Hugging Face id or local path
# NOTE: the plan timed FP8 weights: ATOM reads them from an FP8 checkpoint (MODEL), as AMD's recipes run.
python -m atom.entrypoints.openai_server --model "$MODEL" \
  --tensor-parallel-size 8 \
  --enable-dp-attention \
  --enable-expert-parallel \
  --max-num-seqs 32 \
  --max-num-batched-tokens 8192 \
  --gpu-memory-utilization 0.90 \
  --max-model-len 3072 \
  --kv_cache_dtype fp8 \
  --server-port 8000

# benchmark (another shell, once the server is up):
# python -m atom.benchmarks.benchmark_serving --model "$MODEL" \
#   --backend vllm \
#   --dataset-name random \
#   --random-input-len 2000 \
#   --random-output-len 500 \
#   --random-range-ratio 1 \
#   --ignore-eos \
#   --num-prompts 640 \
#   --max-concurrency 64 \
#   --port 8000
