"""A real training loop dumps checkpoints with the hook; the Go tool ingests them and reports
drift. Both halves of the pipeline, for real: torch on CPU, go build, SQLite in a temp dir."""

import json
import os
import shutil
import subprocess

import pytest
import torch
from conftest import REPO
from torch import nn

from mrep_export import CheckpointDumper


@pytest.fixture(scope="module")
def mrep_bin(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is not installed; make test runs this with it")
    out = tmp_path_factory.mktemp("bin") / "mrep"
    subprocess.run([go, "build", "-o", str(out), "./cmd/mrep"], cwd=REPO, check=True, timeout=600)
    return str(out)


def mrep(binary, db, *args):
    proc = subprocess.run([binary, "--db", str(db), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_training_checkpoints_to_history_and_diff(tmp_path, mrep_bin):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(128, 16)
    y = x.flip(-1)
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="e2e-mlp", label="adam", every=5)
    for step in range(16):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        dumper.maybe_dump(step)
    assert len(dumper.written) == 4

    db = tmp_path / "mrep.db"
    out = mrep(mrep_bin, db, "ingest", str(tmp_path / "dumps"))
    assert out.count("ingested ") == 4
    history = json.loads(mrep(mrep_bin, db, "history", "e2e-mlp@adam", "--metric", "drift", "--json"))
    assert [p["x"] for p in history] == [0, 5, 10, 15]
    drift = [p["value"] for p in history]
    assert drift[0] == 0 and all(b > a for a, b in zip(drift, drift[1:])), drift

    diff = json.loads(mrep(mrep_bin, db, "diff", "1", "4", "--json"))
    movers = diff["weight_drift"]
    assert len(movers) == 4 and movers[0]["rel_change"] > 0
    first = dumper.written[0].tensors[0]
    assert {m["name"] for m in movers} == {t.name for t in dumper.written[0].tensors}
    assert any(m["name"] == first.name and m["mean_a"] == first.stats["mean"] for m in movers)
    params = json.loads(mrep(mrep_bin, db, "history", "e2e-mlp@adam", "--metric", "params", "--json"))
    assert {p["value"] for p in params} == {sum(p.numel() for p in model.parameters())}


def test_sketch_drift_matches_torch_exact(tmp_path, mrep_bin):
    """Drift from the dumps' CountSketches, against ||W_b - W_a|| / ||W_a|| computed by torch on
    the weights themselves, for every tensor of >= 10^4 elements of a real (tiny) training run;
    and tensors small enough to be their own sketch come out exact."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128), nn.LayerNorm(128))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = torch.randn(256, 128)
    y = torch.tanh(x @ torch.randn(128, 128) / 11)
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="sketch-mlp", label="adamw", every=40)
    snapshots = {}
    for step in range(41):
        if step in (0, 40):
            snapshots[step] = {n: p.detach().clone() for n, p in model.named_parameters()}
        dumper.maybe_dump(step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    assert len(dumper.written) == 2

    db = tmp_path / "mrep.db"
    mrep(mrep_bin, db, "ingest", str(tmp_path / "dumps"))
    drift = {d["name"]: d for d in json.loads(mrep(mrep_bin, db, "diff", "1", "2", "--json"))["weight_drift"]}
    a, b = snapshots[0], snapshots[40]
    checked = 0
    for name, wa in a.items():
        diff = float(torch.linalg.vector_norm((b[name] - wa).double()))
        base = float(torch.linalg.vector_norm(wa.double()))
        got = drift[name]
        if base == 0:  # LayerNorm's zero-initialised bias: the absolute change, stated as such
            assert got["zero_baseline"] and got["abs_change"] == pytest.approx(diff, rel=1e-5), name
            continue
        exact = diff / base
        print(f"{name}: {wa.numel()} elements, sketch {got['rel_change']:.5f}, torch {exact:.5f}, error {got['rel_change'] / exact - 1:+.2%}")
        if wa.numel() >= 10_000:
            assert got["method"] == "sketch"
            assert abs(got["rel_change"] - exact) <= 0.10 * exact, (name, got["rel_change"], exact)
            checked += 1
        elif wa.numel() <= 1024:
            assert got["method"] == "exact"
            assert got["rel_change"] == pytest.approx(exact, rel=1e-5), name
    assert checked == 2
    # the norm's gain and the biases are reported apart from the matrices
    assert drift["3.weight"]["kind"] == "norm" and drift["0.bias"]["kind"] == "bias"
