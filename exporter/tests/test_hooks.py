"""Training hooks: real training steps on CPU, dumps at checkpoints, weights that really move."""

import glob
import os

import torch
from conftest import config_path, load_dump
from realcode import TINY_LLAMA, Tokens, tiny_lightning
from torch import nn

from mrep_export import CheckpointDumper, trainer_callback
from mrep_export.hf import build_hf_model, load_hf_config
from mrep_export.validate import validate


def _mean_of(doc, tensor):
    mod, _, name = tensor.rpartition(".")
    m = next(m for m in doc["modules"] if m["name"] == mod)
    return next(p for p in m["params"] if p["name"] == name)["stats"]


def test_checkpoint_dumper_in_a_custom_loop(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    dumper = CheckpointDumper(model, tmp_path / "dumps", label="sgd-0.5", every=3, tags=["unit"])
    for step in range(7):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        dumper.maybe_dump(step)
    files = sorted(os.listdir(tmp_path / "dumps"))
    assert files == ["sgd-0.5-step00000000.json.gz", "sgd-0.5-step00000003.json.gz", "sgd-0.5-step00000006.json.gz"]
    docs = [load_dump(str(tmp_path / "dumps" / f)) for f in files]
    for d, step in zip(docs, (0, 3, 6)):
        validate(d)
        assert d["run"]["step"] == step and d["run"]["label"] == "sgd-0.5"
        assert d["model"]["source"]["kind"] == "checkpoint"
    first, last = _mean_of(docs[0], "0.weight"), _mean_of(docs[-1], "0.weight")
    assert first["mean"] != last["mean"] and first["std"] != last["std"]
    # the last dump's statistics are the live model's
    assert last["mean"] == model[0].weight.mean().item()
    assert len({d["run"]["content_hash"] for d in docs}) == 3


def test_trainer_callback_dumps_on_every_save(tmp_path):
    from transformers import Trainer, TrainingArguments

    config = load_hf_config(config_path("Llama-3.2-1B-Instruct"), TINY_LLAMA)
    torch.manual_seed(0)
    model = build_hf_model(config, device="cpu", dtype=torch.float32)

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=4,
        save_strategy="steps",
        save_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        disable_tqdm=True,
    )
    cb = trainer_callback(tmp_path / "dumps", label="tiny-llama")
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[cb]).train()
    files = sorted(glob.glob(str(tmp_path / "dumps" / "*.json.gz")))
    assert [os.path.basename(f) for f in files] == [
        "tiny-llama-step00000000.json.gz", "tiny-llama-step00000002.json.gz", "tiny-llama-step00000004.json.gz"]
    zero, a, b = (load_dump(f) for f in files)
    assert "measurement" not in zero  # the model as initialised: nothing timed yet
    for d in (a, b):
        validate(d)
        # named from the config (model_type), not the Python class
        assert d["config"]["hidden_size"] == 32 and d["model"]["name"] == "llama"
        m = d["measurement"]
        assert m["steps_timed"] == 2 and m["step_time_s"] > 0 and m["world_size"] == 1 and m["device"] == "cpu"
        assert m["tokens_per_step"] == 4 * 12 and m["seq_len"] == 12 and m["precision"] == "fp32"
    wa = _mean_of(a, "model.layers.0.mlp.up_proj.weight")
    wb = _mean_of(b, "model.layers.0.mlp.up_proj.weight")
    assert wa["std"] != wb["std"], "two checkpoints of a training run must show drift"


def test_dumper_measures_steps_with_an_injected_clock(tmp_path):
    ticks = iter([0.0, 1.0, 3.0, 4.0, 5.5, 100.0])  # step times 1, 2, 1, 1.5, 94.5
    model = nn.Linear(4, 4)
    d = CheckpointDumper(model, tmp_path, label="clock", every=5, clock=lambda: next(ticks), precision="bf16")
    assert d.maybe_dump(0) is not None and d.written[0].path.endswith("clock-step00000000.json.gz")
    for step in range(1, 6):
        d.maybe_dump(step, tokens=256, seq_len=128)
    doc = load_dump(d.written[-1].path)
    # the median ignores the one slow step (a checkpoint save, an eval)
    assert doc["measurement"] == {"step_time_s": 1.5, "steps_timed": 5, "tokens_per_step": 256, "seq_len": 128,
                                  "world_size": 1, "device": "cpu", "precision": "bf16"}


