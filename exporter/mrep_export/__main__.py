"""python -m mrep_export --hf-config CONFIG.json -o dump.json[.gz] [options]"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .errors import ExportError


def _trace_arg(text: str) -> tuple[int, int]:
    try:
        b, s = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected B,S (two integers), got {text!r}") from None
    if b < 1 or s < 1:
        raise argparse.ArgumentTypeError(f"B and S must be >= 1, got {text!r}")
    return b, s


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mrep_export",
        description="Build a Hugging Face model from its config.json on the meta device (no weights, "
        "no network) and write an mrep dump.",
    )
    p.add_argument("--hf-config", required=True, metavar="CONFIG.json", help="a Hugging Face config.json")
    p.add_argument("-o", "--output", required=True, metavar="DUMP", help="output path; .json.gz is gzipped")
    p.add_argument(
        "--name",
        help="model name (default: the config's _name_or_path or name_or_path, else its architectures or model_type;"
        " never the file name, which is usually config.json)",
    )
    p.add_argument("--label", help="run label, e.g. a config variant or experiment name")
    p.add_argument("--step", type=int, help="training step of this dump")
    p.add_argument("--tag", action="append", default=[], help="a tag; repeatable")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a config value before building (JSON values; dotted keys reach nested configs); repeatable",
    )
    p.add_argument("--dtype", help="parameter dtype (default: the config's dtype, else float32)")
    p.add_argument(
        "--trace",
        type=_trace_arg,
        metavar="B,S",
        help="build on cpu with random weights and count FLOPs per module of one forward with "
        "FlopCounterMode (small configs only: use --override to shrink)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return p


def run(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch  # noqa: PLC0415 - keep --help fast

    from .dump import dump_model  # noqa: PLC0415
    from .hf import build_hf_model, load_hf_config  # noqa: PLC0415

    t0 = time.perf_counter()
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):  # fail before spending seconds on the model
        raise ExportError(f"cannot write dump to {args.output}: directory {out_dir} does not exist")
    config = load_hf_config(args.hf_config, args.override)
    dtype = None
    if args.dtype:
        dtype = getattr(torch, args.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ExportError(f"--dtype {args.dtype!r} is not a torch dtype")
    if args.trace:
        # A real forward needs real tensors: cpu, float32 unless asked, eager attention and experts
        # so that FlopCounterMode sees every GEMM (it does not count grouped_mm).
        model = build_hf_model(
            config,
            device="cpu",
            dtype=dtype or torch.float32,
            attn_implementation="eager",
            experts_implementation="eager",
        )
    else:
        model = build_hf_model(config, device="meta", dtype=dtype)
    t_build = time.perf_counter() - t0
    name = args.name or config_name(args.hf_config)
    summary = dump_model(
        model,
        args.output,
        config=config,
        name=name,
        label=args.label,
        step=args.step,
        tags=args.tag,
        trace=args.trace,
        source={"kind": "hf_config", "path": os.path.basename(args.hf_config)},
    )
    total = time.perf_counter() - t0
    if not args.quiet:
        print(
            f"wrote {summary.path}: {summary.name}, {summary.total_params:,} params "
            f"(trainable {summary.trainable_params:,}, frozen {summary.frozen_params:,}), "
            f"{summary.num_modules} modules, {summary.content_hash[:19]} "
            f"[build {t_build:.2f} s, walk+write {total - t_build:.2f} s]"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except ExportError as e:
        print(f"mrep_export: error: {e}", file=sys.stderr)
        return 2


def config_name(path):
    """What a config.json calls its model: _name_or_path or name_or_path (the last path element),
    else the first of architectures, else model_type; never the file's stem ("config")."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        raw = {}
    if not isinstance(raw, dict):
        raw = {}
    for key in ("_name_or_path", "name_or_path"):
        v = raw.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip().rstrip("/\\").replace("\\", "/").split("/")[-1]
    arch = raw.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0]:
        return arch[0]
    mt = raw.get("model_type")
    if isinstance(mt, str) and mt:
        return mt
    return "model"


if __name__ == "__main__":
    sys.exit(main())
