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


def test_hook_measurement_beside_prediction_on_a_cpu_chip_measured_now(tmp_path, mrep_bin):
    """A real CPU training loop with the hook; a chip entry for this CPU whose figures are
    measured here (fp32 GEMM rate and copy bandwidth); mrep sets its prediction beside the
    measured step. CPU time is not what the GPU time model is for: the check is that the
    measured and predicted figures arrive side by side, finite and positive."""
    import time

    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(256, 64), nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="cpu-mlp", label="sgd", every=4)
    dumper.maybe_dump(0)
    for step in range(1, 9):
        ids = torch.randint(0, 256, (8, 32))
        loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        dumper.maybe_dump(step, tokens=ids.numel(), seq_len=32)

    a = torch.randn(1024, 1024)
    a @ a
    best = float("inf")
    for _ in range(5):  # the best of five: the machine may be busy with something else
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    tflops = 2 * 1024**3 / best / 1e12
    big = torch.empty(64 << 20, dtype=torch.uint8)
    t0 = time.perf_counter()
    big.clone()
    gbps = 2 * big.numel() / (time.perf_counter() - t0) / 1e9
    chips = tmp_path / "cpu.json"
    chips.write_text(json.dumps({"chips": [{
        "name": "cpu-test", "vendor": "this machine", "title": "this CPU, measured by the test",
        "peak_tflops": {"fp32": tflops, "bf16": tflops}, "memory_gib": 8, "hbm_gbps": gbps,
        "scale_up_gbps": 10, "scale_out_gbps": 10, "tdp_w": 100, "onchip_mib": 32,
        "sources": [f"measured by this test: 1024^3 fp32 matmul {tflops:.3f} TFLOP/s, 64 MiB copy {gbps:.1f} GB/s"],
    }]}))
    db = tmp_path / "mrep.db"
    mrep(mrep_bin, db, "ingest", str(tmp_path / "dumps"))
    shown = json.loads(mrep(mrep_bin, db, "--chips-file", str(chips), "show", "cpu-mlp@sgd#8", "--chip", "cpu-test", "--json"))
    m = shown["measured"]
    assert m["measured"]["device"] == "cpu" and m["measured"]["tokens_per_step"] == 256 and m["measured"]["steps_timed"] == 4
    assert m["measured"]["step_time_s"] > 0 and m["predicted_s"] > 0 and 0 < m["roofline_s"] <= m["predicted_s"]
    # the CPU's peak is measured once, on a shared machine: MFU is finite and positive, not bounded
    assert 0 < m["mfu_measured"] < float("inf") and m["chip"] == "cpu-test"
    text = mrep(mrep_bin, db, "show", "cpu-mlp@sgd#8")  # no chip for "cpu": said, with the way out
    assert "no chip in the database matches the device" in text and "--chip" in text


def test_hook_hands_dumps_to_mrep_ingest(tmp_path, mrep_bin):
    """ingest_db= stores each checkpoint in the history as training goes (the same `mrep ingest`
    a PostgreSQL history takes, here into a SQLite file); the URL travels in MREP_DB, not argv."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 8)
    db = tmp_path / "team.db"
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="hooked", label="sgd", every=3, ingest_db=str(db), mrep_bin=mrep_bin)
    for step in range(7):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        dumper.maybe_dump(step, tokens=32)
    assert dumper.wait_ingests() == []
    runs = json.loads(mrep(mrep_bin, db, "runs", "--json"))
    # the ingests run in the background, so their run ids need not follow the steps
    assert sorted(r["step"] for r in runs) == [0, 3, 6]
    assert all(r["model_name"] == "hooked" for r in runs)
    # measured step times arrived with them
    shown = json.loads(mrep(mrep_bin, db, "show", "hooked@sgd#6", "--json"))
    assert shown["measured"]["measured"]["steps_timed"] == 3
    for _, proc in dumper._ingests:
        assert str(db) not in proc.args


def test_hook_without_mrep_warns_and_keeps_dumps(tmp_path):
    model = nn.Linear(4, 4)
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="nobin", ingest_db=str(tmp_path / "x.db"), mrep_bin=None)
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = str(tmp_path)  # no mrep here
    try:
        with pytest.warns(UserWarning, match="mrep is not on PATH"):
            dumper.dump(0)
    finally:
        os.environ["PATH"] = old
    assert os.path.exists(dumper.written[0].path)
    assert dumper.wait_ingests() == []


def test_hook_reports_a_failed_ingest(tmp_path, mrep_bin):
    model = nn.Linear(4, 4)
    bad_db = tmp_path / "no-such-dir" / "x.db"
    dumper = CheckpointDumper(model, tmp_path / "dumps", name="fails", ingest_db=str(bad_db), mrep_bin=mrep_bin)
    dumper.dump(0)
    with pytest.warns(UserWarning, match="mrep ingest"):
        failures = dumper.wait_ingests()
    assert len(failures) == 1 and "x.db" in failures[0]
    assert os.path.exists(dumper.written[0].path)
