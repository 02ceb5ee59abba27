"""dense

torchtitan 0.3 config module written by mrep for the layout it planned, checked against
pytorch/torchtitan main b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21): a run is a Python function returning Trainer.Config (torchtitan/config/README.md).
Launch from torchtitan's repository root, with this file's directory importable, on each of 8 node(s) (64 GPUs):

    PYTHONPATH=/path/to/this/dir NGPU=8 MODULE=train_torchtitan CONFIG=mrep_plan ./run_train.sh

(across nodes, torchrun's --nnodes 8 and rendezvous options in place of run_train.sh's).
"""
from torchtitan.components.quantization import Float8LinearConverter, MXFP8LinearConverter
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_70b as base


def mrep_plan():
    config = base()
    # tokenizer from the base's hf_assets_path: python scripts/download_hf_assets.py --repo_id meta-llama/Llama-3.1-70B --assets tokenizer

    p = config.parallelism
    p.data_parallel_replicate_degree = 1
    p.data_parallel_shard_degree = 2
    p.tensor_parallel_degree = 4
    p.context_parallel_degree = 2
    p.expert_parallel_degree = 1
    p.pipeline_parallel_degree = 4
    p.pipeline_parallel_schedule = "Interleaved1F1B"
    p.num_pp_microbatches = 64

    t = config.training
    t.num_tokens_per_microbatch_per_dp_rank = 8192  # a micro-batch of 1 x 8192 tokens
    t.num_tokens_per_train_step = 1048576  # the global batch, 128 sequences
    t.max_context_length = 8192
    t.mixed_precision_param = "bfloat16"

    # mrep timed Megatron's selective (attention core) checkpointing; torchtitan's nearest is per-op
    config.activation_checkpoint = SelectiveAC.Config()
    config.compile.enable = True
    config.compile.enable_async_tensor_parallel = True
    return config
