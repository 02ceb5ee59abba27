"""--trace against hand-counted FLOPs, and the command line's behaviour on bad use."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import config_path, load_dump
from torch import nn

from mrep_export import ExportError, dump_model, trace_flops
from mrep_export.validate import validate

SMALL_DENSE = [
    "num_hidden_layers=2",
    "hidden_size=64",
    "intermediate_size=160",
    "num_attention_heads=4",
    "num_key_value_heads=2",
    "head_dim=16",
    "vocab_size=256",
]
SMALL_MOE = SMALL_DENSE + ["num_local_experts=4", "num_experts_per_tok=2"]


def cli(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "mrep_export", *args], capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def _overrides(items):
    out = []
    for o in items:
        out += ["--override", o]
    return out


def _traced(tmp_path, name, overrides, b, s):
    out = tmp_path / f"{name}.json"
    cli("--hf-config", config_path(name), "-o", str(out), "--trace", f"{b},{s}", *_overrides(overrides), "-q")
    doc = load_dump(str(out))
    validate(doc)
    return doc, {m["name"]: m for m in doc["trace"]["modules"]}


def test_trace_dense_llama_equals_hand_count(tmp_path):
    B, S = 2, 16
    doc, mods = _traced(tmp_path, "Llama-3.1-8B", SMALL_DENSE, B, S)
    T, H, F, h, g, d, V, L = B * S, 64, 160, 4, 2, 16, 256, 2
    assert doc["trace"]["attn_implementation"] == "eager"
    q = 2 * T * H * h * d
    kv = 2 * 2 * T * H * g * d
    o = 2 * T * h * d * H
    scores = 2 * 2 * B * h * S * S * d  # QK^T and PV, full S x S as FlopCounterMode counts them
    mlp = 3 * 2 * T * H * F
    head = 2 * T * H * V
    assert mods["model.layers.0.self_attn.q_proj"]["flops"] == q
    assert mods["model.layers.0.self_attn"]["flops"] == q + kv + o + scores
    assert mods["model.layers.1.mlp"]["flops"] == mlp
    assert mods["lm_head"]["flops"] == head
    assert doc["trace"]["total_flops"] == L * (q + kv + o + scores + mlp) + head == mods[""]["flops"]


def test_trace_moe_mixtral_counts_every_expert_gemm(tmp_path):
    B, S = 2, 8
    doc, mods = _traced(tmp_path, "Mixtral-8x7B-v0.1", SMALL_MOE, B, S)
    T, H, F, E, k = B * S, 64, 160, 4, 2
    # eager experts: FlopCounterMode does not count grouped_mm, the default implementation
    assert doc["trace"]["experts_implementation"] == "eager"
    assert mods["model.layers.0.mlp.gate"]["flops"] == 2 * T * H * E
    assert mods["model.layers.0.mlp.experts"]["flops"] == T * k * 3 * 2 * H * F
    per_layer = sum(v["flops"] for n, v in mods.items() if n.count(".") == 3 and n.startswith("model.layers.0."))
    assert per_layer == mods["model.layers.0"]["flops"], "children sum to their parent"


def test_trace_through_api_with_explicit_inputs(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    s = dump_model(model, tmp_path / "t.json", trace=(3, 5), trace_inputs=torch.randn(3, 5, 8))
    doc = load_dump(s.path)
    validate(doc)
    assert doc["trace"]["total_flops"] == 2 * 15 * (8 * 16 + 16 * 4)


def test_trace_refuses_meta_models():
    with torch.device("meta"):
        model = nn.Linear(4, 4)
    with pytest.raises(ExportError, match="meta device"):
        trace_flops(model, 1, 1, inputs=torch.randn(1, 4))


def test_trace_needs_inputs_for_plain_modules():
    with pytest.raises(ExportError, match="trace_inputs="):
        trace_flops(nn.Linear(4, 4), 1, 1)


def test_cli_writes_gz_with_label_step_and_tags(tmp_path):
    out = tmp_path / "l.json.gz"
    proc = cli("--hf-config", config_path("Llama-3.2-1B-Instruct"), "-o", str(out), "--label", "base", "--step", "5", "--tag", "a", "--tag", "b")
    assert "1,235,814,400 params" in proc.stdout
    doc = load_dump(str(out))
    validate(doc)
    assert doc["run"]["label"] == "base" and doc["run"]["step"] == 5 and doc["run"]["tags"] == ["a", "b"]
    # named from the config (it has no _name_or_path: its architectures), never the file name
    assert doc["model"]["name"] == "LlamaForCausalLM"
    assert doc["model"]["source"] == {"kind": "hf_config", "path": "Llama-3.2-1B-Instruct.json", "model_type": "llama"}


def test_cli_names_the_model_from_the_config_not_the_file(tmp_path):
    with open(config_path("Llama-3.2-1B-Instruct")) as f:
        cfg = json.load(f)
    cfg["_name_or_path"] = "meta-llama/Llama-3.2-1B-Instruct"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = tmp_path / "d.json"
    cli("--hf-config", str(path), "-o", str(out), "-q")
    assert load_dump(str(out))["model"]["name"] == "Llama-3.2-1B-Instruct"
    del cfg["_name_or_path"], cfg["architectures"]
    path.write_text(json.dumps(cfg))
    cli("--hf-config", str(path), "-o", str(out), "-q")
    assert load_dump(str(out))["model"]["name"] == "llama"
    cli("--hf-config", str(path), "-o", str(out), "--name", "mine", "-q")
    assert load_dump(str(out))["model"]["name"] == "mine"


def test_cli_override_changes_kv_heads(tmp_path):
    out = tmp_path / "o.json"
    cli("--hf-config", config_path("Llama-3.1-8B"), "-o", str(out), "--override", "num_key_value_heads=32", "-q")
    doc = load_dump(str(out))
    k = next(m for m in doc["modules"] if m["name"] == "model.layers.0.self_attn.k_proj")
    assert doc["config"]["num_key_value_heads"] == 32 and k["params"][0]["shape"] == [4096, 4096]


@pytest.mark.parametrize(
    "setup,expect",
    [
        ("unknown_type", r"model_type 'no-such-arch' is not known to transformers"),
        ("missing_file", r"cannot read config .*absent\.json"),
        ("bad_json", r"config .*bad\.json: not valid JSON"),
        ("no_model_type", r"config .*nomt\.json: /model_type is missing"),
        ("not_object", r"config .*list\.json: expected a JSON object"),
        ("unwritable", r"cannot write dump to .*no-dir.*does not exist"),
        ("bad_override", r"override 'hidden_size': expected KEY=VALUE"),
    ],
)
def test_cli_bad_use_is_a_clear_error(tmp_path, setup, expect):
    cfg = config_path("gpt2")
    out = str(tmp_path / "out.json")
    extra = []
    if setup == "unknown_type":
        cfg = str(tmp_path / "unknown.json")
        with open(cfg, "w") as f:
            json.dump({"model_type": "no-such-arch", "hidden_size": 8}, f)
    elif setup == "missing_file":
        cfg = str(tmp_path / "absent.json")
    elif setup == "bad_json":
        cfg = str(tmp_path / "bad.json")
        with open(cfg, "w") as f:
            f.write('{"model_type": "llama",')
    elif setup == "no_model_type":
        cfg = str(tmp_path / "nomt.json")
        with open(cfg, "w") as f:
            json.dump({"hidden_size": 8}, f)
    elif setup == "not_object":
        cfg = str(tmp_path / "list.json")
        with open(cfg, "w") as f:
            json.dump([1, 2], f)
    elif setup == "unwritable":
        out = str(tmp_path / "no-dir" / "out.json")
    elif setup == "bad_override":
        extra = ["--override", "hidden_size"]
    proc = cli("--hf-config", cfg, "-o", out, *extra, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("mrep_export: error: ")
    import re

    assert re.search(expect, proc.stderr), proc.stderr
    assert not os.path.exists(out)
