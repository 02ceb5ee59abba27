"""Real Hugging Face models built from their real config.json on the meta device, checked against
published parameter counts that no one here chose."""

import time

import pytest
import torch
from conftest import config_path, load_dump

from mrep_export import build_hf_model, dump_model, load_hf_config
from mrep_export.validate import validate

# Published exact counts (examples/configs/README.md): all parameters, tied tensors once.
PUBLISHED = {
    "Llama-3.1-8B": 8_030_261_248,
    "Llama-3.1-70B-Instruct": 70_553_706_496,
    "Mixtral-8x7B-v0.1": 46_702_792_704,
    "gpt2": 124_439_808,
    "Llama-3.2-1B-Instruct": 1_235_814_400,
    "Mistral-7B-v0.1": 7_241_732_096,
    "Qwen2.5-7B": 7_615_616_512,
}


def _dump(name, tmp_path, **kw):
    config = load_hf_config(config_path(name))
    model = build_hf_model(config)
    path = str(tmp_path / f"{name}.json.gz")
    summary = dump_model(model, path, config=config, name=name, **kw)
    doc = load_dump(path)
    validate(doc)
    return model, summary, doc


def _doc_total(doc):
    return sum(p["numel"] for m in doc["modules"] for p in m["params"] if "tied_to" not in p)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name, tmp_path):
    model, summary, doc = _dump(name, tmp_path)
    assert summary.total_params == PUBLISHED[name]
    assert _doc_total(doc) == PUBLISHED[name]
    assert summary.trainable_params == PUBLISHED[name] and summary.frozen_params == 0
    assert not summary.has_stats, "meta tensors have no values to measure"
    assert all(p["device"] == "meta" for m in doc["modules"] for p in m["params"])
    assert doc["model"]["source"] == {"kind": "module", "model_type": doc["config"]["model_type"]}


def test_deepseek_v2_lite_matches_a_hand_count(tmp_path):
    # The MI355X training rows' model, reconstructed from Primus's Megatron files: counted here
    # by hand from its shapes, independent of transformers.
    model, summary, doc = _dump("DeepSeek-V2-Lite.RECONSTRUCTED", tmp_path)
    h, vocab, heads, kv_lora, nope, rope, v = 2048, 102400, 16, 512, 128, 64, 128
    attn = (h * heads * (nope + rope)  # q_proj (no q LoRA)
            + h * (kv_lora + rope) + kv_lora  # kv_a_proj_with_mqa and its norm
            + kv_lora * heads * (nope + v)  # kv_b_proj
            + heads * v * h)  # o_proj
    layer = attn + 2 * h  # and the two norms
    dense_mlp = 3 * h * 10944
    moe = 64 * 3 * h * 1408 + 3 * h * 2 * 1408 + 64 * h  # routed, the two shared, the router
    hand = 2 * vocab * h + h + 27 * layer + dense_mlp + 26 * moe
    assert hand == 15_706_484_224  # 15.7B, as the hub lists it
    assert summary.total_params == hand == sum(p.numel() for p in model.parameters())


def test_deepseek_v3_matches_transformers_own_count(tmp_path):
    t0 = time.perf_counter()
    model, summary, doc = _dump("DeepSeek-V3", tmp_path)
    elapsed = time.perf_counter() - t0
    own = sum(p.numel() for p in model.parameters())
    assert summary.total_params == own
    assert own == 671_026_404_352  # the seed report's figure, and 671B as the tech report says
    assert doc["config"]["num_hidden_layers"] == 61 and doc["config"]["n_routed_experts"] == 256
    print(f"\nDeepSeek-V3 build+walk+write: {elapsed:.2f} s, {summary.num_modules} modules")


@pytest.mark.parametrize("name,ties", [("gpt2", True), ("Llama-3.2-1B-Instruct", True), ("Llama-3.1-8B", False)])
def test_tied_embeddings_counted_once(name, ties, tmp_path):
    model, summary, doc = _dump(name, tmp_path)
    tied = [(m["name"], p) for m in doc["modules"] for p in m["params"] if "tied_to" in p]
    if not ties:
        assert tied == []
        return
    assert len(tied) == 1
    mod, p = tied[0]
    assert mod == "lm_head" and p["name"] == "weight"
    assert p["tied_to"] in ("transformer.wte.weight", "model.embed_tokens.weight")
    listed = sum(p["numel"] for m in doc["modules"] for p in m["params"])
    assert listed - p["numel"] == summary.total_params


def _experts(doc):
    return {m["name"]: m for m in doc["modules"] if m["name"].endswith("mlp.experts")}


def test_fused_experts_carry_expert_axis_and_per_expert_shape(tmp_path):
    _, _, doc = _dump("Mixtral-8x7B-v0.1", tmp_path)
    experts = _experts(doc)
    assert len(experts) == 32
    params = {p["name"]: p for p in experts["model.layers.0.mlp.experts"]["params"]}
    cfg = doc["config"]
    E, H, F = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"]
    for p in params.values():
        assert p["expert_axis"] == 0 and p["shape"][0] == E
    # one expert = the tensor without its expert axis: 3 H x F matrices
    per_expert = sum(p["numel"] // p["shape"][p["expert_axis"]] for p in params.values())
    assert per_expert == 3 * H * F


def test_deepseek_experts_routed_and_shared(tmp_path):
    _, _, doc = _dump("DeepSeek-V3", tmp_path)
    cfg = doc["config"]
    experts = _experts(doc)
    assert len(experts) == cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    p = {q["name"]: q for q in experts["model.layers.3.mlp.experts"]["params"]}
    assert p["gate_up_proj"]["shape"][0] == cfg["n_routed_experts"]
    per_expert = sum(q["numel"] // q["shape"][0] for q in p.values())
    assert per_expert == 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"]
    names = {m["name"] for m in doc["modules"]}
    assert "model.layers.3.mlp.shared_experts.gate_proj" in names


class _Expert(torch.nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.gate_proj = torch.nn.Linear(h, f, bias=False)
        self.up_proj = torch.nn.Linear(h, f, bias=False)
        self.down_proj = torch.nn.Linear(f, h, bias=False)


class _SeparateExpertsMoE(torch.nn.Module):
    """Experts as separate Linear modules, as older transformers versions and many codebases hold them."""

    def __init__(self, h=16, f=32, e=4):
        super().__init__()
        self.router = torch.nn.Linear(h, e, bias=False)
        self.experts = torch.nn.ModuleList(_Expert(h, f) for _ in range(e))


def test_separate_expert_modules_come_through(tmp_path):
    with torch.device("meta"):
        moe = _SeparateExpertsMoE()
    path = str(tmp_path / "moe.json")
    summary = dump_model(moe, path)
    doc = load_dump(path)
    validate(doc)
    by_name = {m["name"]: m for m in doc["modules"]}
    assert [f"experts.{i}" for i in range(4)] == [n for n in by_name if n.count(".") == 1 and n.startswith("experts.")]
    assert by_name["experts.2.up_proj"]["class"] == "Linear"
    assert by_name["experts.2.up_proj"]["params"][0]["shape"] == [32, 16]
    assert "expert_axis" not in by_name["experts.2.up_proj"]["params"][0]
    assert summary.total_params == 16 * 4 + 4 * 3 * 16 * 32


def test_multimodal_wrapper_points_at_text_config(tmp_path):
    _, summary, doc = _dump("Llama-4-Scout-17B-16E-Instruct", tmp_path)
    assert doc["model"]["text_config_key"] == "text_config"
    text = doc["config"]["text_config"]
    assert text["num_local_experts"] == 16 and text["hidden_size"] == 5120
    assert summary.total_params > 100_000_000_000
