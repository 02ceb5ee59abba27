package serve

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/internal/testutil/bundled"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

func model(t testing.TB, name string) *analyzer.Model {
	t.Helper()
	return analyzer.NewModel(bundled.Dump(t, name))
}

// KV capacity by hand: Llama-3.1-8B in FP8 on one 80 GiB H100 keeps 32 layers x 8 KV heads x
// 128 x 2 (K, V) x 1 byte = 65,536 B per token; DeepSeek-V3's MLA keeps its 576-element latent
// per layer, 61 x 576 x 1 B = 35,136 B per token, replicated on every TP rank.
func TestKVCapacity(t *testing.T) {
	e := DefaultEngine()
	m := model(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	testutil.Near(t, "8B KV per token", m.KVBytesPerToken(s), 65536, 0)
	mem := 80.0 * (1 << 30)
	weights := float64(m.TotalParams) * 1
	testutil.Near(t, "8B KV tokens", KVTokens(m, s, mem, e), 0.9*(mem-weights-e.ReserveBytes)/65536, 1e-12)
	ds := model(t, "DeepSeek-V3")
	s.TP = 8
	testutil.Near(t, "DeepSeek-V3 KV per token", ds.KVBytesPerToken(s), 61*576, 0)
	// paged: a 2,000 + 500-token sequence holds 79 blocks of 32 tokens (2,528), not 2,500
	s.TP = 1
	maxKV, _, _ := Capacity(m, s, mem, 2000, 500, e)
	testutil.Near(t, "8B sequences in 32-token blocks", maxKV, math.Floor(KVTokens(m, s, mem, e)/2528), 0)
	e.KVBlock = 0
	maxKV, _, _ = Capacity(m, s, mem, 2000, 500, e)
	testutil.Near(t, "8B sequences, contiguous", maxKV, math.Floor(KVTokens(m, s, mem, e)/2500), 0)
}

// More KV memory never lowers throughput; the steady state obeys Little's law: concurrency =
// completion rate x the time a sequence spends decoding.
func TestOfflineSteadyState(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "fp8")
	prev := 0.0
	for _, gib := range []float64{24, 40, 80, 141} {
		r, err := Offline(m, s, tm, gib*(1<<30), 1000, 1000, DefaultEngine())
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputTokS < prev*(1-1e-9) {
			t.Errorf("%g GiB: %g tok/s below the smaller memory's %g", gib, r.OutputTokS, prev)
		}
		prev = r.OutputTokS
		if r.OutputTokS > r.RooflineTokS {
			t.Errorf("beyond the roofline")
		}
		// Little: D sequences each decoding for (osl-1) steps of StepTime
		rate := r.OutputTokS / 1000
		testutil.Near(t, "Little's law", r.Concurrency, rate*999*r.StepTime, 1e-9)
	}
	if _, err := Offline(m, s, tm, 80*(1<<30), 0, 10, DefaultEngine()); err == nil {
		t.Error("isl 0 must be refused")
	}
}

// A step that prefills a short chunk beside a large decode batch runs each MoE layer's grouped
// expert GEMM once over both token sets: the experts' weights are read once, so the mixed
// step's expert bytes are the decode step's plus only the chunk's activations, and the step
// costs far less than the decode step and a separate chunk (which reads every expert again).
func TestMixedStepReadsExpertsOnce(t *testing.T) {
	m := model(t, "Mixtral-8x7B-v0.1")
	s := analyzer.DefaultScenario()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "fp8")
	expertBytes := func(ks []kernels.Kernel) (bytes, weights float64) {
		for _, k := range ks {
			if k.Kind == kernels.GEMM && k.Groups > 0 && k.Category == string(analyzer.CatRoutedExperts) {
				bytes += k.Bytes
				weights += k.Count * k.Groups * k.N * k.K * s.WeightBytes
			}
		}
		return bytes, weights
	}
	dec, err := mixedKernels(m, s, 227, 1100, 0, 128)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := mixedKernels(m, s, 0, 0, 14, 128)
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := mixedKernels(m, s, 227, 1100, 14, 128)
	if err != nil {
		t.Fatal(err)
	}
	db, dw := expertBytes(dec)
	pb, pw := expertBytes(pre)
	mb, mw := expertBytes(mixed)
	if dw == 0 || pw == 0 {
		t.Fatal("no grouped expert GEMMs counted")
	}
	testutil.Near(t, "mixed expert weights", mw, dw, 1e-9) // 227 decode tokens touch all 8 experts
	testutil.Near(t, "mixed expert bytes", mb, db+pb-pw, 1e-9)
	alone := tm.Predict(dec).TEst + tm.Predict(pre).TEst
	if got := tm.Predict(mixed).TEst; got > 0.8*alone {
		t.Errorf("mixed step %.2f ms, decode + separate chunk %.2f ms: the experts' weights are read twice", got*1e3, alone*1e3)
	}
}

// The mean cached prefix of a chunked prompt, by hand: 20,000 tokens in chunks of 8,192 start
// after 0, 8,192 and 16,384 cached tokens, weighing 8,192, 8,192 and 3,616 tokens:
// (8,192 x 8,192 + 16,384 x 3,616) / 20,000 = 6,317.67; a prompt within one chunk has none.
func TestChunkPrefix(t *testing.T) {
	testutil.Near(t, "20k in 8k chunks", ChunkPrefix(20000, 8192), (8192.0*8192+16384*3616)/20000, 1e-12)
	if ChunkPrefix(4000, 8192) != 0 || ChunkPrefix(100, 0) != 0 {
		t.Error("a prompt within one chunk has no cached prefix")
	}
}
