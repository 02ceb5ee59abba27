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

// The report's tables agree with each other: the KPI matrix, the sweeps at the anchor and the
// worked example are the same numbers.
func TestReportTablesAgree(t *testing.T) {
	d := load(t, "DeepSeek-V3")
	r, err := BuildReport(d, RunInfo{Name: "DeepSeek-V3"}, seedScenario(), []Target{h200fp8(t)}, []ExecProfile{Naive, Efficient}, DefaultReportOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sensitivity) != 432 {
		t.Fatalf("medium_full_grid has %d points, the seed's has 432", len(r.Sensitivity))
	}
	for _, p := range []string{"naive", "efficient"} {
		kpi, _ := r.Analysis.Find(r.Primary.Label(), Decode, p)
		for _, pt := range r.DecodeSweep {
			if pt.X == 8 {
				within(t, "decode sweep at the anchor = KPI T_est "+p, pt.Results[p].Timing.TEst, kpi.Timing.TEst, 1e-12)
			}
		}
		pre, _ := r.Analysis.Find(r.Primary.Label(), Prefill, p)
		for _, pt := range r.PrefillSweep {
			if pt.X == 256 {
				// S=256 vs the anchor S=255: nearly the same step
				within(t, "prefill sweep near the anchor "+p, pt.Results[p].Timing.AIHBM, pre.Timing.AIHBM, 0.01)
			}
		}
	}
	w := r.Worked
	if w == nil || w.Step.Scenario.Batch != 128 || w.Step.Profile != "efficient" {
		t.Fatalf("worked example: %+v", w)
	}
	within(t, "worked AI_hbm", w.Timing.AIHBM, w.Step.Cost.FTheory/w.Step.Cost.BytesHBM(), 1e-12)
	within(t, "worked TF_est", w.Timing.TFEst, w.Step.Cost.FTheory/w.Timing.TEst/1e12, 1e-12)
	if _, ok := r.BCrit["efficient"]; ok {
		t.Error("DeepSeek-V3 decode at L=255 never reaches the fp8 ridge in B<=128 (the seed agrees)")
	}
	// OI_inf_hbm falls with L (the ~1/L trend)
	for i := 1; i < len(r.Exploration); i++ {
		a, b := r.Exploration[i-1], r.Exploration[i]
		if a.EP == b.EP && b.OIInfHBM >= a.OIInfHBM {
			t.Errorf("OI_inf_hbm does not fall with L: EP=%d L=%d %.1f -> L=%d %.1f", a.EP, a.L, a.OIInfHBM, b.L, b.OIInfHBM)
		}
	}
	if len(r.Ranks) != 5 || r.Ranks[0].Effect < r.Ranks[4].Effect {
		t.Errorf("knob ranking: %+v", r.Ranks)
	}
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
