package layout

import (
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/internal/testutil"
)

// Llama-3.1-8B serving B=4 sequences of L=1000 tokens in bf16 on one GPU, by hand: 16-bit
// weights of every parameter; the KV cache is 2 (K, V) x 8 KV heads x 128 x 32 layers x 2 B =
// 131,072 B per token; a prefill step of 4 x 512 tokens holds the residual stream, the normed
// input and the gated MLP's 2 x 14,336 wide projection, and the last positions' fp32 logits.
func TestInferenceMemoryByHand(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 4, 512, 1000
	mem := InferenceMemory(m, s, 1, 0)
	testutil.Near(t, "weights", mem.Weights, 2*float64(m.TotalParams), 1e-12)
	testutil.Near(t, "KV", mem.KV, 4*1000*131072, 1e-12)
	testutil.Near(t, "activations", mem.Activations, 4*512*(2*4096+2*14336)*2, 1e-12)
	testutil.Near(t, "logits", mem.Logits, 4*4*128256, 1e-12)
	testutil.Near(t, "total", mem.Total, mem.Weights+mem.KV+mem.Activations+mem.Logits, 1e-12)
	if mem.Gradients != 0 || mem.Optimizer != 0 {
		t.Errorf("inference keeps no gradients or optimizer state: %+v", mem)
	}
	// TP2 x PP2 halves the weights twice, PP halves each GPU's KV (its stage's layers)
	s.TP = 2
	split := InferenceMemory(m, s, 2, 0)
	testutil.Near(t, "KV per GPU at TP2 PP2", split.KV, mem.KV/4, 1e-12)
}

// The KV capacity a serving engine sizes and the memory verdict are one model: at the capacity
// with the whole remainder given to KV, weights + KV + reserve is exactly the GPU's memory.
func TestKVCapacityIsTheMemoryModelsRemainder(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	const mem, reserve = 80 << 30, 3 << 30
	for _, pp := range []int64{1, 2, 4} {
		n := KVTokens(m, s, pp, mem, reserve, 1, OfFree)
		s.Batch, s.KVLen, s.Seq = 1, int64(n), 1
		got := InferenceMemory(m, s, pp, reserve)
		testutil.Near(t, "weights + KV + reserve at capacity", got.Weights+got.KV+got.Margin, mem, 1e-5) // the capacity rounded down to whole tokens
		if f := Check("x", got, mem); f.Fits {
			t.Errorf("PP%d: a step's activations on top of a full cache cannot fit: %s", pp, f.Verdict())
		}
		if KVTokens(m, s, pp, mem, reserve, 0.9, OfFree) >= n {
			t.Error("a smaller KV fraction must hold fewer tokens")
		}
	}
	if KVTokens(m, s, 1, 1<<30, 0, 0.9, OfFree) != 0 {
		t.Error("no memory left after the weights: no KV tokens")
	}
}

// The engines read their memory fraction differently (issue 32/35): by hand for Llama-3.1-8B
// (16.06 GB of bf16 weights, 131,072 B of KV per token) on an 80 GiB GPU with a 3 GiB reserve at
// 0.9: TensorRT-LLM gives 0.9 x (80 GiB - W - 3 GiB) to KV, vLLM 0.9 x 80 GiB - W - 3 GiB,
// SGLang 0.9 x 80 GiB - W.
func TestKVFractionAsEachEngineReadsIt(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	const gib = 1 << 30
	mem, reserve := 80.0*gib, 3.0*gib
	w := 2 * float64(m.TotalParams)
	per := m.KVBytesPerToken(s)
	testutil.Near(t, "KV bytes per token", per, 131072, 0)
	for of, want := range map[string]float64{OfFree: 0.9 * (mem - w - reserve), OfTotal: 0.9*mem - w - reserve, OfStatic: 0.9*mem - w} {
		testutil.Near(t, "KV tokens ("+of+")", KVTokens(m, s, 1, mem, reserve, 0.9, of), want/per, 1e-12)
	}
	if !(KVTokens(m, s, 1, mem, reserve, 0.9, OfTotal) < KVTokens(m, s, 1, mem, reserve, 0.9, OfFree)) {
		t.Error("vLLM's fraction of the whole GPU must leave less KV than TensorRT-LLM's of the free memory")
	}
}

// A verdict names what it is about, says fits or does NOT fit, and lists the terms it adds up.
func TestFitVerdict(t *testing.T) {
	mem := Memory{Weights: 10 << 30, KV: 5 << 30, Total: 15 << 30}
	f := Check("inference (B=1)", mem, 16<<30)
	if !f.Fits || !strings.Contains(f.Verdict(), "inference (B=1) fits, 15.0 GiB of 16.0 GiB per GPU (weights 10.0, KV cache 5.0 GiB; headroom 1.0 GiB)") {
		t.Errorf("verdict: %s", f.Verdict())
	}
	f = Check("training", mem, 10<<30)
	if f.Fits || !strings.Contains(f.Verdict(), "does NOT fit") || !strings.Contains(f.Verdict(), "1.50x the memory") {
		t.Errorf("verdict: %s", f.Verdict())
	}
	// a training total within the measured uncertainty of the capacity, either side, is tight
	for _, capacity := range []float64{14 << 30, 16 << 30} {
		f = CheckTraining("training", mem, capacity)
		if f.Status != Tight || !f.Fits || !strings.Contains(f.Verdict(), "is tight") || !strings.Contains(f.Verdict(), "±12% measured uncertainty") {
			t.Errorf("15 GiB on %.0f GiB: %s", capacity/(1<<30), f.Verdict())
		}
	}
	if f = CheckTraining("training", mem, 13<<30); f.Status != NoFit {
		t.Errorf("15 GiB on 13 GiB is beyond the uncertainty: %s", f.Verdict())
	}
	if f = CheckTraining("training", mem, 17<<30); f.Status != Fits {
		t.Errorf("15 GiB on 17 GiB: %s", f.Verdict())
	}
}

// The scenario's implied layout is one stage with experts over EP data-parallel ranks, and it
// validates for a MoE model (the analyzer's EP means DP = EP).
func TestScenarioLayoutValidates(t *testing.T) {
	m := zooModel(t, "Mixtral-8x7B-v0.1")
	s := analyzer.DefaultScenario()
	s.EP, s.Batch, s.GradAccum = 2, 4, 3
	l := ScenarioLayout(s)
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	if l.DP != 2 || l.GA() != 3 || l.MBS != 4 {
		t.Errorf("layout %+v", l)
	}
}
