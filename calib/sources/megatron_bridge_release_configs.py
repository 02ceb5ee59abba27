"""Transcribe Megatron-Bridge's performance presets as each NeMo release shipped them.

The held-out rows of releases 26.02-26.04.01 (calib/heldout_training.json) state a layout but
not the settings the run used beside it (recompute, activation offload, the MoE dispatcher and
all-to-all overlap, Megatron FSDP, CUDA graphs, the pipeline split). Those settings are published:
each release's Megatron-Bridge branch carries scripts/performance/configs/<family>/
*_workload_base_configs.py, one preset per model, system, precision and variant, and
scripts/performance/README.md tells users to check out the branch their container was built
from ("If using 26.04 container ... git switch r0.4.0"). This reads every pretrain preset of the
tags below straight from a bare clone and writes
calib/sources/transcribed/megatron_bridge_release_configs.json. Nothing measured is read.

The preset files are plain data: dataclasses.replace over WorkloadBaseConfig, whose definition
(scripts/performance/utils/utils.py, stdlib only) is taken from the same tag. What the
*_llm_pretrain.py functions add around a preset is recorded per family in FAMILY below, each
with the line it comes from; set_workload_base_configs (utils/overrides.py) applies the preset
last, so its fields win.

Usage: python3 calib/sources/megatron_bridge_release_configs.py /work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo
"""

import dataclasses
import json
import re
import subprocess
import sys
import types

# NeMo container -> the Megatron-Bridge tags it may have been built from. docs/releases/
# software-versions.md @v0.6.0 names Megatron-Bridge 0.3.0 for 26.02, 0.4.0 for 26.04 and 0.5.0
# for 26.06; known-issues.md @v0.6.0 names r0.3.1 as 26.02.01's. A point release is built from
# its branch's point tag; 26.04.01's table first appears in v0.4.2's docs while v0.4.1 also
# carries point fixes, so both are read and a preset is used only where they agree.
RELEASES = {
    "26.02": ["v0.3.0"],
    "26.02.01": ["v0.3.1"],
    "26.04": ["v0.4.0"],
    "26.04.01": ["v0.4.1", "v0.4.2"],
    "26.06": ["v0.5.0"],
    "26.06.01": ["v0.5.1"],
}

# model recipe name -> (the tables' model name, what the family's pretrain functions set
# around the preset, with where). The preset's own fields are applied after these.
FAMILY = {
    "DEEPSEEK_V3": ("DeepSeekV3", {"recompute_granularity": "selective"},
                    "deepseek/deepseek_llm_pretrain.py set_deepseek_v3_common_configs: recompute_granularity='selective' "
                    "(modules None: Megatron's default, core_attn); pipeline layout from the preset's pp_layout or "
                    "recipes/deepseek/deepseek_v3.py set_deepseek_v3_pipeline_model_parallel_layout"),
    "QWEN3_235B_A22B": ("Qwen3_235B_a22B", {"recompute_granularity": None, "account_for_pipeline": True},
                        "qwen/qwen3_llm_pretrain.py set_qwen3_common_configs: recompute off; recipes/qwen/qwen3_moe.py "
                        "qwen3_235b_a22b_pretrain_config: the embedding and loss counted in the pipeline split"),
    "QWEN3_30B_A3B": ("Qwen3_30B_a3B", {"recompute_granularity": None},
                      "qwen/qwen3_llm_pretrain.py set_qwen3_common_configs: recompute off"),
    "GPT_OSS_120B": ("GPT OSS 120B", {}, "gpt_oss/gpt_oss_llm_pretrain.py: the base recipe's recompute"),
    "LLAMA3_70B": ("LLAMA3_70B", {}, "llama/llama3_llm_pretrain.py"),
    "LLAMA3_8B": ("LLAMA3_8B", {}, "llama/llama3_llm_pretrain.py"),
    "LLAMA31_405B": ("LLAMA3.1_405B", {"account_for_pipeline": True},
                     "llama/llama31_llm_pretrain.py; recipes/llama/llama3.py llama31_405b_pretrain_config: the "
                     "embedding and loss counted in the pipeline split"),
}
NAME = re.compile(r"^(?P<recipe>[A-Z0-9_]+?)_PRETRAIN_CONFIG_(?P<gpu>GB300|GB200|B300|B200|H100)_"
                  r"(?P<prec>BF16|FP8_CS|FP8_MX|FP8_DS|NVFP4)(?:_V(?P<variant>\d+))?$")


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def presets(repo, tag):
    """Every pretrain preset of one tag: (file, name, fields)."""
    utils_src = git(repo, "show", f"{tag}:scripts/performance/utils/utils.py")
    utils = types.ModuleType("utils.utils")
    exec(compile(utils_src, f"{tag}:scripts/performance/utils/utils.py", "exec"), utils.__dict__)
    pkg = types.ModuleType("utils")
    pkg.utils = utils
    sys.modules["utils"], sys.modules["utils.utils"] = pkg, utils
    files = [f for f in git(repo, "ls-tree", "-r", "--name-only", tag, "scripts/performance/configs").split()
             if f.endswith("workload_base_configs.py")]
    out = []
    for f in files:
        ns = {"__name__": "preset"}
        exec(compile(git(repo, "show", f"{tag}:{f}"), f"{tag}:{f}", "exec"), ns)
        for name, v in ns.items():
            m = NAME.match(name)
            if not m or not dataclasses.is_dataclass(v) or m.group("recipe") not in FAMILY:
                continue
            out.append((f, name, m, dataclasses.asdict(v)))
    return out


