#!/usr/bin/env bash
# moe
# Megatron-LM arguments for the layout mrep planned (model: deepseek-ai/DeepSeek-V3); add your model, data and
# tokenizer arguments and launch with torchrun on 256 GPUs.
PARALLEL_ARGS=(
  --tensor-model-parallel-size 1
  --pipeline-model-parallel-size 16
  --decoder-first-pipeline-num-layers 1
  --expert-model-parallel-size 8
  --moe-token-dispatcher-type flex
  --moe-flex-dispatcher-backend deepep
  --overlap-moe-expert-parallel-comm
)
BATCH_ARGS=(
  --micro-batch-size 1
  --global-batch-size 1024
  --seq-length 4096
)
MEMORY_ARGS=(
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --recompute-granularity full
  --recompute-method block
  --recompute-num-layers 2
)
PRECISION_ARGS=(
  --bf16
  --fp8-format e4m3
  --fp8-recipe blockwise
)
# torchrun --nproc-per-node 8 --nnodes 32 pretrain_gpt.py "${PARALLEL_ARGS[@]}" "${BATCH_ARGS[@]}" "${MEMORY_ARGS[@]}" "${PRECISION_ARGS[@]}" ...
