#!/usr/bin/env python3
"""Transcribe NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, and the current
release's docs/performance-summary.md, into mrep rows.

Every row of every pre-training table becomes one row per precision (a cell "FP8-CS (FP8-MX)"
with "37556 (36108)" is two runs). The 25.11 NeMo Container section is the fit set
(calib/training.json); the other releases, the current one's included, are held out
(calib/heldout_training.json), never fitted. Rows of models without a bundled dump are listed in
the file's "about", not dropped silently.

Usage: git -C MIRROR show COMMIT:docs/performance-summary-archive.md > archive.md
       git -C MIRROR show COMMIT:docs/performance-summary.md > summary.md
       python3 calib/sources/megatron_bridge_tables.py archive.md COMMIT [summary.md]
"""
import json
import re
import sys

MODELS = {  # the tables' names -> bundled dumps (examples/dumps); Llama 3 and 3.1 share the architecture
    "LLAMA3_8B": "Llama-3.1-8B", "LLAMA3_70B": "Llama-3.1-70B-Instruct", "LLAMA3.1_405B": "Llama-3.1-405B",
    "DeepSeekV3": "DeepSeek-V3", "GPT OSS 120B": "gpt-oss-120b", "Qwen3_30B_a3B": "Qwen3-30B-A3B",
    "Qwen3_235B_a22B": "Qwen3-235B-A22B",
}
MOE = {"DeepSeekV3", "GPT OSS 120B", "Qwen3_30B_a3B", "Qwen3_235B_a22B"}
SYSTEMS = {"DGX-GB300": "GB300", "DGX-GB200": "GB200", "DGX-B300": "B300", "DGX-B200": "B200", "DGX-H100": "H100-SXM"}
# precision -> (dtype whose peak the GEMMs run at, recipe)
PRECISIONS = {"BF16": ("bf16", ""), "FP8-CS": ("fp8", "fp8-cs"), "FP8-DS": ("fp8", "fp8-ds"),
              "FP8-MX": ("fp8", "mxfp8"), "MXFP8": ("fp8", "mxfp8"), "NVFP4": ("fp4", "nvfp4"), "FP8": ("fp8", "fp8-cs")}


# How each 25.11 run was set up beyond the table's columns, from the performance recipes of the
# r0.2.0 release branch (scripts/performance/configs, tags v0.2.0 7af9601c / v0.2.1 1c43b392) and
# the branch gaod/r0.2.0_test 4a82e165 where the tables' layouts match it. Keys: (model, system);
# values apply to every precision of the row. Unknowns are left at Megatron's defaults.
SETTINGS = {
    ("LLAMA3_8B", "DGX-H100"): {"recompute": "full", "recompute_layers": 5},  # LLAMA3_8B_H100_FP8_CS_BASE_CONFIG
    ("LLAMA3_70B", "DGX-GB300"): {"offload_activations": 20},  # Megatron FSDP, cpu_offloading_num_layers=20, no recompute
    ("LLAMA3_70B", "DGX-GB200"): {"offload_activations": 40},
    ("DeepSeekV3", "DGX-GB300"): {"recompute": "selective:mlp,act", "dispatcher": "hybridep"},  # recompute_modules mlp, moe_act
    ("DeepSeekV3", "DGX-GB200"): {"dispatcher": "hybridep", "recompute": "selective:mla_up_proj"},
    # PP16 from layout_map (16, 1): [E + 4 dec] | 14 x [4 dec] | [1 dec + mtp + loss]
    ("DeepSeekV3", "DGX-B200"): {"first_stage_layers": 4, "last_stage_layers": 1, "recompute": "selective:mla_up_proj"},  # mla_up_proj recompute (not modelled: the up-projections only)
    ("GPT OSS 120B", "DGX-B200"): {"recompute": "selective:layernorm,act"},
    ("GPT OSS 120B", "DGX-H100"): {"recompute": "selective:layernorm,act"},
    ("GPT OSS 120B", "DGX-GB200"): {"dispatcher": "hybridep"},
    ("Qwen3_30B_a3B", "DGX-GB300"): {"dispatcher": "hybridep"},
    ("Qwen3_30B_a3B", "DGX-GB200"): {"dispatcher": "hybridep"},
    ("Qwen3_30B_a3B", "DGX-H100"): {"a2a_overlap": "1f1b"},  # moe_a2a_overlap=True, delay_wgrad_compute
    ("Qwen3_235B_a22B", "DGX-GB300"): {"dispatcher": "hybridep", "pipeline_account": True},
    ("Qwen3_235B_a22B", "DGX-GB200"): {"dispatcher": "hybridep", "pipeline_account": True},
    ("Qwen3_235B_a22B", "DGX-B200"): {"pipeline_account": True},
    ("Qwen3_235B_a22B", "DGX-H100"): {"pipeline_account": True, "a2a_overlap": "1f1b"},  # moe_a2a_overlap=True
}

