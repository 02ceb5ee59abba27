#!/usr/bin/env bash
# test deployment
# One replica on 8 GPUs (TP1, EP8, attention data-parallel x8); the plan runs 2 replicas behind a load balancer, each started like this one.
# Written by mrep for TensorRT-LLM (PyTorch backend) main-44373a3. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-deepseek-ai/DeepSeek-V3}  # the model's Hugging Face id or local path
CONFIG=${CONFIG:-$(dirname "$0")/deploy-1-trtllm.yml}  # the LLM API options written beside this script
trtllm-serve "$MODEL" \
  --backend pytorch \
  --tp_size 8 \
  --pp_size 1 \
  --ep_size 8 \
  --max_batch_size 32 \
  --max_num_tokens 8192 \
  --max_seq_len 3072 \
  --kv_cache_free_gpu_memory_fraction 0.90 \
  --extra_llm_api_options "$CONFIG" \
  --port 8000

# benchmark (another shell, once the server is up):
# python -m tensorrt_llm.serve.scripts.benchmark_serving --model "$MODEL" \
#   --backend openai \
#   --dataset-name random \
#   --random-input-len 2000 \
#   --random-output-len 500 \
#   --random-ids \
#   --ignore-eos \
#   --num-prompts 640 \
#   --max-concurrency 64 \
#   --port 8000
