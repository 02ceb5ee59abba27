package serve

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
	memory "github.com/mrep-dev/mrep/layout"
)

// trtllm-bench's engine limits by hand for Llama-3.1-8B FP8 on one H100: its KV estimate is
// 0.95 x (80 GiB - 8.03e9 weight bytes) / (2 x 32 layers x 8 KV heads x 128 x 1 B) / 2,176
// tokens = 518.8 requests, so max batch 640 (rounded up to 128s); tokens per step
// 518.8 x (1 + 128/2048) = 551 -> the 2,048 floor at 128/2048, 518.8 x 17 = 8,820 -> 9,216 at
// 2048/128.
func TestTRTLLMBenchLimits(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	chip, err := chips.Default().Lookup("H100")
	if err != nil {
		t.Fatal(err)
	}
	requests := 0.95 * (80*(1<<30) - float64(m.TotalParams)) / (2 * 32 * 8 * 128) / 2176
	if math.Abs(requests-518.8) > 0.5 {
		t.Fatalf("hand estimate %g requests", requests)
	}
	for _, c := range []struct {
		isl, osl         int64
		batch, maxTokens float64
	}{{128, 2048, 640, 2048}, {2048, 128, 640, 9216}} {
		r := BenchRun{ISL: c.isl, OSL: c.osl, TP: 1, WeightBytes: 1, KVBytes: 1, MemBytes: chip.MemoryBytes()}
		b, tok := trtllmBenchLimits(m, r)
		if b != c.batch || tok != c.maxTokens {
			t.Errorf("%d/%d: max batch %g, max tokens %g; want %g, %g", c.isl, c.osl, b, tok, c.batch, c.maxTokens)
		}
		// the preset carries the limits, the 95% KV fraction and one pipeline stage
		e := TRTLLMBench(m, r)
		if e.MaxBatch != c.batch || e.TokenBudget != c.maxTokens || e.KVFraction != 0.95 || e.PP != 1 {
			t.Errorf("%d/%d: preset %+v", c.isl, c.osl, e)
		}
	}
	// tuning.py sizes an unquantized model as 16-bit whatever its dtype: fp32 weights and KV
	// give bf16's limits, an unknown (0) precision too
	bf16 := BenchRun{ISL: 2048, OSL: 128, TP: 1, WeightBytes: 2, KVBytes: 2, MemBytes: chip.MemoryBytes()}
	fp32, unknown := bf16, bf16
	fp32.WeightBytes, fp32.KVBytes = 4, 4
	unknown.WeightBytes, unknown.KVBytes = 0, 0
	b16, t16 := trtllmBenchLimits(m, bf16)
	for _, r := range []BenchRun{fp32, unknown} {
		if b, tok := trtllmBenchLimits(m, r); b != b16 || tok != t16 {
			t.Errorf("%g-byte weights: %g, %g; want bf16's %g, %g", r.WeightBytes, b, tok, b16, t16)
		}
	}
}

// The engines' documented defaults: vLLM V1's 1024 sequences and 8192 tokens on large GPUs
// (256 and 2048 below 70 GiB) with 16-token blocks, SGLang's 16384-token chunks from 160 GiB,
// TensorRT-LLM's 2048 x 8192 with 32-token blocks; an unknown engine is refused by name.
func TestEnginePresets(t *testing.T) {
	v, err := EnginePreset("vllm", 80)
	if err != nil || v.MaxBatch != 1024 || v.TokenBudget != 8192 || v.KVBlock != 16 || v.KVFraction != 0.9 || v.Name != "vLLM" {
		t.Errorf("vllm on 80 GiB: %+v %v", v, err)
	}
	if s, _ := EnginePreset("vllm", 48); s.MaxBatch != 256 || s.TokenBudget != 2048 {
		t.Errorf("vllm on 48 GiB: %+v", s)
	}
	if g, _ := EnginePreset("sglang", 180); g.TokenBudget != 16384 {
		t.Errorf("sglang on 180 GiB: %+v", g)
	}
	if tr, _ := EnginePreset("trtllm", 80); tr.MaxBatch != 2048 || tr.KVBlock != 32 {
		t.Errorf("trtllm: %+v", tr)
	}
	// ATOM 0.1.5: 512 sequences, 16384 tokens, 0.9 of the GPU, 16-token blocks, graphs to 512,
	// prefill-only steps; it runs on AMD Instinct only
	if a, _ := EnginePreset("atom", 288); a.MaxBatch != 512 || a.TokenBudget != 16384 || a.KVFraction != 0.9 || a.KVFractionOf != memory.OfTotal ||
		a.KVBlock != 16 || a.GraphMaxTokens != 512 || !a.PrefillOnlySteps || a.Name != "ATOM" {
		t.Errorf("atom: %+v", a)
	}
	if err := EngineRunsOn("atom", "NVIDIA"); err == nil || EngineRunsOn("atom", "AMD") != nil {
		t.Errorf("ATOM on NVIDIA: %v", err)
	}
	if _, err := EnginePreset("tgi", 80); err == nil || !strings.Contains(err.Error(), "tgi") || !strings.Contains(err.Error(), "atom") {
		t.Errorf("unknown engine: %v", err)
	}
}

