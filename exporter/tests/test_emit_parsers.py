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


MODULES = sorted((ROOT / "emit" / "testdata").glob("train-*/train_torchtitan.py"))


def _settings(tree):
    """The constant settings of mrep_plan: {"p.tensor_parallel_degree": 4, ...}."""
    import ast

    out = {}
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "mrep_plan")
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                out[ast.unparse(target)] = node.value.value
    return out


def test_torchtitan_modules_compile_and_agree():
    """Python's own compiler takes each config module; its settings mean, by the field docs of
    torchtitan/config/configs.py at b5bcd76, the layout the docstring states: the degrees
    multiply to its GPUs, a step's tokens are a whole number of micro-batches over the
    data-parallel ranks, and a pipeline runs all of them as its micro-batches."""
    import ast
    import re

    assert len(MODULES) >= 2, MODULES
    for path in MODULES:
        src = path.read_text()
        compile(src, str(path), "exec")
        tree = ast.parse(src)
        s = _settings(tree)
        deg = {k[2:]: v for k, v in s.items() if k.startswith("p.") and k.endswith("_degree")}
        for k, v in deg.items():
            assert isinstance(v, int) and v >= 1, (path, k, v)
        gpus = int(re.search(r"\((\d+) GPUs\)", ast.get_docstring(tree)).group(1))
        dp = deg["data_parallel_replicate_degree"] * deg["data_parallel_shard_degree"]
        assert dp * deg["tensor_parallel_degree"] * deg["pipeline_parallel_degree"] * deg["context_parallel_degree"] == gpus, path
        micro, step = s["t.num_tokens_per_microbatch_per_dp_rank"], s["t.num_tokens_per_train_step"]
        assert step % (micro * dp) == 0, path
        if deg["pipeline_parallel_degree"] > 1:
            assert s["p.num_pp_microbatches"] == step // (micro * dp), path
        if s.get("config.compile.enable_async_tensor_parallel"):
            assert s["config.compile.enable"], f"{path}: async TP needs torch.compile"
