#!/usr/bin/env bash
# dense test
# One replica on 8 GPUs (TP4, PP2).
# Written by mrep for SGLang 0.5.23. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-meta-llama/Llama-3.1-70B-Instruct}  # the model's Hugging Face id or local path
python -m sglang.launch_server --model-path "$MODEL" \
  --tp-size 4 \
  --pp-size 2 \
  --max-running-requests 128 \
  --chunked-prefill-size 2048 \
  --mem-fraction-static 0.88 \
  --context-length 4096 \
  --port 30000

# benchmark (another shell, once the server is up):
# python -m sglang.bench_serving --backend sglang \
#   --dataset-name random \
#   --random-input-len 3000 \
#   --random-output-len 300 \
#   --random-range-ratio 1 \
#   --num-prompts 300 \
#   --request-rate 2.5 \
#   --port 30000
