#!/usr/bin/env python3
"""Reference numbers from Megatron-LM's own memory estimator (theoretical_memory_usage.py).

Megatron is not installed and none of its code is kept here: the estimator is loaded at run time
from the copy named on the command line. Its one import (`from .utils import is_hybrid_model,
print_rank_0`) is served by a stub package; `args` is a types.SimpleNamespace (a subclass that
records which attributes the estimator read). Output: JSON on stdout, all sizes in bytes.

Usage: git --git-dir=MIRROR show COMMIT:megatron/training/theoretical_memory_usage.py > tmu.py
       python3 calib/sources/megatron_memory.py tmu.py COMMIT > calib/testdata/megatron_theoretical_memory.json
"""
import contextlib
import hashlib
import importlib.util
import io
import json
import math
import re
import sys
import types

FILE_PATH = "megatron/training/theoretical_memory_usage.py"
MB = 1024 * 1024

MODELS = {  # Llama 3.1: SwiGLU, untied embeddings, RMSNorm, GQA with 8 KV groups, no bias
    "Llama-3.1-8B": dict(hidden=4096, ffn=14336, layers=32, heads=32, groups=8, vocab=128256, seq=8192),
    "Llama-3.1-70B": dict(hidden=8192, ffn=28672, layers=80, heads=64, groups=8, vocab=128256, seq=8192),
    "Llama-3.1-405B": dict(hidden=16384, ffn=53248, layers=126, heads=128, groups=8, vocab=128256, seq=8192),
}
# (tp, pp, vp, dp, micro_batch_size, num_microbatches, use_distributed_optimizer)
LAYOUTS = {
    "Llama-3.1-8B": [(1, 1, None, 8, 1, 16, True), (2, 1, None, 4, 2, 8, True),
                     (1, 1, None, 8, 1, 16, False), (4, 2, None, 1, 1, 8, True)],
    "Llama-3.1-70B": [(4, 4, 5, 4, 1, 32, True), (8, 1, None, 8, 1, 16, True),
                      (4, 8, None, 2, 1, 64, True), (2, 4, None, 8, 2, 16, True)],
    "Llama-3.1-405B": [(8, 16, 4, 2, 1, 64, True), (8, 8, None, 16, 1, 32, True),
                       (4, 16, 8, 4, 1, 128, True)],
}
# MoE models (Hugging Face config.json values): experts, shared experts, MLA and MTP, as the
# estimator's MoE branch reads them. Qwen3's per-head q/k RMSNorms are not in its formula.
MOE_MODELS = {
    "Qwen3-30B-A3B": dict(hidden=2048, ffn=6144, layers=48, heads=32, groups=4, kv_channels=128, vocab=151936, seq=4096,
                          experts=128, moe_ffn=768, topk=8, shared=None, dense_first=0),
    "Qwen3-235B-A22B": dict(hidden=4096, ffn=12288, layers=94, heads=64, groups=4, kv_channels=128, vocab=151936, seq=4096,
                            experts=128, moe_ffn=1536, topk=8, shared=None, dense_first=0),
    "DeepSeek-V3": dict(hidden=7168, ffn=18432, layers=61, heads=128, groups=None, kv_channels=128, vocab=129280, seq=4096,
                        experts=256, moe_ffn=2048, topk=8, shared=2048, dense_first=3,
                        mla=dict(q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128), mtp=1),
}
# (tp, dp, ep, etp, use_distributed_optimizer), pp = 1: the estimator's "most loaded shard" is
# then the whole model on one TP x EP rank (with pp > 1 it charges the first stage L/pp layers,
# the MTP block and the embedding together, a bound rather than a stage)
MOE_LAYOUTS = {
    "Qwen3-30B-A3B": [(1, 8, 8, 1, True), (1, 16, 8, 1, True), (2, 4, 4, 1, True), (1, 8, 8, 1, False)],
    "Qwen3-235B-A22B": [(1, 64, 64, 1, True), (4, 16, 16, 1, True), (2, 32, 32, 2, True)],
    "DeepSeek-V3": [(1, 64, 64, 1, True), (1, 256, 64, 1, True), (8, 32, 32, 1, True)],
}
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128  # Megatron's default; padding multiple is this times tp