# Megatron's fp8_output_proj (the LM head under MXFP8 too; Megatron-LM adds it on 2026-05-31,
# megatron/core/fp8_utils.py is_mxfp8_output_proj_active): the pretrain functions of these
# releases set it when the recipe is MXFP8, for these models and systems; every other run keeps
# the LM head in 16-bit (scripts/performance/configs/deepseek/deepseek_llm_pretrain.py lines 82,
# 122 and gpt_oss/gpt_oss_llm_pretrain.py 426, 458 @v0.5.0; lines 86, 126, 203 and 426, 458,
# 490 @v0.5.1, which adds DeepSeek-V3 on B300). 26.08's are the perf recipes' (v0.6.0
# 51885cf1, unchanged at the archive's commit): DeepSeek-V3's MXFP8 recipes on GB300 and GB200
# pass fp8_output_proj=True to _enable_deepseek_full_iteration_mxfp8
# (src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v3.py:157, gb200/deepseek_v3.py:160),
# GPT-OSS-120B's call _apply_gpt_oss_120b_full_iter_fp8mx_configs (gpt_oss/common.py:28).
FP8_OUTPUT_PROJ = {
    "26.06": {("DeepSeekV3", "DGX-GB300"), ("DeepSeekV3", "DGX-GB200"), ("GPT OSS 120B", "DGX-GB300"), ("GPT OSS 120B", "DGX-GB200")},
    "26.06.01": {("DeepSeekV3", "DGX-GB300"), ("DeepSeekV3", "DGX-GB200"), ("DeepSeekV3", "DGX-B300"),
                 ("GPT OSS 120B", "DGX-GB300"), ("GPT OSS 120B", "DGX-GB200")},
    "26.08": {("DeepSeekV3", "DGX-GB300"), ("DeepSeekV3", "DGX-GB200"), ("GPT OSS 120B", "DGX-GB300"), ("GPT OSS 120B", "DGX-GB200")},
}

# The 25.11 runs replayed from a full-iteration CUDA graph (cuda_graph_impl "local" with scope
# "full_iteration" in scripts/performance/configs/llama3/workload_base_configs.py @v0.2.1
# 1c43b392), by model, system and precision. The MoE configs of that release capture only
# parts of a layer with Transformer Engine (attn, moe_router, moe_preprocess), which mrep does
# not model: they run as eager.
GRAPHED_2511 = {
    ("LLAMA3_8B", "DGX-GB300"): {"BF16", "FP8-CS", "FP8-MX", "NVFP4"},
    ("LLAMA3_8B", "DGX-GB200"): {"BF16", "FP8-CS", "FP8-MX"},
    ("LLAMA3_8B", "DGX-B200"): {"BF16", "FP8-CS", "FP8-MX"},
    ("LLAMA3_70B", "DGX-B200"): {"BF16"},
}


def alts(cell):
    """'a (b)' -> ['a', 'b']"""
    m = re.match(r"^\s*([^()]+?)\s*(?:\(\s*([^()]+?)\s*\))?\s*$", cell)
    if not m:
        raise ValueError(f"cell {cell!r}")
    return [m.group(1)] + ([m.group(2)] if m.group(2) else [])


def num(s):
    s = s.strip()
    return None if s.lower() in ("n/a", "-", "") else int(s.replace(",", ""))


