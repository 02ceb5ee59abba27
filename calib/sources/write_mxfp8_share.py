#!/usr/bin/env python3
"""Write each Blackwell chip's efficiency.mxfp8_gemm_share into chips/chips.json: the share of
the tensor-scaled FP8 GEMM rate a block-scaled MXFP8 GEMM reaches in Transformer Engine.

The figure is measured, not fitted: Transformer Engine's GEMM profiling tutorial times the 12
GEMMs of a transformer layer (hidden 4,096, FFN 16,384, M = 15,872 tokens; Fprop, Dgrad and
Wgrad) on a B300 with every input quantized before the timed loop ("--pre-quantize"), so the
times are the kernels' own. The share is FP8 current scaling's per-layer GEMM time over MXFP8's.
Quantization is left out on purpose: mrep charges the recipes' casts as memory traffic of their
own (layout.CastBytes), and in training the weights' casts are paid once per step, not per GEMM
as the tutorial's autocast mode pays them.

Blackwell and Blackwell Ultra run the same block-scaled tensor-core instructions through the same
cuBLAS kernels, so B200 and GB200 carry B300's figure with a note.

Run from the repository root: python3 calib/sources/write_mxfp8_share.py
"""
import json

SOURCE = ("NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst @d0067d0 "
          "(section 'Autocast vs Pre-quantized', B300 SXM6 AC, 5B layer: hidden 4096, FFN 16384, "
          "M = 15,872, Fprop + Dgrad + Wgrad, inputs pre-quantized)")

# Per-layer GEMM time in ms, pre-quantized, as the tutorial prints it.
PER_LAYER_MS = {
    "fprop": {"fp8_current": 2.158, "mxfp8": 2.365},
    "dgrad": {"fp8_current": 2.329, "mxfp8": 2.397},
    "wgrad": {"fp8_current": 2.325, "mxfp8": 2.400},
}
TOTAL_MS = {"fp8_current": 6.812, "mxfp8": 7.161}

MEASURED_ON = "B300"
CARRY = ("B200", "GB200", "GB300")


def share():
    for recipe, total in TOTAL_MS.items():
        parts = sum(v[recipe] for v in PER_LAYER_MS.values())
        if abs(parts - total) > 0.002:
            raise SystemExit(f"{recipe}: the passes sum to {parts:.3f} ms, the table says {total}")
    return round(TOTAL_MS["fp8_current"] / TOTAL_MS["mxfp8"], 3)


def main():
    s = share()
    passes = ", ".join(f"{k} {v['fp8_current'] / v['mxfp8']:.3f}" for k, v in PER_LAYER_MS.items())
    text = (f"measured: {TOTAL_MS['fp8_current']} ms of FP8 current-scaling GEMMs per layer "
            f"against {TOTAL_MS['mxfp8']} ms of MXFP8 ({passes} by pass), {SOURCE}; "
            "written by calib/sources/write_mxfp8_share.py")
    path = "chips/chips.json"
    with open(path) as f:
        db = json.load(f)
    done = set()
    for chip in db["chips"]:
        name = chip["name"]
        if name != MEASURED_ON and name not in CARRY:
            continue
        eff = chip.setdefault("efficiency", {})
        eff["mxfp8_gemm_share"] = s
        note = text if name == MEASURED_ON else (
            f"carried from {MEASURED_ON} (the same block-scaled tensor-core instructions and cuBLAS "
            f"kernels): {text}")
        eff.setdefault("sources", {})["mxfp8_gemm_share"] = note
        done.add(name)
    missing = {MEASURED_ON, *CARRY} - done
    if missing:
        raise SystemExit(f"chips.json has no {sorted(missing)}")
    with open(path, "w") as f:
        f.write(json.dumps(db, indent=2, ensure_ascii=False) + "\n")
    print(f"mxfp8_gemm_share {s} on {', '.join(sorted(done))}")


if __name__ == "__main__":
    main()