def effective(recipe, fields):
    """The settings the run had, in the perf-recipe transcription's names (megatron_bridge_tables.recipe_settings)."""
    model, common, _ = FAMILY[recipe]
    e = {"recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None, "recompute_modules": None,
         "account_for_pipeline": False}
    e.update(common)
    # utils/overrides.py _set_recompute_overrides: offload, then block recompute, then modules
    e["cpu_offloading"] = fields["cpu_offloading_num_layers"] is not None
    e["cpu_offloading_num_layers"] = fields["cpu_offloading_num_layers"] or 0
    if fields["recompute_num_layers"] is not None:
        e.update(recompute_granularity="full", recompute_method="block", recompute_num_layers=fields["recompute_num_layers"])
    if fields["recompute_modules"] is not None:
        e.update(recompute_granularity="selective", recompute_modules=list(fields["recompute_modules"]))
    # set_workload_base_configs: a backend makes the flex dispatcher, none the all-to-all
    e["moe_token_dispatcher_type"] = "flex" if fields["moe_flex_dispatcher_backend"] else "alltoall"
    e["moe_flex_dispatcher_backend"] = fields["moe_flex_dispatcher_backend"]
    # _set_moe_a2a_overlap_overrides: overlap_moe_expert_parallel_comm and delay_wgrad_compute
    e["overlap_moe_expert_parallel_comm"] = bool(fields["moe_a2a_overlap"])
    e["use_megatron_fsdp"] = bool(fields["use_megatron_fsdp"])
    e["cuda_graph_impl"] = fields["cuda_graph_impl"] or "none"
    e["cuda_graph_scope"] = fields["cuda_graph_scope"] or []
    e["pipeline_model_parallel_layout"] = fields.get("pp_layout")  # v0.3.0 on
    return model, e


def main(repo):
    out = []
    for release, tags in RELEASES.items():
        for tag in tags:
            commit = git(repo, "rev-list", "-n", "1", tag).strip()
            for f, name, m, fields in presets(repo, tag):
                model, e = effective(m.group("recipe"), fields)
                out.append({
                    "release": release, "tag": tag, "commit": commit, "file": f, "preset": name,
                    "model": model, "chip": m.group("gpu").lower(), "precision": m.group("prec"),
                    "variant": int(m.group("variant") or 1), "gpus": fields["num_gpus"],
                    "tp": fields["tensor_model_parallel_size"], "pp": fields["pipeline_model_parallel_size"],
                    "cp": fields["context_parallel_size"], "vp": fields["virtual_pipeline_model_parallel_size"],
                    "ep": fields["expert_model_parallel_size"], "etp": fields["expert_tensor_parallel_size"],
                    "mbs": fields["micro_batch_size"], "gbs": fields["global_batch_size"],
                    "family_settings": FAMILY[m.group("recipe")][2], "preset_fields": fields, **e,
                })
    json.dump({"about": "Megatron-Bridge's performance presets (scripts/performance/configs/*/*workload_base_configs.py) at "
               "the tags each NeMo release was built from, with the settings the pretrain functions put around them. "
               "Written by calib/sources/megatron_bridge_release_configs.py; settings only, nothing measured.",
               "presets": out}, open("calib/sources/transcribed/megatron_bridge_release_configs.json", "w"), indent=1)
    print(len(out), "presets", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