def main(path, commit, doc="docs/performance-summary-archive.md"):
    """The rows of one of the repository's performance pages (doc: its path there)."""
    text = open(path).read().splitlines()
    release = system = model_hdr = None
    fit, held, skipped = [], [], {}
    seen = set()
    header = None
    # footnotes that say a release's run hit a regression of its stack: the row carries the
    # statement as known_issue (predicted, counted in no error; calib/rows.go)
    regressions = {}
    for i, line in enumerate(text):
        if (m := re.match(r"^\[\^([^\]]+)\]:\s*(.+)$", line)) and "regression" in m.group(2).lower():
            said = re.sub(r"\[([^\]]*)\]\((https?://)?([^)]*)\)", r"\1 (\3)", m.group(2)).strip()
            regressions[m.group(1)] = f"the table's footnote [^{m.group(1)}] (line {i+1}): {said}"
    for i, line in enumerate(text):
        if m := re.match(r"^## (\S+) NeMo Container", line):
            release, system, model_hdr = m.group(1), None, None
            continue
        if m := re.match(r"^#### System: (\S+)", line):
            system, model_hdr = m.group(1), None
            continue
        if m := re.match(r"^#### Model: (.+)$", line):
            model_hdr, system = m.group(1).strip(), None
            continue
        if re.match(r"^### ", line):
            section = line[4:].strip()
            header = None
            if not section.startswith("Pre-Training"):
                release_pre = False
            else:
                release_pre = True
            continue
        if not line.startswith("|") or release is None:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("Model", "System") or cells[0].startswith("--") or set(cells[0]) <= set("-: "):
            if cells[0] in ("Model", "System"):
                header = [c.lower() for c in cells]
            continue
        if not release_pre or header is None:
            continue
        known = [regressions[n] for n in re.findall(r"\[\^([^\]]*)\]", line) if n in regressions]
        cells = [re.sub(r"\[\^[^\]]*\]", "", c).strip() for c in cells]  # footnote marks
        row = dict(zip(header, cells))
        if "precision" not in row:
            # 25.09's tables give no precision column and put alternative layouts in
            # parentheses in every column: the run's recipe cannot be read, so it is not a row
            skipped.setdefault(f"{release} tables without a precision column", []).append(f"line {i+1}")
            continue
        name = row.get("model", model_hdr or "")
        sysname = row.get("system", system or "")
        mtp = 1 if "w/ MTP" in name else 0
        base = re.sub(r"\s*\(w/o? MTP\)\s*", "", name).strip()
        chip = SYSTEMS.get(sysname.strip())
        precs, toks = alts(row["precision"]), alts(row["tokens / sec / gpu"])
        if len(toks) != len(precs):
            raise SystemExit(f"line {i+1}: {len(precs)} precisions but {len(toks)} throughputs")
        for p, t in zip(precs, toks):
            dtype, recipe = PRECISIONS[p.strip()]
            if sysname.strip() == "DGX-H100" and p.strip() == "FP8-MX":
                recipe = "fp8-blockwise"  # the tables' footnote: 128x128 weights, 1x128 activations on H100
            fsdp = num(row.get("fsdp", "0")) or 0
            r = {
                "id": f"MB{release}-{base.replace(' ', '_')}{'-mtp' if mtp else ''}-{sysname.replace('DGX-', '').lower()}-{num(row['#-gpus'])}gpu-{p.strip().lower()}",
                "kind": "train_throughput",
                "source": f"NVIDIA-NeMo/Megatron-Bridge {doc} @{commit} ({release} NeMo Container, pre-training, {sysname} {model_hdr or ''} table line {i+1})".replace("  ", " "),
                "model": MODELS.get(base, base), "chip": chip or sysname, "dtype": dtype,
                "gpus": num(row["#-gpus"]), "tp": num(row["tp"]), "pp": num(row["pp"]), "cp": num(row["cp"]),
                "vp": num(row["vp"]) or None, "ep": num(row["ep"]), "seq": num(row["sequence length"]),
                "gbs": num(row["gbs"]), "mbs": num(row["mbs"]), "framework": "megatron",
                "measured": float(t.replace(",", "")), "unit": "tok/s/gpu",
            }
            if recipe:
                r["recipe"] = recipe
            if fsdp:
                r["zero"] = 3
            if mtp:
                r["mtp"] = 1
            if "etp" in row and num(row["etp"]):
                r["etp"] = num(row["etp"])
            elif base in MOE:
                r["etp"] = 1  # the performance recipes set expert_tensor_parallel_size=1 for every MoE model
            if release == "25.11":
                r.update(SETTINGS.get((base, sysname.strip()), {}))
                if p.strip() in GRAPHED_2511.get((base, sysname.strip()), ()):
                    r["cuda_graph"] = True
            matched = preset = None
            if release in PRESETS:
                preset, why, agreed = release_preset(release, base, sysname.strip(), p.strip(), r)
                if preset is not None:
                    settings = preset_settings(preset)
                    note = (f"; settings of the {release} perf preset {preset['preset']} "
                            f"({preset['file']} @{preset['tag']} {preset['commit'][:8]})" + (f": {why}" if why else ""))
                    if (release, sysname.strip(), settings.get("dispatcher")) in DEEPEP_MISSING:
                        del settings["dispatcher"]
                        note += ("; its DeepEP dispatcher is not in this release's container on H100 (docs/releases/"
                                 "known-issues.md @v0.6.0, 26.02): all-to-all")
                        if release in DEEPEP_KNOWN_ISSUE:
                            r["known_issue"] = DEEPEP_KNOWN_ISSUE[release]
                    r.update(settings)
                    r["note_preset"] = note
                elif why:
                    r.update(agreed)
                    r["note_preset"] = f"; {why}"
                else:
                    # no preset runs the table's layout: cite the one that gives this model, system,
                    # precision, GPU count and batch another, which mrep predicts under only where
                    # the table's layout cannot run (calib/rows.go Row.Preset)
                    if (c := cited_preset(release, base, sysname.strip(), p.strip(), r)) is not None:
                        r["preset"] = c
            if preset is None and tuple(int(x) for x in release.split(".")[:2]) >= RECIPES_FROM and RECIPES:
                prec = {"FP8": "FP8-CS", "MXFP8": "FP8-MX"}.get(p.strip(), p.strip())
                key = (base, sysname.strip(), r["gpus"], prec, r["tp"], r["pp"], r["cp"], r["vp"] or 1, r["ep"] or 1, r["mbs"], r["gbs"])
                if len(RECIPES.get(key, [])) == 1:
                    matched = RECIPES[key][0]
                    r.update({k: v for k, v in recipe_settings(matched).items() if v not in (False, None)})
            # the performance configs' settings for every model and layout, in 25.11's r0.2.x
            # scripts and still at the archive's commit (src/megatron/bridge/perf_recipes/
            # _common.py _benchmark_common and _perf_precision: grad_reduce_in_fp32=False;
            # training/mixed_precision.py: FP8-CS and MXFP8 gather parameters in FP8), so the
            # later releases between them ran them too; per-layout settings are 25.11's
            # (SETTINGS) or a matching recipe's
            if matched is None and tuple(int(x) for x in release.split(".")[:2]) >= (25, 11):
                if recipe in ("fp8-cs", "mxfp8"):
                    r["fp8_param_gather"] = True  # the FP8-CS and MXFP8 perf configs gather parameters in FP8
                if base in ("LLAMA3_70B", "LLAMA3.1_405B") and r["tp"] > 1 and not (base == "Qwen3_235B_a22B"):
                    r["tp_overlap"] = True  # Llama perf configs: CommOverlapConfig(tp_comm_overlap=True) with userbuffers
                # every model's perf config sets grad_reduce_in_fp32=False (scripts/performance/configs/
                # {llama3,llama31,deepseek,gpt_oss,qwen3}/*_llm_pretrain.py @v0.2.1)
                r["bf16_grads"] = True
            if r.get("fp8_attention") and recipe not in ("fp8-cs", "fp8-ds", "mxfp8"):
                # Megatron hands fp8_dpa to Transformer Engine under these recipes only
                # (megatron/core/fp8_utils.py); elsewhere the attention stays 16-bit
                del r["fp8_attention"]
            if recipe == "mxfp8" and (base, sysname.strip()) in FP8_OUTPUT_PROJ.get(release, ()):
                r["fp8_output_proj"] = True
            if preset is not None and base.startswith("LLAMA") and p.strip() == "NVFP4":
                r.pop("tp_overlap", None)  # llama{3,31}_llm_pretrain.py: tp_comm_overlap = False if precision == "nvfp4"
            ga = num(row.get("ga", "")) if "ga" in row else None
            r["note"] = f"{p.strip()}; GA {ga}; Model TFLOP/s/GPU as published: {alts(row['model tflop / sec / gpu'])[precs.index(p)]}" + (
                "; Megatron FSDP (sharding over #GPUs / (TP x PP))" if fsdp else "") + (
                f"; settings of the perf recipe {matched['function']} ({matched['file']}:{matched['line']})" if matched else "") + r.pop("note_preset", "")
            if known:
                r["known_issue"] = "; ".join(known)
            r = {k: v for k, v in r.items() if v is not None}
            layers = {"LLAMA3.1_405B": 126, "Qwen3_235B_a22B": 94}.get(base)
            if layers and (base == "Qwen3_235B_a22B" or r["pp"] * r.get("vp", 1) > layers):
                # the recipes count the embedding and loss as pipeline layers (Qwen3-235B's always;
                # a 405B split into more chunks than layers cannot run otherwise)
                r["pipeline_account"] = True
            if r["id"] in seen:  # one release's table can run the same model twice (other layouts)
                r["id"] += f"-line{i+1}"
            seen.add(r["id"])
            if base not in MODELS or chip is None:
                skipped.setdefault(f"{base} on {sysname}", []).append(r["id"])
                continue
            (fit if release == "25.11" else held).append(r)
    return fit, held, skipped


