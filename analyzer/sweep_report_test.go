package analyzer

import (
	"math"
	"testing"
)

func seedScenario() Scenario {
	s := DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 8, 255, 255
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	return s
}

func h200fp8(t testing.TB) Target {
	return target(t, "H200", "fp8")
}

func TestBCritInterpolates(t *testing.T) {
	mk := func(x int64, ai float64) SweepPoint {
		return SweepPoint{X: x, Results: map[string]Result{"p": {Timing: Timing{AIHBM: ai}}}}
	}
	pts := []SweepPoint{mk(1, 10), mk(2, 20), mk(4, 40), mk(8, 80)}
	b, ok := BCrit(pts, "p", 30)
	if !ok || math.Abs(b-3) > 1e-9 {
		t.Fatalf("B_crit = %g, %v; AI ∝ B crosses 30 at B=3", b, ok)
	}
	if _, ok := BCrit(pts, "p", 100); ok {
		t.Fatal("no crossing expected")
	}
}

func TestDenseDecodeReachesBCrit(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	s := DefaultScenario()
	s.KVLen = 256
	tg := target(t, "H100-SXM", "bf16")
	pts, err := SweepDecodeBatch(m, s, tg, []ExecProfile{Naive}, []int64{64, 256, 1024, 2048, 4096, 8192})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := BCrit(pts, "naive", tg.Knee)
	if !ok || b < 2048 || b > 8192 { // asymptote ≈ 320 FLOP/B (KV + naive temporaries) vs the 295 ridge
		t.Fatalf("B_crit %g %v", b, ok)
	}
}

func TestSensitivityOfADenseModelDropsTopK(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	pts, err := Sensitivity(m, DefaultScenario(), h200fp8(t), []ExecProfile{Efficient}, GridProfiles["medium_full_grid"])
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2*3*3*4 {
		t.Fatalf("%d points", len(pts))
	}
	for _, r := range RankKnobs(pts, "efficient") {
		if r.Knob == "top-k experts" {
			t.Fatal("a dense model has no top-k knob")
		}
	}
}