class Args(types.SimpleNamespace):
    """SimpleNamespace that remembers which attributes were read."""

    def __getattribute__(self, name):
        if not name.startswith("__"):
            object.__getattribute__(self, "__dict__").setdefault("_read", set()).add(name)
        return object.__getattribute__(self, name)


def load_estimator(path):
    pkg = types.ModuleType("megatron_stub")
    pkg.__path__ = []
    utils = types.ModuleType("megatron_stub.utils")
    utils.is_hybrid_model = lambda args: getattr(args, "hybrid_layer_pattern", None) is not None
    utils.print_rank_0 = lambda message: print(message, flush=True)
    sys.modules["megatron_stub"] = pkg
    sys.modules["megatron_stub.utils"] = utils
    spec = importlib.util.spec_from_file_location("megatron_stub.theoretical_memory_usage", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_args(m, tp, pp, vp, dp, mbs, dist_opt, vocab):
    layers = m["layers"]
    per_vstage = layers / (pp * vp) if vp else None
    return Args(
        # model
        hidden_size=m["hidden"], ffn_hidden_size=m["ffn"], num_layers=layers,
        num_attention_heads=m["heads"], kv_channels=m["hidden"] // m["heads"],
        group_query_attention=True, num_query_groups=m["groups"],
        swiglu=True, untie_embeddings_and_output_weights=True, normalization="RMSNorm",
        add_bias_linear=False, padded_vocab_size=vocab, seq_length=m["seq"],
        # off: MoE, MLA, MTP, hybrid Mamba
        num_experts=None, moe_layer_freq=1, moe_ffn_hidden_size=None, moe_router_topk=2,
        moe_shared_expert_intermediate_size=None, moe_shared_expert_gate=False, moe_latent_size=None,
        multi_latent_attention=False, q_lora_rank=None, kv_lora_rank=None, qk_head_dim=None,
        qk_pos_emb_head_dim=None, v_head_dim=None, mtp_num_layers=None, hybrid_layer_pattern=None,
        # parallelism
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, data_parallel_size=dp,
        virtual_pipeline_model_parallel_size=vp,
        num_layers_per_virtual_pipeline_stage=int(per_vstage) if per_vstage and per_vstage == int(per_vstage) else None,
        world_size=tp * pp * dp, expert_tensor_parallel_size=tp, expert_model_parallel_size=1,
        sequence_parallel=True, recompute_granularity="selective",
        # training
        micro_batch_size=mbs, use_distributed_optimizer=dist_opt,
        bf16=True, fp16=False, fp8=None, params_dtype="bfloat16", accumulate_allreduce_grads_in_fp32=True,
    )


def make_moe_args(m, tp, dp, ep, etp, dist_opt):
    """Megatron's arguments for an MoE model at pp = 1 (selective recompute, SP, bf16)."""
    mla = m.get("mla")
    a = make_args(dict(m, hidden=m["hidden"], ffn=m["ffn"], groups=m["groups"] or m["heads"]), tp, 1, None, dp, 1, dist_opt, m["vocab"])
    a.kv_channels = m["kv_channels"]
    a.num_experts, a.moe_ffn_hidden_size, a.moe_router_topk = m["experts"], m["moe_ffn"], m["topk"]
    a.moe_layer_freq = [0] * m["dense_first"] + [1] * (m["layers"] - m["dense_first"])
    a.moe_shared_expert_intermediate_size = m["shared"]
    a.expert_model_parallel_size, a.expert_tensor_parallel_size = ep, etp
    a.world_size = tp * dp
    if mla:
        a.group_query_attention, a.multi_latent_attention = False, True
        for k, v in mla.items():
            setattr(a, k, v)
    a.mtp_num_layers = m.get("mtp")
    return a


def run_moe(est, name, m, layout, read):
    tp, dp, ep, etp, dist_opt = layout
    args = make_moe_args(m, tp, dp, ep, etp, dist_opt)
    w = est.compute_weight_and_optimizer_memory(args, verbose=False)
    read |= args.__dict__.get("_read", set())
    # parameters on the rank: the bytes without the distributed optimizer / 18; the expert
    # share from the same model with the experts' hidden width zeroed out of the count
    params = est.compute_weight_and_optimizer_memory(make_moe_args(m, tp, dp, ep, etp, False), verbose=False) / 18
    no_exp = est.compute_weight_and_optimizer_memory(make_moe_args(dict(m, moe_ffn=0), tp, dp, ep, etp, False), verbose=False) / 18
    return {
        "model": name,
        "inputs": {"tp": tp, "pp": 1, "dp": dp, "ep": ep, "etp": etp, "use_distributed_optimizer": dist_opt,
                   "world_size": tp * dp, "expert_data_parallel_size": tp * dp // (etp * ep),
                   "num_experts": m["experts"], "moe_ffn_hidden_size": m["moe_ffn"], "moe_router_topk": m["topk"],
                   "moe_shared_expert_intermediate_size": m["shared"], "first_dense_layers": m["dense_first"],
                   "mtp_num_layers": m.get("mtp"), "multi_latent_attention": bool(m.get("mla")), "padded_vocab_size": m["vocab"]},
        "weight_and_optimizer_bytes": w,
        "intermediates": {"params_on_rank": params, "expert_params_on_rank": params - no_exp},
    }


def parse_verbose(text):
    """The estimator's own printed intermediates (rounded as printed), as plain numbers."""
    pats = {
        "params_in_transformer_block": (r"parameters in transformer block in billions:\s*([\d.]+)", 1e9),
        "params_in_embedding_layers": (r"parameters in embedding layers in billions:\s*([\d.]+)", 1e9),
        "params_total": (r"Total number of parameters in billions:\s*([\d.]+)", 1e9),
        "params_on_most_loaded_shard": (r"most loaded shard in billions:\s*([\d.]+)", 1e9),
        "params_on_other_shards": (r"other shards in billions:\s*([\d.]+)", 1e9),
        "activation_bytes_per_layer_per_tp_rank": (r"per transformer layer:\s*([\d.]+) MB", MB),
        "interleaved_schedule_memory_penalty": (r"interleaved schedule:\s*([\d.]+)", 1),
        "in_flight_microbatches": (r"in-flight microbatches:\s*(\d+)", 1),
    }
    out = {}
    for key, (pat, scale) in pats.items():
        hit = re.search(pat, text)
        if hit:
            out[key] = float(hit.group(1)) * scale
            if scale == 1 and key == "in_flight_microbatches":
                out[key] = int(hit.group(1))
    branch = re.search(r"^(compute_activation_memory\S*.*)$", text, re.M)
    out["activation_branch"] = branch.group(1) if branch else None
    return out


def run(est, m, layout, vocab, read):
    tp, pp, vp, dp, mbs, nmb, dist_opt = layout
    args = make_args(m, tp, pp, vp, dp, mbs, dist_opt, vocab)
    w = est.compute_weight_and_optimizer_memory(args, verbose=False)
    a = est.compute_activation_memory(args, nmb, verbose=False)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rep = est.report_theoretical_memory(make_args(m, tp, pp, vp, dp, mbs, dist_opt, vocab),
                                            num_microbatches=nmb, verbose=True)
    printed = parse_verbose(buf.getvalue())
    # The report's MB figures must be the same call's bytes / 2^20.
    assert math.isclose(rep[0], w / MB, rel_tol=1e-12) and math.isclose(rep[1], a / MB, rel_tol=1e-12), rep
    read |= args.__dict__.get("_read", set())

    # Exact intermediates, by probing the estimator (it only prints them rounded):
    # params on the most loaded shard = weight bytes without the distributed optimizer / 18
    # (the estimator's bytes per parameter in that case).
    nd = make_args(m, tp, pp, vp, dp, mbs, False, vocab)
    params = est.compute_weight_and_optimizer_memory(nd, verbose=False) / 18
    # per-layer activation bytes per TP rank = activation(1 layer) - activation(0 layers), pp=1.
    one = make_args(dict(m, layers=1), tp, 1, None, dp, mbs, dist_opt, vocab)
    zero = make_args(dict(m, layers=0), tp, 1, None, dp, mbs, dist_opt, vocab)
    per_layer = est.compute_activation_memory(one, nmb) - est.compute_activation_memory(zero, nmb)
    if "params_on_most_loaded_shard" in printed:
        assert abs(printed["params_on_most_loaded_shard"] - params) <= 0.5e5 + 1, (printed, params)
    assert abs(printed["activation_bytes_per_layer_per_tp_rank"] - per_layer) <= 0.05 * MB + 1
    return {
        "weight_and_optimizer_bytes": w,
        "activation_bytes": a,
        "total_bytes": w + a,
        "intermediates": {
            "params_on_most_loaded_shard": params,
            "bytes_per_param": w / params,
            "activation_bytes_per_layer_per_tp_rank": per_layer,
            "activation_layer_equivalents": (a - _non_layer(est, m, layout, vocab)) / per_layer,
        },
        "estimator_printed": printed,
    }


def _non_layer(est, m, layout, vocab):
    """Activation bytes with num_layers=0: embedding-input, embedding-dropout and (pp=1) output terms."""
    tp, pp, vp, dp, mbs, nmb, dist_opt = layout
    return est.compute_activation_memory(make_args(dict(m, layers=0), tp, pp, vp, dp, mbs, dist_opt, vocab), nmb)


def padded(vocab, tp):
    mult = MAKE_VOCAB_SIZE_DIVISIBLE_BY * tp
    return int(math.ceil(vocab / mult) * mult)


ABOUT = {
    "weight_and_optimizer_bytes": (
        "Bytes of bf16 weights, fp32 main grads, fp32 main params and fp32 Adam moments on the most "
        "loaded model shard: the first pipeline stage (num_layers/pp transformer layers, the input "
        "embedding, and with pp=1 also the untied output layer), TP-sharded matrices / tp, norms "
        "replicated. Bytes per parameter: 18 without the distributed optimizer, 6 + 12/dp with it "
        "(bf16 param 2 + fp32 grad 4 kept whole; fp32 param 4 + Adam m 4 + v 4 sharded over dp). "
        "No buffers, no allocator fragmentation, no CUDA context."),
    "activation_bytes": (
        "Activation bytes on the first pipeline stage of one TP rank, Korthikanti et al. (2205.05198) "
        "Table 2 with sequence parallelism and selective recompute: per layer s*b*h*(18 + 4*ffn/h) "
        "bytes / tp, times num_layers (= pp in-flight micro-batches under 1F1B, each holding "
        "num_layers/pp layers); plus 8*s*b*pp (embedding input) and s*b*h*pp (embedding dropout mask); "
        "times the interleaving penalty 1 + (pp-1)/(pp*vp) when vp is set, else times "
        "min(1, num_microbatches/pp) when pp > 1; plus, only when pp = 1, 4*s*b*h*(1 + V/h) for the "
        "output layer input and the fp32 logits/CE loss; everything divided by tp. No GQA or SwiGLU "
        "term (the formula is the GeLU/MHA one with ffn in place of 4h)."),
    "total_bytes": "weight_and_optimizer_bytes + activation_bytes (what report_theoretical_memory prints, in bytes).",
    "intermediates.params_on_most_loaded_shard": (
        "Exact parameter count on the first stage of one TP rank, from the estimator's weight bytes "
        "without the distributed optimizer divided by its 18 bytes/param (it prints this rounded)."),
    "intermediates.bytes_per_param": "weight_and_optimizer_bytes / params_on_most_loaded_shard.",
    "intermediates.activation_bytes_per_layer_per_tp_rank": (
        "The estimator's per-layer activation bytes divided by tp: activation(num_layers=1) - "
        "activation(num_layers=0) at pp=1 (it prints this in MB)."),
    "intermediates.activation_layer_equivalents": (
        "(activation_bytes - the num_layers=0 activation) / per-layer bytes: how many layers' worth "
        "of activations the estimator charges the first stage (num_layers x in-flight factor x "
        "interleaving penalty)."),
    "estimator_printed": "What report_theoretical_memory(verbose=True) printed, parsed, rounded as printed.",
    "with_default_vocab_padding": (
        "Same, with padded_vocab_size as Megatron pads it by default (make_vocab_size_divisible_by=128 "
        "times tp); the main figures use the vocab of 128256 unpadded."),
}

ASSUMPTIONS = [
    "bf16 params, fp32 main grads/params/Adam states (the estimator's only case); no FP8.",
    "sequence_parallel=True and recompute_granularity='selective': report_theoretical_memory then "
    "uses compute_activation_memory (else compute_activation_memory_without_sp).",
    "Llama: swiglu=True, untie_embeddings_and_output_weights=True, normalization='RMSNorm', "
    "group_query_attention=True with num_query_groups=8, kv_channels=hidden/heads=128, add_bias_linear=False.",
    "MoE, MLA, MTP and hybrid Mamba off (num_experts=None, multi_latent_attention=False, "
    "mtp_num_layers=None, hybrid_layer_pattern=None); expert_tensor_parallel_size=tp, "
    "expert_model_parallel_size=1, world_size=tp*pp*dp (only read for the expert DP size).",
    "The estimator describes the first pipeline stage only and takes num_layers/pp even when it is "
    "fractional: 405B's 126 layers do not divide by pp=16 or pp=8 (nor by pp*vp); Megatron itself "
    "would need an uneven split (e.g. embedding/loss counted as layers) to run those layouts.",
    "With vp set, num_microbatches is ignored (penalty only); without vp and pp>1 it caps the "
    "in-flight count at num_microbatches; dp and the distributed optimizer do not affect activations.",
    "seq_length is per sequence; micro_batch_size sequences per micro-batch.",
]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else None
    src = open(path, "rb").read()
    est = load_estimator(path)
    read = set()
    configs = []
    for name, m in MODELS.items():
        for layout in LAYOUTS[name]:
            tp, pp, vp, dp, mbs, nmb, dist_opt = layout
            row = {
                "model": name,
                "inputs": {
                    "hidden_size": m["hidden"], "ffn_hidden_size": m["ffn"], "num_layers": m["layers"],
                    "num_attention_heads": m["heads"], "num_query_groups": m["groups"],
                    "kv_channels": m["hidden"] // m["heads"], "padded_vocab_size": m["vocab"],
                    "seq_length": m["seq"], "tp": tp, "pp": pp, "vp": vp, "dp": dp,
                    "micro_batch_size": mbs, "num_microbatches": nmb,
                    "use_distributed_optimizer": dist_opt, "world_size": tp * pp * dp,
                },
            }
            row.update(run(est, m, layout, m["vocab"], read))
            pv = padded(m["vocab"], tp)
            pad = run(est, m, layout, pv, set())
            row["with_default_vocab_padding"] = {
                "padded_vocab_size": pv,
                "weight_and_optimizer_bytes": pad["weight_and_optimizer_bytes"],
                "activation_bytes": pad["activation_bytes"],
                "total_bytes": pad["total_bytes"],
            }
            configs.append(row)
    moe = [run_moe(est, name, m, layout, read) for name, m in MOE_MODELS.items() for layout in MOE_LAYOUTS[name]]
    out = {
        "source": {
            "repo": "NVIDIA/Megatron-LM", "commit": commit, "path": FILE_PATH,
            "sha256": hashlib.sha256(src).hexdigest(),
            "functions": ["compute_weight_and_optimizer_memory(args, verbose)",
                          "compute_activation_memory(args, num_microbatches, verbose)",
                          "report_theoretical_memory(args, num_microbatches, verbose)"],
        },
        "generated_by": "calib/sources/megatron_memory.py",
        "units": "bytes (MB in the estimator's prints = 2^20 bytes)",
        "about": ABOUT,
        "assumptions": ASSUMPTIONS,
        "args_read_by_estimator": sorted(k for k in read if not k.startswith("_")),
        "configs": configs,
        "moe_about": ("MoE models at pp = 1: weight_and_optimizer_bytes as above, with the routed experts' "
                      "parameters sharded over EP x ETP and their optimizer state over the expert data-parallel "
                      "group (world / (ETP x EP x PP)); params_on_rank is the estimator's parameter count on "
                      "one rank (its bytes without the distributed optimizer / 18), expert_params_on_rank the "
                      "routed experts' part of it (the same count with moe_ffn_hidden_size = 0 subtracted)."),
        "moe_configs": moe,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
