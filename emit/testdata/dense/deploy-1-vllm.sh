#!/usr/bin/env bash
# dense test
# One replica on 8 GPUs (TP4, PP2).
# Written by mrep for vLLM (V1 engine) 0.33.0. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-meta-llama/Llama-3.1-70B-Instruct}  # the model's Hugging Face id or local path
vllm serve "$MODEL" \
  --tensor-parallel-size 4 \
  --pipeline-parallel-size 2 \
  --max-num-seqs 128 \
  --max-num-batched-tokens 2048 \
  --gpu-memory-utilization 0.88 \
  --max-model-len 4096 \
  --port 8000

# benchmark (another shell, once the server is up):
# vllm bench serve --model "$MODEL" \
#   --dataset-name random \
#   --random-input-len 3000 \
#   --random-output-len 300 \
#   --random-range-ratio 0 \
#   --ignore-eos \
#   --num-prompts 300 \
#   --request-rate 2.5 \
#   --port 8000