# The performance recipes at the archive's commit (src/megatron/bridge/perf_recipes, every
# pretrain config function with the effective value of each setting after its helpers and base
# recipe; transcribed/megatron_bridge_perf_recipes.json). A held-out row of a later release
# takes a recipe's per-layout settings (checkpointing, activation offload, the MoE dispatcher
# and all-to-all overlap, Megatron FSDP, the pipeline split) only where one recipe has its
# model, system, GPU count, precision and the identical layout (TP, PP, CP, VP, EP, MBS, GBS):
# the same recipe, run at that release. They are the newest recipes (26.08's: the archive's
# commit is after v0.6.0), so a 26.06 row takes one only where its own release's presets
# (below) have no preset for its layout.
RECIPES_FROM = (26, 6)
RECIPE_MODELS = {"Llama 3 8B": "LLAMA3_8B", "Llama 3 70B": "LLAMA3_70B", "Llama 3.1 405B": "LLAMA3.1_405B",
                 "DeepSeek-V3": "DeepSeekV3", "GPT-OSS-120B": "GPT OSS 120B", "Qwen3-30B-A3B": "Qwen3_30B_a3B",
                 "Qwen3-235B-A22B": "Qwen3_235B_a22B"}
RECIPE_PRECISIONS = {"bf16": "BF16", "fp8_cs": "FP8-CS", "fp8_mx": "FP8-MX", "nvfp4": "NVFP4", "fp8_ds": "FP8-DS"}