def test_only_rank_zero_writes(tmp_path, monkeypatch):
    import mrep_export.hooks as hooks

    monkeypatch.setattr(hooks, "_dist", lambda: (1, 2))
    d = CheckpointDumper(nn.Linear(2, 2), tmp_path / "r1", every=1)
    assert d.maybe_dump(0) is None and not (tmp_path / "r1").exists()
    monkeypatch.setattr(hooks, "_dist", lambda: (0, 2))
    d = CheckpointDumper(nn.Linear(2, 2), tmp_path / "r0", every=1)
    d.maybe_dump(0)
    d.maybe_dump(1, tokens=10)
    assert load_dump(d.written[-1].path)["measurement"]["tokens_per_step"] == 20  # this rank's x world size


def test_lightning_callback_dumps_with_measurements(tmp_path):
    import pytorch_lightning as pl

    from mrep_export import lightning_callback

    module, loader = tiny_lightning()
    cb = lightning_callback(tmp_path / "dumps", label="pl")
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[cb, ckpt], default_root_dir=tmp_path)
    trainer.fit(module, loader)
    files = sorted(glob.glob(str(tmp_path / "dumps" / "*.json.gz")))
    assert [os.path.basename(f) for f in files] == ["pl-step00000000.json.gz", "pl-step00000002.json.gz", "pl-step00000004.json.gz"]
    last = load_dump(files[-1])
    validate(last)
    assert last["measurement"]["tokens_per_step"] == 32 and last["measurement"]["seq_len"] == 8
    assert last["measurement"]["steps_timed"] == 2


def test_a_dump_that_cannot_be_written_never_stops_training(tmp_path):
    """A dump directory that cannot be made (a file where a folder should be) is a warning and a
    recorded failure; the training loop's step returns and goes on."""
    import warnings

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    model = nn.Sequential(nn.Linear(8, 8))
    d = CheckpointDumper(model, blocker / "dumps", every=2, name="tiny")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(0, 5):
            assert d.maybe_dump(step) is None
    assert len(d.dump_failures) == 3, d.dump_failures  # steps 0, 2 and 4
    assert "not written" in d.dump_failures[0] and any("training goes on" in str(w.message) for w in caught)


def test_statistics_that_fail_never_stop_training(tmp_path, monkeypatch):
    """Statistics that raise on some tensor (as they did on CUDA tensors before they were computed
    on the tensor's device) are a warning and a recorded failure, with no partial dump left; the
    loop goes on and the next dump is written once they work."""
    import warnings

    import mrep_export.dump as dump_mod

    real = dump_mod.norm_and_sketch

    def broken(t, *a, **k):
        raise RuntimeError("Expected all tensors to be on the same device")

    model = nn.Sequential(nn.Linear(8, 8))
    d = CheckpointDumper(model, tmp_path / "dumps", every=2, name="tiny", gz=False)
    monkeypatch.setattr(dump_mod, "norm_and_sketch", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert d.maybe_dump(0) is None
    assert len(d.dump_failures) == 1 and "RuntimeError: Expected all tensors" in d.dump_failures[0], d.dump_failures
    assert any("training goes on" in str(w.message) for w in caught)
    assert not os.listdir(tmp_path / "dumps")  # nothing half-written
    monkeypatch.setattr(dump_mod, "norm_and_sketch", real)
    d.maybe_dump(1)
    assert d.maybe_dump(2) is not None and len(os.listdir(tmp_path / "dumps")) == 1


def test_wait_ingests_gives_up_after_its_timeout(tmp_path):
    """An ingest that hangs (a lock held on the history) is stopped when wait_ingests' timeout
    runs out and reported; the call returns instead of waiting for as long as the lock is held."""
    import time
    import warnings

    slow = tmp_path / "mrep"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    model = nn.Sequential(nn.Linear(8, 8))
    d = CheckpointDumper(model, tmp_path / "dumps", every=1, name="tiny", ingest_db=str(tmp_path / "h.db"), mrep_bin=str(slow))
    d.maybe_dump(0)
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failures = d.wait_ingests(timeout=0.5)
    took = time.monotonic() - start
    print(f"wait_ingests(timeout=0.5) returned after {took:.2f} s")
    assert took < 10, took
    assert len(failures) == 1 and "still running after 0.5 s" in failures[0], failures
    assert glob.glob(str(tmp_path / "dumps" / "*.json.gz")), "the dump stays on disk"
