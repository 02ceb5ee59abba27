package report

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil/bundled"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/timing"
)

// The report's tables agree with each other: the KPI matrix, the sweeps at the anchor and the
// worked example are the same numbers.
func TestReportTablesAgree(t *testing.T) {
	d := bundled.Dump(t, "DeepSeek-V3")
	r, err := Build(d, analyzer.RunInfo{Name: "DeepSeek-V3"}, seedScenario(), []analyzer.Target{h200fp8(t)}, []analyzer.ExecProfile{analyzer.Naive, analyzer.Efficient}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sensitivity) != 432 {
		t.Fatalf("medium_full_grid has %d points, the seed's has 432", len(r.Sensitivity))
	}
	for _, p := range []string{"naive", "efficient"} {
		kpi, _ := r.Analysis.Find(r.Primary.Label(), analyzer.Decode, p)
		for _, pt := range r.DecodeSweep {
			if pt.X == 8 {
				within(t, "decode sweep at the anchor = KPI T_est "+p, pt.Results[p].Timing.TEst, kpi.Timing.TEst, 1e-12)
			}
		}
		pre, _ := r.Analysis.Find(r.Primary.Label(), analyzer.Prefill, p)
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

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g", what, got, want)
	}
}

// the seed example's anchor: DeepSeek-V3 on H200 FP8, 1-byte everything, B=8, S=L=255
func seedScenario() analyzer.Scenario {
	s := analyzer.DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 8, 255, 255
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	return s
}

func h200fp8(t testing.TB) analyzer.Target {
	t.Helper()
	c, err := chips.Default().Lookup("H200")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timing.New(c, "fp8")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := analyzer.NewTarget(c, "fp8", tm)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// The memory section is the memory model's: the training verdict of the scenario's own layout
// and the inference verdict agree with layout's functions to the byte.
func TestMemorySectionIsTheMemoryModels(t *testing.T) {
	d := bundled.Dump(t, "Llama-3.1-8B")
	m := analyzer.NewModel(d)
	s := analyzer.DefaultScenario()
	s.Batch, s.TP = 4, 2
	mem := MemoryOf(m, s, 80<<30)
	if mem.Training.Memory != layout.TrainingMemory(m, layout.ScenarioLayout(s)) || mem.Inference.Memory != layout.InferenceMemory(m, s, 1, 0) {
		t.Error("the report computes memory apart from the memory model")
	}
	if !mem.Inference.Fits || mem.Training.Memory.Optimizer+mem.Training.Memory.MasterWeights != 12*m.ParamsPerGPU(2, 1, 1, 0) {
		t.Errorf("8B at TP2: %s; %s", mem.Inference.Verdict(), mem.Training.Verdict())
	}
}
