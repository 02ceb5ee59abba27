#!/usr/bin/env bash
# dense test
# One replica on 8 GPUs (TP4, PP2).
# Written by mrep for TensorRT-LLM (PyTorch backend) main-44373a3. Start the server, then run the benchmark from another shell.
set -euo pipefail
MODEL=${MODEL:-meta-llama/Llama-3.1-70B-Instruct}  # the model's Hugging Face id or local path
CONFIG=${CONFIG:-$(dirname "$0")/deploy-1-trtllm.yml}  # the LLM API options written beside this script
trtllm-serve "$MODEL" \
  --backend pytorch \
  --tp_size 4 \
  --pp_size 2 \
  --ep_size 1 \
  --max_batch_size 128 \
  --max_num_tokens 2048 \
  --max_seq_len 4096 \
  --kv_cache_free_gpu_memory_fraction 0.88 \
  --extra_llm_api_options "$CONFIG" \
  --port 8000

# benchmark (another shell, once the server is up):
# python -m tensorrt_llm.serve.scripts.benchmark_serving --model "$MODEL" \
#   --backend openai \
#   --dataset-name random \
#   --random-input-len 3000 \
#   --random-output-len 300 \
#   --random-ids \
#   --ignore-eos \
#   --num-prompts 300 \
#   --request-rate 2.5 \
#   --port 8000
