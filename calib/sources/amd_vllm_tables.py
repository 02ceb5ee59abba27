#!/usr/bin/env python3
"""Turn the transcription of AMD's published vLLM tables for Instinct GPUs into mrep rows.

Input: a JSON file of transcribed rows (one per table row, every row of each table: the
ROCm/vllm docs/dev-docker/README.md history and the amd.com "Performance results with AMD ROCm
software" snapshots; each row names its source, container and vLLM version). Output:
calib/amd_vllm.json. The tables are vLLM's offline benchmarks on one 8-GPU MI300X node:
  - throughput (benchmark_throughput.py): PROMPTS prompts of IN tokens with MAX_NUM_SEQS, one
    wave when they are equal; "Throughput (tokens/s)" is the node's, taken as input + output tokens
    (the script's tokens_per_second; the table does not say) -> kind wave_throughput, batch =
    min(prompts, max_num_seqs);
  - latency (benchmark_latency.py): one batch of B prompts, end to end -> kind batch_latency.
The FP8-KV checkpoints run FP8 weights and, per the README's commands, an FP8 KV cache.

Usage: python3 calib/sources/amd_vllm_tables.py TRANSCRIPTION.json
"""
import json
import sys

MODELS = {"amd/Llama-3.1-70B-Instruct-FP8-KV": "Llama-3.1-70B-Instruct", "amd/Llama-3.1-405B-Instruct-FP8-KV": "Llama-3.1-405B"}

src = json.load(open(sys.argv[1]))
out, skipped = [], []
for r in src["rows"]:
    model = MODELS.get(r["model"])
    if model is None:
        skipped.append(r["id"])
        continue
    row = {"id": "AMD-" + r["id"], "source": r["source"], "model": model, "chip": r["chip"], "dtype": "fp8",
           "kv_dtype": "fp8", "gpus": r["tp"], "tp": r["tp"], "isl": r["isl"], "osl": r["osl"],
           "engine": "vllm", "engine_version": r.get("engine_version") or "", "note": r.get("note", "")}
    if r["metric"] == "throughput":
        # the README's throughput command: --max-num-batched-tokens 131072, --gpu-memory-utilization 0.9
        row.update(kind="wave_throughput", batch=min(r["num_prompts"], r["max_num_seqs"]), max_batch=r["max_num_seqs"],
                   max_num_tokens=131072, kv_fraction=0.9, measured=r["value"], unit="tok/s")
        row["note"] = f"{r['num_prompts']} prompts, max_num_seqs {r['max_num_seqs']}; " + row["note"]
    else:
        unit = "ms" if "(ms)" in r["unit"] else "s"
        row.update(kind="batch_latency", batch=r["batch"], measured=r["value"], unit=unit)
    if not row["engine_version"]:
        del row["engine_version"]
    out.append(row)
json.dump({"about": "AMD's own published vLLM tables for AMD Instinct GPUs, every row of each table found (all MI300X: "
           "no MI325X or MI355X vLLM table was found), transcribed with their sources: the ROCm/vllm docs/dev-docker/README.md "
           "history (11 versions by commit, 2025-01 to 2025-08, and one later version from an index copy) and amd.com performance-"
           "results snapshots (container dates 20250410 to 20251103). Llama-3.1-70B and 405B FP8-KV, TP8 on one 8-GPU node: "
           "throughput (input + output tokens/s of the node, offline waves) and end-to-end batch latency. The fit set of MI300X's "
           "serving figures (issue 21). Converted by calib/sources/amd_vllm_tables.py.",
           "rows": out}, open("calib/amd_vllm.json", "w"), indent=1)
print(len(out), "rows;", len(skipped), "skipped", file=sys.stderr)
