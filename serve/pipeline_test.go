package serve

import (
	"fmt"
	"math"
	"testing"

	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// Pipeline stages: each GPU holds 1/PP of the weights and its stage's layers of every token's
// KV (by hand), a cycle is never shorter than the micro-batch's own step through the whole
// model and only a little longer (the LM head on the last stage, the sends), the steady state
// keeps Little's law, and the roofline still bounds it.
func TestPipelineParallel(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	rp1 := replica(t, m, "H100", 1)
	rp2 := rp1
	rp2.Engine.PP, rp2.Engine.PPTier = 2, kernels.ScaleUp
	e := rp1.Engine
	weights := m.ParamsPerGPU(1, 1, 1, 1) // fp8: 1 byte each
	perTok := m.KVBytesPerToken(rp1.Scenario)
	testutil.Near(t, "PP2 KV tokens per GPU", KVTokens(m, rp2.Scenario, rp2.MemBytes, rp2.Engine),
		e.KVFraction*(rp2.MemBytes-weights/2-e.ReserveBytes)/(perTok/2), 1e-12)

	const isl, osl = 2000, 500
	r2, err := rp2.At(isl, osl, 64)
	if err != nil {
		t.Fatal(err)
	}
	if r2.GPUs != 2 || r2.Concurrency != 64 {
		t.Fatalf("PP2 replica: %d GPUs, %g sequences", r2.GPUs, r2.Concurrency)
	}
	micro, err := specStep(m, rp1.Scenario, rp1.Pred, e, 32, isl+osl/2, r2.PrefillTok/2, isl)
	if err != nil {
		t.Fatal(err)
	}
	// beyond the micro-batch's step: the LM head on the last stage, two sends and two hand-offs
	handOff := 2 * rp1.Pred.(*timing.Model).PipelineStepOverhead()
	if extra := r2.StepTime - micro.TEst - handOff; extra < 0 || extra > 0.2*micro.TEst {
		t.Errorf("PP2 cycle %.2f ms; the 32-sequence micro-batch's step alone %.2f ms, hand-offs %.2f ms", r2.StepTime*1e3, micro.TEst*1e3, handOff*1e3)
	}
	// Little: the sequences in flight = requests completed per second x the time each decodes
	decodeTime := float64(osl-1) * r2.TPOT
	testutil.Near(t, "PP2 concurrency", r2.OutputTokS/osl*decodeTime, r2.Concurrency, 1e-9)
	if r2.OutputTokS > r2.RooflineTokS {
		t.Errorf("PP2 %g tok/s beyond its roofline %g", r2.OutputTokS, r2.RooflineTokS)
	}
	// across nodes the sends are slower
	rpx := rp2
	rpx.Engine.PPTier = kernels.ScaleOut
	rx, err := rpx.At(isl, osl, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !(rx.StepTime > r2.StepTime) {
		t.Errorf("stages across nodes %.3f ms, inside a node %.3f ms", rx.StepTime*1e3, r2.StepTime*1e3)
	}
	if math.IsNaN(r2.TTFT) || r2.TTFT < micro.TEst {
		t.Errorf("PP2 TTFT %g", r2.TTFT)
	}
}

// Llama-3.1-405B in BF16 (810 GB) does not fit on one 8-GPU H100 node at any TP; on 16 GPUs
// the planner answers with pipeline stages over both nodes (offline, TP4 PP4 carries more
// tokens/s per GPU than TP8 PP2: less all-reduce per token).
func TestPlanPipelinesWhatDoesNotFitANode(t *testing.T) {
	m := model(t, "Llama-3.1-405B")
	s := fp8()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 2, 2, 2, "bf16"
	pl, err := PlanServe(m, []Target{targetAt(t, "H100", "bf16")}, PlanOptions{ISL: 2000, OSL: 500, GPUs: 8, Scenario: s})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Best) != 0 || pl.Fitting != 0 {
		t.Errorf("405B BF16 on 8 H100s: %d fit, best %+v", pl.Fitting, pl.Best)
	}
	pl, err = PlanServe(m, []Target{targetAt(t, "H100", "bf16")}, PlanOptions{ISL: 2000, OSL: 500, GPUs: 16, Scenario: s})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Best) == 0 {
		t.Fatalf("405B BF16 on 16 H100s: nothing: %s", pl.NoConfig)
	}
	b := pl.Best[0]
	if b.PP < 2 || b.TP*b.PP != 16 || b.GPUs != 16 || b.Layout() != fmt.Sprintf("TP%d PP%d", b.TP, b.PP) {
		t.Errorf("best on 16 GPUs: %s, %d GPUs", b.Layout(), b.GPUs)
	}
}
