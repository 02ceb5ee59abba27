package serve

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/internal/testutil"
)

// Each engine's acceptance probability reproduces the accept length its publication measured
// at every draft count it lists, and TensorRT-LLM's draft cost gives back its measured
// single-user speed-ups (tau / (1 + k x cost)) within 6%: one figure per engine, not per k.
func TestEngineMTPFiguresReproduceTheirSources(t *testing.T) {
	for _, name := range Engines {
		f := Figures(name)
		if len(f.MTPAcceptLen) == 0 || f.MTPSrc == "" || f.RequestPathSrc == "" || !(f.RequestPathUs > 0) {
			t.Errorf("%s: figures without a source: %+v", name, f)
		}
		for k, tau := range f.MTPAcceptLen {
			e := Engine{SpecTokens: k, SpecAccept: f.AcceptAt(k)}
			testutil.Near(t, name+" accept length", e.SpecTokensPerStep(), tau, 0.005)
		}
	}
	tr := Figures("trtllm")
	for k, s := range map[int]float64{1: 1.78, 2: 2.25, 3: 2.28, 4: 2.21, 5: 2.15} {
		pred := tr.MTPAcceptLen[k] / (1 + float64(k)*tr.MTPDraftCost)
		if math.Abs(pred/s-1) > 0.06 {
			t.Errorf("TensorRT-LLM MTP%d at one user: %.2fx from its figures, %.2fx measured", k, pred, s)
		}
	}
	// beyond the draft counts measured, the nearest one's probability
	if a, b := tr.AcceptAt(9), tr.AcceptAt(5); a != b {
		t.Errorf("9 drafts: %g, want 5 drafts' %g", a, b)
	}
	if Figures("").RequestPathUs != tr.RequestPathUs || Figures("tgi").AcceptAt(3) != 0 {
		t.Error("the default engine is TensorRT-LLM's; an unknown one has no figures")
	}
}

// The request path is in every TTFT a plan prints: the steady state's and the simulated
// requests' carry the engine's figure where the chip's lane fitted none, and the lane's where
// it did.
func TestRequestPathInTTFT(t *testing.T) {
	rp := simReplica(t)
	base := rp
	with := rp
	with.Engine.RequestPathUs = 50000
	a, err := base.At(1000, 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := with.At(1000, 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "steady-state TTFT", b.TTFT-a.TTFT, 0.05, 1e-9)
	load := Load{Kind: Users, N: 1, Requests: 3, Seed: 1, Lengths: []Request{{ISL: 1000, OSL: 200}}}
	sa, err := base.Simulate(load)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := with.Simulate(load)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "simulated TTFT", sb.TTFT.P50-sa.TTFT.P50, 0.05, 1e-6)
	for _, name := range Engines {
		e, err := EnginePreset(name, 80)
		if err != nil || e.RequestPathUs != Figures(name).RequestPathUs || e.MTP.MTPSrc != Figures(name).MTPSrc {
			t.Errorf("%s preset: request path %g, %v", name, e.RequestPathUs, err)
		}
	}
}
