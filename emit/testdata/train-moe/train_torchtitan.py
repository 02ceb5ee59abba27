"""moe

torchtitan 0.3 config module written by mrep for the layout it planned, checked against
pytorch/torchtitan main b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21): a run is a Python function returning Trainer.Config (torchtitan/config/README.md).
Launch from torchtitan's repository root, with this file's directory importable, on each of 32 node(s) (256 GPUs):

    PYTHONPATH=/path/to/this/dir NGPU=8 MODULE=train_torchtitan CONFIG=mrep_plan ./run_train.sh

(across nodes, torchrun's --nnodes 32 and rendezvous options in place of run_train.sh's).
"""
from torchtitan.components.quantization import Float8LinearConverter, MXFP8LinearConverter
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.deepseek_v3 import model_registry
from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_671b as base


def mrep_plan():
    config = base()
    # tokenizer from the base's hf_assets_path: python scripts/download_hf_assets.py --repo_id deepseek-ai/DeepSeek-V3 --assets tokenizer

    p = config.parallelism
    p.data_parallel_replicate_degree = 2
    p.data_parallel_shard_degree = 8
    p.tensor_parallel_degree = 1
    p.context_parallel_degree = 1
    p.expert_parallel_degree = 8
    # mrep timed the deepep dispatcher: it is a setting of the model's MoE config, not of the job (see the
    # *_hybridep configurations in torchtitan's deepseek_v3 config_registry.py)
    # mrep timed the 1f1b all-to-all overlap, which torchtitan has no option for: its all-to-all is exposed
    p.pipeline_parallel_degree = 16
    p.pipeline_parallel_schedule = "1F1B"
    p.num_pp_microbatches = 64

    t = config.training
    t.num_tokens_per_microbatch_per_dp_rank = 4096  # a micro-batch of 1 x 4096 tokens
    t.num_tokens_per_train_step = 4194304  # the global batch, 1024 sequences
    t.max_context_length = 4096
    t.mixed_precision_param = "bfloat16"

    config.activation_checkpoint = FullAC.Config()
    config.compile.enable = False
    config.compile.enable_async_tensor_parallel = False
    # torchtitan's nearest to 128-element blocks: row-wise scaling
    config.model_spec = model_registry(
        config.model_spec.flavor,
        converters=[Float8LinearConverter.Config(recipe_name="rowwise", filter_fqns=["lm_head"], model_compile_enabled=False)],
    )
    return config
