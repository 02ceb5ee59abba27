package analyzer

import "github.com/mrep-dev/mrep/kernels"

// ExpertsShape is one MoE layer's routed experts as a kernel benchmark states it: Tokens enter
// the layer across the expert-parallel group (each routed to TopK of Experts, dealt
// round-robin: Scenario.BalancedRouting), the
// experts' gated FFN is Hidden -> 2 x Inter -> Hidden, each expert split TP ways and the
// experts spread over EP GPUs; the time is one GPU's.
type ExpertsShape struct {
	Tokens                       float64
	Hidden, Inter, Experts, TopK int64
	TP, EP                       int64
	// DType is the precision the GEMMs run at (their peak); WeightBytes and ActBytes per
	// element (a w4a16 kernel reads 4-bit weights into 16-bit math).
	DType                 string
	WeightBytes, ActBytes float64
}

// ExpertsKernels are the kernels a model's routed experts of that shape are timed as: the
// gate/up grouped GEMM, the gated activation over every assignment and the down grouped GEMM,
// costed as a decode or prefill step costs them (costOp under the achievable profile, one GPU),
// so a measured MoE layer and mrep's model of it compare like for like. The router and the
// token permutation around the experts are not among them: a serving engine's fused MoE op
// that includes them pays them as a per-layer cost of its lane (chips.Efficiency.MoEOverheadUs).
func ExpertsKernels(x ExpertsShape) []kernels.Kernel {
	fp := Fingerprint{Transformer: true, Hidden: x.Hidden, GatedMLP: true,
		MoE: &MoEInfo{RoutedExperts: x.Experts, TopK: x.TopK, ExpertFFN: x.Inter}}
	s := DefaultScenario()
	s.TP, s.EP = max(x.TP, 1), max(x.EP, 1)
	s.ComputeDType = x.DType
	s.WeightBytes, s.ActBytes = x.WeightBytes, x.ActBytes
	s.BalancedRouting = true
	// the analyzer's tokens are one attention group's; the EP group routes EP of them
	sh := stepShape{tokens: x.Tokens / float64(s.EP), queries: 1, batch: x.Tokens / float64(s.EP), decode: true}
	ops := []Op{
		{Name: "experts.gate_up_proj", Kind: OpExperts, Category: CatRoutedExperts, Experts: x.Experts,
			Numel: x.Experts * x.Hidden * 2 * x.Inter, In: x.Hidden, Out: 2 * x.Inter},
		actOp("experts", 0, x.Inter, true, CatRoutedExperts, true),
		{Name: "experts.down_proj", Kind: OpExperts, Category: CatRoutedExperts, Experts: x.Experts,
			Numel: x.Experts * x.Inter * x.Hidden, In: x.Inter, Out: x.Hidden},
	}
	var out []kernels.Kernel
	var c opCost
	for _, op := range ops {
		costOp(op, fp, Decode, sh, s, Achievable, &c)
		k := c.fwdK
		k.Graphed = true // a kernel benchmark times the GPU, not the host's launch
		out = append(out, k)
	}
	return out
}
