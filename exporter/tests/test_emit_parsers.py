"""The training configs mrep's emit writes, read by parsers no one here wrote.

emit/testdata holds the files `mrep plan train --emit` writes for its test layouts (Go's
golden files, kept current by `go test ./emit -update`). Python's own TOML parser (tomllib,
PEP 680) reads every torchtitan file, and the values land where torchtitan v0.2.2's JobConfig
(torchtitan/config/job_config.py) reads them.
"""
import pathlib

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's; the exporter supports 3.10")

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = sorted((ROOT / "emit" / "testdata").glob("train-*/train-torchtitan.toml"))


def test_goldens_exist():
    assert len(GOLDENS) >= 2, GOLDENS


def test_torchtitan_files_parse_as_toml():
    for path in GOLDENS:
        doc = tomllib.loads(path.read_text())
        par, train = doc["parallelism"], doc["training"]
        # every degree a positive integer, the batch a whole number of local batches
        for k, v in par.items():
            if k.endswith("_degree"):
                assert isinstance(v, int) and v >= 1, (path, k, v)
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        assert train["global_batch_size"] % (train["local_batch_size"] * dp) == 0, path
        if par["pipeline_parallel_degree"] > 1:
            assert train["local_batch_size"] % par["pipeline_parallel_microbatch_size"] == 0, path
        if par.get("enable_async_tensor_parallel"):
            assert doc["compile"]["enable"], f"{path}: async TP needs torch.compile"
        for conv in doc.get("model", {}).get("converters", []):
            section = doc
            for part in conv.split("."):
                section = section[part]
            assert section["recipe_name"], (path, conv)
