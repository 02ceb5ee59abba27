"""The exporter on code no one here shaped for it: a nanoGPT-style GPT with a dataclass config,
the same model compiled and DDP-wrapped, a CNN traced with a callable; each dumped, ingested and
analysed by the Go tool with the right warnings."""

import argparse
import json
import os
import types

import pytest
import torch
import torch.distributed as dist
from torch import nn
from realcode import CNN, GPT, TINY_LLAMA, GPTConfig, Tokens, tiny_lightning
from test_end_to_end import mrep, mrep_bin  # noqa: F401 - the fixture builds the binary once

from mrep_export import ExportError, build_dump, dump_model, trace_flops
from mrep_export.dump import config_dict, unwrap


def test_configs_from_any_codebase():
    cfg = GPTConfig()
    assert config_dict(cfg)["n_head"] == 4  # dataclass (nanoGPT)
    assert config_dict(argparse.Namespace(n_head=2, lr=1e-3)) == {"n_head": 2, "lr": 0.001}
    assert config_dict(types.SimpleNamespace(n_embd=64)) == {"n_embd": 64}

    class Plain:
        def __init__(self):
            self.n_layer, self._hidden = 3, 1

        def method(self):
            return 0

    assert config_dict(Plain()) == {"n_layer": 3}

    class DictLike:  # OmegaConf-style: keys() and [] but not a Mapping
        def keys(self):
            return ["a"]

        def __getitem__(self, k):
            return 7

    assert config_dict(DictLike()) == {"a": 7}
    with pytest.raises(ExportError, match="mapping, a dataclass"):
        config_dict(3)


def test_nanogpt_dumps_with_its_dataclass_config():
    model = GPT(GPTConfig())
    doc, summary = build_dump(model)
    assert doc["config"]["n_head"] == 4 and doc["config"]["n_layer"] == 4
    assert summary.name == "GPT"
    # the tied head is recorded once
    assert summary.total_params == sum(p.numel() for p in model.parameters())


def test_compiled_and_ddp_models_dump_as_the_plain_model(tmp_path):
    model = GPT(GPTConfig())
    plain = build_dump(model, created_at="2026-01-01T00:00:00Z")[0]
    compiled = torch.compile(model)
    inner, seen = unwrap(compiled)
    assert inner is model and seen == ["OptimizedModule"]
    assert build_dump(compiled, created_at="2026-01-01T00:00:00Z")[0] == plain
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        assert build_dump(ddp, created_at="2026-01-01T00:00:00Z")[0] == plain
        both = torch.compile(ddp)
        assert build_dump(both, created_at="2026-01-01T00:00:00Z")[0] == plain
    finally:
        dist.destroy_process_group()


def test_trace_inputs_for_models_that_are_not_hf():
    # nanoGPT's forward(idx): token ids go by position
    tr = trace_flops(GPT(GPTConfig()), 2, 16)
    assert tr["total_flops"] > 0 and any(m["name"] == "lm_head" for m in tr["modules"])
    # a CNN: inputs from a callable (batch, seq) -> tensor; convolutions counted
    tr = trace_flops(CNN(), 2, 1, inputs=lambda b, s: torch.randn(b, 3, 16, 16))
    conv = next(m for m in tr["modules"] if m["name"] == "conv2")
    # 2 images x 16x16 outputs x 32 channels x (16 x 3 x 3) MACs x 2
    assert conv["flops"] == 2 * 16 * 16 * 32 * 16 * 9 * 2
    with pytest.raises(ExportError, match="callable"):
        trace_flops(CNN(), 2, 1)


def test_real_models_through_mrep(tmp_path, mrep_bin):  # noqa: F811
    gpt = tmp_path / "gpt.json"
    nocfg = tmp_path / "gpt_nocfg.json"
    cnn = tmp_path / "cnn.json"
    dump_model(GPT(GPTConfig()), gpt, label="nanogpt")
    dump_model(GPT(GPTConfig()), nocfg, config={}, label="noconfig")
    dump_model(CNN(), cnn, trace=(2, 1), trace_inputs=lambda b, s: torch.randn(b, 3, 16, 16))
    # an output directory as a Trainer leaves it: HF's config.json is not a dump
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_head": 12}')
    db = tmp_path / "m.db"
    out = mrep(mrep_bin, db, "ingest", str(tmp_path))
    assert out.count("ingested ") == 3

    a = mrep(mrep_bin, db, "analyze", "GPT@nanogpt")
    assert "| Attention | `MHA` |" in a and "⚠" not in a
    a = mrep(mrep_bin, db, "analyze", "GPT@noconfig")
    assert "| Attention | `unknown` |" in a and "--set num_attention_heads=N" in a
    a = mrep(mrep_bin, db, "analyze", "GPT@noconfig", "--set", "num_attention_heads=4")
    assert "| Attention | `MHA` |" in a
    a = mrep(mrep_bin, db, "analyze", "CNN")
    assert "not a transformer" in a and "Tokens/s" not in a and "`aten.convolution`" in a
    mrep(mrep_bin, db, "report", "CNN", "-o", str(tmp_path / "cnn-report"))
    md = (tmp_path / "cnn-report" / "report.md").read_text()
    assert "not a transformer" in md and "decode_batch_roofline" not in md


def test_trainer_and_lightning_runs_through_mrep(tmp_path, mrep_bin):  # noqa: F811
    """An HF Trainer run and a Lightning run, tiny and on CPU, with the hooks at their defaults:
    the Trainer's whole output directory (its checkpoints' config.json, trainer_state.json …
    beside mrep's dumps) is ingested as it is, then reported, history and show read the
    measurements."""
    import pytorch_lightning as pl
    from conftest import config_path
    from transformers import Trainer, TrainingArguments

    from mrep_export import lightning_callback, trainer_callback
    from mrep_export.hf import build_hf_model, load_hf_config

    config = load_hf_config(config_path("Llama-3.2-1B-Instruct"), TINY_LLAMA)
    torch.manual_seed(0)
    model = build_hf_model(config, device="cpu", dtype=torch.float32)

    out = tmp_path / "trainer-out"
    args = TrainingArguments(output_dir=str(out), max_steps=4, save_strategy="steps", save_steps=2,
                             per_device_train_batch_size=4, learning_rate=1e-2, report_to=[], use_cpu=True,
                             logging_strategy="no", disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[trainer_callback(label="hf")]).train()

    module, loader = tiny_lightning()
    pl_root = tmp_path / "pl"
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=pl_root, callbacks=[lightning_callback(label="pl"),
                         pl.callbacks.ModelCheckpoint(dirpath=pl_root / "ckpt", every_n_train_steps=2, save_top_k=-1)])
    trainer.fit(module, loader)

    db = tmp_path / "m.db"
    ingested = mrep(mrep_bin, db, "ingest", str(out), str(pl_root))
    assert ingested.count("ingested ") == 6, ingested  # 3 + 3 dumps; HF's own JSON skipped
    mrep(mrep_bin, db, "report", "llama@hf", "-o", str(tmp_path / "r-hf"), "--sensitivity", "off")
    mrep(mrep_bin, db, "report", "Tiny@pl", "-o", str(tmp_path / "r-pl"), "--sensitivity", "off")
    assert "not a transformer" in (tmp_path / "r-pl" / "report.md").read_text()
    hist = json.loads(mrep(mrep_bin, db, "history", "llama@hf", "--metric", "step_time", "--json"))
    assert len(hist) == 2 and all(p["value"] > 0 for p in hist)  # step 0 has nothing timed
    shown = mrep(mrep_bin, db, "show", "llama@hf#4")
    assert "Measured vs predicted" in shown
