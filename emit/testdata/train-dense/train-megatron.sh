#!/usr/bin/env bash
# dense
# Megatron-LM arguments for the layout mrep planned (model: meta-llama/Llama-3.1-70B); add your model, data and
# tokenizer arguments and launch with torchrun on 64 GPUs.
export CUDA_DEVICE_MAX_CONNECTIONS=1  # required with TP or CP > 1 before Blackwell
PARALLEL_ARGS=(
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 4
  --num-layers-per-virtual-pipeline-stage 4
  --context-parallel-size 2
  --sequence-parallel
  --tp-comm-overlap
)
BATCH_ARGS=(
  --micro-batch-size 1
  --global-batch-size 128
  --seq-length 8192
)
MEMORY_ARGS=(
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --recompute-granularity selective
)
PRECISION_ARGS=(
  --bf16
)
# torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py "${PARALLEL_ARGS[@]}" "${BATCH_ARGS[@]}" "${MEMORY_ARGS[@]}" "${PRECISION_ARGS[@]}" ...
