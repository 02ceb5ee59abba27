#!/usr/bin/env python3
"""Append the MoE rows of TensorRT-LLM's perf-overview @00f37686 that calib/extended.json lacked.

Source: NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md at commit
00f37686aa854010d68bcbd0f4ab000221541ca6, the version extended.json already carries (issue 21
allows every row of a version in calib/, no other version). Tables transcribed in full, every
non-empty cell: Llama 4 Scout (B200 and GB200 TP1 FP4; RTX PRO 6000 TP2PP2 and TP4PP2 FP4),
Qwen3-30B-A3B (B200 and GB200 TP1 FP4; RTX PRO 6000 TP1..TP8 FP4) and Qwen3-235B-A22B (B200
TP8 FP4, H200 and H100 TP8 FP8, RTX PRO 6000 TP2PP4 FP4). Llama 4 Maverick is not bundled.
The H100/H200 Scout columns are already in the file.

Run from the repository root: python3 calib/sources/trtllm_moe_rows.py (idempotent: rows whose
id exists are replaced).
"""
import json

SRC = ("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md "
       "@00f37686aa854010d68bcbd0f4ab000221541ca6 (trtllm-bench throughput, PyTorch backend)")
SRC_RTX = SRC[:-1] + "; RTX PRO 6000 Blackwell Server Edition tables)"
LENS = ["128/128", "128/2048", "128/4096", "500/2000", "1000/1000", "1000/2000",
        "2048/128", "2048/2048", "5000/500", "20000/2000"]

# (model, short, chip, tp, pp, dtype, source, column values in LENS order; None = empty cell)
TABLES = [
    ("Llama-4-Scout-17B-16E-Instruct", "scout", "B200", 1, 1, "fp4", SRC,
     [25342, 14699, 8932, 11977, 10591, 9356, 3137, 7152, 2937, 1644]),
    ("Llama-4-Scout-17B-16E-Instruct", "scout", "GB200", 1, 1, "fp4", SRC,
     [19954, 15238, 9556, 11795, 7738, 8581, 3295, 7464, 3107, 1767]),
    ("Llama-4-Scout-17B-16E-Instruct", "scout", "RTX-PRO-6000", 2, 2, "fp4", SRC_RTX,
     [18644, 12321, 7643, None, 9476, 8919, 2615, 6208, 2662, None]),
    ("Llama-4-Scout-17B-16E-Instruct", "scout", "RTX-PRO-6000", 4, 2, "fp4", SRC_RTX,
     [23454, 21035, 13421, None, 15781, 16434, 2941, 10410, None, None]),
    ("Qwen3-235B-A22B", "q235", "B200", 8, 1, "fp4", SRC,
     [63362, 66057, 39496, 57117, 42391, 34105, 7329, 26854, 8190, 4453]),
    ("Qwen3-235B-A22B", "q235", "H200", 8, 1, "fp8", SRC,
     [30429, 42821, 26852, 28026, 23789, 22061, 3331, 16672, 3623, 1876]),
    ("Qwen3-235B-A22B", "q235", "H100-SXM", 8, 1, "fp8", SRC,
     [None, 19658, 12447, 18351, 14898, 15136, None, 9924, 3225, None]),
    ("Qwen3-235B-A22B", "q235", "RTX-PRO-6000", 2, 4, "fp4", SRC_RTX,
     [18890, 12494, 7715, 11157, 10697, 10109, 3181, 6712, 3173, None]),
    ("Qwen3-30B-A3B", "q30", "B200", 1, 1, "fp4", SRC,
     [39827, 37844, 24953, 27817, 25828, 22051, 6251, 17554, 6142, 2944]),
    ("Qwen3-30B-A3B", "q30", "GB200", 1, 1, "fp4", SRC,
     [24107, 31311, 26337, 20604, 17481, 17177, 6595, 14719, 5908, 3203]),
    ("Qwen3-30B-A3B", "q30", "RTX-PRO-6000", 1, 1, "fp4", SRC_RTX,
     [28011, 12540, 7491, 10695, 9910, 8378, 3257, 5908, 2530, 871]),
    ("Qwen3-30B-A3B", "q30", "RTX-PRO-6000", 2, 1, "fp4", SRC_RTX,
     [32646, 22744, 15049, 17266, 16431, 13323, 3785, 10679, 3799, 1558]),
    ("Qwen3-30B-A3B", "q30", "RTX-PRO-6000", 4, 1, "fp4", SRC_RTX,
     [36819, 35715, 28139, 26175, 24046, 25131, 4311, 18134, 5212, 2551]),
    ("Qwen3-30B-A3B", "q30", "RTX-PRO-6000", 8, 1, "fp4", SRC_RTX,
     [39490, 52676, 33895, 44088, 31785, 28881, 4798, 22391, 5965, None]),
]

CHIPTAG = {"B200": "b200", "GB200": "gb200", "H200": "h200", "H100-SXM": "h100", "RTX-PRO-6000": "rtx6000"}


def rows():
    out = []
    for model, short, chip, tp, pp, dtype, src, vals in TABLES:
        for lens, v in zip(LENS, vals):
            if v is None:
                continue
            isl, osl = (int(x) for x in lens.split("/"))
            lay = f"tp{tp}" + (f"pp{pp}" if pp > 1 else "")
            ckpt = "NVFP4 checkpoint (nvidia/...-FP4): FP4 weights and GEMMs" if dtype == "fp4" else \
                "FP8 checkpoint (nvidia/...-FP8): FP8 weights and GEMMs"
            note = f"offline max throughput, {ckpt}, FP8 KV cache; MoE with the experts split by TP " \
                   "(the document's MoE command enables attention DP but states no EP size)"
            if short == "scout" and dtype == "fp4":
                note += "; the table heads the column FP4 though the FP4 checkpoint list names no Scout: read as the column says"
            r = {"id": f"X25-{short}-{CHIPTAG[chip]}-{lay}-{isl}-{osl}", "kind": "serving_throughput",
                 "source": src, "model": model, "chip": chip, "dtype": dtype, "weight_dtype": dtype,
                 "kv_dtype": "fp8", "gpus": tp * pp, "tp": tp}
            if pp > 1:
                r["pp"] = pp
            r.update({"isl": isl, "osl": osl, "measured": v, "unit": "tok/s", "note": note})
            out.append(r)
    return out


def main():
    path = "calib/extended.json"
    with open(path) as f:
        doc = json.load(f)
    new = rows()
    ids = {r["id"] for r in new}
    doc["rows"] = [r for r in doc["rows"] if r.get("id") not in ids] + new
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{len(new)} rows written to {path}")


if __name__ == "__main__":
    main()