def load_recipes(path):
    out = {}
    for f in json.load(open(path)):
        if f.get("alias_of"):
            continue
        prec = RECIPE_PRECISIONS.get(f["precision"])
        model = RECIPE_MODELS.get(f["model"])
        if not prec or not model:
            continue
        key = (model, "DGX-" + f["chip"].upper(), f["gpus"], prec,
               f["tp"], f["pp"], f["cp"], f["vp"] or 1, f["ep"] or 1, f["mbs"], f["gbs"])
        out.setdefault(key, []).append(f)
    return out


def layout_settings(f):
    """The per-layout settings of a perf recipe or a release preset (the same effective fields)
    as row fields (mrep's names): checkpointing, activation offload, the MoE dispatcher and
    all-to-all overlap, Megatron FSDP, the full-iteration CUDA graph."""
    r = {}
    g, mods = f["recompute_granularity"], f["recompute_modules"]
    if g == "full":
        r["recompute"] = "full"
        if f["recompute_method"] == "block" and f["recompute_num_layers"]:
            r["recompute_layers"] = f["recompute_num_layers"]
    elif g == "selective" and mods != []:  # an empty module list recomputes nothing (Megatron's default is core_attn)
        r["recompute"] = "selective:" + ",".join(mods) if mods else "selective"
    if f["cpu_offloading"] and f.get("cpu_offloading_activations", True) and f["cpu_offloading_num_layers"]:
        r["offload_activations"] = f["cpu_offloading_num_layers"]
    if f["moe_token_dispatcher_type"] == "flex" and f["moe_flex_dispatcher_backend"] in ("hybridep", "deepep"):
        r["dispatcher"] = f["moe_flex_dispatcher_backend"]
    if f["overlap_moe_expert_parallel_comm"]:
        r["a2a_overlap"] = "1f1b"
    if f["use_megatron_fsdp"]:
        r["zero"] = 3
    # the whole step replayed from one CUDA graph ("local" with scope full_iteration is the
    # older spelling); Transformer Engine's partial capture (attn, moe_router, moe_preprocess)
    # is not modelled and runs as eager
    scope = f["cuda_graph_scope"] if isinstance(f["cuda_graph_scope"], list) else [f["cuda_graph_scope"]]
    if f["cuda_graph_impl"] == "full_iteration" or (f["cuda_graph_impl"] == "local" and "full_iteration" in scope):
        r["cuda_graph"] = True
    # Transformer Engine's CuTe DSL fused grouped MLP for the routed experts: a preset's
    # cutedsl_fused_grouped_mlp (scripts/performance/perf_plugins.py sets the environment
    # variable from it), a perf recipe's env_vars
    # the attention core in the recipe's FP8 (Megatron's fp8_dot_product_attention): a preset's
    # field, a perf recipe's mixed_precision setting
    if (f.get("preset_fields") or {}).get("fp8_dot_product_attention") or \
            ((f.get("other") or {}).get("mixed_precision.fp8_dot_product_attention") or {}).get("value"):
        r["fp8_attention"] = True
    if (f.get("preset_fields") or {}).get("cutedsl_fused_grouped_mlp") or \
            str((f.get("env_vars") or {}).get("NVTE_CUTEDSL_FUSED_GROUPED_MLP", "0")) not in ("0", ""):
        r["fused_grouped_mlp"] = True
    return r


