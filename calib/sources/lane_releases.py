#!/usr/bin/env python3
"""Record in chips/chips.json the engine release each serving lane was fitted on (its
"release"), read from the lane's own sources: the engine releases whose measured kernels the
figures were fitted to (aiconfigurator-core's tables name them: sglang 0.5.14, vllm 0.24.0,
trtllm 1.3.0rc20) and the benchmark runs its host figures were fitted to. validate reports
rows by release against it. Rerun after write_kernel_lanes.py or write_serving_lanes.py (they
rewrite the lanes' figures and sources, not this field). A lane that has a release keeps it
(write_amd_serving_lanes.py states its own) unless --force derives every one again.

Run from the repository root: python3 calib/sources/lane_releases.py [--force]
"""
import json
import re
import sys

PATH = "chips/chips.json"
TRAINING = {"megatron", "fsdp", "hf", "unsloth", "nemo", "automodel", "torchtitan", "deepspeed", "axolotl"}
# the engines as the sources name their releases
NAMES = {"sglang": "sglang", "vllm": "vllm", "trtllm": "trtllm", "atom": "atom"}


def release(engine, lane):
    srcs = " ".join(lane.get("sources", {}).values())
    kernels = sorted(set(re.findall(engine + r" (\d+\.\d+[.\w]*)'s measured", srcs)))
    parts = []
    if kernels:
        parts.append("kernels: " + engine + " " + ", ".join(kernels))
    if "amd_vllm.json" in srcs:
        parts.append("AMD's vLLM tables, vLLM 0.6.6-0.11")
    if "sgl-cookbook" in srcs:
        parts.append("host: sgl-cookbook's runs (SGLang 0.5.x, release not stated)")
    if "extended.json" in srcs and engine == "trtllm":
        parts.append("host: trtllm-bench runs of calib/extended.json")
    if "amd_serving.json" in srcs:
        parts.append("AMD's ATOM runs (nightly CI 2026-05/08, recipes)")
    return "; ".join(parts)


def main():
    force = "--force" in sys.argv[1:]
    d = json.load(open(PATH))
    n = 0
    for c in d["chips"]:
        for name, lane in c.get("efficiency", {}).get("lanes", {}).items():
            if name in TRAINING or name not in NAMES:
                continue
            r = release(name, lane)
            if r and (force or "release" not in lane):
                lane["release"] = r
                n += 1
    with open(PATH, "w") as f:
        json.dump(d, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{n} serving lanes carry their release")


if __name__ == "__main__":
    main()