// vLLM captures decode batches up to min(2 x max_num_seqs, 512) in CUDA graphs; a decode batch
// beyond it launches every kernel from the host again, so its step costs at least as much as
// the graphed one and the launches show; at or below it nothing changes.
func TestVLLMEagerBeyondCUDAGraphs(t *testing.T) {
	v, _ := EnginePreset("vllm", 80)
	if v.GraphMaxTokens != 512 {
		t.Fatalf("vLLM's capture size: %g, want 512", v.GraphMaxTokens)
	}
	if small, _ := EnginePreset("vllm", 48); small.GraphMaxTokens != 512 {
		t.Errorf("256 sequences: capture size %g, want min(512, 512)", small.GraphMaxTokens)
	}
	r := replica(t, model(t, "Llama-3.1-8B"), "H100", 1)
	graphed := v
	graphed.GraphMaxTokens = 0
	for _, d := range []float64{256, 768} {
		a, err := specStep(r.Model, r.Scenario, r.Pred, graphed, d, 1500, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		b, err := specStep(r.Model, r.Scenario, r.Pred, v, d, 1500, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case d <= 512 && b.TEst != a.TEst:
			t.Errorf("batch %g within the graphs: %g vs %g", d, b.TEst, a.TEst)
		case d > 512 && !(b.TEst > a.TEst && b.TLatency > a.TLatency):
			t.Errorf("batch %g beyond the graphs: eager %g (launches %g), graphed %g (%g)", d, b.TEst, b.TLatency, a.TEst, a.TLatency)
		}
	}
}

// SGLang derives its KV share and CUDA-graph size from the layout it starts with
// (server_args.py _handle_gpu_memory_settings, 0.5.x), by hand: on an 80 GiB H100 at TP8 it
// reserves 512 + 1.5 x 8192 + 2 x 512 + 1024 x 8/8 = 14,848 MiB, so mem_fraction_static is
// 1 - 14848/81920 = 0.819; at TP2 the graphs stop at 256 (1 - 13568/81920 = 0.834);
// a 180 GiB B200 at TP8 chunks 16,384 tokens (1 - 27136/184320 = 0.853); DP attention over 8
// groups on a 141 GiB H200 adds 3 x 512 x 8 + 1.5 x 512 x 8 MiB (1 - 33280/144384 = 0.770).
// A stated share is kept; other engines do not change with the layout.
func TestSGLangDefaultsPerLayout(t *testing.T) {
	for _, tc := range []struct {
		mem        float64
		tp, pp, dp int64
		kv, graph  float64
		budget     float64
	}{
		{80, 8, 1, 1, 0.819, 512, 8192},
		{80, 2, 1, 1, 0.834, 256, 8192},
		{180, 8, 1, 1, 0.853, 512, 16384},
		{141, 8, 1, 8, 0.770, 512, 8192 / 8}, // chunked_prefill_size / dp with DP attention
		{48, 1, 1, 1, 1 - (512+1.5*4096+2*32+128)/(48*1024.0), 32, 4096},
	} {
		e, err := EnginePreset("sglang", tc.mem)
		if err != nil {
			t.Fatal(err)
		}
		got := e.ForLayout(tc.tp, tc.pp, tc.dp)
		if math.Abs(got.KVFraction-tc.kv) > 0.0006 || got.GraphMaxTokens != tc.graph || got.TokenBudget != tc.budget || got.KVFractionOf != memory.OfStatic {
			t.Errorf("%g GiB TP%d PP%d DP%d: mem_fraction_static %g, cuda_graph_max_bs %g, chunk %g; want %.3f, %g, %g",
				tc.mem, tc.tp, tc.pp, tc.dp, got.KVFraction, got.GraphMaxTokens, got.TokenBudget, tc.kv, tc.graph, tc.budget)
		}
	}
	e, _ := EnginePreset("sglang", 80)
	e.KVFraction, e.AutoKVFraction = 0.7, false
	if got := e.ForLayout(8, 1, 1); got.KVFraction != 0.7 || got.GraphMaxTokens != 512 {
		t.Errorf("a stated share must be kept: %g, graphs %g", got.KVFraction, got.GraphMaxTokens)
	}
	v, _ := EnginePreset("vllm", 80)
	if got := v.ForLayout(8, 2, 4); !reflect.DeepEqual(got, v) {
		t.Errorf("vLLM's defaults do not depend on the layout: %+v", got)
	}
}

// Engine-chip pairs that exist, and the ones that do not (TensorRT-LLM on AMD, SGLang on TPUs).
func TestEngineRunsOn(t *testing.T) {
	for _, c := range []struct {
		engine, vendor string
		ok             bool
	}{{"trtllm", "NVIDIA", true}, {"trtllm", "AMD", false}, {"sglang", "AMD", true}, {"sglang", "Google", false},
		{"vllm", "Google", true}, {"vllm", "Intel", true}, {"", "Google", true}} {
		err := EngineRunsOn(c.engine, c.vendor)
		if (err == nil) != c.ok {
			t.Errorf("%s on %s: %v, want ok=%v", c.engine, c.vendor, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), c.vendor) {
			t.Errorf("the refusal must name the vendor: %v", err)
		}
	}
}
