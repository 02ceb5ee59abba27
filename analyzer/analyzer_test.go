package analyzer

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/model"
)

func load(t testing.TB, name string) *model.Dump {
	t.Helper()
	d, err := ingest.ReadFile("../examples/dumps/"+name+".json.gz", ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func analyze(t testing.TB, m *Model, ph Phase, s Scenario, p ExecProfile) Step {
	t.Helper()
	st, err := m.Analyze(ph, s, p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if want == 0 && got == 0 {
		return
	}
	if d := math.Abs(got-want) / math.Abs(want); d > rel {
		t.Errorf("%s = %.6g, want %.6g (off by %.3f%%, allowed %.3f%%)", what, got, want, 100*d, 100*rel)
	}
}

// PyTorch's own count: for every module FlopCounterMode saw in the exporter's --trace runs,
// mrep's GEMM FLOPs (inclusive of children) equal it. Softmax and elementwise FLOPs are mrep's
// convention on top (FlopCounterMode counts matmuls only) and are compared separately.
func TestFTheoryMatchesFlopCounterMode(t *testing.T) {
	for _, name := range []string{"tiny-llama-trace", "tiny-mixtral-trace", "tiny-deepseek-trace"} {
		t.Run(name, func(t *testing.T) {
			d := load(t, name)
			m := NewModel(d)
			s := DefaultScenario()
			s.Batch, s.Seq, s.AllLogits = d.Trace.Batch, d.Trace.Seq, true // the trace is a plain forward: logits everywhere
			st := analyze(t, m, Prefill, s, Naive)
			tree := ModuleTree(st.Modules)
			if len(d.Trace.Modules) < 10 {
				t.Fatalf("only %d traced modules", len(d.Trace.Modules))
			}
			for _, tm := range d.Trace.Modules {
				within(t, "F_tensorcore of "+tm.Name, tree[tm.Name].FTensorcore, float64(tm.Flops), 0.01)
			}
			within(t, "total", st.Cost.FTensorcore, float64(d.Trace.TotalFlops), 0.01)
			if st.Cost.FTheory <= st.Cost.FTensorcore {
				t.Error("F_theory should add softmax and elementwise FLOPs to the GEMMs")
			}
		})
	}
}

// ../shared/seeds/003: Llama-3-8B, batch 32, sequence/context 1024, fp16, per layer.
func TestSeed003Llama3_8B(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	s := DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 32, 1024, 1024
	layer := func(st Step) Cost {
		var c Cost
		for _, mc := range st.Modules {
			if strings.HasPrefix(mc.Module, "model.layers.0.") || mc.Module == "model.layers.0" {
				c = c.Add(mc.Cost)
			}
		}
		return c
	}
	pre := layer(analyze(t, m, Prefill, s, Naive))
	// weights: W_q 32 MiB + W_k 8 + W_v 8 + W_o 32 + 3 x 112 MiB = 416 MiB = 436 MB (+ two norm vectors)
	within(t, "prefill weight bytes per layer", pre.FloorWeights, 436_207_616+2*4096*2, 1e-9)
	// FLOPs: Q, K, V, O, QK^T, AV and three FFN GEMMs: "≈ 14.8 TFLOPs"
	T := 32.0 * 1024
	want := 2*T*4096*4096*2 + 2*T*4096*1024*2 + 2*T*4096*1024*2 + 3*2*T*4096*14336
	within(t, "prefill GEMM FLOPs per layer", pre.FTensorcore, want, 1e-12)
	within(t, "prefill FLOPs per layer vs the seed's 14.8 T", pre.FTensorcore, 14.8e12, 0.01)
	// KV write: batch x seq x n_kv x d_head x 2 (K, V) x 2 bytes
	within(t, "prefill KV write per layer", pre.BytesKV, 32*1024*8*128*2*2, 1e-12)

	dec := layer(analyze(t, m, Decode, s, Naive))
	within(t, "decode KV bytes per layer (read 134,217,728 + write 131,072)", dec.BytesKV, 134_217_728+131_072, 1e-12)
	within(t, "decode FLOPs per layer vs the seed's ≈15 GFLOPs", dec.FTensorcore, 15e9, 0.04)
	ai := dec.FTensorcore / dec.BytesHBM()
	within(t, "decode arithmetic intensity vs the seed's ≈24", ai, 24, 0.08)
}

// Training FLOPs against published formulas (../shared/refs/formulas.md), GEMMs only as they count.
func TestTrainingFlopsAgainstPublishedFormulas(t *testing.T) {
	s := DefaultScenario()
	t.Run("Korthikanti 72Bslh^2(1+s/6h+V/12lh) on gpt2", func(t *testing.T) {
		m := NewModel(load(t, "gpt2"))
		s := s
		s.Batch, s.Seq = 4, 1024
		st := analyze(t, m, Training, s, Naive)
		B, sl, l, h, V := 4.0, 1024.0, 12.0, 768.0, 50257.0
		want := 72 * B * sl * l * h * h * (1 + sl/(6*h) + V/(12*l*h))
		within(t, "F_tensorcore", st.Cost.FTensorcore, want, 0.01)
	})
	t.Run("PaLM 6N + 12LHQT on Llama-3.1-8B", func(t *testing.T) {
		m := NewModel(load(t, "Llama-3.1-8B"))
		s := s
		s.Batch, s.Seq = 1, 4096
		st := analyze(t, m, Training, s, Naive)
		// N without the input embedding: a gather, not a matmul (the tied case counts it once as lm_head)
		N := float64(m.TotalParams - m.Params[CatEmbedding])
		T := 4096.0
		want := (6*N + 12*32*32*128*T) * T
		within(t, "F_theory", st.Cost.FTensorcore, want, 0.01)
		within(t, "6N dominates", st.Cost.FTheory, want, 0.01)
	})
	t.Run("NVIDIA dgxc recipe Llama-3.1-70B s=8192: 3.94e15 per sequence", func(t *testing.T) {
		m := NewModel(load(t, "Llama-3.1-70B-Instruct"))
		s := s
		s.Batch, s.Seq = 1, 8192
		st := analyze(t, m, Training, s, Naive)
		sl, l, h, g, a, F, V := 8192.0, 80.0, 8192.0, 8.0, 64.0, 28672.0, 128256.0
		want := sl * (12*l*h*h*(1+g/a+sl/h) + 18*l*F*h + 6*V*h)
		within(t, "recipe formula", want, 3.94e15, 0.005)
		within(t, "F_tensorcore", st.Cost.FTensorcore, want, 0.01)
	})
}

func TestKVCachePerToken(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes float64
	}{
		{"Llama-3.1-8B", 131_072}, // 2·32·8·128·2
		{"Llama-3.1-70B-Instruct", 327_680},
		{"Mixtral-8x7B-v0.1", 131_072},
		{"Qwen2.5-7B", 57_344},
		{"DeepSeek-V3", 61 * 576 * 2}, // MLA: 576 elements per layer, no K/V factor 2
	} {
		fp := NewModel(load(t, c.name)).Fingerprint
		if got := float64(fp.CKV*fp.Layers) * 2; got != c.bytes {
			t.Errorf("%s KV bytes/token bf16 = %g, want %g", c.name, got, c.bytes)
		}
	}
	if fp := NewModel(load(t, "DeepSeek-V3")).Fingerprint; fp.CKV != 576 || fp.Attention != "MLA" {
		t.Errorf("DeepSeek-V3 C_kv %d attention %s", fp.CKV, fp.Attention)
	}
}

func TestActiveParameters(t *testing.T) {
	mix := NewModel(load(t, "Mixtral-8x7B-v0.1"))
	within(t, "Mixtral-8x7B active", mix.Active, 12.9e9, 0.01)
	ds := NewModel(load(t, "DeepSeek-V3"))
	within(t, "DeepSeek-V3 active (tech report: 37B)", ds.Active, 37e9, 0.02)
	var sum int64
	for _, n := range ds.Params {
		sum += n
	}
	if sum != ds.TotalParams {
		t.Errorf("categories sum to %d, total %d", sum, ds.TotalParams)
	}
	if ds.Params[CatRoutedExperts] != 58*256*3*7168*2048 || ds.Params[CatSharedExperts] != 58*3*7168*2048 {
		t.Errorf("expert categories: %+v", ds.Params)
	}
}

func TestFingerprints(t *testing.T) {
	cases := []struct {
		name, attention, pos, norm string
		moe, tied                  bool
		window                     int64
	}{
		{"Llama-3.1-8B", "GQA", "RoPE (scaled: llama3)", "RMSNorm", false, false, 0},
		{"Llama-3.2-1B-Instruct", "GQA", "RoPE (scaled: llama3)", "RMSNorm", false, true, 0},
		{"Mistral-7B-v0.1", "GQA", "RoPE", "RMSNorm", false, false, 4096},
		{"Mixtral-8x7B-v0.1", "GQA", "RoPE", "RMSNorm", true, false, 0},
		{"Qwen2.5-7B", "GQA", "RoPE", "RMSNorm", false, false, 0},
		{"gpt2", "MHA", "learned absolute", "LayerNorm", false, true, 0},
		{"DeepSeek-V3", "MLA", "RoPE (scaled: yarn)", "RMSNorm", true, false, 0},
	}
	for _, c := range cases {
		fp := NewModel(load(t, c.name)).Fingerprint
		if fp.Attention != c.attention || fp.PositionEncoding != c.pos || fp.Normalization != c.norm ||
			(fp.MoE != nil) != c.moe || fp.TiedEmbeddings != c.tied || fp.SlidingWindow != c.window {
			t.Errorf("%s: %+v", c.name, fp)
		}
	}
	ds := NewModel(load(t, "DeepSeek-V3")).Fingerprint
	if m := ds.MoE; m.RoutedExperts != 256 || m.TopK != 8 || m.SharedExperts != 1 || m.DenseFirst != 3 || m.MoELayers != 58 {
		t.Errorf("DeepSeek MoE %+v", m)
	}
}

func TestPlainSequentialGetsAModel(t *testing.T) {
	d, err := ingest.ReadFile("../schemas/testdata/valid/mlp_stats.json", ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(d)
	if m.Fingerprint.Transformer {
		t.Fatal("an MLP is not a transformer")
	}
	s := DefaultScenario()
	s.Batch, s.Seq = 3, 5
	st := analyze(t, m, Prefill, s, Naive)
	// Linear(4,8) and Linear(8,2) on 15 tokens
	within(t, "F_tensorcore", st.Cost.FTensorcore, 2*15*(4*8+8*2), 1e-12)
	if st.Cost.BytesKV != 0 {
		t.Error("an MLP has no KV cache")
	}
}

// Invariants: F_theory does not change with the exec profile; module costs sum to the step;
// the compulsory floor holds unless flagged.
func TestInvariants(t *testing.T) {
	tg := target(t, "H200", "bf16")
	for _, name := range []string{"DeepSeek-V3", "Mixtral-8x7B-v0.1", "Llama-3.1-8B", "gpt2"} {
		m := NewModel(load(t, name))
		for _, ph := range Phases {
			for _, s := range []Scenario{DefaultScenario(), func() Scenario {
				s := DefaultScenario()
				s.Batch, s.Seq, s.KVLen, s.TP, s.EP = 16, 512, 4096, 2, 4
				return s
			}()} {
				n := analyze(t, m, ph, s, Naive)
				e := analyze(t, m, ph, s, Efficient)
				if n.Cost.FTheory != e.Cost.FTheory || n.Cost.FTensorcore != e.Cost.FTensorcore {
					t.Errorf("%s %s: F_theory changes with profile: %g vs %g", name, ph, n.Cost.FTheory, e.Cost.FTheory)
				}
				var sum Cost
				for _, mc := range n.Modules {
					sum = sum.Add(mc.Cost)
				}
				for _, term := range n.Terms {
					if term.Name == "optimizer" || term.Name == "network" {
						sum = sum.Add(term.Cost)
					}
				}
				within(t, name+" modules sum to the step", sum.BytesHBM(), n.Cost.BytesHBM(), 1e-9)
				within(t, name+" modules sum to the step F", sum.FTheory, n.Cost.FTheory, 1e-9)
				tree := ModuleTree(n.Modules)
				within(t, name+" tree root", tree[""].FTheory+termF(n, "optimizer"), n.Cost.FTheory, 1e-9)
				rn, re := Evaluate(n, tg), Evaluate(e, tg)
				if rn.Timing.BelowFloor {
					t.Errorf("%s %s naive (WRF=1) is below the floor: %s", name, ph, rn.Timing.FloorNote)
				}
				if name == "DeepSeek-V3" && !re.Timing.BelowFloor {
					t.Errorf("%s %s efficient WRF=4/2 streams less than the weights: must be flagged", name, ph)
				}
				// the floor is enforced: a below-floor profile predicts no faster than naive's
				// bytes allow, and never faster than the ideal roofline
				for _, r := range []Result{rn, re} {
					if r.Timing.TEst < r.Timing.TRoofline*(1-1e-12) {
						t.Errorf("%s %s %s: T_est %g faster than the roofline %g", name, ph, r.Step.Profile, r.Timing.TEst, r.Timing.TRoofline)
					}
				}
				if re.Timing.BelowFloor && re.Timing.Regime == "hbm-bound" && re.Timing.TKnob >= re.Timing.TEst {
					t.Errorf("%s %s: the knob's claim %g should be below the floored prediction %g", name, ph, re.Timing.TKnob, re.Timing.TEst)
				}
			}
		}
	}
}

func termF(st Step, name string) float64 {
	for _, t := range st.Terms {
		if t.Name == name {
			return t.Cost.FTheory
		}
	}
	return 0
}

// Weights that fit on chip have no compulsory weight traffic: a tiny model on an H200 (50 MiB L2).
func TestOnChipWeightsHaveNoFloor(t *testing.T) {
	d, _ := ingest.ReadFile("../schemas/testdata/valid/mlp_stats.json", ingest.Options{})
	m := NewModel(d)
	tg := target(t, "H200", "bf16")
	st := analyze(t, m, Decode, DefaultScenario(), Efficient)
	r := Evaluate(st, tg)
	if r.Timing.BelowFloor || r.Timing.FloorBytes != 0 {
		t.Errorf("on-chip weights flagged: %+v", r.Timing)
	}
}

func TestMoEDistinctExperts(t *testing.T) {
	within(t, "one token touches k experts", DistinctExperts(256, 8, 1), 8, 1e-12)
	within(t, "many tokens touch all", DistinctExperts(256, 8, 10000), 256, 1e-9)
	within(t, "uniform routing formula", DistinctExperts(8, 2, 3), 8*(1-math.Pow(0.75, 3)), 1e-12)
	m := NewModel(load(t, "Mixtral-8x7B-v0.1"))
	s := DefaultScenario()
	s.Batch = 1
	one := analyze(t, m, Decode, s, Naive).ByCat[string(CatRoutedExperts)]
	s.Batch = 64
	many := analyze(t, m, Decode, s, Naive).ByCat[string(CatRoutedExperts)]
	per := float64(m.Params[CatRoutedExperts]) / 8 * 2 // one expert's bytes, bf16
	within(t, "B=1 reads top_k experts", one.BytesWeights, 2*per, 1e-9)
	within(t, "B=64 reads nearly all 8", many.BytesWeights, DistinctExperts(8, 2, 64)*per, 1e-9)
}

func TestParallelismDividesWorkAndAddsNetwork(t *testing.T) {
	m := NewModel(load(t, "Mixtral-8x7B-v0.1"))
	s := DefaultScenario()
	s.Batch, s.Seq = 4, 1024
	one := analyze(t, m, Prefill, s, Naive)
	if one.Cost.BytesNet != 0 {
		t.Error("one GPU moves no network bytes")
	}
	s.TP = 2
	tp := analyze(t, m, Prefill, s, Naive)
	within(t, "TP=2 halves GEMM FLOPs", tp.Cost.FTensorcore, one.Cost.FTensorcore/2, 0.01)
	// two all-reduces per layer, ring 2(TP-1)/TP of T*H*A each
	within(t, "TP all-reduce bytes", tp.Cost.BytesNet, 32*2*1*4096*4096*2, 1e-9)
	s.TP, s.EP = 1, 4
	ep := analyze(t, m, Prefill, s, Naive)
	within(t, "EP dispatch+combine bytes", ep.Cost.BytesNet, 32*2*4096*2*4096*2*0.75, 1e-9)
	within(t, "EP holds E/EP experts' weights", ep.ByCat[string(CatRoutedExperts)].BytesWeights,
		one.ByCat[string(CatRoutedExperts)].BytesWeights/4, 0.01)
}

func TestTrainingTermsAreVisible(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	s := DefaultScenario()
	s.Batch, s.Seq = 1, 2048
	st := analyze(t, m, Training, s, Naive)
	names := []string{}
	for _, term := range st.Terms {
		names = append(names, term.Name)
	}
	if strings.Join(names, ",") != "forward,backward,optimizer" {
		t.Fatalf("terms %v", names)
	}
	fwd, bwd, opt := st.Terms[0].Cost, st.Terms[1].Cost, st.Terms[2].Cost
	within(t, "backward GEMMs = 2x forward", bwd.FTensorcore, 2*fwd.FTensorcore, 1e-9)
	// Adam mixed precision: read grads (2) and master/m/v (12), write master/m/v (12) and weights (2)
	within(t, "optimizer bytes", opt.BytesWeights, float64(m.TotalParams)*28, 1e-9)
	s.Recompute = "full"
	re := analyze(t, m, Training, s, Naive)
	within(t, "full recompute adds a forward's executed FLOPs", re.Cost.FExecuted, st.Cost.FExecuted+fwd.FExecuted, 1e-9)
	if re.Cost.FTheory != st.Cost.FTheory {
		t.Error("recompute must not change model FLOPs")
	}
	s.Recompute, s.SeedTraining = "none", true
	seed := analyze(t, m, Training, s, Naive)
	pre := analyze(t, m, Prefill, s, Naive)
	within(t, "seed compatibility: 3x prefill FLOPs", seed.Cost.FTheory, 3*pre.Cost.FTheory, 1e-12)
	within(t, "seed compatibility: 2x prefill bytes", seed.Cost.BytesHBM(), 2*pre.Cost.BytesHBM(), 1e-12)
}

func TestSlidingWindowCapsDecodeKV(t *testing.T) {
	m := NewModel(load(t, "Mistral-7B-v0.1"))
	s := DefaultScenario()
	s.Batch, s.KVLen = 1, 32768
	st := analyze(t, m, Decode, s, Naive)
	// 32 layers x (window 4096 read + 1 written) x 2*8*128 elements x 2 bytes
	within(t, "KV bytes", st.Cost.BytesKV, 32*(4096+1)*2*8*128*2, 1e-12)
}

func TestTimeModelAndKnee(t *testing.T) {
	h200, _ := chips.Default().Lookup("H200")
	tg, _ := NewTarget(h200, "fp8", nil) // the ideal roofline alone
	within(t, "OI_knee", tg.Knee, 1978.9e12/4.8e12, 1e-12)
	// a cost exactly at the ridge is compute- and HBM-bound at once
	c := Cost{FTheory: 1e12, FTensorcore: 1e12, FExecuted: 1e12, BytesWeights: 1e12 / tg.Knee}
	tm := Time(c, nil, tg, 1, false)
	within(t, "T_comp = T_hbm at the ridge", tm.TComp, tm.THBM, 1e-12)
	within(t, "AI_hbm", tm.AIHBM, tg.Knee, 1e-12)
	within(t, "MFU", tm.MFU, 1, 1e-12)
}

func TestProfilesFromFile(t *testing.T) {
	ps, err := ParseProfiles("p.json", strings.NewReader(`[{"name":"tuned","attention_bytes":"flash","wrf_attn":1,"wrf_dense":1,"wrf_moe":1,"act_fusion":0.6,"elementwise":0.5}]`))
	if err != nil || len(ps) != 1 || ps[0].ActFusion != 0.6 {
		t.Fatal(ps, err)
	}
	if _, err := ParseProfiles("bad.json", strings.NewReader(`{"name":"x","attention_bytes":"fast","wrf_attn":1,"wrf_dense":1,"wrf_moe":1,"act_fusion":1,"elementwise":1}`)); err == nil ||
		!strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("bad profile: %v", err)
	}
}

// transformer-roofline-analyzer's output for Llama-4-Scout (../shared/seeds/002): one query
// with 1,048,576 cached tokens and 1 input token, bf16.
func TestOperatorsMatchRooflineAnalyzer(t *testing.T) {
	m := NewModel(load(t, "Llama-4-Scout-17B-16E-Instruct"))
	tab, err := m.Operators([]Query{{Cached: 1048576, Input: 1}}, 2, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var qkv *OperatorRow
	for i := range tab.Rows {
		if tab.Rows[i].Operator == "Attn - QKV_Proj" {
			qkv = &tab.Rows[i]
		}
	}
	if qkv == nil {
		t.Fatalf("no QKV row: %+v", tab.Rows)
	}
	if qkv.Blocks != 48 || qkv.TotalBlocks != 48 {
		t.Errorf("blocks %d / %d", qkv.Blocks, qkv.TotalBlocks)
	}
	within(t, "QKV FLOPs (73.39 MFLOPs)", qkv.FLOPs, 73.39e6, 0.0005)
	within(t, "QKV weights (70.00 MiB)", qkv.WeightBytes, 70*(1<<20), 1e-9)
	within(t, "QKV input (10.00 KiB)", qkv.InputBytes, 10*1024, 1e-9)
	within(t, "QKV output (14.00 KiB)", qkv.OutputBytes, 14*1024, 1e-9)
	// The reference tool stores 192.00 GiB of KV: all 48 layers x 1,048,577 tokens. Scout's
	// chunked-attention layers (3 of 4) keep only attention_chunk_size = 8192 tokens, so mrep
	// stores 12 full layers and 36 chunks.
	kvTok := float64(m.Fingerprint.CKV) * 2
	within(t, "KV cache storage, chunked layers capped", tab.StorageKV, 12*1048577*kvTok+36*8192*kvTok, 1e-9)
	within(t, "the reference's figure without the cap", 48*1048577*kvTok, 192*(1<<30), 0.0001)
	// The reference tool's "minimum storage" weights (28.13 GiB) are the weights one token
	// reads; every expert must be resident, so mrep stores all of them.
	within(t, "blocks' weight bytes (28.13 GiB)", tab.Blocks.WeightBytes, 28.13*(1<<30), 0.001)
	within(t, "plus embedding row and LM head", tab.ActiveWeight-tab.Blocks.WeightBytes, 202048*5120*2+5120*2*2, 0.001)
	within(t, "all weights resident", tab.StorageW, float64(m.TotalParams)*2, 0.001)

	two, err := m.Operators([]Query{{Cached: 1048576, Input: 1}, {Cached: 1024, Input: 1}}, 2, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "a second query adds its own KV", two.StorageKV-tab.StorageKV, 1025*kvTok*48, 1e-9)
	if _, err := m.Operators([]Query{{Cached: 5, Input: 0}}, 2, 2, 2); err == nil {
		t.Error("zero input tokens accepted")
	}
}

// Experts held as one fused tensor and experts as E separate Linear modules (older transformers
// and most training codebases) cost the same: same FLOPs, same bytes, same categories.
func TestFusedAndSeparateExpertsCostTheSame(t *testing.T) {
	fused := load(t, "Mixtral-8x7B-v0.1")
	sep := *fused
	sep.Modules = nil
	for _, m := range fused.Modules {
		if !strings.HasSuffix(m.Name, ".experts") {
			sep.Modules = append(sep.Modules, m)
			continue
		}
		parent := m.Name
		sep.Modules = append(sep.Modules, model.Module{Name: m.Name, Class: "ModuleList", PyModule: "torch.nn", Parent: m.Parent,
			Params: []model.Param{}, Buffers: []model.Buffer{}})
		gateUp, down := m.Params[0], m.Params[1] // [E, 2F, H], [E, H, F]
		E, F2, H := gateUp.Shape[0], gateUp.Shape[1], gateUp.Shape[2]
		for e := int64(0); e < E; e++ {
			en := parent + "." + fmt.Sprint(e)
			sep.Modules = append(sep.Modules, model.Module{Name: en, Class: "MixtralBlockSparseTop2MLP", PyModule: "x", Parent: &parent,
				Params: []model.Param{}, Buffers: []model.Buffer{}})
			lin := func(name string, out, in int64) model.Module {
				return model.Module{Name: en + "." + name, Class: "Linear", PyModule: "torch.nn", Parent: &en, Buffers: []model.Buffer{},
					Params: []model.Param{{Tensor: model.Tensor{Name: "weight", Shape: []int64{out, in}, DType: "bfloat16", Numel: out * in, Device: "meta"}, RequiresGrad: true}}}
			}
			sep.Modules = append(sep.Modules, lin("w1", F2/2, H), lin("w3", F2/2, H), lin("w2", H, down.Shape[2]))
		}
	}
	mf, ms := NewModel(fused), NewModel(&sep)
	if mf.TotalParams != ms.TotalParams || mf.Params[CatRoutedExperts] != ms.Params[CatRoutedExperts] {
		t.Fatalf("params: fused %d/%d, separate %d/%d", mf.TotalParams, mf.Params[CatRoutedExperts], ms.TotalParams, ms.Params[CatRoutedExperts])
	}
	s := DefaultScenario()
	for _, b := range []int64{1, 8, 256} {
		s.Batch = b
		for _, ph := range Phases {
			f := analyze(t, mf, ph, s, Naive).ByCat[string(CatRoutedExperts)]
			g := analyze(t, ms, ph, s, Naive).ByCat[string(CatRoutedExperts)]
			within(t, fmt.Sprintf("%s B=%d expert GEMM FLOPs", ph, b), g.FTensorcore, f.FTensorcore, 1e-9)
			within(t, fmt.Sprintf("%s B=%d expert weight bytes", ph, b), g.BytesWeights, f.BytesWeights, 1e-9)
		}
	}
}

// A later chunk of a chunked prefill attends over the prompt's cached chunks: Llama-3.1-8B's
// second 8,192-token chunk of a 16,384-token prompt executes, by hand, 8,192 x (8,192 + 8,193/2)
// query-key pairs per head and layer (the whole prefix, then its own chunk causally), and reads
// the prefix's K and V from the cache; with the first chunk, the whole prompt's causal work.
func TestChunkAfterCachedPrefix(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	s := DefaultScenario()
	s.Batch, s.Seq = 1, 8192
	first, err := m.AnalyzeTotals(Prefill, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	s.Prefix = 8192
	second, err := m.AnalyzeTotals(Prefill, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	whole := s
	whole.Seq, whole.Prefix = 16384, 0
	all, err := m.AnalyzeTotals(Prefill, whole, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	q, p := 8192.0, 8192.0
	testutil.Near(t, "second chunk's causal attention over its prefix", second.FAttnCausal/first.FAttnCausal, (q*(p+(q+1)/2))/(q*(q+1)/2), 1e-9)
	testutil.Near(t, "two chunks' attention against the whole prompt's", first.FAttnCausal+second.FAttnCausal, all.FAttnCausal, 1e-9)
	var kv1, kv2 float64
	for _, k := range first.Kernels {
		if k.Kind == kernels.Attention {
			kv1 += k.Bytes
		}
	}
	for _, k := range second.Kernels {
		if k.Kind == kernels.Attention {
			kv2 += k.Bytes
		}
	}
	// the prefix's K and V: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes per token
	testutil.Near(t, "the cached prefix read", kv2-kv1, 8192*32*8*128*2*2, 1e-9)
	s.Prefix = -1
	if err := s.Validate(); err == nil {
		t.Error("a negative prefix must be refused")
	}
}
