#!/usr/bin/env bash
# test deployment
# One replica on 8 GPUs (TP1, EP8, attention data-parallel x8); the plan runs 2 replicas behind a load balancer, each started like this one.
# Written by mrep for SGLang 0.5.23. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-deepseek-ai/DeepSeek-V3}  # the model's Hugging Face id or local path
python -m sglang.launch_server --model-path "$MODEL" \
  --tp-size 8 \
  --attn-dp-size 8 \
  --ep-size 8 \
  --max-running-requests 256 \
  --chunked-prefill-size 65536 \
  --mem-fraction-static 0.90 \
  --context-length 3072 \
  --kv-cache-dtype fp8_e4m3 \
  --quantization fp8 \
  --port 30000

# benchmark (another shell, once the server is up):
# python -m sglang.bench_serving --backend sglang \
#   --dataset-name random \
#   --random-input-len 2000 \
#   --random-output-len 500 \
#   --random-range-ratio 1 \
#   --num-prompts 640 \
#   --max-concurrency 64 \
#   --port 30000