def recipe_settings(f):
    """A perf recipe's settings as row fields: its per-layout ones and those it states for the
    whole model (pipeline accounting, TP overlap, FP8 parameters, gradient precision)."""
    r = layout_settings(f)
    if f["account_for_embedding_in_pipeline_split"] and f["account_for_loss_in_pipeline_split"]:
        r["pipeline_account"] = True
    lay = f.get("pipeline_model_parallel_layout")
    if isinstance(lay, str) and lay.count("|") + 1 == f["pp"] and (f["vp"] or 1) == 1:
        segs = lay.split("|")
        r["first_stage_layers"], r["last_stage_layers"] = segs[0].count("t"), segs[-1].count("t")
    r["tp_overlap"] = bool(f.get("tp_comm_overlap_effective_at_runtime", f["tp_comm_overlap"]))
    r["fp8_param_gather"] = bool(f["fp8_param_gather"])
    r["bf16_grads"] = not f["grad_reduce_in_fp32_ddp"]
    return r


# The releases between 25.11 and 26.06 take their per-layout settings from the presets their own
# Megatron-Bridge tags shipped (transcribed/megatron_bridge_release_configs.json, written by
# megatron_bridge_release_configs.py): a held-out row takes a preset only where its model,
# system and precision and its layout (TP, PP, CP, VP, EP, MBS, and GBS or GBS per GPU: the
# scripts scale the batch with -ng) are the row's, and every such preset of the release's tags
# gives the same settings (a layout only some of the tags define is theirs).
TABLE_PRESET_PRECISION = {"BF16": "BF16", "FP8-CS": "FP8_CS", "FP8": "FP8_CS", "FP8-MX": "FP8_MX", "MXFP8": "FP8_MX",
                          "NVFP4": "NVFP4", "FP8-DS": "FP8_DS"}


def load_presets(path):
    out = {}
    for f in json.load(open(path))["presets"]:
        out.setdefault(f["release"], []).append(f)
    return out


