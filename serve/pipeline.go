package serve

import (
	"math"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// A pipeline-parallel replica splits the layers over PP stages of TP GPUs each, as TensorRT-LLM
// and vLLM serve a model too large for one node: PP micro-batches of D/PP sequences are in
// flight, each stage runs one micro-batch per stage step, and after PP stage steps (a cycle)
// every sequence has advanced one token. The layers split evenly; the last stage also runs the
// LM head and the first the embedding, so the slowest stage sets the pace (Megatron-style
// uniform split; the engines do the same). Between stages each micro-batch's activations go
// point-to-point to the next stage, serialized with it (conservative: the engines overlap part
// of it with the next micro-batch).

// stages is the replica's pipeline depth (>= 1).
func (e Engine) stages() float64 { return math.Max(1, float64(e.PP)) }

// cycle times one engine cycle in which each of the d sequences advances one step (and the
// step's prefill tokens are processed): with PP = 1 one step; with PP > 1, PP stage steps of
// d/PP sequences each, the micro-batch's whole-model step spread over the stages:
// cycle = micro-step + (PP-1) x the embedding and LM head (every stage waits for the slowest)
// + PP x the send to the next stage.
func cycle(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, e Engine, d, ctx, prefill float64, isl int64) (kernels.Time, error) {
	pp := e.stages()
	if pp == 1 {
		return specStep(m, s, p, e, d, ctx, prefill, isl)
	}
	micro, err := specStep(m, s, p, e, d/pp, ctx, prefill/pp, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	ks, err := mixedKernels(m, s, d/pp, ctx, prefill/pp, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	var edge []kernels.Kernel
	for _, k := range ks {
		if k.Category == string(analyzer.CatEmbedding) || k.Category == string(analyzer.CatLMHead) {
			edge = append(edge, k)
		}
	}
	tokens := math.Max(d/pp, 0) + prefill/pp
	send := kernels.Kernel{Name: "pipeline send", Category: "pipeline", Kind: kernels.Collective, Count: 1, Coll: kernels.P2P,
		Tier: e.PPTier, Ranks: 2, Message: tokens * float64(m.Fingerprint.Hidden) * s.ActBytes, Exposed: 1, Graphed: true}
	t := micro.Add(noStepOverhead(p.Predict(edge)).Scale(pp - 1))
	t = t.Add(noStepOverhead(p.Predict([]kernels.Kernel{send})).Scale(pp))
	// each stage's micro-batch step pays the hand-off beyond its kernels, and the engine's
	// per-step overhead PP times a cycle where one step pays it once
	if ps, ok := p.(interface{ PipelineStepOverhead() float64 }); ok {
		h := ps.PipelineStepOverhead()*pp + micro.TOverhead*(pp-1)
		t.TEst += h
		t.TLatency += h
		t.TOverhead += h
	}
	return t, nil
}

// noStepOverhead is t without the per-step overhead a Predict call adds: a part of a step.
func noStepOverhead(t kernels.Time) kernels.Time {
	t.TEst -= t.TOverhead
	t.TLatency -= t.TOverhead
	t.TOverhead = 0
	return t
}