def expand_layout(lay):
    """Megatron's pipeline layout string ('Et*4|(t*4|)*14tmL') as its stages' decoder-layer counts."""
    while m := re.search(r"\(([^()]*)\)\*(\d+)", lay):
        lay = lay[:m.start()] + m.group(1) * int(m.group(2)) + lay[m.end():]
    lay = re.sub(r"([a-zA-Z])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), lay)
    return [seg.count("t") for seg in lay.split("|")]


def deepseek_layout(pp, vp):
    """recipes/deepseek/deepseek_v3.py set_deepseek_v3_pipeline_model_parallel_layout's map (the
    same at v0.3.0-v0.4.2), as decoder layers per virtual stage."""
    m = {(4, 1): [16, 16, 16, 13], (8, 1): [8] * 7 + [5], (4, 2): [8] * 7 + [5],
         (16, 1): [4] * 15 + [1], (8, 2): [4] * 15 + [1], (4, 4): [4] * 15 + [1]}
    return m.get((pp, vp or 1))


def stage_split(counts, pp, vp):
    """(first, last) decoder layers of the first and last physical stage when the virtual stages
    in between are even, as mrep's split expresses it; None when it cannot."""
    vp = vp or 1
    if not counts or len(counts) != pp * vp or pp < 2:
        return None
    stage = [sum(counts[s + k * pp] for k in range(vp)) for s in range(pp)]
    if len(set(stage[1:-1])) > 1 or any(c % vp for c in stage):
        return None
    return stage[0], stage[-1]


def preset_settings(f):
    """A release preset's per-layout settings as row fields (mrep's names), with its pipeline split."""
    r = layout_settings(f)
    lay = f["pipeline_model_parallel_layout"]
    counts = expand_layout(lay) if isinstance(lay, str) else (deepseek_layout(f["pp"], f["vp"]) if f["model"] == "DeepSeekV3" else None)
    if split := stage_split(counts, f["pp"], f["vp"]):
        r["first_stage_layers"], r["last_stage_layers"] = split
    elif f["account_for_pipeline"] and f["pp"] > 1 and not isinstance(lay, str):
        r["pipeline_account"] = True
    return r


def release_preset(release, model, system, prec, row):
    """The one preset of the release's tags that ran the row's layout, or (None, why not); and,
    where its presets of that layout disagree, the settings they agree on."""
    want = TABLE_PRESET_PRECISION.get(prec)
    chip = system.replace("DGX-", "").lower()
    same = [f for f in PRESETS.get(release, []) if f["model"] == model and f["chip"] == chip and f["precision"] == want
            and (f["tp"], f["pp"], f["cp"], f["vp"] or 1, f["ep"] or 1, f["mbs"]) ==
            (row["tp"], row["pp"], row["cp"], row["vp"] or 1, row["ep"] or 1, row["mbs"])]
    hits = [f for f in same if f["gbs"] == row["gbs"] or f["gbs"] * row["gpus"] == row["gbs"] * f["gpus"]]
    batch = ""
    if not hits and same and all(f["gpus"] == row["gpus"] for f in same):
        # a batch no preset states: the perf scripts take it on the command line
        # (scripts/performance/argument_parser.py -gb/--global_batch_size, v0.3.0 to v0.6.0), so
        # the run is a preset of its layout at another batch where the release's presets of that
        # layout agree on every other setting (26.06's DeepSeek-V3 on GB300 at GBS 15,360 beside
        # its V1 and V2 presets' 2,048 and 4,096)
        hits = same
        batch = (f"the table's GBS {row['gbs']} is none of this layout's presets' "
                 f"({', '.join(str(g) for g in sorted({f['gbs'] for f in same}))}): their settings at the batch "
                 "the perf scripts take as -gb")
    if not hits:
        return None, "", {}
    settings = {json.dumps(preset_settings(f), sort_keys=True) for f in hits}
    if len(settings) > 1:
        if batch:
            return None, "", {}
        # the release's tags ran the layout with settings that differ in some field (26.04.01's
        # v0.4.1 and v0.4.2 presets on the MoE dispatcher): the table's run had every setting
        # they share, whichever tag it came from
        all_ = [preset_settings(f) for f in hits]
        keys = set().union(*all_)
        agreed = {k: all_[0][k] for k in sorted(keys) if all(k in a and a[k] == all_[0][k] for a in all_)}
        differ = sorted(k for k in keys if k not in agreed)
        tags = ", ".join(sorted({f"{f['preset']} @{f['tag']} {f['commit'][:8]}" for f in hits}))
        why = (f"{len(hits)} presets of the release's tags run this layout with different settings ({tags}, "
               f"{hits[0]['file']}): " + (f"what they agree on applied ({', '.join(agreed)}); " if agreed else "")
               + f"they differ on {', '.join(differ)}")
        return None, why, agreed
    if batch:
        return hits[0], batch, {}
    tags = sorted({f["tag"] for f in hits})
    if len(tags) < len(RELEASE_TAGS[release]):
        # the release's other tags define no preset of this layout, so the table's run could not
        # have come from them: the layout itself names the tag (26.04.01's DeepSeek-V3 on B200 and
        # B300 at PP8 VP2 EP32 is v0.4.2's; v0.4.1 runs them at PP16 EP8)
        return hits[0], f"only {tags} of the release's tags {RELEASE_TAGS[release]} has a preset for this layout: its settings applied", {}
    return hits[0], "", {}


def cited_preset(release, model, system, prec, row):
    """The release's preset for the row's model, system, precision, GPU count and batch, as
    Row.Preset: the layout fields where it differs from the table's; None where the release's
    tags have none, disagree, or differ in what a Preset cannot carry (CP)."""
    want = TABLE_PRESET_PRECISION.get(prec)
    chip = system.replace("DGX-", "").lower()
    hits = [f for f in PRESETS.get(release, []) if f["model"] == model and f["chip"] == chip and f["precision"] == want
            and f["gpus"] == row["gpus"] and f["gbs"] == row["gbs"]]
    lays = {(f["tp"], f["pp"], f["cp"], f["vp"] or 1, f["ep"] or 1, f["mbs"]) for f in hits}
    if len(lays) != 1:
        return None
    tp, pp, cp, vp, ep, mbs = lays.pop()
    if cp != row["cp"]:
        return None
    f = hits[0]
    out = {"name": f["preset"], "source": f"{f['file']} @{f['tag']} {f['commit'][:8]}"}
    for k, v in (("tp", tp), ("pp", pp), ("vp", vp), ("ep", ep), ("mbs", mbs)):
        if v != (row.get(k) or 1):
            out[k] = v
    return out if len(out) > 2 else None


# "DeepEP is not supported in the current NeMo framework 26.02 container ... on H100 machines"
# (docs/releases/known-issues.md @v0.6.0, not marked fixed in 26.02.01, which is built on the
# same r0.3 line): a preset asking for it ran without it.
DEEPEP_MISSING = {("26.02", "DGX-H100", "deepep"), ("26.02.01", "DGX-H100", "deepep")}

# The publisher's statement for the release it names: a run whose preset asks for DeepEP in that
# container ran without the dispatcher it was tuned for, at a performance the publisher calls
# reduced (a defect of the stack, not a setting: the row counts in no error). 26.02.01 is not
# named, so its rows stay counted, timed with all-to-all.
DEEPEP_KNOWN_ISSUE = {
    "26.02": "docs/releases/known-issues.md @v0.6.0, 26.02: \"DeepEP is not supported in the current NeMo framework 26.02 "
             "container (nvcr.io/nvidia/nemo:26.02), which results in reduced DSv3 performance compared to the NeMo framework "
             "25.09 container (...) on H100 machines\"; this run's preset asks for DeepEP too",
}

RECIPES = {}
PRESETS = {}
RELEASE_TAGS = {}

if __name__ == "__main__":
    path, commit = sys.argv[1], sys.argv[2]
    RECIPES = load_recipes("calib/sources/transcribed/megatron_bridge_perf_recipes.json")
    PRESETS = load_presets("calib/sources/transcribed/megatron_bridge_release_configs.json")
    RELEASE_TAGS = {rel: sorted({f["tag"] for f in fs}) for rel, fs in PRESETS.items()}
    fit, held, skipped = main(path, commit)
    src = f"NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @{commit}"
    held_src = src
    if len(sys.argv) > 3:
        # the current release's page: its tables are the newest release's runs (26.08 at the
        # archive's commit), held out like every release after 25.11
        f2, h2, s2 = main(sys.argv[3], commit, "docs/performance-summary.md")
        if f2:
            raise SystemExit("docs/performance-summary.md: a 25.11 table outside the archive")
        held = h2 + held
        for k, v in s2.items():
            skipped.setdefault(k, []).extend(v)
        held_src = f"NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md and docs/performance-summary-archive.md @{commit}"
    json.dump({"about": f"Every pre-training row of the 25.11 NeMo Container tables of {src} (one row per precision where a cell gives two): "
               "Megatron-Core on DGX-H100, B200, GB200 and GB300, dense Llama 3 and MoE (DeepSeek-V3, GPT-OSS-120B, Qwen3-30B-A3B, "
               "Qwen3-235B-A22B). The fit set of the training lanes (issue 20). Tokens/s/GPU as published; MoE runs force-balance the "
               "routed tokens and are dropless (the tables' footnote). Transcribed by calib/sources/megatron_bridge_tables.py.",
               "rows": fit}, open("calib/training.json", "w"), indent=1)
    json.dump({"about": f"Held out, never fitted: the pre-training rows of every other release's tables in {held_src} with a bundled model "
               f"({sorted(set(r['model'] for r in held))}). Rows of models mrep does not bundle are not here: {json.dumps(skipped)}. "
               "Transcribed by calib/sources/megatron_bridge_tables.py.", "rows": held}, open("calib/heldout_training.json", "w"), indent=1)
    print(len(fit), "fit rows;", len(held), "held-out rows;", sum(len(v) for v in skipped.values()), "skipped", file=sys.stderr)
